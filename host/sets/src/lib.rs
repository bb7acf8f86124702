//! Set back-ends, as the kernel's: exact-match keys (`nft_set_hash`: [`ExactSet`], keyed by a
//! per-process random seed, [`seed`]), single-field intervals (`nft_set_rbtree`:
//! [`IntervalSet`]), concatenated ranges (`nft_set_pipapo`: [`Pipapo`], with its field index),
//! a linear list of per-field ranges ([`RangeList`], the reference the others are tested
//! against), and clone-on-write transactions over any of them ([`txn`]).
//!
//! Keys are byte strings: the concatenation of each field's value in big-endian bytes of the
//! field's width (e.g. `ip saddr . tcp dport` is 4 + 2 = 6 bytes). Comparing two big-endian byte
//! strings of equal length lexicographically is comparing the numbers they hold, which is how the
//! kernel's interval sets order keys (`memcmp` on the key registers).
//!
//! Every element carries a `u32` of data: for a plain set its index, for a map the index of its
//! data (a verdict or a value) in the caller's table.
#![deny(unsafe_code)]

pub mod exact;
pub mod grow;
pub mod interval;
pub mod perfcases;
pub mod pipapo;
pub mod ranges;
pub mod seed;
mod simd;
pub mod txn;

pub use exact::ExactSet;
pub use interval::{IntervalElem, IntervalRef, IntervalSet};
pub use pipapo::{ElemHandle, ElemRef, InsertMode, NewElem, Pipapo, SetError};
pub use ranges::{RangeElem, RangeList};
pub use txn::{Expiring, Shared, Txn};

/// A compiled set or map: whichever back-end its elements need.
#[derive(Debug, Clone)]
pub enum SetBackend {
    /// Every element is one exact key.
    Exact(ExactSet),
    /// Some element holds a range or prefix in some field.
    Ranges(RangeList),
}

impl SetBackend {
    /// The data of the element that holds `key`, if any (`None` also when `key` has the wrong
    /// length).
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<u32> {
        match self {
            SetBackend::Exact(s) => s.get(key),
            SetBackend::Ranges(r) => r.get(key),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            SetBackend::Exact(s) => s.len(),
            SetBackend::Ranges(r) => r.len(),
        }
    }

    /// `true` when the set has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
