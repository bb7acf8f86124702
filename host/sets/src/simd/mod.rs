//! SIMD AND steps for the pipapo lookup, each behind a token that only runtime feature
//! detection creates (detected once, cached), so that the safe wrappers can only run on a CPU
//! that has the instructions. The scalar twin is `pipapo::lookup::ScalarAnd`.
#![allow(unsafe_code)]

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(target_arch = "x86_64")]
pub(crate) use avx2::Avx2And;
#[cfg(target_arch = "x86_64")]
pub(crate) use avx512::Avx512And;

#[cfg(target_arch = "x86_64")]
use std::sync::OnceLock;

/// Hint that block `i` of `lt` will be read soon (nothing when `i` is out of range or the
/// architecture has no prefetch here).
#[inline(always)]
pub(crate) fn prefetch_block(lt: &[crate::pipapo::Block], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(blk) = lt.get(i) {
        // SAFETY: prefetch has no architectural effect besides the cache; the pointer comes
        // from a reference into `lt`, and SSE is part of the x86_64 baseline.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (blk as *const crate::pipapo::Block).cast::<i8>(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (lt, i);
}

/// Hint that `s[i]` will be read soon (nothing when `i` is out of range or the architecture
/// has no prefetch here).
#[inline(always)]
pub(crate) fn prefetch<T>(s: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(x) = s.get(i) {
        // SAFETY: prefetch has no architectural effect besides the cache; the pointer comes
        // from a reference into `s`, and SSE is part of the x86_64 baseline.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (x as *const T).cast::<i8>(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (s, i);
}

/// The AVX2 token, if this CPU has AVX2 (detected once).
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx2() -> Option<Avx2And> {
    static HAS: OnceLock<bool> = OnceLock::new();
    HAS.get_or_init(|| std::is_x86_feature_detected!("avx2"))
        .then_some(Avx2And::new_detected())
}

/// The AVX-512 token, if this CPU has AVX-512 F, BW and VL (and AVX2; detected once).
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx512() -> Option<Avx512And> {
    static HAS: OnceLock<bool> = OnceLock::new();
    HAS.get_or_init(|| {
        std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("avx2")
    })
    .then_some(Avx512And::new_detected())
}

/// Stand-in tokens on other architectures: never available.
#[cfg(not(target_arch = "x86_64"))]
mod none {
    use crate::pipapo::Block;
    use crate::pipapo::lookup::AndKernel;
    /// Never constructed.
    pub(crate) enum Never {}
    impl AndKernel for Never {
        fn and(
            &self,
            _: &[Block],
            _: &[usize],
            _: &mut [Block],
            _: usize,
            _: usize,
            _: bool,
        ) -> (usize, usize) {
            match *self {}
        }
    }
}
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn avx2() -> Option<none::Never> {
    None
}
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn avx512() -> Option<none::Never> {
    None
}
