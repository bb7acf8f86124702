//! A runtime's timer queue: timers armed by its plugins (host import `timer-arm`), kept in
//! deadline order per clock, fired by [`crate::Runtime`]'s `advance` in deadline order; and
//! [`SharedTimers`], which makes the runtimes of several workers fire a timer once.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

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

/// One timer table for the runtimes of several workers (one instance of each plugin per
/// worker): a timer is one logical timer, whichever workers arm it.
///
/// A packet path that restarts a timer (an IDLETIMER label) runs on the worker its flow
/// hashes to, so each worker's instance arms the same key at its own times. Each worker keeps
/// its own queue; this table records, per (plugin, key), the deadline each worker last armed.
/// A worker whose timer falls due clears its entry; only the worker that clears the last one
/// calls `on-timer` (so it runs once, when no worker has re-armed the key for its whole
/// timeout: xt_IDLETIMER's meaning with one timer per label); the others skip it. A cancel
/// clears the worker's entry without firing. One table per ruleset generation (a new ruleset
/// starts with new instances and a new table).
#[derive(Debug)]
pub struct SharedTimers {
    workers: usize,
    table: Mutex<ArmedBy>,
}

/// (plugin name, key) → the deadline each worker armed (`None`: not armed there).
type ArmedBy = HashMap<(Arc<str>, u64), Vec<Option<u64>>>;

impl SharedTimers {
    /// A table for `workers` runtimes (member indexes `0..workers`).
    pub fn new(workers: usize) -> Arc<SharedTimers> {
        Arc::new(SharedTimers {
            workers: workers.max(1),
            table: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ArmedBy> {
        // A panic elsewhere while holding it leaves a consistent map (each change is one
        // assignment): keep using it.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Worker `w` armed `key` of `plugin` at `deadline`.
    pub(crate) fn arm(&self, plugin: &Arc<str>, key: u64, w: usize, deadline: u64) {
        let mut t = self.lock();
        let e = t
            .entry((plugin.clone(), key))
            .or_insert_with(|| vec![None; self.workers]);
        if let Some(slot) = e.get_mut(w) {
            *slot = Some(deadline);
        }
    }

    /// Worker `w` cancelled `key` of `plugin`.
    pub(crate) fn cancel(&self, plugin: &Arc<str>, key: u64, w: usize) {
        let mut t = self.lock();
        let k = (plugin.clone(), key);
        if let Some(e) = t.get_mut(&k) {
            if let Some(slot) = e.get_mut(w) {
                *slot = None;
            }
            if e.iter().all(Option::is_none) {
                t.remove(&k);
            }
        }
    }

    /// Worker `w` dropped every timer of `plugin` (its instance failed or started fresh).
    pub(crate) fn cancel_all(&self, plugin: &Arc<str>, w: usize) {
        let mut t = self.lock();
        t.retain(|(p, _), e| {
            if p == plugin
                && let Some(slot) = e.get_mut(w)
            {
                *slot = None;
            }
            e.iter().any(Option::is_some)
        });
    }

    /// Worker `w`'s timer for `key` of `plugin` fell due: `true` when `w` is to call
    /// `on-timer` (no other worker holds the key armed any longer).
    pub(crate) fn due(&self, plugin: &Arc<str>, key: u64, w: usize) -> bool {
        let mut t = self.lock();
        let k = (plugin.clone(), key);
        let Some(e) = t.get_mut(&k) else {
            // Not shared (armed before joining) or cancelled meanwhile: the worker's own.
            return true;
        };
        if let Some(slot) = e.get_mut(w) {
            *slot = None;
        }
        if e.iter().all(Option::is_none) {
            t.remove(&k);
            true
        } else {
            false
        }
    }

    /// Keys armed on at least one worker (for tests and listing).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// `true` when no key is armed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

    #[test]
    fn a_shared_timer_fires_once_on_the_last_worker() {
        let sh = SharedTimers::new(3);
        let p: Arc<str> = Arc::from("idletimer");
        sh.arm(&p, 7, 0, 100);
        sh.arm(&p, 7, 1, 250);
        // Worker 2 never armed it; worker 0 falls due first: worker 1 still holds it.
        assert!(!sh.due(&p, 7, 0));
        assert_eq!(sh.len(), 1);
        // Worker 0 re-arms (a new packet), worker 1 falls due: worker 0 holds it now.
        sh.arm(&p, 7, 0, 400);
        assert!(!sh.due(&p, 7, 1));
        // The last one fires.
        assert!(sh.due(&p, 7, 0));
        assert!(sh.is_empty());
        // A cancel on every worker fires nothing and leaves nothing.
        sh.arm(&p, 8, 0, 10);
        sh.arm(&p, 8, 2, 10);
        sh.cancel(&p, 8, 0);
        sh.cancel_all(&p, 2);
        assert!(sh.is_empty());
        // Another plugin's key is another timer.
        let q: Arc<str> = Arc::from("other");
        sh.arm(&p, 9, 0, 10);
        sh.arm(&q, 9, 1, 10);
        assert!(sh.due(&p, 9, 0));
        assert!(sh.due(&q, 9, 1));
    }
}
