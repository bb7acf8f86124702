//! apply-soak: a running `wasp run`'s memory over many applies of the same ruleset (issue 17:
//! "memory flat over any number of applies").
//!
//! A real daemon (`wasp run --workers W` on a veth end in a namespace of its own, as
//! `load-time` starts it) gets the same file N times, each as `wasp ctl -f` sends it (one
//! connection to the control socket, one `apply` request): `flush ruleset`, then one table
//! with a set of `--elements` IPv4 addresses (2 000 by default), and a chain that matches
//! `ip saddr @s counter drop`, then a plain `counter` rule. After the checkpoints (100, 1 000
//! and 10 000 applies by default) the daemon's `VmRSS` is read from `/proc`. The table: per
//! worker count, the RSS at each checkpoint (MiB), the ratio last / first (the bar: within
//! 5 %), and the median wall time of one apply.
//!
//! `--family netdev` (default): the table is `netdev`, its chain on the ingress hook of the
//! daemon's device; `ip`: an `ip` table with an `input` chain (the daemon's IP path:
//! conntrack and the netfilter state carried from one ruleset to the next).
//!
//! Applies go over the socket from this process by default (wasp-ctl's client, the request
//! `wasp ctl -f FILE` sends); `--spawn` runs `wasp ctl -f FILE` for each instead (a process
//! per apply: slower, same daemon work).
//!
//! The binary: `wasp` next to this one (`--wasp` to choose). Needs root (namespaces; they
//! are deleted when the run ends, also when it fails). `--smoke`: 5 and 20 applies, workers 1
//! and 2 (CI).
//!
//! `cargo run --release -p wasp-perf --bin apply-soak -- [--applies 10000] [--workers 1,2]
//! [--elements 2000] [--family netdev|ip] [--spawn]`

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use wasp_perf::daemon::{DEVICE, WaspRun, wasp_binary};
use wasp_perf::netns::{Res, remove_stale};

/// Namespace prefix of this benchmark's daemons.
const PREFIX: &str = "wasp-soak-";

#[derive(Parser)]
#[command(about = "a running daemon's RSS over many applies of the same ruleset")]
struct Args {
    /// Applies in all (the last checkpoint); the checkpoints are 100, 1000 and 10000 below it.
    #[arg(long, default_value_t = 10_000)]
    applies: usize,
    /// Worker counts (one daemon each).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    workers: Vec<usize>,
    /// Elements of the set.
    #[arg(long, default_value_t = 2000)]
    elements: usize,
    /// The table's family: `netdev` (ingress chain on the daemon's device) or `ip` (input
    /// chain: the IP path).
    #[arg(long, default_value = "netdev")]
    family: String,
    /// Apply with a `wasp ctl -f FILE` process each time instead of a connection from here.
    #[arg(long)]
    spawn: bool,
    /// The wasp binary (default: next to this one).
    #[arg(long)]
    wasp: Option<PathBuf>,
    /// CI smoke mode: checkpoints at 5 and 20 applies.
    #[arg(long)]
    smoke: bool,
}

/// The ruleset applied each time: `flush ruleset`, a set of `elements` addresses, a chain
/// that uses it with a counter, and a plain `counter` rule.
fn ruleset(family: &str, elements: usize) -> String {
    let mut s = String::with_capacity(elements * 12 + 512);
    let _ = writeln!(s, "flush ruleset\ntable {family} soak {{");
    s.push_str(" set s {\n  type ipv4_addr;\n  elements = {");
    for i in 0..elements {
        let sep = if i == 0 { " " } else { ", " };
        let _ = write!(
            s,
            "{sep}10.{}.{}.{}",
            (i >> 16) & 255,
            (i >> 8) & 255,
            i & 255
        );
    }
    s.push_str(" }\n }\n chain c {\n");
    if family == "netdev" {
        let _ = writeln!(
            s,
            "  type filter hook ingress device \"{DEVICE}\" priority 0; policy accept;"
        );
    } else {
        s.push_str("  type filter hook input priority 0; policy accept;\n");
    }
    s.push_str("  ip saddr @s counter drop\n  counter\n }\n}\n");
    s
}

/// The checkpoints for `applies` in all: 100, 1000, 10000 below it, then `applies`.
fn checkpoints(applies: usize) -> Vec<usize> {
    let mut v: Vec<usize> = [100, 1000, 10_000]
        .into_iter()
        .filter(|&c| c < applies)
        .collect();
    v.push(applies);
    v
}

/// One daemon's figures.
struct Soak {
    workers: usize,
    /// VmRSS (KiB) at each checkpoint, and right after the start.
    start_kib: u64,
    at_kib: Vec<u64>,
    /// Wall time of each apply.
    times: Vec<Duration>,
    /// Wall time of the whole run.
    total: Duration,
}

fn soak(args: &Args, wasp: &std::path::Path, n: usize, workers: usize, at: &[usize]) -> Res<Soak> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let text = ruleset(&args.family, args.elements);
    let file = dir.path().join("soak.nft");
    std::fs::write(&file, &text).map_err(|e| e.to_string())?;
    let name = file.display().to_string();
    let mut d = WaspRun::start(wasp, dir.path(), PREFIX, n, workers)?;
    let start_kib = d.rss_kib();
    let last = at.last().copied().unwrap_or(0);
    let mut times = Vec::with_capacity(last);
    let mut at_kib = Vec::with_capacity(at.len());
    let t0 = Instant::now();
    for i in 1..=last {
        let t = if args.spawn {
            d.apply_file(&file)
        } else {
            d.apply_text(&text, &name)
        }
        .map_err(|e| format!("apply {i} of {last} (workers {workers}): {e}"))?;
        times.push(t);
        if at.contains(&i) {
            if !d.alive() {
                return Err(format!("the daemon died after apply {i}"));
            }
            let kib = d.rss_kib();
            eprintln!(
                "apply-soak: workers {workers}: {i} applies, VmRSS {:.1} MiB, {:.0} s",
                kib as f64 / 1024.0,
                t0.elapsed().as_secs_f64()
            );
            at_kib.push(kib);
        }
    }
    Ok(Soak {
        workers,
        start_kib,
        at_kib,
        times,
        total: t0.elapsed(),
    })
}

fn median_ms(v: &[Duration]) -> f64 {
    let mut v: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn main() -> Res<()> {
    let mut args = Args::parse();
    if !matches!(args.family.as_str(), "netdev" | "ip") {
        return Err(format!("--family {:?}: netdev or ip", args.family));
    }
    if args.applies == 0 || args.workers.contains(&0) {
        return Err("--applies and --workers must be at least 1".into());
    }
    let at = if args.smoke {
        args.applies = 20;
        vec![5, 20]
    } else {
        checkpoints(args.applies)
    };
    if !wasp_perf::sys::is_root() {
        println!("apply-soak: skipped (needs root for namespaces)");
        return Ok(());
    }
    remove_stale(PREFIX);
    let wasp = wasp_binary(args.wasp.as_deref())?;
    let mut rows = Vec::new();
    for (n, &w) in args.workers.iter().enumerate() {
        rows.push(soak(&args, &wasp, n, w, &at)?);
    }
    println!(
        "apply-soak: daemon VmRSS over {} applies of one ruleset (`flush ruleset`, {} table, set of {} elements, 2 counters), {} ({})",
        args.applies,
        args.family,
        args.elements,
        if args.spawn {
            "a `wasp ctl -f` process per apply"
        } else {
            "one control connection per apply"
        },
        wasp.display()
    );
    println!();
    let mut head = "| workers | RSS at start MiB |".to_string();
    let mut rule = "|---:|---:|".to_string();
    for c in &at {
        let _ = write!(head, " after {c} MiB |");
        rule.push_str("---:|");
    }
    let (first, last) = (at[0], at[at.len() - 1]);
    let _ = write!(
        head,
        " {last} / {first} | kB per apply ({first}..{last}) | ms per apply (median) | total s |"
    );
    rule.push_str("---:|---:|---:|---:|");
    println!("{head}\n{rule}");
    for r in &rows {
        let mib = |k: u64| k as f64 / 1024.0;
        let mut line = format!("| {} | {:.1} |", r.workers, mib(r.start_kib));
        for k in &r.at_kib {
            let _ = write!(line, " {:.1} |", mib(*k));
        }
        let (a, b) = (r.at_kib[0] as f64, r.at_kib[r.at_kib.len() - 1] as f64);
        let per = if last > first {
            (b - a) * 1.024 / (last - first) as f64
        } else {
            0.0
        };
        let _ = write!(
            line,
            " {:.3} | {per:.1} | {:.1} | {:.0} |",
            b / a,
            median_ms(&r.times),
            r.total.as_secs_f64()
        );
        println!("{line}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_below_the_last() {
        assert_eq!(checkpoints(10_000), [100, 1000, 10_000]);
        assert_eq!(checkpoints(2000), [100, 1000, 2000]);
        assert_eq!(checkpoints(50), [50]);
    }

    #[test]
    fn the_ruleset_parses_with_its_elements() {
        for family in ["netdev", "ip"] {
            let text = ruleset(family, 2000);
            let r = wasp_ruleset::apply_batch(&wasp_ruleset::Ruleset::default(), &text, "soak.nft")
                .expect(family);
            assert_eq!(r.tables[0].sets[0].elements.len(), 2000, "{family}");
        }
    }
}
