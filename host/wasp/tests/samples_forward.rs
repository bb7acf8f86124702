//! `samples/router`: the committed capture is what this test generates (`WASP_WRITE_SAMPLES=1`
//! rewrites it), the replay's summary is `replay.expected`, and the frames sent on each device
//! are checked against the protocols (TTL and checksums, MACs, the replies' fields).

mod common;

use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};

use common::{read_frames, repo, text, wasp};
use wasp_gateway::checksum;

const T0: u64 = 1_700_000_000_000_000_000;
const MS: u64 = 1_000_000;

const CLIENT: [u8; 6] = [2, 0, 0, 0, 0x0a, 2];
const CLIENT6: [u8; 6] = [2, 0, 0, 0, 0x0a, 3];
const LAN0: [u8; 6] = [2, 0, 0, 0, 1, 1];
const WAN0: [u8; 6] = [2, 0, 0, 0, 2, 1];
const UPSTREAM: [u8; 6] = [2, 0, 0, 0, 2, 0xfe];

fn sample() -> PathBuf {
    repo().join("samples/router")
}

/// Check the committed capture `path` holds `frames` (or write it with `WASP_WRITE_SAMPLES`).
fn own_capture(path: &Path, frames: &[(u64, Vec<u8>)]) {
    let refs: Vec<(u64, &[u8])> = frames.iter().map(|(t, f)| (*t, f.as_slice())).collect();
    let bytes = common::pcap_bytes(&refs);
    if std::env::var_os("WASP_WRITE_SAMPLES").is_some() {
        std::fs::write(path, &bytes).unwrap();
    }
    let committed = std::fs::read(path).unwrap();
    assert!(
        committed == bytes,
        "{} is not what this test generates: WASP_WRITE_SAMPLES=1 rewrites it",
        path.display()
    );
}

/// An IPv4 packet from the client with a correct header checksum (L4 checksums are left 0:
/// nothing on the path checks them).
fn v4(dst: [u8; 4], proto: u8, ttl: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = LAN0.to_vec();
    f.extend_from_slice(&CLIENT);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + l4.len()) as u16;
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0x12, 0x34, 0x40, 0, ttl, proto, 0, 0, 10, 1, 0, 2]);
    h.extend_from_slice(&dst);
    let c = checksum::checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(l4);
    f
}

fn v6(dst: &str, next: u8, hop: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = LAN0.to_vec();
    f.extend_from_slice(&CLIENT6);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    f.extend_from_slice(&[next, hop]);
    f.extend_from_slice(&"fd00:1::3".parse::<Ipv6Addr>().unwrap().octets());
    f.extend_from_slice(&dst.parse::<Ipv6Addr>().unwrap().octets());
    f.extend_from_slice(l4);
    f
}

fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = sport.to_be_bytes().to_vec();
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

fn syn(dport: u16) -> Vec<u8> {
    let mut t = 40000u16.to_be_bytes().to_vec();
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xfa, 0xf0, 0, 0, 0, 0]);
    t
}

fn arp_who_has(target: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&CLIENT);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&CLIENT);
    f.extend_from_slice(&[10, 1, 0, 2, 0, 0, 0, 0, 0, 0]);
    f.extend_from_slice(&target);
    f
}

fn neighbour_solicitation(target: &str) -> Vec<u8> {
    let src: Ipv6Addr = "fd00:1::3".parse().unwrap();
    let t = target.parse::<Ipv6Addr>().unwrap().octets();
    let dst = Ipv6Addr::from([
        0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, t[13], t[14], t[15],
    ]);
    let mut msg = vec![135, 0, 0, 0, 0, 0, 0, 0];
    msg.extend_from_slice(&t);
    msg.extend_from_slice(&[1, 1]);
    msg.extend_from_slice(&CLIENT6);
    let c = checksum::icmpv6(&src, &dst, &msg);
    msg[2..4].copy_from_slice(&c.to_be_bytes());
    let mut f = vec![0x33, 0x33, 0xff, t[13], t[14], t[15]];
    f.extend_from_slice(&CLIENT6);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, msg.len() as u8, 58, 255]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&msg);
    f
}

/// The LAN's frames, as `samples/router/README.md` walks through them.
fn lan_frames() -> Vec<(u64, Vec<u8>)> {
    let dns = udp(
        5353,
        53,
        b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00",
    );
    [
        arp_who_has([10, 1, 0, 1]),                                // 1 ARP reply
        neighbour_solicitation("fd00:1::1"),                       // 2 NA
        v4([8, 8, 8, 8], 17, 64, &dns),                            // 3 DNS: mirror + route
        v4([198, 51, 100, 10], 6, 64, &syn(443)),                  // 4 routed
        v4([198, 51, 100, 10], 6, 64, &syn(23)),                   // 5 telnet: dropped
        v4([198, 51, 100, 10], 17, 1, &udp(40000, 33434, b"tr")),  // 6 time exceeded
        v4([10, 1, 0, 1], 1, 64, &[8, 0, 0xf7, 0xfe, 0, 1, 0, 1]), // 7 ping the router
        v4([203, 0, 113, 5], 6, 64, &syn(80)),                     // 8 egress filter
        v6("2001:db8:100::10", 6, 64, &syn(443)),                  // 9 routed (IPv6)
        v6("2001:db8:100::10", 17, 1, &udp(40000, 33434, b"tr")),  // 10 time exceeded (v6)
    ]
    .into_iter()
    .enumerate()
    .map(|(i, f)| (T0 + i as u64 * MS, f))
    .collect()
}

#[test]
fn router_sample_routes_answers_and_filters() {
    let dir = sample();
    let frames = lan_frames();
    own_capture(&dir.join("lan.pcap"), &frames);
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("out");
    // From the repository root, as the README runs it, so the summary names the same paths.
    let out = wasp(
        &repo(),
        &[
            "replay",
            "samples/router",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let expected = std::fs::read_to_string(dir.join("replay.expected")).unwrap();
    assert_eq!(stdout, expected);

    // Out on wan0: the DNS query, the HTTPS SYN and the IPv6 SYN, to the upstream router's
    // MAC from wan0's, TTL/hop limit one less, IPv4 header checksums right.
    let wan = read_frames(&out_dir.join("tx-wan0.pcap"));
    assert_eq!(wan.len(), 3);
    for (i, (ts, f)) in wan.iter().enumerate() {
        assert_eq!(&f[..12], &[UPSTREAM, WAN0].concat()[..], "frame {i}");
        match u16::from_be_bytes([f[12], f[13]]) {
            0x0800 => {
                assert_eq!(f[22], 63);
                assert_eq!(checksum::checksum(&f[14..34]), 0);
                // Masqueraded to wan0's address (router.nft's `ip nat` table). The
                // capture's frames carry no transport checksum (0): UDP's stays 0 (none), and
                // TCP's is updated incrementally (RFC 1624), so the sum over the new pseudo
                // header and segment is what it was over the old ones.
                assert_eq!(&f[26..30], &[192, 0, 2, 1], "frame {i}: source NAT");
                let sum = |g: &[u8]| {
                    let l4 = &g[34..];
                    let mut pseudo = g[26..34].to_vec();
                    pseudo.extend_from_slice(&[0, g[23]]);
                    pseudo.extend_from_slice(&(l4.len() as u16).to_be_bytes());
                    pseudo.extend_from_slice(l4);
                    checksum::checksum(&pseudo)
                };
                let (_, orig) = frames.iter().find(|(t, _)| t == ts).unwrap();
                match f[23] {
                    17 => assert_eq!(&f[40..42], &[0, 0], "frame {i}: no UDP checksum"),
                    _ => assert_eq!(sum(f), sum(orig), "frame {i}: TCP checksum updated"),
                }
            }
            _ => assert_eq!(f[21], 63),
        }
        assert!(frames.iter().any(|(t, _)| t == ts));
    }
    assert_eq!(wan[0].1[14..].len(), frames[2].1[14..].len());
    // The DNS query's copy on mirror0, as received.
    assert_eq!(
        read_frames(&out_dir.join("tx-mirror0.pcap")),
        [frames[2].clone()]
    );
    // Back on lan0: ARP reply, NA, ICMP time exceeded (from 10.1.0.1), ICMPv6 time exceeded
    // (from fd00:1::1).
    let lan = read_frames(&out_dir.join("tx-lan0.pcap"));
    assert_eq!(lan.len(), 4);
    assert_eq!(&lan[0].1[12..14], &[0x08, 0x06]);
    assert_eq!(&lan[0].1[28..32], &[10, 1, 0, 1]);
    assert_eq!(lan[1].1[54], 136);
    assert_eq!(&lan[2].1[26..30], &[10, 1, 0, 1]);
    assert_eq!((lan[2].1[34], lan[2].1[35]), (11, 0));
    assert_eq!(&lan[2].1[42..], &frames[5].1[14..]);
    assert_eq!(
        Ipv6Addr::from(<[u8; 16]>::try_from(&lan[3].1[22..38]).unwrap()),
        "fd00:1::1".parse::<Ipv6Addr>().unwrap()
    );
    assert_eq!((lan[3].1[54], lan[3].1[55]), (3, 0));
    // The ping to the router is the host side's; telnet and the blocked network are dropped.
    assert_eq!(
        read_frames(&out_dir.join("accepted.pcap")),
        [frames[6].clone()]
    );
    assert_eq!(
        read_frames(&out_dir.join("dropped.pcap")),
        [frames[4].clone(), frames[7].clone()]
    );
}

/// `wasp replay --trace` follows each packet through the IP hooks too: the router's walks
/// of the forward and postrouting chains come under the packet's own trace id, after its
/// netdev walk, and a packet the IP hooks never see (dropped at ingress) has none.
#[test]
fn replay_traces_the_ip_hooks_of_each_packet() {
    let dir = sample();
    let tmp = tempfile::tempdir().unwrap();
    let rules = std::fs::read_to_string(dir.join("router.nft")).unwrap()
        + "table ip filter {\n\tchain forward {\n\t\ttype filter hook forward priority 0; policy accept;\n\t\tudp dport 53 meta nftrace set 1\n\t\tip protocol udp counter\n\t}\n}\n";
    std::fs::write(tmp.path().join("r.nft"), rules).unwrap();
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            "r.nft",
            "--gateway",
            dir.join("gateway.conf").to_str().unwrap(),
            "--in",
            dir.join("lan.pcap").to_str().unwrap(),
            "--in-dev",
            "lan0",
            "--out",
            "o",
            "--trace",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    // The chains each trace id walks, in order (a chain once per `packet:` line).
    let walks = |id: &str| -> Vec<String> {
        stdout
            .lines()
            .filter(|l| l.starts_with(&format!("trace id {id} ")) && l.contains(" packet: "))
            .map(|l| l.split(" packet: ").next().unwrap()[18..].to_string())
            .collect()
    };
    // The DNS query (third frame): ingress, forward, postrouting (masquerade).
    assert_eq!(
        walks("00000003"),
        ["netdev office lan_in", "ip filter forward", "ip nat post"]
    );
    assert!(stdout.contains(
        "trace id 00000003 ip filter forward rule udp dport 53 meta nftrace set 1 (verdict continue)\n\
         trace id 00000003 ip filter forward rule ip protocol udp counter packets 0 bytes 0 (verdict continue)\n\
         trace id 00000003 ip filter forward policy accept\n"
    ), "{stdout}");
    // The HTTPS SYN is forwarded too; the telnet SYN is dropped at ingress.
    assert_eq!(
        walks("00000004"),
        ["netdev office lan_in", "ip filter forward", "ip nat post"]
    );
    assert_eq!(walks("00000005"), ["netdev office lan_in"]);
}
