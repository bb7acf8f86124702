//! Big-endian field readers shared by the views. Callers index only within lengths they have
//! checked; the `get` variants return `None` instead of panicking where that is not known.

/// Read a big-endian `u16` at `at`. The caller has checked `at + 2 <= buf.len()`.
#[inline]
pub(crate) fn be16(buf: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([buf[at], buf[at + 1]])
}

/// Read a big-endian `u32` at `at`. The caller has checked `at + 4 <= buf.len()`.
#[inline]
pub(crate) fn be32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

/// Read a big-endian 24-bit value at `at`. The caller has checked `at + 3 <= buf.len()`.
#[inline]
pub(crate) fn be24(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, buf[at], buf[at + 1], buf[at + 2]])
}

/// Read a big-endian `u16` at `at`, or `None` past the end of `buf`.
#[inline]
pub(crate) fn get_be16(buf: &[u8], at: usize) -> Option<u16> {
    let b = buf.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

/// Copy `N` bytes starting at `at`. The caller has checked `at + N <= buf.len()`.
#[inline]
pub(crate) fn array<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&buf[at..at + N]);
    out
}

/// Write `v` big-endian at `at`. The caller has checked `at + 2 <= buf.len()`.
#[inline]
pub(crate) fn put16(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Write `v` big-endian at `at`. The caller has checked `at + 4 <= buf.len()`.
#[inline]
pub(crate) fn put32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
