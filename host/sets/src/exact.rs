//! The exact-match back-end: a hash map from key bytes to element data, as the kernel's
//! `nft_set_hash` / `nft_set_rhash` for sets without the `interval` flag.

use std::collections::HashMap;

use foldhash::fast::FixedState;

use crate::seed::hasher;

/// Keys of up to 16 bytes are stored as numbers (a copy of the set copies the table and
/// allocates nothing per key); longer keys (concatenations of IPv6 addresses) each on the heap.
#[derive(Debug, Clone)]
enum Keys {
    Short(HashMap<u128, u32, FixedState>),
    Long(HashMap<Box<[u8]>, u32, FixedState>),
}

/// Exact-match set: every key has the same length (`key_len` bytes).
#[derive(Debug, Clone)]
pub struct ExactSet {
    key_len: usize,
    map: Keys,
}

/// A key of at most 16 bytes as a number (big-endian).
#[inline(always)]
fn short(key: &[u8]) -> u128 {
    match *key {
        [a, b, c, d] => u128::from(u32::from_be_bytes([a, b, c, d])),
        [a, b, c, d, e, f] => {
            u128::from(u32::from_be_bytes([a, b, c, d])) << 16
                | u128::from(u16::from_be_bytes([e, f]))
        }
        _ => key.iter().fold(0u128, |v, &b| (v << 8) | u128::from(b)),
    }
}

impl ExactSet {
    /// An empty set of keys of `key_len` bytes.
    pub fn new(key_len: usize) -> Self {
        let map = if key_len <= 16 {
            Keys::Short(HashMap::with_hasher(hasher()))
        } else {
            Keys::Long(HashMap::with_hasher(hasher()))
        };
        ExactSet { key_len, map }
    }

    /// Key length in bytes.
    pub fn key_len(&self) -> usize {
        self.key_len
    }

    /// Insert `key` with `data`. A key already present keeps its first data (as the kernel keeps
    /// the first element and refuses the duplicate unless `add` is used, which ignores it).
    /// Returns `false` when the key was already present or has the wrong length.
    pub fn insert(&mut self, key: &[u8], data: u32) -> bool {
        if key.len() != self.key_len {
            return false;
        }
        match &mut self.map {
            Keys::Short(m) => match m.entry(short(key)) {
                std::collections::hash_map::Entry::Occupied(_) => false,
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(data);
                    true
                }
            },
            Keys::Long(m) => {
                if m.contains_key(key) {
                    return false;
                }
                m.insert(key.into(), data);
                true
            }
        }
    }

    /// Remove `key`; its data, or `None` when it was not present.
    pub fn remove(&mut self, key: &[u8]) -> Option<u32> {
        if key.len() != self.key_len {
            return None;
        }
        match &mut self.map {
            Keys::Short(m) => m.remove(&short(key)),
            Keys::Long(m) => m.remove(key),
        }
    }

    /// The data of `key`, if present.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<u32> {
        if key.len() != self.key_len {
            return None;
        }
        match &self.map {
            Keys::Short(m) => m.get(&short(key)).copied(),
            Keys::Long(m) => m.get(key).copied(),
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        match &self.map {
            Keys::Short(m) => m.len(),
            Keys::Long(m) => m.len(),
        }
    }

    /// `true` when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every key with its data, in the table's order (which is not the insertion order). A
    /// key of up to 16 bytes is rebuilt from the number it is stored as.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (std::borrow::Cow<'_, [u8]>, u32)> + '_> {
        let len = self.key_len;
        match &self.map {
            Keys::Short(m) => Box::new(m.iter().map(move |(&k, &d)| {
                (
                    std::borrow::Cow::Owned(k.to_be_bytes()[16 - len..].to_vec()),
                    d,
                )
            })),
            Keys::Long(m) => Box::new(
                m.iter()
                    .map(|(k, &d)| (std::borrow::Cow::Borrowed(&k[..]), d)),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iteration_gives_back_every_key_as_inserted() {
        for len in [2usize, 4, 6, 16, 17, 32] {
            let mut s = ExactSet::new(len);
            let keys: Vec<Vec<u8>> = (0..50u8)
                .map(|i| {
                    (0..len)
                        .map(|j| i.wrapping_mul(7).wrapping_add(j as u8))
                        .collect()
                })
                .collect();
            for (i, k) in keys.iter().enumerate() {
                assert!(s.insert(k, i as u32));
            }
            let mut got: Vec<(Vec<u8>, u32)> = s.iter().map(|(k, d)| (k.into_owned(), d)).collect();
            got.sort_by_key(|g| g.1);
            let want: Vec<(Vec<u8>, u32)> = keys
                .into_iter()
                .enumerate()
                .map(|(i, k)| (k, i as u32))
                .collect();
            assert_eq!(got, want, "key length {len}");
        }
    }

    #[test]
    fn exact_keys_of_concatenation() {
        // ip saddr . tcp dport: 10.0.0.1 . 22 and 10.0.0.2 . 80
        let mut s = ExactSet::new(6);
        assert!(s.insert(&[10, 0, 0, 1, 0, 22], 0));
        assert!(s.insert(&[10, 0, 0, 2, 0, 80], 1));
        assert!(!s.insert(&[10, 0, 0, 2, 0, 80], 7), "duplicate");
        assert!(!s.insert(&[10, 0, 0, 2], 7), "wrong length");
        assert_eq!(s.get(&[10, 0, 0, 1, 0, 22]), Some(0));
        assert_eq!(s.get(&[10, 0, 0, 2, 0, 80]), Some(1));
        assert_eq!(s.get(&[10, 0, 0, 1, 0, 80]), None);
        assert_eq!(s.get(&[10, 0, 0, 1]), None);
        assert_eq!(s.len(), 2);
        assert_eq!(s.remove(&[10, 0, 0, 1, 0, 22]), Some(0));
        assert_eq!(s.get(&[10, 0, 0, 1, 0, 22]), None);
        assert_eq!(s.remove(&[10, 0, 0, 1, 0, 22]), None);
    }

    /// Keys over 16 bytes (two IPv6 addresses and a port) are kept whole.
    #[test]
    fn long_keys() {
        let mut s = ExactSet::new(34);
        let mut k = [0u8; 34];
        k[33] = 1;
        assert!(s.insert(&k, 3));
        k[0] = 1;
        assert_eq!(s.get(&k), None);
        k[0] = 0;
        assert_eq!(s.get(&k), Some(3));
        assert_eq!(s.remove(&k), Some(3));
        assert!(s.is_empty());
    }
}
