//! wasp's data path, sans-IO: a ruleset compiled into an [`Engine`] that takes vectors of packets
//! and `now`, and returns a verdict per packet (and, on request, the trace of its walk).
//!
//! Semantics are the kernel's nf_tables: base chains of one hook run in priority order, a rule's
//! statements run left to right, `accept` ends the hook's current base chain walk and the next
//! base chain on the hook runs, `drop` ends everything, `jump`/`goto`/`return` use a call stack,
//! and a base chain's policy applies when its rules run out.
//!
//! Modules: [`packet`] (the base types: packet, outcome, output target), [`engine`] (compile
//! and configure), `hooks` (the one entry point [`Engine::run`] and its [`HookResult`]),
//! `counters` (counter readout), `compile` (model to the compiled program, load-time checks), `compiled` (the compiled types:
//! `compiled::Chain`, `compiled::Rule`, `compiled::Verdict`, ...), `field`
//! (where fields live, implicit dependencies), `merge` (nft's merge of adjacent payload matches),
//! `expr` (loads and comparisons), `compare` (matches lowered to their field's width, the read
//! cache), `eval` (one packet, the reference walk), `pipeline` (the vector pipeline), `trace`
//! (event text), `setstore` (compiled sets in their kernel back-ends), `set_update` (element
//! changes applied to the compiled sets without a compile: [`SetUpdate`]), `held` (a large
//! set's elements listed from its compiled set, so that the model keeps no copy:
//! [`Engine::hold_elements`]).
//!
//! Speed (see `cargo bench -p wasp-core` and `perf/`'s `ruleset-scaling`): matches run at the
//! width of their field; the vector pipeline runs each operation once per vector over a bitmask
//! of packets; a rule's leading dependency tests that the previous rule also made (`meta
//! protocol ip`, `meta l4proto tcp`) are answered from the previous rule's results; and within a
//! vector a payload field that several rules test is read once per packet. None of these
//! changes a verdict: the differential property test checks the pipeline against the per-packet
//! walk with and without the remembered answers, and the conformance harness against the
//! kernel.
#![forbid(unsafe_code)]

mod anon_counters;
mod calc;
pub mod carry;
mod compare;
mod compile;
mod compiled;
pub mod conn;
mod counters;
mod dynset;
pub mod engine;
mod eval;
mod expr;
pub mod ext;
mod fib_rt;
mod field;
mod held;
mod hooks;
mod merge;
pub mod packet;
mod payload_set;
mod pipeline;
pub mod route;
mod set_oracle;
mod set_update;
mod setstore;
pub mod stateful;
mod trace;

#[cfg(test)]
mod tests;

pub use anon_counters::AnonSetElemCounter;
pub use calc::jhash;
pub use carry::DynamicSet;
pub use compile::MAX_JUMP_LEVEL;
pub use conn::{ConnCount, ConnFx, CtDetail, CtMeta, CtTuple, FlowtableSpec, NatSpec, NatTarget};
pub use counters::{CounterValue, NamedCounter, QuotaOf, SetElemCounter};
pub use dynset::DynElemView;
pub use engine::Engine;
pub use ext::{
    COUNTER_PLUGIN, CountedElems, CounterSource, CounterUse, DupCopies, DupCopy, DupPoint, ExtEdit,
    ExtKind, ExtPacket, ExtSite, ExtVerdict, Extensions, Fallback, apply_edits, edited_frames,
};
pub use held::HOLD_MIN;
pub use hooks::{At, ChainStats, HookResult, Steal};
pub use packet::{
    Decision, FinalVerdict, MAX_OUT_TARGETS, MAX_VECTOR, OutId, OutTarget, Outcome, Packet, Reject,
    TraceEvent, TraceSink,
};
pub use set_oracle::SetOracle;
pub use set_update::SetUpdate;
pub use stateful::Stateful;
