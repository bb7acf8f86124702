//! JSON statements (`man libnftables-json`, STATEMENTS) as nft text: `match`, verdicts,
//! `counter`, `mangle`, `quota`, `limit`, `log`, `reject`, NAT, `dup`, `fwd`, dynamic sets
//! and maps, `vmap`, `meter`, conntrack objects, and the statements wasp refuses by meaning
//! (`queue`, `tproxy`, `synproxy`, written out so that the parser says why).

use serde_json::Value as Json;

use super::expr::{
    Obj, exists_subject, expr, flag, kind, name, object, opt_str, opt_u64, quoted, req_str,
    req_u64, single, str_list, string, verdict,
};
use super::{Fault, fault};

/// One statement (`{"KEY": BODY}`) as nft text.
///
/// # Errors
/// A value that is no statement of the schema, or one missing a property it needs.
pub(super) fn statement(v: &Json, at: &str) -> Result<String, Fault> {
    let o = object(v, at, "a statement")?;
    let (key, body) = single(o, at, "a statement")?;
    statement_of(key, body, at)
}

/// A required expression property.
fn req_expr(o: &Obj, key: &str, at: &str) -> Result<String, Fault> {
    match o.get(key) {
        Some(v) => expr(v, &format!("{at}.{key}")),
        None => fault(at, format!("missing property `{key}`")),
    }
}

/// An optional expression property.
fn opt_expr(o: &Obj, key: &str, at: &str) -> Result<Option<String>, Fault> {
    match o.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(v) => expr(v, &format!("{at}.{key}")).map(Some),
    }
}

/// A statement's body that may be null (`{"masquerade": null}`) or an object.
fn maybe_object<'a>(body: &'a Json, at: &str, what: &str) -> Result<Option<&'a Obj>, Fault> {
    match body {
        Json::Null => Ok(None),
        other => object(other, at, what).map(Some),
    }
}

/// The statement `key` with its body, as nft text.
///
/// # Errors
/// As [`statement`].
pub(super) fn statement_of(key: &str, body: &Json, at: &str) -> Result<String, Fault> {
    if let Some(v) = verdict(key, body, at)? {
        return Ok(v);
    }
    let here = format!("{at}.{key}");
    match key {
        "match" => {
            let o = object(body, &here, "a match")?;
            // `true`/`false` on the right: `exists`/`missing`, written without an operator.
            let boolean = matches!(o.get("right"), Some(Json::Bool(_)));
            let left = match o.get("left") {
                Some(l) if boolean => exists_subject(l, &format!("{here}.left"))?,
                _ => req_expr(o, "left", &here)?,
            };
            let right = req_expr(o, "right", &here)?;
            let op = req_str(o, "op", &here)?;
            let op = match op {
                "==" if boolean => "",
                "in" => "",
                "==" | "!=" | "<" | ">" | "<=" | ">=" | "&" | "|" | "^" | "<<" | ">>" | "!" => op,
                other => {
                    return fault(
                        &format!("{here}.op"),
                        format!(
                            "unknown operator `{other}` (`==`, `!=`, `<`, `>`, `<=`, `>=`, `in`)"
                        ),
                    );
                }
            };
            Ok(if op.is_empty() {
                format!("{left} {right}")
            } else {
                format!("{left} {op} {right}")
            })
        }
        "counter" => match body {
            Json::Null => Ok("counter".into()),
            Json::String(s) => Ok(format!("counter name {}", name(s, &here)?)),
            Json::Object(o) if o.contains_key("map") => {
                Ok(format!("counter name {}", map_of(o, &here)?))
            }
            Json::Object(o) => {
                let p = opt_u64(o, "packets", &here)?;
                let b = opt_u64(o, "bytes", &here)?;
                Ok(match (p, b) {
                    (None, None) => "counter".into(),
                    (p, b) => format!(
                        "counter packets {} bytes {}",
                        p.unwrap_or(0),
                        b.unwrap_or(0)
                    ),
                })
            }
            other => fault(
                &here,
                format!(
                    "expected null, a counter's name or an object, found {}",
                    kind(other)
                ),
            ),
        },
        "mangle" => {
            let o = object(body, &here, "a mangle statement")?;
            Ok(format!(
                "{} set {}",
                req_expr(o, "key", &here)?,
                req_expr(o, "value", &here)?
            ))
        }
        "quota" => match body {
            Json::String(s) => Ok(format!("quota name {}", name(s, &here)?)),
            Json::Object(o) if o.contains_key("map") => {
                Ok(format!("quota name {}", map_of(o, &here)?))
            }
            Json::Object(o) => {
                let mut s = "quota".to_string();
                if flag(o, "inv", &here)? {
                    s.push_str(" over");
                }
                s.push_str(&format!(
                    " {} {}",
                    req_u64(o, "val", &here)?,
                    opt_str(o, "val_unit", &here)?.unwrap_or("bytes")
                ));
                if let Some(u) = opt_u64(o, "used", &here)? {
                    s.push_str(&format!(
                        " used {u} {}",
                        opt_str(o, "used_unit", &here)?.unwrap_or("bytes")
                    ));
                }
                Ok(s)
            }
            other => fault(
                &here,
                format!(
                    "expected a quota's name or an object, found {}",
                    kind(other)
                ),
            ),
        },
        "limit" => match body {
            Json::String(s) => Ok(format!("limit name {}", name(s, &here)?)),
            Json::Object(o) if o.contains_key("map") => {
                Ok(format!("limit name {}", map_of(o, &here)?))
            }
            Json::Object(o) => limit(o, &here),
            other => fault(
                &here,
                format!(
                    "expected a limit's name or an object, found {}",
                    kind(other)
                ),
            ),
        },
        "log" => match maybe_object(body, &here, "a log statement")? {
            None => Ok("log".into()),
            Some(o) => log(o, &here),
        },
        "reject" => match maybe_object(body, &here, "a reject statement")? {
            None => Ok("reject".into()),
            Some(o) => {
                let ty = opt_str(o, "type", &here)?;
                let code = opt_expr(o, "expr", &here)?;
                Ok(match (ty, code) {
                    (None, None) => "reject".into(),
                    (Some("tcp reset"), _) => "reject with tcp reset".into(),
                    (Some(t), Some(c)) => format!("reject with {t} {c}"),
                    (Some(t), None) => format!("reject with {t}"),
                    (None, Some(c)) => format!("reject with icmpx {c}"),
                })
            }
        },
        "snat" | "dnat" | "masquerade" | "redirect" => {
            nat(key, maybe_object(body, &here, "a NAT statement")?, &here)
        }
        "notrack" => Ok("notrack".into()),
        "dup" => {
            let o = object(body, &here, "a dup statement")?;
            let addr = opt_expr(o, "addr", &here)?;
            let dev = dev_expr(o, &here)?;
            Ok(match (addr, dev) {
                (Some(a), Some(d)) => format!("dup to {a} device {d}"),
                (Some(a), None) => format!("dup to {a}"),
                (None, Some(d)) => format!("dup to {d}"),
                (None, None) => return fault(&here, "missing property `addr` or `dev`"),
            })
        }
        "fwd" => {
            let o = object(body, &here, "a fwd statement")?;
            let dev = dev_expr(o, &here)?;
            match (
                opt_str(o, "family", &here)?,
                opt_expr(o, "addr", &here)?,
                dev,
            ) {
                (Some(f), Some(a), Some(d)) => Ok(format!("fwd {f} to {a} device {d}")),
                (None, None, Some(d)) => Ok(format!("fwd to {d}")),
                (_, _, None) => fault(&here, "missing property `dev`"),
                _ => fault(&here, "`family` and `addr` go together"),
            }
        }
        "set" | "map" => {
            let o = object(body, &here, "a set statement")?;
            let op = req_str(o, "op", &here)?;
            let target = req_str(o, key, &here)?;
            let target = string(target, &format!("{here}.{key}"))?;
            let mut elem = req_expr(o, "elem", &here)?;
            if let Some(Json::Array(stmts)) = o.get("stmt") {
                for (i, s) in stmts.iter().enumerate() {
                    elem.push(' ');
                    elem.push_str(&statement(s, &format!("{here}.stmt[{i}]"))?);
                }
            }
            if key == "map" {
                elem.push_str(&format!(" : {}", req_expr(o, "data", &here)?));
            }
            Ok(format!("{op} {target} {{ {elem} }}"))
        }
        "vmap" => {
            let o = object(body, &here, "a verdict map")?;
            Ok(format!(
                "{} vmap {}",
                req_expr(o, "key", &here)?,
                req_expr(o, "data", &here)?
            ))
        }
        "meter" => {
            let o = object(body, &here, "a meter")?;
            let n = name(req_str(o, "name", &here)?, &here)?;
            let k = req_expr(o, "key", &here)?;
            let s = match o.get("stmt") {
                Some(s) => statement(s, &format!("{here}.stmt"))?,
                None => return fault(&here, "missing property `stmt`"),
            };
            Ok(match opt_u64(o, "size", &here)? {
                Some(size) => format!("meter {n} size {size} {{ {k} {s} }}"),
                None => format!("meter {n} {{ {k} {s} }}"),
            })
        }
        "ct helper" | "ct timeout" | "ct expectation" => {
            let v = match body {
                Json::String(s) => quoted(s, &here)?,
                other => expr(other, &here)?,
            };
            Ok(format!("{key} set {v}"))
        }
        "ct count" => {
            let o = object(body, &here, "a ct count statement")?;
            let over = if flag(o, "inv", &here)? { "over " } else { "" };
            Ok(format!("ct count {over}{}", req_u64(o, "val", &here)?))
        }
        "last" => match maybe_object(body, &here, "a last statement")? {
            Some(o) if o.contains_key("used") => {
                Ok(format!("last used {}ms", req_u64(o, "used", &here)?))
            }
            _ => Ok("last".into()),
        },
        "reset" => {
            let o = object(body, &here, "a reset statement")?;
            let (k, b) = single(o, &here, "an option to reset")?;
            Ok(format!(
                "reset {}",
                expr(
                    &Json::Object(std::iter::once((k.to_string(), b.clone())).collect()),
                    &here
                )?
            ))
        }
        "queue" => {
            let mut s = "queue".to_string();
            if let Some(o) = maybe_object(body, &here, "a queue statement")? {
                let flags = str_list(o, "flags", &here)?;
                if !flags.is_empty() {
                    s.push_str(&format!(" flags {}", flags.join(",")));
                }
                if let Some(n) = opt_expr(o, "num", &here)? {
                    s.push_str(&format!(" to {n}"));
                }
            }
            Ok(s)
        }
        "tproxy" => {
            let o = object(body, &here, "a tproxy statement")?;
            let mut s = "tproxy".to_string();
            if let Some(f) = opt_str(o, "family", &here)? {
                s.push_str(&format!(" {f}"));
            }
            s.push_str(" to ");
            if let Some(a) = opt_expr(o, "addr", &here)? {
                s.push_str(&a);
            }
            if let Some(p) = opt_expr(o, "port", &here)? {
                s.push_str(&format!(":{p}"));
            }
            Ok(s)
        }
        "synproxy" => {
            let mut s = "synproxy".to_string();
            if let Some(o) = maybe_object(body, &here, "a synproxy statement")? {
                if o.contains_key("map") {
                    return Ok(format!("synproxy name {}", map_of(o, &here)?));
                }
                if let Some(m) = opt_u64(o, "mss", &here)? {
                    s.push_str(&format!(" mss {m}"));
                }
                if let Some(w) = opt_u64(o, "wscale", &here)? {
                    s.push_str(&format!(" wscale {w}"));
                }
                for f in str_list(o, "flags", &here)? {
                    s.push_str(&format!(" {f}"));
                }
            }
            Ok(s)
        }
        "xt" => fault(
            &here,
            "`xt` statements (from iptables-nft) cannot be restored, as nft cannot restore them",
        ),
        other => fault(at, format!("unknown statement `{other}`")),
    }
}

/// `dev`: an interface name, always quoted, or an expression (a map).
fn dev_expr(o: &Obj, at: &str) -> Result<Option<String>, Fault> {
    match o.get("dev") {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => quoted(s, &format!("{at}.dev")).map(Some),
        Some(v) => expr(v, &format!("{at}.dev")).map(Some),
    }
}

/// `limit rate [over] N[ UNIT]/PER [burst N UNIT]` (the unit from `rate_unit`, or `unit`).
pub(super) fn limit(o: &Obj, at: &str) -> Result<String, Fault> {
    let mut s = "limit rate ".to_string();
    if flag(o, "inv", at)? {
        s.push_str("over ");
    }
    let rate = req_u64(o, "rate", at)?;
    let unit = match opt_str(o, "rate_unit", at)? {
        Some(u) => u,
        None => opt_str(o, "unit", at)?.unwrap_or("packets"),
    };
    let per = opt_str(o, "per", at)?.unwrap_or("second");
    if unit == "packets" {
        s.push_str(&format!("{rate}/{per}"));
    } else {
        s.push_str(&format!("{rate} {unit}/{per}"));
    }
    if let Some(b) = opt_u64(o, "burst", at)?.filter(|b| *b != 0) {
        let bu = if unit == "packets" {
            "packets"
        } else {
            match opt_str(o, "burst_unit", at)? {
                Some(u) => u,
                None => opt_str(o, "unit", at)?.unwrap_or("bytes"),
            }
        };
        s.push_str(&format!(" burst {b} {bu}"));
    }
    Ok(s)
}

/// `log [prefix P] [group N] [snaplen N] [queue-threshold N] [level L] [flags ...]`.
fn log(o: &Obj, at: &str) -> Result<String, Fault> {
    let mut s = "log".to_string();
    if let Some(p) = opt_str(o, "prefix", at)? {
        s.push_str(&format!(" prefix {}", quoted(p, &format!("{at}.prefix"))?));
    }
    for k in ["group", "snaplen", "queue-threshold"] {
        if let Some(n) = opt_u64(o, k, at)? {
            s.push_str(&format!(" {k} {n}"));
        }
    }
    if let Some(l) = opt_str(o, "level", at)? {
        s.push_str(&format!(" level {l}"));
    }
    let flags = str_list(o, "flags", at)?;
    let tcp: Vec<&str> = flags
        .iter()
        .filter_map(|f| f.strip_prefix("tcp "))
        .collect();
    if !tcp.is_empty() {
        s.push_str(&format!(" flags tcp {}", tcp.join(",")));
    }
    for f in flags.iter().filter(|f| !f.starts_with("tcp ")) {
        s.push_str(&format!(" flags {f}"));
    }
    Ok(s)
}

/// `snat|dnat [FAMILY] [TYPE] to ADDR[:PORT] [FLAGS]`, `masquerade|redirect [to :PORT]
/// [FLAGS]`.
fn nat(key: &str, o: Option<&Obj>, at: &str) -> Result<String, Fault> {
    let Some(o) = o else {
        return Ok(key.to_string());
    };
    let mut s = key.to_string();
    if let Some(f) = opt_str(o, "family", at)? {
        s.push_str(&format!(" {f}"));
    }
    // nft writes the map's kind as one word: `prefix` (which is `netmap`) before
    // `interval`; a concatenation needs none.
    let types = str_list(o, "type_flags", at)?;
    if types.iter().any(|t| t == "prefix") {
        s.push_str(" prefix");
    } else if types.iter().any(|t| t == "interval") {
        s.push_str(" interval");
    }
    let addr = opt_expr(o, "addr", at)?;
    let port = opt_expr(o, "port", at)?;
    let v6 = opt_str(o, "family", at)? == Some("ip6")
        || addr
            .as_deref()
            .is_some_and(|a| a.contains(':') && !a.contains(' '));
    let v6_range = match o.get("addr") {
        Some(Json::Object(r)) if v6 => match r.get("range") {
            Some(Json::Array(b)) if b.len() == 2 => Some((
                expr(&b[0], &format!("{at}.addr.range[0]"))?,
                expr(&b[1], &format!("{at}.addr.range[1]"))?,
            )),
            _ => None,
        },
        _ => None,
    };
    match (addr, port) {
        (Some(_), Some(p)) if v6_range.is_some() => {
            let (lo, hi) = v6_range.unwrap_or_default();
            s.push_str(&format!(" to [{lo}]-[{hi}]:{p}"));
        }
        (Some(a), Some(p)) if v6 && !a.contains(' ') => s.push_str(&format!(" to [{a}]:{p}")),
        (Some(a), Some(p)) => s.push_str(&format!(" to {a}:{p}")),
        (Some(a), None) => s.push_str(&format!(" to {a}")),
        (None, Some(p)) => s.push_str(&format!(" to :{p}")),
        (None, None) => {}
    }
    // `netmap` is what `prefix` means: text has no word for it.
    let flags: Vec<String> = str_list(o, "flags", at)?
        .into_iter()
        .filter(|f| f != "netmap")
        .collect();
    if !flags.is_empty() {
        s.push_str(&format!(" {}", flags.join(",")));
    }
    Ok(s)
}

/// `{"map": {"key": ..., "data": ...}}` inside a statement that names its object by a map
/// (`counter name tcp dport map { ... }`): the map expression.
fn map_of(o: &Obj, at: &str) -> Result<String, Fault> {
    let m = o.get("map").cloned().unwrap_or(Json::Null);
    expr(
        &Json::Object(std::iter::once(("map".to_string(), m)).collect()),
        at,
    )
}
