//! Element changes applied to a compiled program's sets without compiling it again: the
//! control side copies each changed set once, applies the batch's adds, deletes and flushes to
//! the copy in the kernel back-end's terms, indexes it again, and hands the copies to every
//! engine ([`Engine::apply_set_update`]), which swaps its pointer to the set between two
//! vectors. The rest of the program, its counters and its state are untouched. (The kernel's
//! nft_set_pipapo also commits a changed clone of the set; its hash and rbtree change in place
//! under RCU.)
//!
//! Sets that set statements change from the packet path live in the engines' shared state
//! (`crate::dynset`): element commands change them in place, once, for every engine
//! ([`Engine::apply_dynamic_update`]), and the elements the packets added stay.
//!
//! In a set whose elements count, each counted element keeps its counter slot
//! ([`crate::CountedElems`]): an added one gets a slot never given before, a deleted one takes
//! its slot and counts with it, and the use site's list follows the model's indices (listings,
//! resets and later changes find the counts by it).
//!
//! What this path leaves to a whole compile ([`Engine::set_update`] answers `None`): an added
//! element with counts written,
//! anonymous range lists, map data other than a value or an `accept`/`drop`/`continue`/
//! `return` verdict (a new `jump` needs the loop check of the whole graph; NAT data lives in
//! the program), and a range added to a set that holds only exact keys.

use std::collections::BTreeMap;
use std::sync::Arc;

use wasp_ruleset::model::{ElemData, SetElem, Verdict};
use wasp_ruleset::{ElementOp, ElementTxn, Ruleset};
use wasp_sets::{InsertMode, NewElem};

use crate::compile::part_bounds;
use crate::compiled::{self, SetId};
use crate::engine::Engine;
use crate::ext::CountedElems;
use crate::field::dtype_width;
use crate::setstore::{Elem, Set, SetStore};

/// New copies of the sets an element batch changed, ready to be swapped into every engine
/// compiled from the same ruleset ([`Engine::apply_set_update`]). Cheap to clone (the sets are
/// shared).
#[derive(Debug, Clone, Default)]
pub struct SetUpdate {
    sets: Vec<(SetId, Arc<Set>)>,
    /// Changes to sets that set statements change (in the engines' shared state).
    dynamic: Vec<(u32, DynOp)>,
    /// The counted elements of sets whose elements count, after the batch: (counter use site,
    /// its list, [`crate::CountedElems`]), made once on the control side and swapped in by
    /// every engine.
    counted: Vec<(u32, Arc<CountedElems>)>,
    /// For an update made from the running sets (a full index build,
    /// [`SetUpdate::reindexed`]): the copy each entry replaces; an engine whose set is no
    /// longer that copy (a newer change came first) keeps its own.
    replaces: Vec<Option<Arc<Set>>>,
}

/// An element command on a set in the engines' shared state.
#[derive(Debug, Clone)]
enum DynOp {
    Insert(Vec<u8>, Elem),
    Remove(Vec<u8>),
    Clear,
}

impl SetUpdate {
    /// The same sets with their field index built anew (no overlay of changes: lookups as
    /// fast as in a set built at once), to swap in where the sets are still these copies.
    /// Costs a copy and a full index build per set (about 150 ns per element): run it off the
    /// data path and outside the control side's lock.
    pub fn reindexed(&self) -> SetUpdate {
        let mut out = SetUpdate::default();
        for (id, s) in &self.sets {
            let mut copy = Set::clone(s);
            if let SetStore::Pipapo(p) = &mut copy.store {
                p.build_index();
            }
            out.sets.push((*id, Arc::new(copy)));
            out.replaces.push(Some(Arc::clone(s)));
        }
        out
    }

    /// How many sets it replaces.
    pub fn len(&self) -> usize {
        self.sets.len()
    }

    /// `true` when it replaces no set and changes no set of the shared state.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty() && self.dynamic.is_empty()
    }
}

impl Engine {
    /// The sets of this engine's program with the element batch `txn` applied (its ruleset
    /// has the changes made; each change says where in its set it happened,
    /// `wasp_ruleset::ElementTxn::ops_at`). `now_ns` is the packet clock now (an added
    /// element's `timeout` counts from it, as the kernel's from the commit). `None` when a
    /// change needs a whole compile (see the module documentation); the engine is unchanged
    /// either way.
    pub fn set_update(&self, txn: &ElementTxn<'_>, now_ns: u64) -> Option<SetUpdate> {
        let rs = txn.ruleset();
        let now = now_ns.saturating_sub(self.epoch.unwrap_or(now_ns));
        let mut work: BTreeMap<SetId, Set> = BTreeMap::new();
        let mut dynamic = Vec::new();
        // The counted elements of each set whose elements count, as the batch leaves them.
        let mut counted: BTreeMap<u32, CountedElems> = BTreeMap::new();
        for (ti, si, op, at) in txn.ops_at() {
            let id = *self.prog.named_sets.get(ti)?.get(si)?;
            let decl = rs.tables.get(ti)?.sets.get(si)?;
            let widths: Vec<u8> = decl.key.iter().map(|&d| dtype_width(d)).collect();
            if let SetStore::Dynamic(d) = self.prog.sets.get(id.idx())?.store {
                let op = match op {
                    ElementOp::Flush => DynOp::Clear,
                    ElementOp::Add(e) if e.is_catch_all() => return None,
                    ElementOp::Delete(e) if e.is_catch_all() => return None,
                    ElementOp::Add(e) => {
                        let (lo, hi) = key_bounds(rs, e, &widths)?;
                        // Such a set holds exact keys and no verdicts.
                        let mut no_verdicts: Box<[compiled::Verdict]> = Box::new([]);
                        let elem = compiled_elem(&mut no_verdicts, e, decl.timeout_ms, now, 0)?;
                        if lo != hi || !no_verdicts.is_empty() {
                            return None;
                        }
                        DynOp::Insert(lo, elem)
                    }
                    ElementOp::Delete(e) => DynOp::Remove(key_bounds(rs, e, &widths)?.0),
                };
                dynamic.push((d, op));
                continue;
            }
            let set = match work.entry(id) {
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => {
                    let s = self.prog.sets.get(id.idx())?;
                    if matches!(s.store, SetStore::Dynamic(_) | SetStore::Ranges(_)) {
                        return None;
                    }
                    v.insert(Set::clone(s))
                }
            };
            if let Some(site) = set.counter_site {
                let list = match counted.entry(site) {
                    std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                    std::collections::btree_map::Entry::Vacant(v) => {
                        v.insert(self.counted_elems(site)?.clone())
                    }
                };
                match (op, at) {
                    (ElementOp::Delete(_), Some(at)) => list.remove(at),
                    (ElementOp::Add(_), Some(_)) => {}
                    // Every element goes, with its counts; the slots stay given.
                    (ElementOp::Flush, _) => list.elements.clear(),
                    // A change without its place.
                    _ => return None,
                }
            }
            match op {
                ElementOp::Add(e) => {
                    let counter = match set.counter_site {
                        Some(site) if e.counter => {
                            if e.packets() != 0 || e.bytes() != 0 {
                                return None;
                            }
                            let list = counted.get_mut(&site)?;
                            let slot = list.next_slot;
                            list.next_slot = slot.checked_add(1)?;
                            list.add(at?, slot);
                            slot
                        }
                        _ => 0,
                    };
                    let elem = compiled_elem(&mut set.verdicts, e, decl.timeout_ms, now, counter)?;
                    if e.is_catch_all() {
                        set.catch_all = Some(elem);
                    } else {
                        let (lo, hi) = key_bounds(rs, e, &widths)?;
                        set.insert(&lo, &hi, elem, now)?;
                    }
                }
                ElementOp::Delete(e) if e.is_catch_all() => set.catch_all = None,
                ElementOp::Delete(e) => {
                    let (lo, hi) = key_bounds(rs, e, &widths)?;
                    set.remove(&lo, &hi, now)?;
                }
                ElementOp::Flush => set.flush(),
            }
        }
        let sets = work
            .into_iter()
            .map(|(id, mut s)| {
                // Lookups are as fast after a change as before it: the index is kept, with
                // an index of what changed since it was built (`Pipapo::refresh_index`).
                if let SetStore::Pipapo(p) = &mut s.store {
                    p.refresh_index();
                }
                (id, Arc::new(s))
            })
            .collect();
        Some(SetUpdate {
            sets,
            dynamic,
            counted: counted
                .into_iter()
                .map(|(site, list)| (site, Arc::new(list)))
                .collect(),
            replaces: Vec::new(),
        })
    }

    /// Apply `u`'s changes to the sets that set statements change: they live in the state
    /// every engine of the ruleset shares, so this runs once (on the control side's engine),
    /// and lookups see each change at once.
    pub fn apply_dynamic_update(&self, u: &SetUpdate) {
        for (d, op) in &u.dynamic {
            let Some(set) = self.prog.stateful.dynsets.get(*d as usize) else {
                continue;
            };
            match op {
                DynOp::Insert(k, e) => set.insert(k, *e),
                DynOp::Remove(k) => set.remove(k),
                DynOp::Clear => set.clear(),
            }
        }
    }

    /// Changes (elements added and removed) that the sets' field indexes carry as overlays,
    /// summed over the sets: 0 when every index is as built at once.
    pub fn index_lag(&self) -> usize {
        self.prog
            .sets
            .iter()
            .map(|s| match &s.store {
                SetStore::Pipapo(p) => p.index_lag(),
                _ => 0,
            })
            .sum()
    }

    /// The sets whose field index carries an overlay of changes (lookups of changed elements
    /// cost a second probe), as an update of themselves: [`SetUpdate::reindexed`] makes the
    /// copies without the overlay. `None` when every index is current.
    pub fn lagging_sets(&self) -> Option<SetUpdate> {
        let sets: Vec<(SetId, Arc<Set>)> = self
            .prog
            .sets
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(&s.store, SetStore::Pipapo(p) if p.index_lag() > 0))
            .map(|(i, s)| (SetId(i as u32), Arc::clone(s)))
            .collect();
        (!sets.is_empty()).then(|| SetUpdate {
            sets,
            dynamic: Vec::new(),
            counted: Vec::new(),
            replaces: Vec::new(),
        })
    }

    /// Use the compiled sets of `from`, an engine compiled from the same ruleset (the daemon's
    /// control engine): one copy of every set for all the workers instead of one each. Returns
    /// `false`, keeping its own, when the two programs' sets differ in number, back-end or
    /// element count.
    pub fn share_sets(&mut self, from: &Engine) -> bool {
        let same = self.prog.named_sets == from.prog.named_sets
            && self.prog.sets.len() == from.prog.sets.len()
            && self.prog.sets.iter().zip(&from.prog.sets).all(|(a, b)| {
                std::mem::discriminant(&a.store) == std::mem::discriminant(&b.store)
                    && a.elems.len() == b.elems.len()
                    && a.counter_site == b.counter_site
            });
        if same {
            self.prog.sets.clone_from_slice(&from.prog.sets);
        }
        same
    }

    /// The counted elements of use site `site` (a named set's element counters).
    fn counted_elems(&self, site: u32) -> Option<&CountedElems> {
        match self.prog.counter_uses.get(site as usize)? {
            Some(crate::ext::CounterUse::Set { elements, .. }) => Some(elements),
            _ => None,
        }
    }

    /// Swap in the sets of `u` (made by [`Engine::set_update`] from an engine compiled from the
    /// same ruleset as this one). Between two vectors: a lookup sees the set before or after
    /// the batch, never a part of it. Returns the sets it replaced, for the caller to drop
    /// off the data path (freeing a large set costs about a millisecond per 100 000 keys).
    #[must_use = "drop the replaced sets off the data path"]
    pub fn apply_set_update(&mut self, u: &SetUpdate) -> SetUpdate {
        for (site, list) in &u.counted {
            if let Some(Some(crate::ext::CounterUse::Set { elements, .. })) =
                self.prog.counter_uses.get_mut(*site as usize)
            {
                *elements = Arc::clone(list);
            }
        }
        let mut old = SetUpdate::default();
        for (i, (id, s)) in u.sets.iter().enumerate() {
            let Some(slot) = self.prog.sets.get_mut(id.idx()) else {
                continue;
            };
            if let Some(Some(was)) = u.replaces.get(i)
                && !Arc::ptr_eq(slot, was)
            {
                continue;
            }
            old.sets.push((*id, std::mem::replace(slot, Arc::clone(s))));
        }
        old
    }
}

/// The element's start and end keys (each field's bounds concatenated, big-endian).
pub(crate) fn key_bounds(rs: &Ruleset, e: &SetElem, widths: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    if e.key.len() != widths.len() {
        return None;
    }
    let key_len: usize = widths.iter().map(|&w| usize::from(w)).sum();
    let (mut lo, mut hi) = (Vec::with_capacity(key_len), Vec::with_capacity(key_len));
    for (part, &w) in e.key.iter().zip(widths) {
        let (a, b) = part_bounds(rs, part, w, e.span).ok()?;
        let wb = usize::from(w);
        lo.extend_from_slice(&a.to_be_bytes()[16 - wb..]);
        hi.extend_from_slice(&b.to_be_bytes()[16 - wb..]);
    }
    Some((lo, hi))
}

/// The compiled data of an added element: its value or verdict (found in, or appended to, the
/// set's `verdicts`), its expiry (`expires`, else its `timeout`, else the set's, from `now`).
fn compiled_elem(
    verdicts: &mut Box<[compiled::Verdict]>,
    e: &SetElem,
    set_timeout: Option<u64>,
    now: u64,
    counter: u32,
) -> Option<Elem> {
    if e.counter && counter == 0 {
        return None;
    }
    let (value, verdict) = match &e.data {
        None => (0, 0),
        // An address is a NAT target of the program (`crate::compile::nat_valued`).
        Some(ElemData::Value(v))
            if v.bytes.len() <= 4
                && !matches!(
                    v.dtype,
                    wasp_ruleset::model::DataType::Ipv4Addr
                        | wasp_ruleset::model::DataType::Ipv6Addr
                ) =>
        {
            let x = v.bytes.iter().fold(0u32, |a, &b| (a << 8) | u32::from(b));
            (x, 0)
        }
        Some(ElemData::Verdict(v)) => {
            let c = match v {
                Verdict::Accept => compiled::Verdict::Accept,
                Verdict::Drop => compiled::Verdict::Drop,
                Verdict::Continue => compiled::Verdict::Continue,
                Verdict::Return => compiled::Verdict::Return,
                Verdict::Jump(_) | Verdict::Goto(_) => return None,
            };
            let mut vs = std::mem::take(verdicts).into_vec();
            let at = vs.iter().position(|x| *x == c).unwrap_or_else(|| {
                vs.push(c);
                vs.len() - 1
            });
            *verdicts = vs.into();
            (0, at as u32)
        }
        Some(_) => return None,
    };
    let life_ms = e.expires_ms().or(e.timeout_ms()).or(set_timeout);
    let expires = life_ms.map_or(u64::MAX, |ms| {
        now.saturating_add(ms.saturating_mul(1_000_000))
    });
    Some(Elem {
        verdict,
        value,
        expires,
        counter,
        origin: e.span.file,
    })
}

impl Set {
    /// Add an element of bounds `lo`..=`hi` (the parser has checked it against the kernel's
    /// back-end: an identical element is kept once). `None` when the back-end cannot hold it
    /// (a range in a set of exact keys) or refuses it.
    fn insert(&mut self, lo: &[u8], hi: &[u8], elem: Elem, now: u64) -> Option<()> {
        let at = self.slot_for(elem);
        let ok = match &mut self.store {
            SetStore::Exact(s) => lo == hi && s.insert(lo, at),
            SetStore::Interval(s) => s
                .insert(new_elem(lo, hi, at, elem), InsertMode::Add, now)
                .is_ok(),
            SetStore::Pipapo(p) => p
                .insert(new_elem(lo, hi, at, elem), InsertMode::Add, now)
                .is_ok(),
            SetStore::Dynamic(_) | SetStore::Ranges(_) => false,
        };
        ok.then_some(())
    }

    /// Remove the element of bounds `lo`..=`hi`; its data slot is reused by a later add.
    fn remove(&mut self, lo: &[u8], hi: &[u8], now: u64) -> Option<()> {
        let at = match &mut self.store {
            SetStore::Exact(s) => s.remove(lo)?,
            SetStore::Interval(s) => s.delete(lo, (lo != hi).then_some(hi), now).ok()?.data,
            SetStore::Pipapo(p) => p.delete(lo, now).ok()?.data,
            SetStore::Dynamic(_) | SetStore::Ranges(_) => return None,
        };
        self.release_slot(at);
        Some(())
    }

    /// Remove every element, the catch-all too.
    fn flush(&mut self) {
        match &mut self.store {
            SetStore::Exact(s) => *s = wasp_sets::ExactSet::new(s.key_len()),
            SetStore::Interval(s) => s.flush(),
            SetStore::Pipapo(p) => p.flush(),
            SetStore::Dynamic(_) | SetStore::Ranges(_) => {}
        }
        self.elems.truncate(1);
        self.free.clear();
        self.shared.clear();
        self.catch_all = None;
    }
}

fn new_elem<'k>(lo: &'k [u8], hi: &'k [u8], data: u32, e: Elem) -> NewElem<'k, ()> {
    NewElem {
        start: lo,
        end: (lo != hi).then_some(hi),
        data,
        expires: (e.expires != u64::MAX).then_some(e.expires),
        ext: (),
    }
}

/// Apply the element batch `text` to `rs` and to `e` in place (tests): panics when the batch
/// does not apply or needs a whole compile.
#[cfg(test)]
pub(crate) fn apply_in_place(
    e: &mut Engine,
    rs: &mut Ruleset,
    shadows: &mut wasp_ruleset::SetShadows,
    text: &str,
) {
    let txn = wasp_ruleset::apply_elements(rs, shadows, text, "b.nft")
        .expect(text)
        .expect(text);
    let u = e.set_update(&txn, 0).expect(text);
    txn.commit();
    drop(e.apply_set_update(&u));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets of every back-end the in-place path serves, and a verdict map.
    const RULESET: &str = r#"
table netdev t {
    set c {
        type ipv4_addr . inet_service
        flags interval
        elements = { 10.0.0.0/30 . 1000-2000, 10.0.1.0/24 . 53 }
    }
    set h {
        type ipv4_addr
        elements = { 10.0.0.1, 10.0.0.2 }
    }
    set i {
        type ipv4_addr
        flags interval
        elements = { 10.1.0.0/16, 10.3.0.0-10.3.0.9 }
    }
    map v {
        type ipv4_addr : verdict
        elements = { 10.0.0.1 : drop }
    }
    chain in {
        type filter hook ingress device "eth0" priority 0; policy accept;
        ip daddr . udp dport @c drop
        ip daddr @h drop
        ip daddr @i drop
        ip daddr vmap @v
    }
}
"#;

    /// What every named set of `e` answers for each key of `keys` (per set: the element's
    /// verdict and value, or none).
    fn answers(e: &Engine, keys: &[Vec<u8>]) -> Vec<Option<(compiled::Verdict, u32)>> {
        let mut out = Vec::new();
        for &id in &e.prog.named_sets[0] {
            let s = &e.prog.sets[id];
            let w = if id == e.prog.named_sets[0][0] { 6 } else { 4 };
            for k in keys {
                out.push(s.lookup(&k[..w], 0).map(|x| {
                    (
                        s.verdicts
                            .get(x.verdict as usize)
                            .copied()
                            .unwrap_or(compiled::Verdict::Continue),
                        x.value,
                    )
                }));
            }
        }
        out
    }

    fn key(a: [u8; 4], port: u16) -> Vec<u8> {
        let mut k = a.to_vec();
        k.extend_from_slice(&port.to_be_bytes());
        k
    }

    /// A run of element batches applied in place answers every lookup as a whole compile of
    /// the resulting ruleset does, batch after batch (adds, deletes, flushes, catch-all,
    /// verdicts new to the map).
    #[test]
    fn in_place_batches_answer_as_a_whole_compile() {
        let mut rs = wasp_ruleset::parse_str(RULESET, "t.nft").unwrap();
        let mut shadows = wasp_ruleset::SetShadows::default();
        let mut live = Engine::compile(&rs).unwrap();
        let batches = [
            "add element netdev t c { 10.0.2.0/24 . 1-100 }",
            "delete element netdev t c { 10.0.0.0/30 . 1000-2000 }",
            "add element netdev t h { 10.0.0.3, 10.0.0.4 }\ndelete element netdev t h { 10.0.0.1 }",
            "add element netdev t i { 10.2.0.0/16 }\ndelete element netdev t i { 10.1.0.0/16 }",
            "add element netdev t v { 10.0.0.2 : accept, 10.0.0.3 : return }",
            "delete element netdev t v { 10.0.0.1 }",
            "add element netdev t v { * : drop }",
            "flush set netdev t h",
            "add element netdev t h { 10.0.0.1 }",
            "add element netdev t c { 10.0.0.0/30 . 1000-2000 }",
        ];
        let mut keys = Vec::new();
        for a in [
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            [10, 0, 0, 3],
            [10, 0, 0, 4],
            [10, 0, 1, 9],
            [10, 0, 2, 7],
            [10, 1, 2, 3],
            [10, 2, 2, 3],
            [10, 3, 0, 5],
            [10, 3, 0, 10],
        ] {
            for p in [53, 50, 1500, 2001] {
                keys.push(key(a, p));
            }
        }
        for b in batches {
            let txn = wasp_ruleset::apply_elements(&mut rs, &mut shadows, b, "b.nft")
                .unwrap()
                .expect("element commands only");
            let u = live.set_update(&txn, 0).expect(b);
            txn.commit();
            drop(live.apply_set_update(&u));
            let whole = Engine::compile(&rs).unwrap();
            assert_eq!(answers(&live, &keys), answers(&whole, &keys), "after {b}");
        }
        // The pipapo set is indexed again after its changes.
        let SetStore::Pipapo(p) = &live.prog.sets[live.prog.named_sets[0][0]].store else {
            panic!("pipapo")
        };
        assert!(p.has_index());
    }

    /// Plain elements of one file share one data slot through builds, adds, deletes and
    /// flushes (the slot says which file they came from, and is freed with the last of
    /// them); an element that carries data has its own.
    #[test]
    fn plain_elements_of_a_file_share_one_data_slot() {
        let mut rs = wasp_ruleset::parse_str(RULESET, "t.nft").unwrap();
        let mut shadows = wasp_ruleset::SetShadows::default();
        let mut live = Engine::compile(&rs).unwrap();
        let set = |e: &Engine, i: usize| e.prog.sets[e.prog.named_sets[0][i]].clone();
        let slots = |e: &Engine, i: usize| set(e, i).elems.len();
        // c, h and i are plain; v's element carries a verdict of its own (index 0: plain).
        assert_eq!(
            (slots(&live, 0), slots(&live, 1), slots(&live, 2)),
            (1, 1, 1)
        );
        apply_in_place(
            &mut live,
            &mut rs,
            &mut shadows,
            "add element netdev t h { 10.0.0.7, 10.0.0.8 }\nadd element netdev t v { 10.0.0.5 : accept }",
        );
        let batch = rs.sources.last().unwrap().id;
        assert_ne!(batch, 0);
        // The batch's two plain elements share one slot of their own.
        assert_eq!((slots(&live, 1), slots(&live, 3)), (2, 2));
        let h = set(&live, 1);
        let seven = *h.lookup(&[10, 0, 0, 7], 0).unwrap();
        assert!(seven.is_plain() && seven.origin == batch);
        assert_eq!(h.lookup(&[10, 0, 0, 8], 0), Some(&seven));
        assert_eq!(h.lookup(&[10, 0, 0, 1], 0), Some(&Elem::PLAIN));
        // The slot goes with the last of its elements, and a later element takes it.
        apply_in_place(
            &mut live,
            &mut rs,
            &mut shadows,
            "delete element netdev t h { 10.0.0.7 }",
        );
        assert_eq!(set(&live, 1).shared.get(&batch).map(|s| s.1), Some(1));
        apply_in_place(
            &mut live,
            &mut rs,
            &mut shadows,
            "delete element netdev t h { 10.0.0.8, 10.0.0.1 }",
        );
        let h = set(&live, 1);
        assert!(h.shared.is_empty());
        assert_eq!(h.free, [1]);
        apply_in_place(
            &mut live,
            &mut rs,
            &mut shadows,
            "add element netdev t h { 10.0.0.6 }",
        );
        let h = set(&live, 1);
        let six = *h.lookup(&[10, 0, 0, 6], 0).unwrap();
        assert_eq!(
            (h.elems.len(), six.origin),
            (2, rs.sources.last().unwrap().id)
        );
        apply_in_place(&mut live, &mut rs, &mut shadows, "flush set netdev t h");
        assert_eq!(slots(&live, 1), 1);
        let h = set(&live, 1);
        assert!(h.is_empty() && h.shared.is_empty() && h.lookup(&[10, 0, 0, 6], 0).is_none());
        apply_in_place(
            &mut live,
            &mut rs,
            &mut shadows,
            "add element netdev t h { 10.0.0.9 }",
        );
        let h = set(&live, 1);
        assert!(h.lookup(&[10, 0, 0, 9], 0).is_some_and(Elem::is_plain));
    }

    /// A full index build made from the running sets replaces them only where no newer change
    /// came in between, and leaves no overlay.
    #[test]
    fn a_reindexed_update_applies_only_to_the_copies_it_was_made_from() {
        let mut rs = wasp_ruleset::parse_str(RULESET, "t.nft").unwrap();
        let mut shadows = wasp_ruleset::SetShadows::default();
        let mut live = Engine::compile(&rs).unwrap();
        // A small set keeps an overlay only when told to.
        let c = live.prog.named_sets[0][0];
        if let SetStore::Pipapo(p) = &mut live.prog.sets[c].store {
            p.set_overlay_min(0);
        }
        let mut other = Engine::compile(&rs).unwrap();
        assert!(other.share_sets(&live));
        let step =
            |rs: &mut Ruleset, shadows: &mut wasp_ruleset::SetShadows, live: &Engine, b: &str| {
                let txn = wasp_ruleset::apply_elements(rs, shadows, b, "b.nft")
                    .unwrap()
                    .unwrap();
                let u = live.set_update(&txn, 0).unwrap();
                txn.commit();
                u
            };
        let u = step(
            &mut rs,
            &mut shadows,
            &live,
            "add element netdev t c { 10.9.0.0/24 . 7 }",
        );
        drop(live.apply_set_update(&u));
        drop(other.apply_set_update(&u));
        let lag = live.lagging_sets().expect("the pipapo set has an overlay");
        assert_eq!(lag.len(), 1);
        let fresh = lag.reindexed();
        // `other` takes a newer change first: the rebuilt copy is stale there.
        let u2 = step(
            &mut rs,
            &mut shadows,
            &live,
            "add element netdev t c { 10.9.1.0/24 . 7 }",
        );
        drop(other.apply_set_update(&u2));
        assert!(
            other.apply_set_update(&fresh).is_empty(),
            "stale: not applied"
        );
        // `live` has not: it takes the rebuilt copy, with no overlay left.
        assert_eq!(live.apply_set_update(&fresh).len(), 1);
        assert!(live.lagging_sets().is_none());
        let keys = [
            key([10, 9, 0, 1], 7),
            key([10, 9, 1, 1], 7),
            key([10, 0, 1, 1], 53),
        ];
        let c = live.prog.named_sets[0][0];
        assert!(live.prog.sets[c].lookup(&keys[0], 0).is_some());
        assert!(other.prog.sets[c].lookup(&keys[1], 0).is_some());
        assert!(other.prog.sets[c].lookup(&keys[2], 0).is_some());
    }

    /// A set that set statements change takes element commands in place, in the state the
    /// engines share, and keeps the elements the packets added.
    #[test]
    fn element_commands_change_a_packet_path_set_in_place() {
        let text = "table netdev t {\n set d {\n  type ipv4_addr\n  flags dynamic\n  elements = { 10.0.0.1 }\n }\n chain in {\n  type filter hook ingress device \"eth0\" priority 0;\n  add @d { ip saddr }\n  ip daddr @d drop\n }\n}\n";
        let mut rs = wasp_ruleset::parse_str(text, "t.nft").unwrap();
        let mut shadows = wasp_ruleset::SetShadows::default();
        let mut live = Engine::compile(&rs).unwrap();
        let d = &live.prog.stateful.dynsets[0];
        // An element the packet path added.
        d.insert(&[10, 0, 0, 9], Elem::PLAIN);
        for b in [
            "add element netdev t d { 10.0.0.2 }",
            "delete element netdev t d { 10.0.0.1 }",
        ] {
            let txn = wasp_ruleset::apply_elements(&mut rs, &mut shadows, b, "b.nft")
                .unwrap()
                .unwrap();
            let u = live.set_update(&txn, 0).expect(b);
            txn.commit();
            assert!(
                live.apply_set_update(&u).is_empty(),
                "no set copy: the shared state changes"
            );
            live.apply_dynamic_update(&u);
        }
        let d = &live.prog.stateful.dynsets[0];
        assert!(d.lookup(&[10, 0, 0, 1], 0).is_none());
        assert!(d.lookup(&[10, 0, 0, 2], 0).is_some());
        assert!(
            d.lookup(&[10, 0, 0, 9], 0).is_some(),
            "the packet path's element stays"
        );
        let txn =
            wasp_ruleset::apply_elements(&mut rs, &mut shadows, "flush set netdev t d", "f.nft")
                .unwrap()
                .unwrap();
        let u = live.set_update(&txn, 0).unwrap();
        txn.commit();
        live.apply_dynamic_update(&u);
        assert!(
            live.prog.stateful.dynsets[0]
                .lookup(&[10, 0, 0, 9], 0)
                .is_none()
        );
    }

    /// What the in-place path leaves to a whole compile: a `jump` new to a verdict map, and an
    /// element added with counts written. In a set whose elements count, adds, deletes and a
    /// flush go in place: an add gets a slot never given before, and the site's counted
    /// elements follow the model.
    #[test]
    fn jumps_and_written_counts_take_a_whole_compile() {
        let text = format!(
            "{RULESET}\ntable netdev u {{\n set s {{\n  type ipv4_addr\n  counter\n  elements = {{ 10.0.0.7 }}\n }}\n map m {{\n  type ipv4_addr : verdict\n }}\n chain x {{\n }}\n chain in {{\n  type filter hook ingress device \"eth0\" priority 0;\n  ip saddr @s\n  ip daddr vmap @m\n }}\n}}\n"
        );
        let mut rs = wasp_ruleset::parse_str(&text, "t.nft").unwrap();
        let mut live = Engine::compile(&rs).unwrap();
        let mut shadows = wasp_ruleset::SetShadows::default();
        for b in [
            "add element netdev u s { 10.0.0.5 counter packets 3 bytes 30 }",
            "add element netdev u m { 10.0.0.1 : jump x }",
        ] {
            let before = rs.clone();
            let txn = wasp_ruleset::apply_elements(&mut rs, &mut shadows, b, "b.nft")
                .unwrap()
                .unwrap();
            assert!(live.set_update(&txn, 0).is_none(), "{b}");
            txn.rollback();
            assert_eq!(rs, before, "{b}: rolled back");
        }
        let txn = wasp_ruleset::apply_elements(
            &mut rs,
            &mut shadows,
            "add element netdev u s { 10.0.0.8, 10.0.0.9 }",
            "b.nft",
        )
        .unwrap()
        .unwrap();
        let u = live.set_update(&txn, 0).expect("counted adds go in place");
        txn.commit();
        drop(live.apply_set_update(&u));
        let whole = Engine::compile(&rs).unwrap();
        let sid = live.prog.named_sets[1][0];
        for k in [[10, 0, 0, 7], [10, 0, 0, 8], [10, 0, 0, 9]] {
            assert_eq!(
                live.prog.sets[sid].lookup(&k, 0).map(|e| e.counter),
                whole.prog.sets[sid].lookup(&k, 0).map(|e| e.counter),
                "{k:?}: the counter id a compile gives"
            );
        }
        let uses = |e: &Engine| -> CountedElems {
            e.counter_uses()
                .find_map(|(_, u)| match u {
                    crate::ext::CounterUse::Set { elements, .. } => {
                        Some(CountedElems::clone(elements))
                    }
                    _ => None,
                })
                .unwrap_or_default()
        };
        assert_eq!(uses(&live), uses(&whole));
        assert_eq!(uses(&live).elements, [(0, 1), (1, 2), (2, 3)]);
        // A delete from the middle: .8's slot goes, .9 moves down and keeps its slot; the
        // next add gets slot 4, never given before.
        for b in [
            "delete element netdev u s { 10.0.0.8 }",
            "add element netdev u s { 10.0.0.10 }",
        ] {
            apply_in_place(&mut live, &mut rs, &mut shadows, b);
        }
        assert_eq!(uses(&live).elements, [(0, 1), (1, 3), (2, 4)]);
        assert_eq!(uses(&live).next_slot, 5);
        for (k, slot) in [([10, 0, 0, 7], 1), ([10, 0, 0, 9], 3), ([10, 0, 0, 10], 4)] {
            assert_eq!(
                live.prog.sets[sid].lookup(&k, 0).map(|e| e.counter),
                Some(slot)
            );
        }
        assert!(live.prog.sets[sid].lookup(&[10, 0, 0, 8], 0).is_none());
        // A flush empties the list and keeps the slots given; the next add gets slot 5.
        for b in [
            "flush set netdev u s",
            "add element netdev u s { 10.0.0.7 }",
        ] {
            apply_in_place(&mut live, &mut rs, &mut shadows, b);
        }
        assert_eq!(uses(&live).elements, [(0, 5)]);
        assert_eq!(
            live.prog.sets[sid]
                .lookup(&[10, 0, 0, 7], 0)
                .map(|e| e.counter),
            Some(5)
        );
        assert!(live.prog.sets[sid].lookup(&[10, 0, 0, 9], 0).is_none());
    }
}
