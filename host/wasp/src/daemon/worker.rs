//! One worker: its ports and its data path ([`Datapath`]: engine, plugin instances, the way
//! out), and the loop around it.
//!
//! Per loop: run the jobs the control side queued (a new ruleset, counter reads), advance the
//! plugins' clocks (timers fire even when no packet comes), wait for a batch of frames (up to
//! [`RX_BATCH`], at most [`POLL_TIMEOUT`], or until a job is posted: the mailbox wakes the
//! ports with a `wasp_io::Waker`), run each input device's frames in vectors of up to
//! [`MAX_VECTOR`] through [`Datapath::vector`] (the loop `wasp replay` runs too) with the
//! ports as their exit, send it all in one batch. Nothing here takes a lock per packet.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wasp_core::{MAX_VECTOR, Outcome, Packet, TraceEvent, TraceSink};
use wasp_gateway::{Fate, Forwarder, Send};
use wasp_io::{Frame, PortGroup, PortStats, TxSide};

pub use crate::datapath::Bundle;
use crate::datapath::{Datapath, Exit};
use crate::port_exit::PortExit;

use super::events::{Event, EventBus, LogLimit, TraceRecord, publish_logs};
use super::mailbox::Mailbox;
use super::stats::{DropReason, WorkerStats};
use crate::trace::{Marked, describe_packet};

/// Longest wait for frames before the loop comes round again (jobs, timers, shutdown).
pub const POLL_TIMEOUT: Duration = Duration::from_millis(10);

/// Most frames one turn of the loop takes from its ports (the bare receive loop's batch,
/// `io-floor`): run as vectors of [`MAX_VECTOR`], with one wait, one clock read and one
/// flush of the sends for all of them.
pub const RX_BATCH: usize = 4 * MAX_VECTOR;

/// The clocks of the data path: nanoseconds since the daemon started (the engine's packet
/// clock: set element timeouts, plugin timers on the monotonic clock).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
    /// Unix time in ns when the clock read 0 (for `meta time`, `meta day`, `meta hour`).
    wall_at_start_ns: u64,
}

impl Clock {
    /// A clock reading 0 now.
    pub fn new() -> Self {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        Clock {
            start: Instant::now(),
            wall_at_start_ns: wall,
        }
    }

    /// Unix time in ns when the clock read 0 ([`wasp_core::Engine::set_wall_clock_epoch`]).
    pub fn wall_epoch_ns(&self) -> u64 {
        self.wall_at_start_ns
    }

    /// Nanoseconds since [`Clock::new`].
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// What jobs see of a worker.
pub struct WorkerCtx {
    /// Worker index.
    pub id: usize,
    /// Its data path: the running ruleset, its plugin instances, the way out.
    pub dp: Datapath,
    /// Device names by port index.
    pub ports: Vec<String>,
    /// Port counts as of the last loop that served jobs.
    pub port_counts: Vec<PortStats>,
}

/// What a worker shares with the control side.
#[derive(Debug, Clone)]
pub struct WorkerLinks {
    /// Jobs for it.
    pub mailbox: Arc<Mailbox>,
    /// Its counts.
    pub stats: Arc<WorkerStats>,
    /// Where its plugins' events go.
    pub events: Arc<EventBus>,
    /// Set to stop every worker.
    pub stop: Arc<AtomicBool>,
    /// The data path's clock.
    pub clock: Clock,
    /// What it publishes for metrics every [`super::metrics::PUBLISH_EVERY_NS`].
    pub published: Arc<super::metrics::Published>,
}

/// A worker and its loop.
pub struct Worker<P: PortGroup> {
    ctx: WorkerCtx,
    ports: P,
    mailbox: Arc<Mailbox>,
    stats: Arc<WorkerStats>,
    events: Arc<EventBus>,
    stop: Arc<AtomicBool>,
    clock: Clock,
    /// Reused per vector: the frames of one port.
    idx: Vec<usize>,
    /// The rate limit of `log` lines.
    log_limit: LogLimit,
    /// Where it publishes for metrics, and when it last did (data-path clock, ns).
    published: Arc<super::metrics::Published>,
    published_at: Option<u64>,
    /// Its recording of traced walks.
    tracing: Tracing,
}

impl<P: PortGroup> Worker<P> {
    /// A worker over `ports` running `bundle`.
    pub fn new(
        id: usize,
        ports: P,
        bundle: Bundle,
        forwarder: Forwarder,
        links: WorkerLinks,
    ) -> Self {
        let WorkerLinks {
            mailbox,
            stats,
            events,
            stop,
            clock,
            published,
        } = links;
        let names: Vec<String> = ports.ports().iter().map(|p| p.name.clone()).collect();
        stats.generation.store(bundle.generation, Ordering::Relaxed);
        // A job ends the worker's wait for frames; without a waker (no descriptor left) the
        // worker still serves it within its poll timeout.
        let mut ports = ports;
        match wasp_io::Waker::new() {
            Ok(w) => {
                ports.set_waker(&w);
                mailbox.set_waker(w);
            }
            Err(e) => tracing::warn!("worker {id}: no waker ({e}): jobs wait for the poll timeout"),
        }
        Worker {
            ctx: WorkerCtx {
                id,
                dp: Datapath::new(bundle, forwarder),
                port_counts: vec![PortStats::default(); names.len()],
                ports: names,
            },
            ports,
            mailbox,
            stats,
            events,
            stop,
            clock,
            idx: Vec::with_capacity(RX_BATCH),
            log_limit: LogLimit::default(),
            published,
            published_at: None,
            tracing: Tracing {
                worker: id as u64,
                ..Tracing::default()
            },
        }
    }

    /// Loop until the stop flag is set; the vector in flight finishes and is sent first.
    /// Returns the worker's context (final counts are read from it and its ports).
    ///
    /// # Errors
    /// A port that failed for good (its text); the worker stops.
    pub fn run(mut self) -> Result<(WorkerCtx, Vec<PortStats>), String> {
        while !self.stop.load(Ordering::Relaxed) {
            self.step(POLL_TIMEOUT)?;
        }
        // Jobs queued at the end still get an answer.
        self.serve_jobs();
        self.ports.flush().map_err(|e| e.to_string())?;
        let counts = self.ports.stats();
        Ok((self.ctx, counts))
    }

    fn serve_jobs(&mut self) {
        if !self.mailbox.pending() {
            return;
        }
        // Port counts cost a syscall per port (PACKET_STATISTICS): read them only for jobs.
        self.ctx.port_counts = self.ports.stats();
        let before = self.ctx.dp.generation;
        self.mailbox.serve(&mut self.ctx);
        if self.ctx.dp.generation != before {
            self.stats
                .generation
                .store(self.ctx.dp.generation, Ordering::Relaxed);
        }
    }

    /// One turn of the loop: jobs, timers, one batch of frames.
    ///
    /// # Errors
    /// As [`Worker::run`].
    pub fn step(&mut self, timeout: Duration) -> Result<usize, String> {
        self.serve_jobs();
        // Timers fall due whether or not packets come.
        let now = self.clock.now_ns();
        self.ctx.dp.advance(now);
        self.publish(now);
        self.publish_events();
        let Worker {
            ctx,
            ports,
            stats,
            idx,
            clock,
            events,
            log_limit,
            tracing,
            ..
        } = self;
        let mut err = None;
        // Wait for one frame, take up to a vector: waiting for a whole vector stalls when a
        // TPACKET_V3 block holds fewer frames and the kernel, its ring full, retires no block
        // to wake us (measured by perf's e2e: 93 % dropped with min = MAX_VECTOR).
        let n = ports
            .poll_tx(1, RX_BATCH, timeout, &mut |frames, tx| {
                let now = clock.now_ns();
                if let Err(e) =
                    process(ctx, frames, tx, now, stats, idx, log_limit, events, tracing)
                {
                    err = Some(e);
                }
            })
            .map_err(|e| e.to_string())?;
        self.ports.flush().map_err(|e| e.to_string())?;
        self.publish_events();
        match err {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    /// Publish the counts metrics read, every [`super::metrics::PUBLISH_EVERY_NS`] (port
    /// counts cost a system call per port).
    fn publish(&mut self, now: u64) {
        if self
            .published_at
            .is_some_and(|t| now.saturating_sub(t) < super::metrics::PUBLISH_EVERY_NS)
        {
            return;
        }
        self.published_at = Some(now);
        let ports = self
            .ctx
            .ports
            .iter()
            .cloned()
            .zip(self.ports.stats())
            .collect();
        self.published
            .store(super::metrics::view(ports, &self.ctx.dp));
    }

    /// The plugin runtime's events (failures, back-offs, swaps) to the daemon's log and to
    /// `wasp ctl monitor`.
    fn publish_events(&mut self) {
        if let Some(rt) = self.ctx.dp.runtime.as_mut() {
            for e in rt.take_events() {
                tracing::info!(target: "wasp::plugin", worker = self.tracing.worker, "{}", e.text);
                self.events.publish(Event {
                    kind: "plugin",
                    text: e.text,
                    json: None,
                });
            }
        }
    }

    /// The worker's context (for tests).
    pub fn ctx(&self) -> &WorkerCtx {
        &self.ctx
    }

    /// Its ports (for tests).
    pub fn ports(&self) -> &P {
        &self.ports
    }
}

/// A worker's recording of traced walks (`wasp ctl monitor trace`), used while someone
/// watches.
#[derive(Default)]
struct Tracing {
    marked: Marked,
    /// The worker's index (bits 24-31 of its 32-bit trace ids, as nft prints 8 hex digits).
    worker: u64,
    /// Walks recorded so far (the low 24 bits of the trace ids).
    next: u64,
}

/// Where a vector's results go in the daemon: the ports ([`PortExit`]), `log` lines to the
/// event bus, traced walks to `wasp ctl monitor trace`; the counts are added to the worker's
/// statistics once per vector.
struct DaemonExit<'a> {
    port: PortExit<'a>,
    stats: &'a WorkerStats,
    events: &'a EventBus,
    log_limit: &'a mut LogLimit,
    /// Set while someone watches traces.
    trace: Option<&'a mut Tracing>,
    /// The input device, the generation and the time of the vector.
    dev: &'a str,
    generation: u64,
    now: u64,
}

impl Exit for DaemonExit<'_> {
    fn trace(&mut self) -> Option<&mut dyn TraceSink> {
        self.trace
            .as_deref_mut()
            .map(|t| &mut t.marked as &mut dyn TraceSink)
    }

    fn log(&mut self, lines: Vec<String>, now_ns: u64) {
        let refused = publish_logs(self.events, self.log_limit, &lines, now_ns);
        WorkerStats::add(&self.stats.log_suppressed, refused);
    }

    /// One copy into the send buffer, rewritten there.
    fn send(&mut self, _: usize, s: &Send, frame: &[u8]) {
        self.port.send(s, frame);
    }

    #[inline]
    fn done(&mut self, i: usize, p: &Packet<'_>, _: &Outcome, _: &[u8], fate: Fate) {
        self.port.done(fate);
        if self.trace.is_some() {
            self.traced(i, p);
        }
    }
}

impl DaemonExit<'_> {
    /// What packet `i` logged and walked, while someone watches traces.
    #[cold]
    fn traced(&mut self, i: usize, p: &Packet<'_>) {
        let Some(t) = self.trace.as_deref_mut() else {
            return;
        };
        // While tracing, the ingress hook's `log` lines come with the walks.
        let (logs, walk) = t.marked.take_packet(i);
        if !logs.is_empty() {
            WorkerStats::add(&self.stats.logged, logs.len() as u64);
            let refused = publish_logs(self.events, self.log_limit, &logs, self.now);
            WorkerStats::add(&self.stats.log_suppressed, refused);
        }
        if walk.iter().any(|e| !matches!(e, TraceEvent::Log { .. })) {
            t.next += 1;
            self.events.publish_trace(TraceRecord {
                generation: self.generation,
                id: (t.worker & 0xff) << 24 | (t.next & 0xff_ffff),
                packet: describe_packet(self.dev, p.frame, &p.meta),
                events: walk,
            });
        }
    }
}

/// What runs a batch's vectors through the data path shares.
struct Vectors<'a> {
    stats: &'a WorkerStats,
    events: &'a EventBus,
    log_limit: &'a mut LogLimit,
    /// Set while someone watches traces.
    tracing: Option<&'a mut Tracing>,
    now: u64,
}

impl Vectors<'_> {
    /// One vector of `frames` (at most [`MAX_VECTOR`]) from port `port` through the data
    /// path; its counts go to the worker's statistics.
    fn run<'f>(
        &mut self,
        ctx: &mut WorkerCtx,
        tx: &mut dyn TxSide,
        port: usize,
        frames: impl Iterator<Item = &'f [u8]>,
    ) {
        let stats = self.stats;
        let WorkerCtx { dp, ports, .. } = ctx;
        let dev: &str = ports.get(port).map_or("", String::as_str);
        WorkerStats::add(&stats.vectors, 1);
        let mut exit = DaemonExit {
            port: PortExit::new(tx, ports),
            stats,
            events: self.events,
            log_limit: &mut *self.log_limit,
            trace: self.tracing.as_deref_mut(),
            dev,
            generation: dp.generation,
            now: self.now,
        };
        let c = dp.vector(dev, frames, self.now, &mut exit);
        if let Some(t) = exit.trace.as_deref_mut() {
            t.marked.clear();
        }
        let e = exit.port.counts;
        WorkerStats::add(&stats.packets, c.packets);
        WorkerStats::add(&stats.bytes, c.bytes);
        WorkerStats::add(&stats.malformed, c.malformed);
        WorkerStats::add(&stats.accepted, c.accepted);
        WorkerStats::add(&stats.logged, c.logged);
        WorkerStats::add(&stats.local, e.local);
        WorkerStats::add(&stats.transmitted, e.sent);
        WorkerStats::add(&stats.rejects, e.rejects);
        for (reason, n) in DropReason::ALL.iter().zip(e.drops) {
            stats.drop(*reason, n);
        }
    }
}

/// Classify one batch of frames (possibly from several ports): each input device's frames
/// run as one vector through the data path ([`Datapath::vector`]), and what leaves is written
/// straight into its port's send buffer ([`TxSide::queue_with`]: a forwarded frame is copied
/// once, from the receive ring, and rewritten there).
#[allow(clippy::too_many_arguments)]
fn process(
    ctx: &mut WorkerCtx,
    frames: &[Frame<'_>],
    tx: &mut dyn TxSide,
    now: u64,
    stats: &WorkerStats,
    idx: &mut Vec<usize>,
    log_limit: &mut LogLimit,
    events: &EventBus,
    tracing: &mut Tracing,
) -> Result<(), String> {
    if frames.is_empty() {
        return Ok(());
    }
    let traced = events.tracing();
    let mut on = Vectors {
        stats,
        events,
        log_limit,
        tracing: traced.then_some(tracing),
        now,
    };
    // Most batches come from one port: its frames are the vectors as they lie.
    let port = frames[0].port;
    if frames.iter().all(|f| f.port == port) {
        for vector in frames.chunks(MAX_VECTOR) {
            on.run(ctx, tx, port, vector.iter().map(|f| f.data));
        }
        return Ok(());
    }
    // Ports present in this batch, each once.
    let mut done = 0u64;
    for first in 0..frames.len() {
        let port = frames[first].port;
        if port < 64 && done & (1 << port) != 0 {
            continue;
        }
        if port < 64 {
            done |= 1 << port;
        } else if frames[..first].iter().any(|f| f.port == port) {
            continue;
        }
        idx.clear();
        idx.extend((first..frames.len()).filter(|&i| frames[i].port == port));
        for vector in idx.chunks(MAX_VECTOR) {
            on.run(ctx, tx, port, vector.iter().map(|&i| frames[i].data));
        }
    }
    Ok(())
}
