//! End to end on a veth pair, 64-byte frames, every variant in the same run: (a) the I/O
//! floor, wasp's daemon workers with an empty ruleset against the bare `wasp-io` receive loop
//! that `io-floor` measures; (b) the ruleset's added cost, wasp with 100 linear rules and with
//! a 1000-element concatenated-range set over its empty ruleset, against the kernel's added
//! cost for the same rules in its netdev ingress hook over a plain `counter drop`.
//!
//! Topology (fresh per run, deleted on drop, also on error or panic): namespaces
//! `wasp-e2e-<pid>-<n>-tx` (veth `if0`) and `-rx` (veth `if1`), IPv6 off (no ND/MLD frames).
//! A sender thread in the tx namespace pushes `--packets` Ethernet/IPv4/UDP frames of 64 bytes
//! (64 flows: source ports 10000-10063; destination 10.0.7.214:2002, the selftest's probe of
//! its `net,port` set) through an AF_PACKET socket with `sendmmsg`, 64 per call, as fast as one
//! core sends. veth runs the receive softirq in the sender's context, so the sending thread's
//! CPU time (`CLOCK_THREAD_CPUTIME_ID`; this kernel has no `CONFIG_IRQ_TIME_ACCOUNTING`, so
//! softirqs are charged to the thread they interrupt) is sender + veth + the kernel's receive
//! (for wasp: the copy into the `TPACKET_V3` ring; for the kernel rows: nft's ingress hook).
//!
//! Variants, rotating in order from round to round:
//! - `kernel`: no socket on `if1`; table `netdev perf` in the rx namespace with the set and an
//!   ingress chain on `if1` holding `counter drop` (baseline), or 100 rules `ip saddr
//!   198.51.X.Y udp dport P counter drop` (no frame matches, as `ruleset-scaling` builds them)
//!   then `counter drop`, or `ip daddr . udp dport @test counter drop` (the 1001 elements of
//!   the selftest's `net,port` case, as `kernel-set-cost` builds them; every frame matches the
//!   last one). Cost: the sending thread's CPU per packet. Checked: the final rule counted
//!   every packet sent, the 100 rules none.
//! - `floor`: W threads, each with an `AfPacketGroup` on `if1` (one fanout group, hash), in a
//!   loop of `poll(64, 256, 2 ms)` doing nothing with the frames: `io-floor`'s receive loop
//!   (copied, not shared: `io-floor.rs` belongs to the io helper).
//! - `floor reading headers`: the same loop reading each frame's EtherType, IPv4 protocol and
//!   UDP destination port (two cache lines the kernel wrote on the sender's CPU): the least a
//!   classifier pays per frame over the floor, a reference for the wasp rows' extra.
//! - `wasp`: W daemon workers as `wasp run` wires them (`Daemon::new`, one `AfPacketGroup` per
//!   worker in a fanout group, `IoPorts`, `Worker` with `Forwarder::new(None)`), each on a
//!   thread of ours that calls `Worker::step(POLL_TIMEOUT)` in a loop (what `Worker::run`
//!   does), with the same rulesets in wasp's syntax; the empty ruleset is the chain with no
//!   rules and `policy drop`. Checked through the daemon's counters (`Daemon::ruleset`, the
//!   workers' counts summed): the final rule counted every packet wasp received, the 100 rules
//!   none.
//!
//! The receiving threads read their own CPU clock when the main thread asks (before the
//! measured packets and after the last one arrived): their CPU ns per packet received is the
//! receive loop, classification and the syscalls, not the kernel's receive (that is in the
//! sender's). Mpps: packets received over the span from the first to the last received after
//! the first mark. Drops: packets sent but not received by the loop (the kernel's `tp_drops`,
//! ring full, in parentheses). ksoftirqd's CPU over the run is reported: when it is not about
//! zero, part of the receive ran outside the sender and the sender's figure understates it.
//!
//! - `wasp counter drop scraped`: the `counter drop` workers while a thread renders the
//!   metrics endpoint's text (`wasp::daemon::metrics`, as `wasp run --metrics` serves it)
//!   every 100 ms; table (c) sets them against the same workers unscraped.
//!
//! Medians over `--runs` rounds; "extra" figures are medians over rounds of (variant −
//! baseline of the same round), which cancels load that changes between rounds.
//!
//! `cargo run --release -p wasp-perf --bin e2e -- [--packets N] [--runs R] [--workers 1,2]
//! [--rx tpacket|multishot] [--rules 100] [--poll-min M]` (needs root). CI smoke mode (a few
//! seconds): `--packets 20000 --runs 1`. `--poll-min 1` is a diagnostic: the workers' `poll`
//! asks `wasp-io` for at least 1 frame instead of `MAX_VECTOR` (through a `PortGroup` wrapper), which
//! avoids the TPACKET_V3 wait that stalls the daemon's workers (see perf/RESULTS.md).

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use wasp::daemon::events::EventBus;
use wasp::daemon::live::IoPorts;
use wasp::daemon::mailbox::Mailbox;
use wasp::daemon::state::Daemon;
use wasp::daemon::stats::WorkerStats;
use wasp::daemon::worker::{Clock, POLL_TIMEOUT, Worker, WorkerLinks};
use wasp_gateway::Forwarder;
use wasp_io::{
    AfPacketGroup, FanoutMode, FanoutSpec, Frame, IoError, PortGroup, PortInfo, PortStats,
    RingConfig, RxMode, TxSide, in_netns,
};
use wasp_ruleset::model::Stmt;
use wasp_sets::perfcases::{CASES, Kind};

/// Prefix of the namespaces this benchmark creates.
const NETNS_PREFIX: &str = "wasp-e2e-";
/// Frames sent (and received) before each measured run.
const WARMUP: u64 = 4096;
/// Frame size, bytes (without FCS).
const FRAME: usize = 64;
/// Flows (source ports) in the frames.
const FLOWS: u16 = 64;
/// Receiving veth end (the ingress chain's device, the ports' device).
const RX_DEV: &str = "if1";
/// Sending veth end.
const TX_DEV: &str = "if0";
/// Fanout group id of the receivers of one run (per namespace, so any id does).
const FANOUT_ID: u16 = 7;
/// How long after the sender finished the main thread waits for frames still arriving.
const IDLE: Duration = Duration::from_millis(300);

#[derive(Parser, Debug)]
#[command(about = "wasp end to end on a veth pair: I/O floor and the ruleset's added cost")]
struct Args {
    /// Frames per measured run.
    #[arg(long, default_value_t = 1_000_000)]
    packets: u64,
    /// Rounds (each runs every variant); medians are printed.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Worker (and floor receiver) counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    workers: Vec<usize>,
    /// AF_PACKET receive path of the ports: tpacket (the daemon's default) or multishot.
    #[arg(long, default_value = "tpacket")]
    rx: String,
    /// Linear rules before the final one.
    #[arg(long, default_value_t = 100)]
    rules: usize,
    /// Diagnostic: the `min` the workers' `poll` passes to `wasp-io` (default: the worker's
    /// own, `MAX_VECTOR`), through a `PortGroup` wrapper; the floor loop's too (default 64).
    #[arg(long)]
    poll_min: Option<usize>,
    /// Diagnostic (for `perf record`): run only the variants whose label contains this text
    /// (e.g. `wasp empty`, `net,port set`, `floor`); per-round lines only, no tables.
    #[arg(long)]
    only: Option<String>,
}

type Res<T> = Result<T, String>;

/// A ruleset (the chain's rules; the kernel's and wasp's baselines differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rules {
    /// Kernel: `counter drop`. wasp: no rules, `policy drop`.
    Base,
    /// wasp only: `counter drop`, the kernel's baseline (the counter served by the counter
    /// plugin), so that (b) can also be taken over the same baseline on both sides.
    Counter,
    /// `--rules` rules that match nothing, then `counter drop`.
    Linear,
    /// `ip daddr . udp dport @test counter drop`.
    Set,
}

/// One variant of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// nft in the kernel's netdev ingress hook, no socket.
    Kernel(Rules),
    /// The bare `wasp-io` receive loop on N threads.
    Floor(usize),
    /// The bare receive loop on N threads reading each frame's EtherType, IPv4 protocol and
    /// UDP destination port: the least any classifier reads of a frame.
    Touch(usize),
    /// N wasp daemon workers.
    Wasp(Rules, usize),
    /// N wasp daemon workers while a thread renders the metrics endpoint's text every
    /// [`SCRAPE_EVERY`] (`wasp run --metrics`).
    Scraped(Rules, usize),
}

/// How often the scraped variant renders the metrics text (Prometheus scrapes every 15 s by
/// default: this is 150 times that).
const SCRAPE_EVERY: Duration = Duration::from_millis(100);

/// One run's figures.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    /// Packets received per second of the receive span, millions (kernel: sent per second).
    mpps: f64,
    /// Receiving threads' CPU ns per packet received (summed over threads; 0 for the kernel).
    rx_ns: f64,
    /// Sending thread's CPU ns per packet sent (includes the kernel's receive).
    tx_ns: f64,
    /// Packets sent but not received (kernel: not counted by the final rule).
    drops: u64,
    /// The kernel's ring drops (`tp_drops`, or ENOBUFS re-arms for multishot) over the
    /// whole run, warm-up included.
    kernel_drops: u64,
    /// ksoftirqd CPU ns per packet over the run.
    softirqd_ns: f64,
    /// wasp: packets per vector the workers classified over the run (warm-up included).
    vector: f64,
}

fn main() {
    let args = Args::parse();
    if !sys::is_root() {
        eprintln!("e2e: needs root (network namespaces, veth, AF_PACKET, nft)");
        std::process::exit(2);
    }
    if let Err(e) = run(&args) {
        eprintln!("e2e: {e}");
        std::process::exit(1);
    }
}

fn rx_mode(args: &Args) -> Res<RxMode> {
    match args.rx.as_str() {
        "tpacket" => Ok(RxMode::TpacketV3),
        "multishot" => Ok(RxMode::Multishot),
        m => Err(format!("unknown --rx {m:?} (tpacket, multishot)")),
    }
}

fn run(args: &Args) -> Res<()> {
    let mode = rx_mode(args)?;
    if args.packets == 0 || args.runs == 0 || args.workers.is_empty() {
        return Err("--packets, --runs and --workers must be at least 1".into());
    }
    if args.workers.iter().any(|&w| w == 0 || w > 16) {
        return Err("--workers: counts 1..=16".into());
    }
    wasp_perf::netns::remove_stale(NETNS_PREFIX);
    let frames: Vec<Vec<u8>> = (0..FLOWS).map(frame).collect();
    let set = set_elements();
    // Both rulesets parse and compile in wasp before anything runs.
    for r in [Rules::Base, Rules::Counter, Rules::Linear, Rules::Set] {
        let text = wasp_ruleset(r, args.rules, &set);
        let parsed = wasp_ruleset::parse_str(&text, "e2e.nft").map_err(|e| e.to_string())?;
        wasp_core::Engine::compile(&parsed).map_err(|e| e.to_string())?;
    }
    let mut variants = vec![
        Variant::Kernel(Rules::Base),
        Variant::Kernel(Rules::Linear),
        Variant::Kernel(Rules::Set),
    ];
    for &w in &args.workers {
        variants.extend([
            Variant::Floor(w),
            Variant::Touch(w),
            Variant::Wasp(Rules::Base, w),
            Variant::Wasp(Rules::Counter, w),
            Variant::Wasp(Rules::Linear, w),
            Variant::Wasp(Rules::Set, w),
            Variant::Scraped(Rules::Counter, w),
        ]);
    }
    if let Some(only) = &args.only {
        variants.retain(|v| label(*v, args.rules).contains(only.as_str()));
        if variants.is_empty() {
            return Err(format!("--only {only:?}: no variant's label contains it"));
        }
    }
    let ksoftirqd = ksoftirqd_pids();
    println!(
        "wasp end to end: veth, {} frames of {FRAME} B per run ({FLOWS} flows), {} rounds, \
         medians; rx {}, workers {:?}, {} linear rules, set net,port ({} elements)",
        args.packets,
        args.runs,
        args.rx,
        args.workers,
        args.rules,
        set.len()
    );
    if let Some(m) = args.poll_min {
        println!("diagnostic: the workers' poll waits for {m} frames, not MAX_VECTOR");
    }
    println!("load average at start: {}", load());
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); variants.len()];
    let mut n = 0;
    for round in 0..args.runs {
        // The kernel's topology of this round: the table (with the set) loaded once.
        let ktopo = topo(n)?;
        n += 1;
        ktopo.nft(&kernel_table(&set))?;
        let ksender =
            sys::Sender::open_in(&ktopo.tx, TX_DEV).map_err(|e| format!("sender: {e}"))?;
        for i in 0..variants.len() {
            let v = (i + round) % variants.len();
            let s = match variants[v] {
                Variant::Kernel(r) => {
                    measure_kernel(&ktopo, &ksender, r, args, &frames, &ksoftirqd)?
                }
                Variant::Floor(w) => {
                    let t = topo(n)?;
                    n += 1;
                    measure_rx(&t, Rx::Floor, w, mode, args, &frames, &set, &ksoftirqd)?
                }
                Variant::Touch(w) => {
                    let t = topo(n)?;
                    n += 1;
                    measure_rx(&t, Rx::Touch, w, mode, args, &frames, &set, &ksoftirqd)?
                }
                Variant::Wasp(r, w) => {
                    let t = topo(n)?;
                    n += 1;
                    measure_rx(
                        &t,
                        Rx::Wasp(r, false),
                        w,
                        mode,
                        args,
                        &frames,
                        &set,
                        &ksoftirqd,
                    )?
                }
                Variant::Scraped(r, w) => {
                    let t = topo(n)?;
                    n += 1;
                    measure_rx(
                        &t,
                        Rx::Wasp(r, true),
                        w,
                        mode,
                        args,
                        &frames,
                        &set,
                        &ksoftirqd,
                    )?
                }
            };
            println!(
                "round {round} {:<22} {:.3} Mpps, rx {:.0} ns/pkt, tx {:.0} ns/pkt, drops {} \
                 (kernel {}), ksoftirqd {:.0} ns/pkt, {:.1} packets per vector",
                label(variants[v], args.rules),
                s.mpps,
                s.rx_ns,
                s.tx_ns,
                s.drops,
                s.kernel_drops,
                s.softirqd_ns,
                s.vector
            );
            samples[v].push(s);
        }
    }
    println!("load average at end: {}", load());
    if args.only.is_none() {
        report(args, &variants, &samples);
    }
    Ok(())
}

/// The tables.
fn report(args: &Args, variants: &[Variant], samples: &[Vec<Sample>]) {
    let idx = |v: Variant| variants.iter().position(|x| *x == v).expect("variant");
    let med = |v: Variant, f: fn(&Sample) -> f64| median(samples[idx(v)].iter().map(f).collect());
    // Median over rounds of (variant - base) for the metric `f`.
    let extra = |v: Variant, base: Variant, f: fn(&Sample) -> f64| {
        median(
            samples[idx(v)]
                .iter()
                .zip(&samples[idx(base)])
                .map(|(a, b)| f(a) - f(b))
                .collect(),
        )
    };
    let max_drops = |v: Variant| samples[idx(v)].iter().map(|s| s.drops).max().unwrap_or(0);
    let max_kdrops = |v: Variant| {
        samples[idx(v)]
            .iter()
            .map(|s| s.kernel_drops)
            .max()
            .unwrap_or(0)
    };
    println!();
    println!(
        "| variant | Mpps | receiving threads CPU ns/pkt | sending thread CPU ns/pkt (incl. the kernel's receive) | sum | drops, max over runs (ring) | ksoftirqd ns/pkt |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for &v in variants {
        println!(
            "| {} | {:.3} | {:.0} | {:.0} | {:.0} | {} ({}) | {:.0} |",
            label(v, args.rules),
            med(v, |s| s.mpps),
            med(v, |s| s.rx_ns),
            med(v, |s| s.tx_ns),
            med(v, |s| s.rx_ns + s.tx_ns),
            max_drops(v),
            max_kdrops(v),
            med(v, |s| s.softirqd_ns),
        );
    }

    println!();
    println!(
        "(a) I/O floor: wasp, empty ruleset, against the bare receive loop (target: within 10 %)"
    );
    println!();
    println!(
        "| workers | floor Mpps | wasp Mpps | floor rx CPU ns/pkt | wasp rx CPU ns/pkt | wasp − floor, rx | floor reading headers − floor, rx | wasp / floor, rx | floor sum ns/pkt | wasp sum ns/pkt | wasp / floor, sum | drops wasp (floor) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &w in &args.workers {
        let (f, e) = (Variant::Floor(w), Variant::Wasp(Rules::Base, w));
        let ratio = |g: fn(&Sample) -> f64| {
            median(
                samples[idx(e)]
                    .iter()
                    .zip(&samples[idx(f)])
                    .map(|(a, b)| g(a) / g(b))
                    .collect(),
            )
        };
        let t = Variant::Touch(w);
        let touch = if samples[idx(t)].is_empty() {
            "-".to_string()
        } else {
            format!("{:+.0}", extra(t, f, |s| s.rx_ns))
        };
        println!(
            "| {w} | {:.3} | {:.3} | {:.0} | {:.0} | {:+.0} | {touch} | {:.2} | {:.0} | {:.0} | {:.2} | {} ({}) |",
            med(f, |s| s.mpps),
            med(e, |s| s.mpps),
            med(f, |s| s.rx_ns),
            med(e, |s| s.rx_ns),
            extra(e, f, |s| s.rx_ns),
            ratio(|s| s.rx_ns),
            med(f, |s| s.rx_ns + s.tx_ns),
            med(e, |s| s.rx_ns + s.tx_ns),
            ratio(|s| s.rx_ns + s.tx_ns),
            max_drops(e),
            max_drops(f),
        );
    }

    println!();
    println!(
        "(b) the ruleset's added CPU ns per packet: wasp (workers, over its empty ruleset, and over \
         its own `counter drop`, the kernel's baseline) against the kernel (sending thread, over \
         counter drop); target: at most a third"
    );
    println!();
    let mut head = "| ruleset | kernel extra ns/pkt |".to_string();
    let mut rule = "|---|---:|".to_string();
    for &w in &args.workers {
        head += &format!(
            " wasp extra over empty, {w}w | wasp / kernel | wasp extra over counter drop, {w}w | wasp / kernel |"
        );
        rule += "---:|---:|---:|---:|";
    }
    head += " drops wasp (max over runs) |";
    rule += "---|";
    println!("{head}");
    println!("{rule}");
    for r in [Rules::Linear, Rules::Set] {
        let k = extra(Variant::Kernel(r), Variant::Kernel(Rules::Base), |s| {
            s.tx_ns
        });
        let mut line = format!("| {} | {k:+.0} |", rules_name(r, args.rules));
        let mut drops = Vec::new();
        for &w in &args.workers {
            let x = extra(Variant::Wasp(r, w), Variant::Wasp(Rules::Base, w), |s| {
                s.rx_ns
            });
            let c = extra(Variant::Wasp(r, w), Variant::Wasp(Rules::Counter, w), |s| {
                s.rx_ns
            });
            line += &format!(" {x:+.1} | {:.3} | {c:+.1} | {:.3} |", x / k, c / k);
            drops.push(format!("{w}w: {}", max_drops(Variant::Wasp(r, w))));
        }
        line += &format!(" {} |", drops.join(", "));
        println!("{line}");
    }

    println!();
    println!(
        "(c) the metrics endpoint: `counter drop` with its text rendered every {} ms against \
         the same without (workers' CPU ns per packet; target: at most 1 % more)",
        SCRAPE_EVERY.as_millis()
    );
    println!();
    println!(
        "| workers | not scraped rx ns/pkt | scraped rx ns/pkt | scraped − not | scraped / not | drops scraped |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for &w in &args.workers {
        let (plain, scraped) = (
            Variant::Wasp(Rules::Counter, w),
            Variant::Scraped(Rules::Counter, w),
        );
        let ratio = median(
            samples[idx(scraped)]
                .iter()
                .zip(&samples[idx(plain)])
                .map(|(a, b)| a.rx_ns / b.rx_ns)
                .collect(),
        );
        println!(
            "| {w} | {:.1} | {:.1} | {:+.1} | {ratio:.3} | {} |",
            med(plain, |s| s.rx_ns),
            med(scraped, |s| s.rx_ns),
            extra(scraped, plain, |s| s.rx_ns),
            max_drops(scraped),
        );
    }
}

fn rules_name(r: Rules, n: usize) -> String {
    match r {
        Rules::Base => "base".into(),
        Rules::Counter => "counter drop".into(),
        Rules::Linear => format!("{n} linear rules"),
        Rules::Set => "net,port set (1001)".into(),
    }
}

fn label(v: Variant, n: usize) -> String {
    match v {
        Variant::Kernel(Rules::Base) => "kernel counter drop".into(),
        Variant::Kernel(r) => format!("kernel {}", rules_name(r, n)),
        Variant::Floor(w) => format!("floor, {w} rx"),
        Variant::Touch(w) => format!("floor reading headers, {w} rx"),
        Variant::Wasp(Rules::Base, w) => format!("wasp empty, {w}w"),
        Variant::Wasp(r, w) => format!("wasp {}, {w}w", rules_name(r, n)),
        Variant::Scraped(r, w) => format!("wasp {} scraped, {w}w", rules_name(r, n)),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// The kernel rows.

/// One kernel run: load the chain's rules, warm up, send `--packets` from this thread, check
/// the counters.
fn measure_kernel(
    topo: &Topo,
    sender: &sys::Sender,
    r: Rules,
    args: &Args,
    frames: &[Vec<u8>],
    ksoftirqd: &[u32],
) -> Res<Sample> {
    let mut text = "flush chain netdev perf in\n".to_string();
    for rule in chain_rules(r, args.rules, true) {
        text += &format!("add rule netdev perf in {rule}\n");
    }
    topo.nft(&text)?;
    sender
        .send(frames, WARMUP)
        .map_err(|e| format!("send: {e}"))?;
    let k0 = sched_ns(ksoftirqd);
    let t0 = Instant::now();
    let c0 = sys::thread_cpu_ns();
    sender
        .send(frames, args.packets)
        .map_err(|e| format!("send: {e}"))?;
    let c1 = sys::thread_cpu_ns();
    let wall = t0.elapsed().as_secs_f64();
    let k1 = sched_ns(ksoftirqd);
    let counts = topo.counters()?;
    let want = WARMUP + args.packets;
    let (last, rest) = counts.split_last().ok_or("no counter in the chain")?;
    if rest.iter().any(|&c| c != 0) {
        return Err(format!(
            "kernel {r:?}: a rule before the last counted packets"
        ));
    }
    if *last > want {
        return Err(format!(
            "kernel {r:?}: the final rule counted {last} of {want} sent: other packets reached \
             the chain"
        ));
    }
    let p = args.packets as f64;
    Ok(Sample {
        mpps: p / wall / 1e6,
        rx_ns: 0.0,
        tx_ns: (c1 - c0) as f64 / p,
        drops: want - last,
        kernel_drops: 0,
        softirqd_ns: k1.saturating_sub(k0) as f64 / p,
        vector: 0.0,
    })
}

// ---------------------------------------------------------------------------------------------
// The receiving rows: the floor loop and the wasp workers.

/// What the main thread and one receiving thread share.
#[derive(Debug, Default)]
struct Slot {
    /// The last mark this thread recorded (1: before the measured packets, 2: after).
    ack: AtomicU64,
    /// Thread CPU ns at marks 1 and 2.
    cpu: [AtomicU64; 2],
    /// Frames received at marks 1 and 2.
    rx: [AtomicU64; 2],
    /// Frames received so far.
    total: AtomicU64,
    /// First and last receive after mark 1 (ns since `Shared::t0`; first is `u64::MAX` until set).
    first: AtomicU64,
    last: AtomicU64,
}

/// What every receiving thread shares with the main thread.
#[derive(Debug)]
struct Shared {
    stop: AtomicBool,
    mark: AtomicU64,
    t0: Instant,
}

/// A receiving thread's loop: `step` until stopped, answering marks with its CPU clock.
fn rx_loop(shared: &Shared, slot: &Slot, mut step: impl FnMut() -> Res<usize>) -> Res<()> {
    slot.first.store(u64::MAX, Ordering::Relaxed);
    let mut seen = 0u64;
    let mut total = 0u64;
    while !shared.stop.load(Ordering::Acquire) {
        let m = shared.mark.load(Ordering::Acquire);
        if m != seen && (1..=2).contains(&m) {
            let k = (m - 1) as usize;
            slot.cpu[k].store(sys::thread_cpu_ns(), Ordering::Relaxed);
            slot.rx[k].store(total, Ordering::Relaxed);
            slot.ack.store(m, Ordering::Release);
            seen = m;
        }
        let n = step()?;
        if n > 0 {
            total += n as u64;
            slot.total.store(total, Ordering::Relaxed);
            if seen == 1 {
                let t = shared.t0.elapsed().as_nanos() as u64;
                if slot.first.load(Ordering::Relaxed) == u64::MAX {
                    slot.first.store(t, Ordering::Relaxed);
                }
                slot.last.store(t, Ordering::Relaxed);
            }
        }
    }
    Ok(())
}

/// Set the mark and wait until every thread recorded it.
fn mark(shared: &Shared, slots: &[Arc<Slot>], m: u64) -> Res<()> {
    shared.mark.store(m, Ordering::Release);
    let deadline = Instant::now() + Duration::from_secs(2);
    while slots.iter().any(|s| s.ack.load(Ordering::Acquire) != m) {
        if Instant::now() > deadline {
            return Err(format!("a receiving thread did not answer mark {m}"));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(())
}

fn total(slots: &[Arc<Slot>]) -> u64 {
    slots.iter().map(|s| s.total.load(Ordering::Relaxed)).sum()
}

/// What receives on `if1` in a run of [`measure_rx`].
#[derive(Debug, Clone, Copy)]
enum Rx {
    /// The bare receive loop.
    Floor,
    /// The bare receive loop reading each frame's headers ([`Variant::Touch`]).
    Touch,
    /// wasp workers running the rules, the metrics endpoint scraped or not.
    Wasp(Rules, bool),
}

/// One run with `workers` receiving threads on `if1`, as `rx` says.
#[allow(clippy::too_many_arguments)]
fn measure_rx(
    topo: &Topo,
    rx: Rx,
    workers: usize,
    mode: RxMode,
    args: &Args,
    frames: &[Vec<u8>],
    set: &[String],
    ksoftirqd: &[u32],
) -> Res<Sample> {
    let cfg = RingConfig {
        rx_mode: mode,
        ..RingConfig::default()
    };
    let fanout = FanoutSpec {
        group_id: FANOUT_ID,
        mode: FanoutMode::Hash,
    };
    let mut groups = Vec::with_capacity(workers);
    for _ in 0..workers {
        let g = in_netns(&topo.rx, || AfPacketGroup::open(&[RX_DEV], fanout, cfg))
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        groups.push(g);
    }
    let sender = sys::Sender::open_in(&topo.tx, TX_DEV).map_err(|e| format!("sender: {e}"))?;
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        mark: AtomicU64::new(0),
        t0: Instant::now(),
    });
    let slots: Vec<Arc<Slot>> = (0..workers).map(|_| Arc::new(Slot::default())).collect();

    // wasp: the daemon's control side and one bundle per worker, as `wasp run` wires them.
    let mut daemon: Option<Arc<Daemon>> = None;
    let mut bundles = Vec::new();
    let mut links = Vec::new();
    let (rules, scrape) = match rx {
        Rx::Wasp(r, s) => (Some(r), s),
        Rx::Floor | Rx::Touch => (None, false),
    };
    let touch = matches!(rx, Rx::Touch);
    if let Some(r) = rules {
        let text = wasp_ruleset(r, args.rules, set);
        let ruleset = wasp_ruleset::parse_str(&text, "e2e.nft").map_err(|e| e.to_string())?;
        let events = Arc::new(EventBus::default());
        let clock = Clock::new();
        let stop = Arc::new(AtomicBool::new(false));
        links = (0..workers)
            .map(|_| WorkerLinks {
                mailbox: Arc::new(Mailbox::default()),
                stats: Arc::new(WorkerStats::default()),
                events: events.clone(),
                stop: stop.clone(),
                clock,
                published: std::sync::Arc::default(),
            })
            .collect();
        let (d, b) = Daemon::new(ruleset, "e2e.nft".into(), links.clone(), events, clock)
            .map_err(|e| e.to_string())?;
        daemon = Some(Arc::new(d));
        bundles = b.into_iter().map(Some).collect();
    }
    // The metrics endpoint's work, in-process: render and convert every SCRAPE_EVERY until
    // the run stops (its own CPU is not the workers').
    let scraper = match (&daemon, scrape) {
        (Some(d), true) => {
            let (d, shared) = (d.clone(), shared.clone());
            Some(std::thread::spawn(move || {
                let mut n = 0u64;
                while !shared.stop.load(Ordering::Acquire) {
                    let text = wasp::daemon::metrics::render(&d, d.clock.now_ns());
                    n += wasp::daemon::metrics::prometheus_text(&text).len() as u64;
                    std::thread::sleep(SCRAPE_EVERY);
                }
                n
            }))
        }
        _ => None,
    };

    // (ring drops, packets classified by wasp, vectors) per thread.
    type Joined = Res<(u64, u64, u64)>;
    let poll_min = args.poll_min;
    let floor_min = poll_min.unwrap_or(64);
    let mut threads: Vec<std::thread::JoinHandle<Joined>> = Vec::with_capacity(workers);
    for (i, g) in groups.into_iter().enumerate() {
        let (shared, slot) = (shared.clone(), slots[i].clone());
        let t = match rules {
            None => std::thread::Builder::new()
                .name(format!("floor-{i}"))
                .spawn(move || -> Joined {
                    let mut g = g;
                    let wait = Duration::from_millis(2);
                    // Reading: EtherType, IPv4 protocol, UDP destination port.
                    let mut seen = 0u64;
                    let r = rx_loop(&shared, &slot, || {
                        g.poll(floor_min, 256, wait, &mut |fs| {
                            if touch {
                                for f in fs {
                                    let b = f.data;
                                    if let (Some(t), Some(p), Some(d)) =
                                        (b.get(12..14), b.get(23), b.get(36..38))
                                    {
                                        seen = seen.wrapping_add(u64::from(t[0] ^ *p ^ d[1]));
                                    }
                                }
                            }
                        })
                        .map_err(|e| e.to_string())
                    });
                    std::hint::black_box(seen);
                    let st = g.stats()[0];
                    r.map(|()| (st.rx_dropped, 0, 0))
                }),
            Some(_) => {
                let bundle = bundles[i].take().ok_or("no bundle")?;
                let link = links[i].clone();
                std::thread::Builder::new()
                    .name(format!("wasp-worker-{i}"))
                    .spawn(move || -> Joined {
                        let stats = link.stats.clone();
                        let ports = MinPorts {
                            inner: IoPorts::new(Box::new(g)),
                            min: poll_min,
                        };
                        let mut w = Worker::new(i, ports, bundle, Forwarder::new(None), link);
                        let r = rx_loop(&shared, &slot, || w.step(POLL_TIMEOUT));
                        let dropped: u64 = w.ports().stats().iter().map(|c| c.rx_dropped).sum();
                        let snap = stats.snapshot();
                        r.map(|()| (dropped, snap.packets, snap.vectors))
                    })
            }
        }
        .map_err(|e| format!("thread: {e}"))?;
        threads.push(t);
    }

    let result = drive(&shared, &slots, sender, frames, args, ksoftirqd);
    // The daemon's counters, read from the running workers.
    let counts = match (&result, &daemon) {
        (Ok(_), Some(d)) => Some(final_counts(d)?),
        _ => None,
    };
    shared.stop.store(true, Ordering::Release);
    if let Some(h) = scraper {
        let bytes = h.join().map_err(|_| "scraper panicked")?;
        if bytes == 0 {
            return Err("the scraper rendered nothing".into());
        }
    }
    let mut kernel_drops = 0;
    let mut classified = 0;
    let mut vectors = 0;
    for t in threads {
        let (k, c, v) = t.join().map_err(|_| "receiving thread panicked")??;
        kernel_drops += k;
        classified += c;
        vectors += v;
    }
    let mut sample = result?;
    sample.kernel_drops = kernel_drops;
    sample.vector = classified as f64 / vectors.max(1) as f64;
    if let (Some(counts), Some(r)) = (counts, rules) {
        // Every packet wasp classified reached the final rule; the linear rules counted none.
        let received = total(&slots);
        if classified != received {
            return Err(format!(
                "wasp {r:?}: {classified} packets classified of {received} received"
            ));
        }
        match counts.split_last() {
            None if r == Rules::Base => {}
            Some((last, rest)) if rest.iter().all(|&c| c == 0) && *last == received => {}
            _ => {
                return Err(format!(
                    "wasp {r:?}: counters {:?} (of {} rules), {received} packets received",
                    counts.iter().filter(|&&c| c > 0).collect::<Vec<_>>(),
                    counts.len()
                ));
            }
        }
    }
    Ok(sample)
}

/// The worker's ports with `poll`'s `min` replaced when `min` is set (`--poll-min`).
struct MinPorts {
    inner: IoPorts,
    min: Option<usize>,
}

impl PortGroup for MinPorts {
    fn ports(&self) -> &[PortInfo] {
        self.inner.ports()
    }

    fn poll(
        &mut self,
        min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[Frame<'_>]),
    ) -> Result<usize, IoError> {
        self.inner
            .poll(self.min.unwrap_or(min), max, timeout, on_rx)
    }

    fn poll_tx(
        &mut self,
        min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[Frame<'_>], &mut dyn TxSide),
    ) -> Result<usize, IoError> {
        self.inner
            .poll_tx(self.min.unwrap_or(min), max, timeout, on_rx)
    }

    fn queue(&mut self, port: usize, frame: &[u8]) -> bool {
        self.inner.queue(port, frame)
    }

    fn queue_with(&mut self, port: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        self.inner.queue_with(port, len, fill)
    }

    fn flush(&mut self) -> Result<(), IoError> {
        self.inner.flush()
    }

    fn stats(&self) -> Vec<PortStats> {
        self.inner.stats()
    }
}

/// The packets counted by each `counter` of the chain, in rule order.
fn final_counts(d: &Daemon) -> Res<Vec<u64>> {
    let (r, _) = d.ruleset().map_err(|e| e.to_string())?;
    Ok(r.tables
        .iter()
        .flat_map(|t| t.chains.iter())
        .flat_map(|c| c.rules.iter())
        .flat_map(|rule| rule.stmts.iter())
        .filter_map(|s| match s {
            Stmt::Counter { packets, .. } => Some(*packets),
            _ => None,
        })
        .collect())
}

/// Warm up, mark, send the measured packets from a thread of their own, wait for them, mark.
/// The sample's ring drops are left to the caller.
fn drive(
    shared: &Shared,
    slots: &[Arc<Slot>],
    sender: sys::Sender,
    frames: &[Vec<u8>],
    args: &Args,
    ksoftirqd: &[u32],
) -> Res<Sample> {
    sender
        .send(frames, WARMUP)
        .map_err(|e| format!("send: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(3);
    while total(slots) < WARMUP && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    mark(shared, slots, 1)?;
    let base: u64 = slots.iter().map(|s| s.rx[0].load(Ordering::Relaxed)).sum();
    let done = Arc::new(AtomicBool::new(false));
    let packets = args.packets;
    let frames = frames.to_vec();
    let k0 = sched_ns(ksoftirqd);
    let tx = {
        let done = done.clone();
        std::thread::spawn(move || -> std::io::Result<u64> {
            let c0 = sys::thread_cpu_ns();
            let r = sender.send(&frames, packets);
            let c = sys::thread_cpu_ns() - c0;
            done.store(true, Ordering::Release);
            r.map(|()| c)
        })
    };
    let mut seen = total(slots);
    let mut since = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(2));
        let now = total(slots);
        if now - base >= packets {
            break;
        }
        if now != seen {
            (seen, since) = (now, Instant::now());
        } else if done.load(Ordering::Acquire) && since.elapsed() > IDLE {
            break;
        }
    }
    let tx_cpu = tx
        .join()
        .map_err(|_| "sender panicked")?
        .map_err(|e| format!("send: {e}"))?;
    mark(shared, slots, 2)?;
    let k1 = sched_ns(ksoftirqd);
    let received: u64 = slots
        .iter()
        .map(|s| s.rx[1].load(Ordering::Relaxed) - s.rx[0].load(Ordering::Relaxed))
        .sum();
    let cpu: u64 = slots
        .iter()
        .map(|s| s.cpu[1].load(Ordering::Relaxed) - s.cpu[0].load(Ordering::Relaxed))
        .sum();
    let first = slots
        .iter()
        .map(|s| s.first.load(Ordering::Relaxed))
        .min()
        .unwrap_or(u64::MAX);
    let last = slots
        .iter()
        .map(|s| s.last.load(Ordering::Relaxed))
        .max()
        .unwrap_or(0);
    let span = last.saturating_sub(first) as f64 / 1e9;
    let rcv = received.max(1) as f64;
    Ok(Sample {
        mpps: if first != u64::MAX && span > 0.0 {
            received as f64 / span / 1e6
        } else {
            0.0
        },
        rx_ns: cpu as f64 / rcv,
        tx_ns: tx_cpu as f64 / packets as f64,
        drops: packets.saturating_sub(received),
        kernel_drops: 0,
        softirqd_ns: k1.saturating_sub(k0) as f64 / packets as f64,
        vector: 0.0,
    })
}

// ---------------------------------------------------------------------------------------------
// Frames and rulesets.

/// An Ethernet/IPv4/UDP frame of [`FRAME`] bytes, 10.0.0.1:(10000 + flow) to 10.0.7.214:2002
/// (the start of the selftest `net,port` set's last element).
fn frame(flow: u16) -> Vec<u8> {
    frame_to(flow, [10, 0, 7, 214])
}

/// [`frame`] to another destination address.
fn frame_to(flow: u16, daddr: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0u8; FRAME];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (FRAME - 14) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
    ip[16..20].copy_from_slice(&daddr);
    let mut s: u32 = ip
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    ip[10..12].copy_from_slice(&(!(s as u16)).to_be_bytes());
    f[14..34].copy_from_slice(&ip);
    f[34..36].copy_from_slice(&(10000 + flow).to_be_bytes());
    f[36..38].copy_from_slice(&2002u16.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

/// The selftest's `net,port` elements as nft text (`a-b . p-q`), as `kernel-set-cost` writes
/// them.
fn set_elements() -> Vec<String> {
    let case = CASES
        .iter()
        .find(|c| c.name == "net,port")
        .expect("the net,port case");
    assert_eq!(case.fields, [Kind::Net, Kind::Port]);
    case.elements()
        .iter()
        .map(|(s, e)| {
            let a = std::net::Ipv4Addr::new(s[0], s[1], s[2], s[3]);
            let b = std::net::Ipv4Addr::new(e[0], e[1], e[2], e[3]);
            let p = u16::from_be_bytes([s[4], s[5]]);
            let q = u16::from_be_bytes([e[4], e[5]]);
            format!("{a}-{b} . {p}-{q}")
        })
        .collect()
}

/// The chain's rules: `kernel` picks the kernel's baseline (`counter drop`) for [`Rules::Base`].
fn chain_rules(r: Rules, n: usize, kernel: bool) -> Vec<String> {
    match r {
        Rules::Base if kernel => vec!["counter drop".into()],
        Rules::Base => Vec::new(),
        Rules::Counter => vec!["counter drop".into()],
        Rules::Linear => (0..n)
            .map(|i| {
                format!(
                    "ip saddr 198.51.{}.{} udp dport {} counter drop",
                    100 + i / 250,
                    1 + i % 250,
                    20000 + i
                )
            })
            .chain(std::iter::once("counter drop".to_string()))
            .collect(),
        Rules::Set => vec!["ip daddr . udp dport @test counter drop".into()],
    }
}

/// The set declaration.
fn set_decl(set: &[String]) -> String {
    format!(
        "\tset test {{ type ipv4_addr . inet_service; flags interval; elements = {{ {} }} }}\n",
        set.join(",\n\t\t")
    )
}

/// The kernel's table: the set, and the ingress chain on [`RX_DEV`] (rules added per run).
fn kernel_table(set: &[String]) -> String {
    format!(
        "table netdev perf {{\n{}\tchain in {{ type filter hook ingress device \"{RX_DEV}\" \
         priority 0; policy accept; }}\n}}\n",
        set_decl(set)
    )
}

/// wasp's ruleset for `r`: the chain with `policy drop` (so the empty one drops too), the set
/// only where a rule uses it.
fn wasp_ruleset(r: Rules, n: usize, set: &[String]) -> String {
    let mut s = "table netdev perf {\n".to_string();
    if r == Rules::Set {
        s += &set_decl(set);
    }
    s += &format!(
        "\tchain in {{\n\t\ttype filter hook ingress device \"{RX_DEV}\" priority 0; policy drop;\n"
    );
    for rule in chain_rules(r, n, false) {
        s += &format!("\t\t{rule}\n");
    }
    s += "\t}\n}\n";
    s
}

// ---------------------------------------------------------------------------------------------
// Topology, commands, ksoftirqd.

/// The rulesets of the receiving namespace's kernel.
trait KernelRules {
    /// `nft -f -` with `text` in the rx namespace.
    fn nft(&self, text: &str) -> Res<String>;
    /// The packets counted by each rule of chain `in`, in order.
    fn counters(&self) -> Res<Vec<u64>>;
}

impl KernelRules for Topo {
    fn nft(&self, text: &str) -> Res<String> {
        cmd(
            Command::new("ip").args(["netns", "exec", &self.rx, "nft", "-f", "-"]),
            Some(text),
        )
    }

    fn counters(&self) -> Res<Vec<u64>> {
        let out = cmd(
            Command::new("ip").args([
                "netns", "exec", &self.rx, "nft", "list", "chain", "netdev", "perf", "in",
            ]),
            None,
        )?;
        let mut v = Vec::new();
        let mut it = out.split_whitespace();
        while let Some(w) = it.next() {
            if w == "packets" {
                v.push(
                    it.next()
                        .and_then(|n| n.parse().ok())
                        .ok_or_else(|| format!("unparsable counter in {out:?}"))?,
                );
            }
        }
        Ok(v)
    }
}

/// This benchmark's namespaces: `wasp-e2e-<pid>-<n>-tx/-rx`.
fn topo(n: usize) -> Res<Topo> {
    Topo::create(NETNS_PREFIX, n, TX_DEV, RX_DEV)
}

// ---------------------------------------------------------------------------------------------

use wasp_perf::netns::{VethPair as Topo, cmd, ksoftirqd_pids, sched_ns};
use wasp_perf::sys;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_is_64_bytes_with_a_valid_ipv4_header_and_the_probe_key() {
        let f = frame(3);
        assert_eq!(f.len(), 64);
        let mut s: u32 = f[14..34]
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum();
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        assert_eq!(s, 0xffff);
        assert_eq!(&f[34..36], &10003u16.to_be_bytes());
        // The selftest's probe: start of the last of 1001 elements (1 + 2 * 1000 = 2001 past
        // 10.0.0.5, port 2002).
        assert_eq!(&f[30..34], &[10, 0, 7, 214]);
        assert_eq!(&f[36..38], &2002u16.to_be_bytes());
    }

    #[test]
    fn set_is_the_selftests_net_port_case() {
        let s = set_elements();
        assert_eq!(s.len(), 1001);
        assert_eq!(s[0], "10.0.0.6-10.0.0.7 . 2-3");
        assert_eq!(s[1000], "10.0.7.214-10.0.7.215 . 2002-2003");
    }

    /// The verdict of wasp's ruleset `r` (with `policy` in place of `policy drop`) for `f`.
    fn verdict(r: Rules, policy: &str, f: &[u8]) -> wasp_core::FinalVerdict {
        let text = wasp_ruleset(r, 100, &set_elements()).replace("policy drop", policy);
        let rs = wasp_ruleset::parse_str(&text, "e2e.nft").expect("parses");
        let mut e = wasp_core::Engine::compile(&rs).expect("compiles");
        let pkt = wasp_core::Packet {
            frame: f,
            meta: wasp_wire::parse(f),
            iifname: RX_DEV,
            mark: 0,
            oifname: "",
            ct: wasp_core::CtMeta::NONE,
            ct_detail: None,
            nftrace: false,
            route: None,
        };
        let mut res = wasp_core::HookResult::new();
        e.run(
            wasp_core::At::Ingress(RX_DEV),
            &[pkt],
            0,
            &mut res,
            None,
            None,
        );
        res.outcomes[0].verdict
    }

    #[test]
    fn wasp_rulesets_classify_the_frames_as_the_kernel_would() {
        use wasp_core::FinalVerdict::{Accept, Drop};
        let probe = frame(0);
        // Past the last element: 10.0.7.216 is in no element's address range.
        let miss = frame_to(0, [10, 0, 7, 216]);
        for f in [&probe, &miss] {
            assert_eq!(verdict(Rules::Base, "policy drop", f), Drop);
            assert_eq!(verdict(Rules::Base, "policy accept", f), Accept);
            assert_eq!(verdict(Rules::Linear, "policy accept", f), Drop);
        }
        assert_eq!(verdict(Rules::Set, "policy accept", &probe), Drop);
        assert_eq!(verdict(Rules::Set, "policy accept", &miss), Accept);
        let set = set_elements();
        assert_eq!(chain_rules(Rules::Linear, 100, false).len(), 101);
        assert!(chain_rules(Rules::Base, 100, false).is_empty());
        assert_eq!(chain_rules(Rules::Base, 100, true), ["counter drop"]);
        let text = wasp_ruleset(Rules::Linear, 100, &set);
        assert!(text.contains("ip saddr 198.51.100.1 udp dport 20000 counter drop"));
        assert!(text.contains("ip saddr 198.51.100.100 udp dport 20099 counter drop"));
        assert!(kernel_table(&set).contains("10.0.7.214-10.0.7.215 . 2002-2003"));
    }
}
