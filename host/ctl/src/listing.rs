//! `list ...` rendered from the ruleset model, in nft syntax or nft's JSON (`-j`), with nft's
//! flags (`-a`, `-s`, `-t`). The daemon answers a [`Request::List`](crate::Request::List) with
//! [`list`].
//!
//! What nft 1.0.6 prints for each (checked with the real nft in a netns):
//! - `list ruleset [FAMILY]`: every table as `nft list table` prints it;
//! - `list tables [FAMILY]`: `table FAMILY NAME` per line (no handles, even with `-a`);
//! - `list chains`: each table with its chains' headers (base chain line included), no rules,
//!   no blank lines; tables without chains print as `table F N {` `}`;
//! - `list sets` / `list maps`: each table with its sets (maps) in full, no blank lines;
//!   tables without any still print as `table F N {` `}`;
//! - `list counters|quotas|limits [table F T]`: only tables that hold a named object of any
//!   kind (a counter, quota, limit or ct object: a table with only a quota shows, empty, in
//!   `list counters`), each with its objects of that kind;
//! - `list flowtables [FAMILY]`: every table, with its flowtables;
//! - `list set|map F T S`, `list table F T`, `list chain F T C`: that object in its table;
//!   an unknown one is "Error: No such file or directory" with the command and a caret under
//!   the unknown name.
//!
//! JSON follows the libnftables-json schema (`man libnftables-json`): `{"nftables": [
//! {"metainfo": ...}, {"table": ...}, {"counter"|"quota"|"limit": ...}, {"set"|"map": ...},
//! {"flowtable": ...}, {"chain": ...}, {"rule": ...} ]}`, objects table by table in that
//! order, as nft 1.0.6 orders them. Conntrack and NAT in rules as `nft -j list ruleset`
//! prints them (checked, nft 1.0.6): `{"ct": {"key": "state"}}` (a bitmask compared without
//! an operator is `"op": "in"` with one name or a list of names), `{"mangle": {"key": {"ct":
//! ...}, "value": ...}}`, `{"ct count": {"val": N, "inv": true}}`, `{"snat": {"family",
//! "addr", "port", "flags"}}` (a range as `{"range": [lo, hi]}`, a prefix as `{"prefix":
//! ...}`, one flag as a string, several as a list; `{"masquerade": null}` without any), and
//! `{"flow": {"op": "add", "flowtable": "@ft"}}`; a flowtable as `{"flowtable": {"family",
//! "name", "table", "handle", "hook", "prio", "dev"}}` (`dev` a string for one device, a list
//! for several; from nft 1.0.6's `json.c`: the local kernel has no flowtables).
//! `-s` turns rule and element counters into `"counter": null` (counter objects keep their
//! values, as nft does); `-t` leaves out `"elem"`. wasp's own objects use keys nft does not
//! have: `{"plugin": {"name", "args", "fallback"}}` in rules.

use serde_json::{Value as Json, json};
use wasp_ruleset::model::{
    Chain, CounterObj, DataType, ElemData, Expr, FlowtableDecl, ICMPX_CODES, KeyPart, Limit,
    LimitObj, Match, NatStmt, OptSel, QuotaObj, RejectKind, RelOp, Rhs, Rule, Ruleset, SetDecl,
    SetElem, SetRef, Stmt, Table, Value, Verdict,
};
use wasp_ruleset::{
    PrintOptions, print_chain, print_counter, print_flowtable, print_limit, print_quota, print_set,
    print_table,
};

use crate::proto::{ListFlags, ListRequest, ListWhat, parse_family};
use crate::server::{ReplySink, ReplySinkExt};

/// Answer a `list` request from `ruleset`: the output in text pieces (one per table), then
/// `Ok(null)`.
///
/// # Errors
/// nft's message for an unknown family or object; "client gone" when the sink fails.
pub fn list(ruleset: &Ruleset, req: &ListRequest, out: &mut dyn ReplySink) -> Result<Json, String> {
    let pieces = render(ruleset, req)?;
    for p in pieces {
        out.text(&p).map_err(|e| format!("client gone: {e}"))?;
    }
    Ok(Json::Null)
}

/// The output of `list` as text pieces whose concatenation is what nft prints.
///
/// # Errors
/// As [`list`].
pub fn render(ruleset: &Ruleset, req: &ListRequest) -> Result<Vec<String>, String> {
    let tables = select(ruleset, req)?;
    if req.flags.json {
        return Ok(render_json(&tables, req));
    }
    let o = options(&req.flags);
    let mut pieces = Vec::with_capacity(tables.len());
    for (t, sel) in &tables {
        let fam = t.family.name();
        let s = match req.what {
            ListWhat::Ruleset | ListWhat::Table => print_table(t, &o),
            ListWhat::Tables => format!("table {fam} {}\n", t.name),
            ListWhat::Chains | ListWhat::Chain => {
                let mut s = format!("table {fam} {} {{\n", t.name);
                for c in t.chains.iter().filter(|c| sel.chain(c)) {
                    s.push_str(&print_chain(t.family, c, &o, req.what == ListWhat::Chain));
                }
                s.push_str("}\n");
                s
            }
            ListWhat::Sets | ListWhat::Set | ListWhat::Maps | ListWhat::Map => {
                let mut s = format!("table {fam} {} {{\n", t.name);
                for set in t.sets.iter().filter(|x| sel.set(x)) {
                    s.push_str(&print_set(set, &o));
                }
                s.push_str("}\n");
                s
            }
            ListWhat::Counters | ListWhat::Quotas | ListWhat::Limits | ListWhat::Flowtables => {
                let mut s = format!("table {fam} {} {{\n", t.name);
                match req.what {
                    ListWhat::Counters => t
                        .counters
                        .iter()
                        .filter(|c| sel.named(&c.name))
                        .for_each(|c| s += &print_counter(c, &o)),
                    ListWhat::Quotas => t
                        .quotas
                        .iter()
                        .filter(|q| sel.named(&q.name))
                        .for_each(|q| s += &print_quota(q, &o)),
                    ListWhat::Limits => t
                        .limits
                        .iter()
                        .filter(|l| sel.named(&l.name))
                        .for_each(|l| s += &print_limit(l, &o)),
                    _ => t
                        .flowtables
                        .iter()
                        .for_each(|f| s += &print_flowtable(f, &o)),
                }
                s.push_str("}\n");
                s
            }
        };
        pieces.push(s);
    }
    Ok(pieces)
}

/// nft's flags as the printer's options.
pub fn options(f: &ListFlags) -> PrintOptions {
    PrintOptions {
        handles: f.handles,
        stateless: f.stateless,
        terse: f.terse,
    }
}

/// One rule in nft syntax, without handle (`stateless`: counters without values).
pub fn rule_text(r: &Rule, stateless: bool) -> String {
    wasp_ruleset::print_rule(
        r,
        &PrintOptions {
            stateless,
            ..PrintOptions::default()
        },
    )
}

/// Which objects of a table a listing shows.
#[derive(Debug, Clone, Copy)]
struct Sel<'a> {
    what: ListWhat,
    name: Option<&'a str>,
}

impl Sel<'_> {
    fn chain(&self, c: &Chain) -> bool {
        self.name.is_none_or(|n| n == c.name)
    }

    /// A named object of this name (any, when the request names none).
    fn named(&self, name: &str) -> bool {
        self.name.is_none_or(|n| n == name)
    }

    fn set(&self, s: &SetDecl) -> bool {
        let kind = match self.what {
            ListWhat::Sets | ListWhat::Set => !s.is_map,
            ListWhat::Maps | ListWhat::Map => s.is_map,
            _ => true,
        };
        kind && self.name.is_none_or(|n| n == s.name)
    }
}

/// nft's error for an object that does not exist, with the command and a caret under `bad`
/// (the index of the unknown word).
fn not_found(words: &[&str], bad: usize) -> String {
    let line = words.join(" ");
    let col: usize = words[..bad].iter().map(|w| w.chars().count() + 1).sum();
    let len = words[bad].chars().count().max(1);
    format!(
        "Error: No such file or directory\n{line}\n{}{}",
        " ".repeat(col),
        "^".repeat(len)
    )
}

/// Listings of one kind of named object (nft's `do_list_obj`).
fn objects(what: ListWhat) -> bool {
    matches!(
        what,
        ListWhat::Counters | ListWhat::Quotas | ListWhat::Limits
    )
}

/// Whether `t` holds a named object of any kind: the tables nft lists for `list counters`,
/// `list quotas` and `list limits`.
fn has_objects(t: &Table) -> bool {
    !(t.counters.is_empty()
        && t.quotas.is_empty()
        && t.limits.is_empty()
        && t.ct_objects.is_empty())
}

/// The tables a request shows, each with what of it to show.
fn select<'r>(rs: &'r Ruleset, req: &'r ListRequest) -> Result<Vec<(&'r Table, Sel<'r>)>, String> {
    let family = match &req.family {
        None => None,
        Some(f) => Some(parse_family(f).ok_or_else(|| {
            format!("Error: unknown family `{f}` (ip, ip6, inet, arp, bridge, netdev)")
        })?),
    };
    let sel = Sel {
        what: req.what,
        name: req.name.as_deref(),
    };
    let single = matches!(
        req.what,
        ListWhat::Set | ListWhat::Map | ListWhat::Table | ListWhat::Chain
    ) || (objects(req.what) && req.name.is_some());
    if !single {
        let tables = rs.tables.iter().filter(|t| {
            family.is_none_or(|f| f == t.family)
                && req.table.as_ref().is_none_or(|n| *n == t.name)
                && (!objects(req.what) || has_objects(t))
        });
        return Ok(tables.map(|t| (t, sel)).collect());
    }
    // One object: `list set [FAMILY] TABLE NAME`.
    let kw = match req.what {
        ListWhat::Set => "set",
        ListWhat::Map => "map",
        ListWhat::Table => "table",
        ListWhat::Counters => "counter",
        ListWhat::Quotas => "quota",
        ListWhat::Limits => "limit",
        _ => "chain",
    };
    let fam_word = req.family.clone();
    let table = req.table.clone().unwrap_or_default();
    let name = req.name.clone().unwrap_or_default();
    let mut words: Vec<&str> = vec!["list", kw];
    if let Some(f) = &fam_word {
        words.push(f);
    }
    let table_at = words.len();
    words.push(&table);
    if req.what != ListWhat::Table {
        words.push(&name);
    }
    let family = family.unwrap_or(wasp_ruleset::model::Family::Ip);
    let Some(t) = rs
        .tables
        .iter()
        .find(|t| t.family == family && t.name == table)
    else {
        return Err(not_found(&words, table_at));
    };
    let found = match req.what {
        ListWhat::Table => true,
        ListWhat::Chain => t.chains.iter().any(|c| sel.chain(c)),
        ListWhat::Counters => t.counters.iter().any(|c| sel.named(&c.name)),
        ListWhat::Quotas => t.quotas.iter().any(|q| sel.named(&q.name)),
        ListWhat::Limits => t.limits.iter().any(|l| sel.named(&l.name)),
        _ => t.sets.iter().any(|s| sel.set(s)),
    };
    if !found {
        return Err(not_found(&words, table_at + 1));
    }
    Ok(vec![(t, sel)])
}

// ---- JSON ----

fn render_json(tables: &[(&Table, Sel<'_>)], req: &ListRequest) -> Vec<String> {
    let f = &req.flags;
    let mut pieces = Vec::with_capacity(tables.len() + 2);
    let meta = json!({"metainfo": {
        "version": env!("CARGO_PKG_VERSION"),
        "release_name": "wasp",
        "json_schema_version": 1,
    }});
    pieces.push(format!("{{\"nftables\":[{meta}"));
    for (t, sel) in tables {
        let mut objs: Vec<Json> = Vec::new();
        let fam = t.family.name();
        let with_table = matches!(
            req.what,
            ListWhat::Ruleset | ListWhat::Table | ListWhat::Tables
        );
        if with_table {
            let mut o = json!({"family": fam, "name": t.name, "handle": t.handle});
            if let Some(c) = &t.comment {
                o["comment"] = json!(c);
            }
            objs.push(json!({ "table": o }));
        }
        let all = matches!(req.what, ListWhat::Ruleset | ListWhat::Table);
        if all || objects(req.what) {
            // Counters, quotas and limits in the order the kernel made them (handles).
            let mut named: Vec<(u64, Json)> = Vec::new();
            let kind = |k: ListWhat| all || req.what == k;
            for c in t
                .counters
                .iter()
                .filter(|c| kind(ListWhat::Counters) && sel.named(&c.name))
            {
                named.push((c.handle, counter_json(t, c)));
            }
            if kind(ListWhat::Quotas) {
                for q in t.quotas.iter().filter(|q| sel.named(&q.name)) {
                    named.push((q.handle, quota_json(t, q, f)));
                }
            }
            if kind(ListWhat::Limits) {
                for l in t.limits.iter().filter(|l| sel.named(&l.name)) {
                    named.push((l.handle, limit_json(t, l)));
                }
            }
            if all {
                for c in &t.ct_objects {
                    let mut o = json!({"family": fam, "name": c.name, "table": t.name,
                        "handle": c.handle});
                    ct_obj_json(&mut o, &c.config);
                    if let Some(x) = &c.comment {
                        o["comment"] = json!(x);
                    }
                    named.push((c.handle, json!({ c.config.kind().name(): o })));
                }
            }
            named.sort_by_key(|(h, _)| *h);
            objs.extend(named.into_iter().map(|(_, o)| o));
        }
        if all
            || matches!(
                req.what,
                ListWhat::Sets | ListWhat::Set | ListWhat::Maps | ListWhat::Map
            )
        {
            for s in t.sets.iter().filter(|s| all || sel.set(s)) {
                objs.push(set_json(t, s, f));
            }
        }
        if all || req.what == ListWhat::Flowtables {
            for ft in &t.flowtables {
                objs.push(flowtable_json(t, ft));
            }
        }
        if all || matches!(req.what, ListWhat::Chains | ListWhat::Chain) {
            for c in t.chains.iter().filter(|c| all || sel.chain(c)) {
                objs.push(chain_json(t, c));
            }
        }
        if all || req.what == ListWhat::Chain {
            for c in t.chains.iter().filter(|c| all || sel.chain(c)) {
                for r in &c.rules {
                    objs.push(rule_json(t, c, r, f));
                }
            }
        }
        let mut piece = String::new();
        for o in objs {
            piece.push(',');
            piece.push_str(&o.to_string());
        }
        pieces.push(piece);
    }
    pieces.push("]}\n".to_string());
    pieces
}

/// A counter object as nft 1.0.6's `obj_print_json`.
pub(crate) fn counter_json(t: &Table, c: &CounterObj) -> Json {
    let mut o = json!({"family": t.family.name(), "name": c.name, "table": t.name,
        "handle": c.handle, "packets": c.packets, "bytes": c.bytes});
    if let Some(x) = &c.comment {
        o["comment"] = json!(x);
    }
    json!({ "counter": o })
}

/// A quota object as nft 1.0.6's `obj_print_json` (`used` 0 when `f.stateless`).
pub(crate) fn quota_json(t: &Table, q: &QuotaObj, f: &ListFlags) -> Json {
    let mut o = json!({"family": t.family.name(), "name": q.name, "table": t.name,
        "handle": q.handle, "bytes": q.quota.bytes,
        "used": if f.stateless { 0 } else { q.quota.used },
        "inv": q.quota.over});
    if let Some(x) = &q.comment {
        o["comment"] = json!(x);
    }
    json!({ "quota": o })
}

/// A limit object as nft 1.0.6's `obj_print_json`.
pub(crate) fn limit_json(t: &Table, l: &LimitObj) -> Json {
    let mut o = json!({"family": t.family.name(), "name": l.name, "table": t.name,
        "handle": l.handle});
    limit_obj_json(&mut o, &l.limit);
    if let Some(x) = &l.comment {
        o["comment"] = json!(x);
    }
    json!({ "limit": o })
}

/// A flowtable as nft 1.0.6's `flowtable_print_json`.
pub(crate) fn flowtable_json(t: &Table, ft: &FlowtableDecl) -> Json {
    let mut o = json!({"family": t.family.name(), "name": ft.name, "table": t.name,
        "handle": ft.handle, "hook": ft.hook.name(), "prio": ft.priority});
    match ft.devices.as_slice() {
        [] => {}
        [one] => o["dev"] = json!(one),
        many => o["dev"] = json!(many),
    }
    json!({ "flowtable": o })
}

pub(crate) fn set_json(t: &Table, s: &SetDecl, f: &ListFlags) -> Json {
    let types: Vec<&str> = s.key.iter().map(|d| d.name()).collect();
    let mut o = json!({"family": t.family.name(), "name": s.name, "table": t.name});
    o["type"] = if types.len() == 1 {
        json!(types[0])
    } else {
        json!(types)
    };
    o["handle"] = json!(s.handle);
    // Concatenated data as one string (`"ipv4_addr . inet_service"`), as nft 1.0.6's `-j`.
    if let Some(d) = s.data_type_text() {
        o["map"] = json!(d);
    }
    let mut flags = Vec::new();
    if s.flags.constant {
        flags.push("constant");
    }
    if s.flags.interval {
        flags.push("interval");
    }
    if s.flags.timeout {
        flags.push("timeout");
    }
    // nft 1.0.6's `set_print_json` has no `dynamic` (checked with `nft -j list ruleset`).
    if !flags.is_empty() {
        o["flags"] = json!(flags);
    }
    if let Some(n) = s.size {
        o["size"] = json!(n);
    }
    if let Some(ms) = s.timeout_ms {
        o["timeout"] = json!(ms / 1000);
    }
    if let Some(ms) = s.gc_interval_ms {
        o["gc-interval"] = json!(ms / 1000);
    }
    if let Some(c) = &s.comment {
        o["comment"] = json!(c);
    }
    if !s.elements.is_empty() && !f.terse {
        // In the order and form nft lists them (`nft -j` sorts as the text listing does).
        let listed = wasp_ruleset::listed_elements(&s.elements, s.flags.interval);
        o["elem"] = Json::Array(listed.iter().map(|e| elem_json(e, f)).collect());
    }
    if s.counter {
        o["stmt"] = json!([{"counter": null}]);
    }
    let kind = if s.is_map { "map" } else { "set" };
    json!({ kind: o })
}

pub(crate) fn elem_json(e: &SetElem, f: &ListFlags) -> Json {
    let key = key_json(&e.key);
    let extra =
        e.counter || e.timeout_ms().is_some() || e.expires_ms().is_some() || e.comment().is_some();
    let val = if extra {
        let mut o = json!({ "val": key });
        if e.counter {
            o["counter"] = if f.stateless {
                Json::Null
            } else {
                json!({"packets": e.packets(), "bytes": e.bytes()})
            };
        }
        if let Some(ms) = e.timeout_ms() {
            o["timeout"] = json!(ms / 1000);
        }
        if let Some(ms) = e.expires_ms()
            && !f.stateless
        {
            o["expires"] = json!(ms / 1000);
        }
        if let Some(c) = e.comment() {
            o["comment"] = json!(c);
        }
        json!({ "elem": o })
    } else {
        key
    };
    match &e.data {
        None => val,
        Some(ElemData::Value(v)) => json!([val, value_json(v)]),
        Some(ElemData::Verdict(v)) => json!([val, verdict_json(v)]),
        Some(ElemData::Object(name)) => json!([val, name]),
        Some(ElemData::Nat(parts)) => json!([val, key_json(parts)]),
    }
}

pub(crate) fn chain_json(t: &Table, c: &Chain) -> Json {
    let mut o = json!({"family": t.family.name(), "table": t.name, "name": c.name,
        "handle": c.handle});
    if let Some(com) = &c.comment {
        o["comment"] = json!(com);
    }
    if let Some(b) = &c.base {
        o["type"] = json!(match b.chain_type {
            wasp_ruleset::model::ChainType::Filter => "filter",
            wasp_ruleset::model::ChainType::Nat => "nat",
            wasp_ruleset::model::ChainType::Route => "route",
        });
        o["hook"] = json!(b.hook.name());
        match b.devices.as_slice() {
            [] => {}
            [d] => o["dev"] = json!(d),
            many => o["dev"] = json!(many),
        }
        o["prio"] = json!(b.priority);
        o["policy"] = json!(match b.policy {
            wasp_ruleset::model::Policy::Accept => "accept",
            wasp_ruleset::model::Policy::Drop => "drop",
        });
    }
    json!({ "chain": o })
}

pub(crate) fn rule_json(t: &Table, c: &Chain, r: &Rule, f: &ListFlags) -> Json {
    let mut o = json!({"family": t.family.name(), "table": t.name, "chain": c.name,
        "handle": r.handle});
    if let Some(com) = &r.comment {
        o["comment"] = json!(com);
    }
    o["expr"] = Json::Array(
        r.stmts
            .iter()
            .filter(|s| !matches!(s, Stmt::Match(m) if m.implied))
            .map(|s| stmt_json(s, f))
            .collect(),
    );
    json!({ "rule": o })
}

/// A statement in libnftables-json form.
pub fn stmt_json(s: &Stmt, f: &ListFlags) -> Json {
    match s {
        Stmt::Match(m) => match_json(m),
        Stmt::Verdict(v) => verdict_json(v),
        Stmt::VerdictMap { key, map, .. } => {
            json!({"vmap": {"key": expr_json(key), "data": set_ref_json(map)}})
        }
        Stmt::Counter { packets, bytes } => {
            if f.stateless {
                json!({ "counter": null })
            } else {
                json!({"counter": {"packets": packets, "bytes": bytes}})
            }
        }
        Stmt::CounterRef { name, .. } => json!({ "counter": name }),
        Stmt::LimitRef { name, .. } => json!({ "limit": name }),
        Stmt::ObjectMap { kind, key, map, .. } => {
            json!({ kind.name(): {"map": {"key": expr_json(key), "data": set_ref_json(map)}} })
        }
        Stmt::QuotaRef { name, .. } => json!({ "quota": name }),
        Stmt::CtObjRef { kind, name, .. } => json!({ kind.name(): name }),
        Stmt::Limit { limit, .. } => {
            let mut o = json!({});
            if limit.bytes {
                let (rate, rate_unit) = bytes_unit(limit.rate);
                let (burst, burst_unit) = bytes_unit(u64::from(limit.burst));
                o["rate"] = json!(rate);
                o["burst"] = json!(burst);
                o["per"] = json!(per_unit(limit.per_secs));
                if limit.over {
                    o["inv"] = json!(true);
                }
                o["rate_unit"] = json!(rate_unit);
                o["burst_unit"] = json!(burst_unit);
            } else {
                o["rate"] = json!(limit.rate);
                o["burst"] = json!(limit.burst);
                o["per"] = json!(per_unit(limit.per_secs));
                if limit.over {
                    o["inv"] = json!(true);
                }
            }
            json!({ "limit": o })
        }
        Stmt::Reject { kind, .. } => reject_json(*kind),
        Stmt::Quota { quota, .. } => {
            let (val, val_unit) = bytes_unit(quota.bytes);
            let mut o = json!({"val": val, "val_unit": val_unit});
            if quota.over {
                o["inv"] = json!(true);
            }
            if !f.stateless && quota.used != 0 {
                let (used, used_unit) = bytes_unit(quota.used);
                o["used"] = json!(used);
                o["used_unit"] = json!(used_unit);
            }
            json!({ "quota": o })
        }
        Stmt::Log(l) => {
            if *l == wasp_ruleset::model::LogStmt::default() {
                json!({ "log": null })
            } else {
                let mut o = json!({});
                if let Some(p) = &l.prefix {
                    o["prefix"] = json!(p);
                }
                if let Some(g) = l.group {
                    o["group"] = json!(g);
                }
                if let Some(n) = l.snaplen {
                    o["snaplen"] = json!(n);
                }
                if let Some(q) = l.queue_threshold {
                    o["queue-threshold"] = json!(q);
                }
                if let Some(lv) = &l.level {
                    o["level"] = json!(lv);
                }
                let flags = l.flags.text();
                if !flags.is_empty() {
                    let names: Vec<&str> =
                        flags.split(" flags ").filter(|f| !f.is_empty()).collect();
                    o["flags"] = json!(names);
                }
                json!({ "log": o })
            }
        }
        Stmt::Plugin(u) => {
            let mut o = json!({"name": u.name, "args": u.args});
            if u.fallback_drop {
                o["fallback"] = json!("drop");
            }
            json!({ "plugin": o })
        }
        Stmt::MetaSet { key, value, .. } => json!({"mangle": {
            "key": expr_json(&Expr::Meta(*key)),
            "value": expr_json(value),
        }}),
        Stmt::CtSet { key, value, .. } => json!({"mangle": {
            "key": expr_json(&Expr::Ct(*key)),
            "value": expr_json(value),
        }}),
        Stmt::CtCount { over, count, .. } => {
            if *over {
                json!({"ct count": {"val": count, "inv": true}})
            } else {
                json!({"ct count": {"val": count}})
            }
        }
        Stmt::Nat(n) => nat_json(n),
        // nft 1.0.6's `dup_stmt_json`: `{"dup": {"addr": "192.168.2.1", "dev": "lo"}}`.
        Stmt::Dup { dev, via, map, .. } => {
            let mut o = serde_json::Map::new();
            if let Some(a) = via {
                o.insert("addr".into(), json!(a.to_string()));
            }
            // nft keeps what follows `to` in `addr`, also a netdev copy's device or a map of
            // devices (`{"dup": {"addr": "lo"}}`, checked with `nft -j list` on the kernel);
            // `dev` is the `device` clause of an ip or ip6 copy.
            if let Some(m) = map {
                o.insert("addr".into(), expr_json(m));
            }
            if via.is_none() && map.is_none() {
                o.insert("addr".into(), json!(dev));
            } else if !dev.is_empty() {
                o.insert("dev".into(), json!(dev));
            }
            json!({ "dup": o })
        }
        // nft 1.0.6's `fwd_stmt_json`: `{"fwd": {"dev": "w1"}}`, with `"family"` and `"addr"`
        // when a next hop is given (checked against `nft -j list` on the local kernel).
        Stmt::Fwd { dev, via, map, .. } => {
            use wasp_ruleset::model::DataType;
            let mut o = serde_json::Map::new();
            let map_gives_dev = map
                .as_ref()
                .is_some_and(|m| m.dtype() == DataType::IfaceIndex);
            match map {
                Some(m) if map_gives_dev => o.insert("dev".into(), expr_json(m)),
                _ => o.insert("dev".into(), json!(dev)),
            };
            let family = match (via, map) {
                (Some(a), _) => {
                    Some((if a.is_ipv4() { "ip" } else { "ip6" }, json!(a.to_string())))
                }
                (None, Some(m)) if !map_gives_dev => {
                    let f = if m.dtype() == DataType::Ipv6Addr {
                        "ip6"
                    } else {
                        "ip"
                    };
                    Some((f, expr_json(m)))
                }
                _ => None,
            };
            if let Some((f, addr)) = family {
                o.insert("family".into(), json!(f));
                o.insert("addr".into(), addr);
            }
            json!({ "fwd": o })
        }
        // nft 1.0.6's `payload_stmt_json` / `exthdr_stmt_json`.
        Stmt::PayloadSet { target, value, .. } => json!({"mangle": {
            "key": expr_json(target),
            "value": expr_json(value),
        }}),
        Stmt::OptReset { kind, .. } => {
            let name = wasp_ruleset::options::TCP_OPTIONS
                .iter()
                .find(|d| d.kind == *kind)
                .map_or_else(|| json!(kind), |d| json!(d.name));
            json!({"reset": {"tcp option": {"name": name}}})
        }
        // nft 1.0.6's `set_stmt_json`; a map statement has no JSON form there and is its text.
        Stmt::SetUpdate(u) if u.data.is_none() => {
            let key = expr_json(&u.key);
            let elem = match u.timeout_ms {
                Some(ms) => json!({"elem": {"val": key, "timeout": ms / 1000}}),
                None => key,
            };
            let mut o = json!({"op": u.op.word(), "elem": elem, "set": format!("@{}", u.set)});
            if !u.stmts.is_empty() {
                let stateless = ListFlags {
                    stateless: true,
                    ..*f
                };
                o["stmt"] = Json::Array(u.stmts.iter().map(|s| stmt_json(s, &stateless)).collect());
            }
            json!({ "set": o })
        }
        Stmt::SetUpdate(_) => json!(rule_text(
            &Rule {
                handle: 0,
                stmts: vec![s.clone()],
                comment: None,
                span: Default::default(),
            },
            f.stateless
        )),
        Stmt::FlowAdd { flowtable, .. } => {
            json!({"flow": {"op": "add", "flowtable": format!("@{flowtable}")}})
        }
        #[allow(unreachable_patterns)]
        other => {
            // Statements added to the model later: their nft text, under a wasp key.
            let r = Rule {
                handle: 0,
                stmts: vec![other.clone()],
                comment: None,
                span: Default::default(),
            };
            json!({ "wasp": rule_text(&r, f.stateless) })
        }
    }
}

/// A conntrack object's configuration as nft 1.0.6's `obj_print_json` adds it to `o`:
/// `"type"`, `"protocol"`, `"l3proto"` of a helper; `"protocol"`, `"l3proto"`, `"policy"` (the
/// states that differ from nft's defaults) of a timeout; `"protocol"`, `"dport"`, `"timeout"`
/// (ms), `"size"`, `"l3proto"` of an expectation.
fn ct_obj_json(o: &mut Json, c: &wasp_ruleset::model::CtObjConfig) {
    use wasp_ruleset::model::CtObjConfig as C;
    let proto = |p: u8| if p == 6 { "tcp" } else { "udp" };
    match c {
        C::Helper {
            helper,
            protocol,
            l3proto,
        } => {
            o["type"] = json!(helper);
            o["protocol"] = json!(proto(*protocol));
            o["l3proto"] = json!(l3proto.name());
        }
        C::Timeout {
            protocol,
            l3proto,
            policy,
        } => {
            let states = wasp_ruleset::model::ct_timeout_states(*protocol);
            let mut p = serde_json::Map::new();
            for (i, secs) in policy {
                if let Some((name, dflt)) = states.get(usize::from(*i))
                    && secs != dflt
                {
                    p.insert((*name).to_string(), json!(secs));
                }
            }
            o["protocol"] = json!(proto(*protocol));
            o["l3proto"] = json!(l3proto.name());
            o["policy"] = Json::Object(p);
        }
        C::Expectation {
            protocol,
            dport,
            timeout_ms,
            size,
            l3proto,
        } => {
            o["protocol"] = json!(proto(*protocol));
            o["dport"] = json!(dport);
            o["timeout"] = json!(timeout_ms);
            o["size"] = json!(size);
            o["l3proto"] = json!(l3proto.name());
        }
    }
}

/// A NAT statement as nft 1.0.6's `nat_stmt_json` (`{"snat": {...}}`, `{"masquerade": null}`).
fn nat_json(n: &NatStmt) -> Json {
    let mut o = serde_json::Map::new();
    if let Some(f) = n.family {
        o.insert("family".into(), json!(f.name()));
    }
    if let Some((lo, hi)) = n.addr {
        let addr = if !n.addr_range {
            json!(lo.to_string())
        } else {
            match prefix_len(lo, hi) {
                Some(len) => json!({"prefix": {"addr": lo.to_string(), "len": len}}),
                None => json!({"range": [lo.to_string(), hi.to_string()]}),
            }
        };
        o.insert("addr".into(), addr);
    }
    if let Some(t) = &n.target {
        o.insert("addr".into(), expr_json(t));
    }
    if n.prefix {
        o.insert("type_flags".into(), json!("prefix"));
    }
    if let Some((lo, hi)) = n.ports {
        let port = if n.port_range {
            json!({"range": [lo, hi]})
        } else {
            json!(lo)
        };
        o.insert("port".into(), port);
    }
    let flags: Vec<&str> = [
        (n.flags.random, "random"),
        (n.flags.fully_random, "fully-random"),
        (n.flags.persistent, "persistent"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    match flags.as_slice() {
        [] => {}
        [one] => {
            o.insert("flags".into(), json!(one));
        }
        many => {
            o.insert("flags".into(), json!(many));
        }
    }
    let body = if o.is_empty() {
        Json::Null
    } else {
        Json::Object(o)
    };
    json!({ n.kind.name(): body })
}

/// The prefix length when `lo..=hi` is one prefix (nft lists such a range as a prefix).
fn prefix_len(lo: std::net::IpAddr, hi: std::net::IpAddr) -> Option<u32> {
    let (lo, hi, bits) = match (lo, hi) {
        (std::net::IpAddr::V4(a), std::net::IpAddr::V4(b)) => {
            (u128::from(u32::from(a)), u128::from(u32::from(b)), 32)
        }
        (std::net::IpAddr::V6(a), std::net::IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128),
        _ => return None,
    };
    (0..=bits).find(|&n| {
        let host = bits - n;
        let span = if host >= 128 {
            u128::MAX
        } else {
            (1u128 << host) - 1
        };
        lo & span == 0 && hi == lo | span
    })
}

/// A byte count in the largest of `bytes`, `kbytes`, `mbytes` that divides it, as nft's
/// `get_rate` (`0` is `0 bytes`).
fn bytes_unit(n: u64) -> (u64, &'static str) {
    let units = ["bytes", "kbytes", "mbytes"];
    let (mut v, mut i) = (n, 0);
    while n != 0 && i + 1 < units.len() && v % 1024 == 0 {
        v /= 1024;
        i += 1;
    }
    (v, units[i])
}

/// `reject` as `nft -j` 1.0.6 lists it: always with its type, and the code by name where it
/// has one (`{"reject": {"type": "icmpx", "expr": "port-unreachable"}}`, `{"reject":
/// {"type": "tcp reset"}}`).
fn reject_json(kind: RejectKind) -> Json {
    let code = |dtype: DataType, c: u8| {
        let text = wasp_ruleset::datatypes::print_value(&Value {
            dtype,
            bytes: vec![c].into(),
            wildcard: false,
        });
        text.parse::<u64>().map_or(json!(text), |n| json!(n))
    };
    let (ty, expr) = match kind {
        RejectKind::TcpReset => return json!({"reject": {"type": "tcp reset"}}),
        RejectKind::Icmp(c) => ("icmp", code(DataType::IcmpCode, c)),
        RejectKind::Icmpv6(c) => ("icmpv6", code(DataType::Icmpv6Code, c)),
        RejectKind::Icmpx(c) => (
            "icmpx",
            ICMPX_CODES
                .iter()
                .find(|(_, n)| *n == c)
                .map_or(json!(c), |(name, _)| json!(name)),
        ),
    };
    json!({"reject": {"type": ty, "expr": expr}})
}

/// A limit's time unit by its length in seconds.
fn per_unit(secs: u64) -> &'static str {
    match secs {
        1 => "second",
        60 => "minute",
        3600 => "hour",
        86400 => "day",
        _ => "week",
    }
}

/// The fields of a limit object as `nft -j` 1.0.6 lists them: `rate`, `per`, `inv` when
/// over, then `burst` (packets; always) or `rate_unit` and, unless 0, `burst` and
/// `burst_unit` (bytes).
fn limit_obj_json(o: &mut Json, l: &Limit) {
    if l.bytes {
        let (rate, rate_unit) = bytes_unit(l.rate);
        o["rate"] = json!(rate);
        o["per"] = json!(per_unit(l.per_secs));
        if l.over {
            o["inv"] = json!(true);
        }
        o["rate_unit"] = json!(rate_unit);
        if l.burst != 0 {
            let (burst, burst_unit) = bytes_unit(u64::from(l.burst));
            o["burst"] = json!(burst);
            o["burst_unit"] = json!(burst_unit);
        }
    } else {
        o["rate"] = json!(l.rate);
        o["per"] = json!(per_unit(l.per_secs));
        if l.over {
            o["inv"] = json!(true);
        }
        o["burst"] = json!(l.burst);
    }
}

fn verdict_json(v: &Verdict) -> Json {
    match v {
        Verdict::Accept => json!({ "accept": null }),
        Verdict::Drop => json!({ "drop": null }),
        Verdict::Continue => json!({ "continue": null }),
        Verdict::Return => json!({ "return": null }),
        Verdict::Jump(c) => json!({"jump": {"target": c}}),
        Verdict::Goto(c) => json!({"goto": {"target": c}}),
    }
}

fn match_json(m: &Match) -> Json {
    // A bitmask compared without an operator is a flag test (`in`); a set lookup is `==`.
    let flag_test = m.op == RelOp::Implicit
        && matches!(m.right, Rhs::Key(_))
        && !matches!(m.left, Expr::Concat(_))
        && matches!(
            m.left.dtype(),
            DataType::TcpFlag | DataType::CtState | DataType::CtStatus
        );
    let op = match m.op {
        RelOp::Implicit if flag_test => "in",
        RelOp::Implicit | RelOp::Eq => "==",
        RelOp::Ne => "!=",
        RelOp::Lt => "<",
        RelOp::Gt => ">",
        RelOp::Le => "<=",
        RelOp::Ge => ">=",
    };
    let right = match &m.right {
        Rhs::Key(parts) if flag_test => match parts.as_slice() {
            [KeyPart::Value(v)] if v.dtype == DataType::TcpFlag => {
                let names: Vec<String> = wasp_ruleset::datatypes::tcp_flags_text(
                    v.bytes.first().copied().unwrap_or(0),
                    ",",
                )
                .split(',')
                .map(str::to_string)
                .collect();
                if names.len() == 1 {
                    json!(names[0])
                } else {
                    json!(names)
                }
            }
            // `ct state established,related`: the names of the bits, one or a list; no bit
            // is the number 0 (as `nft -j`).
            [KeyPart::Value(v)] if matches!(v.dtype, DataType::CtState | DataType::CtStatus) => {
                let bits = wasp_ruleset::datatypes::to_uint(v);
                if bits == 0 {
                    json!(0)
                } else {
                    let text = wasp_ruleset::datatypes::print_value(v);
                    let names: Vec<&str> = text.split(',').collect();
                    if names.len() == 1 {
                        json!(names[0])
                    } else {
                        json!(names)
                    }
                }
            }
            _ => key_json(parts),
        },
        // `ct status == snat,dnat`: several bits compared as a whole are `{"|": [names]}`.
        Rhs::Key(parts)
            if matches!(parts.as_slice(), [KeyPart::Value(v)]
                if matches!(v.dtype, DataType::CtState | DataType::CtStatus)
                    && wasp_ruleset::datatypes::print_value(v).contains(',')) =>
        {
            let text = match parts.as_slice() {
                [KeyPart::Value(v)] => wasp_ruleset::datatypes::print_value(v),
                _ => String::new(),
            };
            json!({ "|": text.split(',').collect::<Vec<_>>() })
        }
        Rhs::Key(parts) => key_json(parts),
        Rhs::Set(r) => set_ref_json(r),
    };
    json!({"match": {"op": op, "left": expr_json(&m.left), "right": right}})
}

fn set_ref_json(r: &SetRef) -> Json {
    match r {
        SetRef::Named(n) => json!(format!("@{n}")),
        SetRef::Anonymous(elems) => {
            let f = ListFlags::default();
            // In the order nft lists them (sorted by key).
            let sorted =
                wasp_ruleset::listed_elements(elems.iter().map(std::borrow::Cow::Borrowed), false);
            json!({ "set": sorted.iter().map(|e| elem_json(e, &f)).collect::<Vec<_>>() })
        }
    }
}

fn key_json(parts: &[KeyPart]) -> Json {
    let one = |p: &KeyPart| match p {
        KeyPart::Value(v) => value_json(v),
        KeyPart::Range(a, b) if a.bytes == b.bytes => value_json(a),
        KeyPart::Range(a, b) => json!({"range": [value_json(a), value_json(b)]}),
        KeyPart::Prefix(v, n) if u16::from(*n) == v.dtype.width_bits() => value_json(v),
        KeyPart::Prefix(v, n) => json!({"prefix": {"addr": value_json(v), "len": n}}),
    };
    match parts {
        // The catch-all element (`*`), as nft writes it.
        [] => json!("*"),
        [p] => one(p),
        many => json!({ "concat": many.iter().map(one).collect::<Vec<_>>() }),
    }
}

/// A constant: a number for integer types (`inet_service`, `mark`, plain integers), nft's
/// text otherwise (`"10.0.0.1"`, `"tcp"`, `"syn"`).
fn value_json(v: &Value) -> Json {
    match v.dtype {
        DataType::Integer(_) | DataType::InetService | DataType::Mark => {
            let n = wasp_ruleset::datatypes::to_uint(v);
            match u64::try_from(n) {
                Ok(x) => json!(x),
                Err(_) => json!(n.to_string()),
            }
        }
        // Strings are plain in JSON (`"eth0"`, `"17:00"`, `"default"`, not `"\"eth0\""`), as
        // nft 1.0.6 writes them: the quotes of the text form are no part of the value.
        _ => {
            let text = wasp_ruleset::datatypes::print_value(v);
            match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
                Some(inner) => json!(inner),
                None => json!(text),
            }
        }
    }
}

/// An expression in libnftables-json form.
pub fn expr_json(e: &Expr) -> Json {
    match e {
        Expr::Payload(p) => {
            let text = wasp_ruleset::print_expr(e);
            let (proto, field) = text.split_once(' ').unwrap_or((&text, ""));
            // IPv6 extension header fields are nft's `exthdr` expression.
            if let wasp_ruleset::model::PayloadBase::Ip6Ext(_) = p.desc().base {
                json!({"exthdr": {"name": proto, "field": field}})
            } else {
                json!({"payload": {"protocol": proto, "field": field}})
            }
        }
        Expr::Raw {
            offset_bits,
            len_bits,
            ..
        } => {
            let text = wasp_ruleset::print_expr(e);
            let base = text.trim_start_matches('@').split(',').next().unwrap_or("");
            json!({"payload": {"base": base, "offset": offset_bits, "len": len_bits}})
        }
        Expr::Ipsec(_) | Expr::Socket(_) | Expr::Osf { .. } => {
            // `ipsec in reqid`, `socket mark`, `osf ttl loose name`: the head word, then the
            // key (and the qualifiers nft's JSON names).
            let text = wasp_ruleset::print_expr(e);
            let mut words = text.split(' ');
            let head = words.next().unwrap_or("");
            let rest: Vec<&str> = words.collect();
            match e {
                Expr::Ipsec(k) => json!({ head: {
                    "key": rest.last().copied().unwrap_or(""),
                    "dir": if k.out { "out" } else { "in" },
                    "spnum": k.spnum,
                }}),
                Expr::Osf { ttl, .. } => {
                    let mut o = json!({"key": rest.last().copied().unwrap_or("")});
                    match ttl {
                        1 => o["ttl"] = json!("loose"),
                        2 => o["ttl"] = json!("skip"),
                        _ => {}
                    }
                    json!({ head: o })
                }
                _ => json!({ head: {"key": rest.join(" ")}}),
            }
        }
        Expr::Opt(o) => {
            let key = o.hdr.keyword();
            match (o.sel, o.desc()) {
                (
                    OptSel::Raw {
                        offset_bits,
                        len_bits,
                    },
                    _,
                ) => json!({ key: {
                    "base": o.kind, "offset": offset_bits, "len": len_bits}}),
                (OptSel::Field(i), Some(d)) => {
                    let field = d.fields.get(usize::from(i)).map_or("", |r| r.name);
                    json!({ key: {"name": d.name, "field": field}})
                }
                (_, Some(d)) => json!({ key: {"name": d.name}}),
                (_, None) => json!({ key: {"name": o.kind.to_string()}}),
            }
        }
        Expr::Meta(_) => {
            let text = wasp_ruleset::print_expr(e);
            let key = text.strip_prefix("meta ").unwrap_or(&text);
            json!({"meta": {"key": key}})
        }
        Expr::Ct(k) => json!({"ct": {"key": k.name()}}),
        // nft 1.0.6's `fib_expr_json`: one flag as a string, several as an array.
        Expr::Fib(f) => {
            let words = f.flag_words();
            let flags = match words.as_slice() {
                [one] => json!(one),
                many => json!(many),
            };
            json!({"fib": {"result": f.result.name(), "flags": flags}})
        }
        // nft 1.0.6's `rt_expr_json`: the next hop's family apart.
        Expr::Rt(k) => match k.name().split_once(' ') {
            Some((family, key)) => json!({"rt": {"key": key, "family": family}}),
            None => json!({"rt": {"key": k.name()}}),
        },
        Expr::ExthdrExists(_) => {
            let text = wasp_ruleset::print_expr(e);
            let name = text.strip_prefix("exthdr ").unwrap_or(&text);
            json!({"exthdr": {"name": name}})
        }
        Expr::Concat(parts) => json!({ "concat": parts.iter().map(expr_json).collect::<Vec<_>>() }),
        Expr::Binop { expr, op, value } => {
            json!({ op.symbol(): [expr_json(expr), value_json(value)] })
        }
        // nft 1.0.6's `numgen_expr_json`, `hash_expr_json`.
        Expr::Numgen {
            random,
            modulus,
            offset,
        } => {
            json!({"numgen": {"mode": if *random { "random" } else { "inc" }, "mod": modulus, "offset": offset}})
        }
        Expr::Jhash {
            expr,
            modulus,
            seed,
            offset,
        } => {
            let mut o = json!({"mod": modulus, "expr": expr_json(expr)});
            if let Some(s) = seed {
                o["seed"] = json!(s);
            }
            if *offset != 0 {
                o["offset"] = json!(offset);
            }
            json!({ "jhash": o })
        }
        Expr::Symhash { modulus, offset } => {
            let mut o = json!({ "mod": modulus });
            if *offset != 0 {
                o["offset"] = json!(offset);
            }
            json!({ "symhash": o })
        }
        Expr::Const(v) => value_json(v),
        Expr::Map { key, map, .. } => {
            json!({"map": {"key": expr_json(key), "data": set_ref_json(map)}})
        }
    }
}

/// Read the words after `list` as nft does (`ruleset [FAMILY]`, `tables [FAMILY]`, `set
/// [FAMILY] TABLE NAME`, `counters [table [FAMILY] TABLE]`, ...).
///
/// # Errors
/// A message naming what was expected.
pub fn parse_list_words(words: &[&str], flags: ListFlags) -> Result<ListRequest, String> {
    let usage = "expected `ruleset`, `tables`, `chains`, `sets`, `maps`, `counters`, `quotas`, `limits`, `flowtables`, `set`, `map`, `table`, `chain`, `counter`, `quota` or `limit` after `list`";
    let (&what, rest) = words.split_first().ok_or(usage)?;
    // `list counter|quota|limit [FAMILY] TABLE NAME`: one named object.
    let one_object = matches!(what, "counter" | "quota" | "limit");
    let what = match what {
        "counter" => ListWhat::Counters,
        "quota" => ListWhat::Quotas,
        "limit" => ListWhat::Limits,
        "ruleset" => ListWhat::Ruleset,
        "tables" => ListWhat::Tables,
        "chains" => ListWhat::Chains,
        "sets" => ListWhat::Sets,
        "maps" => ListWhat::Maps,
        "counters" => ListWhat::Counters,
        "quotas" => ListWhat::Quotas,
        "limits" => ListWhat::Limits,
        "flowtables" => ListWhat::Flowtables,
        "set" => ListWhat::Set,
        "map" => ListWhat::Map,
        "table" => ListWhat::Table,
        "chain" => ListWhat::Chain,
        _ => return Err(usage.to_string()),
    };
    let mut req = ListRequest {
        what,
        flags,
        ..ListRequest::default()
    };
    let mut rest = rest;
    if objects(what) && !one_object && rest.first() == Some(&"table") {
        rest = &rest[1..];
        if rest.is_empty() {
            return Err(format!(
                "expected a table name after `list {} table`",
                words[0]
            ));
        }
    }
    if let Some(&f) = rest.first()
        && parse_family(f).is_some()
        && (rest.len() > 1 || !(what == ListWhat::Table || objects(what)) || one_object)
    {
        req.family = Some(f.to_string());
        rest = &rest[1..];
    }
    let needs: &[&str] = match what {
        _ if one_object => &["a table name", "a name"],
        ListWhat::Set | ListWhat::Map | ListWhat::Chain => &["a table name", "a name"],
        ListWhat::Table => &["a table name"],
        _ => &[],
    };
    if objects(what) && !one_object {
        if let Some(&t) = rest.first() {
            req.table = Some(t.to_string());
            rest = &rest[1..];
        }
    } else {
        for (i, need) in needs.iter().enumerate() {
            let Some(&w) = rest.get(i) else {
                return Err(format!("expected {need} after `list {}`", words.join(" ")));
            };
            if i == 0 {
                req.table = Some(w.to_string());
            } else {
                req.name = Some(w.to_string());
            }
        }
        rest = &rest[needs.len()..];
    }
    if let Some(extra) = rest.first() {
        return Err(format!(
            "unexpected `{extra}` after `list {}`",
            words.join(" ")
        ));
    }
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `nft -j list set` (nft 1.0.6, kernel 6.18) lists elements as the text listing does:
    /// sorted by key, a concatenation with ranges in insertion order, a prefix masked.
    #[test]
    fn json_elements_come_in_nfts_order_and_form() {
        let rs = wasp_ruleset::parse_str(
            "table ip t {\n set s { type ipv4_addr; elements = { 10.0.0.9, 10.0.0.1, 10.0.0.5 } }\n set c { type ipv4_addr . inet_service; flags interval; elements = { 10.0.0.9 . 80, 10.0.0.1/24 . 1-5 } }\n}\n",
            "j.nft",
        )
        .unwrap();
        let t = &rs.tables[0];
        let f = ListFlags::default();
        assert_eq!(
            set_json(t, &t.sets[0], &f)["set"]["elem"],
            json!(["10.0.0.1", "10.0.0.5", "10.0.0.9"])
        );
        assert_eq!(
            set_json(t, &t.sets[1], &f)["set"]["elem"],
            json!([{"concat": ["10.0.0.9", 80]}, {"concat": [{"prefix": {"addr": "10.0.0.0", "len": 24}}, {"range": [1, 5]}]}])
        );
    }
}
