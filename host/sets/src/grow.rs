//! Growth of per-element buffers (the back-ends' and the ruleset model's set elements): by an eighth of their length when full
//! instead of `Vec`'s doubling, so that a large set that takes one element more holds at most
//! an eighth of spare room, not as much again as it stores. A set built from nothing copies
//! its buffers about 8 times their final size in all, against 2 times with doubling.

/// Make room in `v` for `add` more items: when full, grow its capacity by an eighth of its
/// length (at least `add` and 16 items).
#[inline]
pub fn room<T>(v: &mut Vec<T>, add: usize) {
    if v.capacity() - v.len() < add {
        v.reserve_exact(add.max(v.len() / 8).max(16));
    }
}

#[cfg(test)]
mod tests {
    use super::room;

    #[test]
    fn a_full_buffer_grows_by_an_eighth() {
        let mut v: Vec<u8> = vec![0; 800];
        assert_eq!(v.capacity(), 800);
        room(&mut v, 1);
        assert_eq!(v.capacity(), 900);
        // Room enough: no growth.
        room(&mut v, 100);
        assert_eq!(v.capacity(), 900);
        // A large addition gets what it asks for.
        room(&mut v, 500);
        assert_eq!(v.capacity(), 1300);
        let mut e: Vec<u32> = Vec::new();
        room(&mut e, 1);
        assert_eq!(e.capacity(), 16);
    }
}
