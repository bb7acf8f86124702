//! One field of a pipapo set: its lookup table (buckets of rule bitmaps per group) and its
//! mapping table, with the kernel's growth and 8/4-bit group switching (`pipapo_resize`,
//! `pipapo_lt_bits_adjust`).

use super::bits;
use super::expand::{Prefix, low_mask};

/// One 256-bit word of a bucket: 256 rule bits, rule `r` is bit `r % 64` of word `(r % 256) / 64`
/// (the kernel's bitmap layout), aligned to 32 bytes as the kernel aligns its AVX2 buckets.
#[repr(C, align(32))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Block(pub [u64; 4]);

impl Block {
    /// All bits clear.
    pub const ZERO: Block = Block([0; 4]);
    /// All bits set.
    pub const ONES: Block = Block([u64::MAX; 4]);

    /// `true` when no bit is set.
    #[inline]
    pub fn is_zero(&self) -> bool {
        (self.0[0] | self.0[1] | self.0[2] | self.0[3]) == 0
    }
}

/// Rules per block.
pub(crate) const BLOCK_BITS: usize = 256;

/// `NFT_PIPAPO_LT_SIZE_THRESHOLD`: a field whose 8-bit table grows past 2 MiB goes 4-bit.
pub const LT_SIZE_HIGH: usize = 1 << 21;
/// `NFT_PIPAPO_LT_SIZE_HYSTERESIS`.
pub const LT_SIZE_HYSTERESIS: usize = 1 << 16;
/// `NFT_PIPAPO_LT_SIZE_LOW`: a 4-bit field whose table shrinks below this may go back to 8-bit.
pub const LT_SIZE_LOW: usize = LT_SIZE_HIGH - LT_SIZE_HYSTERESIS;
/// `NFT_PIPAPO_ALIGN_HEADROOM` on x86_64 (32 - `ARCH_KMALLOC_MINALIGN`), counted by the kernel
/// when it checks whether the 8-bit table would fit.
pub const ALIGN_HEADROOM: usize = 24;

/// How a field chooses its group width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupPolicy {
    /// The kernel's rule: start with 8-bit groups, switch a field to 4-bit past
    /// [`LT_SIZE_HIGH`] and back below [`LT_SIZE_LOW`] when the 8-bit table fits.
    #[default]
    Auto,
    /// Always 8-bit groups (for tests and benchmarks).
    Fixed8,
    /// Always 4-bit groups (the kernel's original layout; for tests and benchmarks).
    Fixed4,
}

/// One mapping slot of a field but the last: the first rule (`to`) and the rule count (`n`)
/// of the same element in the next field. (The last field maps each rule to its element's
/// handle: [`Field::ends`], half the size; the kernel's `union nft_pipapo_map_bucket` takes
/// a slot of this size there too.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Map {
    /// First rule in the next field.
    pub to: u32,
    /// Rules in the next field.
    pub n: u32,
}

/// Lookup and mapping tables of one field.
#[derive(Debug, Clone)]
pub struct Field {
    /// Field length in bytes (1..=16).
    pub len: usize,
    /// Group width in bits: 8 or 4.
    pub bb: u32,
    /// Groups: `len * 8 / bb`.
    pub groups: usize,
    /// Rules stored.
    pub rules: usize,
    /// Bucket size in blocks: `ceil(rules / 256)`.
    pub bblocks: usize,
    /// Blocks allocated per bucket (`>= bblocks`; the blocks past `bblocks` are zero): the
    /// table grows with slack, so that inserting rule after rule does not copy the whole
    /// table every 256 rules.
    pub stride: usize,
    /// Lookup table: `groups * 2^bb` buckets of `stride` blocks, bucket `(g, v)` at block
    /// `((g << bb) | v) * stride`; its first `bblocks` blocks hold the rules.
    pub lt: Vec<Block>,
    /// One mapping slot per rule (every field but the last; empty in the last).
    pub mt: Vec<Map>,
    /// The last field: the element handle of each rule (empty in the others).
    pub ends: Vec<u32>,
    /// Per bucket, blocks `[lo, hi)` outside which the bucket is zero (`[u32::MAX, 0]` for
    /// an empty bucket; may be wider than the truth, never narrower). A lookup ANDs only the
    /// intersection of its buckets' ranges: a selftest set's high-byte buckets hold a few
    /// adjacent rules, so a 118-block bucket shrinks to one or two blocks.
    pub nz: Vec<[u32; 2]>,
}

/// `Field::nz` of an empty bucket.
pub(crate) const NZ_EMPTY: [u32; 2] = [u32::MAX, 0];

/// Keep the entries of `v` (one per rule) outside the spans `cuts` (sorted, disjoint
/// `(first rule, count)`).
fn retain_uncut<T>(v: &mut Vec<T>, cuts: &[(usize, usize)]) {
    let mut k = 0;
    let mut i = 0;
    v.retain(|_| {
        let r = i;
        i += 1;
        while k < cuts.len() && cuts[k].0 + cuts[k].1 <= r {
            k += 1;
        }
        !(k < cuts.len() && cuts[k].0 <= r)
    });
}

/// Size of a lookup table in bytes.
#[inline]
pub(crate) fn lt_bytes(groups: usize, bb: u32, bblocks: usize) -> usize {
    (groups << bb) * bblocks * std::mem::size_of::<Block>()
}

impl Field {
    /// An empty field of `len` bytes with `bb`-bit groups.
    pub fn new(len: usize, bb: u32) -> Field {
        Field {
            len,
            bb,
            groups: len * 8 / bb as usize,
            rules: 0,
            bblocks: 0,
            stride: 0,
            lt: Vec::new(),
            mt: Vec::new(),
            ends: Vec::new(),
            nz: Vec::new(),
        }
    }

    /// Bits of the field.
    #[inline]
    pub fn bits(&self) -> u32 {
        self.len as u32 * 8
    }

    /// Table size in bytes as the kernel counts it (buckets of `bblocks`, no slack).
    pub fn lt_bytes(&self) -> usize {
        lt_bytes(self.groups, self.bb, self.bblocks)
    }

    /// Table bytes allocated (with the growth slack).
    pub fn lt_alloc_bytes(&self) -> usize {
        self.lt.len() * std::mem::size_of::<Block>()
    }

    /// Block index of bucket `(g, v)`.
    #[inline]
    pub fn bucket(&self, g: usize, v: usize) -> usize {
        ((g << self.bb) | v) * self.stride
    }

    /// Group values of a field value (`bytes` holds exactly `len` bytes), most significant
    /// group first, written to `out` as bucket base block indices. Returns the group count.
    #[inline(always)]
    pub fn bases(&self, bytes: &[u8], out: &mut [usize; 32]) -> usize {
        if self.bb == 8 {
            for (g, &b) in bytes.iter().enumerate() {
                out[g] = ((g << 8) | b as usize) * self.stride;
            }
        } else {
            for (i, &b) in bytes.iter().enumerate() {
                out[2 * i] = ((2 * i) << 4 | (b >> 4) as usize) * self.stride;
                out[2 * i + 1] = ((2 * i + 1) << 4 | (b & 15) as usize) * self.stride;
            }
        }
        self.groups
    }

    /// As [`Field::bases`], and the intersection `[lo, hi)` of the buckets' non-zero block
    /// ranges, clamped to `bblocks` (`lo >= hi`: the AND is zero). Returns `(groups, lo, hi)`.
    #[inline(always)]
    pub fn bases_nz(&self, bytes: &[u8], out: &mut [usize; 32]) -> (usize, usize, usize) {
        let (mut lo, mut hi) = (0u32, self.bblocks as u32);
        let mut put = |i: usize, id: usize| {
            out[i] = id * self.stride;
            let [l, h] = self.nz.get(id).copied().unwrap_or([0, u32::MAX]);
            lo = lo.max(l);
            hi = hi.min(h);
        };
        if self.bb == 8 {
            for (g, &b) in bytes.iter().enumerate() {
                put(g, (g << 8) | b as usize);
            }
        } else {
            for (i, &b) in bytes.iter().enumerate() {
                put(2 * i, (2 * i) << 4 | (b >> 4) as usize);
                put(2 * i + 1, (2 * i + 1) << 4 | (b & 15) as usize);
            }
        }
        (self.groups, lo as usize, hi as usize)
    }

    /// Recompute every bucket's non-zero block range from the table.
    pub(crate) fn recompute_nz(&mut self) {
        let buckets = self.groups << self.bb;
        self.nz.clear();
        self.nz.resize(buckets, NZ_EMPTY);
        for (b, r) in self.nz.iter_mut().enumerate() {
            let blocks = &self.lt[b * self.stride..b * self.stride + self.bblocks];
            if let Some(l) = blocks.iter().position(|x| !x.is_zero()) {
                let h = blocks.iter().rposition(|x| !x.is_zero()).unwrap_or(l);
                *r = [l as u32, h as u32 + 1];
            }
        }
    }

    /// Resize the bucket size for `rules` rules, keeping each bucket's first blocks. The
    /// table is reallocated only when the buckets outgrow their stride (then with a quarter
    /// of slack) or shrink below half of it; otherwise the dropped blocks are zeroed.
    pub fn resize(&mut self, rules: usize) {
        let nb = rules.div_ceil(BLOCK_BITS);
        if nb == self.bblocks {
            return;
        }
        let buckets = self.groups << self.bb;
        if nb > self.stride || nb * 2 < self.stride {
            let stride = if nb > self.stride { nb + nb / 4 } else { nb };
            let mut lt = vec![Block::ZERO; buckets * stride];
            let keep = nb.min(self.bblocks);
            for b in 0..buckets {
                lt[b * stride..b * stride + keep]
                    .copy_from_slice(&self.lt[b * self.stride..b * self.stride + keep]);
            }
            self.lt = lt;
            self.stride = stride;
        } else if nb < self.bblocks {
            for b in 0..buckets {
                self.lt[b * self.stride + nb..b * self.stride + self.bblocks].fill(Block::ZERO);
            }
        }
        let shrunk = nb < self.bblocks;
        self.bblocks = nb;
        if shrunk || self.nz.len() != buckets {
            self.recompute_nz();
        }
    }

    /// Drop the table's growth slack (`stride` down to `bblocks`) and the spare capacity of
    /// every buffer: for a field that is not going to grow soon (a set just built at once).
    pub fn shrink_to_fit(&mut self) {
        if self.stride > self.bblocks {
            let (old, nb) = (self.stride, self.bblocks);
            let buckets = self.groups << self.bb;
            let mut lt = Vec::with_capacity(buckets * nb);
            for b in 0..buckets {
                lt.extend_from_slice(&self.lt[b * old..b * old + nb]);
            }
            self.lt = lt;
            self.stride = nb;
        }
        self.lt.shrink_to_fit();
        self.mt.shrink_to_fit();
        self.ends.shrink_to_fit();
        self.nz.shrink_to_fit();
    }

    /// Set rule `r`'s bit in every bucket that accepts the prefix (kernel `pipapo_insert` for
    /// one rule). The table must already be sized for `r`.
    pub fn set_rule(&mut self, r: usize, p: Prefix) {
        let bits = self.bits();
        let bb = self.bb;
        let (blk, w, bit) = (r / BLOCK_BITS, (r % BLOCK_BITS) / 64, r % 64);
        for g in 0..self.groups {
            let shift = bits - (g as u32 + 1) * bb;
            let v = ((p.value >> shift) & low_mask(bb)) as usize;
            let lo_bit = g as u32 * bb;
            let (first, count) = if p.mask_len >= lo_bit + bb {
                (v, 1)
            } else if p.mask_len <= lo_bit {
                (0, 1usize << bb)
            } else {
                let free = bb - (p.mask_len - lo_bit);
                ((v >> free) << free, 1usize << free)
            };
            for x in first..first + count {
                let i = self.bucket(g, x) + blk;
                self.lt[i].0[w] |= 1u64 << bit;
                let id = (g << bb) | x;
                if let Some(r) = self.nz.get_mut(id) {
                    *r = [r[0].min(blk as u32), r[1].max(blk as u32 + 1)];
                }
            }
        }
    }

    /// Remove the rules of the spans `cuts` (sorted, disjoint `(first rule, count)`) from
    /// every bucket and the mapping table; later rules move down (kernel `pipapo_drop` with
    /// `bitmap_cut`, all cuts in one pass). Only the blocks between the first cut and a
    /// bucket's last non-zero block are touched; each bucket's non-zero range is updated.
    pub fn cut_rules(&mut self, cuts: &[(usize, usize)]) {
        let Some(&(first, _)) = cuts.first() else {
            return;
        };
        let total: usize = cuts.iter().map(|c| c.1).sum();
        let first_blk = first / BLOCK_BITS;
        let buckets = self.groups << self.bb;
        let known = self.nz.len() == buckets;
        for b in 0..buckets {
            let [lo, hi] = if known {
                let [l, h] = self.nz[b];
                [l as usize, (h as usize).min(self.bblocks)]
            } else {
                [0, self.bblocks]
            };
            if lo >= hi || hi <= first_blk {
                continue;
            }
            let base = b * self.stride;
            let blocks = &mut self.lt[base..base + self.bblocks];
            bits::cut_spans(blocks, cuts, hi * BLOCK_BITS);
            // Bits move down by at most `total`: the new range starts at most that far lower.
            let from = lo.saturating_sub(total.div_ceil(BLOCK_BITS) + 1);
            let l = (from..hi).find(|&i| !blocks[i].is_zero());
            if known {
                self.nz[b] = match l {
                    Some(l) => {
                        let h = (l..hi).rfind(|&i| !blocks[i].is_zero()).unwrap_or(l);
                        [l as u32, h as u32 + 1]
                    }
                    None => NZ_EMPTY,
                };
            }
        }
        retain_uncut(&mut self.mt, cuts);
        retain_uncut(&mut self.ends, cuts);
        self.rules -= total;
    }

    /// The kernel's `pipapo_lt_bits_adjust` under `policy`: 8-bit to 4-bit when the table
    /// exceeds [`LT_SIZE_HIGH`], 4-bit back to 8-bit when it is below [`LT_SIZE_LOW`] and the
    /// 8-bit table (plus the allocation headroom) would fit in [`LT_SIZE_HIGH`].
    pub fn adjust_bits(&mut self, policy: GroupPolicy) {
        match policy {
            GroupPolicy::Fixed8 | GroupPolicy::Fixed4 => {}
            GroupPolicy::Auto => {
                if self.bb == 8 && self.lt_bytes() > LT_SIZE_HIGH {
                    self.to_4bit();
                } else if self.bb == 4
                    && self.lt_bytes() < LT_SIZE_LOW
                    && lt_bytes(self.len, 8, self.bblocks) + ALIGN_HEADROOM <= LT_SIZE_HIGH
                {
                    self.to_8bit();
                }
            }
        }
    }

    /// Convert 8-bit groups to 4-bit: new bucket (2g, h) is the OR of old buckets (g, x) with
    /// high nibble h, (2g+1, l) the OR of those with low nibble l.
    pub fn to_4bit(&mut self) {
        if self.bb != 8 {
            return;
        }
        let (nb, st) = (self.bblocks, self.stride);
        let groups = self.len * 2;
        let mut lt = vec![Block::ZERO; (groups << 4) * st];
        for g in 0..self.len {
            for x in 0..256usize {
                let old = ((g << 8) | x) * st;
                let hi = ((2 * g) << 4 | (x >> 4)) * st;
                let lo = ((2 * g + 1) << 4 | (x & 15)) * st;
                for k in 0..nb {
                    let o = self.lt[old + k];
                    for w in 0..4 {
                        lt[hi + k].0[w] |= o.0[w];
                        lt[lo + k].0[w] |= o.0[w];
                    }
                }
            }
        }
        self.lt = lt;
        self.bb = 4;
        self.groups = groups;
        self.recompute_nz();
    }

    /// Convert 4-bit groups to 8-bit: new bucket (g, x) is old (2g, x >> 4) AND (2g+1, x & 15).
    pub fn to_8bit(&mut self) {
        if self.bb != 4 {
            return;
        }
        let (nb, st) = (self.bblocks, self.stride);
        let groups = self.len;
        let mut lt = vec![Block::ZERO; (groups << 8) * st];
        for g in 0..groups {
            for x in 0..256usize {
                let new = ((g << 8) | x) * st;
                let hi = ((2 * g) << 4 | (x >> 4)) * st;
                let lo = ((2 * g + 1) << 4 | (x & 15)) * st;
                for k in 0..nb {
                    for w in 0..4 {
                        lt[new + k].0[w] = self.lt[hi + k].0[w] & self.lt[lo + k].0[w];
                    }
                }
            }
        }
        self.lt = lt;
        self.bb = 8;
        self.groups = groups;
        self.recompute_nz();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_points_match_the_research_table() {
        // A field first goes 4-bit when its 8-bit table exceeds 2 MiB: groups*256*bblocks*32.
        // IPv4 (4 bytes): > 16384 rules (bblocks 65 -> 2.08 MiB), port: > 32768, proto: > 65536.
        assert!(lt_bytes(4, 8, 16384 / 256) <= LT_SIZE_HIGH);
        assert!(lt_bytes(4, 8, 16385usize.div_ceil(256)) > LT_SIZE_HIGH);
        assert!(lt_bytes(2, 8, 32768 / 256) <= LT_SIZE_HIGH);
        assert!(lt_bytes(2, 8, 32769usize.div_ceil(256)) > LT_SIZE_HIGH);
        assert!(lt_bytes(1, 8, 65536 / 256) <= LT_SIZE_HIGH);
        assert!(lt_bytes(16, 8, 4096 / 256) <= LT_SIZE_HIGH);
        assert!(lt_bytes(16, 8, 4097usize.div_ceil(256)) > LT_SIZE_HIGH);
    }
}
