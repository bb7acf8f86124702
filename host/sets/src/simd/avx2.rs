//! The AVX2 AND step: one 256-bit block per step, `vpand` of the key's buckets, blocks whose
//! previous result is zero skipped (kernel `nft_set_pipapo_avx2.c`, written here as one loop
//! over the groups instead of per-size routines).

use std::arch::x86_64::{
    __m256i, _MM_HINT_T0, _mm_prefetch, _mm256_and_si256, _mm256_castsi256_pd, _mm256_cmpeq_epi64,
    _mm256_load_si256, _mm256_movemask_pd, _mm256_setzero_si256, _mm256_store_si256,
    _mm256_testz_si256,
};

use std::mem::MaybeUninit;

use crate::pipapo::fast::{Rules, by_groups};
use crate::pipapo::lookup::AndKernel;
use crate::pipapo::{Block, ElemHandle, Pipapo, Scratch};

/// Rules per block.
const BLOCK_BITS: usize = 256;

/// Token for the AVX2 step; exists only when AVX2 was detected at runtime.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx2And(());

impl Avx2And {
    /// Only `simd::avx2()` calls this, after detecting AVX2.
    pub(super) fn new_detected() -> Avx2And {
        Avx2And(())
    }
}

impl Avx2And {
    /// The whole lookup pipeline compiled with AVX2 enabled, so the AND step inlines.
    #[inline]
    pub(crate) fn lookup<X: Clone>(
        self,
        set: &Pipapo<X>,
        key: &[u8],
        now: u64,
        s: &mut Scratch,
    ) -> Option<ElemHandle> {
        // SAFETY: an `Avx2And` exists only after AVX2 was detected at runtime.
        unsafe { lookup_avx2(self, set, key, now, s) }
    }
}

impl Avx2And {
    /// The fast path compiled with AVX2 enabled (`None`: fall back).
    #[inline]
    pub(crate) fn fast<X: Clone>(
        self,
        set: &Pipapo<X>,
        key: &[u8],
        now: u64,
    ) -> Option<Option<ElemHandle>> {
        // SAFETY: an `Avx2And` exists only after AVX2 was detected at runtime.
        unsafe { fast_avx2(self, set, key, now) }
    }
}

/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
unsafe fn fast_avx2<X: Clone>(
    k: Avx2And,
    set: &Pipapo<X>,
    key: &[u8],
    now: u64,
) -> Option<Option<ElemHandle>> {
    set.fast_in(&k, key, now)
}

/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
unsafe fn lookup_avx2<X: Clone>(
    k: Avx2And,
    set: &Pipapo<X>,
    key: &[u8],
    now: u64,
    s: &mut Scratch,
) -> Option<ElemHandle> {
    set.lookup_in(&k, key, now, s)
}

impl Avx2And {
    /// The batched lookup compiled with the same features.
    #[inline]
    pub(crate) fn batch<X: Clone>(
        self,
        set: &Pipapo<X>,
        keys: &[u8],
        now: u64,
        out: &mut [Option<ElemHandle>],
        s: &mut Scratch,
    ) {
        // SAFETY: the token exists only after the features were detected at runtime.
        unsafe { batch_avx2(self, set, keys, now, out, s) }
    }
}

/// # Safety
/// The CPU must have the features enabled here.
#[target_feature(enable = "avx2")]
unsafe fn batch_avx2<X: Clone>(
    k: Avx2And,
    set: &Pipapo<X>,
    keys: &[u8],
    now: u64,
    out: &mut [Option<ElemHandle>],
    s: &mut Scratch,
) {
    set.batch_in(&k, keys, now, out, s)
}

impl AndKernel for Avx2And {
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
        // SAFETY: an `Avx2And` is only created by `simd::avx2()` after
        // `is_x86_feature_detected!("avx2")` returned true, so the CPU has AVX2.
        unsafe { and_avx2(lt, bases, res, lo, hi, first) }
    }

    #[inline]
    fn prefetch(&self, lt: &[Block], bases: &[usize]) {
        prefetch(lt, bases)
    }

    #[inline(always)]
    fn first(&self, lt: &[Block], bases: &[usize], nb: usize, out: &mut Rules) -> bool {
        // SAFETY: an `Avx2And` exists only after AVX2 was detected at runtime.
        unsafe { by_groups!(bases.len(), first_avx2(lt, bases, nb, out)) }
    }
}

/// The fast path's field-0 step with AVX2 (see `fast::first_scalar`): one block per step,
/// `G` groups unrolled when known (0: `bases.len()`).
///
/// # Safety
/// The CPU must have AVX2. Bounds are checked here.
#[target_feature(enable = "avx2")]
#[inline]
pub(super) unsafe fn first_avx2<const G: usize>(
    lt: &[Block],
    bases: &[usize],
    nb: usize,
    out: &mut Rules,
) -> bool {
    let g = if G == 0 { bases.len() } else { G };
    if g == 0 || bases.len() < g || bases[..g].iter().any(|&b| b + nb > lt.len()) {
        return false;
    }
    let ltp = lt.as_ptr();
    let zero = _mm256_setzero_si256();
    let mut b = 0;
    while b < nb {
        // Up to 16 blocks at a time: store every AND, note its non-zero words in a mask, then
        // visit only those words. The branches then follow how many words match (steady for
        // a set), not where they are (random per key).
        let n = (nb - b).min(16);
        // Only the first `n` are written, and only those are read (the mask has no bit past
        // them), so no zeroing.
        let mut tmp = [const { MaybeUninit::<Block>::uninit() }; 16];
        let mut mask = 0u64;
        for (i, t) in tmp.iter_mut().enumerate().take(n) {
            // SAFETY: b + i < nb and base + nb <= lt.len() for every base (checked above);
            // Block is `repr(align(32))`, so the aligned loads and the store are valid; AVX2
            // is enabled and detected.
            unsafe {
                let mut acc = _mm256_load_si256(ltp.add(bases[0] + b + i).cast::<__m256i>());
                for &base in &bases[1..g] {
                    acc = _mm256_and_si256(
                        acc,
                        _mm256_load_si256(ltp.add(base + b + i).cast::<__m256i>()),
                    );
                }
                _mm256_store_si256(t.as_mut_ptr().cast::<__m256i>(), acc);
                let z = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(acc, zero)));
                mask |= u64::from(!z as u32 & 0xf) << (4 * i);
            }
        }
        while mask != 0 {
            let wi = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            // SAFETY: bit `wi` of the mask is set only for words of the `n` blocks stored above.
            let word = unsafe { tmp[wi / 4].assume_init_ref() }.0[wi % 4];
            if !out.push_word(word, (b + wi / 4) * BLOCK_BITS + (wi % 4) * 64) {
                return false;
            }
        }
        b += n;
    }
    true
}

/// Prefetch the first block of every bucket in `bases` (out-of-range bases are skipped).
#[inline]
pub(super) fn prefetch(lt: &[Block], bases: &[usize]) {
    for &b in bases {
        if let Some(blk) = lt.get(b) {
            // SAFETY: prefetch has no architectural effect besides the cache; the pointer comes
            // from a reference into `lt`, and SSE is part of the x86_64 baseline.
            unsafe { _mm_prefetch::<_MM_HINT_T0>((blk as *const Block).cast::<i8>()) };
        }
    }
}

/// # Safety
/// The CPU must have AVX2. Bounds are checked here (`hi <= res.len()`,
/// `bases[g] + hi <= lt.len()`); `Block` is 32-byte aligned, so aligned loads are valid.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn and_avx2(
    lt: &[Block],
    bases: &[usize],
    res: &mut [Block],
    lo: usize,
    hi: usize,
    first: bool,
) -> (usize, usize) {
    if lo >= hi || bases.is_empty() || hi > res.len() || bases.iter().any(|&b| b + hi > lt.len()) {
        // Never reached for tables built by this crate; answer "no match" without reading.
        if let Some(r) = res.get_mut(lo..hi) {
            r.fill(Block::ZERO);
        }
        return (lo, lo);
    }
    let (mut nlo, mut nhi) = (usize::MAX, lo);
    let ltp = lt.as_ptr();
    let rp = res.as_mut_ptr();
    for b in lo..hi {
        // SAFETY: b < hi <= res.len(), and for every base b + base < lt.len() (checked above);
        // Block is `repr(align(32))`, so every pointer is 32-byte aligned for the aligned
        // load/store; AVX2 is enabled on this function and detected by the caller.
        unsafe {
            let mut acc = _mm256_load_si256(ltp.add(bases[0] + b).cast::<__m256i>());
            if !first {
                let r = _mm256_load_si256(rp.add(b).cast::<__m256i>());
                if _mm256_testz_si256(r, r) != 0 {
                    continue;
                }
                acc = _mm256_and_si256(acc, r);
            }
            for &base in &bases[1..] {
                acc = _mm256_and_si256(acc, _mm256_load_si256(ltp.add(base + b).cast::<__m256i>()));
            }
            _mm256_store_si256(rp.add(b).cast::<__m256i>(), acc);
            if _mm256_testz_si256(acc, acc) == 0 {
                nlo = nlo.min(b);
                nhi = b + 1;
            }
        }
    }
    if nlo == usize::MAX {
        (lo, lo)
    } else {
        (nlo, nhi)
    }
}
