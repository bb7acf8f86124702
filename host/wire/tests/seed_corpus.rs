//! The checked-in fuzz seed corpus is exactly `samples::all()`: regenerate it with
//! `cargo run -p wasp-wire --example write_seed_corpus` after changing the samples.

use std::path::PathBuf;

#[test]
fn seed_corpus_matches_samples() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fuzz/corpus/parse_frame");
    if !dir.is_dir() {
        eprintln!("skipped: no seed corpus at {}", dir.display());
        return;
    }
    let samples = wasp_wire::samples::all();
    for (name, frame) in &samples {
        let path = dir.join(format!("seed-{name}"));
        let on_disk = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(&on_disk, frame, "{} is stale", path.display());
    }
    let seeds = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("seed-"))
        .count();
    assert_eq!(
        seeds,
        samples.len(),
        "seed files without a sample in {}",
        dir.display()
    );
}
