//! `reject` (nft_reject_netdev_eval and the other families' reject expressions): the packet is
//! dropped with the reply recorded in its outcome (built and sent by `wasp_gateway::reject`, tested
//! there), only packets of the protocol the reply needs reach it (the dependencies nft adds),
//! and it ends the rule.

use super::*;

fn engine(rules: &str) -> Engine {
    let text = format!(
        "table netdev t {{\n  chain c {{\n    type filter hook ingress device \"eth0\" priority 0; policy accept;\n{rules}\n  }}\n}}\n"
    );
    let rs = wasp_ruleset::parse_str(&text, "reject.nft").expect("parses");
    Engine::compile(&rs).expect("compiles")
}

fn verdicts(e: &mut Engine, frames: &[Vec<u8>]) -> Vec<FinalVerdict> {
    let out: Vec<FinalVerdict> = run(e, frames).iter().map(|o| o.verdict).collect();
    // The per-packet walk agrees with the vector pipeline.
    let one: Vec<FinalVerdict> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| e.one("eth0", &pkt(f), i, 0, None).0.verdict)
        .collect();
    assert_eq!(out, one);
    out
}

fn tcp4() -> Vec<u8> {
    ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 0, &tcp(1000, 22, 0x02))
}
fn udp4() -> Vec<u8> {
    ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], 0, &udp(1000, 53))
}
fn tcp6() -> Vec<u8> {
    ipv6(6, 1, &tcp(1000, 22, 0x02))
}

use FinalVerdict::{Accept as A, Drop as D};

#[test]
fn reject_drops_every_packet_that_reaches_it() {
    let mut e = engine("    reject");
    assert_eq!(verdicts(&mut e, &[tcp4(), udp4(), tcp6()]), vec![D, D, D]);
    let out = run(&mut e, &[tcp4()]);
    assert_eq!(
        out[0].reject,
        Some(crate::Reject {
            kind: wasp_ruleset::model::RejectKind::Icmpx(1),
            netdev: true
        })
    );
}

#[test]
fn an_icmp_reply_takes_the_packets_of_its_family_only() {
    let mut e = engine("    reject with icmp host-unreachable");
    assert_eq!(verdicts(&mut e, &[tcp4(), udp4(), tcp6()]), vec![D, D, A]);
    let mut e = engine("    reject with icmpv6 no-route");
    assert_eq!(verdicts(&mut e, &[tcp4(), udp4(), tcp6()]), vec![A, A, D]);
}

#[test]
fn a_tcp_reset_takes_tcp_packets_only() {
    let mut e = engine("    reject with tcp reset");
    assert_eq!(verdicts(&mut e, &[tcp4(), udp4(), tcp6()]), vec![D, A, D]);
}

#[test]
fn reject_ends_the_rule_and_the_chain() {
    let mut e = engine("    tcp dport 22 reject\n    meta mark set 7 drop");
    let out = run(&mut e, &[tcp4(), udp4()]);
    assert_eq!((out[0].verdict, out[0].mark), (D, 0));
    assert_eq!((out[1].verdict, out[1].mark), (D, 7));
}
