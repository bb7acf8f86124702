//! The allocator and panic handler of a lean (`no_std`) guest.

// compiler_builtins on wasm32-wasip2 leaves memcpy, memcmp and friends to wasi-libc, which
// std links. A no_std guest links the toolchain's own copy (lib/self-contained/libc.a, on the
// linker's search path): only the string functions are pulled in, and they import nothing.
// SAFETY: an empty block: it declares nothing, it only names the library to link.
#[allow(unsafe_code)]
#[link(name = "c", kind = "static", modifiers = "-bundle")]
unsafe extern "C" {}

/// dlmalloc over linear memory, as std uses on wasm.
#[global_allocator]
static ALLOC: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

/// A panic traps (no message: formatting and printing it would pull in WASI). The host gives
/// the vector the use site's fallback and re-creates the instance.
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}

/// The canonical ABI's allocation entry point (`cabi_realloc`), which the component's host
/// calls to place lists and strings in guest memory. On wasm32-wasip2 std defines it; a
/// `no_std` guest gets it here, over the global allocator.
///
/// # Safety
/// Called by the canonical ABI only, with `old_ptr`/`old_len`/`align` from an earlier call
/// (or 0 for a fresh allocation) and a power-of-two `align`.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cabi_realloc(
    old_ptr: *mut u8,
    old_len: usize,
    align: usize,
    new_len: usize,
) -> *mut u8 {
    use alloc::alloc::{Layout, alloc, realloc};
    if new_len == 0 {
        // A zero-sized allocation: any well-aligned, non-null pointer will do.
        return align as *mut u8;
    }
    let Ok(new_layout) = Layout::from_size_align(new_len, align) else {
        core::arch::wasm32::unreachable()
    };
    let ptr = if old_len == 0 {
        // SAFETY: new_layout has a non-zero size.
        unsafe { alloc(new_layout) }
    } else {
        let Ok(old_layout) = Layout::from_size_align(old_len, align) else {
            core::arch::wasm32::unreachable()
        };
        // SAFETY: the canonical ABI passes back a block this function returned with the same
        // alignment and old size; new_len is non-zero.
        unsafe { realloc(old_ptr, old_layout, new_len) }
    };
    if ptr.is_null() {
        core::arch::wasm32::unreachable()
    }
    ptr
}
