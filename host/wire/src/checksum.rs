//! The Internet checksum (RFC 1071): the ones' complement of the ones' complement sum of 16-bit
//! words; its incremental update (RFC 1624 eqn. 3), word by word or with a precomputed delta
//! for edits made again and again (a flowtable's NAT); and the IPv4 (RFC 9293 3.1, RFC 768) and
//! IPv6 (RFC 8200 8.1) pseudo-header sums. One implementation for the gateway, conntrack's NAT and the flowtable's edits.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Ones' complement sum of `data` as big-endian 16-bit words (an odd last byte is padded with a
/// zero byte), added to `initial` (a partial sum, folded or not), folded to 16 bits. Not
/// complemented.
pub fn sum(initial: u64, data: &[u8]) -> u16 {
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
pub fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The checksum of `data` (RFC 1071): `!sum(0, data)`. Over a header whose checksum field
/// holds the right value, the result is 0.
pub fn checksum(data: &[u8]) -> u16 {
    !sum(0, data)
}

/// RFC 1624 eqn. 3: the new checksum `HC' = ~(~HC + ~m + m')` when one 16-bit word of the
/// covered data changes from `old` to `new` (eqn. 3 avoids the -0 result that RFC 1141's
/// eqn. 2 can give, RFC 1624 section 3).
pub fn update(hc: u16, old: u16, new: u16) -> u16 {
    !fold(u64::from(!hc) + u64::from(!old) + u64::from(new))
}

/// The delta of changing the bytes `old` to `new` (same length, even): the sum of `~m + m'`
/// over each 16-bit word, to be given to [`apply`] (once per edit made again and again).
pub fn delta(old: &[u8], new: &[u8]) -> u64 {
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
pub fn apply(hc: u16, delta: u64) -> u16 {
    !fold(u64::from(!hc) + delta)
}

/// The checksum `hc` after the bytes `old` became `new` (same length, even): [`apply`] of
/// [`delta`].
pub fn adjust(hc: u16, old: &[u8], new: &[u8]) -> u16 {
    apply(hc, delta(old, new))
}

/// The sum of the IPv6 pseudo-header (RFC 8200 8.1: source, destination, upper-layer length,
/// next header), to start an upper-layer checksum with.
pub fn pseudo_v6(src: &Ipv6Addr, dst: &Ipv6Addr, len: u32, next: u8) -> u32 {
    let mut b = [0u8; 40];
    b[..16].copy_from_slice(&src.octets());
    b[16..32].copy_from_slice(&dst.octets());
    b[32..36].copy_from_slice(&len.to_be_bytes());
    b[39] = next;
    u32::from(sum(0, &b))
}

/// The sum of the IPv4 pseudo-header (RFC 9293 3.1, RFC 768: source, destination, zero,
/// protocol, upper-layer length in bytes), to start a TCP or UDP checksum with.
pub fn pseudo_v4(src: &Ipv4Addr, dst: &Ipv4Addr, len: u32, proto: u8) -> u32 {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&src.octets());
    b[4..8].copy_from_slice(&dst.octets());
    b[9] = proto;
    // The length field is 16 bits; a longer segment's high bits are summed too, as the
    // kernel's csum_tcpudp_nofold adds the 32-bit length.
    let high = u64::from(len >> 16);
    b[10..12].copy_from_slice(&((len & 0xffff) as u16).to_be_bytes());
    u32::from(sum(high, &b))
}

/// The ICMPv6 checksum of `msg` (its checksum field zero) from `src` to `dst`.
pub fn icmpv6(src: &Ipv6Addr, dst: &Ipv6Addr, msg: &[u8]) -> u16 {
    !sum(u64::from(pseudo_v6(src, dst, msg.len() as u32, 58)), msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071 section 3's example: the sum of 00 01 f2 03 f4 f5 f6 f7 is 0xddf2.
    #[test]
    fn rfc1071_example() {
        assert_eq!(
            sum(0, &[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0xddf2
        );
        assert_eq!(
            checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0x220d
        );
    }

    /// A real IPv4 header (from a capture: 192.168.0.1 -> 192.168.0.199, TTL 64, UDP):
    /// its checksum field 0xb861 verifies, and recomputing gives it back.
    #[test]
    fn ipv4_header() {
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0);
        h[10] = 0;
        h[11] = 0;
        assert_eq!(checksum(&h), 0xb861);
    }

    /// Every TTL decrement of the header above, updated incrementally, equals the checksum
    /// recomputed from scratch.
    #[test]
    fn update_matches_recompute() {
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0xff, 0x11, 0, 0, 0xc0, 0xa8, 0x00,
            0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        let c = checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        while h[8] > 0 {
            let old = u16::from_be_bytes([h[8], h[9]]);
            h[8] -= 1;
            let new = u16::from_be_bytes([h[8], h[9]]);
            let hc = u16::from_be_bytes([h[10], h[11]]);
            let inc = update(hc, old, new);
            h[10..12].copy_from_slice(&inc.to_be_bytes());
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

    /// The IPv4 pseudo-header sum, checked on a real TCP SYN (from a capture: 10.77.0.1 ->
    /// 10.78.0.1, 40 bytes of TCP, checksum 0xf967): the segment verifies with it.
    #[test]
    fn pseudo_v4_verifies_a_captured_segment() {
        let tcp = [
            0xac, 0x12, 0x00, 0x50, 0xad, 0x27, 0x96, 0x28, 0, 0, 0, 0, 0xa0, 0x02, 0xfa, 0xf0,
            0xf9, 0x67, 0, 0, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x13, 0xda, 0x3b,
            0x7b, 0, 0, 0, 0, 0x01, 0x03, 0x03, 0x0a,
        ];
        let p = pseudo_v4(
            &Ipv4Addr::new(10, 77, 0, 1),
            &Ipv4Addr::new(10, 78, 0, 1),
            40,
            6,
        );
        assert_eq!(sum(u64::from(p), &tcp), 0xffff);
        // By hand: 0x0a4d + 0x0001 + 0x0a4e + 0x0001 + 6 + 40.
        assert_eq!(p, 0x0a4d + 1 + 0x0a4e + 1 + 6 + 40);
    }
}
