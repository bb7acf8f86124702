//! A shard's index: tuple → where its entry is ([`Loc`]), by open addressing with linear
//! probing in one array of 48-byte buckets, at most three quarters full.
//!
//! Its own table rather than `std`'s so that a vector of lookups can compute every tuple's
//! hash first and start loading each tuple's bucket before the first probe
//! ([`Conntrack::prefetch`](crate::Conntrack::prefetch)): the array's address and size are
//! published in a [`Head`] that is read without the shard's lock. A prefetch of an address
//! that a concurrent resize freed loads a useless line and nothing else; the probe itself
//! runs under the lock.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::table::{Hb, Loc};
use crate::tuple::Key;

/// `Loc::dir` of an empty bucket (a tuple's direction is 0 or 1).
const EMPTY: u8 = u8::MAX;
/// Buckets of a new index's first array.
const MIN_BUCKETS: usize = 16;

/// One bucket: a tuple and its location, or empty.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    key: Key,
    loc: Loc,
}

const VACANT: Bucket = Bucket {
    key: Key {
        src: [0; 16],
        dst: [0; 16],
        sport: 0,
        dport: 0,
        zone: 0,
        proto: 0,
        family: 0,
    },
    loc: Loc {
        slot: 0,
        shard: 0,
        dir: EMPTY,
    },
};

/// Where a shard's bucket array is, for prefetches made without its lock: the array's
/// address and its bucket count less one (0 while it has none), and the shard's hasher.
#[derive(Debug)]
pub(crate) struct Head {
    addr: AtomicUsize,
    mask: AtomicUsize,
    hasher: Hb,
}

impl Head {
    /// The head of an index hashed by `hasher`, with no array yet.
    pub fn new(hasher: Hb) -> Head {
        Head {
            addr: AtomicUsize::new(0),
            mask: AtomicUsize::new(0),
            hasher,
        }
    }

    /// The hash of `key` in this shard's index.
    #[inline]
    pub fn hash(&self, key: &Key) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Start loading the bucket where a probe for `hash` starts (both cache lines a 48-byte
    /// bucket may straddle), if the shard has an array.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        let mask = self.mask.load(Ordering::Relaxed);
        let addr = self.addr.load(Ordering::Relaxed);
        if addr == 0 {
            return;
        }
        let at = addr.wrapping_add((hash as usize & mask) * size_of::<Bucket>());
        crate::prefetch::line(at);
        crate::prefetch::line(at.wrapping_add(size_of::<Bucket>() - 1));
    }
}

/// The index of one shard (see the module documentation).
#[derive(Debug)]
pub(crate) struct Index {
    buckets: Vec<Bucket>,
    len: usize,
    hasher: Hb,
}

impl Index {
    /// An empty index hashing with `hasher` (the same as its [`Head`]'s).
    pub fn new(hasher: Hb) -> Index {
        Index {
            buckets: Vec::new(),
            len: 0,
            hasher,
        }
    }

    /// Tuples in the index.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Where `key`'s entry is.
    #[inline]
    pub fn get(&self, key: &Key) -> Option<&Loc> {
        let mask = self.buckets.len().checked_sub(1)?;
        let mut i = self.hasher.hash_one(key) as usize & mask;
        loop {
            let b = &self.buckets[i];
            if b.loc.dir == EMPTY {
                return None;
            }
            if b.key == *key {
                return Some(&b.loc);
            }
            i = (i + 1) & mask;
        }
    }

    /// Index `key` at `loc` (replacing what it had); publishes a new array in `head`.
    pub fn insert(&mut self, key: Key, loc: Loc, head: &Head) -> Option<Loc> {
        debug_assert_ne!(loc.dir, EMPTY);
        if (self.len + 1) * 4 > self.buckets.len() * 3 {
            self.grow(head);
        }
        let mask = self.buckets.len() - 1;
        let mut i = self.hasher.hash_one(key) as usize & mask;
        loop {
            let b = &mut self.buckets[i];
            if b.loc.dir == EMPTY {
                *b = Bucket { key, loc };
                self.len += 1;
                return None;
            }
            if b.key == key {
                return Some(std::mem::replace(&mut b.loc, loc));
            }
            i = (i + 1) & mask;
        }
    }

    /// Take `key` out of the index; the buckets after it that probed past it move back, so
    /// that no probe meets a hole before its tuple.
    pub fn remove(&mut self, key: &Key) -> Option<Loc> {
        let mask = self.buckets.len().checked_sub(1)?;
        let mut i = self.hasher.hash_one(key) as usize & mask;
        loop {
            let b = &self.buckets[i];
            if b.loc.dir == EMPTY {
                return None;
            }
            if b.key == *key {
                break;
            }
            i = (i + 1) & mask;
        }
        let gone = self.buckets[i].loc;
        // Backward shift: the hole at `i` takes each later bucket of the run whose home lies
        // at or before the hole (cyclically), until an empty bucket ends the run.
        let mut hole = i;
        let mut j = (i + 1) & mask;
        loop {
            let b = self.buckets[j];
            if b.loc.dir == EMPTY {
                break;
            }
            let home = self.hasher.hash_one(b.key) as usize & mask;
            // `b` may move to the hole when the hole lies between its home and `j`.
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.buckets[hole] = b;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.buckets[hole] = VACANT;
        self.len -= 1;
        Some(gone)
    }

    /// Every tuple and its location, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &Loc)> {
        self.buckets
            .iter()
            .filter(|b| b.loc.dir != EMPTY)
            .map(|b| (&b.key, &b.loc))
    }

    /// Double the array (or make the first one) and publish it.
    fn grow(&mut self, head: &Head) {
        let n = (self.buckets.len() * 2).max(MIN_BUCKETS);
        let old = std::mem::replace(&mut self.buckets, vec![VACANT; n]);
        let mask = n - 1;
        for b in old.into_iter().filter(|b| b.loc.dir != EMPTY) {
            let mut i = self.hasher.hash_one(b.key) as usize & mask;
            while self.buckets[i].loc.dir != EMPTY {
                i = (i + 1) & mask;
            }
            self.buckets[i] = b;
        }
        head.addr
            .store(self.buckets.as_ptr() as usize, Ordering::Relaxed);
        head.mask.store(mask, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::table::keyed;

    /// Tuple `n`: addresses and ports scrambled from `n`.
    fn key(n: u32) -> Key {
        let r = crate::table::fmix(u64::from(n) + 1);
        let mut k = Key::default();
        k.src[..8].copy_from_slice(&r.to_le_bytes());
        k.dst[..4].copy_from_slice(&n.to_be_bytes());
        k.sport = (r >> 7) as u16;
        k.dport = 53;
        k.proto = 17;
        k.family = 4;
        k
    }

    fn loc(n: u32) -> Loc {
        Loc {
            slot: n,
            shard: (n % 64) as u8,
            dir: (n % 2) as u8,
        }
    }

    /// Inserts, replacements and removes in a scrambled order answer as a `HashMap` does,
    /// through growth and the backward shifts of removal.
    #[test]
    fn answers_as_a_hash_map_through_growth_and_removal() {
        for seed in [0, 1, 0xdead_beef] {
            let hasher = keyed(seed, 7);
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
                if (x >> 40) % 5 < 3 {
                    let old = ix.insert(key(n), loc(step), &head);
                    assert_eq!(old.map(|l| l.slot), model.insert(n, step));
                } else {
                    let old = ix.remove(&key(n));
                    assert_eq!(old.map(|l| l.slot), model.remove(&n));
                    removed += usize::from(old.is_some());
                }
                assert_eq!(ix.len(), model.len());
            }
            for n in 0..3000 {
                assert_eq!(ix.get(&key(n)).map(|l| l.slot), model.get(&n).copied());
                // The head hashes as the index and points its prefetch into the array.
                let home = head.hash(&key(n)) as usize & (ix.buckets.len() - 1);
                assert_eq!(
                    home,
                    ix.hasher.hash_one(key(n)) as usize & (ix.buckets.len() - 1)
                );
                head.prefetch(head.hash(&key(n)));
            }
            assert_eq!(ix.iter().count(), model.len());
            assert!(removed > 5000, "{removed} removals");
            // The head names the live array.
            assert_eq!(
                head.addr.load(Ordering::Relaxed),
                ix.buckets.as_ptr() as usize
            );
            assert_eq!(head.mask.load(Ordering::Relaxed), ix.buckets.len() - 1);
            assert!(ix.len * 4 <= ix.buckets.len() * 3);
        }
    }

    /// An empty index answers nothing and prefetches nothing.
    #[test]
    fn empty_index() {
        let hasher = keyed(1, 2);
        let head = Head::new(hasher.clone());
        let mut ix = Index::new(hasher);
        assert!(ix.get(&key(1)).is_none());
        assert!(ix.remove(&key(1)).is_none());
        head.prefetch(head.hash(&key(1)));
        assert_eq!(ix.iter().count(), 0);
    }
}
