//! `ruleset-scaling`: packets per second and ns per packet of wasp's classification (frame parse
//! plus rule evaluation, I/O excluded) on the sample firewall's captures, for linear rulesets of
//! 10, 100 and 1000 rules, vector pipeline next to the per-packet reference walk.
//!
//! Every rule is `ip saddr 198.51.100.X udp dport P counter drop`-shaped and matches none of the
//! sample's packets, so each packet walks the whole chain and ends at the policy: the cost grows
//! with the rule count, as for the kernel's "about 40 ns per linear rule" on this machine
//! (`../shared/research/io.md`). Each variant runs `--runs` times over the same in-memory frames
//! and the table prints the median; CPU-ns per packet come from the thread's scheduler clock
//! (`CLOCK_THREAD_CPUTIME_ID`), wall-ns from `Instant`. Variants alternate within each run so
//! that machine noise hits them alike.
//!
//! ```text
//! cargo run --release -p wasp-perf --bin ruleset-scaling [-- --runs 5 --min-packets 200000 --json]
//! cargo run --release -p wasp-perf --bin ruleset-scaling -- --only 10 --mode vector --runs 1
//! ```

use std::path::{Path, PathBuf};
use std::time::Instant;

use wasp_core::{At, Engine, HookResult, Packet};
use wasp_io::capture::CaptureReader;

/// Rule counts of the table.
const RULE_COUNTS: [usize; 4] = [0, 10, 100, 1000];
/// Device the benchmark chain hooks.
const DEV: &str = "lan0";

/// Command-line options.
#[derive(clap::Parser)]
#[command(about = "Classification cost per packet for 0/10/100/1000 linear rules")]
struct Args {
    /// Timed runs per variant; the table shows the median.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Packets classified per timed run (the captures are replayed until this many).
    #[arg(long, default_value_t = 200_000)]
    min_packets: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Run only the rows of this many rules (0, 10, 100 or 1000): a variant to profile or to
    /// count instructions of (`valgrind --tool=callgrind`).
    #[arg(long, value_name = "RULES")]
    only: Option<usize>,
    /// With `--only`: run only this mode (`parse`, `vector` or `packet`).
    #[arg(long, value_name = "MODE")]
    mode: Option<String>,
    /// Captures to use instead of the sample firewall's.
    #[arg(long = "in")]
    captures: Vec<PathBuf>,
}

/// The sample firewall's captures that exist here (the shared ones may be absent).
fn sample_captures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let sample = root.join("samples/firewall");
    let mut out = vec![sample.join("office.pcap")];
    for name in [
        "zeek-var-services-std-ports.pcap",
        "sv-eve-flow-vlan-02.pcap",
        "zeek-mixed-vlan-mpls.pcap",
        "tcpdump-ipv6-routing-header.pcap",
        "zeek-ipv6-hbh-routing0.pcap",
    ] {
        out.push(root.join("../shared/pcaps").join(name));
    }
    out.into_iter().filter(|p| p.exists()).collect()
}

fn load_frames(paths: &[PathBuf]) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    for p in paths {
        let mut r = match CaptureReader::open(p) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("skipping {}: {e}", p.display());
                continue;
            }
        };
        while let Some(Ok(f)) = r.next_frame() {
            frames.push(f.data.to_vec());
        }
    }
    frames
}

/// A netdev ingress chain on [`DEV`] with `n` rules that match none of the sample's packets.
fn linear_ruleset(n: usize) -> String {
    let mut s = format!(
        "table netdev bench {{\n\tchain in {{\n\t\ttype filter hook ingress device \"{DEV}\" priority 0; policy accept;\n"
    );
    for i in 0..n {
        s.push_str(&format!(
            "\t\tip saddr 198.51.{}.{} udp dport {} counter drop\n",
            100 + i / 250,
            1 + i % 250,
            20000 + i
        ));
    }
    s.push_str("\t}\n}\n");
    s
}

/// Nanoseconds this thread has run on a CPU (`CLOCK_THREAD_CPUTIME_ID`, through `cpu-time`).
fn thread_cpu_ns() -> u64 {
    cpu_time::ThreadTime::try_now().map_or(0, |t| t.as_duration().as_nanos() as u64)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `wasp_wire::parse` only: the floor under every ruleset.
    ParseOnly,
    /// Parse + `Engine::run` at the ingress hook in vectors of 64.
    Vector,
    /// Parse + `Engine::ingress_one` per packet (the reference walk).
    PerPacket,
}

impl Mode {
    /// The `--mode` word.
    fn short(self) -> &'static str {
        match self {
            Mode::ParseOnly => "parse",
            Mode::Vector => "vector",
            Mode::PerPacket => "packet",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::ParseOnly => "parse only",
            Mode::Vector => "vector (64)",
            Mode::PerPacket => "per packet",
        }
    }
}

/// One timed pass over `frames` repeated until at least `min_packets` were classified.
/// Returns (packets, wall ns, cpu ns, accepted).
fn run_once(
    engine: &mut Engine,
    frames: &[Vec<u8>],
    mode: Mode,
    min_packets: usize,
) -> (u64, u64, u64, u64) {
    let mut packets = 0u64;
    let mut accepted = 0u64;
    let mut res = HookResult::new();
    let mut batch: Vec<Packet<'_>> = Vec::with_capacity(64);
    let cpu0 = thread_cpu_ns();
    let t0 = Instant::now();
    while (packets as usize) < min_packets {
        for chunk in frames.chunks(64) {
            batch.clear();
            for f in chunk {
                batch.push(Packet {
                    frame: f,
                    meta: wasp_wire::parse(f),
                    iifname: DEV,
                    mark: 0,
                    oifname: "",
                    ct: wasp_core::CtMeta::NONE,
                    ct_detail: None,
                    nftrace: false,
                    route: None,
                });
            }
            match mode {
                Mode::ParseOnly => {
                    accepted += batch.iter().filter(|p| p.meta.malformed.is_none()).count() as u64
                }
                Mode::Vector => {
                    engine.run(At::Ingress(DEV), &batch, 0, &mut res, None, None);
                    accepted += res
                        .outcomes
                        .iter()
                        .filter(|o| o.verdict == wasp_core::FinalVerdict::Accept)
                        .count() as u64;
                }
                Mode::PerPacket => {
                    for (i, p) in batch.iter().enumerate() {
                        let o = engine.ingress_one(DEV, p, i, 0, &mut res, None);
                        accepted += u64::from(o.verdict == wasp_core::FinalVerdict::Accept);
                    }
                }
            }
            packets += batch.len() as u64;
        }
    }
    let wall = t0.elapsed().as_nanos() as u64;
    let cpu = thread_cpu_ns().saturating_sub(cpu0);
    (packets, wall, cpu, accepted)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Row {
    rules: usize,
    mode: Mode,
    wall_ns: f64,
    cpu_ns: f64,
    accepted_share: f64,
}

fn main() {
    let mut args = <Args as clap::Parser>::parse();
    args.runs = args.runs.max(1);
    let captures = if args.captures.is_empty() {
        sample_captures()
    } else {
        args.captures.clone()
    };
    let frames = load_frames(&captures);
    if frames.is_empty() {
        eprintln!("ruleset-scaling: no frames (looked at {captures:?})");
        std::process::exit(1);
    }
    let mut rows = Vec::new();
    for &n in &RULE_COUNTS {
        if args.only.is_some_and(|o| o != n) {
            continue;
        }
        let text = linear_ruleset(n);
        let ruleset = wasp_ruleset::parse_str(&text, "bench.nft").expect("benchmark ruleset");
        let mut engine = Engine::compile(&ruleset).expect("benchmark ruleset compiles");
        let all: &[Mode] = if n == 0 {
            &[Mode::ParseOnly, Mode::Vector, Mode::PerPacket]
        } else {
            &[Mode::Vector, Mode::PerPacket]
        };
        let modes: Vec<Mode> = all
            .iter()
            .copied()
            .filter(|m| args.mode.as_deref().is_none_or(|want| m.short() == want))
            .collect();
        let mut samples: Vec<(Vec<f64>, Vec<f64>, f64)> = vec![(vec![], vec![], 0.0); modes.len()];
        // Warm-up, then alternate the variants in each run.
        for &m in &modes {
            run_once(&mut engine, &frames, m, frames.len());
        }
        for _ in 0..args.runs {
            for (i, &m) in modes.iter().enumerate() {
                let (p, wall, cpu, acc) = run_once(&mut engine, &frames, m, args.min_packets);
                samples[i].0.push(wall as f64 / p as f64);
                samples[i].1.push(cpu as f64 / p as f64);
                samples[i].2 = acc as f64 / p as f64;
            }
        }
        for (i, &m) in modes.iter().enumerate() {
            let (w, c, a) = samples[i].clone();
            rows.push(Row {
                rules: n,
                mode: m,
                wall_ns: median(w),
                cpu_ns: median(c),
                accepted_share: a,
            });
        }
    }
    // CPU ns per rule: the row's cost over the same mode with no rules, per rule.
    let base = |m: Mode| {
        rows.iter()
            .find(|r| r.rules == 0 && r.mode == m)
            .map_or(0.0, |r| r.cpu_ns)
    };
    if args.json {
        let items: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "rules": r.rules,
                    "mode": r.mode.name(),
                    "wall_ns_per_packet": r.wall_ns,
                    "cpu_ns_per_packet": r.cpu_ns,
                    "mpps": 1e3 / r.wall_ns,
                    "accepted_share": r.accepted_share,
                })
            })
            .collect();
        let doc = serde_json::json!({ "frames": frames.len(), "runs": args.runs, "rows": items });
        println!("{doc}");
        return;
    }
    println!(
        "ruleset-scaling: {} frames from {} captures, median of {} runs of >= {} packets",
        frames.len(),
        captures.len(),
        args.runs,
        args.min_packets
    );
    println!("| rules | mode | Mpps | wall ns/pkt | CPU ns/pkt | CPU ns/rule | vector speed-up |");
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for r in &rows {
        let per_rule = if r.rules > 0 && base(r.mode) > 0.0 {
            format!("{:.2}", (r.cpu_ns - base(r.mode)) / r.rules as f64)
        } else {
            "-".into()
        };
        let speedup = if r.mode == Mode::Vector {
            rows.iter()
                .find(|o| o.rules == r.rules && o.mode == Mode::PerPacket)
                .map_or("-".into(), |o| format!("{:.2}x", o.cpu_ns / r.cpu_ns))
        } else {
            "-".into()
        };
        println!(
            "| {} | {} | {:.2} | {:.1} | {:.1} | {} | {} |",
            r.rules,
            r.mode.name(),
            1e3 / r.wall_ns,
            r.wall_ns,
            r.cpu_ns,
            per_rule,
            speedup
        );
    }
}
