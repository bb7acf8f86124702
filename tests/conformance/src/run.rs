//! One conformance run: a ruleset x the inputs (captures and generated frames), through the
//! kernel and through `wasp replay --verdicts`, compared line by line.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::capture::{check_sendable, read_frames, write_pcap};
use crate::cmd::run;
use crate::error::{Error, Result};
use crate::generate;
use crate::kernel::{Kernel, KernelConfig, KernelOutcome};
use crate::netns::Netns;
use crate::summary::{describe, hex, tshark_lines};
use crate::verdict::{Decision, parse_line};

/// One input frame and where it comes from.
#[derive(Debug, Clone)]
pub struct Packet {
    /// `capture.pcap#N` (N from 1) or `gen:<name>`.
    pub origin: String,
    /// The frame.
    pub frame: Vec<u8>,
}

/// The frames of every capture in `dir` (sorted by name), then the generated corpus. Captures
/// that cannot be read are reported in the second list and left out.
pub fn inputs(dir: Option<&Path>) -> (Vec<Packet>, Vec<String>) {
    let mut packets = Vec::new();
    let mut notes = Vec::new();
    match dir.map(std::fs::read_dir) {
        None => notes.push("no capture folder given".to_string()),
        Some(Err(e)) => notes.push(format!(
            "captures skipped: {}: {e}",
            dir.unwrap_or(Path::new("")).display()
        )),
        Some(Ok(rd)) => {
            let mut files: Vec<PathBuf> = rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng"))
                .collect();
            files.sort();
            for f in files {
                let name = f
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                match read_frames(&f) {
                    Ok(frames) => {
                        packets.extend(frames.into_iter().enumerate().map(|(i, frame)| Packet {
                            origin: format!("{name}#{}", i + 1),
                            frame,
                        }))
                    }
                    Err(e) => notes.push(format!("capture left out: {e}")),
                }
            }
        }
    }
    packets.extend(generate::corpus().into_iter().map(|g| Packet {
        origin: format!("gen:{}", g.name),
        frame: g.frame,
    }));
    (packets, notes)
}

/// Why the kernel side cannot run here (the test then passes with this message), or `None`.
pub fn skip_reason() -> Option<String> {
    if !crate::socket::is_root() {
        return Some("not root".into());
    }
    match Command::new("nft").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        _ => return Some("nft is not installed".into()),
    }
    if let Err(e) = Netns::create() {
        return Some(format!("cannot create a network namespace: {e}"));
    }
    None
}

/// A frame that was not sent, and why.
#[derive(Debug, Clone)]
pub struct SkippedFrame {
    /// Where it comes from.
    pub origin: String,
    /// Why it was not sent.
    pub reason: String,
}

/// The kernel's decisions for the frames it was sent.
#[derive(Debug)]
pub struct KernelRun {
    /// The frames sent, in order (index i here is verdict line i + 1).
    pub sent: Vec<Packet>,
    /// The kernel's outcome for each sent frame.
    pub outcomes: Vec<KernelOutcome>,
    /// Frames not sent (too short, too long, refused by the socket).
    pub skipped: Vec<SkippedFrame>,
    /// `nft -a list ruleset` after the run.
    pub ruleset: String,
}

/// Loads `ruleset` into a fresh kernel side and sends every packet, one at a time.
///
/// # Errors
/// When the kernel side cannot be set up, refuses the ruleset, or the monitor dies.
pub fn run_kernel(ruleset: &Path, packets: &[Packet]) -> Result<KernelRun> {
    let mut kernel = Kernel::start(KernelConfig::default())?;
    kernel.load(ruleset)?;
    let mut run = KernelRun {
        sent: Vec::new(),
        outcomes: Vec::new(),
        skipped: Vec::new(),
        ruleset: String::new(),
    };
    for p in packets {
        if let Err(why) = check_sendable(&p.frame) {
            run.skipped.push(SkippedFrame {
                origin: p.origin.clone(),
                reason: format!("{why:?} ({} bytes)", p.frame.len()),
            });
            continue;
        }
        match kernel.send(&p.frame)? {
            KernelOutcome::Refused(e) => run.skipped.push(SkippedFrame {
                origin: p.origin.clone(),
                reason: format!("socket refused it: {e}"),
            }),
            outcome => {
                run.sent.push(p.clone());
                run.outcomes.push(outcome);
            }
        }
    }
    run.ruleset = kernel.list_ruleset()?;
    Ok(run)
}

/// Runs `wasp replay` on `ruleset` with the capture `pcap` and returns its verdict lines
/// (index from 1 -> decision).
///
/// # Errors
/// When wasp fails or writes lines that do not parse.
pub fn run_wasp(
    wasp: &Path,
    ruleset: &Path,
    pcap: &Path,
    dev: &str,
    out_dir: &Path,
) -> Result<Vec<(usize, Decision)>> {
    let verdicts = out_dir.join("wasp.verdicts");
    let _ = std::fs::remove_file(&verdicts);
    run(Command::new(wasp)
        .arg("replay")
        .arg("--ruleset")
        .arg(ruleset)
        .arg("--in")
        .arg(pcap)
        .args(["--in-dev", dev])
        .arg("--out")
        .arg(out_dir.join("wasp-out"))
        .arg("--verdicts")
        .arg(&verdicts))?;
    let text = std::fs::read_to_string(&verdicts)
        .map_err(|e| Error::io(format!("read {}", verdicts.display()), e))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(parse_line)
        .collect()
}

/// The outcome of comparing one ruleset.
#[derive(Debug)]
pub struct Comparison {
    /// Ruleset file name.
    pub ruleset: String,
    /// Frames compared.
    pub compared: usize,
    /// Human-readable differences (empty: conformant).
    pub differences: Vec<String>,
    /// Frames not sent.
    pub skipped: Vec<SkippedFrame>,
    /// Seconds spent on the kernel side and on wasp.
    pub kernel_secs: f64,
    /// Seconds spent running wasp.
    pub wasp_secs: f64,
}

/// The whole check of one ruleset: kernel run, pcap of the frames sent, wasp run, comparison.
/// Artifacts (sent.pcap, kernel.verdicts, wasp.verdicts, report.txt, kernel-ruleset.txt) are
/// written to `out_dir`.
///
/// # Errors
/// When the kernel side or wasp cannot run at all (differences are not errors).
pub fn compare(
    wasp: &Path,
    ruleset: &Path,
    packets: &[Packet],
    out_dir: &Path,
) -> Result<Comparison> {
    std::fs::create_dir_all(out_dir)
        .map_err(|e| Error::io(format!("mkdir {}", out_dir.display()), e))?;
    let t0 = Instant::now();
    let kernel = run_kernel(ruleset, packets)?;
    let kernel_secs = t0.elapsed().as_secs_f64();
    let pcap = out_dir.join("sent.pcap");
    let frames: Vec<&[u8]> = kernel.sent.iter().map(|p| p.frame.as_slice()).collect();
    write_pcap(&pcap, &frames)?;
    let mut klines = String::new();
    for (i, o) in kernel.outcomes.iter().enumerate() {
        match o.decision() {
            Some(d) => {
                let _ = writeln!(klines, "{} {d}", i + 1);
            }
            None if o.verdict_only().is_some() => {
                let _ = writeln!(klines, "{} {}", i + 1, kernel_text(o));
            }
            None => {
                let _ = writeln!(klines, "# {} {}", i + 1, kernel_text(o));
            }
        }
    }
    let write = |name: &str, text: &str| {
        std::fs::write(out_dir.join(name), text).map_err(|e| Error::io(format!("write {name}"), e))
    };
    write("kernel.verdicts", &klines)?;
    write("kernel-ruleset.txt", &kernel.ruleset)?;
    let t1 = Instant::now();
    let wasp_lines = run_wasp(wasp, ruleset, &pcap, "wasp0", out_dir);
    let wasp_secs = t1.elapsed().as_secs_f64();
    let mut differences = Vec::new();
    match wasp_lines {
        Err(e) => differences.push(format!("wasp replay failed: {e}")),
        Ok(lines) => {
            let mut by_index = vec![None; kernel.sent.len()];
            for (i, d) in lines {
                match by_index.get_mut(i.wrapping_sub(1)) {
                    Some(slot) => *slot = Some(d),
                    None => differences.push(format!(
                        "wasp wrote a line for packet {i}, which does not exist"
                    )),
                }
            }
            let tshark = differences_need_tshark(&kernel, &by_index)
                .then(|| tshark_lines(&pcap))
                .flatten();
            for (i, (o, w)) in kernel.outcomes.iter().zip(&by_index).enumerate() {
                let agree = match (o.decision(), o.verdict_only(), w) {
                    (Some(k), _, Some(w)) => k == *w,
                    (None, Some(v), Some(w)) => v == w.verdict,
                    _ => false,
                };
                if agree {
                    continue;
                }
                let p = &kernel.sent[i];
                let mut d = format!(
                    "packet {} ({}):\n    kernel: {}\n    wasp:   {}\n    frame:  {}\n    hex:    {}",
                    i + 1,
                    p.origin,
                    kernel_text(o),
                    w.as_ref()
                        .map_or("(no line)".to_string(), |w| w.to_string()),
                    describe(&p.frame),
                    hex(&p.frame, 64)
                );
                if let Some(t) = tshark.as_ref().and_then(|t| t.get(i)) {
                    let _ = write!(d, "\n    tshark: {t}");
                }
                if let KernelOutcome::NoVerdict(events) | KernelOutcome::Silent { events, .. } = o {
                    for e in events {
                        let _ = write!(d, "\n    trace:  {e}");
                    }
                }
                differences.push(d);
            }
        }
    }
    let name = ruleset
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let mut report = format!(
        "ruleset {name}: {} frames compared, {} skipped, {} differences (kernel {kernel_secs:.1} s, wasp {wasp_secs:.1} s)\n",
        kernel.sent.len(),
        kernel.skipped.len(),
        differences.len()
    );
    for s in &kernel.skipped {
        let _ = writeln!(report, "skipped {}: {}", s.origin, s.reason);
    }
    for d in &differences {
        let _ = writeln!(report, "{d}");
    }
    write("report.txt", &report)?;
    Ok(Comparison {
        ruleset: name,
        compared: kernel.sent.len(),
        differences,
        skipped: kernel.skipped,
        kernel_secs,
        wasp_secs,
    })
}

fn differences_need_tshark(k: &KernelRun, w: &[Option<Decision>]) -> bool {
    k.outcomes
        .iter()
        .zip(w)
        .any(|(o, w)| o.decision().is_none() || o.decision() != *w)
    // (over-approximate: tshark is only a nicety)
}

/// The kernel outcome as a verdict line (without the index), or a note.
fn kernel_text(o: &KernelOutcome) -> String {
    match o {
        KernelOutcome::Decided(d) => d.to_string(),
        KernelOutcome::Silent {
            reached_hook: false,
            ..
        } => "drop - - -  (discarded by the stack before the ingress hook: no chain saw it)".into(),
        KernelOutcome::Silent {
            passed_all, events, ..
        } if events.is_empty() => format!(
            "{} ? ? ?  (the chains ran but the kernel emitted no trace for this frame; \
             only the verdict is known, from the harness's counters)",
            if *passed_all { "accept" } else { "drop" }
        ),
        KernelOutcome::Silent { .. } => "drop - - -  (dropped by a base chain without a rule or \
                                          policy: the inet ingress IP header checks)"
            .into(),
        KernelOutcome::Refused(e) => format!("(not sent: {e})"),
        KernelOutcome::NoVerdict(_) => "(no final verdict traced)".into(),
    }
}

/// Builds the `wasp` binary with the same cargo and profile as the running test executable
/// (`<target>/<profile>/deps/<test>`) and returns its path `<target>/<profile>/wasp`.
/// `WASP_BIN` in the environment overrides this.
///
/// # Errors
/// When the build fails.
pub fn build_wasp() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("WASP_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| Error::io("current_exe", e))?;
    let profile_dir = exe.parent().and_then(Path::parent).ok_or_else(|| {
        Error::io(
            "target dir",
            std::io::Error::other("test executable has no grandparent"),
        )
    })?;
    let target_dir = profile_dir.parent().unwrap_or(profile_dir);
    let profile = profile_dir
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args([
        "build",
        "--quiet",
        "-p",
        "wasp",
        "--bin",
        "wasp",
        "--target-dir",
    ])
    .arg(target_dir);
    match profile.as_str() {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        other => {
            cmd.args(["--profile", other]);
        }
    }
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    run(&mut cmd)?;
    Ok(profile_dir.join("wasp"))
}
