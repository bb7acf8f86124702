//! The statement order `nft list ruleset` shows after nft's payload merge.
//!
//! nft 1.0.6 merges adjacent payload matches before sending a rule (`stmt_reduce` and
//! `payload_do_merge` in src/rule.c, `payload_can_merge` in src/payload.c; wasp-core replays the
//! same merge on the bytecode it runs, see its `merge` module). The kernel then holds one wider
//! load per merged group, and the listing splits it back into fields in offset order, at the
//! place of the statement that survived the merge. The model keeps the statements in that listed
//! order, so that printing it gives `nft list ruleset` back (and compiling it gives the same
//! bytecode, since the listed order merges to the same loads):
//!
//! - candidates are payload matches of whole-byte fields (no bitwise operation) against one
//!   value with `==`, implicit `==` or `!=`; `==` and `!=` never merge together;
//! - a run of candidates is sorted by base then offset; neighbours of the same base whose bytes
//!   touch merge while the result is at most 16 bytes, and outside the link layer only while it
//!   is at most 4 bytes (or one of them is already longer than 4);
//! - the implicit payload dependencies nft writes (`ether type 8021q` in front of the first vlan
//!   field, `ether type ip` / `vlan type ip` in front of the first network field after a
//!   link-layer field) are members too, and are not listed;
//! - the merged match sits where the lower-offset member was, unless the higher-offset one is a
//!   protocol field (`ether type`, `vlan type`, `ip protocol`, `ip6 nexthdr`): then where that was;
//! - counters, logs, `meta set`, verdicts and verdict maps end a run, except that nft 1.0.6 keeps
//!   a run of one candidate across them;
//! - a plugin use (wasp's, which nft never sees) ends every run, a lone candidate's too: no
//!   match moves across it.
//!
//! Not reproduced: when a merged match moves across such a statement away from its
//! dependency, nft lists the dependency explicitly (`meta l4proto udp counter udp sport 1 udp
//! dport 2` for `udp dport 2 counter udp sport 1`); the model has no statement for it.

use crate::model::{DataType, Dependency, Family};
use crate::model::{Expr, KeyPart, Match, MetaKey, PayloadBase, PayloadField, RelOp, Rhs, Stmt};
use crate::proto::Proto;

/// A member of a merge run: a statement of the rule or an implicit dependency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cand {
    /// Index of the statement in the rule, `None` for an implicit dependency.
    stmt: Option<usize>,
    base: PayloadBase,
    /// Offset and length in bytes.
    off: u16,
    len: u16,
    ne: bool,
    protocol: bool,
}

/// A member as `stmt_reduce` sees it; `Fence` and `Other` carry their statement's index.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A payload match that may merge.
    Cand(Cand),
    /// A statement that is not an expression: ends a run.
    Fence(usize),
    /// A plugin use: ends every run, a lone candidate's too (nft never sees a plugin; no
    /// match moves across one).
    Barrier(usize),
    /// Any other match.
    Other(usize),
}

/// A payload match nft may merge: (base, offset, length in bytes, `!=`).
fn mergeable(s: &Stmt) -> Option<(PayloadBase, u16, u16, bool)> {
    let Stmt::Match(m) = s else { return None };
    let Expr::Payload(p) = m.left else {
        return None;
    };
    let d = p.desc();
    let ne = match m.op {
        RelOp::Implicit if d.dtype == DataType::TcpFlag => return None,
        RelOp::Implicit | RelOp::Eq => false,
        RelOp::Ne => true,
        _ => return None,
    };
    let single = matches!(&m.right, Rhs::Key(parts)
        if matches!(parts.as_slice(), [KeyPart::Value(v)] if !v.wildcard));
    (single && d.offset_bits % 8 == 0 && d.len_bits % 8 == 0).then_some((
        d.base,
        d.offset_bits / 8,
        d.len_bits / 8,
        ne,
    ))
}

/// nft's `EXPR_F_PROTOCOL`: the field is its header's protocol field.
fn is_protocol(p: PayloadField) -> bool {
    p.is_protocol_key()
}

/// Link-layer protocol context of the rule so far (see wasp-core's dependency choice).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Link {
    Unknown,
    Ether,
    Vlan(u8),
}

/// The EtherType field a dependency reads: `ether type` (depth 0) or `vlan type` of tag
/// `depth - 1`, as its offset in bytes in the protocol tables.
fn type_field_off(depth: u8) -> u16 {
    let field = match depth.checked_sub(1) {
        None => PayloadField::ETHER_TYPE,
        Some(tag) => PayloadField::VLAN_TYPE.at_depth(tag),
    };
    field.desc().offset_bits / 8
}

/// The rule as `stmt_reduce` sees it: statements and implicit payload dependencies in order.
/// An ip or ip6 table knows its network protocol (no dependency); `meta iiftype ether` makes
/// the link layer Ethernet, as a link-layer field does.
fn members(stmts: &[Stmt], family: Family) -> Vec<Kind> {
    let mut out = Vec::with_capacity(stmts.len() + 2);
    let mut link = Link::Unknown;
    // Offsets of link-layer type fields matched or depended on so far, and whether the network
    // protocol is already known (an explicit `meta protocol` or a type field dependency).
    let mut types: Vec<u16> = Vec::new();
    let mut net_known = matches!(family, Family::Ip | Family::Ip6);
    let dep = |off: u16| {
        Kind::Cand(Cand {
            stmt: None,
            base: PayloadBase::Link,
            off,
            len: 2,
            ne: false,
            protocol: true,
        })
    };
    for (i, s) in stmts.iter().enumerate() {
        match s {
            Stmt::Match(Match { left, .. }) => {
                if let Expr::Meta(MetaKey::Protocol | MetaKey::Nfproto) = left {
                    net_known = true;
                }
                if is_iiftype_ether(s)
                    && link == Link::Unknown
                    && matches!(family, Family::Inet | Family::Netdev)
                {
                    link = Link::Ether;
                }
                if let Expr::Payload(p) = left {
                    let d = p.desc();
                    // A network header's own dependency (not a transport header's: nft
                    // puts `meta l4proto` there, no payload match).
                    let own = d.deps.first().filter(|dep| {
                        matches!(dep, Dependency::Vlan(_)) || d.base == PayloadBase::Network
                    });
                    match own.copied() {
                        Some(Dependency::Vlan(depth)) => {
                            let off = type_field_off(depth);
                            if !types.contains(&off) {
                                types.push(off);
                                out.push(dep(off));
                            }
                        }
                        Some(Dependency::Ipv4 | Dependency::Ipv6) if !net_known => {
                            let off = match link {
                                Link::Unknown => None,
                                Link::Ether => Some(type_field_off(0)),
                                Link::Vlan(depth) => Some(type_field_off(depth + 1)),
                            };
                            if let Some(off) = off
                                && !types.contains(&off)
                            {
                                out.push(dep(off));
                            }
                            net_known = true;
                        }
                        _ => {}
                    }
                    if d.base == PayloadBase::Link {
                        if p.is_link_type() {
                            types.push(d.offset_bits / 8);
                        }
                        // A vlan field names its tag; an ether field only the link layer.
                        link = match (p.proto, link) {
                            (Proto::Vlan, Link::Vlan(v)) => Link::Vlan(v.max(p.depth)),
                            (Proto::Vlan, _) => Link::Vlan(p.depth),
                            (_, Link::Unknown) => Link::Ether,
                            (_, l) => l,
                        };
                    }
                }
                out.push(match mergeable(s) {
                    Some((base, off, len, ne)) => Kind::Cand(Cand {
                        stmt: Some(i),
                        base,
                        off,
                        len,
                        ne,
                        protocol: matches!(left, Expr::Payload(p) if is_protocol(*p)),
                    }),
                    None => Kind::Other(i),
                });
            }
            Stmt::Plugin(_) => out.push(Kind::Barrier(i)),
            _ => out.push(Kind::Fence(i)),
        }
    }
    out
}

fn base_rank(b: PayloadBase) -> u8 {
    match b {
        PayloadBase::Link => 0,
        PayloadBase::Network => 1,
        PayloadBase::Transport => 2,
        PayloadBase::Ip6Ext(_) => 3,
        PayloadBase::Inner => 4,
    }
}

/// `meta iiftype ether`, listed.
fn iiftype_ether() -> Option<Stmt> {
    let v = crate::datatypes::from_uint(DataType::IfaceType, 1).ok()?;
    Some(Stmt::Match(Match {
        left: Expr::Meta(MetaKey::Iiftype),
        op: RelOp::Implicit,
        right: Rhs::Key(vec![KeyPart::Value(v)]),
        span: crate::model::Span::default(),
        implied: false,
    }))
}

/// `meta iiftype ether` (ARPHRD_ETHER, 1) with `==` or implicitly.
pub(super) fn is_iiftype_ether(s: &Stmt) -> bool {
    matches!(s, Stmt::Match(Match { left: Expr::Meta(MetaKey::Iiftype), op: RelOp::Implicit | RelOp::Eq, right: Rhs::Key(parts), .. })
        if matches!(parts.as_slice(), [KeyPart::Value(v)] if crate::datatypes::to_uint(v) == 1))
}

/// `payload_can_merge` for byte-aligned members.
fn can_merge(a: &Cand, b: &Cand) -> bool {
    if a.base != b.base || a.off + a.len != b.off || a.len + b.len > 16 {
        return false;
    }
    a.len + b.len <= 4 || a.base == PayloadBase::Link || a.len > 4 || b.len > 4
}

/// `payload_do_merge` over the members at `sa`: survivors collect their groups in `groups`,
/// merged-away members are marked in `gone`.
fn do_merge(
    sa: &mut [usize],
    cands: &mut [Option<Cand>],
    groups: &mut [Vec<Cand>],
    gone: &mut [bool],
) {
    sa.sort_by_key(|&i| cands[i].map(|c| (base_rank(c.base), c.off)));
    let mut last = sa[0];
    let mut j = 0;
    for i in 1..sa.len() {
        let this = sa[i];
        let (Some(l), Some(t)) = (cands[last], cands[this]) else {
            continue;
        };
        if !can_merge(&l, &t) || l.ne != t.ne {
            last = this;
            j = i;
            continue;
        }
        let mut merged = Cand {
            len: l.len + t.len,
            protocol: false,
            ..l
        };
        let (survivor, victim) = if t.protocol {
            merged.protocol = true;
            let victim = sa[j];
            j = i;
            (this, victim)
        } else {
            (last, this)
        };
        let mut g = std::mem::take(&mut groups[last]);
        g.append(&mut std::mem::take(&mut groups[this]));
        groups[survivor] = g;
        cands[survivor] = Some(merged);
        cands[victim] = None;
        gone[victim] = true;
        last = survivor;
    }
}

/// Reorder `stmts` as nft lists the rule after merging its payload matches.
pub(super) fn listing_order(stmts: &mut Vec<Stmt>, family: Family) {
    let kinds = members(stmts, family);
    let mut cands: Vec<Option<Cand>> = kinds
        .iter()
        .map(|k| match k {
            Kind::Cand(c) => Some(*c),
            _ => None,
        })
        .collect();
    let mut groups: Vec<Vec<Cand>> = cands.iter().map(|c| c.iter().copied().collect()).collect();
    let mut gone = vec![false; kinds.len()];
    let mut sa = Vec::new();
    for (i, k) in kinds.iter().enumerate() {
        match k {
            Kind::Cand(_) => sa.push(i),
            // nft 1.0.6: `if (idx < 2) continue;` keeps a lone candidate in the run.
            Kind::Fence(_) if sa.len() >= 2 => {
                do_merge(&mut sa, &mut cands, &mut groups, &mut gone);
                sa.clear();
            }
            Kind::Barrier(_) => {
                if sa.len() >= 2 {
                    do_merge(&mut sa, &mut cands, &mut groups, &mut gone);
                }
                sa.clear();
            }
            _ => {}
        }
    }
    if sa.len() >= 2 {
        do_merge(&mut sa, &mut cands, &mut groups, &mut gone);
    }
    if groups.iter().all(|g| g.len() < 2) {
        return;
    }
    // A link-layer match that moves across a statement away from where it was leaves its
    // dependency behind: nft lists `meta iiftype ether` there (not in a bridge table, where
    // the link layer needs none).
    let fence_between = |a: usize, b: usize| {
        kinds[a + 1..b]
            .iter()
            .any(|k| matches!(k, Kind::Fence(_) | Kind::Barrier(_)))
    };
    let mut dep_at = vec![false; kinds.len()];
    if family != Family::Bridge {
        for (s, g) in groups.iter().enumerate() {
            if g.len() < 2 || gone[s] {
                continue;
            }
            let moved = g
                .iter()
                .filter(|c| c.base == PayloadBase::Link)
                .filter_map(|c| c.stmt)
                .filter_map(|j| {
                    kinds
                        .iter()
                        .position(|k| matches!(k, Kind::Cand(c) if c.stmt == Some(j)))
                })
                .filter(|&at| at < s && fence_between(at, s))
                .min();
            if let Some(at) = moved {
                dep_at[at] = true;
            }
        }
    }
    // Statement indices in listed order: each surviving position lists its group's statements
    // by offset; dependencies are not listed; statements that are no candidates keep their place.
    let mut order: Vec<usize> = Vec::with_capacity(stmts.len());
    for (i, k) in kinds.iter().enumerate() {
        if dep_at[i] {
            order.push(usize::MAX);
        }
        if gone[i] {
            continue;
        }
        match *k {
            Kind::Cand(_) => {
                let mut g = groups[i].clone();
                g.sort_by_key(|c| c.off);
                order.extend(g.iter().filter_map(|c| c.stmt));
            }
            Kind::Fence(s) | Kind::Barrier(s) | Kind::Other(s) => order.push(s),
        }
    }
    let mut old: Vec<Option<Stmt>> = std::mem::take(stmts).into_iter().map(Some).collect();
    stmts.extend(order.into_iter().filter_map(|i| match i {
        usize::MAX => iiftype_ether(),
        i => old[i].take(),
    }));
}

#[cfg(test)]
mod tests {
    /// Rule texts of `rules` (one rule per line in a netdev base chain) after parsing.
    fn listed(rules: &str) -> Vec<String> {
        let text = format!(
            "table netdev t {{\nchain c {{\ntype filter hook ingress device \"eth0\" priority 0;\n{rules}\n}}\n}}\n"
        );
        let rs = crate::parse_str(&text, "t.nft").unwrap_or_else(|e| panic!("{e}"));
        rs.tables[0].chains[0]
            .rules
            .iter()
            .map(crate::print::rule_text)
            .collect()
    }

    /// [`listed`] in a table that declares plugin `p`.
    fn listed_with_plugin(rules: &str) -> Vec<String> {
        let text = format!(
            "table netdev t {{\nplugin p {{ path \"p.wasm\"; }}\nchain c {{\ntype filter hook ingress device \"eth0\" priority 0;\n{rules}\n}}\n}}\n"
        );
        let rs = crate::parse_str(&text, "t.nft").unwrap_or_else(|e| panic!("{e}"));
        rs.tables[0].chains[0]
            .rules
            .iter()
            .map(crate::print::rule_text)
            .collect()
    }

    // Expected texts are `nft list ruleset` of nftables 1.0.6 for the same input.
    #[test]
    fn neq_matches_merge_and_list_in_offset_order() {
        assert_eq!(
            listed("udp dport != 31337 udp sport != 12345 accept"),
            ["udp sport != 12345 udp dport != 31337 accept"]
        );
        assert_eq!(
            listed("udp length != 3 udp dport != 2 udp sport != 1 accept"),
            ["udp length != 3 udp sport != 1 udp dport != 2 accept"]
        );
        // == and != do not merge: written order stays.
        assert_eq!(
            listed("udp dport 2 udp sport != 1 accept"),
            ["udp dport 2 udp sport != 1 accept"]
        );
    }

    #[test]
    fn dependencies_are_members() {
        // The ether type 8021q of vlan id, then the ether type ip of ip saddr after an ether
        // field, merge with the ether addresses and take their place.
        assert_eq!(
            listed("vlan id 5 ether saddr 00:11:22:33:44:55 accept"),
            ["ether saddr 00:11:22:33:44:55 vlan id 5 accept"]
        );
        assert_eq!(
            listed(
                "ether saddr 00:11:22:33:44:55 ip saddr 1.1.1.1 ether daddr 00:11:22:33:44:66 accept"
            ),
            ["ether daddr 00:11:22:33:44:66 ether saddr 00:11:22:33:44:55 ip saddr 1.1.1.1 accept"]
        );
    }

    #[test]
    fn fences_and_the_lone_match_quirk() {
        assert_eq!(
            listed("udp sport 1 meta mark 3 udp dport 2 accept"),
            ["udp sport 1 udp dport 2 meta mark 0x00000003 accept"]
        );
        assert_eq!(
            listed("udp sport 1 counter udp dport 2 accept"),
            ["udp sport 1 udp dport 2 counter packets 0 bytes 0 accept"]
        );
        assert_eq!(
            listed("udp sport 1 udp length 5 counter udp dport 2 accept"),
            ["udp sport 1 udp length 5 counter packets 0 bytes 0 udp dport 2 accept"]
        );
        // A plugin use is no nft statement: nothing crosses it.
        assert_eq!(
            listed_with_plugin("udp sport 1 p x counter udp dport 2 accept"),
            ["udp sport 1 p x counter packets 0 bytes 0 udp dport 2 accept"]
        );
        assert_eq!(
            listed_with_plugin("udp dport 2 p x counter udp sport 1 accept"),
            ["udp dport 2 p x counter packets 0 bytes 0 udp sport 1 accept"]
        );
        // Network fields stop at 4 bytes: ip saddr . ip daddr stay two loads, in written order.
        assert_eq!(
            listed("ip daddr 2.2.2.2 ip saddr 1.1.1.1 accept"),
            ["ip daddr 2.2.2.2 ip saddr 1.1.1.1 accept"]
        );
    }
}
