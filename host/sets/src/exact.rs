//! The exact-match back-end: a hash map from key bytes to element data, as the kernel's
//! `nft_set_hash` / `nft_set_rhash` for sets without the `interval` flag.

use std::collections::HashMap;

use crate::fxhash::FxBuild;

/// Exact-match set: every key has the same length (`key_len` bytes).
#[derive(Debug, Clone)]
pub struct ExactSet {
    key_len: usize,
    map: HashMap<Box<[u8]>, u32, FxBuild>,
}

impl ExactSet {
    /// An empty set of keys of `key_len` bytes.
    pub fn new(key_len: usize) -> Self {
        ExactSet {
            key_len,
            map: HashMap::with_hasher(FxBuild),
        }
    }

    /// Key length in bytes.
    pub fn key_len(&self) -> usize {
        self.key_len
    }

    /// Insert `key` with `data`. A key already present keeps its first data (as the kernel keeps
    /// the first element and refuses the duplicate unless `add` is used, which ignores it).
    /// Returns `false` when the key was already present or has the wrong length.
    pub fn insert(&mut self, key: &[u8], data: u32) -> bool {
        if key.len() != self.key_len || self.map.contains_key(key) {
            return false;
        }
        self.map.insert(key.into(), data);
        true
    }

    /// Remove `key`; its data, or `None` when it was not present.
    pub fn remove(&mut self, key: &[u8]) -> Option<u32> {
        self.map.remove(key)
    }

    /// The data of `key`, if present.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<u32> {
        self.map.get(key).copied()
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// `true` when empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
