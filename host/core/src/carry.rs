//! What a ruleset change keeps: the counters and quotas of a new program that continue those of
//! the running one, so that a packet counted by the running configuration stays counted after
//! the change and no packet is counted twice.
//!
//! An object continues when the kernel would keep it across the same change: the same table
//! (by handle: a table deleted and declared again, and every table after `flush ruleset`, is a
//! new one, whose counts start from what the text says), the same rule (by handle) and its
//! `nth` `counter` or `quota`, the same named object (by handle: deleted and added again is
//! new), the same element (by key) of the same named set (by handle) or of the same rule's
//! `nth` anonymous set. Element ids may differ between the two programs (an element deleted
//! before it shifts them): the plan maps them.
//!
//! Counters live in the workers' plugin instances, so the control side only plans
//! ([`CounterCarry`]); each worker moves its own counts at the moment it switches programs
//! (between two vectors), which is what makes the carry exact. Quotas live in the shared
//! [`crate::Stateful`]: a continuing quota shares its consumed-bytes cell with the running one
//! ([`Engine::carry_quotas`]).

use std::collections::HashMap;
use std::sync::Arc;

use wasp_ruleset::Ruleset;
use wasp_ruleset::model::{KeyPart, Table};

use crate::dynset::DynElemView;
use crate::engine::Engine;
use crate::ext::CounterUse;
use crate::stateful::QuotaOwner;

/// The identity of one counted thing across ruleset changes (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CountKey {
    /// The `nth` counter (or quota) statement of rule `rule` in table `table`.
    Rule {
        /// Table handle.
        table: u64,
        /// Rule handle (unique in its table).
        rule: u64,
        /// Which of the rule's statements of that kind (from 0).
        nth: u32,
    },
    /// A named counter or quota object.
    Object {
        /// Table handle.
        table: u64,
        /// Object handle.
        object: u64,
    },
    /// One element of a named set.
    Elem {
        /// Table handle.
        table: u64,
        /// Set handle.
        set: u64,
        /// The element's key.
        key: Vec<KeyPart>,
    },
    /// One element of the `nth` anonymous set of rule `rule`.
    AnonElem {
        /// Table handle.
        table: u64,
        /// Rule handle.
        rule: u64,
        /// Which anonymous set of the rule (from 0).
        nth: u32,
        /// The element's key.
        key: Vec<KeyPart>,
    },
}

/// One counter site of the new program that continues counts of the old one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteCarry {
    /// The site in the new program.
    pub site: u32,
    /// `(new elem, old site, old elem)`: entry `new elem` of the site (0: the site's own
    /// count, `id + 1`: an element's) continues entry `old elem` of `old site`.
    pub entries: Vec<(u32, u32, u32)>,
}

/// Which counter sites of a new program continue which counts of the running one. Built on the
/// control side ([`CounterCarry::plan`]); each worker applies it to its own plugin instances
/// when it switches programs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CounterCarry {
    /// In new-site order.
    pub sites: Vec<SiteCarry>,
}

impl CounterCarry {
    /// The carry from `old` (compiled from `old_model`) to `new` (compiled from `new_model`):
    /// every counted thing of `new` whose [`CountKey`] `old` has too. O(sites + counted
    /// elements) of both programs.
    pub fn plan(old: &Engine, old_model: &Ruleset, new: &Engine, new_model: &Ruleset) -> Self {
        let before: HashMap<CountKey, (u32, u32)> = old
            .counter_keys(old_model)
            .into_iter()
            .map(|(k, site, elem)| (k, (site, elem)))
            .collect();
        let mut sites: Vec<SiteCarry> = Vec::new();
        for (k, site, elem) in new.counter_keys(new_model) {
            let Some(&(old_site, old_elem)) = before.get(&k) else {
                continue;
            };
            match sites.last_mut() {
                Some(s) if s.site == site => s.entries.push((elem, old_site, old_elem)),
                _ => sites.push(SiteCarry {
                    site,
                    entries: vec![(elem, old_site, old_elem)],
                }),
            }
        }
        CounterCarry { sites }
    }

    /// `true` when nothing continues.
    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }

    /// The old sites the carry reads, each once, ascending.
    pub fn old_sites(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .sites
            .iter()
            .flat_map(|s| s.entries.iter().map(|e| e.1))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

impl Engine {
    /// Every counted thing of this engine (compiled from `model`) with its identity: `(key,
    /// site, elem)`, `elem` 0 for a site's own count and the element's counter slot for an element's, in
    /// site order.
    pub fn counter_keys(&self, model: &Ruleset) -> Vec<(CountKey, u32, u32)> {
        let th = |t: u32| model.tables.get(t as usize);
        let mut out = Vec::new();
        for (site, u) in self.counter_uses() {
            match u {
                CounterUse::Rule {
                    table, handle, nth, ..
                } => {
                    if let Some(t) = th(*table) {
                        let k = CountKey::Rule {
                            table: t.handle,
                            rule: *handle,
                            nth: *nth,
                        };
                        out.push((k, site, 0));
                    }
                }
                CounterUse::Object { table, name } => {
                    if let Some(t) = th(*table)
                        && let Some(o) = t.counters.iter().find(|o| &o.name == name)
                    {
                        let k = CountKey::Object {
                            table: t.handle,
                            object: o.handle,
                        };
                        out.push((k, site, 0));
                    }
                }
                CounterUse::Set {
                    table,
                    set,
                    elements,
                } => {
                    let Some(t) = th(*table) else { continue };
                    let Some(s) = t.sets.iter().find(|s| &s.name == set) else {
                        continue;
                    };
                    for &(e, slot) in &elements.elements {
                        if let Some(el) = s.elements.get(e) {
                            let k = CountKey::Elem {
                                table: t.handle,
                                set: s.handle,
                                key: el.key.to_vec(),
                            };
                            out.push((k, site, slot));
                        }
                    }
                }
                CounterUse::AnonSet {
                    table,
                    chain,
                    handle,
                    nth,
                    elements,
                } => {
                    let Some(t) = th(*table) else { continue };
                    let Some(keys) = anon_set_keys(t, *chain, *handle, *nth) else {
                        continue;
                    };
                    for &e in elements {
                        if let Some(key) = keys.get(e) {
                            let k = CountKey::AnonElem {
                                table: t.handle,
                                rule: *handle,
                                nth: *nth,
                                key: key.clone(),
                            };
                            out.push((k, site, e as u32 + 1));
                        }
                    }
                }
            }
        }
        out
    }

    /// Let every quota of this engine that continues one of `old`'s (same [`CountKey`];
    /// `old` compiled from `old_model`, this engine from `new_model`) share `old`'s
    /// consumed-bytes cell, so that bytes consumed under either program count once, whenever
    /// the workers switch. Call it before the engine's state is shared with other engines
    /// ([`Engine::share_stateful`]); returns `false` (and changes nothing) when it already is.
    pub fn carry_quotas(&mut self, old: &Engine, old_model: &Ruleset, new_model: &Ruleset) -> bool {
        let before: HashMap<CountKey, usize> = quota_keys(&old.prog.stateful, old_model)
            .into_iter()
            .filter_map(|(i, k)| k.map(|k| (k, i)))
            .collect();
        let keys = quota_keys(&self.prog.stateful, new_model);
        let Some(st) = Arc::get_mut(&mut self.prog.stateful) else {
            return false;
        };
        for (i, k) in keys {
            if let Some(&j) = k.as_ref().and_then(|k| before.get(k)) {
                st.quotas[i].share_consumed(&old.prog.stateful.quotas[j]);
            }
        }
        true
    }
}

/// The identity of each quota of `st` (compiled from `model`), by index.
fn quota_keys(st: &crate::Stateful, model: &Ruleset) -> Vec<(usize, Option<CountKey>)> {
    st.quota_owners
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let k = match o {
                QuotaOwner::Rule {
                    table, handle, nth, ..
                } => model.tables.get(*table as usize).map(|t| CountKey::Rule {
                    table: t.handle,
                    rule: *handle,
                    nth: *nth,
                }),
                QuotaOwner::Object { table, name } => {
                    model.tables.get(*table as usize).and_then(|t| {
                        t.quotas
                            .iter()
                            .find(|q| &q.name == name)
                            .map(|q| CountKey::Object {
                                table: t.handle,
                                object: q.handle,
                            })
                    })
                }
            };
            (i, k)
        })
        .collect()
}

/// The keys of the elements of the `nth` anonymous set of rule `handle` in chain `chain` of
/// `t`. (The model walks anonymous sets mutably only; the rule is cloned, which only rules
/// whose anonymous sets count pay.)
fn anon_set_keys(t: &Table, chain: u32, handle: u64, nth: u32) -> Option<Vec<Vec<KeyPart>>> {
    let mut rule = t
        .chains
        .get(chain as usize)?
        .rules
        .iter()
        .find(|r| r.handle == handle)?
        .clone();
    let set = rule.anonymous_sets_mut().nth(nth as usize)?;
    Some(set.iter().map(|e| e.key.to_vec()).collect())
}

impl Engine {
    /// The live elements of each set the packet path changes (`add @s`, `update @s`) at
    /// `now_ns` on the hooks' clock: what `nft list set` shows of such a set, which the
    /// ruleset model does not hold.
    pub fn dynamic_elements(&self, now_ns: u64) -> Vec<DynamicSet<'_>> {
        let now = self.epoch.map_or(0, |e| now_ns.saturating_sub(e));
        let st = &self.prog.stateful;
        st.dynsets
            .iter()
            .zip(&st.dynset_owners)
            .map(|(d, (t, name, widths))| DynamicSet {
                table: *t,
                name,
                widths,
                elems: d.snapshot(now),
            })
            .collect()
    }

    /// Put the live elements of the sets the packet path changes into their sets of `r` (the
    /// ruleset this engine was compiled from), as `nft list` shows them at `now_ns` on the
    /// hooks' clock: the model holds only the declared ones. Maps keep the model's.
    ///
    /// The counts a declared element got from lookups (`ip saddr @s` in a set with
    /// `counter`: the counter plugin's, already in `r`) add to those of the set statements.
    pub fn store_dynamic_elements(&self, r: &mut Ruleset, now_ns: u64) {
        for d in self.dynamic_elements(now_ns) {
            if let Some(set) = r
                .tables
                .get_mut(d.table as usize)
                .and_then(|t| t.sets.iter_mut().find(|s| s.name == d.name))
                && let Some(mut elems) = d.model_elements(set)
            {
                let looked_up: HashMap<String, (u64, u64)> = set
                    .elements
                    .iter()
                    .filter(|e| e.counter && (e.packets(), e.bytes()) != (0, 0))
                    .map(|e| (wasp_ruleset::element_key_text(&e), (e.packets(), e.bytes())))
                    .collect();
                if !looked_up.is_empty() {
                    for e in &mut elems {
                        if let Some((p, b)) = looked_up.get(&wasp_ruleset::element_key_text(e)) {
                            e.counter = true;
                            e.set_counts(e.packets() + p, e.bytes() + b);
                        }
                    }
                }
                set.elements = elems.into();
            }
        }
    }

    /// Give each set the packet path changes that continues one of `old` (same table and set,
    /// by handle, as [`CountKey`]'s objects) the running set's live elements with their
    /// state, at `now_ns` on the hooks' clock: expiry, counts, `limit` credit, `quota` bytes.
    /// Call before the engine is shared; `false` (nothing carried) when it is.
    pub fn carry_dynamic(
        &mut self,
        old: &Engine,
        old_model: &Ruleset,
        new_model: &Ruleset,
        now_ns: u64,
    ) -> bool {
        let key = |model: &Ruleset, t: u32, name: &str| {
            let table = model.tables.get(t as usize)?;
            let set = table.sets.iter().find(|s| s.name == name)?;
            Some((table.handle, set.handle))
        };
        let old_st = &old.prog.stateful;
        let before: HashMap<(u64, u64), usize> = old_st
            .dynset_owners
            .iter()
            .enumerate()
            .filter_map(|(i, (t, n, _))| key(old_model, *t, n).map(|k| (k, i)))
            .collect();
        let old_epoch = old.epoch.unwrap_or(now_ns);
        let new_epoch = self.epoch.unwrap_or(now_ns);
        let old_now = now_ns.saturating_sub(old_epoch);
        let shift = new_epoch.saturating_sub(old_epoch);
        let owners = self.prog.stateful.dynset_owners.clone();
        let Some(st) = Arc::get_mut(&mut self.prog.stateful) else {
            return false;
        };
        for (i, (t, n, _)) in owners.iter().enumerate() {
            if let Some(&j) = key(new_model, *t, n).and_then(|k| before.get(&k)) {
                st.dynsets[i].continue_from(&old_st.dynsets[j], old_now, shift);
            }
        }
        true
    }
}

/// What became of an element with a timeout in the running program ([`Engine::timed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timed {
    /// Its time ran out.
    Expired,
    /// It has this many ns left.
    Left(u64),
}

impl Engine {
    /// The elements with a timeout of named set `si` of table `ti` of `from` (the ruleset
    /// this engine was compiled from) as the program holds them at `now` (ns after the epoch),
    /// by index in the set's elements; elements without a timeout, and those the program does
    /// not hold, are left out.
    fn timed(&self, from: &Ruleset, ti: usize, si: usize, now: u64) -> Vec<(usize, Timed)> {
        let Some(decl) = from.tables.get(ti).and_then(|t| t.sets.get(si)) else {
            return Vec::new();
        };
        let set = match self.prog.named_sets.get(ti).and_then(|t| t.get(si)) {
            Some(id) if decl.flags.timeout => match self.prog.sets.get(id.idx()) {
                Some(s) => s,
                None => return Vec::new(),
            },
            _ => return Vec::new(),
        };
        let widths: Vec<u8> = decl
            .key
            .iter()
            .map(|&d| crate::field::dtype_width(d))
            .collect();
        let mut out = Vec::new();
        for (i, e) in decl.elements.iter().enumerate() {
            if e.expires_ms()
                .or(e.timeout_ms())
                .or(decl.timeout_ms)
                .is_none()
            {
                continue;
            }
            let held = if e.is_catch_all() {
                set.catch_all.as_ref()
            } else {
                crate::set_update::key_bounds(from, &e, &widths)
                    .and_then(|(lo, hi)| set.element_at(&lo, &hi))
            };
            match held.map(|x| x.expires) {
                Some(u64::MAX) | None => {}
                Some(t) if t <= now => out.push((i, Timed::Expired)),
                Some(t) => out.push((i, Timed::Left(t - now))),
            }
        }
        out
    }

    /// Whether an element with a timeout of `from` (the ruleset this engine was compiled
    /// from) has run out at `now_ns` on the hooks' clock: lookups miss it, and the model still
    /// lists it until [`Engine::age_timed_elements`] takes it out.
    ///
    /// One pass over the element slots of each set with timeouts (not a walk of the
    /// elements): may say `true` for an element a batch deleted whose slot is not reused yet.
    pub fn has_expired_elements(&self, from: &Ruleset, now_ns: u64) -> bool {
        let now = now_ns.saturating_sub(self.epoch.unwrap_or(now_ns));
        from.tables.iter().enumerate().any(|(ti, t)| {
            t.sets.iter().enumerate().any(|(si, s)| {
                s.flags.timeout
                    && self
                        .prog
                        .named_sets
                        .get(ti)
                        .and_then(|t| t.get(si))
                        .and_then(|id| self.prog.sets.get(id.idx()))
                        .is_some_and(|set| {
                            // A packet-path set keeps its elements (and their expiry) itself.
                            !matches!(set.store, crate::setstore::SetStore::Dynamic(_))
                                && set.earliest_expiry() <= now
                        })
            })
        })
    }

    /// The elements with a timeout in the named sets of `into` as this engine's program holds
    /// them at `now_ns` on the hooks' clock, as `nft list` shows them: an element whose time
    /// ran out is gone (the kernel's lookups skip it and its gc frees it), the others carry the
    /// time they have left as `expires` (ms), which a program compiled from `into` gives them
    /// (not their whole timeout again). `from` is the ruleset this engine was compiled from;
    /// the sets of `into` continue its sets by table and set handle, their elements by key;
    /// an element `into` holds that `from` did not, or holds with another timeout (added
    /// again with it), keeps its whole timeout. Sets the packet
    /// path changes are [`Engine::store_dynamic_elements`]'s.
    pub fn age_timed_elements(&self, from: &Ruleset, into: &mut Ruleset, now_ns: u64) {
        let now = now_ns.saturating_sub(self.epoch.unwrap_or(now_ns));
        for (ti, t) in from.tables.iter().enumerate() {
            for (si, s) in t.sets.iter().enumerate() {
                let timed = self.timed(from, ti, si, now);
                if timed.is_empty() {
                    continue;
                }
                let Some(target) = into
                    .tables
                    .iter_mut()
                    .find(|x| x.handle == t.handle && x.family == t.family)
                    .and_then(|x| x.sets.iter_mut().find(|x| x.handle == s.handle))
                else {
                    continue;
                };
                // The state of each element of `from`'s set and its timeout, by key.
                let by_key: HashMap<String, (Timed, Option<u64>)> = timed
                    .into_iter()
                    .filter_map(|(i, x)| {
                        let e = s.elements.get(i)?;
                        Some((wasp_ruleset::element_key_text(&e), (x, e.timeout_ms())))
                    })
                    .collect();
                target.elements.to_mut().retain_mut(|e| {
                    match by_key.get(&wasp_ruleset::element_key_text(e)) {
                        // Added again with another timeout: that one, from now.
                        Some((_, timeout)) if *timeout != e.timeout_ms() => true,
                        Some((Timed::Expired, _)) => false,
                        Some((Timed::Left(ns), _)) => {
                            e.extra_mut().expires_ms = Some(ns / 1_000_000);
                            true
                        }
                        None => true,
                    }
                });
            }
        }
    }
}

/// The live elements of one set the packet path changes ([`Engine::dynamic_elements`]).
#[derive(Debug)]
pub struct DynamicSet<'e> {
    /// Index of its table in the ruleset.
    pub table: u32,
    /// Its name.
    pub name: &'e str,
    /// Its key's field widths in bytes, as its keys are laid out.
    pub widths: &'e [u8],
    /// The elements live now.
    pub elems: Vec<DynElemView>,
}

impl DynamicSet<'_> {
    /// The elements as the model's, for set `decl` (the set's declaration): keys in the
    /// declared types, `timeout` when one other than the set's was given, time left as
    /// `expires` (ms), counts when the element counts. A map's elements carry no data here:
    /// `None` for a map.
    pub fn model_elements(
        &self,
        decl: &wasp_ruleset::model::SetDecl,
    ) -> Option<Vec<wasp_ruleset::model::SetElem>> {
        use wasp_ruleset::model::{SetElem, Value};
        if decl.is_map || decl.key.len() != self.widths.len() {
            return None;
        }
        let ms = |ns: u64| ns / 1_000_000;
        let mut out = Vec::with_capacity(self.elems.len());
        for v in &self.elems {
            let mut key = Vec::with_capacity(self.widths.len());
            let mut at = 0;
            for (&w, &dtype) in self.widths.iter().zip(&decl.key) {
                let field = v.key.get(at..at + usize::from(w))?;
                at += usize::from(w);
                let n = dtype.width_bytes();
                let mut bytes = vec![0u8; n];
                let take = n.min(field.len());
                bytes[n - take..].copy_from_slice(&field[field.len() - take..]);
                key.push(KeyPart::Value(Value {
                    dtype,
                    bytes: bytes.into(),
                    wildcard: false,
                }));
            }
            let mut e = SetElem::new(key, decl.span);
            let timeout = (v.timeout_ns != 0).then(|| ms(v.timeout_ns));
            let expires = v.expires_in_ns.map(ms);
            if timeout.is_some() || expires.is_some() || e.extra.is_some() {
                let x = e.extra_mut();
                x.timeout_ms = timeout;
                x.expires_ms = expires;
            }
            if let Some((p, b)) = v.counted {
                e.counter = true;
                e.set_counts(p, b);
            }
            out.push(e);
        }
        Some(out)
    }
}
