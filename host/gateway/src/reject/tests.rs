//! `reject` replies on built frames: the builder alone, then through the engine and the
//! forwarder (a netdev ingress chain, and an ip forward / input chain behind the gateway).
//! Checksums are verified with an RFC 1071 sum written here.

use super::*;
use crate::DropReason;
use crate::netfilter_tests::{rig_with, tcp};
use crate::path::{Fate, SendKind};

/// RFC 1071 sum of `parts`, folded (0xffff: a region with a right checksum).
fn ones(parts: &[&[u8]]) -> u16 {
    let mut acc: u32 = 0;
    for p in parts {
        for w in p.chunks(2) {
            acc += u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0));
        }
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The IPv4 pseudo-header of `ip` (a header) for `len` bytes of `proto`.
fn pseudo4(ip: &[u8], proto: u8, len: usize) -> Vec<u8> {
    let mut p = ip[12..20].to_vec();
    p.extend_from_slice(&[0, proto]);
    p.extend_from_slice(&(len as u16).to_be_bytes());
    p
}

/// The IPv6 pseudo-header of `ip` for `len` bytes of `proto`.
fn pseudo6(ip: &[u8], proto: u8, len: usize) -> Vec<u8> {
    let mut p = ip[8..40].to_vec();
    p.extend_from_slice(&(len as u32).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, proto]);
    p
}

const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

fn seg(flags: u8, payload: &[u8]) -> Vec<u8> {
    tcp(
        A,
        B,
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        40000,
        22,
        flags,
        64,
        payload,
    )
}

fn netdev(kind: RejectKind, frame: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    netdev_reply(kind, frame, &wasp_wire::parse(frame), &mut out).then_some(out)
}

/// An IPv4 UDP datagram from 10.0.0.1:5353 to 10.0.0.2:53 of `n` payload bytes, checksums
/// right (`csum` false: UDP checksum 0).
fn udp4(n: usize, csum: bool) -> Vec<u8> {
    let mut f = tcp(A, B, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 0, 64, &[]);
    f.truncate(34);
    let total = 20 + 8 + n;
    f[16..18].copy_from_slice(&(total as u16).to_be_bytes());
    f[23] = 17;
    f[24..26].copy_from_slice(&[0, 0]);
    let c = !ones(&[&f[14..34]]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    let mut u = vec![0x14, 0xe9, 0, 53];
    u.extend_from_slice(&((8 + n) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend((0..n).map(|i| i as u8));
    if csum {
        let c = !ones(&[&pseudo4(&f[14..34], 17, u.len()), &u]);
        u[6..8].copy_from_slice(&c.to_be_bytes());
    }
    f.extend_from_slice(&u);
    f
}

/// An IPv6 TCP SYN from fd00::1 port 40000 to fd00::2 port 443 with `payload`.
fn tcp6(flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = B.to_vec();
    f.extend_from_slice(&A);
    f.extend_from_slice(&[0x86, 0xdd]);
    let mut t = vec![0x9c, 0x40, 0x01, 0xbb];
    t.extend_from_slice(&7u32.to_be_bytes());
    t.extend_from_slice(&9u32.to_be_bytes());
    t.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    t.extend_from_slice(payload);
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&(t.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[6, 64]);
    let mut a = [0u8; 16];
    a[0] = 0xfd;
    a[15] = 1;
    ip.extend_from_slice(&a);
    a[15] = 2;
    ip.extend_from_slice(&a);
    let c = !ones(&[&pseudo6(&ip, 6, t.len()), &t]);
    t[16..18].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&t);
    f
}

/// Checks of an IPv4 reply's header (nf_reject_iphdr_put): from 10.0.0.2 to 10.0.0.1, TOS 0,
/// ID 0, DF, TTL 64, protocol `proto`, total length the frame's, header checksum right.
fn check_v4_header(r: &[u8], proto: u8) {
    assert_eq!(&r[..12], &[A, B].concat(), "MACs swapped");
    assert_eq!(&r[12..14], &[0x08, 0x00]);
    let ip = &r[14..34];
    assert_eq!(ip[0], 0x45);
    assert_eq!(ip[1], 0, "TOS 0");
    assert_eq!(
        usize::from(u16::from_be_bytes([ip[2], ip[3]])),
        r.len() - 14
    );
    assert_eq!(&ip[4..8], &[0, 0, 0x40, 0], "ID 0, DF");
    assert_eq!((ip[8], ip[9]), (64, proto));
    assert_eq!(ones(&[ip]), 0xffff, "IP header checksum");
    assert_eq!(&ip[12..20], &[10, 0, 0, 2, 10, 0, 0, 1]);
}

#[test]
fn a_syn_gets_a_reset_acking_its_sequence_plus_one() {
    let r = netdev(RejectKind::TcpReset, &seg(0x02, &[])).expect("a reset");
    assert_eq!(r.len(), 14 + 20 + 20);
    check_v4_header(&r, 6);
    let t = &r[34..];
    assert_eq!(&t[..4], &[0, 22, 0x9c, 0x40], "ports swapped");
    assert_eq!(&t[4..8], &0u32.to_be_bytes(), "sequence 0");
    assert_eq!(&t[8..12], &1001u32.to_be_bytes(), "ack = 1000 + SYN");
    assert_eq!((t[12], t[13]), (0x50, 0x14), "doff 5, RST|ACK");
    assert_eq!(
        (&t[14..16], &t[18..20]),
        (&[0u8; 2][..], &[0u8; 2][..]),
        "window, urgent 0"
    );
    assert_eq!(ones(&[&pseudo4(&r[14..34], 6, 20), t]), 0xffff);
}

#[test]
fn a_segment_with_ack_gets_a_reset_at_its_ack_number() {
    let r = netdev(RejectKind::TcpReset, &seg(0x18, b"hello")).expect("a reset");
    let t = &r[34..];
    assert_eq!(&t[4..8], &2000u32.to_be_bytes(), "sequence = its ack");
    assert_eq!(&t[8..12], &[0; 4]);
    assert_eq!(t[13], 0x04, "RST only");
    assert_eq!(ones(&[&pseudo4(&r[14..34], 6, 20), t]), 0xffff);
    // FIN without ACK and 5 bytes of data: ack = 1000 + 1 + 5.
    let r = netdev(RejectKind::TcpReset, &seg(0x01, b"hello")).expect("a reset");
    assert_eq!(&r[34 + 8..34 + 12], &1006u32.to_be_bytes());
}

#[test]
fn no_reset_for_a_reset_a_bad_checksum_a_later_fragment_a_group_mac_or_padding() {
    assert_eq!(netdev(RejectKind::TcpReset, &seg(0x04, &[])), None);
    let mut bad = seg(0x02, &[]);
    bad[34 + 16] ^= 1;
    assert_eq!(netdev(RejectKind::TcpReset, &bad), None);
    let mut frag = seg(0x02, &[]);
    frag[20] = 0;
    frag[21] = 1; // offset 8 bytes (the header checksum no longer matters to the check)
    assert_eq!(netdev(RejectKind::TcpReset, &frag), None);
    let mut group = seg(0x02, &[]);
    group[0] = 0x01;
    assert_eq!(netdev(RejectKind::TcpReset, &group), None);
    // Padded to 60 bytes: the kernel sums skb->len (46) bytes with a pseudo-header of 26.
    let mut padded = seg(0x02, &[]);
    padded.resize(60, 0);
    assert_eq!(netdev(RejectKind::TcpReset, &padded), None);
    // Not TCP.
    assert_eq!(netdev(RejectKind::TcpReset, &udp4(4, true)), None);
}

#[test]
fn an_icmp_unreachable_quotes_the_datagram_up_to_536_bytes() {
    let f = udp4(10, true);
    let r = netdev(RejectKind::Icmp(3), &f).expect("an error");
    check_v4_header(&r, 1);
    let icmp = &r[34..];
    assert_eq!(&icmp[..2], &[3, 3]);
    assert_eq!(&icmp[4..8], &[0; 4]);
    assert_eq!(&icmp[8..], &f[14..], "the whole datagram quoted");
    assert_eq!(ones(&[icmp]), 0xffff, "ICMP checksum");
    let big = udp4(1000, true);
    let r = netdev(RejectKind::Icmpx(3), &big).expect("an error");
    assert_eq!(r.len(), 14 + 20 + 8 + 536);
    assert_eq!(&r[34..36], &[3, 13], "icmpx admin-prohibited is code 13");
    assert_eq!(&r[42..], &big[14..14 + 536]);
    assert_eq!(ones(&[&r[34..]]), 0xffff);
    // UDP without a checksum is not checked; with a wrong one, no error.
    assert!(netdev(RejectKind::Icmp(3), &udp4(10, false)).is_some());
    let mut bad = udp4(10, true);
    bad[40] ^= 1;
    assert_eq!(netdev(RejectKind::Icmp(3), &bad), None);
    // A wrong IP header checksum fails nf_ip_checksum's sum too.
    let mut bad = udp4(10, true);
    bad[24] ^= 1;
    assert_eq!(netdev(RejectKind::Icmp(3), &bad), None);
}

#[test]
fn no_unreachable_for_an_unreachable() {
    let err = netdev(RejectKind::Icmp(3), &udp4(10, true)).unwrap();
    let mut back = err.clone();
    back[..12].copy_from_slice(&[B, A].concat());
    assert_eq!(netdev(RejectKind::Icmp(3), &back), None);
    // An echo request is answered.
    let mut echo = err;
    echo[..12].copy_from_slice(&[B, A].concat());
    echo[34] = 8;
    echo[36..38].copy_from_slice(&[0, 0]);
    let c = !ones(&[&echo[34..]]);
    echo[36..38].copy_from_slice(&c.to_be_bytes());
    assert!(netdev(RejectKind::Icmp(1), &echo).is_some());
}

#[test]
fn ipv6_reset_and_unreachable() {
    let f = tcp6(0x02, b"abc");
    let r = netdev(RejectKind::TcpReset, &f).expect("a reset");
    assert_eq!(r.len(), 14 + 40 + 20);
    assert_eq!(&r[..12], &[A, B].concat());
    let ip = &r[14..54];
    assert_eq!(&ip[..4], &[0x60, 0, 0, 0]);
    assert_eq!(&ip[4..8], &[0, 20, 6, 64]);
    assert_eq!(
        &ip[8..24],
        &f[14 + 24..14 + 40],
        "from the packet's destination"
    );
    assert_eq!(&ip[24..40], &f[14 + 8..14 + 24]);
    let t = &r[54..];
    assert_eq!(&t[..4], &[0x01, 0xbb, 0x9c, 0x40]);
    assert_eq!(&t[8..12], &(7u32 + 1 + 3).to_be_bytes());
    assert_eq!(t[13], 0x14);
    assert_eq!(ones(&[&pseudo6(ip, 6, 20), t]), 0xffff);

    let r = netdev(RejectKind::Icmpx(2), &f).expect("an error");
    let ip = &r[14..54];
    assert_eq!(ip[6], 58);
    let msg = &r[54..];
    assert_eq!(
        &msg[..2],
        &[1, 3],
        "icmpx host-unreachable is address-unreachable"
    );
    assert_eq!(&msg[8..], &f[14..]);
    assert_eq!(ones(&[&pseudo6(ip, 58, msg.len()), msg]), 0xffff);
    // Quoted up to 1220 bytes.
    let big = tcp6(0x02, &[7u8; 1500]);
    let r = netdev(RejectKind::Icmpv6(4), &big).expect("an error");
    assert_eq!(r.len(), 14 + 40 + 8 + 1220);
    let mut bad = f.clone();
    bad[60] ^= 0x80;
    assert_eq!(netdev(RejectKind::TcpReset, &bad), None);
    assert_eq!(netdev(RejectKind::Icmpv6(4), &bad), None);
}

#[test]
fn malformed_packets_get_no_reply_and_no_panic() {
    let good = seg(0x02, b"xyz");
    for n in 0..good.len() {
        for k in [RejectKind::TcpReset, RejectKind::Icmpx(1)] {
            let cut = &good[..n];
            let _ = netdev(k, cut);
        }
    }
    let mut lying = seg(0x02, &[]);
    lying[16..18].copy_from_slice(&0xffffu16.to_be_bytes());
    assert_eq!(netdev(RejectKind::Icmpx(1), &lying), None);
    let f6 = tcp6(0x02, &[]);
    for n in 0..f6.len() {
        let _ = netdev(RejectKind::TcpReset, &f6[..n]);
        let _ = netdev(RejectKind::Icmpv6(1), &f6[..n]);
    }
}

const NETDEV: &str = r#"
table netdev f {
    chain in {
        type filter hook ingress device "w0" priority 0; policy accept;
        tcp dport 22 reject with tcp reset
        udp dport 53 reject with icmpx admin-prohibited
    }
}
"#;

const GW: &str = "\
device w0 mac 02:00:00:00:00:01
device w1 mac 02:00:00:00:00:02
address w0 10.1.0.1/24
address w1 10.2.0.1/24
neighbour 10.1.0.2 lladdr 02:00:00:00:01:02 dev w0
neighbour 10.2.0.2 lladdr 02:00:00:00:02:02 dev w1
";
const W0: [u8; 6] = [2, 0, 0, 0, 0, 1];
const CLIENT: [u8; 6] = [2, 0, 0, 0, 1, 2];

#[test]
fn a_netdev_reject_sends_its_reply_out_of_the_input_device() {
    let mut r = rig_with(GW, NETDEV);
    let syn = tcp(
        CLIENT,
        W0,
        [10, 1, 0, 2],
        [10, 2, 0, 2],
        40000,
        22,
        0x02,
        64,
        &[],
    );
    let (fate, sent) = r.send("w0", &syn, 1.0);
    assert_eq!(fate, Fate::Dropped(DropReason::Verdict));
    assert_eq!(sent.len(), 1);
    let (dev, kind, f) = &sent[0];
    assert_eq!((dev.as_str(), *kind), ("w0", SendKind::Reject));
    assert_eq!(&f[..12], &[CLIENT, W0].concat());
    assert_eq!(&f[26..34], &[10, 2, 0, 2, 10, 1, 0, 2]);
    assert_eq!(&f[34 + 8..34 + 12], &1001u32.to_be_bytes());
    assert_eq!(r.fw.stats().sent(SendKind::Reject), 1);
    // Another port: forwarded, no reply.
    let other = tcp(
        CLIENT,
        W0,
        [10, 1, 0, 2],
        [10, 2, 0, 2],
        40000,
        80,
        0x02,
        64,
        &[],
    );
    let (fate, sent) = r.send("w0", &other, 1.0);
    assert_eq!((fate, sent[0].1), (Fate::Sent, SendKind::Forward));
}

const FORWARD: &str = r#"
table inet f {
    chain forward {
        type filter hook forward priority 0; policy accept;
        tcp dport 22 reject with tcp reset
        tcp dport 23 reject
    }
    chain input {
        type filter hook input priority 0; policy accept;
        tcp dport 22 reject
    }
}
"#;

#[test]
fn an_ip_hook_reject_routes_its_reply_back_to_the_sender() {
    let mut r = rig_with(GW, FORWARD);
    let syn = tcp(
        CLIENT,
        W0,
        [10, 1, 0, 2],
        [10, 2, 0, 2],
        40000,
        22,
        0x02,
        64,
        &[],
    );
    let (fate, sent) = r.send("w0", &syn, 1.0);
    assert_eq!(fate, Fate::Dropped(DropReason::Verdict));
    let (dev, kind, f) = &sent[0];
    assert_eq!((dev.as_str(), *kind), ("w0", SendKind::Reject));
    assert_eq!(&f[..12], &[CLIENT, W0].concat(), "to the sender, from w0");
    assert_eq!(
        &f[26..34],
        &[10, 2, 0, 2, 10, 1, 0, 2],
        "from the destination"
    );
    assert_eq!(f[34 + 13], 0x14);
    assert_eq!(ones(&[&f[14..34]]), 0xffff);
    assert_eq!(ones(&[&pseudo4(&f[14..34], 6, 20), &f[34..]]), 0xffff);

    // icmp_send's error for a forwarded packet: from the router's address on w0, TOS 0xc0,
    // no DF, quoting the packet as the forward hook saw it (TTL already decremented).
    let telnet = tcp(
        CLIENT,
        W0,
        [10, 1, 0, 2],
        [10, 2, 0, 2],
        40000,
        23,
        0x02,
        64,
        &[],
    );
    let (_, sent) = r.send("w0", &telnet, 1.0);
    let f = &sent[0].2;
    assert_eq!(sent[0].1, SendKind::Reject);
    assert_eq!(&f[..12], &[CLIENT, W0].concat());
    let ip = &f[14..34];
    assert_eq!((ip[1], ip[6] & 0x40, ip[8], ip[9]), (0xc0, 0, 64, 1));
    assert_eq!(&ip[12..20], &[10, 1, 0, 1, 10, 1, 0, 2]);
    assert_eq!(ones(&[ip]), 0xffff);
    assert_eq!(&f[34..36], &[3, 3]);
    assert_eq!(f[42 + 8], 63, "the quoted TTL is the forward hook's");
    assert_eq!(ones(&[&f[34..]]), 0xffff);

    // At the input hook the error comes from the packet's destination (the gateway's).
    let local = tcp(
        CLIENT,
        W0,
        [10, 1, 0, 2],
        [10, 2, 0, 1],
        40000,
        22,
        0x02,
        64,
        &[],
    );
    let (fate, sent) = r.send("w0", &local, 1.0);
    assert_eq!(fate, Fate::Dropped(DropReason::Verdict));
    let f = &sent[0].2;
    assert_eq!(&f[26..34], &[10, 2, 0, 1, 10, 1, 0, 2]);
    assert_eq!(&f[34..36], &[3, 3]);
    assert_eq!(r.fw.stats().sent(SendKind::Reject), 3);
}
