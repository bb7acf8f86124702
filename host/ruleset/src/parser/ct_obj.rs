//! Named conntrack objects (`ct helper NAME { ... }`, `ct timeout NAME { ... }`, `ct
//! expectation NAME { ... }`, in a table block or by `add ct helper|timeout|expectation FAMILY
//! TABLE NAME { ... }`) and the statements that name them (`ct helper set "NAME"`, `ct
//! timeout set KEY map { ... }`, ...), as nft 1.0.6 reads them (`parser_bison.y`:
//! `ct_helper_config`, `ct_timeout_config`, `ct_expect_config`, `objref_stmt_ct`), with the
//! checks the kernel makes when it gets them (`nft_ct_helper_obj_init`,
//! `nft_ct_timeout_obj_init`, `nft_ct_expect_obj_init` in nft_ct.c). What they mean in wasp:
//! [`crate::model::CtObj`].

use super::expr::RuleCtx;
use super::{PResult, Parser};
use crate::lexer::Tok;
use crate::model::{CtObj, CtObjConfig, Family, ObjKind, Span, Stmt, ct_timeout_states};

/// The kernel's conntrack helpers by name and transport protocol (the helpers of
/// net/netfilter/nf_conntrack_*.c that register themselves: `nf_conntrack_helper_try_module_get`
/// finds no other; checked with `nft -f` on kernel 6.18, where `H.245`, which only an
/// expectation creates, is refused).
const HELPERS: &[(&str, u8)] = &[
    ("amanda", 17),
    ("ftp", 6),
    ("irc", 6),
    ("netbios-ns", 17),
    ("pptp", 6),
    ("Q.931", 6),
    ("RAS", 17),
    ("sane", 6),
    ("sip", 6),
    ("sip", 17),
    ("snmp", 17),
    ("snmp_trap", 17),
    ("tftp", 17),
];

/// The message nft gives for a kernel error: "(nft: Could not process rule: WHAT)".
fn kernel(what: &str) -> String {
    format!("(nft: Could not process rule: {what})")
}

/// `ct helper|timeout|expectation` after `ct`, as an object kind.
fn kind_of(word: &str) -> Option<ObjKind> {
    match word {
        "helper" => Some(ObjKind::CtHelper),
        "timeout" => Some(ObjKind::CtTimeout),
        "expectation" => Some(ObjKind::CtExpectation),
        _ => None,
    }
}

/// What one object block says, before the kernel's checks.
#[derive(Default)]
struct Written {
    helper: Option<(String, Span)>,
    protocol: Option<u8>,
    l3proto: Option<(Family, Span)>,
    policy: Vec<(u8, u32)>,
    dport: u64,
    timeout_ms: u64,
    size: u64,
    comment: Option<String>,
}

impl Parser<'_> {
    /// `helper`, `timeout` or `expectation` (after `ct`): the object kind and its span.
    pub(super) fn ct_obj_kind(&mut self) -> PResult<(ObjKind, Span)> {
        let kspan = self.peek_span()?;
        match self.peek_tok()? {
            Some(Tok::Word(w)) if kind_of(&w).is_some() => {
                self.advance();
                Ok((kind_of(&w).unwrap_or(ObjKind::CtHelper), kspan))
            }
            _ => self.expected("`helper`, `timeout` or `expectation`"),
        }
    }

    /// `NAME { ... }` of a conntrack object of `kind` (written at `kspan`; `span` is `ct`), in
    /// a table of `family`.
    pub(super) fn ct_obj(
        &mut self,
        kind: ObjKind,
        kspan: Span,
        family: Family,
        span: Span,
    ) -> PResult<CtObj> {
        let (name, nspan) = self.name(&format!("a {} name", kind.name()))?;
        if !matches!(family, Family::Ip | Family::Ip6 | Family::Inet) {
            // nft_ct_*_obj_init: conntrack objects are the IP families' (EPROTO for netdev
            // and bridge, which have no conntrack of these; arp: EAFNOSUPPORT or EINVAL).
            return Err(self.st.error(
                kspan,
                format!(
                    "`{}` objects exist in ip, ip6 and inet tables only, not in a {} table {}",
                    kind.name(),
                    family.name(),
                    kernel("Protocol error")
                ),
            ));
        }
        let open = self.expect_punct("{")?;
        let mut w = Written::default();
        loop {
            self.skip_separators()?;
            let ispan = self.peek_span()?;
            let word = match self.peek_tok()? {
                Some(Tok::Punct("}")) => {
                    self.advance();
                    break;
                }
                Some(Tok::Word(x)) => x,
                None => return self.unclosed(&expected_items(kind), open),
                _ => return self.expected(&expected_items(kind)),
            };
            match (kind, word.as_str()) {
                (_, "comment") => {
                    // nft's `comment_spec` in these blocks needs no separator after it.
                    self.advance();
                    w.comment = Some(self.string("a quoted comment")?.0);
                    continue;
                }
                (_, "l3proto") => {
                    self.advance();
                    let fspan = self.peek_span()?;
                    let f = match self.peek_tok()? {
                        Some(Tok::Word(x)) => super::commands::family_from(&x),
                        _ => None,
                    };
                    let Some(f) = f else {
                        return self
                            .expected("a family (`ip`, `ip6`, `inet`, `arp`, `bridge`, `netdev`)");
                    };
                    self.advance();
                    w.l3proto = Some((f, fspan));
                }
                (ObjKind::CtHelper, "type") => {
                    self.advance();
                    w.helper = Some(self.string("the helper's name in quotes (`\"ftp\"`)")?);
                    if !self.at_word("protocol")? {
                        return self.expected("`protocol`");
                    }
                    self.advance();
                    w.protocol = Some(self.l4proto()?);
                }
                (ObjKind::CtTimeout | ObjKind::CtExpectation, "protocol") => {
                    self.advance();
                    w.protocol = Some(self.l4proto()?);
                }
                (ObjKind::CtTimeout, "policy") => {
                    self.advance();
                    self.expect_punct("=")?;
                    self.timeout_policy(w.protocol.unwrap_or(0), &mut w.policy)?;
                }
                (ObjKind::CtExpectation, "dport") => {
                    self.advance();
                    w.dport = self.number_u64()?;
                }
                (ObjKind::CtExpectation, "timeout") => {
                    self.advance();
                    w.timeout_ms = self.time()?;
                }
                (ObjKind::CtExpectation, "size") => {
                    self.advance();
                    w.size = self.number_u64()?;
                }
                _ => {
                    return Err(self.st.error(
                        ispan,
                        format!("expected {}, found `{word}`", expected_items(kind)),
                    ));
                }
            }
            // nft: "expecting newline or semicolon", also before `}`.
            self.end_of_item()?;
        }
        let whole = span.through(nspan);
        let config = self.ct_obj_config(kind, family, w.clone_config(), nspan)?;
        Ok(CtObj {
            name,
            handle: 0,
            config,
            comment: w.comment,
            span: whole,
        })
    }

    /// The object's configuration from what its block says, with the kernel's checks.
    fn ct_obj_config(
        &mut self,
        kind: ObjKind,
        family: Family,
        w: Written,
        nspan: Span,
    ) -> PResult<CtObjConfig> {
        let l3proto = w.l3proto.map_or(family, |(f, _)| f);
        let l3_error = |p: &Self, span: Span, what: &str| {
            p.st.error(
                span,
                format!(
                    "l3proto {} does not go with a {} table {}",
                    l3proto.name(),
                    family.name(),
                    kernel(what)
                ),
            )
        };
        let lspan = w.l3proto.map_or(nspan, |(_, s)| s);
        match kind {
            ObjKind::CtHelper => {
                let (Some((helper, hspan)), Some(protocol)) = (w.helper, w.protocol) else {
                    return Err(self.st.error(
                        nspan,
                        "expected `type \"NAME\" protocol tcp|udp` in the helper's block",
                    ));
                };
                // nft_ct_helper_obj_init: an IPv4 helper in an ip6 table (or the reverse) is
                // EINVAL, a family without conntrack EAFNOSUPPORT.
                match (family, l3proto) {
                    (Family::Ip, Family::Ip6) | (Family::Ip6, Family::Ip) => {
                        return Err(l3_error(self, lspan, "Invalid argument"));
                    }
                    (_, Family::Arp) => {
                        return Err(l3_error(
                            self,
                            lspan,
                            "Address family not supported by protocol",
                        ));
                    }
                    _ => {}
                }
                if !HELPERS.iter().any(|(n, p)| *n == helper && *p == protocol) {
                    let names: Vec<String> = HELPERS
                        .iter()
                        .map(|(n, p)| format!("\"{n}\" {}", if *p == 6 { "tcp" } else { "udp" }))
                        .collect();
                    return Err(self.st.error(
                        hspan,
                        format!(
                            "the kernel has no conntrack helper \"{helper}\" for {} (it has {}) {}",
                            if protocol == 6 { "tcp" } else { "udp" },
                            names.join(", "),
                            kernel("No such file or directory")
                        ),
                    ));
                }
                Ok(CtObjConfig::Helper {
                    helper,
                    protocol,
                    l3proto,
                })
            }
            ObjKind::CtTimeout => {
                let Some(protocol) = w.protocol else {
                    return Err(self
                        .st
                        .error(nspan, "expected `protocol tcp|udp` in the timeout's block"));
                };
                if l3proto == Family::Arp {
                    return Err(l3_error(self, lspan, "Protocol error"));
                }
                Ok(CtObjConfig::Timeout {
                    protocol,
                    l3proto,
                    policy: w.policy,
                })
            }
            _ => {
                // nft: "missing options" unless protocol, dport, timeout and size are all
                // given (and not 0), at the object's name.
                let (Some(protocol), true, true, true) = (
                    w.protocol,
                    w.dport as u16 != 0,
                    w.timeout_ms != 0,
                    w.size as u8 != 0,
                ) else {
                    return Err(self.st.error(
                        nspan,
                        "missing options: an expectation needs `protocol`, `dport`, `timeout` and `size` (none of them 0)",
                    ));
                };
                // nft_ct_expect_obj_init: IPv4 or IPv6 only (an inet table's own family is
                // neither: EAFNOSUPPORT), and of the table's family (EINVAL).
                match (family, l3proto) {
                    (_, Family::Inet | Family::Arp | Family::Bridge | Family::Netdev) => {
                        return Err(self.st.error(
                            lspan,
                            format!(
                                "an expectation needs `l3proto ip` or `l3proto ip6` {}",
                                kernel("Address family not supported by protocol")
                            ),
                        ));
                    }
                    (Family::Ip, Family::Ip6) | (Family::Ip6, Family::Ip) => {
                        return Err(l3_error(self, lspan, "Invalid argument"));
                    }
                    _ => {}
                }
                Ok(CtObjConfig::Expectation {
                    protocol,
                    // nft keeps the low 16 and 8 bits.
                    dport: w.dport as u16,
                    timeout_ms: w.timeout_ms,
                    size: w.size as u8,
                    l3proto,
                })
            }
        }
    }

    /// `tcp` or `udp` (nft's `ct_l4protoname`): 6 or 17.
    fn l4proto(&mut self) -> PResult<u8> {
        let p = match self.peek_tok()? {
            Some(Tok::Word(w)) if w == "tcp" => 6,
            Some(Tok::Word(w)) if w == "udp" => 17,
            _ => return self.expected("`tcp` or `udp`"),
        };
        self.advance();
        Ok(p)
    }

    /// `{ STATE : SECONDS, ... }` of a timeout policy for transport protocol `protocol` (after
    /// `policy =`), into `policy` (sorted by state, the last value of a state counts).
    fn timeout_policy(&mut self, protocol: u8, policy: &mut Vec<(u8, u32)>) -> PResult<()> {
        let open = self.expect_punct("{")?;
        let states = ct_timeout_states(protocol);
        loop {
            self.skip_newlines()?;
            if self.eat_punct("}")? {
                break;
            }
            // `established:122`, `established : 122`, `established: 122` (the lexer keeps
            // `:` in words).
            let start = self.peek_span()?;
            let mut text = String::new();
            while let Some(Tok::Word(w)) = self.peek_tok()? {
                text.push_str(&w);
                self.advance();
                if text.contains(':') && !text.ends_with(':') {
                    break;
                }
            }
            if text.is_empty() {
                return match self.peek_tok()? {
                    None => self.unclosed("`STATE : SECONDS` or `}`", open),
                    _ => self.expected("`STATE : SECONDS` or `}`"),
                };
            }
            let span = start.through(self.last_span());
            let Some((state, secs)) = text.split_once(':') else {
                return Err(self
                    .st
                    .error(span, format!("expected `STATE : SECONDS`, found `{text}`")));
            };
            let Some(i) = states.iter().position(|(n, _)| *n == state) else {
                let names: Vec<&str> = states.iter().map(|(n, _)| *n).collect();
                return Err(self.st.error(
                    span,
                    format!(
                        "invalid state for this protocol: `{state}` (the states of {} are {})",
                        match protocol {
                            6 => "tcp",
                            17 => "udp",
                            _ => "no protocol",
                        },
                        if names.is_empty() {
                            "none: write `protocol tcp|udp` first".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                ));
            };
            let Some(n) = crate::datatypes::parse_uint(secs).and_then(|n| u32::try_from(n).ok())
            else {
                return Err(self.st.error(
                    span,
                    format!("expected a number of seconds after `{state}:`, found `{secs}`"),
                ));
            };
            match policy.iter_mut().find(|(s, _)| usize::from(*s) == i) {
                Some(e) => e.1 = n,
                None => policy.push((i as u8, n)),
            }
            self.skip_newlines()?;
            if self.eat_punct(",")? {
                continue;
            }
            if !self.at_punct("}")? {
                return self.expected("`,` or `}`");
            }
        }
        policy.sort_unstable();
        Ok(())
    }

    /// After `ct helper|timeout|expectation` and `set` in a rule (`start` is `ct`): `"NAME"` or
    /// `KEY map { k : "NAME", ... }`.
    pub(super) fn ct_obj_stmt(
        &mut self,
        kind: ObjKind,
        ctx: &mut RuleCtx,
        start: Span,
    ) -> PResult<Stmt> {
        if self.at_expr()? {
            return self.object_map(kind, ctx, start);
        }
        let (name, nspan) = self.name(&format!("a {} name in quotes", kind.name()))?;
        Ok(Stmt::CtObjRef {
            kind,
            name,
            span: start.through(nspan),
        })
    }

    /// In a rule, at the word after `ct` (`ct` itself consumed, `ct_tok` kept to be put back):
    /// `Some` statement for `ct helper|timeout|expectation set ...`, `None` otherwise (the
    /// tokens are put back: `ct helper "ftp"` is a match).
    pub(super) fn ct_obj_set(
        &mut self,
        ctx: &mut RuleCtx,
        start: Span,
        ct_tok: crate::lexer::Token,
    ) -> PResult<Option<Stmt>> {
        let kind = match self.peek_tok()? {
            Some(Tok::Word(w)) => kind_of(&w),
            _ => None,
        };
        let Some(kind) = kind else {
            self.pending.push(ct_tok);
            return Ok(None);
        };
        let Some(word) = self.next()? else {
            self.pending.push(ct_tok);
            return Ok(None);
        };
        if self.eat_word("set")? {
            return self.ct_obj_stmt(kind, ctx, start).map(Some);
        }
        if kind != ObjKind::CtHelper {
            // `ct timeout` and `ct expectation` are no expressions.
            return self.expected(&format!("`set` after `{}`", kind.name()));
        }
        self.pending.push(word);
        self.pending.push(ct_tok);
        Ok(None)
    }
}

impl Written {
    /// The parts the configuration is built from (the comment stays).
    fn clone_config(&mut self) -> Written {
        Written {
            helper: self.helper.take(),
            protocol: self.protocol,
            l3proto: self.l3proto,
            policy: std::mem::take(&mut self.policy),
            dport: self.dport,
            timeout_ms: self.timeout_ms,
            size: self.size,
            comment: None,
        }
    }
}

/// What an object block of `kind` holds, for "expected ..." messages.
fn expected_items(kind: ObjKind) -> String {
    match kind {
        ObjKind::CtHelper => "`type \"NAME\" protocol tcp|udp`, `l3proto`, `comment` or `}`",
        ObjKind::CtTimeout => "`protocol`, `policy = { ... }`, `l3proto`, `comment` or `}`",
        _ => "`protocol`, `dport`, `timeout`, `size`, `l3proto`, `comment` or `}`",
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use crate::{parse_str, print_ruleset};

    /// Loaded with `nft -f` (nftables 1.0.6, kernel 6.18, in a netns); the listing is what `nft
    /// list ruleset` printed: objects in handle order among the counters and limits, the
    /// comment first, a timeout's policy in the kernel's state order and without the states
    /// at nft's defaults, sizes and ports cut to their width.
    #[test]
    fn objects_list_as_nft_lists_them() {
        let text = r#"add table ip test-ip4
add chain ip test-ip4 output { type filter hook output priority 0; }
add counter ip test-ip4 cnt1
add ct helper ip test-ip4 cthelp1 { type "ftp" protocol tcp; }
add limit ip test-ip4 lim1 rate 400/minute
add ct timeout ip test-ip4 cttime3 { protocol tcp; policy = { established:132, close:16, close_wait:16 } ; l3proto ip ;}
add ct timeout ip test-ip4 cttime4 { protocol udp; policy = { replied:14, unreplied:19 } ;}
add ct expectation ip test-ip4 ctexpect1 { protocol tcp; dport 1234; timeout 2m; size 12; }
add rule ip test-ip4 output ct helper set "cthelp1"
add rule ip test-ip4 output ct helper set tcp dport map {21 : "cthelp1", 2121 : "cthelp1" }
add rule ip test-ip4 output ct timeout set "cttime3"
add rule ip test-ip4 output ct expectation set "ctexpect1"
table inet t {
  ct helper h1 { type "sip" protocol udp; l3proto ip6; comment "voice"; }
  ct timeout o1 { protocol tcp; policy = { established: 432000, syn_sent : 5, close:10 }; comment "c" }
  ct timeout o2 { protocol udp; }
  ct expectation e1 { protocol tcp; dport 70000; timeout 90s; size 300; l3proto ip; comment "x"; }
  chain c { type filter hook prerouting priority -300;
    ct helper set udp dport map { 5060 : "h1" } counter
    ct timeout set "o2"
    ct helper "sip" ct expectation set "e1"
  }
}
"#;
        let rs = parse_str(text, "o.nft").unwrap();
        let listed = print_ruleset(&rs, false);
        let want = r#"table ip test-ip4 {
	counter cnt1 {
		packets 0 bytes 0
	}

	ct helper cthelp1 {
		type "ftp" protocol tcp
		l3proto ip
	}

	limit lim1 {
		rate 400/minute
	}

	ct timeout cttime3 {
		protocol tcp
		l3proto ip
		policy = { established : 132, close_wait : 16, close : 16 }
	}

	ct timeout cttime4 {
		protocol udp
		l3proto ip
		policy = { unreplied : 19, replied : 14 }
	}

	ct expectation ctexpect1 {
		protocol tcp
		dport 1234
		timeout 2m
		size 12
		l3proto ip
	}

	chain output {
		type filter hook output priority filter; policy accept;
		ct helper set "cthelp1"
		ct helper set tcp dport map { 21 : "cthelp1", 2121 : "cthelp1" }
		ct timeout set "cttime3"
		ct expectation set "ctexpect1"
	}
}
table inet t {
	ct helper h1 {
		comment "voice"
		type "sip" protocol udp
		l3proto ip6
	}

	ct timeout o1 {
		comment "c"
		protocol tcp
		l3proto inet
		policy = { syn_sent : 5 }
	}

	ct timeout o2 {
		protocol udp
		l3proto inet
		policy = {  }
	}

	ct expectation e1 {
		comment "x"
		protocol tcp
		dport 4464
		timeout 1m30s
		size 44
		l3proto ip
	}

	chain c {
		type filter hook prerouting priority raw; policy accept;
		ct helper set udp dport map { 5060 : "h1" } counter packets 0 bytes 0
		ct timeout set "o2"
		ct helper "sip" ct expectation set "e1"
	}
}
"#;
        assert_eq!(listed, want);
        // The listing reads back to itself.
        let again = parse_str(&listed, "again.nft").unwrap();
        assert_eq!(print_ruleset(&again, false), listed);
        // Handles as the kernel gives them: the chain 1, the objects 2 to 7, the rules from 8,
        // skipping the anonymous map's (`nft -a` of the same commands).
        let handles: Vec<u64> = rs.tables[0].chains[0]
            .rules
            .iter()
            .map(|r| r.handle)
            .collect();
        assert_eq!(handles, [8, 10, 11, 12]);
    }

    fn err(family: &str, item: &str) -> String {
        let text = format!("table {family} t {{\n {item}\n}}\n");
        parse_str(&text, "e.nft").unwrap_err().to_string()
    }

    fn rule_err(rule: &str) -> String {
        let text = format!(
            "table ip t {{\n ct helper h {{ type \"ftp\" protocol tcp; }}\n chain c {{ type filter hook output priority 0;\n {rule}\n }}\n}}\n"
        );
        parse_str(&text, "r.nft").unwrap_err().to_string()
    }

    /// What the kernel and nft 1.0.6 refuse (each checked with `nft -f`), at the place named.
    #[test]
    fn refusals() {
        // objects.t: `%cthelp2 ... l3proto ip6;fail` (EINVAL in an ip table).
        let e = err(
            "ip",
            r#"ct helper h { type "ftp" protocol tcp; l3proto ip6; }"#,
        );
        assert!(
            e.contains("e.nft:2:49") && e.contains("Invalid argument"),
            "{e}"
        );
        // ENOENT: no such helper for the protocol.
        let e = err("ip", r#"ct helper h { type "ftp" protocol udp; }"#);
        assert!(
            e.contains("e.nft:2:21") && e.contains("No such file"),
            "{e}"
        );
        // nft: syntax error, unexpected sctp, expecting udp or tcp.
        let e = err("ip", r#"ct helper h { type "ftp" protocol sctp; }"#);
        assert!(
            e.contains("e.nft:2:36") && e.contains("`tcp` or `udp`"),
            "{e}"
        );
        // nft: syntax error, unexpected semicolon, expecting protocol.
        let e = err("ip", r#"ct helper h { type "ftp"; }"#);
        assert!(e.contains("e.nft:2:26") && e.contains("`protocol`"), "{e}");
        // nft: unexpected '}', expecting newline or semicolon.
        let e = err("ip", r#"ct helper h { type "ftp" protocol tcp }"#);
        assert!(e.contains("e.nft:2:40") && e.contains("`;`"), "{e}");
        // EPROTO: no conntrack objects in a netdev table.
        let e = err("netdev", r#"ct helper h { type "ftp" protocol tcp; }"#);
        assert!(
            e.contains("e.nft:2:5") && e.contains("Protocol error"),
            "{e}"
        );
        // objects.t `%cttime2` and `%cttime5`: nft: invalid state for this protocol.
        let e = err(
            "ip",
            "ct timeout o { protocol udp; policy = { syn_sent:122 } ;}",
        );
        assert!(
            e.contains("e.nft:2:42") && e.contains("invalid state"),
            "{e}"
        );
        let e = err(
            "ip",
            "ct timeout o {protocol tcp; policy = { estalbished:100 } ;}",
        );
        assert!(e.contains("e.nft:2:41") && e.contains("established"), "{e}");
        // nft: syntax error, unexpected string, expecting number.
        let e = err(
            "ip",
            "ct timeout o { protocol tcp; policy = { established:4m }; }",
        );
        assert!(e.contains("e.nft:2:42") && e.contains("seconds"), "{e}");
        // objects.t `%ctexpect2`..`4`: nft: missing options (at the name).
        for body in [
            "protocol udp;",
            "protocol tcp; dport 4321;",
            "protocol tcp; dport 4321; timeout 2m;",
            "protocol tcp; dport 4321; timeout 2m; size 0;",
        ] {
            let e = err("ip", &format!("ct expectation e {{ {body} }}"));
            assert!(
                e.contains("e.nft:2:17") && e.contains("missing options"),
                "{e}"
            );
        }
        // EAFNOSUPPORT: an inet table's expectation needs its l3proto.
        let e = err(
            "inet",
            "ct expectation e { protocol tcp; dport 1; timeout 1s; size 2; }",
        );
        assert!(e.contains("e.nft:2:17") && e.contains("l3proto ip"), "{e}");
        // The statements: an unknown kind after `ct ... set`, a missing name, no `set`.
        let e = rule_err("ct expectation \"x\"");
        assert!(e.contains("r.nft:4:17") && e.contains("`set`"), "{e}");
        let e = rule_err("ct timeout set");
        assert!(
            e.contains("r.nft:4:") && e.contains("ct timeout name"),
            "{e}"
        );
        let e = rule_err("ct helper set tcp dport");
        assert!(e.contains("r.nft:4:") && e.contains("`map`"), "{e}");
    }
}
