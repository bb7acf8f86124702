//! `wasp replay` of multi-interface pcapng captures (as `dumpcap -i lan0 -i wan0` writes
//! them): every packet enters on the device its interface's `if_name` names when wasp knows
//! that device (a netdev ingress base chain's, or the gateway file's), on the default input
//! device otherwise; a classic pcap enters on the default device as before.
//!
//! The expected verdicts follow the kernel's netdev ingress hook: a packet runs only the base
//! chains attached to the device it arrived on (`nf_hook_ingress` walks the hook entries of
//! `skb->dev`).

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use common::{pcap_bytes, write_pcapng};
use wasp_gateway::checksum;

const T0: u64 = 1_700_000_000_000_000_000;

/// lan0 drops DNS and accepts the rest; wan0 accepts only HTTPS.
const RULES: &str = r#"table netdev f {
	chain lan {
		type filter hook ingress device "lan0" priority 0; policy accept;
		udp dport 53 drop
	}
	chain wan {
		type filter hook ingress device "wan0" priority 0; policy drop;
		tcp dport 443 accept
	}
}
"#;

/// Interfaces of the capture: 0 lan0, 1 wan0, 2 without a name, 3 a device nobody knows.
const IFACES: [&str; 4] = ["lan0", "wan0", "", "eth9"];

/// (interface index, frame) in capture order, interleaved so that vectors must be cut.
fn frames() -> Vec<(u32, Vec<u8>)> {
    let a = [10, 0, 0, 5];
    let b = [192, 0, 2, 7];
    vec![
        (0, eth(5, 0x0800, &ipv4(a, b, 17, &udp(40000, 53)))), // 1 lan0 DNS: rule drop
        (1, eth(7, 0x0800, &ipv4(b, a, 17, &udp(40000, 53)))), // 2 wan0 DNS: policy drop
        (1, eth(7, 0x0800, &ipv4(b, a, 6, &tcp(40000, 443, 2)))), // 3 wan0 HTTPS: rule accept
        (0, eth(5, 0x0800, &ipv4(a, b, 6, &tcp(40000, 443, 2)))), // 4 lan0 HTTPS: policy accept
        (2, eth(5, 0x0800, &ipv4(a, b, 17, &udp(40001, 53)))), // 5 no name: lan0, rule drop
        (3, eth(7, 0x0800, &ipv4(b, a, 6, &tcp(40001, 22, 2)))), // 6 eth9: lan0, policy accept
        (1, eth(7, 0x0800, &ipv4(b, a, 6, &tcp(40002, 22, 2)))), // 7 wan0 ssh: policy drop
    ]
}

/// The frames as a pcapng with [`IFACES`], 1 µs apart.
fn write_capture(dir: &Path) -> String {
    let frames = frames();
    let refs: Vec<(u32, u64, &[u8])> = frames
        .iter()
        .enumerate()
        .map(|(i, (iface, f))| (*iface, T0 + i as u64 * 1_000, f.as_slice()))
        .collect();
    let path = dir.join("two.pcapng");
    write_pcapng(&path, &IFACES, &refs).unwrap();
    path.display().to_string()
}

fn run(dir: &Path, capture: &str, extra: &[&str]) -> (String, String) {
    std::fs::write(dir.join("r.nft"), RULES).unwrap();
    let mut args = vec!["replay", "--ruleset", "r.nft", "--in", capture];
    args.extend_from_slice(extra);
    let out = wasp(dir, &args);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let verdicts = std::fs::read_to_string(dir.join("v.txt")).unwrap();
    (verdicts, stdout)
}

#[test]
fn each_packet_enters_on_the_device_of_its_interface() {
    let tmp = tempfile::tempdir().unwrap();
    let cap = write_capture(tmp.path());
    let (verdicts, stdout) = run(tmp.path(), &cap, &["--verdicts", "v.txt"]);
    // Handles as the kernel numbers them in table f (nft 1.0.6 `nft -a list ruleset`): chain
    // lan 1, chain wan 2, lan's rule 3, wan's rule 4. Packets 5 (no if_name) and 6 (eth9, no device of the ruleset) enter on the
    // default device lan0 (the first ingress chain's), and their lines do not name it.
    assert_eq!(
        verdicts,
        "\
1 drop f lan 3
2 drop f wan policy iif \"wan0\"
3 accept f wan 4 iif \"wan0\"
4 accept f lan policy
5 drop f lan 3
6 accept f lan policy
7 drop f wan policy iif \"wan0\"
"
    );
    // The summary has the chains of both devices: lan saw packets 1, 4, 5, 6; wan 2, 3, 7.
    assert!(stdout.contains("input device \"lan0\""), "{stdout}");
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| l.starts_with("netdev f "))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["netdev", "f", "lan", "0", "4", "2", "2"],
            vec!["netdev", "f", "wan", "on", "\"wan0\"", "0", "3", "1", "2"],
        ],
        "{stdout}"
    );
    assert!(
        stdout.contains("packets 7  accepted 3  dropped 4"),
        "{stdout}"
    );
    let out = tmp.path().join("out");
    let input = frames();
    // A pcapng input gives pcapng outputs.
    let accepted: Vec<Vec<u8>> = read_frames(&out.join("accepted.pcapng"))
        .into_iter()
        .map(|(_, f)| f)
        .collect();
    assert_eq!(
        accepted,
        [input[2].1.clone(), input[3].1.clone(), input[5].1.clone()]
    );
}

#[test]
fn json_summary_names_the_other_devices_chains() {
    let tmp = tempfile::tempdir().unwrap();
    let cap = write_capture(tmp.path());
    let (_, stdout) = run(tmp.path(), &cap, &["--verdicts", "v.txt", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["in_dev"], "lan0");
    assert_eq!(v["chains"][0]["chain"], "lan");
    assert_eq!(v["chains"][0].get("dev"), None);
    assert_eq!(v["chains"][1]["chain"], "wan");
    assert_eq!(v["chains"][1]["dev"], "wan0");
    assert_eq!(v["chains"][1]["packets"], 3);
}

#[test]
fn an_in_dev_that_is_an_interface_name_leaves_the_others_named() {
    // With --in-dev wan0 the default is wan0: the lan0 packets' lines name lan0, and the
    // unnamed and unknown interfaces' packets (5, 6) enter on wan0 (policy drop: 5 is UDP).
    let tmp = tempfile::tempdir().unwrap();
    let cap = write_capture(tmp.path());
    let (verdicts, stdout) = run(
        tmp.path(),
        &cap,
        &["--verdicts", "v.txt", "--in-dev", "wan0"],
    );
    assert_eq!(
        verdicts,
        "\
1 drop f lan 3 iif \"lan0\"
2 drop f wan policy
3 accept f wan 4
4 accept f lan policy iif \"lan0\"
5 drop f wan policy
6 drop f wan policy
7 drop f wan policy
"
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| l.starts_with("netdev f "))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["netdev", "f", "wan", "0", "5", "1", "4"],
            vec!["netdev", "f", "lan", "on", "\"lan0\"", "0", "2", "1", "1"],
        ],
        "{stdout}"
    );
}

#[test]
fn the_trace_shows_the_device_each_packet_entered_on() {
    let tmp = tempfile::tempdir().unwrap();
    let cap = write_capture(tmp.path());
    let (_, stdout) = run(tmp.path(), &cap, &["--verdicts", "v.txt", "--trace"]);
    let packet_lines: Vec<(&str, &str)> = stdout
        .lines()
        .filter(|l| l.starts_with("trace id") && l.contains(" packet: "))
        .map(|l| {
            let id = &l[9..17];
            let iif = l.split("packet: iif ").nth(1).unwrap();
            (id, iif.split(' ').next().unwrap())
        })
        .collect();
    assert_eq!(
        packet_lines,
        [
            ("00000001", "\"lan0\""),
            ("00000002", "\"wan0\""),
            ("00000003", "\"wan0\""),
            ("00000004", "\"lan0\""),
            ("00000005", "\"lan0\""),
            ("00000006", "\"lan0\""),
            ("00000007", "\"wan0\""),
        ],
        "{stdout}"
    );
}

#[test]
fn a_classic_pcap_enters_on_the_default_device_as_before() {
    let tmp = tempfile::tempdir().unwrap();
    let frames = frames();
    let refs: Vec<(u64, &[u8])> = frames
        .iter()
        .enumerate()
        .map(|(i, (_, f))| (T0 + i as u64 * 1_000, f.as_slice()))
        .collect();
    std::fs::write(tmp.path().join("c.pcap"), pcap_bytes(&refs)).unwrap();
    let (verdicts, stdout) = run(tmp.path(), "c.pcap", &["--verdicts", "v.txt"]);
    // Everything on lan0: DNS dropped by the rule, the rest accepted by the policy.
    assert_eq!(
        verdicts,
        "\
1 drop f lan 3
2 drop f lan 3
3 accept f lan policy
4 accept f lan policy
5 drop f lan 3
6 accept f lan policy
7 accept f lan policy
"
    );
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("netdev f "))
        .collect();
    assert_eq!(rows.len(), 1, "{stdout}");
    assert_eq!(
        rows[0].split_whitespace().collect::<Vec<_>>(),
        ["netdev", "f", "lan", "0", "7", "4", "3"]
    );
}

// A gateway between lan0 (10.0.1.1) and wan0 (10.0.2.1), no ruleset chain on either device.

const CLIENT: [u8; 6] = [2, 0, 0, 0, 0, 2];
const LAN0: [u8; 6] = [2, 0, 0, 0, 1, 1];
const WAN0: [u8; 6] = [2, 0, 0, 0, 1, 2];
const SERVER: [u8; 6] = [2, 0, 0, 0, 2, 2];

const GATEWAY: &str = "\
device lan0 mac 02:00:00:00:01:01
device wan0 mac 02:00:00:00:01:02
address lan0 10.0.1.1/24
address wan0 10.0.2.1/24
neighbour 10.0.1.2 lladdr 02:00:00:00:00:02 dev lan0
neighbour 10.0.2.2 lladdr 02:00:00:00:02:02 dev wan0
";

/// UDP `src` -> `dst` port 5000, TTL 64, in a frame `smac` -> `dmac`, header checksum right.
fn udp4(smac: [u8; 6], dmac: [u8; 6], src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut f = dmac.to_vec();
    f.extend_from_slice(&smac);
    f.extend_from_slice(&[0x08, 0x00]);
    let mut h = vec![0x45, 0, 0, 32, 0, 1, 0x40, 0, 64, 17, 0, 0];
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    let c = checksum::checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(&[0x13, 0x88, 0x13, 0x88, 0, 12, 0, 0, b'w', b'a', b's', b'p']);
    f
}

fn gateway_replay(dir: &Path, pcapng: bool) -> wasp::Report {
    std::fs::write(dir.join("r.nft"), "table netdev f {\n}\n").unwrap();
    std::fs::write(dir.join("gw.conf"), GATEWAY).unwrap();
    let request = udp4(CLIENT, LAN0, [10, 0, 1, 2], [10, 0, 2, 2]);
    let reply = udp4(SERVER, WAN0, [10, 0, 2, 2], [10, 0, 1, 2]);
    let input = dir.join("c");
    if pcapng {
        write_pcapng(
            &input,
            &["lan0", "wan0"],
            &[(0, T0, &request), (1, T0 + 1_000, &reply)],
        )
        .unwrap();
    } else {
        std::fs::write(&input, pcap_bytes(&[(T0, &request), (T0 + 1_000, &reply)])).unwrap();
    }
    let opts = wasp::ReplayOptions {
        ruleset: dir.join("r.nft"),
        inputs: vec![wasp::Input::required(&input)],
        in_dev: Some("lan0".to_string()),
        out_dir: Some(dir.join("out")),
        gateway: Some(dir.join("gw.conf")),
        ..wasp::ReplayOptions::default()
    };
    wasp::replay(&opts, None, &mut wasp::progress::Progress::hidden()).unwrap()
}

#[test]
fn the_gateway_routes_the_second_interfaces_packets_out_of_the_first_device() {
    let tmp = tempfile::tempdir().unwrap();
    let report = gateway_replay(tmp.path(), true);
    let out = tmp.path().join("out");
    let f = report.summary.forward.as_ref().unwrap();
    assert_eq!(f.forwarded, 2);
    assert!(f.lost.is_empty(), "{:?}", f.lost);
    // The request from lan0 leaves on wan0, the reply from wan0 on lan0: next hop's MAC, the
    // device's MAC, TTL 63, the header checksum updated, the capture timestamp kept.
    let wan = read_frames(&out.join("tx-wan0.pcapng"));
    assert_eq!(wan.len(), 1);
    assert_eq!(wan[0].0, T0);
    assert_eq!(&wan[0].1[..12], &[SERVER, WAN0].concat()[..]);
    assert_eq!(
        (&wan[0].1[26..34], wan[0].1[22]),
        (&[10, 0, 1, 2, 10, 0, 2, 2][..], 63)
    );
    assert_eq!(checksum::checksum(&wan[0].1[14..34]), 0);
    let lan = read_frames(&out.join("tx-lan0.pcapng"));
    assert_eq!(lan.len(), 1);
    assert_eq!(lan[0].0, T0 + 1_000);
    assert_eq!(&lan[0].1[..12], &[CLIENT, LAN0].concat()[..]);
    assert_eq!(
        (&lan[0].1[26..34], lan[0].1[22]),
        (&[10, 0, 2, 2, 10, 0, 1, 2][..], 63)
    );
    assert_eq!(checksum::checksum(&lan[0].1[14..34]), 0);
    assert_eq!(&lan[0].1[34..], &udp4(SERVER, WAN0, [0; 4], [0; 4])[34..]);
    // Each frame sent carries the verdict line of the packet it came from, on the interface
    // of the device it left by.
    if Command::new("tshark").arg("-v").output().is_err() {
        eprintln!("SKIPPED (tshark part): tshark not installed (apt-get install tshark)");
        return;
    }
    let fields = |name: &str| {
        let out = Command::new("tshark")
            .args(["-r", out.join(name).to_str().unwrap(), "-T", "fields"])
            .args(["-e", "frame.interface_name", "-e", "frame.comment"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(fields("tx-wan0.pcapng"), "wan0\t1 accept - - -\n");
    assert_eq!(
        fields("tx-lan0.pcapng"),
        "lan0\t2 accept - - - iif \"wan0\"\n"
    );
}

#[test]
fn a_classic_pcap_sends_the_reply_to_the_default_device_where_it_is_another_hosts() {
    // The same two frames without interface names both enter on lan0: the reply is addressed
    // to wan0's MAC, another host's on lan0 (PACKET_OTHERHOST), and is dropped.
    let tmp = tempfile::tempdir().unwrap();
    let report = gateway_replay(tmp.path(), false);
    let out = tmp.path().join("out");
    let f = report.summary.forward.as_ref().unwrap();
    assert_eq!(f.forwarded, 1);
    assert_eq!(read_frames(&out.join("tx-wan0.pcap")).len(), 1);
    assert!(read_frames(&out.join("tx-lan0.pcap")).is_empty());
    assert_eq!(read_frames(&out.join("dropped.pcap")).len(), 1);
}
