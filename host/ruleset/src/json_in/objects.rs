//! JSON commands and ruleset objects (`man libnftables-json`, COMMAND OBJECTS and RULESET
//! ELEMENTS) as nft command lines: tables, chains, rules, sets and maps, elements,
//! flowtables, counters, quotas, limits and conntrack objects.

use serde_json::Value as Json;

use super::expr::{
    Obj, elements, expr, flag, kind, name, object, opt_str, opt_u64, quoted, req_str, req_u64,
    single, str_list,
};
use super::stmt::statement;
use super::{Fault, JSON_SCHEMA_VERSION, fault};

/// One generated command line and where it came from.
pub(super) struct Line {
    /// The nft command (no newline).
    pub text: String,
    /// The JSON path of its object (`nftables[3].add.rule`).
    pub pointer: String,
    /// For a rule: the 1-based column of each statement of `expr` in `text`.
    pub stmt_cols: Vec<u32>,
}

/// Object kinds a command can name.
const KINDS: &str = "`table`, `chain`, `rule`, `set`, `map`, `element`, `flowtable`, `counter`, `quota`, `limit`, `ct helper`, `ct timeout`, `ct expectation`";

/// One entry of the `nftables` array as a command line (`None` for `metainfo`).
///
/// # Errors
/// A command or object the schema does not have, or one missing what it needs.
pub(super) fn command(c: &Json, at: &str) -> Result<Option<Line>, Fault> {
    let o = object(c, at, "a command")?;
    let (key, body) = single(o, at, "a command")?;
    match key {
        "metainfo" => {
            let here = format!("{at}.metainfo");
            let m = object(body, &here, "library information")?;
            if let Some(v) = opt_u64(m, "json_schema_version", &here)?
                && v > JSON_SCHEMA_VERSION
            {
                return fault(
                    &format!("{here}.json_schema_version"),
                    format!(
                        "schema version {v} is newer than the one understood here ({JSON_SCHEMA_VERSION})"
                    ),
                );
            }
            Ok(None)
        }
        "add" | "create" | "insert" | "replace" | "delete" | "destroy" | "flush" => {
            let here = format!("{at}.{key}");
            let inner = object(body, &here, "the object of the command")?;
            let (what, obj) = single(inner, &here, "the object of the command")?;
            object_command(key, what, obj, &format!("{here}.{what}")).map(Some)
        }
        "list" | "reset" | "rename" => fault(
            &format!("{at}.{key}"),
            format!("`{key}` is not a command of a ruleset file (use `wasp ctl {key} ...`)"),
        ),
        // A bare object is `add` (nft -j list ruleset's output read back).
        _ => object_command("add", key, body, &format!("{at}.{key}")).map(Some),
    }
}

/// `family`, `table` (and the object's `name`) of an object, as words.
fn family(o: &Obj, at: &str) -> Result<String, Fault> {
    let f = req_str(o, "family", at)?;
    match f {
        "ip" | "ip6" | "inet" | "arp" | "bridge" | "netdev" => Ok(f.to_string()),
        other => fault(
            &format!("{at}.family"),
            format!("unknown family `{other}` (ip, ip6, inet, arp, bridge, netdev)"),
        ),
    }
}

/// `FAMILY TABLE` of an object inside a table.
fn in_table(o: &Obj, at: &str) -> Result<String, Fault> {
    Ok(format!(
        "{} {}",
        family(o, at)?,
        name(req_str(o, "table", at)?, &format!("{at}.table"))?
    ))
}

/// `NAME`, or `handle N` where the command may name the object by handle (delete).
fn name_or_handle(o: &Obj, verb: &str, at: &str) -> Result<String, Fault> {
    if matches!(verb, "delete" | "destroy")
        && !o.contains_key("name")
        && let Some(h) = opt_u64(o, "handle", at)?
    {
        return Ok(format!("handle {h}"));
    }
    name(req_str(o, "name", at)?, &format!("{at}.name"))
}

/// `comment "..."` of an object, if it has one.
fn comment(o: &Obj, at: &str) -> Result<Option<String>, Fault> {
    opt_str(o, "comment", at)?
        .map(|c| quoted(c, &format!("{at}.comment")).map(|q| format!("comment {q}")))
        .transpose()
}

/// A block `{ a; b; }` of `parts`, or nothing when there are none.
fn block(parts: &[String]) -> String {
    if parts.is_empty() {
        String::new()
    } else {
        format!(" {{ {}; }}", parts.join("; "))
    }
}

fn object_command(verb: &str, what: &str, body: &Json, at: &str) -> Result<Line, Fault> {
    let line = |text: String| Line {
        text,
        pointer: at.to_string(),
        stmt_cols: Vec::new(),
    };
    let changes = matches!(verb, "add" | "create");
    if what == "ruleset" {
        return match verb {
            "flush" => Ok(line("flush ruleset".into())),
            _ => fault(
                at,
                format!("`{verb} ruleset` is no command (`flush ruleset` is)"),
            ),
        };
    }
    if matches!(verb, "insert" | "replace") && what != "rule" {
        return fault(at, format!("`{verb}` takes a rule, found `{what}`"));
    }
    let o = object(body, at, &format!("a {what}"))?;
    match what {
        "table" => {
            let f = family(o, at)?;
            let n = name_or_handle(o, verb, at)?;
            let mut parts = Vec::new();
            if changes {
                let flags = str_list(o, "flags", at)?;
                if !flags.is_empty() {
                    parts.push(format!("flags {}", flags.join(",")));
                }
                parts.extend(comment(o, at)?);
            }
            Ok(line(format!("{verb} table {f} {n}{}", block(&parts))))
        }
        "chain" => {
            let t = in_table(o, at)?;
            let n = name_or_handle(o, verb, at)?;
            let parts = if changes {
                chain_spec(o, at)?
            } else {
                Vec::new()
            };
            Ok(line(format!("{verb} chain {t} {n}{}", block(&parts))))
        }
        "rule" => rule(verb, o, at),
        "set" | "map" => {
            let t = in_table(o, at)?;
            let n = name_or_handle(o, verb, at)?;
            let parts = if changes {
                set_spec(what, o, at)?
            } else {
                Vec::new()
            };
            Ok(line(format!("{verb} {what} {t} {n}{}", block(&parts))))
        }
        "element" => {
            let t = in_table(o, at)?;
            let n = name(req_str(o, "name", at)?, &format!("{at}.name"))?;
            let elem = o.get("elem").ok_or_else(|| Fault {
                pointer: at.to_string(),
                message: "missing property `elem` (the elements)".into(),
            })?;
            let items: Vec<&Json> = match elem {
                Json::Array(a) => a.iter().collect(),
                one => vec![one],
            };
            Ok(line(format!(
                "{verb} element {t} {n} {{ {} }}",
                elements(&items, &format!("{at}.elem"))?
            )))
        }
        "flowtable" => {
            let t = in_table(o, at)?;
            let n = name_or_handle(o, verb, at)?;
            let mut parts = Vec::new();
            if changes {
                if let Some(h) = opt_str(o, "hook", at)? {
                    parts.push(format!("hook {h} priority {}", prio(o, at)?));
                }
                let devs = devices(o, at)?;
                if !devs.is_empty() {
                    parts.push(format!("devices = {{ {} }}", devs.join(", ")));
                }
            }
            Ok(line(format!("{verb} flowtable {t} {n}{}", block(&parts))))
        }
        "counter" | "quota" | "limit" | "ct helper" | "ct timeout" | "ct expectation" => {
            let t = in_table(o, at)?;
            let n = name_or_handle(o, verb, at)?;
            let mut parts = if changes {
                stateful_spec(what, o, at)?
            } else {
                Vec::new()
            };
            if changes {
                parts.extend(comment(o, at)?);
            }
            // A counter's block may be empty: `add counter ip t c`.
            Ok(line(format!("{verb} {what} {t} {n}{}", block(&parts))))
        }
        other => fault(at, format!("unknown object `{other}` ({KINDS})")),
    }
}

/// A chain's priority: a number (negative too) or a name (`filter`, `dstnat + 10`).
fn prio(o: &Obj, at: &str) -> Result<String, Fault> {
    match o.get("prio") {
        Some(Json::Number(n)) if n.as_i64().is_some() => Ok(n.to_string()),
        Some(Json::String(s)) => Ok(s.clone()),
        Some(other) => fault(
            &format!("{at}.prio"),
            format!("expected a priority (a number), found {}", kind(other)),
        ),
        None => fault(at, "missing property `prio` (a base chain's priority)"),
    }
}

/// `dev`: one device or a list, each quoted.
fn devices(o: &Obj, at: &str) -> Result<Vec<String>, Fault> {
    str_list(o, "dev", at)?
        .iter()
        .map(|d| quoted(d, &format!("{at}.dev")))
        .collect()
}

/// A chain's block: `type T hook H [device D] priority P`, `policy P`, `comment`.
fn chain_spec(o: &Obj, at: &str) -> Result<Vec<String>, Fault> {
    let mut parts = Vec::new();
    if let Some(ty) = opt_str(o, "type", at)? {
        let hook = req_str(o, "hook", at)?;
        let devs = devices(o, at)?;
        let dev = match devs.len() {
            0 => String::new(),
            1 => format!(" device {}", devs[0]),
            _ => format!(" devices = {{ {} }}", devs.join(", ")),
        };
        parts.push(format!(
            "type {ty} hook {hook}{dev} priority {}",
            prio(o, at)?
        ));
        if let Some(p) = opt_str(o, "policy", at)? {
            parts.push(format!("policy {p}"));
        }
    } else if o.contains_key("hook") {
        return fault(at, "a base chain needs `type`, `hook` and `prio`");
    }
    parts.extend(comment(o, at)?);
    Ok(parts)
}

/// A set's key or data type: `"ipv4_addr"`, `["ipv4_addr", "inet_service"]` (a
/// concatenation) or `{"typeof": EXPR}`.
fn set_type(v: &Json, at: &str) -> Result<String, Fault> {
    match v {
        Json::String(s) => Ok(s.clone()),
        Json::Array(a) if !a.is_empty() => Ok(a
            .iter()
            .enumerate()
            .map(|(i, x)| match x {
                Json::String(s) => Ok(s.clone()),
                other => fault(
                    &format!("{at}[{i}]"),
                    format!("expected a type name, found {}", kind(other)),
                ),
            })
            .collect::<Result<Vec<_>, _>>()?
            .join(" . ")),
        Json::Object(o) if o.contains_key("typeof") => {
            Ok(expr(&o["typeof"], &format!("{at}.typeof"))?)
        }
        other => fault(
            at,
            format!(
                "expected a type name, a list of them or `{{\"typeof\": ...}}`, found {}",
                kind(other)
            ),
        ),
    }
}

/// A set's or map's block: `type K [: V]`, flags, timeout, size, policy, elements.
fn set_spec(what: &str, o: &Obj, at: &str) -> Result<Vec<String>, Fault> {
    let mut parts = Vec::new();
    let ty = o.get("type").ok_or_else(|| Fault {
        pointer: at.to_string(),
        message: "missing property `type` (the key's type)".into(),
    })?;
    let typeof_ = matches!(ty, Json::Object(_));
    let mut key = format!(
        "{} {}",
        if typeof_ { "typeof" } else { "type" },
        set_type(ty, &format!("{at}.type"))?
    );
    match o.get("map") {
        Some(m) => key.push_str(&format!(" : {}", set_type(m, &format!("{at}.map"))?)),
        None if what == "map" => return fault(at, "missing property `map` (the data type)"),
        None => {}
    }
    parts.push(key);
    let flags = str_list(o, "flags", at)?;
    if !flags.is_empty() {
        parts.push(format!("flags {}", flags.join(",")));
    }
    if let Some(t) = opt_u64(o, "timeout", at)? {
        parts.push(format!("timeout {t}s"));
    }
    if let Some(t) = opt_u64(o, "gc-interval", at)? {
        parts.push(format!("gc-interval {t}s"));
    }
    if let Some(n) = opt_u64(o, "size", at)? {
        parts.push(format!("size {n}"));
    }
    if let Some(p) = opt_str(o, "policy", at)? {
        parts.push(format!("policy {p}"));
    }
    if flag(o, "auto-merge", at)? {
        parts.push("auto-merge".into());
    }
    if let Some(Json::Array(stmts)) = o.get("stmt") {
        for (i, s) in stmts.iter().enumerate() {
            parts.push(statement(s, &format!("{at}.stmt[{i}]"))?);
        }
    }
    parts.extend(comment(o, at)?);
    if let Some(elem) = o.get("elem") {
        let items: Vec<&Json> = match elem {
            Json::Array(a) => a.iter().collect(),
            one => vec![one],
        };
        if !items.is_empty() {
            parts.push(format!(
                "elements = {{ {} }}",
                elements(&items, &format!("{at}.elem"))?
            ));
        }
    }
    Ok(parts)
}

/// The configuration of a named stateful object (the inside of its block).
fn stateful_spec(what: &str, o: &Obj, at: &str) -> Result<Vec<String>, Fault> {
    Ok(match what {
        "counter" => match (opt_u64(o, "packets", at)?, opt_u64(o, "bytes", at)?) {
            (None, None) => Vec::new(),
            (p, b) => vec![format!(
                "packets {} bytes {}",
                p.unwrap_or(0),
                b.unwrap_or(0)
            )],
        },
        "quota" => {
            let over = if flag(o, "inv", at)? { "over " } else { "" };
            let mut s = format!("{over}{} bytes", req_u64(o, "bytes", at)?);
            if let Some(u) = opt_u64(o, "used", at)?.filter(|u| *u != 0) {
                s.push_str(&format!(" used {u} bytes"));
            }
            vec![s]
        }
        // As the statement (`rate_unit`, `burst_unit`, as nft writes them), or with the
        // man page's `unit` for both.
        "limit" => {
            let text = super::stmt::limit(o, at)?;
            vec![text.trim_start_matches("limit ").to_string()]
        }
        "ct helper" => {
            let mut v = vec![format!(
                "type {} protocol {}",
                quoted(req_str(o, "type", at)?, &format!("{at}.type"))?,
                req_str(o, "protocol", at)?
            )];
            if let Some(l3) = opt_str(o, "l3proto", at)? {
                v.push(format!("l3proto {l3}"));
            }
            v
        }
        "ct timeout" => {
            let mut v = vec![format!("protocol {}", req_str(o, "protocol", at)?)];
            if let Some(l3) = opt_str(o, "l3proto", at)? {
                v.push(format!("l3proto {l3}"));
            }
            match o.get("policy") {
                Some(Json::Object(p)) => {
                    let pairs = p
                        .iter()
                        .map(|(k, n)| match n.as_u64() {
                            Some(n) => Ok(format!("{k} : {n}")),
                            None => fault(
                                &format!("{at}.policy.{k}"),
                                format!("expected a timeout in seconds, found {}", kind(n)),
                            ),
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    v.push(format!("policy = {{ {} }}", pairs.join(", ")));
                }
                Some(other) => {
                    return fault(
                        &format!("{at}.policy"),
                        format!(
                            "expected an object of state: seconds, found {}",
                            kind(other)
                        ),
                    );
                }
                None => {
                    if let (Some(s), Some(n)) = (opt_str(o, "state", at)?, opt_u64(o, "value", at)?)
                    {
                        v.push(format!("policy = {{ {s} : {n} }}"));
                    }
                }
            }
            v
        }
        _ => {
            // ct expectation
            let mut v = vec![format!("protocol {}", req_str(o, "protocol", at)?)];
            if let Some(p) = opt_u64(o, "dport", at)? {
                v.push(format!("dport {p}"));
            }
            if let Some(t) = opt_u64(o, "timeout", at)? {
                v.push(format!("timeout {t}ms"));
            }
            if let Some(s) = opt_u64(o, "size", at)? {
                v.push(format!("size {s}"));
            }
            if let Some(l3) = opt_str(o, "l3proto", at)? {
                v.push(format!("l3proto {l3}"));
            }
            v
        }
    })
}

/// `add|insert rule F T C [position H | index N] STMTS [comment C]`, `replace rule ... handle
/// H STMTS`, `delete|destroy rule ... handle H`.
fn rule(verb: &str, o: &Obj, at: &str) -> Result<Line, Fault> {
    let mut text = format!(
        "{verb} rule {} {}",
        in_table(o, at)?,
        name(req_str(o, "chain", at)?, &format!("{at}.chain"))?
    );
    let handle = opt_u64(o, "handle", at)?;
    match verb {
        "delete" | "destroy" | "replace" => match handle {
            Some(h) => text.push_str(&format!(" handle {h}")),
            None => return fault(at, format!("`{verb} rule` needs the rule's `handle`")),
        },
        _ => {
            if let Some(h) = handle {
                text.push_str(&format!(" position {h}"));
            } else if let Some(i) = opt_u64(o, "index", at)? {
                text.push_str(&format!(" index {i}"));
            }
        }
    }
    let mut stmt_cols = Vec::new();
    if matches!(verb, "delete" | "destroy") {
        return Ok(Line {
            text,
            pointer: at.to_string(),
            stmt_cols,
        });
    }
    let stmts = match o.get("expr") {
        Some(Json::Array(a)) if !a.is_empty() => a,
        Some(Json::Array(_)) | None => {
            return fault(at, "missing property `expr` (the rule's statements)");
        }
        Some(other) => {
            return fault(
                &format!("{at}.expr"),
                format!("expected an array of statements, found {}", kind(other)),
            );
        }
    };
    for (i, s) in stmts.iter().enumerate() {
        text.push(' ');
        stmt_cols.push(text.chars().count() as u32 + 1);
        text.push_str(&statement(s, &format!("{at}.expr[{i}]"))?);
    }
    if let Some(c) = comment(o, at)? {
        text.push(' ');
        text.push_str(&c);
    }
    Ok(Line {
        text,
        pointer: at.to_string(),
        stmt_cols,
    })
}
