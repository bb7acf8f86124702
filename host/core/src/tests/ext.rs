//! Plugin use sites: one batched call per vector and site, the packet description, verdicts
//! of statements, edits, fallbacks without an extension, the clock, and trace events.

use super::*;

mod edits;

#[derive(Default)]
struct Rec(Vec<TraceEvent>);
impl TraceSink for Rec {
    fn event(&mut self, ev: TraceEvent) {
        self.0.push(ev);
    }
}

/// Table `netdev t` declaring `names`, base chain `c` on eth0 with `policy` and `rules`.
fn engine(names: &[&str], policy: Policy, rules: Vec<Vec<Stmt>>) -> Engine {
    let mut t = table(
        Family::Netdev,
        "t",
        vec![chain(
            "c",
            Some((0, policy)),
            rules.into_iter().map(rule).collect(),
        )],
        vec![],
    );
    t.plugins = plugins(names);
    Engine::compile(&ruleset(vec![t])).expect("compiles")
}

fn outcomes(n: usize) -> Vec<Outcome> {
    vec![
        Outcome {
            verdict: FinalVerdict::Accept,
            decision: None,
            mark: 0,
            fwd: None,
            dup: 0,
            reject: None,
        };
        n
    ]
}

#[test]
fn sites_are_numbered_in_rule_order_with_their_arguments() {
    let e = engine(
        &["m", "s"],
        Policy::Accept,
        vec![
            vec![plugin_use("m", "a", false), plugin_use("s", "b", true)],
            vec![counter(), plugin_use("s", "c", false), accept()],
        ],
    );
    // The `counter` is a site of the counter plugin too, in its place.
    let sites = e.ext_sites();
    assert_eq!(sites.len(), 4);
    assert_eq!(
        sites
            .iter()
            .map(|s| (s.id, s.plugin.as_str(), s.args[0].as_str(), s.fallback))
            .collect::<Vec<_>>(),
        [
            (0, "m", "a", Fallback::Absent),
            (1, "s", "b", Fallback::Drop),
            (2, "counter", "packets", Fallback::Absent),
            (3, "s", "c", Fallback::Absent),
        ]
    );
    assert_eq!(sites[2].args, ["packets", "0", "bytes", "0"]);
    assert!(sites.iter().all(|s| s.table == 0
        && s.kind
            == if s.id == 2 {
                ExtKind::Stateful
            } else {
                ExtKind::Statement
            }));
    let uses: Vec<(u32, CounterUse)> = e.counter_uses().map(|(i, u)| (i, u.clone())).collect();
    assert_eq!(
        uses,
        [(
            2,
            CounterUse::Rule {
                table: 0,
                chain: 0,
                handle: 3,
                nth: 0
            }
        )]
    );
}

#[test]
fn an_undeclared_plugin_is_a_compile_error() {
    let t = table(
        Family::Netdev,
        "t",
        vec![chain(
            "c",
            Some((0, Policy::Accept)),
            vec![rule(vec![plugin_use("nope", "x", false)])],
        )],
        vec![],
    );
    let e = Engine::compile(&ruleset(vec![t])).unwrap_err();
    assert!(e.to_string().contains("unknown plugin `nope`"), "{e}");
}

#[test]
fn one_call_per_vector_and_site_over_the_packets_still_in_the_rule() {
    // Rule 1: `tcp dport 22 m x accept`; policy drop. Only TCP port 22 reaches the site.
    let mut e = engine(
        &["m"],
        Policy::Drop,
        vec![vec![
            eq(pf(PayloadField::named("tcp", "dport").unwrap()), port(22)),
            set_mark(7),
            plugin_use("m", "x", false),
            accept(),
        ]],
    );
    let kinds = kinds_of(&e);
    e.set_ext_kinds(&kinds);
    let mut frames: Vec<Vec<u8>> = Vec::new();
    for i in 0..70u16 {
        frames.push(if i % 2 == 0 {
            ipv4(6, [10, 0, 0, 1], [1; 4], 0, &tcp(1000 + i, 22, SYN))
        } else {
            ipv4(17, [10, 0, 0, 1], [1; 4], 0, &udp(1000 + i, 22))
        });
    }
    let pk: Vec<Packet<'_>> = frames.iter().map(|f| pkt(f)).collect();
    let mut out = outcomes(pk.len());
    let mut fake = Fake {
        record: true,
        ..Fake::default()
    };
    e.ingress_ext("eth0", &pk, 5_000, &mut out, None, &mut fake);
    // 70 packets: vectors of 64 and 6; the TCP half of each reaches the site.
    assert_eq!(fake.calls, [(0, 32), (0, 3)]);
    assert_eq!(fake.advanced, [5_000, 5_000]);
    // The packet header: IPv4 at 14, TCP at 34, l4proto 6, nfproto 2, the mark set before
    // the site, the frame length.
    let (_, p, flen) = fake.seen[0];
    assert_eq!(
        (
            p.l3, p.l4, p.l4proto, p.nfproto, p.mark, p.len, p.elem, p.iftype
        ),
        (14, 34, 6, 2, 7, 54, 0, 1)
    );
    assert_eq!(flen, 54);
    for (i, o) in out.iter().enumerate() {
        let want = i % 2 == 0 && fake_hash(&frames[i], 0) & 1 == 1;
        assert_eq!(o.verdict == FinalVerdict::Accept, want, "packet {i}");
    }
}

#[test]
fn the_packet_header_marks_what_is_missing() {
    let mut e = engine(
        &["m"],
        Policy::Accept,
        vec![vec![plugin_use("m", "x", false)]],
    );
    e.set_ext_kinds(&[ExtKind::Match]);
    let arp = eth(0x0806, &[0; 28]);
    let frag = ipv4(6, [10, 0, 0, 1], [1; 4], 0x0010, &tcp(1, 2, 0));
    let v6 = ipv6(17, 1, &udp(1, 2));
    let short = MAC_D.to_vec();
    let frames = [arp, frag, v6, short];
    let pk: Vec<Packet<'_>> = frames.iter().map(|f| pkt(f)).collect();
    let mut fake = Fake {
        record: true,
        ..Fake::default()
    };
    e.ingress_ext("eth0", &pk, 0, &mut outcomes(4), None, &mut fake);
    let got: Vec<(u16, u16, u8, u8)> = fake
        .seen
        .iter()
        .map(|(_, p, _)| (p.l3, p.l4, p.l4proto, p.nfproto))
        .collect();
    // ARP: its header at 14, no transport; a non-first IPv4 fragment: its protocol but no
    // transport header; IPv6/UDP at 14 and 54; a frame cut in the MAC header: nothing.
    assert_eq!(
        got,
        [
            (14, 0xffff, 0, 0),
            (14, 0xffff, 6, 2),
            (14, 54, 17, 10),
            (0xffff, 0xffff, 0, 0)
        ]
    );
}

#[test]
fn statements_give_verdicts_per_packet_and_report_edits() {
    // `s x counter accept` then `counter`: continue goes on to the counter and accept; drop
    // and accept end the rule at the site; return ends the base chain at its policy (drop).
    let mut e = engine(
        &["s"],
        Policy::Drop,
        vec![
            vec![plugin_use("s", "x", false), counter(), accept()],
            vec![counter()],
        ],
    );
    let frames: Vec<Vec<u8>> = (0..40u16)
        .map(|i| ipv4(6, [10, 0, 0, 1], [1; 4], 0, &tcp(i, 80, ACK)))
        .collect();
    let pk: Vec<Packet<'_>> = frames.iter().map(|f| pkt(f)).collect();
    let mut out = outcomes(pk.len());
    let mut c = Counts::of(&e);
    let mut fake = Fake {
        counts: Some(c.clone()),
        ..Fake::default()
    };
    let mut rec = Rec::default();
    let res = e.ingress_ext("eth0", &pk, 0, &mut out, Some(&mut rec), &mut fake);
    let mut want_cont = 0;
    let mut want_edits = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let h = fake_hash(f, 0);
        let (verdict, rule) = match h % 6 {
            0..=2 => {
                want_cont += 1;
                (FinalVerdict::Accept, Some(2))
            }
            3 => (FinalVerdict::Accept, Some(2)),
            4 => (FinalVerdict::Drop, Some(2)),
            _ => (FinalVerdict::Drop, None),
        };
        assert_eq!(out[i].verdict, verdict, "packet {i}");
        assert_eq!(out[i].decision.and_then(|d| d.rule), rule, "packet {i}");
        if h.is_multiple_of(3) {
            want_edits.push((
                i,
                ExtEdit::Set {
                    offset: 0,
                    data: vec![0],
                },
            ));
        }
        let result = match h % 6 {
            0..=2 => "continue",
            3 => "accept",
            4 => "drop",
            _ => "return",
        };
        assert!(rec.0.contains(&TraceEvent::Plugin {
            packet: i,
            site: 0,
            result: result.into()
        }));
    }
    assert!(want_cont > 0 && want_cont < 40);
    // The counter after the site saw only the packets that continued; the one of the next
    // rule none (everything ended in rule 1 or at the policy).
    let c = e.counters(&mut c);
    assert_eq!(c[0].packets, want_cont);
    assert_eq!(c[1].packets, 0);
    assert_eq!(res.edits, want_edits);
}

#[test]
fn without_an_extension_sites_give_their_fallback() {
    let frames = vec![ipv4(6, [10, 0, 0, 1], [1; 4], 0, &tcp(1, 80, ACK))];
    // A statement continues; with `fallback drop` it drops.
    let mut e = engine(
        &["s"],
        Policy::Drop,
        vec![vec![plugin_use("s", "x", false), accept()]],
    );
    assert_eq!(run(&mut e, &frames)[0].verdict, FinalVerdict::Accept);
    let mut e = engine(
        &["s"],
        Policy::Accept,
        vec![vec![plugin_use("s", "x", true), accept()]],
    );
    let o = run(&mut e, &frames)[0];
    assert_eq!(o.verdict, FinalVerdict::Drop);
    assert_eq!(o.decision.and_then(|d| d.rule), Some(2));
    // A match is false; with `fallback drop` it drops.
    let mut e = engine(
        &["m"],
        Policy::Drop,
        vec![vec![plugin_use("m", "x", false), accept()], vec![accept()]],
    );
    e.set_ext_kinds(&[ExtKind::Match]);
    let o = run(&mut e, &frames)[0];
    assert_eq!(
        (o.verdict, o.decision.and_then(|d| d.rule)),
        (FinalVerdict::Accept, Some(3))
    );
    let mut e = engine(
        &["m"],
        Policy::Accept,
        vec![vec![plugin_use("m", "x", true), accept()]],
    );
    e.set_ext_kinds(&[ExtKind::Match]);
    assert_eq!(run(&mut e, &frames)[0].verdict, FinalVerdict::Drop);
    // Installing and taking out.
    e.set_ext(Box::new(Fake::default()), &[ExtKind::Match]);
    assert!(e.take_ext().is_some());
    assert!(e.take_ext().is_none());
}

#[test]
fn the_per_packet_walk_advances_the_clock_and_reports_edits_by_its_index() {
    let mut e = engine(
        &["s"],
        Policy::Accept,
        vec![vec![plugin_use("s", "x", false)]],
    );
    // Find a frame the fake edits.
    let f = (0..100u16)
        .map(|i| ipv4(6, [10, 0, 0, 1], [1; 4], 0, &tcp(i, 80, ACK)))
        .find(|f| fake_hash(f, 0).is_multiple_of(3))
        .unwrap();
    e.set_ext(Box::new(Fake::default()), &[ExtKind::Statement]);
    let p = pkt(&f);
    let mut res = HookResult::new();
    e.ingress_one("eth0", &p, 9, 1_000, &mut res, None);
    assert_eq!(
        res.edits,
        [(
            9,
            ExtEdit::Set {
                offset: 0,
                data: vec![0]
            }
        )]
    );
    // The next call, into the same result, starts with no edits.
    let g = ipv4(17, [10, 0, 0, 1], [1; 4], 0, &udp(1, 2));
    e.run(At::Ingress("eth1"), &[pkt(&g)], 2_000, &mut res, None, None);
    assert!(res.edits.is_empty());
    assert_eq!(res.outcomes.len(), 1);
}

/// Fails every call of sites listed, answering as the plugin host does on a failure.
struct Failing(Vec<u32>, bool);

impl Extensions for Failing {
    fn matches(&mut self, site: u32, _pkts: &[ExtPacket<'_>], out: &mut [bool]) {
        self.1 = self.0.contains(&site);
        out.fill(!self.1);
    }
    fn apply(
        &mut self,
        site: u32,
        _pkts: &[ExtPacket<'_>],
        verdicts: &mut [ExtVerdict],
        _edits: &mut Vec<(usize, ExtEdit)>,
    ) {
        self.1 = self.0.contains(&site);
        verdicts.fill(ExtVerdict::Continue);
    }
    fn advance(&mut self, _now_ns: u64) {}
    fn last_call_failed(&mut self) -> bool {
        self.1
    }
}

#[test]
fn a_failed_match_with_fallback_drop_drops_the_packets_of_the_call() {
    let frames = vec![ipv4(6, [10, 0, 0, 1], [1; 4], 0, &tcp(1, 80, ACK)); 3];
    // Site 0 (fallback drop) fails: drop at rule 1; site 1 (no fallback) fails: no match.
    for (failing, want, rule) in [
        (vec![0], FinalVerdict::Drop, Some(2)),
        (vec![1], FinalVerdict::Accept, None),
        (vec![], FinalVerdict::Accept, Some(3)),
    ] {
        let mut e = engine(
            &["m"],
            Policy::Accept,
            vec![
                vec![plugin_use("m", "a", true)],
                vec![plugin_use("m", "b", false), accept()],
            ],
        );
        e.set_ext(
            Box::new(Failing(failing.clone(), false)),
            &[ExtKind::Match; 2],
        );
        for o in run(&mut e, &frames) {
            assert_eq!(
                (o.verdict, o.decision.and_then(|d| d.rule)),
                (want, rule),
                "failing {failing:?}"
            );
        }
    }
}

#[test]
fn the_clock_moves_once_per_vector_even_where_no_chain_runs() {
    let mut e = engine(
        &["s"],
        Policy::Accept,
        vec![vec![plugin_use("s", "x", false)]],
    );
    let frames: Vec<Vec<u8>> = (0..65u16)
        .map(|i| ipv4(17, [10, 0, 0, 1], [1; 4], 0, &udp(i, 2)))
        .collect();
    let pk: Vec<Packet<'_>> = frames.iter().map(|f| pkt(f)).collect();
    let mut fake = Fake::default();
    e.ingress_ext("eth0", &pk, 7, &mut outcomes(65), None, &mut fake);
    e.ingress_ext("nochain0", &pk[..3], 9, &mut outcomes(3), None, &mut fake);
    e.ingress_ext("nochain0", &[], 11, &mut [], None, &mut fake);
    assert_eq!(fake.advanced, [7, 7, 9]);
    assert_eq!(fake.calls, [(0, 64), (0, 1)]);
}
