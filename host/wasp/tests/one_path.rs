//! One data path, proven: the same capture through `wasp replay` and through a live `wasp run`
//! on veth pairs in namespaces this test makes (and removes, also when it fails) give the same
//! frames out of every port (byte for byte, in order), the same counts of accepted and dropped
//! packets, the same rule counters in the listing and the same connections.
//!
//! The live side: `wasp run` with one worker in namespace DUT, each of its devices a veth whose
//! far end (same name) is in namespace PEER; `tests/data/peer.py` in PEER sends each frame of
//! the capture on the far end of the device it entered on (a pcapng interface's name, or the
//! sample's input device), as far apart as the capture has them (at least 5 ms, so that every
//! frame is through before the next comes: conntrack's timers then see the same gaps), and
//! keeps what arrives. Both sides get the frames a wire can carry (14 to 1514 bytes: a
//! shorter or longer one cannot be sent on a veth), written to one pcapng for the replay.
//! Needs root (CI runs as root) and python3; without them each test says so and passes
//! nothing off as run.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use wasp::progress::Progress;
use wasp_io::capture::CaptureReader;

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ip(args: &[&str]) {
    run(Command::new("ip").args(args));
}

/// The two namespaces and the veth pairs between them; removed on drop (with wasp).
struct Rig {
    dut: String,
    peer: String,
    wasp: Option<Child>,
    sock: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Rig {
    fn new(tag: &str, devs: &[&str]) -> Rig {
        let id = std::process::id();
        let dut = format!("wasp-op-{tag}-d{id}");
        let peer = format!("wasp-op-{tag}-p{id}");
        let tmp = tempfile::tempdir().unwrap();
        let rig = Rig {
            sock: tmp.path().join("wasp.sock"),
            dut,
            peer,
            wasp: None,
            _tmp: tmp,
        };
        for n in [&rig.dut, &rig.peer] {
            ip(&["netns", "add", n]);
            run(Command::new("ip").args([
                "netns",
                "exec",
                n,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
            ]));
            ip(&["-n", n, "link", "set", "lo", "up"]);
        }
        for d in devs {
            ip(&[
                "-n", &rig.dut, "link", "add", d, "type", "veth", "peer", "name", d, "netns",
                &rig.peer,
            ]);
            for n in [&rig.dut, &rig.peer] {
                run(Command::new("ip").args([
                    "netns",
                    "exec",
                    n,
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{d}.disable_ipv6=1"),
                ]));
                ip(&["-n", n, "link", "set", d, "up"]);
            }
        }
        rig
    }

    /// Start `wasp run` in DUT and wait for its control socket.
    fn start(&mut self, ruleset: &Path, gateway: Option<&Path>) {
        let mut cmd = Command::new("ip");
        cmd.args([
            "netns",
            "exec",
            &self.dut,
            env!("CARGO_BIN_EXE_wasp"),
            "run",
        ])
        .arg(ruleset)
        // The replay's connection-table seed: the same NAT ports on both sides.
        .env("WASP_SEED", "6840335469066344056")
        .args(["--workers", "1", "--socket"])
        .arg(&self.sock);
        if let Some(g) = gateway {
            cmd.arg("--gateway").arg(g);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        self.wasp = Some(child);
        let t0 = Instant::now();
        while !self.sock.exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "wasp run did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // The rings are open once the socket answers.
        self.ctl(&["stats"]);
    }

    fn ctl(&self, words: &[&str]) -> String {
        run(Command::new(env!("CARGO_BIN_EXE_wasp"))
            .args(["ctl", "--socket"])
            .arg(&self.sock)
            .args(words))
    }

    /// Send `frames` from PEER at their capture times' gaps; what PEER received, per
    /// device, in order.
    fn exchange(&self, frames: &[Wire], devs: &[&str]) -> BTreeMap<String, Vec<Vec<u8>>> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/peer.py");
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.peer, "python3"])
            .arg(&script)
            .args(devs)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = String::new();
        let mut last = frames.first().map_or(0, |f| f.ts_ns);
        for w in frames {
            let gap_ms = (w.ts_ns.saturating_sub(last) as f64 / 1e6).max(5.0);
            last = w.ts_ns;
            input.push_str(&format!("{} {gap_ms:.3} ", devs[w.dev]));
            for b in &w.data {
                input.push_str(&format!("{b:02x}"));
            }
            input.push('\n');
        }
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            // A peer that failed says why below.
            let _ = stdin.write_all(input.as_bytes());
        }
        let o = child.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "peer.py: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let mut got: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            let (d, h) = line.split_once(' ').unwrap();
            let bytes = (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
                .collect();
            got.entry(d.to_string()).or_default().push(bytes);
        }
        got
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(mut w) = self.wasp.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &w.id().to_string()])
                .status();
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(_)) = w.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = w.kill();
            let _ = w.wait();
        }
        for n in [&self.dut, &self.peer] {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// A frame to send: the index of its device in the test's devices, its capture time.
struct Wire {
    dev: usize,
    ts_ns: u64,
    data: Vec<u8>,
}

/// The frames of `captures` a wire can carry, each with the device it enters on (its pcapng
/// interface's name when `devs` has it, `devs[0]` otherwise).
fn frames_of(captures: &[PathBuf], devs: &[&str]) -> Vec<Wire> {
    let mut out = Vec::new();
    for c in captures {
        let mut r = CaptureReader::open(c).unwrap();
        while let Some(f) = r.next_frame() {
            let f = f.unwrap();
            if !(14..=1514).contains(&f.data.len()) {
                continue;
            }
            let dev = f
                .interface
                .and_then(|i| devs.iter().position(|d| *d == i))
                .unwrap_or(0);
            out.push(Wire {
                dev,
                ts_ns: f.ts_ns,
                data: f.data.to_vec(),
            });
        }
    }
    out
}

/// The frames of a pcap `path` (empty when it does not exist).
fn pcap_frames(path: &Path) -> Vec<Vec<u8>> {
    if !path.exists() {
        return Vec::new();
    }
    common::read_frames(path)
        .into_iter()
        .map(|(_, data)| data)
        .collect()
}

/// The counters of a listing: every `counter packets N bytes M` and its line, in order.
fn counters(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter(|l| l.contains("packets "))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// A conntrack line without its timeout (the third word: seconds left, which depends on the
/// clock: the capture's in a replay, the wall's live).
fn without_timeout(line: &str) -> String {
    line.split_whitespace()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .map(|(_, w)| w)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The packets worker 0 classified, from `wasp ctl stats` (its row `0 PACKETS VECTORS
/// DROPPED` under the `worker` header).
fn worker_packets(stats: &str) -> u64 {
    stats
        .lines()
        .skip_while(|l| !l.starts_with("worker"))
        .find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.first() == Some(&"0")).then(|| w.get(1)?.parse().ok())?
        })
        .unwrap_or_else(|| panic!("no worker 0 in:\n{stats}"))
}

/// Run `captures` through `ruleset` both ways and compare; `devs[0]` is the input device.
fn one_path(
    tag: &str,
    ruleset: &Path,
    gateway: Option<&Path>,
    captures: &[PathBuf],
    devs: &[&str],
) {
    if !is_root() {
        eprintln!("skipped: the live side needs root (network namespaces, veth pairs)");
        return;
    }
    if Command::new("python3").arg("-V").output().is_err() {
        eprintln!("skipped: the live side needs python3 (the far ends' AF_PACKET sockets)");
        return;
    }
    // What both sides get: one pcapng with an interface per device.
    let frames = frames_of(captures, devs);
    let out = tempfile::tempdir().unwrap();
    let wire = out.path().join("wire.pcapng");
    let blocks: Vec<_> = frames
        .iter()
        .map(|w| (w.dev as u32, w.ts_ns, w.data.as_slice()))
        .collect();
    common::write_pcapng(&wire, devs, &blocks).unwrap();
    // Replay.
    let mut opts = wasp::ReplayOptions {
        ruleset: ruleset.to_path_buf(),
        inputs: vec![wasp::Input::required(&wire)],
        in_dev: Some(devs[0].to_string()),
        out_dir: Some(out.path().to_path_buf()),
        ..wasp::ReplayOptions::default()
    };
    opts.gateway = gateway.map(Path::to_path_buf);
    let report = wasp::replay(&opts, None, &mut Progress::hidden()).unwrap();
    assert!(report.fault.is_none(), "{:?}", report.fault);
    // Live.
    assert_eq!(frames.len() as u64, report.summary.packets);
    let mut rig = Rig::new(tag, devs);
    rig.start(ruleset, gateway);
    let got = rig.exchange(&frames, devs);
    let listing = rig.ctl(&["list", "ruleset"]);
    let stats = rig.ctl(&["stats"]);
    let conntrack = rig.ctl(&["list", "conntrack"]);
    drop(rig);
    // The same frames out of every port, byte for byte, in order.
    for d in devs {
        let want = pcap_frames(
            &out.path()
                .join(wasp::replay::tx_file(d, wasp_io::capture::Format::PcapNg)),
        );
        let live = got.get(*d).cloned().unwrap_or_default();
        assert_eq!(
            live.len(),
            want.len(),
            "{tag}: frames out of {d}: live {} replay {}",
            live.len(),
            want.len()
        );
        for (i, (l, w)) in live.iter().zip(&want).enumerate() {
            assert_eq!(l, w, "{tag}: frame {i} out of {d}");
        }
    }
    // The same verdicts and rule counters.
    assert_eq!(worker_packets(&stats), report.summary.packets, "{stats}");
    assert_eq!(
        counters(&listing),
        counters(&report.listing),
        "{tag}: live listing:\n{listing}"
    );
    // The same connections.
    let live_ct: Vec<String> = conntrack.lines().map(without_timeout).collect();
    let replay_ct: Vec<String> = report
        .conntrack
        .iter()
        .map(|l| without_timeout(l))
        .collect();
    assert_eq!(live_ct, replay_ct, "{tag}: conntrack");
}

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../samples")
        .join(name)
}

/// The firewall sample's own capture: netdev ingress chains, sets, VLANs, IPv6 (nothing is
/// forwarded: the verdicts and counters are compared).
#[test]
fn firewall_sample_live_equals_replay() {
    let s = sample("firewall");
    one_path(
        "fw",
        &s.join("firewall.nft"),
        None,
        &[s.join("office.pcap")],
        &["lan0"],
    );
}

/// The Geneve flowtable gateway: a tunnel ended on the gateway, its overlay routed to the
/// LAN, connections tracked and offloaded to the flowtable (decapsulated and encapsulated
/// from the cached flow), ARP answered through the tunnel; frames from both ports.
#[test]
fn flowtable_and_tunnel_gateway_live_equals_replay() {
    let s = sample("geneve-gateway/flowtable");
    one_path(
        "ft",
        &s.join("flowtable.nft"),
        Some(&s.join("gateway.conf")),
        &[s.join("flow.pcapng")],
        &["trunk0", "lan0"],
    );
}

/// The router sample: routes, NAT (masquerade to the provider), ARP and ND answers, time
/// exceeded, a `dup` to the monitor port and an egress filter.
#[test]
fn router_with_nat_live_equals_replay() {
    let s = sample("router");
    one_path(
        "rt",
        &s.join("router.nft"),
        Some(&s.join("gateway.conf")),
        &[s.join("lan.pcap")],
        &["lan0", "wan0", "mirror0"],
    );
}
