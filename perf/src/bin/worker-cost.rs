//! The daemon worker's own CPU per packet, without the kernel: a `Worker` as `wasp run` wires
//! it (`Daemon::new`, `Worker::new` with `Forwarder::new(None)`, `Worker::step` in a loop)
//! over a port group in memory that hands out the same batch of 256 frames at every poll, set
//! against the bare receive loop over the same group (the `floor reading headers` loop of
//! `e2e`: each frame's EtherType, IPv4 protocol and UDP port read). The difference is what
//! `e2e`'s table (a) calls "wasp − floor" with the kernel's receive and the ring's cache
//! misses taken out: deterministic under `valgrind --tool=callgrind` (run `--variant worker`
//! and `--variant floor` and divide the difference of the totals by the packets), quiet
//! enough to time.
//!
//! Frames: `e2e`'s, Ethernet/IPv4/UDP of 64 bytes, 64 flows (10.0.0.1:10000-10063 to
//! 10.0.7.214:2002). Rulesets: `empty` (`table netdev perf`, an ingress chain on `if1` with no
//! rule and `policy drop`, as `e2e`'s), `counter` (the same chain holding `counter drop`).
//!
//! `cargo run --release -p wasp-perf --bin worker-cost -- [--packets N] [--rounds R]
//! [--variant floor|worker|both] [--rules empty|counter]`. CI smoke mode: `--packets 20000
//! --rounds 1`.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use wasp::daemon::events::EventBus;
use wasp::daemon::mailbox::Mailbox;
use wasp::daemon::state::Daemon;
use wasp::daemon::stats::WorkerStats;
use wasp::daemon::worker::{Clock, Worker, WorkerLinks};
use wasp_gateway::Forwarder;
use wasp_io::{Frame, IoError, PortGroup, PortInfo, PortStats, TxSide};
use wasp_perf::sys;
use wasp_perf::traffic::build::{Net, PacketSpec, Transport};
use wasp_plugin::HostConfig;

/// Frames per poll: the daemon's receive batch (`RX_BATCH`).
const BATCH: usize = 256;
/// Bytes per frame, as `e2e` sends.
const FRAME: usize = 64;

#[derive(Parser)]
#[command(about = "The daemon worker's own CPU per packet over a port group in memory")]
struct Args {
    /// Packets per round and variant (rounded up to whole batches of 256).
    #[arg(long, default_value_t = 2_000_000)]
    packets: u64,
    /// Rounds; medians are reported.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Which loops run (one alone is for callgrind).
    #[arg(long, value_enum, default_value_t = Variant::Both)]
    variant: Variant,
    /// The ruleset the worker runs.
    #[arg(long, value_enum, default_value_t = Rules::Empty)]
    rules: Rules,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Variant {
    Floor,
    Worker,
    Both,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Rules {
    Empty,
    Counter,
}

/// A port group of one port (`if1`) whose every poll hands out the same frames; what is sent
/// is written into a scratch buffer and dropped.
struct Loop {
    info: Vec<PortInfo>,
    frames: Vec<Vec<u8>>,
}

impl Loop {
    fn new() -> Self {
        Loop {
            info: vec![PortInfo {
                name: "if1".into(),
                ifindex: 2,
                mac: [2, 0, 0, 0, 0, 2],
                mtu: 1500,
            }],
            frames: (0..BATCH).map(|i| frame((i % 64) as u16)).collect(),
        }
    }
}

struct Discard;

impl TxSide for Discard {
    fn queue_with(&mut self, _: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        let mut b = [0u8; 2048];
        if len <= b.len() {
            fill(&mut b[..len]);
        }
        true
    }
}

impl PortGroup for Loop {
    fn ports(&self) -> &[PortInfo] {
        &self.info
    }

    fn poll(
        &mut self,
        min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[Frame<'_>]),
    ) -> Result<usize, IoError> {
        self.poll_tx(min, max, timeout, &mut |f, _| on_rx(f))
    }

    fn poll_tx(
        &mut self,
        _min: usize,
        max: usize,
        _timeout: Duration,
        on_rx: &mut dyn FnMut(&[Frame<'_>], &mut dyn TxSide),
    ) -> Result<usize, IoError> {
        let n = max.min(self.frames.len());
        let frames: Vec<Frame<'_>> = self.frames[..n]
            .iter()
            .map(|f| Frame { port: 0, data: f })
            .collect();
        on_rx(&frames, &mut Discard);
        Ok(n)
    }

    fn queue(&mut self, _: usize, _: &[u8]) -> bool {
        true
    }

    fn flush(&mut self) -> Result<(), IoError> {
        Ok(())
    }

    fn stats(&self) -> Vec<PortStats> {
        vec![PortStats::default()]
    }
}

/// An Ethernet/IPv4/UDP frame of [`FRAME`] bytes, 10.0.0.1:(10000 + flow) to 10.0.7.214:2002
/// (e2e's frames), with a valid IPv4 checksum.
fn frame(flow: u16) -> Vec<u8> {
    let net = Net::v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 7, 214));
    let udp = Transport::Udp {
        sport: 10000 + flow,
        dport: 2002,
    };
    let mut spec = PacketSpec::new(net, Some(udp));
    spec.src_mac = [0x02, 0, 0, 0, 0, 0x01];
    spec.dst_mac = [0x02, 0, 0, 0, 0, 0x02];
    spec.payload = vec![0; FRAME - 14 - 20 - 8];
    spec.build()
}

fn ruleset(r: Rules) -> String {
    let rule = match r {
        Rules::Empty => "",
        Rules::Counter => "\t\tcounter drop\n",
    };
    format!(
        "table netdev perf {{\n\tchain in {{\n\t\ttype filter hook ingress device \"if1\" \
         priority 0; policy drop;\n{rule}\t}}\n}}\n"
    )
}

/// CPU ns per packet of the bare loop: poll, read three header fields of each frame.
fn floor(batches: u64) -> f64 {
    let mut g = Loop::new();
    let mut seen = 0u64;
    let t0 = sys::thread_cpu_ns();
    for _ in 0..batches {
        g.poll(BATCH, BATCH, Duration::ZERO, &mut |fs| {
            for f in fs {
                let b = f.data;
                if let (Some(t), Some(p), Some(d)) = (b.get(12..14), b.get(23), b.get(36..38)) {
                    seen = seen.wrapping_add(u64::from(t[0] ^ *p ^ d[1]));
                }
            }
        })
        .expect("memory poll");
    }
    std::hint::black_box(seen);
    (sys::thread_cpu_ns() - t0) as f64 / (batches * BATCH as u64) as f64
}

/// CPU ns per packet of a daemon worker's `step` over the same group; checks that the worker
/// counted every packet and dropped it.
fn worker(batches: u64, rules: Rules) -> Result<f64, String> {
    let text = ruleset(rules);
    let rs = wasp_ruleset::parse_str(&text, "worker-cost.nft").map_err(|e| e.to_string())?;
    let events = Arc::new(EventBus::default());
    let clock = Clock::new();
    let stats = Arc::new(WorkerStats::default());
    let link = WorkerLinks {
        mailbox: Arc::new(Mailbox::default()),
        stats: stats.clone(),
        events: events.clone(),
        stop: Arc::new(AtomicBool::new(false)),
        clock,
        published: Arc::default(),
    };
    // A small plugin pool (no plugin here): its address-space reservation fits under valgrind.
    let host = HostConfig {
        max_instances: 4,
        ..HostConfig::default()
    };
    let (_daemon, mut bundles) = Daemon::with_host(
        rs,
        "worker-cost.nft".into(),
        vec![link.clone()],
        events,
        clock,
        host,
    )
    .map_err(|e| e.to_string())?;
    let bundle = bundles.pop().ok_or("no bundle")?;
    let mut w = Worker::new(0, Loop::new(), bundle, Forwarder::new(None), link);
    // One batch first: the allocations a worker keeps are made outside the measure.
    w.step(Duration::ZERO)?;
    let before = stats.snapshot();
    let t0 = sys::thread_cpu_ns();
    for _ in 0..batches {
        w.step(Duration::ZERO)?;
    }
    let ns = sys::thread_cpu_ns() - t0;
    let after = stats.snapshot();
    let n = batches * BATCH as u64;
    if after.packets - before.packets != n || after.accepted != before.accepted {
        return Err(format!(
            "the worker counted {} packets ({} accepted) of {n}",
            after.packets - before.packets,
            after.accepted - before.accepted
        ));
    }
    Ok(ns as f64 / n as f64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), String> {
    let args = Args::parse();
    if args.rounds == 0 || args.packets == 0 {
        return Err("--rounds and --packets must be positive".into());
    }
    let batches = args.packets.div_ceil(BATCH as u64);
    let (mut fl, mut wk, mut diff) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..args.rounds {
        let f = (args.variant != Variant::Worker).then(|| floor(batches));
        let w = match args.variant {
            Variant::Floor => None,
            _ => Some(worker(batches, args.rules)?),
        };
        eprintln!(
            "round {round}: floor {} ns/pkt, worker {} ns/pkt",
            f.map_or("-".into(), |f| format!("{f:.1}")),
            w.map_or("-".into(), |w| format!("{w:.1}")),
        );
        if let Some(f) = f {
            fl.push(f);
        }
        if let Some(w) = w {
            wk.push(w);
        }
        if let (Some(f), Some(w)) = (f, w) {
            diff.push(w - f);
        }
    }
    let show = |v: &Vec<f64>| {
        if v.is_empty() {
            "-".to_string()
        } else {
            format!("{:.1}", median(v.clone()))
        }
    };
    println!(
        "worker-cost: {} packets of {FRAME} B per round, batches of {BATCH}, {} rounds, \
         ruleset {}; CPU ns per packet, medians",
        batches * BATCH as u64,
        args.rounds,
        match args.rules {
            Rules::Empty => "empty chain, policy drop",
            Rules::Counter => "counter drop",
        }
    );
    println!("| floor (poll + 3 header reads) | worker (`Worker::step`) | worker − floor |");
    println!("|---:|---:|---:|");
    println!("| {} | {} | {} |", show(&fl), show(&wk), show(&diff));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_64_byte_udp_to_the_probe_port_and_parse_clean() {
        for flow in [0, 63] {
            let f = frame(flow);
            assert_eq!(f.len(), FRAME);
            let m = wasp_wire::parse(&f);
            assert_eq!(m.malformed, None);
            assert_eq!(m.l4.map(|l| (l.proto, l.offset)), Some((17, 34)));
            assert_eq!(&f[30..34], &[10, 0, 7, 214]);
            assert_eq!(u16::from_be_bytes([f[34], f[35]]), 10000 + flow);
            assert_eq!(u16::from_be_bytes([f[36], f[37]]), 2002);
        }
    }

    #[test]
    fn the_worker_counts_every_packet_and_drops_it_under_both_rulesets() {
        for rules in [Rules::Empty, Rules::Counter] {
            let ns = worker(4, rules).expect("the worker runs");
            assert!(ns > 0.0);
        }
    }
}
