//! `wasp replay` with plugins: the bundled idletimer and counter plugins on the capture's
//! clock, hot swap with `--swap` (per-packet verdicts before and after the swap point, counts
//! carried), edits written to the output captures, and the errors of a plugin that cannot be
//! loaded or refuses its arguments.

mod common;

use std::path::Path;

use common::*;
use wasp::summary::Summary;

const T0: u64 = 1_700_000_000_000_000_000;
const SEC: u64 = 1_000_000_000;

/// A UDP packet from 10.0.0.`host` at `t`.
fn packet(t: u64, host: u8) -> (u64, Vec<u8>) {
    (
        t,
        eth(
            host,
            0x0800,
            &ipv4([10, 0, 0, host], [10, 0, 0, 1], 17, &udp(5000, 53)),
        ),
    )
}

/// Write `ruleset` and a capture of `frames` into `dir`; replay them with `swaps`.
fn replay(
    dir: &Path,
    ruleset: &str,
    frames: &[(u64, Vec<u8>)],
    swaps: &[&str],
) -> Result<wasp::Report, wasp::Error> {
    std::fs::write(dir.join("r.nft"), ruleset).unwrap();
    let refs: Vec<(u64, &[u8])> = frames.iter().map(|(t, f)| (*t, f.as_slice())).collect();
    std::fs::write(dir.join("c.pcap"), common::pcap_bytes(&refs)).unwrap();
    let opts = wasp::ReplayOptions {
        ruleset: dir.join("r.nft"),
        inputs: vec![wasp::Input::required(dir.join("c.pcap"))],
        out_dir: Some(dir.join("out")),
        swaps: swaps.iter().map(|s| s.parse().unwrap()).collect(),
        ..wasp::ReplayOptions::default()
    };
    wasp::replay(&opts, None, &mut wasp::progress::Progress::hidden())
}

fn events(s: &Summary) -> Vec<(u64, &str)> {
    s.events
        .iter()
        .map(|e| (e.time_ns, e.text.as_str()))
        .collect()
}

#[test]
fn idle_timers_expire_on_the_capture_clock() {
    let tmp = tempfile::tempdir().unwrap();
    let rules = "table netdev t {\n\tplugin idletimer\n\tchain in {\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n\t\tidletimer label \"lan\" timeout 2s\n\t}\n}\n";
    // Packets at 0, 0.5, 5 and 5.2 s, then 9 s: the label is idle from 0.5 to 5 s (expires
    // at 2.5 s) and from 5.2 to 9 s (expires at 7.2 s).
    let frames: Vec<(u64, Vec<u8>)> = [0, SEC / 2, 5 * SEC, 5 * SEC + SEC / 5, 9 * SEC]
        .iter()
        .map(|&t| packet(T0 + t, 5))
        .collect();
    let report = replay(tmp.path(), rules, &frames, &[]).unwrap();
    let ev = events(&report.summary);
    assert_eq!(ev.len(), 2, "{ev:?}");
    // Each expiry is reported once, when the replay's clock has passed its deadline: no
    // later than the packet that came after it.
    for ((t, text), (due, next)) in ev
        .iter()
        .zip([(2 * SEC + SEC / 2, 5 * SEC), (7 * SEC + SEC / 5, 9 * SEC)])
    {
        assert_eq!(*text, "idletimer lan expired");
        assert!(
            (T0 + due..=T0 + next).contains(t),
            "{t} not in {due}..={next}"
        );
    }
    assert_eq!(report.summary.plugin_state.len(), 1);
    assert_eq!(report.summary.plugin_state[0].plugin, "idletimer");
    assert!(report.summary.plugin_state[0].at.ends_with("r.nft:5:3"));
    // The JSON summary has the events.
    let json: serde_json::Value = serde_json::from_str(&report.summary.to_json()).unwrap();
    assert_eq!(json["events"][0]["text"], "idletimer lan expired");
    assert!(json["events"][1]["time_ns"].as_u64().unwrap() >= T0 + 7 * SEC);
}

#[test]
fn a_declared_counter_plugin_counts_and_keeps_counting_across_a_swap() {
    let tmp = tempfile::tempdir().unwrap();
    let rules = "table netdev t {\n\tplugin counter\n\tchain in {\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n\t\tudp dport 53 counter\n\t}\n}\n";
    let frames: Vec<(u64, Vec<u8>)> = (0..10).map(|i| packet(T0 + i * 1000, 5)).collect();
    let report = replay(tmp.path(), rules, &frames, &["counter=counter@4"]).unwrap();
    let s = &report.summary;
    // The counter plugin counts the frame's length (`meta length` in its packet header).
    let len = frames[0].1.len();
    assert_eq!(len, 46);
    assert_eq!(
        s.plugin_state[0].state,
        [format!("packets 10 bytes {}", 10 * len)]
    );
    let ev = events(s);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert!(
        ev[0].1.starts_with("plugin counter swapped") && ev[0].1.contains("state carried"),
        "{ev:?}"
    );
}

#[test]
fn a_swap_switches_versions_after_its_packet_and_carries_the_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let v1 = wasp_guests::test_guest("swap_v1");
    let v2 = wasp_guests::test_guest("swap_v2");
    let rules = format!(
        "table netdev t {{\n\tplugin swapper {{ path \"{}\"; }}\n\tchain in {{\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy drop;\n\t\tswapper x accept\n\t}}\n}}\n",
        v1.display()
    );
    // Version 1 matches every packet, version 2 none: packets 1..=70 accepted, the others
    // dropped (the swap cuts the second vector after packet 70).
    let frames: Vec<(u64, Vec<u8>)> = (0..100).map(|i| packet(T0 + i * 1000, 5)).collect();
    let swap = format!("swapper={}@70", v2.display());
    let report = replay(tmp.path(), &rules, &frames, &[&swap]).unwrap();
    let s = &report.summary;
    assert_eq!((s.accepted, s.dropped), (70, 30));
    let accepted = read_frames(&tmp.path().join("out/accepted.pcap"));
    assert_eq!(accepted.first().map(|f| f.0), Some(T0));
    assert_eq!(accepted.last().map(|f| f.0), Some(T0 + 69_000));
    // Every packet was counted by exactly one version, and the count moved over.
    assert_eq!(s.plugin_state[0].state, ["packets 100 (v2)"]);
    assert!(
        events(s)[0].1.contains("swapped 1 -> 2, state carried"),
        "{:?}",
        events(s)
    );
}

#[test]
fn a_swap_that_fails_changes_nothing_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let v1 = wasp_guests::test_guest("swap_v1");
    let v2 = wasp_guests::test_guest("swap_v2");
    // Version 2 refuses the argument `v1-only`.
    let rules = format!(
        "table netdev t {{\n\tplugin swapper {{ path \"{}\"; }}\n\tchain in {{\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy drop;\n\t\tswapper v1-only accept\n\t}}\n}}\n",
        v1.display()
    );
    let frames: Vec<(u64, Vec<u8>)> = (0..10).map(|i| packet(T0 + i * 1000, 5)).collect();
    let bad = format!("swapper={}@3", v2.display());
    let report = replay(tmp.path(), &rules, &frames, &[&bad]).unwrap();
    let s = &report.summary;
    assert_eq!((s.accepted, s.dropped), (10, 0));
    let ev = events(s);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert!(
        ev[0].1.contains("after packet 3 failed, nothing changed") && ev[0].1.contains("v1-only"),
        "{ev:?}"
    );
    assert_eq!(s.plugin_state[0].state, ["packets 10 (v1)"]);
    // A component that cannot be loaded is refused before the first packet.
    let err = replay(
        tmp.path(),
        &rules,
        &frames,
        &[&bad, "swapper=missing/nothing.wasm@5"],
    )
    .map(|_| ())
    .expect_err("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("--swap swapper=missing/nothing.wasm@5: cannot load the component"),
        "{msg}"
    );
}

#[test]
fn statement_edits_are_written_to_the_output_capture() {
    let tmp = tempfile::tempdir().unwrap();
    let probe = wasp_guests::test_guest("probe");
    let rules = format!(
        "table netdev t {{\n\tplugin probe {{ path \"{}\"; }}\n\tchain in {{\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n\t\tudp dport 53 probe edit\n\t}}\n}}\n",
        probe.display()
    );
    let frames = vec![packet(T0, 5), (T0 + 1, eth(6, 0x0806, &[0; 28]))];
    let report = replay(tmp.path(), &rules, &frames, &[]).unwrap();
    assert_eq!(report.summary.accepted, 2);
    let out = read_frames(&tmp.path().join("out/accepted.pcap"));
    // The probe's `edit` sets byte 0 to 0xaa; the ARP frame did not reach it.
    assert_eq!(out[0].1[0], 0xaa);
    assert_eq!(out[0].1[1..], frames[0].1[1..]);
    assert_eq!(out[1].1, frames[1].1);
}

/// `dup` sends the packet as it was when the statement ran (the kernel clones the skb in
/// nft_dup_netdev_eval): a plugin's edit after a `dup` is not in its copy, one before is; the
/// packet itself leaves with the edit.
#[test]
fn a_dup_copies_the_packet_as_it_was_at_the_dup() {
    let tmp = tempfile::tempdir().unwrap();
    let probe = wasp_guests::test_guest("probe");
    let rules = format!(
        "table netdev t {{\n\tplugin probe {{ path \"{}\"; }}\n\tchain in {{\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n\t\tudp dport 53 dup to \"before\" probe edit counter dup to \"after\"\n\t}}\n}}\n",
        probe.display()
    );
    let frames = vec![packet(T0, 5)];
    let report = replay(tmp.path(), &rules, &frames, &[]).unwrap();
    assert_eq!(report.summary.accepted, 1);
    let out = tmp.path().join("out");
    // The probe's `edit` sets byte 0 to 0xaa.
    let mut edited = frames[0].1.clone();
    edited[0] = 0xaa;
    let frame = |name: &str| -> Vec<Vec<u8>> {
        read_frames(&out.join(name))
            .into_iter()
            .map(|(_, f)| f)
            .collect()
    };
    assert_eq!(frame("tx-before.pcap"), [frames[0].1.clone()]);
    assert_eq!(frame("tx-after.pcap"), [edited.clone()]);
    assert_eq!(frame("accepted.pcap"), [edited]);
}

#[test]
fn plugin_errors_name_the_declaration_or_the_use() {
    let tmp = tempfile::tempdir().unwrap();
    let frames = vec![packet(T0, 5)];
    let err = replay(
        tmp.path(),
        "table netdev t {\n\tplugin g { path \"nothere.wasm\"; }\n}\n",
        &frames,
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("r.nft:2:2: error: plugin `g`: "), "{err}");
    assert!(err.contains("nothere.wasm"), "{err}");
    let err = replay(
        tmp.path(),
        "table netdev t {\n\tplugin idletimer\n\tchain in {\n\t\ttype filter hook ingress device \"eth0\" priority 0;\n\t\tudp dport 53 idletimer label \"x\" timeout 0s\n\t}\n}\n",
        &frames,
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("r.nft:5:16: error: plugin `idletimer` refuses this use: idletimer: timeout 0 is refused"),
        "{err}"
    );
    // --swap of a plugin the ruleset does not have: a usage error (exit 2).
    let e = replay(
        tmp.path(),
        "table netdev t {\n\tplugin idletimer\n}\n",
        &frames,
        &["nope=x.wasm@1"],
    )
    .unwrap_err();
    assert!(matches!(e, wasp::Error::Usage(_)), "{e}");
}

#[test]
fn the_command_line_takes_swaps_and_prints_events() {
    let tmp = tempfile::tempdir().unwrap();
    let rules = "table netdev t {\n\tplugin counter\n\tchain in {\n\t\ttype filter hook ingress device \"eth0\" priority 0;\n\t\tcounter\n\t}\n}\n";
    std::fs::write(tmp.path().join("r.nft"), rules).unwrap();
    let frames: Vec<(u64, Vec<u8>)> = (0..3).map(|i| packet(T0 + i * SEC, 5)).collect();
    let refs: Vec<(u64, &[u8])> = frames.iter().map(|(t, f)| (*t, f.as_slice())).collect();
    std::fs::write(tmp.path().join("c.pcap"), common::pcap_bytes(&refs)).unwrap();
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            "r.nft",
            "--in",
            "c.pcap",
            "--swap",
            "counter=counter@1",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("plugin state\n  r.nft:5:3 counter: packets 3 bytes 138\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("plugin events\n  +0.000000s  plugin counter swapped"),
        "{stdout}"
    );
    // The trace names each use as written and what it answered.
    let out = wasp(
        tmp.path(),
        &["replay", "--ruleset", "r.nft", "--in", "c.pcap", "--trace"],
    );
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains("trace id 00000001 plugin counter: continue\ntrace id 00000001 netdev t in rule counter (verdict continue)\n"),
        "{stdout}"
    );
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            "r.nft",
            "--in",
            "c.pcap",
            "--swap",
            "counter",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
}

/// A daemon's workers each run an instance of the idletimer plugin; sharing their timers
/// ([`wasp_plugin::SharedTimers`], as `wasp run` does) makes a label one timer: it expires
/// once, when no worker has seen a packet for its timeout (xt_IDLETIMER has one timer per
/// label). Without the table each worker's instance expires on its own.
#[test]
fn workers_sharing_timers_expire_a_label_once() {
    use wasp_core::{Engine, Extensions, Packet};
    let rules = "table netdev t {\n\tplugin idletimer\n\tchain in {\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n\t\tidletimer label \"lan\" timeout 2s\n\t}\n}\n";
    let rs = wasp_ruleset::parse_str(rules, "w.nft").unwrap();
    let host = wasp_plugin::PluginHost::new(wasp_plugin::HostConfig::default()).unwrap();
    let mut cache = wasp::plugins::PluginCache::default();
    // Two workers' (engine, runtime), built at t = 0 (the label's timers start then).
    let mut workers = |share: bool| {
        let table = wasp_plugin::SharedTimers::new(2);
        (0..2)
            .map(|w| {
                let mut e = Engine::compile(&rs).unwrap();
                let s = share.then(|| (table.clone(), w));
                let (rt, _) =
                    wasp::plugins::build_runtime(&host, &mut cache, &rs, &mut e, 0, s).unwrap();
                (e, rt)
            })
            .collect::<Vec<_>>()
    };
    let (_, frame) = packet(0, 5);
    let expiries = |ws: &mut Vec<(Engine, wasp_plugin::Runtime)>| -> Vec<(usize, u64)> {
        let mut got = Vec::new();
        // Worker 0 sees a packet at 1.5 s; worker 1 none. Both advance every 100 ms to 6 s.
        for step in 1..=60u64 {
            let now = step * SEC / 10;
            for (w, (e, rt)) in ws.iter_mut().enumerate() {
                if w == 0 && step == 15 {
                    let p = Packet {
                        frame: &frame,
                        meta: wasp_wire::parse(&frame),
                        iifname: "eth0",
                        mark: 0,
                        oifname: "",
                        ct: wasp_core::CtMeta::NONE,
                        ct_detail: None,
                        nftrace: false,
                        route: None,
                    };
                    let mut res = wasp_core::HookResult::new();
                    let ext = Some(rt as &mut dyn Extensions);
                    e.run(
                        wasp_core::At::Ingress("eth0"),
                        &[p],
                        now,
                        &mut res,
                        None,
                        ext,
                    );
                } else {
                    rt.advance(now);
                }
                for ev in rt.take_events() {
                    if ev.text == "idletimer lan expired" {
                        got.push((w, now));
                    }
                }
            }
        }
        got
    };
    // Shared: once, 2 s after the last packet on any worker (1.5 s + 2 s), from worker 0.
    let got = expiries(&mut workers(true));
    assert_eq!(got, vec![(0, 35 * SEC / 10)]);
    // Each on its own: worker 1's timer (armed at load) expires at 2 s as well.
    let got = expiries(&mut workers(false));
    assert_eq!(got, vec![(1, 2 * SEC), (0, 35 * SEC / 10)]);
}

/// A plugin's `host::log` lines reach standard error under `wasp replay` (where plugin
/// authors try their work), at their level and tagged with the plugin's name.
#[test]
fn plugin_log_lines_reach_standard_error() {
    let tmp = tempfile::tempdir().unwrap();
    let probe = wasp_guests::test_guest("probe");
    let rules = format!(
        "table netdev t {{\n\tplugin probe {{ path \"{}\"; }}\n\tchain in {{\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n\t\tprobe chatty counter\n\t}}\n}}\n",
        probe.display()
    );
    std::fs::write(tmp.path().join("r.nft"), rules).unwrap();
    let frames = [packet(T0, 2), packet(T0 + SEC, 3)];
    let refs: Vec<(u64, &[u8])> = frames.iter().map(|(t, f)| (*t, f.as_slice())).collect();
    std::fs::write(tmp.path().join("c.pcap"), common::pcap_bytes(&refs)).unwrap();
    let out = wasp(
        tmp.path(),
        &["replay", "--ruleset", "r.nft", "--in", "c.pcap"],
    );
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let logged: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("probe site 0 saw"))
        .collect();
    assert_eq!(logged.len(), 2, "one line per call: {stderr}");
    assert!(
        logged
            .iter()
            .all(|l| l.contains(" INFO ") && l.ends_with("saw 1 packets plugin=\"probe\"")),
        "{stderr}"
    );
}

/// A plugin that writes to its stdout in a loop: each call is stopped at its deadline (the
/// packets get the fallback, `drop` here), the replay goes on, and the lines reach standard
/// error rate-limited: the bucket's 200 and 100 a second, then a line saying how many were
/// dropped, not the thousands written.
#[test]
fn a_plugin_flooding_its_stdout_is_stopped_and_its_lines_limited() {
    let tmp = tempfile::tempdir().unwrap();
    let probe = wasp_guests::test_guest("probe");
    let rules = format!(
        "table netdev t {{\n\tplugin probe {{ path \"{}\"; }}\n\tchain in {{\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n\t\tprobe print counter accept\n\t}}\n}}\n",
        probe.display()
    );
    std::fs::write(tmp.path().join("r.nft"), rules).unwrap();
    let frames = [packet(T0, 2), packet(T0 + SEC, 3), packet(T0 + 2 * SEC, 4)];
    let refs: Vec<(u64, &[u8])> = frames.iter().map(|(t, f)| (*t, f.as_slice())).collect();
    std::fs::write(tmp.path().join("c.pcap"), common::pcap_bytes(&refs)).unwrap();
    let t0 = std::time::Instant::now();
    let out = wasp(
        tmp.path(),
        &["replay", "--ruleset", "r.nft", "--in", "c.pcap", "--json"],
    );
    let allowed = 200 + (100.0 * t0.elapsed().as_secs_f64()).ceil() as usize;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let lines = stderr
        .lines()
        .filter(|l| l.contains("stdout: probe floods its stdout"))
        .count();
    assert!(
        (200..=allowed).contains(&lines),
        "{lines} lines reached the log, {allowed} allowed: {}",
        &stderr[..stderr.len().min(2000)]
    );
    assert!(
        stderr.contains("log lines of this plugin dropped (more than 100 per second)"),
        "{}",
        &stderr[stderr.len().saturating_sub(2000)..]
    );
    let summary: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    // The failed match answers false: no packet reaches `counter accept`; the policy accepts.
    assert_eq!(summary["packets"], 3, "{stdout}");
    assert_eq!(summary["accepted"], 3, "{stdout}");
    let events: Vec<&str> = summary["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("plugin probe hit its deadline: matches at use site")),
        "{events:?}"
    );
}

/// `wasp plugin check` says what a component is to this wasp: its world, the contract version,
/// its imports with WASI apart, its `describe`, and whether it loads (exit 1 with the load's
/// error when not).
#[test]
fn plugin_check_reports_world_contract_imports_and_loadability() {
    let tmp = tempfile::tempdir().unwrap();
    let check = |path: &std::path::Path| {
        let out = wasp(tmp.path(), &["plugin", "check", path.to_str().unwrap()]);
        let (stdout, stderr) = text(&out);
        (out.status.code(), stdout, stderr)
    };
    // The bundled counter: the Rust SDK's world, no WASI, state transfer.
    let (code, out, _) = check(&wasp_guests::plugin("counter"));
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("world: wasp-plugin-area (exports area-match, fast-match, plugin)\n"),
        "{out}"
    );
    assert!(
        out.contains("contract: 0.1.3 (this wasp: 0.1.3, loads 0.1.0 to 0.1.3)\n"),
        "{out}"
    );
    assert!(out.contains("wasi: none\n"), "{out}");
    assert!(out.contains("state transfer yes\nloads: yes\n"), "{out}");
    // A test guest built with wit-bindgen for wasip2: it imports WASI (which it never calls).
    let (code, out, _) = check(&wasp_guests::test_guest("probe"));
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("world: wasp-plugin (exports plugin)\n"),
        "{out}"
    );
    assert!(out.contains("wasi: wasi:"), "{out}");
    assert!(
        out.contains("(this wasp links WASI 0.2, deny-all: no files, sockets or environment)\n"),
        "{out}"
    );
    assert!(
        out.contains("describe: name probe, version 1.0.0, kinds match,statement"),
        "{out}"
    );
    // The same guest as if built against a later contract: refused, both versions named.
    let probe = std::fs::read(wasp_guests::test_guest("probe")).unwrap();
    let later = replace_all(
        &probe,
        b"wasp:plugin/types@0.1.3",
        b"wasp:plugin/types@0.1.9",
    );
    std::fs::write(tmp.path().join("later.wasm"), &later).unwrap();
    let (code, out, _) = check(&tmp.path().join("later.wasm"));
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("contract: 0.1.3, 0.1.9 (this wasp: 0.1.3, refused: wasp:plugin/types@0.1.9: the plugin is built against wasp:plugin@0.1.9, newer than this wasp's wasp:plugin@0.1.3"),
        "{out}"
    );
    assert!(out.contains("loads: no: "), "{out}");
    // An offload block.
    let (code, out, _) = check(&wasp_guests::plugin("offload_table"));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("world: wasp-offload-block"), "{out}");
    // Not a component: the reason, exit 1.
    std::fs::write(tmp.path().join("x.wasm"), b"not wasm").unwrap();
    let (code, out, err) = check(&tmp.path().join("x.wasm"));
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("loads: no: "), "{out}");
    assert!(err.contains("this wasp cannot load it"), "{err}");
}

/// `hay` with every `from` replaced by `to` (same length).
fn replace_all(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut out = hay.to_vec();
    let mut i = 0;
    while i + from.len() <= out.len() {
        if out[i..].starts_with(from) {
            out[i..i + to.len()].copy_from_slice(to);
            i += from.len();
        } else {
            i += 1;
        }
    }
    out
}
