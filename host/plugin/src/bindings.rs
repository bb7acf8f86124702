//! The world `wasp-plugin` as wasmtime sees it (generated from `wit/plugin.wit`), and the
//! host side of its imports: the per-instance store state.

use std::sync::Arc;

use wasmtime::ResourceLimiter;

wasmtime::component::bindgen!({
    world: "wasp-plugin",
    path: "../../wit",
});

pub(crate) use wasp::plugin::types::{Clock, Edit, EditOp, Kind, Level, Verdict};

/// Most events one instance may queue between two drains; the rest are counted as dropped.
pub(crate) const MAX_PENDING_EVENTS: usize = 4096;

/// A timer request made by the guest during a call, applied by the runtime after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimerOp {
    Arm {
        key: u64,
        clock: Clock,
        deadline: u64,
    },
    Cancel {
        key: u64,
    },
}

/// The embedder's look-up for `set-contains`: (plugin name, set name, key bytes).
pub(crate) type SetFn = Arc<dyn Fn(&str, &str, &[u8]) -> bool + Send + Sync>;

/// Memory limit of one instance, remembering whether it was hit.
pub(crate) struct MemLimit {
    pub(crate) max: usize,
    pub(crate) hit: bool,
}

impl ResourceLimiter for MemLimit {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max {
            self.hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

/// What a plugin instance's store holds: the clocks as the runtime set them, and what the
/// guest asked for during a call (timers, events).
pub(crate) struct StoreState {
    pub(crate) plugin: Arc<str>,
    pub(crate) now_mono: u64,
    pub(crate) now_boot: u64,
    pub(crate) ops: Vec<TimerOp>,
    pub(crate) events: Vec<String>,
    pub(crate) dropped_events: u64,
    pub(crate) set_fn: Option<SetFn>,
    pub(crate) limit: MemLimit,
    /// The epoch tick period (to turn a deadline in ticks into CPU time).
    pub(crate) tick: std::time::Duration,
    /// CPU time the current call may still use once its wall-clock deadline has passed.
    pub(crate) budget: std::time::Duration,
    /// This thread's CPU time when the current call's wall-clock deadline passed (`None`
    /// until it does).
    pub(crate) cpu_mark: Option<std::time::Duration>,
    /// The rate limit on the plugin's log lines (`host.log`, WASI stdout and stderr).
    pub(crate) log_limit: crate::loglimit::LogLimit,
    /// WASI for guests that import it, made on first use.
    pub(crate) wasi: Option<crate::wasi::WasiState>,
}

impl StoreState {
    /// `log_limit` is the plugin's (shared by every instance of it, re-created ones too).
    pub(crate) fn new(
        plugin: Arc<str>,
        max_memory: usize,
        set_fn: Option<SetFn>,
        log_limit: crate::loglimit::LogLimit,
    ) -> Self {
        StoreState {
            plugin,
            now_mono: 0,
            now_boot: 0,
            ops: Vec::new(),
            events: Vec::new(),
            dropped_events: 0,
            set_fn,
            limit: MemLimit {
                max: max_memory,
                hit: false,
            },
            tick: std::time::Duration::from_millis(1),
            budget: std::time::Duration::ZERO,
            cpu_mark: None,
            log_limit,
            wasi: None,
        }
    }
}

impl wasp::plugin::types::Host for StoreState {}

impl wasp::plugin::host::Host for StoreState {
    fn monotonic_ns(&mut self) -> u64 {
        self.now_mono
    }

    fn boottime_ns(&mut self) -> u64 {
        self.now_boot
    }

    fn timer_arm(&mut self, key: u64, clock: Clock, deadline_ns: u64) {
        if self.ops.len() < 1 << 16 {
            self.ops.push(TimerOp::Arm {
                key,
                clock,
                deadline: deadline_ns,
            });
        }
    }

    fn timer_cancel(&mut self, key: u64) {
        if self.ops.len() < 1 << 16 {
            self.ops.push(TimerOp::Cancel { key });
        }
    }

    fn emit(&mut self, event: String) {
        if self.events.len() < MAX_PENDING_EVENTS {
            self.events.push(event);
        } else {
            self.dropped_events += 1;
        }
    }

    fn log(&mut self, level: Level, message: String) {
        let plugin = &*self.plugin;
        self.log_limit.log(plugin, || match level {
            Level::Error => tracing::error!(plugin, "{message}"),
            Level::Warn => tracing::warn!(plugin, "{message}"),
            Level::Info => tracing::info!(plugin, "{message}"),
            Level::Debug => tracing::debug!(plugin, "{message}"),
            Level::Trace => tracing::trace!(plugin, "{message}"),
        });
    }

    fn set_contains(&mut self, set: String, key: Vec<u8>) -> bool {
        match &self.set_fn {
            Some(f) => f(&self.plugin, &set, &key),
            None => false,
        }
    }
}
