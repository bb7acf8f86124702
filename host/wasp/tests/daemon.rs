//! The daemon's worker loop and control side over in-memory ports: verdicts and statistics,
//! counters summed over workers, a ruleset change at a vector boundary that keeps the counts,
//! and a change that fails and leaves everything as it was.

mod common;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{eth, ipv4, tcp, udp};
use wasp::daemon::events::EventBus;
use wasp::daemon::mailbox::Mailbox;
use wasp::daemon::state::Daemon;
use wasp::daemon::stats::{StatsSnapshot, WorkerStats};
use wasp::daemon::worker::{Clock, Worker, WorkerLinks};
use wasp_gateway::Forwarder;
use wasp_io::{Frame, IoError, PortGroup, PortInfo, PortStats, TxSide};

/// Frames by port index, shared between the test and the fake ports.
type Queue = Arc<Mutex<VecDeque<(usize, Vec<u8>)>>>;
/// Frames sent, by port index.
type Sent = Arc<Mutex<Vec<(usize, Vec<u8>)>>>;

/// A port group fed from a shared queue of (port, frame); sends recorded.
struct MemPorts {
    info: Vec<PortInfo>,
    rx: Queue,
    sent: Sent,
    counts: Vec<PortStats>,
}

impl MemPorts {
    fn new(names: &[&str], rx: Queue, sent: Sent) -> Self {
        MemPorts {
            info: names
                .iter()
                .map(|n| PortInfo {
                    name: n.to_string(),
                    ifindex: 0,
                    mac: [0; 6],
                    mtu: 1500,
                })
                .collect(),
            rx,
            sent,
            counts: vec![PortStats::default(); names.len()],
        }
    }
}

struct MemTx<'a>(&'a Mutex<Vec<(usize, Vec<u8>)>>, usize);

impl TxSide for MemTx<'_> {
    fn queue_with(&mut self, port: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        if port >= self.1 {
            return false;
        }
        let mut frame = vec![0; len];
        fill(&mut frame);
        self.0.lock().unwrap().push((port, frame));
        true
    }
}

impl PortGroup for MemPorts {
    fn ports(&self) -> &[PortInfo] {
        &self.info
    }

    fn poll(
        &mut self,
        min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[Frame<'_>]),
    ) -> Result<usize, IoError> {
        self.poll_tx(min, max, timeout, &mut |f, _| on_rx(f))
    }

    fn poll_tx(
        &mut self,
        _min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[Frame<'_>], &mut dyn TxSide),
    ) -> Result<usize, IoError> {
        let batch: Vec<(usize, Vec<u8>)> = {
            let mut q = self.rx.lock().unwrap();
            let n = q.len().min(max);
            q.drain(..n).collect()
        };
        if batch.is_empty() {
            std::thread::sleep(timeout.min(Duration::from_millis(1)));
            return Ok(0);
        }
        for (p, f) in &batch {
            self.counts[*p].rx_packets += 1;
            self.counts[*p].rx_bytes += f.len() as u64;
        }
        let frames: Vec<Frame<'_>> = batch
            .iter()
            .map(|(p, f)| Frame { port: *p, data: f })
            .collect();
        let mut tx = MemTx(&self.sent, self.info.len());
        on_rx(&frames, &mut tx);
        Ok(frames.len())
    }

    fn queue(&mut self, port: usize, frame: &[u8]) -> bool {
        MemTx(&self.sent, self.info.len()).queue(port, frame)
    }

    fn flush(&mut self) -> Result<(), IoError> {
        Ok(())
    }

    fn stats(&self) -> Vec<PortStats> {
        self.counts.clone()
    }
}

const RULESET: &str = r#"
table netdev filter {
    chain ingress {
        type filter hook ingress device "veth0" priority 0; policy accept;
        tcp dport 22 counter drop
        udp dport 53 counter accept
    }
}
"#;

fn ssh() -> Vec<u8> {
    eth(
        1,
        0x0800,
        &ipv4([10, 0, 0, 1], [10, 0, 0, 2], 6, &tcp(40000, 22, 0x02)),
    )
}

fn dns() -> Vec<u8> {
    eth(
        1,
        0x0800,
        &ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, &udp(40000, 53)),
    )
}

/// A daemon with `n` workers over one shared in-memory queue, each worker on its thread.
struct Rig {
    daemon: Arc<Daemon>,
    rx: Queue,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<Result<(), String>>>,
}

impl Rig {
    fn start(text: &str, n: usize) -> Rig {
        let ruleset = wasp_ruleset::parse_str(text, "test.nft").expect("ruleset");
        Rig::with(ruleset, "test.nft".into(), n)
    }

    /// A rig running the ruleset file `path` (which `Daemon::reload` reads again).
    fn start_file(path: &std::path::Path, n: usize) -> Rig {
        let ruleset = wasp_ruleset::parse_file(path).expect("ruleset");
        Rig::with(ruleset, path.to_path_buf(), n)
    }

    fn with(ruleset: wasp_ruleset::Ruleset, path: std::path::PathBuf, n: usize) -> Rig {
        let stop = Arc::new(AtomicBool::new(false));
        let events = Arc::new(EventBus::default());
        let clock = Clock::new();
        let links: Vec<WorkerLinks> = (0..n)
            .map(|_| WorkerLinks {
                mailbox: Arc::new(Mailbox::default()),
                stats: Arc::new(WorkerStats::default()),
                events: events.clone(),
                stop: stop.clone(),
                clock,
                published: std::sync::Arc::default(),
            })
            .collect();
        let (daemon, bundles) =
            Daemon::new(ruleset, path, links.clone(), events, clock).expect("daemon");
        let rx = Arc::new(Mutex::new(VecDeque::new()));
        let sent = Arc::new(Mutex::new(Vec::new()));
        let threads = bundles
            .into_iter()
            .zip(links)
            .enumerate()
            .map(|(i, (b, l))| {
                let ports = MemPorts::new(&["veth0"], rx.clone(), sent.clone());
                std::thread::spawn(move || {
                    Worker::new(i, ports, b, Forwarder::new(None), l)
                        .run()
                        .map(|_| ())
                })
            })
            .collect();
        Rig {
            daemon: Arc::new(daemon),
            rx,
            stop,
            threads,
        }
    }

    fn send(&self, frames: impl IntoIterator<Item = Vec<u8>>) {
        self.rx
            .lock()
            .unwrap()
            .extend(frames.into_iter().map(|f| (0, f)));
    }

    /// Wait until the workers have classified `n` packets in all.
    fn wait_packets(&self, n: u64) -> StatsSnapshot {
        for _ in 0..2000 {
            let s = StatsSnapshot::sum(&self.daemon.stats());
            if s.packets >= n {
                return s;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        panic!(
            "workers classified {:?}",
            StatsSnapshot::sum(&self.daemon.stats())
        );
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().expect("worker thread").expect("worker");
        }
    }
}

fn rule_counts(r: &wasp_ruleset::Ruleset) -> Vec<(u64, u64)> {
    r.tables[0].chains[0]
        .rules
        .iter()
        .flat_map(|rule| rule.stmts.iter())
        .filter_map(|s| match s {
            wasp_ruleset::model::Stmt::Counter { packets, bytes } => Some((*packets, *bytes)),
            _ => None,
        })
        .collect()
}

#[test]
fn verdicts_stats_and_counters_summed_over_two_workers() {
    let rig = Rig::start(RULESET, 2);
    let (s, d) = (ssh(), dns());
    rig.send((0..30).flat_map(|_| [s.clone(), d.clone(), d.clone()]));
    let st = rig.wait_packets(90);
    assert_eq!(st.packets, 90);
    assert_eq!(st.accepted, 60);
    assert_eq!(st.dropped(), 30);
    assert_eq!(st.bytes, 30 * (s.len() + 2 * d.len()) as u64);
    let (r, generation) = rig.daemon.ruleset().expect("ruleset");
    assert_eq!(generation, 1);
    // Counter bytes are skb->len at netdev ingress: the frame without its Ethernet header.
    assert_eq!(
        rule_counts(&r),
        vec![
            (30, 30 * (s.len() - 14) as u64),
            (60, 60 * (d.len() - 14) as u64)
        ]
    );
    rig.daemon
        .reset(&wasp_ctl::proto::ResetRequest::Counters {
            family: None,
            table: None,
        })
        .expect("reset");
    let (r, _) = rig.daemon.ruleset().expect("ruleset");
    assert_eq!(rule_counts(&r), vec![(0, 0), (0, 0)]);
    rig.stop();
}

#[test]
fn ruleset_change_keeps_counts_and_a_failing_one_changes_nothing() {
    let rig = Rig::start(RULESET, 2);
    rig.send((0..10).map(|_| ssh()));
    rig.wait_packets(10);
    // A batch-like change: the same rules plus one more; the running counts carry over.
    let (mut r, _) = rig.daemon.ruleset().expect("ruleset");
    let more = wasp_ruleset::parse_str(
        &RULESET.replace(
            "udp dport 53 counter accept",
            "udp dport 53 counter accept\n        udp dport 54 counter drop",
        ),
        "new.nft",
    )
    .expect("new");
    r.tables[0].chains[0].rules = more.tables[0].chains[0].rules.clone();
    let g = rig.daemon.replace(r).expect("replace");
    assert_eq!(g, 2);
    rig.send((0..5).map(|_| {
        eth(
            1,
            0x0800,
            &ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, &udp(1, 54)),
        )
    }));
    let st = rig.wait_packets(15);
    assert_eq!(st.dropped(), 15);
    let (r, g) = rig.daemon.ruleset().expect("ruleset");
    assert_eq!(g, 2);
    let counts = rule_counts(&r);
    assert_eq!(counts[0].0, 10, "{counts:?}");
    assert_eq!(counts[2].0, 5, "{counts:?}");
    // A ruleset that does not compile (its jump target removed from the model) is refused
    // and generation 2 keeps running with its counts.
    let mut bad = wasp_ruleset::parse_str(
        "table netdev filter {\n chain ingress {\n type filter hook ingress device \"veth0\" priority 0; policy drop;\n jump x\n }\n chain x {\n }\n}\n",
        "bad.nft",
    )
    .expect("parses");
    bad.tables[0].chains.retain(|c| c.name != "x");
    assert!(rig.daemon.replace(bad).is_err());
    rig.send([dns()]);
    let st = rig.wait_packets(16);
    assert_eq!(st.accepted, 1, "policy accept of generation 2 still runs");
    let (r, g) = rig.daemon.ruleset().expect("ruleset");
    assert_eq!((g, rule_counts(&r)[0].0), (2, 10));
    rig.stop();
}

/// The daemon's worker over capture ports (the port group `wasp replay` drives): what it
/// forwards is written to the output port's capture, and the worker's counts and the ports'
/// agree. (The worker describes no frame it sends, as live ports need nothing: the group
/// stamps them with the latest capture time of the poll; replay stamps each with its packet's.)
#[test]
fn the_worker_runs_over_capture_ports() {
    use wasp_io::capture::{CaptureReader, CaptureWriter, Format, OutFrame, TsResolution};
    use wasp_io::{PcapGroup, PcapInput, PcapOptions, PcapPort};

    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.pcap");
    let out = tmp.path().join("tx-veth1.pcap");
    let (s, d) = (ssh(), dns());
    let mut w = CaptureWriter::create(&input, Format::Pcap, TsResolution::Micro).unwrap();
    for (i, f) in [&s, &d, &d, &s].into_iter().enumerate() {
        w.write(&OutFrame::new(1_000_000 * (i as u64 + 1), f))
            .unwrap();
    }
    w.finish().unwrap();
    let text = r#"
table netdev filter {
    chain ingress {
        type filter hook ingress device "veth0" priority 0; policy accept;
        tcp dport 22 counter drop
        udp dport 53 counter fwd to "veth1"
    }
}
"#;
    let ruleset = wasp_ruleset::parse_str(text, "fwd.nft").expect("ruleset");
    let links = vec![WorkerLinks {
        mailbox: Arc::new(Mailbox::default()),
        stats: Arc::new(WorkerStats::default()),
        events: Arc::new(EventBus::default()),
        stop: Arc::new(AtomicBool::new(false)),
        clock: Clock::new(),
        published: std::sync::Arc::default(),
    }];
    let (daemon, bundles) = Daemon::new(
        ruleset,
        "fwd.nft".into(),
        links.clone(),
        links[0].events.clone(),
        links[0].clock,
    )
    .expect("daemon");
    let ports = PcapGroup::open(
        vec![
            PcapPort::input("veth0"),
            PcapPort {
                output: Some(out.clone()),
                ..PcapPort::input("veth1")
            },
        ],
        vec![PcapInput::new(&input, 0)],
        PcapOptions::default(),
    )
    .unwrap();
    let bundle = bundles.into_iter().next().unwrap();
    let mut worker = Worker::new(0, ports, bundle, Forwarder::new(None), links[0].clone());
    while !worker.ports().exhausted() {
        worker.step(Duration::ZERO).unwrap();
    }
    let st = worker.ports().stats();
    assert_eq!((st[0].rx_packets, st[1].tx_packets), (4, 2));
    drop(worker);
    let total = StatsSnapshot::sum(&daemon.stats());
    assert_eq!(
        (total.packets, total.transmitted, total.dropped()),
        (4, 2, 2)
    );
    let mut r = CaptureReader::open(&out).unwrap();
    let mut sent = Vec::new();
    while let Some(f) = r.next_frame() {
        let f = f.unwrap();
        sent.push((f.ts_ns, f.data.to_vec()));
    }
    assert_eq!(sent, [(4_000_000, d.clone()), (4_000_000, d)]);
}

/// The counts of the `udp dport 53` rule (the one with a quota): its counter's packets and its
/// quota's used bytes; and the packets of set element 10.0.0.1's counter.
fn dns_counts(r: &wasp_ruleset::Ruleset) -> (u64, u64, u64) {
    use wasp_ruleset::model::{KeyPart, Stmt};
    let t = &r.tables[0];
    let rule = t.chains[0]
        .rules
        .iter()
        .find(|r| r.stmts.iter().any(|s| matches!(s, Stmt::Quota { .. })))
        .expect("the dns rule");
    let (mut packets, mut used) = (0, 0);
    for s in &rule.stmts {
        match s {
            Stmt::Counter { packets: p, .. } => packets = *p,
            Stmt::Quota { quota, .. } => used = quota.used,
            _ => {}
        }
    }
    let elem = t.sets[0]
        .elements
        .iter()
        .find(|e| matches!(&e.key[..], [KeyPart::Value(v)] if v.bytes == [10, 0, 0, 1].into()))
        .expect("element 10.0.0.1");
    (packets, used, elem.packets())
}

/// Counts are exact through changes and concurrent resets: while 20 000 frames pass two
/// workers, 100 batches delete and add set elements (moving the counted element's position)
/// and insert and add rules, and three threads reset every counter in a loop. What the resets
/// listed plus the final counts equals the frames sent, for the rule's counter and the
/// element's; the rule's quota (which `reset counters` leaves alone) consumed every frame's
/// bytes once.
#[test]
fn counts_stay_exact_through_changes_and_concurrent_resets() {
    const FRAMES: u64 = 20_000;
    let text = r#"
table netdev filter {
    set s {
        type ipv4_addr
        counter
        elements = { 10.9.0.1, 10.9.0.2, 10.0.0.1 }
    }
    chain ingress {
        type filter hook ingress device "veth0" priority 0; policy accept;
        tcp dport 22 counter drop
        ip saddr @s
        udp dport 53 quota 1000 mbytes counter accept
    }
}
"#;
    let rig = Rig::start(text, 2);
    let done = Arc::new(AtomicBool::new(false));
    let resetters: Vec<_> = (0..3)
        .map(|_| {
            let (daemon, done) = (rig.daemon.clone(), done.clone());
            std::thread::spawn(move || {
                let (mut packets, mut elem) = (0, 0);
                while !done.load(Ordering::Relaxed) {
                    let (r, _) = daemon
                        .reset(&wasp_ctl::proto::ResetRequest::Counters {
                            family: None,
                            table: None,
                        })
                        .expect("reset");
                    let (p, _, e) = dns_counts(&r);
                    packets += p;
                    elem += e;
                    std::thread::sleep(Duration::from_millis(3));
                }
                (packets, elem)
            })
        })
        .collect();
    let changer = {
        let daemon = rig.daemon.clone();
        std::thread::spawn(move || {
            for i in 0..100 {
                let batch = match i % 10 {
                    0 => {
                        "insert rule netdev filter ingress tcp dport 10 counter drop\n".to_string()
                    }
                    1 => "add rule netdev filter ingress tcp dport 9 counter drop\n".to_string(),
                    _ if i % 2 == 0 => format!(
                        "delete element netdev filter s {{ 10.9.0.{} }}\n",
                        1 + (i / 2) % 2
                    ),
                    _ => format!(
                        "add element netdev filter s {{ 10.9.0.{} }}\n",
                        1 + (i / 2) % 2
                    ),
                };
                daemon.apply(&batch, "<batch>").expect(&batch);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let d = dns();
    for _ in 0..FRAMES / 100 {
        rig.send((0..100).map(|_| d.clone()));
        std::thread::sleep(Duration::from_millis(1));
    }
    let st = rig.wait_packets(FRAMES);
    changer.join().expect("changes");
    done.store(true, Ordering::Relaxed);
    let (mut packets, mut elem) = (0, 0);
    for t in resetters {
        let (p, e) = t.join().expect("resetter");
        packets += p;
        elem += e;
    }
    assert_eq!((st.packets, st.accepted), (FRAMES, FRAMES));
    let (r, g) = rig.daemon.ruleset().expect("ruleset");
    assert_eq!(g, 101);
    let (p, used, e) = dns_counts(&r);
    assert_eq!(
        packets + p,
        FRAMES,
        "resets listed {packets}, then {p} remained"
    );
    assert_eq!(elem + e, FRAMES, "resets listed {elem}, then {e} remained");
    assert_eq!(used, FRAMES * (d.len() as u64 - 14));
    rig.stop();
}

/// `plugin load counter FILE` would silently replace what serves every `counter` statement:
/// refused, naming the ways that say so; another name loads.
#[test]
fn the_built_in_counter_name_cannot_be_taken_by_a_load() {
    let rig = Rig::start(RULESET, 1);
    let counter = wasp_guests::plugin_dir().join("counter.wasm");
    let e = rig
        .daemon
        .load_plugin("counter", &counter)
        .expect_err("refused")
        .to_string();
    assert!(
        e.contains("built-in counter") && e.contains("plugin swap counter"),
        "{e}"
    );
    rig.daemon
        .load_plugin("mycounter", &counter)
        .expect("another name loads");
    // The rules still count with the bundled counter.
    rig.send([dns(), dns()]);
    rig.wait_packets(2);
    let (r, _) = rig.daemon.ruleset().expect("ruleset");
    assert_eq!(rule_counts(&r)[1].0, 2);
    rig.stop();
}

/// A file that declares a plugin applies twice, as a file that declares a set does (nft's
/// declarations are idempotent); the same name with another path is refused and changes
/// nothing.
#[test]
fn a_file_declaring_a_plugin_applies_twice() {
    let rig = Rig::start(RULESET, 1);
    let probe = wasp_guests::test_guest("probe");
    let file = format!(
        "table netdev extra {{\n\tplugin probe {{ path \"{}\"; }}\n\tset s {{ type ipv4_addr; }}\n}}\n",
        probe.display()
    );
    assert_eq!(rig.daemon.apply(&file, "extra.nft").expect("first"), 2);
    assert_eq!(rig.daemon.apply(&file, "extra.nft").expect("again"), 3);
    let (r, _) = rig.daemon.ruleset().expect("ruleset");
    assert_eq!(r.tables[1].plugins.len(), 1);
    let other = "table netdev extra {\n\tplugin probe { path \"other.wasm\"; }\n}\n";
    let e = rig
        .daemon
        .apply(other, "other.nft")
        .expect_err("another path");
    assert!(e.to_string().contains("with another path"), "{e}");
    assert_eq!(rig.daemon.ruleset().expect("ruleset").1, 3);
    rig.stop();
}

/// `wasp ctl plugin swap` to a version that takes no state succeeds and warns, per worker, that
/// what the plugin kept starts over; a swap that carries the state is quiet.
#[test]
fn a_swap_that_drops_the_state_says_so() {
    use clap::Parser;
    let v1 = wasp_guests::test_guest("swap_v1");
    let rules = format!(
        "table netdev filter {{\n\tplugin swapper {{ path \"{}\"; }}\n\tchain ingress {{\n\t\ttype filter hook ingress device \"veth0\" priority 0; policy accept;\n\t\tswapper x accept\n\t}}\n}}\n",
        v1.display()
    );
    let rig = Rig::start(&rules, 2);
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("wasp.sock");
    let control = wasp::daemon::control::Control::new(rig.daemon.clone());
    let _server =
        wasp_ctl::Server::start(wasp_ctl::ServerConfig::new(&sock), Arc::new(control)).unwrap();
    let swap = |to: &str| {
        let path = wasp_guests::test_guest(to);
        let cli = wasp::cli::Cli::try_parse_from([
            "wasp",
            "ctl",
            "--socket",
            sock.to_str().unwrap(),
            "plugin",
            "swap",
            "swapper",
            path.to_str().unwrap(),
        ])
        .unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        wasp::cli::run(&cli, &mut out, &mut err).expect("swap");
        String::from_utf8(err).unwrap()
    };
    assert_eq!(swap("swap_v2"), "", "state carried: nothing to say");
    let err = swap("swap_v3");
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(
        err.starts_with(
            "wasp ctl: warning: plugin swapper on worker 0 started without the old version's state"
        ),
        "{err}"
    );
    rig.stop();
}

/// nft's reset commands through `wasp ctl`: each lists what it zeroes with the values it had
/// and zeroes only that.
#[test]
fn reset_element_counter_quota_and_rules_zero_what_they_name() {
    use clap::Parser;
    let rules = r#"
table netdev filter {
    counter c {
    }
    quota q {
        1000 mbytes
    }
    set s {
        type ipv4_addr
        counter
        elements = { 10.0.0.1, 10.0.0.9 }
    }
    chain ingress {
        type filter hook ingress device "veth0" priority 0; policy accept;
        ip saddr @s
        udp dport 53 counter name "c"
        udp dport 53 quota name "q"
        udp dport 53 quota 1000 mbytes counter accept
    }
}
"#;
    let rig = Rig::start(rules, 2);
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("wasp.sock");
    let control = wasp::daemon::control::Control::new(rig.daemon.clone());
    let _server =
        wasp_ctl::Server::start(wasp_ctl::ServerConfig::new(&sock), Arc::new(control)).unwrap();
    let ctl = |words: &[&str]| {
        let mut argv = vec!["wasp", "ctl", "--socket", sock.to_str().unwrap()];
        argv.extend_from_slice(words);
        let cli = wasp::cli::Cli::try_parse_from(argv).unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        wasp::cli::run(&cli, &mut out, &mut err).expect("ctl");
        String::from_utf8(out).unwrap()
    };
    let d = dns();
    let b = 3 * (d.len() as u64 - 14);
    rig.send((0..3).map(|_| d.clone()));
    rig.wait_packets(3);
    let out = ctl(&["reset", "element", "netdev", "filter", "s", "{ 10.0.0.1 }"]);
    assert!(
        out.contains(&format!(
            "elements = {{ 10.0.0.1 counter packets 3 bytes {b} }}"
        )),
        "{out}"
    );
    let out = ctl(&["reset", "counter", "netdev", "filter", "c"]);
    assert!(
        out.contains(&format!("counter c {{\n\t\tpackets 3 bytes {b}\n")) && !out.contains("quota"),
        "{out}"
    );
    let out = ctl(&["reset", "quota", "netdev", "filter", "q"]);
    assert!(
        out.contains(&format!("1000 mbytes used {b} bytes")),
        "{out}"
    );
    let listing = ctl(&["list", "ruleset"]);
    for zeroed in [
        "10.0.0.1 counter packets 0 bytes 0",
        "packets 0 bytes 0\n\t}",
    ] {
        assert!(listing.contains(zeroed), "{zeroed}: {listing}");
    }
    assert!(
        !listing.contains("quota q {\n\t\t1000 mbytes used"),
        "{listing}"
    );
    // The rule's own counter and quota were not reset by any of those.
    assert!(
        listing.contains(&format!(
            "quota 1000 mbytes used {b} bytes counter packets 3 bytes {b} accept"
        )),
        "{listing}"
    );
    let out = ctl(&["reset", "rules", "table", "netdev", "filter"]);
    assert!(
        out.contains(&format!(
            "quota 1000 mbytes used {b} bytes counter packets 3 bytes {b} accept"
        )),
        "{out}"
    );
    let listing = ctl(&["list", "ruleset"]);
    assert!(
        listing.contains("udp dport 53 quota 1000 mbytes counter packets 0 bytes 0 accept"),
        "{listing}"
    );
    rig.stop();
}

/// A reload (SIGHUP) replaces the ruleset by the file's, keeps the elements added at run time
/// to sets the file still declares, and leaves everything as it was when the file is broken.
#[test]
fn a_reload_takes_the_file_and_keeps_runtime_elements() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.nft");
    let rules = |elements: &str, extra: &str| {
        format!(
            "table netdev filter {{\n\tset s {{\n\t\ttype ipv4_addr\n\t\telements = {{ {elements} }}\n\t}}\n{extra}\tchain ingress {{\n\t\ttype filter hook ingress device \"veth0\" priority 0; policy accept;\n\t\tip saddr @s counter drop\n\t}}\n}}\n"
        )
    };
    std::fs::write(&file, rules("10.0.0.1, 10.0.0.2", "")).unwrap();
    let rig = Rig::start_file(&file, 1);
    rig.daemon
        .apply("add element netdev filter s { 10.0.0.7 }\n", "<element>")
        .expect("runtime element");
    // The file now drops 10.0.0.2, adds 10.0.0.8 and a set t.
    std::fs::write(
        &file,
        rules("10.0.0.1, 10.0.0.8", "\tset t {\n\t\ttype ipv4_addr\n\t}\n"),
    )
    .unwrap();
    let (g, note) = rig.daemon.reload().expect("reload");
    assert_eq!((g, note), (3, None));
    let (r, _) = rig.daemon.ruleset().expect("ruleset");
    let text = wasp_ruleset::print_ruleset(&r, false);
    // The file's elements and the one added at run time (listed sorted, as nft does); not the
    // one the file dropped.
    assert!(
        text.contains("elements = { 10.0.0.1, 10.0.0.7,\n\t\t\t     10.0.0.8 }"),
        "{text}"
    );
    assert!(!text.contains("10.0.0.2"), "{text}");
    assert!(text.contains("set t {"), "{text}");
    // A broken file: refused at its place, nothing changes.
    std::fs::write(
        &file,
        "table netdev filter {\n\tchain c {\n\t\tfrobnicate\n\t}\n}\n",
    )
    .unwrap();
    let e = rig.daemon.reload().expect_err("broken").to_string();
    assert!(e.contains(&format!("{}:3:3", file.display())), "{e}");
    assert_eq!(rig.daemon.ruleset().expect("ruleset").1, 3);
    rig.stop();
}

/// A large set's elements are held by the program's set (one copy in the daemon), and a reload
/// still tells the elements added at run time from the file's: they are kept, the ones the
/// file dropped go.
#[test]
fn a_reload_keeps_the_runtime_elements_of_a_held_set() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.nft");
    let n = wasp_core::HOLD_MIN + 500;
    let addr = |i: usize| format!("10.{}.{}.{}", i >> 16, (i >> 8) & 0xff, i & 0xff);
    let rules = |from: usize| {
        let elements: Vec<String> = (from..from + n).map(addr).collect();
        format!(
            "table netdev filter {{\n\tset s {{\n\t\ttype ipv4_addr\n\t\telements = {{ {} }}\n\t}}\n\tchain ingress {{\n\t\ttype filter hook ingress device \"veth0\" priority 0; policy accept;\n\t\tip saddr @s counter drop\n\t}}\n}}\n",
            elements.join(", ")
        )
    };
    std::fs::write(&file, rules(0)).unwrap();
    let rig = Rig::start_file(&file, 1);
    let held = |rig: &Rig| {
        let (r, _) = rig.daemon.ruleset().expect("ruleset");
        let s = &r.tables[0].sets[0];
        (s.elements.holder().is_some(), s.elements.len())
    };
    assert_eq!(held(&rig), (true, n));
    rig.daemon
        .apply(
            "add element netdev filter s { 192.168.0.1, 192.168.0.2 }\n",
            "<element>",
        )
        .expect("runtime elements");
    assert_eq!(held(&rig), (true, n + 2));
    // The file now starts one element later: 10.0.0.0 goes, one new element comes.
    std::fs::write(&file, rules(1)).unwrap();
    rig.daemon.reload().expect("reload");
    assert_eq!(held(&rig), (true, n + 2));
    let (r, _) = rig.daemon.ruleset().expect("ruleset");
    let text = wasp_ruleset::print_ruleset(&r, false);
    let words: std::collections::HashSet<&str> = text
        .split(|c: char| c == ',' || c == '{' || c == '}' || c.is_whitespace())
        .collect();
    assert!(words.contains("192.168.0.1") && words.contains("192.168.0.2"));
    assert!(words.contains(addr(n).as_str()), "the file's new element");
    assert!(
        !words.contains("10.0.0.0"),
        "the element the file dropped is gone"
    );
    // Once the file dropped is gone, another reload of the same file changes nothing.
    rig.daemon.reload().expect("reload");
    assert_eq!(held(&rig), (true, n + 2));
    rig.stop();
}

/// A UDP frame to `dst` port 53.
fn udp_to(dst: [u8; 4]) -> Vec<u8> {
    eth(1, 0x0800, &ipv4([10, 9, 9, 9], dst, 17, &udp(40000, 53)))
}

/// Element batches change the running sets in place (set transactions, not whole compiles)
/// while two workers look up other elements: 1 000 batches that add and delete elements of a
/// 5 000-element concatenated interval set, a hash set and an interval set; every frame to an
/// element that no batch touches is dropped throughout (0 wrong verdicts), and afterwards the
/// frames to the changed elements get the verdicts of what the sets hold.
#[test]
fn element_batches_are_set_transactions_and_other_lookups_never_miss() {
    let mut text = String::from(
        "table netdev filter {\n set c {\n  type ipv4_addr . inet_service\n  flags interval\n  elements = { ",
    );
    // Over `wasp_sets::pipapo::OVERLAY_MIN` elements: the index keeps an overlay of changes.
    for i in 0..5000u32 {
        let sep = if i == 0 { "" } else { ", " };
        text += &format!("{sep}10.1.{}.{}/32 . 50-60", i / 250, i % 250);
    }
    text += " }\n }\n set h {\n  type ipv4_addr\n  elements = { 10.2.0.1 }\n }\n set i {\n  type ipv4_addr\n  flags interval\n  elements = { 10.3.0.0/24 }\n }\n chain ingress {\n  type filter hook ingress device \"veth0\" priority 0; policy accept;\n  ip daddr . udp dport @c counter drop\n  ip daddr @h drop\n  ip daddr @i drop\n }\n}\n";
    let rig = Rig::start(&text, 2);
    let changer = {
        let daemon = rig.daemon.clone();
        std::thread::spawn(move || {
            for k in 0..1000u32 {
                let (a, b) = ((k / 2) % 200, k % 2);
                let batch = if b == 0 {
                    format!(
                        "add element netdev filter c {{ 10.4.0.{a} . 53 }}\nadd element netdev filter h {{ 10.5.0.{a} }}\nadd element netdev filter i {{ 10.6.{a}.0/24 }}\n"
                    )
                } else {
                    format!(
                        "delete element netdev filter c {{ 10.4.0.{a} . 53 }}\ndelete element netdev filter h {{ 10.5.0.{a} }}\ndelete element netdev filter i {{ 10.6.{a}.0/24 }}\n"
                    )
                };
                daemon.apply(&batch, "<batch>").expect(&batch);
            }
            // Left in: the last 100 adds of a kept range.
            for a in 0..100u32 {
                let batch = format!("add element netdev filter c {{ 10.4.1.{a} . 53 }}\n");
                daemon.apply(&batch, "<batch>").expect(&batch);
            }
        })
    };
    let stable = [
        udp_to([10, 1, 0, 0]),
        udp_to([10, 1, 7, 249]),
        udp_to([10, 2, 0, 1]),
        udp_to([10, 3, 0, 200]),
    ];
    let mut sent = 0;
    while !changer.is_finished() {
        rig.send((0..50).flat_map(|_| stable.iter().cloned()));
        sent += 200;
        std::thread::sleep(Duration::from_millis(1));
    }
    changer.join().expect("changes");
    let st = rig.wait_packets(sent);
    assert_eq!(
        (st.packets, st.accepted),
        (sent, 0),
        "a frame to a kept element was accepted"
    );
    assert_eq!(rig.daemon.set_transactions(), 1100);
    // Once the batches pause, the indexer builds the changed set's index anew.
    let mut lag = rig.daemon.index_lag();
    for _ in 0..200 {
        if lag == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        lag = rig.daemon.index_lag();
    }
    assert_eq!(lag, 0, "overlay left 2 s after the last batch");
    // Now: 10.4.1.0-99 . 53 are in `c`, every 10.4.0.x / 10.5.0.x / 10.6.x.0/24 was deleted.
    let after = [
        (udp_to([10, 4, 1, 7]), false),
        (udp_to([10, 4, 1, 99]), false),
        (udp_to([10, 4, 1, 100]), true),
        (udp_to([10, 4, 0, 7]), true),
        (udp_to([10, 5, 0, 7]), true),
        (udp_to([10, 6, 7, 1]), true),
        (udp_to([10, 1, 3, 3]), false),
    ];
    rig.send(after.iter().map(|(f, _)| f.clone()));
    let st = rig.wait_packets(sent + after.len() as u64);
    let accepted = after.iter().filter(|(_, a)| *a).count() as u64;
    assert_eq!(st.accepted, accepted);
    // The listing holds what the batches left, and the rule's counter counted every drop.
    let (r, _) = rig.daemon.ruleset().expect("ruleset");
    let t = &r.tables[0];
    assert_eq!(t.sets[0].elements.len(), 5100);
    assert_eq!(t.sets[1].elements.len(), 1);
    assert_eq!(t.sets[2].elements.len(), 1);
    let counted = t.chains[0].rules[0].stmts.iter().find_map(|s| match s {
        wasp_ruleset::model::Stmt::Counter { packets, .. } => Some(*packets),
        _ => None,
    });
    assert_eq!(counted, Some(sent / 2 + 3));
    rig.stop();
}

/// The packets counted on element `addr` of the first table's set `s`, in the daemon's
/// listing.
fn elem_packets(rig: &Rig, addr: [u8; 4]) -> Option<u64> {
    let (r, _) = rig.daemon.ruleset().expect("ruleset");
    let s = r.tables[0].sets.iter().find(|s| s.name == "s")?;
    s.elements
        .iter()
        .find(|e| {
            matches!(e.key.as_slice(), [wasp_ruleset::model::KeyPart::Value(v)] if v.bytes == addr.into())
        })
        .map(|e| e.packets())
}

/// Elements added to or deleted from a set with `counter` go in place (set transactions): the
/// added ones count the packets that hit them on every worker and keep their counts through a
/// whole-ruleset change; a deleted one takes its counts with it, the others keep theirs, and
/// one added back (also after a flush) starts from zero.
#[test]
fn elements_added_to_a_counted_set_count_in_place_and_through_later_changes() {
    let text = r#"
table netdev filter {
    set s {
        type ipv4_addr
        counter
        elements = { 10.0.0.1 }
    }
    chain ingress {
        type filter hook ingress device "veth0" priority 0; policy accept;
        ip daddr @s drop
    }
}
"#;
    let rig = Rig::start(text, 2);
    rig.daemon
        .apply(
            "add element netdev filter s { 10.3.0.1, 10.3.0.2 }\n",
            "<b>",
        )
        .expect("add");
    assert_eq!(
        rig.daemon.set_transactions(),
        1,
        "an add to a counted set goes in place"
    );
    rig.send((0..50).map(|_| udp_to([10, 3, 0, 1])));
    rig.send((0..20).map(|_| udp_to([10, 3, 0, 2])));
    let st = rig.wait_packets(70);
    assert_eq!(st.accepted, 0);
    assert_eq!(elem_packets(&rig, [10, 3, 0, 1]), Some(50));
    assert_eq!(elem_packets(&rig, [10, 3, 0, 2]), Some(20));
    assert_eq!(elem_packets(&rig, [10, 0, 0, 1]), Some(0));
    // A whole compile (a rule added) carries the new elements' counts by key.
    rig.daemon
        .apply(
            "add rule netdev filter ingress udp dport 9 counter\n",
            "<b>",
        )
        .expect("rule");
    rig.send((0..30).map(|_| udp_to([10, 3, 0, 1])));
    rig.wait_packets(100);
    assert_eq!(elem_packets(&rig, [10, 3, 0, 1]), Some(80));
    // A delete from the middle of the counted set goes in place too: the element and its
    // counts go, the element after it keeps its own on both workers.
    rig.daemon
        .apply("delete element netdev filter s { 10.3.0.1 }\n", "<b>")
        .expect("delete");
    assert_eq!(
        rig.daemon.set_transactions(),
        2,
        "a counted delete goes in place"
    );
    assert_eq!(elem_packets(&rig, [10, 3, 0, 1]), None);
    assert_eq!(elem_packets(&rig, [10, 3, 0, 2]), Some(20));
    rig.send((0..10).map(|_| udp_to([10, 3, 0, 2])));
    rig.wait_packets(110);
    assert_eq!(elem_packets(&rig, [10, 3, 0, 2]), Some(30));
    // Added back, the element starts from nothing (its old counts went with the delete).
    rig.daemon
        .apply("add element netdev filter s { 10.3.0.1 }\n", "<b>")
        .expect("add again");
    assert_eq!(rig.daemon.set_transactions(), 3);
    assert_eq!(elem_packets(&rig, [10, 3, 0, 1]), Some(0));
    rig.send((0..5).map(|_| udp_to([10, 3, 0, 1])));
    rig.wait_packets(115);
    assert_eq!(elem_packets(&rig, [10, 3, 0, 1]), Some(5));
    assert_eq!(elem_packets(&rig, [10, 3, 0, 2]), Some(30));
    assert_eq!(elem_packets(&rig, [10, 0, 0, 1]), Some(0));
    // A flush goes in place as well; what is added after starts from zero.
    rig.daemon
        .apply(
            "flush set netdev filter s\nadd element netdev filter s { 10.3.0.2 }\n",
            "<b>",
        )
        .expect("flush");
    assert_eq!(rig.daemon.set_transactions(), 4);
    assert_eq!(elem_packets(&rig, [10, 3, 0, 1]), None);
    assert_eq!(elem_packets(&rig, [10, 3, 0, 2]), Some(0));
    rig.send((0..4).map(|_| udp_to([10, 3, 0, 2])));
    rig.wait_packets(119);
    assert_eq!(elem_packets(&rig, [10, 3, 0, 2]), Some(4));
    rig.stop();
}

/// A ruleset change hands the plugins' state to the new program's instances: an IDLETIMER
/// timer armed by a packet before a change that renumbers every use site (a rule inserted
/// before) keeps its deadline in the new ruleset, as the kernel's timer of a rule that stays;
/// the counter's counts move by their own carry.
#[test]
fn plugin_state_lives_through_a_ruleset_change() {
    let rules = "table netdev filter {\n\tplugin idletimer\n\tchain ingress {\n\t\ttype filter hook ingress device \"veth0\" priority 0; policy accept;\n\t\tudp dport 53 counter idletimer label \"dns\" timeout 1s\n\t}\n}\n";
    let rig = Rig::start(rules, 1);
    let events = rig.daemon.events.subscribe();
    rig.send([dns()]);
    rig.wait_packets(1);
    // The change comes well into the timeout: a timer armed anew by the new rule's
    // configuration would expire a whole timeout after it, the handed-over one 100 ms after.
    std::thread::sleep(Duration::from_millis(900));
    rig.daemon
        .apply(
            "insert rule netdev filter ingress tcp dport 22 counter drop\n",
            "<batch>",
        )
        .expect("change");
    let changed = std::time::Instant::now();
    let mut expired = None;
    while changed.elapsed() < Duration::from_secs(3) {
        if let Ok(ev) = events.recv_timeout(Duration::from_millis(50))
            && ev.text.contains("idletimer dns expired")
        {
            expired = Some(changed.elapsed());
            break;
        }
    }
    let after = expired.expect("the timer armed before the change expired in the new ruleset");
    assert!(
        after < Duration::from_millis(700),
        "expired when its timeout was up, counted from the packet, not from the change: {after:?} after it"
    );
    let (r, _) = rig.daemon.ruleset().expect("ruleset");
    // Counted as the kernel counts at ingress: without the Ethernet header.
    let n = dns().len() as u64 - 14;
    assert_eq!(
        rule_counts(&r),
        [(0, 0), (1, n)],
        "the DNS rule's count moved too"
    );
    rig.stop();
}

/// A change that hooks or sends to a device the daemon has no port on is refused and changes
/// nothing (the daemon opens its ports at start); one within its ports applies.
#[test]
fn a_change_naming_a_device_without_a_port_is_refused() {
    let rig = Rig::start(RULESET, 1);
    rig.daemon.set_ports(vec!["veth0".into(), "veth1".into()]);
    for (cmd, dev) in [
        ("add rule netdev filter ingress fwd to \"veth9\"", "veth9"),
        (
            "add map netdev filter devs { type ipv4_addr : iface_index; elements = { 10.0.0.1 : \"veth8\" } }\nadd rule netdev filter ingress dup to ip saddr map @devs",
            "veth8",
        ),
        (
            "add chain netdev filter other { type filter hook ingress device \"veth7\" priority 0; }",
            "veth7",
        ),
    ] {
        let e = rig.daemon.apply(cmd, "cmd.nft").expect_err(cmd);
        assert!(
            e.to_string()
                .contains(&format!("device `{dev}` has no port"))
                && e.to_string().contains("veth0, veth1"),
            "{e}"
        );
        assert_eq!(rig.daemon.ruleset().expect("ruleset").1, 1, "{cmd}");
    }
    assert_eq!(
        rig.daemon
            .apply("add rule netdev filter ingress fwd to \"veth1\"", "ok.nft")
            .expect("a port it has"),
        2
    );
    rig.stop();
}

/// `add element` into a set with `auto-merge` in a running daemon merges as nft does (the
/// set's elements it meets are deleted, one range added, as one set transaction), and the
/// running set looks up what the listing shows: frames to the merged range and to the gap
/// before it get the verdicts of the merged set.
#[test]
fn elements_added_to_an_auto_merge_set_merge_in_the_running_set() {
    let text = r#"
table netdev filter {
    set s {
        type ipv4_addr
        flags interval
        auto-merge
        elements = { 10.7.0.0/24, 10.7.2.0/24 }
    }
    chain ingress {
        type filter hook ingress device "veth0" priority 0; policy accept;
        ip daddr @s drop
    }
}
"#;
    let rig = Rig::start(text, 2);
    let listed = |rig: &Rig| {
        let (r, _) = rig.daemon.ruleset().expect("ruleset");
        let text = wasp_ruleset::print_ruleset(&r, false);
        let line = text
            .lines()
            .find(|l| l.contains("elements = "))
            .unwrap_or("");
        line.trim().to_string()
    };
    // Between the two: one range from the first to the last (nft 1.0.6 lists it so).
    rig.daemon
        .apply("add element netdev filter s { 10.7.1.0/24 }\n", "<b>")
        .expect("add");
    assert_eq!(listed(&rig), "elements = { 10.7.0.0-10.7.2.255 }");
    assert_eq!(rig.daemon.set_transactions(), 1, "merged in place");
    // Inside the merged range: nothing changes, also under `create`.
    rig.daemon
        .apply("create element netdev filter s { 10.7.1.9 }\n", "<b>")
        .expect("create inside");
    assert_eq!(listed(&rig), "elements = { 10.7.0.0-10.7.2.255 }");
    rig.send((0..10).map(|_| udp_to([10, 7, 1, 77])));
    rig.send((0..10).map(|_| udp_to([10, 7, 2, 255])));
    rig.send((0..10).map(|_| udp_to([10, 7, 3, 0])));
    let st = rig.wait_packets(30);
    assert_eq!(st.accepted, 10, "only 10.7.3.0 is outside the merged range");
    // Touching the end: the range grows; the old range is gone from the lookups too.
    rig.daemon
        .apply("add element netdev filter s { 10.7.3.0-10.7.3.9 }\n", "<b>")
        .expect("add adjacent");
    assert_eq!(listed(&rig), "elements = { 10.7.0.0-10.7.3.9 }");
    rig.send((0..10).map(|_| udp_to([10, 7, 3, 0])));
    rig.send((0..10).map(|_| udp_to([10, 7, 3, 10])));
    let st = rig.wait_packets(50);
    assert_eq!(
        st.accepted, 20,
        "10.7.3.0 now dropped, 10.7.3.10 still passes"
    );
    // The merged range is one element: deleting it empties the set.
    rig.daemon
        .apply(
            "delete element netdev filter s { 10.7.0.0-10.7.3.9 }\n",
            "<b>",
        )
        .expect("delete merged");
    assert_eq!(listed(&rig), "");
    rig.send((0..10).map(|_| udp_to([10, 7, 0, 1])));
    let st = rig.wait_packets(60);
    assert_eq!(st.accepted, 30);
    rig.stop();
}

/// Elements with a timeout in a running daemon, as the kernel keeps them: listed with the
/// time they have left (`expires`), gone from the listing and the lookups once it runs out,
/// not brought back by a later change of the ruleset (which gives the others the time they
/// had left, not their whole timeout again), and taken again by `add element` once expired.
#[test]
fn timed_elements_expire_and_stay_expired_through_changes() {
    let text = r#"
table netdev filter {
    set s {
        type ipv4_addr
        flags timeout
        elements = { 10.8.0.1 timeout 1s, 10.8.0.2, 10.8.0.4 timeout 4s }
    }
    chain ingress {
        type filter hook ingress device "veth0" priority 0; policy accept;
        ip daddr @s drop
    }
}
"#;
    let rig = Rig::start(text, 1);
    rig.daemon
        .apply(
            "add element netdev filter s { 10.8.0.3 timeout 1s }\n",
            "<b>",
        )
        .expect("add");
    let elements = |rig: &Rig| {
        let (r, _) = rig.daemon.ruleset().expect("ruleset");
        let s = &r.tables[0].sets[0];
        s.elements
            .iter()
            .map(|e| (wasp_ruleset::element_key_text(&e), e.expires_ms()))
            .collect::<Vec<_>>()
    };
    let left = |rig: &Rig, key: &str| {
        elements(rig)
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, ms)| ms)
    };
    // Listed with the time left: at most the timeout.
    let at_once = left(&rig, "10.8.0.1").expect("listed").expect("expires");
    assert!(at_once <= 1000 && at_once > 500, "{at_once} ms left");
    assert_eq!(left(&rig, "10.8.0.2"), Some(None), "no timeout, no expires");
    std::thread::sleep(std::time::Duration::from_millis(1300));
    let keys: Vec<String> = elements(&rig).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["10.8.0.2", "10.8.0.4"], "the 1 s elements are gone");
    rig.send((0..10).map(|_| udp_to([10, 8, 0, 1])));
    assert_eq!(
        rig.wait_packets(10).accepted,
        10,
        "lookups miss the expired"
    );
    // A rule added: a whole compile that brings no expired element back, and gives 10.8.0.4
    // what it had left.
    rig.daemon
        .apply(
            "add rule netdev filter ingress udp dport 9 counter\n",
            "<b>",
        )
        .expect("rule");
    let keys: Vec<String> = elements(&rig).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["10.8.0.2", "10.8.0.4"]);
    let four = left(&rig, "10.8.0.4").expect("listed").expect("expires");
    assert!(four < 3000, "{four} ms left of 4 s after 1.3 s");
    rig.send((0..10).map(|_| udp_to([10, 8, 0, 1])));
    rig.send((0..10).map(|_| udp_to([10, 8, 0, 4])));
    assert_eq!(rig.wait_packets(30).accepted, 20, "10.8.0.4 still dropped");
    // Added again once expired: held and dropped again.
    rig.daemon
        .apply(
            "add element netdev filter s { 10.8.0.1 timeout 10s }\n",
            "<b>",
        )
        .expect("add again");
    assert!(left(&rig, "10.8.0.1").is_some(), "{:?}", elements(&rig));
    rig.send((0..10).map(|_| udp_to([10, 8, 0, 1])));
    assert_eq!(rig.wait_packets(40).accepted, 20, "dropped again");
    // Expired between two element batches (no whole compile in between): the second takes it
    // with its whole new timeout.
    rig.daemon
        .apply(
            "add element netdev filter s { 10.8.0.5 timeout 300ms }\n",
            "<b>",
        )
        .expect("short");
    std::thread::sleep(std::time::Duration::from_millis(500));
    rig.daemon
        .apply(
            "add element netdev filter s { 10.8.0.5 timeout 10s }\n",
            "<b>",
        )
        .expect("again");
    let five = left(&rig, "10.8.0.5").expect("listed").expect("expires");
    assert!(five > 9000, "{five} ms left of a new 10 s");
    rig.send((0..10).map(|_| udp_to([10, 8, 0, 5])));
    assert_eq!(rig.wait_packets(50).accepted, 20, "dropped");
    // Added again with another timeout: the new timeout, from now (as the kernel updates
    // it); with the same one, the time left runs on.
    rig.daemon
        .apply(
            "add element netdev filter s { 10.8.0.4 timeout 20s }\n",
            "<b>",
        )
        .expect("retime");
    let four = left(&rig, "10.8.0.4").expect("listed").expect("expires");
    assert!(four > 19_000, "{four} ms left of a new 20 s");
    rig.daemon
        .apply(
            "add element netdev filter s { 10.8.0.5 timeout 10s }\n",
            "<b>",
        )
        .expect("same timeout");
    let five_again = left(&rig, "10.8.0.5").expect("listed").expect("expires");
    assert!(
        five_again <= five,
        "{five_again} ms: the same timeout restarts nothing"
    );
    // The same in a batch that also changes a rule (a whole compile).
    rig.daemon
        .apply(
            "add rule netdev filter ingress udp dport 10 counter\nadd element netdev filter s { 10.8.0.4 timeout 30s }\n",
            "<b>",
        )
        .expect("retime with a rule");
    let four = left(&rig, "10.8.0.4").expect("listed").expect("expires");
    assert!(four > 29_000, "{four} ms left of a new 30 s");
    rig.stop();
}
