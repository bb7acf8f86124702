//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624), as the flowtable's
//! edits need them: a per-flow constant "delta" (the ones' complement sum of `~old + new` over
//! every 16-bit word an edit changes) is computed once when a flow is added, and each packet's
//! checksum is updated with one addition (RFC 1624 eqn. 3, `HC' = ~(~HC + delta)`). Copied from
//! wasp-core's `forward::checksum` (our code) and extended with the delta form.

/// Ones' complement sum of `data` as big-endian 16-bit words (an odd last byte is padded with a
/// zero byte), added to `initial`, folded to 16 bits. Not complemented.
pub(crate) fn sum(initial: u64, data: &[u8]) -> u16 {
    let mut acc = initial;
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(*last) << 8;
    }
    fold(acc)
}

/// `acc` folded to 16 bits (end-around carry).
pub(crate) fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The checksum of `data` (RFC 1071): `!sum(0, data)`.
#[cfg(test)]
pub(crate) fn checksum(data: &[u8]) -> u16 {
    !sum(0, data)
}

/// The delta of changing the bytes `old` to `new` (same length, even): the sum of `~m + m'`
/// over each 16-bit word, to be given to [`apply`].
pub(crate) fn delta(old: &[u8], new: &[u8]) -> u64 {
    old.chunks_exact(2)
        .zip(new.chunks_exact(2))
        .map(|(o, n)| {
            u64::from(!u16::from_be_bytes([o[0], o[1]]))
                + u64::from(u16::from_be_bytes([n[0], n[1]]))
        })
        .sum()
}

/// RFC 1624 eqn. 3 with a precomputed [`delta`]: the checksum after the change.
#[inline]
pub(crate) fn apply(hc: u16, delta: u64) -> u16 {
    !fold(u64::from(!hc) + delta)
}

/// The delta of a TTL or hop limit decrement by one in the 16-bit word (TTL, protocol) of an
/// IPv4 header: `~m + (m - 0x0100)` is the constant 0xfeff for every m with TTL >= 1.
pub(crate) const TTL_DEC_DELTA: u64 = 0xfeff;

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071 section 3's example: the sum of 00 01 f2 03 f4 f5 f6 f7 is 0xddf2.
    #[test]
    fn rfc1071_example() {
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(0, &d), 0xddf2);
        assert_eq!(checksum(&d), 0x220d);
    }

    /// Every TTL decrement of a real IPv4 header with the constant delta equals the checksum
    /// recomputed from scratch.
    #[test]
    fn ttl_delta_matches_recompute() {
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0xff, 0x11, 0, 0, 0xc0, 0xa8, 0x00,
            0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        let c = checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        while h[8] > 1 {
            h[8] -= 1;
            let hc = u16::from_be_bytes([h[10], h[11]]);
            h[10..12].copy_from_slice(&apply(hc, TTL_DEC_DELTA).to_be_bytes());
            assert_eq!(checksum(&h), 0, "ttl {}", h[8]);
        }
    }

    /// An address change by delta equals the recomputed checksum.
    #[test]
    fn address_delta_matches_recompute() {
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0, 0, 0xc0, 0xa8, 0x00,
            0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        let c = checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        let new = [10, 255, 0, 254];
        let d = delta(&h[12..16], &new);
        h[12..16].copy_from_slice(&new);
        let hc = u16::from_be_bytes([h[10], h[11]]);
        h[10..12].copy_from_slice(&apply(hc, d).to_be_bytes());
        assert_eq!(checksum(&h), 0);
    }
}
