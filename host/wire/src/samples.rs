//! Builders for well-formed (and deliberately broken) frames, and a named list of them.
//!
//! The parser's unit tests, the fuzz seed corpus (`cargo run -p wasp-wire --example
//! write_seed_corpus`) and other crates' tests use these instead of captures, so they run
//! anywhere. They allocate; they are not for the packet path. Checksums are left at zero
//! (nothing in wasp verifies them, as the kernel's netdev hook does not).

use crate::ethernet::ethertype;
use crate::ipv4::protocol;

/// Source MAC of built frames.
pub const SRC_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
/// Destination MAC of built frames.
pub const DST_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];
/// IPv4 source of built packets (192.0.2.1, TEST-NET-1).
pub const SRC_V4: [u8; 4] = [192, 0, 2, 1];
/// IPv4 destination of built packets (198.51.100.2, TEST-NET-2).
pub const DST_V4: [u8; 4] = [198, 51, 100, 2];
/// IPv6 source of built packets (2001:db8::1).
pub const SRC_V6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
/// IPv6 destination of built packets (2001:db8::2).
pub const DST_V6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// An Ethernet frame: the fixed MACs, then each `(tpid, tci)` tag in order, then `ethertype`
/// and `payload`.
pub fn ethernet(tags: &[(u16, u16)], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + 4 * tags.len() + payload.len());
    f.extend_from_slice(&DST_MAC);
    f.extend_from_slice(&SRC_MAC);
    for &(tpid, tci) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An IPv4 packet without options: TTL 64, DF clear, ident 0x1234, total length computed.
pub fn ipv4(proto: u8, payload: &[u8]) -> Vec<u8> {
    ipv4_with_options(proto, &[], payload)
}

/// An IPv4 packet with `options` (padded with zeros to a multiple of 4 bytes).
pub fn ipv4_with_options(proto: u8, options: &[u8], payload: &[u8]) -> Vec<u8> {
    let opt_len = options.len().div_ceil(4) * 4;
    let hl = 20 + opt_len;
    let total = u16::try_from(hl + payload.len()).unwrap_or(u16::MAX);
    let mut p = vec![0x40 | (hl / 4) as u8, 0];
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[0x12, 0x34, 0, 0, 64, proto, 0, 0]);
    p.extend_from_slice(&SRC_V4);
    p.extend_from_slice(&DST_V4);
    p.extend_from_slice(options);
    p.resize(hl, 0);
    p.extend_from_slice(payload);
    p
}

/// An IPv6 packet: hop limit 64, payload length computed, `next` as next header.
pub fn ipv6(next: u8, payload: &[u8]) -> Vec<u8> {
    let len = u16::try_from(payload.len()).unwrap_or(u16::MAX);
    let mut p = vec![0x60, 0, 0, 0];
    p.extend_from_slice(&len.to_be_bytes());
    p.extend_from_slice(&[next, 64]);
    p.extend_from_slice(&SRC_V6);
    p.extend_from_slice(&DST_V6);
    p.extend_from_slice(payload);
    p
}

/// An options-style IPv6 extension header (hop-by-hop or destination options) of `len_bytes`
/// (a multiple of 8) holding one PadN option, followed by `payload`.
pub fn ip6_opts_header(next: u8, len_bytes: usize, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![
        next,
        (len_bytes / 8).saturating_sub(1) as u8,
        1,
        (len_bytes - 4) as u8,
    ];
    h.resize(len_bytes, 0);
    h.extend_from_slice(payload);
    h
}

/// A type-0 routing header with `addresses` addresses and `segments_left`, then `payload`.
pub fn ip6_routing_header(next: u8, addresses: u8, segments_left: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![next, addresses * 2, 0, segments_left, 0, 0, 0, 0];
    for i in 0..addresses {
        let mut a = DST_V6;
        a[15] = 0x10 + i;
        h.extend_from_slice(&a);
    }
    h.extend_from_slice(payload);
    h
}

/// A fragment header (offset in bytes, a multiple of 8), then `payload`.
pub fn ip6_fragment_header(next: u8, offset_bytes: u16, more: bool, payload: &[u8]) -> Vec<u8> {
    let word = (offset_bytes & !7) | u16::from(more);
    let mut h = vec![next, 0];
    h.extend_from_slice(&word.to_be_bytes());
    h.extend_from_slice(&0xcafe_f00du32.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

/// A 20-byte TCP header (seq 1, window 65535) with `flags`, then `payload`.
pub fn tcp(sport: u16, dport: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut t = Vec::with_capacity(20 + payload.len());
    t.extend_from_slice(&sport.to_be_bytes());
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    t.extend_from_slice(payload);
    t
}

/// A UDP datagram with the length computed.
pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let len = u16::try_from(8 + payload.len()).unwrap_or(u16::MAX);
    let mut u = Vec::with_capacity(8 + payload.len());
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&len.to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

/// An ICMP or ICMPv6 echo message of `msg_type` (8/0 or 128/129) with 4 data bytes.
pub fn icmp_echo(msg_type: u8, ident: u16, seq: u16) -> Vec<u8> {
    let mut m = vec![msg_type, 0, 0, 0];
    m.extend_from_slice(&ident.to_be_bytes());
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend_from_slice(b"wasp");
    m
}

/// An ARP request from 192.0.2.1 for 198.51.100.2.
pub fn arp_request() -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4, 0, 1];
    a.extend_from_slice(&SRC_MAC);
    a.extend_from_slice(&SRC_V4);
    a.extend_from_slice(&[0; 6]);
    a.extend_from_slice(&DST_V4);
    a
}

/// A VXLAN header (I flag, `reserved` in the 24 bits after the flags) and `inner`.
pub fn vxlan(vni: u32, reserved: u32, inner: &[u8]) -> Vec<u8> {
    let mut v = vec![0x08];
    v.extend_from_slice(&reserved.to_be_bytes()[1..]);
    v.extend_from_slice(&vni.to_be_bytes()[1..]);
    v.push(0);
    v.extend_from_slice(inner);
    v
}

/// A Geneve header with `options` as `(class, type, data)` (data padded to 4-byte words), the
/// C bit set when any option type has its critical bit, then `inner`.
pub fn geneve(vni: u32, proto: u16, options: &[(u16, u8, &[u8])], inner: &[u8]) -> Vec<u8> {
    let mut opts = Vec::new();
    let mut critical = false;
    for &(class, ty, data) in options {
        let words = data.len().div_ceil(4);
        opts.extend_from_slice(&class.to_be_bytes());
        opts.push(ty);
        opts.push(words as u8 & 0x1f);
        opts.extend_from_slice(data);
        opts.resize(opts.len() + words * 4 - data.len(), 0);
        critical |= ty & 0x80 != 0;
    }
    let mut g = vec![
        (opts.len() / 4) as u8 & 0x3f,
        if critical { 0x40 } else { 0 },
    ];
    g.extend_from_slice(&proto.to_be_bytes());
    g.extend_from_slice(&vni.to_be_bytes()[1..]);
    g.push(0);
    g.extend_from_slice(&opts);
    g.extend_from_slice(inner);
    g
}

/// Set the IPv4 fragment word (flags and offset in 8-byte units) of an IPv4 packet.
pub fn set_ipv4_frag(ip: &mut [u8], more: bool, offset_bytes: u16) {
    let word = (offset_bytes / 8) | if more { 0x2000 } else { 0 };
    ip[6..8].copy_from_slice(&word.to_be_bytes());
}

/// Every sample frame with a file-name-safe name: the parser's unit-test inputs and the fuzz
/// seed corpus.
pub fn all() -> Vec<(&'static str, Vec<u8>)> {
    use ethertype::{ARP, IPV4, IPV6, MPLS, QINQ, TEB, VLAN, VLAN_9100};
    let syn = tcp(40000, 22, 0x02, &[]);
    let v4_tcp = ipv4(protocol::TCP, &syn);
    let v4_icmp = ipv4(protocol::ICMP, &icmp_echo(8, 1, 1));
    let inner_eth = ethernet(&[], IPV4, &v4_icmp);
    let mut frag_later = ipv4(protocol::UDP, &[0xaa; 16]);
    set_ipv4_frag(&mut frag_later, false, 1480);
    let mut frag_first = ipv4(protocol::UDP, &udp(5000, 53, &[0; 8]));
    set_ipv4_frag(&mut frag_first, true, 0);
    let mut v4_overlong = ipv4(protocol::UDP, &udp(0x3030, 0x3030, &[0x30; 20]));
    v4_overlong[2..4].copy_from_slice(&12336u16.to_be_bytes());
    let dns = udp(5353, 53, b"query");
    let hbh_rt_udp = ipv6(
        protocol::HOPOPTS,
        &ip6_opts_header(
            protocol::ROUTING,
            8,
            &ip6_routing_header(protocol::UDP, 1, 1, &dns),
        ),
    );
    let frag_v6_later = ipv6(
        protocol::FRAGMENT,
        &ip6_fragment_header(protocol::TCP, 1232, true, &[0x55; 24]),
    );
    let mut frag_v6_len0 = ipv6(
        protocol::FRAGMENT,
        &ip6_fragment_header(protocol::UDP, 0, true, &udp(1, 2, &[])),
    );
    frag_v6_len0[4..6].copy_from_slice(&[0, 0]);
    let geneve_opts = geneve(
        0x0c012e,
        TEB,
        &[
            (0x0132, 0x01, &[1, 2, 3, 4]),
            (0x0100, 0x82, &[0xa5; 16]),
            (0xff72, 0x7f, &[]),
            (0x0000, 0x80, &[0, 0, 0, 12, 0, 0, 0, 13]),
        ],
        &inner_eth,
    );
    let mut geneve_cut = geneve(11, IPV4, &[(0x0132, 3, &[9; 8])], &[]);
    geneve_cut[0] = 4; // opt_len 4 words, but only 3 words of option follow
    vec![
        ("eth-v4-tcp-syn", ethernet(&[], IPV4, &v4_tcp)),
        ("eth-v4-icmp-echo", ethernet(&[], IPV4, &v4_icmp)),
        (
            "eth-v4-options-udp",
            ethernet(
                &[],
                IPV4,
                &ipv4_with_options(protocol::UDP, &[0x94, 4, 0, 0, 1, 0], &dns),
            ),
        ),
        ("vlan1-v4-tcp", ethernet(&[(VLAN, 0xa064)], IPV4, &v4_tcp)),
        (
            "vlan2-qinq-v4-tcp",
            ethernet(&[(QINQ, 200), (VLAN, 2001)], IPV4, &v4_tcp),
        ),
        (
            "vlan3-v4-icmp",
            ethernet(&[(VLAN, 1), (VLAN, 10), (VLAN, 100)], IPV4, &v4_icmp),
        ),
        (
            "vlan-9100-arp",
            ethernet(&[(VLAN_9100, 7)], ARP, &arp_request()),
        ),
        ("eth-arp", ethernet(&[], ARP, &arp_request())),
        (
            "eth-mpls",
            ethernet(&[], MPLS, &[0x00, 0x01, 0xd1, 0x40, 0x45, 0]),
        ),
        ("eth-v4-frag-later", ethernet(&[], IPV4, &frag_later)),
        ("eth-v4-frag-first", ethernet(&[], IPV4, &frag_first)),
        ("eth-v4-totlen-overflow", ethernet(&[], IPV4, &v4_overlong)),
        ("eth-v6-hbh-rt-udp", ethernet(&[], IPV6, &hbh_rt_udp)),
        (
            "eth-v6-icmpv6-echo",
            ethernet(&[], IPV6, &ipv6(protocol::ICMPV6, &icmp_echo(128, 7, 1))),
        ),
        ("eth-v6-frag-later", ethernet(&[], IPV6, &frag_v6_later)),
        ("eth-v6-len0-frag", ethernet(&[], IPV6, &frag_v6_len0)),
        (
            "eth-v4-vxlan",
            ethernet(
                &[],
                IPV4,
                &ipv4(
                    protocol::UDP,
                    &udp(51000, 4789, &vxlan(100, 0x1234, &inner_eth)),
                ),
            ),
        ),
        (
            "eth-v4-geneve-options",
            ethernet(
                &[],
                IPV4,
                &ipv4(protocol::UDP, &udp(51001, 6081, &geneve_opts)),
            ),
        ),
        (
            "eth-v6-geneve-v4-inner",
            ethernet(
                &[],
                IPV6,
                &ipv6(
                    protocol::UDP,
                    &udp(51002, 6081, &geneve(0x123456, IPV4, &[], &v4_icmp)),
                ),
            ),
        ),
        (
            "eth-v4-geneve-truncated-option",
            ethernet(
                &[],
                IPV4,
                &ipv4(protocol::UDP, &udp(51003, 6081, &geneve_cut)),
            ),
        ),
        ("short-ethernet", vec![0x02, 0, 0, 0, 0, 2, 0x02]),
        ("vlan-truncated", ethernet(&[], VLAN, &[0x00])),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_file_safe() {
        let all = all();
        let mut names: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
        assert!(
            names
                .iter()
                .all(|n| n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        );
    }

    #[test]
    fn builders_fill_lengths() {
        let ip = ipv4(17, &udp(1, 2, &[0; 4]));
        assert_eq!((ip[0], u16::from_be_bytes([ip[2], ip[3]])), (0x45, 32));
        assert_eq!(u16::from_be_bytes([ip[24], ip[25]]), 12);
        let ip6 = ipv6(59, &[0; 8]);
        assert_eq!(
            (u16::from_be_bytes([ip6[4], ip6[5]]), ip6[6], ip6.len()),
            (8, 59, 48)
        );
        let g = geneve(5, 0x6558, &[(1, 0x81, &[1, 2, 3])], &[]);
        assert_eq!((g[0], g[1], g[10], g[11], g.len()), (2, 0x40, 0x81, 1, 16));
    }
}
