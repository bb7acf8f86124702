//! Commands applied to a running ruleset: `nft -f` of a batch (`add`/`create`/`delete`/
//! `flush`/`insert`, table blocks) against what is loaded, as one transaction.

use std::path::Path;

use super::setcheck::{ElementLog, ElementOp, SetOracle, SetShadows, Undo};
use super::{State, parse_source};
use crate::error::Error;
use crate::model::{Place, Ruleset, Table};

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

/// A parse state that continues `base`: its tables (taken, not copied), sources, handles and
/// the tables that need hook validation.
fn state_of(tables: Vec<Table>, base: &Ruleset, sources: Vec<crate::model::SourceFile>) -> State {
    let mut st = State::new();
    st.sources = sources;
    st.next_handle = tables
        .iter()
        .map(|t| (last_handle(t) + 1).max(t.next_handle))
        .collect();
    st.table_handle = tables
        .iter()
        .map(|t| t.handle)
        .max()
        .unwrap_or(0)
        .max(base.table_handle);
    st.hook_bound = tables
        .iter()
        .filter(|t| super::handles::table_has_hook_bound(t))
        .map(|t| (t.family, t.name.clone()))
        .collect();
    st.tables = tables;
    st
}

/// Parse `bytes` (named `path`) into `st`.
fn parse_into(st: &mut State, bytes: &[u8], path: &Path) -> Result<(), Error> {
    let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    parse_source(st, path.to_path_buf(), canon, bytes, None)?;
    for (t, next) in st.tables.iter_mut().zip(&st.next_handle) {
        t.next_handle = *next;
    }
    Ok(())
}

/// Apply the commands in `bytes` (named `path` in errors) to a copy of `base`, checking
/// elements against `shadows` (left as the new ruleset's views; emptied on an error).
pub(crate) fn apply(
    base: &Ruleset,
    bytes: &[u8],
    path: &Path,
    shadows: &mut SetShadows,
) -> Result<Ruleset, Error> {
    apply_noting(base, bytes, path, shadows).map(|(r, _)| r)
}

/// [`apply`], and the (table handle, rule handle) of each rule that an `insert rule` placed.
pub(crate) fn apply_noting(
    base: &Ruleset,
    bytes: &[u8],
    path: &Path,
    shadows: &mut SetShadows,
) -> Result<(Ruleset, Vec<(u64, u64)>), Error> {
    let mut st = state_of(base.tables.clone(), base, base.sources.clone());
    shadows.begin();
    st.shadows = std::mem::take(&mut shadows.0);
    parse_into(&mut st, bytes, path)?;
    // A set filled by this batch gives back the room its element list grew into (the next
    // element added grows it by an eighth again).
    for set in st.tables.iter_mut().flat_map(|t| t.sets.iter_mut()) {
        set.elements.shrink_to_fit();
    }
    shadows.0 = std::mem::take(&mut st.shadows);
    shadows.retain_declared(&st.tables);
    let mut r = Ruleset {
        tables: st.tables,
        sources: st.sources,
        table_handle: st.table_handle,
    };
    drop_unused_sources(&mut r);
    Ok((r, st.inserted))
}

/// A batch of element commands applied to a ruleset in place ([`crate::apply_elements`]):
/// [`ElementTxn::commit`] keeps it, [`ElementTxn::rollback`] (or dropping it) puts every set
/// back as it was.
#[derive(Debug)]
pub struct ElementTxn<'r> {
    rs: &'r mut Ruleset,
    shadows: &'r mut SetShadows,
    log: ElementLog,
    /// Source files before the batch.
    sources: usize,
    done: bool,
}

impl ElementTxn<'_> {
    /// The ruleset with the batch applied.
    pub fn ruleset(&self) -> &Ruleset {
        self.rs
    }

    /// The changes in order: (table index, set index in the table, change).
    pub fn ops(&self) -> impl Iterator<Item = (usize, usize, &ElementOp)> {
        self.log.iter().map(|(t, s, op, _)| (*t, *s, op))
    }

    /// The changes in order, each with the index in its set's elements where it happened
    /// (an add's index after it, a delete's before it; `None` for a flush): (table index, set
    /// index in the table, change, index).
    pub fn ops_at(&self) -> impl Iterator<Item = (usize, usize, &ElementOp, Option<usize>)> {
        self.log.iter().map(|(t, s, op, undo)| {
            let at = match undo {
                Undo::Added(at) => *at,
                Undo::Removed(Place::Listed(at), _) => Some(*at),
                Undo::Removed(..) | Undo::Flushed(_) => None,
            };
            (*t, *s, op, at)
        })
    }

    /// Keep the changes. The ruleset keeps the batch's source text while an element of it
    /// lives (the texts no element uses any more are dropped now and then: `SourceGc`).
    pub fn commit(mut self) {
        self.done = true;
        self.shadows.drop_running();
        if self.shadows.1.due(self.rs.sources.len()) {
            drop_unused_sources(self.rs);
            self.shadows.1.after = self.rs.sources.len();
        }
    }

    /// Take every change back (in reverse order); the ruleset is as before the batch.
    pub fn rollback(self) {}

    fn undo(&mut self) {
        for (ti, si, _, undo) in self.log.drain(..).rev() {
            let set = &mut self.rs.tables[ti].sets[si];
            match undo {
                Undo::Added(_) => set.elements.unpush(),
                Undo::Removed(at, e) => set.elements.unremove(at, *e),
                Undo::Flushed(old) => set.elements = old,
            }
            // Its view went through the changes: built again when next used.
            let key = (
                self.rs.tables[ti].handle,
                self.rs.tables[ti].sets[si].handle,
            );
            self.shadows.0.remove(&key);
        }
        self.shadows.drop_running();
        self.rs.sources.truncate(self.sources);
    }
}

impl Drop for ElementTxn<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.undo();
        }
    }
}

/// [`crate::apply_elements`].
pub(crate) fn apply_elements<'r>(
    rs: &'r mut Ruleset,
    shadows: &'r mut SetShadows,
    oracle: Option<Box<dyn SetOracle>>,
    bytes: &[u8],
    path: &Path,
) -> Result<Option<ElementTxn<'r>>, Error> {
    let n_sources = rs.sources.len();
    let tables = std::mem::take(&mut rs.tables);
    let sources = std::mem::take(&mut rs.sources);
    let mut st = state_of(tables, rs, sources);
    st.elements_only = true;
    st.element_log = Some(Vec::new());
    st.oracle = oracle;
    shadows.begin();
    st.shadows = std::mem::take(&mut shadows.0);
    let res = parse_into(&mut st, bytes, path);
    rs.tables = std::mem::take(&mut st.tables);
    rs.sources = std::mem::take(&mut st.sources);
    shadows.0 = std::mem::take(&mut st.shadows);
    let txn = ElementTxn {
        rs,
        shadows,
        log: st.element_log.take().unwrap_or_default(),
        sources: n_sources,
        done: false,
    };
    match res {
        Ok(()) => Ok(Some(txn)),
        // Dropping the transaction takes the batch's changes back.
        Err(_) if st.not_elements => Ok(None),
        Err(e) => Err(e),
    }
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
            if s.elements.holder().is_some() {
                // Held elements carry no counter; their files are few.
                used.extend(s.elements.files());
                continue;
            }
            // Elements come in runs of one file: one insertion per run.
            let mut last = None;
            for e in &s.elements {
                for f in std::iter::once(e.span.file).chain(e.counter_span().map(|c| c.file)) {
                    if last != Some(f) {
                        used.insert(f);
                        last = Some(f);
                    }
                }
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

#[cfg(test)]
mod tests {
    use crate::model::Ruleset;
    use crate::{ElementOp, SetShadows, apply_batch, apply_elements, parse_str};

    const BASE: &str = "table ip t {\n set s {\n  type ipv4_addr . inet_service\n  flags interval\n  elements = { 10.0.0.0/30 . 1-9 }\n }\n map m {\n  type ipv4_addr : verdict\n  elements = { 10.0.0.1 : drop }\n }\n}\n";

    fn base() -> Ruleset {
        parse_str(BASE, "base.nft").unwrap()
    }

    /// In place, the batch gives the ruleset `apply_batch` gives, and lists what it changed.
    #[test]
    fn element_batches_apply_in_place_as_apply_batch_does() {
        let text = "add element ip t s { 10.0.1.0/24 . 53, 10.0.2.0/24 . 80 }\ndelete element ip t s { 10.0.0.0/30 . 1-9 }\ndelete element ip t m { 10.0.0.1 }\nadd element ip t m { 10.0.0.2 : accept }\n";
        let want = apply_batch(&base(), text, "b.nft").unwrap();
        let mut rs = base();
        let mut shadows = SetShadows::default();
        let txn = apply_elements(&mut rs, &mut shadows, text, "b.nft")
            .unwrap()
            .unwrap();
        let kinds: Vec<_> = txn
            .ops()
            .map(|(t, s, op)| (t, s, matches!(op, ElementOp::Add(_))))
            .collect();
        assert_eq!(
            kinds,
            [
                (0, 0, true),
                (0, 0, true),
                (0, 0, false),
                (0, 1, false),
                (0, 1, true)
            ]
        );
        txn.commit();
        assert_eq!(rs, want);
        // The views are kept: the next batch sees the elements of this one.
        assert_eq!(shadows.len(), 2);
        let again = apply_elements(
            &mut rs,
            &mut shadows,
            "create element ip t s { 10.0.1.0/24 . 53 }",
            "c.nft",
        );
        assert!(again.unwrap_err().to_string().contains("File exists"));
    }

    /// A batch that fails leaves the ruleset as it was, whatever it had changed before the
    /// failing command; a batch with another command changes nothing and says so.
    #[test]
    fn a_failing_or_mixed_batch_changes_nothing() {
        let mut rs = base();
        let mut shadows = SetShadows::default();
        let text = "add element ip t s { 10.0.1.0/24 . 53 }\nflush set ip t m\ndelete element ip t s { 10.9.9.9 . 1 }\n";
        let e = apply_elements(&mut rs, &mut shadows, text, "bad.nft").unwrap_err();
        assert!(e.to_string().contains("bad.nft:3:"), "{e}");
        assert_eq!(rs, base());
        let mixed = "add element ip t s { 10.0.1.0/24 . 53 }\nadd chain ip t c\n";
        assert!(
            apply_elements(&mut rs, &mut shadows, mixed, "m.nft")
                .unwrap()
                .is_none()
        );
        assert_eq!(rs, base());
        // Taken back by hand too.
        let txn = apply_elements(&mut rs, &mut shadows, "flush set ip t s", "f.nft")
            .unwrap()
            .unwrap();
        txn.rollback();
        assert_eq!(rs, base());
    }

    /// Element batches applied again and again keep the source text of live elements and a
    /// bounded number of others.
    #[test]
    fn sources_do_not_grow_with_element_batches() {
        let mut rs = base();
        let mut shadows = SetShadows::default();
        for n in [50, 500] {
            for i in 0..n {
                let verb = if i % 2 == 0 { "add" } else { "delete" };
                let t = format!("{verb} element ip t s {{ 10.0.9.0/24 . 22 }}");
                apply_elements(&mut rs, &mut shadows, &t, "x.nft")
                    .unwrap()
                    .unwrap()
                    .commit();
            }
            assert!(rs.sources.len() < 32, "after {n}: {}", rs.sources.len());
        }
    }
}
