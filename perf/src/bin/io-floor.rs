//! The I/O floor: how fast, and at what CPU cost per packet, `wasp-io` receives 64-byte frames
//! from a veth pair, for both receive paths of `AfPacketGroup` in the same run (multishot
//! `recv` with a provided-buffer ring, and `TPACKET_V3` polled through io_uring).
//!
//! Topology (created per run, deleted on drop, also on error or panic): namespaces
//! `wasp-iofloor-<pid>-<n>-tx` (veth `if0`) and `-rx` (veth `if1`), IPv6 off (no ND/MLD frames).
//! A sender thread in the tx namespace pushes `--packets` Ethernet/IPv4/UDP frames of `--size`
//! bytes (64 flows) through an AF_PACKET socket with `sendmmsg`, 64 per call, as fast as it can;
//! veth hands each frame to the peer and the receive softirq runs in the sender's context, so
//! the sender thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`, which includes softirqs on this
//! kernel) is sender + veth + the kernel's delivery to our socket (for `TPACKET_V3`, including
//! the copy into the mmap ring). The receiving thread runs `AfPacketGroup::poll(64, 256,
//! 2 ms)` (`--min`, `--max`, `--timeout-us`) until it has every frame (or 300 ms pass without
//! one after the sender finished); its CPU time is our receive path (for multishot, including
//! the kernel's copy into our buffers, which runs as deferred task work in this thread). The
//! timeout matters for TPACKET_V3: a wait shorter than the block retire time (`--retire-ms`)
//! wakes the thread for nothing (at 200 µs, about 130 ns per packet instead of about 40).
//!
//! Printed per mode (median over `--runs` rounds, modes alternating first): Mpps over the
//! receive window, receiving thread CPU ns per packet, sending thread CPU ns per packet, their
//! sum, and drops (frames sent but not received; the kernel's `tp_drops` in parentheses).
//!
//! Then the send paths (`AfPacketGroup` queue + flush against `sendmmsg`, nothing receiving),
//! and forwarding: the receiving thread sends every frame it receives on `if1` back out of
//! `if1` with a gateway's rewrite (MACs swapped, TTL decremented with the checksum updated),
//! `RingConfig::default()` (TPACKET_V3 receive, PACKET_TX_RING send), one flush per poll, by
//! two paths in the same round (alternating first):
//! - staged: the frame is rewritten into an arena during `poll`'s callback and queued with
//!   `PortGroup::queue` after it (two copies: what the daemon did before `poll_tx`, and what it
//!   still does for a send to another group's port);
//! - direct: `PortGroup::poll_tx` lends the group's send side to the callback, whose
//!   `TxSide::queue_with` rewrites the frame straight into the TX ring frame (one copy).
//!
//! The forwarding thread's CPU covers receive, rewrite, send and the kernel's veth delivery to
//! `if0` (where nothing reads them: the sender's socket has protocol 0).
//!
//! `cargo run --release -p wasp-perf --bin io-floor -- [--packets N] [--runs R] [--size B]
//! [--mode multishot|tpacket|both] [--only rx|tx|fwd] [--min N] [--max N] [--timeout-us T]
//! [--retire-ms M]` (needs root). CI smoke mode (about a second): `--packets 20000 --runs 1`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use wasp_io::{AfPacketGroup, PortGroup, RingConfig, RxMode, TxMode, in_netns};

const NETNS_PREFIX: &str = "wasp-iofloor-";

#[derive(Parser, Debug)]
#[command(about = "wasp-io receive floor on a veth pair: multishot vs TPACKET_V3")]
struct Args {
    /// Frames per run.
    #[arg(long, default_value_t = 1_000_000)]
    packets: u64,
    /// Rounds (each runs every mode); medians are printed.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Frame size in bytes (at least 60).
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Which receive paths: multishot, tpacket or both.
    #[arg(long, default_value = "both")]
    mode: String,
    /// `poll` timeout in µs (the wait for `--min` frames).
    #[arg(long, default_value_t = 2000)]
    timeout_us: u64,
    /// `poll` min: frames to wait for.
    #[arg(long, default_value_t = 64)]
    min: usize,
    /// `poll` max: frames handed over per call.
    #[arg(long, default_value_t = 256)]
    max: usize,
    /// TPACKET_V3 block retire timeout, ms.
    #[arg(long, default_value_t = 1)]
    retire_ms: u32,
    /// Run only one section: rx (receive paths), tx (send paths) or fwd (forwarding).
    #[arg(long)]
    only: Option<String>,
}

type Res<T> = Result<T, String>;

/// One run's figures.
#[derive(Debug, Clone, Copy)]
struct Sample {
    mpps: f64,
    rx_ns: f64,
    tx_ns: f64,
    drops: u64,
    kernel_drops: u64,
}

fn main() {
    let args = Args::parse();
    if !sys::is_root() {
        eprintln!("io-floor: needs root (network namespaces, veth, AF_PACKET)");
        std::process::exit(2);
    }
    if let Err(e) = run(&args) {
        eprintln!("io-floor: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Res<()> {
    let modes: Vec<RxMode> = match args.mode.as_str() {
        "both" => vec![RxMode::Multishot, RxMode::TpacketV3],
        "multishot" => vec![RxMode::Multishot],
        "tpacket" => vec![RxMode::TpacketV3],
        m => return Err(format!("unknown --mode {m:?} (multishot, tpacket, both)")),
    };
    if args.packets == 0 || args.runs == 0 || args.size < 60 || args.size > 1514 {
        return Err("--packets and --runs at least 1, --size 60..=1514".into());
    }
    let only = args.only.as_deref();
    if !matches!(only, None | Some("rx" | "tx" | "fwd")) {
        return Err(format!("unknown --only {only:?} (rx, tx, fwd)"));
    }
    wasp_perf::netns::remove_stale(NETNS_PREFIX);
    let mut n = 0;
    if matches!(only, None | Some("rx")) {
        receive_paths(args, &modes, &mut n)?;
    }
    if matches!(only, None | Some("tx")) {
        send_paths(args, &mut n)?;
    }
    if matches!(only, None | Some("fwd")) {
        forward_paths(args, &mut n)?;
    }
    Ok(())
}

/// The receive paths' table.
fn receive_paths(args: &Args, modes: &[RxMode], n: &mut usize) -> Res<()> {
    println!(
        "wasp-io receive floor: veth, {} frames of {} B per run, {} rounds, medians; \
         poll(min {}, max {}, timeout {} µs), TPACKET_V3 retire {} ms",
        args.packets, args.size, args.runs, args.min, args.max, args.timeout_us, args.retire_ms
    );
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); modes.len()];
    for round in 0..args.runs {
        for i in 0..modes.len() {
            let m = (i + round) % modes.len();
            let s = measure(modes[m], args, *n)?;
            *n += 1;
            println!(
                "round {round} {:<10} {:.3} Mpps, rx {:.0} ns/pkt, tx {:.0} ns/pkt, drops {} \
                 (kernel {})",
                name(modes[m]),
                s.mpps,
                s.rx_ns,
                s.tx_ns,
                s.drops,
                s.kernel_drops
            );
            samples[m].push(s);
        }
    }
    println!();
    println!(
        "| rx path | Mpps | receiving thread CPU ns/pkt | sending thread CPU ns/pkt (incl. softirq) | sum | drops (kernel) |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (m, v) in modes.iter().zip(&samples) {
        let med = |f: fn(&Sample) -> f64| median(v.iter().map(f).collect());
        let drops = median(v.iter().map(|s| s.drops as f64).collect());
        let kdrops = median(v.iter().map(|s| s.kernel_drops as f64).collect());
        println!(
            "| {} | {:.3} | {:.0} | {:.0} | {:.0} | {drops:.0} ({kdrops:.0}) |",
            name(*m),
            med(|s| s.mpps),
            med(|s| s.rx_ns),
            med(|s| s.tx_ns),
            med(|s| s.rx_ns + s.tx_ns),
        );
    }
    Ok(())
}

/// The send paths' table: wasp-io's two send paths against sendmmsg, one topology per round.
fn send_paths(args: &Args, n: &mut usize) -> Res<()> {
    let kinds = [Tx::Send, Tx::Ring, Tx::Sendmmsg];
    let mut tx: Vec<Vec<(f64, f64)>> = vec![Vec::new(); kinds.len()];
    for round in 0..args.runs {
        let topo = topo(*n)?;
        *n += 1;
        let mut line = format!("round {round} send:");
        for i in 0..kinds.len() {
            let k = (i + round) % kinds.len();
            let r = measure_tx(&topo, kinds[k], args)?;
            line += &format!(" {} {:.3} Mpps {:.0} ns/pkt;", kinds[k].name(), r.0, r.1);
            tx[k].push(r);
        }
        println!("{line}");
    }
    println!();
    println!(
        "| tx path ({} B frames, 64 per batch) | Mpps | sending thread CPU ns/pkt (incl. veth and the peer's receive) |",
        args.size
    );
    println!("|---|---:|---:|");
    for (k, v) in kinds.iter().zip(&tx) {
        println!(
            "| {} | {:.3} | {:.0} |",
            k.name(),
            median(v.iter().map(|x| x.0).collect()),
            median(v.iter().map(|x| x.1).collect())
        );
    }
    Ok(())
}

/// How a forwarded frame reaches the send side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fwd {
    /// Rewritten into an arena in `poll`'s callback, queued with `PortGroup::queue` after it.
    Staged,
    /// Rewritten straight into the TX ring frame by `TxSide::queue_with` in `poll_tx`'s
    /// callback.
    Direct,
}

impl Fwd {
    fn name(self) -> &'static str {
        match self {
            Fwd::Staged => "staged (arena, then `queue`: two copies)",
            Fwd::Direct => "direct (`poll_tx` + `queue_with` into the TX ring: one copy)",
        }
    }
}

/// One forwarding run's figures.
#[derive(Debug, Clone, Copy)]
struct FwdSample {
    mpps: f64,
    fwd_ns: f64,
    tx_ns: f64,
    /// Frames sent but not received.
    drops: u64,
    /// Frames received but refused by a full send side.
    refused: u64,
}

/// The forwarding table: staged against direct, one topology per round.
fn forward_paths(args: &Args, n: &mut usize) -> Res<()> {
    let kinds = [Fwd::Staged, Fwd::Direct];
    let mut v: Vec<Vec<FwdSample>> = vec![Vec::new(); kinds.len()];
    for round in 0..args.runs {
        let topo = topo(*n)?;
        *n += 1;
        let mut line = format!("round {round} forward:");
        for i in 0..kinds.len() {
            let k = (i + round) % kinds.len();
            let r = measure_fwd(&topo, kinds[k], args)?;
            line += &format!(
                " {:?} {:.3} Mpps {:.0} ns/pkt (sender {:.0}), drops {}, refused {};",
                kinds[k], r.mpps, r.fwd_ns, r.tx_ns, r.drops, r.refused
            );
            v[k].push(r);
        }
        println!("{line}");
    }
    println!();
    println!(
        "| forward path ({} B frames, poll({}, {}, {} µs), flush per poll) | Mpps | forwarding thread CPU ns/pkt | sending thread CPU ns/pkt | drops | refused |",
        args.size, args.min, args.max, args.timeout_us
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (k, v) in kinds.iter().zip(&v) {
        let med = |f: fn(&FwdSample) -> f64| median(v.iter().map(f).collect());
        println!(
            "| {} | {:.3} | {:.0} | {:.0} | {:.0} | {:.0} |",
            k.name(),
            med(|s| s.mpps),
            med(|s| s.fwd_ns),
            med(|s| s.tx_ns),
            med(|s| s.drops as f64),
            med(|s| s.refused as f64),
        );
    }
    let diffs: Vec<f64> = v[0]
        .iter()
        .zip(&v[1])
        .map(|(s, d)| s.fwd_ns - d.fwd_ns)
        .collect();
    println!(
        "staged − direct, forwarding thread, median of per-round differences: {:.1} ns/pkt",
        median(diffs)
    );
    Ok(())
}

/// A gateway's rewrite of `src` into `dst` (same length): MAC addresses swapped, and for IPv4
/// the TTL decremented with the header checksum updated (RFC 1624).
fn rewrite(src: &[u8], dst: &mut [u8]) {
    dst.copy_from_slice(src);
    if src.len() < 34 {
        return;
    }
    dst[0..6].copy_from_slice(&src[6..12]);
    dst[6..12].copy_from_slice(&src[0..6]);
    if src[12..14] == [0x08, 0x00] && src[22] > 1 {
        dst[22] = src[22] - 1;
        // HC' = ~(~HC + ~m + m'), m the TTL/protocol word.
        let old = u16::from_be_bytes([src[22], src[23]]);
        let new = u16::from_be_bytes([dst[22], dst[23]]);
        let hc = u16::from_be_bytes([src[24], src[25]]);
        let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        dst[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    }
}

/// Sends `--packets` frames to `if1`, where the group forwards each back out by `kind`.
fn measure_fwd(topo: &Topo, kind: Fwd, args: &Args) -> Res<FwdSample> {
    let mut cfg = RingConfig::default();
    cfg.tpacket.retire_ms = args.retire_ms;
    let wait = Duration::from_micros(args.timeout_us);
    let mut g = in_netns(&topo.rx, || AfPacketGroup::open(&["if1"], None, cfg))
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let sender = sys::Sender::open_in(&topo.tx, "if0").map_err(|e| format!("sender: {e}"))?;
    let frames: Vec<Vec<u8>> = (0..64u16).map(|f| frame(f, args.size)).collect();
    let mut arena: Vec<u8> = Vec::with_capacity(args.max * 2048);
    let mut staged: Vec<(usize, usize)> = Vec::with_capacity(args.max);
    let (mut fwd, mut refused) = (0u64, 0u64);
    // One poll and flush; returns the frames received.
    let mut step = |g: &mut AfPacketGroup, fwd: &mut u64, refused: &mut u64| -> Res<usize> {
        let k = match kind {
            Fwd::Staged => {
                let k = g
                    .poll(args.min, args.max, wait, &mut |fs| {
                        for f in fs {
                            let a = arena.len();
                            arena.resize(a + f.data.len(), 0);
                            rewrite(f.data, &mut arena[a..]);
                            staged.push((a, arena.len()));
                        }
                    })
                    .map_err(|e| e.to_string())?;
                for &(a, b) in &staged {
                    if g.queue(0, &arena[a..b]) {
                        *fwd += 1;
                    } else {
                        *refused += 1;
                    }
                }
                staged.clear();
                arena.clear();
                k
            }
            Fwd::Direct => g
                .poll_tx(args.min, args.max, wait, &mut |fs, tx| {
                    for f in fs {
                        if tx.queue_with(0, f.data.len(), &mut |b| rewrite(f.data, b)) {
                            *fwd += 1;
                        } else {
                            *refused += 1;
                        }
                    }
                })
                .map_err(|e| e.to_string())?,
        };
        g.flush().map_err(|e| e.to_string())?;
        Ok(k)
    };
    // Arm the receive, then warm the path up (not measured).
    step(&mut g, &mut fwd, &mut refused)?;
    let warm = 2048u64;
    sender
        .send(&frames, warm)
        .map_err(|e| format!("send: {e}"))?;
    let mut got = 0u64;
    let deadline = Instant::now() + Duration::from_secs(2);
    while got < warm && Instant::now() < deadline {
        got += step(&mut g, &mut fwd, &mut refused)? as u64;
    }
    let (fwd0, refused0) = (fwd, refused);

    let done = Arc::new(AtomicBool::new(false));
    let tx_ns = Arc::new(AtomicU64::new(0));
    let packets = args.packets;
    let sender_thread = {
        let (done, tx_ns) = (done.clone(), tx_ns.clone());
        std::thread::spawn(move || -> std::io::Result<()> {
            let c0 = sys::thread_cpu_ns();
            let r = sender.send(&frames, packets);
            tx_ns.store(sys::thread_cpu_ns() - c0, Ordering::Relaxed);
            done.store(true, Ordering::Release);
            r
        })
    };
    let c0 = sys::thread_cpu_ns();
    let mut received = 0u64;
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    loop {
        let k = step(&mut g, &mut fwd, &mut refused)?;
        if k > 0 {
            let now = Instant::now();
            first.get_or_insert(now);
            last = now;
            received += k as u64;
            if received >= packets {
                break;
            }
        } else if done.load(Ordering::Acquire) && last.elapsed() > Duration::from_millis(300) {
            break;
        }
    }
    let cpu = sys::thread_cpu_ns() - c0;
    sender_thread
        .join()
        .map_err(|_| "sender panicked".to_string())?
        .map_err(|e| format!("send: {e}"))?;
    let (fwd, refused) = (fwd - fwd0, refused - refused0);
    if fwd + refused != received {
        return Err(format!(
            "{kind:?}: {received} received, {fwd} forwarded + {refused} refused"
        ));
    }
    let window = first.map_or(0.0, |f| (last - f).as_secs_f64());
    Ok(FwdSample {
        mpps: if window > 0.0 {
            received as f64 / window / 1e6
        } else {
            0.0
        },
        fwd_ns: cpu as f64 / received.max(1) as f64,
        tx_ns: tx_ns.load(Ordering::Relaxed) as f64 / packets as f64,
        drops: packets.saturating_sub(received),
        refused,
    })
}

/// A send path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tx {
    /// `AfPacketGroup` with `TxMode::Send`.
    Send,
    /// `AfPacketGroup` with `TxMode::Ring`.
    Ring,
    /// The raw `sendmmsg` sender.
    Sendmmsg,
}

impl Tx {
    fn name(self) -> &'static str {
        match self {
            Tx::Send => "wasp-io TxMode::Send (IORING_OP_SEND per frame)",
            Tx::Ring => "wasp-io TxMode::Ring (PACKET_TX_RING, one sendto per flush)",
            Tx::Sendmmsg => "sendmmsg",
        }
    }
}

/// Sends `--packets` frames from `if0` with no socket on the peer, by `kind`. Returns (Mpps,
/// thread CPU ns per packet).
fn measure_tx(topo: &Topo, kind: Tx, args: &Args) -> Res<(f64, f64)> {
    let frames: Vec<Vec<u8>> = (0..64u16).map(|f| frame(f, args.size)).collect();
    let packets = args.packets;
    if kind == Tx::Sendmmsg {
        let sender = sys::Sender::open_in(&topo.tx, "if0").map_err(|e| format!("sender: {e}"))?;
        sender
            .send(&frames, 2048)
            .map_err(|e| format!("send: {e}"))?;
        let (t0, c0) = (Instant::now(), sys::thread_cpu_ns());
        sender
            .send(&frames, packets)
            .map_err(|e| format!("send: {e}"))?;
        let (c1, dt) = (sys::thread_cpu_ns(), t0.elapsed().as_secs_f64());
        return Ok((packets as f64 / dt / 1e6, (c1 - c0) as f64 / packets as f64));
    }
    let cfg = RingConfig {
        rx_mode: RxMode::Multishot,
        tx_mode: if kind == Tx::Ring {
            TxMode::Ring
        } else {
            TxMode::Send
        },
        rx_buffers: 64,
        ..RingConfig::default()
    };
    let mut g = in_netns(&topo.tx, || AfPacketGroup::open(&["if0"], None, cfg))
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let send = |g: &mut AfPacketGroup, n: u64| -> Res<()> {
        let base = g.stats()[0];
        let mut queued = 0u64;
        while queued < n {
            let k = (n - queued).min(64);
            let mut full = false;
            for i in 0..k {
                if !g.queue(0, &frames[(i % 64) as usize]) {
                    full = true;
                    break;
                }
                queued += 1;
            }
            g.flush().map_err(|e| e.to_string())?;
            if full {
                // Every send buffer in flight: collect completions.
                g.poll(0, 0, Duration::ZERO, &mut |_| {})
                    .map_err(|e| e.to_string())?;
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let st = g.stats()[0];
            let done = st.tx_packets + st.tx_errors - base.tx_packets - base.tx_errors;
            if done >= n {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("only {done} of {n} sends completed"));
            }
            g.poll(0, 0, Duration::from_micros(100), &mut |_| {})
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    send(&mut g, 2048)?;
    let (t0, c0) = (Instant::now(), sys::thread_cpu_ns());
    let before = g.stats()[0];
    send(&mut g, packets)?;
    let (c1, dt) = (sys::thread_cpu_ns(), t0.elapsed().as_secs_f64());
    let st = g.stats()[0];
    let errors = st.tx_errors - before.tx_errors;
    if errors > 0 || st.tx_dropped > 0 {
        return Err(format!(
            "wasp-io sends: {errors} errors, {} refused",
            st.tx_dropped
        ));
    }
    Ok((packets as f64 / dt / 1e6, (c1 - c0) as f64 / packets as f64))
}

fn name(m: RxMode) -> &'static str {
    match m {
        RxMode::Multishot => "multishot",
        RxMode::TpacketV3 => "tpacket-v3",
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// One run of `mode` in a fresh topology.
fn measure(mode: RxMode, args: &Args, n: usize) -> Res<Sample> {
    let topo = topo(n)?;
    let mut cfg = RingConfig {
        rx_mode: mode,
        ..RingConfig::default()
    };
    cfg.tpacket.retire_ms = args.retire_ms;
    let wait = Duration::from_micros(args.timeout_us);
    let mut rx = in_netns(&topo.rx, || AfPacketGroup::open(&["if1"], None, cfg))
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let sender = sys::Sender::open_in(&topo.tx, "if0").map_err(|e| format!("sender: {e}"))?;
    let frames: Vec<Vec<u8>> = (0..64u16).map(|f| frame(f, args.size)).collect();
    // Arm the receive, then warm the path up (not measured).
    rx.poll(0, 0, Duration::ZERO, &mut |_| {})
        .map_err(|e| e.to_string())?;
    let warm = 2048u64;
    sender
        .send(&frames, warm)
        .map_err(|e| format!("send: {e}"))?;
    let mut got = 0u64;
    let deadline = Instant::now() + Duration::from_secs(2);
    while got < warm && Instant::now() < deadline {
        got += rx
            .poll(args.min, args.max, wait, &mut |_| {})
            .map_err(|e| e.to_string())? as u64;
    }
    let base_rx = rx.stats()[0];

    let done = Arc::new(AtomicBool::new(false));
    let tx_ns = Arc::new(AtomicU64::new(0));
    let packets = args.packets;
    let sender_thread = {
        let (done, tx_ns) = (done.clone(), tx_ns.clone());
        std::thread::spawn(move || -> std::io::Result<()> {
            let c0 = sys::thread_cpu_ns();
            let r = sender.send(&frames, packets);
            tx_ns.store(sys::thread_cpu_ns() - c0, Ordering::Relaxed);
            done.store(true, Ordering::Release);
            r
        })
    };
    let c0 = sys::thread_cpu_ns();
    let mut received = 0u64;
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    let mut bytes = 0usize;
    loop {
        let k = rx
            .poll(args.min, args.max, wait, &mut |fs| {
                for f in fs {
                    bytes += f.data.len();
                }
            })
            .map_err(|e| e.to_string())?;
        if k > 0 {
            let now = Instant::now();
            first.get_or_insert(now);
            last = now;
            received += k as u64;
            if received >= packets {
                break;
            }
        } else if done.load(Ordering::Acquire) && last.elapsed() > Duration::from_millis(300) {
            break;
        }
    }
    let rx_cpu = sys::thread_cpu_ns() - c0;
    sender_thread
        .join()
        .map_err(|_| "sender panicked".to_string())?
        .map_err(|e| format!("send: {e}"))?;
    if bytes != received as usize * args.size {
        return Err(format!(
            "received {bytes} bytes in {received} frames of {} B",
            args.size
        ));
    }
    let st = rx.stats()[0];
    let window = first.map_or(0.0, |f| (last - f).as_secs_f64());
    let rcv = received.max(1) as f64;
    Ok(Sample {
        mpps: if window > 0.0 {
            received as f64 / window / 1e6
        } else {
            0.0
        },
        rx_ns: rx_cpu as f64 / rcv,
        tx_ns: tx_ns.load(Ordering::Relaxed) as f64 / packets as f64,
        drops: packets.saturating_sub(received),
        kernel_drops: st.rx_dropped - base_rx.rx_dropped,
    })
}

/// An Ethernet/IPv4/UDP frame of `len` bytes for flow `flow` (source port).
fn frame(flow: u16, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 8, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 8, 0, 2]);
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
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

/// This benchmark's namespaces: `wasp-iofloor-<pid>-<n>-tx/-rx`, veth `if0` / `if1`.
fn topo(n: usize) -> Res<Topo> {
    Topo::create(NETNS_PREFIX, n, "if0", "if1")
}

use wasp_perf::netns::VethPair as Topo;
use wasp_perf::sys;
