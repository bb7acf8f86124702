//! The error of every port operation.

use std::io;
use std::path::PathBuf;

/// What went wrong opening or driving ports. Messages name the device (or file) and the cause.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// The named network device does not exist (in this network namespace).
    #[error("no such device {dev}")]
    NoDevice {
        /// Device name as given.
        dev: String,
    },
    /// The operation needs a capability the process lacks (`EPERM`/`EACCES`).
    #[error("{dev}: {what}: needs {cap} (run as root)")]
    Permission {
        /// Device name.
        dev: String,
        /// The operation, e.g. "AF_PACKET socket".
        what: &'static str,
        /// The capability, e.g. "CAP_NET_RAW".
        cap: &'static str,
    },
    /// Another system call on a device failed.
    #[error("{dev}: {what}: {source}")]
    Device {
        /// Device name.
        dev: String,
        /// The operation that failed.
        what: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// Setting up or driving the io_uring failed.
    #[error("io_uring {what}: {source}")]
    Ring {
        /// The operation that failed.
        what: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// A capture could not be read or written.
    #[error("{}: {msg}", path.display())]
    Pcap {
        /// The capture file.
        path: PathBuf,
        /// What is wrong with it.
        msg: String,
    },
    /// The caller's configuration is not usable (sizes, empty device list, port index).
    #[error("{0}")]
    Config(String),
}

impl IoError {
    /// Maps an OS error from opening `dev` to the error a user can act on: `ENODEV`/`ENXIO` →
    /// [`IoError::NoDevice`], `EPERM`/`EACCES` → [`IoError::Permission`] with `cap`.
    pub(crate) fn open(dev: &str, what: &'static str, cap: &'static str, e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ENODEV) | Some(libc::ENXIO) => IoError::NoDevice {
                dev: dev.to_string(),
            },
            Some(libc::EPERM) | Some(libc::EACCES) => IoError::Permission {
                dev: dev.to_string(),
                what,
                cap,
            },
            _ => IoError::Device {
                dev: dev.to_string(),
                what,
                source: e,
            },
        }
    }

    pub(crate) fn ring(what: &'static str, source: io::Error) -> Self {
        IoError::Ring { what, source }
    }
}
