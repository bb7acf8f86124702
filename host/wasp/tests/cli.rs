//! Command-line messages and exit codes: usage errors exit 2 (as clap's), runtime errors 1,
//! and each message says what is wrong and what to do.

mod common;

use common::*;

const RULESET: &str = "table netdev t {\n\tchain c {\n\t\ttype filter hook ingress device \"lan0\" priority 0; policy accept;\n\t\tudp dport 53 drop\n\t}\n}\n";

/// A folder with `r.nft` (RULESET) and `c.pcapng` (one UDP frame).
fn setup() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("r.nft"), RULESET).unwrap();
    let frame = eth(
        1,
        0x0800,
        &ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, &udp(1000, 53)),
    );
    std::fs::write(tmp.path().join("c.pcapng"), pcapng(&[(1, frame)])).unwrap();
    tmp
}

#[test]
fn replay_usage_errors_exit_two() {
    let tmp = setup();
    for args in [
        &["replay", "--in", "c.pcapng"][..],
        &["replay", "--ruleset", "r.nft"][..],
        &["replay"][..],
        &["replay", "--out", "o"][..],
    ] {
        let out = wasp(tmp.path(), args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stdout, "", "{args:?}");
        assert!(stderr.contains("Usage:"), "{args:?}: {stderr}");
    }
}

#[test]
fn out_that_is_a_file_is_not_a_directory() {
    let tmp = setup();
    std::fs::write(tmp.path().join("plain"), "x").unwrap();
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            "r.nft",
            "--in",
            "c.pcapng",
            "--out",
            "plain",
        ],
    );
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr,
        "wasp: plain: exists and is not a directory (the output directory receives accepted.pcap and dropped.pcap)\n"
    );
}

#[test]
fn a_sample_directory_needs_a_sample_toml() {
    let tmp = setup();
    std::fs::create_dir(tmp.path().join("empty")).unwrap();
    let out = wasp(tmp.path(), &["replay", "empty"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr,
        "wasp: empty: no sample.toml here: a sample directory holds a sample.toml (see samples/README.md); or use --ruleset FILE --in CAPTURE\n"
    );
    // A capture given where the sample directory goes.
    let out = wasp(tmp.path(), &["replay", "c.pcapng"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr,
        "wasp: c.pcapng: not a directory: a sample directory holds a sample.toml (see samples/README.md); or use --ruleset FILE --in CAPTURE\n"
    );
}

#[test]
fn replay_names_the_base_chains_it_does_not_run() {
    let tmp = setup();
    std::fs::write(
        tmp.path().join("inet.nft"),
        "table inet f {\n\tchain input {\n\t\ttype filter hook input priority 0; policy drop;\n\t}\n\tchain forward {\n\t\ttype filter hook forward priority 0;\n\t}\n}\n",
    )
    .unwrap();
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            "inet.nft",
            "--in",
            "c.pcapng",
            "--out",
            "o",
        ],
    );
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("note: wasp replay runs ingress base chains (netdev and inet families) only; these base chains are not run: inet f input (hook input), inet f forward (hook forward)\n"),
        "{stderr}"
    );
    // A ruleset with only netdev ingress base chains gets no such note.
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            "r.nft",
            "--in",
            "c.pcapng",
            "--out",
            "o",
        ],
    );
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("not run"), "{stderr}");
}

#[test]
fn replay_list_prints_the_ruleset_with_its_counts() {
    let tmp = setup();
    std::fs::write(
        tmp.path().join("k.nft"),
        "table netdev t {\n\tchain c {\n\t\ttype filter hook ingress device \"lan0\" priority 0; policy accept;\n\t\tudp dport 53 counter packets 2 bytes 10 drop\n\t}\n}\n",
    )
    .unwrap();
    let out = wasp(
        tmp.path(),
        &["replay", "--ruleset", "k.nft", "--in", "c.pcapng", "--list"],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    // The frame: IPv4 20 + UDP 8 + 4 bytes of payload, skb->len 32.
    assert!(
        stdout.contains("\t\tudp dport 53 counter packets 3 bytes 42 drop\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("counters\n  t c handle 2: counter packets 3 bytes 42\n"),
        "{stdout}"
    );
}

/// `--list` shows what the packet path put into its sets (`add @s`, `update @s`), with the
/// time left at the capture's end and the counts of a counting set.
#[test]
fn replay_list_shows_the_elements_the_packet_path_added() {
    let tmp = setup();
    std::fs::write(
        tmp.path().join("d.nft"),
        "table netdev t {\n\tset seen {\n\t\ttype ipv4_addr\n\t\tflags dynamic,timeout\n\t\ttimeout 1m\n\t}\n\tset cnt {\n\t\ttype ipv4_addr . inet_service\n\t\tflags dynamic\n\t\tcounter\n\t}\n\tchain c {\n\t\ttype filter hook ingress device \"lan0\" priority 0; policy accept;\n\t\tudp dport 53 add @seen { ip saddr }\n\t\tudp dport 53 update @cnt { ip daddr . udp dport }\n\t}\n}\n",
    )
    .unwrap();
    let out = wasp(
        tmp.path(),
        &["replay", "--ruleset", "d.nft", "--in", "c.pcapng", "--list"],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let elements: Vec<&str> = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("elements = "))
        .collect();
    // The capture's one DNS query (10.0.0.1 -> 10.0.0.2, skb->len 32), added at its time,
    // which is also the capture's end: a whole timeout left.
    assert_eq!(
        elements,
        [
            "\t\telements = { 10.0.0.1 expires 1m }",
            "\t\telements = { 10.0.0.2 . 53 counter packets 1 bytes 32 }"
        ],
        "{stdout}"
    );
}
