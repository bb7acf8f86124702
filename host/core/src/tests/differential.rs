//! The vector pipeline against the per-packet walk on random rulesets and random packets: same
//! outcomes, same trace per packet, same counters.

use super::*;

#[derive(Default)]
struct Rec(Vec<TraceEvent>);
impl TraceSink for Rec {
    fn event(&mut self, ev: TraceEvent) {
        self.0.push(ev);
    }
}

fn match_pool(k: u8) -> Stmt {
    let d = || pf(PayloadField::named("tcp", "dport").unwrap());
    match k % 12 {
        0 => eq(d(), port(22)),
        1 => mt(RelOp::Ne, d(), port(80)),
        2 => mpart(RelOp::Eq, d(), vec![KeyPart::Range(port(20), port(100))]),
        3 => mt(
            RelOp::Implicit,
            pf(PayloadField::named("tcp", "flags").unwrap()),
            byte(DataType::TcpFlag, SYN),
        ),
        4 => mpart(
            RelOp::Eq,
            pf(PayloadField::named("ip", "saddr").unwrap()),
            vec![KeyPart::Prefix(v4([10, 0, 0, 0]), 8)],
        ),
        5 => eq(
            Expr::Meta(MetaKey::Mark),
            val(DataType::Mark, &1u32.to_be_bytes()),
        ),
        6 => in_set(
            RelOp::Eq,
            pf(PayloadField::named("th", "dport").unwrap()),
            SetRef::Anonymous(vec![
                elem(vec![kv(port(53))], None),
                elem(vec![kv(port(443))], None),
            ]),
        ),
        7 => eq(
            pf(PayloadField::named("vlan", "id").unwrap().at_depth(0)),
            val(DataType::Integer(12), &[0, 10]),
        ),
        8 => eq(
            Expr::Meta(MetaKey::Protocol),
            val(DataType::EtherType, &[0x86, 0xdd]),
        ),
        // A single-field interval set (rbtree semantics) and a concatenation with ranges
        // (pipapo, the older element first where two overlap).
        10 => in_set(
            RelOp::Eq,
            pf(PayloadField::named("th", "dport").unwrap()),
            SetRef::Anonymous(vec![
                elem(vec![KeyPart::Range(port(20), port(30))], None),
                elem(vec![KeyPart::Range(port(50), port(80))], None),
                elem(vec![kv(port(443))], None),
            ]),
        ),
        11 => in_set(
            RelOp::Ne,
            Expr::Concat(vec![
                pf(PayloadField::named("ip", "saddr").unwrap()),
                pf(PayloadField::named("th", "dport").unwrap()),
            ]),
            SetRef::Anonymous(vec![
                elem(
                    vec![
                        KeyPart::Prefix(v4([10, 0, 0, 0]), 8),
                        KeyPart::Range(port(1), port(1000)),
                    ],
                    None,
                ),
                elem(
                    vec![
                        KeyPart::Prefix(v4([0, 0, 0, 0]), 1),
                        KeyPart::Range(port(0), port(65535)),
                    ],
                    None,
                ),
                elem(vec![kv(v4([192, 168, 1, 1])), kv(port(53))], None),
            ]),
        ),
        _ => eq(pf(PayloadField::named("udp", "dport").unwrap()), port(53)),
    }
}

#[derive(Debug, Clone)]
struct RuleSpec {
    matches: Vec<u8>,
    /// A plugin use after the matches: (argument, statement rather than match, fallback drop).
    plug: Option<(u8, bool, bool)>,
    counter: bool,
    mark: Option<u32>,
    verdict: u8,
    target: u8,
}

fn rule_spec() -> impl Strategy<Value = RuleSpec> {
    (
        prop::collection::vec(any::<u8>(), 0..3),
        prop::option::of((any::<u8>(), any::<bool>(), any::<bool>())),
        any::<bool>(),
        prop::option::of(0u32..3),
        any::<u8>(),
        any::<u8>(),
    )
        .prop_map(|(matches, plug, counter, mark, verdict, target)| RuleSpec {
            matches,
            plug,
            counter,
            mark,
            verdict,
            target,
        })
}

/// Chains c0 (base, table 0), c1..c4 regular in table 0; jumps go only to higher-numbered chains
/// (the kernel refuses loops). A second table has a base chain at a random priority.
fn build(chains: &[Vec<RuleSpec>], pol: [bool; 2], prio2: i32, other: &[RuleSpec]) -> Ruleset {
    let n = chains.len();
    let mk = |ci: usize, specs: &[RuleSpec], local: usize, n: usize| -> Vec<Rule> {
        specs
            .iter()
            .map(|s| {
                let mut st: Vec<Stmt> = s.matches.iter().map(|&k| match_pool(k)).collect();
                if let Some((arg, stmt, fb)) = s.plug {
                    let name = if stmt { "s" } else { "m" };
                    st.push(plugin_use(name, &arg.to_string(), fb));
                }
                if s.counter {
                    st.push(counter());
                }
                if let Some(m) = s.mark {
                    st.push(set_mark(m));
                }
                let later = ci + 1 + usize::from(s.target) % local.max(1);
                match s.verdict % 8 {
                    0 => st.push(accept()),
                    1 => st.push(drop_()),
                    2 => st.push(Stmt::Verdict(Verdict::Continue)),
                    3 => st.push(Stmt::Verdict(Verdict::Return)),
                    4 if later < n => st.push(jump(&format!("c{later}"))),
                    5 if later < n => st.push(goto(&format!("c{later}"))),
                    _ => {}
                }
                rule(st)
            })
            .collect()
    };
    let policy = |b| if b { Policy::Accept } else { Policy::Drop };
    let cs: Vec<Chain> = chains
        .iter()
        .enumerate()
        .map(|(i, specs)| {
            let base = (i == 0).then_some((0, policy(pol[0])));
            chain(&format!("c{i}"), base, mk(i, specs, n - i - 1, n))
        })
        .collect();
    let t2 = table(
        Family::Netdev,
        "u",
        vec![chain(
            "b",
            Some((prio2, policy(pol[1]))),
            mk(0, other, 0, 0),
        )],
        vec![],
    );
    let mut t2 = t2;
    t2.plugins = plugins(&["m", "s"]);
    let mut t = table(Family::Netdev, "t", cs, vec![]);
    t.plugins = plugins(&["m", "s"]);
    ruleset(vec![t, t2])
}

fn frame_pool(k: u8, port_: u16, flags: u8) -> Vec<u8> {
    match k % 7 {
        0 => ipv4(6, [10, 0, 0, 1], [1; 4], 0, &tcp(1, port_, flags)),
        1 => ipv4(6, [11, 0, 0, 1], [1; 4], 0, &tcp(1, port_, flags)),
        2 => ipv4(17, [10, 0, 0, 1], [1; 4], 0, &udp(1, port_)),
        3 => tag(
            &ipv4(6, [10, 0, 0, 1], [1; 4], 0, &tcp(1, port_, flags)),
            0x8100,
            10,
        ),
        4 => ipv6(6, 1, &tcp(1, port_, flags)),
        5 => eth(0x0806, &[0; 28]),
        _ => {
            let mut f = ipv4(6, [10, 0, 0, 1], [1; 4], 0, &tcp(1, port_, flags));
            f.truncate(40);
            f
        }
    }
}

fn by_packet(evs: &[TraceEvent], i: usize) -> Vec<TraceEvent> {
    evs.iter()
        .filter(|e| match e {
            TraceEvent::Rule { packet, .. }
            | TraceEvent::ChainEnd { packet, .. }
            | TraceEvent::Log { packet, .. }
            | TraceEvent::Plugin { packet, .. } => *packet == i,
        })
        .cloned()
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn vector_equals_per_packet(
        chains in prop::collection::vec(prop::collection::vec(rule_spec(), 0..5), 1..5),
        other in prop::collection::vec(rule_spec(), 0..3),
        pol in any::<[bool; 2]>(),
        prio2 in -1i32..2,
        pkts in prop::collection::vec((any::<u8>(), prop::sample::select(vec![22u16, 53, 80, 443, 1000]), any::<u8>()), 1..70),
    ) {
        let rs = build(&chains, pol, prio2, &other);
        // Every engine gets the same deterministic plugins (their answers do not depend on
        // the batching).
        let with_ext = |e: &mut Engine| {
            let kinds = kinds_of(e);
            let c = Counts::of(e);
            e.set_ext(Box::new(Fake { counts: Some(c.clone()), ..Fake::default() }), &kinds);
            c
        };
        let mut ev = Engine::compile(&rs).unwrap();
        let mut cv = with_ext(&mut ev);
        let mut e1 = Engine::compile(&rs).unwrap();
        let mut c1 = with_ext(&mut e1);
        let frames: Vec<Vec<u8>> = pkts.iter().map(|&(k, p, f)| frame_pool(k, p, f)).collect();
        let pk: Vec<Packet<'_>> = frames.iter().map(|f| pkt(f)).collect();
        let mut out = vec![Outcome { verdict: FinalVerdict::Accept, decision: None, mark: 0, fwd: None, dup: 0, reject: None }; pk.len()];
        // The whole input in one call (vectors of 64 inside), and again vector by vector to
        // see each vector's trace on its own.
        let res = ev.ingress("eth0", &pk, 0, &mut out, None);
        let mut edits_v: Vec<(usize, ExtEdit)> = res.edits.clone();
        edits_v.sort_by_key(|e| e.0);
        let mut edits_1: Vec<(usize, ExtEdit)> = Vec::new();
        let mut ev2 = Engine::compile(&rs).unwrap();
        let _ = with_ext(&mut ev2);
        let mut traces = Vec::new();
        for (ci, chunk) in pk.chunks(MAX_VECTOR).enumerate() {
            let mut rec = Rec::default();
            let mut o2 = vec![Outcome { verdict: FinalVerdict::Accept, decision: None, mark: 0, fwd: None, dup: 0, reject: None }; chunk.len()];
            ev2.ingress("eth0", chunk, 0, &mut o2, Some(&mut rec));
            prop_assert_eq!(&o2[..], &out[ci * MAX_VECTOR..ci * MAX_VECTOR + chunk.len()]);
            traces.push(rec.0);
        }
        // The kernel's walk: every operation of every rule runs (no memo between rules).
        let mut ek = Engine::compile(&rs).unwrap();
        let mut ck = with_ext(&mut ek);
        for (i, p) in pk.iter().enumerate() {
            let mut r1 = Rec::default();
            // Trace indices count within a vector.
            let (o, res1) = e1.one("eth0", p, i % MAX_VECTOR, 0, Some(&mut r1));
            edits_1.extend(res1.edits.iter().map(|(k, e)| {
                assert_eq!(*k, i % MAX_VECTOR);
                (i, e.clone())
            }));
            prop_assert_eq!(out[i], o, "packet {}", i);
            prop_assert_eq!(&by_packet(&traces[i / MAX_VECTOR], i % MAX_VECTOR), &r1.0, "trace of packet {}", i);
            let mut rk = Rec::default();
            let ok = ek.walk_hook("eth0", p, i % MAX_VECTOR, 0, &mut HookResult::new(), Some(&mut rk), false);
            prop_assert_eq!(o, ok, "packet {} without memo", i);
            prop_assert_eq!(r1.0, rk.0, "trace of packet {} without memo", i);
        }
        prop_assert_eq!(&edits_v, &edits_1);
        prop_assert_eq!(ev.counters(&mut cv), e1.counters(&mut c1));
        prop_assert_eq!(ev.counters(&mut cv), ek.counters(&mut ck));
        let stats = ev.chain_stats(Hook::Ingress, "eth0");
        prop_assert_eq!(&stats, &e1.chain_stats(Hook::Ingress, "eth0"));
        prop_assert_eq!(&stats, &ev2.chain_stats(Hook::Ingress, "eth0"));
        // Every packet that reached a base chain ended its walk there in accept or drop; a
        // later chain sees only the packets the earlier ones accepted.
        for (k, s) in stats.iter().enumerate() {
            prop_assert_eq!(s.packets, s.accepted + s.dropped);
            if k > 0 {
                prop_assert!(s.packets <= stats[k - 1].accepted);
            }
        }
        prop_assert_eq!(stats[0].packets, pk.len() as u64);
        let drops: u64 = stats.iter().map(|s| s.dropped).sum();
        prop_assert_eq!(drops, out.iter().filter(|o| o.verdict == FinalVerdict::Drop).count() as u64);
    }
}
