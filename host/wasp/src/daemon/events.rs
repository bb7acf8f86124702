//! Events for `wasp ctl monitor`: plugin events (IDLETIMER expiries, traps, swaps) and
//! ruleset changes, fanned out to every subscriber. A subscriber that stops reading is dropped
//! once its queue is full (it never holds up a worker).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};

/// Events a subscriber may have queued before it counts as gone.
const QUEUE: usize = 4096;

/// One event line, as `wasp ctl monitor` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// What kind (`plugin`, `ruleset`, `flow`).
    pub kind: &'static str,
    /// The line `wasp ctl monitor` prints (`idletimer wlan0 expired`, `ruleset generation 2
    /// applied`, `plugin counter swapped to v2.wasm`).
    pub text: String,
    /// The event in libnftables JSON (`{"add": {"rule": {...}}}`), as `wasp ctl -j monitor`
    /// prints it; `None` for wasp's own events, which `-j monitor` prints as
    /// `{"wasp": {"kind": KIND, "text": TEXT}}`.
    pub json: Option<String>,
}

/// One packet's traced walk (`meta nftrace set 1`), as a worker recorded it: formatted into
/// `nft monitor trace` lines on the control side, which knows the ruleset's names.
#[derive(Debug, Clone)]
pub struct TraceRecord {
    /// The ruleset generation the worker ran.
    pub generation: u64,
    /// The trace id (32 bits, as the kernel's): the worker's index in the top 8 bits, then a
    /// per-worker count.
    pub id: u64,
    /// What the `packet:` lines show ([`crate::trace::describe_packet`]).
    pub packet: String,
    /// The walk's events (and its `log` lines), in order.
    pub events: Vec<wasp_core::TraceEvent>,
}

/// The subscribers.
#[derive(Debug, Default)]
pub struct EventBus {
    subs: Mutex<Vec<SyncSender<Event>>>,
    /// `wasp ctl monitor trace` subscribers, and how many there are (read by the workers
    /// once per vector, without the lock).
    tracers: Mutex<Vec<(u64, SyncSender<Arc<TraceRecord>>)>>,
    tracing: AtomicUsize,
    next_tracer: std::sync::atomic::AtomicU64,
}

/// A `wasp ctl monitor trace` subscription ([`EventBus::subscribe_traces`]); dropping it
/// unsubscribes.
#[derive(Debug)]
pub struct TraceSubscription {
    /// The traced walks, as the workers publish them.
    pub rx: Receiver<Arc<TraceRecord>>,
    id: u64,
    bus: Arc<EventBus>,
}

impl Drop for TraceSubscription {
    fn drop(&mut self) {
        let mut t = self.bus.tracers.lock().unwrap_or_else(|p| p.into_inner());
        t.retain(|(id, _)| *id != self.id);
        self.bus.tracing.store(t.len(), Ordering::Relaxed);
    }
}

impl EventBus {
    /// A new subscription: events published from now on.
    pub fn subscribe(&self) -> Receiver<Event> {
        let (tx, rx) = sync_channel(QUEUE);
        self.lock().push(tx);
        rx
    }

    /// Send `ev` to every subscriber; one whose queue is full or who went away is dropped.
    pub fn publish(&self, ev: Event) {
        let mut subs = self.lock();
        if subs.is_empty() {
            return;
        }
        subs.retain(|s| match s.try_send(ev.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        });
    }

    /// Subscribers now.
    pub fn subscribers(&self) -> usize {
        self.lock().len()
    }

    /// A new trace subscription (`wasp ctl monitor trace`): the walks of marked packets from
    /// now on. While one exists the workers record them; dropping it ends it.
    pub fn subscribe_traces(self: &Arc<Self>) -> TraceSubscription {
        let (tx, rx) = sync_channel(QUEUE);
        let mut t = self.tracers.lock().unwrap_or_else(|p| p.into_inner());
        let id = self.next_tracer.fetch_add(1, Ordering::Relaxed);
        t.push((id, tx));
        self.tracing.store(t.len(), Ordering::Relaxed);
        TraceSubscription {
            rx,
            id,
            bus: self.clone(),
        }
    }

    /// `true` while someone watches traces (one relaxed load: the workers ask per vector).
    pub fn tracing(&self) -> bool {
        self.tracing.load(Ordering::Relaxed) != 0
    }

    /// Send a traced walk to every trace subscriber; one whose queue is full or who went
    /// away is dropped (a flood of marked packets never holds up a worker).
    pub fn publish_trace(&self, rec: TraceRecord) {
        let mut t = self.tracers.lock().unwrap_or_else(|p| p.into_inner());
        if t.is_empty() {
            return;
        }
        let rec = Arc::new(rec);
        t.retain(|(_, s)| s.try_send(rec.clone()).is_ok());
        self.tracing.store(t.len(), Ordering::Relaxed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SyncSender<Event>>> {
        self.subs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Lines of `log` statements a worker prints and publishes per second, at most
/// ([`LogLimit`]).
pub const LOG_RATE_PER_S: u64 = 10;
/// Lines a worker may print at once after a quiet time.
pub const LOG_BURST: u64 = 50;

/// A token bucket for a worker's `log` lines (the kernel rate-limits its log with
/// net_ratelimit too): [`LOG_RATE_PER_S`] a second, bursts of [`LOG_BURST`]. Lines over the
/// limit are counted, and the next line that passes is preceded by `N log lines suppressed`.
#[derive(Debug, Clone)]
pub struct LogLimit {
    /// Tokens in 1/1e9 of a line (a line costs 1e9).
    tokens: u64,
    last_ns: u64,
    /// Lines refused since the last one that passed.
    suppressed: u64,
}

impl Default for LogLimit {
    fn default() -> Self {
        LogLimit {
            tokens: LOG_BURST * 1_000_000_000,
            last_ns: 0,
            suppressed: 0,
        }
    }
}

impl LogLimit {
    /// May a line go out at `now_ns`? `Some(n)`: yes, after a note that `n` lines (possibly 0)
    /// were suppressed before it; `None`: no (counted).
    pub fn admit(&mut self, now_ns: u64) -> Option<u64> {
        let full = LOG_BURST * 1_000_000_000;
        let elapsed = now_ns.saturating_sub(self.last_ns);
        self.last_ns = self.last_ns.max(now_ns);
        self.tokens = self
            .tokens
            .saturating_add(elapsed.saturating_mul(LOG_RATE_PER_S))
            .min(full);
        if self.tokens < 1_000_000_000 {
            self.suppressed += 1;
            return None;
        }
        self.tokens -= 1_000_000_000;
        Some(std::mem::take(&mut self.suppressed))
    }

    /// Lines refused since the last one that passed.
    pub fn suppressed(&self) -> u64 {
        self.suppressed
    }
}

/// Publish a worker's `log` lines of one vector (`lines`, as the kernel log shows them) as
/// `log` events and print them in the daemon's log, within `limit`; returns the lines
/// refused.
pub fn publish_logs(bus: &EventBus, limit: &mut LogLimit, lines: &[String], now_ns: u64) -> u64 {
    let mut refused = 0;
    for line in lines {
        match limit.admit(now_ns) {
            Some(n) => {
                if n > 0 {
                    let text = format!("{n} log lines suppressed");
                    tracing::warn!("{text}");
                    bus.publish(Event {
                        kind: "log",
                        text,
                        json: None,
                    });
                }
                tracing::info!(target: "wasp::log", "{line}");
                bus.publish(Event {
                    kind: "log",
                    text: line.clone(),
                    json: None,
                });
            }
            None => refused += 1,
        }
    }
    refused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_are_limited_to_a_burst_then_the_rate_and_suppression_is_reported() {
        let bus = EventBus::default();
        let rx = bus.subscribe();
        let mut lim = LogLimit::default();
        let lines: Vec<String> = (0..60).map(|i| format!("x {i}")).collect();
        assert_eq!(publish_logs(&bus, &mut lim, &lines, 0), 10);
        assert_eq!(lim.suppressed(), 10);
        // 0.5 s later: 5 tokens.
        let more: Vec<String> = (0..7).map(|i| format!("y {i}")).collect();
        assert_eq!(publish_logs(&bus, &mut lim, &more, 500_000_000), 2);
        let got: Vec<String> = rx.try_iter().map(|e| e.text).collect();
        assert_eq!(got.len(), 50 + 1 + 5);
        assert_eq!(got[49], "x 49");
        assert_eq!(got[50], "10 log lines suppressed");
        assert_eq!(got[51], "y 0");
        assert_eq!(lim.suppressed(), 2);
    }

    #[test]
    fn fan_out_and_drop_gone() {
        let bus = EventBus::default();
        let a = bus.subscribe();
        let b = bus.subscribe();
        bus.publish(Event {
            kind: "plugin",
            text: "idletimer x expired".into(),
            json: None,
        });
        assert_eq!(a.recv().unwrap().text, "idletimer x expired");
        assert_eq!(b.recv().unwrap().kind, "plugin");
        drop(b);
        bus.publish(Event {
            kind: "ruleset",
            text: "x".into(),
            json: None,
        });
        assert_eq!(bus.subscribers(), 1);
        assert_eq!(a.recv().unwrap().kind, "ruleset");
    }
}
