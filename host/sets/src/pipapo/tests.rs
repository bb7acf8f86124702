//! Property and regression tests of the pipapo set: every lookup variant against a naive
//! linear-scan oracle, and the kernel's overlap, delete and timeout rules.

use proptest::prelude::*;

use super::*;

const WIDTHS: [usize; 5] = [1, 2, 4, 6, 16];

/// An oracle element: start, end, expiry, handle.
type OElem = (Vec<u8>, Vec<u8>, Option<u64>, ElemHandle);
/// A generated set: field widths, elements, policy index, deletions.
type GenSet = (
    Vec<usize>,
    Vec<(Vec<FieldRange>, Option<u64>)>,
    u8,
    Vec<usize>,
);

/// Naive model: elements in insertion order, first live one containing the key wins.
#[derive(Default)]
struct Oracle {
    lens: Vec<usize>,
    elems: Vec<OElem>,
}

impl Oracle {
    fn contains(&self, s: &[u8], e: &[u8], k: &[u8]) -> bool {
        let mut at = 0;
        for &l in &self.lens {
            let r = at..at + l;
            if k[r.clone()] < s[r.clone()] || k[r.clone()] > e[r] {
                return false;
            }
            at += l;
        }
        true
    }

    fn lookup(&self, k: &[u8], now: u64) -> Option<ElemHandle> {
        self.elems
            .iter()
            .find(|(s, e, x, _)| x.is_none_or(|t| now < t) && self.contains(s, e, k))
            .map(|x| x.3)
    }

    /// What the kernel answers to an insertion.
    fn insert_outcome(&self, s: &[u8], e: &[u8], now: u64) -> Result<(), SetError> {
        if let Some(h) = self.lookup(s, now) {
            let d = self.elems.iter().find(|x| x.3 == h).unwrap();
            if d.0 == s && d.1 == e {
                return Err(SetError::Exists(h));
            }
            return Err(SetError::Overlap(h));
        }
        if let Some(h) = self.lookup(e, now) {
            return Err(SetError::Overlap(h));
        }
        Ok(())
    }
}

/// Every variant's answer for `key`, checked against the oracle.
fn check_all(p: &Pipapo, o: &Oracle, key: &[u8], now: u64) -> Result<(), TestCaseError> {
    let want = o.lookup(key, now);
    prop_assert_eq!(p.lookup_scalar(key, now), want, "scalar {:?}", key);
    prop_assert_eq!(p.lookup_avx2(key, now), want, "avx2 {:?}", key);
    prop_assert_eq!(p.lookup_avx512(key, now), want, "avx512 {:?}", key);
    prop_assert_eq!(p.lookup(key, now), want, "dispatch {:?}", key);
    prop_assert_eq!(p.lookup_bitmap(key, now), want, "bitmap pipeline {:?}", key);
    prop_assert_eq!(p.lookup_index(key, now), want, "index {:?}", key);
    Ok(())
}

/// Batched lookups of all probes, every variant, against the oracle.
fn check_batch(p: &Pipapo, o: &Oracle, keys: &[Vec<u8>], now: u64) -> Result<(), TestCaseError> {
    for chunk in keys.chunks(BATCH_MAX_TEST) {
        let flat: Vec<u8> = chunk.concat();
        let want: Vec<_> = chunk.iter().map(|k| o.lookup(k, now)).collect();
        for by_fields in [false, true] {
            super::lookup::BATCH_BY_FIELDS.store(by_fields, std::sync::atomic::Ordering::Relaxed);
            for v in [Variant::Scalar, Variant::Avx2, Variant::Avx512] {
                let mut out = vec![None; chunk.len()];
                p.lookup_batch_variant(v, &flat, now, &mut out);
                prop_assert_eq!(&out, &want, "batch {:?} by fields {}", v, by_fields);
            }
        }
        let mut out = vec![None; chunk.len()];
        p.lookup_batch(&flat, now, &mut out);
        prop_assert_eq!(&out, &want, "batch dispatch");
        for staged in [false, true] {
            super::index::STAGED.store(staged, std::sync::atomic::Ordering::Relaxed);
            let mut out = vec![None; chunk.len()];
            p.lookup_batch_index(&flat, now, &mut out);
            prop_assert_eq!(&out, &want, "batch index, two passes {}", staged);
        }
    }
    Ok(())
}

const BATCH_MAX_TEST: usize = 64;

/// Probe keys around an element: its corners, and each corner with one bit flipped in every
/// byte position of every field (bits 0, 7 and the position's own index mod 8).
fn probes(lens: &[usize], s: &[u8], e: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![s.to_vec(), e.to_vec()];
    let total: usize = lens.iter().sum();
    for corner in [s, e] {
        for pos in 0..total {
            for bit in [0, 7, pos % 8] {
                let mut k = corner.to_vec();
                k[pos] ^= 1 << bit;
                out.push(k);
            }
        }
    }
    out
}

#[derive(Debug, Clone)]
struct FieldRange {
    start: Vec<u8>,
    end: Vec<u8>,
}

/// A field range: a random start and a span of 0, a few, or many values; values are drawn from
/// a small pool so that elements overlap often.
fn field_range(len: usize) -> impl Strategy<Value = FieldRange> {
    (0u8..4, any::<u128>(), 0u32..4, any::<u64>()).prop_map(
        move |(pool, raw, span_kind, span_raw)| {
            let bits = len as u32 * 8;
            let max = expand::low_mask(bits);
            let start = if pool == 0 {
                raw & max
            } else {
                (raw & 0x3f) << (bits.saturating_sub(8)) & max
            };
            let span: u128 = match span_kind {
                0 => 0,
                1 => u128::from(span_raw % 8),
                2 => u128::from(span_raw) & max,
                _ => max,
            };
            let end = start.saturating_add(span).min(max);
            let to = |v: u128| v.to_be_bytes()[16 - len..].to_vec();
            FieldRange {
                start: to(start),
                end: to(end),
            }
        },
    )
}

fn set_strategy() -> impl Strategy<Value = GenSet> {
    prop::collection::vec(prop::sample::select(WIDTHS.to_vec()), 1..=4).prop_flat_map(|lens| {
        let elem = (
            lens.iter().map(|&l| field_range(l)).collect::<Vec<_>>(),
            prop::option::weighted(0.2, 1u64..20),
        );
        (
            Just(lens),
            prop::collection::vec(elem, 1..24),
            0u8..3,
            prop::collection::vec(any::<usize>(), 0..4),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random sets: insertion outcomes follow the kernel's overlap rules, and every lookup
    /// variant (scalar, AVX2, AVX-512, dispatch, batched) agrees with the linear-scan oracle
    /// on corners and one-bit neighbours, before and after deletions, at several times.
    #[test]
    fn every_variant_matches_oracle((lens, elems, policy, deletes) in set_strategy()) {
        let policy = [GroupPolicy::Auto, GroupPolicy::Fixed8, GroupPolicy::Fixed4][policy as usize];
        let mut p: Pipapo = Pipapo::with_policy(&lens, policy).unwrap();
        let mut o = Oracle { lens: lens.clone(), ..Oracle::default() };
        let mut all_probes = Vec::new();
        for (fields, expires) in &elems {
            let s: Vec<u8> = fields.iter().flat_map(|f| f.start.clone()).collect();
            let e: Vec<u8> = fields.iter().flat_map(|f| f.end.clone()).collect();
            let want = o.insert_outcome(&s, &e, 0);
            let got = p.insert(NewElem { start: &s, end: Some(&e), data: 0, expires: *expires, ext: () }, InsertMode::Create, 0);
            match (&want, &got) {
                (Ok(()), Ok(h)) => o.elems.push((s.clone(), e.clone(), *expires, *h)),
                (Err(w), Err(g)) => prop_assert_eq!(w, g),
                _ => prop_assert!(false, "insert {:?}-{:?}: want {:?} got {:?}", s, e, want, got),
            }
            all_probes.extend(probes(&lens, &s, &e));
        }
        // The index as built (lists up to MAX_CANDIDATES), then with lists of 1 and 2, which
        // cuts every interval that more elements cover with a tree of nodes down the fields.
        for cap in [MAX_CANDIDATES, 1, 2] {
            super::index::LIST_CAP.set(cap);
            p.build_index();
            prop_assert!(p.has_index());
            for now in [0u64, 10, 100] {
                for k in &all_probes {
                    check_all(&p, &o, k, now)?;
                }
                check_batch(&p, &o, &all_probes, now)?;
            }
        }
        // Later builds of this case: trees, or not.
        super::index::LIST_CAP.set([MAX_CANDIDATES, 1][deletes.len() % 2]);
        // Delete some elements by their start point, then probe again.
        for d in deletes {
            if o.elems.is_empty() { break; }
            let i = d % o.elems.len();
            let s = o.elems[i].0.clone();
            let want = o.lookup(&s, 0);
            let got = p.delete(&s, 0).ok().map(|_| ());
            prop_assert_eq!(got.is_some(), want.is_some());
            if let Some(h) = want {
                o.elems.retain(|x| x.3 != h);
            }
            // The index of the new contents (`index_dropped_by_every_change` tests that the
            // delete dropped the old one).
            p.build_index();
            for k in &all_probes {
                check_all(&p, &o, k, 5)?;
            }
        }
        // Without the tables' growth slack and spare capacity: the same answers.
        p.shrink_to_fit();
        for k in &all_probes {
            check_all(&p, &o, k, 5)?;
        }
        check_batch(&p, &o, &all_probes, 5)?;
        // Garbage collection removes exactly the elements expired at its time, in one pass,
        // and leaves the others answering as before.
        let dead = o.elems.iter().filter(|x| x.2.is_some_and(|t| t <= 10)).count();
        prop_assert_eq!(p.gc(10), dead);
        o.elems.retain(|x| x.2.is_none_or(|t| t > 10));
        prop_assert_eq!(p.len(), o.elems.len());
        for now in [0u64, 10, 100] {
            for k in &all_probes {
                check_all(&p, &o, k, now)?;
            }
        }
        check_batch(&p, &o, &all_probes, 10)?;
        // A shrunk set grows again: the elements inserted anew follow the same rules.
        p.shrink_to_fit();
        for (fields, _) in &elems {
            let s: Vec<u8> = fields.iter().flat_map(|f| f.start.clone()).collect();
            let e: Vec<u8> = fields.iter().flat_map(|f| f.end.clone()).collect();
            let want = o.insert_outcome(&s, &e, 20);
            let got = p.insert(NewElem { start: &s, end: Some(&e), data: 0, expires: None, ext: () }, InsertMode::Create, 20);
            match (&want, &got) {
                (Ok(()), Ok(h)) => o.elems.push((s.clone(), e.clone(), None, *h)),
                (Err(w), Err(g)) => prop_assert_eq!(w, g),
                _ => prop_assert!(false, "insert {:?}-{:?}: want {:?} got {:?}", s, e, want, got),
            }
        }
        for k in &all_probes {
            check_all(&p, &o, k, 20)?;
        }
        check_batch(&p, &o, &all_probes, 20)?;
        super::index::LIST_CAP.set(MAX_CANDIDATES);
    }
}

/// Keys that match many field-0 rules (every element spans the whole first field), so the fast
/// path's rule list and word window overflow and the bitmap pipeline answers: every variant,
/// single and batched, still returns the element holding the key.
#[test]
fn fast_path_fallback_on_wide_first_field() {
    let mut p: Pipapo = Pipapo::new(&[1, 2]).unwrap();
    let mut hs = Vec::new();
    for i in 0..40u16 {
        let (lo, hi) = ((i * 10).to_be_bytes(), (i * 10 + 5).to_be_bytes());
        let s = [0, lo[0], lo[1]];
        let e = [255, hi[0], hi[1]];
        let elem = NewElem {
            start: &s,
            end: Some(&e),
            data: i as u32,
            expires: None,
            ext: (),
        };
        hs.push(p.insert(elem, InsertMode::Create, 0).unwrap());
    }
    let mut flat = Vec::new();
    let mut want = Vec::new();
    for i in 0..40u16 {
        for off in [0u16, 3, 5, 7] {
            let v = (i * 10 + off).to_be_bytes();
            let key = [(i * 7) as u8, v[0], v[1]];
            let w = (off <= 5).then_some(hs[i as usize]);
            for var in [Variant::Scalar, Variant::Avx2, Variant::Avx512] {
                assert_eq!(p.lookup_variant(var, &key, 0), w, "{var:?} {key:?}");
            }
            assert_eq!(p.lookup_bitmap(&key, 0), w);
            flat.extend_from_slice(&key);
            want.push(w);
        }
    }
    for chunk in 0..want.len().div_ceil(64) {
        let keys = &flat[chunk * 64 * 3..((chunk + 1) * 64 * 3).min(flat.len())];
        let w = &want[chunk * 64..((chunk + 1) * 64).min(want.len())];
        for var in [Variant::Scalar, Variant::Avx2, Variant::Avx512] {
            for by_fields in [false, true] {
                super::lookup::BATCH_BY_FIELDS
                    .store(by_fields, std::sync::atomic::Ordering::Relaxed);
                let mut out = vec![None; w.len()];
                p.lookup_batch_variant(var, keys, 0, &mut out);
                assert_eq!(out, w, "{var:?} {by_fields}");
            }
        }
    }
}

/// Every variant, single and batched, agrees with the bitmap pipeline on the selftest's
/// performance sets (buckets of 1 to 4 blocks, 8-bit groups, 2 to 4 fields) and on a set whose
/// first field has more than 16 blocks per bucket (the SIMD steps' 16-block chunks and odd
/// tails), for matching keys and for keys next to them.
#[test]
fn variants_agree_on_multi_block_sets() {
    let mut sets: Vec<(Pipapo, Vec<u8>)> = crate::perfcases::CASES
        .iter()
        .filter(|c| c.entries <= 1000)
        .map(|c| (c.build(GroupPolicy::Auto), c.probes(300)))
        .collect();
    // 2-byte field . 1-byte field, 4500 elements of one port (first field 4500 rules, 18
    // blocks), then an odd block count.
    let mut p: Pipapo = Pipapo::new(&[2, 1]).unwrap();
    let mut keys = Vec::new();
    for i in 0..4500u16 {
        let v = (i * 3).to_be_bytes();
        let (s, e) = ([v[0], v[1], 6], [v[0], v[1], 17]);
        let elem = NewElem {
            start: &s,
            end: Some(&e),
            data: 0,
            expires: None,
            ext: (),
        };
        p.insert(elem, InsertMode::Create, 0).unwrap();
        if i % 7 == 0 {
            keys.extend_from_slice(&[v[0], v[1], 10]);
        }
    }
    sets.push((p.clone(), keys.clone()));
    // The same after deleting every third element (rules cut, ranges recomputed).
    for i in (0..4500u16).step_by(3) {
        let v = (i * 3).to_be_bytes();
        p.delete(&[v[0], v[1], 6], 0).unwrap();
    }
    sets.push((p, keys));
    for (p, probes) in &sets {
        let kl = p.key_len();
        let mut keys = probes.clone();
        // Neighbours: last byte of each probe plus one and minus one.
        for k in probes.chunks(kl) {
            for d in [1u8, 255] {
                let mut n = k.to_vec();
                n[kl - 1] = n[kl - 1].wrapping_add(d);
                keys.extend_from_slice(&n);
            }
        }
        let want: Vec<_> = keys.chunks(kl).map(|k| p.lookup_bitmap(k, 0)).collect();
        assert!(want.iter().any(Option::is_some));
        for v in [Variant::Scalar, Variant::Avx2, Variant::Avx512] {
            let got: Vec<_> = keys.chunks(kl).map(|k| p.lookup_variant(v, k, 0)).collect();
            assert_eq!(got, want, "{v:?} {:?}", p.field_lens());
            for by_fields in [false, true] {
                super::lookup::BATCH_BY_FIELDS
                    .store(by_fields, std::sync::atomic::Ordering::Relaxed);
                let mut out = vec![None; want.len()];
                p.lookup_batch_variant(v, &keys, 0, &mut out);
                assert_eq!(out, want, "batch {v:?} {by_fields} {:?}", p.field_lens());
            }
        }
    }
}

/// Insert `(start, end, expires)` elements in order, all accepted.
fn set_of(lens: &[usize], elems: &[(Vec<u8>, Vec<u8>, Option<u64>)]) -> (Pipapo, Vec<ElemHandle>) {
    let mut p: Pipapo = Pipapo::new(lens).unwrap();
    let hs = elems
        .iter()
        .map(|(s, e, x)| {
            let elem = NewElem {
                start: s,
                end: Some(e),
                data: 0,
                expires: *x,
                ext: (),
            };
            p.insert(elem, InsertMode::Create, 0).unwrap()
        })
        .collect();
    (p, hs)
}

/// Every key of `keys` through the index (single and batched) against the scalar pipapo
/// lookup; returns the answers.
fn index_agrees(p: &Pipapo, keys: &[Vec<u8>], now: u64) -> Vec<Option<ElemHandle>> {
    let want: Vec<_> = keys.iter().map(|k| p.lookup_scalar(k, now)).collect();
    let got: Vec<_> = keys.iter().map(|k| p.lookup_index(k, now)).collect();
    assert_eq!(got, want, "single, now {now}");
    // Batches of 100 keys: one full batch of 64 and a partial one.
    for staged in [false, true] {
        super::index::STAGED.store(staged, std::sync::atomic::Ordering::Relaxed);
        for chunk in 0..keys.len().div_ceil(100) {
            let ks = &keys[chunk * 100..((chunk + 1) * 100).min(keys.len())];
            let mut out = vec![None; ks.len()];
            p.lookup_batch_index(&ks.concat(), now, &mut out);
            let w = &want[chunk * 100..chunk * 100 + ks.len()];
            assert_eq!(out, w, "batch, now {now}, two passes {staged}");
        }
    }
    want
}

fn be(v: u128, len: usize) -> Vec<u8> {
    v.to_be_bytes()[16 - len..].to_vec()
}

/// For every field width (1, 2, 4, 6, 16) as the selective field, first or last: distinct
/// 2-wide ranges there, the other field a wide range. The index chooses that field as primary
/// and answers as pipapo does on the corners and their one-bit neighbours.
#[test]
fn index_primary_of_every_width() {
    for w in WIDTHS {
        for first in [true, false] {
            let lens = if first { vec![w, 4] } else { vec![4, w] };
            let mut elems = Vec::new();
            for i in 0..40u128 {
                let (a, b) = if w == 1 {
                    (i * 5, i * 5 + 1)
                } else {
                    (i * 1000 + 7, i * 1000 + 8)
                };
                let (sel_s, sel_e) = (be(a, w), be(b, w));
                let (oth_s, oth_e) = (be(i, 4), be(0xffff_0000 + i, 4));
                let (s, e) = if first {
                    ([sel_s, oth_s].concat(), [sel_e, oth_e].concat())
                } else {
                    ([oth_s, sel_s].concat(), [oth_e, sel_e].concat())
                };
                elems.push((s, e, None));
            }
            let (mut p, _) = set_of(&lens, &elems);
            p.build_index();
            let ix = p.index().unwrap();
            assert_eq!(
                ix.primary(),
                if first { (0, w) } else { (4, w) },
                "width {w}"
            );
            let keys: Vec<Vec<u8>> = elems
                .iter()
                .flat_map(|(s, e, _)| probes(&lens, s, e))
                .collect();
            let got = index_agrees(&p, &keys, 0);
            assert!(got.iter().filter(|x| x.is_some()).count() > 80, "width {w}");
        }
    }
}

/// Nested elements (several contain the key: the oldest live one wins; pipapo accepts an
/// element around an older one, as neither of its end points lies in it) and expired ones
/// (skipped), at several times, through lists of candidates.
#[test]
fn index_nested_and_expired() {
    // Element i: port 150-10i .. 151+10i, address 10.0.0.128-16i .. 10.0.0.129+16i; the
    // innermost first.
    let mut elems = Vec::new();
    for i in 0..6u128 {
        let expires = match i {
            0 => Some(10),
            2 => Some(20),
            _ => None,
        };
        elems.push((
            [be(150 - 10 * i, 2), be(0x0a00_0080 - 16 * i, 4)].concat(),
            [be(151 + 10 * i, 2), be(0x0a00_0081 + 16 * i, 4)].concat(),
            expires,
        ));
    }
    let (mut p, hs) = set_of(&[2, 4], &elems);
    p.build_index();
    let key = [be(150, 2), be(0x0a00_0080, 4)].concat();
    assert_eq!(p.lookup_index(&key, 0), Some(hs[0]));
    assert_eq!(p.lookup_index(&key, 10), Some(hs[1]));
    let key = [be(125, 2), be(0x0a00_0080, 4)].concat();
    assert_eq!(p.lookup_index(&key, 0), Some(hs[3]));
    let key = [be(135, 2), be(0x0a00_0081 + 32, 4)].concat();
    assert_eq!(p.lookup_index(&key, 0), Some(hs[2]));
    assert_eq!(p.lookup_index(&key, 20), Some(hs[3]));
    let keys: Vec<Vec<u8>> = elems
        .iter()
        .flat_map(|(s, e, _)| probes(&[2, 4], s, e))
        .collect();
    for now in [0, 9, 10, 19, 20, 1000] {
        index_agrees(&p, &keys, now);
    }
}

/// A 32 x 32 cross product of ranges: every interval of either field is covered by 32
/// elements, more than `MAX_CANDIDATES`, so the index cuts each of them with a node on the
/// other field and answers every key itself (no fallback); answers as pipapo's, single and
/// batched. Then a set mixing selective and crowded intervals.
#[test]
fn index_tree_on_cross_product() {
    let mut elems = Vec::new();
    for a in 0..32u128 {
        for b in 0..32u128 {
            elems.push((
                [be(a * 100, 4), be(b * 50, 2)].concat(),
                [be(a * 100 + 60, 4), be(b * 50 + 30, 2)].concat(),
                None,
            ));
        }
    }
    let (mut p, _) = set_of(&[4, 2], &elems);
    p.build_index();
    let keys: Vec<Vec<u8>> = elems
        .iter()
        .step_by(7)
        .flat_map(|(s, e, _)| probes(&[4, 2], s, e))
        .collect();
    let got = index_agrees(&p, &keys, 0);
    assert!(got.iter().filter(|x| x.is_some()).count() > 400);
    let ix = p.index().unwrap();
    // The port field (narrower) is primary: one node per port range, cutting the addresses.
    assert_eq!(ix.primary(), (4, 2));
    assert_eq!(ix.nodes(), 32);
    for (k, g) in keys.iter().zip(&got) {
        assert_eq!(ix.probe(k, 0, &[]), super::index::Probe::Found(*g), "{k:?}");
    }
    // Wide ranges in both fields over some selective elements: lists of 1..=9 candidates.
    let mut elems = Vec::new();
    for i in 0..12u128 {
        elems.push((
            [be(0, 2), be(i * 4, 1)].concat(),
            [be(60000, 2), be(i * 4 + 1, 1)].concat(),
            None,
        ));
    }
    for i in 0..12u128 {
        elems.push((
            [be(i * 5000, 2), be(100, 1)].concat(),
            [be(i * 5000 + 2 + i, 2), be(255, 1)].concat(),
            None,
        ));
    }
    let (mut p, _) = set_of(&[2, 1], &elems);
    p.build_index();
    let keys: Vec<Vec<u8>> = elems
        .iter()
        .flat_map(|(s, e, _)| probes(&[2, 1], s, e))
        .collect();
    let got = index_agrees(&p, &keys, 0);
    assert!(got.iter().filter(|x| x.is_some()).count() > 40);
}

/// Inserts, deletes and gc keep the index with an overlay (lookups right before and after a
/// refresh, also when a removed element's slot is reused); a flush drops it.
#[test]
fn index_kept_through_changes_and_dropped_by_a_flush() {
    let elems: Vec<_> = (0..20u128)
        .map(|i| {
            (
                [be(i * 10, 2), be(i, 4)].concat(),
                [be(i * 10 + 3, 2), be(i + 100, 4)].concat(),
                (i % 3 == 0).then_some(50),
            )
        })
        .collect();
    let (mut p, hs) = set_of(&[2, 4], &elems);
    p.set_overlay_min(0);
    let keys: Vec<Vec<u8>> = elems
        .iter()
        .flat_map(|(s, e, _)| probes(&[2, 4], s, e))
        .collect();
    let key = [be(201, 2), be(50, 4)].concat();
    p.build_index();
    assert_eq!(p.lookup_index(&key, 0), None);
    let elem = NewElem {
        start: &key,
        end: None,
        data: 0,
        expires: None,
        ext: (),
    };
    let h = p.insert(elem, InsertMode::Create, 0).unwrap();
    assert!(p.has_index(), "insert");
    assert_eq!(p.index_lag(), 1);
    // Not refreshed: the added element is found through pipapo.
    assert_eq!(p.lookup_index(&key, 0), Some(h));
    p.refresh_index();
    assert_eq!(p.lookup_index(&key, 0), Some(h));
    index_agrees(&p, &keys, 0);
    p.delete(&elems[4].0, 0).unwrap();
    assert!(p.has_index(), "delete");
    assert_eq!(p.index_lag(), 2);
    assert_eq!(p.lookup_index(&elems[4].0, 0), None);
    assert_eq!(p.lookup_index(&elems[5].0, 0), Some(hs[5]));
    // A new element in the removed one's slot: the index's record of the slot is not used.
    let again = NewElem {
        start: &elems[4].0,
        end: Some(&elems[4].1[..]),
        data: 7,
        expires: None,
        ext: (),
    };
    let h4 = p.insert(again, InsertMode::Create, 0).unwrap();
    p.refresh_index();
    assert_eq!(p.lookup_index(&elems[4].0, 0), Some(h4));
    index_agrees(&p, &keys, 0);
    assert_eq!(p.gc(60), 7);
    assert!(p.has_index(), "gc");
    index_agrees(&p, &keys, 0);
    assert_eq!(p.lookup_index(&elems[3].0, 0), None);
    p.build_index();
    assert_eq!(p.index_lag(), 0);
    p.flush();
    assert!(!p.has_index(), "flush");
    p.build_index();
    assert_eq!(p.lookup_index(&elems[5].0, 0), None);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The field index kept through changes: after each insertion or deletion of a random
    /// sequence, the index with its overlay (stale, then refreshed) answers every probe as the
    /// linear-scan oracle, and once the overlay passes its size the refresh builds it anew.
    #[test]
    fn index_kept_through_changes_matches_oracle(
        (lens, elems, _policy, _deletes) in set_strategy(),
        ops in prop::collection::vec((any::<bool>(), any::<usize>()), 1..40),
    ) {
        let mut p: Pipapo = Pipapo::new(&lens).unwrap();
        p.set_overlay_min(0);
        // Half the cases index with lists of one candidate: trees of nodes, kept through
        // changes by the same overlay.
        super::index::LIST_CAP.set([MAX_CANDIDATES, 1][ops.len() % 2]);
        let mut o = Oracle { lens: lens.clone(), ..Oracle::default() };
        let mut all_probes = Vec::new();
        let mut pool = Vec::new();
        for (i, (fields, expires)) in elems.iter().enumerate() {
            let s: Vec<u8> = fields.iter().flat_map(|f| f.start.clone()).collect();
            let e: Vec<u8> = fields.iter().flat_map(|f| f.end.clone()).collect();
            all_probes.extend(probes(&lens, &s, &e));
            // Half go in before the index is built, the rest are added through changes.
            if i % 2 == 0 {
                if let Ok(h) = p.insert(NewElem { start: &s, end: Some(&e), data: 0, expires: *expires, ext: () }, InsertMode::Create, 0) {
                    o.elems.push((s, e, *expires, h));
                }
            } else {
                pool.push((s, e, *expires));
            }
        }
        p.build_index();
        for (insert, pick) in ops {
            if insert && !pool.is_empty() {
                let (s, e, x) = pool.swap_remove(pick % pool.len());
                if let Ok(h) = p.insert(NewElem { start: &s, end: Some(&e), data: 0, expires: x, ext: () }, InsertMode::Create, 0) {
                    o.elems.push((s, e, x, h));
                }
            } else if !o.elems.is_empty() {
                let i = pick % o.elems.len();
                let (s, e, x, h) = o.elems[i].clone();
                if p.remove(h).is_some() {
                    o.elems.remove(i);
                    pool.push((s, e, x));
                }
            }
            for k in &all_probes {
                prop_assert_eq!(p.lookup_index(k, 5), o.lookup(k, 5), "stale overlay {:?}", k);
            }
            p.refresh_index();
            prop_assert!(p.has_index());
            for k in &all_probes {
                prop_assert_eq!(p.lookup_index(k, 5), o.lookup(k, 5), "refreshed {:?}", k);
            }
            check_batch(&p, &o, &all_probes, 5)?;
        }
        super::index::LIST_CAP.set(MAX_CANDIDATES);
    }
}
