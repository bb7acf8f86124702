//! The plugin samples, run as a user runs them: `wasp check` of their rulesets and `wasp replay
//! SAMPLE_DIR`, compared with their expected files and with values from the protocols.
//!
//! - `samples/geneve-gateway`: Geneve options matched and rewritten, tunnels decapsulated, and
//!   VLAN-tagged frames encapsulated with the VNI of a VLAN-range to VNI-range map (cases C26,
//!   C27, C30 in `../shared/cases/plugins.md`). Its own capture `trunk.pcap` has one frame per
//!   case; `trunk.expected` holds their verdict lines, and the test reads the frames that come
//!   out (VNI, options, lengths, checksums). With `../shared/pcaps` there, the whole summary is
//!   compared with `replay.expected`.
//! - `samples/idle-gateway`: per-subscriber idle timers (xt_IDLETIMER, cases C24, C25) on
//!   `subscribers.pcap`; each expiry event must carry its label and the capture time it falls
//!   due (the label's last packet + its timeout), and the summary must be `replay.expected`.
//!
//! Both samples' captures are generated here, frame by frame, and the committed files must be
//! these bytes: `WASP_WRITE_SAMPLES=1 cargo test -p wasp --test samples_plugins` rewrites them.

mod common;

use std::path::{Path, PathBuf};

use common::*;

/// Capture time of the samples' first frame (2023-11-14 22:13:20 UTC).
const T0: u64 = 1_700_000_000_000_000_000;
const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;

fn sample(name: &str) -> PathBuf {
    repo().join("samples").join(name)
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

/// The RFC 1071 checksum of `b`.
fn csum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0)))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Ethernet II from 02:00:00:00:00:`s` to 02:00:00:00:00:`d`, with `tags` (TPID, VID) in
/// front of `ethertype`.
fn ether(s: u8, d: u8, tags: &[(u16, u16)], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, d, 0x02, 0, 0, 0, 0, s];
    for (tpid, vid) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&vid.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// IPv4 (no options, TTL 64, header checksum set) carrying `l4` of protocol `proto`.
fn ip4(src: [u8; 4], dst: [u8; 4], proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    h.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    let c = csum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(l4);
    h
}

/// IPv6 (hop limit 64) carrying `l4` with next header `next`, 2001:db8::`s` to 2001:db8::`d`.
fn ip6(s: u8, d: u8, next: u8, l4: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    for last in [s, d] {
        h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        h.extend_from_slice(&[0; 11]);
        h.push(last);
    }
    h.extend_from_slice(l4);
    h
}

/// UDP with its length set and checksum 0 (allowed for IPv4; nothing here checks it).
fn udp_with(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

/// A Geneve header (RFC 8926 section 3.4) with `opts` (class, type, data) and protocol
/// `proto` (0x6558: Ethernet), then `inner`; the C bit when an option type has 0x80.
fn geneve(vni: u32, proto: u16, opts: &[(u16, u8, &[u8])], inner: &[u8]) -> Vec<u8> {
    let mut block = Vec::new();
    for (class, typ, data) in opts {
        block.extend_from_slice(&class.to_be_bytes());
        block.push(*typ);
        block.push((data.len() / 4) as u8);
        block.extend_from_slice(data);
    }
    let critical = opts.iter().any(|o| o.1 & 0x80 != 0);
    let mut g = vec![(block.len() / 4) as u8, if critical { 0x40 } else { 0 }];
    g.extend_from_slice(&proto.to_be_bytes());
    g.extend_from_slice(&(vni << 8).to_be_bytes());
    g.extend_from_slice(&block);
    g.extend_from_slice(inner);
    g
}

/// An inner frame: 10.0.0.`s` to 10.0.0.`d`, UDP 40000 to 53, 8 bytes.
fn inner(s: u8, d: u8) -> Vec<u8> {
    ether(
        s,
        d,
        &[],
        0x0800,
        &ip4(
            [10, 0, 0, s],
            [10, 0, 0, d],
            17,
            &udp_with(40000, 53, b"wasp-dns"),
        ),
    )
}

/// Geneve/UDP/IPv4 between the tunnel peers 198.51.100.1 and 198.51.100.2.
fn geneve4(vni: u32, opts: &[(u16, u8, &[u8])]) -> Vec<u8> {
    let g = geneve(vni, 0x6558, opts, &inner(1, 2));
    ether(
        0x11,
        0x12,
        &[],
        0x0800,
        &ip4(
            [198, 51, 100, 1],
            [198, 51, 100, 2],
            17,
            &udp_with(50000, 6081, &g),
        ),
    )
}

const QINQ: u16 = 0x88a8;
const DOT1Q: u16 = 0x8100;

/// `trunk.pcap`: one frame per case of `gateway.nft`, 1 ms apart (the comment is the rule
/// handle that decides it, as `trunk.expected` says).
fn trunk_frames() -> Vec<(u64, Vec<u8>)> {
    let user = |vid_tags: &[(u16, u16)], s: u8| {
        ether(
            s,
            0xfe,
            vid_tags,
            0x0800,
            &ip4(
                [10, 9, 0, s],
                [10, 9, 0, 254],
                17,
                &udp_with(5353, 53, b"q"),
            ),
        )
    };
    let tenant = |tag: u32| (0u16, 0x80u8, tag.to_be_bytes());
    let t12 = tenant(12);
    let t14 = tenant(14);
    let exp = [0x5au8; 8];
    let frames = vec![
        // 11: tenant 10's tag 12 is rewritten to 13.
        geneve4(10, &[(t12.0, t12.1, &t12.2)]),
        // Policy: tenant 10 with tag 14 (the data must be equal).
        geneve4(10, &[(t14.0, t14.1, &t14.2)]),
        // 13: VNI 11 ends here (decap).
        geneve4(11, &[]),
        // 16: VNI 0x1389 over an IPv6 underlay ends here.
        ether(
            0x21,
            0x22,
            &[],
            0x86dd,
            &ip6(
                1,
                2,
                17,
                &udp_with(50001, 6081, &geneve(0x1389, 0x6558, &[], &inner(3, 4))),
            ),
        ),
        // 17: an experimental-class option.
        geneve4(100, &[(0xff72, 0x7f, &exp)]),
        // Policy: Geneve on another port is plain UDP.
        ether(
            0x11,
            0x12,
            &[],
            0x0800,
            &ip4(
                [198, 51, 100, 1],
                [198, 51, 100, 2],
                17,
                &udp_with(50000, 6082, &geneve(10, 0x6558, &[], &inner(1, 2))),
            ),
        ),
        // 18: VLAN 3 -> VNI 5002, VLAN 25 -> VNI 7025, VLAN 10 -> 5009, VLAN 20 -> 7020.
        user(&[(DOT1Q, 3)], 3),
        user(&[(DOT1Q, 25)], 25),
        user(&[(DOT1Q, 10)], 10),
        user(&[(DOT1Q, 20)], 20),
        // 10: VLAN 11 and 300 are not mapped.
        user(&[(DOT1Q, 11)], 11),
        user(&[(DOT1Q, 300)], 30),
        // 19: service VLAN 205 (customer VLAN 2001 inside) -> VNI 4205.
        user(&[(QINQ, 205), (DOT1Q, 2001)], 205),
        // 10: service VLAN 300.
        user(&[(QINQ, 300), (DOT1Q, 2001)], 31),
        // Policy: untagged, not Geneve.
        user(&[], 1),
    ];
    frames
        .into_iter()
        .enumerate()
        .map(|(i, f)| (T0 + i as u64 * MS, f))
        .collect()
}

/// The VNI of the Geneve frame `f` over IPv4 (no IP options).
fn vni(f: &[u8]) -> u32 {
    assert_eq!(f[12..14], [0x08, 0x00]);
    assert_eq!(f[23], 17);
    assert_eq!(f[36..38], 6081u16.to_be_bytes());
    u32::from_be_bytes([0, f[46], f[47], f[48]])
}

#[test]
fn geneve_gateway_ruleset_checks() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = sample("geneve-gateway");
    let out = wasp(
        tmp.path(),
        &["check", dir.join("gateway.nft").to_str().unwrap()],
    );
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    // C30: ranges of different sizes, a VLAN mapped twice, a VNI used twice are refused,
    // with the place of the use.
    let rules = std::fs::read_to_string(dir.join("gateway.nft")).unwrap();
    // The error names the use: line of the encap rule, column of `geneve` (after two tabs).
    let line = 1 + rules
        .lines()
        .position(|l| l.contains("geneve encap vlan 1-10"))
        .unwrap();
    let at = format!("bad.nft:{line}:3: error: plugin `geneve` refuses this use: ");
    for (from, to, msg) in [
        (
            "vlan 20-29 vni 7020-7029",
            "vlan 20-29 vni 7020-7030",
            "geneve: vlan 20-29 and vni 7020-7030 are ranges of different sizes",
        ),
        (
            "vlan 20-29 vni 7020-7029",
            "vlan 10-19 vni 7020-7029",
            "geneve: vlan 10-19 is mapped twice",
        ),
        (
            "vlan 20-29 vni 7020-7029",
            "vlan 20-29 vni 5009-5018",
            "geneve: vni 5009-5018 is used twice",
        ),
    ] {
        assert!(rules.contains(from));
        let bad = tmp.path().join("bad.nft");
        std::fs::write(&bad, rules.replace(from, to)).unwrap();
        let out = wasp(tmp.path(), &["check", bad.to_str().unwrap()]);
        let (_, stderr) = text(&out);
        assert!(!out.status.success(), "{to}");
        assert!(
            stderr.contains(&at) && stderr.contains(msg),
            "{to}: {stderr}"
        );
    }
}

#[test]
fn geneve_gateway_own_capture() {
    let dir = sample("geneve-gateway");
    let frames = trunk_frames();
    own_capture(&dir.join("trunk.pcap"), &frames);
    let tmp = tempfile::tempdir().unwrap();
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            dir.join("gateway.nft").to_str().unwrap(),
            "--in",
            dir.join("trunk.pcap").to_str().unwrap(),
            "--verdicts",
            "v.txt",
        ],
    );
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let expected = std::fs::read_to_string(dir.join("trunk.expected")).unwrap();
    let got = std::fs::read_to_string(tmp.path().join("v.txt")).unwrap();
    assert_eq!(got, expected);
    let accepted = read_frames(&tmp.path().join("out/accepted.pcap"));
    let by_time = |i: u64| {
        accepted
            .iter()
            .find(|(t, _)| *t == T0 + i * MS)
            .map(|(_, f)| f.clone())
            .unwrap_or_else(|| panic!("frame {} not accepted", i + 1))
    };
    // Frame 1: the option's data is 13 now; the lengths stay, the IPv4 checksum stays valid
    // (nothing in front of the data changed).
    let f = by_time(0);
    assert_eq!(f.len(), frames[0].1.len());
    assert_eq!(vni(&f), 10);
    assert_eq!(f[50..54], [0, 0, 0x80, 1]);
    assert_eq!(f[54..58], 13u32.to_be_bytes());
    let mut want = frames[0].1.clone();
    want[57] = 13;
    assert_eq!(f, want);
    // Frames 3 and 4: decapsulated, the inner Ethernet frame as it was.
    assert_eq!(by_time(2), inner(1, 2));
    assert_eq!(by_time(3), inner(3, 4));
    // Frames 7-10: into Geneve with vid(i) -> base + (i - first); the frame inside is the
    // user's frame without its tag, after 8 bytes of option (class 0x0102 type 0x80, data 1).
    for (i, vid, want_vni) in [
        (6u64, 3u16, 5002u32),
        (7, 25, 7025),
        (8, 10, 5009),
        (9, 20, 7020),
    ] {
        let f = by_time(i);
        let before = &frames[i as usize].1;
        assert_eq!(vni(&f), want_vni, "VLAN {vid}");
        assert_eq!(f[42], 2, "opt_len: 8 bytes of options");
        assert_eq!(f[43] & 0x40, 0x40, "C bit: the option is critical");
        assert_eq!(f[44..46], [0x65, 0x58]);
        assert_eq!(f[50..58], [0x01, 0x02, 0x80, 1, 0, 0, 0, 1]);
        let mut untagged = before.clone();
        untagged.drain(12..16);
        assert_eq!(f[58..], untagged[..], "VLAN {vid}");
        assert_eq!(f[26..30], [192, 0, 2, 1]);
        assert_eq!(f[30..34], [192, 0, 2, 2]);
        assert_eq!(csum(&f[14..34]), 0, "outer IPv4 header checksum");
        assert_eq!(
            u16::from_be_bytes([f[16], f[17]]) as usize,
            f.len() - 14,
            "IPv4 total length"
        );
        assert_eq!(u16::from_be_bytes([f[38], f[39]]) as usize, f.len() - 34);
    }
    // Frame 13: service VLAN 205 -> 4205; the customer's 802.1Q tag 2001 stays inside.
    let f = by_time(12);
    assert_eq!(vni(&f), 4205);
    assert_eq!(f[42], 0);
    assert_eq!(f[50 + 12..50 + 16], [0x81, 0x00, 0x07, 0xd1]);
}

#[test]
fn geneve_gateway_sample_with_the_shared_captures() {
    let dir = sample("geneve-gateway");
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("out");
    // Run from the repository root, as the README does, so the summary names the same paths.
    let out = wasp(
        &repo(),
        &[
            "replay",
            "samples/geneve-gateway",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    if !dir
        .join("../../../shared/pcaps/tcpdump-geneve.pcap")
        .exists()
    {
        assert!(stderr.contains("note: skipping"), "{stderr}");
        assert!(stdout.contains("\npackets 15 "), "{stdout}");
        return;
    }
    let expected = std::fs::read_to_string(dir.join("replay.expected")).unwrap();
    assert_eq!(stdout, expected);
    // tcpdump-geneve.pcap: the 19 packets of VNI 10 carry tag 13 now (data 0000000d), the 20
    // of VNI 11 lost their outer headers (their inner frames are IPv4 from 30.0.0.0/24).
    let accepted = read_frames(&out_dir.join("accepted.pcap"));
    let tagged: Vec<&Vec<u8>> = accepted
        .iter()
        .map(|(_, f)| f)
        .filter(|f| f.len() > 58 && f[12..14] == [8, 0] && f[36..38] == [0x17, 0xc1])
        .collect();
    let retagged = tagged
        .iter()
        .filter(|f| vni(f) == 10 && f[50..58] == [0, 0, 0x80, 1, 0, 0, 0, 13])
        .count();
    // 19 from tcpdump-geneve.pcap and trunk.pcap's first frame.
    assert_eq!(retagged, 20);
    // tcpdump-geneve-gcp.pcap: a 130-byte frame with 40 bytes of options (class 0x0132 types 1, 2,
    // 3: 4 + 4, 4 + 16, 4 + 8); ours appended: 138 bytes, 12 words, the lengths and the IPv4
    // header checksum right.
    let gcp: Vec<&Vec<u8>> = accepted
        .iter()
        .map(|(_, f)| f)
        .filter(|f| f.len() == 138)
        .collect();
    assert_eq!(gcp.len(), 1);
    let f = gcp[0];
    assert_eq!(vni(f), 0);
    assert_eq!(f[42], 12);
    assert_eq!(f[90..98], [0x01, 0x02, 0x80, 1, 0x00, 0x88, 0x00, 0x22]);
    assert_eq!(csum(&f[14..34]), 0);
    assert_eq!(u16::from_be_bytes([f[16], f[17]]), 138 - 14);
    assert_eq!(u16::from_be_bytes([f[38], f[39]]), 138 - 34);
    // zeek-geneve-ipv6.pcap: IPv6 directly inside, so the outer Ethernet header stays with
    // EtherType 0x86dd and the inner IPv6 packet follows it (103 - 20 - 8 - 8 = 67 bytes).
    let v6: Vec<&Vec<u8>> = accepted
        .iter()
        .map(|(_, f)| f)
        .filter(|f| f[12..14] == [0x86, 0xdd] && f.len() == 67)
        .collect();
    assert_eq!(v6.len(), 2);
    assert!(v6.iter().all(|f| f[14] >> 4 == 6 && f[20] == 17));
}

/// The subscribers of `idle.nft`: (source, VLAN, capture seconds of their packets).
fn subscribers() -> Vec<([u8; 4], Option<u16>, Vec<u64>)> {
    vec![
        // alice: every 5 s for the whole two minutes, never idle for 30 s.
        ([10, 1, 0, 11], None, (0..=24).map(|i| i * 5).collect()),
        // bob: until 20 s (expires at 40 s), back at 90 s and 95 s (expires at 115 s).
        ([10, 1, 0, 12], None, vec![1, 6, 11, 16, 20, 90, 95]),
        // carol (hard, 60 s): at 2 s and 10 s, expires at 70 s.
        ([10, 1, 0, 13], None, vec![2, 10]),
        // branch, two subnets on one label (10 s): .1.5 until 14 s, .2.7 from 19 s to 31 s:
        // never 10 s apart, so the label expires once, at 41 s.
        ([10, 1, 1, 5], None, vec![3, 8, 14]),
        ([10, 1, 2, 7], None, vec![19, 25, 31]),
        // hotel (VLAN 100, 15 s): every 10 s until 53 s, expires at 68 s.
        ([10, 100, 0, 9], Some(100), vec![3, 13, 23, 33, 43, 53]),
    ]
}

/// `subscribers.pcap`: every subscriber's packets in time order (a subscriber's packets are
/// UDP to 203.0.113.1 port 443, 100 bytes of payload), each at its second + 100 ms per row so
/// that no two share a timestamp.
fn subscriber_frames() -> Vec<(u64, Vec<u8>)> {
    let mut frames = Vec::new();
    for (row, (src, vlan, secs)) in subscribers().into_iter().enumerate() {
        let tags: Vec<(u16, u16)> = vlan.map(|v| (DOT1Q, v)).into_iter().collect();
        for s in secs {
            let f = ether(
                src[3],
                0xfe,
                &tags,
                0x0800,
                &ip4(
                    src,
                    [203, 0, 113, 1],
                    17,
                    &udp_with(50000, 443, &[0x5a; 100]),
                ),
            );
            frames.push((T0 + s * SEC + row as u64 * 100 * MS, f));
        }
    }
    frames.sort_by_key(|(t, _)| *t);
    frames
}

#[test]
fn idle_gateway_ruleset_checks() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = sample("idle-gateway");
    let out = wasp(
        tmp.path(),
        &["check", dir.join("idle.nft").to_str().unwrap()],
    );
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    // C24: the same label with the other timer type is refused (bob's rule, now plain
    // "carol", comes first; carol's hard rule is the one refused).
    let rules = std::fs::read_to_string(dir.join("idle.nft")).unwrap();
    let from = "label \"bob\" timeout 20s accept";
    assert!(rules.contains(from));
    let bad = tmp.path().join("bad.nft");
    std::fs::write(
        &bad,
        rules.replace(from, "label \"carol\" timeout 20s accept"),
    )
    .unwrap();
    let out = wasp(tmp.path(), &["check", bad.to_str().unwrap()]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains(
            "idletimer: label \"carol\" is a plain timer: same label and different timer type"
        ),
        "{stderr}"
    );
}

#[test]
fn idle_gateway_timers_expire_inside_the_capture() {
    let dir = sample("idle-gateway");
    let frames = subscriber_frames();
    own_capture(&dir.join("subscribers.pcap"), &frames);
    let tmp = tempfile::tempdir().unwrap();
    let out = wasp(
        tmp.path(),
        &["replay", dir.to_str().unwrap(), "--out", "res", "--json"],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["packets"], frames.len() as u64);
    assert_eq!(v["accepted"], frames.len() as u64);
    // Deadlines: the label's last packet before the expiry + its timeout (rows as in
    // `subscribers`: bob's second row starts at 90 s).
    let at = |s: u64, row: u64| T0 + s * SEC + row * 100 * MS;
    let expected = [
        ("bob", at(20, 1) + 20 * SEC),
        ("branch", at(31, 4) + 10 * SEC),
        ("hotel", at(53, 5) + 15 * SEC),
        ("carol", at(10, 2) + 60 * SEC),
        ("bob", at(95, 1) + 20 * SEC),
    ];
    let events: Vec<(String, u64)> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["text"].as_str().unwrap().to_string(),
                e["time_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(events.len(), expected.len(), "{events:?}");
    for ((text, t), (label, due)) in events.iter().zip(expected) {
        assert_eq!(text, &format!("idletimer {label} expired"));
        // Reported at the capture time it falls due, which lies between two packets: after
        // the label's last one, before the capture's next one (the vector the replay's clock
        // passes the deadline with).
        assert_eq!(*t, due, "{label}");
        let next = frames.iter().map(|f| f.0).find(|&f| f >= due).unwrap();
        assert!(due < next, "{label}");
    }
    // alice never went quiet for 30 s: her timer runs at the end (her last packet is the
    // capture's last frame), and the listing says how long it has left.
    let state: Vec<String> = v["plugin_state"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["state"].as_array().unwrap().iter())
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    for want in [
        "(label \"alice\" remaining 30000 ms)",
        "(label \"carol\" remaining 0 ms hard)",
        "(label \"bob\" remaining 0 ms)",
    ] {
        assert!(state.iter().any(|s| s.ends_with(want)), "{want}: {state:?}");
    }
}

#[test]
fn idle_gateway_summary_is_the_expected_one() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("out");
    let out = wasp(
        &repo(),
        &[
            "replay",
            "samples/idle-gateway",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let expected = std::fs::read_to_string(sample("idle-gateway").join("replay.expected")).unwrap();
    assert_eq!(stdout, expected);
    // Five events, in the order they fall due.
    let labels: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_suffix(" expired"))
        .filter_map(|l| l.rsplit_once("idletimer ").map(|(_, label)| label))
        .collect();
    assert_eq!(labels, ["bob", "branch", "hotel", "carol", "bob"]);
}
