//! The control protocol's messages (version [`VERSION`]), as `host/ctl/PROTOCOL.md` describes
//! them: one JSON request per line, replies streamed as JSON lines that end with a final
//! `{"ok":...}` or `{"error":"..."}` line.
//!
//! A request is a JSON object with `"v": 1` and `"req"` naming the request; the other fields
//! depend on the request (serde's internally tagged form of [`Request`]). Replies are
//! [`Reply`] values, one per line, except the binary frames of a brief rule dump (a
//! `{"bin":N}` line followed by exactly `N` bytes, see [`crate::dump`]).

use serde::{Deserialize, Serialize};

/// The protocol version this crate speaks. A request without `"v"`, or with another value, is
/// answered with an error naming the version the daemon speaks.
pub const VERSION: u32 = 1;

/// Longest request line the server reads, in bytes (newline included). A ruleset sent by
/// `apply` is the biggest request; 64 MiB holds a ruleset of about a million rules.
pub const MAX_REQUEST_BYTES: usize = 64 << 20;

/// A request, as the `"req"` field names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "req", rename_all = "snake_case")]
pub enum Request {
    /// `list ...`: the ruleset or a part of it, in nft syntax or nft's JSON (`-j`).
    List(ListRequest),
    /// `-f FILE`: apply a whole ruleset, or a batch of `add`/`create`/`delete`/`flush`
    /// commands, atomically (all or nothing).
    Apply {
        /// The file's text.
        text: String,
        /// The file's name, used in error messages (file:line:col).
        name: String,
        /// `text` is a JSON ruleset in libnftables' schema (`nft -j -f`), not nft syntax;
        /// absent: false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        json: bool,
        /// `-e` (nft's echo): the reply's `echo` lists what the change made, as `nft -e`
        /// prints it ([`crate::changes::echo`]); absent: no echo.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        echo: Option<Echo>,
    },
    /// `-c -f FILE` / `-c COMMAND...` (nft -c): check that `text` would apply to the running
    /// ruleset (parse, apply to a copy, compile), and change nothing. Answers as `apply`.
    Check {
        /// The file's text, or the command.
        text: String,
        /// The file's name, used in error messages (file:line:col).
        name: String,
        /// `text` is a JSON ruleset (as for `apply`); absent: false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        json: bool,
    },
    /// `add|create|delete|destroy|get element FAMILY TABLE SET { ... }`.
    Element(ElementRequest),
    /// `reset counters` / `reset element ...`.
    Reset(ResetRequest),
    /// `plugin load|swap|unload NAME [PATH]`.
    Plugin {
        /// What to do.
        op: PluginOp,
        /// The plugin's name (as declared in the ruleset's `plugin NAME { ... }`).
        name: String,
        /// Path of the Wasm component (for `load` and `swap`; absent for `unload`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    /// `monitor`: stream events until the client disconnects.
    Monitor,
    /// `monitor trace`: the walks of packets that `meta nftrace set 1` marked, as `nft
    /// monitor trace` prints them, one [`Reply::Event`] line each, until the client goes.
    MonitorTrace,
    /// `-j monitor`: as `monitor`, each ruleset change as the libnftables JSON command `nft
    /// -j monitor` prints (`{"add": {"rule": {...}}}`), wasp's own events as `{"wasp":
    /// {"kind": KIND, "text": TEXT}}`.
    MonitorJson,
    /// `stats`: ports, workers, drops by reason.
    Stats,
    /// `plugin state`: what each worker's plugin instances list for each use site, one text
    /// line per use site and worker: `worker W FILE:LINE:COL PLUGIN: ENTRY; ENTRY`.
    PluginState,
    /// `list conntrack`: every connection, one `conntrack -L` line each (text replies).
    Conntrack,
    /// `delete conntrack [FILTER]` / `flush conntrack`: delete the connections the filter
    /// selects (all with an empty one), as `conntrack -D` / `conntrack -F`; their flowtable
    /// entries go with them. Answers `{"deleted": N}`.
    ConntrackDelete(CtFilter),
    /// `list flowtable [[FAMILY] TABLE] NAME` / `list flows`: the flows of a flowtable (or of
    /// every flowtable when `name` is absent) with their age, counters and offload state
    /// (text replies).
    Flows {
        /// The flowtable's name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// `dump rules [--brief]`: every rule with its counters, streamed.
    Dump {
        /// Full (rule text + counters) or brief (identity + counters only).
        #[serde(default)]
        mode: DumpMode,
        /// How brief records travel (ignored for a full dump).
        #[serde(default)]
        encoding: BriefEncoding,
    },
}

/// What `list` shows, with nft's flags.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRequest {
    /// Which objects.
    pub what: ListWhat,
    /// Restrict to tables of this family (`list tables netdev`); for `set`, `table`, `chain`
    /// the family of the object (nft's default when absent: `ip`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// Table name (`list set T S`, `list map T M`, `list table T`, `list chain T C`,
    /// `list counters table T`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// Object name within the table (`list set T S`, `list map T M`, `list chain T C`; with
    /// `counters`, `quotas` or `limits`: `list counter T C`, the one object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The output flags (`-a`, `-s`, `-t`, `-j`).
    #[serde(default)]
    pub flags: ListFlags,
}

/// nft's output flags, with nft's meanings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListFlags {
    /// `-a`: show object handles (`# handle N`).
    #[serde(default)]
    pub handles: bool,
    /// `-s`: stateless: omit counter values (`counter` alone, counter objects empty).
    #[serde(default)]
    pub stateless: bool,
    /// `-t`: terse: omit set elements.
    #[serde(default)]
    pub terse: bool,
    /// `-j`: nft's JSON (the libnftables-json schema) instead of nft syntax.
    #[serde(default)]
    pub json: bool,
}

/// The objects `list` shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListWhat {
    /// `list ruleset`
    #[default]
    Ruleset,
    /// `list tables`
    Tables,
    /// `list chains`
    Chains,
    /// `list sets` (sets, not maps, as nft)
    Sets,
    /// `list set T S`
    Set,
    /// `list maps`
    Maps,
    /// `list map T M`
    Map,
    /// `list counters`: named counter objects.
    Counters,
    /// `list quotas`: named quota objects.
    Quotas,
    /// `list limits`: named limit objects.
    Limits,
    /// `list flowtables`
    Flowtables,
    /// `list table T`
    Table,
    /// `list chain T C`
    Chain,
}

/// How `-e` echoes a change: with handles (`-a`), in JSON (`-j`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Echo {
    /// `-a`: `# handle N` after each object, and rules' positions.
    #[serde(default)]
    pub handles: bool,
    /// `-j`: one `{"nftables": [...]}` line of libnftables JSON commands.
    #[serde(default)]
    pub json: bool,
}

/// `add|create|delete|destroy|get element`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElementRequest {
    /// What to do.
    pub op: ElementOp,
    /// Family of the table (nft's default when absent: `ip`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// Table.
    pub table: String,
    /// Set or map.
    pub set: String,
    /// The elements in nft syntax, braces included: `{ 10.0.0.1, 10.1.0.0/16 }`.
    pub elements: String,
}

impl ElementRequest {
    /// The request as one nft command (`add element netdev t s { ... }`), which the daemon
    /// can apply with `wasp_ruleset::apply_batch` (all but `get`, which reads).
    pub fn command_text(&self) -> String {
        let verb = match self.op {
            ElementOp::Add => "add",
            ElementOp::Create => "create",
            ElementOp::Delete => "delete",
            ElementOp::Destroy => "destroy",
            ElementOp::Get => "get",
        };
        format!(
            "{verb} element {} {} {} {}\n",
            self.family.as_deref().unwrap_or("ip"),
            self.table,
            self.set,
            self.elements
        )
    }
}

/// Element operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElementOp {
    /// `add element`
    Add,
    /// `create element`: an element the set holds is "File exists".
    Create,
    /// `delete element`
    Delete,
    /// `destroy element`: elements the set does not hold are skipped.
    Destroy,
    /// `get element`
    Get,
}

/// Which connections `delete conntrack` deletes: those whose original direction has every
/// field given (`conntrack -D -p P -s A -d A --sport N --dport N -m M[/MASK] -w Z`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CtFilter {
    /// Protocol: a name (`tcp`, `udp`, `icmp`, ...) or a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proto: Option<String>,
    /// Original source address, or a prefix (`10.0.0.0/8`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    /// Original destination address, or a prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<String>,
    /// Original source port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sport: Option<u16>,
    /// Original destination port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<u16>,
    /// `ct mark`, compared under `mark_mask`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<u32>,
    /// Mask of the mark comparison (all bits when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark_mask: Option<u32>,
    /// Conntrack zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<u16>,
}

/// `reset counters [table FAMILY T]` / `reset counter FAMILY T NAME` / `reset rules [table
/// FAMILY T [chain C]]` / `reset quotas [table FAMILY T]` / `reset quota FAMILY T NAME` /
/// `reset element FAMILY T S { ... }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum ResetRequest {
    /// Every counter (rule counters, named counter objects, set element counters), or those
    /// of one table.
    Counters {
        /// Family of `table` (default `ip`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        family: Option<String>,
        /// Only this table.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        table: Option<String>,
    },
    /// The `counter` and `quota` statements of the rules of every table, of one table, or of
    /// one chain.
    Rules {
        /// Family of `table` (default `ip`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        family: Option<String>,
        /// Only this table.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        table: Option<String>,
        /// Only this chain of `table`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chain: Option<String>,
    },
    /// One named counter object.
    Counter {
        /// Family of `table` (default `ip`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        family: Option<String>,
        /// Table.
        table: String,
        /// The counter's name.
        name: String,
    },
    /// One named quota object.
    Quota {
        /// Family of `table` (default `ip`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        family: Option<String>,
        /// Table.
        table: String,
        /// The quota's name.
        name: String,
    },
    /// Named quota objects, of every table or of one.
    Quotas {
        /// Family of `table` (default `ip`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        family: Option<String>,
        /// Only this table.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        table: Option<String>,
    },
    /// The counters of the given elements of one set.
    Element {
        /// Family of the table (default `ip`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        family: Option<String>,
        /// Table.
        table: String,
        /// Set or map.
        set: String,
        /// The elements in nft syntax, braces included.
        elements: String,
    },
}

/// Plugin operations (the hot swap of the plugin issue, live).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PluginOp {
    /// Load a component under a name.
    Load,
    /// Replace a loaded plugin's component (state handed over when both versions can).
    Swap,
    /// Unload a plugin no rule uses.
    Unload,
}

/// Full or brief rule dump.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DumpMode {
    /// Every rule in nft syntax with its counters (one [`Reply::Rule`] line per rule).
    #[default]
    Full,
    /// Only what identifies a rule and what changes (see [`crate::dump`]).
    Brief,
}

/// How brief dump records travel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BriefEncoding {
    /// One JSON array line per rule: `[chain, handle, packets, bytes, flags]`.
    #[default]
    Json,
    /// Binary frames of fixed-width records ([`crate::dump::RECORD_BYTES`] bytes each).
    Binary,
}

/// One reply line. Every reply to a request ends with exactly one [`Reply::Ok`] or
/// [`Reply::Error`] line (a `monitor` stream ends when the client goes, or with an error).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// A piece of output text; the output is the concatenation of the pieces in order
    /// (`list` in nft syntax or nft's JSON, `reset` listings).
    Text(String),
    /// One event, as `nft monitor` prints it (`monitor`).
    Event(String),
    /// A chain announced in a brief dump: records that follow name it by `id`.
    Chain(ChainInfo),
    /// One rule of a full dump.
    Rule(RuleInfo),
    /// A binary frame of this many bytes follows the line (brief dump, binary encoding).
    Bin(u64),
    /// The request succeeded; the value is the request's result (`null` for most).
    Ok(serde_json::Value),
    /// The request failed: the message as nft prints it (file:line:col for ruleset errors).
    Error(String),
}

/// A chain of a brief dump: `id` numbers it within this dump (0, 1, 2, ... in order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainInfo {
    /// Number of the chain within this dump.
    pub id: u32,
    /// Family of its table (`netdev`, `inet`, ...).
    pub family: String,
    /// Table name.
    pub table: String,
    /// Chain name.
    pub name: String,
}

/// A rule of a full dump.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleInfo {
    /// Family of its table.
    pub family: String,
    /// Table name.
    pub table: String,
    /// Chain name.
    pub chain: String,
    /// The rule's handle.
    pub handle: u64,
    /// Packets counted by the rule's first `counter` (0 without one).
    pub packets: u64,
    /// Bytes counted by the rule's first `counter` (0 without one).
    pub bytes: u64,
    /// The rule in nft syntax (as `nft list` prints it, counters included, no handle).
    pub text: String,
}

/// The result of `stats` (the value of its `{"ok":...}` line).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Per port, summed over workers.
    #[serde(default)]
    pub ports: Vec<PortStats>,
    /// Per worker.
    #[serde(default)]
    pub workers: Vec<WorkerStats>,
    /// Packets dropped, by reason (`policy`, `rule`, `no_buffer`, `device_down`, ...).
    #[serde(default)]
    pub drops: std::collections::BTreeMap<String, u64>,
    /// Replies `reject` statements made (TCP resets, ICMP errors), summed over workers.
    #[serde(default)]
    pub rejects: u64,
    /// Lines `log` statements made, summed over workers.
    #[serde(default)]
    pub logged: u64,
    /// Of those, lines the workers' rate limits suppressed.
    #[serde(default)]
    pub log_suppressed: u64,
}

/// One port's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortStats {
    /// Device name.
    pub name: String,
    /// Frames received.
    #[serde(default)]
    pub rx_packets: u64,
    /// Bytes received.
    #[serde(default)]
    pub rx_bytes: u64,
    /// Frames sent.
    #[serde(default)]
    pub tx_packets: u64,
    /// Bytes sent.
    #[serde(default)]
    pub tx_bytes: u64,
    /// Frames the kernel dropped before wasp saw them (ring full).
    #[serde(default)]
    pub rx_dropped: u64,
    /// Frames not sent (no send buffer free, device down).
    #[serde(default)]
    pub tx_dropped: u64,
    /// Receive ring occupancy at the last poll, in percent (0..=100).
    #[serde(default)]
    pub ring_occupancy_pct: u32,
}

/// One worker's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerStats {
    /// Worker number (0-based).
    pub id: u32,
    /// Packets processed.
    #[serde(default)]
    pub packets: u64,
    /// Vectors processed.
    #[serde(default)]
    pub vectors: u64,
    /// Packets dropped by the worker (all reasons).
    #[serde(default)]
    pub dropped: u64,
}

/// Why a request line could not be understood (the server answers with [`Reply::Error`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Not JSON, or not a JSON object.
    #[error("bad request: {0}")]
    Json(String),
    /// No `"v"` field.
    #[error("bad request: no protocol version (\"v\": {VERSION})")]
    NoVersion,
    /// Another protocol version: the `"v"` value as sent, in JSON (`2`, `"1"`, `1.0`, `-1`).
    #[error("unsupported protocol version {0} (this daemon speaks {VERSION})")]
    Version(String),
    /// A known version but an unknown request or missing fields.
    #[error("bad request: {0}")]
    Request(String),
}

/// Encode `req` as one request line (JSON with `"v"`, newline included).
pub fn encode_request(req: &Request) -> String {
    let mut v = serde_json::to_value(req).unwrap_or(serde_json::Value::Null);
    if let serde_json::Value::Object(m) = &mut v {
        m.insert("v".to_string(), serde_json::Value::from(VERSION));
    }
    let mut s = v.to_string();
    s.push('\n');
    s
}

/// Decode one request line (without its newline).
///
/// # Errors
/// [`DecodeError`]: not a JSON object, no or another version, unknown request or fields.
pub fn decode_request(line: &[u8]) -> Result<Request, DecodeError> {
    let v: serde_json::Value =
        serde_json::from_slice(line).map_err(|e| DecodeError::Json(e.to_string()))?;
    let serde_json::Value::Object(m) = &v else {
        return Err(DecodeError::Json("a request is a JSON object".to_string()));
    };
    match m.get("v") {
        None => return Err(DecodeError::NoVersion),
        Some(x) if x.as_u64() == Some(u64::from(VERSION)) => {}
        Some(x) => return Err(DecodeError::Version(x.to_string())),
    }
    serde_json::from_value(v).map_err(|e| DecodeError::Request(e.to_string()))
}

/// Encode one reply line (newline included).
pub fn encode_reply(reply: &Reply) -> String {
    let mut s = serde_json::to_string(reply).unwrap_or_else(|_| "{\"error\":\"encode\"}".into());
    s.push('\n');
    s
}

/// Parse a family name as nft writes it.
pub fn parse_family(name: &str) -> Option<wasp_ruleset::model::Family> {
    use wasp_ruleset::model::Family;
    Some(match name {
        "ip" => Family::Ip,
        "ip6" => Family::Ip6,
        "inet" => Family::Inet,
        "arp" => Family::Arp,
        "bridge" => Family::Bridge,
        "netdev" => Family::Netdev,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(req: Request) {
        let line = encode_request(&req);
        assert!(line.ends_with('\n'));
        assert_eq!(line.matches('\n').count(), 1, "one line: {line}");
        let back = decode_request(line.trim_end().as_bytes()).unwrap();
        assert_eq!(back, req);
    }

    #[test]
    fn requests_round_trip() {
        round_trip(Request::List(ListRequest {
            what: ListWhat::Set,
            family: Some("netdev".into()),
            table: Some("filt".into()),
            name: Some("blk".into()),
            flags: ListFlags {
                handles: true,
                stateless: false,
                terse: true,
                json: false,
            },
        }));
        round_trip(Request::Check {
            text: "add rule ip t c accept".into(),
            name: "<command>".into(),
            json: false,
        });
        round_trip(Request::Apply {
            text: "add rule netdev t c drop\n# \"quoted\"\n".into(),
            name: "batch.nft".into(),
            json: false,
            echo: None,
        });
        round_trip(Request::Apply {
            text: "{\"nftables\": [{\"table\": {\"family\": \"ip\", \"name\": \"t\"}}]}".into(),
            name: "rules.json".into(),
            json: true,
            echo: Some(Echo {
                handles: true,
                json: false,
            }),
        });
        round_trip(Request::Element(ElementRequest {
            op: ElementOp::Get,
            family: None,
            table: "t".into(),
            set: "s".into(),
            elements: "{ 10.0.0.1 }".into(),
        }));
        round_trip(Request::Reset(ResetRequest::Counters {
            family: None,
            table: None,
        }));
        round_trip(Request::Reset(ResetRequest::Rules {
            family: Some("inet".into()),
            table: Some("t".into()),
            chain: Some("c".into()),
        }));
        round_trip(Request::Reset(ResetRequest::Counter {
            family: Some("inet".into()),
            table: "t".into(),
            name: "c".into(),
        }));
        round_trip(Request::Reset(ResetRequest::Quota {
            family: None,
            table: "t".into(),
            name: "q".into(),
        }));
        round_trip(Request::Reset(ResetRequest::Quotas {
            family: None,
            table: None,
        }));
        round_trip(Request::Reset(ResetRequest::Element {
            family: Some("inet".into()),
            table: "t".into(),
            set: "s".into(),
            elements: "{ 22 }".into(),
        }));
        round_trip(Request::Plugin {
            op: PluginOp::Swap,
            name: "geneve".into(),
            path: Some("/x/geneve.wasm".into()),
        });
        round_trip(Request::ConntrackDelete(CtFilter {
            proto: Some("tcp".into()),
            src: Some("10.0.0.0/8".into()),
            dport: Some(22),
            mark: Some(1),
            mark_mask: Some(0xff),
            ..CtFilter::default()
        }));
        round_trip(Request::ConntrackDelete(CtFilter::default()));
        round_trip(Request::Monitor);
        round_trip(Request::MonitorTrace);
        round_trip(Request::MonitorJson);
        round_trip(Request::Stats);
        round_trip(Request::Dump {
            mode: DumpMode::Brief,
            encoding: BriefEncoding::Binary,
        });
    }

    #[test]
    fn wire_shape() {
        // The documented shape (PROTOCOL.md): tagged by "req", versioned by "v".
        let line = encode_request(&Request::Dump {
            mode: DumpMode::Brief,
            encoding: BriefEncoding::Json,
        });
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"v": 1, "req": "dump", "mode": "brief", "encoding": "json"})
        );
        // Defaults: a bare list is `list ruleset` without flags.
        let r = decode_request(br#"{"v":1,"req":"list"}"#);
        assert!(r.is_err(), "list needs `what`");
        let r = decode_request(br#"{"v":1,"req":"list","what":"tables"}"#).unwrap();
        assert_eq!(
            r,
            Request::List(ListRequest {
                what: ListWhat::Tables,
                ..ListRequest::default()
            })
        );
        let r = decode_request(br#"{"v":1,"req":"dump"}"#).unwrap();
        assert_eq!(
            r,
            Request::Dump {
                mode: DumpMode::Full,
                encoding: BriefEncoding::Json
            }
        );
        assert_eq!(
            encode_reply(&Reply::Ok(serde_json::Value::Null)),
            "{\"ok\":null}\n"
        );
        assert_eq!(
            encode_reply(&Reply::Error("x:1:2: error: y".into())),
            "{\"error\":\"x:1:2: error: y\"}\n"
        );
        assert_eq!(encode_reply(&Reply::Bin(4096)), "{\"bin\":4096}\n");
        assert_eq!(
            encode_reply(&Reply::Text("table ip t {\n".into())),
            "{\"text\":\"table ip t {\\n\"}\n"
        );
    }

    #[test]
    fn bad_requests() {
        assert!(matches!(
            decode_request(b"nonsense"),
            Err(DecodeError::Json(_))
        ));
        assert!(matches!(
            decode_request(b"[1,2]"),
            Err(DecodeError::Json(_))
        ));
        assert_eq!(
            decode_request(br#"{"req":"stats"}"#),
            Err(DecodeError::NoVersion)
        );
        assert_eq!(
            decode_request(br#"{"v":2,"req":"stats"}"#),
            Err(DecodeError::Version("2".into()))
        );
        assert!(matches!(
            decode_request(br#"{"v":1,"req":"frobnicate"}"#),
            Err(DecodeError::Request(_))
        ));
        assert!(matches!(
            decode_request(br#"{"v":1,"req":"apply","text":"x"}"#),
            Err(DecodeError::Request(_))
        ));
        assert_eq!(
            DecodeError::Version("7".into()).to_string(),
            "unsupported protocol version 7 (this daemon speaks 1)"
        );
        // A version of another type is named as it was sent, not as a number it is not.
        for (sent, named) in [
            (r#""1""#, r#""1""#),
            ("1.0", "1.0"),
            ("-1", "-1"),
            ("null", "null"),
        ] {
            let line = format!(r#"{{"v":{sent},"req":"stats"}}"#);
            assert_eq!(
                decode_request(line.as_bytes()),
                Err(DecodeError::Version(named.into())),
                "{sent}"
            );
        }
    }

    #[test]
    fn element_command_text() {
        let e = ElementRequest {
            op: ElementOp::Delete,
            family: Some("netdev".into()),
            table: "filt".into(),
            set: "blk".into(),
            elements: "{ 10.0.0.1 }".into(),
        };
        assert_eq!(
            e.command_text(),
            "delete element netdev filt blk { 10.0.0.1 }\n"
        );
    }
}
