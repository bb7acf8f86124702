//! `wasp run --metrics ADDR:PORT`: the daemon's counters for Prometheus at `GET /metrics`,
//! encoded with `prometheus-client`: OpenMetrics text for a client that asks for it (`Accept:
//! application/openmetrics-text`, as Prometheus does), else Prometheus' text format 0.0.4
//! ([`prometheus_text`]).
//!
//! A scrape never asks a worker anything. It reads what the workers keep for anyone to read:
//! their statistics (atomics they add to once per vector, [`super::stats::WorkerStats`]) and what each
//! publishes every [`PUBLISH_EVERY_NS`] into its [`Published`] slot between two vectors (port
//! counts, which cost a system call per port; its engine's per-base-chain walks; its plugins'
//! calls, swaps and failures). Conntrack and flowtables are shared tables, counted under their
//! own shard locks. So a scrape costs the workers one copy of a few counters four times a
//! second, whether or not anyone scrapes.
//!
//! Families (`worker` is the worker's index; counters end in `_total`):
//! - `wasp_port_{rx,tx}_packets_total`, `wasp_port_{rx,tx}_bytes_total`,
//!   `wasp_port_{rx,tx}_dropped_total` (ring drops: the kernel's `PACKET_STATISTICS`, frames
//!   wasp could not send), `wasp_port_ring_occupancy_percent`: per `port` and `worker`;
//! - `wasp_worker_{packets,bytes,vectors,accepted,transmitted,local,malformed,rejects}_total`,
//!   `wasp_log_lines_total`, `wasp_log_suppressed_total` and `wasp_drops_total` by `reason`,
//!   per `worker`;
//! - `wasp_chain_packets_total` and `wasp_chain_verdicts_total` (`verdict` accept or drop)
//!   per base chain (`family`, `table`, `chain`, `hook`, `device`) and `worker`, since the
//!   running ruleset was compiled;
//! - `wasp_plugin_calls_total`, `wasp_plugin_swaps_total`, `wasp_plugin_failures_total` (by
//!   `reason`: deadline, memory, trap, malformed, skipped) per `plugin` and `worker`;
//! - `wasp_conntrack_entries` by `proto` and `state`, `wasp_conntrack_events_total` by `event`
//!   (the kernel's `conntrack -S` names);
//! - `wasp_flowtable_flows` by `flowtable` and `where` (`software` or the offload block's
//!   name), `wasp_flowtable_{added,removed,offload_refused}_total`;
//! - `wasp_ruleset_generation`, `wasp_reloads_total` by `result` (ok, refused),
//!   `wasp_reload_last_ok` (1 when the last SIGHUP reload applied).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use wasp_io::PortStats;
use wasp_plugin::PluginCounts;

use super::state::Daemon;

/// How often a worker publishes its port, chain and plugin counts, ns.
pub const PUBLISH_EVERY_NS: u64 = 250_000_000;

/// One base chain's walks in one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainView {
    /// Table family (`ip`, `inet`, `netdev`, ...).
    pub family: String,
    /// Table name.
    pub table: String,
    /// Chain name.
    pub chain: String,
    /// Hook name.
    pub hook: &'static str,
    /// Device of a netdev (or inet ingress) chain; empty for the IP hooks.
    pub device: String,
    /// Packets whose walk entered the chain.
    pub packets: u64,
    /// Walks that ended in accept.
    pub accepted: u64,
    /// Walks that ended in drop.
    pub dropped: u64,
}

/// What a worker last published.
#[derive(Debug, Clone, Default)]
pub struct WorkerView {
    /// Counts per port (device name, counts).
    pub ports: Vec<(String, PortStats)>,
    /// Per base chain of the running ruleset.
    pub chains: Vec<ChainView>,
    /// Per plugin of the running ruleset.
    pub plugins: Vec<PluginCounts>,
}

/// A worker's published counts: written by the worker every [`PUBLISH_EVERY_NS`], read by
/// scrapes.
#[derive(Debug, Default)]
pub struct Published {
    view: Mutex<WorkerView>,
}

impl Published {
    /// Replace the published counts.
    pub fn store(&self, v: WorkerView) {
        *self.view.lock().unwrap_or_else(|e| e.into_inner()) = v;
    }

    /// A copy of the published counts.
    pub fn load(&self) -> WorkerView {
        self.view.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

type Labels = Vec<(String, String)>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

/// A set of counter families filled once and registered.
struct Counters(Family<Labels, Counter>);

impl Counters {
    fn new() -> Self {
        Counters(Family::default())
    }
    fn add(&self, l: &[(&str, &str)], v: u64) {
        self.0.get_or_create(&labels(l)).inc_by(v);
    }
}

/// A set of gauge families.
struct Gauges(Family<Labels, Gauge>);

impl Gauges {
    fn new() -> Self {
        Gauges(Family::default())
    }
    fn set(&self, l: &[(&str, &str)], v: u64) {
        self.0
            .get_or_create(&labels(l))
            .set(i64::try_from(v).unwrap_or(i64::MAX));
    }
}

/// The OpenMetrics text of the daemon's counters now (ends with `# EOF`).
pub fn render(d: &Daemon, now_ns: u64) -> String {
    let mut reg = Registry::default();
    let counter = |reg: &mut Registry, name: &str, help: &str, unit: Option<Unit>| {
        let c = Counters::new();
        match unit {
            Some(u) => reg.register_with_unit(name, help, u, c.0.clone()),
            None => reg.register(name, help, c.0.clone()),
        }
        c
    };
    let gauge = |reg: &mut Registry, name: &str, help: &str| {
        let g = Gauges::new();
        reg.register(name, help, g.0.clone());
        g
    };
    // Ports.
    let rx_p = counter(&mut reg, "wasp_port_rx_packets", "Frames received", None);
    let rx_b = counter(
        &mut reg,
        "wasp_port_rx",
        "Bytes received",
        Some(Unit::Bytes),
    );
    let rx_d = counter(
        &mut reg,
        "wasp_port_rx_dropped",
        "Frames the kernel dropped before wasp read them (ring full)",
        None,
    );
    let tx_p = counter(&mut reg, "wasp_port_tx_packets", "Frames sent", None);
    let tx_b = counter(&mut reg, "wasp_port_tx", "Bytes sent", Some(Unit::Bytes));
    let tx_d = counter(
        &mut reg,
        "wasp_port_tx_dropped",
        "Frames wasp could not send (ring full, send errors)",
        None,
    );
    let occ = gauge(
        &mut reg,
        "wasp_port_ring_occupancy_percent",
        "Receive ring occupancy at the last poll, percent",
    );
    // Workers.
    let w_names: [(&str, &str); 8] = [
        ("wasp_worker_packets", "Packets received and classified"),
        ("wasp_worker_vectors", "Vectors processed"),
        (
            "wasp_worker_accepted",
            "Packets whose final verdict was accept",
        ),
        ("wasp_worker_transmitted", "Packets sent on an output port"),
        (
            "wasp_worker_local",
            "Accepted packets with nowhere to go (left to the host)",
        ),
        (
            "wasp_worker_malformed",
            "Packets with headers that could not be parsed",
        ),
        ("wasp_worker_rejects", "Replies made by reject statements"),
        ("wasp_log_lines", "Lines log statements made"),
    ];
    let w_counters: Vec<Counters> = w_names
        .iter()
        .map(|(n, h)| counter(&mut reg, n, h, None))
        .collect();
    let w_bytes = counter(&mut reg, "wasp_worker", "Bytes received", Some(Unit::Bytes));
    let log_sup = counter(
        &mut reg,
        "wasp_log_suppressed",
        "Log lines over the worker's rate limit",
        None,
    );
    let drops = counter(&mut reg, "wasp_drops", "Packets dropped, by reason", None);
    // Chains and plugins.
    let ch_p = counter(
        &mut reg,
        "wasp_chain_packets",
        "Packets whose walk entered the base chain",
        None,
    );
    let ch_v = counter(
        &mut reg,
        "wasp_chain_verdicts",
        "Walks of the base chain by how they ended",
        None,
    );
    let pl_calls = counter(&mut reg, "wasp_plugin_calls", "Calls into the plugin", None);
    let pl_swaps = counter(&mut reg, "wasp_plugin_swaps", "Swaps of the plugin", None);
    let pl_fail = counter(
        &mut reg,
        "wasp_plugin_failures",
        "Failed or skipped plugin calls (their packets got the fallback), by reason",
        None,
    );
    for (i, w) in d.workers.iter().enumerate() {
        let wid = i.to_string();
        let worker = wid.as_str();
        let s = w.stats.snapshot();
        let vals = [
            s.packets,
            s.vectors,
            s.accepted,
            s.transmitted,
            s.local,
            s.malformed,
            s.rejects,
            s.logged,
        ];
        for (c, v) in w_counters.iter().zip(vals) {
            c.add(&[("worker", worker)], v);
        }
        w_bytes.add(&[("worker", worker)], s.bytes);
        log_sup.add(&[("worker", worker)], s.log_suppressed);
        for (reason, n) in &s.drops {
            drops.add(&[("worker", worker), ("reason", reason)], *n);
        }
        let v = w.published.load();
        for (dev, c) in &v.ports {
            let l = [("port", dev.as_str()), ("worker", worker)];
            rx_p.add(&l, c.rx_packets);
            rx_b.add(&l, c.rx_bytes);
            rx_d.add(&l, c.rx_dropped);
            tx_p.add(&l, c.tx_packets);
            tx_b.add(&l, c.tx_bytes);
            tx_d.add(&l, super::tx_lost(c));
            occ.set(&l, u64::from(c.ring_occupancy_pct));
        }
        for c in &v.chains {
            let base = [
                ("family", c.family.as_str()),
                ("table", c.table.as_str()),
                ("chain", c.chain.as_str()),
                ("hook", c.hook),
                ("device", c.device.as_str()),
                ("worker", worker),
            ];
            ch_p.add(&base, c.packets);
            for (verdict, n) in [("accept", c.accepted), ("drop", c.dropped)] {
                let mut l = base.to_vec();
                l.push(("verdict", verdict));
                ch_v.add(&l, n);
            }
        }
        for p in &v.plugins {
            let l = [("plugin", p.name.as_str()), ("worker", worker)];
            pl_calls.add(&l, p.calls);
            pl_swaps.add(&l, p.swaps);
            let f = &p.failures;
            for (reason, n) in [
                ("deadline", f.deadline),
                ("memory", f.memory),
                ("trap", f.trap),
                ("malformed", f.malformed),
                ("skipped", f.skipped),
            ] {
                pl_fail.add(&[l[0], l[1], ("reason", reason)], n);
            }
        }
    }
    // Conntrack.
    let ct_e = gauge(
        &mut reg,
        "wasp_conntrack_entries",
        "Confirmed connections, by protocol and state",
    );
    let ct_ev = counter(
        &mut reg,
        "wasp_conntrack_events",
        "Connection tracking statistics (conntrack -S), by event",
        None,
    );
    let ct = d.conntrack();
    for (proto, state, n) in ct.state_counts(now_ns) {
        ct_e.set(&[("proto", proto), ("state", state)], n);
    }
    let st = ct.stats();
    for (event, n) in [
        ("found", st.found),
        ("invalid", st.invalid),
        ("new", st.new),
        ("drop", st.drop),
        ("early_drop", st.early_drop),
        ("insert_failed", st.insert_failed),
        ("clash_resolve", st.clash_resolve),
    ] {
        ct_ev.add(&[("event", event)], n);
    }
    // Flowtables.
    let ft_flows = gauge(
        &mut reg,
        "wasp_flowtable_flows",
        "Flows in the flowtable, by where they are forwarded",
    );
    let ft_c: Vec<Counters> = [
        ("wasp_flowtable_added", "Flows added"),
        ("wasp_flowtable_removed", "Flows removed"),
        (
            "wasp_flowtable_offload_refused",
            "Offload block adds refused (the flow stayed in software)",
        ),
    ]
    .iter()
    .map(|(n, h)| counter(&mut reg, n, h, None))
    .collect();
    if let Some(nf) = d.netfilter() {
        for ft in nf.flowtables() {
            let name = ft.config().name.as_str();
            let mut by_where: std::collections::BTreeMap<String, u64> =
                std::collections::BTreeMap::new();
            by_where.insert("software".into(), 0);
            for f in ft.flows(now_ns) {
                let w = match f.offload {
                    wasp_flowtable::OffloadState::Software
                    | wasp_flowtable::OffloadState::Pending { .. } => "software".to_string(),
                    wasp_flowtable::OffloadState::Offloaded { block } => block,
                };
                *by_where.entry(w).or_default() += 1;
            }
            for (w, n) in &by_where {
                ft_flows.set(&[("flowtable", name), ("where", w.as_str())], *n);
            }
            let s = ft.stats();
            for (c, v) in ft_c.iter().zip([s.added, s.removed, s.offload_refused]) {
                c.add(&[("flowtable", name)], v);
            }
        }
    }
    // The ruleset.
    let generation = gauge(
        &mut reg,
        "wasp_ruleset_generation",
        "Generation of the running ruleset (every applied change adds one)",
    );
    generation.set(&[], d.generation());
    let reloads = counter(&mut reg, "wasp_reloads", "SIGHUP reloads, by result", None);
    let (ok, refused, last_ok) = d.reload_counts();
    reloads.add(&[("result", "ok")], ok);
    reloads.add(&[("result", "refused")], refused);
    let last = gauge(
        &mut reg,
        "wasp_reload_last_ok",
        "1 when the last SIGHUP reload applied, 0 when it was refused (1 before any)",
    );
    last.set(&[], u64::from(last_ok));
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &reg);
    out
}

/// The content type of OpenMetrics text.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of Prometheus' text format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// OpenMetrics text as Prometheus' text exposition format (0.0.4, what `promtool check
/// metrics` reads and what a client that does not ask for OpenMetrics gets): a counter's
/// `# HELP` and `# TYPE` name its samples (`..._total`), no `# UNIT` lines, no `# EOF`.
pub fn prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if line.starts_with("# HELP ") {
            // Written after the family's `# TYPE` tells whether it is a counter.
            help = Some(line);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let shown = if kind == "counter" {
                format!("{name}_total")
            } else {
                name.to_string()
            };
            if let Some(h) = help.take() {
                let text = h
                    .strip_prefix("# HELP ")
                    .and_then(|x| x.split_once(' '))
                    .map_or("", |(_, t)| t);
                out.push_str(&format!("# HELP {shown} {text}\n"));
            }
            out.push_str(&format!("# TYPE {shown} {kind}\n"));
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Serve `GET /metrics` on `addr` from a thread of its own until `stop` is set. Each
/// connection gets one answer and is closed; any other path is a 404.
///
/// # Errors
/// The bind error (address in use, not allowed).
pub fn serve(
    addr: SocketAddr,
    daemon: Arc<Daemon>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<(SocketAddr, std::thread::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let h = std::thread::Builder::new()
        .name("wasp-metrics".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((s, _)) => {
                        if let Err(e) = answer(s, &daemon) {
                            tracing::debug!("metrics: {e}");
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(e) => tracing::warn!("metrics: accept: {e}"),
                }
            }
        })?;
    Ok((bound, h))
}

/// Read one request's head and answer it.
fn answer(s: TcpStream, d: &Daemon) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut r = BufReader::new(s.try_clone()?);
    let mut line = String::new();
    r.read_line(&mut line)?;
    // The rest of the head, up to the empty line.
    let mut h = String::new();
    let mut openmetrics = false;
    while r.read_line(&mut h)? > 0 && h.trim_end() != "" {
        let lower = h.to_ascii_lowercase();
        if lower.starts_with("accept:") && lower.contains("application/openmetrics-text") {
            openmetrics = true;
        }
        h.clear();
    }
    let mut words = line.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let mut s = s;
    if method == "GET" && (path == "/metrics" || path.starts_with("/metrics?")) {
        let text = render(d, d.clock.now_ns());
        let (ctype, body) = if openmetrics {
            (OPENMETRICS, text)
        } else {
            (PROMETHEUS_TEXT, prometheus_text(&text))
        };
        write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
    } else {
        let body = "wasp serves GET /metrics\n";
        write!(
            s,
            "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
    }
    s.flush()
}

/// What a worker publishes: its ports' counts, its engine's base chains and its plugins.
pub fn view(ports: Vec<(String, PortStats)>, dp: &crate::datapath::Datapath) -> WorkerView {
    let e = &dp.engine;
    let chains = e
        .all_chain_stats()
        .into_iter()
        .map(|(hook, dev, c)| ChainView {
            family: e.table_family(c.table).map_or("", |f| f.name()).to_string(),
            table: e.table_name(c.table).to_string(),
            chain: e.chain_name(c.table, c.chain).to_string(),
            hook: hook.name(),
            device: dev.to_string(),
            packets: c.packets,
            accepted: c.accepted,
            dropped: c.dropped,
        })
        .collect();
    let plugins = dp
        .runtime
        .as_ref()
        .map(|rt| rt.plugin_counts())
        .unwrap_or_default();
    WorkerView {
        ports,
        chains,
        plugins,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counters' HELP and TYPE name their `_total` samples, gauges keep their names, units and
    /// the end marker go: the Prometheus text format.
    #[test]
    fn openmetrics_becomes_prometheus_text() {
        let om = "# HELP wasp_port_rx_bytes Bytes received.\n# TYPE wasp_port_rx_bytes counter\n# UNIT wasp_port_rx_bytes bytes\nwasp_port_rx_bytes_total{port=\"w0\"} 64\n# HELP wasp_reload_last_ok 1 when ok.\n# TYPE wasp_reload_last_ok gauge\nwasp_reload_last_ok 1\n# EOF\n";
        assert_eq!(
            prometheus_text(om),
            "# HELP wasp_port_rx_bytes_total Bytes received.\n# TYPE wasp_port_rx_bytes_total counter\nwasp_port_rx_bytes_total{port=\"w0\"} 64\n# HELP wasp_reload_last_ok 1 when ok.\n# TYPE wasp_reload_last_ok gauge\nwasp_reload_last_ok 1\n"
        );
    }
}
