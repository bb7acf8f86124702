//! The field index kept through changes: after a change the index built before it stays, and
//! a small overlay says what changed since ([`Delta`]): the elements added since (in insertion
//! order, with an index of their own once [`Pipapo::refresh_index`] has run) and a bitmap of
//! the handles whose element the index knows but the set no longer holds (removed, or the slot
//! reused by a newer element).
//!
//! A lookup stays exact: every element the index knows is older than every added one, so
//! - the index's answer `h` is the answer when `h` is not in the bitmap (the index returns the
//!   oldest of its elements containing the key; an older removed one would have been returned
//!   instead and sent the key to pipapo);
//! - the index's "none" hands the key to the added elements' index (the oldest added element
//!   containing it, or none);
//! - a removed element's handle, an overlay not refreshed since the last change, and the
//!   index's own fallback send the key to pipapo's lookup, which holds every element.
//!
//! [`Pipapo::refresh_index`] indexes the added elements (cost O(K log K) for K added, plus
//! zeroing a record per slot) or, once the overlay grows past [`REBUILD_AT`] elements or a
//! thirty-second of the set, builds the whole index again (O(N log N)): a stream of
//! single-element changes pays for one full build per that many changes.

use std::sync::Arc;

use super::index::{Index, Probe};
use super::{ElemHandle, Pipapo};

/// The overlay's size (added plus removed elements) from which a refresh builds the whole
/// index again, for sets of up to 32 times as many elements.
pub const REBUILD_AT: usize = 256;

/// What changed since the field index was built.
#[derive(Debug, Clone, Default)]
pub(crate) struct Delta {
    /// Handles of the elements added since, in insertion order.
    added: Vec<u32>,
    /// The index of exactly `added` (`None` until a refresh, and after every change).
    added_index: Option<Arc<Index>>,
    /// Bit per handle: the index's element of that handle is gone.
    gone: Vec<u64>,
    /// Elements removed since the build (bits set in `gone`).
    removed: usize,
}

impl Delta {
    #[inline(always)]
    fn is_gone(&self, h: u32) -> bool {
        self.gone
            .get(h as usize / 64)
            .is_some_and(|w| w >> (h % 64) & 1 != 0)
    }

    fn mark_gone(&mut self, h: u32) {
        let w = h as usize / 64;
        if self.gone.len() <= w {
            self.gone.resize(w + 1, 0);
        }
        if self.gone[w] >> (h % 64) & 1 == 0 {
            self.gone[w] |= 1 << (h % 64);
            self.removed += 1;
        }
    }

    fn size(&self) -> usize {
        self.added.len() + self.removed
    }
}

impl<X: Clone> Pipapo<X> {
    /// An element was inserted behind `h`: the overlay lists it (no overlay without an index).
    pub(super) fn note_insert(&mut self, h: u32) {
        if self.index.is_none() {
            return;
        }
        let d = self.delta.get_or_insert_with(Box::default);
        d.added.push(h);
        d.added_index = None;
    }

    /// The elements behind `hs` were removed.
    pub(super) fn note_remove(&mut self, hs: impl Iterator<Item = u32>) {
        if self.index.is_none() {
            return;
        }
        let d = self.delta.get_or_insert_with(Box::default);
        for h in hs {
            match d.added.iter().position(|&a| a == h) {
                Some(i) => {
                    d.added.remove(i);
                    d.added_index = None;
                }
                None => d.mark_gone(h),
            }
        }
    }

    /// Make the field index current after changes: index the elements added since it was
    /// built, or build it anew when there is none or the changes are many (see the module
    /// documentation). Lookups are exact whether or not this runs; it makes them fast again.
    pub fn refresh_index(&mut self) {
        let Some(d) = self.delta.as_deref() else {
            if self.index.is_none() {
                self.build_index();
            }
            return;
        };
        if self.index.is_none() || d.size() > REBUILD_AT.max(self.len() / 32) {
            self.build_index();
            return;
        }
        if d.added_index.is_some() || d.added.is_empty() {
            return;
        }
        let added: Vec<ElemHandle> = d.added.iter().map(|&h| ElemHandle(h)).collect();
        let ix = Index::build_of(self, &added).map(Arc::new);
        match ix {
            Some(ix) => {
                if let Some(d) = self.delta.as_deref_mut() {
                    d.added_index = Some(ix);
                }
            }
            None => self.build_index(),
        }
    }

    /// Elements added and removed since the field index was built (0 when it is current).
    pub fn index_lag(&self) -> usize {
        self.delta.as_deref().map_or(0, Delta::size)
    }

    /// The answer through the index and its overlay, or `None` for "ask pipapo".
    #[inline(always)]
    pub(super) fn probe_indexed(
        &self,
        ix: &Index,
        key: &[u8],
        now: u64,
    ) -> Option<Option<ElemHandle>> {
        let found = match ix.probe(key, now) {
            Probe::Found(r) => r,
            Probe::Fallback => return None,
        };
        let Some(d) = self.delta.as_deref() else {
            return Some(found);
        };
        match found {
            Some(h) if d.is_gone(h.0) => None,
            Some(h) => Some(Some(h)),
            None if d.added.is_empty() => Some(None),
            None => match d.added_index.as_deref()?.probe(key, now) {
                Probe::Found(r) => Some(r),
                Probe::Fallback => None,
            },
        }
    }

    /// [`Pipapo::lookup_index`] with an overlay: key after key.
    pub(super) fn lookup_batch_delta(&self, keys: &[u8], now: u64, out: &mut [Option<ElemHandle>]) {
        let kl = self.key_len.max(1);
        let n = out.len().min(keys.len() / kl);
        for (o, k) in out[..n].iter_mut().zip(keys.chunks_exact(kl)) {
            *o = self.lookup_index(k, now);
        }
        out[n..].fill(None);
    }
}
