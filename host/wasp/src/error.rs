//! The errors of the `wasp` command, for the person running it.

use std::path::PathBuf;

use crate::sample::SampleError;
use wasp_io::capture::CaptureError;

/// Why a `wasp` command could not do its job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The ruleset cannot be read, parsed or compiled (the text names file:line:col).
    #[error(transparent)]
    Ruleset(#[from] wasp_ruleset::Error),
    /// A capture cannot be read, or is truncated or corrupt (the text names file and offset).
    #[error(transparent)]
    Capture(#[from] CaptureError),
    /// A sample directory's `sample.toml` cannot be read or is invalid.
    #[error(transparent)]
    Sample(#[from] SampleError),
    /// A capture given with `--in`, or marked `required` in `sample.toml`, does not exist.
    #[error("{path}: capture not found")]
    MissingCapture {
        /// The path as given.
        path: PathBuf,
    },
    /// An output file or directory cannot be created or written.
    #[error("{path}: {message}")]
    Output {
        /// The file or directory.
        path: PathBuf,
        /// What the OS said.
        message: String,
    },
    /// The plugin host cannot start (wasmtime refused its configuration).
    #[error("plugin host: {0}")]
    Plugin(String),
    /// The command line does not say what to do (e.g. `replay` without a ruleset).
    #[error("{0}")]
    Usage(String),
    /// `wasp ctl`: the daemon cannot be reached, or answered with an error (the text is its
    /// message, as nft prints it: file:line:col for a ruleset).
    #[error("{0}")]
    Ctl(String),
    /// The daemon cannot start or run (a device is missing, privileges lack, a worker does
    /// not answer); the text says which and why.
    #[error("{0}")]
    Daemon(String),
}
