//! The ring and buffer logic shared by the io_uring groups, generic over the seam's [`Ring`]:
//! which receive buffers are held and when they go back, re-arming multishot receives that
//! ended (`ENOBUFS`), walking `TPACKET_V3` blocks, completing partial checksums, measuring
//! ring occupancy, send-buffer recycling and batching.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::port::{Frame, PortInfo, PortStats, TxSide};
use crate::sys::{Cqe, Op, Ring, RxMem, Sqe, TxMem, TxrState};
use crate::{IoError, csum, recvmsg, tpacket};

/// How a port receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RxPath {
    /// Multishot `recvmsg` into the buffer ring (AF_PACKET, `PACKET_AUXDATA`).
    Recv,
    /// Multishot `read` into the buffer ring (TAP).
    Read,
    /// `TPACKET_V3` blocks, readiness through `POLL_ADD`.
    Tpacket,
}

/// Where a TPACKET_V3 port is in its current block.
#[derive(Debug, Clone, Copy)]
struct TpPos {
    blk: u32,
    /// Packets of the block not yet handed over.
    left: u32,
    /// Offset of the next packet's header.
    off: u32,
}

#[derive(Debug)]
struct PortState {
    rx: RxPath,
    /// Sends are `WRITE`s (TAP).
    write: bool,
    stats: PortStats,
    /// The multishot receive (or the poll, for TPACKET_V3) is in flight.
    armed: bool,
    /// The receive ended with an error during this poll: re-armed only when the poll ends,
    /// so a persistent error costs one failed request per poll, not a busy loop.
    failed: bool,
    /// Receive buffers holding this port's frames not yet handed over.
    held_bufs: u32,
    /// TPACKET_V3: the block expected next, and the position in the held one.
    tp_next: u32,
    tp_pos: Option<TpPos>,
    /// PACKET_TX_RING: the next frame to fill, and the frames (bytes) filled since the last
    /// kick.
    txr_head: u32,
    txr_pending: u32,
    txr_pending_bytes: u64,
}

/// A received frame waiting to be handed over: its buffer, where the frame is in it, and the
/// VLAN tag the kernel took out of it.
#[derive(Debug, Clone, Copy)]
struct Rx {
    port: u32,
    bid: u16,
    off: u32,
    len: u32,
    vlan: Option<tpacket::VlanTag>,
}

/// Where a frame handed to `on_rx` lives.
#[derive(Debug, Clone, Copy)]
enum Src {
    Buf { bid: u16, off: u32 },
    Block { blk: u32, off: u32 },
}

#[derive(Debug, Clone, Copy)]
struct Span {
    port: u32,
    src: Src,
    len: u32,
    /// A VLAN tag to put back after the MAC addresses (the kernel reports it apart).
    vlan: Option<tpacket::VlanTag>,
}

/// The ports of one io_uring group and their buffers.
pub(crate) struct UringPorts<R: Ring> {
    pub(crate) ring: R,
    info: Vec<PortInfo>,
    ports: Vec<PortState>,
    /// Completed receives not yet handed over, in completion order (buffers held).
    backlog: VecDeque<Rx>,
    /// Free send buffers.
    tx_free: Vec<u32>,
    tx_bytes: usize,
    /// Send buffers filled (`Op::Tx`), to push once the send side is no longer lent.
    sends: Vec<Sqe>,
    /// Scratch for one poll's frames.
    spans: Vec<Span>,
    /// TPACKET_V3 blocks finished during this poll, released after `on_rx`.
    done_blocks: Vec<(u32, u32)>,
    /// Reused allocation of the frames slice.
    frames: Vec<Frame<'static>>,
    /// Frames whose VLAN tag was put back (copied here), and their (start, end) in it.
    tagged: Vec<u8>,
    tagged_at: Vec<(usize, usize)>,
    /// Rotates the first TPACKET_V3 port read per poll (fairness when `max` cuts).
    tp_start: usize,
    /// A waker is set ([`UringPorts::set_waker`]), its poll is in flight, it fired during
    /// this poll.
    waker: bool,
    waker_armed: bool,
    woke: bool,
}

impl<R: Ring> UringPorts<R> {
    /// Ports `info[i]` receive by `rx[i]`; every receive is armed at the first poll.
    pub(crate) fn new(ring: R, info: Vec<PortInfo>, rx: Vec<RxPath>, tx_bytes: u32) -> Self {
        let ports = rx
            .iter()
            .map(|&rx| PortState {
                rx,
                write: rx == RxPath::Read,
                stats: PortStats::default(),
                armed: false,
                failed: false,
                held_bufs: 0,
                tp_next: 0,
                tp_pos: None,
                txr_head: 0,
                txr_pending: 0,
                txr_pending_bytes: 0,
            })
            .collect();
        let n = ring.tx_count();
        UringPorts {
            ring,
            info,
            ports,
            backlog: VecDeque::new(),
            tx_free: (0..n).rev().collect(),
            tx_bytes: tx_bytes as usize,
            sends: Vec::new(),
            spans: Vec::new(),
            done_blocks: Vec::new(),
            frames: Vec::new(),
            tagged: Vec::new(),
            tagged_at: Vec::new(),
            tp_start: 0,
            waker: false,
            waker_armed: false,
            woke: false,
        }
    }

    /// From now on a signal of `w` ends a wait for frames early (`poll` returns, with the
    /// frames that are ready, possibly none).
    pub(crate) fn set_waker(&mut self, w: std::sync::Arc<crate::sys::EventFd>) {
        self.ring.set_waker(w);
        self.waker = true;
    }

    pub(crate) fn ports(&self) -> &[PortInfo] {
        &self.info
    }

    /// Pushes `sqe`, submitting the queue first when it is full.
    fn push(&mut self, sqe: Sqe) -> Result<(), IoError> {
        if self.ring.push(sqe) {
            return Ok(());
        }
        self.ring.submit().map_err(|e| IoError::ring("submit", e))?;
        if self.ring.push(sqe) {
            Ok(())
        } else {
            Err(IoError::ring(
                "submission queue",
                std::io::Error::other("still full after submitting"),
            ))
        }
    }

    /// Arms every receive that is not in flight: multishot receives while a buffer is free for
    /// them (otherwise they would end with `ENOBUFS` at once), polls for TPACKET_V3 ports
    /// whose next block is not ready yet.
    fn arm(&mut self, retry_failed: bool) -> Result<(), IoError> {
        if self.waker && !self.waker_armed {
            self.push(Sqe {
                port: 0,
                op: Op::Wake,
            })?;
            self.waker_armed = true;
        }
        let any_buf = self.backlog.len() < self.ring.rx_count() as usize;
        for p in 0..self.ports.len() {
            let st = &mut self.ports[p];
            if st.armed || (st.failed && !retry_failed) {
                continue;
            }
            st.failed = false;
            let st = &self.ports[p];
            let op = match st.rx {
                RxPath::Recv | RxPath::Read if !any_buf => continue,
                RxPath::Recv => Op::Recv,
                RxPath::Read => Op::Read,
                RxPath::Tpacket => {
                    if st.tp_pos.is_some() || self.ring.tp_take(p as u32, st.tp_next) {
                        continue;
                    }
                    Op::PollIn
                }
            };
            self.push(Sqe { port: p as u32, op })?;
            self.ports[p].armed = true;
        }
        Ok(())
    }

    /// Drains the completion queue: receives into the backlog, send buffers back to the free
    /// list, ended multishots marked for re-arming.
    fn reap(&mut self) {
        while let Some(c) = self.ring.pop() {
            self.complete(c);
        }
    }

    fn complete(&mut self, c: Cqe) {
        let p = c.sqe.port as usize;
        match c.sqe.op {
            Op::Wake => {
                self.waker_armed = false;
                self.woke = true;
                self.ring.drain_waker();
            }
            Op::Recv | Op::Read => {
                if let Some(bid) = c.buf {
                    if c.res >= 0 {
                        self.received(c.sqe.port, c.sqe.op, bid, c.res as u32);
                    } else {
                        self.ring.rx_provide(bid);
                    }
                }
                let st = &mut self.ports[p];
                if c.res < 0 && c.res != -libc::ENOBUFS && c.res != -libc::ECANCELED {
                    st.stats.rx_errors += 1;
                    st.failed = true;
                }
                if !c.more {
                    st.armed = false;
                    st.stats.rearms += 1;
                }
            }
            Op::Tx { slot, len, .. } => {
                self.tx_free.push(slot);
                let st = &mut self.ports[p].stats;
                if c.res >= 0 {
                    st.tx_packets += 1;
                    st.tx_bytes += u64::from(len);
                } else {
                    st.tx_errors += 1;
                }
            }
            Op::PollIn => {
                self.ports[p].armed = false;
                // A socket error (device down) makes the socket readable until it is read:
                // nothing else reads it on this path, so read it here, or every poll would
                // complete at once from then on.
                if (c.res < 0 || c.res & i32::from(libc::POLLERR) != 0)
                    && self.ring.take_error(c.sqe.port) != 0
                {
                    self.ports[p].stats.rx_errors += 1;
                }
            }
            Op::CancelAll => {}
        }
    }

    /// A receive filled buffer `bid` (`res` bytes): the frame joins the backlog, its checksum
    /// completed if the kernel left it partial.
    fn received(&mut self, port: u32, op: Op, bid: u16, res: u32) {
        let p = port as usize;
        let (off, len, vlan) = if op == Op::Recv {
            match recvmsg::parse(self.ring.rx_buf(bid), res) {
                Some(m) => {
                    if m.csum_partial {
                        let f = &mut self.ring.rx_buf_mut(bid)
                            [m.start as usize..(m.start + m.len) as usize];
                        count_csum(&mut self.ports[p].stats, csum::complete(f));
                    }
                    (m.start, m.len, m.vlan)
                }
                None => {
                    self.ports[p].stats.rx_errors += 1;
                    self.ring.rx_provide(bid);
                    return;
                }
            }
        } else {
            (0, res, None)
        };
        self.ports[p].held_bufs += 1;
        self.backlog.push_back(Rx {
            port,
            bid,
            off,
            len,
            vlan,
        });
    }

    /// Records each port's ring occupancy ([`PortStats::ring_occupancy_pct`]).
    fn measure(&mut self) {
        let bufs = self.ring.rx_count().max(1);
        for p in 0..self.ports.len() {
            let st = &self.ports[p];
            let pct = match st.rx {
                RxPath::Recv | RxPath::Read => st.held_bufs * 100 / bufs,
                RxPath::Tpacket => {
                    let n = self.ring.tp_blocks(p as u32);
                    let first = st.tp_pos.map_or(st.tp_next, |pos| pos.blk);
                    // The kernel fills blocks in ring order: those handed over follow the one
                    // we expect next.
                    let k = (0..n)
                        .take_while(|i| self.ring.tp_user(p as u32, (first + i) % n))
                        .count() as u32;
                    k * 100 / n.max(1)
                }
            };
            self.ports[p].stats.ring_occupancy_pct = pct.min(100);
        }
    }

    /// Frames ready to hand over without waiting: the backlog, and the packets left in the
    /// current (or next, if the kernel handed it over) block of each TPACKET_V3 port.
    fn ready(&mut self) -> usize {
        let mut n = self.backlog.len();
        for p in 0..self.ports.len() {
            let st = &self.ports[p];
            if st.rx != RxPath::Tpacket {
                continue;
            }
            if let Some(pos) = st.tp_pos {
                n += pos.left as usize;
            } else if self.ring.tp_take(p as u32, st.tp_next) {
                let blk = st.tp_next;
                n += tpacket::block(self.ring.tp_block(p as u32, blk)).map_or(0, |b| b.0 as usize);
            }
        }
        n
    }

    /// Waits and hands frames over as [`crate::PortGroup::poll_tx`] says, lending the send side.
    pub(crate) fn poll(
        &mut self,
        min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[Frame<'_>], &mut dyn TxSide),
    ) -> Result<usize, IoError> {
        self.woke = false;
        self.reap();
        self.arm(true)?;
        let mut ready = self.ready();
        if ready < min && !self.woke {
            let deadline = Instant::now() + timeout;
            let only_blocks = self.ports.iter().all(|p| p.rx == RxPath::Tpacket);
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                // A completion is a frame for multishot receives, a ready block for polls.
                let want = if only_blocks { 1 } else { (min - ready) as u32 };
                self.ring
                    .enter(if left.is_zero() { 0 } else { want }, left)
                    .map_err(|e| IoError::ring("enter", e))?;
                self.reap();
                self.arm(false)?;
                ready = self.ready();
                if ready >= min || self.woke || Instant::now() >= deadline {
                    break;
                }
            }
        } else if ready == 0 {
            // min 0: submit what is queued and pick up what completed, without waiting.
            self.ring
                .enter(0, Duration::ZERO)
                .map_err(|e| IoError::ring("enter", e))?;
            self.reap();
            self.arm(false)?;
        }
        self.measure();
        self.collect(max);
        let n = self.spans.len();
        if n > 0 {
            self.hand_over(on_rx);
        }
        // Buffers and blocks go back now that `on_rx` returned.
        for i in 0..self.spans.len() {
            if let Src::Buf { bid, .. } = self.spans[i].src {
                self.ring.rx_provide(bid);
            }
        }
        for (p, blk) in self.done_blocks.drain(..) {
            self.ring.tp_release(p, blk);
        }
        self.spans.clear();
        self.arm(true)?;
        Ok(n)
    }

    /// Picks up to `max` frames: the backlog first (completion order), then TPACKET_V3 blocks.
    fn collect(&mut self, max: usize) {
        while self.spans.len() < max {
            let Some(rx) = self.backlog.pop_front() else {
                break;
            };
            let st = &mut self.ports[rx.port as usize];
            st.held_bufs -= 1;
            st.stats.rx_packets += 1;
            st.stats.rx_bytes += u64::from(rx.len);
            self.spans.push(Span {
                port: rx.port,
                src: Src::Buf {
                    bid: rx.bid,
                    off: rx.off,
                },
                len: rx.len,
                vlan: rx.vlan,
            });
        }
        let np = self.ports.len();
        for i in 0..np {
            let p = (self.tp_start + i) % np;
            if self.ports[p].rx == RxPath::Tpacket {
                self.collect_blocks(p as u32, max);
            }
        }
        self.tp_start = (self.tp_start + 1) % np.max(1);
    }

    fn collect_blocks(&mut self, port: u32, max: usize) {
        let nblocks = self.ring.tp_blocks(port);
        while self.spans.len() < max {
            let st = &self.ports[port as usize];
            let mut pos = match st.tp_pos {
                Some(pos) => pos,
                None => {
                    let blk = st.tp_next;
                    // A block finished in this poll is still ours until `on_rx` returns: when
                    // the walk comes round to it again, the ring has been read to its end.
                    if self.done_blocks.contains(&(port, blk)) || !self.ring.tp_take(port, blk) {
                        return;
                    }
                    let (num, first) =
                        tpacket::block(self.ring.tp_block(port, blk)).unwrap_or((0, 0));
                    TpPos {
                        blk,
                        left: num,
                        off: first,
                    }
                }
            };
            let mut finished = pos.left == 0;
            if !finished {
                match tpacket::packet(self.ring.tp_block(port, pos.blk), pos.off) {
                    Some(pk) => {
                        if pk.csum_partial {
                            let f = &mut self.ring.tp_block_mut(port, pos.blk)
                                [pk.start as usize..(pk.start + pk.len) as usize];
                            let r = csum::complete(f);
                            count_csum(&mut self.ports[port as usize].stats, r);
                        }
                        let st = &mut self.ports[port as usize].stats;
                        st.rx_packets += 1;
                        st.rx_bytes += u64::from(pk.len);
                        self.spans.push(Span {
                            port,
                            src: Src::Block {
                                blk: pos.blk,
                                off: pk.start,
                            },
                            len: pk.len,
                            vlan: pk.vlan,
                        });
                        pos.left -= 1;
                        pos.off = pk.next;
                        finished = pos.left == 0;
                    }
                    None => {
                        // A packet header out of the block: give the block back.
                        self.ports[port as usize].stats.rx_errors += 1;
                        finished = true;
                    }
                }
            }
            let st = &mut self.ports[port as usize];
            if finished {
                self.done_blocks.push((port, pos.blk));
                st.tp_pos = None;
                st.tp_next = (pos.blk + 1) % nblocks.max(1);
            } else {
                st.tp_pos = Some(pos);
            }
        }
    }

    /// Hands the collected frames to `on_rx` with the send side lent next to them (the
    /// receive memory and the send memory are borrowed apart: [`Ring::split`]); sends filled
    /// meanwhile are pushed when it returns.
    fn hand_over(&mut self, on_rx: &mut dyn FnMut(&[Frame<'_>], &mut dyn TxSide)) {
        let (rx, tx) = self.ring.split();
        // Frames that lost their VLAN tag to the kernel get it back, in a copy.
        self.tagged.clear();
        self.tagged_at.clear();
        for s in &self.spans {
            let Some(tag) = s.vlan else {
                continue;
            };
            let data = span_data(&rx, s);
            let start = self.tagged.len();
            let cut = data.len().min(12);
            self.tagged.extend_from_slice(&data[..cut]);
            self.tagged.extend_from_slice(&tag);
            self.tagged.extend_from_slice(&data[cut..]);
            self.tagged_at.push((start, self.tagged.len()));
        }
        let mut tagged = self.tagged_at.iter();
        // Reuse the allocation: an empty Vec<Frame<'static>> becomes one of shorter lifetime.
        let mut frames: Vec<Frame<'_>> = std::mem::take(&mut self.frames);
        for s in &self.spans {
            let data = if s.vlan.is_some() {
                match tagged.next() {
                    Some(&(a, b)) => &self.tagged[a..b],
                    None => &[][..],
                }
            } else {
                span_data(&rx, s)
            };
            frames.push(Frame {
                port: s.port as usize,
                data,
            });
        }
        let mut sender = Sender {
            mem: tx,
            ports: &mut self.ports,
            tx_free: &mut self.tx_free,
            sends: &mut self.sends,
            tx_bytes: self.tx_bytes,
        };
        on_rx(&frames, &mut sender);
        frames.clear();
        self.frames = frames.into_iter().map(|_| unreachable!()).collect();
        // The views may have drop glue (generic): end their borrows of the ring here.
        drop(sender);
        drop(rx);
        self.push_sends();
    }

    /// Pushes the sends filled through a [`Sender`]; one that does not fit (the submission
    /// queue full even after submitting) gives its buffer back and counts as a tx drop.
    fn push_sends(&mut self) {
        let mut sends = std::mem::take(&mut self.sends);
        for sqe in sends.drain(..) {
            if self.push(sqe).is_err() {
                if let Op::Tx { slot, .. } = sqe.op {
                    self.tx_free.push(slot);
                }
                self.ports[sqe.port as usize].stats.tx_dropped += 1;
            }
        }
        self.sends = sends;
    }

    pub(crate) fn queue(&mut self, port: usize, frame: &[u8]) -> bool {
        self.queue_with(port, frame.len(), &mut |b| b.copy_from_slice(frame))
    }

    /// Queues a frame written by `fill` into the send memory of `port` (outside `poll`).
    pub(crate) fn queue_with(
        &mut self,
        port: usize,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> bool {
        if port >= self.ports.len() {
            return false;
        }
        if self.tx_free.is_empty() {
            // Completions may be waiting in the queue: free their buffers.
            self.reap();
        }
        let (_, tx) = self.ring.split();
        let ok = Sender {
            mem: tx,
            ports: &mut self.ports,
            tx_free: &mut self.tx_free,
            sends: &mut self.sends,
            tx_bytes: self.tx_bytes,
        }
        .queue_with(port, len, fill);
        self.push_sends();
        ok
    }

    pub(crate) fn flush(&mut self) -> Result<(), IoError> {
        for p in 0..self.ports.len() {
            if self.ports[p].txr_pending > 0 {
                self.kick(p);
            }
        }
        self.ring.submit().map_err(|e| IoError::ring("submit", e))
    }

    /// Sends the frames filled in `port`'s TX ring. A transient failure (`EAGAIN`, `ENOBUFS`,
    /// `EINTR`) leaves them for the next flush; any other that a second try confirms (device
    /// down) takes them back and counts them in `tx_errors`.
    fn kick(&mut self, port: usize) {
        let p = port as u32;
        let mut r = self.ring.txr_kick(p);
        if r.is_err() {
            // A socket error reported earlier (e.g. ENETDOWN from a device that has come back
            // up) fails the first allocation once and is cleared by it: try once more.
            r = self.ring.txr_kick(p);
        }
        match r {
            Ok(_) => {
                let st = &mut self.ports[port];
                st.stats.tx_packets += u64::from(st.txr_pending);
                st.stats.tx_bytes += st.txr_pending_bytes;
                st.txr_pending = 0;
                st.txr_pending_bytes = 0;
            }
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EAGAIN | libc::ENOBUFS | libc::EINTR)
                ) => {}
            Err(_) => {
                let frames = self.ring.split().1.txr_frames(p);
                let st = &mut self.ports[port];
                let n = st.txr_pending;
                let head = st.txr_head;
                st.stats.tx_errors += u64::from(n);
                st.txr_pending = 0;
                st.txr_pending_bytes = 0;
                // Rewind: the kernel's head is still at the first of these frames.
                st.txr_head = (head + frames - n % frames) % frames;
                for k in 0..n {
                    self.ring.txr_cancel(p, (head + frames - 1 - k) % frames);
                }
            }
        }
    }

    pub(crate) fn stats(&self) -> Vec<PortStats> {
        self.ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut s = p.stats;
                s.rx_dropped = self.ring.kernel_drops(i as u32);
                s
            })
            .collect()
    }
}

/// The send side of a [`UringPorts`], borrowed apart from its receive memory: lent to the
/// receive callback, and used by `queue`. Send buffers it fills wait in `sends` until the
/// group pushes them; TX ring frames are handed to the kernel at once (sent at the flush).
struct Sender<'a, T: TxMem> {
    mem: T,
    ports: &'a mut [PortState],
    tx_free: &'a mut Vec<u32>,
    sends: &'a mut Vec<Sqe>,
    tx_bytes: usize,
}

impl<T: TxMem> Sender<'_, T> {
    /// Fills the next frame of `port`'s TX ring and hands it to the kernel (sent at the next
    /// flush).
    fn queue_txr(
        &mut self,
        port: usize,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
        frames: u32,
    ) -> bool {
        let p = port as u32;
        let idx = self.ports[port].txr_head;
        match self.mem.txr_state(p, idx) {
            TxrState::Busy => {
                self.ports[port].stats.tx_dropped += 1;
                return false;
            }
            TxrState::Failed => {
                // The kernel refused the frame that was here; it was counted as sent.
                let st = &mut self.ports[port].stats;
                st.tx_errors += 1;
                st.tx_packets = st.tx_packets.saturating_sub(1);
            }
            TxrState::Free => {}
        }
        let buf = self.mem.txr_buf(p, idx);
        if len > buf.len() {
            self.ports[port].stats.tx_dropped += 1;
            return false;
        }
        fill(&mut buf[..len]);
        self.mem.txr_commit(p, idx, len as u32);
        let st = &mut self.ports[port];
        st.txr_head = (idx + 1) % frames;
        st.txr_pending += 1;
        st.txr_pending_bytes += len as u64;
        true
    }
}

impl<T: TxMem> TxSide for Sender<'_, T> {
    fn queue_with(&mut self, port: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        if port >= self.ports.len() {
            return false;
        }
        let frames = self.mem.txr_frames(port as u32);
        if frames > 0 {
            return self.queue_txr(port, len, fill, frames);
        }
        let st = &mut self.ports[port];
        if len > self.tx_bytes {
            st.stats.tx_dropped += 1;
            return false;
        }
        let Some(slot) = self.tx_free.pop() else {
            st.stats.tx_dropped += 1;
            return false;
        };
        fill(&mut self.mem.tx_slot(slot)[..len]);
        self.sends.push(Sqe {
            port: port as u32,
            op: Op::Tx {
                slot,
                len: len as u32,
                write: st.write,
            },
        });
        true
    }
}

/// The bytes of a frame handed over, where they are in the ring.
fn span_data<'a, R: RxMem>(ring: &'a R, s: &Span) -> &'a [u8] {
    let (buf, off) = match s.src {
        Src::Buf { bid, off } => (ring.rx_buf(bid), off),
        Src::Block { blk, off } => (ring.tp_block(s.port, blk), off),
    };
    &buf[off as usize..(off + s.len) as usize]
}

/// Counts the outcome of completing a partial checksum.
fn count_csum(st: &mut PortStats, r: Result<(), csum::Unresolved>) {
    match r {
        Ok(()) => st.csum_completed += 1,
        Err(_) => st.csum_partial_left += 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::RingSpec;
    use crate::sys::fake::FakeRing;

    fn spec(rx: u32, tx: u32) -> RingSpec {
        RingSpec {
            sq_entries: 64,
            rx_buffers: rx,
            rx_buffer_bytes: 128,
            tx_buffers: tx,
            tx_buffer_bytes: 128,
        }
    }

    fn group(nports: usize, rx: u32, tx: u32) -> UringPorts<FakeRing> {
        let info = (0..nports)
            .map(|i| PortInfo {
                name: format!("p{i}"),
                ifindex: i as u32 + 1,
                mac: [0; 6],
                mtu: 1500,
            })
            .collect();
        UringPorts::new(
            FakeRing::new(&spec(rx, tx), nports),
            info,
            vec![RxPath::Recv; nports],
            128,
        )
    }

    fn frame(port: u8, seq: u32) -> Vec<u8> {
        let mut f = vec![port; 60];
        f[..4].copy_from_slice(&seq.to_be_bytes());
        f
    }

    /// Polls once; returns (port, bytes) of the frames handed over.
    fn poll(g: &mut UringPorts<FakeRing>, max: usize) -> Vec<(usize, Vec<u8>)> {
        let mut got = Vec::new();
        let mut calls = 0;
        let n = g
            .poll(1, max, Duration::ZERO, &mut |fs, _| {
                calls += 1;
                got.extend(fs.iter().map(|f| (f.port, f.data.to_vec())));
            })
            .unwrap();
        assert_eq!(n, got.len());
        assert!(calls <= 1, "one slice per poll");
        got
    }

    /// A signalled waker ends a long wait with no frame, is drained once and armed again;
    /// frames that are ready come with it.
    #[test]
    fn a_waker_ends_the_wait_for_frames() {
        let mut g = group(1, 8, 4);
        g.set_waker(std::sync::Arc::new(crate::sys::EventFd::new().unwrap()));
        g.ring.wake_signalled = true;
        let t0 = Instant::now();
        let n = g
            .poll(1, 64, Duration::from_secs(30), &mut |_, _| {
                panic!("no frame")
            })
            .unwrap();
        assert_eq!(n, 0);
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the wait ended early"
        );
        assert_eq!(g.ring.wake_drains, 1);
        assert!(g.waker_armed, "armed again for the next wait");
        g.ring.incoming[0].push_back(frame(0, 7));
        g.ring.wake_signalled = true;
        assert_eq!(poll(&mut g, 64).len(), 1);
        assert_eq!(g.ring.wake_drains, 2);
    }

    #[test]
    fn buffers_return_to_the_ring_after_on_rx() {
        let mut g = group(1, 8, 4);
        for s in 0..100 {
            g.ring.incoming[0].push_back(frame(0, s));
        }
        let mut seqs = Vec::new();
        for _ in 0..200 {
            for (p, f) in poll(&mut g, 64) {
                assert_eq!(p, 0);
                assert_eq!(f.len(), 60);
                seqs.push(u32::from_be_bytes([f[0], f[1], f[2], f[3]]));
            }
            // After each poll every buffer is back with the kernel.
            assert_eq!(g.ring.provided(), 8);
            if seqs.len() == 100 {
                break;
            }
        }
        assert_eq!(
            seqs,
            (0..100).collect::<Vec<_>>(),
            "every frame once, in order"
        );
        let st = g.stats()[0];
        assert_eq!(st.rx_packets, 100);
        assert_eq!(st.rx_bytes, 6000);
    }

    #[test]
    fn enobufs_ends_the_multishot_and_it_is_rearmed() {
        let mut g = group(1, 4, 4);
        for s in 0..10 {
            g.ring.incoming[0].push_back(frame(0, s));
        }
        // 4 buffers: the receive fills them and ends with ENOBUFS.
        let got = poll(&mut g, 64);
        assert_eq!(got.len(), 4);
        assert_eq!(g.stats()[0].rearms, 1);
        // Buffers are back, so the receive was re-armed (submitted with the next enter).
        assert_eq!(g.ring.provided(), 4);
        let got2 = poll(&mut g, 64);
        assert_eq!(got2.len(), 4);
        let got3 = poll(&mut g, 64);
        assert_eq!(got3.len(), 2);
        assert!(g.ring.armed(0), "re-armed after the ring ran dry");
        assert_eq!(g.stats()[0].rearms, 2, "dry twice (after frames 4 and 8)");
        assert_eq!(g.stats()[0].rx_packets, 10);
        assert_eq!(g.stats()[0].rx_errors, 0);
    }

    #[test]
    fn no_rearm_while_every_buffer_is_held() {
        let mut g = group(1, 4, 4);
        for s in 0..12 {
            g.ring.incoming[0].push_back(frame(0, s));
        }
        // max 1: the other 3 frames stay in the backlog holding their buffers.
        assert_eq!(poll(&mut g, 1).len(), 1);
        assert_eq!(g.ring.provided(), 1);
        let mut total = 1;
        for _ in 0..20 {
            total += poll(&mut g, 1).len();
        }
        assert_eq!(total, 12);
        // Re-armed only when a buffer was free: no storm of immediate ENOBUFS.
        let st = g.stats()[0];
        assert!(st.rearms <= 4, "rearms {}", st.rearms);
    }

    #[test]
    fn max_caps_a_poll_and_order_is_kept_across_ports() {
        let mut g = group(2, 16, 4);
        for s in 0..5 {
            g.ring.incoming[0].push_back(frame(0, s));
            g.ring.incoming[1].push_back(frame(1, 100 + s));
        }
        let a = poll(&mut g, 3);
        let b = poll(&mut g, 100);
        assert_eq!(a.len(), 3);
        assert_eq!(b.len(), 7);
        let all: Vec<(usize, u32)> = a
            .iter()
            .chain(&b)
            .map(|(p, f)| (*p, u32::from_be_bytes([f[0], f[1], f[2], f[3]])))
            .collect();
        // The fake delivers ports in turn: arrival order is kept across polls.
        let want: Vec<(usize, u32)> = (0..5).flat_map(|s| [(0, s), (1, 100 + s)]).collect();
        assert_eq!(all, want);
        assert_eq!(g.stats()[1].rx_packets, 5);
    }

    #[test]
    fn sends_go_out_in_one_batch_and_are_counted_at_completion() {
        let mut g = group(2, 8, 8);
        let before = g.ring.batches.len();
        for s in 0..5 {
            assert!(g.queue(1, &frame(1, s)));
        }
        assert_eq!(
            g.stats()[1].tx_packets,
            0,
            "nothing completed before the flush"
        );
        g.flush().unwrap();
        assert_eq!(&g.ring.batches[before..], &[5], "one submission of 5 sends");
        assert_eq!(g.ring.sent[1].len(), 5);
        assert_eq!(g.ring.sent[1][3], frame(1, 3));
        poll(&mut g, 64);
        let st = g.stats()[1];
        assert_eq!((st.tx_packets, st.tx_bytes, st.tx_dropped), (5, 300, 0));
        assert_eq!(g.stats()[0].tx_packets, 0);
    }

    #[test]
    fn exhausted_send_buffers_count_tx_dropped_and_recycle() {
        let mut g = group(1, 8, 4);
        let ok: Vec<bool> = (0..6).map(|s| g.queue(0, &frame(0, s))).collect();
        assert_eq!(ok, [true, true, true, true, false, false]);
        assert_eq!(g.stats()[0].tx_dropped, 2);
        g.flush().unwrap();
        // The completions are in the queue: queue() reaps them and reuses the buffers.
        for s in 0..4 {
            assert!(g.queue(0, &frame(0, 10 + s)));
        }
        g.flush().unwrap();
        poll(&mut g, 64);
        let st = g.stats()[0];
        assert_eq!((st.tx_packets, st.tx_dropped), (8, 2));
        assert_eq!(g.ring.sent[0].len(), 8);
        assert_eq!(g.ring.sent[0][4], frame(0, 10));
    }

    #[test]
    fn oversized_frames_and_bad_ports_are_refused() {
        let mut g = group(1, 8, 4);
        assert!(!g.queue(0, &[0u8; 129]));
        assert_eq!(g.stats()[0].tx_dropped, 1);
        assert!(!g.queue(5, &[0u8; 60]));
        assert!(g.queue(0, &[0u8; 128]));
    }

    #[test]
    fn send_errors_are_counted_and_free_the_buffer() {
        let mut g = group(1, 8, 1);
        g.ring.tx_res = Some(-libc::ENETDOWN);
        assert!(g.queue(0, &frame(0, 1)));
        g.flush().unwrap();
        assert!(
            g.queue(0, &frame(0, 2)),
            "the failed send's buffer is free again"
        );
        g.flush().unwrap();
        poll(&mut g, 64);
        let st = g.stats()[0];
        assert_eq!((st.tx_packets, st.tx_errors, st.tx_dropped), (0, 2, 0));
    }

    #[test]
    fn full_submission_queue_is_submitted_and_the_push_retried() {
        let mut g = group(1, 8, 32);
        g.ring.sq_cap = 4;
        for s in 0..10 {
            assert!(g.queue(0, &frame(0, s)));
        }
        g.flush().unwrap();
        assert_eq!(g.ring.sent[0].len(), 10);
        assert!(g.ring.batches.iter().all(|&b| b <= 4));
    }

    fn tp_group(blocks: usize) -> UringPorts<FakeRing> {
        let mut ring = FakeRing::new(&spec(8, 4), 1);
        // 512-byte blocks: 48 header bytes, then 4 frames of 60 bytes (112 bytes each).
        ring.add_tpacket(0, 512, blocks);
        let info = vec![PortInfo {
            name: "p0".into(),
            ifindex: 1,
            mac: [0; 6],
            mtu: 1500,
        }];
        UringPorts::new(ring, info, vec![RxPath::Tpacket], 128)
    }

    fn seqs(v: &[(usize, Vec<u8>)]) -> Vec<u32> {
        v.iter()
            .map(|(_, f)| u32::from_be_bytes([f[0], f[1], f[2], f[3]]))
            .collect()
    }

    #[test]
    fn tpacket_blocks_are_walked_in_order_and_released_after_on_rx() {
        let mut g = tp_group(4);
        for s in 0..10 {
            g.ring.incoming[0].push_back(frame(0, s));
        }
        let got = poll(&mut g, 64);
        assert_eq!(seqs(&got), (0..10).collect::<Vec<_>>());
        assert!(
            got.iter()
                .all(|(_, f)| f == &frame(0, u32::from_be_bytes([f[0], f[1], f[2], f[3]])))
        );
        assert_eq!(
            g.ring.tp_user_blocks(0),
            0,
            "blocks 4 + 4 + 2 all given back"
        );
        let st = g.stats()[0];
        assert_eq!((st.rx_packets, st.rx_bytes, st.rx_dropped), (10, 600, 0));
    }

    #[test]
    fn tpacket_max_cuts_inside_a_block_and_the_rest_follows() {
        let mut g = tp_group(4);
        for s in 0..10 {
            g.ring.incoming[0].push_back(frame(0, s));
        }
        let a = poll(&mut g, 3);
        assert_eq!(seqs(&a), [0, 1, 2]);
        // Block 0 is still ours (one frame left in it); blocks 1 and 2 wait.
        assert_eq!(g.ring.tp_user_blocks(0), 3);
        let b = poll(&mut g, 5);
        assert_eq!(seqs(&b), [3, 4, 5, 6, 7]);
        let c = poll(&mut g, 64);
        assert_eq!(seqs(&c), [8, 9]);
        assert_eq!(g.ring.tp_user_blocks(0), 0);
    }

    #[test]
    fn tpacket_full_ring_drops_are_the_kernels_and_polling_resumes() {
        let mut g = tp_group(2);
        // Two blocks hold 8 frames; the kernel drops the other 4.
        for s in 0..12 {
            g.ring.incoming[0].push_back(frame(0, s));
        }
        let got = poll(&mut g, 64);
        assert_eq!(seqs(&got), (0..8).collect::<Vec<_>>());
        assert_eq!(g.stats()[0].rx_dropped, 4);
        // Nothing ready: the group waits for readiness with a poll, and wakes on new frames.
        assert!(poll(&mut g, 64).is_empty());
        g.ring.incoming[0].push_back(frame(0, 100));
        let got = poll(&mut g, 64);
        assert_eq!(seqs(&got), [100]);
        assert_eq!(g.stats()[0].rx_packets, 9);
    }

    fn txr_group(frames: usize) -> UringPorts<FakeRing> {
        let mut g = group(1, 8, 1);
        g.ring.add_txr(0, frames, 128);
        g
    }

    #[test]
    fn tx_ring_sends_a_batch_with_one_kick() {
        let mut g = txr_group(8);
        for s in 0..5 {
            assert!(g.queue(0, &frame(0, s)));
        }
        assert!(g.ring.sent[0].is_empty(), "nothing leaves before the flush");
        g.flush().unwrap();
        let t = g.ring.txr[0].as_ref().unwrap();
        assert_eq!(t.kicks, 1);
        assert_eq!(
            g.ring.sent[0],
            (0..5).map(|s| frame(0, s)).collect::<Vec<_>>()
        );
        let st = g.stats()[0];
        assert_eq!((st.tx_packets, st.tx_bytes, st.tx_dropped), (5, 300, 0));
        // The ring wraps: 8 more go out in order.
        for s in 5..13 {
            assert!(g.queue(0, &frame(0, s)));
        }
        g.flush().unwrap();
        assert_eq!(g.ring.sent[0].len(), 13);
        assert_eq!(g.ring.sent[0][12], frame(0, 12));
    }

    #[test]
    fn tx_ring_full_counts_tx_dropped_until_the_kernel_is_done() {
        let mut g = txr_group(4);
        g.ring.txr[0].as_mut().unwrap().hold = true;
        let ok: Vec<bool> = (0..5).map(|s| g.queue(0, &frame(0, s))).collect();
        assert_eq!(ok, [true, true, true, true, false]);
        g.flush().unwrap();
        assert!(!g.queue(0, &frame(0, 9)), "still in flight");
        assert_eq!(g.stats()[0].tx_dropped, 2);
        g.ring.complete_txr(0);
        assert!(g.queue(0, &frame(0, 10)));
        assert!(!g.queue(0, &[0; 200]), "longer than a frame");
        assert_eq!(g.stats()[0].tx_dropped, 3);
    }

    #[test]
    fn tx_ring_failed_kick_takes_the_frames_back() {
        let mut g = txr_group(8);
        g.ring.txr[0].as_mut().unwrap().kick_errno = Some(libc::ENETDOWN);
        for s in 0..3 {
            assert!(g.queue(0, &frame(0, s)));
        }
        g.flush().unwrap();
        assert_eq!(g.stats()[0].tx_errors, 3);
        assert_eq!(g.ring.txr[0].as_ref().unwrap().cancelled, 3);
        // The device is back: only new frames go out, from where the kernel's head is.
        g.ring.txr[0].as_mut().unwrap().kick_errno = None;
        for s in 10..12 {
            assert!(g.queue(0, &frame(0, s)));
        }
        g.flush().unwrap();
        assert_eq!(g.ring.sent[0], vec![frame(0, 10), frame(0, 11)]);
        let st = g.stats()[0];
        assert_eq!((st.tx_packets, st.tx_errors), (2, 3));
    }

    #[test]
    fn tx_ring_transient_failure_keeps_the_frames_for_the_next_flush() {
        let mut g = txr_group(8);
        g.ring.txr[0].as_mut().unwrap().kick_errno = Some(libc::EAGAIN);
        assert!(g.queue(0, &frame(0, 1)));
        g.flush().unwrap();
        assert_eq!(g.stats()[0].tx_errors, 0);
        g.ring.txr[0].as_mut().unwrap().kick_errno = None;
        assert!(g.queue(0, &frame(0, 2)));
        g.flush().unwrap();
        assert_eq!(g.ring.sent[0], vec![frame(0, 1), frame(0, 2)]);
        assert_eq!(g.stats()[0].tx_packets, 2);
    }

    /// Polls once, forwarding every frame to `to` through the lent send side with its first
    /// byte rewritten to 0xaa; returns what each `queue_with` returned and where each `fill`
    /// wrote.
    fn forward(g: &mut UringPorts<FakeRing>, to: usize) -> (Vec<bool>, Vec<*const u8>) {
        let mut ok = Vec::new();
        let mut at = Vec::new();
        g.poll(1, 64, Duration::ZERO, &mut |fs, tx| {
            for f in fs {
                ok.push(tx.queue_with(to, f.data.len(), &mut |b| {
                    b.copy_from_slice(f.data);
                    b[0] = 0xaa;
                    at.push(b.as_ptr());
                }));
            }
        })
        .unwrap();
        (ok, at)
    }

    fn rewritten(port: u8, seq: u32) -> Vec<u8> {
        let mut f = frame(port, seq);
        f[0] = 0xaa;
        f
    }

    #[test]
    fn a_forwarded_frame_is_written_once_straight_into_the_tx_ring_frame() {
        // Port 0 receives (multishot), port 1 sends through its TX ring.
        let mut g = group(2, 8, 1);
        g.ring.add_txr(1, 8, 128);
        for s in 0..5 {
            g.ring.incoming[0].push_back(frame(0, s));
        }
        let (ok, at) = forward(&mut g, 1);
        assert_eq!(ok, [true; 5]);
        // One slice of send memory lent per frame, and it is the TX ring frame itself: the
        // received bytes went from the receive buffer into the ring in `fill`, nowhere else.
        assert_eq!(g.ring.tx_lends, 5);
        let t = g.ring.txr[1].as_ref().unwrap();
        let frames: Vec<*const u8> = (0..5).map(|i| t.bufs[i].as_ptr()).collect();
        assert_eq!(at, frames);
        assert_eq!(t.bufs[3][..60], rewritten(0, 3)[..]);
        assert!(g.ring.sent[1].is_empty(), "nothing leaves before the flush");
        g.flush().unwrap();
        assert_eq!(g.ring.txr[1].as_ref().unwrap().kicks, 1, "one batch");
        assert_eq!(
            g.ring.sent[1],
            (0..5).map(|s| rewritten(0, s)).collect::<Vec<_>>()
        );
        let st = g.stats();
        assert_eq!((st[1].tx_packets, st[1].tx_bytes), (5, 300));
        assert_eq!(st[0].rx_packets, 5);
        assert_eq!(
            g.ring.provided(),
            8,
            "receive buffers back after the callback"
        );
    }

    #[test]
    fn a_forwarded_frame_is_written_once_into_a_send_buffer_and_sent_at_the_flush() {
        // IORING_OP_SEND mode: no TX ring, 4 recycled send buffers.
        let mut g = group(2, 8, 4);
        for s in 0..3 {
            g.ring.incoming[0].push_back(frame(0, s));
        }
        let (ok, at) = forward(&mut g, 1);
        assert_eq!(ok, [true; 3]);
        assert_eq!(g.ring.tx_lends, 3);
        // The send buffers (handed out from the top of the free list down).
        let bufs: Vec<*const u8> = [0, 1, 2].iter().map(|&i| g.ring.tx[i].as_ptr()).collect();
        assert_eq!(at, bufs);
        assert!(g.ring.sent[1].is_empty(), "nothing leaves before the flush");
        g.flush().unwrap();
        assert_eq!(
            g.ring.batches.last(),
            Some(&3),
            "three sends in one submission"
        );
        assert_eq!(
            g.ring.sent[1],
            (0..3).map(|s| rewritten(0, s)).collect::<Vec<_>>()
        );
        poll(&mut g, 64);
        let st = g.stats()[1];
        assert_eq!((st.tx_packets, st.tx_bytes, st.tx_dropped), (3, 180, 0));
    }

    #[test]
    fn a_full_send_side_refuses_without_filling_and_the_receive_goes_on() {
        let mut g = group(2, 8, 1);
        g.ring.add_txr(1, 4, 128);
        // The kernel keeps the first frames in flight: 4 fit, then the ring is full.
        g.ring.txr[1].as_mut().unwrap().hold = true;
        for s in 0..6 {
            g.ring.incoming[0].push_back(frame(0, s));
        }
        let (ok, at) = forward(&mut g, 1);
        assert_eq!(ok, [true, true, true, true, false, false]);
        assert_eq!(at.len(), 4, "fill is not called for a refused frame");
        let st = g.stats();
        assert_eq!((st[0].rx_packets, st[1].tx_dropped), (6, 2));
        assert_eq!(g.ring.provided(), 8);
        // Out of range: refused, nothing counted, and the next poll forwards again.
        g.ring.incoming[0].push_back(frame(0, 9));
        let (ok, _) = forward(&mut g, 7);
        assert_eq!(ok, [false]);
        g.flush().unwrap();
        g.ring.complete_txr(1);
        g.ring.incoming[0].push_back(frame(0, 10));
        let (ok, _) = forward(&mut g, 1);
        assert_eq!(ok, [true]);
        g.flush().unwrap();
        assert_eq!(g.ring.sent[1].last(), Some(&rewritten(0, 10)));
        assert_eq!(g.stats()[1].tx_dropped, 2);
    }

    #[test]
    fn a_tpacket_frame_is_forwarded_from_its_block_into_the_tx_ring() {
        // The default paths: TPACKET_V3 receive, PACKET_TX_RING send, on one port.
        let mut g = tp_group(4);
        g.ring.add_txr(0, 8, 128);
        for s in 0..6 {
            g.ring.incoming[0].push_back(frame(0, s));
        }
        let (ok, at) = forward(&mut g, 0);
        assert_eq!(ok, [true; 6]);
        let t = g.ring.txr[0].as_ref().unwrap();
        assert_eq!(at, (0..6).map(|i| t.bufs[i].as_ptr()).collect::<Vec<_>>());
        assert_eq!(g.ring.tx_lends, 6);
        g.flush().unwrap();
        assert_eq!(
            g.ring.sent[0],
            (0..6).map(|s| rewritten(0, s)).collect::<Vec<_>>()
        );
        assert_eq!(
            g.ring.tp_user_blocks(0),
            0,
            "blocks released after the callback"
        );
    }

    #[test]
    fn queue_outside_the_callback_writes_once_too() {
        let mut g = txr_group(4);
        assert!(g.queue_with(0, 60, &mut |b| b.copy_from_slice(&frame(0, 1))));
        assert!(g.queue(0, &frame(0, 2)));
        assert_eq!(g.ring.tx_lends, 2);
        assert!(!g.queue_with(0, 200, &mut |_| panic!("longer than a frame: not filled")));
        g.flush().unwrap();
        assert_eq!(g.ring.sent[0], vec![frame(0, 1), frame(0, 2)]);
        assert_eq!(g.stats()[0].tx_dropped, 1);
    }

    #[test]
    fn tpacket_socket_error_is_read_once_and_polling_goes_on() {
        let mut g = tp_group(2);
        assert!(poll(&mut g, 64).is_empty());
        // The device went down: the socket reports an error until it is read.
        g.ring.sock_err[0] = libc::ENETDOWN;
        for _ in 0..5 {
            assert!(poll(&mut g, 64).is_empty());
        }
        assert_eq!(
            g.stats()[0].rx_errors,
            1,
            "read once, then the poll waits again"
        );
        g.ring.incoming[0].push_back(frame(0, 7));
        assert_eq!(seqs(&poll(&mut g, 64)), [7]);
    }

    #[test]
    fn a_persistent_receive_error_is_retried_once_per_poll() {
        let mut g = group(1, 8, 4);
        g.ring.recv_errno[0] = Some(libc::EBADF);
        for _ in 0..3 {
            let n = g
                .poll(1, 64, Duration::from_millis(5), &mut |_, _| {
                    panic!("no frames")
                })
                .unwrap();
            assert_eq!(n, 0);
        }
        let st = g.stats()[0];
        assert_eq!((st.rx_errors, st.rearms), (3, 3));
        g.ring.recv_errno[0] = None;
        g.ring.incoming[0].push_back(frame(0, 1));
        assert_eq!(poll(&mut g, 64).len(), 1);
    }

    /// TP_STATUS_USER | TP_STATUS_CSUMNOTREADY, as the kernel reports a frame a local stack
    /// sent through veth (captured on Linux 6.18: 0x9).
    const PARTIAL: u32 = 0x9;

    fn big_group(nports: usize, rx: u32) -> UringPorts<FakeRing> {
        let mut s = spec(rx, 4);
        s.rx_buffer_bytes = 512;
        let info = (0..nports)
            .map(|i| PortInfo {
                name: format!("p{i}"),
                ifindex: i as u32 + 1,
                mac: [0; 6],
                mtu: 1500,
            })
            .collect();
        UringPorts::new(
            FakeRing::new(&s, nports),
            info,
            vec![RxPath::Recv; nports],
            512,
        )
    }

    #[test]
    fn multishot_partial_checksums_are_completed_before_on_rx() {
        let mut g = big_group(1, 8);
        let partial = crate::csum::tests::partial_udp4(b"from a local stack");
        let full = {
            let mut f = partial.clone();
            crate::csum::complete(&mut f).unwrap();
            f
        };
        // A partial frame, a complete one (status USER only), a partial ARP-like frame that
        // has no TCP/UDP to complete.
        g.ring.incoming[0].push_back(partial.clone());
        g.ring.status[0].push_back(PARTIAL);
        g.ring.incoming[0].push_back(full.clone());
        g.ring.status[0].push_back(1);
        g.ring.incoming[0].push_back(vec![0xff; 60]);
        g.ring.status[0].push_back(PARTIAL);
        let got = poll(&mut g, 64);
        assert_eq!(got.len(), 3);
        assert!(crate::csum::tests::verify(&got[0].1), "completed");
        assert_eq!(got[0].1, full);
        assert_eq!(got[1].1, full, "a complete frame is left as it is");
        assert_eq!(got[2].1, vec![0xff; 60]);
        let st = g.stats()[0];
        assert_eq!((st.csum_completed, st.csum_partial_left), (1, 1));
        assert_eq!(
            (st.rx_packets, st.rx_bytes),
            (3, 2 * full.len() as u64 + 60)
        );
    }

    #[test]
    fn multishot_puts_back_the_vlan_tag_the_kernel_took_out() {
        let mut g = big_group(1, 8);
        g.ring.incoming[0].push_back(frame(0, 7));
        let got = poll(&mut g, 64);
        assert_eq!(got[0].1, frame(0, 7));
        // The fake reports no tag; a buffer laid out with one (TP_STATUS_VLAN_VALID, TCI 5)
        // comes out tagged after the MAC addresses.
        let mut b = vec![0u8; 512];
        let used = recvmsg::lay_out(&mut b, &frame(0, 8), 0x1 | 0x10, 5, 0);
        let m = recvmsg::parse(&b, used as u32).unwrap();
        assert_eq!(m.vlan, Some([0x81, 0x00, 0x00, 0x05]));
    }

    #[test]
    fn tpacket_partial_checksums_are_completed_in_the_block() {
        let mut g = tp_group(4);
        let partial = crate::csum::tests::partial_udp4(b"x");
        g.ring.incoming[0].push_back(partial.clone());
        g.ring.status[0].push_back(PARTIAL);
        g.ring.incoming[0].push_back(partial.clone());
        g.ring.status[0].push_back(1);
        let got = poll(&mut g, 64);
        assert!(crate::csum::tests::verify(&got[0].1));
        assert_eq!(got[1].1, partial, "not flagged: left alone");
        assert_eq!(g.stats()[0].csum_completed, 1);
    }

    #[test]
    fn tpacket_occupancy_is_the_share_of_blocks_handed_over() {
        // 4 frames per block: 12 frames fill 3 of the 4 blocks.
        let mut g = tp_group(4);
        for s in 0..12 {
            g.ring.incoming[0].push_back(frame(0, s));
        }
        // Measured when the poll starts handing over: 3 blocks ready.
        assert_eq!(poll(&mut g, 1).len(), 1);
        assert_eq!(g.stats()[0].ring_occupancy_pct, 3 * 100 / 4);
        // The first block (held, 3 frames left) and two more: still 3 of 4; this poll takes
        // the first two blocks' frames and gives them back.
        assert_eq!(poll(&mut g, 7).len(), 7);
        assert_eq!(g.stats()[0].ring_occupancy_pct, 3 * 100 / 4);
        assert_eq!(poll(&mut g, 64).len(), 4);
        assert_eq!(g.stats()[0].ring_occupancy_pct, 100 / 4);
        assert!(poll(&mut g, 64).is_empty());
        assert_eq!(g.stats()[0].ring_occupancy_pct, 0, "all blocks back");
        // A full ring: 100.
        for s in 0..16 {
            g.ring.incoming[0].push_back(frame(0, s));
        }
        poll(&mut g, 1);
        assert_eq!(g.stats()[0].ring_occupancy_pct, 100);
    }

    #[test]
    fn multishot_occupancy_is_the_share_of_buffers_held_per_port() {
        let mut g = group(2, 8, 4);
        for s in 0..3 {
            g.ring.incoming[0].push_back(frame(0, s));
        }
        g.ring.incoming[1].push_back(frame(1, 9));
        // max 1: the frames wait in their buffers when the occupancy is measured.
        assert_eq!(poll(&mut g, 1).len(), 1);
        let st = g.stats();
        assert_eq!(
            (st[0].ring_occupancy_pct, st[1].ring_occupancy_pct),
            (3 * 100 / 8, 100 / 8)
        );
        poll(&mut g, 64);
        let st = g.stats();
        assert_eq!(
            (st[0].ring_occupancy_pct, st[1].ring_occupancy_pct),
            (2 * 100 / 8, 100 / 8)
        );
        poll(&mut g, 64);
        assert_eq!(g.stats()[0].ring_occupancy_pct, 0);
    }
}
