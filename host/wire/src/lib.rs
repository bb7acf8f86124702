//! Zero-copy header views and the per-packet metadata that every expression reads.
//!
//! Each protocol has its own module holding a view type over a byte slice (for example
//! [`ipv4::Packet`]). A view is checked once at construction (`new_checked`) so that none of its
//! accessors can panic or read past the captured length afterwards. Field offsets are named
//! constants in each module's `field` submodule; unknown protocol numbers are kept as numbers,
//! never treated as errors. This crate is the one place that knows header layouts: what other
//! crates write goes through a module's writable view (`PacketMut`, `FrameMut`: fields and
//! incremental checksum updates, RFC 1624) or its `Repr` (a header built from its fields).
//!
//! [`parse`] walks a whole frame once and fills a [`PacketMeta`]: the offsets of every layer, the
//! L3/L4 protocol, fragment information, and the view of the packet that the kernel's netdev
//! ingress hook has (`skb->protocol`, network header, `nft_pktinfo`), which the rule evaluator
//! needs to give the kernel's verdicts. Parsing never fails: a truncated or malformed header is
//! recorded in [`PacketMeta::malformed`] and parsing stops at that layer.
#![forbid(unsafe_code)]

pub mod arp;
mod bytes;
pub mod checksum;
pub mod ethernet;
pub mod geneve;
pub mod icmp;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod ipv6_ext;
pub mod meta;
pub mod ndisc;
pub mod options;
pub mod samples;
pub mod tcp;
pub mod th;
pub mod udp;
pub mod vlan;
pub mod vxlan;

pub use meta::{
    L3Kind, L4Info, MAX_VLAN_TAGS, Malformed, PacketMeta, Tunnel, TunnelKind, VlanTag, exthdr_bit,
    parse,
};

/// Why a header view could not be built over a buffer. Small and allocation-free: this is the
/// packet path's error type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the header's fixed part, or than the length the header itself
    /// announces (IPv4 IHL, TCP data offset, Geneve option length, ...).
    Truncated,
    /// A length field is impossible (IPv4 IHL below 5, TCP data offset below 5), so the header's
    /// extent cannot be known.
    Malformed,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Truncated => f.write_str("header truncated"),
            Error::Malformed => f.write_str("header length field malformed"),
        }
    }
}

impl std::error::Error for Error {}

/// Result of building a header view.
pub type Result<T> = core::result::Result<T, Error>;
