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

/// `dup to KEY map { ... }` and `fwd [ip] to KEY map { ... }`: the lookup picks the target
/// per packet (nft_lookup_eval into nft_dup/nft_fwd's register); a miss ends the rule, so
/// nothing is copied or forwarded and the rules after it still run.
#[test]
fn target_maps_pick_the_target_per_key() {
    let text = r#"table netdev t {
    chain a {
        type filter hook ingress device "eth0" priority 0; policy accept;
        dup to tcp dport map { 22 : "mirror1", 23 : "mirror2", 24 : "mirror1" } meta mark set 1
        fwd to ip daddr map { 10.0.0.2 : "eth1", 10.0.0.3 : "eth2" }
        fwd ip to tcp dport map { 80 : 10.0.9.1, 81 : 10.0.9.2 } device "eth3"
        meta mark set 9
    }
}
"#;
    let rs = wasp_ruleset::parse_str(text, "m.nft").unwrap();
    let mut e = Engine::compile(&rs).unwrap();
    let t: Vec<(&str, Option<std::net::IpAddr>)> =
        e.out_targets().iter().map(|t| (&*t.dev, t.via)).collect();
    assert_eq!(
        t,
        vec![
            ("mirror1", None),
            ("mirror2", None),
            ("eth1", None),
            ("eth2", None),
            ("eth3", Some("10.0.9.1".parse().unwrap())),
            ("eth3", Some("10.0.9.2".parse().unwrap())),
        ]
    );
    let to = |dst: [u8; 4], dport: u16| ipv4(6, [10, 0, 0, 1], dst, 0, &tcp(1000, dport, SYN));
    let frames = [
        to([10, 0, 0, 2], 22),
        to([10, 0, 0, 3], 23),
        to([10, 0, 0, 9], 24),
        to([10, 0, 0, 9], 81),
        to([10, 0, 0, 9], 443),
    ];
    let out = run(&mut e, &frames);
    // dport 22 to 10.0.0.2: a copy to mirror1, forwarded to eth1.
    assert_eq!(
        (out[0].dup, out[0].fwd, out[0].mark),
        (0b1, Some(OutId(2)), 1)
    );
    // dport 23 to 10.0.0.3: mirror2, eth2.
    assert_eq!(
        (out[1].dup, out[1].fwd, out[1].mark),
        (0b10, Some(OutId(3)), 1)
    );
    // dport 24: mirror1 again; 10.0.0.9 is in no map: not forwarded, on to the last rule.
    assert_eq!((out[2].dup, out[2].fwd, out[2].mark), (0b1, None, 9));
    // dport 81: no copy (a miss ends that rule before `meta mark set 1`), the next hop
    // 10.0.9.2 on eth3.
    assert_eq!(
        (out[3].dup, out[3].fwd, out[3].mark),
        (0, Some(OutId(5)), 0)
    );
    // dport 443: no map holds anything of it.
    assert_eq!((out[4].dup, out[4].fwd, out[4].mark), (0, None, 9));
    assert_eq!(out[4].verdict, FinalVerdict::Accept);
    // The per-packet walk agrees.
    let mut e2 = Engine::compile(&rs).unwrap();
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(e2.one("eth0", &pkt(f), i, 0, None).0, out[i], "packet {i}");
    }
}

#[test]
fn named_maps_of_devices_pick_the_targets_the_anonymous_ones_pick() {
    let rules = |dup_map: &str, fwd_map: &str| {
        format!(
            r#"table netdev t {{
    map ports {{ type inet_service : iface_index; elements = {{ 22 : "mirror1", 23 : "mirror2" }} }}
    map hosts {{ type ipv4_addr : iface_index; elements = {{ 10.0.0.2 : "eth1", 10.0.0.3 : "eth2" }} }}
    chain a {{
        type filter hook ingress device "eth0" priority 0; policy accept;
        dup to tcp dport map {dup_map} meta mark set 1
        fwd to ip daddr map {fwd_map}
        meta mark set 9
    }}
}}
"#
        )
    };
    let named = rules("@ports", "@hosts");
    let anonymous = rules(
        r#"{ 22 : "mirror1", 23 : "mirror2" }"#,
        r#"{ 10.0.0.2 : "eth1", 10.0.0.3 : "eth2" }"#,
    );
    let to = |dst: [u8; 4], dport: u16| ipv4(6, [10, 0, 0, 1], dst, 0, &tcp(1000, dport, SYN));
    let frames = [
        to([10, 0, 0, 2], 22),
        to([10, 0, 0, 3], 23),
        to([10, 0, 0, 9], 80),
    ];
    let outcomes = |text: &str| {
        let rs = wasp_ruleset::parse_str(text, "n.nft").unwrap();
        let mut e = Engine::compile(&rs).unwrap();
        let devs: Vec<String> = e.out_targets().iter().map(|t| t.dev.to_string()).collect();
        // The rule handles differ (an anonymous map takes one): compare what the rules did.
        let did: Vec<_> = run(&mut e, &frames)
            .iter()
            .map(|o| (o.verdict, o.fwd, o.dup, o.mark))
            .collect();
        (devs, did)
    };
    let (devs, out) = outcomes(&named);
    assert_eq!(devs, ["mirror1", "mirror2", "eth1", "eth2"]);
    assert_eq!(outcomes(&anonymous), (devs, out.clone()));
    // In neither map: no copy (the miss ends that rule), not forwarded, on to the last rule.
    assert_eq!((out[1].1, out[1].2), (Some(OutId(3)), 0b10));
    assert_eq!((out[2].1, out[2].2, out[2].3), (None, 0, 9));
}
