//! Sets that the packet path changes: the named sets of `add @s { ... }`, `update @s { ... }`
//! and `delete @s { ... }` (the kernel's nft_dynset over an `nft_set_hash`). Exact keys only,
//! as the kernel's: interval sets have no update from the packet path.
//!
//! Contract, as nft_dynset_eval:
//! - `add` inserts the key when it is not there (or has expired), with the statement's
//!   `timeout` or else the set's; an element that is there is left as it is. `update` also
//!   refreshes the expiry of an element that has one. `delete` removes the key.
//! - A set holding `size` live elements refuses a new one: the rule stops (NFT_BREAK).
//! - The element's own statements (`limit`, `quota`, `counter`) run for the packet on the
//!   element found or added, with state per element; a `limit` beyond its rate or a `quota`
//!   beyond its bytes stops the rule.
//! - Lookups (`ip saddr @s`, `meta mark set ip saddr map @m`) see every change at once.
//!
//! The set is shared by every worker's engine (through [`crate::Stateful`]); a lookup takes
//! the set's read lock, a change its write lock.

use std::collections::HashMap;

use parking_lot::RwLock;
use wasp_ruleset::model::{Limit, Quota, SetOp};

use crate::compiled;
use crate::stateful::{Bucket, QuotaState};

/// One element of a [`DynSet`].
#[derive(Debug)]
struct DynElem {
    elem: compiled::Elem,
    /// One bucket per `limit` of the statement that added it.
    limits: Box<[Bucket]>,
    /// One per `quota` of the statement that added it.
    quotas: Box<[QuotaState]>,
    /// `counter`: packets and bytes.
    counted: (u64, u64),
    /// The element counts (its statement's `counter`, or the set's).
    counts: bool,
    /// The timeout the element was given (ns; 0: the set's, or none).
    timeout_ns: u64,
}

impl DynElem {
    /// An element a ruleset or an element command put in: no statement state yet.
    fn declared(elem: compiled::Elem) -> DynElem {
        DynElem {
            elem,
            limits: Box::new([]),
            quotas: Box::new([]),
            counted: (0, 0),
            counts: false,
            timeout_ns: 0,
        }
    }
}

/// One live element of a set the packet path changes, as `nft list set` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynElemView {
    /// The key: each field's bytes, big-endian, in the set's field widths.
    pub key: Box<[u8]>,
    /// The element's own timeout in ns when a statement gave one other than the set's (0:
    /// none to show).
    pub timeout_ns: u64,
    /// Time left before it expires, in ns (`None`: it does not expire).
    pub expires_in_ns: Option<u64>,
    /// Packets and bytes it counted, when it counts.
    pub counted: Option<(u64, u64)>,
}

/// A named set changed from the packet path.
#[derive(Debug)]
pub(crate) struct DynSet {
    /// At most this many live elements (the set's `size`; 65535 when it has none, as
    /// nft_dynset_init).
    max: usize,
    /// The set's `timeout` in ns (0: none).
    timeout_ns: u64,
    /// The set is declared with `counter`: every element counts.
    counter: bool,
    elems: RwLock<HashMap<Box<[u8]>, DynElem>>,
}

/// What a set statement does, compiled ([`crate::compiled::Op::SetUpdate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SetUpdate {
    /// The operation.
    pub op: SetOp,
    /// Index into [`crate::Stateful`]'s dynamic sets.
    pub set: u32,
    /// The statement's `timeout` in ns (0: the set's).
    pub timeout_ns: u64,
    /// The element's `limit`s.
    pub limits: Box<[Limit]>,
    /// The element's `quota`s.
    pub quotas: Box<[Quota]>,
    /// The element counts packets and bytes.
    pub counter: bool,
}

impl DynSet {
    /// An empty set of at most `max` elements whose elements expire `timeout_ns` after they
    /// are added (0: never, unless the statement gives a timeout).
    pub fn new(max: usize, timeout_ns: u64) -> DynSet {
        DynSet {
            max: max.max(1),
            timeout_ns,
            counter: false,
            elems: RwLock::new(HashMap::new()),
        }
    }

    /// Every element counts packets and bytes (the set's `counter`).
    pub fn with_counter(mut self, on: bool) -> DynSet {
        self.counter = on;
        self
    }

    /// The live elements at `now` (ns after the engine's epoch), in no order.
    pub fn snapshot(&self, now: u64) -> Vec<DynElemView> {
        self.elems
            .read()
            .iter()
            .filter(|(_, e)| now < e.elem.expires)
            .map(|(k, e)| DynElemView {
                key: k.clone(),
                timeout_ns: if e.timeout_ns == self.timeout_ns {
                    0
                } else {
                    e.timeout_ns
                },
                expires_in_ns: (e.elem.expires != u64::MAX).then(|| e.elem.expires - now),
                counted: (e.counts || self.counter).then_some(e.counted),
            })
            .collect()
    }

    /// Take the live elements of `old` (the same set in the running program, at `old_now` ns
    /// after its epoch; this set's epoch is `shift` ns later), with their expiry, counts,
    /// `limit` credit and `quota` bytes: what the packet path added lives on through a
    /// ruleset change, as the kernel's elements of a set the change does not touch. An
    /// element of `old` replaces the declared one of the same key.
    pub fn continue_from(&mut self, old: &DynSet, old_now: u64, shift: u64) {
        let theirs = old.elems.read();
        let ours = self.elems.get_mut();
        for (k, e) in theirs.iter().filter(|(_, e)| old_now < e.elem.expires) {
            let mut elem = e.elem;
            if elem.expires != u64::MAX {
                elem.expires = elem.expires.saturating_sub(shift);
            }
            ours.insert(
                k.clone(),
                DynElem {
                    elem,
                    limits: e.limits.iter().map(|b| b.continuing(shift)).collect(),
                    quotas: e.quotas.iter().map(QuotaState::continuing).collect(),
                    counted: e.counted,
                    counts: e.counts,
                    timeout_ns: e.timeout_ns,
                },
            );
        }
    }

    /// Put a declared element in (`add element` in the ruleset): `key` with `elem`.
    pub fn preload(&mut self, key: &[u8], elem: compiled::Elem) {
        self.elems
            .get_mut()
            .entry(key.into())
            .or_insert_with(|| DynElem::declared(elem));
    }

    /// `add element` to the running set: `key` with `elem` (an element already there keeps
    /// its state, as the kernel's `add` of an existing element). Ignores the set's size, as
    /// the kernel's control plane does for a set without `size`.
    pub fn insert(&self, key: &[u8], elem: compiled::Elem) {
        self.elems
            .write()
            .entry(key.into())
            .or_insert_with(|| DynElem::declared(elem));
    }

    /// `delete element` from the running set.
    pub fn remove(&self, key: &[u8]) {
        self.elems.write().remove(key);
    }

    /// `flush set` of the running set.
    pub fn clear(&self) {
        self.elems.write().clear();
    }

    /// The live element holding `key` at `now` (ns after the engine's epoch).
    pub fn lookup(&self, key: &[u8], now: u64) -> Option<compiled::Elem> {
        let m = self.elems.read();
        let e = m.get(key)?;
        (now < e.elem.expires).then_some(e.elem)
    }

    /// Live elements at `now`.
    #[cfg(test)]
    pub fn len(&self, now: u64) -> usize {
        self.elems
            .read()
            .values()
            .filter(|e| now < e.elem.expires)
            .count()
    }

    /// Run set statement `u` for a packet of `len_bytes` with key `key` (and map data
    /// `value`) at `now` (ns after the epoch; `clock` the packet clock of the limits): `true`
    /// when the rule goes on.
    pub fn apply(
        &self,
        u: &SetUpdate,
        key: &[u8],
        value: u32,
        now: u64,
        clock: u64,
        len_bytes: u32,
    ) -> bool {
        let mut m = self.elems.write();
        if u.op == SetOp::Delete {
            m.remove(key);
            return true;
        }
        let timeout = if u.timeout_ns != 0 {
            u.timeout_ns
        } else {
            self.timeout_ns
        };
        let expiry = |t: u64| {
            if t == 0 {
                u64::MAX
            } else {
                now.saturating_add(t)
            }
        };
        let live = m.get(key).is_some_and(|e| now < e.elem.expires);
        if live {
            if u.op == SetOp::Update
                && let Some(e) = m.get_mut(key)
                && e.elem.expires != u64::MAX
                && timeout != 0
            {
                e.elem.expires = expiry(timeout);
            }
        } else {
            if m.len() >= self.max {
                m.retain(|_, e| now < e.elem.expires);
                if m.len() >= self.max {
                    return false;
                }
            }
            m.insert(
                key.into(),
                DynElem {
                    elem: compiled::Elem {
                        verdict: 0,
                        value,
                        expires: expiry(timeout),
                        counter: 0,
                        origin: 0,
                    },
                    limits: u.limits.iter().map(Bucket::new).collect(),
                    quotas: u.quotas.iter().map(QuotaState::new).collect(),
                    counted: (0, 0),
                    counts: u.counter,
                    timeout_ns: timeout,
                },
            );
        }
        let Some(e) = m.get_mut(key) else {
            return false;
        };
        if u.counter || self.counter {
            e.counted.0 += 1;
            e.counted.1 += u64::from(len_bytes);
        }
        e.limits.iter().all(|b| b.eval(clock, len_bytes))
            && e.quotas.iter().all(|q| q.eval(len_bytes))
    }

    /// Packets and bytes the element holding `key` counted (`counter` in its statement).
    #[cfg(test)]
    pub fn counted(&self, key: &[u8]) -> Option<(u64, u64)> {
        self.elems.read().get(key).map(|e| e.counted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stmt(op: SetOp, timeout_ns: u64) -> SetUpdate {
        SetUpdate {
            op,
            set: 0,
            timeout_ns,
            limits: Box::new([]),
            quotas: Box::new([]),
            counter: true,
        }
    }

    #[test]
    fn add_keeps_update_refreshes_delete_removes() {
        let s = DynSet::new(10, 0);
        let add = stmt(SetOp::Add, 100);
        assert!(s.apply(&add, b"k", 7, 0, 0, 60));
        assert_eq!(
            s.lookup(b"k", 50).map(|e| (e.value, e.expires)),
            Some((7, 100))
        );
        // Add again: the element keeps its expiry (and its data).
        assert!(s.apply(&add, b"k", 9, 50, 0, 60));
        assert_eq!(
            s.lookup(b"k", 60).map(|e| (e.value, e.expires)),
            Some((7, 100))
        );
        assert_eq!(s.counted(b"k"), Some((2, 120)));
        // Update refreshes it from now.
        assert!(s.apply(&stmt(SetOp::Update, 100), b"k", 9, 80, 0, 60));
        assert_eq!(s.lookup(b"k", 150).map(|e| e.expires), Some(180));
        // Expired: gone for lookups, and added anew with fresh state.
        assert_eq!(s.lookup(b"k", 180), None);
        assert!(s.apply(&add, b"k", 3, 200, 0, 60));
        assert_eq!(s.counted(b"k"), Some((1, 60)));
        assert!(s.apply(&stmt(SetOp::Delete, 0), b"k", 0, 210, 0, 60));
        assert_eq!(s.lookup(b"k", 210), None);
    }

    #[test]
    fn a_full_set_refuses_new_keys_until_one_expires() {
        let s = DynSet::new(2, 0);
        let add = stmt(SetOp::Add, 100);
        assert!(s.apply(&add, b"a", 0, 0, 0, 1));
        assert!(s.apply(&add, b"b", 0, 10, 0, 1));
        assert!(!s.apply(&add, b"c", 0, 20, 0, 1), "full: the rule stops");
        assert!(
            s.apply(&add, b"a", 0, 20, 0, 1),
            "a key that is there still passes"
        );
        assert!(s.apply(&add, b"c", 0, 100, 0, 1), "`a` expired at 100");
        assert_eq!(s.len(100), 2);
    }

    #[test]
    fn each_element_has_its_own_limit() {
        let lim = Limit {
            rate: 1,
            per_secs: 1,
            burst: 1,
            bytes: false,
            over: false,
        };
        let u = SetUpdate {
            limits: Box::new([lim]),
            ..stmt(SetOp::Update, 0)
        };
        let s = DynSet::new(10, 0);
        assert!(s.apply(&u, b"a", 0, 0, 1_000, 1));
        assert!(!s.apply(&u, b"a", 0, 0, 1_001, 1), "a's bucket is empty");
        assert!(s.apply(&u, b"b", 0, 0, 1_002, 1), "b has its own");
    }
}
