//! A fake of the seam for unit tests: devices from a table, and a ring that plays the kernel's
//! part (multishot receives fill provided buffers in order and end with `ENOBUFS` when the
//! buffer ring runs dry; sends complete when submitted).

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use super::{Cqe, Op, Ring, RingSpec, RxMem, SocketSpec, Sqe, Sys, TxMem, TxrState};
use crate::port::TpacketConfig;

/// A fake TPACKET_V3 ring: blocks laid out as the kernel lays them out.
#[derive(Debug)]
struct FakeTp {
    blocks: Vec<Vec<u8>>,
    /// Handed to user space (TP_STATUS_USER).
    user: Vec<bool>,
    /// Taken by the caller (between `tp_take` and `tp_release`).
    held: Vec<bool>,
    /// The block the kernel fills next.
    cur: usize,
    drops: u64,
    poll_armed: bool,
}

/// A fake PACKET_TX_RING: frames with a status, sent in ring order by a kick.
#[derive(Debug)]
pub(crate) struct FakeTxr {
    /// The frames' data areas.
    pub bufs: Vec<Vec<u8>>,
    len: Vec<u32>,
    state: Vec<TxrState>,
    requested: Vec<bool>,
    /// The kernel's head.
    head: usize,
    /// Frames stay Busy after a kick (in flight) until `complete_txr`.
    pub hold: bool,
    /// errno of the next kicks (e.g. ENETDOWN), before any frame is looked at.
    pub kick_errno: Option<i32>,
    /// Kicks made.
    pub kicks: usize,
    /// Frames given back by `txr_cancel`.
    pub cancelled: usize,
}

/// Bytes of `struct tpacket_block_desc` before the first packet.
const BLOCK_HDR: usize = 48;
/// Offset of the frame from its `tpacket3_hdr` (`tp_mac`).
const PKT_MAC: usize = 48;

/// A device of the fake system.
#[derive(Debug, Clone)]
pub(crate) struct FakeDev {
    pub name: String,
    pub ifindex: u32,
    pub mac: [u8; 6],
    pub mtu: u32,
}

/// The fake system: `devs`, and errors to return.
#[derive(Debug, Default)]
pub(crate) struct FakeSys {
    pub devs: Vec<FakeDev>,
    /// errno for `packet_socket` / `tap_open`.
    pub open_errno: Option<i32>,
    /// TAP devices that exist without `IFF_MULTI_QUEUE` (as `tun_set_iff` treats them: a
    /// multi-queue open fails with EINVAL, a second single-queue open with EBUSY).
    pub single_queue_taps: Vec<String>,
    /// Queues opened per TAP device name.
    pub tap_queues: std::cell::RefCell<Vec<(String, bool)>>,
}

impl FakeSys {
    pub fn with(names: &[&str]) -> FakeSys {
        FakeSys {
            devs: names
                .iter()
                .enumerate()
                .map(|(i, n)| FakeDev {
                    name: n.to_string(),
                    ifindex: 10 + i as u32,
                    mac: [2, 0, 0, 0, 0, i as u8],
                    mtu: 1500,
                })
                .collect(),
            ..FakeSys::default()
        }
    }

    fn dev(&self, name: &str) -> io::Result<&FakeDev> {
        self.devs
            .iter()
            .find(|d| d.name == name)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))
    }
}

/// An opened fake device.
#[derive(Debug)]
pub(crate) struct FakePort {
    /// The device it was opened on (0 for TAP).
    #[allow(dead_code)]
    pub ifindex: u32,
    /// Its TPACKET_V3 ring, if any.
    pub tpacket: Option<TpacketConfig>,
    /// Its TX ring (frames, bytes), if any.
    pub tx_ring: Option<(u32, u32)>,
}

impl Sys for FakeSys {
    type Port = FakePort;
    type Ring = FakeRing;

    fn if_index(&self, name: &str) -> io::Result<u32> {
        Ok(self.dev(name)?.ifindex)
    }
    fn if_hwaddr(&self, name: &str) -> io::Result<[u8; 6]> {
        Ok(self.dev(name)?.mac)
    }
    fn if_mtu(&self, name: &str) -> io::Result<u32> {
        Ok(self.dev(name)?.mtu)
    }
    fn packet_socket(&self, spec: &SocketSpec) -> Result<FakePort, (&'static str, io::Error)> {
        if let Some(e) = self.open_errno {
            return Err(("AF_PACKET socket", io::Error::from_raw_os_error(e)));
        }
        Ok(FakePort {
            ifindex: spec.ifindex,
            tpacket: spec.tpacket,
            tx_ring: spec.tx_ring.map(|t| (t.frames, t.frame_bytes)),
        })
    }
    fn tap_open(&self, name: &str, multi_queue: bool) -> io::Result<(FakePort, String)> {
        if let Some(e) = self.open_errno {
            return Err(io::Error::from_raw_os_error(e));
        }
        let mut q = self.tap_queues.borrow_mut();
        let existing = q.iter().find(|(n, _)| n == name).map(|(_, mq)| *mq);
        let single = self.single_queue_taps.iter().any(|n| n == name);
        let dev_mq = existing.or(if single { Some(false) } else { None });
        match dev_mq {
            Some(mq) if mq != multi_queue => {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            Some(false) if existing.is_some() => {
                return Err(io::Error::from_raw_os_error(libc::EBUSY));
            }
            _ => {}
        }
        q.push((name.to_string(), multi_queue));
        Ok((
            FakePort {
                ifindex: 0,
                tpacket: None,
                tx_ring: None,
            },
            name.to_string(),
        ))
    }
    fn ring(&self, spec: &RingSpec, ports: Vec<FakePort>) -> io::Result<FakeRing> {
        let mut r = FakeRing::new(spec, ports.len());
        for (i, p) in ports.iter().enumerate() {
            if let Some(t) = p.tpacket {
                r.add_tpacket(i, t.block_bytes as usize, t.blocks as usize);
            }
            if let Some((frames, bytes)) = p.tx_ring {
                r.add_txr(i, frames as usize, bytes as usize);
            }
        }
        Ok(r)
    }
}

/// The fake ring. Tests feed `incoming` and read `sent`.
#[derive(Debug)]
pub(crate) struct FakeRing {
    /// Per port: frames the "kernel" delivers to an armed receive, in order.
    pub incoming: Vec<VecDeque<Vec<u8>>>,
    /// Per port: the `tp_status` of the next incoming frames (one per frame, taken with it;
    /// `TP_STATUS_USER` alone when empty), reported in the TPACKET_V3 header or the
    /// `PACKET_AUXDATA` of a `recvmsg`.
    pub status: Vec<VecDeque<u32>>,
    /// Per port: frames sent (bytes of the send buffer at submission).
    pub sent: Vec<Vec<Vec<u8>>>,
    /// Result of every send, when set (e.g. `-ENETDOWN`); otherwise the length.
    pub tx_res: Option<i32>,
    /// Per `enter`/`submit` call: submissions it carried.
    pub batches: Vec<usize>,
    /// At most this many receive completions per `enter` (None: all).
    pub deliver_limit: Option<usize>,
    /// Submission queue capacity.
    pub sq_cap: usize,
    sq: Vec<Sqe>,
    cq: VecDeque<Cqe>,
    armed: Vec<Option<Op>>,
    avail: VecDeque<u16>,
    held: Vec<bool>,
    bufs: Vec<Vec<u8>>,
    /// The send buffers.
    pub tx: Vec<Vec<u8>>,
    tx_busy: Vec<Option<u32>>,
    tp: Vec<Option<FakeTp>>,
    /// Per port: its TX ring, if any.
    pub txr: Vec<Option<FakeTxr>>,
    /// Per port: the pending socket error (a TPACKET_V3 poll reports POLLERR while it is set).
    pub sock_err: Vec<i32>,
    /// Per port: an armed receive ends at once with this errno (a persistent failure).
    pub recv_errno: Vec<Option<i32>>,
    /// Slices of send memory lent to be written (send buffers and TX ring frames): one per
    /// frame written into send memory, whatever it was written from.
    pub tx_lends: usize,
    /// The waker's poll is armed.
    pub wake_armed: bool,
    /// The waker was signalled: an armed poll completes at the next `enter`.
    pub wake_signalled: bool,
    /// Times the waker was drained.
    pub wake_drains: usize,
}

impl FakeRing {
    pub fn new(spec: &RingSpec, nports: usize) -> FakeRing {
        let n = spec.rx_buffers as usize;
        FakeRing {
            incoming: vec![VecDeque::new(); nports],
            status: vec![VecDeque::new(); nports],
            sent: vec![Vec::new(); nports],
            tx_res: None,
            batches: Vec::new(),
            deliver_limit: None,
            sq_cap: spec.sq_entries as usize,
            sq: Vec::new(),
            cq: VecDeque::new(),
            armed: vec![None; nports],
            avail: (0..n as u16).collect(),
            held: vec![false; n],
            bufs: vec![vec![0; spec.rx_buffer_bytes as usize]; n],
            tx: vec![vec![0; spec.tx_buffer_bytes as usize]; spec.tx_buffers as usize],
            tx_busy: vec![None; spec.tx_buffers as usize],
            tp: (0..nports).map(|_| None).collect(),
            txr: (0..nports).map(|_| None).collect(),
            sock_err: vec![0; nports],
            recv_errno: vec![None; nports],
            tx_lends: 0,
            wake_armed: false,
            wake_signalled: false,
            wake_drains: 0,
        }
    }

    /// Gives `port` a TX ring of `frames` frames of `bytes` bytes.
    pub fn add_txr(&mut self, port: usize, frames: usize, bytes: usize) {
        self.txr[port] = Some(FakeTxr {
            bufs: vec![vec![0; bytes]; frames],
            len: vec![0; frames],
            state: vec![TxrState::Free; frames],
            requested: vec![false; frames],
            head: 0,
            hold: false,
            kick_errno: None,
            kicks: 0,
            cancelled: 0,
        });
    }

    /// Frames of `port`'s TX ring in flight (held) become free.
    pub fn complete_txr(&mut self, port: usize) {
        let t = self.txr[port].as_mut().expect("tx ring");
        for (s, r) in t.state.iter_mut().zip(&t.requested) {
            if *s == TxrState::Busy && !*r {
                *s = TxrState::Free;
            }
        }
    }

    /// Gives `port` a TPACKET_V3 ring of `blocks` blocks of `block_bytes`.
    pub fn add_tpacket(&mut self, port: usize, block_bytes: usize, blocks: usize) {
        self.tp[port] = Some(FakeTp {
            blocks: vec![vec![0; block_bytes]; blocks],
            user: vec![false; blocks],
            held: vec![false; blocks],
            cur: 0,
            drops: 0,
            poll_armed: false,
        });
    }

    /// Blocks of `port` the kernel has handed over and not got back.
    pub fn tp_user_blocks(&self, port: usize) -> usize {
        self.tp[port]
            .as_ref()
            .map_or(0, |t| t.user.iter().filter(|u| **u).count())
    }

    /// The kernel's side of TPACKET_V3: packs the incoming frames of `port` into free blocks,
    /// retiring each block when the next frame does not fit or the frames run out (as the
    /// retire timer would); frames with no free block are dropped and counted.
    fn fill_blocks(&mut self, p: usize) {
        let Some(t) = self.tp[p].as_mut() else { return };
        while !self.incoming[p].is_empty() {
            if t.user[t.cur] {
                t.drops += self.incoming[p].len() as u64;
                self.incoming[p].clear();
                break;
            }
            let b = &mut t.blocks[t.cur];
            let mut off = BLOCK_HDR;
            let mut num = 0u32;
            let mut last_hdr = None;
            while let Some(f) = self.incoming[p].front() {
                let need = (PKT_MAC + f.len()).next_multiple_of(16);
                if off + need > b.len() {
                    break;
                }
                let f = self.incoming[p].pop_front().expect("front");
                let status = self.status[p].pop_front().unwrap_or(1);
                if let Some(h) = last_hdr {
                    let h: usize = h;
                    b[h..h + 4].copy_from_slice(&((off - h) as u32).to_ne_bytes());
                }
                b[off..off + 4].copy_from_slice(&0u32.to_ne_bytes());
                b[off + 12..off + 16].copy_from_slice(&(f.len() as u32).to_ne_bytes());
                b[off + 16..off + 20].copy_from_slice(&(f.len() as u32).to_ne_bytes());
                b[off + 20..off + 24].copy_from_slice(&status.to_ne_bytes());
                b[off + 24..off + 26].copy_from_slice(&(PKT_MAC as u16).to_ne_bytes());
                b[off + PKT_MAC..off + PKT_MAC + f.len()].copy_from_slice(&f);
                last_hdr = Some(off);
                off += need;
                num += 1;
            }
            assert!(num > 0, "frame larger than a block");
            b[12..16].copy_from_slice(&num.to_ne_bytes());
            b[16..20].copy_from_slice(&(BLOCK_HDR as u32).to_ne_bytes());
            t.user[t.cur] = true;
            t.cur = (t.cur + 1) % t.blocks.len();
        }
        let err = self.sock_err[p] != 0;
        if t.poll_armed && (err || t.user.iter().any(|u| *u)) {
            t.poll_armed = false;
            self.cq.push_back(Cqe {
                sqe: Sqe {
                    port: p as u32,
                    op: Op::PollIn,
                },
                res: if err {
                    libc::POLLERR as i32
                } else {
                    libc::POLLIN as i32
                },
                buf: None,
                more: false,
            });
        }
    }

    fn rx_view(&self) -> FakeRx<'_> {
        FakeRx {
            bufs: &self.bufs,
            held: &self.held,
            tp: &self.tp,
        }
    }

    /// Buffers currently in the kernel's ring.
    pub fn provided(&self) -> usize {
        self.avail.len()
    }

    /// Whether `port` has a multishot receive armed.
    pub fn armed(&self, port: usize) -> bool {
        self.armed[port].is_some()
    }

    fn run_sq(&mut self) {
        self.batches.push(self.sq.len());
        for sqe in std::mem::take(&mut self.sq) {
            let p = sqe.port as usize;
            match sqe.op {
                Op::Recv | Op::Read => {
                    assert!(
                        self.armed[p].is_none(),
                        "port {p}: a second multishot armed"
                    );
                    self.armed[p] = Some(sqe.op);
                }
                Op::Tx { slot, len, .. } => {
                    self.sent[p].push(self.tx[slot as usize][..len as usize].to_vec());
                    self.cq.push_back(Cqe {
                        sqe,
                        res: self.tx_res.unwrap_or(len as i32),
                        buf: None,
                        more: false,
                    });
                }
                Op::PollIn => {
                    let t = self.tp[p].as_mut().expect("poll on a TPACKET_V3 port");
                    assert!(!t.poll_armed, "port {p}: a second poll armed");
                    t.poll_armed = true;
                }
                Op::CancelAll => {}
                Op::Wake => {
                    assert!(!self.wake_armed, "a second waker poll armed");
                    self.wake_armed = true;
                }
            }
        }
    }

    /// Fills buffers for armed receives, one frame per port in turn (arrival interleaved).
    fn deliver(&mut self) {
        for p in 0..self.armed.len() {
            if let (Some(op), Some(e)) = (self.armed[p], self.recv_errno[p]) {
                self.armed[p] = None;
                self.cq.push_back(Cqe {
                    sqe: Sqe { port: p as u32, op },
                    res: -e,
                    buf: None,
                    more: false,
                });
            }
        }
        let mut budget = self.deliver_limit.unwrap_or(usize::MAX);
        loop {
            let mut any = false;
            for p in 0..self.armed.len() {
                let Some(op) = self.armed[p] else { continue };
                if budget == 0 || self.incoming[p].is_empty() {
                    continue;
                }
                let sqe = Sqe { port: p as u32, op };
                let Some(bid) = self.avail.pop_front() else {
                    self.cq.push_back(Cqe {
                        sqe,
                        res: -libc::ENOBUFS,
                        buf: None,
                        more: false,
                    });
                    self.armed[p] = None;
                    continue;
                };
                let f = self.incoming[p].pop_front().expect("non-empty");
                let status = self.status[p].pop_front().unwrap_or(1);
                let b = &mut self.bufs[bid as usize];
                let n = if op == Op::Recv {
                    // recvmsg with PACKET_AUXDATA: header, control, frame.
                    crate::recvmsg::lay_out(b, &f, status, 0, 0)
                } else {
                    let n = f.len().min(b.len());
                    b[..n].copy_from_slice(&f[..n]);
                    n
                };
                self.cq.push_back(Cqe {
                    sqe,
                    res: n as i32,
                    buf: Some(bid),
                    more: true,
                });
                budget -= 1;
                any = true;
            }
            if !any {
                break;
            }
        }
    }
}

impl Ring for FakeRing {
    type Rx<'a> = FakeRx<'a>;
    type Tx<'a> = FakeTx<'a>;

    fn split(&mut self) -> (FakeRx<'_>, FakeTx<'_>) {
        let rx = FakeRx {
            bufs: &self.bufs,
            held: &self.held,
            tp: &self.tp,
        };
        let tx = FakeTx {
            tx: &mut self.tx,
            busy: &self.tx_busy,
            txr: &mut self.txr,
            lends: &mut self.tx_lends,
        };
        (rx, tx)
    }

    fn push(&mut self, sqe: Sqe) -> bool {
        if self.sq.len() >= self.sq_cap {
            return false;
        }
        if let Op::Tx { slot, len, .. } = sqe.op {
            assert!(
                self.tx_busy[slot as usize].is_none(),
                "send buffer {slot} in flight"
            );
            self.tx_busy[slot as usize] = Some(len);
        }
        self.sq.push(sqe);
        true
    }

    fn submit(&mut self) -> io::Result<()> {
        self.run_sq();
        Ok(())
    }

    fn enter(&mut self, _min: u32, _timeout: Duration) -> io::Result<()> {
        self.run_sq();
        self.deliver();
        for p in 0..self.tp.len() {
            self.fill_blocks(p);
        }
        if self.wake_armed && self.wake_signalled {
            self.wake_armed = false;
            self.cq.push_back(Cqe {
                sqe: Sqe {
                    port: 0,
                    op: Op::Wake,
                },
                res: libc::POLLIN as i32,
                buf: None,
                more: false,
            });
        }
        Ok(())
    }

    fn pop(&mut self) -> Option<Cqe> {
        let c = self.cq.pop_front()?;
        if let Some(b) = c.buf {
            assert!(!self.held[b as usize], "buffer {b} filled twice");
            self.held[b as usize] = true;
        }
        if let Op::Tx { slot, .. } = c.sqe.op {
            self.tx_busy[slot as usize] = None;
        }
        Some(c)
    }

    fn rx_count(&self) -> u32 {
        self.bufs.len() as u32
    }

    fn rx_buf(&self, bid: u16) -> &[u8] {
        self.rx_view().buf(bid)
    }

    fn rx_buf_mut(&mut self, bid: u16) -> &mut [u8] {
        assert!(
            self.held[bid as usize],
            "buffer {bid} written while not held"
        );
        &mut self.bufs[bid as usize]
    }

    fn rx_provide(&mut self, bid: u16) {
        assert!(self.held[bid as usize], "buffer {bid} provided twice");
        self.held[bid as usize] = false;
        self.avail.push_back(bid);
    }

    fn tx_count(&self) -> u32 {
        self.tx.len() as u32
    }

    fn tp_blocks(&self, port: u32) -> u32 {
        self.tp[port as usize]
            .as_ref()
            .map_or(0, |t| t.blocks.len() as u32)
    }
    fn tp_take(&mut self, port: u32, blk: u32) -> bool {
        let t = self.tp[port as usize].as_mut().expect("TPACKET_V3 port");
        let b = blk as usize;
        t.held[b] = t.user[b];
        t.held[b]
    }
    fn tp_user(&self, port: u32, blk: u32) -> bool {
        self.tp[port as usize]
            .as_ref()
            .expect("TPACKET_V3 port")
            .user[blk as usize]
    }
    fn tp_block_mut(&mut self, port: u32, blk: u32) -> &mut [u8] {
        let t = self.tp[port as usize].as_mut().expect("TPACKET_V3 port");
        assert!(t.held[blk as usize], "block {blk} written while not held");
        &mut t.blocks[blk as usize]
    }
    fn tp_block(&self, port: u32, blk: u32) -> &[u8] {
        self.rx_view().block(port, blk)
    }
    fn tp_release(&mut self, port: u32, blk: u32) {
        let t = self.tp[port as usize].as_mut().expect("TPACKET_V3 port");
        let b = blk as usize;
        assert!(t.held[b], "block {blk} released while not held");
        t.held[b] = false;
        t.user[b] = false;
        t.blocks[b].fill(0xee);
    }
    fn kernel_drops(&self, port: u32) -> u64 {
        self.tp[port as usize].as_ref().map_or(0, |t| t.drops)
    }
    fn take_error(&mut self, port: u32) -> i32 {
        std::mem::take(&mut self.sock_err[port as usize])
    }
    fn txr_cancel(&mut self, port: u32, idx: u32) {
        let t = self.txr[port as usize].as_mut().expect("tx ring");
        let i = idx as usize;
        if t.requested[i] {
            t.requested[i] = false;
            t.state[i] = TxrState::Free;
            t.cancelled += 1;
        }
    }
    fn set_waker(&mut self, _waker: std::sync::Arc<super::EventFd>) {}

    fn drain_waker(&mut self) {
        self.wake_signalled = false;
        self.wake_drains += 1;
    }

    fn txr_kick(&mut self, port: u32) -> io::Result<usize> {
        let p = port as usize;
        let t = self.txr[p].as_mut().expect("tx ring");
        t.kicks += 1;
        if let Some(e) = t.kick_errno {
            return Err(io::Error::from_raw_os_error(e));
        }
        let mut bytes = 0;
        while t.requested[t.head] {
            let i = t.head;
            t.requested[i] = false;
            let n = t.len[i] as usize;
            self.sent[p].push(t.bufs[i][..n].to_vec());
            bytes += n;
            t.state[i] = if t.hold {
                TxrState::Busy
            } else {
                TxrState::Free
            };
            t.head = (i + 1) % t.bufs.len();
        }
        Ok(bytes)
    }
}

/// The fake's receive memory.
#[derive(Clone, Copy)]
pub(crate) struct FakeRx<'a> {
    bufs: &'a [Vec<u8>],
    held: &'a [bool],
    tp: &'a [Option<FakeTp>],
}

impl<'a> FakeRx<'a> {
    fn buf(self, bid: u16) -> &'a [u8] {
        assert!(self.held[bid as usize], "buffer {bid} read while not held");
        &self.bufs[bid as usize]
    }

    fn block(self, port: u32, blk: u32) -> &'a [u8] {
        let t = self.tp[port as usize].as_ref().expect("TPACKET_V3 port");
        assert!(t.held[blk as usize], "block {blk} read while not held");
        &t.blocks[blk as usize]
    }
}

impl RxMem for FakeRx<'_> {
    fn rx_buf(&self, bid: u16) -> &[u8] {
        self.buf(bid)
    }
    fn tp_block(&self, port: u32, blk: u32) -> &[u8] {
        self.block(port, blk)
    }
}

/// The fake's send memory; counts what it lends ([`FakeRing::tx_lends`]).
pub(crate) struct FakeTx<'a> {
    tx: &'a mut [Vec<u8>],
    busy: &'a [Option<u32>],
    txr: &'a mut [Option<FakeTxr>],
    lends: &'a mut usize,
}

impl TxMem for FakeTx<'_> {
    fn tx_slot(&mut self, slot: u32) -> &mut [u8] {
        assert!(
            self.busy[slot as usize].is_none(),
            "send buffer {slot} in flight"
        );
        let b = &mut self.tx[slot as usize];
        *self.lends += 1;
        b
    }
    fn txr_frames(&self, port: u32) -> u32 {
        self.txr[port as usize]
            .as_ref()
            .map_or(0, |t| t.bufs.len() as u32)
    }
    fn txr_state(&self, port: u32, idx: u32) -> TxrState {
        self.txr[port as usize].as_ref().expect("tx ring").state[idx as usize]
    }
    fn txr_buf(&mut self, port: u32, idx: u32) -> &mut [u8] {
        let t = self.txr[port as usize].as_mut().expect("tx ring");
        assert_ne!(
            t.state[idx as usize],
            TxrState::Busy,
            "frame {idx} is the kernel's"
        );
        let b = &mut t.bufs[idx as usize];
        *self.lends += 1;
        b
    }
    fn txr_commit(&mut self, port: u32, idx: u32, len: u32) {
        let t = self.txr[port as usize].as_mut().expect("tx ring");
        let i = idx as usize;
        assert_ne!(t.state[i], TxrState::Busy, "frame {idx} is the kernel's");
        t.len[i] = len;
        t.state[i] = TxrState::Busy;
        t.requested[i] = true;
    }
}
