//! `wasp replay` end to end: verdict lines for known packets, output captures, summary, trace,
//! pcapng input, sample directories, and what happens on bad input.
//!
//! The expected verdicts come from the kernel's behaviour: `tests/data/two-chains.nft` and
//! `samples/firewall/office.expected` were checked against kernel nftables (nft 1.0.6) in a
//! network namespace with `tests/conformance`'s `kernel-verdicts` (same lines, frame by frame;
//! office.pcap's 10-byte runt frame cannot be sent to a kernel and is wasp's own reading).

mod common;

use std::path::Path;

use common::*;

/// The six frames of [`two_chains_frames`] and what the kernel does with each under
/// `two-chains.nft` (base chains "first" at -10, then "second" at +10).
const TWO_CHAINS_VERDICTS: &str = "\
1 drop t second policy
2 drop t first 6
3 drop t zone 5
4 accept t second 8
5 accept t second 8
6 drop t second policy
";

fn two_chains_frames() -> Vec<(u64, Vec<u8>)> {
    let lan = [10, 0, 0, 5];
    let other = [192, 168, 1, 1];
    let server = [10, 0, 0, 1];
    let t0 = 1_700_000_000_000_000_000u64;
    vec![
        // DNS from the LAN: zone accepts, so "first" accepts; "second" has no rule for it.
        (t0, eth(5, 0x0800, &ipv4(lan, server, 17, &udp(40000, 53)))),
        // The banned host.
        (
            t0 + 1_000,
            eth(
                66,
                0x0800,
                &ipv4([10, 0, 0, 66], server, 6, &tcp(40000, 443, 0x02)),
            ),
        ),
        // ssh from the LAN: dropped in the regular chain.
        (
            t0 + 2_000,
            eth(5, 0x0800, &ipv4(lan, server, 6, &tcp(40000, 22, 0x02))),
        ),
        // HTTPS from the LAN: zone returns, "first" policy accepts, "second" accepts.
        (
            t0 + 3_000,
            eth(5, 0x0800, &ipv4(lan, server, 6, &tcp(40000, 443, 0x02))),
        ),
        // HTTPS from elsewhere: "first" policy accepts, "second" accepts.
        (
            t0 + 4_000,
            eth(9, 0x0800, &ipv4(other, server, 6, &tcp(40000, 443, 0x10))),
        ),
        // ARP: both policies; "second" drops.
        (t0 + 5_000, eth(9, 0x0806, &arp_request())),
    ]
}

/// An ARP request (RFC 826, 28 bytes) from 10.0.0.9 for 10.0.0.1.
fn arp_request() -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4, 0, 1, 0x02, 0, 0, 0, 0, 9, 10, 0, 0, 9];
    a.extend_from_slice(&[0, 0, 0, 0, 0, 0, 10, 0, 0, 1]);
    a
}

fn two_chains_ruleset() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/two-chains.nft")
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.display().to_string()
}

#[test]
fn verdict_lines_outputs_and_summary_for_known_packets() {
    let tmp = tempfile::tempdir().unwrap();
    let frames = two_chains_frames();
    let frame_refs: Vec<(u64, &[u8])> = frames.iter().map(|(t, f)| (*t, f.as_slice())).collect();
    let cap = write(tmp.path(), "in.pcap", &common::pcap_bytes(&frame_refs));
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            two_chains_ruleset().to_str().unwrap(),
            "--in",
            &cap,
            "--verdicts",
            "v.txt",
            "--json",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let verdicts = std::fs::read_to_string(tmp.path().join("v.txt")).unwrap();
    assert_eq!(verdicts, TWO_CHAINS_VERDICTS);

    // Default output directory: out/ under the current directory. Frames keep their bytes and
    // timestamps and are split by final verdict.
    let accepted = read_frames(&tmp.path().join("out/accepted.pcap"));
    let dropped = read_frames(&tmp.path().join("out/dropped.pcap"));
    assert_eq!(accepted, vec![frames[3].clone(), frames[4].clone()]);
    assert_eq!(
        dropped,
        vec![
            frames[0].clone(),
            frames[1].clone(),
            frames[2].clone(),
            frames[5].clone()
        ]
    );

    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["packets"], 6);
    assert_eq!(v["accepted"], 2);
    assert_eq!(v["dropped"], 4);
    assert_eq!(v["malformed"], 0);
    assert_eq!(v["in_dev"], "wasp0");
    // Hook order: first (-10), then second (+10). "first" sees all six and drops 2 and 3;
    // "second" sees the four that "first" accepted and drops 1 and 6.
    let chains = v["chains"].as_array().unwrap();
    assert_eq!(chains.len(), 2);
    assert_eq!(
        (
            chains[0]["chain"].as_str(),
            chains[0]["packets"].as_u64(),
            chains[0]["accepted"].as_u64(),
            chains[0]["dropped"].as_u64()
        ),
        (Some("first"), Some(6), Some(4), Some(2))
    );
    assert_eq!(
        (
            chains[1]["chain"].as_str(),
            chains[1]["packets"].as_u64(),
            chains[1]["accepted"].as_u64(),
            chains[1]["dropped"].as_u64()
        ),
        (Some("second"), Some(4), Some(2), Some(2))
    );
    assert_eq!(v["inputs"][0]["packets"], 6);
    assert_eq!(v["inputs"][0]["status"], "read");
    // Deciding rules in ruleset order (chains as declared: zone, first, second).
    let by: Vec<String> = v["decided_by"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {} {} {}",
                r["chain"].as_str().unwrap(),
                r["rule"],
                r["verdict"].as_str().unwrap(),
                r["packets"]
            )
        })
        .collect();
    assert_eq!(
        by,
        [
            "zone 5 drop 1",
            "first 6 drop 1",
            "second 8 accept 2",
            "second null drop 2"
        ]
    );
}

#[test]
fn packets_on_a_device_without_base_chains_are_unseen() {
    let tmp = tempfile::tempdir().unwrap();
    let frames = two_chains_frames();
    let frame_refs: Vec<(u64, &[u8])> = frames.iter().map(|(t, f)| (*t, f.as_slice())).collect();
    let cap = write(tmp.path(), "in.pcap", &common::pcap_bytes(&frame_refs));
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            two_chains_ruleset().to_str().unwrap(),
            "--in",
            &cap,
            "--in-dev",
            "eth7",
            "--verdicts",
            "v.txt",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("v.txt")).unwrap(),
        "1 accept - - -\n2 accept - - -\n3 accept - - -\n4 accept - - -\n5 accept - - -\n6 accept - - -\n"
    );
    assert!(
        stderr.contains("note: no netdev ingress base chain on device \"eth7\""),
        "{stderr}"
    );
    assert!(
        stdout.contains("packets 6  accepted 6  dropped 0  malformed 0  unseen 6"),
        "{stdout}"
    );
}

#[test]
fn several_inputs_count_on_and_pcapng_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let frames = two_chains_frames();
    let refs: Vec<(u64, &[u8])> = frames[..3]
        .iter()
        .map(|(t, f)| (*t, f.as_slice()))
        .collect();
    let a = write(tmp.path(), "a.pcap", &common::pcap_bytes(&refs));
    // The other three as pcapng, microsecond timestamps.
    let ng: Vec<(u64, Vec<u8>)> = frames[3..]
        .iter()
        .map(|(t, f)| (t / 1_000, f.clone()))
        .collect();
    let b = write(tmp.path(), "b.pcapng", &pcapng(&ng));
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            two_chains_ruleset().to_str().unwrap(),
            "--in",
            &a,
            "--in",
            &b,
            "--out",
            "res",
            "--verdicts",
            "v.txt",
            "--json",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("v.txt")).unwrap(),
        TWO_CHAINS_VERDICTS
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["inputs"][0]["format"], "pcap");
    assert_eq!(v["inputs"][1]["format"], "pcapng");
    assert_eq!(v["inputs"][1]["packets"], 3);
    assert_eq!(v["inputs"][1]["accepted"], 2);
    // pcapng timestamps come out unchanged.
    let accepted = read_frames(&tmp.path().join("res/accepted.pcap"));
    assert_eq!(accepted, vec![frames[3].clone(), frames[4].clone()]);
}

#[test]
fn an_input_that_starts_before_the_previous_one_ended_gets_a_note() {
    // With conntrack (a gateway and an IP hook), whose timeouts run on the packets' clock.
    let tmp = tempfile::tempdir().unwrap();
    let gw = write(tmp.path(), "gw.conf", b"address lan0 10.0.0.254/24\n");
    let rules = write(
        tmp.path(),
        "r.nft",
        b"table inet f {\n\tchain forward {\n\t\ttype filter hook forward priority 0;\n\t}\n}\n",
    );
    let frames = two_chains_frames();
    let pcap = |r: std::ops::Range<usize>| {
        let refs: Vec<(u64, &[u8])> = frames[r].iter().map(|(t, f)| (*t, f.as_slice())).collect();
        common::pcap_bytes(&refs)
    };
    // b.pcap's first packet is 2 µs before a.pcap's last; c.pcap follows on.
    let late = write(tmp.path(), "a.pcap", &pcap(3..6));
    let early = write(tmp.path(), "b.pcap", &pcap(3..4));
    let after = write(tmp.path(), "c.pcap", &pcap(5..6));
    let args = |ins: &[&str]| {
        let mut a = vec![
            "replay",
            "--ruleset",
            &rules,
            "--gateway",
            &gw,
            "--in-dev",
            "lan0",
        ];
        for i in ins {
            a.extend_from_slice(&["--in", i]);
        }
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let run = |ins: &[&str]| {
        let a = args(ins);
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        let out = wasp(tmp.path(), &refs);
        assert!(out.status.success());
        text(&out).1
    };
    let stderr = run(&[&late, &early]);
    assert!(
        stderr.contains(&format!(
            "{early} starts 0.000 s before the previous input's last packet: the packet clock goes back"
        )),
        "{stderr}"
    );
    let stderr = run(&[&late, &after]);
    assert!(!stderr.contains("goes back"), "{stderr}");
    // Without conntrack the clock going back changes nothing: no note.
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            two_chains_ruleset().to_str().unwrap(),
            "--in",
            &late,
            "--in",
            &early,
        ],
    );
    assert!(!text(&out).1.contains("goes back"));
}

#[test]
fn trace_reads_like_nft_monitor_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let frames = two_chains_frames();
    let refs: Vec<(u64, &[u8])> = frames.iter().map(|(t, f)| (*t, f.as_slice())).collect();
    let cap = write(tmp.path(), "in.pcap", &common::pcap_bytes(&refs));
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            two_chains_ruleset().to_str().unwrap(),
            "--in",
            &cap,
            "--trace",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let trace: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("trace id"))
        .collect();
    // What `nft monitor trace` printed for these frames (nft 1.0.6, the ruleset loaded with a
    // `meta nftrace set 1` rule first in "first", frames sent with tcpreplay into a veth),
    // without that rule's lines, the trailing spaces, and with trace ids 1..6 in place of the
    // kernel's hashes. A packet line opens each base chain; the implicit return from "zone"
    // prints nothing.
    let ether = |s: u8| {
        format!(
            "packet: iif \"wasp0\" ether saddr 02:00:00:00:00:{s:02x} ether daddr 02:00:00:00:00:01"
        )
    };
    let ip = |src: &str, proto: &str, len: u16| {
        format!(
            "ip saddr {src} ip daddr 10.0.0.1 ip dscp cs0 ip ecn not-ect ip ttl 64 ip id 1 ip protocol {proto} ip length {len}"
        )
    };
    let p1 = format!(
        "{} {} udp sport 40000 udp dport 53 udp length 12 @th,64,32 0x77617370",
        ether(5),
        ip("10.0.0.5", "udp", 32)
    );
    let syn = |s: u8, src: &str, dport: u16, flags: &str| {
        format!(
            "{} {} tcp sport 40000 tcp dport {dport} tcp flags == {flags} tcp window 64240",
            ether(s),
            ip(src, "tcp", 40)
        )
    };
    let p2 = syn(0x42, "10.0.0.66", 443, "syn");
    let p3 = syn(5, "10.0.0.5", 22, "syn");
    let p4 = syn(5, "10.0.0.5", 443, "syn");
    let p5 = syn(9, "192.168.1.1", 443, "ack");
    let p6 = format!("{} arp operation request", ether(9));
    let expected = vec![
        format!("trace id 00000001 netdev t first {p1}"),
        "trace id 00000001 netdev t first rule ip saddr 10.0.0.0/24 jump zone (verdict jump zone)"
            .into(),
        "trace id 00000001 netdev t zone rule udp dport 53 accept (verdict accept)".into(),
        format!("trace id 00000001 netdev t second {p1}"),
        "trace id 00000001 netdev t second policy drop".into(),
        format!("trace id 00000002 netdev t first {p2}"),
        "trace id 00000002 netdev t first rule ip saddr 10.0.0.66 drop (verdict drop)".into(),
        format!("trace id 00000003 netdev t first {p3}"),
        "trace id 00000003 netdev t first rule ip saddr 10.0.0.0/24 jump zone (verdict jump zone)"
            .into(),
        "trace id 00000003 netdev t zone rule tcp dport 22 drop (verdict drop)".into(),
        format!("trace id 00000004 netdev t first {p4}"),
        "trace id 00000004 netdev t first rule ip saddr 10.0.0.0/24 jump zone (verdict jump zone)"
            .into(),
        "trace id 00000004 netdev t first policy accept".into(),
        format!("trace id 00000004 netdev t second {p4}"),
        "trace id 00000004 netdev t second rule tcp dport 443 accept (verdict accept)".into(),
        format!("trace id 00000005 netdev t first {p5}"),
        "trace id 00000005 netdev t first policy accept".into(),
        format!("trace id 00000005 netdev t second {p5}"),
        "trace id 00000005 netdev t second rule tcp dport 443 accept (verdict accept)".into(),
        format!("trace id 00000006 netdev t first {p6}"),
        "trace id 00000006 netdev t first policy accept".into(),
        format!("trace id 00000006 netdev t second {p6}"),
        "trace id 00000006 netdev t second policy drop".into(),
    ];
    assert_eq!(trace, expected);
}

#[test]
fn office_capture_gives_the_kernels_verdicts() {
    let tmp = tempfile::tempdir().unwrap();
    let fw = firewall_dir();
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            fw.join("firewall.nft").to_str().unwrap(),
            "--in",
            fw.join("office.pcap").to_str().unwrap(),
            "--verdicts",
            "v.txt",
            "--json",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let expected = std::fs::read_to_string(fw.join("office.expected")).unwrap();
    let got = std::fs::read_to_string(tmp.path().join("v.txt")).unwrap();
    for (g, e) in got.lines().zip(expected.lines()) {
        assert_eq!(g, e);
    }
    assert_eq!(got.lines().count(), 300);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let accepted = expected.lines().filter(|l| l.contains(" accept ")).count();
    assert_eq!(v["accepted"].as_u64(), Some(accepted as u64));
    // The four frames built malformed on purpose.
    assert_eq!(v["malformed"], 4);
}

#[test]
fn sample_directory_runs_with_shared_captures_or_without() {
    let tmp = tempfile::tempdir().unwrap();
    let fw = firewall_dir();
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            fw.to_str().unwrap(),
            "--out",
            "res",
            "--verdicts",
            "v.txt",
            "--json",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let inputs = v["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 6);
    assert_eq!(inputs[0]["path"], "office.pcap");
    assert_eq!(inputs[0]["packets"], 300);
    let shared = fw.join("../../../shared/pcaps/zeek-var-services-std-ports.pcap");
    if shared.exists() {
        // Every capture is there: 300 + 263 + 3 + 47 + 4 + 1 frames.
        assert_eq!(v["packets"], 618);
        let counts: Vec<(u64, u64)> = inputs
            .iter()
            .map(|i| {
                (
                    i["accepted"].as_u64().unwrap(),
                    i["dropped"].as_u64().unwrap(),
                )
            })
            .collect();
        // zeek LAN: 29 blocklisted + 2 LAN-sync broadcasts dropped; the VLAN stacks, the MPLS
        // frames, the foreign untagged flow and the routing headers all dropped; the
        // management VLAN flow (14) accepted.
        assert_eq!(&counts[1..], &[(232, 31), (0, 3), (14, 33), (0, 4), (0, 1)]);
    } else {
        assert_eq!(v["packets"], 300);
        assert_eq!(inputs[1]["status"], "skipped");
        assert!(
            stderr.contains(
                "note: skipping ../../../shared/pcaps/zeek-var-services-std-ports.pcap: not found"
            ),
            "{stderr}"
        );
    }
    assert!(tmp.path().join("res/accepted.pcap").exists());
}

#[test]
fn sample_toml_missing_optional_is_skipped_missing_required_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(two_chains_ruleset(), dir.join("rules.nft")).unwrap();
    let frames = two_chains_frames();
    let refs: Vec<(u64, &[u8])> = frames.iter().map(|(t, f)| (*t, f.as_slice())).collect();
    write(&dir, "a.pcap", &common::pcap_bytes(&refs));
    std::fs::write(
        dir.join("sample.toml"),
        "ruleset = \"rules.nft\"\n[[capture]]\npath = \"a.pcap\"\nrequired = true\n[[capture]]\npath = \"gone.pcap\"\n",
    )
    .unwrap();
    let out = wasp(tmp.path(), &["replay", "s", "--verdicts", "v.txt"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("note: skipping gone.pcap: not found"),
        "{stderr}"
    );
    assert!(stdout.contains("gone.pcap  skipped: not found"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("v.txt")).unwrap(),
        TWO_CHAINS_VERDICTS
    );
    // Default out dir of a sample: DIR/out.
    assert_eq!(read_frames(&dir.join("out/accepted.pcap")).len(), 2);

    std::fs::write(
        dir.join("sample.toml"),
        "ruleset = \"rules.nft\"\n[[capture]]\npath = \"gone.pcap\"\nrequired = true\n",
    )
    .unwrap();
    let out = wasp(tmp.path(), &["replay", "s"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr, "wasp: s/gone.pcap: capture not found\n");
}

#[test]
fn bad_ruleset_is_an_error_and_nothing_is_processed() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("bad.nft"),
        "table netdev t {\n\tchain c {\n\t\ttype filter hook ingress device \"wasp0\" priority 0;\n\t\ttcp dport htps accept\n\t}\n}\n",
    )
    .unwrap();
    let office = firewall_dir().join("office.pcap");
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            "bad.nft",
            "--in",
            office.to_str().unwrap(),
            "--verdicts",
            "v.txt",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.starts_with("wasp: bad.nft:4:13: error: "),
        "{stderr}"
    );
    assert!(stderr.contains("tcp dport htps accept"), "{stderr}");
    assert_eq!(stdout, "");
    assert!(!tmp.path().join("v.txt").exists());
    assert!(!tmp.path().join("out").exists());
}

#[test]
fn truncated_capture_keeps_results_before_the_fault() {
    let tmp = tempfile::tempdir().unwrap();
    let fw = firewall_dir();
    let bytes = std::fs::read(fw.join("office.pcap")).unwrap();
    // Offset and length of record 101 (index 100).
    let mut r = wasp_io::capture::CaptureReader::new(Path::new("x"), &bytes[..]).unwrap();
    for _ in 0..100 {
        r.next_frame().unwrap().unwrap();
    }
    let rec = r.next_frame().unwrap().unwrap();
    let (offset, len) = (rec.offset, rec.data.len());
    let cut = write(tmp.path(), "cut.pcap", &bytes[..offset as usize + 16 + 5]);
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            fw.join("firewall.nft").to_str().unwrap(),
            "--in",
            &cut,
            "--verdicts",
            "v.txt",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    // The sample's `log` lines come first on stderr, then the fault.
    let fault: String = stderr
        .lines()
        .filter(|l| !l.starts_with("office: "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        fault,
        format!(
            "wasp: {cut}: truncated at byte offset {offset}: record holds {len} captured bytes, only 5 left after its header\n"
        )
    );
    // The 100 packets before the fault keep their verdicts and outputs.
    let expected: Vec<String> = std::fs::read_to_string(fw.join("office.expected"))
        .unwrap()
        .lines()
        .take(100)
        .map(str::to_string)
        .collect();
    let got: Vec<String> = std::fs::read_to_string(tmp.path().join("v.txt"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(got, expected);
    let written = read_frames(&tmp.path().join("out/accepted.pcap")).len()
        + read_frames(&tmp.path().join("out/dropped.pcap")).len();
    assert_eq!(written, 100);
    assert!(stdout.contains("(stopped at a fault)"), "{stdout}");

    // A capture after the faulty one is still read; the run still exits 1.
    let whole = fw.join("office.pcap");
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            fw.join("firewall.nft").to_str().unwrap(),
            "--in",
            &cut,
            "--in",
            whole.to_str().unwrap(),
            "--verdicts",
            "v2.txt",
            "--out",
            "o2",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let got: Vec<String> = std::fs::read_to_string(tmp.path().join("v2.txt"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(
        got.len(),
        400,
        "100 before the fault, then all 300 of the next capture"
    );
    assert_eq!(got[..100], expected[..]);
    let renumbered: Vec<String> = std::fs::read_to_string(fw.join("office.expected"))
        .unwrap()
        .lines()
        .map(|l| {
            let (i, rest) = l.split_once(' ').unwrap();
            format!("{} {rest}", i.parse::<u64>().unwrap() + 100)
        })
        .collect();
    assert_eq!(got[100..], renumbered[..]);
}

#[test]
fn a_file_that_is_not_a_capture_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let notes = write(tmp.path(), "notes.txt", b"hello, this is text\n");
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            two_chains_ruleset().to_str().unwrap(),
            "--in",
            &notes,
            "--verdicts",
            "v.txt",
        ],
    );
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr,
        format!(
            "wasp: {notes}: not a capture file: byte offset 0 holds 0x68656c6c, not a pcap or pcapng magic number\n"
        )
    );
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("v.txt")).unwrap(),
        ""
    );
}

#[test]
fn missing_input_is_an_error_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            two_chains_ruleset().to_str().unwrap(),
            "--in",
            "nowhere.pcap",
        ],
    );
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr, "wasp: nowhere.pcap: capture not found\n");
    assert!(!tmp.path().join("out").exists());
}

#[test]
fn library_replay_reports_the_fault_with_the_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let frames = two_chains_frames();
    let refs: Vec<(u64, &[u8])> = frames.iter().map(|(t, f)| (*t, f.as_slice())).collect();
    let mut bytes = common::pcap_bytes(&refs);
    bytes.extend_from_slice(&[1, 2, 3]);
    let cap = tmp.path().join("c.pcap");
    std::fs::write(&cap, &bytes).unwrap();
    let opts = wasp::ReplayOptions {
        ruleset: two_chains_ruleset(),
        inputs: vec![wasp::Input::required(&cap)],
        out_dir: None,
        ..wasp::ReplayOptions::default()
    };
    let report = wasp::replay(&opts, None, &mut wasp::progress::Progress::hidden()).unwrap();
    assert_eq!(report.summary.packets, 6);
    assert_eq!(report.summary.accepted, 2);
    let fault = report.fault.unwrap();
    assert_eq!(
        fault,
        wasp_io::capture::CaptureError::Truncated {
            path: cap,
            offset: bytes.len() as u64 - 3,
            what: "record header needs 16 bytes, 3 left".to_string(),
        }
    );
}

/// Per-element counters after a run, in the JSON summary and the table. Kernel check (nft
/// 1.0.6, kernel 6.18): this ruleset on a veth in a namespace, the capture sent with
/// tcpreplay, then `nft list set netdev t ports` showed `1-1023 counter packets 29 bytes 1925,
/// 5353 counter packets 17 bytes 1522`.
#[test]
fn set_element_counters_after_a_run() {
    let cap = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/pcaps/zeek-var-services-std-ports.pcap");
    if !cap.exists() {
        eprintln!("SKIPPED: {} not found", cap.display());
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let rs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/set-counters.nft");
    let args = [
        "replay",
        "--ruleset",
        rs.to_str().unwrap(),
        "--in",
        cap.to_str().unwrap(),
    ];
    let mut json = args.to_vec();
    json.push("--json");
    let out = wasp(tmp.path(), &json);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let got: Vec<(String, u64, u64)> = v["set_counters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!((&c["table"], &c["set"]), (&"t".into(), &"ports".into()));
            (
                c["element"].as_str().unwrap().to_string(),
                c["packets"].as_u64().unwrap(),
                c["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("1-1023".to_string(), 29, 1925),
            ("5353".to_string(), 17, 1522)
        ]
    );
    let out = wasp(tmp.path(), &args);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("set element counters\n  t @ports { 1-1023 }: packets 29 bytes 1925\n  t @ports { 5353 }: packets 17 bytes 1522\n"),
        "{stdout}"
    );
}

/// `--format pcapng`: the same frames as the pcap output, byte for byte, each with its verdict
/// line as its comment and the interface of the device it entered on; tshark reads it.
#[test]
fn pcapng_output_carries_each_packets_verdict_line() {
    let tmp = tempfile::tempdir().unwrap();
    let frames = two_chains_frames();
    let refs: Vec<(u64, &[u8])> = frames.iter().map(|(t, f)| (*t, f.as_slice())).collect();
    let cap = write(tmp.path(), "in.pcap", &pcap_bytes(&refs));
    let rs = two_chains_ruleset();
    let run = |extra: &[&str]| {
        let mut args = vec!["replay", "--ruleset", rs.to_str().unwrap(), "--in", &cap];
        args.extend_from_slice(extra);
        let out = wasp(tmp.path(), &args);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stderr}");
        stdout
    };
    let pcap_summary = run(&["--out", "a"]);
    let ng_summary = run(&["--out", "b", "--format", "pcapng", "--verdicts", "v.txt"]);
    assert_eq!(pcap_summary, ng_summary);
    // A pcap input gives pcap outputs by default; --format pcapng gives .pcapng files.
    assert!(tmp.path().join("a/accepted.pcap").exists());
    assert!(!tmp.path().join("b/accepted.pcap").exists());
    for name in ["accepted", "dropped"] {
        let pcap = read_frames(&tmp.path().join(format!("a/{name}.pcap")));
        let ng = read_frames(&tmp.path().join(format!("b/{name}.pcapng")));
        assert_eq!(pcap, ng, "{name}");
    }
    let dropped = tmp.path().join("b/dropped.pcapng");
    // The reader's view: every frame on interface "wasp0", the input device.
    let mut r = wasp_io::capture::CaptureReader::open(&dropped).unwrap();
    while let Some(f) = r.next_frame() {
        assert_eq!(f.unwrap().interface, Some("wasp0"));
    }
    // tshark's view: the comments are the verdict lines of the dropped packets.
    if std::process::Command::new("tshark")
        .arg("-v")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED (tshark part): tshark not installed (apt-get install tshark)");
        return;
    }
    let out = std::process::Command::new("tshark")
        .args(["-r", dropped.to_str().unwrap(), "-T", "fields"])
        .args(["-e", "frame.interface_name", "-e", "frame.comment"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want: String = TWO_CHAINS_VERDICTS
        .lines()
        .filter(|l| l.contains(" drop "))
        .map(|l| format!("wasp0\t{l}\n"))
        .collect();
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("v.txt")).unwrap(),
        TWO_CHAINS_VERDICTS
    );
}

/// `--in -` reads standard input as a stream: the same verdicts as from the file.
#[test]
fn standard_input_is_read_as_a_capture() {
    let tmp = tempfile::tempdir().unwrap();
    let frames = two_chains_frames();
    let refs: Vec<(u64, &[u8])> = frames.iter().map(|(t, f)| (*t, f.as_slice())).collect();
    let cap = write(tmp.path(), "in.pcap", &pcap_bytes(&refs));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasp"))
        .args([
            "replay",
            "--ruleset",
            two_chains_ruleset().to_str().unwrap(),
        ])
        .args(["--in", "-", "--verdicts", "v.txt", "--json"])
        .current_dir(tmp.path())
        .stdin(std::fs::File::open(&cap).unwrap())
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("v.txt")).unwrap(),
        TWO_CHAINS_VERDICTS
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (&v["inputs"][0]["path"], &v["inputs"][0]["packets"]),
        (&"-".into(), &6.into())
    );
    assert_eq!(
        read_frames(&tmp.path().join("out/accepted.pcap")),
        vec![frames[3].clone(), frames[4].clone()]
    );
}

/// A source that never ends and is not a capture: refused at its first four bytes.
#[test]
fn dev_zero_is_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let start = std::time::Instant::now();
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            two_chains_ruleset().to_str().unwrap(),
            "--in",
            "/dev/zero",
        ],
    );
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr,
        "wasp: /dev/zero: not a capture file: byte offset 0 holds 0x00000000, not a pcap or pcapng magic number\n"
    );
    // Not a timing assertion on the code's speed: a reader of /dev/zero that did not stop
    // would never return at all.
    assert!(start.elapsed() < std::time::Duration::from_secs(60));
}
