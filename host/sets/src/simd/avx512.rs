//! The AVX-512 AND step: two 256-bit blocks (one ZMM register) per step, `vpandq` of the key's
//! buckets, pairs whose previous result is zero skipped (`vptestmq`); an odd last block runs
//! the AVX2 step. Beyond the kernel, which has only the AVX2 path.

use std::arch::x86_64::{
    __m512i, _mm512_and_si512, _mm512_loadu_si512, _mm512_storeu_si512, _mm512_test_epi64_mask,
};

use super::avx2::{and_avx2, prefetch};
use crate::pipapo::Block;
use crate::pipapo::lookup::AndKernel;

/// Token for the AVX-512 step; exists only when AVX-512 F/BW/VL and AVX2 were detected.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx512And(());

impl Avx512And {
    /// Only `simd::avx512()` calls this, after detecting AVX-512 F/BW/VL and AVX2.
    pub(super) fn new_detected() -> Avx512And {
        Avx512And(())
    }
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
    ) {
        // SAFETY: an `Avx512And` is only created by `simd::avx512()` after runtime detection
        // of AVX-512 F, BW, VL and AVX2.
        unsafe { and_avx512(lt, bases, res, lo, hi, first) }
    }

    #[inline]
    fn prefetch(&self, lt: &[Block], bases: &[usize]) {
        prefetch(lt, bases)
    }
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
) {
    if lo >= hi || bases.is_empty() || hi > res.len() || bases.iter().any(|&b| b + hi > lt.len()) {
        // SAFETY: AVX2 is enabled here and detected by the caller; the AVX2 step checks its
        // own bounds.
        unsafe { and_avx2(lt, bases, res, lo, hi, first) };
        return;
    }
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
        }
        b += 2;
    }
    if b < hi {
        // SAFETY: as above; the AVX2 step checks its own bounds.
        unsafe { and_avx2(lt, bases, res, b, hi, first) };
    }
}
