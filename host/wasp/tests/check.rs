//! `wasp check`: exit codes, error text, and printing back.

mod common;

use common::*;

#[test]
fn good_ruleset_exits_zero_and_prints_nothing() {
    let fw = firewall_dir();
    let out = wasp(&fw, &["check", "firewall.nft"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(stderr, "");
}

#[test]
fn print_with_handles_numbers_rules_as_the_kernel() {
    let fw = firewall_dir();
    let out = wasp(&fw, &["check", "--print", "-a", "firewall.nft"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    // Handles as `nft -a list ruleset` shows them after `nft -f firewall.nft` (nft 1.0.6):
    // chains 1-7, named sets 8-9, rules from 10, anonymous sets taking a handle each.
    for line in [
        "\t\tether type arp counter packets 0 bytes 0 accept # handle 10",
        "\t\tvlan id 1 vlan type 8021q vlan id 10 vlan type 8021q counter packets 0 bytes 0 log prefix \"office: triple vlan tag \" drop # handle 13",
        "\t\tmeta protocol != { ip, ip6 } counter packets 0 bytes 0 log prefix \"office: not ip \" drop # handle 17",
        "\t\tip daddr 172.16.238.131 tcp dport { 21, 22, 80 } counter packets 0 bytes 0 accept # handle 31",
        "\t\tcounter packets 0 bytes 0 log prefix \"office: lan6 out \" drop # handle 66",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in\n{stdout}");
    }
    let plain = wasp(&fw, &["check", "--print", "firewall.nft"]);
    let (plain, _) = text(&plain);
    assert!(!plain.contains("# handle"));
    assert!(plain.contains("ether type arp counter packets 0 bytes 0 accept\n"));
}

#[test]
fn bad_ruleset_exits_one_with_file_line_col() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("bad.nft"),
        "table netdev t {\n\tchain c {\n\t\ttcp dport 22 acept\n\t}\n}\n",
    )
    .unwrap();
    let out = wasp(tmp.path(), &["check", "bad.nft"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout, "");
    assert!(
        stderr.starts_with("wasp: bad.nft:3:16: error: "),
        "{stderr}"
    );
    assert!(stderr.contains("\t\ttcp dport 22 acept\n"), "{stderr}");
}

#[test]
fn missing_file_exits_one() {
    let tmp = tempfile::tempdir().unwrap();
    let out = wasp(tmp.path(), &["check", "nope.nft"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.starts_with("wasp: nope.nft: "), "{stderr}");
}

#[test]
fn usage_errors_exit_two() {
    let tmp = tempfile::tempdir().unwrap();
    let out = wasp(tmp.path(), &["check"]);
    assert_eq!(out.status.code(), Some(2));
    let out = wasp(tmp.path(), &["replay", "--ruleset", "x.nft"]);
    assert_eq!(out.status.code(), Some(2));
}
