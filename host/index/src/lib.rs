//! A hash index (key → value) whose lookups a vector of packets can prefetch: open
//! addressing with linear probing in one array of buckets, at most three quarters full.
//!
//! It is the index of conntrack's and the flowtable's shards. Each shard keeps its [`Index`]
//! under its own lock; beside the lock sits the shard's [`Head`], where the index publishes
//! its array's address and size. A caller with a vector of packets computes every key's hash
//! and calls [`Head::prefetch`] for each before the first probe, so that the cache misses of
//! a large table overlap instead of following one another (the kernel's conntrack and
//! DPDK's `rte_hash` bulk lookups do the same). The head is read without the lock: a
//! prefetch of an array that a concurrent resize just freed loads a useless line and does
//! nothing else (a prefetch never faults and changes no result). The probe itself runs under
//! the shard's lock.
//!
//! The hasher is the caller's (keyed, seeded at start): the same one for the index and its
//! head. It must not be the hash that picks the shard, or a shard's keys would share their
//! low bits and crowd a few buckets.
#![deny(unsafe_code)]

use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Buckets of an index's first array.
const MIN_BUCKETS: usize = 16;

/// Where an index's bucket array is, for prefetches made without the index's lock: the
/// array's address, its bucket count less one (0 while it has none), the bucket size in
/// bytes, and the index's hasher.
#[derive(Debug)]
pub struct Head<S> {
    addr: AtomicUsize,
    mask: AtomicUsize,
    bucket: AtomicUsize,
    hasher: S,
}

impl<S: BuildHasher> Head<S> {
    /// The head of an index hashed by `hasher` (give the index the same), with no array yet.
    pub fn new(hasher: S) -> Head<S> {
        Head {
            addr: AtomicUsize::new(0),
            mask: AtomicUsize::new(0),
            bucket: AtomicUsize::new(0),
            hasher,
        }
    }

    /// The hash of `key` in this index.
    #[inline]
    pub fn hash<K: Hash>(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Start loading the bucket where a probe for `hash` starts (both cache lines a bucket
    /// may straddle), if the index has an array. Changes nothing.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        let addr = self.addr.load(Ordering::Relaxed);
        if addr == 0 {
            return;
        }
        let mask = self.mask.load(Ordering::Relaxed);
        let size = self.bucket.load(Ordering::Relaxed);
        let at = addr.wrapping_add((hash as usize & mask).wrapping_mul(size));
        prefetch_line(at);
        prefetch_line(at.wrapping_add(size.saturating_sub(1)));
    }
}

/// Start loading the cache line that holds byte address `addr` into every cache level. The
/// address need not be valid: a prefetch never faults, reads nothing the program sees and
/// changes no result. On other targets than x86_64 it does nothing.
#[inline(always)]
#[allow(unsafe_code)]
pub fn prefetch_line(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is an SSE instruction (part of the x86_64 baseline) that does
    // not access memory architecturally: it cannot fault on any address, valid or not, and
    // its only effect is on the caches.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(addr as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// The index (see the crate documentation).
#[derive(Debug)]
pub struct Index<K, V, S> {
    buckets: Vec<Option<(K, V)>>,
    len: usize,
    hasher: S,
}

impl<K: Hash + Eq, V, S: BuildHasher> Index<K, V, S> {
    /// An empty index hashing with `hasher` (the same as its [`Head`]'s).
    pub fn new(hasher: S) -> Index<K, V, S> {
        Index {
            buckets: Vec::new(),
            len: 0,
            hasher,
        }
    }

    /// Keys in the index.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the index holds no key.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The home bucket of `key` in an array of `mask + 1` buckets.
    #[inline]
    fn home(&self, key: &K, mask: usize) -> usize {
        self.hasher.hash_one(key) as usize & mask
    }

    /// The bucket that holds `key`.
    #[inline]
    fn find(&self, key: &K) -> Option<usize> {
        self.find_hashed(self.hasher.hash_one(key), key)
    }

    /// The bucket that holds `key`, whose hash is `hash`.
    #[inline]
    fn find_hashed(&self, hash: u64, key: &K) -> Option<usize> {
        let mask = self.buckets.len().checked_sub(1)?;
        debug_assert_eq!(hash, self.hasher.hash_one(key));
        let mut i = hash as usize & mask;
        loop {
            match &self.buckets[i] {
                None => return None,
                Some((k, _)) if k == key => return Some(i),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }

    /// The value of `key`.
    #[inline]
    pub fn get(&self, key: &K) -> Option<&V> {
        let i = self.find(key)?;
        self.buckets[i].as_ref().map(|(_, v)| v)
    }

    /// [`Index::get`] with the key's hash already made by the same hasher (the caller's, for
    /// its shard, or [`Head::hash`]): one hash per lookup.
    #[inline]
    pub fn get_hashed(&self, hash: u64, key: &K) -> Option<&V> {
        let i = self.find_hashed(hash, key)?;
        self.buckets[i].as_ref().map(|(_, v)| v)
    }

    /// Set `key`'s value (returning the one it replaces); a new array, when the index grows,
    /// is published in `head`.
    pub fn insert(&mut self, key: K, value: V, head: &Head<S>) -> Option<V> {
        // Grown first (also when `key` is there: harmless), so that one probe finds the key
        // or, at the first empty bucket, the place for it.
        if (self.len + 1) * 4 > self.buckets.len() * 3 {
            self.grow(head);
        }
        let mask = self.buckets.len() - 1;
        let mut i = self.home(&key, mask);
        loop {
            match &mut self.buckets[i] {
                Some((k, v)) if *k == key => return Some(std::mem::replace(v, value)),
                Some(_) => i = (i + 1) & mask,
                empty @ None => {
                    *empty = Some((key, value));
                    self.len += 1;
                    return None;
                }
            }
        }
    }

    /// Put `key` in with `value` unless it is there: then `Err` with the value it has, and
    /// nothing changes. One probe where a lookup then an [`Index::insert`] make two. A new
    /// array, when the index grows, is published in `head`.
    pub fn insert_new(&mut self, key: K, value: V, head: &Head<S>) -> Result<(), &V> {
        if (self.len + 1) * 4 > self.buckets.len() * 3 {
            self.grow(head);
        }
        let mask = self.buckets.len() - 1;
        let mut i = self.home(&key, mask);
        // The probe stops at the key or at the first empty bucket: the place for it.
        while let Some((k, _)) = &self.buckets[i] {
            if *k == key {
                break;
            }
            i = (i + 1) & mask;
        }
        if self.buckets[i].is_none() {
            self.buckets[i] = Some((key, value));
            self.len += 1;
            return Ok(());
        }
        self.buckets[i].as_ref().map_or(Ok(()), |(_, v)| Err(v))
    }

    /// Take `key` out; the buckets after it that probed past it move back, so that no probe
    /// meets a hole before its key.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        let i = self.find(key)?;
        let mask = self.buckets.len() - 1;
        let (_, gone) = self.buckets[i].take()?;
        // Backward shift: the hole takes each later bucket of the run whose home lies at or
        // before the hole (cyclically), until an empty bucket ends the run.
        let mut hole = i;
        let mut j = (i + 1) & mask;
        while let Some((k, _)) = &self.buckets[j] {
            let home = self.home(k, mask);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.buckets[hole] = self.buckets[j].take();
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.len -= 1;
        Some(gone)
    }

    /// Every key and its value, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.buckets.iter().flatten().map(|(k, v)| (k, v))
    }

    /// Double the array (or make the first one) and publish it.
    fn grow(&mut self, head: &Head<S>) {
        let n = (self.buckets.len() * 2).max(MIN_BUCKETS);
        let mut fresh = Vec::with_capacity(n);
        fresh.resize_with(n, || None);
        let old = std::mem::replace(&mut self.buckets, fresh);
        let mask = n - 1;
        for (k, v) in old.into_iter().flatten() {
            let mut i = self.home(&k, mask);
            while self.buckets[i].is_some() {
                i = (i + 1) & mask;
            }
            self.buckets[i] = Some((k, v));
        }
        head.addr
            .store(self.buckets.as_ptr() as usize, Ordering::Relaxed);
        head.mask.store(mask, Ordering::Relaxed);
        head.bucket
            .store(size_of::<Option<(K, V)>>(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use foldhash::fast::FixedState;

    use super::*;

    /// A key of 40 bytes, as conntrack's, scrambled from `n`.
    fn key(n: u32) -> [u64; 5] {
        let mut r = u64::from(n)
            .wrapping_add(1)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        r ^= r >> 29;
        [r, u64::from(n), r.rotate_left(17), 53, 17]
    }

    /// Inserts, replacements, inserts of absent keys and removes in a scrambled order answer
    /// as a `HashMap` does,
    /// through growth and the backward shifts of removal; the head names the live array and
    /// hashes as the index.
    #[test]
    fn answers_as_a_hash_map_through_growth_and_removal() {
        for seed in [0, 1, 0xdead_beef] {
            let hasher = FixedState::with_seed(seed);
            let head = Head::new(hasher.clone());
            let mut ix = Index::new(hasher);
            let mut model: HashMap<u32, u32> = HashMap::new();
            let mut x = seed | 1;
            let mut removed = 0;
            for step in 0..40_000u32 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let n = (x % 3000) as u32;
                let op = (x >> 40) % 5;
                if op < 2 {
                    assert_eq!(ix.insert(key(n), step, &head), model.insert(n, step));
                } else if op == 2 {
                    // Only when absent; else the value there, unchanged.
                    let want = match model.get(&n) {
                        Some(&v) => Err(v),
                        None => {
                            model.insert(n, step);
                            Ok(())
                        }
                    };
                    assert_eq!(ix.insert_new(key(n), step, &head).map_err(|v| *v), want);
                } else {
                    let old = ix.remove(&key(n));
                    assert_eq!(old, model.remove(&n));
                    removed += usize::from(old.is_some());
                }
                assert_eq!(ix.len(), model.len());
            }
            assert!(removed > 5000, "{removed} removals");
            let mask = ix.buckets.len() - 1;
            for n in 0..3000 {
                assert_eq!(ix.get(&key(n)), model.get(&n));
                assert_eq!(ix.get_hashed(head.hash(&key(n)), &key(n)), model.get(&n));
                assert_eq!(head.hash(&key(n)) as usize & mask, ix.home(&key(n), mask));
                head.prefetch(head.hash(&key(n)));
            }
            assert_eq!(ix.iter().count(), model.len());
            assert_eq!(
                head.addr.load(Ordering::Relaxed),
                ix.buckets.as_ptr() as usize
            );
            assert_eq!(head.mask.load(Ordering::Relaxed), mask);
            assert!(ix.len() * 4 <= ix.buckets.len() * 3);
        }
    }

    /// An empty index answers nothing and prefetches nothing; values need not be `Copy`.
    #[test]
    fn empty_index_and_owned_values() {
        let hasher = FixedState::with_seed(3);
        let head = Head::new(hasher.clone());
        let mut ix: Index<u32, String, _> = Index::new(hasher);
        assert!(ix.get(&1).is_none() && ix.remove(&1).is_none() && ix.is_empty());
        head.prefetch(head.hash(&1u32));
        assert_eq!(ix.insert(1, "a".into(), &head), None);
        assert_eq!(ix.insert(1, "b".into(), &head).as_deref(), Some("a"));
        assert_eq!(ix.get(&1).map(String::as_str), Some("b"));
        assert_eq!(ix.remove(&1).as_deref(), Some("b"));
        assert!(ix.is_empty());
    }
}
