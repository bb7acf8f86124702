//! `reject` and `log` in `wasp replay`, against what Linux 6.18 did with the same ruleset and
//! the same frames on a veth (netdev ingress; replies captured on the peer, log lines from
//! the kernel log with net.netfilter.nf_log_all_netns=1): the replies written to
//! `tx-r0.pcap`, the log lines on standard error.

mod common;

use common::{read_frames, text, wasp};

const RULES: &str = r#"table netdev t {
  chain in {
    type filter hook ingress device "r0" priority 0; policy accept;
    tcp dport 22 log prefix "rj " reject with tcp reset
    udp dport 53 reject with icmpx admin-prohibited
  }
}
"#;

const A: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];
const B: [u8; 6] = [2, 0, 0, 0, 0, 0x0b];

/// RFC 1071 sum of `data`, folded.
fn ones(data: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    for w in data.chunks(2) {
        acc += u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0));
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// From 10.0.0.1 (MAC A) to 10.0.0.2 (MAC B): IPv4 ID 0x1234, DF, TTL 64, checksums right.
fn frame(proto: u8, mut l4: Vec<u8>) -> Vec<u8> {
    let (src, dst) = ([10u8, 0, 0, 1], [10u8, 0, 0, 2]);
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    ip.extend_from_slice(&[0x12, 0x34, 0x40, 0, 64, proto, 0, 0]);
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let c = !ones(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let at = if proto == 6 { 16 } else { 6 };
    let mut pseudo = [
        &src[..],
        &dst[..],
        &[0, proto],
        &(l4.len() as u16).to_be_bytes(),
    ]
    .concat();
    pseudo.extend_from_slice(&l4);
    let c = !ones(&pseudo);
    l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
    [&B[..], &A[..], &[8, 0], &ip, &l4].concat()
}

fn tcp(sport: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut t = sport.to_be_bytes().to_vec();
    t.extend_from_slice(&22u16.to_be_bytes());
    t.extend_from_slice(&1000u32.to_be_bytes());
    t.extend_from_slice(&2000u32.to_be_bytes());
    t.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    t.extend_from_slice(payload);
    frame(6, t)
}

fn udp(n: usize) -> Vec<u8> {
    let mut u = vec![0x14, 0xe9, 0, 53];
    u.extend_from_slice(&((8 + n) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend((0..n).map(|i| (i % 200) as u8));
    frame(17, u)
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The kernel's replies to frames 1 and 2 (TCP resets: its checksum field holds the
/// pseudo-header sum of CHECKSUM_PARTIAL, left to offload; wasp writes the whole checksum) and
/// 3 (the ICMP error, byte for byte).
const K_RST_SYN: &str = "02000000000a02000000000b08004500002800004000400626ce0a0000020a00000100169c4000000000000003e950140000141d0000";
const K_RST_ACK: &str = "02000000000a02000000000b08004500002800004000400626ce0a0000020a00000100169c41000007d00000000050040000141d0000";
const K_ICMP: &str = "02000000000a02000000000b08004500009c000040004001265f0a0000020a000001030d1173000000004500008012344000401114370a0000010a00000214e90035006c3a28000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f60616263";

#[test]
fn replies_go_to_the_output_capture_and_log_lines_to_stderr_as_the_kernel_s() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("r.nft"), RULES).unwrap();
    let mut padded = tcp(40002, 0x02, &[]);
    padded.resize(60, 0);
    let frames = [
        tcp(40000, 0x02, &[]),
        tcp(40001, 0x18, b"hello"),
        udp(100),
        padded,
        udp(1000),
    ];
    let refs: Vec<(u64, &[u8])> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| (1_000_000_000 * (1000 + i as u64), f.as_slice()))
        .collect();
    std::fs::write(dir.join("c.pcap"), common::pcap_bytes(&refs)).unwrap();
    let out = wasp(
        dir,
        &[
            "replay",
            "--ruleset",
            "r.nft",
            "--in",
            "c.pcap",
            "--out",
            "out",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("reject replies sent 4"), "{stdout}");
    let sent = read_frames(&dir.join("out/tx-r0.pcap"));
    // The padded SYN gets none: the kernel checks skb->len bytes, padding included.
    assert_eq!(sent.len(), 4);
    for (got, want) in [(&sent[0].1, K_RST_SYN), (&sent[1].1, K_RST_ACK)] {
        let want = hex(want);
        assert_eq!(got[..50], want[..50], "all but the TCP checksum");
        assert_eq!(got[52..], want[52..]);
        let pseudo = [&got[26..34], &[0, 6, 0, 20][..], &got[34..]].concat();
        assert_eq!(ones(&pseudo), 0xffff, "the TCP checksum verifies");
    }
    assert_eq!(sent[2].1, hex(K_ICMP));
    // The big datagram: 536 bytes quoted, as the kernel's (checked there: IP length 564).
    assert_eq!(sent[3].1.len(), 14 + 20 + 8 + 536);
    assert_eq!(&sent[3].1[34..36], &[3, 13]);
    // The kernel log line, as dmesg showed it for the first SYN (without its trailing space).
    let first = "rj IN=r0 OUT= MAC=02:00:00:00:00:0b:02:00:00:00:00:0a:08:00 SRC=10.0.0.1 DST=10.0.0.2 LEN=40 TOS=0x00 PREC=0x00 TTL=64 ID=4660 DF PROTO=TCP SPT=40000 DPT=22 WINDOW=65535 RES=0x00 SYN URGP=0";
    let second = "rj IN=r0 OUT= MAC=02:00:00:00:00:0b:02:00:00:00:00:0a:08:00 SRC=10.0.0.1 DST=10.0.0.2 LEN=45 TOS=0x00 PREC=0x00 TTL=64 ID=4660 DF PROTO=TCP SPT=40001 DPT=22 WINDOW=65535 RES=0x00 ACK PSH URGP=0";
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("rj ")).collect();
    assert_eq!(lines.len(), 3, "{stderr}");
    assert_eq!(lines[0], first);
    assert_eq!(lines[1], second);
}
