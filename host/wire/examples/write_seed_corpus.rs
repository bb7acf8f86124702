//! Write the sample frames of `wasp_wire::samples::all()` as the fuzz seed corpus.
//!
//! `cargo run -p wasp-wire --example write_seed_corpus [DIR]` writes one file per frame, named
//! `seed-<name>`, into DIR (default: `tests/fuzz/corpus/parse_frame` in the repository). Files
//! of other names (inputs libFuzzer found) are left alone.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = std::env::args_os().nth(1).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fuzz/corpus/parse_frame"),
        PathBuf::from,
    );
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("error: cannot create {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    for (name, frame) in wasp_wire::samples::all() {
        let path = dir.join(format!("seed-{name}"));
        if let Err(e) = std::fs::write(&path, &frame) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("{} ({} bytes)", path.display(), frame.len());
    }
    ExitCode::SUCCESS
}
