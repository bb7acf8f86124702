//! The worker's [`Ports`] over `wasp-io` port groups: the AF_PACKET group of the devices the
//! worker shares with the others (fanout), and a TAP group of its own queues (`--tap`).
//!
//! `wasp-io` hands received frames to a callback that cannot queue sends on the same group
//! (the callback runs while the group is borrowed), so frames to send are staged in one arena
//! during the callback and queued after it: two copies between receive and send for forwarded
//! frames, where the issue allows one (the group's send side could be lent to the callback).
//!
//! With two groups, the wait is split into slices of [`SLICE`] taken in turn, so a frame on
//! either waits at most one slice more than it would alone.

use std::time::{Duration, Instant};

use wasp_io::PortGroup;

use super::ports::{PortCounts, Ports, RxFrame, TxQueue};

/// Longest wait on one group while another may have frames.
pub const SLICE: Duration = Duration::from_millis(1);

/// `wasp-io` port groups as one worker's ports (port indices run across the groups in order).
pub struct IoPorts {
    parts: Vec<Box<dyn PortGroup>>,
    /// First port index of each part.
    base: Vec<usize>,
    /// Staged sends: (global port, start, end) into `arena`.
    staged: Vec<(usize, usize, usize)>,
    arena: Vec<u8>,
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
            parts,
            base,
            staged: Vec::with_capacity(wasp_core::MAX_VECTOR * 2),
            arena: Vec::with_capacity(wasp_core::MAX_VECTOR * 2048),
        }
    }

    /// MAC addresses by port index.
    pub fn macs(&self) -> Vec<(String, [u8; 6])> {
        self.parts
            .iter()
            .flat_map(|g| g.ports().iter().map(|p| (p.name.clone(), p.mac)))
            .collect()
    }

    /// Poll part `i` once, staging what the callback sends.
    fn poll_part(
        &mut self,
        i: usize,
        min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[RxFrame<'_>], &mut dyn TxQueue),
    ) -> Result<usize, String> {
        let nports: usize = self.parts.iter().map(|p| p.ports().len()).sum();
        let base = self.base[i];
        let IoPorts {
            parts,
            staged,
            arena,
            ..
        } = self;
        parts[i]
            .poll(min, max, timeout, &mut |rx| {
                let list: Vec<RxFrame<'_>> = rx
                    .iter()
                    .map(|f| RxFrame {
                        port: base + f.port,
                        data: f.data,
                    })
                    .collect();
                let mut stage = Stage {
                    staged,
                    arena,
                    ports: nports,
                };
                on_rx(&list, &mut stage);
            })
            .map_err(|e| e.to_string())
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

/// The staging side lent to the worker's callback.
struct Stage<'a> {
    staged: &'a mut Vec<(usize, usize, usize)>,
    arena: &'a mut Vec<u8>,
    ports: usize,
}

impl TxQueue for Stage<'_> {
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

impl Ports for IoPorts {
    fn names(&self) -> Vec<String> {
        self.parts
            .iter()
            .flat_map(|g| g.ports().iter().map(|p| p.name.clone()))
            .collect()
    }

    fn poll(
        &mut self,
        min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[RxFrame<'_>], &mut dyn TxQueue),
    ) -> Result<usize, String> {
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
                got += self.poll_part(i, 1, max, wait, on_rx)?;
                self.dispatch();
            }
            if got > 0 || Instant::now() >= deadline {
                return Ok(got);
            }
        }
    }

    fn flush(&mut self) -> Result<(), String> {
        for p in &mut self.parts {
            p.flush().map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn counts(&self) -> Vec<PortCounts> {
        self.parts
            .iter()
            .flat_map(|g| g.stats())
            .map(|s| PortCounts {
                rx_packets: s.rx_packets,
                rx_bytes: s.rx_bytes,
                tx_packets: s.tx_packets,
                tx_bytes: s.tx_bytes,
                rx_dropped: s.rx_dropped,
                tx_dropped: s.tx_dropped + s.tx_errors,
                csum_completed: s.csum_completed,
                csum_partial_left: s.csum_partial_left,
                ring_occupancy_pct: s.ring_occupancy_pct,
            })
            .collect()
    }
}
