//! The gateway against the kernel router: CPU ns per forwarded packet of one established TCP
//! connection through a NAT router, with the same nft ruleset run by the Linux kernel
//! (`ip_forward`, nf_tables, conntrack) and by `wasp run` (AF_PACKET ports, its gateway,
//! conntrack and NAT), the slow path (the chains) and wasp's flowtable fast path, every variant in
//! the same run.
//!
//! Topology (fresh per variant and round, deleted on drop, also on error or panic): namespaces
//! `wasp-rtr-<pid>-<n>-c` (client, veth `c0`), `-r` (router, `rc0` to the client, `rs0` to the
//! server) and `-s` (server, `s0`), IPv6 off (no ND/MLD frames). Client 10.0.1.2, router
//! 10.0.1.1 / 10.0.2.1, server 10.0.2.2. No host stack takes part at the ends: the client and
//! server namespaces have no addresses, every frame at the ends is crafted and sent with AF_PACKET.
//! The router's neighbour entry for the server names a MAC that is not `s0`'s, so the forwarded
//! frames end at the server's `ip_rcv` as PACKET_OTHERHOST, the cheapest drop, after `s0`'s
//! receive counters counted them.
//!
//! The ruleset (both routers; `ruleset` writes it): `table ip nat` with `oifname "rs0"
//! masquerade` in postrouting, and `table ip filter` with a forward chain, `policy drop`, holding
//! `ct state established,related accept`, `--rules` rules `ip saddr 192.0.2.X tcp dport P drop`
//! that match nothing, and `ct state new iifname "rc0" accept`. [`DEFAULT_ORDER`] (`--order`)
//! puts the established accept first (as the issue asks) or after the rules. The fast path adds
//! `flowtable ft { hook ingress priority 0; devices = { rc0, rs0 }; }` and `ct state established
//! flow add @ft` just before the established accept.
//!
//! Variants, rotating in order from round to round:
//! - `veth send only`: client and server namespaces joined by one veth, the server's end down:
//!   the sender alone (with the carrier off the frame is dropped at the client's qdisc).
//! - `direct`: the same veth with the server's end up: send + veth + the server's receive (its
//!   OTHERHOST drop). The baseline the router rows are taken over.
//! - `kernel, no ruleset`: the router namespace forwards (`net.ipv4.ip_forward=1`, addresses on
//!   `rc0`/`rs0`, permanent neighbours), no nft table (no conntrack, no NAT): the ruleset's
//!   share is `kernel slow path` minus this.
//! - `kernel slow path`: the same plus the ruleset (`nft -f`).
//! - `kernel fast path` (`--kernel-flowtable`, off by default: this machine's kernel has no
//!   nf_flow_table): the kernel with the fast path's ruleset (a software flowtable).
//! - `wasp slow path`, `wasp fast path`: `wasp run RULESET --gateway FILE --workers W` (this
//!   build's binary, next to this one, or `--wasp`) in the router namespace, its AF_PACKET ports
//!   on `rc0`/`rs0`; the gateway file gives the router's MACs and addresses and static
//!   neighbours for client and server. The router's kernel does not forward (`ip_forward=0`, no
//!   addresses on `rc0`/`rs0`): it drops what it receives after its route lookup (no route).
//!
//! Traffic: per router variant one connection 10.0.1.2:40000 -> 10.0.2.2:80, a real handshake
//! through the router: the client sends the SYN; the server side captures it (AF_PACKET in the
//! server namespace: its source is the masqueraded address and port) and answers the SYN-ACK;
//! the client side captures that (un-NATed) and sends the ACK, which the server side sees. Then
//! per frame size (`--sizes`, Ethernet bytes without FCS) the client pushes `--packets` data
//! segments (ACK|PSH, acknowledging the server's SYN) from one thread through an AF_PACKET socket
//! with `sendmmsg`, 64 per call, as fast as one core sends (e2e's sender), cycling over up to 64
//! segments whose sequence numbers stay in the first 32 KiB of the server's 65535-byte window
//! (conntrack's window tracking takes them as retransmissions). The baselines send the same
//! frames. Forwarded packets: `s0`'s rx_packets (`/proc/net/dev` of the server namespace); for
//! wasp also checked against the daemon's `tx_packets` on `rs0` (`wasp ctl --json stats`).
//!
//! Clocks. veth delivers a frame in the sender's context (the receive softirq runs when the
//! transmit re-enables bottom halves), and this kernel has no `CONFIG_IRQ_TIME_ACCOUNTING`, so a
//! softirq is charged to the thread it interrupts: the sending thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`) holds the send and everything the kernel does with the frame
//! downstream on that CPU. ksoftirqd's CPU over the run is reported: when it is not about zero,
//! part of the receive ran outside the sender and the sender's figure understates it.
//! - kernel rows: router CPU = sender CPU per packet − the `direct` sender CPU of the same round
//!   and size: the router namespace's receive, conntrack (with the TCP checksum check), NAT,
//!   the route, the chains, the neighbour output and the transmit on `rs0`. The server's
//!   receive is in both and cancels.
//! - wasp rows: router CPU = wasp threads + kernel share. wasp threads: the CPU
//!   (`/proc/<pid>/task/<tid>/schedstat`, ns) of the daemon's `wasp-worker-*` threads and any
//!   io_uring helper threads (`iou-*`) from before the first measured packet to the poll that saw
//!   the last one arrive, per forwarded packet: the receive loop, the ruleset, conntrack, NAT,
//!   the gateway, the sends, and, since veth delivers in the sender's context, the transmit on
//!   `rs0` and the server namespace's receive. Kernel share: sender CPU per packet sent −
//!   `direct`'s: the router namespace's receive (the copy into wasp's TPACKET_V3 ring, waking
//!   the worker, and the router kernel's own IP receive and drop of every frame) minus the
//!   server's receive that `direct` holds. Per packet sent, not forwarded: a frame wasp's ring
//!   drops costs the kernel about as much (less the copy), and dividing by the forwarded ones
//!   would charge those drops to them. The parts are shifted by the server's receive (in wasp's
//!   threads, subtracted from the share); their sum is the router's work, as for the kernel. The
//!   line under the table gives one veth hop, transmit and receive (`direct` − `send only`).
//!
//! Mpps: packets forwarded per second, from the first send to the last forwarded (kernel and
//! baselines: the sender's wall time). Drops: sent − forwarded (wasp: mostly its ring full when
//! the sender outruns the worker; the ring's drops on `rc0` in parentheses). The goal ratios
//! are medians over rounds of the paired ratio wasp router CPU / kernel slow path router CPU.
//!
//! `cargo run --release -p wasp-perf --bin router -- [--packets N] [--rounds R] [--sizes 64,1500]
//! [--rules 100] [--order established-first|rules-first] [--workers 1] [--rx tpacket|multishot]
//! [--wasp PATH] [--kernel-flowtable]` (needs root and this build's `wasp`: `cargo build --release -p wasp`).
//! CI smoke mode (under 20 s): `--smoke` (20000 packets, one round).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use wasp_io::{AfPacketGroup, FanoutSpec, PortGroup, RingConfig, in_netns};
use wasp_perf::netns::{VethPair, cmd, ip, ksoftirqd_pids, remove_stale, sched_ns};
use wasp_perf::sys::{self, Sender};
use wasp_perf::traffic::build::{Net, PacketSpec, Transport, tcp_flags};

/// Prefix of the namespaces (and the temporary folder) this benchmark creates.
const NETNS_PREFIX: &str = "wasp-rtr-";
/// Where the forward chain's `ct state established,related accept` goes by default.
const DEFAULT_ORDER: Order = Order::EstablishedFirst;
/// The client's veth end (client namespace).
const C_DEV: &str = "c0";
/// The router's end towards the client.
const RC_DEV: &str = "rc0";
/// The router's end towards the server.
const RS_DEV: &str = "rs0";
/// The server's veth end (server namespace).
const S_DEV: &str = "s0";
const C_MAC: [u8; 6] = [2, 0, 0, 0, 1, 2];
const RC_MAC: [u8; 6] = [2, 0, 0, 0, 1, 1];
const RS_MAC: [u8; 6] = [2, 0, 0, 0, 2, 1];
const S_MAC: [u8; 6] = [2, 0, 0, 0, 2, 2];
/// The server's MAC as the router knows it (neighbour entry), not `s0`'s: the forwarded frames
/// are PACKET_OTHERHOST at the server and dropped first thing in `ip_rcv`.
const SINK_MAC: [u8; 6] = [2, 0, 0, 0, 2, 0x99];
const CLIENT: [u8; 4] = [10, 0, 1, 2];
const SERVER: [u8; 4] = [10, 0, 2, 2];
const CLIENT_PORT: u16 = 40000;
const SERVER_PORT: u16 = 80;
/// Initial sequence numbers of client and server.
const ISN_C: u32 = 0x1000_0000;
const ISN_S: u32 = 0x2000_0000;
/// The window both ends advertise (no window scaling).
const WINDOW: u16 = 65535;
/// The data segments' sequence numbers stay within this many bytes past the ISN.
const SEQ_SPAN: usize = 32768;
/// Frames sent (and forwarded) before each measured run.
const WARMUP: u64 = 4096;
/// How long, after the sender finished, a quiet server counter means the router is done.
const IDLE: Duration = Duration::from_millis(300);
/// How long a handshake step waits for its frame.
const STEP_WAIT: Duration = Duration::from_secs(3);

#[derive(Parser, Debug)]
#[command(
    about = "the gateway against the kernel router: CPU ns per forwarded packet, NAT + 100 \
                   forward rules, slow path and flowtable"
)]
struct Args {
    /// Data packets per measured run (per variant, frame size and round).
    #[arg(long, default_value_t = 500_000)]
    packets: u64,
    /// Rounds (each runs every variant); medians are printed.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Frame sizes, Ethernet bytes without FCS (60..=1514), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "64,1500")]
    sizes: Vec<usize>,
    /// Forward rules that match nothing.
    #[arg(long, default_value_t = 100)]
    rules: usize,
    /// Where `ct state established,related accept` goes in the forward chain.
    #[arg(long, value_enum, default_value_t = DEFAULT_ORDER)]
    order: Order,
    /// wasp's workers (`wasp run --workers`).
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// wasp's AF_PACKET receive path (`wasp run --rx`): tpacket (its default) or multishot.
    #[arg(long, default_value = "tpacket")]
    rx: String,
    /// wasp's AF_PACKET send path (`wasp run --tx`): ring (its default) or send.
    #[arg(long, default_value = "ring")]
    tx: String,
    /// The wasp binary (default: `wasp` next to this binary, i.e. this build's).
    #[arg(long)]
    wasp: Option<PathBuf>,
    /// Also the kernel with the fast path's ruleset (a software flowtable; needs nf_flow_table).
    #[arg(long)]
    kernel_flowtable: bool,
    /// CI smoke mode: 20000 packets, one round.
    #[arg(long)]
    smoke: bool,
}

/// Where the established accept goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Order {
    /// `ct state established,related accept` first, then the rules that match nothing.
    EstablishedFirst,
    /// The rules first, then the established accept (each established packet walks them all).
    RulesFirst,
}

type Res<T> = Result<T, String>;

/// One variant of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// One veth, the receiving end down.
    SendOnly,
    /// One veth, client to server: the baseline.
    Direct,
    /// The kernel forwarding, no ruleset.
    KernelBare,
    /// The kernel with the ruleset.
    Kernel,
    /// The kernel with the fast path's ruleset (flowtable).
    KernelFlow,
    /// wasp with the ruleset.
    Wasp,
    /// wasp with the fast path's ruleset (flowtable).
    WaspFlow,
}

impl Variant {
    fn label(self) -> &'static str {
        match self {
            Variant::SendOnly => "veth send only (server end down)",
            Variant::Direct => "direct client→server (baseline)",
            Variant::KernelBare => "kernel router, no ruleset",
            Variant::Kernel => "kernel router, slow path",
            Variant::KernelFlow => "kernel router, fast path (sw flowtable)",
            Variant::Wasp => "wasp router, slow path",
            Variant::WaspFlow => "wasp router, fast path (flowtable)",
        }
    }

    fn is_wasp(self) -> bool {
        matches!(self, Variant::Wasp | Variant::WaspFlow)
    }

    fn is_router(self) -> bool {
        !matches!(self, Variant::SendOnly | Variant::Direct)
    }

    fn flowtable(self) -> bool {
        matches!(self, Variant::KernelFlow | Variant::WaspFlow)
    }
}

/// One measured run (one variant, frame size and round).
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    /// Data packets sent.
    sent: u64,
    /// Of those, received on the server's veth end.
    forwarded: u64,
    /// Sending thread CPU ns over the send.
    tx_cpu: u64,
    /// wasp's worker (and io_uring helper) threads' CPU ns over the run.
    wasp_cpu: u64,
    /// Wall ns from the first send to the last forwarded packet (or the sender's end).
    span_ns: u64,
    /// ksoftirqd CPU ns over the run.
    softirqd: u64,
    /// wasp: frames its ring dropped on `rc0` over the run.
    ring_drops: u64,
}

fn main() {
    let args = Args::parse();
    if !sys::is_root() {
        eprintln!("router: needs root (network namespaces, veth, AF_PACKET, nft)");
        std::process::exit(2);
    }
    if let Err(e) = run(&args) {
        eprintln!("router: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Res<()> {
    let (packets, rounds) = if args.smoke {
        (20_000, 1)
    } else {
        (args.packets, args.rounds)
    };
    if packets == 0 || rounds == 0 || args.workers == 0 || args.sizes.is_empty() {
        return Err("--packets, --rounds, --workers and --sizes must be at least 1".into());
    }
    if !matches!(args.tx.as_str(), "ring" | "send") {
        return Err(format!("--tx {:?}: ring or send", args.tx));
    }
    if !matches!(args.rx.as_str(), "tpacket" | "multishot") {
        return Err(format!("--rx {:?}: tpacket or multishot", args.rx));
    }
    if let Some(s) = args.sizes.iter().find(|&&s| !(60..=1514).contains(&s)) {
        return Err(format!("--sizes: {s} is not in 60..=1514"));
    }
    let wasp_bin = match &args.wasp {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| format!("current_exe: {e}"))?
            .with_file_name("wasp"),
    };
    if !wasp_bin.is_file() {
        return Err(format!(
            "{}: no wasp binary (cargo build --release -p wasp, or --wasp PATH)",
            wasp_bin.display()
        ));
    }
    // Both rulesets and the gateway file parse and compile in wasp before anything runs.
    for ft in [false, true] {
        let text = ruleset(args.rules, args.order, ft);
        let parsed = wasp_ruleset::parse_str(&text, "router.nft").map_err(|e| e.to_string())?;
        wasp_core::Engine::compile(&parsed).map_err(|e| e.to_string())?;
    }
    wasp_gateway::Gateway::parse(&gateway_file(), "gateway.conf").map_err(|e| e.to_string())?;

    remove_stale(NETNS_PREFIX);
    let tmp = TempDir::create()?;
    let ksoftirqd = ksoftirqd_pids();
    let frames: Vec<Vec<Vec<u8>>> = args.sizes.iter().map(|&s| data_frames(s)).collect();
    let mut variants = vec![
        Variant::SendOnly,
        Variant::Direct,
        Variant::KernelBare,
        Variant::Kernel,
    ];
    if args.kernel_flowtable {
        variants.push(Variant::KernelFlow);
    }
    variants.extend([Variant::Wasp, Variant::WaspFlow]);

    println!(
        "router: one TCP connection through a NAT router ({} forward rules, {:?}), {packets} \
         data packets per run, frames {:?} B, {rounds} rounds, medians; wasp {} with {} worker(s), \
         rx {}",
        args.rules,
        args.order,
        args.sizes,
        wasp_bin.display(),
        args.workers,
        args.rx
    );
    println!("load average at start: {}", load());
    // samples[variant][size] = one per round.
    let mut samples: Vec<Vec<Vec<Sample>>> =
        vec![vec![Vec::new(); args.sizes.len()]; variants.len()];
    let mut n = 0usize;
    for round in 0..rounds {
        for i in 0..variants.len() {
            let vi = (i + round) % variants.len();
            let v = variants[vi];
            n += 1;
            let ctx = Ctx {
                args,
                n,
                packets,
                tmp: &tmp.0,
                wasp: &wasp_bin,
                ksoftirqd: &ksoftirqd,
            };
            let got = run_variant(&ctx, v, &frames)?;
            for (si, s) in got.into_iter().enumerate() {
                println!(
                    "round {round} {:<40} {:>4} B: {:.3} Mpps, sender {:.0} ns/pkt, wasp threads \
                     {:.0} ns/pkt, forwarded {} of {}, ring drops {}, ksoftirqd {:.0} ns/pkt",
                    v.label(),
                    args.sizes[si],
                    mpps(&s),
                    s.tx_cpu as f64 / s.sent as f64,
                    s.wasp_cpu as f64 / s.forwarded.max(1) as f64,
                    s.forwarded,
                    s.sent,
                    s.ring_drops,
                    s.softirqd as f64 / s.sent as f64,
                );
                samples[vi][si].push(s);
            }
        }
    }
    println!("load average at end: {}", load());
    report(args, &variants, &samples);
    Ok(())
}

/// What every variant's run needs.
struct Ctx<'a> {
    args: &'a Args,
    /// This run's number (namespace and file names).
    n: usize,
    packets: u64,
    tmp: &'a Path,
    wasp: &'a Path,
    ksoftirqd: &'a [u32],
}

// ---------------------------------------------------------------------------------------------
// The report.

/// Packets forwarded (send only: sent) per second of the sample's span, millions.
fn mpps(s: &Sample) -> f64 {
    let n = if s.forwarded == 0 {
        s.sent
    } else {
        s.forwarded
    };
    if s.span_ns == 0 {
        0.0
    } else {
        n as f64 / s.span_ns as f64 * 1e3
    }
}

/// Router CPU ns per packet of `s` over the `direct` sample `base` of the same round and size:
/// (wasp threads per packet forwarded, kernel share per packet sent).
fn router_parts(s: &Sample, base: &Sample) -> (f64, f64) {
    let share = s.tx_cpu as f64 / s.sent as f64 - base.tx_cpu as f64 / base.sent as f64;
    (s.wasp_cpu as f64 / s.forwarded.max(1) as f64, share)
}

fn report(args: &Args, variants: &[Variant], samples: &[Vec<Vec<Sample>>]) {
    let idx = |v: Variant| variants.iter().position(|x| *x == v).expect("variant");
    let direct = idx(Variant::Direct);
    println!();
    println!(
        "| variant | frame | Mpps | router CPU ns/pkt | = wasp threads | + kernel share | sender \
         thread ns/pkt (raw) | forwarded (median) | drops, max (ring) | ksoftirqd ns/pkt |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (si, size) in args.sizes.iter().enumerate() {
        for (vi, &v) in variants.iter().enumerate() {
            let runs = &samples[vi][si];
            let bases = &samples[direct][si];
            let med = |f: &dyn Fn(&Sample) -> f64| median(runs.iter().map(f).collect());
            let parts: Vec<(f64, f64)> = runs
                .iter()
                .zip(bases)
                .map(|(s, b)| router_parts(s, b))
                .collect();
            let (router, threads, share) = if v.is_router() {
                let r = median(parts.iter().map(|(w, k)| w + k).collect());
                let k = format!("{:.0}", median(parts.iter().map(|p| p.1).collect()));
                let w = if v.is_wasp() {
                    format!("{:.0}", median(parts.iter().map(|p| p.0).collect()))
                } else {
                    "-".into()
                };
                (format!("{r:.0}"), w, k)
            } else {
                ("-".into(), "-".into(), "-".into())
            };
            let drops = runs
                .iter()
                .map(|s| s.sent - s.forwarded.min(s.sent))
                .max()
                .unwrap_or(0);
            let ring = runs.iter().map(|s| s.ring_drops).max().unwrap_or(0);
            let fwd = median(runs.iter().map(|s| s.forwarded as f64).collect());
            println!(
                "| {} | {size} B | {:.3} | {router} | {threads} | {share} | {:.0} | {fwd:.0} | {} | {:.0} |",
                v.label(),
                med(&mpps),
                med(&|s| s.tx_cpu as f64 / s.sent as f64),
                if v == Variant::SendOnly {
                    "-".to_string()
                } else if v.is_wasp() {
                    format!("{drops} ({ring})")
                } else {
                    drops.to_string()
                },
                med(&|s| s.softirqd as f64 / s.sent as f64),
            );
        }
    }
    println!();
    let kernel = idx(Variant::Kernel);
    for (si, size) in args.sizes.iter().enumerate() {
        let bases = &samples[direct][si];
        let router = |vi: usize| -> Vec<f64> {
            samples[vi][si]
                .iter()
                .zip(bases)
                .map(|(s, b)| {
                    let (w, k) = router_parts(s, b);
                    w + k
                })
                .collect()
        };
        let k = router(kernel);
        let ratio =
            |v: Variant| median(router(idx(v)).iter().zip(&k).map(|(w, k)| w / k).collect());
        let slow = ratio(Variant::Wasp);
        let fast = ratio(Variant::WaspFlow);
        let bare = median(
            router(kernel)
                .iter()
                .zip(router(idx(Variant::KernelBare)))
                .map(|(a, b)| a - b)
                .collect(),
        );
        let hop = median(
            bases
                .iter()
                .zip(&samples[idx(Variant::SendOnly)][si])
                .map(|(d, o)| d.tx_cpu as f64 / d.sent as f64 - o.tx_cpu as f64 / o.sent as f64)
                .collect(),
        );
        let mut line = format!(
            "{size} B: wasp slow path / kernel slow path = {slow:.2} (goal ≤ 1: {}), wasp fast \
             path / kernel slow path = {fast:.2} (goal ≤ 0.33: {})",
            met(slow <= 1.0),
            met(fast <= 1.0 / 3.0)
        );
        if args.kernel_flowtable {
            let kf = ratio(Variant::KernelFlow);
            let _ = write!(line, "; kernel fast path / kernel slow path = {kf:.2}");
        }
        println!("{line}");
        println!(
            "{size} B: the kernel ruleset's share (slow path − no ruleset) {bare:+.0} ns/pkt; one \
             veth hop into the server (direct − send only: transmit and the server's receive) \
             {hop:.0} ns/pkt: wasp's threads pay it on {RS_DEV}, and its kernel share is net of \
             the server's receive"
        );
    }
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "not met" }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// One variant: its topology, the handshake, a run per frame size.

fn run_variant(ctx: &Ctx<'_>, v: Variant, frames: &[Vec<Vec<u8>>]) -> Res<Vec<Sample>> {
    if !v.is_router() {
        let pair = VethPair::create(NETNS_PREFIX, ctx.n, C_DEV, S_DEV)?;
        ip(&["-n", &pair.tx, "link", "set", C_DEV, "address", &mac(C_MAC)])?;
        ip(&["-n", &pair.rx, "link", "set", S_DEV, "address", &mac(S_MAC)])?;
        if v == Variant::SendOnly {
            ip(&["-n", &pair.rx, "link", "set", S_DEV, "down"])?;
        }
        let sender = Sender::open_in(&pair.tx, C_DEV).map_err(|e| format!("sender: {e}"))?;
        let mut rx = RxCounter::open(&pair.rx, S_DEV)?;
        let mut out = Vec::new();
        for f in frames {
            let s = measure(ctx, &sender, f, &mut rx, None)?;
            if v == Variant::Direct && s.forwarded != s.sent {
                return Err(format!(
                    "direct: {} of {} frames reached {S_DEV}",
                    s.forwarded, s.sent
                ));
            }
            out.push(s);
        }
        return Ok(out);
    }

    let topo = Topo::create(ctx.n)?;
    let text = ruleset(ctx.args.rules, ctx.args.order, v.flowtable());
    // Declared after `topo`: dropped (stopped) before the namespaces go.
    let mut wasp = None;
    if v.is_wasp() {
        topo.sysctl("net.ipv4.ip_forward=0")?;
        let rules = ctx.tmp.join(format!("router-{}.nft", ctx.n));
        let gw = ctx.tmp.join("gateway.conf");
        std::fs::write(&rules, &text).map_err(|e| format!("{}: {e}", rules.display()))?;
        std::fs::write(&gw, gateway_file()).map_err(|e| format!("{}: {e}", gw.display()))?;
        wasp = Some(WaspRun::start(ctx, &topo.r, &rules, &gw)?);
    } else {
        topo.sysctl("net.ipv4.ip_forward=1")?;
        ip(&["-n", &topo.r, "addr", "add", "10.0.1.1/24", "dev", RC_DEV])?;
        ip(&["-n", &topo.r, "addr", "add", "10.0.2.1/24", "dev", RS_DEV])?;
        for (addr, m, dev) in [(CLIENT, C_MAC, RC_DEV), (SERVER, SINK_MAC, RS_DEV)] {
            ip(&[
                "-n",
                &topo.r,
                "neigh",
                "replace",
                &Ipv4Addr::from(addr).to_string(),
                "lladdr",
                &mac(m),
                "dev",
                dev,
                "nud",
                "permanent",
            ])?;
        }
        if v != Variant::KernelBare {
            cmd(
                Command::new("ip").args(["netns", "exec", &topo.r, "nft", "-f", "-"]),
                Some(&text),
            )
            .map_err(|e| {
                if v.flowtable() {
                    format!("{e}\n(the kernel's flowtable needs nf_flow_table)")
                } else {
                    e
                }
            })?;
        }
    }
    let sender = Sender::open_in(&topo.c, C_DEV).map_err(|e| format!("sender: {e}"))?;
    handshake(&topo, &sender).map_err(|e| match &wasp {
        Some(w) => format!("{}: {e}\n{}", v.label(), w.diagnostics()),
        None => format!("{}: {e}", v.label()),
    })?;
    if matches!(v, Variant::Kernel | Variant::KernelFlow) {
        let ct = topo.conntrack()?;
        if !ct
            .lines()
            .any(|l| l.contains("ESTABLISHED") && l.contains("dport=80"))
        {
            return Err(format!(
                "{}: no established connection in conntrack:\n{ct}",
                v.label()
            ));
        }
    }
    let mut rx = RxCounter::open(&topo.s, S_DEV)?;
    let mut out = Vec::new();
    for f in frames {
        let s = measure(ctx, &sender, f, &mut rx, wasp.as_ref())?;
        // The kernel forwards synchronously: every frame. wasp may lose some to a full ring,
        // not most.
        let floor = if v.is_wasp() {
            s.sent / 10
        } else {
            s.sent - s.sent / 1000
        };
        if s.forwarded < floor {
            let diag = wasp.as_ref().map(WaspRun::diagnostics).unwrap_or_default();
            return Err(format!(
                "{}: {} of {} data packets forwarded\n{diag}",
                v.label(),
                s.forwarded,
                s.sent
            ));
        }
        out.push(s);
    }
    match (v, &wasp) {
        (Variant::WaspFlow, Some(w)) => {
            let list = w.ctl(&["list", "flowtable", "ft"])?;
            if list.contains("(0 flows)") || !list.contains("flows)") {
                return Err(format!("wasp fast path: no flow in the flowtable:\n{list}"));
            }
        }
        (Variant::KernelFlow, _) => {
            let ct = topo.conntrack()?;
            if !ct.contains("[OFFLOAD]") {
                return Err(format!(
                    "kernel fast path: the connection is not offloaded:\n{ct}"
                ));
            }
        }
        _ => {}
    }
    if let Some(w) = wasp.take() {
        w.stop()?;
    }
    Ok(out)
}

/// Warm up, then send `ctx.packets` of `frames` from a thread of their own, wait until the
/// router is done, read the clocks and counters.
fn measure(
    ctx: &Ctx<'_>,
    sender: &Sender,
    frames: &[Vec<u8>],
    rx: &mut RxCounter,
    wasp: Option<&WaspRun>,
) -> Res<Sample> {
    let n = ctx.packets;
    sender
        .send(frames, WARMUP)
        .map_err(|e| format!("send: {e}"))?;
    settle(rx)?;
    let c0 = match wasp {
        Some(w) => Some(w.counts()?),
        None => None,
    };
    let rx0 = rx.read()?;
    let w0 = wasp.map_or(0, WaspRun::threads_ns);
    let k0 = sched_ns(ctx.ksoftirqd);
    let done = AtomicBool::new(false);
    let t0 = Instant::now();
    let (tx_cpu, wall, last, w1) =
        std::thread::scope(|sc| -> Res<(u64, Duration, Duration, u64)> {
            let tx = sc.spawn(|| {
                let c = sys::thread_cpu_ns();
                let r = sender.send(frames, n);
                let cpu = sys::thread_cpu_ns() - c;
                let wall = t0.elapsed();
                done.store(true, Ordering::Release);
                r.map(|()| (cpu, wall))
            });
            // wasp forwards from its own threads: watch the server's counter until it stops.
            let (mut seen, mut last, mut w1) = (rx0, Duration::ZERO, w0);
            if let Some(w) = wasp {
                loop {
                    std::thread::sleep(Duration::from_millis(2));
                    let now = rx.read()?;
                    if now != seen {
                        (seen, last, w1) = (now, t0.elapsed(), w.threads_ns());
                    }
                    if now - rx0 >= n
                        || (done.load(Ordering::Acquire)
                            && t0.elapsed().saturating_sub(last) > IDLE)
                    {
                        break;
                    }
                }
            }
            let (cpu, wall) = tx
                .join()
                .map_err(|_| "the sender panicked")?
                .map_err(|e| format!("send: {e}"))?;
            Ok((cpu, wall, last, w1))
        })?;
    if wasp.is_none() {
        settle(rx)?;
    }
    let k1 = sched_ns(ctx.ksoftirqd);
    let forwarded = rx.read()? - rx0;
    let mut ring_drops = 0;
    if let (Some(w), Some(c0)) = (wasp, c0) {
        let c1 = w.counts()?;
        ring_drops = c1.ring_drops - c0.ring_drops;
        let sent_by_wasp = c1.tx - c0.tx;
        // What wasp sent on rs0 is what the server's end received (nothing else sends there).
        if sent_by_wasp.abs_diff(forwarded) > forwarded / 100 + 10 {
            return Err(format!(
                "wasp sent {sent_by_wasp} frames on {RS_DEV}, {S_DEV} received {forwarded}\n{}",
                w.diagnostics()
            ));
        }
    }
    Ok(Sample {
        sent: n,
        forwarded,
        tx_cpu,
        wasp_cpu: w1 - w0,
        span_ns: if wasp.is_some() { last } else { wall }.as_nanos() as u64,
        softirqd: k1.saturating_sub(k0),
        ring_drops,
    })
}

/// Wait until the counter holds still for 20 ms (at most 3 s).
fn settle(rx: &mut RxCounter) -> Res<()> {
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut last = rx.read()?;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        let now = rx.read()?;
        if now == last {
            break;
        }
        last = now;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The connection: handshake and data frames.

/// A TCP segment's fields, read back from a frame.
#[derive(Debug, Clone, Copy)]
struct Seg {
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
}

/// The IPv4/TCP segment in an untagged Ethernet frame.
fn parse_seg(f: &[u8]) -> Option<Seg> {
    if f.len() < 54 || f[12..14] != [0x08, 0x00] || f[14] >> 4 != 4 || f[23] != 6 {
        return None;
    }
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let t = f.get(14 + ihl..14 + ihl + 20)?;
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some(Seg {
        src: f[26..30].try_into().ok()?,
        dst: f[30..34].try_into().ok()?,
        sport: u16::from_be_bytes([t[0], t[1]]),
        dport: u16::from_be_bytes([t[2], t[3]]),
        seq: be32(&t[4..8]),
        ack: be32(&t[8..12]),
        flags: t[13],
    })
}

/// An Ethernet/IPv4/TCP frame with `payload` bytes, checksums right.
#[allow(clippy::too_many_arguments)]
fn tcp_frame(
    smac: [u8; 6],
    dmac: [u8; 6],
    src: [u8; 4],
    dst: [u8; 4],
    ports: (u16, u16),
    seq: u32,
    ack: u32,
    flags: u8,
    payload: usize,
) -> Vec<u8> {
    let mut p = PacketSpec::new(
        Net::v4(Ipv4Addr::from(src), Ipv4Addr::from(dst)),
        Some(Transport::Tcp {
            sport: ports.0,
            dport: ports.1,
            flags,
            seq,
            ack,
            window: WINDOW,
        }),
    );
    p.src_mac = smac;
    p.dst_mac = dmac;
    p.payload = vec![0x61; payload];
    p.build()
}

/// A client frame to the router.
fn client_frame(seq: u32, ack: u32, flags: u8, payload: usize) -> Vec<u8> {
    tcp_frame(
        C_MAC,
        RC_MAC,
        CLIENT,
        SERVER,
        (CLIENT_PORT, SERVER_PORT),
        seq,
        ack,
        flags,
        payload,
    )
}

/// The data segments of `size`-byte frames: up to 64 consecutive ones, all within
/// [`SEQ_SPAN`] of the client's ISN, each acknowledging the server's SYN.
fn data_frames(size: usize) -> Vec<Vec<u8>> {
    let payload = size - 54;
    let count = (SEQ_SPAN / payload).clamp(1, 64);
    (0..count)
        .map(|i| {
            client_frame(
                ISN_C + 1 + (i * payload) as u32,
                ISN_S + 1,
                tcp_flags::ACK | tcp_flags::PSH,
                payload,
            )
        })
        .collect()
}

/// An AF_PACKET socket of `wasp-io` on one device, for the handshake's frames.
struct Capture(AfPacketGroup);

impl Capture {
    fn open(ns: &str, dev: &str) -> Res<Capture> {
        let g = in_netns(ns, || {
            AfPacketGroup::open(&[dev], None::<FanoutSpec>, RingConfig::default())
        })
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("capture on {dev}: {e}"))?;
        Ok(Capture(g))
    }

    /// The first TCP segment `want` takes, within [`STEP_WAIT`].
    fn wait(&mut self, what: &str, want: impl Fn(&Seg) -> bool) -> Res<Seg> {
        let deadline = Instant::now() + STEP_WAIT;
        let mut found = None;
        while found.is_none() && Instant::now() < deadline {
            self.0
                .poll(1, 64, Duration::from_millis(20), &mut |fs| {
                    for f in fs {
                        if let Some(s) = parse_seg(f.data).filter(|s| want(s)) {
                            found.get_or_insert(s);
                        }
                    }
                })
                .map_err(|e| format!("capture: {e}"))?;
        }
        found.ok_or_else(|| format!("the {what} did not arrive within {STEP_WAIT:?}"))
    }
}

/// SYN from the client, SYN-ACK from the server to the (masqueraded) source the SYN arrived
/// with, ACK from the client; each step waits for its frame at the far end.
fn handshake(topo: &Topo, client: &Sender) -> Res<()> {
    let mut at_server = Capture::open(&topo.s, S_DEV)?;
    let mut at_client = Capture::open(&topo.c, C_DEV)?;
    let server = Sender::open_in(&topo.s, S_DEV).map_err(|e| format!("server sender: {e}"))?;
    let send = |s: &Sender, f: Vec<u8>| s.send(&[f], 1).map_err(|e| format!("send: {e}"));
    send(client, client_frame(ISN_C, 0, tcp_flags::SYN, 0))?;
    let syn = at_server.wait("SYN at the server", |s| {
        s.dst == SERVER && s.dport == SERVER_PORT && s.flags == tcp_flags::SYN && s.seq == ISN_C
    })?;
    send(
        &server,
        tcp_frame(
            SINK_MAC,
            RS_MAC,
            SERVER,
            syn.src,
            (SERVER_PORT, syn.sport),
            ISN_S,
            ISN_C + 1,
            tcp_flags::SYN | tcp_flags::ACK,
            0,
        ),
    )?;
    at_client.wait("SYN-ACK at the client", |s| {
        s.src == SERVER
            && s.dst == CLIENT
            && s.dport == CLIENT_PORT
            && s.flags == tcp_flags::SYN | tcp_flags::ACK
            && s.ack == ISN_C + 1
    })?;
    send(
        client,
        client_frame(ISN_C + 1, ISN_S + 1, tcp_flags::ACK, 0),
    )?;
    at_server.wait("ACK at the server", |s| {
        s.dport == SERVER_PORT && s.flags == tcp_flags::ACK && s.ack == ISN_S + 1
    })?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The rulesets and the gateway file.

/// The ruleset of both routers; with `flowtable`, the fast path's.
fn ruleset(rules: usize, order: Order, flowtable: bool) -> String {
    let mut s = format!(
        "table ip nat {{\n\tchain post {{\n\t\ttype nat hook postrouting priority srcnat; policy \
         accept;\n\t\toifname \"{RS_DEV}\" masquerade\n\t}}\n}}\ntable ip filter {{\n"
    );
    if flowtable {
        let _ = writeln!(
            s,
            "\tflowtable ft {{\n\t\thook ingress priority 0; devices = {{ {RC_DEV}, {RS_DEV} }};\n\t}}"
        );
    }
    s += "\tchain forward {\n\t\ttype filter hook forward priority filter; policy drop;\n";
    let mut established = String::new();
    if flowtable {
        established += "\t\tct state established flow add @ft\n";
    }
    established += "\t\tct state established,related accept\n";
    let mut nothing = String::new();
    for i in 0..rules {
        let _ = writeln!(
            nothing,
            "\t\tip saddr 192.0.2.{} tcp dport {} drop",
            i % 250 + 1,
            1000 + i
        );
    }
    match order {
        Order::EstablishedFirst => s = s + &established + &nothing,
        Order::RulesFirst => s = s + &nothing + &established,
    }
    let _ = writeln!(s, "\t\tct state new iifname \"{RC_DEV}\" accept\n\t}}\n}}");
    s
}

/// wasp's gateway file: the router's devices and addresses, the client's and server's MACs.
fn gateway_file() -> String {
    format!(
        "# router benchmark: client 10.0.1.2 on {RC_DEV}, server 10.0.2.2 on {RS_DEV}\n\
         device {RC_DEV} mac {}\ndevice {RS_DEV} mac {}\n\
         address {RC_DEV} 10.0.1.1/24\naddress {RS_DEV} 10.0.2.1/24\n\
         neighbour {} lladdr {} dev {RC_DEV}\nneighbour {} lladdr {} dev {RS_DEV}\n",
        mac(RC_MAC),
        mac(RS_MAC),
        Ipv4Addr::from(CLIENT),
        mac(C_MAC),
        Ipv4Addr::from(SERVER),
        mac(SINK_MAC),
    )
}

fn mac(m: [u8; 6]) -> String {
    m.map(|b| format!("{b:02x}")).join(":")
}

// ---------------------------------------------------------------------------------------------
// Topology, counters, the wasp daemon.

/// Client, router and server namespaces `wasp-rtr-<pid>-<n>-c|r|s`, joined by the veths
/// `c0`-`rc0` and `rs0`-`s0` (MACs set, up), IPv6 off. Deleted on drop.
#[derive(Debug)]
struct Topo {
    c: String,
    r: String,
    s: String,
}

impl Topo {
    fn create(n: usize) -> Res<Topo> {
        let base = format!("{NETNS_PREFIX}{}-{n}", std::process::id());
        let t = Topo {
            c: format!("{base}-c"),
            r: format!("{base}-r"),
            s: format!("{base}-s"),
        };
        // From here on, dropping `t` (on any error) deletes what exists.
        for ns in [&t.c, &t.r, &t.s] {
            ip(&["netns", "add", ns])?;
            ip(&[
                "netns",
                "exec",
                ns,
                "sysctl",
                "-q",
                "-w",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ])?;
        }
        ip(&[
            "link", "add", C_DEV, "netns", &t.c, "type", "veth", "peer", "name", RC_DEV, "netns",
            &t.r,
        ])?;
        ip(&[
            "link", "add", RS_DEV, "netns", &t.r, "type", "veth", "peer", "name", S_DEV, "netns",
            &t.s,
        ])?;
        for (ns, dev, m) in [
            (&t.c, C_DEV, C_MAC),
            (&t.r, RC_DEV, RC_MAC),
            (&t.r, RS_DEV, RS_MAC),
            (&t.s, S_DEV, S_MAC),
        ] {
            ip(&["-n", ns, "link", "set", dev, "address", &mac(m), "up"])?;
        }
        Ok(t)
    }

    /// `sysctl -w` in the router namespace.
    fn sysctl(&self, kv: &str) -> Res<()> {
        ip(&["netns", "exec", &self.r, "sysctl", "-q", "-w", kv])
    }

    /// The router namespace's conntrack table.
    fn conntrack(&self) -> Res<String> {
        cmd(
            Command::new("ip").args(["netns", "exec", &self.r, "cat", "/proc/net/nf_conntrack"]),
            None,
        )
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        for ns in [&self.c, &self.r, &self.s] {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// A device's rx_packets, from `/proc/net/dev` opened in its namespace (the open file keeps
/// the namespace; each read starts over).
struct RxCounter {
    file: File,
    dev: String,
}

impl RxCounter {
    fn open(ns: &str, dev: &str) -> Res<RxCounter> {
        let file = in_netns(ns, || File::open("/proc/thread-self/net/dev"))
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("/proc/thread-self/net/dev in {ns}: {e}"))?;
        let mut c = RxCounter {
            file,
            dev: dev.to_string(),
        };
        c.read()?;
        Ok(c)
    }

    fn read(&mut self) -> Res<u64> {
        let mut text = String::new();
        self.file
            .seek(SeekFrom::Start(0))
            .and_then(|_| self.file.read_to_string(&mut text))
            .map_err(|e| format!("/proc/net/dev: {e}"))?;
        let want = format!("{}:", self.dev);
        text.lines()
            .find_map(|l| l.trim_start().strip_prefix(want.as_str()))
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("no rx_packets of {} in /proc/net/dev", self.dev))
    }
}

/// The daemon's counters this benchmark checks.
#[derive(Debug, Clone, Copy)]
struct WaspCounts {
    /// Frames sent on `rs0`, all workers.
    tx: u64,
    /// Frames the ring dropped on `rc0`, all workers.
    ring_drops: u64,
}

/// `wasp run` in the router namespace; stopped (SIGTERM, then SIGKILL) on drop.
struct WaspRun {
    child: Child,
    bin: PathBuf,
    sock: PathBuf,
    log: PathBuf,
    /// The daemon's pid (`ip netns exec` execs it: the child's).
    pid: u32,
}

impl WaspRun {
    fn start(ctx: &Ctx<'_>, ns: &str, rules: &Path, gateway: &Path) -> Res<WaspRun> {
        let sock = ctx.tmp.join(format!("wasp-{}.sock", ctx.n));
        let log = ctx.tmp.join(format!("wasp-{}.log", ctx.n));
        let out = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(ctx.wasp)
            .arg("run")
            .arg(rules)
            .arg("--gateway")
            .arg(gateway)
            .arg("--socket")
            .arg(&sock)
            .args(["--workers", &ctx.args.workers.to_string()])
            .args(["--rx", &ctx.args.rx])
            .args(["--tx", &ctx.args.tx])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("ip netns exec {ns} {}: {e}", ctx.wasp.display()))?;
        let pid = child.id();
        let mut w = WaspRun {
            child,
            bin: ctx.wasp.to_path_buf(),
            sock,
            log,
            pid,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !w.sock.exists() {
            if Instant::now() > deadline || w.child.try_wait().ok().flatten().is_some() {
                return Err(format!("wasp run did not start:\n{}", w.log_text()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() != "wasp" {
            return Err(format!("pid {pid} is {comm:?}, not wasp"));
        }
        // The control socket comes up just before the workers start.
        while w.packet_threads().is_empty() {
            if Instant::now() > deadline {
                return Err(format!("wasp {pid} has no wasp-worker thread"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(w)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `wasp ctl --socket S ARGS`.
    fn ctl(&self, args: &[&str]) -> Res<String> {
        cmd(
            Command::new(&self.bin)
                .arg("ctl")
                .arg("--socket")
                .arg(&self.sock)
                .args(args),
            None,
        )
    }

    fn counts(&self) -> Res<WaspCounts> {
        let text = self.ctl(&["--json", "stats"])?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("wasp ctl stats: {e}: {text}"))?;
        let ports = v["ports"].as_array().ok_or("wasp ctl stats: no ports")?;
        let sum = |dev: &str, key: &str| -> u64 {
            ports
                .iter()
                .filter(|p| {
                    p["name"]
                        .as_str()
                        .is_some_and(|n| n.split('@').next() == Some(dev))
                })
                .filter_map(|p| p[key].as_u64())
                .sum()
        };
        Ok(WaspCounts {
            tx: sum(RS_DEV, "tx_packets"),
            ring_drops: sum(RC_DEV, "rx_dropped"),
        })
    }

    /// The daemon's threads that do its packet work: `wasp-worker-*` and io_uring's `iou-*`.
    fn packet_threads(&self) -> Vec<u32> {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{}/task", self.pid)) else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|tid| {
                std::fs::read_to_string(format!("/proc/{}/task/{tid}/comm", self.pid))
                    .is_ok_and(|c| c.starts_with("wasp-worker") || c.starts_with("iou-"))
            })
            .collect()
    }

    /// Summed CPU ns of [`WaspRun::packet_threads`].
    fn threads_ns(&self) -> u64 {
        sched_ns(&self.packet_threads())
    }

    /// The daemon's statistics and log, for an error message.
    fn diagnostics(&self) -> String {
        let stats = self
            .ctl(&["stats"])
            .unwrap_or_else(|e| format!("wasp ctl stats: {e}"));
        format!("wasp ctl stats:\n{stats}\nwasp log:\n{}", self.log_text())
    }

    /// SIGTERM, wait for the clean stop (5 s), else SIGKILL.
    fn terminate(&mut self) -> bool {
        if self.child.try_wait().ok().flatten().is_some() {
            return true;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }

    /// Stop the daemon; an error when it did not stop cleanly.
    fn stop(mut self) -> Res<()> {
        if self.terminate() {
            Ok(())
        } else {
            Err(format!(
                "wasp run did not stop cleanly:\n{}",
                self.log_text()
            ))
        }
    }
}

impl Drop for WaspRun {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// `/tmp/wasp-rtr-<pid>`: rulesets, gateway file, control sockets, daemon logs. Removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn create() -> Res<TempDir> {
        let p = std::env::temp_dir().join(format!("{NETNS_PREFIX}{}", std::process::id()));
        std::fs::create_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rulesets_compile_in_wasp_in_both_orders() {
        for order in [Order::EstablishedFirst, Order::RulesFirst] {
            for ft in [false, true] {
                let text = ruleset(100, order, ft);
                let rs = wasp_ruleset::parse_str(&text, "router.nft").expect("parses");
                wasp_core::Engine::compile(&rs).expect("compiles");
                assert_eq!(text.matches(" tcp dport ").count(), 100);
                assert_eq!(text.contains("flow add @ft"), ft);
            }
        }
        let first = ruleset(3, Order::EstablishedFirst, true);
        let est = first.find("established,related accept").unwrap();
        assert!(first.find("flow add @ft").unwrap() < est);
        assert!(est < first.find("192.0.2.1 ").unwrap());
        let last = ruleset(3, Order::RulesFirst, false);
        assert!(last.find("192.0.2.3 ").unwrap() < last.find("established").unwrap());
        wasp_gateway::Gateway::parse(&gateway_file(), "gw").expect("gateway file");
    }

    #[test]
    fn data_frames_have_the_size_and_stay_in_the_window() {
        for size in [60, 64, 1500, 1514] {
            let fs = data_frames(size);
            assert!(!fs.is_empty() && fs.len() <= 64);
            let mut end = 0;
            for f in &fs {
                assert_eq!(f.len(), size);
                let s = parse_seg(f).expect("TCP");
                assert_eq!(
                    (s.src, s.dst, s.sport, s.dport),
                    (CLIENT, SERVER, 40000, 80)
                );
                assert_eq!(s.ack, ISN_S + 1);
                end = s.seq - ISN_C + (size - 54) as u32;
            }
            assert!(end as usize <= SEQ_SPAN + 1 && end < u32::from(WINDOW));
        }
        let syn = parse_seg(&client_frame(ISN_C, 0, tcp_flags::SYN, 0)).unwrap();
        assert_eq!((syn.flags, syn.seq), (tcp_flags::SYN, ISN_C));
    }
}
