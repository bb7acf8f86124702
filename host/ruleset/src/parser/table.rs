//! Top-level commands, `table` blocks, chains and set declarations.

use super::handles::{Block, ChainDecl, NamedObj};
use super::{PResult, Parser};
use crate::lexer::{Tok, Token};
use crate::model::{
    BaseChain, ChainType, CounterObj, DataType, Expr, Family, FlowtableDecl, Hook, Policy, SetDecl,
    SetFlags, Span, Table,
};

/// Standard priority names (nft's `std_prios`), in the order nft tries them when printing.
pub(crate) const STD_PRIOS: &[(&str, i32)] = &[
    ("raw", -300),
    ("mangle", -150),
    ("dstnat", -100),
    ("filter", 0),
    ("security", 50),
    ("srcnat", 100),
];

/// The bridge family's standard priorities (nft 1.0.6 `bridge_std_prios`).
pub(crate) const BRIDGE_PRIOS: &[(&str, i32)] = &[
    ("dstnat", -300),
    ("filter", -200),
    ("out", 100),
    ("srcnat", 300),
];

/// The standard priority names of `family`: the bridge family has its own.
pub(crate) fn std_prios(family: Family) -> &'static [(&'static str, i32)] {
    if family == Family::Bridge {
        BRIDGE_PRIOS
    } else {
        STD_PRIOS
    }
}

/// Whether a standard priority may be named in this family and hook (nft 1.0.6
/// `std_prio_family_hook_compat`): `dstnat` only at prerouting, `srcnat` only at postrouting,
/// and netdev knows only `filter`.
pub(crate) fn std_prio_ok(prio: i32, family: Family, hook: Hook) -> bool {
    match family {
        Family::Netdev => prio == 0,
        Family::Bridge => match prio {
            -300 => hook == Hook::Prerouting,
            300 => hook == Hook::Postrouting,
            100 => hook == Hook::Output,
            _ => true,
        },
        _ => match prio {
            -100 => hook == Hook::Prerouting,
            100 => hook == Hook::Postrouting,
            _ => true,
        },
    }
}

fn family_from(w: &str) -> Option<Family> {
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

/// Data type names for `type ...` in a set declaration.
pub(crate) fn dtype_from_name(w: &str) -> Option<DataType> {
    DataType::from_name(w)
}

impl Parser<'_> {
    /// One top-level command.
    pub(super) fn command(&mut self) -> PResult<()> {
        let span = self.peek_span()?;
        let Some(Tok::Word(w)) = self.peek_tok()? else {
            return self.expected("`table`, `define`, `include`, `add`, `flush` or `delete`");
        };
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
                self.rule_command(true)
            }
            "flush" => {
                self.advance();
                self.flush_command()
            }
            "delete" | "destroy" => {
                self.advance();
                self.delete_command()
            }
            w if super::unsupported::COMMANDS.contains(&w) => {
                Err(self.st.error(span, super::unsupported::message(w)))
            }
            _ => self.expected("`table`, `define`, `include`, `add`, `flush` or `delete`"),
        }
    }

    fn family(&mut self) -> PResult<Family> {
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

    fn table_index_or_create(&mut self, family: Family, name: &str, span: Span) -> usize {
        if let Some(i) = self
            .st
            .tables
            .iter()
            .position(|t| t.family == family && t.name == name)
        {
            return i;
        }
        self.st.table_handle += 1;
        self.st.tables.push(Table {
            family,
            name: name.to_string(),
            handle: self.st.table_handle,
            chains: Vec::new(),
            sets: Vec::new(),
            plugins: Vec::new(),
            counters: Vec::new(),
            quotas: Vec::new(),
            limits: Vec::new(),
            flowtables: Vec::new(),
            comment: None,
            span,
        });
        self.st.next_handle.push(1);
        self.st.tables.len() - 1
    }

    /// `table [family] NAME [{ ... }]` (after `table` or `add table`).
    fn table_command(&mut self, span: Span, body_required: bool) -> PResult<()> {
        let family = self.family()?;
        let (name, _) = self.name("a table name")?;
        let ti = self.table_index_or_create(family, &name, span);
        let open = self.peek_span()?;
        if !self.at_punct("{")? {
            if body_required {
                return self.expected("`{`");
            }
            return Ok(());
        }
        self.advance();
        self.plugins = self.plugins_in_block(ti);
        self.block_sets.clear();
        let mut block = Block::default();
        loop {
            self.skip_separators()?;
            let item_span = self.peek_span()?;
            match self.peek_tok()? {
                Some(Tok::Punct("}")) => {
                    self.advance();
                    break;
                }
                Some(Tok::Word(w)) if w == "plugin" => {
                    self.advance();
                    self.plugin_decl(ti, item_span)?;
                }
                Some(Tok::Word(w)) if w == "chain" => {
                    self.advance();
                    let (cname, cspan) = self.name("a chain name")?;
                    let mut decl = ChainDecl::new(cname, cspan);
                    let open = self.expect_punct("{")?;
                    self.chain_body(family, &mut decl, open)?;
                    block.chains.push(decl);
                }
                Some(Tok::Word(w)) if w == "set" || w == "map" => {
                    self.advance();
                    let set = self.set_decl(w == "map", item_span)?;
                    self.block_sets.push((set.name.clone(), set.data));
                    block.sets.push(set);
                }
                Some(Tok::Word(w)) if w == "comment" => {
                    self.advance();
                    let (c, _) = self.string("a quoted comment")?;
                    block.comment = Some(c);
                }
                Some(Tok::Word(w)) if w == "flowtable" => {
                    self.advance();
                    let ft = self.flowtable_decl(ti, family)?;
                    block.flowtables.push(ft);
                }
                Some(Tok::Word(w)) if w == "counter" => {
                    self.advance();
                    let obj = self.counter_obj(item_span)?;
                    block.objects.push(NamedObj::Counter(obj));
                }
                Some(Tok::Word(w)) if w == "quota" => {
                    self.advance();
                    let obj = self.quota_obj(item_span, false)?;
                    block.objects.push(NamedObj::Quota(obj));
                }
                Some(Tok::Word(w)) if w == "limit" => {
                    self.advance();
                    let obj = self.limit_obj(item_span, false)?;
                    block.objects.push(NamedObj::Limit(obj));
                }
                Some(Tok::Word(w)) if w == "flags" => {
                    self.advance();
                    let (f, fspan) = self.name("a table flag")?;
                    if f != "dormant" {
                        return Err(self
                            .st
                            .error(fspan, format!("expected `dormant`, found `{f}`")));
                    }
                }
                Some(Tok::Word(w)) if super::unsupported::TABLE_ITEMS.contains(&w.as_str()) => {
                    return Err(self.st.error(
                        item_span,
                        super::unsupported::message_with(&w, "a named object in a table"),
                    ));
                }
                None => {
                    return self.unclosed(
                        "`chain`, `set`, `map`, `flowtable`, `counter`, `quota`, `limit`, `plugin`, `comment` or `}`",
                        open,
                    );
                }
                _ => {
                    return self.expected(
                        "`chain`, `set`, `map`, `flowtable`, `counter`, `quota`, `limit`, `plugin`, `comment` or `}`",
                    );
                }
            }
            self.end_of_item()?;
        }
        self.apply_block(ti, block)
    }

    /// `counter NAME { [packets N bytes M] [comment "..."] }` (after `counter`), a named
    /// counter object; `span` is the `counter` keyword.
    fn counter_obj(&mut self, span: Span) -> PResult<CounterObj> {
        self.counter_obj_body(span, false)
    }

    /// [`Parser::counter_obj`]; with `inline` (`add counter FAMILY TABLE NAME`) the block may
    /// be left out.
    fn counter_obj_body(&mut self, span: Span, inline: bool) -> PResult<CounterObj> {
        let (name, nspan) = self.name("a counter name")?;
        let whole = Span {
            len: span.through(nspan).len,
            ..span
        };
        let mut obj = CounterObj {
            name,
            handle: 0,
            packets: 0,
            bytes: 0,
            comment: None,
            span: whole,
        };
        if inline && !self.at_punct("{")? {
            return Ok(obj);
        }
        let open = self.expect_punct("{")?;
        loop {
            self.skip_separators()?;
            match self.peek_tok()? {
                Some(Tok::Punct("}")) => {
                    self.advance();
                    return Ok(obj);
                }
                Some(Tok::Word(w)) if w == "packets" => {
                    self.advance();
                    obj.packets = self.number_u64()?;
                    self.expect_word("bytes")?;
                    obj.bytes = self.number_u64()?;
                }
                Some(Tok::Word(w)) if w == "comment" => {
                    self.advance();
                    obj.comment = Some(self.string("a quoted comment")?.0);
                }
                None => return self.unclosed("`packets`, `comment` or `}`", open),
                _ => return self.expected("`packets N bytes M`, `comment` or `}`"),
            }
        }
    }

    /// `flowtable NAME { hook ingress priority N; devices = { a, b }; counter; }` (after
    /// `flowtable`), as nft 1.0.6's `flowtable_block`; table `ti` of `family` receives it.
    /// The handle is given when the block is applied.
    fn flowtable_decl(&mut self, ti: usize, family: Family) -> PResult<FlowtableDecl> {
        let (name, nspan) = self.name("a flowtable name")?;
        if !matches!(family, Family::Ip | Family::Ip6 | Family::Inet) {
            // The kernel's flowtable types are inet, ip and ip6 (nf_flow_table_inet).
            return Err(self.st.error(
                nspan,
                format!(
                    "flowtables exist in ip, ip6 and inet tables only, not in a {} table (nft: Could not process rule: No such file or directory)",
                    family.name()
                ),
            ));
        }
        let open = self.expect_punct("{")?;
        let mut ft = FlowtableDecl {
            name,
            handle: 0,
            hook: Hook::Ingress,
            priority: 0,
            devices: Vec::new(),
            counter: false,
            span: nspan,
        };
        let mut hooked = false;
        loop {
            self.skip_separators()?;
            let ispan = self.peek_span()?;
            match self.peek_tok()? {
                Some(Tok::Punct("}")) => {
                    self.advance();
                    break;
                }
                Some(Tok::Word(w)) if w == "hook" => {
                    self.advance();
                    let Some(Tok::Word(h)) = self.peek_tok()? else {
                        return self.expected("`ingress`");
                    };
                    match h.as_str() {
                        "ingress" => {}
                        "egress" => {
                            // nft takes it (a netdev hook); the kernel's flowtables hook at
                            // ingress only (nft_flowtable_parse_hook: EOPNOTSUPP).
                            return Err(self.st.error(
                                nspan,
                                "a flowtable hooks at ingress only (nft: Could not process rule: Operation not supported)",
                            ));
                        }
                        _ => return Err(self.st.error(nspan, format!("invalid hook {h}"))),
                    }
                    self.advance();
                    let pspan = self.peek_span()?;
                    if !self.at_word("priority")? {
                        return self.expected("`priority`");
                    }
                    self.advance();
                    if let Some(Tok::Word(p)) = self.peek_tok()?
                        && STD_PRIOS.iter().any(|(n, _)| *n == p)
                        && p != "filter"
                    {
                        // nft: only `filter` names a netdev priority.
                        let vspan = self.peek_span()?;
                        return Err(self
                            .st
                            .error(pspan.through(vspan), "invalid priority expression value."));
                    }
                    ft.priority = self.priority(Family::Netdev, Hook::Ingress, pspan)?;
                    hooked = true;
                }
                Some(Tok::Word(w)) if w == "devices" => {
                    self.advance();
                    self.expect_punct("=")?;
                    for d in self.device_list()? {
                        if !ft.devices.contains(&d) {
                            ft.devices.push(d);
                        }
                    }
                }
                Some(Tok::Word(w)) if w == "counter" => {
                    self.advance();
                    ft.counter = true;
                }
                Some(Tok::Word(w)) if w == "flags" => {
                    return Err(self.st.error(
                        ispan,
                        super::unsupported::message_with(
                            "flags offload",
                            "hardware offload of a flowtable",
                        ),
                    ));
                }
                None => return self.unclosed("`hook`, `devices`, `counter` or `}`", open),
                _ => return self.expected("`hook`, `devices`, `counter` or `}`"),
            }
            self.end_of_item()?;
        }
        let exists = self.st.tables[ti]
            .flowtables
            .iter()
            .any(|f| f.name == ft.name);
        if !hooked && !exists {
            // The kernel needs the hook to create a flowtable (nft 1.0.7 says this itself).
            return Err(self
                .st
                .error(nspan, "missing hook and priority in flowtable declaration"));
        }
        Ok(ft)
    }

    /// `{ a, b, "c" }` (after `devices =`): device names in the order written.
    fn device_list(&mut self) -> PResult<Vec<String>> {
        let mut devices = Vec::new();
        self.expect_punct("{")?;
        loop {
            self.skip_newlines()?;
            devices.push(self.device_name()?);
            self.skip_newlines()?;
            if self.eat_punct(",")? {
                self.skip_newlines()?;
                if self.eat_punct("}")? {
                    break;
                }
                continue;
            }
            self.expect_punct("}")?;
            break;
        }
        Ok(devices)
    }

    /// After an item inside a block: a newline or `;` (nft requires one even before `}`).
    fn end_of_item(&mut self) -> PResult<()> {
        match self.peek_tok()? {
            Some(Tok::Newline) | Some(Tok::Punct(";")) => Ok(()),
            _ => self.expected("a newline or `;`"),
        }
    }

    /// The inside of `chain NAME { ... }` up to and including `}`.
    fn chain_body(&mut self, family: Family, decl: &mut ChainDecl, open: Span) -> PResult<()> {
        loop {
            self.skip_separators()?;
            let span = self.peek_span()?;
            match self.peek_tok()? {
                Some(Tok::Punct("}")) => {
                    self.advance();
                    return Ok(());
                }
                Some(Tok::Word(w)) if w == "type" => {
                    self.advance();
                    let base = self.hook_spec(family, span)?;
                    if base.chain_type == ChainType::Nat {
                        nat_chain_check(self, &base, decl.span)?;
                    }
                    if decl.base.is_some() {
                        return Err(self.st.error(span, "the chain's hook is already given"));
                    }
                    decl.base = Some(base);
                    decl.base_span = span;
                }
                Some(Tok::Word(w)) if w == "policy" => {
                    self.advance();
                    let p = if self.eat_word("accept")? {
                        Policy::Accept
                    } else if self.eat_word("drop")? {
                        Policy::Drop
                    } else {
                        return self.expected("`accept` or `drop`");
                    };
                    decl.policy = Some((p, span));
                }
                Some(Tok::Word(w)) if w == "comment" => {
                    self.advance();
                    let (c, _) = self.string("a quoted comment")?;
                    decl.comment = Some(c);
                }
                None => return self.unclosed("a rule or `}`", open),
                _ => {
                    let rule = self.rule(family)?;
                    decl.rules.push(rule);
                }
            }
            self.end_of_item()?;
        }
    }

    fn hook_spec(&mut self, family: Family, span: Span) -> PResult<BaseChain> {
        let tspan = self.peek_span()?;
        let chain_type = if self.eat_word("filter")? {
            ChainType::Filter
        } else if self.eat_word("nat")? {
            if !matches!(family, Family::Ip | Family::Ip6 | Family::Inet) {
                // The kernel has no nat chain type for these families.
                return Err(self.st.error(
                    tspan,
                    format!(
                        "nat chains exist in ip, ip6 and inet tables only, not in a {} table (nft: Could not process rule: No such file or directory)",
                        family.name()
                    ),
                ));
            }
            ChainType::Nat
        } else if self.eat_word("route")? {
            ChainType::Route
        } else {
            return self.expected("a chain type (`filter`, `nat` or `route`)");
        };
        self.expect_word("hook")?;
        let hspan = self.peek_span()?;
        let Some(Tok::Word(h)) = self.peek_tok()? else {
            return self.expected("a hook name");
        };
        let hook = match h.as_str() {
            "ingress" => Hook::Ingress,
            "egress" => Hook::Egress,
            "prerouting" => Hook::Prerouting,
            "input" => Hook::Input,
            "forward" => Hook::Forward,
            "output" => Hook::Output,
            "postrouting" => Hook::Postrouting,
            _ => return self.expected("a hook name"),
        };
        let ok = match family {
            Family::Netdev => matches!(hook, Hook::Ingress | Hook::Egress),
            Family::Inet => hook != Hook::Egress,
            Family::Arp => matches!(hook, Hook::Input | Hook::Output),
            _ => !matches!(hook, Hook::Ingress | Hook::Egress),
        };
        if !ok {
            return Err(self.st.error(
                hspan,
                format!("hook `{h}` is not valid in the {} family", family.name()),
            ));
        }
        self.advance();
        let mut devices = Vec::new();
        if self.eat_word("device")? {
            devices.push(self.device_name()?);
        } else if self.eat_word("devices")? {
            self.expect_punct("=")?;
            self.expect_punct("{")?;
            loop {
                self.skip_newlines()?;
                devices.push(self.device_name()?);
                self.skip_newlines()?;
                if self.eat_punct(",")? {
                    self.skip_newlines()?;
                    if self.eat_punct("}")? {
                        break;
                    }
                    continue;
                }
                self.expect_punct("}")?;
                break;
            }
        }
        let kw = self.expect_word("priority")?;
        let priority = self.priority(family, hook, kw)?;
        // nft 1.0.6 asks for a device for netdev chains and for inet ingress chains.
        if (family == Family::Netdev || (family == Family::Inet && hook == Hook::Ingress))
            && devices.is_empty()
        {
            return Err(self
                .st
                .error(span, "Missing `device' in this chain definition"));
        }
        Ok(BaseChain {
            chain_type,
            hook,
            devices,
            priority,
            policy: Policy::Accept,
        })
    }

    fn device_name(&mut self) -> PResult<String> {
        match self.peek_tok()? {
            Some(Tok::Word(w) | Tok::Str(w)) => {
                self.advance();
                Ok(w)
            }
            _ => self.expected("a device name"),
        }
    }

    /// `NUMBER`, `NAME` or `NAME +|- NUMBER` after the `priority` keyword at `kw` (where nft
    /// points when a named priority is not allowed at the hook).
    fn priority(&mut self, family: Family, hook: Hook, kw: Span) -> PResult<i32> {
        let span = self.peek_span()?;
        let Some(Tok::Word(w)) = self.peek_tok()? else {
            return self.expected("a priority (a number or a name such as `filter`)");
        };
        self.advance();
        let num = |s: &str| -> Option<i32> {
            let (neg, digits) = match s.strip_prefix('-') {
                Some(d) => (true, d),
                None => (false, s),
            };
            let v = crate::datatypes::parse_uint(digits).and_then(|v| i32::try_from(v).ok())?;
            Some(if neg { -v } else { v })
        };
        if let Some(n) = num(&w) {
            return Ok(n);
        }
        let Some(&(_, base)) = std_prios(family).iter().find(|(n, _)| *n == w) else {
            return Err(self.st.error(
                span,
                format!("expected a priority (a number or a name such as `filter`), found `{w}`"),
            ));
        };
        let mut len = span.len;
        let mut value = base;
        let sign_span = self.peek_span()?;
        if let Some(Tok::Punct(p @ ("+" | "-"))) = self.peek_tok()? {
            self.advance();
            let nspan = self.peek_span()?;
            let Some(Tok::Word(n)) = self.peek_tok()? else {
                return self.expected("a number");
            };
            let Some(off) = num(&n) else {
                return self.expected("a number");
            };
            self.advance();
            // nft computes in 32 bits and wraps: `raw - 2147483647` lists as 2147483349.
            let sum = if p == "+" {
                base.wrapping_add(off)
            } else {
                base.wrapping_sub(off)
            };
            value = sum;
            len = span.through(nspan).len;
            let _ = sign_span;
        } else if let Some(Tok::Word(n)) = self.peek_tok()?
            && n.starts_with('-')
            && let Some(off) = num(&n)
        {
            self.advance();
            value = base.wrapping_add(off);
        }
        if !std_prio_ok(base, family, hook) {
            // nft 1.0.6 points from `priority` to the end of the value.
            let at = Span { len, ..span };
            return Err(self.st.error(
                kw.through(at),
                "invalid priority expression value in this context.",
            ));
        }
        Ok(value)
    }

    /// `set NAME { ... }` / `map NAME { ... }` (after the keyword).
    pub(super) fn set_decl(&mut self, is_map: bool, span: Span) -> PResult<SetDecl> {
        let (name, _) = self.name("a set name")?;
        let open = self.expect_punct("{")?;
        let mut set = SetDecl {
            name,
            handle: 0,
            is_map,
            key: Vec::new(),
            key_typeof: None,
            data_typeof: None,
            data: None,
            flags: SetFlags::default(),
            timeout_ms: None,
            gc_interval_ms: None,
            size: None,
            counter: false,
            elements: Vec::new(),
            comment: None,
            span,
        };
        let mut pending_elems: Vec<Token> = Vec::new();
        let mut elem_start = None;
        loop {
            self.skip_separators()?;
            let ispan = self.peek_span()?;
            let Some(tok) = self.peek_tok()? else {
                return self.unclosed("`}`", open);
            };
            let word = match &tok {
                Tok::Punct("}") => {
                    self.advance();
                    break;
                }
                Tok::Word(w) => w.clone(),
                _ => return self.expected("a set property (`type`, `flags`, `elements`, ...)"),
            };
            self.advance();
            match word.as_str() {
                "type" => {
                    let mut key = Vec::new();
                    loop {
                        key.push(self.type_name()?);
                        if !self.eat_punct(".")? {
                            break;
                        }
                    }
                    set.key = key;
                    if is_map {
                        let sep = self.peek_tok()?;
                        if !matches!(sep, Some(Tok::Word(ref c)) if c == ":") {
                            return self.expected("`:` and the map's data type");
                        }
                        self.advance();
                        set.data = Some(self.type_name()?);
                    }
                }
                "typeof" => {
                    let mut exprs = Vec::new();
                    loop {
                        let (e, _) =
                            self.primary_expr(&mut super::expr::RuleCtx::new(Family::Inet))?;
                        exprs.push(e);
                        if !self.eat_punct(".")? {
                            break;
                        }
                    }
                    set.key = exprs.iter().map(Expr::dtype).collect();
                    set.key_typeof = Some(exprs);
                    if is_map {
                        if !matches!(self.peek_tok()?, Some(Tok::Word(ref c)) if c == ":") {
                            return self.expected("`:` and the map's data");
                        }
                        self.advance();
                        if self.eat_word("verdict")? {
                            set.data = Some(DataType::Verdict);
                        } else {
                            let (e, _) =
                                self.primary_expr(&mut super::expr::RuleCtx::new(Family::Inet))?;
                            set.data = Some(e.dtype());
                            set.data_typeof = Some(e);
                        }
                    }
                }
                "flags" => loop {
                    let (f, fspan) = self.name("a set flag")?;
                    match f.as_str() {
                        "interval" => set.flags.interval = true,
                        "timeout" => set.flags.timeout = true,
                        "constant" => set.flags.constant = true,
                        "dynamic" => set.flags.dynamic = true,
                        _ => {
                            return Err(self.st.error(
                                fspan,
                                format!(
                                    "expected a set flag (`interval`, `timeout`, `constant`, `dynamic`), found `{f}`"
                                ),
                            ));
                        }
                    }
                    if !self.eat_punct(",")? {
                        break;
                    }
                },
                "timeout" => set.timeout_ms = Some(self.time()?),
                "gc-interval" => set.gc_interval_ms = Some(self.time()?),
                "size" => {
                    let nspan = self.peek_span()?;
                    let Some(Tok::Word(n)) = self.peek_tok()? else {
                        return self.expected("a number");
                    };
                    let Some(v) =
                        crate::datatypes::parse_uint(&n).and_then(|v| u32::try_from(v).ok())
                    else {
                        return Err(self
                            .st
                            .error(nspan, format!("expected a number, found `{n}`")));
                    };
                    self.advance();
                    set.size = Some(v);
                }
                "policy" => {
                    if !(self.eat_word("performance")? || self.eat_word("memory")?) {
                        return self.expected("`performance` or `memory`");
                    }
                }
                "auto-merge" => {}
                "counter" => set.counter = true,
                "comment" => {
                    let (c, _) = self.string("a quoted comment")?;
                    set.comment = Some(c);
                }
                "elements" => {
                    self.expect_punct("=")?;
                    // Elements are typed by the key, which may be declared after them.
                    elem_start = Some(ispan);
                    let open = self.peek_span()?;
                    if !self.at_punct("{")? {
                        return self.expected("`{`");
                    }
                    let mut depth = 0usize;
                    loop {
                        let Some(t) = self.next()? else {
                            return Err(self.st.error(open, "expected `}` to close the elements"));
                        };
                        match t.tok {
                            Tok::Punct("{") => depth += 1,
                            Tok::Punct("}") => depth -= 1,
                            _ => {}
                        }
                        pending_elems.push(t);
                        if depth == 0 {
                            break;
                        }
                    }
                    continue;
                }
                _ => {
                    return Err(self.st.error(
                        ispan,
                        format!(
                            "expected a set property (`type`, `typeof`, `flags`, `timeout`, `size`, `comment`, `elements`), found `{word}`"
                        ),
                    ));
                }
            }
            self.end_of_item()?;
        }
        if set.timeout_ms.is_some() {
            // A default timeout implies the timeout flag (nft sets NFT_SET_TIMEOUT for it).
            set.flags.timeout = true;
        }
        if set.key.is_empty() {
            return Err(self.st.error(
                span,
                format!("set `{}` needs a `type` or `typeof`", set.name),
            ));
        }
        if !pending_elems.is_empty() {
            // Re-read the element tokens now that the key type is known.
            let saved = std::mem::take(&mut self.pending);
            self.pending = pending_elems.into_iter().rev().collect();
            self.expect_punct("{")?;
            let elems = self.elements(&set.key.clone(), set.data, Some(set.flags.interval))?;
            self.pending = saved;
            self.check_elem_counters(&set, &elems)?;
            set.elements = elems;
            let _ = elem_start;
        }
        Ok(set)
    }

    /// nft refuses `counter` on an element of a set that does not declare `counter`
    /// ("missing statement in set declaration", nft 1.0.6), in the declaration's `elements`
    /// and in `add element` alike, at the element's `counter`.
    fn check_elem_counters(&self, set: &SetDecl, elems: &[crate::model::SetElem]) -> PResult<()> {
        match elems.iter().find(|e| e.counter && !set.counter) {
            Some(e) => Err(self.st.error(
                e.counter_span.unwrap_or(e.span),
                "missing statement in set declaration".to_string(),
            )),
            None => Ok(()),
        }
    }

    fn type_name(&mut self) -> PResult<DataType> {
        let span = self.peek_span()?;
        let Some(Tok::Word(w)) = self.peek_tok()? else {
            return self.expected("a data type such as `ipv4_addr`");
        };
        match dtype_from_name(&w) {
            Some(d) => {
                self.advance();
                Ok(d)
            }
            None => Err(self.st.error(
                span,
                format!("expected a data type such as `ipv4_addr`, found `{w}`"),
            )),
        }
    }

    /// A duration (`30s`, `1h2m`).
    pub(super) fn time(&mut self) -> PResult<u64> {
        let span = self.peek_span()?;
        let Some(Tok::Word(w)) = self.peek_tok()? else {
            return self.expected("a time such as `30s`");
        };
        self.advance();
        crate::datatypes::parse_time_ms(&w).map_err(|m| self.st.error(span, m))
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
        match w.as_str() {
            "table" => self.table_command(span, false),
            "chain" => {
                let family = self.family()?;
                let (tname, tspan) = self.name("a table name")?;
                let ti = self.existing_table(family, &tname, tspan)?;
                let (cname, cspan) = self.name("a chain name")?;
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
                let set = self.set_decl(w == "map", span)?;
                let block = Block {
                    sets: vec![set],
                    ..Block::default()
                };
                self.apply_block(ti, block)
            }
            "rule" => self.rule_command(false),
            "ct" | "synproxy" | "secmark" => {
                // Named objects of nft that wasp does not read yet.
                let what = if w == "ct" {
                    match self.peek_tok()? {
                        Some(Tok::Word(k))
                            if matches!(k.as_str(), "helper" | "timeout" | "expectation") =>
                        {
                            format!("add ct {k}")
                        }
                        _ => return self.expected("`helper`, `timeout` or `expectation`"),
                    }
                } else {
                    format!("add {w}")
                };
                Err(self.st.error(
                    span,
                    super::unsupported::message_with(&what, "a named object"),
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
                let set = self.st.tables[ti].sets[si].clone();
                self.expect_punct("{")?;
                let elems = self.elements(&set.key, set.data, Some(set.flags.interval))?;
                self.check_elem_counters(&set, &elems)?;
                let jumps = elems.iter().any(|e| {
                    matches!(
                        e.data,
                        Some(crate::model::ElemData::Verdict(
                            crate::model::Verdict::Jump(_) | crate::model::Verdict::Goto(_)
                        ))
                    )
                });
                self.insert_elements(ti, si, elems, create)?;
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

    /// `add rule [family] TABLE CHAIN ...` / `insert rule ...`.
    fn rule_command(&mut self, insert: bool) -> PResult<()> {
        let family = self.family()?;
        let (tname, tspan) = self.name("a table name")?;
        let ti = self.existing_table(family, &tname, tspan)?;
        let (cname, cspan) = self.name("a chain name")?;
        if !self.st.tables[ti].chains.iter().any(|c| c.name == cname) {
            return Err(self.st.error(cspan, format!("unknown chain `{cname}`")));
        }
        let mut block = Block::default();
        self.plugins = self.st.tables[ti]
            .plugins
            .iter()
            .map(|p| p.name.clone())
            .collect();
        let rule = self.rule(family)?;
        let mut decl = ChainDecl::new(cname, cspan);
        decl.rules.push(rule);
        decl.insert = insert;
        block.chains.push(decl);
        self.apply_block(ti, block)
    }

    fn flush_command(&mut self) -> PResult<()> {
        if self.eat_word("ruleset")? {
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

    fn delete_command(&mut self) -> PResult<()> {
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
        } else {
            return self.expected("`table`, `chain`, `set`, `rule`, `element` or `flowtable`");
        };
        let family = self.family()?;
        let (tname, tspan) = self.name("a table name")?;
        let ti = self.existing_table(family, &tname, tspan)?;
        match what {
            "table" => {
                self.st.tables.remove(ti);
                self.st.next_handle.remove(ti);
            }
            "chain" => {
                let (cname, cspan) = self.name("a chain name")?;
                let t = &mut self.st.tables[ti];
                let Some(ci) = t.chains.iter().position(|c| c.name == cname) else {
                    return Err(self.st.error(cspan, format!("unknown chain `{cname}`")));
                };
                let used = t.chains.iter().any(|c| {
                    c.rules
                        .iter()
                        .any(|r| super::handles::rule_jumps(r).any(|j| j == cname))
                });
                if used || !t.chains[ci].rules.is_empty() {
                    return Err(self.st.error(
                        cspan,
                        format!("cannot delete chain `{cname}`: it is not empty or is jumped to"),
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
                let set = self.st.tables[ti].sets[si].clone();
                self.expect_punct("{")?;
                let elems = self.elements(&set.key, set.data, Some(set.flags.interval))?;
                self.delete_elements(ti, si, elems)?;
            }
        }
        Ok(())
    }
}

/// What the kernel refuses of a nat base chain when it is created (nft_chain_nat,
/// `nf_nat_register_fn`; nft 1.0.6 reports "Could not process rule: Operation not supported"
/// at the chain's name): a hook other than prerouting, input, output and postrouting, and a
/// priority at or below conntrack's (-200, NF_IP_PRI_CONNTRACK): NAT runs after conntrack.
fn nat_chain_check(p: &Parser<'_>, base: &BaseChain, name: Span) -> PResult<()> {
    if !matches!(
        base.hook,
        Hook::Prerouting | Hook::Input | Hook::Output | Hook::Postrouting
    ) {
        return Err(p.st.error(
            name,
            format!(
                "a nat chain hooks at prerouting, input, output or postrouting, not at {} (nft: Could not process rule: Operation not supported)",
                base.hook.name()
            ),
        ));
    }
    if base.priority <= -200 {
        return Err(p.st.error(
            name,
            format!(
                "a nat chain's priority must be above -200 (conntrack's), not {} (nft: Could not process rule: Operation not supported)",
                base.priority
            ),
        ));
    }
    Ok(())
}
