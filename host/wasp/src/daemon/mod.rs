//! `wasp run`: the daemon. It opens the devices the ruleset's base chains name, starts one
//! worker per core (each with its own rings, spread by PACKET_FANOUT), answers the control
//! socket, and stops cleanly on SIGINT/SIGTERM: the vectors in flight finish, the final
//! statistics are printed.
//!
//! - [`worker`]: one worker's loop (receive, classify, send) and its context.
//! - [`state`]: the control side: the running ruleset, changes, counters summed over workers.
//! - [`mailbox`]: jobs the control side runs on workers at their vector boundaries.
//! - [`ports`]: the worker's view of its ports (the seam to `wasp-io`).
//! - [`stats`], [`events`]: worker counts, and events for `wasp ctl monitor`.

pub mod events;
pub mod mailbox;
pub mod ports;
pub mod state;
pub mod stats;
pub mod worker;

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::error::Error;

/// `wasp run RULESET [options]`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The ruleset file (nft syntax); its netdev base chains name the devices to open.
    pub ruleset: PathBuf,
    /// Workers (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
    /// The control socket's path (created with mode 0600).
    #[arg(long, default_value = "/run/wasp/wasp.sock")]
    pub socket: PathBuf,
}

/// Run the daemon until SIGINT/SIGTERM.
///
/// # Errors
/// Not yet built.
pub fn run(_args: &RunArgs, _stdout: &mut dyn Write, _stderr: &mut dyn Write) -> Result<(), Error> {
    Err(Error::Usage("wasp run is not built yet".to_string()))
}
