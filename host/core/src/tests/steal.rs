//! A hook of another kind among the netdev ingress chains ([`crate::Steal`], the flowtable's
//! ingress hook): it sees the packets the chains below its priority accepted, as they left
//! them; the packets it takes never reach the chains at or above its priority; with no chain
//! above it, it runs after all of them. The vector pipeline and the per-packet walk agree.

use super::*;
use crate::hooks::Steal;

const RULES: &str = r#"
table netdev t {
    chain early {
        type filter hook ingress device "eth0" priority -10; policy accept;
        tcp dport 23 drop
        meta mark set 5
    }
    chain late {
        type filter hook ingress device "eth0" priority 10; policy accept;
        meta mark set 9
    }
}
"#;

fn frame(dport: u16) -> Vec<u8> {
    ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 0, &tcp(1000, dport, SYN))
}

/// `frames` through the ingress hook of eth0 with a steal at `priority` that takes the
/// packets to port 80: the outcomes, and per offered packet (index, mark it carried).
fn run_steal(
    rules: &str,
    priority: i32,
    frames: &[Vec<u8>],
) -> (Engine, Vec<Outcome>, Vec<(usize, u16)>) {
    let rs = wasp_ruleset::parse_str(rules, "steal.nft").expect("parses");
    let mut e = Engine::compile(&rs).expect("compiles");
    let pkts: Vec<Packet<'_>> = frames.iter().map(|f| packet(f)).collect();
    let mut offered = Vec::new();
    let mut take = |i: usize, p: &Packet<'_>| {
        let dport = p.meta.l4.map_or(0, |l| {
            let o = usize::from(l.offset);
            u16::from_be_bytes([p.frame[o + 2], p.frame[o + 3]])
        });
        offered.push((i, dport));
        dport == 80
    };
    let mut res = HookResult::new();
    e.run_ingress(
        "eth0",
        &pkts,
        0,
        &mut res,
        None,
        None,
        Some(Steal {
            priority,
            take: &mut take,
        }),
    );
    (e, res.outcomes.clone(), offered)
}

fn packet(f: &[u8]) -> Packet<'_> {
    Packet {
        frame: f,
        meta: wasp_wire::parse(f),
        iifname: "eth0",
        mark: 0,
        oifname: "",
        ct: crate::conn::CtMeta::NONE,
        ct_detail: None,
        nftrace: false,
        route: None,
    }
}

#[test]
fn taken_packets_skip_the_chains_above_the_steal_s_priority() {
    let frames = [frame(80), frame(23), frame(22), frame(80)];
    for n in [frames.len(), 1] {
        let (e, out, offered) = run_steal(RULES, 0, &frames[..n]);
        // The dropped packet (23) is never offered; the others are, after `early`.
        let want: Vec<(usize, u16)> = [(0, 80), (2, 22), (3, 80)]
            .into_iter()
            .filter(|(i, _)| *i < n)
            .collect();
        assert_eq!(offered, want, "vector of {n}");
        // Taken: `early`'s mark, accepted, `late` never ran; the other accepted one has
        // `late`'s mark.
        assert_eq!((out[0].verdict, out[0].mark), (FinalVerdict::Accept, 5));
        if n > 1 {
            assert_eq!(out[1].verdict, FinalVerdict::Drop);
            assert_eq!((out[2].verdict, out[2].mark), (FinalVerdict::Accept, 9));
            assert_eq!((out[3].verdict, out[3].mark), (FinalVerdict::Accept, 5));
        }
        let s = e.chain_stats(Hook::Ingress, "eth0");
        let late_saw = if n > 1 { 1 } else { 0 };
        assert_eq!((s[0].packets, s[1].packets), (n as u64, late_saw), "{n}");
    }
}

#[test]
fn a_steal_above_every_chain_runs_after_them_and_one_below_before_them() {
    let frames = [frame(80), frame(22)];
    // Above both: offered after `late` set its mark; every chain saw every packet.
    let (e, out, offered) = run_steal(RULES, 100, &frames);
    assert_eq!(offered, vec![(0, 80), (1, 22)]);
    assert_eq!((out[0].mark, out[1].mark), (9, 9));
    let s = e.chain_stats(Hook::Ingress, "eth0");
    assert_eq!((s[0].packets, s[1].packets), (2, 2));
    // Below both: the port-80 packet is taken before any chain.
    let (e, out, offered) = run_steal(RULES, -100, &frames);
    assert_eq!(offered, vec![(0, 80), (1, 22)]);
    assert_eq!((out[0].mark, out[1].mark), (0, 9));
    let s = e.chain_stats(Hook::Ingress, "eth0");
    assert_eq!((s[0].packets, s[1].packets), (1, 1));
    // No chain on the device: every packet is offered.
    let (_, _, offered) = run_steal("table netdev t { }", 0, &frames);
    assert_eq!(offered, vec![(0, 80), (1, 22)]);
}
