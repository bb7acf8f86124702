//! Applying a parsed block to its table, with handles numbered as the kernel numbers them.
//!
//! Facts (nft 1.0.6 + kernel 6.x, `nft -a list ruleset` after `nft -f` in a fresh netns):
//! - table handles count from 1 per network namespace, in creation order;
//! - each table has one counter shared by chains, sets and rules, starting at 1;
//! - nft expands a `table { ... }` block into: its new chains, then its new sets, then the
//!   rules chain by chain (each anonymous set, e.g. `{ 22, 80 }` or a `vmap { ... }`, takes a
//!   handle just before its rule); a one-element anonymous set without data is turned into a
//!   plain comparison and takes none;
//! - a chain or set declared again (a second block, or twice in one block) takes no new
//!   handle.

use super::{PResult, Parser};
use crate::model::{
    BaseChain, Chain, ChainType, CounterObj, CtObj, DataType, ElemData, Expr, FlowtableDecl, Hook,
    LimitObj, NatKind, Policy, QuotaObj, Rhs, Rule, SetDecl, SetRef, Span, Stmt, Table, Verdict,
};

/// A reference a rule makes that is checked once the block is applied.
#[derive(Debug, Clone)]
pub(crate) enum Ref {
    /// `jump NAME` / `goto NAME` (also inside verdict maps).
    Chain {
        /// Target.
        name: String,
        /// Where.
        span: Span,
    },
    /// `@NAME` used with an expression of these key types; `map` is `Some(data)` for a
    /// `vmap @m` (data `verdict`).
    Set {
        /// Set name.
        name: String,
        /// Where.
        span: Span,
        /// Key types of the expression.
        key: Vec<DataType>,
        /// Text of the expression (for messages).
        expr_text: String,
        /// `Some(DataType::Verdict)` for `vmap @m`.
        map_data: Option<DataType>,
    },
    /// `add|update|delete @NAME { KEY [: DATA] }`: as [`Ref::Set`] (`map_data` the data type
    /// of a map's element), and a set becomes `flags dynamic` (nft's stmt_evaluate_set; a map
    /// does not), both with the kernel's default size 65535 (nft_dynset_init) when they have
    /// none. The kernel
    /// cannot update an interval set from the packet path.
    SetUpdate {
        /// Set name.
        name: String,
        /// Where.
        span: Span,
        /// Key types of the expression.
        key: Vec<DataType>,
        /// Text of the expression (for messages).
        expr_text: String,
        /// The data type given for a map's element.
        map_data: Option<DataType>,
    },
    /// `flow add @NAME`: the flowtable must exist in the table (the kernel answers ENOENT).
    Flowtable {
        /// Flowtable name.
        name: String,
        /// The statement.
        span: Span,
    },
}

/// One chain as a block declares it.
#[derive(Debug, Clone)]
pub(crate) struct ChainDecl {
    pub name: String,
    pub span: Span,
    pub base: Option<BaseChain>,
    pub base_span: Span,
    pub policy: Option<(Policy, Span)>,
    pub comment: Option<String>,
    pub rules: Vec<Rule>,
    /// Where the rules go in the chain (an index into its rules: `insert rule` 0, `add rule
    /// ... position H` after rule H); `None`: last.
    pub at: Option<usize>,
    /// `replace rule ... handle H`: the new rule keeps handle H (the kernel's replace takes no
    /// new handle).
    pub keep_handle: Option<u64>,
}

impl ChainDecl {
    pub fn new(name: String, span: Span) -> Self {
        ChainDecl {
            name,
            span,
            base: None,
            base_span: span,
            policy: None,
            comment: None,
            rules: Vec::new(),
            at: None,
            keep_handle: None,
        }
    }
}

/// What one command adds to a table.
#[derive(Debug, Clone, Default)]
pub(crate) struct Block {
    pub chains: Vec<ChainDecl>,
    pub sets: Vec<SetDecl>,
    /// Named counter, quota and limit objects, in the order written.
    pub objects: Vec<NamedObj>,
    pub flowtables: Vec<FlowtableDecl>,
    pub comment: Option<String>,
    pub refs: Vec<Ref>,
}

/// A named object of a table block or an `add counter|quota|limit|ct ...` command.
#[derive(Debug, Clone)]
pub(crate) enum NamedObj {
    Counter(CounterObj),
    Quota(QuotaObj),
    Limit(LimitObj),
    Ct(CtObj),
}

impl NamedObj {
    pub fn name(&self) -> &str {
        match self {
            NamedObj::Counter(o) => &o.name,
            NamedObj::Quota(o) => &o.name,
            NamedObj::Limit(o) => &o.name,
            NamedObj::Ct(o) => &o.name,
        }
    }
}

/// The chain a verdict jumps or goes to.
pub(crate) fn jump_target(v: &Verdict) -> Option<&str> {
    match v {
        Verdict::Jump(c) | Verdict::Goto(c) => Some(c.as_str()),
        _ => None,
    }
}

/// The chain a verdict map's element jumps or goes to.
pub(crate) fn elem_jump(e: &crate::model::SetElem) -> Option<&str> {
    match &e.data {
        Some(ElemData::Verdict(v)) => jump_target(v),
        _ => None,
    }
}

/// Chains a rule jumps or goes to (verdicts and verdict-map data).
pub(crate) fn rule_jumps(rule: &Rule) -> impl Iterator<Item = &str> {
    rule.stmts.iter().flat_map(|s| {
        let mut out: Vec<&str> = Vec::new();
        match s {
            Stmt::Verdict(v) => out.extend(jump_target(v)),
            Stmt::VerdictMap {
                map: SetRef::Anonymous(elems),
                ..
            } => {
                out.extend(elems.iter().filter_map(elem_jump));
            }
            _ => {}
        }
        out
    })
}

/// Anonymous sets a rule creates in the kernel (each takes a handle): a set written in a match,
/// the map of a vmap, an object map, `meta|ct KEY set`, a NAT target, `dup` or `fwd` (checked
/// with `nft -a list ruleset` on the local kernel).
pub(crate) fn anonymous_sets(rule: &Rule) -> u64 {
    let anon_map = |e: &Expr| {
        matches!(
            e,
            Expr::Map {
                map: SetRef::Anonymous(_),
                ..
            }
        )
    };
    rule.stmts
        .iter()
        .filter(|s| match s {
            Stmt::Nat(crate::model::NatStmt {
                target: Some(t), ..
            }) => anon_map(t),
            Stmt::Dup { map: Some(m), .. } | Stmt::Fwd { map: Some(m), .. } => anon_map(m),
            Stmt::Match(m) => matches!(m.right, Rhs::Set(SetRef::Anonymous(_))),
            Stmt::VerdictMap { map, .. } | Stmt::ObjectMap { map, .. } => {
                matches!(map, SetRef::Anonymous(_))
            }
            Stmt::MetaSet {
                value:
                    Expr::Map {
                        map: SetRef::Anonymous(_),
                        ..
                    },
                ..
            }
            | Stmt::CtSet {
                value:
                    Expr::Map {
                        map: SetRef::Anonymous(_),
                        ..
                    },
                ..
            } => true,
            _ => false,
        })
        .count() as u64
}

impl Parser<'_> {
    /// `true` when table `ti` has an object of `obj`'s kind and name already.
    pub(super) fn object_exists(&self, ti: usize, obj: &NamedObj) -> bool {
        let t = &self.st.tables[ti];
        match obj {
            NamedObj::Counter(o) => t.counters.iter().any(|c| c.name == o.name),
            NamedObj::Quota(o) => t.quotas.iter().any(|c| c.name == o.name),
            NamedObj::Limit(o) => t.limits.iter().any(|c| c.name == o.name),
            NamedObj::Ct(o) => t
                .ct_objects
                .iter()
                .any(|c| c.name == o.name && c.config.kind() == o.config.kind()),
        }
    }

    /// Add `block` to table `ti`, numbering new objects, then check its references.
    pub(super) fn apply_block(&mut self, ti: usize, block: Block) -> PResult<()> {
        let Block {
            chains,
            sets,
            objects,
            flowtables,
            comment,
            refs,
        } = block;
        if comment.is_some() {
            self.st.tables[ti].comment = comment;
        }
        // 1. Chains.
        for decl in &chains {
            let existing = self.st.tables[ti]
                .chains
                .iter()
                .position(|c| c.name == decl.name);
            let mut base = decl.base.clone();
            if let (Some(b), Some((p, _))) = (&mut base, decl.policy) {
                b.policy = p;
            } else if let (None, Some((_, pspan))) = (&base, decl.policy)
                && existing.is_none()
            {
                return Err(self
                    .st
                    .error(pspan, "a policy needs a base chain (`type ... hook ...`)"));
            }
            match existing {
                Some(ci) => {
                    let chain = &mut self.st.tables[ti].chains[ci];
                    match (&mut chain.base, base) {
                        (Some(old), Some(new)) => {
                            let same = old.chain_type == new.chain_type
                                && old.hook == new.hook
                                && old.devices == new.devices
                                && old.priority == new.priority;
                            if !same {
                                return Err(self.st.error(
                                    decl.base_span,
                                    format!(
                                        "chain `{}` is already declared with a different hook",
                                        decl.name
                                    ),
                                ));
                            }
                            old.policy = new.policy;
                        }
                        (None, Some(_)) => {
                            return Err(self.st.error(
                                decl.base_span,
                                format!(
                                    "chain `{}` is already declared as a regular chain",
                                    decl.name
                                ),
                            ));
                        }
                        (Some(old), None) => {
                            if let Some((p, _)) = decl.policy {
                                old.policy = p;
                            }
                        }
                        (None, None) => {}
                    }
                    if decl.comment.is_some() {
                        chain.comment = decl.comment.clone();
                    }
                }
                None => {
                    let handle = self.take_handle(ti);
                    self.st.tables[ti].chains.push(Chain {
                        name: decl.name.clone(),
                        handle,
                        base,
                        rules: Vec::new(),
                        comment: decl.comment.clone(),
                        span: decl.span,
                    });
                }
            }
        }
        // Named objects (nft numbers them after the block's chains, in the order written).
        // An object declared again keeps its handle and state, as `nft add counter` of an
        // existing one.
        for obj in objects {
            if self.object_exists(ti, &obj) {
                continue;
            }
            let handle = self.take_handle(ti);
            let t = &mut self.st.tables[ti];
            match obj {
                NamedObj::Counter(mut o) => {
                    o.handle = handle;
                    t.counters.push(o);
                }
                NamedObj::Quota(mut o) => {
                    o.handle = handle;
                    t.quotas.push(o);
                }
                NamedObj::Limit(mut o) => {
                    o.handle = handle;
                    t.limits.push(o);
                }
                NamedObj::Ct(mut o) => {
                    o.handle = handle;
                    t.ct_objects.push(o);
                }
            }
        }
        // 2. Sets.
        for set in sets {
            let existing = self.st.tables[ti]
                .sets
                .iter()
                .position(|s| s.name == set.name);
            match existing {
                Some(si) => {
                    let old = &self.st.tables[ti].sets[si];
                    if old.key != set.key || old.data != set.data || old.is_map != set.is_map {
                        return Err(self.st.error(
                            set.span,
                            format!(
                                "set `{}` is already declared with a different type",
                                set.name
                            ),
                        ));
                    }
                    self.insert_elements(
                        ti,
                        si,
                        set.elements.into_vec(),
                        super::setcheck::Adding::Declared,
                    )?;
                }
                None => {
                    let handle = self.take_handle(ti);
                    let elements = set.elements.clone().into_vec();
                    self.st.tables[ti].sets.push(SetDecl {
                        handle,
                        elements: Default::default(),
                        ..set
                    });
                    let si = self.st.tables[ti].sets.len() - 1;
                    self.insert_elements(ti, si, elements, super::setcheck::Adding::Declared)?;
                }
            }
        }
        // Flowtables (after the sets in nft's expansion of a block). A flowtable declared
        // again keeps its handle; its devices are added (nft_flowtable_update).
        for ft in flowtables {
            match self.st.tables[ti]
                .flowtables
                .iter_mut()
                .find(|f| f.name == ft.name)
            {
                Some(old) => {
                    for d in ft.devices {
                        if !old.devices.contains(&d) {
                            old.devices.push(d);
                        }
                    }
                }
                None => {
                    let handle = self.take_handle(ti);
                    self.st.tables[ti]
                        .flowtables
                        .push(FlowtableDecl { handle, ..ft });
                }
            }
        }
        // Whether the kernel's hook checks can fail: only with NAT or `flow add` statements.
        // (Known per table in `State::hook_bound`, so that a long batch of `add rule`
        // commands does not scan the table for each.)
        let key = (self.st.tables[ti].family, self.st.tables[ti].name.clone());
        if chains
            .iter()
            .any(|d| d.rules.iter().any(|r| r.stmts.iter().any(hook_bound)))
        {
            self.st.hook_bound.insert(key.clone());
        }
        let hook_checks = self.st.hook_bound.contains(&key);
        // 3. Rules, chain by chain.
        for decl in chains {
            let ci = self.st.tables[ti]
                .chains
                .iter()
                .position(|c| c.name == decl.name)
                .unwrap_or(0);
            let mut at = decl.at;
            for mut rule in decl.rules {
                let anon = anonymous_sets(&rule);
                self.st.next_handle[ti] += anon;
                rule.handle = match decl.keep_handle {
                    Some(h) => h,
                    None => self.take_handle(ti),
                };
                let rspan = rule.span;
                let check = hook_checks && rule.stmts.iter().any(|s| hook_bound(s) || leads_on(s));
                let chain = &mut self.st.tables[ti].chains[ci];
                match at.as_mut() {
                    Some(i) => {
                        chain.rules.insert((*i).min(chain.rules.len()), rule);
                        *i += 1;
                    }
                    None => chain.rules.push(rule),
                }
                if check {
                    // The kernel validates the table when the rule is added (the batch is
                    // replayed with validation on: the first rule that breaks it is named).
                    if let Some(msg) = hook_violation(&self.st.tables[ti]) {
                        return Err(self.st.error(rspan, msg));
                    }
                }
            }
        }
        // 4. References.
        let mut refs = refs;
        refs.append(&mut self.refs);
        for r in refs {
            self.check_ref(ti, r)?;
        }
        Ok(())
    }

    fn take_handle(&mut self, ti: usize) -> u64 {
        let h = self.st.next_handle[ti];
        self.st.next_handle[ti] += 1;
        h
    }

    fn check_ref(&mut self, ti: usize, r: Ref) -> PResult<()> {
        if let Ref::SetUpdate {
            name,
            span,
            key,
            expr_text,
            map_data,
        } = r
        {
            self.check_ref(
                ti,
                Ref::Set {
                    name: name.clone(),
                    span,
                    key,
                    expr_text,
                    map_data,
                },
            )?;
            let Some(set) = self.st.tables[ti].sets.iter_mut().find(|s| s.name == name) else {
                return Ok(());
            };
            if set.flags.interval {
                // nft_set_rbtree and nft_set_pipapo have no update from the packet path.
                return Err(self.st.error(
                    span,
                    format!(
                        "set `{name}` has `flags interval`: the kernel cannot update it from the packet path (nft: Could not process rule: Operation not supported)"
                    ),
                ));
            }
            if set.is_map && set.size.is_some() && !set.flags.dynamic {
                // Not marked dynamic and of a known size, the kernel gives the map its fixed
                // hash (nft_hash_fast), which has no update.
                return Err(self.st.error(
                    span,
                    format!(
                        "map `{name}` has a `size` but not `flags dynamic`: the kernel picks a map type that the packet path cannot change (nft: Could not process rule: Operation not supported)"
                    ),
                ));
            }
            // nft's stmt_evaluate_set marks a set, stmt_evaluate_map leaves a map as it is.
            if !set.is_map {
                set.flags.dynamic = true;
            }
            set.size.get_or_insert(65_535);
            return Ok(());
        }
        let table = &self.st.tables[ti];
        match r {
            Ref::Flowtable { name, span } => {
                if table.flowtables.iter().any(|f| f.name == name) {
                    Ok(())
                } else {
                    // The kernel: ENOENT for the rule (nft: "Could not process rule: No such
                    // file or directory" at the statement).
                    Err(self.st.error(
                        span,
                        format!(
                            "unknown flowtable `@{name}` (nft: Could not process rule: No such file or directory)"
                        ),
                    ))
                }
            }
            Ref::Chain { name, span } => match table.chains.iter().find(|c| c.name == name) {
                None => Err(self.st.error(span, format!("unknown chain `{name}`"))),
                Some(c) if c.base.is_some() => Err(self.st.error(
                    span,
                    format!("cannot jump or go to base chain `{name}` (the kernel refuses it)"),
                )),
                Some(_) => Ok(()),
            },
            Ref::SetUpdate { .. } => Ok(()),
            Ref::Set {
                name,
                span,
                key,
                expr_text,
                map_data,
            } => {
                let Some(set) = table.sets.iter().find(|s| s.name == name) else {
                    return Err(self.st.error(span, format!("unknown set `@{name}`")));
                };
                if !keys_compatible(&set.key, &key) {
                    let want: Vec<&str> = set.key.iter().map(|d| d.name()).collect();
                    let have: Vec<&str> = key.iter().map(|d| d.name()).collect();
                    return Err(self.st.error(
                        span,
                        format!(
                            "datatype mismatch: set `{name}` has type {}, expression `{expr_text}` has type {}",
                            want.join(" . "),
                            have.join(" . ")
                        ),
                    ));
                }
                match (map_data, set.data) {
                    // A map used as a set tests its keys (the kernel's lookup without a
                    // destination register).
                    (Some(DataType::Verdict), Some(DataType::Verdict)) | (None, _) => Ok(()),
                    (Some(want), Some(have))
                        if want != DataType::Verdict
                            && have != DataType::Verdict
                            && want.width_bytes() == have.width_bytes() =>
                    {
                        Ok(())
                    }
                    (Some(want), _) if want != DataType::Verdict => Err(self.st.error(
                        span,
                        format!("`{name}` is not a map of {} values", want.name()),
                    )),
                    (Some(_), _) => Err(self.st.error(
                        span,
                        format!(
                            "`{name}` is not a verdict map (`map {name} {{ type ... : verdict }}`)"
                        ),
                    )),
                }
            }
        }
    }
}

/// Set key types match an expression's types (integers match by width).
pub(crate) fn keys_compatible(set: &[DataType], expr: &[DataType]) -> bool {
    set.len() == expr.len()
        && set.iter().zip(expr).all(|(a, b)| match (a, b) {
            (DataType::Integer(_), DataType::Integer(_)) => a.width_bytes() == b.width_bytes(),
            _ => a == b,
        })
}

/// A statement the kernel allows in some chains only: a NAT statement (nat chains, by hook),
/// `flow add` (forward) or `reject` (not at postrouting or egress).
fn hook_bound(s: &Stmt) -> bool {
    matches!(s, Stmt::Nat(_) | Stmt::FlowAdd { .. } | Stmt::Reject { .. })
        || s.exprs()
            .iter()
            .any(|e| e.find_map(&hook_bound_expr).is_some())
}

/// An expression the kernel allows at some hooks only: `fib` (nft_fib_validate, by what it
/// returns and its `iif`/`oif` flag) and `rt mtu` (nft_rt_validate). Its words and the
/// kernel's hook mask (bit `n` for hook number `n`: prerouting 0, input 1, forward 2, output
/// 3, postrouting 4; a netdev chain's ingress is 0 and egress 1).
fn hook_bound_expr(e: &Expr) -> Option<(String, u32)> {
    const PRE: u32 = 1;
    const IN: u32 = 2;
    const FWD: u32 = 4;
    const OUT: u32 = 8;
    const POST: u32 = 16;
    match e {
        Expr::Fib(f) => {
            let iif = f.flags & crate::model::FibExpr::IIF != 0;
            let oif = f.flags & crate::model::FibExpr::OIF != 0;
            // Linux 6.18 (checked on it): `oif`/`oifname` at prerouting, input and forward
            // with or without `iif` (later kernels allow only prerouting without `iif`).
            let mask = match f.result {
                crate::model::FibResult::Oif | crate::model::FibResult::Oifname => PRE | IN | FWD,
                crate::model::FibResult::Type if iif => PRE | IN | FWD,
                crate::model::FibResult::Type if oif => OUT | POST | FWD,
                crate::model::FibResult::Type => PRE | IN | FWD | OUT | POST,
            };
            Some((crate::print::expr(e), mask))
        }
        Expr::Rt(crate::model::RtKey::Tcpmss) => Some(("rt mtu".to_string(), FWD | OUT | POST)),
        _ => None,
    }
}

/// The kernel's number of `hook` in a table of `family` (for [`hook_bound_expr`]'s masks):
/// NF_INET_* for the IP hooks, NF_NETDEV_INGRESS 0 and NF_NETDEV_EGRESS 1 in netdev, and
/// NF_INET_INGRESS 5 in inet.
fn hook_number(family: crate::model::Family, hook: Hook) -> u32 {
    match hook {
        Hook::Prerouting => 0,
        Hook::Input => 1,
        Hook::Forward => 2,
        Hook::Output => 3,
        Hook::Postrouting => 4,
        Hook::Ingress if family == crate::model::Family::Netdev => 0,
        Hook::Egress => 1,
        Hook::Ingress => 5,
    }
}

/// A statement that leads to other chains (`jump`, `goto`, a verdict map).
fn leads_on(s: &Stmt) -> bool {
    matches!(
        s,
        Stmt::Verdict(Verdict::Jump(_) | Verdict::Goto(_)) | Stmt::VerdictMap { .. }
    )
}

/// Whether a table holds a NAT or `flow add` statement.
pub(crate) fn table_has_hook_bound(t: &Table) -> bool {
    t.chains
        .iter()
        .any(|c| c.rules.iter().any(|r| r.stmts.iter().any(hook_bound)))
}

/// The hooks a NAT statement may run at, as the kernel's `nft_nat_validate`,
/// `nft_masq_validate` and `nft_redir_validate`.
pub(crate) fn nat_hooks(kind: NatKind) -> &'static [Hook] {
    match kind {
        NatKind::Snat => &[Hook::Postrouting, Hook::Input],
        NatKind::Dnat | NatKind::Redirect => &[Hook::Prerouting, Hook::Output],
        NatKind::Masquerade => &[Hook::Postrouting],
    }
}

/// What the kernel's table validation (`nft_table_validate`: every base chain and the
/// chains it reaches by `jump`, `goto` and verdict maps) refuses: a NAT statement outside a
/// nat chain or at a hook its kind does not run at, `flow add` outside the forward hook
/// (`nft_flow_offload_validate`), `reject` at postrouting or egress (`nft_reject_validate`).
/// The message for the first one found, `None` when valid.
pub(crate) fn hook_violation(t: &Table) -> Option<String> {
    for base_chain in &t.chains {
        let Some(b) = &base_chain.base else { continue };
        let mut seen = vec![false; t.chains.len()];
        let start = t.chains.iter().position(|c| c.name == base_chain.name)?;
        let mut stack = vec![start];
        while let Some(ci) = stack.pop() {
            if std::mem::replace(&mut seen[ci], true) {
                continue;
            }
            let c = &t.chains[ci];
            for r in &c.rules {
                for s in &r.stmts {
                    if let Some(msg) = stmt_violation(t.family, s, b, &base_chain.name, &c.name) {
                        return Some(msg);
                    }
                    for target in targets(t, s) {
                        if let Some(i) = t.chains.iter().position(|x| x.name == target) {
                            stack.push(i);
                        }
                    }
                }
            }
        }
    }
    None
}

/// Chains a statement leads to: jumps and gotos, also through verdict maps (anonymous, or a
/// named map of the table with its elements).
fn targets<'a>(t: &'a Table, s: &'a Stmt) -> Vec<&'a str> {
    let elems = |e: &'a [crate::model::SetElem]| -> Vec<&'a str> {
        e.iter().filter_map(elem_jump).collect()
    };
    match s {
        Stmt::Verdict(v) => jump_target(v).into_iter().collect(),
        Stmt::VerdictMap {
            map: SetRef::Anonymous(e),
            ..
        } => elems(e),
        Stmt::VerdictMap {
            map: SetRef::Named(n),
            ..
        } => t
            .sets
            .iter()
            .find(|s| &s.name == n)
            .and_then(|s| s.elements.as_slice())
            .map(elems)
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn stmt_violation(
    family: crate::model::Family,
    s: &Stmt,
    b: &BaseChain,
    base: &str,
    chain: &str,
) -> Option<String> {
    let via = if base == chain {
        format!("chain `{base}`")
    } else {
        format!("chain `{chain}`, reached from base chain `{base}`,")
    };
    let hook = hook_number(family, b.hook);
    let outside = s.exprs().into_iter().find_map(|e| {
        e.find_map(&|x| hook_bound_expr(x).filter(|(_, mask)| mask & (1 << hook) == 0))
    });
    if let Some((words, _)) = outside {
        return Some(format!(
            "`{words}` does not run at the {} hook, and {via} is at {} (nft: Could not process rule: Operation not supported)",
            b.hook.name(),
            b.hook.name()
        ));
    }
    let ty = match b.chain_type {
        ChainType::Filter => "filter",
        ChainType::Nat => "nat",
        ChainType::Route => "route",
    };
    match s {
        Stmt::Nat(n) => {
            let hooks = nat_hooks(n.kind);
            if b.chain_type == ChainType::Nat && hooks.contains(&b.hook) {
                return None;
            }
            let names: Vec<&str> = hooks.iter().map(|h| h.name()).collect();
            Some(format!(
                "`{}` runs in nat chains at the {} hook only, and {via} is a {ty} chain at {} (nft: Could not process rule: Operation not supported)",
                n.kind.name(),
                names.join(" or "),
                b.hook.name()
            ))
        }
        // nft_reject_validate, nft_reject_inet_validate, nft_reject_netdev_validate.
        Stmt::Reject { .. }
            if !matches!(
                b.hook,
                Hook::Prerouting | Hook::Input | Hook::Forward | Hook::Output | Hook::Ingress
            ) =>
        {
            Some(format!(
                "`reject` runs at the prerouting, input, forward and output hooks (and ingress in inet and netdev tables) only, and {via} is at {} (nft: Could not process rule: Operation not supported)",
                b.hook.name()
            ))
        }
        Stmt::FlowAdd { .. } if b.hook != Hook::Forward => Some(format!(
            "`flow add` runs at the forward hook only, and {via} is at {} (nft: Could not process rule: Operation not supported)",
            b.hook.name()
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    /// Every anonymous set or map a rule writes takes a handle before the rule's own, as the
    /// kernel gives them (`nft -a list ruleset` of the same file on kernel 6.18): a match's
    /// set, a vmap, a NAT target's map, `dup` and `fwd` maps.
    #[test]
    fn anonymous_sets_and_maps_take_handles_as_in_the_kernel() {
        let text = "table netdev t {\n\tchain c {\n\t\ttype filter hook ingress device \"w0\" priority 0; policy accept;\n\t\tip saddr { 10.0.0.1, 10.0.0.2 } accept\n\t\tip daddr vmap { 10.0.0.1 : drop }\n\t\tfwd ip to ip saddr map { 10.0.0.1 : 10.0.0.9 } device \"w1\"\n\t\tfwd to ip saddr map { 10.0.0.1 : \"w1\" }\n\t\tdup to ip saddr map { 10.0.0.1 : \"w1\" }\n\t\tcounter\n\t}\n}\ntable ip n {\n\tchain c {\n\t\ttype nat hook prerouting priority -100; policy accept;\n\t\tdnat to ip saddr map { 10.0.0.1 : 1.2.3.4 }\n\t\tcounter\n\t}\n}\n";
        let rs = crate::parse_str(text, "h.nft").expect("parses");
        let handles = |t: usize| -> Vec<u64> {
            rs.tables[t].chains[0]
                .rules
                .iter()
                .map(|r| r.handle)
                .collect()
        };
        // The kernel's: 3, 5, 7, 9, 11 and 12 (the chain took 1, each set one before its rule).
        assert_eq!(handles(0), [3, 5, 7, 9, 11, 12]);
        assert_eq!(handles(1), [3, 4]);
    }
}
