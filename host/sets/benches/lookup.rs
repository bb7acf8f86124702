//! Pipapo lookup cost on the kernel selftest's performance cases (research note §6): per case,
//! scalar with 4-bit groups only, scalar with the 8/4 switch, AVX2, AVX-512, batched, and the
//! field index (`Pipapo::build_index`) one key per call and batched.
//! Each iteration looks up 1024 keys; criterion reports elements (lookups) per second.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use wasp_sets::perfcases::CASES;
use wasp_sets::pipapo::{GroupPolicy, Variant};

const KEYS: usize = 1024;

fn lookups(c: &mut Criterion) {
    for case in CASES {
        let auto = case.build(GroupPolicy::Auto);
        let four = case.build(GroupPolicy::Fixed4);
        let keys = case.probes(KEYS);
        let kl = auto.key_len();
        let mut g = c.benchmark_group(case.name);
        g.throughput(Throughput::Elements(KEYS as u64));
        let runs: [(&str, &wasp_sets::Pipapo, Variant); 4] = [
            ("scalar-4bit", &four, Variant::Scalar),
            ("scalar-8/4", &auto, Variant::Scalar),
            ("avx2", &auto, Variant::Avx2),
            ("avx512", &auto, Variant::Avx512),
        ];
        for (name, set, v) in runs {
            if !v.available() {
                continue;
            }
            g.bench_function(name, |b| {
                b.iter(|| {
                    let mut hits = 0usize;
                    for k in keys.chunks_exact(kl) {
                        hits += usize::from(set.lookup_variant(v, black_box(k), 0).is_some());
                    }
                    hits
                })
            });
        }
        g.bench_function("batched", |b| {
            let mut out = vec![None; 64];
            b.iter(|| {
                let mut hits = 0usize;
                for chunk in keys.chunks(64 * kl) {
                    auto.lookup_batch(black_box(chunk), 0, &mut out);
                    hits += out.iter().filter(|x| x.is_some()).count();
                }
                hits
            })
        });
        let mut indexed = auto.clone();
        indexed.build_index();
        g.bench_function("index", |b| {
            b.iter(|| {
                let mut hits = 0usize;
                for k in keys.chunks_exact(kl) {
                    hits += usize::from(indexed.lookup_index(black_box(k), 0).is_some());
                }
                hits
            })
        });
        g.bench_function("index-batched", |b| {
            let mut out = vec![None; 64];
            b.iter(|| {
                let mut hits = 0usize;
                for chunk in keys.chunks(64 * kl) {
                    indexed.lookup_batch_index(black_box(chunk), 0, &mut out);
                    hits += out.iter().filter(|x| x.is_some()).count();
                }
                hits
            })
        });
        g.finish();
    }
}

criterion_group!(benches, lookups);
criterion_main!(benches);
