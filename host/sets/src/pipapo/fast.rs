//! The fast lookup path, tried before the bitmap pipeline of `lookup`.
//!
//! Field 0 is ANDed over its whole bucket (the variant's SIMD step, unrolled per group count)
//! and its set rules are collected directly as a short list instead of being stored in a
//! result map. Every later field only looks at the few 64-bit words that the previous field's
//! mapping ranges reach: those ranges are ORed into a small window of words on the stack,
//! ANDed with the key's bucket words and turned into the next list. No scratch, no zeroing.
//!
//! The answer is the one of the bitmap pipeline (kernel `pipapo_get_slow`): the same union of
//! mapping ranges per field, the same AND, the lowest live rule of the last field. When a list
//! or window outgrows its fixed size the fast path answers "fall back" (`None`) and the caller
//! runs the bitmap pipeline.

use super::field::{BLOCK_BITS, Block, Field};
use super::{ElemHandle, Pipapo};

/// Most set rules carried from one field to the next.
pub(crate) const MAX_RULES: usize = 16;
/// Keys ahead whose buckets a batched lookup prefetches.
pub(crate) const BATCH_AHEAD: usize = 8;
/// Buckets of at most this many blocks are ANDed whole, without their non-zero ranges.
pub(crate) const NZ_MIN_BLOCKS: usize = 8;
/// Widest window of 64-bit words a later field may need.
pub(crate) const WINDOW: usize = 16;

/// Set rules of one field for one key, ascending.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules {
    pub(crate) r: [u32; MAX_RULES],
    pub(crate) n: usize,
}

impl Rules {
    /// No rule.
    pub(crate) const EMPTY: Rules = Rules {
        r: [0; MAX_RULES],
        n: 0,
    };

    /// Append the set bits of word `w` (bit 0 is rule `base`); `false` on overflow.
    #[inline(always)]
    pub(crate) fn push_word(&mut self, mut w: u64, base: usize) -> bool {
        while w != 0 {
            if self.n == MAX_RULES {
                return false;
            }
            self.r[self.n] = (base + w.trailing_zeros() as usize) as u32;
            self.n += 1;
            w &= w - 1;
        }
        true
    }

    /// Append the set bits of block `b`; `false` on overflow.
    #[inline(always)]
    pub(crate) fn push_block(&mut self, blk: &Block, b: usize) -> bool {
        for w in 0..4 {
            if !self.push_word(blk.0[w], b * BLOCK_BITS + w * 64) {
                return false;
            }
        }
        true
    }
}

/// The portable field-0 step: rules set in `AND_g lt[bases[g] .. + nb]`, ascending, into
/// `out` (which must be empty). `false` when they do not fit or the bases are out of range.
/// `G` is the group count when known at compile time (0: `bases.len()`).
#[inline(always)]
pub(crate) fn first_scalar<const G: usize>(
    lt: &[Block],
    bases: &[usize],
    nb: usize,
    out: &mut Rules,
) -> bool {
    let g = if G == 0 { bases.len() } else { G };
    if g == 0 || bases.len() < g {
        return false;
    }
    let Some(b0) = lt.get(bases[0]..bases[0] + nb) else {
        return false;
    };
    for (b, first) in b0.iter().enumerate() {
        let mut acc = *first;
        for &base in &bases[1..g] {
            let Some(l) = lt.get(base + b) else {
                return false;
            };
            for w in 0..4 {
                acc.0[w] &= l.0[w];
            }
        }
        if !acc.is_zero() && !out.push_block(&acc, b) {
            return false;
        }
    }
    true
}

/// Run `$f::<G>($args)` with `G` the group count `$g` when it is one of the kernel's
/// specialised sizes (1, 2, 4, 6, 8, 12, 16, 32 groups), else `G = 0` (dynamic).
macro_rules! by_groups {
    ($g:expr, $f:ident ( $($a:expr),* )) => {
        match $g {
            1 => $f::<1>($($a),*),
            2 => $f::<2>($($a),*),
            4 => $f::<4>($($a),*),
            6 => $f::<6>($($a),*),
            8 => $f::<8>($($a),*),
            12 => $f::<12>($($a),*),
            16 => $f::<16>($($a),*),
            32 => $f::<32>($($a),*),
            _ => $f::<0>($($a),*),
        }
    };
}
pub(crate) use by_groups;

/// What one field step left for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Rules of the field just processed are in the key's list; go on with the next field.
    Next,
    /// The lookup is over with this answer.
    Done(Option<ElemHandle>),
    /// Too many rules or words: run the bitmap pipeline.
    Fallback,
}

impl<X: Clone> Pipapo<X> {
    /// The lowest live rule of the last field `f` among `rules` (kernel refill in match-only
    /// mode, skipping expired elements); a rule past the field's rules answers no match, as
    /// the bitmap pipeline does.
    #[inline(always)]
    fn last_live(&self, f: &Field, rules: &Rules, now: u64) -> Option<ElemHandle> {
        for &r in &rules.r[..rules.n] {
            let r = r as usize;
            let h = *f.ends.get(r).filter(|_| r < f.rules)?;
            // Without timed elements every slot a rule maps to is live (expiry `u64::MAX`).
            if self.live(h, now) {
                return Some(ElemHandle(h));
            }
        }
        None
    }

    /// After field 0: `rules` holds its set rules. Decides whether field 0 was the last one.
    #[inline(always)]
    pub(crate) fn after_first(&self, rules: &Rules, now: u64) -> Flow {
        if self.fields.len() == 1 {
            Flow::Done(self.last_live(&self.fields[0], rules, now))
        } else if rules.n == 0 {
            Flow::Done(None)
        } else {
            Flow::Next
        }
    }

    /// The word window field `fi` (>= 1) needs for the previous field's `rules`: first word
    /// and word count, with the mapped ranges ORed into `words`. `None` to fall back,
    /// `Some(None)` for no match.
    #[inline(always)]
    fn window(
        &self,
        fi: usize,
        rules: &Rules,
        words: &mut [u64; WINDOW],
    ) -> Option<Option<(usize, usize)>> {
        let pf = &self.fields[fi - 1];
        let f = &self.fields[fi];
        let (mut lo, mut hi) = (usize::MAX, 0usize);
        for &r in &rules.r[..rules.n] {
            let r = r as usize;
            let Some(m) = pf.mt.get(r).filter(|_| r < pf.rules) else {
                return Some(None);
            };
            if m.n == 0 {
                continue;
            }
            lo = lo.min(m.to as usize / 64);
            hi = hi.max((m.to as usize + m.n as usize).div_ceil(64));
        }
        if lo == usize::MAX {
            return Some(None);
        }
        if hi > f.bblocks * 4 {
            return Some(None);
        }
        let nw = hi - lo;
        if nw > WINDOW {
            return None;
        }
        *words = [0; WINDOW];
        for &r in &rules.r[..rules.n] {
            let m = pf.mt[r as usize];
            let (mut i, end) = (m.to as usize - lo * 64, (m.to + m.n) as usize - lo * 64);
            while i < end {
                let (w, bit) = (i / 64, i % 64);
                let take = (64 - bit).min(end - i);
                let mask = if take == 64 {
                    u64::MAX
                } else {
                    ((1u64 << take) - 1) << bit
                };
                words[w] |= mask;
                i += take;
            }
        }
        Some(Some((lo, nw)))
    }

    /// Field `fi` (>= 1) for one key whose previous field left `rules`: AND the window with
    /// the key's bucket words (`bases` as [`Field::bases`] wrote them, `g` groups), then either
    /// the answer (last field) or the field's rules in `rules`.
    #[inline(always)]
    pub(crate) fn later_field(
        &self,
        fi: usize,
        bases: &[usize; 32],
        g: usize,
        rules: &mut Rules,
        now: u64,
    ) -> Flow {
        let mut words = [0u64; WINDOW];
        let (lo, nw) = match self.window(fi, rules, &mut words) {
            None => return Flow::Fallback,
            Some(None) => return Flow::Done(None),
            Some(Some(w)) => w,
        };
        let f = &self.fields[fi];
        let last = fi + 1 == self.fields.len();
        *rules = Rules::EMPTY;
        for (j, word) in words.iter_mut().enumerate().take(nw) {
            if *word == 0 {
                continue;
            }
            let w = lo + j;
            let (blk, wi) = (w / 4, w % 4);
            for &base in &bases[..g] {
                *word &= f.lt.get(base + blk).map_or(0, |b| b.0[wi]);
            }
            if *word != 0 && !rules.push_word(*word, w * 64) {
                return Flow::Fallback;
            }
            if last && rules.n > 0 {
                // Rules arrive ascending: the first word with a live rule decides, unless all
                // of this word's rules are expired, then later words are scanned on.
                if let Some(h) = self.last_live(f, rules, now) {
                    return Flow::Done(Some(h));
                }
                if rules.r[..rules.n].iter().any(|&r| {
                    f.ends
                        .get(r as usize)
                        .filter(|_| (r as usize) < f.rules)
                        .is_none()
                }) {
                    return Flow::Done(None);
                }
                *rules = Rules::EMPTY;
            }
        }
        if last || rules.n == 0 {
            Flow::Done(None)
        } else {
            Flow::Next
        }
    }

    /// Prefetch the bucket words field `fi` (>= 1) will read for a key whose previous field
    /// left `rules` (first mapped word of each group's bucket).
    #[inline(always)]
    pub(crate) fn prefetch_later(&self, fi: usize, bases: &[usize; 32], g: usize, rules: &Rules) {
        let pf = &self.fields[fi - 1];
        let f = &self.fields[fi];
        if let Some(m) = rules.r[..rules.n.min(1)]
            .first()
            .and_then(|&r| pf.mt.get(r as usize))
        {
            let blk = m.to as usize / BLOCK_BITS;
            for &base in &bases[..g] {
                crate::simd::prefetch_block(&f.lt, base + blk);
            }
        }
    }

    /// Field 0 for `key`: `first` ANDs only the blocks inside every bucket's non-zero range
    /// (`Field::nz`; all blocks when there are at most `NZ_MIN_BLOCKS`), its rules are shifted back to field-0 rule numbers. `false`: fall back.
    #[inline(always)]
    pub(crate) fn first_step(
        &self,
        key: &[u8],
        bases: &mut [usize; 32],
        rules: &mut Rules,
        first: impl Fn(&[Block], &[usize], usize, &mut Rules) -> bool,
    ) -> bool {
        let f0 = &self.fields[0];
        if f0.bblocks <= NZ_MIN_BLOCKS {
            // Few blocks: ANDing them all is cheaper than first loading the ranges.
            let g = f0.bases(&key[..f0.len], bases);
            return first(&f0.lt, &bases[..g], f0.bblocks, rules);
        }
        let (g, lo, hi) = f0.bases_nz(&key[..f0.len], bases);
        if lo >= hi {
            return true;
        }
        for b in &mut bases[..g] {
            *b += lo;
        }
        if !first(&f0.lt, &bases[..g], hi - lo, rules) {
            return false;
        }
        let shift = (lo * BLOCK_BITS) as u32;
        for r in &mut rules.r[..rules.n] {
            *r += shift;
        }
        true
    }

    /// The fast lookup with `first` as the field-0 step (see the module docs). `None`: fall
    /// back to the bitmap pipeline. `key` must have the set's key length.
    #[inline(always)]
    pub(crate) fn fast_with(
        &self,
        key: &[u8],
        now: u64,
        first: impl Fn(&[Block], &[usize], usize, &mut Rules) -> bool,
    ) -> Option<Option<ElemHandle>> {
        if self.order.is_empty() || key.len() != self.key_len {
            return Some(None);
        }
        let mut bases = [0usize; 32];
        let f0 = &self.fields[0];
        let mut rules = Rules::EMPTY;
        if !self.first_step(key, &mut bases, &mut rules, first) {
            return None;
        }
        match self.after_first(&rules, now) {
            Flow::Done(r) => return Some(r),
            Flow::Fallback => return None,
            Flow::Next => {}
        }
        let mut at = f0.len;
        for fi in 1..self.fields.len() {
            let f = &self.fields[fi];
            let g = f.bases(&key[at..at + f.len], &mut bases);
            at += f.len;
            match self.later_field(fi, &bases, g, &mut rules, now) {
                Flow::Next => {}
                Flow::Done(r) => return Some(r),
                Flow::Fallback => return None,
            }
        }
        Some(None)
    }
}
