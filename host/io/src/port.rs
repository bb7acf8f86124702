//! The port interface every group implements, and the configuration of the io_uring groups.

use std::time::Duration;

use crate::IoError;

/// One device of a group, as the kernel reports it when the group opens it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// Device name (`ip link` name, or the capture's port name for [`crate::PcapGroup`]).
    pub name: String,
    /// Interface index (`if_nametoindex`); 0 for capture ports.
    pub ifindex: u32,
    /// Hardware address (`SIOCGIFHWADDR`); all zero for capture ports.
    pub mac: [u8; 6],
    /// MTU in bytes (`SIOCGIFMTU`), without the 14-byte Ethernet header.
    pub mtu: u32,
}

/// A received frame: the index of its port in [`PortGroup::ports`] and its bytes, from the
/// destination MAC on (no FCS). Borrowed from the group's receive buffers.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// Index into [`PortGroup::ports`].
    pub port: usize,
    /// The frame, Ethernet header first.
    pub data: &'a [u8],
}

/// Counters of one port since its group opened it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PortStats {
    /// Frames handed to `on_rx`.
    pub rx_packets: u64,
    /// Bytes of those frames.
    pub rx_bytes: u64,
    /// Frames the kernel dropped before we read them (`PACKET_STATISTICS` `tp_drops`: socket
    /// queue or mmap ring full). Re-arms after `ENOBUFS` are counted in `rearms`, not here.
    pub rx_dropped: u64,
    /// Frames whose send completed.
    pub tx_packets: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// Frames refused by [`PortGroup::queue`] or a [`TxSide`]: no free send buffer (TX ring
    /// frame), or longer than one.
    pub tx_dropped: u64,
    /// Sends that completed with an error (e.g. `ENETDOWN`, `ENOBUFS`, `EMSGSIZE`).
    pub tx_errors: u64,
    /// Times the multishot receive of this port ended and was submitted again (`ENOBUFS` when
    /// the provided-buffer ring ran dry is the normal cause under load).
    pub rearms: u64,
    /// Receive completions with an error other than `ENOBUFS`.
    pub rx_errors: u64,
    /// Frames the kernel handed over with a partial TCP/UDP checksum
    /// (`TP_STATUS_CSUMNOTREADY`: sent by a local stack through a device with checksum
    /// offload, e.g. veth) whose checksum this port completed before handing them over.
    pub csum_completed: u64,
    /// Frames flagged partial whose checksum could not be completed (not TCP/UDP over IPv4 or
    /// IPv6 as far as the outermost headers tell, or cut short by the buffer): handed over as
    /// they came; a receiver of a copy would see a bad checksum.
    pub csum_partial_left: u64,
    /// How full the receive ring was at the last poll, in percent (0..=100), measured after
    /// the wait and before frames were handed over:
    /// - `TPACKET_V3`: the port's ring blocks the kernel had handed to user space and not got
    ///   back (ready or being read), over its blocks;
    /// - multishot `recvmsg` (AF_PACKET) and `READ` (TAP): the group's provided buffers holding
    ///   this port's received frames not yet handed over, over the group's buffers (the
    ///   buffers are shared: the ports' values add up to the group's occupancy; 100 means
    ///   the ring ran dry and the receive ends with `ENOBUFS`);
    /// - capture ports: 0 (not applicable).
    pub ring_occupancy_pct: u32,
}

impl PortStats {
    /// Adds `other`'s counters to these (per-worker statistics are summed when read).
    pub fn add(&mut self, other: &PortStats) {
        self.rx_packets += other.rx_packets;
        self.rx_bytes += other.rx_bytes;
        self.rx_dropped += other.rx_dropped;
        self.tx_packets += other.tx_packets;
        self.tx_bytes += other.tx_bytes;
        self.tx_dropped += other.tx_dropped;
        self.tx_errors += other.tx_errors;
        self.rearms += other.rearms;
        self.rx_errors += other.rx_errors;
        self.csum_completed += other.csum_completed;
        self.csum_partial_left += other.csum_partial_left;
        // Rings are not summed: the fullest one tells.
        self.ring_occupancy_pct = self.ring_occupancy_pct.max(other.ring_occupancy_pct);
    }
}

/// The send side of a port group, lent with the received frames to the callback of
/// [`PortGroup::poll_tx`]: a frame queued through it is written straight into the group's send
/// memory (a `PACKET_TX_RING` frame, a recycled send buffer, a pcap output) while the received
/// frames are still borrowed, and leaves with everything else queued at the next
/// [`PortGroup::flush`]. A send side that is full refuses the frame (counted in
/// [`PortStats::tx_dropped`]); it never waits.
pub trait TxSide {
    /// Queue a frame of `len` bytes on `port` (an index into [`PortGroup::ports`]), written in
    /// place by `fill`, which gets exactly `len` bytes of send memory (their prior contents
    /// unspecified) and must write them all: the one copy between receive and send when `fill`
    /// copies a received frame (and rewrites a few bytes of it). Returns false, without
    /// calling `fill`, when no send buffer is free or `len` is longer than one (counted in
    /// `tx_dropped`), or `port` is out of range (nothing counted).
    fn queue_with(&mut self, port: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool;

    /// Queue a copy of `frame` on `port`; as [`TxSide::queue_with`].
    fn queue(&mut self, port: usize, frame: &[u8]) -> bool {
        self.queue_with(port, frame.len(), &mut |b| b.copy_from_slice(frame))
    }

    /// Say what the frames queued from now on (until the next call, or the end of the poll
    /// that lent this side) were made from: the capture time `ts_ns` (ns since the Unix epoch)
    /// of the received frame, and a note about it (`wasp replay`: the packet's verdict line).
    /// A capture port ([`crate::PcapGroup`]) writes them with each frame (its timestamp; the
    /// note as its pcapng comment); live ports ignore them (the default).
    fn describe(&mut self, ts_ns: u64, note: &str) {
        let _ = (ts_ns, note);
    }
}

/// Every device one worker serves. Implemented by [`crate::AfPacketGroup`],
/// [`crate::TapGroup`] and [`crate::PcapGroup`].
///
/// The io_uring groups can be opened on any thread and moved once; from the first
/// `poll`/`flush` on, they must stay on that thread (the ring is `SINGLE_ISSUER`).
pub trait PortGroup: Send {
    /// The group's ports; [`Frame::port`] and the `port` arguments index this slice.
    fn ports(&self) -> &[PortInfo];

    /// Wait up to `timeout` for at least `min` frames (or any, after the timeout), then hand the
    /// received frames (at most `max`, in arrival order, possibly from several ports) to `on_rx`
    /// as one slice. The frames' buffers go back to the ring when `on_rx` returns. Returns the
    /// number of frames handed over; `on_rx` is not called when there are none.
    fn poll(
        &mut self,
        min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[Frame<'_>]),
    ) -> Result<usize, IoError>;

    /// As [`PortGroup::poll`], with the group's own send side lent to `on_rx` next to the
    /// frames, so that a frame is forwarded with one copy (receive memory to send memory, in
    /// [`TxSide::queue_with`]'s `fill`) instead of being copied out first. Frames queued there
    /// leave at the next [`PortGroup::flush`], as those of [`PortGroup::queue`].
    ///
    /// [`crate::AfPacketGroup`], [`crate::TapGroup`] and [`crate::PcapGroup`] lend their send
    /// memory. The default (for other implementations) copies the frames out of the group
    /// first and lends [`PortGroup::queue_with`].
    fn poll_tx(
        &mut self,
        min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[Frame<'_>], &mut dyn TxSide),
    ) -> Result<usize, IoError> {
        let mut bytes = Vec::new();
        let mut at = Vec::new();
        let n = self.poll(min, max, timeout, &mut |fs| {
            for f in fs {
                let start = bytes.len();
                bytes.extend_from_slice(f.data);
                at.push((f.port, start, bytes.len()));
            }
        })?;
        if !at.is_empty() {
            let frames: Vec<Frame<'_>> = at
                .iter()
                .map(|&(port, a, b)| Frame {
                    port,
                    data: &bytes[a..b],
                })
                .collect();
            on_rx(&frames, &mut Lend(self));
        }
        Ok(n)
    }

    /// Queue one frame for sending on `port` (copied into a send buffer: the one copy between
    /// receive and send). Returns false (and counts `tx_dropped`) when no buffer is free, the
    /// frame is longer than a send buffer, or `port` is out of range (nothing counted then).
    fn queue(&mut self, port: usize, frame: &[u8]) -> bool;

    /// Queue a frame of `len` bytes on `port`, written in place by `fill`; as
    /// [`TxSide::queue_with`]. The default fills a temporary buffer and queues it (a second
    /// copy; `fill` runs even when [`PortGroup::queue`] then refuses the frame); the groups of
    /// this crate write into their send memory.
    fn queue_with(&mut self, port: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        if port >= self.ports().len() {
            return false;
        }
        let mut buf = vec![0u8; len];
        fill(&mut buf);
        self.queue(port, &buf)
    }

    /// Submit every queued frame in one batch. Completions are counted by later calls.
    fn flush(&mut self) -> Result<(), IoError>;

    /// Counters per port, in [`PortGroup::ports`] order.
    fn stats(&self) -> Vec<PortStats>;

    /// From now on [`Waker::wake`] of `w` (from any thread) ends a [`PortGroup::poll`] that
    /// waits for frames: it returns with what is ready, possibly nothing. Groups that never
    /// wait (captures) ignore it.
    fn set_waker(&mut self, _w: &Waker) {}

    /// True when no frame will ever arrive again (a capture read to its end). Live groups
    /// return false.
    fn exhausted(&self) -> bool {
        false
    }
}

/// A group lent as its own send side (the default [`PortGroup::poll_tx`]).
struct Lend<'a, G: ?Sized>(&'a mut G);

impl<G: PortGroup + ?Sized> TxSide for Lend<'_, G> {
    fn queue_with(&mut self, port: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        self.0.queue_with(port, len, fill)
    }
    fn queue(&mut self, port: usize, frame: &[u8]) -> bool {
        self.0.queue(port, frame)
    }
}

/// How an [`crate::AfPacketGroup`] receives.
///
/// The default is [`RxMode::TpacketV3`]: on the veth floor benchmark (`perf/RESULTS.md`, "I/O
/// floor") it costs less CPU per packet in total (receiving thread plus the kernel's delivery)
/// and drops nothing where multishot drops under load. Its price is latency at low rates: a
/// block that is not full reaches us after [`TpacketConfig::retire_ms`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RxMode {
    /// Multishot `recvmsg` per socket, buffers from a registered provided-buffer ring (one
    /// completion per frame, one copy by the kernel into our buffer, in our thread). Each
    /// buffer starts with the `recvmsg` header and a `PACKET_AUXDATA` control message
    /// (`recvmsg::HEAD` bytes, added to [`RingConfig::rx_buffer_bytes`]), which tells a
    /// partial checksum and a VLAN tag the kernel took out of the frame: both are handled as
    /// on the `TPACKET_V3` path.
    Multishot,
    /// A `TPACKET_V3` mmap ring per socket (the kernel copies frames into blocks, in its receive
    /// path, and we read them in place), its readiness waited for with io_uring `POLL_ADD`.
    /// Frames of one port keep their order; a poll hands over several ports' frames port by
    /// port (the first port rotating from poll to poll), not interleaved by arrival time.
    /// A VLAN tag the kernel took out of a frame (`TP_STATUS_VLAN_VALID`) is put back after
    /// the MAC addresses, so rules see the frame as it was on the wire (such frames are copied
    /// once). A frame flagged `TP_STATUS_CSUMNOTREADY` gets its TCP/UDP checksum completed in
    /// place (see [`PortStats::csum_completed`]).
    #[default]
    TpacketV3,
}

/// How an [`crate::AfPacketGroup`] sends.
///
/// The default is [`TxMode::Ring`]: on the veth floor benchmark (`perf/RESULTS.md`, "I/O
/// floor") it costs about 65 ns less CPU per frame than one io_uring `SEND` per frame (and
/// about 85 ns more than `sendmmsg`). Call [`PortGroup::flush`] after every poll: frames a
/// flush could not send (`EAGAIN`) go with the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TxMode {
    /// One io_uring `SEND` per frame, from the group's send buffers
    /// ([`RingConfig::tx_buffers`] shared by the ports).
    Send,
    /// A `PACKET_TX_RING` per socket ([`RingConfig::tx_buffers`] frames each): `queue` copies
    /// the frame into the ring, `flush` makes one `sendto` per port that has frames, and the
    /// kernel sends them all (`tpacket_snd`). Send errors of a whole flush (device down) are
    /// counted in `tx_errors`; frames the kernel refuses one by one are counted when their
    /// slot is reused.
    #[default]
    Ring,
}

/// Sizes of a `TPACKET_V3` receive ring (per socket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TpacketConfig {
    /// Bytes per block (a multiple of the page size).
    pub block_bytes: u32,
    /// Blocks in the ring.
    pub blocks: u32,
    /// Frame slot size hint in bytes (`tp_frame_size`; V3 packs frames, this bounds the MTU).
    pub frame_bytes: u32,
    /// Milliseconds after which the kernel hands over a block that is not full
    /// (`tp_retire_blk_tov`): the latency bound at low rates. A [`PortGroup::poll`] timeout
    /// shorter than this wakes the worker for nothing (measured: 130 instead of 40 ns of CPU
    /// per packet with a 200 µs timeout).
    pub retire_ms: u32,
}

impl Default for TpacketConfig {
    fn default() -> Self {
        TpacketConfig {
            block_bytes: 1 << 18,
            blocks: 32,
            frame_bytes: 2048,
            retire_ms: 1,
        }
    }
}

/// Buffer and ring sizes of an io_uring group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingConfig {
    /// Receive path of AF_PACKET ports (TAP ports always use multishot reads).
    pub rx_mode: RxMode,
    /// Send path of AF_PACKET ports (TAP ports always use io_uring writes).
    pub tx_mode: TxMode,
    /// Provided receive buffers shared by the group's ports (a power of two, at most 32768).
    pub rx_buffers: u32,
    /// Bytes of frame per receive buffer (frames longer than this are truncated by the
    /// kernel; AF_PACKET multishot buffers are `recvmsg::HEAD` bytes longer).
    pub rx_buffer_bytes: u32,
    /// Send buffers (at most this many frames queued or in flight at once).
    pub tx_buffers: u32,
    /// Bytes per send buffer (the longest frame [`PortGroup::queue`] accepts).
    pub tx_buffer_bytes: u32,
    /// Submission queue entries (the completion queue gets four times as many).
    pub sq_entries: u32,
    /// `SO_RCVBUFFORCE` for AF_PACKET sockets, bytes (the kernel's queue before our ring);
    /// 0 keeps the system default.
    pub socket_rcvbuf_bytes: u32,
    /// `TPACKET_V3` ring sizes, used with [`RxMode::TpacketV3`].
    pub tpacket: TpacketConfig,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            rx_mode: RxMode::default(),
            tx_mode: TxMode::default(),
            rx_buffers: 4096,
            rx_buffer_bytes: 2048,
            tx_buffers: 1024,
            tx_buffer_bytes: 2048,
            sq_entries: 1024,
            socket_rcvbuf_bytes: 4 << 20,
            tpacket: TpacketConfig::default(),
        }
    }
}

impl RingConfig {
    pub(crate) fn check(&self) -> Result<(), IoError> {
        if !self.rx_buffers.is_power_of_two() || self.rx_buffers > 32768 {
            return Err(IoError::Config(format!(
                "rx_buffers must be a power of two up to 32768, not {}",
                self.rx_buffers
            )));
        }
        if self.rx_buffer_bytes < 64 || self.tx_buffer_bytes < 64 || self.tx_buffers == 0 {
            return Err(IoError::Config(
                "rx/tx buffers must hold at least 64 bytes, and tx_buffers be at least 1".into(),
            ));
        }
        if self.sq_entries == 0 || self.sq_entries > 32768 {
            return Err(IoError::Config(format!(
                "sq_entries must be 1..=32768, not {}",
                self.sq_entries
            )));
        }
        let t = &self.tpacket;
        if self.rx_mode == RxMode::TpacketV3
            && (t.block_bytes == 0
                || !t.block_bytes.is_multiple_of(4096)
                || t.blocks == 0
                || t.frame_bytes < 64
                || t.frame_bytes > t.block_bytes)
        {
            return Err(IoError::Config(format!(
                "tpacket ring: block_bytes a multiple of 4096, blocks >= 1, 64 <= frame_bytes \
                 <= block_bytes; got {t:?}"
            )));
        }
        Ok(())
    }
}

/// How `PACKET_FANOUT` spreads a device's frames over the sockets of one fanout group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FanoutMode {
    /// By the kernel's flow hash (`PACKET_FANOUT_HASH`, `skb_get_hash`: addresses and ports
    /// ordered before hashing, so both directions of a flow hash alike): one flow always lands
    /// on one socket of the group.
    #[default]
    Hash,
    /// Round robin (`PACKET_FANOUT_LB`).
    RoundRobin,
    /// By the CPU that received the frame (`PACKET_FANOUT_CPU`).
    Cpu,
}

/// Which fanout group the group's sockets join (one per device; the id is per network
/// namespace and device protocol). Sockets of several workers with the same id share the
/// device's frames: each frame goes to exactly one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FanoutSpec {
    /// Fanout group id (16 bits).
    pub group_id: u16,
    /// Spreading mode.
    pub mode: FanoutMode,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group that implements only the required methods: frames from a list, sends recorded.
    struct Minimal {
        info: Vec<PortInfo>,
        rx: Vec<(usize, Vec<u8>)>,
        sent: Vec<(usize, Vec<u8>)>,
    }

    impl PortGroup for Minimal {
        fn ports(&self) -> &[PortInfo] {
            &self.info
        }
        fn poll(
            &mut self,
            _min: usize,
            max: usize,
            _timeout: Duration,
            on_rx: &mut dyn FnMut(&[Frame<'_>]),
        ) -> Result<usize, IoError> {
            let n = self.rx.len().min(max);
            let frames: Vec<Frame<'_>> = self.rx[..n]
                .iter()
                .map(|(port, d)| Frame {
                    port: *port,
                    data: d,
                })
                .collect();
            if n > 0 {
                on_rx(&frames);
            }
            self.rx.drain(..n);
            Ok(n)
        }
        fn queue(&mut self, port: usize, frame: &[u8]) -> bool {
            self.sent.push((port, frame.to_vec()));
            true
        }
        fn flush(&mut self) -> Result<(), IoError> {
            Ok(())
        }
        fn stats(&self) -> Vec<PortStats> {
            vec![PortStats::default(); self.info.len()]
        }
    }

    #[test]
    fn the_default_poll_tx_lends_the_group_itself() {
        let info = |n: &str| PortInfo {
            name: n.into(),
            ifindex: 0,
            mac: [0; 6],
            mtu: 1500,
        };
        let mut g = Minimal {
            info: vec![info("a"), info("b")],
            rx: vec![(0, vec![1, 2, 3]), (1, vec![4, 5])],
            sent: Vec::new(),
        };
        let mut seen = Vec::new();
        let n = g
            .poll_tx(1, 64, Duration::ZERO, &mut |fs, tx| {
                for f in fs {
                    seen.push((f.port, f.data.to_vec()));
                    assert!(tx.queue_with(1 - f.port, f.data.len(), &mut |b| {
                        b.copy_from_slice(f.data);
                        b[0] = 9;
                    }));
                }
                assert!(!tx.queue_with(2, 1, &mut |_| panic!("out of range: not filled")));
            })
            .unwrap();
        assert_eq!(n, 2);
        assert_eq!(seen, [(0, vec![1, 2, 3]), (1, vec![4, 5])]);
        assert_eq!(g.sent, [(1, vec![9, 2, 3]), (0, vec![9, 5])]);
        assert_eq!(
            g.poll_tx(1, 64, Duration::ZERO, &mut |_, _| panic!("no frames"))
                .unwrap(),
            0
        );
    }
}

/// Ends a port group's wait for frames from another thread ([`PortGroup::set_waker`]): the
/// control side wakes a worker that has a job for it instead of waiting for its poll timeout.
/// An eventfd; clones share it.
#[derive(Debug, Clone)]
pub struct Waker(pub(crate) std::sync::Arc<crate::sys::EventFd>);

impl Waker {
    /// A new waker.
    ///
    /// # Errors
    /// The eventfd cannot be made (descriptor limit).
    pub fn new() -> std::io::Result<Waker> {
        Ok(Waker(std::sync::Arc::new(crate::sys::EventFd::new()?)))
    }

    /// End the wait of the group it is set on (now, or its next wait if it is not waiting).
    pub fn wake(&self) {
        self.0.signal();
    }
}
