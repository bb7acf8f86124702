//! Connection tracking and NAT with the kernel's `nf_conntrack` / `nf_nat` semantics, sans-IO.
//!
//! A [`Conntrack`] is one table shared by every worker (`Send + Sync`, all methods take `&self`).
//! Every call takes the caller's clock (`now_ns`, nanoseconds on any monotonic clock; replay
//! uses capture time); nothing here reads a clock or makes a system call.
//!
//! The life of a packet, as the kernel's `nf_conntrack_in` ... `nf_conntrack_confirm`:
//!
//! 1. [`Conntrack::track`] finds the packet's connection by its [`Tuple`] (either direction)
//!    and updates it (TCP state, timeout, counters), or gives a packet of an unknown connection
//!    an *unconfirmed* entry ([`CtInfo::pending`]): it has an id and a slot but is not in the
//!    table, so no other packet finds it yet. The result ([`CtInfo`]) is what `ct state`,
//!    `ct direction`, `ct status`, `ct mark` read.
//! 2. The rules may set its mark ([`Conntrack::set_mark`]), count it ([`Conntrack::count_add`]),
//!    bind NAT ([`Conntrack::nat_setup`], [`Conntrack::nat_null_binding`]), and the packet is
//!    rewritten ([`Conntrack::nat_rewrite`], [`NatRewrite::apply`]).
//! 3. When the packet passed the last hook the caller [`Conntrack::confirm`]s the entry (it
//!    enters the table), or [`Conntrack::discard`]s it when the packet is dropped. Confirming a
//!    connection another worker confirmed meanwhile resolves the clash as the kernel's
//!    `nf_ct_resolve_clash` (the existing entry wins).
//!
//! Memory: entries live in 64 shards (`parking_lot::Mutex`), each a slab of entries and an
//! index from both tuples to the slot (`wasp_index`, open addressing); an id
//! names the shard, the slot and the slot's generation, so every by-id call is one lock and no
//! search. A caller with a vector of packets calls [`Conntrack::prefetch`] for each before
//! tracking them, so that their index lookups in a large table overlap their cache misses. See `perf/RESULTS.md` ("Conntrack") for the
//! bytes per flow and the costs.
//!
//! Fragments: reassembly is out of scope, and the kernel's conntrack without defragmentation
//! gives a non-first fragment no connection at all (`ipv4_get_l4proto` / `ipv6_get_l4proto`
//! return -1 for a fragment offset other than 0, nf_conntrack_in counts it `invalid`): so does
//! [`Conntrack::track`] (`ct state invalid`, [`NoTuple::Fragment`]). A first fragment carries
//! its transport header and is tracked as a whole packet would be.
//!
//! What differs from the kernel: no TCP window tracking (see the `tcp` module: as
//! `nf_conntrack_tcp_be_liberal=1`, and RST sequence checks are not made); no helpers or
//! expectations (`EXPECTED` is never set; the ruleset's `ct helper`, `ct timeout` and `ct
//! expectation` objects load, and the statements that attach them to a connection do nothing
//! here: `wasp_ruleset::model::CtObj`); SCTP, DCCP and GRE use the generic tracker (ports
//! 0, 600 s); checksums are not verified (as `nf_conntrack_checksum=0`); NAT's hashes and
//! random port offsets are not the kernel's (same ranges and search, other numbers), and its
//! "same source, same mapping" index (`nf_nat_bysource`) holds confirmed connections only (the
//! kernel adds a connection at binding time); the table limit counts
//! unconfirmed entries as the kernel does, but early drop looks at 8 slots of the new tuple's
//! shard rather than 8 hash buckets; `ct count` lists are checked whole on every add.
#![forbid(unsafe_code)]

mod count;
mod display;
mod nat;
mod rewrite;
mod table;
mod tcp;
mod tuple;

pub use display::EntryInfo;
pub use nat::{Manip, NatError, NatRange};
pub use rewrite::{NatRewrite, RewriteError};
pub use table::{Config, ConfirmError, Conntrack, PREFETCH_MIN, Stats, Teardown};
pub use tcp::{TcpState, Timeouts};
pub use tuple::{NoTuple, Tuple, proto};

/// `ct state` bits as nftables reads them (`NF_CT_STATE_*_BIT`, nft's `ct_state` type).
pub mod ct_state {
    /// The packet has no connection (`invalid`).
    pub const INVALID: u32 = 1;
    /// `established` (IP_CT_ESTABLISHED and IP_CT_ESTABLISHED_REPLY).
    pub const ESTABLISHED: u32 = 2;
    /// `related` (an ICMP error about a tracked connection).
    pub const RELATED: u32 = 4;
    /// `new` (an original-direction packet of a connection without a reply yet).
    pub const NEW: u32 = 8;
    /// `untracked` (ICMPv6 neighbour discovery and MLD, as `nf_conntrack_icmpv6_error`).
    pub const UNTRACKED: u32 = 64;
}

/// Connection status bits (`enum ip_conntrack_status`, the kernel's values; `ct status`).
pub mod status {
    /// IPS_EXPECTED (never set here: no helpers).
    pub const EXPECTED: u32 = 1 << 0;
    /// IPS_SEEN_REPLY: a packet was seen in the reply direction.
    pub const SEEN_REPLY: u32 = 1 << 1;
    /// IPS_ASSURED: not early-dropped when the table is full.
    pub const ASSURED: u32 = 1 << 2;
    /// IPS_CONFIRMED: in the table.
    pub const CONFIRMED: u32 = 1 << 3;
    /// IPS_SRC_NAT: the source is translated.
    pub const SRC_NAT: u32 = 1 << 4;
    /// IPS_DST_NAT: the destination is translated.
    pub const DST_NAT: u32 = 1 << 5;
    /// IPS_SRC_NAT_DONE: the source NAT binding is made (`nf_nat_initialized`).
    pub const SRC_NAT_DONE: u32 = 1 << 7;
    /// IPS_DST_NAT_DONE: the destination NAT binding is made.
    pub const DST_NAT_DONE: u32 = 1 << 8;
    /// IPS_DYING: being removed.
    pub const DYING: u32 = 1 << 9;
    /// IPS_FIXED_TIMEOUT: packets do not change the timeout.
    pub const FIXED_TIMEOUT: u32 = 1 << 10;
    /// IPS_OFFLOAD: the flow is in a flowtable.
    pub const OFFLOAD: u32 = 1 << 14;
    /// IPS_HW_OFFLOAD: the flow is in hardware.
    pub const HW_OFFLOAD: u32 = 1 << 15;
}

/// Direction of a packet in its connection (`ct direction`: original 0, reply 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum Dir {
    /// Same direction as the connection's first packet.
    #[default]
    Original = 0,
    /// The other direction.
    Reply = 1,
}

impl Dir {
    /// The other direction.
    pub fn flip(self) -> Dir {
        match self {
            Dir::Original => Dir::Reply,
            Dir::Reply => Dir::Original,
        }
    }
}

/// What [`Conntrack::track`] found for a packet: the values of `ct state`, `ct direction`,
/// `ct status`, `ct mark`, and the connection's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CtInfo {
    /// One [`ct_state`] bit: `INVALID` when the packet has no connection (`id` is 0),
    /// `UNTRACKED`, or `NEW` / `ESTABLISHED` / `RELATED` (the kernel's ctinfo).
    pub state: u32,
    /// The packet's direction in the connection (for a related ICMP error, the direction the
    /// error travels in).
    pub dir: Dir,
    /// The connection's [`status`] bits after this packet.
    pub status: u32,
    /// The connection's mark (`ct mark`).
    pub mark: u32,
    /// The connection's id (never 0), or 0 without a connection.
    pub id: u64,
    /// The connection is unconfirmed: this packet created it; the caller must
    /// [`Conntrack::confirm`] or [`Conntrack::discard`] it.
    pub pending: bool,
    /// Drop the packet: the table is full and nothing could be early-dropped (the kernel's
    /// `nf_conntrack_in` returns NF_DROP, "table full, dropping packet").
    pub drop: bool,
}

impl CtInfo {
    /// A packet without a connection (`ct state invalid`).
    pub const INVALID: CtInfo = CtInfo {
        state: ct_state::INVALID,
        dir: Dir::Original,
        status: 0,
        mark: 0,
        id: 0,
        pending: false,
        drop: false,
    };

    /// Whether the packet has a connection.
    pub fn tracked(&self) -> bool {
        self.id != 0
    }
}

#[cfg(test)]
mod tests;
