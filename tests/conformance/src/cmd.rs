//! Running helper programs (`ip`, `nft`, `sysctl`) and turning failures into [`Error`]s.

use std::process::{Command, Output};

use crate::error::{Error, Result};

/// The command line of `cmd` as a shell would show it (for error messages).
pub fn display(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `cmd` to completion; an error unless it exits with status 0.
///
/// # Errors
/// [`Error::Command`] with the exit status and stderr when the program cannot be started or fails.
pub fn run(cmd: &mut Command) -> Result<Output> {
    let out = cmd.output().map_err(|e| Error::Command {
        command: display(cmd),
        detail: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(Error::Command {
            command: display(cmd),
            detail: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(out)
}
