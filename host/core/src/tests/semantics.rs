//! Verdict semantics: jump/goto/return stack, continue, policies, several base chains, decisions,
//! counters, trace, and the load-time checks.

use super::*;
use FinalVerdict::{Accept as A, Drop as D};

#[derive(Default)]
struct Rec(Vec<TraceEvent>);
impl TraceSink for Rec {
    fn event(&mut self, ev: TraceEvent) {
        self.0.push(ev);
    }
}

fn f22() -> Vec<u8> {
    ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 0, &tcp(1000, 22, SYN))
}
fn f80() -> Vec<u8> {
    ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 0, &tcp(1000, 80, SYN))
}
fn dport(p: u16) -> Stmt {
    eq(pf(PayloadField::named("tcp", "dport").unwrap()), port(p))
}

/// base c (policy drop): [2] jump sub, [3] dport 80 accept ; sub: [5] dport 22 return,
/// [6] counter, [7] mark set 1 — then c [3] for 80; 22 returns at once and hits the policy.
fn jump_ruleset(policy: Policy) -> Ruleset {
    ruleset(vec![table(
        Family::Netdev,
        "t",
        vec![
            chain(
                "c",
                Some((0, policy)),
                vec![rule(vec![jump("sub")]), rule(vec![dport(80), accept()])],
            ),
            chain(
                "sub",
                None,
                vec![
                    rule(vec![dport(22), Stmt::Verdict(Verdict::Return)]),
                    rule(vec![counter()]),
                    rule(vec![set_mark(1)]),
                ],
            ),
        ],
        vec![],
    )])
}

#[test]
fn jump_return_and_policy() {
    let mut e = Engine::compile(&jump_ruleset(Policy::Drop)).unwrap();
    let mut c = count(&mut e);
    let out = run(&mut e, &[f22(), f80()]);
    assert_eq!(
        out[0],
        Outcome {
            verdict: D,
            decision: Some(Decision {
                table: 0,
                chain: 0,
                rule: None
            }),
            mark: 0,
            fwd: None,
            dup: 0,
            reject: None,
        }
    );
    assert_eq!(
        out[1],
        Outcome {
            verdict: A,
            decision: Some(Decision {
                table: 0,
                chain: 0,
                rule: Some(3)
            }),
            mark: 1,
            fwd: None,
            dup: 0,
            reject: None,
        }
    );
    // The counter in sub saw only the port-80 packet: 1 packet, skb->len 40 bytes.
    assert_eq!(e.counter(0, 1, 6, &mut c), Some((1, 40)));
    assert_eq!(e.table_name(0), "t");
    assert_eq!(e.chain_name(0, 1), "sub");
}

#[test]
fn trace_of_a_jump() {
    let mut e = Engine::compile(&jump_ruleset(Policy::Drop)).unwrap();
    let f = f80();
    let mut rec = Rec::default();
    let mut out = [Outcome {
        verdict: A,
        decision: None,
        mark: 0,
        fwd: None,
        dup: 0,
        reject: None,
    }];
    e.ingress("eth0", &[pkt(&f)], 0, &mut out, Some(&mut rec));
    let rule = |chain, handle, v: &str| TraceEvent::Rule {
        packet: 0,
        table: 0,
        chain,
        handle,
        verdict: v.into(),
    };
    assert_eq!(
        rec.0,
        vec![
            rule(0, 2, "jump sub"),
            rule(1, 6, "continue"),
            rule(1, 7, "continue"),
            TraceEvent::ChainEnd {
                packet: 0,
                table: 0,
                chain: 1,
                policy: None
            },
            rule(0, 3, "accept"),
        ]
    );
    // 22 returns explicitly from sub, then runs off the end of c: policy drop.
    let f = f22();
    let mut rec = Rec::default();
    e.ingress("eth0", &[pkt(&f)], 0, &mut out, Some(&mut rec));
    assert_eq!(
        rec.0,
        vec![
            rule(0, 2, "jump sub"),
            rule(1, 5, "return"),
            TraceEvent::ChainEnd {
                packet: 0,
                table: 0,
                chain: 0,
                policy: Some(D)
            },
        ]
    );
}

#[test]
fn goto_does_not_return_and_continue_goes_on() {
    // c: [2] goto g, [3] accept ; g: [5] continue, [6] dport 22 drop  (end of g = c's policy)
    let rs = ruleset(vec![table(
        Family::Netdev,
        "t",
        vec![
            chain(
                "c",
                Some((0, Policy::Accept)),
                vec![rule(vec![goto("g")]), rule(vec![drop_()])],
            ),
            chain(
                "g",
                None,
                vec![
                    rule(vec![Stmt::Verdict(Verdict::Continue)]),
                    rule(vec![dport(22), drop_()]),
                ],
            ),
        ],
        vec![],
    )]);
    let mut e = Engine::compile(&rs).unwrap();
    let out = run(&mut e, &[f22(), f80()]);
    assert_eq!(
        (out[0].verdict, out[0].decision.unwrap().rule),
        (D, Some(6))
    );
    // 80 runs off the end of g: no return to c's rule 3 (which would drop); c's policy accepts.
    assert_eq!(
        out[1].decision,
        Some(Decision {
            table: 0,
            chain: 0,
            rule: None
        })
    );
    assert_eq!(out[1].verdict, A);
}

#[test]
fn return_in_base_chain_is_policy() {
    let mut e = one(
        Policy::Drop,
        vec![vec![Stmt::Verdict(Verdict::Return)], vec![accept()]],
    );
    let out = run(&mut e, &[f22()]);
    assert_eq!((out[0].verdict, out[0].decision.unwrap().rule), (D, None));
}

/// Two tables; `first` declared first. Each base chain: [counter-less] mark checks.
fn two_tables(p1: i32, p2: i32, r1: Vec<Vec<Stmt>>, r2: Vec<Vec<Stmt>>) -> Engine {
    let rs = ruleset(vec![
        table(
            Family::Netdev,
            "first",
            vec![chain(
                "c",
                Some((p1, Policy::Accept)),
                r1.into_iter().map(rule).collect(),
            )],
            vec![],
        ),
        table(
            Family::Netdev,
            "second",
            vec![chain(
                "c",
                Some((p2, Policy::Accept)),
                r2.into_iter().map(rule).collect(),
            )],
            vec![],
        ),
    ]);
    Engine::compile(&rs).unwrap()
}

fn mark_is(m: u32) -> Stmt {
    eq(
        Expr::Meta(MetaKey::Mark),
        val(DataType::Mark, &m.to_be_bytes()),
    )
}

#[test]
fn base_chains_run_by_priority_and_accept_goes_on() {
    // first at priority 10 accepts; second at -5 sets mark 1 then accepts. Priority -5 runs
    // first, the packet goes on to `first` after its accept; decision = last accept.
    let mut e = two_tables(
        10,
        -5,
        vec![vec![mark_is(1), accept()]],
        vec![vec![set_mark(1), accept()]],
    );
    let out = run(&mut e, &[f22()]);
    assert_eq!(
        out[0],
        Outcome {
            verdict: A,
            decision: Some(Decision {
                table: 0,
                chain: 0,
                rule: Some(2)
            }),
            mark: 1,
            fwd: None,
            dup: 0,
            reject: None,
        }
    );
    assert_eq!(e.base_chains(Hook::Ingress, "eth0"), vec![(1, 0), (0, 0)]);
    // A drop in the first chain to run ends everything.
    let mut e = two_tables(10, -5, vec![vec![set_mark(5)]], vec![vec![drop_()]]);
    let out = run(&mut e, &[f22()]);
    assert_eq!(
        out[0],
        Outcome {
            verdict: D,
            decision: Some(Decision {
                table: 1,
                chain: 0,
                rule: Some(2)
            }),
            mark: 0,
            fwd: None,
            dup: 0,
            reject: None,
        }
    );
}

#[test]
fn equal_priority_later_table_runs_first() {
    // Checked on the kernel (two netdev tables, priority 0, counters behind mark tests): the
    // table loaded second ran first.
    let mut e = two_tables(
        0,
        0,
        vec![vec![mark_is(2), counter()], vec![set_mark(1)]],
        vec![vec![mark_is(1), counter()], vec![set_mark(2)]],
    );
    let mut c = count(&mut e);
    let out = run(&mut e, &[f22()]);
    assert_eq!(out[0].mark, 1);
    assert_eq!(e.counter(0, 0, 2, &mut c), Some((1, 40)));
    assert_eq!(e.counter(1, 0, 2, &mut c), Some((0, 0)));
}

#[test]
fn inet_ingress_sees_only_valid_ip() {
    let rs = ruleset(vec![table(
        Family::Inet,
        "i",
        vec![chain(
            "c",
            Some((0, Policy::Drop)),
            vec![rule(vec![
                eq(
                    pf(PayloadField::named("ip", "saddr").unwrap()),
                    v4([10, 0, 0, 1]),
                ),
                accept(),
            ])],
        )],
        vec![],
    )]);
    let mut e = Engine::compile(&rs).unwrap();
    let arp = eth(0x0806, &[0u8; 28]);
    let mut bad = f22();
    bad[14 + 3] = 200; // total length past the frame: validation fails
    let out = run(&mut e, &[f22(), arp, bad, ipv6(6, 1, &tcp(1, 2, 0))]);
    assert_eq!(
        (out[0].verdict, out[0].decision.unwrap().rule),
        (A, Some(2))
    );
    assert_eq!(
        (out[1].verdict, out[1].decision),
        (A, None),
        "non-IP skips the inet chain"
    );
    assert_eq!(
        (out[2].verdict, out[2].decision),
        (D, None),
        "bad IPv4 dropped by the hook"
    );
    assert_eq!(
        (out[3].verdict, out[3].decision.unwrap().rule),
        (D, None),
        "IPv6 hits the policy"
    );
}

#[test]
fn no_base_chain_for_device() {
    let mut e = one(Policy::Drop, vec![]);
    let f = f22();
    let mut out = [Outcome {
        verdict: D,
        decision: None,
        mark: 9,
        fwd: None,
        dup: 0,
        reject: None,
    }];
    e.ingress("other", &[pkt(&f)], 0, &mut out, None);
    assert_eq!(
        out[0],
        Outcome {
            verdict: A,
            decision: None,
            mark: 0,
            fwd: None,
            dup: 0,
            reject: None,
        }
    );
    assert_eq!(e.ingress_devices(), vec!["eth0"]);
}

fn compile_err(rs: &Ruleset) -> String {
    match Engine::compile(rs) {
        Ok(_) => panic!("compiled"),
        Err(e) => e.to_string(),
    }
}

fn chains_table(chains: Vec<Chain>) -> Ruleset {
    ruleset(vec![table(Family::Netdev, "t", chains, vec![])])
}

#[test]
fn load_time_checks() {
    let e = compile_err(&chains_table(vec![chain(
        "c",
        Some((0, Policy::Accept)),
        vec![rule(vec![jump("nope")])],
    )]));
    assert!(e.contains("unknown chain \"nope\""), "{e}");
    let e = compile_err(&chains_table(vec![
        chain("a", Some((0, Policy::Accept)), vec![]),
        chain("x", Some((1, Policy::Accept)), vec![rule(vec![jump("a")])]),
    ]));
    assert!(e.contains("base chain"), "{e}");
    // A loop reachable from a base chain is refused ...
    let lp = |base: bool| {
        let mut v = vec![
            chain("b", None, vec![rule(vec![jump("c2")])]),
            chain("c2", None, vec![rule(vec![goto("b")])]),
        ];
        if base {
            v.push(chain(
                "a",
                Some((0, Policy::Accept)),
                vec![rule(vec![jump("b")])],
            ));
        }
        chains_table(v)
    };
    assert!(compile_err(&lp(true)).contains("loop"));
    // ... an unreferenced one is not (the kernel accepts it).
    assert!(Engine::compile(&lp(false)).is_ok());
    // Depth: base + 15 levels loads, 16 does not (jumps and gotos both count).
    let depth = |n: usize, goto_: bool| {
        let mut v = vec![chain(
            "c0",
            Some((0, Policy::Accept)),
            vec![rule(vec![jump("c1")])],
        )];
        for i in 1..=n {
            let r = if i < n {
                vec![rule(vec![if goto_ {
                    goto(&format!("c{}", i + 1))
                } else {
                    jump(&format!("c{}", i + 1))
                }])]
            } else {
                vec![rule(vec![accept()])]
            };
            v.push(chain(&format!("c{i}"), None, r));
        }
        chains_table(v)
    };
    assert!(Engine::compile(&depth(15, false)).is_ok());
    assert!(compile_err(&depth(16, false)).contains("Too many links"));
    assert!(compile_err(&depth(16, true)).contains("Too many links"));
}

#[test]
fn deepest_jump_stack_works() {
    // 15 nested jumps, the last chain sets a mark and returns all the way to c0's accept.
    let mut v = vec![chain(
        "c0",
        Some((0, Policy::Drop)),
        vec![rule(vec![jump("c1")]), rule(vec![mark_is(15), accept()])],
    )];
    for i in 1..=15 {
        let r = if i < 15 {
            vec![rule(vec![jump(&format!("c{}", i + 1))])]
        } else {
            vec![rule(vec![set_mark(15)])]
        };
        v.push(chain(&format!("c{i}"), None, r));
    }
    let mut e = Engine::compile(&chains_table(v)).unwrap();
    let out = run(&mut e, &[f22()]);
    assert_eq!(
        (out[0].verdict, out[0].decision.unwrap().rule, out[0].mark),
        (A, Some(3), 15)
    );
}

/// Frames whose EtherType is 0x8100 or 0x88a8 but that end before the tag's TCI, its inner
/// EtherType and 2 more bytes (20 bytes in all) are freed by `skb_vlan_untag` before the ingress
/// hook: drop with no decision, whatever the rules say, no counter touched, no trace event.
/// From 20 bytes on, the chain sees the frame.
#[test]
fn short_vlan_tags_are_dropped_before_the_hook() {
    let mut e = one(Policy::Accept, vec![vec![counter(), accept()]]);
    let mut c = count(&mut e);
    let full = tag(&eth(0x0800, &[0; 6]), 0x8100, 42);
    assert_eq!(full.len(), 24);
    let mut frames: Vec<Vec<u8>> = Vec::new();
    for tpid in [0x8100u16, 0x88a8] {
        let mut f = full.clone();
        f[12..14].copy_from_slice(&tpid.to_be_bytes());
        for len in [15, 16, 18, 19, 20] {
            frames.push(f[..len].to_vec());
        }
    }
    let mut rec = Rec::default();
    let pk: Vec<Packet<'_>> = frames.iter().map(|f| pkt(f)).collect();
    let mut out = vec![
        Outcome {
            verdict: A,
            decision: None,
            mark: 0,
            fwd: None,
            dup: 0,
            reject: None,
        };
        pk.len()
    ];
    e.ingress("eth0", &pk, 0, &mut out, Some(&mut rec));
    let got: Vec<(FinalVerdict, bool)> = out
        .iter()
        .map(|o| (o.verdict, o.decision.is_some()))
        .collect();
    let dropped = (D, false);
    let seen = (A, true);
    assert_eq!(
        got,
        [
            dropped, dropped, dropped, dropped, seen, dropped, dropped, dropped, dropped, seen
        ]
    );
    // Only the two 20-byte frames reached the rule.
    assert_eq!(e.counters(&mut c)[0].packets, 2);
    let traced: Vec<usize> = rec
        .0
        .iter()
        .filter_map(|ev| match ev {
            TraceEvent::Rule { packet, .. } => Some(*packet),
            _ => None,
        })
        .collect();
    assert_eq!(traced, [4, 9]);
    // The per-packet walk agrees, and so does a device without chains.
    for (i, p) in pk.iter().enumerate() {
        assert_eq!(e.one("eth0", p, i, 0, None).0, out[i], "frame {i}");
    }
    let mut none = vec![out[0]; 2];
    e.ingress("eth1", &pk[..2], 0, &mut none, None);
    assert_eq!(none[0].verdict, D);
    assert_eq!(none[0].decision, None);
}

/// A sink of marked packets (`nft monitor trace`) gets the walk of the packets `meta nftrace
/// set 1` marked, from the marking rule on, and nothing of the others; `log` lines of every
/// packet still come.
#[test]
fn trace_of_marked_packets_only() {
    #[derive(Default)]
    struct Marked(Vec<TraceEvent>);
    impl TraceSink for Marked {
        fn event(&mut self, ev: TraceEvent) {
            self.0.push(ev);
        }
        fn marked_only(&self) -> bool {
            true
        }
    }
    let rs = wasp_ruleset::parse_str(
        "table netdev t {\n\tchain c {\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n\t\ttcp dport 80 log prefix \"web \"\n\t\ttcp dport 22 meta nftrace set 1\n\t\ttcp dport 80 counter\n\t\tip protocol tcp accept\n\t}\n}\n",
        "t.nft",
    )
    .unwrap();
    let mut e = Engine::compile(&rs).unwrap();
    let (a, b) = (f22(), f80());
    let blank = Outcome {
        verdict: A,
        decision: None,
        mark: 0,
        fwd: None,
        dup: 0,
        reject: None,
    };
    for order in [[&a, &b], [&b, &a]] {
        let mut out = [blank, blank];
        let mut rec = Marked::default();
        e.ingress(
            "eth0",
            &[pkt(order[0]), pkt(order[1])],
            0,
            &mut out,
            Some(&mut rec),
        );
        let marked = if order[0] == &a { 0 } else { 1 };
        let walk: Vec<(usize, String)> = rec
            .0
            .iter()
            .filter_map(|ev| match ev {
                TraceEvent::Rule {
                    packet, verdict, ..
                } => Some((*packet, verdict.clone())),
                TraceEvent::ChainEnd { packet, .. } => Some((*packet, "end".into())),
                _ => None,
            })
            .collect();
        assert_eq!(
            walk,
            vec![
                (marked, "continue".to_string()),
                (marked, "accept".to_string())
            ],
            "{:?}",
            rec.0
        );
        let logs: Vec<usize> = rec
            .0
            .iter()
            .filter_map(|ev| match ev {
                TraceEvent::Log { packet, .. } => Some(*packet),
                _ => None,
            })
            .collect();
        assert_eq!(logs, vec![1 - marked], "the port-80 packet's log line");
    }
    // The mark stays with the packet (skb->nf_trace): the result names the marked packet,
    // and a packet that enters marked is traced from the hook's first rule on, in a vector
    // and alone.
    let mut out = [blank, blank];
    let res = e.ingress("eth0", &[pkt(&a), pkt(&b)], 0, &mut out, None);
    assert_eq!(res.marked, [0b01], "packet 0 (port 22) leaves marked");
    for n in [1, 2] {
        let mut rec = Marked::default();
        let mut p80 = pkt(&b);
        p80.nftrace = true;
        let packets = [p80, pkt(&a)];
        let res = e.ingress("eth0", &packets[..n], 0, &mut out[..n], Some(&mut rec));
        let rules: Vec<(u64, String)> = rec
            .0
            .iter()
            .filter_map(|ev| match ev {
                TraceEvent::Rule {
                    packet,
                    handle,
                    verdict,
                    ..
                } if *packet == 0 => Some((*handle, verdict.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(
            rules,
            [
                (2, "continue".to_string()),
                (4, "continue".to_string()),
                (5, "accept".to_string())
            ],
            "vector of {n}: {:?}",
            rec.0
        );
        assert!(res.nftrace(0), "still marked (vector of {n})");
    }
}

/// Base chains without rules decide by their policy alone, before, between and after chains
/// with rules: a vector of four gives each packet what the per-packet walk gives it alone,
/// and the chains' statistics count every packet that entered each, the same both ways.
#[test]
fn chains_without_rules_decide_by_policy_among_chains_with_rules() {
    let text = "table netdev t {\n\
        chain first { type filter hook ingress device \"eth0\" priority -10; policy accept; }\n\
        chain rules { type filter hook ingress device \"eth0\" priority 0; policy accept;\n\
            tcp dport 80 meta mark set 7 accept\n\
            tcp dport 25 drop\n\
        }\n\
        chain last { type filter hook ingress device \"eth0\" priority 10; policy drop; }\n\
        }\n\
        table netdev u {\n\
        chain open { type filter hook ingress device \"eth0\" priority 20; policy accept; }\n\
        }\n";
    let rs = wasp_ruleset::parse_str(text, "empty-chains.nft").expect("parses");
    let mut vector = Engine::compile(&rs).expect("compiles");
    let mut walk = Engine::compile(&rs).expect("compiles");
    let frames = vec![
        f22(),
        f80(),
        ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 0, &tcp(1000, 25, SYN)),
        f22(),
    ];
    let got = run(&mut vector, &frames);
    let want: Vec<Outcome> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| walk.one("eth0", &pkt(f), i, 0, None).0)
        .collect();
    assert_eq!(got, want);
    // Dropped by `last`'s policy (rule `None`), by `rules`' rule 2 (port 25), and the mark
    // of port 80 stays with the packet to the end.
    assert_eq!(
        got.iter().map(|o| o.verdict).collect::<Vec<_>>(),
        [D, D, D, D]
    );
    assert_eq!(got[0].decision.map(|d| (d.chain, d.rule)), Some((2, None)));
    assert_eq!(got[2].decision.map(|d| d.chain), Some(1));
    assert_eq!(got[1].mark, 7);
    let stats = |e: &Engine| {
        e.chain_stats(Hook::Ingress, "eth0")
            .iter()
            .map(|s| (s.packets, s.accepted, s.dropped))
            .collect::<Vec<_>>()
    };
    // first: 4 in, 4 accepted; rules: 4 in, one dropped; last: 3 in, 3 dropped; `u`'s
    // chain sees none (every packet was dropped before it).
    assert_eq!(stats(&vector), [(4, 4, 0), (4, 3, 1), (3, 0, 3), (0, 0, 0)]);
    assert_eq!(stats(&vector), stats(&walk));
}

/// A hook whose chains hold only policies runs no walk: each packet keeps the mark it came
/// with, and one marked by `meta nftrace set 1` at an earlier hook stays marked (the
/// kernel's `skb->nf_trace`), in a vector as alone.
#[test]
fn a_hook_of_policies_alone_keeps_each_packets_mark_and_trace_flag() {
    let text = "table netdev t {\n\
        chain a { type filter hook ingress device \"eth0\" priority 0; policy accept; }\n\
        chain b { type filter hook ingress device \"eth0\" priority 5; policy accept; }\n\
        }\n";
    let rs = wasp_ruleset::parse_str(text, "policies.nft").expect("parses");
    let mut e = Engine::compile(&rs).expect("compiles");
    let frames = [f22(), f80(), f22()];
    let mut pk: Vec<Packet<'_>> = frames.iter().map(|f| pkt(f)).collect();
    pk[1].mark = 42;
    pk[2].nftrace = true;
    let mut out = vec![Outcome::unseen(0); pk.len()];
    let res = e.ingress("eth0", &pk, 0, &mut out, None);
    assert_eq!(out.iter().map(|o| o.mark).collect::<Vec<_>>(), [0, 42, 0]);
    assert!(
        out.iter()
            .all(|o| o.verdict == A && o.fwd.is_none() && o.dup == 0)
    );
    assert_eq!(out[0].decision.map(|d| (d.chain, d.rule)), Some((1, None)));
    assert_eq!(
        (0..3).map(|i| res.nftrace(i)).collect::<Vec<_>>(),
        [false, false, true]
    );
    // The per-packet walk gives the same.
    for (i, p) in pk.iter().enumerate() {
        let (o, r) = e.one("eth0", p, 0, 0, None);
        assert_eq!(o, out[i], "packet {i}");
        assert_eq!(r.nftrace(0), i == 2, "packet {i}");
    }
    let s = e.chain_stats(Hook::Ingress, "eth0");
    assert_eq!(
        s.iter()
            .map(|s| (s.packets, s.accepted))
            .collect::<Vec<_>>(),
        [(6, 6), (6, 6)]
    );
}
