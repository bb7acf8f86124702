//! What a reset zeroes: nft's `reset` commands as a pick over the running program's counter
//! use sites and quotas ([`Reset`]), resolved from a control request against the running
//! ruleset ([`Reset::resolve`]).

use wasp_core::QuotaOf;
use wasp_core::ext::CounterUse;
use wasp_ctl::proto::{ElementOp, ElementRequest, ResetRequest, parse_family};
use wasp_ruleset::Ruleset;

/// Which counts a reset zeroes (table and chain are indices in the running ruleset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reset {
    /// `reset counters [table T]`: every counter of the table (or of all): rules' anonymous
    /// counters, named counter objects, set elements' counters. (nft's `reset counters`
    /// zeroes named counter objects only; wasp's zeroes what `reset rules` and `reset
    /// element` would too, and lists the whole ruleset or table with the values they had.)
    Counters {
        /// Only this table.
        table: Option<u32>,
    },
    /// `reset rules [table T [chain C]]`: the rules' `counter` and `quota` statements.
    Rules {
        /// Only this table.
        table: Option<u32>,
        /// Only this chain of `table`.
        chain: Option<u32>,
    },
    /// `reset quotas [table T]`: named quota objects.
    Quotas {
        /// Only this table.
        table: Option<u32>,
    },
    /// `reset counter T NAME` / `reset quota T NAME`: one named object.
    Object {
        /// Its table.
        table: u32,
        /// Its name.
        name: String,
        /// A quota (else a counter).
        quota: bool,
    },
    /// `reset element T S { ... }`: the counters of these elements of a named set.
    Elements {
        /// The set's table.
        table: u32,
        /// The set.
        set: String,
        /// Model indices of the elements (in `SetDecl::elements`).
        elements: Vec<usize>,
    },
}

impl Reset {
    /// Every counter everywhere (`reset counters`).
    pub fn all() -> Reset {
        Reset::Counters { table: None }
    }

    /// The reset `req` asks for in `ruleset`.
    ///
    /// # Errors
    /// nft's message for an unknown family, table, chain or set, or elements the set does not
    /// hold.
    pub fn resolve(ruleset: &Ruleset, req: &ResetRequest) -> Result<Reset, String> {
        let table = |family: &Option<String>, name: &str| -> Result<u32, String> {
            let f = family.as_deref().unwrap_or("ip");
            let fam = parse_family(f).ok_or_else(|| format!("Error: unknown family `{f}`"))?;
            ruleset
                .tables
                .iter()
                .position(|t| t.family == fam && t.name == name)
                .map(|i| i as u32)
                .ok_or_else(|| {
                    format!("Error: No such file or directory: table {f} {name} does not exist")
                })
        };
        Ok(match req {
            ResetRequest::Counters { family, table: t } => Reset::Counters {
                table: t.as_deref().map(|n| table(family, n)).transpose()?,
            },
            ResetRequest::Quotas { family, table: t } => Reset::Quotas {
                table: t.as_deref().map(|n| table(family, n)).transpose()?,
            },
            ResetRequest::Counter {
                family,
                table: t,
                name,
            }
            | ResetRequest::Quota {
                family,
                table: t,
                name,
            } => {
                let ti = table(family, t)?;
                let quota = matches!(req, ResetRequest::Quota { .. });
                let tb = &ruleset.tables[ti as usize];
                let known = match quota {
                    true => tb.quotas.iter().any(|q| &q.name == name),
                    false => tb.counters.iter().any(|c| &c.name == name),
                };
                if !known {
                    let what = if quota { "quota" } else { "counter" };
                    return Err(format!(
                        "Error: No such file or directory: {what} {name} does not exist in table {}",
                        tb.name
                    ));
                }
                Reset::Object {
                    table: ti,
                    name: name.clone(),
                    quota,
                }
            }
            ResetRequest::Rules {
                family,
                table: t,
                chain,
            } => {
                let ti = t.as_deref().map(|n| table(family, n)).transpose()?;
                let ci = match (ti, chain) {
                    (Some(ti), Some(c)) => Some(
                        ruleset.tables[ti as usize]
                            .chains
                            .iter()
                            .position(|ch| &ch.name == c)
                            .map(|i| i as u32)
                            .ok_or_else(|| {
                                format!(
                                    "Error: No such file or directory: chain {c} does not exist"
                                )
                            })?,
                    ),
                    _ => None,
                };
                Reset::Rules {
                    table: ti,
                    chain: ci,
                }
            }
            ResetRequest::Element {
                family,
                table: t,
                set,
                elements,
            } => {
                let e = ElementRequest {
                    op: ElementOp::Get,
                    family: family.clone(),
                    table: t.clone(),
                    set: set.clone(),
                    elements: elements.clone(),
                };
                let found = wasp_ctl::element::find_elements(ruleset, &e)?;
                let ti = table(family, t)?;
                let decl = ruleset.tables[ti as usize]
                    .sets
                    .iter()
                    .find(|s| &s.name == set)
                    .ok_or("Error: No such file or directory")?;
                let elements = decl
                    .elements
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| found.iter().any(|f| f.key == e.key))
                    .map(|(i, _)| i)
                    .collect();
                Reset::Elements {
                    table: ti,
                    set: set.clone(),
                    elements,
                }
            }
        })
    }

    /// Whether the reset zeroes counter use site `u`: `None` not at all, `Some(None)` all of
    /// it, `Some(Some(elems))` these entries (the elements' counter slots, as the counter
    /// plugin numbers them: `wasp_core::CountedElems`).
    pub fn counters(&self, u: &CounterUse) -> Option<Option<Vec<u32>>> {
        let in_table = |want: &Option<u32>, t: u32| want.is_none_or(|w| w == t);
        match (self, u) {
            (Reset::Counters { table }, u) => in_table(table, use_table(u)).then_some(None),
            (
                Reset::Object {
                    table,
                    name,
                    quota: false,
                },
                CounterUse::Object { table: t, name: n },
            ) => (table == t && name == n).then_some(None),
            (
                Reset::Rules { table, chain },
                CounterUse::Rule {
                    table: t, chain: c, ..
                },
            ) => (in_table(table, *t) && in_table(chain, *c)).then_some(None),
            (
                Reset::Elements {
                    table,
                    set,
                    elements,
                },
                CounterUse::Set {
                    table: t,
                    set: s,
                    elements: counted,
                },
            ) if table == t && set == s => Some(Some(
                elements.iter().filter_map(|&e| counted.slot(e)).collect(),
            )),
            _ => None,
        }
    }

    /// Whether the reset zeroes quota `q`.
    pub fn quota(&self, q: QuotaOf<'_>) -> bool {
        let in_table = |want: &Option<u32>, t: u32| want.is_none_or(|w| w == t);
        match (self, q) {
            (Reset::Rules { table, chain }, QuotaOf::Rule { table: t, chain: c }) => {
                in_table(table, t) && in_table(chain, c)
            }
            (Reset::Quotas { table }, QuotaOf::Object { table: t, .. }) => in_table(table, t),
            (
                Reset::Object {
                    table,
                    name,
                    quota: true,
                },
                QuotaOf::Object { table: t, name: n },
            ) => *table == t && name == n,
            _ => false,
        }
    }
}

/// The table (index) of a counter use site.
fn use_table(u: &CounterUse) -> u32 {
    match u {
        CounterUse::Rule { table, .. }
        | CounterUse::Object { table, .. }
        | CounterUse::Set { table, .. }
        | CounterUse::AnonSet { table, .. } => *table,
    }
}
