//! A runtime's timer queue: timers armed by its plugins (host import `timer-arm`), kept in
//! deadline order per clock, fired by [`crate::Runtime`]'s `advance` in deadline order.

use std::collections::{BTreeMap, HashMap};

/// Which clock (0 monotonic, 1 boot time).
pub(crate) type ClockId = u8;

/// Identity of a timer: (plugin slot in the runtime, the plugin's key).
pub(crate) type TimerId = (usize, u64);

#[derive(Default)]
pub(crate) struct TimerQueue {
    /// Per clock: (deadline ns, arm sequence) → timer.
    queues: [BTreeMap<(u64, u64), TimerId>; 2],
    /// Timer → (clock, deadline, sequence), for cancel and re-arm.
    armed: HashMap<TimerId, (ClockId, u64, u64)>,
    seq: u64,
}

impl TimerQueue {
    /// Arm (or re-arm) `id` at `deadline` on `clock`.
    pub(crate) fn arm(&mut self, id: TimerId, clock: ClockId, deadline: u64) {
        self.cancel(id);
        self.seq += 1;
        self.queues[usize::from(clock & 1)].insert((deadline, self.seq), id);
        self.armed.insert(id, (clock & 1, deadline, self.seq));
    }

    /// Cancel `id`; nothing happens when it is not armed.
    pub(crate) fn cancel(&mut self, id: TimerId) {
        if let Some((clock, deadline, seq)) = self.armed.remove(&id) {
            self.queues[usize::from(clock)].remove(&(deadline, seq));
        }
    }

    /// Cancel every timer of plugin slot `slot`.
    pub(crate) fn clear_slot(&mut self, slot: usize) {
        let ids: Vec<TimerId> = self
            .armed
            .keys()
            .filter(|(s, _)| *s == slot)
            .copied()
            .collect();
        for id in ids {
            self.cancel(id);
        }
    }

    /// The sequence number the next arm gets: timers armed from now on are not fired by a
    /// `pop_due` bounded by this value (so a timer re-armed at or before `now` while firing
    /// waits for the next advance).
    pub(crate) fn next_seq(&self) -> u64 {
        self.seq + 1
    }

    /// Remove and return the earliest timer due at `now` (per clock: `[mono, boot]`) armed
    /// before sequence `bound`, as (clock, deadline, timer).
    pub(crate) fn pop_due(&mut self, now: [u64; 2], bound: u64) -> Option<(ClockId, u64, TimerId)> {
        let mut best: Option<(u64, u64, usize)> = None;
        for (c, q) in self.queues.iter().enumerate() {
            let head = q
                .range(..(now[c], u64::MAX))
                .find(|((_, seq), _)| *seq < bound);
            if let Some(((deadline, seq), _)) = head
                && best.is_none_or(|(d, s, _)| (*deadline, *seq) < (d, s))
            {
                best = Some((*deadline, *seq, c));
            }
        }
        let (deadline, seq, c) = best?;
        let id = self.queues[c].remove(&(deadline, seq))?;
        self.armed.remove(&id);
        Some((c as ClockId, deadline, id))
    }

    /// Timers armed, for tests and listing.
    pub(crate) fn len(&self) -> usize {
        self.armed.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_in_deadline_order_across_clocks_and_rearm_replaces() {
        let mut q = TimerQueue::default();
        q.arm((0, 1), 0, 300);
        q.arm((0, 2), 1, 100);
        q.arm((1, 1), 0, 200);
        q.arm((0, 1), 0, 50); // re-arm: replaces 300
        q.arm((0, 9), 0, 1000);
        q.cancel((0, 9));
        let b = q.next_seq();
        let mut got = Vec::new();
        while let Some(x) = q.pop_due([250, 250], b) {
            got.push(x);
        }
        assert_eq!(
            got,
            vec![(0, 50, (0, 1)), (1, 100, (0, 2)), (0, 200, (1, 1))]
        );
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn timers_armed_after_the_bound_wait() {
        let mut q = TimerQueue::default();
        q.arm((0, 1), 0, 10);
        let b = q.next_seq();
        q.arm((0, 2), 0, 5);
        assert_eq!(q.pop_due([100, 100], b), Some((0, 10, (0, 1))));
        assert_eq!(q.pop_due([100, 100], b), None);
        q.clear_slot(0);
        assert_eq!(q.len(), 0);
    }
}
