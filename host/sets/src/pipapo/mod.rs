//! A concatenated-range set as the kernel's `nft_set_pipapo` (PIle PAcket POlicies).
//!
//! A key is the concatenation of fields of given byte widths (1..=16 each, e.g. 4 for
//! `ipv4_addr`, 2 for `inet_service`, 6 for `ether_addr`, 16 for `ipv6_addr`), each in
//! big-endian bytes **without** the kernel's 4-byte register padding (`ipv4_addr .
//! inet_service` is 6 bytes). An element holds an inclusive range per field; a key matches it
//! when every field lies in the element's range.
//!
//! Each field's ranges are expanded to prefixes ([`expand`]); every prefix is one *rule* of the
//! field. Per field a lookup table holds, per group of 8 (or 4) key bits and group value, a
//! bitmap of the rules that accept it; a mapping table links each rule to the element's rules
//! in the next field. A lookup ANDs the buckets selected by the key, maps the surviving rules to
//! the next field and ends with the first live element in the last field: the **oldest**
//! (first inserted) live element containing the key, as the kernel's generic lookup returns.
//!
//! Control-plane behaviour follows the kernel (`nft_pipapo_insert`, `nft_pipapo_deactivate`):
//! insertion looks up the new start and end points; an identical element is [`SetError::Exists`]
//! (which `add` turns into success), any other hit is [`SetError::Overlap`]. Delete and get are
//! keyed by the start point. Expired elements are invisible to lookups and to these checks.
//!
//! Time is passed in (`now`, in the caller's units; wasp-core uses nanoseconds): an element with
//! `expires = Some(t)` is expired when `now >= t` (the kernel's `nft_set_elem_expired`).

mod bits;
mod delta;
pub mod expand;
pub(crate) mod fast;
pub mod field;
mod index;
mod insert;
pub(crate) mod lookup;
mod remove;

pub use delta::{OVERLAY_MIN, rebuild_at};
pub use field::{Block, GroupPolicy, LT_SIZE_HIGH, LT_SIZE_LOW, Map};
pub use index::{Index, MAX_CANDIDATES};
pub use lookup::{BATCH_MAX, Scratch, Variant};

use field::Field;

/// Most fields in a key, as `NFT_PIPAPO_MAX_FIELDS`.
pub const MAX_FIELDS: usize = 16;
/// Longest field in bytes, as `NFT_PIPAPO_MAX_BYTES`.
pub const MAX_FIELD_BYTES: usize = 16;

/// Handle of an element: an index into the set's element slab. Valid for the set (snapshot) it
/// came from until that element is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ElemHandle(pub u32);

/// Errors of control-plane operations, named after the kernel's errno for the same case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetError {
    /// The set description is invalid: no field, more than [`MAX_FIELDS`], or a field width
    /// outside 1..=[`MAX_FIELD_BYTES`] (EINVAL).
    #[error("invalid set description: {0}")]
    BadDescription(&'static str),
    /// A key or range end has the wrong length (EINVAL).
    #[error("key is {got} bytes, the set's keys are {want}")]
    KeyLength {
        /// Length given.
        got: usize,
        /// The set's key length.
        want: usize,
    },
    /// A field's range end is below its start (EINVAL; the kernel checks every field since
    /// 2022, "Actually validate intervals in fields after the first one").
    #[error("range end below start in field {field}")]
    InvalidRange {
        /// Field index, 0-based.
        field: usize,
    },
    /// The identical element is already in the set (EEXIST): `create` fails, `add` ignores it.
    #[error("element exists")]
    Exists(ElemHandle),
    /// The start or end point of the new element lies in an existing element (ENOTEMPTY,
    /// which nft prints as "File exists").
    #[error("element overlaps an existing element")]
    Overlap(ElemHandle),
    /// No live element contains the given start point (ENOENT).
    #[error("no such element")]
    NotFound,
    /// Too many rules in a field (ENOSPC at `NFT_PIPAPO_RULE0_MAX`) or elements in the slab.
    #[error("set is full")]
    Full,
}

/// Whether an insertion is `add` (an identical element is success) or `create` (it is an
/// error), as `nft add element` / `nft create element` (NLM_F_EXCL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertMode {
    /// `add element`: an identical existing element is not an error.
    Add,
    /// `create element`: an identical existing element is [`SetError::Exists`].
    Create,
}

/// An element to insert.
#[derive(Debug, Clone)]
pub struct NewElem<'a, X> {
    /// Start of every field, concatenated (the key length).
    pub start: &'a [u8],
    /// End of every field, or `None` for a single key (end = start).
    pub end: Option<&'a [u8]>,
    /// Element data: for a map the index of its value or verdict, for a set anything.
    pub data: u32,
    /// Expiry time (`now >= expires` means expired), `None` for never.
    pub expires: Option<u64>,
    /// Extension slot for stateful per-element expressions (counters, quotas).
    pub ext: X,
}

/// An element taken out of a set ([`Pipapo::delete`], [`Pipapo::remove`]).
#[derive(Debug, Clone)]
pub struct Elem<X> {
    /// Start key.
    pub start: Box<[u8]>,
    /// End key (equal to `start` for a single key).
    pub end: Box<[u8]>,
    /// Data as given at insertion.
    pub data: u32,
    /// Expiry, `None` for never.
    pub expires: Option<u64>,
    /// Extension slot.
    pub ext: X,
}

impl<X> Elem<X> {
    /// `true` when the element had expired at `now`.
    #[inline]
    pub fn expired(&self, now: u64) -> bool {
        self.expires.is_some_and(|t| now >= t)
    }
}

/// A stored element, borrowed from its set ([`Pipapo::elem`]).
#[derive(Debug, Clone, Copy)]
pub struct ElemRef<'a, X> {
    /// Start key, [`Pipapo::key_len`] bytes.
    pub start: &'a [u8],
    /// End key (equal to `start` for a single key).
    pub end: &'a [u8],
    /// Data as given at insertion.
    pub data: u32,
    /// Expiry, `None` for never.
    pub expires: Option<u64>,
    /// Extension slot.
    pub ext: &'a X,
}

impl<X> ElemRef<'_, X> {
    /// `true` when the element has expired at `now`.
    #[inline]
    pub fn expired(&self, now: u64) -> bool {
        self.expires.is_some_and(|t| now >= t)
    }
}

/// What a slab slot holds besides its keys, rule counts and expiry (`Pipapo::expiry`).
#[derive(Debug, Clone)]
struct Slot<X> {
    data: u32,
    ext: X,
}

/// A pipapo set: fields, element slab and insertion order. `X` is the per-element extension
/// slot (default none).
#[derive(Debug, Clone)]
pub struct Pipapo<X = ()> {
    fields: Vec<Field>,
    field_lens: Box<[usize]>,
    key_len: usize,
    policy: GroupPolicy,
    /// Per slot: data, expiry and extension (`None` for a free slot). Keys and rule counts
    /// live in flat arrays beside it, so cloning a set (every transaction) copies a few
    /// buffers and allocates nothing per element.
    slab: Vec<Option<Slot<X>>>,
    /// Per slot `2 * key_len` bytes: start key, then end key.
    keys: Vec<u8>,
    /// Per slot one rule count per field (a range of a field of at most 128 bits expands to
    /// at most 254 prefixes: a byte).
    nrules: Vec<u8>,
    /// Expiry per slab slot (`u64::MAX` for never or free), read by lookups; empty until an
    /// element with an expiry is inserted (`timed`).
    expiry: Vec<u64>,
    /// `true` once an element with an expiry was inserted (until a flush): without one,
    /// lookups need not read `expiry`, and it holds nothing.
    timed: bool,
    free: Vec<u32>,
    /// Live handles in insertion order (the rule order of every field).
    order: Vec<u32>,
    /// Largest bucket size over the fields, in blocks.
    bblocks_max: usize,
    /// Field index ([`Pipapo::build_index`]); kept through inserts and removals, with what
    /// changed since in `delta`; dropped by a flush (`touched`).
    index: Option<std::sync::Arc<Index>>,
    /// Changes since `index` was built (`None`: none).
    delta: Option<Box<delta::Delta>>,
    /// Sets of fewer elements rebuild their index at every refresh ([`Pipapo::set_overlay_min`]).
    overlay_min: usize,
}

impl<X: Clone> Pipapo<X> {
    /// An empty set of keys made of fields `field_lens` bytes wide, with the kernel's 8/4-bit
    /// switching. Errors: [`SetError::BadDescription`].
    pub fn new(field_lens: &[usize]) -> Result<Self, SetError> {
        Self::with_policy(field_lens, GroupPolicy::Auto)
    }

    /// As [`Pipapo::new`] with an explicit group-width policy.
    pub fn with_policy(field_lens: &[usize], policy: GroupPolicy) -> Result<Self, SetError> {
        if field_lens.is_empty() {
            return Err(SetError::BadDescription("no field"));
        }
        if field_lens.len() > MAX_FIELDS {
            return Err(SetError::BadDescription("more than 16 fields"));
        }
        if field_lens.iter().any(|&l| l == 0 || l > MAX_FIELD_BYTES) {
            return Err(SetError::BadDescription("field width outside 1..=16 bytes"));
        }
        let bb = if policy == GroupPolicy::Fixed4 { 4 } else { 8 };
        Ok(Pipapo {
            fields: field_lens.iter().map(|&l| Field::new(l, bb)).collect(),
            field_lens: field_lens.into(),
            key_len: field_lens.iter().sum(),
            policy,
            slab: Vec::new(),
            keys: Vec::new(),
            nrules: Vec::new(),
            expiry: Vec::new(),
            timed: false,
            free: Vec::new(),
            order: Vec::new(),
            bblocks_max: 0,
            index: None,
            delta: None,
            overlay_min: delta::OVERLAY_MIN,
        })
    }

    /// Field widths in bytes.
    pub fn field_lens(&self) -> &[usize] {
        &self.field_lens
    }

    /// Key length in bytes (sum of the field widths).
    pub fn key_len(&self) -> usize {
        self.key_len
    }

    /// Elements stored, expired ones included until removed ([`Pipapo::gc`]).
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// `true` when no element is stored.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Whether the element in slot `h` is live at `now` (every stored one while no element has
    /// an expiry).
    #[inline]
    fn live(&self, h: u32, now: u64) -> bool {
        !self.timed || self.expiry.get(h as usize).is_some_and(|&t| now < t)
    }

    /// Expiry of the element in slot `h` (`None` for never).
    #[inline]
    fn expires_of(&self, h: u32) -> Option<u64> {
        self.expiry
            .get(h as usize)
            .copied()
            .filter(|&t| t != u64::MAX)
    }

    /// The element behind a handle (`None` for a removed one).
    pub fn elem(&self, h: ElemHandle) -> Option<ElemRef<'_, X>> {
        let slot = self.slab.get(h.0 as usize)?.as_ref()?;
        let (start, end) = self.keys_of(h.0);
        Some(ElemRef {
            start,
            end,
            data: slot.data,
            expires: self.expires_of(h.0),
            ext: &slot.ext,
        })
    }

    /// Start and end key of the element behind a handle (`None` for a removed one); both
    /// [`Pipapo::key_len`] bytes, fields concatenated.
    pub fn bounds(&self, h: ElemHandle) -> Option<(&[u8], &[u8])> {
        self.slab.get(h.0 as usize)?.as_ref()?;
        Some(self.keys_of(h.0))
    }

    /// The extension slot of the element behind a handle, mutable (e.g. to update a counter).
    pub fn ext_mut(&mut self, h: ElemHandle) -> Option<&mut X> {
        self.slab
            .get_mut(h.0 as usize)
            .and_then(|e| e.as_mut())
            .map(|s| &mut s.ext)
    }

    /// Start and end key stored in slot `h` (free slots hold stale bytes).
    #[inline]
    fn keys_of(&self, h: u32) -> (&[u8], &[u8]) {
        let at = h as usize * 2 * self.key_len;
        let both = &self.keys[at..at + 2 * self.key_len];
        both.split_at(self.key_len)
    }

    /// Rule counts per field of slot `h`.
    #[inline]
    fn nrules_of(&self, h: u32) -> &[u8] {
        let n = self.fields.len();
        &self.nrules[h as usize * n..(h as usize + 1) * n]
    }

    /// Handles of the stored elements in insertion order (expired ones included).
    pub fn handles(&self) -> impl Iterator<Item = ElemHandle> + '_ {
        self.order.iter().map(|&h| ElemHandle(h))
    }

    /// Group width (8 or 4) of every field, in field order.
    pub fn group_bits(&self) -> Vec<u32> {
        self.fields.iter().map(|f| f.bb).collect()
    }

    /// Rules per field, in field order.
    pub fn rule_counts(&self) -> Vec<usize> {
        self.fields.iter().map(|f| f.rules).collect()
    }

    /// Bytes held by lookup and mapping tables.
    pub fn table_bytes(&self) -> usize {
        self.fields
            .iter()
            .map(|f| f.lt_bytes() + f.mt.len() * std::mem::size_of::<Map>() + f.ends.len() * 4)
            .sum()
    }

    /// Check a key's length.
    fn check_len(&self, k: &[u8]) -> Result<(), SetError> {
        if k.len() == self.key_len {
            Ok(())
        } else {
            Err(SetError::KeyLength {
                got: k.len(),
                want: self.key_len,
            })
        }
    }

    /// Field byte ranges of a key.
    fn field_spans(&self) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        self.field_lens.iter().scan(0usize, |at, &l| {
            let r = *at..*at + l;
            *at += l;
            Some(r)
        })
    }
}

#[cfg(test)]
mod regress;
#[cfg(test)]
mod tests;
