//! wasp's plugin host: loads WebAssembly components built against `wit/plugin.wit`
//! (`wasp:plugin@0.1.3`, and every 0.1.y before it: [`contract`]) and serves them to the engine through [`wasp_core::Extensions`].
//!
//! - [`PluginHost`]: one wasmtime engine (Cranelift, component model, pooling allocator with a
//!   memory limit per instance, epoch interruption driven by a ticker thread). Shared by all
//!   workers; [`PluginHost::load`] compiles a component, checks it against the world and asks
//!   it to `describe` itself, giving a [`Plugin`].
//! - [`Runtime`]: one per worker, one instance per plugin, implements
//!   [`wasp_core::Extensions`]. Calls are batched: one call per vector with one flat buffer
//!   (the WIT layout), an epoch deadline per call, results checked; a trap, a deadline or
//!   memory limit hit, or a malformed result gives every packet of the call the use site's
//!   fallback, is counted and reported as an event, and the instance is re-created.
//! - [`PluginBlock`]: a component of the world `wasp-offload-block` as a flowtable offload
//!   block (`wasp_flowtable::OffloadBlock`): one instance for every worker, behind a mutex.
//! - Hot swap: [`Runtime::swap`] between vectors, or [`SwapHandle::request`] from another
//!   thread (applied at the next vector boundary).
//!
//! Costs that shaped this (../../shared/research/plugins.md): a component call costs about
//! 165 ns, a batched call with one flat buffer about 15 ns per packet.

// One module has unsafe code: `area` (wasmtime's `unsafe` lowering traits, to write a batch
// straight into a plugin's memory); everything else is safe.
#![deny(unsafe_code)]

mod area;
mod bindings;
pub mod contract;
mod error;
mod host;
mod loglimit;
mod offload;
mod pack;
mod runtime;
mod timers;
mod wasi;

pub use contract::{CONTRACT_VERSION, HISTORY, NameCheck, Version, check_name};
pub use error::{FailureReason, PluginError};
pub use host::{Compiled, HostConfig, Interfaces, Plugin, PluginHost, PluginInfo};
pub use offload::{PluginBlock, PluginBlockCounts};
pub use runtime::{
    Backoff, FailureCounts, PluginCounts, PluginEvent, Runtime, SetLookup, StateEntry, StateMove,
    SwapHandle, SwapOutcome,
};
pub use timers::SharedTimers;
