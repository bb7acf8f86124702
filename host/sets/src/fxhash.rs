//! A small, fast, non-cryptographic hasher for set keys (the "Fx" multiply-rotate hash used by
//! rustc). Set keys come from packets, so a hostile sender could aim for collisions; the sets
//! issue replaces this with a keyed hash. For the foundation, speed matters more.

use std::hash::{BuildHasher, Hasher};

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// Hasher state: one word, mixed with each 8-byte chunk of input.
#[derive(Debug, Clone, Copy, Default)]
pub struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // The multiply leaves the low bits depending only on the input's low bits, and the
        // hash map picks buckets by the low bits: keys whose first bytes are equal (addresses
        // of one /8, `10.0.0.x . port`) would all collide. Fold the well-mixed high half down.
        self.hash ^ (self.hash >> 32)
    }
}

/// [`BuildHasher`] for [`FxHasher`].
#[derive(Debug, Clone, Copy, Default)]
pub struct FxBuild;

impl BuildHasher for FxBuild {
    type Hasher = FxHasher;
    fn build_hasher(&self) -> FxHasher {
        FxHasher::default()
    }
}
