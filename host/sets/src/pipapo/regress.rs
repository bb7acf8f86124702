//! Regression tests: the kernel's observed overlap table (research note §1.8), nftables'
//! `0044interval_overlap_0` vectors, the pipapo bug history (§5) and cases/sets.md (C01..).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::*;
use crate::txn::Shared;

fn v4(a: [u8; 4]) -> Vec<u8> {
    a.to_vec()
}

/// Concatenate field values into a key.
fn key(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn p16(v: u16) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

fn ins(
    p: &mut Pipapo,
    s: &[u8],
    e: &[u8],
    mode: InsertMode,
    exp: Option<u64>,
    now: u64,
) -> Result<ElemHandle, SetError> {
    p.insert(
        NewElem {
            start: s,
            end: Some(e),
            data: 0,
            expires: exp,
            ext: (),
        },
        mode,
        now,
    )
}

fn add(p: &mut Pipapo, s: &[u8], e: &[u8]) -> Result<ElemHandle, SetError> {
    ins(p, s, e, InsertMode::Add, None, 0)
}

/// Every variant must agree on `k`; returns the answer.
fn look(p: &Pipapo, k: &[u8], now: u64) -> Option<ElemHandle> {
    let r = p.lookup_scalar(k, now);
    assert_eq!(p.lookup_avx2(k, now), r, "avx2 {k:?}");
    assert_eq!(p.lookup_avx512(k, now), r, "avx512 {k:?}");
    let mut out = [None];
    p.lookup_batch(k, now, &mut out);
    assert_eq!(out[0], r, "batch {k:?}");
    r
}

/// §1.8 [observed] on 6.18.44: narrow inside broad rejected; broad after narrow accepted and
/// shadowed; identical add/create; partial overlaps; adjacency; containing with free corners.
#[test]
fn observed_overlap_table() {
    let mut p: Pipapo = Pipapo::new(&[4, 4]).unwrap();
    let one = v4([1, 1, 1, 1]);
    let broad = add(
        &mut p,
        &key(&[&[10, 0, 0, 0], &one]),
        &key(&[&[10, 255, 255, 255], &one]),
    )
    .unwrap();
    assert!(
        matches!(add(&mut p, &key(&[&[10, 1, 2, 3], &one]), &key(&[&[10, 1, 2, 3], &one])), Err(SetError::Overlap(h)) if h == broad)
    );
    assert!(
        add(
            &mut p,
            &key(&[&[10, 0, 0, 0], &one]),
            &key(&[&[10, 255, 255, 255], &one])
        )
        .is_ok(),
        "identical add"
    );
    assert!(matches!(
        ins(
            &mut p,
            &key(&[&[10, 0, 0, 0], &one]),
            &key(&[&[10, 255, 255, 255], &one]),
            InsertMode::Create,
            None,
            0
        ),
        Err(SetError::Exists(_))
    ));
    assert!(matches!(
        add(
            &mut p,
            &key(&[&[10, 255, 0, 0], &one]),
            &key(&[&[11, 0, 0, 5], &one])
        ),
        Err(SetError::Overlap(_))
    ));

    let mut q: Pipapo = Pipapo::new(&[4, 4]).unwrap();
    let narrow = add(
        &mut q,
        &key(&[&[10, 1, 2, 3], &one]),
        &key(&[&[10, 1, 2, 3], &one]),
    )
    .unwrap();
    let broad = add(
        &mut q,
        &key(&[&[10, 0, 0, 0], &one]),
        &key(&[&[10, 255, 255, 255], &one]),
    )
    .unwrap();
    assert_eq!(look(&q, &key(&[&[10, 1, 2, 3], &one]), 0), Some(narrow));
    assert_eq!(look(&q, &key(&[&[10, 1, 2, 4], &one]), 0), Some(broad));
    assert_eq!(q.get(&key(&[&[10, 1, 2, 3], &one]), 0), Ok(narrow));

    let a = v4([20, 0, 0, 1]);
    let r = |lo: u8, hi: u8| (key(&[&a, &[1, 1, 1, lo]]), key(&[&a, &[1, 1, 1, hi]]));
    let (s, e) = r(0, 10);
    add(&mut q, &s, &e).unwrap();
    let (s, e) = r(5, 20);
    assert!(matches!(add(&mut q, &s, &e), Err(SetError::Overlap(_))));
    let (s, e) = r(11, 20);
    add(&mut q, &s, &e).expect("adjacent");
    add(
        &mut q,
        &key(&[&[20, 0, 0, 0], &[1, 1, 1, 0]]),
        &key(&[&[20, 0, 0, 1], &[1, 1, 1, 30]]),
    )
    .expect("contains, corners free");

    // Crossing elements A and B: both accepted; A wins where both match; A re-added after its
    // deletion is refused (its end corner lies in B).
    let mut c: Pipapo = Pipapo::new(&[4, 2]).unwrap();
    let (a_s, a_e) = (
        key(&[&[127, 0, 0, 0], &p16(50)]),
        key(&[&[127, 0, 0, 10], &p16(60)]),
    );
    let a = add(&mut c, &a_s, &a_e).unwrap();
    add(
        &mut c,
        &key(&[&[127, 0, 0, 5], &p16(40)]),
        &key(&[&[127, 0, 0, 20], &p16(70)]),
    )
    .unwrap();
    assert_eq!(look(&c, &key(&[&[127, 0, 0, 7], &p16(55)]), 0), Some(a));
    c.delete(&a_s, 0).unwrap();
    assert!(matches!(add(&mut c, &a_s, &a_e), Err(SetError::Overlap(_))));

    // Datapath: 127.0.0.5 . 1000 then 127.0.0.0/24 . 900-1100: .5 hits the first, .6 the second.
    let mut d: Pipapo = Pipapo::new(&[4, 2]).unwrap();
    let first = add(
        &mut d,
        &key(&[&[127, 0, 0, 5], &p16(1000)]),
        &key(&[&[127, 0, 0, 5], &p16(1000)]),
    )
    .unwrap();
    let second = add(
        &mut d,
        &key(&[&[127, 0, 0, 0], &p16(900)]),
        &key(&[&[127, 0, 0, 255], &p16(1100)]),
    )
    .unwrap();
    assert_eq!(
        look(&d, &key(&[&[127, 0, 0, 5], &p16(1000)]), 0),
        Some(first)
    );
    assert_eq!(
        look(&d, &key(&[&[127, 0, 0, 6], &p16(1000)]), 0),
        Some(second)
    );
}

/// An inclusive port range.
type R16 = (u16, u16);

const C09_CONCAT: [(R16, R16, bool); 9] = [
    ((0, 2), (0, 3), true),
    ((0, 2), (0, 3), true),
    ((0, 1), (0, 2), false),
    ((10, 20), (30, 40), true),
    ((15, 20), (50, 60), true),
    ((3, 9), (4, 29), true),
    ((3, 9), (4, 29), true),
    ((11, 19), (30, 40), false),
    ((15, 20), (49, 61), true),
];

/// C09 / §4.9: `inet_service . inet_service` vectors of 0044interval_overlap_0 (all nine
/// reproduce on the kernel); then with a timeout: after expiry everything inserts again.
#[test]
fn c09_concat_vectors_and_after_expiry() {
    for (exp, now2) in [(None, None), (Some(10u64), Some(10u64))] {
        let mut p: Pipapo = Pipapo::new(&[2, 2]).unwrap();
        for ((a, b), (c, d), ok) in C09_CONCAT {
            let r = ins(
                &mut p,
                &key(&[&p16(a), &p16(c)]),
                &key(&[&p16(b), &p16(d)]),
                InsertMode::Add,
                exp,
                0,
            );
            assert_eq!(r.is_ok(), ok, "{a}-{b} . {c}-{d}");
        }
        if let Some(now) = now2 {
            for ((a, b), (c, d), ok) in C09_CONCAT {
                let r = ins(
                    &mut p,
                    &key(&[&p16(a), &p16(c)]),
                    &key(&[&p16(b), &p16(d)]),
                    InsertMode::Add,
                    None,
                    now,
                );
                assert_eq!(r.is_ok(), ok, "again {a}-{b} . {c}-{d}");
            }
        }
    }
}

/// C01 / bug 9: start > end in a later field is EINVAL, for 2, 3 and 4 fields.
#[test]
fn c01_inverted_range_in_later_field() {
    let mut p: Pipapo = Pipapo::new(&[4, 2]).unwrap();
    let r = add(
        &mut p,
        &key(&[&[10, 0, 0, 1], &p16(100)]),
        &key(&[&[10, 0, 0, 1], &p16(50)]),
    );
    assert_eq!(r, Err(SetError::InvalidRange { field: 1 }));
    let mut p3: Pipapo = Pipapo::new(&[4, 2, 1]).unwrap();
    let r = add(
        &mut p3,
        &key(&[&[10, 0, 0, 1], &p16(1), &[17]]),
        &key(&[&[10, 0, 0, 1], &p16(2), &[6]]),
    );
    assert_eq!(r, Err(SetError::InvalidRange { field: 2 }));
    let mut p4: Pipapo = Pipapo::new(&[4, 2, 1, 4]).unwrap();
    let r = add(
        &mut p4,
        &key(&[&[1, 0, 0, 0], &p16(1), &[6], &[9, 9, 9, 9]]),
        &key(&[&[1, 0, 0, 0], &p16(1), &[6], &[9, 9, 9, 8]]),
    );
    assert_eq!(r, Err(SetError::InvalidRange { field: 3 }));
    assert!(p.is_empty() && p3.is_empty() && p4.is_empty());
}

/// C02 / bug 12: an element without an end key, deleted and re-added.
#[test]
fn c02_single_value_remove_and_readd() {
    let mut p: Pipapo = Pipapo::new(&[4, 4]).unwrap();
    let k = key(&[&[1, 0, 0, 0], &[2, 0, 0, 0]]);
    p.insert(
        NewElem {
            start: &k,
            end: None,
            data: 0,
            expires: None,
            ext: (),
        },
        InsertMode::Create,
        0,
    )
    .unwrap();
    assert!(look(&p, &k, 0).is_some());
    p.delete(&k, 0).unwrap();
    assert_eq!(look(&p, &k, 0), None);
    assert_eq!(p.rule_counts(), vec![0, 0], "no rule left behind");
    p.insert(
        NewElem {
            start: &k,
            end: None,
            data: 0,
            expires: None,
            ext: (),
        },
        InsertMode::Create,
        0,
    )
    .unwrap();
    assert!(look(&p, &k, 0).is_some());
}

/// C04 / bug 1: add two elements, flush, re-add reversed, 100 rounds, each in a transaction.
#[test]
fn c04_flush_remove_add() {
    let sh = Shared::new(Pipapo::<()>::new(&[4, 2]).unwrap());
    let ip = [10, 0, 0, 1];
    let e1 = (key(&[&ip, &p16(22)]), key(&[&ip, &p16(25)]));
    let e2 = (key(&[&ip, &p16(10)]), key(&[&ip, &p16(20)]));
    for _ in 0..100 {
        let mut t = sh.begin();
        add(t.get_mut(), &e1.0, &e1.1).unwrap();
        add(t.get_mut(), &e2.0, &e2.1).unwrap();
        t.commit();
        let mut t = sh.begin();
        t.get_mut().flush();
        t.commit();
        let mut t = sh.begin();
        add(t.get_mut(), &e2.0, &e2.1).unwrap();
        add(t.get_mut(), &e1.0, &e1.1).unwrap();
        t.commit();
    }
    let s = sh.snapshot();
    assert_eq!(s.len(), 2);
    assert!(look(&s, &key(&[&ip, &p16(23)]), 0).is_some());
    assert!(look(&s, &key(&[&ip, &p16(15)]), 0).is_some());
    assert_eq!(look(&s, &key(&[&ip, &p16(21)]), 0), None);
}

/// C05 / selftest doublecreate (bug 28): add twice ok; create of an existing element fails;
/// flush + create twice in one transaction fails; flush + create once succeeds.
#[test]
fn c05_doublecreate() {
    let sh = Shared::new(Pipapo::<()>::new(&[4, 4]).unwrap());
    let e = [
        key(&[&[1, 2, 3, 4], &[1, 2, 4, 1]]),
        key(&[&[1, 2, 4, 1], &[1, 2, 3, 4]]),
    ];
    for _ in 0..2 {
        let mut t = sh.begin();
        for k in &e {
            ins(t.get_mut(), k, k, InsertMode::Add, None, 0).unwrap();
        }
        t.commit();
    }
    let mut t = sh.begin();
    assert!(matches!(
        ins(t.get_mut(), &e[0], &e[0], InsertMode::Create, None, 0),
        Err(SetError::Exists(_))
    ));
    t.abort();
    let mut t = sh.begin();
    t.get_mut().flush();
    ins(t.get_mut(), &e[0], &e[0], InsertMode::Create, None, 0).unwrap();
    assert!(ins(t.get_mut(), &e[0], &e[0], InsertMode::Create, None, 0).is_err());
    drop(t); // the failed batch is aborted: the live set is unchanged
    assert_eq!(sh.load().len(), 2);
    let mut t = sh.begin();
    t.get_mut().flush();
    ins(t.get_mut(), &e[0], &e[0], InsertMode::Create, None, 0).unwrap();
    t.commit();
    assert_eq!(sh.load().len(), 1);
    // Bug 28: an expired candidate in the last field is skipped, the next one is found, and a
    // create of an element whose expired twin is still stored succeeds.
    let mut p: Pipapo = Pipapo::new(&[4, 4]).unwrap();
    ins(&mut p, &e[0], &e[0], InsertMode::Create, Some(5), 0).unwrap();
    let live = ins(&mut p, &e[0], &e[0], InsertMode::Create, None, 5).unwrap();
    assert_eq!(look(&p, &e[0], 6), Some(live));
    assert!(
        matches!(ins(&mut p, &e[0], &e[0], InsertMode::Create, None, 6), Err(SetError::Exists(h)) if h == live)
    );
}

/// C06 / selftest net_port_proto_match: 10.i.j.0/24 . j-(j+1)0 . 6-17.
#[test]
fn c06_net_port_proto_match() {
    let mut p: Pipapo = Pipapo::new(&[4, 2, 1]).unwrap();
    let mut hs = Vec::new();
    for i in 1..10u8 {
        for j in 1..20u8 {
            let hi = (j as u16 + 1) * 10;
            let nomatch = key(&[&[10, i, j, 1], &p16(hi + 1), &[17]]);
            assert_eq!(look(&p, &nomatch, 0), None);
            let h = add(
                &mut p,
                &key(&[&[10, i, j, 0], &p16(j as u16), &[6]]),
                &key(&[&[10, i, j, 255], &p16(hi), &[17]]),
            )
            .unwrap();
            assert_eq!(
                look(&p, &key(&[&[10, i, j, 1], &p16(j as u16), &[17]]), 0),
                Some(h)
            );
            assert_eq!(look(&p, &nomatch, 0), None);
            hs.push((i, j, h));
        }
    }
    // get prints back exactly the element; delete one, it stops matching, others unaffected.
    let (i, j, h) = hs[77];
    let g = p
        .get(&key(&[&[10, i, j, 0], &p16(j as u16), &[6]]), 0)
        .unwrap();
    assert_eq!(g, h);
    let el = p.elem(g).unwrap();
    assert_eq!(el.start, &key(&[&[10, i, j, 0], &p16(j as u16), &[6]])[..]);
    assert_eq!(
        el.end,
        &key(&[&[10, i, j, 255], &p16((j as u16 + 1) * 10), &[17]])[..]
    );
    let start = el.start.to_vec();
    p.delete(&start, 0).unwrap();
    assert_eq!(
        p.get(&key(&[&[10, i, j, 0], &p16(j as u16), &[6]]), 0),
        Err(SetError::NotFound)
    );
    assert_eq!(
        look(&p, &key(&[&[10, i, j, 1], &p16(j as u16), &[17]]), 0),
        None
    );
    for &(i2, j2, _) in &hs {
        if (i2, j2) != (i, j) {
            let k = key(&[&[10, i2, j2, 1], &p16(j2 as u16), &[17]]);
            assert_eq!(
                p.elem(look(&p, &k, 0).unwrap()).unwrap().start[..3],
                [10, i2, j2]
            );
        }
    }
}

/// §1.9 [observed]: delete and get are keyed by the start point only.
#[test]
fn delete_and_get_by_start_point() {
    let mut p: Pipapo = Pipapo::new(&[4, 1]).unwrap();
    let h = add(
        &mut p,
        &key(&[&[10, 0, 0, 0], &[1]]),
        &key(&[&[10, 0, 0, 10], &[5]]),
    )
    .unwrap();
    assert_eq!(p.get(&key(&[&[10, 0, 0, 3], &[2]]), 0), Ok(h));
    assert_eq!(
        p.delete(&key(&[&[10, 0, 0, 11], &[2]]), 0).err(),
        Some(SetError::NotFound)
    );
    p.delete(&key(&[&[10, 0, 0, 3], &[2]]), 0).unwrap();
    assert!(p.is_empty());
}

/// Bug 13 / 20: an expired duplicate neither blocks insertion nor can be deleted; delete
/// removes the live twin, never the expired one; gc drops the expired one.
#[test]
fn expired_twins() {
    let mut p: Pipapo = Pipapo::new(&[4, 2]).unwrap();
    let k = key(&[&[192, 0, 2, 1], &p16(80)]);
    let old = ins(&mut p, &k, &k, InsertMode::Create, Some(10), 0).unwrap();
    assert_eq!(look(&p, &k, 9), Some(old));
    assert_eq!(look(&p, &k, 10), None, "expired at now >= expires");
    assert_eq!(p.delete(&k, 10).err(), Some(SetError::NotFound));
    let new = ins(&mut p, &k, &k, InsertMode::Create, None, 10).unwrap();
    assert_eq!(look(&p, &k, 11), Some(new));
    let gone = p.delete(&k, 11).unwrap();
    assert_eq!(gone.expires, None, "the live element was deleted");
    assert!(p.elem(old).is_some());
    assert_eq!(p.gc(11), 1);
    assert!(p.is_empty());
}

/// Bug 26: lookups in a set that never had an element, or is empty after deletes.
#[test]
fn empty_set_lookups() {
    let mut p: Pipapo = Pipapo::new(&[16, 2, 6]).unwrap();
    let k = vec![0u8; 24];
    assert_eq!(look(&p, &k, 0), None);
    add(&mut p, &k, &k).unwrap();
    p.delete(&k, 0).unwrap();
    assert_eq!(look(&p, &k, 0), None);
    assert_eq!(p.lookup(&k[..5], 0), None, "wrong key length");
}

/// Bug 23: bad descriptions are refused.
#[test]
fn bad_descriptions() {
    assert!(Pipapo::<()>::new(&[]).is_err());
    assert!(Pipapo::<()>::new(&[17]).is_err());
    assert!(Pipapo::<()>::new(&[0, 4]).is_err());
    assert!(Pipapo::<()>::new(&[1; 17]).is_err());
    let mut p: Pipapo = Pipapo::new(&[4, 2]).unwrap();
    assert_eq!(
        add(&mut p, &[1, 2, 3], &[1, 2, 3]),
        Err(SetError::KeyLength { got: 3, want: 6 })
    );
}

/// Bug 18: two sets of different sizes looked up alternately on one thread, all variants.
#[test]
fn two_sets_alternately() {
    let mut big: Pipapo = Pipapo::new(&[2, 1]).unwrap();
    for i in 0..1000u16 {
        add(
            &mut big,
            &key(&[&p16(i * 3), &[6]]),
            &key(&[&p16(i * 3 + 1), &[17]]),
        )
        .unwrap();
    }
    let mut small: Pipapo = Pipapo::new(&[2, 1]).unwrap();
    let s = add(&mut small, &key(&[&p16(2), &[6]]), &key(&[&p16(2), &[6]])).unwrap();
    for i in 0..1000u16 {
        let hit = look(&big, &key(&[&p16(i * 3 + 1), &[10]]), 0);
        assert!(hit.is_some());
        assert_eq!(look(&small, &key(&[&p16(2), &[6]]), 0), Some(s));
        assert_eq!(look(&big, &key(&[&p16(i * 3 + 2), &[10]]), 0), None);
    }
}

/// §2: a field crosses the 2 MiB threshold to 4-bit groups and comes back after deletions;
/// lookups agree before and after, in every variant (the selftest's correctness_large idea).
#[test]
fn switch_8_to_4_and_back() {
    let mut p: Pipapo = Pipapo::new(&[4, 2]).unwrap();
    let k = |i: u32| key(&[&(0xac10_0000 + i).to_be_bytes(), &p16(80)]);
    for i in 0..16_384u32 {
        add(&mut p, &k(i), &k(i)).unwrap();
    }
    assert_eq!(p.group_bits(), vec![8, 8], "16384 IPv4 rules fit 8-bit");
    add(&mut p, &k(16_384), &k(16_384)).unwrap();
    assert_eq!(
        p.group_bits(),
        vec![4, 8],
        "16385 rules: IPv4 field goes 4-bit"
    );
    for i in (0..16_385u32).step_by(97) {
        assert_eq!(
            p.elem(look(&p, &k(i), 0).unwrap()).unwrap().start[..],
            k(i)[..]
        );
    }
    assert_eq!(
        look(
            &p,
            &key(&[&(0xac10_0000u32 + 20_000).to_be_bytes(), &p16(80)]),
            0
        ),
        None
    );
    // Delete 512 elements: bucket size drops by two blocks and the 8-bit table fits again.
    for i in 0..512u32 {
        p.delete(&k(i), 0).unwrap();
    }
    assert_eq!(p.group_bits(), vec![8, 8]);
    assert_eq!(look(&p, &k(3), 0), None);
    assert!(look(&p, &k(600), 0).is_some());
}

/// Bug 27 / concurrency: readers look up continuously while a writer commits flush + re-add
/// of the same ranges (`0.0.0.0-192.168.2.19, 192.168.2.21-255.255.255.255`) in one
/// transaction; no lookup may miss or return a wrong element.
#[test]
fn concurrent_flush_readd_never_misses() {
    let ranges = [
        ([0, 0, 0, 0], [192, 168, 2, 19]),
        ([192, 168, 2, 21], [255, 255, 255, 255]),
    ];
    let fill = |p: &mut Pipapo| {
        for (s, e) in ranges {
            ins(
                p,
                &key(&[&s, &p16(0)]),
                &key(&[&e, &p16(65535)]),
                InsertMode::Create,
                None,
                0,
            )
            .unwrap();
        }
    };
    let mut p = Pipapo::new(&[4, 2]).unwrap();
    fill(&mut p);
    let sh = Arc::new(Shared::new(p));
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (sh, stop, done) = (sh.clone(), stop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut x: u32 = 0x1234_5678 ^ t;
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    let ip = x.to_be_bytes();
                    let k = key(&[&ip, &p16(x as u16)]);
                    let s = sh.load();
                    let got = s.lookup(&k, 0);
                    if ip == [192, 168, 2, 20] {
                        assert_eq!(got, None);
                        continue;
                    }
                    let e = s.elem(got.expect("no lookup may miss")).unwrap();
                    assert!(
                        e.start[..4] <= ip[..] && ip[..] <= e.end[..4],
                        "wrong element"
                    );
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // At least 300 transactions, and on until the readers have checked some lookups (a loaded
    // machine may not schedule them at first), for at most 30 s.
    let t0 = std::time::Instant::now();
    let mut commits = 0;
    while commits < 300 || (done.load(Ordering::Relaxed) < 1000 && t0.elapsed().as_secs() < 30) {
        let mut t = sh.begin();
        t.get_mut().flush();
        fill(t.get_mut());
        t.commit();
        commits += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert!(done.load(Ordering::Relaxed) > 0);
}

/// Section 5 #30 and issue point 5: expired elements are collected at commit with the
/// transaction's one timestamp; the transaction's own checks use that timestamp (an expired
/// duplicate does not block a re-insert, #13); a reader holding the previous snapshot keeps
/// it whole until it drops it.
#[test]
fn commit_collects_expired_elements_with_the_transaction_timestamp() {
    let (a_s, a_e) = (
        key(&[&v4([10, 0, 0, 0]), &p16(1)]),
        key(&[&v4([10, 0, 0, 9]), &p16(9)]),
    );
    let (b_s, b_e) = (
        key(&[&v4([10, 0, 1, 0]), &p16(1)]),
        key(&[&v4([10, 0, 1, 9]), &p16(9)]),
    );
    let (c_s, c_e) = (
        key(&[&v4([10, 0, 2, 0]), &p16(1)]),
        key(&[&v4([10, 0, 2, 9]), &p16(9)]),
    );
    let mut p: Pipapo = Pipapo::new(&[4, 2]).unwrap();
    ins(&mut p, &a_s, &a_e, InsertMode::Create, Some(10), 0).unwrap();
    ins(&mut p, &b_s, &b_e, InsertMode::Create, Some(20), 0).unwrap();
    ins(&mut p, &c_s, &c_e, InsertMode::Create, None, 0).unwrap();
    let sh = Shared::new(p);
    let before = sh.snapshot();

    let mut t = sh.begin_at(15);
    assert_eq!(t.now(), 15);
    let now = t.now();
    // `create` of a's range succeeds: the old a expired at 10.
    ins(t.get_mut(), &a_s, &a_e, InsertMode::Create, None, now).unwrap();
    assert_eq!(t.get().len(), 4, "old a is still stored until the commit");
    assert_eq!(t.commit(), 1, "the commit collects the old a only");
    let live = sh.snapshot();
    assert_eq!(live.len(), 3);
    let new_a = live.lookup(&a_s, 100).expect("the new a never expires");
    assert_eq!(live.elem(new_a).unwrap().expires, None);
    assert!(live.lookup(&b_s, 15).is_some(), "b expires at 20");

    // The previous snapshot is untouched: three elements, the old a still found before 10.
    assert_eq!(before.len(), 3);
    let old_a = before.lookup(&a_s, 5).unwrap();
    assert_eq!(before.elem(old_a).unwrap().expires, Some(10));

    // A transaction that changes nothing still collects: b at 25.
    assert_eq!(sh.begin_at(25).commit(), 1);
    let live = sh.snapshot();
    assert_eq!(live.len(), 2);
    assert!(
        live.lookup(&b_s, 0).is_none(),
        "b's rules are gone, not just expired"
    );
    assert!(live.lookup(&c_s, u64::MAX - 1).is_some());
}
