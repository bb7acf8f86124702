//! The `wasp` command line. Everything but argument parsing and exit codes lives in the library.
//!
//! Exit codes: 0 success; 1 an error (bad ruleset, missing or faulty capture, output error:
//! the text on stderr); 2 a command-line usage error (clap's, or [`wasp::Error::Usage`]).

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    huge_pages_for_the_daemon();
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

/// The glibc tunable that backs the allocator's large blocks with transparent huge pages.
const HUGE_PAGES: &str = "glibc.malloc.hugetlb=1";

/// `wasp run` maps its large blocks on their own (`wasp_io::map_large_blocks_alone`: a set's
/// tables go back to the system when dropped), so each copy an element change makes of a large
/// set is fresh memory: in 4 KiB pages, faulting it in cost 9 ms per `add element` on a
/// 100 000-element concatenated set. In transparent huge pages it costs what reusing freed
/// heap did. glibc reads the tunable only at start: the daemon starts itself again once with
/// it (same process, same arguments); when that fails it goes on without.
fn huge_pages_for_the_daemon() {
    use std::os::unix::process::CommandExt;
    if !cfg!(target_env = "gnu") || std::env::args_os().nth(1).is_none_or(|a| a != "run") {
        return;
    }
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    if tunables.contains("glibc.malloc.hugetlb") {
        return;
    }
    let tunables = if tunables.is_empty() {
        HUGE_PAGES.to_string()
    } else {
        format!("{tunables}:{HUGE_PAGES}")
    };
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_default();
    // The binary's own path, not `/proc/self/exe`: the kernel names the process after the file
    // it runs, and `ps`, `pgrep wasp` and systemd expect `wasp`. A binary replaced on disk
    // since it started reads as "... (deleted)": then the link is all that is left.
    let exe = std::env::current_exe()
        .ok()
        .filter(|p| p.exists())
        .unwrap_or_else(|| "/proc/self/exe".into());
    // Only returns when the exec failed.
    let _ = std::process::Command::new(exe)
        .arg0(arg0)
        .args(args)
        .env("GLIBC_TUNABLES", tunables)
        .exec();
}
