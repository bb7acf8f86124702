//! Single-field interval sets with the kernel's rbtree semantics (`nft_set_rbtree`): no two
//! live elements may overlap. An identical element is [`SetError::Exists`] (success for
//! `add`, an error for `create`); any other overlap, including containing or being contained
//! by an element, is [`SetError::Overlap`]. Delete needs the exact start and end; get finds the
//! element containing a point. Storage is a sorted array of disjoint ranges searched by binary
//! search (the kernel's 2026 rbtree rework also moved to a binary-search array).
//!
//! Checked on the local kernel (nft 1.0.6, `inet_service` `flags interval`): the 15 vectors of
//! nftables' `0044interval_overlap_0` (test `c09_single_field_vectors`), delete of a point or
//! sub-range inside an element is ENOENT, get of a point returns the containing range.
//!
//! Element storage is flat (keys in one byte array, one fixed-size slot per element): a copy
//! of the set (every transaction copies the set it changes) copies a few buffers and
//! allocates nothing per element.

use crate::grow::room;
use crate::pipapo::expand::be_value;
use crate::pipapo::{ElemHandle, InsertMode, NewElem, SetError};

/// An interval element taken out of the set ([`IntervalSet::delete`]).
#[derive(Debug, Clone)]
pub struct IntervalElem<X> {
    /// Start key (field bytes, big-endian).
    pub start: Box<[u8]>,
    /// End key (inclusive).
    pub end: Box<[u8]>,
    /// Element data (map value or verdict index).
    pub data: u32,
    /// Expiry, `None` for never (`now >= expires` is expired).
    pub expires: Option<u64>,
    /// Extension slot for stateful expressions.
    pub ext: X,
}

/// A stored interval element, borrowed from the set.
#[derive(Debug, Clone, Copy)]
pub struct IntervalRef<'a, X> {
    /// Start key (field bytes, big-endian).
    pub start: &'a [u8],
    /// End key (inclusive).
    pub end: &'a [u8],
    /// Element data (map value or verdict index).
    pub data: u32,
    /// Expiry, `None` for never (`now >= expires` is expired).
    pub expires: Option<u64>,
    /// Extension slot for stateful expressions.
    pub ext: &'a X,
}

/// What a slot holds besides its keys.
#[derive(Debug, Clone, Copy)]
struct Slot<X> {
    data: u32,
    expires: Option<u64>,
    ext: X,
}

#[derive(Debug, Clone, Copy)]
struct Item {
    start: u128,
    end: u128,
    expires: u64,
    h: u32,
}

/// Interval set of one field of 1..=16 bytes.
#[derive(Debug, Clone)]
pub struct IntervalSet<X = ()> {
    len: usize,
    items: Vec<Item>,
    /// Per slot: data, expiry and extension (`None` for a free slot).
    slab: Vec<Option<Slot<X>>>,
    /// Per slot `2 * len` bytes: start key, then end key.
    keys: Vec<u8>,
    free: Vec<u32>,
}

impl<X: Clone> IntervalSet<X> {
    /// Give back every buffer's spare capacity (a set just built at once; the next insertion
    /// grows them again).
    pub fn shrink_to_fit(&mut self) {
        self.items.shrink_to_fit();
        self.slab.shrink_to_fit();
        self.keys.shrink_to_fit();
        self.free.shrink_to_fit();
    }
    /// An empty set of `len`-byte keys. Errors: [`SetError::BadDescription`] outside 1..=16.
    pub fn new(len: usize) -> Result<Self, SetError> {
        if len == 0 || len > 16 {
            return Err(SetError::BadDescription("field width outside 1..=16 bytes"));
        }
        Ok(IntervalSet {
            len,
            items: Vec::new(),
            slab: Vec::new(),
            keys: Vec::new(),
            free: Vec::new(),
        })
    }

    /// Key length in bytes.
    pub fn key_len(&self) -> usize {
        self.len
    }

    /// Stored elements (expired ones included until they block an insertion or [`Self::gc`]).
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// `true` when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Handles of the stored elements in key order (expired ones included).
    pub fn handles(&self) -> impl Iterator<Item = ElemHandle> + '_ {
        self.items.iter().map(|it| ElemHandle(it.h))
    }

    /// The element behind a handle.
    pub fn elem(&self, h: ElemHandle) -> Option<IntervalRef<'_, X>> {
        let slot = self.slab.get(h.0 as usize)?.as_ref()?;
        let (start, end) = self.keys_of(h.0);
        Some(IntervalRef {
            start,
            end,
            data: slot.data,
            expires: slot.expires,
            ext: &slot.ext,
        })
    }

    /// The start and end keys of slot `h`.
    fn keys_of(&self, h: u32) -> (&[u8], &[u8]) {
        let at = h as usize * 2 * self.len;
        let k = &self.keys[at..at + 2 * self.len];
        k.split_at(self.len)
    }

    fn key(&self, k: &[u8]) -> Result<u128, SetError> {
        if k.len() != self.len {
            return Err(SetError::KeyLength {
                got: k.len(),
                want: self.len,
            });
        }
        Ok(be_value(k))
    }

    /// Index of the item whose start is the greatest `<= v`.
    #[inline]
    fn floor(&self, v: u128) -> Option<usize> {
        self.items
            .partition_point(|it| it.start <= v)
            .checked_sub(1)
    }

    /// The live element containing `key` at `now` (`None` also for a wrong-length key).
    #[inline]
    pub fn lookup(&self, key: &[u8], now: u64) -> Option<ElemHandle> {
        if key.len() != self.len {
            return None;
        }
        let v = be_value(key);
        let it = self.items[self.floor(v)?];
        (v <= it.end && now < it.expires).then_some(ElemHandle(it.h))
    }

    /// A live element at `now` that meets the range `[start, end]` (`None` also for
    /// wrong-length keys): with disjoint elements, the one holding it when one is identical to
    /// it or contains it.
    pub fn overlapping(&self, start: &[u8], end: &[u8], now: u64) -> Option<ElemHandle> {
        if start.len() != self.len || end.len() != self.len {
            return None;
        }
        let (s, e) = (be_value(start), be_value(end));
        let mut i = self.floor(s).unwrap_or(0);
        while let Some(it) = self.items.get(i).filter(|it| it.start <= e) {
            if it.end >= s && now < it.expires {
                return Some(ElemHandle(it.h));
            }
            i += 1;
        }
        None
    }

    /// The live element containing the point `key` (`nft get element`).
    /// Errors: [`SetError::KeyLength`], [`SetError::NotFound`].
    pub fn get(&self, key: &[u8], now: u64) -> Result<ElemHandle, SetError> {
        self.key(key)?;
        self.lookup(key, now).ok_or(SetError::NotFound)
    }

    /// Insert with the rbtree rules (see the module doc); expired elements in the way are
    /// removed first. Errors: [`SetError::KeyLength`], [`SetError::InvalidRange`],
    /// [`SetError::Exists`] (`create` only), [`SetError::Overlap`], [`SetError::Full`].
    pub fn insert(
        &mut self,
        e: NewElem<'_, X>,
        mode: InsertMode,
        now: u64,
    ) -> Result<ElemHandle, SetError> {
        let s = self.key(e.start)?;
        let end = self.key(e.end.unwrap_or(e.start))?;
        if end < s {
            return Err(SetError::InvalidRange { field: 0 });
        }
        // Items overlapping [s, end]: from the floor of s (or the first) while start <= end.
        let first = self.floor(s).unwrap_or(0);
        let mut i = first;
        let mut hit = Vec::new();
        while i < self.items.len() && self.items[i].start <= end {
            if self.items[i].end >= s {
                hit.push(i);
            }
            i += 1;
        }
        if let Some(&live) = hit.iter().find(|&&i| now < self.items[i].expires) {
            let it = self.items[live];
            if it.start == s && it.end == end {
                return match mode {
                    InsertMode::Add => Ok(ElemHandle(it.h)),
                    InsertMode::Create => Err(SetError::Exists(ElemHandle(it.h))),
                };
            }
            return Err(SetError::Overlap(ElemHandle(it.h)));
        }
        for &i in hit.iter().rev() {
            let it = self.items.remove(i);
            self.release(it.h);
        }
        let h = match self.free.pop() {
            Some(h) => h,
            None => {
                let h = u32::try_from(self.slab.len()).map_err(|_| SetError::Full)?;
                room(&mut self.slab, 1);
                room(&mut self.keys, 2 * self.len);
                self.slab.push(None);
                self.keys.resize(self.keys.len() + 2 * self.len, 0);
                h
            }
        };
        self.slab[h as usize] = Some(Slot {
            data: e.data,
            expires: e.expires,
            ext: e.ext,
        });
        let at = h as usize * 2 * self.len;
        self.keys[at..at + self.len].copy_from_slice(e.start);
        self.keys[at + self.len..at + 2 * self.len].copy_from_slice(e.end.unwrap_or(e.start));
        let at = self.items.partition_point(|it| it.start < s);
        room(&mut self.items, 1);
        self.items.insert(
            at,
            Item {
                start: s,
                end,
                expires: e.expires.unwrap_or(u64::MAX),
                h,
            },
        );
        Ok(ElemHandle(h))
    }

    fn release(&mut self, h: u32) -> Option<IntervalElem<X>> {
        let slot = self.slab.get_mut(h as usize)?.take()?;
        self.free.push(h);
        let (start, end) = self.keys_of(h);
        Some(IntervalElem {
            start: start.into(),
            end: end.into(),
            data: slot.data,
            expires: slot.expires,
            ext: slot.ext,
        })
    }

    /// Delete the live element with exactly this start and end (`end` `None` = single value);
    /// a point or sub-range inside an element is [`SetError::NotFound`], as the kernel's rbtree.
    pub fn delete(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        now: u64,
    ) -> Result<IntervalElem<X>, SetError> {
        let s = self.key(start)?;
        let e = self.key(end.unwrap_or(start))?;
        let i = self.floor(s).ok_or(SetError::NotFound)?;
        let it = self.items[i];
        if it.start != s || it.end != e || now >= it.expires {
            return Err(SetError::NotFound);
        }
        self.items.remove(i);
        self.release(it.h).ok_or(SetError::NotFound)
    }

    /// Remove every element.
    pub fn flush(&mut self) {
        self.items.clear();
        self.slab.clear();
        self.keys.clear();
        self.free.clear();
    }

    /// Remove every element expired at `now`; returns how many.
    pub fn gc(&mut self, now: u64) -> usize {
        let dead: Vec<u32> = self
            .items
            .iter()
            .filter(|it| now >= it.expires)
            .map(|it| it.h)
            .collect();
        self.items.retain(|it| now < it.expires);
        for &h in &dead {
            self.release(h);
        }
        dead.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn add(
        s: &mut IntervalSet,
        a: u16,
        b: u16,
        mode: InsertMode,
        exp: Option<u64>,
        now: u64,
    ) -> Result<ElemHandle, SetError> {
        s.insert(
            NewElem {
                start: &a.to_be_bytes(),
                end: Some(&b.to_be_bytes()),
                data: 0,
                expires: exp,
                ext: (),
            },
            mode,
            now,
        )
    }

    /// `overlapping` finds a live element meeting a range exactly when inserting the range
    /// would meet one (identical, overlapping, containing or contained), on random sets.
    #[test]
    fn overlapping_answers_as_the_insert_check() {
        proptest!(|(
            elems in prop::collection::vec((0u16..200, 0u16..20, any::<bool>()), 0..40),
            probe in (0u16..220, 0u16..30),
            now in 0u64..3,
        )| {
            let mut s = IntervalSet::new(2).unwrap();
            for (a, w, timed) in elems {
                let _ = add(&mut s, a, a + w, InsertMode::Add, timed.then_some(1), 0);
            }
            let (a, b) = (probe.0, probe.0 + probe.1);
            let hit = s.overlapping(&a.to_be_bytes(), &b.to_be_bytes(), now);
            let mut copy = s.clone();
            let meets = add(&mut copy, a, b, InsertMode::Create, None, now).is_err();
            prop_assert_eq!(hit.is_some(), meets);
            if let Some(h) = hit {
                let e = s.elem(h).unwrap();
                let (x, y) = (be_value(e.start), be_value(e.end));
                prop_assert!(x <= u128::from(b) && u128::from(a) <= y);
            }
        });
    }

    const C09: [(u16, u16, bool); 15] = [
        (0, 2, true),
        (0, 2, true),
        (0, 1, false),
        (0, 3, false),
        (3, 10, true),
        (3, 9, false),
        (4, 10, false),
        (4, 9, false),
        (20, 30, true),
        (11, 12, true),
        (13, 19, true),
        (25, 40, false),
        (50, 60, true),
        (31, 49, true),
        (59, 60, false),
    ];

    /// C09 single-field vectors (nftables 0044interval_overlap_0, checked on the kernel), then
    /// the same with timeouts: after expiry everything can be inserted again.
    #[test]
    fn c09_single_field_vectors() {
        let mut s = IntervalSet::new(2).unwrap();
        for (a, b, ok) in C09 {
            assert_eq!(
                add(&mut s, a, b, InsertMode::Add, None, 0).is_ok(),
                ok,
                "{a}-{b}"
            );
        }
        assert!(matches!(
            add(&mut s, 0, 2, InsertMode::Create, None, 0),
            Err(SetError::Exists(_))
        ));
        let mut t = IntervalSet::new(2).unwrap();
        for (a, b, ok) in C09 {
            assert_eq!(
                add(&mut t, a, b, InsertMode::Add, Some(100), 0).is_ok(),
                ok,
                "{a}-{b}"
            );
        }
        // After expiry (now = 100) the same sequence gives the same answers again.
        for (a, b, ok) in C09 {
            assert_eq!(
                add(&mut t, a, b, InsertMode::Add, Some(1000), 100).is_ok(),
                ok,
                "{a}-{b} again"
            );
        }
        assert_eq!(t.len(), 7, "the expired copies were replaced");
    }

    /// tests/py/ip/sets.t: 192.168.1.0/24 then 192.168.1.1 fails; 10.0.0.5 then 10.0.0.0/8
    /// fails (containing), observed on the kernel.
    #[test]
    fn containment_is_refused() {
        let mut s = IntervalSet::new(4).unwrap();
        let e = |a: [u8; 4], b: [u8; 4]| (a, b);
        let (a, b) = e([192, 168, 1, 0], [192, 168, 1, 255]);
        s.insert(
            NewElem {
                start: &a,
                end: Some(&b),
                data: 0,
                expires: None,
                ext: (),
            },
            InsertMode::Add,
            0,
        )
        .unwrap();
        let one = [192, 168, 1, 1];
        assert!(matches!(
            s.insert(
                NewElem {
                    start: &one,
                    end: None,
                    data: 0,
                    expires: None,
                    ext: ()
                },
                InsertMode::Add,
                0
            ),
            Err(SetError::Overlap(_))
        ));
        let p = [10, 0, 0, 5];
        s.insert(
            NewElem {
                start: &p,
                end: None,
                data: 0,
                expires: None,
                ext: (),
            },
            InsertMode::Add,
            0,
        )
        .unwrap();
        let (a, b) = e([10, 0, 0, 0], [10, 255, 255, 255]);
        assert!(matches!(
            s.insert(
                NewElem {
                    start: &a,
                    end: Some(&b),
                    data: 0,
                    expires: None,
                    ext: ()
                },
                InsertMode::Add,
                0
            ),
            Err(SetError::Overlap(_))
        ));
    }

    /// Delete needs the exact range; get finds the containing one (observed on the kernel).
    #[test]
    fn delete_exact_get_containing() {
        let mut s = IntervalSet::new(2).unwrap();
        let h = add(&mut s, 3, 10, InsertMode::Add, None, 0).unwrap();
        assert_eq!(s.get(&5u16.to_be_bytes(), 0), Ok(h));
        assert_eq!(
            s.delete(&5u16.to_be_bytes(), None, 0).err(),
            Some(SetError::NotFound)
        );
        assert_eq!(
            s.delete(&3u16.to_be_bytes(), Some(&9u16.to_be_bytes()), 0)
                .err(),
            Some(SetError::NotFound)
        );
        assert!(
            s.delete(&3u16.to_be_bytes(), Some(&10u16.to_be_bytes()), 0)
                .is_ok()
        );
        assert_eq!(s.lookup(&5u16.to_be_bytes(), 0), None);
    }

    /// C14: `10, 30-30, 30, 35` loads; 30-30 equals 30; the set holds 10, 30, 35.
    #[test]
    fn c14_same_start_and_end() {
        let mut s = IntervalSet::new(2).unwrap();
        for (a, b) in [(10, 10), (30, 30), (30, 30), (35, 35)] {
            add(&mut s, a, b, InsertMode::Add, None, 0).unwrap();
        }
        assert_eq!(s.len(), 3);
        for (k, hit) in [(10, true), (29, false), (30, true), (31, false), (35, true)] {
            assert_eq!(s.lookup(&u16::to_be_bytes(k), 0).is_some(), hit, "{k}");
        }
    }

    proptest! {
        /// Against a model: accepted iff no live element overlaps (identical = exists);
        /// lookup = the one containing element.
        #[test]
        fn model(ops in prop::collection::vec((0u16..200, 0u16..30, prop::option::of(1u64..10)), 1..40), probe in prop::collection::vec(0u16..240, 20)) {
            let mut s = IntervalSet::new(2).unwrap();
            let mut m: Vec<(u16, u16, u64)> = Vec::new();
            let now = 5;
            for (a, w, exp) in ops {
                let b = a.saturating_add(w);
                let live: Vec<_> = m.iter().filter(|x| now < x.2 && x.0 <= b && x.1 >= a).cloned().collect();
                let r = add(&mut s, a, b, InsertMode::Create, exp, now);
                match live.first() {
                    None => { prop_assert!(r.is_ok()); m.retain(|x| !(x.0 <= b && x.1 >= a)); m.push((a, b, exp.unwrap_or(u64::MAX))); }
                    Some(x) if x.0 == a && x.1 == b => prop_assert!(matches!(r, Err(SetError::Exists(_)))),
                    Some(_) => prop_assert!(matches!(r, Err(SetError::Overlap(_)))),
                }
            }
            for k in probe {
                let want = m.iter().find(|x| now < x.2 && x.0 <= k && k <= x.1).map(|x| (x.0, x.1));
                let got = s.lookup(&k.to_be_bytes(), now).map(|h| { let e = s.elem(h).unwrap(); (u16::from_be_bytes([e.start[0], e.start[1]]), u16::from_be_bytes([e.end[0], e.end[1]])) });
                prop_assert_eq!(got, want);
            }
        }
    }
}
