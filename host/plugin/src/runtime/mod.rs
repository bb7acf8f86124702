//! The per-worker runtime: [`Runtime`] holds one instance per plugin and the use sites
//! configured on them, and serves them to the engine as [`wasp_core::Extensions`]. A runtime
//! belongs to one worker; other threads reach it only through a [`SwapHandle`].
//!
//! - `sites`: configuring and releasing use sites, listing and resetting their state.
//! - `calls`: the packet calls, one batched call per vector and use site.
//! - `containment`: every call into a plugin is guarded (epoch deadline, memory limit); a
//!   failure gives the call's packets the use site's fallback, is counted and reported as an
//!   event, and the instance is re-created; use sites whose calls keep failing back off.
//! - `clocks`: the two clocks, and the plugins' timers, fired at the vector boundary.
//! - `swap`: hot swap of a plugin's version, now or at the next vector boundary.

mod calls;
mod clocks;
mod containment;
mod handover;
mod sites;
mod swap;

use std::collections::HashMap;
use std::sync::Arc;

use wasp_core::{ExtKind, Fallback};

use crate::error::PluginError;
use crate::host::{Live, Plugin, PluginHost};
use crate::timers::{SharedTimers, TimerQueue};

pub use containment::{Backoff, FailureCounts};
pub use swap::{StateMove, SwapHandle, SwapOutcome};

/// The embedder's look-up behind the host import `set-contains`: called with (plugin name,
/// set name, key bytes as the set's type has them), true when the set holds the key.
pub type SetLookup = Arc<dyn Fn(&str, &str, &[u8]) -> bool + Send + Sync>;

/// An event for the control side: emitted by a plugin (`idletimer wlan0 expired`), or by the
/// host about a plugin (`plugin geneve trapped: ...`, a swap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginEvent {
    /// The runtime's monotonic clock when it was recorded, ns (the capture's time in a replay).
    pub at_ns: u64,
    /// The plugin's name as the runtime knows it.
    pub plugin: String,
    /// The text, e.g. `idletimer wlan0 expired`.
    pub text: String,
}

/// One listed piece of a use site's state (WIT `state-entry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateEntry {
    /// The set element's id + 1, or 0 for the use site itself.
    pub elem: u32,
    /// Named values, e.g. `[("packets", 12), ("bytes", 1440)]`.
    pub values: Vec<(String, u64)>,
    /// Free text, printed as is.
    pub text: String,
}

/// One plugin's counts in one runtime ([`Runtime::plugin_counts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginCounts {
    /// The plugin's name in the runtime.
    pub name: String,
    /// Calls into its instance.
    pub calls: u64,
    /// Swaps to another version that went through.
    pub swaps: u64,
    /// Failed and skipped calls, per reason.
    pub failures: FailureCounts,
}

/// A plugin in a runtime: its current version and instance.
struct Slot {
    name: Arc<str>,
    plugin: Plugin,
    live: Option<Live>,
    failures: FailureCounts,
    /// Calls into the instance (each vector at a use site is one; setup calls too).
    calls: u64,
    /// Swaps to another version that went through.
    swaps: u64,
    /// Re-creating the instance failed and was reported; not reported again until it works.
    recreate_failed: bool,
}

/// A configured use site.
struct Site {
    slot: usize,
    kind: ExtKind,
    args: Vec<String>,
    fallback: Fallback,
    /// Its calls that failed in a row.
    streak: u32,
    /// Calls still to skip (backing off).
    skip: u32,
    /// Length of its next back-off (0: [`Backoff::first`]).
    next_backoff: u32,
}

impl Site {
    fn new(slot: usize, kind: ExtKind, args: &[String], fallback: Fallback) -> Site {
        Site {
            slot,
            kind,
            args: args.to_vec(),
            fallback,
            streak: 0,
            skip: 0,
            next_backoff: 0,
        }
    }
}

/// Plugins as one worker runs them: one instance per plugin, implementing
/// [`wasp_core::Extensions`]. Not shared between threads (move it to its worker).
pub struct Runtime {
    host: PluginHost,
    slots: Vec<Slot>,
    by_name: HashMap<String, usize>,
    sites: Vec<Option<Site>>,
    timers: TimerQueue,
    events: Vec<PluginEvent>,
    now: [u64; 2],
    set_fn: Option<SetLookup>,
    buf: Vec<u8>,
    swaps: SwapHandle,
    /// Whether the last `matches`/`apply` call failed (`Extensions::last_call_failed`).
    last_failed: bool,
    backoff: Backoff,
    /// Whether matches use a plugin's `fast-match` export when it has one.
    fast_match: bool,
    /// Whether `fast-match` batches go into a plugin's batch area when it has one.
    batch_area: bool,
    /// The timer table shared with other workers' runtimes, and this runtime's member index.
    share: Option<(Arc<SharedTimers>, usize)>,
}

impl Runtime {
    /// An empty runtime on `host`.
    pub fn new(host: &PluginHost) -> Runtime {
        Runtime {
            host: host.clone(),
            slots: Vec::new(),
            by_name: HashMap::new(),
            sites: Vec::new(),
            timers: TimerQueue::default(),
            share: None,
            events: Vec::new(),
            now: [0, 0],
            set_fn: None,
            buf: Vec::new(),
            swaps: SwapHandle::new(),
            last_failed: false,
            backoff: Backoff::default(),
            fast_match: true,
            batch_area: true,
        }
    }

    /// Whether matches go through a plugin's `fast-match` export when it has one (default
    /// true: `matches-first` with its first window, then `matches` with the whole window for
    /// the packets that need more). Off, every match is one `plugin.matches` call with the
    /// whole window, as for a plugin without the export (for comparison in benchmarks).
    pub fn set_fast_match(&mut self, on: bool) {
        self.fast_match = on;
    }

    /// Whether `fast-match` batches are written straight into the plugin's memory when it
    /// exports `area-match` (default true: `matches-first-at`, the records written into its
    /// batch area while the call's arguments are lowered). Off, they go as a `list<u8>`
    /// through `matches-first`, as for a plugin without the export (the safe twin of the
    /// same path; for comparison in benchmarks and tests). The answers are the same.
    pub fn set_batch_area(&mut self, on: bool) {
        self.batch_area = on;
    }

    /// Set how use sites whose calls keep failing back off (default [`Backoff::default`]).
    pub fn set_backoff(&mut self, backoff: Backoff) {
        self.backoff = backoff;
    }

    /// Add `plugin` under `name` (the name use sites give in
    /// [`ExtSite::plugin`](wasp_core::ExtSite::plugin)) and create its instance. Adding a name
    /// again replaces nothing and is an error.
    pub fn add(&mut self, name: &str, plugin: &Plugin) -> Result<(), PluginError> {
        if self.by_name.contains_key(name) {
            return Err(PluginError::Instantiate {
                plugin: name.to_string(),
                msg: "a plugin of this name is already added".into(),
            });
        }
        let name: Arc<str> = name.into();
        let live = plugin.instantiate(name.clone(), self.set_fn.clone())?;
        self.by_name.insert(name.to_string(), self.slots.len());
        self.slots.push(Slot {
            name,
            plugin: plugin.clone(),
            live: Some(live),
            failures: FailureCounts::default(),
            calls: 0,
            swaps: 0,
            recreate_failed: false,
        });
        Ok(())
    }

    /// Install the look-up behind `set-contains` (without one, every look-up is false). Takes
    /// effect for instances created from now on; call it before [`Runtime::add`].
    pub fn set_lookup(&mut self, f: SetLookup) {
        self.set_fn = Some(f);
        self.book_set_fn();
    }

    /// The plugin added under `name` (its current version).
    pub fn plugin(&self, name: &str) -> Option<&Plugin> {
        self.by_name.get(name).map(|&i| &self.slots[i].plugin)
    }

    /// Failed calls of plugin `name`, per reason.
    pub fn failures(&self, name: &str) -> FailureCounts {
        self.by_name
            .get(name)
            .map(|&i| self.slots[i].failures)
            .unwrap_or_default()
    }

    /// Every plugin's counts, by name: calls made, swaps that went through, failures (the
    /// per-worker numbers metrics publish).
    pub fn plugin_counts(&self) -> Vec<PluginCounts> {
        let mut out: Vec<PluginCounts> = self
            .slots
            .iter()
            .map(|s| PluginCounts {
                name: s.name.to_string(),
                calls: s.calls,
                swaps: s.swaps,
                failures: s.failures,
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Take the events recorded since the last call, oldest first.
    pub fn take_events(&mut self) -> Vec<PluginEvent> {
        std::mem::take(&mut self.events)
    }

    fn event(&mut self, plugin: String, text: String) {
        self.events.push(PluginEvent {
            at_ns: self.now[0],
            plugin,
            text,
        });
    }
}
