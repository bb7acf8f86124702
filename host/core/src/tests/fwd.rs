//! `fwd to` and `dup to` (nft_fwd_netdev, nft_dup_netdev): the output targets an outcome names,
//! the end of the hook for a stolen packet, in the vector pipeline and in the per-packet walk.

use super::*;

const RULES: &str = r#"
table netdev t {
    chain a {
        type filter hook ingress device "eth0" priority 0; policy accept;
        ip daddr 10.0.0.2 dup to "mirror" counter
        tcp dport 22 fwd to "eth1"
        tcp dport 23 jump sub
        tcp dport 25 fwd ip to 10.0.9.9 device "eth1"
        meta mark set 7
    }
    chain sub {
        dup to "mirror"
        fwd to "eth2"
    }
    chain b {
        type filter hook ingress device "eth0" priority 10; policy drop;
    }
}
"#;

fn engine() -> Engine {
    let rs = wasp_ruleset::parse_str(RULES, "fwd.nft").expect("parses");
    Engine::compile(&rs).expect("compiles")
}

fn frame(dport: u16) -> Vec<u8> {
    ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 0, &tcp(1000, dport, SYN))
}

#[test]
fn targets_are_interned_in_statement_order() {
    let e = engine();
    let t: Vec<(&str, Option<std::net::IpAddr>)> =
        e.out_targets().iter().map(|t| (&*t.dev, t.via)).collect();
    assert_eq!(
        t,
        vec![
            ("mirror", None),
            ("eth1", None),
            ("eth1", Some("10.0.9.9".parse().unwrap())),
            ("eth2", None),
        ]
    );
}

#[test]
fn fwd_steals_and_dup_continues() {
    let mut e = engine();
    let frames = [frame(22), frame(23), frame(25), frame(80)];
    let out = run(&mut e, &frames);
    // dport 22: dup to mirror (target 0), fwd to eth1 (target 1): stolen in chain a, so
    // chain b (policy drop) never sees it and `meta mark set 7` does not run.
    assert_eq!(out[0].fwd, Some(OutId(1)));
    assert_eq!(out[0].dup, 0b1);
    assert_eq!(out[0].verdict, FinalVerdict::Accept);
    assert_eq!(out[0].mark, 0);
    assert_eq!(
        out[0].decision.map(|d| (d.chain, d.rule.is_some())),
        Some((0, true))
    );
    // dport 23: fwd inside the jumped-to chain: target 3 (eth2), decided by sub's rule.
    assert_eq!(out[1].fwd, Some(OutId(3)));
    assert_eq!(out[1].decision.map(|d| d.chain), Some(1));
    assert_eq!(out[1].dups().collect::<Vec<_>>(), vec![OutId(0)]);
    // dport 25: the neighbour form.
    assert_eq!(out[2].fwd, Some(OutId(2)));
    // Not forwarded: chain a accepts, chain b drops; the dup copy still left.
    assert_eq!(out[3].fwd, None);
    assert_eq!(out[3].verdict, FinalVerdict::Drop);
    assert_eq!(out[3].mark, 7);
    assert_eq!(out[3].dup, 0b1);
    // Chain b saw only the packet that was not stolen.
    let b = e.chain_stats(Hook::Ingress, "eth0");
    assert_eq!((b[0].packets, b[0].accepted, b[0].dropped), (4, 4, 0));
    assert_eq!((b[1].packets, b[1].accepted, b[1].dropped), (1, 0, 1));
}

#[test]
fn the_walk_agrees_with_the_pipeline() {
    let mut e = engine();
    let frames = [frame(22), frame(23), frame(25), frame(80)];
    let out = run(&mut e, &frames);
    let mut e2 = engine();
    for (i, f) in frames.iter().enumerate() {
        let one = e2.one("eth0", &pkt(f), i, 0, None).0;
        assert_eq!(one, out[i], "packet {i}");
    }
}

#[test]
fn fwd_in_an_inet_table_is_refused_as_nft_does() {
    let text = "table inet t {\n chain c { type filter hook forward priority 0;\n  fwd to \"eth1\"\n }\n}\n";
    let err = wasp_ruleset::parse_str(text, "x.nft")
        .unwrap_err()
        .to_string();
    assert!(err.contains("x.nft:3:3"), "{err}");
    assert!(err.contains("netdev tables only"), "{err}");
}

#[test]
fn fwd_ip_to_does_not_take_other_families() {
    let text = r#"table netdev t {
    chain a {
        type filter hook ingress device "eth0" priority 0; policy drop;
        fwd ip6 to fd00::9 device "eth1"
        fwd ip to 10.0.9.9 device "eth1"
    }
}
"#;
    let rs = wasp_ruleset::parse_str(text, "f.nft").unwrap();
    let mut e = Engine::compile(&rs).unwrap();
    let v6 = ipv6(6, 1, &tcp(1000, 22, SYN));
    let out = run(&mut e, &[frame(22), v6]);
    // The IPv4 packet skips the ip6 rule (NFT_BREAK) and takes the ip one; the IPv6 the first.
    assert_eq!(out[0].fwd, Some(OutId(1)));
    assert_eq!(out[1].fwd, Some(OutId(0)));
    let arp = eth(0x0806, &[0u8; 28]);
    let out = run(&mut e, &[arp]);
    assert_eq!((out[0].fwd, out[0].verdict), (None, FinalVerdict::Drop));
}
