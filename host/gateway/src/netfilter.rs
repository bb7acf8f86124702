//! The IP layer between the ingress hook and the way out, as the kernel's receive and forward
//! path runs it (ip_rcv .. ip_forward .. ip_output, and the IPv6 twins), for a gateway whose
//! ruleset has IP hooks, connection tracking, NAT or flowtables:
//!
//! 1. **flowtable** (`nf_flow_offload_ip_hook` at ingress): a packet of an offloaded flow that
//!    arrives on one of the flowtable's devices is written with the flow's cached edit (NAT,
//!    TTL, MACs, tunnel) and sent, skipping everything below. A TCP FIN or RST tears the flow
//!    down first and gives the connection back to conntrack (cases C19), a TTL at or below 1
//!    or a packet over the MTU goes on below (C20);
//! 2. **conntrack** (`nf_conntrack_in` at prerouting, priority -200): the packet's connection
//!    is found or an unconfirmed one made; `ct` expressions read it;
//! 3. **prerouting** chains; `type nat` chains for a new connection bind destination NAT
//!    (`dnat`, `redirect`; a null binding when none does), and the packet's destination is
//!    rewritten (also the de-NAT of reply packets of a source-NATed connection);
//! 4. the **route** ([`super::Gateway`]): local, forwarded (TTL, MTU, neighbour), or answered;
//! 5. **input** chains (local packets; `snat` in input nat chains) or **forward** chains
//!    (`meta oifname` known; `flow add @ft` offloads an established connection);
//! 6. **postrouting** chains; nat chains bind source NAT (`snat`, `masquerade`), and the
//!    source is rewritten;
//! 7. **confirm** (`nf_conntrack_confirm`): the new connection enters the table. A packet
//!    dropped on the way discards its unconfirmed connection.
//!
//! Payload statements of a hook (`ip dscp set cs1`, `ip daddr set ...`, `tcp option maxseg
//! size set 1360`, `reset tcp option sack-perm`) edit the frame that the later hooks, the
//! route and the send see, as the kernel's statements write the skb in place.
//!
//! The netdev egress hook and the send follow as for any frame ([`super::Forwarder`]).
//!
//! **Tunnels** ([`super::tunnel`]): a Geneve packet for a tunnel device of the gateway goes
//! the whole way above as the UDP packet it is, to local delivery; then its inner frame takes
//! the path again from the tunnel device. A flow that arrives through a tunnel is offloaded
//! with a key on the underlay device and the VNI (the fast path decapsulates it: the outer
//! headers never reach a chain again), and one that leaves through a tunnel with the tunnel's
//! outer header cached (the fast path encapsulates it as the slow path would).
//!
//! Conntrack and the flowtables are shared by every worker ([`Netfilter`] holds them): NAT
//! changes the reply tuple, so a reply may land on another worker than its request. Their
//! expiry runs from the packet path: at most once per [`GC_INTERVAL_NS`] of the packets'
//! clock, the first worker past the deadline collects idle flows (giving their connections
//! back) and expired connections.
//!
//! Order at ingress: wasp looks flows up after every netdev ingress chain of the device has
//! run; the kernel runs the flowtable's hook at its priority among them. The two agree when
//! the device's netdev ingress chains have lower priorities than the flowtable (as in
//! `samples/geneve-gateway/flowtable`); a netdev chain above the flowtable's priority sees an
//! offloaded flow's packets in wasp and not in the kernel; `wasp replay` and `wasp run` say so
//! for each such chain.
//!
//! Not done: the output hook (wasp originates no packets but its replies, which skip the
//! chains), fragment reassembly (non-first fragments are `invalid` to conntrack, as the
//! kernel without defragmentation), a packet waiting for a neighbour (the gateway drops it
//! before the forward hook), `redirect` to a local port (wasp has no local sockets; it
//! translates as the kernel does and delivers to the host side).

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use wasp_conntrack::{Conntrack, CtInfo, Manip, NatRange, Teardown as CtTeardown};
use wasp_flowtable::{
    FastPath, FlowKey, FlowSpec, Flowtable, FlowtableConfig, NatEdit, Route, TeardownReason,
    TunnelWork,
};
use wasp_ruleset::model::{Hook, NatKind};

use super::fib::GatewayView;
use super::path::WayOut;
use super::{DevId, Gateway};
use crate::DropReason;
use wasp_core::At;
use wasp_core::Engine;
use wasp_core::Extensions;
use wasp_core::conn::{ConnCount, ConnFx, CtDetail, CtMeta, CtTuple, FlowtableSpec};
use wasp_core::{FinalVerdict, Outcome, Packet, TraceEvent, TraceSink};
use wasp_wire::PacketMeta;

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
            specs.iter().map(|s| s.devices.clone()).collect(),
        )
    }

    /// Conntrack and flowtables made by the caller (`flowtables[i]` serves the engine's
    /// flowtable `i`, on `devices[i]`).
    pub fn with_flowtables(
        conntrack: Arc<Conntrack>,
        flowtables: Vec<Arc<Flowtable>>,
        devices: Vec<Vec<String>>,
    ) -> Netfilter {
        Netfilter(Arc::new(Shared {
            conntrack,
            flowtables,
            devices,
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

    /// [`Netfilter::gc`] when the packets' clock passed the next collection time (one worker
    /// wins each round).
    fn maybe_gc(&self, now_ns: u64) {
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
    /// Delivered to tunnel device `dev`, whose inner Ethernet frame is `inner`.
    Decap {
        /// The tunnel device.
        dev: DevId,
        /// The inner frame.
        inner: Vec<u8>,
    },
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

/// Run the IP path for `frame` from `in_dev` (`input` its gateway id), after an ingress
/// hook that accepted it with `mark`. See the module documentation. A Geneve packet for one of
/// the gateway's tunnel devices ([`super::tunnel`]) is delivered locally, then its inner frame
/// takes the IP path again from the tunnel device (once: a tunnel inside a tunnel is delivered
/// locally); what that gives is made of the inner frame ([`super::path::Body::Owned`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn ip_path(
    nf: &Netfilter,
    g: &mut Gateway,
    engine: &mut Engine,
    mut ext: Option<&mut dyn Extensions>,
    in_dev: &str,
    input: DevId,
    frame: &[u8],
    meta: Option<&PacketMeta>,
    mark: u32,
    now_ns: u64,
    way: &mut WayOut,
) -> IpFate {
    let fate = ip_path_once(
        nf,
        g,
        engine,
        re(&mut ext),
        in_dev,
        input,
        frame,
        meta,
        mark,
        now_ns,
        way,
    );
    let IpFate::Decap { dev, inner } = fate else {
        return fate;
    };
    let name = g.name(dev).to_string();
    let fate = match ip_path_once(
        nf, g, engine, ext, &name, dev, &inner, None, mark, now_ns, way,
    ) {
        // ARP inside the tunnel: answered (and learned) on the tunnel device.
        IpFate::NotIp => IpFate::Routed(g.route(dev, &inner, now_ns).into()),
        other => other,
    };
    match fate {
        IpFate::Send {
            dev,
            body,
            mark,
            offloaded,
        } => IpFate::Send {
            dev,
            body: super::path::Body::Owned(body.bytes(&inner).into_owned()),
            mark,
            offloaded,
        },
        IpFate::Routed(super::path::Routed::Send {
            dev,
            body,
            kind,
            unreachable,
        }) => IpFate::Routed(super::path::Routed::Send {
            dev,
            body: super::path::Body::Owned(body.bytes(&inner).into_owned()),
            kind,
            unreachable,
        }),
        IpFate::Decap { .. } => IpFate::Local,
        other => other,
    }
}

/// [`ip_path`] for one frame, without following a tunnel.
#[allow(clippy::too_many_arguments)]
fn ip_path_once<'a>(
    nf: &Netfilter,
    g: &mut Gateway,
    engine: &mut Engine,
    ext: Option<&mut dyn Extensions>,
    in_dev: &str,
    input: DevId,
    frame: &'a [u8],
    meta: Option<&PacketMeta>,
    mark: u32,
    now_ns: u64,
    way: &mut WayOut,
) -> IpFate {
    nf.maybe_gc(now_ns);
    // The caller's parse of this very frame, when it has one (the ingress hook's).
    let meta = meta.copied().unwrap_or_else(|| wasp_wire::parse(frame));
    if !matches!(meta.protocol, 0x0800 | 0x86dd) {
        return IpFate::NotIp;
    }
    // 1. The flowtables of this device.
    for (i, ft) in nf.0.flowtables.iter().enumerate() {
        if !nf.0.devices[i].iter().any(|d| d == in_dev) {
            continue;
        }
        match ft.fast_path(frame, &meta, input.0, now_ns) {
            FastPath::Forward { out_dev, edit, .. } => {
                return IpFate::Send {
                    dev: DevId(out_dev),
                    body: super::path::Body::Flow(Box::new(edit)),
                    mark,
                    offloaded: true,
                };
            }
            FastPath::Slow {
                teardown: Some(t), ..
            } => {
                // The FIN or RST that tore the flow down is tracked next, from ESTABLISHED
                // (what the fast path kept): it moves the connection to FIN_WAIT (120 s) or
                // CLOSE (10 s) itself, as cases C19 require; setting FIN_WAIT here first would
                // make this same FIN a second one (LAST_ACK).
                nf.0.conntrack
                    .flow_teardown(t.ct_id, CtTeardown::Idle, now_ns);
            }
            FastPath::Slow { .. } | FastPath::Miss => {}
        }
    }
    let ct = &nf.0.conntrack;
    let mut ext = ext;
    let mut mark = mark;
    // 2a. Prerouting chains below conntrack's priority (`priority raw`): `ct zone set` puts
    // the packet in a zone (the kernel's template conntrack), `notrack` keeps it from
    // conntrack.
    let mut zone = 0;
    let mut notrack = false;
    if engine.has_pre_conntrack() {
        let view = GatewayView { g, routed: false };
        let p = Packet {
            frame,
            meta,
            iifname: in_dev,
            mark,
            oifname: "",
            ct: CtMeta::NONE,
            ct_detail: None,
            route: Some(&view),
        };
        engine.run(
            At::PreConntrack,
            &[p],
            now_ns,
            &mut way.hook,
            None,
            re(&mut ext),
        );
        let o = way.hook.outcomes[0];
        if o.verdict != FinalVerdict::Accept {
            return rejected(g, o.reject, input, frame, frame, false);
        }
        mark = o.mark;
        if let Some((_, fx)) = way.hook.conn.first() {
            zone = fx.zone.unwrap_or(0);
            notrack = fx.notrack;
        }
    }
    // 2. Conntrack (an untracked packet has no connection and reads `ct state untracked`).
    let info = if notrack {
        CtInfo {
            state: wasp_conntrack::ct_state::UNTRACKED,
            ..CtInfo::INVALID
        }
    } else {
        ct.track(frame, &meta, zone, now_ns)
    };
    if info.drop {
        return IpFate::Dropped(DropReason::Conntrack);
    }
    let nat_chains = !engine.nat_specs().is_empty();
    let mut walk = Walk {
        engine,
        ext,
        ct,
        info,
        in_dev,
        mark,
        now_ns,
        reject: None,
        way,
    };
    // 3. Prerouting.
    let Some((fx, edited)) = walk.run(
        g,
        Hook::Prerouting,
        frame,
        meta,
        "",
        Some(wasp_conntrack::status::DST_NAT_DONE),
    ) else {
        return walk.rejected(g, input, frame, frame, false);
    };
    apply_fx(
        walk.engine,
        fx,
        ct,
        g,
        &info,
        Manip::Dst,
        Some(input),
        None,
        nat_chains,
    );
    let mut cur: Cow<'a, [u8]> = edited.map_or(Cow::Borrowed(frame), Cow::Owned);
    if let Some(rw) = ct
        .nat_rewrite(info.id, info.dir)
        .map(|r| r.only(Manip::Dst))
        && rw.dst.is_some()
    {
        let m = wasp_wire::parse(&cur);
        let mut v = cur.into_owned();
        if rw.apply(&mut v, &m).is_err() {
            walk.discard();
            return IpFate::Dropped(DropReason::Verdict);
        }
        cur = Cow::Owned(v);
    }
    // 4. The route.
    let (out, mut routed) = match g.route(input, &cur, now_ns) {
        super::Action::Local => {
            // 5. Input.
            let m = wasp_wire::parse(&cur);
            let Some((fx, edited)) = walk.run(
                g,
                Hook::Input,
                &cur,
                m,
                "",
                Some(wasp_conntrack::status::SRC_NAT_DONE),
            ) else {
                return walk.rejected(g, input, frame, &cur, true);
            };
            if let Some(v) = edited {
                cur = Cow::Owned(v);
            }
            apply_fx(
                walk.engine,
                fx,
                ct,
                g,
                &info,
                Manip::Src,
                None,
                None,
                nat_chains,
            );
            if info.pending && ct.confirm(info.id, now_ns).is_err() {
                return IpFate::Dropped(DropReason::Conntrack);
            }
            // A tunnel's packet: its inner frame enters from the tunnel device.
            if let Some((dev, at)) = g.tunnel_rx(input, &cur) {
                return IpFate::Decap {
                    dev,
                    inner: cur[at..].to_vec(),
                };
            }
            return IpFate::Local;
        }
        super::Action::Forward { dev, rewrite } => (dev, rewrite.to_frame(&cur)),
        super::Action::Transmit { dev, frame } => (dev, frame.to_vec()),
        other => {
            // Answered (time exceeded, unreachable), dropped, or waiting for a neighbour:
            // the packet goes no further, and its new connection with it.
            walk.discard();
            return IpFate::Routed(other.into());
        }
    };
    let out_name = g.name(out);
    // 5. Forward.
    let mut m = wasp_wire::parse(&routed);
    let Some((fx, edited)) = walk.run(g, Hook::Forward, &routed, m, out_name, None) else {
        return walk.rejected(g, input, frame, &routed, false);
    };
    if let Some(v) = edited {
        routed = v;
        m = wasp_wire::parse(&routed);
    }
    let flow_add = apply_fx(walk.engine, fx, ct, g, &info, Manip::Src, None, None, false);
    // 6. Postrouting.
    let Some((fx, edited)) = walk.run(
        g,
        Hook::Postrouting,
        &routed,
        m,
        out_name,
        Some(wasp_conntrack::status::SRC_NAT_DONE),
    ) else {
        return walk.rejected(g, input, frame, &routed, false);
    };
    if let Some(v) = edited {
        routed = v;
        m = wasp_wire::parse(&routed);
    }
    apply_fx(
        walk.engine,
        fx,
        ct,
        g,
        &info,
        Manip::Src,
        None,
        Some(out),
        nat_chains,
    );
    if let Some(rw) = ct
        .nat_rewrite(info.id, info.dir)
        .map(|r| r.only(Manip::Src))
        && (rw.src.is_some() || rw.icmp_id.is_some())
        && rw.apply(&mut routed, &m).is_err()
    {
        walk.discard();
        return IpFate::Dropped(DropReason::Verdict);
    }
    // 7. Confirm.
    if info.pending && ct.confirm(info.id, now_ns).is_err() {
        return IpFate::Dropped(DropReason::Conntrack);
    }
    let mark = walk.mark;
    // `flow add` of an established connection (nft_flow_offload_eval): confirmed, TCP in
    // ESTABLISHED without FIN/RST, not offloaded yet.
    if let Some(ft) = flow_add
        && !info.pending
    {
        let tcp_flags = meta
            .l4
            .filter(|l| l.proto == 6)
            .and_then(|l| frame.get(usize::from(l.offset) + 13))
            .copied()
            .unwrap_or(0);
        offload(nf, g, &info, tcp_flags, usize::from(ft), input, out, now_ns);
    }
    IpFate::Send {
        dev: out,
        body: super::path::Body::Owned(routed),
        mark,
        offloaded: false,
    }
}

/// One packet's walk through the IP hooks: runs a hook, keeps the packet's mark, and discards
/// the packet's new connection when a hook drops it.
struct Walk<'x, 'e> {
    engine: &'x mut Engine,
    ext: Option<&'e mut dyn Extensions>,
    ct: &'x Conntrack,
    info: CtInfo,
    in_dev: &'x str,
    mark: u32,
    now_ns: u64,
    /// The hook that dropped the packet did it with `reject`.
    reject: Option<wasp_core::Reject>,
    /// Where the hooks' `log` lines and `dup to ADDR` copies go, and their results.
    way: &'x mut WayOut,
}

/// What a hook's drop of a packet gives: with `reject` `r`, its reply about the packet as the
/// hook saw it (`at_hook`), routed to the sender of `frame` (the frame as it came in on
/// `input`); `local`: the input hook. Without, a plain drop.
fn rejected(
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
    let from: Option<[u8; 6]> = frame.get(6..12).and_then(|m| m.try_into().ok());
    let mut out = Vec::new();
    let made = match (at_hook.get(net..), from) {
        (Some(ip), Some(from)) => g.reject_reply(r.kind, input, from, ip, false, local, &mut out),
        _ => false,
    };
    IpFate::Rejected {
        reply: made.then_some(out),
    }
}

impl Walk<'_, '_> {
    /// [`rejected`] for the hook that dropped the packet.
    fn rejected(
        &self,
        g: &Gateway,
        input: DevId,
        frame: &[u8],
        at_hook: &[u8],
        local: bool,
    ) -> IpFate {
        rejected(g, self.reject, input, frame, at_hook, local)
    }

    /// Run IP hook `h` on `frame` (`meta` its parse), leaving on `oif` (empty before the
    /// route); `fib` and `rt` read gateway `g`. With `nat_done`, the hook's nat chains run when the connection is new and
    /// lacks that status bit (its binding for the hook's manip type). What the rules asked of
    /// the connection and the edited frame, if they edited it; `None` when the hook dropped
    /// the packet (its new connection is discarded).
    fn run(
        &mut self,
        g: &Gateway,
        h: Hook,
        frame: &[u8],
        meta: wasp_wire::PacketMeta,
        oif: &str,
        nat_done: Option<u32>,
    ) -> Option<(ConnFx, Option<Vec<u8>>)> {
        // No chain would see the packet (none on the hook, or only nat chains and the
        // connection is not new): the hook passes it as it is.
        if !self
            .engine
            .ip_hook_runs(h, nat_done.is_some() && self.info.pending)
        {
            return Some((ConnFx::default(), None));
        }
        // What the earlier hooks changed (a NAT binding's status bits, `ct mark set`) is
        // what this one reads, as the kernel's rules read the live entry.
        let mut info = self.info;
        let mut detail = None;
        if let Some(e) = (info.id != 0)
            .then(|| self.ct.get(info.id, self.now_ns))
            .flatten()
        {
            info.status = e.status;
            info.mark = e.mark;
            detail = Some(ct_detail(&e));
        }
        let pending = nat_done.is_some_and(|done| info.pending && info.status & done == 0);
        let view = GatewayView {
            g,
            routed: h != Hook::Prerouting,
        };
        let p = Packet {
            frame,
            meta,
            iifname: self.in_dev,
            mark: self.mark,
            oifname: oif,
            ct: ct_meta(&info, pending),
            ct_detail: detail.as_ref(),
            route: Some(&view),
        };
        match hook(self.engine, re(&mut self.ext), h, p, self.now_ns, self.way) {
            Ok(k) => {
                self.mark = k.outcome.mark;
                Some((k.fx, k.edited))
            }
            Err(reject) => {
                self.reject = reject;
                self.discard();
                None
            }
        }
    }

    /// Forget the packet's connection if this packet made it (it was not confirmed).
    fn discard(&self) {
        if self.info.pending {
            self.ct.discard(self.info.id);
        }
    }
}

fn re<'a>(e: &'a mut Option<&mut dyn Extensions>) -> Option<&'a mut dyn Extensions> {
    match e {
        Some(e) => Some(&mut **e),
        None => None,
    }
}

/// What one IP hook made of an accepted packet.
struct Hooked {
    outcome: Outcome,
    /// What its rules asked of the connection.
    fx: ConnFx,
    /// The frame with the hook's payload statements applied (`ip dscp set cs1`, `tcp option
    /// maxseg size set 1360`), when any ran; later hooks, the route and the send see it, as
    /// the kernel's later hooks see the skb its payload statements wrote.
    edited: Option<Vec<u8>>,
}

/// Raise the TTL (IPv4, checksum updated) or hop limit (IPv6) of `frame` by one, wrapping: the
/// inverse of the decrement the neighbour output makes.
fn raise_ttl(frame: &mut [u8]) {
    let m = wasp_wire::parse(frame);
    let net = usize::from(m.net_offset);
    match m.l3 {
        wasp_wire::meta::L3Kind::Ipv4 => {
            if let Some(ip) = frame.get_mut(net..) {
                super::raise_ttl_v4(ip);
            }
        }
        wasp_wire::meta::L3Kind::Ipv6 if frame.len() >= net + 40 => {
            frame[net + 7] = frame[net + 7].wrapping_add(1);
        }
        _ => {}
    }
}

/// The `log` lines of one IP hook's walk.
#[derive(Default)]
struct HookLogs(Vec<String>);

impl TraceSink for HookLogs {
    fn event(&mut self, ev: TraceEvent) {
        if let TraceEvent::Log { text, .. } = ev {
            self.0.push(text);
        }
    }

    fn walk(&self) -> bool {
        false
    }
}

/// Run IP hook `h` on one packet (the caller checked that a chain of it sees the packet,
/// [`Engine::ip_hook_runs`]); `Err` when it was dropped, with the `reject` that did it.
fn hook(
    engine: &mut Engine,
    ext: Option<&mut dyn Extensions>,
    h: Hook,
    p: Packet<'_>,
    now_ns: u64,
    way: &mut WayOut,
) -> Result<Hooked, Option<wasp_core::Reject>> {
    let frame = p.frame;
    // `log` lines of the hook: for the caller (no sink without `log`).
    let mut logs = HookLogs::default();
    let sink = engine.has_logs().then_some(&mut logs as &mut dyn TraceSink);
    engine.run(At::Ip(h), &[p], now_ns, &mut way.hook, sink, ext);
    if !logs.0.is_empty() {
        way.keep_logs(logs.0);
    }
    let out = way.hook.outcomes[0];
    // `dup to ADDR` (nft_dup_ipv4/ipv6): a copy of the packet as the hook has it. The kernel
    // decrements the copy's TTL at prerouting and input only; the neighbour output that sends
    // it here ([`super::Gateway::fwd_neigh`]) decrements it once, so a copy of the forward and
    // postrouting hooks gets one more first.
    for id in out.dups() {
        let Some(t) = engine.out_target(id).cloned() else {
            continue;
        };
        if t.via.is_none() {
            continue;
        }
        let mut copy = frame.to_vec();
        if matches!(h, Hook::Forward | Hook::Postrouting | Hook::Output) {
            raise_ttl(&mut copy);
        }
        if way.hook_dups.len() < super::path::MAX_HOOK_LOGS {
            way.hook_dups.push((t, copy));
        }
    }
    if out.verdict != FinalVerdict::Accept {
        return Err(out.reject);
    }
    let fx = way.hook.conn_of(0);
    let edited = (!way.hook.edits.is_empty())
        .then(|| wasp_core::apply_edits(frame, way.hook.edits.iter().map(|(_, e)| e)));
    Ok(Hooked {
        outcome: out,
        fx,
        edited,
    })
}

/// Apply what the last hook's rules asked of the packet's connection: `ct mark set`, and for a
/// new connection the NAT binding of `manip` (from a NAT statement; a null binding when the
/// ruleset has nat chains and none bound it). `in_dev` / `out_dev` give `redirect` and
/// `masquerade` their address. Returns the flowtable index of a `flow add`.
#[allow(clippy::too_many_arguments)]
fn apply_fx(
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
/// gateway (nft_flow_offload_eval + flow_offload_route_init).
#[allow(clippy::too_many_arguments)]
fn offload(
    nf: &Netfilter,
    g: &Gateway,
    info: &CtInfo,
    tcp_flags: u8,
    ft: usize,
    in_dev: DevId,
    out_dev: DevId,
    now_ns: u64,
) {
    let ct = &nf.0.conntrack;
    let Some(table) = nf.0.flowtables.get(ft) else {
        return;
    };
    let Some(e) = ct.get(info.id, now_ns) else {
        return;
    };
    if e.status & wasp_conntrack::status::OFFLOAD != 0 {
        return;
    }
    match e.orig.proto {
        wasp_conntrack::proto::TCP => {
            let fin_rst = tcp_flags & 0x05 != 0;
            if fin_rst || e.tcp_state != Some(wasp_conntrack::TcpState::Established) {
                return;
            }
        }
        wasp_conntrack::proto::UDP => {}
        _ => return,
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
        return;
    };
    if h0.dev != reply_in || h1.dev != orig_in {
        return;
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
        return;
    };
    let spec = FlowSpec {
        ct_id: info.id,
        keys,
        routes: [r0, r1],
    };
    if ct.set_offload(info.id, true) && table.add(spec, now_ns).is_err() {
        ct.set_offload(info.id, false);
    }
}
