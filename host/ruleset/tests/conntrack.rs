//! Conntrack, NAT and flowtable syntax: the refusals of nft 1.0.6 and the kernel at the place
//! nft names, and flowtables printed and read back (the local kernel has no flowtable
//! support, so `tests/cases` cannot hold them; the expected listing follows nftables 1.0.6's
//! `flowtable_print_declaration`). The listing of ct and NAT statements is compared with the
//! kernel's by `tests/kernel.rs` (`tests/cases/conntrack_nat.nft`).

use wasp_ruleset::model::{NatKind, Stmt};
use wasp_ruleset::{apply_batch, parse_str, print_ruleset};

/// Rulesets nft refuses, with the line and column of its first error. Each was run through
/// `nft -c -f` in a fresh network namespace (nftables 1.0.6, kernel 6.18); where check mode
/// accepts the file (the kernel validates the hooks of NAT statements reached from a chain
/// only when the transaction commits), through `nft -f`, which refuses it at the rule named.
const REFUSED: &[(&str, u32, u32)] = &[
    // after-terminal: nft -c -f: "Statement after terminal statement has no effect"
    (
        "table inet t {\n\tchain c {\n\t\ttype nat hook postrouting priority srcnat;\n\t\tsnat ip to 10.0.0.1 counter\n\t}\n}\n",
        4,
        23,
    ),
    // bad-port-range: nft -c -f: "Range has zero or negative size"
    (
        "table inet t {\n\tchain c {\n\t\ttype nat hook postrouting priority srcnat;\n\t\ttcp dport 1 snat ip to 10.0.0.1:90-80\n\t}\n}\n",
        4,
        35,
    ),
    // bad-range: nft -c -f: "Range has zero or negative size"
    (
        "table inet t {\n\tchain c {\n\t\ttype nat hook postrouting priority srcnat;\n\t\tsnat ip to 10.0.0.9-10.0.0.1\n\t}\n}\n",
        4,
        14,
    ),
    // ct-arp: nft -c -f: "Could not process rule: Protocol error"
    (
        "table arp t {\n\tchain c {\n\t\ttype filter hook input priority 0;\n\t\tct mark set 1\n\t}\n}\n",
        4,
        3,
    ),
    // ct-bad-key: nft -c -f: "syntax error, unexpected string"
    (
        "table inet t {\n\tchain c {\n\t\ttype filter hook forward priority 0;\n\t\tct foo 1\n\t}\n}\n",
        4,
        6,
    ),
    // ct-bad-state: nft -c -f: "Could not parse conntrack state"
    (
        "table inet t {\n\tchain c {\n\t\ttype filter hook forward priority 0;\n\t\tct state establish accept\n\t}\n}\n",
        4,
        12,
    ),
    // ct-bridge: nft -c -f: "Could not process rule: Protocol error"
    (
        "table bridge t {\n\tchain c {\n\t\ttype filter hook forward priority 0;\n\t\tct count 10\n\t}\n}\n",
        4,
        3,
    ),
    // ct-count-after-nat: nft -c -f: "Statement after terminal statement has no effect"
    (
        "table ip t {\n\tchain c {\n\t\ttype nat hook postrouting priority 100;\n\t\tmasquerade ct count 1\n\t}\n}\n",
        4,
        14,
    ),
    // ct-netdev: nft -c -f: "Could not process rule: Protocol error"
    (
        "table netdev t {\n\tchain c {\n\t\ttype filter hook ingress device \"lo\" priority 0;\n\t\tip saddr 1.1.1.1 ct state established accept\n\t}\n}\n",
        4,
        20,
    ),
    // ct-state-set: nft -c -f: "Could not process rule: Operation not supported"
    (
        "table inet t {\n\tchain c {\n\t\ttype filter hook forward priority 0;\n\t\tct state set new\n\t}\n}\n",
        4,
        3,
    ),
    // dnat-in-post: nft -f (nft -c -f accepts it: the kernel validates chains at commit only): "Could not process rule: Operation not supported"
    (
        "table inet t {\n\tchain c {\n\t\ttype nat hook postrouting priority srcnat;\n\t\tdnat ip to 10.0.0.1\n\t}\n}\n",
        4,
        3,
    ),
    // inet-no-family: nft -c -f: "ip or ip6 must be specified with address for inet tables."
    (
        "table inet t {\n\tchain c {\n\t\ttype nat hook postrouting priority srcnat;\n\t\tsnat to 10.0.0.1\n\t}\n}\n",
        4,
        3,
    ),
    // ip-wrong-family: nft -c -f: "conflicting protocols specified: ip vs. ip6. You must specify ip or ip6 family in nat statement"
    (
        "table ip t {\n\tchain c {\n\t\ttype nat hook postrouting priority 100;\n\t\tsnat ip6 to ::1\n\t}\n}\n",
        4,
        3,
    ),
    // ip6-wrong-family: nft -c -f: "conflicting protocols specified: ip6 vs. ip. You must specify ip or ip6 family in nat statement"
    (
        "table ip6 t {\n\tchain c {\n\t\ttype nat hook postrouting priority 100;\n\t\tsnat ip to 1.1.1.1\n\t}\n}\n",
        4,
        3,
    ),
    // masq-in-input: nft -c -f: "Could not process rule: Operation not supported"
    (
        "table ip t {\n\tchain c {\n\t\ttype nat hook input priority 100;\n\t\tmasquerade\n\t}\n}\n",
        4,
        3,
    ),
    // masq-port-without-l4: nft -c -f: "transport protocol mapping is only valid after transport protocol match"
    (
        "table inet t {\n\tchain c {\n\t\ttype nat hook postrouting priority srcnat;\n\t\tmasquerade to :1024\n\t}\n}\n",
        4,
        18,
    ),
    // masq-to-addr: nft -c -f: "syntax error, unexpected string, expecting colon"
    (
        "table inet t {\n\tchain c {\n\t\ttype nat hook postrouting priority srcnat;\n\t\tmasquerade to 1.1.1.1\n\t}\n}\n",
        4,
        17,
    ),
    // nat-chain-bridge: nft -c -f: "Could not process rule: No such file or directory"
    (
        "table bridge t {\n\tchain c {\n\t\ttype nat hook prerouting priority 0;\n\t}\n}\n",
        3,
        8,
    ),
    // nat-chain-forward: nft -c -f: "Could not process rule: Operation not supported"
    (
        "table ip t {\n\tchain c {\n\t\ttype nat hook forward priority 0;\n\t}\n}\n",
        2,
        8,
    ),
    // nat-chain-netdev: nft -c -f: "Could not process rule: No such file or directory"
    (
        "table netdev t {\n\tchain c {\n\t\ttype nat hook ingress device \"lo\" priority 0;\n\t}\n}\n",
        3,
        8,
    ),
    // nat-chain-prio: nft -c -f: "Could not process rule: Operation not supported"
    (
        "table ip t {\n\tchain c {\n\t\ttype nat hook prerouting priority -200;\n\t}\n}\n",
        2,
        8,
    ),
    // nat-in-filter: nft -c -f: "Could not process rule: Operation not supported"
    (
        "table ip t {\n\tchain c {\n\t\ttype filter hook postrouting priority 100;\n\t\tip saddr 1.1.1.1 masquerade\n\t}\n}\n",
        4,
        3,
    ),
    // nat-netdev-stmt: nft -c -f: "NAT is only supported for IPv4/IPv6"
    (
        "table netdev t {\n\tchain c {\n\t\ttype filter hook ingress device \"lo\" priority 0;\n\t\tip saddr 1.1.1.1 masquerade\n\t}\n}\n",
        4,
        20,
    ),
    // nat-via-jump-later: nft -c -f: "Could not process rule: Operation not supported"
    (
        "table ip t {\n\tchain c {\n\t\ttype filter hook forward priority 0;\n\t\tip saddr 1.1.1.1 jump r\n\t}\n\tchain r {\n\t\tsnat to 1.1.1.1\n\t}\n}\n",
        7,
        3,
    ),
    // nat-via-jump: nft -c -f: "Could not process rule: Operation not supported"
    (
        "table ip t {\n\tchain r {\n\t\tmasquerade\n\t}\n\tchain c {\n\t\ttype nat hook prerouting priority dstnat;\n\t\tjump r\n\t}\n}\n",
        7,
        3,
    ),
    // nat-via-vmap: nft -c -f: "Could not process rule: Operation not supported"
    (
        "table ip t {\n\tchain r {\n\t\tsnat to 1.1.1.1\n\t}\n\tchain c {\n\t\ttype filter hook forward priority 0;\n\t\tip daddr vmap { 1.1.1.1 : jump r, 1.1.1.2 : accept }\n\t}\n}\n",
        7,
        3,
    ),
    // port-without-l4: nft -c -f: "transport protocol mapping is only valid after transport protocol match"
    (
        "table inet t {\n\tchain c {\n\t\ttype nat hook postrouting priority srcnat;\n\t\tsnat ip to 10.0.0.1:80\n\t}\n}\n",
        4,
        23,
    ),
    // redirect-in-post: nft -c -f: "Could not process rule: Operation not supported"
    (
        "table inet t {\n\tchain c {\n\t\ttype nat hook postrouting priority srcnat;\n\t\ttcp dport 1 redirect\n\t}\n}\n",
        4,
        3,
    ),
    // snat-in-pre: nft -c -f: "Could not process rule: Operation not supported"
    (
        "table ip t {\n\tchain c {\n\t\ttype nat hook prerouting priority -100;\n\t\tsnat to 1.1.1.1\n\t}\n}\n",
        4,
        3,
    ),
    // snat-ip-port-only: nft -c -f: "syntax error, unexpected colon"
    (
        "table inet t {\n\tchain c {\n\t\ttype nat hook postrouting priority srcnat;\n\t\ttcp dport 1 snat ip to :1024\n\t}\n}\n",
        4,
        26,
    ),
    // th-is-not-l4: nft -c -f: "transport protocol mapping is only valid after transport protocol match"
    (
        "table inet t {\n\tchain c {\n\t\ttype nat hook postrouting priority srcnat;\n\t\tth dport 1 masquerade to :1024\n\t}\n}\n",
        4,
        29,
    ),
    // v6-in-ip: nft -c -f: "Could not resolve hostname: Address family for hostname not supported"
    (
        "table inet t {\n\tchain c {\n\t\ttype nat hook postrouting priority srcnat;\n\t\tsnat ip to fe80::1\n\t}\n}\n",
        4,
        14,
    ),
    // nft -c -f: "conflicting protocols specified: ip vs. ip6. You must specify ip or ip6
    // family in nat statement" (the rule's `ip saddr` fixes the family)
    (
        "table inet t {\n\tchain c {\n\t\ttype nat hook prerouting priority dstnat;\n\t\tip saddr 1.1.1.1 dnat ip6 to ::1\n\t}\n}\n",
        4,
        20,
    ),
    // nft -c -f: "syntax error, unexpected persistent, expecting newline or semicolon"
    // (masquerade and redirect take one group of flags)
    (
        "table inet t {\n\tchain c {\n\t\ttype nat hook postrouting priority srcnat;\n\t\tmasquerade random persistent\n\t}\n}\n",
        4,
        21,
    ),
    // nft -c -f: "Basetype of type conntrack direction is not bitmask"
    (
        "table inet t {\n\tchain c {\n\t\ttype filter hook input priority 0;\n\t\tct direction original,reply\n\t}\n}\n",
        4,
        16,
    ),
    // nft -c -f: "Missing `device' in this chain definition"
    (
        "table inet t {\n\tchain c {\n\t\ttype nat hook ingress priority 0;\n\t}\n}\n",
        3,
        3,
    ),
    // nft -c -f: "Could not process rule: Operation not supported" (nat at ingress)
    (
        "table inet t {\n\tchain c {\n\t\ttype nat hook ingress device \"lo\" priority 0;\n\t}\n}\n",
        2,
        8,
    ),
];

/// In an inet table the rule's network protocol stands for `ip`/`ip6` (nft lists it).
#[test]
fn nat_family_from_the_rule() {
    let text = "table inet t {\n\tchain c {\n\t\ttype nat hook prerouting priority dstnat;\n\t\tmeta nfproto ipv6 dnat to ::2\n\t\tip saddr 1.1.1.1 tcp dport 1 dnat to 1.1.1.1:80 random persistent\n\t\tmeta l4proto { tcp, udp } dnat ip to 1.1.1.1:80\n\t}\n}\n";
    let listed = print_ruleset(&parse_str(text, "f.nft").unwrap(), false);
    for line in [
        "\t\tmeta nfproto ipv6 dnat ip6 to ::2\n",
        "\t\tip saddr 1.1.1.1 tcp dport 1 dnat ip to 1.1.1.1:80 persistent\n",
        "\t\tmeta l4proto { tcp, udp } dnat ip to 1.1.1.1:80\n",
    ] {
        assert!(listed.contains(line), "{line:?} not in\n{listed}");
    }
    // Ports only: no family to write, whatever the rule's network protocol.
    let text = "table inet t {\n\tchain c {\n\t\ttype nat hook postrouting priority srcnat;\n\t\tip saddr 1.1.1.1 tcp dport 1 snat to :80\n\t}\n}\n";
    let listed = print_ruleset(&parse_str(text, "f.nft").unwrap(), false);
    let line = "\t\tip saddr 1.1.1.1 tcp dport 1 snat to :80\n";
    assert!(listed.contains(line), "{line:?} not in\n{listed}");
}

#[test]
fn refused_where_nft_refuses() {
    for (text, line, col) in REFUSED {
        let err = match parse_str(text, "r.nft") {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e.to_string(),
        };
        let at = format!("r.nft:{line}:{col}: error: ");
        assert!(err.starts_with(&at), "want {at}\n{text}\ngot {err}");
    }
}

/// The messages nft gives, where wasp gives the same words.
#[test]
fn messages_are_nfts() {
    let nat = |rule: &str| {
        let text = format!(
            "table inet t {{\n\tchain c {{\n\t\ttype nat hook postrouting priority srcnat;\n\t\t{rule}\n\t}}\n}}\n"
        );
        parse_str(&text, "m.nft").unwrap_err().to_string()
    };
    for (rule, msg) in [
        (
            "snat to 10.0.0.1",
            "ip or ip6 must be specified with address for inet tables.",
        ),
        (
            "snat ip to 10.0.0.1:80",
            "transport protocol mapping is only valid after transport protocol match",
        ),
        (
            "th dport 1 masquerade to :80",
            "transport protocol mapping is only valid after transport protocol match",
        ),
        (
            "snat ip to 10.0.0.9-10.0.0.1",
            "Range has zero or negative size",
        ),
        (
            "snat ip to 10.0.0.1 counter",
            "Statement after terminal statement has no effect",
        ),
    ] {
        let e = nat(rule);
        assert!(e.contains(msg), "{rule}: {e}");
    }
    let e = parse_str(
        "table ip t {\n\tchain c {\n\t\ttype nat hook postrouting priority 100;\n\t\tsnat ip6 to ::1\n\t}\n}\n",
        "m.nft",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("conflicting protocols specified: ip vs. ip6. You must specify ip or ip6 family in nat statement"), "{e}");
}

/// `==` with several bits lists as `a | b` without the `==`, as nft 1.0.6 lists it (which then
/// reads back as a flag test, in nft as in wasp: so it is not in `tests/cases`).
#[test]
fn ct_status_eq_several_bits_lists_as_nft() {
    let text = "table inet t {\n\tchain c {\n\t\tct status == dnat,snat\n\t\tct state == established\n\t}\n}\n";
    let listed = print_ruleset(&parse_str(text, "s.nft").unwrap(), false);
    assert!(
        listed.contains("\t\tct status snat | dnat\n\t\tct state == established\n"),
        "{listed}"
    );
}

/// Values computed from the packet list as nft 1.0.6 lists them (checked against `nft list
/// ruleset`): numgen, jhash, symhash, shifts with nft's parentheses, NAT to maps of address
/// and port ranges, ct zone/label/event set, notrack, `ct status ! dnat`.
#[test]
fn computed_values_round_trip() {
    for (chain, rule, listed) in [
        (
            "prerouting",
            "ct mark set numgen inc mod 2 offset 100",
            None,
        ),
        (
            "prerouting",
            "ct mark set jhash ip saddr . ip daddr mod 2 seed 0xdeadbeef offset 100",
            None,
        ),
        ("prerouting", "ct mark set symhash mod 2 offset 100", None),
        (
            "prerouting",
            "dnat to numgen inc mod 7 offset 167772161",
            None,
        ),
        (
            "prerouting",
            "ct mark set (meta mark | 0x10) << 8",
            Some("ct mark set (meta mark | 0x00000010) << 8"),
        ),
        ("prerouting", "meta mark set ct mark >> 8", None),
        (
            "prerouting",
            "ct mark set 0x11 xor 0x1331",
            Some("ct mark set 0x00001320"),
        ),
        (
            "prerouting",
            "dnat to numgen inc mod 10 map { 0-5 : 192.168.10.100, 6-9 : 192.168.20.200}",
            Some("dnat to numgen inc mod 10 map { 0-5 : 192.168.10.100, 6-9 : 192.168.20.200 }"),
        ),
        (
            "prerouting",
            "dnat ip to ip saddr . tcp dport map { 192.168.1.2 . 80 : 10.141.10.0/24  . 8888 - 8999 }",
            Some(
                "dnat ip to ip saddr . tcp dport map { 192.168.1.2 . 80 : 10.141.10.0/24 . 8888-8999 }",
            ),
        ),
        (
            "postrouting",
            "snat ip prefix to ip saddr map { 10.141.11.0/24 : 192.168.2.0/24 }",
            None,
        ),
        (
            "prerouting",
            "ct zone set mark map { 1 : 1,  2 : 2 }",
            Some("ct zone set meta mark map { 0x00000001 : 1, 0x00000002 : 2 }"),
        ),
        ("prerouting", "ct original zone set 1", None),
        ("prerouting", "ct label set 127", None),
        ("prerouting", "ct label 127", None),
        (
            "prerouting",
            "ct event set new | related | destroy | label",
            Some("ct event set new,related,destroy,label"),
        ),
        ("prerouting", "ct event set new,destroy", None),
        ("prerouting", "notrack", None),
        ("prerouting", "ct status ! dnat", None),
    ] {
        let text = format!(
            "table ip t {{\n\tchain c {{\n\t\ttype nat hook {chain} priority -100; policy accept;\n\t\t{rule}\n\t}}\n}}\n"
        );
        let rs = parse_str(&text, "x.nft").unwrap_or_else(|e| panic!("{rule}: {e}"));
        let out = print_ruleset(&rs, false);
        let want = format!("\t\t{}\n", listed.unwrap_or(rule));
        assert!(out.contains(&want), "{rule}:\n{out}");
    }
}

/// Malformed computed values: file:line:col and what was expected.
#[test]
fn computed_values_errors() {
    for (rule, at, what) in [
        ("ct mark set numgen", "4:21", "expected `inc` or `random`"),
        ("ct mark set numgen inc 2", "4:26", "expected `mod`"),
        (
            "ct mark set numgen inc mod 0",
            "4:30",
            "the modulus must be at least 1",
        ),
        (
            "ct mark set numgen inc mod 2 offset 4294967295",
            "4:39",
            "beyond 32 bits",
        ),
        ("ct mark set jhash mod 2", "4:21", "the expression to hash"),
        (
            "ct mark set jhash ip saddr mod x",
            "4:34",
            "expected a number (modulus)",
        ),
        ("ct mark set symhash mod", "4:26", "a number (modulus)"),
        (
            "ct mark set meta mark << meta mark",
            "4:28",
            "expected a constant after `<<`",
        ),
        ("ct mark set (meta mark | 1", "4:29", "expected `)`"),
        ("ct event set foo", "4:16", "expected a ct event"),
        ("ct label set 128", "4:16", "ct label out of range"),
        ("ct event new", "4:3", "can only be set"),
        ("snat prefix to 1.2.3.4", "4:8", "`prefix` needs a map"),
        (
            "snat ip to ip saddr map { 1.1.1.1 : 2.2.2.2 . 80 }",
            "4:29",
            "transport protocol mapping",
        ),
    ] {
        let text = format!(
            "table ip t {{\n\tchain c {{\n\t\ttype nat hook postrouting priority 100;\n\t\t{rule}\n\t}}\n}}\n"
        );
        let e = parse_str(&text, "x.nft").unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("x.nft:{at}: error: ")) && e.contains(what),
            "{rule}: {e}"
        );
    }
}

/// A NAT statement reached from a base chain only through a later jump is checked when the
/// jump is added (the kernel validates the table at each rule of the replayed batch).
#[test]
fn nat_reached_later_is_refused_at_the_jump() {
    let text = "table ip t {\n\tchain r {\n\t\tsnat to 1.1.1.1\n\t}\n\tchain c {\n\t\ttype filter hook forward priority 0;\n\t\tjump r\n\t}\n}\n";
    let e = parse_str(text, "j.nft").unwrap_err().to_string();
    assert!(e.starts_with("j.nft:7:3: error: `snat`"), "{e}");
    // Not reached from any base chain: accepted (nft -f accepts it too).
    let text = "table ip t {\n\tchain r {\n\t\tsnat to 1.1.1.1\n\t}\n\tchain c {\n\t\ttype filter hook forward priority 0;\n\t}\n}\n";
    let rs = parse_str(text, "j.nft").unwrap();
    // A later batch that jumps there from the forward chain is refused at its rule.
    let e = apply_batch(&rs, "add rule ip t c ip saddr 1.1.1.1 jump r\n", "b.nft")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("b.nft:1:17: error: `snat`"), "{e}");
    // So is a jump added to a verdict map the forward chain looks up (nft -f: "Could not
    // process rule: Operation not supported" at `add`).
    let rs = apply_batch(
        &rs,
        "add map ip t m { type ipv4_addr : verdict; }\nadd rule ip t c ip daddr vmap @m\n",
        "b.nft",
    )
    .unwrap();
    let e = apply_batch(&rs, "add element ip t m { 1.1.1.1 : jump r }\n", "b.nft")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("b.nft:1:1: error: `snat`"), "{e}");
    assert!(matches!(
        &rs.tables[0].chains[0].rules[0].stmts[0],
        Stmt::Nat(n) if n.kind == NatKind::Snat && n.family.is_none()
    ));
}

const FLOWTABLES: &str = "table inet t {
	flowtable ft {
		hook ingress priority filter + 5; devices = { eth0, \"eth1\" };
		counter
	}
	flowtable f2 {
		hook ingress priority -10
		devices = { lo }
	}
	chain c {
		type filter hook forward priority filter; policy accept;
		ct state established flow add @ft
		meta l4proto udp flow offload @f2 counter accept
	}
}
";

/// What nft 1.0.6 would list (flowtables after sets, before chains; devices unquoted;
/// `flow offload` listed as `flow add`), from its `src/rule.c` and `src/statement.c`.
const FLOWTABLES_LISTED: &str = "table inet t { # handle 1
	flowtable ft { # handle 2
		hook ingress priority filter + 5
		devices = { eth0, eth1 }
		counter
	}

	flowtable f2 { # handle 3
		hook ingress priority filter - 10
		devices = { lo }
	}

	chain c { # handle 1
		type filter hook forward priority filter; policy accept;
		ct state established flow add @ft # handle 4
		meta l4proto udp flow add @f2 counter packets 0 bytes 0 accept # handle 5
	}
}
";

#[test]
fn flowtables_print_and_read_back() {
    let rs = parse_str(FLOWTABLES, "f.nft").unwrap();
    let listed = print_ruleset(&rs, true);
    assert_eq!(listed, FLOWTABLES_LISTED);
    let ft = &rs.tables[0].flowtables[0];
    assert_eq!((ft.priority, ft.counter, ft.devices.len()), (5, true, 2));
    let again = parse_str(&print_ruleset(&rs, false), "again.nft").unwrap();
    assert_eq!(print_ruleset(&again, true), listed);
    // `add flowtable` adds devices to an existing one; `delete flowtable` of a used one fails.
    let more = apply_batch(
        &rs,
        "add flowtable inet t f2 { devices = { eth9 }; }\nadd flowtable inet t f3 { hook ingress priority 0; }\n",
        "b.nft",
    )
    .unwrap();
    let t = &more.tables[0];
    assert_eq!(t.flowtables[1].devices, ["lo", "eth9"]);
    assert_eq!(
        (t.flowtables[2].name.as_str(), t.flowtables[2].handle),
        ("f3", 6)
    );
    let e = apply_batch(&more, "delete flowtable inet t ft\n", "d.nft")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("d.nft:1:25: error: cannot delete flowtable `ft`"),
        "{e}"
    );
    let less = apply_batch(&more, "delete flowtable inet t f3\n", "d.nft").unwrap();
    assert_eq!(less.tables[0].flowtables.len(), 2);
}

/// The ruleset of nftables' tests/shell flowtable case (devices that need not exist, `and`
/// for `&`): read, and listed as nft lists it.
#[test]
fn nftables_flowtable_example() {
    let text = "table inet filter {\n\tflowtable ftable {\n\t\thook ingress priority 0; devices = { eno1, eno0, x };\n\t}\n\n\tchain forward {\n\t\ttype filter hook forward priority 0; policy drop;\n\n\t\tip protocol { tcp, udp } ct mark and 1 == 1 counter flow add @ftable\n\t\tip6 nexthdr { tcp, udp } ct mark and 2 == 2 counter flow add @ftable\n\t\tct mark and 30 == 30 ct state established,related log prefix \"nftables accept: \" level info accept\n\t}\n}\n";
    let listed = print_ruleset(&parse_str(text, "x.nft").unwrap(), false);
    for line in [
        "\t\tdevices = { eno1, eno0, x }\n",
        "\t\tip protocol { tcp, udp } ct mark & 0x00000001 == 0x00000001 counter packets 0 bytes 0 flow add @ftable\n",
        "\t\tct mark & 0x0000001e == 0x0000001e ct state established,related log prefix \"nftables accept: \" level info accept\n",
    ] {
        assert!(listed.contains(line), "{line:?} not in\n{listed}");
    }
}

#[test]
fn flowtable_refusals() {
    let cases: &[(&str, &str)] = &[
        // The kernel: ENOENT for the rule (nft: "Could not process rule: No such file or
        // directory" at the statement).
        (
            "table inet t {\n\tchain c {\n\t\ttype filter hook forward priority 0;\n\t\tflow add @nope\n\t}\n}\n",
            "e.nft:4:3: error: unknown flowtable `@nope`",
        ),
        // nft: "syntax error, unexpected string, expecting @".
        (
            "table inet t {\n\tflowtable ft {\n\t\thook ingress priority 0;\n\t}\n\tchain c {\n\t\tflow add ft\n\t}\n}\n",
            "e.nft:6:12: error: expected `@` and a flowtable name",
        ),
        // The kernel's nft_flow_offload_validate: forward only (EOPNOTSUPP).
        (
            "table inet t {\n\tflowtable ft {\n\t\thook ingress priority 0;\n\t}\n\tchain c {\n\t\ttype filter hook input priority 0;\n\t\tflow add @ft\n\t}\n}\n",
            "e.nft:7:3: error: `flow add` runs at the forward hook only",
        ),
        // nft 1.0.6: "invalid hook input" at the name.
        (
            "table inet t {\n\tflowtable ft {\n\t\thook input priority 0;\n\t}\n}\n",
            "e.nft:2:12: error: invalid hook input",
        ),
        // nft 1.0.6: "invalid priority expression value." at `priority raw`.
        (
            "table inet t {\n\tflowtable ft {\n\t\thook ingress priority raw; devices = { lo };\n\t}\n}\n",
            "e.nft:3:16: error: invalid priority expression value.",
        ),
        // nft 1.0.6: "syntax error, unexpected semicolon, expecting priority".
        (
            "table inet t {\n\tflowtable ft {\n\t\thook ingress; devices = { lo };\n\t}\n}\n",
            "e.nft:3:15: error: expected `priority`",
        ),
        (
            "table inet t {\n\tflowtable ft {\n\t\tdevices = { lo };\n\t}\n}\n",
            "e.nft:2:12: error: missing hook and priority in flowtable declaration",
        ),
        (
            "table inet t {\n\tflowtable ft {\n\t\thook egress priority 0;\n\t}\n}\n",
            "e.nft:2:12: error: a flowtable hooks at ingress only",
        ),
        (
            "table netdev t {\n\tflowtable ft {\n\t\thook ingress priority 0;\n\t}\n}\n",
            "e.nft:2:12: error: flowtables exist in ip, ip6 and inet tables only",
        ),
    ];
    for (text, want) in cases {
        let e = match parse_str(text, "e.nft") {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e.to_string(),
        };
        assert!(e.starts_with(want), "want {want}\ngot {e}");
    }
}

/// Every form reads back to the same listing (the printer's output is valid input).
#[test]
fn conntrack_and_nat_round_trip() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/cases/conntrack_nat.nft"
    ))
    .unwrap();
    let rs = parse_str(&text, "c.nft").unwrap();
    let listed = print_ruleset(&rs, false);
    let again = parse_str(&listed, "again.nft").unwrap();
    assert_eq!(print_ruleset(&again, false), listed);
    for line in [
        "\t\toifname \"eth5\" snat ip to 10.0.0.1/32 persistent\n",
        "\t\toifname \"eth8\" tcp dport 2 snat ip6 to [fe80::1]-[fe80::5]:80-80\n",
        "\t\tct state established,0x10 ct state 0x0\n",
        "\t\tct state . ct mark { new . 0x00000001, established . 0x00000002 } accept\n",
        "\t\ttcp dport 22 snat to 1.1.1.2:2222\n",
    ] {
        assert!(listed.contains(line), "{line:?} not in\n{listed}");
    }
}
