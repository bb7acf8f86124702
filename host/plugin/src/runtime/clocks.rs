//! The runtime's two clocks (monotonic, boot time) and its plugins' timers: the clocks a call
//! reads, the timers its plugin arms or cancels, and firing the timers that fell due when the
//! clocks advance (the vector boundary), each at its deadline, in deadline order.

use std::sync::Arc;

use super::Runtime;
use super::containment::CallError;
use crate::bindings::{Clock, TimerOp};
use crate::timers::SharedTimers;

impl Runtime {
    /// Share timers with other workers' runtimes as member `worker` of `table` (see
    /// [`SharedTimers`]: each timer's `on-timer` then runs once, on the runtime whose timer
    /// for it falls due last). Call it before configuring use sites, so that the timers
    /// they arm are shared too.
    pub fn share_timers(&mut self, table: Arc<SharedTimers>, worker: usize) {
        self.share = Some((table, worker));
    }

    /// Drop every timer of plugin slot `slot`, here and in the shared table.
    pub(super) fn clear_timers(&mut self, slot: usize) {
        self.timers.clear_slot(slot);
        if let Some((t, w)) = &self.share {
            t.cancel_all(&self.slots[slot].name, *w);
        }
    }

    /// Timers armed by this runtime's plugins.
    pub fn timers_armed(&self) -> usize {
        self.timers.len()
    }

    /// Set both clocks without firing timers (the first packet's time in a replay).
    pub fn set_clocks(&mut self, mono_ns: u64, boot_ns: u64) {
        self.now = [mono_ns, boot_ns];
        self.publish_clocks();
    }

    /// Move the clocks to `mono_ns` and `boot_ns` and fire, in deadline order, every timer
    /// that fell due on its clock (`on-timer`). Timers armed while firing wait for the next
    /// advance. Also applies queued swaps ([`SwapHandle`](super::SwapHandle)) first: this is
    /// the vector boundary.
    ///
    /// Each timer runs at the time it fell due, not at the new time: while its `on-timer`
    /// runs, its clock reads the timer's deadline (the other clock the same distance before
    /// its new value, never before its old one), so what it emits is stamped with the
    /// deadline (an IDLETIMER expiry in a replay shows at the capture time it fell due, as
    /// the kernel's timer would have fired then). Then the clocks read the new time.
    pub fn advance_clocks(&mut self, mono_ns: u64, boot_ns: u64) {
        self.apply_requested_swaps();
        let old = self.now;
        let new = [mono_ns.max(old[0]), boot_ns.max(old[1])];
        let bound = self.timers.next_seq();
        while let Some((clock, deadline, (slot, key))) = self.timers.pop_due(new, bound) {
            if let Some((t, w)) = &self.share
                && !t.due(&self.slots[slot].name, key, *w)
            {
                // Another worker holds it armed: it fires there, once.
                continue;
            }
            self.now = due_clocks(old, new, usize::from(clock), deadline);
            if let Err(CallError::Failed(reason, msg)) = self.guarded(slot, |live| {
                let b = &live.bindings;
                b.wasp_plugin_plugin().call_on_timer(&mut live.store, key)
            }) {
                self.fail(slot, reason, &msg);
            }
        }
        self.now = [mono_ns, boot_ns];
        self.publish_clocks();
    }

    /// Move the timers and events the slot's instance asked for into the runtime.
    pub(super) fn drain(&mut self, slot: usize) {
        let s = &mut self.slots[slot];
        let Some(live) = s.live.as_mut() else { return };
        let d = live.store.data_mut();
        if d.ops.is_empty() && d.events.is_empty() && d.dropped_events == 0 {
            return;
        }
        let ops = std::mem::take(&mut d.ops);
        let evs = std::mem::take(&mut d.events);
        s.failures.dropped_events += std::mem::take(&mut d.dropped_events);
        let name = s.name.to_string();
        for op in ops {
            match op {
                TimerOp::Arm {
                    key,
                    clock,
                    deadline,
                } => {
                    self.timers
                        .arm((slot, key), u8::from(clock == Clock::Boottime), deadline);
                    if let Some((t, w)) = &self.share {
                        t.arm(&self.slots[slot].name, key, *w, deadline);
                    }
                }
                TimerOp::Cancel { key } => {
                    self.timers.cancel((slot, key));
                    if let Some((t, w)) = &self.share {
                        t.cancel(&self.slots[slot].name, key, *w);
                    }
                }
            }
        }
        for text in evs {
            self.event(name.clone(), text);
        }
    }
}

/// The clocks while a timer due at `deadline` on clock `c` fires during an advance from `old`
/// to `new`: clock `c` at the deadline (within `old[c]..=new[c]`), the other clock as far
/// before its new value, and never before its old one (and never after its new one: timers
/// fire in deadline order, so the clocks only move forward).
fn due_clocks(old: [u64; 2], new: [u64; 2], c: usize, deadline: u64) -> [u64; 2] {
    let at = deadline.clamp(old[c], new[c]);
    let early = new[c] - at;
    let o = 1 - c;
    let mut now = [0; 2];
    now[c] = at;
    now[o] = new[o].saturating_sub(early).max(old[o]).min(new[o]);
    now
}
