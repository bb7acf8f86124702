//! The flowtable fast path and offload blocks, sans-IO: wasp's model of the kernel's flowtable
//! (Documentation/networking/nf_flowtable.rst, net/netfilter/nf_flow_table_core.c,
//! nf_flow_table_ip.c, nf_flow_table_offload.c).
//!
//! A [`Flowtable`] holds flows: both directions' [`FlowKey`]s (the kernel's
//! `flow_offload_tuple`), each with a cached [`Route`] (output device, MACs, MTU, TTL decrement,
//! NAT, Geneve encapsulation or decapsulation). The gateway adds a flow when a forward chain's
//! `flow add @NAME` runs on a packet of an established connection ([`Flowtable::add`]); from
//! then on the ingress hook asks [`Flowtable::fast_path`] first, and a hit skips every chain:
//! the caller writes the frame with the returned [`FlowEdit`] while copying it into its send
//! buffer, and sends it. A caller with a vector of frames calls [`Flowtable::prefetch`] for
//! each first, so that the key lookups of a large table overlap their cache misses (the key
//! index is `wasp_index`'s).
//!
//! The crate knows no conntrack: a connection is an opaque `ct_id: u64`, and what happens to it
//! comes back as a [`Teardown`] (TCP FIN or RST in the fast path, idleness in [`Flowtable::gc`],
//! [`Flowtable::teardown`] by the caller), with what the caller must set in its conntrack entry
//! documented on [`TeardownReason`] (case C19). The caller's offload check, as
//! `nft_flow_offload_eval`: only a confirmed entry, TCP only ESTABLISHED without FIN/RST, and only
//! once (test-and-set its offload bit before [`Flowtable::add`], clear it on teardown).
//!
//! Offload blocks ([`OffloadBlock`]) are told of flow add, delete and stats requests, like the
//! kernel's flow block callbacks; their list is guarded by a reader-writer lock (or a mutex:
//! [`BlockLock`]). [`HwModel`] is a software model of a NIC's offload table.
//!
//! Not done: VLAN / PPPoE encapsulated frames (the kernel pops one tag: `nf_flow_encap_pop`)
//! miss; GRE flows; IPv4 fragments and options, IPv6 extension headers miss (as the kernel);
//! GSO (a frame over the MTU always goes slow); XFRM routes; a flow is not re-offered to a block
//! registered after it was added (the kernel re-offers on refresh).

#![forbid(unsafe_code)]

mod block;
mod checksum;
mod edit;
mod hw;
mod key;
mod route;
mod table;
#[cfg(test)]
mod tests;

pub use block::{BlockLock, BlockSlot, BlockStats, FlowView, OffloadBlock, OffloadError};
pub use edit::{EditError, FlowEdit};
pub use hw::HwModel;
pub use key::{Dir, FlowKey, TCP, UDP};
pub use route::{EncapTemplate, GeneveEncap, NatEdit, Route, TunnelWork};
pub use table::{
    AddError, BlockError, DEFAULT_TIMEOUT_NS, EventSink, FastPath, FlowCounters, FlowEvent,
    FlowEventKind, FlowId, FlowInfo, FlowSpec, Flowtable, FlowtableConfig, FlowtableStats,
    OffloadState, PREFETCH_MIN, SlowReason, Teardown, TeardownReason,
};
