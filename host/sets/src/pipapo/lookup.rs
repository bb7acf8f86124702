//! Lookups: the scalar reference, the dispatching entry points, the SIMD variants by name, and
//! the batched lookup.
//!
//! Every variant runs the same pipeline (kernel `pipapo_get_slow` / `nft_pipapo_lookup`); only
//! the inner step that ANDs a field's buckets into the result map differs ([`AndKernel`]).
//! Per field, only the 256-bit blocks of the result map that the previous field's mapping can
//! reach are processed (the kernel AVX2 path's start offset, extended to an end offset).

use std::cell::RefCell;
use std::sync::OnceLock;

use super::fast::{BATCH_AHEAD, Flow, Rules, by_groups, first_scalar};
use super::field::{BLOCK_BITS, Block, Field, Map};
use super::{ElemHandle, Pipapo};
use crate::simd;

/// Field-0 tables up to this size are classified key after key in a batch; larger ones field
/// by field with prefetch.
const BATCH_PREFETCH_BYTES: usize = 512 << 10;

/// Tests set this to run the field-by-field batch on small tables too (both ways give the
/// same answers, so tests running in parallel may see either).
#[cfg(test)]
pub(crate) static BATCH_BY_FIELDS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

#[inline(always)]
fn batch_by_fields_forced() -> bool {
    #[cfg(test)]
    return BATCH_BY_FIELDS.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(test))]
    false
}

/// Most keys in one batched lookup.
pub const BATCH_MAX: usize = 64;

/// A lookup implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Portable scalar code (the reference).
    Scalar,
    /// AVX2, 256-bit blocks (x86_64 with AVX2).
    Avx2,
    /// AVX-512 F/BW/VL, two blocks per step (x86_64 with AVX-512).
    Avx512,
}

impl Variant {
    /// `true` when this CPU runs the variant (detected once, cached).
    pub fn available(self) -> bool {
        match self {
            Variant::Scalar => true,
            Variant::Avx2 => simd::avx2().is_some(),
            Variant::Avx512 => simd::avx512().is_some(),
        }
    }

    /// The fastest available variant (cached after the first call).
    pub fn best() -> Variant {
        static BEST: OnceLock<Variant> = OnceLock::new();
        *BEST.get_or_init(|| {
            if Variant::Avx512.available() {
                Variant::Avx512
            } else if Variant::Avx2.available() {
                Variant::Avx2
            } else {
                Variant::Scalar
            }
        })
    }
}

/// The per-field AND step: `res[b] = (first ? ONES : res[b]) & AND_g lt[bases[g] + b]` for
/// every block `b` in `lo..hi` (blocks where `res[b]` is already zero may be skipped).
/// Callers guarantee `hi <= res.len()` and `bases[g] + hi <= lt.len()` for every group.
/// Returns the range of blocks that may be non-zero afterwards (`(lo, lo)` when all are
/// zero), so that the refill scans only those.
pub(crate) trait AndKernel {
    /// Run the AND step.
    fn and(
        &self,
        lt: &[Block],
        bases: &[usize],
        res: &mut [Block],
        lo: usize,
        hi: usize,
        first: bool,
    ) -> (usize, usize);

    /// Hint that the buckets at `bases` (first block) will be read soon.
    #[inline]
    fn prefetch(&self, _lt: &[Block], _bases: &[usize]) {}

    /// The fast path's field-0 step (`fast::first_scalar`): the rules set in the AND of the
    /// buckets at `bases` (`nb` blocks each), ascending, into the empty `out`; `false` when
    /// they do not fit (the caller falls back to the bitmap pipeline).
    #[inline(always)]
    fn first(&self, lt: &[Block], bases: &[usize], nb: usize, out: &mut Rules) -> bool {
        by_groups!(bases.len(), first_scalar(lt, bases, nb, out))
    }
}

/// The portable AND step.
pub(crate) struct ScalarAnd;

impl AndKernel for ScalarAnd {
    #[inline]
    fn and(
        &self,
        lt: &[Block],
        bases: &[usize],
        res: &mut [Block],
        lo: usize,
        hi: usize,
        first: bool,
    ) -> (usize, usize) {
        let (mut nlo, mut nhi) = (usize::MAX, lo);
        for b in lo..hi {
            let mut acc = if first { Block::ONES } else { res[b] };
            if acc.is_zero() {
                continue;
            }
            for &base in bases {
                let l = &lt[base + b];
                for w in 0..4 {
                    acc.0[w] &= l.0[w];
                }
            }
            res[b] = acc;
            if !acc.is_zero() {
                nlo = nlo.min(b);
                nhi = b + 1;
            }
        }
        if nlo == usize::MAX {
            (lo, lo)
        } else {
            (nlo, nhi)
        }
    }
}

/// Result and fill bitmaps of one lookup (kernel scratch maps). Both halves are all-zero
/// between lookups: each step clears what it consumed.
#[derive(Debug, Default, Clone)]
pub struct Scratch {
    a: Vec<Block>,
    b: Vec<Block>,
}

impl Scratch {
    /// Scratch for sets up to `blocks` blocks per bucket (grows on demand).
    pub fn new() -> Scratch {
        Scratch::default()
    }

    fn fit(&mut self, blocks: usize) {
        if self.a.len() < blocks {
            self.a.resize(blocks, Block::ZERO);
            self.b.resize(blocks, Block::ZERO);
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::new());
}

/// Run `f` with this thread's scratch (a fresh one if it is already borrowed, e.g. reentrant).
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|s| match s.try_borrow_mut() {
        Ok(mut s) => f(&mut s),
        Err(_) => f(&mut Scratch::new()),
    })
}

/// Set bits `to..to + n` of a bitmap of blocks.
#[inline]
fn set_range(map: &mut [Block], to: usize, n: usize) {
    let mut i = to;
    let end = to + n;
    while i < end {
        let (b, w, bit) = (i / BLOCK_BITS, (i % BLOCK_BITS) / 64, i % 64);
        let take = (64 - bit).min(end - i);
        let mask = if take == 64 {
            u64::MAX
        } else {
            ((1u64 << take) - 1) << bit
        };
        map[b].0[w] |= mask;
        i += take;
    }
}

/// Zero blocks `lo..hi`.
#[inline]
fn zero(map: &mut [Block], lo: usize, hi: usize) {
    for b in &mut map[lo..hi] {
        *b = Block::ZERO;
    }
}

/// Refill (kernel `pipapo_refill`, non-last field): for every set rule `r` of `res` in
/// `lo..hi`, set the next field's rules `mt[r].to .. + mt[r].n` in `fill`; clear `res`.
/// Returns the block range of `fill` that received bits, or `None` when nothing matched.
#[inline]
fn refill(
    res: &mut [Block],
    fill: &mut [Block],
    lo: usize,
    hi: usize,
    mt: &[Map],
    rules: usize,
) -> Option<(usize, usize)> {
    let mut nlo = usize::MAX;
    let mut nhi = 0;
    let mut bad = false;
    for (b, blk) in res.iter_mut().enumerate().take(hi).skip(lo) {
        for w in 0..4 {
            let mut word = blk.0[w];
            if word == 0 {
                continue;
            }
            blk.0[w] = 0;
            while word != 0 {
                let r = b * BLOCK_BITS + w * 64 + word.trailing_zeros() as usize;
                word &= word - 1;
                let Some(m) = mt.get(r).filter(|_| r < rules) else {
                    bad = true;
                    break;
                };
                let (to, n) = (m.to as usize, m.n as usize);
                set_range(fill, to, n);
                nlo = nlo.min(to / BLOCK_BITS);
                nhi = nhi.max((to + n).div_ceil(BLOCK_BITS));
            }
        }
    }
    if bad {
        zero(fill, 0, fill.len());
        return None;
    }
    (nlo != usize::MAX).then_some((nlo, nhi))
}

impl<X: Clone> Pipapo<X> {
    /// Every variant's lookup: the fast path, else the bitmap pipeline.
    #[inline(always)]
    pub(crate) fn lookup_in<K: AndKernel>(
        &self,
        k: &K,
        key: &[u8],
        now: u64,
        s: &mut Scratch,
    ) -> Option<ElemHandle> {
        match self.fast_in(k, key, now) {
            Some(r) => r,
            None => self.bitmap_in(k, key, now, s),
        }
    }

    /// The fast path with `k`'s field-0 step (`None`: fall back).
    #[inline(always)]
    pub(crate) fn fast_in<K: AndKernel>(
        &self,
        k: &K,
        key: &[u8],
        now: u64,
    ) -> Option<Option<ElemHandle>> {
        self.fast_with(key, now, |lt, bases, nb, out| k.first(lt, bases, nb, out))
    }

    /// The bitmap pipeline shared by every variant (kernel `pipapo_get_slow`). `key` must
    /// have the set's key length.
    #[inline(always)]
    pub(crate) fn bitmap_in<K: AndKernel>(
        &self,
        k: &K,
        key: &[u8],
        now: u64,
        s: &mut Scratch,
    ) -> Option<ElemHandle> {
        if self.order.is_empty() || key.len() != self.key_len {
            return None;
        }
        s.fit(self.bblocks_max);
        let (mut res, mut fill) = (&mut s.a[..], &mut s.b[..]);
        let mut bases = [0usize; 32];
        let last = self.fields.len() - 1;
        let (mut lo, mut hi) = (0, self.fields[0].bblocks);
        let mut at = 0;
        for (i, f) in self.fields.iter().enumerate() {
            let g = f.bases(&key[at..at + f.len], &mut bases);
            at += f.len;
            let (alo, ahi) = k.and(&f.lt, &bases[..g], res, lo, hi, i == 0);
            debug_assert!(res[lo..alo].iter().chain(&res[ahi..hi]).all(Block::is_zero));
            (lo, hi) = (alo, ahi);
            if i == last {
                let found = self.first_live(f, res, lo, hi, now);
                zero(res, lo, hi);
                return found;
            }
            match refill(res, fill, lo, hi, &f.mt, f.rules) {
                Some((l, h)) => (lo, hi) = (l, h),
                None => return None,
            }
            std::mem::swap(&mut res, &mut fill);
        }
        None
    }

    /// Last field: the lowest set rule whose element is live at `now` (kernel: refill in
    /// match-only mode, repeated past expired elements).
    #[inline]
    fn first_live(
        &self,
        f: &Field,
        res: &[Block],
        lo: usize,
        hi: usize,
        now: u64,
    ) -> Option<ElemHandle> {
        for (b, blk) in res.iter().enumerate().take(hi).skip(lo) {
            for w in 0..4 {
                let mut word = blk.0[w];
                while word != 0 {
                    let r = b * BLOCK_BITS + w * 64 + word.trailing_zeros() as usize;
                    word &= word - 1;
                    let h = *f.ends.get(r).filter(|_| r < f.rules)?;
                    if self.live(h, now) {
                        return Some(ElemHandle(h));
                    }
                }
            }
        }
        None
    }

    /// The oldest live element containing `key` (`None` also for a key of the wrong length):
    /// through the field index when one is built ([`Pipapo::build_index`]), else with the
    /// fastest variant this CPU has ([`Variant::best`]). Same answer either way.
    #[inline]
    pub fn lookup(&self, key: &[u8], now: u64) -> Option<ElemHandle> {
        if self.has_index() && key.len() == self.key_len {
            self.lookup_index(key, now)
        } else {
            self.lookup_variant(Variant::best(), key, now)
        }
    }

    /// As [`Pipapo::lookup`] with a given variant; an unavailable variant runs the scalar one.
    pub fn lookup_variant(&self, v: Variant, key: &[u8], now: u64) -> Option<ElemHandle> {
        let fast = match v {
            Variant::Avx512 => match simd::avx512() {
                Some(k) => k.fast(self, key, now),
                None => self.fast_in(&ScalarAnd, key, now),
            },
            Variant::Avx2 => match simd::avx2() {
                Some(k) => k.fast(self, key, now),
                None => self.fast_in(&ScalarAnd, key, now),
            },
            Variant::Scalar => self.fast_in(&ScalarAnd, key, now),
        };
        match fast {
            Some(r) => r,
            None => with_scratch(|s| self.lookup_variant_with(v, key, now, s)),
        }
    }

    /// The bitmap pipeline alone, scalar AND step (tests compare the fast path with it).
    #[cfg(test)]
    pub(crate) fn lookup_bitmap(&self, key: &[u8], now: u64) -> Option<ElemHandle> {
        self.bitmap_in(&ScalarAnd, key, now, &mut Scratch::new())
    }

    /// As [`Pipapo::lookup_variant`] with caller-owned scratch maps.
    #[inline]
    pub fn lookup_variant_with(
        &self,
        v: Variant,
        key: &[u8],
        now: u64,
        s: &mut Scratch,
    ) -> Option<ElemHandle> {
        match v {
            Variant::Avx512 => match simd::avx512() {
                Some(k) => k.lookup(self, key, now, s),
                None => self.lookup_in(&ScalarAnd, key, now, s),
            },
            Variant::Avx2 => match simd::avx2() {
                Some(k) => k.lookup(self, key, now, s),
                None => self.lookup_in(&ScalarAnd, key, now, s),
            },
            Variant::Scalar => self.lookup_in(&ScalarAnd, key, now, s),
        }
    }

    /// The scalar lookup (the reference every other variant is tested against).
    pub fn lookup_scalar(&self, key: &[u8], now: u64) -> Option<ElemHandle> {
        self.lookup_variant(Variant::Scalar, key, now)
    }

    /// The AVX2 lookup (scalar when the CPU has no AVX2).
    pub fn lookup_avx2(&self, key: &[u8], now: u64) -> Option<ElemHandle> {
        self.lookup_variant(Variant::Avx2, key, now)
    }

    /// The AVX-512 lookup (scalar when the CPU has no AVX-512 F/BW/VL).
    pub fn lookup_avx512(&self, key: &[u8], now: u64) -> Option<ElemHandle> {
        self.lookup_variant(Variant::Avx512, key, now)
    }

    /// Batched lookup (through the field index when one is built, else the best variant): `keys` holds `out.len()` keys back to back
    /// (`key_len` bytes each); `out[i]` gets the result for key `i`. Batches of up to
    /// [`BATCH_MAX`] keys are classified with the next keys' first buckets prefetched while
    /// the current key is classified. Keys beyond `keys.len() / key_len` get `None`.
    pub fn lookup_batch(&self, keys: &[u8], now: u64, out: &mut [Option<ElemHandle>]) {
        if self.has_index() {
            self.lookup_batch_index(keys, now, out)
        } else {
            self.lookup_batch_variant(Variant::best(), keys, now, out)
        }
    }

    /// As [`Pipapo::lookup_batch`] with a given variant for the AND step.
    pub fn lookup_batch_variant(
        &self,
        v: Variant,
        keys: &[u8],
        now: u64,
        out: &mut [Option<ElemHandle>],
    ) {
        with_scratch(|s| match v {
            Variant::Avx512 => match simd::avx512() {
                Some(k) => k.batch(self, keys, now, out, s),
                None => self.batch_in(&ScalarAnd, keys, now, out, s),
            },
            Variant::Avx2 => match simd::avx2() {
                Some(k) => k.batch(self, keys, now, out, s),
                None => self.batch_in(&ScalarAnd, keys, now, out, s),
            },
            Variant::Scalar => self.batch_in(&ScalarAnd, keys, now, out, s),
        })
    }

    /// Batched lookups. When field 0's table is larger than `BATCH_PREFETCH_BYTES`, field by
    /// field: every key's field-0 AND (the next keys' buckets prefetched), then every
    /// remaining key's field 1 (the next keys' words prefetched), and so on; a key whose lists
    /// overflow runs the bitmap pipeline. Smaller tables: the fast path key after key.
    #[inline(always)]
    pub(crate) fn batch_in<K: AndKernel>(
        &self,
        k: &K,
        keys: &[u8],
        now: u64,
        out: &mut [Option<ElemHandle>],
        s: &mut Scratch,
    ) {
        out.fill(None);
        if self.key_len == 0 || self.order.is_empty() {
            return;
        }
        let n = out.len().min(keys.len() / self.key_len);
        let kl = self.key_len;
        if self.fields[0].lt_alloc_bytes() <= BATCH_PREFETCH_BYTES && !batch_by_fields_forced() {
            // Small tables stay in cache: key after key, the out-of-order core overlaps them.
            for (i, o) in out.iter_mut().enumerate().take(n) {
                let key = &keys[i * kl..(i + 1) * kl];
                *o = match self.fast_in(k, key, now) {
                    Some(r) => r,
                    None => self.bitmap_in(k, key, now, s),
                };
            }
            return;
        }
        let mut rules = [Rules::EMPTY; BATCH_MAX];
        let mut flow = [Flow::Next; BATCH_MAX];
        let mut bases = [0usize; 32];
        let mut pbases = [0usize; 32];
        for chunk in (0..n).step_by(BATCH_MAX) {
            let end = (chunk + BATCH_MAX).min(n);
            let m = end - chunk;
            let key = |i: usize| &keys[(chunk + i) * kl..(chunk + i + 1) * kl];
            // Field 0.
            let f0 = &self.fields[0];
            for i in 0..m.min(BATCH_AHEAD) {
                let g = f0.bases(&key(i)[..f0.len], &mut pbases);
                k.prefetch(&f0.lt, &pbases[..g]);
            }
            for i in 0..m {
                if i + BATCH_AHEAD < m {
                    let g = f0.bases(&key(i + BATCH_AHEAD)[..f0.len], &mut pbases);
                    k.prefetch(&f0.lt, &pbases[..g]);
                }
                rules[i] = Rules::EMPTY;
                flow[i] = if self.first_step(key(i), &mut bases, &mut rules[i], |lt, b, nb, o| {
                    k.first(lt, b, nb, o)
                }) {
                    self.after_first(&rules[i], now)
                } else {
                    Flow::Fallback
                };
            }
            // Later fields.
            let mut at = f0.len;
            for fi in 1..self.fields.len() {
                let f = &self.fields[fi];
                let span = at..at + f.len;
                at += f.len;
                for i in 0..m {
                    if flow[i] != Flow::Next {
                        continue;
                    }
                    let j = i + BATCH_AHEAD / 2;
                    if j < m && flow[j] == Flow::Next {
                        let g = f.bases(&key(j)[span.clone()], &mut pbases);
                        self.prefetch_later(fi, &pbases, g, &rules[j]);
                    }
                    let g = f.bases(&key(i)[span.clone()], &mut bases);
                    flow[i] = self.later_field(fi, &bases, g, &mut rules[i], now);
                }
            }
            for i in 0..m {
                out[chunk + i] = match flow[i] {
                    Flow::Done(r) => r,
                    Flow::Fallback => self.bitmap_in(k, key(i), now, s),
                    Flow::Next => None,
                };
            }
        }
    }
}
