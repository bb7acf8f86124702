//! Left-hand expressions: header fields, meta keys, `exthdr`, concatenations and bitwise
//! operations.

use super::{PResult, Parser, unsupported};
use crate::lexer::Tok;
use crate::model::{
    BinOp, CtKey, DataType, Expr, Family, Ip6ExtHdr, MetaKey, PayloadField, Span, Stmt, Value,
};
use crate::model::{IpsecField, IpsecKey, OptField, OptHeader, OptSel, PayloadBase, SocketKey};
use crate::proto::Proto;

/// What a rule has said so far that types later expressions (nft's protocol context).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RuleCtx {
    /// Table family.
    pub family: Family,
    /// Depth of the next `vlan` header: nft 1.0.6 moves to the next tag only after a
    /// `vlan type 8021q|8021ad` match (`vlan id 1 vlan id 2` reads the same tag twice).
    pub vlan_depth: u8,
    /// Network protocol named by an `ip`/`ip6` field (for "conflicting protocols").
    pub l3: Option<&'static str>,
    /// Transport protocol named by a `tcp`/`udp`/`icmp`/`icmpv6` field.
    pub l4: Option<&'static str>,
    /// A `ct protocol` (or `ct original protocol`) came before: `ct original proto-src` can
    /// be read.
    pub ct_protocol: bool,
    /// Where a `ct original|reply saddr|daddr` without `ip`/`ip6` was written: nft 1.0.6
    /// takes its family from the table or the value compared, and refuses it as a map key.
    pub ct_implicit_family: Option<Span>,
    /// `ether type` matched a value that is no vlan tag: a vlan field conflicts.
    pub no_vlan: bool,
    /// A field that lives over one network protocol only (`icmp type`: IPv4) was matched: the
    /// network protocol a NAT statement translates (no conflict check: nft lets `icmpv6`
    /// fields stand in an ip table).
    pub l3_hint: Option<Family>,
    /// `meta nfproto ipv4|ipv6` matched: the rule's network protocol.
    pub nfproto: Option<Family>,
    /// A match fixed the transport protocol (`meta l4proto tcp`, `ip protocol udp`,
    /// `ip6 nexthdr tcp`): a NAT statement may then map ports, as after a `tcp` field.
    pub l4_match: bool,
}

impl RuleCtx {
    pub fn new(family: Family) -> Self {
        RuleCtx {
            family,
            vlan_depth: 0,
            l3_hint: None,
            ct_protocol: false,
            ct_implicit_family: None,
            no_vlan: false,
            // An ip or ip6 table's packets are of its family: the other's fields conflict.
            l3: match family {
                Family::Ip => Some("ip"),
                Family::Ip6 => Some("ip6"),
                _ => None,
            },
            l4: None,
            nfproto: None,
            l4_match: false,
        }
    }

    /// The rule has fixed its transport protocol (nft's protocol context has a transport
    /// header): by a `tcp`/`udp`/`icmp`/`icmpv6` field or a protocol match (not by `th`).
    pub fn transport(&self) -> bool {
        self.l4.is_some() || self.l4_match
    }

    /// The network protocol the rule has fixed (an `ip`/`ip6` field, `icmp`, `meta nfproto`):
    /// what a NAT statement in an inet table translates when `ip`/`ip6` is not written.
    pub fn network(&self) -> Option<Family> {
        match self.l3 {
            Some("ip") => Some(Family::Ip),
            Some("ip6") => Some(Family::Ip6),
            _ => self.nfproto.or(self.l3_hint),
        }
    }
}

/// The header keywords that start a payload expression.
pub(crate) const HEADERS: &[&str] = &[
    "ether", "vlan", "ip", "ip6", "tcp", "udp", "icmp", "icmpv6", "th", "meta", "exthdr", "ct",
    "ipsec", "socket", "osf", "fib",
];

/// The keys of `rt` (nft_rt), which share the word with the IPv6 routing header's fields.
const RT_KEYS: &[&str] = &["classid", "nexthop", "mtu", "ipsec", "ip", "ip6"];

/// `ct` keys of nft 1.0.6 (`ct_key` in its grammar, and the direction-qualified ones after
/// `ct original|reply`) that wasp does not read.
const CT_KEYS_UNSUPPORTED: &[&str] = &["secmark", "timeout", "expectation"];

/// Meta keys nft accepts without `meta` (its `meta_key_unqualified`, of those wasp knows).
pub(crate) fn is_bare_meta(w: &str) -> bool {
    crate::meta_keys::bare(w).is_some()
}

impl Parser<'_> {
    /// `true` when the next token starts an expression.
    pub(super) fn at_expr(&mut self) -> PResult<bool> {
        Ok(match self.peek_tok()? {
            Some(Tok::SetRef(b)) => super::unsupported::RAW_BASES.contains(&b.as_str()),
            Some(Tok::Word(w)) => {
                HEADERS.contains(&w.as_str()) || is_bare_meta(&w) || Proto::by_name(&w).is_some()
            }
            _ => false,
        })
    }

    /// One field: `ip saddr`, `meta mark`, `iifname`, `exthdr rt`, `@nh,8,8`, ...
    pub(super) fn primary_expr(&mut self, ctx: &mut RuleCtx) -> PResult<(Expr, Span)> {
        let span = self.peek_span()?;
        if let Some(Tok::SetRef(b)) = self.peek_tok()? {
            let base = match b.as_str() {
                "ll" => PayloadBase::Link,
                "nh" => PayloadBase::Network,
                "th" => PayloadBase::Transport,
                "ih" => PayloadBase::Inner,
                _ => return self.expected("an expression such as `ip saddr` or `tcp dport`"),
            };
            self.advance();
            let (off, len, lspan) = self.offset_length()?;
            if !(1..=128).contains(&len) || off > 0xffff {
                return Err(self.st.error(
                    lspan,
                    "expected a raw payload length of 1 to 128 bits (`@BASE,OFFSET,LENGTH`)",
                ));
            }
            let raw = Expr::Raw {
                base,
                offset_bits: off as u16,
                len_bits: len as u16,
            };
            return Ok((raw, span.through(lspan)));
        }
        let Some(Tok::Word(head)) = self.peek_tok()? else {
            return self.expected("an expression such as `ip saddr` or `tcp dport`");
        };
        if let Some(key) = crate::meta_keys::bare(&head) {
            self.advance();
            return Ok((Expr::Meta(key), span));
        }
        if !HEADERS.contains(&head.as_str()) && Proto::by_name(&head).is_none() {
            if unsupported::statement(&head) {
                return Err(self.st.error(span, unsupported::message(&head)));
            }
            return self.expected("an expression such as `ip saddr` or `tcp dport`");
        }
        self.advance();
        let fspan = self.peek_span()?;
        let field = match self.peek_tok()? {
            Some(Tok::Word(f)) => f,
            _ => String::new(),
        };
        let whole = span.through(fspan);
        match head.as_str() {
            "ipsec" => return self.ipsec_expr(span),
            "socket" => return self.socket_expr(span),
            "osf" => return self.osf_expr(span),
            "fib" => return self.fib_expr(span, ctx),
            "rt" if RT_KEYS.contains(&field.as_str()) => return self.rt_expr(span, ctx),
            _ => {}
        }
        let opt = match (head.as_str(), field.as_str()) {
            ("tcp", "option") => Some(OptHeader::TcpOption),
            ("sctp", "chunk") => Some(OptHeader::SctpChunk),
            _ => None,
        };
        if let Some(hdr) = opt {
            self.advance();
            return self.opt_field(hdr, span, ctx);
        }
        if let Some(proto) = Proto::by_name(&head) {
            let desc = proto.desc();
            // Two-word field names (`arp saddr ip`) take the next word too.
            let mut name = field.clone();
            let mut end = fspan;
            if desc
                .fields
                .iter()
                .any(|r| r.name.starts_with(&format!("{field} ")))
            {
                self.advance();
                end = self.peek_span()?;
                match self.peek_tok()? {
                    Some(Tok::Word(w)) => name = format!("{field} {w}"),
                    _ => {
                        let forms: Vec<&str> = desc
                            .fields
                            .iter()
                            .filter_map(|r| r.name.strip_prefix(&format!("{field} ")))
                            .collect();
                        return self.expected(&format!("`{}`", forms.join("` or `")));
                    }
                }
            }
            // Array fields (`srh sid[1]`): the name, `[`, the index and `]`.
            let entry = format!("{field}[");
            if desc.fields.iter().any(|r| r.name.starts_with(&entry)) {
                let forms: Vec<&str> = desc
                    .fields
                    .iter()
                    .map(|r| r.name)
                    .filter(|n| n.starts_with(&entry))
                    .collect();
                let forms = format!("`{}`", forms.join("` or `"));
                self.advance();
                if !self.eat_punct("[")? {
                    return self.expected(&format!("`[` and an index: {forms}"));
                }
                let index = match self.peek_tok()? {
                    Some(Tok::Word(w)) => w,
                    _ => String::new(),
                };
                name = format!("{field}[{index}]");
                if PayloadField::named(&head, &name).is_none() {
                    return self.expected(&format!("an index of {forms}"));
                }
                self.advance();
                end = self.peek_span()?;
                if !self.at_punct("]")? {
                    return self.expected("`]`");
                }
            }
            if let Some(p) = PayloadField::named(&head, &name) {
                self.advance();
                let whole = span.through(end);
                let p = p.at_depth(if proto == Proto::Vlan {
                    ctx.vlan_depth
                } else {
                    0
                });
                if desc.l3.is_none() {
                    use crate::model::Dependency as D;
                    match p.desc().deps.first() {
                        Some(D::Ipv4) => ctx.l3_hint = Some(Family::Ip),
                        Some(D::Ipv6) => ctx.l3_hint = Some(Family::Ip6),
                        _ => {}
                    }
                }
                if proto == Proto::Vlan && ctx.no_vlan {
                    return Err(self
                        .st
                        .error(whole, "conflicting protocols specified: ether vs. vlan"));
                }
                for (now, slot) in [(desc.l3, &mut ctx.l3), (desc.l4, &mut ctx.l4)] {
                    let Some(now) = now else { continue };
                    if let Some(prev) = *slot
                        && prev != now
                    {
                        return Err(self.st.error(
                            whole,
                            format!("conflicting protocols specified: {prev} vs. {now}"),
                        ));
                    }
                    *slot = Some(now);
                }
                return Ok((Expr::Payload(p), whole));
            }
        }
        match head.as_str() {
            "ct" => {
                self.advance();
                let (key, end) = self.ct_key(&field, span.through(fspan), ctx)?;
                let whole = span.through(end);
                ct_family(self, ctx.family, whole)?;
                Ok((Expr::Ct(key), whole))
            }
            "meta" => match meta_key(&field) {
                Some(k) => {
                    self.advance();
                    if k == MetaKey::Nfproto && ctx.family != Family::Inet {
                        return Err(self
                            .st
                            .error(whole, "meta nfproto is only useful in the inet family"));
                    }
                    Ok((Expr::Meta(k), whole))
                }
                None if unsupported::meta_key(&field) => Err(self
                    .st
                    .error(whole, unsupported::message(&format!("meta {field}")))),
                None => {
                    let names: Vec<String> = crate::meta_keys::META_KEYS
                        .iter()
                        .map(|r| format!("`{}`", r.name))
                        .collect();
                    self.expected(&format!("a meta key ({})", names.join(", ")))
                }
            },
            "exthdr" => {
                let h = match field.as_str() {
                    "hbh" => Ip6ExtHdr::HopByHop,
                    "rt" => Ip6ExtHdr::Routing,
                    "frag" => Ip6ExtHdr::Fragment,
                    "dst" => Ip6ExtHdr::DestOpts,
                    "mh" => Ip6ExtHdr::Mobility,
                    f if unsupported::field("exthdr", f) => {
                        return Err(self
                            .st
                            .error(whole, unsupported::message(&format!("exthdr {f}"))));
                    }
                    _ => {
                        return self.expected(
                            "an IPv6 extension header (`hbh`, `rt`, `frag`, `dst`, `mh`)",
                        );
                    }
                };
                self.advance();
                if let Some(prev) = ctx.l3
                    && prev != "ip6"
                {
                    return Err(self.st.error(
                        whole,
                        format!("conflicting protocols specified: {prev} vs. ip6"),
                    ));
                }
                ctx.l3 = Some("ip6");
                Ok((Expr::ExthdrExists(h), whole))
            }
            _ if unsupported::field(&head, &field) => Err(self
                .st
                .error(whole, unsupported::message(&format!("{head} {field}")))),
            _ => {
                let names: Vec<String> = Proto::by_name(&head)
                    .map(|p| {
                        p.desc()
                            .fields
                            .iter()
                            .map(|r| format!("`{}`", r.name))
                            .collect()
                    })
                    .unwrap_or_default();
                let fields = match names.split_last() {
                    Some((last, [])) => last.clone(),
                    Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                    None => "a field name".to_string(),
                };
                let article = if head.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                };
                self.expected(&format!("{article} `{head}` field: {fields}"))
            }
        }
    }

    /// The key after `ct` (its first word `first`, already taken, at `at`): `state`,
    /// `expiration`, `original zone`, `reply ip saddr`, `original proto-dst`, ... Returns the
    /// key and the span of its last word.
    fn ct_key(&mut self, first: &str, at: Span, ctx: &mut RuleCtx) -> PResult<(CtKey, Span)> {
        use crate::model::CtDirection as D;
        let plain = match first {
            "state" => Some(CtKey::State),
            "direction" => Some(CtKey::Direction),
            "status" => Some(CtKey::Status),
            "mark" => Some(CtKey::Mark),
            "expiration" => Some(CtKey::Expiration),
            "helper" => Some(CtKey::Helper),
            "l3proto" => Some(CtKey::L3proto),
            "protocol" => Some(CtKey::Protocol),
            "id" => Some(CtKey::Id),
            "zone" => Some(CtKey::Zone(None)),
            "bytes" => Some(CtKey::Bytes(None)),
            "packets" => Some(CtKey::Packets(None)),
            "avgpkt" => Some(CtKey::Avgpkt(None)),
            "label" => Some(CtKey::Label),
            "event" => Some(CtKey::Event),
            _ => None,
        };
        if let Some(k) = plain {
            if k == CtKey::Protocol {
                ctx.ct_protocol = true;
            }
            return Ok((k, at));
        }
        let dir = match first {
            "original" => D::Original,
            "reply" => D::Reply,
            f if CT_KEYS_UNSUPPORTED.contains(&f) => {
                return Err(self.st.error(at, unsupported::message(&format!("ct {f}"))));
            }
            _ => {
                // At the key word itself (`at` runs from `ct`).
                let n = first.chars().count() as u32;
                let word = Span {
                    col: (at.col + at.len).saturating_sub(n),
                    len: n.max(1),
                    ..at
                };
                return Err(self.st.error(
                    word,
                    format!(
                        "expected a ct key (`state`, `direction`, `status`, `mark`, `expiration`, `zone`, `bytes`, `packets`, `protocol`, `label`, `event`, `original ...`, `reply ...`) or `count`, found `{first}`"
                    ),
                ));
            }
        };
        let kspan = self.peek_span()?;
        let Some(Tok::Word(w)) = self.peek_tok()? else {
            return self.expected("a ct key after `original`/`reply` (`saddr`, `zone`, ...)");
        };
        self.advance();
        if let Some(net) = ctx.network()
            && matches!(w.as_str(), "ip" | "ip6")
            && net.name() != w
        {
            return Err(self.st.error(
                kspan,
                format!("conflicting protocols specified: {} vs. {w}", net.name()),
            ));
        }
        if matches!(w.as_str(), "saddr" | "daddr") {
            ctx.ct_implicit_family = Some(kspan);
        }
        let family_of = |p: &Self, fam: Option<Family>, at: Span| -> PResult<Family> {
            match fam
                .or(match ctx.family {
                    Family::Ip | Family::Ip6 => Some(ctx.family),
                    _ => None,
                })
                .or(ctx.network())
            {
                Some(f) => Ok(f),
                None => Err(p.st.error(
                    at,
                    "cannot determine ip protocol version, use \"ip saddr\" or \"ip6 saddr\" instead",
                )),
            }
        };
        let key = match w.as_str() {
            "zone" => CtKey::Zone(Some(dir)),
            "bytes" => CtKey::Bytes(Some(dir)),
            "packets" => CtKey::Packets(Some(dir)),
            "avgpkt" => CtKey::Avgpkt(Some(dir)),
            "protocol" => {
                ctx.ct_protocol = true;
                CtKey::Protocol
            }
            "saddr" => CtKey::Saddr(dir, family_of(self, None, kspan)?),
            "daddr" => CtKey::Daddr(dir, family_of(self, None, kspan)?),
            "ip" | "ip6" => {
                let fam = if w == "ip" { Family::Ip } else { Family::Ip6 };
                let aspan = self.peek_span()?;
                let key = match self.peek_tok()? {
                    Some(Tok::Word(a)) if a == "saddr" => CtKey::Saddr(dir, fam),
                    Some(Tok::Word(a)) if a == "daddr" => CtKey::Daddr(dir, fam),
                    _ => return self.expected("`saddr` or `daddr`"),
                };
                self.advance();
                return Ok((key, aspan));
            }
            "proto-src" | "proto-dst" => {
                if !ctx.ct_protocol && ctx.l4.is_none() {
                    // nft 1.0.6 types the port by the protocol it knows of; without one it
                    // cannot read the value.
                    return Err(self.st.error(
                        kspan,
                        format!(
                            "`ct {} {w}` needs the protocol first (`ct protocol tcp` or a `tcp` match)",
                            dir.name()
                        ),
                    ));
                }
                if w == "proto-src" {
                    CtKey::ProtoSrc(dir)
                } else {
                    CtKey::ProtoDst(dir)
                }
            }
            _ => return self.expected("a ct key after `original`/`reply` (`saddr`, `zone`, ...)"),
        };
        Ok((key, kspan))
    }

    /// `,OFFSET,LENGTH` after `@BASE` (raw payload, `tcp option @KIND`): the two numbers (bits)
    /// and where the length is.
    fn offset_length(&mut self) -> PResult<(u64, u64, Span)> {
        self.expect_punct(",")?;
        let off = self.number_u64()?;
        self.expect_punct(",")?;
        let lspan = self.peek_span()?;
        let len = self.number_u64()?;
        Ok((off, len, lspan))
    }

    /// `ipsec in|out [spnum N] reqid|spi|ip saddr|ip daddr|ip6 saddr|ip6 daddr` (after
    /// `ipsec`, at `start`).
    fn ipsec_expr(&mut self, start: Span) -> PResult<(Expr, Span)> {
        let out = match self.peek_tok()? {
            Some(Tok::Word(w)) if w == "in" => false,
            Some(Tok::Word(w)) if w == "out" => true,
            _ => return self.expected("`in` or `out`"),
        };
        self.advance();
        let mut spnum = 0;
        if self.eat_word("spnum")? {
            let nspan = self.peek_span()?;
            let n = self.number_u64()?;
            if n > 255 {
                return Err(self.st.error(
                    nspan,
                    format!("value {n} exceeds valid range 0-255 of spnum"),
                ));
            }
            spnum = n as u8;
        }
        let kspan = self.peek_span()?;
        let Some(Tok::Word(w)) = self.peek_tok()? else {
            return self.expected("`reqid`, `spi`, `ip` or `ip6`");
        };
        self.advance();
        let key = match w.as_str() {
            "reqid" => IpsecField::Reqid,
            "spi" => IpsecField::Spi,
            "ip" | "ip6" => {
                let fam = if w == "ip" { Family::Ip } else { Family::Ip6 };
                let end = self.peek_span()?;
                let k = match self.peek_tok()? {
                    Some(Tok::Word(a)) if a == "saddr" => IpsecField::Saddr(fam),
                    Some(Tok::Word(a)) if a == "daddr" => IpsecField::Daddr(fam),
                    _ => return self.expected("`saddr` or `daddr`"),
                };
                self.advance();
                let e = Expr::Ipsec(IpsecKey { out, spnum, key: k });
                return Ok((e, start.through(end)));
            }
            _ => {
                return Err(self.st.error(
                    kspan,
                    format!("expected `reqid`, `spi`, `ip` or `ip6`, found `{w}`"),
                ));
            }
        };
        Ok((
            Expr::Ipsec(IpsecKey { out, spnum, key }),
            start.through(kspan),
        ))
    }

    /// `socket transparent|mark|wildcard` (after `socket`).
    fn socket_expr(&mut self, start: Span) -> PResult<(Expr, Span)> {
        let kspan = self.peek_span()?;
        let key = match self.peek_tok()? {
            Some(Tok::Word(w)) if w == "transparent" => SocketKey::Transparent,
            Some(Tok::Word(w)) if w == "mark" => SocketKey::Mark,
            Some(Tok::Word(w)) if w == "wildcard" => SocketKey::Wildcard,
            Some(Tok::Word(w)) if w == "cgroupv2" => {
                return Err(self
                    .st
                    .error(kspan, unsupported::message("socket cgroupv2")));
            }
            _ => return self.expected("`transparent`, `mark` or `wildcard`"),
        };
        self.advance();
        Ok((Expr::Socket(key), start.through(kspan)))
    }

    /// `fib FLAG [. FLAG ...] oif|oifname|type` (after `fib`, at `start`), as nft 1.0.6's
    /// `fib_expr` reads it, and what the kernel's `nft_fib_init` refuses.
    fn fib_expr(&mut self, start: Span, ctx: &RuleCtx) -> PResult<(Expr, Span)> {
        use crate::model::{FibExpr, FibResult};
        if matches!(ctx.family, Family::Bridge | Family::Arp) {
            return Err(self.st.error(
                start,
                format!(
                    "`fib` works in ip, ip6, inet and netdev tables only, not in a {} table (nft: Could not process rule: No such file or directory)",
                    ctx.family.name()
                ),
            ));
        }
        let tuple_start = self.peek_span()?;
        let mut tuple_end;
        let mut flags = 0;
        loop {
            let at = self.peek_span()?;
            let f = match self.peek_tok()? {
                Some(Tok::Word(w)) => match w.as_str() {
                    "saddr" => FibExpr::SADDR,
                    "daddr" => FibExpr::DADDR,
                    "mark" => FibExpr::MARK,
                    "iif" => FibExpr::IIF,
                    "oif" => FibExpr::OIF,
                    _ => 0,
                },
                _ => 0,
            };
            if f == 0 {
                return self.expected("`saddr`, `daddr`, `mark`, `iif` or `oif`");
            }
            self.advance();
            flags |= f;
            tuple_end = at;
            if !self.eat_punct(".")? {
                break;
            }
        }
        let tuple = tuple_start.through(tuple_end);
        let rspan = self.peek_span()?;
        let result = match self.peek_tok()? {
            Some(Tok::Word(w)) if w == "oif" => FibResult::Oif,
            Some(Tok::Word(w)) if w == "oifname" => FibResult::Oifname,
            Some(Tok::Word(w)) if w == "type" => FibResult::Type,
            _ => return self.expected("`oif`, `oifname` or `type` (what `fib` returns)"),
        };
        self.advance();
        let both = |a: u32, b: u32| flags & (a | b) == a | b;
        let refuse = if flags & (FibExpr::SADDR | FibExpr::DADDR) == 0 {
            Some("fib: need either saddr or daddr")
        } else if both(FibExpr::SADDR, FibExpr::DADDR) {
            Some("fib: saddr and daddr are mutually exclusive")
        } else if both(FibExpr::IIF, FibExpr::OIF) {
            Some("fib: iif and oif are mutually exclusive")
        } else {
            None
        };
        if let Some(msg) = refuse {
            return Err(self.st.error(tuple, msg));
        }
        if flags & FibExpr::OIF != 0 && result != FibResult::Type {
            // nft_fib_init: the output device restricts a type lookup only.
            return Err(self.st.error(
                start.through(rspan),
                format!(
                    "`fib ... oif` gives a `type` only, not `{}` (nft: Could not process rule: Invalid argument)",
                    result.name()
                ),
            ));
        }
        Ok((Expr::Fib(FibExpr { flags, result }), start.through(rspan)))
    }

    /// `rt [ip|ip6] classid|nexthop|mtu|ipsec` (after `rt`, at `start`), as nft 1.0.6's
    /// `rt_expr` and `expr_evaluate_rt` read it.
    fn rt_expr(&mut self, start: Span, ctx: &RuleCtx) -> PResult<(Expr, Span)> {
        use crate::model::RtKey;
        if !matches!(ctx.family, Family::Ip | Family::Ip6 | Family::Inet) {
            // nft_rt_validate.
            return Err(self.st.error(
                start,
                format!(
                    "`rt` works in ip, ip6 and inet tables only, not in a {} table (nft: Could not process rule: Operation not supported)",
                    ctx.family.name()
                ),
            ));
        }
        let proto = match self.peek_tok()? {
            Some(Tok::Word(w)) if w == "ip" => Some(Family::Ip),
            Some(Tok::Word(w)) if w == "ip6" => Some(Family::Ip6),
            _ => None,
        };
        if proto.is_some() {
            self.advance();
        }
        let kspan = self.peek_span()?;
        let key = match self.peek_tok()? {
            Some(Tok::Word(w)) if w == "classid" => RtKey::Classid,
            Some(Tok::Word(w)) if w == "nexthop" => RtKey::Nexthop4,
            Some(Tok::Word(w)) if w == "mtu" => RtKey::Tcpmss,
            Some(Tok::Word(w)) if w == "ipsec" => RtKey::Ipsec,
            _ => return self.expected("an `rt` key: `classid`, `nexthop`, `mtu` or `ipsec`"),
        };
        self.advance();
        let whole = start.through(kspan);
        if key != RtKey::Nexthop4 {
            return Ok((Expr::Rt(key), whole));
        }
        let fam = match proto {
            Some(f) => f,
            None => match ctx.family {
                Family::Ip | Family::Ip6 => ctx.family,
                _ => ctx.network().ok_or_else(|| {
                    self.st.error(
                        whole,
                        "cannot determine ip protocol version, use \"ip nexthop\" or \"ip6 nexthop\" instead",
                    )
                })?,
            },
        };
        if matches!(ctx.family, Family::Ip | Family::Ip6) && fam != ctx.family {
            return Err(self
                .st
                .error(whole, format!("{} nexthop will not match", fam.name())));
        }
        let key = if fam == Family::Ip6 {
            RtKey::Nexthop6
        } else {
            RtKey::Nexthop4
        };
        Ok((Expr::Rt(key), whole))
    }

    /// `osf [ttl loose|skip] name|version` (after `osf`).
    fn osf_expr(&mut self, start: Span) -> PResult<(Expr, Span)> {
        let mut ttl = 0;
        if self.eat_word("ttl")? {
            ttl = match self.peek_tok()? {
                Some(Tok::Word(w)) if w == "loose" => 1,
                Some(Tok::Word(w)) if w == "skip" => 2,
                _ => return self.expected("`loose` or `skip` after `ttl`"),
            };
            self.advance();
        }
        let kspan = self.peek_span()?;
        let version = match self.peek_tok()? {
            Some(Tok::Word(w)) if w == "name" => false,
            Some(Tok::Word(w)) if w == "version" => true,
            _ => return self.expected("`name` or `version`"),
        };
        self.advance();
        Ok((Expr::Osf { ttl, version }, start.through(kspan)))
    }

    /// After `tcp option` / `sctp chunk`: the option (a name, a number, or for TCP the raw
    /// `@KIND,OFFSET,LENGTH`) and the field, or nothing (then `exists`/`missing` follows).
    fn opt_field(
        &mut self,
        hdr: OptHeader,
        start: Span,
        ctx: &mut RuleCtx,
    ) -> PResult<(Expr, Span)> {
        let what = match hdr {
            OptHeader::TcpOption => {
                "a tcp option (`maxseg`, `window`, `sack-perm`, `sack`, `timestamp`, ... or a number)"
            }
            OptHeader::SctpChunk => {
                "an sctp chunk (`data`, `init`, `init-ack`, `sack`, `shutdown`, ...)"
            }
        };
        let kspan = self.peek_span()?;
        let kind_of = |p: &Self, text: &str, at: Span| -> PResult<u8> {
            match crate::datatypes::parse_uint(text) {
                Some(n) if n <= 255 => Ok(n as u8),
                Some(n) => Err(p.st.error(
                    at,
                    format!("value {n} exceeds valid range 0-255 of the option type"),
                )),
                None => Err(p.st.error(at, format!("expected {what}, found `{text}`"))),
            }
        };
        let l4 = match hdr {
            OptHeader::TcpOption => "tcp",
            OptHeader::SctpChunk => "sctp",
        };
        if let Some(prev) = ctx.l4
            && prev != l4
        {
            return Err(self.st.error(
                start,
                format!("conflicting protocols specified: {prev} vs. {l4}"),
            ));
        }
        ctx.l4 = Some(l4);
        match self.peek_tok()? {
            Some(Tok::SetRef(k)) if hdr == OptHeader::TcpOption => {
                let kind = kind_of(self, &k, kspan)?;
                self.advance();
                let (off, len, lspan) = self.offset_length()?;
                if len == 0 || len > 128 || off > 320 {
                    return Err(self.st.error(
                        lspan,
                        "expected an offset and a length in bits (the length 1 to 128)",
                    ));
                }
                let f = OptField {
                    hdr,
                    kind,
                    desc: None,
                    sel: OptSel::Raw {
                        offset_bits: off as u16,
                        len_bits: len as u16,
                    },
                };
                Ok((Expr::Opt(f), start.through(lspan)))
            }
            Some(Tok::Word(w)) => {
                self.advance();
                let (kind, desc) = match hdr.by_name(&w) {
                    Some(i) => (hdr.table()[i].kind, Some(i as u8)),
                    None => {
                        let k = kind_of(self, &w, kspan)?;
                        let d = hdr.table().iter().position(|d| d.kind == k);
                        (k, d.map(|i| i as u8))
                    }
                };
                let mut end = kspan;
                let mut sel = OptSel::Exists;
                if let (Some(d), Some(Tok::Word(fw))) = (desc, self.peek_tok()?)
                    && let Some(i) = hdr.table()[usize::from(d)]
                        .fields
                        .iter()
                        .position(|r| r.name == fw)
                {
                    end = self.peek_span()?;
                    self.advance();
                    sel = OptSel::Field(i as u8);
                }
                let f = OptField {
                    hdr,
                    kind,
                    desc,
                    sel,
                };
                Ok((Expr::Opt(f), start.through(end)))
            }
            _ => self.expected(what),
        }
    }

    /// `reset tcp option NAME|KIND` at `start` (the word `reset` not consumed yet): the
    /// kernel's exthdr strip (nft 1.0.6 `parser_bison.y` `optstrip_stmt`).
    pub(super) fn opt_reset(&mut self, ctx: &mut RuleCtx, start: Span) -> PResult<Stmt> {
        self.expect_word("reset")?;
        self.expect_word("tcp")?;
        self.expect_word("option")?;
        let kspan = self.peek_span()?;
        let (Expr::Opt(f), _) = self.opt_field(OptHeader::TcpOption, kspan, ctx)? else {
            return self.expected("a tcp option");
        };
        if f.sel != OptSel::Exists {
            return Err(self.st.error(
                kspan,
                "`reset tcp option` takes an option only (`reset tcp option sack-perm`), not a field of it",
            ));
        }
        Ok(Stmt::OptReset {
            kind: f.kind,
            span: start.through(kspan),
        })
    }

    /// The operator next, not consumed: `&`, `|`, `^`, `<<`, `>>`, or nft's words for the first
    /// three (`and`, `or`, `xor`, listed as the symbol).
    pub(super) fn peek_binop(&mut self) -> PResult<Option<BinOp>> {
        Ok(match self.peek_tok()? {
            Some(Tok::Punct("&")) => Some(BinOp::And),
            Some(Tok::Punct("|")) => Some(BinOp::Or),
            Some(Tok::Punct("^")) => Some(BinOp::Xor),
            Some(Tok::Punct("<<")) => Some(BinOp::Lshift),
            Some(Tok::Punct(">>")) => Some(BinOp::Rshift),
            Some(Tok::Word(w)) if w == "and" => Some(BinOp::And),
            Some(Tok::Word(w)) if w == "or" => Some(BinOp::Or),
            Some(Tok::Word(w)) if w == "xor" => Some(BinOp::Xor),
            _ => None,
        })
    }

    /// A field with optional bitwise operations: `tcp flags & (syn | ack)`, `meta mark & 0xff`.
    pub(super) fn binop_expr(&mut self, ctx: &mut RuleCtx) -> PResult<(Expr, Span)> {
        let (mut e, mut span) = self.primary_expr(ctx)?;
        let mut ops = 0;
        loop {
            let op_span = self.peek_span()?;
            // A match's operand takes no shift (nft 1.0.6's relational grammar).
            let op = match self.peek_binop()? {
                Some(op) if !matches!(op, BinOp::Lshift | BinOp::Rshift) => op,
                _ => break,
            };
            // Each operation wraps the expression once more (`Expr::Binop`).
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
            let dtype = e.dtype();
            let (value, vspan) = self.const_or(dtype)?;
            span = span.through(vspan);
            e = Expr::Binop {
                expr: Box::new(e),
                op,
                value,
            };
        }
        Ok((e, span))
    }

    /// A constant, possibly `a | b | c` or in parentheses: the right side of `&`.
    pub(super) fn const_or(&mut self, dtype: DataType) -> PResult<(Value, Span)> {
        let start = self.peek_span()?;
        let paren = self.eat_punct("(")?;
        let (mut v, mut end) = self.single_value(dtype)?;
        while self.eat_punct("|")? {
            let (w, s) = self.single_value(dtype)?;
            for (a, b) in v.bytes.iter_mut().zip(&w.bytes) {
                *a |= b;
            }
            end = s;
        }
        if paren {
            end = self.expect_punct(")")?;
        }
        let span = start.through(end);
        Ok((v, span))
    }

    /// A concatenation of fields: `ip saddr . tcp dport`.
    pub(super) fn concat_expr(&mut self, ctx: &mut RuleCtx) -> PResult<(Expr, Span)> {
        let (first, mut span) = self.binop_expr(ctx)?;
        if !self.at_punct(".")? {
            return Ok((first, span));
        }
        let mut parts = vec![first];
        while self.eat_punct(".")? {
            let (e, s) = self.binop_expr(ctx)?;
            span = span.through(s);
            parts.push(e);
        }
        Ok((Expr::Concat(parts), span))
    }
}

/// Connection tracking exists for the ip, ip6 and inet families only: the kernel refuses a
/// `ct` expression or statement in an arp, bridge or netdev table when the rule is added
/// (nft_ct_get_init / nft_connlimit_init: `nf_ct_netns_get` fails; nft 1.0.6 reports "Could
/// not process rule: Protocol error" at the `ct` expression).
pub(super) fn ct_family(p: &Parser<'_>, family: Family, at: Span) -> PResult<()> {
    if matches!(family, Family::Ip | Family::Ip6 | Family::Inet) {
        return Ok(());
    }
    Err(p.st.error(
        at,
        format!(
            "`ct` needs connection tracking, which the kernel has for ip, ip6 and inet tables only, not in a {} table (nft: Could not process rule: Protocol error)",
            family.name()
        ),
    ))
}

/// `meta KEY` names.
pub(crate) fn meta_key(w: &str) -> Option<MetaKey> {
    crate::meta_keys::by_name(w)
}
