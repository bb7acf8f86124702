//! The running program's named sets as element batches check against them
//! ([`wasp_ruleset::SetOracle`]): a set held in the back-end the kernel would pick (hash,
//! rbtree-semantics interval set, pipapo) answers for itself, so that the control side keeps
//! no second copy of its elements for the checks.
//!
//! An oracle is a snapshot: it holds the sets of the program it was made from (shared, not
//! copied) and answers for that program whatever the engine swaps in afterwards. Make one per
//! batch and drop it with the batch.

use std::sync::Arc;

use wasp_ruleset::{Bounds, SetBackend};

use crate::engine::Engine;
use crate::setstore::{Set, SetStore};

/// A snapshot of an engine's named sets ([`Engine::set_oracle`]): `sets[t][s]` is the `s`th
/// named set of table `t` in the ruleset the engine was compiled from.
#[derive(Debug)]
pub struct SetOracle {
    sets: Vec<Vec<Arc<Set>>>,
}

impl Engine {
    /// What this engine's program holds of its named sets, for element batches to check
    /// against ([`wasp_ruleset::apply_elements_against`]). Costs a reference per named set.
    pub fn set_oracle(&self) -> SetOracle {
        SetOracle {
            sets: self
                .prog
                .named_sets
                .iter()
                .map(|t| {
                    t.iter()
                        .filter_map(|id| self.prog.sets.get(id.idx()).cloned())
                        .collect()
                })
                .collect(),
        }
    }
}

impl SetOracle {
    fn set(&self, ti: usize, si: usize) -> Option<&Set> {
        self.sets.get(ti)?.get(si).map(|s| &**s)
    }
}

impl wasp_ruleset::SetOracle for SetOracle {
    fn len(
        &self,
        ti: usize,
        si: usize,
        backend: SetBackend,
        key_len: usize,
    ) -> Option<(usize, bool)> {
        let s = self.set(ti, si)?;
        // A set of single keys is held as exact keys whatever its flags: it answers for
        // pipapo (an element holds only its own key), not for the rbtree's range queries.
        let n = match (&s.store, backend) {
            (SetStore::Exact(e), SetBackend::Hash | SetBackend::Pipapo)
                if e.key_len() == key_len =>
            {
                e.len()
            }
            (SetStore::Pipapo(p), SetBackend::Pipapo) if p.key_len() == key_len => p.len(),
            (SetStore::Interval(i), SetBackend::Rbtree) if i.key_len() == key_len => i.len(),
            _ => return None,
        };
        Some((n, s.catch_all.is_some()))
    }

    fn holder(&self, ti: usize, si: usize, point: &[u8]) -> Option<Bounds> {
        match &self.set(ti, si)?.store {
            SetStore::Exact(e) if point.len() == e.key_len() => {
                e.get(point).map(|_| (point.to_vec(), point.to_vec()))
            }
            // The sets checked this way have no timeouts: time 0 expires nothing.
            SetStore::Pipapo(p) if point.len() == p.key_len() => {
                let e = p.elem(p.lookup_index(point, 0)?)?;
                Some((e.start.to_vec(), e.end.to_vec()))
            }
            _ => None,
        }
    }

    fn overlapping(&self, ti: usize, si: usize, start: &[u8], end: &[u8]) -> Option<Bounds> {
        match &self.set(ti, si)?.store {
            SetStore::Interval(i) => {
                let e = i.elem(i.overlapping(start, end, 0)?)?;
                Some((e.start.to_vec(), e.end.to_vec()))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::Engine;

    const RULESET: &str = r#"
table netdev t {
    set c {
        type ipv4_addr . inet_service
        flags interval
        elements = { 10.0.0.0/30 . 5-9, 10.0.0.8 . 3 }
    }
    set h {
        type ipv4_addr
        elements = { 10.0.0.1, 10.0.0.2 }
    }
    set i {
        type ipv4_addr
        flags interval
        elements = { 10.0.0.4/30, 10.0.0.9-10.0.0.10 }
    }
    chain in {
        type filter hook ingress device "eth0" priority 0; policy accept;
        ip daddr . udp dport @c drop
        ip daddr @h drop
        ip saddr @i drop
    }
}
"#;

    /// One element command of a small domain (addresses 10.0.0.0-16, ports 1-14) on the
    /// concatenated, the hash or the interval set, so that batches meet identical,
    /// overlapping and missing elements often.
    fn command() -> impl Strategy<Value = String> {
        let verb = prop_oneof![
            Just("add"),
            Just("add"),
            Just("create"),
            Just("delete"),
            Just("delete")
        ];
        let concat = (
            0u8..16,
            prop_oneof![Just(32u8), Just(30), Just(29)],
            1u16..12,
            0u16..3,
        )
            .prop_map(|(a, len, p, w)| {
                let a = a & (0xff << (32 - len));
                let port = if w == 0 {
                    format!("{p}")
                } else {
                    format!("{p}-{}", p + w)
                };
                if len == 32 {
                    format!("10.0.0.{a} . {port}")
                } else {
                    format!("10.0.0.{a}/{len} . {port}")
                }
            });
        prop_oneof![
            4 => (verb.clone(), prop::collection::vec(concat, 1..3)).prop_map(|(v, es)| {
                format!("{v} element netdev t c {{ {} }}", es.join(", "))
            }),
            3 => (verb.clone(), prop::collection::vec(0u8..8, 1..3)).prop_map(|(v, es)| {
                let es: Vec<String> = es.iter().map(|a| format!("10.0.0.{a}")).collect();
                format!("{v} element netdev t h {{ {} }}", es.join(", "))
            }),
            3 => (verb.clone(), prop::collection::vec((0u8..16, 0u8..3), 1..3)).prop_map(|(v, es)| {
                let es: Vec<String> = es
                    .iter()
                    .map(|&(a, w)| match w {
                        0 => format!("10.0.0.{a}"),
                        1 => format!("10.0.0.{a}-10.0.0.{}", a + 1),
                        _ => format!("10.0.0.{}/30", a & 0xfc),
                    })
                    .collect();
                format!("{v} element netdev t i {{ {} }}", es.join(", "))
            }),
            1 => prop_oneof![Just("c"), Just("h"), Just("i")]
                .prop_map(|s| format!("flush set netdev t {s}")),
        ]
    }

    /// An element batch checked against the program builds no view of the set (a batch
    /// checked against views builds one, and keeps it), and an element the program holds is
    /// found there: `create` of it is refused, and so is a range that overlaps one of the
    /// interval set's.
    #[test]
    fn a_batch_checked_against_the_program_builds_no_view() {
        let mut rs = wasp_ruleset::parse_str(RULESET, "t.nft").unwrap();
        let mut engine = Engine::compile(&rs).unwrap();
        let mut shadows = wasp_ruleset::SetShadows::default();
        let add = "add element netdev t c { 10.0.0.12 . 1 }";
        let oracle = Box::new(engine.set_oracle());
        let txn = wasp_ruleset::apply_elements_against(&mut rs, &mut shadows, oracle, add, "b")
            .unwrap()
            .unwrap();
        let update = engine.set_update(&txn, 0).unwrap();
        txn.commit();
        drop(engine.apply_set_update(&update));
        assert_eq!(shadows.len(), 0);
        let create = "create element netdev t c { 10.0.0.1 . 6 }";
        let oracle = Box::new(engine.set_oracle());
        let err = wasp_ruleset::apply_elements_against(&mut rs, &mut shadows, oracle, create, "b")
            .unwrap_err();
        assert!(err.to_string().contains("File exists"), "{err}");
        assert_eq!(shadows.len(), 0);
        // The interval set: an overlap is refused, a disjoint range taken, no view built.
        let overlap = "add element netdev t i { 10.0.0.6-10.0.0.8 }";
        let oracle = Box::new(engine.set_oracle());
        let err = wasp_ruleset::apply_elements_against(&mut rs, &mut shadows, oracle, overlap, "b")
            .unwrap_err();
        assert!(err.to_string().contains("conflicting intervals"), "{err}");
        let disjoint = "add element netdev t i { 10.0.0.12/30 }";
        let oracle = Box::new(engine.set_oracle());
        wasp_ruleset::apply_elements_against(&mut rs, &mut shadows, oracle, disjoint, "b")
            .unwrap()
            .unwrap()
            .commit();
        assert_eq!(shadows.len(), 0);
        let mut views = wasp_ruleset::SetShadows::default();
        wasp_ruleset::apply_elements(&mut rs, &mut views, add, "b")
            .unwrap()
            .unwrap()
            .commit();
        assert_eq!(views.len(), 1);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// Element batches checked against the running program (no view of the sets) are
        /// accepted and refused as against views built from the model, with the same message
        /// and the same elements after each batch; the program stays what a whole compile of
        /// the model makes.
        #[test]
        fn batches_checked_against_the_program_answer_as_against_views(
            batches in prop::collection::vec(prop::collection::vec(command(), 1..4), 1..12)
        ) {
            let mut views_rs = wasp_ruleset::parse_str(RULESET, "t.nft").unwrap();
            let mut views = wasp_ruleset::SetShadows::default();
            let mut rs = views_rs.clone();
            let mut shadows = wasp_ruleset::SetShadows::default();
            let mut engine = Engine::compile(&rs).unwrap();
            shadows.forget_checked_by(&rs.tables, &engine.set_oracle());
            for b in &batches {
                let text = b.join("\n");
                let by_views = wasp_ruleset::apply_elements(&mut views_rs, &mut views, &text, "b.nft")
                    .map(|t| t.map(|t| t.commit()).is_some())
                    .map_err(|e| e.to_string());
                let oracle = Box::new(engine.set_oracle());
                let by_program =
                    wasp_ruleset::apply_elements_against(&mut rs, &mut shadows, oracle, &text, "b.nft")
                        .map_err(|e| e.to_string());
                let mut recompile = false;
                let by_program = by_program.map(|t| match t {
                    Some(txn) => {
                        match engine.set_update(&txn, 0) {
                            Some(u) => drop(engine.apply_set_update(&u)),
                            None => recompile = true,
                        }
                        txn.commit();
                        true
                    }
                    None => false,
                });
                if recompile {
                    engine = Engine::compile(&rs).unwrap();
                }
                // As the daemon does after each batch: a view made when the program could not
                // decide is not kept.
                shadows.forget_checked_by(&rs.tables, &engine.set_oracle());
                prop_assert_eq!(&by_program, &by_views, "batch {}", text);
                prop_assert_eq!(
                    wasp_ruleset::print_ruleset(&rs, false),
                    wasp_ruleset::print_ruleset(&views_rs, false),
                    "after {}", text
                );
                // No view of a set the program holds is kept between batches.
                prop_assert_eq!(shadows.len(), 0);
            }
        }
    }
}
