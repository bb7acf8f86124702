//! Compiled sets and maps in the back-end the kernel would pick (`nft_select_set_ops`): exact
//! keys in a hash, one interval field in the rbtree-semantics [`IntervalSet`], concatenated
//! intervals in [`Pipapo`] (looked up through its field index, built once the set is filled:
//! `Pipapo::build_index`, and kept through element commands: `crate::set_update`). Every
//! back-end stores the element's index into [`Set::elems`], which holds its verdict (verdict
//! maps), its expiry and its counter.
//!
//! Time: element expiries are nanoseconds after the engine's epoch (the ruleset's load, see
//! `Engine::set_epoch`); a lookup at `now` (same clock) misses an element with `now >= expiry`,
//! as the kernel's `nft_set_elem_expired`.

use wasp_sets::{ExactSet, InsertMode, IntervalSet, NewElem, Pipapo, RangeList};

use crate::compiled;

/// Where a set's keys live.
#[derive(Debug, Clone)]
pub(crate) enum SetStore {
    /// Exact keys (`nft_set_hash`).
    Exact(ExactSet),
    /// One interval field (`nft_set_rbtree` semantics).
    Interval(IntervalSet),
    /// Concatenated intervals (`nft_set_pipapo`).
    Pipapo(Pipapo),
    /// A set that set statements change: index into [`crate::Stateful`]'s dynamic sets
    /// ([`crate::dynset::DynSet`]); looked up through [`crate::compiled::Program::lookup`].
    Dynamic(u32),
    /// Ranges the kernel back-ends would refuse to hold together (only reachable for anonymous
    /// sets the ruleset parser did not check): first match in order.
    Ranges(RangeList),
}

/// One element's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Elem {
    /// Index into [`Set::verdicts`] for a verdict map, else 0.
    pub verdict: u32,
    /// Data of a map of 32-bit values (`type ipv4_addr : mark`), else 0.
    pub value: u32,
    /// Expiry in ns after the epoch; `u64::MAX` for never.
    pub expires: u64,
    /// The element's counter slot at its set's counter site (`Set::counter_site`;
    /// [`crate::CountedElems`]), 0 when it does not count.
    pub counter: u32,
    /// The source file the element came from ([`wasp_ruleset::model::Span::file`]; 0 for an
    /// anonymous set's): what a listing from the set says of it
    /// ([`crate::held::HeldSet`]). Lookups do not read it.
    pub origin: u32,
}

impl Elem {
    /// What an element of a set holds that carries nothing: no verdict or value, no expiry, no
    /// counter, of file 0. Every such element shares slot [`PLAIN_SLOT`] of its set's
    /// [`Set::elems`].
    pub const PLAIN: Elem = Elem {
        verdict: 0,
        value: 0,
        expires: u64::MAX,
        counter: 0,
        origin: 0,
    };

    /// `true` when it carries nothing but its origin: the elements of one origin share a
    /// slot ([`Set::slot_for`]).
    pub fn is_plain(&self) -> bool {
        Elem { origin: 0, ..*self } == Elem::PLAIN
    }
}

/// The slot of [`Set::elems`] that holds [`Elem::PLAIN`], shared by every element that is
/// plain and of file 0 (a large set of plain keys holds one `Elem` per file its elements came
/// from, not one per element).
pub(crate) const PLAIN_SLOT: u32 = 0;

/// A set or map in its back-end, with its elements' data and a verdict map's verdicts.
#[derive(Debug, Clone)]
pub(crate) struct Set {
    pub store: SetStore,
    /// The elements' data, by the slot each back-end element stores: slot [`PLAIN_SLOT`]
    /// holds [`Elem::PLAIN`] for every plain element, the others one element each.
    pub elems: Vec<Elem>,
    pub verdicts: Box<[compiled::Verdict]>,
    /// The counter use site of the set's element counters, when an element counts.
    pub counter_site: Option<u32>,
    /// The catch-all element `*`: what a lookup that no element of the back-end holds finds
    /// (`nft_set_catchall_lookup`, which the kernel's `nft_lookup_eval` tries after the
    /// back-end misses), while it lives.
    pub catch_all: Option<Elem>,
    /// Slots of [`Set::elems`] that removed elements left, for the next added ones.
    pub free: Vec<u32>,
    /// The shared slots of plain elements of a file other than 0: origin -> (slot, elements
    /// that use it). A slot is freed when its last element goes.
    pub shared: std::collections::BTreeMap<u32, (u32, u32)>,
}

/// An element to add: per-field bounds concatenated, and its data.
pub(crate) struct ElemIn {
    pub lo: Vec<u8>,
    pub hi: Vec<u8>,
    pub elem: Elem,
}

impl Set {
    /// Build a set of keys of `lens` bytes per field. `exact` when every element is a single
    /// key. An element identical to an earlier one keeps the earlier (the kernel keeps the
    /// first); elements the kernel back-end refuses together (overlaps the ruleset parser lets
    /// through in anonymous sets) make the set a first-match range list.
    /// Returns `Err(index)` of an element whose range is inverted.
    pub fn build(
        lens: &[usize],
        exact: bool,
        elems: Vec<ElemIn>,
        verdicts: Box<[compiled::Verdict]>,
    ) -> Result<Set, usize> {
        let key_len: usize = lens.iter().sum();
        for (i, e) in elems.iter().enumerate() {
            if e.hi < e.lo && lens.len() == 1 {
                return Err(i);
            }
        }
        let mut out = Set {
            store: SetStore::Exact(ExactSet::new(key_len)),
            elems: vec![Elem::PLAIN],
            verdicts,
            counter_site: None,
            catch_all: None,
            free: Vec::new(),
            shared: Default::default(),
        };
        if exact {
            let mut s = ExactSet::new(key_len);
            for e in &elems {
                if s.insert(&e.lo, out.next_slot(e.elem)) {
                    out.take_slot(e.elem);
                }
            }
            out.store = SetStore::Exact(s);
            out.elems.shrink_to_fit();
            return Ok(out);
        }
        let tried = if lens.len() == 1 {
            IntervalSet::new(key_len).ok().and_then(|mut s| {
                for e in &elems {
                    let n = new_elem(e, out.next_slot(e.elem));
                    let before = s.len();
                    s.insert(n, InsertMode::Add, 0).ok()?;
                    if s.len() != before {
                        out.take_slot(e.elem);
                    }
                }
                s.shrink_to_fit();
                Some(SetStore::Interval(s))
            })
        } else {
            Pipapo::new(lens).ok().and_then(|mut s| {
                for e in &elems {
                    let n = new_elem(e, out.next_slot(e.elem));
                    let before = s.len();
                    s.insert(n, InsertMode::Add, 0).ok()?;
                    if s.len() != before {
                        out.take_slot(e.elem);
                    }
                }
                // The set is complete: drop the tables' growth slack, and index it for
                // lookups (element commands keep the index current: `Pipapo::refresh_index`).
                s.shrink_to_fit();
                s.build_index();
                Some(SetStore::Pipapo(s))
            })
        };
        out.elems.shrink_to_fit();
        match tried {
            Some(store) => out.store = store,
            None => {
                out.elems.truncate(1);
                out.shared.clear();
                let mut r = RangeList::new(lens);
                for (i, e) in elems.iter().enumerate() {
                    if !r.insert(&e.lo, &e.hi, out.next_slot(e.elem)) {
                        return Err(i);
                    }
                    out.take_slot(e.elem);
                }
                out.store = SetStore::Ranges(r);
            }
        }
        Ok(out)
    }

    /// The slot an element holding `elem` gets when built at once: the shared plain slot of
    /// its file, or the next one ([`Set::take_slot`] takes it).
    fn next_slot(&self, elem: Elem) -> u32 {
        if elem == Elem::PLAIN {
            return PLAIN_SLOT;
        }
        match self.shared.get(&elem.origin) {
            Some(&(slot, _)) if elem.is_plain() => slot,
            _ => self.elems.len() as u32,
        }
    }

    /// Take the slot [`Set::next_slot`] gave for `elem`.
    fn take_slot(&mut self, elem: Elem) {
        let slot = self.next_slot(elem);
        self.use_slot(elem, slot);
    }

    /// The slot an added element holding `elem` gets: its file's shared slot when plain, else
    /// one a removal freed, else a new one.
    pub(crate) fn slot_for(&mut self, elem: Elem) -> u32 {
        if elem == Elem::PLAIN {
            return PLAIN_SLOT;
        }
        let slot = match self.shared.get(&elem.origin) {
            Some(&(slot, _)) if elem.is_plain() => slot,
            _ => match self.free.pop() {
                Some(i) => {
                    self.elems[i as usize] = elem;
                    i
                }
                None => self.elems.len() as u32,
            },
        };
        self.use_slot(elem, slot);
        slot
    }

    /// Count a use of `slot` by an element holding `elem` (a new slot is pushed).
    fn use_slot(&mut self, elem: Elem, slot: u32) {
        if slot == PLAIN_SLOT {
            return;
        }
        if slot as usize == self.elems.len() {
            self.elems.push(elem);
        }
        if elem.is_plain() {
            self.shared.entry(elem.origin).or_insert((slot, 0)).1 += 1;
        }
    }

    /// The element that used `slot` is gone: the slot is freed unless other elements share it.
    pub(crate) fn release_slot(&mut self, slot: u32) {
        if slot == PLAIN_SLOT {
            return;
        }
        let Some(e) = self.elems.get(slot as usize) else {
            return;
        };
        if e.is_plain()
            && let Some(users) = self.shared.get_mut(&e.origin)
        {
            users.1 -= 1;
            if users.1 > 0 {
                return;
            }
            self.shared.remove(&e.origin);
        }
        self.free.push(slot);
    }

    /// The live element holding `key` at `now` (ns after the epoch): the back-end's, else
    /// the live catch-all element (an expired back-end element falls through to it too, as
    /// the kernel's back-ends skip expired elements).
    #[inline]
    pub fn lookup(&self, key: &[u8], now: u64) -> Option<&Elem> {
        self.lookup_backend(key, now)
            .or_else(|| self.catch_all.as_ref().filter(|e| now < e.expires))
    }

    /// The live element of the back-end holding `key` at `now`.
    #[inline]
    fn lookup_backend(&self, key: &[u8], now: u64) -> Option<&Elem> {
        let i = match &self.store {
            SetStore::Exact(s) => s.get(key)?,
            SetStore::Interval(s) => s.elem(s.lookup(key, now)?)?.data,
            SetStore::Pipapo(s) => s.elem(s.lookup_index(key, now)?)?.data,
            SetStore::Ranges(r) => r.get(key)?,
            SetStore::Dynamic(_) => return None,
        };
        let e = self.elems.get(i as usize)?;
        (now < e.expires).then_some(e)
    }

    /// The element of bounds `lo`..=`hi` (a single key: `lo == hi`), live or expired; `None`
    /// when the set holds no such element (or keeps its elements elsewhere: packet-path sets,
    /// range lists).
    pub(crate) fn element_at(&self, lo: &[u8], hi: &[u8]) -> Option<&Elem> {
        // At time 0 no element has expired: the lookups find expired ones too.
        let i = match &self.store {
            SetStore::Exact(s) if lo == hi => s.get(lo)?,
            SetStore::Interval(s) => {
                let e = s.elem(s.lookup(lo, 0)?)?;
                (e.start == lo && e.end == hi).then_some(e.data)?
            }
            SetStore::Pipapo(s) => {
                let e = s.elem(s.lookup_index(lo, 0)?)?;
                (e.start == lo && e.end == hi).then_some(e.data)?
            }
            _ => return None,
        };
        self.elems.get(i as usize)
    }

    /// The earliest expiry (ns after the epoch) of the elements the set holds, the catch-all
    /// included; `u64::MAX` when none expires. One pass over the element slots (a plain
    /// element has none of its own).
    pub(crate) fn earliest_expiry(&self) -> u64 {
        let freed: std::collections::HashSet<u32> = self.free.iter().copied().collect();
        self.elems
            .iter()
            .enumerate()
            .filter(|(i, _)| freed.is_empty() || !freed.contains(&(*i as u32)))
            .map(|(_, e)| e.expires)
            .chain(self.catch_all.map(|c| c.expires))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// `true` when the set has no element (not even a catch-all).
    pub fn is_empty(&self) -> bool {
        let stored = match &self.store {
            SetStore::Exact(s) => s.len(),
            SetStore::Interval(s) => s.len(),
            SetStore::Pipapo(s) => s.len(),
            SetStore::Ranges(r) => r.len(),
            // Elements the packet path adds come and go: never taken as empty.
            SetStore::Dynamic(_) => 1,
        };
        stored == 0 && self.catch_all.is_none()
    }
}

fn new_elem(e: &ElemIn, data: u32) -> NewElem<'_, ()> {
    NewElem {
        start: &e.lo,
        end: (e.lo != e.hi).then_some(&e.hi[..]),
        data,
        expires: (e.elem.expires != u64::MAX).then_some(e.elem.expires),
        ext: (),
    }
}
