//! The `wasp` command line. Everything but argument parsing and exit codes lives in the library.
//!
//! Exit codes: 0 success; 1 an error (bad ruleset, missing or faulty capture, output error:
//! the text on stderr); 2 a command-line usage error (clap's, or [`wasp::Error::Usage`]).

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = wasp::cli::Cli::parse();
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr();
    match wasp::cli::run(&cli, &mut stdout, &mut stderr) {
        Ok(()) => ExitCode::SUCCESS,
        // A command line that does not say what to do: exit 2, as clap's own usage errors.
        Err(e @ wasp::Error::Usage(_)) => {
            eprintln!("wasp: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("wasp: {:#}", anyhow::Error::from(e));
            ExitCode::from(1)
        }
    }
}
