//! A chain's declaration: its body (hook, policy, comment, rules), the base chain's hook spec
//! (`type T hook H [device D | devices = { ... }] priority P`) as the family allows it, and
//! priorities by number or by standard name (`filter`, `mangle + 5`). What the kernel refuses
//! of a nat base chain is refused here, at the chain's name.

use super::handles::ChainDecl;
use super::{PResult, Parser};
use crate::lexer::Tok;
use crate::model::{BaseChain, ChainType, Family, Hook, Policy, Span};

/// Standard priority names (nft's `std_prios`), in the order nft tries them when printing.
pub(crate) const STD_PRIOS: &[(&str, i32)] = &[
    ("raw", -300),
    ("mangle", -150),
    ("dstnat", -100),
    ("filter", 0),
    ("security", 50),
    ("srcnat", 100),
];

/// The bridge family's standard priorities (nft 1.0.6 `bridge_std_prios`).
pub(crate) const BRIDGE_PRIOS: &[(&str, i32)] = &[
    ("dstnat", -300),
    ("filter", -200),
    ("out", 100),
    ("srcnat", 300),
];

/// The standard priority names of `family`: the bridge family has its own.
pub(crate) fn std_prios(family: Family) -> &'static [(&'static str, i32)] {
    if family == Family::Bridge {
        BRIDGE_PRIOS
    } else {
        STD_PRIOS
    }
}

/// Whether a standard priority may be named in this family and hook (nft 1.0.6
/// `std_prio_family_hook_compat`): `dstnat` only at prerouting, `srcnat` only at postrouting,
/// and netdev knows only `filter`.
pub(crate) fn std_prio_ok(prio: i32, family: Family, hook: Hook) -> bool {
    match family {
        Family::Netdev => prio == 0,
        Family::Bridge => match prio {
            -300 => hook == Hook::Prerouting,
            300 => hook == Hook::Postrouting,
            100 => hook == Hook::Output,
            _ => true,
        },
        _ => match prio {
            -100 => hook == Hook::Prerouting,
            100 => hook == Hook::Postrouting,
            _ => true,
        },
    }
}

impl Parser<'_> {
    /// The inside of `chain NAME { ... }` up to and including `}`.
    pub(super) fn chain_body(
        &mut self,
        family: Family,
        decl: &mut ChainDecl,
        open: Span,
    ) -> PResult<()> {
        loop {
            self.skip_separators()?;
            let span = self.peek_span()?;
            match self.peek_tok()? {
                Some(Tok::Punct("}")) => {
                    self.advance();
                    return Ok(());
                }
                Some(Tok::Word(w)) if w == "type" => {
                    self.advance();
                    let base = self.hook_spec(family, span)?;
                    if base.chain_type == ChainType::Nat {
                        nat_chain_check(self, &base, decl.span)?;
                    }
                    if decl.base.is_some() {
                        return Err(self.st.error(span, "the chain's hook is already given"));
                    }
                    decl.base = Some(base);
                    decl.base_span = span;
                }
                Some(Tok::Word(w)) if w == "policy" => {
                    self.advance();
                    let p = if self.eat_word("accept")? {
                        Policy::Accept
                    } else if self.eat_word("drop")? {
                        Policy::Drop
                    } else {
                        return self.expected("`accept` or `drop`");
                    };
                    decl.policy = Some((p, span));
                }
                Some(Tok::Word(w)) if w == "comment" => {
                    self.advance();
                    let (c, _) = self.string("a quoted comment")?;
                    decl.comment = Some(c);
                }
                None => return self.unclosed("a rule or `}`", open),
                _ => {
                    let rule = self.rule(family)?;
                    decl.rules.push(rule);
                }
            }
            self.end_of_item()?;
        }
    }

    fn hook_spec(&mut self, family: Family, span: Span) -> PResult<BaseChain> {
        let tspan = self.peek_span()?;
        let chain_type = if self.eat_word("filter")? {
            ChainType::Filter
        } else if self.eat_word("nat")? {
            if !matches!(family, Family::Ip | Family::Ip6 | Family::Inet) {
                // The kernel has no nat chain type for these families.
                return Err(self.st.error(
                    tspan,
                    format!(
                        "nat chains exist in ip, ip6 and inet tables only, not in a {} table (nft: Could not process rule: No such file or directory)",
                        family.name()
                    ),
                ));
            }
            ChainType::Nat
        } else if self.eat_word("route")? {
            ChainType::Route
        } else {
            return self.expected("a chain type (`filter`, `nat` or `route`)");
        };
        self.expect_word("hook")?;
        let hspan = self.peek_span()?;
        let Some(Tok::Word(h)) = self.peek_tok()? else {
            return self.expected("a hook name");
        };
        let hook = match h.as_str() {
            "ingress" => Hook::Ingress,
            "egress" => Hook::Egress,
            "prerouting" => Hook::Prerouting,
            "input" => Hook::Input,
            "forward" => Hook::Forward,
            "output" => Hook::Output,
            "postrouting" => Hook::Postrouting,
            _ => return self.expected("a hook name"),
        };
        let ok = match family {
            Family::Netdev => matches!(hook, Hook::Ingress | Hook::Egress),
            Family::Inet => hook != Hook::Egress,
            Family::Arp => matches!(hook, Hook::Input | Hook::Output),
            _ => !matches!(hook, Hook::Ingress | Hook::Egress),
        };
        if !ok {
            return Err(self.st.error(
                hspan,
                format!("hook `{h}` is not valid in the {} family", family.name()),
            ));
        }
        self.advance();
        let mut devices = Vec::new();
        if self.eat_word("device")? {
            devices.push(self.device_name()?);
        } else if self.eat_word("devices")? {
            self.expect_punct("=")?;
            self.expect_punct("{")?;
            loop {
                self.skip_newlines()?;
                devices.push(self.device_name()?);
                self.skip_newlines()?;
                if self.eat_punct(",")? {
                    self.skip_newlines()?;
                    if self.eat_punct("}")? {
                        break;
                    }
                    continue;
                }
                self.expect_punct("}")?;
                break;
            }
        }
        let kw = self.expect_word("priority")?;
        let priority = self.priority(family, hook, kw)?;
        // nft 1.0.6 asks for a device for netdev chains and for inet ingress chains.
        if (family == Family::Netdev || (family == Family::Inet && hook == Hook::Ingress))
            && devices.is_empty()
        {
            return Err(self
                .st
                .error(span, "Missing `device' in this chain definition"));
        }
        Ok(BaseChain {
            chain_type,
            hook,
            devices,
            priority,
            policy: Policy::Accept,
        })
    }

    pub(super) fn device_name(&mut self) -> PResult<String> {
        match self.peek_tok()? {
            Some(Tok::Word(w) | Tok::Str(w)) => {
                self.advance();
                Ok(w)
            }
            _ => self.expected("a device name"),
        }
    }

    /// `NUMBER`, `NAME` or `NAME +|- NUMBER` after the `priority` keyword at `kw` (where nft
    /// points when a named priority is not allowed at the hook).
    pub(super) fn priority(&mut self, family: Family, hook: Hook, kw: Span) -> PResult<i32> {
        let span = self.peek_span()?;
        let Some(Tok::Word(w)) = self.peek_tok()? else {
            return self.expected("a priority (a number or a name such as `filter`)");
        };
        self.advance();
        let num = |s: &str| -> Option<i32> {
            let (neg, digits) = match s.strip_prefix('-') {
                Some(d) => (true, d),
                None => (false, s),
            };
            let v = crate::datatypes::parse_uint(digits).and_then(|v| i32::try_from(v).ok())?;
            Some(if neg { -v } else { v })
        };
        if let Some(n) = num(&w) {
            return Ok(n);
        }
        let Some(&(_, base)) = std_prios(family).iter().find(|(n, _)| *n == w) else {
            return Err(self.st.error(
                span,
                format!("expected a priority (a number or a name such as `filter`), found `{w}`"),
            ));
        };
        let mut len = span.len;
        let mut value = base;
        let sign_span = self.peek_span()?;
        if let Some(Tok::Punct(p @ ("+" | "-"))) = self.peek_tok()? {
            self.advance();
            let nspan = self.peek_span()?;
            let Some(Tok::Word(n)) = self.peek_tok()? else {
                return self.expected("a number");
            };
            let Some(off) = num(&n) else {
                return self.expected("a number");
            };
            self.advance();
            // nft computes in 32 bits and wraps: `raw - 2147483647` lists as 2147483349.
            let sum = if p == "+" {
                base.wrapping_add(off)
            } else {
                base.wrapping_sub(off)
            };
            value = sum;
            len = span.through(nspan).len;
            let _ = sign_span;
        } else if let Some(Tok::Word(n)) = self.peek_tok()?
            && n.starts_with('-')
            && let Some(off) = num(&n)
        {
            self.advance();
            value = base.wrapping_add(off);
        }
        if !std_prio_ok(base, family, hook) {
            // nft 1.0.6 points from `priority` to the end of the value.
            let at = Span { len, ..span };
            return Err(self.st.error(
                kw.through(at),
                "invalid priority expression value in this context.",
            ));
        }
        Ok(value)
    }
}

/// What the kernel refuses of a nat base chain when it is created (nft_chain_nat,
/// `nf_nat_register_fn`; nft 1.0.6 reports "Could not process rule: Operation not supported"
/// at the chain's name): a hook other than prerouting, input, output and postrouting, and a
/// priority at or below conntrack's (-200, NF_IP_PRI_CONNTRACK): NAT runs after conntrack.
fn nat_chain_check(p: &Parser<'_>, base: &BaseChain, name: Span) -> PResult<()> {
    if !matches!(
        base.hook,
        Hook::Prerouting | Hook::Input | Hook::Output | Hook::Postrouting
    ) {
        return Err(p.st.error(
            name,
            format!(
                "a nat chain hooks at prerouting, input, output or postrouting, not at {} (nft: Could not process rule: Operation not supported)",
                base.hook.name()
            ),
        ));
    }
    if base.priority <= -200 {
        return Err(p.st.error(
            name,
            format!(
                "a nat chain's priority must be above -200 (conntrack's), not {} (nft: Could not process rule: Operation not supported)",
                base.priority
            ),
        ));
    }
    Ok(())
}
