//! nftables' own rule-level test suite (`../shared/nft-tests/py/`) through the kernel and
//! `wasp check --print` (see `wasp_conformance::nft_suite`). Fails on a crash, on a difference
//! from the kernel that `nft-suite-known.txt` does not list (or a listed one that no longer
//! holds), and on acceptance under `nft-suite-floor.txt`. Prints the tables. Skips with a
//! message when not root, without nft, or without the suite's files.

use wasp_conformance::nft_suite::{self, known, report};
use wasp_conformance::run::{build_wasp, skip_reason};

#[test]
fn nft_suite_against_the_kernel() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIPPED nft suite: {why}");
        return;
    }
    let Some(py) = nft_suite::default_py_dir() else {
        eprintln!("SKIPPED nft suite: no ../shared/nft-tests/py (set WASP_NFT_TESTS)");
        return;
    };
    let units = nft_suite::units::load(&py).expect("suite files");
    assert!(units.len() > 4000, "only {} units read", units.len());
    let wasp = build_wasp().unwrap_or_else(|e| panic!("cannot build wasp: {e}"));
    let outcomes = nft_suite::run(&units, &wasp, 2, &|_, _| {}).expect("suite run");
    assert_eq!(outcomes.len(), units.len());
    let rep = report::Report::new(&units, &outcomes);
    eprintln!("{}\n{}", rep.markdown(), rep.summary());
    let floor =
        known::floor(&std::fs::read_to_string(known::floor_path()).expect("nft-suite-floor.txt"))
            .expect("floor");
    let listed =
        known::known(&std::fs::read_to_string(known::known_path()).expect("nft-suite-known.txt"))
            .expect("known differences");
    let failures = known::failures(&units, &outcomes, &rep, floor, &listed);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
