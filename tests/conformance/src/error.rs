//! The harness's error type.

use std::io;
use std::path::PathBuf;

/// What went wrong while setting up or driving the kernel side, or while running wasp.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command could not be started or exited with a failure.
    #[error("`{command}` failed: {detail}")]
    Command {
        /// The command line, as typed in a shell.
        command: String,
        /// Exit status and stderr, or the spawn error.
        detail: String,
    },
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What the harness was doing.
        what: String,
        /// The OS error.
        source: io::Error,
    },
    /// A capture file could not be read or written.
    #[error("capture {path}: {detail}")]
    Capture {
        /// The capture's path.
        path: PathBuf,
        /// What pcap-file reported.
        detail: String,
    },
    /// The `nft monitor` child went away or printed something unexpected.
    #[error("nft monitor: {0}")]
    Monitor(String),
    /// A verdict line could not be parsed.
    #[error("verdict line {line:?}: {detail}")]
    VerdictLine {
        /// The offending line.
        line: String,
        /// What was expected.
        detail: String,
    },
}

impl Error {
    /// An [`Error::Io`] for `what`.
    pub fn io(what: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

/// The harness's result type.
pub type Result<T> = std::result::Result<T, Error>;
