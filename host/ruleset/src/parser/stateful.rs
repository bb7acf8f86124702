//! The stateful statements `limit` and `quota`, their named objects (`limit NAME { ... }`,
//! `quota NAME { ... }`, `add limit|quota|counter FAMILY TABLE NAME ...`) and references
//! (`limit name NAME`, `quota name NAME`), as nft 1.0.6 reads them (`parser_bison.y`:
//! `limit_stmt`, `quota_stmt`, `limit_config`, `quota_config`), with the checks the kernel makes
//! when it gets them (`nft_limit_init`, `nft_quota_do_init`).

use super::expr::RuleCtx;
use super::{PResult, Parser, unsupported};
use crate::lexer::Tok;
use crate::model::{
    DataType, ElemData, LIMIT_PKT_BURST_DEFAULT, Limit, LimitObj, ObjKind, Quota, QuotaObj, SetRef,
    Span, Stmt,
};

/// Time units of a limit rate and their length in seconds (nft's `time_unit_parse`).
const TIME_UNITS: &[(&str, u64)] = &[
    ("second", 1),
    ("minute", 60),
    ("hour", 3600),
    ("day", 86400),
    ("week", 604800),
];

/// Data units nft reads (`data_unit_parse`) and their size in bytes.
const DATA_UNITS: &[(&str, u64)] = &[("bytes", 1), ("kbytes", 1024), ("mbytes", 1024 * 1024)];

/// Largest quota the kernel takes (`nft_quota_do_init`: EOVERFLOW above S64_MAX).
const QUOTA_MAX: u64 = i64::MAX as u64;

/// The message nft gives for a kernel error: "(nft: Could not process rule: WHAT)".
fn kernel(what: &str) -> String {
    format!("(nft: Could not process rule: {what})")
}

fn data_unit(w: &str) -> Option<u64> {
    DATA_UNITS.iter().find(|(n, _)| *n == w).map(|(_, m)| *m)
}

fn time_unit(w: &str) -> Option<u64> {
    TIME_UNITS.iter().find(|(n, _)| *n == w).map(|(_, s)| *s)
}

/// The kernel's checks of a limit at load (`nft_limit_init`): a rate of 0 is EINVAL; the
/// bucket size in ns must fit 64 bits (EOVERFLOW).
pub(crate) fn limit_kernel_error(l: &Limit) -> Option<String> {
    if l.rate == 0 {
        return Some(format!(
            "a limit rate of 0 is refused by the kernel {}",
            kernel("Invalid argument")
        ));
    }
    let nsecs = l.per_secs.checked_mul(1_000_000_000);
    let burst = if l.bytes || l.burst != 0 {
        u64::from(l.burst)
    } else {
        u64::from(LIMIT_PKT_BURST_DEFAULT)
    };
    let fits = nsecs.zip(l.rate.checked_add(burst)).and_then(|(ns, rb)| {
        if l.bytes {
            ns.checked_mul(rb)
        } else {
            (ns / l.rate).checked_mul(burst)
        }
    });
    fits.is_none().then(|| {
        format!(
            "the limit's bucket does not fit the kernel's 64-bit nanoseconds {}",
            kernel("Value too large for defined data type")
        )
    })
}

/// The kernel's checks of a quota at load (`nft_quota_do_init`).
pub(crate) fn quota_kernel_error(q: &Quota) -> Option<String> {
    if q.bytes > QUOTA_MAX {
        return Some(format!(
            "a quota above {QUOTA_MAX} bytes is refused by the kernel {}",
            kernel("Value too large for defined data type")
        ));
    }
    (q.used > q.bytes).then(|| {
        format!(
            "the quota's used bytes ({}) exceed the quota ({} bytes) {}",
            q.used,
            q.bytes,
            kernel("Invalid argument")
        )
    })
}

impl Parser<'_> {
    /// A word token, consumed, with its span; `what` names it in the error otherwise.
    fn word(&mut self, what: &str) -> PResult<(String, Span)> {
        let span = self.peek_span()?;
        match self.peek_tok()? {
            Some(Tok::Word(w)) => {
                self.advance();
                Ok((w, span))
            }
            _ => self.expected(what),
        }
    }

    /// A number written as a whole word or before a `/` (`400/minute`), as nft's NUM (64 bits).
    fn stateful_number(&mut self, text: &str, span: Span) -> PResult<u64> {
        match crate::datatypes::parse_uint(text).and_then(|n| u64::try_from(n).ok()) {
            Some(n) => Ok(n),
            None => Err(self
                .st
                .error(span, format!("expected a number, found `{text}`"))),
        }
    }

    /// `N bytes|kbytes|mbytes` (after the number `n` at `nspan`): the bytes, units applied.
    fn data_amount(&mut self, n: u64, nspan: Span) -> PResult<(u64, Span)> {
        let (u, uspan) = self.word("`bytes`, `kbytes` or `mbytes`")?;
        match data_unit(&u) {
            Some(m) => Ok((n.wrapping_mul(m), uspan)),
            None => Err(self.st.error(
                nspan.through(uspan),
                format!(
                    "expected `bytes`, `kbytes` or `mbytes`, found `{u}` (nft: Wrong rate format)"
                ),
            )),
        }
    }

    /// `rate [over|until] N/UNIT [burst M packets]` or `rate [over|until] N BYTES/UNIT [burst
    /// M BYTES]`: a limit's configuration (nft's `limit_config`). Returns it and the span of
    /// its last token.
    pub(super) fn limit_config(&mut self) -> PResult<(Limit, Span)> {
        self.expect_word("rate")?;
        let over = if self.eat_word("over")? {
            true
        } else {
            self.eat_word("until")?;
            false
        };
        let (first, fspan) = self.word("a rate (`N/second`, `N kbytes/second`, ...)")?;
        // `400/minute`, `400/ minute`, `400 /minute`, `400 / minute`; `1 kbytes/second`,
        // `1 kbytes / second`.
        let (num, after) = match first.split_once('/') {
            Some((n, u)) => (n.to_string(), Some(u.to_string())),
            None => (first.clone(), None),
        };
        if num.is_empty() {
            return Err(self
                .st
                .error(fspan, format!("expected a number, found `{first}`")));
        }
        let rate = self.stateful_number(&num, fspan)?;
        let mut bytes = false;
        let mut mult = 1;
        let mut unit_text = after;
        let mut last = fspan;
        if unit_text.is_none() {
            let (w, wspan) = self.word("`/` and a time unit, or `bytes`, `kbytes` or `mbytes`")?;
            last = wspan;
            let (head, tail) = match w.split_once('/') {
                Some((h, t)) => (h.to_string(), Some(t.to_string())),
                None => (w.clone(), None),
            };
            if !head.is_empty() {
                let Some(m) = data_unit(&head) else {
                    return Err(self.st.error(
                        fspan.through(wspan),
                        format!(
                            "expected `/` and a time unit, or `bytes`, `kbytes` or `mbytes`, found `{head}` (nft: Wrong rate format)"
                        ),
                    ));
                };
                bytes = true;
                mult = m;
                unit_text = tail;
                if unit_text.is_none() {
                    let (slash, sspan) = self.word("`/` and a time unit")?;
                    last = sspan;
                    match slash.strip_prefix('/') {
                        Some(t) => unit_text = Some(t.to_string()),
                        None => {
                            return Err(self.st.error(
                                sspan,
                                format!("expected `/` and a time unit, found `{slash}`"),
                            ));
                        }
                    }
                }
            } else {
                unit_text = tail;
            }
        }
        let mut unit = unit_text.unwrap_or_default();
        if unit.is_empty() {
            let (u, uspan) =
                self.word("a time unit (`second`, `minute`, `hour`, `day`, `week`)")?;
            unit = u;
            last = uspan;
        }
        let Some(per_secs) = time_unit(&unit) else {
            return Err(self.st.error(
                last,
                format!(
                    "expected a time unit (`second`, `minute`, `hour`, `day`, `week`), found `{unit}`"
                ),
            ));
        };
        let mut limit = Limit {
            over,
            rate: rate.wrapping_mul(mult),
            per_secs,
            burst: if bytes { 0 } else { LIMIT_PKT_BURST_DEFAULT },
            bytes,
        };
        let bspan = self.peek_span()?;
        if self.eat_word("burst")? {
            let (n, nspan) = self.word("a burst size")?;
            let n = self.stateful_number(&n, nspan)?;
            let (u, uspan) = if bytes {
                self.word("`bytes`, `kbytes` or `mbytes`")?
            } else {
                self.word("`packets`")?
            };
            last = uspan;
            if bytes {
                let Some(m) = data_unit(&u) else {
                    return Err(self.st.error(
                        uspan,
                        format!(
                            "expected `bytes`, `kbytes` or `mbytes`, found `{u}` (a byte rate has a burst in bytes)"
                        ),
                    ));
                };
                // nft keeps the low 32 bits.
                limit.burst = n.wrapping_mul(m) as u32;
            } else {
                if u != "packets" {
                    return Err(self.st.error(
                        uspan,
                        format!(
                            "expected `packets`, found `{u}` (a packet rate has a burst in packets)"
                        ),
                    ));
                }
                if n == 0 {
                    return Err(self
                        .st
                        .error(bspan.through(uspan), "packet limit burst must be > 0"));
                }
                // nft keeps the low 32 bits; the kernel makes 0 the default 5.
                limit.burst = match n as u32 {
                    0 => LIMIT_PKT_BURST_DEFAULT,
                    b => b,
                };
            }
        }
        Ok((limit, last))
    }

    /// `[over|until] N UNIT [used M UNIT]`: a quota's configuration (nft's `quota_config`).
    /// Returns it and the span of its last token.
    pub(super) fn quota_config(&mut self) -> PResult<(Quota, Span)> {
        let over = if self.eat_word("over")? {
            true
        } else {
            self.eat_word("until")?;
            false
        };
        let (n, nspan) = self.word("a number of bytes")?;
        let n = self.stateful_number(&n, nspan)?;
        let (bytes, mut last) = self.data_amount(n, nspan)?;
        let mut used = 0;
        if self.eat_word("used")? {
            let (m, mspan) = self.word("a number of bytes")?;
            let m = self.stateful_number(&m, mspan)?;
            (used, last) = self.data_amount(m, mspan)?;
        }
        Ok((Quota { over, bytes, used }, last))
    }

    /// `name NAME` after `limit`, `quota` (or `counter`): the object's name and the span of
    /// the whole reference from `start`.
    fn object_ref(&mut self, start: Span, what: &str) -> PResult<(String, Span)> {
        let (name, nspan) = self.name(what)?;
        Ok((name, start.through(nspan)))
    }

    /// After `counter name`, `quota name` or `limit name`: `KEY map { k : "NAME", ... }`
    /// (nft's objref map; `start` is the statement's keyword). The names are read as nft
    /// reads them, as strings of at most 15 characters here (they are parsed as `ifname`
    /// values, then kept as text); whether the objects exist is checked at compile.
    pub(super) fn object_map(
        &mut self,
        kind: ObjKind,
        ctx: &mut RuleCtx,
        start: Span,
    ) -> PResult<Stmt> {
        let (key, kspan) = self.concat_expr(ctx)?;
        if !self.eat_word("map")? {
            return self.expected(&format!(
                "`map` after `{} {}`",
                kind.reference(),
                self.st_text(kspan)
            ));
        }
        let mspan = self.peek_span()?;
        if !self.eat_punct("{")? {
            if let Some(Tok::SetRef(_)) = self.peek_tok()? {
                return Err(self.st.error(
                    mspan,
                    unsupported::message_with("@map", "a named map of objects"),
                ));
            }
            return self.expected("`{` after `map`");
        }
        let types = key.key_types();
        let elems = self.elements(&types, Some(DataType::Ifname), None)?;
        let mut elems = self.check_anonymous(&types, elems, true)?;
        for e in &mut elems {
            if let Some(ElemData::Value(v)) = &e.data {
                let name: String = v
                    .bytes
                    .iter()
                    .take_while(|b| **b != 0)
                    .map(|b| char::from(*b))
                    .collect();
                e.data = Some(ElemData::Object(name));
            }
        }
        let end = self.peek_span()?;
        let span = if end.line == start.line && end.col > start.col {
            Span {
                len: end.col - start.col,
                ..start
            }
        } else {
            start
        };
        Ok(Stmt::ObjectMap {
            kind,
            key,
            map: SetRef::Anonymous(elems),
            span,
        })
    }

    /// `limit rate ...`, `limit name NAME` or `limit name KEY map { ... }` (at `limit`, not
    /// consumed; `start` is it).
    pub(super) fn limit_stmt(&mut self, ctx: &mut RuleCtx, start: Span) -> PResult<Stmt> {
        self.advance();
        if self.eat_word("name")? {
            if self.at_expr()? {
                return self.object_map(ObjKind::Limit, ctx, start);
            }
            let (name, span) = self.object_ref(start, "a limit name")?;
            return Ok(Stmt::LimitRef { name, span });
        }
        if !self.at_word("rate")? {
            return self.expected("`rate` or `name` after `limit`");
        }
        let (limit, last) = self.limit_config()?;
        let span = start.through(last);
        if let Some(m) = limit_kernel_error(&limit) {
            return Err(self.st.error(span, m));
        }
        Ok(Stmt::Limit { limit, span })
    }

    /// `quota [over|until] N UNIT [used M UNIT]`, `quota name NAME` or `quota name KEY map {
    /// ... }` (at `quota`, not consumed; `start` is it).
    pub(super) fn quota_stmt(&mut self, ctx: &mut RuleCtx, start: Span) -> PResult<Stmt> {
        self.advance();
        if self.eat_word("name")? {
            if self.at_expr()? {
                return self.object_map(ObjKind::Quota, ctx, start);
            }
            let (name, span) = self.object_ref(start, "a quota name")?;
            return Ok(Stmt::QuotaRef { name, span });
        }
        let (quota, last) = self.quota_config()?;
        let span = start.through(last);
        if let Some(m) = quota_kernel_error(&quota) {
            return Err(self.st.error(span, m));
        }
        Ok(Stmt::Quota { quota, span })
    }

    /// A named object's optional `{ ...; comment "..." }` body or inline configuration:
    /// `config` reads the configuration; returns it and the comment. Inline (`add quota ip t
    /// q 25 mbytes`) when `inline` and no `{` follows.
    fn object_body<T>(
        &mut self,
        inline: bool,
        what: &str,
        config: fn(&mut Self) -> PResult<(T, Span)>,
    ) -> PResult<(T, Option<String>)> {
        let open = self.peek_span()?;
        if inline && !self.at_punct("{")? {
            return Ok((config(self)?.0, None));
        }
        self.expect_punct("{")?;
        let mut value = None;
        let mut comment = None;
        loop {
            self.skip_separators()?;
            match self.peek_tok()? {
                Some(Tok::Punct("}")) => {
                    self.advance();
                    break;
                }
                Some(Tok::Word(w)) if w == "comment" => {
                    self.advance();
                    comment = Some(self.string("a quoted comment")?.0);
                }
                None => return self.unclosed(&format!("{what}, `comment` or `}}`"), open),
                _ if value.is_none() => value = Some(config(self)?.0),
                _ => return self.expected("`comment` or `}`"),
            }
        }
        match value {
            Some(v) => Ok((v, comment)),
            None => Err(self
                .st
                .error(open, format!("expected {what} in the object's block"))),
        }
    }

    /// `quota NAME { [over] N UNIT [used M UNIT] }` (after `quota`; `span` is the keyword),
    /// or with `inline` the command form `add quota FAMILY TABLE NAME [over] N UNIT`.
    pub(super) fn quota_obj(&mut self, span: Span, inline: bool) -> PResult<QuotaObj> {
        let (name, nspan) = self.name("a quota name")?;
        let start = self.peek_span()?;
        let (quota, comment) =
            self.object_body(inline, "a quota (`N bytes`)", Self::quota_config)?;
        if let Some(m) = quota_kernel_error(&quota) {
            return Err(self.st.error(start, m));
        }
        Ok(QuotaObj {
            name,
            handle: 0,
            quota,
            comment,
            span: span.through(nspan),
        })
    }

    /// `limit NAME { rate ... }` (after `limit`; `span` is the keyword), or with `inline` the
    /// command form `add limit FAMILY TABLE NAME rate ...`.
    pub(super) fn limit_obj(&mut self, span: Span, inline: bool) -> PResult<LimitObj> {
        let (name, nspan) = self.name("a limit name")?;
        let start = self.peek_span()?;
        let (limit, comment) = self.object_body(inline, "`rate`", Self::limit_config)?;
        if let Some(m) = limit_kernel_error(&limit) {
            return Err(self.st.error(start, m));
        }
        Ok(LimitObj {
            name,
            handle: 0,
            limit,
            comment,
            span: span.through(nspan),
        })
    }
}
