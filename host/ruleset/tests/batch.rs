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
