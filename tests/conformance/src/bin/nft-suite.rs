//! `nft-suite`: nftables' own rule-level tests through the kernel and `wasp check --print`,
//! with the tables per family and per file (needs root and nft; see
//! `wasp_conformance::nft_suite`).
//!
//! ```sh
//! sudo target/debug/nft-suite                         # tables and the summary
//! sudo target/debug/nft-suite --file ip/ --details wasp-refuses,listing-differs
//! sudo target/debug/nft-suite --write-known           # rewrite nft-suite-known.txt
//! sudo target/debug/nft-suite --packets               # netdev rules' packet counts
//! ```

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use wasp_conformance::nft_suite::{self, known, outcome::Class, report};

/// nftables' own rule-level tests through the kernel and wasp.
#[derive(Parser)]
struct Args {
    /// Only files whose path (`ip/ip.t`) contains this.
    #[arg(long)]
    file: Option<String>,
    /// Print a line per unit of these classes (comma-separated: wasp-refuses, wasp-accepts,
    /// listing-differs, crash, no-meaning, newer-syntax, both-accept, both-refuse).
    #[arg(long, value_delimiter = ',')]
    details: Vec<String>,
    /// Rewrite nft-suite-known.txt from this run (use on the whole suite only).
    #[arg(long)]
    write_known: bool,
    /// Units run at once (each with a namespace of its own).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Instead of the listing comparison: the netdev ingress rules as packet counters, kernel
    /// against `wasp replay` (the table of `tests/nft_suite_packets.rs`; artifacts in
    /// `<target>/conformance/nft-suite-packets/`).
    #[arg(long)]
    packets: bool,
    /// The suite's `py/` folder (default: ../shared/nft-tests/py).
    #[arg(long)]
    py: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let Some(py) = args.py.or_else(nft_suite::default_py_dir) else {
        eprintln!("nft-suite: no ../shared/nft-tests/py (give --py DIR)");
        return ExitCode::from(2);
    };
    if let Some(why) = wasp_conformance::run::skip_reason() {
        eprintln!("nft-suite: cannot run the kernel side: {why}");
        return ExitCode::from(2);
    }
    let mut units = match nft_suite::units::load(&py) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("nft-suite: {}: {e}", py.display());
            return ExitCode::from(2);
        }
    };
    if let Some(f) = &args.file {
        units.retain(|u| u.file.contains(f.as_str()));
    }
    let mut classes = Vec::new();
    for d in &args.details {
        match Class::from_label(d) {
            Some(c) => classes.push(c),
            None => {
                eprintln!("nft-suite: no class `{d}`");
                return ExitCode::from(2);
            }
        }
    }
    // `WASP_BIN`, else the `wasp` built next to this program, else a build.
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("wasp")))
        .filter(|w| w.is_file() && std::env::var_os("WASP_BIN").is_none());
    let wasp = match beside.map_or_else(wasp_conformance::run::build_wasp, Ok) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("nft-suite: cannot build wasp: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.packets {
        let work = wasp.parent().map_or_else(std::env::temp_dir, |d| {
            d.join("conformance/nft-suite-packets")
        });
        return match nft_suite::packets::run(&units, &wasp, &work, &|l| eprintln!("{l}")) {
            Ok(report) => {
                print!("{}", report.table());
                println!("artifacts: {}", work.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("nft-suite: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let progress = |done: usize, total: usize| {
        if done.is_multiple_of(200) || done == total {
            eprint!("\r{done}/{total} units");
            let _ = std::io::stderr().flush();
        }
    };
    let start = std::time::Instant::now();
    let outcomes = match nft_suite::run(&units, &wasp, args.threads, &progress) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("\nnft-suite: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(" in {:.0} s", start.elapsed().as_secs_f64());
    let rep = report::Report::new(&units, &outcomes);
    print!("{}", report::details(&units, &outcomes, &classes));
    println!("{}", rep.markdown());
    println!("{}", rep.summary());
    if args.write_known {
        let text = known::known_file(&units, &outcomes);
        if let Err(e) = std::fs::write(known::known_path(), text) {
            eprintln!("nft-suite: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
