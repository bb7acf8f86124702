//! wasp's data path, sans-IO: a ruleset compiled into an [`Engine`] that takes vectors of packets
//! and `now`, and returns a verdict per packet (and, on request, the trace of its walk).
//!
//! Semantics are the kernel's nf_tables: base chains of one hook run in priority order, a rule's
//! statements run left to right, `accept` ends the hook's current base chain walk and the next
//! base chain on the hook runs, `drop` ends everything, `jump`/`goto`/`return` use a call stack,
//! and a base chain's policy applies when its rules run out.
#![forbid(unsafe_code)]

pub mod engine;

pub use engine::{Decision, Engine, FinalVerdict, Outcome, Packet, TraceEvent, TraceSink};
