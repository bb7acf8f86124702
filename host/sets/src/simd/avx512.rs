//! The AVX-512 AND step: two 256-bit blocks (one ZMM register) per step, `vpandq` of the key's
//! buckets, pairs whose previous result is zero skipped (`vptestmq`); an odd last block runs
//! the AVX2 step. Beyond the kernel, which has only the AVX2 path.

use std::mem::MaybeUninit;

use std::arch::x86_64::{
    __m256i, __m512i, _mm256_and_si256, _mm256_load_si256, _mm256_store_si256, _mm256_testz_si256,
    _mm512_and_si512, _mm512_loadu_si512, _mm512_storeu_si512, _mm512_test_epi64_mask,
};

use super::avx2::{and_avx2, prefetch};
use crate::pipapo::fast::{Rules, by_groups};
use crate::pipapo::lookup::AndKernel;
use crate::pipapo::{Block, ElemHandle, Pipapo, Scratch};

/// Token for the AVX-512 step; exists only when AVX-512 F/BW/VL and AVX2 were detected.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx512And(());

impl Avx512And {
    /// Only `simd::avx512()` calls this, after detecting AVX-512 F/BW/VL and AVX2.
    pub(super) fn new_detected() -> Avx512And {
        Avx512And(())
    }
}

impl Avx512And {
    /// The whole lookup pipeline compiled with AVX-512 enabled, so the AND step inlines.
    #[inline]
    pub(crate) fn lookup<X: Clone>(
        self,
        set: &Pipapo<X>,
        key: &[u8],
        now: u64,
        s: &mut Scratch,
    ) -> Option<ElemHandle> {
        // SAFETY: an `Avx512And` exists only after AVX-512 F/BW/VL and AVX2 were detected.
        unsafe { lookup_avx512(self, set, key, now, s) }
    }
}

/// # Safety
/// The CPU must have AVX-512 F/BW/VL and AVX2.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
unsafe fn lookup_avx512<X: Clone>(
    k: Avx512And,
    set: &Pipapo<X>,
    key: &[u8],
    now: u64,
    s: &mut Scratch,
) -> Option<ElemHandle> {
    set.lookup_in(&k, key, now, s)
}

impl Avx512And {
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
        unsafe { batch_avx512(self, set, keys, now, out, s) }
    }
}

/// # Safety
/// The CPU must have the features enabled here.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
unsafe fn batch_avx512<X: Clone>(
    k: Avx512And,
    set: &Pipapo<X>,
    keys: &[u8],
    now: u64,
    out: &mut [Option<ElemHandle>],
    s: &mut Scratch,
) {
    set.batch_in(&k, keys, now, out, s)
}

impl AndKernel for Avx512And {
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
        // SAFETY: an `Avx512And` is only created by `simd::avx512()` after runtime detection
        // of AVX-512 F, BW, VL and AVX2.
        unsafe { and_avx512(lt, bases, res, lo, hi, first) }
    }

    #[inline]
    fn prefetch(&self, lt: &[Block], bases: &[usize]) {
        prefetch(lt, bases)
    }

    #[inline(always)]
    fn first(&self, lt: &[Block], bases: &[usize], nb: usize, out: &mut Rules) -> bool {
        // SAFETY: an `Avx512And` exists only after its features were detected at runtime.
        unsafe { by_groups!(bases.len(), first_avx512(lt, bases, nb, out)) }
    }
}

impl Avx512And {
    /// The fast path compiled with AVX-512 enabled (`None`: fall back).
    #[inline]
    pub(crate) fn fast<X: Clone>(
        self,
        set: &Pipapo<X>,
        key: &[u8],
        now: u64,
    ) -> Option<Option<ElemHandle>> {
        // SAFETY: an `Avx512And` exists only after its features were detected at runtime.
        unsafe { fast_avx512(self, set, key, now) }
    }
}

/// # Safety
/// The CPU must have AVX-512 F/BW/VL and AVX2.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
unsafe fn fast_avx512<X: Clone>(
    k: Avx512And,
    set: &Pipapo<X>,
    key: &[u8],
    now: u64,
) -> Option<Option<ElemHandle>> {
    set.fast_in(&k, key, now)
}

/// The fast path's field-0 step with AVX-512: two blocks per step, an odd last block by the
/// AVX2 step.
///
/// # Safety
/// The CPU must have AVX-512 F/BW/VL and AVX2. Bounds are checked here.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
#[inline]
unsafe fn first_avx512<const G: usize>(
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
    let mut b = 0;
    while b + 2 <= nb {
        // Up to 16 blocks (8 pairs) at a time, as in `first_avx2`: every AND stored, its
        // non-zero words in a mask, then only those words visited.
        let n = ((nb - b) / 2).min(8);
        // Only the first `2n` are written and read (the mask has no bit past them).
        let mut tmp = [const { MaybeUninit::<Block>::uninit() }; 16];
        let mut mask = 0u64;
        for i in 0..n {
            // SAFETY: b + 2i + 1 < nb and base + nb <= lt.len() for every base (checked
            // above), so both blocks of each 64-byte access are in bounds, and 2i + 1 < 16
            // for the store into `tmp`; unaligned forms; the features are enabled here.
            unsafe {
                let at = b + 2 * i;
                let mut acc = _mm512_loadu_si512(ltp.add(bases[0] + at).cast::<__m512i>());
                for &base in &bases[1..g] {
                    acc = _mm512_and_si512(
                        acc,
                        _mm512_loadu_si512(ltp.add(base + at).cast::<__m512i>()),
                    );
                }
                _mm512_storeu_si512(tmp.as_mut_ptr().add(2 * i).cast::<__m512i>(), acc);
                mask |= u64::from(_mm512_test_epi64_mask(acc, acc)) << (8 * i);
            }
        }
        while mask != 0 {
            let wi = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            // SAFETY: bit `wi` of the mask is set only for words of the blocks stored above.
            let word = unsafe { tmp[wi / 4].assume_init_ref() }.0[wi % 4];
            if !out.push_word(word, (b + wi / 4) * 256 + (wi % 4) * 64) {
                return false;
            }
        }
        b += 2 * n;
    }
    if b < nb {
        // SAFETY: b < nb and base + nb <= lt.len() for every base (checked above); Block is
        // `repr(align(32))`, so the aligned loads and the store are valid; AVX2 is enabled.
        unsafe {
            let mut acc = _mm256_load_si256(ltp.add(bases[0] + b).cast::<__m256i>());
            for &base in &bases[1..g] {
                acc = _mm256_and_si256(acc, _mm256_load_si256(ltp.add(base + b).cast::<__m256i>()));
            }
            if _mm256_testz_si256(acc, acc) == 0 {
                let mut blk = Block::ZERO;
                _mm256_store_si256((&mut blk as *mut Block).cast::<__m256i>(), acc);
                if !out.push_block(&blk, b) {
                    return false;
                }
            }
        }
    }
    true
}

/// # Safety
/// The CPU must have AVX-512 F/BW/VL and AVX2. Bounds are checked here as in `and_avx2`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
unsafe fn and_avx512(
    lt: &[Block],
    bases: &[usize],
    res: &mut [Block],
    lo: usize,
    hi: usize,
    first: bool,
) -> (usize, usize) {
    if lo >= hi || bases.is_empty() || hi > res.len() || bases.iter().any(|&b| b + hi > lt.len()) {
        // SAFETY: AVX2 is enabled here and detected by the caller; the AVX2 step checks its
        // own bounds.
        return unsafe { and_avx2(lt, bases, res, lo, hi, first) };
    }
    let (mut nlo, mut nhi) = (usize::MAX, lo);
    let ltp = lt.as_ptr();
    let rp = res.as_mut_ptr();
    let mut b = lo;
    while b + 2 <= hi {
        // SAFETY: b + 1 < hi <= res.len() and b + 1 + base < lt.len() for every base (checked
        // above), so both 32-byte blocks of each 64-byte access are in bounds; the loads and
        // stores are the unaligned forms; the features are enabled here and detected.
        unsafe {
            let mut acc = _mm512_loadu_si512(ltp.add(bases[0] + b).cast::<__m512i>());
            if !first {
                let r = _mm512_loadu_si512(rp.add(b).cast::<__m512i>());
                if _mm512_test_epi64_mask(r, r) == 0 {
                    b += 2;
                    continue;
                }
                acc = _mm512_and_si512(acc, r);
            }
            for &base in &bases[1..] {
                acc =
                    _mm512_and_si512(acc, _mm512_loadu_si512(ltp.add(base + b).cast::<__m512i>()));
            }
            _mm512_storeu_si512(rp.add(b).cast::<__m512i>(), acc);
            let m = _mm512_test_epi64_mask(acc, acc);
            if m != 0 {
                nlo = nlo.min(if m & 0x0f != 0 { b } else { b + 1 });
                nhi = if m & 0xf0 != 0 { b + 2 } else { b + 1 };
            }
        }
        b += 2;
    }
    if b < hi {
        // SAFETY: as above; the AVX2 step checks its own bounds.
        let (tlo, thi) = unsafe { and_avx2(lt, bases, res, b, hi, first) };
        if tlo < thi {
            nlo = nlo.min(tlo);
            nhi = thi;
        }
    }
    if nlo == usize::MAX {
        (lo, lo)
    } else {
        (nlo, nhi)
    }
}
