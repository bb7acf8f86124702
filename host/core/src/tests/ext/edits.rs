//! Plugin statements' edits compose as the kernel's packet-rewriting statements do: a
//! statement's edits change the packet for the rest of its walk, so later matches, set
//! lookups and plugin calls read the new bytes, and each edit is made on the frame the edits
//! before it left. The engine's edit list, applied in order to the frame as received, gives
//! the frame the walk ended with.

use super::*;

/// What a scripted site does with one packet, given the packet as the engine hands it over.
#[derive(Clone, Copy)]
enum Site {
    /// A statement: its verdict and edits.
    Stmt(fn(&ExtPacket<'_>) -> (ExtVerdict, Vec<ExtEdit>)),
    /// A match.
    Match(fn(&ExtPacket<'_>) -> bool),
}

/// Per packet handed to a site: (site, the frame, its header without the frame).
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(u32, Vec<u8>, ExtPacket<'static>)>>>;

/// Plugins written per site in plain Rust, recording what every call handed over.
#[derive(Clone)]
struct Script {
    sites: Vec<Site>,
    /// What the sites were handed.
    seen: Seen,
}

impl Script {
    fn new(sites: Vec<Site>) -> Self {
        Script {
            sites,
            seen: Default::default(),
        }
    }

    fn kinds(&self) -> Vec<ExtKind> {
        self.sites
            .iter()
            .map(|s| match s {
                Site::Stmt(_) => ExtKind::Statement,
                Site::Match(_) => ExtKind::Match,
            })
            .collect()
    }

    /// The frames site `site` was handed, in call order.
    fn frames_seen(&self, site: u32) -> Vec<Vec<u8>> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter(|s| s.0 == site)
            .map(|s| s.1.clone())
            .collect()
    }

    /// The headers site `site` was handed, in call order.
    fn headers_seen(&self, site: u32) -> Vec<ExtPacket<'static>> {
        let seen = self.seen.lock().unwrap();
        seen.iter().filter(|s| s.0 == site).map(|s| s.2).collect()
    }

    fn record(&self, site: u32, p: &ExtPacket<'_>) {
        let mut seen = self.seen.lock().unwrap();
        seen.push((site, p.frame.to_vec(), no_frame(p)));
    }
}

impl Extensions for Script {
    fn matches(&mut self, site: u32, pkts: &[ExtPacket<'_>], out: &mut [bool]) {
        let Site::Match(f) = self.sites[site as usize] else {
            panic!("site {site} is not a match");
        };
        for (p, o) in pkts.iter().zip(out.iter_mut()) {
            self.record(site, p);
            *o = f(p);
        }
    }

    fn apply(
        &mut self,
        site: u32,
        pkts: &[ExtPacket<'_>],
        verdicts: &mut [ExtVerdict],
        edits: &mut Vec<(usize, ExtEdit)>,
    ) {
        let Site::Stmt(f) = self.sites[site as usize] else {
            panic!("site {site} is not a statement");
        };
        for (k, (p, v)) in pkts.iter().zip(verdicts.iter_mut()).enumerate() {
            self.record(site, p);
            let (verdict, mine) = f(p);
            *v = verdict;
            edits.extend(mine.into_iter().map(|e| (k, e)));
        }
    }

    fn advance(&mut self, _now_ns: u64) {}
}

/// What a run gave: outcomes, the edits as `HookResult::edits` reports them, the trace per
/// packet, the `dup` copies taken before later edits.
struct Ran {
    out: Vec<Outcome>,
    edits: Vec<(usize, ExtEdit)>,
    trace: Vec<Vec<TraceEvent>>,
    dups: DupCopies,
}

/// Run `frames` on ingress of eth0 through the engine of `rules` (table `netdev t`, plugin
/// `s` declared, base chain with `policy`) with `script` installed: through the vector
/// pipeline (vectors of 64), and packet by packet through the reference walk with and without
/// the memo; the three must agree on outcomes, edits, traces and `dup` copies. Returns the pipeline's run
/// and the script the pipeline called.
fn run_three(
    policy: Policy,
    rules: Vec<Vec<Stmt>>,
    script: &Script,
    frames: &[Vec<u8>],
) -> (Ran, Script) {
    run_three_on(&|| engine(&["s"], policy, rules.clone()), script, frames)
}

/// [`run_three`] on the engines `build` makes.
fn run_three_on(build: &dyn Fn() -> Engine, script: &Script, frames: &[Vec<u8>]) -> (Ran, Script) {
    let mk = || {
        let mut e = build();
        let s = Script::new(script.sites.clone());
        e.set_ext(Box::new(s.clone()), &s.kinds());
        (e, s)
    };
    let pk: Vec<Packet<'_>> = frames.iter().map(|f| pkt(f)).collect();
    let (mut ev, sv) = mk();
    let mut out = outcomes(pk.len());
    let res = ev.ingress("eth0", &pk, 0, &mut out, None);
    let edits = res.edits.clone();
    let dups = DupCopies::new(frames.iter().map(Vec::as_slice), &edits, &res.dups);
    let per = |p: usize, evs: &[TraceEvent]| -> Vec<TraceEvent> {
        evs.iter()
            .filter(|e| match e {
                TraceEvent::Rule { packet, .. }
                | TraceEvent::ChainEnd { packet, .. }
                | TraceEvent::Log { packet, .. }
                | TraceEvent::Plugin { packet, .. } => *packet == p,
            })
            .cloned()
            .collect()
    };
    // Trace indices count within a vector: traced vector by vector, on an engine of its own.
    let (mut et, _) = mk();
    let mut trace: Vec<Vec<TraceEvent>> = Vec::new();
    for (ci, chunk) in pk.chunks(MAX_VECTOR).enumerate() {
        let mut rec = Rec::default();
        let mut o = outcomes(chunk.len());
        et.ingress("eth0", chunk, 0, &mut o, Some(&mut rec));
        assert_eq!(o, out[ci * MAX_VECTOR..ci * MAX_VECTOR + chunk.len()]);
        trace.extend((0..chunk.len()).map(|i| per(i, &rec.0)));
    }
    for memo in [true, false] {
        let (mut e1, _) = mk();
        let mut edits1 = Vec::new();
        for (i, p) in pk.iter().enumerate() {
            let mut r1 = Rec::default();
            let mut res1 = HookResult::new();
            let o = e1.walk_hook("eth0", p, i % MAX_VECTOR, 0, &mut res1, Some(&mut r1), memo);
            assert_eq!(o, out[i], "packet {i}, memo {memo}");
            assert_eq!(r1.0, trace[i], "trace of packet {i}, memo {memo}");
            edits1.extend(res1.edits.iter().map(|(_, e)| (i, e.clone())));
            // The walk numbers the packet `i % MAX_VECTOR`.
            let at = i % MAX_VECTOR;
            let frame_at = std::iter::repeat_n(frames[i].as_slice(), at + 1);
            let d1 = DupCopies::new(frame_at, &res1.edits, &res1.dups);
            let strip = |c: &[DupCopy]| -> Vec<(OutId, Vec<u8>)> {
                c.iter().map(|c| (c.target, c.frame.clone())).collect()
            };
            assert_eq!(strip(d1.of(at)), strip(dups.of(i)), "dups of packet {i}");
        }
        let mut by_packet = edits.clone();
        by_packet.sort_by_key(|e| e.0);
        assert_eq!(edits1, by_packet, "memo {memo}");
    }
    (
        Ran {
            out,
            edits,
            trace,
            dups,
        },
        sv,
    )
}

/// `udp dport set 99` as a plugin: overwrite the UDP destination port of the packets it gets
/// with 99 (at the transport header the header names).
fn set_dport_99(p: &ExtPacket<'_>) -> (ExtVerdict, Vec<ExtEdit>) {
    let edits = if p.l4proto == 17 && p.l4 != 0xffff {
        vec![ExtEdit::Set {
            offset: u32::from(p.l4) + 2,
            data: vec![0, 99],
        }]
    } else {
        Vec::new()
    };
    (ExtVerdict::Continue, edits)
}

fn decided(o: &Outcome) -> (FinalVerdict, Option<u64>, u32) {
    (o.verdict, o.decision.and_then(|d| d.rule), o.mark)
}

/// A statement that rewrites the destination port, then matches on the port in the same rule
/// and in later rules: the matches after the statement see the new port, not the old one.
///
/// The kernel is the reference: on Linux (netdev ingress, nftables 1.0.6) the chain
/// `udp dport 53 udp dport set 99 udp dport 99 counter; udp dport 53 counter drop; udp dport
/// 99 counter accept` counted 3 packets on the first and the third rule and none on the
/// second for 3 frames to port 53: nft_payload_set_eval writes the skb and every later
/// expression reads it.
#[test]
fn a_later_match_sees_the_bytes_a_statement_set() {
    let rules = vec![
        // handle 2: `udp dport 53 s x udp dport 99 meta mark set 7`
        vec![
            eq(pf(PayloadField::named("udp", "dport").unwrap()), port(53)),
            plugin_use("s", "x", false),
            eq(pf(PayloadField::named("udp", "dport").unwrap()), port(99)),
            set_mark(7),
        ],
        // handle 3: the old port no longer matches.
        vec![
            eq(pf(PayloadField::named("udp", "dport").unwrap()), port(53)),
            drop_(),
        ],
        // handle 4: the new one does.
        vec![
            eq(pf(PayloadField::named("udp", "dport").unwrap()), port(99)),
            accept(),
        ],
    ];
    let script = Script::new(vec![Site::Stmt(set_dport_99)]);
    let frames = vec![
        ipv4(17, [10, 0, 0, 1], [1; 4], 0, &udp(1000, 53)),
        ipv4(17, [10, 0, 0, 1], [1; 4], 0, &udp(1001, 54)),
        ipv6(17, 1, &udp(1002, 53)),
        ipv4(17, [10, 0, 0, 1], [1; 4], 0, &udp(1003, 99)),
        tag(
            &ipv4(17, [10, 0, 0, 1], [1; 4], 0, &udp(1004, 53)),
            0x8100,
            5,
        ),
    ];
    let (ran, _) = run_three(Policy::Drop, rules, &script, &frames);
    let got: Vec<_> = ran.out.iter().map(decided).collect();
    assert_eq!(
        got,
        [
            (FinalVerdict::Accept, Some(4), 7),
            (FinalVerdict::Drop, None, 0),
            (FinalVerdict::Accept, Some(4), 7),
            (FinalVerdict::Accept, Some(4), 0),
            (FinalVerdict::Accept, Some(4), 7),
        ]
    );
    // The frame to send: the port rewritten (offsets 36, 56 and 40: IPv4, IPv6, tagged IPv4).
    let edited = edited_frames(frames.iter().map(Vec::as_slice), &ran.edits);
    let mut want: Vec<Option<Vec<u8>>> = vec![None; frames.len()];
    for (i, at) in [(0, 36), (2, 56), (4, 40)] {
        let mut f = frames[i].clone();
        f[at..at + 2].copy_from_slice(&[0, 99]);
        want[i] = Some(f);
    }
    assert_eq!(edited, want);
    // The trace of an edited packet: the plugin continued, rule 2 ran to its end (its match
    // after the statement passed), rule 3 did not match, rule 4 accepted.
    let rule_ev = |handle, verdict: &str| TraceEvent::Rule {
        packet: 0,
        table: 0,
        chain: 0,
        handle,
        verdict: verdict.into(),
    };
    assert_eq!(
        ran.trace[0],
        [
            TraceEvent::Plugin {
                packet: 0,
                site: 0,
                result: "continue".into()
            },
            rule_ev(2, "continue"),
            rule_ev(4, "accept"),
        ]
    );
}

/// Push an 802.1Q tag with VLAN id 10 after the MAC addresses.
fn push_8021q(_: &ExtPacket<'_>) -> (ExtVerdict, Vec<ExtEdit>) {
    let data = vec![0x81, 0x00, 0x00, 10];
    (
        ExtVerdict::Continue,
        vec![ExtEdit::Insert { offset: 12, data }],
    )
}

/// Push an 802.1ad tag with VLAN id 20 after the MAC addresses.
fn push_8021ad(_: &ExtPacket<'_>) -> (ExtVerdict, Vec<ExtEdit>) {
    let data = vec![0x88, 0xa8, 0x00, 20];
    (
        ExtVerdict::Continue,
        vec![ExtEdit::Insert { offset: 12, data }],
    )
}

/// Two statements that each insert bytes into one packet (an inner 802.1Q tag, then an outer
/// 802.1ad tag, both at offset 12 of the frame each sees): the second sees the first's frame,
/// re-parsed, and the result is what the two inserts make applied one after the other. The
/// same with both statements and the match in one rule.
#[test]
fn two_inserts_compose() {
    let ether_8021ad = || {
        eq(
            pf(PayloadField::named("ether", "type").unwrap()),
            val(DataType::EtherType, &[0x88, 0xa8]),
        )
    };
    // Rules 2, 3 push the tags; handle 4: `ether type 8021ad accept` sees the outer one.
    let apart = vec![
        vec![plugin_use("s", "inner", false)],
        vec![plugin_use("s", "outer", false)],
        vec![ether_8021ad(), accept()],
    ];
    // Handle 2: `s inner s outer ether type 8021ad accept`.
    let together = vec![vec![
        plugin_use("s", "inner", false),
        plugin_use("s", "outer", false),
        ether_8021ad(),
        accept(),
    ]];
    for (rules, handle) in [(apart, 4), (together, 2)] {
        two_inserts(rules, handle);
    }
}

fn two_inserts(rules: Vec<Vec<Stmt>>, handle: u64) {
    let script = Script::new(vec![Site::Stmt(push_8021q), Site::Stmt(push_8021ad)]);
    let frames = vec![ipv4(17, [10, 0, 0, 1], [1; 4], 0, &udp(1000, 53))];
    let (ran, sv) = run_three(Policy::Drop, rules, &script, &frames);
    assert_eq!(
        decided(&ran.out[0]),
        (FinalVerdict::Accept, Some(handle), 0)
    );
    let once = tag(&frames[0], 0x8100, 10);
    let twice = tag(&once, 0x88a8, 20);
    // The outer tag's site got the frame with the inner tag, described as the kernel sees a
    // tagged frame: the network header after the tag (18), UDP at 38, 4 bytes longer.
    assert_eq!(sv.frames_seen(1), std::slice::from_ref(&once));
    let h = sv.headers_seen(1)[0];
    assert_eq!(
        (h.l3, h.l4, h.l4proto, h.len),
        (18, 38, 17, frames[0].len() as u32 + 4)
    );
    assert_eq!(
        ran.edits,
        [
            (
                0,
                ExtEdit::Insert {
                    offset: 12,
                    data: vec![0x81, 0, 0, 10]
                }
            ),
            (
                0,
                ExtEdit::Insert {
                    offset: 12,
                    data: vec![0x88, 0xa8, 0, 20]
                }
            ),
        ]
    );
    assert_eq!(
        edited_frames(frames.iter().map(Vec::as_slice), &ran.edits),
        [Some(twice)]
    );
}

/// Decapsulate: remove the first VLAN tag (4 bytes at 12).
fn pop_tag(_: &ExtPacket<'_>) -> (ExtVerdict, Vec<ExtEdit>) {
    (
        ExtVerdict::Continue,
        vec![ExtEdit::Remove {
            offset: 12,
            count: 4,
        }],
    )
}

/// Set the IPv4 TTL to 5, at the network header of the frame the site is handed.
fn ttl_5(p: &ExtPacket<'_>) -> (ExtVerdict, Vec<ExtEdit>) {
    let edits = if p.nfproto == 2 {
        vec![ExtEdit::Set {
            offset: u32::from(p.l3) + 8,
            data: vec![5],
        }]
    } else {
        Vec::new()
    };
    (ExtVerdict::Continue, edits)
}

/// A statement that removes bytes (a VLAN tag), then one that sets a byte at an offset it
/// computes on the shortened frame (the TTL at 14 + 8 = 22, where the tagged frame has the
/// TTL at 26): the set lands on the TTL, and a later `ip ttl 5` matches.
#[test]
fn a_set_after_a_remove_uses_the_shortened_frame() {
    let rules = vec![
        vec![plugin_use("s", "pop", false)],
        vec![plugin_use("s", "ttl", false)],
        // handle 4: `ip ttl 5 accept`.
        vec![
            eq(
                pf(PayloadField::named("ip", "ttl").unwrap()),
                byte(DataType::Integer(8), 5),
            ),
            accept(),
        ],
    ];
    let script = Script::new(vec![Site::Stmt(pop_tag), Site::Stmt(ttl_5)]);
    let plain = ipv4(17, [10, 0, 0, 1], [1; 4], 0, &udp(1000, 53));
    let frames = vec![tag(&plain, 0x8100, 10)];
    let (ran, sv) = run_three(Policy::Drop, rules, &script, &frames);
    assert_eq!(decided(&ran.out[0]), (FinalVerdict::Accept, Some(4), 0));
    assert_eq!(sv.frames_seen(1), std::slice::from_ref(&plain));
    assert_eq!(sv.headers_seen(1)[0].l3, 14);
    let mut want = plain;
    want[22] = 5;
    assert_eq!(
        edited_frames(frames.iter().map(Vec::as_slice), &ran.edits),
        [Some(want)]
    );
    // The same two edits made each on the frame as received (the set at 26) would have
    // written the UDP checksum's first byte of the shortened frame instead.
    assert_eq!(
        ran.edits[1],
        (
            0,
            ExtEdit::Set {
                offset: 22,
                data: vec![5]
            }
        )
    );
}

/// Rewrite the port of the packets from source port 1003 and 1066 only.
fn set_dport_99_of_two(p: &ExtPacket<'_>) -> (ExtVerdict, Vec<ExtEdit>) {
    let sport = p
        .frame
        .get(usize::from(p.l4)..usize::from(p.l4) + 2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]));
    if matches!(sport, Some(1003 | 1066)) {
        set_dport_99(p)
    } else {
        (ExtVerdict::Continue, Vec::new())
    }
}

/// Match every packet (to see what a later plugin call is handed).
fn see_all(_: &ExtPacket<'_>) -> bool {
    true
}

/// Edits of two packets of an input of 70 (one in each vector) change those packets only:
/// the others keep their bytes (the later site is handed their frames as received), their
/// verdicts and their trace.
#[test]
fn edits_of_one_packet_leave_the_others_alone() {
    let rules = vec![
        vec![plugin_use("s", "x", false), plugin_use("s", "see", false)],
        // handle 3
        vec![
            eq(pf(PayloadField::named("udp", "dport").unwrap()), port(99)),
            accept(),
        ],
        // handle 4
        vec![
            eq(pf(PayloadField::named("udp", "dport").unwrap()), port(53)),
            drop_(),
        ],
    ];
    let frames: Vec<Vec<u8>> = (0..70u16)
        .map(|i| ipv4(17, [10, 0, 0, 1], [1; 4], 0, &udp(1000 + i, 53)))
        .collect();
    let script = Script::new(vec![Site::Stmt(set_dport_99_of_two), Site::Match(see_all)]);
    let (ran, sv) = run_three(Policy::Accept, rules.clone(), &script, &frames);
    // Without edits: every packet is dropped by rule 4.
    let quiet = Script::new(vec![
        Site::Stmt(|_| (ExtVerdict::Continue, Vec::new())),
        Site::Match(see_all),
    ]);
    let (base, _) = run_three(Policy::Accept, rules, &quiet, &frames);
    assert!(base.edits.is_empty());
    let edited = edited_frames(frames.iter().map(Vec::as_slice), &ran.edits);
    let seen = sv.frames_seen(1);
    assert_eq!(seen.len(), 70);
    for i in 0..70 {
        if i == 3 || i == 66 {
            assert_eq!(decided(&ran.out[i]), (FinalVerdict::Accept, Some(3), 0));
            let mut f = frames[i].clone();
            f[36..38].copy_from_slice(&[0, 99]);
            assert_eq!(seen[i], f, "packet {i}");
            assert_eq!(edited[i].as_ref(), Some(&f), "packet {i}");
        } else {
            assert_eq!(decided(&ran.out[i]), (FinalVerdict::Drop, Some(4), 0));
            assert_eq!(ran.out[i], base.out[i], "packet {i}");
            assert_eq!(ran.trace[i], base.trace[i], "packet {i}");
            assert_eq!(seen[i], frames[i], "packet {i}");
            assert_eq!(edited[i], None, "packet {i}");
        }
    }
    // Edits are reported by the packet's index in the input (66 is packet 2 of vector 2).
    assert_eq!(ran.edits.iter().map(|e| e.0).collect::<Vec<_>>(), [3, 66]);
}

/// A later base chain sees the packet as an earlier chain's statement left it, gate included:
/// a QinQ frame (which the inet family's ingress hook skips: its `meta protocol` is 802.1Q)
/// loses its outer tag in the netdev chain, so the inet chain after it runs on the IPv4 packet
/// inside and drops it by its port. Without the edit the inet chain never sees it.
#[test]
fn a_later_base_chain_sees_the_edited_packet() {
    let build = || {
        let mut t = table(
            Family::Netdev,
            "t",
            vec![chain(
                "c",
                Some((0, Policy::Accept)),
                vec![rule(vec![plugin_use("s", "pop", false)])],
            )],
            vec![],
        );
        t.plugins = plugins(&["s"]);
        let u = table(
            Family::Inet,
            "u",
            vec![chain(
                "d",
                Some((10, Policy::Accept)),
                vec![rule(vec![
                    eq(pf(PayloadField::named("udp", "dport").unwrap()), port(53)),
                    drop_(),
                ])],
            )],
            vec![],
        );
        Engine::compile(&ruleset(vec![t, u])).expect("compiles")
    };
    let inner = tag(
        &ipv4(17, [10, 0, 0, 1], [1; 4], 0, &udp(1000, 53)),
        0x8100,
        10,
    );
    let frames = vec![tag(&inner, 0x8100, 20)];
    let (ran, _) = run_three_on(&build, &Script::new(vec![Site::Stmt(pop_tag)]), &frames);
    let o = ran.out[0];
    assert_eq!(
        (o.verdict, o.decision),
        (
            FinalVerdict::Drop,
            Some(Decision {
                table: 1,
                chain: 0,
                rule: Some(2)
            })
        )
    );
    assert_eq!(
        edited_frames(frames.iter().map(Vec::as_slice), &ran.edits),
        [Some(inner)]
    );
    let quiet = Script::new(vec![Site::Stmt(|_| (ExtVerdict::Continue, Vec::new()))]);
    let (ran, _) = run_three_on(&build, &quiet, &frames);
    let o = ran.out[0];
    assert_eq!(
        (o.verdict, o.decision),
        (
            FinalVerdict::Accept,
            Some(Decision {
                table: 0,
                chain: 0,
                rule: None
            })
        )
    );
}

fn dup(dev: &str) -> Stmt {
    Stmt::Dup {
        dev: dev.into(),
        via: None,
        map: None,
        span: Span::default(),
    }
}

/// `dup` copies the packet as it is when the statement runs (nft_dup_netdev_eval clones the
/// skb there): a plugin statement's edit after a `dup` is not in that copy, an edit before it
/// is. Rule `dup to "z" udp dport 53 s dport99 dup to "x" s ttl5 dup to "y"`: `z` gets the
/// frame as received, `x` the new port only, `y` the new port and TTL (the frame the walk
/// ended with, no copy), and the packet itself both. A packet that fails the match sends the
/// frame as received to `z` only, with no copy made.
#[test]
fn a_dup_sends_the_packet_as_it_was_at_the_dup() {
    let rules = vec![vec![
        dup("z"),
        eq(pf(PayloadField::named("udp", "dport").unwrap()), port(53)),
        plugin_use("s", "dport99", false),
        dup("x"),
        plugin_use("s", "ttl5", false),
        dup("y"),
    ]];
    let script = Script::new(vec![Site::Stmt(set_dport_99), Site::Stmt(ttl_5)]);
    let frames = vec![
        ipv4(17, [10, 0, 0, 1], [1; 4], 0, &udp(1000, 53)),
        ipv4(17, [10, 0, 0, 2], [1; 4], 0, &udp(1001, 54)),
        ipv4(17, [10, 0, 0, 3], [1; 4], 0, &udp(1002, 53)),
    ];
    let (ran, _) = run_three(Policy::Accept, rules.clone(), &script, &frames);
    let edited = edited_frames(frames.iter().map(Vec::as_slice), &ran.edits);
    let with = |f: &[u8], port99: bool, ttl5: bool| {
        let mut f = f.to_vec();
        if port99 {
            f[36..38].copy_from_slice(&[0, 99]);
        }
        if ttl5 {
            f[22] = 5;
        }
        f
    };
    // Packets 0 and 2: copies for `z` (nothing yet) and `x` (the port); `y` has every edit,
    // the frame the walk ended with: no copy.
    for i in [0, 2] {
        let got: Vec<(OutId, Vec<u8>)> = ran
            .dups
            .of(i)
            .iter()
            .map(|c| (c.target, c.frame.clone()))
            .collect();
        assert_eq!(
            got,
            [
                (OutId(0), frames[i].clone()),
                (OutId(1), with(&frames[i], true, false))
            ]
        );
    }
    assert!(ran.dups.of(1).is_empty());
    // The packet itself ends with both edits (the way out sends each target its copy, the
    // others the frame the walk ended with: `wasp_gateway`'s
    // `each_dup_target_gets_its_copy_and_the_rest_the_final_frame`).
    assert_eq!(
        edited[0].as_deref(),
        Some(with(&frames[0], true, true).as_slice())
    );
    assert_eq!(edited[1], None);
    assert_eq!(ran.out[0].dup, 0b111);
    assert_eq!(ran.out[1].dup, 0b001);
}

/// Without an edit after a `dup`, no copy is made (nothing allocated): a `dup` after the only
/// edit, and a `dup` with no plugin at all.
#[test]
fn no_dup_copy_without_a_later_edit() {
    let rules = vec![vec![plugin_use("s", "dport99", false), dup("x")]];
    let script = Script::new(vec![Site::Stmt(set_dport_99)]);
    let frames = vec![ipv4(17, [10, 0, 0, 1], [1; 4], 0, &udp(1000, 53))];
    let (ran, _) = run_three(Policy::Accept, rules, &script, &frames);
    assert_eq!(ran.edits.len(), 1);
    assert!(ran.dups.is_empty());
    let mut e = engine(&[], Policy::Accept, vec![vec![dup("x")]]);
    let mut out = outcomes(1);
    let res = e.ingress("eth0", &[pkt(&frames[0])], 0, &mut out, None);
    assert_eq!(out[0].dup, 1);
    assert!(res.dups.is_empty());
}

/// Leave the packet as it is (and let the script record it).
fn pass(_: &ExtPacket<'_>) -> (ExtVerdict, Vec<ExtEdit>) {
    (ExtVerdict::Continue, Vec::new())
}

/// Engine of the parsed rule `rule` in a netdev chain on eth0 that declares plugin `s`, with
/// `s` as site 0 and the rule's `counter` (site 1) recording what they get.
fn parsed(rule: &str, s: fn(&ExtPacket<'_>) -> (ExtVerdict, Vec<ExtEdit>)) -> (Engine, Script) {
    let text = format!(
        "table netdev t {{\n\tplugin s {{ path \"s.wasm\"; }}\n\tchain c {{\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n\t\t{rule}\n\t}}\n}}\n"
    );
    let rs = wasp_ruleset::parse_str(&text, "t.nft").expect("parses");
    let mut e = Engine::compile(&rs).expect("compiles");
    let script = Script::new(vec![Site::Stmt(s), Site::Stmt(pass)]);
    e.set_ext(Box::new(script.clone()), &script.kinds());
    (e, script)
}

/// A plugin statement is a fence that no match crosses: nft 1.0.6 keeps a lone payload match
/// in its merge run across its own statements (`udp sport 1 counter udp dport 2` loads both
/// ports in one compare in front of the counter, `nft --debug=netlink`), but a plugin is not
/// an nft statement: it sees and edits the packets of the rule as written. Rule `udp sport
/// 1000 s x counter udp dport D meta mark set 7`: `s` gets every packet from port 1000,
/// whatever its destination port, and the match after it reads the port `s` wrote.
#[test]
fn no_match_moves_in_front_of_a_plugin_statement() {
    let frames = [
        ipv4(17, [10, 0, 0, 1], [1; 4], 0, &udp(1000, 53)),
        ipv4(17, [10, 0, 0, 1], [1; 4], 0, &udp(1000, 54)),
        ipv4(17, [10, 0, 0, 1], [1; 4], 0, &udp(1001, 53)),
    ];
    let pk: Vec<Packet<'_>> = frames.iter().map(|f| pkt(f)).collect();
    let marks = |e: &mut Engine| {
        let mut out = outcomes(pk.len());
        e.ingress("eth0", &pk, 0, &mut out, None);
        let one: Vec<u32> = (0..pk.len())
            .map(|i| {
                e.walk_hook("eth0", &pk[i], i, 0, &mut HookResult::new(), None, false)
                    .mark
            })
            .collect();
        let marks: Vec<u32> = out.iter().map(|o| o.mark).collect();
        assert_eq!(marks, one);
        marks
    };
    // What a site was handed: by the pipeline, then by the walk.
    let twice = |f: &[Vec<u8>]| [f, f].concat();
    // `s` only looks: packets 0 and 1 reach it and the counter after it (packet 1 then fails
    // the port match).
    let (mut e, script) = parsed(
        "udp sport 1000 s x counter udp dport 53 meta mark set 7",
        pass,
    );
    assert_eq!(marks(&mut e), [7, 0, 0]);
    assert_eq!(script.frames_seen(0), twice(&frames[..2]));
    assert_eq!(script.frames_seen(1), twice(&frames[..2]));
    // `s` sets the port to 99: the match after it sees 99 on packets 0 and 1.
    let (mut e, script) = parsed(
        "udp sport 1000 s x counter udp dport 99 meta mark set 7",
        set_dport_99,
    );
    assert_eq!(marks(&mut e), [7, 7, 0]);
    assert_eq!(script.frames_seen(0), twice(&frames[..2]));
    // Native statements keep nft 1.0.6's merge: the counter counts packet 0 only.
    let (mut e, script) = parsed("udp sport 1000 counter udp dport 53 meta mark set 7", pass);
    assert_eq!(marks(&mut e), [7, 0, 0]);
    assert_eq!(script.frames_seen(0), twice(&frames[..1]));
}
