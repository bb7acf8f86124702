//! Per-worker statistics: plain atomics each worker bumps once per vector, summed when read
//! (`wasp ctl stats`, the final statistics at shutdown).

use std::sync::atomic::{AtomicU64, Ordering};

/// Why the daemon dropped a packet (besides a `drop` verdict).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DropReason {
    /// A ruleset verdict (`drop`, a policy, a malformed header the kernel would discard).
    Verdict,
    /// No route to the destination.
    NoRoute,
    /// No neighbour entry for the next hop.
    NoNeighbour,
    /// The output device is not one wasp has open, or it is down.
    OutputDown,
    /// TTL or hop limit expired.
    TtlExpired,
    /// The send queue was full.
    TxFull,
}

impl DropReason {
    /// Every reason, in report order.
    pub const ALL: [DropReason; 6] = [
        DropReason::Verdict,
        DropReason::NoRoute,
        DropReason::NoNeighbour,
        DropReason::OutputDown,
        DropReason::TtlExpired,
        DropReason::TxFull,
    ];

    /// The reason's name in reports (`no-route`).
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Verdict => "verdict",
            DropReason::NoRoute => "no-route",
            DropReason::NoNeighbour => "no-neighbour",
            DropReason::OutputDown => "output-down",
            DropReason::TtlExpired => "ttl-expired",
            DropReason::TxFull => "tx-full",
        }
    }
}

/// One worker's counts (written by that worker only; read by anyone).
#[derive(Debug, Default)]
pub struct WorkerStats {
    /// Vectors processed.
    pub vectors: AtomicU64,
    /// Packets received and classified.
    pub packets: AtomicU64,
    /// Bytes received.
    pub bytes: AtomicU64,
    /// Packets with a final verdict accept.
    pub accepted: AtomicU64,
    /// Packets transmitted on an output port (forwarded, `fwd`, `dup` copies, replies).
    pub transmitted: AtomicU64,
    /// Accepted packets with nowhere to go (no `fwd`, no gateway route): the kernel would hand
    /// them to its local stack, which also received them (AF_PACKET only listens), so wasp
    /// counts them and frees the buffer.
    pub local: AtomicU64,
    /// Packets whose headers could not be parsed (each still got a verdict).
    pub malformed: AtomicU64,
    /// Drops by [`DropReason`] (index = position in [`DropReason::ALL`]).
    pub drops: [AtomicU64; DropReason::ALL.len()],
    /// Ruleset generation the worker runs.
    pub generation: AtomicU64,
}

impl WorkerStats {
    /// Add `n` to a counter (single writer: a relaxed load and store would do, but `fetch_add`
    /// keeps it correct if that ever changes).
    pub fn add(c: &AtomicU64, n: u64) {
        if n != 0 {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Count `n` drops for `reason`.
    pub fn drop(&self, reason: DropReason, n: u64) {
        let i = DropReason::ALL
            .iter()
            .position(|r| *r == reason)
            .unwrap_or(0);
        Self::add(&self.drops[i], n);
    }

    /// A copy of the counts.
    pub fn snapshot(&self) -> StatsSnapshot {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StatsSnapshot {
            vectors: l(&self.vectors),
            packets: l(&self.packets),
            bytes: l(&self.bytes),
            accepted: l(&self.accepted),
            transmitted: l(&self.transmitted),
            local: l(&self.local),
            malformed: l(&self.malformed),
            drops: DropReason::ALL
                .iter()
                .zip(&self.drops)
                .map(|(r, c)| (r.name().to_string(), l(c)))
                .collect(),
            generation: l(&self.generation),
        }
    }
}

/// Counts of one worker (or the sum of all), as reported.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct StatsSnapshot {
    /// Vectors processed.
    pub vectors: u64,
    /// Packets received.
    pub packets: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Packets accepted by the ruleset.
    pub accepted: u64,
    /// Packets sent on output ports.
    pub transmitted: u64,
    /// Accepted packets left to the local stack.
    pub local: u64,
    /// Packets with malformed headers.
    pub malformed: u64,
    /// Drops by reason name, in [`DropReason::ALL`] order.
    pub drops: Vec<(String, u64)>,
    /// Ruleset generation.
    pub generation: u64,
}

impl StatsSnapshot {
    /// The sum of several workers' counts (generation: the lowest, i.e. the one every worker
    /// has reached).
    pub fn sum(all: &[StatsSnapshot]) -> StatsSnapshot {
        let mut s = StatsSnapshot {
            generation: all.iter().map(|w| w.generation).min().unwrap_or(0),
            drops: DropReason::ALL
                .iter()
                .map(|r| (r.name().to_string(), 0))
                .collect(),
            ..StatsSnapshot::default()
        };
        for w in all {
            s.vectors += w.vectors;
            s.packets += w.packets;
            s.bytes += w.bytes;
            s.accepted += w.accepted;
            s.transmitted += w.transmitted;
            s.local += w.local;
            s.malformed += w.malformed;
            for (d, (_, n)) in s.drops.iter_mut().zip(&w.drops) {
                d.1 += n;
            }
        }
        s
    }

    /// Total drops over all reasons.
    pub fn dropped(&self) -> u64 {
        self.drops.iter().map(|(_, n)| n).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_and_reasons() {
        let a = WorkerStats::default();
        let b = WorkerStats::default();
        WorkerStats::add(&a.packets, 5);
        WorkerStats::add(&b.packets, 7);
        a.drop(DropReason::NoRoute, 2);
        b.drop(DropReason::NoRoute, 1);
        b.drop(DropReason::Verdict, 4);
        a.generation.store(3, Ordering::Relaxed);
        b.generation.store(2, Ordering::Relaxed);
        let s = StatsSnapshot::sum(&[a.snapshot(), b.snapshot()]);
        assert_eq!(s.packets, 12);
        assert_eq!(s.generation, 2);
        assert_eq!(s.dropped(), 7);
        assert_eq!(
            s.drops.iter().find(|(n, _)| n == "no-route").map(|d| d.1),
            Some(3)
        );
    }
}
