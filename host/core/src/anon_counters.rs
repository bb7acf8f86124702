//! Counters on the elements of anonymous sets (`ip saddr { 10.0.0.1 counter, 10.0.0.2
//! counter } accept`): read per element and written back into the rule's set for listing.

use wasp_ruleset::model::Ruleset;

use crate::counters::element_counts;
use crate::engine::Engine;
use crate::ext::{CounterSource, CounterUse};

/// The counts of one counting element of an anonymous set in a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnonSetElemCounter {
    /// Table index.
    pub table: u32,
    /// Chain index in its table.
    pub chain: u32,
    /// Rule handle.
    pub handle: u64,
    /// Which anonymous set of the rule (from 0, in the order of
    /// `wasp_ruleset::model::Rule::anonymous_sets_mut`).
    pub nth: u32,
    /// Index of the element in the anonymous set.
    pub element: usize,
    /// Packets counted.
    pub packets: u64,
    /// Bytes counted: the kernel's `skb->len` per packet, as for named sets' elements.
    pub bytes: u64,
}

impl Engine {
    /// Counts of every element counter of the rules' anonymous sets (from `src`), including
    /// the counts the ruleset was loaded with, in site order. A lookup that finds the element
    /// counts the packet and its `skb->len`, as the kernel's per-element counter
    /// (`nft_counter_eval` on the element's extension).
    pub fn anon_set_counters(&self, src: &mut dyn CounterSource) -> Vec<AnonSetElemCounter> {
        let mut out = Vec::new();
        for (site, u) in self.counter_uses() {
            let CounterUse::AnonSet {
                table,
                chain,
                handle,
                nth,
                elements,
            } = u
            else {
                continue;
            };
            let slots = elements.iter().map(|&e| (e, e as u32 + 1));
            for (element, packets, bytes) in element_counts(src, site, slots) {
                out.push(AnonSetElemCounter {
                    table: *table,
                    chain: *chain,
                    handle: *handle,
                    nth: *nth,
                    element,
                    packets,
                    bytes,
                });
            }
        }
        out
    }

    /// Write the anonymous sets' element counts (from `src`) into `ruleset` (the one this
    /// engine was compiled from): each counting element then prints as `10.0.0.1 counter
    /// packets N bytes M`, as `nft list ruleset` shows it. Part of
    /// [`Engine::store_counters`].
    pub fn store_anon_set_counters(&self, ruleset: &mut Ruleset, src: &mut dyn CounterSource) {
        for c in self.anon_set_counters(src) {
            let Some(e) = ruleset
                .tables
                .get_mut(c.table as usize)
                .and_then(|t| t.chains.get_mut(c.chain as usize))
                .and_then(|ch| ch.rules.iter_mut().find(|r| r.handle == c.handle))
                .and_then(|r| r.anonymous_sets_mut().nth(c.nth as usize))
                .and_then(|elems| elems.get_mut(c.element))
            else {
                continue;
            };
            e.counter = true;
            e.set_counts(c.packets, c.bytes);
        }
    }
}
