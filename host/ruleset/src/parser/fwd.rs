//! `fwd` and `dup` statements, as nft 1.0.6 reads them (`parser_bison.y` `fwd_stmt` /
//! `dup_stmt`): `fwd to "dev"`, `fwd ip|ip6 to ADDR device "dev"`, `dup to "dev"` (netdev),
//! `dup to ADDR [device "dev"]` (ip, ip6).
//! nft resolves the device name to an ifindex when it evaluates the rule; wasp keeps the name
//! (the devices belong to the daemon, not to the ruleset).

use std::net::IpAddr;

use super::{PResult, Parser, unsupported};
use crate::lexer::Tok;
use crate::model::{DataType, Family, Span, Stmt};

impl Parser<'_> {
    /// After the word `fwd` or `dup` at `start` (not consumed yet): the statement. A `fwd` is
    /// terminal (the caller refuses statements after it).
    pub(super) fn fwd_or_dup(&mut self, family: Family, start: Span) -> PResult<Stmt> {
        let fwd = self.at_word("fwd")?;
        let word = if fwd { "fwd" } else { "dup" };
        self.advance();
        if !fwd && matches!(family, Family::Ip | Family::Ip6) {
            return self.dup_to_address(family, start);
        }
        if family != Family::Netdev {
            // nft: "Error: unsupported family" (nft_fwd is netdev's; nft_dup netdev's, ip's
            // and ip6's, read above).
            return Err(self.st.error(
                start,
                format!(
                    "`{word}` is supported in {} only (nft: unsupported family in a {} table)",
                    if fwd {
                        "netdev tables"
                    } else {
                        "netdev, ip and ip6 tables"
                    },
                    family.name()
                ),
            ));
        }
        let mut via_family = None;
        if fwd {
            if self.eat_word("ip")? {
                via_family = Some(DataType::Ipv4Addr);
            } else if self.eat_word("ip6")? {
                via_family = Some(DataType::Ipv6Addr);
            }
        }
        self.expect_word("to")?;
        let Some(dtype) = via_family else {
            let (dev, dspan) = self.out_device()?;
            if self.at_word("device")? {
                let span = self.peek_span()?;
                // nft: "cannot specify device" for `dup to "d" device "d"`; a `fwd` without
                // `ip`/`ip6` before `to` has no device either.
                return Err(self.st.error(
                    span,
                    format!("`{word} to DEV` takes no `device`: write `{word} ip to ADDR device \"dev\"` for a next hop (nft: cannot specify device)"),
                ));
            }
            let span = self.stmt_span(start, dspan);
            return Ok(if fwd {
                Stmt::Fwd {
                    dev,
                    via: None,
                    span,
                }
            } else {
                Stmt::Dup {
                    dev,
                    via: None,
                    span,
                }
            });
        };
        let (addr, _) = self.single_value(dtype)?;
        let via = match addr.bytes.as_slice() {
            &[a, b, c, d] => IpAddr::from([a, b, c, d]),
            b => match <[u8; 16]>::try_from(b) {
                Ok(b16) => IpAddr::from(b16),
                Err(_) => return self.expected("an address"),
            },
        };
        if !self.eat_word("device")? {
            return self.expected("`device`");
        }
        let (dev, dspan) = self.out_device()?;
        Ok(Stmt::Fwd {
            dev,
            via: Some(via),
            span: self.stmt_span(start, dspan),
        })
    }

    /// `dup to ADDR [device "dev"]` of the ip and ip6 families (after `dup`): the address of
    /// the table's family (nft 1.0.6 `dup_stmt`: "Could not resolve hostname" for the other).
    fn dup_to_address(&mut self, family: Family, start: Span) -> PResult<Stmt> {
        self.expect_word("to")?;
        if self.at_expr()? {
            let at = self.peek_span()?;
            return Err(self.st.error(at, unsupported::message("dup to EXPRESSION")));
        }
        let dtype = if family == Family::Ip {
            DataType::Ipv4Addr
        } else {
            DataType::Ipv6Addr
        };
        let (addr, aspan) = self.single_value(dtype)?;
        let via = match addr.bytes.as_slice() {
            &[a, b, c, d] => IpAddr::from([a, b, c, d]),
            b => match <[u8; 16]>::try_from(b) {
                Ok(b16) => IpAddr::from(b16),
                Err(_) => return self.expected("an address"),
            },
        };
        let mut end = aspan;
        let mut dev = String::new();
        if self.eat_word("device")? {
            let (d, dspan) = self.out_device()?;
            dev = d;
            end = dspan;
        }
        Ok(Stmt::Dup {
            dev,
            via: Some(via),
            span: self.stmt_span(start, end),
        })
    }

    /// An output device name: a quoted string or a bare name (nft resolves either as an
    /// interface name). A number (an ifindex for nft) is refused: wasp names devices.
    fn out_device(&mut self) -> PResult<(String, Span)> {
        let span = self.peek_span()?;
        if self.at_expr()?
            || matches!(self.peek_tok()?, Some(Tok::Word(w)) if unsupported::statement(&w))
        {
            // nft: "datatype mismatch: expected network interface index".
            return Err(self.st.error(
                span,
                "wasp takes a constant device name here (`fwd to \"eth1\"`), not an expression",
            ));
        }
        match self.peek_tok()? {
            Some(Tok::Str(s)) if !s.is_empty() && s.len() < 16 => {
                self.advance();
                Ok((s, span))
            }
            Some(Tok::Word(w))
                if w.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && w.len() < 16 =>
            {
                self.advance();
                Ok((w, span))
            }
            Some(Tok::Word(w)) if w.chars().all(|c| c.is_ascii_digit()) => Err(self.st.error(
                span,
                format!("wasp names output devices, not ifindexes: write the device's name in quotes instead of `{w}`"),
            )),
            _ => self.expected("a device name in quotes (at most 15 characters)"),
        }
    }

    /// The span from `start` to the end of `last` (on one line; else `start`'s own).
    fn stmt_span(&self, start: Span, last: Span) -> Span {
        start.through(last)
    }
}

#[cfg(test)]
mod tests {
    use crate::{parse_str, print_ruleset};

    /// Accepted by `nft -c -f` (nftables 1.0.6, in a netns with veth0/veth1); the listing is
    /// what `nft list ruleset` printed after loading it.
    #[test]
    fn statements_list_as_nft_lists_them() {
        let text = r#"table netdev t {
  chain in0 { type filter hook ingress device "veth0" priority 0; policy accept;
    ip daddr 10.0.0.1 fwd to "veth1"
    ip daddr 10.0.0.2 dup to "veth1"
    ip daddr 10.0.0.3 dup to veth1 counter
    ip daddr 10.0.0.4 fwd ip to 10.0.0.9 device "veth1"
    ip daddr 10.0.0.5 fwd ip6 to fe80::1 device "veth1"
  }
}
"#;
        let rs = parse_str(text, "f.nft").unwrap();
        let listed = print_ruleset(&rs, false);
        for line in [
            "\t\tip daddr 10.0.0.1 fwd to \"veth1\"\n",
            "\t\tip daddr 10.0.0.2 dup to \"veth1\"\n",
            "\t\tip daddr 10.0.0.3 dup to \"veth1\" counter packets 0 bytes 0\n",
            "\t\tip daddr 10.0.0.4 fwd ip to 10.0.0.9 device \"veth1\"\n",
            "\t\tip daddr 10.0.0.5 fwd ip6 to fe80::1 device \"veth1\"\n",
        ] {
            assert!(listed.contains(line), "{line:?} not in\n{listed}");
        }
        // The listing reads back to the same model.
        let again = parse_str(&listed, "again.nft").unwrap();
        assert_eq!(print_ruleset(&again, false), listed);
    }

    fn err(rule: &str) -> String {
        let text = format!(
            "table netdev t {{\n chain c {{ type filter hook ingress device \"veth0\" priority 0;\n {rule}\n }}\n}}\n"
        );
        parse_str(&text, "e.nft").unwrap_err().to_string()
    }

    /// What nft 1.0.6 refuses (checked with `nft -c -f`), at the place nft names.
    #[test]
    fn refusals() {
        // nft: 3:17-23: Error: Statement after terminal statement has no effect
        let e = err(r#"fwd to "veth1" counter"#);
        assert!(e.contains("e.nft:3:17") && e.contains("terminal"), "{e}");
        let e = err(r#"fwd to "veth1" accept"#);
        assert!(e.contains("e.nft:3:17") && e.contains("terminal"), "{e}");
        // nft: Error: cannot specify device
        let e = err(r#"dup to "veth1" device "veth1""#);
        assert!(
            e.contains("e.nft:3:17") && e.contains("cannot specify device"),
            "{e}"
        );
        // nft: syntax error, unexpected newline, expecting device
        let e = err("fwd ip to 10.0.0.1");
        assert!(e.contains("e.nft:3:") && e.contains("`device`"), "{e}");
        // nft: Could not resolve hostname (an IPv4 address after ip6)
        let e = err(r#"fwd ip6 to 10.0.0.1 device "veth1""#);
        assert!(e.contains("e.nft:3:13"), "{e}");
        // nft takes an ifindex; wasp names devices.
        let e = err("fwd to 1");
        assert!(
            e.contains("e.nft:3:9") && e.contains("not ifindexes"),
            "{e}"
        );
        // nft: datatype mismatch (an expression instead of a device)
        let e = err("fwd to meta iifname");
        assert!(e.contains("e.nft:3:9"), "{e}");
    }

    #[test]
    fn dup_is_not_terminal() {
        let text = "table netdev t {\n chain c { type filter hook ingress device \"veth0\" priority 0;\n dup to \"a\" dup to \"b\" accept\n }\n}\n";
        let rs = parse_str(text, "d.nft").unwrap();
        assert_eq!(rs.tables[0].chains[0].rules[0].stmts.len(), 3);
    }
}
