//! A real `wasp run` daemon for the benchmarks that drive it through its control socket
//! (`load-time`, `apply-soak`): started under `ip netns exec` on one end of a veth pair of its
//! own ([`VethPair`], deleted with it, also when a run fails), stopped when dropped; rulesets
//! applied as `wasp ctl -f` does, and its resident memory read from `/proc`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use wasp_ctl::client::Client;
use wasp_ctl::proto::Request;

use crate::netns::{Res, VethPair, cmd};

/// The device the daemon's first ruleset opens: the receiving end of the pair.
pub const DEVICE: &str = "l1";

/// The `wasp` binary: `given`, else the one next to the running benchmark (cargo builds both
/// into the same folder).
///
/// # Errors
/// No such file.
pub fn wasp_binary(given: Option<&Path>) -> Res<PathBuf> {
    let p = match given {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()
            .map_err(|e| format!("current_exe: {e}"))?
            .with_file_name("wasp"),
    };
    if !p.is_file() {
        return Err(format!(
            "{}: no wasp binary (cargo build --release -p wasp, or --wasp PATH)",
            p.display()
        ));
    }
    Ok(p)
}

/// A field of `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`, `RssAnon`); `None` when the
/// process or the field is gone.
pub fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// `wasp run` with a netdev ingress chain on [`DEVICE`] (policy accept, no rules), on the
/// receiving end of a veth pair in a namespace of its own.
pub struct WaspRun {
    child: Child,
    sock: PathBuf,
    wasp: PathBuf,
    /// The pair; deleted after the daemon is stopped (fields drop in order).
    pair: VethPair,
}

impl WaspRun {
    /// Start `wasp run --workers WORKERS` (binary `wasp`, files in `dir`), the `n`th daemon of
    /// this process, in namespaces named `<prefix><pid>-<n>-tx`/`-rx`; returns once its
    /// control socket exists (at most 10 s).
    ///
    /// # Errors
    /// The namespaces cannot be made, the daemon cannot be spawned or did not start.
    pub fn start(wasp: &Path, dir: &Path, prefix: &str, n: usize, workers: usize) -> Res<WaspRun> {
        let pair = VethPair::create(prefix, n, "l0", DEVICE)?;
        let empty = dir.join(format!("empty-{n}.nft"));
        std::fs::write(
            &empty,
            format!(
                "table netdev e {{\n chain c {{\n  type filter hook ingress device \"{DEVICE}\" priority 0; policy accept;\n }}\n}}\n"
            ),
        )
        .map_err(|e| e.to_string())?;
        let sock = dir.join(format!("wasp-{n}.sock"));
        let child = Command::new("ip")
            .args(["netns", "exec", &pair.rx])
            .arg(wasp)
            .arg("run")
            .arg(&empty)
            .arg("--socket")
            .arg(&sock)
            .args(["--workers", &workers.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{}: {e}", wasp.display()))?;
        let mut d = WaspRun {
            child,
            sock,
            wasp: wasp.to_path_buf(),
            pair,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !d.sock.exists() {
            if let Ok(Some(status)) = d.child.try_wait() {
                return Err(format!("wasp run exited at start: {status}"));
            }
            if Instant::now() > deadline {
                return Err("wasp run did not start".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(d)
    }

    /// The daemon's pid (`ip netns exec` execs wasp in place: the child's pid is wasp's).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The namespace the daemon runs in.
    pub fn netns(&self) -> &str {
        &self.pair.rx
    }

    /// Wall time of `wasp ctl -f file` (a process of its own).
    ///
    /// # Errors
    /// The command failed (its stderr).
    pub fn apply_file(&self, file: &Path) -> Res<Duration> {
        let file = file.to_str().ok_or("a ruleset path that is not UTF-8")?;
        self.ctl(&["-f", file])
    }

    /// Wall time of `wasp ctl ARGS` (a process of its own, as a user types it).
    ///
    /// # Errors
    /// The command failed (its stderr).
    pub fn ctl(&self, args: &[&str]) -> Res<Duration> {
        let t0 = Instant::now();
        cmd(
            Command::new(&self.wasp)
                .arg("ctl")
                .arg("--socket")
                .arg(&self.sock)
                .args(args),
            None,
        )?;
        Ok(t0.elapsed())
    }

    /// Wall time of applying `text` as `wasp ctl -f NAME` does (one connection to the control
    /// socket, one `apply` request, its answer), without starting a process.
    ///
    /// # Errors
    /// The connection failed or the daemon refused the text.
    pub fn apply_text(&self, text: &str, name: &str) -> Res<Duration> {
        let t0 = Instant::now();
        let mut c = Client::connect(&self.sock).map_err(|e| e.to_string())?;
        c.call(
            &Request::Apply {
                text: text.to_string(),
                name: name.to_string(),
                json: false,
                echo: None,
            },
            &mut |_| Ok(()),
        )
        .map_err(|e| format!("apply {name}: {e}"))?;
        Ok(t0.elapsed())
    }

    /// The daemon's resident set now, KiB (`VmRSS`; 0 once it is gone).
    pub fn rss_kib(&self) -> u64 {
        status_kib(self.pid(), "VmRSS").unwrap_or(0)
    }

    /// Whether the daemon is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for WaspRun {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
