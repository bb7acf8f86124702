//! `kernel-verdicts RULESET CAPTURE...` (`gen` as a capture: the generated corpus): loads RULESET into kernel nftables in a namespace of
//! its own, sends every frame of the captures into device `wasp0` and prints one verdict line
//! per frame, as `wasp replay --verdicts` writes them (frames that cannot be sent are printed
//! as `# <index> skipped: <reason>`). Needs root.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use wasp_conformance::capture::{check_sendable, read_frames};
use wasp_conformance::kernel::{Kernel, KernelConfig, KernelOutcome};

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let Some((ruleset, captures)) = args.split_first() else {
        eprintln!("usage: kernel-verdicts RULESET CAPTURE...");
        return ExitCode::from(2);
    };
    match run(ruleset, captures) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kernel-verdicts: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(ruleset: &Path, captures: &[PathBuf]) -> wasp_conformance::Result<()> {
    let mut kernel = Kernel::start(KernelConfig::default())?;
    kernel.load(ruleset)?;
    let verbose = std::env::var_os("WASP_CONF_VERBOSE").is_some();
    let mut index = 0;
    for cap in captures {
        let frames = if cap.as_os_str() == "gen" {
            wasp_conformance::generate::corpus()
                .into_iter()
                .map(|g| g.frame)
                .collect()
        } else {
            read_frames(cap)?
        };
        for frame in frames {
            index += 1;
            if let Err(why) = check_sendable(&frame) {
                println!("# {index} skipped: {why:?} ({} bytes)", frame.len());
                continue;
            }
            match kernel.send(&frame)? {
                KernelOutcome::Decided(d) => println!("{index} {d}"),
                KernelOutcome::Silent {
                    reached_hook,
                    passed_all,
                    events,
                } => println!(
                    "{index} {} # silent: reached the hook {reached_hook}, passed all chains \
                     {passed_all}, {} trace events",
                    if passed_all {
                        "accept ? ? ?"
                    } else {
                        "drop - - -"
                    },
                    events.len()
                ),
                KernelOutcome::Refused(e) => println!("# {index} skipped: refused: {e}"),
                KernelOutcome::NoVerdict(lines) => {
                    println!("# {index} no verdict; trace:");
                    for l in lines {
                        println!("#   {l}");
                    }
                }
            }
        }
    }
    if verbose {
        eprintln!("{}", kernel.list_ruleset()?);
    }
    Ok(())
}
