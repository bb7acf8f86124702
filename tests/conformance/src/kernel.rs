//! The kernel side: a namespace with a veth pair, the ruleset under test, the harness's tracing
//! table, the trace monitor and the raw socket, driven one packet at a time.

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::cmd::run;
use crate::error::{Error, Result};
use crate::netns::Netns;
use crate::socket::{PacketSocket, TraceSocket};
use crate::trace::{TraceEvent, TraceKind, Walk, parse_datagram};
use crate::verdict::{Decision, Verdict};

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
    /// Send from a namespace of its own (the peer end moved there): the frames then cross
    /// namespaces and lose the sending socket (veth's `skb_scrub_packet` orphans them), so
    /// `meta skuid`, `skgid` and `cgroup` see no socket, as for a frame from the wire.
    pub sender_apart: bool,
    /// The receiving end's link-layer address: frames sent to it are PACKET_HOST to the
    /// kernel (`meta pkttype host`), as `wasp replay` reads every unicast frame.
    pub dev_mac: Option<String>,
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            dev: "wasp0".into(),
            peer: "wasp0p".into(),
            packet_timeout: Duration::from_secs(2),
            sender_apart: false,
            dev_mac: None,
        }
    }
}

/// What happened to one frame on the kernel side.
#[derive(Debug)]
pub enum KernelOutcome {
    /// The walk ended with this decision.
    Decided(Decision),
    /// The walk did not end in the trace: the probe frame sent after it began its own walk
    /// first. The harness's head and tail chain counters then say what happened:
    /// `reached_hook` false: the stack discarded the frame before the ingress hook (e.g. a cut
    /// VLAN tag that skb_vlan_untag refuses); reported as `drop - - -`.
    /// `reached_hook` true and `events` not empty: a base chain dropped it without a rule or
    /// policy (an inet ingress chain checks IP headers before its rules); `drop - - -`.
    /// `reached_hook` true and `events` empty: the kernel ran the chains but emitted no trace
    /// for the frame (seen with a cut IPv6 extension header); only the verdict is known
    /// (`passed_all`: the tail chain ran, so every base chain accepted).
    Silent {
        /// Whether the harness's head chain counted the frame.
        reached_hook: bool,
        /// Whether the harness's tail chain counted the frame.
        passed_all: bool,
        /// The events of its partial walk.
        events: Vec<TraceEvent>,
    },
    /// The socket refused the frame (it never reached the hook).
    Refused(io::Error),
    /// No end of the walk within the timeout; the events seen.
    NoVerdict(Vec<TraceEvent>),
}

impl KernelOutcome {
    /// The full decision in verdict-line form, when the trace tells it (see
    /// [`KernelOutcome::Silent`] for `drop - - -`).
    pub fn decision(&self) -> Option<Decision> {
        match self {
            KernelOutcome::Decided(d) => Some(d.clone()),
            KernelOutcome::Silent {
                reached_hook,
                passed_all: false,
                events,
            } if !*reached_hook || !events.is_empty() => Some(Decision {
                verdict: Verdict::Drop,
                place: None,
            }),
            _ => None,
        }
    }

    /// The verdict alone when the trace was lost but the counters tell it.
    pub fn verdict_only(&self) -> Option<Verdict> {
        match self {
            KernelOutcome::Silent {
                reached_hook: true,
                passed_all,
                events,
            } if events.is_empty() => Some(if *passed_all {
                Verdict::Accept
            } else {
                Verdict::Drop
            }),
            _ => None,
        }
    }
}

/// The frame sent after a frame whose walk went quiet without ending, to tell a silent drop
/// from a slow trace: local experimental EtherType 0x88b5, source 02:77:61:73:70:00 ("wasp").
const PROBE: [u8; 60] = {
    let mut f = [0u8; 60];
    let head = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0x77, 0x61, 0x73, 0x70, 0x00, 0x88, 0xb5,
    ];
    let mut i = 0;
    while i < head.len() {
        f[i] = head[i];
        i += 1;
    }
    f
};

/// The mark the head chain gives the probe frame (ASCII "wasp"), which identifies its events.
pub const PROBE_MARK: u32 = 0x7761_7370;

/// How long a walk may stay silent before the probe frame is sent.
const QUIET: Duration = Duration::from_millis(100);

/// A live kernel side. Dropping it closes the sockets and deletes the namespace.
#[derive(Debug)]
pub struct Kernel {
    // Field order is drop order: the sockets hold the namespace, so they go first.
    socket: PacketSocket,
    trace: TraceSocket,
    netns: Netns,
    /// The sender's namespace with [`KernelConfig::sender_apart`] (held until the socket in
    /// it is closed).
    _sender: Option<Netns>,
    config: KernelConfig,
    buf: Vec<u8>,
    /// Expected values of the head and tail chain counters (frames and probes so far).
    counted: (u64, u64),
}

impl Kernel {
    /// Creates the namespace and veth pair, subscribes to its trace events, loads the harness
    /// table and opens the sending socket. The ruleset under test comes next with
    /// [`Kernel::load`].
    ///
    /// # Errors
    /// When any step fails (not root, no netns support, nft missing...).
    pub fn start(config: KernelConfig) -> Result<Self> {
        let netns = Netns::create()?;
        netns.add_veth(&config.dev, &config.peer)?;
        if let Some(mac) = &config.dev_mac {
            netns.set_mac(&config.dev, mac)?;
        }
        let sender = if config.sender_apart {
            let s = Netns::create()?;
            netns.move_link(&config.peer, &s)?;
            Some(s)
        } else {
            None
        };
        let trace = TraceSocket::open_in(&netns.path())?;
        let dev = &config.dev;
        let table = format!(
            "table netdev {HARNESS_TABLE} {{\n\
             \tchain {HEAD_CHAIN} {{\n\
             \t\ttype filter hook ingress device \"{dev}\" priority {}; policy accept;\n\
             \t\tether saddr 02:77:61:73:70:00 ether type 0x88b5 meta mark set 0x{PROBE_MARK:08x}\n\
             \t\tcounter meta nftrace set 1\n\
             \t}}\n\
             \tchain {TAIL_CHAIN} {{\n\
             \t\ttype filter hook ingress device \"{dev}\" priority {}; policy accept;\n\
             \t\tcounter\n\
             \t}}\n\
             }}\n",
            i32::MIN,
            i32::MAX
        );
        run(netns.command("nft").arg(table))?;
        let socket =
            PacketSocket::open_in(&sender.as_ref().unwrap_or(&netns).path(), &config.peer)?;
        Ok(Kernel {
            socket,
            trace,
            netns,
            _sender: sender,
            config,
            buf: vec![0; 1 << 16],
            counted: (0, 0),
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

    /// The packet counts of the head and tail chain counters.
    fn read_counters(&self) -> Result<(u64, u64)> {
        let out = run(self
            .netns
            .command("nft")
            .args(["list", "table", "netdev", HARNESS_TABLE]))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let counts: Vec<u64> = text
            .split("counter packets ")
            .skip(1)
            .filter_map(|s| s.split_whitespace().next()?.parse().ok())
            .collect();
        match counts[..] {
            [head, tail] => Ok((head, tail)),
            _ => Err(Error::Monitor(format!(
                "cannot read the harness counters from: {text}"
            ))),
        }
    }

    fn count(&mut self, d: &Decision) {
        self.counted.0 += 1;
        if d.verdict == Verdict::Accept {
            self.counted.1 += 1;
        }
    }

    fn recv(&mut self, timeout: Duration) -> Result<Option<Vec<TraceEvent>>> {
        match self.trace.recv(&mut self.buf, timeout) {
            Ok(Some(n)) => Ok(Some(parse_datagram(&self.buf[..n]))),
            Ok(None) => Ok(None),
            Err(e) => Err(Error::io("receiving trace events", e)),
        }
    }

    /// Completes a silent outcome from the counters, once the probe's walk (decision `probe`)
    /// has ended.
    fn settle(&mut self, outcome: KernelOutcome, probe: &Decision) -> Result<KernelOutcome> {
        let KernelOutcome::Silent { events, .. } = outcome else {
            return Ok(outcome);
        };
        self.count(probe);
        let (head, tail) = self.read_counters()?;
        let (exp_head, exp_tail) = self.counted;
        self.counted = (head, tail);
        Ok(KernelOutcome::Silent {
            reached_hook: head > exp_head,
            passed_all: tail > exp_tail,
            events,
        })
    }

    /// Whether `ev` is the probe frame entering the head chain (its mark is set there).
    fn is_probe_start(ev: &TraceEvent) -> bool {
        ev.table == HARNESS_TABLE
            && ev.chain == HEAD_CHAIN
            && ev.mark == Some(PROBE_MARK)
            && matches!(ev.kind, TraceKind::Rule { .. })
    }

    /// Sends one frame into the peer end and waits for the end of its walk through the
    /// ingress chains of the device. When the walk goes quiet for `QUIET` without ending,
    /// a probe frame follows; if the probe's walk begins first, the frame was dropped silently
    /// ([`KernelOutcome::Silent`]).
    ///
    /// # Errors
    /// When trace events cannot be received (e.g. ENOBUFS: events were lost).
    pub fn send(&mut self, frame: &[u8]) -> Result<KernelOutcome> {
        while self.recv(Duration::ZERO)?.is_some() {}
        if let Err(e) = self.socket.send(frame) {
            return Ok(KernelOutcome::Refused(e));
        }
        let mut walk = Walk::new(HARNESS_TABLE, TAIL_CHAIN);
        let mut probe: Option<(KernelOutcome, Walk)> = None;
        let mut probe_sent = false;
        let deadline = Instant::now() + self.config.packet_timeout;
        while Instant::now() < deadline {
            let wait = if probe_sent {
                deadline.saturating_duration_since(Instant::now())
            } else {
                QUIET
            };
            let Some(events) = self.recv(wait)? else {
                if !probe_sent {
                    self.socket
                        .send(&PROBE)
                        .map_err(|e| Error::io("sending the probe frame", e))?;
                    probe_sent = true;
                }
                continue;
            };
            for ev in events {
                if let Some((_, pw)) = &mut probe {
                    // Follow the probe to its end so that its events do not reach the next walk.
                    if let Some(pd) = pw.feed(&ev) {
                        let (outcome, _) = probe.take().expect("probe walk");
                        return self.settle(outcome, &pd);
                    }
                } else if Self::is_probe_start(&ev) {
                    let outcome = KernelOutcome::Silent {
                        reached_hook: walk.started(),
                        passed_all: false,
                        events: walk.events().to_vec(),
                    };
                    let mut pw = Walk::new(HARNESS_TABLE, TAIL_CHAIN);
                    let _ = pw.feed(&ev);
                    probe = Some((outcome, pw));
                } else if let Some(d) = walk.feed(&ev) {
                    self.count(&d);
                    return Ok(KernelOutcome::Decided(d));
                }
            }
        }
        if probe.is_some() {
            return Err(Error::Monitor("the probe frame's walk did not end".into()));
        }
        Ok(KernelOutcome::NoVerdict(walk.events().to_vec()))
    }
}
