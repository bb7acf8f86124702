//! Parsing `nft -a monitor` trace lines and folding one packet's lines into its [`Decision`].
//!
//! Line shapes printed by nft 1.0.6 (netlink.c, netlink_events_trace_cb):
//! ```text
//! trace id 591f420f netdev t a packet: iif "wasp0" ether saddr ...
//! trace id 591f420f netdev t b rule udp dport 53 drop # handle 5 (verdict drop)
//! trace id 591f420f netdev t b unknown rule handle 5 (verdict drop)
//! trace id 591f420f netdev t a policy accept
//! trace id d036308b netdev t b policy drop meta mark 0x00000005
//! ```
//! (`unknown rule` when the monitor's cache predates the rule.)

use crate::verdict::{Decision, Place, Source, Verdict};

/// The verdict a trace line reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceVerdict {
    /// `accept`.
    Accept,
    /// `drop`.
    Drop,
    /// Anything else: `continue`, `return`, `jump X`, `goto X` (the text as printed).
    Other(String),
}

impl TraceVerdict {
    fn parse(s: &str) -> Self {
        match s.trim() {
            "accept" => TraceVerdict::Accept,
            "drop" => TraceVerdict::Drop,
            other => TraceVerdict::Other(other.to_string()),
        }
    }
}

/// What one trace line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceKind {
    /// `packet: ...`: the packet entered a base chain (first line of each base chain).
    Packet,
    /// A rule matched fully and gave a verdict.
    Rule {
        /// The rule's handle.
        handle: u64,
        /// Its verdict.
        verdict: TraceVerdict,
    },
    /// The end of a base chain: its policy.
    Policy(TraceVerdict),
    /// A line of another shape (kept for diagnostics).
    Other,
}

/// One parsed trace line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceLine {
    /// The trace id (a hash of the skb: the same for all lines of one packet's walk).
    pub id: String,
    /// Table family (`netdev`).
    pub family: String,
    /// Table name.
    pub table: String,
    /// Chain name.
    pub chain: String,
    /// What the line reports.
    pub kind: TraceKind,
}

/// Parses a trace line; `None` when `line` is not a trace line (e.g. a ruleset event).
pub fn parse_trace_line(line: &str) -> Option<TraceLine> {
    let rest = line.strip_prefix("trace id ")?;
    let mut it = rest.splitn(5, ' ');
    let id = it.next()?.to_string();
    let family = it.next()?.to_string();
    let table = it.next()?.to_string();
    let chain = it.next()?.to_string();
    let body = it.next().unwrap_or("").trim_end();
    let kind = if body.starts_with("packet:") {
        TraceKind::Packet
    } else if let Some(p) = body.strip_prefix("policy ") {
        TraceKind::Policy(TraceVerdict::parse(
            p.split_whitespace().next().unwrap_or(""),
        ))
    } else if body.starts_with("rule ") || body.starts_with("unknown rule ") {
        parse_rule(body).unwrap_or(TraceKind::Other)
    } else {
        TraceKind::Other
    };
    Some(TraceLine {
        id,
        family,
        table,
        chain,
        kind,
    })
}

/// `rule <text> # handle N (verdict V)` or `unknown rule handle N (verdict V)`.
fn parse_rule(body: &str) -> Option<TraceKind> {
    let open = body.rfind(" (verdict ")?;
    let verdict = body[open + " (verdict ".len()..].strip_suffix(')')?;
    let head = &body[..open];
    let handle_at = head.rfind("handle ")?;
    let handle = head[handle_at + "handle ".len()..].trim().parse().ok()?;
    Some(TraceKind::Rule {
        handle,
        verdict: TraceVerdict::parse(verdict),
    })
}

/// Folds the trace lines of one packet into its decision. The harness's own table frames the
/// walk: its head chain (lowest priority) sets nftrace, its tail chain (highest priority) only
/// runs when every other base chain accepted, so its policy line ends an accepted walk; a drop
/// line ends a dropped one.
#[derive(Debug)]
pub struct Walk {
    harness_table: String,
    tail_chain: String,
    id: Option<String>,
    last_accept: Option<Place>,
    lines: Vec<String>,
}

impl Walk {
    /// A walk that ignores `harness_table` except for the policy line of its `tail_chain`.
    pub fn new(harness_table: &str, tail_chain: &str) -> Self {
        Walk {
            harness_table: harness_table.to_string(),
            tail_chain: tail_chain.to_string(),
            id: None,
            last_accept: None,
            lines: Vec::new(),
        }
    }

    /// The raw lines fed so far (for diagnostics).
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// Feeds one monitor line; returns the decision once the walk has ended. Lines that are not
    /// trace lines, or that belong to another trace id than the walk's first line, are ignored.
    pub fn feed(&mut self, raw: &str) -> Option<Decision> {
        let line = parse_trace_line(raw)?;
        match &self.id {
            None => self.id = Some(line.id.clone()),
            Some(id) if *id != line.id => return None,
            Some(_) => {}
        }
        self.lines.push(raw.to_string());
        let place = |source| Place {
            table: line.table.clone(),
            chain: line.chain.clone(),
            source,
        };
        if line.table == self.harness_table {
            if line.chain == self.tail_chain && matches!(line.kind, TraceKind::Policy(_)) {
                return Some(Decision {
                    verdict: Verdict::Accept,
                    place: self.last_accept.take(),
                });
            }
            return None;
        }
        let (verdict, source) = match &line.kind {
            TraceKind::Rule { handle, verdict } => (verdict, Source::Rule(*handle)),
            TraceKind::Policy(verdict) => (verdict, Source::Policy),
            TraceKind::Packet | TraceKind::Other => return None,
        };
        match verdict {
            TraceVerdict::Accept => {
                self.last_accept = Some(place(source));
                None
            }
            TraceVerdict::Drop => Some(Decision {
                verdict: Verdict::Drop,
                place: Some(place(source)),
            }),
            TraceVerdict::Other(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_shapes_nft_prints() {
        let l = parse_trace_line(
            "trace id 591f420f netdev t b rule udp dport 53 drop # handle 5 (verdict drop)",
        )
        .unwrap();
        assert_eq!((l.table.as_str(), l.chain.as_str()), ("t", "b"));
        assert_eq!(
            l.kind,
            TraceKind::Rule {
                handle: 5,
                verdict: TraceVerdict::Drop
            }
        );
        let l = parse_trace_line("trace id 1 netdev t a unknown rule handle 6 (verdict jump sub)")
            .unwrap();
        assert_eq!(
            l.kind,
            TraceKind::Rule {
                handle: 6,
                verdict: TraceVerdict::Other("jump sub".into())
            }
        );
        let l =
            parse_trace_line("trace id d0 netdev t b policy drop meta mark 0x00000005 ").unwrap();
        assert_eq!(l.kind, TraceKind::Policy(TraceVerdict::Drop));
        let l = parse_trace_line("trace id d0 netdev t b packet: iif \"wasp0\"").unwrap();
        assert_eq!(l.kind, TraceKind::Packet);
        assert!(parse_trace_line("add table netdev t # handle 4").is_none());
    }

    #[test]
    fn walk_reports_last_base_chain_accept() {
        let mut w = Walk::new("wasp_trace", "tail");
        let lines = [
            "trace id 1 netdev wasp_trace head packet: x",
            "trace id 1 netdev wasp_trace head unknown rule handle 3 (verdict continue)",
            "trace id 1 netdev wasp_trace head policy accept ",
            "trace id 1 netdev t a packet: x",
            "trace id 1 netdev t a unknown rule handle 7 (verdict accept)",
            "trace id 2 netdev t zzz unknown rule handle 7 (verdict drop)",
            "trace id 1 netdev t b packet: x",
            "trace id 1 netdev t b policy accept ",
        ];
        for l in lines {
            assert_eq!(w.feed(l), None, "{l}");
        }
        let d = w
            .feed("trace id 1 netdev wasp_trace tail policy accept ")
            .unwrap();
        assert_eq!(d.to_string(), "accept t b policy");
    }

    #[test]
    fn walk_ends_on_drop() {
        let mut w = Walk::new("wasp_trace", "tail");
        assert_eq!(w.feed("trace id 1 netdev t a policy accept "), None);
        let d = w
            .feed("trace id 1 netdev t sub rule drop # handle 9 (verdict drop)")
            .unwrap();
        assert_eq!(d.to_string(), "drop t sub 9");
    }
}
