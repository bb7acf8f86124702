//! The daemon's answers on the control socket ([`wasp_ctl::server::Handler`]): reads come
//! from a snapshot of the running ruleset with every counter summed over the workers; changes
//! (`-f FILE`, element add/delete, reset, plugin swap) go through [`Daemon`], which builds the
//! new configuration first and leaves the running one untouched when anything fails.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value as Json;
use wasp_ctl::proto::{self, ElementOp, PluginOp, Reply, Request, ResetRequest};
use wasp_ctl::server::{Handler, ReplySink, ReplySinkExt};

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

    /// Apply `text` (a ruleset file or a batch of commands, as `nft -f`) to the running
    /// ruleset: all or nothing.
    fn apply(&self, text: &str, name: &str) -> Result<Json, String> {
        let (base, _) = self.daemon.ruleset().map_err(|e| e.to_string())?;
        let new = wasp_ruleset::apply_batch(&base, text, name).map_err(|e| e.to_string())?;
        // `flush ruleset` starts over: counts come from the text, not from the running rules.
        let keep = !text.contains("flush ruleset");
        let generation = self.daemon.replace(new, keep).map_err(|e| e.to_string())?;
        Ok(serde_json::json!({ "generation": generation }))
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
                    tx_dropped: c.tx_dropped,
                    ring_occupancy_pct: 0,
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
        };
        serde_json::to_value(s).map_err(|e| e.to_string())
    }

    fn monitor(&self, out: &mut dyn ReplySink) -> Result<Json, String> {
        let rx = self.daemon.events.subscribe();
        loop {
            if out.closed() {
                return Ok(Json::Null);
            }
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(ev) => {
                    if out.event(&ev.text).is_err() {
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

impl Handler for Control {
    fn handle(&self, req: Request, out: &mut dyn ReplySink) -> Result<Json, String> {
        match &req {
            Request::Apply { text, name } => return self.apply(text, name),
            Request::Element(e) if e.op != ElementOp::Get => {
                return self.apply(&e.command_text(), "<element>");
            }
            Request::Reset(ResetRequest::Counters { .. }) => {
                self.daemon.reset_counters().map_err(|e| e.to_string())?;
                return Ok(Json::Null);
            }
            Request::Reset(ResetRequest::Element { .. }) => {
                return Err("reset element: not supported yet (reset counters zeroes every counter, elements' included)".to_string());
            }
            Request::Plugin { op, name, path } => return self.plugin(*op, name, path.as_deref()),
            Request::Monitor => return self.monitor(out),
            Request::Stats => return self.stats(),
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
