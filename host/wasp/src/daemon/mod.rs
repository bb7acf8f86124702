//! `wasp run`: the daemon. It opens the devices the ruleset's base chains name, starts one
//! worker per core (each with its own rings, spread by PACKET_FANOUT), answers the control
//! socket, reloads its ruleset file on SIGHUP ([`state::Daemon::reload`]: all or nothing,
//! conntrack and flows kept), tells systemd when it is ready, reloading and stopping
//! (`Type=notify`), and stops cleanly on SIGINT/SIGTERM: a reload being built and the changes
//! in flight on the control socket finish first (every worker takes them), then the vectors
//! in flight, and the final statistics are printed.
//!
//! - [`worker`]: one worker's loop (receive, classify, send) and its context.
//! - [`state`]: the control side: the running ruleset, changes, counters summed over workers.
//! - [`mailbox`]: jobs the control side runs on workers at their vector boundaries.
//! - [`live`]: the worker's ports: wasp-io's AF_PACKET and TAP groups joined as one
//!   `wasp_io::PortGroup` (the worker drives any `PortGroup`: `wasp replay` drives its loop's
//!   parts over `wasp_io::PcapGroup`, tests over in-memory fakes).
//! - [`control`]: the answers on the control socket (`wasp ctl`); [`reset`]: what a reset
//!   zeroes; [`ct_filter`]: which connections `delete conntrack` deletes.
//! - [`stats`], [`events`]: worker counts, and events for `wasp ctl monitor`.

pub mod control;
pub mod ct_filter;
pub mod events;
pub mod live;
pub mod mailbox;
pub mod metrics;
pub mod reset;
pub mod state;
pub mod stats;
pub mod worker;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::{Args, ValueEnum};
use wasp_core::Engine;
use wasp_gateway::{Forwarder, Gateway};
use wasp_io::{
    AfPacketGroup, FanoutMode, FanoutSpec, PortGroup, PortStats, RingConfig, RxMode, TapGroup,
    TxMode,
};

use crate::error::Error;
use events::EventBus;
use mailbox::Mailbox;
use state::Daemon;
use stats::{StatsSnapshot, WorkerStats};
use worker::{Clock, Worker, WorkerLinks};

/// How the AF_PACKET sockets receive (`--rx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RxArg {
    /// A TPACKET_V3 ring polled through io_uring (the default: less CPU per packet here).
    Tpacket,
    /// Multishot recv into a provided-buffer ring.
    Multishot,
}

/// How the AF_PACKET sockets send (`--tx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TxArg {
    /// A `PACKET_TX_RING` per socket, one `sendto` per port and flush (the default).
    Ring,
    /// One io_uring `SEND` per frame from the ports' send buffers (on veth this skips the
    /// copy of the ring's page fragments that veth makes for a ring's frames).
    Send,
}

/// `wasp run RULESET [options]`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The ruleset file (nft syntax); its netdev base chains name the devices to open. Loaded
    /// again on SIGHUP (`systemctl reload wasp`).
    #[arg(default_value = "/etc/wasp/wasp.nft")]
    pub ruleset: PathBuf,
    /// Workers (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
    /// The control socket's path (created with mode 0600).
    #[arg(long, default_value = "/run/wasp/wasp.sock")]
    pub socket: PathBuf,
    /// Open this device too (repeat), besides those the ruleset's base chains name.
    #[arg(long = "device", value_name = "DEV")]
    pub devices: Vec<String>,
    /// Open this device as a TAP device (created when missing, multi-queue; bring it up with
    /// `ip link`), through io_uring reads and writes, instead of an AF_PACKET socket. Repeat
    /// for several. Each worker opens its own queue of each TAP device (`IFF_MULTI_QUEUE`; the
    /// kernel spreads the flows it sends into the device over the queues). An existing device
    /// created without `multi_queue` has one queue: served by one worker (the default
    /// `--workers` becomes 1; more is refused, naming the device).
    #[arg(long = "tap", value_name = "DEV")]
    pub taps: Vec<String>,
    /// Time a plugin call on the packet path may take before it is interrupted and its packets
    /// get the fallback, in ms (epoch ticks of 1 ms, then as much again of the worker's CPU
    /// time, so that a worker descheduled in the middle of a call on a loaded machine does not
    /// lose that call's packets: a call that loops is stopped within twice this; default 3, so
    /// 6 ms; a plugin that keeps failing is backed off and its packets get the fallback without
    /// a call while the worker keeps draining its rings). Calls that configure run under their
    /// own 1 s limit.
    #[arg(long, value_name = "MS", default_value_t = state::DEFAULT_PLUGIN_DEADLINE_MS)]
    pub plugin_deadline: u64,
    /// Receive path of the AF_PACKET ports.
    #[arg(long, value_enum, default_value = "tpacket")]
    pub rx: RxArg,
    /// Send path of the AF_PACKET ports.
    #[arg(long, value_enum, default_value = "ring")]
    pub tx: TxArg,
    /// The gateway file: addresses, static routes and neighbours (see `wasp_gateway`);
    /// without it accepted packets stay with the local stack unless `fwd`/`dup` send them.
    #[arg(long, value_name = "FILE")]
    pub gateway: Option<PathBuf>,
    /// Give every flowtable a software model of a NIC's flow offload table as an offload
    /// block (`wasp_flowtable::HwModel`): at most CAPACITY flows, each forwarded (and counted)
    /// by the model from LATENCY_US µs after it is added; flows beyond the capacity stay in
    /// software. `wasp ctl list flowtable NAME` shows where each flow is.
    #[arg(long, value_name = "CAPACITY[:LATENCY_US]", value_parser = parse_hw_offload)]
    pub hw_offload: Option<(usize, u64)>,
    /// Give every flowtable the offload block in the WebAssembly component PATH (world
    /// `wasp:plugin/wasp-offload-block`; a bare name such as `offload_table` is a bundled
    /// plugin, as in a ruleset's `plugin NAME`), configured
    /// with ARGS (the block's own syntax, e.g. `capacity 1000 latency-us 50`); repeat for
    /// several. The block is named after the file (`offload_table`; `offload_table-2` for a
    /// second one from a file of the same name) and listed as such by `wasp ctl list
    /// flowtable`. Its calls have the packet path's plugin deadline (`--plugin-deadline`); a
    /// call that fails leaves the flow in software and the instance is re-created. A file that
    /// is not an offload block, or ARGS it refuses, stop the daemon at start with a message.
    #[arg(long = "offload-plugin", value_name = "PATH[:ARGS]", value_parser = parse_offload_plugin)]
    pub offload_plugins: Vec<(PathBuf, String)>,
    /// Serve the daemon's counters as OpenMetrics text at `http://ADDR:PORT/metrics` (for
    /// Prometheus): ports, workers, drops by reason, base chains' verdicts, plugins,
    /// conntrack, flowtables, reloads (see `wasp::daemon::metrics`). A scrape reads counters
    /// the workers publish four times a second; it never waits for a worker.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<std::net::SocketAddr>,
}

/// `PATH[:ARGS]` of `--offload-plugin` (split at the first `:`).
fn parse_offload_plugin(s: &str) -> Result<(PathBuf, String), String> {
    let (p, a) = s.split_once(':').unwrap_or((s, ""));
    if p.is_empty() {
        return Err("expected the path of an offload block component".into());
    }
    Ok((PathBuf::from(p), a.to_string()))
}

/// The names of the offload plugin blocks: each file's stem, with `-N` for the N-th (N >= 2)
/// of the same stem.
fn offload_plugin_names(plugins: &[(PathBuf, String)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (path, _) in plugins {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "plugin".into());
        let same = out
            .iter()
            .filter(|n| {
                **n == stem
                    || n.strip_prefix(&format!("{stem}-"))
                        .is_some_and(|r| r.parse::<u32>().is_ok())
            })
            .count();
        out.push(if same == 0 {
            stem
        } else {
            format!("{stem}-{}", same + 1)
        });
    }
    out
}

/// `CAPACITY[:LATENCY_US]` of `--hw-offload`.
fn parse_hw_offload(s: &str) -> Result<(usize, u64), String> {
    let (c, l) = s.split_once(':').unwrap_or((s, "0"));
    let cap = c
        .parse::<usize>()
        .map_err(|_| format!("expected a number of flows, found `{c}`"))?;
    let lat = l
        .parse::<u64>()
        .map_err(|_| format!("expected a latency in µs, found `{l}`"))?;
    Ok((cap, lat))
}

/// The devices to open: the ruleset's netdev ingress base chains' devices, the `fwd`/`dup`
/// targets, the gateway's devices but its tunnels (their frames use their underlay's port), then
/// `extra`, each once.
pub fn devices(engine: &Engine, gateway: Option<&Gateway>, extra: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let gw = gateway
        .map(|g| {
            g.devices()
                .iter()
                .filter(|d| d.tunnel.is_none())
                .map(|d| d.name.clone())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    for d in engine
        .ingress_devices()
        .into_iter()
        .map(str::to_string)
        .chain(engine.out_targets().iter().map(|t| t.dev.to_string()))
        .chain(gw)
        .chain(extra.iter().cloned())
    {
        if !d.is_empty() && !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// Run the daemon until SIGINT/SIGTERM: open the devices, start the workers and the control
/// socket, then stop cleanly (vectors in flight finish) and print the final statistics.
///
/// # Errors
/// [`Error::Ruleset`] for a ruleset that cannot run; [`Error::Daemon`] when a device is
/// missing, privileges lack ("needs CAP_NET_RAW (run as root)"), the socket is in use, or a
/// worker fails.
pub fn run(args: &RunArgs, stdout: &mut dyn Write, stderr: &mut dyn Write) -> Result<(), Error> {
    // RUST_LOG picks what is logged (default: info).
    crate::cli::init_logging("info");
    // Large sets' tables and their copies go back to the system when dropped.
    wasp_io::map_large_blocks_alone();
    let ruleset = wasp_ruleset::parse_file(&args.ruleset)?;
    let engine = Engine::compile(&ruleset)?;
    let mut gateway = match &args.gateway {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| Error::Daemon(format!("{}: {e}", p.display())))?;
            Some(Gateway::parse(&text, &p.display().to_string())?)
        }
        None => None,
    };
    let extra: Vec<String> = args.devices.iter().chain(&args.taps).cloned().collect();
    let devs = devices(&engine, gateway.as_ref(), &extra);
    // What later rulesets may name: the ports, and the gateway's tunnels (their frames come
    // through their underlay's port).
    let nameable: Vec<String> = devs
        .iter()
        .cloned()
        .chain(
            gateway
                .iter()
                .flat_map(|g| g.devices().iter().map(|d| d.name.clone())),
        )
        .collect();
    if devs.is_empty() {
        return Err(Error::Daemon(format!(
            "{}: no netdev base chain names a device, and no --device given: nothing to open",
            args.ruleset.display()
        )));
    }
    let mut workers = match args.workers {
        0 => std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        n => n,
    };
    // Every --tap device is a TAP device; the others are AF_PACKET ports.
    let mut taps: Vec<String> = Vec::new();
    for t in &args.taps {
        if !taps.contains(t) {
            taps.push(t.clone());
        }
    }
    let packet_devs: Vec<String> = devs.iter().filter(|d| !taps.contains(d)).cloned().collect();
    let mut cfg = RingConfig {
        rx_mode: match args.rx {
            RxArg::Tpacket => RxMode::TpacketV3,
            RxArg::Multishot => RxMode::Multishot,
        },
        tx_mode: match args.tx {
            TxArg::Ring => TxMode::Ring,
            TxArg::Send => TxMode::Send,
        },
        ..RingConfig::default()
    };
    size_buffers(&mut cfg, &devs);
    // Fanout ids: one group per daemon (the process id), one id per device within it.
    let fanout = FanoutSpec {
        group_id: (std::process::id() & 0x7fff) as u16,
        mode: FanoutMode::Hash,
    };
    let mut groups: Vec<live::IoPorts> = Vec::with_capacity(workers);
    while groups.len() < workers {
        let mut parts: Vec<Box<dyn PortGroup>> = Vec::new();
        if !packet_devs.is_empty() {
            let g = AfPacketGroup::open(&packet_devs, fanout, cfg)
                .map_err(|e| Error::Daemon(format!("cannot open the ports: {e}")))?;
            parts.push(Box::new(g));
        }
        if !taps.is_empty() {
            // One queue of each TAP device per worker; a second worker on a single-queue
            // device gets wasp-io's error naming the device and the cause.
            let g = TapGroup::open(&taps, cfg)
                .map_err(|e| Error::Daemon(format!("cannot open the TAP devices: {e}")))?;
            if groups.is_empty() && !g.multi_queue() && args.workers == 0 && workers > 1 {
                tracing::info!(
                    taps = ?taps,
                    "a TAP device has one queue (created without multi_queue): one worker"
                );
                workers = 1;
            }
            parts.push(Box::new(g));
        }
        groups.push(live::IoPorts::joined(parts));
    }
    // The gateway's devices take the MACs of the ports unless the file gives them.
    if let (Some(g), Some(first)) = (gateway.as_mut(), groups.first()) {
        for (name, mac) in first.macs() {
            if g.device(&name)
                .is_some_and(|d| g.devices()[usize::from(d.0)].mac.is_none())
            {
                g.set_mac(&name, mac);
            }
        }
    }
    // The workers (and the metrics server) stop on `stop`; SIGINT/SIGTERM set `signaled`,
    // which the main loop turns into `stop` once no reload is being built and every change
    // in flight on the control socket has finished (a worker stopped under a change would
    // leave it half installed).
    let stop = Arc::new(AtomicBool::new(false));
    let signaled = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, signaled.clone())
            .map_err(|e| Error::Daemon(format!("cannot install the signal handler: {e}")))?;
    }
    let reload = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, reload.clone())
        .map_err(|e| Error::Daemon(format!("cannot install the signal handler: {e}")))?;
    let events = Arc::new(EventBus::default());
    let clock = Clock::new();
    let links: Vec<WorkerLinks> = (0..workers)
        .map(|_| WorkerLinks {
            mailbox: Arc::new(Mailbox::default()),
            stats: Arc::new(WorkerStats::default()),
            events: events.clone(),
            stop: stop.clone(),
            clock,
            published: Arc::default(),
        })
        .collect();
    let host_cfg = wasp_plugin::HostConfig {
        deadline_ticks: args.plugin_deadline.max(1),
        ..wasp_plugin::HostConfig::default()
    };
    let (daemon, bundles) = Daemon::with_host(
        ruleset,
        // Absolute: a reload reads the same file whatever the working directory.
        std::path::absolute(&args.ruleset).unwrap_or_else(|_| args.ruleset.clone()),
        links.clone(),
        events,
        clock,
        host_cfg,
    )?;
    if let Some((capacity, latency_us)) = args.hw_offload {
        daemon.set_offload_block(Arc::new(wasp_flowtable::HwModel::new(
            "hw",
            capacity,
            latency_us.saturating_mul(1000),
        )));
    }
    for ((path, block_args), name) in args
        .offload_plugins
        .iter()
        .zip(offload_plugin_names(&args.offload_plugins))
    {
        // A bare name (no `/`, no `.wasm`) is a bundled plugin, as in a ruleset's `plugin NAME`
        // (found by the same search: override directories, then the embedded copy).
        let text = path.to_string_lossy();
        let component = if crate::plugins::is_file_path(&text) {
            crate::bundled::Component::File(path.clone())
        } else {
            crate::bundled::SearchPath::from_env()
                .require(&text)
                .map_err(|e| {
                    Error::Plugin(format!(
                        "--offload-plugin {text}: {e}; give a path to a .wasm file"
                    ))
                })?
                .component
        };
        let b = component
            .load_block(daemon.host(), &name, block_args)
            .map_err(|e| Error::Plugin(e.to_string()))?;
        tracing::info!(block = %name, path = %component, args = %block_args, "offload plugin loaded");
        daemon.set_offload_block(Arc::new(b));
    }
    daemon.set_ports(nameable);
    let daemon = Arc::new(daemon);
    let server = wasp_ctl::server::Server::start(
        wasp_ctl::server::ServerConfig::new(&args.socket),
        Arc::new(ReleaseAfterChange(control::Control::new(daemon.clone()))),
    )
    .map_err(|e| Error::Daemon(format!("control socket: {e}")))?;
    let metrics = match args.metrics {
        Some(addr) => {
            let (bound, h) = metrics::serve(addr, daemon.clone(), stop.clone())
                .map_err(|e| Error::Daemon(format!("--metrics {addr}: {e}")))?;
            tracing::info!(address = %bound, "metrics at http://{bound}/metrics");
            Some(h)
        }
        None => None,
    };
    tracing::info!(
        devices = ?devs,
        workers,
        socket = %args.socket.display(),
        "wasp running"
    );
    let mut threads = Vec::with_capacity(workers);
    for (i, ((g, b), l)) in groups.into_iter().zip(bundles).zip(links).enumerate() {
        let ports = g;
        let stop = stop.clone();
        let fwd = Forwarder::new(gateway.clone());
        let t = std::thread::Builder::new()
            .name(format!("wasp-worker-{i}"))
            .spawn(move || {
                let r = Worker::new(i, ports, b, fwd, l).run();
                if r.is_err() {
                    // One worker failing stops the daemon (its devices are gone).
                    stop.store(true, Ordering::Relaxed);
                }
                r
            })
            .map_err(|e| Error::Daemon(format!("cannot start worker {i}: {e}")))?;
        threads.push(t);
    }
    notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status("running"),
    ]);
    while !signaled.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
        if reload.swap(false, Ordering::Relaxed) {
            reload_ruleset(&daemon);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    notify(&[sd_notify::NotifyState::Stopping]);
    tracing::info!("stopping");
    // Changes in flight finish while the workers still run; then the workers stop.
    server.shutdown();
    stop.store(true, Ordering::Relaxed);
    if let Some(h) = metrics {
        let _ = h.join();
    }
    let mut failure = None;
    let mut ports = Vec::new();
    for (i, t) in threads.into_iter().enumerate() {
        match t.join() {
            Ok(Ok((ctx, counts))) => ports.push((i, ctx.ports.into_iter().zip(counts).collect())),
            Ok(Err(e)) => failure = Some(format!("worker {i}: {e}")),
            Err(_) => failure = Some(format!("worker {i} panicked")),
        }
    }
    let total = StatsSnapshot::sum(&daemon.stats());
    let io = |e: std::io::Error| Error::Output {
        path: PathBuf::from("<stdout>"),
        message: e.to_string(),
    };
    write!(stdout, "{}", final_stats(&total, &ports)).map_err(io)?;
    let _ = stderr.flush();
    match failure {
        Some(f) => Err(Error::Daemon(f)),
        None => Ok(()),
    }
}

/// Tell systemd (`Type=notify`) where the daemon is; nothing happens outside systemd (no
/// `NOTIFY_SOCKET`), and a failure to tell is logged, not fatal.
fn notify(states: &[sd_notify::NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::warn!(error = %e, "cannot notify systemd");
    }
}

/// SIGHUP: [`Daemon::reload`] the ruleset file, telling systemd (`RELOADING=1` with the
/// monotonic time, then `READY=1`), the log and `wasp ctl monitor` how it went. A file that
/// does not load is refused with its file:line:col and the running configuration stays.
fn reload_ruleset(daemon: &Daemon) {
    let mut states = vec![sd_notify::NotifyState::Reloading];
    if let Ok(t) = sd_notify::NotifyState::monotonic_usec_now() {
        states.push(t);
    }
    notify(&states);
    let file = daemon.ruleset_path.display().to_string();
    let text = match daemon.reload() {
        Ok((generation, note)) => {
            tracing::info!(file = %file, generation, "ruleset reloaded");
            if let Some(n) = &note {
                tracing::warn!(file = %file, "{n}");
            }
            match note {
                Some(n) => format!("ruleset {file} reloaded (generation {generation}); {n}"),
                None => format!("ruleset {file} reloaded (generation {generation})"),
            }
        }
        Err(e) => {
            tracing::error!(file = %file, "reload refused, the running ruleset stays: {e}");
            format!("reload of {file} refused, the running ruleset stays: {e}")
        }
    };
    daemon.events.publish(events::Event {
        kind: "ruleset",
        text,
        json: None,
    });
    // As after a change over the control socket (see [`ReleaseAfterChange`]).
    wasp_io::release_free_heap();
    notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status("running"),
    ]);
}

/// The control handler `wasp run` serves: [`control::Control`]'s answers; after a request
/// that changes the configuration (a ruleset or batch applied, elements added or deleted, a
/// plugin loaded, unloaded or swapped), whether it succeeded or not, the memory it freed goes
/// back to the system ([`wasp_io::release_free_heap`]): a change builds the new ruleset's
/// engines, sets and plugin instances on the client's thread and drops the old ones on the
/// workers', so what the daemon keeps resident would otherwise depend on where those freed
/// chunks lie in the threads' arenas (issue 17). Not after a batch applied as a set
/// transaction: what it freed (the sets' old copies) is what the next one takes again, and
/// handing it back would make every element command fault its copies' pages in anew.
#[derive(Debug)]
pub struct ReleaseAfterChange(pub control::Control);

impl ReleaseAfterChange {
    /// Whether `req` changes the configuration.
    pub fn changes(req: &wasp_ctl::proto::Request) -> bool {
        use wasp_ctl::proto::{ElementOp, Request};
        match req {
            Request::Apply { .. } | Request::Plugin { .. } => true,
            Request::Element(e) => e.op != ElementOp::Get,
            _ => false,
        }
    }
}

impl wasp_ctl::server::Handler for ReleaseAfterChange {
    fn handle(
        &self,
        req: wasp_ctl::proto::Request,
        out: &mut dyn wasp_ctl::server::ReplySink,
    ) -> Result<serde_json::Value, String> {
        let release = Self::changes(&req);
        let txns = self.0.daemon().set_transactions();
        let r = self.0.handle(req, out);
        if release && self.0.daemon().set_transactions() == txns {
            wasp_io::release_free_heap();
        }
        r
    }
}

/// Grow `cfg`'s buffers to hold a whole frame of the largest MTU among `devs` (read from
/// `/sys/class/net/DEV/mtu`; a device without that file keeps the defaults, and opening it
/// says what is wrong): frame = MTU + 18 bytes (Ethernet header and one VLAN tag), rounded up
/// to 64.
pub fn size_buffers(cfg: &mut RingConfig, devs: &[String]) {
    let mtu = devs
        .iter()
        .filter_map(|d| std::fs::read_to_string(format!("/sys/class/net/{d}/mtu")).ok())
        .filter_map(|t| t.trim().parse::<u32>().ok())
        .max()
        .unwrap_or(1500);
    let frame = (mtu.saturating_add(18)).div_ceil(64) * 64;
    if frame <= cfg.rx_buffer_bytes.min(cfg.tx_buffer_bytes) {
        return;
    }
    cfg.rx_buffer_bytes = cfg.rx_buffer_bytes.max(frame);
    cfg.tx_buffer_bytes = cfg.tx_buffer_bytes.max(frame);
    cfg.tpacket.frame_bytes = cfg.tpacket.frame_bytes.max(frame);
    // A TPACKET_V3 block holds a frame and its headers; keep it a multiple of 4096.
    let block = (frame + 128).div_ceil(4096) * 4096;
    cfg.tpacket.block_bytes = cfg.tpacket.block_bytes.max(block);
    // Large buffers: fewer of them (the buffer ring size stays a power of two).
    if frame > 16384 {
        cfg.rx_buffers = cfg.rx_buffers.min(512);
        cfg.tx_buffers = cfg.tx_buffers.min(256);
    }
}

/// Frames a port could not send: refused (no send buffer free) or failed.
pub fn tx_lost(c: &PortStats) -> u64 {
    c.tx_dropped + c.tx_errors
}

/// The statistics `wasp run` prints when it stops.
pub fn final_stats(total: &StatsSnapshot, ports: &[(usize, Vec<(String, PortStats)>)]) -> String {
    let mut s = format!(
        "packets {} bytes {} accepted {} transmitted {} local {} malformed {} dropped {}\n",
        total.packets,
        total.bytes,
        total.accepted,
        total.transmitted,
        total.local,
        total.malformed,
        total.dropped()
    );
    for (name, n) in total.drops.iter().filter(|(_, n)| *n > 0) {
        s += &format!("  dropped {name} {n}\n");
    }
    for (w, counts) in ports {
        for (dev, c) in counts {
            s += &format!(
                "worker {w} {dev}: rx {} ({} bytes, {} dropped) tx {} ({} bytes, {} dropped)\n",
                c.rx_packets,
                c.rx_bytes,
                c.rx_dropped,
                c.tx_packets,
                c.tx_bytes,
                tx_lost(c)
            );
        }
    }
    s
}

#[cfg(test)]
mod flag_tests {
    use super::*;

    #[test]
    fn offload_plugin_flag() {
        assert_eq!(
            parse_offload_plugin("/p/offload_table.wasm:capacity 2 latency-us 100"),
            Ok((
                PathBuf::from("/p/offload_table.wasm"),
                "capacity 2 latency-us 100".to_string()
            ))
        );
        assert_eq!(
            parse_offload_plugin("t.wasm"),
            Ok((PathBuf::from("t.wasm"), String::new()))
        );
        assert_eq!(
            parse_offload_plugin(":capacity 2"),
            Err("expected the path of an offload block component".to_string())
        );
        let p = |s: &str| (PathBuf::from(s), String::new());
        assert_eq!(
            offload_plugin_names(&[p("/a/t.wasm"), p("/b/t.wasm"), p("u.wasm"), p("t.wasm")]),
            ["t", "t-2", "u", "t-3"]
        );
    }

    /// Changes release the freed memory; reads do not.
    #[test]
    fn what_counts_as_a_change() {
        use wasp_ctl::proto::{ElementOp, ElementRequest, ListRequest, Request};
        let element = |op| {
            Request::Element(ElementRequest {
                op,
                family: None,
                table: "t".into(),
                set: "s".into(),
                elements: "{ 10.0.0.1 }".into(),
            })
        };
        let apply = Request::Apply {
            text: "flush ruleset\n".into(),
            name: "f.nft".into(),
            json: false,
            echo: None,
        };
        for (req, change) in [
            (apply, true),
            (element(ElementOp::Add), true),
            (element(ElementOp::Create), true),
            (element(ElementOp::Delete), true),
            (element(ElementOp::Destroy), true),
            (element(ElementOp::Get), false),
            (Request::List(ListRequest::default()), false),
            (Request::Stats, false),
            (Request::Monitor, false),
        ] {
            assert_eq!(ReleaseAfterChange::changes(&req), change, "{req:?}");
        }
    }

    /// The flag through clap, repeated, next to `--hw-offload`.
    #[test]
    fn offload_plugin_flag_parses_repeated() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            run: RunArgs,
        }
        let cli = <Cli as clap::Parser>::try_parse_from([
            "wasp",
            "rules.nft",
            "--hw-offload",
            "4:10",
            "--offload-plugin",
            "a.wasm:capacity 2",
            "--offload-plugin",
            "b.wasm",
        ])
        .expect("parse");
        assert_eq!(cli.run.hw_offload, Some((4, 10)));
        assert_eq!(
            cli.run.offload_plugins,
            [
                (PathBuf::from("a.wasm"), "capacity 2".to_string()),
                (PathBuf::from("b.wasm"), String::new())
            ]
        );
    }
}
