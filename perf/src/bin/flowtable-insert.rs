//! `flowtable-insert`: flow insertion rate into a `wasp_flowtable::Flowtable` with 1 and 2
//! threads, the offload-block list under a mutex against a reader-writer lock (the change the
//! kernel made in "netfilter: flowtable: Use rw sem as flow block lock", Linux 5.7), in the same
//! run, with one block registered (the `HwModel`, which takes every flow); and the fast path's
//! cost per packet for a hit (frame parse + lookup + counters + writing the edited frame into a
//! send buffer) with a plain forward edit (MACs, TTL) and with a NAT edit (source address and
//! port), 64- and 1500-byte frames; the fast path over `--many` flows (300 000) each looked up
//! once in a scrambled order, one by one against vectors of 64 whose lookups are prefetched
//! first ([`Flowtable::prefetch`], as the data path runs a vector). Then insertion with 1
//! thread by offload block: none, the `HwModel`, and the bundled `offload_table` plugin
//! through `wasp_plugin::PluginBlock` (one Wasm call per flow add, under the block's mutex),
//! all taking every flow.
//!
//! Insertion: each run makes a fresh table per variant (variants interleaved within a run),
//! each thread adds `--flows` distinct flows prepared beforehand; ops/s is total flows over the
//! wall time from start to the last thread's end, CPU-ns per op the threads' CPU time (their
//! scheduler clocks) over the flows. Fast path: 1024 flows, frames sent round-robin. Tables
//! show medians of `--runs` runs.
//!
//! ```text
//! cargo run --release -p wasp-perf --bin flowtable-insert [-- --flows 100000 --runs 5 --packets 2000000]
//! cargo run -p wasp-perf --bin flowtable-insert -- --quick      # CI smoke
//! ```

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use clap::Parser;
use wasp_flowtable::{
    BlockLock, FastPath, FlowKey, FlowSpec, Flowtable, FlowtableConfig, HwModel, NatEdit,
    OffloadBlock, Route, TunnelWork, UDP,
};
use wasp_plugin::{HostConfig, PluginBlock, PluginHost};

#[derive(Parser)]
#[command(about = "flowtable insertion rate (mutex vs rwlock block list) and fast-path cost")]
struct Args {
    /// Flows each thread adds per run.
    #[arg(long, default_value_t = 100_000)]
    flows: usize,
    /// Runs; tables show medians.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Packets per fast-path measurement.
    #[arg(long, default_value_t = 2_000_000)]
    packets: usize,
    /// Flows of the fast path over many flows (each looked up once per run).
    #[arg(long, default_value_t = 300_000)]
    many: usize,
    /// CI smoke: 2000 flows, 1 run, 20000 packets, 8192 flows for the many-flow fast path.
    #[arg(long)]
    quick: bool,
}

fn thread_cpu_ns() -> u64 {
    cpu_time::ThreadTime::try_now().map_or(0, |t| t.as_duration().as_nanos() as u64)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn v4(n: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(n))
}

fn route(out_dev: u16, nat: NatEdit) -> Route {
    Route {
        out_dev,
        smac: [2, 0, 0, 0, 0, 2],
        dmac: [2, 0, 0, 0, 0, 0xb],
        mtu: 1500,
        dec_ttl: true,
        nat,
        tunnel: TunnelWork::None,
    }
}

/// Flow `i` of thread `t`: client 10.t.x.y:40000 -> 192.0.2.1:53 (UDP), optionally SNATed to
/// 198.51.t.(1 + i / 60000):(1024 + i % 60000).
fn spec(t: u32, i: u32, nat: bool) -> FlowSpec {
    let client = v4(0x0a00_0000 | (t << 20) | i);
    let server = v4(0xc000_0201);
    let gw = v4(0xc633_0000 + (t << 8) + 1 + i / 60000);
    let port = 1024 + (i % 60000) as u16;
    let orig = FlowKey {
        src: client,
        dst: server,
        src_port: 40000,
        dst_port: 53,
        l4proto: UDP,
        iif: 0,
        tun_id: None,
    };
    let reply = FlowKey {
        src: server,
        dst: if nat { gw } else { client },
        src_port: 53,
        dst_port: if nat { port } else { 40000 },
        l4proto: UDP,
        iif: 1,
        tun_id: None,
    };
    let (n0, n1) = if nat {
        (
            NatEdit {
                src: Some(gw),
                src_port: Some(port),
                ..NatEdit::default()
            },
            NatEdit {
                dst: Some(client),
                dst_port: Some(40000),
                ..NatEdit::default()
            },
        )
    } else {
        (NatEdit::default(), NatEdit::default())
    };
    FlowSpec {
        ct_id: u64::from(i),
        keys: [orig, reply],
        routes: [route(1, n0), route(0, n1)],
    }
}

/// One insertion run: a fresh table with `lock` and one HwModel; `threads` threads add their
/// prepared flows. Returns (ops/s, CPU ns per op).
fn insert_run(lock: BlockLock, threads: usize, flows: usize) -> (f64, f64) {
    let ft = Arc::new(Flowtable::new(FlowtableConfig {
        block_lock: lock,
        max_flows: usize::MAX,
        ..FlowtableConfig::default()
    }));
    ft.register_block(Arc::new(HwModel::new("hw", usize::MAX, 0)))
        .expect("register");
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (ft, barrier) = (Arc::clone(&ft), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let specs: Vec<FlowSpec> =
                    (0..flows as u32).map(|i| spec(t as u32, i, true)).collect();
                barrier.wait();
                let cpu0 = thread_cpu_ns();
                for s in specs {
                    ft.add(s, 0).expect("add");
                }
                thread_cpu_ns() - cpu0
            })
        })
        .collect();
    barrier.wait();
    let t0 = Instant::now();
    let cpu: u64 = handles.into_iter().map(|h| h.join().expect("thread")).sum();
    let wall = t0.elapsed().as_secs_f64();
    let n = (threads * flows) as f64;
    assert_eq!(ft.len(), threads * flows);
    (n / wall, cpu as f64 / n)
}

/// Which block a by-block insertion run registers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    None,
    Hw,
    Plugin,
}

/// One insertion run with 1 thread and block `kind` (a fresh table and a fresh block: the
/// plugin is loaded and configured before the clock starts). Returns (ops/s, CPU ns per op).
fn block_run(kind: BlockKind, host: &PluginHost, flows: usize) -> (f64, f64) {
    let ft = Flowtable::new(FlowtableConfig {
        max_flows: usize::MAX,
        ..FlowtableConfig::default()
    });
    let plugin = match kind {
        BlockKind::None => None,
        BlockKind::Hw => {
            ft.register_block(Arc::new(HwModel::new("hw", usize::MAX, 0)))
                .expect("register");
            None
        }
        BlockKind::Plugin => {
            let path = wasp_guests::plugin("offload_table");
            let b = PluginBlock::load(
                host,
                &path,
                "offload_table",
                &format!("capacity {flows} latency-us 0"),
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let b = Arc::new(b);
            ft.register_block(b.clone()).expect("register");
            Some(b)
        }
    };
    let specs: Vec<FlowSpec> = (0..flows as u32).map(|i| spec(0, i, true)).collect();
    let cpu0 = thread_cpu_ns();
    let t0 = Instant::now();
    for s in specs {
        ft.add(s, 0).expect("add");
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = thread_cpu_ns() - cpu0;
    assert_eq!(ft.len(), flows);
    if let Some(b) = plugin {
        // Every flow went to the plugin: no refusal, no failure.
        let c = b.counts();
        assert_eq!(
            (b.forwarding(), c.full, c.trap, c.deadline, c.malformed),
            (flows, 0, 0, 0, 0),
            "{}",
            b.name()
        );
    }
    (flows as f64 / wall, cpu as f64 / flows as f64)
}

/// A UDP frame of `len` bytes (at least 42) of flow `spec`'s original direction.
fn frame(spec: &FlowSpec, len: usize) -> Vec<u8> {
    let k = &spec.keys[0];
    let (IpAddr::V4(s), IpAddr::V4(d)) = (k.src, k.dst) else {
        unreachable!()
    };
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0xa, 0x08, 0x00];
    let ip_len = (len - 14) as u16;
    let mut h = vec![0x45, 0];
    h.extend(ip_len.to_be_bytes());
    h.extend([0, 0, 0x40, 0, 64, UDP, 0, 0]);
    h.extend(s.octets());
    h.extend(d.octets());
    let mut sum: u32 = h
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f.extend(h);
    f.extend(k.src_port.to_be_bytes());
    f.extend(k.dst_port.to_be_bytes());
    f.extend((ip_len - 20).to_be_bytes());
    // A made-up but non-zero checksum: the fast path updates it, it does not verify it.
    f.extend([0x12, 0x34]);
    f.resize(len, 0x5a);
    f
}

/// Fast path on every frame of `frames` in order, one by one (`vector` false) or in vectors of
/// 64 whose lookups are prefetched first ([`Flowtable::prefetch`]), as the data path runs a
/// vector: CPU ns per packet.
fn many_run(ft: &Flowtable, frames: &[Vec<u8>], vector: bool) -> f64 {
    let mut out = vec![0u8; 2048];
    let mut forwarded = 0usize;
    let mut forward = |f: &[u8], meta: &wasp_wire::PacketMeta| {
        if let FastPath::Forward { edit, .. } = ft.fast_path(f, meta, 0, 1) {
            forwarded += edit.write(f, &mut out).map_or(0, |_| 1);
        }
    };
    let cpu0 = thread_cpu_ns();
    if vector {
        for chunk in frames.chunks(64) {
            let metas: Vec<_> = chunk.iter().map(|f| wasp_wire::parse(f)).collect();
            for (f, m) in chunk.iter().zip(&metas) {
                ft.prefetch(f, m, 0);
            }
            for (f, m) in chunk.iter().zip(&metas) {
                forward(f, m);
            }
        }
    } else {
        for f in frames {
            forward(f, &wasp_wire::parse(f));
        }
    }
    let cpu = (thread_cpu_ns() - cpu0) as f64;
    assert_eq!(forwarded, frames.len(), "every packet hits and is written");
    cpu / frames.len() as f64
}

/// Fast path on `frames` round-robin, `packets` packets: (ns per packet wall, CPU ns).
fn fast_run(ft: &Flowtable, frames: &[Vec<u8>], packets: usize) -> (f64, f64) {
    let mut out = vec![0u8; 2048];
    let mut forwarded = 0usize;
    let cpu0 = thread_cpu_ns();
    let t0 = Instant::now();
    for i in 0..packets {
        let f = &frames[i % frames.len()];
        let meta = wasp_wire::parse(f);
        if let FastPath::Forward { edit, .. } = ft.fast_path(f, &meta, 0, 1) {
            forwarded += edit.write(f, &mut out).map_or(0, |_| 1);
        }
    }
    let wall = t0.elapsed().as_nanos() as f64;
    let cpu = (thread_cpu_ns() - cpu0) as f64;
    assert_eq!(forwarded, packets, "every packet hits and is written");
    std::hint::black_box(&out);
    (wall / packets as f64, cpu / packets as f64)
}

fn main() {
    let mut a = Args::parse();
    if a.quick {
        (a.flows, a.runs, a.packets, a.many) = (2000, 1, 20000, 8192);
    }
    let runs = a.runs.max(1);

    // --- insertion --------------------------------------------------------------------------
    let variants = [
        (BlockLock::Mutex, 1),
        (BlockLock::RwLock, 1),
        (BlockLock::Mutex, 2),
        (BlockLock::RwLock, 2),
    ];
    let mut rate = vec![Vec::new(); variants.len()];
    let mut cpu = vec![Vec::new(); variants.len()];
    for run in 0..runs {
        // Rotate the order each run so no variant always runs first.
        for k in 0..variants.len() {
            let v = (k + run) % variants.len();
            let (lock, threads) = variants[v];
            let (r, c) = insert_run(lock, threads, a.flows);
            rate[v].push(r);
            cpu[v].push(c);
        }
    }
    println!(
        "Flow insertion, {} flows per thread, one HwModel block registered (takes every flow), median of {runs} runs",
        a.flows
    );
    println!();
    println!("| block list lock | threads | flows/s | CPU ns per flow |");
    println!("|---|---:|---:|---:|");
    for (v, (lock, threads)) in variants.iter().enumerate() {
        println!(
            "| {:?} | {threads} | {:.0} | {:.0} |",
            lock,
            median(&mut rate[v]),
            median(&mut cpu[v])
        );
    }
    println!();

    // --- insertion by block, 1 thread ------------------------------------------------------
    // The plugin's table holds every flow: 256 MiB of linear memory (the daemon's default
    // limit, 64 MiB, holds about 200 000 flows of this plugin).
    let host = PluginHost::new(HostConfig {
        max_memory: 256 << 20,
        ..HostConfig::default()
    })
    .expect("plugin host");
    let kinds = [
        (BlockKind::None, "none"),
        (BlockKind::Hw, "HwModel (built in)"),
        (BlockKind::Plugin, "offload_table plugin (PluginBlock)"),
    ];
    let mut rate = vec![Vec::new(); kinds.len()];
    let mut cpu = vec![Vec::new(); kinds.len()];
    for run in 0..runs {
        for k in 0..kinds.len() {
            let v = (k + run) % kinds.len();
            let (r, c) = block_run(kinds[v].0, &host, a.flows);
            rate[v].push(r);
            cpu[v].push(c);
        }
    }
    println!(
        "Flow insertion by offload block, 1 thread, {} flows, rwlock block list, the block takes every flow, median of {runs} runs",
        a.flows
    );
    println!();
    println!("| offload block | flows/s | CPU ns per flow |");
    println!("|---|---:|---:|");
    for (v, (_, name)) in kinds.iter().enumerate() {
        println!(
            "| {name} | {:.0} | {:.0} |",
            median(&mut rate[v]),
            median(&mut cpu[v])
        );
    }
    println!();

    // --- fast path over many flows: one by one against vectors with prefetch ----------------
    let ft = Flowtable::new(FlowtableConfig {
        max_flows: a.many + 1024,
        ..FlowtableConfig::default()
    });
    let specs: Vec<FlowSpec> = (0..a.many as u32).map(|i| spec(0, i, true)).collect();
    for s in &specs {
        ft.add(s.clone(), 0).expect("add");
    }
    // Each flow once, in a scrambled order (multiplication by an odd constant modulo the next
    // power of two, values past the end skipped).
    let m = (a.many as u32).next_power_of_two().max(2);
    let frames: Vec<Vec<u8>> = (0..m)
        .map(|i| i.wrapping_mul(0x9e37_79b9) & (m - 1))
        .filter(|&i| (i as usize) < a.many)
        .map(|i| frame(&specs[i as usize], 64))
        .collect();
    drop(specs);
    let (mut one, mut vec, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        let mut pair = [0.0; 2];
        for vector in [run % 2 == 1, run % 2 == 0] {
            pair[usize::from(vector)] = many_run(&ft, &frames, vector);
        }
        one.push(pair[0]);
        vec.push(pair[1]);
        ratio.push(pair[1] / pair[0]);
    }
    println!(
        "Fast path over {} NAT flows (each once, scrambled order, 64-byte frames), one by one against vectors of 64 prefetched first, median of {runs} runs",
        a.many
    );
    println!();
    println!(
        "| one by one CPU ns/packet | vector + prefetch CPU ns/packet | vector / one by one |"
    );
    println!("|---:|---:|---:|");
    println!(
        "| {:.1} | {:.1} | {:.2} |",
        median(&mut one),
        median(&mut vec),
        median(&mut ratio)
    );
    println!();

    // --- fast path ----------------------------------------------------------------------------
    println!(
        "Fast path per packet (parse + lookup + count + write into a send buffer), 1024 flows round-robin, {} packets, median of {runs} runs",
        a.packets
    );
    println!();
    println!("| edit | frame bytes | ns/packet | CPU ns/packet | Mpackets/s |");
    println!("|---|---:|---:|---:|---:|");
    for nat in [false, true] {
        let ft = Flowtable::new(FlowtableConfig::default());
        let specs: Vec<FlowSpec> = (0..1024).map(|i| spec(0, i, nat)).collect();
        for s in &specs {
            ft.add(s.clone(), 0).expect("add");
        }
        for len in [64usize, 1514] {
            let frames: Vec<Vec<u8>> = specs.iter().map(|s| frame(s, len)).collect();
            let (mut ns, mut cns) = (Vec::new(), Vec::new());
            for _ in 0..runs {
                let (w, c) = fast_run(&ft, &frames, a.packets);
                ns.push(w);
                cns.push(c);
            }
            let w = median(&mut ns);
            println!(
                "| {} | {} | {:.1} | {:.1} | {:.2} |",
                if nat {
                    "NAT (src addr + port)"
                } else {
                    "plain (MACs, TTL)"
                },
                if len == 1514 {
                    "1514 (IP 1500)".to_string()
                } else {
                    len.to_string()
                },
                w,
                median(&mut cns),
                1e3 / w
            );
        }
    }
}
