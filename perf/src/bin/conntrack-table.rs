//! `conntrack-table`: the conntrack table of the conntrack issue's benchmark: memory per flow,
//! insert and lookup cost with `--flows` flows (1 000 000 by default), with 1 and 2 threads on
//! one shared `wasp_conntrack::Conntrack`.
//!
//! Each flow is a UDP flow `10.a.b.c:port -> 198.51.100.1:53` (distinct sources). A packet is a
//! 60-byte frame from one template whose addresses and ports are patched in place, with the
//! template's `PacketMeta` (the offsets are the same for every flow), so the times are the
//! table's: insert = `track` (a miss, an unconfirmed entry) + `confirm`; lookup = `track` of a
//! packet of a confirmed flow (a hit: found, timeout and counters updated), flows visited in a
//! scrambled order, once one flow after the other and once in vectors of 64 whose lookups are
//! prefetched first ([`Conntrack::prefetch`]) and then tracked in order, as the gateway's IP
//! path runs a vector (the two alternate which goes first from run to run). With 2 threads
//! each thread inserts, then looks up, its own half of the flows at the same time as the
//! other. Times: the threads' CPU ns per operation (mean of the
//! threads) and the wall-clock rate of all threads together; medians of `--runs` runs, each on
//! a fresh table. Memory: the process's resident set growth while the 1-thread run inserts,
//! divided by the flows (the slab of entries, both index maps, allocator slack).
//!
//! Two reference columns, measured in the same run because the machine is shared and its
//! memory latency moves with the load: "hot" is a lookup of one flow over and over (everything
//! in cache: the instructions' cost), "map" is one random lookup in a `std::collections::HashMap`
//! of as many `u64` keys with 192-byte values, the size of a conntrack slot (about one cache and
//! TLB miss in memory of the same size: what a miss costs at that moment). A conntrack lookup
//! touches the index's control bytes, its bucket and the entry's slot: about three.
//!
//! ```text
//! cargo run --release -p wasp-perf --bin conntrack-table [-- --flows 1000000 --runs 5]
//! ```

use std::hint::black_box;
use std::time::Instant;

use wasp_conntrack::{Config, Conntrack};
use wasp_wire::PacketMeta;

/// Command-line options.
#[derive(clap::Parser)]
#[command(about = "conntrack table: bytes per flow, insert and lookup ns, 1 and 2 threads")]
struct Args {
    /// Flows in the table.
    #[arg(long, default_value_t = 1_000_000)]
    flows: u32,
    /// Runs per thread count; the table shows medians.
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

fn thread_cpu_ns() -> u64 {
    cpu_time::ThreadTime::try_now().map_or(0, |t| t.as_duration().as_nanos() as u64)
}

/// Resident set size in bytes (`/proc/self/statm`, field 2 in pages).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// The template frame: Ethernet + IPv4 + UDP with 18 bytes of payload (60 bytes).
fn template() -> Vec<u8> {
    let payload = [0u8; 18];
    let udp = wasp_wire::samples::udp(1024, 53, &payload);
    wasp_wire::samples::ethernet(&[], 0x0800, &wasp_wire::samples::ipv4(17, &udp))
}

/// Patch flow `i` into `f`: source 10.0.0.0 + i / 16 (so 16 flows per source), source port
/// 1024 + i % 16 * 3000 + i % 7, destination 198.51.100.1:53.
fn flow(f: &mut [u8], i: u32) {
    let src = 0x0a00_0000u32 + (i >> 4);
    f[26..30].copy_from_slice(&src.to_be_bytes());
    f[30..34].copy_from_slice(&[198, 51, 100, 1]);
    let sport = 1024 + (i & 15) as u16 * 3000 + (i % 7) as u16;
    f[34..36].copy_from_slice(&sport.to_be_bytes());
}

/// A bijective scramble of `0..n` (multiplication by an odd constant modulo the next power of
/// two, skipping values past `n`), so lookups do not walk the slab in insertion order.
fn scrambled(n: u32) -> Vec<u32> {
    let m = n.next_power_of_two().max(2);
    (0..m)
        .map(|i| i.wrapping_mul(0x9e37_79b9) & (m - 1))
        .filter(|&x| x < n)
        .collect()
}

/// Look up every flow of `order` one after the other (`vector` false) or in vectors of 64,
/// each vector's lookups prefetched first ([`Conntrack::prefetch`]) then tracked in order, as
/// the gateway's IP path runs them; returns the hits.
fn lookups(ct: &Conntrack, meta: &PacketMeta, order: &[u32], vector: bool, now: u64) -> u64 {
    let mut hits = 0u64;
    let mut hit = |info: wasp_conntrack::CtInfo| hits += u64::from(info.id != 0 && !info.pending);
    if vector {
        let mut frames = vec![template(); 64];
        for chunk in order.chunks(64) {
            for (f, &i) in frames.iter_mut().zip(chunk) {
                flow(f, i);
                ct.prefetch(f, meta, 0);
            }
            for f in &frames[..chunk.len()] {
                hit(ct.track(f, meta, 0, now));
            }
        }
    } else {
        let mut f = template();
        for &i in order {
            flow(&mut f, i);
            hit(ct.track(&f, meta, 0, now));
        }
    }
    hits
}

/// Per-thread result: (insert CPU ns, lookup CPU ns one by one, lookup CPU ns in vectors
/// with prefetch), operations each; `vector_first` runs the vector lookups first.
fn worker(
    ct: &Conntrack,
    meta: &PacketMeta,
    flows: &[u32],
    phase: &std::sync::Barrier,
    vector_first: bool,
) -> (u64, u64, u64) {
    let mut f = template();
    phase.wait();
    let c0 = thread_cpu_ns();
    for &i in flows {
        flow(&mut f, i);
        let info = ct.track(&f, meta, 0, 1_000);
        let id = ct.confirm(info.id, 1_000).expect("confirm");
        black_box(id);
    }
    let ins = thread_cpu_ns() - c0;
    // The lookup order, read sequentially while timing.
    let order: Vec<u32> = scrambled(flows.len() as u32)
        .into_iter()
        .map(|k| flows[k as usize])
        .collect();
    phase.wait();
    phase.wait();
    let mut took = [0u64; 2];
    for (k, vector) in [vector_first, !vector_first].into_iter().enumerate() {
        let c1 = thread_cpu_ns();
        let hits = lookups(ct, meta, &order, vector, 2_000 + k as u64);
        took[usize::from(vector)] = thread_cpu_ns() - c1;
        assert_eq!(hits, flows.len() as u64, "every lookup must hit");
        if k == 0 {
            phase.wait();
            phase.wait();
        }
    }
    phase.wait();
    (ins, took[0], took[1])
}

/// One run: (insert ns/op CPU, insert Mops/s wall, lookup ns/op CPU, lookup Mops/s wall,
/// bytes/flow, lookup ns/op CPU in vectors with prefetch, its Mops/s wall).
fn run(threads: usize, n: u32, vector_first: bool) -> [f64; 7] {
    let template = template();
    let meta = wasp_wire::parse(&template);
    let rss0 = rss_bytes();
    let ct = Conntrack::new(Config {
        max_entries: n as usize + 1024,
        ..Config::default()
    });
    let parts: Vec<Vec<u32>> = (0..threads)
        .map(|t| (0..n).filter(|i| *i as usize % threads == t).collect())
        .collect();
    let barrier = std::sync::Barrier::new(threads + 1);
    let mut ins_wall = 0u64;
    let mut look_wall = [0u64; 2];
    let mut rss1 = 0;
    let results: Vec<(u64, u64, u64)> = std::thread::scope(|s| {
        let hs: Vec<_> = parts
            .iter()
            .map(|p| {
                let (ct, meta, b) = (&ct, &meta, &barrier);
                s.spawn(move || worker(ct, meta, p, b, vector_first))
            })
            .collect();
        barrier.wait();
        let t0 = Instant::now();
        barrier.wait();
        ins_wall = t0.elapsed().as_nanos() as u64;
        rss1 = rss_bytes();
        for vector in [vector_first, !vector_first] {
            barrier.wait();
            let t1 = Instant::now();
            barrier.wait();
            look_wall[usize::from(vector)] = t1.elapsed().as_nanos() as u64;
        }
        hs.into_iter().map(|h| h.join().expect("worker")).collect()
    });
    assert_eq!(ct.len(), n as usize);
    let per = |sum: u64| sum as f64 / n as f64;
    let ins_cpu: u64 = results.iter().map(|r| r.0).sum();
    let look_cpu: u64 = results.iter().map(|r| r.1).sum();
    let vec_cpu: u64 = results.iter().map(|r| r.2).sum();
    [
        per(ins_cpu),
        n as f64 / ins_wall as f64 * 1e3,
        per(look_cpu),
        n as f64 / look_wall[0] as f64 * 1e3,
        rss1.saturating_sub(rss0) as f64 / n as f64,
        per(vec_cpu),
        n as f64 / look_wall[1] as f64 * 1e3,
    ]
}

/// CPU ns per lookup of one confirmed flow, over and over.
fn hot(n: u32) -> f64 {
    let mut f = template();
    let meta = wasp_wire::parse(&f);
    let ct = Conntrack::new(Config::default());
    flow(&mut f, 0);
    let i = ct.track(&f, &meta, 0, 0);
    ct.confirm(i.id, 0).expect("confirm");
    let c0 = thread_cpu_ns();
    for k in 0..n {
        black_box(ct.track(&f, &meta, 0, u64::from(k)));
    }
    (thread_cpu_ns() - c0) as f64 / f64::from(n)
}

/// CPU ns per random lookup in a std `HashMap<u64, [u64; 24]>` of `n` keys.
fn map_baseline(n: u32) -> f64 {
    let mix = |x: u64| x.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (x >> 29);
    let m: std::collections::HashMap<u64, [u64; 24]> =
        (0..u64::from(n)).map(|i| (mix(i), [i; 24])).collect();
    let order = scrambled(n);
    let c0 = thread_cpu_ns();
    let mut s = 0u64;
    for &k in &order {
        s = s.wrapping_add(m.get(&mix(u64::from(k))).map_or(0, |v| v[0]));
    }
    black_box(s);
    (thread_cpu_ns() - c0) as f64 / f64::from(n)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Args = clap::Parser::parse();
    println!(
        "conntrack table, {} UDP flows, median of {} runs (CPU ns per op: mean of the threads; \
         Mops/s: wall clock, all threads)",
        args.flows, args.runs
    );
    println!();
    println!(
        "| threads | insert CPU ns | insert Mops/s | lookup CPU ns | lookup Mops/s | vector + prefetch lookup CPU ns | its Mops/s | vector / one by one | bytes/flow (RSS) | hot lookup ns | map ns |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for threads in [1usize, 2] {
        let mut runs = Vec::new();
        let (mut hots, mut maps) = (Vec::new(), Vec::new());
        for r in 0..args.runs.max(1) {
            runs.push(run(threads, args.flows, r % 2 == 1));
            hots.push(hot(args.flows.min(1_000_000)));
            maps.push(map_baseline(args.flows));
        }
        let col = |i: usize| median(runs.iter().map(|r| r[i]).collect());
        let mem = if threads == 1 {
            format!("{:.0}", col(4))
        } else {
            "-".to_string()
        };
        let ratio = median(runs.iter().map(|r| r[5] / r[2]).collect());
        println!(
            "| {threads} | {:.1} | {:.2} | {:.1} | {:.2} | {:.1} | {:.2} | {ratio:.2} | {mem} | {:.1} | {:.1} |",
            col(0),
            col(1),
            col(2),
            col(3),
            col(5),
            col(6),
            median(hots),
            median(maps)
        );
    }
}
