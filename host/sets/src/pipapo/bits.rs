//! Moving runs of rule bits inside one bucket: the kernel's `bitmap_cut` (used by
//! `pipapo_drop`), generalised to several cuts in one pass so that removing many elements
//! (garbage collection) walks each bucket once.

use super::field::Block;

/// Word `i` of a bucket (64-bit words, rule `r` is bit `r % 64` of word `r / 64`); words past
/// the end read as zero.
#[inline]
fn word(b: &[Block], i: usize) -> u64 {
    b.get(i / 4).map_or(0, |x| x.0[i % 4])
}

/// 64 bits of the bucket starting at bit `pos`.
#[inline]
fn get64(b: &[Block], pos: usize) -> u64 {
    let (w, s) = (pos / 64, pos % 64);
    let lo = word(b, w) >> s;
    if s == 0 {
        lo
    } else {
        lo | word(b, w + 1) << (64 - s)
    }
}

/// Write the low `len` bits (1..=64) of `v` at bit `pos`; the bits written must lie inside
/// the bucket.
#[inline]
fn put(b: &mut [Block], pos: usize, v: u64, len: usize) {
    let (w, s) = (pos / 64, pos % 64);
    let m = if len == 64 {
        u64::MAX
    } else {
        (1u64 << len) - 1
    };
    let v = v & m;
    let x = &mut b[w / 4].0[w % 4];
    *x = (*x & !(m << s)) | (v << s);
    if s + len > 64 {
        let mh = (1u64 << (s + len - 64)) - 1;
        let x = &mut b[(w + 1) / 4].0[(w + 1) % 4];
        *x = (*x & !mh) | (v >> (64 - s));
    }
}

/// Clear bits `[from, to)`.
fn clear(b: &mut [Block], from: usize, to: usize) {
    let mut p = from;
    while p < to {
        let l = (to - p).min(64 - p % 64);
        put(b, p, 0, l);
        p += l;
    }
}

/// Remove the bit spans `cuts` (sorted, disjoint, as `(first bit, count)`) from the first
/// `end` bits of the bucket `b`: the bits above each cut move down by the bits cut below
/// them and the freed top bits are cleared. Bits at or past `end` must be zero. Cost: the
/// bits from the first cut to `end`, 64 at a time; nothing is allocated.
pub(crate) fn cut_spans(b: &mut [Block], cuts: &[(usize, usize)], end: usize) {
    let Some(&(first, _)) = cuts.first() else {
        return;
    };
    if first >= end {
        return;
    }
    // In place, front to back: a write ends below the next read's first bit (dst <= src), and
    // a read shifts out any already-written low bits of its first word.
    let mut dst = first;
    for (k, &(at, n)) in cuts.iter().enumerate() {
        let from = at + n;
        let to = cuts.get(k + 1).map_or(end, |c| c.0).min(end);
        if from >= to {
            continue;
        }
        let shift = from - dst;
        let stop = dst + (to - from);
        // Head: up to the next word boundary of the destination.
        let head = ((64 - dst % 64) % 64).min(stop - dst);
        if head > 0 {
            put(b, dst, get64(b, dst + shift), head);
        }
        // Whole destination words: two source words each, or one when the shift is aligned.
        let (ws, bs) = (shift / 64, shift % 64);
        let mut w = (dst + head) / 64;
        while (w + 1) * 64 <= stop {
            let lo = word(b, w + ws);
            let v = if bs == 0 {
                lo
            } else {
                lo >> bs | word(b, w + ws + 1) << (64 - bs)
            };
            b[w / 4].0[w % 4] = v;
            w += 1;
        }
        // Tail: the last partial word.
        let p = (w * 64).max(dst + head);
        if p < stop {
            put(b, p, get64(b, p + shift), stop - p);
        }
        dst = stop;
    }
    clear(b, dst, end);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bits of a bucket as a vector of booleans.
    fn as_bools(b: &[Block], bits: usize) -> Vec<bool> {
        (0..bits)
            .map(|i| word(b, i / 64) >> (i % 64) & 1 == 1)
            .collect()
    }

    fn from_bools(v: &[bool]) -> Vec<Block> {
        let mut b = vec![Block::ZERO; v.len().div_ceil(256)];
        for (i, &x) in v.iter().enumerate() {
            if x {
                b[i / 256].0[(i % 256) / 64] |= 1 << (i % 64);
            }
        }
        b
    }

    /// Cuts of every position and length against removing the same bits from a vector.
    #[test]
    fn cut_spans_equals_vector_removal() {
        let bits = 3 * 256;
        // A fixed pseudo-random pattern (xorshift) with runs of ones and zeros.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let pattern: Vec<bool> = (0..bits)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x & 3 != 0
            })
            .collect();
        let cases: Vec<Vec<(usize, usize)>> = vec![
            vec![(0, 1)],
            vec![(1, 2)],
            vec![(63, 1)],
            vec![(63, 2)],
            vec![(64, 64)],
            vec![(5, 200), (300, 1), (301 + 7, 70)],
            vec![(0, 256), (511, 1), (700, 68)],
            vec![(10, 3), (70, 130), (255, 2), (600, 100)],
        ];
        for cuts in cases {
            let mut want = pattern.clone();
            for &(at, n) in cuts.iter().rev() {
                want.drain(at..at + n);
            }
            want.resize(bits, false);
            let mut b = from_bools(&pattern);
            cut_spans(&mut b, &cuts, bits);
            assert_eq!(as_bools(&b, bits), want, "cuts {cuts:?}");
        }
    }

    #[test]
    fn cut_spans_respects_end() {
        // Bits past `end` are zero by contract; a cut past `end` is a no-op.
        let mut b = from_bools(&[true; 100]);
        cut_spans(&mut b, &[(120, 5)], 100);
        assert_eq!(as_bools(&b, 256).iter().filter(|&&x| x).count(), 100);
        cut_spans(&mut b, &[(90, 20)], 100);
        assert_eq!(
            as_bools(&b, 256),
            [vec![true; 90], vec![false; 166]].concat()
        );
    }
}
