//! The `wasp` command as a library: `wasp check`, `wasp replay`, `wasp run`, `wasp ctl`,
//! `wasp plugin list`, `wasp completions` and `wasp man`,
//! kept here so that tests
//! (and the conformance harness and benchmarks) can call them; `main.rs` only parses the command
//! line and maps errors to exit codes.
//!
//! - [`datapath`]: the one loop of a worker, the same for `wasp run` and `wasp replay`: a
//!   vector of frames through the ingress hook and the way out, into an [`datapath::Exit`].
//! - [`port_exit`]: the port side of that loop's exit, shared by both: frames queued on the
//!   port of their device, each packet's end counted.
//! - [`check::check`]: parse, compile and optionally print a ruleset.
//! - [`replay::replay`]: captures through a ruleset ([`replay::ReplayOptions`]), giving a
//!   [`summary::Summary`], `accepted.pcap`/`dropped.pcap`, verdict lines and a trace.
//! - captures are read and written by `wasp_io::capture` (streamed pcap/pcapng; faults name
//!   file and byte offset); `wasp replay`'s ports are `wasp_io::PcapGroup`'s.
//! - [`sample`]: the `sample.toml` of a sample directory.
//! - [`plugins`]: the ruleset's plugins in a replay (loading, configuration, `--swap`).
//! - [`bundled`]: where a bare plugin name's component comes from (override directories,
//!   then the copy embedded in the binary), and `wasp plugin list`.
//! - [`man`]: the man pages, from the clap command (`wasp man`).
//! - [`hooks`]: the base chains `wasp replay` does not run (it runs netdev ingress only).
//! - [`verdicts`], [`trace`], [`summary`]: the output formats.
//! - [`daemon`]: `wasp run`, the live daemon (workers over wasp-io ports, the control side).
//! - [`ctl`]: `wasp ctl`, the control socket's command line.
#![forbid(unsafe_code)]

pub mod bundled;
pub mod check;
pub mod cli;
pub mod ctl;
pub mod daemon;
pub mod datapath;
pub mod error;
pub mod hooks;
pub mod man;
pub mod names;
pub mod plugin_check;
pub mod plugin_new;
pub mod plugins;
pub mod port_exit;
pub mod progress;
pub mod replay;
pub mod sample;
pub mod summary;
pub mod trace;
pub mod verdicts;

pub use error::Error;
pub use replay::{Input, ReplayOptions, Report, replay};
pub use summary::Summary;
