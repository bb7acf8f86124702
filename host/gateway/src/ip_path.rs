//! The IP layer between the ingress hook and the way out, over a vector of packets, as the
//! kernel's receive and forward path runs it for each (ip_rcv .. ip_forward .. ip_output, and
//! the IPv6 twins), for a gateway whose ruleset has IP hooks, connection tracking, NAT or
//! flowtables:
//!
//! 1. **flowtable** (`nf_flow_offload_ip_hook` at ingress): a packet of an offloaded flow that
//!    arrives on one of the flowtable's devices is written with the flow's cached edit (NAT,
//!    TTL, MACs, tunnel) and sent, skipping everything below. A TCP FIN or RST tears the flow
//!    down first and gives the connection back to conntrack (cases C19), a TTL at or below 1
//!    or a packet over the MTU goes on below (C20);
//! 2. the prerouting chains below conntrack's priority (`ct zone set`, `notrack`), then
//!    **conntrack** (`nf_conntrack_in` at prerouting, priority -200): the packet's connection
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
//! **Vectors.** Each packet's conntrack lookup is prefetched for the whole vector first
//! ([`wasp_conntrack::Conntrack::prefetch`]); then steps 1 and 2 run packet by packet, in
//! order; the packets they pass gather
//! in a batch, and steps 3 to 7 run over the whole batch: one [`Engine::run`] per hook for
//! every packet of the batch that reaches it (the rules' vector pipeline), the route, NAT and
//! confirm per packet in order. Each packet reads its connection as it was right after its
//! own conntrack step, with what its own hooks then wrote (a snapshot, refreshed after its
//! hooks change the connection), so a packet sees what it would see alone. A batch ends
//! (runs steps 3-7) before a packet whose result could depend on an earlier packet's later
//! steps:
//! - a packet that makes a new connection runs alone: its NAT binding and confirm must be
//!   done before a later packet of the connection looks it up;
//! - when some rule writes the connection (`ct mark set`, [`Engine::writes_conn`]), a
//!   packet of a connection that the batch holds already (it reads what the first wrote);
//! - when some rule has `flow add` ([`Engine::has_flow_add`]), after a TCP or UDP packet
//!   of a connection not offloaded yet: the next packet of it must find the flow.
//!
//! What stays per packet in the caller's view: each packet's fate, the `log` lines and `dup
//! to ADDR` copies of its hooks (keyed by its index in the vector, given out in packet
//! order), so the frames leave in the order they would one packet at a time. Stateful
//! statements of different packets (`limit`, `quota`, `counter`, set updates) interleave by
//! rule rather than by packet, as in the netdev vector pipeline.
//!
//! **Tunnels** ([`super::tunnel`]): a Geneve packet for a tunnel device of the gateway goes
//! the whole way above as the UDP packet it is, to local delivery; then its inner frame takes
//! the path again from the tunnel device (once: a tunnel inside a tunnel is delivered
//! locally). A flow that arrives through a tunnel is offloaded with a key on the underlay
//! device and the VNI (the fast path decapsulates it: the outer headers never reach a chain
//! again), and one that leaves through a tunnel with the tunnel's outer header cached (the
//! fast path encapsulates it as the slow path would).
//!
//! Order at ingress: the flowtables' lookup is a hook among the device's netdev ingress
//! chains at the flowtable's priority, as the kernel registers nf_flow_offload_ip_hook: the
//! data path runs it inside the ingress hook call ([`wasp_core::Steal`],
//! [`super::Forwarder::flow_lookup`]), so the chains of higher priority never see an
//! offloaded packet, and hands the hits in (`Looked`); without that, step 1 looks up here.
//! A packet whose lookup missed before an earlier packet of its vector offloaded the flow is
//! looked up again at step 1 and takes the fast path, as in the kernel; only the chains above
//! the flowtable's priority saw it (in the kernel the lookup of each packet follows the
//! previous packet's forward hook).
//!
//! Not done: the output hook (wasp originates no packets but its replies, which skip the
//! chains), fragment reassembly (non-first fragments are `invalid` to conntrack, as the
//! kernel without defragmentation), a packet waiting for a neighbour (the gateway drops it
//! before the forward hook), `redirect` to a local port (wasp has no local sockets; it
//! translates as the kernel does and delivers to the host side).

use std::borrow::Cow;

use wasp_conntrack::{CtInfo, Manip, Teardown as CtTeardown};
use wasp_core::conn::{ConnFx, CtDetail, CtMeta};
use wasp_core::{At, Engine, Extensions, FinalVerdict, Packet, TraceEvent, TraceSink};
use wasp_flowtable::FastPath;
use wasp_ruleset::model::Hook;
use wasp_wire::PacketMeta;

use super::fib::GatewayView;
use super::netfilter::{IpFate, Netfilter, apply_fx, ct_detail, ct_meta, offload, rejected};
use super::path::{Body, MAX_HOOK_LOGS, Routed, WayOut};
use super::{Action, DevId, Gateway};
use crate::DropReason;

/// A packet of an offloaded flow: where the flowtable sends it and how it writes it.
#[derive(Debug)]
pub struct FlowHit {
    pub(crate) out: DevId,
    pub(crate) edit: wasp_flowtable::FlowEdit,
}

/// Whether a vector's flowtable lookups were done at the flowtable's priority in the ingress
/// hook call: then `hits[i]` holds packet `i`'s hit (taken here), and step 1 looks nothing
/// up.
pub(crate) struct Looked<'h> {
    pub hits: &'h mut [Option<FlowHit>],
}

/// The flowtables' fast path for `frame` (`meta` its parse) in on `dev` (`input` its gateway
/// id): the hit of the first flowtable of `dev` that forwards it. A TCP FIN or RST of an
/// offloaded flow tears the flow down and gives its connection back to conntrack (the packet
/// then takes the slow path).
pub(crate) fn flow_lookup(
    nf: &Netfilter,
    dev: &str,
    input: DevId,
    frame: &[u8],
    meta: &PacketMeta,
    now_ns: u64,
) -> Option<FlowHit> {
    if !matches!(meta.protocol, 0x0800 | 0x86dd) {
        return None;
    }
    for (ft, devices) in nf.flowtables().iter().zip(nf.devices()) {
        if !devices.iter().any(|d| d == dev) {
            continue;
        }
        match ft.fast_path(frame, meta, input.0, now_ns) {
            FastPath::Forward { out_dev, edit, .. } => {
                return Some(FlowHit {
                    out: DevId(out_dev),
                    edit,
                });
            }
            FastPath::Slow {
                teardown: Some(t), ..
            } => {
                // The FIN or RST that tore the flow down is tracked next, from ESTABLISHED
                // (what the fast path kept): it moves the connection to FIN_WAIT (120 s) or
                // CLOSE (10 s) itself, as cases C19 require; setting FIN_WAIT here first would
                // make this same FIN a second one (LAST_ACK).
                nf.conntrack()
                    .flow_teardown(t.ct_id, CtTeardown::Idle, now_ns);
            }
            FastPath::Slow { .. } | FastPath::Miss => {}
        }
    }
    None
}

/// One packet of a vector for the IP path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IpIn<'a> {
    /// Its index in the caller's vector: what its fate, `log` lines and `dup` copies are
    /// keyed by.
    pub idx: usize,
    /// The frame, Ethernet header first.
    pub frame: &'a [u8],
    /// The caller's parse of `frame`, when it has one.
    pub meta: Option<&'a PacketMeta>,
    /// `meta mark` after the ingress hook.
    pub mark: u32,
    /// `meta nftrace` after the ingress hook.
    pub nftrace: bool,
    /// The device it came in on, and its gateway id.
    pub dev: &'a str,
    pub input: DevId,
}

/// What the IP path is run with, shared by the packets of a call.
pub(crate) struct Cx<'x, 'e> {
    pub nf: &'x Netfilter,
    pub engine: &'x mut Engine,
    pub ext: Option<&'e mut dyn Extensions>,
    pub now_ns: u64,
    /// Where the hooks' `log` lines and `dup to ADDR` copies go, and the hook calls' result.
    pub way: &'x mut WayOut,
    /// Each packet's fate, by [`IpIn::idx`].
    pub fates: &'x mut [Option<IpFate>],
    /// A packet of this call offloaded its connection: a lookup made before it (at the
    /// flowtable's priority in the ingress hook call) may have missed a flow that exists now.
    pub offloaded: bool,
}

/// One packet between conntrack and its fate.
struct Lane<'a> {
    idx: usize,
    /// The device it came in on, and its name.
    input: DevId,
    dev: &'a str,
    /// The frame as it came in (what a `reject` reply answers).
    frame0: &'a [u8],
    /// The frame as the hooks, NAT and the route left it, and its parse.
    cur: Cow<'a, [u8]>,
    meta: PacketMeta,
    /// The connection as this packet's steps left it (status and mark refreshed after its
    /// hooks changed the connection).
    info: CtInfo,
    detail: Option<CtDetail>,
    mark: u32,
    /// `meta nftrace` as the hooks so far left it.
    nftrace: bool,
    /// The route's output device (forwarded packets).
    out: Option<DevId>,
    /// The link header the neighbour output writes after postrouting (forwarded packets:
    /// the hooks until then see the received one, as the kernel's).
    link: Option<crate::Rewrite>,
    /// TCP flags of the frame as it came in (0 for other protocols).
    tcp_flags: u8,
    /// Still on its way (no fate yet).
    live: bool,
}

/// Run the IP path for `pkts`, which an ingress hook accepted: each packet's fate goes to
/// `cx.fates[idx]`. See the module documentation.
pub(crate) fn ip_vector(
    cx: &mut Cx<'_, '_>,
    g: &mut Gateway,
    pkts: &[IpIn<'_>],
    mut looked: Option<Looked<'_>>,
) {
    cx.nf.maybe_gc(cx.now_ns);
    let decap = run(cx, g, pkts, false, looked.as_mut());
    if decap.is_empty() {
        return;
    }
    // A tunnel's packets: their inner frames enter from the tunnel devices, once.
    let names: Vec<String> = decap.iter().map(|d| g.name(d.dev).to_string()).collect();
    let inner: Vec<IpIn<'_>> = decap
        .iter()
        .zip(&names)
        .map(|(d, name)| IpIn {
            idx: d.idx,
            frame: &d.frame,
            meta: None,
            mark: d.mark,
            nftrace: d.nftrace,
            dev: name,
            input: d.dev,
        })
        .collect();
    let again = run(cx, g, &inner, true, None);
    debug_assert!(again.is_empty());
    for d in &decap {
        let fate = match cx.fates[d.idx].take() {
            // ARP inside the tunnel: answered (and learned) on the tunnel device.
            Some(IpFate::NotIp) | None => {
                IpFate::Routed(g.route(d.dev, &d.frame, cx.now_ns).into())
            }
            Some(IpFate::Send {
                dev,
                body,
                mark,
                offloaded,
            }) => IpFate::Send {
                dev,
                body: Body::Owned(body.bytes(&d.frame).into_owned()),
                mark,
                offloaded,
            },
            Some(IpFate::Routed(Routed::Send {
                dev,
                body,
                kind,
                unreachable,
            })) => IpFate::Routed(Routed::Send {
                dev,
                body: Body::Owned(body.bytes(&d.frame).into_owned()),
                kind,
                unreachable,
            }),
            Some(other) => other,
        };
        cx.fates[d.idx] = Some(fate);
    }
}

/// A packet delivered to a tunnel device: its inner frame takes the path again.
struct Decap {
    idx: usize,
    dev: DevId,
    frame: Vec<u8>,
    mark: u32,
    nftrace: bool,
}

/// Steps 1-7 for `pkts` (each with its input device), batched as the module documentation
/// says. `inner`: these are tunnels' inner frames, whose own tunnel packets are delivered
/// locally. Returns the packets delivered to a tunnel device.
fn run<'a>(
    cx: &mut Cx<'_, '_>,
    g: &mut Gateway,
    pkts: &[IpIn<'a>],
    inner: bool,
    mut looked: Option<&mut Looked<'_>>,
) -> Vec<Decap> {
    let (writes, flow_add) = (cx.engine.writes_conn(), cx.engine.has_flow_add());
    // Whether a hook reads an established connection's detail: then each packet's connection
    // is read right after its conntrack step (found out at the first packet that needs it).
    let mut reads_conn = None;
    // Packets of offloaded flows need no batch: it is made for the first packet that does.
    let mut batch: Vec<Lane<'a>> = Vec::new();
    let mut decap = Vec::new();
    // Every packet's conntrack lookup starts loading its part of the table before the first
    // is probed, so that the misses of a large table overlap (zone 0: a chain before
    // conntrack may set another, and then its packets are not prefetched).
    if !cx.engine.has_pre_conntrack() {
        let ct = cx.nf.conntrack();
        for p in pkts {
            if let Some(meta) = p.meta {
                ct.prefetch(p.frame, meta, 0);
            }
        }
    }
    for p in pkts {
        let hit = match looked.as_mut() {
            Some(l) => Some(l.hits.get_mut(p.idx).and_then(Option::take)),
            None => None,
        };
        let Some(mut lane) = front(cx, g, p, &mut reads_conn, hit) else {
            continue;
        };
        let id = lane.info.id;
        let repeat = writes && id != 0 && batch.iter().any(|l| l.info.id == id);
        if (lane.info.pending || repeat) && !batch.is_empty() {
            rest(cx, g, &mut batch, inner, &mut decap);
            batch.clear();
            if repeat {
                // What the earlier packet's hooks wrote.
                lane.reread(cx);
            }
        }
        let offloadable = flow_add
            && id != 0
            && lane.info.status & wasp_conntrack::status::OFFLOAD == 0
            && lane.meta.l4.is_some_and(|l| matches!(l.proto, 6 | 17));
        let alone = lane.info.pending || offloadable;
        batch.push(lane);
        if alone {
            rest(cx, g, &mut batch, inner, &mut decap);
            batch.clear();
        }
    }
    if !batch.is_empty() {
        rest(cx, g, &mut batch, inner, &mut decap);
    }
    decap
}

/// Steps 1 and 2 for one packet: its fate when the flowtable, the chains before conntrack or
/// conntrack decided it; else its lane.
fn front<'a>(
    cx: &mut Cx<'_, '_>,
    g: &Gateway,
    p: &IpIn<'a>,
    reads_conn: &mut Option<bool>,
    looked: Option<Option<FlowHit>>,
) -> Option<Lane<'a>> {
    let (dev, input) = (p.dev, p.input);
    let frame = p.frame;
    // The caller's parse of this very frame, when it has one (the ingress hook's).
    let meta = p.meta.copied().unwrap_or_else(|| wasp_wire::parse(frame));
    let mut done = |fate| {
        cx.fates[p.idx] = Some(fate);
        None
    };
    if !matches!(meta.protocol, 0x0800 | 0x86dd) {
        return done(IpFate::NotIp);
    }
    let nf = cx.nf;
    // 1. The flowtables of this device (looked up at their priority by the caller, or now).
    let hit = match looked {
        Some(None) if cx.offloaded => flow_lookup(nf, dev, input, frame, &meta, cx.now_ns),
        Some(hit) => hit,
        None => flow_lookup(nf, dev, input, frame, &meta, cx.now_ns),
    };
    if let Some(h) = hit {
        return done(IpFate::Send {
            dev: h.out,
            body: Body::Flow(Box::new(h.edit)),
            mark: p.mark,
            offloaded: true,
        });
    }
    let mut mark = p.mark;
    let mut nftrace = p.nftrace;
    // 2a. Prerouting chains below conntrack's priority (`priority raw`): `ct zone set` puts
    // the packet in a zone (the kernel's template conntrack), `notrack` keeps it from
    // conntrack.
    let mut zone = 0;
    let mut notrack = false;
    if cx.engine.has_pre_conntrack() {
        let view = GatewayView { g, routed: false };
        let pkt = Packet {
            frame,
            meta,
            iifname: dev,
            mark,
            oifname: "",
            ct: CtMeta::NONE,
            ct_detail: None,
            nftrace,
            route: Some(&view),
        };
        let mut logs = HookLogs::new(cx.way.trace);
        let sink = logs.sink(cx.engine.has_logs());
        cx.engine.run(
            At::PreConntrack,
            &[pkt],
            cx.now_ns,
            &mut cx.way.hook,
            sink,
            re(&mut cx.ext),
        );
        keep_logs(cx.way, logs, &[p.idx]);
        nftrace = cx.way.hook.nftrace(0);
        let o = cx.way.hook.outcomes[0];
        if o.verdict != FinalVerdict::Accept {
            return done(rejected(g, o.reject, input, frame, frame, false));
        }
        mark = o.mark;
        if let Some((_, fx)) = cx.way.hook.conn.first() {
            zone = fx.zone.unwrap_or(0);
            notrack = fx.notrack;
        }
    }
    // 2. Conntrack (an untracked packet has no connection and reads `ct state untracked`).
    let ct = nf.conntrack();
    let mut info = if notrack {
        CtInfo {
            state: wasp_conntrack::ct_state::UNTRACKED,
            ..CtInfo::INVALID
        }
    } else {
        ct.track(frame, &meta, zone, cx.now_ns)
    };
    if info.drop {
        return done(IpFate::Dropped(DropReason::Conntrack));
    }
    // The connection's detail as this packet left it, for the hooks' `ct` keys that read it
    // (its status and mark came with the tracking).
    let mut detail = None;
    let reads = *reads_conn.get_or_insert_with(|| {
        cx.engine.reads_ct_detail()
            && [
                Hook::Prerouting,
                Hook::Input,
                Hook::Forward,
                Hook::Postrouting,
            ]
            .into_iter()
            .any(|h| cx.engine.ip_hook_runs(h, false))
    });
    if info.id != 0
        && (reads || info.pending)
        && let Some(e) = ct.get(info.id, cx.now_ns)
    {
        info.status = e.status;
        info.mark = e.mark;
        detail = Some(ct_detail(&e));
    }
    let tcp_flags = meta
        .l4
        .filter(|l| l.proto == 6)
        .and_then(|l| frame.get(usize::from(l.offset) + 13))
        .copied()
        .unwrap_or(0);
    Some(Lane {
        idx: p.idx,
        input,
        dev,
        frame0: frame,
        cur: Cow::Borrowed(frame),
        meta,
        info,
        detail,
        mark,
        nftrace,
        out: None,
        link: None,
        tcp_flags,
        live: true,
    })
}

/// Steps 3-7 for the lanes of a batch, in order.
fn rest<'a>(
    cx: &mut Cx<'_, '_>,
    g: &mut Gateway,
    lanes: &mut [Lane<'a>],
    inner: bool,
    decap: &mut Vec<Decap>,
) {
    use wasp_conntrack::status::{DST_NAT_DONE, SRC_NAT_DONE};
    let nat_chains = !cx.engine.nat_specs().is_empty();
    let ct = cx.nf.conntrack();
    // 3. Prerouting, then destination NAT.
    let all: Vec<usize> = (0..lanes.len()).collect();
    for (k, fx) in hook(
        cx,
        g,
        Hook::Prerouting,
        lanes,
        &all,
        Some(DST_NAT_DONE),
        false,
    ) {
        let input = lanes[k].input;
        apply(
            cx,
            g,
            &mut lanes[k],
            fx,
            Manip::Dst,
            Some(input),
            None,
            nat_chains,
        );
    }
    for l in lanes.iter_mut().filter(|l| l.live) {
        if let Some(rw) = ct
            .nat_rewrite(l.info.id, l.info.dir)
            .map(|r| r.only(Manip::Dst))
            && rw.dst.is_some()
        {
            let mut v = std::mem::take(&mut l.cur).into_owned();
            if rw.apply(&mut v, &l.meta).is_err() {
                end(cx, l, IpFate::Dropped(DropReason::Verdict));
                continue;
            }
            l.set_frame(v);
        }
    }
    // 4. The route.
    let (mut local, mut fwd) = (Vec::new(), Vec::new());
    for (k, l) in lanes.iter_mut().enumerate().filter(|(_, l)| l.live) {
        let routed = match g.route_in_place(l.input, &l.cur, cx.now_ns) {
            Action::Local => {
                local.push(k);
                continue;
            }
            Action::Forward { dev, rewrite } => {
                let mut v = l.cur[..rewrite.len.min(l.cur.len())].to_vec();
                rewrite.apply_ip(&mut v);
                l.link = Some(rewrite);
                (dev, v)
            }
            Action::Transmit { dev, frame } => (dev, frame.to_vec()),
            other => {
                // Answered (time exceeded, unreachable), dropped, or waiting for a neighbour:
                // the packet goes no further, and its new connection with it.
                let fate = IpFate::Routed(other.into());
                end(cx, l, fate);
                continue;
            }
        };
        l.out = Some(routed.0);
        l.set_frame(routed.1);
        fwd.push(k);
    }
    // 5. Input.
    if !local.is_empty() {
        for (k, fx) in hook(cx, g, Hook::Input, lanes, &local, Some(SRC_NAT_DONE), true) {
            apply(cx, g, &mut lanes[k], fx, Manip::Src, None, None, nat_chains);
        }
        for &k in &local {
            let l = &mut lanes[k];
            if !l.live {
                continue;
            }
            if l.info.pending && ct.confirm(l.info.id, cx.now_ns).is_err() {
                end(cx, l, IpFate::Dropped(DropReason::Conntrack));
                continue;
            }
            // A tunnel's packet: its inner frame enters from the tunnel device.
            let fate = match g.tunnel_rx(l.input, &l.cur) {
                Some((dev, at)) if !inner => {
                    decap.push(Decap {
                        idx: l.idx,
                        dev,
                        frame: l.cur[at..].to_vec(),
                        mark: l.mark,
                        nftrace: l.nftrace,
                    });
                    // Its fate is the inner frame's: none yet.
                    l.live = false;
                    continue;
                }
                _ => IpFate::Local,
            };
            end(cx, l, fate);
        }
    }
    if fwd.is_empty() {
        return;
    }
    // 6. Forward.
    let mut flow_adds = vec![None; lanes.len()];
    for (k, fx) in hook(cx, g, Hook::Forward, lanes, &fwd, None, false) {
        flow_adds[k] = apply(cx, g, &mut lanes[k], fx, Manip::Src, None, None, false);
    }
    // 7. Postrouting, then source NAT, confirm and `flow add`.
    for (k, fx) in hook(
        cx,
        g,
        Hook::Postrouting,
        lanes,
        &fwd,
        Some(SRC_NAT_DONE),
        false,
    ) {
        let out = lanes[k].out;
        apply(cx, g, &mut lanes[k], fx, Manip::Src, None, out, nat_chains);
    }
    for &k in &fwd {
        let l = &mut lanes[k];
        let Some(out) = l.out.filter(|_| l.live) else {
            continue;
        };
        let mut frame = std::mem::take(&mut l.cur).into_owned();
        if let Some(rw) = ct
            .nat_rewrite(l.info.id, l.info.dir)
            .map(|r| r.only(Manip::Src))
            && (rw.src.is_some() || rw.icmp_id.is_some())
            && rw.apply(&mut frame, &l.meta).is_err()
        {
            end(cx, l, IpFate::Dropped(DropReason::Verdict));
            continue;
        }
        if l.info.pending && ct.confirm(l.info.id, cx.now_ns).is_err() {
            l.live = false;
            cx.fates[l.idx] = Some(IpFate::Dropped(DropReason::Conntrack));
            continue;
        }
        // `flow add` of an established connection (nft_flow_offload_eval): confirmed, TCP in
        // ESTABLISHED without FIN/RST, not offloaded yet.
        if let Some(ft) = flow_adds[k]
            && !l.info.pending
        {
            cx.offloaded |= offload(
                cx.nf,
                g,
                &l.info,
                l.tcp_flags,
                usize::from(ft),
                l.input,
                out,
                cx.now_ns,
            );
        }
        if let Some(rw) = l.link {
            rw.apply_link(&mut frame);
        }
        l.live = false;
        cx.fates[l.idx] = Some(IpFate::Send {
            dev: out,
            body: Body::Owned(frame),
            mark: l.mark,
            offloaded: false,
        });
    }
}

impl Lane<'_> {
    /// Read the connection again (after hooks changed it).
    fn reread(&mut self, cx: &Cx<'_, '_>) {
        if self.info.id != 0
            && let Some(e) = cx.nf.conntrack().get(self.info.id, cx.now_ns)
        {
            self.info.status = e.status;
            self.info.mark = e.mark;
            self.detail = Some(ct_detail(&e));
        }
    }

    /// The frame is now `v` (parsed again).
    fn set_frame(&mut self, v: Vec<u8>) {
        self.meta = wasp_wire::parse(&v);
        self.cur = Cow::Owned(v);
    }
}

/// Give lane `l` its fate: it goes no further, and its new connection with it.
fn end(cx: &mut Cx<'_, '_>, l: &mut Lane<'_>, fate: IpFate) {
    if l.info.pending {
        cx.nf.conntrack().discard(l.info.id);
    }
    l.live = false;
    cx.fates[l.idx] = Some(fate);
}

/// Apply what a hook's rules asked of lane `l`'s connection ([`apply_fx`]), and read the
/// connection again when that changed it. Returns the flowtable index of a `flow add`.
#[allow(clippy::too_many_arguments)]
fn apply(
    cx: &mut Cx<'_, '_>,
    g: &Gateway,
    l: &mut Lane<'_>,
    fx: ConnFx,
    manip: Manip,
    in_dev: Option<DevId>,
    out_dev: Option<DevId>,
    null_binding: bool,
) -> Option<u16> {
    let ct = cx.nf.conntrack();
    let changes = l.info.pending || fx.mark.is_some() || fx.label.is_some() || fx.event.is_some();
    let flow = apply_fx(
        cx.engine,
        fx,
        ct,
        g,
        &l.info,
        manip,
        in_dev,
        out_dev,
        null_binding,
    );
    if changes {
        l.reread(cx);
    }
    flow
}

/// Run IP hook `h` over the lanes `at` (indices into `lanes`) that are still live, leaving on
/// their output devices (none before the route); `fib` and `rt` read gateway `g`. With
/// `nat_done`, the hook's nat chains run for a lane whose connection is new and lacks that
/// status bit (its binding for the hook's manip type). A lane the hook drops gets its fate
/// (with a `reject`'s reply about the packet as the hook saw it; `local`: the input hook) and
/// its new connection is discarded; the others take the hook's mark and edits. Returns what
/// the rules asked of each accepted lane's connection, in lane order.
fn hook(
    cx: &mut Cx<'_, '_>,
    g: &Gateway,
    h: Hook,
    lanes: &mut [Lane<'_>],
    at: &[usize],
    nat_done: Option<u32>,
    local: bool,
) -> Vec<(usize, ConnFx)> {
    let pending = |l: &Lane<'_>| nat_done.is_some_and(|d| l.info.pending && l.info.status & d == 0);
    let live: Vec<usize> = at.iter().copied().filter(|&k| lanes[k].live).collect();
    // No chain would see the packets (none on the hook, or only nat chains and no
    // connection is new): the hook passes them as they are.
    let any_pending = live.iter().any(|&k| pending(&lanes[k]));
    if live.is_empty() || !cx.engine.ip_hook_runs(h, any_pending) {
        return live.into_iter().map(|k| (k, ConnFx::default())).collect();
    }
    let mut logs = HookLogs::new(cx.way.trace);
    let (results, edited, marks) = {
        let view = GatewayView {
            g,
            routed: h != Hook::Prerouting,
        };
        let pkts: Vec<Packet<'_>> = live
            .iter()
            .map(|&k| {
                let l = &lanes[k];
                Packet {
                    frame: &l.cur,
                    meta: l.meta,
                    iifname: l.dev,
                    mark: l.mark,
                    oifname: l.out.map_or("", |d| g.name(d)),
                    ct: ct_meta(&l.info, pending(l)),
                    ct_detail: l.detail.as_ref(),
                    nftrace: l.nftrace,
                    route: Some(&view),
                }
            })
            .collect();
        // `log` lines of the hook (and, while traced, the walks): for the caller (no sink
        // without either).
        let sink = logs.sink(cx.engine.has_logs());
        let res = &mut cx.way.hook;
        cx.engine
            .run(At::Ip(h), &pkts, cx.now_ns, res, sink, re(&mut cx.ext));
        // `dup to ADDR` (nft_dup_ipv4/ipv6): a copy of the packet as the hook has it. The
        // kernel decrements the copy's TTL at prerouting and input only; the neighbour output
        // that sends it here ([`super::Gateway::fwd_neigh`]) decrements it once, so a copy of
        // the forward and postrouting hooks gets one more first.
        for (j, o) in res.outcomes.iter().enumerate() {
            for id in o.dups() {
                let Some(t) = cx.engine.out_target(id).cloned() else {
                    continue;
                };
                if t.via.is_none() || cx.way.hook_dups.len() >= MAX_HOOK_LOGS {
                    continue;
                }
                let mut copy = pkts[j].frame.to_vec();
                if matches!(h, Hook::Forward | Hook::Postrouting | Hook::Output) {
                    raise_ttl(&mut copy);
                }
                cx.way.hook_dups.push((lanes[live[j]].idx, t, copy));
            }
        }
        let mut conn = res.conn.iter().peekable();
        let results: Vec<_> = res
            .outcomes
            .iter()
            .enumerate()
            .map(|(j, o)| {
                let mut fx = ConnFx::default();
                while let Some((i, f)) = conn.peek() {
                    if *i > j {
                        break;
                    }
                    if *i == j {
                        fx = *f;
                    }
                    conn.next();
                }
                (*o, fx)
            })
            .collect();
        // Empty (no allocation) unless a packet is marked.
        let marks = res.marked.clone();
        (
            results,
            res.edited_frames(pkts.iter().map(|p| p.frame)),
            marks,
        )
    };
    let idxs: Vec<usize> = live.iter().map(|&k| lanes[k].idx).collect();
    keep_logs(cx.way, logs, &idxs);
    let mut edited = edited.into_iter();
    let mut passed = Vec::with_capacity(live.len());
    for (j, (&k, (o, fx))) in live.iter().zip(results).enumerate() {
        let e = edited.next().flatten();
        let l = &mut lanes[k];
        l.nftrace = marks.get(j / 64).is_some_and(|w| w >> (j % 64) & 1 != 0);
        if o.verdict != FinalVerdict::Accept {
            let fate = rejected(g, o.reject, l.input, l.frame0, &l.cur, local);
            end(cx, l, fate);
            continue;
        }
        l.mark = o.mark;
        if let Some(v) = e {
            l.set_frame(v);
        }
        passed.push((k, fx));
    }
    passed
}

/// Keep the `log` lines and traced walk events of a hook call whose packet `j` is the
/// vector's packet `idxs[j]`.
fn keep_logs(way: &mut WayOut, logs: HookLogs, idxs: &[usize]) {
    for (j, text) in logs.lines {
        if way.ip_logs.len() >= MAX_HOOK_LOGS {
            break;
        }
        if let Some(&i) = idxs.get(j) {
            way.ip_logs.push((i, text));
        }
    }
    for ev in logs.walks {
        if way.ip_trace.len() >= MAX_HOOK_LOGS {
            break;
        }
        if let Some(&i) = idxs.get(ev.packet()) {
            way.ip_trace.push((i, ev));
        }
    }
}

fn re<'a>(e: &'a mut Option<&mut dyn Extensions>) -> Option<&'a mut dyn Extensions> {
    match e {
        Some(e) => Some(&mut **e),
        None => None,
    }
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
            super::raise_hop_limit_v6(&mut frame[net..]);
        }
        _ => {}
    }
}

/// What one IP hook call reports: its `log` lines as (packet index in the call, line), and,
/// when traced ([`WayOut::trace`]), the walks (their `log` lines go with the lines only, so
/// that each is told once).
#[derive(Default)]
struct HookLogs {
    lines: Vec<(usize, String)>,
    traced: bool,
    marked_only: bool,
    walks: Vec<TraceEvent>,
}

impl HookLogs {
    fn new(trace: Option<bool>) -> Self {
        HookLogs {
            traced: trace.is_some(),
            marked_only: trace.unwrap_or(true),
            ..HookLogs::default()
        }
    }

    /// The sink of the hook call: none when the ruleset has no `log` (`logs`) and nothing is
    /// traced.
    fn sink(&mut self, logs: bool) -> Option<&mut dyn TraceSink> {
        (logs || self.traced).then_some(self as &mut dyn TraceSink)
    }
}

impl TraceSink for HookLogs {
    fn event(&mut self, ev: TraceEvent) {
        match ev {
            TraceEvent::Log { packet, text } => self.lines.push((packet, text)),
            ev => self.walks.push(ev),
        }
    }

    fn walk(&self) -> bool {
        self.traced
    }

    fn marked_only(&self) -> bool {
        self.marked_only
    }
}
