//! The field index kept through changes: after a change the index built before it stays, and
//! a small overlay says what changed since ([`Delta`]): the elements added since, held in a
//! pipapo set of their own (indexed by [`Pipapo::refresh_index`]), and a bitmap of the index's
//! records whose element the set no longer holds.
//!
//! A lookup stays exact: every element the index knows is older than every added one, so
//! - the index skips the candidates in the bitmap, so its answer is the oldest live element it
//!   knows containing the key, and that is the answer;
//! - the index's "none" hands the key to the added elements' set (the oldest added element
//!   containing it, or none);
//! - the index's own fallback sends the key to the whole set's pipapo lookup.
//!
//! [`Pipapo::refresh_index`] indexes the added elements' set (O(K log K) for K added) or, once
//! the overlay holds more changes than [`rebuild_at`] allows for the set's size, builds the
//! whole index again (O(N log N)): a stream of single-element changes pays for one full build
//! per that many changes.

use std::collections::HashMap;

use super::index::{Index, Probe};
use super::{ElemHandle, InsertMode, NewElem, Pipapo};

/// The overlay's size (elements added plus removed since the full build) past which a refresh
/// builds the whole index of a set of `n` elements again: `n / 128`, at least 4 and at most
/// 4096 (sets of fewer than [`OVERLAY_MIN`] elements build anew at every refresh, at most
/// about 0.6 ms: [`Pipapo::set_overlay_min`]). Keys of added elements cost a second lookup,
/// so the overlay stays under about 0.8 % of the set (measured by `set-lookup`'s second
/// table: lookups within a few percent of a fresh index); a full build costs about 150 ns
/// per element, so a change pays about 20 µs for it on average.
pub fn rebuild_at(n: usize) -> usize {
    (n / 128).clamp(4, 4096)
}

/// Sets of fewer elements build their whole index at every refresh (no overlay): a reader of
/// a small set that changes 1000 times a second keeps 98-100 % of its idle rate that way,
/// 71-86 % with the overlay (`set-commit-rate --daemon`: the overlay's second lookups and
/// fresh cache lines cost more than a build of a few thousand elements).
pub const OVERLAY_MIN: usize = 4096;

/// What changed since the field index was built.
#[derive(Debug, Clone)]
pub(crate) struct Delta {
    /// The elements added since, in insertion order; each one's data is its handle in the set.
    added: Pipapo<()>,
    /// Handle in the set → handle in `added`.
    inner: HashMap<u32, ElemHandle>,
    /// Bit per index record: its element is gone.
    gone: Vec<u64>,
    /// Elements removed since the build (bits set in `gone`).
    removed: usize,
}

impl Delta {
    fn new(field_lens: &[usize]) -> Option<Delta> {
        Some(Delta {
            added: Pipapo::new(field_lens).ok()?,
            inner: HashMap::new(),
            gone: Vec::new(),
            removed: 0,
        })
    }

    fn mark_gone(&mut self, r: u32) {
        let w = r as usize / 64;
        if self.gone.len() <= w {
            self.gone.resize(w + 1, 0);
        }
        if self.gone[w] >> (r % 64) & 1 == 0 {
            self.gone[w] |= 1 << (r % 64);
            self.removed += 1;
        }
    }

    fn size(&self) -> usize {
        self.added.len() + self.removed
    }
}

impl<X: Clone> Pipapo<X> {
    /// The element behind `h` was inserted (its keys and expiry are stored): the overlay
    /// lists it. Without an index there is no overlay; when the overlay cannot take it, the
    /// index is dropped (the next refresh builds it).
    pub(super) fn note_insert(&mut self, h: u32) {
        if self.index.is_none() {
            return;
        }
        if self.delta.is_none() {
            self.delta = Delta::new(&self.field_lens).map(Box::new);
        }
        let (start, end) = self.keys_of(h);
        let (start, end) = (start.to_vec(), end.to_vec());
        let expires = self.expires_of(h);
        let Some(d) = self.delta.as_deref_mut() else {
            self.touched();
            return;
        };
        let e = NewElem {
            start: &start,
            end: Some(&end),
            data: h,
            expires,
            ext: (),
        };
        match d.added.insert(e, InsertMode::Create, 0) {
            Ok(inner) => {
                d.inner.insert(h, inner);
            }
            Err(_) => self.touched(),
        }
    }

    /// The elements behind `hs` are being removed.
    pub(super) fn note_remove(&mut self, hs: impl Iterator<Item = u32>) {
        if self.index.is_none() {
            return;
        }
        if self.delta.is_none() {
            self.delta = Delta::new(&self.field_lens).map(Box::new);
        }
        let Some(d) = self.delta.as_deref_mut() else {
            self.touched();
            return;
        };
        let ix = self.index.as_deref();
        let mut inner = Vec::new();
        for h in hs {
            match d.inner.remove(&h) {
                Some(i) => inner.push(i),
                None => {
                    if let Some(r) = ix.and_then(|ix| ix.record_of(h)) {
                        d.mark_gone(r);
                    }
                }
            }
        }
        if !inner.is_empty() {
            d.added.remove_many(&inner);
        }
    }

    /// Make the field index current after changes: index the elements added since it was
    /// built, or build it anew when there is none or the changes are many (see the module
    /// documentation). Lookups are exact whether or not this runs; it makes them fast again.
    pub fn refresh_index(&mut self) {
        let Some(d) = self.delta.as_deref_mut() else {
            if self.index.is_none() {
                self.build_index();
            }
            return;
        };
        let n = self.order.len();
        if self.index.is_none() || n < self.overlay_min || d.size() > rebuild_at(n) {
            self.build_index();
            return;
        }
        if !d.added.is_empty() && (d.added.index_lag() > 0 || !d.added.has_index()) {
            d.added.build_index();
        }
    }

    /// Keep an overlay of changes on the field index from sets of `n` elements on (default
    /// [`OVERLAY_MIN`]; smaller sets build the whole index at every refresh). Tests set 0 to
    /// run the overlay on small sets.
    pub fn set_overlay_min(&mut self, n: usize) {
        self.overlay_min = n;
    }

    /// Elements added and removed since the field index was built (0 when it is current).
    pub fn index_lag(&self) -> usize {
        self.delta.as_deref().map_or(0, Delta::size)
    }

    /// The bit per index record of the elements removed since its build (empty without an
    /// overlay).
    #[inline(always)]
    pub(super) fn gone(&self) -> &[u64] {
        self.delta.as_deref().map_or(&[], |d| &d.gone)
    }

    /// The answer through the index and its overlay, or `None` for "ask pipapo".
    #[inline(always)]
    pub(super) fn probe_indexed(
        &self,
        ix: &Index,
        key: &[u8],
        now: u64,
    ) -> Option<Option<ElemHandle>> {
        match ix.probe(key, now, self.gone()) {
            Probe::Found(Some(h)) => Some(Some(h)),
            Probe::Found(None) if self.delta.is_none() => Some(None),
            Probe::Found(None) => Some(self.added_lookup(key, now)),
            Probe::Fallback => None,
        }
    }

    /// The oldest element added since the index's build containing `key`. Out of line: it
    /// looks up the overlay's own set (a recursion that would keep the probe from being
    /// inlined where it is called).
    #[inline(never)]
    fn added_lookup(&self, key: &[u8], now: u64) -> Option<ElemHandle> {
        let d = self.delta.as_deref()?;
        if d.added.is_empty() {
            return None;
        }
        d.added
            .lookup_index(key, now)
            .and_then(|i| d.added.elem(i))
            .map(|e| ElemHandle(e.data))
    }

    /// After the index answered a batch: the keys it found nothing for (`None` in `out`, not
    /// in `back`, ascending) asked of the elements added since its build.
    pub(super) fn added_batch(
        &self,
        keys: &[u8],
        back: &[usize],
        now: u64,
        out: &mut [Option<ElemHandle>],
    ) {
        if self.delta.as_deref().is_none_or(|d| d.added.is_empty()) {
            return;
        }
        let kl = self.key_len.max(1);
        let mut b = back.iter().peekable();
        for (i, (o, k)) in out.iter_mut().zip(keys.chunks_exact(kl)).enumerate() {
            if b.next_if_eq(&&i).is_some() {
                continue;
            }
            if o.is_none() {
                *o = self.added_lookup(k, now);
            }
        }
    }
}
