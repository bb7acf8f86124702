//! Counters as use sites of the counter plugin: anonymous `counter`, named counter objects
//! shared by `counter name X`, per-element counters of sets (one call per operation and
//! vector, `elem` = the element's counter slot, index + 1 after a compile, initial counts as arguments), `skb->len` as the bytes,
//! no trace events, reset, and what happens without a plugin runtime (nothing counts, verdicts
//! unchanged).

use super::*;

#[derive(Default)]
struct Rec(Vec<TraceEvent>);
impl TraceSink for Rec {
    fn event(&mut self, ev: TraceEvent) {
        self.0.push(ev);
    }
}

fn engine(text: &str) -> (Engine, Ruleset) {
    let rs = wasp_ruleset::parse_str(text, "t.nft").expect("parses");
    (Engine::compile(&rs).expect("compiles"), rs)
}

fn udp4(src: [u8; 4], dport: u16) -> Vec<u8> {
    ipv4(17, src, [10, 9, 9, 9], 0, &udp(1000, dport))
}

fn ingress(e: &mut Engine, frames: &[Vec<u8>], now: u64, trace: Option<&mut dyn TraceSink>) {
    let pk: Vec<Packet<'_>> = frames.iter().map(|f| pkt(f)).collect();
    let mut out = vec![
        Outcome {
            verdict: FinalVerdict::Accept,
            decision: None,
            mark: 0,
            fwd: None,
            dup: 0,
            reject: None,
        };
        pk.len()
    ];
    e.ingress("eth0", &pk, now, &mut out, trace);
}

const RULES: &str = "table netdev t {
\tcounter hits { packets 5 bytes 300 }
\tcounter idle { }
\tset a { type ipv4_addr; counter; timeout 10s; elements = { 10.0.0.1, 10.0.0.2 counter packets 7 bytes 70 } }
\tchain c { type filter hook ingress device \"eth0\" priority 0; policy accept;
\t\tcounter packets 1 bytes 2 counter
\t\tudp dport 53 counter name hits
\t\tudp dport 53 counter name \"hits\" ip saddr @a
\t}
}
";

#[test]
fn every_counter_is_a_site_of_the_counter_plugin() {
    let (e, _) = engine(RULES);
    let uses: Vec<(u32, CounterUse)> = e.counter_uses().map(|(i, u)| (i, u.clone())).collect();
    let obj = |name: &str| CounterUse::Object {
        table: 0,
        name: name.into(),
    };
    assert_eq!(
        uses,
        [
            (0, obj("hits")),
            (1, obj("idle")),
            (
                2,
                CounterUse::Set {
                    table: 0,
                    set: "a".into(),
                    elements: std::sync::Arc::new(CountedElems::numbered(&[0, 1], 2))
                }
            ),
            (
                3,
                CounterUse::Rule {
                    table: 0,
                    chain: 0,
                    handle: 5,
                    nth: 0
                }
            ),
            (
                4,
                CounterUse::Rule {
                    table: 0,
                    chain: 0,
                    handle: 5,
                    nth: 1
                }
            ),
        ]
    );
    let sites = e.ext_sites();
    assert!(sites.iter().all(|s| s.plugin == COUNTER_PLUGIN
        && s.kind == ExtKind::Stateful
        && s.fallback == Fallback::Absent));
    assert_eq!(
        sites[0].args,
        ["name", "\"hits\"", "packets", "5", "bytes", "300"]
    );
    // Only the element written with counts carries them (element 1 is elem 2).
    assert_eq!(sites[2].args, ["elem", "2", "packets", "7", "bytes", "70"]);
    assert_eq!(sites[3].args, ["packets", "1", "bytes", "2"]);
}

#[test]
fn counts_per_rule_object_and_element_from_the_plugin() {
    let (mut e, mut rs) = engine(RULES);
    let mut c = count(&mut e);
    let frames = vec![
        udp4([10, 0, 0, 1], 53), // a[0]
        udp4([10, 0, 0, 2], 53), // a[1]
        udp4([10, 0, 0, 2], 53), // a[1]
        udp4([10, 0, 0, 9], 53), // no element
        udp4([10, 0, 0, 1], 80), // only the first rule
    ];
    let mut rec = Rec::default();
    ingress(&mut e, &frames, 0, Some(&mut rec));
    // skb->len at ingress: IPv4 20 + UDP 8 = 28 bytes per packet.
    let rules: Vec<(u64, u32, u64, u64)> = e
        .counters(&mut c)
        .iter()
        .map(|v| (v.handle, v.nth, v.packets, v.bytes))
        .collect();
    assert_eq!(rules, [(5, 0, 6, 142), (5, 1, 5, 140)]);
    assert_eq!(e.counter(0, 0, 5, &mut c), Some((6, 142)));
    // Two rules count into `hits`: 4 packets each.
    let named: Vec<(String, u64, u64)> = e
        .named_counters(&mut c)
        .into_iter()
        .map(|n| (n.name, n.packets, n.bytes))
        .collect();
    assert_eq!(
        named,
        [("hits".into(), 13, 300 + 8 * 28), ("idle".into(), 0, 0)]
    );
    let elems: Vec<(usize, u64, u64)> = e
        .set_element_counters(&mut c)
        .into_iter()
        .map(|s| (s.element, s.packets, s.bytes))
        .collect();
    assert_eq!(elems, [(0, 1, 28), (1, 9, 70 + 56)]);
    // Counters leave no trace event (the kernel's trace shows none).
    assert!(
        !rec.0
            .iter()
            .any(|ev| matches!(ev, TraceEvent::Plugin { .. }))
    );
    e.store_counters(&mut rs, &mut c);
    let text = wasp_ruleset::print_ruleset(&rs, false);
    for want in [
        "\tcounter hits {\n\t\tpackets 13 bytes 524\n\t}",
        "\tcounter idle {\n\t\tpackets 0 bytes 0\n\t}",
        "counter packets 6 bytes 142 counter packets 5 bytes 140",
        "counter name \"hits\" ip saddr @a",
        "10.0.0.1 counter packets 1 bytes 28",
        "10.0.0.2 counter packets 9 bytes 126",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
}

/// Records the calls of the counter sites (site, elem of each packet).
#[derive(Default)]
struct Calls(Vec<(u32, Vec<u32>)>);
impl Extensions for Calls {
    fn matches(&mut self, _: u32, _: &[ExtPacket<'_>], _: &mut [bool]) {}
    fn apply(
        &mut self,
        site: u32,
        pkts: &[ExtPacket<'_>],
        _: &mut [ExtVerdict],
        _: &mut Vec<(usize, ExtEdit)>,
    ) {
        self.0.push((site, pkts.iter().map(|p| p.elem).collect()));
    }
    fn advance(&mut self, _: u64) {}
}

#[test]
fn element_hits_of_a_vector_go_in_one_call() {
    let (mut e, _) = engine(
        "table netdev t {\n\tset a { type ipv4_addr; counter; elements = { 10.0.0.1, 10.0.0.2, 10.0.0.3 } }\n\tchain c { type filter hook ingress device \"eth0\" priority 0; policy accept;\n\t\tip saddr @a accept\n\t}\n}\n",
    );
    let frames: Vec<Vec<u8>> = [3u8, 1, 9, 1, 2]
        .iter()
        .map(|&x| udp4([10, 0, 0, x], 1))
        .collect();
    let pk: Vec<Packet<'_>> = frames.iter().map(|f| pkt(f)).collect();
    let mut calls = Calls::default();
    let mut out = vec![
        Outcome {
            verdict: FinalVerdict::Accept,
            decision: None,
            mark: 0,
            fwd: None,
            dup: 0,
            reject: None,
        };
        pk.len()
    ];
    e.ingress_ext("eth0", &pk, 0, &mut out, None, &mut calls);
    // Elements by index + 1, the miss (10.0.0.9) absent.
    assert_eq!(calls.0, [(0, vec![3, 1, 1, 2])]);
    // Vectors of one: one call per hit.
    let mut one = Calls::default();
    for p in &pk {
        let mut o = one_outcome();
        e.ingress_ext("eth0", std::slice::from_ref(p), 0, &mut o, None, &mut one);
    }
    assert_eq!(
        one.0,
        [(0, vec![3]), (0, vec![1]), (0, vec![1]), (0, vec![2])]
    );
}

fn one_outcome() -> [Outcome; 1] {
    [Outcome {
        verdict: FinalVerdict::Accept,
        decision: None,
        mark: 0,
        fwd: None,
        dup: 0,
        reject: None,
    }]
}

#[test]
fn reset_zeroes_counts_and_leaves_element_expiry_alone() {
    let (mut e, _) = engine(RULES);
    let mut c = count(&mut e);
    let s = 1_000_000_000u64;
    let f = vec![udp4([10, 0, 0, 1], 53)];
    ingress(&mut e, &f, 0, None);
    e.reset_counters(&mut c);
    assert!(
        e.counters(&mut c)
            .iter()
            .all(|v| (v.packets, v.bytes) == (0, 0))
    );
    assert!(
        e.named_counters(&mut c)
            .iter()
            .all(|v| (v.packets, v.bytes) == (0, 0))
    );
    assert!(
        e.set_element_counters(&mut c)
            .iter()
            .all(|v| (v.packets, v.bytes) == (0, 0))
    );
    // Counting goes on from zero; the element still expires 10 s after the load.
    ingress(&mut e, &f, 9 * s, None);
    assert_eq!(e.set_element_counters(&mut c)[0].packets, 1);
    ingress(&mut e, &f, 10 * s, None);
    assert_eq!(e.set_element_counters(&mut c)[0].packets, 1);
    // Two packets since the reset.
    assert_eq!(e.counter(0, 0, 5, &mut c), Some((2, 56)));
}

#[test]
fn without_a_plugin_runtime_nothing_counts_and_verdicts_stay() {
    let (mut e, _) = engine(
        "table netdev t {\n\tset a { type ipv4_addr; counter; elements = { 10.0.0.1 } }\n\tchain c { type filter hook ingress device \"eth0\" priority 0; policy drop;\n\t\tcounter ip saddr @a counter accept\n\t}\n}\n",
    );
    let frames = [udp4([10, 0, 0, 1], 1), udp4([10, 0, 0, 2], 1)];
    let pk: Vec<Packet<'_>> = frames.iter().map(|f| pkt(f)).collect();
    let mut out = vec![
        Outcome {
            verdict: FinalVerdict::Accept,
            decision: None,
            mark: 0,
            fwd: None,
            dup: 0,
            reject: None,
        };
        2
    ];
    e.ingress("eth0", &pk, 0, &mut out, None);
    let v: Vec<FinalVerdict> = out.iter().map(|o| o.verdict).collect();
    assert_eq!(v, [FinalVerdict::Accept, FinalVerdict::Drop]);
}

#[test]
fn an_unknown_counter_name_is_an_error_at_the_statement() {
    let rs = wasp_ruleset::parse_str(
        "table netdev t {\n\tchain c {\n\t\tcounter name nope\n\t}\n}\n",
        "t.nft",
    )
    .unwrap();
    let err = Engine::compile(&rs).unwrap_err().to_string();
    assert!(err.contains("t.nft:3:3"), "{err}");
    assert!(err.contains("unknown counter `nope`"), "{err}");
}

/// Two anonymous sets with element counters in one rule (the first loaded with counts), one
/// in the next rule, and an anonymous set without counters in between.
const ANON: &str = "table netdev t {
\tchain c { type filter hook ingress device \"eth0\" priority 0; policy accept;
\t\tudp dport 53 ip saddr { 10.0.0.1 counter packets 4 bytes 40, 10.0.0.2 } ip saddr { 10.0.0.2 counter, 10.0.0.1 counter } counter
\t\tudp dport { 53, 80 } ip saddr { 10.0.0.1 counter, 10.0.0.2 counter, 10.0.0.3 } accept
\t}
}
";

#[test]
fn anonymous_set_elements_count_per_rule_and_set() {
    let (mut e, mut rs) = engine(ANON);
    let h: Vec<u64> = rs.tables[0].chains[0]
        .rules
        .iter()
        .map(|r| r.handle)
        .collect();
    let uses: Vec<CounterUse> = e
        .counter_uses()
        .map(|(_, u)| u.clone())
        .filter(|u| matches!(u, CounterUse::AnonSet { .. }))
        .collect();
    let anon = |handle, nth, elements: Vec<usize>| CounterUse::AnonSet {
        table: 0,
        chain: 0,
        handle,
        nth,
        elements,
    };
    // The port set of the second rule is its anonymous set 0 and has no counter site.
    assert_eq!(
        uses,
        [
            anon(h[0], 0, vec![0]),
            anon(h[0], 1, vec![0, 1]),
            anon(h[1], 1, vec![0, 1]),
        ]
    );
    let mut c = count(&mut e);
    let frames = vec![
        udp4([10, 0, 0, 1], 53), // rule 1: set 0 [0], set 1 [1]; then rule 2 set 1 [0]
        udp4([10, 0, 0, 1], 53),
        udp4([10, 0, 0, 2], 53), // rule 1: set 0 [1] (no counter), set 1 [0]; rule 2 [1]
        udp4([10, 0, 0, 2], 80), // rule 2 only: [1]
        udp4([10, 0, 0, 3], 80), // rule 2: element 2 has no counter
        udp4([10, 0, 0, 9], 53), // no element
    ];
    ingress(&mut e, &frames, 0, None);
    // skb->len at ingress: IPv4 20 + UDP 8 = 28 bytes per packet.
    let got: Vec<(u64, u32, usize, u64, u64)> = e
        .anon_set_counters(&mut c)
        .into_iter()
        .map(|a| (a.handle, a.nth, a.element, a.packets, a.bytes))
        .collect();
    assert_eq!(
        got,
        [
            (h[0], 0, 0, 4 + 2, 40 + 56),
            (h[0], 1, 0, 1, 28),
            (h[0], 1, 1, 2, 56),
            (h[1], 1, 0, 2, 56),
            (h[1], 1, 1, 2, 56),
        ]
    );
    e.store_counters(&mut rs, &mut c);
    // Listed as nft lists anonymous sets: elements in key order.
    let text = wasp_ruleset::print_ruleset(&rs, false);
    for want in [
        "ip saddr { 10.0.0.1 counter packets 6 bytes 96, 10.0.0.2 } ip saddr { 10.0.0.1 counter packets 2 bytes 56, 10.0.0.2 counter packets 1 bytes 28 } counter packets 3 bytes 84\n",
        "ip saddr { 10.0.0.1 counter packets 2 bytes 56, 10.0.0.2 counter packets 2 bytes 56, 10.0.0.3 } accept\n",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
    // `reset counters` zeroes them with every other counter.
    e.reset_counters(&mut c);
    assert!(
        e.anon_set_counters(&mut c)
            .iter()
            .all(|a| (a.packets, a.bytes) == (0, 0))
    );
    ingress(&mut e, &frames[2..3], 0, None);
    let got: Vec<(u64, u32, usize, u64)> = e
        .anon_set_counters(&mut c)
        .into_iter()
        .filter(|a| a.packets != 0)
        .map(|a| (a.handle, a.nth, a.element, a.packets))
        .collect();
    assert_eq!(got, [(h[0], 1, 0, 1), (h[1], 1, 1, 1)]);
}

#[test]
fn a_counter_on_an_anonymous_map_element_is_an_error_as_in_nft() {
    // nft 1.0.6: "Error: missing statement in map declaration" at the element's `counter`.
    for rule in [
        "ip saddr vmap { 10.0.0.1 counter : accept }",
        "meta mark set ip saddr map { 10.0.0.1 counter : 0x1 }",
    ] {
        let text = format!("table netdev t {{\n\tchain c {{\n\t\t{rule}\n\t}}\n}}\n");
        let rs = wasp_ruleset::parse_str(&text, "t.nft").unwrap();
        let err = Engine::compile(&rs).unwrap_err().to_string();
        assert!(
            err.contains("missing statement in map declaration"),
            "{err}"
        );
        assert!(err.contains("t.nft:3:"), "{err}");
    }
}

/// Element commands on a set whose elements count change it in place (no compile): a delete
/// from the middle takes its element's counts with it, the elements after it keep theirs, and
/// an element added afterwards, even one deleted before, starts from zero. The counts list
/// by key as a whole compile of the same ruleset (which carries counts by key) lists them.
#[test]
fn counted_elements_keep_their_own_counts_through_deletes_in_place() {
    let (mut e, mut rs) = engine(
        "table netdev t {\n\tset a { type ipv4_addr; counter; elements = { 10.0.0.1, 10.0.0.2, 10.0.0.3 } }\n\tchain c { type filter hook ingress device \"eth0\" priority 0; policy accept;\n\t\tip saddr @a accept\n\t}\n}\n",
    );
    let mut c = count(&mut e);
    let send = |e: &mut Engine, hosts: &[u8]| {
        let frames: Vec<Vec<u8>> = hosts.iter().map(|&x| udp4([10, 0, 0, x], 1)).collect();
        ingress(e, &frames, 0, None);
    };
    send(&mut e, &[1, 2, 2, 3, 3, 3]);
    let mut shadows = wasp_ruleset::SetShadows::default();
    for batch in [
        "delete element netdev t a { 10.0.0.2 }\nadd element netdev t a { 10.0.0.4 }",
        "add element netdev t a { 10.0.0.2 }",
    ] {
        crate::set_update::apply_in_place(&mut e, &mut rs, &mut shadows, batch);
    }
    // By host byte: the model's order is .1 .3 .4 .2 now.
    let counts = |e: &Engine, c: &mut Counts, rs: &Ruleset| -> Vec<(u8, u64, u64)> {
        e.set_element_counters(c)
            .iter()
            .map(|x| {
                let KeyPart::Value(v) =
                    &rs.tables[0].sets[0].elements.get(x.element).unwrap().key[0]
                else {
                    panic!("a single address");
                };
                (v.bytes[3], x.packets, x.bytes)
            })
            .collect()
    };
    // `skb->len` at netdev ingress: the frame without its Ethernet header.
    let len = udp4([10, 0, 0, 1], 1).len() as u64 - 14;
    assert_eq!(
        counts(&e, &mut c, &rs),
        [(1, 1, len), (3, 3, 3 * len), (4, 0, 0), (2, 0, 0)]
    );
    send(&mut e, &[1, 2, 3, 4]);
    let after = counts(&e, &mut c, &rs);
    assert_eq!(
        after,
        [(1, 2, 2 * len), (3, 4, 4 * len), (4, 1, len), (2, 1, len)]
    );
    // The listing writes each count into its own element.
    let mut listed = rs.clone();
    e.store_counters(&mut listed, &mut c);
    let elems: Vec<(u8, u64, u64)> = listed.tables[0].sets[0]
        .elements
        .iter()
        .map(|x| {
            let KeyPart::Value(v) = &x.key[0] else {
                panic!("a single address");
            };
            (v.bytes[3], x.packets(), x.bytes())
        })
        .collect();
    assert_eq!(elems, after);
}
