//! What the host offers (`wasp:plugin/host`), as plain functions.
//!
//! On wasm32 these call the host. On other targets (a plugin's native unit tests) they act
//! on a per-thread fake host in [`fake`]: a clock the test sets, and records of the armed
//! timers, events and log lines.

use crate::{Clock, Level};

#[cfg(target_arch = "wasm32")]
use crate::bindings::wasp::plugin::host as imp;

#[cfg(not(target_arch = "wasm32"))]
use fake::imp;

/// Nanoseconds on the monotonic clock (in `wasp replay`, the capture's time).
pub fn now_ns() -> u64 {
    imp::monotonic_ns()
}

/// Nanoseconds on the boot-time clock, which counts suspended time (in `wasp replay`, the
/// capture's time).
pub fn boottime_ns() -> u64 {
    imp::boottime_ns()
}

/// Nanoseconds on `clock`.
pub fn clock_ns(clock: Clock) -> u64 {
    match clock {
        Clock::Monotonic => now_ns(),
        Clock::Boottime => boottime_ns(),
    }
}

/// Arms (or re-arms) timer `key` to fire at `deadline_ns` on `clock`; the host then calls the
/// plugin's `on_timer(key)`. One timer per key.
pub fn timer_arm(key: u64, clock: Clock, deadline_ns: u64) {
    imp::timer_arm(key, clock, deadline_ns)
}

/// Cancels timer `key` (nothing happens when it is not armed).
pub fn timer_cancel(key: u64) {
    imp::timer_cancel(key)
}

/// Sends an event to the control side (`wasp ctl monitor`, the replay's events).
pub fn emit(event: &str) {
    imp::emit(event)
}

/// Logs a line through the host's logger.
pub fn log(level: Level, message: &str) {
    imp::log(level, message)
}

/// True when the named set of the plugin's table holds `key` (big-endian field bytes,
/// concatenated). False for an unknown set.
pub fn set_contains(set: &str, key: &[u8]) -> bool {
    imp::set_contains(set, key)
}

/// A fake host for native tests (per thread).
#[cfg(not(target_arch = "wasm32"))]
pub mod fake {
    use crate::{Clock, Level};
    use alloc::collections::BTreeMap;
    use alloc::string::{String, ToString};
    use alloc::vec::Vec;
    use core::cell::RefCell;

    /// What the fake host recorded.
    #[derive(Debug, Default, Clone)]
    pub struct State {
        /// Monotonic clock, ns.
        pub monotonic: u64,
        /// Boot-time clock, ns.
        pub boottime: u64,
        /// Armed timers: key to (clock, deadline ns).
        pub timers: BTreeMap<u64, (Clock, u64)>,
        /// Events emitted, in order.
        pub events: Vec<String>,
        /// Log lines, in order.
        pub logs: Vec<(Level, String)>,
        /// Set contents for `set_contains`: set name to keys.
        pub sets: BTreeMap<String, Vec<Vec<u8>>>,
    }

    std::thread_local! {
        static STATE: RefCell<State> = RefCell::new(State::default());
    }

    /// Runs `f` on this thread's fake host.
    pub fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
        STATE.with(|s| f(&mut s.borrow_mut()))
    }

    /// Sets both clocks to `ns`.
    pub fn set_time(ns: u64) {
        with(|s| {
            s.monotonic = ns;
            s.boottime = ns;
        })
    }

    /// Takes the events emitted so far.
    pub fn take_events() -> Vec<String> {
        with(|s| core::mem::take(&mut s.events))
    }

    /// Removes and returns the timers due at or before `now_ns` on their clock, in deadline
    /// order (the host's `advance`); the test then calls the plugin's `on_timer` for each key.
    pub fn due_timers(now_ns: u64) -> Vec<u64> {
        with(|s| {
            let mut due: Vec<(u64, u64)> = s
                .timers
                .iter()
                .filter(|(_, (_, d))| *d <= now_ns)
                .map(|(k, (_, d))| (*d, *k))
                .collect();
            due.sort();
            for (_, k) in &due {
                s.timers.remove(k);
            }
            due.into_iter().map(|(_, k)| k).collect()
        })
    }

    pub(super) mod imp {
        use super::*;

        pub fn monotonic_ns() -> u64 {
            with(|s| s.monotonic)
        }
        pub fn boottime_ns() -> u64 {
            with(|s| s.boottime)
        }
        pub fn timer_arm(key: u64, clock: Clock, deadline: u64) {
            with(|s| s.timers.insert(key, (clock, deadline)));
        }
        pub fn timer_cancel(key: u64) {
            with(|s| s.timers.remove(&key));
        }
        pub fn emit(event: &str) {
            with(|s| s.events.push(event.to_string()));
        }
        pub fn log(level: Level, message: &str) {
            with(|s| s.logs.push((level, message.to_string())));
        }
        pub fn set_contains(set: &str, key: &[u8]) -> bool {
            with(|s| {
                s.sets
                    .get(set)
                    .is_some_and(|keys| keys.iter().any(|k| k == key))
            })
        }
    }
}
