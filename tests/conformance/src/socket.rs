//! The one place with system calls: an AF_PACKET socket that sends raw frames out of a
//! device inside a network namespace, and a netlink socket that receives the namespace's
//! nftables trace events (the NFNLGRP_NFTRACE multicast group that `nft monitor trace` reads).
#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

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
        let dev_c = CString::new(dev).map_err(|_| {
            Error::io(
                "device name",
                io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"),
            )
        })?;
        let fd = in_netns(netns, move || {
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
            // With a virtio-net header in front of each frame, its hdr_len tells packet_snd how
            // much of the frame to put in the skb's linear part: all of it (see `send`).
            setsockopt_int(&fd, libc::SOL_PACKET, libc::PACKET_VNET_HDR, 1)
                .map_err(|e| Error::io("PACKET_VNET_HDR", e))?;
            Ok(fd)
        })?;
        Ok(PacketSocket { fd })
    }

    /// Sends one frame (Ethernet header included) out of the bound device, as one linear skb.
    ///
    /// Without the virtio-net header, packet_snd puts only the Ethernet header in the linear
    /// part of frames of a page or more; the kernel's netdev IPv6 validation then finds no
    /// transport header in such frames (measured: IPv6 UDP frames of 4100 bytes got no
    /// `meta l4proto`, 4000 bytes did), an artifact of the injection that a NIC driver,
    /// which pulls the headers into the linear part, would not show.
    ///
    /// # Errors
    /// The OS error: `EMSGSIZE` for frames longer than the device's MTU plus its link header
    /// (plus 4 for an 802.1Q tagged frame), `EINVAL` for frames shorter than 14 bytes.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // struct virtio_net_hdr: flags 0, gso_type NONE, hdr_len (little-endian on x86), rest 0.
        let mut vnet = [0u8; VNET_HDR_LEN];
        let hdr_len = u16::try_from(frame.len()).unwrap_or(u16::MAX);
        vnet[2..4].copy_from_slice(&hdr_len.to_le_bytes());
        let iov = [
            libc::iovec {
                iov_base: vnet.as_mut_ptr().cast::<libc::c_void>(),
                iov_len: vnet.len(),
            },
            libc::iovec {
                iov_base: frame.as_ptr().cast_mut().cast::<libc::c_void>(),
                iov_len: frame.len(),
            },
        ];
        // SAFETY: the iovecs describe `vnet` and `frame`, which outlive the call; writev only
        // reads from them. The descriptor is owned by `self`.
        let n = unsafe { libc::writev(self.fd.as_raw_fd(), iov.as_ptr(), 2) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n as usize != VNET_HDR_LEN + frame.len() {
            return Err(io::Error::other(format!(
                "short send: {n} of {} bytes",
                frame.len()
            )));
        }
        Ok(())
    }
}

/// Size of struct virtio_net_hdr.
const VNET_HDR_LEN: usize = 10;

/// Whether the current process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid(2) has no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Runs `f` on a short-lived thread that has entered the network namespace `netns`; sockets
/// created there stay in that namespace for their whole life. The caller's thread is not moved.
fn in_netns<T: Send + 'static>(
    netns: &Path,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let ns = File::open(netns).map_err(|e| Error::io(format!("open {}", netns.display()), e))?;
    std::thread::spawn(move || {
        // SAFETY: `ns` is an open file descriptor of a network namespace handle; setns only
        // changes the network namespace of this (private, short-lived) thread.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(Error::io("setns", io::Error::last_os_error()));
        }
        f()
    })
    .join()
    .map_err(|_| Error::io("netns thread", io::Error::other("panicked")))?
}

/// `SOL_NETLINK` (linux/socket.h).
const SOL_NETLINK: libc::c_int = 270;

/// A NETLINK_NETFILTER socket subscribed to the nftables trace group of one namespace.
#[derive(Debug)]
pub struct TraceSocket {
    fd: OwnedFd,
}

impl TraceSocket {
    /// Opens the socket inside the namespace whose handle is `netns` and joins
    /// NFNLGRP_NFTRACE. Events are queued from this call on (a 4 MiB receive buffer).
    ///
    /// # Errors
    /// When the namespace cannot be entered or a socket call fails.
    pub fn open_in(netns: &Path) -> Result<Self> {
        let fd = in_netns(netns, || {
            // SAFETY: plain socket(2) call with constant arguments; the result is checked.
            let raw = unsafe {
                libc::socket(
                    libc::AF_NETLINK,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                    libc::NETLINK_NETFILTER,
                )
            };
            if raw < 0 {
                return Err(Error::io("socket(AF_NETLINK)", io::Error::last_os_error()));
            }
            // SAFETY: `raw` is a fresh descriptor that nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            // SAFETY: sockaddr_nl is plain old data; all-zero is a valid value.
            let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
            sa.nl_family = libc::AF_NETLINK as u16;
            // SAFETY: `sa` is a valid sockaddr_nl and the length passed is its size.
            let rc = unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    (&sa as *const libc::sockaddr_nl).cast::<libc::sockaddr>(),
                    std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                return Err(Error::io("bind(AF_NETLINK)", io::Error::last_os_error()));
            }
            setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 4 << 20)
                .or_else(|_| setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 4 << 20))
                .map_err(|e| Error::io("SO_RCVBUF", e))?;
            setsockopt_int(
                &fd,
                SOL_NETLINK,
                libc::NETLINK_ADD_MEMBERSHIP,
                libc::NFNLGRP_NFTRACE,
            )
            .map_err(|e| Error::io("NETLINK_ADD_MEMBERSHIP(NFNLGRP_NFTRACE)", e))?;
            Ok(fd)
        })?;
        Ok(TraceSocket { fd })
    }

    /// Receives one datagram (one or more netlink messages) into `buf`, waiting at most
    /// `timeout`; `Ok(None)` when nothing arrived in time.
    ///
    /// # Errors
    /// The OS error (`ENOBUFS` when events were lost because the buffer overflowed).
    pub fn recv(&self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `pfd` is one valid pollfd and the count passed is 1.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(None);
        }
        // SAFETY: the pointer and length describe `buf`, which outlives the call.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast::<libc::c_void>(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock {
                return Ok(None);
            }
            return Err(e);
        }
        Ok(Some(n as usize))
    }
}

fn setsockopt_int(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option value is a c_int that outlives the call and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast::<libc::c_void>(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
