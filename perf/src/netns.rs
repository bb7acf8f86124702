//! Network namespaces and commands for the veth benchmarks (`e2e`, `io-floor`,
//! `kernel-set-cost`): a pair of namespaces joined by a veth, deleted on drop (also while
//! unwinding from a panic); a command runner that reports stderr; removal of namespaces left by
//! killed runs; and the CPU time of the `ksoftirqd` threads.

use std::process::{Command, Stdio};

/// Errors are the failing command and its stderr.
pub type Res<T> = Result<T, String>;

/// Two namespaces `<prefix><pid>-<n>-tx` / `-rx` joined by a veth (`tx_dev` in tx, `rx_dev` in
/// rx), IPv6 off in both (no ND/MLD frames), both ends up. Deleted on drop.
#[derive(Debug)]
pub struct VethPair {
    /// The sending namespace.
    pub tx: String,
    /// The receiving namespace.
    pub rx: String,
}

impl VethPair {
    /// Create the pair, the `n`th of this process.
    ///
    /// # Errors
    /// The `ip` command that failed (what was made is deleted).
    pub fn create(prefix: &str, n: usize, tx_dev: &str, rx_dev: &str) -> Res<VethPair> {
        let base = format!("{prefix}{}-{n}", std::process::id());
        let t = VethPair {
            tx: format!("{base}-tx"),
            rx: format!("{base}-rx"),
        };
        ip(&["netns", "add", &t.tx])?;
        // From here on, dropping `t` (on any error) deletes what exists.
        ip(&["netns", "add", &t.rx])?;
        for ns in [&t.tx, &t.rx] {
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
            "link", "add", tx_dev, "netns", &t.tx, "type", "veth", "peer", "name", rx_dev, "netns",
            &t.rx,
        ])?;
        ip(&["-n", &t.tx, "link", "set", tx_dev, "up"])?;
        ip(&["-n", &t.rx, "link", "set", rx_dev, "up"])?;
        Ok(t)
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.tx]);
        let _ = ip(&["netns", "del", &self.rx]);
    }
}

/// `ip ARGS`.
///
/// # Errors
/// As [`cmd`].
pub fn ip(args: &[&str]) -> Res<()> {
    cmd(Command::new("ip").args(args), None).map(|_| ())
}

/// Runs a command (with `stdin` fed when given); its stdout.
///
/// # Errors
/// The command (first 200 characters), its exit status and stderr (first 2000).
pub fn cmd(c: &mut Command, stdin: Option<&str>) -> Res<String> {
    use std::io::Write as _;
    let show = format!("{c:?}");
    c.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = c.spawn().map_err(|e| format!("{show}: {e}"))?;
    if let Some(text) = stdin {
        let mut w = child.stdin.take().expect("piped stdin");
        w.write_all(text.as_bytes())
            .map_err(|e| format!("{show}: writing stdin: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{show}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let err: String = err.chars().take(2000).collect();
        let show: String = show.chars().take(200).collect();
        return Err(format!("{show} failed ({}): {}", out.status, err.trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Deletes the namespaces `<prefix><pid>-…` whose process is gone (killed earlier runs).
pub fn remove_stale(prefix: &str) {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(prefix)
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", &name]);
        }
    }
}

/// Pids of the `ksoftirqd/N` kernel threads.
pub fn ksoftirqd_pids() -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|c| c.starts_with("ksoftirqd/"))
        {
            out.push(pid);
        }
    }
    out
}

/// Summed CPU ns (`/proc/<pid>/schedstat`, first field) of `pids`.
pub fn sched_ns(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}
