//! Prints a table of pipapo lookup cost (ns per lookup, million lookups per second, one core)
//! on the kernel selftest's performance cases: scalar 4-bit only, scalar with the 8/4 switch,
//! AVX2, AVX-512 and batched. `cargo run --release -p wasp-perf --bin set-lookup [-- MS]`,
//! MS = milliseconds per measurement (default 300).

use std::hint::black_box;
use std::time::{Duration, Instant};

use wasp_sets::Pipapo;
use wasp_sets::perfcases::CASES;
use wasp_sets::pipapo::{GroupPolicy, Variant};

const KEYS: usize = 4096;

/// Nanoseconds per lookup of `f` over `n` keys per call, for about `budget`.
fn measure(n: usize, budget: Duration, mut f: impl FnMut() -> usize) -> f64 {
    black_box(f());
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < budget {
        black_box(f());
        calls += 1;
    }
    start.elapsed().as_nanos() as f64 / (calls as f64 * n as f64)
}

fn single(set: &Pipapo, v: Variant, keys: &[u8]) -> usize {
    keys.chunks_exact(set.key_len())
        .filter(|k| set.lookup_variant(v, black_box(k), 0).is_some())
        .count()
}

fn main() {
    let ms: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(300);
    let budget = Duration::from_millis(ms);
    println!(
        "{:<20} {:>6} {:>12} {:>12} {:>12} {:>12} {:>12}   (ns/lookup, Mlookups/s)",
        "case", "ents", "scalar-4bit", "scalar-8/4", "avx2", "avx512", "batched"
    );
    for case in CASES {
        let auto = case.build(GroupPolicy::Auto);
        let four = case.build(GroupPolicy::Fixed4);
        let keys = case.probes(KEYS);
        let kl = auto.key_len();
        let mut cols = Vec::new();
        cols.push(measure(KEYS, budget, || {
            single(&four, Variant::Scalar, &keys)
        }));
        cols.push(measure(KEYS, budget, || {
            single(&auto, Variant::Scalar, &keys)
        }));
        for v in [Variant::Avx2, Variant::Avx512] {
            cols.push(if v.available() {
                measure(KEYS, budget, || single(&auto, v, &keys))
            } else {
                f64::NAN
            });
        }
        let mut out = vec![None; 64];
        cols.push(measure(KEYS, budget, || {
            let mut hits = 0;
            for chunk in keys.chunks(64 * kl) {
                auto.lookup_batch(black_box(chunk), 0, &mut out);
                hits += out.iter().filter(|x| x.is_some()).count();
            }
            hits
        }));
        let cells: Vec<String> = cols
            .iter()
            .map(|ns| format!("{ns:5.1} {:5.1}", 1e3 / ns))
            .collect();
        println!(
            "{:<20} {:>6} {:>12} {:>12} {:>12} {:>12} {:>12}   groups {:?}",
            case.name,
            case.entries,
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            cells[4],
            auto.group_bits()
        );
    }
}
