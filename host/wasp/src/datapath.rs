//! The data path of one worker, the one loop that `wasp run` and `wasp replay` both run.
//!
//! A [`Datapath`] owns what a worker needs to process a vector: the compiled ruleset
//! ([`Engine`]), its plugin instances ([`Runtime`]), the way out ([`Forwarder`]: `fwd`, `dup`,
//! `reject` replies, the gateway with conntrack, NAT, the flowtables and the IP hooks, the
//! egress hooks) and the buffers of one hook call ([`HookResult`], [`WayOut`]). [`build`] makes
//! its ruleset part from the same inputs for both commands. Per vector
//! ([`Datapath::vector`]):
//!
//! 1. every frame is parsed once ([`wasp_wire::parse`]) into a [`Packet`] entering on the
//!    vector's device;
//! 2. the vector runs the device's ingress hook ([`Engine::run`]) at `now_ns`, the plugins
//!    serving their use sites;
//! 3. each packet's frame is made as its walk left it (plugin statements' edits) and takes the
//!    way out ([`Forwarder::after_ingress`]), which appends the frames to send;
//! 4. what leaves and what became of each packet go to the caller's [`Exit`]: the daemon's
//!    ports and statistics, or replay's captures, verdict lines and summary.
//!
//! The caller brings the clock (`now_ns`: the wall clock since the daemon started, or a
//! capture's timestamps) and the frames (a port's receive ring, or a capture file); nothing
//! else differs between the two commands.

use std::sync::Arc;

use wasp_conntrack::Conntrack;
use wasp_core::carry::CounterCarry;
use wasp_core::{Engine, Extensions, FinalVerdict, HookResult, Outcome, Packet, Steal, TraceSink};
use wasp_gateway::{Decided, Fate, FlowHit, Forwarder, Netfilter, Send, WayOut};
use wasp_plugin::{HostConfig, PluginHost, Runtime, SharedTimers};
use wasp_ruleset::Ruleset;

use crate::error::Error;
use crate::plugins::{PluginCache, build_runtime, carry_counts};
use crate::trace::LogLines;

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
    pub netfilter: Option<Netfilter>,
    /// The counts this bundle's counters continue from the program it replaces (moved by
    /// [`Datapath::install`] between two vectors: exact per worker).
    pub carry: Arc<CounterCarry>,
}

/// The plugin host that instantiates a build's plugins.
pub enum HostSlot<'a> {
    /// The daemon's.
    Given(&'a PluginHost),
    /// One made with these limits by the first bundle that needs plugins (a replay of a
    /// ruleset without plugins or counters starts none).
    Lazy(HostConfig, Option<PluginHost>),
}

impl HostSlot<'_> {
    /// The host, made now if it is the first use of a lazy one.
    ///
    /// # Errors
    /// [`Error::Plugin`] when the plugin host cannot start.
    pub fn get(&mut self) -> Result<&PluginHost, Error> {
        match self {
            HostSlot::Given(h) => Ok(h),
            HostSlot::Lazy(config, slot) => match slot {
                Some(h) => Ok(h),
                None => {
                    let h = PluginHost::new(config.clone())
                        .map_err(|e| Error::Plugin(e.to_string()))?;
                    Ok(slot.insert(h))
                }
            },
        }
    }

    /// The host, if one is given or was made.
    pub fn made(&self) -> Option<&PluginHost> {
        match self {
            HostSlot::Given(h) => Some(h),
            HostSlot::Lazy(_, slot) => slot.as_ref(),
        }
    }
}

/// What the workers of one ruleset generation share, and where their bundles come from.
pub struct Shared<'a> {
    /// The plugin host that instantiates the plugins.
    pub host: HostSlot<'a>,
    /// Compiled plugins by component, and the search for bundled ones.
    pub cache: &'a mut PluginCache,
    /// One timer per key across the workers (an IDLETIMER label expires once); `None` for a
    /// single worker of its own (replay).
    pub timers: Option<Arc<SharedTimers>>,
    /// The `limit` buckets and `quota` counts of the generation (one across the workers, as
    /// in the kernel); `None`: the first engine's own.
    pub stateful: Option<Arc<wasp_core::Stateful>>,
    /// The connection table (kept across generations by the daemon).
    pub conntrack: Arc<Conntrack>,
    /// The previous generation's netfilter state: flowtables the ruleset still declares keep
    /// their flows.
    pub prev: Option<Netfilter>,
    /// Where flowtable events go (the daemon's event bus).
    pub flow_events: Option<Arc<dyn Fn(String) + std::marker::Send + Sync>>,
    /// The generation's conntrack and flowtables, made by the first bundle that needs them.
    pub netfilter: Option<Netfilter>,
}

/// The hash seed of replays and checks, fixed so that their output is reproducible (a running
/// daemon draws its seeds at random at start).
pub const REPLAY_SEED: u64 = 0x5eed_c0de_1234_5678;

/// The daemon's connection-table seed: drawn at random, unless the environment variable
/// `WASP_SEED` gives one (a number: tests that compare a daemon with a replay set
/// [`REPLAY_SEED`]).
pub fn daemon_seed() -> u64 {
    match std::env::var("WASP_SEED").ok().and_then(|v| v.parse().ok()) {
        Some(s) => s,
        None => wasp_conntrack::Config::default().seed,
    }
}

impl<'a> Shared<'a> {
    /// What a single worker of its own shares (`wasp replay`, `wasp check`): a plugin host
    /// made with `host` limits when a plugin is needed, a new connection table seeded with
    /// [`REPLAY_SEED`] (the same NAT ports at every run), the first engine's `limit`/`quota`
    /// state.
    pub fn single(cache: &'a mut PluginCache, host: HostConfig) -> Self {
        Shared {
            host: HostSlot::Lazy(host, None),
            cache,
            timers: None,
            stateful: None,
            conntrack: Arc::new(Conntrack::new(wasp_conntrack::Config {
                seed: REPLAY_SEED,
                ..wasp_conntrack::Config::default()
            })),
            prev: None,
            flow_events: None,
            netfilter: None,
        }
    }
}

/// The clocks a bundle's engine and plugins read.
#[derive(Debug, Clone, Copy, Default)]
pub struct Clocks {
    /// When the ruleset was loaded, on the packet clock (set element timeouts count from it);
    /// `None`: the first packet's time (replay).
    pub epoch_ns: Option<u64>,
    /// Unix time in ns when the packet clock read 0 (`meta time`, `meta day`, `meta hour`);
    /// 0 when the packet clock is Unix time (a capture's timestamps).
    pub wall_epoch_ns: u64,
    /// The packet clock now (the plugins' clock starts there).
    pub now_ns: u64,
}

/// Build worker `worker`'s bundle of `ruleset`, generation `generation`: compile it, give the
/// engine its clocks, its number (`meta cpu`), the generation's shared `limit`/`quota` state
/// and, when the ruleset takes the IP path and `ip_path` allows it, the generation's
/// conntrack and flowtables (made here for the first worker); load and configure its plugins
/// when the ruleset declares some or counts.
///
/// # Errors
/// [`Error::Ruleset`] for a ruleset that does not compile or whose plugins refuse their
/// arguments; [`Error::Plugin`] when a plugin cannot be instantiated.
pub fn build(
    ruleset: &Ruleset,
    worker: usize,
    generation: u64,
    clocks: Clocks,
    ip_path: bool,
    shared: &mut Shared<'_>,
) -> Result<Bundle, Error> {
    let mut engine = Engine::compile(ruleset)?;
    match &shared.stateful {
        Some(s) => {
            engine.share_stateful(Arc::clone(s));
        }
        None => shared.stateful = Some(engine.stateful()),
    }
    if let Some(e) = clocks.epoch_ns {
        engine.set_epoch(e);
    }
    engine.set_wall_clock_epoch(clocks.wall_epoch_ns);
    engine.set_cpu(u32::try_from(worker).unwrap_or(u32::MAX));
    if ip_path && engine.uses_ip_path() {
        let nf = match &shared.netfilter {
            Some(nf) => nf.clone(),
            None => {
                let nf = Netfilter::new(
                    shared.conntrack.clone(),
                    engine.flowtables(),
                    shared.prev.as_ref(),
                    shared.flow_events.clone(),
                );
                shared.netfilter = Some(nf.clone());
                nf
            }
        };
        engine.set_conn_count(nf.conn_count());
    }
    let needs = engine.has_counters() || ruleset.tables.iter().any(|t| !t.plugins.is_empty());
    let runtime = if needs {
        let share = shared.timers.clone().map(|t| (t, worker));
        let host = shared.host.get()?;
        Some(
            build_runtime(
                host,
                shared.cache,
                ruleset,
                &mut engine,
                clocks.now_ns,
                share,
            )?
            .0,
        )
    } else {
        None
    };
    Ok(Bundle {
        engine,
        runtime,
        generation,
        netfilter: shared.netfilter.clone(),
        carry: Arc::default(),
    })
}

/// Where the results of a vector go.
pub trait Exit {
    /// The sink of the ingress hook's trace events (`None`: no trace; the `log` lines then
    /// come through [`Exit::log`]).
    fn trace(&mut self) -> Option<&mut dyn TraceSink> {
        None
    }

    /// Lines of `log` statements, in the order they ran: the ingress hook's for the whole
    /// vector (when [`Exit::trace`] gave no sink), then the IP hooks' of each packet as it
    /// takes the way out.
    fn log(&mut self, lines: Vec<String>, now_ns: u64);

    /// A frame leaves: `s` made from `frame`, packet `i`'s frame as its walk left it.
    fn send(&mut self, i: usize, s: &Send, frame: &[u8]);

    /// Packet `i` is done: its ingress outcome, its frame as its walk left it, its fate.
    fn done(&mut self, i: usize, p: &Packet<'_>, outcome: &Outcome, frame: &[u8], fate: Fate);
}

/// Counts of one vector.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VectorCounts {
    /// Packets.
    pub packets: u64,
    /// Their bytes (captured length).
    pub bytes: u64,
    /// Packets whose headers could not be parsed (each still got a verdict).
    pub malformed: u64,
    /// Packets the ingress hook accepted.
    pub accepted: u64,
    /// Lines `log` statements made.
    pub logged: u64,
}

/// One worker's data path (see the module documentation).
pub struct Datapath {
    /// The running ruleset.
    pub engine: Engine,
    /// Its plugin instances.
    pub runtime: Option<Runtime>,
    /// Ruleset generation.
    pub generation: u64,
    /// The way out: this worker's copy.
    pub forwarder: Forwarder,
    res: HookResult,
    way: WayOut,
    logs: LogLines,
    /// The memory of a vector's decisions, kept from vector to vector.
    spare: Vec<Decided<'static>>,
}

impl Datapath {
    /// A data path running `bundle`, leaving through `forwarder`.
    pub fn new(bundle: Bundle, forwarder: Forwarder) -> Self {
        let mut dp = Datapath {
            engine: bundle.engine,
            runtime: None,
            generation: 0,
            forwarder,
            res: HookResult::new(),
            way: WayOut::default(),
            logs: LogLines::default(),
            spare: Vec::new(),
        };
        dp.install_parts(bundle.runtime, bundle.generation, bundle.netfilter);
        dp
    }

    /// Switch to `b` (at a vector boundary): the counts `b.carry` names move from the running
    /// plugin instances into `b`'s first ([`carry_counts`]), so every packet this worker
    /// counted stays counted once, and every other plugin's state moves to its new instance
    /// ([`Runtime::take_state`]: IDLETIMER timers keep running); then the old plugin instances
    /// are dropped.
    pub fn install(&mut self, mut b: Bundle) {
        if let (Some(old), Some(new)) = (self.runtime.as_mut(), b.runtime.as_mut()) {
            if !b.carry.is_empty() {
                carry_counts(old, new, &b.engine, &b.carry);
            }
            // The other plugins' state (IDLETIMER timers, ...) goes with them; the counts the
            // counter carry moved by use site.
            new.take_state(old, &[wasp_core::COUNTER_PLUGIN]);
        }
        self.engine = b.engine;
        self.install_parts(b.runtime, b.generation, b.netfilter);
    }

    fn install_parts(&mut self, rt: Option<Runtime>, generation: u64, nf: Option<Netfilter>) {
        // The devices' own addresses decide `meta pkttype` (host or other).
        for d in self.forwarder.gateway().map_or(&[][..], |g| g.devices()) {
            if let Some(mac) = d.mac {
                self.engine.set_device_mac(&d.name, mac);
            }
        }
        self.runtime = rt;
        self.generation = generation;
        self.forwarder.set_netfilter(nf);
    }

    /// Move the plugins' clock to `now_ns` (their timers fire whether or not packets come).
    pub fn advance(&mut self, now_ns: u64) {
        if let Some(rt) = self.runtime.as_mut() {
            rt.advance(now_ns);
        }
    }

    /// Run a vector of `frames` (at most [`wasp_core::MAX_VECTOR`]) that entered on `dev` at
    /// `now_ns` (ns on the packet clock) through the ingress hook and the way out; what
    /// leaves and what became of each packet go to `exit`, in packet order.
    pub fn vector<'f, E: Exit + ?Sized>(
        &mut self,
        dev: &str,
        frames: impl Iterator<Item = &'f [u8]>,
        now_ns: u64,
        exit: &mut E,
    ) -> VectorCounts {
        let Datapath {
            engine,
            runtime,
            forwarder,
            res,
            way,
            logs,
            spare,
            ..
        } = self;
        let mut packets: Vec<Packet<'_>> = Vec::with_capacity(wasp_core::MAX_VECTOR);
        for frame in frames {
            packets.push(Packet {
                frame,
                meta: wasp_wire::parse(frame),
                iifname: dev,
                mark: 0,
                oifname: "",
                ct: wasp_core::CtMeta::NONE,
                ct_detail: None,
                nftrace: false,
                route: None,
            });
        }
        let mut counts = VectorCounts {
            packets: packets.len() as u64,
            ..VectorCounts::default()
        };
        if packets.is_empty() {
            return counts;
        }
        // The flowtables' hook among the device's ingress chains, at its priority: the
        // packets of offloaded flows leave the hook there.
        let flow_hook = forwarder.flow_hook(dev);
        let mut hits: Vec<Option<FlowHit>> = Vec::new();
        if flow_hook.is_some() {
            hits.resize_with(packets.len(), || None);
            forwarder.flow_prefetch(dev, packets.iter().map(|p| (p.frame, &p.meta)));
        }
        {
            // `log` lines come through a sink that wants only them when the exit traces
            // nothing (no cost without `log`).
            let own_logs = engine.has_logs();
            let sink = match exit.trace() {
                Some(t) => Some(t),
                None => own_logs.then_some(&mut *logs as &mut dyn TraceSink),
            };
            let ext = runtime.as_mut().map(|r| r as &mut dyn Extensions);
            let fw = &*forwarder;
            let mut take = |i: usize, p: &Packet<'_>| {
                let hit = fw.flow_lookup(dev, p.frame, &p.meta, now_ns);
                let took = hit.is_some();
                hits[i] = hit;
                took
            };
            let steal = flow_hook.map(|priority| Steal {
                priority,
                take: &mut take,
            });
            engine.run_ingress(dev, &packets, now_ns, res, sink, ext, steal);
        }
        if !logs.lines.is_empty() {
            logs.lines.sort_by_key(|l| l.0);
            let lines: Vec<String> = logs.lines.drain(..).map(|l| l.1).collect();
            counts.logged += lines.len() as u64;
            exit.log(lines, now_ns);
        }
        // The frames as plugin statements edited them (made before the way out runs the
        // egress hooks, which make edits of their own); `dup` copies taken before a later
        // edit: the packet as it was at the `dup`.
        let edited = res.edited_frames(packets.iter().map(|p| p.frame));
        let dups = res.dup_copies(packets.iter().map(|p| p.frame));
        // Most vectors have no edit, no `dup` copy and no traced packet: each packet then
        // goes on with its frame and parse as they came.
        let plain = edited.is_empty() && dups.is_empty() && res.marked.is_empty();
        let mut decided: Vec<Decided<'_>> = recycle(std::mem::take(spare));
        decided.extend(
            packets
                .iter()
                .zip(&res.outcomes)
                .enumerate()
                .map(|(i, (pkt, o))| {
                    counts.bytes += pkt.frame.len() as u64;
                    counts.malformed += u64::from(pkt.meta.malformed.is_some());
                    counts.accepted += u64::from(o.verdict == FinalVerdict::Accept);
                    if plain {
                        return Decided {
                            frame: pkt.frame,
                            meta: Some(&pkt.meta),
                            dups: &[],
                            outcome: o,
                            nftrace: false,
                        };
                    }
                    // The IP path reuses the ingress hook's parse of a frame no statement edited.
                    let (frame, meta) = match edited.get(i).and_then(Option::as_deref) {
                        Some(e) => (e, None),
                        None => (pkt.frame, Some(&pkt.meta)),
                    };
                    Decided {
                        frame,
                        meta,
                        dups: dups.of(i),
                        outcome: o,
                        nftrace: res.nftrace(i),
                    }
                }),
        );
        let ext = runtime.as_mut().map(|r| r as &mut dyn Extensions);
        let flows = flow_hook.map(|_| &mut hits[..]);
        way.trace = exit.trace().map(|t| t.marked_only());
        forwarder.vector(
            engine,
            ext,
            dev,
            &decided,
            now_ns,
            way,
            flows,
            #[inline(always)]
            |i, fate, way: &mut WayOut| {
                if !way.logs.is_empty() {
                    let lines = std::mem::take(&mut way.logs);
                    counts.logged += lines.len() as u64;
                    exit.log(lines, now_ns);
                }
                // Its walks through the IP hooks join its ingress walk, as packet `i`.
                if !way.traced.is_empty()
                    && let Some(sink) = exit.trace()
                {
                    for mut ev in way.traced.drain(..) {
                        *ev.packet_mut() = i;
                        sink.event(ev);
                    }
                }
                // What this packet sends, while its frame is at hand.
                let d = &decided[i];
                if !way.sends.is_empty() {
                    for s in way.sends.drain(..) {
                        exit.send(i, &s, d.frame);
                    }
                }
                exit.done(i, &packets[i], d.outcome, d.frame, fate);
            },
        );
        *spare = recycle(decided);
        counts
    }
}

/// `v` emptied, as a vector of a type of the same layout (here `Decided` under another
/// lifetime), keeping its memory: std's collect from a vector's own iterator into one of the
/// same layout reuses the allocation (not promised by std; without it a new, empty vector is
/// made, which costs an allocation and nothing else).
fn recycle<T, U>(mut v: Vec<T>) -> Vec<U> {
    v.clear();
    v.into_iter().map(|_| unreachable!("emptied")).collect()
}

#[cfg(test)]
mod tests {
    use wasp_core::TraceEvent;
    use wasp_gateway::{DropReason, Fate};
    use wasp_wire::samples::{ethernet, ipv4, udp};

    use super::*;

    /// What an exit saw, in order.
    #[derive(Default)]
    struct Seen {
        events: Vec<String>,
        logs: Vec<String>,
    }

    impl Exit for Seen {
        fn log(&mut self, lines: Vec<String>, _: u64) {
            self.logs.extend(lines);
        }

        fn send(&mut self, i: usize, s: &Send, frame: &[u8]) {
            let bytes = s.frame(frame);
            self.events
                .push(format!("send {i} {} {:?} {}", s.dev, s.kind, bytes.len()));
        }

        fn done(&mut self, i: usize, p: &Packet<'_>, o: &Outcome, frame: &[u8], fate: Fate) {
            assert_eq!(p.frame.len(), frame.len(), "no edit in these rulesets");
            self.events
                .push(format!("done {i} {:?} {fate:?}", o.verdict));
        }
    }

    /// The vector of decisions keeps its memory from vector to vector (`recycle`).
    #[test]
    fn a_recycled_vector_keeps_its_memory() {
        let mut v: Vec<&str> = Vec::with_capacity(64);
        v.push("a");
        let at = v.as_ptr();
        let w: Vec<&str> = recycle(v);
        assert!(w.is_empty());
        assert_eq!((w.capacity(), w.as_ptr()), (64, at));
    }

    fn datapath(rules: &str) -> Datapath {
        let rs = wasp_ruleset::parse_str(rules, "dp.nft").unwrap();
        let mut cache = PluginCache::default();
        let mut shared = Shared::single(&mut cache, HostConfig::default());
        let b = build(&rs, 0, 1, Clocks::default(), false, &mut shared).unwrap();
        Datapath::new(b, Forwarder::new(None))
    }

    fn frame(dport: u16) -> Vec<u8> {
        ethernet(&[], 0x0800, &ipv4(17, &udp(1000, dport, b"")))
    }

    /// Per packet, in order: what it sends (a `dup` copy), then its fate; the counts of the
    /// vector; `log` lines through the exit when it traces nothing.
    #[test]
    fn a_vector_goes_to_the_exit_packet_by_packet() {
        let mut dp = datapath(
            "table netdev t {\n chain c {\n  type filter hook ingress device \"eth0\" priority 0; policy accept;\n  udp dport 53 dup to \"mon0\"\n  udp dport 22 log prefix \"ssh \" drop\n }\n}\n",
        );
        let frames = [frame(53), frame(22), frame(80)];
        let mut seen = Seen::default();
        let c = dp.vector("eth0", frames.iter().map(Vec::as_slice), 1_000, &mut seen);
        assert_eq!(
            seen.events,
            [
                format!("send 0 mon0 Dup {}", frames[0].len()),
                "done 0 Accept Local".to_string(),
                format!("done 1 Drop {:?}", Fate::Dropped(DropReason::Verdict)),
                "done 2 Accept Local".to_string(),
            ]
        );
        assert_eq!(
            c,
            VectorCounts {
                packets: 3,
                bytes: frames.iter().map(|f| f.len() as u64).sum(),
                malformed: 0,
                accepted: 2,
                logged: 1,
            }
        );
        assert_eq!(seen.logs.len(), 1);
        assert!(seen.logs[0].starts_with("ssh IN=eth0 "), "{}", seen.logs[0]);
        // Nothing of the call stays for the next: an empty vector sends and logs nothing.
        let mut again = Seen::default();
        let c = dp.vector("eth0", std::iter::empty(), 2_000, &mut again);
        assert_eq!(c, VectorCounts::default());
        assert!(again.events.is_empty() && again.logs.is_empty());
    }

    /// A sink of marked packets, as the daemon's `monitor trace` uses.
    #[derive(Default)]
    struct MarkedExit {
        events: Vec<TraceEvent>,
    }

    impl TraceSink for MarkedExit {
        fn event(&mut self, ev: TraceEvent) {
            self.events.push(ev);
        }

        fn marked_only(&self) -> bool {
            true
        }
    }

    impl Exit for MarkedExit {
        fn trace(&mut self) -> Option<&mut dyn TraceSink> {
            Some(self)
        }

        fn log(&mut self, _: Vec<String>, _: u64) {}

        fn send(&mut self, _: usize, _: &Send, _: &[u8]) {}

        fn done(&mut self, _: usize, _: &Packet<'_>, _: &Outcome, _: &[u8], _: Fate) {}
    }

    /// `meta nftrace set 1` at the netdev ingress hook marks a packet for its whole way: the
    /// gateway's forward chain is traced for it from its first rule, as packet `i` of the
    /// vector; an unmarked packet of the same vector is not traced anywhere, and one marked
    /// only in the forward chain is traced from the marking rule on.
    #[test]
    fn nftrace_marks_follow_the_packet_into_the_ip_hooks() {
        let rs = wasp_ruleset::parse_str(
            "table netdev t {\n chain c {\n  type filter hook ingress device \"lan0\" priority 0; policy accept;\n  udp dport 53 meta nftrace set 1\n }\n}\n\
             table ip f {\n chain forward {\n  type filter hook forward priority 0; policy accept;\n  udp dport 99 counter\n  udp dport 22 meta nftrace set 1\n  counter\n }\n}\n",
            "dp.nft",
        )
        .unwrap();
        let gw = wasp_gateway::Gateway::parse(
            "device lan0 mac 02:00:00:00:01:01\ndevice wan0 mac 02:00:00:00:02:01\naddress lan0 10.1.0.1/24\naddress wan0 192.0.2.1/24\nroute default via 192.0.2.254 dev wan0\nneighbour 192.0.2.254 lladdr 02:00:00:00:02:fe dev wan0\n",
            "gw.conf",
        )
        .unwrap();
        let mut cache = PluginCache::default();
        let mut shared = Shared::single(&mut cache, HostConfig::default());
        let b = build(&rs, 0, 1, Clocks::default(), true, &mut shared).unwrap();
        let mut dp = Datapath::new(b, Forwarder::new(Some(gw)));
        let to_router = |dport: u16| {
            let mut f = ethernet(&[], 0x0800, &ipv4(17, &udp(1000, dport, b"")));
            f[..6].copy_from_slice(&[2, 0, 0, 0, 1, 1]);
            // 10.1.0.2 -> 8.8.8.8, TTL 64.
            f[14 + 8] = 64;
            f[14 + 12..14 + 16].copy_from_slice(&[10, 1, 0, 2]);
            f[14 + 16..14 + 20].copy_from_slice(&[8, 8, 8, 8]);
            let sum = wasp_gateway::checksum::checksum(&{
                let mut h = f[14..34].to_vec();
                h[10] = 0;
                h[11] = 0;
                h
            });
            f[24..26].copy_from_slice(&sum.to_be_bytes());
            f
        };
        let frames = [to_router(80), to_router(53), to_router(22)];
        let mut exit = MarkedExit::default();
        dp.vector("lan0", frames.iter().map(Vec::as_slice), 1_000, &mut exit);
        let names = |t: u32| if t == 0 { "t" } else { "f" };
        let seen: Vec<(usize, &str, Option<u64>)> = exit
            .events
            .iter()
            .filter_map(|e| match e {
                TraceEvent::Rule {
                    packet,
                    table,
                    handle,
                    ..
                } => Some((*packet, names(*table), Some(*handle))),
                TraceEvent::ChainEnd {
                    packet,
                    table,
                    policy: Some(_),
                    ..
                } => Some((*packet, names(*table), None)),
                _ => None,
            })
            .collect();
        assert_eq!(
            seen,
            [
                // Packet 1 (DNS), marked at ingress: the marking rule and the policy there,
                // then every forward rule that matched, and the policy.
                (1, "t", Some(2)),
                (1, "t", None),
                (1, "f", Some(4)),
                (1, "f", None),
                // Packet 2 (port 22), marked in the forward chain.
                (2, "f", Some(3)),
                (2, "f", Some(4)),
                (2, "f", None),
            ],
            "{:?}",
            exit.events
        );
    }

    /// A worker that switches to a new ruleset's bundle hands its plugins' state over: an
    /// IDLETIMER timer a packet armed at 0 s (timeout 1 s) still falls due at 1 s after a
    /// change at 0.6 s that renumbers every use site (without the handover the new rule's
    /// own timer, started at the change, would fire at 1.6 s).
    #[test]
    fn a_new_bundle_takes_the_plugins_state() {
        const S: u64 = 1_000_000_000;
        let text = |extra: &str| {
            format!(
                "table netdev t {{\n plugin idletimer\n chain c {{\n  type filter hook ingress device \"eth0\" priority 0; policy accept;\n{extra}  udp dport 53 idletimer label \"dns\" timeout 1s\n }}\n}}\n"
            )
        };
        let rs = wasp_ruleset::parse_str(&text(""), "a.nft").unwrap();
        let rs2 = wasp_ruleset::parse_str(&text("  tcp dport 22 counter drop\n"), "b.nft").unwrap();
        let mut cache = PluginCache::default();
        let mut shared = Shared::single(&mut cache, HostConfig::default());
        let clocks = |now_ns| Clocks {
            epoch_ns: Some(0),
            wall_epoch_ns: 0,
            now_ns,
        };
        let b = build(&rs, 0, 1, clocks(0), false, &mut shared).unwrap();
        let mut dp = Datapath::new(b, Forwarder::new(None));
        let mut seen = Seen::default();
        dp.vector("eth0", [frame(53)].iter().map(Vec::as_slice), 0, &mut seen);
        dp.advance(S * 6 / 10);
        let b2 = build(&rs2, 0, 2, clocks(S * 6 / 10), false, &mut shared).unwrap();
        dp.install(b2);
        let expired = |dp: &mut Datapath, at| {
            dp.advance(at);
            dp.runtime
                .as_mut()
                .unwrap()
                .take_events()
                .iter()
                .any(|e| e.text == "idletimer dns expired")
        };
        assert!(!expired(&mut dp, S * 95 / 100), "not before its timeout");
        assert!(expired(&mut dp, S * 105 / 100), "due 1 s after the packet");
    }
}
