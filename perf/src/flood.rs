//! Keys crafted to collide under the hashes wasp used before its tables were seeded at random
//! (the `hash-flood` benchmark): the exact-match set's unkeyed multiply-rotate hash, and the
//! connection table's multiply-rotate hash with its old constant seed. Both hashes are kept
//! here, as they were, only to craft the keys and to show what they did to a table; wasp's
//! tables now hash with foldhash under a seed drawn at start (`wasp_sets::seed`,
//! `wasp_conntrack::Config::seed`, `wasp_flowtable::FlowtableConfig::seed`).
//!
//! Both old hashes mix one 64-bit word at a time with an invertible step (xor, multiply by an
//! odd constant, rotate), so with the seed known, the second word of a key can be solved for
//! any first word such that the state after both is one chosen value: every key then has the
//! same 64-bit hash, and a hash map keeps them all in one probe chain.

use std::hash::{BuildHasher, Hasher};

/// The old set hasher's multiplier (`wasp_sets::fxhash`, unkeyed).
const FX_K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
/// The old connection table's multiplier and seed (`wasp_conntrack::Config::default`).
const CT_K: u64 = 0x9e37_79b9_7f4a_7c15;
/// The old connection table's constant seed.
pub const OLD_CT_SEED: u64 = 0x5eed_c0de_1234_5678;
/// Shards of the connection table (`wasp_conntrack`'s `SHARDS`).
const CT_SHARDS: u64 = 64;

/// The inverse of odd `k` modulo 2^64 (Newton's iteration).
fn inverse(k: u64) -> u64 {
    let mut x = k;
    for _ in 0..6 {
        x = x.wrapping_mul(2u64.wrapping_sub(k.wrapping_mul(x)));
    }
    x
}

/// splitmix64: distinct, well-spread first words.
fn spread(i: u64) -> u64 {
    let mut z = i.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The old set hasher, as it was: state `(state.rotl(5) ^ word) * K` from 0, the high half
/// folded down at the end.
#[derive(Default, Clone, Copy)]
pub struct OldSetHasher(u64);

impl Hasher for OldSetHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(FX_K);
        }
    }
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

/// [`BuildHasher`] of [`OldSetHasher`].
#[derive(Default, Clone, Copy)]
pub struct OldSetBuild;

impl BuildHasher for OldSetBuild {
    type Hasher = OldSetHasher;
    fn build_hasher(&self) -> OldSetHasher {
        OldSetHasher(0)
    }
}

/// `n` distinct 16-byte keys (an `ipv6_addr` set's, as `ExactSet` holds them: the key's
/// big-endian number) that all have one hash under [`OldSetHasher`].
pub fn set_keys(n: usize) -> Vec<[u8; 16]> {
    let target = 0x0123_4567_89ab_cdefu64;
    let kinv = inverse(FX_K);
    (0..n as u64)
        .map(|i| {
            // `u128` hashes as its 16 native (little-endian) bytes: low word, then high.
            let lo = spread(i);
            let hi = (lo.wrapping_mul(FX_K)).rotate_left(5) ^ target.wrapping_mul(kinv);
            ((u128::from(hi) << 64) | u128::from(lo)).to_be_bytes()
        })
        .collect()
}

/// `n` random 16-byte keys (the same count, nothing crafted).
pub fn random_keys(n: usize) -> Vec<[u8; 16]> {
    (0..n as u64)
        .map(|i| ((u128::from(spread(i ^ 0xabcd)) << 64) | u128::from(spread(!i))).to_be_bytes())
        .collect()
}

/// The old connection-table hasher, as it was: state `((state ^ word) * K).rotl(31)` from the
/// seed, murmur3's avalanche at the end.
#[derive(Clone, Copy)]
pub struct OldCtHasher(u64);

fn fmix(mut z: u64) -> u64 {
    z ^= z >> 33;
    z = z.wrapping_mul(0xff51_afd7_ed55_8ccd);
    z ^= z >> 33;
    z = z.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    z ^ (z >> 33)
}

impl OldCtHasher {
    fn step(s: u64, x: u64) -> u64 {
        (s ^ x).wrapping_mul(CT_K).rotate_left(31)
    }
}

impl Hasher for OldCtHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = Self::step(self.0, x);
    }
    fn finish(&self) -> u64 {
        fmix(self.0)
    }
}

/// [`BuildHasher`] of the old index map of connection-table shard `shard`.
#[derive(Clone, Copy)]
pub struct OldCtBuild(u64);

impl OldCtBuild {
    /// The old index map of shard `shard` of a table seeded with [`OLD_CT_SEED`].
    pub fn shard(shard: u64) -> OldCtBuild {
        OldCtBuild(fmix(OLD_CT_SEED ^ shard))
    }
}

impl BuildHasher for OldCtBuild {
    type Hasher = OldCtHasher;
    fn build_hasher(&self) -> OldCtHasher {
        OldCtHasher(self.0)
    }
}

/// A UDP/IPv6 flow's tuple words as the connection table's `Key::words` lays them out
/// (addresses as little-endian words, then ports, zone 0, protocol 17, family 6), hashed as
/// the old index map hashed them: one `write_u64` per word, no length.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CtWords(pub [u64; 5]);

impl std::hash::Hash for CtWords {
    fn hash<H: Hasher>(&self, h: &mut H) {
        for w in self.0 {
            h.write_u64(w);
        }
    }
}

/// The fixed part of the crafted flows: destination `2001:db8::1`, ports 4000 -> 53.
pub const CT_DST: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
/// Source port of the crafted flows.
pub const CT_SPORT: u16 = 4000;
/// Destination port of the crafted flows.
pub const CT_DPORT: u16 = 53;

fn le(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(b);
    u64::from_le_bytes(w)
}

/// The tuple words of the flow from `src`.
pub fn ct_words(src: &[u8; 16]) -> CtWords {
    CtWords([
        le(&src[..8]),
        le(&src[8..]),
        le(&CT_DST[..8]),
        le(&CT_DST[8..]),
        u64::from(CT_SPORT) | u64::from(CT_DPORT) << 16 | 17 << 48 | 6 << 56,
    ])
}

/// The old table's shard of the flow from `src` (its symmetric words under the old seed).
pub fn old_ct_shard(src: &[u8; 16]) -> u64 {
    let fold = |a: &[u8; 16]| le(&a[..8]) ^ le(&a[8..]);
    let a = (*src, CT_SPORT);
    let b = (CT_DST, CT_DPORT);
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    let mut h = OldCtHasher(OLD_CT_SEED);
    h.write_u64(fold(&lo.0) ^ u64::from(lo.1) << 48);
    h.write_u64(fold(&hi.0) ^ u64::from(hi.1) << 48);
    h.write_u64(17);
    h.finish() & (CT_SHARDS - 1)
}

/// `n` IPv6 source addresses whose UDP flows to [`CT_DST`] all land in shard 0 of the old
/// table and all have one hash in that shard's index map.
pub fn ct_sources(n: usize) -> Vec<[u8; 16]> {
    let s0 = OldCtBuild::shard(0).0;
    let target = 0x0bad_cafe_dead_beefu64;
    let kinv = inverse(CT_K);
    let mut out = Vec::with_capacity(n);
    let mut i = 0u64;
    while out.len() < n {
        let w0 = spread(i);
        i += 1;
        // State after the first word; the second word brings it to `target`.
        let s1 = OldCtHasher::step(s0, w0);
        let w1 = target.rotate_right(31).wrapping_mul(kinv) ^ s1;
        let mut src = [0u8; 16];
        src[..8].copy_from_slice(&w0.to_le_bytes());
        src[8..].copy_from_slice(&w1.to_le_bytes());
        if old_ct_shard(&src) == 0 {
            out.push(src);
        }
    }
    out
}

/// `n` random IPv6 source addresses in `2001:db8:1::/48`.
pub fn random_sources(n: usize) -> Vec<[u8; 16]> {
    (0..n as u64)
        .map(|i| {
            let mut a = [0u8; 16];
            a[..6].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 1]);
            a[6..14].copy_from_slice(&spread(i).to_be_bytes());
            a[14..].copy_from_slice(&(i as u16).to_be_bytes());
            a
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn crafted_set_keys_share_one_old_hash_and_spread_under_a_seed() {
        let keys = set_keys(2000);
        assert_eq!(keys.iter().collect::<HashSet<_>>().len(), 2000);
        let old: HashSet<u64> = keys
            .iter()
            .map(|k| OldSetBuild.hash_one(u128::from_be_bytes(*k)))
            .collect();
        assert_eq!(old.len(), 1);
        let new = foldhash::fast::FixedState::with_seed(wasp_sets::seed::random_seed());
        let spread: HashSet<u64> = keys
            .iter()
            .map(|k| new.hash_one(u128::from_be_bytes(*k)) & 0xffff)
            .collect();
        assert!(spread.len() > 1500, "{}", spread.len());
    }

    #[test]
    fn crafted_flows_share_one_old_shard_and_hash() {
        let srcs = ct_sources(300);
        assert_eq!(srcs.iter().collect::<HashSet<_>>().len(), 300);
        assert!(srcs.iter().all(|s| old_ct_shard(s) == 0));
        let b = OldCtBuild::shard(0);
        let old: HashSet<u64> = srcs.iter().map(|s| b.hash_one(ct_words(s))).collect();
        assert_eq!(old.len(), 1);
        let new = foldhash::fast::FixedState::with_seed(wasp_sets::seed::random_seed());
        let spread: HashSet<u64> = srcs.iter().map(|s| new.hash_one(ct_words(s))).collect();
        assert_eq!(spread.len(), 300);
    }
}
