//! `wasp run`: the daemon.

use std::io::Write;

use clap::Args;

use crate::error::Error;

/// `wasp run RULESET [options]`.
#[derive(Debug, Args)]
pub struct RunArgs {}

/// Run the daemon until SIGINT/SIGTERM.
///
/// # Errors
/// Not yet built.
pub fn run(_args: &RunArgs, _stdout: &mut dyn Write, _stderr: &mut dyn Write) -> Result<(), Error> {
    Err(Error::Usage("wasp run is not built yet".to_string()))
}
