//! `reject [with icmp|icmpv6|icmpx [type] CODE | with tcp reset]`, as nft 1.0.6 reads and
//! lists it (`parser_bison.y`: `reject_stmt`; `evaluate.c`: `stmt_evaluate_reject`): the
//! default reply of the family (or of the rule's network protocol in inet and netdev tables),
//! the protocol dependencies nft puts in front of the rule (`meta nfproto ipv4` for an icmp
//! reply in an inet table, `meta l4proto tcp` for a tcp reset) and which of them it lists.

use super::expr::RuleCtx;
use super::{PResult, Parser};
use crate::datatypes::to_uint;
use crate::lexer::Tok;
use crate::model::{
    DataType, Expr, Family, ICMPX_CODES, KeyPart, Match, MetaKey, PayloadField, RejectKind, RelOp,
    Rhs, Span, Stmt, Value,
};

/// ICMP port-unreachable (the ip family's default reply).
const ICMP_PORT_UNREACH: u8 = 3;
/// ICMPv6 port-unreachable (the ip6 family's default reply).
const ICMPV6_PORT_UNREACH: u8 = 4;
/// icmpx port-unreachable (the default of inet and netdev tables).
const ICMPX_PORT_UNREACH: u8 = 1;
/// Largest icmpx code the kernel takes (NFT_REJECT_ICMPX_MAX).
const ICMPX_MAX: u8 = 3;

/// What `with ...` asked for, before the family resolves it.
#[derive(Clone, Copy)]
enum Asked {
    Default,
    Icmp(u8),
    Icmpv6(u8),
    Icmpx(u8),
    TcpReset,
}

/// The value of a one-value `==` match of `left` in `stmts` (the last one), and its index.
fn matched(stmts: &[Stmt], left: impl Fn(&Expr) -> bool) -> Option<(usize, u128)> {
    stmts.iter().enumerate().rev().find_map(|(i, s)| match s {
        Stmt::Match(Match {
            left: l,
            op: RelOp::Implicit | RelOp::Eq,
            right: Rhs::Key(parts),
            ..
        }) if left(l) => match parts.as_slice() {
            [KeyPart::Value(v)] => Some((i, to_uint(v))),
            _ => None,
        },
        _ => None,
    })
}

/// The network and transport protocols the header fields matched in `stmts` imply (their
/// implicit dependencies: `ip saddr` is IPv4, `tcp dport` is IPv4 or IPv6 and TCP).
fn field_protocols(stmts: &[Stmt]) -> (Option<Family>, Option<u8>) {
    use crate::model::Dependency as D;
    fn payloads(e: &Expr, out: &mut Vec<PayloadField>) {
        match e {
            Expr::Payload(p) => out.push(*p),
            Expr::Concat(parts) => parts.iter().for_each(|p| payloads(p, out)),
            Expr::Binop { expr, .. } => payloads(expr, out),
            _ => {}
        }
    }
    let mut fields = Vec::new();
    for s in stmts {
        if let Stmt::Match(m) = s {
            payloads(&m.left, &mut fields);
        }
    }
    let (mut net, mut l4) = (None, None);
    for f in fields {
        for d in f.desc().deps {
            match d {
                D::Ipv4 => net = Some(Family::Ip),
                D::Ipv6 => net = Some(Family::Ip6),
                D::L4Proto(n) => l4 = Some(*n),
                _ => {}
            }
        }
    }
    (net, l4)
}

fn meta_match(key: MetaKey, dtype: DataType, bytes: Vec<u8>, implied: bool) -> Stmt {
    Stmt::Match(Match {
        left: Expr::Meta(key),
        op: RelOp::Implicit,
        right: Rhs::Key(vec![KeyPart::Value(Value {
            dtype,
            bytes: bytes.into(),
            wildcard: false,
        })]),
        span: Span::default(),
        implied,
    })
}

impl Parser<'_> {
    /// A reply code after `with icmp|icmpv6|icmpx [type]`: a name of `dtype` (or of the icmpx
    /// codes when `None`) or a number.
    fn reject_code(&mut self, dtype: Option<DataType>, what: &str) -> PResult<(u8, Span)> {
        self.eat_word("type")?;
        let span = self.peek_span()?;
        let text = match self.peek_tok()? {
            Some(Tok::Word(w)) => w,
            _ => return self.expected(&format!("an {what} code name or number")),
        };
        let code = match dtype {
            Some(d) => crate::datatypes::parse_value(d, &text)
                .ok()
                .and_then(|v| v.bytes.first().copied()),
            None => ICMPX_CODES
                .iter()
                .find(|(n, _)| *n == text)
                .map(|(_, c)| *c)
                .or_else(|| crate::datatypes::parse_uint(&text).and_then(|n| u8::try_from(n).ok())),
        };
        match code {
            Some(c) => {
                self.advance();
                Ok((c, span))
            }
            None => Err(self.st.error(
                span,
                format!("expected an {what} code name or number, found `{text}` (nft: Could not parse {what} code)"),
            )),
        }
    }

    /// `reject ...` (at `reject`, not consumed; `start` is it). The dependencies nft adds go
    /// into `stmts` (the rule's statements so far); returns the statement.
    pub(super) fn reject_stmt(
        &mut self,
        ctx: &RuleCtx,
        stmts: &mut Vec<Stmt>,
        start: Span,
    ) -> PResult<Stmt> {
        self.advance();
        let family = ctx.family;
        let mut last = start;
        let mut cspan = start;
        let asked = if self.eat_word("with")? {
            let wspan = self.peek_span()?;
            match self.peek_tok()? {
                Some(Tok::Word(w)) if w == "icmp" || w == "icmpv6" || w == "icmpx" => {
                    self.advance();
                    let dtype = match w.as_str() {
                        "icmp" => Some(DataType::IcmpCode),
                        "icmpv6" => Some(DataType::Icmpv6Code),
                        _ => None,
                    };
                    let (code, span) = self.reject_code(dtype, &w)?;
                    (last, cspan) = (span, span);
                    match w.as_str() {
                        "icmp" => Asked::Icmp(code),
                        "icmpv6" => Asked::Icmpv6(code),
                        _ => Asked::Icmpx(code),
                    }
                }
                Some(Tok::Word(w)) if w == "tcp" => {
                    self.advance();
                    last = self.expect_word("reset")?;
                    cspan = wspan;
                    Asked::TcpReset
                }
                _ => return self.expected("`icmp`, `icmpv6`, `icmpx` or `tcp reset` after `with`"),
            }
        } else {
            Asked::Default
        };
        let span = start.through(last);
        if matches!(family, Family::Arp) {
            return Err(self.st.error(start, "cannot use reject with arp"));
        }
        // The network protocol the rule fixed: by the table's family, an `ip`/`ip6` field,
        // `meta nfproto` (inet) or `meta protocol` (netdev).
        let netdev_proto = matched(stmts, |l| {
            matches!(
                l,
                Expr::Meta(MetaKey::Protocol) | Expr::Payload(PayloadField::ETHER_TYPE)
            )
        });
        if matches!(family, Family::Netdev | Family::Bridge)
            && let Some((_, proto)) = netdev_proto
            && !matches!(proto, 0x0800 | 0x86dd | 0x8100 | 0x88a8)
        {
            // nft 1.0.6: only IPv4 and IPv6 packets get a reply.
            return Err(self.st.error(start, "cannot reject this network family"));
        }
        let nfproto = matched(stmts, |l| *l == Expr::Meta(MetaKey::Nfproto));
        let fields = field_protocols(stmts);
        let network = match family {
            Family::Ip => Some(Family::Ip),
            Family::Ip6 => Some(Family::Ip6),
            Family::Netdev | Family::Bridge => fields.0.or(match netdev_proto {
                Some((_, 0x0800)) => Some(Family::Ip),
                Some((_, 0x86dd)) => Some(Family::Ip6),
                _ => None,
            }),
            _ => fields.0.or(match nfproto {
                Some((_, 2)) => Some(Family::Ip),
                Some((_, 10)) => Some(Family::Ip6),
                _ => None,
            }),
        };
        let l2 = !matches!(family, Family::Ip | Family::Ip6);
        // nft 1.0.6 says "ip vs ip6" whichever way round.
        let conflict = |p: &Parser<'_>| {
            p.st.error(cspan, "conflicting protocols specified: ip vs ip6")
        };
        let kind = match asked {
            Asked::Default => match network {
                Some(Family::Ip) => RejectKind::Icmp(ICMP_PORT_UNREACH),
                Some(Family::Ip6) => RejectKind::Icmpv6(ICMPV6_PORT_UNREACH),
                _ => RejectKind::Icmpx(ICMPX_PORT_UNREACH),
            },
            Asked::Icmp(c) | Asked::Icmpv6(c) => {
                let v4 = matches!(asked, Asked::Icmp(_));
                let fam = if v4 { Family::Ip } else { Family::Ip6 };
                if network.is_some_and(|n| n != fam) {
                    return Err(conflict(self));
                }
                if l2 && c >= 128 {
                    // nft 1.0.6 keeps the code in a signed char in inet and netdev tables.
                    return Err(self.st.error(start, "missing icmp error type"));
                }
                if !l2 && c == 255 {
                    return Err(self.st.error(
                        span,
                        "the kernel refuses this code (nft: Could not process rule: Invalid argument)",
                    ));
                }
                if v4 {
                    RejectKind::Icmp(c)
                } else {
                    RejectKind::Icmpv6(c)
                }
            }
            Asked::Icmpx(c) => {
                if !l2 {
                    return Err(self.st.error(
                        cspan,
                        format!(
                            "abstracted ICMP unreachable not supported (`icmpx` is for inet and netdev tables; an {} table replies with `{}`)",
                            family.name(),
                            if family == Family::Ip { "icmp" } else { "icmpv6" }
                        ),
                    ));
                }
                if c > ICMPX_MAX {
                    return Err(self.st.error(
                        start,
                        "the kernel takes icmpx codes 0 to 3 (nft: Could not process rule: Invalid argument)",
                    ));
                }
                RejectKind::Icmpx(c)
            }
            Asked::TcpReset => RejectKind::TcpReset,
        };
        // Dependencies: nft puts them at the front of the rule.
        match kind {
            RejectKind::TcpReset => {
                let l4 = matched(stmts, |l| {
                    matches!(
                        l,
                        Expr::Meta(MetaKey::L4proto)
                            | Expr::Payload(PayloadField::IP_PROTOCOL | PayloadField::IP6_NEXTHDR)
                    )
                });
                let by_field = fields.1.map(|n| n == 6);
                let tcp = by_field.or(l4.map(|(_, p)| p == 6));
                match tcp {
                    Some(false) => {
                        return Err(self
                            .st
                            .error(start, "you cannot use tcp reset with this protocol"));
                    }
                    Some(true) => {
                        // In ip and ip6 tables the written protocol match is the dependency
                        // and is not listed.
                        if let (Some((i, _)), None, false) = (l4, by_field, l2)
                            && let Stmt::Match(m) = &mut stmts[i]
                        {
                            m.implied = true;
                        }
                    }
                    None => {
                        // Listed in inet and netdev tables (nft 1.0.6), not in ip and ip6.
                        stmts.insert(
                            0,
                            meta_match(MetaKey::L4proto, DataType::InetProto, vec![6], !l2),
                        );
                    }
                }
            }
            RejectKind::Icmp(_) | RejectKind::Icmpv6(_) if l2 => {
                let v4 = matches!(kind, RejectKind::Icmp(_));
                let written = if family == Family::Inet {
                    nfproto.filter(|(_, v)| *v == if v4 { 2 } else { 10 })
                } else {
                    netdev_proto.filter(|(_, v)| *v == if v4 { 0x0800 } else { 0x86dd })
                };
                if let Some((i, _)) = written {
                    if let Stmt::Match(m) = &mut stmts[i] {
                        m.implied = true;
                    }
                } else if network.is_none() {
                    let dep = if family == Family::Inet {
                        meta_match(
                            MetaKey::Nfproto,
                            DataType::NfProto,
                            vec![if v4 { 2 } else { 10 }],
                            true,
                        )
                    } else {
                        let ty: u16 = if v4 { 0x0800 } else { 0x86dd };
                        meta_match(
                            MetaKey::Protocol,
                            DataType::EtherType,
                            ty.to_be_bytes().to_vec(),
                            true,
                        )
                    };
                    stmts.insert(0, dep);
                }
            }
            _ => {}
        }
        Ok(Stmt::Reject {
            kind,
            verbose: l2,
            span,
        })
    }
}
