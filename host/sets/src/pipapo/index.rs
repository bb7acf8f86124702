//! The field index: an exact lookup accelerator built from a pipapo snapshot's elements.
//!
//! Built by [`Pipapo::build_index`], kept through inserts and removals with an overlay of the
//! changes (`delta`, made current by [`Pipapo::refresh_index`]), dropped by a flush. For one
//! *primary* field, the distinct range boundaries of all elements (every start and every
//! end + 1) cut the field's values into intervals; each interval holds the elements whose
//! primary-field range covers it, ascending by insertion rank (position in
//! [`Pipapo::handles`] at build time). A lookup finds the key's interval
//! (fields of 1-2 bytes: a two-level table indexed by the value; wider fields: a radix table
//! over the interval starts as `u64` or `u128` numbers, then a branchless search of the few
//! starts in the key's bucket), then checks each candidate's
//! other fields on numeric bounds stored contiguously per element, skips the expired ones
//! (`now >= expires`) and returns the first full match: the lowest rank, i.e. the oldest live
//! element containing the key, which is what pipapo's lookup returns (kernel
//! `pipapo_get_slow`: the lowest matching rule of the last field).
//!
//! The primary field is the one whose longest candidate list is shortest (capped at
//! `MAX_CANDIDATES + 1`), ties broken by the narrower field (cheaper to search). On the
//! kernel selftest's performance sets every field of every element is a distinct 2-wide
//! range, so the primary field yields at most one candidate.
//!
//! **Crowded intervals: a decision tree across fields.** An interval covered by more than
//! [`MAX_CANDIDATES`] elements (cross products of networks and port ranges, protocol x port x
//! address ACLs, wide ranges over narrow ones) gets a *node*: the same cut, on another field,
//! of just the elements covering it (the field chosen by the same rule among those not cut
//! yet on the way down), whose crowded intervals get nodes in turn. Where every field has been
//! cut, every element left contains every key of the interval and the list of all of them,
//! oldest first, is the answer. Nodes and lists are shared by identical element sets. A
//! 32 x 32 cross product is one direct table on the ports and 32 nodes on the addresses: a
//! key costs two table loads, a search of about 64 starts and one record check. The nodes of
//! one build may visit at most 32 elements per element of the set (at least 65 536); past
//! that budget a crowded interval answers "fall back" and the caller runs pipapo's own lookup
//! for the key, so every set stays exact and a build stays O(N log N).
//!
//! A batched lookup runs the keys one after the other when the element records are small
//! (each key's work is a short chain of loads: two table levels or a radix bucket and a few
//! starts, one class entry, one element record, with no dependency between keys, so the
//! out-of-order core overlaps consecutive keys by itself); with records over 256 KiB it runs
//! in two passes per 64 keys, every key's class entry with its record prefetched, then every
//! key's check. Measured on the selftest's sets: two passes gain about 10 % on port,proto
//! (480 KB of records) and lose 10-20 % on the small sets; interleaving the primary search
//! level by level across keys also lost.
//!
//! Build cost: O(N log N) for N elements (one sort of the boundary events per field and an
//! ordered set of the covering elements while sweeping the primary field) plus, for a
//! 1-2 byte primary field, one pass over its 256 or 65536 values; nodes add at most their
//! work budget, O(N) element visits and their sorts.

use std::collections::{BTreeSet, HashMap};
use std::hint::select_unpredictable;
use std::sync::Arc;

use super::{ElemHandle, Pipapo, Variant};

/// Longest candidate list an interval keeps; a key in an interval covered by more elements
/// falls back to pipapo's lookup.
pub const MAX_CANDIDATES: usize = 8;

/// Element records above this size are looked up in two passes per batch of keys (class
/// entries with the records prefetched, then the checks); smaller ones key after key.
const STAGED_MIN_BYTES: usize = 256 << 10;

/// Tests set this to run the two-pass batch on small sets too (both give the same answers,
/// so tests running in parallel may see either).
#[cfg(test)]
pub(crate) static STAGED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[inline(always)]
fn staged_forced() -> bool {
    #[cfg(test)]
    return STAGED.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(test))]
    false
}

/// Entry tags (low two bits of a class entry).
const TAG_ONE: u32 = 1;
const TAG_LIST: u32 = 2;
const TAG_FALLBACK: u32 = 3;
/// Entry of an interval no element covers.
const EMPTY: u32 = 0;
/// `Index::rec_of` of a handle the index does not hold.
const NO_RECORD: u32 = u32::MAX;
/// Entry of an interval covered by more than [`MAX_CANDIDATES`] elements.
const FALLBACK: u32 = TAG_FALLBACK;

/// A field's place in the key: byte offset and width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    off: usize,
    len: usize,
}

/// The field's value of `key` as a big-endian number (`key` must hold the span).
#[inline(always)]
fn read(key: &[u8], s: Span) -> u128 {
    let Some(k) = key.get(s.off..s.off + s.len) else {
        return 0;
    };
    match *k {
        [a] => u128::from(a),
        [a, b] => u128::from(u16::from_be_bytes([a, b])),
        [a, b, c, d] => u128::from(u32::from_be_bytes([a, b, c, d])),
        [a, b, c, d, e, f] => {
            u128::from(u16::from_be_bytes([a, b])) << 32
                | u128::from(u32::from_be_bytes([c, d, e, f]))
        }
        [a, b, c, d, e, f, g, h] => u128::from(u64::from_be_bytes([a, b, c, d, e, f, g, h])),
        _ => match <[u8; 16]>::try_from(k) {
            Ok(b) => u128::from_be_bytes(b),
            Err(_) => k.iter().fold(0u128, |v, &b| (v << 8) | u128::from(b)),
        },
    }
}

/// A non-primary field checked per candidate: its span and where its bounds are in a record,
/// as the start and the width `end - start` (fields up to 4 bytes: one word
/// `start | (end - start) << 32`; up to 8 bytes: two words; wider: the low and high words of
/// each).
#[derive(Debug, Clone, Copy)]
struct Check {
    span: Span,
    word: usize,
}

impl Check {
    fn new(span: Span, word: usize) -> Check {
        Check { span, word }
    }

    fn words(&self) -> usize {
        match self.span.len {
            0..=4 => 1,
            5..=8 => 2,
            _ => 4,
        }
    }

    /// Store the bounds `lo..=hi` (`lo <= hi`) as `lo` and `hi - lo`.
    fn store(&self, rec: &mut [u64], lo: u128, hi: u128) {
        let (w, d) = (self.word, hi - lo);
        match self.span.len {
            0..=4 => rec[w] = lo as u64 | (d as u64) << 32,
            5..=8 => {
                rec[w] = lo as u64;
                rec[w + 1] = d as u64;
            }
            _ => {
                rec[w] = lo as u64;
                rec[w + 1] = (lo >> 64) as u64;
                rec[w + 2] = d as u64;
                rec[w + 3] = (d >> 64) as u64;
            }
        }
    }

    /// `true` when `key`'s field lies in the bounds stored in `rec` (`v - lo <= hi - lo`,
    /// wrapping).
    #[inline(always)]
    fn matches(&self, rec: &[u64], key: &[u8]) -> bool {
        let (w, o) = (self.word, self.span.off);
        match self.span.len {
            0..=4 => {
                let v = match key.get(o..o + self.span.len) {
                    Some(&[a]) => u32::from(a),
                    Some(&[a, b]) => u32::from(u16::from_be_bytes([a, b])),
                    Some(&[a, b, c, d]) => u32::from_be_bytes([a, b, c, d]),
                    _ => read(key, self.span) as u32,
                };
                let b = rec.get(w).copied().unwrap_or(0);
                v.wrapping_sub(b as u32) <= (b >> 32) as u32
            }
            5..=8 => {
                let v = match key.get(o..o + self.span.len) {
                    Some(&[a, b, c, d, e, f]) => {
                        u64::from(u16::from_be_bytes([a, b])) << 32
                            | u64::from(u32::from_be_bytes([c, d, e, f]))
                    }
                    Some(&[a, b, c, d, e, f, g, h]) => u64::from_be_bytes([a, b, c, d, e, f, g, h]),
                    _ => read(key, self.span) as u64,
                };
                match rec.get(w..w + 2) {
                    Some(&[lo, d]) => v.wrapping_sub(lo) <= d,
                    _ => false,
                }
            }
            _ => {
                let v = read(key, self.span);
                match rec.get(w..w + 4) {
                    Some(&[l0, l1, d0, d1]) => {
                        let lo = u128::from(l1) << 64 | u128::from(l0);
                        let d = u128::from(d1) << 64 | u128::from(d0);
                        v.wrapping_sub(lo) <= d
                    }
                    _ => false,
                }
            }
        }
    }
}

/// How a level's interval of a value is found.
#[derive(Debug, Clone)]
enum Search {
    /// Fields of 1 or 2 bytes at the root: the entry of value `v` is
    /// `leaf[top[v >> 8] + (v & 0xff)]` (identical 256-value blocks stored once).
    Direct {
        top: Box<[u32; 256]>,
        leaf: Box<[u32]>,
    },
    /// Fields of up to 8 bytes: a radix table over the interval starts; `entries` in step.
    Narrow(Radix<u64>),
    /// Fields of 9 to 16 bytes, as `Narrow`.
    Wide(Radix<u128>),
}

/// One field cut into intervals, each with its entry: the root level (the primary field) or
/// a node under an interval that too many elements cover.
#[derive(Debug, Clone)]
struct Level {
    span: Span,
    search: Search,
    /// Entry per interval (`Narrow` and `Wide`; a `Direct` search holds its entries).
    entries: Box<[u32]>,
}

impl Level {
    /// The level of field `span` whose intervals start at `starts` (ascending, the first 0)
    /// with entries `ents`; a direct table when `direct` and the field is 1-2 bytes wide.
    fn new(span: Span, starts: Vec<u128>, ents: Vec<u32>, direct: bool) -> Level {
        if direct && span.len <= 2 {
            let domain = 1usize << (8 * span.len);
            let mut flat = vec![EMPTY; domain];
            for (k, (&s, &e)) in starts.iter().zip(&ents).enumerate() {
                let end = starts.get(k + 1).map_or(domain, |&x| x as usize);
                flat[s as usize..end].fill(e);
            }
            let mut top = Box::new([0u32; 256]);
            let mut leaf: Vec<u32> = Vec::new();
            let mut blocks: HashMap<&[u32], u32> = HashMap::new();
            for (b, block) in flat.chunks(256).enumerate() {
                top[b] = *blocks.entry(block).or_insert_with(|| {
                    let off = leaf.len() as u32;
                    leaf.extend_from_slice(block);
                    off
                });
            }
            // 1-byte fields: one block, every top entry points at it.
            if span.len == 1 {
                top.fill(0);
            }
            let leaf = leaf.into();
            return Level {
                span,
                search: Search::Direct { top, leaf },
                entries: Box::new([]),
            };
        }
        let search = if span.len <= 8 {
            Search::Narrow(Radix::new(starts.iter().map(|&s| s as u64).collect()))
        } else {
            Search::Wide(Radix::new(starts))
        };
        Level {
            span,
            search,
            entries: ents.into(),
        }
    }

    fn bytes(&self) -> usize {
        let search = match &self.search {
            Search::Direct { top, leaf } => top.len() * 4 + leaf.len() * 4,
            Search::Narrow(r) => r.bytes(),
            Search::Wide(r) => r.bytes(),
        };
        search + self.entries.len() * 4
    }

    /// The entry of the interval holding the key's value of this level's field.
    #[inline(always)]
    fn entry(&self, key: &[u8]) -> u32 {
        let v = read(key, self.span);
        let at = |i: usize| self.entries.get(i).copied().unwrap_or(FALLBACK);
        match &self.search {
            Search::Direct { top, leaf } => {
                let b = top[((v >> 8) & 0xff) as usize] as usize;
                leaf.get(b + (v & 0xff) as usize)
                    .copied()
                    .unwrap_or(FALLBACK)
            }
            Search::Narrow(r) => at(r.find(v as u64)),
            Search::Wide(r) => at(r.find(v)),
        }
    }
}

/// The outcome of the index for one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    /// The answer (the oldest live element containing the key, or none).
    Found(Option<ElemHandle>),
    /// The key's interval has too many candidates: ask pipapo.
    Fallback,
}

/// A field index (see the module documentation). Immutable once built; shared between clones
/// of the set.
#[derive(Debug, Clone)]
pub struct Index {
    key_len: usize,
    /// The primary field's level. Entries: [`EMPTY`], record `<< 2 | TAG_ONE`, list offset
    /// `<< 2 | TAG_LIST`, node number + 1 `<< 2` (tag 0, not [`EMPTY`]) or [`FALLBACK`].
    root: Level,
    /// The nodes of the decision tree under crowded intervals, entries as the root's.
    nodes: Box<[Level]>,
    /// Candidate lists: length, then records, oldest element first.
    lists: Box<[u32]>,
    /// The fields other than the primary one, checked per candidate.
    verify: Box<[Check]>,
    /// Words per element record (a power of two up to 8, else a multiple of 8): the expiry
    /// (`u64::MAX` for never), then every `verify` field's bounds.
    stride: usize,
    /// Element records from word `rec_at` on (records aligned to 64 bytes when the
    /// allocation is), numbered in the order of their primary field's start (keys near each
    /// other read records near each other, whatever order the elements came in); entries and
    /// lists name records by number.
    recs: Box<[u64]>,
    rec_at: usize,
    /// The element handle of each record.
    rec_handle: Box<[u32]>,
    /// The record of each handle slot ([`NO_RECORD`] for a slot the index does not hold).
    rec_of: Box<[u32]>,
    /// Intervals of the primary field.
    intervals: usize,
}

/// Longest candidate list an interval keeps before it gets a node (tests lower it, per
/// thread, to build trees on small sets).
#[inline(always)]
fn list_cap() -> usize {
    #[cfg(test)]
    return LIST_CAP.with(std::cell::Cell::get);
    #[cfg(not(test))]
    MAX_CANDIDATES
}

#[cfg(test)]
thread_local! {
    pub(crate) static LIST_CAP: std::cell::Cell<usize> = const { std::cell::Cell::new(MAX_CANDIDATES) };
}

/// Element visits the nodes of one build may cost, per element of the set, and at least
/// [`NODE_WORK_MIN`]: a tree that would cost more leaves the rest of its crowded intervals to
/// pipapo ([`FALLBACK`]), so a build stays O(N log N).
const NODE_WORK_PER_ELEM: usize = 32;
const NODE_WORK_MIN: usize = 1 << 16;

/// The sweep of a build: every element's numeric bounds by rank (insertion order) and
/// field, the lists and nodes made so far, and the work left for nodes.
struct Builder<'a> {
    spans: &'a [Span],
    lo: Vec<u128>,
    hi: Vec<u128>,
    recno: Vec<u32>,
    lists: Vec<u32>,
    list_of: HashMap<Vec<u32>, u32>,
    nodes: Vec<Level>,
    node_of: HashMap<(Vec<u32>, u64), u32>,
    work: usize,
}

impl Builder<'_> {
    fn nf(&self) -> usize {
        self.spans.len()
    }

    fn field_max(&self, f: usize) -> u128 {
        let bits = self.spans[f].len as u32 * 8;
        if bits >= 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        }
    }

    /// Boundary events of field `f` of elements `members` (ranks): (position, is_start,
    /// rank), removals first at a position.
    fn events(&self, f: usize, members: &[u32]) -> Vec<(u128, bool, u32)> {
        let nf = self.nf();
        let mut ev = Vec::with_capacity(2 * members.len());
        for &r in members {
            let (s, e) = (self.lo[r as usize * nf + f], self.hi[r as usize * nf + f]);
            if s > e {
                continue; // never stored by pipapo; matches nothing
            }
            ev.push((s, true, r));
            if e < self.field_max(f) {
                ev.push((e + 1, false, r));
            }
        }
        ev.sort_unstable();
        ev
    }

    /// The field to cut `members` on, of those not in `used` (a bit per field): the one whose
    /// most crowded interval holds the fewest (up to the list cap + 1), then the narrowest.
    fn choose(&self, members: &[u32], used: u64) -> Option<usize> {
        let cap = list_cap() + 1;
        (0..self.nf())
            .filter(|&f| used >> f & 1 == 0)
            .min_by_key(|&f| {
                let mut active = 0usize;
                let mut max = 0usize;
                for &(_, start, _) in &self.events(f, members) {
                    if start {
                        active += 1;
                        max = max.max(active);
                    } else {
                        active -= 1;
                    }
                }
                (max.min(cap), self.spans[f].len, f)
            })
    }

    /// The entry of a candidate list of `ranks` (ascending), named by record.
    fn list(&mut self, ranks: &[u32]) -> u32 {
        let key: Vec<u32> = ranks.iter().map(|&r| self.recno[r as usize]).collect();
        let lists = &mut self.lists;
        let off = *self.list_of.entry(key).or_insert_with_key(|k| {
            let off = lists.len() as u32;
            lists.push(k.len() as u32);
            lists.extend_from_slice(k);
            off
        });
        if off >= 1 << 30 {
            return FALLBACK;
        }
        (off << 2) | TAG_LIST
    }

    /// The entry of an interval that the elements `ranks` (ascending, more than the list cap)
    /// cover in every field of `used`: a node cutting them on another field, a list of all of
    /// them when every field is used (each contains every key of the interval, so the first
    /// live one is the answer), or [`FALLBACK`] once the work budget is spent.
    fn crowded(&mut self, ranks: Vec<u32>, used: u64) -> u32 {
        let Some(f) = self.choose(&ranks, used) else {
            return self.list(&ranks);
        };
        if let Some(&id) = self.node_of.get(&(ranks.clone(), used)) {
            return (id + 1) << 2;
        }
        if self.work < ranks.len() {
            return FALLBACK;
        }
        self.work -= ranks.len();
        let (starts, ents) = self.sweep(f, &ranks, used | 1 << f);
        self.work = self.work.saturating_sub(ents.len());
        let id = self.nodes.len() as u32;
        if id + 1 >= 1 << 30 {
            return FALLBACK;
        }
        self.nodes
            .push(Level::new(self.spans[f], starts, ents, false));
        self.node_of.insert((ranks, used), id);
        (id + 1) << 2
    }

    /// Cut field `f` of elements `members` into intervals: their starts (the first 0) and
    /// entries, crowded intervals resolved with `used` (which holds `f`).
    fn sweep(&mut self, f: usize, members: &[u32], used: u64) -> (Vec<u128>, Vec<u32>) {
        let mut starts: Vec<u128> = vec![0];
        let mut ents: Vec<u32> = vec![EMPTY];
        let mut active: BTreeSet<u32> = BTreeSet::new();
        let ev = self.events(f, members);
        let mut i = 0;
        while i < ev.len() {
            let pos = ev[i].0;
            while i < ev.len() && ev[i].0 == pos {
                let (_, start, r) = ev[i];
                if start {
                    active.insert(r);
                } else {
                    active.remove(&r);
                }
                i += 1;
            }
            let ent = match active.len() {
                0 => EMPTY,
                1 => active
                    .first()
                    .map_or(EMPTY, |&r| (self.recno[r as usize] << 2) | TAG_ONE),
                // Oldest first (ranks ascend).
                l if l <= list_cap() => self.list(&active.iter().copied().collect::<Vec<_>>()),
                _ => self.crowded(active.iter().copied().collect(), used),
            };
            if *starts.last().unwrap_or(&u128::MAX) == pos {
                starts.pop();
                ents.pop();
            }
            if ents.last() != Some(&ent) {
                starts.push(pos);
                ents.push(ent);
            }
        }
        (starts, ents)
    }
}

impl Index {
    /// Build the index of `p`'s current elements; `None` when the set has more elements than
    /// a tagged entry can name (2^30).
    pub(crate) fn build<X: Clone>(p: &Pipapo<X>) -> Option<Index> {
        let handles: Vec<ElemHandle> = p.handles().collect();
        Self::build_of(p, &handles)
    }

    /// Build the index of the elements `handles` of `p` (in insertion order: the first is the
    /// oldest); `None` as [`Index::build`], or when a handle is not stored.
    pub(crate) fn build_of<X: Clone>(p: &Pipapo<X>, handles: &[ElemHandle]) -> Option<Index> {
        let spans: Vec<Span> = p
            .field_lens()
            .iter()
            .scan(0usize, |at, &len| {
                let s = Span { off: *at, len };
                *at += len;
                Some(s)
            })
            .collect();
        let nf = spans.len();
        let n = handles.len();
        // Handles go into 30-bit entries; records are indexed by handle.
        let slots = handles.iter().map(|h| h.0 as usize + 1).max().unwrap_or(0);
        if slots > 1 << 30 || nf > 64 {
            return None;
        }
        // Numeric bounds per element and field.
        let mut lo = Vec::with_capacity(n * nf);
        let mut hi = Vec::with_capacity(n * nf);
        let mut expires = Vec::with_capacity(n);
        for &h in handles {
            let (s, e) = p.bounds(h)?;
            for &sp in &spans {
                lo.push(read(s, sp));
                hi.push(read(e, sp));
            }
            expires.push(p.elem(h)?.expires.unwrap_or(u64::MAX));
        }
        let mut b = Builder {
            spans: &spans,
            lo,
            hi,
            recno: Vec::new(),
            lists: Vec::new(),
            list_of: HashMap::new(),
            nodes: Vec::new(),
            node_of: HashMap::new(),
            work: (n * NODE_WORK_PER_ELEM).max(NODE_WORK_MIN),
        };
        let all: Vec<u32> = (0..n as u32).collect();
        let primary = b.choose(&all, 0).unwrap_or(0);
        // Record numbers: elements in the order of their primary field's start (then rank).
        let mut by_start = all.clone();
        by_start.sort_unstable_by_key(|&r| (b.lo[r as usize * nf + primary], r));
        b.recno = vec![0u32; n];
        for (k, &r) in by_start.iter().enumerate() {
            b.recno[r as usize] = k as u32;
        }
        let (starts, ents) = b.sweep(primary, &all, 1 << primary);
        let intervals = starts.len();
        let root = Level::new(spans[primary], starts, ents, true);
        let Builder {
            lo,
            hi,
            recno,
            lists,
            nodes,
            ..
        } = b;
        let mut verify = Vec::new();
        let mut words = 1;
        for f in (0..nf).filter(|&f| f != primary) {
            let c = Check::new(spans[f], words);
            words += c.words();
            verify.push((f, c));
        }
        let stride = if words <= 8 {
            words.next_power_of_two()
        } else {
            words.div_ceil(8) * 8
        };
        let mut recs = vec![0u64; n * stride + 8];
        // Start the records on a 64-byte boundary of this allocation.
        let rec_at = (8 - (recs.as_ptr() as usize / 8) % 8) % 8;
        let mut rec_handle = vec![0u32; n];
        let mut rec_of = vec![NO_RECORD; slots];
        for (r, h) in handles.iter().enumerate() {
            let k = recno[r] as usize;
            rec_handle[k] = h.0;
            rec_of[h.0 as usize] = k as u32;
            let at = rec_at + k * stride;
            let rec = &mut recs[at..at + stride];
            // An inverted range (never stored by pipapo) matches nothing: expired at 0.
            let inverted = (0..nf).any(|f| lo[r * nf + f] > hi[r * nf + f]);
            rec[0] = if inverted { 0 } else { expires[r] };
            for (f, c) in &verify {
                if !inverted {
                    c.store(rec, lo[r * nf + f], hi[r * nf + f]);
                }
            }
        }
        let verify: Box<[Check]> = verify.into_iter().map(|(_, c)| c).collect();
        Some(Index {
            key_len: p.key_len(),
            root,
            nodes: nodes.into(),
            lists: lists.into(),
            verify,
            stride,
            recs: recs.into(),
            rec_at,
            rec_handle: rec_handle.into(),
            rec_of: rec_of.into(),
            intervals,
        })
    }

    /// The record of element handle `h`, if the index holds it.
    pub(crate) fn record_of(&self, h: u32) -> Option<u32> {
        self.rec_of
            .get(h as usize)
            .copied()
            .filter(|&r| r != NO_RECORD)
    }

    /// Bytes held by the index's tables.
    pub fn bytes(&self) -> usize {
        self.root.bytes()
            + self.nodes.iter().map(Level::bytes).sum::<usize>()
            + self.lists.len() * 4
            + self.recs.len() * 8
            + (self.rec_handle.len() + self.rec_of.len()) * 4
    }

    /// Key offset and width of the primary field.
    pub fn primary(&self) -> (usize, usize) {
        (self.root.span.off, self.root.span.len)
    }

    /// Intervals of the primary field (before the 256-value blocks of a direct table).
    pub fn intervals(&self) -> usize {
        self.intervals
    }

    /// Nodes of the decision tree under the primary field's crowded intervals (0 when every
    /// interval holds a short list).
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// The entry of the key's interval: the root's, then the nodes' down the tree.
    #[inline(always)]
    fn entry(&self, key: &[u8]) -> u32 {
        let e = self.root.entry(key);
        if e & 3 == 0 && e != EMPTY {
            return self.descend(e, key);
        }
        e
    }

    /// The entry under node entry `e`, down the decision tree (crowded intervals only).
    #[inline(never)]
    fn descend(&self, mut e: u32, key: &[u8]) -> u32 {
        while e & 3 == 0 && e != EMPTY {
            e = match self.nodes.get((e >> 2) as usize - 1) {
                Some(l) => l.entry(key),
                None => FALLBACK,
            };
        }
        e
    }

    /// Candidate record `r` when it is live at `now`, not in `gone` (a bit per record:
    /// elements removed since the build) and contains `key` in every non-primary field.
    #[inline(always)]
    fn check(&self, r: u32, key: &[u8], now: u64, gone: &[u64]) -> Option<ElemHandle> {
        let base = self.rec_at + r as usize * self.stride;
        let rec = self.recs.get(base..base + self.stride)?;
        let removed = gone
            .get(r as usize / 64)
            .is_some_and(|w| w >> (r % 64) & 1 != 0);
        let mut ok = now < rec[0] && !removed;
        for c in self.verify.iter() {
            ok &= c.matches(rec, key);
        }
        if ok {
            self.rec_handle.get(r as usize).map(|&h| ElemHandle(h))
        } else {
            None
        }
    }

    /// The answer for entry `e`.
    #[inline(always)]
    fn resolve(&self, e: u32, key: &[u8], now: u64, gone: &[u64]) -> Probe {
        match e & 3 {
            TAG_ONE => Probe::Found(self.check(e >> 2, key, now, gone)),
            TAG_LIST => {
                let off = (e >> 2) as usize;
                let len = self.lists.get(off).copied().unwrap_or(0) as usize;
                let hs = self.lists.get(off + 1..off + 1 + len).unwrap_or(&[]);
                Probe::Found(hs.iter().find_map(|&h| self.check(h, key, now, gone)))
            }
            TAG_FALLBACK => Probe::Fallback,
            _ => Probe::Found(None),
        }
    }

    /// The index's answers for up to 64 keys packed in `keys` (`key_len` bytes each, as many
    /// as `out` holds), in two passes: every key's class entry (prefetching a single
    /// candidate's record), then every key's candidate check. Keys the index sends back are
    /// marked in the returned bit mask and get `None` in `out`.
    #[inline]
    pub(crate) fn probe_batch(
        &self,
        keys: &[u8],
        now: u64,
        gone: &[u64],
        out: &mut [Option<ElemHandle>],
    ) -> u64 {
        let kl = self.key_len.max(1);
        let m = out.len().min(64).min(keys.len() / kl);
        let mut ents = [EMPTY; 64];
        for (e, k) in ents[..m].iter_mut().zip(keys.chunks_exact(kl)) {
            *e = self.entry(k);
            if *e & 3 == TAG_ONE {
                crate::simd::prefetch(&self.recs, self.rec_at + (*e >> 2) as usize * self.stride);
            }
        }
        let mut back = 0u64;
        for (i, (o, k)) in out[..m].iter_mut().zip(keys.chunks_exact(kl)).enumerate() {
            *o = match self.resolve(ents[i], k, now, gone) {
                Probe::Found(r) => r,
                Probe::Fallback => {
                    back |= 1 << i;
                    None
                }
            };
        }
        back
    }

    /// The index's answer for one key (`key` of the set's key length), skipping the elements
    /// in `gone` (a bit per handle).
    #[inline]
    pub(crate) fn probe(&self, key: &[u8], now: u64, gone: &[u64]) -> Probe {
        if key.len() != self.key_len {
            return Probe::Found(None);
        }
        self.resolve(self.entry(key), key, now, gone)
    }
}

/// Unsigned interval-start numbers.
trait Num: Copy + Ord + std::fmt::Debug {
    const MAX: Self;
    /// `(self - lo) >> shift` (0 when `self < lo`), saturated to `usize`.
    fn bucket(self, lo: Self, shift: u32) -> usize;
    /// Bit length of `self - lo` (`self >= lo`).
    fn span_bits(self, lo: Self) -> u32;
}

impl Num for u64 {
    const MAX: u64 = u64::MAX;
    #[inline(always)]
    fn bucket(self, lo: u64, shift: u32) -> usize {
        usize::try_from(self.saturating_sub(lo) >> shift).unwrap_or(usize::MAX)
    }
    fn span_bits(self, lo: u64) -> u32 {
        64 - self.saturating_sub(lo).leading_zeros()
    }
}

impl Num for u128 {
    const MAX: u128 = u128::MAX;
    #[inline(always)]
    fn bucket(self, lo: u128, shift: u32) -> usize {
        usize::try_from(self.saturating_sub(lo) >> shift).unwrap_or(usize::MAX)
    }
    fn span_bits(self, lo: u128) -> u32 {
        128 - self.saturating_sub(lo).leading_zeros()
    }
}

/// Widest radix table, in bits of the bucket number.
const RADIX_BITS_MAX: u32 = 16;

/// Interval starts (ascending, the first 0) with a radix table over `[lo, hi]` (the second
/// and the last start): bucket `d` holds the starts `s` with `(s - lo) >> shift == d`, and
/// `first[d]` is the index of its first start. The interval of `v` is the last start at or
/// below `v`: it lies in `first[d] - 1 ..= first[d] - 1 + most` for `v`'s bucket `d` (every
/// start of a later bucket is above `v`), found by a branchless search of a fixed number of
/// steps. With about two buckets per start, buckets hold one or two starts unless the
/// starts cluster; in the worst case the window is the whole array (a binary search).
#[derive(Debug, Clone)]
struct Radix<T> {
    /// Starts, then `most` copies of `T::MAX` so that every window is in bounds.
    starts: Box<[T]>,
    /// Real starts.
    n: usize,
    lo: T,
    shift: u32,
    /// Index of the first start per bucket, one more entry at the end (`n`).
    first: Box<[u32]>,
    /// Most starts in one bucket.
    most: usize,
}

impl<T: Num> Radix<T> {
    fn new(starts: Vec<T>) -> Radix<T> {
        let n = starts.len();
        let (lo, hi) = match (starts.get(1), starts.last()) {
            (Some(&lo), Some(&hi)) => (lo, hi),
            _ => (T::MAX, T::MAX),
        };
        // Bit length of hi - lo: buckets cover [lo, hi] with at most 2^16 of them.
        let span_bits = if n > 1 { hi.span_bits(lo) } else { 0 };
        let want = (usize::BITS - n.leading_zeros()).min(RADIX_BITS_MAX);
        let tbits = span_bits.min(want);
        let shift = span_bits - tbits;
        let buckets = 1usize << tbits;
        let mut first = vec![0u32; buckets + 1];
        // Count per bucket, then prefix sums starting at 1 (start 0 is below every bucket).
        for &s in starts.iter().skip(1) {
            first[s.bucket(lo, shift).min(buckets - 1) + 1] += 1;
        }
        first[0] = 1;
        for d in 1..=buckets {
            first[d] += first[d - 1];
        }
        let most = first
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0);
        let mut padded = starts;
        padded.extend(std::iter::repeat_n(T::MAX, most));
        Radix {
            starts: padded.into(),
            n,
            lo,
            shift,
            first: first.into(),
            most,
        }
    }

    fn bytes(&self) -> usize {
        self.starts.len() * std::mem::size_of::<T>() + self.first.len() * 4
    }

    /// First window index for `v`: the last start before `v`'s bucket.
    #[inline(always)]
    fn base(&self, v: T) -> usize {
        let last = self.first.len() - 2;
        let d = v.bucket(self.lo, self.shift).min(last);
        self.first[d] as usize - 1
    }

    /// Index of the last start at or below `v`.
    #[inline(always)]
    fn find(&self, v: T) -> usize {
        let mut base = self.base(v);
        let mut n = self.most + 1;
        while n > 1 {
            let half = n / 2;
            let c = base + half;
            base = select_unpredictable(self.starts[c] <= v, c, base);
            n -= half;
        }
        base.min(self.n - 1)
    }
}

impl<X: Clone> Pipapo<X> {
    /// Build the field index of the current elements (see [`Index`]); lookups use it until the
    /// set changes. Cost O(N log N) for N elements (about 10 ms for 30 000 elements on the
    /// machine of `perf/RESULTS.md`), memory [`Pipapo::index_bytes`].
    pub fn build_index(&mut self) {
        self.index = Index::build(self).map(Arc::new);
        self.delta = None;
    }

    /// `true` while a field index is kept (built by [`Pipapo::build_index`]; changes since are
    /// in its overlay until [`Pipapo::refresh_index`]).
    pub fn has_index(&self) -> bool {
        self.index.is_some()
    }

    /// The field index, if built and valid.
    pub fn index(&self) -> Option<&Index> {
        self.index.as_deref()
    }

    /// Bytes held by the field index (0 without one).
    pub fn index_bytes(&self) -> usize {
        self.index.as_ref().map_or(0, |i| i.bytes())
    }

    /// Drop the field index and its overlay (a flush).
    #[inline]
    pub(super) fn touched(&mut self) {
        self.index = None;
        self.delta = None;
    }

    /// The oldest live element containing `key` through the field index, pipapo's best
    /// variant for keys the index sends back and when no index is built. Same answers as
    /// [`Pipapo::lookup_variant`].
    #[inline]
    pub fn lookup_index(&self, key: &[u8], now: u64) -> Option<ElemHandle> {
        match self
            .index
            .as_deref()
            .and_then(|i| self.probe_indexed(i, key, now))
        {
            Some(r) => r,
            None => self.lookup_sent_back(key, now),
        }
    }

    /// Pipapo's answer for a key the index sends back (or when no index is built): out of
    /// line, so that the index's probe stays small enough to inline at its callers.
    #[cold]
    #[inline(never)]
    fn lookup_sent_back(&self, key: &[u8], now: u64) -> Option<ElemHandle> {
        self.lookup_variant(Variant::best(), key, now)
    }

    /// Batched lookup through the field index (as [`Pipapo::lookup_batch`]): `keys` holds
    /// `out.len()` keys back to back; keys beyond `keys.len() / key_len` get `None`. Keys the
    /// index sends back go to pipapo's batched lookup together.
    pub fn lookup_batch_index(&self, keys: &[u8], now: u64, out: &mut [Option<ElemHandle>]) {
        let Some(ix) = self.index.as_deref() else {
            return self.lookup_batch_variant(Variant::best(), keys, now, out);
        };
        let gone = self.gone();
        let kl = self.key_len.max(1);
        let (head, tail) = out.split_at_mut(out.len().min(keys.len() / kl));
        tail.fill(None);
        if ix.recs.len() * 8 <= STAGED_MIN_BYTES && !staged_forced() {
            // Small records stay in cache: key after key, the out-of-order core overlaps them.
            let mut back: Vec<usize> = Vec::new();
            for (i, (o, k)) in head.iter_mut().zip(keys.chunks_exact(kl)).enumerate() {
                *o = match ix.probe(k, now, gone) {
                    Probe::Found(r) => r,
                    Probe::Fallback => {
                        back.push(i);
                        None
                    }
                };
            }
            self.added_batch(keys, &back, now, head);
            if !back.is_empty() {
                self.fallback_batch(keys, &back, now, head);
            }
            return;
        }
        let mut back: Vec<usize> = Vec::new();
        for (c, (o, ks)) in head.chunks_mut(64).zip(keys.chunks(64 * kl)).enumerate() {
            let mut b = ix.probe_batch(ks, now, gone, o);
            while b != 0 {
                back.push(c * 64 + b.trailing_zeros() as usize);
                b &= b - 1;
            }
        }
        self.added_batch(keys, &back, now, head);
        if !back.is_empty() {
            self.fallback_batch(keys, &back, now, head);
        }
    }

    /// Pipapo's answers (best variant, batched when there are several) for keys `back`
    /// (ascending) of `keys`, into `out`.
    #[cold]
    fn fallback_batch(
        &self,
        keys: &[u8],
        back: &[usize],
        now: u64,
        out: &mut [Option<ElemHandle>],
    ) {
        let kl = self.key_len;
        let key = |i: usize| &keys[i * kl..(i + 1) * kl];
        if let [i] = *back {
            out[i] = self.lookup_variant(Variant::best(), key(i), now);
            return;
        }
        let mut buf = Vec::with_capacity(back.len().min(64) * kl);
        let mut res = [None; 64];
        for part in back.chunks(64) {
            buf.clear();
            for &i in part {
                buf.extend_from_slice(key(i));
            }
            self.lookup_batch_variant(Variant::best(), &buf, now, &mut res[..part.len()]);
            for (&i, &r) in part.iter().zip(&res) {
                out[i] = r;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_is_big_endian_for_every_width() {
        let key: Vec<u8> = (1..=40).collect();
        for len in 1..=16 {
            let want = key[3..3 + len]
                .iter()
                .fold(0u128, |v, &b| (v << 8) | u128::from(b));
            assert_eq!(read(&key, Span { off: 3, len }), want, "width {len}");
        }
    }

    /// The radix search against a plain scan, on spread, clustered and single starts, for
    /// values at, around and between the starts.
    #[test]
    fn radix_finds_last_start_at_or_below() {
        let sets: Vec<Vec<u64>> = vec![
            vec![0],
            vec![0, 5],
            vec![0, 5, 9, 100, 101, u64::MAX],
            (0..2000).map(|i| i * 2).collect(),
            // Clustered: a few far outliers make big buckets.
            [
                vec![0],
                (1..300).collect::<Vec<u64>>(),
                vec![1 << 40, (1 << 40) + 7, u64::MAX - 1],
            ]
            .concat(),
        ];
        for starts in sets {
            let r = Radix::new(starts.clone());
            let mut vals: Vec<u64> = Vec::new();
            for &s in &starts {
                vals.extend([s, s.wrapping_sub(1), s.saturating_add(1), s / 2]);
            }
            vals.push(u64::MAX);
            let want: Vec<usize> = vals
                .iter()
                .map(|&v| starts.iter().rposition(|&s| s <= v).unwrap())
                .collect();
            let got: Vec<usize> = vals.iter().map(|&v| r.find(v)).collect();
            assert_eq!(got, want, "{starts:?}");
            let r = Radix::new(starts.iter().map(|&s| u128::from(s) << 60).collect());
            let got: Vec<usize> = vals.iter().map(|&v| r.find(u128::from(v) << 60)).collect();
            assert_eq!(got, want, "u128 {starts:?}");
        }
    }
}
