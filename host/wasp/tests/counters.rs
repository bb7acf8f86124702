//! Counters through the bundled counter plugin, loaded without a declaration: anonymous
//! `counter` in rules, named counter objects shared by `counter name X`, per-element counters
//! (initial counts honoured, each element counting separately), in the summary and --json; a
//! swap of the counter keeps counting; `reset counters` through the runtime zeroes the counts
//! and leaves element expiry alone.

mod common;

use std::path::Path;

use common::*;
use wasp_core::{At, Engine, FinalVerdict, HookResult, Packet};

const T0: u64 = 1_700_000_000_000_000_000;
const SEC: u64 = 1_000_000_000;

/// UDP from 10.0.0.`host` to port 53 (4 bytes of payload): skb->len 32 at ingress.
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

const RULES: &str = "table netdev t {
\tcounter hits { packets 5 bytes 300 }
\tset a { type ipv4_addr; counter; timeout 10s; elements = { 10.0.0.1, 10.0.0.2 counter packets 7 bytes 70 } }
\tchain in {
\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;
\t\tcounter packets 1 bytes 2
\t\tip saddr @a counter name \"hits\"
\t\tudp dport 53 counter name hits
\t}
}
";

fn replay(dir: &Path, frames: &[(u64, Vec<u8>)], swaps: &[&str]) -> wasp::Report {
    std::fs::write(dir.join("r.nft"), RULES).unwrap();
    let refs: Vec<(u64, &[u8])> = frames.iter().map(|(t, f)| (*t, f.as_slice())).collect();
    std::fs::write(dir.join("c.pcap"), common::pcap_bytes(&refs)).unwrap();
    let opts = wasp::ReplayOptions {
        ruleset: dir.join("r.nft"),
        inputs: vec![wasp::Input::required(dir.join("c.pcap"))],
        swaps: swaps.iter().map(|s| s.parse().unwrap()).collect(),
        ..wasp::ReplayOptions::default()
    };
    wasp::replay(&opts, None, &mut wasp::progress::Progress::hidden()).expect("replays")
}

fn frames() -> Vec<(u64, Vec<u8>)> {
    vec![
        packet(T0, 1),
        packet(T0 + SEC, 2),
        packet(T0 + 2 * SEC, 2),
        packet(T0 + 3 * SEC, 9),
    ]
}

#[test]
fn counts_come_from_the_bundled_counter_plugin() {
    let tmp = tempfile::tempdir().unwrap();
    let report = replay(tmp.path(), &frames(), &[]);
    let s = &report.summary;
    let rules: Vec<(&str, &str, u64, u64, u64)> = s
        .counters
        .iter()
        .map(|c| {
            (
                c.table.as_str(),
                c.chain.as_str(),
                c.rule,
                c.packets,
                c.bytes,
            )
        })
        .collect();
    // The rule's counter (handle 4: chain 1, `hits` 2, `a` 3) starts at 1 packet, 2 bytes:
    // 4 packets of 32 bytes on top.
    assert_eq!(rules, [("t", "in", 4, 5, 130)]);
    // `hits`: 3 set hits + 4 port-53 packets on top of 5 packets, 300 bytes.
    let named: Vec<(&str, u64, u64)> = s
        .named_counters
        .iter()
        .map(|c| (c.name.as_str(), c.packets, c.bytes))
        .collect();
    assert_eq!(named, [("hits", 12, 300 + 7 * 32)]);
    let elems: Vec<(&str, u64, u64)> = s
        .set_counters
        .iter()
        .map(|c| (c.element.as_str(), c.packets, c.bytes))
        .collect();
    assert_eq!(elems, [("10.0.0.1", 1, 32), ("10.0.0.2", 9, 134)]);
    // The engine's counters are not listed as plugin uses.
    assert!(s.plugin_state.is_empty(), "{:?}", s.plugin_state);
    let table = s.to_table();
    for want in [
        "counters\n  t in handle 4: counter packets 5 bytes 130\n",
        "named counters\n  t counter hits: packets 12 bytes 524\n",
        "  t @a { 10.0.0.2 }: packets 9 bytes 134\n",
    ] {
        assert!(table.contains(want), "{want:?} not in\n{table}");
    }
    for want in [
        "\tcounter hits {\n\t\tpackets 12 bytes 524\n\t}",
        "elements = { 10.0.0.1 counter packets 1 bytes 32, 10.0.0.2 counter packets 9 bytes 134 }",
        "\t\tcounter packets 5 bytes 130\n\t\tip saddr @a counter name \"hits\"\n",
    ] {
        assert!(
            report.listing.contains(want),
            "{want:?} not in\n{}",
            report.listing
        );
    }
    let json = serde_json::to_value(s).unwrap();
    assert_eq!(json["counters"][0]["packets"], 5);
    assert_eq!(json["named_counters"][0]["bytes"], 524);
}

#[test]
fn a_swap_of_the_bundled_counter_keeps_counting() {
    let tmp = tempfile::tempdir().unwrap();
    let report = replay(tmp.path(), &frames(), &["counter=counter@2"]);
    let s = &report.summary;
    assert_eq!((s.counters[0].packets, s.counters[0].bytes), (5, 130));
    assert_eq!(s.named_counters[0].packets, 12);
    assert_eq!(s.set_counters[1].packets, 9);
}

#[test]
fn reset_counters_through_the_runtime_zeroes_and_leaves_expiry_alone() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("r.nft"), RULES).unwrap();
    let rs = wasp_ruleset::parse_file(&tmp.path().join("r.nft")).unwrap();
    let mut cache = wasp::plugins::PluginCache::default();
    let mut shared = wasp::datapath::Shared::single(&mut cache, wasp_plugin::HostConfig::default());
    let clocks = wasp::datapath::Clocks {
        epoch_ns: Some(T0),
        wall_epoch_ns: 0,
        now_ns: T0,
    };
    let b = wasp::datapath::build(&rs, 0, 1, clocks, false, &mut shared).unwrap();
    let mut engine = b.engine;
    let mut rt = b
        .runtime
        .expect("the counter plugin is loaded for the ruleset's counters");
    let run = |engine: &mut Engine, rt: &mut wasp_plugin::Runtime, t: u64| {
        let (_, f) = packet(t, 2);
        let p = Packet {
            frame: &f,
            meta: wasp_wire::parse(&f),
            iifname: "eth0",
            mark: 0,
            oifname: "",
            ct: wasp_core::CtMeta::NONE,
            ct_detail: None,
            nftrace: false,
            route: None,
        };
        let mut res = HookResult::new();
        engine.run(At::Ingress("eth0"), &[p], t, &mut res, None, Some(rt));
        assert_eq!(res.outcomes[0].verdict, FinalVerdict::Accept);
    };
    use wasp::plugins::RuntimeCounters;
    run(&mut engine, &mut rt, T0);
    assert_eq!(
        engine.set_element_counters(&mut RuntimeCounters(&mut rt))[1].packets,
        8
    );
    engine.reset_counters(&mut RuntimeCounters(&mut rt));
    let mut c = RuntimeCounters(&mut rt);
    assert_eq!(engine.counter(0, 0, 4, &mut c), Some((0, 0)));
    assert!(
        engine
            .named_counters(&mut c)
            .iter()
            .all(|n| (n.packets, n.bytes) == (0, 0))
    );
    assert!(
        engine
            .set_element_counters(&mut c)
            .iter()
            .all(|e| (e.packets, e.bytes) == (0, 0))
    );
    // The element still expires 10 s after the load: a hit at 9 s counts, one at 10 s not.
    run(&mut engine, &mut rt, T0 + 9 * SEC);
    run(&mut engine, &mut rt, T0 + 10 * SEC);
    let mut c = RuntimeCounters(&mut rt);
    assert_eq!(engine.set_element_counters(&mut c)[1].packets, 1);
    assert_eq!(engine.counter(0, 0, 4, &mut c), Some((2, 64)));
    // `hits`: the set hit at 9 s and both port-53 packets.
    assert_eq!(engine.named_counters(&mut c)[0].packets, 3);
}

/// UDP from 10.0.0.`host` with `n` bytes of payload: skb->len 28 + `n` at ingress.
fn sized(t: u64, host: u8, n: usize) -> (u64, Vec<u8>) {
    let mut l4 = udp(5000, 53);
    l4.truncate(8);
    l4[4..6].copy_from_slice(&((8 + n) as u16).to_be_bytes());
    l4.extend(std::iter::repeat_n(b'x', n));
    (
        t,
        eth(
            host,
            0x0800,
            &ipv4([10, 0, 0, host], [10, 0, 0, 9], 17, &l4),
        ),
    )
}

#[test]
fn anonymous_set_element_counters_list_as_the_kernel_does() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("r.nft"),
        "table netdev t {\n\tchain c {\n\t\ttype filter hook ingress device \"eth0\" priority 0;\n\t\tip saddr { 10.0.0.1 counter, 10.0.0.2 counter, 10.0.0.3 } accept\n\t}\n}\n",
    )
    .unwrap();
    let frames = [
        sized(T0, 1, 10),
        sized(T0 + SEC, 1, 30),
        sized(T0 + 2 * SEC, 2, 5),
        sized(T0 + 3 * SEC, 3, 7),
    ];
    let refs: Vec<(u64, &[u8])> = frames.iter().map(|(t, f)| (*t, f.as_slice())).collect();
    std::fs::write(dir.join("c.pcap"), common::pcap_bytes(&refs)).unwrap();
    let opts = wasp::ReplayOptions {
        ruleset: dir.join("r.nft"),
        inputs: vec![wasp::Input::required(dir.join("c.pcap"))],
        ..wasp::ReplayOptions::default()
    };
    let report =
        wasp::replay(&opts, None, &mut wasp::progress::Progress::hidden()).expect("replays");
    // `nft list ruleset` after the same frames sent on a veth in a namespace (kernel 6.18, nft
    // 1.0.6): bytes are skb->len at ingress (38 + 58, and 33).
    let want = "\t\tip saddr { 10.0.0.1 counter packets 2 bytes 96, 10.0.0.2 counter packets 1 bytes 33, 10.0.0.3 } accept\n";
    assert!(
        report.listing.contains(want),
        "{want:?} not in\n{}",
        report.listing
    );
}
