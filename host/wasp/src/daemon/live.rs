//! The worker's ports: `wasp-io` port groups joined as one [`PortGroup`]: the AF_PACKET group
//! of the devices the worker shares with the others (fanout), and a TAP group of its own
//! queues (`--tap`).
//!
//! Each group lends its own send side to the receive callback (`PortGroup::poll_tx`): a frame
//! sent to a port of the group whose frames are being handled (the common case: every
//! AF_PACKET device of a worker is in one group) is written by `TxSide::queue_with`'s `fill`
//! straight into that group's send memory (a `PACKET_TX_RING` frame, a send buffer): one copy
//! between receive and send. A frame sent to a port of another group (TAP <-> AF_PACKET in one
//! worker) cannot be queued there while this group's frames are borrowed, so it is staged in
//! an arena during the callback and queued on its group after it (two copies).
//!
//! With two groups, the wait is split into slices of [`SLICE`] taken in turn, so a frame on
//! either waits at most one slice more than it would alone.

use std::time::{Duration, Instant};

use wasp_io::{Frame, IoError, PortGroup, PortInfo, PortStats, TxSide};

/// Longest wait on one group while another may have frames.
pub const SLICE: Duration = Duration::from_millis(1);

/// `wasp-io` port groups as one worker's ports (port indices run across the groups in order).
pub struct IoPorts {
    parts: Vec<Box<dyn PortGroup>>,
    /// The parts' ports, in order.
    info: Vec<PortInfo>,
    /// First port index of each part.
    base: Vec<usize>,
    /// Staged sends to another group's ports: (global port, start, end) into `arena`.
    staged: Vec<(usize, usize, usize)>,
    arena: Vec<u8>,
    /// Reused allocation of the frame list handed to the callback.
    list: Vec<Frame<'static>>,
}

impl IoPorts {
    /// Wrap `group`.
    pub fn new(group: Box<dyn PortGroup>) -> Self {
        Self::joined(vec![group])
    }

    /// Wrap several groups (each waited on in turn).
    pub fn joined(parts: Vec<Box<dyn PortGroup>>) -> Self {
        let mut base = Vec::with_capacity(parts.len());
        let mut n = 0;
        for p in &parts {
            base.push(n);
            n += p.ports().len();
        }
        IoPorts {
            info: parts
                .iter()
                .flat_map(|p| p.ports().iter().cloned())
                .collect(),
            parts,
            base,
            staged: Vec::with_capacity(wasp_core::MAX_VECTOR * 2),
            arena: Vec::with_capacity(wasp_core::MAX_VECTOR * 2048),
            list: Vec::with_capacity(wasp_core::MAX_VECTOR),
        }
    }

    /// MAC addresses by port index.
    pub fn macs(&self) -> Vec<(String, [u8; 6])> {
        self.info.iter().map(|p| (p.name.clone(), p.mac)).collect()
    }

    /// Poll part `i` once: sends to part `i`'s ports go into its send side, others are staged.
    fn poll_part(
        &mut self,
        i: usize,
        min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[Frame<'_>], &mut dyn TxSide),
    ) -> Result<usize, IoError> {
        let nports = self.info.len();
        let base = self.base[i];
        let IoPorts {
            parts,
            staged,
            arena,
            list,
            ..
        } = self;
        let own = parts[i].ports().len();
        parts[i].poll_tx(min, max, timeout, &mut |rx, side| {
            // Reuse the allocation: an empty list of any lifetime.
            let mut frames: Vec<Frame<'_>> = std::mem::take(list)
                .into_iter()
                .map(|_| unreachable!())
                .collect();
            frames.extend(rx.iter().map(|f| Frame {
                port: base + f.port,
                data: f.data,
            }));
            let mut route = Route {
                side,
                base,
                own,
                stage: Stage {
                    staged: &mut *staged,
                    arena: &mut *arena,
                    ports: nports,
                },
            };
            on_rx(&frames, &mut route);
            frames.clear();
            *list = frames.into_iter().map(|_| unreachable!()).collect();
        })
    }

    /// Queue the staged frames on their groups.
    fn dispatch(&mut self) {
        for &(port, a, b) in &self.staged {
            let Some(i) = self.base.iter().rposition(|&s| s <= port) else {
                continue;
            };
            // A full send ring is counted by the group as a tx drop.
            let _ = self.parts[i].queue(port - self.base[i], &self.arena[a..b]);
        }
        self.staged.clear();
        self.arena.clear();
    }
}

/// The send side lent to the worker's callback while one group's frames are handled: ports
/// `base..base + own` (that group's) go to the group's own send side, the others to the stage.
struct Route<'a, 'b> {
    side: &'a mut dyn TxSide,
    base: usize,
    own: usize,
    stage: Stage<'b>,
}

impl Route<'_, '_> {
    /// `port`'s index in the group whose frames are handled, if it is one of its ports.
    fn own(&self, port: usize) -> Option<usize> {
        port.checked_sub(self.base).filter(|&p| p < self.own)
    }
}

impl TxSide for Route<'_, '_> {
    fn queue(&mut self, port: usize, frame: &[u8]) -> bool {
        match self.own(port) {
            Some(p) => self.side.queue(p, frame),
            None => self.stage.queue(port, frame),
        }
    }

    fn queue_with(&mut self, port: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        match self.own(port) {
            Some(p) => self.side.queue_with(p, len, fill),
            None => self.stage.queue_with(port, len, fill),
        }
    }

    /// Given to the group whose frames are handled (staged frames go out undescribed).
    fn describe(&mut self, ts_ns: u64, note: &str) {
        self.side.describe(ts_ns, note);
    }
}

/// The staging side for sends to another group's ports (queued after the callback).
struct Stage<'a> {
    staged: &'a mut Vec<(usize, usize, usize)>,
    arena: &'a mut Vec<u8>,
    ports: usize,
}

impl TxSide for Stage<'_> {
    fn queue(&mut self, port: usize, frame: &[u8]) -> bool {
        if port >= self.ports {
            return false;
        }
        let start = self.arena.len();
        self.arena.extend_from_slice(frame);
        self.staged.push((port, start, self.arena.len()));
        true
    }

    fn queue_with(&mut self, port: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        if port >= self.ports {
            return false;
        }
        let start = self.arena.len();
        self.arena.resize(start + len, 0);
        fill(&mut self.arena[start..]);
        self.staged.push((port, start, self.arena.len()));
        true
    }
}

impl PortGroup for IoPorts {
    fn ports(&self) -> &[PortInfo] {
        &self.info
    }

    fn set_waker(&mut self, w: &wasp_io::Waker) {
        for p in &mut self.parts {
            p.set_waker(w);
        }
    }

    fn poll(
        &mut self,
        min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[Frame<'_>]),
    ) -> Result<usize, IoError> {
        self.poll_tx(min, max, timeout, &mut |frames, _| on_rx(frames))
    }

    /// One group: its poll. Several: each polled in turn for a [`SLICE`] at most while none
    /// has frames, until `timeout`; sends to another group's ports are queued there after the
    /// callback.
    fn poll_tx(
        &mut self,
        min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[Frame<'_>], &mut dyn TxSide),
    ) -> Result<usize, IoError> {
        if self.parts.len() == 1 {
            let n = self.poll_part(0, min, max, timeout, on_rx)?;
            self.dispatch();
            return Ok(n);
        }
        let deadline = Instant::now() + timeout;
        let mut got = 0;
        loop {
            for i in 0..self.parts.len() {
                let left = deadline.saturating_duration_since(Instant::now());
                let wait = if got == 0 {
                    left.min(SLICE)
                } else {
                    Duration::ZERO
                };
                let t0 = Instant::now();
                let n = self.poll_part(i, 1, max, wait, on_rx)?;
                self.dispatch();
                got += n;
                // A wait that ended early without frames was woken (a job for the worker).
                if n == 0 && !wait.is_zero() && t0.elapsed() < wait {
                    return Ok(got);
                }
            }
            if got > 0 || Instant::now() >= deadline {
                return Ok(got);
            }
        }
    }

    fn queue(&mut self, port: usize, frame: &[u8]) -> bool {
        match self.base.iter().rposition(|&s| s <= port) {
            Some(i) if port < self.info.len() => self.parts[i].queue(port - self.base[i], frame),
            _ => false,
        }
    }

    fn queue_with(&mut self, port: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        match self.base.iter().rposition(|&s| s <= port) {
            Some(i) if port < self.info.len() => {
                self.parts[i].queue_with(port - self.base[i], len, fill)
            }
            _ => false,
        }
    }

    fn flush(&mut self) -> Result<(), IoError> {
        for p in &mut self.parts {
            p.flush()?;
        }
        Ok(())
    }

    fn stats(&self) -> Vec<PortStats> {
        self.parts.iter().flat_map(|g| g.stats()).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// What a fake group saw sent: through the send side lent to the callback (`direct`), and
    /// through `PortGroup::queue` after it (`queued`); by the group's own port index.
    #[derive(Default)]
    struct Log {
        direct: Vec<(usize, Vec<u8>)>,
        queued: Vec<(usize, Vec<u8>)>,
    }

    /// A group of `names` that hands out `rx` and lends a send side taking `room` frames.
    struct Fake {
        info: Vec<PortInfo>,
        rx: Vec<(usize, Vec<u8>)>,
        room: usize,
        log: Arc<Mutex<Log>>,
    }

    fn fake(names: &[&str], rx: Vec<(usize, Vec<u8>)>, room: usize) -> (Fake, Arc<Mutex<Log>>) {
        let log = Arc::new(Mutex::new(Log::default()));
        let info = names
            .iter()
            .map(|n| PortInfo {
                name: n.to_string(),
                ifindex: 0,
                mac: [0; 6],
                mtu: 1500,
            })
            .collect();
        let g = Fake {
            info,
            rx,
            room,
            log: log.clone(),
        };
        (g, log)
    }

    struct FakeSide<'a> {
        ports: usize,
        room: &'a mut usize,
        log: &'a Mutex<Log>,
    }

    impl TxSide for FakeSide<'_> {
        fn queue_with(&mut self, port: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
            if port >= self.ports || *self.room == 0 {
                return false;
            }
            *self.room -= 1;
            let mut b = vec![0; len];
            fill(&mut b);
            self.log.lock().unwrap().direct.push((port, b));
            true
        }
    }

    impl PortGroup for Fake {
        fn ports(&self) -> &[PortInfo] {
            &self.info
        }
        fn poll(
            &mut self,
            min: usize,
            max: usize,
            timeout: Duration,
            on_rx: &mut dyn FnMut(&[Frame<'_>]),
        ) -> Result<usize, IoError> {
            self.poll_tx(min, max, timeout, &mut |f, _| on_rx(f))
        }
        fn poll_tx(
            &mut self,
            _min: usize,
            _max: usize,
            _timeout: Duration,
            on_rx: &mut dyn FnMut(&[Frame<'_>], &mut dyn TxSide),
        ) -> Result<usize, IoError> {
            let rx = std::mem::take(&mut self.rx);
            if rx.is_empty() {
                return Ok(0);
            }
            let frames: Vec<Frame<'_>> = rx
                .iter()
                .map(|(port, data)| Frame { port: *port, data })
                .collect();
            let mut side = FakeSide {
                ports: self.info.len(),
                room: &mut self.room,
                log: &self.log,
            };
            on_rx(&frames, &mut side);
            Ok(rx.len())
        }
        fn queue(&mut self, port: usize, frame: &[u8]) -> bool {
            self.log.lock().unwrap().queued.push((port, frame.to_vec()));
            true
        }
        fn flush(&mut self) -> Result<(), IoError> {
            Ok(())
        }
        fn stats(&self) -> Vec<PortStats> {
            vec![PortStats::default(); self.info.len()]
        }
    }

    fn poll(ports: &mut IoPorts, on_rx: &mut dyn FnMut(&[Frame<'_>], &mut dyn TxSide)) {
        ports.poll_tx(1, 64, Duration::ZERO, on_rx).unwrap();
    }

    #[test]
    fn sends_within_the_group_go_to_its_send_side_and_across_groups_through_the_arena() {
        // Worker ports: eth0, eth1 (one AF_PACKET group), tap0 (a TAP group).
        let (a, log_a) = fake(&["eth0", "eth1"], vec![(0, vec![1; 60])], 8);
        let (b, log_b) = fake(&["tap0"], vec![(0, vec![2; 61])], 8);
        let mut ports = IoPorts::joined(vec![Box::new(a), Box::new(b)]);
        let mut ok = Vec::new();
        let mut seen = Vec::new();
        poll(&mut ports, &mut |fs, tx| {
            for f in fs {
                seen.push((f.port, f.data[0]));
                let rewrite = |to: usize, tx: &mut dyn TxSide| {
                    tx.queue_with(to, f.data.len(), &mut |b| {
                        b.copy_from_slice(f.data);
                        b[0] = 0xaa;
                    })
                };
                // eth1, tap0, eth0 by queue_with; eth1 by queue; a port no group has.
                ok.push(rewrite(1, tx));
                ok.push(rewrite(2, tx));
                ok.push(rewrite(0, tx));
                ok.push(tx.queue(1, f.data));
                ok.push(rewrite(3, tx));
            }
        });
        assert_eq!(seen, [(0, 1), (2, 2)]);
        assert_eq!(
            ok,
            [true, true, true, true, false, true, true, true, true, false]
        );
        let rw = |b: u8, n: usize| {
            let mut f = vec![b; n];
            f[0] = 0xaa;
            f
        };
        let a = log_a.lock().unwrap();
        let b = log_b.lock().unwrap();
        // eth0's frame: to eth1 and eth0 in place (its own group), to tap0 staged and queued
        // on the TAP group after the callback.
        // tap0's frame: to tap0 in place, to eth0/eth1 staged.
        assert_eq!(
            a.direct,
            [(1, rw(1, 60)), (0, rw(1, 60)), (1, vec![1; 60])],
            "in place, no arena"
        );
        assert_eq!(b.queued, [(0, rw(1, 60))], "through the arena");
        assert_eq!(b.direct, [(0, rw(2, 61))]);
        assert_eq!(
            a.queued,
            [(1, rw(2, 61)), (0, rw(2, 61)), (1, vec![2; 61])],
            "through the arena"
        );
        assert!(ports.staged.is_empty() && ports.arena.is_empty());
    }

    #[test]
    fn a_full_send_side_refuses_and_the_callback_goes_on() {
        let rx = (0..3).map(|i| (0, vec![i; 60])).collect();
        let (a, log) = fake(&["eth0", "eth1"], rx, 2);
        let mut ports = IoPorts::new(Box::new(a));
        let mut ok = Vec::new();
        poll(&mut ports, &mut |fs, tx| {
            for f in fs {
                ok.push(tx.queue_with(1, f.data.len(), &mut |b| b.copy_from_slice(f.data)));
            }
        });
        assert_eq!(ok, [true, true, false]);
        let log = log.lock().unwrap();
        assert_eq!(log.direct.len(), 2);
        assert!(log.queued.is_empty(), "a refused frame is not staged");
    }
}
