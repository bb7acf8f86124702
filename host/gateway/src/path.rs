//! The way out, after the ingress hook: what `fwd`/`dup` statements and the gateway ask for,
//! each frame through the netdev egress hook of its device, into a list of frames to send.
//! This is the one place both `wasp replay` and the daemon call, so that a capture shows what a
//! live port would send.
//!
//! For one packet the ingress hook decided ([`Forwarder::after_ingress`]):
//! 1. every `dup` target gets a copy of the packet as it was when the statement ran
//!    (nft_dup_netdev_eval clones the skb there), whatever the verdict: the frame the walk
//!    ended with, or, when a plugin statement edited the packet after the `dup`, the copy
//!    [`wasp_core::DupCopies`] made without those edits;
//! 2. a dropped packet ends there ([`Fate::Dropped`] with [`DropReason::Verdict`]);
//! 3. a packet a `fwd` stole leaves on its target (as it is for `fwd to "dev"`, rewritten by
//!    [`Gateway::fwd_neigh`] for `fwd ip|ip6 to ADDR device "dev"`);
//! 4. otherwise, with a gateway, [`Gateway::route`] decides (forward, reply, local, drop);
//!    without one the packet is delivered to the host side ([`Fate::Local`]).
//!
//! Every frame sent (forwarded, stolen, duplicated, a reply) runs the egress hook of its device
//! first, as the kernel's dev_queue_xmit runs nf_hook_egress: `meta oifname` is the device,
//! `meta iifname` is empty (the egress hook has no input device), `meta mark` is the packet's
//! mark (the same skb; 0 for a reply). A drop there loses the frame; `fwd`/`dup` there send it
//! on (or a copy), nested at most [`RECURSION_LIMIT`] deep past the first, as
//! nf_do_netdev_egress limits `nf_dup_skb_recursion`. A device the gateway marks down sends
//! nothing ([`DropReason::DeviceDown`]).
//!
//! Over a vector ([`Forwarder::vector`]) the packets' last sends (routed, offloaded, stolen
//! by an ingress `fwd`, the gateway's replies) to devices with an egress hook run that hook
//! together: one hook call per device with those frames in packet order, after every
//! packet's other sends. What each packet sends, and in which order, is what it would send
//! alone, and `done` still takes the packets in order; only the egress hooks' stateful
//! statements (`limit`, `quota`, plugins) see the vector's frames in that order rather than
//! interleaved with the `fwd`/`dup` copies, which run their egress hooks one by one as they
//! are made.
//!
//! A frame that leaves as it came in, or with the gateway's few rewritten bytes (MACs, TTL), is
//! described, not copied ([`Body::Input`]): the daemon copies it once, from the receive ring
//! into its send buffer, and rewrites it there. Frames made here (replies, ICMP errors,
//! solicitations) and frames an egress hook passes on again are [`Body::Owned`].

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use wasp_ruleset::model::Hook;

use super::ip_path::{Cx, FlowHit, IpIn, Looked, ip_vector};
use super::netfilter::IpFate;
use super::{Action, DevId, DropReason, Gateway, Rewrite};
use wasp_core::Engine;
use wasp_core::{At, HookResult};
use wasp_core::{DupCopy, Extensions};
use wasp_core::{FinalVerdict, OutTarget, Outcome, Packet, TraceEvent};

/// The kernel's NF_RECURSION_LIMIT (nf_dup_netdev.c): `fwd`/`dup` transmits nested deeper than
/// this are dropped.
pub const RECURSION_LIMIT: u32 = 2;

/// Why a frame was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SendKind {
    /// Routed by the gateway.
    Forward,
    /// A `fwd` statement.
    Fwd,
    /// A `dup` statement's copy.
    Dup,
    /// The gateway's answer (ARP reply, neighbour advertisement, ICMP time exceeded).
    Reply,
    /// The gateway's ARP request or neighbour solicitation for a next hop it has no entry
    /// for (the packet that needed it is lost: `no-neighbour`).
    Solicit,
    /// The gateway's ICMP error about a packet it has no route for (lost: `no-route`) or that
    /// is too big for its output device (lost: `too-big`).
    Unreachable,
    /// Forwarded by a flowtable's fast path (no chain saw it).
    Flow,
    /// A `reject` statement's reply (TCP reset or ICMP error, [`super::reject`]) about a
    /// packet it dropped, sent back out of the device the packet came in on.
    Reject,
}

/// One packet of a vector as the ingress hook decided it: what [`Forwarder::vector`] takes.
#[derive(Debug, Clone, Copy)]
pub struct Decided<'f> {
    /// The frame as the ingress hook's statements left it.
    pub frame: &'f [u8],
    /// The ingress hook's parse of `frame`, when no statement edited it (`None`: parsed
    /// again where needed).
    pub meta: Option<&'f wasp_wire::PacketMeta>,
    /// Its `dup` copies that differ from it ([`wasp_core::DupCopies::of`]).
    pub dups: &'f [DupCopy],
    /// What the ingress hook decided.
    pub outcome: &'f Outcome,
    /// Marked by `meta nftrace set 1` after the ingress hook ([`HookResult::marked`]): the
    /// IP hooks trace its walks from their start.
    pub nftrace: bool,
}

/// A frame to send on a device (after its egress hook accepted it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Send {
    /// The device.
    pub dev: Arc<str>,
    /// The frame (Ethernet first), as made from the frame given to
    /// [`Forwarder::after_ingress`].
    pub body: Body,
    /// Why.
    pub kind: SendKind,
}

impl Send {
    /// The frame's bytes, `input` being the frame given to [`Forwarder::after_ingress`].
    pub fn frame<'a>(&'a self, input: &'a [u8]) -> Cow<'a, [u8]> {
        self.body.bytes(input)
    }
}

/// What the way out makes, owned by the caller and reused across packets: the frames to send
/// and the `log` lines of the IP hooks it ran.
#[derive(Debug, Default)]
pub struct WayOut {
    /// Frames to send, in the order they leave ([`Forwarder::after_ingress`] appends; the
    /// caller drains them per packet, while the packet's frame is at hand).
    pub sends: Vec<Send>,
    /// The lines of the `log` statements that ran in the IP hooks, in the order they ran
    /// (appended; the caller prints or publishes them as those of the netdev hooks, at most
    /// [`MAX_HOOK_LOGS`] waiting).
    pub logs: Vec<String>,
    /// The copies the IP hooks' `dup to ADDR` statements made, as (packet index in the
    /// vector, target, the frame as the hook saw it with its TTL (hop limit) as it leaves).
    pub(crate) hook_dups: Vec<(usize, OutTarget, Vec<u8>)>,
    /// The IP hooks' `log` lines of a vector, as (packet index, line), until their packet's
    /// turn moves them to `logs`.
    pub(crate) ip_logs: Vec<(usize, String)>,
    /// The result of the hook calls the way out makes (egress, IP hooks).
    pub(crate) hook: HookResult,
    /// The sends of a vector's packets whose turn waits for the egress hook calls of the
    /// vector's last sends, as (packet index, send).
    pub(crate) held: Vec<(usize, Send)>,
    /// The frames of a device's held last sends, one after another, for its egress hook call.
    pub(crate) egress_frames: Vec<u8>,
    /// Record the IP hooks' walks (set by the caller while it traces): `Some(true)` those of
    /// the packets `meta nftrace set 1` marked (`wasp ctl monitor trace`), `Some(false)` every
    /// packet's (`wasp replay --trace`).
    pub trace: Option<bool>,
    /// The IP hooks' walk events of a vector, as (packet index, event; the event's own
    /// `packet` is its index in its hook call), until their packet's turn moves them to
    /// `traced`.
    pub(crate) ip_trace: Vec<(usize, TraceEvent)>,
    /// The IP hooks' walk events of the packet whose turn it is ([`Forwarder::vector`]'s
    /// `done`), in the order they ran, each naming the packet by its index in its hook call:
    /// the caller takes them.
    pub traced: Vec<TraceEvent>,
}

/// Most `log` lines of the IP hooks a [`WayOut`] keeps (more are dropped, as a full kernel
/// log buffer drops them).
pub const MAX_HOOK_LOGS: usize = 4096;

impl WayOut {
    /// Keep `lines` of an IP hook's `log` statements.
    pub(crate) fn keep_logs(&mut self, lines: impl IntoIterator<Item = String>) {
        let room = MAX_HOOK_LOGS.saturating_sub(self.logs.len());
        self.logs.extend(lines.into_iter().take(room));
    }
}

/// What a frame to send is made of.
#[derive(Debug, Clone)]
pub enum Body {
    /// The frame given to [`Forwarder::after_ingress`]: its first `len` bytes (at most its
    /// length), rewritten by `rewrite` when there is one.
    Input {
        /// Bytes of the input frame.
        len: usize,
        /// The gateway's rewrite.
        rewrite: Option<Rewrite>,
    },
    /// A frame of its own.
    Owned(Vec<u8>),
    /// The frame given to [`Forwarder::after_ingress`] as a flowtable's cached edit writes it
    /// (MACs, NAT, TTL, tunnel headers; one copy into the send buffer).
    Flow(Box<wasp_flowtable::FlowEdit>),
}

impl PartialEq for Body {
    /// Input and owned bodies compare by content; two flow bodies are equal when their edits
    /// make frames of the same length for the same device and direction (edits hold no bytes
    /// of their own to compare).
    fn eq(&self, other: &Body) -> bool {
        match (self, other) {
            (
                Body::Input { len, rewrite },
                Body::Input {
                    len: l2,
                    rewrite: r2,
                },
            ) => len == l2 && rewrite == r2,
            (Body::Owned(a), Body::Owned(b)) => a == b,
            (Body::Flow(a), Body::Flow(b)) => {
                a.out_len() == b.out_len() && a.out_dev() == b.out_dev() && a.dir() == b.dir()
            }
            _ => false,
        }
    }
}

impl Eq for Body {}

impl Body {
    /// The whole input frame, as it is.
    fn whole(input: &[u8]) -> Body {
        Body::Input {
            len: input.len(),
            rewrite: None,
        }
    }

    /// Length in bytes of the frame, `input` as in [`Send::frame`].
    pub fn len(&self, input: &[u8]) -> usize {
        match self {
            Body::Input { len, .. } => (*len).min(input.len()),
            Body::Owned(v) => v.len(),
            Body::Flow(e) => e.out_len(),
        }
    }

    /// Write the frame into `buf`, which holds exactly [`Body::len`] bytes (one copy; the
    /// rewrite is applied in `buf`).
    pub fn write(&self, input: &[u8], buf: &mut [u8]) {
        match self {
            Body::Input { rewrite, .. } => {
                let n = buf.len().min(input.len());
                buf[..n].copy_from_slice(&input[..n]);
                if let Some(r) = rewrite {
                    r.apply(buf);
                }
            }
            Body::Owned(v) => {
                let n = buf.len().min(v.len());
                buf[..n].copy_from_slice(&v[..n]);
            }
            Body::Flow(e) => {
                // The fast path checked the input's length when it made the edit.
                let _ = e.write(input, buf);
            }
        }
    }

    /// The frame's bytes: borrowed when nothing changes, else a new buffer.
    pub fn bytes<'a>(&'a self, input: &'a [u8]) -> Cow<'a, [u8]> {
        match self {
            Body::Input { len, rewrite: None } => Cow::Borrowed(&input[..(*len).min(input.len())]),
            Body::Input {
                rewrite: Some(r), ..
            } => Cow::Owned(r.to_frame(input)),
            Body::Owned(v) => Cow::Borrowed(v),
            Body::Flow(e) => Cow::Owned(e.to_vec(input).unwrap_or_default()),
        }
    }
}

/// What the gateway decided for a packet, its frame out of the gateway's buffer.
#[derive(Debug)]
pub(crate) enum Routed {
    /// For the host side.
    Local,
    /// Dropped (counted by the gateway).
    Drop(DropReason),
    /// Send `body` on `dev`; for [`SendKind::Unreachable`], the packet was lost for
    /// `unreachable`.
    Send {
        dev: DevId,
        body: Body,
        kind: SendKind,
        unreachable: DropReason,
    },
}

impl From<Action<'_>> for Routed {
    fn from(a: Action<'_>) -> Routed {
        let send = |dev, body, kind| Routed::Send {
            dev,
            body,
            kind,
            unreachable: DropReason::NoRoute,
        };
        match a {
            Action::Local => Routed::Local,
            Action::Drop(r) => Routed::Drop(r),
            Action::Forward { dev, rewrite } => send(
                dev,
                Body::Input {
                    len: rewrite.len,
                    rewrite: Some(rewrite),
                },
                SendKind::Forward,
            ),
            Action::Transmit { dev, frame } => {
                send(dev, Body::Owned(frame.to_vec()), SendKind::Forward)
            }
            Action::Reply { dev, frame } => send(dev, Body::Owned(frame.to_vec()), SendKind::Reply),
            Action::Resolve { dev, frame } => {
                send(dev, Body::Owned(frame.to_vec()), SendKind::Solicit)
            }
            Action::Unreachable { dev, frame, reason } => Routed::Send {
                dev,
                body: Body::Owned(frame.to_vec()),
                kind: SendKind::Unreachable,
                unreachable: reason,
            },
        }
    }
}

/// What became of a packet that the ingress hook decided: one type for every way it ends,
/// the reason inside when it was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Delivered to the host side (accepted, no gateway; or the gateway's own).
    Local,
    /// Sent on a device (routed or `fwd`).
    Sent,
    /// Consumed by the gateway, which answered it.
    Replied,
    /// Dropped: by a chain's verdict ([`DropReason::Verdict`]) or on the way out (a gateway
    /// reason, the egress hook, recursion, conntrack).
    Dropped(DropReason),
}

/// Counts of the way out since the forwarder was made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForwardStats {
    /// Packets delivered to the host side.
    pub local: u64,
    /// Frames sent, by kind.
    pub sent: BTreeMap<SendKind, u64>,
    /// Frames lost on the way out, by cause (a `dup` copy lost counts here too; a chain's
    /// verdict is not a loss).
    pub lost: BTreeMap<DropReason, u64>,
    /// Frames sent, by device.
    pub by_device: BTreeMap<String, u64>,
}

impl ForwardStats {
    /// Frames sent of `kind`.
    pub fn sent(&self, kind: SendKind) -> u64 {
        self.sent.get(&kind).copied().unwrap_or(0)
    }

    /// Frames lost for `why`.
    pub fn lost(&self, why: DropReason) -> u64 {
        self.lost.get(&why).copied().unwrap_or(0)
    }
}

/// The gateway (if one is configured) and the `fwd`/`dup`/egress plumbing around it. One per
/// worker, as [`Gateway`].
#[derive(Debug, Clone, Default)]
pub struct Forwarder {
    gateway: Option<Gateway>,
    /// Conntrack and flowtables (shared with the other workers), when the ruleset has IP
    /// hooks, NAT or flowtables.
    nf: Option<super::Netfilter>,
    stats: ForwardStats,
    /// The gateway's device names, shared by the frames sent there (by [`DevId`]).
    names: Vec<Arc<str>>,
}

impl Forwarder {
    /// A forwarder with `gateway` (or none: accepted packets go to the host side, only
    /// `fwd`/`dup` send).
    pub fn new(gateway: Option<Gateway>) -> Self {
        Forwarder {
            gateway,
            nf: None,
            stats: ForwardStats::default(),
            names: Vec::new(),
        }
    }

    /// Give the forwarder conntrack and flowtables: packets the gateway would route then take
    /// the IP path ([`super::netfilter`]): flowtable fast path, conntrack, the prerouting,
    /// input, forward and postrouting chains, NAT. Without a gateway it has no effect.
    pub fn set_netfilter(&mut self, nf: Option<super::Netfilter>) {
        self.nf = nf;
    }

    /// The conntrack and flowtables given with [`Forwarder::set_netfilter`].
    pub fn netfilter(&self) -> Option<&super::Netfilter> {
        self.nf.as_ref()
    }

    /// The gateway.
    pub fn gateway(&self) -> Option<&Gateway> {
        self.gateway.as_ref()
    }

    /// The gateway, to change (MACs, devices up or down).
    pub fn gateway_mut(&mut self) -> Option<&mut Gateway> {
        self.gateway.as_mut()
    }

    /// The counts.
    pub fn stats(&self) -> &ForwardStats {
        &self.stats
    }

    /// What becomes of `frame`, which came in on `in_dev` and got `outcome` from the ingress
    /// hook of `engine` (see the module's documentation), at `now_ns`. `frame` is the packet
    /// as the hook's walk left it (with plugin statements' edits, [`wasp_core::edited_frames`]);
    /// `dups` are the packet's `dup` copies that differ from it
    /// ([`wasp_core::DupCopies::of`]; empty when no edit came after a `dup`). The frames to send
    /// are appended to `sends` in the order they leave; `ext` are the plugins of the egress
    /// hooks (the engine's installed ones when `None`).
    #[allow(clippy::too_many_arguments)]
    pub fn after_ingress(
        &mut self,
        engine: &mut Engine,
        ext: Option<&mut dyn Extensions>,
        in_dev: &str,
        frame: &[u8],
        meta: Option<&wasp_wire::PacketMeta>,
        dups: &[DupCopy],
        outcome: &Outcome,
        now_ns: u64,
        way: &mut WayOut,
    ) -> Fate {
        let one = Decided {
            frame,
            meta,
            dups,
            outcome,
            nftrace: false,
        };
        let mut fate = Fate::Local;
        self.vector(
            engine,
            ext,
            in_dev,
            &[one],
            now_ns,
            way,
            None,
            |_, f: Fate, _: &mut WayOut| {
                fate = f;
            },
        );
        fate
    }

    /// The priority of the flowtables' hook among the netdev ingress chains of `dev`, when
    /// its packets take the IP path (a gateway with conntrack that knows `dev`) and a
    /// flowtable lists it: run [`Forwarder::flow_lookup`] there ([`wasp_core::Steal`]) and
    /// give [`Forwarder::vector`] the hits.
    pub fn flow_hook(&self, dev: &str) -> Option<i32> {
        self.gateway.as_ref()?.device(dev)?;
        self.nf.as_ref()?.flow_hook(dev)
    }

    /// The flowtables' fast path for `frame` (`meta` its parse) in on `dev` at `now_ns`: the
    /// hit when an offloaded flow forwards it (what [`Forwarder::vector`] sends for it).
    pub fn flow_lookup(
        &self,
        dev: &str,
        frame: &[u8],
        meta: &wasp_wire::PacketMeta,
        now_ns: u64,
    ) -> Option<FlowHit> {
        let input = self.gateway.as_ref()?.device(dev)?;
        let nf = self.nf.as_ref()?;
        // Idle flows expire first, as when the IP path looks up.
        nf.maybe_gc(now_ns);
        super::ip_path::flow_lookup(nf, dev, input, frame, meta, now_ns)
    }

    /// Start loading what [`Forwarder::flow_lookup`] of each of `frames` (with their parses)
    /// in on `dev` reads first in the flowtables of `dev` ([`wasp_flowtable::Flowtable::prefetch`]):
    /// called for a whole vector before its lookups, so that those of a large flowtable
    /// overlap their cache misses. Changes nothing.
    pub fn flow_prefetch<'p>(
        &self,
        dev: &str,
        frames: impl Iterator<Item = (&'p [u8], &'p wasp_wire::PacketMeta)>,
    ) {
        let (Some(g), Some(nf)) = (self.gateway.as_ref(), self.nf.as_ref()) else {
            return;
        };
        let Some(input) = g.device(dev) else {
            return;
        };
        let tables: Vec<&wasp_flowtable::Flowtable> = nf
            .flowtables()
            .iter()
            .zip(nf.devices())
            .filter(|(_, devices)| devices.iter().any(|d| d == dev))
            .map(|(ft, _)| &**ft)
            .filter(|ft| ft.len() >= wasp_flowtable::PREFETCH_MIN)
            .collect();
        if tables.is_empty() {
            return;
        }
        for (frame, meta) in frames {
            for ft in &tables {
                ft.prefetch(frame, meta, input.0);
            }
        }
    }

    /// [`Forwarder::after_ingress`] for a vector of packets that came in on `in_dev`: the IP
    /// path runs over the whole vector ([`super::ip_path`]), then each packet in order takes
    /// the rest of its way out and `done(i, fate, way)` is called with `way.sends` and
    /// `way.logs` holding what packet `i` sends and logged (the caller drains them there,
    /// while the packet's frame is at hand). `flows`: the flowtable lookups made in the
    /// ingress hook call at [`Forwarder::flow_hook`]'s priority (packet `i`'s hit at `i`);
    /// `None` when none were made (the IP path looks up then).
    #[allow(clippy::too_many_arguments)]
    pub fn vector(
        &mut self,
        engine: &mut Engine,
        mut ext: Option<&mut dyn Extensions>,
        in_dev: &str,
        pkts: &[Decided<'_>],
        now_ns: u64,
        way: &mut WayOut,
        flows: Option<&mut [Option<FlowHit>]>,
        mut done: impl FnMut(usize, Fate, &mut WayOut),
    ) {
        let mut fates: Vec<Option<IpFate>> = Vec::new();
        if let (Some(g), Some(nf)) = (self.gateway.as_mut(), self.nf.as_ref())
            && let Some(input) = g.device(in_dev)
        {
            let ins: Vec<IpIn<'_>> = pkts
                .iter()
                .enumerate()
                .filter(|(_, p)| p.outcome.verdict != FinalVerdict::Drop && p.outcome.fwd.is_none())
                .map(|(idx, p)| IpIn {
                    idx,
                    frame: p.frame,
                    meta: p.meta,
                    mark: p.outcome.mark,
                    nftrace: p.nftrace,
                    dev: in_dev,
                    input,
                })
                .collect();
            if !ins.is_empty() {
                fates.resize_with(pkts.len(), || None);
                let mut cx = Cx {
                    nf,
                    engine: &mut *engine,
                    ext: re(&mut ext),
                    now_ns,
                    way: &mut *way,
                    fates: &mut fates,
                    offloaded: false,
                };
                let looked = flows.map(|hits| Looked { hits });
                ip_vector(&mut cx, g, &ins, looked);
                // Given out per packet, in packet order.
                way.ip_logs.sort_by_key(|l| l.0);
                way.ip_trace.sort_by_key(|l| l.0);
                way.hook_dups.sort_by_key(|d| d.0);
            }
        }
        // Each packet's way out in order. A packet whose last send waits for its device's
        // egress hook (a tail, run below for the whole vector) holds its turn, and so does
        // every packet after it: `done` is called in packet order. A vector of one gains
        // nothing from holding its tail.
        let defer = pkts.len() > 1;
        let mut tails: Vec<Tail> = Vec::new();
        let mut held: Vec<Option<Fate>> = Vec::new();
        for (i, p) in pkts.iter().enumerate() {
            // Most dropped packets end at once (the call to `finish` costs more than they do).
            let fate = match quiet_drop(p.outcome) {
                Some(f) => Some(f),
                None => {
                    let ip = fates.get_mut(i).and_then(Option::take);
                    let wait = if defer { Some(&mut tails) } else { None };
                    self.finish(engine, re(&mut ext), in_dev, p, ip, i, now_ns, way, wait)
                }
            };
            match fate {
                Some(f) if tails.is_empty() => {
                    hand_out(way, i);
                    done(i, f, way);
                }
                f => {
                    held.push(f);
                    way.held.extend(way.sends.drain(..).map(|s| (i, s)));
                }
            }
        }
        if !tails.is_empty() {
            let first = pkts.len() - held.len();
            self.egress_tails(
                engine,
                re(&mut ext),
                pkts,
                tails,
                now_ns,
                way,
                &mut |i, f| {
                    held[i - first] = Some(f);
                },
            );
            // Each packet's sends in the order they leave: those made before its tail, then
            // what its tail sent (`sort_by_key` is stable).
            way.held.sort_by_key(|s| s.0);
            let mut sends = std::mem::take(&mut way.held).into_iter().peekable();
            for (k, f) in held.into_iter().enumerate() {
                let i = first + k;
                while let Some((_, s)) = sends.next_if(|s| s.0 == i) {
                    way.sends.push(s);
                }
                hand_out(way, i);
                debug_assert!(f.is_some(), "every tail has its fate");
                done(i, f.unwrap_or(Fate::Dropped(DropReason::Egress)), way);
            }
        }
        way.ip_logs.clear();
        way.ip_trace.clear();
        way.traced.clear();
        way.hook_dups.clear();
    }

    /// Run the egress hooks of a vector's `tails` (one hook call per device, the tails in
    /// packet order within it), then each tail's way on from its outcome, in packet order
    /// ([`Forwarder::after_egress`]): its sends are held in `way.held` under its packet and
    /// `fate(i, fate)` is told packet `i`'s fate.
    #[allow(clippy::too_many_arguments)]
    fn egress_tails(
        &mut self,
        engine: &mut Engine,
        mut ext: Option<&mut dyn Extensions>,
        pkts: &[Decided<'_>],
        tails: Vec<Tail>,
        now_ns: u64,
        way: &mut WayOut,
        fate: &mut dyn FnMut(usize, Fate),
    ) {
        // A tail's egress outcome, or why it never reached the hook.
        let mut outs: Vec<Result<Outcome, DropReason>> = tails
            .iter()
            .map(|t| self.check_out(&t.dev, t.depth))
            .map(|r| r.map(|()| Outcome::unseen(0)))
            .collect();
        let mut devs: Vec<&Arc<str>> = Vec::new();
        for t in &tails {
            if !devs.iter().any(|d| **d == t.dev) {
                devs.push(&t.dev);
            }
        }
        for dev in devs {
            let mine: Vec<usize> = (0..tails.len())
                .filter(|&k| tails[k].dev == *dev && outs[k].is_ok())
                .collect();
            if mine.is_empty() {
                continue;
            }
            // The frames as they would leave, one after another in one buffer.
            let arena = &mut way.egress_frames;
            arena.clear();
            let mut spans = Vec::with_capacity(mine.len());
            for &k in &mine {
                let (body, input) = (&tails[k].body, pkts[tails[k].i].frame);
                let at = arena.len();
                arena.resize(at + body.len(input), 0);
                body.write(input, &mut arena[at..]);
                spans.push(at..arena.len());
            }
            let arena = &way.egress_frames;
            let packets: Vec<Packet<'_>> = mine
                .iter()
                .zip(spans)
                .map(|(&k, span)| egress_packet(&arena[span], tails[k].mark))
                .collect();
            engine.run(
                At::Egress(dev),
                &packets,
                now_ns,
                &mut way.hook,
                None,
                re(&mut ext),
            );
            for (&k, o) in mine.iter().zip(&way.hook.outcomes) {
                outs[k] = Ok(*o);
            }
        }
        for (t, out) in tails.into_iter().zip(outs) {
            let input = pkts[t.i].frame;
            let sent = out.and_then(|o| {
                self.after_egress(
                    engine,
                    re(&mut ext),
                    t.dev,
                    input,
                    t.body,
                    t.kind,
                    &o,
                    t.depth,
                    now_ns,
                    way,
                )
            });
            let f = self.tail_fate(t.kind, t.unreachable, sent);
            way.held.extend(way.sends.drain(..).map(|s| (t.i, s)));
            fate(t.i, f);
        }
    }

    /// The last send of a packet's way out (routed, offloaded, an ingress `fwd`, a reply):
    /// kept in `tails` for the vector's egress hook calls when its device has an egress hook
    /// (`None`), else sent now (the packet's fate); always sent now without `tails` (a vector
    /// of one).
    #[allow(clippy::too_many_arguments)]
    fn send_tail(
        &mut self,
        engine: &mut Engine,
        ext: Option<&mut dyn Extensions>,
        t: Tail,
        input: &[u8],
        now_ns: u64,
        way: &mut WayOut,
        tails: Option<&mut Vec<Tail>>,
    ) -> Option<Fate> {
        let hooked = engine.has_hook(Hook::Egress, &t.dev);
        if hooked && let Some(tails) = tails {
            tails.push(t);
            return None;
        }
        let sent = if hooked {
            self.transmit(
                engine, ext, t.dev, input, t.body, t.kind, t.mark, t.depth, now_ns, way,
            )
        } else {
            // What `transmit` does for a device without an egress hook, without asking again.
            let unseen = Outcome::unseen(t.mark);
            self.check_out(&t.dev, t.depth).and_then(|()| {
                self.after_egress(
                    engine, ext, t.dev, input, t.body, t.kind, &unseen, t.depth, now_ns, way,
                )
            })
        };
        Some(self.tail_fate(t.kind, t.unreachable, sent))
    }

    /// The fate of a packet whose last send of `kind` went as `sent`: a solicitation or an
    /// ICMP error stands for a packet lost (`no-neighbour`, `unreachable`), whatever became
    /// of the frame sent for it.
    fn tail_fate(
        &mut self,
        kind: SendKind,
        unreachable: DropReason,
        sent: Result<(), DropReason>,
    ) -> Fate {
        match sent {
            _ if kind == SendKind::Solicit => self.lose(DropReason::NoNeighbour),
            _ if kind == SendKind::Unreachable => self.lose(unreachable),
            Err(l) => Fate::Dropped(l),
            Ok(()) if kind == SendKind::Reply => Fate::Replied,
            Ok(()) => Fate::Sent,
        }
    }

    /// The way out of packet `i` of a vector (`p`), after the IP path gave it `ip` (when it
    /// took the IP path): its fate, or `None` when its last send waits in `tails` for its
    /// device's egress hook ([`Forwarder::send_tail`]).
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &mut self,
        engine: &mut Engine,
        mut ext: Option<&mut dyn Extensions>,
        in_dev: &str,
        p: &Decided<'_>,
        ip: Option<IpFate>,
        i: usize,
        now_ns: u64,
        way: &mut WayOut,
        tails: Option<&mut Vec<Tail>>,
    ) -> Option<Fate> {
        let Decided {
            frame,
            dups,
            outcome,
            ..
        } = *p;
        for id in outcome.dups() {
            let Some(t) = engine.out_target(id).cloned() else {
                continue;
            };
            // The packet as it was at the `dup`: a copy made without the edits after it.
            let body = match dups.iter().find(|c| c.target == id) {
                Some(c) => Body::Owned(c.frame.clone()),
                None => Body::whole(frame),
            };
            // A lost copy is counted; the packet goes on.
            let _ = self.transmit(
                engine,
                re(&mut ext),
                t.dev,
                frame,
                body,
                SendKind::Dup,
                outcome.mark,
                1,
                now_ns,
                way,
            );
        }
        if outcome.verdict == FinalVerdict::Drop {
            if let Some(r) = outcome.reject {
                let reply = self.reject_reply(r, in_dev, frame);
                self.send_reject(engine, ext, in_dev, frame, reply, now_ns, way);
            }
            return Some(Fate::Dropped(DropReason::Verdict));
        }
        if let Some(id) = outcome.fwd {
            let Some(t) = engine.out_target(id).cloned() else {
                return Some(Fate::Dropped(DropReason::Verdict));
            };
            return self.fwd(
                engine,
                ext,
                &t,
                frame,
                Body::whole(frame),
                SendKind::Fwd,
                outcome.mark,
                1,
                now_ns,
                way,
                tails.map(|w| (w, i)),
            );
        }
        let Some(g) = self.gateway.as_mut() else {
            self.stats.local += 1;
            return Some(Fate::Local);
        };
        let Some(input) = g.device(in_dev) else {
            return Some(self.lose(DropReason::UnknownDevice));
        };
        let mut pre_routed = None;
        if let Some(fate) = ip {
            self.send_hook_dups(engine, re(&mut ext), frame, outcome.mark, i, now_ns, way);
            match fate {
                IpFate::NotIp => {}
                IpFate::Routed(r) => pre_routed = Some(r),
                IpFate::Local => {
                    self.stats.local += 1;
                    return Some(Fate::Local);
                }
                IpFate::Dropped(DropReason::Conntrack) => {
                    return Some(self.lose(DropReason::Conntrack));
                }
                IpFate::Dropped(r) => return Some(Fate::Dropped(r)),
                IpFate::Rejected { reply } => {
                    self.send_reject(engine, ext, in_dev, frame, reply, now_ns, way);
                    return Some(Fate::Dropped(DropReason::Verdict));
                }
                IpFate::Send {
                    dev,
                    body,
                    mark,
                    offloaded,
                } => {
                    let name = self.name(dev);
                    let kind = if offloaded {
                        SendKind::Flow
                    } else {
                        SendKind::Forward
                    };
                    let t = Tail {
                        i,
                        dev: name,
                        body,
                        kind,
                        mark,
                        depth: 0,
                        unreachable: DropReason::NoRoute,
                    };
                    return self.send_tail(engine, ext, t, frame, now_ns, way, tails);
                }
            }
        }
        let routed = match pre_routed {
            Some(r) => r,
            None => match self.gateway.as_mut() {
                Some(g) => Routed::from(g.route_in_place(input, frame, now_ns)),
                None => return Some(Fate::Local),
            },
        };
        let (dev, out, kind, unreachable) = match routed {
            Routed::Local => {
                self.stats.local += 1;
                return Some(Fate::Local);
            }
            Routed::Drop(r) => return Some(self.lose(r)),
            Routed::Send {
                dev,
                body,
                kind,
                unreachable,
            } => (dev, body, kind, unreachable),
        };
        let name = self.name(dev);
        let mark = if matches!(
            kind,
            SendKind::Reply | SendKind::Solicit | SendKind::Unreachable
        ) {
            0
        } else {
            outcome.mark
        };
        let t = Tail {
            i,
            dev: name,
            body: out,
            kind,
            mark,
            depth: 0,
            unreachable,
        };
        self.send_tail(engine, ext, t, frame, now_ns, way, tails)
    }

    /// The reply of `reject` `r` at an ingress hook to `frame` from `in_dev`
    /// ([`super::reject`]): a netdev chain's is built from the frame alone; an inet chain's
    /// is routed as the gateway's own ICMP errors are (without a gateway: the frame's MACs
    /// swapped, an ICMP error from the packet's destination). `None` when none is sent.
    fn reject_reply(&self, r: wasp_core::Reject, in_dev: &str, frame: &[u8]) -> Option<Vec<u8>> {
        let meta = wasp_wire::parse(frame);
        let mut out = Vec::new();
        let made = if r.netdev {
            super::reject::netdev_reply(r.kind, frame, &meta, &mut out)
        } else {
            let ip = frame.get(usize::from(meta.net_offset)..)?;
            let from = wasp_wire::ethernet::Frame::new_checked(frame).ok()?.src();
            match self
                .gateway
                .as_ref()
                .zip(self.gateway.as_ref()?.device(in_dev))
            {
                Some((g, input)) => g.reject_reply(r.kind, input, from, ip, true, false, &mut out),
                None => {
                    let to = wasp_wire::ethernet::Frame::new_checked(frame).ok()?.dst();
                    let v6 = meta.protocol == wasp_wire::ethernet::ethertype::IPV6;
                    let icmp_src = meta.ip_addrs(frame).map(|(_, d)| d);
                    let way = super::reject::RejectWay::Routed { icmp_src };
                    super::reject::build(r.kind, way, v6, ip, ip.len(), (to, from), &mut out)
                }
            }
        };
        made.then_some(out)
    }

    /// Send a `reject` reply (if one was made) out of `in_dev`, through its egress hook,
    /// counted as [`SendKind::Reject`]; the packet it answers stays dropped.
    #[allow(clippy::too_many_arguments)]
    fn send_reject(
        &mut self,
        engine: &mut Engine,
        ext: Option<&mut dyn Extensions>,
        in_dev: &str,
        input: &[u8],
        reply: Option<Vec<u8>>,
        now_ns: u64,
        way: &mut WayOut,
    ) {
        let Some(reply) = reply else { return };
        let dev = match self.gateway.as_ref().and_then(|g| g.device(in_dev)) {
            Some(id) => self.name(id),
            None => Arc::from(in_dev),
        };
        // A lost reply is counted where it was lost; the packet was dropped either way.
        let _ = self.transmit(
            engine,
            ext,
            dev,
            input,
            Body::Owned(reply),
            SendKind::Reject,
            0,
            0,
            now_ns,
            way,
        );
    }

    /// Send the copies of the IP hooks' `dup to ADDR` statements (`way.hook_dups`):
    /// to the neighbour ADDR out of the statement's device, or of the route to ADDR
    /// (nf_dup_ipv4_route / nf_dup_ipv6_route); a copy without a route, device or neighbour
    /// is lost and counted, the packet goes on.
    #[allow(clippy::too_many_arguments)]
    fn send_hook_dups(
        &mut self,
        engine: &mut Engine,
        mut ext: Option<&mut dyn Extensions>,
        input: &[u8],
        mark: u32,
        i: usize,
        now_ns: u64,
        way: &mut WayOut,
    ) {
        // Packet `i`'s copies lead the list (earlier packets' are sent).
        let n = way.hook_dups.iter().take_while(|d| d.0 == i).count();
        let mine: Vec<_> = way.hook_dups.drain(..n).collect();
        for (_, t, copy) in mine {
            let t = if t.dev.is_empty() {
                let dev = t.via.and_then(|a| self.gateway.as_ref()?.route_dev(a));
                let Some(dev) = dev else {
                    self.lose(DropReason::NoRoute);
                    continue;
                };
                OutTarget {
                    dev: self.name(dev),
                    via: t.via,
                }
            } else {
                t
            };
            let _ = self.fwd(
                engine,
                re(&mut ext),
                &t,
                input,
                Body::Owned(copy),
                SendKind::Dup,
                mark,
                1,
                now_ns,
                way,
                None,
            );
        }
    }

    /// The gateway's name of `dev`, shared.
    fn name(&mut self, dev: DevId) -> Arc<str> {
        let name = self.gateway.as_ref().map_or("", |g| g.name(dev));
        let i = usize::from(dev.0);
        match self.names.get(i) {
            Some(n) if **n == *name => n.clone(),
            _ => {
                if self.names.len() <= i {
                    self.names.resize(i + 1, Arc::from(""));
                }
                let n: Arc<str> = Arc::from(name);
                self.names[i] = n.clone();
                n
            }
        }
    }

    fn lose(&mut self, why: DropReason) -> Fate {
        *self.stats.lost.entry(why).or_default() += 1;
        Fate::Dropped(why)
    }

    /// Send `body` (made from `input`) to `fwd` target `t` (nested `depth` deep): the fate of
    /// the packet it stands for, or `None` when the send waits in `wait`'s tails as packet
    /// `wait.1`'s last ([`Forwarder::send_tail`]).
    #[allow(clippy::too_many_arguments)]
    fn fwd(
        &mut self,
        engine: &mut Engine,
        ext: Option<&mut dyn Extensions>,
        t: &OutTarget,
        input: &[u8],
        body: Body,
        kind: SendKind,
        mark: u32,
        depth: u32,
        now_ns: u64,
        way: &mut WayOut,
        wait: Option<(&mut Vec<Tail>, usize)>,
    ) -> Option<Fate> {
        let out = match t.via {
            None => body,
            Some(via) => {
                let Some(g) = self.gateway.as_mut() else {
                    return Some(self.lose(DropReason::NoNeighbour));
                };
                // The input as it came: rewritten in place; anything else: through a copy.
                let as_input = body == Body::whole(input);
                let bytes = body.bytes(input);
                let action = if as_input {
                    g.fwd_neigh_in_place(&t.dev, via, input, now_ns)
                } else {
                    g.fwd_neigh(&t.dev, via, &bytes, now_ns)
                };
                match action {
                    Action::Forward { rewrite, .. } => Body::Input {
                        len: rewrite.len,
                        rewrite: Some(rewrite),
                    },
                    Action::Transmit { frame, .. } => Body::Owned(frame.to_vec()),
                    Action::Drop(r) => return Some(self.lose(r)),
                    Action::Resolve { frame, .. } => {
                        let req = Body::Owned(frame.to_vec());
                        let _ = self.transmit(
                            engine,
                            ext,
                            t.dev.clone(),
                            input,
                            req,
                            SendKind::Solicit,
                            0,
                            depth,
                            now_ns,
                            way,
                        );
                        return Some(self.lose(DropReason::NoNeighbour));
                    }
                    Action::Reply { .. } | Action::Local | Action::Unreachable { .. } => {
                        return Some(self.lose(DropReason::NotIp));
                    }
                }
            }
        };
        let (tails, i) = match wait {
            Some((tails, i)) => (Some(tails), i),
            None => (None, 0),
        };
        let tail = Tail {
            i,
            dev: t.dev.clone(),
            body: out,
            kind,
            mark,
            depth,
            unreachable: DropReason::NoRoute,
        };
        self.send_tail(engine, ext, tail, input, now_ns, way, tails)
    }

    /// Run the egress hook of `dev` on `body` (made from `input`) and send it (or what the
    /// hook's `fwd`/`dup` make of it). `depth` is the `fwd`/`dup` nesting of this transmit.
    #[allow(clippy::too_many_arguments)]
    fn transmit(
        &mut self,
        engine: &mut Engine,
        mut ext: Option<&mut dyn Extensions>,
        dev: Arc<str>,
        input: &[u8],
        body: Body,
        kind: SendKind,
        mark: u32,
        depth: u32,
        now_ns: u64,
        way: &mut WayOut,
    ) -> Result<(), DropReason> {
        self.check_out(&dev, depth)?;
        let o = if engine.has_hook(Hook::Egress, &dev) {
            let frame = body.bytes(input);
            engine.run(
                At::Egress(&dev),
                &[egress_packet(&frame, mark)],
                now_ns,
                &mut way.hook,
                None,
                re(&mut ext),
            );
            way.hook.outcomes[0]
        } else {
            Outcome::unseen(mark)
        };
        self.after_egress(engine, ext, dev, input, body, kind, &o, depth, now_ns, way)
    }

    /// Whether a frame may leave on `dev` at `depth` `fwd`/`dup` nesting: not past the
    /// recursion limit, not on a device the gateway marks down (the loss counted).
    fn check_out(&mut self, dev: &str, depth: u32) -> Result<(), DropReason> {
        if depth > RECURSION_LIMIT + 1 {
            self.lose(DropReason::Recursion);
            return Err(DropReason::Recursion);
        }
        if self.gateway.as_ref().is_some_and(|g| !g.is_up(dev)) {
            let l = DropReason::DeviceDown;
            self.lose(l);
            return Err(l);
        }
        Ok(())
    }

    /// The rest of [`Forwarder::transmit`] once `dev`'s egress hook gave `o` (an accept with
    /// the packet's mark when `dev` has none): its `dup`s, then the drop, the `fwd`, a tunnel
    /// device's encapsulation, or the send.
    #[allow(clippy::too_many_arguments)]
    fn after_egress(
        &mut self,
        engine: &mut Engine,
        mut ext: Option<&mut dyn Extensions>,
        dev: Arc<str>,
        input: &[u8],
        body: Body,
        kind: SendKind,
        o: &Outcome,
        depth: u32,
        now_ns: u64,
        way: &mut WayOut,
    ) -> Result<(), DropReason> {
        for id in o.dups() {
            if let Some(t) = engine.out_target(id).cloned() {
                let _ = self.transmit(
                    engine,
                    re(&mut ext),
                    t.dev,
                    input,
                    body.clone(),
                    SendKind::Dup,
                    o.mark,
                    depth + 1,
                    now_ns,
                    way,
                );
            }
        }
        if o.verdict == FinalVerdict::Drop {
            self.lose(DropReason::Egress);
            return Err(DropReason::Egress);
        }
        if let Some(id) = o.fwd
            && let Some(t) = engine.out_target(id).cloned()
        {
            return match self.fwd(
                engine,
                ext,
                &t,
                input,
                body,
                SendKind::Fwd,
                o.mark,
                depth + 1,
                now_ns,
                way,
                None,
            ) {
                Some(Fate::Dropped(l)) => Err(l),
                _ => Ok(()),
            };
        }
        // A tunnel device's frame leaves its underlay device encapsulated (its egress hook
        // next).
        if let Some(g) = self.gateway.as_ref()
            && g.has_tunnels()
            && let Some(id) = g.device(&dev)
            && g.tunnel(id).is_some()
        {
            let out = g.tunnel_tx(id, &body.bytes(input));
            return match out {
                Ok((under, frame)) => {
                    let name = self.name(under);
                    self.transmit(
                        engine,
                        ext,
                        name,
                        input,
                        Body::Owned(frame),
                        kind,
                        o.mark,
                        depth,
                        now_ns,
                        way,
                    )
                }
                Err(r) => {
                    let l = r;
                    self.lose(l);
                    Err(l)
                }
            };
        }
        *self.stats.sent.entry(kind).or_default() += 1;
        match self.stats.by_device.get_mut(&*dev) {
            Some(n) => *n += 1,
            None => {
                self.stats.by_device.insert(dev.to_string(), 1);
            }
        }
        way.sends.push(Send { dev, body, kind });
        Ok(())
    }
}

/// The last send of a packet's way out, waiting for its device's egress hook
/// ([`Forwarder::send_tail`]).
#[derive(Debug)]
struct Tail {
    /// The packet's index in the vector (its frame is the input the body is made from).
    i: usize,
    dev: Arc<str>,
    body: Body,
    kind: SendKind,
    mark: u32,
    /// Its `fwd` nesting (1 for an ingress `fwd`, else 0).
    depth: u32,
    /// The loss a [`SendKind::Unreachable`] send stands for.
    unreachable: DropReason,
}

/// A frame to run through an egress hook: `meta mark` `mark`, no input device (the hook's
/// device is the output device), no connection.
fn egress_packet(frame: &[u8], mark: u32) -> Packet<'_> {
    Packet {
        frame,
        meta: wasp_wire::parse(frame),
        iifname: "",
        mark,
        oifname: "",
        ct: wasp_core::CtMeta::NONE,
        ct_detail: None,
        nftrace: false,
        route: None,
    }
}

/// Move packet `i`'s IP hook `log` lines and walk events to `way.logs` and `way.traced`
/// (both sorted by packet, so `i`'s lead), for its `done`.
#[inline(always)]
fn hand_out(way: &mut WayOut, i: usize) {
    if !way.traced.is_empty() {
        way.traced.clear();
    }
    // Most packets have no line and no walk to hand out: two tests.
    if way.ip_logs.first().is_some_and(|l| l.0 == i) {
        let n = way.ip_logs.iter().take_while(|l| l.0 == i).count();
        let lines: Vec<String> = way.ip_logs.drain(..n).map(|l| l.1).collect();
        way.keep_logs(lines);
    }
    if way.ip_trace.first().is_some_and(|l| l.0 == i) {
        let n = way.ip_trace.iter().take_while(|l| l.0 == i).count();
        way.traced.extend(way.ip_trace.drain(..n).map(|l| l.1));
    }
}

/// The fate of a packet a chain dropped with nothing to send (no `dup` copy, no `reject`
/// reply): dropped by the verdict, what [`Forwarder::finish`] gives it. `None` for every other
/// packet.
#[inline]
fn quiet_drop(o: &Outcome) -> Option<Fate> {
    (o.verdict == FinalVerdict::Drop && o.dup == 0 && o.reject.is_none())
        .then_some(Fate::Dropped(DropReason::Verdict))
}

/// `ext` reborrowed for one call (the trait object's lifetime shortened to the borrow's).
fn re<'s>(ext: &'s mut Option<&mut dyn Extensions>) -> Option<&'s mut dyn Extensions> {
    ext.as_deref_mut().map(|e| e as &mut dyn Extensions)
}
