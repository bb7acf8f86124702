//! A named set's elements listed from the compiled set that holds them
//! ([`wasp_ruleset::model::HeldElements`]): a daemon's ruleset model keeps no copy of a large
//! set of plain keys beside the compiled set ([`Engine::hold_elements`]), as the kernel keeps
//! one copy of each element, in its set back-end.
//!
//! Which sets: named sets (not maps) of at least [`HOLD_MIN`] elements, every one plain (no
//! data, counter, timeout, expiry or comment; no catch-all), without `counter`, `timeout`,
//! `dynamic` or `auto-merge`, and not changed by the packet path; of key types whose values are
//! their field's bytes (not interface names, which may end in a wildcard). Their back-end
//! lists them as nft does: the hash and the interval back-end in any order (nft sorts them),
//! pipapo in insertion order (what nft lists for a concatenation with ranges). A set is held
//! only when each of its elements reads back from the compiled set as the model lists it, and
//! from the file it came from ([`crate::setstore::Elem::origin`]).

use std::collections::HashSet;
use std::sync::Arc;

use wasp_ruleset::Ruleset;
use wasp_ruleset::model::{
    DataType, ElemKey, Elements, FileId, HeldElements, KeyPart, SetDecl, SetElem, Span, Value,
};

use crate::engine::Engine;
use crate::setstore::{Set, SetStore};

/// The fewest elements a set is held with: a small set costs little in the model and keeps
/// its elements' places in the source for messages.
pub const HOLD_MIN: usize = 1024;

/// The elements of a compiled set, listed as the model would list them.
#[derive(Debug)]
pub(crate) struct HeldSet {
    set: Arc<Set>,
    /// The key's data type per field; each field is its type's width in bytes.
    key: Box<[DataType]>,
}

impl HeldSet {
    /// The element of bounds `lo`..=`hi` stored with data slot `slot`, as the model lists it.
    fn elem(&self, lo: &[u8], hi: &[u8], slot: u32) -> SetElem {
        let mut key = ElemKey::new();
        let mut at = 0;
        for &dtype in self.key.iter() {
            let w = dtype.width_bytes();
            let (a, b) = (
                lo.get(at..at + w).unwrap_or_default(),
                hi.get(at..at + w).unwrap_or_default(),
            );
            at += w;
            let value = |bytes: &[u8]| Value {
                dtype,
                bytes: bytes.into(),
                wildcard: false,
            };
            let part = if a == b {
                KeyPart::Value(value(a))
            } else {
                KeyPart::Range(value(a), value(b))
            };
            key.push(wasp_ruleset::listed_part(&part));
        }
        let file = self.set.elems.get(slot as usize).map_or(0, |e| e.origin);
        SetElem::new(
            key,
            Span {
                file,
                ..Span::default()
            },
        )
    }
}

impl HeldElements for HeldSet {
    fn len(&self) -> usize {
        match &self.set.store {
            SetStore::Exact(s) => s.len(),
            SetStore::Interval(s) => s.len(),
            SetStore::Pipapo(p) => p.len(),
            SetStore::Dynamic(_) | SetStore::Ranges(_) => 0,
        }
    }

    fn iter(&self) -> Box<dyn Iterator<Item = SetElem> + '_> {
        match &self.set.store {
            SetStore::Exact(s) => Box::new(s.iter().map(|(k, d)| self.elem(&k, &k, d))),
            SetStore::Interval(s) => Box::new(
                s.handles()
                    .filter_map(|h| s.elem(h))
                    .map(|e| self.elem(e.start, e.end, e.data)),
            ),
            SetStore::Pipapo(p) => Box::new(
                p.handles()
                    .filter_map(|h| p.elem(h))
                    .map(|e| self.elem(e.start, e.end, e.data)),
            ),
            SetStore::Dynamic(_) | SetStore::Ranges(_) => Box::new(std::iter::empty()),
        }
    }

    fn find(&self, lo: &[u8], hi: &[u8]) -> Option<SetElem> {
        // At time 0 nothing has expired (held sets have no expiry anyway).
        let slot = match &self.set.store {
            SetStore::Exact(s) if lo == hi => s.get(lo)?,
            SetStore::Interval(s) => {
                let e = s.elem(s.lookup(lo, 0)?)?;
                (e.start == lo && e.end == hi).then_some(e.data)?
            }
            SetStore::Pipapo(p) => {
                let same = |e: &wasp_sets::ElemRef<'_, ()>| e.start == lo && e.end == hi;
                match p.lookup_index(lo, 0).and_then(|h| p.elem(h)) {
                    Some(e) if same(&e) => e.data,
                    // Another element holding `lo` came first: look at each.
                    _ => p.handles().filter_map(|h| p.elem(h)).find(same)?.data,
                }
            }
            _ => return None,
        };
        Some(self.elem(lo, hi, slot))
    }

    fn files(&self) -> Vec<FileId> {
        std::iter::once(0)
            .chain(self.set.shared.keys().copied())
            .collect()
    }
}

/// An element the compiled set can hold for the model: a key and nothing else.
fn plain(e: &SetElem) -> bool {
    e.data.is_none() && !e.counter && e.extra.is_none() && !e.is_catch_all()
}

/// Whether the declaration's elements may be held by `set` (see the module documentation);
/// the elements themselves are checked by [`hold`].
fn may_hold(decl: &SetDecl, set: &Set) -> bool {
    let flags = decl.flags;
    let declared = !decl.is_map
        && !decl.counter
        && decl.timeout_ms.is_none()
        && !flags.timeout
        && !flags.dynamic
        && !flags.auto_merge
        && !decl.key.is_empty()
        && decl
            .key
            .iter()
            .all(|d| *d != DataType::Ifname && (1..=16).contains(&d.width_bytes()));
    let key_len: usize = decl.key.iter().map(|d| d.width_bytes()).sum();
    let stored = match &set.store {
        // A concatenation with the interval flag is listed in insertion order: pipapo's.
        SetStore::Exact(s) => s.key_len() == key_len && !(flags.interval && decl.key.len() > 1),
        SetStore::Interval(s) => s.key_len() == key_len && decl.key.len() == 1,
        SetStore::Pipapo(p) => p.key_len() == key_len,
        SetStore::Dynamic(_) | SetStore::Ranges(_) => false,
    };
    declared && stored && set.catch_all.is_none() && set.counter_site.is_none()
}

/// Let `set` hold `decl`'s elements where it can: a set held before follows the set's new
/// state (its changes since are in it), a listed one of at least [`HOLD_MIN`] plain elements
/// is held when each element reads back as listed; a held set that can no longer be held is
/// listed again (from its holder and changes).
fn hold(decl: &mut SetDecl, set: &Arc<Set>) {
    let view = HeldSet {
        set: Arc::clone(set),
        key: decl.key.clone().into(),
    };
    let fits = may_hold(decl, set) && view.len() == decl.elements.len();
    if decl.elements.holder().is_some() {
        if fits && decl.elements.added().iter().all(plain) {
            decl.elements = Elements::held(Arc::new(view));
        } else {
            decl.elements.to_mut();
        }
        return;
    }
    if !fits || decl.elements.len() < HOLD_MIN || !decl.elements.iter().all(|e| plain(&e)) {
        return;
    }
    let listed = |e: &SetElem| -> (ElemKey, FileId) {
        (
            e.key.iter().map(wasp_ruleset::listed_part).collect(),
            e.span.file,
        )
    };
    let same = if matches!(set.store, SetStore::Pipapo(_)) {
        decl.elements
            .iter()
            .zip(view.iter())
            .all(|(m, v)| listed(&m) == (v.key.clone(), v.span.file))
    } else {
        // A concatenation of single values is listed sorted only when no part is written
        // as a range (nft lists one with ranges in insertion order).
        let values = decl.key.len() == 1
            || decl
                .elements
                .iter()
                .all(|e| e.key.iter().all(|p| matches!(p, KeyPart::Value(_))));
        let model: HashSet<(ElemKey, FileId)> = decl.elements.iter().map(|e| listed(&e)).collect();
        values
            && model.len() == view.len()
            && view.iter().all(|v| model.contains(&(v.key, v.span.file)))
    };
    if same {
        decl.elements = Elements::held(Arc::new(view));
    }
}

impl Engine {
    /// Let this engine's compiled sets hold the elements of `rs`'s named sets that they can
    /// (see the module documentation): `rs` must be the ruleset the engine was compiled from,
    /// or that ruleset with the element batches applied that the engine applied too
    /// ([`Engine::apply_set_update`]). Sets held before follow the engine's sets (call it after
    /// every change of either); a held set that can no longer be held (an element with a
    /// timeout or comment was added) is listed in the model again. Costs a pass over the
    /// elements of each set held for the first time.
    pub fn hold_elements(&self, rs: &mut Ruleset) {
        for (ti, t) in rs.tables.iter_mut().enumerate() {
            for (si, decl) in t.sets.iter_mut().enumerate() {
                let Some(set) = self
                    .prog
                    .named_sets
                    .get(ti)
                    .and_then(|n| n.get(si))
                    .and_then(|id| self.prog.sets.get(id.idx()))
                else {
                    if decl.elements.holder().is_some() {
                        decl.elements.to_mut();
                    }
                    continue;
                };
                hold(decl, set);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write;

    use super::*;

    /// A concatenated interval set (pipapo), an interval set, a hash set and a concatenation
    /// of single values of `n` elements each, a small set and a verdict map.
    fn ruleset(n: usize) -> String {
        let mut s = String::from("table netdev t {\n");
        let list = |f: &dyn Fn(usize) -> String| (0..n).map(f).collect::<Vec<_>>().join(", ");
        let a = |i: usize| format!("10.{}.{}.{}", i >> 14, (i >> 6) & 0xff, (i & 0x3f) << 2);
        let _ = writeln!(
            s,
            " set c {{ type ipv4_addr . inet_service; flags interval; elements = {{ {} }} }}",
            list(&|i| format!("{}/30 . {}-{}", a(i), 1000 + i % 50, 2000 + i % 50))
        );
        let _ = writeln!(
            s,
            " set i {{ type ipv4_addr; flags interval; elements = {{ {} }} }}",
            list(&|i| if i % 3 == 0 {
                format!(
                    "{}-10.{}.{}.{}",
                    a(i),
                    i >> 14,
                    (i >> 6) & 0xff,
                    ((i & 0x3f) << 2) + 2
                )
            } else {
                format!("{}/30", a(i))
            })
        );
        let _ = writeln!(
            s,
            " set h {{ type ipv4_addr; elements = {{ {} }} }}",
            list(&a)
        );
        let _ = writeln!(
            s,
            " set p {{ type ipv4_addr . inet_service; elements = {{ {} }} }}",
            list(&|i| format!("{} . {}", a(i), i % 1000))
        );
        s.push_str(" set small { type ipv4_addr; elements = { 1.2.3.4 } }\n");
        s.push_str(" map v { type ipv4_addr : verdict; elements = { 1.2.3.4 : drop } }\n");
        s.push_str(
            " chain in {\n  type filter hook ingress device \"eth0\" priority 0; policy accept;\n  ip daddr . udp dport @c drop\n  ip daddr @i drop\n  ip daddr @h drop\n  ip daddr . udp dport @p drop\n  ip daddr @small drop\n  ip daddr vmap @v\n }\n}\n",
        );
        s
    }

    fn held(rs: &Ruleset) -> Vec<bool> {
        rs.tables[0]
            .sets
            .iter()
            .map(|s| s.elements.holder().is_some())
            .collect()
    }

    /// Apply `batch` as the daemon does: checked against the program, the model changed, the
    /// program's sets changed in place, the model's held sets following them.
    fn apply(e: &mut Engine, rs: &mut Ruleset, sh: &mut wasp_ruleset::SetShadows, batch: &str) {
        let oracle = Box::new(e.set_oracle());
        let txn = wasp_ruleset::apply_elements_against(rs, sh, oracle, batch, "b.nft")
            .expect(batch)
            .expect("element commands only");
        let u = e.set_update(&txn, 0).expect(batch);
        txn.commit();
        drop(e.apply_set_update(&u));
        e.hold_elements(rs);
    }

    /// The model lists and changes large sets held by the program exactly as it lists and
    /// changes them listed: the same `nft list ruleset` text after each batch, a rolled back
    /// batch, a whole compile from the held model, and an element that cannot be held.
    #[test]
    fn held_sets_list_and_change_as_listed_ones() {
        let text = ruleset(1500);
        let mut listed = wasp_ruleset::parse_str(&text, "r.nft").unwrap();
        let mut rs = listed.clone();
        let mut e = Engine::compile(&rs).unwrap();
        let mut le = Engine::compile(&listed).unwrap();
        e.hold_elements(&mut rs);
        assert_eq!(held(&rs), [true, true, true, true, false, false]);
        let print = |r: &Ruleset| wasp_ruleset::print_ruleset(r, false);
        assert_eq!(print(&rs), print(&listed));
        let (mut sh, mut lsh) = Default::default();
        let batches = [
            "add element netdev t c { 192.168.0.0/16 . 1-2 }",
            "delete element netdev t c { 10.0.0.0/30 . 1000-2000 }",
            "add element netdev t c { 10.0.0.0/30 . 1000-2000 }\ndelete element netdev t c { 10.0.0.4/30 . 1001-2001 }",
            "add element netdev t i { 172.16.0.0/12, 192.168.1.1 }\ndelete element netdev t i { 10.0.0.0-10.0.0.2 }",
            "add element netdev t h { 9.9.9.9 }\ndelete element netdev t h { 10.0.0.8 }\nadd element netdev t h { 10.0.0.8 }",
            "add element netdev t p { 9.9.9.9 . 9 }\ndelete element netdev t p { 10.0.0.4 . 1 }",
            "delete element netdev t h { 9.9.9.9 }",
        ];
        for b in batches {
            apply(&mut e, &mut rs, &mut sh, b);
            apply(&mut le, &mut listed, &mut lsh, b);
            assert_eq!(print(&rs), print(&listed), "after {b}");
            assert_eq!(
                held(&rs),
                [true, true, true, true, false, false],
                "after {b}"
            );
        }
        // The elements a batch added name its file.
        let c = &rs.tables[0].sets[0].elements;
        let last = c.iter().last().map_or(0, |x| x.span.file);
        assert_ne!(last, 0);
        assert_eq!(rs.source(last).and_then(|f| f.path.to_str()), Some("b.nft"));
        assert_eq!(c.iter().next().map(|x| x.span.file), Some(0));
        // A batch that fails takes back what it changed before the failure.
        let before = print(&rs);
        let oracle = Box::new(e.set_oracle());
        let bad = "add element netdev t c { 10.9.0.0/16 . 1 }\ndelete element netdev t c { 11.0.0.0/8 . 1 }";
        assert!(
            wasp_ruleset::apply_elements_against(&mut rs, &mut sh, oracle, bad, "x.nft").is_err()
        );
        assert_eq!(print(&rs), before);
        // A whole compile of the held model answers as one of the listed model.
        let whole = Engine::compile(&rs).unwrap();
        let whole_listed = Engine::compile(&listed).unwrap();
        for k in [
            [10u8, 0, 0, 5, 0x03, 0xe9],
            [192, 168, 3, 3, 0, 1],
            [10, 0, 0, 1, 0, 0],
        ] {
            for (a, b) in whole.prog.named_sets[0]
                .iter()
                .zip(&whole_listed.prog.named_sets[0])
            {
                let (sa, sb) = (&whole.prog.sets[*a], &whole_listed.prog.sets[*b]);
                let w = if matches!(sa.store, SetStore::Pipapo(_))
                    || *a == whole.prog.named_sets[0][3]
                {
                    6
                } else {
                    4
                };
                assert_eq!(
                    sa.lookup(&k[..w], 0).is_some(),
                    sb.lookup(&k[..w], 0).is_some()
                );
            }
        }
        // An element with a comment cannot be held: the set is listed again, comment and all.
        let b = "add element netdev t h { 8.8.8.8 comment \"dns\" }";
        apply(&mut e, &mut rs, &mut sh, b);
        apply(&mut le, &mut listed, &mut lsh, b);
        assert_eq!(held(&rs), [true, true, false, true, false, false]);
        assert_eq!(print(&rs), print(&listed));
        assert!(print(&rs).contains("8.8.8.8 comment \"dns\""));
        // A flush empties it held.
        let b = "flush set netdev t c";
        apply(&mut e, &mut rs, &mut sh, b);
        apply(&mut le, &mut listed, &mut lsh, b);
        assert_eq!(print(&rs), print(&listed));
        assert_eq!(rs.tables[0].sets[0].elements.len(), 0);
    }

    /// A set below [`HOLD_MIN`], or one whose elements carry anything but a key, stays listed.
    #[test]
    fn small_and_rich_sets_stay_listed() {
        let mut rs = wasp_ruleset::parse_str(&ruleset(HOLD_MIN - 1), "r.nft").unwrap();
        Engine::compile(&rs).unwrap().hold_elements(&mut rs);
        assert_eq!(held(&rs), [false; 6]);
        let text = ruleset(HOLD_MIN).replacen("1000-2000,", "1000-2000 comment \"x\",", 1);
        let mut rs = wasp_ruleset::parse_str(&text, "r.nft").unwrap();
        Engine::compile(&rs).unwrap().hold_elements(&mut rs);
        assert_eq!(held(&rs), [false, true, true, true, false, false]);
    }

    /// Sets of other key types are held too, and list as they did: IPv6 prefixes and ranges,
    /// MAC addresses, marks with ranges, a concatenation of protocol, port and address.
    #[test]
    fn sets_of_other_key_types_are_held_and_list_the_same() {
        let n = HOLD_MIN + 10;
        let list = |f: &dyn Fn(usize) -> String| (0..n).map(f).collect::<Vec<_>>().join(", ");
        let text = format!(
            "table inet t {{\n set a {{ type ipv6_addr; flags interval; elements = {{ {} }} }}\n set m {{ type ether_addr; elements = {{ {} }} }}\n set k {{ type mark; flags interval; elements = {{ {} }} }}\n set c {{ type inet_proto . inet_service . ipv4_addr; flags interval; elements = {{ {} }} }}\n}}\n",
            list(&|i| if i % 2 == 0 {
                format!("2001:db8:{i:x}::/48")
            } else {
                format!("2001:db9::{:x}-2001:db9::{:x}", i * 8, i * 8 + 3)
            }),
            list(&|i| format!("02:00:00:00:{:02x}:{:02x}", i >> 8, i & 0xff)),
            list(&|i| format!("{}-{}", i * 10, i * 10 + 3)),
            list(&|i| format!("tcp . {} . 10.{}.{}.0/24", i % 1000, i >> 8, i & 0xff)),
        );
        let listed = wasp_ruleset::parse_str(&text, "r.nft").unwrap();
        let mut rs = listed.clone();
        Engine::compile(&rs).unwrap().hold_elements(&mut rs);
        assert_eq!(held(&rs), [true, true, true, true]);
        assert_eq!(
            wasp_ruleset::print_ruleset(&rs, false),
            wasp_ruleset::print_ruleset(&listed, false)
        );
    }
}
