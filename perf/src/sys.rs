//! The system calls the veth benchmarks share (io-floor, e2e): root check, thread CPU time,
//! and a sender that pushes frames through an AF_PACKET socket with `sendmmsg`, 64 per call.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Whether the effective uid is 0.
pub fn is_root() -> bool {
    // SAFETY: geteuid(2) takes no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// This thread's CPU time (user + sys, softirqs run in its context included), ns.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Run `c` to its end (stdout and stderr discarded unless the caller set them): its exit
/// status and peak resident set (wait4's `ru_maxrss` for that child alone), KiB.
///
/// # Errors
/// The spawn or the wait failed.
pub fn run_peak_rss(c: &mut std::process::Command) -> io::Result<(std::process::ExitStatus, u64)> {
    use std::os::unix::process::ExitStatusExt as _;
    let child = c.spawn()?;
    let pid = libc::pid_t::try_from(child.id()).map_err(io::Error::other)?;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet waited for (the `Child` is never waited: it is
    // dropped without `wait`); `status` and `ru` are valid and writable for the call.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    drop(child);
    Ok((
        std::process::ExitStatus::from_raw(status),
        u64::try_from(ru.ru_maxrss).unwrap_or(0),
    ))
}

/// A raw AF_PACKET socket bound to one device of a namespace.
pub struct Sender {
    fd: OwnedFd,
}

impl Sender {
    /// Opens the socket inside namespace `ns` (under /run/netns) bound to `dev`.
    pub fn open_in(ns: &str, dev: &str) -> io::Result<Sender> {
        let dev = CString::new(dev).map_err(io::Error::other)?;
        let fd = wasp_io::in_netns(ns, move || -> io::Result<OwnedFd> {
            // SAFETY: socket(2) with constant arguments; the result is checked.
            let raw =
                unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
            if raw < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `raw` is a fresh descriptor nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            // SAFETY: `dev` is NUL-terminated and outlives the call.
            let ifindex = unsafe { libc::if_nametoindex(dev.as_ptr()) };
            if ifindex == 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_ifindex = ifindex as i32;
            // SAFETY: `sll` is a valid sockaddr_ll and its size is passed.
            let rc = unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    (&sll as *const libc::sockaddr_ll).cast(),
                    std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(fd)
        })
        .map_err(io::Error::other)??;
        Ok(Sender { fd })
    }

    /// Sends `n` frames, cycling through `frames`, 64 per `sendmmsg` call.
    pub fn send(&self, frames: &[Vec<u8>], n: u64) -> io::Result<()> {
        const BATCH: usize = 64;
        let mut iovs: Vec<libc::iovec> = (0..BATCH)
            .map(|i| {
                let f = &frames[i % frames.len()];
                libc::iovec {
                    iov_base: f.as_ptr().cast_mut().cast(),
                    iov_len: f.len(),
                }
            })
            .collect();
        // SAFETY: mmsghdr is plain old data; all-zero is a valid value.
        let mut msgs: Vec<libc::mmsghdr> =
            (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect();
        for (m, iov) in msgs.iter_mut().zip(iovs.iter_mut()) {
            m.msg_hdr.msg_iov = iov;
            m.msg_hdr.msg_iovlen = 1;
        }
        let mut left = n;
        while left > 0 {
            let k = left.min(BATCH as u64) as u32;
            // SAFETY: `msgs` holds at least `k` headers, each with one iovec pointing at a
            // frame of `frames`, all alive for the call; the kernel only reads the frames
            // and writes msg_len into the headers, which we own.
            let rc = unsafe { libc::sendmmsg(self.fd.as_raw_fd(), msgs.as_mut_ptr(), k, 0) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if matches!(e.raw_os_error(), Some(libc::EINTR | libc::ENOBUFS)) {
                    continue;
                }
                return Err(e);
            }
            left -= rc as u64;
        }
        Ok(())
    }
}
