//! `apply_batch`: commands against a running ruleset, checked against nft 1.0.6 (kernel 6.18)
//! in a network namespace: tests/data/batch/base.nft loaded with `nft -f`, then ok.nft with
//! `nft -f`; ok.expected is `nft -a list ruleset` after it. bad.nft fails at its last
//! command and nft leaves the ruleset as it was.

use std::path::Path;

fn data(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/batch")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}

#[test]
fn batch_applies_as_nft_does() {
    let base = wasp_ruleset::parse_str(&data("base.nft"), "base.nft").unwrap();
    let before = wasp_ruleset::print_ruleset(&base, true);
    let new = wasp_ruleset::apply_batch(&base, &data("ok.nft"), "ok.nft").unwrap();
    assert_eq!(wasp_ruleset::print_ruleset(&new, true), data("ok.expected"));
    // The base is a value: untouched.
    assert_eq!(wasp_ruleset::print_ruleset(&base, true), before);
    // Errors in a later batch name the batch's file; older sources stay for older objects.
    assert_eq!(new.sources.len(), base.sources.len() + 1);
    assert_eq!(new.sources.last().unwrap().path, Path::new("ok.nft"));
}

#[test]
fn a_failing_batch_is_an_error_at_its_place() {
    let base = wasp_ruleset::parse_str(&data("base.nft"), "base.nft").unwrap();
    let ok = wasp_ruleset::apply_batch(&base, &data("ok.nft"), "ok.nft").unwrap();
    let e = wasp_ruleset::apply_batch(&ok, &data("bad.nft"), "bad.nft").unwrap_err();
    // nft: "bad.nft:3:36-37: Error: Could not process rule: File exists".
    let text = e.to_string();
    assert!(
        text.starts_with("bad.nft:3:36: error: Could not process rule: File exists"),
        "{text}"
    );
}

#[test]
fn unknown_objects_are_refused() {
    let base = wasp_ruleset::parse_str(&data("base.nft"), "base.nft").unwrap();
    for (batch, want) in [
        (
            "add rule netdev nope in drop\n",
            "b.nft:1:17: error: unknown table `netdev nope`",
        ),
        ("delete rule netdev filt in handle 99\n", "b.nft:1:"),
        ("add element netdev filt nope { 1.2.3.4 }\n", "b.nft:1:"),
    ] {
        let e = wasp_ruleset::apply_batch(&base, batch, "b.nft").unwrap_err();
        assert!(e.to_string().starts_with(want), "{batch}: {e}");
    }
}

/// A whole ruleset of `n` set elements, as a daemon is given it again and again.
fn whole(n: usize) -> String {
    let elems: Vec<String> = (0..n)
        .map(|i| format!("10.0.{}.{}", i >> 8, i & 255))
        .collect();
    format!(
        "flush ruleset\ntable netdev t {{\n set s {{\n  type ipv4_addr;\n  elements = {{ {} }}\n }}\n chain c {{\n  type filter hook ingress device \"d\" priority 0; policy accept;\n  ip saddr @s counter drop\n  counter\n }}\n}}\n",
        elems.join(", ")
    )
}

/// Issue 17: applying the same file 1000 times kept the text of every one of them (about
/// 100 kB per apply of a 2000-element set in a daemon, where each apply clones the ruleset).
/// Now the ruleset holds the text of what it holds: one file.
#[test]
fn reapplying_a_whole_ruleset_keeps_one_source_file() {
    let text = whole(200);
    let mut r = wasp_ruleset::Ruleset::default();
    for _ in 0..1000 {
        r = wasp_ruleset::apply_batch(&r, &text, "soak.nft").unwrap();
    }
    assert_eq!(r.sources.len(), 1);
    // Ids keep rising: the 1000th file read.
    assert_eq!(r.sources[0].id, 999);
    let rule = &r.tables[0].chains[0].rules[0];
    assert_eq!(rule.span.file, 999);
    let e = wasp_ruleset::Error::at(&r, rule.span, "here");
    assert!(
        e.to_string().starts_with("soak.nft:9:3: error: here"),
        "{e}"
    );
    assert!(e.to_string().contains("ip saddr @s counter drop"), "{e}");
}

/// Element commands: an element's batch stays while the element does, and goes with it.
#[test]
fn an_element_keeps_its_batch_and_the_batch_goes_with_it() {
    let base = wasp_ruleset::parse_str(&whole(2), "base.nft").unwrap();
    let mut r =
        wasp_ruleset::apply_batch(&base, "add element netdev t s { 10.9.9.9 }\n", "keep.nft")
            .unwrap();
    for i in 0..500 {
        let add = format!("add element netdev t s {{ 10.1.{}.{} }}\n", i >> 8, i & 255);
        r = wasp_ruleset::apply_batch(&r, &add, "add.nft").unwrap();
        let del = format!(
            "delete element netdev t s {{ 10.1.{}.{} }}\n",
            i >> 8,
            i & 255
        );
        r = wasp_ruleset::apply_batch(&r, &del, "del.nft").unwrap();
    }
    // The base file, the batch of the element kept, and the newest batch.
    let paths: Vec<_> = r
        .sources
        .iter()
        .map(|s| s.path.display().to_string())
        .collect();
    assert_eq!(paths, ["base.nft", "keep.nft", "del.nft"]);
    // The kept element's span still names its file and line, after 1000 files were dropped.
    let kept = r.tables[0].sets[0]
        .elements
        .iter()
        .find(|e| e.span.file != 0)
        .unwrap();
    let e = wasp_ruleset::Error::at(&r, kept.span, "this one").to_string();
    assert!(e.starts_with("keep.nft:1:"), "{e}");
    assert!(e.contains("add element netdev t s { 10.9.9.9 }"), "{e}");
    // Deleting it drops its batch too.
    let r = wasp_ruleset::apply_batch(&r, "delete element netdev t s { 10.9.9.9 }\n", "del2.nft")
        .unwrap();
    let paths: Vec<_> = r
        .sources
        .iter()
        .map(|s| s.path.display().to_string())
        .collect();
    assert_eq!(paths, ["base.nft", "del2.nft"]);
}

/// A batch whose objects come from a file it includes keeps the batch's text with the
/// included file (errors show both: the line and where it was included from).
#[test]
fn a_batch_keeps_the_files_it_included() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/batch");
    let main = dir.join("with-include.nft");
    let text = "flush ruleset\ninclude \"included-table.nft\"\n";
    let mut r = wasp_ruleset::Ruleset::default();
    for _ in 0..3 {
        r = wasp_ruleset::apply_batch(&r, text, main.to_str().unwrap()).unwrap();
    }
    // Then a batch that changes nothing the include declared.
    r = wasp_ruleset::apply_batch(&r, "add table netdev other\n", "other.nft").unwrap();
    let names: Vec<_> = r
        .sources
        .iter()
        .map(|s| s.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["with-include.nft", "included-table.nft", "other.nft"]
    );
    let t = r.tables.iter().find(|t| t.name == "inc").unwrap();
    let e = wasp_ruleset::Error::at(&r, t.chains[0].rules[0].span, "here").to_string();
    assert!(e.contains("included-table.nft:3:"), "{e}");
    assert!(e.contains("with-include.nft:2:"), "{e}");
}

/// Handles are never given twice, as the kernel's counters: a rule added after the rule with
/// the highest handle was deleted takes a new one, and so does a table added after the last
/// table was deleted.
#[test]
fn handles_are_not_given_twice_after_deletes() {
    let base = wasp_ruleset::parse_str(
        "table ip t {\n\tchain c {\n\t\taccept\n\t\tdrop\n\t}\n}\ntable ip u {\n}\n",
        "base.nft",
    )
    .unwrap();
    let r = wasp_ruleset::apply_batch(&base, "delete rule ip t c handle 3\n", "b1").unwrap();
    let r = wasp_ruleset::apply_batch(&r, "add rule ip t c accept\n", "b2").unwrap();
    let handles: Vec<u64> = r.tables[0].chains[0]
        .rules
        .iter()
        .map(|x| x.handle)
        .collect();
    assert_eq!(handles, [2, 4]);
    let r = wasp_ruleset::apply_batch(&r, "delete table ip u\n", "b3").unwrap();
    let r = wasp_ruleset::apply_batch(&r, "add table ip v\n", "b4").unwrap();
    assert_eq!(r.tables[1].handle, 3);
}
