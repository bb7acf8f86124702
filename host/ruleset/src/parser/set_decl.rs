//! Set and map declarations (`set NAME { ... }`, `map NAME { ... }`): the key by `type` or
//! `typeof`, a map's data, flags, timeouts, size, counter, comment, and the `elements`, which
//! are read once the whole declaration is (the key may be declared after them). Also data
//! type names and durations, shared with element and statement syntax.

use super::{PResult, Parser};
use crate::lexer::{Tok, Token};
use crate::model::{DataType, Expr, Family, SetDecl, SetFlags, Span};

/// Data type names for `type ...` in a set declaration.
pub(crate) fn dtype_from_name(w: &str) -> Option<DataType> {
    DataType::from_name(w)
}

impl Parser<'_> {
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
                        self.refuse_concat_data()?;
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
                            self.refuse_concat_data()?;
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
    pub(super) fn check_elem_counters(
        &self,
        set: &SetDecl,
        elems: &[crate::model::SetElem],
    ) -> PResult<()> {
        match elems.iter().find(|e| e.counter && !set.counter) {
            Some(e) => Err(self.st.error(
                e.counter_span.unwrap_or(e.span),
                "missing statement in set declaration".to_string(),
            )),
            None => Ok(()),
        }
    }

    /// At a `.` after a map's data type: map data of several fields (`: ipv4_addr .
    /// inet_service`, nft's concatenated data) is refused as nft syntax wasp does not read yet.
    pub(super) fn refuse_concat_data(&mut self) -> PResult<()> {
        if self.at_punct(".")? {
            let span = self.peek_span()?;
            return Err(self.st.error(
                span,
                super::unsupported::message_with(
                    "map data of several fields",
                    "`: TYPE . TYPE`, concatenated data",
                ),
            ));
        }
        Ok(())
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
}

#[cfg(test)]
mod tests {
    use crate::parse_str;

    /// Map data of several fields is nft syntax wasp does not read yet: said at the `.`, in a
    /// declaration by `type` or `typeof` and in a set statement.
    #[test]
    fn concatenated_map_data_is_refused_where_it_starts() {
        let err = |text: &str| parse_str(text, "c.nft").unwrap_err().to_string();
        let e = err("table ip t {\n map m { type ipv4_addr : ipv4_addr . inet_service; }\n}\n");
        assert!(
            e.contains("c.nft:2:37") && e.contains("map data of several fields"),
            "{e}"
        );
        let e = err("table ip t {\n map m { typeof ip saddr : ip daddr . tcp dport; }\n}\n");
        assert!(
            e.contains("c.nft:2:37") && e.contains("map data of several fields"),
            "{e}"
        );
        let e = err(
            "table ip t {\n map m { type ipv4_addr : ipv4_addr; }\n chain c { type filter hook input priority 0;\n  add @m { ip saddr : 10.0.0.1 . 80 }\n }\n}\n",
        );
        assert!(
            e.contains("c.nft:4:23") && e.contains("map data of several fields"),
            "{e}"
        );
    }
}
