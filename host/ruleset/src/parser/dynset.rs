//! The set statement: `add @s { ip saddr }`, `update @s { ip saddr timeout 30s limit rate
//! 10/second }`, `delete @s { ip saddr }`, `add @m { ip saddr : meta mark }` (nft 1.0.6
//! `parser_bison.y` `set_stmt` / `map_stmt`). The set must be a named set of the rule's table
//! with keys of the expression's types; nft marks it `flags dynamic` and the kernel gives it a
//! size of 65535 when it has none (see [`super::handles`]).

use super::expr::RuleCtx;
use super::handles::Ref;
use super::{PResult, Parser};
use crate::lexer::Tok;
use crate::model::{SetOp, SetUpdate, Span, Stmt};

impl Parser<'_> {
    /// `true` when the next tokens start a set statement (`add|update|delete @NAME`).
    pub(super) fn at_set_update(&mut self) -> PResult<bool> {
        let Some(Tok::Word(w)) = self.peek_tok()? else {
            return Ok(false);
        };
        if !matches!(w.as_str(), "add" | "update" | "delete") {
            return Ok(false);
        }
        let Some(word) = self.next()? else {
            return Ok(false);
        };
        let yes = matches!(self.peek_tok()?, Some(Tok::SetRef(_)));
        self.pending.push(word);
        Ok(yes)
    }

    /// A set statement at `start` (its word not consumed yet).
    pub(super) fn set_update(&mut self, ctx: &mut RuleCtx, start: Span) -> PResult<Stmt> {
        let op = match self.peek_tok()? {
            Some(Tok::Word(w)) if w == "add" => SetOp::Add,
            Some(Tok::Word(w)) if w == "update" => SetOp::Update,
            _ => SetOp::Delete,
        };
        self.advance();
        let sspan = self.peek_span()?;
        let Some(Tok::SetRef(set)) = self.peek_tok()? else {
            return self.expected("`@set`");
        };
        self.advance();
        self.expect_punct("{")?;
        let (key, kspan) = self.concat_expr(ctx)?;
        let mut u = SetUpdate {
            op,
            set: set.clone(),
            key,
            timeout_ms: None,
            stmts: Vec::new(),
            data: None,
            span: start,
        };
        loop {
            let at = self.peek_span()?;
            match self.peek_tok()? {
                Some(Tok::Word(w)) if w == "timeout" && u.timeout_ms.is_none() => {
                    self.advance();
                    u.timeout_ms = Some(self.time()?);
                }
                Some(Tok::Word(w)) if w == "limit" => u.stmts.push(self.limit_stmt(ctx, at)?),
                Some(Tok::Word(w)) if w == "quota" => u.stmts.push(self.quota_stmt(ctx, at)?),
                Some(Tok::Word(w)) if w == "counter" => {
                    self.advance();
                    u.stmts.push(Stmt::Counter {
                        packets: 0,
                        bytes: 0,
                    });
                }
                _ => break,
            }
        }
        let mut map_data = None;
        if self.at_colon()? {
            self.advance();
            let Some((dtype, tail)) = self.declared_set_data(&set) else {
                return Err(self.st.error(
                    sspan,
                    format!("`@{set}` is not a map: its elements take no `: DATA`"),
                ));
            };
            let (data, dspan) = self.data_expr(ctx, dtype, &tail)?;
            if tail.is_empty() && matches!(data, crate::model::Expr::Concat(_)) {
                // A map's data of one field written as several (nft: "Can't parse symbolic
                // invalid expressions").
                return Err(self.st.error(
                    dspan,
                    format!(
                        "map `@{set}` has data of one field ({}): this data has several",
                        dtype.name()
                    ),
                ));
            }
            map_data = Some(dtype);
            u.data = Some(data);
        } else if self.declared_set_data(&set).is_some() {
            return Err(self.st.error(
                sspan,
                format!(
                    "`@{set}` is a map: write the element's data after the key (`{{ KEY : DATA }}`)"
                ),
            ));
        }
        let end = self.expect_punct("}")?;
        u.span = start.through(end);
        if op == SetOp::Delete && (u.timeout_ms.is_some() || !u.stmts.is_empty()) {
            return Err(self.st.error(
                u.span,
                "`delete @set` takes the key only (no timeout, no statements)",
            ));
        }
        if self.declared_set(&set).is_some_and(|s| s.counter) {
            // The set's elements count anyway: nft 1.0.6 lists the statement without its
            // `counter` (checked with `nft list ruleset`).
            u.stmts
                .retain(|s| !matches!(s, crate::model::Stmt::Counter { .. }));
        }
        self.refs.push(Ref::SetUpdate {
            name: set,
            span: sspan,
            key: u.key.key_types(),
            expr_text: self.st_text(kspan),
            map_data,
        });
        Ok(Stmt::SetUpdate(Box::new(u)))
    }

    /// The set `name` declared so far in a table (the rule's table is among them; a set
    /// statement refers to its own table's sets).
    fn declared_set(&self, name: &str) -> Option<&crate::model::SetDecl> {
        self.block_sets.iter().find(|s| s.name == name).or_else(|| {
            self.st
                .tables
                .iter()
                .flat_map(|t| &t.sets)
                .find(|s| s.name == name)
        })
    }

    /// The data type of the map `name` declared so far ([`Self::declared_set`]) and the
    /// further fields of concatenated data.
    pub(super) fn declared_set_data(
        &self,
        name: &str,
    ) -> Option<(crate::model::DataType, Vec<crate::model::DataType>)> {
        let s = self.declared_set(name)?;
        Some((s.data?, s.data_tail.clone()))
    }
}
