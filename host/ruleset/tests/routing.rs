//! `fib` and `rt` as nft 1.0.6 lists them (checked against `nft list ruleset` on Linux 6.18).

fn listed(family: &str, hook: &str, rule: &str) -> String {
    let text = format!(
        "table {family} t {{\n\tchain c {{\n\t\ttype filter hook {hook} priority 0; policy accept;\n\t\t{rule}\n\t}}\n}}\n"
    );
    let rs = wasp_ruleset::parse_str(&text, "routing.nft").unwrap_or_else(|e| panic!("{e}"));
    let out = wasp_ruleset::print_ruleset(&rs, false);
    out.lines().nth(3).unwrap_or("").trim().to_string()
}

#[test]
fn fib_lists_its_flags_in_nft_s_order_and_its_values_by_name() {
    let cases = [
        ("fib saddr . iif oif ne 0", "fib saddr . iif oif != 0"),
        (
            "fib iif . saddr oifname \"lo\"",
            "fib saddr . iif oifname \"lo\"",
        ),
        ("fib daddr . iif type local", "fib daddr . iif type local"),
        (
            "fib daddr . iif type vmap { blackhole : drop, prohibit : drop, unicast : accept }",
            "fib daddr . iif type vmap { unicast : accept, blackhole : drop, prohibit : drop }",
        ),
        ("fib daddr oif exists", "fib daddr oif exists"),
        (
            "fib daddr . mark oif missing",
            "fib daddr . mark oif missing",
        ),
        ("fib daddr type 9", "fib daddr type 9"),
    ];
    for (rule, want) in cases {
        assert_eq!(listed("ip", "prerouting", rule), want, "{rule}");
    }
}

#[test]
fn rt_lists_the_next_hop_with_its_family() {
    assert_eq!(
        listed("ip", "output", "rt nexthop 192.168.0.1"),
        "rt ip nexthop 192.168.0.1"
    );
    assert_eq!(
        listed("ip6", "output", "rt nexthop fd00::1"),
        "rt ip6 nexthop fd00::1"
    );
    assert_eq!(
        listed("inet", "output", "meta nfproto ipv4 rt nexthop 192.168.0.1"),
        "meta nfproto ipv4 rt ip nexthop 192.168.0.1"
    );
    assert_eq!(
        listed("inet", "output", "tcp option maxseg size set rt mtu"),
        "tcp option maxseg size set rt mtu"
    );
    assert_eq!(
        listed("ip", "input", "rt classid 0x10-0x20"),
        "rt classid 16-32"
    );
    assert_eq!(listed("ip", "input", "rt ipsec exists"), "rt ipsec exists");
}
