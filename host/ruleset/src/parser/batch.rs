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
        .chain(t.limits.iter().map(|l| l.handle))
        .chain(t.ct_objects.iter().map(|o| o.handle));
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
    st.next_handle = base
        .tables
        .iter()
        .map(|t| (last_handle(t) + 1).max(t.next_handle))
        .collect();
    st.table_handle = base
        .tables
        .iter()
        .map(|t| t.handle)
        .max()
        .unwrap_or(0)
        .max(base.table_handle);
    st.hook_bound = base
        .tables
        .iter()
        .filter(|t| super::handles::table_has_hook_bound(t))
        .map(|t| (t.family, t.name.clone()))
        .collect();
    let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    parse_source(&mut st, path.to_path_buf(), canon, bytes, None)?;
    for (t, next) in st.tables.iter_mut().zip(&st.next_handle) {
        t.next_handle = *next;
    }
    let mut r = Ruleset {
        tables: st.tables,
        sources: st.sources,
        table_handle: st.table_handle,
    };
    drop_unused_sources(&mut r);
    Ok(r)
}

/// Drop the source files no part of `r` comes from any more (a ruleset that a daemon keeps
/// changing would otherwise keep the text of every batch it was ever given: a `flush
/// ruleset` and a whole new file, applied again and again, grew it by the file each time).
///
/// A file is kept with every file of its batch (the batch's text and the files it included):
/// the batch of the newest file (the batch just applied, so that ids keep rising), and each
/// batch that a table, chain, rule, set, set element (or its `counter`), plugin declaration,
/// named counter, quota, limit or flowtable of `r` was declared in. What lies inside a rule
/// (expressions, statements, anonymous sets) was parsed in the rule's batch: its spans name
/// that batch's files (a `define` from an included file included).
fn drop_unused_sources(r: &mut Ruleset) {
    use std::collections::{HashMap, HashSet};

    use crate::model::FileId;
    // Each file's batch: the file it was included from, up to the batch's own text.
    let mut batch: HashMap<FileId, FileId> = HashMap::with_capacity(r.sources.len());
    for s in &r.sources {
        let b = s
            .included_from
            .and_then(|at| batch.get(&at.file).copied())
            .unwrap_or(s.id);
        batch.insert(s.id, b);
    }
    let mut used: HashSet<FileId> = HashSet::new();
    if let Some(newest) = r.sources.last() {
        used.insert(newest.id);
    }
    for t in &r.tables {
        used.insert(t.span.file);
        for c in &t.chains {
            used.insert(c.span.file);
            used.extend(c.rules.iter().map(|rule| rule.span.file));
        }
        for s in &t.sets {
            used.insert(s.span.file);
            for e in &s.elements {
                used.insert(e.span.file);
                used.extend(e.counter_span.map(|c| c.file));
            }
        }
        used.extend(t.plugins.iter().map(|p| p.span.file));
        used.extend(t.counters.iter().map(|o| o.span.file));
        used.extend(t.quotas.iter().map(|o| o.span.file));
        used.extend(t.limits.iter().map(|o| o.span.file));
        used.extend(t.ct_objects.iter().map(|o| o.span.file));
        used.extend(t.flowtables.iter().map(|f| f.span.file));
    }
    let keep: HashSet<FileId> = used.iter().filter_map(|f| batch.get(f).copied()).collect();
    r.sources
        .retain(|s| batch.get(&s.id).is_some_and(|b| keep.contains(b)));
}
