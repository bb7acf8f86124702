//! Printed text re-parses to the same model (spans aside), and printing is stable.

use std::path::{Path, PathBuf};

use wasp_ruleset::model::{KeyPart, Rhs, Ruleset, SetElem, SetRef, Span, Stmt};

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "nft"))
        .collect();
    v.sort();
    v
}

fn norm_elems(elems: &mut [SetElem]) {
    for e in elems.iter_mut() {
        e.span = Span::default();
        if let Some(x) = e.extra.as_mut() {
            x.expires_ms = None;
        }
        for p in &mut e.key {
            // A prefix and the range it covers are the same interval.
            if let KeyPart::Prefix(v, n) = p.clone() {
                let bits = u32::from(v.dtype.width_bits());
                let pad = (v.bytes.len() as u32) * 8 - bits;
                let mut hi = v.clone();
                for bit in (pad + u32::from(n))..(pad + bits) {
                    hi.bytes[(bit / 8) as usize] |= 0x80 >> (bit % 8);
                }
                *p = KeyPart::Range(v, hi);
            }
            if let KeyPart::Range(lo, hi) = p.clone()
                && lo.bytes == hi.bytes
            {
                *p = KeyPart::Value(lo);
            }
        }
    }
    elems.sort_by(|a, b| format!("{:?}", a.key).cmp(&format!("{:?}", b.key)));
}

/// The model without positions, with elements in a fixed order. Handles are zeroed too: they
/// record the order of commands (several blocks, `add rule`), which printed text does not
/// keep; the kernel test checks them.
fn normalize(mut r: Ruleset) -> Ruleset {
    r.sources.clear();
    r.table_handle = 0;
    for t in &mut r.tables {
        t.span = Span::default();
        (t.handle, t.next_handle) = (0, 0);
        for s in &mut t.sets {
            s.handle = 0;
        }
        for q in &mut t.quotas {
            (q.handle, q.span) = (0, Span::default());
        }
        for l in &mut t.limits {
            (l.handle, l.span) = (0, Span::default());
        }
        for o in &mut t.ct_objects {
            (o.handle, o.span) = (0, Span::default());
        }
        for c in &mut t.counters {
            (c.handle, c.span) = (0, Span::default());
        }
        for c in &mut t.chains {
            c.handle = 0;
            for rule in &mut c.rules {
                rule.handle = 0;
            }
        }
        for s in &mut t.sets {
            s.span = Span::default();
            norm_elems(s.elements.to_mut());
        }
        for c in &mut t.chains {
            c.span = Span::default();
            for rule in &mut c.rules {
                rule.span = Span::default();
                for st in &mut rule.stmts {
                    match st {
                        Stmt::Match(m) => {
                            m.span = Span::default();
                            if let Rhs::Set(SetRef::Anonymous(e)) = &mut m.right {
                                norm_elems(e);
                            }
                        }
                        Stmt::VerdictMap { span, map, .. } | Stmt::ObjectMap { span, map, .. } => {
                            *span = Span::default();
                            if let SetRef::Anonymous(e) = map {
                                norm_elems(e);
                            }
                        }
                        Stmt::MetaSet { span, value, .. } | Stmt::CtSet { span, value, .. } => {
                            *span = Span::default();
                            if let wasp_ruleset::model::Expr::Map {
                                map: SetRef::Anonymous(e),
                                ..
                            } = value
                            {
                                norm_elems(e);
                            }
                        }
                        Stmt::CtCount { span, .. }
                        | Stmt::FlowAdd { span, .. }
                        | Stmt::Limit { span, .. }
                        | Stmt::LimitRef { span, .. }
                        | Stmt::Quota { span, .. }
                        | Stmt::QuotaRef { span, .. }
                        | Stmt::Reject { span, .. }
                        | Stmt::PayloadSet { span, .. }
                        | Stmt::OptReset { span, .. }
                        | Stmt::CounterRef { span, .. } => {
                            *span = Span::default();
                        }
                        Stmt::Nat(n) => n.span = Span::default(),
                        Stmt::SetUpdate(u) => {
                            u.span = Span::default();
                            for s in &mut u.stmts {
                                if let Stmt::Limit { span, .. } | Stmt::Quota { span, .. } = s {
                                    *span = Span::default();
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    r
}

#[test]
fn printed_text_reparses_to_the_same_model() {
    for case in cases() {
        let first = wasp_ruleset::parse_file(&case).unwrap_or_else(|e| panic!("{e}"));
        for handles in [false, true] {
            let text = wasp_ruleset::print_ruleset(&first, handles);
            let second = wasp_ruleset::parse_str(&text, "printed.nft").unwrap_or_else(|e| {
                panic!(
                    "{}: printed text does not parse:\n{e}\n{text}",
                    case.display()
                )
            });
            if !handles {
                assert_eq!(
                    wasp_ruleset::print_ruleset(&second, false),
                    text,
                    "{}: printing is not stable",
                    case.display()
                );
            }
            {
                assert_eq!(
                    format!("{:?}", normalize(second)),
                    format!("{:?}", normalize(first.clone())),
                    "{}: model changed through print + parse",
                    case.display()
                );
            }
        }
    }
}
