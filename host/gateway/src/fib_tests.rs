//! `fib` and `rt` on the IP path against the gateway's routes, devices and addresses
//! (nft_fib_ipv4 / nft_fib_ipv6 / nft_rt as the kernel evaluates them).

use super::netfilter_tests::{C, CLIENT, ROUTER_IN, S, W0, read, rig_with, syn_with_options, tcp};
use super::path::Fate;
use crate::DropReason;

/// client 10.1.0.2 -- w0 [gateway] w1 (MTU 1400) -- server 10.2.0.2; 10.9.0.0/16 behind the
/// router 10.2.0.254 on w1.
const GW: &str = "\
device w0 mac 02:00:00:00:00:01
device w1 mac 02:00:00:00:00:02 mtu 1400
address w0 10.1.0.1/24
address w1 10.2.0.1/24
route 10.9.0.0/16 via 10.2.0.254 dev w1
neighbour 10.1.0.2 lladdr 02:00:00:00:01:02 dev w0
neighbour 10.2.0.2 lladdr 02:00:00:00:02:02 dev w1
neighbour 10.2.0.254 lladdr 02:00:00:00:02:fe dev w1
";

/// A SYN from `src` to `dst` into w0.
fn syn(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    tcp(CLIENT, W0, src, dst, 40000, 80, 0x02, 64, b"")
}

fn rules(hook: &str, rule: &str) -> String {
    format!(
        "table ip t {{\n chain c {{\n  type filter hook {hook} priority 0; policy accept;\n  {rule}\n }}\n}}\n"
    )
}

#[test]
fn fib_reverse_path_check_passes_the_right_side_and_drops_a_spoofed_source() {
    let mut r = rig_with(GW, &rules("prerouting", "fib saddr . iif oif missing drop"));
    // 10.1.0.2 is routed out of w0, where it came in: it passes.
    assert_eq!(r.send("w0", &syn(C, S), 1.0).0, Fate::Sent);
    // 10.2.0.7 lives behind w1: arriving on w0 it is spoofed.
    assert_eq!(
        r.send("w0", &syn([10, 2, 0, 7], S), 1.1).0,
        Fate::Dropped(DropReason::Verdict)
    );
    // So is a source without any route.
    assert_eq!(
        r.send("w0", &syn([192, 0, 2, 1], S), 1.2).0,
        Fate::Dropped(DropReason::Verdict)
    );
    // `oifname` names the device of the source's route.
    let mut r = rig_with(
        GW,
        &rules("prerouting", r#"fib saddr oifname != "w1" drop"#),
    );
    assert_eq!(r.send("w0", &syn([10, 9, 3, 3], S), 1.3).0, Fate::Sent);
    assert_eq!(
        r.send("w0", &syn(C, S), 1.4).0,
        Fate::Dropped(DropReason::Verdict)
    );
}

#[test]
fn fib_daddr_type_local_is_the_gateway_s_own_address() {
    let mut r = rig_with(GW, &rules("prerouting", "fib daddr type local drop"));
    assert_eq!(
        r.send("w0", &syn(C, ROUTER_IN), 1.0).0,
        Fate::Dropped(DropReason::Verdict)
    );
    assert_eq!(
        r.send("w0", &syn(C, [10, 2, 0, 1]), 1.1).0,
        Fate::Dropped(DropReason::Verdict)
    );
    assert_eq!(r.send("w0", &syn(C, S), 1.2).0, Fate::Sent);
    // With `iif`, an address is local only on the device that holds it (inet_dev_addr_type):
    // w1's address arriving on w0 is unicast there, and delivered locally all the same.
    let mut r = rig_with(
        GW,
        &rules(
            "prerouting",
            "fib daddr . iif type vmap { local : drop, unicast : accept }",
        ),
    );
    assert_eq!(
        r.send("w0", &syn(C, ROUTER_IN), 1.0).0,
        Fate::Dropped(DropReason::Verdict)
    );
    assert_eq!(r.send("w0", &syn(C, [10, 2, 0, 1]), 1.1).0, Fate::Local);
    // The broadcast address of w0's subnet is broadcast; a routed one unicast.
    let mut r = rig_with(GW, &rules("prerouting", "fib daddr type != unicast drop"));
    assert_eq!(r.send("w0", &syn(C, [10, 9, 1, 1]), 1.0).0, Fate::Sent);
    assert_eq!(
        r.send("w0", &syn(C, [10, 1, 0, 255]), 1.1).0,
        Fate::Dropped(DropReason::Verdict)
    );
}

#[test]
fn rt_nexthop_is_the_gateway_of_a_routed_destination_and_the_destination_when_connected() {
    let mut r = rig_with(GW, &rules("forward", "rt ip nexthop 10.2.0.254 drop"));
    assert_eq!(
        r.send("w0", &syn(C, [10, 9, 1, 1]), 1.0).0,
        Fate::Dropped(DropReason::Verdict)
    );
    assert_eq!(r.send("w0", &syn(C, S), 1.1).0, Fate::Sent);
    let mut r = rig_with(GW, &rules("postrouting", "rt nexthop 10.2.0.2 drop"));
    assert_eq!(
        r.send("w0", &syn(C, S), 1.0).0,
        Fate::Dropped(DropReason::Verdict)
    );
    assert_eq!(r.send("w0", &syn(C, [10, 9, 1, 1]), 1.1).0, Fate::Sent);
    // No realms and no xfrm: `classid` reads 0, `ipsec` missing, once routed.
    let mut r = rig_with(GW, &rules("forward", "rt classid 0 rt ipsec missing drop"));
    assert_eq!(
        r.send("w0", &syn(C, S), 1.0).0,
        Fate::Dropped(DropReason::Verdict)
    );
}

#[test]
fn rt_keys_end_the_rule_before_routing() {
    // At prerouting the packet has no route: the rule stops, negated or not.
    let mut r = rig_with(GW, &rules("prerouting", "rt ip nexthop != 1.2.3.4 drop"));
    assert_eq!(r.send("w0", &syn(C, S), 1.0).0, Fate::Sent);
    let mut r = rig_with(GW, &rules("prerouting", "rt ipsec missing drop"));
    assert_eq!(r.send("w0", &syn(C, S), 1.0).0, Fate::Sent);
    // After routing the same negated rule holds.
    let mut r = rig_with(GW, &rules("forward", "rt ip nexthop != 1.2.3.4 drop"));
    assert_eq!(
        r.send("w0", &syn(C, S), 1.0).0,
        Fate::Dropped(DropReason::Verdict)
    );
}

#[test]
fn rt_mtu_clamps_the_mss_to_the_route_s_mtu() {
    // w1's MTU 1400 (w0, the way back, has 1500): MSS 1400 - 20 - 20 = 1360.
    let opts = [2, 4, 0x05, 0xb4];
    let mut r = rig_with(
        GW,
        &rules("forward", "tcp flags syn tcp option maxseg size set rt mtu"),
    );
    let (fate, sent) = r.send("w0", &syn_with_options(&opts), 1.0);
    assert_eq!(fate, Fate::Sent);
    let f = &sent[0].2;
    assert_eq!(&f[54..58], &[2, 4, 0x05, 0x50]);
    assert!(read(f).6, "TCP checksum after the edit");
    let mut r = rig_with(GW, &rules("postrouting", "rt mtu 1360 drop"));
    assert_eq!(
        r.send("w0", &syn(C, S), 1.0).0,
        Fate::Dropped(DropReason::Verdict)
    );
}
