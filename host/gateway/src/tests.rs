//! The gateway end to end on byte vectors: forwarding with TTL/checksum and MAC rewrite, ARP
//! and ND answers, time exceeded, local delivery, drops by reason.

use std::net::Ipv6Addr;

use super::*;

/// client 10.0.1.2 / fd00:1::2 (02:..:00:02) -- veth0 [gateway] veth1 -- server 10.0.2.2 /
/// fd00:2::2 (02:..:02:02); 10.9.0.0/16 behind the server.
const GW: &str = "\
device veth0 mac 02:00:00:00:01:01
device veth1 mac 02:00:00:00:01:02
address veth0 10.0.1.1/24
address veth0 fd00:1::1/64
address veth1 10.0.2.1/24
address veth1 fd00:2::1/64
route 10.9.0.0/16 via 10.0.2.2 dev veth1
neighbour 10.0.2.2 lladdr 02:00:00:00:02:02 dev veth1
neighbour fd00:2::2 lladdr 02:00:00:00:02:02 dev veth1
";

const CLIENT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const V0_MAC: [u8; 6] = [2, 0, 0, 0, 1, 1];
const V1_MAC: [u8; 6] = [2, 0, 0, 0, 1, 2];
const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 2, 2];

fn gw() -> Gateway {
    Gateway::parse(GW, "gw.conf").unwrap()
}

/// A UDP datagram in an Ethernet frame from the client to `dst` with `ttl`, padded to 60 bytes
/// as a short frame on the wire is.
fn udp4(dst: [u8; 4], ttl: u8, to_mac: [u8; 6]) -> Vec<u8> {
    let mut f = to_mac.to_vec();
    f.extend_from_slice(&CLIENT_MAC);
    f.extend_from_slice(&[0x08, 0x00]);
    let mut h = vec![
        0x45, 0, 0, 32, 0xab, 0xcd, 0x40, 0, ttl, 17, 0, 0, 10, 0, 1, 2,
    ];
    h.extend_from_slice(&dst);
    let c = checksum::checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, 12, 0, 0, b'w', b'a', b's', b'p']);
    f.resize(60, 0);
    f
}

fn udp6(dst: &str, hop: u8, to_mac: [u8; 6]) -> Vec<u8> {
    let mut f = to_mac.to_vec();
    f.extend_from_slice(&CLIENT_MAC);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 12, 17, hop]);
    f.extend_from_slice(&"fd00:1::2".parse::<Ipv6Addr>().unwrap().octets());
    f.extend_from_slice(&dst.parse::<Ipv6Addr>().unwrap().octets());
    f.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, 12, 0, 0, b'w', b'a', b's', b'p']);
    f
}

fn dev(g: &Gateway, n: &str) -> DevId {
    g.device(n).unwrap()
}

#[test]
fn forwards_ipv4_with_ttl_checksum_and_macs() {
    let mut g = gw();
    let v0 = dev(&g, "veth0");
    let v1 = dev(&g, "veth1");
    let f = udp4([10, 9, 3, 4], 64, V0_MAC);
    let Action::Transmit { dev: out, frame } = g.route(v0, &f, 0) else {
        panic!("not forwarded");
    };
    assert_eq!(out, v1);
    // Padding dropped: 14 + the datagram's 32 bytes.
    assert_eq!(frame.len(), 46);
    assert_eq!(&frame[..12], &[SERVER_MAC, V1_MAC].concat()[..]);
    assert_eq!(frame[14 + 8], 63, "TTL decremented");
    // The incrementally updated checksum is the one computed from scratch.
    let mut h = frame[14..34].to_vec();
    assert_eq!(checksum::checksum(&h), 0);
    let got = [h[10], h[11]];
    h[10] = 0;
    h[11] = 0;
    assert_eq!(checksum::checksum(&h).to_be_bytes(), got);
    // Everything else is as received.
    assert_eq!(&frame[12..14], &f[12..14]);
    assert_eq!(&frame[14..14 + 8], &f[14..14 + 8]);
    assert_eq!(&frame[14 + 9], &f[14 + 9]);
    assert_eq!(&frame[14 + 12..], &f[14 + 12..46]);
    assert_eq!(g.stats().forwarded, 1);
}

#[test]
fn connected_destination_is_its_own_next_hop() {
    let mut g = gw();
    let v0 = dev(&g, "veth0");
    // 10.0.2.2 is on veth1's subnet: the neighbour entry of the destination itself.
    let f = udp4([10, 0, 2, 2], 2, V0_MAC);
    assert!(
        matches!(g.route(v0, &f, 0), Action::Transmit { frame, .. } if frame[..6] == SERVER_MAC && frame[22] == 1)
    );
    // 10.0.2.3 has no neighbour entry: dropped, and asked for on veth1 (from 10.0.2.1);
    // again within a second: dropped without asking.
    let v1 = dev(&g, "veth1");
    let f = udp4([10, 0, 2, 3], 64, V0_MAC);
    let Action::Resolve { dev: d, frame } = g.route(v0, &f, 0) else {
        panic!("no ARP request");
    };
    assert_eq!(d, v1);
    let req = arp::read(frame).unwrap();
    assert_eq!(frame[..6], [0xff; 6]);
    assert_eq!(
        (req.op, req.sha, req.spa, req.tpa),
        (
            arp::OP_REQUEST,
            V1_MAC,
            "10.0.2.1".parse().unwrap(),
            "10.0.2.3".parse().unwrap()
        )
    );
    assert_eq!(
        g.route(v0, &f, SOLICIT_INTERVAL_NS - 1),
        Action::Drop(DropReason::NoNeighbour)
    );
    assert!(matches!(
        g.route(v0, &f, SOLICIT_INTERVAL_NS),
        Action::Resolve { .. }
    ));
    assert_eq!(g.stats().dropped(DropReason::NoNeighbour), 3);
    assert_eq!(g.stats().solicitations, 2);
}

/// No route: dropped, and an ICMP net unreachable (type 3 code 0) goes back from the input
/// device's address, shaped as the time exceeded (Linux 6.18 sent the same for a router
/// without a default route); an ICMPv6 no route (type 1 code 0) for IPv6.
#[test]
fn no_route_is_answered_unreachable() {
    let mut g = gw();
    let v0 = dev(&g, "veth0");
    let f = udp4([192, 0, 2, 1], 64, V0_MAC);
    let Action::Unreachable { dev: d, frame, .. } = g.route(v0, &f, 0) else {
        panic!("no ICMP error");
    };
    assert_eq!(d, v0);
    assert_eq!(&frame[..12], &[CLIENT_MAC, V0_MAC].concat()[..]);
    assert_eq!(&frame[14 + 12..14 + 20], &[10, 0, 1, 1, 10, 0, 1, 2]);
    assert_eq!((frame[34], frame[35]), (3, 0));
    assert_eq!(checksum::checksum(&frame[34..]), 0);
    assert_eq!(&frame[42..], &f[14..46]);
    let f = udp6("2001:db8::9", 64, V0_MAC);
    let Action::Unreachable { frame, .. } = g.route(v0, &f, 0) else {
        panic!("no ICMPv6 error");
    };
    assert_eq!((frame[54], frame[55]), (1, 0));
    assert_eq!(
        std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&frame[22..38]).unwrap()),
        "fd00:1::1".parse::<Ipv6Addr>().unwrap()
    );
    // The route comes before the TTL: TTL 1 without a route is unreachable, not expired
    // (Linux 6.18 answered so, quoting TTL 1).
    let f = udp4([192, 0, 2, 1], 1, V0_MAC);
    assert!(matches!(g.route(v0, &f, 0), Action::Unreachable { frame, .. } if frame[34] == 3));
    // Not about an ICMP error: dropped without an answer.
    let mut e = udp4([192, 0, 2, 1], 64, V0_MAC);
    e[14 + 9] = 1;
    e[34] = 3;
    let c = {
        let h = &mut e[14..34];
        h[10] = 0;
        h[11] = 0;
        checksum::checksum(h)
    };
    e[24..26].copy_from_slice(&c.to_be_bytes());
    assert_eq!(g.route(v0, &e, 0), Action::Drop(DropReason::NoRoute));
    assert_eq!(g.stats().dropped(DropReason::NoRoute), 4);
    assert_eq!(g.stats().unreachable, 3);
}

#[test]
fn ttl_one_gets_time_exceeded_from_the_input_device_address() {
    let mut g = gw();
    let v0 = dev(&g, "veth0");
    let f = udp4([10, 9, 3, 4], 1, V0_MAC);
    let Action::Reply { dev: d, frame } = g.route(v0, &f, 0) else {
        panic!("no reply");
    };
    assert_eq!(d, v0);
    assert_eq!(&frame[..12], &[CLIENT_MAC, V0_MAC].concat()[..]);
    assert_eq!(&frame[14 + 12..14 + 20], &[10, 0, 1, 1, 10, 0, 1, 2]);
    assert_eq!(&frame[34..36], &[11, 0]);
    // The quote is the datagram as received (TTL 1), without the Ethernet padding.
    assert_eq!(&frame[42..], &f[14..46]);
    assert_eq!(checksum::checksum(&frame[34..]), 0);
    assert_eq!(g.stats().time_exceeded, 1);
    // TTL 0 too.
    let f = udp4([10, 9, 3, 4], 0, V0_MAC);
    assert!(matches!(g.route(v0, &f, 0), Action::Reply { .. }));
}

#[test]
fn local_broadcast_and_other_hosts() {
    let mut g = gw();
    let v0 = dev(&g, "veth0");
    // To the gateway's own address (on the other device, too).
    assert_eq!(
        g.route(v0, &udp4([10, 0, 1, 1], 64, V0_MAC), 0),
        Action::Local
    );
    assert_eq!(
        g.route(v0, &udp4([10, 0, 2, 1], 64, V0_MAC), 0),
        Action::Local
    );
    // Subnet and limited broadcast.
    assert_eq!(
        g.route(v0, &udp4([10, 0, 1, 255], 64, [0xff; 6]), 0),
        Action::Local
    );
    assert_eq!(
        g.route(v0, &udp4([255, 255, 255, 255], 64, [0xff; 6]), 0),
        Action::Local
    );
    // A unicast packet in a broadcast frame is not forwarded.
    assert_eq!(
        g.route(v0, &udp4([10, 9, 0, 1], 64, [0xff; 6]), 0),
        Action::Drop(DropReason::OtherHost)
    );
    // Another host's MAC.
    assert_eq!(
        g.route(v0, &udp4([10, 9, 0, 1], 64, [2, 0, 0, 0, 9, 9]), 0),
        Action::Drop(DropReason::OtherHost)
    );
    assert_eq!(g.stats().local, 4);
}

#[test]
fn bad_headers_and_martians() {
    let mut g = gw();
    let v0 = dev(&g, "veth0");
    let mut f = udp4([10, 9, 3, 4], 64, V0_MAC);
    f[14 + 10] ^= 0xff; // checksum
    assert_eq!(g.route(v0, &f, 0), Action::Drop(DropReason::BadHeader));
    let mut f = udp4([10, 9, 3, 4], 64, V0_MAC);
    f[14 + 2] = 0x40; // total length past the frame
    assert_eq!(g.route(v0, &f, 0), Action::Drop(DropReason::BadHeader));
    let f = udp4([127, 0, 0, 1], 64, V0_MAC);
    assert_eq!(g.route(v0, &f, 0), Action::Drop(DropReason::Martian));
    assert_eq!(
        g.route(v0, &f[..10], 0),
        Action::Drop(DropReason::BadHeader)
    );
    let mut f = udp4([10, 9, 3, 4], 64, V0_MAC);
    f[12] = 0x88; // not IP
    assert_eq!(g.route(v0, &f, 0), Action::Drop(DropReason::NotIp));
    assert_eq!(
        g.route(DevId(7), &f, 0),
        Action::Drop(DropReason::UnknownDevice)
    );
}

#[test]
fn device_down_drops_and_counts() {
    let mut g = gw();
    let v0 = dev(&g, "veth0");
    assert!(g.set_up("veth1", false));
    let f = udp4([10, 9, 3, 4], 64, V0_MAC);
    assert_eq!(g.route(v0, &f, 0), Action::Drop(DropReason::DeviceDown));
    assert_eq!(g.stats().dropped(DropReason::DeviceDown), 1);
    assert!(!g.is_up("veth1"));
    assert!(g.is_up("elsewhere"));
}

#[test]
fn answers_arp_for_its_addresses_and_learns_the_sender() {
    let mut g = gw();
    let v0 = dev(&g, "veth0");
    let mut req = vec![0xff; 6];
    req.extend_from_slice(&CLIENT_MAC);
    req.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    req.extend_from_slice(&CLIENT_MAC);
    req.extend_from_slice(&[10, 0, 1, 2, 0, 0, 0, 0, 0, 0, 10, 0, 1, 1]);
    let Action::Reply { dev: d, frame } = g.route(v0, &req, 5) else {
        panic!("no ARP reply");
    };
    assert_eq!(d, v0);
    #[rustfmt::skip]
    let want = [
        2, 0, 0, 0, 0, 2,   2, 0, 0, 0, 1, 1,   0x08, 0x06,
        0, 1, 0x08, 0, 6, 4, 0, 2,
        2, 0, 0, 0, 1, 1,   10, 0, 1, 1,
        2, 0, 0, 0, 0, 2,   10, 0, 1, 2,
    ];
    assert_eq!(frame, &want[..]);
    let n = g.neighbours().get(v0, "10.0.1.2".parse().unwrap()).unwrap();
    assert_eq!((n.mac, n.permanent, n.updated_ns), (CLIENT_MAC, false, 5));
    // Now the gateway can forward to the client.
    let v1 = dev(&g, "veth1");
    let mut back = udp4([10, 0, 1, 2], 64, V1_MAC);
    back[14 + 12..14 + 16].copy_from_slice(&[10, 0, 2, 2]);
    let c = {
        let h = &mut back[14..34];
        h[10] = 0;
        h[11] = 0;
        checksum::checksum(h)
    };
    back[24..26].copy_from_slice(&c.to_be_bytes());
    back[6..12].copy_from_slice(&SERVER_MAC);
    assert!(
        matches!(g.route(v1, &back, 6), Action::Transmit { dev, frame } if dev == v0 && frame[..6] == CLIENT_MAC)
    );
    // A request for someone else: no answer.
    req[41] = 9;
    assert_eq!(g.route(v0, &req, 7), Action::Local);
    assert_eq!(g.stats().arp_replies, 1);
}

#[test]
fn forwards_ipv6_and_answers_solicitations() {
    let mut g = gw();
    let v0 = dev(&g, "veth0");
    let v1 = dev(&g, "veth1");
    let f = udp6("fd00:2::2", 64, V0_MAC);
    let Action::Transmit { dev: out, frame } = g.route(v0, &f, 0) else {
        panic!("not forwarded");
    };
    assert_eq!(out, v1);
    assert_eq!(&frame[..12], &[SERVER_MAC, V1_MAC].concat()[..]);
    assert_eq!(frame[21], 63);
    assert_eq!(&frame[22..], &f[22..]);
    // Hop limit 1: time exceeded from fd00:1::1.
    let f = udp6("fd00:2::2", 1, V0_MAC);
    let Action::Reply { frame, .. } = g.route(v0, &f, 0) else {
        panic!("no reply");
    };
    assert_eq!(
        std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&frame[22..38]).unwrap()),
        "fd00:1::1".parse::<Ipv6Addr>().unwrap()
    );
    assert_eq!(frame[54], 3);
    // A solicitation for fd00:1::1 gets an advertisement; for fd00:2::1 (veth1's) on veth0
    // it does not (ndisc_recv_ns looks on the receiving device only).
    let ns = nd::tests::solicitation(
        "fd00:1::2".parse().unwrap(),
        "fd00:1::1".parse().unwrap(),
        CLIENT_MAC,
    );
    let Action::Reply { frame, .. } = g.route(v0, &ns, 3) else {
        panic!("no NA");
    };
    assert_eq!(frame[54], nd::NA);
    assert_eq!(&frame[..6], &CLIENT_MAC);
    let ns = nd::tests::solicitation(
        "fd00:1::2".parse().unwrap(),
        "fd00:2::1".parse().unwrap(),
        CLIENT_MAC,
    );
    assert_eq!(g.route(v0, &ns, 3), Action::Local);
    // The solicitation's source was learned.
    assert!(
        g.neighbours()
            .get(v0, "fd00:1::2".parse().unwrap())
            .is_some()
    );
    // The link-local address from the MAC answers too.
    let ll = match link_local(&g.devices()[usize::from(v0.0)]).unwrap() {
        IpAddr::V6(a) => a,
        IpAddr::V4(_) => unreachable!(),
    };
    assert_eq!(ll, "fe80::ff:fe00:101".parse::<Ipv6Addr>().unwrap());
    let ns = nd::tests::solicitation("fe80::2".parse().unwrap(), ll, CLIENT_MAC);
    assert!(matches!(g.route(v0, &ns, 3), Action::Reply { .. }));
    // Link-local destinations are not forwarded.
    let f = udp6("fe80::9", 64, V0_MAC);
    assert_eq!(g.route(v0, &f, 0), Action::Drop(DropReason::Martian));
    assert_eq!(g.stats().nd_replies, 2);
}

#[test]
fn fwd_neigh_decrements_without_a_check() {
    let mut g = gw();
    let f = udp4([10, 9, 3, 4], 0, V0_MAC);
    let Action::Transmit { frame, .. } = g.fwd_neigh("veth1", "10.0.2.2".parse().unwrap(), &f, 0)
    else {
        panic!("not sent");
    };
    assert_eq!(frame[22], 255);
    assert_eq!(checksum::checksum(&frame[14..34]), 0);
    assert!(matches!(
        g.fwd_neigh("veth1", "10.0.2.9".parse().unwrap(), &f, 0),
        Action::Resolve { .. }
    ));
    assert_eq!(
        g.fwd_neigh("veth1", "fd00:2::2".parse().unwrap(), &f, 0),
        Action::Drop(DropReason::NotIp)
    );
}

mod path {
    use super::*;
    use crate::path::Body;
    use wasp_core::Engine;
    use wasp_core::Packet;
    use wasp_ruleset::model::Hook;

    const RULES: &str = r#"
table netdev t {
    chain in0 {
        type filter hook ingress device "veth0" priority 0; policy accept;
        udp dport 7 dup to "mon"
        udp dport 9 fwd to "veth1"
        udp dport 10 fwd ip to 10.0.2.2 device "veth1"
        udp dport 11 fwd to "loopa"
        udp dport 12 drop
    }
    chain out1 {
        type filter hook egress device "veth1" priority 0; policy accept;
        meta mark 0 ip daddr 10.9.9.9 drop
    }
    chain outa {
        type filter hook egress device "loopa" priority 0; policy accept;
        fwd to "loopb"
    }
    chain outb {
        type filter hook egress device "loopb" priority 0; policy accept;
        fwd to "loopa"
    }
}
"#;

    fn with_port(dst: [u8; 4], port: u16) -> Vec<u8> {
        let mut f = udp4(dst, 64, V0_MAC);
        f[36..38].copy_from_slice(&port.to_be_bytes());
        f
    }

    /// A frame sent, made into bytes.
    struct Sent {
        dev: String,
        kind: SendKind,
        frame: Vec<u8>,
    }

    fn run(fw: &mut Forwarder, e: &mut Engine, f: &[u8]) -> (Fate, Vec<Sent>) {
        let (fate, sends) = run_raw(fw, e, f);
        let sent = sends
            .iter()
            .map(|s| Sent {
                dev: s.dev.to_string(),
                kind: s.kind,
                frame: s.frame(f).into_owned(),
            })
            .collect();
        (fate, sent)
    }

    /// `f` as it comes in on veth0.
    fn on_veth0(f: &[u8]) -> Packet<'_> {
        Packet {
            frame: f,
            meta: wasp_wire::parse(f),
            iifname: "veth0",
            mark: 0,
            oifname: "",
            ct: wasp_core::CtMeta::NONE,
            ct_detail: None,
            nftrace: false,
            route: None,
        }
    }

    fn run_raw(fw: &mut Forwarder, e: &mut Engine, f: &[u8]) -> (Fate, Vec<Send>) {
        let p = on_veth0(f);
        let mut res = wasp_core::HookResult::new();
        e.run(
            wasp_core::At::Ingress("veth0"),
            &[p],
            0,
            &mut res,
            None,
            None,
        );
        let o = [res.outcomes[0]];
        let mut way = WayOut::default();
        let fate = fw.after_ingress(e, None, "veth0", f, None, &[], &o[0], 0, &mut way);
        (fate, way.sends)
    }

    #[test]
    fn fwd_dup_route_and_egress() {
        let rs = wasp_ruleset::parse_str(RULES, "p.nft").unwrap();
        let mut e = Engine::compile(&rs).unwrap();
        let mut fw = Forwarder::new(Some(gw()));
        // Routed: out on veth1 with TTL 63.
        let (fate, s) = run(&mut fw, &mut e, &with_port([10, 9, 3, 4], 53));
        assert_eq!(fate, Fate::Sent);
        assert_eq!(
            (s[0].dev.as_str(), s[0].kind, s[0].frame[22]),
            ("veth1", SendKind::Forward, 63)
        );
        // dup: a copy as received on `mon`, and the packet is routed as well.
        let f = with_port([10, 9, 3, 4], 7);
        let (fate, s) = run(&mut fw, &mut e, &f);
        assert_eq!(fate, Fate::Sent);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].dev.as_str(), s[0].kind), ("mon", SendKind::Dup));
        assert_eq!(s[0].frame, f);
        // fwd to: the frame unchanged on veth1, not routed.
        let f = with_port([10, 9, 3, 4], 9);
        let (fate, s) = run(&mut fw, &mut e, &f);
        assert_eq!(fate, Fate::Sent);
        assert_eq!((s.len(), s[0].kind), (1, SendKind::Fwd));
        assert_eq!(s[0].frame, f);
        // fwd ip to: neighbour MAC, TTL decremented.
        let (_, s) = run(&mut fw, &mut e, &with_port([10, 9, 3, 4], 10));
        assert_eq!(&s[0].frame[..6], &SERVER_MAC);
        assert_eq!(s[0].frame[22], 63);
        // The egress chain of veth1 drops 10.9.9.9, routed or stolen.
        let (fate, s) = run(&mut fw, &mut e, &with_port([10, 9, 9, 9], 53));
        assert_eq!((fate, s.len()), (Fate::Dropped(DropReason::Egress), 0));
        let (fate, _) = run(&mut fw, &mut e, &with_port([10, 9, 9, 9], 9));
        assert_eq!(fate, Fate::Dropped(DropReason::Egress));
        // A fwd loop between two egress hooks ends at the recursion limit.
        let (fate, s) = run(&mut fw, &mut e, &with_port([10, 9, 3, 4], 11));
        assert_eq!((fate, s.len()), (Fate::Dropped(DropReason::Recursion), 0));
        // Dropped at ingress: nothing sent.
        let (fate, s) = run(&mut fw, &mut e, &with_port([10, 9, 3, 4], 12));
        assert_eq!((fate, s.len()), (Fate::Dropped(DropReason::Verdict), 0));
        // To the gateway: local.
        let (fate, _) = run(&mut fw, &mut e, &with_port([10, 0, 1, 1], 53));
        assert_eq!(fate, Fate::Local);
        let st = fw.stats();
        assert_eq!(st.sent(SendKind::Forward), 2);
        assert_eq!(st.sent(SendKind::Fwd), 2);
        assert_eq!(st.sent(SendKind::Dup), 1);
        assert_eq!(st.lost(DropReason::Egress), 2);
        assert_eq!(st.lost(DropReason::Recursion), 1);
        assert_eq!(st.local, 1);
        assert_eq!(st.by_device.get("veth1"), Some(&4));
        // A device that is down sends nothing.
        fw.gateway_mut().unwrap().set_up("veth1", false);
        let (fate, _) = run(&mut fw, &mut e, &with_port([10, 9, 3, 4], 9));
        assert_eq!(fate, Fate::Dropped(DropReason::DeviceDown));
    }

    /// Forwarded frames are described, not copied: the gateway's forward and `fwd ip to` as
    /// the input with a rewrite, `fwd to`/`dup` as the input itself; written into a send
    /// buffer they are the bytes [`Gateway::route`] makes.
    #[test]
    fn forwarded_frames_are_the_input_rewritten_in_place() {
        let rs = wasp_ruleset::parse_str(RULES, "p.nft").unwrap();
        let mut e = Engine::compile(&rs).unwrap();
        let mut fw = Forwarder::new(Some(gw()));
        // Routed, with Ethernet padding (the IP packet is shorter than the frame): not sent.
        let mut f = with_port([10, 9, 3, 4], 53);
        f.extend_from_slice(&[0xee; 4]);
        let (_, s) = run_raw(&mut fw, &mut e, &f);
        let Body::Input {
            len,
            rewrite: Some(r),
        } = s[0].body
        else {
            panic!("not in place: {:?}", s[0].body);
        };
        assert_eq!(len, 14 + usize::from(u16::from_be_bytes([f[16], f[17]])));
        assert!(len < f.len());
        let mut buf = vec![0xaa; s[0].body.len(&f)];
        s[0].body.write(&f, &mut buf);
        let mut g = gw();
        let v0 = dev(&g, "veth0");
        let Action::Transmit { frame: want, .. } = g.route(v0, &f, 0) else {
            panic!("not forwarded");
        };
        assert_eq!(buf, want);
        assert_eq!(r.to_frame(&f), want);
        // `dup` and `fwd to`: the input, whole; `fwd ip to`: rewritten.
        let f = with_port([10, 9, 3, 4], 7);
        let (_, s) = run_raw(&mut fw, &mut e, &f);
        assert_eq!(
            s[0].body,
            Body::Input {
                len: f.len(),
                rewrite: None
            }
        );
        let (_, s) = run_raw(&mut fw, &mut e, &with_port([10, 9, 3, 4], 10));
        assert!(matches!(
            s[0].body,
            Body::Input {
                rewrite: Some(_),
                ..
            }
        ));
        // The gateway's own frames (an ICMP time exceeded) are made, not described.
        let mut f = with_port([10, 9, 3, 4], 53);
        f[22] = 1;
        f[24..26].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        let (fate, s) = run_raw(&mut fw, &mut e, &f);
        assert_eq!(fate, Fate::Replied);
        assert!(matches!(s[0].body, Body::Owned(_)));
    }

    #[test]
    fn without_a_gateway_accepted_packets_are_local() {
        let rs = wasp_ruleset::parse_str(RULES, "p.nft").unwrap();
        let mut e = Engine::compile(&rs).unwrap();
        let mut fw = Forwarder::new(None);
        let (fate, s) = run(&mut fw, &mut e, &with_port([10, 9, 3, 4], 53));
        assert_eq!((fate, s.len()), (Fate::Local, 0));
        let (fate, s) = run(&mut fw, &mut e, &with_port([10, 9, 3, 4], 9));
        assert_eq!((fate, s[0].dev.as_str()), (Fate::Sent, "veth1"));
        let (fate, _) = run(&mut fw, &mut e, &with_port([10, 9, 3, 4], 10));
        assert_eq!(fate, Fate::Dropped(DropReason::NoNeighbour));
    }

    /// A vector's last sends run their devices' egress hooks together (one hook call per
    /// device), yet every packet ends as it does alone: the same fate, the same frames in the
    /// same order, the same counts, `done` called in packet order. The mix: routed, dropped
    /// and `dup`ed at egress, `fwd` and `dup` at ingress (their egress hooks run at once),
    /// an egress `fwd` loop, dropped at ingress, local.
    #[test]
    fn a_vector_through_egress_hooks_ends_as_its_packets_alone() {
        let rules = RULES.replace(
            "meta mark 0 ip daddr 10.9.9.9 drop",
            "meta mark 0 ip daddr 10.9.9.9 drop\n        udp dport 55 dup to \"mon\"",
        );
        let mut frames = Vec::new();
        for dst in [[10, 9, 3, 4], [10, 9, 9, 9], [10, 0, 1, 1], [10, 9, 3, 5]] {
            for port in [53u16, 7, 9, 10, 11, 12, 55] {
                frames.push(with_port(dst, port));
            }
        }
        // Shuffled (a fixed permutation), so that kinds alternate within the vector.
        let n = frames.len();
        let frames: Vec<Vec<u8>> = (0..n).map(|i| frames[(i * 11) % n].clone()).collect();
        let compile = || {
            let rs = wasp_ruleset::parse_str(&rules, "v.nft").unwrap();
            Engine::compile(&rs).unwrap()
        };
        // Alone: one packet per call.
        let (mut e1, mut fw1) = (compile(), Forwarder::new(Some(gw())));
        // A packet's fate and what it sent: (device, kind, bytes) in order.
        type Ending = (Fate, Vec<(String, SendKind, Vec<u8>)>);
        let alone: Vec<Ending> = frames
            .iter()
            .map(|f| {
                let (fate, sent) = run(&mut fw1, &mut e1, f);
                let sent = sent.into_iter().map(|s| (s.dev, s.kind, s.frame)).collect();
                (fate, sent)
            })
            .collect();
        // As one vector.
        let (mut e2, mut fw2) = (compile(), Forwarder::new(Some(gw())));
        let pkts: Vec<Packet<'_>> = frames.iter().map(|f| on_veth0(f)).collect();
        let mut res = wasp_core::HookResult::new();
        e2.run(
            wasp_core::At::Ingress("veth0"),
            &pkts,
            0,
            &mut res,
            None,
            None,
        );
        let decided: Vec<Decided<'_>> = pkts
            .iter()
            .zip(&res.outcomes)
            .map(|(p, o)| Decided {
                frame: p.frame,
                meta: Some(&p.meta),
                dups: &[],
                outcome: o,
                nftrace: false,
            })
            .collect();
        let mut way = WayOut::default();
        let mut together = Vec::new();
        fw2.vector(
            &mut e2,
            None,
            "veth0",
            &decided,
            0,
            &mut way,
            None,
            |i, fate, way: &mut WayOut| {
                assert_eq!(i, together.len(), "done in packet order");
                let sent = way
                    .sends
                    .drain(..)
                    .map(|s| (s.dev.to_string(), s.kind, s.frame(&frames[i]).into_owned()))
                    .collect::<Vec<_>>();
                together.push((fate, sent));
            },
        );
        assert_eq!(together.len(), n);
        for (i, (a, t)) in alone.iter().zip(&together).enumerate() {
            assert_eq!(a, t, "packet {i}");
        }
        assert_eq!(fw1.stats(), fw2.stats());
        for dev in ["veth1", "loopa", "loopb"] {
            assert_eq!(
                e1.chain_stats(Hook::Egress, dev),
                e2.chain_stats(Hook::Egress, dev),
                "{dev}"
            );
        }
        // The mix is what it claims to be.
        let st = fw2.stats();
        assert_eq!(st.local, 3);
        assert_eq!(st.sent(SendKind::Forward), 6);
        assert_eq!(st.sent(SendKind::Fwd), 6);
        assert_eq!(st.sent(SendKind::Dup), 6);
        assert_eq!(st.lost(DropReason::Egress), 5);
        assert_eq!(st.lost(DropReason::Recursion), 4);
    }
}

/// Checked on Linux 6.18 (nft 1.0.6, veths in a namespace): a packet that `fwd to "y1"` or
/// `dup to "y1"` sends from y0's ingress hook meets y1's egress hook (with `meta len` the whole
/// frame: 52 bytes for 38 at ingress); a packet bounced between two egress hooks by `fwd` passes
/// y2's hook twice and y3's once, then nf_dup_skb_recursion stops it.
mod kernel_facts {
    use super::*;
    use wasp_core::Engine;
    use wasp_core::Packet;
    use wasp_ruleset::model::Hook;

    const RULES: &str = r#"table netdev t {
  chain in0 { type filter hook ingress device "y0" priority 0; policy accept;
    udp dport 1111 counter fwd to "y1"
    udp dport 2222 counter fwd to "y2"
    udp dport 3333 counter dup to "y1"
  }
  chain e1 { type filter hook egress device "y1" priority 0; policy accept;
    udp dport { 1111, 3333 } counter
  }
  chain e2 { type filter hook egress device "y2" priority 0; policy accept;
    udp dport 2222 counter fwd to "y3"
  }
  chain e3 { type filter hook egress device "y3" priority 0; policy accept;
    udp dport 2222 counter fwd to "y2"
  }
}
"#;

    #[test]
    fn egress_hooks_see_fwd_and_dup_and_the_recursion_limit() {
        let rs = wasp_ruleset::parse_str(RULES, "k.nft").unwrap();
        let mut e = Engine::compile(&rs).unwrap();
        let mut fw = Forwarder::new(None);
        for port in [1111u16, 2222, 3333] {
            let mut f = udp4([10, 5, 0, 2], 64, V0_MAC);
            f[36..38].copy_from_slice(&port.to_be_bytes());
            let p = Packet {
                frame: &f,
                meta: wasp_wire::parse(&f),
                iifname: "y0",
                mark: 0,
                oifname: "",
                ct: wasp_core::CtMeta::NONE,
                ct_detail: None,
                nftrace: false,
                route: None,
            };
            let mut res = wasp_core::HookResult::new();
            e.run(wasp_core::At::Ingress("y0"), &[p], 0, &mut res, None, None);
            let o = [res.outcomes[0]];
            let mut way = WayOut::default();
            fw.after_ingress(&mut e, None, "y0", &f, None, &[], &o[0], 0, &mut way);
        }
        let seen = |e: &Engine, d: &str| e.chain_stats(Hook::Egress, d)[0].packets;
        assert_eq!(seen(&e, "y1"), 2);
        assert_eq!(seen(&e, "y2"), 2);
        assert_eq!(seen(&e, "y3"), 1);
        assert_eq!(fw.stats().lost(DropReason::Recursion), 1);
        assert_eq!(fw.stats().by_device.get("y1"), Some(&2));
    }

    /// Linux 6.18: at y1's egress hook a frame `fwd` sent from y0's ingress has no input
    /// device (`iifname != "y0"` matched, `iifname "y0"` did not), keeps the mark set at
    /// ingress (`meta mark 7` matched), and `oifname` is y1.
    #[test]
    fn egress_sees_the_mark_and_no_input_device() {
        let rules = r#"table netdev t {
  chain in0 { type filter hook ingress device "y0" priority 0; policy accept;
    udp dport 1111 meta mark set 7 fwd to "y1"
  }
  chain e1 { type filter hook egress device "y1" priority 0; policy drop;
    meta iifname "y0" drop
    meta mark 7 meta oifname "y1" accept
  }
}
"#;
        let rs = wasp_ruleset::parse_str(rules, "k.nft").unwrap();
        let mut e = Engine::compile(&rs).unwrap();
        let mut fw = Forwarder::new(None);
        let mut f = udp4([10, 5, 0, 2], 64, V0_MAC);
        f[36..38].copy_from_slice(&1111u16.to_be_bytes());
        let p = Packet {
            frame: &f,
            meta: wasp_wire::parse(&f),
            iifname: "y0",
            mark: 0,
            oifname: "",
            ct: wasp_core::CtMeta::NONE,
            ct_detail: None,
            nftrace: false,
            route: None,
        };
        let mut res = wasp_core::HookResult::new();
        e.run(wasp_core::At::Ingress("y0"), &[p], 0, &mut res, None, None);
        let o = [res.outcomes[0]];
        assert_eq!(o[0].mark, 7);
        let mut way = WayOut::default();
        let fate = fw.after_ingress(&mut e, None, "y0", &f, None, &[], &o[0], 0, &mut way);
        let sends = way.sends;
        assert_eq!(fate, Fate::Sent);
        assert_eq!(sends.len(), 1);
        let st = e.chain_stats(Hook::Egress, "y1");
        assert_eq!((st[0].packets, st[0].accepted, st[0].dropped), (1, 1, 0));
    }
}

#[test]
fn resolves_unknown_next_hops_and_learns_the_answers() {
    let mut g = gw();
    let v0 = dev(&g, "veth0");
    let v1 = dev(&g, "veth1");
    let host_mac = [2, 0, 0, 0, 2, 3];
    // IPv4: the ARP request for 10.0.2.3 is answered; the next packet passes.
    let f = udp4([10, 0, 2, 3], 64, V0_MAC);
    assert!(matches!(g.route(v0, &f, 0), Action::Resolve { .. }));
    let mut reply = V1_MAC.to_vec();
    reply.extend_from_slice(&host_mac);
    reply.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 2]);
    reply.extend_from_slice(&host_mac);
    reply.extend_from_slice(&[10, 0, 2, 3]);
    reply.extend_from_slice(&V1_MAC);
    reply.extend_from_slice(&[10, 0, 2, 1]);
    assert_eq!(g.route(v1, &reply, 10), Action::Local);
    assert!(
        matches!(g.route(v0, &f, 20), Action::Transmit { dev, frame } if dev == v1 && frame[..6] == host_mac)
    );
    // IPv6: a solicitation for fd00:2::3 from fd00:2::1, answered by an advertisement.
    let f = udp6("fd00:2::3", 64, V0_MAC);
    let Action::Resolve { dev: d, frame } = g.route(v0, &f, 0) else {
        panic!("no solicitation");
    };
    assert_eq!(d, v1);
    let ns = nd::read(frame).unwrap();
    let t: Ipv6Addr = "fd00:2::3".parse().unwrap();
    assert_eq!(
        (ns.src, ns.target, ns.sllao),
        ("fd00:2::1".parse().unwrap(), t, Some(V1_MAC))
    );
    let mut na = Vec::new();
    nd::advertise(&ns, V1_MAC, host_mac, &mut na);
    assert_eq!(g.route(v1, &na, 30), Action::Local);
    assert!(
        matches!(g.route(v0, &f, 40), Action::Transmit { dev, frame } if dev == v1 && frame[..6] == host_mac)
    );
    // An advertisement nobody asked for teaches nothing.
    let stranger = nd::Solicitation {
        src: "fd00:2::1".parse().unwrap(),
        target: "fd00:2::77".parse().unwrap(),
        sllao: Some(V1_MAC),
    };
    nd::advertise(&stranger, V1_MAC, host_mac, &mut na);
    assert_eq!(g.route(v1, &na, 50), Action::Local);
    assert!(
        g.neighbours()
            .get(v1, "fd00:2::77".parse().unwrap())
            .is_none()
    );
}

mod no_panic {
    use super::*;
    use proptest::prelude::*;

    fn seeds() -> Vec<Vec<u8>> {
        vec![
            udp4([10, 9, 3, 4], 64, V0_MAC),
            udp4([10, 9, 3, 4], 1, V0_MAC),
            udp6("fd00:2::2", 64, V0_MAC),
            udp6("fd00:2::2", 1, V0_MAC),
            nd::tests::solicitation(
                "fd00:1::2".parse().unwrap(),
                "fd00:1::1".parse().unwrap(),
                CLIENT_MAC,
            ),
        ]
    }

    proptest! {
        /// Any bytes, and valid frames with bytes changed or cut: an action, never a panic.
        #[test]
        fn any_frame_gets_an_action(
            raw in proptest::collection::vec(any::<u8>(), 0..120),
            seed in 0usize..5,
            edits in proptest::collection::vec((0usize..100, any::<u8>()), 0..6),
            cut in 0usize..100,
        ) {
            let mut g = gw();
            let v0 = dev(&g, "veth0");
            let _ = g.route(v0, &raw, 0);
            let mut f = seeds()[seed].clone();
            for (at, b) in edits {
                if let Some(x) = f.get_mut(at) {
                    *x = b;
                }
            }
            let _ = g.route(v0, &f, 1);
            let _ = g.route(v0, &f[..cut.min(f.len())], 2);
            let _ = g.fwd_neigh("veth1", "10.0.2.2".parse().unwrap(), &f, 3);
            let _ = g.fwd_neigh("veth1", "fd00:2::2".parse().unwrap(), &f[..cut.min(f.len())], 4);
        }

        /// Lines of the file's words in any order: a gateway or an error, never a panic.
        #[test]
        fn any_words_parse_or_err(
            lines in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::sample::select(vec![
                        "device", "address", "route", "neighbour", "via", "dev", "lladdr",
                        "mac", "down", "up", "default", "veth0", "veth1", "10.0.1.1/24",
                        "10.0.1.2", "fd00::1/64", "fd00::2", "fe80::1", "0.0.0.0/0",
                        "02:00:00:00:00:01", "#", "é", "",
                    ]),
                    0..8,
                ),
                0..8,
            )
        ) {
            let text: Vec<String> = lines.iter().map(|l| l.join(" ")).collect();
            let _ = Gateway::parse(&text.join("\n"), "fuzz.conf");
        }

        /// Any text as a gateway file: a gateway or an error, never a panic.
        #[test]
        fn any_text_parses_or_errs(text in "[a-z0-9:./# \n-]{0,200}") {
            let _ = Gateway::parse(&text, "fuzz.conf");
        }
    }
}

#[test]
fn a_device_without_a_mac_learns_it_from_its_first_unicast_frame() {
    let text = GW.replace("device veth0 mac 02:00:00:00:01:01\n", "");
    let mut g = Gateway::parse(&text, "gw.conf").unwrap();
    let v0 = dev(&g, "veth0");
    assert_eq!(g.devices()[usize::from(v0.0)].mac, None);
    // A broadcast teaches nothing; the first unicast frame does, and is forwarded.
    assert_eq!(
        g.route(v0, &udp4([10, 0, 1, 255], 64, [0xff; 6]), 0),
        Action::Local
    );
    assert_eq!(g.devices()[usize::from(v0.0)].mac, None);
    let f = udp4([10, 9, 3, 4], 64, [2, 0, 0, 0, 0x0b, 1]);
    assert!(matches!(g.route(v0, &f, 0), Action::Transmit { .. }));
    assert_eq!(
        g.devices()[usize::from(v0.0)].mac,
        Some([2, 0, 0, 0, 0x0b, 1])
    );
    // From then on, other MACs are other hosts'.
    let f = udp4([10, 9, 3, 4], 64, [2, 0, 0, 0, 0x0b, 2]);
    assert_eq!(g.route(v0, &f, 0), Action::Drop(DropReason::OtherHost));
}

/// Longer than the output device's MTU: IPv4 with DF gets fragmentation needed (type 3 code 4,
/// the MTU in the header's last 16 bits, RFC 1191), without DF it is dropped (not fragmented
/// yet); IPv6 gets packet too big (type 2, the MTU in 32 bits). A packet of exactly the MTU
/// passes.
#[test]
fn too_big_for_the_output_device() {
    let text = GW.replace(
        "device veth1 mac 02:00:00:00:01:02",
        "device veth1 mac 02:00:00:00:01:02 mtu 1280",
    );
    let mut g = Gateway::parse(&text, "gw.conf").unwrap();
    let v0 = dev(&g, "veth0");
    assert_eq!(g.devices()[1].mtu, Some(1280));
    let big4 = |len: usize, df: bool| {
        let mut f = udp4([10, 9, 3, 4], 64, V0_MAC);
        f.truncate(14 + 28);
        f.resize(14 + len, 0xab);
        f[16..18].copy_from_slice(&(len as u16).to_be_bytes());
        f[20] = if df { 0x40 } else { 0 };
        f[24] = 0;
        f[25] = 0;
        let c = checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f
    };
    assert!(matches!(
        g.route(v0, &big4(1280, true), 0),
        Action::Transmit { .. }
    ));
    let f = big4(1281, true);
    let Action::Unreachable {
        dev: d,
        frame,
        reason,
    } = g.route(v0, &f, 0)
    else {
        panic!("no fragmentation needed");
    };
    assert_eq!((d, reason), (v0, DropReason::TooBig));
    assert_eq!(&frame[34..36], &[3, 4]);
    assert_eq!(&frame[38..42], &[0, 0, 0x05, 0x00]);
    assert_eq!(checksum::checksum(&frame[34..]), 0);
    assert_eq!(
        g.route(v0, &big4(1281, false), 0),
        Action::Drop(DropReason::TooBig)
    );
    let mut f6 = udp6("fd00:2::2", 64, V0_MAC);
    f6.resize(14 + 40 + 1300, 0xcd);
    f6[18..20].copy_from_slice(&1300u16.to_be_bytes());
    let Action::Unreachable { frame, reason, .. } = g.route(v0, &f6, 0) else {
        panic!("no packet too big");
    };
    assert_eq!(reason, DropReason::TooBig);
    assert_eq!((frame[54], frame[55]), (2, 0));
    assert_eq!(&frame[58..62], &1280u32.to_be_bytes());
    assert_eq!(frame.len() - 14, 1280);
    assert_eq!(g.stats().dropped(DropReason::TooBig), 3);
    assert_eq!(g.stats().too_big, 2);
    // The daemon sets it from the port.
    assert!(g.set_mtu("veth1", 9000));
    assert!(matches!(g.route(v0, &f6, 0), Action::Transmit { .. }));
    let e = Gateway::parse("device veth0 mtu 12\n", "gw.conf")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("gw.conf:1:18: error: expected an MTU"), "{e}");
}

/// The way out of a packet whose `dup`s ran before later plugin edits: each target with a copy
/// (`DupCopy`, the packet as it was at its `dup`) gets that copy, the others the frame the walk
/// ended with; the packet itself, accepted without a gateway, is delivered to the host side.
/// The copies come in the order of the targets (nft_dup_netdev_eval sends at the statement).
#[test]
fn each_dup_target_gets_its_copy_and_the_rest_the_final_frame() {
    let rules = "table netdev t {\n chain c {\n  type filter hook ingress device \"eth0\" priority 0; policy accept;\n  dup to \"z\" dup to \"x\" dup to \"y\"\n }\n}\n";
    let rs = wasp_ruleset::parse_str(rules, "dup.nft").unwrap();
    let mut e = wasp_core::Engine::compile(&rs).unwrap();
    let names: Vec<String> = e.out_targets().iter().map(|t| t.dev.to_string()).collect();
    assert_eq!(names, ["z", "x", "y"]);
    let received = vec![1u8; 60];
    let at_x = vec![2u8; 60];
    let last = vec![3u8; 60];
    let copies = [
        wasp_core::DupCopy {
            packet: 0,
            target: wasp_core::OutId(0),
            frame: received.clone(),
        },
        wasp_core::DupCopy {
            packet: 0,
            target: wasp_core::OutId(1),
            frame: at_x.clone(),
        },
    ];
    let outcome = wasp_core::Outcome {
        dup: 0b111,
        ..wasp_core::Outcome::unseen(0)
    };
    let mut fw = Forwarder::new(None);
    let mut way = WayOut::default();
    let fate = fw.after_ingress(
        &mut e, None, "eth0", &last, None, &copies, &outcome, 0, &mut way,
    );
    assert_eq!(fate, Fate::Local);
    let sent: Vec<(String, SendKind, Vec<u8>)> = way
        .sends
        .iter()
        .map(|s| (s.dev.to_string(), s.kind, s.frame(&last).into_owned()))
        .collect();
    assert_eq!(
        sent,
        [
            ("z".to_string(), SendKind::Dup, received),
            ("x".to_string(), SendKind::Dup, at_x),
            ("y".to_string(), SendKind::Dup, last.clone()),
        ]
    );
}
