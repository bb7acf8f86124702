//! nftables' own netdev rules as packet counters, kernel against `wasp replay` (see
//! `wasp_conformance::nft_suite::packets`): every netdev ingress rule both load, reduced to its
//! matches, with a counter; frames built from the rules' constants plus the generated corpus.
//! Fails on a rule whose packet count differs and that `nft-suite-packets-known.txt` does not
//! list, and on a listed rule that now agrees. Skips with a message when not root, without nft,
//! or without the suite's files.

use wasp_conformance::nft_suite::{self, packets};
use wasp_conformance::run::{build_wasp, skip_reason};

#[test]
fn nft_suite_rules_count_the_same_packets() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIPPED nft suite packets: {why}");
        return;
    }
    let Some(py) = nft_suite::default_py_dir() else {
        eprintln!("SKIPPED nft suite packets: no ../shared/nft-tests/py (set WASP_NFT_TESTS)");
        return;
    };
    let units = nft_suite::units::load(&py).expect("suite files");
    let wasp = build_wasp().unwrap_or_else(|e| panic!("cannot build wasp: {e}"));
    let work = std::env::temp_dir().join(format!("wasp-nft-packets-{}", std::process::id()));
    let report = packets::run(&units, &wasp, &work, &|l| eprintln!("{l}")).expect("packet run");
    eprintln!("{}", report.table());
    assert!(
        report.rules.len() > 100,
        "only {} rules compared",
        report.rules.len()
    );
    assert!(report.frames.2 > 1000, "only {} frames", report.frames.2);
    let listed = packets::known(
        &std::fs::read_to_string(packets::known_path()).expect("nft-suite-packets-known.txt"),
    );
    let failures = packets::failures(&report, &listed);
    let _ = std::fs::remove_dir_all(&work);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
