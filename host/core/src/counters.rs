//! Counter readout: the counts of `counter` statements, named counters and set elements as
//! the counter plugin serves them ([`CounterSource`]), written back into a ruleset for its
//! listing, and their reset; the bytes each `quota` consumed.

use wasp_ruleset::Ruleset;
use wasp_ruleset::model::Stmt;

use crate::engine::Engine;
use crate::ext::{CounterSource, CounterUse};

/// Counts of one `counter` statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterValue {
    /// Table index.
    pub table: u32,
    /// Chain index in its table.
    pub chain: u32,
    /// Handle of the rule holding the counter.
    pub handle: u64,
    /// Which of the rule's `counter` statements (from 0).
    pub nth: u32,
    /// Packets counted (including the count the ruleset was loaded with).
    pub packets: u64,
    /// Bytes counted: `skb->len` of each packet as the kernel counts at the hook (the frame
    /// without the Ethernet header and the popped VLAN tag at ingress).
    pub bytes: u64,
}

/// Counts of one named counter object (`counter NAME { ... }`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedCounter {
    /// Table index.
    pub table: u32,
    /// Object name.
    pub name: String,
    /// Packets counted (including the count the ruleset was loaded with).
    pub packets: u64,
    /// Bytes counted (`skb->len`, as [`CounterValue::bytes`]).
    pub bytes: u64,
}

/// Counts of one set element's counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetElemCounter {
    /// Table index.
    pub table: u32,
    /// Set name.
    pub set: String,
    /// Index of the element in the model's `SetDecl::elements`.
    pub element: usize,
    /// Packets counted (including the count the ruleset was loaded with).
    pub packets: u64,
    /// Bytes counted (`skb->len`, as [`CounterValue::bytes`]).
    pub bytes: u64,
}

impl Engine {
    /// Write the bytes each `quota` statement and quota object consumed into `ruleset` (the
    /// one this engine was compiled from) as their `used`, as `nft list ruleset` lists them
    /// after traffic.
    pub fn store_quotas(&self, ruleset: &mut Ruleset) {
        let st = &self.prog.stateful;
        for (q, owner) in st.quotas.iter().zip(&st.quota_owners) {
            write_used(ruleset, owner, q.consumed());
        }
    }

    /// The counter use sites the compiler made, as (site id, what it counts), in site order:
    /// one per anonymous `counter` statement, one per named counter object (shared by the
    /// rules that say `counter name NAME`), one per named set whose elements count, one per
    /// anonymous set of a rule whose elements count ([`CounterUse::AnonSet`]). The
    /// embedder serves them with the counter plugin ([`crate::COUNTER_PLUGIN`]).
    pub fn counter_uses(&self) -> impl Iterator<Item = (u32, &CounterUse)> {
        self.prog
            .counter_uses
            .iter()
            .enumerate()
            .filter_map(|(i, u)| u.as_ref().map(|u| (i as u32, u)))
    }

    /// `true` when the ruleset has a counter (so the embedder must load the counter plugin).
    pub fn has_counters(&self) -> bool {
        self.counter_uses().next().is_some()
    }

    /// Every anonymous `counter` statement with its current counts (from `src`), in ruleset
    /// order.
    pub fn counters(&self, src: &mut dyn CounterSource) -> Vec<CounterValue> {
        self.counter_uses()
            .filter_map(|(site, u)| match *u {
                CounterUse::Rule {
                    table,
                    chain,
                    handle,
                    nth,
                } => {
                    let (packets, bytes) = site_total(src, site);
                    Some(CounterValue {
                        table,
                        chain,
                        handle,
                        nth,
                        packets,
                        bytes,
                    })
                }
                _ => None,
            })
            .collect()
    }

    /// Counts of the first counter of rule `handle` in chain `chain` of table `table`.
    pub fn counter(
        &self,
        table: u32,
        chain: u32,
        handle: u64,
        src: &mut dyn CounterSource,
    ) -> Option<(u64, u64)> {
        let site = self.counter_uses().find_map(|(site, u)| {
            (*u == CounterUse::Rule {
                table,
                chain,
                handle,
                nth: 0,
            })
            .then_some(site)
        })?;
        Some(site_total(src, site))
    }

    /// Every named counter object with its counts (from `src`), in declaration order.
    pub fn named_counters(&self, src: &mut dyn CounterSource) -> Vec<NamedCounter> {
        self.counter_uses()
            .filter_map(|(site, u)| match u {
                CounterUse::Object { table, name } => {
                    let (packets, bytes) = site_total(src, site);
                    Some(NamedCounter {
                        table: *table,
                        name: name.clone(),
                        packets,
                        bytes,
                    })
                }
                _ => None,
            })
            .collect()
    }

    /// Counts of every set element's counter (elements of a set with `counter`, or written
    /// with `counter`; from `src`), including the counts the ruleset was loaded with. A lookup
    /// that finds the element counts the packet and its `skb->len`, as the kernel's
    /// per-element counter.
    pub fn set_element_counters(&self, src: &mut dyn CounterSource) -> Vec<SetElemCounter> {
        let mut out = Vec::new();
        for (site, u) in self.counter_uses() {
            let CounterUse::Set {
                table,
                set,
                elements,
            } = u
            else {
                continue;
            };
            for (element, packets, bytes) in
                element_counts(src, site, elements.elements.iter().copied())
            {
                out.push(SetElemCounter {
                    table: *table,
                    set: set.clone(),
                    element,
                    packets,
                    bytes,
                });
            }
        }
        out
    }

    /// Write the counts (from `src`) into `ruleset` (the one this engine was compiled from),
    /// so that printing it lists them as `nft list ruleset` does after traffic: `counter
    /// packets N bytes M` in rules and on each counted set element, `packets N bytes M` in
    /// named counter objects.
    pub fn store_counters(&self, ruleset: &mut Ruleset, src: &mut dyn CounterSource) {
        for c in self.counters(src) {
            let Some(rule) = ruleset
                .tables
                .get_mut(c.table as usize)
                .and_then(|t| t.chains.get_mut(c.chain as usize))
                .and_then(|ch| ch.rules.iter_mut().find(|r| r.handle == c.handle))
            else {
                continue;
            };
            let stmt = rule
                .stmts
                .iter_mut()
                .filter(|s| matches!(s, Stmt::Counter { .. }))
                .nth(c.nth as usize);
            if let Some(Stmt::Counter { packets, bytes }) = stmt {
                (*packets, *bytes) = (c.packets, c.bytes);
            }
        }
        for c in self.named_counters(src) {
            if let Some(o) = ruleset
                .tables
                .get_mut(c.table as usize)
                .and_then(|t| t.counters.iter_mut().find(|o| o.name == c.name))
            {
                (o.packets, o.bytes) = (c.packets, c.bytes);
            }
        }
        for c in self.set_element_counters(src) {
            if let Some(e) = ruleset
                .tables
                .get_mut(c.table as usize)
                .and_then(|t| t.sets.iter_mut().find(|s| s.name == c.set))
                .and_then(|s| s.elements.to_mut().get_mut(c.element))
            {
                e.counter = true;
                e.set_counts(c.packets, c.bytes);
            }
        }
        self.store_anon_set_counters(ruleset, src);
        self.store_quotas(ruleset);
    }

    /// `reset counters` (and `reset counter`/`reset set` for elements): zero every counter
    /// through `src`: rules', named objects' and set elements'. A set element's expiry is the
    /// engine's and does not change (the kernel's reset leaves the timeout extension alone).
    pub fn reset_counters(&self, src: &mut dyn CounterSource) {
        for (site, _) in self.counter_uses() {
            src.reset(site);
        }
    }
}

/// Whose a quota is, for picking the quotas a reset zeroes ([`Engine::reset_quotas`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaOf<'a> {
    /// A `quota` statement in chain `chain` (index) of table `table` (index).
    Rule {
        /// Table index.
        table: u32,
        /// Chain index in its table.
        chain: u32,
    },
    /// Quota object `name` of table `table` (index).
    Object {
        /// Table index.
        table: u32,
        /// Object name.
        name: &'a str,
    },
}

impl Engine {
    /// Zero the quotas `pick` selects, each in one atomic step (a packet's bytes count either
    /// before or after), and write the bytes each had consumed into `ruleset` (the one this
    /// engine was compiled from) as its `used`, as `nft reset quotas` lists them.
    pub fn reset_quotas(&self, ruleset: &mut Ruleset, pick: impl Fn(QuotaOf<'_>) -> bool) {
        let st = &self.prog.stateful;
        for (q, owner) in st.quotas.iter().zip(&st.quota_owners) {
            let of = match owner {
                crate::stateful::QuotaOwner::Rule { table, chain, .. } => QuotaOf::Rule {
                    table: *table,
                    chain: *chain,
                },
                crate::stateful::QuotaOwner::Object { table, name } => QuotaOf::Object {
                    table: *table,
                    name,
                },
            };
            if pick(of) {
                write_used(ruleset, owner, q.take());
            }
        }
    }
}

/// Write `used` bytes into the quota statement or object `owner` names in `ruleset` (nothing
/// when it is not there).
fn write_used(ruleset: &mut Ruleset, owner: &crate::stateful::QuotaOwner, used: u64) {
    match owner {
        crate::stateful::QuotaOwner::Rule {
            table,
            chain,
            handle,
            nth,
        } => {
            let stmt = ruleset
                .tables
                .get_mut(*table as usize)
                .and_then(|t| t.chains.get_mut(*chain as usize))
                .and_then(|c| c.rules.iter_mut().find(|r| r.handle == *handle))
                .and_then(|r| {
                    r.stmts
                        .iter_mut()
                        .filter(|s| matches!(s, Stmt::Quota { .. }))
                        .nth(*nth as usize)
                });
            if let Some(Stmt::Quota { quota, .. }) = stmt {
                quota.used = used;
            }
        }
        crate::stateful::QuotaOwner::Object { table, name } => {
            if let Some(o) = ruleset
                .tables
                .get_mut(*table as usize)
                .and_then(|t| t.quotas.iter_mut().find(|o| &o.name == name))
            {
                o.quota.used = used;
            }
        }
    }
}

/// `(element, packets, bytes)` for each of `elements` (model index, counter slot) of the
/// element counter site `site`: the plugin lists an element's counts as the entry of its slot;
/// an element not listed counts 0.
pub(crate) fn element_counts(
    src: &mut dyn CounterSource,
    site: u32,
    elements: impl IntoIterator<Item = (usize, u32)>,
) -> Vec<(usize, u64, u64)> {
    let counts: std::collections::HashMap<u32, (u64, u64)> = src
        .counts(site)
        .into_iter()
        .map(|(e, p, b)| (e, (p, b)))
        .collect();
    elements
        .into_iter()
        .map(|(e, slot)| {
            let (p, b) = counts.get(&slot).copied().unwrap_or_default();
            (e, p, b)
        })
        .collect()
}

/// The site's own counts (entry `elem` 0; zero when not listed).
fn site_total(src: &mut dyn CounterSource, site: u32) -> (u64, u64) {
    src.counts(site)
        .into_iter()
        .find(|e| e.0 == 0)
        .map_or((0, 0), |e| (e.1, e.2))
}
