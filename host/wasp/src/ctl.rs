//! `wasp ctl`: the client side of the control socket, with nft's words and flags where nft
//! has them (`list`, `-f`, `add|create|delete|destroy|get element`, `reset`, `monitor`, `-a -s -t -j`) and
//! wasp's own (`plugin`, `stats`, `dump rules [--brief]`). The protocol is
//! `host/ctl/PROTOCOL.md`.
//!
//! Output: what the daemon sends, as nft prints it. An error from the daemon is printed as the
//! daemon words it (nft's text, file:line:col for a ruleset) and the exit code is 1; no daemon
//! at the socket is a clear message, exit 1.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use wasp_ctl::client::Incoming;
use wasp_ctl::dump::{FLAG_COUNTER, RECORD_BYTES, Record, push_u64};
use wasp_ctl::proto::{
    BriefEncoding, ChainInfo, CtFilter, DumpMode, Echo, ElementOp, ElementRequest, ListFlags,
    PluginOp, Reply, Request, ResetRequest, Stats, parse_family,
};
use wasp_ctl::{Client, ClientError};

use crate::error::Error;

/// `wasp ctl [--socket PATH] [-a] [-s] [-t] [-j] [-c] [-e] (-f FILE | COMMAND...)`.
///
/// Commands: nft's changes, each one transaction: `add|create|insert|replace|delete|destroy
/// rule|table|chain|set|map|counter|quota|limit|flowtable ...` (rules placed by `position
/// H`, `handle H` or `index N`), `flush ruleset|table|chain|set ...`; `list
/// ruleset|tables|chains|sets|maps|flowtables [FAMILY]`, `list counters|quotas|limits [[table]
/// [FAMILY] TABLE]`, `list set|map|chain|counter|quota|limit [FAMILY] TABLE NAME`, `list table [FAMILY] TABLE`, `add|create|delete|destroy|get element
/// [FAMILY] TABLE SET { ELEMENTS }`, `reset counters [table [FAMILY] TABLE]`, `reset
/// counter|quota [FAMILY] TABLE NAME`, `reset rules
/// [table [FAMILY] TABLE | chain [FAMILY] TABLE CHAIN]`, `reset quotas [table [FAMILY]
/// TABLE]`, `reset element [FAMILY] TABLE SET { ELEMENTS }` (each reads and zeroes in one step:
/// concurrent resets never report a packet twice), `plugin load|swap NAME PATH`, `plugin unload
/// NAME`, `plugin state` (what each worker's plugin instances list per use site),
/// `list conntrack`, `delete conntrack [proto P] [src ADDR[/LEN]] [dst ADDR[/LEN]] [sport N]
/// [dport N] [mark M[/MASK]] [zone Z]`, `flush conntrack`, `monitor`, `monitor trace` (the
/// walks of packets `meta nftrace set 1` marked, as `nft monitor trace`), `stats`, `dump rules
/// [--brief]`. With `-e`, a change prints what it made, as `nft -e` (with `-a`, handles; with `-j`, JSON).
#[derive(Debug, Args)]
#[command(trailing_var_arg = true)]
pub struct CtlArgs {
    /// The daemon's control socket.
    #[arg(long, value_name = "PATH", default_value = wasp_ctl::server::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Show object handles (nft -a).
    #[arg(short = 'a', long = "handle")]
    pub handles: bool,
    /// Stateless: omit counter values (nft -s).
    #[arg(short = 's', long)]
    pub stateless: bool,
    /// Terse: omit set elements (nft -t).
    #[arg(short = 't', long)]
    pub terse: bool,
    /// JSON (nft -j): output in libnftables' JSON schema; with `-f`, the file (or standard
    /// input) is a JSON ruleset or batch in that schema (`{"nftables": [...]}`), as `nft -j -f`
    /// reads it. With `monitor`, nft's JSON events; with `dump rules`, the protocol's lines as
    /// they come.
    #[arg(short = 'j', long)]
    pub json: bool,
    /// Echo (nft -e): print what a change made, as `nft -e` does (with `-a`, handles; with
    /// `-j`, as one libnftables JSON line).
    #[arg(short = 'e', long)]
    pub echo: bool,
    /// Check only (nft -c): the file or command is parsed, applied to a copy of the running
    /// ruleset and compiled; nothing changes. Exit 0 when it would apply.
    #[arg(short = 'c', long)]
    pub check: bool,
    /// Apply a ruleset or a batch of add/create/delete/flush commands atomically (`-` reads
    /// standard input); with `-j`, a JSON one in libnftables' schema.
    #[arg(
        short = 'f',
        long = "file",
        value_name = "FILE",
        conflicts_with = "command"
    )]
    pub file: Option<PathBuf>,
    /// The command, in nft's words.
    #[arg(value_name = "COMMAND", allow_hyphen_values = true)]
    pub command: Vec<String>,
}

/// The usage line of the commands, for errors.
const COMMANDS: &str = "add|create|insert|replace|delete|flush table|chain|rule|set|map|counter|quota|limit|flowtable ..., list ..., list conntrack, delete conntrack [FILTER], flush conntrack, list flowtable [[FAMILY] TABLE] NAME, add|create|delete|destroy|get element ..., reset counters|counter|rules|quotas|quota|element ..., plugin load|swap|unload ..., plugin state, monitor, monitor trace, stats, dump rules [--brief], or -f FILE";

/// What the command line asks, as a request and how to print its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The request.
    pub request: Request,
    /// How to print its replies.
    pub output: Output,
}

/// How replies are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Text pieces as they come (`list`, `get element`, `reset`).
    Text,
    /// Nothing but errors (`-f`, `add|delete element`, `plugin`).
    Quiet,
    /// Events, one per line.
    Events,
    /// The `stats` table (or its JSON).
    Stats,
    /// Rules of a full dump.
    DumpFull,
    /// Records of a brief dump.
    DumpBrief,
    /// The protocol's lines as they come (`-j` with `dump` or `monitor`).
    Raw,
    /// How many connections were deleted (`delete|flush conntrack`), as `conntrack -D` says.
    Deleted,
}

/// `delete conntrack` words: `[proto P] [src ADDR[/LEN]] [dst ADDR[/LEN]] [sport N] [dport N]
/// [mark M[/MASK]] [zone Z]`, each at most once.
fn ct_filter(words: &[&str]) -> Result<CtFilter, Error> {
    const USAGE: &str = "delete conntrack [proto P] [src ADDR[/LEN]] [dst ADDR[/LEN]] [sport N] [dport N] [mark M[/MASK]] [zone Z]";
    let mut f = CtFilter::default();
    let num = |w: &str| -> Result<u64, Error> {
        let (digits, radix) = match w.strip_prefix("0x") {
            Some(h) => (h, 16),
            None => (w, 10),
        };
        u64::from_str_radix(digits, radix)
            .map_err(|_| usage(format!("`{w}` is not a number: {USAGE}")))
    };
    let small = |w: &str, max: u64| -> Result<u64, Error> {
        let n = num(w)?;
        if n > max {
            return Err(usage(format!("`{w}` is out of range (at most {max})")));
        }
        Ok(n)
    };
    let mut it = words.iter();
    while let Some(&key) = it.next() {
        let &value = it
            .next()
            .ok_or_else(|| usage(format!("`{key}` needs a value: {USAGE}")))?;
        let dup = |set: bool| -> Result<(), Error> {
            match set {
                true => Err(usage(format!("`{key}` given twice"))),
                false => Ok(()),
            }
        };
        match key {
            "proto" => {
                dup(f.proto.is_some())?;
                f.proto = Some(value.to_string());
            }
            "src" => {
                dup(f.src.is_some())?;
                f.src = Some(value.to_string());
            }
            "dst" => {
                dup(f.dst.is_some())?;
                f.dst = Some(value.to_string());
            }
            "sport" => {
                dup(f.sport.is_some())?;
                f.sport = Some(small(value, 65535)? as u16);
            }
            "dport" => {
                dup(f.dport.is_some())?;
                f.dport = Some(small(value, 65535)? as u16);
            }
            "mark" => {
                dup(f.mark.is_some())?;
                let (m, mask) = value.split_once('/').unwrap_or((value, ""));
                f.mark = Some(small(m, u64::from(u32::MAX))? as u32);
                if !mask.is_empty() {
                    f.mark_mask = Some(small(mask, u64::from(u32::MAX))? as u32);
                }
            }
            "zone" => {
                dup(f.zone.is_some())?;
                f.zone = Some(small(value, 65535)? as u16);
            }
            other => return Err(usage(format!("unknown filter `{other}`: {USAGE}"))),
        }
    }
    Ok(f)
}

fn usage(msg: impl Into<String>) -> Error {
    Error::Usage(msg.into())
}

/// `[FAMILY] TABLE SET { ... }` after `element`.
fn element_words(
    words: &[String],
    what: &str,
) -> Result<(Option<String>, String, String, String), Error> {
    let brace = words
        .iter()
        .position(|w| w.starts_with('{'))
        .ok_or_else(|| {
            usage(format!(
                "{what}: expected `{{ ELEMENTS }}` after the set's name"
            ))
        })?;
    let names = &words[..brace];
    let elements = words[brace..].join(" ");
    match names {
        [f, t, s] if parse_family(f).is_some() => {
            Ok((Some(f.clone()), t.clone(), s.clone(), elements))
        }
        [t, s] => Ok((None, t.clone(), s.clone(), elements)),
        _ => Err(usage(format!(
            "{what}: expected [FAMILY] TABLE SET {{ ELEMENTS }}"
        ))),
    }
}

/// Read the command line into a request.
///
/// # Errors
/// [`Error::Usage`] for a command wasp ctl does not know; a file that cannot be read.
pub fn plan(args: &CtlArgs) -> Result<Plan, Error> {
    let flags = ListFlags {
        handles: args.handles,
        stateless: args.stateless,
        terse: args.terse,
        json: args.json,
    };
    if let Some(file) = &args.file {
        let text = if file == Path::new("-") {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map_err(|e| {
                Error::Output {
                    path: PathBuf::from("<stdin>"),
                    message: e.to_string(),
                }
            })?;
            s
        } else {
            std::fs::read_to_string(file).map_err(|e| {
                Error::Ruleset(wasp_ruleset::Error::Io {
                    path: file.clone(),
                    message: e.to_string(),
                })
            })?
        };
        let name = file.display().to_string();
        // `-j -f FILE`: the file is JSON in libnftables' schema (nft -j -f).
        let json = args.json;
        return Ok(Plan {
            request: match args.check {
                true => Request::Check { text, name, json },
                false => Request::Apply {
                    text,
                    name,
                    json,
                    echo: echo(args),
                },
            },
            output: Output::Quiet,
        });
    }
    let words: Vec<&str> = args.command.iter().map(String::as_str).collect();
    let plan = |request, output| Ok(Plan { request, output });
    match words.as_slice() {
        [] => Err(usage(format!("wasp ctl: expected a command: {COMMANDS}"))),
        ["list", "conntrack"] => plan(Request::Conntrack, Output::Text),
        ["flush", "conntrack"] => plan(
            Request::ConntrackDelete(CtFilter::default()),
            Output::Deleted,
        ),
        ["delete", "conntrack", rest @ ..] => {
            plan(Request::ConntrackDelete(ct_filter(rest)?), Output::Deleted)
        }
        ["list", "flows"] => plan(Request::Flows { name: None }, Output::Text),
        ["list", "flowtable", .., name] if words.len() <= 5 => plan(
            Request::Flows {
                name: Some((*name).to_string()),
            },
            Output::Text,
        ),
        ["list", rest @ ..] => {
            let req = wasp_ctl::listing::parse_list_words(rest, flags).map_err(usage)?;
            plan(Request::List(req), Output::Text)
        }
        [
            op @ ("add" | "create" | "delete" | "destroy" | "get"),
            "element",
            ..,
        ] => {
            let (family, table, set, elements) =
                element_words(&args.command[2..], &format!("{op} element"))?;
            let op = match *op {
                "add" => ElementOp::Add,
                "create" => ElementOp::Create,
                "delete" => ElementOp::Delete,
                "destroy" => ElementOp::Destroy,
                _ => ElementOp::Get,
            };
            let output = if op == ElementOp::Get {
                Output::Text
            } else {
                Output::Quiet
            };
            let req = ElementRequest {
                op,
                family,
                table,
                set,
                elements,
            };
            if op != ElementOp::Get && args.echo && !args.check {
                // Echo comes with a batch's answer: send the element command as one.
                return plan(
                    Request::Apply {
                        text: format!("{}\n", req.command_text()),
                        name: "<command>".to_string(),
                        json: false,
                        echo: echo(args),
                    },
                    output,
                );
            }
            plan(Request::Element(req), output)
        }
        ["reset", "counters"] => plan(
            Request::Reset(ResetRequest::Counters {
                family: None,
                table: None,
            }),
            Output::Text,
        ),
        ["reset", "counters", "table", rest @ ..] => {
            let (family, table) = match rest {
                [f, t] if parse_family(f).is_some() => (Some((*f).to_string()), *t),
                [t] => (None, *t),
                _ => return Err(usage("reset counters table [FAMILY] TABLE")),
            };
            plan(
                Request::Reset(ResetRequest::Counters {
                    family,
                    table: Some(table.to_string()),
                }),
                Output::Text,
            )
        }
        ["reset", "rules", rest @ ..] => {
            let (family, table, chain) = match rest {
                [] => (None, None, None),
                ["table", f, t] if parse_family(f).is_some() => (Some(*f), Some(*t), None),
                ["table", t] => (None, Some(*t), None),
                ["chain", f, t, c] if parse_family(f).is_some() => (Some(*f), Some(*t), Some(*c)),
                ["chain", t, c] => (None, Some(*t), Some(*c)),
                _ => {
                    return Err(usage(
                        "reset rules [table [FAMILY] TABLE | chain [FAMILY] TABLE CHAIN]",
                    ));
                }
            };
            let own = |s: Option<&str>| s.map(str::to_string);
            plan(
                Request::Reset(ResetRequest::Rules {
                    family: own(family),
                    table: own(table),
                    chain: own(chain),
                }),
                Output::Text,
            )
        }
        ["reset", what @ ("counter" | "quota"), rest @ ..] => {
            let (family, table, name) = match rest {
                [f, t, n] if parse_family(f).is_some() => (Some((*f).to_string()), *t, *n),
                [t, n] => (None, *t, *n),
                _ => return Err(usage(format!("reset {what} [FAMILY] TABLE NAME"))),
            };
            let (table, name) = (table.to_string(), name.to_string());
            let req = match *what {
                "counter" => ResetRequest::Counter {
                    family,
                    table,
                    name,
                },
                _ => ResetRequest::Quota {
                    family,
                    table,
                    name,
                },
            };
            plan(Request::Reset(req), Output::Text)
        }
        ["reset", "quotas", rest @ ..] => {
            let (family, table) = match rest {
                [] => (None, None),
                ["table", f, t] if parse_family(f).is_some() => (Some((*f).to_string()), Some(*t)),
                ["table", t] => (None, Some(*t)),
                _ => return Err(usage("reset quotas [table [FAMILY] TABLE]")),
            };
            plan(
                Request::Reset(ResetRequest::Quotas {
                    family,
                    table: table.map(str::to_string),
                }),
                Output::Text,
            )
        }
        ["reset", "element", ..] => {
            let (family, table, set, elements) =
                element_words(&args.command[2..], "reset element")?;
            plan(
                Request::Reset(ResetRequest::Element {
                    family,
                    table,
                    set,
                    elements,
                }),
                Output::Text,
            )
        }
        ["plugin", op @ ("load" | "swap"), name, path] => {
            let op = if *op == "load" {
                PluginOp::Load
            } else {
                PluginOp::Swap
            };
            // The daemon reads the file: give it an absolute path.
            let path = std::path::absolute(path).unwrap_or_else(|_| PathBuf::from(path));
            plan(
                Request::Plugin {
                    op,
                    name: (*name).to_string(),
                    path: Some(path.display().to_string()),
                },
                Output::Quiet,
            )
        }
        ["plugin", "state"] => plan(Request::PluginState, Output::Text),
        ["plugin", "unload", name] => plan(
            Request::Plugin {
                op: PluginOp::Unload,
                name: (*name).to_string(),
                path: None,
            },
            Output::Quiet,
        ),
        ["plugin", ..] => Err(usage(
            "plugin load|swap NAME PATH, plugin unload NAME, or plugin state",
        )),
        ["monitor", "trace"] => plan(Request::MonitorTrace, Output::Events),
        ["monitor"] if args.json => plan(Request::MonitorJson, Output::Events),
        ["monitor"] => plan(Request::Monitor, Output::Events),
        ["stats"] => plan(Request::Stats, Output::Stats),
        ["dump", "rules", rest @ ..] => {
            let brief = match rest {
                [] => false,
                ["--brief"] => true,
                _ => return Err(usage("dump rules [--brief]")),
            };
            let (mode, encoding, output) = match (brief, args.json) {
                (false, false) => (DumpMode::Full, BriefEncoding::Json, Output::DumpFull),
                (false, true) => (DumpMode::Full, BriefEncoding::Json, Output::Raw),
                (true, false) => (DumpMode::Brief, BriefEncoding::Binary, Output::DumpBrief),
                (true, true) => (DumpMode::Brief, BriefEncoding::Json, Output::Raw),
            };
            plan(Request::Dump { mode, encoding }, output)
        }
        // nft's other changes, one command as a one-line batch (nft joins its words the same
        // way): all or nothing.
        [
            "add" | "create" | "insert" | "replace" | "delete" | "destroy" | "flush",
            "table" | "chain" | "rule" | "set" | "map" | "counter" | "quota" | "limit"
            | "flowtable" | "ruleset",
            ..,
        ] => {
            let text = format!("{}\n", words.join(" "));
            let name = "<command>".to_string();
            plan(
                match args.check {
                    true => Request::Check {
                        text,
                        name,
                        json: false,
                    },
                    false => Request::Apply {
                        text,
                        name,
                        json: false,
                        echo: echo(args),
                    },
                },
                Output::Quiet,
            )
        }
        _ => Err(usage(format!(
            "wasp ctl: unknown command `{}`: {COMMANDS}",
            words.join(" ")
        ))),
    }
}

/// `-e`: how the reply should echo the change (`None` without `-e`).
fn echo(args: &CtlArgs) -> Option<Echo> {
    args.echo.then_some(Echo {
        handles: args.handles,
        json: args.json,
    })
}

/// Do what `args` asks of the daemon.
///
/// # Errors
/// [`Error::Usage`] for a bad command line; [`Error::Ctl`] when the daemon cannot be
/// reached or answers with an error (its message as nft prints it); [`Error::Output`] when
/// stdout fails.
pub fn main(args: &CtlArgs, stdout: &mut dyn Write, stderr: &mut dyn Write) -> Result<(), Error> {
    let plan = plan(args)?;
    let mut client = Client::connect(&args.socket).map_err(ctl_error)?;
    let out_err = |e: std::io::Error| Error::Output {
        path: PathBuf::from("<stdout>"),
        message: e.to_string(),
    };
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout);
    let mut chains: Vec<ChainInfo> = Vec::new();
    let mut line = Vec::with_capacity(256);
    let result = client.call(&plan.request, &mut |item| {
        match (plan.output, item) {
            (Output::Text, Incoming::Reply(Reply::Text(t))) => out.write_all(t.as_bytes()),
            (Output::Events, Incoming::Reply(Reply::Event(e))) => {
                writeln!(out, "{e}")?;
                out.flush()
            }
            (Output::DumpFull, Incoming::Reply(Reply::Rule(r))) => writeln!(
                out,
                "add rule {} {} {} {} # handle {}",
                r.family, r.table, r.chain, r.text, r.handle
            ),
            (Output::DumpBrief, Incoming::Reply(Reply::Chain(c))) => {
                chains.push(c);
                Ok(())
            }
            (Output::DumpBrief, Incoming::Binary(frame)) => {
                for rec in frame.chunks_exact(RECORD_BYTES) {
                    if let Some(r) = Record::decode(rec) {
                        brief_line(&mut line, &chains, &r);
                        out.write_all(&line)?;
                    }
                }
                Ok(())
            }
            (Output::DumpBrief, Incoming::Record(r)) => {
                brief_line(&mut line, &chains, &r);
                out.write_all(&line)
            }
            (Output::Raw, Incoming::Reply(r)) => {
                out.write_all(wasp_ctl::proto::encode_reply(&r).as_bytes())?;
                out.flush()
            }
            (Output::Raw, Incoming::Record(r)) => {
                line.clear();
                r.write_json(&mut line);
                line.push(b'\n');
                out.write_all(&line)
            }
            // Anything else (a line this command does not print) is skipped.
            _ => Ok(()),
        }
    });
    let value = match result {
        Ok(v) => v,
        Err(ClientError::Io(e)) => return Err(out_err(e)),
        Err(e) => {
            let _ = out.flush();
            return Err(ctl_error(e));
        }
    };
    if let Request::Plugin {
        op: PluginOp::Swap,
        name,
        ..
    } = &plan.request
    {
        // A swap whose new version did not take the old one's state succeeded, but what the
        // plugin counted or remembered starts over: say so.
        let workers = value["workers"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for (i, w) in workers.iter().enumerate() {
            if let Some(why) = w.as_str().and_then(|w| w.strip_prefix("fresh: ")) {
                let _ = writeln!(
                    stderr,
                    "wasp ctl: warning: plugin {name} on worker {i} started without the old version's state ({why}): what it counted or remembered starts over"
                );
            }
        }
    }
    if let Some(lines) = value["echo"].as_array() {
        for l in lines.iter().filter_map(serde_json::Value::as_str) {
            writeln!(out, "{l}").map_err(out_err)?;
        }
    }
    if plan.output == Output::Raw {
        out.write_all(wasp_ctl::proto::encode_reply(&Reply::Ok(value.clone())).as_bytes())
            .map_err(out_err)?;
    }
    if plan.output == Output::Deleted {
        let n = value["deleted"].as_u64().unwrap_or(0);
        writeln!(out, "{n} connections deleted").map_err(out_err)?;
    }
    if plan.output == Output::Stats {
        let stats: Stats = serde_json::from_value(value.clone()).unwrap_or_default();
        if args.json {
            writeln!(out, "{value}").map_err(out_err)?;
        } else {
            out.write_all(stats_text(&stats).as_bytes())
                .map_err(out_err)?;
        }
    }
    out.flush().map_err(out_err)
}

fn ctl_error(e: ClientError) -> Error {
    Error::Ctl(e.to_string())
}

/// `FAMILY TABLE CHAIN HANDLE PACKETS BYTES` (`- -` for a rule without a counter).
fn brief_line(line: &mut Vec<u8>, chains: &[ChainInfo], r: &Record) {
    line.clear();
    match chains.get(r.chain as usize) {
        Some(c) => {
            line.extend_from_slice(c.family.as_bytes());
            line.push(b' ');
            line.extend_from_slice(c.table.as_bytes());
            line.push(b' ');
            line.extend_from_slice(c.name.as_bytes());
        }
        None => {
            line.extend_from_slice(b"? ? ");
            push_u64(line, u64::from(r.chain));
        }
    }
    line.push(b' ');
    push_u64(line, r.handle);
    if r.flags & FLAG_COUNTER != 0 {
        line.push(b' ');
        push_u64(line, r.packets);
        line.push(b' ');
        push_u64(line, r.bytes);
    } else {
        line.extend_from_slice(b" - -");
    }
    line.push(b'\n');
}

/// The `stats` table.
pub fn stats_text(s: &Stats) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12} {:>12} {:>14} {:>12} {:>14} {:>10} {:>10} {:>5}",
        "port", "rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "rx_drop", "tx_drop", "ring%"
    );
    for p in &s.ports {
        let _ = writeln!(
            out,
            "{:<12} {:>12} {:>14} {:>12} {:>14} {:>10} {:>10} {:>5}",
            p.name,
            p.rx_packets,
            p.rx_bytes,
            p.tx_packets,
            p.tx_bytes,
            p.rx_dropped,
            p.tx_dropped,
            p.ring_occupancy_pct
        );
    }
    let _ = writeln!(
        out,
        "\n{:<12} {:>12} {:>12} {:>12}",
        "worker", "packets", "vectors", "dropped"
    );
    for w in &s.workers {
        let _ = writeln!(
            out,
            "{:<12} {:>12} {:>12} {:>12}",
            w.id, w.packets, w.vectors, w.dropped
        );
    }
    if s.rejects > 0 || s.logged > 0 {
        let _ = writeln!(
            out,
            "\nreject replies {}  log lines {} ({} suppressed)",
            s.rejects, s.logged, s.log_suppressed
        );
    }
    if !s.drops.is_empty() {
        let _ = writeln!(out, "\n{:<24} {:>12}", "drop reason", "packets");
        for (k, v) in &s.drops {
            let _ = writeln!(out, "{k:<24} {v:>12}");
        }
    }
    out
}
