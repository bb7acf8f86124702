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
        let (name, name_span) = self.name("a set name")?;
        let open = self.expect_punct("{")?;
        let mut set = SetDecl {
            name,
            handle: 0,
            is_map,
            key: Vec::new(),
            key_typeof: None,
            data_typeof: None,
            data: None,
            data_tail: Vec::new(),
            flags: SetFlags::default(),
            timeout_ms: None,
            gc_interval_ms: None,
            size: None,
            counter: false,
            elements: Default::default(),
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
                        if !self.at_colon()? {
                            return self.expected("`:` and the map's data type");
                        }
                        self.advance();
                        let dspan = self.peek_span()?;
                        set.data = Some(self.type_name()?);
                        while self.eat_punct(".")? {
                            set.data_tail.push(self.type_name()?);
                        }
                        self.check_concat_data(&set, dspan)?;
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
                        if !self.at_colon()? {
                            return self.expected("`:` and the map's data");
                        }
                        self.advance();
                        if self.eat_word("verdict")? {
                            set.data = Some(DataType::Verdict);
                        } else {
                            let mut ctx = super::expr::RuleCtx::new(Family::Inet);
                            let dspan = self.peek_span()?;
                            let (e, _) = self.primary_expr(&mut ctx)?;
                            set.data = Some(e.dtype());
                            let mut parts = vec![e];
                            while self.eat_punct(".")? {
                                let (e, _) = self.primary_expr(&mut ctx)?;
                                set.data_tail.push(e.dtype());
                                parts.push(e);
                            }
                            self.check_concat_data(&set, dspan)?;
                            set.data_typeof = Some(if parts.len() == 1 {
                                parts.remove(0)
                            } else {
                                Expr::Concat(parts)
                            });
                        }
                    }
                }
                "flags" => loop {
                    let (f, fspan) = self.word_name("a set flag")?;
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
                // `timeout 0s` is none, as nft sends it (no timeout, no `flags timeout`).
                "timeout" => set.timeout_ms = Some(self.time()?).filter(|&t| t != 0),
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
                // nft's grammar has no `auto-merge` in a map.
                "auto-merge" if is_map => {
                    return Err(self.st.error(ispan, "syntax error, unexpected auto-merge"));
                }
                "auto-merge" => {
                    // nft's grammar wants no separator after it (`auto-merge }`,
                    // `auto-merge elements = { ... }`).
                    set.flags.auto_merge = true;
                    continue;
                }
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
        if set.flags.auto_merge && !set.flags.interval {
            // nft 1.0.6, at the set's name.
            return Err(self
                .st
                .error(name_span, "auto-merge only works with interval sets"));
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
            let elems = self.set_elements(&set)?;
            self.pending = saved;
            self.check_elem_counters(&set, &elems)?;
            set.elements = elems.into();
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
                e.counter_span().unwrap_or(e.span),
                "missing statement in set declaration".to_string(),
            )),
            None => Ok(()),
        }
    }

    /// Concatenated data has fields of fixed size (nft: "can not use variable sized data
    /// types (verdict) in concat expressions", at the data type at `span`).
    fn check_concat_data(&self, set: &SetDecl, span: Span) -> PResult<()> {
        if !set.data_tail.is_empty()
            && (set.data == Some(DataType::Verdict) || set.data_tail.contains(&DataType::Verdict))
        {
            return Err(self.st.error(
                span,
                "can not use variable sized data types (verdict) in concat expressions",
            ));
        }
        Ok(())
    }

    /// The elements of set `set` after `{` up to and including `}`: keys of its type, data of
    /// its data type (each field of concatenated data a single value, as nft requires).
    pub(super) fn set_elements(&mut self, set: &SetDecl) -> PResult<Vec<crate::model::SetElem>> {
        let saved = std::mem::replace(&mut self.data_tail, set.data_tail.clone());
        let elems = self.elements(&set.key, set.data, Some(set.flags.interval));
        self.data_tail = saved;
        elems
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

    /// Map data of several fields: read in a declaration by `type` or `typeof`, in its
    /// elements (single values only, as nft) and in a set statement, and listed as nft lists
    /// it (checked with `nft list ruleset`, 1.0.6).
    #[test]
    fn concatenated_map_data_reads_and_lists_as_nft() {
        let text = "table ip t {\n\tmap m {\n\t\ttype inet_service : ipv4_addr . inet_service\n\t\telements = { 80 : 10.0.0.2 . 8080, 443 : 10.0.0.3 . 8443 }\n\t}\n\n\tmap ty {\n\t\ttypeof ip saddr : ip daddr . tcp dport\n\t}\n\n\tmap map2 {\n\t\ttype ipv4_addr . ipv4_addr . inet_service : ipv4_addr . inet_service\n\t\tsize 65535\n\t}\n\n\tchain c {\n\t\ttype filter hook prerouting priority filter; policy accept;\n\t\tadd @map2 { ip saddr . ip daddr . th dport : 10.0.0.1 . 80 }\n\t}\n}\n";
        // The set statement gives the map the kernel's default size.
        let rs = parse_str(&text.replace("\t\tsize 65535\n", ""), "c.nft").expect("parses");
        assert_eq!(crate::print::ruleset(&rs, false), text);
        let m = &rs.tables[0].sets[0];
        assert_eq!(m.data, Some(crate::model::DataType::Ipv4Addr));
        assert_eq!(m.data_tail, [crate::model::DataType::InetService]);
        let Some(crate::model::ElemData::Nat(parts)) = &m.elements.get(0).unwrap().data else {
            panic!("concatenated data: {:?}", m.elements.get(0).unwrap().data);
        };
        assert_eq!(parts.len(), 2);
    }

    /// The malformed forms say where and what: a range in a named map's data (nft: "Value must
    /// be a singleton"), a missing field, a statement's data of several fields for data of one.
    #[test]
    fn concatenated_map_data_errors_say_where() {
        let err = |text: &str| parse_str(text, "c.nft").unwrap_err().to_string();
        let e = err(
            "table ip t {\n map m { type ipv4_addr : ipv4_addr . inet_service; elements = { 10.0.0.1 : 1.1.1.1-1.1.1.9 . 80 } }\n}\n",
        );
        assert!(
            e.contains("c.nft:2:77") && e.contains("Value must be a singleton"),
            "{e}"
        );
        let e = err(
            "table ip t {\n map m { type ipv4_addr : ipv4_addr . inet_service; elements = { 10.0.0.1 : 1.1.1.1 } }\n}\n",
        );
        assert!(
            e.contains("c.nft:2:85") && e.contains("next field of the map's data (inet_service)"),
            "{e}"
        );
        let e = err(
            "table ip t {\n map m { type ipv4_addr : ipv4_addr; }\n chain c { type filter hook input priority 0;\n  add @m { ip saddr : 10.0.0.1 . 80 }\n }\n}\n",
        );
        assert!(
            e.contains("c.nft:4:23") && e.contains("has data of one field (ipv4_addr)"),
            "{e}"
        );
    }

    /// A set statement's `counter` on a set that declares `counter` is listed without it, as
    /// nft lists it (the elements count anyway); on another set it stays.
    #[test]
    fn a_set_statements_counter_on_a_counting_set_lists_as_nft() {
        let text = "table ip t {\n\tset s {\n\t\ttypeof ip saddr\n\t\tflags dynamic\n\t\tcounter\n\t}\n\n\tset u {\n\t\ttypeof ip saddr\n\t\tflags dynamic\n\t}\n\n\tchain c {\n\t\ttype filter hook prerouting priority filter; policy accept;\n\t\tadd @s { ip saddr counter }\n\t\tadd @u { ip saddr counter }\n\t}\n}\n";
        let rs = parse_str(text, "c.nft").unwrap();
        // The set statement gives both sets the kernel's default size.
        assert_eq!(
            crate::print::ruleset(&rs, false),
            text.replace("add @s { ip saddr counter }", "add @s { ip saddr }")
                .replace("ip saddr\n\t\tflags", "ip saddr\n\t\tsize 65535\n\t\tflags")
        );
    }

    /// What nft refuses around maps of several data fields and the statements that read
    /// them, refused where nft refuses it: data of the wrong shape for NAT or for `fwd`, a
    /// verdict among concatenated data, a number as a device, a family without `to`; and
    /// nft's form without `to` read.
    #[test]
    fn map_data_shapes_are_checked_where_they_are_used() {
        let err = |text: &str| parse_str(text, "c.nft").unwrap_err().to_string();
        let nat = |data: &str, rule: &str| {
            format!(
                "table ip t {{\n map m {{ type ipv4_addr : {data}; }}\n chain c {{ type nat hook prerouting priority 0;\n  {rule}\n }}\n}}\n"
            )
        };
        let e = err(&nat(
            "ipv4_addr . inet_service . inet_service",
            "meta l4proto tcp dnat ip to ip saddr map @m",
        ));
        assert!(
            e.contains("c.nft:4:44") && e.contains("datatype mismatch"),
            "{e}"
        );
        let e = err(&nat("mark", "dnat to ip saddr map @m"));
        assert!(e.contains("datatype mismatch"), "{e}");
        let e = err(&nat("ipv4_addr", "dnat ip ip saddr map @m"));
        assert!(
            e.contains("c.nft:4:11") && e.contains("`to` after `dnat ip`"),
            "{e}"
        );
        let rs = parse_str(&nat("ipv4_addr", "dnat ip saddr map @m"), "c.nft").unwrap();
        assert!(crate::print::ruleset(&rs, false).contains("dnat to ip saddr map @m"));
        let e = err(
            "table netdev t {\n map d { type ipv4_addr : iface_index . ipv4_addr; }\n chain c { type filter hook ingress device \"lo\" priority 0;\n  fwd to ip saddr map @d\n }\n}\n",
        );
        assert!(
            e.contains("c.nft:4:23") && e.contains("datatype mismatch"),
            "{e}"
        );
        let e = err("table ip t {\n map m { type inet_service : ipv4_addr . verdict; }\n}\n");
        assert!(
            e.contains("c.nft:2:30") && e.contains("variable sized"),
            "{e}"
        );
        let e = err(
            "table netdev t {\n map d { type ipv4_addr : iface_index; elements = { 10.0.0.1 : 1 } }\n}\n",
        );
        assert!(
            e.contains("c.nft:2:64") && e.contains("not ifindexes"),
            "{e}"
        );
        // The separators as nft's scanner reads them, with or without spaces around.
        let rs = parse_str(
            "table ip t {\n map m { type inet_service: ipv4_addr . inet_service; elements = { 80 :10.0.0.2. 8080, 81: 10.0.0.3 . 81 } }\n chain c { type filter hook input priority 0;\n  tcp dport vmap { 22: accept, 23 :drop }\n }\n}\n",
            "c.nft",
        )
        .unwrap();
        let text = crate::print::ruleset(&rs, false);
        assert!(
            text.contains("elements = { 80 : 10.0.0.2 . 8080, 81 : 10.0.0.3 . 81 }")
                && text.contains("tcp dport vmap { 22 : accept, 23 : drop }"),
            "{text}"
        );
        // nft's keywords name nothing.
        let e = err("table ip t {\n chain fwd {\n }\n}\n");
        assert!(
            e.contains("c.nft:2:8") && e.contains("unexpected fwd"),
            "{e}"
        );
    }
}
