//! Per-worker statistics: plain atomics each worker bumps once per vector, summed when read
//! (`wasp ctl stats`, the final statistics at shutdown).

use std::sync::atomic::{AtomicU64, Ordering};

pub use wasp_gateway::DropReason;

/// Slots of [`WorkerStats::drops`]: one per [`DropReason`], in the order of
/// [`DropReason::ALL`] (their names are [`DropReason::name`]).
pub const DROP_SLOTS: usize = DropReason::ALL.len();

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
    /// Drops by [`DropReason`] (indexed as [`DropReason::ALL`]).
    pub drops: [AtomicU64; DROP_SLOTS],
    /// Ruleset generation the worker runs.
    pub generation: AtomicU64,
    /// Replies `reject` statements made (TCP resets, ICMP errors), queued to send.
    pub rejects: AtomicU64,
    /// Lines `log` statements made.
    pub logged: AtomicU64,
    /// Of those, lines over the worker's rate limit (not printed nor published).
    pub log_suppressed: AtomicU64,
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
        Self::add(&self.drops[reason.index()], n);
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
            drops: self
                .drops
                .iter()
                .enumerate()
                .map(|(i, c)| (DropReason::ALL[i].name().to_string(), l(c)))
                .collect(),
            generation: l(&self.generation),
            rejects: l(&self.rejects),
            logged: l(&self.logged),
            log_suppressed: l(&self.log_suppressed),
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
    /// Drops by reason name, in slot order.
    pub drops: Vec<(String, u64)>,
    /// Ruleset generation.
    pub generation: u64,
    /// `reject` replies made.
    pub rejects: u64,
    /// `log` lines made.
    pub logged: u64,
    /// `log` lines suppressed by the rate limit.
    pub log_suppressed: u64,
}

impl StatsSnapshot {
    /// The sum of several workers' counts (generation: the lowest, i.e. the one every worker
    /// has reached).
    pub fn sum(all: &[StatsSnapshot]) -> StatsSnapshot {
        let mut s = StatsSnapshot {
            generation: all.iter().map(|w| w.generation).min().unwrap_or(0),
            drops: (0..DROP_SLOTS)
                .map(|i| (DropReason::ALL[i].name().to_string(), 0))
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
            s.rejects += w.rejects;
            s.logged += w.logged;
            s.log_suppressed += w.log_suppressed;
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
    fn slots_are_distinct() {
        let names: std::collections::HashSet<_> =
            DropReason::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(names.len(), DROP_SLOTS);
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i, "{r:?}");
        }
        assert_eq!(
            DropReason::ALL[DropReason::TxFull.index()].name(),
            "tx-full"
        );
        assert_eq!(
            DropReason::ALL[DropReason::TtlExceeded.index()].name(),
            "ttl-exceeded"
        );
    }

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
