//! DPDK's `rte_acl` next to wasp's pipapo on the kernel selftest's performance cases
//! (`wasp_sets::perfcases`), same rules and same keys, in the same run: ns per key at batch 64
//! and batch 1, best `rte_acl` algorithm (scalar, SSE, AVX2, AVX512X16, AVX512X32, chosen with
//! `rte_acl_set_ctx_classify`), best pipapo variant (AVX2 or AVX-512, single-key or batched
//! lookup) and the field index (`Pipapo::build_index`, `lookup_index` at batch 1,
//! `lookup_batch_index` at batch 64) for each; the median of ROUNDS interleaved runs of KEYS
//! keys each; build times of `rte_acl` and of the index. Before timing, every probe key and
//! every probe key with one bit flipped is classified by all three, and the matched element
//! compared with pipapo's (the `disagree` column, must be 0).
//!
//! Three last rows run the same on shapes where many elements share every value of every
//! field (`acl::cross_product(32)`, `acl::proto_port_net(4, 16)`, `acl::nested_prefixes(8, 8,
//! 8)`): no field narrows a key down to a few candidates, and the index answers through its
//! decision tree.
//!
//! `cargo run --release -p wasp-perf --features dpdk --bin acl-compare [KEYS [ROUNDS]]`
//! (default 10 000 000 keys, 5 rounds). Needs `libdpdk-dev`; EAL runs with `--no-huge
//! --no-pci --no-shconf` (no hugepages, devices or shared files) and a 512-bit SIMD width.

mod ffi;

use std::hint::black_box;
use std::time::Instant;

use ffi::{Acl, Alg, Inputs};
use wasp_perf::acl::{
    AclLayout, cross_product, nested_prefixes, pipapo_of, proto_port_net, spread_probes,
};
use wasp_sets::perfcases::CASES;
use wasp_sets::pipapo::{GroupPolicy, Variant};
use wasp_sets::{ElemHandle, Pipapo};

/// Distinct probe keys, cycled through in a run.
const POOL: usize = 16384;
const BATCH: usize = 64;

const ALGS: [(Alg, &str); 5] = [
    (Alg::Scalar, "scalar"),
    (Alg::Sse, "sse"),
    (Alg::Avx2, "avx2"),
    (Alg::Avx512x16, "avx512x16"),
    (Alg::Avx512x32, "avx512x32"),
];

/// ns per key of `f(start, n)` classifying keys `start..start + n` of the pool, `total` keys.
fn run(total: usize, batch: usize, mut f: impl FnMut(usize, usize) -> usize) -> f64 {
    let calls = total / batch;
    let per_pool = POOL / batch;
    let t = Instant::now();
    let mut hits = 0;
    for c in 0..calls {
        hits += f((c % per_pool) * batch, batch);
    }
    black_box(hits);
    t.elapsed().as_nanos() as f64 / (calls * batch) as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The best (lowest median) of named sample lists.
fn best(cands: Vec<(&'static str, Vec<f64>)>) -> (f64, &'static str) {
    cands
        .into_iter()
        .map(|(n, s)| (median(s), n))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .unwrap_or((f64::NAN, "-"))
}

/// Elements as (start key, end key).
type Elements = Vec<(Vec<u8>, Vec<u8>)>;

fn wasp_single(p: &Pipapo, v: Variant, keys: &[u8], start: usize, n: usize) -> usize {
    let kl = p.key_len();
    keys[start * kl..(start + n) * kl]
        .chunks_exact(kl)
        .filter(|k| p.lookup_variant(v, black_box(k), 0).is_some())
        .count()
}

fn main() {
    let arg = |i: usize, d: usize| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(d)
    };
    let total = arg(1, 10_000_000).max(POOL);
    let rounds = arg(2, 5).max(1);
    if let Err(e) = ffi::eal_init(&[
        "--no-huge",
        "--no-pci",
        "--no-shconf",
        "--no-telemetry",
        "--force-max-simd-bitwidth=512",
        "--log-level=lib.eal:error",
        "-m",
        "512",
    ]) {
        eprintln!("acl-compare: {e}");
        std::process::exit(1);
    }
    let wasp_variants: Vec<(Variant, &str)> =
        [(Variant::Avx2, "avx2"), (Variant::Avx512, "avx512")]
            .into_iter()
            .filter(|(v, _)| v.available())
            .collect();
    println!(
        "ns per key, median of {rounds} runs of {total} keys ({POOL} distinct, hits spread over \
         all entries); rte_acl and wasp best variant at batch {BATCH} and batch 1"
    );
    println!(
        "| case (entries) | rte_acl rules | rte_acl build ms | index build ms | rte_acl b64 | \
         pipapo b64 | index b64 | rte_acl b1 | pipapo b1 | index b1 | disagree |"
    );
    println!("|---|---:|---:|---:|---|---|---|---|---|---|---:|");
    // The selftest's cases, then three shapes where many elements share every field value
    // (the field index cuts them with its tree).
    let mut sets: Vec<(String, Vec<usize>, Elements, Pipapo)> = CASES
        .iter()
        .map(|c| {
            let p = c.build(GroupPolicy::Auto);
            (c.name.to_string(), c.field_lens(), c.elements(), p)
        })
        .collect();
    let adversarial: [(&str, Vec<usize>, Elements); 3] = [
        ("cross 32x32 net,port", vec![4, 2], cross_product(32)),
        (
            "proto,port,net 4x16x16",
            vec![1, 2, 4],
            proto_port_net(4, 16),
        ),
        (
            "nested net 8/64,port x8",
            vec![4, 2],
            nested_prefixes(8, 8, 8),
        ),
    ];
    for (name, lens, els) in adversarial {
        let p = pipapo_of(&lens, &els, GroupPolicy::Auto);
        sets.push((name.into(), lens, els, p));
    }
    for (ci, (name, lens, els, pip)) in sets.iter().enumerate() {
        let kl = pip.key_len();
        let layout = AclLayout::new(lens);
        let rules = layout.rules(els);
        let t = Instant::now();
        let mut acl = match Acl::build(&format!("case{ci}"), &layout, &rules) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("acl-compare: {name}: {e}");
                std::process::exit(1);
            }
        };
        let build_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut ixp = pip.clone();
        let t = Instant::now();
        ixp.build_index();
        let index_ms = t.elapsed().as_secs_f64() * 1e3;
        let keys = spread_probes(els, POOL);
        let inputs = Inputs::new(&layout, &keys);
        assert_eq!(inputs.len(), POOL);
        let algs: Vec<(Alg, &str)> = ALGS.into_iter().filter(|(a, _)| acl.set_alg(*a)).collect();

        // Correctness: every probe, and every probe with one bit flipped, with every algorithm.
        let mut check = keys.clone();
        for (i, k) in keys.chunks_exact(kl).enumerate() {
            let mut k = k.to_vec();
            let bit = (i * 7919) % (kl * 8);
            k[bit / 8] ^= 1 << (bit % 8);
            check.extend(k);
        }
        let check_in = Inputs::new(&layout, &check);
        let n_check = check_in.len();
        let want: Vec<u32> = check
            .chunks_exact(kl)
            .map(|k| {
                pip.lookup(k, 0).map_or(0, |h| {
                    let (start, _) = pip.bounds(h).expect("live handle");
                    els.iter()
                        .position(|e| *e.0 == *start)
                        .map_or(u32::MAX, |i| i as u32 + 1)
                })
            })
            .collect();
        let mut disagree = 0;
        let mut got = vec![0u32; n_check];
        for &(a, _) in &algs {
            acl.set_alg(a);
            for s in (0..n_check).step_by(BATCH) {
                let e = (s + BATCH).min(n_check);
                acl.classify(&check_in, s..e, &mut got[s..e]);
            }
            disagree += got.iter().zip(&want).filter(|(g, w)| g != w).count();
        }
        let mut ix_out = vec![None; n_check];
        for (s, o) in check.chunks(BATCH * kl).zip(ix_out.chunks_mut(BATCH)) {
            ixp.lookup_batch_index(s, 0, o);
        }
        for ((k, w), b) in check.chunks_exact(kl).zip(want.iter()).zip(&ix_out) {
            let single = ixp.lookup_index(k, 0);
            let same = |r: Option<ElemHandle>| {
                r.map(|h| ixp.bounds(h)) == pip.lookup(k, 0).map(|h| pip.bounds(h))
            };
            disagree += usize::from(!same(single) || !same(*b) || (*w == 0) != single.is_none());
        }

        // Timing, interleaved rounds.
        let mut res = [0u32; BATCH];
        let mut out = [None; BATCH];
        let mut acl_s: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); algs.len()]; 2];
        let mut wasp_s: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); 2 * wasp_variants.len()]; 2];
        let mut index_s: Vec<Vec<f64>> = vec![Vec::new(); 2];
        for _ in 0..rounds {
            for (bi, b) in [BATCH, 1].into_iter().enumerate() {
                for (ai, &(a, _)) in algs.iter().enumerate() {
                    acl.set_alg(a);
                    acl_s[bi][ai].push(run(total, b, |s, n| {
                        acl.classify(&inputs, s..s + n, &mut res[..n]);
                        res[..n].iter().filter(|&&r| r != 0).count()
                    }));
                }
                for (wi, &(v, _)) in wasp_variants.iter().enumerate() {
                    wasp_s[bi][2 * wi].push(run(total, b, |s, n| wasp_single(pip, v, &keys, s, n)));
                    wasp_s[bi][2 * wi + 1].push(run(total, b, |s, n| {
                        pip.lookup_batch_variant(
                            v,
                            black_box(&keys[s * kl..(s + n) * kl]),
                            0,
                            &mut out[..n],
                        );
                        out[..n].iter().filter(|r| r.is_some()).count()
                    }));
                }
                index_s[bi].push(run(total, b, |s, n| {
                    if n == 1 {
                        usize::from(
                            ixp.lookup_index(black_box(&keys[s * kl..(s + 1) * kl]), 0)
                                .is_some(),
                        )
                    } else {
                        ixp.lookup_batch_index(
                            black_box(&keys[s * kl..(s + n) * kl]),
                            0,
                            &mut out[..n],
                        );
                        out[..n].iter().filter(|r| r.is_some()).count()
                    }
                }));
            }
        }
        let wasp_names: Vec<&'static str> = wasp_variants
            .iter()
            .flat_map(|&(_, n)| {
                [
                    n,
                    match n {
                        "avx2" => "avx2 batched",
                        _ => "avx512 batched",
                    },
                ]
            })
            .collect();
        let cell = |(ns, name): (f64, &str)| format!("{ns:.1} ({name})");
        let mut row = format!(
            "| {} ({}) | {} | {build_ms:.1} | {index_ms:.1} |",
            name,
            els.len(),
            rules.len()
        );
        for bi in 0..2 {
            let a = best(
                algs.iter()
                    .zip(acl_s[bi].clone())
                    .map(|(&(_, n), s)| (n, s))
                    .collect(),
            );
            let w = best(wasp_names.iter().copied().zip(wasp_s[bi].clone()).collect());
            row += &format!(
                " {} | {} | {:.1} |",
                cell(a),
                cell(w),
                median(index_s[bi].clone())
            );
        }
        row += &format!(" {disagree} |");
        println!("{row}");
    }
}
