//! nftables' own rules in JSON (`../shared/nft-tests/py/*/*.t.json`) through wasp's JSON
//! input, against the same rules in text (see `wasp_conformance::nft_suite::json_input`).
//! Fails when the share of rules whose JSON lists as their text falls under
//! `nft-suite-json-floor.txt`, and when wasp's own JSON listing of any ruleset the suite's
//! text makes does not read back the same. No root needed; skips without the suite's files.

use wasp_conformance::nft_suite::{self, json_input, known};

#[test]
fn suite_rules_in_json_list_as_their_text() {
    let Some(py) = nft_suite::default_py_dir() else {
        eprintln!("SKIPPED nft suite JSON: no ../shared/nft-tests/py (set WASP_NFT_TESTS)");
        return;
    };
    let results = json_input::run(&py).expect("suite files");
    let (_, all) = json_input::counts(&results);
    eprintln!("{}", json_input::report(&results));
    let failures = json_input::failures(&results);
    for f in &failures {
        eprintln!("{f}");
    }
    assert!(all.tried > 3000, "only {} units measured", all.tried);
    let floor = known::floor(
        &std::fs::read_to_string(json_input::floor_path()).expect("nft-suite-json-floor.txt"),
    )
    .expect("floor");
    assert!(
        all.equal_pct() >= floor,
        "{:.1} % of the suite's JSON rules list as their text, under the floor of {floor} %",
        all.equal_pct()
    );
}
