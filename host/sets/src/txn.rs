//! Transactions by clone-on-write: a transaction clones the live set, applies its adds,
//! deletes and flushes to the clone, and commits by swapping one pointer (kernel pipapo:
//! clone, `nft_pipapo_commit` / `rcu_replace_pointer`; abort frees the clone). Readers load the
//! live snapshot without a lock ([`arc_swap::ArcSwap`]) and see either the old or the new set,
//! never a half-applied transaction. Writers are serialised by a mutex that readers never take.

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

    /// Start a transaction: waits for other writers, then clones the live value.
    pub fn begin(&self) -> Txn<'_, T> {
        let guard = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let work = T::clone(&self.live.load());
        Txn {
            shared: self,
            work,
            _guard: guard,
        }
    }
}

/// A pending transaction: changes go to a private clone; [`Txn::commit`] publishes it,
/// dropping the transaction aborts it.
#[derive(Debug)]
pub struct Txn<'a, T> {
    shared: &'a Shared<T>,
    work: T,
    _guard: MutexGuard<'a, ()>,
}

impl<T> Txn<'_, T> {
    /// The working copy.
    pub fn get(&self) -> &T {
        &self.work
    }

    /// The working copy, to change.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.work
    }

    /// Publish the working copy with one pointer swap. Readers that loaded the old value keep
    /// it until they drop it.
    pub fn commit(self) {
        self.shared.live.store(Arc::new(self.work));
    }

    /// Discard the working copy (the same as dropping the transaction).
    pub fn abort(self) {}
}
