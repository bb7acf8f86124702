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

/// `wasp check -j`: a JSON ruleset (bare objects, as `nft -j list ruleset` writes them) lists
/// as the same ruleset in text; a file that begins with `{` is JSON without `-j`; a bad JSON
/// rule is refused naming its JSON command and statement, exit 1.
#[test]
fn json_rulesets_check_and_print_as_their_text() {
    let dir = tempfile::tempdir().unwrap();
    let json = r#"{"nftables": [
        {"metainfo": {"json_schema_version": 1}},
        {"table": {"family": "netdev", "name": "f"}},
        {"chain": {"family": "netdev", "table": "f", "name": "in", "type": "filter", "hook": "ingress",
                   "dev": "lo", "prio": 0, "policy": "accept"}},
        {"rule": {"family": "netdev", "table": "f", "chain": "in", "expr": [
            {"match": {"op": "==", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": {"set": [53, {"range": [1000, 2000]}]}}},
            {"counter": null}, {"drop": null}]}}
    ]}"#;
    std::fs::write(dir.path().join("r.json"), json).unwrap();
    std::fs::write(
        dir.path().join("r.nft"),
        "table netdev f {\n chain in {\n type filter hook ingress device lo priority 0; policy accept;\n udp dport { 53, 1000-2000 } counter drop\n }\n}\n",
    )
    .unwrap();
    let from_json = wasp(dir.path(), &["check", "-j", "--print", "r.json"]);
    let from_text = wasp(dir.path(), &["check", "--print", "r.nft"]);
    let (j, jerr) = text(&from_json);
    assert!(from_json.status.success(), "{jerr}");
    assert_eq!(j, text(&from_text).0);
    assert!(j.contains("\t\tudp dport { 53, 1000-2000 } counter packets 0 bytes 0 drop\n"));
    // Without -j: a file that begins with `{` is JSON.
    let sniffed = wasp(dir.path(), &["check", "--print", "r.json"]);
    assert_eq!(text(&sniffed).0, j);

    let bad = json.replace("53,", "\"dns-ish\",");
    std::fs::write(dir.path().join("bad.json"), bad).unwrap();
    let out = wasp(dir.path(), &["check", "-j", "bad.json"]);
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.starts_with("wasp: bad.json: nftables[3].rule.expr[0]: error: "),
        "{err}"
    );
    assert!(err.contains("dns-ish"), "{err}");
}
