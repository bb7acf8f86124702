//! The model printed as `nft list ruleset` (nft 1.0.6) prints it, byte for byte.
//!
//! What nft does that this follows (checked against `nft list ruleset` in a netns):
//! - tabs for indentation; named objects (counters, quotas, limits, in the order the kernel
//!   numbered them), sets, flowtables, then chains (nft's `table_print` order); a blank line
//!   between objects;
//! - set elements sorted by value (nft's `list_expr_sort`; `ifname` sorts by its
//!   little-endian value, a concatenation with a host-order field such as `ct mark` by the
//!   whole key as a little-endian number), ranges that are prefixes shown as prefixes,
//!   one-value ranges as the value;
//! - named set elements wrapped by type: 5 per line for integer-like types, 2 for IPv4
//!   addresses, 1 for the others (nft's `calculate_delim`); anonymous sets on one line;
//! - priorities named when within 10 of a standard one allowed for the family and hook;
//! - implicit dependencies are not in the model, so they are not printed.
//!
//! Plugins (a wasp extension nft has not) print first in their table, as declared
//! (`plugin NAME { path "FILE" }`, or `plugin NAME` for a bundled one), and their uses as
//! written (`NAME ARG... [fallback drop]`), so that the output reads back the same.

pub(crate) mod options;

use std::borrow::Cow;
use std::fmt::Write;

use crate::datatypes::{print_range_end, print_value, tcp_flags_text, time_text};
use crate::model::{
    BinOp, Chain, ChainType, DataType, ElemData, Elements, Expr, Family, Hook, Ip6ExtHdr, KeyPart,
    Limit, Match, NatStmt, PayloadBase, Policy, Quota, RejectKind, RelOp, Rhs, Rule, Ruleset,
    SetDecl, SetElem, SetRef, Stmt, Table, Value, Verdict,
};
use crate::parser::chain::{std_prio_ok, std_prios};

pub(crate) fn ruleset(r: &Ruleset, handles: bool) -> String {
    let mut out = String::new();
    for t in &r.tables {
        table(&mut out, t, handles);
    }
    out
}

fn handle_suffix(handles: bool, h: u64) -> String {
    if handles {
        format!(" # handle {h}")
    } else {
        String::new()
    }
}

fn table(out: &mut String, t: &Table, handles: bool) {
    let _ = writeln!(
        out,
        "table {} {} {{{}",
        t.family.name(),
        t.name,
        handle_suffix(handles, t.handle)
    );
    if let Some(c) = &t.comment {
        let _ = writeln!(out, "\tcomment \"{c}\"");
    }
    let mut first = true;
    for p in &t.plugins {
        if !first {
            out.push('\n');
        }
        first = false;
        match &p.path {
            Some(path) => {
                let _ = writeln!(out, "\tplugin {} {{\n\t\tpath \"{path}\"\n\t}}", p.name);
            }
            None => {
                let _ = writeln!(out, "\tplugin {}", p.name);
            }
        }
    }
    let o = options::PrintOptions {
        handles,
        ..Default::default()
    };
    options::objects(out, t, &o, &mut |out: &mut String| {
        if !first {
            out.push('\n');
        }
        first = false;
    });
    for s in &t.sets {
        if !first {
            out.push('\n');
        }
        first = false;
        set(out, s, handles);
    }
    for f in &t.flowtables {
        if !first {
            out.push('\n');
        }
        first = false;
        options::flowtable(
            out,
            f,
            &options::PrintOptions {
                handles,
                ..Default::default()
            },
        );
    }
    for c in &t.chains {
        if !first {
            out.push('\n');
        }
        first = false;
        chain(out, t.family, c, handles);
    }
    out.push_str("}\n");
}

fn set(out: &mut String, s: &SetDecl, handles: bool) {
    let kw = if s.is_map { "map" } else { "set" };
    let _ = writeln!(
        out,
        "\t{kw} {} {{{}",
        s.name,
        handle_suffix(handles, s.handle)
    );
    match &s.key_typeof {
        Some(exprs) => {
            let text: Vec<String> = exprs.iter().map(expr).collect();
            let _ = write!(out, "\t\ttypeof {}", text.join(" . "));
        }
        None => {
            let names: Vec<&str> = s.key.iter().map(|d| d.name()).collect();
            let _ = write!(out, "\t\ttype {}", names.join(" . "));
        }
    }
    match (&s.data_typeof, s.data_type_text()) {
        (Some(e), _) if s.key_typeof.is_some() => {
            let _ = write!(out, " : {}", expr(e));
        }
        (_, Some(d)) => {
            let _ = write!(out, " : {d}");
        }
        _ => {}
    }
    out.push('\n');
    if let Some(n) = s.size {
        let _ = writeln!(out, "\t\tsize {n}");
    }
    if let Some(flags) = set_flags_text(s) {
        let _ = writeln!(out, "\t\tflags {flags}");
    }
    if s.counter {
        out.push_str("\t\tcounter\n");
    }
    if s.flags.auto_merge {
        out.push_str("\t\tauto-merge\n");
    }
    if let Some(t) = s.timeout_ms {
        let _ = writeln!(out, "\t\ttimeout {}", time_text(t));
    }
    if let Some(t) = s.gc_interval_ms {
        let _ = writeln!(out, "\t\tgc-interval {}", time_text(t));
    }
    if let Some(c) = &s.comment {
        let _ = writeln!(out, "\t\tcomment \"{c}\"");
    }
    if !s.elements.is_empty() {
        let per_line = match (s.key.as_slice(), s.key_typeof.is_some()) {
            ([d], _) => match d {
                DataType::NfProto
                | DataType::Integer(_)
                | DataType::InetProto
                | DataType::InetService
                | DataType::TcpFlag
                | DataType::Mark
                | DataType::CtDir => 5,
                // ct_state / ct_status: 2 a line (checked with nft 1.0.6).
                DataType::Ipv4Addr | DataType::CtState | DataType::CtStatus => 2,
                _ => 1,
            },
            _ => 1,
        };
        let _ = writeln!(
            out,
            "\t\telements = {{ {} }}",
            elements_text(&s.elements, s.flags.interval, per_line)
        );
    }
    out.push_str("\t}\n");
}

fn elements_text(elems: &Elements, interval: bool, per_line: usize) -> String {
    let sorted = sorted_elements(elems, interval);
    let mut out = String::new();
    let mut count = 0;
    for (i, e) in sorted.iter().enumerate() {
        if i > 0 {
            if count < per_line {
                out.push_str(", ");
            } else {
                count = 0;
                out.push_str(",\n\t\t\t     ");
            }
        }
        out.push_str(&element(e));
        count += 1;
    }
    out
}

/// A set's `flags` line as nft 1.0.6 lists it (`constant`, `interval`, `dynamic`, `timeout`,
/// in that order; a lone `timeout` flag is left out when the set has a default timeout).
pub(crate) fn set_flags_text(s: &SetDecl) -> Option<String> {
    let f = s.flags;
    let timeout_flag =
        f.timeout && !(s.timeout_ms.is_some() && !f.constant && !f.interval && !f.dynamic);
    let flags: Vec<&str> = [
        (f.constant, "constant"),
        (f.interval, "interval"),
        (f.dynamic, "dynamic"),
        (timeout_flag, "timeout"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    (!flags.is_empty()).then(|| flags.join(","))
}

/// Elements in the order nft lists them, with interval parts in their listed form: sorted by
/// key, except in a concatenated set with ranges (the kernel's pipapo), which nft lists in
/// insertion order (checked with `nft list ruleset`, nft 1.0.6 + kernel 6.18).
///
/// A flag type's element of several flags (`syn | ack`) is nft's `|` expression and sorts by
/// its first flag; elements that sort equal come in the reverse of their written order (the
/// kernel's set hands them back so, and nft's sort keeps their order).
///
/// The catch-all element `*` comes last (the kernel dumps it after the back-end's elements,
/// `nft_set_catchall_dump`).
pub(crate) fn sorted_elements<'a>(
    elems: impl IntoIterator<Item = Cow<'a, SetElem>>,
    interval: bool,
) -> Vec<SetElem> {
    let (mut concat, mut ranges) = (false, false);
    let mut v: Vec<SetElem> = elems
        .into_iter()
        .map(|e| {
            concat |= e.key.len() > 1;
            ranges |= e.key.iter().any(|p| !matches!(p, KeyPart::Value(_)));
            let mut e = e.into_owned();
            e.key = e.key.iter().map(normalize_part).collect();
            e
        })
        .collect();
    let pipapo = concat && (interval || ranges);
    if pipapo {
        // A stable sort keeps the others' order.
        v.sort_by_key(SetElem::is_catch_all);
    } else {
        if v.first().is_some_and(|e| flag_key(&e.key)) {
            v.reverse();
        }
        // Each element's sort key is made once (a comparison that made both would allocate
        // twice per comparison); the sort is stable.
        v.sort_by_cached_key(|e| (e.is_catch_all(), sort_key(&e.key)));
    }
    v
}

/// A one-field key of a type nft prints as flags joined by `|`.
fn flag_key(key: &[KeyPart]) -> bool {
    matches!(key, [KeyPart::Value(v)] if matches!(v.dtype, DataType::TcpFlag | DataType::CtState | DataType::CtStatus))
}

/// A range that covers a prefix is listed as the prefix, a one-value range as the value, a
/// full-length prefix as the value.
pub(crate) fn normalize_part(p: &KeyPart) -> KeyPart {
    let prefix_type = matches!(
        low(p).dtype,
        DataType::Ipv4Addr | DataType::Ipv6Addr | DataType::Mark
    );
    if !prefix_type {
        // Only addresses and marks have a prefix form (nft's DTYPE_F_PREFIX): others list ranges.
        return match p {
            KeyPart::Prefix(v, n) => {
                let bits = u32::from(v.dtype.width_bits());
                let pad = (v.bytes.len() as u32) * 8 - bits;
                let mut hi = v.bytes.clone();
                for bit in (pad + u32::from(*n))..(pad + bits) {
                    hi[(bit / 8) as usize] |= 0x80 >> (bit % 8);
                }
                let hi = Value {
                    bytes: hi,
                    ..v.clone()
                };
                if hi.bytes == v.bytes {
                    KeyPart::Value(v.clone())
                } else {
                    KeyPart::Range(v.clone(), hi)
                }
            }
            KeyPart::Range(lo, hi) if lo.bytes == hi.bytes => KeyPart::Value(lo.clone()),
            _ => p.clone(),
        };
    }
    match p {
        KeyPart::Range(lo, hi) if lo.bytes == hi.bytes => KeyPart::Value(lo.clone()),
        KeyPart::Range(lo, hi) => {
            let bits = u32::from(lo.dtype.width_bits());
            let pad = (lo.bytes.len() as u32) * 8 - bits;
            for n in 0..=bits {
                let mut m = lo.bytes.clone();
                crate::parser::value::mask_prefix(&mut m, pad + n);
                if m != lo.bytes {
                    continue;
                }
                // hi must be lo with every bit after the prefix set.
                let mut want = lo.bytes.clone();
                for bit in (pad + n)..(pad + bits) {
                    want[(bit / 8) as usize] |= 0x80 >> (bit % 8);
                }
                if want == hi.bytes {
                    return if n == bits {
                        KeyPart::Value(lo.clone())
                    } else {
                        KeyPart::Prefix(lo.clone(), n as u8)
                    };
                }
            }
            p.clone()
        }
        KeyPart::Prefix(v, n) if u16::from(*n) == v.dtype.width_bits() => KeyPart::Value(v.clone()),
        _ => p.clone(),
    }
}

/// The bytes one field sorts by: its value (numeric order), except an interface name,
/// which nft compares as a little-endian number.
fn sort_value(v: &Value) -> Vec<u8> {
    match v.dtype {
        DataType::Ifname => v.bytes.iter().rev().copied().collect(),
        // Flags sort by their lowest (first listed) flag.
        DataType::TcpFlag | DataType::CtState | DataType::CtStatus => {
            let n = v.bytes.iter().fold(0u128, |a, b| a << 8 | u128::from(*b));
            let low = n & n.wrapping_neg();
            low.to_be_bytes()[16 - v.bytes.len()..].to_vec()
        }
        _ => v.bytes.to_vec(),
    }
}

/// Types nft keeps in host byte order in a register (`mark`, the ct keys): a concatenation
/// holding one is sorted by the whole key read as one little-endian number.
fn host_register(d: DataType) -> bool {
    matches!(
        d,
        DataType::Mark | DataType::CtState | DataType::CtStatus | DataType::CtDir
    )
}

/// A concatenated key as nft compares it when a field is in host byte order: each field as
/// its register holds it (host-order fields little-endian), padded to 4 bytes, the whole
/// read as a little-endian number (checked with `nft list ruleset`: `ct state . ct mark
/// { established . 0x2, new . 0x1 }` lists `new . 0x00000001` first).
fn concat_le(parts: &[KeyPart]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        let v = low(p);
        let mut b = v.bytes.clone();
        if host_register(v.dtype) {
            b.reverse();
        }
        while !b.len().is_multiple_of(4) {
            b.push(0);
        }
        out.extend(b);
    }
    out.reverse();
    out
}

fn low(p: &KeyPart) -> &Value {
    match p {
        KeyPart::Value(v) | KeyPart::Range(v, _) | KeyPart::Prefix(v, _) => v,
    }
}

/// The bytes a key sorts by as nft lists it: each field's sort value in turn (a field has the
/// same width in every key of a set, so comparing the bytes compares field after field), or
/// the whole key read as one little-endian number when a field is in host byte order.
fn sort_key(key: &[KeyPart]) -> Vec<u8> {
    if key.len() > 1 && key.iter().any(|p| host_register(low(p).dtype)) {
        return concat_le(key);
    }
    key.iter().flat_map(|p| sort_value(low(p))).collect()
}

fn element(e: &SetElem) -> String {
    let mut s = key_text(&e.key);
    if e.counter {
        let _ = write!(s, " counter packets {} bytes {}", e.packets(), e.bytes());
    }
    if let Some(t) = e.timeout_ms() {
        let _ = write!(s, " timeout {}", time_text(t));
    }
    if let Some(t) = e.expires_ms() {
        let _ = write!(s, " expires {}", time_text(t));
    }
    if let Some(c) = e.comment() {
        let _ = write!(s, " comment \"{c}\"");
    }
    if let Some(d) = &e.data {
        let _ = write!(s, " : {}", elem_data_text(d));
    }
    s
}

/// A map element's data as nft lists it after ` : `.
pub(crate) fn elem_data_text(d: &ElemData) -> String {
    match d {
        ElemData::Value(v) => print_value(v),
        ElemData::Verdict(v) => verdict(v),
        ElemData::Object(name) => format!("\"{name}\""),
        ElemData::Nat(parts) => nat_data_text(parts),
    }
}

/// The data of a NAT map element (`10.141.10.0/24 . 8888-8999`): a prefix as written (also
/// `/32`), a range as a prefix when it is one, else `lo-hi`, a single value as itself
/// (checked with `nft list ruleset`, 1.0.6).
fn nat_data_text(parts: &[KeyPart]) -> String {
    parts
        .iter()
        .map(|p| match p {
            KeyPart::Value(v) => print_value(v),
            KeyPart::Prefix(v, n) => format!("{}/{n}", print_value(v)),
            KeyPart::Range(a, b) => match normalize_part(p) {
                KeyPart::Prefix(v, n) => format!("{}/{n}", print_value(&v)),
                _ if matches!(a.dtype, DataType::Ipv4Addr | DataType::Ipv6Addr)
                    && a.bytes == b.bytes =>
                {
                    format!("{}/{}", print_value(a), a.dtype.width_bits())
                }
                _ => format!("{}-{}", print_range_end(a), print_range_end(b)),
            },
        })
        .collect::<Vec<_>>()
        .join(" . ")
}

/// The key of a set element as nft lists it (`10.0.0.0/8 . 22-80`; `*` for the catch-all).
pub(crate) fn key_text(parts: &[KeyPart]) -> String {
    if parts.is_empty() {
        return "*".to_string();
    }
    parts
        .iter()
        .map(|p| match normalize_part(p) {
            KeyPart::Value(v) => print_value(&v),
            KeyPart::Range(a, b) => format!("{}-{}", print_range_end(&a), print_range_end(&b)),
            KeyPart::Prefix(v, n) => format!("{}/{}", print_value(&v), n),
        })
        .collect::<Vec<_>>()
        .join(" . ")
}

/// nft's `prio2str`: a standard name, or name +/- offset up to 10, or the number.
pub(crate) fn priority_text(family: Family, hook: Hook, prio: i32) -> String {
    for (name, base) in std_prios(family) {
        if !std_prio_ok(*base, family, hook) {
            continue;
        }
        let off = i64::from(prio) - i64::from(*base);
        if off == 0 {
            return (*name).to_string();
        }
        if off.abs() <= 10 {
            let sign = if off < 0 { '-' } else { '+' };
            return format!("{name} {sign} {}", off.abs());
        }
    }
    prio.to_string()
}

fn chain(out: &mut String, family: Family, c: &Chain, handles: bool) {
    let _ = writeln!(
        out,
        "\tchain {} {{{}",
        c.name,
        handle_suffix(handles, c.handle)
    );
    if let Some(com) = &c.comment {
        let _ = writeln!(out, "\t\tcomment \"{com}\"");
    }
    if let Some(b) = &c.base {
        let ty = match b.chain_type {
            ChainType::Filter => "filter",
            ChainType::Nat => "nat",
            ChainType::Route => "route",
        };
        let dev = match b.devices.as_slice() {
            [] => String::new(),
            [d] => format!(" device \"{d}\""),
            many => format!(" devices = {{ {} }}", many.join(", ")),
        };
        let policy = match b.policy {
            Policy::Accept => "accept",
            Policy::Drop => "drop",
        };
        let _ = writeln!(
            out,
            "\t\ttype {ty} hook {}{dev} priority {}; policy {policy};",
            b.hook.name(),
            priority_text(family, b.hook, b.priority)
        );
    }
    for r in &c.rules {
        let _ = writeln!(
            out,
            "\t\t{}{}",
            rule_text(r),
            handle_suffix(handles, r.handle)
        );
    }
    out.push_str("\t}\n");
}

/// One rule as nft lists it (without the handle).
pub fn rule_text(r: &Rule) -> String {
    let mut parts: Vec<String> = r
        .stmts
        .iter()
        .filter(|s| !matches!(s, Stmt::Match(m) if m.implied))
        .map(stmt)
        .collect();
    if let Some(c) = &r.comment {
        parts.push(format!("comment \"{c}\""));
    }
    parts.join(" ")
}

fn verdict(v: &Verdict) -> String {
    match v {
        Verdict::Accept => "accept".into(),
        Verdict::Drop => "drop".into(),
        Verdict::Continue => "continue".into(),
        Verdict::Return => "return".into(),
        Verdict::Jump(c) => format!("jump {c}"),
        Verdict::Goto(c) => format!("goto {c}"),
    }
}

pub(crate) fn stmt(s: &Stmt) -> String {
    match s {
        Stmt::Match(m) => match_text(m),
        Stmt::Verdict(v) => verdict(v),
        Stmt::VerdictMap { key, map, .. } => {
            format!("{} vmap {}", lookup_key_text(key, map, true), set_ref(map))
        }
        Stmt::Plugin(u) => {
            let mut s = u.name.clone();
            for a in &u.args {
                s.push(' ');
                s.push_str(a);
            }
            if u.fallback_drop {
                s.push_str(" fallback drop");
            }
            s
        }
        Stmt::Counter { packets, bytes } => format!("counter packets {packets} bytes {bytes}"),
        Stmt::CounterRef { name, .. } => format!("counter name \"{name}\""),
        Stmt::Limit { limit, .. } => format!("limit {}", limit_text(limit)),
        Stmt::LimitRef { name, .. } => format!("limit name \"{name}\""),
        Stmt::Quota { quota, .. } => format!("quota {}", quota_text(quota, false)),
        Stmt::QuotaRef { name, .. } => format!("quota name \"{name}\""),
        Stmt::Reject { kind, verbose, .. } => reject_text(*kind, *verbose),
        Stmt::ObjectMap { kind, key, map, .. } => {
            format!("{} {} map {}", kind.reference(), expr(key), set_ref(map))
        }
        Stmt::CtObjRef { kind, name, .. } => format!("{} \"{name}\"", kind.reference()),
        Stmt::Log(l) => {
            // nft 1.0.6's order: prefix, group, snaplen, queue-threshold, level, flags.
            let mut s = "log".to_string();
            if let Some(p) = &l.prefix {
                let _ = write!(s, " prefix \"{p}\"");
            }
            if let Some(g) = l.group {
                let _ = write!(s, " group {g}");
            }
            if let Some(n) = l.snaplen {
                let _ = write!(s, " snaplen {n}");
            }
            if let Some(q) = l.queue_threshold {
                let _ = write!(s, " queue-threshold {q}");
            }
            if let Some(lv) = &l.level {
                let _ = write!(s, " level {lv}");
            }
            s.push_str(&l.flags.text());
            s
        }
        Stmt::PayloadSet { target, value, .. } => raw_set_unaligned_text(target, value)
            .unwrap_or_else(|| format!("{} set {}", expr(target), expr(value))),
        Stmt::SetUpdate(u) => {
            // The key is shown with nft's shift, as in a concatenation (`ip dscp >> 2`).
            let key = match shifted(&u.key) {
                Some((shift, _)) => format!("{} >> {shift}", expr(&u.key)),
                None => lookup_key_text(&u.key, &SetRef::Named(u.set.clone()), false),
            };
            let mut t = format!("{} @{} {{ {key}", u.op.word(), u.set);
            if let Some(ms) = u.timeout_ms {
                t.push_str(&format!(" timeout {}", crate::datatypes::time_text(ms)));
            }
            for s in &u.stmts {
                t.push(' ');
                // An element's counter lists without its counts (nft 1.0.6).
                match s {
                    Stmt::Counter { .. } => t.push_str("counter"),
                    s => t.push_str(&stmt(s)),
                }
            }
            if let Some(d) = &u.data {
                t.push_str(&format!(" : {}", expr(d)));
            }
            t.push_str(" }");
            t
        }
        Stmt::OptReset { kind, .. } => {
            let name = crate::options::TCP_OPTIONS
                .iter()
                .find(|d| d.kind == *kind)
                .map_or_else(|| kind.to_string(), |d| d.name.to_string());
            format!("reset tcp option {name}")
        }
        Stmt::MetaSet { key, value, .. } => {
            let v = match value {
                Expr::Const(v) => print_value(v),
                e => expr(e),
            };
            format!("{} set {v}", crate::meta_keys::listed(*key))
        }
        Stmt::CtSet { key, value, .. } => {
            let v = match value {
                Expr::Const(v) => print_value(v),
                e => expr(e),
            };
            format!("ct {} set {v}", key.name())
        }
        Stmt::CtCount { over, count, .. } => {
            format!("ct count {}{count}", if *over { "over " } else { "" })
        }
        Stmt::Nat(n) => nat_text(n),
        Stmt::FlowAdd { flowtable, .. } => format!("flow add @{flowtable}"),
        Stmt::Fwd { map: Some(m), .. } | Stmt::Dup { map: Some(m), .. } => {
            let word = if matches!(s, Stmt::Fwd { .. }) {
                "fwd"
            } else {
                "dup"
            };
            let (Stmt::Fwd { dev, .. } | Stmt::Dup { dev, .. }) = s else {
                unreachable!("matched above")
            };
            // nft 1.0.6 lists `fwd ip to` for a map of next hops (`fwd_stmt_print`).
            let fam = match m.dtype() {
                DataType::Ipv4Addr if word == "fwd" => "ip ",
                DataType::Ipv6Addr if word == "fwd" => "ip6 ",
                _ => "",
            };
            let device = if dev.is_empty() {
                String::new()
            } else {
                format!(" device \"{dev}\"")
            };
            format!("{word} {fam}to {}{device}", expr(m))
        }
        Stmt::Fwd { dev, via: None, .. } => format!("fwd to \"{dev}\""),
        Stmt::Fwd {
            dev, via: Some(a), ..
        } => {
            let fam = if a.is_ipv4() { "ip" } else { "ip6" };
            format!("fwd {fam} to {a} device \"{dev}\"")
        }
        Stmt::Dup { dev, via: None, .. } => format!("dup to \"{dev}\""),
        Stmt::Dup {
            dev, via: Some(a), ..
        } if dev.is_empty() => format!("dup to {a}"),
        Stmt::Dup {
            dev, via: Some(a), ..
        } => format!("dup to {a} device \"{dev}\""),
        Stmt::Notrack => "notrack".to_string(),
    }
}

/// A byte count in the largest of bytes, kbytes and mbytes that divides it (nft's
/// `get_rate`): `1024` is `1 kbytes`, `1025` is `1025 bytes`, `0` is `0 bytes`.
pub(crate) fn bytes_text(n: u64) -> String {
    let units = ["bytes", "kbytes", "mbytes"];
    let (mut v, mut i) = (n, 0);
    while n != 0 && i + 1 < units.len() && v % 1024 == 0 {
        v /= 1024;
        i += 1;
    }
    format!("{v} {}", units[i])
}

/// A limit after `limit ` (or in a limit object) as nft 1.0.6 lists it (`limit_stmt_print`):
/// `rate [over ]N/UNIT[ burst M packets]` (a burst of 5 left out) or `rate [over ]N
/// BYTES/UNIT[ burst M BYTES]` (a burst of 0 left out).
pub(crate) fn limit_text(l: &Limit) -> String {
    let unit = match l.per_secs {
        1 => "second",
        60 => "minute",
        3600 => "hour",
        86400 => "day",
        _ => "week",
    };
    let over = if l.over { "over " } else { "" };
    if l.bytes {
        let mut s = format!("rate {over}{}/{unit}", bytes_text(l.rate));
        if l.burst != 0 {
            let _ = write!(s, " burst {}", bytes_text(u64::from(l.burst)));
        }
        s
    } else {
        let mut s = format!("rate {over}{}/{unit}", l.rate);
        if l.burst != 0 && l.burst != crate::model::LIMIT_PKT_BURST_DEFAULT {
            let _ = write!(s, " burst {} packets", l.burst);
        }
        s
    }
}

/// A quota after `quota ` (or in a quota object) as nft 1.0.6 lists it (`quota_stmt_print`):
/// `[over ]N UNIT[ used M UNIT]`, `used` left out when 0 or `stateless`.
pub(crate) fn quota_text(q: &Quota, stateless: bool) -> String {
    let mut s = format!(
        "{}{}",
        if q.over { "over " } else { "" },
        bytes_text(q.bytes)
    );
    if !stateless && q.used != 0 {
        let _ = write!(s, " used {}", bytes_text(q.used));
    }
    s
}

/// A `reject` statement as nft 1.0.6 lists it (`reject_stmt_print`): `reject` for icmpx
/// port-unreachable, and for the ip (ip6) family's default icmp (icmpv6) port-unreachable
/// unless `verbose` (inet, netdev, bridge tables); else `reject with tcp reset` or `reject
/// with icmp|icmpv6|icmpx CODE`, the code named where nft has a name.
fn reject_text(k: RejectKind, verbose: bool) -> String {
    match k {
        RejectKind::Icmpx(1) => return "reject".to_string(),
        RejectKind::Icmp(3) | RejectKind::Icmpv6(4) if !verbose => return "reject".to_string(),
        _ => {}
    }
    let value = |dtype, code| {
        print_value(&Value {
            dtype,
            bytes: vec![code].into(),
            wildcard: false,
        })
    };
    match k {
        RejectKind::TcpReset => "reject with tcp reset".to_string(),
        RejectKind::Icmp(c) => format!("reject with icmp {}", value(DataType::IcmpCode, c)),
        RejectKind::Icmpv6(c) => format!("reject with icmpv6 {}", value(DataType::Icmpv6Code, c)),
        RejectKind::Icmpx(c) => match crate::model::ICMPX_CODES.iter().find(|(_, n)| *n == c) {
            Some((name, _)) => format!("reject with icmpx {name}"),
            None => format!("reject with icmpx {c}"),
        },
    }
}

fn set_ref(r: &SetRef) -> String {
    match r {
        SetRef::Named(n) => format!("@{n}"),
        SetRef::Anonymous(elems) => {
            let sorted = sorted_elements(elems.iter().map(Cow::Borrowed), false);
            let items: Vec<String> = sorted.iter().map(element).collect();
            format!("{{ {} }}", items.join(", "))
        }
    }
}

/// The raw payload base's name: `ll`, `nh`, `th`, `ih`.
fn raw_base_name(b: PayloadBase) -> &'static str {
    match b {
        PayloadBase::Link => "ll",
        PayloadBase::Network | PayloadBase::Ip6Ext(_) => "nh",
        PayloadBase::Transport => "th",
        PayloadBase::Inner => "ih",
    }
}

fn exthdr_name(h: Ip6ExtHdr) -> &'static str {
    match h {
        Ip6ExtHdr::HopByHop => "hbh",
        Ip6ExtHdr::Routing => "rt",
        Ip6ExtHdr::Fragment => "frag",
        Ip6ExtHdr::DestOpts => "dst",
        Ip6ExtHdr::Mobility => "mh",
    }
}

/// A NAT statement as nft lists it: `snat ip to 10.0.0.1-10.0.0.9:1000-2000 random`,
/// `masquerade to :1024-2048`, `redirect to :8080`, `dnat ip6 to [2001:db8::1]:80`. An
/// address written as a range lists as a prefix when it is one (`10.0.0.1/32`); an IPv6
/// address with a port is in brackets; flags are comma-separated in the order random,
/// fully-random, persistent (checked with `nft list ruleset`, 1.0.6).
fn nat_text(n: &NatStmt) -> String {
    let mut s = n.kind.name().to_string();
    if let Some(f) = n.family {
        let _ = write!(s, " {}", if f == Family::Ip6 { "ip6" } else { "ip" });
    }
    if n.prefix {
        s.push_str(" prefix");
    }
    if let Some(t) = &n.target {
        let _ = write!(s, " to {}", expr(t));
    }
    if n.addr.is_some() || n.ports.is_some() {
        s.push_str(" to ");
    }
    if let Some((lo, hi)) = n.addr {
        let bracket = lo.is_ipv6() && n.ports.is_some();
        let one = |a: std::net::IpAddr| {
            if bracket {
                format!("[{a}]")
            } else {
                a.to_string()
            }
        };
        if !n.addr_range {
            s.push_str(&one(lo));
        } else if let Some(len) = crate::parser::nat::range_prefix(lo, hi) {
            let _ = write!(s, "{lo}/{len}");
        } else {
            let _ = write!(s, "{}-{}", one(lo), one(hi));
        }
    }
    if let Some((lo, hi)) = n.ports {
        let _ = write!(s, ":{lo}");
        if n.port_range {
            let _ = write!(s, "-{hi}");
        }
    }
    let flags: Vec<&str> = [
        (n.flags.random, "random"),
        (n.flags.fully_random, "fully-random"),
        (n.flags.persistent, "persistent"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    if !flags.is_empty() {
        let _ = write!(s, " {}", flags.join(","));
    }
    s
}

/// An expression as nft lists it.
pub fn expr(e: &Expr) -> String {
    match e {
        Expr::Payload(p) => p.name(),
        Expr::Meta(k) => crate::meta_keys::listed(*k),
        Expr::Ct(k) => format!("ct {}", k.name()),
        Expr::ExthdrExists(h) => format!("exthdr {}", exthdr_name(*h)),
        Expr::Opt(o) => o.text(),
        Expr::Ipsec(k) => {
            let spnum = if k.spnum != 0 {
                format!(" spnum {}", k.spnum)
            } else {
                String::new()
            };
            let field = match k.key {
                crate::model::IpsecField::Reqid => "reqid".to_string(),
                crate::model::IpsecField::Spi => "spi".to_string(),
                crate::model::IpsecField::Saddr(f) => format!("{} saddr", f.name()),
                crate::model::IpsecField::Daddr(f) => format!("{} daddr", f.name()),
            };
            format!("ipsec {}{spnum} {field}", if k.out { "out" } else { "in" })
        }
        Expr::Socket(k) => format!(
            "socket {}",
            match k {
                crate::model::SocketKey::Transparent => "transparent",
                crate::model::SocketKey::Mark => "mark",
                crate::model::SocketKey::Wildcard => "wildcard",
            }
        ),
        Expr::Osf { ttl, version } => format!(
            "osf {}{}",
            match ttl {
                1 => "ttl loose ",
                2 => "ttl skip ",
                _ => "",
            },
            if *version { "version" } else { "name" }
        ),
        // nft 1.0.6's fib_expr_print: the flags in a fixed order, then the result.
        Expr::Fib(f) => format!("fib {} {}", f.flag_words().join(" . "), f.result.name()),
        Expr::Rt(k) => format!("rt {}", k.name()),
        Expr::Raw {
            base,
            offset_bits,
            len_bits,
        } => format!("@{},{offset_bits},{len_bits}", raw_base_name(*base)),
        Expr::Concat(parts) => parts.iter().map(expr).collect::<Vec<_>>().join(" . "),
        Expr::Binop {
            expr: inner,
            op,
            value,
        } => {
            // A mask of several flags is parenthesised (`tcp flags & (fin | syn) == syn`).
            let v = print_value(value);
            let v = if v.contains(" | ") {
                format!("({v})")
            } else {
                v
            };
            // nft's `binop_arg_print`: an operand that binds less tightly is parenthesised.
            let left = match &**inner {
                Expr::Binop { op: o, .. } if op.precedence() < o.precedence() => {
                    format!("({})", expr(inner))
                }
                e => expr(e),
            };
            format!("{left} {} {v}", op.symbol())
        }
        Expr::Const(v) => print_value(v),
        Expr::Map { key, map, .. } => {
            format!("{} map {}", lookup_key_text(key, map, true), set_ref(map))
        }
        Expr::Numgen {
            random,
            modulus,
            offset,
        } => {
            let kind = if *random { "random" } else { "inc" };
            format!("numgen {kind} mod {modulus}{}", offset_text(*offset))
        }
        Expr::Jhash {
            expr: inner,
            modulus,
            seed,
            offset,
        } => {
            let seed = seed.map(|v| format!(" seed 0x{v:x}")).unwrap_or_default();
            format!(
                "jhash {} mod {modulus}{seed}{}",
                expr(inner),
                offset_text(*offset)
            )
        }
        Expr::Symhash { modulus, offset } => {
            format!("symhash mod {modulus}{}", offset_text(*offset))
        }
    }
}

/// ` offset N` of `numgen`, `jhash` and `symhash`, left out when 0 (nft's `numgen_expr_print`,
/// `hash_expr_print`).
fn offset_text(offset: u32) -> String {
    if offset == 0 {
        String::new()
    } else {
        format!(" offset {offset}")
    }
}

fn op_text(op: RelOp) -> &'static str {
    match op {
        RelOp::Implicit | RelOp::Eq => "",
        RelOp::Ne => "!= ",
        RelOp::Lt => "< ",
        RelOp::Gt => "> ",
        RelOp::Le => "<= ",
        RelOp::Ge => ">= ",
    }
}

/// A raw payload statement that writes part of a byte as nft 1.0.6 lists it: the bytes
/// that hold the field are read, masked and written back (nft's stmt_evaluate_payload). For
/// `@ih` (whose checksum nft updates) the bytes are a whole number of 16-bit words (one byte
/// more in front when the field starts at an odd byte, else after). With a value of 0 the
/// mask listed is the field's bits, else the bits kept with the value's
/// (`@ih,58,6 set 1` lists `@ih,48,16 set @ih,48,16 & 0xffc1 | 0x1`).
fn raw_set_unaligned_text(target: &Expr, value: &Expr) -> Option<String> {
    let Expr::Raw {
        base,
        offset_bits,
        len_bits,
    } = *target
    else {
        return None;
    };
    let Expr::Const(v) = value else {
        return None;
    };
    let aligned_fetch = base == PayloadBase::Inner;
    let whole_bytes = offset_bits % 8 == 0 && len_bits % 8 == 0;
    if whole_bytes && !(aligned_fetch && (len_bits / 8) % 2 == 1) {
        return None;
    }
    let mut byte_off = u32::from(offset_bits / 8);
    let lead = u32::from(offset_bits % 8);
    let mut size = (lead + u32::from(len_bits)).div_ceil(8);
    let mut shift = size * 8 - lead - u32::from(len_bits);
    if aligned_fetch && size % 2 == 1 {
        size += 1;
        if byte_off % 2 == 1 {
            byte_off -= 1;
        } else {
            shift += 8;
        }
    }
    let width = size * 8;
    if width > 128 {
        return None;
    }
    let all = if width == 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    let field = (if len_bits >= 128 {
        u128::MAX
    } else {
        (1u128 << len_bits) - 1
    }) << shift;
    let val = v.bytes.iter().fold(0u128, |a, b| a << 8 | u128::from(*b)) << shift & all;
    let at = format!("@{},{},{width}", raw_base_name(base), byte_off * 8);
    Some(if val == 0 {
        format!("{at} set {at} & 0x{field:x}")
    } else {
        format!("{at} set {at} & 0x{:x} | 0x{val:x}", (all & !field) | val)
    })
}

/// An unaligned raw payload match as nft 1.0.6 lists it: the bytes that hold the field,
/// masked (`@nh,1,2 2` is `@nh,0,8 & 0x60 == 0x40`).
fn raw_unaligned_text(m: &Match) -> Option<String> {
    let Expr::Raw {
        base,
        offset_bits,
        len_bits,
    } = m.left
    else {
        return None;
    };
    if offset_bits % 8 == 0 && len_bits % 8 == 0 {
        return None;
    }
    let Rhs::Key(parts) = &m.right else {
        return None;
    };
    let [KeyPart::Value(v)] = parts.as_slice() else {
        return None;
    };
    let first = offset_bits / 8 * 8;
    let end = (offset_bits + len_bits).div_ceil(8) * 8;
    let width = end - first;
    if width > 128 {
        return None;
    }
    let shift = u32::from(end - offset_bits - len_bits);
    let ones = if len_bits >= 128 {
        u128::MAX
    } else {
        (1u128 << len_bits) - 1
    };
    let mask = ones << shift;
    let value = crate::datatypes::to_uint(v) << shift;
    let op = match m.op {
        RelOp::Ne => "!=",
        _ => "==",
    };
    Some(format!(
        "@{},{first},{width} & 0x{mask:x} {op} 0x{value:x}",
        raw_base_name(base)
    ))
}

fn match_text(m: &Match) -> String {
    if let Some(t) = raw_unaligned_text(m) {
        return t;
    }
    let right = match &m.right {
        // A range compared directly is the kernel's `range` expression: nft lists it as a
        // range even when it covers a prefix (`ip daddr 10.0.0.0-10.255.255.255`).
        Rhs::Key(parts) => match parts.as_slice() {
            [KeyPart::Range(a, b)] if a.bytes != b.bytes => {
                format!("{}-{}", print_range_end(a), print_range_end(b))
            }
            _ => key_text(parts),
        },
        Rhs::Set(r) => set_ref(r),
    };
    // `tcp flags == a | b` and `tcp flags & 0xff == a | b` (the mask covers the field and
    // goes) are listed with the value in hexadecimal, `tcp flags == 0x3`; one flag by name
    // (nft 1.0.6).
    if matches!(m.op, RelOp::Eq | RelOp::Ne)
        && let Rhs::Key(p) = &m.right
        && let [KeyPart::Value(v)] = p.as_slice()
        && v.dtype == DataType::TcpFlag
    {
        let inner = match &m.left {
            Expr::Binop {
                expr: inner,
                op: BinOp::And,
                value: mask,
            } if mask.bytes == [0xff].into() => Some(&**inner),
            Expr::Binop { .. } => None,
            e => Some(e),
        };
        if let Some(inner) = inner {
            let bits = v.bytes[0];
            let text = if bits.count_ones() == 1 {
                tcp_flags_text(bits, ",")
            } else {
                format!("0x{bits:x}")
            };
            let op = if m.op == RelOp::Ne { "!=" } else { "==" };
            return format!("{} {op} {text}", expr(inner));
        }
    }
    // `tcp flags & mask == value` is listed as `tcp flags value / mask` (the value with
    // commas), `tcp flags & mask != 0` as the flag test `tcp flags mask`; with a one-flag mask
    // and the same flag as the value, as written (`tcp flags & syn == syn`), as nft 1.0.6 does.
    if let Expr::Binop {
        expr: inner,
        op: BinOp::And,
        value: mask,
    } = &m.left
        && mask.dtype == DataType::TcpFlag
        && matches!(m.op, RelOp::Eq | RelOp::Ne | RelOp::Implicit)
        && let Rhs::Key(p) = &m.right
        && let [KeyPart::Value(v)] = p.as_slice()
    {
        let (v, mask) = (v.bytes[0], mask.bytes[0]);
        if v == 0 && m.op == RelOp::Ne {
            return format!("{} {}", expr(inner), tcp_flags_text(mask, ","));
        }
        let one_flag = mask.count_ones() == 1 && v == mask;
        if v != 0 && !one_flag {
            return format!(
                "{} {}{} / {}",
                expr(inner),
                op_text(m.op),
                tcp_flags_text(v, ","),
                tcp_flags_text(mask, ",")
            );
        }
    }
    // `tcp flags & mask == 0` is listed as `tcp flags ! mask`, `ct status & dnat == 0` as
    // `ct status ! dnat`.
    if let Expr::Binop {
        expr: inner,
        op: BinOp::And,
        value: mask,
    } = &m.left
        && matches!(
            mask.dtype,
            DataType::TcpFlag | DataType::CtState | DataType::CtStatus
        )
        && m.op == RelOp::Eq
        && matches!(&m.right, Rhs::Key(p) if matches!(p.as_slice(), [KeyPart::Value(v)] if v.bytes.iter().all(|b| *b == 0)))
    {
        let bits = if mask.dtype == DataType::TcpFlag {
            tcp_flags_text(mask.bytes[0], ",")
        } else {
            print_value(mask)
        };
        return format!("{} ! {bits}", expr(inner));
    }
    // A flag test with several flags is listed with commas: `tcp flags syn,ack`.
    if m.op == RelOp::Implicit
        && let Rhs::Key(parts) = &m.right
        && let [KeyPart::Value(v)] = parts.as_slice()
        && v.dtype == DataType::TcpFlag
    {
        return format!("{} {}", expr(&m.left), tcp_flags_text(v.bytes[0], ","));
    }
    // ct state / ct status compared with `==` or `!=`: several bits as `a | b` (and `==`
    // left out for them), one bit as `== a` (as nft 1.0.6 lists them).
    if matches!(m.op, RelOp::Eq | RelOp::Ne)
        && !matches!(m.left, Expr::Binop { .. })
        && let Rhs::Key(parts) = &m.right
        && let [KeyPart::Value(v)] = parts.as_slice()
        && matches!(v.dtype, DataType::CtState | DataType::CtStatus)
    {
        let text = print_value(v);
        let several = text.contains(',');
        let text = text.replace(',', " | ");
        let op = match (m.op, several) {
            (RelOp::Ne, _) => "!= ",
            (_, true) => "",
            _ => "== ",
        };
        return format!("{} {op}{text}", expr(&m.left));
    }
    let op = match (m.op, m.left.dtype()) {
        // For a bitmask type an implicit operator is a flag test, so `==` is written out.
        (RelOp::Eq, DataType::TcpFlag) if matches!(m.right, Rhs::Key(_)) => "== ",
        (RelOp::Eq | RelOp::Implicit, _) if matches!(m.left, Expr::Binop { .. }) => "== ",
        (o, _) => op_text(o),
    };
    let left = match &m.right {
        Rhs::Set(r) => lookup_key_text(&m.left, r, false),
        Rhs::Key(_) => expr(&m.left),
    };
    format!("{left} {op}{right}")
}

/// The key of a lookup (`KEY @s`, `KEY vmap @m`, `KEY map { ... }`) as nft 1.0.6 lists it: a
/// field that does not end on a byte boundary (`ip dscp`) is shown with the shift nft applies
/// to it, `ip dscp >> 2`, in a concatenation; alone as the key of a named map (`map`),
/// as the masked bytes that hold it, `(@nh,8,8 & 0xfc) >> 2 map @m` (`map` true); else as
/// itself (checked with `nft list ruleset` for sets, maps and verdict maps, named and not).
fn lookup_key_text(key: &Expr, set: &SetRef, map: bool) -> String {
    match key {
        Expr::Concat(parts) => parts
            .iter()
            .map(|p| match shifted(p) {
                Some((shift, _)) => format!("{} >> {shift}", expr(p)),
                None => expr(p),
            })
            .collect::<Vec<_>>()
            .join(" . "),
        e if map && matches!(set, SetRef::Named(_)) => match shifted(e) {
            Some((shift, d)) => {
                let lead = u32::from(d.offset_bits % 8);
                let bytes = (lead + u32::from(d.len_bits)).div_ceil(8);
                let mask = ((1u128 << d.len_bits) - 1) << shift;
                format!(
                    "(@{},{},{} & 0x{mask:x}) >> {shift}",
                    raw_base_name(d.base),
                    d.offset_bits / 8 * 8,
                    bytes * 8
                )
            }
            None => expr(e),
        },
        e => expr(e),
    }
}

/// A payload field that does not end on a byte boundary: nft's right shift for it and its
/// place.
pub(crate) fn shifted(e: &Expr) -> Option<(u16, crate::model::FieldDesc)> {
    let Expr::Payload(p) = e else { return None };
    let d = p.desc();
    let shift = (8 - (d.offset_bits + d.len_bits) % 8) % 8;
    (shift != 0 && d.len_bits < 64).then_some((shift, d))
}
