//! Element acceptance as the kernel's set back-ends decide it, applied while a file's commands
//! are read (one transaction, as `nft -f` sends them).
//!
//! The back-end is the one the kernel picks (`nft_select_set_ops`): keys without `flags
//! interval` go to a hash (an identical key is success for `add`, "File exists" for `create`,
//! and also for `add` when a map element's data differs, as `nft_add_set_elem`); a single
//! interval field goes to the rbtree (every overlap refused; nft 1.0.6 reports it in userspace
//! as "conflicting intervals specified"); concatenated intervals go to pipapo (identical
//! element: `add` succeeds, `create` fails; an overlap of the new element's start or end point
//! with an older element fails with "File exists"). `delete element` is keyed as the back-end
//! keys it (exact start and end for hash and rbtree, the start point for pipapo). A set with
//! `size N` refuses its N+1-th element (ENFILE: "Too many open files in system").
//!
//! Checked on the local kernel with `nft -c -f` and `nft -f` in a namespace (nft 1.0.6, kernel
//! 6.18): every message and location below is the one nft printed for the same file.
//!
//! The elements are checked against a view of the set in that back-end, built from the model
//! and kept between batches ([`SetShadows`]), or, for a set that a running program holds in
//! the same back-end, against the program ([`SetOracle`]: the daemon's compiled sets), with
//! only the batch's own changes kept here: the same answers without a second copy of the set.
//! Where the program cannot tell (a pipapo element that holds a point was deleted earlier in
//! the batch, and an older one might hold it too), the batch goes on against a view built
//! from the model.

use std::collections::HashMap;

use wasp_sets::{InsertMode, IntervalSet, NewElem, Pipapo, SetError};

use super::{PResult, Parser};
use crate::model::{ElemData, Elements, KeyPart, Place, SetDecl, SetElem, Value};

/// nft's text for EEXIST from the kernel.
const EXISTS: &str = "Could not process rule: File exists";
/// nft's text for ENOENT from the kernel.
const NOT_FOUND: &str = "Could not process rule: No such file or directory";
/// nft's text for EINVAL from the kernel.
const INVALID: &str = "Could not process rule: Invalid argument";
/// nft's text for ENFILE (a set past its `size`).
const FULL: &str = "Could not process rule: Too many open files in system";

/// The start and end of an element: each field's low and high bound concatenated, big-endian
/// (a value is its own bounds; `a/len` is the prefix's first and last value).
pub(crate) fn bounds(key: &[KeyPart]) -> (Vec<u8>, Vec<u8>) {
    let mut lo = Vec::new();
    let mut hi = Vec::new();
    for p in key {
        match p {
            KeyPart::Value(v) => {
                lo.extend_from_slice(&v.bytes);
                hi.extend_from_slice(&v.bytes);
            }
            KeyPart::Range(a, b) => {
                lo.extend_from_slice(&a.bytes);
                hi.extend_from_slice(&b.bytes);
            }
            KeyPart::Prefix(v, len) => {
                lo.extend_from_slice(&v.bytes);
                hi.extend(prefix_end(v, *len));
            }
        }
    }
    (lo, hi)
}

/// Whether `key`'s bounds ([`bounds`]) are `b`: the start points are compared in place, and
/// only a key that starts at `b`'s start has its bounds built (a scan of a large set for the
/// element to delete allocates nothing per element).
fn has_bounds(key: &[KeyPart], b: &(Vec<u8>, Vec<u8>)) -> bool {
    let mut at = 0;
    for p in key {
        let lo = match p {
            KeyPart::Value(v) | KeyPart::Range(v, _) | KeyPart::Prefix(v, _) => &v.bytes,
        };
        let end = at + lo.len();
        if b.0.get(at..end) != Some(&lo[..]) {
            return false;
        }
        at = end;
    }
    at == b.0.len() && bounds(key) == *b
}

/// The last value of the prefix `v/len`: `v` with every bit after the first `len` set.
fn prefix_end(v: &Value, len: u8) -> Vec<u8> {
    let width = v.dtype.width_bits();
    let pad = (v.bytes.len() * 8) as u32 - u32::from(width);
    v.bytes
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            let mut out = b;
            for bit in 0..8u32 {
                // Bit position from the top of the value (padding bits do not count).
                let pos = (i as u32) * 8 + bit;
                if pos >= pad && pos - pad >= u32::from(len) {
                    out |= 0x80 >> bit;
                }
            }
            out
        })
        .collect()
}

/// A `low-high` part whose ends are equal is that single value (nft: `30-30` is `30`).
fn normalize(mut e: SetElem) -> SetElem {
    for p in &mut e.key {
        if let KeyPart::Range(a, b) = p
            && a == b
        {
            *p = KeyPart::Value(a.clone());
        }
    }
    e
}

/// A hash set's key in a view: in place up to 16 bytes (one field of any type, or a short
/// concatenation such as `ipv4_addr . inet_service`).
type Key = smallvec::SmallVec<[u8; 16]>;

/// What a view keeps of an element's data, to tell an identical `add` (success) from one with
/// other data ("File exists"): 0 without data, else a 64-bit hash of it, keyed at random once
/// per process (two different data are taken as equal with a chance of 2^-64). A view holds no
/// copy of the data; the model does.
fn fingerprint(d: &Option<ElemData>) -> u64 {
    use std::hash::BuildHasher;
    static KEYS: std::sync::OnceLock<std::hash::RandomState> = std::sync::OnceLock::new();
    d.as_ref().map_or(0, |d| {
        KEYS.get_or_init(std::hash::RandomState::new).hash_one(d) | 1
    })
}

/// The kernel back-end a set's elements live in, holding what the transaction has built so far.
#[derive(Debug, Clone)]
pub(crate) enum Backend {
    /// `nft_set_hash`: exact keys, with each element's data.
    Hash(HashMap<Key, u64>),
    /// `nft_set_rbtree`: one interval field, and what this transaction did to it
    /// ([`RbtreeTxn`]).
    Rbtree(IntervalSet<u64>, RbtreeTxn),
    /// `nft_set_pipapo`: concatenated intervals.
    Pipapo(Pipapo<u64>),
}

/// What a running program holds of a batch's named sets: the daemon's compiled sets, which
/// hold the same elements as the model in the same kernel back-end. An element batch checked
/// against it keeps no copy of the set's elements ([`crate::apply_elements_against`]).
///
/// Sets are named by their table's and their own index in the ruleset the batch starts from;
/// keys and bounds are each field's big-endian bytes concatenated, as the parser writes them
/// for sets of fixed-width types (addresses, services, protocols, marks).
pub trait SetOracle: Send {
    /// Elements of set `si` of table `ti`, and whether it has a catch-all element; `None`
    /// when the program does not hold the set so that it can answer for `backend` with keys
    /// of `key_len` bytes (the parser then checks against a view of its own).
    fn len(
        &self,
        ti: usize,
        si: usize,
        backend: SetBackend,
        key_len: usize,
    ) -> Option<(usize, bool)>;
    /// Start and end of the element that holds `point`: for a hash the element whose key is
    /// `point`, for pipapo the oldest element whose ranges contain it (the kernel's
    /// `pipapo_get`). `None` when no element holds it.
    fn holder(&self, ti: usize, si: usize, point: &[u8]) -> Option<Bounds>;
    /// Start and end of an element of a single-field interval set (its elements are disjoint)
    /// that meets `[start, end]`. `None` when none does.
    fn overlapping(&self, ti: usize, si: usize, start: &[u8], end: &[u8]) -> Option<Bounds>;
}

/// The kernel back-end that holds a set's elements (`nft_select_set_ops`), as a
/// [`SetOracle`] is asked to answer for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetBackend {
    /// `nft_set_hash`: exact keys.
    Hash,
    /// `nft_set_rbtree`: one interval field, disjoint elements.
    Rbtree,
    /// `nft_set_pipapo`: concatenated intervals.
    Pipapo,
}

/// An element's start and end: each field's low and high bound concatenated, big-endian.
pub type Bounds = (Vec<u8>, Vec<u8>);

/// What a transaction did to an rbtree set that its later commands meet (kernel 6.18 with
/// nft 1.0.6, checked with `nft -f` and `nft -c -f` in a namespace): a range added and then
/// deleted in the same transaction stays in the way of an add that overlaps it, and, when a
/// set declaration's `elements` added it, of a `create` of the same range ("File exists"; one
/// that `add element` added is taken again by `create`, and any by `add`); a range
/// committed before and deleted in the transaction is in nobody's way. `flush set` and the
/// transaction's end clear it.
#[derive(Debug, Clone, Default)]
pub(crate) struct RbtreeTxn {
    /// Ranges added in this transaction (and still held), each with whether a set
    /// declaration's `elements` added it.
    added: Vec<(Bounds, bool)>,
    /// Ranges added in this transaction and deleted again, each with whether a set
    /// declaration's `elements` added it.
    deleted: Vec<(Bounds, bool)>,
}

/// A set held by the running program, and this transaction's changes to it: the elements it
/// added (in a back-end of their own, younger than every element of the program's) and the
/// program's elements it deleted or flushed.
#[derive(Debug, Clone)]
pub(crate) struct Running {
    /// Table and set index (the oracle's names).
    ti: usize,
    si: usize,
    /// Elements of the program's set.
    base: usize,
    /// The program's elements were flushed in this transaction.
    flushed: bool,
    /// Bounds of the program's elements deleted in this transaction.
    deleted: Vec<(Vec<u8>, Vec<u8>)>,
    /// Elements added in this transaction.
    added: Backend,
}

/// A [`Running`] set's answer that needs the whole set (the program's element holding a point
/// was deleted in this transaction, and an older element might hold it too): the parser then
/// builds a view from the model.
#[derive(Debug)]
pub(crate) struct Undecided;

impl Running {
    fn len(&self) -> usize {
        let base = if self.flushed { 0 } else { self.base };
        base - self.deleted.len() + self.added.len()
    }

    /// The program's element holding `point` (`Ok(None)`: none, or flushed), unless
    /// this transaction deleted it.
    fn base_holder(
        &self,
        oracle: &dyn SetOracle,
        point: &[u8],
    ) -> Result<Option<Bounds>, Undecided> {
        if self.flushed {
            return Ok(None);
        }
        match oracle.holder(self.ti, self.si, point) {
            // A hash holds a key once: the deleted element was the only one.
            Some(b) if self.deleted.contains(&b) => match self.added {
                Backend::Hash(_) => Ok(None),
                _ => Err(Undecided),
            },
            h => Ok(h),
        }
    }

    /// The element holding `point`, oldest first: the program's, else one this transaction
    /// added.
    fn holder(&self, oracle: &dyn SetOracle, point: &[u8]) -> Result<Option<Bounds>, Undecided> {
        if let Some(b) = self.base_holder(oracle, point)? {
            return Ok(Some(b));
        }
        Ok(match &self.added {
            Backend::Hash(h) => h
                .contains_key(point)
                .then(|| (point.to_vec(), point.to_vec())),
            Backend::Pipapo(p) => p
                .get(point, 0)
                .ok()
                .and_then(|h| p.elem(h))
                .map(|e| (e.start.to_vec(), e.end.to_vec())),
            Backend::Rbtree(..) => None,
        })
    }

    /// As [`Backend::insert`] for a set without data (every fingerprint 0).
    fn insert(
        &mut self,
        oracle: &dyn SetOracle,
        e: &SetElem,
        how: Adding,
    ) -> Result<Result<bool, &'static str>, Undecided> {
        if matches!(self.added, Backend::Rbtree(..)) {
            return self.insert_rbtree(oracle, e, how);
        }
        let create = how == Adding::Create;
        let (lo, hi) = bounds(&e.key);
        let pipapo = matches!(self.added, Backend::Pipapo(_));
        if let Some((a, b)) = self.holder(oracle, &lo)? {
            // An identical element: `add` keeps it, `create` is refused; for pipapo any
            // other element holding the start point is an overlap.
            return Ok(if a == lo && b == hi {
                if create { Err(EXISTS) } else { Ok(false) }
            } else {
                Err(EXISTS)
            });
        }
        if pipapo && lo != hi && self.holder(oracle, &hi)?.is_some() {
            return Ok(Err(EXISTS));
        }
        Ok(self.added.insert(e, how))
    }

    /// [`Running::insert`] into a single-field interval set: as [`Backend::insert`] does for
    /// the rbtree. The program's elements deleted in this transaction were committed before
    /// it: in nobody's way ([`RbtreeTxn`]). When the program's element that meets the new one
    /// is one of them, another might meet it too: [`Undecided`].
    fn insert_rbtree(
        &mut self,
        oracle: &dyn SetOracle,
        e: &SetElem,
        how: Adding,
    ) -> Result<Result<bool, &'static str>, Undecided> {
        let create = how == Adding::Create;
        let (lo, hi) = bounds(&e.key);
        if !self.flushed {
            if let Some(i) = self.deleted.iter().position(|(a, b)| *a == lo && *b == hi) {
                // The program's element comes back.
                self.deleted.remove(i);
                return Ok(Ok(true));
            }
            if let Some((a, b)) = oracle.overlapping(self.ti, self.si, &lo, &hi) {
                if self.deleted.contains(&(a.clone(), b.clone())) {
                    return Err(Undecided);
                }
                return Ok(if a == lo && b == hi {
                    if create { Err(EXISTS) } else { Ok(false) }
                } else {
                    Err("conflicting intervals specified")
                });
            }
        }
        Ok(self.added.insert(e, how))
    }

    /// As [`Backend::delete`].
    fn delete(
        &mut self,
        oracle: &dyn SetOracle,
        e: &SetElem,
        cancel: bool,
    ) -> Result<Result<Bounds, &'static str>, Undecided> {
        let (lo, hi) = bounds(&e.key);
        if matches!(self.added, Backend::Rbtree(..)) {
            // Exact start and end, as the rbtree keys its elements.
            let b = (lo, hi);
            let held = !self.flushed
                && !self.deleted.contains(&b)
                && oracle.overlapping(self.ti, self.si, &b.0, &b.1).as_ref() == Some(&b);
            if held {
                self.deleted.push(b.clone());
                return Ok(Ok(b));
            }
            return Ok(self.added.delete(e, cancel));
        }
        if let Some(b) = self.base_holder(oracle, &lo)? {
            let keyed = match self.added {
                // A hash element is keyed by its whole key.
                Backend::Hash(_) => b.0 == lo,
                _ => true,
            };
            if keyed {
                self.deleted.push(b.clone());
                return Ok(Ok(b));
            }
        }
        Ok(self.added.delete(e, cancel))
    }
}

impl Backend {
    /// The empty back-end the kernel picks for `set`.
    fn new(set: &SetDecl) -> Backend {
        let lens: Vec<usize> = set.key.iter().map(|t| t.width_bytes()).collect();
        if set.flags.interval {
            if lens.len() == 1
                && let Ok(s) = IntervalSet::new(lens[0])
            {
                return Backend::Rbtree(s, RbtreeTxn::default());
            }
            if let Ok(p) = Pipapo::new(&lens) {
                return Backend::Pipapo(p);
            }
        }
        Backend::Hash(HashMap::new())
    }

    fn len(&self) -> usize {
        match self {
            Backend::Hash(h) => h.len(),
            Backend::Rbtree(s, _) => s.len(),
            Backend::Pipapo(p) => p.len(),
        }
    }

    /// Insert; `Ok(true)` when the element is new, `Ok(false)` for an identical one under
    /// `add`, `Err(message)` as nft words the refusal.
    fn insert(&mut self, e: &SetElem, how: Adding) -> Result<bool, &'static str> {
        let create = how == Adding::Create;
        let (lo, hi) = bounds(&e.key);
        let mode = if create {
            InsertMode::Create
        } else {
            InsertMode::Add
        };
        let new = NewElem {
            start: &lo[..],
            end: (lo != hi).then_some(&hi[..]),
            data: 0,
            expires: None,
            ext: fingerprint(&e.data),
        };
        match self {
            Backend::Hash(h) => match h.get(&lo[..]) {
                Some(d) if create || *d != new.ext => Err(EXISTS),
                Some(_) => Ok(false),
                None => {
                    h.insert(Key::from_slice(&lo), new.ext);
                    Ok(true)
                }
            },
            Backend::Rbtree(s, txn) => {
                if let Some(i) = txn
                    .deleted
                    .iter()
                    .position(|((a, b), _)| *a == lo && *b == hi)
                {
                    if create && txn.deleted[i].1 {
                        return Err(EXISTS);
                    }
                    txn.deleted.remove(i);
                } else if txn.deleted.iter().any(|((a, b), _)| *a <= hi && lo <= *b) {
                    return Err("interval overlaps with an existing one");
                }
                let before = s.len();
                match s.insert(new, mode, 0) {
                    Ok(h) => {
                        if s.len() == before {
                            let old = s.elem(h).map(|x| *x.ext);
                            if old != Some(fingerprint(&e.data)) {
                                return Err(EXISTS);
                            }
                            return Ok(false);
                        }
                        txn.added.push(((lo, hi), how == Adding::Declared));
                        Ok(true)
                    }
                    Err(SetError::Exists(_)) => Err(EXISTS),
                    Err(SetError::InvalidRange { .. }) => Err("Range has zero or negative size"),
                    Err(_) => Err("conflicting intervals specified"),
                }
            }
            Backend::Pipapo(p) => {
                let before = p.len();
                match p.insert(new, mode, 0) {
                    Ok(h) => {
                        if p.len() == before {
                            let old = p.elem(h).map(|x| *x.ext);
                            if old != Some(fingerprint(&e.data)) {
                                return Err(EXISTS);
                            }
                            return Ok(false);
                        }
                        Ok(true)
                    }
                    Err(SetError::InvalidRange { .. }) => Err("Range has zero or negative size"),
                    Err(_) => Err(EXISTS),
                }
            }
        }
    }

    /// Delete; returns the removed element's bounds. `cancel`: an rbtree range added in this
    /// transaction goes as if it had never been added (nft's `auto-merge` replaces such a
    /// range in its own batch before the kernel sees it), not in the way of later adds.
    fn delete(&mut self, e: &SetElem, cancel: bool) -> Result<(Vec<u8>, Vec<u8>), &'static str> {
        let (lo, hi) = bounds(&e.key);
        match self {
            Backend::Hash(h) => match h.remove(&lo[..]) {
                Some(_) => Ok((lo.clone(), lo)),
                None => Err(NOT_FOUND),
            },
            Backend::Rbtree(s, txn) => match s.delete(&lo, Some(&hi), 0) {
                Ok(x) => {
                    let b = (x.start.to_vec(), x.end.to_vec());
                    if let Some(i) = txn.added.iter().position(|(a, _)| *a == b) {
                        let (_, declared) = txn.added.remove(i);
                        if !cancel {
                            txn.deleted.push((b.clone(), declared));
                        }
                    }
                    Ok(b)
                }
                Err(_) => Err(NOT_FOUND),
            },
            Backend::Pipapo(p) => match p.delete(&lo, 0) {
                Ok(x) => Ok((x.start.into(), x.end.into())),
                Err(_) => Err(NOT_FOUND),
            },
        }
    }

    fn flush(&mut self) {
        match self {
            Backend::Hash(h) => h.clear(),
            Backend::Rbtree(s, txn) => {
                s.flush();
                *txn = RbtreeTxn::default();
            }
            Backend::Pipapo(p) => p.flush(),
        }
    }
}

/// What the kernel holds of a set during a transaction: its back-end's elements and the
/// catch-all element, which lives beside the back-end (`nft_set_catchall_*`).
#[derive(Debug, Clone)]
pub(crate) struct Shadow {
    /// The back-end's elements.
    store: Store,
    /// The catch-all element `*` and its data, when the set has one.
    catch_all: Option<Option<ElemData>>,
}

/// Where a shadow's elements are.
#[derive(Debug, Clone)]
enum Store {
    /// In a back-end of its own (a view built from the model).
    Own(Box<Backend>),
    /// In the running program, with this transaction's changes here.
    Running(Box<Running>),
}

impl Shadow {
    /// The empty shadow of `set`.
    fn new(set: &SetDecl) -> Shadow {
        Shadow {
            store: Store::Own(Box::new(Backend::new(set))),
            catch_all: None,
        }
    }

    /// The shadow of set `si` of table `ti` as `oracle` holds it, with no change yet.
    fn running(set: &SetDecl, ti: usize, si: usize, base: usize, catch_all: bool) -> Shadow {
        Shadow {
            store: Store::Running(Box::new(Running {
                ti,
                si,
                base,
                flushed: false,
                deleted: Vec::new(),
                added: Backend::new(set),
            })),
            // A set checked against the program has no data (see `checked_by_program`).
            catch_all: catch_all.then_some(None),
        }
    }

    fn len(&self) -> usize {
        let n = match &self.store {
            Store::Own(b) => b.len(),
            Store::Running(r) => r.len(),
        };
        n + usize::from(self.catch_all.is_some())
    }

    /// Whether the rbtree range `b` was added in this transaction (and is still held).
    fn added_here(&self, b: &Bounds) -> bool {
        let backend = match &self.store {
            Store::Own(b) => &**b,
            Store::Running(r) => &r.added,
        };
        matches!(backend, Backend::Rbtree(_, txn) if txn.added.iter().any(|(a, _)| a == b))
    }

    /// `true` for a single-field interval set (the kernel's rbtree).
    fn is_rbtree(&self) -> bool {
        match &self.store {
            Store::Own(b) => matches!(**b, Backend::Rbtree(..)),
            Store::Running(r) => matches!(r.added, Backend::Rbtree(..)),
        }
    }

    /// `true` when the running program holds its elements.
    fn is_running(&self) -> bool {
        matches!(self.store, Store::Running(_))
    }

    /// As [`Backend::insert`]; the catch-all as the kernel's `nft_setelem_catchall_insert`
    /// (a second one is "File exists" under `create` or with other data). [`Undecided`] only
    /// for a shadow of the running program (asked through `oracle`).
    fn insert(
        &mut self,
        e: &SetElem,
        how: Adding,
        oracle: Option<&dyn SetOracle>,
    ) -> Result<Result<bool, &'static str>, Undecided> {
        if !e.is_catch_all() {
            return match (&mut self.store, oracle) {
                (Store::Own(b), _) => Ok(b.insert(e, how)),
                (Store::Running(r), Some(o)) => r.insert(o, e, how),
                (Store::Running(_), None) => Err(Undecided),
            };
        }
        Ok(match &self.catch_all {
            Some(d) if how == Adding::Create || *d != e.data => Err(EXISTS),
            Some(_) => Ok(false),
            None => {
                self.catch_all = Some(e.data.clone());
                Ok(true)
            }
        })
    }

    /// As [`Backend::delete`]; the catch-all has empty bounds.
    fn delete(
        &mut self,
        e: &SetElem,
        oracle: Option<&dyn SetOracle>,
        cancel: bool,
    ) -> Result<Result<Bounds, &'static str>, Undecided> {
        if !e.is_catch_all() {
            return match (&mut self.store, oracle) {
                (Store::Own(b), _) => Ok(b.delete(e, cancel)),
                (Store::Running(r), Some(o)) => r.delete(o, e, cancel),
                (Store::Running(_), None) => Err(Undecided),
            };
        }
        Ok(match self.catch_all.take() {
            Some(_) => Ok((Vec::new(), Vec::new())),
            None => Err(NOT_FOUND),
        })
    }

    fn flush(&mut self) {
        match &mut self.store {
            Store::Own(b) => b.flush(),
            Store::Running(r) => {
                r.flushed = true;
                r.deleted.clear();
                r.added.flush();
            }
        }
        self.catch_all = None;
    }

    /// Give back the back-end's spare capacity (a view just built from the model).
    fn shrink_to_fit(&mut self) {
        let Store::Own(b) = &mut self.store else {
            return;
        };
        match &mut **b {
            Backend::Hash(h) => h.shrink_to_fit(),
            Backend::Rbtree(s, _) => s.shrink_to_fit(),
            Backend::Pipapo(p) => p.shrink_to_fit(),
        }
    }

    /// Forget what only lasts for one transaction (the rbtree's ranges deleted in it).
    fn end_transaction(&mut self) {
        if let Store::Own(b) = &mut self.store
            && let Backend::Rbtree(_, txn) = &mut **b
        {
            *txn = RbtreeTxn::default();
        }
    }
}

/// Bytes of a key of `set` as [`bounds`] writes it.
fn key_len(set: &SetDecl) -> usize {
    set.key.iter().map(|t| t.width_bytes()).sum()
}

/// Whether element batches may check `set` against the running program
/// ([`SetOracle`]) instead of a view: a set without data or timeouts (a view compares only
/// keys then), of fixed-width types whose bytes the program keys as the parser does.
fn checked_by_program(set: &SetDecl) -> bool {
    use crate::model::DataType as D;
    let plain = set.key.iter().all(|t| {
        matches!(
            t,
            D::Ipv4Addr | D::Ipv6Addr | D::EtherAddr | D::InetService | D::InetProto | D::Mark
        )
    });
    plain && !set.is_map && set.data.is_none() && !set.flags.timeout && set.timeout_ms.is_none()
}

/// The back-end the kernel picks for `set`, as [`Backend::new`] builds it.
fn backend_of(set: &SetDecl) -> SetBackend {
    match Backend::new(set) {
        Backend::Hash(_) => SetBackend::Hash,
        Backend::Rbtree(..) => SetBackend::Rbtree,
        Backend::Pipapo(_) => SetBackend::Pipapo,
    }
}

/// The kernel back-end's view of each named set, kept from one batch to the next so that a
/// batch of element commands checks its elements against the set without rebuilding it
/// ([`crate::apply_elements`]). Keyed by table and set handle (never reused); a view whose
/// element count differs from its set's is rebuilt from the model when next used. A set that
/// a running program holds ([`SetOracle`]) needs no view: element batches checked against the
/// program keep here only what the batch changed, until it commits or is taken back.
#[derive(Debug, Default)]
pub struct SetShadows(pub(crate) HashMap<ShadowKey, Shadow>, pub(crate) SourceGc);

/// When element batches drop the source files no element uses any more: once the ruleset
/// holds twice as many as after the last time (and at least [`SourceGc::MIN`]), so that a
/// stream of one-element commands pays for one scan of the elements per that many commands.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SourceGc {
    /// Source files after the last drop.
    pub after: usize,
}

impl SourceGc {
    /// Fewest source files worth a scan.
    pub const MIN: usize = 32;

    /// Whether a ruleset holding `n` source files should drop its unused ones now.
    pub fn due(&self, n: usize) -> bool {
        n >= Self::MIN.max(2 * self.after)
    }
}

impl SetShadows {
    /// Views kept: one per named set a batch has checked elements of.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// `true` when no view is kept.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Drop every view (after the ruleset changed by other means than a batch).
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Start a transaction: forget what only lasted for the one before.
    pub(crate) fn begin(&mut self) {
        for s in self.0.values_mut() {
            s.end_transaction();
        }
    }

    /// Drop the views of the sets that element batches check against `oracle` (the running
    /// program compiled from `tables`): it holds their elements, and a view would be a second
    /// copy of them.
    pub fn forget_checked_by(&mut self, tables: &[crate::model::Table], oracle: &dyn SetOracle) {
        for (ti, t) in tables.iter().enumerate() {
            for (si, set) in t.sets.iter().enumerate() {
                if checked_by_program(set)
                    && oracle.len(ti, si, backend_of(set), key_len(set)).is_some()
                {
                    self.0.remove(&(t.handle, set.handle));
                }
            }
        }
    }

    /// Drop the shadows that asked the running program: what they kept of a transaction is
    /// in the program once it commits, and gone when it is taken back.
    pub(crate) fn drop_running(&mut self) {
        self.0.retain(|_, s| !s.is_running());
    }

    /// Keep only the views of sets that `tables` still declares.
    pub(crate) fn retain_declared(&mut self, tables: &[crate::model::Table]) {
        let live: std::collections::HashSet<ShadowKey> = tables
            .iter()
            .flat_map(|t| t.sets.iter().map(move |s| (t.handle, s.handle)))
            .collect();
        self.0.retain(|k, _| live.contains(k));
    }
}

/// One element command's effect on the model, as [`crate::ElementTxn`] reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum ElementOp {
    /// `add`/`create element`: the element as the set now holds it (normalized, with the
    /// set's `counter`).
    Add(SetElem),
    /// `delete element`: the element the set held.
    Delete(SetElem),
    /// `flush set`: every element removed.
    Flush,
}

/// How to take one [`ElementOp`] back.
#[derive(Debug)]
pub(crate) enum Undo {
    /// An element was pushed at the end of the set, at this index (`None`: beside the
    /// elements' holder, [`crate::model::Elements::push`]).
    Added(Option<usize>),
    /// The element was removed from this place.
    Removed(Place, Box<SetElem>),
    /// These were the set's elements.
    Flushed(Elements),
}

/// The element commands of a transaction, with what undoes each: (table, set) index, the
/// change, its undo.
pub(crate) type ElementLog = Vec<(usize, usize, ElementOp, Undo)>;

/// Key of a set's shadow: table handle (never reused in a namespace) and set handle.
pub(crate) type ShadowKey = (u64, u64);

impl Parser<'_> {
    /// The shadow of set `si` of table `ti`, rebuilt from the model when missing or stale.
    /// In an element batch checked against the running program ([`SetOracle`]), a set the
    /// program holds gets a shadow that asks it, unless `own` (a view of its own is needed).
    fn shadow(&mut self, ti: usize, si: usize, own: bool) -> &mut Shadow {
        let k = self.fresh_shadow(ti, si, own);
        self.st.shadows.get_mut(&k).expect("made by fresh_shadow")
    }

    /// [`Parser::shadow`]'s work: makes the shadow when missing or stale, returns its key.
    fn fresh_shadow(&mut self, ti: usize, si: usize, own: bool) -> ShadowKey {
        let t = &self.st.tables[ti];
        let set = &t.sets[si];
        let k = (t.handle, set.handle);
        let fresh = self
            .st
            .shadows
            .get(&k)
            .is_some_and(|s| s.len() == set.elements.len() && !(own && s.is_running()));
        if !fresh {
            let running = match &self.st.oracle {
                Some(o) if !own && checked_by_program(set) => o
                    .len(ti, si, backend_of(set), key_len(set))
                    .filter(|&(n, c)| n + usize::from(c) == set.elements.len()),
                _ => None,
            };
            let s = match running {
                Some((n, catch_all)) => Shadow::running(set, ti, si, n, catch_all),
                None => {
                    let mut s = Shadow::new(set);
                    for e in &set.elements {
                        let _ = s.insert(&e, Adding::Declared, None);
                    }
                    // The model's elements are not this transaction's.
                    s.end_transaction();
                    s.shrink_to_fit();
                    s
                }
            };
            self.st.shadows.insert(k, s);
        }
        k
    }

    /// Run `f` on the shadow of set `si` of table `ti` with the batch's oracle; when the
    /// running program's shadow cannot decide, again on a view built from the model (which
    /// always decides: `None` would mean it did not).
    fn with_shadow<R>(
        &mut self,
        ti: usize,
        si: usize,
        f: impl Fn(&mut Shadow, Option<&dyn SetOracle>) -> Result<R, Undecided>,
    ) -> Option<R> {
        let k = self.fresh_shadow(ti, si, false);
        let shadow = self.st.shadows.get_mut(&k)?;
        match f(shadow, self.st.oracle.as_deref()) {
            Ok(r) => Some(r),
            Err(Undecided) => f(self.shadow(ti, si, true), None).ok(),
        }
    }

    /// `add element` / `create element` (and a declaration's `elements = { ... }`): insert each
    /// element in order with the back-end's rules; an identical element under `add` is kept
    /// once. Errors: the first refused element, at its span, as nft words it.
    pub(super) fn insert_elements(
        &mut self,
        ti: usize,
        si: usize,
        elems: Vec<SetElem>,
        how: Adding,
    ) -> PResult<()> {
        let elems = if self.st.tables[ti].sets[si].merges_elements() {
            self.auto_merge(ti, si, elems, how)?
        } else {
            elems
        };
        let size = self.st.tables[ti].sets[si].size;
        let counter = self.st.tables[ti].sets[si].counter;
        let timeouts = self.st.tables[ti].sets[si].flags.timeout;
        for e in elems {
            let mut e = normalize(e);
            if !timeouts && (e.timeout_ms().is_some() || e.expires_ms().is_some()) {
                // NFT_SET_EXT_TIMEOUT on a set without NFT_SET_TIMEOUT: EINVAL.
                return Err(self.st.error(e.span, INVALID));
            }
            // Every element of a set with `counter` has one (nft lists it on each).
            e.counter |= counter;
            let res = self
                .with_shadow(ti, si, |s, o| s.insert(&e, how, o))
                .unwrap_or(Err(INVALID));
            match res {
                Ok(true) => {
                    let held = self.st.tables[ti].sets[si].elements.len();
                    if size.is_some_and(|n| held >= n as usize) {
                        return Err(self.st.error(e.span, FULL));
                    }
                    self.push_element(ti, si, e);
                }
                Ok(false) => self.retime(ti, si, &e),
                Err(m) => return Err(self.st.error(e.span, m)),
            }
        }
        Ok(())
    }

    /// nft's `auto-merge` on elements added to a single-field interval set (nft 1.0.6 with
    /// kernel 6.18, checked with `nft -f` and `nft list set` in a namespace): the new elements
    /// and the set's elements they overlap or touch become one range each. A range that only
    /// covers what one element of the set already holds changes nothing (that element keeps
    /// its timeout, counter and comment; `create` of a part of it, or of the element itself
    /// when it was committed before, is no error; of one this batch added, "File exists").
    /// Otherwise the
    /// set's elements in it are deleted, and the merged range is added with what the lowest
    /// element in it that this batch added carries (timeout, comment, a fresh counter): nft
    /// merges in its own batch, where the elements the kernel holds are older. Returns the
    /// elements to add; the deletes are made here (in the batch: a range added earlier in it
    /// is replaced as if never added, as nft replaces it in its own batch).
    fn auto_merge(
        &mut self,
        ti: usize,
        si: usize,
        elems: Vec<SetElem>,
        how: Adding,
    ) -> PResult<Vec<SetElem>> {
        // A merging set's elements are listed (only sets of plain keys that do not merge are
        // held); the sweep below reads them by index.
        self.st.tables[ti].sets[si].elements.to_mut();
        let k = self.fresh_shadow(ti, si, false);
        let shadow = &self.st.shadows[&k];
        let set = &self.st.tables[ti].sets[si];
        let dtype = set.key[0];
        let listed = set.elements.as_slice().unwrap_or_default();
        let one_range = |e: &SetElem| match e.key.as_slice() {
            [p] if !low_of(p).wildcard => Some(uint_bounds(p)),
            _ => None,
        };
        let Some(mut new) = elems
            .iter()
            .enumerate()
            .map(|(i, e)| one_range(e).map(|(lo, hi)| (lo, hi, i)))
            .collect::<Option<Vec<_>>>()
        else {
            // A wildcard name or the catch-all: added as written.
            return Ok(elems);
        };
        // An inverted range is refused as written, by the back-end.
        if new.iter().any(|&(lo, hi, _)| lo > hi) {
            return Ok(elems);
        }
        new.sort_unstable();
        // The new elements' union as disjoint ranges in order (new elements may overlap each
        // other), to find the set's elements that meet them by a binary search.
        let mut spans: Vec<(u128, u128)> = Vec::new();
        for &(lo, hi, _) in &new {
            match spans.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => spans.push((lo, hi)),
            }
        }
        // The set's elements that meet a new one: (bounds, index in the set).
        let touches = |lo: u128, hi: u128| {
            let i = spans.partition_point(|n| n.1.saturating_add(1) < lo);
            spans.get(i).is_some_and(|n| n.0 <= hi.saturating_add(1))
        };
        let mut old: Vec<(u128, u128, usize)> = listed
            .iter()
            .enumerate()
            .filter_map(|(j, e)| {
                let (lo, hi) = one_range(e)?;
                touches(lo, hi).then_some((lo, hi, j))
            })
            .collect();
        old.sort_unstable();
        // Sweep the new ranges and the set's (both sorted by start) into clusters.
        #[derive(Clone, Copy)]
        enum Elem {
            /// Of the new elements.
            New(usize),
            /// Of the set's elements, added earlier in this batch.
            Batch(usize),
        }
        struct Cluster {
            lo: u128,
            hi: u128,
            /// The lowest element in it that this batch adds.
            first_new: Option<Elem>,
            /// The new elements in it.
            news: Vec<usize>,
            /// The set's elements in it.
            old: Vec<usize>,
        }
        let young = |j: usize| shadow.added_here(&bounds(&listed[j].key));
        let mut clusters: Vec<Cluster> = Vec::new();
        let (mut a, mut b) = (new.iter().peekable(), old.iter().peekable());
        loop {
            let (lo, hi, new_i, old_j) = match (a.peek(), b.peek()) {
                (Some(n), Some(o)) if n.0 <= o.0 => (n.0, n.1, Some(n.2), None),
                (_, Some(o)) => (o.0, o.1, None, Some(o.2)),
                (Some(n), None) => (n.0, n.1, Some(n.2), None),
                (None, None) => break,
            };
            if new_i.is_some() {
                a.next();
            } else {
                b.next();
            }
            let batch = new_i
                .map(Elem::New)
                .or_else(|| old_j.filter(|&j| young(j)).map(Elem::Batch));
            match clusters.last_mut() {
                Some(c) if lo <= c.hi.saturating_add(1) => {
                    c.hi = c.hi.max(hi);
                    c.first_new = c.first_new.or(batch);
                    c.news.extend(new_i);
                    c.old.extend(old_j);
                }
                _ => clusters.push(Cluster {
                    lo,
                    hi,
                    first_new: batch,
                    news: new_i.into_iter().collect(),
                    old: old_j.into_iter().collect(),
                }),
            }
        }
        let mut gone = Vec::new();
        let mut add = Vec::new();
        for c in clusters {
            if c.news.is_empty() {
                continue;
            }
            if let [j] = c.old[..] {
                let held = one_range(&listed[j]);
                if held == Some((c.lo, c.hi)) {
                    // `create` of an element this batch added is "File exists" (nft 1.0.6:
                    // of one committed before, or of a part of it, no error).
                    let same = c.news.iter().find(|&&i| one_range(&elems[i]) == held);
                    if let (Adding::Create, Some(&i), true) = (how, same, young(j)) {
                        return Err(self.st.error(elems[i].span, EXISTS));
                    }
                    continue;
                }
            }
            gone.extend(c.old.iter().map(|&j| listed[j].clone()));
            let value = |n| crate::datatypes::from_uint(dtype, n).ok();
            let mut e = match c.first_new {
                Some(Elem::Batch(j)) => listed[j].clone(),
                Some(Elem::New(i)) => elems[i].clone(),
                None => continue,
            };
            // A new element that merged with nothing stays as written (`a/len` a prefix).
            if c.news.len() > 1 || !c.old.is_empty() {
                e.key = match (value(c.lo), value(c.hi)) {
                    (Some(lo), _) if c.lo == c.hi => smallvec::smallvec![KeyPart::Value(lo)],
                    (Some(lo), Some(hi)) => smallvec::smallvec![KeyPart::Range(lo, hi)],
                    _ => e.key,
                };
            }
            add.push(e);
        }
        self.remove_elements(ti, si, gone, Removal::Cancel)?;
        Ok(add)
    }

    /// An element added again to a hash set with timeouts takes the new element's timeout,
    /// from now, when it differs (kernel 6.18 with nft 1.0.6: `nft_add_set_elem` updates the
    /// timeout of an element that exists; `timeout 10m` added again as `timeout 1m` lists
    /// `timeout 1m expires 59s...`, added again without one lists none); its comment and
    /// counts stay. The same timeout changes nothing (the time left runs on). In the batch's
    /// log the element is deleted and added again.
    fn retime(&mut self, ti: usize, si: usize, e: &SetElem) {
        let set = &self.st.tables[ti].sets[si];
        if !set.flags.timeout || set.flags.interval || e.is_catch_all() {
            return;
        }
        let b = bounds(&e.key);
        let Some(held) = set.elements.iter().find(|x| has_bounds(&x.key, &b)) else {
            return;
        };
        if held.timeout_ms() == e.timeout_ms() {
            return;
        }
        let Some(mut new) = self.take_element(ti, si, &b) else {
            return;
        };
        let x = new.extra_mut();
        x.timeout_ms = e.timeout_ms();
        x.expires_ms = None;
        self.push_element(ti, si, new);
    }

    /// Add `e` at the end of set `si` of table `ti`, in the batch's log.
    fn push_element(&mut self, ti: usize, si: usize, e: SetElem) {
        let set = &mut self.st.tables[ti].sets[si];
        match self.st.element_log.as_mut() {
            Some(log) => {
                let at = set.elements.push(e.clone());
                log.push((ti, si, ElementOp::Add(e), Undo::Added(at)));
            }
            None => {
                set.elements.push(e);
            }
        }
    }

    /// Remove the element of bounds `b` from set `si` of table `ti`, in the batch's log;
    /// returns it (`None` when the set holds none).
    fn take_element(&mut self, ti: usize, si: usize, b: &Bounds) -> Option<SetElem> {
        let (gone, at) = self.st.tables[ti].sets[si]
            .elements
            .remove(&b.0, &b.1, |x| has_bounds(&x.key, b))?;
        if let Some(log) = self.st.element_log.as_mut() {
            log.push((
                ti,
                si,
                ElementOp::Delete(gone.clone()),
                Undo::Removed(at, Box::new(gone.clone())),
            ));
        }
        Some(gone)
    }

    /// `delete element` (`destroy`: `destroy element`, where an element the set does not hold
    /// is no error, as the kernel's NFT_MSG_DESTROYSETELEM): remove each element as the
    /// back-end keys it.
    pub(super) fn delete_elements(
        &mut self,
        ti: usize,
        si: usize,
        elems: Vec<SetElem>,
        destroy: bool,
    ) -> PResult<()> {
        let how = if destroy {
            Removal::Destroy
        } else {
            Removal::Delete
        };
        self.remove_elements(ti, si, elems, how)
    }

    /// [`Parser::delete_elements`], or the cancel of `auto-merge` ([`Backend::delete`]'s).
    fn remove_elements(
        &mut self,
        ti: usize,
        si: usize,
        elems: Vec<SetElem>,
        how: Removal,
    ) -> PResult<()> {
        let cancel = how == Removal::Cancel;
        for e in elems {
            let res = self
                .with_shadow(ti, si, |s, o| s.delete(&e, o, cancel))
                .unwrap_or(Err(INVALID));
            match res {
                Ok(b) => {
                    self.take_element(ti, si, &b);
                }
                Err(NOT_FOUND) if how == Removal::Destroy => {}
                Err(m) => {
                    // nft 1.0.6 checks a single-field interval set against its cache first.
                    let m = if self.shadow(ti, si, false).is_rbtree() {
                        "element does not exist"
                    } else {
                        m
                    };
                    return Err(self.st.error(e.span, m));
                }
            }
        }
        Ok(())
    }

    /// The kernel's acceptance of an anonymous set or map written in a rule (nft 1.0.6 +
    /// kernel 6.18, `nft -c -f`): a single-field set without data merges overlapping ranges
    /// (accepted); a single-field map refuses any overlap ("conflicting intervals
    /// specified"); concatenations with ranges follow pipapo's rules; exact keys the hash's
    /// (a map key given twice with other data: "File exists"). Returns the elements the kernel
    /// holds: an element given again identically is held once (`{ 22, 22 }` lists as `{ 22 }`).
    pub(super) fn check_anonymous(
        &mut self,
        key: &[crate::model::DataType],
        elems: Vec<SetElem>,
        is_map: bool,
    ) -> PResult<Vec<SetElem>> {
        let interval = elems.iter().any(|e| {
            e.key
                .iter()
                .any(|p| !matches!(p, KeyPart::Value(v) if !v.wildcard))
        });
        if interval && key.len() == 1 && !is_map {
            return Ok(elems);
        }
        let decl = SetDecl {
            name: String::new(),
            handle: 0,
            is_map,
            key: key.to_vec(),
            key_typeof: None,
            data_typeof: None,
            data: None,
            data_tail: Vec::new(),
            flags: crate::model::SetFlags {
                interval,
                ..Default::default()
            },
            timeout_ms: None,
            gc_interval_ms: None,
            size: None,
            counter: false,
            elements: Elements::default(),
            comment: None,
            span: crate::model::Span::default(),
        };
        let mut shadow = Shadow::new(&decl);
        let mut held = Vec::with_capacity(elems.len());
        for e in elems {
            match shadow.insert(&normalize(e.clone()), Adding::Add, None) {
                Ok(Err(m)) => return Err(self.st.error(e.span, m)),
                Ok(Ok(false)) => {}
                _ => held.push(e),
            }
        }
        Ok(held)
    }

    /// `flush set`: the set's elements and its shadow emptied.
    pub(super) fn flush_elements(&mut self, ti: usize, si: usize) {
        self.shadow(ti, si, false).flush();
        let old = std::mem::take(&mut self.st.tables[ti].sets[si].elements);
        if let Some(log) = self.st.element_log.as_mut() {
            log.push((ti, si, ElementOp::Flush, Undo::Flushed(old)));
        }
    }
}

/// What adds an element ([`Parser::insert_elements`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Adding {
    /// A set declaration's `elements = { ... }` (as `add`).
    Declared,
    /// `add element`: an identical element is kept once.
    Add,
    /// `create element`: an identical element is "File exists".
    Create,
}

/// How [`Parser::remove_elements`] takes elements out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Removal {
    /// `delete element`: a missing element is an error.
    Delete,
    /// `destroy element`: a missing element is skipped.
    Destroy,
    /// `auto-merge` replacing elements it merged (see [`Backend::delete`]'s `cancel`).
    Cancel,
}

/// The low (or only) value of a key part.
fn low_of(p: &KeyPart) -> &Value {
    match p {
        KeyPart::Value(v) | KeyPart::Range(v, _) | KeyPart::Prefix(v, _) => v,
    }
}

/// A single-field key part's first and last value as numbers (a prefix's host bits all 0 and
/// all 1).
fn uint_bounds(p: &KeyPart) -> (u128, u128) {
    use crate::datatypes::to_uint;
    match p {
        KeyPart::Value(v) => (to_uint(v), to_uint(v)),
        KeyPart::Range(a, b) => (to_uint(a), to_uint(b)),
        KeyPart::Prefix(v, n) => {
            let bits = u32::from(v.dtype.width_bits());
            let host = bits.saturating_sub(u32::from(*n));
            let mask = if host >= 128 {
                u128::MAX
            } else {
                (1u128 << host) - 1
            };
            (to_uint(v), to_uint(v) | mask)
        }
    }
}

/// The elements of an anonymous interval set of one field as the kernel holds them: nft
/// merges overlapping and adjacent intervals before it sends the set (`{ 1, 2-5, 7 }` is
/// `{ 1-5, 7 }`; checked with nft 1.0.6). Sets of single values, maps, concatenations and
/// elements with a counter, timeout or comment are left as written.
pub(super) fn merge_anonymous_intervals(elems: Vec<SetElem>) -> Vec<SetElem> {
    let plain = |e: &SetElem| {
        e.key.len() == 1
            && e.data.is_none()
            && !e.counter
            && e.timeout_ms().is_none()
            && e.comment().is_none()
            && !matches!(&e.key[0], KeyPart::Value(v) | KeyPart::Range(v, _) | KeyPart::Prefix(v, _) if v.wildcard)
    };
    let interval = elems
        .iter()
        .any(|e| e.key.iter().any(|p| !matches!(p, KeyPart::Value(_))));
    if !interval || !elems.iter().all(plain) {
        return elems;
    }
    let mut spans: Vec<(u128, u128, usize)> = elems
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let (lo, hi) = uint_bounds(&e.key[0]);
            (lo, hi, i)
        })
        .collect();
    spans.sort();
    let mut merged: Vec<(u128, u128, usize)> = Vec::new();
    for (lo, hi, i) in spans {
        match merged.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi, i)),
        }
    }
    let dtype = match &elems[0].key[0] {
        KeyPart::Value(v) | KeyPart::Range(v, _) | KeyPart::Prefix(v, _) => v.dtype,
    };
    merged
        .into_iter()
        .map(|(lo, hi, i)| {
            let mut e = elems[i].clone();
            let value = |n| {
                crate::datatypes::from_uint(dtype, n).unwrap_or_else(|_| match &elems[i].key[0] {
                    KeyPart::Value(v) | KeyPart::Range(v, _) | KeyPart::Prefix(v, _) => v.clone(),
                })
            };
            e.key = smallvec::smallvec![if lo == hi {
                KeyPart::Value(value(lo))
            } else {
                KeyPart::Range(value(lo), value(hi))
            }];
            e
        })
        .collect()
}
