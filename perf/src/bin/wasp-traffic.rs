//! `wasp-traffic`: write generated captures.
//!
//! ```text
//! wasp-traffic office OUT.pcap [--seed 2024] [--count 300] [--expect FILE]
//! wasp-traffic mix OUT.pcap --count N [--mix lan|all] [--seed 1]
//! wasp-traffic classes
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use wasp_perf::traffic::{self, Mix, office};

/// Deterministic traffic for wasp's samples and benchmarks.
#[derive(Debug, Parser)]
#[command(name = "wasp-traffic", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The capture of samples/firewall: every class of office traffic once, then a random fill.
    Office {
        /// Output pcap.
        out: PathBuf,
        /// Random seed.
        #[arg(long, default_value_t = office::OFFICE_SEED)]
        seed: u64,
        /// Number of frames (at least the number of classes).
        #[arg(long, default_value_t = office::OFFICE_PACKETS)]
        count: usize,
        /// Also write the verdict lines the kernel gives these frames under firewall.nft.
        #[arg(long, value_name = "FILE")]
        expect: Option<PathBuf>,
    },
    /// N frames of a mix (`lan`: plain LAN traffic; `all`: every kind, some malformed).
    Mix {
        /// Output pcap.
        out: PathBuf,
        /// Number of frames.
        #[arg(long)]
        count: usize,
        /// `lan` or `all`.
        #[arg(long, default_value = "all")]
        mix: String,
        /// Random seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// List the office traffic classes and their verdicts under samples/firewall/firewall.nft.
    Classes,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Office {
            out,
            seed,
            count,
            expect,
        } => {
            let frames: Vec<(u64, Vec<u8>)> = office::office(seed, count)
                .into_iter()
                .map(|(ts, f, _)| (ts, f))
                .collect();
            traffic::write_pcap(&out, &frames).and_then(|()| match expect {
                Some(p) => std::fs::write(p, office::expected_verdicts(seed, count)),
                None => Ok(()),
            })
        }
        Command::Mix {
            out,
            count,
            mix,
            seed,
        } => {
            let Some(mix) = Mix::from_name(&mix) else {
                eprintln!("wasp-traffic: unknown mix {mix:?} (lan or all)");
                return ExitCode::from(2);
            };
            traffic::write_pcap(&out, &traffic::generate(seed, count, mix))
        }
        Command::Classes => {
            for (i, c) in office::CLASSES.iter().enumerate() {
                println!("{:>2}  {:<22} {}", i + 1, c.expect, c.what);
            }
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wasp-traffic: {e}");
            ExitCode::from(1)
        }
    }
}
