//! The translator's unit tests: JSON commands to nft lines, and errors told in JSON terms.

use super::*;

fn lines(doc: &str) -> Vec<String> {
    translate(doc, "t.json")
        .unwrap_or_else(|e| panic!("{e}"))
        .text
        .lines()
        .map(str::to_string)
        .collect()
}

fn error(doc: &str) -> String {
    match parse_str(doc, "t.json") {
        Ok(_) => panic!("accepted: {doc}"),
        Err(e) => e.to_string(),
    }
}

const MAN_PAGE_EXAMPLE: &str = r#"{ "nftables": [
    { "metainfo": { "version": "1.0.6", "json_schema_version": 1 } },
    { "flush": { "ruleset": null }},
    { "add": { "table": { "family": "inet", "name": "mytable" }}},
    { "add": { "chain": { "family": "inet", "table": "mytable", "name": "mychain" }}},
    { "add": { "rule": { "family": "inet", "table": "mytable", "chain": "mychain",
        "expr": [
            { "match": { "op": "==", "left": { "payload": { "protocol": "tcp", "field": "dport" }}, "right": 22 }},
            { "accept": null }
        ] }}}
]}"#;

#[test]
fn the_man_page_example_is_its_text_form() {
    assert_eq!(
        lines(MAN_PAGE_EXAMPLE),
        [
            "flush ruleset",
            "add table inet mytable",
            "add chain inet mytable mychain",
            "add rule inet mytable mychain tcp dport == 22 accept",
        ]
    );
    let json = parse_str(MAN_PAGE_EXAMPLE, "t.json").unwrap();
    let text = crate::parse_str(
        "table inet mytable {\n chain mychain {\n tcp dport 22 accept\n }\n}\n",
        "t.nft",
    )
    .unwrap();
    assert_eq!(
        crate::print_ruleset(&json, true),
        crate::print_ruleset(&text, true)
    );
}

#[test]
fn bare_objects_are_add_as_a_listing_writes_them() {
    let doc = r#"{"nftables": [
        {"table": {"family": "netdev", "name": "f", "handle": 3}},
        {"chain": {"family": "netdev", "table": "f", "name": "in", "handle": 1,
                   "type": "filter", "hook": "ingress", "prio": -150, "dev": "eth0", "policy": "drop"}},
        {"set": {"family": "netdev", "table": "f", "name": "blk", "type": ["ipv4_addr", "inet_service"],
                 "flags": ["interval"], "timeout": 60, "elem": [{"concat": [{"prefix": {"addr": "10.0.0.0", "len": 8}}, {"range": [22, 80]}]}]}},
        {"map": {"family": "netdev", "table": "f", "name": "m", "type": "ipv4_addr", "map": "mark", "elem": [["10.0.0.1", 7]]}}
    ]}"#;
    assert_eq!(
        lines(doc),
        [
            "add table netdev f",
            "add chain netdev f in { type filter hook ingress device \"eth0\" priority -150; policy drop; }",
            "add set netdev f blk { type ipv4_addr . inet_service; flags interval; timeout 60s; elements = { 10.0.0.0/8 . 22-80 }; }",
            "add map netdev f m { type ipv4_addr : mark; elements = { 10.0.0.1 : 7 }; }",
        ]
    );
}

#[test]
fn statements_translate_to_their_text() {
    let rule = |expr: &str| {
        let doc = format!(
            r#"{{"nftables": [{{"add": {{"rule": {{"family": "ip", "table": "t", "chain": "c", "expr": {expr}}}}}}}]}}"#
        );
        let l = lines(&doc);
        l[0].strip_prefix("add rule ip t c ").unwrap().to_string()
    };
    assert_eq!(
        rule(
            r#"[{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": ["established", "related"]}}]"#
        ),
        "ct state established,related"
    );
    assert_eq!(
        rule(
            r#"[{"match": {"op": "==", "left": {"&": [{"payload": {"protocol": "tcp", "field": "flags"}}, ["fin", "syn"]]}, "right": "syn"}}]"#
        ),
        "tcp flags & (fin | syn) == syn"
    );
    assert_eq!(
        rule(
            r#"[{"mangle": {"key": {"ct": {"key": "mark"}}, "value": {"<<": [{"|": [{"meta": {"key": "mark"}}, 16]}, 8]}}}]"#
        ),
        "ct mark set (meta mark | 16) << 8"
    );
    assert_eq!(
        rule(
            r#"[{"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": "eth*"}}, {"match": {"op": "==", "left": {"meta": {"key": "hour"}}, "right": "17:00"}}]"#
        ),
        "meta iifname == \"eth*\" meta hour == \"17:00\""
    );
    assert_eq!(
        rule(
            r#"[{"match": {"op": "==", "left": {"tcp option": {"name": "maxseg"}}, "right": true}}, {"match": {"op": "==", "left": {"tcp option": {"base": 255, "len": 8, "offset": 0}}, "right": false}}]"#
        ),
        "tcp option maxseg exists tcp option 255 missing"
    );
    assert_eq!(
        rule(
            r#"[{"vmap": {"key": {"payload": {"protocol": "ip", "field": "saddr"}}, "data": {"set": [["10.0.0.1", {"drop": null}], ["*", {"jump": {"target": "other"}}]]}}}]"#
        ),
        "ip saddr vmap { 10.0.0.1 : drop, * : jump other }"
    );
    assert_eq!(
        rule(
            r#"[{"limit": {"rate": 1, "rate_unit": "mbytes", "per": "second", "burst": 5, "burst_unit": "kbytes", "inv": true}}, {"counter": {"packets": 1, "bytes": 60}}, {"log": {"prefix": "in: ", "level": "info", "flags": ["tcp sequence", "tcp options", "skuid"]}}]"#
        ),
        "limit rate over 1 mbytes/second burst 5 kbytes counter packets 1 bytes 60 log prefix \"in: \" level info flags tcp sequence,options flags skuid"
    );
    assert_eq!(
        rule(
            r#"[{"dnat": {"family": "ip6", "addr": {"range": ["2001:db8::1", "2001:db8::5"]}, "port": 80, "flags": ["random", "persistent"]}}]"#
        ),
        "dnat ip6 to [2001:db8::1]-[2001:db8::5]:80 random,persistent"
    );
    assert_eq!(
        rule(
            r#"[{"set": {"op": "update", "elem": {"elem": {"val": {"payload": {"protocol": "ip", "field": "saddr"}}, "timeout": 10}}, "set": "@s"}}]"#
        ),
        "update @s { ip saddr timeout 10s }"
    );
}

#[test]
fn rules_name_their_place_for_add_insert_replace_and_delete() {
    let doc = r#"{"nftables": [
        {"insert": {"rule": {"family": "ip", "table": "t", "chain": "c", "index": 0, "expr": [{"drop": null}]}}},
        {"add": {"rule": {"family": "ip", "table": "t", "chain": "c", "handle": 4, "expr": [{"accept": null}], "comment": "after 4"}}},
        {"replace": {"rule": {"family": "ip", "table": "t", "chain": "c", "handle": 5, "expr": [{"return": null}]}}},
        {"delete": {"rule": {"family": "ip", "table": "t", "chain": "c", "handle": 6}}},
        {"delete": {"table": {"family": "ip", "handle": 9}}},
        {"flush": {"set": {"family": "ip", "table": "t", "name": "s"}}}
    ]}"#;
    assert_eq!(
        lines(doc),
        [
            "insert rule ip t c index 0 drop",
            "add rule ip t c position 4 accept comment \"after 4\"",
            "replace rule ip t c handle 5 return",
            "delete rule ip t c handle 6",
            "delete table ip handle 9",
            "flush set ip t s",
        ]
    );
}

#[test]
fn a_parser_error_names_the_json_command_and_statement() {
    let doc = r#"{"nftables": [
        {"add": {"table": {"family": "inet", "name": "t"}}},
        {"add": {"chain": {"family": "inet", "table": "t", "name": "c"}}},
        {"add": {"rule": {"family": "inet", "table": "t", "chain": "c", "expr": [
            {"counter": null},
            {"match": {"op": "==", "left": {"payload": {"protocol": "tcp", "field": "dport"}}, "right": "htps"}}
        ]}}}
    ]}"#;
    let e = error(doc);
    assert!(
        e.starts_with("t.json: nftables[2].add.rule.expr[1]: error: "),
        "{e}"
    );
    assert!(e.contains("htps"), "{e}");
    // The generated command is shown with a caret under the bad value.
    let shown: Vec<&str> = e.lines().collect();
    assert_eq!(
        shown[1].trim(),
        "add rule inet t c counter tcp dport == htps"
    );
    let col = shown[1].find("htps").unwrap();
    assert_eq!(shown[2].find('^'), Some(col));
    assert_eq!(shown[2].trim(), "^^^^");
}

#[test]
fn a_missing_table_is_the_kernel_s_refusal_at_its_command() {
    let doc =
        r#"{"nftables": [{"add": {"chain": {"family": "ip", "table": "nope", "name": "c"}}}]}"#;
    let e = error(doc);
    assert!(
        e.starts_with("t.json: nftables[0].add.chain: error: "),
        "{e}"
    );
}

#[test]
fn malformed_documents_are_refused_with_their_place() {
    let e = error("{\"nftables\": [\n  {\"add\": {\"table\": }}\n]}");
    assert!(e.starts_with("t.json:2:21: error: invalid JSON: "), "{e}");
    assert!(!e.contains(" at line "), "{e}");
    assert_eq!(
        error(r#"{"tables": []}"#),
        "t.json: error: expected an object with an `nftables` array (`{\"nftables\": [...]}`)"
    );
    assert_eq!(
        error(r#"{"nftables": [{"add": {"table": {"name": "t"}}}]}"#),
        "t.json: nftables[0].add.table: error: missing property `family` (a string)"
    );
    assert_eq!(
        error(
            r#"{"nftables": [{"add": {"rule": {"family": "ip", "table": "t", "chain": "c", "expr": [{"frobnicate": null}]}}}]}"#
        ),
        "t.json: nftables[0].add.rule.expr[0]: error: unknown statement `frobnicate`"
    );
    assert_eq!(
        error(r#"{"nftables": [{"list": {"ruleset": null}}]}"#),
        "t.json: nftables[0].list: error: `list` is not a command of a ruleset file (use `wasp ctl list ...`)"
    );
    assert_eq!(
        error(r#"{"nftables": [{"metainfo": {"json_schema_version": 2}}]}"#),
        "t.json: nftables[0].metainfo.json_schema_version: error: schema version 2 is newer than the one understood here (1)"
    );
    assert_eq!(
        error(r#"{"nftables": [{"add": {"table": {"family": "ip", "name": "a\"b"}}}]}"#),
        "t.json: nftables[0].add.table.name: error: the string \"a\\\"b\" holds a `\"` or a line break, which nft's strings cannot"
    );
}

#[test]
fn a_batch_applies_to_a_base_and_a_refused_one_leaves_it() {
    let base = crate::parse_str("table ip t {\n chain c {\n }\n}\n", "base.nft").unwrap();
    let good = r#"{"nftables": [{"add": {"rule": {"family": "ip", "table": "t", "chain": "c", "expr": [{"drop": null}]}}}]}"#;
    let mut shadows = crate::SetShadows::default();
    let new = apply_batch_with(&base, good, "b.json", &mut shadows).unwrap();
    assert_eq!(
        crate::print_ruleset(&new, false),
        "table ip t {\n\tchain c {\n\t\tdrop\n\t}\n}\n"
    );
    let bad = r#"{"nftables": [{"add": {"rule": {"family": "ip", "table": "t", "chain": "c", "expr": [{"drop": null}]}}},
                   {"add": {"rule": {"family": "ip", "table": "t", "chain": "nope", "expr": [{"drop": null}]}}}]}"#;
    let e = apply_batch_with(&new, bad, "b.json", &mut shadows).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("b.json: nftables[1].add.rule: error: "),
        "{e}"
    );
}

/// JSON names are strings: one of nft's keywords (`fwd`, `time`) names a table or chain there,
/// as `nft -j -f` takes it, and lists as nft lists it.
#[test]
fn keywords_name_tables_and_chains_in_json() {
    let doc = r#"{"nftables": [
        {"add": {"table": {"family": "ip", "name": "fwd"}}},
        {"add": {"chain": {"family": "ip", "table": "fwd", "name": "time"}}}
    ]}"#;
    assert_eq!(
        lines(doc),
        ["add table ip \"fwd\"", "add chain ip \"fwd\" \"time\""]
    );
    let rs = parse_str(doc, "k.json").expect("loads");
    assert_eq!(
        crate::print::ruleset(&rs, false),
        "table ip fwd {\n\tchain time {\n\t}\n}\n"
    );
}
