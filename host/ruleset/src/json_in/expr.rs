//! JSON expressions (`man libnftables-json`, EXPRESSIONS) as nft text: immediates,
//! `payload`, `exthdr`, `tcp option`, `meta`, `ct`, sets, maps, ranges, prefixes,
//! concatenations, bitwise operations, verdicts, and the small helpers for properties.

use serde_json::{Map, Value as Json};

use super::{Fault, fault};

/// A JSON object's properties.
pub(super) type Obj = Map<String, Json>;

/// `v` as an object, or a fault naming what was expected.
pub(super) fn object<'a>(v: &'a Json, at: &str, what: &str) -> Result<&'a Obj, Fault> {
    match v {
        Json::Object(o) => Ok(o),
        other => fault(
            at,
            format!("expected {what} (an object), found {}", kind(other)),
        ),
    }
}

/// What a JSON value is, for messages.
pub(super) fn kind(v: &Json) -> String {
    match v {
        Json::Null => "null".into(),
        Json::Bool(b) => format!("`{b}`"),
        Json::Number(n) => format!("the number {n}"),
        Json::String(s) => format!("the string \"{s}\""),
        Json::Array(_) => "an array".into(),
        Json::Object(o) => match o.keys().next() {
            Some(k) if o.len() == 1 => format!("an object `{k}`"),
            _ => "an object".into(),
        },
    }
}

/// The one property of a `{"KEY": VALUE}` object.
pub(super) fn single<'a>(o: &'a Obj, at: &str, what: &str) -> Result<(&'a str, &'a Json), Fault> {
    let mut it = o.iter();
    match (it.next(), it.next()) {
        (Some((k, v)), None) => Ok((k.as_str(), v)),
        _ => fault(
            at,
            format!(
                "expected {what}: an object with one property, found {} properties",
                o.len()
            ),
        ),
    }
}

/// A required string property.
pub(super) fn req_str<'a>(o: &'a Obj, key: &str, at: &str) -> Result<&'a str, Fault> {
    match o.get(key) {
        Some(Json::String(s)) => Ok(s),
        Some(other) => fault(
            &format!("{at}.{key}"),
            format!("expected a string, found {}", kind(other)),
        ),
        None => fault(at, format!("missing property `{key}` (a string)")),
    }
}

/// An optional string property.
pub(super) fn opt_str<'a>(o: &'a Obj, key: &str, at: &str) -> Result<Option<&'a str>, Fault> {
    match o.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Ok(Some(s)),
        Some(other) => fault(
            &format!("{at}.{key}"),
            format!("expected a string, found {}", kind(other)),
        ),
    }
}

/// An optional non-negative integer property.
pub(super) fn opt_u64(o: &Obj, key: &str, at: &str) -> Result<Option<u64>, Fault> {
    match o.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64()),
        Some(other) => fault(
            &format!("{at}.{key}"),
            format!("expected a non-negative integer, found {}", kind(other)),
        ),
    }
}

/// A required non-negative integer property.
pub(super) fn req_u64(o: &Obj, key: &str, at: &str) -> Result<u64, Fault> {
    match opt_u64(o, key, at)? {
        Some(n) => Ok(n),
        None => fault(at, format!("missing property `{key}` (a number)")),
    }
}

/// An optional boolean property (absent: false).
pub(super) fn flag(o: &Obj, key: &str, at: &str) -> Result<bool, Fault> {
    match o.get(key) {
        None | Some(Json::Null) => Ok(false),
        Some(Json::Bool(b)) => Ok(*b),
        Some(other) => fault(
            &format!("{at}.{key}"),
            format!("expected `true` or `false`, found {}", kind(other)),
        ),
    }
}

/// A string property that may be one string or an array of strings (`"flags"`).
pub(super) fn str_list(o: &Obj, key: &str, at: &str) -> Result<Vec<String>, Fault> {
    let here = format!("{at}.{key}");
    match o.get(key) {
        None | Some(Json::Null) => Ok(Vec::new()),
        Some(Json::String(s)) => Ok(vec![s.clone()]),
        Some(Json::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Json::String(s) => Ok(s.clone()),
                other => fault(
                    &format!("{here}[{i}]"),
                    format!("expected a string, found {}", kind(other)),
                ),
            })
            .collect(),
        Some(other) => fault(
            &here,
            format!(
                "expected a string or an array of strings, found {}",
                kind(other)
            ),
        ),
    }
}

/// Characters nft's scanner keeps in one unquoted word.
fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '/' | '-')
}

/// A string value as nft text: a word as it is (`cs1`, `10.0.0.0/8`, `fe80::1`, `@set`,
/// `*`), anything else quoted (`"eth*"`, `"2019-07-01 00:00:00"`).
///
/// # Errors
/// A string holding `"` or a line break (nft's strings cannot).
pub(super) fn string(s: &str, at: &str) -> Result<String, Fault> {
    let plain = |t: &str| !t.is_empty() && t.chars().all(word_char);
    if s == "*" || plain(s) && !s.starts_with(['-', '.']) && (!s.contains(':') || colon_word(s)) {
        return Ok(s.to_string());
    }
    if let Some(rest) = s.strip_prefix('@').or_else(|| s.strip_prefix('$'))
        && plain(rest)
    {
        return Ok(s.to_string());
    }
    quoted(s, at)
}

/// Whether a word with `:` is one nft's scanner reads whole unquoted: an IPv6 address (with
/// a prefix length), a MAC address or hex bytes (`00:0f:54:0c:11:04`); others (`17:00`,
/// `Windows:XP`) are quoted.
fn colon_word(s: &str) -> bool {
    let addr = s.split_once('/').map_or(s, |(a, _)| a);
    addr.parse::<std::net::Ipv6Addr>().is_ok()
        || s.split(':')
            .all(|p| !p.is_empty() && p.len() <= 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
            && s.split(':').count() >= 3
}

/// A string always quoted (`"eth0"`, `"a comment"`).
///
/// # Errors
/// As [`string`].
pub(super) fn quoted(s: &str, at: &str) -> Result<String, Fault> {
    if s.contains(['"', '\n', '\r']) {
        return fault(
            at,
            format!(
                "the string \"{}\" holds a `\"` or a line break, which nft's strings cannot",
                s.escape_default()
            ),
        );
    }
    Ok(format!("\"{s}\""))
}

/// A name (table, chain, set, object): a word, else quoted; also quoted when it is one of
/// nft's keywords (JSON names are strings: `nft -j` takes `{"table": {"name": "fwd"}}`,
/// which its text syntax cannot name).
///
/// # Errors
/// As [`string`]; an empty name.
pub(super) fn name(s: &str, at: &str) -> Result<String, Fault> {
    if s.is_empty() {
        return fault(at, "expected a name, found an empty string");
    }
    if crate::keywords::is_keyword(s) {
        return quoted(s, at);
    }
    string(s, at)
}

/// A verdict object (`{"accept": null}`, `{"jump": {"target": "c"}}`) as text, if `key` is
/// one.
pub(super) fn verdict(key: &str, v: &Json, at: &str) -> Result<Option<String>, Fault> {
    Ok(Some(match key {
        "accept" | "drop" | "continue" | "return" => key.to_string(),
        "jump" | "goto" => {
            let here = format!("{at}.{key}");
            let o = object(v, &here, "`{\"target\": CHAIN}`")?;
            format!("{key} {}", name(req_str(o, "target", &here)?, &here)?)
        }
        _ => return Ok(None),
    }))
}

/// An expression as nft text.
///
/// # Errors
/// A value that is no expression of the schema, or one missing a property it needs.
pub(super) fn expr(v: &Json, at: &str) -> Result<String, Fault> {
    match v {
        Json::Null => fault(at, "expected an expression, found null"),
        Json::Bool(true) => Ok("exists".into()),
        Json::Bool(false) => Ok("missing".into()),
        Json::Number(n) => match n.as_u64() {
            Some(n) => Ok(n.to_string()),
            None => fault(at, format!("expected a non-negative integer, found {n}")),
        },
        Json::String(s) => string(s, at),
        // A list: flags OR'd together (`ct state established,related`).
        Json::Array(items) => {
            if items.is_empty() {
                return fault(at, "expected a list of values, found an empty array");
            }
            let parts = items
                .iter()
                .enumerate()
                .map(|(i, x)| expr(x, &format!("{at}[{i}]")))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(parts.join(","))
        }
        Json::Object(o) => {
            let (key, body) = single(o, at, "an expression")?;
            object_expr(key, body, at)
        }
    }
}

/// How tightly nft's grammar binds a bitwise operator (`<<` `>>` before `&` before `^`
/// before `|`).
fn binds(op: &str) -> u8 {
    match op {
        "<<" | ">>" => 4,
        "&" => 3,
        "^" => 2,
        _ => 1,
    }
}

/// An operand of the bitwise operation `op`: parenthesised when it is a bitwise operation
/// that binds less tightly (or as tightly, on the right), or a list of flags (`(syn |
/// ack)`).
fn operand(v: &Json, op: &str, right: bool, at: &str) -> Result<String, Fault> {
    if let Json::Array(items) = v
        && items.len() > 1
    {
        let parts = items
            .iter()
            .enumerate()
            .map(|(i, x)| expr(x, &format!("{at}[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(format!("({})", parts.join(" | ")));
    }
    let s = expr(v, at)?;
    let inner = match v {
        Json::Object(o) if o.len() == 1 => o
            .keys()
            .find(|k| matches!(k.as_str(), "&" | "|" | "^" | "<<" | ">>"))
            .map(|k| binds(k)),
        _ => None,
    };
    let paren = inner.is_some_and(|b| b < binds(op) || right && b == binds(op));
    Ok(if paren { format!("({s})") } else { s })
}

fn object_expr(key: &str, body: &Json, at: &str) -> Result<String, Fault> {
    let here = format!("{at}.{key}");
    if let Some(v) = verdict(key, body, at)? {
        return Ok(v);
    }
    match key {
        "payload" => payload(object(body, &here, "a payload")?, &here),
        "exthdr" => {
            let o = object(body, &here, "an extension header")?;
            let n = req_str(o, "name", &here)?;
            match opt_str(o, "field", &here)? {
                Some(f) if n == "rt0" && o.contains_key("offset") => {
                    Ok(format!("rt0 {f}[{}]", req_u64(o, "offset", &here)?))
                }
                Some(f) => Ok(format!("{n} {f}")),
                None => Ok(format!("exthdr {n}")),
            }
        }
        "tcp option" | "ip option" | "sctp chunk" => {
            let o = object(body, &here, "an option")?;
            if o.contains_key("base") {
                let base = req_u64(o, "base", &here)?;
                let off = req_u64(o, "offset", &here)?;
                let len = req_u64(o, "len", &here)?;
                return Ok(if len == 0 && off == 0 {
                    format!("{key} {base}")
                } else {
                    format!("{key} @{base},{off},{len}")
                });
            }
            let n = match o.get("name") {
                Some(Json::Number(n)) => n.to_string(),
                _ => req_str(o, "name", &here)?.to_string(),
            };
            Ok(match opt_str(o, "field", &here)? {
                Some(f) => format!("{key} {n} {f}"),
                None => format!("{key} {n}"),
            })
        }
        "dccp option" => {
            let o = object(body, &here, "a DCCP option")?;
            Ok(format!("dccp option {}", req_u64(o, "type", &here)?))
        }
        "meta" => {
            let o = object(body, &here, "a meta expression")?;
            Ok(format!("meta {}", req_str(o, "key", &here)?))
        }
        "rt" => {
            let o = object(body, &here, "a routing expression")?;
            let k = req_str(o, "key", &here)?;
            Ok(match opt_str(o, "family", &here)? {
                Some(f) => format!("rt {f} {k}"),
                None => format!("rt {k}"),
            })
        }
        "ct" => {
            let o = object(body, &here, "a conntrack expression")?;
            let mut s = "ct".to_string();
            if let Some(d) = opt_str(o, "dir", &here)? {
                s.push_str(&format!(" {d}"));
            }
            if let Some(f) = opt_str(o, "family", &here)? {
                s.push_str(&format!(" {f}"));
            }
            s.push_str(&format!(" {}", req_str(o, "key", &here)?));
            Ok(s)
        }
        "socket" => {
            let o = object(body, &here, "a socket expression")?;
            let k = req_str(o, "key", &here)?;
            Ok(match opt_u64(o, "level", &here)? {
                Some(l) => format!("socket {k} level {l}"),
                None => format!("socket {k}"),
            })
        }
        "osf" => {
            let o = object(body, &here, "an osf expression")?;
            let k = req_str(o, "key", &here)?;
            Ok(match opt_str(o, "ttl", &here)? {
                Some(t) => format!("osf ttl {t} {k}"),
                None => format!("osf {k}"),
            })
        }
        "ipsec" => {
            let o = object(body, &here, "an ipsec expression")?;
            let mut s = format!("ipsec {}", req_str(o, "dir", &here)?);
            if let Some(n) = opt_u64(o, "spnum", &here)?.filter(|n| *n != 0) {
                s.push_str(&format!(" spnum {n}"));
            }
            if let Some(f) = opt_str(o, "family", &here)? {
                s.push_str(&format!(" {f}"));
            }
            s.push_str(&format!(" {}", req_str(o, "key", &here)?));
            Ok(s)
        }
        "fib" => {
            let o = object(body, &here, "a fib expression")?;
            let flags = str_list(o, "flags", &here)?;
            // `check` (newer nft's name for "the route exists") is `oif ... exists`.
            let result = match req_str(o, "result", &here)? {
                "check" => "oif",
                r => r,
            };
            if flags.is_empty() {
                return fault(&here, "missing property `flags` (`saddr`, `daddr`, ...)");
            }
            Ok(format!("fib {} {result}", flags.join(" . ")))
        }
        "numgen" => {
            let o = object(body, &here, "a numgen expression")?;
            let mut s = format!(
                "numgen {} mod {}",
                req_str(o, "mode", &here)?,
                req_u64(o, "mod", &here)?
            );
            if let Some(off) = opt_u64(o, "offset", &here)? {
                s.push_str(&format!(" offset {off}"));
            }
            Ok(s)
        }
        "jhash" | "symhash" => {
            let o = object(body, &here, "a hash expression")?;
            let mut s = key.to_string();
            if key == "jhash" {
                let e = o.get("expr").ok_or_else(|| Fault {
                    pointer: here.clone(),
                    message: "missing property `expr` (what to hash)".into(),
                })?;
                s.push_str(&format!(" {}", expr(e, &format!("{here}.expr"))?));
            }
            s.push_str(&format!(" mod {}", req_u64(o, "mod", &here)?));
            if let Some(seed) = opt_u64(o, "seed", &here)? {
                s.push_str(&format!(" seed 0x{seed:x}"));
            }
            if let Some(off) = opt_u64(o, "offset", &here)? {
                s.push_str(&format!(" offset {off}"));
            }
            Ok(s)
        }
        "prefix" => {
            let o = object(body, &here, "a prefix")?;
            let addr = o.get("addr").ok_or_else(|| Fault {
                pointer: here.clone(),
                message: "missing property `addr`".into(),
            })?;
            Ok(format!(
                "{}/{}",
                expr(addr, &format!("{here}.addr"))?,
                req_u64(o, "len", &here)?
            ))
        }
        "range" => match body {
            Json::Array(a) if a.len() == 2 => Ok(format!(
                "{}-{}",
                expr(&a[0], &format!("{here}[0]"))?,
                expr(&a[1], &format!("{here}[1]"))?
            )),
            other => fault(
                &here,
                format!("expected `[LOW, HIGH]`, found {}", kind(other)),
            ),
        },
        "concat" => match body {
            Json::Array(a) if !a.is_empty() => Ok(a
                .iter()
                .enumerate()
                .map(|(i, x)| expr(x, &format!("{here}[{i}]")))
                .collect::<Result<Vec<_>, _>>()?
                .join(" . ")),
            other => fault(
                &here,
                format!("expected an array of expressions, found {}", kind(other)),
            ),
        },
        "set" => set(body, &here),
        "map" => {
            let o = object(body, &here, "a map expression")?;
            let k = o.get("key").ok_or_else(|| Fault {
                pointer: here.clone(),
                message: "missing property `key`".into(),
            })?;
            let d = o.get("data").ok_or_else(|| Fault {
                pointer: here.clone(),
                message: "missing property `data` (a set of pairs or `@MAP`)".into(),
            })?;
            Ok(format!(
                "{} map {}",
                expr(k, &format!("{here}.key"))?,
                expr(d, &format!("{here}.data"))?
            ))
        }
        "elem" => elem(object(body, &here, "a set element")?, &here),
        "&" | "|" | "^" | "<<" | ">>" => match body {
            Json::Array(a) if a.len() >= 2 => {
                let mut s = operand(&a[0], key, false, &format!("{here}[0]"))?;
                for (i, x) in a.iter().enumerate().skip(1) {
                    s.push_str(&format!(
                        " {key} {}",
                        operand(x, key, true, &format!("{here}[{i}]"))?
                    ));
                }
                Ok(s)
            }
            other => fault(
                &here,
                format!("expected `[LEFT, RIGHT]`, found {}", kind(other)),
            ),
        },
        other => fault(at, format!("unknown expression `{other}`")),
    }
}

/// `{"protocol": P, "field": F}` or `{"base": B, "offset": N, "len": N}`.
fn payload(o: &Obj, at: &str) -> Result<String, Fault> {
    if o.contains_key("base") {
        let base = req_str(o, "base", at)?;
        return Ok(format!(
            "@{base},{},{}",
            req_u64(o, "offset", at)?,
            req_u64(o, "len", at)?
        ));
    }
    Ok(format!(
        "{} {}",
        req_str(o, "protocol", at)?,
        req_str(o, "field", at)?
    ))
}

/// An anonymous set or map: `{ a, b }`, `{ k : v, ... }` (an element `[KEY, DATA]`).
pub(super) fn set(body: &Json, at: &str) -> Result<String, Fault> {
    let items: Vec<&Json> = match body {
        Json::Array(a) => a.iter().collect(),
        one => vec![one],
    };
    Ok(format!("{{ {} }}", elements(&items, at)?))
}

/// Set elements separated by commas (`a, b`, `k : v`).
pub(super) fn elements(items: &[&Json], at: &str) -> Result<String, Fault> {
    let mut parts = Vec::with_capacity(items.len());
    for (i, x) in items.iter().enumerate() {
        let here = format!("{at}[{i}]");
        parts.push(match x {
            Json::Array(pair) if pair.len() == 2 => format!(
                "{} : {}",
                expr(&pair[0], &format!("{here}[0]"))?,
                expr(&pair[1], &format!("{here}[1]"))?
            ),
            Json::Array(_) => return fault(&here, "expected a `[KEY, DATA]` pair"),
            other => expr(other, &here)?,
        });
    }
    Ok(parts.join(", "))
}

/// `{"val": ..., "timeout": S, "expires": S, "comment": ..., "counter": ...}` as an element
/// with its options (timeouts in seconds).
fn elem(o: &Obj, at: &str) -> Result<String, Fault> {
    let val = o.get("val").ok_or_else(|| Fault {
        pointer: at.to_string(),
        message: "missing property `val`".into(),
    })?;
    let mut s = expr(val, &format!("{at}.val"))?;
    if let Some(t) = opt_u64(o, "timeout", at)? {
        s.push_str(&format!(" timeout {t}s"));
    }
    if let Some(t) = opt_u64(o, "expires", at)? {
        s.push_str(&format!(" expires {t}s"));
    }
    if let Some(c) = o.get("counter") {
        s.push_str(&format!(
            " {}",
            super::stmt::statement_of("counter", c, at)?
        ));
    }
    if let Some(c) = opt_str(o, "comment", at)? {
        s.push_str(&format!(
            " comment {}",
            quoted(c, &format!("{at}.comment"))?
        ));
    }
    Ok(s)
}

/// The left side of a match against `true`/`false` (`exists`/`missing`): a raw TCP option
/// `{"base": KIND, ...}` is written by its kind alone (`tcp option 255 missing`).
pub(super) fn exists_subject(v: &Json, at: &str) -> Result<String, Fault> {
    if let Json::Object(o) = v
        && let Some(Json::Object(opt)) = o.get("tcp option")
        && let Some(base) = opt.get("base").and_then(Json::as_u64)
    {
        return Ok(format!("tcp option {base}"));
    }
    expr(v, at)
}
