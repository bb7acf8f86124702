//! What a change did to the ruleset, as nft reports it: the lines of `nft -e` (echo) and
//! `nft monitor`, and their JSON forms (`nft -e -j`, `nft -j monitor`).
//!
//! [`diff`] compares the ruleset before and after a transaction and gives its changes in the
//! order the kernel notifies them: deletions first, then additions by handle within each table
//! (the kernel gives handles in the order the batch makes objects), each new set followed by
//! its elements, one element a line. The text follows nft 1.0.6's echo and monitor output
//! (checked against the kernel): a set or named object is written on one line with a trailing
//! space; a rule in the middle of its chain carries the previous rule's handle as its
//! position (`add rule ip t c handle 2 drop`), as the kernel's notification does. A rule
//! that replaced another (same handle, other statements) is a deletion and an addition, as
//! the kernel reports `replace rule`.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde_json::{Value as Json, json};
use wasp_ruleset::model::{
    Chain, CounterObj, FlowtableDecl, LimitObj, QuotaObj, Rule, Ruleset, SetDecl, SetElem, Stmt,
    Table,
};
use wasp_ruleset::{
    PrintOptions, element_key_text, listed_elements, print_chain, print_counter, print_element,
    print_flowtable, print_limit, print_quota, print_rule, print_set,
};

use crate::listing;
use crate::proto::ListFlags;

/// What a change did to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// `add` (also `create`, and the new half of `replace`).
    Add,
    /// `insert`: a rule placed by `insert rule`.
    Insert,
    /// `delete` (also `destroy`, `flush`, and the old half of `replace`).
    Delete,
}

impl Verb {
    fn word(self) -> &'static str {
        match self {
            Verb::Add => "add",
            Verb::Insert => "insert",
            Verb::Delete => "delete",
        }
    }
}

/// The object a change touched, as it is after an addition or was before a deletion.
#[derive(Debug, Clone)]
pub enum Object {
    /// The table itself.
    Table,
    /// A chain (without its rules).
    Chain(Chain),
    /// A named set or map (without its elements).
    Set(SetDecl),
    /// One element of a named set or map.
    Element {
        /// The set (without its elements).
        set: SetDecl,
        /// The element.
        elem: Box<SetElem>,
    },
    /// A rule of `chain`, with the handle of the rule before it (`None` when first).
    Rule {
        /// The chain's name.
        chain: String,
        /// The rule.
        rule: Rule,
        /// The handle of the rule before it, for a rule neither first nor last in its chain.
        position: Option<u64>,
    },
    /// A counter object.
    Counter(CounterObj),
    /// A quota object.
    Quota(QuotaObj),
    /// A limit object.
    Limit(LimitObj),
    /// A flowtable.
    Flowtable(FlowtableDecl),
    /// An anonymous set, by the kernel's name (`__set0`), which goes with its rule.
    AnonymousSet {
        /// The kernel's name.
        name: String,
        /// Its handle (taken just before its rule's).
        handle: u64,
    },
}

/// One change: what happened to which object of which table.
#[derive(Debug, Clone)]
pub struct Change {
    /// What happened.
    pub verb: Verb,
    /// The table (its name, family and handle; its object lists are empty).
    pub table: Table,
    /// The object.
    pub object: Object,
}

fn same_table(a: &Table, b: &Table) -> bool {
    a.family == b.family && a.name == b.name && a.handle == b.handle
}

/// The rules of chain `c` by handle (none without a chain): a change's rules are compared
/// by handle, once each.
fn rules_by_handle(c: Option<&Chain>) -> HashMap<u64, &Rule> {
    c.map(|c| c.rules.iter().map(|r| (r.handle, r)).collect())
        .unwrap_or_default()
}

fn chain_shell(c: &Chain) -> Chain {
    Chain {
        name: c.name.clone(),
        handle: c.handle,
        base: c.base.clone(),
        rules: Vec::new(),
        comment: c.comment.clone(),
        span: c.span,
    }
}

/// The changes that turn `before` into `after`, in the kernel's notification order (see the
/// module docs). Costs a walk of both rulesets; elements are compared by their key.
/// `inserted`: the (table handle, rule handle) of the rules an `insert rule` placed
/// ([`wasp_ruleset::apply_batch_noting_inserts`]), which nft reports as `insert rule`.
pub fn diff(before: &Ruleset, after: &Ruleset, inserted: &[(u64, u64)]) -> Vec<Change> {
    let mut out = Vec::new();
    for b in &before.tables {
        match after.tables.iter().find(|a| same_table(a, b)) {
            None => deleted_table(b, &mut out),
            Some(a) => deleted_in(b, a, &mut out),
        }
    }
    for a in &after.tables {
        let b = before.tables.iter().find(|b| same_table(a, b));
        added_in(b, a, inserted, &mut out);
    }
    out
}

/// The changes of element commands applied in place: `(set, op)` pairs in the order applied.
pub fn element_changes<'r>(
    ruleset: &Ruleset,
    ops: impl Iterator<Item = (usize, usize, &'r wasp_ruleset::ElementOp)>,
) -> Vec<Change> {
    let mut out = Vec::new();
    for (ti, si, op) in ops {
        let Some(t) = ruleset.tables.get(ti) else {
            continue;
        };
        let Some(s) = t.sets.get(si) else {
            continue;
        };
        let (verb, elem) = match op {
            wasp_ruleset::ElementOp::Add(e) => (Verb::Add, e),
            wasp_ruleset::ElementOp::Delete(e) => (Verb::Delete, e),
            wasp_ruleset::ElementOp::Flush => continue,
        };
        for elem in listed_elements([Cow::Borrowed(elem)], s.flags.interval) {
            out.push(Change {
                verb,
                table: t.header(),
                object: Object::Element {
                    set: s.without_elements(),
                    elem: Box::new(elem),
                },
            });
        }
    }
    out
}

/// A whole table went: each chain's rules, its sets, flowtables, named objects, chains, then
/// itself (the kernel's order when it flushes a table).
fn deleted_table(t: &Table, out: &mut Vec<Change>) {
    let mut anon = AnonNames::new(t);
    for c in &t.chains {
        for r in &c.rules {
            deleted_rule(t, c, r, &mut anon, out);
        }
    }
    let mut push = |object| {
        out.push(Change {
            verb: Verb::Delete,
            table: t.header(),
            object,
        })
    };
    for s in &t.sets {
        push(Object::Set(s.without_elements()));
    }
    for f in &t.flowtables {
        push(Object::Flowtable(f.clone()));
    }
    objects(t, &mut |_, o| push(o));
    for c in &t.chains {
        push(Object::Chain(chain_shell(c)));
    }
    push(Object::Table);
}

/// The kernel's names of a table's anonymous sets (`__set0`, `__set1`, ...): the lowest free
/// number when each was made, taken here as their order by rule handle (exact while none of
/// the table's anonymous sets was deleted before a later one was made).
struct AnonNames(Vec<(u64, usize)>);

impl AnonNames {
    fn new(t: &Table) -> Self {
        let mut v: Vec<(u64, usize)> = t
            .chains
            .iter()
            .flat_map(|c| c.rules.iter())
            .map(|r| (r.handle, anonymous_sets(r)))
            .filter(|(_, n)| *n > 0)
            .collect();
        v.sort_unstable();
        AnonNames(v)
    }

    /// The names and handles of rule `handle`'s anonymous sets (the kernel numbers them
    /// just before the rule: `n` sets take handles `handle - n ..`).
    fn of(&self, handle: u64) -> Vec<(String, u64)> {
        let mut first = 0;
        for (h, n) in &self.0 {
            if *h == handle {
                let base = handle.saturating_sub(*n as u64);
                return (0..*n)
                    .map(|i| (format!("__set{}", first + i), base + i as u64))
                    .collect();
            }
            first += n;
        }
        Vec::new()
    }
}

fn anonymous_sets(r: &Rule) -> usize {
    r.stmts.iter().filter(|s| uses_anonymous_set(s)).count()
}

/// Rule `r` of chain `c` went, and with it its anonymous sets (`delete set ip t __set0`).
fn deleted_rule(t: &Table, c: &Chain, r: &Rule, anon: &mut AnonNames, out: &mut Vec<Change>) {
    out.push(Change {
        verb: Verb::Delete,
        table: t.header(),
        object: Object::Rule {
            chain: c.name.clone(),
            rule: r.clone(),
            position: None,
        },
    });
    for (name, handle) in anon.of(r.handle) {
        out.push(Change {
            verb: Verb::Delete,
            table: t.header(),
            object: Object::AnonymousSet { name, handle },
        });
    }
}

/// Each named object of `t` with its handle, in handle order (the kernel's object list).
fn objects(t: &Table, f: &mut dyn FnMut(u64, Object)) {
    let mut all: Vec<(u64, Object)> = Vec::new();
    for c in &t.counters {
        all.push((c.handle, Object::Counter(c.clone())));
    }
    for q in &t.quotas {
        all.push((q.handle, Object::Quota(q.clone())));
    }
    for l in &t.limits {
        all.push((l.handle, Object::Limit(l.clone())));
    }
    all.sort_by_key(|(h, _)| *h);
    for (h, o) in all {
        f(h, o);
    }
}

/// What went from table `b`, which `a` continues: rules, elements, sets, flowtables, named
/// objects, chains.
fn deleted_in(b: &Table, a: &Table, out: &mut Vec<Change>) {
    let mut anon = AnonNames::new(b);
    for c in &b.chains {
        let now = rules_by_handle(a.chains.iter().find(|x| x.handle == c.handle));
        for r in &c.rules {
            if now.get(&r.handle) != Some(&r) {
                deleted_rule(b, c, r, &mut anon, out);
            }
        }
    }
    let mut push = |object| {
        out.push(Change {
            verb: Verb::Delete,
            table: b.header(),
            object,
        })
    };
    for s in &b.sets {
        if let Some(n) = a.sets.iter().find(|x| x.handle == s.handle)
            && n.elements != s.elements
        {
            let keys: HashSet<String> = n.elements.iter().map(|e| element_key_text(&e)).collect();
            let gone = s
                .elements
                .iter()
                .filter(|e| !keys.contains(&element_key_text(e)));
            for elem in listed_elements(gone, s.flags.interval) {
                push(Object::Element {
                    set: s.without_elements(),
                    elem: Box::new(elem),
                });
            }
        }
    }
    for s in &b.sets {
        if !a.sets.iter().any(|x| x.handle == s.handle) {
            push(Object::Set(s.without_elements()));
        }
    }
    for f in &b.flowtables {
        if !a.flowtables.iter().any(|x| x.handle == f.handle) {
            push(Object::Flowtable(f.clone()));
        }
    }
    let mut kept = HashSet::new();
    objects(a, &mut |h, _| {
        kept.insert(h);
    });
    objects(b, &mut |h, o| {
        if !kept.contains(&h) {
            push(o);
        }
    });
    for c in &b.chains {
        if !a.chains.iter().any(|x| x.handle == c.handle) {
            push(Object::Chain(chain_shell(c)));
        }
    }
}

/// What came into table `a` (new when `b` is `None`), by handle; each new set with its
/// elements, then elements added to sets that were there.
fn added_in(b: Option<&Table>, a: &Table, inserted: &[(u64, u64)], out: &mut Vec<Change>) {
    let mut new: Vec<(u64, Verb, Vec<Object>)> = Vec::new();
    if b.is_none() {
        new.push((0, Verb::Add, vec![Object::Table]));
    }
    let old_chain = |h: u64| b.and_then(|b| b.chains.iter().find(|c| c.handle == h));
    let old_set = |h: u64| b.and_then(|b| b.sets.iter().find(|s| s.handle == h));
    for c in &a.chains {
        let was = old_chain(c.handle);
        if was.is_none() {
            new.push((c.handle, Verb::Add, vec![Object::Chain(chain_shell(c))]));
        }
        let before = rules_by_handle(was);
        for (i, r) in c.rules.iter().enumerate() {
            if before.get(&r.handle) == Some(&r) {
                continue;
            }
            // The kernel's notification names the previous rule of one in the middle
            // (`nf_tables_rule_notify`: neither first nor last of the chain at commit).
            let position = (i > 0 && i + 1 < c.rules.len()).then(|| c.rules[i - 1].handle);
            let insert = inserted.contains(&(a.handle, r.handle));
            new.push((
                r.handle,
                if insert { Verb::Insert } else { Verb::Add },
                vec![Object::Rule {
                    chain: c.name.clone(),
                    rule: r.clone(),
                    position,
                }],
            ));
        }
    }
    let mut later = Vec::new();
    for s in &a.sets {
        let shell_set = s.without_elements();
        let elems = |from: Vec<Cow<'_, SetElem>>| {
            listed_elements(from, s.flags.interval)
                .into_iter()
                .map(|elem| Object::Element {
                    set: shell_set.clone(),
                    elem: Box::new(elem),
                })
                .collect::<Vec<_>>()
        };
        match old_set(s.handle) {
            None => {
                let mut objs = vec![Object::Set(shell_set.clone())];
                objs.extend(elems(s.elements.iter().collect()));
                new.push((s.handle, Verb::Add, objs));
            }
            Some(o) if o.elements == s.elements => {}
            Some(o) => {
                let keys: HashSet<String> =
                    o.elements.iter().map(|e| element_key_text(&e)).collect();
                let added: Vec<Cow<'_, SetElem>> = s
                    .elements
                    .iter()
                    .filter(|e| !keys.contains(&element_key_text(e)))
                    .collect();
                later.extend(elems(added));
            }
        }
    }
    for f in &a.flowtables {
        if b.is_none_or(|b| !b.flowtables.iter().any(|x| x.handle == f.handle)) {
            new.push((f.handle, Verb::Add, vec![Object::Flowtable(f.clone())]));
        }
    }
    let mut had = HashSet::new();
    if let Some(b) = b {
        objects(b, &mut |h, _| {
            had.insert(h);
        });
    }
    objects(a, &mut |h, o| {
        if !had.contains(&h) {
            new.push((h, Verb::Add, vec![o]));
        }
    });
    new.sort_by_key(|(h, _, _)| *h);
    for (_, verb, objs) in new {
        for object in objs {
            out.push(Change {
                verb,
                table: a.header(),
                object,
            });
        }
    }
    for object in later {
        out.push(Change {
            verb: Verb::Add,
            table: a.header(),
            object,
        });
    }
}

/// An object listing (`\tcounter k { # handle 6\n\t\tpackets 0 bytes 0\n\t}\n`) as echo and
/// monitor write it on one line: `{ # handle 6 packets 0 bytes 0 } `; `sep` follows each
/// inner line (`"; "` for sets, `" "` for named objects).
fn one_line(listing: &str, handle: Option<u64>, sep: &str) -> String {
    let mut s = String::from("{ ");
    if let Some(h) = handle {
        s.push_str(&format!("# handle {h} "));
    }
    let lines: Vec<&str> = listing.lines().map(str::trim).collect();
    for l in lines.iter().skip(1).take(lines.len().saturating_sub(2)) {
        if l.is_empty() {
            continue;
        }
        s.push_str(l);
        s.push_str(sep);
    }
    s.push_str("} ");
    s
}

impl Change {
    /// The line nft prints for this change (`handles`: with `# handle N`, as `nft -e -a`;
    /// `nft monitor` and `nft -e` show none).
    pub fn text(&self, handles: bool) -> String {
        let t = &self.table;
        let head = format!("{} {}", t.family.name(), t.name);
        let verb = self.verb.word();
        let plain = PrintOptions::default();
        let tail = |h: u64| {
            if handles {
                format!(" # handle {h}")
            } else {
                String::new()
            }
        };
        let hid = |h: u64| handles.then_some(h);
        match (&self.object, self.verb) {
            (Object::Table, _) => format!("{verb} table {head}{}", tail(t.handle)),
            (Object::Chain(c), Verb::Delete) => format!("delete chain {head} {}", c.name),
            (Object::Chain(c), _) => {
                let body = match &c.base {
                    Some(_) => {
                        let l = print_chain(t.family, c, &plain, false);
                        let inner: Vec<&str> = l
                            .lines()
                            .map(str::trim)
                            .filter(|x| !x.is_empty() && !x.starts_with("chain ") && *x != "}")
                            .collect();
                        format!(" {{ {} }}", inner.join(" "))
                    }
                    None => String::new(),
                };
                format!("{verb} chain {head} {}{body}{}", c.name, tail(c.handle))
            }
            // The kernel reports a deleted map as a set.
            (Object::Set(s), Verb::Delete) => format!("delete set {head} {}", s.name),
            (Object::AnonymousSet { name, .. }, _) => format!("{verb} set {head} {name}"),
            (Object::Set(s), _) => format!(
                "{verb} {} {head} {} {}",
                set_word(s),
                s.name,
                one_line(&print_set(s, &plain), hid(s.handle), "; ")
            ),
            (Object::Element { set, elem }, _) => format!(
                "{verb} element {head} {} {{ {} }}",
                set.name,
                print_element(elem, &plain)
            ),
            (Object::Rule { chain, rule, .. }, Verb::Delete) => {
                format!("delete rule {head} {chain} handle {}", rule.handle)
            }
            (
                Object::Rule {
                    chain,
                    rule,
                    position,
                },
                _,
            ) => {
                let pos = match position {
                    Some(p) => format!("handle {p} "),
                    None => String::new(),
                };
                format!(
                    "{verb} rule {head} {chain} {pos}{}{}",
                    print_rule(rule, &plain),
                    tail(rule.handle)
                )
            }
            (Object::Counter(c), Verb::Delete) => format!("delete counter {head} {}", c.name),
            (Object::Counter(c), _) => format!(
                "{verb} counter {head} {} {}",
                c.name,
                one_line(&print_counter(c, &plain), hid(c.handle), " ")
            ),
            (Object::Quota(q), Verb::Delete) => format!("delete quota {head} {}", q.name),
            (Object::Quota(q), _) => format!(
                "{verb} quota {head} {} {}",
                q.name,
                one_line(&print_quota(q, &plain), hid(q.handle), " ")
            ),
            (Object::Limit(l), Verb::Delete) => format!("delete limit {head} {}", l.name),
            (Object::Limit(l), _) => format!(
                "{verb} limit {head} {} {}",
                l.name,
                one_line(&print_limit(l, &plain), hid(l.handle), " ")
            ),
            (Object::Flowtable(f), Verb::Delete) => {
                format!("delete flowtable {head} {}", f.name)
            }
            (Object::Flowtable(f), _) => format!(
                "{verb} flowtable {head} {} {}",
                f.name,
                one_line(&print_flowtable(f, &plain), hid(f.handle), "; ")
            ),
        }
    }

    /// The change as one libnftables JSON command (`{"add": {"rule": {...}}}`), as `nft -j
    /// monitor` prints it and `nft -e -j` lists it in its `nftables` array. A deletion is
    /// what nft 1.0.6 makes of the kernel's deletion notice, which carries little but names
    /// and handles: a set or map is a `set` of type `invalid`, a chain has no hook, a quota
    /// no bytes, a limit rate 0 per `error`, and a rule loses its matches against anonymous
    /// sets (gone with it).
    pub fn json(&self) -> Json {
        let t = &self.table;
        let f = ListFlags::default();
        let fam = t.family.name();
        let obj = match (&self.object, self.verb) {
            (Object::Table, _) => {
                json!({"table": {"family": fam, "name": t.name, "handle": t.handle}})
            }
            (Object::Chain(c), Verb::Delete) => json!({"chain": {"family": fam,
                "table": t.name, "name": c.name, "handle": c.handle}}),
            (Object::Chain(c), _) => listing::chain_json(t, c),
            (Object::Set(s), Verb::Delete) => deleted_set_json(t, &s.name, s.handle),
            (Object::AnonymousSet { name, handle }, _) => deleted_set_json(t, name, *handle),
            (Object::Set(s), _) => listing::set_json(t, s, &f),
            (Object::Element { set, elem }, _) => json!({"element": {
                "family": fam, "table": t.name, "name": set.name,
                "elem": {"set": [listing::elem_json(elem, &f)]}}}),
            (Object::Rule { chain, rule, .. }, verb) => {
                let c = Chain {
                    name: chain.clone(),
                    handle: 0,
                    base: None,
                    rules: Vec::new(),
                    comment: None,
                    span: rule.span,
                };
                let mut rule = rule.clone();
                if verb == Verb::Delete {
                    rule.stmts.retain(|s| !uses_anonymous_set(s));
                }
                listing::rule_json(t, &c, &rule, &f)
            }
            (Object::Counter(c), _) => listing::counter_json(t, c),
            (Object::Quota(q), Verb::Delete) => json!({"quota": {"family": fam,
                "name": q.name, "table": t.name, "handle": q.handle, "bytes": 0, "used": 0,
                "inv": q.quota.over}}),
            (Object::Quota(q), _) => listing::quota_json(t, q, &f),
            (Object::Limit(l), Verb::Delete) => json!({"limit": {"family": fam,
                "name": l.name, "table": t.name, "handle": l.handle, "rate": 0,
                "per": "error"}}),
            (Object::Limit(l), _) => listing::limit_json(t, l),
            (Object::Flowtable(ft), _) => listing::flowtable_json(t, ft),
        };
        json!({ self.verb.word(): obj })
    }
}

/// A deleted set or map as nft 1.0.6 prints the kernel's notice in JSON.
fn deleted_set_json(t: &Table, name: &str, handle: u64) -> Json {
    json!({"set": {"family": t.family.name(), "name": name, "table": t.name,
        "type": "invalid", "handle": handle}})
}

/// Whether statement `s` looks up an anonymous set or map written in the rule.
fn uses_anonymous_set(s: &Stmt) -> bool {
    let mut r = Rule {
        handle: 0,
        stmts: vec![s.clone()],
        comment: None,
        span: Default::default(),
    };
    r.anonymous_sets_mut().next().is_some()
}

fn set_word(s: &SetDecl) -> &'static str {
    if s.is_map { "map" } else { "set" }
}

/// Echo lines for `changes` as `nft -e` prints them (`handles`: `-a`), ending with nft's
/// `# new generation G by process PID (wasp)` line; or, with `json`, one `{"nftables": [...]}`
/// line, as `nft -e -j`. Like nft's echo, it shows what the batch made: deletions only as
/// the first half of a replaced rule; a batch that made nothing echoes nothing.
pub fn echo(changes: &[Change], handles: bool, json: bool, generation: u64) -> Vec<String> {
    let made = |h: u64| {
        changes.iter().any(|c| {
            c.verb != Verb::Delete
                && matches!(&c.object, Object::Rule { rule, .. } if rule.handle == h)
        })
    };
    let changes: Vec<&Change> = changes
        .iter()
        .filter(|c| match (&c.object, c.verb) {
            (Object::Rule { rule, .. }, Verb::Delete) => made(rule.handle),
            (_, Verb::Delete) => false,
            _ => true,
        })
        .collect();
    if json {
        let all: Vec<Json> = changes.iter().map(|c| c.json()).collect();
        return vec![json!({ "nftables": all }).to_string()];
    }
    let mut lines: Vec<String> = changes.iter().map(|c| c.text(handles)).collect();
    if lines.is_empty() {
        // nft prints no generation line after a batch that only took things away.
        return lines;
    }
    lines.push(format!(
        "# new generation {generation} by process {} (wasp)",
        std::process::id()
    ));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(before: &Ruleset, batch: &str, handles: bool) -> Vec<String> {
        let mut shadows = wasp_ruleset::SetShadows::default();
        let (after, inserted) =
            wasp_ruleset::apply_batch_noting_inserts(before, batch, "b.nft", &mut shadows).unwrap();
        diff(before, &after, &inserted)
            .iter()
            .map(|c| c.text(handles))
            .collect()
    }

    #[test]
    fn adds_inserts_replaces_and_deletes_read_as_nft_reports_them() {
        let base = wasp_ruleset::parse_str(
            "table ip t {\n\tchain c {\n\t\tip daddr { 1.1.1.1, 2.2.2.2 } accept\n\t\tdrop\n\t}\n}\n",
            "base.nft",
        )
        .unwrap();
        // Handles: chain 1, anonymous set 2, rules 3 and 4.
        assert_eq!(
            lines(
                &base,
                "insert rule ip t c position 4 tcp dport 1 drop\nadd counter ip t k\n",
                true
            ),
            [
                "insert rule ip t c handle 3 tcp dport 1 drop # handle 5",
                "add counter ip t k { # handle 6 packets 0 bytes 0 } ",
            ]
        );
        assert_eq!(
            lines(&base, "replace rule ip t c handle 4 accept\n", false),
            ["delete rule ip t c handle 4", "add rule ip t c accept"]
        );
        assert_eq!(
            lines(&base, "delete table ip t\n", false),
            [
                "delete rule ip t c handle 3",
                "delete set ip t __set0",
                "delete rule ip t c handle 4",
                "delete chain ip t c",
                "delete table ip t",
            ]
        );
        let mut shadows = wasp_ruleset::SetShadows::default();
        let (after, _) = wasp_ruleset::apply_batch_noting_inserts(
            &base,
            "delete rule ip t c handle 3\n",
            "b.nft",
            &mut shadows,
        )
        .unwrap();
        // The deletion's JSON: the anonymous set's match is gone with it; the set's own
        // notice names its handle.
        let json: Vec<String> = diff(&base, &after, &[])
            .iter()
            .map(|c| c.json().to_string())
            .collect();
        assert_eq!(
            json,
            [
                r#"{"delete":{"rule":{"chain":"c","expr":[{"accept":null}],"family":"ip","handle":3,"table":"t"}}}"#,
                r#"{"delete":{"set":{"family":"ip","handle":2,"name":"__set0","table":"t","type":"invalid"}}}"#,
            ]
        );
    }

    #[test]
    fn echo_shows_what_was_made() {
        let base = wasp_ruleset::parse_str(
            "table ip t {\n\tset s {\n\t\ttype ipv4_addr\n\t}\n\tchain c {\n\t}\n}\n",
            "b.nft",
        )
        .unwrap();
        let echo_of = |batch: &str| {
            let mut shadows = wasp_ruleset::SetShadows::default();
            let (after, inserted) =
                wasp_ruleset::apply_batch_noting_inserts(&base, batch, "b.nft", &mut shadows)
                    .unwrap();
            echo(&diff(&base, &after, &inserted), false, false, 7)
        };
        assert_eq!(
            echo_of("add rule ip t c drop\ndelete set ip t s\n"),
            [
                "add rule ip t c drop".to_string(),
                format!(
                    "# new generation 7 by process {} (wasp)",
                    std::process::id()
                ),
            ]
        );
        assert!(echo_of("delete set ip t s\n").is_empty());
    }
}
