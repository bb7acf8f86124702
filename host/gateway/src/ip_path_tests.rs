//! The IP path over a vector gives each packet what it gets alone: the same runs of frames
//! through one rig as whole vectors ([`Forwarder::vector`]) and through a twin one packet at a
//! time ([`Forwarder::after_ingress`]) give the same fates, frames sent (bytes, device, kind,
//! order), `log` lines, chain counts and conntrack table, for rulesets where a later packet
//! depends on what an earlier one did: new connections and their NAT bindings, `flow add`,
//! `ct mark set` read by the next packet of the connection.

use wasp_core::{HookResult, Packet, Steal};
use wasp_ruleset::model::Hook;

use super::ip_path::FlowHit;
use super::netfilter_tests::{
    ACK, C, CLIENT, FIN, GW, PSH, ROUTER_IN, ROUTER_OUT, Rig, S, SERVER, SYN, W0, W1, rig_with, tcp,
};
use super::path::{Decided, Fate, SendKind};

/// What a packet gave: its fate, the frames it sent and its `log` lines.
type Seen = (Fate, Vec<(String, SendKind, Vec<u8>)>, Vec<String>);

impl Rig {
    /// `frames` in on `dev` at `now_ns` as one vector; with `steal`, the flowtables are
    /// looked up at their priority in the ingress hook call, as the data path does.
    fn vector(&mut self, dev: &str, frames: &[Vec<u8>], now_ns: u64, steal: bool) -> Vec<Seen> {
        let pkts: Vec<Packet<'_>> = frames
            .iter()
            .map(|f| Packet {
                frame: f,
                meta: wasp_wire::parse(f),
                iifname: dev,
                mark: 0,
                oifname: "",
                ct: wasp_core::CtMeta::NONE,
                ct_detail: None,
                nftrace: false,
                route: None,
            })
            .collect();
        let mut res = HookResult::new();
        let mut hits: Vec<Option<FlowHit>> = (0..frames.len()).map(|_| None).collect();
        let hook = self.fw.flow_hook(dev).filter(|_| steal);
        {
            let fw = &self.fw;
            let mut take = |i: usize, p: &Packet<'_>| {
                hits[i] = fw.flow_lookup(dev, p.frame, &p.meta, now_ns);
                hits[i].is_some()
            };
            let steal = hook.map(|priority| Steal {
                priority,
                take: &mut take,
            });
            self.engine
                .run_ingress(dev, &pkts, now_ns, &mut res, None, None, steal);
        }
        let decided: Vec<Decided<'_>> = pkts
            .iter()
            .zip(&res.outcomes)
            .map(|(p, o)| Decided {
                frame: p.frame,
                meta: Some(&p.meta),
                dups: &[],
                outcome: o,
                nftrace: false,
            })
            .collect();
        let mut seen = Vec::new();
        self.fw.vector(
            &mut self.engine,
            None,
            dev,
            &decided,
            now_ns,
            &mut self.way,
            hook.map(|_| &mut hits[..]),
            |i, fate, way: &mut crate::WayOut| {
                let sent = way
                    .sends
                    .drain(..)
                    .map(|s| (s.dev.to_string(), s.kind, s.frame(&frames[i]).into_owned()))
                    .collect();
                seen.push((fate, sent, std::mem::take(&mut way.logs)));
            },
        );
        seen
    }

    /// `frames` in on `dev` at `now_ns`, one at a time.
    fn one_by_one(&mut self, dev: &str, frames: &[Vec<u8>], now_ns: u64) -> Vec<Seen> {
        frames
            .iter()
            .map(|f| {
                let (fate, sent) = self.send_at(dev, f, now_ns);
                (fate, sent, std::mem::take(&mut self.way.logs))
            })
            .collect()
    }

    /// The conntrack table as text, and every IP hook's chain counts.
    fn state(&self, now_ns: u64) -> (Vec<String>, Vec<String>) {
        let mut ct: Vec<String> = self
            .nf
            .conntrack()
            .entries(now_ns)
            .iter()
            .map(|e| format!("{e:?}"))
            .collect();
        ct.sort();
        let chains = [
            Hook::Prerouting,
            Hook::Input,
            Hook::Forward,
            Hook::Postrouting,
        ]
        .into_iter()
        .flat_map(|h| self.engine.chain_stats(h, ""))
        .map(|s| format!("{s:?}"))
        .collect();
        (ct, chains)
    }
}

/// Client `port`'s segment to the port-forwarded service (10.1.0.1:8080).
fn c2s(port: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    tcp(CLIENT, W0, C, ROUTER_IN, port, 8080, flags, 64, payload)
}

/// The server's answer to client `port`, as masqueraded (to 10.2.0.1).
fn s2c(port: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    tcp(SERVER, W1, S, ROUTER_OUT, 80, port, flags, 64, payload)
}

/// Runs of frames (device, frames) of four port-forwarded connections, with the packets of
/// each connection adjacent and interleaved: handshakes (a retransmitted SYN among them),
/// data both ways, a FIN.
fn runs() -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let ports = [40000u16, 40001, 40002, 40003];
    let mut out = Vec::new();
    let syns: Vec<Vec<u8>> = ports
        .iter()
        .flat_map(|&p| {
            if p == 40001 {
                vec![c2s(p, SYN, b""), c2s(p, SYN, b"")]
            } else {
                vec![c2s(p, SYN, b"")]
            }
        })
        .collect();
    out.push(("w0", syns));
    out.push((
        "w1",
        ports.iter().map(|&p| s2c(p, SYN | ACK, b"")).collect(),
    ));
    let mut acks = Vec::new();
    for &p in &ports {
        acks.push(c2s(p, ACK, b""));
        acks.push(c2s(p, ACK | PSH, b"one"));
        acks.push(c2s(p, ACK | PSH, b"two"));
    }
    out.push(("w0", acks));
    let mut back = Vec::new();
    for i in 0..3 {
        for &p in &ports {
            back.push(s2c(p, ACK | PSH, &[b'a' + i; 8]));
        }
    }
    out.push(("w1", back));
    let mut more = vec![c2s(40000, FIN | ACK, b"")];
    for &p in &ports[1..] {
        more.push(c2s(p, ACK | PSH, b"three"));
        more.push(c2s(p, ACK | PSH, b"four"));
    }
    out.push(("w0", more));
    out
}

/// Both rigs of `rules` through [`runs`]: the same per packet, and the same state after each
/// run. Returns the vector rig's results, per run.
fn same_both_ways(rules: &str) -> Vec<Vec<Seen>> {
    same_both_ways_with(rules, false)
}

/// [`same_both_ways`], the vector rig's flowtables looked up in the ingress hook call with
/// `steal`.
fn same_both_ways_with(rules: &str, steal: bool) -> Vec<Vec<Seen>> {
    let mut vec_rig = rig_with(GW, rules);
    let mut one_rig = rig_with(GW, rules);
    let mut all = Vec::new();
    for (k, (dev, frames)) in runs().into_iter().enumerate() {
        let now = 1_000_000_000 + k as u64 * 1_000_000;
        let a = vec_rig.vector(dev, &frames, now, steal);
        let b = one_rig.one_by_one(dev, &frames, now);
        assert_eq!(a.len(), frames.len());
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_eq!(x, y, "run {k} ({dev}), packet {i}");
        }
        assert_eq!(vec_rig.state(now), one_rig.state(now), "after run {k}");
        all.push(a);
    }
    all
}

const FLOW_RULES: &str = r#"
table ip nat {
    chain pre {
        type nat hook prerouting priority dstnat; policy accept;
        iifname "w0" tcp dport 8080 dnat to 10.2.0.2:80
    }
    chain post {
        type nat hook postrouting priority srcnat; policy accept;
        oifname "w1" masquerade
    }
}
table ip filter {
    flowtable ft {
        hook ingress priority 0; devices = { w0, w1 };
    }
    chain forward {
        type filter hook forward priority filter; policy drop;
        tcp dport 80 tcp flags & (syn | ack) == ack ct state established flow add @ft
        ct state established,related accept
        ct state new iifname "w0" accept
    }
}
table netdev edge {
    chain w0_in {
        type filter hook ingress device "w0" priority -10; policy accept;
    }
    chain w1_in {
        type filter hook ingress device "w1" priority -10; policy accept;
    }
}
"#;

#[test]
fn nat_and_flow_add_over_vectors_give_what_one_packet_at_a_time_gives() {
    for steal in [false, true] {
        check_flow_runs(&same_both_ways_with(FLOW_RULES, steal));
    }
}

/// What [`FLOW_RULES`] gives over [`runs`].
fn check_flow_runs(all: &[Vec<Seen>]) {
    // Every packet of the handshakes went out (the retransmitted SYN too), and the data after
    // each connection's offload took the flowtable.
    let kinds: Vec<Vec<SendKind>> = all
        .iter()
        .map(|run| run.iter().flat_map(|s| s.1.iter().map(|x| x.1)).collect())
        .collect();
    assert_eq!(kinds[0], vec![SendKind::Forward; 5]);
    assert_eq!(
        kinds[2].iter().filter(|&&k| k == SendKind::Flow).count(),
        8,
        "{kinds:?}"
    );
    assert!(kinds[3].iter().all(|&k| k == SendKind::Flow), "{kinds:?}");
}

#[test]
fn a_connection_mark_written_by_one_packet_is_read_by_the_next_in_the_vector() {
    // Each established packet of a connection steps its mark 0 -> 1 -> 2; the packet that
    // finds 2 is dropped and logged. Batched without care, the packets of one vector would all
    // read the mark before the vector.
    let rules = r#"
table ip filter {
    chain forward {
        type filter hook forward priority filter; policy accept;
        ct state new accept
        ct mark 0x2 log prefix "third " drop
        ct mark 0x1 ct mark set 0x2 accept
        ct mark 0x0 ct mark set 0x1 accept
    }
    chain post {
        type nat hook postrouting priority srcnat; policy accept;
        oifname "w1" masquerade
    }
    chain pre {
        type nat hook prerouting priority dstnat; policy accept;
        iifname "w0" tcp dport 8080 dnat to 10.2.0.2:80
    }
}
"#;
    let all = same_both_ways(rules);
    // The server's SYN-ACK stepped the mark to 1; in the client's next run the ACK steps it
    // to 2 and both data segments after it in the same vector are dropped, each logged.
    let drop = Fate::Dropped(crate::DropReason::Verdict);
    let third: Vec<Fate> = all[2].iter().map(|s| s.0).collect();
    assert_eq!(third[..3], [Fate::Sent, drop, drop]);
    for s in &all[2][1..3] {
        assert_eq!(s.2.len(), 1);
        assert!(s.2[0].starts_with("third "), "{:?}", s.2);
    }
}

#[test]
fn logs_and_counts_of_an_unordered_ruleset_stay_per_packet() {
    let rules = r#"
table inet filter {
    chain pre {
        type filter hook prerouting priority filter; policy accept;
        tcp flags & (syn | ack) == syn log prefix "syn "
    }
    chain forward {
        type filter hook forward priority filter; policy accept;
        ct state established tcp flags & psh == psh log prefix "data "
        tcp sport 80 ct direction reply accept
    }
}
table ip nat {
    chain pre {
        type nat hook prerouting priority dstnat; policy accept;
        iifname "w0" tcp dport 8080 dnat to 10.2.0.2:80
    }
    chain post {
        type nat hook postrouting priority srcnat; policy accept;
        oifname "w1" masquerade
    }
}
"#;
    let all = same_both_ways(rules);
    // Each SYN logged once, as its own packet's line; the data segments each theirs.
    let syn_lines: Vec<usize> = all[0].iter().map(|s| s.2.len()).collect();
    assert_eq!(syn_lines, vec![1; 5]);
    let data: usize = all[2].iter().map(|s| s.2.len()).sum();
    assert_eq!(data, 8);
}
