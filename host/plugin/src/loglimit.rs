//! The rate limit on a plugin's log lines: its `host.log` calls and, for WASI guests, the
//! lines it writes to stdout and stderr. A plugin that logs per packet under a flood must not
//! stall its worker on the log's writer, nor fill the journal.
//!
//! A token bucket per loaded plugin, shared by its instances (every worker's, and those made
//! again after a failure, so that a plugin that fails while printing cannot reset it):
//! [`BURST`] lines at once, refilled at [`PER_SECOND`] lines per second (the shape of the
//! kernel's `net_ratelimit`, with room for a plugin's start-up chatter). Lines past it are dropped and counted; the next line let through is preceded by
//! one line saying how many were dropped.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

/// Lines a plugin may log at once.
pub const BURST: u32 = 200;
/// Lines per second a plugin may log in the long run.
pub const PER_SECOND: u32 = 100;

/// One plugin's bucket, shared by its instances' `host.log` and WASI streams.
#[derive(Clone)]
pub(crate) struct LogLimit(Arc<Mutex<Bucket>>);

struct Bucket {
    tokens: f64,
    last: Instant,
    dropped: u64,
}

impl Default for LogLimit {
    fn default() -> Self {
        LogLimit(Arc::new(Mutex::new(Bucket {
            tokens: f64::from(BURST),
            last: Instant::now(),
            dropped: 0,
        })))
    }
}

/// What to do with one line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Log it; `dropped` lines were dropped since the last line logged (say so first).
    Yes { dropped: u64 },
    /// Drop it (counted).
    No,
}

impl LogLimit {
    /// Asks for one line at `now`.
    pub(crate) fn admit_at(&self, now: Instant) -> Admit {
        let mut b = self.0.lock();
        let elapsed = now.saturating_duration_since(b.last).as_secs_f64();
        b.last = now.max(b.last);
        b.tokens = (b.tokens + elapsed * f64::from(PER_SECOND)).min(f64::from(BURST));
        if b.tokens < 1.0 {
            b.dropped += 1;
            return Admit::No;
        }
        b.tokens -= 1.0;
        Admit::Yes {
            dropped: std::mem::take(&mut b.dropped),
        }
    }

    /// Logs `line` through `emit` if the bucket lets it, after a line on what was dropped.
    pub(crate) fn log(&self, plugin: &str, emit: impl FnOnce()) {
        match self.admit_at(Instant::now()) {
            Admit::No => {}
            Admit::Yes { dropped: 0 } => emit(),
            Admit::Yes { dropped } => {
                tracing::warn!(
                    plugin,
                    "{dropped} log lines of this plugin dropped (more than {PER_SECOND} per second)"
                );
                emit();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_then_the_rate_and_the_dropped_count_once() {
        let l = LogLimit::default();
        let t0 = Instant::now();
        for _ in 0..BURST {
            assert_eq!(l.admit_at(t0), Admit::Yes { dropped: 0 });
        }
        for _ in 0..5 {
            assert_eq!(l.admit_at(t0), Admit::No);
        }
        // 50 ms refill 5 lines.
        let t1 = t0 + Duration::from_millis(50);
        assert_eq!(l.admit_at(t1), Admit::Yes { dropped: 5 });
        for _ in 0..4 {
            assert_eq!(l.admit_at(t1), Admit::Yes { dropped: 0 });
        }
        assert_eq!(l.admit_at(t1), Admit::No);
        // A long quiet refills to the burst, not beyond.
        let t2 = t1 + Duration::from_secs(60);
        let mut admitted = 0;
        while l.admit_at(t2) != Admit::No {
            admitted += 1;
        }
        assert_eq!(admitted, BURST);
    }
}
