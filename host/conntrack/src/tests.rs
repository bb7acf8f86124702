//! Table, tracker, NAT and rewrite tests over crafted frames with real checksums.

use std::net::IpAddr;

use wasp_wire::parse;

/// The Internet checksum of `data` plus `initial` (a folded-or-not partial sum).
fn checksum(data: &[u8], initial: u32) -> u16 {
    !wasp_wire::checksum::sum(u64::from(initial), data)
}
use crate::tcp::NS;
use crate::tuple::Key;
use crate::*;

// --- frame builder -------------------------------------------------------------------------

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn tcp_hdr(sport: u16, dport: u16, flags: u8, seq: u32, ack: u32, payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&seq.to_be_bytes());
    h.extend_from_slice(&ack.to_be_bytes());
    h.extend_from_slice(&[0x50, flags, 0xfa, 0xf0, 0, 0, 0, 0]);
    h.extend_from_slice(payload);
    h
}

fn udp_hdr(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(payload);
    h
}

fn icmp_hdr(t: u8, code: u8, id: u16, seq: u16, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![t, code, 0, 0];
    h.extend_from_slice(&id.to_be_bytes());
    h.extend_from_slice(&seq.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

/// Sum of the pseudo header (addresses, protocol, length) for a transport checksum.
fn pseudo(src: IpAddr, dst: IpAddr, p: u8, len: usize) -> u32 {
    let mut b = Vec::new();
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            b.extend_from_slice(&s.octets());
            b.extend_from_slice(&d.octets());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            b.extend_from_slice(&s.octets());
            b.extend_from_slice(&d.octets());
        }
        _ => panic!("mixed families"),
    }
    let mut sum: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    sum += u32::from(p) + len as u32;
    sum
}

/// Offset of the checksum field in a transport header of protocol `p`, if it has one.
fn csum_off(p: u8) -> Option<usize> {
    match p {
        6 => Some(16),
        17 | 136 => Some(6),
        1 | 58 => Some(2),
        _ => None,
    }
}

/// An IP packet (no Ethernet) with correct checksums; `zero_udp` leaves a UDP checksum 0.
fn ip_packet(src: IpAddr, dst: IpAddr, p: u8, l4: &[u8], zero_udp: bool) -> Vec<u8> {
    let mut l4 = l4.to_vec();
    if let Some(o) = csum_off(p)
        && !(p == 17 && zero_udp)
        && l4.len() >= o + 2
    {
        l4[o] = 0;
        l4[o + 1] = 0;
        let init = if p == 1 {
            0
        } else {
            pseudo(src, dst, p, l4.len())
        };
        let mut c = checksum(&l4, init);
        if p == 17 && c == 0 {
            c = 0xffff;
        }
        l4[o..o + 2].copy_from_slice(&c.to_be_bytes());
    }
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = (20 + l4.len()) as u16;
            let mut h = vec![0x45, 0];
            h.extend_from_slice(&total.to_be_bytes());
            h.extend_from_slice(&[0x12, 0x34, 0, 0, 64, p, 0, 0]);
            h.extend_from_slice(&s.octets());
            h.extend_from_slice(&d.octets());
            let c = checksum(&h, 0);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            h.extend_from_slice(&l4);
            h
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut h = vec![0x60, 0, 0, 0];
            h.extend_from_slice(&(l4.len() as u16).to_be_bytes());
            h.extend_from_slice(&[p, 64]);
            h.extend_from_slice(&s.octets());
            h.extend_from_slice(&d.octets());
            h.extend_from_slice(&l4);
            h
        }
        _ => panic!("mixed families"),
    }
}

fn eth(ipp: &[u8]) -> Vec<u8> {
    let et: u16 = if ipp[0] >> 4 == 4 { 0x0800 } else { 0x86dd };
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    f.extend_from_slice(&et.to_be_bytes());
    f.extend_from_slice(ipp);
    f
}

fn frame(src: &str, dst: &str, p: u8, l4: &[u8]) -> Vec<u8> {
    eth(&ip_packet(ip(src), ip(dst), p, l4, false))
}

fn tcp(src: &str, sport: u16, dst: &str, dport: u16, flags: u8, seq: u32, ack: u32) -> Vec<u8> {
    frame(src, dst, 6, &tcp_hdr(sport, dport, flags, seq, ack, &[]))
}

fn udp(src: &str, sport: u16, dst: &str, dport: u16) -> Vec<u8> {
    frame(src, dst, 17, &udp_hdr(sport, dport, b"hello"))
}

/// Recompute every checksum of `f` from scratch and check it (the IPv4 header, the transport
/// header, a UDP checksum of 0 accepted as none).
fn checksums_ok(f: &[u8]) -> bool {
    let m = parse(f);
    let net = usize::from(m.net_offset);
    let l4 = m.l4.unwrap();
    let lo = usize::from(l4.offset);
    let (src, dst, v4) = if f[net] >> 4 == 4 {
        if checksum(&f[net..net + 20], 0) != 0 {
            return false;
        }
        let s: [u8; 4] = f[net + 12..net + 16].try_into().unwrap();
        let d: [u8; 4] = f[net + 16..net + 20].try_into().unwrap();
        (IpAddr::from(s), IpAddr::from(d), true)
    } else {
        let s: [u8; 16] = f[net + 8..net + 24].try_into().unwrap();
        let d: [u8; 16] = f[net + 24..net + 40].try_into().unwrap();
        (IpAddr::from(s), IpAddr::from(d), false)
    };
    let seg = &f[lo..];
    if l4.proto == 17 && seg[6..8] == [0, 0] {
        return true;
    }
    let init = if l4.proto == 1 && v4 {
        0
    } else {
        pseudo(src, dst, l4.proto, seg.len())
    };
    checksum(seg, init) == 0
}

fn track(ct: &Conntrack, f: &[u8], now: u64) -> CtInfo {
    ct.track(f, &parse(f), 0, now)
}

fn table() -> Conntrack {
    Conntrack::new(Config::default())
}

const S: u64 = NS;

/// Seconds left before expiry.
fn left(ct: &Conntrack, id: u64, now: u64) -> u64 {
    ct.get(id, now).unwrap().timeout_ns / S
}

#[test]
fn slot_layout() {
    // The hot fields fill the first cache line; the whole slot is three.
    assert_eq!(std::mem::size_of::<crate::table::Slot>(), 192);
    assert_eq!(std::mem::align_of::<crate::table::Slot>(), 64);
    assert_eq!(std::mem::size_of::<NatRewrite>(), 44);
}

// --- TCP -----------------------------------------------------------------------------------

#[test]
fn tcp_handshake_data_and_close() {
    let ct = table();
    let (c, s) = ("10.0.0.1", "10.0.0.2");
    let syn = track(&ct, &tcp(c, 40000, s, 80, SYN, 100, 0), 0);
    assert_eq!(
        (syn.state, syn.dir, syn.pending),
        (ct_state::NEW, Dir::Original, true)
    );
    let id = ct.confirm(syn.id, 0).unwrap();
    assert_eq!(id, syn.id);
    let e = ct.get(id, 0).unwrap();
    assert_eq!(
        (e.tcp_state, e.timeout_ns),
        (Some(TcpState::SynSent), 120 * S)
    );
    assert_eq!(e.status, status::CONFIRMED);

    let sa = track(&ct, &tcp(s, 80, c, 40000, SYN | ACK, 500, 101), S);
    assert_eq!(
        (sa.state, sa.dir, sa.id),
        (ct_state::ESTABLISHED, Dir::Reply, id)
    );
    assert_eq!(sa.status, status::CONFIRMED | status::SEEN_REPLY);
    assert_eq!(ct.get(id, S).unwrap().tcp_state, Some(TcpState::SynRecv));
    assert_eq!(left(&ct, id, S), 60);

    let a = track(&ct, &tcp(c, 40000, s, 80, ACK, 101, 501), 2 * S);
    assert_eq!((a.state, a.dir), (ct_state::ESTABLISHED, Dir::Original));
    assert_ne!(a.status & status::ASSURED, 0);
    let e = ct.get(id, 2 * S).unwrap();
    assert_eq!(
        (e.tcp_state, e.timeout_ns),
        (Some(TcpState::Established), 432_000 * S)
    );
    assert_eq!(
        format!("{}", ct.get(id, 2 * S + S / 2).unwrap()),
        "tcp      6 431999 ESTABLISHED src=10.0.0.1 dst=10.0.0.2 sport=40000 dport=80 \
         src=10.0.0.2 dst=10.0.0.1 sport=80 dport=40000 [ASSURED] mark=0 use=1"
    );

    // Data not yet acknowledged: the UNACK timeout (300 s); the ACK of it: 5 days again.
    let data = frame(c, s, 6, &tcp_hdr(40000, 80, ACK | PSH, 101, 501, b"GET /"));
    track(&ct, &data, 3 * S);
    assert_eq!(left(&ct, id, 3 * S), 300);
    track(&ct, &tcp(s, 80, c, 40000, ACK, 501, 106), 4 * S);
    assert_eq!(left(&ct, id, 4 * S), 432_000);

    // Close from the client: FIN_WAIT, CLOSE_WAIT, LAST_ACK, TIME_WAIT.
    let steps = [
        (
            tcp(c, 40000, s, 80, FIN | ACK, 106, 501),
            TcpState::FinWait,
            120,
        ),
        (tcp(s, 80, c, 40000, ACK, 501, 107), TcpState::CloseWait, 60),
        (
            tcp(s, 80, c, 40000, FIN | ACK, 501, 107),
            TcpState::LastAck,
            30,
        ),
        (tcp(c, 40000, s, 80, ACK, 107, 502), TcpState::TimeWait, 120),
    ];
    for (i, (f, st, t)) in steps.iter().enumerate() {
        let now = (10 + i as u64) * S;
        let r = track(&ct, f, now);
        assert_eq!(r.state, ct_state::ESTABLISHED, "step {i}");
        let e = ct.get(id, now).unwrap();
        assert_eq!((e.tcp_state, e.timeout_ns / S), (Some(*st), *t), "step {i}");
    }
    let e = ct.get(id, 14 * S).unwrap();
    assert_eq!((e.packets, e.bytes[0]), ([5, 4], 40 + 40 + 45 + 40 + 40));
}

#[test]
fn tcp_rst_gives_close_and_10_seconds() {
    let ct = table();
    let id = handshake(&ct, "10.0.0.1", 1234, "10.0.0.2", 22);
    let r = track(
        &ct,
        &tcp("10.0.0.2", 22, "10.0.0.1", 1234, RST, 501, 0),
        5 * S,
    );
    assert_eq!(r.state, ct_state::ESTABLISHED);
    let e = ct.get(id, 5 * S).unwrap();
    assert_eq!((e.tcp_state, e.timeout_ns), (Some(TcpState::Close), 10 * S));
    // A new SYN from the client after the server's RST: the kernel ignores it (no CLOSE_INIT,
    // the RST came from the other direction) and keeps the entry.
    let again = track(
        &ct,
        &tcp("10.0.0.1", 1234, "10.0.0.2", 22, SYN, 9000, 0),
        6 * S,
    );
    assert_eq!((again.id, again.state), (id, ct_state::ESTABLISHED));
    assert_eq!(ct.get(id, 6 * S).unwrap().tcp_state, Some(TcpState::Close));
}

/// SYN, SYN/ACK, ACK at times 0, 1, 2 s; returns the id.
fn handshake(ct: &Conntrack, c: &str, cp: u16, s: &str, sp: u16) -> u64 {
    let syn = track(ct, &tcp(c, cp, s, sp, SYN, 100, 0), 0);
    let id = ct.confirm(syn.id, 0).unwrap();
    track(ct, &tcp(s, sp, c, cp, SYN | ACK, 500, 101), S);
    track(ct, &tcp(c, cp, s, sp, ACK, 101, 501), 2 * S);
    id
}

#[test]
fn tcp_reopen_from_time_wait_is_a_new_connection() {
    let ct = table();
    let (c, s) = ("10.0.0.1", "10.0.0.2");
    let id = handshake(&ct, c, 5000, s, 80);
    for f in [
        tcp(c, 5000, s, 80, FIN | ACK, 101, 501),
        tcp(s, 80, c, 5000, FIN | ACK, 501, 102),
        tcp(c, 5000, s, 80, ACK, 102, 502),
    ] {
        track(&ct, &f, 3 * S);
    }
    assert_eq!(
        ct.get(id, 3 * S).unwrap().tcp_state,
        Some(TcpState::TimeWait)
    );
    let syn = track(&ct, &tcp(c, 5000, s, 80, SYN, 7000, 0), 4 * S);
    assert!(syn.pending);
    assert_ne!(syn.id, id);
    assert!(ct.get(id, 4 * S).is_none());
}

#[test]
fn tcp_invalid_first_packets_and_flags() {
    let ct = table();
    let (c, s) = ("10.0.0.1", "10.0.0.2");
    for fl in [SYN | ACK, FIN | ACK, RST, RST | ACK] {
        let r = track(&ct, &tcp(c, 1, s, 2, fl, 1, 1), 0);
        assert_eq!((r.state, r.id), (ct_state::INVALID, 0), "{fl:#x}");
    }
    // tcp_valid_flags refuses FIN alone, SYN|FIN, and no flags at all.
    for fl in [FIN, SYN | FIN, 0] {
        assert_eq!(
            track(&ct, &tcp(c, 1, s, 2, fl, 1, 1), 0).state,
            ct_state::INVALID
        );
    }
    // An ACK after a SYN in the original direction is invalid (sSS -> sIV).
    let syn = track(&ct, &tcp(c, 3, s, 4, SYN, 1, 0), 0);
    ct.confirm(syn.id, 0).unwrap();
    assert_eq!(
        track(&ct, &tcp(c, 3, s, 4, ACK, 2, 1), S).state,
        ct_state::INVALID
    );
    assert_eq!(ct.get(syn.id, S).unwrap().packets, [1, 0]);
    assert!(ct.is_empty() || ct.len() == 1);
}

#[test]
fn tcp_mid_stream_pickup_as_loose_1() {
    let ct = table();
    let (c, s) = ("10.0.0.1", "10.0.0.2");
    let a = track(&ct, &tcp(c, 7, s, 8, ACK, 1000, 2000), 0);
    assert_eq!((a.state, a.pending), (ct_state::NEW, true));
    ct.confirm(a.id, 0).unwrap();
    let e = ct.get(a.id, 0).unwrap();
    assert_eq!(
        (e.tcp_state, e.timeout_ns / S),
        (Some(TcpState::Established), 300)
    );
    // The first reply: still capped (no SEEN_REPLY while it is processed), not ASSURED.
    let r = track(&ct, &tcp(s, 8, c, 7, ACK, 2000, 1000), S);
    assert_eq!(r.status & status::ASSURED, 0);
    assert_eq!(left(&ct, a.id, S), 300);
    // The next packet assures it and gets the ESTABLISHED timeout.
    let n = track(&ct, &tcp(c, 7, s, 8, ACK, 1000, 2000), 2 * S);
    assert_ne!(n.status & status::ASSURED, 0);
    assert_eq!(left(&ct, a.id, 2 * S), 432_000);
    // With loose off, the ACK cannot start a connection.
    let strict = Conntrack::new(Config {
        tcp_loose: false,
        ..Config::default()
    });
    assert_eq!(
        track(&strict, &tcp(c, 9, s, 8, ACK, 1, 1), 0).state,
        ct_state::INVALID
    );
}

#[test]
fn tcp_syn_retransmission_does_not_renew_and_rst_reply_kills() {
    let ct = table();
    let (c, s) = ("10.0.0.1", "10.0.0.2");
    let syn = track(&ct, &tcp(c, 11, s, 12, SYN, 1, 0), 0);
    ct.confirm(syn.id, 0).unwrap();
    let again = track(&ct, &tcp(c, 11, s, 12, SYN, 1, 0), 10 * S);
    assert_eq!((again.state, again.id), (ct_state::NEW, syn.id));
    assert_eq!(left(&ct, syn.id, 10 * S), 110);
    // The server refuses: a RST before any reply deletes the entry.
    let rst = track(&ct, &tcp(s, 12, c, 11, RST | ACK, 0, 2), 11 * S);
    assert_eq!((rst.state, rst.dir), (ct_state::ESTABLISHED, Dir::Reply));
    assert!(ct.get(syn.id, 11 * S).is_none());
    assert!(ct.is_empty());
}

// --- UDP, ICMP, generic --------------------------------------------------------------------

#[test]
fn udp_unreplied_then_stream() {
    let ct = table();
    let (c, s) = ("192.0.2.1", "198.51.100.2");
    let n = track(&ct, &udp(c, 5353, s, 53), 0);
    ct.confirm(n.id, 0).unwrap();
    assert_eq!(left(&ct, n.id, 0), 30);
    assert_eq!(
        format!("{}", ct.get(n.id, S / 2).unwrap()),
        "udp      17 29 src=192.0.2.1 dst=198.51.100.2 sport=5353 dport=53 [UNREPLIED] \
         src=198.51.100.2 dst=192.0.2.1 sport=53 dport=5353 mark=0 use=1"
    );
    let r = track(&ct, &udp(s, 53, c, 5353), S);
    assert_eq!((r.state, r.dir), (ct_state::ESTABLISHED, Dir::Reply));
    assert_eq!(left(&ct, n.id, S), 30);
    // Within 2 s of the first packet: still 30 s, not assured.
    let x = track(&ct, &udp(c, 5353, s, 53), S + S / 2);
    assert_eq!(x.status & status::ASSURED, 0);
    assert_eq!(left(&ct, n.id, S + S / 2), 30);
    // After 2 s: a stream, 120 s, assured.
    let y = track(&ct, &udp(s, 53, c, 5353), 3 * S);
    assert_ne!(y.status & status::ASSURED, 0);
    assert_eq!(left(&ct, n.id, 3 * S), 120);
    // A UDP length field past the packet is invalid (udp_error).
    let mut bad = udp(c, 1, s, 2);
    bad[14 + 20 + 5] = 200;
    assert_eq!(track(&ct, &bad, 0).state, ct_state::INVALID);
}

#[test]
fn icmp_echo_and_errors() {
    let ct = table();
    let (c, s) = ("192.0.2.1", "198.51.100.2");
    let req = frame(c, s, 1, &icmp_hdr(8, 0, 0x1234, 1, b"ping"));
    let n = track(&ct, &req, 0);
    assert_eq!(n.state, ct_state::NEW);
    ct.confirm(n.id, 0).unwrap();
    assert_eq!(
        format!("{}", ct.get(n.id, 0).unwrap()),
        "icmp     1 30 src=192.0.2.1 dst=198.51.100.2 type=8 code=0 id=4660 [UNREPLIED] \
         src=198.51.100.2 dst=192.0.2.1 type=0 code=0 id=4660 mark=0 use=1"
    );
    let rep = frame(s, c, 1, &icmp_hdr(0, 0, 0x1234, 1, b"ping"));
    let r = track(&ct, &rep, S);
    assert_eq!(
        (r.state, r.dir, r.id),
        (ct_state::ESTABLISHED, Dir::Reply, n.id)
    );
    // An echo reply nobody asked for cannot start a connection.
    let stray = frame(s, c, 1, &icmp_hdr(0, 0, 0x9999, 1, b""));
    assert_eq!(track(&ct, &stray, S).state, ct_state::INVALID);
    // ICMP type above 18: invalid.
    assert_eq!(
        track(&ct, &frame(c, s, 1, &icmp_hdr(40, 0, 0, 0, b"")), S).state,
        ct_state::INVALID
    );

    // A UDP flow, then a port unreachable from the server quoting the client's packet.
    let u = track(&ct, &udp(c, 4000, s, 9), 0);
    ct.confirm(u.id, 0).unwrap();
    let quoted = ip_packet(ip(c), ip(s), 17, &udp_hdr(4000, 9, b"hello"), false);
    let err = frame(s, c, 1, &icmp_hdr(3, 3, 0, 0, &quoted));
    let e = track(&ct, &err, S);
    assert_eq!(
        (e.state, e.dir, e.id),
        (ct_state::RELATED, Dir::Reply, u.id)
    );
    // Relayed by a router (outer source another address): still related.
    let err2 = frame("203.0.113.9", c, 1, &icmp_hdr(11, 0, 0, 0, &quoted));
    assert_eq!(track(&ct, &err2, S).state, ct_state::RELATED);
    // Sent to someone else than the quoted packet's source: invalid (outer daddr check).
    let err3 = frame(s, "192.0.2.77", 1, &icmp_hdr(3, 3, 0, 0, &quoted));
    assert_eq!(track(&ct, &err3, S).state, ct_state::INVALID);
    // About an unknown flow: invalid.
    let other = ip_packet(ip(c), ip(s), 17, &udp_hdr(4001, 9, b""), false);
    assert_eq!(
        track(&ct, &frame(s, c, 1, &icmp_hdr(3, 3, 0, 0, &other)), S).state,
        ct_state::INVALID
    );
    // Related packets do not count.
    assert_eq!(ct.get(u.id, S).unwrap().packets, [1, 0]);
}

#[test]
fn icmpv6_echo_nd_and_packet_too_big() {
    let ct = table();
    let (c, s) = ("2001:db8::1", "2001:db8::2");
    let n = track(&ct, &frame(c, s, 58, &icmp_hdr(128, 0, 7, 1, b"x")), 0);
    assert_eq!(n.state, ct_state::NEW);
    ct.confirm(n.id, 0).unwrap();
    let r = track(&ct, &frame(s, c, 58, &icmp_hdr(129, 0, 7, 1, b"x")), S);
    assert_eq!((r.state, r.dir), (ct_state::ESTABLISHED, Dir::Reply));
    // Neighbour solicitation: untracked.
    let ns = track(&ct, &frame(c, s, 58, &icmp_hdr(135, 0, 0, 0, &[0; 16])), S);
    assert_eq!((ns.state, ns.id), (ct_state::UNTRACKED, 0));
    // Packet too big quoting a TCP segment of a tracked connection: related.
    let t = track(&ct, &tcp(c, 443, s, 50000, SYN, 1, 0), 0);
    ct.confirm(t.id, 0).unwrap();
    let q = ip_packet(ip(c), ip(s), 6, &tcp_hdr(443, 50000, SYN, 1, 0, &[]), false);
    let ptb = frame("2001:db8::ff", c, 58, &icmp_hdr(2, 0, 0, 1280, &q));
    let rel = track(&ct, &ptb, S);
    assert_eq!(
        (rel.state, rel.id, rel.dir),
        (ct_state::RELATED, t.id, Dir::Reply)
    );
}

#[test]
fn fragments_and_generic() {
    let ct = table();
    // A first fragment (MF set, offset 0) is tracked by its ports.
    let mut first = udp("10.0.0.1", 1, "10.0.0.2", 2);
    first[14 + 6] = 0x20;
    let f = track(&ct, &first, 0);
    assert!(f.pending);
    ct.confirm(f.id, 0).unwrap();
    // A later fragment has no conntrack: invalid (ipv4_get_l4proto returns -1).
    let mut later = udp("10.0.0.1", 1, "10.0.0.2", 2);
    later[14 + 6] = 0x00;
    later[14 + 7] = 0xb9;
    assert_eq!(track(&ct, &later, 0).state, ct_state::INVALID);
    // GRE: generic tracker, 600 s, no ports.
    let g = track(&ct, &frame("10.0.0.1", "10.0.0.2", 47, &[0, 0, 0x08, 0]), 0);
    ct.confirm(g.id, 0).unwrap();
    let e = ct.get(g.id, 0).unwrap();
    assert_eq!((e.timeout_ns / S, e.orig.sport, e.orig.dport), (600, 0, 0));
    assert_eq!(
        format!("{}", e),
        "gre      47 600 src=10.0.0.1 dst=10.0.0.2 [UNREPLIED] src=10.0.0.2 dst=10.0.0.1 mark=0 use=1"
    );
}

// --- table ---------------------------------------------------------------------------------

#[test]
fn expiry_and_gc() {
    let ct = table();
    let n = track(&ct, &udp("10.0.0.1", 1, "10.0.0.2", 2), 0);
    ct.confirm(n.id, 0).unwrap();
    // Just before 30 s it is found; at 30 s it is gone and the packet starts a new one.
    assert_eq!(
        track(&ct, &udp("10.0.0.1", 1, "10.0.0.2", 2), 29 * S).id,
        n.id
    );
    let again = track(&ct, &udp("10.0.0.1", 1, "10.0.0.2", 2), 59 * S);
    assert!(again.pending && again.id != n.id);
    assert!(ct.get(n.id, 59 * S).is_none());
    ct.confirm(again.id, 59 * S).unwrap();
    let other = track(&ct, &udp("10.0.0.3", 1, "10.0.0.2", 2), 59 * S);
    ct.confirm(other.id, 59 * S).unwrap();
    assert_eq!(ct.entries(60 * S).len(), 2);
    assert_eq!(ct.gc(200 * S, usize::MAX), 2);
    assert!(ct.is_empty());
    // A forgotten unconfirmed entry is reclaimed after 10 s.
    let lost = track(&ct, &udp("10.0.0.4", 1, "10.0.0.2", 2), 0);
    assert_eq!(ct.gc(5 * S, usize::MAX), 0);
    assert_eq!(ct.gc(11 * S, usize::MAX), 1);
    assert_eq!(ct.confirm(lost.id, 11 * S), Err(ConfirmError::Gone));
    ct.check_consistency().unwrap();
}

/// UDP frames from distinct sources that all land in one shard.
fn same_shard_flows(ct: &Conntrack, n: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut target = None;
    for i in 0..100_000u32 {
        let src = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
        let f = udp(&src, 1000, "10.255.0.1", 53);
        let k = Key::from_packet(&f, &parse(&f), 0).unwrap();
        let s = ct.shard_of(&k);
        if *target.get_or_insert(s) == s {
            out.push(f);
            if out.len() == n {
                break;
            }
        }
    }
    out
}

#[test]
fn early_drop_of_unassured_else_refused() {
    let ct = Conntrack::new(Config {
        max_entries: 4,
        ..Config::default()
    });
    let flows = same_shard_flows(&ct, 6);
    let mut ids = Vec::new();
    for f in &flows[..4] {
        let i = track(&ct, f, 0);
        ids.push(ct.confirm(i.id, 0).unwrap());
    }
    assert_eq!(ct.len(), 4);
    // Full: the fifth early-drops every not-ASSURED entry it looks at (all four here).
    let fifth = track(&ct, &flows[4], S);
    assert!(fifth.pending && !fifth.drop);
    assert!(ct.stats().early_drop >= 1);
    ct.confirm(fifth.id, S).unwrap();
    ct.check_consistency().unwrap();

    // Now fill with ASSURED UDP streams: nothing can be dropped, the new one is refused.
    let ct = Conntrack::new(Config {
        max_entries: 4,
        ..Config::default()
    });
    for f in &flows[..4] {
        let i = track(&ct, f, 0);
        ct.confirm(i.id, 0).unwrap();
        let m = parse(f);
        let reply = {
            let k = Key::from_packet(f, &m, 0)
                .unwrap()
                .invert()
                .unwrap()
                .to_tuple();
            udp(&k.src.to_string(), k.sport, &k.dst.to_string(), k.dport)
        };
        track(&ct, &reply, S);
        let r = track(&ct, f, 3 * S);
        assert_ne!(r.status & status::ASSURED, 0);
    }
    let refused = track(&ct, &flows[5], 4 * S);
    assert!(refused.drop);
    assert_eq!((refused.id, ct.stats().drop), (0, 1));
    assert_eq!(ct.len(), 4);
}

#[test]
fn clash_on_confirm_takes_the_existing_entry() {
    let ct = table();
    let f = udp("10.0.0.1", 7, "10.0.0.2", 8);
    // Two workers see the first two packets before either confirms.
    let a = track(&ct, &f, 0);
    let b = track(&ct, &f, 0);
    assert!(a.pending && b.pending && a.id != b.id);
    assert_eq!(ct.len(), 2);
    assert_eq!(ct.confirm(a.id, 0), Ok(a.id));
    assert_eq!(ct.confirm(b.id, 0), Ok(a.id));
    assert_eq!(ct.stats().clash_resolve, 1);
    assert_eq!(ct.len(), 1);
    assert_eq!(ct.get(a.id, 0).unwrap().packets, [2, 0]);
    // A clash with a different NAT binding is refused.
    let g = udp("10.0.0.9", 7, "10.0.0.2", 8);
    let x = track(&ct, &g, 0);
    let y = track(&ct, &g, 0);
    let r = NatRange {
        addr: Some((ip("192.0.2.1"), ip("192.0.2.1"))),
        ..NatRange::default()
    };
    ct.nat_setup(x.id, Manip::Src, &r).unwrap();
    ct.confirm(x.id, 0).unwrap();
    let r2 = NatRange {
        addr: Some((ip("192.0.2.2"), ip("192.0.2.2"))),
        ..NatRange::default()
    };
    ct.nat_setup(y.id, Manip::Src, &r2).unwrap();
    assert_eq!(ct.confirm(y.id, 0), Err(ConfirmError::Clash));
    assert_eq!(ct.stats().insert_failed, 1);
    ct.check_consistency().unwrap();
}

/// Two connections from different clients, both pending, given the same source NAT mapping
/// (192.0.2.1:7, as two workers may choose before either confirms): their original tuples
/// differ, their reply tuples are the same. The second confirm finds the first's reply tuple,
/// is refused as the kernel refuses it (`insert_failed`), and leaves nothing of its own in the
/// table: its original tuple, put in first, is taken out again.
#[test]
fn a_reply_clash_on_confirm_is_refused_and_leaves_no_trace() {
    let ct = table();
    let fx = udp("10.0.0.1", 7, "10.0.0.2", 8);
    let fy = udp("10.0.0.3", 7, "10.0.0.2", 8);
    let x = track(&ct, &fx, 0);
    let y = track(&ct, &fy, 0);
    let r = NatRange {
        addr: Some((ip("192.0.2.1"), ip("192.0.2.1"))),
        ports: Some((7, 7)),
        ..NatRange::default()
    };
    ct.nat_setup(x.id, Manip::Src, &r).unwrap();
    ct.nat_setup(y.id, Manip::Src, &r).unwrap();
    assert_eq!(ct.confirm(x.id, 0), Ok(x.id));
    assert_eq!(ct.confirm(y.id, 0), Err(ConfirmError::Clash));
    assert_eq!(ct.stats().insert_failed, 1);
    assert_eq!(ct.len(), 1);
    ct.check_consistency().unwrap();
    // y's original tuple is free again: its next packet starts a connection of its own.
    let again = track(&ct, &fy, 1);
    assert!(again.pending && again.id != x.id);
    // x's answers still find x.
    let answer = udp("10.0.0.2", 8, "192.0.2.1", 7);
    assert_eq!(track(&ct, &answer, 2).id, x.id);
}

#[test]
fn mark_kill_and_flow_teardown_c19() {
    let ct = table();
    let id = handshake(&ct, "10.0.0.1", 1000, "10.0.0.2", 80);
    assert!(ct.set_mark(id, 0x42));
    assert_eq!(
        track(
            &ct,
            &tcp("10.0.0.1", 1000, "10.0.0.2", 80, ACK, 101, 501),
            3 * S
        )
        .mark,
        0x42
    );
    // Offloaded, then a FIN in the fast path: FIN_WAIT, 120 s, no longer offloaded.
    assert!(ct.set_offload(id, true));
    let e = ct.get(id, 3 * S).unwrap();
    assert!(format!("{e}").contains("[OFFLOAD]") && !format!("{e}").contains("ESTABLISHED"));
    assert!(ct.flow_teardown(id, Teardown::Fin, 4 * S));
    let e = ct.get(id, 4 * S).unwrap();
    assert_eq!(
        (e.tcp_state, e.timeout_ns / S),
        (Some(TcpState::FinWait), 120)
    );
    assert_eq!(e.status & status::OFFLOAD, 0);
    assert!(ct.flow_teardown(id, Teardown::Rst, 5 * S));
    let e = ct.get(id, 5 * S).unwrap();
    assert_eq!((e.tcp_state, e.timeout_ns / S), (Some(TcpState::Close), 10));
    assert!(ct.flow_teardown(id, Teardown::Idle, 6 * S));
    let e = ct.get(id, 6 * S).unwrap();
    assert_eq!(
        (e.tcp_state, e.timeout_ns / S),
        (Some(TcpState::Established), 300)
    );
    assert!(ct.set_tcp_state(id, TcpState::TimeWait, 7 * S, 6 * S));
    assert_eq!(left(&ct, id, 6 * S), 7);
    assert!(ct.set_timeout(id, 99 * S, 6 * S));
    assert_eq!(left(&ct, id, 6 * S), 99);
    assert!(ct.kill(id));
    assert!(!ct.is_alive(id, 6 * S));
    assert!(ct.is_empty());
    assert!(!ct.set_mark(id, 1));
}

#[test]
fn offloaded_flows_do_not_expire() {
    let ct = table();
    let n = track(&ct, &udp("10.0.0.1", 1, "10.0.0.2", 2), 0);
    ct.confirm(n.id, 0).unwrap();
    ct.set_offload(n.id, true);
    // Past its 30 s: still there, and the gc gives it a day.
    assert!(ct.is_alive(n.id, 100 * S));
    assert_eq!(ct.gc(100 * S, usize::MAX), 0);
    assert_eq!(left(&ct, n.id, 100 * S), 86_400);
    // Given back idle: the UDP stream timeout from then on.
    ct.flow_teardown(n.id, Teardown::Idle, 200 * S);
    assert_eq!(left(&ct, n.id, 200 * S), 120);
    assert_eq!(ct.gc(321 * S, usize::MAX), 1);
}

#[test]
fn connlimit_counts_live_connections() {
    let ct = table();
    let a = handshake(&ct, "10.0.0.1", 1, "10.0.0.9", 22);
    let b = handshake(&ct, "10.0.0.2", 1, "10.0.0.9", 22);
    assert_eq!(ct.count_add(7, a, 3 * S), 1);
    assert_eq!(ct.count_add(7, a, 3 * S), 1);
    assert_eq!(ct.count_add(7, b, 3 * S), 2);
    let c = track(&ct, &tcp("10.0.0.3", 1, "10.0.0.9", 22, SYN, 1, 0), 3 * S);
    assert_eq!(ct.count_add(7, c.id, 3 * S), 3);
    ct.discard(c.id);
    // b is reset: CLOSE counts as closed; a's list entry stays.
    track(&ct, &tcp("10.0.0.9", 22, "10.0.0.2", 1, RST, 501, 0), 4 * S);
    assert_eq!(ct.count_add(8, 0, 4 * S), 0);
    assert_eq!(ct.count_add(7, 0, 4 * S), 1);
}

// --- NAT -----------------------------------------------------------------------------------

fn snat_to(a: &str) -> NatRange {
    NatRange {
        addr: Some((ip(a), ip(a))),
        ..NatRange::default()
    }
}

#[test]
fn snat_two_hosts_to_one_address_get_unique_tuples() {
    let ct = table();
    let out = "203.0.113.1";
    let mut replies = Vec::new();
    for h in ["10.0.0.1", "10.0.0.2", "10.0.0.3"] {
        let i = track(&ct, &udp(h, 5000, "198.51.100.7", 53), 0);
        assert_eq!(ct.nat_setup(i.id, Manip::Src, &snat_to(out)), Ok(true));
        // Bound once: a second binding does nothing.
        assert_eq!(
            ct.nat_setup(i.id, Manip::Src, &snat_to("203.0.113.99")),
            Ok(false)
        );
        ct.confirm(i.id, 0).unwrap();
        let e = ct.get(i.id, 0).unwrap();
        assert_eq!(e.reply.dst, ip(out));
        assert_ne!(e.status & status::SRC_NAT, 0);
        assert_ne!(e.status & status::SRC_NAT_DONE, 0);
        replies.push(e.reply);
    }
    // The first keeps its port (in range and free); the others got other ports >= 1024.
    assert_eq!(replies[0].dport, 5000);
    assert!(replies[1].dport != 5000 && replies[1].dport >= 1024);
    assert!(replies[2].dport != replies[1].dport && replies[2].dport != 5000);
    // Replies find their connections.
    for (k, r) in replies.iter().enumerate() {
        let f = udp(&r.src.to_string(), r.sport, &r.dst.to_string(), r.dport);
        let t = track(&ct, &f, S);
        assert_eq!((t.dir, t.state), (Dir::Reply, ct_state::ESTABLISHED), "{k}");
    }
    ct.check_consistency().unwrap();
}

#[test]
fn snat_same_source_keeps_its_mapping() {
    // find_appropriate_src: a source already mapped keeps its mapping for new destinations.
    let ct = table();
    let out = "203.0.113.1";
    let bind = |src: &str, dst: &str| {
        let i = track(&ct, &udp(src, 5000, dst, 53), 0);
        ct.nat_setup(i.id, Manip::Src, &snat_to(out)).unwrap();
        ct.confirm(i.id, 0).unwrap();
        ct.get(i.id, 0).unwrap().reply.dport
    };
    assert_eq!(bind("10.0.0.9", "198.51.100.1"), 5000);
    let p = bind("10.0.0.1", "198.51.100.1");
    assert_ne!(p, 5000);
    // To another destination 5000 is free, but the source keeps port p.
    assert_eq!(bind("10.0.0.1", "198.51.100.2"), p);
    // Once its connections are gone, the mapping is forgotten: the original port again.
    for e in ct.entries(0) {
        if e.orig.src == ip("10.0.0.1") {
            ct.kill(e.id);
        }
    }
    assert_eq!(bind("10.0.0.1", "198.51.100.3"), 5000);
    assert!(ct.bysource.lock().len() <= 2);
}

#[test]
fn snat_port_range_and_low_ports() {
    let ct = table();
    let r = NatRange {
        addr: Some((ip("203.0.113.1"), ip("203.0.113.1"))),
        ports: Some((20000, 20001)),
        ..NatRange::default()
    };
    let mut ports = Vec::new();
    for h in ["10.0.0.1", "10.0.0.2", "10.0.0.3"] {
        let i = track(&ct, &tcp(h, 40000, "198.51.100.7", 80, SYN, 1, 0), 0);
        ct.nat_setup(i.id, Manip::Src, &r).unwrap();
        let res = ct.confirm(i.id, 0);
        ports.push(res.map(|id| ct.get(id, 0).unwrap().reply.dport));
    }
    // Two ports in the range: the third connection finds none free and clashes at confirm.
    let mut got: Vec<u16> = ports[..2].iter().map(|p| *p.as_ref().unwrap()).collect();
    got.sort();
    assert_eq!(got, [20000, 20001]);
    assert_eq!(ports[2], Err(ConfirmError::Clash));
    // A null binding of a low port searches 600-1023 when 700 is taken.
    let ct = table();
    for h in ["10.0.0.1", "10.0.0.2"] {
        let i = track(&ct, &udp(h, 700, "198.51.100.7", 53), 0);
        ct.nat_setup(i.id, Manip::Src, &snat_to("203.0.113.1"))
            .unwrap();
        ct.confirm(i.id, 0).unwrap();
    }
    let es = ct.entries(0);
    let p: Vec<u16> = es.iter().map(|e| e.reply.dport).collect();
    assert!(p.contains(&700));
    assert!(p.iter().all(|x| (600..=1023).contains(x)), "{p:?}");
}

#[test]
fn dnat_rewrites_both_directions_with_valid_checksums() {
    let ct = table();
    let (c, vip, srv) = ("198.51.100.9", "203.0.113.80", "10.0.0.5");
    let syn = tcp(c, 33000, vip, 80, SYN, 1, 0);
    let i = track(&ct, &syn, 0);
    let r = NatRange {
        addr: Some((ip(srv), ip(srv))),
        ports: Some((8080, 8080)),
        ..NatRange::default()
    };
    ct.nat_setup(i.id, Manip::Dst, &r).unwrap();
    ct.nat_null_binding(i.id, Manip::Src).unwrap();
    let rw = ct.nat_rewrite(i.id, Dir::Original).unwrap();
    assert_eq!((rw.src, rw.dst), (None, Some((ip(srv), 8080))));
    let mut f = syn.clone();
    rw.apply(&mut f, &parse(&syn)).unwrap();
    assert_eq!(f, tcp(c, 33000, srv, 8080, SYN, 1, 0));
    assert!(checksums_ok(&f));
    ct.confirm(i.id, 0).unwrap();
    // The server's answer is found by the NATed reply tuple and rewritten back.
    let sa = tcp(srv, 8080, c, 33000, SYN | ACK, 9, 2);
    let t = track(&ct, &sa, S);
    assert_eq!((t.id, t.dir), (i.id, Dir::Reply));
    let rw = ct.nat_rewrite(i.id, Dir::Reply).unwrap();
    assert_eq!((rw.src, rw.dst), (Some((ip(vip), 80)), None));
    let mut f = sa.clone();
    rw.apply(&mut f, &parse(&sa)).unwrap();
    assert_eq!(f, tcp(vip, 80, c, 33000, SYN | ACK, 9, 2));
    assert_eq!(
        rw.only(Manip::Dst),
        NatRewrite {
            src: None,
            dst: None,
            icmp_id: None
        }
    );
}

#[test]
fn snat_rewrite_udp_v4_v6_and_zero_checksum() {
    let ct = table();
    // IPv4 UDP with a checksum.
    let f0 = udp("10.0.0.1", 5000, "198.51.100.7", 53);
    let i = track(&ct, &f0, 0);
    ct.nat_setup(i.id, Manip::Src, &snat_to("203.0.113.1"))
        .unwrap();
    let rw = ct.nat_rewrite(i.id, Dir::Original).unwrap();
    let mut f = f0.clone();
    rw.apply(&mut f, &parse(&f0)).unwrap();
    assert_eq!(f, udp("203.0.113.1", 5000, "198.51.100.7", 53));
    assert!(checksums_ok(&f));
    // IPv4 UDP without a checksum: it stays 0.
    let z = eth(&ip_packet(
        ip("10.0.0.1"),
        ip("198.51.100.7"),
        17,
        &udp_hdr(5000, 53, b"x"),
        true,
    ));
    let mut f = z.clone();
    rw.apply(&mut f, &parse(&z)).unwrap();
    assert_eq!(&f[14 + 20 + 6..14 + 20 + 8], &[0, 0]);
    assert!(checksums_ok(&f));
    // IPv6 TCP with a port change.
    let ct = table();
    let a = "2001:db8:1::1";
    let s6 = frame(a, "2001:db8:2::2", 6, &tcp_hdr(1111, 443, SYN, 5, 0, &[]));
    let i = track(&ct, &s6, 0);
    let r = NatRange {
        addr: Some((ip("2001:db8:ff::1"), ip("2001:db8:ff::1"))),
        ports: Some((30000, 30000)),
        ..NatRange::default()
    };
    ct.nat_setup(i.id, Manip::Src, &r).unwrap();
    let rw = ct.nat_rewrite(i.id, Dir::Original).unwrap();
    assert_eq!(rw.src, Some((ip("2001:db8:ff::1"), 30000)));
    let mut f = s6.clone();
    rw.apply(&mut f, &parse(&s6)).unwrap();
    assert_eq!(
        f,
        frame(
            "2001:db8:ff::1",
            "2001:db8:2::2",
            6,
            &tcp_hdr(30000, 443, SYN, 5, 0, &[])
        )
    );
    assert!(checksums_ok(&f));
    // Wrong family.
    let bad = NatRewrite {
        src: Some((ip("192.0.2.1"), 1)),
        dst: None,
        icmp_id: None,
    };
    let mut g = s6.clone();
    assert_eq!(bad.apply(&mut g, &parse(&s6)), Err(RewriteError::Family));
    assert_eq!(g, s6);
}

#[test]
fn icmp_echo_id_and_error_translation() {
    let ct = table();
    let (c, out, s) = ("10.0.0.1", "203.0.113.1", "198.51.100.7");
    // Two hosts ping with the same id through one address: the second gets another id.
    let mut ids = Vec::new();
    for h in [c, "10.0.0.2"] {
        let req = frame(h, s, 1, &icmp_hdr(8, 0, 77, 1, b"abc"));
        let i = track(&ct, &req, 0);
        ct.nat_setup(i.id, Manip::Src, &snat_to(out)).unwrap();
        let rw = ct.nat_rewrite(i.id, Dir::Original).unwrap();
        let mut f = req.clone();
        rw.apply(&mut f, &parse(&req)).unwrap();
        assert!(checksums_ok(&f));
        ct.confirm(i.id, 0).unwrap();
        ids.push((i.id, u16::from_be_bytes([f[14 + 24], f[14 + 25]])));
    }
    assert_eq!(ids[0].1, 77);
    assert_ne!(ids[1].1, 77);
    // The echo reply to the second host comes back with the new id and is rewritten back.
    let rep = frame(s, out, 1, &icmp_hdr(0, 0, ids[1].1, 1, b"abc"));
    let t = track(&ct, &rep, S);
    assert_eq!((t.id, t.dir), (ids[1].0, Dir::Reply));
    let mut f = rep.clone();
    ct.nat_rewrite(t.id, Dir::Reply)
        .unwrap()
        .apply(&mut f, &parse(&rep))
        .unwrap();
    assert_eq!(f, frame(s, "10.0.0.2", 1, &icmp_hdr(0, 0, 77, 1, b"abc")));

    // A TCP connection through SNAT; a router on the way answers "time exceeded" to the NAT
    // address quoting the translated segment: related, and translated back for the client.
    let syn = tcp(c, 40000, s, 443, SYN, 1, 0);
    let i = track(&ct, &syn, 0);
    ct.nat_setup(i.id, Manip::Src, &snat_to(out)).unwrap();
    ct.confirm(i.id, 0).unwrap();
    let sport = ct.get(i.id, 0).unwrap().reply.dport;
    let quoted = ip_packet(
        ip(out),
        ip(s),
        6,
        &tcp_hdr(sport, 443, SYN, 1, 0, &[]),
        false,
    );
    let err = frame("192.0.2.254", out, 1, &icmp_hdr(11, 0, 0, 0, &quoted));
    let t = track(&ct, &err, S);
    assert_eq!(
        (t.state, t.dir, t.id),
        (ct_state::RELATED, Dir::Reply, i.id)
    );
    let rw = ct.nat_rewrite(t.id, t.dir).unwrap();
    let mut f = err.clone();
    rw.apply(&mut f, &parse(&err)).unwrap();
    let want_quoted = ip_packet(ip(c), ip(s), 6, &tcp_hdr(40000, 443, SYN, 1, 0, &[]), false);
    assert_eq!(
        f,
        frame("192.0.2.254", c, 1, &icmp_hdr(11, 0, 0, 0, &want_quoted))
    );
    assert!(checksums_ok(&f));
}

#[test]
fn icmpv6_error_translation_through_snat66() {
    let ct = table();
    let (c, out, s) = ("2001:db8:1::10", "2001:db8:ff::1", "2001:db8:2::2");
    let first = frame(c, s, 17, &udp_hdr(5000, 443, b"quic"));
    let i = track(&ct, &first, 0);
    let r = NatRange {
        addr: Some((ip(out), ip(out))),
        ports: Some((40000, 40000)),
        ..NatRange::default()
    };
    ct.nat_setup(i.id, Manip::Src, &r).unwrap();
    ct.confirm(i.id, 0).unwrap();
    // A router answers "packet too big" to the NAT address, quoting the translated datagram.
    let quoted = ip_packet(ip(out), ip(s), 17, &udp_hdr(40000, 443, b"quic"), false);
    let ptb = frame("2001:db8:9::1", out, 58, &icmp_hdr(2, 0, 0, 1280, &quoted));
    let t = track(&ct, &ptb, S);
    assert_eq!(
        (t.state, t.dir, t.id),
        (ct_state::RELATED, Dir::Reply, i.id)
    );
    let mut f = ptb.clone();
    ct.nat_rewrite(t.id, t.dir)
        .unwrap()
        .apply(&mut f, &parse(&ptb))
        .unwrap();
    let want = ip_packet(ip(c), ip(s), 17, &udp_hdr(5000, 443, b"quic"), false);
    assert_eq!(
        f,
        frame("2001:db8:9::1", c, 58, &icmp_hdr(2, 0, 0, 1280, &want))
    );
    assert!(checksums_ok(&f));
    // An echo through the same NAT: the ICMPv6 checksum covers the addresses.
    let req = frame(c, s, 58, &icmp_hdr(128, 0, 9, 1, b"x"));
    let e = track(&ct, &req, S);
    ct.nat_setup(e.id, Manip::Src, &snat_to(out)).unwrap();
    let mut f = req.clone();
    ct.nat_rewrite(e.id, Dir::Original)
        .unwrap()
        .apply(&mut f, &parse(&req))
        .unwrap();
    assert!(checksums_ok(&f));
    assert_eq!(
        &f[14 + 8..14 + 24],
        &"2001:db8:ff::1"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets()
    );
}

// --- property test -------------------------------------------------------------------------

mod prop {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Packet {
            from: u8,
            to: u8,
            p: u8,
            sport: u16,
            dport: u16,
            flags: u8,
            dt: u64,
            nat: u8,
        },
        Gc(u64),
        Kill(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (0u8..4, 0u8..4, 0u8..4, 0u16..3, 0u16..3, any::<u8>(), 0u64..40, 0u8..4)
                .prop_map(|(from, to, p, sport, dport, flags, dt, nat)| Op::Packet {
                    from, to, p, sport, dport, flags, dt, nat
                }),
            1 => (0u64..200).prop_map(Op::Gc),
            1 => any::<u8>().prop_map(Op::Kill),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        /// Damaged frames (valid ones with random bytes overwritten, cut at random) never make
        /// tracking or rewriting panic.
        #[test]
        fn damaged_frames_never_panic(
            kind in 0u8..6,
            edits in proptest::collection::vec((0usize..120, any::<u8>()), 0..12),
            cut in 0usize..140,
        ) {
            let quoted = ip_packet(ip("203.0.113.1"), ip("198.51.100.7"), 6, &tcp_hdr(1, 2, SYN, 1, 0, &[]), false);
            let base = match kind {
                0 => tcp("10.0.0.1", 1, "198.51.100.7", 2, SYN, 1, 0),
                1 => udp("10.0.0.1", 1, "198.51.100.7", 2),
                2 => frame("192.0.2.9", "203.0.113.1", 1, &icmp_hdr(3, 3, 0, 0, &quoted)),
                3 => frame("2001:db8::1", "2001:db8::2", 58, &icmp_hdr(1, 0, 0, 0, &quoted)),
                4 => frame("2001:db8::1", "2001:db8::2", 6, &tcp_hdr(1, 2, ACK, 1, 0, b"x")),
                _ => frame("10.0.0.1", "198.51.100.7", 1, &icmp_hdr(8, 0, 5, 1, b"")),
            };
            let ct = table();
            // A NATed connection for the undamaged frame, so rewrites have something to do.
            let i = track(&ct, &base, 0);
            if i.pending {
                let _ = ct.nat_setup(i.id, Manip::Src, &snat_to(if kind == 3 || kind == 4 { "2001:db8::ff" } else { "203.0.113.1" }));
                let _ = ct.confirm(i.id, 0);
            }
            let rw = ct.nat_rewrite(i.id, Dir::Original);
            let mut f = base.clone();
            for (at, b) in edits {
                if let Some(x) = f.get_mut(at) {
                    *x = b;
                }
            }
            f.truncate(cut.max(1));
            let m = parse(&f);
            let t = ct.track(&f, &m, 0, S);
            if let Some(rw) = rw.or_else(|| ct.nat_rewrite(t.id, t.dir)) {
                let _ = rw.apply(&mut f, &m);
            }
            prop_assert!(ct.check_consistency().is_ok());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn random_packets_keep_the_indexes_consistent(ops in proptest::collection::vec(op(), 1..60)) {
            let ct = Conntrack::new(Config { max_entries: 12, ..Config::default() });
            let hosts = ["10.0.0.1", "10.0.0.2", "203.0.113.1", "198.51.100.7"];
            let mut now = 0u64;
            let mut ids = Vec::new();
            for o in ops {
                match o {
                    Op::Packet { from, to, p, sport, dport, flags, dt, nat } => {
                        now += dt * S / 4;
                        let (a, b) = (hosts[usize::from(from)], hosts[usize::from(to)]);
                        let f = match p {
                            0 => tcp(a, 1000 + sport, b, 80 + dport, flags, u32::from(flags), 7),
                            1 => udp(a, 1000 + sport, b, 80 + dport),
                            2 => frame(a, b, 1, &icmp_hdr([8, 0, 3, 11][usize::from(flags % 4)], 0, sport, 1, &ip_packet(ip(b), ip(a), 17, &udp_hdr(80 + dport, 1000 + sport, b""), false))),
                            _ => frame(a, b, 47, &[0, 0, 8, 0]),
                        };
                        let i = track(&ct, &f, now);
                        if i.tracked() {
                            ids.push(i.id);
                            let _ = ct.count_add(1, i.id, now);
                            if let Some(rw) = ct.nat_rewrite(i.id, i.dir) {
                                let mut g = f.clone();
                                let _ = rw.apply(&mut g, &parse(&f));
                            }
                        }
                        if i.pending {
                            match nat {
                                0 => { let _ = ct.nat_setup(i.id, Manip::Src, &snat_to("203.0.113.1")); }
                                1 => { let _ = ct.nat_null_binding(i.id, Manip::Src); }
                                2 => { ct.discard(i.id); continue; }
                                _ => {}
                            }
                            let _ = ct.confirm(i.id, now);
                        }
                    }
                    Op::Gc(n) => { ct.gc(now, n as usize); }
                    Op::Kill(k) => {
                        if let Some(id) = ids.get(usize::from(k) % ids.len().max(1)) {
                            ct.kill(*id);
                        }
                    }
                }
                prop_assert!(ct.check_consistency().is_ok(), "{:?}", ct.check_consistency());
                prop_assert!(ct.len() <= 12);
            }
            for e in ct.entries(now) {
                let _ = e.to_string();
            }
        }
    }
}

/// The default configuration draws its hash seed at random (two tables of one process, and
/// two processes, hash tuples differently); a fixed seed gives the same NAT port offsets.
#[test]
fn default_seeds_are_drawn_at_random() {
    let seeds: std::collections::HashSet<u64> = (0..8).map(|_| Config::default().seed).collect();
    assert_eq!(seeds.len(), 8);
    let fixed = Config {
        seed: 7,
        ..Config::default()
    };
    let (a, b) = (Conntrack::new(fixed), Conntrack::new(fixed));
    let ra: Vec<u64> = (0..4).map(|_| a.random()).collect();
    let rb: Vec<u64> = (0..4).map(|_| b.random()).collect();
    assert_eq!(ra, rb);
}

/// Connections by protocol and state, as metrics read them: TCP by state, UDP by whether it
/// was replied to and assured; expired and unconfirmed entries left out.
#[test]
fn state_counts_by_protocol_and_state() {
    let ct = table();
    handshake(&ct, "192.0.2.1", 1000, "198.51.100.2", 80);
    handshake(&ct, "192.0.2.1", 1001, "198.51.100.2", 80);
    let syn = track(
        &ct,
        &tcp("192.0.2.1", 1002, "198.51.100.2", 80, SYN, 1, 0),
        0,
    );
    ct.confirm(syn.id, 0).unwrap();
    let u = track(&ct, &udp("192.0.2.1", 5353, "198.51.100.2", 53), 0);
    ct.confirm(u.id, 0).unwrap();
    let u2 = track(&ct, &udp("192.0.2.1", 5354, "198.51.100.2", 53), 0);
    ct.confirm(u2.id, 0).unwrap();
    track(&ct, &udp("198.51.100.2", 53, "192.0.2.1", 5354), S);
    // Unconfirmed: not counted.
    track(&ct, &udp("192.0.2.1", 5355, "198.51.100.2", 53), 0);
    assert_eq!(
        ct.state_counts(2 * S),
        vec![
            ("tcp", "ESTABLISHED", 2),
            ("tcp", "SYN_SENT", 1),
            ("udp", "REPLIED", 1),
            ("udp", "UNREPLIED", 1),
        ]
    );
    // Past every timeout: none.
    assert_eq!(ct.state_counts(1_000_000 * S), vec![]);
}

/// Tracking a vector whose lookups were prefetched first gives what tracking it without the
/// prefetch gives: two tables of the same seed, filled past [`PREFETCH_MIN`] with the same
/// connections, then given the same vectors of hits, misses, replies and an invalid packet.
#[test]
fn prefetched_vectors_track_as_without_prefetch() {
    let n = PREFETCH_MIN + 500;
    let flow = |i: usize| {
        let src = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
        (udp(&src, 1000 + (i % 7) as u16, "192.0.2.1", 53), src)
    };
    let cfg = Config {
        seed: 7,
        ..Config::default()
    };
    let (a, b) = (Conntrack::new(cfg), Conntrack::new(cfg));
    for ct in [&a, &b] {
        for i in 0..n {
            let info = track(ct, &flow(i).0, 1);
            ct.confirm(info.id, 1).unwrap();
        }
        assert_eq!(ct.len(), n);
    }
    // Vectors of 64: known flows (every third answered by its reply), new flows, one
    // frame that is no packet.
    let mut frames = Vec::new();
    for i in 0..640usize {
        let k = i * 37 % (n + 200);
        let (f, src) = flow(k);
        frames.push(match i % 3 {
            0 => udp("192.0.2.1", 53, &src, 1000 + (k % 7) as u16),
            _ if i % 50 == 7 => vec![0u8; 20],
            _ => f,
        });
    }
    let metas: Vec<_> = frames.iter().map(|f| parse(f)).collect();
    let (mut established, mut found) = (0, 0);
    for (v, chunk) in frames.chunks(64).enumerate() {
        let now = 10 + v as u64;
        let metas = &metas[v * 64..v * 64 + chunk.len()];
        for (f, m) in chunk.iter().zip(metas) {
            a.prefetch(f, m, 0);
        }
        for (f, m) in chunk.iter().zip(metas) {
            let got = a.track(f, m, 0, now);
            let want = b.track(f, m, 0, now);
            assert_eq!(format!("{got:?}"), format!("{want:?}"));
            established += usize::from(got.state == ct_state::ESTABLISHED);
            found += usize::from(got.id != 0 && !got.pending);
        }
    }
    // About a third are replies; most of the rest are flows of the table.
    assert!(
        established > 150 && found > 500,
        "{established} established, {found} found"
    );
    assert_eq!(a.len(), b.len());
    assert_eq!(a.check_consistency(), b.check_consistency());
}

/// The per-packet counts are exact when threads track at once (each thread counts into its
/// own stripe; `stats` sums them).
#[test]
fn counts_of_threads_tracking_at_once_add_up() {
    let ct = table();
    let flows: Vec<Vec<u8>> = (0..4)
        .map(|i| udp(&format!("10.0.0.{}", i + 1), 1000, "192.0.2.1", 53))
        .collect();
    for f in &flows {
        let info = track(&ct, f, 1);
        ct.confirm(info.id, 1).unwrap();
    }
    let before = ct.stats();
    assert_eq!(before.new, 4);
    std::thread::scope(|s| {
        for t in 0..12 {
            let (ct, f) = (&ct, &flows[t % 4]);
            s.spawn(move || {
                for n in 0..1000 {
                    assert_ne!(track(ct, f, 2 + n).id, 0);
                }
                assert_eq!(track(ct, &[0u8; 10], 2).state, ct_state::INVALID);
            });
        }
    });
    let after = ct.stats();
    assert_eq!(after.found - before.found, 12 * 1000);
    assert_eq!(after.invalid - before.invalid, 12);
    assert_eq!(after.new, 4);
}
