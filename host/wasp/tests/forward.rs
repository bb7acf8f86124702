//! `wasp replay` with forwarding: a gateway file and `fwd`/`dup` statements, on a capture made
//! here. What goes to `tx-DEV.pcap`, `accepted.pcap` and `dropped.pcap`, and the summary's
//! forwarding counts.

mod common;

use std::net::Ipv6Addr;
use std::path::Path;

use common::read_frames;
use wasp_gateway::checksum;

const T0: u64 = 1_700_000_000_000_000_000;

const CLIENT: [u8; 6] = [2, 0, 0, 0, 0, 2];
const V0: [u8; 6] = [2, 0, 0, 0, 1, 1];
const V1: [u8; 6] = [2, 0, 0, 0, 1, 2];
const SERVER: [u8; 6] = [2, 0, 0, 0, 2, 2];

const GATEWAY: &str = "\
# client -- veth0 [wasp] veth1 -- server, 10.9.0.0/16 behind the server
device veth0 mac 02:00:00:00:01:01
device veth1 mac 02:00:00:00:01:02
address veth0 10.0.1.1/24
address veth0 fd00:1::1/64
address veth1 10.0.2.1/24
route 10.9.0.0/16 via 10.0.2.2 dev veth1
neighbour 10.0.2.2 lladdr 02:00:00:00:02:02 dev veth1
";

const RULES: &str = r#"table netdev gw {
	chain in0 {
		type filter hook ingress device "veth0" priority 0; policy accept;
		udp dport 9 fwd to "veth1"
		udp dport 7 dup to "mon"
		udp dport 666 drop
	}
	chain out1 {
		type filter hook egress device "veth1" priority 0; policy accept;
		ip daddr 10.9.9.9 drop
	}
}
"#;

/// UDP from the client (10.0.1.2) to `dst`:`dport` with `ttl`, a correct header checksum.
fn udp4(dst: [u8; 4], dport: u16, ttl: u8) -> Vec<u8> {
    let mut f = V0.to_vec();
    f.extend_from_slice(&CLIENT);
    f.extend_from_slice(&[0x08, 0x00]);
    let mut h = vec![0x45, 0, 0, 32, 0, 1, 0x40, 0, ttl, 17, 0, 0, 10, 0, 1, 2];
    h.extend_from_slice(&dst);
    let c = checksum::checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(&[0x30, 0x39]);
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 12, 0, 0, b'w', b'a', b's', b'p']);
    f
}

fn arp_request(target: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&CLIENT);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&CLIENT);
    f.extend_from_slice(&[10, 0, 1, 2, 0, 0, 0, 0, 0, 0]);
    f.extend_from_slice(&target);
    f
}

fn solicitation(target: &str) -> Vec<u8> {
    let src: Ipv6Addr = "fd00:1::2".parse().unwrap();
    let target: Ipv6Addr = target.parse().unwrap();
    let t = target.octets();
    let dst = Ipv6Addr::from([
        0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, t[13], t[14], t[15],
    ]);
    let mut msg = vec![135, 0, 0, 0, 0, 0, 0, 0];
    msg.extend_from_slice(&t);
    msg.extend_from_slice(&[1, 1]);
    msg.extend_from_slice(&CLIENT);
    let c = checksum::icmpv6(&src, &dst, &msg);
    msg[2..4].copy_from_slice(&c.to_be_bytes());
    let mut f = vec![0x33, 0x33, 0xff, t[13], t[14], t[15]];
    f.extend_from_slice(&CLIENT);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, msg.len() as u8, 58, 255]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&msg);
    f
}

fn frames() -> Vec<(u64, Vec<u8>)> {
    [
        udp4([10, 9, 3, 4], 53, 64),  // 1 routed to veth1
        udp4([10, 9, 3, 4], 53, 1),   // 2 time exceeded
        arp_request([10, 0, 1, 1]),   // 3 ARP reply
        solicitation("fd00:1::1"),    // 4 NA
        udp4([10, 0, 1, 1], 53, 64),  // 5 to the gateway: local
        udp4([192, 0, 2, 1], 53, 64), // 6 no route
        udp4([10, 9, 3, 4], 9, 64),   // 7 fwd to veth1, unchanged
        udp4([10, 9, 3, 4], 7, 64),   // 8 dup to mon, and routed
        udp4([10, 9, 3, 4], 666, 64), // 9 dropped at ingress
        udp4([10, 9, 9, 9], 53, 64),  // 10 routed, dropped at veth1's egress
        udp4([10, 0, 2, 7], 53, 64),  // 11 no neighbour: ARP request on veth1
    ]
    .into_iter()
    .enumerate()
    .map(|(i, f)| (T0 + i as u64 * 1000, f))
    .collect()
}

fn replay(dir: &Path, gateway: Option<&str>) -> Result<wasp::Report, wasp::Error> {
    std::fs::write(dir.join("r.nft"), RULES).unwrap();
    let frames = frames();
    let refs: Vec<(u64, &[u8])> = frames.iter().map(|(t, f)| (*t, f.as_slice())).collect();
    std::fs::write(dir.join("c.pcap"), common::pcap_bytes(&refs)).unwrap();
    if let Some(g) = gateway {
        std::fs::write(dir.join("gw.conf"), g).unwrap();
    }
    let opts = wasp::ReplayOptions {
        ruleset: dir.join("r.nft"),
        inputs: vec![wasp::Input::required(dir.join("c.pcap"))],
        out_dir: Some(dir.join("out")),
        gateway: gateway.map(|_| dir.join("gw.conf")),
        ..wasp::ReplayOptions::default()
    };
    wasp::replay(&opts, None, &mut wasp::progress::Progress::hidden())
}

#[test]
fn gateway_routes_answers_and_sends_per_device() {
    let tmp = tempfile::tempdir().unwrap();
    let report = replay(tmp.path(), Some(GATEWAY)).unwrap();
    let s = &report.summary;
    // The ingress hook's verdicts are unchanged by forwarding.
    assert_eq!((s.packets, s.accepted, s.dropped), (11, 10, 1));
    let f = s.forward.as_ref().expect("forwarding summary");
    assert_eq!(
        (f.local, f.forwarded, f.fwd, f.dup, f.replied),
        (1, 2, 1, 1, 3)
    );
    assert_eq!((f.arp_replies, f.nd_replies, f.time_exceeded), (1, 1, 1));
    let lost: Vec<(&str, u64)> = f
        .lost
        .iter()
        .map(|l| (l.reason.as_str(), l.packets))
        .collect();
    assert_eq!(
        lost,
        [("no-route", 1), ("no-neighbour", 1), ("egress-drop", 1)]
    );
    assert_eq!(f.solicited, 1);
    let sent: Vec<(&str, u64)> = f
        .devices
        .iter()
        .map(|d| (d.dev.as_str(), d.packets))
        .collect();
    assert_eq!(sent, [("mon", 1), ("veth0", 4), ("veth1", 4)]);
    assert_eq!(f.unreachable, 1);

    let out = tmp.path().join("out");
    let input = frames();
    let v1 = read_frames(&out.join("tx-veth1.pcap"));
    assert_eq!(v1.len(), 4);
    // The ARP request for 10.0.2.7, from veth1's address.
    assert_eq!(&v1[3].1[..6], &[0xff; 6]);
    assert_eq!(&v1[3].1[12..14], &[0x08, 0x06]);
    assert_eq!(&v1[3].1[28..32], &[10, 0, 2, 1]);
    assert_eq!(&v1[3].1[38..42], &[10, 0, 2, 7]);
    // Packet 1 routed: next hop's MAC, veth1's MAC, TTL 63, checksum right, padding-free.
    assert_eq!(v1[0].0, input[0].0);
    assert_eq!(&v1[0].1[..12], &[SERVER, V1].concat()[..]);
    assert_eq!(v1[0].1[22], 63);
    assert_eq!(checksum::checksum(&v1[0].1[14..34]), 0);
    // Packet 7 stolen by `fwd to`: as received.
    assert_eq!(v1[1], input[6]);
    // Packet 8 routed after its copy went to `mon`.
    assert_eq!(v1[2].0, input[7].0);
    assert_eq!(read_frames(&out.join("tx-mon.pcap")), [input[7].clone()]);
    let v0 = read_frames(&out.join("tx-veth0.pcap"));
    let kinds: Vec<(u16, u8)> = v0
        .iter()
        .map(|(_, f)| (u16::from_be_bytes([f[12], f[13]]), f[23]))
        .collect();
    // ICMP time exceeded (IPv4, protocol 1), ARP reply, NA (IPv6, next header 58 at 20).
    assert_eq!(kinds[0], (0x0800, 1));
    assert_eq!(v0[0].1[34], 11);
    assert_eq!(kinds[1].0, 0x0806);
    assert_eq!(&v0[1].1[20..22], &[0, 2]);
    assert_eq!(kinds[2].0, 0x86dd);
    assert_eq!(v0[2].1[54], 136);
    // Packet 6 had no route: ICMP net unreachable (type 3, code 0) quoting it.
    assert_eq!(v0.len(), 4);
    assert_eq!((v0[3].1[34], v0[3].1[35]), (3, 0));
    assert_eq!(&v0[3].1[42..], &input[5].1[14..]);
    assert!(v0.iter().all(|(_, f)| f[..6] == CLIENT && f[6..12] == V0));
    assert_eq!(read_frames(&out.join("accepted.pcap")), [input[4].clone()]);
    assert_eq!(
        read_frames(&out.join("dropped.pcap")),
        [
            input[5].clone(),
            input[8].clone(),
            input[9].clone(),
            input[10].clone()
        ]
    );
    // The table shows it.
    let table = s.to_table();
    assert!(
        table.contains(
            "local 1  forwarded 2  fwd 1  dup 1  replied 3 (arp 1, nd 1, time exceeded 1)"
        ),
        "{table}"
    );
    assert!(
        table.contains("lost: no-route 1, no-neighbour 1, egress-drop 1"),
        "{table}"
    );
    assert!(table.contains("solicited 1 next hop(s)"), "{table}");
    assert!(table.contains("unreachable sent 1"), "{table}");
}

#[test]
fn fwd_and_dup_without_a_gateway() {
    let tmp = tempfile::tempdir().unwrap();
    let report = replay(tmp.path(), None).unwrap();
    let f = report.summary.forward.as_ref().expect("fwd/dup forward");
    // Accepted packets that no fwd took stay on the host side.
    assert_eq!(
        (f.local, f.forwarded, f.fwd, f.dup, f.replied),
        (9, 0, 1, 1, 0)
    );
    let out = tmp.path().join("out");
    assert_eq!(read_frames(&out.join("accepted.pcap")).len(), 9);
    assert_eq!(read_frames(&out.join("tx-veth1.pcap")).len(), 1);
    assert_eq!(read_frames(&out.join("tx-mon.pcap")).len(), 1);
}

#[test]
fn no_forwarding_no_tx_files() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("r.nft"),
        "table netdev t {\n\tchain c {\n\t\ttype filter hook ingress device \"veth0\" priority 0; policy accept;\n\t}\n}\n",
    )
    .unwrap();
    let frames = frames();
    let refs: Vec<(u64, &[u8])> = frames.iter().map(|(t, f)| (*t, f.as_slice())).collect();
    std::fs::write(tmp.path().join("c.pcap"), common::pcap_bytes(&refs)).unwrap();
    let opts = wasp::ReplayOptions {
        ruleset: tmp.path().join("r.nft"),
        inputs: vec![wasp::Input::required(tmp.path().join("c.pcap"))],
        out_dir: Some(tmp.path().join("out")),
        ..wasp::ReplayOptions::default()
    };
    let report = wasp::replay(&opts, None, &mut wasp::progress::Progress::hidden()).unwrap();
    assert!(report.summary.forward.is_none());
    assert_eq!(read_frames(&tmp.path().join("out/accepted.pcap")).len(), 11);
    let names: Vec<String> = std::fs::read_dir(tmp.path().join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("tx-"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

#[test]
fn a_bad_gateway_file_is_an_error_at_its_place() {
    let tmp = tempfile::tempdir().unwrap();
    let e = replay(
        tmp.path(),
        Some("device veth0 mac 02:00:00:00:01:01\nroute 10.0.0.0/8 via 10.0.1.2\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("gw.conf:2:30: error: expected `dev`, found end of line"),
        "{e}"
    );
}
