//! The seed of the exact-match back-end's hash ([`crate::ExactSet`]): set keys come from
//! packets, so the hash is keyed (foldhash, seeded) with a seed drawn at random once per
//! process, as the kernel seeds `nft_set_hash` with `get_random_u32()`; a sender who cannot see
//! the seed cannot aim keys at one bucket. Runs that must be reproducible (`wasp replay`) fix
//! it before the first set is built.

use std::hash::BuildHasher;
use std::sync::OnceLock;

use foldhash::fast::FixedState;

static SEED: OnceLock<u64> = OnceLock::new();

/// A fresh random 64-bit seed (from the standard library's per-process random keys, which
/// the operating system's random source initialises).
pub fn random_seed() -> u64 {
    std::collections::hash_map::RandomState::new().hash_one(0x5e_ed_u64)
}

/// The process's set hash seed: the one [`fix_hash_seed`] fixed, else drawn at random on
/// first use.
pub fn hash_seed() -> u64 {
    *SEED.get_or_init(random_seed)
}

/// Fix the set hash seed (for reproducible runs). `false` when a different seed was already
/// drawn or fixed: sets built before keep theirs, so call this before building any.
pub fn fix_hash_seed(seed: u64) -> bool {
    *SEED.get_or_init(|| seed) == seed
}

/// The keyed hasher builder of a new set.
pub(crate) fn hasher() -> FixedState {
    FixedState::with_seed(hash_seed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_random_and_fixed_only_before_first_use() {
        let draws: std::collections::HashSet<u64> = (0..16).map(|_| random_seed()).collect();
        assert_eq!(draws.len(), 16);
        // Other tests may have drawn the process seed already: it stays what it is.
        let s = hash_seed();
        assert!(fix_hash_seed(s));
        assert!(!fix_hash_seed(s ^ 1));
        assert_eq!(hash_seed(), s);
    }
}
