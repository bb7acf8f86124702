//! `nft -a monitor` inside the namespace, as a child process whose stdout lines arrive on a
//! channel.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cmd::{display, run};
use crate::error::{Error, Result};
use crate::netns::Netns;

/// A running `ip netns exec NS nft -a monitor` (all events: ruleset changes and traces); killed
/// on drop.
#[derive(Debug)]
pub struct Monitor {
    child: Child,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl Monitor {
    /// Starts the monitor and waits until it provably listens: it must print the events of a
    /// probe table added and deleted in the namespace (retried for up to 5 s).
    ///
    /// # Errors
    /// When nft cannot be started or never reports the probe.
    pub fn start(netns: &Netns) -> Result<Self> {
        let mut cmd = netns.command("nft");
        cmd.args(["-a", "monitor"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| Error::Command {
            command: display(&cmd),
            detail: e.to_string(),
        })?;
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().expect("stdout is piped");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().expect("stderr is piped");
        let err_buf = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err_pipe.read_to_string(&mut s);
            if let Ok(mut b) = err_buf.lock() {
                b.push_str(&s);
            }
        });
        let mut monitor = Monitor {
            child,
            lines,
            stderr,
        };
        monitor.sync(netns)?;
        Ok(monitor)
    }

    fn sync(&mut self, netns: &Netns) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            run(netns
                .command("nft")
                .arg("add table netdev wasp_probe; delete table netdev wasp_probe"))?;
            let step = Instant::now() + Duration::from_millis(200);
            while let Some(line) = self.next_line_until(step)? {
                if line.starts_with("add table netdev wasp_probe") {
                    self.drain();
                    return Ok(());
                }
            }
        }
        Err(Error::Monitor(format!(
            "no events within 5 s; stderr: {}",
            self.stderr()
        )))
    }

    /// The next line, or `None` when `deadline` passes first.
    ///
    /// # Errors
    /// [`Error::Monitor`] when the child has exited.
    pub fn next_line_until(&mut self, deadline: Instant) -> Result<Option<String>> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(l) => Ok(Some(l)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => {
                Err(Error::Monitor(format!("exited; stderr: {}", self.stderr())))
            }
        }
    }

    /// Discards the lines already received; returns them.
    pub fn drain(&mut self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
