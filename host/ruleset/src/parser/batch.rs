//! Commands applied to a running ruleset: `nft -f` of a batch (`add`/`create`/`delete`/
//! `flush`/`insert`, table blocks) against what is loaded, as one transaction.

use std::path::Path;

use super::{State, parse_source};
use crate::error::Error;
use crate::model::{Ruleset, Table};

/// The highest handle given out in table `t` (chains, sets, named objects, flowtables,
/// rules).
fn last_handle(t: &Table) -> u64 {
    let chains = t
        .chains
        .iter()
        .flat_map(|c| std::iter::once(c.handle).chain(c.rules.iter().map(|r| r.handle)));
    let sets = t.sets.iter().map(|s| s.handle);
    let counters = t
        .counters
        .iter()
        .map(|c| c.handle)
        .chain(t.quotas.iter().map(|q| q.handle))
        .chain(t.limits.iter().map(|l| l.handle));
    let flowtables = t.flowtables.iter().map(|f| f.handle);
    chains
        .chain(sets)
        .chain(counters)
        .chain(flowtables)
        .max()
        .unwrap_or(0)
}

/// Apply the commands in `bytes` (named `path` in errors) to a copy of `base`.
pub(crate) fn apply(base: &Ruleset, bytes: &[u8], path: &Path) -> Result<Ruleset, Error> {
    let mut st = State::new();
    st.sources.clone_from(&base.sources);
    st.tables.clone_from(&base.tables);
    st.next_handle = base.tables.iter().map(|t| last_handle(t) + 1).collect();
    st.table_handle = base.tables.iter().map(|t| t.handle).max().unwrap_or(0);
    st.hook_bound = base
        .tables
        .iter()
        .filter(|t| super::handles::table_has_hook_bound(t))
        .map(|t| (t.family, t.name.clone()))
        .collect();
    let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    parse_source(&mut st, path.to_path_buf(), canon, bytes, None)?;
    Ok(Ruleset {
        tables: st.tables,
        sources: st.sources,
    })
}
