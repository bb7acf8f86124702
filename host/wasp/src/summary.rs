//! The end-of-run summary: totals, per base chain, per input file. Printed as a table, or as
//! JSON with `--json` (the same fields).

use std::fmt::Write as _;

use serde::Serialize;

use wasp_io::capture::Format;

/// Counts of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// The ruleset file.
    pub ruleset: String,
    /// The default input device (`meta iifname`): every packet entered there except those of
    /// a pcapng interface named after another device wasp knows (see [`crate::replay`](mod@crate::replay)).
    pub in_dev: String,
    /// Packets read from all inputs.
    pub packets: u64,
    /// Final verdict accept.
    pub accepted: u64,
    /// Final verdict drop.
    pub dropped: u64,
    /// Packets whose parse found a malformed or truncated header (they still got a verdict).
    pub malformed: u64,
    /// Packets that no base chain saw (accepted).
    pub unseen: u64,
    /// The netdev ingress base chains of `in_dev`, in hook order, then those of each other
    /// device packets entered on (pcapng interface names), in the order of its first packet.
    pub chains: Vec<ChainSummary>,
    /// Which rule (or policy) gave how many packets their final verdict, in ruleset order.
    pub decided_by: Vec<RuleSummary>,
    /// The inputs in the order they were read.
    pub inputs: Vec<InputSummary>,
    /// The rules' `counter` statements after the run (from the counter plugin), in ruleset
    /// order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<CounterSummary>,
    /// Named counter objects after the run, in declaration order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub named_counters: Vec<NamedCounterSummary>,
    /// Set element counters after the run (elements of sets with `counter`, or written with
    /// `counter`), in declaration order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub set_counters: Vec<SetCounterSummary>,
    /// Events of the plugins (an idle timer that expired, a swap, a plugin that failed), in
    /// time order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventSummary>,
    /// The state of every plugin use site after the run (what its plugin lists: a counter's
    /// packets and bytes), in site order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub plugin_state: Vec<PluginStateSummary>,
    /// Capture time of the first packet (ns since the Unix epoch); the table shows event
    /// times from it.
    #[serde(skip)]
    pub start_ns: Option<u64>,
    /// The way out, when the replay forwarded (`fwd`/`dup` statements or a gateway file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forward: Option<ForwardSummary>,
}

/// What the way out did (`wasp_gateway::Forwarder`'s counts and the gateway's replies).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ForwardSummary {
    /// The gateway file, when one was given.
    pub gateway: Option<String>,
    /// Packets delivered to the host side (in `accepted.pcap`).
    pub local: u64,
    /// Packets the gateway routed and sent.
    pub forwarded: u64,
    /// Packets a flowtable's fast path sent (no chain saw them).
    pub offloaded: u64,
    /// Packets `fwd` statements sent.
    pub fwd: u64,
    /// Copies `dup` statements sent.
    pub dup: u64,
    /// Replies the gateway sent (ARP, neighbour advertisements, ICMP time exceeded).
    pub replied: u64,
    /// Of the gateway's replies built: ARP replies.
    pub arp_replies: u64,
    /// Neighbour advertisements.
    pub nd_replies: u64,
    /// ICMP and ICMPv6 time exceeded.
    pub time_exceeded: u64,
    /// ARP requests and neighbour solicitations the gateway sent for next hops it had no
    /// entry for.
    pub solicited: u64,
    /// ICMP destination unreachable the gateway sent for packets it had no route for.
    pub unreachable: u64,
    /// Replies `reject` statements sent (TCP resets, ICMP errors) about packets they dropped.
    pub rejected: u64,
    /// Frames lost on the way out, by reason (`no-route`, `no-neighbour`, `device-down`,
    /// `egress-drop`, `recursion`, ...), in reason order.
    pub lost: Vec<LossSummary>,
    /// Frames sent per device (each in `tx-DEV.pcap`), by device name.
    pub devices: Vec<DeviceSummary>,
}

/// Frames lost for one reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LossSummary {
    /// The reason's name.
    pub reason: String,
    /// Frames.
    pub packets: u64,
}

/// Frames sent on one device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DeviceSummary {
    /// The device.
    pub dev: String,
    /// Frames.
    pub packets: u64,
}

/// What one plugin use site lists after the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PluginStateSummary {
    /// Where the use is written (`FILE:LINE:COL`).
    pub at: String,
    /// The plugin's name.
    pub plugin: String,
    /// The entries as text (`packets 12 bytes 1440`), one per entry.
    pub state: Vec<String>,
}

/// One plugin event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EventSummary {
    /// When, on the replay's clock: the capture time (ns since the Unix epoch) of the vector
    /// during which it happened.
    pub time_ns: u64,
    /// The plugin's name.
    pub plugin: String,
    /// What happened (`idletimer wlan0 expired`).
    pub text: String,
}

/// Counts of one `counter` statement of a rule (`counter packets N bytes M` in nft's listing).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CounterSummary {
    /// Table name.
    pub table: String,
    /// Chain name.
    pub chain: String,
    /// Rule handle.
    pub rule: u64,
    /// Packets (including the count the ruleset gave).
    pub packets: u64,
    /// Bytes (`skb->len`, as the kernel's counter).
    pub bytes: u64,
}

/// Counts of one named counter object (`counter NAME { packets N bytes M }`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NamedCounterSummary {
    /// Table name.
    pub table: String,
    /// Object name.
    pub name: String,
    /// Packets (including the count the ruleset gave).
    pub packets: u64,
    /// Bytes (`skb->len`).
    pub bytes: u64,
}

/// Counts of one set element's counter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SetCounterSummary {
    /// Table name.
    pub table: String,
    /// Set name.
    pub set: String,
    /// The element's key as nft lists it.
    pub element: String,
    /// Packets (including the count the ruleset gave).
    pub packets: u64,
    /// Bytes (`skb->len`, as the kernel's element counter).
    pub bytes: u64,
}

/// How many packets one rule or chain policy decided.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RuleSummary {
    /// Table name.
    pub table: String,
    /// Chain name.
    pub chain: String,
    /// Rule handle, or `None` for the chain's policy.
    pub rule: Option<u64>,
    /// `accept` or `drop`.
    pub verdict: String,
    /// Packets.
    pub packets: u64,
}

/// Counts of one base chain.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ChainSummary {
    /// Table family (`netdev`).
    pub family: String,
    /// Table name.
    pub table: String,
    /// Chain name.
    pub chain: String,
    /// Hook priority.
    pub priority: i32,
    /// Packets whose walk entered this base chain.
    pub packets: u64,
    /// Packets whose walk of this base chain (and the chains it jumped to) ended in accept; a
    /// later base chain of the hook may still drop them.
    pub accepted: u64,
    /// Packets dropped in this base chain or a chain it jumped to.
    pub dropped: u64,
    /// The device of the hook, when it is not the default input device (`in_dev`): the
    /// chains of every other device that packets of a multi-interface pcapng entered on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dev: Option<String>,
}

/// What happened to an input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InputStatus {
    /// Read to the end.
    #[default]
    Read,
    /// Not found and not required: skipped.
    Skipped,
    /// Stopped at a fault (truncated or not a capture); the packets before it were processed.
    Fault,
}

/// `pcap`, `pcapng` or null.
fn format_name<S: serde::Serializer>(f: &Option<Format>, s: S) -> Result<S::Ok, S::Error> {
    match f {
        Some(f) => s.serialize_str(f.name()),
        None => s.serialize_none(),
    }
}

/// Counts of one input file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct InputSummary {
    /// The path as given (command line or `sample.toml`).
    pub path: String,
    /// Container format, when the file was opened (`pcap` or `pcapng` in JSON).
    #[serde(serialize_with = "format_name")]
    pub format: Option<Format>,
    /// Read, skipped or stopped at a fault.
    pub status: InputStatus,
    /// Packets read.
    pub packets: u64,
    /// Of those, accepted.
    pub accepted: u64,
    /// Of those, dropped.
    pub dropped: u64,
    /// Of those, malformed.
    pub malformed: u64,
    /// Why it was skipped, or the fault.
    pub note: Option<String>,
}

impl Summary {
    /// The summary as a text table, for a terminal.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "ruleset {}, input device \"{}\"",
            self.ruleset, self.in_dev
        );
        let _ = writeln!(
            s,
            "packets {}  accepted {}  dropped {}  malformed {}  unseen {}",
            self.packets, self.accepted, self.dropped, self.malformed, self.unseen
        );
        let _ = writeln!(s);
        let name_of = |c: &ChainSummary| match &c.dev {
            None => format!("{} {} {}", c.family, c.table, c.chain),
            Some(d) => format!("{} {} {} on \"{d}\"", c.family, c.table, c.chain),
        };
        let w = self
            .chains
            .iter()
            .map(|c| name_of(c).len())
            .chain(std::iter::once("base chain".len()))
            .max()
            .unwrap_or(10);
        let _ = writeln!(
            s,
            "{:<w$}  {:>8}  {:>8}  {:>8}  {:>8}",
            "base chain", "priority", "packets", "accepted", "dropped"
        );
        for c in &self.chains {
            let _ = writeln!(
                s,
                "{:<w$}  {:>8}  {:>8}  {:>8}  {:>8}",
                name_of(c),
                c.priority,
                c.packets,
                c.accepted,
                c.dropped
            );
        }
        if self.chains.is_empty() {
            let _ = writeln!(s, "(no ingress base chain on \"{}\")", self.in_dev);
        }
        let _ = writeln!(s);
        if !self.decided_by.is_empty() {
            let by = |r: &RuleSummary| {
                format!(
                    "{} {} {}",
                    r.table,
                    r.chain,
                    r.rule
                        .map_or_else(|| "policy".to_string(), |h| h.to_string())
                )
            };
            let w = self
                .decided_by
                .iter()
                .map(|r| by(r).len())
                .chain(std::iter::once("decided by".len()))
                .max()
                .unwrap_or(10);
            let _ = writeln!(
                s,
                "{:<w$}  {:<7}  {:>8}",
                "decided by", "verdict", "packets"
            );
            for r in &self.decided_by {
                let _ = writeln!(s, "{:<w$}  {:<7}  {:>8}", by(r), r.verdict, r.packets);
            }
            let _ = writeln!(s);
        }
        if !self.counters.is_empty() {
            let _ = writeln!(s, "counters");
            for c in &self.counters {
                let _ = writeln!(
                    s,
                    "  {} {} handle {}: counter packets {} bytes {}",
                    c.table, c.chain, c.rule, c.packets, c.bytes
                );
            }
            let _ = writeln!(s);
        }
        if !self.named_counters.is_empty() {
            let _ = writeln!(s, "named counters");
            for c in &self.named_counters {
                let _ = writeln!(
                    s,
                    "  {} counter {}: packets {} bytes {}",
                    c.table, c.name, c.packets, c.bytes
                );
            }
            let _ = writeln!(s);
        }
        if !self.set_counters.is_empty() {
            let _ = writeln!(s, "set element counters");
            for c in &self.set_counters {
                let _ = writeln!(
                    s,
                    "  {} @{} {{ {} }}: packets {} bytes {}",
                    c.table, c.set, c.element, c.packets, c.bytes
                );
            }
            let _ = writeln!(s);
        }
        if self.plugin_state.iter().any(|p| !p.state.is_empty()) {
            let _ = writeln!(s, "plugin state");
            for p in self.plugin_state.iter().filter(|p| !p.state.is_empty()) {
                let _ = writeln!(s, "  {} {}: {}", p.at, p.plugin, p.state.join("; "));
            }
            let _ = writeln!(s);
        }
        if !self.events.is_empty() {
            let _ = writeln!(s, "plugin events");
            for e in &self.events {
                let since = e.time_ns.saturating_sub(self.start_ns.unwrap_or(e.time_ns));
                let _ = writeln!(
                    s,
                    "  +{}.{:06}s  {}",
                    since / 1_000_000_000,
                    since % 1_000_000_000 / 1000,
                    e.text
                );
            }
            let _ = writeln!(s);
        }
        if let Some(f) = &self.forward {
            let _ = match &f.gateway {
                Some(g) => writeln!(s, "forwarding (gateway {g})"),
                None => writeln!(s, "forwarding"),
            };
            let _ = writeln!(
                s,
                "  local {}  forwarded {}  fwd {}  dup {}  replied {} (arp {}, nd {}, time exceeded {})",
                f.local,
                f.forwarded,
                f.fwd,
                f.dup,
                f.replied,
                f.arp_replies,
                f.nd_replies,
                f.time_exceeded
            );
            if f.offloaded > 0 {
                let _ = writeln!(
                    s,
                    "  flowtable fast path {} (no chain saw them)",
                    f.offloaded
                );
            }
            if f.unreachable > 0 {
                let _ = writeln!(s, "  unreachable sent {}", f.unreachable);
            }
            if f.rejected > 0 {
                let _ = writeln!(s, "  reject replies sent {}", f.rejected);
            }
            if f.solicited > 0 {
                let _ = writeln!(s, "  solicited {} next hop(s)", f.solicited);
            }
            if !f.lost.is_empty() {
                let lost: Vec<String> = f
                    .lost
                    .iter()
                    .map(|l| format!("{} {}", l.reason, l.packets))
                    .collect();
                let _ = writeln!(s, "  lost: {}", lost.join(", "));
            }
            if !f.devices.is_empty() {
                let sent: Vec<String> = f
                    .devices
                    .iter()
                    .map(|d| format!("{} {}", d.dev, d.packets))
                    .collect();
                let _ = writeln!(s, "  sent: {}", sent.join(", "));
            }
            let _ = writeln!(s);
        }
        let w = self
            .inputs
            .iter()
            .map(|i| i.path.len())
            .chain(std::iter::once("input".len()))
            .max()
            .unwrap_or(5);
        let _ = writeln!(
            s,
            "{:<w$}  {:>8}  {:>8}  {:>8}  {:>9}",
            "input", "packets", "accepted", "dropped", "malformed"
        );
        for i in &self.inputs {
            match i.status {
                InputStatus::Skipped => {
                    let _ = writeln!(
                        s,
                        "{:<w$}  skipped: {}",
                        i.path,
                        i.note.as_deref().unwrap_or("")
                    );
                }
                InputStatus::Read | InputStatus::Fault => {
                    let _ = write!(
                        s,
                        "{:<w$}  {:>8}  {:>8}  {:>8}  {:>9}",
                        i.path, i.packets, i.accepted, i.dropped, i.malformed
                    );
                    if i.status == InputStatus::Fault {
                        let _ = write!(s, "  (stopped at a fault)");
                    }
                    let _ = writeln!(s);
                }
            }
        }
        s
    }

    /// The summary as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        // Serializing plain structs of strings and integers cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Summary {
        Summary {
            ruleset: "fw.nft".into(),
            in_dev: "lan0".into(),
            packets: 5,
            accepted: 3,
            dropped: 2,
            malformed: 1,
            unseen: 0,
            chains: vec![ChainSummary {
                family: "netdev".into(),
                table: "office".into(),
                chain: "ingress".into(),
                priority: 0,
                packets: 5,
                accepted: 3,
                dropped: 2,
                dev: None,
            }],
            decided_by: vec![
                RuleSummary {
                    table: "office".into(),
                    chain: "ingress".into(),
                    rule: Some(4),
                    verdict: "drop".into(),
                    packets: 2,
                },
                RuleSummary {
                    table: "office".into(),
                    chain: "ingress".into(),
                    rule: None,
                    verdict: "accept".into(),
                    packets: 3,
                },
            ],
            inputs: vec![
                InputSummary {
                    path: "a.pcap".into(),
                    format: Some(Format::Pcap),
                    status: InputStatus::Read,
                    packets: 5,
                    accepted: 3,
                    dropped: 2,
                    malformed: 1,
                    note: None,
                },
                InputSummary {
                    path: "gone.pcap".into(),
                    status: InputStatus::Skipped,
                    note: Some("not found".into()),
                    ..InputSummary::default()
                },
            ],
            counters: Vec::new(),
            named_counters: Vec::new(),
            set_counters: Vec::new(),
            events: Vec::new(),
            plugin_state: Vec::new(),
            start_ns: None,
            forward: None,
        }
    }

    #[test]
    fn table_layout() {
        assert_eq!(
            sample().to_table(),
            "ruleset fw.nft, input device \"lan0\"\n\
             packets 5  accepted 3  dropped 2  malformed 1  unseen 0\n\
             \n\
             base chain             priority   packets  accepted   dropped\n\
             netdev office ingress         0         5         3         2\n\
             \n\
             decided by             verdict   packets\n\
             office ingress 4       drop            2\n\
             office ingress policy  accept          3\n\
             \n\
             input       packets  accepted   dropped  malformed\n\
             a.pcap            5         3         2          1\n\
             gone.pcap  skipped: not found\n"
        );
    }

    #[test]
    fn json_fields() {
        let v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        assert_eq!(v["packets"], 5);
        assert_eq!(v["chains"][0]["chain"], "ingress");
        assert_eq!(v["inputs"][0]["format"], "pcap");
        assert_eq!(v["inputs"][1]["status"], "skipped");
        assert_eq!(v["inputs"][1]["format"], serde_json::Value::Null);
    }
}
