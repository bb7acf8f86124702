//! ICMP errors the gateway sends: time exceeded in transit, for IPv4 (RFC 792, quoting as
//! RFC 1812 4.3.2.3 and the kernel's icmp_send do: as much of the datagram as fits in 576
//! bytes) and for IPv6 (RFC 4443 3.3, quoting as much as fits in the minimum MTU of 1280 bytes,
//! 2.4 (c)); and the rules of when not to send one (RFC 1122 3.2.2, RFC 4443 2.4 (e)).
//!
//! Checked against Linux 6.18 routing between two veths in network namespaces (a UDP datagram
//! of 1000 bytes with TTL 1, and one of 2000 bytes with hop limit 1): the IPv4 error came from
//! the input device's address, 576 bytes long, TOS 0xc0, DF clear, TTL 64, quoting 548 bytes
//! with the TTL as received (1); the ICMPv6 error came from the input device's address with
//! 1240 bytes of ICMPv6 (1280 with the header), quoting 1232 bytes. The kernel's IPv4 ID is
//! its own counter; wasp writes 0. Without a route to the destination the same router sent
//! the same shapes as destination unreachable: ICMP type 3 code 0 (net unreachable, quoting
//! the datagram with its TTL as received) and ICMPv6 type 1 code 0 (no route).

use std::net::{Ipv4Addr, Ipv6Addr};

use wasp_wire::{ethernet, icmp, icmpv6, ipv4, ipv6};

/// Largest IPv4 datagram carrying an ICMP error (RFC 1812 4.3.2.3; the kernel's icmp_send
/// limits the quote the same way).
pub const V4_ERROR_MAX: usize = 576;
/// Largest IPv6 packet carrying an ICMPv6 error (RFC 4443 2.4 (c): the minimum IPv6 MTU).
pub const V6_ERROR_MAX: usize = 1280;
/// TTL and hop limit of what the gateway sends (the kernel's default ip_default_ttl and
/// hop_limit: 64).
pub const DEFAULT_TTL: u8 = 64;

/// `true` when an ICMP error may be sent about the IPv4 datagram `ip` (its header first): not
/// about an ICMP error, not about a fragment other than the first, not to a source that is
/// not a unicast host (0.0.0.0/8, 127/8, multicast, broadcast) (RFC 1122 3.2.2, icmp_send).
pub fn v4_may_answer(ip: &[u8]) -> bool {
    let Ok(h) = ipv4::FixedHeader::new_checked(ip) else {
        return false;
    };
    let src = h.src_addr();
    if src.is_unspecified()
        || src.octets()[0] == 0
        || src.is_loopback()
        || src.is_multicast()
        || src.is_broadcast()
    {
        return false;
    }
    if h.frag_offset() != 0 {
        return false;
    }
    if h.protocol() == ipv4::protocol::ICMP {
        // ICMP: only when its type is not an error (unknown/short: the kernel sends nothing).
        return ip
            .get(h.header_len() + icmp::field::TYPE)
            .is_some_and(|&t| !icmp::is_error(t));
    }
    true
}

/// Write into `out` the Ethernet frame of an ICMP time exceeded (type 11, code 0, "time to
/// live exceeded in transit") about the IPv4 datagram `ip` (as received, TTL not decremented):
/// from `src` (the gateway's address on the device the datagram came in on) to the datagram's
/// source, Ethernet from `mac` to `to_mac`. IP header as the kernel's icmp_send writes it: TOS
/// 0xc0 (precedence internetwork control, icmp_send's IPTOS_PREC_INTERNETCONTROL), no DF,
/// ID 0, TTL 64. The quote is the datagram cut to fit 576 bytes.
pub fn v4_time_exceeded(
    ip: &[u8],
    src: Ipv4Addr,
    mac: [u8; 6],
    to_mac: [u8; 6],
    out: &mut Vec<u8>,
) {
    v4_error(
        ip,
        icmp::msg_type::TIME_EXCEEDED,
        0,
        0,
        src,
        mac,
        to_mac,
        out,
    );
}

/// How an ICMPv4 error's IP header is written and how much of the offending datagram it
/// quotes: the kernel writes them two ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V4Shape {
    /// The TOS byte.
    pub tos: u8,
    /// Don't Fragment set.
    pub df: bool,
    /// Most bytes of the offending datagram quoted.
    pub quote_max_bytes: usize,
}

/// icmp_send's errors (the gateway's own, and `reject` at the IP hooks, nf_send_unreach):
/// TOS 0xc0 (IPTOS_PREC_INTERNETCONTROL), no DF, the whole error within 576 bytes.
pub const ICMP_SEND: V4Shape = V4Shape {
    tos: 0xc0,
    df: false,
    quote_max_bytes: V4_ERROR_MAX - 28,
};

/// nf_reject_skb_v4_unreach's errors (`reject` at the netdev hooks; the header of
/// nf_reject_iphdr_put): TOS 0, DF, at most 536 bytes quoted.
pub const NF_REJECT: V4Shape = V4Shape {
    tos: 0,
    df: true,
    quote_max_bytes: 536,
};

/// Write into `out` the Ethernet header from `mac` to `to_mac` and a 20-byte IPv4 header
/// from `src` to `dst` for `payload_len` bytes of `protocol` (ID 0, TTL [`DEFAULT_TTL`], TOS
/// and DF as `shape` says, the header checksum computed). `out` is cleared first.
pub fn v4_headers(
    shape: V4Shape,
    protocol: u8,
    src: [u8; 4],
    dst: [u8; 4],
    payload_len: usize,
    (mac, to_mac): ([u8; 6], [u8; 6]),
    out: &mut Vec<u8>,
) {
    out.clear();
    let eth = ethernet::Repr {
        dst: to_mac,
        src: mac,
        ethertype: ethernet::ethertype::IPV4,
    };
    out.extend_from_slice(&eth.to_bytes());
    let ip = ipv4::Repr {
        src: src.into(),
        dst: dst.into(),
        protocol,
        payload_len: payload_len as u16,
        ttl: DEFAULT_TTL,
        tos: shape.tos,
        ident: 0,
        dont_frag: shape.df,
    };
    out.extend_from_slice(&ip.to_bytes());
}

/// [`v4_time_exceeded`] with another `typ`, `code` and `rest` (the ICMP header's last four
/// bytes): the same header, quote and checksum (destination unreachable is type 3: net
/// unreachable code 0, as the kernel's ip_error sends for a destination without a route;
/// fragmentation needed code 4 with the next hop's MTU in `rest`'s low 16 bits, RFC 1191).
#[allow(clippy::too_many_arguments)]
pub fn v4_error(
    ip: &[u8],
    typ: u8,
    code: u8,
    rest: u32,
    src: Ipv4Addr,
    mac: [u8; 6],
    to_mac: [u8; 6],
    out: &mut Vec<u8>,
) {
    v4_error_shaped(ICMP_SEND, ip, [typ, code], rest, src, (mac, to_mac), out);
}

/// [`v4_error`] with the IP header and quote of `shape`: an ICMP message `type_code` with
/// `rest` about the IPv4 datagram `ip` (its header first; quoted up to
/// `shape.quote_max_bytes`), from `src` to the datagram's source, Ethernet `(mac, to_mac)`.
/// Nothing is written when `ip` is shorter than an IPv4 header.
pub fn v4_error_shaped(
    shape: V4Shape,
    ip: &[u8],
    type_code: [u8; 2],
    rest: u32,
    src: Ipv4Addr,
    l2: ([u8; 6], [u8; 6]),
    out: &mut Vec<u8>,
) {
    out.clear();
    let Ok(h) = ipv4::FixedHeader::new_checked(ip) else {
        return;
    };
    let dst = h.src();
    let quote = &ip[..ip.len().min(shape.quote_max_bytes)];
    v4_headers(
        shape,
        ipv4::protocol::ICMP,
        src.octets(),
        dst,
        icmp::HEADER_LEN + quote.len(),
        l2,
        out,
    );
    let at = out.len();
    let header = icmp::Repr {
        msg_type: type_code[0],
        code: type_code[1],
        rest,
    };
    out.extend_from_slice(&header.to_bytes());
    out.extend_from_slice(quote);
    if let Ok(mut m) = icmp::PacketMut::new_checked(&mut out[at..]) {
        m.fill_checksum();
    }
}

/// `true` when an ICMPv6 time exceeded may be sent about the IPv6 packet `ip`: its source is
/// not unspecified or multicast, its destination not multicast (RFC 4443 2.4 (e)), and it is not
/// an ICMPv6 error message (type below 128) directly after the fixed header (2.4 (e.1)).
pub fn v6_may_answer(ip: &[u8]) -> bool {
    let Ok(h) = ipv6::Packet::new_checked(ip) else {
        return false;
    };
    let (src, dst) = (h.src_addr(), h.dst_addr());
    if src.is_unspecified() || src.is_multicast() || dst.is_multicast() {
        return false;
    }
    if h.next_header() == ipv4::protocol::ICMPV6 {
        return ip
            .get(ipv6::HEADER_LEN + icmpv6::field::TYPE)
            .is_some_and(|&t| !icmpv6::is_error(t));
    }
    true
}

/// Write into `out` the Ethernet frame of an ICMPv6 time exceeded (type 3, code 0, "hop limit
/// exceeded in transit") about the IPv6 packet `ip`, from `src` to its source, Ethernet from
/// `mac` to `to_mac`: traffic class and flow label 0, hop limit 64, the quote cut so the packet
/// fits 1280 bytes, the checksum over the pseudo-header.
pub fn v6_time_exceeded(
    ip: &[u8],
    src: Ipv6Addr,
    mac: [u8; 6],
    to_mac: [u8; 6],
    out: &mut Vec<u8>,
) {
    v6_error(
        ip,
        icmpv6::msg_type::TIME_EXCEEDED,
        0,
        0,
        src,
        mac,
        to_mac,
        out,
    );
}

/// Most bytes of the offending packet an ICMPv6 error of icmpv6_send quotes (1280 - 48).
pub const V6_QUOTE_MAX: usize = V6_ERROR_MAX - 48;

/// [`v6_time_exceeded`] with another `typ`, `code` and `rest` (the message's four bytes after
/// the checksum): destination unreachable is type 1, no route to destination code 0, as the
/// kernel's ip6_pkt_drop sends; packet too big is type 2 with the MTU in `rest` (RFC 4443 3.2).
#[allow(clippy::too_many_arguments)]
pub fn v6_error(
    ip: &[u8],
    typ: u8,
    code: u8,
    rest: u32,
    src: Ipv6Addr,
    mac: [u8; 6],
    to_mac: [u8; 6],
    out: &mut Vec<u8>,
) {
    v6_error_quoting(V6_QUOTE_MAX, ip, [typ, code], rest, src, (mac, to_mac), out);
}

/// Write into `out` the Ethernet header from `mac` to `to_mac` and an IPv6 header from `src`
/// to `dst` for `payload_len` bytes of `next_header` (traffic class and flow label 0, hop
/// limit [`DEFAULT_TTL`], as nf_reject_ip6hdr_put and icmp6_send write them). `out` is cleared
/// first.
pub fn v6_headers(
    next_header: u8,
    src: &Ipv6Addr,
    dst: &Ipv6Addr,
    payload_len: usize,
    (mac, to_mac): ([u8; 6], [u8; 6]),
    out: &mut Vec<u8>,
) {
    out.clear();
    let eth = ethernet::Repr {
        dst: to_mac,
        src: mac,
        ethertype: ethernet::ethertype::IPV6,
    };
    out.extend_from_slice(&eth.to_bytes());
    let ip = ipv6::Repr {
        src: *src,
        dst: *dst,
        next_header,
        payload_len: payload_len as u16,
        hop_limit: DEFAULT_TTL,
    };
    out.extend_from_slice(&ip.to_bytes());
}

/// [`v6_error`] quoting at most `quote_max_bytes` of the IPv6 packet `ip` (icmpv6_send:
/// [`V6_QUOTE_MAX`]; nf_reject_skb_v6_unreach: 1220): an ICMPv6 message `type_code` with
/// `rest`, from `src` to the packet's source, Ethernet `(mac, to_mac)`, the checksum over the
/// pseudo-header. Nothing is written when `ip` is shorter than an IPv6 header.
pub fn v6_error_quoting(
    quote_max_bytes: usize,
    ip: &[u8],
    type_code: [u8; 2],
    rest: u32,
    src: Ipv6Addr,
    l2: ([u8; 6], [u8; 6]),
    out: &mut Vec<u8>,
) {
    out.clear();
    let Ok(h) = ipv6::Packet::new_checked(ip) else {
        return;
    };
    let dst = h.src_addr();
    let quote = &ip[..ip.len().min(quote_max_bytes)];
    v6_headers(
        ipv4::protocol::ICMPV6,
        &src,
        &dst,
        icmpv6::HEADER_LEN + quote.len(),
        l2,
        out,
    );
    let at = out.len();
    let header = icmpv6::Repr {
        msg_type: type_code[0],
        code: type_code[1],
        rest,
    };
    out.extend_from_slice(&header.to_bytes());
    out.extend_from_slice(quote);
    if let Ok(mut m) = icmpv6::PacketMut::new_checked(&mut out[at..]) {
        m.fill_checksum(&src, &dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum;

    fn v6(b: &[u8]) -> Ipv6Addr {
        Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap())
    }

    fn udp_v4(ttl: u8, payload: usize) -> Vec<u8> {
        let total = 20 + 8 + payload;
        let mut h = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, ttl, 17, 0, 0];
        h[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        h.extend_from_slice(&[10, 0, 1, 2, 10, 0, 2, 2]);
        let c = checksum::checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h.extend_from_slice(&[0x30, 0x39, 0x00, 0x35]);
        h.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
        h.extend_from_slice(&[0, 0]);
        h.extend((0..payload).map(|i| i as u8));
        h
    }

    #[test]
    fn v4_time_exceeded_fields() {
        let ip = udp_v4(1, 4);
        let mut out = Vec::new();
        let gw = Ipv4Addr::new(10, 0, 1, 1);
        v4_time_exceeded(&ip, gw, [2, 0, 0, 0, 1, 1], [2, 0, 0, 0, 0, 2], &mut out);
        assert_eq!(
            &out[..14],
            &[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 1, 1, 0x08, 0x00]
        );
        let h = &out[14..34];
        assert_eq!(checksum::checksum(h), 0, "IP header checksum");
        assert_eq!(h[0], 0x45);
        assert_eq!(h[1], 0xc0);
        assert_eq!(u16::from_be_bytes([h[2], h[3]]) as usize, 20 + 8 + ip.len());
        assert_eq!(h[6] & 0x40, 0, "no DF");
        assert_eq!((h[8], h[9]), (64, 1));
        assert_eq!(&h[12..16], &[10, 0, 1, 1]);
        assert_eq!(&h[16..20], &[10, 0, 1, 2]);
        let icmp = &out[34..];
        assert_eq!(checksum::checksum(icmp), 0, "ICMP checksum");
        assert_eq!(&icmp[..2], &[11, 0]);
        assert_eq!(&icmp[4..8], &[0, 0, 0, 0]);
        // The whole datagram quoted, TTL as received (1).
        assert_eq!(&icmp[8..], &ip[..]);
        assert_eq!(icmp[8 + 8], 1);
    }

    #[test]
    fn v4_quote_is_cut_at_576_bytes() {
        let ip = udp_v4(1, 1400);
        let mut out = Vec::new();
        v4_time_exceeded(&ip, Ipv4Addr::new(10, 0, 1, 1), [2; 6], [4; 6], &mut out);
        assert_eq!(out.len() - 14, 576);
        assert_eq!(&out[14 + 28..], &ip[..548]);
        assert_eq!(checksum::checksum(&out[34..]), 0);
    }

    #[test]
    fn v4_no_error_about_errors_fragments_or_odd_sources() {
        assert!(v4_may_answer(&udp_v4(1, 0)));
        let mut frag = udp_v4(1, 0);
        frag[7] = 1; // offset 8 bytes
        assert!(!v4_may_answer(&frag));
        let mut bcast = udp_v4(1, 0);
        bcast[12..16].copy_from_slice(&[255, 255, 255, 255]);
        assert!(!v4_may_answer(&bcast));
        let mut icmp = udp_v4(1, 0);
        icmp[9] = 1;
        icmp[20] = 11; // a time exceeded
        assert!(!v4_may_answer(&icmp));
        icmp[20] = 8; // an echo request
        assert!(v4_may_answer(&icmp));
    }

    #[test]
    fn v6_time_exceeded_fields_and_checksum() {
        let src: Ipv6Addr = "fd00:1::2".parse().unwrap();
        let dst: Ipv6Addr = "fd00:2::2".parse().unwrap();
        let mut ip = vec![0x60, 0, 0, 0, 0, 8, 17, 1];
        ip.extend_from_slice(&src.octets());
        ip.extend_from_slice(&dst.octets());
        ip.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, 8, 0, 0]);
        let gw: Ipv6Addr = "fd00:1::1".parse().unwrap();
        let mut out = Vec::new();
        v6_time_exceeded(&ip, gw, [2, 0, 0, 0, 1, 1], [2, 0, 0, 0, 0, 2], &mut out);
        assert_eq!(&out[12..14], &[0x86, 0xdd]);
        let h = &out[14..54];
        assert_eq!(&h[..4], &[0x60, 0, 0, 0]);
        assert_eq!(u16::from_be_bytes([h[4], h[5]]) as usize, 8 + ip.len());
        assert_eq!((h[6], h[7]), (58, 64));
        assert_eq!(v6(&h[8..24]), gw);
        assert_eq!(v6(&h[24..40]), src);
        let msg = &out[54..];
        assert_eq!(&msg[..2], &[3, 0]);
        // The checksum verifies: the sum over pseudo-header and message is 0xffff.
        let s = checksum::sum(
            u64::from(checksum::pseudo_v6(&gw, &src, msg.len() as u32, 58)),
            msg,
        );
        assert_eq!(s, 0xffff);
        assert_eq!(&msg[8..], &ip[..]);
        // Cut at 1280 bytes.
        let mut big = ip.clone();
        big.extend(std::iter::repeat_n(0xab, 2000));
        v6_time_exceeded(&big, gw, [2; 6], [4; 6], &mut out);
        assert_eq!(out.len() - 14, 1280);
    }

    #[test]
    fn v6_no_error_to_multicast_or_about_errors() {
        let mut ip = vec![0x60, 0, 0, 0, 0, 8, 58, 1];
        ip.extend_from_slice(&"fd00:1::2".parse::<Ipv6Addr>().unwrap().octets());
        ip.extend_from_slice(&"fd00:2::2".parse::<Ipv6Addr>().unwrap().octets());
        ip.extend_from_slice(&[128, 0, 0, 0, 0, 1, 0, 1]); // echo request
        assert!(v6_may_answer(&ip));
        ip[40] = 1; // destination unreachable
        assert!(!v6_may_answer(&ip));
        ip[40] = 128;
        ip[24] = 0xff; // multicast destination
        assert!(!v6_may_answer(&ip));
    }
}
