//! `samples/geneve-gateway/flowtable`: the committed capture is what this test generates
//! (`WASP_WRITE_SAMPLES=1` rewrites it): a conversation through the Geneve gateway recorded on
//! both of its ports (a pcapng with the interfaces `trunk0` and `lan0`). The replay's summary
//! is `replay.expected`; the frames sent are checked against the protocols: on `lan0` each
//! inner packet decapsulated with its TTL one lower and the LAN's MACs, on `trunk0` each answer
//! in Geneve (VNI 11, 192.0.2.1 > 192.0.2.2, lengths and checksums from scratch), the same
//! before and after its flow was offloaded.

mod common;

use std::path::PathBuf;

use common::{read_frames, repo, text, wasp};
use wasp_gateway::checksum;

const T0: u64 = 1_700_000_000_000_000_000;
const MS: u64 = 1_000_000;

const TRUNK: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];
const LAN: [u8; 6] = [2, 0, 0, 0, 0, 0x0b];
const GNV: [u8; 6] = [2, 0, 0, 0, 0, 0x0c];
const VTEP: [u8; 6] = [2, 0, 0, 0, 0x0a, 2];
const REMOTE_MAC: [u8; 6] = [2, 0, 0, 0, 0x0c, 2];
const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 0x0b, 2];
const REMOTE: [u8; 4] = [10, 20, 0, 2];
const SERVER: [u8; 4] = [10, 30, 0, 2];

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;
const FIN: u8 = 0x01;

fn sample() -> PathBuf {
    repo().join("samples/geneve-gateway/flowtable")
}

/// An IPv4 packet in Ethernet with its header checksum and, for TCP (6) and UDP (17), its
/// transport checksum.
fn ip(smac: [u8; 6], dmac: [u8; 6], src: [u8; 4], dst: [u8; 4], proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = dmac.to_vec();
    f.extend_from_slice(&smac);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + l4.len()) as u16;
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    let c = checksum::checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    let mut l4 = l4.to_vec();
    let at = match proto {
        6 => Some(16),
        17 => Some(6),
        _ => None,
    };
    if let Some(at) = at {
        let c = l4_sum(&src, &dst, proto, &l4, at);
        l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
    }
    f.extend_from_slice(&l4);
    f
}

/// The transport checksum of `l4` (its checksum field at `at` taken as 0) from scratch.
fn l4_sum(src: &[u8], dst: &[u8], proto: u8, l4: &[u8], at: usize) -> u16 {
    let mut b = src.to_vec();
    b.extend_from_slice(dst);
    b.extend_from_slice(&[0, proto]);
    b.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    let mut seg = l4.to_vec();
    seg[at..at + 2].copy_from_slice(&[0, 0]);
    b.extend_from_slice(&seg);
    let c = checksum::checksum(&b);
    if proto == 17 && c == 0 { 0xffff } else { c }
}

fn tcp(sport: u16, dport: u16, seq: u32, ack: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut t = sport.to_be_bytes().to_vec();
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&seq.to_be_bytes());
    t.extend_from_slice(&ack.to_be_bytes());
    t.extend_from_slice(&[0x50, flags, 0xfa, 0xf0, 0, 0, 0, 0]);
    t.extend_from_slice(payload);
    t
}

fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = sport.to_be_bytes().to_vec();
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

/// `inner` as the peer VTEP sends it: Geneve VNI 11 (with `options`) in UDP 49800 > 6081
/// (checksum 0), 192.0.2.2 > 192.0.2.1, to trunk0's MAC.
fn geneve(options: &[u8], inner: &[u8]) -> Vec<u8> {
    let mut g = vec![(options.len() / 4) as u8, 0, 0x65, 0x58, 0, 0, 11, 0];
    g.extend_from_slice(options);
    g.extend_from_slice(inner);
    let u = udp(49800, 6081, &g);
    // The driver's default over IPv4: no UDP checksum.
    let mut f = ip(VTEP, TRUNK, [192, 0, 2, 2], [192, 0, 2, 1], 17, &u);
    f[40..42].copy_from_slice(&[0, 0]);
    f
}

/// The overlay host's TCP segment to the server's port 22, through the tunnel.
fn remote_tcp(seq: u32, ack: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let inner = ip(
        REMOTE_MAC,
        GNV,
        REMOTE,
        SERVER,
        6,
        &tcp(40000, 22, seq, ack, flags, payload),
    );
    geneve(&[], &inner)
}

/// The server's TCP segment back, plain on the LAN.
fn server_tcp(seq: u32, ack: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    ip(
        SERVER_MAC,
        LAN,
        SERVER,
        REMOTE,
        6,
        &tcp(22, 40000, seq, ack, flags, payload),
    )
}

fn remote_dns(id: u8) -> Vec<u8> {
    let q = [id, 0x2a, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    geneve(
        &[],
        &ip(REMOTE_MAC, GNV, REMOTE, SERVER, 17, &udp(5353, 53, &q)),
    )
}

fn server_dns(id: u8) -> Vec<u8> {
    let a = [id, 0x2a, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0];
    ip(SERVER_MAC, LAN, SERVER, REMOTE, 17, &udp(53, 5353, &a))
}

/// The overlay host's ARP request for its gateway 10.20.0.1, through the tunnel.
fn remote_arp() -> Vec<u8> {
    let mut a = vec![0xff; 6];
    a.extend_from_slice(&REMOTE_MAC);
    a.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    a.extend_from_slice(&REMOTE_MAC);
    a.extend_from_slice(&REMOTE);
    a.extend_from_slice(&[0; 6]);
    a.extend_from_slice(&[10, 20, 0, 1]);
    geneve(&[], &a)
}

/// (interface: 0 trunk0, 1 lan0; time; frame), in time order.
fn conversation() -> Vec<(u32, u64, Vec<u8>)> {
    let (t, l) = (0u32, 1u32);
    let mut v = vec![
        (t, 0, remote_arp()),
        (t, 10 * MS, remote_tcp(1000, 0, SYN, b"")),
        (l, 11 * MS, server_tcp(5000, 1001, SYN | ACK, b"")),
        (t, 20 * MS, remote_tcp(1001, 5001, ACK, b"")),
    ];
    // Four exchanges through the offloaded flow.
    for i in 0..4u32 {
        let at = (30 + 20 * u64::from(i)) * MS;
        v.push((
            t,
            at,
            remote_tcp(1001 + 8 * i, 5001 + 16 * i, ACK | PSH, b"command!"),
        ));
        v.push((
            l,
            at + MS,
            server_tcp(5001 + 16 * i, 1009 + 8 * i, ACK | PSH, b"sixteen byte out"),
        ));
    }
    // A Geneve option of the experimental class: dropped at ingress, offloaded flow or not.
    let inner = ip(
        REMOTE_MAC,
        GNV,
        REMOTE,
        SERVER,
        6,
        &tcp(40000, 22, 1033, 5065, ACK | PSH, b"tagged"),
    );
    v.push((
        t,
        120 * MS,
        geneve(&[0xff, 0x72, 0x7f, 1, 0, 0, 0, 1], &inner),
    ));
    // DNS: the answer makes the connection established and offloads it.
    v.push((t, 200 * MS, remote_dns(1)));
    v.push((l, 201 * MS, server_dns(1)));
    v.push((t, 300 * MS, remote_dns(2)));
    v.push((l, 301 * MS, server_dns(2)));
    // The SSH session closes: the FIN tears its flow down.
    v.push((t, 400 * MS, remote_tcp(1033, 5065, FIN | ACK, b"")));
    v.push((l, 401 * MS, server_tcp(5065, 1034, FIN | ACK, b"")));
    v.push((t, 410 * MS, remote_tcp(1034, 5066, ACK, b"")));
    // The LAN does not open connections into the overlay: the forward policy drops it.
    v.push((
        l,
        500 * MS,
        ip(
            SERVER_MAC,
            LAN,
            SERVER,
            REMOTE,
            6,
            &tcp(41000, 22, 9, 0, SYN, b""),
        ),
    ));
    // 40 s later the idle DNS flow has expired (30 s): the query takes the chains and
    // offloads the connection again; its answer is fast.
    v.push((t, 40_000 * MS, remote_dns(3)));
    v.push((l, 40_001 * MS, server_dns(3)));
    v.into_iter().map(|(i, at, f)| (i, T0 + at, f)).collect()
}

/// A frame sent on trunk0 as the tunnel sends it; its inner frame. Panics (the test fails)
/// on any header that is not what the tunnel device and the flowtable's cached header make.
fn decap(f: &[u8]) -> &[u8] {
    assert_eq!(&f[0..12], &[VTEP, TRUNK].concat()[..], "outer MACs");
    assert_eq!(&f[12..14], &[8, 0]);
    let ip = &f[14..34];
    assert_eq!(checksum::checksum(ip), 0, "outer IPv4 checksum");
    assert_eq!(
        usize::from(u16::from_be_bytes([ip[2], ip[3]])),
        f.len() - 14
    );
    assert_eq!((ip[8], ip[9]), (64, 17));
    assert_eq!(
        (&ip[12..16], &ip[16..20]),
        (&[192u8, 0, 2, 1][..], &[192u8, 0, 2, 2][..])
    );
    let sport = u16::from_be_bytes([f[34], f[35]]);
    assert!((32768..61000).contains(&sport), "source port {sport}");
    assert_eq!(u16::from_be_bytes([f[36], f[37]]), 6081);
    assert_eq!(
        usize::from(u16::from_be_bytes([f[38], f[39]])),
        f.len() - 34
    );
    assert_eq!(&f[40..42], &[0, 0], "no UDP checksum over IPv4");
    assert_eq!(
        &f[42..50],
        &[0, 0, 0x65, 0x58, 0, 0, 11, 0],
        "Geneve VNI 11"
    );
    &f[50..]
}

/// The packet `sent` must be `orig` (an IPv4 frame) forwarded: MACs `dmac`/`smac`, TTL one
/// lower with the header checksum right, everything after the IP header unchanged (no NAT).
fn forwarded(sent: &[u8], orig: &[u8], smac: [u8; 6], dmac: [u8; 6]) {
    assert_eq!(&sent[0..12], &[dmac, smac].concat()[..]);
    assert_eq!(sent.len(), orig.len());
    assert_eq!(sent[22], orig[22] - 1, "TTL");
    assert_eq!(checksum::checksum(&sent[14..34]), 0, "IPv4 checksum");
    assert_eq!(&sent[34..], &orig[34..]);
}

#[test]
fn geneve_flowtable_sample_offloads_with_the_tunnel_and_matches_its_summary() {
    let dir = sample();
    let conv = conversation();
    let frames: Vec<(u32, u64, &[u8])> = conv
        .iter()
        .map(|(i, t, f)| (*i, *t, f.as_slice()))
        .collect();
    let bytes = common::pcapng_bytes(&["trunk0", "lan0"], &frames).unwrap();
    let path = dir.join("flow.pcapng");
    if std::env::var_os("WASP_WRITE_SAMPLES").is_some() {
        std::fs::write(&path, &bytes).unwrap();
    }
    assert!(
        std::fs::read(&path).unwrap() == bytes,
        "{} is not what this test generates: WASP_WRITE_SAMPLES=1 rewrites it",
        path.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("out");
    let out = wasp(
        &repo(),
        &[
            "replay",
            "samples/geneve-gateway/flowtable",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    if std::env::var_os("WASP_WRITE_SAMPLES").is_some() {
        std::fs::write(dir.join("replay.expected"), &stdout).unwrap();
    }
    let expected = std::fs::read_to_string(dir.join("replay.expected")).unwrap();
    assert_eq!(stdout, expected);
    let by_time = |ts: u64| {
        conv.iter()
            .find(|(_, t, _)| *t == ts)
            .map(|(_, _, f)| f.as_slice())
            .unwrap()
    };
    let inner_of = |f: &[u8]| f[50..].to_vec();

    // Out on lan0: every inner packet that passed, decapsulated, TTL one lower, from lan0's
    // MAC to the server's. The SYN, ACK, FIN and ACK and the first and third DNS queries took
    // the chains; the rest the flowtable: the same bytes either way.
    let lan = read_frames(&out_dir.join("tx-lan0.pcapng"));
    let want_lan: Vec<u64> = [10, 20, 30, 50, 70, 90, 200, 300, 400, 410, 40_000]
        .iter()
        .map(|ms| T0 + ms * MS)
        .collect();
    assert_eq!(lan.iter().map(|(t, _)| *t).collect::<Vec<_>>(), want_lan);
    for (ts, f) in &lan {
        forwarded(f, &inner_of(by_time(*ts)), LAN, SERVER_MAC);
    }
    // Out on trunk0: the ARP reply for 10.20.0.1 and every answer of the server, in Geneve.
    let trunk = read_frames(&out_dir.join("tx-trunk0.pcapng"));
    let want_trunk: Vec<u64> = [0, 11, 31, 51, 71, 91, 201, 301, 401, 40_001]
        .iter()
        .map(|ms| T0 + ms * MS)
        .collect();
    assert_eq!(
        trunk.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
        want_trunk
    );
    let arp = decap(&trunk[0].1);
    assert_eq!(&arp[0..12], &[REMOTE_MAC, GNV].concat()[..]);
    assert_eq!((&arp[12..14], arp[21]), (&[8u8, 6][..], 2), "an ARP reply");
    assert_eq!(
        (&arp[22..28], &arp[28..32]),
        (&GNV[..], &[10u8, 20, 0, 1][..])
    );
    let mut ports = Vec::new();
    for (ts, f) in &trunk[1..] {
        let inner = decap(f);
        forwarded(inner, by_time(*ts), GNV, REMOTE_MAC);
        ports.push((inner[23], u16::from_be_bytes([f[34], f[35]])));
    }
    // One source port per flow, before and after the offload (the cached header's).
    let tcp: Vec<u16> = ports.iter().filter(|p| p.0 == 6).map(|p| p.1).collect();
    let dns: Vec<u16> = ports.iter().filter(|p| p.0 == 17).map(|p| p.1).collect();
    assert!(tcp.windows(2).all(|w| w[0] == w[1]), "{tcp:?}");
    assert!(dns.windows(2).all(|w| w[0] == w[1]), "{dns:?}");
    // Dropped: the experimental option (at ingress) and the LAN's new connection (forward).
    let dropped = read_frames(&out_dir.join("dropped.pcapng"));
    assert_eq!(
        dropped.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
        [T0 + 120 * MS, T0 + 500 * MS]
    );
    // What the flowtable did: the SSH flow (torn down by its FIN), the DNS flow (expired after
    // 30 s idle) and the DNS flow again.
    assert!(
        stderr.contains("flowtable ft: 1 flows at the end, 3 added, 2 removed"),
        "{stderr}"
    );
}
