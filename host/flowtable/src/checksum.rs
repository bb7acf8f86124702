//! The checksum helpers the flowtable's edits need: a per-flow constant "delta" (the ones'
//! complement sum of `~old + new` over every 16-bit word an edit changes) is computed once when
//! a flow is added, and each packet's checksum is updated with one addition (RFC 1624 eqn. 3,
//! `HC' = ~(~HC + delta)`, by the views of [`wasp_wire`]; the TTL decrement's constant delta is
//! [`wasp_wire::ipv4::TTL_DECREMENT_DELTA`]): [`wasp_wire::checksum`].

pub(crate) use wasp_wire::checksum::{delta, fold, sum};

#[cfg(test)]
pub(crate) use wasp_wire::checksum::checksum;
