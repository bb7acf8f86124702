//! The Internet checksum (RFC 1071), its incremental update (RFC 1624) and the IPv6
//! pseudo-header sum: [`wasp_wire::checksum`], the one implementation the gateway, conntrack's
//! NAT and the flowtable share.

pub use wasp_wire::checksum::{
    adjust, apply, checksum, delta, fold, icmpv6, pseudo_v6, sum, update,
};
