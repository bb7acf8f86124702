//! `list ...` against the real nft: tests/data/list.nft was loaded into nft 1.0.6 (kernel
//! 6.18) in a network namespace and each command of tests/data/expected/COMMANDS was run;
//! the outputs are tests/data/expected/NAME.txt. wasp renders the same from its model.

use std::path::Path;

use wasp_ctl::listing::{parse_list_words, render};
use wasp_ctl::proto::ListFlags;

fn data() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data"))
}

/// `-a -s list set ...` into flags and the words after `list`.
fn split(args: &str) -> (ListFlags, Vec<&str>) {
    let mut f = ListFlags::default();
    let mut words = Vec::new();
    let mut seen_list = false;
    for w in args.split_whitespace() {
        match w {
            "-a" if !seen_list => f.handles = true,
            "-s" if !seen_list => f.stateless = true,
            "-t" if !seen_list => f.terse = true,
            "-j" if !seen_list => f.json = true,
            "list" if !seen_list => seen_list = true,
            w => words.push(w),
        }
    }
    (f, words)
}

/// Every command of `commands` (a file of `NAME: nft words` lines) rendered from `ruleset`
/// against nft's output in `expected/NAME.txt`; returns how many were checked.
fn matches_nft(ruleset: &str, commands: &str) -> usize {
    let text = std::fs::read_to_string(data().join(ruleset)).unwrap();
    let rs = wasp_ruleset::parse_str(&text, ruleset).unwrap();
    let commands = std::fs::read_to_string(data().join(commands)).unwrap();
    let mut checked = 0;
    for line in commands.lines() {
        let (name, args) = line.split_once(": ").unwrap();
        let want = std::fs::read_to_string(data().join(format!("expected/{name}.txt"))).unwrap();
        let (flags, words) = split(args);
        let req = parse_list_words(&words, flags).unwrap();
        let got = match render(&rs, &req) {
            Ok(pieces) => pieces.concat(),
            Err(e) => format!("{e}\n"),
        };
        assert_eq!(got, want, "nft {args}");
        checked += 1;
    }
    checked
}

#[test]
fn list_matches_nft() {
    assert!(matches_nft("list.nft", "expected/COMMANDS") >= 20);
}

/// `list quotas|limits|counters|flowtables` of tests/data/objects.nft (named objects spread
/// over tables, one table with none), against nft 1.0.6's output for the same file: only
/// tables holding some named object show for the object listings, every table for
/// `list flowtables`; JSON holds the objects alone.
#[test]
fn object_listings_match_nft() {
    assert_eq!(matches_nft("objects.nft", "expected/OBJECTS"), 9);
    let text = std::fs::read_to_string(data().join("objects.nft")).unwrap();
    let rs = wasp_ruleset::parse_str(&text, "objects.nft").unwrap();
    let flags = ListFlags {
        json: true,
        ..ListFlags::default()
    };
    for what in ["quotas", "limits"] {
        let req = parse_list_words(&[what], flags).unwrap();
        let got: serde_json::Value =
            serde_json::from_str(&render(&rs, &req).unwrap().concat()).unwrap();
        let want: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(data().join(format!("expected/{what}.json"))).unwrap(),
        )
        .unwrap();
        let objects = |v: &serde_json::Value| v["nftables"].as_array().unwrap()[1..].to_vec();
        assert_eq!(objects(&got), objects(&want), "-j list {what}");
    }
    // A flowtable (the kernel here has none to compare with): listed in its table, as in
    // `list ruleset`.
    let rs = wasp_ruleset::parse_str(
        "table inet w {\n\tflowtable f {\n\t\thook ingress priority filter\n\t\tdevices = { lo }\n\t}\n}\ntable ip t {\n}\n",
        "ft.nft",
    )
    .unwrap();
    let req = parse_list_words(&["flowtables"], ListFlags::default()).unwrap();
    assert_eq!(
        render(&rs, &req).unwrap().concat(),
        "table inet w {\n\tflowtable f {\n\t\thook ingress priority filter\n\t\tdevices = { lo }\n\t}\n}\ntable ip t {\n}\n"
    );
}

#[test]
fn list_words() {
    let f = ListFlags::default();
    let r = parse_list_words(&["counters", "table", "netdev", "filt"], f).unwrap();
    assert_eq!(r.family.as_deref(), Some("netdev"));
    assert_eq!(r.table.as_deref(), Some("filt"));
    let r = parse_list_words(&["table", "filt"], f).unwrap();
    assert_eq!(r.family, None);
    assert_eq!(r.table.as_deref(), Some("filt"));
    // A table may be named like a family when the family is given.
    let r = parse_list_words(&["table", "ip", "inet"], f).unwrap();
    assert_eq!(r.family.as_deref(), Some("ip"));
    assert_eq!(r.table.as_deref(), Some("inet"));
    assert!(parse_list_words(&["set", "netdev", "filt"], f).is_err());
    assert!(parse_list_words(&["rules"], f).is_err());
    assert!(parse_list_words(&["tables", "netdev", "x"], f).is_err());
}

#[test]
fn json_shape() {
    let text = std::fs::read_to_string(data().join("list.nft")).unwrap();
    let rs = wasp_ruleset::parse_str(&text, "list.nft").unwrap();
    let flags = ListFlags {
        json: true,
        ..ListFlags::default()
    };
    let req = parse_list_words(&["table", "ip", "t3"], flags).unwrap();
    let out = render(&rs, &req).unwrap().concat();
    assert!(out.ends_with("]}\n"));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let objs = v["nftables"].as_array().unwrap();
    assert_eq!(objs[0]["metainfo"]["json_schema_version"], 1);
    // What nft 1.0.6 prints for the same table (`nft -j list table ip t3`), object by object
    // (metainfo aside).
    let nft: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data().join("expected/t3.json")).unwrap())
            .unwrap();
    let want = &nft["nftables"].as_array().unwrap()[1..];
    assert_eq!(&objs[1..], want);
}

#[test]
fn json_ruleset_matches_nft() {
    let text = std::fs::read_to_string(data().join("list.nft")).unwrap();
    let rs = wasp_ruleset::parse_str(&text, "list.nft").unwrap();
    let flags = ListFlags {
        json: true,
        ..ListFlags::default()
    };
    let out = render(&rs, &parse_list_words(&["ruleset"], flags).unwrap())
        .unwrap()
        .concat();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let nft: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(data().join("expected/ruleset.json")).unwrap(),
    )
    .unwrap();
    let got = &v["nftables"].as_array().unwrap()[1..];
    let want = &nft["nftables"].as_array().unwrap()[1..];
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        let mut g = g.clone();
        // nft 1.0.6 leaves a netdev base chain's device out of its JSON; the schema has
        // "dev" and wasp prints it.
        if let Some(c) = g.get_mut("chain").and_then(|c| c.as_object_mut()) {
            c.remove("dev");
        }
        assert_eq!(&g, w);
    }
}

/// `get element` as nft 1.0.6 answered it for tests/data/list.nft.
#[test]
fn get_element_matches_nft() {
    use wasp_ctl::proto::{ElementOp, ElementRequest};
    let text = std::fs::read_to_string(data().join("list.nft")).unwrap();
    let rs = wasp_ruleset::parse_str(&text, "list.nft").unwrap();
    let get = |family: &str, table: &str, set: &str, elements: &str| {
        let req = ElementRequest {
            op: ElementOp::Get,
            family: Some(family.into()),
            table: table.into(),
            set: set.into(),
            elements: elements.into(),
        };
        wasp_ctl::element::get_text(&rs, &req).unwrap_or_else(|e| format!("{e}\n"))
    };
    let blk = |elems: &str| {
        format!(
            "table netdev filt {{\n\tset blk {{\n\t\ttype ipv4_addr\n\t\tflags interval\n\t\telements = {{ {elems} }}\n\t}}\n}}\n"
        )
    };
    assert_eq!(
        get("netdev", "filt", "blk", "{ 10.1.2.3 }"),
        blk("10.0.0.0/8")
    );
    assert_eq!(
        get("netdev", "filt", "blk", "{ 10.1.2.3, 192.168.1.1 }"),
        blk("10.0.0.0/8, 192.168.1.1")
    );
    assert_eq!(
        get("netdev", "filt", "blk", "{ 10.0.0.0/16 }"),
        blk("10.0.0.0/8")
    );
    assert_eq!(
        get("netdev", "filt", "ports", "{ 22, 80 }"),
        "table netdev filt {\n\tset ports {\n\t\ttype inet_service\n\t\telements = { 22, 80 }\n\t}\n}\n"
    );
    assert_eq!(
        get("netdev", "filt", "ports", "{ 23 }"),
        "Error: Could not process rule: No such file or directory\nget element netdev filt ports { 23 }\n^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    );
    assert_eq!(
        get("ip", "t3", "cc", "{ 10.1.1.1 . 85 }"),
        "table ip t3 {\n\tset cc {\n\t\ttype ipv4_addr . inet_service\n\t\tflags interval\n\t\telements = { 10.0.0.0/8 . 80-90 }\n\t}\n}\n"
    );
    assert_eq!(
        get("ip", "t3", "m", "{ 1.1.1.1 }"),
        "table ip t3 {\n\tmap m {\n\t\ttype ipv4_addr : verdict\n\t\telements = { 1.1.1.1 : drop }\n\t}\n}\n"
    );
    // Keys that do not parse for the set's type: the parser's error.
    assert!(get("netdev", "filt", "ports", "{ 10.0.0.1 }").starts_with("<command>:1:"));
}

/// Conntrack and NAT statements in JSON: tests/data/conntrack.nft loaded into nft 1.0.6
/// (kernel 6.18) and listed with `nft -j list ruleset` (expected/conntrack.json).
#[test]
fn json_conntrack_and_nat_match_nft() {
    let text = std::fs::read_to_string(data().join("conntrack.nft")).unwrap();
    let rs = wasp_ruleset::parse_str(&text, "conntrack.nft").unwrap();
    let flags = ListFlags {
        json: true,
        ..ListFlags::default()
    };
    let out = render(&rs, &parse_list_words(&["ruleset"], flags).unwrap())
        .unwrap()
        .concat();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let nft: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(data().join("expected/conntrack.json")).unwrap(),
    )
    .unwrap();
    let got = &v["nftables"].as_array().unwrap()[1..];
    let want = &nft["nftables"].as_array().unwrap()[1..];
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g, w);
    }
}

/// `limit`, `quota` and their named objects in JSON: tests/data/stateful.nft as `nft -j list
/// ruleset` (1.0.6, kernel 6.18) printed it.
#[test]
fn json_limits_and_quotas_match_nft() {
    json_matches_nft("stateful");
}

/// `reject` in JSON: tests/data/reject.nft as `nft -j list ruleset` (1.0.6, kernel 6.18)
/// printed it (dependencies nft lists included).
#[test]
fn json_reject_matches_nft() {
    json_matches_nft("reject");
}

/// Payload and TCP option writes, `reset tcp option`, set and map statements in JSON:
/// tests/data/packet_statements.nft as `nft -j list ruleset` (1.0.6, kernel 6.18) printed it
/// (nft 1.0.6 has no JSON form for a map statement and prints its text).
#[test]
fn json_packet_statements_match_nft() {
    json_matches_nft("packet_statements");
}

/// `fwd` to a device, to a next hop, to a next hop or a device a map gives: tests/data/fwd.nft
/// as `nft -j list ruleset` (1.0.6, kernel 6.18) printed it (`fwd_stmt_json`).
#[test]
fn json_fwd_matches_nft() {
    json_matches_nft("fwd");
}

/// tests/data/NAME.nft rendered as JSON is tests/data/expected/NAME.json (the metainfo aside).
fn json_matches_nft(name: &str) {
    let text = std::fs::read_to_string(data().join(format!("{name}.nft"))).unwrap();
    let rs = wasp_ruleset::parse_str(&text, "case.nft").unwrap();
    let flags = ListFlags {
        json: true,
        ..ListFlags::default()
    };
    let out = render(&rs, &parse_list_words(&["ruleset"], flags).unwrap())
        .unwrap()
        .concat();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let nft: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(data().join(format!("expected/{name}.json"))).unwrap(),
    )
    .unwrap();
    let got = &v["nftables"].as_array().unwrap()[1..];
    let want = &nft["nftables"].as_array().unwrap()[1..];
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        let mut g = g.clone();
        // nft 1.0.6 leaves a netdev base chain's device out of its JSON (see above).
        if let Some(c) = g.get_mut("chain").and_then(|c| c.as_object_mut()) {
            c.remove("dev");
        }
        assert_eq!(&g, w);
    }
}

/// A flowtable and `flow add` in JSON, as nft 1.0.6's `json.c` prints them (the local kernel
/// has no flowtables, so this is not compared with a listing of its own).
#[test]
fn json_flowtable() {
    let text = "table inet t {\n\tflowtable ft {\n\t\thook ingress priority 0; devices = { eth0, eth1 };\n\t}\n\tflowtable f1 {\n\t\thook ingress priority 10; devices = { eth2 };\n\t}\n\tchain c {\n\t\ttype filter hook forward priority 0;\n\t\tflow add @ft\n\t}\n}\n";
    let rs = wasp_ruleset::parse_str(text, "f.nft").unwrap();
    let flags = ListFlags {
        json: true,
        ..ListFlags::default()
    };
    let out = render(&rs, &parse_list_words(&["ruleset"], flags).unwrap())
        .unwrap()
        .concat();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let objs = v["nftables"].as_array().unwrap();
    assert_eq!(
        objs[2],
        serde_json::json!({"flowtable": {"family": "inet", "name": "ft", "table": "t",
            "handle": 2, "hook": "ingress", "prio": 0, "dev": ["eth0", "eth1"]}})
    );
    assert_eq!(objs[3]["flowtable"]["dev"], "eth2");
    assert!(objs[4].get("chain").is_some());
    assert_eq!(
        objs[5]["rule"]["expr"][0],
        serde_json::json!({"flow": {"op": "add", "flowtable": "@ft"}})
    );
}

/// `list counter|quota|limit [FAMILY] TABLE NAME`: the one object in its table, as nft 1.0.6
/// prints it (checked against the kernel in wasp's live command-words test); an unknown name
/// is nft's ENOENT with a caret under it; JSON holds the object alone.
#[test]
fn one_named_object_listings() {
    let rs = wasp_ruleset::parse_str(
        "table ip t {\n\tcounter c {\n\t\tpackets 5 bytes 50\n\t}\n\tcounter d {\n\t}\n\tquota q {\n\t\t100 bytes used 20 bytes\n\t}\n}\n",
        "o.nft",
    )
    .unwrap();
    let f = ListFlags::default();
    let list = |words: &[&str], f: ListFlags| {
        let req = parse_list_words(words, f)?;
        render(&rs, &req).map(|p| p.concat())
    };
    assert_eq!(
        list(&["counter", "ip", "t", "c"], f).unwrap(),
        "table ip t {\n\tcounter c {\n\t\tpackets 5 bytes 50\n\t}\n}\n"
    );
    assert_eq!(
        list(&["quota", "t", "q"], f).unwrap(),
        "table ip t {\n\tquota q {\n\t\t100 bytes used 20 bytes\n\t}\n}\n"
    );
    assert_eq!(
        list(&["counter", "ip", "t", "nope"], f).unwrap_err(),
        "Error: No such file or directory\nlist counter ip t nope\n                  ^^^^"
    );
    assert!(
        list(&["counter", "ip", "t"], f).is_err(),
        "a name is needed"
    );
    let json = ListFlags {
        json: true,
        ..ListFlags::default()
    };
    let got: serde_json::Value =
        serde_json::from_str(&list(&["counter", "t", "d"], json).unwrap()).unwrap();
    let objects = &got["nftables"].as_array().unwrap()[1..];
    assert_eq!(objects.len(), 1, "{got}");
    assert_eq!(objects[0]["counter"]["name"], "d");
}

/// Maps of concatenated data, named NAT maps, a set statement with concatenated data and named
/// maps of `fwd`/`dup` devices: tests/data/maps.nft as `nft -j list ruleset` (1.0.6, kernel
/// 6.18) printed it (the map's data type one string, `"ipv4_addr . inet_service"`; the set
/// statement a string, nft having no JSON for it).
#[test]
fn json_maps_match_nft() {
    json_matches_nft("maps");
}
