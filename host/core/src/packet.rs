//! The types at the bottom of the data path: a packet as a hook sees it, the outcome of its
//! walk, where `fwd` and `dup` send it, and the trace of the walk. Every other module of core
//! builds on these; this one imports nothing of core but the connection and route views a
//! packet carries.

use wasp_ruleset::model::RejectKind;
use wasp_wire::PacketMeta;

use crate::conn::CtMeta;

/// Largest number of packets in one vector.
pub const MAX_VECTOR: usize = 64;

/// One packet of a vector, as the engine sees it.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// The frame as received (Ethernet header first), captured length.
    pub frame: &'a [u8],
    /// Metadata from [`wasp_wire::parse`] of `frame`.
    pub meta: PacketMeta,
    /// Input device name (`meta iifname`).
    pub iifname: &'a str,
    /// `meta mark` on entry (0 for a fresh packet).
    pub mark: u32,
    /// Output device name (`meta oifname`) at the forward, output and postrouting hooks once
    /// the route is known; empty elsewhere (at the netdev egress hook the hook's device is the
    /// output device).
    pub oifname: &'a str,
    /// The packet's connection ([`CtMeta::NONE`] when it is not tracked: netdev hooks, or no
    /// conntrack).
    pub ct: CtMeta,
    /// The connection's tuples and accounting, for the `ct` keys that read them (`None`:
    /// those keys end the rule, as for a packet without a connection).
    pub ct_detail: Option<&'a crate::conn::CtDetail>,
    /// `meta nftrace` on entry: set when `meta nftrace set 1` marked the packet at an earlier
    /// hook (the kernel's `skb->nf_trace`, which stays with the packet from hook to hook);
    /// `false` for a fresh packet. A marked packet's walk is traced from the hook's start.
    pub nftrace: bool,
    /// The router's FIB and the packet's route, for `fib` and `rt` (see [`crate::route`]):
    /// given by the gateway at the IP hooks; `None` elsewhere (those keys then end the rule).
    pub route: Option<&'a dyn crate::route::RouteView>,
}

/// Final verdict of a packet on a hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FinalVerdict {
    /// Delivered.
    Accept,
    /// Dropped.
    Drop,
}

/// Which chain and rule gave a packet its final verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    /// Index of the table in the ruleset.
    pub table: u32,
    /// Index of the chain in its table.
    pub chain: u32,
    /// Handle of the rule, or `None` when the chain's policy decided.
    pub rule: Option<u64>,
}

/// The result for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Accept or drop.
    pub verdict: FinalVerdict,
    /// The deciding chain and rule; `None` when no base chain saw the packet: with verdict
    /// accept when no chain of the hook ran (none registered, or an inet chain skipped a non-IP
    /// frame), with verdict drop when the kernel discards the frame before the hook (a VLAN tag
    /// cut short, see [`PacketMeta::untag_drop`]) or an inet ingress chain drops a malformed IP
    /// header before its rules.
    pub decision: Option<Decision>,
    /// `meta mark` after the walk.
    pub mark: u32,
    /// A `fwd` statement stole the packet (NF_STOLEN, nft_fwd_netdev_eval /
    /// nft_fwd_neigh_eval): it leaves on this output target ([`crate::Engine::out_target`]) and the
    /// hook's later rules and base chains did not see it. `verdict` is then
    /// [`FinalVerdict::Accept`] and `decision` the `fwd` rule; the packet is not delivered to the
    /// host side. `None` when no `fwd` ran.
    pub fwd: Option<OutId>,
    /// `dup` statements that ran (nft_dup_netdev_eval): bit `i` set when a copy of the packet,
    /// as it was then, leaves on output target `i` ([`crate::Engine::out_target`]), whatever the final
    /// verdict. Several `dup`s to one target give one copy here (the kernel sends one per
    /// statement).
    pub dup: u64,
    /// A `reject` statement dropped the packet (`verdict` is then [`FinalVerdict::Drop`]):
    /// the reply it asked for, which `wasp_gateway::Forwarder::after_ingress` builds and
    /// sends back out of the input device (`wasp_gateway::reject`). `None` otherwise.
    pub reject: Option<Reject>,
}

/// What a `reject` statement asked for: the reply and which of the kernel's ways of replying
/// its chain's family takes (`wasp_gateway::reject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reject {
    /// The reply (`with tcp reset`, `with icmp ...`).
    pub kind: RejectKind,
    /// The rule is in a netdev table (nft_reject_netdev_eval: the reply is built from the
    /// frame and leaves on the input device as it is); else ip, ip6 or inet (nf_send_reset,
    /// nf_send_unreach: the reply is routed, an ICMP error is icmp_send's).
    pub netdev: bool,
}

impl Outcome {
    /// The outcome of a packet that no chain touched: accept, no decision, `mark`, no
    /// `fwd`/`dup`.
    pub fn unseen(mark: u32) -> Self {
        Outcome {
            verdict: FinalVerdict::Accept,
            decision: None,
            mark,
            fwd: None,
            dup: 0,
            reject: None,
        }
    }

    /// The output targets of [`Outcome::dup`], in id order.
    pub fn dups(&self) -> impl Iterator<Item = OutId> + use<> {
        let mut m = self.dup;
        std::iter::from_fn(move || {
            (m != 0).then(|| {
                let i = m.trailing_zeros();
                m &= m - 1;
                OutId(i as u16)
            })
        })
    }
}

/// Largest number of different output targets (`fwd`/`dup` devices and next hops) of a ruleset.
pub const MAX_OUT_TARGETS: usize = 64;

/// An output target of `fwd` / `dup` statements: index into [`crate::Engine::out_targets`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OutId(pub u16);

/// Where a `fwd` or `dup` statement sends a packet.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OutTarget {
    /// Output device name (`fwd to "dev"`, `dup to "dev"`, `... device "dev"`), shared: each
    /// frame sent there carries it without an allocation.
    pub dev: std::sync::Arc<str>,
    /// `fwd ip|ip6 to ADDR device "dev"`: the next hop whose link-layer address the frame gets
    /// (the kernel's neigh_xmit), after the TTL / hop limit was decremented (nft_fwd_neigh_eval
    /// decrements it without checking it first). `None` for `fwd to` / `dup to`: the frame
    /// leaves as it is.
    pub via: Option<std::net::IpAddr>,
}

/// One step of a packet's walk, as `nft monitor trace` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceEvent {
    /// A rule matched and gave a verdict or ran a statement that the trace reports.
    Rule {
        /// Index of the packet in its vector.
        packet: usize,
        /// Table index.
        table: u32,
        /// Chain index.
        chain: u32,
        /// Rule handle.
        handle: u64,
        /// Verdict text (`accept`, `drop`, `jump x`, `continue`, ...).
        verdict: String,
    },
    /// The end of a chain was reached: `return` to the caller, or the base chain's policy.
    ChainEnd {
        /// Index of the packet in its vector.
        packet: usize,
        /// Table index.
        table: u32,
        /// Chain index.
        chain: u32,
        /// `Some(policy)` for a base chain, `None` for an implicit return.
        policy: Option<FinalVerdict>,
    },
    /// A plugin use site ran on the packet.
    Plugin {
        /// Index of the packet in its vector.
        packet: usize,
        /// The use site ([`crate::Engine::ext_sites`]).
        site: u32,
        /// What it answered: `match` / `no match` for a match; `continue`, `accept`, `drop`
        /// or `return` for a statement.
        result: String,
    },
    /// `log` statement output.
    Log {
        /// Index of the packet in its vector.
        packet: usize,
        /// The prefix and the packet summary, as the kernel log line would show them.
        text: String,
    },
}

impl TraceEvent {
    /// The packet the event is of (its index in its hook call's vector), to read or to
    /// renumber (a caller that joins the walks of several hook calls).
    pub fn packet_mut(&mut self) -> &mut usize {
        match self {
            TraceEvent::Rule { packet, .. }
            | TraceEvent::ChainEnd { packet, .. }
            | TraceEvent::Plugin { packet, .. }
            | TraceEvent::Log { packet, .. } => packet,
        }
    }

    /// The packet the event is of (its index in its hook call's vector).
    pub fn packet(&self) -> usize {
        match self {
            TraceEvent::Rule { packet, .. }
            | TraceEvent::ChainEnd { packet, .. }
            | TraceEvent::Plugin { packet, .. }
            | TraceEvent::Log { packet, .. } => *packet,
        }
    }
}

/// Where trace events go.
pub trait TraceSink {
    /// Record one event.
    fn event(&mut self, ev: TraceEvent);

    /// `true` (the default) when the sink wants every event of the walk; `false` when it only
    /// wants [`TraceEvent::Log`] (the lines of `log` statements): the engine then makes no
    /// other event, so giving such a sink costs nothing on rules without `log`.
    fn walk(&self) -> bool {
        true
    }

    /// `true` when the sink wants the walk events only of the packets that `meta nftrace set
    /// 1` marked, from the rule that marked them on, as `nft monitor trace` shows them (the
    /// kernel traces a packet once `nf_trace` is set); `false` (the default) for every packet.
    /// Only read when [`TraceSink::walk`] is `true`.
    fn marked_only(&self) -> bool {
        false
    }
}

/// `meta nfproto` of a packet as the inet family sees it.
pub(crate) fn nfproto(protocol: u16) -> u8 {
    match protocol {
        0x0800 => 2,
        0x86dd => 10,
        _ => 0,
    }
}
