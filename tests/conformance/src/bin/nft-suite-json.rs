//! `nft-suite-json`: nftables' own rules in JSON (`tests/py/*/*.t.json`) through wasp's JSON
//! input, compared with their text; the table per file, the summary, and with `--details`
//! a line per rule that differs or is refused (see
//! `wasp_conformance::nft_suite::json_input`). No root needed.
//!
//! ```sh
//! target/debug/nft-suite-json [--file ip/] [--details]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use wasp_conformance::nft_suite::{self, json_input};

/// nftables' own rules in JSON through wasp's JSON input.
#[derive(Parser)]
struct Args {
    /// Only files whose path (`ip/ip.t`) contains this.
    #[arg(long)]
    file: Option<String>,
    /// Print a line per rule whose JSON is refused or lists otherwise.
    #[arg(long)]
    details: bool,
    /// The suite's `py/` folder (default: ../shared/nft-tests/py).
    #[arg(long)]
    py: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let Some(py) = args.py.or_else(nft_suite::default_py_dir) else {
        eprintln!("nft-suite-json: no ../shared/nft-tests/py (give --py DIR)");
        return ExitCode::from(2);
    };
    let mut results = match json_input::run(&py) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("nft-suite-json: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(f) = &args.file {
        results.retain(|(u, _)| u.file.contains(f.as_str()));
    }
    if args.details {
        for f in json_input::failures(&results) {
            println!("{f}");
        }
    }
    print!("{}", json_input::report(&results));
    ExitCode::SUCCESS
}
