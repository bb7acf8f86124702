//! The syscall seam: every system call of the crate goes through the [`Sys`] and [`Ring`]
//! traits. [`real`] implements them with libc and the `io-uring` crate (the only `unsafe` of the
//! crate); `fake` (tests only) simulates the kernel's side of the rings so that the buffer and
//! batching logic of `crate::uring` runs in unit tests.
//!
//! Both implementations keep the ownership rules that make the shared memory sound, whatever
//! the caller does: a receive buffer is readable only between the completion that filled it and
//! its return ([`Ring::rx_buf`] panics otherwise), a send buffer is writable only while no send
//! of it is in flight, a `TPACKET_V3` block only while the kernel has handed it to us.

use std::io;
use std::time::Duration;

use crate::port::TpacketConfig;

pub(crate) mod real;

#[cfg(test)]
pub(crate) mod fake;

pub(crate) use real::{
    EventFd, RealSys, enter_netns, heap_in_use, map_large_blocks_alone, trim_heap,
};

/// An operation on one port of a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Multishot `recvmsg` on the port's socket (with `PACKET_AUXDATA`), buffers from the
    /// group's buffer ring, laid out as `crate::recvmsg` reads them.
    Recv,
    /// Multishot `read` on the port's file (TAP), buffers from the group's buffer ring.
    Read,
    /// Send the first `len` bytes of send buffer `slot`: `SEND` on a socket, `WRITE` on a TAP
    /// file when `write`.
    Tx {
        /// Send buffer index.
        slot: u32,
        /// Bytes to send.
        len: u32,
        /// `IORING_OP_WRITE` instead of `IORING_OP_SEND`.
        write: bool,
    },
    /// One-shot `POLL_ADD` for `POLLIN` on the port's fd (a `TPACKET_V3` block is ready).
    PollIn,
    /// One-shot `POLL_ADD` for `POLLIN` on the ring's waker ([`Ring::set_waker`]); `port` is
    /// ignored.
    Wake,
    /// Cancel every request in flight (`ASYNC_CANCEL` with `ANY`); `port` is ignored.
    CancelAll,
}

/// A submission: an operation and its port (index in the ring's port list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sqe {
    pub port: u32,
    pub op: Op,
}

/// A completion, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cqe {
    /// The submission it completes (for [`Op::Tx`], with the length that was submitted).
    pub sqe: Sqe,
    /// Result: bytes, or a negated errno.
    pub res: i32,
    /// The receive buffer it filled (now held by the caller until [`Ring::rx_provide`]).
    pub buf: Option<u16>,
    /// `IORING_CQE_F_MORE`: the multishot request goes on.
    pub more: bool,
}

/// What a packet socket is opened with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SocketSpec {
    /// Device to bind to.
    pub ifindex: u32,
    /// `PACKET_FANOUT` argument (`id | mode << 16`), joined after binding.
    pub fanout: Option<u32>,
    /// `SO_RCVBUFFORCE` bytes, 0 to keep the default.
    pub rcvbuf: u32,
    /// A `TPACKET_V3` receive ring to set up and map.
    pub tpacket: Option<TpacketConfig>,
    /// A `PACKET_TX_RING` to set up and map.
    pub tx_ring: Option<TxRingSpec>,
    /// `PACKET_AUXDATA`: each `recvmsg` carries a `struct tpacket_auxdata`.
    pub auxdata: bool,
}

/// Size of a `PACKET_TX_RING`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TxRingSpec {
    /// Frames in the ring (rounded up to whole blocks).
    pub frames: u32,
    /// Longest frame, bytes.
    pub frame_bytes: u32,
}

/// Who owns a frame of a `PACKET_TX_RING`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxrState {
    /// Ours (`TP_STATUS_AVAILABLE`).
    Free,
    /// The kernel's: send requested or in flight.
    Busy,
    /// Ours again, but the kernel refused the frame (`TP_STATUS_WRONG_FORMAT`).
    Failed,
}

/// Sizes of a ring's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RingSpec {
    pub sq_entries: u32,
    pub rx_buffers: u32,
    pub rx_buffer_bytes: u32,
    pub tx_buffers: u32,
    pub tx_buffer_bytes: u32,
}

/// Device-level system calls.
pub(crate) trait Sys {
    /// An opened device (socket or TAP file, and its mapped ring if any).
    type Port;
    /// The io_uring (with its buffer memory) that drives the ports.
    type Ring: Ring;

    /// `if_nametoindex`.
    fn if_index(&self, name: &str) -> io::Result<u32>;
    /// `SIOCGIFHWADDR`.
    fn if_hwaddr(&self, name: &str) -> io::Result<[u8; 6]>;
    /// `SIOCGIFMTU`.
    fn if_mtu(&self, name: &str) -> io::Result<u32>;
    /// An AF_PACKET `SOCK_RAW` socket for every protocol (`ETH_P_ALL`), bound to the device,
    /// ignoring outgoing frames; on failure, the step that failed.
    fn packet_socket(&self, spec: &SocketSpec) -> Result<Self::Port, (&'static str, io::Error)>;
    /// Opens (creating it when missing) a queue of the TAP device `name` (`IFF_TAP |
    /// IFF_NO_PI`, and `IFF_MULTI_QUEUE` when `multi_queue`); returns the port and the
    /// device's name. The kernel's errors (`tun_set_iff`): `EINVAL` when the device exists with
    /// the other `IFF_MULTI_QUEUE` setting or is not a TAP device, `EBUSY` when a
    /// single-queue device is already attached.
    fn tap_open(&self, name: &str, multi_queue: bool) -> io::Result<(Self::Port, String)>;
    /// An io_uring (`SINGLE_ISSUER | DEFER_TASKRUN`, enabled on first use) driving `ports`
    /// (indexed by position), with its receive buffer ring and send buffers.
    fn ring(&self, spec: &RingSpec, ports: Vec<Self::Port>) -> io::Result<Self::Ring>;
}

/// Read access to a ring's held receive memory: what the frames handed to a receive callback
/// borrow while the send side ([`TxMem`]) is written.
pub(crate) trait RxMem {
    /// Held receive buffer `bid` (the first bytes are what the completion reported).
    fn rx_buf(&self, bid: u16) -> &[u8];
    /// Held block `blk` of `port`'s `TPACKET_V3` ring.
    fn tp_block(&self, port: u32, blk: u32) -> &[u8];
}

/// Write access to a ring's send memory: the send buffers of [`Op::Tx`] and the frames of
/// the ports' `PACKET_TX_RING`s. Disjoint from the receive memory ([`RxMem`]), so both can be
/// borrowed at once ([`Ring::split`]).
pub(crate) trait TxMem {
    /// Send buffer `slot` (not in flight), to fill before pushing its [`Op::Tx`].
    fn tx_slot(&mut self, slot: u32) -> &mut [u8];
    /// Frames of `port`'s `PACKET_TX_RING` (0 without one).
    fn txr_frames(&self, port: u32) -> u32;
    /// Who owns frame `idx` of `port`'s TX ring.
    fn txr_state(&self, port: u32, idx: u32) -> TxrState;
    /// The data area of TX ring frame `idx` (not [`TxrState::Busy`]; panics otherwise).
    fn txr_buf(&mut self, port: u32, idx: u32) -> &mut [u8];
    /// Hands TX ring frame `idx` (its first `len` bytes) to the kernel (`SEND_REQUEST`).
    fn txr_commit(&mut self, port: u32, idx: u32, len: u32);
}

/// One io_uring and the memory it reads and writes.
pub(crate) trait Ring {
    /// The receive memory, borrowed.
    type Rx<'a>: RxMem
    where
        Self: 'a;
    /// The send memory, borrowed.
    type Tx<'a>: TxMem
    where
        Self: 'a;

    /// The receive memory (to read held buffers and blocks) and the send memory (to fill send
    /// buffers and TX ring frames) at once: frames handed to a receive callback are written
    /// straight into the send side.
    fn split(&mut self) -> (Self::Rx<'_>, Self::Tx<'_>);
    /// Queues a submission (not yet seen by the kernel). False when the submission queue is
    /// full. Panics for a send buffer already in flight.
    fn push(&mut self, sqe: Sqe) -> bool;
    /// Submits what is queued without waiting.
    fn submit(&mut self) -> io::Result<()>;
    /// Submits what is queued and waits until `min` completions are ready or `timeout` passed
    /// (a timeout is not an error). `min` 0: runs deferred completions without waiting.
    fn enter(&mut self, min: u32, timeout: Duration) -> io::Result<()>;
    /// The next completion, if one is ready.
    fn pop(&mut self) -> Option<Cqe>;
    /// Receive buffers in the ring.
    fn rx_count(&self) -> u32;
    /// Held receive buffer `bid` (as [`RxMem::rx_buf`]).
    fn rx_buf(&self, bid: u16) -> &[u8];
    /// Held receive buffer `bid`, to write (e.g. complete a checksum in place).
    fn rx_buf_mut(&mut self, bid: u16) -> &mut [u8];
    /// Returns held receive buffer `bid` to the kernel.
    fn rx_provide(&mut self, bid: u16);
    /// Send buffers.
    fn tx_count(&self) -> u32;
    /// Blocks of `port`'s `TPACKET_V3` ring (0 without one).
    fn tp_blocks(&self, port: u32) -> u32;
    /// Whether the kernel has handed block `blk` of `port` to us (it is then held).
    fn tp_take(&mut self, port: u32, blk: u32) -> bool;
    /// Whether the kernel has handed block `blk` of `port` to us, without taking it.
    fn tp_user(&self, port: u32, blk: u32) -> bool;
    /// Held block `blk` of `port` (as [`RxMem::tp_block`]).
    fn tp_block(&self, port: u32, blk: u32) -> &[u8];
    /// Held block `blk` of `port`, to write (e.g. complete a checksum in place).
    fn tp_block_mut(&mut self, port: u32, blk: u32) -> &mut [u8];
    /// Hands held block `blk` back to the kernel.
    fn tp_release(&mut self, port: u32, blk: u32);
    /// Frames the kernel dropped on `port` since it was opened (`PACKET_STATISTICS`).
    fn kernel_drops(&self, port: u32) -> u64;
    /// Reads and clears `port`'s pending socket error (`SO_ERROR`); 0 when there is none.
    fn take_error(&mut self, port: u32) -> i32;
    /// Takes back TX ring frame `idx` if the kernel has not started on it.
    fn txr_cancel(&mut self, port: u32, idx: u32);
    /// `sendto(fd, NULL, 0, MSG_DONTWAIT)`: the kernel sends every requested frame of `port`'s
    /// TX ring, in ring order; returns the bytes sent.
    fn txr_kick(&mut self, port: u32) -> io::Result<usize>;
    /// The eventfd whose signal ends a wait ([`Op::Wake`]).
    fn set_waker(&mut self, waker: std::sync::Arc<EventFd>);
    /// Clear the waker's signal (after its poll completed).
    fn drain_waker(&mut self);
}
