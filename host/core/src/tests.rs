//! Engine tests: instructions on hand-made frames, verdict semantics, counters, trace, load-time
//! checks, and the differential property test of the vector pipeline against the per-packet walk.
//!
//! Rulesets are built as models by hand (the parser is written in parallel); frames are built
//! byte by byte and described by `wasp_wire::parse`. `meta_of`, a small walker for simple frames
//! (one VLAN tag popped, IPv4 validated, IPv6 without extension headers), builds metadata that a
//! test then edits by hand (e.g. the extension header bits).

use proptest::prelude::*;
use wasp_ruleset::model::*;
use wasp_wire::{L3Kind, L4Info, PacketMeta, VlanTag};

use crate::engine::*;
use crate::ext::*;
use crate::hooks::{At, HookResult};
use crate::packet::*;

/// Shorthands of the tests for [`Engine::run`]: the outcomes into `out` (the first
/// `out.len()` packets run), the call's result returned.
impl Engine {
    pub(crate) fn ingress(
        &mut self,
        dev: &str,
        packets: &[Packet<'_>],
        now_ns: u64,
        out: &mut [Outcome],
        trace: Option<&mut dyn TraceSink>,
    ) -> HookResult {
        self.call(At::Ingress(dev), packets, now_ns, out, trace, None)
    }

    pub(crate) fn ingress_ext(
        &mut self,
        dev: &str,
        packets: &[Packet<'_>],
        now_ns: u64,
        out: &mut [Outcome],
        trace: Option<&mut dyn TraceSink>,
        ext: &mut dyn Extensions,
    ) -> HookResult {
        self.call(At::Ingress(dev), packets, now_ns, out, trace, Some(ext))
    }

    pub(crate) fn ip_hook(
        &mut self,
        hook: Hook,
        packets: &[Packet<'_>],
        now_ns: u64,
        out: &mut [Outcome],
        trace: Option<&mut dyn TraceSink>,
    ) -> HookResult {
        self.call(At::Ip(hook), packets, now_ns, out, trace, None)
    }

    pub(crate) fn call(
        &mut self,
        at: At<'_>,
        packets: &[Packet<'_>],
        now_ns: u64,
        out: &mut [Outcome],
        trace: Option<&mut dyn TraceSink>,
        ext: Option<&mut dyn Extensions>,
    ) -> HookResult {
        let n = packets.len().min(out.len());
        let mut res = HookResult::new();
        self.run(at, &packets[..n], now_ns, &mut res, trace, ext);
        out[..n].copy_from_slice(&res.outcomes);
        res
    }

    /// [`Engine::ingress_one`] with its result returned beside the outcome.
    pub(crate) fn one(
        &mut self,
        dev: &str,
        packet: &Packet<'_>,
        index: usize,
        now_ns: u64,
        trace: Option<&mut dyn TraceSink>,
    ) -> (Outcome, HookResult) {
        let mut res = HookResult::new();
        let o = self.ingress_one(dev, packet, index, now_ns, &mut res, trace);
        (o, res)
    }
}

// ---------- plugins ----------

/// A deterministic stand-in for the plugin host: a site answers from a hash of the frame and
/// the site id, so that the answer does not depend on how packets are batched. A `Match` site
/// matches when the hash is odd; a statement gives continue, accept, drop or return by the
/// hash, and edits byte 0 of the packets whose hash is a multiple of 3.
#[derive(Debug, Default)]
struct Fake {
    /// (site, packets) per call.
    calls: Vec<(u32, usize)>,
    /// `advance` arguments.
    advanced: Vec<u64>,
    /// The packets of every call, as the engine described them.
    seen: Vec<(u32, ExtPacket<'static>, usize)>,
    /// Keep `seen` (frames are not kept: `frame` is left empty).
    record: bool,
    /// The counter plugin's sites and counts, when the engine's counters are to count.
    counts: Option<Counts>,
}

/// (site, elem) -> (packets, bytes).
type CountMap = std::collections::BTreeMap<(u32, u32), (u64, u64)>;

/// The counter plugin in plain Rust, as `plugins/counter` counts (packets and the header's
/// `len` per site and element, initial counts from the site's arguments), shared between the
/// [`Fake`] installed in an engine and the test that reads the counts.
#[derive(Debug, Clone, Default)]
struct Counts {
    /// Per site: a counter site of the engine.
    sites: std::sync::Arc<Vec<bool>>,
    /// (site, elem) -> (packets, bytes).
    map: std::sync::Arc<std::sync::Mutex<CountMap>>,
}

impl Counts {
    /// The counter sites of `e` with the initial counts their arguments give.
    fn of(e: &Engine) -> Counts {
        let mut map = std::collections::BTreeMap::new();
        let mut sites = Vec::new();
        for s in e.ext_sites() {
            let counter = e.counter_uses().any(|(id, _)| id == s.id);
            sites.push(counter);
            if !counter {
                continue;
            }
            let mut elem = 0;
            map.insert((s.id, 0), (0, 0));
            for kv in s.args.chunks(2) {
                let n: u64 = kv[1].parse().unwrap_or(0);
                match kv[0].as_str() {
                    "elem" => elem = n as u32,
                    "packets" => map.entry((s.id, elem)).or_insert((0, 0)).0 = n,
                    "bytes" => map.entry((s.id, elem)).or_insert((0, 0)).1 = n,
                    _ => {}
                }
            }
        }
        Counts {
            sites: std::sync::Arc::new(sites),
            map: std::sync::Arc::new(std::sync::Mutex::new(map)),
        }
    }

    fn is_counter(&self, site: u32) -> bool {
        self.sites.get(site as usize).copied().unwrap_or(false)
    }
}

impl CounterSource for Counts {
    fn counts(&mut self, site: u32) -> Vec<(u32, u64, u64)> {
        let map = self.map.lock().unwrap();
        map.range((site, 0)..=(site, u32::MAX))
            .map(|(&(_, e), &(p, b))| (e, p, b))
            .collect()
    }

    fn reset(&mut self, site: u32) {
        let mut map = self.map.lock().unwrap();
        map.retain(|&(s, _), _| s != site);
        map.insert((site, 0), (0, 0));
    }
}

/// Install a [`Fake`] that counts the engine's counters into `e`, and return the counts.
fn count(e: &mut Engine) -> Counts {
    let c = Counts::of(e);
    e.set_ext(
        Box::new(Fake {
            counts: Some(c.clone()),
            ..Fake::default()
        }),
        &[],
    );
    c
}

/// `p` without its frame.
fn no_frame(p: &ExtPacket<'_>) -> ExtPacket<'static> {
    ExtPacket {
        frame: &[],
        len: p.len,
        iif: p.iif,
        mark: p.mark,
        elem: p.elem,
        l3: p.l3,
        l4: p.l4,
        l4proto: p.l4proto,
        nfproto: p.nfproto,
        iftype: p.iftype,
    }
}

fn fake_hash(frame: &[u8], site: u32) -> u32 {
    frame
        .iter()
        .fold(site.wrapping_mul(2_654_435_761), |a, &b| {
            a.rotate_left(5) ^ u32::from(b).wrapping_mul(0x9e37_79b9)
        })
        .wrapping_mul(0x85eb_ca6b)
        >> 7
}

impl Extensions for Fake {
    fn matches(&mut self, site: u32, pkts: &[ExtPacket<'_>], out: &mut [bool]) {
        assert_eq!(pkts.len(), out.len());
        assert!(!pkts.is_empty() && pkts.len() <= MAX_VECTOR);
        self.calls.push((site, pkts.len()));
        for (p, o) in pkts.iter().zip(out.iter_mut()) {
            if self.record {
                self.seen.push((site, no_frame(p), p.frame.len()));
            }
            *o = fake_hash(p.frame, site) & 1 == 1;
        }
    }

    fn apply(
        &mut self,
        site: u32,
        pkts: &[ExtPacket<'_>],
        verdicts: &mut [ExtVerdict],
        edits: &mut Vec<(usize, ExtEdit)>,
    ) {
        assert_eq!(pkts.len(), verdicts.len());
        assert!(!pkts.is_empty() && pkts.len() <= MAX_VECTOR);
        if let Some(c) = self.counts.as_ref().filter(|c| c.is_counter(site)) {
            let mut map = c.map.lock().unwrap();
            for (p, v) in pkts.iter().zip(verdicts.iter_mut()) {
                let e = map.entry((site, p.elem)).or_insert((0, 0));
                e.0 += 1;
                e.1 += u64::from(p.len);
                *v = ExtVerdict::Continue;
            }
            return;
        }
        self.calls.push((site, pkts.len()));
        for (k, (p, v)) in pkts.iter().zip(verdicts.iter_mut()).enumerate() {
            if self.record {
                self.seen.push((site, no_frame(p), p.frame.len()));
            }
            let h = fake_hash(p.frame, site);
            *v = match h % 6 {
                0..=2 => ExtVerdict::Continue,
                3 => ExtVerdict::Accept,
                4 => ExtVerdict::Drop,
                _ => ExtVerdict::Return,
            };
            if h.is_multiple_of(3) {
                edits.push((
                    k,
                    ExtEdit::Set {
                        offset: 0,
                        data: vec![site as u8],
                    },
                ));
            }
        }
    }

    fn advance(&mut self, now_ns: u64) {
        self.advanced.push(now_ns);
    }
}

/// `Stmt::Plugin` of `name` with one argument.
fn plugin_use(name: &str, arg: &str, fallback_drop: bool) -> Stmt {
    Stmt::Plugin(PluginUse {
        name: name.into(),
        args: vec![arg.into()],
        fallback_drop,
        span: Span::default(),
    })
}

/// `plugin NAME` declarations.
fn plugins(names: &[&str]) -> Vec<PluginDecl> {
    names
        .iter()
        .map(|n| PluginDecl {
            name: (*n).into(),
            path: None,
            span: Span::default(),
        })
        .collect()
}

/// Site kinds by plugin name: `m` is a match, the engine's counters stateful, every other a
/// statement.
fn kinds_of(e: &Engine) -> Vec<ExtKind> {
    e.ext_sites()
        .iter()
        .map(|s| {
            if s.kind == ExtKind::Stateful {
                ExtKind::Stateful
            } else if s.plugin == "m" {
                ExtKind::Match
            } else {
                ExtKind::Statement
            }
        })
        .collect()
}

// ---------- frames ----------

const MAC_D: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
const MAC_S: [u8; 6] = [0x02, 0, 0, 0, 0, 2];

fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&MAC_D);
    f.extend_from_slice(&MAC_S);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// Insert an 802.1Q-style tag (`tpid`, `tci`) right after the MAC addresses.
fn tag(frame: &[u8], tpid: u16, tci: u16) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&tpid.to_be_bytes());
    f.extend_from_slice(&tci.to_be_bytes());
    f.extend_from_slice(&frame[12..]);
    f
}

fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], frag: u16, l4: &[u8]) -> Vec<u8> {
    let tot = (20 + l4.len()) as u16;
    let mut h = vec![0x45, 0x20, 0, 0, 0x12, 0x34, 0, 0, 64, proto, 0, 0];
    h[2..4].copy_from_slice(&tot.to_be_bytes());
    h[6..8].copy_from_slice(&frag.to_be_bytes());
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(l4);
    eth(0x0800, &h)
}

fn ipv6(nexthdr: u8, src_last: u8, l4: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 5, 0, 0, nexthdr, 64];
    h[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
    let mut s = [0u8; 16];
    s[0] = 0x20;
    s[1] = 0x01;
    s[15] = src_last;
    h.extend_from_slice(&s);
    let mut d = [0u8; 16];
    d[15] = 1;
    h.extend_from_slice(&d);
    h.extend_from_slice(l4);
    eth(0x86dd, &h)
}

fn tcp(sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[12] = 0x50;
    t[13] = flags;
    t
}

fn udp(sport: u16, dport: u16) -> Vec<u8> {
    let mut t = vec![0u8; 8];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[4..6].copy_from_slice(&8u16.to_be_bytes());
    t
}

/// The kernel's view of a simple frame (test stand-in for `wasp_wire::parse`).
fn meta_of(f: &[u8]) -> PacketMeta {
    let mut m = PacketMeta {
        len: f.len() as u32,
        ..PacketMeta::default()
    };
    if f.len() < 14 {
        return m;
    }
    let be = |o: usize| u16::from_be_bytes([f[o], f[o + 1]]);
    let mut off = 12;
    while matches!(be(off), 0x8100 | 0x88a8) && f.len() >= off + 6 && (m.vlan_count as usize) < 4 {
        m.vlans[m.vlan_count as usize] = VlanTag {
            offset: off as u16,
            tpid: be(off),
            tci: be(off + 2),
        };
        m.vlan_count += 1;
        off += 4;
    }
    m.inner_ethertype = be(off);
    m.inner_l3_offset = off as u16 + 2;
    let (proto, net): (u16, usize) = if m.vlan_count > 0 {
        (be(16), 18)
    } else {
        (be(12), 14)
    };
    m.protocol = proto;
    m.net_offset = net as u16;
    let n = &f[net.min(f.len())..];
    match proto {
        0x0800 => {
            m.l3 = L3Kind::Ipv4;
            if n.len() >= 20 && n[0] >> 4 == 4 && n[0] & 15 >= 5 {
                let ihl = usize::from(n[0] & 15) * 4;
                let tot = usize::from(u16::from_be_bytes([n[2], n[3]]));
                if tot <= n.len() && tot >= ihl {
                    m.l4 = Some(L4Info {
                        proto: n[9],
                        offset: (net + ihl) as u16,
                        fragoff: (u16::from_be_bytes([n[6], n[7]]) & 0x1fff) * 8,
                    });
                }
            }
        }
        0x86dd => {
            m.l3 = L3Kind::Ipv6;
            if n.len() >= 40
                && n[0] >> 4 == 6
                && usize::from(u16::from_be_bytes([n[4], n[5]])) + 40 <= n.len()
            {
                m.l4 = Some(L4Info {
                    proto: n[6],
                    offset: (net + 40) as u16,
                    fragoff: 0,
                });
            }
        }
        _ => {}
    }
    m
}

fn pkt(f: &[u8]) -> Packet<'_> {
    Packet {
        frame: f,
        meta: wasp_wire::parse(f),
        iifname: "eth0",
        mark: 0,
        oifname: "",
        ct: crate::CtMeta::NONE,
        ct_detail: None,
        nftrace: false,
        route: None,
    }
}

// ---------- models ----------

fn val(dtype: DataType, bytes: &[u8]) -> Value {
    Value {
        dtype,
        bytes: bytes.to_vec().into(),
        wildcard: false,
    }
}
fn v4(a: [u8; 4]) -> Value {
    val(DataType::Ipv4Addr, &a)
}
fn port(p: u16) -> Value {
    val(DataType::InetService, &p.to_be_bytes())
}
fn byte(dtype: DataType, b: u8) -> Value {
    val(dtype, &[b])
}
fn ifname(name: &str, wildcard: bool) -> Value {
    let mut b = [0u8; 16];
    b[..name.len()].copy_from_slice(name.as_bytes());
    Value {
        dtype: DataType::Ifname,
        bytes: b.to_vec().into(),
        wildcard,
    }
}

fn pf(f: PayloadField) -> Expr {
    Expr::Payload(f)
}
fn mt(op: RelOp, left: Expr, v: Value) -> Stmt {
    Stmt::Match(Match {
        left,
        op,
        right: Rhs::Key(vec![KeyPart::Value(v)]),
        span: Span::default(),
        implied: false,
    })
}
fn eq(left: Expr, v: Value) -> Stmt {
    mt(RelOp::Eq, left, v)
}
fn mpart(op: RelOp, left: Expr, parts: Vec<KeyPart>) -> Stmt {
    Stmt::Match(Match {
        left,
        op,
        right: Rhs::Key(parts),
        span: Span::default(),
        implied: false,
    })
}
fn in_set(op: RelOp, left: Expr, s: SetRef) -> Stmt {
    Stmt::Match(Match {
        left,
        op,
        right: Rhs::Set(s),
        span: Span::default(),
        implied: false,
    })
}
fn elem(key: Vec<KeyPart>, data: Option<ElemData>) -> SetElem {
    SetElem {
        data,
        ..SetElem::new(key, Span::default())
    }
}
fn kv(v: Value) -> KeyPart {
    KeyPart::Value(v)
}
fn accept() -> Stmt {
    Stmt::Verdict(Verdict::Accept)
}
fn drop_() -> Stmt {
    Stmt::Verdict(Verdict::Drop)
}
fn jump(c: &str) -> Stmt {
    Stmt::Verdict(Verdict::Jump(c.into()))
}
fn goto(c: &str) -> Stmt {
    Stmt::Verdict(Verdict::Goto(c.into()))
}
fn counter() -> Stmt {
    Stmt::Counter {
        packets: 0,
        bytes: 0,
    }
}
fn set_mark(m: u32) -> Stmt {
    Stmt::MetaSet {
        key: MetaKey::Mark,
        value: Expr::Const(val(DataType::Mark, &m.to_be_bytes())),
        span: Span::default(),
    }
}

fn rule(stmts: Vec<Stmt>) -> Rule {
    Rule {
        handle: 0,
        stmts,
        comment: None,
        span: Span::default(),
    }
}

fn chain(name: &str, base: Option<(i32, Policy)>, rules: Vec<Rule>) -> Chain {
    Chain {
        name: name.into(),
        handle: 0,
        base: base.map(|(priority, policy)| BaseChain {
            chain_type: ChainType::Filter,
            hook: Hook::Ingress,
            devices: vec!["eth0".into()],
            priority,
            policy,
        }),
        rules,
        comment: None,
        span: Span::default(),
    }
}

fn table(family: Family, name: &str, chains: Vec<Chain>, sets: Vec<SetDecl>) -> Table {
    Table {
        next_handle: 0,
        family,
        name: name.into(),
        handle: 0,
        chains,
        sets,
        plugins: Vec::new(),
        counters: Vec::new(),
        quotas: Vec::new(),
        limits: Vec::new(),
        ct_objects: Vec::new(),
        flowtables: Vec::new(),
        comment: None,
        span: Span::default(),
    }
}

/// A ruleset with kernel-style handles: per table, a counter shared by chains, sets and rules
/// (sets first here, then each chain followed by its rules).
fn ruleset(mut tables: Vec<Table>) -> Ruleset {
    for (i, t) in tables.iter_mut().enumerate() {
        t.handle = i as u64 + 1;
        let mut h = 0;
        for s in &mut t.sets {
            h += 1;
            s.handle = h;
        }
        for c in &mut t.chains {
            h += 1;
            c.handle = h;
            for r in &mut c.rules {
                h += 1;
                r.handle = h;
            }
        }
    }
    Ruleset {
        table_handle: 0,
        tables,
        sources: vec![],
    }
}

/// One base chain (`netdev t c`, policy given) holding `rules`.
fn one(policy: Policy, rules: Vec<Vec<Stmt>>) -> Engine {
    let rs = ruleset(vec![table(
        Family::Netdev,
        "t",
        vec![chain(
            "c",
            Some((0, policy)),
            rules.into_iter().map(rule).collect(),
        )],
        vec![],
    )]);
    Engine::compile(&rs).expect("compiles")
}

fn run(e: &mut Engine, frames: &[Vec<u8>]) -> Vec<Outcome> {
    run_at(e, frames, 0)
}

/// The outcomes of `frames` received on `eth0` at `now_ns` (one vector).
fn run_at(e: &mut Engine, frames: &[Vec<u8>], now_ns: u64) -> Vec<Outcome> {
    let pk: Vec<Packet<'_>> = frames.iter().map(|f| pkt(f)).collect();
    let mut out = vec![Outcome::unseen(0); pk.len()];
    e.ingress("eth0", &pk, now_ns, &mut out, None);
    out
}

/// Verdicts of `frames` under a single rule `stmts; accept` in a chain with policy drop.
fn accepts(stmts: Vec<Stmt>, frames: &[Vec<u8>]) -> Vec<bool> {
    let mut s = stmts;
    s.push(accept());
    let mut e = one(Policy::Drop, vec![s]);
    run(&mut e, frames)
        .iter()
        .map(|o| o.verdict == FinalVerdict::Accept)
        .collect()
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;

mod counters;
mod differential;
mod ext;
mod fwd;
mod instructions;
mod keys;
mod reject;
mod semantics;
mod sets;
mod stateful;
mod steal;
