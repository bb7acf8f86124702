//! Connection tracking and NAT statements as nft 1.0.6 reads them (`parser_bison.y`
//! `nat_stmt`, `masq_stmt`, `redir_stmt`, `ct_stmt`, `connlimit_stmt`, `flow_offload_stmt`):
//!
//! - `snat [ip|ip6] [to] ADDR[-ADDR|/LEN][:PORT[-PORT]] [FLAGS]`, `dnat ...` (an IPv6 address
//!   with a port in brackets: `[2001:db8::1]:80`, `[a]-[b]:80`), `snat to :PORT[-PORT]`;
//! - `masquerade [to :PORT[-PORT]] [FLAGS]`, `redirect [to [:]PORT[-PORT]] [FLAGS]`;
//! - FLAGS: `random`, `fully-random`, `persistent`, comma-separated; a later group of flags
//!   replaces an earlier one (`random persistent` lists as `persistent`), as nft's grammar
//!   assigns them;
//! - `ct count [over] N`; `flow add @NAME` (also `flow offload @NAME`).
//!
//! What nft refuses here, with its message (checked with `nft -c -f`, nftables 1.0.6):
//! - an address without `ip`/`ip6` in an inet table ("ip or ip6 must be specified with address
//!   for inet tables."), `ip6` in an ip table or `ip` in an ip6 table ("conflicting protocols
//!   specified: ip vs. ip6. You must specify ip or ip6 family in nat statement"), both at the
//!   keyword;
//! - a port without a transport protocol match before it (`tcp dport 22`, `meta l4proto tcp`,
//!   `ip protocol tcp`; not `th dport`): "transport protocol mapping is only valid after
//!   transport protocol match", at the port;
//! - a range whose end is below its start ("Range has zero or negative size").
//!
//! Where the statements may be (nat chains and their hooks, `flow add` in forward) is the
//! kernel's check, made when the rule is added: see `handles::Parser::check_hooks`.

use std::net::IpAddr;

use super::expr::{RuleCtx, ct_family};
use super::{PResult, Parser};
use crate::datatypes::parse_value;
use crate::lexer::Tok;
use crate::model::{
    DataType, ElemData, Expr, Family, KeyPart, NatFlags, NatKind, NatStmt, SetRef, Span, Stmt,
};

/// One token of a NAT target, joined into its text.
struct Piece {
    /// Offset of the token's text in the joined text.
    at: usize,
    /// The token's place.
    span: Span,
}

/// The NAT target (`10.0.0.1-10.0.0.9:1000-2000`) as one text, with the tokens it came from.
struct Target {
    text: String,
    pieces: Vec<Piece>,
}

impl Target {
    /// The place of the text from byte `from` to byte `to` (on the line of the token that
    /// holds `from`).
    fn span(&self, from: usize, to: usize) -> Span {
        let i = self
            .pieces
            .iter()
            .rposition(|p| p.at <= from)
            .unwrap_or_default();
        let p = &self.pieces[i];
        let start = Span {
            col: p.span.col + (from - p.at) as u32,
            len: 1,
            ..p.span
        };
        let j = self
            .pieces
            .iter()
            .rposition(|p| p.at < to.max(from + 1))
            .unwrap_or(i);
        let q = &self.pieces[j];
        let end_col = q.span.col + (to.max(from + 1) - q.at) as u32;
        if q.span.line == start.line && end_col > start.col {
            Span {
                len: end_col - start.col,
                ..start
            }
        } else {
            start
        }
    }
}

const FLAG_WORDS: &[&str] = &["random", "fully-random", "persistent"];

impl Parser<'_> {
    /// After `snat`, `dnat`, `masquerade` or `redirect` at `start` (not consumed yet): the
    /// statement. Terminal (the caller refuses statements after it).
    pub(super) fn nat_stmt(&mut self, ctx: &RuleCtx, start: Span) -> PResult<Stmt> {
        let Some(Tok::Word(word)) = self.peek_tok()? else {
            return self.expected("`snat`, `dnat`, `masquerade` or `redirect`");
        };
        let kind = match word.as_str() {
            "snat" => NatKind::Snat,
            "dnat" => NatKind::Dnat,
            "masquerade" => NatKind::Masquerade,
            _ => NatKind::Redirect,
        };
        self.advance();
        if !matches!(ctx.family, Family::Ip | Family::Ip6 | Family::Inet) {
            // nft 1.0.6 evaluates this before anything else of the statement.
            return Err(self
                .st
                .error(start.through(start), "NAT is only supported for IPv4/IPv6"));
        }
        let mut end = start;
        let mut stmt = NatStmt {
            kind,
            family: None,
            addr: None,
            addr_range: false,
            ports: None,
            port_range: false,
            target: None,
            prefix: false,
            flags: NatFlags::default(),
            span: start,
        };
        let with_addr = matches!(kind, NatKind::Snat | NatKind::Dnat);
        let mut written_family = None;
        if with_addr
            && let Some(Tok::Word(w)) = self.peek_tok()?
            && (w == "ip" || w == "ip6")
        {
            // `dnat ip to ...` names the family; `dnat ip saddr map @m` (nft's form without
            // `to`) starts the target expression with it.
            let fspan = self.peek_span()?;
            let Some(word) = self.next()? else {
                return self.expected("`to`");
            };
            let family_word =
                matches!(self.peek_tok()?, Some(Tok::Word(ref n)) if n == "to" || n == "prefix");
            if family_word {
                written_family = Some((if w == "ip" { Family::Ip } else { Family::Ip6 }, fspan));
            } else if matches!(self.peek_tok()?, Some(Tok::Word(ref n)) if crate::model::PayloadField::named(&w, n).is_some())
            {
                self.pending.push(word);
            } else {
                // nft: "syntax error, unexpected ..." (a family wants `to`).
                return self.expected(&format!("`to` after `{} {w}`", kind.name()));
            }
        }
        let prefix_span = self.peek_span()?;
        let prefix = with_addr && self.eat_word("prefix")?;
        let to_span = self.peek_span()?;
        let to = self.eat_word("to")?;
        if to {
            end = to_span;
        }
        // snat/dnat need a target (`to` may be left out); masquerade/redirect may have one
        // after `to`.
        let has_target = with_addr || to;
        let computed = match self.peek_tok()? {
            Some(Tok::Word(w)) => {
                matches!(w.as_str(), "numgen" | "jhash" | "symhash") || self.at_expr()?
            }
            Some(Tok::SetRef(_)) => self.at_expr()?,
            _ => false,
        };
        if has_target && with_addr && computed {
            // `dnat to ip saddr map { ... }`, `dnat to numgen inc mod 2 map { ... }`: the
            // target computed from the packet.
            end = self.nat_computed(ctx, &mut stmt, start, written_family)?;
            stmt.prefix = prefix;
            if prefix && !matches!(stmt.target.as_deref(), Some(Expr::Map { .. })) {
                return Err(self.st.error(
                    prefix_span,
                    "`prefix` needs a map of prefixes as the target (`snat ip prefix to KEY map { ... }`)",
                ));
            }
        } else if prefix {
            return Err(self.st.error(
                prefix_span,
                "`prefix` needs a map of prefixes as the target (`snat ip prefix to KEY map { ... }`)",
            ));
        } else if has_target {
            let target = self.nat_target()?;
            let Some(target) = target else {
                return self.expected(if with_addr {
                    "an address or `:PORT` after `to`"
                } else if kind == NatKind::Masquerade {
                    "`:PORT` after `to`"
                } else {
                    "a port after `to`"
                });
            };
            end = target.pieces.last().map_or(end, |p| p.span);
            // In an inet table the rule's network protocol (`ip saddr ...`, `meta nfproto
            // ipv4`) stands for a missing `ip`/`ip6`; a written one must agree with it.
            let context = ctx.network().filter(|_| ctx.family == Family::Inet);
            if let (Some((w, _)), Some(c)) = (written_family, context)
                && w != c
            {
                return Err(self.st.error(
                    Span { len: 4, ..start },
                    format!(
                        "conflicting protocols specified: {} vs. {}. You must specify ip or ip6 family in nat statement",
                        c.name(),
                        w.name()
                    ),
                ));
            }
            if written_family.is_some()
                && target.text.starts_with(':')
                && !target.text.starts_with("::")
            {
                // `snat ip to :80` is a syntax error in nft (`ip` needs an address).
                return Err(self.st.error(
                    target.span(0, 1),
                    "expected an address after `ip`/`ip6 to` (nft: syntax error, unexpected colon)",
                ));
            }
            let family = written_family.or(context.map(|c| (c, start)));
            self.nat_parts(ctx, &mut stmt, &target, start, family)?;
        }
        // Flags: each group replaces the one before (nft assigns, it does not add).
        while let Some(Tok::Word(w)) = self.peek_tok()? {
            if !FLAG_WORDS.contains(&w.as_str()) {
                break;
            }
            let mut flags = NatFlags::default();
            loop {
                let fspan = self.peek_span()?;
                match self.peek_tok()? {
                    Some(Tok::Word(f)) if f == "random" => flags.random = true,
                    Some(Tok::Word(f)) if f == "fully-random" => flags.fully_random = true,
                    Some(Tok::Word(f)) if f == "persistent" => flags.persistent = true,
                    _ => return self.expected("`random`, `fully-random` or `persistent`"),
                }
                self.advance();
                end = fspan;
                if !self.eat_punct(",")? {
                    break;
                }
            }
            stmt.flags = flags;
            if !with_addr {
                // masquerade and redirect take one group of flags (nft: syntax error).
                if let Some(Tok::Word(w)) = self.peek_tok()?
                    && FLAG_WORDS.contains(&w.as_str())
                {
                    return self.expected("a newline or `;`");
                }
            }
        }
        stmt.span = start.through(end);
        Ok(Stmt::Nat(stmt))
    }

    /// `to EXPR` of `snat`/`dnat` (at EXPR): `KEY map { k : ADDR[ . PORT] }` / `KEY map @m`,
    /// or an expression giving the address as a number (`numgen inc mod 2 offset
    /// 167772161`). Sets `stmt.target` and `stmt.family`; returns the span of the last token.
    fn nat_computed(
        &mut self,
        ctx: &RuleCtx,
        stmt: &mut NatStmt,
        start: Span,
        written: Option<(Family, Span)>,
    ) -> PResult<Span> {
        let family = match (ctx.family, written) {
            (Family::Inet, None) => match ctx.network() {
                Some(f) => f,
                None => {
                    return Err(self.st.error(
                        Span { len: 4, ..start },
                        "ip or ip6 must be specified with address for inet tables.",
                    ));
                }
            },
            (Family::Inet, Some((f, _))) => f,
            (Family::Ip, Some((Family::Ip6, _))) | (Family::Ip6, Some((Family::Ip, _))) => {
                return Err(self.st.error(
                    Span { len: 4, ..start },
                    "conflicting protocols specified: ip vs. ip6. You must specify ip or ip6 family in nat statement",
                ));
            }
            (f, _) => f,
        };
        let addr = if family == Family::Ip6 {
            DataType::Ipv6Addr
        } else {
            DataType::Ipv4Addr
        };
        let mut rctx = *ctx;
        let (key, kspan) = self.value_expr(&mut rctx, addr)?;
        let mut end = kspan;
        let mut listed_family = ctx.family == Family::Inet;
        let target = if self.eat_word("map")? {
            let types = key.key_types();
            let mspan = self.peek_span()?;
            let map = if self.eat_punct("{")? {
                self.nat_map = true;
                let elems = self.elements(&types, Some(addr), None);
                self.nat_map = false;
                let elems = self.check_anonymous(&types, elems?, true)?;
                for e in &elems {
                    let Some(ElemData::Nat(parts)) = &e.data else {
                        continue;
                    };
                    // nft lists `ip`/`ip6` for a map of ranges or of address and port
                    // (`is_nat_addr_map`, `is_nat_proto_map`).
                    if parts.len() > 1 || !matches!(parts[0], KeyPart::Value(_)) {
                        listed_family = true;
                    }
                    if parts.len() > 1 && !rctx.transport() {
                        return Err(self.st.error(
                            e.span,
                            "transport protocol mapping is only valid after transport protocol match",
                        ));
                    }
                }
                end = mspan;
                SetRef::Anonymous(elems)
            } else if let Some(Tok::SetRef(name)) = self.peek_tok()? {
                self.advance();
                end = mspan;
                let declared = self.declared_set_data(&name);
                if let Some((first, tail)) = &declared
                    && (*first != addr || !matches!(tail.as_slice(), [] | [DataType::InetService]))
                {
                    // nft: "datatype mismatch: expected concatenation of (IPv4 address,
                    // internet network service), expression has type ...".
                    let have: Vec<&str> = std::iter::once(first.name())
                        .chain(tail.iter().map(|d| d.name()))
                        .collect();
                    return Err(self.st.error(
                        mspan,
                        format!(
                            "datatype mismatch: a NAT map's data is {} or {} . inet_service, map `@{name}` has {}",
                            addr.name(),
                            addr.name(),
                            have.join(" . ")
                        ),
                    ));
                }
                if declared.is_some_and(|(_, tail)| !tail.is_empty()) {
                    // An address and a port: nft lists the family (`is_nat_proto_map`) and
                    // wants the transport protocol known.
                    listed_family = true;
                    if !rctx.transport() {
                        return Err(self.st.error(
                            kspan,
                            "transport protocol mapping is only valid after transport protocol match",
                        ));
                    }
                }
                self.refs.push(super::handles::Ref::Set {
                    name: name.clone(),
                    span: mspan,
                    key: types,
                    expr_text: self.st_text(kspan),
                    map_data: Some(addr),
                });
                SetRef::Named(name)
            } else {
                return self.expected("`{` or `@map` after `map`");
            };
            Expr::Map {
                key: Box::new(key),
                map,
                data: addr,
            }
        } else {
            if matches!(key, Expr::Concat(_)) || key.dtype().width_bits() > addr.width_bits() {
                return Err(self.st.error(
                    kspan,
                    format!(
                        "expected an expression giving {} (`numgen`, `jhash`, a field) or `KEY map {{ ... }}`",
                        crate::datatypes::expected(addr)
                    ),
                ));
            }
            key
        };
        stmt.family = listed_family.then_some(family);
        stmt.target = Some(Box::new(target));
        Ok(end)
    }

    /// The tokens of a NAT target joined into one text: `[`, `]`, `-` and words, taken while
    /// one ends or the next starts with `:`, `-`, `[` or `]` (so `10.0.0.1 : 80` and
    /// `[fe80::1]-[fe80::5]:80` are one target, and `10.0.0.1 counter` is not). `None` when
    /// no target follows.
    fn nat_target(&mut self) -> PResult<Option<Target>> {
        let mut t = Target {
            text: String::new(),
            pieces: Vec::new(),
        };
        loop {
            let span = self.peek_span()?;
            let piece = match self.peek_tok()? {
                Some(Tok::Word(w)) => w,
                Some(Tok::Str(s)) if t.pieces.is_empty() => s,
                Some(Tok::Punct(p @ ("[" | "]" | "-"))) => p.to_string(),
                _ => break,
            };
            if let Some(last) = t.text.chars().last() {
                let joins = matches!(last, ':' | '-' | '[' | ']')
                    || piece.starts_with([':', '-', ']', '[']);
                if !joins || (last == ']' && piece.starts_with('[')) {
                    break;
                }
            } else if FLAG_WORDS.contains(&piece.as_str()) {
                break;
            }
            t.pieces.push(Piece {
                at: t.text.len(),
                span,
            });
            t.text.push_str(&piece);
            self.advance();
        }
        Ok((!t.pieces.is_empty()).then_some(t))
    }

    /// Read `target` into `stmt`'s address and ports, with nft's checks.
    fn nat_parts(
        &mut self,
        ctx: &RuleCtx,
        stmt: &mut NatStmt,
        target: &Target,
        start: Span,
        written: Option<(Family, Span)>,
    ) -> PResult<()> {
        let text = target.text.as_str();
        let with_addr = matches!(stmt.kind, NatKind::Snat | NatKind::Dnat);
        // Split into the address part and the port part (with its offset).
        let (addr_text, port): (&str, Option<(usize, &str)>) =
            if let Some(p) = text.strip_prefix(':').filter(|p| !p.starts_with(':')) {
                // `:PORT` (`::1` is an IPv6 address).
                ("", Some((1, p)))
            } else if !with_addr {
                // `redirect to 8080` (nft takes the port without `:` here).
                if stmt.kind == NatKind::Masquerade {
                    let s = target.span(0, text.len());
                    return Err(self.st.error(s, "expected `:PORT` after `masquerade to`"));
                }
                ("", Some((0, text)))
            } else if text.starts_with('[') {
                // `[v6]`, `[v6]-[v6]`, then `:PORT`.
                let close = last_bracket(text);
                match text[close..].find(':') {
                    Some(i) => (
                        &text[..close + i],
                        Some((close + i + 1, &text[close + i + 1..])),
                    ),
                    None => (text, None),
                }
            } else {
                let v6 = match written {
                    Some((f, _)) => f == Family::Ip6,
                    None => ctx.family == Family::Ip6,
                };
                if v6 {
                    (text, None)
                } else {
                    match text.find(':') {
                        Some(i) => (&text[..i], Some((i + 1, &text[i + 1..]))),
                        None => (text, None),
                    }
                }
            };
        if !addr_text.is_empty() {
            // The family of the address: the table's, or `ip`/`ip6` in an inet table.
            let family = match (ctx.family, written) {
                (Family::Inet, None) => {
                    return Err(self.st.error(
                        Span { len: 4, ..start },
                        "ip or ip6 must be specified with address for inet tables.",
                    ));
                }
                (Family::Inet, Some((f, _))) => f,
                (Family::Ip, Some((Family::Ip6, _))) | (Family::Ip6, Some((Family::Ip, _))) => {
                    let (t, w) = if ctx.family == Family::Ip {
                        ("ip", "ip6")
                    } else {
                        ("ip6", "ip")
                    };
                    return Err(self.st.error(
                        Span { len: 4, ..start },
                        format!("conflicting protocols specified: {t} vs. {w}. You must specify ip or ip6 family in nat statement"),
                    ));
                }
                (f, _) => f,
            };
            let dtype = if family == Family::Ip6 {
                DataType::Ipv6Addr
            } else {
                DataType::Ipv4Addr
            };
            let aspan = target.span(0, addr_text.len());
            let (lo, hi, range) = self.nat_addr(addr_text, dtype, aspan)?;
            stmt.addr = Some((lo, hi));
            stmt.addr_range = range;
            stmt.family = (ctx.family == Family::Inet).then_some(family);
        }
        if let Some((at, ptext)) = port {
            let pspan = target.span(at, text.len());
            if ptext.is_empty() {
                return Err(self.st.error(pspan, "expected a port after `:`"));
            }
            let (lo, hi, range) = match ptext.split_once('-') {
                Some((a, b)) => {
                    let lo = port_value(a).map_err(|m| self.st.error(pspan, m))?;
                    let hi = port_value(b).map_err(|m| self.st.error(pspan, m))?;
                    if lo > hi {
                        return Err(self.st.error(pspan, "Range has zero or negative size"));
                    }
                    (lo, hi, true)
                }
                None => {
                    let p = port_value(ptext).map_err(|m| self.st.error(pspan, m))?;
                    (p, p, false)
                }
            };
            if !ctx.transport() {
                return Err(self.st.error(
                    pspan,
                    "transport protocol mapping is only valid after transport protocol match",
                ));
            }
            stmt.ports = Some((lo, hi));
            stmt.port_range = range;
        }
        Ok(())
    }

    /// `A`, `A-B`, `A/LEN`, `[A]`, `[A]-[B]`: the range and whether it was written as one.
    fn nat_addr(
        &mut self,
        text: &str,
        dtype: DataType,
        span: Span,
    ) -> PResult<(IpAddr, IpAddr, bool)> {
        let unbracket = |s: &str| -> String {
            s.strip_prefix('[')
                .and_then(|s| s.strip_suffix(']'))
                .unwrap_or(s)
                .to_string()
        };
        let one = |p: &Self, s: &str| -> PResult<IpAddr> {
            let v = parse_value(dtype, &unbracket(s)).map_err(|m| p.st.error(span, m))?;
            Ok(to_ip(&v.bytes))
        };
        if let Ok(v) = parse_value(dtype, &unbracket(text)) {
            let a = to_ip(&v.bytes);
            return Ok((a, a, false));
        }
        if let Some((a, len)) = text.rsplit_once('/') {
            let lo = one(self, a)?;
            let bits: u32 = if dtype == DataType::Ipv6Addr { 128 } else { 32 };
            let Some(n) = crate::datatypes::parse_uint(len).filter(|n| *n <= u128::from(bits))
            else {
                return Err(self.st.error(
                    span,
                    format!("expected a prefix length of 0 to {bits} after `/`, found `{len}`"),
                ));
            };
            let n = n as u32;
            let (lo, hi) = prefix_range(lo, n);
            return Ok((lo, hi, true));
        }
        // A range: split at a `-` outside brackets whose two sides parse.
        for (i, _) in text.match_indices('-') {
            let (a, b) = (&text[..i], &text[i + 1..]);
            let (Ok(x), Ok(y)) = (
                parse_value(dtype, &unbracket(a)),
                parse_value(dtype, &unbracket(b)),
            ) else {
                continue;
            };
            if x.bytes > y.bytes {
                return Err(self.st.error(span, "Range has zero or negative size"));
            }
            return Ok((to_ip(&x.bytes), to_ip(&y.bytes), true));
        }
        one(self, text).map(|a| (a, a, false))
    }

    /// `ct count [over] N` (after `ct`, at `count`; `start` is the `ct` word).
    pub(super) fn ct_count(&mut self, family: Family, start: Span) -> PResult<Stmt> {
        ct_family(self, family, start)?;
        self.expect_word("count")?;
        let over = self.eat_word("over")?;
        let nspan = self.peek_span()?;
        let Some(Tok::Word(n)) = self.peek_tok()? else {
            return self.expected("a number of connections");
        };
        let Some(v) = crate::datatypes::parse_uint(&n).filter(|v| *v <= u128::from(u64::MAX))
        else {
            return Err(self.st.error(
                nspan,
                format!("expected a number of connections, found `{n}`"),
            ));
        };
        self.advance();
        // nft 1.0.6 keeps the low 32 bits (`ct count 4294967296` lists as `ct count 0`).
        let count = v as u32;
        Ok(Stmt::CtCount {
            over,
            count,
            span: start.through(nspan),
        })
    }

    /// `flow add @NAME` / `flow offload @NAME` (after `flow`, not consumed; `start` is it).
    pub(super) fn flow_add(&mut self, start: Span) -> PResult<Stmt> {
        self.advance();
        if !(self.eat_word("add")? || self.eat_word("offload")?) {
            return self.expected("`add` or `offload` after `flow`");
        }
        let nspan = self.peek_span()?;
        let Some(Tok::SetRef(name)) = self.peek_tok()? else {
            // nft: "syntax error, unexpected string, expecting @".
            return self.expected("`@` and a flowtable name");
        };
        self.advance();
        let span = start.through(nspan);
        self.refs.push(super::handles::Ref::Flowtable {
            name: name.clone(),
            span,
        });
        Ok(Stmt::FlowAdd {
            flowtable: name,
            span,
        })
    }
}

/// Index just after the last `]` of `text` (0 when none).
fn last_bracket(text: &str) -> usize {
    text.rfind(']').map_or(0, |i| i + 1)
}

/// A port number or service name (nft's `inet_service`).
fn port_value(text: &str) -> Result<u16, String> {
    let v = parse_value(DataType::InetService, text)?;
    Ok(u16::from_be_bytes([v.bytes[0], v.bytes[1]]))
}

/// The address of 4 or 16 big-endian bytes.
fn to_ip(b: &[u8]) -> IpAddr {
    match <[u8; 4]>::try_from(b) {
        Ok(a) => IpAddr::from(a),
        Err(_) => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[..16]);
            IpAddr::from(a)
        }
    }
}

/// The first and last address of `addr/len`.
fn prefix_range(addr: IpAddr, len: u32) -> (IpAddr, IpAddr) {
    match addr {
        IpAddr::V4(a) => {
            let v = u32::from(a);
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            (
                IpAddr::from((v & mask).to_be_bytes()),
                IpAddr::from((v | !mask).to_be_bytes()),
            )
        }
        IpAddr::V6(a) => {
            let v = u128::from(a);
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            (
                IpAddr::from((v & mask).to_be_bytes()),
                IpAddr::from((v | !mask).to_be_bytes()),
            )
        }
    }
}

/// The prefix length when `lo..=hi` is exactly one prefix.
pub(crate) fn range_prefix(lo: IpAddr, hi: IpAddr) -> Option<u32> {
    let (lo, hi, bits) = match (lo, hi) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u128::from(u32::from(a)), u128::from(u32::from(b)), 32),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128),
        _ => return None,
    };
    (0..=bits).find(|&n| {
        let host = bits - n;
        let span: u128 = if host >= 128 {
            u128::MAX
        } else {
            (1u128 << host) - 1
        };
        lo & span == 0 && hi == lo | span
    })
}
