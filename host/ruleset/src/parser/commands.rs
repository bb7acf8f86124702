//! Top-level commands of a batch (`table`, `define`, `include`, `add`/`create`, `insert`,
//! `flush`, `delete`/`destroy`), each applied to the ruleset as soon as it is read, as `nft -f`
//! applies them in order. A command naming a table, chain or set that does not exist is an
//! error at that name.

use super::handles::{Block, ChainDecl, NamedObj};
use super::{PResult, Parser};
use crate::lexer::Tok;
use crate::model::{Family, Span, Stmt};

pub(super) fn family_from(w: &str) -> Option<Family> {
    Some(match w {
        "ip" => Family::Ip,
        "ip6" => Family::Ip6,
        "inet" => Family::Inet,
        "arp" => Family::Arp,
        "bridge" => Family::Bridge,
        "netdev" => Family::Netdev,
        _ => return None,
    })
}

/// The kernel's EEXIST for `create` of what exists, as nft prints it.
const EXISTS: &str = "Could not process rule: File exists";

/// The kernel's ENOENT, as nft prints it.
const NO_SUCH: &str = "Could not process rule: No such file or directory";

/// Remove the first of `v` that `f` picks; `false` when none does.
fn remove_named<T>(v: &mut Vec<T>, f: impl Fn(&T) -> bool) -> bool {
    match v.iter().position(f) {
        Some(i) => {
            v.remove(i);
            true
        }
        None => false,
    }
}

/// Which rule command: where the rule goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RuleVerb {
    Add,
    Insert,
    Replace,
}

impl Parser<'_> {
    /// Under [`super::State::elements_only`], stop at a command that is not an element
    /// command (`what`, at `span`): the caller applies the batch another way.
    fn only_elements(&mut self, ok: bool, span: Span) -> PResult<()> {
        if !self.st.elements_only || ok {
            return Ok(());
        }
        self.st.not_elements = true;
        Err(self.st.error(span, "not an element command"))
    }

    /// One top-level command.
    pub(super) fn command(&mut self) -> PResult<()> {
        let span = self.peek_span()?;
        let Some(Tok::Word(w)) = self.peek_tok()? else {
            return self.expected("`table`, `define`, `include`, `add`, `flush` or `delete`");
        };
        let element_word = matches!(
            w.as_str(),
            "define"
                | "redefine"
                | "undefine"
                | "include"
                | "add"
                | "create"
                | "flush"
                | "delete"
                | "destroy"
        );
        self.only_elements(element_word, span)?;
        match w.as_str() {
            "table" => {
                self.advance();
                self.table_command(span, true)
            }
            "define" | "redefine" => {
                self.advance();
                self.define(w == "redefine")
            }
            "undefine" => {
                self.advance();
                self.undefine()
            }
            "include" => {
                self.advance();
                self.include(span)
            }
            "add" | "create" => {
                self.advance();
                self.add_command(w == "create", span)
            }
            "insert" => {
                self.advance();
                self.expect_word("rule")?;
                self.rule_command(RuleVerb::Insert)
            }
            "replace" => {
                self.advance();
                self.expect_word("rule")?;
                self.rule_command(RuleVerb::Replace)
            }
            "flush" => {
                self.advance();
                self.flush_command()
            }
            "delete" | "destroy" => {
                self.advance();
                self.delete_command(w == "destroy")
            }
            w if super::unsupported::COMMANDS.contains(&w) => {
                Err(self.st.error(span, super::unsupported::message(w)))
            }
            _ => self.expected("`table`, `define`, `include`, `add`, `flush` or `delete`"),
        }
    }

    pub(super) fn family(&mut self) -> PResult<Family> {
        if let Some(Tok::Word(w)) = self.peek_tok()?
            && let Some(f) = family_from(&w)
        {
            self.advance();
            return Ok(f);
        }
        Ok(Family::Ip)
    }

    /// Index of an existing table, or an error at `span`.
    fn existing_table(&mut self, family: Family, name: &str, span: Span) -> PResult<usize> {
        match self
            .st
            .tables
            .iter()
            .position(|t| t.family == family && t.name == name)
        {
            Some(i) => Ok(i),
            None => Err(self
                .st
                .error(span, format!("unknown table `{} {name}`", family.name()))),
        }
    }

    /// `add table|chain|rule|set|map|element ...`
    /// `cmd`: the `add`/`create` word (where nft points for the kernel's refusals).
    fn add_command(&mut self, create: bool, cmd: Span) -> PResult<()> {
        let span = self.peek_span()?;
        let Some(Tok::Word(w)) = self.peek_tok()? else {
            return self.expected(
                "`table`, `chain`, `rule`, `set`, `map`, `element`, `counter`, `quota` or `limit`",
            );
        };
        self.advance();
        self.only_elements(w == "element", span)?;
        match w.as_str() {
            "table" => {
                if create {
                    // `create` refuses what exists (the kernel's EEXIST), at the name.
                    let start = self.pos;
                    let family = self.family()?;
                    let (tname, tspan) = self.name("a table name")?;
                    if self
                        .st
                        .tables
                        .iter()
                        .any(|t| t.family == family && t.name == tname)
                    {
                        return Err(self.st.error(tspan, EXISTS));
                    }
                    self.pos = start;
                }
                self.table_command(span, false)
            }
            "chain" => {
                let family = self.family()?;
                let (tname, tspan) = self.name("a table name")?;
                let ti = self.existing_table(family, &tname, tspan)?;
                let (cname, cspan) = self.name("a chain name")?;
                if create && self.st.tables[ti].chains.iter().any(|c| c.name == cname) {
                    return Err(self.st.error(cspan, EXISTS));
                }
                let mut block = Block::default();
                self.plugins = self.st.tables[ti]
                    .plugins
                    .iter()
                    .map(|p| p.name.clone())
                    .collect();
                let mut decl = ChainDecl::new(cname, cspan);
                let open = self.peek_span()?;
                if self.eat_punct("{")? {
                    self.chain_body(family, &mut decl, open)?;
                }
                block.chains.push(decl);
                self.apply_block(ti, block)
            }
            "set" | "map" => {
                let family = self.family()?;
                let (tname, tspan) = self.name("a table name")?;
                let ti = self.existing_table(family, &tname, tspan)?;
                let nspan = self.peek_span()?;
                let set = self.set_decl(w == "map", span)?;
                if create && self.st.tables[ti].sets.iter().any(|s| s.name == set.name) {
                    return Err(self.st.error(nspan, EXISTS));
                }
                let block = Block {
                    sets: vec![set],
                    ..Block::default()
                };
                self.apply_block(ti, block)
            }
            "rule" => self.rule_command(RuleVerb::Add),
            "ct" => {
                let (kind, kspan) = self.ct_obj_kind()?;
                let family = self.family()?;
                let (tname, tspan) = self.name("a table name")?;
                let ti = self.existing_table(family, &tname, tspan)?;
                let obj = NamedObj::Ct(self.ct_obj(kind, kspan, family, span)?);
                if create && self.object_exists(ti, &obj) {
                    return Err(self.st.error(
                        span,
                        format!(
                            "{} `{}` exists already (nft: Could not process rule: File exists)",
                            kind.name(),
                            obj.name()
                        ),
                    ));
                }
                let block = Block {
                    objects: vec![obj],
                    ..Block::default()
                };
                self.apply_block(ti, block)
            }
            "synproxy" | "secmark" => {
                // Named objects of nft that wasp does not read yet.
                Err(self.st.error(
                    span,
                    super::unsupported::message_with(&format!("add {w}"), "a named object"),
                ))
            }
            "counter" | "quota" | "limit" => {
                let family = self.family()?;
                let (tname, tspan) = self.name("a table name")?;
                let ti = self.existing_table(family, &tname, tspan)?;
                let obj = match w.as_str() {
                    "counter" => NamedObj::Counter(self.counter_obj_body(span, true)?),
                    "quota" => NamedObj::Quota(self.quota_obj(span, true)?),
                    _ => NamedObj::Limit(self.limit_obj(span, true)?),
                };
                if create && self.object_exists(ti, &obj) {
                    return Err(self.st.error(
                        span,
                        format!(
                            "{w} `{}` exists already (nft: Could not process rule: File exists)",
                            obj.name()
                        ),
                    ));
                }
                let block = Block {
                    objects: vec![obj],
                    ..Block::default()
                };
                self.apply_block(ti, block)
            }
            "flowtable" => {
                let family = self.family()?;
                let (tname, tspan) = self.name("a table name")?;
                let ti = self.existing_table(family, &tname, tspan)?;
                let nspan = self.peek_span()?;
                let ft = self.flowtable_decl(ti, family)?;
                if create
                    && self.st.tables[ti]
                        .flowtables
                        .iter()
                        .any(|f| f.name == ft.name)
                {
                    return Err(self.st.error(
                        nspan,
                        format!(
                            "flowtable `{}` exists already (nft: Could not process rule: File exists)",
                            ft.name
                        ),
                    ));
                }
                let block = Block {
                    flowtables: vec![ft],
                    ..Block::default()
                };
                self.apply_block(ti, block)
            }
            "element" => {
                let family = self.family()?;
                let (tname, tspan) = self.name("a table name")?;
                let ti = self.existing_table(family, &tname, tspan)?;
                let (sname, sspan) = self.name("a set name")?;
                let Some(si) = self.st.tables[ti].sets.iter().position(|s| s.name == sname) else {
                    return Err(self.st.error(sspan, format!("unknown set `{sname}`")));
                };
                let set = self.st.tables[ti].sets[si].without_elements();
                self.expect_punct("{")?;
                let elems = self.set_elements(&set)?;
                self.check_elem_counters(&set, &elems)?;
                let jumps = elems.iter().any(|e| {
                    matches!(
                        e.data,
                        Some(crate::model::ElemData::Verdict(
                            crate::model::Verdict::Jump(_) | crate::model::Verdict::Goto(_)
                        ))
                    )
                });
                let how = if create {
                    super::setcheck::Adding::Create
                } else {
                    super::setcheck::Adding::Add
                };
                self.insert_elements(ti, si, elems, how)?;
                // A jump added to a verdict map is validated as a jump in a rule (the kernel
                // refuses the element command: nft points at `add`).
                let t = &self.st.tables[ti];
                if jumps
                    && self.st.hook_bound.contains(&(t.family, t.name.clone()))
                    && let Some(msg) = super::handles::hook_violation(t)
                {
                    return Err(self.st.error(cmd, msg));
                }
                Ok(())
            }
            _ => Err(self.st.error(
                span,
                format!(
                    "expected `table`, `chain`, `rule`, `set`, `map` or `element`, found `{w}`"
                ),
            )),
        }
    }

    /// `add|insert rule [family] TABLE CHAIN [position H | handle H | index N] ...` and
    /// `replace rule [family] TABLE CHAIN handle H ...`, placed as nft places them: `add` after
    /// the rule of handle `H` (or at index `N`, from 0), else last; `insert` before it, else
    /// first; `replace` in the place of rule `H`, keeping its handle (as the kernel's replace,
    /// which takes no new handle). An unknown handle or an index beyond the chain is the kernel's ENOENT.
    fn rule_command(&mut self, verb: RuleVerb) -> PResult<()> {
        let family = self.family()?;
        let (tname, tspan) = self.name("a table name")?;
        let ti = self.existing_table(family, &tname, tspan)?;
        let (cname, cspan) = self.name("a chain name")?;
        let Some(ci) = self.st.tables[ti]
            .chains
            .iter()
            .position(|c| c.name == cname)
        else {
            return Err(self.st.error(cspan, format!("unknown chain `{cname}`")));
        };
        let anchor = if self.eat_word("position")? || self.eat_word("handle")? {
            let (h, span) = self.rule_number("a rule handle")?;
            let rules = &self.st.tables[ti].chains[ci].rules;
            let Some(i) = rules.iter().position(|r| r.handle == h) else {
                return Err(self.st.error(
                    span,
                    format!("Could not process rule: No such file or directory (no rule with handle {h})"),
                ));
            };
            Some(i)
        } else if verb != RuleVerb::Replace && self.eat_word("index")? {
            let (n, span) = self.rule_number("a rule index")?;
            let len = self.st.tables[ti].chains[ci].rules.len();
            if n as usize >= len {
                return Err(self.st.error(
                    span,
                    format!("Could not process rule: No such file or directory (the chain has {len} rules)"),
                ));
            }
            Some(n as usize)
        } else {
            None
        };
        if verb == RuleVerb::Replace && anchor.is_none() {
            return self.expected("`handle` and the handle of the rule to replace");
        }
        let mut block = Block::default();
        self.plugins = self.st.tables[ti]
            .plugins
            .iter()
            .map(|p| p.name.clone())
            .collect();
        let rule = self.rule(family)?;
        let at = match (verb, anchor) {
            (RuleVerb::Add, None) => None,
            (RuleVerb::Add, Some(i)) => Some(i + 1),
            (RuleVerb::Insert, None) => Some(0),
            (RuleVerb::Insert | RuleVerb::Replace, Some(i)) => Some(i),
            (RuleVerb::Replace, None) => None,
        };
        let mut decl = ChainDecl::new(cname, cspan);
        if verb == RuleVerb::Replace
            && let Some(i) = anchor
        {
            let old = self.st.tables[ti].chains[ci].rules.remove(i);
            decl.keep_handle = Some(old.handle);
        }
        decl.rules.push(rule);
        decl.at = at;
        block.chains.push(decl);
        self.apply_block(ti, block)?;
        if verb == RuleVerb::Insert {
            let t = &self.st.tables[ti];
            let rules = &t.chains[ci].rules;
            if let Some(r) = rules.get(at.unwrap_or(0)) {
                self.st.inserted.push((t.handle, r.handle));
            }
        }
        Ok(())
    }

    /// A rule handle or index after `position`, `handle` or `index`.
    fn rule_number(&mut self, what: &str) -> PResult<(u64, Span)> {
        let span = self.peek_span()?;
        let Some(Tok::Word(w)) = self.peek_tok()? else {
            return self.expected(what);
        };
        let Some(n) = crate::datatypes::parse_uint(&w) else {
            return self.expected(what);
        };
        self.advance();
        Ok((n as u64, span))
    }

    fn flush_command(&mut self) -> PResult<()> {
        let at = self.peek_span()?;
        if self.eat_word("ruleset")? {
            self.only_elements(false, at)?;
            self.st.tables.clear();
            self.st.next_handle.clear();
            return Ok(());
        }
        let span = self.peek_span()?;
        let what = if self.eat_word("table")? {
            "table"
        } else if self.eat_word("chain")? {
            "chain"
        } else if self.eat_word("set")? || self.eat_word("map")? {
            "set"
        } else {
            return self.expected("`ruleset`, `table`, `chain` or `set`");
        };
        self.only_elements(what == "set", span)?;
        let family = self.family()?;
        let (tname, tspan) = self.name("a table name")?;
        let ti = self.existing_table(family, &tname, tspan)?;
        match what {
            "table" => {
                for c in &mut self.st.tables[ti].chains {
                    c.rules.clear();
                }
            }
            "chain" => {
                let (cname, cspan) = self.name("a chain name")?;
                match self.st.tables[ti]
                    .chains
                    .iter_mut()
                    .find(|c| c.name == cname)
                {
                    Some(c) => c.rules.clear(),
                    None => return Err(self.st.error(cspan, format!("unknown chain `{cname}`"))),
                }
            }
            _ => {
                let (sname, sspan) = self.name("a set name")?;
                match self.st.tables[ti].sets.iter().position(|s| s.name == sname) {
                    Some(si) => self.flush_elements(ti, si),
                    None => return Err(self.st.error(sspan, format!("unknown set `{sname}`"))),
                }
            }
        }
        let _ = span;
        Ok(())
    }

    /// `delete ...`; `destroy`: `destroy element`, which skips elements the set does not hold
    /// (the other objects are deleted as by `delete`).
    fn delete_command(&mut self, destroy: bool) -> PResult<()> {
        let span = self.peek_span()?;
        let what = if self.eat_word("table")? {
            "table"
        } else if self.eat_word("chain")? {
            "chain"
        } else if self.eat_word("set")? || self.eat_word("map")? {
            "set"
        } else if self.eat_word("rule")? {
            "rule"
        } else if self.eat_word("element")? {
            "element"
        } else if self.eat_word("flowtable")? {
            "flowtable"
        } else if self.eat_word("counter")? {
            "counter"
        } else if self.eat_word("quota")? {
            "quota"
        } else if self.eat_word("limit")? {
            "limit"
        } else {
            return self.expected(
                "`table`, `chain`, `set`, `rule`, `element`, `flowtable`, `counter`, `quota` or `limit`",
            );
        };
        self.only_elements(what == "element", span)?;
        let family = self.family()?;
        let (tname, tspan) = self.name("a table name")?;
        let ti = self.existing_table(family, &tname, tspan)?;
        match what {
            "table" => {
                self.st.tables.remove(ti);
                self.st.next_handle.remove(ti);
            }
            "counter" | "quota" | "limit" => {
                // By name (or `handle H`); one that rules still name is busy (EBUSY).
                let (name, nspan) = self.name(&format!("a {what} name"))?;
                let t = &mut self.st.tables[ti];
                let gone = match what {
                    "counter" => remove_named(&mut t.counters, |o| o.name == name),
                    "quota" => remove_named(&mut t.quotas, |o| o.name == name),
                    _ => remove_named(&mut t.limits, |o| o.name == name),
                };
                if !gone {
                    return Err(self.st.error(nspan, NO_SUCH));
                }
                // A rule that names it (an object map's elements name objects too: those the
                // kernel also holds, not checked here).
                let used = self.st.tables[ti]
                    .chains
                    .iter()
                    .flat_map(|c| c.rules.iter())
                    .flat_map(|r| r.stmts.iter())
                    .any(|st| match (what, st) {
                        ("counter", Stmt::CounterRef { name: n, .. })
                        | ("quota", Stmt::QuotaRef { name: n, .. })
                        | ("limit", Stmt::LimitRef { name: n, .. }) => *n == name,
                        _ => false,
                    });
                if used {
                    return Err(self.st.error(
                        nspan,
                        format!("Could not process rule: Device or resource busy ({what} `{name}` is used by a rule)"),
                    ));
                }
            }
            "chain" => {
                let (cname, cspan) = self.name("a chain name")?;
                let t = &mut self.st.tables[ti];
                let Some(ci) = t.chains.iter().position(|c| c.name == cname) else {
                    return Err(self.st.error(cspan, format!("unknown chain `{cname}`")));
                };
                // A chain that a rule or a verdict map's element jumps to is in use (EBUSY); one
                // with rules goes with its rules (kernel 6.18 with nft 1.0.6).
                let used = t.chains.iter().any(|c| {
                    c.rules
                        .iter()
                        .any(|r| super::handles::rule_jumps(r).any(|j| j == cname))
                }) || t
                    .sets
                    .iter()
                    .flat_map(|s| s.elements.iter())
                    .any(|e| super::handles::elem_jump(&e) == Some(cname.as_str()));
                if used {
                    return Err(self.st.error(
                        cspan,
                        format!("Could not process rule: Device or resource busy (chain `{cname}` is jumped to)"),
                    ));
                }
                t.chains.remove(ci);
            }
            "flowtable" => {
                let (fname, fspan) = self.name("a flowtable name")?;
                let t = &mut self.st.tables[ti];
                let Some(fi) = t.flowtables.iter().position(|f| f.name == fname) else {
                    return Err(self.st.error(
                        fspan,
                        format!("unknown flowtable `{fname}` (nft: Could not process rule: No such file or directory)"),
                    ));
                };
                let used = t.chains.iter().any(|c| {
                    c.rules.iter().any(|r| {
                        r.stmts.iter().any(
                            |s| matches!(s, crate::model::Stmt::FlowAdd { flowtable, .. } if *flowtable == fname),
                        )
                    })
                });
                if used {
                    return Err(self.st.error(
                        fspan,
                        format!("cannot delete flowtable `{fname}`: a rule uses it (nft: Could not process rule: Device or resource busy)"),
                    ));
                }
                t.flowtables.remove(fi);
            }
            "set" => {
                let (sname, sspan) = self.name("a set name")?;
                let t = &mut self.st.tables[ti];
                let Some(si) = t.sets.iter().position(|s| s.name == sname) else {
                    return Err(self.st.error(sspan, format!("unknown set `{sname}`")));
                };
                // A set a rule names (`@s` in a match, map, vmap or set statement: every
                // such place lists as `@s`) is in use: the kernel refuses at the set's name.
                let used = t
                    .chains
                    .iter()
                    .flat_map(|c| c.rules.iter())
                    .any(|r| names_set(&crate::print::rule_text(r), &sname));
                if used {
                    return Err(self.st.error(
                        sspan,
                        format!("Could not process rule: Device or resource busy (set `{sname}` is used by a rule)"),
                    ));
                }
                t.sets.remove(si);
            }
            "rule" => {
                let (cname, cspan) = self.name("a chain name")?;
                self.expect_word("handle")?;
                let hspan = self.peek_span()?;
                let Some(Tok::Word(h)) = self.peek_tok()? else {
                    return self.expected("a rule handle");
                };
                self.advance();
                let h = crate::datatypes::parse_uint(&h).unwrap_or(0) as u64;
                let t = &mut self.st.tables[ti];
                let Some(c) = t.chains.iter_mut().find(|c| c.name == cname) else {
                    return Err(self.st.error(cspan, format!("unknown chain `{cname}`")));
                };
                let Some(ri) = c.rules.iter().position(|r| r.handle == h) else {
                    return Err(self.st.error(hspan, format!("no rule with handle {h}")));
                };
                c.rules.remove(ri);
            }
            _ => {
                let (sname, sspan) = self.name("a set name")?;
                let Some(si) = self.st.tables[ti].sets.iter().position(|s| s.name == sname) else {
                    return Err(self.st.error(sspan, format!("unknown set `{sname}`")));
                };
                let set = self.st.tables[ti].sets[si].without_elements();
                self.expect_punct("{")?;
                // A map's element is deleted by its key; data written after it is read too.
                self.data_optional = true;
                let elems = self.set_elements(&set);
                self.data_optional = false;
                self.delete_elements(ti, si, elems?, destroy)?;
            }
        }
        Ok(())
    }
}

/// Whether the rule text `rule` (as listed) names set `name` (`@name`, not `@name2`).
fn names_set(rule: &str, name: &str) -> bool {
    let at = format!("@{name}");
    rule.match_indices(&at).any(|(i, _)| {
        !rule[i + at.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
    })
}
