//! plugin-swap: hot swap under load. One worker thread replays vectors of packets through a
//! [`Runtime`] (a match site of the `swapper` test guest: v1 answers true for every packet, v2
//! false, and both carry their per-site packet count across a swap), calling `advance` at
//! every vector boundary as the engine does; another thread requests swaps back and forth
//! through a [`wasp_plugin::SwapHandle`] at random-ish intervals.
//!
//! Measured: swap latency (wall time from `request` to the first vector answered by the new
//! version, and to the result on the requester's channel), the pause of the worker at the
//! boundary (the `advance` call that applied the swap, vs one that did not), and packets lost.
//! Checked: every vector's answers are all from one version (all true or all false), the
//! worker saw exactly as many version changes as swaps succeeded, every packet got one answer,
//! and the packet count the last version lists equals the packets sent (each packet counted
//! by exactly one version, the count carried across every swap).
//!
//! Usage: `cargo run --release -p wasp-perf --bin plugin-swap [-- --swaps N --vec V]`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;
use wasp_core::{ExtKind, ExtPacket, ExtSite, Extensions, Fallback};
use wasp_plugin::{HostConfig, PluginHost, Runtime};

#[derive(Parser)]
#[command(about = "hot swap under load: latency, pause at the boundary, packets lost")]
struct Args {
    /// Swaps to request (alternating v1 -> v2 -> v1 ...).
    #[arg(long, default_value_t = 200)]
    swaps: usize,
    /// Packets per vector.
    #[arg(long, default_value_t = 32)]
    vec: usize,
    /// Mean gap between two requests, µs.
    #[arg(long, default_value_t = 2000)]
    gap_us: u64,
    /// Let the worker instantiate and configure the new version at the boundary
    /// (`SwapHandle::request_on_worker`) instead of the requesting thread.
    #[arg(long)]
    on_worker: bool,
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let args = Args::parse();
    // A deadline of 1 s (default 10 ms): on a loaded machine a worker descheduled in the
    // middle of a call would hit the 10 ms wall-clock deadline, its instance would be
    // re-created and its count lost, which is not what this measures (failures are counted).
    let host = PluginHost::new(HostConfig {
        deadline_ticks: 1000,
        ..HostConfig::default()
    })
    .expect("plugin host");
    let v1 = host
        .load(wasp_guests::test_guest("swap_v1"))
        .expect("swap_v1");
    let v2 = host
        .load(wasp_guests::test_guest("swap_v2"))
        .expect("swap_v2");
    let mut rt = Runtime::new(&host);
    rt.add("swapper", &v1).expect("add");
    let site = ExtSite {
        id: 0,
        table: 0,
        plugin: "swapper".into(),
        kind: ExtKind::Match,
        args: vec!["a".into()],
        fallback: Fallback::Absent,
    };
    rt.configure(&site).expect("configure");
    let handle = rt.swap_handle();
    let stop = Arc::new(AtomicBool::new(false));
    // Worker → main: (instant the first vector of a new version finished, its answer).
    let (sw_tx, sw_rx) = mpsc::channel::<(Instant, bool)>();

    let worker_stop = stop.clone();
    // What the worker has seen so far (read by the main thread only to explain a timeout).
    let progress = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
    let worker_progress = progress.clone();
    let vec = args.vec;
    let worker = thread::spawn(move || {
        let frame = [0u8; 64];
        let pkts: Vec<ExtPacket<'_>> = (0..vec)
            .map(|_| ExtPacket {
                frame: &frame,
                len: 64,
                iif: 1,
                mark: 0,
                elem: 0,
                l3: 14,
                l4: 34,
                l4proto: 17,
                nfproto: 2,
                iftype: 1,
            })
            .collect();
        let mut out = vec![false; vec];
        let (mut sent, mut answered, mut mixed) = (0u64, 0u64, 0u64);
        let mut last: Option<bool> = None;
        let (mut pauses_swap, mut pauses_plain) = (Vec::new(), Vec::new());
        let mut now = 0u64;
        let mut changes = 0u64;
        let mut failed_vectors = 0u64;
        while !worker_stop.load(Ordering::Relaxed) {
            now += 1_000;
            let t0 = Instant::now();
            rt.advance(now);
            let dt = t0.elapsed().as_secs_f64() * 1e6;
            // Alternating before the call, so a uniform answer must have been written.
            for (i, o) in out.iter_mut().enumerate() {
                *o = i % 2 == 0;
            }
            rt.matches(0, &pkts, &mut out);
            sent += vec as u64;
            worker_progress[0].store(sent, Ordering::Relaxed);
            if rt.last_call_failed() {
                failed_vectors += 1;
                worker_progress[1].store(failed_vectors, Ordering::Relaxed);
                continue;
            }
            let first = out[0];
            if out.iter().all(|o| *o == first) {
                answered += vec as u64;
            } else {
                mixed += 1;
            }
            if last.is_some_and(|l| l != first) {
                changes += 1;
                pauses_swap.push(dt);
                let _ = sw_tx.send((Instant::now(), first));
            } else if pauses_plain.len() < 100_000 {
                pauses_plain.push(dt);
            }
            last = Some(first);
            worker_progress[2].store(u64::from(first), Ordering::Relaxed);
        }
        let listed = rt.list_state(0).expect("list-state")[0]
            .values
            .iter()
            .find(|(k, _)| k == "packets")
            .map_or(0, |(_, v)| *v);
        (
            sent,
            answered,
            mixed,
            changes,
            listed,
            pauses_swap,
            pauses_plain,
            failed_vectors,
        )
    });

    let mut lat_active = Vec::new();
    let mut lat_result = Vec::new();
    let (mut ok, mut failed) = (0u64, 0u64);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..args.swaps {
        // A gap of 0.5 to 1.5 times the mean (xorshift).
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let gap = args.gap_us / 2 + seed % (args.gap_us + 1);
        thread::sleep(Duration::from_micros(gap));
        let to = if i % 2 == 0 { v2.clone() } else { v1.clone() };
        let want = i % 2 != 0; // v1 answers true
        let t0 = Instant::now();
        let rx = if args.on_worker {
            handle.request_on_worker("swapper", to)
        } else {
            handle.request("swapper", to)
        };
        match rx.recv() {
            Ok(Ok(_)) => {
                ok += 1;
                lat_result.push(t0.elapsed().as_secs_f64() * 1e6);
            }
            _ => {
                failed += 1;
                continue;
            }
        }
        // The worker reports the first vector answered by the new version.
        // Generous: a debug build on a loaded 2-core machine (CI's smoke run) can starve the
        // worker thread for seconds.
        match sw_rx.recv_timeout(Duration::from_secs(60)) {
            Ok((at, answer)) => {
                assert_eq!(answer, want, "swap {i}: wrong version active");
                lat_active.push(at.duration_since(t0).as_secs_f64() * 1e6);
            }
            Err(_) => panic!(
                "swap {i}: the new version never answered in 60 s (worker: {} packets sent, \
                 {} vectors failed, last answer {})",
                progress[0].load(Ordering::Relaxed),
                progress[1].load(Ordering::Relaxed),
                progress[2].load(Ordering::Relaxed)
            ),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (sent, answered, mixed, changes, listed, mut p_swap, mut p_plain, failed_vectors) =
        worker.join().expect("worker");

    println!(
        "plugin-swap: {} swaps requested ({ok} ok, {failed} failed), vector {} packets, mean gap {} µs, new version prepared on the {}",
        args.swaps,
        args.vec,
        args.gap_us,
        if args.on_worker {
            "worker"
        } else {
            "requesting thread"
        }
    );
    println!();
    println!("| measure | median | p99 | max |");
    println!("|---|---:|---:|---:|");
    let row = |name: &str, v: &mut Vec<f64>| {
        let (m, p, x) = (pct(v, 0.5), pct(v, 0.99), pct(v, 1.0));
        println!("| {name} | {m:.1} | {p:.1} | {x:.1} |");
    };
    row(
        "swap latency, request to first vector of the new version (µs)",
        &mut lat_active,
    );
    row(
        "swap latency, request to result on the channel (µs)",
        &mut lat_result,
    );
    row("worker pause at a boundary with a swap (µs)", &mut p_swap);
    row("worker pause at a boundary without one (µs)", &mut p_plain);
    println!();
    println!(
        "| packets sent | answered by one version per vector | vectors with mixed answers | version changes seen | packets counted by the plugin (carried) | lost | failed calls (fallback) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    // Lost: packets without an answer from a single version, or not counted by any version.
    let lost = (sent - answered).max(sent.abs_diff(listed));
    println!(
        "| {sent} | {answered} | {mixed} | {changes} | {listed} | {lost} | {} |",
        failed_vectors
    );
    let ok_all = lost == 0 && mixed == 0 && changes == ok && listed == sent;
    println!();
    println!(
        "check: {}",
        if ok_all {
            "every packet got exactly one answer from exactly one version, counts continuous"
        } else {
            "FAILED"
        }
    );
    if !ok_all {
        std::process::exit(1);
    }
}
