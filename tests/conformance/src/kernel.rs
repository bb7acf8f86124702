//! The kernel side: a namespace with a veth pair, the ruleset under test, the harness's tracing
//! table, the trace monitor and the raw socket, driven one packet at a time.

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::cmd::run;
use crate::error::{Error, Result};
use crate::monitor::Monitor;
use crate::netns::Netns;
use crate::socket::PacketSocket;
use crate::trace::Walk;
use crate::verdict::Decision;

/// Name of the harness's own table; its trace lines are not part of any decision.
pub const HARNESS_TABLE: &str = "wasp_trace";
/// Chain of [`HARNESS_TABLE`] at the lowest priority (i32::MIN, which the kernel accepts): it
/// sets nftrace before any chain of the ruleset runs. A ruleset chain with the same priority
/// would run before it if registered later (equal priorities: the later hook runs first), so
/// rulesets must not use i32::MIN.
pub const HEAD_CHAIN: &str = "head";
/// Chain of [`HARNESS_TABLE`] at the highest priority (i32::MAX): it runs only when every
/// ruleset chain accepted, so its policy line marks the end of an accepted packet's walk.
pub const TAIL_CHAIN: &str = "tail";

/// How the kernel side is set up.
#[derive(Debug, Clone)]
pub struct KernelConfig {
    /// The receiving veth end, the ruleset's ingress device.
    pub dev: String,
    /// The sending veth end.
    pub peer: String,
    /// How long to wait for one packet's walk to end before giving up on it.
    pub packet_timeout: Duration,
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            dev: "wasp0".into(),
            peer: "wasp0p".into(),
            packet_timeout: Duration::from_secs(2),
        }
    }
}

/// What happened to one frame on the kernel side.
#[derive(Debug)]
pub enum KernelOutcome {
    /// The walk ended with this decision.
    Decided(Decision),
    /// The socket refused the frame (it never reached the hook).
    Refused(io::Error),
    /// No end of the walk within the timeout; the trace lines seen.
    NoVerdict(Vec<String>),
}

/// A live kernel side. Dropping it kills the monitor and deletes the namespace.
#[derive(Debug)]
pub struct Kernel {
    // Field order is drop order: socket and monitor hold the namespace, so they go first.
    socket: PacketSocket,
    monitor: Monitor,
    netns: Netns,
    config: KernelConfig,
}

impl Kernel {
    /// Creates the namespace and veth pair, starts the monitor, loads the harness table and
    /// opens the sending socket. The ruleset under test comes next with [`Kernel::load`].
    ///
    /// # Errors
    /// When any step fails (not root, no netns support, nft missing...).
    pub fn start(config: KernelConfig) -> Result<Self> {
        let netns = Netns::create()?;
        netns.add_veth(&config.dev, &config.peer)?;
        let monitor = Monitor::start(&netns)?;
        let dev = &config.dev;
        let table = format!(
            "table netdev {HARNESS_TABLE} {{\n\
             \tchain {HEAD_CHAIN} {{\n\
             \t\ttype filter hook ingress device \"{dev}\" priority {}; policy accept;\n\
             \t\tmeta nftrace set 1\n\
             \t}}\n\
             \tchain {TAIL_CHAIN} {{\n\
             \t\ttype filter hook ingress device \"{dev}\" priority {}; policy accept;\n\
             \t}}\n\
             }}\n",
            i32::MIN,
            i32::MAX
        );
        run(netns.command("nft").arg(table))?;
        let socket = PacketSocket::open_in(&netns.path(), &config.peer)?;
        Ok(Kernel {
            socket,
            monitor,
            netns,
            config,
        })
    }

    /// The namespace (to run more commands in it).
    pub fn netns(&self) -> &Netns {
        &self.netns
    }

    /// Loads a ruleset file with `nft -f` (run from the file's folder, so relative includes
    /// work as they do for the user).
    ///
    /// # Errors
    /// When nft refuses the ruleset.
    pub fn load(&mut self, ruleset: &Path) -> Result<()> {
        let abs = std::fs::canonicalize(ruleset)
            .map_err(|e| Error::io(format!("ruleset {}", ruleset.display()), e))?;
        let mut cmd = self.netns.command("nft");
        cmd.arg("-f").arg(&abs);
        if let Some(dir) = abs.parent() {
            cmd.current_dir(dir);
        }
        run(&mut cmd)?;
        self.monitor.drain();
        Ok(())
    }

    /// `nft -a list ruleset` in the namespace.
    ///
    /// # Errors
    /// When nft fails.
    pub fn list_ruleset(&self) -> Result<String> {
        let out = run(self.netns.command("nft").args(["-a", "list", "ruleset"]))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Sends one frame into the peer end and waits for the end of its walk through the
    /// ingress chains of the device.
    ///
    /// # Errors
    /// When the monitor dies.
    pub fn send(&mut self, frame: &[u8]) -> Result<KernelOutcome> {
        self.monitor.drain();
        if let Err(e) = self.socket.send(frame) {
            return Ok(KernelOutcome::Refused(e));
        }
        let mut walk = Walk::new(HARNESS_TABLE, TAIL_CHAIN);
        let deadline = Instant::now() + self.config.packet_timeout;
        while let Some(line) = self.monitor.next_line_until(deadline)? {
            if let Some(d) = walk.feed(&line) {
                return Ok(KernelOutcome::Decided(d));
            }
        }
        Ok(KernelOutcome::NoVerdict(walk.lines().to_vec()))
    }
}
