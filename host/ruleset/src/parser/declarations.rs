//! Declarations: a `table` block and its items (chains, sets and maps, flowtables, named
//! `counter`/`quota`/`limit` and `ct helper|timeout|expectation` objects, plugins, the comment), gathered into one [`Block`] and
//! applied together when the block closes; and the bodies of a named counter and of a
//! flowtable, which the `add` commands share. Every item in a block ends with a newline or
//! `;`.

use super::chain::STD_PRIOS;
use super::handles::{Block, ChainDecl, NamedObj};
use super::{PResult, Parser};
use crate::lexer::Tok;
use crate::model::{CounterObj, Family, FlowtableDecl, Hook, Span, Table};

impl Parser<'_> {
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
            next_handle: 0,
            family,
            name: name.to_string(),
            handle: self.st.table_handle,
            chains: Vec::new(),
            sets: Vec::new(),
            plugins: Vec::new(),
            counters: Vec::new(),
            quotas: Vec::new(),
            limits: Vec::new(),
            ct_objects: Vec::new(),
            flowtables: Vec::new(),
            comment: None,
            span,
        });
        self.st.next_handle.push(1);
        self.st.tables.len() - 1
    }

    /// `table [family] NAME [{ ... }]` (after `table` or `add table`).
    pub(super) fn table_command(&mut self, span: Span, body_required: bool) -> PResult<()> {
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
                    self.block_sets.push(set.without_elements());
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
                Some(Tok::Word(w)) if w == "ct" => {
                    self.advance();
                    let (kind, kspan) = self.ct_obj_kind()?;
                    let obj = self.ct_obj(kind, kspan, family, item_span)?;
                    block.objects.push(NamedObj::Ct(obj));
                }
                Some(Tok::Word(w)) if w == "flags" => {
                    self.advance();
                    let (f, fspan) = self.word_name("a table flag")?;
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
                        "`chain`, `set`, `map`, `flowtable`, `counter`, `quota`, `limit`, `ct`, `plugin`, `comment` or `}`",
                        open,
                    );
                }
                _ => {
                    return self.expected(
                        "`chain`, `set`, `map`, `flowtable`, `counter`, `quota`, `limit`, `ct`, `plugin`, `comment` or `}`",
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
    pub(super) fn counter_obj_body(&mut self, span: Span, inline: bool) -> PResult<CounterObj> {
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
    pub(super) fn flowtable_decl(&mut self, ti: usize, family: Family) -> PResult<FlowtableDecl> {
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
    pub(super) fn end_of_item(&mut self) -> PResult<()> {
        match self.peek_tok()? {
            Some(Tok::Newline) | Some(Tok::Punct(";")) => Ok(()),
            _ => self.expected("a newline or `;`"),
        }
    }
}
