//! Range to netmask expansion, as the kernel's `pipapo_expand`: an inclusive range of one
//! field becomes the minimal list of aligned prefixes that covers it, left to right.

/// One prefix of a field: `value` (the field's bytes as a big-endian integer) and the number of
/// leading bits that are fixed (`mask_len`, 0 = wildcard, `bits` = one value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// Field value with the non-fixed low bits zero.
    pub value: u128,
    /// Fixed leading bits, `0..=bits`.
    pub mask_len: u32,
}

/// All-ones in the low `s` bits (`s` up to 128).
#[inline]
pub(crate) fn low_mask(s: u32) -> u128 {
    if s >= 128 {
        u128::MAX
    } else {
        (1u128 << s) - 1
    }
}

/// Big-endian bytes (at most 16) as an integer.
#[inline]
pub(crate) fn be_value(bytes: &[u8]) -> u128 {
    bytes.iter().fold(0u128, |v, &b| (v << 8) | u128::from(b))
}

/// The minimal prefix cover of `start..=end` in a field of `bits` bits (`start <= end`, both
/// below `2^bits`), in ascending order. A range of one value gives one full-length prefix; the
/// whole field gives one mask-0 prefix. A `b`-bit field needs at most `2b - 2` prefixes.
pub fn expand(start: u128, end: u128, bits: u32) -> Vec<Prefix> {
    debug_assert!(start <= end && end <= low_mask(bits));
    let mut out = Vec::new();
    let mut base = start;
    loop {
        // Largest s: the low s bits of base are zero and base | (2^s - 1) <= end.
        let mut s = 0;
        while s < bits && (base & low_mask(s + 1)) == 0 && (base | low_mask(s + 1)) <= end {
            s += 1;
        }
        out.push(Prefix {
            value: base,
            mask_len: bits - s,
        });
        let last = base | low_mask(s);
        if last >= end {
            return out;
        }
        base = last + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn c34_port_range_1000_1999_is_seven_prefixes() {
        let p = expand(1000, 1999, 16);
        let want: Vec<(u128, u32)> = vec![
            (1000, 13), // 01111101xxx: 1000-1007
            (1008, 12), // 0111111xxxx: 1008-1023
            (1024, 7),  // 10xxxxxxxxx: 1024-1535
            (1536, 8),  // 110xxxxxxxx: 1536-1791
            (1792, 9),  // 1110xxxxxxx: 1792-1919
            (1920, 10), // 11110xxxxxx: 1920-1983
            (1984, 12), // 1111100xxxx: 1984-1999
        ];
        let got: Vec<(u128, u32)> = p.iter().map(|p| (p.value, p.mask_len)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn c34_full_range_and_single_port() {
        assert_eq!(
            expand(0, 65535, 16),
            vec![Prefix {
                value: 0,
                mask_len: 0
            }]
        );
        assert_eq!(
            expand(80, 80, 16),
            vec![Prefix {
                value: 80,
                mask_len: 16
            }]
        );
        let all = u128::MAX;
        assert_eq!(
            expand(0, all, 128),
            vec![Prefix {
                value: 0,
                mask_len: 0
            }]
        );
        assert_eq!(
            expand(all, all, 128),
            vec![Prefix {
                value: all,
                mask_len: 128
            }]
        );
    }

    #[test]
    fn kernel_comment_example() {
        // 192.168.1.0-192.168.2.1 -> 192.168.1.0/24, 192.168.2.0/31
        let s = be_value(&[192, 168, 1, 0]);
        let e = be_value(&[192, 168, 2, 1]);
        let p = expand(s, e, 32);
        assert_eq!(
            p,
            vec![
                Prefix {
                    value: s,
                    mask_len: 24
                },
                Prefix {
                    value: be_value(&[192, 168, 2, 0]),
                    mask_len: 31
                }
            ]
        );
    }

    #[test]
    fn worst_case_is_2b_minus_2() {
        assert_eq!(expand(1, 0xfffe, 16).len(), 30);
        assert_eq!(expand(1, 0xfe, 8).len(), 14);
    }

    fn covers(p: &[Prefix], bits: u32, v: u128) -> usize {
        p.iter()
            .filter(|p| {
                let free = bits - p.mask_len;
                (v & !low_mask(free)) == p.value
            })
            .count()
    }

    proptest! {
        /// Exact, disjoint cover: every value inside is covered once, edges outside not at all.
        #[test]
        fn exact_disjoint_cover(a in any::<u16>(), b in any::<u16>(), probe in any::<u16>()) {
            let (s, e) = (a.min(b) as u128, a.max(b) as u128);
            let p = expand(s, e, 16);
            prop_assert!(p.len() <= 30);
            for v in [s, e, probe as u128, s.wrapping_sub(1), e + 1] {
                if v > 0xffff { continue; }
                let want = usize::from(s <= v && v <= e);
                prop_assert_eq!(covers(&p, 16, v), want, "value {}", v);
            }
        }
    }
}
