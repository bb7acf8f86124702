//! The ports a worker drives, as the worker sees them: the seam between the daemon and
//! `wasp-io` (whose port groups implement it), so that the worker loop is tested with an
//! in-memory fake.

use std::time::Duration;

/// One received frame.
#[derive(Debug, Clone, Copy)]
pub struct RxFrame<'a> {
    /// Index of the port it came in on (into [`Ports::names`]).
    pub port: usize,
    /// The frame, Ethernet header first.
    pub data: &'a [u8],
}

/// Counts of one port, as the worker's port group keeps them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PortCounts {
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames the kernel or the ring dropped before wasp saw them.
    pub rx_dropped: u64,
    /// Frames that could not be sent (no send buffer free, send error, device down).
    pub tx_dropped: u64,
    /// Frames received with a partial TCP/UDP checksum (sent by a local stack through a device
    /// with checksum offload, e.g. veth) whose checksum the port completed before the ruleset
    /// saw them (`wasp_io::PortStats::csum_completed`).
    pub csum_completed: u64,
    /// Frames received with a partial checksum the port could not complete
    /// (`wasp_io::PortStats::csum_partial_left`).
    pub csum_partial_left: u64,
    /// How full the receive ring was at the worker's last poll, in percent
    /// (`wasp_io::PortStats::ring_occupancy_pct`: TPACKET_V3 blocks handed to user space and not
    /// yet returned; multishot and TAP, buffers of the provided-buffer ring holding the
    /// port's frames; 0 for captures).
    pub ring_occupancy_pct: u32,
}

/// A worker's ports: every device it serves, waited on together.
pub trait Ports: Send {
    /// Device names, by port index.
    fn names(&self) -> Vec<String>;
    /// Wait up to `timeout` for frames (returning early once `min` are ready), then give at
    /// most `max` of them to `on_rx` as one slice, with the send side to queue what leaves
    /// (copied once, from the receive buffer into a send buffer); returns how many. Receive
    /// buffers are recycled when `on_rx` returns.
    ///
    /// # Errors
    /// A port that failed for good (the text names the device and the cause).
    fn poll(
        &mut self,
        min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[RxFrame<'_>], &mut dyn TxQueue),
    ) -> Result<usize, String>;
    /// Send everything queued, in one batch.
    ///
    /// # Errors
    /// As [`Ports::poll`].
    fn flush(&mut self) -> Result<(), String>;
    /// Counts per port, by port index.
    fn counts(&self) -> Vec<PortCounts>;
}

/// A port group's send side.
pub trait TxQueue {
    /// Queue `frame` for sending on `port` (one copy into a send buffer); `false` when it
    /// cannot be (no buffer free, unknown port), counted as a tx drop by the port.
    fn queue(&mut self, port: usize, frame: &[u8]) -> bool;

    /// Queue a frame of `len` bytes on `port`, written in place by `fill`, which gets exactly
    /// `len` bytes of the send buffer (their prior contents unspecified) and must write them
    /// all: the way to send a received frame with a few bytes rewritten (a gateway's MACs and
    /// TTL) in one copy. `false` as [`TxQueue::queue`] (then `fill` is not called).
    ///
    /// The default writes into a temporary buffer and queues that (a second copy); send sides
    /// that can lend their buffer override it.
    fn queue_with(&mut self, port: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        let mut buf = vec![0u8; len];
        fill(&mut buf);
        self.queue(port, &buf)
    }
}
