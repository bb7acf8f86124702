//! A hint to the CPU to start loading a cache line: the only `unsafe` of this crate.

/// Start loading the cache line that holds byte address `addr` into every cache level. The
/// address need not be valid: a prefetch never faults, reads nothing the program sees and
/// changes no result. On other targets than x86_64 it does nothing.
#[inline(always)]
#[allow(unsafe_code)]
pub(crate) fn line(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is an SSE instruction (part of the x86_64 baseline) that does
    // not access memory architecturally: it cannot fault on any address, valid or not, and
    // its only effect is on the caches.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(addr as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}
