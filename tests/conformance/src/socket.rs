//! The one place with system calls: an AF_PACKET socket that sends raw frames out of a
//! device inside a network namespace.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use crate::error::{Error, Result};

/// A raw `AF_PACKET` socket bound to one device of a network namespace. Frames passed to
/// [`PacketSocket::send`] leave that device unchanged (the kernel adds no header).
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
}

impl PacketSocket {
    /// Opens the socket inside the namespace whose handle is `netns` (e.g. `/run/netns/NAME`)
    /// and binds it to device `dev` there. The calling thread's namespace is not changed: a
    /// short-lived thread enters the namespace, creates the socket (which stays in that
    /// namespace for its life) and exits.
    ///
    /// # Errors
    /// When the namespace cannot be entered, the device does not exist, or the socket calls fail.
    pub fn open_in(netns: &Path, dev: &str) -> Result<Self> {
        let ns =
            File::open(netns).map_err(|e| Error::io(format!("open {}", netns.display()), e))?;
        let dev_c = CString::new(dev).map_err(|_| {
            Error::io(
                "device name",
                io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"),
            )
        })?;
        let thread = std::thread::spawn(move || -> Result<OwnedFd> {
            // SAFETY: `ns` is an open file descriptor of a network namespace handle; setns
            // only changes the network namespace of this (private, short-lived) thread.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(Error::io("setns", io::Error::last_os_error()));
            }
            // SAFETY: plain socket(2) call with constant arguments; the result is checked.
            let raw = unsafe {
                libc::socket(
                    libc::AF_PACKET,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                    0, // protocol 0: this socket sends only and receives nothing
                )
            };
            if raw < 0 {
                return Err(Error::io("socket(AF_PACKET)", io::Error::last_os_error()));
            }
            // SAFETY: `raw` is a fresh descriptor that nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            // SAFETY: `dev_c` is a NUL-terminated string that outlives the call.
            let ifindex = unsafe { libc::if_nametoindex(dev_c.as_ptr()) };
            if ifindex == 0 {
                return Err(Error::io(
                    format!("if_nametoindex({dev:?})", dev = dev_c),
                    io::Error::last_os_error(),
                ));
            }
            // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_ifindex = ifindex as i32;
            // SAFETY: `sll` is a valid sockaddr_ll and the length passed is its size.
            let rc = unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    (&sll as *const libc::sockaddr_ll).cast::<libc::sockaddr>(),
                    std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                return Err(Error::io("bind(AF_PACKET)", io::Error::last_os_error()));
            }
            Ok(fd)
        });
        let fd = thread
            .join()
            .map_err(|_| Error::io("socket thread", io::Error::other("panicked")))??;
        Ok(PacketSocket { fd })
    }

    /// Sends one frame (Ethernet header included) out of the bound device.
    ///
    /// # Errors
    /// The OS error: `EMSGSIZE` for frames longer than the device's MTU plus its link header
    /// (plus 4 for an 802.1Q tagged frame), `EINVAL` for frames shorter than 14 bytes.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: the pointer and length describe `frame`, which outlives the call; the
        // descriptor is owned by `self`.
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast::<libc::c_void>(),
                frame.len(),
                0,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n as usize != frame.len() {
            return Err(io::Error::other(format!(
                "short send: {n} of {} bytes",
                frame.len()
            )));
        }
        Ok(())
    }
}

/// Whether the current process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid(2) has no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
