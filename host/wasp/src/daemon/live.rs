//! The worker's [`Ports`] over a `wasp-io` port group (AF_PACKET through io_uring, TAP).
//!
//! `wasp-io` hands received frames to a callback that cannot queue sends on the same group
//! (it holds the group), so frames to send are staged in one arena during the callback and
//! queued after it: two copies between receive and send for forwarded frames, where the issue
//! allows one (noted in the daemon issue's resolution; the group's send side could be lent to
//! the callback instead).

use std::time::Duration;

use wasp_io::PortGroup;

use super::ports::{PortCounts, Ports, RxFrame, TxQueue};

/// A `wasp-io` port group as the worker's ports.
pub struct IoPorts {
    group: Box<dyn PortGroup>,
    /// Staged sends: (port, start, end) into `arena`.
    staged: Vec<(usize, usize, usize)>,
    arena: Vec<u8>,
}

impl IoPorts {
    /// Wrap `group`.
    pub fn new(group: Box<dyn PortGroup>) -> Self {
        IoPorts {
            group,
            staged: Vec::with_capacity(wasp_core::MAX_VECTOR * 2),
            arena: Vec::with_capacity(wasp_core::MAX_VECTOR * 2048),
        }
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
}

impl Ports for IoPorts {
    fn names(&self) -> Vec<String> {
        self.group.ports().iter().map(|p| p.name.clone()).collect()
    }

    fn poll(
        &mut self,
        min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[RxFrame<'_>], &mut dyn TxQueue),
    ) -> Result<usize, String> {
        let IoPorts {
            group,
            staged,
            arena,
        } = self;
        let nports = group.ports().len();
        let n = group
            .poll(min, max, timeout, &mut |rx| {
                let list: Vec<RxFrame<'_>> = rx
                    .iter()
                    .map(|f| RxFrame {
                        port: f.port,
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
            .map_err(|e| e.to_string())?;
        for &(port, a, b) in staged.iter() {
            // A full send ring is counted by the group as a tx drop.
            let _ = group.queue(port, &arena[a..b]);
        }
        staged.clear();
        arena.clear();
        Ok(n)
    }

    fn flush(&mut self) -> Result<(), String> {
        self.group.flush().map_err(|e| e.to_string())
    }

    fn counts(&self) -> Vec<PortCounts> {
        self.group
            .stats()
            .iter()
            .map(|s| PortCounts {
                rx_packets: s.rx_packets,
                rx_bytes: s.rx_bytes,
                tx_packets: s.tx_packets,
                tx_bytes: s.tx_bytes,
                rx_dropped: s.rx_dropped,
                tx_dropped: s.tx_dropped + s.tx_errors,
            })
            .collect()
    }
}
