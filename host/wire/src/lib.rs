//! Zero-copy header views and the per-packet metadata that every expression reads.
//!
//! Each protocol has its own module holding a view type (`Foo<'a>`) over a byte slice. A view is
//! checked once at construction (`Foo::new_checked`) so that none of its accessors can panic or
//! read past the captured length afterwards. Field offsets are named constants; unknown protocol
//! numbers are kept as numbers, never treated as errors.
//!
//! [`parse`] walks a whole frame once and fills a [`PacketMeta`]: the offsets of every layer, the
//! L3/L4 protocol, fragment information, and the view of the packet that the kernel's netdev
//! ingress hook has (`skb->protocol`, network header, `nft_pktinfo`), which the rule evaluator
//! needs to give the kernel's verdicts. Parsing never fails: a truncated or malformed header is
//! recorded in [`PacketMeta::malformed`] and parsing stops at that layer.
#![forbid(unsafe_code)]

pub mod meta;

pub use meta::{L3Kind, L4Info, Malformed, PacketMeta, Tunnel, TunnelKind, VlanTag, parse};
