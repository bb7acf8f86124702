//! `hash-flood`: tables under keys crafted to collide (issue: random seeds). For the
//! exact-match set (an `ipv6_addr` set: 16-byte keys) and the connection table (UDP/IPv6 flows
//! from crafted sources), `--keys` keys crafted to share one hash under the hash each table
//! used before its seed was drawn at random (`wasp_perf::flood`), next to as many random keys:
//!
//! - "old hash": a `HashMap` with the old hasher, as the table's map was (the set's unkeyed
//!   hash; the connection table's index map of shard 0 under its old constant seed, which
//!   every crafted flow fell into);
//! - "wasp": the table as it is now (`ExactSet`; `Conntrack` with its default configuration,
//!   seeded at random, fed the flows' frames through `track` and `confirm`).
//!
//! Columns: CPU ms to insert all keys, CPU ns per lookup (a hit; at most 10 000 keys looked up
//! in a scrambled order), and the lookup ratio crafted / random of the same table. Medians of
//! `--runs` runs.
//!
//! ```text
//! cargo run --release -p wasp-perf --bin hash-flood [-- --keys 100000 --runs 3]
//! ```

use std::collections::HashMap;
use std::hint::black_box;

use wasp_conntrack::{Config, Conntrack};
use wasp_perf::flood::{
    CT_DPORT, CT_DST, CT_SPORT, OldCtBuild, OldSetBuild, ct_sources, ct_words, random_keys,
    random_sources, set_keys,
};
use wasp_sets::ExactSet;

/// Command-line options.
#[derive(clap::Parser)]
#[command(about = "set and conntrack lookups under keys crafted to collide")]
struct Args {
    /// Keys per table.
    #[arg(long, default_value_t = 100_000)]
    keys: usize,
    /// Runs; the table shows medians.
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

/// Keys looked up per measurement, at most.
const LOOKUPS: usize = 10_000;

fn cpu_ns() -> u64 {
    cpu_time::ThreadTime::try_now().map_or(0, |t| t.as_duration().as_nanos() as u64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The lookup order: up to [`LOOKUPS`] indices of `0..n`, scrambled.
fn order(n: usize) -> Vec<usize> {
    let m = n.next_power_of_two().max(2);
    (0..m)
        .map(|i| i.wrapping_mul(0x9e37_79b9) & (m - 1))
        .filter(|&x| x < n)
        .take(LOOKUPS)
        .collect()
}

/// CPU ms of `ins` over keys `0..n`.
fn insert_ms(n: usize, mut ins: impl FnMut(usize)) -> f64 {
    let c0 = cpu_ns();
    for i in 0..n {
        ins(i);
    }
    (cpu_ns() - c0) as f64 / 1e6
}

/// CPU ns per `look` over the lookup order of `0..n`; every lookup must hit.
fn lookup_ns(n: usize, mut look: impl FnMut(usize) -> bool) -> f64 {
    let ord = order(n);
    let c1 = cpu_ns();
    let hits = ord.iter().filter(|&&i| look(i)).count();
    let ns = (cpu_ns() - c1) as f64 / ord.len() as f64;
    assert_eq!(hits, ord.len(), "every lookup hits");
    ns
}

fn old_set(keys: &[[u8; 16]]) -> (f64, f64) {
    let mut m: HashMap<u128, u32, OldSetBuild> = HashMap::with_hasher(OldSetBuild);
    let k = |i: usize| u128::from_be_bytes(keys[i]);
    let ins = insert_ms(keys.len(), |i| {
        m.insert(k(i), i as u32);
    });
    (
        ins,
        lookup_ns(keys.len(), |i| black_box(m.get(&k(i))).is_some()),
    )
}

fn new_set(keys: &[[u8; 16]]) -> (f64, f64) {
    let mut s = ExactSet::new(16);
    let ins = insert_ms(keys.len(), |i| {
        s.insert(&keys[i], i as u32);
    });
    (
        ins,
        lookup_ns(keys.len(), |i| black_box(s.get(&keys[i])).is_some()),
    )
}

fn old_ct(srcs: &[[u8; 16]]) -> (f64, f64) {
    let mut m: HashMap<_, u32, OldCtBuild> = HashMap::with_hasher(OldCtBuild::shard(0));
    let ins = insert_ms(srcs.len(), |i| {
        m.insert(ct_words(&srcs[i]), i as u32);
    });
    (
        ins,
        lookup_ns(srcs.len(), |i| {
            black_box(m.get(&ct_words(&srcs[i]))).is_some()
        }),
    )
}

/// A UDP/IPv6 frame of the flow from `src` (source at bytes 22..38).
fn frame(src: &[u8; 16]) -> Vec<u8> {
    let udp = wasp_wire::samples::udp(CT_SPORT, CT_DPORT, &[0u8; 8]);
    let mut f = wasp_wire::samples::ethernet(&[], 0x86dd, &wasp_wire::samples::ipv6(17, &udp));
    f[22..38].copy_from_slice(src);
    f[38..54].copy_from_slice(&CT_DST);
    f
}

fn new_ct(srcs: &[[u8; 16]]) -> (f64, f64) {
    let ct = Conntrack::new(Config {
        max_entries: srcs.len() + 1024,
        ..Config::default()
    });
    let mut f = frame(&srcs[0]);
    let meta = wasp_wire::parse(&f);
    let ins = insert_ms(srcs.len(), |i| {
        f[22..38].copy_from_slice(&srcs[i]);
        let info = ct.track(&f, &meta, 0, 1_000);
        ct.confirm(info.id, 1_000).expect("confirm");
    });
    let look = lookup_ns(srcs.len(), |i| {
        f[22..38].copy_from_slice(&srcs[i]);
        let info = ct.track(&f, &meta, 0, 2_000);
        info.id != 0 && !info.pending
    });
    (ins, look)
}

type Measure = fn(&[[u8; 16]]) -> (f64, f64);
/// Random keys, crafted keys.
type KeyPair = (Vec<[u8; 16]>, Vec<[u8; 16]>);

fn main() {
    let args: Args = clap::Parser::parse();
    let n = args.keys.max(1);
    println!(
        "{n} keys per table, crafted to share one hash under the table's old hash, or random; \
         CPU time, medians of {} runs",
        args.runs
    );
    println!();
    println!(
        "| table | hash | insert ms random | insert ms crafted | lookup ns random | lookup ns crafted | crafted / random |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    let set_keys = (random_keys(n), set_keys(n));
    let ct_keys = (random_sources(n), ct_sources(n));
    let rows: [(&str, &str, Measure, &KeyPair); 4] = [
        ("ipv6_addr set", "old (unkeyed)", old_set, &set_keys),
        ("ipv6_addr set", "wasp (seeded)", new_set, &set_keys),
        ("conntrack", "old (constant seed)", old_ct, &ct_keys),
        ("conntrack", "wasp (seeded)", new_ct, &ct_keys),
    ];
    for (table, hash, f, (random, crafted)) in rows {
        let mut r = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..args.runs.max(1) {
            let (ri, rl) = f(random);
            let (ci, cl) = f(crafted);
            r.0.push(ri);
            r.1.push(ci);
            r.2.push(rl);
            r.3.push(cl);
        }
        let (ri, ci, rl, cl) = (median(r.0), median(r.1), median(r.2), median(r.3));
        println!(
            "| {table} | {hash} | {ri:.1} | {ci:.1} | {rl:.1} | {cl:.1} | {:.2} |",
            cl / rl
        );
    }
}
