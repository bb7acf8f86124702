//! The daemon's answers on the control socket ([`wasp_ctl::server::Handler`]): reads come
//! from a snapshot of the running ruleset with every counter summed over the workers; changes
//! (`-f FILE`, element add/delete, reset, plugin swap) go through [`Daemon`], which builds the
//! new configuration first and leaves the running one untouched when anything fails.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value as Json;
use wasp_ctl::proto::{
    self, Echo, ElementOp, ElementRequest, PluginOp, Reply, Request, ResetRequest,
};
use wasp_ctl::server::{Handler, ReplySink, ReplySinkExt};
use wasp_ruleset::{PrintOptions, Ruleset};

use super::reset::Reset;
use super::state::Daemon;
use super::stats::StatsSnapshot;

/// The handler `wasp run` serves.
#[derive(Debug)]
pub struct Control {
    daemon: Arc<Daemon>,
}

impl Control {
    /// Answer for `daemon`.
    pub fn new(daemon: Arc<Daemon>) -> Self {
        Control { daemon }
    }

    /// The daemon it answers for.
    pub fn daemon(&self) -> &Arc<Daemon> {
        &self.daemon
    }

    /// Apply `text` (a ruleset file or a batch of commands, as `nft -f`) to the running
    /// ruleset: all or nothing ([`Daemon::apply`]).
    /// Apply a batch; tell the monitors what it changed, and the client too with `echo`.
    fn apply(
        &self,
        text: &str,
        name: &str,
        echo: Option<Echo>,
    ) -> Result<Json, crate::error::Error> {
        let report = echo.is_some() || self.daemon.events.subscribers() > 0;
        let (generation, changes) = self.daemon.apply_reporting(text, name, report)?;
        self.announce(&changes);
        let mut reply = serde_json::json!({ "generation": generation });
        if let Some(e) = echo {
            reply["echo"] = serde_json::json!(wasp_ctl::changes::echo(
                &changes, e.handles, e.json, generation
            ));
        }
        Ok(reply)
    }

    /// `reset ...`: zero what `req` picks ([`Daemon::reset`]) and list it with the values it
    /// had.
    fn reset(&self, req: &ResetRequest, out: &mut dyn ReplySink) -> Result<Json, String> {
        let (before, what) = self.daemon.reset(req).map_err(|e| e.to_string())?;
        let text = reset_text(&before, req, &what)?;
        out.text(&text).map_err(|e| format!("client gone: {e}"))?;
        Ok(Json::Null)
    }

    /// Tell `wasp ctl monitor` what a successful change did, line by line as `nft monitor`
    /// prints it (`add rule ip t c tcp dport 22 accept`), each with its libnftables JSON form
    /// for `wasp ctl -j monitor`.
    fn announce(&self, changes: &[wasp_ctl::changes::Change]) {
        for c in changes {
            self.daemon.events.publish(super::events::Event {
                kind: "ruleset",
                text: c.text(false),
                json: Some(c.json().to_string()),
            });
        }
    }

    /// `list conntrack`: a `conntrack -L` line per connection.
    fn conntrack(&self, out: &mut dyn ReplySink) -> Result<Json, String> {
        let now = self.daemon.clock.now_ns();
        let mut text = String::new();
        for e in self.daemon.conntrack.entries(now) {
            text.push_str(&e.to_string());
            text.push('\n');
        }
        let _ = out.send(&Reply::Text(text));
        Ok(Json::Null)
    }

    /// `plugin state`: each worker's plugin use sites and what they list.
    fn plugin_state(&self, out: &mut dyn ReplySink) -> Result<Json, String> {
        let mut text = String::new();
        for s in self.daemon.plugin_states().map_err(|e| e.to_string())? {
            text.push_str(&format!(
                "worker {} {} {}: {}\n",
                s.worker,
                s.at,
                s.plugin,
                s.state.join("; ")
            ));
        }
        let _ = out.send(&Reply::Text(text));
        Ok(Json::Null)
    }

    /// `list flowtable NAME`: the flows of flowtable `name` (every flowtable when `None`).
    fn flows(&self, name: Option<&str>, out: &mut dyn ReplySink) -> Result<Json, String> {
        let now = self.daemon.clock.now_ns();
        let nf = self.daemon.netfilter();
        let tables: Vec<_> = nf
            .iter()
            .flat_map(|n| n.flowtables().iter())
            .filter(|f| name.is_none_or(|n| f.config().name == n))
            .collect();
        if let Some(n) = name
            && tables.is_empty()
        {
            return Err(format!(
                "No such file or directory: flowtable {n} does not exist"
            ));
        }
        let mut text = String::new();
        for ft in tables {
            text.push_str(&wasp_gateway::netfilter::flows_text(ft, now));
        }
        let _ = out.send(&Reply::Text(text));
        Ok(Json::Null)
    }

    fn stats(&self) -> Result<Json, String> {
        let per = self.daemon.stats();
        let total = StatsSnapshot::sum(&per);
        let ports = self.daemon.port_counts().map_err(|e| e.to_string())?;
        let s = proto::Stats {
            ports: ports
                .into_iter()
                .map(|(w, dev, c)| proto::PortStats {
                    name: format!("{dev}@{w}"),
                    rx_packets: c.rx_packets,
                    rx_bytes: c.rx_bytes,
                    tx_packets: c.tx_packets,
                    tx_bytes: c.tx_bytes,
                    rx_dropped: c.rx_dropped,
                    tx_dropped: super::tx_lost(&c),
                    ring_occupancy_pct: c.ring_occupancy_pct,
                })
                .collect(),
            workers: per
                .iter()
                .enumerate()
                .map(|(i, w)| proto::WorkerStats {
                    id: i as u32,
                    packets: w.packets,
                    vectors: w.vectors,
                    dropped: w.dropped(),
                })
                .collect(),
            drops: total.drops.iter().cloned().collect::<BTreeMap<_, _>>(),
            rejects: total.rejects,
            logged: total.logged,
            log_suppressed: total.log_suppressed,
        };
        serde_json::to_value(s).map_err(|e| e.to_string())
    }

    /// `monitor trace`: every traced walk the workers publish, formatted with the names of
    /// the ruleset generation it ran (read again when the generation changes).
    fn monitor_trace(&self, out: &mut dyn ReplySink) -> Result<Json, String> {
        let sub = self.daemon.events.subscribe_traces();
        let mut names: Option<(u64, crate::names::Names)> = None;
        loop {
            if out.closed() {
                return Ok(Json::Null);
            }
            match sub.rx.recv_timeout(Duration::from_millis(100)) {
                Ok(rec) => {
                    if names.as_ref().is_none_or(|(g, _)| *g != rec.generation) {
                        names = Some(self.daemon.trace_names());
                    }
                    let Some((_, n)) = names.as_ref() else {
                        continue;
                    };
                    let text = crate::trace::format_trace(rec.id, &rec.events, n, &rec.packet);
                    for line in text.lines() {
                        if out.event(line).is_err() {
                            return Ok(Json::Null);
                        }
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err("the daemon is stopping".to_string());
                }
            }
        }
    }

    /// `monitor` (`json`: `-j monitor`): every event from now on, one line each.
    fn monitor(&self, out: &mut dyn ReplySink, json: bool) -> Result<Json, String> {
        let rx = self.daemon.events.subscribe();
        loop {
            if out.closed() {
                return Ok(Json::Null);
            }
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(ev) => {
                    let line = match (json, ev.json) {
                        (false, _) => ev.text,
                        (true, Some(j)) => j,
                        (true, None) => {
                            serde_json::json!({"wasp": {"kind": ev.kind, "text": ev.text}})
                                .to_string()
                        }
                    };
                    if out.event(&line).is_err() {
                        return Ok(Json::Null);
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err("the daemon is stopping".to_string());
                }
            }
        }
    }

    fn plugin(&self, op: PluginOp, name: &str, path: Option<&str>) -> Result<Json, String> {
        match op {
            PluginOp::Swap => {
                let path = path.ok_or("plugin swap needs NAME PATH")?;
                let outcome = self
                    .daemon
                    .swap_plugin(name, &PathBuf::from(path))
                    .map_err(|e| e.to_string())?;
                Ok(serde_json::json!({ "swapped": name, "workers": outcome }))
            }
            PluginOp::Load => {
                let path = path.ok_or("plugin load needs NAME PATH")?;
                self.daemon
                    .load_plugin(name, &PathBuf::from(path))
                    .map_err(|e| e.to_string())?;
                Ok(serde_json::json!({ "loaded": name }))
            }
            PluginOp::Unload => {
                self.daemon.unload_plugin(name).map_err(|e| e.to_string())?;
                Ok(serde_json::json!({ "unloaded": name }))
            }
        }
    }
}

/// What `req` (resolved as `what`) lists: the reset objects of `before` (the ruleset with the
/// values they had), as nft prints them.
fn reset_text(before: &Ruleset, req: &ResetRequest, what: &Reset) -> Result<String, String> {
    let opts = PrintOptions::default();
    let table = |t: Option<u32>| t.and_then(|t| before.tables.get(t as usize));
    Ok(match (req, what) {
        (
            ResetRequest::Element {
                family,
                table,
                set,
                elements,
            },
            _,
        ) => {
            let e = ElementRequest {
                op: ElementOp::Get,
                family: family.clone(),
                table: table.clone(),
                set: set.clone(),
                elements: elements.clone(),
            };
            wasp_ctl::element::elements_text(before, &e, true)?
        }
        (_, Reset::Quotas { table: t }) => {
            // The tables that hold quotas, listed as `list quotas` lists them (nft 1.0.6
            // prints both alike, but a reset names no table without a quota).
            let mut only = Ruleset {
                table_handle: 0,
                tables: Vec::new(),
                sources: Vec::new(),
            };
            for (i, tb) in before.tables.iter().enumerate() {
                if t.is_some_and(|t| t as usize != i) || tb.quotas.is_empty() {
                    continue;
                }
                let mut shown = tb.header();
                shown.quotas.clone_from(&tb.quotas);
                only.tables.push(shown);
            }
            let list = wasp_ctl::proto::ListRequest {
                what: wasp_ctl::proto::ListWhat::Quotas,
                family: None,
                table: None,
                name: None,
                flags: wasp_ctl::proto::ListFlags::default(),
            };
            wasp_ctl::listing::render(&only, &list)?.concat()
        }
        (_, Reset::Object { table, name, quota }) => {
            // The table with that object only, as `nft reset counter` lists it.
            let Some(tb) = before.tables.get(*table as usize) else {
                return Ok(String::new());
            };
            let mut shown = tb.header();
            match quota {
                true => {
                    shown.quotas = tb
                        .quotas
                        .iter()
                        .filter(|q| &q.name == name)
                        .cloned()
                        .collect()
                }
                false => {
                    shown.counters = tb
                        .counters
                        .iter()
                        .filter(|c| &c.name == name)
                        .cloned()
                        .collect()
                }
            }
            wasp_ruleset::print_table(&shown, &opts)
        }
        (
            _,
            Reset::Rules {
                table: t,
                chain: Some(c),
            },
        ) => match table(*t) {
            Some(tb) => {
                let mut shown = tb.header();
                shown.chains = tb.chains.get(*c as usize).cloned().into_iter().collect();
                wasp_ruleset::print_table(&shown, &opts)
            }
            None => String::new(),
        },
        (_, Reset::Rules { table: t, .. } | Reset::Counters { table: t }) => match table(*t) {
            Some(tb) => wasp_ruleset::print_table(tb, &opts),
            None => wasp_ruleset::print_ruleset_with(before, &opts),
        },
        (_, Reset::Elements { .. }) => String::new(),
    })
}

/// `true` for a table or set name nft would take as an identifier (letters, digits, `_`, `.`,
/// `-`, `/`, starting with a letter or `_`, as nft's scanner reads identifiers).
fn identifier(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '.' | '-' | '/'))
}

/// Check an element request before its text becomes a command: one `{ ... }` block of
/// elements (no other braces, no `;`, newline or comment that could end the command and start
/// another), identifiers for the table and set, a family nft knows.
///
/// # Errors
/// What is wrong, for the error reply.
/// A request's text translated from JSON into nft commands (`None` when it is nft text).
///
/// # Errors
/// The document is not JSON or not libnftables' schema (with its place).
fn json_text(
    text: &str,
    name: &str,
    json: bool,
) -> Result<Option<wasp_ruleset::json_in::Translation>, String> {
    // nft reads a `-j` file as JSON and falls back to its own syntax when that fails.
    if !json || !crate::check::looks_like_json(text) {
        return Ok(None);
    }
    wasp_ruleset::json_in::translate(text, name)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// An error of a batch as the client reads it: told in its JSON document's terms (the
/// command and statement it came from) when the batch was JSON.
fn relocated(e: crate::error::Error, t: Option<&wasp_ruleset::json_in::Translation>) -> String {
    match (e, t) {
        (crate::error::Error::Ruleset(r), Some(t)) => t.relocate(r).to_string(),
        (e, _) => e.to_string(),
    }
}

fn check_element(e: &ElementRequest) -> Result<(), String> {
    if let Some(f) = &e.family
        && !matches!(
            f.as_str(),
            "ip" | "ip6" | "inet" | "arp" | "bridge" | "netdev"
        )
    {
        return Err(format!(
            "unknown family `{f}` (ip, ip6, inet, arp, bridge or netdev)"
        ));
    }
    for (what, name) in [("table", &e.table), ("set", &e.set)] {
        if !identifier(name) {
            return Err(format!("`{name}` is not a {what} name"));
        }
    }
    let t = e.elements.trim();
    let inner = t
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .ok_or_else(|| format!("expected elements in braces, `{{ ... }}`, found `{t}`"))?;
    if let Some(c) = inner
        .chars()
        .find(|c| matches!(c, '{' | '}' | ';' | '\n' | '\r' | '#'))
    {
        return Err(format!(
            "unexpected `{}` in the elements: one `{{ ... }}` block of elements, nothing else",
            c.escape_default()
        ));
    }
    Ok(())
}

impl Handler for Control {
    fn handle(&self, req: Request, out: &mut dyn ReplySink) -> Result<Json, String> {
        if let Request::Element(e) = &req {
            check_element(e)?;
        }
        match &req {
            Request::Check { text, name, json } => {
                let t = json_text(text, name, *json)?;
                self.daemon
                    .check(t.as_ref().map_or(text, |t| &t.text), name)
                    .map_err(|e| relocated(e, t.as_ref()))?;
                return Ok(Json::Null);
            }
            Request::Apply {
                text,
                name,
                json,
                echo,
            } => {
                // A JSON batch is applied as the nft commands it translates into; errors
                // name the JSON command.
                let t = json_text(text, name, *json)?;
                let text = t.as_ref().map_or(text, |t| &t.text);
                return self
                    .apply(text, name, *echo)
                    .map_err(|e| relocated(e, t.as_ref()));
            }
            Request::Element(e) if e.op != ElementOp::Get => {
                let cmd = e.command_text();
                return self
                    .apply(&cmd, "<element>", None)
                    .map_err(|e| e.to_string());
            }
            Request::Reset(r) => return self.reset(r, out),
            Request::Plugin { op, name, path } => return self.plugin(*op, name, path.as_deref()),
            Request::Monitor => return self.monitor(out, false),
            Request::MonitorJson => return self.monitor(out, true),
            Request::MonitorTrace => return self.monitor_trace(out),
            Request::Stats => return self.stats(),
            Request::PluginState => return self.plugin_state(out),
            Request::Conntrack => return self.conntrack(out),
            Request::ConntrackDelete(f) => {
                let pick = super::ct_filter::ConnPick::new(f)?;
                let n = self.daemon.delete_conns(&pick);
                return Ok(serde_json::json!({ "deleted": n }));
            }
            Request::Flows { name } => return self.flows(name.as_deref(), out),
            _ => {}
        }
        let (ruleset, _) = self.daemon.ruleset().map_err(|e| e.to_string())?;
        match wasp_ctl::readonly::answer(&ruleset, &req, out) {
            Some(r) => r,
            None => {
                let _ = out.send(&Reply::Text(String::new()));
                Err("request not handled".to_string())
            }
        }
    }
}

#[cfg(test)]
mod stats_tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use wasp_gateway::Forwarder;

    use super::*;
    use crate::daemon::events::EventBus;
    use crate::daemon::mailbox::Mailbox;
    use crate::daemon::stats::WorkerStats;
    use crate::daemon::worker::{Clock, Worker, WorkerLinks};
    use wasp_io::{Frame, IoError, PortGroup, PortInfo, PortStats};

    /// Ports that receive nothing and report fixed counts (as a port group's after a poll).
    struct Fixed(Vec<PortInfo>, PortStats);

    impl PortGroup for Fixed {
        fn ports(&self) -> &[PortInfo] {
            &self.0
        }
        fn poll(
            &mut self,
            _min: usize,
            _max: usize,
            timeout: Duration,
            _on_rx: &mut dyn FnMut(&[Frame<'_>]),
        ) -> Result<usize, IoError> {
            std::thread::sleep(timeout.min(Duration::from_millis(1)));
            Ok(0)
        }
        fn queue(&mut self, _: usize, _: &[u8]) -> bool {
            false
        }
        fn flush(&mut self) -> Result<(), IoError> {
            Ok(())
        }
        fn stats(&self) -> Vec<PortStats> {
            vec![self.1]
        }
    }

    #[test]
    fn stats_report_each_workers_ring_occupancy() {
        let text = "table netdev t {\n chain c {\n  type filter hook ingress device \"w0\" priority 0; policy accept;\n }\n}\n";
        let ruleset = wasp_ruleset::parse_str(text, "t.nft").expect("ruleset");
        let stop = Arc::new(AtomicBool::new(false));
        let events = Arc::new(EventBus::default());
        let clock = Clock::new();
        let links: Vec<WorkerLinks> = (0..2)
            .map(|_| WorkerLinks {
                mailbox: Arc::new(Mailbox::default()),
                stats: Arc::new(WorkerStats::default()),
                events: events.clone(),
                stop: stop.clone(),
                clock,
                published: Arc::default(),
            })
            .collect();
        let (daemon, bundles) =
            Daemon::new(ruleset, "t.nft".into(), links.clone(), events, clock).expect("daemon");
        let threads: Vec<_> = bundles
            .into_iter()
            .zip(links)
            .enumerate()
            .map(|(i, (b, l))| {
                // Worker 0's ring 3 of 8 blocks full (37 %), worker 1's empty.
                let w0 = PortInfo {
                    name: "w0".into(),
                    ifindex: 0,
                    mac: [0; 6],
                    mtu: 1500,
                };
                let ports = Fixed(
                    vec![w0],
                    PortStats {
                        rx_packets: 10 + i as u64,
                        ring_occupancy_pct: if i == 0 { 37 } else { 0 },
                        ..PortStats::default()
                    },
                );
                std::thread::spawn(move || {
                    Worker::new(i, ports, b, Forwarder::new(None), l)
                        .run()
                        .map(|_| ())
                })
            })
            .collect();
        let control = Control::new(Arc::new(daemon));
        let s = control.stats().expect("stats");
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().expect("worker").expect("worker loop");
        }
        let ports = s["ports"].as_array().expect("ports");
        let by_name = |n: &str| {
            ports
                .iter()
                .find(|p| p["name"] == n)
                .unwrap_or_else(|| panic!("{n} in {s}"))
        };
        assert_eq!(by_name("w0@0")["ring_occupancy_pct"], 37);
        assert_eq!(by_name("w0@0")["rx_packets"], 10);
        assert_eq!(by_name("w0@1")["ring_occupancy_pct"], 0);
        // The text `wasp ctl stats` prints from it: the ring% column.
        let stats: proto::Stats = serde_json::from_value(s.clone()).expect("proto stats");
        let text = crate::ctl::stats_text(&stats);
        let line = text
            .lines()
            .find(|l| l.starts_with("w0@0"))
            .expect("w0@0 line");
        assert!(text.lines().next().unwrap().ends_with("ring%"), "{text}");
        assert!(line.ends_with(" 37"), "{line}");
    }
}
