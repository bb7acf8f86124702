//! nft's merge of adjacent payload matches, replayed on a compiled rule.
//!
//! Before nft (1.0.6) sends a rule to the kernel, `rule_postprocess` runs `stmt_reduce`
//! (src/rule.c), which collects the rule's payload matches against a single value (`==`, implicit
//! `==` and `!=`; not ranges, sets, prefixes or matches through a bitwise operation) and hands each
//! run of them to `payload_do_merge`: sorted by base and offset, two matches merge when
//! `payload_can_merge` (src/payload.c) allows it and their operators are the same, into one load
//! of both fields compared with both values at once. The kernel then evaluates the merged
//! comparison, so wasp must too:
//!
//! - `!=` merges: `udp dport != 31337 udp sport != 12345` becomes one 4-byte `cmp neq` of
//!   `sport . dport` against `12345 . 31337`, which matches when EITHER port differs (nft 1.0.6;
//!   later versions stopped merging `!=`).
//! - `payload_can_merge`: same base, the first field ends where the second starts, both
//!   byte-aligned, at most 16 bytes together; and then only if the result is at most 4 bytes (the
//!   kernel's fast path can still load it), or the base is the link layer, or one of the two is
//!   already longer than 4 bytes. So `ip saddr . ip daddr` stays two loads, `udp dport 53 udp
//!   length 100` becomes one 4-byte load at transport + 2 (which is not a fast-path load, and so
//!   fails on a non-first fragment), `ether saddr A ether type B` becomes 8 bytes at link + 6.
//! - Implicit dependencies are statements too: the `ether type 8021q` that nft puts in front of
//!   `vlan id` merges with an `ether saddr` match.
//! - Statements that are not expressions (counter, log, `meta set`, verdicts, verdict maps) end a
//!   run, except that nft 1.0.6 keeps a run of ONE match across them (`if (idx < 2) continue;`
//!   without resetting the run): `udp sport 1 counter udp dport 2` compiles to one 4-byte match in
//!   front of the counter, which then counts only packets matching both ports. Where the merged
//!   match sits matters for such statements: it replaces the lower-offset member, unless the
//!   higher-offset member is a protocol field (`ether type`, `vlan type`, `ip protocol`,
//!   `ip6 nexthdr`, flagged `EXPR_F_PROTOCOL`), whose place it then takes (so that `ether type ip
//!   ether saddr X` does not test addresses before the type).
//! - A plugin use (wasp's own statement, which nft never sees) ends every run, a lone match's
//!   too ([`MergeKind::Barrier`]): no match moves across it, so the plugin gets the rule's
//!   packets as written and the matches after it read what it left (its edits).
//!
//! Checked with `nft --debug=netlink` (nftables 1.0.6) for every case in the tests below.

use crate::compiled::Op;
use crate::expr::{Cmp, Load, Src, mask_bytes};

/// What `stmt_reduce` sees in one compiled operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MergeKind {
    /// A payload match against one value: may merge.
    Candidate(Cand),
    /// A statement that is not an expression (counter, log, `meta set`, verdict, verdict map):
    /// ends a run of candidates (but for nft 1.0.6's lone candidate, see the module).
    Fence,
    /// A plugin use: ends every run, a lone candidate's too. nft never sees a plugin, so no
    /// match moves across one: the plugin gets the packets of the rule as written, and the
    /// matches after it read the packet as it left it.
    Barrier,
    /// Any other match (meta keys, sets, ranges, prefixes, bitwise): neither.
    Other,
}

/// A mergeable payload match: `read(src, off, len) == value` (or `!=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cand {
    /// Link, network or transport header.
    pub src: Src,
    /// Byte offset from the base.
    pub off: u16,
    /// Length in bytes (1..=16).
    pub len: u8,
    /// The value, big-endian bytes as a number.
    pub value: u128,
    /// `!=` rather than `==`.
    pub ne: bool,
    /// The field is its header's protocol field (`EXPR_F_PROTOCOL`).
    pub protocol: bool,
}

impl Cand {
    /// The compiled comparison of this candidate.
    pub fn op(&self) -> Op {
        let load = Load {
            src: self.src,
            off: self.off,
            len: self.len,
            need: self.len,
            shift: 0,
            mask: mask_bytes(self.len),
            xor: 0,
            width: self.len,
        };
        let cmp = if self.ne {
            Cmp::Ne(self.value)
        } else {
            Cmp::Eq(self.value)
        };
        Op::Cmp(Box::new((load, cmp)))
    }
}

/// nft's `proto_base` order (link < network < transport), the first sort key of
/// `payload_match_stmt_cmp`.
fn base_rank(s: Src) -> u8 {
    match s {
        Src::Link => 0,
        Src::Net => 1,
        _ => 2,
    }
}

/// `payload_can_merge` (with `payload_is_adjacent`), for byte-aligned candidates.
fn can_merge(a: &Cand, b: &Cand) -> bool {
    if a.src != b.src || u32::from(a.off) + u32::from(a.len) != u32::from(b.off) {
        return false;
    }
    let total = u32::from(a.len) + u32::from(b.len);
    if total > 16 {
        return false;
    }
    total <= 4 || a.src == Src::Link || a.len > 4 || b.len > 4
}

/// `payload_expr_join` + `constant_expr_join`: the first field's bytes, then the second's.
fn join(a: &Cand, b: &Cand) -> Cand {
    Cand {
        src: a.src,
        off: a.off,
        len: a.len + b.len,
        value: (a.value << (8 * u32::from(b.len))) | b.value,
        ne: a.ne,
        protocol: false,
    }
}

/// `payload_do_merge` over the candidates at indices `sa`: merged comparisons replace their
/// survivor in `cands`, merged-away indices are marked in `gone`.
fn do_merge(sa: &mut [usize], cands: &mut [Option<Cand>], gone: &mut [bool]) {
    let key = |i: &usize| cands[*i].map(|c| (base_rank(c.src), c.off));
    sa.sort_by_key(key);
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
        let mut merged = join(&l, &t);
        // The merged match takes the place of a protocol field, so that it never moves in
        // front of the dependency it stands for.
        let (survivor, victim) = if t.protocol {
            merged.protocol = true;
            let victim = sa[j];
            j = i;
            (this, victim)
        } else {
            (last, this)
        };
        cands[survivor] = Some(merged);
        cands[victim] = None;
        gone[victim] = true;
        last = survivor;
    }
}

/// Replay nft 1.0.6's `stmt_reduce` payload merge on the operations of one rule (`kinds[i]`
/// describes `ops[i]`) and return the operations the kernel would run, in order.
pub(crate) fn reduce(ops: Vec<Op>, kinds: &[MergeKind]) -> Vec<Op> {
    debug_assert_eq!(ops.len(), kinds.len());
    let mut cands: Vec<Option<Cand>> = kinds
        .iter()
        .map(|k| match k {
            MergeKind::Candidate(c) => Some(*c),
            _ => None,
        })
        .collect();
    let mut gone = vec![false; ops.len()];
    let mut sa: Vec<usize> = Vec::new();
    for (i, k) in kinds.iter().enumerate() {
        match k {
            MergeKind::Candidate(_) => sa.push(i),
            MergeKind::Fence => {
                // nft 1.0.6: `if (idx < 2) continue;` keeps a lone candidate in the run.
                if sa.len() >= 2 {
                    do_merge(&mut sa, &mut cands, &mut gone);
                    sa.clear();
                }
            }
            MergeKind::Barrier => {
                if sa.len() >= 2 {
                    do_merge(&mut sa, &mut cands, &mut gone);
                }
                sa.clear();
            }
            MergeKind::Other => {}
        }
    }
    if sa.len() >= 2 {
        do_merge(&mut sa, &mut cands, &mut gone);
    }
    ops.into_iter()
        .enumerate()
        .filter(|(i, _)| !gone[*i])
        .map(|(i, op)| match (kinds.get(i), cands[i]) {
            (Some(MergeKind::Candidate(orig)), Some(c)) if c != *orig => c.op(),
            _ => op,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(src: Src, off: u16, len: u8, value: u128, ne: bool) -> Cand {
        Cand {
            src,
            off,
            len,
            value,
            ne,
            protocol: false,
        }
    }

    fn proto(mut x: Cand) -> Cand {
        x.protocol = true;
        x
    }

    /// Run `reduce` on candidates/fences/others; describe the result as (src, off, len, value,
    /// ne) for comparisons and "F"/"O" markers for the rest.
    fn run(items: &[MergeKind]) -> Vec<String> {
        let ops: Vec<Op> = items
            .iter()
            .map(|k| match k {
                MergeKind::Candidate(c) => c.op(),
                MergeKind::Fence | MergeKind::Barrier => Op::Log(0),
                MergeKind::Other => Op::Verdict(crate::compiled::Verdict::Continue),
            })
            .collect();
        reduce(ops, items)
            .iter()
            .map(|op| match op {
                Op::Cmp(lc) => {
                    let (load, cmp) = &**lc;
                    let (ne, v) = match cmp {
                        Cmp::Eq(v) => ("==", *v),
                        Cmp::Ne(v) => ("!=", *v),
                        _ => ("?", 0),
                    };
                    format!("{:?}+{}/{} {ne} {v:#x}", load.src, load.off, load.len)
                }
                Op::Log(_) => "F".into(),
                _ => "O".into(),
            })
            .collect()
    }

    use MergeKind::{Candidate as C, Fence as F, Other as O};
    use Src::{Link, Net, Transport as Th};

    #[test]
    fn neq_ports_merge_into_one_neq() {
        // udp dport != 31337 udp sport != 12345: [ payload load 4b @ transport header + 0 ]
        // [ cmp neq reg 1 0x697a3930 ] (12345 = 0x3039, 31337 = 0x7a69).
        let got = run(&[
            O,
            C(c(Th, 2, 2, 31337, true)),
            C(c(Th, 0, 2, 12345, true)),
            F,
        ]);
        assert_eq!(got, ["O", "Transport+0/4 != 0x30397a69", "F"]);
    }

    #[test]
    fn eq_and_neq_do_not_merge() {
        // udp sport != 1 udp dport 2: two 2-byte loads.
        let got = run(&[C(c(Th, 0, 2, 1, true)), C(c(Th, 2, 2, 2, false))]);
        assert_eq!(got, ["Transport+0/2 != 0x1", "Transport+2/2 == 0x2"]);
    }

    #[test]
    fn four_byte_limit_outside_the_link_layer() {
        // ip saddr 1.1.1.1 ip daddr 2.2.2.2: two 4-byte loads.
        let got = run(&[
            C(c(Net, 12, 4, 0x0101_0101, false)),
            C(c(Net, 16, 4, 0x0202_0202, false)),
        ]);
        assert_eq!(got.len(), 2);
        // udp sport != 1 udp dport != 2 udp length != 3: 4 bytes, then the length alone.
        let got = run(&[
            C(c(Th, 0, 2, 1, true)),
            C(c(Th, 2, 2, 2, true)),
            C(c(Th, 4, 2, 3, true)),
        ]);
        assert_eq!(got, ["Transport+0/4 != 0x10002", "Transport+4/2 != 0x3"]);
        // udp dport 53 udp length 100: 4 bytes at transport + 2.
        let got = run(&[C(c(Th, 2, 2, 53, false)), C(c(Th, 4, 2, 100, false))]);
        assert_eq!(got, ["Transport+2/4 == 0x350064"]);
        // tcp flags == syn tcp window 1024: 3 bytes at transport + 13.
        let got = run(&[C(c(Th, 13, 1, 2, false)), C(c(Th, 14, 2, 1024, false))]);
        assert_eq!(got, ["Transport+13/3 == 0x20400"]);
    }

    #[test]
    fn link_layer_merges_up_to_16_bytes() {
        // ether daddr != A ether saddr != B: 12 bytes neq.
        let got = run(&[
            C(c(Link, 0, 6, 0x0011_2233_4455, true)),
            C(c(Link, 6, 6, 0x0011_2233_4466, true)),
        ]);
        assert_eq!(got, ["Link+0/12 != 0x1122334455001122334466"]);
        // ether saddr A ip saddr B ether daddr C, with the ether type dependency: 14 bytes.
        let got = run(&[
            C(c(Link, 6, 6, 0x0011_2233_4455, false)),
            C(proto(c(Link, 12, 2, 0x0800, false))),
            C(c(Net, 12, 4, 0x0101_0101, false)),
            C(c(Link, 0, 6, 0x0011_2233_4466, false)),
        ]);
        assert_eq!(
            got,
            [
                "Link+0/14 == 0x11223344660011223344550800",
                "Net+12/4 == 0x1010101"
            ]
        );
    }

    #[test]
    fn a_lone_match_crosses_a_fence_in_nft_1_0_6() {
        // udp sport 1 counter udp dport 2: one 4-byte match in front of the counter.
        let got = run(&[C(c(Th, 0, 2, 1, false)), F, C(c(Th, 2, 2, 2, false)), F]);
        assert_eq!(got, ["Transport+0/4 == 0x10002", "F", "F"]);
        // udp dport 2 counter udp sport 1: the merged match sits where sport was, after it.
        let got = run(&[C(c(Th, 2, 2, 2, false)), F, C(c(Th, 0, 2, 1, false)), F]);
        assert_eq!(got, ["F", "Transport+0/4 == 0x10002", "F"]);
        // udp sport 1 udp length 5 counter udp dport 2: a run of two ends at the counter.
        let got = run(&[
            C(c(Th, 0, 2, 1, false)),
            C(c(Th, 4, 2, 5, false)),
            F,
            C(c(Th, 2, 2, 2, false)),
        ]);
        assert_eq!(
            got,
            [
                "Transport+0/2 == 0x1",
                "Transport+4/2 == 0x5",
                "F",
                "Transport+2/2 == 0x2"
            ]
        );
        // udp sport 1 counter udp dport 2 counter udp length 3.
        let got = run(&[
            C(c(Th, 0, 2, 1, false)),
            F,
            C(c(Th, 2, 2, 2, false)),
            F,
            C(c(Th, 4, 2, 3, false)),
        ]);
        assert_eq!(
            got,
            ["Transport+0/4 == 0x10002", "F", "F", "Transport+4/2 == 0x3"]
        );
    }

    #[test]
    fn no_match_crosses_a_plugin() {
        // udp sport 1 PLUGIN udp dport 2: two matches, in their places.
        let got = run(&[
            C(c(Th, 0, 2, 1, false)),
            MergeKind::Barrier,
            C(c(Th, 2, 2, 2, false)),
            F,
        ]);
        assert_eq!(
            got,
            ["Transport+0/2 == 0x1", "F", "Transport+2/2 == 0x2", "F"]
        );
        // udp sport 1 counter PLUGIN udp dport 2, udp sport 1 PLUGIN counter udp dport 2.
        for order in [[F, MergeKind::Barrier], [MergeKind::Barrier, F]] {
            let got = run(&[
                C(c(Th, 0, 2, 1, false)),
                order[0],
                order[1],
                C(c(Th, 2, 2, 2, false)),
            ]);
            assert_eq!(
                got,
                ["Transport+0/2 == 0x1", "F", "F", "Transport+2/2 == 0x2"]
            );
        }
        // Matches on one side of it still merge: udp sport 1 udp dport 2 PLUGIN.
        let got = run(&[
            C(c(Th, 0, 2, 1, false)),
            C(c(Th, 2, 2, 2, false)),
            MergeKind::Barrier,
        ]);
        assert_eq!(got, ["Transport+0/4 == 0x10002", "F"]);
    }

    #[test]
    fn protocol_fields_keep_their_place() {
        // ether saddr X counter ether type 0x8100: merged after the counter, where ether type
        // was (its EXPR_F_PROTOCOL flag).
        let got = run(&[
            C(c(Link, 6, 6, 0x0011_2233_4455, false)),
            F,
            C(proto(c(Link, 12, 2, 0x8100, false))),
            F,
        ]);
        assert_eq!(got, ["F", "Link+6/8 == 0x11223344558100", "F"]);
    }

    #[test]
    fn others_do_not_break_a_run() {
        // udp sport 1 meta mark 3 udp dport 2: merged where sport was.
        let got = run(&[C(c(Th, 0, 2, 1, false)), O, C(c(Th, 2, 2, 2, false))]);
        assert_eq!(got, ["Transport+0/4 == 0x10002", "O"]);
    }
}
