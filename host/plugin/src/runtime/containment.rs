//! Failure containment: every call into a plugin runs guarded, with an epoch deadline and the
//! memory limit. A call that traps, hits either, or returns a malformed result gives its
//! packets the use site's fallback (fallback verdicts here), is counted and reported as an
//! event, and the instance is re-created with its use sites configured again. A use site
//! whose calls keep failing backs off ([`Backoff`]).

use wasmtime::Trap;
use wasp_core::{ExtKind, ExtVerdict, Fallback};

use super::Runtime;
use crate::error::{FailureReason, PluginError};
use crate::host::{Live, wit_kind};

/// Failed calls of one plugin in one runtime, per reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FailureCounts {
    /// Calls interrupted at their epoch deadline.
    pub deadline: u64,
    /// Calls that hit the memory limit.
    pub memory: u64,
    /// Other traps.
    pub trap: u64,
    /// Malformed results.
    pub malformed: u64,
    /// Instances re-created after a failure.
    pub recreated: u64,
    /// Events dropped because the plugin emitted too many between two drains.
    pub dropped_events: u64,
    /// Calls not made because their use site was backing off ([`Backoff`]): their packets
    /// got the fallback.
    pub skipped: u64,
}

/// How a use site whose calls keep failing backs off: after `after` failed calls in a row,
/// its next `first` calls are not made (their packets get the use site's fallback at once,
/// with no instance to re-create); each back-off that ends in another failure doubles the
/// next one, up to `max` calls. A call that succeeds, a swap of the plugin, or configuring the
/// use site again ends it. One event per back-off. One call is one vector at one use site.
/// As Envoy reloads a crashed proxy-wasm VM with back-off (research/plugins.md, "peers").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Failed calls in a row before backing off (default 3; 0 counts as 1).
    pub after: u32,
    /// Calls skipped by the first back-off (default 8).
    pub first: u32,
    /// Most calls skipped by one back-off (default 65536).
    pub max: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            after: 3,
            first: 8,
            max: 1 << 16,
        }
    }
}

/// Outcome of one guarded call.
pub(super) enum CallError {
    /// The call failed: count, report, re-create.
    Failed(FailureReason, String),
    /// There is no instance (re-creating it failed, which was reported once): fallback only.
    NoInstance(String),
}

impl Runtime {
    /// Run `f` on the slot's instance with a fresh epoch deadline and the clocks set, then
    /// collect the timers and events it asked for. An instance that failed before is
    /// re-created first.
    pub(super) fn guarded<R>(
        &mut self,
        slot: usize,
        f: impl FnOnce(&mut Live) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let ticks = self.host.config().deadline_ticks;
        self.guarded_for(slot, ticks, f)
    }

    /// [`Runtime::guarded`] with a deadline of `ticks` (the setup deadline for calls off the
    /// packet path).
    pub(super) fn guarded_for<R>(
        &mut self,
        slot: usize,
        ticks: u64,
        f: impl FnOnce(&mut Live) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        if self.slots[slot].live.is_none() {
            self.recreate(slot);
        }
        let deadline = ticks.max(1);
        let now = self.now;
        let s = &mut self.slots[slot];
        s.calls += 1;
        let Some(live) = s.live.as_mut() else {
            return Err(CallError::NoInstance(format!(
                "plugin {}: no instance (re-creating it failed)",
                s.name
            )));
        };
        {
            let d = live.store.data_mut();
            d.now_mono = now[0];
            d.now_boot = now[1];
            // A refused growth that the guest survived is not this call's failure.
            d.limit.hit = false;
        }
        crate::host::arm_deadline(&mut live.store, deadline);
        let r = f(live);
        let r = r.map_err(|e| {
            let reason = classify(&e, live);
            let msg = match reason {
                // What the guest did after its allocation failed (abort, a missing import to
                // print a message) says less than the limit it reached.
                FailureReason::MemoryLimit => format!(
                    "its memory would have grown past {} bytes (then: {})",
                    live.store.data().limit.max,
                    describe_error(&e, deadline)
                ),
                _ => describe_error(&e, deadline),
            };
            CallError::Failed(reason, msg)
        });
        self.drain(slot);
        r
    }

    /// Count and report a failure, drop the instance and create a new one (configure
    /// replayed for its sites; its timers are gone with its state).
    pub(super) fn fail(&mut self, slot: usize, reason: FailureReason, msg: &str) -> PluginError {
        let s = &mut self.slots[slot];
        match reason {
            FailureReason::Deadline => s.failures.deadline += 1,
            FailureReason::MemoryLimit => s.failures.memory += 1,
            FailureReason::Trap => s.failures.trap += 1,
            FailureReason::Malformed => s.failures.malformed += 1,
        }
        let name = s.name.to_string();
        let text = match reason {
            FailureReason::Deadline => format!("plugin {name} hit its deadline: {msg}"),
            FailureReason::MemoryLimit => format!("plugin {name} hit its memory limit: {msg}"),
            FailureReason::Trap => format!("plugin {name} trapped: {msg}"),
            FailureReason::Malformed => format!("plugin {name} returned a malformed result: {msg}"),
        };
        s.live = None;
        self.event(name.clone(), text);
        self.clear_timers(slot);
        self.recreate(slot);
        PluginError::Call {
            plugin: name,
            reason,
            msg: msg.to_string(),
        }
    }

    /// A new instance for the slot, with configure replayed for each of its sites. A site the
    /// new instance refuses keeps its place and gets its fallback until it is configured again.
    fn recreate(&mut self, slot: usize) {
        let s = &mut self.slots[slot];
        let name = s.name.clone();
        match s.plugin.instantiate(name.clone(), self.set_fn.clone()) {
            Ok(live) => {
                s.live = Some(live);
                s.failures.recreated += 1;
                s.recreate_failed = false;
            }
            Err(e) => {
                if std::mem::replace(&mut s.recreate_failed, true) {
                    return;
                }
                self.event(
                    name.to_string(),
                    format!("plugin {name} cannot be re-created: {e}"),
                );
                return;
            }
        }
        let sites: Vec<(u32, ExtKind, Vec<String>)> = self
            .sites
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.as_ref()
                    .filter(|s| s.slot == slot)
                    .map(|s| (i as u32, s.kind, s.args.clone()))
            })
            .collect();
        let deadline = self.host.config().setup_ticks.max(1);
        for (id, kind, args) in sites {
            let Some(live) = self.slots[slot].live.as_mut() else {
                return;
            };
            crate::host::arm_deadline(&mut live.store, deadline);
            let r = live.bindings.wasp_plugin_plugin().call_configure(
                &mut live.store,
                id,
                wit_kind(kind),
                &args,
            );
            let msg = match r {
                Ok(Ok(())) => continue,
                Ok(Err(msg)) => msg,
                Err(e) => {
                    // A trap in configure while recovering: no instance until the next call.
                    let msg = describe_error(&e, deadline);
                    self.slots[slot].live = None;
                    msg
                }
            };
            self.event(
                name.to_string(),
                format!("plugin {name} re-created, use site {id} refused: {msg}"),
            );
        }
    }

    /// Whether use site `site` (of `slot`) is backing off: then this call is skipped (and
    /// counted).
    pub(super) fn backing_off(&mut self, site: u32, slot: usize) -> bool {
        let Some(s) = self.sites.get_mut(site as usize).and_then(Option::as_mut) else {
            return false;
        };
        if s.skip == 0 {
            return false;
        }
        s.skip -= 1;
        self.slots[slot].failures.skipped += 1;
        true
    }

    /// A call of use site `site` worked: its failure streak and back-off end.
    pub(super) fn call_ok(&mut self, site: u32) {
        if let Some(s) = self.sites.get_mut(site as usize).and_then(Option::as_mut)
            && s.streak != 0
        {
            (s.streak, s.next_backoff) = (0, 0);
        }
    }

    /// A call of use site `site` failed: count the streak, and back off when it is long
    /// enough (an event says for how many calls).
    pub(super) fn site_failed(&mut self, site: u32) {
        let b = self.backoff;
        let Some(s) = self.sites.get_mut(site as usize).and_then(Option::as_mut) else {
            return;
        };
        s.streak = s.streak.saturating_add(1);
        if s.streak < b.after.max(1) {
            return;
        }
        let n = match s.next_backoff {
            0 => b.first,
            n => n,
        }
        .min(b.max);
        s.skip = n;
        s.next_backoff = n.saturating_mul(2).min(b.max);
        let streak = s.streak;
        let name = self.slots[s.slot].name.to_string();
        self.event(
            name.clone(),
            format!(
                "plugin {name}: use site {site} failed {streak} calls in a row, backing off: its next {n} calls get the fallback without calling the plugin"
            ),
        );
    }

    /// A failed `matches`/`apply` call (its packets already have the fallback): remember it
    /// for `last_call_failed`, and count, report and re-create unless there was no instance.
    pub(super) fn call_failed(&mut self, slot: usize, e: CallError, what: &str) {
        self.last_failed = true;
        if let CallError::Failed(reason, msg) = e {
            self.fail(slot, reason, &format!("{what}: {msg}"));
        }
    }
}

fn classify(e: &wasmtime::Error, live: &mut Live) -> FailureReason {
    if std::mem::take(&mut live.store.data_mut().limit.hit) {
        return FailureReason::MemoryLimit;
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => FailureReason::Deadline,
        Some(_) => FailureReason::Trap,
        // Not a trap: e.g. a result that does not lift (a bad enum discriminant).
        None => FailureReason::Malformed,
    }
}

pub(super) fn describe_error(e: &wasmtime::Error, ticks: u64) -> String {
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => {
            format!("interrupted after {ticks} epoch ticks and as long again of CPU time")
        }
        Some(t) => t.to_string(),
        // What went wrong at the bottom, without the guest's backtrace (wasmtime attaches it
        // as a context whose text is a line per frame, mostly `<unknown>!<wasm function N>`
        // in a stripped guest).
        None => e
            .root_cause()
            .to_string()
            .lines()
            .next()
            .unwrap_or("failed")
            .to_string(),
    }
}

/// Where the fallback goes when a call fails.
pub(super) fn fail_matches(out: &mut [bool], fallback: Fallback) {
    // A match has no verdict of its own: fail closed is the engine's business (it asks
    // `last_call_failed` for a site with fallback drop); the answer here is "no match".
    let _ = fallback;
    out.fill(false);
}

pub(super) fn fail_apply(verdicts: &mut [ExtVerdict], fallback: Fallback) {
    verdicts.fill(match fallback {
        Fallback::Absent => ExtVerdict::Continue,
        Fallback::Drop => ExtVerdict::Drop,
    });
}
