//! `fwd` and `dup` statements, as nft 1.0.6 reads them (`parser_bison.y` `fwd_stmt` /
//! `dup_stmt`): `fwd to "dev"`, `fwd ip|ip6 to ADDR device "dev"`, `dup to "dev"` (netdev),
//! `dup to ADDR [device "dev"]` (ip, ip6), and each with `KEY map { k : TARGET, ... }` in
//! place of the device or the address (the target looked up per packet).
//! nft resolves the device name to an ifindex when it evaluates the rule; wasp keeps the name
//! (the devices belong to the daemon, not to the ruleset).

use std::net::IpAddr;

use super::expr::RuleCtx;
use super::{PResult, Parser, unsupported};
use crate::lexer::Tok;
use crate::model::{DataType, Expr, Family, SetRef, Span, Stmt};

impl Parser<'_> {
    /// After the word `fwd` or `dup` at `start` (not consumed yet): the statement. A `fwd` is
    /// terminal (the caller refuses statements after it).
    pub(super) fn fwd_or_dup(&mut self, ctx: &mut RuleCtx, start: Span) -> PResult<Stmt> {
        let family = ctx.family;
        let fwd = self.at_word("fwd")?;
        let word = if fwd { "fwd" } else { "dup" };
        self.advance();
        if !fwd && matches!(family, Family::Ip | Family::Ip6) {
            return self.dup_to_address(ctx, start);
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
            if self.at_expr()? {
                // `fwd to KEY map { k : "dev" }`: the device per packet.
                let (map, mspan) = self.target_map(ctx, word, DataType::IfaceIndex)?;
                if self.at_word("device")? {
                    let span = self.peek_span()?;
                    return Err(self.st.error(
                        span,
                        format!("`{word} to KEY map {{ ... }}` maps to devices and takes no `device` (nft: cannot specify device)"),
                    ));
                }
                let (dev, via, map, span) =
                    (String::new(), None, Some(map), self.stmt_span(start, mspan));
                return Ok(if fwd {
                    Stmt::Fwd {
                        dev,
                        via,
                        map,
                        span,
                    }
                } else {
                    Stmt::Dup {
                        dev,
                        via,
                        map,
                        span,
                    }
                });
            }
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
                    map: None,
                    span,
                }
            } else {
                Stmt::Dup {
                    dev,
                    via: None,
                    map: None,
                    span,
                }
            });
        };
        let (via, map) = if self.at_expr()? {
            // `fwd ip to KEY map { k : ADDR } device "dev"`: the next hop per packet.
            (None, Some(self.target_map(ctx, word, dtype)?.0))
        } else {
            (Some(self.next_hop(dtype)?.0), None)
        };
        if !self.eat_word("device")? {
            return self.expected("`device`");
        }
        let (dev, dspan) = self.out_device()?;
        Ok(Stmt::Fwd {
            dev,
            via,
            map,
            span: self.stmt_span(start, dspan),
        })
    }

    /// A next hop of type `dtype` (`ipv4_addr` or `ipv6_addr`) and its span.
    fn next_hop(&mut self, dtype: DataType) -> PResult<(IpAddr, Span)> {
        let (addr, aspan) = self.single_value(dtype)?;
        match addr.bytes.as_slice() {
            &[a, b, c, d] => Ok((IpAddr::from([a, b, c, d]), aspan)),
            b => match <[u8; 16]>::try_from(b) {
                Ok(b16) => Ok((IpAddr::from(b16), aspan)),
                Err(_) => self.expected("an address"),
            },
        }
    }

    /// `KEY map { k : TARGET, ... }` after `dup to` / `fwd [ip|ip6] to` (`word` is the
    /// statement's): the [`Expr::Map`] with data of type `data` (device names as
    /// `iface_index`, or next-hop addresses), and the span of its closing `}`. A named map
    /// (`map @m`) is refused: wasp resolves the targets when the ruleset is compiled, and a
    /// named map's elements may change after that.
    fn target_map(
        &mut self,
        ctx: &mut RuleCtx,
        word: &str,
        data: DataType,
    ) -> PResult<(Box<Expr>, Span)> {
        let (key, kspan) = self.concat_expr(ctx)?;
        if !self.eat_word("map")? {
            // nft takes any expression of the target's type (`dup to ip daddr`); wasp interns
            // its targets when it compiles, so it takes them from a map's data only.
            let text = self.st_text(kspan);
            return Err(self.st.error(
                kspan,
                format!(
                    "expected `map` after `{word} to {text}`: `{word} to EXPRESSION` (a target computed from the packet) is nftables syntax that wasp does not support yet; wasp takes the target from a map (`{word} to {text} map {{ ... }}`)"
                ),
            ));
        }
        let mspan = self.peek_span()?;
        if let Some(Tok::SetRef(name)) = self.peek_tok()? {
            if data != DataType::IfaceIndex {
                // A named map of devices is read (its targets interned at each compile, as
                // any change of its elements compiles again); one of next-hop addresses is not.
                return Err(self.st.error(
                    mspan,
                    unsupported::message_with(
                        "@map",
                        &format!(
                            "a named map of `{word}` next hops (`{word} ip to KEY map @m device DEV`)"
                        ),
                    ),
                ));
            }
            if self
                .declared_set_data(&name)
                .is_some_and(|(first, tail)| first != DataType::IfaceIndex || !tail.is_empty())
            {
                // nft: "datatype mismatch: expected network interface index, ...".
                return Err(self.st.error(
                    mspan,
                    format!("datatype mismatch: `{word}` takes its devices from a map of iface_index data, map `@{name}` has other data"),
                ));
            }
        }
        if !self.at_punct("{")? && !matches!(self.peek_tok()?, Some(Tok::SetRef(_))) {
            return self.expected("`{` after `map`");
        }
        let map = self.data_map(key, kspan, data)?;
        let end = self.last_span();
        if let Expr::Map {
            map: SetRef::Anonymous(elems),
            ..
        } = &map
            && let Some(e) = elems.iter().find(|e| {
                matches!(&e.data, Some(crate::model::ElemData::Value(v)) if v.bytes.iter().all(|b| *b == 0))
            })
        {
            // Index 0 is no device (nft: "Interface does not exist" for a name; the kernel
            // has no device 0), and 0.0.0.0 is no neighbour.
            return Err(self.st.error(
                e.span,
                format!("expected {} as the element's data", crate::datatypes::expected(data)),
            ));
        }
        Ok((Box::new(map), end))
    }

    /// `dup to ADDR [device "dev"]` of the ip and ip6 families (after `dup`): the address of
    /// the table's family (nft 1.0.6 `dup_stmt`: "Could not resolve hostname" for the other).
    fn dup_to_address(&mut self, ctx: &mut RuleCtx, start: Span) -> PResult<Stmt> {
        self.expect_word("to")?;
        let dtype = if ctx.family == Family::Ip {
            DataType::Ipv4Addr
        } else {
            DataType::Ipv6Addr
        };
        let (via, map, mut end) = if self.at_expr()? {
            let (map, end) = self.target_map(ctx, "dup", dtype)?;
            (None, Some(map), end)
        } else {
            let (via, aspan) = self.next_hop(dtype)?;
            (Some(via), None, aspan)
        };
        let mut dev = String::new();
        if self.eat_word("device")? {
            let (d, dspan) = self.out_device()?;
            dev = d;
            end = dspan;
        }
        Ok(Stmt::Dup {
            dev,
            via,
            map,
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

    /// The map forms, as `nft list ruleset` (1.0.6) listed them after `nft -f` loaded them
    /// (netns with `lo` up; ip and ip6 tables in chains of hook input).
    #[test]
    fn target_maps_list_as_nft_lists_them() {
        let text = r#"table netdev n {
  chain i { type filter hook ingress device lo priority 0;
    dup to meta mark map { 0x00000001 : "lo", 0x00000002 : "lo"}
    fwd to meta mark map { 1 : "lo", 2 : veth1 }
  }
  chain j { type filter hook ingress device lo priority 0;
    fwd ip to ip saddr map { 1.1.1.1 : 2.2.2.2 } device "lo"
  }
}
table ip t {
  chain c { type filter hook input priority 0;
    dup to ip saddr map { 192.168.2.120 : 192.168.2.1 } device "lo"
    dup to ip saddr map { 192.168.2.120 : 192.168.2.1, 10.0.0.0/8 : 10.1.1.1 } counter
  }
}
table ip6 t {
  chain c { type filter hook input priority 0;
    dup to ip6 saddr map { abcd::1 : cafe::cafe } device "lo"
  }
}
"#;
        let rs = parse_str(text, "m.nft").unwrap();
        let listed = print_ruleset(&rs, false);
        for line in [
            "\t\tdup to meta mark map { 0x00000001 : \"lo\", 0x00000002 : \"lo\" }\n",
            "\t\tfwd to meta mark map { 0x00000001 : \"lo\", 0x00000002 : \"veth1\" }\n",
            "\t\tfwd ip to ip saddr map { 1.1.1.1 : 2.2.2.2 } device \"lo\"\n",
            "\t\tdup to ip saddr map { 192.168.2.120 : 192.168.2.1 } device \"lo\"\n",
            "\t\tdup to ip saddr map { 10.0.0.0/8 : 10.1.1.1, 192.168.2.120 : 192.168.2.1 } counter packets 0 bytes 0\n",
            "\t\tdup to ip6 saddr map { abcd::1 : cafe::cafe } device \"lo\"\n",
        ] {
            assert!(listed.contains(line), "{line:?} not in\n{listed}");
        }
        let again = parse_str(&listed, "again.nft").unwrap();
        assert_eq!(print_ruleset(&again, false), listed);
        // The map is the statement's target: a `fwd` with one is still terminal.
        let e = err(r#"fwd to meta mark map { 1 : "lo" } accept"#);
        assert!(e.contains("e.nft:3:36") && e.contains("terminal"), "{e}");
    }

    fn err_in(family: &str, hook: &str, rule: &str) -> String {
        let text = format!(
            "table {family} t {{\n chain c {{ type filter hook {hook} priority 0;\n {rule}\n }}\n}}\n"
        );
        parse_str(&text, "e.nft").unwrap_err().to_string()
    }

    /// Malformed map forms: each at its place, saying what was expected.
    #[test]
    fn target_map_refusals() {
        // nft: syntax error, unexpected device (a device map has no `device`).
        let e = err(r#"fwd to meta mark map { 1 : "lo" } device "lo""#);
        assert!(e.contains("e.nft:3:36") && e.contains("no `device`"), "{e}");
        // nft: datatype mismatch (a mark is no interface index); wasp wants the map.
        let e = err("dup to meta mark");
        assert!(
            e.contains("e.nft:3:9") && e.contains("expected `map`"),
            "{e}"
        );
        let e = err("dup to meta mark map");
        assert!(e.contains("e.nft:3:") && e.contains("`{`"), "{e}");
        // A device name of 16 characters (nft: the name is too long for an interface).
        let e = err(r#"dup to meta mark map { 1 : "abcdefghijklmnop" }"#);
        assert!(
            e.contains("e.nft:3:29") && e.contains("15 characters"),
            "{e}"
        );
        // nft: Could not resolve hostname (a device where the address goes).
        let e = err_in("ip", "input", r#"dup to ip saddr map { 1.1.1.1 : "lo" }"#);
        assert!(
            e.contains("e.nft:3:34") && e.contains("IPv4 address"),
            "{e}"
        );
        let e = err_in(
            "ip6",
            "input",
            r#"dup to ip6 saddr map { ::1 : 10.0.0.1 } device "lo""#,
        );
        assert!(
            e.contains("e.nft:3:31") && e.contains("IPv6 address"),
            "{e}"
        );
        // A named map of next hops is not read (wasp interns the targets when it compiles).
        let e = err_in("ip", "input", r#"dup to ip saddr map @m device "lo""#);
        assert!(e.contains("e.nft:3:22") && e.contains("named map"), "{e}");
        // `fwd ip to KEY map { ... }` needs its device.
        let e = err("fwd ip to ip saddr map { 1.1.1.1 : 2.2.2.2 }");
        assert!(e.contains("e.nft:3:") && e.contains("`device`"), "{e}");
    }

    #[test]
    fn dup_is_not_terminal() {
        let text = "table netdev t {\n chain c { type filter hook ingress device \"veth0\" priority 0;\n dup to \"a\" dup to \"b\" accept\n }\n}\n";
        let rs = parse_str(text, "d.nft").unwrap();
        assert_eq!(rs.tables[0].chains[0].rules[0].stmts.len(), 3);
    }
}
