//! The real seam: libc system calls and the `io-uring` crate.

use std::cell::Cell;
use std::ffi::CString;
use std::io;
use std::mem::{ManuallyDrop, size_of};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::time::Duration;

use io_uring::types::{CancelBuilder, Fixed, SubmitArgs, Timespec};
use io_uring::{IoUring, cqueue, opcode};

use super::{Cqe, Op, Ring, RingSpec, RxMem, SocketSpec, Sqe, Sys, TxMem, TxrState};

// <linux/if_packet.h>
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_TX_RING: libc::c_int = 13;
const PACKET_LOSS: libc::c_int = 14;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_FANOUT: libc::c_int = 18;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const PACKET_AUXDATA: libc::c_int = 8;
/// `IFF_MULTI_QUEUE` (<linux/if_tun.h>).
const IFF_MULTI_QUEUE: libc::c_int = 0x0100;
const TPACKET_V3: libc::c_int = 2;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_WRONG_FORMAT: u32 = 4;
/// Offsets in `struct tpacket3_hdr` for the TX ring, and where a frame's data starts
/// (`TPACKET3_HDRLEN - sizeof(struct sockaddr_ll)`, `tpacket_parse_header`).
const TX_NEXT_OFFSET_OFF: usize = 0;
const TX_LEN_OFF: usize = 16;
const TX_STATUS_OFF: usize = 20;
pub(crate) const TX_DATA_OFF: usize = 48;
/// Offset of `hdr.bh1.block_status` in `struct tpacket_block_desc`.
const BLOCK_STATUS_OFF: usize = 8;
/// `SO_RCVBUFFORCE` (<asm-generic/socket.h>).
const SO_RCVBUFFORCE: libc::c_int = 33;

/// The one buffer group of a ring.
const BGID: u16 = 0;
/// `IORING_ENTER_GETEVENTS` (<linux/io_uring.h>).
const IORING_ENTER_GETEVENTS: u32 = 1;

/// `struct tpacket_req3`.
#[repr(C)]
struct TpacketReq3 {
    tp_block_size: u32,
    tp_block_nr: u32,
    tp_frame_size: u32,
    tp_frame_nr: u32,
    tp_retire_blk_tov: u32,
    tp_sizeof_priv: u32,
    tp_feature_req_word: u32,
}

/// `struct tpacket_stats` (the first two fields of `tpacket_stats_v3`).
#[repr(C)]
#[derive(Default)]
struct TpacketStats {
    tp_packets: u32,
    tp_drops: u32,
}

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A device name as the kernel takes it (`IFNAMSIZ`: at most 15 bytes, no NUL or '/').
fn ifname(name: &str) -> io::Result<[libc::c_char; libc::IFNAMSIZ]> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['\0', '/']) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid device name {name:?} (1 to 15 bytes, no NUL or '/')"),
        ));
    }
    let mut out = [0 as libc::c_char; libc::IFNAMSIZ];
    for (o, b) in out.iter_mut().zip(name.bytes()) {
        *o = b as libc::c_char;
    }
    Ok(out)
}

/// An `ifreq` for `name` with a zeroed union.
fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    // SAFETY: ifreq is plain old data (a name array and a union of PODs); all-zero is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    ifr.ifr_name = ifname(name)?;
    Ok(ifr)
}

/// An `AF_INET` datagram socket for interface ioctls (needs no privilege).
fn ctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; the result is checked before use.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `ioctl(fd, req, ifr)`.
fn if_ioctl(req: libc::c_ulong, ifr: &mut libc::ifreq) -> io::Result<()> {
    let s = ctl_socket()?;
    // SAFETY: `ifr` is a valid, writable ifreq for the call; the interface ioctls read its
    // name and write only inside it.
    cvt(unsafe { libc::ioctl(s.as_raw_fd(), req as _, ifr as *mut libc::ifreq) })?;
    Ok(())
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` points at a live T of the size passed; the kernel only reads it.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (val as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Moves the calling thread into the network namespace `ns` (an open `/run/netns/NAME` or
/// `/proc/PID/ns/net`): `setns(2)` with `CLONE_NEWNET`.
pub(crate) fn enter_netns(ns: &std::fs::File) -> io::Result<()> {
    // SAFETY: `ns` is an open file; setns only changes the calling thread's namespace.
    cvt(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) })?;
    Ok(())
}

/// Gives the pages the C library's allocator holds free back to the kernel: glibc's
/// `malloc_trim(0)`, over every arena (the main heap's top and, inside each arena, every free
/// chunk's whole pages, by `madvise(MADV_DONTNEED)`). `true` when memory was released. Other C
/// libraries: nothing (`false`).
pub(crate) fn trim_heap() -> bool {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: malloc_trim(3) takes a size and touches only the allocator's own free
        // memory, under each arena's lock.
        unsafe { libc::malloc_trim(0) != 0 }
    }
    #[cfg(not(target_env = "gnu"))]
    false
}

/// Fix the allocator's threshold for mapping a block on its own at `bytes` (glibc's
/// `mallopt(M_MMAP_THRESHOLD)`; other C libraries: `false`).
pub(crate) fn map_large_blocks_alone(bytes: usize) -> bool {
    #[cfg(target_env = "gnu")]
    {
        let Ok(b) = libc::c_int::try_from(bytes) else {
            return false;
        };
        // SAFETY: mallopt(3) takes two integers and changes the allocator's parameters under
        // its lock; blocks already handed out are unaffected.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, b) == 1 }
    }
    #[cfg(not(target_env = "gnu"))]
    {
        let _ = bytes;
        false
    }
}

/// Bytes in blocks glibc mapped on their own (`mallinfo2().hblkhd`), for tests.
#[cfg(all(test, target_env = "gnu"))]
pub(crate) fn heap_mapped_alone() -> usize {
    // SAFETY: mallinfo2(3) takes no arguments and only reads the allocator's statistics.
    unsafe { libc::mallinfo2() }.hblkhd
}

/// Bytes the C library's allocator has handed out and not had back, over every arena: glibc's
/// `mallinfo2()`, `uordblks` (chunks in use) + `hblkhd` (blocks mapped on their own). Other C
/// libraries: `None`.
pub(crate) fn heap_in_use() -> Option<u64> {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: mallinfo2(3) takes no arguments and returns a plain struct by value; it only
        // reads the allocator's statistics, under each arena's lock.
        let m = unsafe { libc::mallinfo2() };
        Some((m.uordblks + m.hblkhd) as u64)
    }
    #[cfg(not(target_env = "gnu"))]
    None
}

/// Test helper: removes `CAP_NET_RAW` and `CAP_NET_ADMIN` from the calling thread's effective
/// set (capabilities are per thread), so that the next privileged call fails with `EPERM`.
#[cfg(test)]
pub(crate) fn drop_net_caps_of_this_thread() -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const V3: u32 = 0x2008_0522;
    const CAP_NET_ADMIN: u32 = 12;
    const CAP_NET_RAW: u32 = 13;
    let mut hdr = Header {
        version: V3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget with a v3 header writes two Data structs, which `data` holds.
    cvt(
        unsafe { libc::syscall(libc::SYS_capget, &mut hdr as *mut Header, data.as_mut_ptr()) }
            as libc::c_int,
    )?;
    data[0].effective &= !((1 << CAP_NET_ADMIN) | (1 << CAP_NET_RAW));
    // SAFETY: capset reads the header and two Data structs; pid 0 is this thread.
    cvt(
        unsafe { libc::syscall(libc::SYS_capset, &mut hdr as *mut Header, data.as_ptr()) }
            as libc::c_int,
    )?;
    Ok(())
}

/// An mmap'ed region, unmapped on drop.
struct Mmap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the region is plain memory owned by this value; access is mediated by `RealRing`,
// which is used from one thread at a time (`&mut self` for writes).
unsafe impl Send for Mmap {}

impl Mmap {
    /// Anonymous, zeroed, page-aligned memory of `len` bytes (populated up front).
    fn anon(len: usize) -> io::Result<Mmap> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len.max(1),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap {
            ptr: p.cast(),
            len: len.max(1),
        })
    }

    /// The packet socket's ring, shared with the kernel.
    fn shared(fd: RawFd, len: usize) -> io::Result<Mmap> {
        // SAFETY: maps the ring the kernel set up for `fd` (PACKET_RX_RING) of exactly `len`
        // bytes; a fresh mapping, no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap { ptr: p.cast(), len })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly one mapping made by `anon`/`shared`, unmapped once;
        // its users (rings, sockets) are gone or quiescent by the owners' drop order.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A port's `TPACKET_V3` receive ring (at the start of the port's mapping) and which blocks we
/// hold.
struct TpRx {
    block_bytes: usize,
    held: Vec<bool>,
}

/// A port's `PACKET_TX_RING` (after the receive ring in the port's mapping).
struct TxRing {
    /// Offset of the ring in the mapping.
    off: usize,
    block_bytes: usize,
    frame_bytes: usize,
    per_block: usize,
    frames: usize,
}

impl TxRing {
    fn frame_off(&self, idx: u32) -> usize {
        let i = idx as usize;
        assert!(i < self.frames, "tx ring frame {idx} out of range");
        self.off + (i / self.per_block) * self.block_bytes + (i % self.per_block) * self.frame_bytes
    }
}

/// The u32 at `off` of a port's mapping, shared with the kernel.
fn shared_u32(map: &Mmap, off: usize) -> &AtomicU32 {
    assert!(
        off + 4 <= map.len && off.is_multiple_of(4),
        "shared u32 at {off}"
    );
    // SAFETY: the u32 lies inside the mapping and is 4-aligned (checked above; the mapping is
    // page-aligned); the kernel reads and writes these status words atomically too.
    unsafe { AtomicU32::from_ptr(map.ptr.add(off).cast()) }
}

/// An opened device: a packet socket or a TAP file, and the socket's mapped ring.
pub(crate) struct RealPort {
    fd: OwnedFd,
    /// The socket's rings, one mapping: the receive ring first, then the transmit ring (the
    /// kernel's layout for `mmap` of a packet socket).
    map: Option<Mmap>,
    tp: Option<TpRx>,
    txr: Option<TxRing>,
    socket: bool,
}

/// The real system calls.
pub(crate) struct RealSys;

impl Sys for RealSys {
    type Port = RealPort;
    type Ring = RealRing;

    fn if_index(&self, name: &str) -> io::Result<u32> {
        let c = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::ENODEV))?;
        ifname(name)?;
        // SAFETY: `c` is NUL-terminated and outlives the call.
        let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
        if i == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(i)
    }

    fn if_hwaddr(&self, name: &str) -> io::Result<[u8; 6]> {
        let mut ifr = ifreq(name)?;
        if_ioctl(libc::SIOCGIFHWADDR, &mut ifr)?;
        // SAFETY: SIOCGIFHWADDR filled the union's sockaddr member.
        let sa = unsafe { ifr.ifr_ifru.ifru_hwaddr };
        let mut mac = [0u8; 6];
        for (m, b) in mac.iter_mut().zip(sa.sa_data.iter()) {
            *m = *b as u8;
        }
        Ok(mac)
    }

    fn if_mtu(&self, name: &str) -> io::Result<u32> {
        let mut ifr = ifreq(name)?;
        if_ioctl(libc::SIOCGIFMTU, &mut ifr)?;
        // SAFETY: SIOCGIFMTU filled the union's int member.
        Ok(unsafe { ifr.ifr_ifru.ifru_mtu } as u32)
    }

    fn packet_socket(&self, spec: &SocketSpec) -> Result<RealPort, (&'static str, io::Error)> {
        // Protocol 0 until bind: the socket sees no frame of another device meanwhile.
        // SAFETY: socket(2) with constant arguments; the result is checked before use.
        let raw =
            cvt(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })
                .map_err(|e| ("AF_PACKET socket", e))?;
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        setsockopt(
            raw,
            libc::SOL_PACKET,
            PACKET_IGNORE_OUTGOING,
            &1 as &libc::c_int,
        )
        .map_err(|e| ("PACKET_IGNORE_OUTGOING", e))?;
        if spec.auxdata {
            setsockopt(raw, libc::SOL_PACKET, PACKET_AUXDATA, &1 as &libc::c_int)
                .map_err(|e| ("PACKET_AUXDATA", e))?;
        }
        if spec.rcvbuf > 0 {
            setsockopt(
                raw,
                libc::SOL_SOCKET,
                SO_RCVBUFFORCE,
                &(spec.rcvbuf as libc::c_int),
            )
            .map_err(|e| ("SO_RCVBUFFORCE", e))?;
        }
        let (map, tp, txr) = packet_rings(raw, spec)?;
        // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = spec.ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll and its size is passed.
        cvt(unsafe {
            libc::bind(
                raw,
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })
        .map_err(|e| ("bind", e))?;
        if let Some(arg) = spec.fanout {
            setsockopt(raw, libc::SOL_PACKET, PACKET_FANOUT, &(arg as libc::c_int))
                .map_err(|e| ("PACKET_FANOUT", e))?;
        }
        Ok(RealPort {
            fd,
            map,
            tp,
            txr,
            socket: true,
        })
    }

    fn tap_open(&self, name: &str, multi_queue: bool) -> io::Result<(RealPort, String)> {
        let mut ifr = ifreq(name)?;
        let mq = if multi_queue { IFF_MULTI_QUEUE } else { 0 };
        ifr.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI | mq) as libc::c_short;
        // SAFETY: open(2) with a constant NUL-terminated path; the result is checked.
        let raw =
            cvt(unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) })?;
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: TUNSETIFF reads and writes the ifreq `ifr`, valid for the call.
        cvt(unsafe { libc::ioctl(raw, libc::TUNSETIFF as _, &mut ifr as *mut libc::ifreq) })?;
        let n: Vec<u8> = ifr
            .ifr_name
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        Ok((
            RealPort {
                fd,
                map: None,
                tp: None,
                txr: None,
                socket: false,
            },
            String::from_utf8_lossy(&n).into_owned(),
        ))
    }

    fn ring(&self, spec: &RingSpec, ports: Vec<RealPort>) -> io::Result<RealRing> {
        RealRing::new(spec, ports)
    }
}

/// The socket's rings, when it has any: `PACKET_VERSION` V3, then `PACKET_RX_RING` and/or
/// `PACKET_TX_RING` (with `PACKET_LOSS`: a malformed frame is marked, not retried), and one
/// mapping of both.
#[allow(clippy::type_complexity)]
fn packet_rings(
    fd: RawFd,
    spec: &SocketSpec,
) -> Result<(Option<Mmap>, Option<TpRx>, Option<TxRing>), (&'static str, io::Error)> {
    if spec.tpacket.is_none() && spec.tx_ring.is_none() {
        return Ok((None, None, None));
    }
    setsockopt(fd, libc::SOL_PACKET, PACKET_VERSION, &TPACKET_V3)
        .map_err(|e| ("PACKET_VERSION", e))?;
    if spec.tx_ring.is_some() {
        // Before any ring: the kernel refuses PACKET_LOSS once one exists (EBUSY).
        setsockopt(fd, libc::SOL_PACKET, PACKET_LOSS, &1 as &libc::c_int)
            .map_err(|e| ("PACKET_LOSS", e))?;
    }
    let mut len = 0usize;
    let mut tp = None;
    if let Some(t) = spec.tpacket {
        let req = TpacketReq3 {
            tp_block_size: t.block_bytes,
            tp_block_nr: t.blocks,
            tp_frame_size: t.frame_bytes,
            tp_frame_nr: (t.block_bytes / t.frame_bytes) * t.blocks,
            tp_retire_blk_tov: t.retire_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(fd, libc::SOL_PACKET, PACKET_RX_RING, &req)
            .map_err(|e| ("PACKET_RX_RING", e))?;
        len = t.block_bytes as usize * t.blocks as usize;
        tp = Some(TpRx {
            block_bytes: t.block_bytes as usize,
            held: vec![false; t.blocks as usize],
        });
    }
    let mut txr = None;
    if let Some(t) = spec.tx_ring {
        // Frames hold the header and the data, 16-aligned; 64 KiB blocks.
        let frame = (t.frame_bytes as usize + TX_DATA_OFF).next_multiple_of(16);
        let block = 65536usize.max(frame.next_multiple_of(4096));
        let per_block = block / frame;
        let blocks = (t.frames as usize).div_ceil(per_block);
        let req = TpacketReq3 {
            tp_block_size: block as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: frame as u32,
            tp_frame_nr: (per_block * blocks) as u32,
            tp_retire_blk_tov: 0,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(fd, libc::SOL_PACKET, PACKET_TX_RING, &req)
            .map_err(|e| ("PACKET_TX_RING", e))?;
        txr = Some(TxRing {
            off: len,
            block_bytes: block,
            frame_bytes: frame,
            per_block,
            frames: per_block * blocks,
        });
        len += block * blocks;
    }
    let map = Mmap::shared(fd, len).map_err(|e| ("mmap of the packet rings", e))?;
    Ok((Some(map), tp, txr))
}

// user_data: kind in bits 56..64, port in 32..56, send buffer in 0..32.
const K_RECV: u64 = 1;
const K_READ: u64 = 2;
const K_TX: u64 = 3;
const K_POLL: u64 = 4;
const K_CANCEL: u64 = 5;
const K_WAKE: u64 = 6;

/// A non-blocking eventfd: another thread signals it to end a ring's wait.
#[derive(Debug)]
pub(crate) struct EventFd(OwnedFd);

impl EventFd {
    /// A new eventfd, count 0.
    pub(crate) fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd takes no pointers and returns a new descriptor or -1.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: `fd` was just opened and nothing else owns it.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Add 1 to the count (the fd becomes readable). Never blocks: a count at its maximum
    /// (EAGAIN) is readable already.
    pub(crate) fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to a descriptor this value owns.
        let _ = unsafe { libc::write(self.0.as_raw_fd(), (&raw const one).cast(), 8) };
    }

    /// Reset the count to 0 (nothing to read: EAGAIN, ignored).
    pub(crate) fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64 from a descriptor this value owns.
        let _ = unsafe { libc::read(self.0.as_raw_fd(), (&raw mut v).cast(), 8) };
    }

    fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// The `msghdr` of every multishot `recvmsg`: no name, `recvmsg::CONTROL_LEN` control bytes
/// reserved per buffer (the kernel reads the lengths when it prepares the request).
struct MsgHdr(Box<libc::msghdr>);

// SAFETY: the msghdr holds only null pointers and lengths, never dereferenced by us; the box
// moves with the ring.
unsafe impl Send for MsgHdr {}

impl MsgHdr {
    fn new() -> MsgHdr {
        // SAFETY: msghdr is plain old data; all-zero (null pointers, zero lengths) is valid.
        let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
        m.msg_controllen = crate::recvmsg::CONTROL_LEN as _;
        MsgHdr(Box::new(m))
    }
}

/// An io_uring with its provided-buffer ring, receive buffers and send buffers.
///
/// Field order is drop order: the ring (after [`Drop`] made it quiescent), the ports' files,
/// then the memory the kernel wrote into.
pub(crate) struct RealRing {
    ring: IoUring,
    ports: Vec<RealPort>,
    /// `struct io_uring_buf` entries (16 bytes each; the tail is in entry 0's last u16).
    buf_ring: ManuallyDrop<Mmap>,
    rx_mem: ManuallyDrop<Mmap>,
    tx_mem: ManuallyDrop<Mmap>,
    rx_count: u32,
    rx_bytes: usize,
    rx_held: Vec<bool>,
    /// Our copy of the buffer ring's tail.
    rx_tail: u16,
    tx_bytes: usize,
    /// Length of the send in flight per send buffer.
    tx_busy: Vec<Option<u32>>,
    /// Requests that can still complete (multishots count once).
    inflight: u64,
    /// The eventfd whose poll ends a wait ([`Ring::set_waker`]); kept open while its poll
    /// can be in flight.
    waker: Option<std::sync::Arc<EventFd>>,
    enabled: bool,
    drops: Vec<Cell<u64>>,
    /// Read by the kernel when a multishot `recvmsg` is prepared.
    msghdr: MsgHdr,
}

impl RealRing {
    fn new(spec: &RingSpec, ports: Vec<RealPort>) -> io::Result<RealRing> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_r_disabled()
            .setup_submit_all()
            .setup_cqsize(spec.sq_entries.saturating_mul(4).max(spec.rx_buffers * 2))
            .build(spec.sq_entries)?;
        let n = spec.rx_buffers as usize;
        let buf_ring = Mmap::anon(n * 16)?;
        let rx_mem = Mmap::anon(n * spec.rx_buffer_bytes as usize)?;
        let tx_mem = Mmap::anon(spec.tx_buffers as usize * spec.tx_buffer_bytes as usize)?;
        // SAFETY: `buf_ring` is page-aligned memory for `n` io_uring_buf entries that lives
        // until the ring is gone (`Drop` keeps it mapped while requests may still use it).
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                buf_ring.ptr as u64,
                n as u16,
                BGID,
                0,
            )?;
        }
        let nports = ports.len();
        let fds: Vec<RawFd> = ports.iter().map(|p| p.fd.as_raw_fd()).collect();
        ring.submitter().register_files(&fds)?;
        let mut r = RealRing {
            ring,
            ports,
            buf_ring: ManuallyDrop::new(buf_ring),
            rx_mem: ManuallyDrop::new(rx_mem),
            tx_mem: ManuallyDrop::new(tx_mem),
            rx_count: spec.rx_buffers,
            rx_bytes: spec.rx_buffer_bytes as usize,
            rx_held: vec![true; n],
            rx_tail: 0,
            tx_bytes: spec.tx_buffer_bytes as usize,
            tx_busy: vec![None; spec.tx_buffers as usize],
            inflight: 0,
            waker: None,
            enabled: false,
            drops: (0..nports).map(|_| Cell::new(0)).collect(),
            msghdr: MsgHdr::new(),
        };
        for bid in 0..n {
            r.rx_provide(bid as u16);
        }
        Ok(r)
    }

    fn enable(&mut self) -> io::Result<()> {
        if !self.enabled {
            self.ring.submitter().register_enable_rings()?;
            self.enabled = true;
        }
        Ok(())
    }

    /// The port's registered file (`register_files` in `new`: index = port), which saves the
    /// kernel a file lookup per request.
    fn fd(&self, port: u32) -> Fixed {
        assert!(
            (port as usize) < self.ports.len(),
            "port {port} out of range"
        );
        Fixed(port)
    }

    /// The port's mapping and receive ring.
    fn tp(&self, port: u32) -> (&Mmap, &TpRx) {
        tp_of(&self.ports, port)
    }

    /// The receive memory, borrowed for reading held buffers and blocks.
    fn rx_view(&self) -> RealRx<'_> {
        RealRx {
            ports: &self.ports,
            mem: &self.rx_mem,
            held: &self.rx_held,
            bytes: self.rx_bytes,
        }
    }
}

/// The port's mapping and receive ring.
fn tp_of(ports: &[RealPort], port: u32) -> (&Mmap, &TpRx) {
    let p = &ports[port as usize];
    match (&p.map, &p.tp) {
        (Some(m), Some(t)) => (m, t),
        _ => panic!("port {port} has no TPACKET_V3 ring"),
    }
}

/// The port's mapping and transmit ring.
fn txr_of(ports: &[RealPort], port: u32) -> (&Mmap, &TxRing) {
    let p = &ports[port as usize];
    match (&p.map, &p.txr) {
        (Some(m), Some(t)) => (m, t),
        _ => panic!("port {port} has no TX ring"),
    }
}

/// A [`RealRing`]'s receive memory: the provided buffers and the ports' `TPACKET_V3` rings
/// (the first part of each port's mapping). Made from `&RealRing` or by [`Ring::split`],
/// either of which keeps `rx_provide`/`tp_release` (which need `&mut RealRing`) from running
/// while it lives.
#[derive(Clone, Copy)]
pub(crate) struct RealRx<'a> {
    ports: &'a [RealPort],
    mem: &'a Mmap,
    held: &'a [bool],
    bytes: usize,
}

impl<'a> RealRx<'a> {
    fn buf(self, bid: u16) -> &'a [u8] {
        assert!(self.held[bid as usize], "receive buffer {bid} is not held");
        // SAFETY: bid < rx_count (indexing above), so the buffer lies inside rx_mem; the
        // kernel does not write a held buffer (it is not in the provided ring until
        // `rx_provide`), and the borrow of the ring this view holds keeps `rx_provide` from
        // running meanwhile. Nothing writes receive memory while a view exists (writers take
        // `&mut RealRing`; the send view of `split` writes only send memory).
        unsafe {
            std::slice::from_raw_parts(self.mem.ptr.add(bid as usize * self.bytes), self.bytes)
        }
    }

    fn block(self, port: u32, blk: u32) -> &'a [u8] {
        let (map, t) = tp_of(self.ports, port);
        assert!(t.held[blk as usize], "tpacket block {blk} is not held");
        assert!((blk as usize + 1) * t.block_bytes <= map.len);
        // SAFETY: the block lies inside the mapping's receive ring (checked above; the TX ring
        // comes after it, so the send view never writes here); the kernel handed it to us
        // (TP_STATUS_USER, acquired in `tp_take`) and does not write it until `tp_release`,
        // which the borrow of the ring this view holds keeps from running meanwhile.
        unsafe {
            std::slice::from_raw_parts(map.ptr.add(blk as usize * t.block_bytes), t.block_bytes)
        }
    }
}

impl RxMem for RealRx<'_> {
    fn rx_buf(&self, bid: u16) -> &[u8] {
        self.buf(bid)
    }
    fn tp_block(&self, port: u32, blk: u32) -> &[u8] {
        self.block(port, blk)
    }
}

/// A [`RealRing`]'s send memory: the send buffers and the ports' `PACKET_TX_RING`s (the second
/// part of each port's mapping). Made only by [`Ring::split`], which borrows the ring
/// exclusively for the view's life: no other access to the send memory exists meanwhile, and
/// `&mut self` makes each slice it lends exclusive.
pub(crate) struct RealTx<'a> {
    ports: &'a [RealPort],
    mem: &'a Mmap,
    bytes: usize,
    busy: &'a [Option<u32>],
}

impl TxMem for RealTx<'_> {
    fn tx_slot(&mut self, slot: u32) -> &mut [u8] {
        let s = slot as usize;
        assert!(self.busy[s].is_none(), "send buffer {slot} is in flight");
        // SAFETY: slot < tx_buffers (indexing above), so the buffer lies inside tx_mem; no send
        // of it is in flight, so the kernel does not read it; this view is the only access to
        // send memory while it lives (see the type) and `&mut self` makes the slice exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.mem.ptr.add(s * self.bytes), self.bytes) }
    }

    fn txr_frames(&self, port: u32) -> u32 {
        self.ports[port as usize]
            .txr
            .as_ref()
            .map_or(0, |t| t.frames as u32)
    }

    fn txr_state(&self, port: u32, idx: u32) -> TxrState {
        let (map, t) = txr_of(self.ports, port);
        match shared_u32(map, t.frame_off(idx) + TX_STATUS_OFF).load(Ordering::Acquire) {
            TP_STATUS_AVAILABLE => TxrState::Free,
            TP_STATUS_WRONG_FORMAT => TxrState::Failed,
            _ => TxrState::Busy,
        }
    }

    fn txr_buf(&mut self, port: u32, idx: u32) -> &mut [u8] {
        assert!(
            self.txr_state(port, idx) != TxrState::Busy,
            "tx ring frame {idx} is the kernel's"
        );
        let (map, t) = txr_of(self.ports, port);
        let off = t.frame_off(idx) + TX_DATA_OFF;
        let len = t.frame_bytes - TX_DATA_OFF;
        assert!(off + len <= map.len);
        // SAFETY: the frame lies inside the mapping (checked above), in its TX ring part (after
        // the receive ring, which the receive view reads); its status is neither SEND_REQUEST
        // nor SENDING (checked above), so the kernel does not read or write it until
        // `txr_commit`; this view is the only access to send memory while it lives (see the
        // type) and `&mut self` makes the slice exclusive.
        unsafe { std::slice::from_raw_parts_mut(map.ptr.add(off), len) }
    }

    fn txr_commit(&mut self, port: u32, idx: u32, len: u32) {
        assert!(
            self.txr_state(port, idx) != TxrState::Busy,
            "tx ring frame {idx} is the kernel's"
        );
        let (map, t) = txr_of(self.ports, port);
        assert!(
            len as usize <= t.frame_bytes - TX_DATA_OFF,
            "frame of {len} bytes"
        );
        let f = t.frame_off(idx);
        shared_u32(map, f + TX_NEXT_OFFSET_OFF).store(0, Ordering::Relaxed);
        shared_u32(map, f + TX_LEN_OFF).store(len, Ordering::Relaxed);
        // Publishes the header and the data written through `txr_buf`.
        shared_u32(map, f + TX_STATUS_OFF).store(TP_STATUS_SEND_REQUEST, Ordering::Release);
    }
}

impl Ring for RealRing {
    type Rx<'a> = RealRx<'a>;
    type Tx<'a> = RealTx<'a>;

    fn split(&mut self) -> (RealRx<'_>, RealTx<'_>) {
        let tx = RealTx {
            ports: &self.ports,
            mem: &self.tx_mem,
            bytes: self.tx_bytes,
            busy: &self.tx_busy,
        };
        (self.rx_view(), tx)
    }

    fn push(&mut self, sqe: Sqe) -> bool {
        let p = u64::from(sqe.port) << 32;
        let entry = match sqe.op {
            Op::Recv => {
                let msg: *const libc::msghdr = &*self.msghdr.0;
                opcode::RecvMsgMulti::new(self.fd(sqe.port), msg, BGID)
                    .build()
                    .user_data(K_RECV << 56 | p)
            }
            Op::Read => opcode::ReadMulti::new(self.fd(sqe.port), 0, BGID)
                .build()
                .user_data(K_READ << 56 | p),
            Op::Tx { slot, len, write } => {
                let s = slot as usize;
                assert!(self.tx_busy[s].is_none(), "send buffer {slot} is in flight");
                assert!(
                    len as usize <= self.tx_bytes,
                    "send of {len} bytes > buffer"
                );
                // SAFETY: slot < tx_buffers (indexing above), so the buffer lies inside tx_mem.
                let ptr = unsafe { self.tx_mem.ptr.add(s * self.tx_bytes) };
                let e = if write {
                    opcode::Write::new(self.fd(sqe.port), ptr, len).build()
                } else {
                    opcode::Send::new(self.fd(sqe.port), ptr, len).build()
                };
                e.user_data(K_TX << 56 | p | u64::from(slot))
            }
            Op::PollIn => opcode::PollAdd::new(self.fd(sqe.port), libc::POLLIN as u32)
                .build()
                .user_data(K_POLL << 56 | p),
            Op::CancelAll => opcode::AsyncCancel2::new(CancelBuilder::any())
                .build()
                .user_data(K_CANCEL << 56),
            Op::Wake => {
                let Some(w) = &self.waker else {
                    return false;
                };
                opcode::PollAdd::new(io_uring::types::Fd(w.raw()), libc::POLLIN as u32)
                    .build()
                    .user_data(K_WAKE << 56)
            }
        };
        // SAFETY: every buffer the entry points at outlives the request: the msghdr lives as
        // long as the ring (boxed, never moved), send buffers stay
        // mapped (and are not handed out, `tx_busy`) until their completion is popped, receive
        // buffers belong to the registered ring, and `Drop` waits for every request to end
        // before unmapping anything.
        let ok = unsafe { self.ring.submission().push(&entry).is_ok() };
        if ok {
            if let Op::Tx { slot, len, .. } = sqe.op {
                self.tx_busy[slot as usize] = Some(len);
            }
            if sqe.op != Op::CancelAll {
                self.inflight += 1;
            }
        }
        ok
    }

    fn submit(&mut self) -> io::Result<()> {
        self.enable()?;
        if !self.ring.submission().is_empty() {
            self.ring.submit()?;
        }
        Ok(())
    }

    fn enter(&mut self, min: u32, timeout: Duration) -> io::Result<()> {
        self.enable()?;
        let r = if min == 0 || timeout.is_zero() {
            let n = self.ring.submission().len() as u32;
            // SAFETY: plain io_uring_enter: submit what is queued (all valid entries, see
            // `push`) and run deferred completions; no argument pointer.
            unsafe {
                self.ring
                    .submitter()
                    .enter::<libc::sigset_t>(n, 0, IORING_ENTER_GETEVENTS, None)
            }
        } else {
            let ts = Timespec::from(timeout);
            let args = SubmitArgs::new().timespec(&ts);
            self.ring.submitter().submit_with_args(min as usize, &args)
        };
        match r {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn pop(&mut self) -> Option<Cqe> {
        let c = self.ring.completion().next()?;
        let ud = c.user_data();
        let port = ((ud >> 32) & 0xff_ffff) as u32;
        let more = cqueue::more(c.flags());
        let buf = cqueue::buffer_select(c.flags());
        if let Some(b) = buf {
            let h = &mut self.rx_held[b as usize];
            assert!(!*h, "kernel filled receive buffer {b} twice");
            *h = true;
        }
        let op = match ud >> 56 {
            K_RECV => Op::Recv,
            K_READ => Op::Read,
            K_TX => {
                let slot = ud as u32;
                let len = self.tx_busy[slot as usize].take().unwrap_or(0);
                Op::Tx {
                    slot,
                    len,
                    write: !self.ports[port as usize].socket,
                }
            }
            K_POLL => Op::PollIn,
            K_WAKE => Op::Wake,
            _ => Op::CancelAll,
        };
        if op != Op::CancelAll && !more {
            self.inflight = self.inflight.saturating_sub(1);
        }
        Some(Cqe {
            sqe: Sqe { port, op },
            res: c.result(),
            buf,
            more,
        })
    }

    fn rx_count(&self) -> u32 {
        self.rx_count
    }

    fn rx_buf(&self, bid: u16) -> &[u8] {
        self.rx_view().buf(bid)
    }

    fn rx_buf_mut(&mut self, bid: u16) -> &mut [u8] {
        assert!(
            self.rx_held[bid as usize],
            "receive buffer {bid} is not held"
        );
        // SAFETY: as `rx_buf`; `&mut self` makes the slice exclusive.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.rx_mem.ptr.add(bid as usize * self.rx_bytes),
                self.rx_bytes,
            )
        }
    }

    fn rx_provide(&mut self, bid: u16) {
        let h = &mut self.rx_held[bid as usize];
        assert!(*h, "receive buffer {bid} provided twice");
        *h = false;
        let idx = (self.rx_tail as usize) & (self.rx_count as usize - 1);
        // SAFETY: idx < rx_count entries of 16 bytes inside buf_ring; the entry at the tail is
        // not visible to the kernel until the tail store below. Only addr (0..8), len (8..12)
        // and bid (12..14) are written: entry 0's bytes 14..16 are the shared tail.
        unsafe {
            let e = self.buf_ring.ptr.add(idx * 16);
            e.cast::<u64>()
                .write(self.rx_mem.ptr.add(bid as usize * self.rx_bytes) as u64);
            e.add(8).cast::<u32>().write(self.rx_bytes as u32);
            e.add(12).cast::<u16>().write(bid);
        }
        self.rx_tail = self.rx_tail.wrapping_add(1);
        // SAFETY: the tail is the u16 at offset 14 of the page-aligned ring (2-aligned); the
        // kernel reads it with acquire semantics, the release store publishes the entry.
        unsafe { AtomicU16::from_ptr(self.buf_ring.ptr.add(14).cast()) }
            .store(self.rx_tail, Ordering::Release);
    }

    fn tx_count(&self) -> u32 {
        self.tx_busy.len() as u32
    }

    fn tp_blocks(&self, port: u32) -> u32 {
        self.ports[port as usize]
            .tp
            .as_ref()
            .map_or(0, |t| t.held.len() as u32)
    }

    fn tp_take(&mut self, port: u32, blk: u32) -> bool {
        let (map, t) = self.tp(port);
        let b = blk as usize;
        if t.held[b] {
            return true;
        }
        let status = shared_u32(map, b * t.block_bytes + BLOCK_STATUS_OFF);
        let user = status.load(Ordering::Acquire) & TP_STATUS_USER != 0;
        if let Some(t) = self.ports[port as usize].tp.as_mut() {
            t.held[b] = user;
        }
        user
    }

    fn tp_user(&self, port: u32, blk: u32) -> bool {
        let (map, t) = self.tp(port);
        let b = blk as usize;
        t.held[b]
            || shared_u32(map, b * t.block_bytes + BLOCK_STATUS_OFF).load(Ordering::Acquire)
                & TP_STATUS_USER
                != 0
    }

    fn tp_block_mut(&mut self, port: u32, blk: u32) -> &mut [u8] {
        let (map, t) = self.tp(port);
        assert!(t.held[blk as usize], "tpacket block {blk} is not held");
        assert!((blk as usize + 1) * t.block_bytes <= map.len);
        // SAFETY: as `tp_block`: the block is ours until `tp_release`; `&mut self` makes the
        // slice exclusive (the mapping is writable, MAP_SHARED).
        unsafe {
            std::slice::from_raw_parts_mut(map.ptr.add(blk as usize * t.block_bytes), t.block_bytes)
        }
    }

    fn tp_block(&self, port: u32, blk: u32) -> &[u8] {
        self.rx_view().block(port, blk)
    }

    fn tp_release(&mut self, port: u32, blk: u32) {
        let b = blk as usize;
        let p = &mut self.ports[port as usize];
        let t = p.tp.as_mut().expect("TPACKET_V3 port");
        assert!(t.held[b], "tpacket block {blk} is not held");
        t.held[b] = false;
        let off = b * t.block_bytes + BLOCK_STATUS_OFF;
        let map = p.map.as_ref().expect("mapped");
        shared_u32(map, off).store(TP_STATUS_KERNEL, Ordering::Release);
    }

    fn take_error(&mut self, port: u32) -> i32 {
        let fd = self.ports[port as usize].fd.as_raw_fd();
        let mut err: libc::c_int = 0;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `err` is writable for `len` bytes; SO_ERROR writes one int and clears the
        // socket's pending error.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&mut err as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if rc == 0 { err } else { 0 }
    }

    fn txr_cancel(&mut self, port: u32, idx: u32) {
        let (map, t) = txr_of(&self.ports, port);
        let st = shared_u32(map, t.frame_off(idx) + TX_STATUS_OFF);
        // Only a frame the kernel has not started on goes back to us.
        let _ = st.compare_exchange(
            TP_STATUS_SEND_REQUEST,
            TP_STATUS_AVAILABLE,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    fn txr_kick(&mut self, port: u32) -> io::Result<usize> {
        let fd = self.ports[port as usize].fd.as_raw_fd();
        // SAFETY: sendto with no buffer and no address: the packet socket sends the frames of
        // its TX ring marked SEND_REQUEST (tpacket_snd), which the ring's memory holds.
        let n = unsafe {
            libc::sendto(
                fd,
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    fn set_waker(&mut self, waker: std::sync::Arc<EventFd>) {
        self.waker = Some(waker);
    }

    fn drain_waker(&mut self) {
        if let Some(w) = &self.waker {
            w.drain();
        }
    }

    fn kernel_drops(&self, port: u32) -> u64 {
        let p = &self.ports[port as usize];
        if p.socket {
            let mut st = TpacketStats::default();
            let mut len = size_of::<TpacketStats>() as libc::socklen_t;
            // SAFETY: `st` is writable for `len` bytes; the kernel writes at most `len`.
            let rc = unsafe {
                libc::getsockopt(
                    p.fd.as_raw_fd(),
                    libc::SOL_PACKET,
                    PACKET_STATISTICS,
                    (&mut st as *mut TpacketStats).cast(),
                    &mut len,
                )
            };
            if rc == 0 {
                // PACKET_STATISTICS resets the kernel's counters: accumulate.
                let c = &self.drops[port as usize];
                c.set(c.get() + u64::from(st.tp_drops));
            }
        }
        self.drops[port as usize].get()
    }
}

impl Drop for RealRing {
    fn drop(&mut self) {
        // A ring never enabled never submitted anything.
        let mut quiet = self.inflight == 0 || !self.enabled;
        if !quiet && self.enabled {
            // Cancel what is in flight and wait (bounded) until every request has ended.
            let _ = self.push(Sqe {
                port: 0,
                op: Op::CancelAll,
            });
            for _ in 0..100 {
                if self.enter(1, Duration::from_millis(20)).is_err() {
                    break;
                }
                while self.pop().is_some() {}
                if self.inflight == 0 {
                    quiet = true;
                    break;
                }
            }
        }
        if quiet {
            // SAFETY: no request can touch the memory any more (none in flight, or the ring
            // never ran); each region is dropped once, here.
            unsafe {
                ManuallyDrop::drop(&mut self.buf_ring);
                ManuallyDrop::drop(&mut self.rx_mem);
                ManuallyDrop::drop(&mut self.tx_mem);
            }
        }
        // Otherwise (used from another thread: EEXIST) the memory is leaked rather than risk
        // the kernel writing into a region that was unmapped and reused.
    }
}
