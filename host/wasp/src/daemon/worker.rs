//! One worker: its ports, its engine and its plugin instances, and the loop that moves
//! vectors of packets from receive through the hooks to send.
//!
//! Per loop: run the jobs the control side queued (a new ruleset, counter reads), advance the
//! plugins' clocks (timers fire even when no packet comes), wait for a batch of frames (up to
//! [`MAX_VECTOR`], at most [`POLL_TIMEOUT`]), classify them per input device as one vector,
//! queue what leaves, send it all in one batch. Nothing here takes a lock per packet.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wasp_core::forward::{Fate, Forwarder, Send, SendKind};
use wasp_core::{DupCopies, Engine, Extensions, FinalVerdict, MAX_VECTOR, Outcome, Packet};
use wasp_plugin::Runtime;

use super::events::{Event, EventBus, LogLimit, publish_logs};
use super::mailbox::Mailbox;
use super::ports::{PortCounts, Ports, RxFrame, TxQueue};
use super::stats::{DropReason, WorkerStats};

/// Longest wait for frames before the loop comes round again (jobs, timers, shutdown).
pub const POLL_TIMEOUT: Duration = Duration::from_millis(10);

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

/// What a ruleset generation gives one worker: its engine and, when the ruleset uses
/// plugins or counters, its plugin instances.
pub struct Bundle {
    /// The compiled ruleset.
    pub engine: Engine,
    /// Plugin instances configured for `engine`'s use sites.
    pub runtime: Option<Runtime>,
    /// The ruleset generation.
    pub generation: u64,
    /// Conntrack and flowtables shared by the workers, when the ruleset takes the IP path.
    pub netfilter: Option<wasp_core::forward::Netfilter>,
}

/// Tell `engine` the gateway's device addresses (`meta pkttype` host or other).
fn device_macs(engine: &mut Engine, fw: &Forwarder) {
    for d in fw.gateway().map_or(&[][..], |g| g.devices()) {
        if let Some(mac) = d.mac {
            engine.set_device_mac(&d.name, mac);
        }
    }
}

/// What jobs see of a worker.
pub struct WorkerCtx {
    /// Worker index.
    pub id: usize,
    /// The running ruleset.
    pub engine: Engine,
    /// Its plugin instances.
    pub runtime: Option<Runtime>,
    /// Ruleset generation.
    pub generation: u64,
    /// Device names by port index.
    pub ports: Vec<String>,
    /// Port counts as of the last loop that served jobs.
    pub port_counts: Vec<PortCounts>,
    /// The way out (`fwd`, `dup`, the gateway, egress hooks): this worker's copy.
    pub forwarder: Forwarder,
}

impl WorkerCtx {
    /// Switch to `b` (at a vector boundary). The old plugin instances are dropped here.
    pub fn install(&mut self, b: Bundle) {
        self.engine = b.engine;
        device_macs(&mut self.engine, &self.forwarder);
        self.runtime = b.runtime;
        self.generation = b.generation;
        self.forwarder.set_netfilter(b.netfilter);
    }
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
}

/// A worker and its loop.
pub struct Worker<P: Ports> {
    ctx: WorkerCtx,
    ports: P,
    mailbox: Arc<Mailbox>,
    stats: Arc<WorkerStats>,
    events: Arc<EventBus>,
    stop: Arc<AtomicBool>,
    clock: Clock,
    /// Reused per vector.
    out: Vec<Outcome>,
    idx: Vec<usize>,
    sends: Vec<Send>,
    /// `log` lines of the vector in flight, and their rate limit.
    logs: crate::trace::LogLines,
    log_limit: LogLimit,
}

impl<P: Ports> Worker<P> {
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
        } = links;
        let names = ports.names();
        stats.generation.store(bundle.generation, Ordering::Relaxed);
        let mut forwarder = forwarder;
        forwarder.set_netfilter(bundle.netfilter);
        let mut engine = bundle.engine;
        device_macs(&mut engine, &forwarder);
        Worker {
            ctx: WorkerCtx {
                id,
                engine,
                runtime: bundle.runtime,
                generation: bundle.generation,
                port_counts: vec![PortCounts::default(); names.len()],
                ports: names,
                forwarder,
            },
            ports,
            mailbox,
            stats,
            events,
            stop,
            clock,
            out: Vec::with_capacity(MAX_VECTOR),
            idx: Vec::with_capacity(MAX_VECTOR),
            sends: Vec::with_capacity(MAX_VECTOR),
            logs: crate::trace::LogLines::default(),
            log_limit: LogLimit::default(),
        }
    }

    /// Loop until the stop flag is set; the vector in flight finishes and is sent first.
    /// Returns the worker's context (final counts are read from it and its ports).
    ///
    /// # Errors
    /// A port that failed for good (its text); the worker stops.
    pub fn run(mut self) -> Result<(WorkerCtx, Vec<PortCounts>), String> {
        while !self.stop.load(Ordering::Relaxed) {
            self.step(POLL_TIMEOUT)?;
        }
        // Jobs queued at the end still get an answer.
        self.serve_jobs();
        self.ports.flush()?;
        let counts = self.ports.counts();
        Ok((self.ctx, counts))
    }

    fn serve_jobs(&mut self) {
        if !self.mailbox.pending() {
            return;
        }
        // Port counts cost a syscall per port (PACKET_STATISTICS): read them only for jobs.
        self.ctx.port_counts = self.ports.counts();
        let before = self.ctx.generation;
        self.mailbox.serve(&mut self.ctx);
        if self.ctx.generation != before {
            self.stats
                .generation
                .store(self.ctx.generation, Ordering::Relaxed);
        }
    }

    /// One turn of the loop: jobs, timers, one batch of frames.
    ///
    /// # Errors
    /// As [`Worker::run`].
    pub fn step(&mut self, timeout: Duration) -> Result<usize, String> {
        self.serve_jobs();
        let now = self.clock.now_ns();
        if let Some(rt) = self.ctx.runtime.as_mut() {
            // Timers fall due whether or not packets come.
            rt.advance(now);
        }
        self.publish_events();
        let Worker {
            ctx,
            ports,
            stats,
            out,
            idx,
            sends,
            clock,
            events,
            logs,
            log_limit,
            ..
        } = self;
        let mut err = None;
        // Wait for one frame, take up to a vector: waiting for a whole vector stalls when a
        // TPACKET_V3 block holds fewer frames and the kernel, its ring full, retires no block
        // to wake us (measured by perf's e2e: 93 % dropped with min = MAX_VECTOR).
        let n = ports.poll(1, MAX_VECTOR, timeout, &mut |frames, tx| {
            let now = clock.now_ns();
            let mut bufs = Bufs {
                out,
                idx,
                sends,
                logs,
                log_limit,
                events,
            };
            if let Err(e) = process(ctx, frames, tx, now, stats, &mut bufs) {
                err = Some(e);
            }
        })?;
        self.ports.flush()?;
        self.publish_events();
        match err {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    fn publish_events(&mut self) {
        if let Some(rt) = self.ctx.runtime.as_mut() {
            for e in rt.take_events() {
                self.events.publish(Event {
                    kind: "plugin",
                    text: e.text,
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

/// Buffers reused across vectors.
struct Bufs<'a> {
    out: &'a mut Vec<Outcome>,
    idx: &'a mut Vec<usize>,
    sends: &'a mut Vec<Send>,
    logs: &'a mut crate::trace::LogLines,
    log_limit: &'a mut LogLimit,
    events: &'a EventBus,
}

/// Classify one batch of frames (possibly from several ports): each input device's frames
/// run as one vector through its ingress hook; then each packet takes the way out
/// ([`Forwarder::after_ingress`]: `dup` copies, `fwd`, the gateway, egress hooks) and what
/// leaves is written straight into its port's send buffer ([`TxQueue::queue_with`]: a
/// forwarded frame is copied once, from the receive ring, and rewritten there).
fn process(
    ctx: &mut WorkerCtx,
    frames: &[RxFrame<'_>],
    tx: &mut dyn TxQueue,
    now: u64,
    stats: &WorkerStats,
    bufs: &mut Bufs<'_>,
) -> Result<(), String> {
    if frames.is_empty() {
        return Ok(());
    }
    let Bufs {
        out,
        idx,
        sends,
        logs,
        log_limit,
        events,
    } = bufs;
    let WorkerCtx {
        engine,
        runtime,
        ports,
        forwarder,
        ..
    } = ctx;
    WorkerStats::add(&stats.vectors, 1);
    // Ports present in this batch, each once (a batch usually holds one).
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
        let dev: &str = ports.get(port).map_or("", String::as_str);
        let packets: Vec<Packet<'_>> = idx
            .iter()
            .map(|&i| Packet {
                frame: frames[i].data,
                meta: wasp_wire::parse(frames[i].data),
                iifname: dev,
                mark: 0,
                oifname: "",
                ct: wasp_core::CtMeta::NONE,
                ct_detail: None,
                route: None,
            })
            .collect();
        out.clear();
        out.resize(packets.len(), Outcome::unseen(0));
        // `log` lines come through a sink that wants only them (no cost without `log`).
        let sink = engine
            .has_logs()
            .then_some(&mut **logs as &mut dyn wasp_core::TraceSink);
        match runtime.as_mut() {
            Some(rt) => {
                engine.ingress_ext(dev, &packets, now, out, sink, rt as &mut dyn Extensions)
            }
            None => engine.ingress(dev, &packets, now, out, sink),
        }
        if !logs.lines.is_empty() {
            logs.lines.sort_by_key(|l| l.0);
            let lines: Vec<String> = logs.lines.drain(..).map(|l| l.1).collect();
            WorkerStats::add(&stats.logged, lines.len() as u64);
            let refused = publish_logs(events, log_limit, &lines, now);
            WorkerStats::add(&stats.log_suppressed, refused);
        }
        let (mut bytes, mut malformed) = (0u64, 0u64);
        for p in &packets {
            bytes += p.frame.len() as u64;
            malformed += u64::from(p.meta.malformed.is_some());
        }
        WorkerStats::add(&stats.packets, packets.len() as u64);
        WorkerStats::add(&stats.bytes, bytes);
        WorkerStats::add(&stats.malformed, malformed);
        // The frames as plugin statements edited them (made before the way out runs the
        // egress hooks, which make edits of their own).
        // `dup` copies taken before a later edit: the packet as it was at the `dup`.
        let (edited, dups) = if engine.edits().is_empty() {
            (Vec::new(), DupCopies::default())
        } else {
            (
                wasp_core::edited_frames(packets.iter().map(|p| p.frame), engine.edits()),
                DupCopies::new(
                    packets.iter().map(|p| p.frame),
                    engine.edits(),
                    engine.dup_points(),
                ),
            )
        };
        let (mut accepted, mut local, mut verdict_drops, mut sent) = (0u64, 0u64, 0u64, 0u64);
        for (k, pkt) in packets.iter().enumerate() {
            let o = out[k];
            if o.verdict == FinalVerdict::Accept {
                accepted += 1;
            }
            let frame = edited
                .get(k)
                .and_then(Option::as_deref)
                .unwrap_or(pkt.frame);
            let ext = runtime.as_mut().map(|r| r as &mut dyn Extensions);
            match forwarder.after_ingress(engine, ext, dev, frame, dups.of(k), &o, now, sends) {
                Fate::Local => local += 1,
                Fate::Sent | Fate::Replied => {}
                Fate::Dropped => verdict_drops += 1,
                Fate::Lost(l) => stats.drop(DropReason::Out(l), 1),
            }
            // What this packet sends, while its frame is at hand: one copy into the send
            // buffer, rewritten there.
            for s in sends.drain(..) {
                if s.kind == SendKind::Reject {
                    WorkerStats::add(&stats.rejects, 1);
                }
                match ports.iter().position(|p| **p == *s.dev) {
                    Some(p) => {
                        let len = s.body.len(frame);
                        if tx.queue_with(p, len, &mut |buf| s.body.write(frame, buf)) {
                            sent += 1;
                        } else {
                            stats.drop(DropReason::TxFull, 1);
                        }
                    }
                    None => stats.drop(DropReason::NoPort, 1),
                }
            }
        }
        // `log` lines of the IP hooks the gateway ran for these packets.
        let ip_lines = engine.take_hook_logs();
        if !ip_lines.is_empty() {
            WorkerStats::add(&stats.logged, ip_lines.len() as u64);
            let refused = publish_logs(events, log_limit, &ip_lines, now);
            WorkerStats::add(&stats.log_suppressed, refused);
        }
        WorkerStats::add(&stats.accepted, accepted);
        WorkerStats::add(&stats.local, local);
        stats.drop(DropReason::Verdict, verdict_drops);
        WorkerStats::add(&stats.transmitted, sent);
    }
    Ok(())
}
