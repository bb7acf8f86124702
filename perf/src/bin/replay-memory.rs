//! replay-memory: `wasp replay` of a long capture in bounded memory. One UDP flow of 64-byte
//! frames (one per µs) is written by `wasp_io::capture::CaptureWriter` into a temporary pcap
//! (4.5 M frames: 360 MB; removed at the end), then replayed through a three-rule netdev
//! ingress chain by a child process (this binary again, so that the generator's memory is not
//! counted), writing `accepted.pcap` (and, with `--verdicts`, the verdict lines) next to it.
//!
//! The child measures itself: wall time, process CPU time (user + system, `cpu-time`'s
//! `ProcessTime`), and its peak resident set (`VmHWM` of `/proc/self/status`, the kernel's
//! high-water mark: what `/usr/bin/time -v` reports as "Maximum resident set size"), before
//! and after the replay. Printed: a table and one JSON line.
//!
//! Usage: `cargo run --release -p wasp-perf --bin replay-memory [-- --packets N --runs R
//! --verdicts --pcapng]`; `--smoke` for CI (20 000 frames, debug build fine).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use clap::Parser;
use cpu_time::ProcessTime;
use wasp::progress::Progress;
use wasp_io::capture::{CaptureWriter, Format, OutFrame, TsResolution};

/// The device of the chain.
const DEV: &str = "bench0";

/// The ruleset: the flow's packets walk past two rules to the third, which counts and
/// accepts them.
const RULESET: &str = "table netdev bench {
\tchain ingress {
\t\ttype filter hook ingress device \"bench0\" priority 0; policy drop;
\t\tudp dport 53 counter drop
\t\tip saddr 198.51.100.1 counter drop
\t\tudp dport 4789 counter accept
\t}
}
";

/// First timestamp: 2026-12-02 00:00:00 UTC, in ns.
const T0_NS: u64 = 1_796_169_600_000_000_000;

#[derive(Parser)]
#[command(about = "wasp replay of a long capture: packets/s, CPU ns/packet, max RSS")]
struct Args {
    /// Frames in the capture.
    #[arg(long, default_value_t = 4_500_000)]
    packets: u64,
    /// Replays of the same capture (each in its own process).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Also write the verdict lines (one per packet).
    #[arg(long)]
    verdicts: bool,
    /// Write the capture as pcapng (outputs then pcapng too, each frame with its comment).
    #[arg(long)]
    pcapng: bool,
    /// CI size: 20 000 frames, one run.
    #[arg(long)]
    smoke: bool,
    /// Internal: replay the capture in this directory and print the measures.
    #[arg(long, hide = true)]
    child: Option<PathBuf>,
}

/// What a child measured.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Measure {
    packets: u64,
    wall_s: f64,
    cpu_s: f64,
    rss_before_kib: u64,
    max_rss_kib: u64,
}

fn main() {
    let args = Args::parse();
    if let Some(dir) = &args.child {
        match child(dir, args.verdicts) {
            Ok(m) => println!("{}", serde_json::to_string(&m).unwrap_or_default()),
            Err(e) => {
                eprintln!("replay-memory child: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    if let Err(e) = parent(&args) {
        eprintln!("replay-memory: {e}");
        std::process::exit(1);
    }
}

/// A kernel memory figure of `/proc/self/status` (`VmHWM`, `VmRSS`), in KiB.
fn status_kib(key: &str) -> Result<u64, String> {
    let text = std::fs::read_to_string("/proc/self/status").map_err(|e| e.to_string())?;
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("no {key} in /proc/self/status"))
}

fn capture_path(dir: &Path) -> Result<PathBuf, String> {
    ["flow.pcap", "flow.pcapng"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.exists())
        .ok_or_else(|| format!("no capture in {}", dir.display()))
}

fn child(dir: &Path, verdicts: bool) -> Result<Measure, String> {
    let rss_before_kib = status_kib("VmRSS")?;
    let opts = wasp::ReplayOptions {
        ruleset: dir.join("bench.nft"),
        inputs: vec![wasp::Input::required(capture_path(dir)?)],
        out_dir: Some(dir.join("out")),
        verdicts: verdicts.then(|| dir.join("verdicts.txt")),
        ..wasp::ReplayOptions::default()
    };
    let cpu = ProcessTime::now();
    let wall = Instant::now();
    let report = wasp::replay(&opts, None, &mut Progress::hidden()).map_err(|e| e.to_string())?;
    let wall_s = wall.elapsed().as_secs_f64();
    let cpu_s = cpu.elapsed().as_secs_f64();
    if let Some(f) = report.fault {
        return Err(f.to_string());
    }
    Ok(Measure {
        packets: report.summary.packets,
        wall_s,
        cpu_s,
        rss_before_kib,
        max_rss_kib: status_kib("VmHWM")?,
    })
}

/// Write the flow: `packets` UDP frames of 64 bytes, 1 µs apart.
fn generate(path: &Path, packets: u64, format: Format) -> Result<u64, String> {
    let udp = wasp_wire::samples::udp(40_000, 4789, &[0x5a; 22]);
    let frame = wasp_wire::samples::ethernet(&[], 0x0800, &wasp_wire::samples::ipv4(17, &udp));
    if frame.len() != 64 {
        return Err(format!("the frame has {} bytes, not 64", frame.len()));
    }
    let mut w =
        CaptureWriter::create(path, format, TsResolution::Micro).map_err(|e| e.to_string())?;
    w.add_interface(DEV).map_err(|e| e.to_string())?;
    for i in 0..packets {
        w.write(&OutFrame::new(T0_NS + i * 1_000, &frame))
            .map_err(|e| e.to_string())?;
    }
    w.finish().map_err(|e| e.to_string())?;
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| e.to_string())
}

fn parent(args: &Args) -> Result<(), String> {
    let (packets, runs) = if args.smoke {
        (20_000, 1)
    } else {
        (args.packets, args.runs.max(1))
    };
    let dir =
        Scratch(std::env::temp_dir().join(format!("wasp-replay-memory-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).map_err(|e| e.to_string())?;
    measure(args, &dir.0, packets, runs)
}

/// A directory removed when dropped (also when a panic unwinds, e.g. printing to a closed
/// pipe): the capture is hundreds of MB.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn measure(args: &Args, dir: &Path, packets: u64, runs: usize) -> Result<(), String> {
    std::fs::write(dir.join("bench.nft"), RULESET).map_err(|e| e.to_string())?;
    let (format, name) = if args.pcapng {
        (Format::PcapNg, "flow.pcapng")
    } else {
        (Format::Pcap, "flow.pcap")
    };
    let t = Instant::now();
    let bytes = generate(&dir.join(name), packets, format)?;
    eprintln!(
        "{packets} frames of 64 bytes, {:.0} MB {}, written in {:.1} s",
        bytes as f64 / 1e6,
        format.name(),
        t.elapsed().as_secs_f64()
    );
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    println!(
        "| run | packets | wall s | packets/s | CPU ns/packet | RSS before MiB | max RSS MiB |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let mut all = Vec::new();
    for run in 1..=runs {
        let mut cmd = Command::new(&exe);
        cmd.arg("--child").arg(dir);
        if args.verdicts {
            cmd.arg("--verdicts");
        }
        let out = cmd.output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "the replay failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let m: Measure = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
        if m.packets != packets {
            return Err(format!("replayed {} packets of {packets}", m.packets));
        }
        println!(
            "| {run} | {} | {:.2} | {:.2} M | {:.0} | {:.1} | {:.1} |",
            m.packets,
            m.wall_s,
            m.packets as f64 / m.wall_s / 1e6,
            m.cpu_s * 1e9 / m.packets as f64,
            m.rss_before_kib as f64 / 1024.0,
            m.max_rss_kib as f64 / 1024.0
        );
        all.push(m);
        let _ = std::fs::remove_dir_all(dir.join("out"));
    }
    println!(
        "{}",
        serde_json::json!({
            "bench": "replay-memory",
            "packets": packets,
            "capture_bytes": bytes,
            "format": format.name(),
            "verdicts": args.verdicts,
            "runs": all,
        })
    );
    Ok(())
}
