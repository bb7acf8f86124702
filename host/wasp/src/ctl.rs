//! `wasp ctl`: the client side of the control socket.

use std::io::Write;

use clap::Args;

use crate::error::Error;

/// `wasp ctl ...`.
#[derive(Debug, Args)]
pub struct CtlArgs {}

/// Do what `args` asks of the daemon.
///
/// # Errors
/// Not yet built.
pub fn main(
    _args: &CtlArgs,
    _stdout: &mut dyn Write,
    _stderr: &mut dyn Write,
) -> Result<(), Error> {
    Err(Error::Usage("wasp ctl is not built yet".to_string()))
}
