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

#[test]
fn list_matches_nft() {
    let text = std::fs::read_to_string(data().join("list.nft")).unwrap();
    let rs = wasp_ruleset::parse_str(&text, "list.nft").unwrap();
    let commands = std::fs::read_to_string(data().join("expected/COMMANDS")).unwrap();
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
    assert!(checked >= 20);
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
