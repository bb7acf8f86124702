//! Transactions by clone-on-write: a transaction clones the live set, applies its adds,
//! deletes and flushes to the clone, and commits by swapping one pointer (kernel pipapo:
//! clone, `nft_pipapo_commit` / `rcu_replace_pointer`; abort frees the clone). Readers load the
//! live snapshot without a lock ([`arc_swap::ArcSwap`]) and see either the old or the new set,
//! never a half-applied transaction. Writers are serialised by a mutex that readers never take.
//!
//! Time: a transaction carries one timestamp ([`Shared::begin_at`]) for all its control-plane
//! checks, as the kernel's `nft_net->tstamp`; at commit, elements expired at that time are
//! collected from the working copy before it is published ([`Txn::commit`] for sets that
//! implement [`Expiring`]; the kernel's `pipapo_gc` runs in `nft_pipapo_commit`). Readers of the
//! previous snapshot keep it, and its memory, until they drop it: the grace period is the last
//! reader's reference.

use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::{ArcSwap, Guard};

/// A set (or any value) published to lock-free readers and changed by transactions.
#[derive(Debug)]
pub struct Shared<T> {
    live: ArcSwap<T>,
    writer: Mutex<()>,
}

impl<T: Clone> Shared<T> {
    /// Publish `t` as the live value.
    pub fn new(t: T) -> Self {
        Shared {
            live: ArcSwap::from_pointee(t),
            writer: Mutex::new(()),
        }
    }

    /// The live value for a short read (lock-free; the packet path).
    #[inline]
    pub fn load(&self) -> Guard<Arc<T>> {
        self.live.load()
    }

    /// The live value, kept as long as the caller holds it.
    pub fn snapshot(&self) -> Arc<T> {
        self.live.load_full()
    }

    /// Start a transaction at time 0 (for values without expiring entries): waits for other
    /// writers, then clones the live value.
    pub fn begin(&self) -> Txn<'_, T> {
        self.begin_at(0)
    }

    /// Start a transaction whose timestamp is `now` (the caller's clock, e.g. ns): waits for
    /// other writers, then clones the live value.
    pub fn begin_at(&self, now: u64) -> Txn<'_, T> {
        let guard = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let work = T::clone(&self.live.load());
        Txn {
            shared: self,
            work,
            now,
            _guard: guard,
        }
    }
}

/// A value with entries that expire: sets with timeouts.
pub trait Expiring {
    /// Remove every entry expired at `now` (`now >= expiry`); returns how many.
    fn gc(&mut self, now: u64) -> usize;
}

impl<X: Clone> Expiring for crate::Pipapo<X> {
    fn gc(&mut self, now: u64) -> usize {
        crate::Pipapo::gc(self, now)
    }
}

impl<X: Clone> Expiring for crate::IntervalSet<X> {
    fn gc(&mut self, now: u64) -> usize {
        crate::IntervalSet::gc(self, now)
    }
}

/// A pending transaction: changes go to a private clone; [`Txn::commit`] publishes it,
/// dropping the transaction aborts it.
#[derive(Debug)]
pub struct Txn<'a, T> {
    shared: &'a Shared<T>,
    work: T,
    now: u64,
    _guard: MutexGuard<'a, ()>,
}

impl<T> Txn<'_, T> {
    /// The transaction's timestamp, for every control-plane check it makes.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The working copy.
    pub fn get(&self) -> &T {
        &self.work
    }

    /// The working copy, to change.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.work
    }

    /// Publish the working copy with one pointer swap, as it is (no garbage collection).
    /// Readers that loaded the old value keep it until they drop it.
    pub fn publish(self) {
        self.shared.live.store(Arc::new(self.work));
    }

    /// Discard the working copy (the same as dropping the transaction).
    pub fn abort(self) {}
}

impl<T: Expiring> Txn<'_, T> {
    /// Collect the elements expired at the transaction's timestamp from the working copy, then
    /// publish it with one pointer swap; returns how many were collected.
    pub fn commit(mut self) -> usize {
        let n = self.work.gc(self.now);
        self.publish();
        n
    }
}
