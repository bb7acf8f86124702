//! Conntrack and the ruleset's flowtables for the IP path ([`super::ip_path`]), and what the
//! IP hooks' rules ask of a connection: `ct mark set`, the NAT bindings, `flow add`.
//!
//! Conntrack and the flowtables are shared by every worker ([`Netfilter`] holds them): NAT
//! changes the reply tuple, so a reply may land on another worker than its request. Their
//! expiry runs from the packet path: at most once per [`GC_INTERVAL_NS`] of the packets'
//! clock, the first worker past the deadline collects idle flows (giving their connections
//! back) and expired connections.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use wasp_conntrack::{Conntrack, CtInfo, Manip, NatRange, Teardown as CtTeardown};
use wasp_flowtable::{
    FlowKey, FlowSpec, Flowtable, FlowtableConfig, NatEdit, Route, TeardownReason, TunnelWork,
};
use wasp_ruleset::model::NatKind;

use super::{DevId, Gateway};
use crate::DropReason;
use wasp_core::Engine;
use wasp_core::conn::{ConnCount, ConnFx, CtDetail, CtMeta, CtTuple, FlowtableSpec};

/// How often (ns of the packets' clock) idle flows and expired connections are collected.
pub const GC_INTERVAL_NS: u64 = 1_000_000_000;

/// Connections looked at per collection pass (the rest wait for the next pass).
const GC_SLOTS: usize = 65_536;

/// The timeout an offloaded connection keeps while its flow lives (the kernel's
/// nf_ct_offload_timeout: one day, refreshed by the flowtable's GC).
const OFFLOAD_CT_TIMEOUT_NS: u64 = 86_400 * 1_000_000_000;

/// Conntrack and the ruleset's flowtables, shared by every worker (cheap to clone).
#[derive(Clone)]
pub struct Netfilter(Arc<Shared>);

struct Shared {
    conntrack: Arc<Conntrack>,
    /// Parallel to [`Engine::flowtables`].
    flowtables: Vec<Arc<Flowtable>>,
    /// Device names of each flowtable (parallel to `flowtables`).
    devices: Vec<Vec<String>>,
    /// The priority of each flowtable's ingress hook (parallel to `flowtables`).
    priorities: Vec<i32>,
    /// Clock of the next collection, ns.
    next_gc: AtomicU64,
}

impl std::fmt::Debug for Netfilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Netfilter")
            .field("connections", &self.0.conntrack.len())
            .field("flowtables", &self.0.flowtables.len())
            .finish()
    }
}

impl Netfilter {
    /// Conntrack and the flowtables of `specs` (an engine's [`Engine::flowtables`]): a
    /// flowtable of `keep` with the same name is kept with its flows (a ruleset reload keeps
    /// the flows of the flowtables it still declares; flowtables are named without their table
    /// here, so two tables' flowtables of one name share one), others are made with
    /// [`FlowtableConfig`]'s defaults.
    ///
    /// `events`, when given, receives a line per flow added to or removed from a new
    /// flowtable (`flow add ft tcp 10.1.0.2:40000 > 10.2.0.2:80 ...`, for `wasp ctl monitor`).
    pub fn new(
        conntrack: Arc<Conntrack>,
        specs: &[FlowtableSpec],
        keep: Option<&Netfilter>,
        events: Option<Arc<dyn Fn(String) + Send + Sync>>,
    ) -> Netfilter {
        let flowtables = specs
            .iter()
            .map(|s| {
                let old =
                    keep.and_then(|k| k.0.flowtables.iter().find(|f| f.config().name == s.name));
                match old {
                    Some(f) => f.clone(),
                    None => {
                        let ft = Flowtable::new(FlowtableConfig {
                            name: s.name.clone(),
                            counter: s.counter,
                            ..FlowtableConfig::default()
                        });
                        Arc::new(match events.clone() {
                            Some(f) => ft.with_event_sink(Box::new(move |e| f(event_text(e)))),
                            None => ft,
                        })
                    }
                }
            })
            .collect();
        Netfilter::with_flowtables(
            conntrack,
            flowtables,
            specs
                .iter()
                .map(|s| (s.devices.clone(), s.priority))
                .collect(),
        )
    }

    /// Conntrack and flowtables made by the caller (`flowtables[i]` serves the engine's
    /// flowtable `i`, its hook on the devices `hooks[i].0` at priority `hooks[i].1`).
    pub fn with_flowtables(
        conntrack: Arc<Conntrack>,
        flowtables: Vec<Arc<Flowtable>>,
        hooks: Vec<(Vec<String>, i32)>,
    ) -> Netfilter {
        let (devices, priorities) = hooks.into_iter().unzip();
        Netfilter(Arc::new(Shared {
            conntrack,
            flowtables,
            devices,
            priorities,
            next_gc: AtomicU64::new(0),
        }))
    }

    /// The connection table.
    pub fn conntrack(&self) -> &Arc<Conntrack> {
        &self.0.conntrack
    }

    /// The flowtables, parallel to [`Engine::flowtables`].
    pub fn flowtables(&self) -> &[Arc<Flowtable>] {
        &self.0.flowtables
    }

    /// Device names of each flowtable, parallel to [`Netfilter::flowtables`].
    pub(crate) fn devices(&self) -> &[Vec<String>] {
        &self.0.devices
    }

    /// The priority of the flowtables' ingress hook on `dev`: the lowest of the flowtables
    /// that list it (the lookup runs there for all of them); `None` when none does.
    pub fn flow_hook(&self, dev: &str) -> Option<i32> {
        self.0
            .devices
            .iter()
            .zip(&self.0.priorities)
            .filter(|(d, _)| d.iter().any(|d| d == dev))
            .map(|(_, &p)| p)
            .min()
    }

    /// Register offload block `b` on every flowtable that does not have a block of its name
    /// yet (the kernel's flow block callbacks: it is told of the flows added from now on).
    pub fn register_block(&self, b: &Arc<dyn wasp_flowtable::OffloadBlock>) {
        for ft in &self.0.flowtables {
            if !ft.blocks().iter().any(|n| n == b.name()) {
                let _ = ft.register_block(b.clone());
            }
        }
    }

    /// The `ct count` lists, for [`Engine::set_conn_count`].
    pub fn conn_count(&self) -> Arc<dyn ConnCount> {
        Arc::new(CtCounts(self.0.conntrack.clone()))
    }

    /// Collect now: idle flows leave their flowtables (their connections get the teardown
    /// state and timeout of cases C19), flows whose connection is gone are torn down, the
    /// connections of live flows keep the offload timeout, and expired connections leave the
    /// table. Returns (flows removed, connections removed).
    pub fn gc(&self, now_ns: u64) -> (usize, usize) {
        let ct = &self.0.conntrack;
        let mut flows = 0;
        for ft in &self.0.flowtables {
            for t in ft.gc(now_ns) {
                ct.flow_teardown(t.ct_id, ct_teardown(t.reason), now_ns);
                flows += 1;
            }
            for f in ft.flows(now_ns) {
                if ct.is_alive(f.ct_id, now_ns) {
                    ct.set_timeout(f.ct_id, OFFLOAD_CT_TIMEOUT_NS, now_ns);
                } else if ft.teardown(f.id, TeardownReason::Dying, now_ns).is_some() {
                    flows += 1;
                }
            }
        }
        (flows, ct.gc(now_ns, GC_SLOTS))
    }

    /// Delete the connections `pick` selects (`conntrack -D`/`-F`,
    /// [`Conntrack::kill_where`]) and, at once, the flowtable entries of those connections:
    /// an offloaded flow whose connection is deleted leaves the fast path now (not at the next
    /// collection), so its next packet takes the chains and is tracked anew. Returns how many
    /// connections were deleted.
    pub fn delete_conns(
        &self,
        now_ns: u64,
        pick: impl Fn(&wasp_conntrack::EntryInfo) -> bool,
    ) -> usize {
        let killed: std::collections::HashSet<u64> = self
            .0
            .conntrack
            .kill_where(now_ns, pick)
            .into_iter()
            .collect();
        if !killed.is_empty() {
            for ft in &self.0.flowtables {
                for f in ft.flows(now_ns) {
                    if killed.contains(&f.ct_id) {
                        ft.teardown(f.id, TeardownReason::Dying, now_ns);
                    }
                }
            }
        }
        killed.len()
    }

    /// [`Netfilter::gc`] when the packets' clock passed the next collection time (one worker
    /// wins each round).
    pub(crate) fn maybe_gc(&self, now_ns: u64) {
        let due = self.0.next_gc.load(Ordering::Relaxed);
        if now_ns < due {
            return;
        }
        let next = now_ns.saturating_add(GC_INTERVAL_NS);
        if self
            .0
            .next_gc
            .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
            && due != 0
        {
            self.gc(now_ns);
        }
    }
}

/// A flow event as `wasp ctl monitor` prints it: `flow add ft tcp 10.1.0.2:40000 >
/// 10.2.0.2:80 reply 10.2.0.2:80 > 10.2.0.1:40000`, `flow del ft (fin) ...`; a direction that
/// arrives through a Geneve tunnel says so after its destination (`> 10.30.0.2:22 vni 11`).
pub fn event_text(e: &wasp_flowtable::FlowEvent) -> String {
    let key = |k: &FlowKey| {
        let proto = match k.l4proto {
            wasp_flowtable::TCP => "tcp".to_string(),
            wasp_flowtable::UDP => "udp".to_string(),
            p => p.to_string(),
        };
        let ep = |a: std::net::IpAddr, p: u16| match a {
            std::net::IpAddr::V6(_) => format!("[{a}]:{p}"),
            std::net::IpAddr::V4(_) => format!("{a}:{p}"),
        };
        let dst = ep(k.dst, k.dst_port);
        let dst = match k.tun_id {
            Some(vni) => format!("{dst} vni {vni}"),
            None => dst,
        };
        (proto, ep(k.src, k.src_port), dst)
    };
    let (proto, s0, d0) = key(&e.keys[0]);
    let (_, s1, d1) = key(&e.keys[1]);
    let what = match e.kind {
        wasp_flowtable::FlowEventKind::Add => "add".to_string(),
        wasp_flowtable::FlowEventKind::Del(r) => format!("del ({})", r.name()),
    };
    format!(
        "flow {what} {} {proto} {s0} > {d0} reply {s1} > {d1}",
        e.table
    )
}

/// The flows of `ft` as `wasp ctl list flowtable NAME` prints them: a header line, then one
/// line per flow: id, both directions, age and idle time (s), counters when the flowtable has
/// `counter`, where it is forwarded (software, pending or offloaded to a block).
pub fn flows_text(ft: &Flowtable, now_ns: u64) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let flows = ft.flows(now_ns);
    let _ = writeln!(s, "flowtable {} ({} flows)", ft.config().name, flows.len());
    for f in flows {
        let e = wasp_flowtable::FlowEvent {
            kind: wasp_flowtable::FlowEventKind::Add,
            table: String::new(),
            id: f.id,
            ct_id: f.ct_id,
            keys: f.keys,
        };
        let text = event_text(&e);
        let ends = text.trim_start_matches("flow add  ");
        let _ = write!(
            s,
            "  flow {} {ends} age {:.1}s idle {:.1}s",
            f.id.0,
            f.age_ns as f64 / 1e9,
            f.idle_ns as f64 / 1e9
        );
        if let Some(c) = f.counters {
            let _ = write!(
                s,
                " packets {}/{} bytes {}/{}",
                c.packets[0], c.packets[1], c.bytes[0], c.bytes[1]
            );
        }
        let _ = match &f.offload {
            wasp_flowtable::OffloadState::Software => writeln!(s, " software"),
            wasp_flowtable::OffloadState::Pending {
                block,
                active_at_ns,
            } => writeln!(
                s,
                " pending {block} in {:.3}s",
                active_at_ns.saturating_sub(now_ns) as f64 / 1e9
            ),
            wasp_flowtable::OffloadState::Offloaded { block } => writeln!(s, " offloaded {block}"),
        };
    }
    s
}

/// What conntrack does when a flow leaves for `r` (cases C19).
fn ct_teardown(r: TeardownReason) -> CtTeardown {
    match r {
        TeardownReason::Fin => CtTeardown::Fin,
        TeardownReason::Rst => CtTeardown::Rst,
        _ => CtTeardown::Idle,
    }
}

/// `ct count` over the conntrack table's lists.
struct CtCounts(Arc<Conntrack>);

impl std::fmt::Debug for CtCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CtCounts")
    }
}

impl ConnCount for CtCounts {
    fn add_and_count(&self, site: u32, id: u64, now_ns: u64) -> u32 {
        self.0.count_add(site, id, now_ns)
    }
}

/// What the chains see of a packet's connection.
pub(crate) fn ct_meta(ct: &CtInfo, nat_pending: bool) -> CtMeta {
    CtMeta {
        state: ct.state,
        dir: ct.dir as u8,
        status: ct.status,
        mark: ct.mark,
        id: ct.id,
        nat_pending,
    }
}

/// What the `ct` keys beyond state and mark read of a live entry (the kernel's
/// `nft_ct_get_eval`: tuples, `ct expiration` in ms, accounting, zone).
pub(crate) fn ct_detail(e: &wasp_conntrack::EntryInfo) -> CtDetail {
    let tuple = |t: &wasp_conntrack::Tuple| {
        let bytes = |a: std::net::IpAddr| {
            let mut b = [0u8; 16];
            match a {
                std::net::IpAddr::V4(v) => b[..4].copy_from_slice(&v.octets()),
                std::net::IpAddr::V6(v) => b.copy_from_slice(&v.octets()),
            }
            b
        };
        CtTuple {
            src: bytes(t.src),
            dst: bytes(t.dst),
            sport: t.sport,
            dport: t.dport,
        }
    };
    CtDetail {
        l3proto: if e.orig.src.is_ipv6() { 10 } else { 2 },
        protocol: e.orig.proto,
        orig: tuple(&e.orig),
        reply: tuple(&e.reply),
        expires_ms: u32::try_from(e.timeout_ns / 1_000_000).unwrap_or(u32::MAX),
        packets: e.packets,
        bytes: e.bytes,
        zone: e.orig.zone,
        label: e.label,
    }
}

/// What became of a packet on the IP path.
pub(crate) enum IpFate {
    /// Send on `dev` (device id of the gateway) the frame `body`.
    Send {
        /// Output device.
        dev: DevId,
        /// The frame.
        body: super::path::Body,
        /// The packet's `meta mark` after the hooks.
        mark: u32,
        /// A flowtable forwarded it.
        offloaded: bool,
    },
    /// Delivered to the host side.
    Local,
    /// Dropped by a chain ([`DropReason::Verdict`]) or by conntrack ([`DropReason::Conntrack`]:
    /// table full, or a clash on confirm).
    Dropped(DropReason),
    /// Not for the IP path (not IPv4/IPv6): the caller routes it as before.
    NotIp,
    /// Dropped by a chain's `reject`: its reply to send out of the input device, if one is
    /// sent ([`super::reject`]).
    Rejected {
        /// The reply frame.
        reply: Option<Vec<u8>>,
    },
    /// The gateway answered it, dropped it or cannot send it yet (time exceeded,
    /// unreachable, no neighbour, ARP/ND answers): what it decided.
    Routed(super::path::Routed),
}

/// What a hook's drop of a packet gives: with `reject` `r`, its reply about the packet as the
/// hook saw it (`at_hook`), routed to the sender of `frame` (the frame as it came in on
/// `input`); `local`: the input hook. Without, a plain drop.
pub(crate) fn rejected(
    g: &Gateway,
    r: Option<wasp_core::Reject>,
    input: DevId,
    frame: &[u8],
    at_hook: &[u8],
    local: bool,
) -> IpFate {
    let Some(r) = r else {
        return IpFate::Dropped(DropReason::Verdict);
    };
    let net = usize::from(wasp_wire::parse(at_hook).net_offset);
    let from = wasp_wire::ethernet::Frame::new_checked(frame)
        .ok()
        .map(|e| e.src());
    let mut out = Vec::new();
    let made = match (at_hook.get(net..), from) {
        (Some(ip), Some(from)) => g.reject_reply(r.kind, input, from, ip, false, local, &mut out),
        _ => false,
    };
    IpFate::Rejected {
        reply: made.then_some(out),
    }
}

/// Apply what the last hook's rules asked of the packet's connection: `ct mark set`, and for a
/// new connection the NAT binding of `manip` (from a NAT statement; a null binding when the
/// ruleset has nat chains and none bound it). `in_dev` / `out_dev` give `redirect` and
/// `masquerade` their address. Returns the flowtable index of a `flow add`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn apply_fx(
    engine: &Engine,
    fx: ConnFx,
    ct: &Conntrack,
    g: &Gateway,
    info: &CtInfo,
    manip: Manip,
    in_dev: Option<DevId>,
    out_dev: Option<DevId>,
    null_binding: bool,
) -> Option<u16> {
    let mut bound = false;
    {
        if let Some(m) = fx.mark {
            ct.set_mark(info.id, m);
        }
        if let Some(l) = fx.label {
            ct.add_labels(info.id, l);
        }
        if let Some(e) = fx.event {
            ct.set_events(info.id, e);
        }
        if let Some(i) = fx.nat
            && let Some(spec) = engine.nat_specs().get(usize::from(i))
            && info.pending
        {
            let entry = ct.get(info.id, u64::MAX);
            let v6 = entry.is_some_and(|e| e.orig.src.is_ipv6());
            let mut ports = spec.ports;
            let addr = match (spec.kind, fx.nat_target) {
                (NatKind::Masquerade, _) => {
                    out_dev.and_then(|d| g.device_addr(d, v6)).map(|a| (a, a))
                }
                (NatKind::Redirect, _) => in_dev.and_then(|d| g.device_addr(d, v6)).map(|a| (a, a)),
                (NatKind::Snat | NatKind::Dnat, Some(t)) => {
                    ports = t.ports;
                    match (t.netmap, t.addr, entry) {
                        (true, Some(range), Some(e)) => {
                            let orig = if spec.kind == NatKind::Snat {
                                e.orig.src
                            } else {
                                e.orig.dst
                            };
                            netmap(orig, range).map(|a| (a, a))
                        }
                        (_, addr, _) => addr,
                    }
                }
                (NatKind::Snat | NatKind::Dnat, None) => spec.addr,
            };
            let want = match spec.kind {
                NatKind::Snat | NatKind::Masquerade => Manip::Src,
                NatKind::Dnat | NatKind::Redirect => Manip::Dst,
            };
            if want == manip {
                let range = NatRange {
                    addr,
                    ports,
                    random: spec.flags.random,
                    fully_random: spec.flags.fully_random,
                    persistent: spec.flags.persistent,
                };
                bound = ct.nat_setup(info.id, manip, &range).unwrap_or(false);
            }
        }
    }
    if null_binding && !bound && info.pending {
        let _ = ct.nat_null_binding(info.id, manip);
    }
    fx.flow_add
}

/// The address `orig` mapped into `range` keeping its host bits (NF_NAT_RANGE_NETMAP,
/// `nf_nat_ipv4_netmap`: `(min & netmask) | (orig & ~netmask)` with `netmask = ~(min ^
/// max)`); `None` when the families differ.
pub(crate) fn netmap(
    orig: std::net::IpAddr,
    (min, max): (std::net::IpAddr, std::net::IpAddr),
) -> Option<std::net::IpAddr> {
    use std::net::IpAddr as A;
    match (orig, min, max) {
        (A::V4(o), A::V4(lo), A::V4(hi)) => {
            let (o, lo, hi) = (u32::from(o), u32::from(lo), u32::from(hi));
            let mask = !(lo ^ hi);
            Some(A::from(((lo & mask) | (o & !mask)).to_be_bytes()))
        }
        (A::V6(o), A::V6(lo), A::V6(hi)) => {
            let (o, lo, hi) = (u128::from(o), u128::from(lo), u128::from(hi));
            let mask = !(lo ^ hi);
            Some(A::from(((lo & mask) | (o & !mask)).to_be_bytes()))
        }
        _ => None,
    }
}

/// Put the connection of `info` in flowtable `ft`, with both directions' routes from the
/// gateway (nft_flow_offload_eval + flow_offload_route_init); `true` when it was added.
#[allow(clippy::too_many_arguments)]
pub(crate) fn offload(
    nf: &Netfilter,
    g: &Gateway,
    info: &CtInfo,
    tcp_flags: u8,
    ft: usize,
    in_dev: DevId,
    out_dev: DevId,
    now_ns: u64,
) -> bool {
    let ct = &nf.0.conntrack;
    let Some(table) = nf.0.flowtables.get(ft) else {
        return false;
    };
    let Some(e) = ct.get(info.id, now_ns) else {
        return false;
    };
    if e.status & wasp_conntrack::status::OFFLOAD != 0 {
        return false;
    }
    match e.orig.proto {
        wasp_conntrack::proto::TCP => {
            let fin_rst = tcp_flags & 0x05 != 0;
            if fin_rst || e.tcp_state != Some(wasp_conntrack::TcpState::Established) {
                return false;
            }
        }
        wasp_conntrack::proto::UDP => {}
        _ => return false,
    }
    let (o, r) = (e.orig, e.reply);
    // The devices each direction comes in on.
    let (orig_in, reply_in) = if info.dir == wasp_conntrack::Dir::Original {
        (in_dev, out_dev)
    } else {
        (out_dev, in_dev)
    };
    // Original packets go to the reply's source; replies to the original's source.
    let (Some(h0), Some(h1)) = (g.hop(r.src), g.hop(o.src)) else {
        return false;
    };
    if h0.dev != reply_in || h1.dev != orig_in {
        return false;
    }
    // A direction that arrives on a tunnel device is keyed on its underlay with the VNI and
    // decapsulated; one that leaves on a tunnel device is encapsulated with the tunnel's outer
    // header (the same the slow path builds: `tunnel::tunnel_tx`). Tunnel to tunnel stays slow.
    let key = |t: &wasp_conntrack::Tuple, iif: DevId| {
        let (iif, tun_id) = match g.tunnel(iif) {
            Some(tun) => (tun.underlay, Some(tun.vni)),
            None => (iif, None),
        };
        FlowKey {
            src: t.src,
            dst: t.dst,
            src_port: t.sport,
            dst_port: t.dport,
            l4proto: t.proto,
            iif: iif.0,
            tun_id,
        }
    };
    // A packet of one direction leaves as the inverse of the other direction's tuple.
    let nat = |t: &wasp_conntrack::Tuple, other: &wasp_conntrack::Tuple| NatEdit {
        src: (t.src != other.dst).then_some(other.dst),
        dst: (t.dst != other.src).then_some(other.src),
        src_port: (t.sport != other.dport).then_some(other.dport),
        dst_port: (t.dport != other.sport).then_some(other.sport),
    };
    let route = |h: &super::Hop,
                 k: &FlowKey,
                 in_dev: DevId,
                 other: &wasp_conntrack::Tuple,
                 nat: NatEdit| {
        let mut r = Route {
            out_dev: h.dev.0,
            smac: h.smac,
            dmac: h.dmac,
            mtu: h.mtu.unwrap_or(1500),
            dec_ttl: true,
            nat,
            tunnel: if k.tun_id.is_some() {
                TunnelWork::Decap {
                    outer: g.tunnel_ends(in_dev),
                }
            } else {
                TunnelWork::None
            },
        };
        if let Some(tun) = g.tunnel(h.dev) {
            if k.tun_id.is_some() {
                return None;
            }
            let sport = super::tunnel::flow_src_port(
                other.dst,
                other.src,
                other.proto,
                other.dport,
                other.sport,
            );
            let (under, tpl) = g.tunnel_template(h.dev, sport).ok()?;
            r.out_dev = under.0;
            r.mtu = g.devices()[usize::from(tun.underlay.0)].mtu.unwrap_or(1500);
            r.tunnel = TunnelWork::Encap(tpl);
        }
        Some(r)
    };
    let keys = [key(&o, orig_in), key(&r, reply_in)];
    let (Some(r0), Some(r1)) = (
        route(&h0, &keys[0], orig_in, &r, nat(&o, &r)),
        route(&h1, &keys[1], reply_in, &o, nat(&r, &o)),
    ) else {
        return false;
    };
    let spec = FlowSpec {
        ct_id: info.id,
        keys,
        routes: [r0, r1],
    };
    if !ct.set_offload(info.id, true) {
        return false;
    }
    if table.add(spec, now_ns).is_err() {
        ct.set_offload(info.id, false);
        return false;
    }
    true
}
