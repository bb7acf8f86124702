//! load-time: how long a ruleset takes to load, by size, wasp against `nft -f`, in the same
//! run. Two shapes, each at every size of `--sizes`:
//!
//! - **rules**: one `ip` input chain of N rules `ip saddr A tcp dport P counter drop` (no two
//!   alike), each with its own counter;
//! - **elements**: one `ip` table with an interval set of N `ipv4_addr` ranges (disjoint
//!   /30s) and a chain that matches `ip saddr @s counter drop`.
//!
//! Per shape and size: `wasp check FILE` (parse, check, compile, the counters' plugin sites;
//! wall time and peak RSS of the process), `wasp ctl -f FILE` applied to a running `wasp run`
//! (one worker, a veth in a namespace of its own; wall time of the `ctl` call, which returns
//! when every worker runs the new ruleset; the daemon's RSS after), and `nft -f FILE` into a
//! fresh namespace (wall time; the kernel's memory is not the process's). Medians of
//! `--runs`. Time per rule (element) is printed so that linear growth reads as a flat column.
//!
//! The binaries: `wasp` next to this one (`--wasp` to choose), `nft` from the path. Needs root
//! (namespaces). `--smoke`: sizes 1000 and 10000, one run (CI).
//!
//! `cargo run --release -p wasp-perf --bin load-time -- [--sizes 1000,10000,100000,200000]
//! [--runs 3] [--shapes rules,elements]`

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use wasp_perf::daemon::{WaspRun, wasp_binary};
use wasp_perf::netns::{Res, ip};

#[derive(Parser)]
#[command(about = "ruleset load time by size: wasp check, wasp ctl -f, nft -f")]
struct Args {
    /// Rules (elements) per ruleset.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1000,10000,100000,200000"
    )]
    sizes: Vec<usize>,
    /// Runs per case (the median is printed).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Shapes: `rules`, `elements`.
    #[arg(long, value_delimiter = ',', default_value = "rules,elements")]
    shapes: Vec<String>,
    /// The wasp binary (default: next to this one).
    #[arg(long)]
    wasp: Option<PathBuf>,
    /// CI smoke mode: sizes 1000 and 10000, one run.
    #[arg(long)]
    smoke: bool,
}

/// The ruleset text of `shape` at `n`.
fn ruleset(shape: &str, n: usize) -> String {
    let mut s = String::with_capacity(n * 64);
    s.push_str("table ip load {\n");
    if shape == "elements" {
        s.push_str(" set s {\n  type ipv4_addr; flags interval;\n  elements = {");
        for i in 0..n {
            // Disjoint /30s from 10.0.0.0 on.
            let a = (10u32 << 24) + (i as u32) * 4;
            let b = a.to_be_bytes();
            let sep = if i == 0 { " " } else { ", " };
            let _ = write!(s, "{sep}{}.{}.{}.{}/30", b[0], b[1], b[2], b[3]);
        }
        s.push_str(" }\n }\n chain c {\n  type filter hook input priority 0; policy accept;\n  ip saddr @s counter drop\n }\n}\n");
    } else {
        s.push_str(" chain c {\n  type filter hook input priority 0; policy accept;\n");
        for i in 0..n {
            let _ = writeln!(
                s,
                "  ip saddr 10.{}.{}.{} tcp dport {} counter drop",
                (i >> 16) & 255,
                (i >> 8) & 255,
                i & 255,
                i % 65535 + 1
            );
        }
        s.push_str(" }\n}\n");
    }
    s
}

/// Wall time of `c` (which must succeed) and its peak RSS in KiB.
fn timed(c: &mut Command) -> Res<(Duration, u64)> {
    let t0 = Instant::now();
    let (status, rss) = wasp_perf::sys::run_peak_rss(c.stdout(Stdio::null()).stderr(Stdio::null()))
        .map_err(|e| format!("{c:?}: {e}"))?;
    let d = t0.elapsed();
    if !status.success() {
        return Err(format!("{c:?}: {status}"));
    }
    Ok((d, rss))
}

/// Wall time of `nft -f file` into a fresh namespace.
fn nft(file: &Path, n: usize) -> Res<Duration> {
    let ns = format!("wasp-load-nft-{}-{n}", std::process::id());
    ip(&["netns", "add", &ns])?;
    let r = timed(
        Command::new("ip")
            .args(["netns", "exec", &ns, "nft", "-f"])
            .arg(file),
    );
    let _ = ip(&["netns", "del", &ns]);
    r.map(|(d, _)| d)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Res<()> {
    let mut args = Args::parse();
    if args.smoke {
        args.sizes = vec![1000, 10_000];
        args.runs = 1;
    }
    if !wasp_perf::sys::is_root() {
        println!("load-time: skipped (needs root for namespaces)");
        return Ok(());
    }
    let wasp = wasp_binary(args.wasp.as_deref())?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    println!(
        "load-time: wall time to load, median of {} runs; per-item columns in µs ({})",
        args.runs,
        wasp.display()
    );
    println!();
    println!(
        "| shape | size | wasp check s | µs/item | check peak RSS MiB | wasp ctl -f s | µs/item | daemon RSS after MiB | nft -f s | µs/item | wasp ctl -f / nft -f |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut n_ns = 0;
    for shape in &args.shapes {
        for &size in &args.sizes {
            let file = dir.path().join(format!("{shape}-{size}.nft"));
            std::fs::write(&file, ruleset(shape, size)).map_err(|e| e.to_string())?;
            let (mut check, mut apply, mut kernel) = (Vec::new(), Vec::new(), Vec::new());
            let mut rss = 0;
            let mut daemon_rss = 0;
            for _ in 0..args.runs {
                let (d, r) = timed(Command::new(&wasp).arg("check").arg(&file))?;
                check.push(d.as_secs_f64());
                rss = r;
                n_ns += 1;
                let daemon = WaspRun::start(&wasp, dir.path(), "wasp-load-", n_ns, 1)?;
                apply.push(daemon.apply_file(&file)?.as_secs_f64());
                daemon_rss = daemon.rss_kib();
                drop(daemon);
                kernel.push(nft(&file, n_ns)?.as_secs_f64());
            }
            let (c, a, k) = (median(check), median(apply), median(kernel));
            let per = |s: f64| s * 1e6 / size as f64;
            println!(
                "| {shape} | {size} | {c:.2} | {:.1} | {:.0} | {a:.2} | {:.1} | {:.0} | {k:.2} | {:.1} | {:.2} |",
                per(c),
                rss as f64 / 1024.0,
                per(a),
                daemon_rss as f64 / 1024.0,
                per(k),
                a / k
            );
        }
    }
    Ok(())
}
