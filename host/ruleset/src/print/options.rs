//! Printing with nft's output flags: `-a` (handles), `-s` (stateless: counters without their
//! values, no element expiry) and `-t` (terse: named sets without their elements), and the
//! pieces `nft list tables|chains|sets|set|counters` print.
//!
//! What nft 1.0.6 prints with each flag (checked with `nft -a|-s|-t list ...` in a netns):
//! - `-s`: a rule's `counter packets N bytes M` is `counter`; a set element's counter is
//!   `counter`; a counter object's body (`packets N bytes M`) is left out, its braces kept;
//!   an element's `expires` is left out, its `timeout` kept;
//! - `-t`: a named set's `elements = { ... }` is left out (anonymous sets in rules stay);
//! - `-a`: `# handle N` after tables, chains, sets, counter objects and rules.

use std::fmt::Write;

use super::{handle_suffix, priority_text, set_flags_text, sorted_elements, stmt};
use crate::datatypes::time_text;
use crate::model::{
    Chain, ChainType, CounterObj, CtObj, CtObjConfig, DataType, Family, FlowtableDecl, LimitObj,
    Policy, QuotaObj, Rule, SetDecl, SetElem, Stmt, Table,
};

/// nft's output flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrintOptions {
    /// `-a`: `# handle N` after each object.
    pub handles: bool,
    /// `-s`: omit counter values (and element expiry).
    pub stateless: bool,
    /// `-t`: omit the elements of named sets.
    pub terse: bool,
}

/// A whole table as `nft list table` prints it.
pub(crate) fn table(out: &mut String, t: &Table, o: &PrintOptions) {
    let _ = writeln!(
        out,
        "table {} {} {{{}",
        t.family.name(),
        t.name,
        handle_suffix(o.handles, t.handle)
    );
    if let Some(c) = &t.comment {
        let _ = writeln!(out, "\tcomment \"{c}\"");
    }
    let mut first = true;
    let mut gap = |out: &mut String| {
        if !first {
            out.push('\n');
        }
        first = false;
    };
    for p in &t.plugins {
        gap(out);
        match &p.path {
            Some(path) => {
                let _ = writeln!(out, "\tplugin {} {{\n\t\tpath \"{path}\"\n\t}}", p.name);
            }
            None => {
                let _ = writeln!(out, "\tplugin {}", p.name);
            }
        }
    }
    objects(out, t, o, &mut gap);
    for s in &t.sets {
        gap(out);
        set(out, s, o);
    }
    for f in &t.flowtables {
        gap(out);
        flowtable(out, f, o);
    }
    for c in &t.chains {
        gap(out);
        chain(out, t.family, c, o, true);
    }
    out.push_str("}\n");
}

/// The table's named counter, quota and limit objects in the order of their handles (nft
/// 1.0.6 lists a table's objects in the order the kernel made them), `gap` before each.
pub(crate) fn objects(
    out: &mut String,
    t: &Table,
    o: &PrintOptions,
    gap: &mut dyn FnMut(&mut String),
) {
    let mut all: Vec<(u64, u8, usize)> = Vec::new();
    all.extend(t.counters.iter().enumerate().map(|(i, c)| (c.handle, 0, i)));
    all.extend(t.quotas.iter().enumerate().map(|(i, q)| (q.handle, 1, i)));
    all.extend(t.limits.iter().enumerate().map(|(i, l)| (l.handle, 2, i)));
    all.extend(
        t.ct_objects
            .iter()
            .enumerate()
            .map(|(i, c)| (c.handle, 3, i)),
    );
    all.sort_unstable();
    for (_, kind, i) in all {
        gap(out);
        match kind {
            0 => counter(out, &t.counters[i], o),
            1 => quota(out, &t.quotas[i], o),
            2 => limit(out, &t.limits[i], o),
            _ => ct_obj(out, &t.ct_objects[i], o),
        }
    }
}

/// A conntrack object (one tab in), as nft 1.0.6's `obj_print_data` lists it: the comment
/// first, then `type "ftp" protocol tcp` and `l3proto` of a helper; `protocol`, `l3proto` and
/// the policy's states that differ from nft's defaults of a timeout; `protocol`, `dport`,
/// `timeout`, `size` and `l3proto` of an expectation.
pub(crate) fn ct_obj(out: &mut String, c: &CtObj, o: &PrintOptions) {
    let _ = writeln!(
        out,
        "	{} {} {{{}",
        c.config.kind().name(),
        c.name,
        handle_suffix(o.handles, c.handle)
    );
    if let Some(text) = &c.comment {
        let _ = writeln!(out, "		comment \"{text}\"");
    }
    let proto = |p: u8| if p == 6 { "tcp" } else { "udp" };
    match &c.config {
        CtObjConfig::Helper {
            helper,
            protocol,
            l3proto,
        } => {
            let _ = writeln!(out, "		type \"{helper}\" protocol {}", proto(*protocol));
            let _ = writeln!(out, "		l3proto {}", l3proto.name());
        }
        CtObjConfig::Timeout {
            protocol,
            l3proto,
            policy,
        } => {
            let states = crate::model::ct_timeout_states(*protocol);
            let listed: Vec<String> = policy
                .iter()
                .filter_map(|(i, secs)| {
                    let (name, dflt) = states.get(usize::from(*i))?;
                    (secs != dflt).then(|| format!("{name} : {secs}"))
                })
                .collect();
            let _ = writeln!(out, "		protocol {}", proto(*protocol));
            let _ = writeln!(out, "		l3proto {}", l3proto.name());
            // nft prints `policy = {  }` for a policy of defaults only.
            let _ = writeln!(out, "		policy = {{ {} }}", listed.join(", "));
        }
        CtObjConfig::Expectation {
            protocol,
            dport,
            timeout_ms,
            size,
            l3proto,
        } => {
            let _ = writeln!(out, "		protocol {}", proto(*protocol));
            let _ = writeln!(out, "		dport {dport}");
            let _ = writeln!(
                out,
                "		timeout {}",
                crate::datatypes::time_text(*timeout_ms)
            );
            let _ = writeln!(out, "		size {size}");
            let _ = writeln!(out, "		l3proto {}", l3proto.name());
        }
    }
    out.push_str("	}\n");
}

/// A quota object (one tab in): `quota NAME {\n\t\t[over ]N UNIT[ used M UNIT]\n\t}`.
pub(crate) fn quota(out: &mut String, q: &QuotaObj, o: &PrintOptions) {
    let _ = writeln!(
        out,
        "\tquota {} {{{}",
        q.name,
        handle_suffix(o.handles, q.handle)
    );
    if let Some(text) = &q.comment {
        let _ = writeln!(out, "\t\tcomment \"{text}\"");
    }
    let _ = writeln!(
        out,
        "\t\t{}\n\t}}",
        super::quota_text(&q.quota, o.stateless)
    );
}

/// A limit object (one tab in): `limit NAME {\n\t\trate ...\n\t}`.
pub(crate) fn limit(out: &mut String, l: &LimitObj, o: &PrintOptions) {
    let _ = writeln!(
        out,
        "\tlimit {} {{{}",
        l.name,
        handle_suffix(o.handles, l.handle)
    );
    if let Some(text) = &l.comment {
        let _ = writeln!(out, "\t\tcomment \"{text}\"");
    }
    let _ = writeln!(out, "\t\t{}\n\t}}", super::limit_text(&l.limit));
}

/// A counter object (one tab in, as inside a table).
pub(crate) fn counter(out: &mut String, c: &CounterObj, o: &PrintOptions) {
    let _ = writeln!(
        out,
        "\tcounter {} {{{}",
        c.name,
        handle_suffix(o.handles, c.handle)
    );
    if let Some(text) = &c.comment {
        let _ = writeln!(out, "\t\tcomment \"{text}\"");
    }
    if !o.stateless {
        let _ = writeln!(out, "\t\tpackets {} bytes {}", c.packets, c.bytes);
    }
    out.push_str("\t}\n");
}

/// A flowtable (one tab in), as nft 1.0.6's `flowtable_print_declaration`: the hook line
/// with the priority named as for a netdev ingress chain (`filter`, `filter + 5`), the
/// devices unquoted in the order given, `counter`.
///
/// Not checked against the kernel here (it has no flowtable support); from nftables 1.0.6's
/// `src/rule.c`. Its listing looks like
/// `flowtable ft {\n\t\thook ingress priority filter\n\t\tdevices = { eth0, eth1 }\n\t\tcounter\n\t}`.
pub(crate) fn flowtable(out: &mut String, f: &FlowtableDecl, o: &PrintOptions) {
    let _ = writeln!(
        out,
        "\tflowtable {} {{{}",
        f.name,
        handle_suffix(o.handles, f.handle)
    );
    let _ = writeln!(
        out,
        "\t\thook {} priority {}",
        f.hook.name(),
        priority_text(Family::Netdev, f.hook, f.priority)
    );
    if !f.devices.is_empty() {
        let _ = writeln!(out, "\t\tdevices = {{ {} }}", f.devices.join(", "));
    }
    if f.counter {
        out.push_str("\t\tcounter\n");
    }
    out.push_str("\t}\n");
}

/// A named set or map (one tab in).
pub(crate) fn set(out: &mut String, s: &SetDecl, o: &PrintOptions) {
    let kw = if s.is_map { "map" } else { "set" };
    let _ = writeln!(
        out,
        "\t{kw} {} {{{}",
        s.name,
        handle_suffix(o.handles, s.handle)
    );
    match &s.key_typeof {
        Some(exprs) => {
            let text: Vec<String> = exprs.iter().map(super::expr).collect();
            let _ = write!(out, "\t\ttypeof {}", text.join(" . "));
        }
        None => {
            let names: Vec<&str> = s.key.iter().map(|d| d.name()).collect();
            let _ = write!(out, "\t\ttype {}", names.join(" . "));
        }
    }
    match (&s.data_typeof, s.data_type_text()) {
        (Some(e), _) if s.key_typeof.is_some() => {
            let _ = write!(out, " : {}", super::expr(e));
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
    if !s.elements.is_empty() && !o.terse {
        let per_line = match s.key.as_slice() {
            [d] => match d {
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
        let sorted = sorted_elements(&s.elements, s.flags.interval);
        out.push_str("\t\telements = { ");
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
            out.push_str(&element(e, o));
            count += 1;
        }
        out.push_str(" }\n");
    }
    out.push_str("\t}\n");
}

/// One set element with its counter, timeout, expiry, comment and data.
pub(crate) fn element(e: &SetElem, o: &PrintOptions) -> String {
    let mut s = super::key_text(&e.key);
    if e.counter {
        if o.stateless {
            s.push_str(" counter");
        } else {
            let _ = write!(s, " counter packets {} bytes {}", e.packets(), e.bytes());
        }
    }
    if let Some(t) = e.timeout_ms() {
        let _ = write!(s, " timeout {}", time_text(t));
    }
    if let Some(t) = e.expires_ms()
        && !o.stateless
    {
        let _ = write!(s, " expires {}", time_text(t));
    }
    if let Some(c) = e.comment() {
        let _ = write!(s, " comment \"{c}\"");
    }
    if let Some(d) = &e.data {
        let _ = write!(s, " : {}", super::elem_data_text(d));
    }
    s
}

/// A chain (one tab in), with its rules when `rules` (`nft list chains` shows none).
pub(crate) fn chain(out: &mut String, family: Family, c: &Chain, o: &PrintOptions, rules: bool) {
    let _ = writeln!(
        out,
        "\tchain {} {{{}",
        c.name,
        handle_suffix(o.handles, c.handle)
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
    if rules {
        for r in &c.rules {
            let _ = writeln!(
                out,
                "\t\t{}{}",
                rule(r, o),
                handle_suffix(o.handles, r.handle)
            );
        }
    }
    out.push_str("\t}\n");
}

/// One rule as nft lists it (without the handle), counters without values when stateless.
pub(crate) fn rule(r: &Rule, o: &PrintOptions) -> String {
    if !o.stateless {
        return super::rule_text(r);
    }
    let mut parts: Vec<String> = r
        .stmts
        .iter()
        .map(|s| match s {
            Stmt::Counter { .. } => "counter".to_string(),
            Stmt::Quota { quota, .. } => format!("quota {}", super::quota_text(quota, true)),
            other => stmt(other),
        })
        .collect();
    if let Some(c) = &r.comment {
        parts.push(format!("comment \"{c}\""));
    }
    parts.join(" ")
}
