//! Rules: matches, verdicts and statements.

use super::expr::RuleCtx;
use super::handles::Ref;
use super::unsupported;
use super::value::is_vlan_type;
use super::{PResult, Parser};
use crate::lexer::Tok;
use crate::model::{
    BinOp, CtKey, DataType, Expr, Family, KeyPart, Match, MetaKey, ObjKind, OptHeader, OptSel,
    PayloadField, RelOp, Rhs, Rule, SetRef, Span, Stmt, Verdict,
};
use crate::proto::Proto;

impl Parser<'_> {
    /// One rule, up to (not including) its newline, `;` or `}`.
    pub(super) fn rule(&mut self, family: Family) -> PResult<Rule> {
        let span = self.peek_span()?;
        let mut ctx = RuleCtx::new(family);
        let mut stmts = Vec::new();
        let mut comment = None;
        let mut terminal: Option<String> = None;
        loop {
            let sspan = self.peek_span()?;
            let tok = self.peek_tok()?;
            let word = match &tok {
                None | Some(Tok::Newline) | Some(Tok::Punct(";")) | Some(Tok::Punct("}")) => {
                    if stmts.is_empty() && comment.is_none() {
                        return self.expected("a verdict, `counter`, `log` or a match");
                    }
                    break;
                }
                Some(Tok::Word(w)) => w.clone(),
                Some(Tok::SetRef(base)) if unsupported::RAW_BASES.contains(&base.as_str()) => {
                    let stmt = self.match_or_set(&mut ctx, sspan)?;
                    stmts.push(stmt);
                    continue;
                }
                _ => return self.expected("a verdict, `counter`, `log` or a match"),
            };
            if let Some(t) = &terminal
                && word != "comment"
            {
                // nft 1.0.6 rule_evaluate: a statement after a terminal one never runs.
                return Err(self.st.error(
                    sspan,
                    format!(
                        "Statement after terminal statement has no effect (`{t}` ends the rule)"
                    ),
                ));
            }
            if let Some((v, _)) = self.verdict()? {
                // Every verdict but `continue` is terminal (nft's STMT_F_TERMINAL).
                if v != Verdict::Continue {
                    terminal = Some(self.st_text(sspan));
                }
                stmts.push(Stmt::Verdict(v));
                continue;
            }
            if self.at_plugin()? {
                stmts.push(self.plugin_use()?);
                continue;
            }
            match word.as_str() {
                "comment" => {
                    self.advance();
                    comment = Some(self.string("a quoted comment")?.0);
                }
                "counter" => {
                    self.advance();
                    let nspan = self.peek_span()?;
                    if self.eat_word("name")? {
                        if self.at_expr()? {
                            stmts.push(self.object_map(ObjKind::Counter, &mut ctx, sspan)?);
                            continue;
                        }
                        let (name, rspan) = self.name("a counter name")?;
                        let whole = Span {
                            len: if rspan.line == sspan.line {
                                sspan.through(rspan).len
                            } else {
                                sspan.through(nspan).len
                            },
                            ..sspan
                        };
                        stmts.push(Stmt::CounterRef { name, span: whole });
                        continue;
                    }
                    // nft's `counter_args`: `packets N` and `bytes N` in any order, each
                    // optional (the last one written counts).
                    let (mut packets, mut bytes) = (0, 0);
                    loop {
                        if self.eat_word("packets")? {
                            packets = self.number_u64()?;
                        } else if self.eat_word("bytes")? {
                            bytes = self.number_u64()?;
                        } else {
                            break;
                        }
                    }
                    stmts.push(Stmt::Counter { packets, bytes });
                }
                "log" => {
                    stmts.push(self.log_stmt(sspan)?);
                }
                "ct" => {
                    // `ct count ...` is a statement; `ct KEY ...` a match or `ct mark set`.
                    let Some(ct) = self.next()? else {
                        return self.expected("`ct`");
                    };
                    if self.at_word("count")? {
                        stmts.push(self.ct_count(family, sspan)?);
                    } else if let Some(stmt) = self.ct_obj_set(&mut ctx, sspan, ct)? {
                        stmts.push(stmt);
                    } else {
                        let stmt = self.match_or_set(&mut ctx, sspan)?;
                        stmts.push(stmt);
                    }
                }
                "snat" | "dnat" | "masquerade" | "redirect" => {
                    let stmt = self.nat_stmt(&ctx, sspan)?;
                    if let Stmt::Nat(n) = &stmt {
                        // nft: a NAT statement is terminal.
                        terminal = Some(self.st_text(n.span));
                    }
                    stmts.push(stmt);
                }
                "flow" => {
                    stmts.push(self.flow_add(sspan)?);
                }
                "notrack" => {
                    self.advance();
                    stmts.push(Stmt::Notrack);
                }
                "limit" => {
                    stmts.push(self.limit_stmt(&mut ctx, sspan)?);
                }
                "quota" => {
                    stmts.push(self.quota_stmt(&mut ctx, sspan)?);
                }
                "reject" => {
                    let stmt = self.reject_stmt(&ctx, &mut stmts, sspan)?;
                    // nft: reject is terminal (the packet is dropped).
                    terminal = Some("reject".to_string());
                    stmts.push(stmt);
                }
                "add" | "update" | "delete" if self.at_set_update()? => {
                    stmts.push(self.set_update(&mut ctx, sspan)?);
                }
                "reset" => {
                    stmts.push(self.opt_reset(&mut ctx, sspan)?);
                }
                "fwd" | "dup" => {
                    let stmt = self.fwd_or_dup(&mut ctx, sspan)?;
                    if let Stmt::Fwd { span, .. } = &stmt {
                        // nft: fwd is terminal (the packet is stolen).
                        terminal = Some(self.st_text(*span));
                    }
                    stmts.push(stmt);
                }
                _ if self.at_expr()? => {
                    let stmt = self.match_or_set(&mut ctx, sspan)?;
                    stmts.push(stmt);
                }
                _ => {
                    // A word nft knows (that wasp does not read yet) is no misspelt plugin,
                    // unless another table declares a plugin of that name.
                    let known = unsupported::statement(&word);
                    if let Some(e) = self.unknown_plugin_in(&word, sspan, true, known)? {
                        return Err(e);
                    }
                    if known {
                        return Err(self.st.error(sspan, unsupported::message(&word)));
                    }
                    if let Some(e) = self.unknown_plugin(&word, sspan, false)? {
                        return Err(e);
                    }
                    return self.expected("a verdict, `counter`, `log` or a match");
                }
            }
        }
        self.icmp_type_dependencies(&mut stmts)?;
        if let Some((span, msg)) = nfproto_conflict(&stmts) {
            return Err(self.st.error(span, msg));
        }
        if family == Family::Inet {
            explicit_raw_key_dependency(&mut stmts);
        }
        drop_implied_dependencies(&mut stmts, family);
        explicit_vlan_dependency(&mut stmts);
        super::merge::listing_order(&mut stmts, family);
        Ok(Rule {
            handle: 0,
            stmts,
            comment,
            span,
        })
    }

    /// After `KEY map`: `{ k : v, ... }` or `@m`, giving values of type `data`.
    pub(super) fn data_map(&mut self, key: Expr, kspan: Span, data: DataType) -> PResult<Expr> {
        let types = key.key_types();
        let mspan = self.peek_span()?;
        let map = if self.eat_punct("{")? {
            let elems = self.elements(&types, Some(data), None)?;
            let elems = self.check_anonymous(&types, elems, true)?;
            SetRef::Anonymous(elems)
        } else if let Some(Tok::SetRef(name)) = self.peek_tok()? {
            self.advance();
            self.refs.push(Ref::Set {
                name: name.clone(),
                span: mspan,
                key: types,
                expr_text: self.st_text(kspan),
                map_data: Some(data),
            });
            SetRef::Named(name)
        } else {
            return self.expected("`{` or `@map` after `map`");
        };
        Ok(Expr::Map {
            key: Box::new(key),
            map,
            data,
        })
    }

    /// `EXPR [op] RHS`, `EXPR vmap { ... }` or `meta KEY set VALUE`.
    fn match_or_set(&mut self, ctx: &mut RuleCtx, start: Span) -> PResult<Stmt> {
        ctx.ct_implicit_family = None;
        let (left, lspan) = self.concat_expr(ctx)?;
        if let (Expr::Concat(_), Some(at)) = (&left, ctx.ct_implicit_family) {
            // The family comes from a compared value only: not in a concatenation.
            return Err(self
                .st
                .error(at, "specify either ip or ip6 for address matching"));
        }
        if self.at_word("set")? {
            let dtype = match &left {
                Expr::Meta(key) => {
                    if !matches!(key, MetaKey::Mark | MetaKey::Nftrace | MetaKey::Priority) {
                        return Err(self.st.error(
                            lspan,
                            "only `meta mark`, `meta priority` and `meta nftrace` can be set",
                        ));
                    }
                    key.dtype()
                }
                Expr::Ct(key) => {
                    if !matches!(
                        key,
                        CtKey::Mark | CtKey::Zone(_) | CtKey::Label | CtKey::Event
                    ) {
                        // The kernel's nft_ct_set_init takes mark, label, zone, helper,
                        // event, secmark and expectation keys: EOPNOTSUPP for the others.
                        return Err(self.st.error(
                            lspan,
                            format!(
                                "only `ct mark`, `ct label`, `ct event` and `ct zone` can be set, not `ct {}` (nft: Could not process rule: Operation not supported)",
                                key.name()
                            ),
                        ));
                    }
                    key.dtype()
                }
                // `ip ttl set 1`, `@ih,58,6 set 0`: nft's payload statement.
                Expr::Payload(_) | Expr::Raw { .. } => left.dtype(),
                // `tcp option maxseg size set 1360`: nft_exthdr_tcp_set_init takes 2- and
                // 4-byte fields of a named option.
                Expr::Opt(o) if o.hdr == OptHeader::TcpOption => {
                    let (_, len, dtype) = o.position();
                    if !matches!(o.sel, OptSel::Field(_)) || !matches!(len, 16 | 32) {
                        return Err(self.st.error(
                            lspan,
                            "only 2- and 4-byte fields of a TCP option can be set (nft: Could not process rule: Operation not supported)",
                        ));
                    }
                    dtype
                }
                _ => {
                    let what = format!("{} set", self.st_text(lspan));
                    return Err(self.st.error(lspan, unsupported::message(&what)));
                }
            };
            self.advance();
            let vspan = self.peek_span()?;
            ctx.ct_implicit_family = None;
            let (mut value, kspan) = self.value_expr(ctx, dtype)?;
            if self.at_word("map")?
                && let Some(at) = ctx.ct_implicit_family
            {
                return Err(self
                    .st
                    .error(at, "specify either ip or ip6 for address matching"));
            }
            if self.eat_word("map")? {
                value = self.data_map(value, kspan, dtype)?;
            } else if let Expr::Const(v) = &mut value
                && dtype == DataType::CtEvent
            {
                // A bitmask: `new,destroy` is one value.
                while self.eat_punct(",")? {
                    let (m, _) = self.single_value(dtype)?;
                    for (a, b) in v.bytes.iter_mut().zip(&m.bytes) {
                        *a |= b;
                    }
                }
            }
            let span = Span {
                len: if vspan.line == start.line {
                    start.through(vspan).len
                } else {
                    lspan.len
                },
                ..start
            };
            // A raw target that is a named field lists as that field, its value retyped.
            let (left, value) = match (left, value) {
                (raw @ Expr::Raw { .. }, Expr::Const(v)) => {
                    let key = Rhs::Key(vec![KeyPart::Value(v.clone())]);
                    let (l, r) = resolve_raw(raw, key, ctx.family, ctx.l3);
                    let v = match r {
                        Rhs::Key(k) => match k.into_iter().next() {
                            Some(KeyPart::Value(typed)) => typed,
                            _ => v,
                        },
                        Rhs::Set(_) => v,
                    };
                    (l, Expr::Const(v))
                }
                other => other,
            };
            return Ok(match left {
                Expr::Ct(key) => Stmt::CtSet { key, value, span },
                Expr::Meta(key) => Stmt::MetaSet { key, value, span },
                // A payload field or raw payload (only these got past the check above).
                target => Stmt::PayloadSet {
                    target,
                    value,
                    span,
                },
            });
        }
        if matches!(left, Expr::Ct(CtKey::Event)) {
            // nft_ct_get_init has no NFT_CT_EVENTMASK: EOPNOTSUPP.
            return Err(self.st.error(
                lspan,
                "`ct event` can only be set (`ct event set new`), not matched (nft: Could not process rule: Operation not supported)",
            ));
        }
        let types = left.key_types();
        if self.eat_word("vmap")? {
            let mspan = self.peek_span()?;
            let map = if self.eat_punct("{")? {
                let elems = self.elements(&types, Some(DataType::Verdict), None)?;
                let elems = self.check_anonymous(&types, elems, true)?;
                SetRef::Anonymous(elems)
            } else if let Some(Tok::SetRef(name)) = self.peek_tok()? {
                self.advance();
                self.refs.push(Ref::Set {
                    name: name.clone(),
                    span: mspan,
                    key: types.clone(),
                    expr_text: self.st_text(lspan),
                    map_data: Some(DataType::Verdict),
                });
                SetRef::Named(name)
            } else {
                return self.expected("`{` or `@map` after `vmap`");
            };
            return Ok(Stmt::VerdictMap {
                key: left,
                map,
                span: start,
            });
        }
        let op = match self.peek_tok()? {
            Some(Tok::Punct("==")) => RelOp::Eq,
            Some(Tok::Punct("!=")) => RelOp::Ne,
            Some(Tok::Punct("<")) => RelOp::Lt,
            Some(Tok::Punct(">")) => RelOp::Gt,
            Some(Tok::Punct("<=")) => RelOp::Le,
            Some(Tok::Punct(">=")) => RelOp::Ge,
            Some(Tok::Word(w)) => match w.as_str() {
                "eq" => RelOp::Eq,
                "ne" => RelOp::Ne,
                "lt" => RelOp::Lt,
                "gt" => RelOp::Gt,
                "le" => RelOp::Le,
                "ge" => RelOp::Ge,
                _ => RelOp::Implicit,
            },
            _ => RelOp::Implicit,
        };
        if op != RelOp::Implicit {
            self.advance();
        }
        let rspan = self.peek_span()?;
        if op == RelOp::Implicit && matches!(left, Expr::Binop { .. }) && self.at_punct("!")? {
            return Err(self
                .st
                .error(start, "cannot combine negation with binary expression"));
        }
        let mut left = left;
        if let Expr::Fib(f) = &mut left
            && matches!(self.peek_tok()?, Some(Tok::Word(w)) if w == "exists" || w == "missing")
        {
            // nft's expr_evaluate_fib: compared with a boolean, the lookup says whether it
            // found a device (NFTA_FIB_F_PRESENT), which the kernel (6.18) takes for `oif`
            // only.
            if f.result != crate::model::FibResult::Oif {
                return Err(self.st.error(
                    lspan,
                    format!(
                        "`exists` and `missing` take `fib ... oif`, not `{}` (nft: Could not process rule: Invalid argument)",
                        f.result.name()
                    ),
                ));
            }
            f.flags |= crate::model::FibExpr::PRESENT;
        }
        let dtype = left.dtype();
        let (mut left, mut op) = (left, op);
        let right = if self.eat_punct("{")? {
            let elems = self.elements(&types, None, None)?;
            // Counted as written: `{ 22, 22 }` stays a set of one (nft lists `{ 22 }`).
            let written = elems.len();
            let elems = self.check_anonymous(&types, elems, false)?;
            let mut elems = super::setcheck::merge_anonymous_intervals(elems);
            // (Not a concatenation: nft keeps `a . b { x . y }` a set, checked with nft -a.)
            // A set merged down to one interval stays a set.
            let single = written == 1
                && elems.len() == 1
                && types.len() == 1
                && elems[0].timeout_ms().is_none()
                && elems[0].comment().is_none()
                && !elems[0].counter;
            if single {
                // nft turns a one-element anonymous set into a plain comparison.
                Rhs::Key(elems.remove(0).key.into_vec())
            } else {
                Rhs::Set(SetRef::Anonymous(elems))
            }
        } else if let Some(Tok::SetRef(name)) = self.peek_tok()? {
            self.advance();
            self.refs.push(Ref::Set {
                name: name.clone(),
                span: rspan,
                key: types.clone(),
                expr_text: self.st_text(lspan),
                map_data: None,
            });
            Rhs::Set(SetRef::Named(name))
        } else if matches!(left, Expr::Concat(_)) {
            return Err(self.st.error(
                lspan,
                "Use concatenations with sets and maps, not singleton values",
            ));
        } else if dtype == DataType::TcpFlag {
            // `syn`, `syn|ack`, `syn,ack`, nft's listed forms `syn / syn,ack` (flags & mask ==
            // value) and `! syn,ack` (flags & mask == 0).
            if op == RelOp::Implicit && self.eat_punct("!")? {
                let (mut mask, _) = self.single_value(dtype)?;
                while self.eat_punct(",")? || self.eat_punct("|")? {
                    let (m, _) = self.single_value(dtype)?;
                    mask.bytes[0] |= m.bytes[0];
                }
                let zero =
                    crate::datatypes::from_uint(dtype, 0).map_err(|m| self.st.error(rspan, m))?;
                left = Expr::Binop {
                    expr: Box::new(left),
                    op: BinOp::And,
                    value: mask,
                };
                return Ok(Stmt::Match(Match {
                    left,
                    op: RelOp::Eq,
                    right: Rhs::Key(vec![KeyPart::Value(zero)]),
                    span: start,
                    implied: false,
                }));
            }
            let (mut v, _) = self.const_or(dtype)?;
            if op == RelOp::Implicit {
                while self.eat_punct(",")? {
                    let (m, _) = self.single_value(dtype)?;
                    v.bytes[0] |= m.bytes[0];
                }
            }
            if self.at_word("/")? {
                self.advance();
                let (mut mask, _) = self.single_value(dtype)?;
                while self.eat_punct(",")? {
                    let (m, _) = self.single_value(dtype)?;
                    mask.bytes[0] |= m.bytes[0];
                }
                left = Expr::Binop {
                    expr: Box::new(left),
                    op: BinOp::And,
                    value: mask,
                };
                if op == RelOp::Implicit {
                    op = RelOp::Eq;
                }
            }
            Rhs::Key(vec![KeyPart::Value(v)])
        } else if matches!(dtype, DataType::CtState | DataType::CtStatus) {
            if op == RelOp::Implicit && self.eat_punct("!")? {
                // `ct status ! dnat`: none of the bits (`ct status & dnat == 0`).
                let (mut mask, _) = self.const_or(dtype)?;
                while self.eat_punct(",")? {
                    let (m, _) = self.const_or(dtype)?;
                    for (a, b) in mask.bytes.iter_mut().zip(&m.bytes) {
                        *a |= b;
                    }
                }
                let zero =
                    crate::datatypes::from_uint(dtype, 0).map_err(|m| self.st.error(rspan, m))?;
                return Ok(Stmt::Match(Match {
                    left: Expr::Binop {
                        expr: Box::new(left),
                        op: BinOp::And,
                        value: mask,
                    },
                    op: RelOp::Eq,
                    right: Rhs::Key(vec![KeyPart::Value(zero)]),
                    span: start,
                    implied: false,
                }));
            }
            // Bitmasks: `established,related` (or `established | related`) is one value.
            let (mut v, _) = self.const_or(dtype)?;
            while self.eat_punct(",")? {
                let (m, _) = self.const_or(dtype)?;
                for (a, b) in v.bytes.iter_mut().zip(&m.bytes) {
                    *a |= b;
                }
            }
            Rhs::Key(vec![KeyPart::Value(v)])
        } else {
            let (part, pspan) = self.key_part(dtype)?;
            if matches!(left, Expr::Ct(_)) && self.at_punct(",")? {
                // nft: "Basetype of type conntrack direction is not bitmask" at the value.
                return Err(self.st.error(
                    pspan,
                    format!(
                        "Basetype of type {} is not bitmask: use a set `{{ a, b }}`",
                        dtype.name()
                    ),
                ));
            }
            Rhs::Key(vec![part])
        };
        // `meta l4proto tcp`, `ip protocol udp`, `ip6 nexthdr tcp` fix the transport protocol
        // for a later NAT port mapping (nft's protocol context).
        if matches!(
            left,
            Expr::Meta(MetaKey::L4proto)
                | Expr::Payload(PayloadField::IP_PROTOCOL | PayloadField::IP6_NEXTHDR)
        ) && matches!(op, RelOp::Implicit | RelOp::Eq)
            && matches!(&right, Rhs::Set(_) | Rhs::Key(_))
        {
            // nft 1.0.6 also takes a set (`meta l4proto { tcp, udp }`), not `!=`.
            ctx.l4_match = true;
        }
        if matches!(op, RelOp::Implicit | RelOp::Eq) {
            protocol_context(ctx, &left, &right);
        }
        if let (Expr::Meta(MetaKey::Nfproto), RelOp::Implicit | RelOp::Eq, Rhs::Key(p)) =
            (&left, op, &right)
            && let [KeyPart::Value(v)] = p.as_slice()
        {
            ctx.nfproto = match v.bytes.as_slice() {
                [2] => Some(Family::Ip),
                [10] => Some(Family::Ip6),
                _ => None,
            };
        }
        // `ct state & (established | related) != 0` is nft's flag test, listed as
        // `ct state established,related`: the model holds it as one.
        if let (
            Expr::Binop {
                expr: inner,
                op: BinOp::And,
                value: mask,
            },
            RelOp::Ne,
            Rhs::Key(parts),
        ) = (&left, op, &right)
            && matches!(mask.dtype, DataType::CtState | DataType::CtStatus)
            && matches!(**inner, Expr::Ct(_))
            && let [KeyPart::Value(v)] = parts.as_slice()
            && v.bytes.iter().all(|b| *b == 0)
        {
            let (inner, mask) = ((**inner).clone(), mask.clone());
            return Ok(Stmt::Match(Match {
                left: inner,
                op: RelOp::Implicit,
                right: Rhs::Key(vec![KeyPart::Value(mask)]),
                span: start,
                implied: false,
            }));
        }
        if let (Expr::Payload(f), Rhs::Key(parts)) = (&left, &right)
            && f.at_depth(0) == PayloadField::VLAN_TYPE
            && let [KeyPart::Value(v)] = parts.as_slice()
            && is_vlan_type(v)
            && matches!(op, RelOp::Implicit | RelOp::Eq)
        {
            ctx.vlan_depth = f.depth + 1;
        }
        let (left, right) = fold_xor(left, op, right);
        let (left, right) = resolve_raw(left, right, ctx.family, ctx.l3);
        let (left, right) = mask_as_prefix(left, op, right);
        // `meta hour "21:00"-"02:00"` wraps around midnight: nft 1.0.6 makes it
        // `!= "02:00"-"21:00"` (and `!=` of a wrapping range `==`).
        let (op, right) = match right {
            Rhs::Key(parts) if matches!(op, RelOp::Implicit | RelOp::Eq | RelOp::Ne) => match parts
                .as_slice()
            {
                [KeyPart::Range(lo, hi)] if lo.dtype == DataType::Hour && lo.bytes > hi.bytes => {
                    let flipped = if op == RelOp::Ne {
                        RelOp::Implicit
                    } else {
                        RelOp::Ne
                    };
                    (
                        flipped,
                        Rhs::Key(vec![KeyPart::Range(hi.clone(), lo.clone())]),
                    )
                }
                _ => (op, Rhs::Key(parts)),
            },
            r => (op, r),
        };
        Ok(Stmt::Match(Match {
            left,
            op,
            right,
            span: start,
            implied: false,
        }))
    }

    /// nft 1.0.6's ICMP type dependencies ([`crate::proto::FieldRow::types`]): a field that
    /// exists in several message types (`icmp id`) gets an explicit `icmp type { echo-reply,
    /// echo-request }` in front of it, which the listing shows; one that exists in one type
    /// (`icmp mtu`) a hidden one, and an explicit `icmp type 3` in front of it is that
    /// dependency (the listing drops it). A type matched before that the field does not exist
    /// in is refused ("incompatible icmp match: rule has 8, need 3").
    fn icmp_type_dependencies(&self, stmts: &mut Vec<Stmt>) -> PResult<()> {
        let mut i = 0;
        while i < stmts.len() {
            let Stmt::Match(m) = &stmts[i] else {
                i += 1;
                continue;
            };
            let Expr::Payload(field) = m.left else {
                i += 1;
                continue;
            };
            let types = field.row().types;
            let name = field.proto.desc().name;
            let Some(type_field) = PayloadField::named(name, "type") else {
                i += 1;
                continue;
            };
            if types.is_empty() {
                i += 1;
                continue;
            }
            let span = m.span;
            let earlier = stmts[..i].iter().position(|s| {
                matches!(s, Stmt::Match(e) if e.left == Expr::Payload(type_field)
                    && matches!(e.op, RelOp::Implicit | RelOp::Eq))
            });
            match earlier {
                Some(j) => {
                    let Stmt::Match(e) = &stmts[j] else { break };
                    if let Rhs::Key(parts) = &e.right
                        && let [KeyPart::Value(v)] = parts.as_slice()
                    {
                        let has = crate::datatypes::to_uint(v);
                        if !types.iter().any(|&t| u128::from(t) == has) {
                            return Err(self.st.error(
                                span,
                                format!(
                                    "incompatible {name} match: rule has {has}, need {}",
                                    types[0]
                                ),
                            ));
                        }
                        if types.len() == 1
                            && let Stmt::Match(e) = &mut stmts[j]
                        {
                            e.implied = true;
                        }
                    }
                }
                None if types.len() > 1 => {
                    let dtype = type_field.row().dtype;
                    let elems = types
                        .iter()
                        .map(|&t| {
                            let v = crate::model::Value {
                                dtype,
                                bytes: vec![t].into(),
                                wildcard: false,
                            };
                            crate::model::SetElem::new(vec![KeyPart::Value(v)], span)
                        })
                        .collect();
                    stmts.insert(
                        i,
                        Stmt::Match(Match {
                            left: Expr::Payload(type_field),
                            op: RelOp::Implicit,
                            right: Rhs::Set(SetRef::Anonymous(elems)),
                            span,
                            implied: false,
                        }),
                    );
                    i += 1;
                }
                None => {}
            }
            i += 1;
        }
        Ok(())
    }

    /// The source text a span covers (for messages).
    pub(super) fn st_text(&self, span: Span) -> String {
        crate::model::source_in(&self.st.sources, span.file)
            .and_then(|s| s.line(span.line))
            .map(|l| {
                l.chars()
                    .skip(span.col.saturating_sub(1) as usize)
                    .take(span.len as usize)
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// nft's protocol context after a match on a field that names the next header (`ether type`,
/// `vlan type`, `meta protocol`, `ip protocol`, `ip6 nexthdr`, `meta l4proto`), with `==` or a
/// set (whose highest value counts, as nft 1.0.6 walks the sorted elements): a later header
/// field of another protocol at that layer conflicts (`ether type ip ip6 saddr ::1`: "ip vs.
/// ip6"; `ip protocol { tcp, udp } tcp dport 1`: "udp vs. tcp"; `ether type ip vlan id 1`:
/// "ether vs. vlan").
fn protocol_context(ctx: &mut RuleCtx, left: &Expr, right: &Rhs) {
    let value = |v: &crate::model::Value| crate::datatypes::to_uint(v);
    let highest = match right {
        Rhs::Key(parts) => match parts.as_slice() {
            [KeyPart::Value(v)] => Some(value(v)),
            _ => None,
        },
        Rhs::Set(SetRef::Anonymous(elems)) => elems
            .iter()
            .filter_map(|e| match e.key.as_slice() {
                [KeyPart::Value(v)] => Some(value(v)),
                _ => None,
            })
            .max(),
        Rhs::Set(SetRef::Named(_)) => None,
    };
    let Some(n) = highest else { return };
    let l3_of = |n: u128| match n {
        0x0800 => Some("ip"),
        0x86dd => Some("ip6"),
        0x0806 => Some("arp"),
        _ => None,
    };
    match left {
        Expr::Payload(f) if f.is_link_type() => {
            if f.proto == Proto::Ether && !is_vlan_type_number(n) {
                ctx.no_vlan = true;
            }
            if ctx.l3.is_none() {
                ctx.l3 = l3_of(n);
            }
        }
        Expr::Meta(MetaKey::Protocol) if ctx.l3.is_none() => ctx.l3 = l3_of(n),
        Expr::Payload(PayloadField::IP_PROTOCOL | PayloadField::IP6_NEXTHDR)
        | Expr::Meta(MetaKey::L4proto)
            if ctx.l4.is_none() =>
        {
            ctx.l4 = crate::proto::PROTOCOLS
                .iter()
                .find(|d| {
                    d.l4.is_some() && d.deps.contains(&crate::model::Dependency::L4Proto(n as u8))
                })
                .and_then(|d| d.l4);
        }
        _ => {}
    }
}

/// `x ^ a == b` is `x == a ^ b` (and `!=` likewise): nft folds the xor into the constant, and
/// the kernel holds (and lists) only the comparison (`ct mark xor 0x23 == 0x11` lists as `ct
/// mark 0x00000032`).
fn fold_xor(left: Expr, op: RelOp, right: Rhs) -> (Expr, Rhs) {
    if let (
        Expr::Binop {
            expr,
            op: BinOp::Xor,
            value,
        },
        RelOp::Implicit | RelOp::Eq | RelOp::Ne,
        Rhs::Key(parts),
    ) = (&left, op, &right)
        && let [KeyPart::Value(b)] = parts.as_slice()
        && b.bytes.len() == value.bytes.len()
    {
        let mut v = b.clone();
        for (x, y) in v.bytes.iter_mut().zip(&value.bytes) {
            *x ^= y;
        }
        return ((**expr).clone(), Rhs::Key(vec![KeyPart::Value(v)]));
    }
    (left, right)
}

/// In an inet table, a value statement keyed by a field that does not end on a byte boundary
/// through a named map (`meta mark set ip6 dscp map @m`) is listed by nft 1.0.6 with the field
/// as raw bytes, which carry no protocol: their `meta nfproto` dependency is then listed in
/// front. The model gets that match (it is the dependency the compiler adds anyway).
fn explicit_raw_key_dependency(stmts: &mut Vec<Stmt>) {
    use crate::model::Dependency as D;
    let mut i = 0;
    while i < stmts.len() {
        let value = match &stmts[i] {
            Stmt::MetaSet { value, .. } | Stmt::CtSet { value, .. } => Some(value),
            _ => None,
        };
        let dep = match value {
            Some(Expr::Map {
                key,
                map: SetRef::Named(_),
                ..
            }) => match **key {
                Expr::Payload(p) if crate::print::shifted(&Expr::Payload(p)).is_some() => {
                    match p.desc().deps.first() {
                        Some(D::Ipv4) => Some(2u128),
                        Some(D::Ipv6) => Some(10),
                        _ => None,
                    }
                }
                _ => None,
            },
            _ => None,
        };
        let known = stmts[..i]
            .iter()
            .any(|s| matches!(s, Stmt::Match(m) if matches!(m.left, Expr::Meta(MetaKey::Nfproto))));
        if let Some(n) = dep
            && !known
            && let Ok(v) = crate::datatypes::from_uint(DataType::NfProto, n)
        {
            let span = match &stmts[i] {
                Stmt::MetaSet { span, .. } | Stmt::CtSet { span, .. } => *span,
                _ => unreachable!("matched above"),
            };
            stmts.insert(
                i,
                Stmt::Match(Match {
                    left: Expr::Meta(MetaKey::Nfproto),
                    op: RelOp::Implicit,
                    right: Rhs::Key(vec![KeyPart::Value(v)]),
                    span,
                    implied: false,
                }),
            );
            i += 1;
        }
        i += 1;
    }
}

/// nft 1.0.6 lists a match that is the implicit dependency of a later field as if it had not
/// been written (the kernel holds the same bytecode either way): `meta l4proto tcp tcp dport
/// 22` lists as `tcp dport 22` (and `meta l4proto udp th dport 22` as `udp dport 22`), `meta
/// nfproto ipv4 ip saddr 1.2.3.4` and `ether type ip ip saddr 1.2.3.4` as `ip saddr 1.2.3.4`,
/// `ether type vlan vlan id 2` as `vlan id 2`; in an ip or ip6 table also `ip protocol tcp
/// tcp dport 22` and `meta protocol ip udp dport 67`. Only `==` of one value. A `meta
/// l4proto`, `meta nfproto` or `ip protocol` dependency also reaches past other matches and
/// into a NAT map's key; the others only the field right after them (checked against nft
/// 1.0.6's listings).
fn drop_implied_dependencies(stmts: &mut [Stmt], family: Family) {
    // `meta iiftype ether` is the dependency nft writes for a link-layer field: a later one
    // takes it as its own and the listing drops it (nft's protocol context of the link layer).
    for i in 0..stmts.len() {
        let link_later = stmts[i + 1..].iter().any(|s| {
            matches!(s, Stmt::Match(m) if matches!(&m.left, Expr::Payload(p) if p.desc().base == crate::model::PayloadBase::Link))
        });
        if link_later
            && super::merge::is_iiftype_ether(&stmts[i])
            && let Stmt::Match(m) = &mut stmts[i]
        {
            m.implied = true;
        }
    }
    // A dependency stays in nft's protocol context over the matches after it (its
    // `payload_dependency_store`) until a statement of another kind resets the context; a
    // later field that implies it drops it from the listing (`payload_dependency_kill`), also
    // a field in the key of a NAT statement's map (`expr_postprocess` of `nat.addr`), checked
    // with `nft list ruleset`, 1.0.6: `meta l4proto tcp ip saddr 1.1.1.1 tcp dport 80` lists
    // as `ip saddr 1.1.1.1 tcp dport 80`, `meta l4proto tcp counter tcp dport 80` keeps it.
    for i in 0..stmts.len() {
        let Stmt::Match(dep) = &stmts[i] else {
            continue;
        };
        let value = match (&dep.op, &dep.right) {
            (RelOp::Implicit | RelOp::Eq, Rhs::Key(parts)) => match parts.as_slice() {
                [KeyPart::Value(v)] => crate::datatypes::to_uint(v),
                _ => continue,
            },
            _ => continue,
        };
        let dep_left = dep.left.clone();
        let mut j = i + 1;
        while j < stmts.len() {
            let found = match &stmts[j] {
                Stmt::Match(next) => implied_by(&dep_left, value, &next.left, family)
                    .map(|th| (th, next.left.clone())),
                Stmt::Nat(n) => n
                    .target
                    .as_deref()
                    .and_then(|t| {
                        t.find_map(&|e| implied_by(&dep_left, value, e, family).map(|_| e.clone()))
                    })
                    .map(|f| (None, f)),
                _ => None,
            };
            if let Some((th, _)) = found {
                if let (Some(f), Stmt::Match(m)) = (th, &mut stmts[j]) {
                    m.left = Expr::Payload(f);
                }
                if let Stmt::Match(m) = &mut stmts[i] {
                    m.implied = true;
                }
                break;
            }
            // Only matches keep the context, and the adjacent pair alone for the cases
            // below that need it (ct keys after `meta nfproto`, a link type before its
            // payload).
            let keeps = matches!(&stmts[j], Stmt::Match(m)
                if !matches!(&m.left, Expr::Payload(_)) || m.left != dep_left)
                && matches!(
                    dep_left,
                    Expr::Meta(MetaKey::L4proto | MetaKey::Nfproto)
                        | Expr::Payload(PayloadField::IP_PROTOCOL | PayloadField::IP6_NEXTHDR)
                );
            if !keeps {
                break;
            }
            j += 1;
        }
    }
}

/// Whether `dep == value` (a match in front) is the dependency that the field `next` implies,
/// so that nft's listing drops it. `Some(Some(f))` when `next` is a `th` field that lists as
/// the known transport protocol's field `f`, `Some(None)` when implied otherwise.
fn implied_by(
    dep: &Expr,
    value: u128,
    next: &Expr,
    family: Family,
) -> Option<Option<PayloadField>> {
    use crate::model::Dependency as D;
    if let (Expr::Meta(MetaKey::Nfproto), Expr::Ct(k)) = (dep, next) {
        // `meta nfproto ipv4 ct original saddr 1.2.3.4` lists as `ct original ip saddr
        // 1.2.3.4`, `meta nfproto ipv6 ct protocol 6` as `ct protocol tcp`.
        let fam = match value {
            2 => Some(Family::Ip),
            10 => Some(Family::Ip6),
            _ => None,
        };
        let implied = match k {
            CtKey::Saddr(_, f) | CtKey::Daddr(_, f) => fam == Some(*f),
            CtKey::Protocol => fam.is_some(),
            _ => false,
        };
        return implied.then_some(None);
    }
    let Expr::Payload(field) = next else {
        return None;
    };
    let deps = field.desc().deps;
    let l3 = match value {
        0x0800 | 2 => Some(D::Ipv4),
        0x86dd | 10 => Some(D::Ipv6),
        _ => None,
    };
    let ip_table = matches!(family, Family::Ip | Family::Ip6);
    let implied = match dep {
        Expr::Payload(PayloadField::IP_PROTOCOL | PayloadField::IP6_NEXTHDR) if !ip_table => false,
        Expr::Meta(MetaKey::L4proto)
        | Expr::Payload(PayloadField::IP_PROTOCOL | PayloadField::IP6_NEXTHDR) => {
            let n = value as u8;
            if field.proto == Proto::Th {
                // The transport protocol is known: `th` lists as that protocol's field.
                let name = field.row().name;
                let same = crate::proto::PROTOCOLS
                    .iter()
                    .find(|d| d.l4.is_some() && d.deps.contains(&D::L4Proto(n)))
                    .and_then(|d| PayloadField::named(d.name, name));
                return Some(same);
            }
            deps.contains(&D::L4Proto(n))
        }
        Expr::Meta(MetaKey::Protocol) if ip_table => {
            let own = if family == Family::Ip {
                D::Ipv4
            } else {
                D::Ipv6
            };
            l3 == Some(own)
                && matches!(
                    field.desc().base,
                    crate::model::PayloadBase::Network | crate::model::PayloadBase::Transport
                )
        }
        Expr::Meta(MetaKey::Nfproto | MetaKey::Protocol) => {
            l3.is_some_and(|d| deps.first() == Some(&d))
        }
        // `vlan type ip` in front of a network field of the tag's payload.
        Expr::Payload(p) if p.proto == Proto::Vlan && p.is_link_type() => {
            l3.is_some_and(|d| deps.first() == Some(&d))
                && value > 0xff
                && field.desc().base == crate::model::PayloadBase::Network
        }
        Expr::Payload(PayloadField::ETHER_TYPE) => {
            (l3.is_some_and(|d| deps.first() == Some(&d)) && value > 0xff)
                || (value == 0x8100
                    && field.proto == Proto::Vlan
                    && field.depth == 0
                    && !field.is_link_type())
        }
        _ => false,
    };
    implied.then_some(None)
}

/// A raw payload expression that is a named field lists as that field (nft 1.0.6's
/// `payload_expr_complete`): `@th,16,16` as `th dport`, and in an ip or ip6 table a field of
/// the network header (`@nh,72,8` as `ip protocol`), its values retyped (`@nh,96,32
/// 0x01020304` lists as `ip saddr 1.2.3.4`). Concatenations too, part by part.
fn resolve_raw(left: Expr, right: Rhs, family: Family, l3: Option<&str>) -> (Expr, Rhs) {
    let named = |e: &Expr| -> Option<PayloadField> {
        let Expr::Raw {
            base,
            offset_bits,
            len_bits,
        } = *e
        else {
            return None;
        };
        let proto = match (base, family) {
            (crate::model::PayloadBase::Transport, _) => Proto::Th,
            (crate::model::PayloadBase::Network, Family::Ip) => Proto::Ip,
            (crate::model::PayloadBase::Network, Family::Ip6) => Proto::Ip6,
            // After an `arp` field the network header is ARP's (nft's protocol context).
            (crate::model::PayloadBase::Network, _) if l3 == Some("arp") => Proto::Arp,
            _ => return None,
        };
        let d = proto.desc();
        let i = d
            .fields
            .iter()
            .position(|r| r.offset_bits == offset_bits && r.len_bits == len_bits)?;
        Some(PayloadField {
            proto,
            field: i as u8,
            depth: 0,
        })
    };
    let parts: Vec<&Expr> = match &left {
        Expr::Concat(p) => p.iter().collect(),
        e => vec![e],
    };
    let fields: Vec<Option<PayloadField>> = parts.iter().map(|e| named(e)).collect();
    if fields.iter().all(Option::is_none) {
        return (left, right);
    }
    let retype = |key: &mut [KeyPart]| {
        for (p, f) in key.iter_mut().zip(&fields) {
            let Some(f) = f else { continue };
            let t = f.row().dtype;
            match p {
                KeyPart::Value(v) | KeyPart::Prefix(v, _) => v.dtype = t,
                KeyPart::Range(a, b) => {
                    a.dtype = t;
                    b.dtype = t;
                }
            }
        }
    };
    let mut right = right;
    match &mut right {
        Rhs::Key(k) => retype(k),
        Rhs::Set(SetRef::Anonymous(elems)) => elems.iter_mut().for_each(|e| retype(&mut e.key)),
        Rhs::Set(SetRef::Named(_)) => {}
    }
    let left = match left {
        Expr::Concat(p) => Expr::Concat(
            p.into_iter()
                .zip(&fields)
                .map(|(e, f)| f.map_or(e, Expr::Payload))
                .collect(),
        ),
        e => fields[0].map_or(e, Expr::Payload),
    };
    (left, right)
}

/// `ip saddr & 255.255.0.0 == 255.255.0.0` is the prefix match `ip saddr 255.255.0.0/16`
/// (the kernel holds the same bitwise and comparison; nft 1.0.6 lists the prefix), for an
/// address masked by a prefix mask and a value inside it.
fn mask_as_prefix(left: Expr, op: RelOp, right: Rhs) -> (Expr, Rhs) {
    if let (
        Expr::Binop {
            expr,
            op: BinOp::And,
            value: mask,
        },
        RelOp::Implicit | RelOp::Eq | RelOp::Ne,
        Rhs::Key(parts),
    ) = (&left, op, &right)
        && matches!(mask.dtype, DataType::Ipv4Addr | DataType::Ipv6Addr)
        && let [KeyPart::Value(v)] = parts.as_slice()
    {
        let bits: Vec<bool> = mask
            .bytes
            .iter()
            .flat_map(|b| (0..8).rev().map(move |i| b >> i & 1 == 1))
            .collect();
        let len = bits.iter().take_while(|b| **b).count();
        let contiguous = bits[len..].iter().all(|b| !b);
        let inside = v.bytes.iter().zip(&mask.bytes).all(|(x, m)| x & !m == 0);
        if contiguous && inside && len < bits.len() {
            return (
                (**expr).clone(),
                Rhs::Key(vec![KeyPart::Prefix(v.clone(), len as u8)]),
            );
        }
    }
    (left, right)
}

/// nft 1.0.6 refuses an `ip` (`ip6`) header field after `meta nfproto ipv6` (`ipv4`) in an
/// inet table: "conflicting protocols specified: ip6 vs. ip", at the field's match.
fn nfproto_conflict(stmts: &[Stmt]) -> Option<(Span, String)> {
    let mut nfproto: Option<&str> = None;
    for s in stmts {
        let Stmt::Match(m) = s else { continue };
        match (&m.left, m.op, &m.right) {
            (Expr::Meta(MetaKey::Nfproto), RelOp::Implicit | RelOp::Eq, Rhs::Key(parts)) => {
                if let [KeyPart::Value(v)] = parts.as_slice() {
                    nfproto = match v.bytes.as_slice() {
                        [2] => Some("ip"),
                        [10] => Some("ip6"),
                        _ => nfproto,
                    };
                }
            }
            (Expr::Payload(p), _, _) if matches!(p.proto, Proto::Ip | Proto::Ip6) => {
                let field = if p.proto == Proto::Ip { "ip" } else { "ip6" };
                if let Some(have) = nfproto.filter(|h| *h != field) {
                    return Some((
                        m.span,
                        format!("conflicting protocols specified: {have} vs. {field}"),
                    ));
                }
            }
            _ => {}
        }
    }
    None
}

/// `8021q` or `8021ad`.
fn is_vlan_type_number(n: u128) -> bool {
    n == 0x8100 || n == 0x88a8
}

/// nft 1.0.6 lists the implicit `ether type 8021q` in front of a rule's first vlan field when
/// that field is a `vlan type` comparison (`vlan type ip` is listed as
/// `ether type 8021q vlan type ip`), so the model holds it as an explicit match.
fn explicit_vlan_dependency(stmts: &mut Vec<Stmt>) {
    let mut first_vlan = None;
    for (i, s) in stmts.iter().enumerate() {
        if let Stmt::Match(m) = s {
            match m.left {
                Expr::Payload(PayloadField::ETHER_TYPE) => return,
                Expr::Payload(f) if f.proto == Proto::Vlan => {
                    first_vlan = Some(i);
                    break;
                }
                _ => {}
            }
        }
    }
    let Some(i) = first_vlan else { return };
    let Stmt::Match(m) = &stmts[i] else { return };
    let single = matches!(&m.right, Rhs::Key(p) if matches!(p.as_slice(), [KeyPart::Value(_)]));
    if matches!(m.left, Expr::Payload(PayloadField::VLAN_TYPE))
        && matches!(m.op, RelOp::Implicit | RelOp::Eq)
        && single
    {
        let dep = Match {
            left: Expr::Payload(PayloadField::ETHER_TYPE),
            op: RelOp::Implicit,
            right: Rhs::Key(vec![KeyPart::Value(crate::model::Value {
                dtype: DataType::EtherType,
                bytes: vec![0x81, 0x00].into(),
                wildcard: false,
            })]),
            span: m.span,
            implied: false,
        };
        stmts.insert(i, Stmt::Match(dep));
    }
}
