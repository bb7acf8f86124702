//! What the engine reads of a packet's connection and what its rules ask of it: the seam
//! between the chains and connection tracking, NAT and flowtables (which live outside the
//! engine, shared by every worker).
//!
//! The caller tracks the packet first and gives the engine a [`CtMeta`] with it
//! ([`crate::Packet::ct`]); `ct state`, `ct direction`, `ct status` and `ct mark` read it, as
//! the kernel's nft_ct_get_eval reads skb->_nfct. What rules ask of the connection (`ct mark
//! set`, a NAT statement, `flow add`) comes back as [`ConnFx`] per packet
//! ([`crate::HookResult::conn`]); the caller applies it to its tables. `ct count` asks a
//! [`ConnCount`] during the walk ([`crate::Engine::set_conn_count`]), since its answer decides
//! the rule.

use std::net::IpAddr;

use wasp_ruleset::model::{NatFlags, NatKind};

/// `ct state` bits (nft's NF_CT_STATE_* values).
pub mod state {
    /// `invalid`: no connection (also what a packet without one reads).
    pub const INVALID: u32 = 1;
    /// `established`
    pub const ESTABLISHED: u32 = 2;
    /// `related`
    pub const RELATED: u32 = 4;
    /// `new`
    pub const NEW: u32 = 8;
    /// `untracked`
    pub const UNTRACKED: u32 = 64;
}

/// A packet's connection as the chains see it (the kernel's skb->_nfct with its ctinfo).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtMeta {
    /// `ct state`: one of the [`state`] bits.
    pub state: u32,
    /// `ct direction`: 0 original, 1 reply.
    pub dir: u8,
    /// `ct status` (IPS_* bits).
    pub status: u32,
    /// `ct mark`.
    pub mark: u32,
    /// The connection's id; 0 when the packet has none (then every key but `ct state` fails to
    /// load and ends the rule, as nft_ct_get_eval's NFT_BREAK).
    pub id: u64,
    /// `type nat` chains of the hook run for this packet: its connection is new and has no
    /// binding yet for the hook's translation (source at postrouting and input, destination
    /// at prerouting and output), as nf_nat_inet_fn runs the nat chains only then.
    pub nat_pending: bool,
}

impl CtMeta {
    /// A packet without a connection: `ct state` reads `invalid`, other keys end the rule,
    /// nat chains do not run.
    pub const NONE: CtMeta = CtMeta {
        state: state::INVALID,
        dir: 0,
        status: 0,
        mark: 0,
        id: 0,
        nat_pending: false,
    };
}

impl Default for CtMeta {
    fn default() -> Self {
        CtMeta::NONE
    }
}

/// One direction's tuple of a connection, as `ct original|reply saddr|daddr|proto-src|
/// proto-dst` read it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CtTuple {
    /// Source address: 4 bytes of an IPv4 address, or 16 of an IPv6 one, left-aligned.
    pub src: [u8; 16],
    /// Destination address, the same way.
    pub dst: [u8; 16],
    /// Source port (the ICMP id), network order when read.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
}

/// What `ct` keys beyond state, direction, status and mark read (the kernel's
/// `nft_ct_get_eval` of a live entry): the tuples, the timeout left, the accounting, the zone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CtDetail {
    /// `ct l3proto`: 2 (IPv4) or 10 (IPv6).
    pub l3proto: u8,
    /// `ct protocol`: the IP protocol.
    pub protocol: u8,
    /// The original tuple.
    pub orig: CtTuple,
    /// The reply tuple (after NAT).
    pub reply: CtTuple,
    /// `ct expiration`: ms left before the entry times out.
    pub expires_ms: u32,
    /// `ct packets` per direction (original, reply).
    pub packets: [u64; 2],
    /// `ct bytes` per direction.
    pub bytes: [u64; 2],
    /// `ct zone`.
    pub zone: u16,
    /// `ct label`: the connection's labels (bit N is `1 << N`).
    pub label: u128,
}

/// A NAT statement as compiled: what the connection's binding is to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NatSpec {
    /// `snat`, `dnat`, `masquerade` or `redirect`.
    pub kind: NatKind,
    /// Address range, both ends inclusive (`None`: keep the address, or for masquerade the
    /// output device's, for redirect the input device's).
    pub addr: Option<(IpAddr, IpAddr)>,
    /// Port range, both ends inclusive.
    pub ports: Option<(u16, u16)>,
    /// `random`, `fully-random`, `persistent`.
    pub flags: NatFlags,
    /// `snat ip prefix to KEY map { ... }` (NF_NAT_RANGE_NETMAP): see [`NatTarget::netmap`].
    pub prefix: bool,
}

/// A NAT target computed for one packet (`dnat to KEY map { k : ADDR . PORT }`, `dnat to
/// numgen inc mod 2 offset 167772161`): what the connection's binding is to be, in place of
/// the statement's [`NatSpec::addr`] and [`NatSpec::ports`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NatTarget {
    /// Address range, both ends inclusive.
    pub addr: Option<(IpAddr, IpAddr)>,
    /// Port range, both ends inclusive.
    pub ports: Option<(u16, u16)>,
    /// `snat ip prefix to` (NF_NAT_RANGE_NETMAP): the address keeps its host bits under the
    /// range's prefix (`nf_nat_netmap`); the caller computes the one address.
    pub netmap: bool,
}

/// A flowtable as compiled: [`crate::Engine::flowtables`] lists them; `flow add` refers to
/// one by index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowtableSpec {
    /// Index of the table in the ruleset.
    pub table: u32,
    /// Name.
    pub name: String,
    /// `priority N`.
    pub priority: i32,
    /// `devices = { ... }`.
    pub devices: Vec<String>,
    /// `counter`.
    pub counter: bool,
}

/// What the rules asked of one packet's connection during a hook.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnFx {
    /// `ct mark set`: the connection's new mark (the last one set).
    pub mark: Option<u32>,
    /// A NAT statement ran: index into [`crate::Engine::nat_specs`].
    pub nat: Option<u16>,
    /// `flow add @NAME` ran: index into [`crate::Engine::flowtables`].
    pub flow_add: Option<u16>,
    /// The NAT statement's target as computed for this packet (`dnat to EXPR`); `None` for a
    /// statement with a constant target.
    pub nat_target: Option<NatTarget>,
    /// `ct zone set`: the zone (a chain before conntrack puts the packet in it).
    pub zone: Option<u16>,
    /// `ct label set`: the label bits to add to the connection's (bit N is `1 << N`).
    pub label: Option<u128>,
    /// `ct event set`: the connection's event mask (`ct_event` bits).
    pub event: Option<u32>,
    /// `notrack` ran: the packet skips conntrack (before it) and is `untracked`.
    pub notrack: bool,
}

impl ConnFx {
    /// `true` when nothing was asked.
    pub fn is_empty(&self) -> bool {
        *self == ConnFx::default()
    }
}

/// The lists behind `ct count` (nft_connlimit over nf_conncount), shared by every worker.
pub trait ConnCount: Send + Sync + std::fmt::Debug {
    /// Add connection `id` to the list of `ct count` statement `site` (once) and return how
    /// many live connections the list holds then (at `now_ns`, the packet path's clock).
    fn add_and_count(&self, site: u32, id: u64, now_ns: u64) -> u32;
}
