//! Right-hand values typed by the left-hand side: single values, ranges, prefixes,
//! concatenations and set elements.

use super::handles::Ref;
use super::{PResult, Parser};
use crate::datatypes::{expected, parse_uint, parse_value, to_uint};
use crate::lexer::{Tok, Token};
use crate::model::{DataType, ElemData, KeyPart, SetElem, Span, Value, Verdict};

fn join(a: Span, b: Span) -> Span {
    a.through(b)
}

/// Keep the first `bits` bits of `bytes` (big-endian), clearing the rest.
pub(crate) fn mask_prefix(bytes: &mut [u8], bits: u32) {
    for (i, b) in bytes.iter_mut().enumerate() {
        let start = (i as u32) * 8;
        if start >= bits {
            *b = 0;
        } else if bits - start < 8 {
            *b &= 0xffu8 << (8 - (bits - start));
        }
    }
}

impl Parser<'_> {
    /// One value of `dtype`, a word or a `"..."` string.
    pub(super) fn single_value(&mut self, dtype: DataType) -> PResult<(Value, Span)> {
        let span = self.peek_span()?;
        match self.peek_tok()? {
            // A `"..."` string is read by the data type too (nft resolves it so).
            Some(Tok::Word(w) | Tok::Str(w)) => {
                let v = parse_value(dtype, &w).map_err(|m| self.st.error(span, m))?;
                self.advance();
                Ok((v, span))
            }
            _ => self.expected(expected(dtype)),
        }
    }

    /// A value, a range `a-b` or a prefix `a/n` of `dtype`.
    pub(super) fn key_part(&mut self, dtype: DataType) -> PResult<(KeyPart, Span)> {
        let span = self.peek_span()?;
        let (text, quoted) = match self.peek_tok()? {
            Some(Tok::Word(w)) => (w, false),
            Some(Tok::Str(s)) => (s, true),
            _ => return self.expected(expected(dtype)),
        };
        if let Ok(mut v) = parse_value(dtype, &text) {
            self.advance();
            // A bitmask element may be written `syn | ack` (nft ORs the flags).
            if dtype == DataType::TcpFlag {
                while self.eat_punct("|")? {
                    let (w, _) = self.single_value(dtype)?;
                    for (a, b) in v.bytes.iter_mut().zip(&w.bytes) {
                        *a |= b;
                    }
                }
            }
            if self.at_punct("-")? {
                self.advance();
                let (hi, hspan) = self.single_value(dtype)?;
                let whole = join(span, hspan);
                return self.range(v, hi, whole);
            }
            return Ok((KeyPart::Value(v), span));
        }
        if !quoted && dtype != DataType::Ifname {
            if let Some((addr, len)) = text.rsplit_once('/')
                && let Ok(mut v) = parse_value(dtype, addr)
            {
                let bits = u32::from(dtype.width_bits());
                let Some(n) = parse_uint(len).filter(|n| *n <= u128::from(bits)) else {
                    return Err(self.st.error(
                        span,
                        format!("expected a prefix length of 0 to {bits} after `/`, found `{len}`"),
                    ));
                };
                // The value is right-aligned in its bytes: mask from the first used bit.
                let pad = (v.bytes.len() as u32) * 8 - bits;
                mask_prefix(&mut v.bytes, pad + n as u32);
                self.advance();
                return Ok((KeyPart::Prefix(v, n as u8), span));
            }
            for (i, _) in text.match_indices('-') {
                let (a, b) = (&text[..i], &text[i + 1..]);
                if let (Ok(lo), Ok(hi)) = (parse_value(dtype, a), parse_value(dtype, b)) {
                    self.advance();
                    return self.range(lo, hi, span);
                }
            }
        }
        // Report the error of the plain value (it names what was expected).
        let msg = parse_value(dtype, &text).err().unwrap_or_default();
        Err(self.st.error(span, msg))
    }

    fn range(&mut self, lo: Value, hi: Value, span: Span) -> PResult<(KeyPart, Span)> {
        // An hour range may wrap around midnight (`"21:00"-"02:00"`): the match takes it as
        // the complement of the range between (see `Parser::match_or_set`).
        if lo.bytes > hi.bytes && lo.dtype != DataType::Hour {
            return Err(self.st.error(span, "Range has zero or negative size"));
        }
        Ok((KeyPart::Range(lo, hi), span))
    }

    /// `25:accept` in a map is `25 : accept` (nft's scanner ends a number at `:`); a word
    /// is split at its last `:` when the key's last type writes no `:` of its own.
    fn split_glued_colon(&mut self, key: &[DataType]) -> PResult<()> {
        let colon_type = matches!(
            key.last(),
            Some(DataType::Ipv6Addr | DataType::EtherAddr | DataType::TcHandle | DataType::Hour)
        );
        if key.len() != 1 {
            return Ok(());
        }
        let Some(t) = self.peek()?.cloned() else {
            return Ok(());
        };
        let Tok::Word(w) = &t.tok else {
            return Ok(());
        };
        let Some((k, d)) = w.rsplit_once(':') else {
            return Ok(());
        };
        // `::dddd: drop`: a trailing `:` that the key cannot hold is the separator (nft's
        // scanner takes the longest address it can read, `::dddd`, then `:`).
        if d.is_empty()
            && !k.is_empty()
            && colon_type
            && parse_value(key[0], w).is_err()
            && parse_value(key[0], k).is_ok()
        {
            let n = k.chars().count() as u32;
            let (k, colon) = (
                k.to_string(),
                Span {
                    col: t.span.col + n,
                    len: 1,
                    ..t.span
                },
            );
            self.advance();
            self.pending.push(crate::lexer::Token {
                tok: Tok::Word(":".to_string()),
                span: colon,
            });
            self.pending.push(crate::lexer::Token {
                tok: Tok::Word(k),
                span: Span { len: n, ..t.span },
            });
            return Ok(());
        }
        // In a type written with colons (`1234::1:accept`) only a verdict after the last one
        // is the data.
        let verdict = matches!(d, "accept" | "drop" | "continue" | "return");
        if k.is_empty() || d.is_empty() || (colon_type && !verdict) {
            return Ok(());
        }
        let n = k.chars().count() as u32;
        let at = |col: u32, len: u32| Span {
            col: t.span.col + col,
            len: len.max(1),
            ..t.span
        };
        let (k, d) = (k.to_string(), d.to_string());
        let dlen = d.chars().count() as u32;
        self.advance();
        self.pending.push(crate::lexer::Token {
            tok: Tok::Word(d),
            span: at(n + 1, dlen),
        });
        self.pending.push(crate::lexer::Token {
            tok: Tok::Word(":".to_string()),
            span: at(n, 1),
        });
        self.pending.push(crate::lexer::Token {
            tok: Tok::Word(k),
            span: at(0, n),
        });
        Ok(())
    }

    /// A key: one part per type, separated by `.`.
    pub(super) fn key(&mut self, types: &[DataType]) -> PResult<(Vec<KeyPart>, Span)> {
        let mut parts = Vec::with_capacity(types.len());
        let start = self.peek_span()?;
        let mut end = start;
        for (i, t) in types.iter().enumerate() {
            if i > 0 && !self.eat_punct(".")? {
                let names: Vec<&str> = types.iter().map(|d| d.name()).collect();
                return self.expected(&format!(
                    "`.` and {} (the key is {})",
                    expected(*t),
                    names.join(" . ")
                ));
            }
            let (p, s) = self.key_part(*t)?;
            parts.push(p);
            end = s;
        }
        if self.at_punct(".")? {
            let names: Vec<&str> = types.iter().map(|d| d.name()).collect();
            return self.expected(&format!(
                "the end of the key ({} has {} field{})",
                names.join(" . "),
                types.len(),
                if types.len() == 1 { "" } else { "s" }
            ));
        }
        Ok((parts, join(start, end)))
    }

    /// A verdict word: `accept`, `drop`, `continue`, `return`, `jump X`, `goto X`.
    pub(super) fn verdict(&mut self) -> PResult<Option<(Verdict, Span)>> {
        let span = self.peek_span()?;
        let Some(Tok::Word(w)) = self.peek_tok()? else {
            return Ok(None);
        };
        let v = match w.as_str() {
            "accept" => Verdict::Accept,
            "drop" => Verdict::Drop,
            "continue" => Verdict::Continue,
            "return" => Verdict::Return,
            "jump" | "goto" => {
                self.advance();
                let (target, tspan) = self.name("a chain name")?;
                self.refs.push(Ref::Chain {
                    name: target.clone(),
                    span: tspan,
                });
                let whole = join(span, tspan);
                return Ok(Some((
                    if w == "jump" {
                        Verdict::Jump(target)
                    } else {
                        Verdict::Goto(target)
                    },
                    whole,
                )));
            }
            _ => return Ok(None),
        };
        self.advance();
        Ok(Some((v, span)))
    }

    /// Elements after `{` up to and including `}`. `interval` is `Some(false)` for a named set
    /// without `flags interval` (ranges and prefixes are refused there, as nft does).
    pub(super) fn elements(
        &mut self,
        key: &[DataType],
        data: Option<DataType>,
        interval: Option<bool>,
    ) -> PResult<Vec<SetElem>> {
        let mut out = Vec::new();
        let mut first = true;
        loop {
            self.skip_newlines()?;
            if first && self.at_punct("}")? {
                // nft: "syntax error, unexpected '}'" (its grammar has no empty set).
                return self.expected("a set element (nft has no empty `{ }`)");
            }
            first = false;
            if self.peek()?.is_none() {
                return self.expected("a set element or `}`");
            }
            if self.eat_punct("}")? {
                return Ok(out);
            }
            let open = self.peek_span()?;
            if self.eat_punct("{")? {
                // A nested set (from a variable): its elements join this one.
                // `nesting` counts the levels inside the outermost `{`.
                if self.nesting + 1 >= super::MAX_NESTING {
                    return Err(self.st.error(
                        open,
                        format!(
                            "sets nest too deeply, max {} levels of `{{`",
                            super::MAX_NESTING
                        ),
                    ));
                }
                self.nesting += 1;
                let inner = self.elements(key, data, interval);
                self.nesting -= 1;
                out.extend(inner?);
            } else {
                out.push(self.element(key, data, interval)?);
            }
            self.skip_newlines()?;
            if self.eat_punct(",")? {
                // nft takes empty places in the list (`{ a,, b }`).
                while self.eat_punct(",")? {
                    self.skip_newlines()?;
                }
                continue;
            }
            if self.at_punct("}")? {
                continue;
            }
            return self.expected("`,` or `}`");
        }
    }

    fn element(
        &mut self,
        key: &[DataType],
        data: Option<DataType>,
        interval: Option<bool>,
    ) -> PResult<SetElem> {
        let star = self.peek_span()?;
        if self.eat_word("*")? {
            // The catch-all element (nft's `asterisk_string` as a set element key).
            let elem = SetElem::catch_all(star);
            return self.element_rest(elem, data);
        }
        if data.is_some() {
            self.split_glued_colon(key)?;
        }
        let (parts, span) = self.key(key)?;
        if interval == Some(false) {
            for p in &parts {
                let kind = match p {
                    KeyPart::Range(..) => "range",
                    KeyPart::Prefix(..) => "prefix",
                    KeyPart::Value(_) => continue,
                };
                return Err(self.st.error(
                    span,
                    format!(
                        "You must add 'flags interval' to your set declaration if you want to add {kind} elements"
                    ),
                ));
            }
        }
        self.element_rest(SetElem::new(parts, span), data)
    }

    /// What follows an element's key: `timeout`, `expires`, `comment`, `counter`, and with
    /// map data `: DATA`.
    fn element_rest(&mut self, mut elem: SetElem, data: Option<DataType>) -> PResult<SetElem> {
        loop {
            if self.eat_word("timeout")? {
                // `timeout 0s` is none (nft sends no timeout: the element never expires).
                let t = self.time()?;
                if t != 0 {
                    elem.extra_mut().timeout_ms = Some(t);
                }
            } else if self.eat_word("expires")? {
                elem.extra_mut().expires_ms = Some(self.time()?);
            } else if self.eat_word("comment")? {
                elem.extra_mut().comment = Some(self.string("a quoted comment")?.0);
            } else if self.at_word("counter")? {
                elem.extra_mut().counter_span = Some(self.peek_span()?);
                self.advance();
                elem.counter = true;
                if self.eat_word("packets")? {
                    elem.extra_mut().packets = self.number_u64()?;
                    self.expect_word("bytes")?;
                    elem.extra_mut().bytes = self.number_u64()?;
                }
            } else {
                break;
            }
        }
        if let Some(d) = data {
            if !self.at_colon()? {
                if self.data_optional {
                    return Ok(elem);
                }
                return self.expected("`:` and the element's data");
            }
            self.advance();
            if d == DataType::Verdict {
                match self.verdict()? {
                    Some((v, _)) => elem.data = Some(ElemData::Verdict(v)),
                    None => {
                        return self.expected("a verdict (`accept`, `drop`, `jump CHAIN`, ...)");
                    }
                }
            } else if !self.data_tail.is_empty() {
                // Concatenated data of a named map: a single value per field (nft: "Value
                // must be a singleton" for a range or prefix there).
                let mut parts = Vec::with_capacity(1 + self.data_tail.len());
                for (i, t) in std::iter::once(d).chain(self.data_tail.clone()).enumerate() {
                    if i > 0 && !self.eat_punct(".")? {
                        return self.expected(&format!(
                            "`.` and the next field of the map's data ({})",
                            t.name()
                        ));
                    }
                    let (part, span) = self.key_part(t)?;
                    if !matches!(&part, KeyPart::Value(v) if !v.wildcard) {
                        return Err(self.st.error(span, "Value must be a singleton"));
                    }
                    parts.push(part);
                }
                elem.data = Some(ElemData::Nat(parts));
            } else if self.nat_map {
                // An address (value, range or prefix), then maybe `. PORT[-PORT]`.
                let (addr, _) = self.key_part(d)?;
                let mut parts = vec![addr];
                if self.eat_punct(".")? {
                    parts.push(self.key_part(DataType::InetService)?.0);
                }
                elem.data = Some(ElemData::Nat(parts));
            } else {
                if d == DataType::IfaceIndex
                    && let Some(Tok::Word(w)) = self.peek_tok()?
                    && w.chars().all(|c| c.is_ascii_digit())
                {
                    // nft reads a number as an ifindex (of its host); the data of a map of
                    // devices names them in wasp, as `fwd to "eth1"` does.
                    let span = self.peek_span()?;
                    return Err(self.st.error(
                        span,
                        format!("wasp names output devices, not ifindexes: write the device's name in quotes instead of `{w}`"),
                    ));
                }
                let (v, _) = self.single_value(d)?;
                elem.data = Some(ElemData::Value(v));
            }
        }
        Ok(elem)
    }

    /// An unsigned number.
    pub(super) fn number_u64(&mut self) -> PResult<u64> {
        let span = self.peek_span()?;
        if let Some(Token {
            tok: Tok::Word(w), ..
        }) = self.peek()?.cloned()
            && let Some(n) = parse_uint(&w).and_then(|n| u64::try_from(n).ok())
        {
            self.advance();
            return Ok(n);
        }
        let _ = span;
        self.expected("a number")
    }
}

/// `true` when the value is a VLAN ether type (8021q or 8021ad).
pub(crate) fn is_vlan_type(v: &Value) -> bool {
    v.dtype == DataType::EtherType && matches!(to_uint(v), 0x8100 | 0x88a8)
}
