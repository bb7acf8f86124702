//! Geneve tunnel devices on the IP path: decapsulation on receive, encapsulation on send, and
//! a flowtable that caches both (the fast path's frames equal the slow path's, byte for byte
//! where the packets agree, with lengths and checksums right from scratch).

use std::net::{IpAddr, Ipv4Addr};

use super::netfilter_tests::{ACK, FIN, PSH, SYN, read, rig_with, tcp};
use super::path::{Fate, SendKind};
use super::tunnel::{GENEVE_PORT, flow_src_port, src_port};
use super::{Gateway, checksum};

/// The remote VTEP 192.0.2.2 on trunk0, its overlay host 10.20.0.2 behind gnv0 (VNI 11); the
/// LAN host 10.30.0.2 on lan0.
const GW: &str = "\
device trunk0 mac 02:00:00:00:00:0a mtu 1500
device lan0 mac 02:00:00:00:00:0b mtu 1500
address trunk0 192.0.2.1/24
neighbour 192.0.2.2 lladdr 02:00:00:00:0a:02 dev trunk0
tunnel gnv0 geneve id 11 remote 192.0.2.2 dev trunk0
device gnv0 mac 02:00:00:00:00:0c
address gnv0 10.20.0.1/24
neighbour 10.20.0.2 lladdr 02:00:00:00:0c:02 dev gnv0
address lan0 10.30.0.1/24
neighbour 10.30.0.2 lladdr 02:00:00:00:0b:02 dev lan0
";

const RULES: &str = r#"
table inet filter {
    flowtable ft {
        hook ingress priority 0; devices = { trunk0, lan0 }; counter;
    }
    chain forward {
        type filter hook forward priority filter; policy drop;
        ct state established meta l4proto tcp flow add @ft
        ct state established accept
        iifname "gnv0" oifname "lan0" ct state new accept
    }
}
"#;

const TRUNK: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];
const LAN: [u8; 6] = [2, 0, 0, 0, 0, 0x0b];
const GNV: [u8; 6] = [2, 0, 0, 0, 0, 0x0c];
const VTEP: [u8; 6] = [2, 0, 0, 0, 0x0a, 2];
const REMOTE_MAC: [u8; 6] = [2, 0, 0, 0, 0x0c, 2];
const HOST_MAC: [u8; 6] = [2, 0, 0, 0, 0x0b, 2];
const REMOTE: [u8; 4] = [10, 20, 0, 2];
const HOST: [u8; 4] = [10, 30, 0, 2];

/// `inner` in Geneve from the remote VTEP 192.0.2.2 to 192.0.2.1 (UDP 50000 > 6081, checksum
/// 0), VNI `vni`, with `options` (encoded, a multiple of 4 bytes).
fn geneve(vni: u32, src: [u8; 4], options: &[u8], inner: &[u8]) -> Vec<u8> {
    let mut f = TRUNK.to_vec();
    f.extend_from_slice(&VTEP);
    f.extend_from_slice(&[0x08, 0x00]);
    let udp_len = 8 + 8 + options.len() + inner.len();
    let total = 20 + udp_len;
    let mut ip = vec![
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        1,
        0,
        0,
        64,
        17,
        0,
        0,
    ];
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&[192, 0, 2, 1]);
    let c = checksum::checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&50000u16.to_be_bytes());
    f.extend_from_slice(&GENEVE_PORT.to_be_bytes());
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&[(options.len() / 4) as u8, 0, 0x65, 0x58]);
    f.extend_from_slice(&(vni << 8).to_be_bytes());
    f.extend_from_slice(options);
    f.extend_from_slice(inner);
    f
}

/// The remote host's segment to the LAN host's port 22, as it leaves its VTEP.
fn remote(flags: u8, payload: &[u8]) -> Vec<u8> {
    let inner = tcp(REMOTE_MAC, GNV, REMOTE, HOST, 40000, 22, flags, 64, payload);
    // One option (class 0x0102, type 0x80, 4 bytes): dropped with the outer headers.
    geneve(11, [192, 0, 2, 2], &[1, 2, 0x80, 1, 0, 0, 0, 7], &inner)
}

/// The LAN host's answer.
fn host(flags: u8, payload: &[u8]) -> Vec<u8> {
    tcp(HOST_MAC, LAN, HOST, REMOTE, 22, 40000, flags, 64, payload)
}

/// Check a frame sent on trunk0 as the tunnel's Geneve: outer headers (MACs, addresses, UDP
/// ports, lengths, IPv4 checksum from scratch, VNI 11, Ethernet inside); the inner frame.
fn outer(f: &[u8]) -> &[u8] {
    assert_eq!(
        (&f[0..6], &f[6..12], &f[12..14]),
        (&VTEP[..], &TRUNK[..], &[8u8, 0][..])
    );
    let ip = &f[14..34];
    assert_eq!(checksum::checksum(ip), 0, "outer IPv4 checksum");
    assert_eq!(
        usize::from(u16::from_be_bytes([ip[2], ip[3]])),
        f.len() - 14
    );
    assert_eq!(
        (ip[8], ip[9], &ip[12..16], &ip[16..20]),
        (64, 17, &[192u8, 0, 2, 1][..], &[192u8, 0, 2, 2][..])
    );
    let udp = &f[34..42];
    let inner = &f[50..];
    let sport = u16::from_be_bytes([udp[0], udp[1]]);
    assert_eq!(sport, src_port(inner), "source port from the inner flow");
    assert!((32768..61000).contains(&sport));
    assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), GENEVE_PORT);
    assert_eq!(
        usize::from(u16::from_be_bytes([udp[4], udp[5]])),
        f.len() - 34
    );
    assert_eq!(&udp[6..8], &[0, 0], "UDP checksum 0 over IPv4");
    assert_eq!(
        &f[42..50],
        &[0, 0, 0x65, 0x58, 0, 0, 11, 0],
        "Geneve: no options, VNI 11"
    );
    inner
}

#[test]
fn a_tunnel_device_decapsulates_encapsulates_and_its_flows_are_offloaded_with_the_tunnel() {
    let mut r = rig_with(GW, RULES);
    // SYN: decapsulated (option and all), routed to the LAN host.
    let (fate, sent) = r.send("trunk0", &remote(SYN, b""), 1.0);
    assert_eq!(fate, Fate::Sent);
    assert_eq!(sent.len(), 1);
    let (dev, kind, f) = &sent[0];
    assert_eq!((dev.as_str(), *kind), ("lan0", SendKind::Forward));
    assert_eq!((&f[0..6], &f[6..12]), (&HOST_MAC[..], &LAN[..]));
    assert_eq!(
        read(f),
        (
            Ipv4Addr::from(REMOTE),
            40000,
            Ipv4Addr::from(HOST),
            22,
            63,
            true,
            true
        )
    );
    // SYN-ACK: encapsulated to the remote VTEP.
    let (fate, sent) = r.send("lan0", &host(SYN | ACK, b""), 1.1);
    assert_eq!(fate, Fate::Sent);
    let (dev, kind, slow) = &sent[0];
    assert_eq!((dev.as_str(), *kind), ("trunk0", SendKind::Forward));
    let inner = outer(slow);
    assert_eq!((&inner[0..6], &inner[6..12]), (&REMOTE_MAC[..], &GNV[..]));
    assert_eq!(
        read(inner),
        (
            Ipv4Addr::from(HOST),
            22,
            Ipv4Addr::from(REMOTE),
            40000,
            63,
            true,
            true
        )
    );
    assert_eq!(
        src_port(inner),
        flow_src_port(IpAddr::from(HOST), IpAddr::from(REMOTE), 6, 22, 40000)
    );
    // ACK: established, offloaded with the tunnel in both directions' keys and routes.
    let (fate, _) = r.send("trunk0", &remote(ACK, b""), 1.2);
    assert_eq!(fate, Fate::Sent);
    let flows = r.nf.flowtables()[0].flows(1_300_000_000);
    assert_eq!(flows.len(), 1);
    let k = flows[0].keys;
    let g = r.fw.gateway().unwrap();
    assert_eq!(
        (k[0].iif, k[0].tun_id),
        (g.device("trunk0").unwrap().0, Some(11))
    );
    assert_eq!((k[1].iif, k[1].tun_id), (g.device("lan0").unwrap().0, None));
    // Data from the remote: the fast path strips the outer headers.
    let (_, sent) = r.send("trunk0", &remote(ACK | PSH, b"ssh"), 1.3);
    let (dev, kind, f) = &sent[0];
    assert_eq!((dev.as_str(), *kind), ("lan0", SendKind::Flow));
    let mut want = tcp(
        REMOTE_MAC,
        GNV,
        REMOTE,
        HOST,
        40000,
        22,
        ACK | PSH,
        63,
        b"ssh",
    );
    want[0..6].copy_from_slice(&HOST_MAC);
    want[6..12].copy_from_slice(&LAN);
    // The hand-made frame has TTL 63 with its own checksum: equal to the fast path's.
    assert_eq!(f, &want);
    // The same inner packet in Geneve with VNI 11 from another peer is not the flow's: not
    // forwarded by the fast path, and only delivered locally by the slow one (no tunnel of
    // the gateway has that remote).
    let spoof = geneve(
        11,
        [192, 0, 2, 3],
        &[],
        &tcp(
            REMOTE_MAC,
            GNV,
            REMOTE,
            HOST,
            40000,
            22,
            ACK | PSH,
            64,
            b"ssh",
        ),
    );
    let (fate, sent) = r.send("trunk0", &spoof, 1.35);
    assert_eq!((fate, sent.len()), (Fate::Local, 0));
    // Data from the host: the fast path adds the cached outer header, the slow path's.
    let (_, sent) = r.send("lan0", &host(ACK | PSH, b"banner"), 1.4);
    let (dev, kind, fast) = &sent[0];
    assert_eq!((dev.as_str(), *kind), ("trunk0", SendKind::Flow));
    let inner = outer(fast);
    assert_eq!(
        read(inner),
        (
            Ipv4Addr::from(HOST),
            22,
            Ipv4Addr::from(REMOTE),
            40000,
            63,
            true,
            true
        )
    );
    for (i, (a, b)) in slow[..50].iter().zip(&fast[..50]).enumerate() {
        // Lengths and the IPv4 checksum follow the payload; everything else is the same.
        if !matches!(i, 16 | 17 | 24 | 25 | 38 | 39) {
            assert_eq!(a, b, "outer header byte {i}");
        }
    }
    let c = flows[0].counters.unwrap();
    assert_eq!(c.packets, [0, 0], "counted after the listing above");
    let c = r.nf.flowtables()[0].flows(1_500_000_000)[0]
        .counters
        .unwrap();
    assert_eq!(c.packets, [1, 1]);
    // FIN from the remote through the tunnel: the flow is torn down, the FIN goes the slow
    // way (decapsulated by the tunnel device).
    let (_, sent) = r.send("trunk0", &remote(FIN | ACK, b""), 1.6);
    assert_eq!((sent[0].0.as_str(), sent[0].1), ("lan0", SendKind::Forward));
    assert!(r.nf.flowtables()[0].flows(1_700_000_000).is_empty());
}

#[test]
fn geneve_for_another_vni_or_from_another_peer_is_only_delivered_locally() {
    let mut r = rig_with(GW, RULES);
    let inner = tcp(REMOTE_MAC, GNV, REMOTE, HOST, 40000, 22, SYN, 64, b"");
    for f in [
        geneve(12, [192, 0, 2, 2], &[], &inner),
        geneve(11, [192, 0, 2, 3], &[], &inner),
    ] {
        let (fate, sent) = r.send("trunk0", &f, 1.0);
        assert_eq!((fate, sent.len()), (Fate::Local, 0));
    }
    let (fate, sent) = r.send("trunk0", &geneve(11, [192, 0, 2, 2], &[], &inner), 1.0);
    assert_eq!((fate, sent.len()), (Fate::Sent, 1));
}

#[test]
fn tunnel_lines_give_their_mtu_and_refuse_bad_words_at_their_column() {
    let g = Gateway::parse(GW, "gw.conf").unwrap();
    let gnv = g.device("gnv0").unwrap();
    assert_eq!(g.devices()[usize::from(gnv.0)].mtu, Some(1450), "1500 - 50");
    let t = g.tunnel(gnv).unwrap();
    assert_eq!((t.vni, t.underlay), (11, g.device("trunk0").unwrap()));
    let err = |text: &str| Gateway::parse(text, "gw.conf").unwrap_err().to_string();
    assert!(
        err("tunnel gnv0 geneve id 16777216 remote 192.0.2.2 dev trunk0")
            .contains("gw.conf:1:23: error: expected a VNI (0-16777215)"),
        "{}",
        err("tunnel gnv0 geneve id 16777216 remote 192.0.2.2 dev trunk0")
    );
    assert!(err("tunnel gnv0 geneve id 5 dev trunk0").contains("expected `remote ADDRESS`"));
    assert!(err("tunnel gnv0 vxlan id 5").contains("gw.conf:1:13:"));
    assert!(
        err("tunnel gnv0 geneve id 5 remote 192.0.2.2 local fd00::1 dev t0")
            .contains("not of the family")
    );
    assert!(
        err("device gnv0\ntunnel gnv0 geneve id 5 remote 192.0.2.2 dev t0")
            .contains("gw.conf:2:8:")
    );
    assert!(
        err("tunnel gnv0 geneve id 5 id 6 remote 192.0.2.2 dev t0")
            .contains("gw.conf:1:25: error: `id` is given twice")
    );
    for bad in ["224.0.0.1", "0.0.0.0", "::", "255.255.255.255"] {
        assert!(
            err(&format!("tunnel gnv0 geneve id 5 remote {bad} dev t0"))
                .contains("is not a unicast address"),
            "{bad}"
        );
    }
    assert!(
        err("tunnel gnv0 geneve id 5 remote 192.0.2.2 dev t0\ntunnel gnv1 geneve id 5 remote 192.0.2.2 dev t0")
            .contains("gw.conf:2:8: error: gnv0 has VNI 5 to 192.0.2.2 over t0 already")
    );
    // Another VNI, or another peer, is another tunnel.
    assert!(
        Gateway::parse(
            "tunnel gnv0 geneve id 5 remote 192.0.2.2 dev t0\ntunnel gnv1 geneve id 6 remote 192.0.2.2 dev t0\ntunnel gnv2 geneve id 5 remote 192.0.2.3 dev t0",
            "gw.conf"
        )
        .is_ok()
    );
}

#[test]
fn a_tunnel_mtu_above_what_the_underlay_carries_drops_the_packet_as_too_big() {
    // gnv0's MTU given as 1500 on a 1500-byte underlay: 1450 bytes of IP packet fit, more
    // would make an outer packet over 1500.
    let gw = GW.replace(
        "device gnv0 mac 02:00:00:00:00:0c",
        "device gnv0 mac 02:00:00:00:00:0c mtu 1500",
    );
    let g = Gateway::parse(&gw, "gw.conf").unwrap();
    let gnv = g.device("gnv0").unwrap();
    let frame = |ip_len: usize| {
        tcp(
            GNV,
            REMOTE_MAC,
            HOST,
            REMOTE,
            22,
            40000,
            ACK,
            64,
            &vec![0; ip_len - 40],
        )
    };
    let (under, f) = g.tunnel_tx(gnv, &frame(1450)).unwrap();
    assert_eq!((under, f.len() - 14), (g.device("trunk0").unwrap(), 1500));
    assert_eq!(
        g.tunnel_tx(gnv, &frame(1451)).unwrap_err(),
        super::DropReason::TooBig
    );
}

/// The tunnel over an IPv6 underlay: the peer 2001:db8::2.
const GW6: &str = "\
device trunk0 mac 02:00:00:00:00:0a mtu 1500
address trunk0 2001:db8::1/64
neighbour 2001:db8::2 lladdr 02:00:00:00:0a:02 dev trunk0
tunnel gnv0 geneve id 11 remote 2001:db8::2 dev trunk0
device gnv0 mac 02:00:00:00:00:0c
address gnv0 10.20.0.1/24
neighbour 10.20.0.2 lladdr 02:00:00:00:0c:02 dev gnv0
address lan0 10.30.0.1/24
device lan0 mac 02:00:00:00:00:0b mtu 1500
neighbour 10.30.0.2 lladdr 02:00:00:00:0b:02 dev lan0
";

/// `inner` in Geneve VNI 11 over IPv6 from 2001:db8::2 to 2001:db8::1, UDP checksum right.
fn geneve6(inner: &[u8]) -> Vec<u8> {
    let src: std::net::Ipv6Addr = "2001:db8::2".parse().unwrap();
    let dst: std::net::Ipv6Addr = "2001:db8::1".parse().unwrap();
    let mut u = 50000u16.to_be_bytes().to_vec();
    u.extend_from_slice(&GENEVE_PORT.to_be_bytes());
    u.extend_from_slice(&((16 + inner.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0, 0, 0, 0x65, 0x58, 0, 0, 11, 0]);
    u.extend_from_slice(inner);
    let c = wasp_wire::checksum::pseudo_v6(&src, &dst, u.len() as u32, 17);
    let c = !checksum::sum(u64::from(c), &u);
    u[6..8].copy_from_slice(&c.to_be_bytes());
    let mut f = TRUNK.to_vec();
    f.extend_from_slice(&VTEP);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&(u.len() as u16).to_be_bytes());
    f.extend_from_slice(&[17, 64]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&u);
    f
}

#[test]
fn a_tunnel_over_ipv6_sets_its_udp_checksum_and_mtu_and_offloads_the_same() {
    let g = Gateway::parse(GW6, "gw.conf").unwrap();
    let gnv = g.device("gnv0").unwrap();
    assert_eq!(g.devices()[usize::from(gnv.0)].mtu, Some(1430), "1500 - 70");
    let mut r = rig_with(GW6, RULES);
    let rem = |flags, payload: &[u8]| {
        geneve6(&tcp(
            REMOTE_MAC, GNV, REMOTE, HOST, 40000, 22, flags, 64, payload,
        ))
    };
    let (fate, sent) = r.send("trunk0", &rem(SYN, b""), 1.0);
    assert_eq!((fate, sent[0].0.as_str()), (Fate::Sent, "lan0"));
    let mut outs = Vec::new();
    for (i, (flags, t)) in [(SYN | ACK, 1.1), (ACK | PSH, 1.3)].into_iter().enumerate() {
        let (_, sent) = r.send("lan0", &host(flags, b"x"), t);
        let (dev, kind, f) = &sent[0];
        let want = if i == 0 {
            SendKind::Forward
        } else {
            SendKind::Flow
        };
        assert_eq!((dev.as_str(), *kind), ("trunk0", want));
        assert_eq!(&f[12..14], &[0x86, 0xdd]);
        assert_eq!(
            usize::from(u16::from_be_bytes([f[18], f[19]])),
            f.len() - 54
        );
        assert_eq!((f[20], f[21]), (17, 64));
        let src: std::net::Ipv6Addr = <[u8; 16]>::try_from(&f[22..38]).unwrap().into();
        let dst: std::net::Ipv6Addr = <[u8; 16]>::try_from(&f[38..54]).unwrap().into();
        assert_eq!(
            (src.to_string(), dst.to_string()),
            ("2001:db8::1".into(), "2001:db8::2".into())
        );
        // The UDP checksum over the pseudo header and the whole datagram is right.
        let pseudo = wasp_wire::checksum::pseudo_v6(&src, &dst, (f.len() - 54) as u32, 17);
        assert_eq!(
            checksum::sum(u64::from(pseudo), &f[54..]),
            0xffff,
            "frame {i}"
        );
        assert_eq!(&f[62..70], &[0, 0, 0x65, 0x58, 0, 0, 11, 0]);
        outs.push(f.clone());
        if i == 0 {
            let (fate, _) = r.send("trunk0", &rem(ACK, b""), 1.2);
            assert_eq!(fate, Fate::Sent);
            assert_eq!(r.nf.flowtables()[0].flows(1_250_000_000).len(), 1);
        }
    }
    // The cached header is the slow path's (the UDP length and checksum follow the packet).
    for i in (0..70).filter(|i| !matches!(i, 18 | 19 | 58..=61)) {
        assert_eq!(outs[0][i], outs[1][i], "outer byte {i}");
    }
    let (_, sent) = r.send("trunk0", &rem(ACK | PSH, b"y"), 1.4);
    assert_eq!((sent[0].0.as_str(), sent[0].1), ("lan0", SendKind::Flow));
}
