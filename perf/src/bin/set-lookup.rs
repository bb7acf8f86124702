//! Prints a table of set lookup cost (ns per lookup and million lookups per second, one core)
//! on the kernel selftest's performance cases, with the kernel commit message's columns: hash
//! on the same keys without ranges (`ExactSet`), interval on the first field only
//! (`IntervalSet`), pipapo 4-bit only, pipapo with the 8/4 switch (both scalar), AVX2,
//! AVX-512 and batched (best variant, 64 keys per call), and the field index
//! (`Pipapo::build_index`: `lookup_index` one key per call, `lookup_batch_index` 64 keys per
//! call), also on a 32 x 32 cross product of ranges (every key falls back from the index to
//! pipapo); then memory per element
//! (`table_bytes() / elements`) and the time to insert `ip saddr . tcp dport` range elements
//! in one transaction (the kernel needs about 42 s for 800 000).
//!
//! A second table compares the field index of each set built at once with the same set
//! reached through `--updates` single-element changes (each removes an element and adds it
//! back, then refreshes the index as the daemon does after every transaction:
//! `Pipapo::refresh_index`), and prints the overlay left and the ratio; then the same set once
//! its index is built anew, as the daemon's indexer does when the changes pause.
//!
//! Times are this thread's CPU time (the machine is shared).
//!
//! `cargo build --release -p wasp-perf --bin set-lookup && set-lookup [MS [ROUNDS [N [UPDATES]]]]`:
//! MS = CPU milliseconds per measurement (default 100), ROUNDS = interleaved rounds whose median is
//! printed (default 5), N = elements for the insertion timing (default 800000, 0 to skip),
//! UPDATES = single-element changes for the second table (default 10000).

use std::hint::black_box;
use std::time::{Duration, Instant};

use wasp_perf::acl::{cross_product, nested_prefixes, pipapo_of, proto_port_net, spread_probes};
use wasp_sets::perfcases::CASES;
use wasp_sets::pipapo::{GroupPolicy, Variant};
use wasp_sets::{ExactSet, InsertMode, IntervalSet, NewElem, Pipapo, Shared};

const KEYS: usize = 4096;
const COLS: [&str; 9] = [
    "hash",
    "interval",
    "pipapo-4bit",
    "pipapo-8/4",
    "avx2",
    "avx512",
    "batched",
    "index",
    "index-b64",
];

/// This thread's CPU time in nanoseconds (the machine is shared: wall time would count the
/// time this thread waits for a core).
fn cpu_ns() -> u64 {
    cpu_time::ThreadTime::try_now().map_or(0, |t| t.as_duration().as_nanos() as u64)
}

/// Thread-CPU nanoseconds per lookup of `f` over `n` keys per call, for about `budget` of
/// CPU time.
fn measure(n: usize, budget: Duration, mut f: impl FnMut() -> usize) -> f64 {
    black_box(f());
    let start = cpu_ns();
    let budget = budget.as_nanos() as u64;
    let mut calls = 0u64;
    while cpu_ns() - start < budget {
        for _ in 0..8 {
            black_box(f());
        }
        calls += 8;
    }
    (cpu_ns() - start) as f64 / (calls as f64 * n as f64)
}

fn single(set: &Pipapo, v: Variant, keys: &[u8]) -> usize {
    keys.chunks_exact(set.key_len())
        .filter(|k| set.lookup_variant(v, black_box(k), 0).is_some())
        .count()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn elem<'a>(start: &'a [u8], end: &'a [u8]) -> NewElem<'a, ()> {
    NewElem {
        start,
        end: Some(end),
        data: 0,
        expires: None,
        ext: (),
    }
}

/// Wall and thread-CPU seconds to insert `n` elements `10.a.b.c+1 - 10.a.b.c+4 . port` (4 addresses, 3 prefixes,
/// as the kernel commit's `10.1.1.1 - 10.1.1.4 . 3996`) into an `ipv4_addr . inet_service`
/// pipapo set in one transaction, committed.
fn insert_time(n: usize) -> (f64, f64, usize) {
    let shared = Shared::new(Pipapo::<()>::new(&[4, 2]).expect("valid"));
    let t = Instant::now();
    let c = cpu_ns();
    let mut txn = shared.begin();
    let set = txn.get_mut();
    for i in 0..n as u32 {
        let a = 0x0a00_0000u32 + 1 + i * 4;
        let port = ((i % 60000) + 1000) as u16;
        let mut s = a.to_be_bytes().to_vec();
        s.extend_from_slice(&port.to_be_bytes());
        let mut e = (a + 3).to_be_bytes().to_vec();
        e.extend_from_slice(&port.to_be_bytes());
        set.insert(elem(&s, &e), InsertMode::Create, 0)
            .expect("disjoint elements");
    }
    txn.commit();
    let cpu = (cpu_ns() - c) as f64 / 1e9;
    (t.elapsed().as_secs_f64(), cpu, shared.load().len())
}

/// Elements as (start key, end key).
type Elements = Vec<(Vec<u8>, Vec<u8>)>;

/// The selftest's cases (entries as the selftest counts them), then three shapes where many
/// elements share every field value (the field index answers them through its tree).
fn cases() -> Vec<(String, u64, Vec<usize>, Elements)> {
    let mut sets: Vec<(String, u64, Vec<usize>, Elements)> = CASES
        .iter()
        .map(|c| (c.name.to_string(), c.entries, c.field_lens(), c.elements()))
        .collect();
    sets.push(("cross 32x32".into(), 1024, vec![4, 2], cross_product(32)));
    sets.push((
        "proto,port,net 4x16x16".into(),
        1024,
        vec![1, 2, 4],
        proto_port_net(4, 16),
    ));
    let nested = nested_prefixes(8, 8, 8);
    sets.push((
        "nested net,port".into(),
        nested.len() as u64,
        vec![4, 2],
        nested,
    ));
    sets
}

fn main() {
    let arg = |i: usize, d: u64| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(d)
    };
    let budget = Duration::from_millis(arg(1, 100));
    let rounds = arg(2, 5).max(1) as usize;
    let n_insert = arg(3, 800_000) as usize;
    print!("{:<20} {:>6}", "case", "ents");
    for c in COLS {
        print!(" {c:>12}");
    }
    println!(
        " {:>9}   (ns/lookup Mlookups/s; median of {rounds})",
        "B/elem"
    );
    let sets = cases();
    for (name, entries, lens, els) in sets {
        let auto = pipapo_of(&lens, &els, GroupPolicy::Auto);
        let mut indexed = auto.clone();
        let t = Instant::now();
        indexed.build_index();
        let index_ms = t.elapsed().as_secs_f64() * 1e3;
        let four = pipapo_of(&lens, &els, GroupPolicy::Fixed4);
        let keys = spread_probes(&els, KEYS);
        let kl = auto.key_len();
        // Hash: the same keys as exact elements (every element's start and end key).
        let mut hash = ExactSet::new(kl);
        for (i, (s, e)) in els.iter().enumerate() {
            hash.insert(s, i as u32);
            hash.insert(e, i as u32);
        }
        // Interval: the first field's ranges only.
        let l0 = lens[0];
        let mut iv: IntervalSet = IntervalSet::new(l0).expect("valid width");
        for (s, e) in &els {
            // Some cases repeat a first-field range (proto); those are the same element.
            let _ = iv.insert(elem(&s[..l0], &e[..l0]), InsertMode::Add, 0);
        }
        let mut out = vec![None; 64];
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); COLS.len()];
        for _ in 0..rounds {
            samples[0].push(measure(KEYS, budget, || {
                keys.chunks_exact(kl)
                    .filter(|k| hash.get(black_box(k)).is_some())
                    .count()
            }));
            samples[1].push(measure(KEYS, budget, || {
                keys.chunks_exact(kl)
                    .filter(|k| iv.lookup(black_box(&k[..l0]), 0).is_some())
                    .count()
            }));
            samples[2].push(measure(KEYS, budget, || {
                single(&four, Variant::Scalar, &keys)
            }));
            samples[3].push(measure(KEYS, budget, || {
                single(&auto, Variant::Scalar, &keys)
            }));
            for (c, v) in [(4, Variant::Avx2), (5, Variant::Avx512)] {
                samples[c].push(if v.available() {
                    measure(KEYS, budget, || single(&auto, v, &keys))
                } else {
                    f64::NAN
                });
            }
            samples[6].push(measure(KEYS, budget, || {
                let mut hits = 0;
                for chunk in keys.chunks(64 * kl) {
                    auto.lookup_batch(black_box(chunk), 0, &mut out);
                    hits += out.iter().filter(|x| x.is_some()).count();
                }
                hits
            }));
            samples[7].push(measure(KEYS, budget, || {
                keys.chunks_exact(kl)
                    .filter(|k| indexed.lookup_index(black_box(k), 0).is_some())
                    .count()
            }));
            samples[8].push(measure(KEYS, budget, || {
                let mut hits = 0;
                for chunk in keys.chunks(64 * kl) {
                    indexed.lookup_batch_index(black_box(chunk), 0, &mut out);
                    hits += out.iter().filter(|x| x.is_some()).count();
                }
                hits
            }));
        }
        print!("{name:<20} {entries:>6}");
        for s in samples {
            let ns = median(s);
            print!(" {ns:6.1} {:5.1}", 1e3 / ns);
        }
        println!(
            " {:>9.0}   groups {:?}, index {:.0} B/elem built in {index_ms:.1} ms",
            auto.table_bytes() as f64 / auto.len() as f64,
            auto.group_bits(),
            indexed.index_bytes() as f64 / auto.len() as f64,
        );
    }
    after_updates(budget, rounds, arg(4, 10_000) as usize);
    if n_insert > 0 {
        let (wall, cpu, len) = insert_time(n_insert);
        println!(
            "insert {n_insert} `ip saddr . tcp dport` range elements in one transaction: \
             {wall:.1} s wall, {cpu:.1} s CPU ({len} elements after commit)"
        );
    }
}

/// The second table: the index of a set built at once against the same set after `updates`
/// single-element changes (remove one, add it back, refresh the index).
fn after_updates(budget: Duration, rounds: usize, updates: usize) {
    println!();
    println!(
        "field index after {updates} single-element changes (remove + add back + refresh_index), ns/lookup, median of {rounds}"
    );
    println!();
    println!(
        "| case | entries | built at once | after changes | ratio | b64 at once | b64 after | ratio | overlay left | after the indexer | ratio | µs per change |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let sets = cases();
    for (name, entries, lens, els) in sets {
        let mut once = pipapo_of(&lens, &els, GroupPolicy::Auto);
        once.build_index();
        let mut changed = once.clone();
        let mut handles: Vec<_> = changed.handles().collect();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let t0 = cpu_ns();
        let mut refused = false;
        for _ in 0..updates {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x % handles.len() as u64) as usize;
            let (s, e) = &els[i];
            changed.remove(handles[i]);
            match changed.insert(elem(s, e), InsertMode::Create, 0) {
                Ok(h) => handles[i] = h,
                Err(_) => {
                    refused = true;
                    break;
                }
            }
            changed.refresh_index();
        }
        if refused {
            // Nested elements: one added back after an older element that contains its
            // corner is refused (the kernel's overlap rule), so the set cannot be reached
            // through these changes.
            println!("| {name} | {entries} | (elements cannot be added back under older ones) |");
            continue;
        }
        let per_change = (cpu_ns() - t0) as f64 / 1e3 / updates.max(1) as f64;
        let keys = spread_probes(&els, KEYS);
        let kl = once.key_len();
        let hits = |p: &Pipapo| {
            keys.chunks_exact(kl)
                .filter(|k| p.lookup_index(k, 0).is_some())
                .count()
        };
        assert_eq!(hits(&once), hits(&changed), "{name}: same answers");
        // What the daemon's indexer makes of it once the changes pause: a full build.
        let mut rebuilt = changed.clone();
        rebuilt.build_index();
        let mut out = vec![None; 64];
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); 5];
        for _ in 0..rounds {
            samples[4].push(measure(KEYS, budget, || {
                keys.chunks_exact(kl)
                    .filter(|k| rebuilt.lookup_index(black_box(k), 0).is_some())
                    .count()
            }));
            for (c, p) in [(0, &once), (1, &changed)] {
                samples[c].push(measure(KEYS, budget, || {
                    keys.chunks_exact(kl)
                        .filter(|k| p.lookup_index(black_box(k), 0).is_some())
                        .count()
                }));
                samples[c + 2].push(measure(KEYS, budget, || {
                    let mut hits = 0;
                    for chunk in keys.chunks(64 * kl) {
                        p.lookup_batch_index(black_box(chunk), 0, &mut out);
                        hits += out.iter().filter(|x| x.is_some()).count();
                    }
                    hits
                }));
            }
        }
        let m: Vec<f64> = samples.into_iter().map(median).collect();
        println!(
            "| {name} | {entries} | {:.1} | {:.1} | {:.2} | {:.1} | {:.1} | {:.2} | {} | {:.1} | {:.2} | {per_change:.1} |",
            m[0],
            m[1],
            m[1] / m[0],
            m[2],
            m[3],
            m[3] / m[2],
            changed.index_lag(),
            m[4],
            m[4] / m[0],
        );
    }
}
