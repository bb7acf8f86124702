//! Values computed from the packet, as statements take them (nft 1.0.6's `stmt_expr`): the
//! right side of `meta mark set`, `ct mark set`, `meta priority set`, `ct zone set` and the
//! target of `snat`/`dnat to EXPR`.
//!
//! - Bitwise operations with nft's precedence (its `basic_expr` grammar, C's): `<<` and `>>`
//!   bind tightest, then `&` (`and`), `^` (`xor`), `|` (`or`); parentheses group. The right
//!   operand is a constant (nft 1.0.6 has no bitwise operation of two registers); operations on
//!   constants only are folded into one (`0x11 xor 0x1331` is `0x00001320`).
//! - `numgen inc|random mod N [offset M]`, `jhash EXPR mod N [seed S] [offset M]`, `symhash
//!   mod N [offset M]` (nft's `numgen_expr`, `hash_expr`). The kernel refuses a modulus of 0
//!   (ERANGE) and an offset that makes `offset + mod - 1` overflow 32 bits (EOVERFLOW:
//!   `nft_ng_inc_init`, `nft_jhash_init`, `nft_symhash_init`).
//! - A concatenation of these (`a . b`), and `KEY map { k : v }` / `KEY map @m` after it (nft's
//!   `map_expr`; done by the caller, which knows the map's data type).

use super::expr::RuleCtx;
use super::{PResult, Parser};
use crate::lexer::Tok;
use crate::model::{BinOp, DataType, Expr, Span, Value};

/// An operand while folding: a constant or an expression of the packet.
enum Operand {
    Const(Value),
    Expr(Expr),
}

impl Parser<'_> {
    /// A value expression of type `dtype` (a constant is read as that type), with
    /// concatenations. Returns the expression and its span.
    pub(super) fn value_expr(
        &mut self,
        ctx: &mut RuleCtx,
        dtype: DataType,
    ) -> PResult<(Expr, Span)> {
        let (first, mut span) = self.value_or(ctx, dtype, 0)?;
        if !self.at_punct(".")? {
            return Ok((into_expr(first), span));
        }
        let mut parts = vec![into_expr(first)];
        while self.eat_punct(".")? {
            let (e, s) = self.value_or(ctx, dtype, 0)?;
            span = span.through(s);
            parts.push(into_expr(e));
        }
        Ok((Expr::Concat(parts), span))
    }

    /// A map element's data in a set statement: one value of type `first`, then one for each
    /// type of `tail` after a `.` (concatenated data, `: 10.0.0.1 . 80`). Returns the
    /// expression (an [`Expr::Concat`] when `tail` is not empty) and its span.
    pub(super) fn data_expr(
        &mut self,
        ctx: &mut RuleCtx,
        first: DataType,
        tail: &[DataType],
    ) -> PResult<(Expr, Span)> {
        if tail.is_empty() {
            return self.value_expr(ctx, first);
        }
        let (e, mut span) = self.value_or(ctx, first, 0)?;
        let mut parts = vec![into_expr(e)];
        for &t in tail {
            if !self.eat_punct(".")? {
                return self.expected(&format!(
                    "`.` and the next field of the map's data ({})",
                    t.name()
                ));
            }
            let (e, s) = self.value_or(ctx, t, 0)?;
            span = span.through(s);
            parts.push(into_expr(e));
        }
        Ok((Expr::Concat(parts), span))
    }

    /// `a | b`, `a ^ b`, `a & b`, `a << n`, `a >> n` at precedence level `level` and below
    /// (0 is `|`, the loosest; 3 the shifts), operands read by [`Self::value_primary`].
    fn value_or(
        &mut self,
        ctx: &mut RuleCtx,
        dtype: DataType,
        depth: usize,
    ) -> PResult<(Operand, Span)> {
        self.value_level(ctx, dtype, depth, 4)
    }

    fn value_level(
        &mut self,
        ctx: &mut RuleCtx,
        dtype: DataType,
        depth: usize,
        precedence: u8,
    ) -> PResult<(Operand, Span)> {
        if precedence == 0 {
            return self.value_primary(ctx, dtype, depth);
        }
        let (mut left, mut span) = self.value_level(ctx, dtype, depth, precedence - 1)?;
        let mut ops = 0;
        loop {
            let op_span = self.peek_span()?;
            let Some(op) = self.peek_binop()? else {
                break;
            };
            if op.precedence() != precedence {
                break;
            }
            ops += 1;
            if ops > super::MAX_NESTING {
                return Err(self.st.error(
                    op_span,
                    format!(
                        "too many bitwise operations in one expression, max {}",
                        super::MAX_NESTING
                    ),
                ));
            }
            self.advance();
            let shift = matches!(op, BinOp::Lshift | BinOp::Rshift);
            // The constant is of the left expression's type (`ip6 saddr and ::ffff`).
            let right_type = match &left {
                _ if shift => DataType::Integer(32),
                Operand::Expr(e) => e.dtype(),
                Operand::Const(_) => dtype,
            };
            let (right, rspan) = self.value_level(ctx, right_type, depth, precedence - 1)?;
            let Operand::Const(value) = right else {
                return Err(self.st.error(
                    rspan,
                    format!(
                        "expected a constant after `{}` (nft 1.0.6 has no bitwise operation of two expressions)",
                        op.symbol()
                    ),
                ));
            };
            span = span.through(rspan);
            left = match left {
                Operand::Const(a) => Operand::Const(fold(&a, op, &value)),
                Operand::Expr(e) => {
                    let value = if shift {
                        value
                    } else {
                        retype(&value, e.dtype())
                    };
                    Operand::Expr(Expr::Binop {
                        expr: Box::new(e),
                        op,
                        value,
                    })
                }
            };
        }
        Ok((left, span))
    }

    /// `( ... )`, `numgen ...`, `jhash ...`, `symhash ...`, a field (`ct mark`, `ip saddr`) or
    /// a constant of type `dtype`.
    fn value_primary(
        &mut self,
        ctx: &mut RuleCtx,
        dtype: DataType,
        depth: usize,
    ) -> PResult<(Operand, Span)> {
        let start = self.peek_span()?;
        if self.at_punct("(")? {
            if depth + 1 >= super::MAX_NESTING {
                return Err(self.st.error(
                    start,
                    format!("parentheses nest too deeply, max {}", super::MAX_NESTING),
                ));
            }
            self.advance();
            let (inner, _) = self.value_or(ctx, dtype, depth + 1)?;
            let end = self.expect_punct(")")?;
            return Ok((inner, start.through(end)));
        }
        if let Some(Tok::Word(w)) = self.peek_tok()? {
            match w.as_str() {
                "numgen" => return self.numgen(start).map(|(e, s)| (Operand::Expr(e), s)),
                "jhash" | "symhash" => {
                    return self.hash(ctx, start).map(|(e, s)| (Operand::Expr(e), s));
                }
                _ => {}
            }
        }
        if self.at_expr()? {
            let (e, s) = self.primary_expr(ctx)?;
            return Ok((Operand::Expr(e), s));
        }
        let (v, s) = self.single_value(dtype)?;
        Ok((Operand::Const(v), s))
    }

    /// `numgen inc|random mod N [offset M]` (at `numgen`, at `start`).
    fn numgen(&mut self, start: Span) -> PResult<(Expr, Span)> {
        self.advance();
        let random = match self.peek_tok()? {
            Some(Tok::Word(w)) if w == "inc" => false,
            Some(Tok::Word(w)) if w == "random" => true,
            _ => return self.expected("`inc` or `random` after `numgen`"),
        };
        self.advance();
        let (modulus, offset, end) = self.modulus_offset::<Option<u32>>()?;
        let e = Expr::Numgen {
            random,
            modulus,
            offset: offset.unwrap_or(0),
        };
        Ok((e, start.through(end)))
    }

    /// `jhash EXPR mod N [seed S] [offset M]` or `symhash mod N [offset M]` (at the keyword,
    /// at `start`).
    fn hash(&mut self, ctx: &mut RuleCtx, start: Span) -> PResult<(Expr, Span)> {
        let jhash = self.at_word("jhash")?;
        self.advance();
        if !jhash {
            let (modulus, offset, end) = self.modulus_offset::<Option<u32>>()?;
            let e = Expr::Symhash {
                modulus,
                offset: offset.unwrap_or(0),
            };
            return Ok((e, start.through(end)));
        }
        if !self.at_expr()? {
            return self.expected("the expression to hash after `jhash` (e.g. `ip saddr`)");
        }
        let (inner, _) = self.concat_expr(ctx)?;
        let (modulus, rest, end) = self.modulus_offset::<(Option<u32>, Option<u32>)>()?;
        let (seed, offset) = rest;
        let e = Expr::Jhash {
            expr: Box::new(inner),
            modulus,
            seed,
            offset: offset.unwrap_or(0),
        };
        Ok((e, start.through(end)))
    }
}

/// What follows `mod N`: for `jhash`, the seed and the offset; otherwise the offset.
trait ModTail: Sized {
    fn take(p: &mut Parser<'_>, end: &mut Span) -> PResult<Self>;
    fn offset(&self) -> Option<u32>;
}

impl ModTail for Option<u32> {
    fn take(p: &mut Parser<'_>, end: &mut Span) -> PResult<Self> {
        p.word_u32("offset", end)
    }
    fn offset(&self) -> Option<u32> {
        *self
    }
}

impl ModTail for (Option<u32>, Option<u32>) {
    fn take(p: &mut Parser<'_>, end: &mut Span) -> PResult<Self> {
        let seed = p.word_u32("seed", end)?;
        let offset = p.word_u32("offset", end)?;
        Ok((seed, offset))
    }
    fn offset(&self) -> Option<u32> {
        self.1
    }
}

impl Parser<'_> {
    /// `mod N` and what may follow it (`seed S` with `seed`, then `offset M`), with the
    /// kernel's range checks; the span of the last number.
    fn modulus_offset<T: ModTail>(&mut self) -> PResult<(u32, T, Span)> {
        if !self.eat_word("mod")? {
            return self.expected("`mod` and the number of values");
        }
        let mspan = self.peek_span()?;
        let modulus = self.u32_value("modulus")?;
        if modulus == 0 {
            return Err(self.st.error(
                mspan,
                "the modulus must be at least 1 (nft: Could not process rule: Numerical result out of range)",
            ));
        }
        let mut end = mspan;
        let tail = T::take(self, &mut end)?;
        if let Some(off) = tail.offset()
            && off.checked_add(modulus - 1).is_none()
        {
            return Err(self.st.error(
                end,
                format!(
                    "offset {off} + mod {modulus} - 1 is beyond 32 bits (nft: Could not process rule: Value too large for defined data type)"
                ),
            ));
        }
        Ok((modulus, tail, end))
    }

    /// `WORD N` when the next word is `word`: the number (32 bits), its span in `end`.
    fn word_u32(&mut self, word: &str, end: &mut Span) -> PResult<Option<u32>> {
        if !self.eat_word(word)? {
            return Ok(None);
        }
        *end = self.peek_span()?;
        self.u32_value(word).map(Some)
    }

    /// A number of at most 32 bits (the `what` of a message).
    fn u32_value(&mut self, what: &str) -> PResult<u32> {
        let span = self.peek_span()?;
        let text = match self.peek_tok()? {
            Some(Tok::Word(w)) => w,
            _ => return self.expected(&format!("a number ({what})")),
        };
        match crate::datatypes::parse_uint(&text) {
            Some(n) if n <= u128::from(u32::MAX) => {
                self.advance();
                Ok(n as u32)
            }
            Some(_) => Err(self.st.error(
                span,
                format!("{what} {text} is beyond 32 bits (0 to 4294967295)"),
            )),
            None => Err(self
                .st
                .error(span, format!("expected a number ({what}), found `{text}`"))),
        }
    }
}

fn into_expr(o: Operand) -> Expr {
    match o {
        Operand::Const(v) => Expr::Const(v),
        Operand::Expr(e) => e,
    }
}

/// `value` as a value of `dtype` (its number, cut to the type's width).
fn retype(value: &Value, dtype: DataType) -> Value {
    if value.dtype == dtype {
        return value.clone();
    }
    let n = crate::datatypes::to_uint(value);
    let w = dtype.width_bytes();
    let bytes = n.to_be_bytes()[16 - w.min(16)..].to_vec();
    Value {
        dtype,
        bytes: bytes.into(),
        wildcard: false,
    }
}

/// `a OP b` of two constants, in `a`'s type and width (nft's constant folding).
fn fold(a: &Value, op: BinOp, b: &Value) -> Value {
    let bits = u32::from(a.dtype.width_bits()).min(128);
    let mask = if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    let x = crate::datatypes::to_uint(a);
    let y = crate::datatypes::to_uint(b);
    let n = match op {
        BinOp::And => x & y,
        BinOp::Or => x | y,
        BinOp::Xor => x ^ y,
        BinOp::Lshift => x.checked_shl(y.min(128) as u32).unwrap_or(0),
        BinOp::Rshift => x.checked_shr(y.min(128) as u32).unwrap_or(0),
    } & mask;
    let w = a.bytes.len();
    Value {
        dtype: a.dtype,
        bytes: n.to_be_bytes()[16 - w.min(16)..].to_vec().into(),
        wildcard: false,
    }
}
