//! Every error names file:line:col, shows the line and says what was expected. One row per
//! error case: (ruleset, line, column, text the message must contain).

use wasp_ruleset::error::Error;

const HDR: &str = "table netdev t {\n\tchain c {\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n";

fn rule_case(rule: &str) -> String {
    format!("{HDR}\t\t{rule}\n\t}}\n}}\n")
}

fn check(text: &str, line: u32, col: u32, needle: &str) {
    match wasp_ruleset::parse_str(text, "case.nft") {
        Ok(_) => panic!("accepted, expected an error containing {needle:?}:\n{text}"),
        Err(Error::At(l)) => {
            assert_eq!(
                (l.line, l.col),
                (line, col),
                "position of {:?} (message {:?})",
                needle,
                l.message
            );
            assert!(
                l.message.contains(needle),
                "message {:?} does not contain {:?}",
                l.message,
                needle
            );
            let shown = Error::At(l.clone()).to_string();
            assert!(
                shown.starts_with(&format!("case.nft:{line}:{col}: error: ")),
                "{shown}"
            );
            if l.line_text.len() < 100 && !l.line_text.contains(|c: char| c.is_control()) {
                assert!(shown.contains(&l.line_text), "{shown}");
            }
        }
        Err(e) => panic!("unexpected error kind: {e}"),
    }
}

#[test]
fn rule_errors() {
    // (rule text on line 4 at column 3, column of the error in the rule, message part)
    let cases: &[(&str, u32, &str)] = &[
        (
            "tcp dport 22 acept",
            14,
            "expected a verdict, `counter`, `log` or a match, found `acept`",
        ),
        (
            "tcp dport htps accept",
            11,
            "expected a port number or service name, found `htps`",
        ),
        (
            "tcp dprt 22 accept",
            5,
            "expected a `tcp` field: `sport`, `dport`, `sequence`, `ackseq`, `doff`, `reserved`, `flags`, `window`, `checksum` or `urgptr`, found `dprt`",
        ),
        ("vlan id 4096 accept", 9, "exceeds valid range 0-4095"),
        ("ip dscp 64 accept", 9, "exceeds valid range 0-63"),
        (
            "ip saddr 10.0.0.300 accept",
            10,
            "expected an IPv4 address, found `10.0.0.300`",
        ),
        (
            "ip6 saddr 2001:db8::g accept",
            11,
            "expected an IPv6 address",
        ),
        (
            "ether saddr 00:11:22:33:44 accept",
            13,
            "expected a MAC address",
        ),
        (
            "ip saddr 10.0.0.0/33 accept",
            10,
            "prefix length of 0 to 32",
        ),
        (
            "ip saddr 10.0.0.5-10.0.0.1 accept",
            10,
            "Range has zero or negative size",
        ),
        (
            "iifname \"0123456789abcdef\" accept",
            9,
            "at most 15 characters",
        ),
        (
            "icmp type echo-reqest accept",
            11,
            "expected an icmp type name or number",
        ),
        ("meta len 5 accept", 6, "expected a meta key"),
        (
            "meta nfproto ipv4 accept",
            1,
            "meta nfproto is only useful in the inet family",
        ),
        (
            "icmp type 8 tcp dport 2 accept",
            13,
            "conflicting protocols specified: icmp vs. tcp",
        ),
        (
            "ip saddr . tcp dport 10.0.0.1 . 22 accept",
            1,
            "Use concatenations with sets and maps",
        ),
        ("ip saddr @nope drop", 10, "unknown set `@nope`"),
        ("jump nowhere", 6, "unknown chain `nowhere`"),
        ("jump c", 6, "cannot jump or go to base chain `c`"),
        (
            "ip saddr { 1.1.1.1, 2.2.2.2 accept",
            29,
            "expected `,` or `}`",
        ),
        ("tcp dport 22 accept }", 0, ""),
        ("log level loud", 11, "expected a log level"),
        (
            "ip saddr $undefined accept",
            10,
            "unknown variable `$undefined`",
        ),
        (
            "secmark",
            1,
            "`secmark` is nftables syntax that wasp does not support yet",
        ),
        // What nft refuses although it reads (checked with `nft -c -f`).
        (
            "tcp dport 22 accept accept",
            21,
            "Statement after terminal statement has no effect (`accept` ends the rule)",
        ),
        (
            "drop log",
            6,
            "Statement after terminal statement has no effect",
        ),
        (
            "return comment \"x\" counter",
            20,
            "after terminal statement",
        ),
        (
            "tcp dport { } accept",
            13,
            "expected a set element (nft has no empty `{ }`), found `}`",
        ),
        (
            "ip saddr { 1.1.1.1, { } } drop",
            23,
            "expected a set element",
        ),
        // Valid nft that wasp does not read yet: a message of its own, not a syntax error.
        (
            "ct secmark set 1 accept",
            1,
            "`ct secmark` is nftables syntax that wasp does not support yet",
        ),
        (
            "ct original proto-src 53 accept",
            13,
            "`ct original proto-src` needs the protocol first",
        ),
        // nft 1.0.6 + kernel: "Could not process rule: Protocol error" (no conntrack in netdev).
        (
            "ct state established accept",
            1,
            "`ct` needs connection tracking, which the kernel has for ip, ip6 and inet tables only",
        ),
        (
            "meta ibrname \"br0\" accept",
            1,
            "`meta ibrname` is nftables syntax",
        ),
        // `limit` and `quota` as nft 1.0.6 and the kernel refuse them.
        (
            "limit rate 10/fortnight accept",
            12,
            "expected a time unit (`second`, `minute`, `hour`, `day`, `week`), found `fortnight`",
        ),
        (
            "limit 5/second",
            7,
            "expected `rate` or `name` after `limit`",
        ),
        (
            "limit rate 10/second burst 0 packets",
            22,
            "packet limit burst must be > 0",
        ),
        (
            "limit rate 1023/second burst 10 bytes",
            33,
            "expected `packets`, found `bytes` (a packet rate has a burst in packets)",
        ),
        (
            "limit rate 512 kbytes/second burst 5 packets",
            38,
            "expected `bytes`, `kbytes` or `mbytes`, found `packets`",
        ),
        (
            "limit rate 1 gbytes/second",
            12,
            "found `gbytes` (nft: Wrong rate format)",
        ),
        (
            "limit rate 0/second",
            1,
            "a limit rate of 0 is refused by the kernel (nft: Could not process rule: Invalid argument)",
        ),
        (
            "limit rate 10230 mbytes/day",
            1,
            "(nft: Could not process rule: Value too large for defined data type)",
        ),
        ("limit name", 11, "expected a limit name, found end of line"),
        (
            "counter name tcp dport accept",
            24,
            "expected `map` after `counter name tcp dport`, found `accept`",
        ),
        (
            "limit name tcp dport map @m",
            26,
            "`@map` (a named map of objects) is nftables syntax that wasp does not support yet",
        ),
        ("limit rate x/second", 12, "expected a number, found `x`"),
        (
            "quota 10 gbytes drop",
            7,
            "expected `bytes`, `kbytes` or `mbytes`, found `gbytes` (nft: Wrong rate format)",
        ),
        (
            "quota over",
            11,
            "expected a number of bytes, found end of line",
        ),
        (
            "quota 5 bytes used 5 kbytes",
            1,
            "the quota's used bytes (5120) exceed the quota (5 bytes) (nft: Could not process rule: Invalid argument)",
        ),
        (
            "quota 9223372036854775808 bytes",
            1,
            "(nft: Could not process rule: Value too large for defined data type)",
        ),
        (
            "quota 5 bytes accept counter",
            22,
            "Statement after terminal statement has no effect",
        ),
        // `reject` as nft 1.0.6 and the kernel refuse it.
        (
            "tcp dport 22 reject with icmpx 4",
            14,
            "the kernel takes icmpx codes 0 to 3 (nft: Could not process rule: Invalid argument)",
        ),
        (
            "reject with icmp foo",
            18,
            "expected an icmp code name or number, found `foo` (nft: Could not parse icmp code)",
        ),
        (
            "meta l4proto udp reject with tcp reset",
            18,
            "you cannot use tcp reset with this protocol",
        ),
        (
            "meta protocol ip6 reject with icmp host-unreachable",
            36,
            "conflicting protocols specified: ip vs ip6",
        ),
        (
            "reject with",
            12,
            "expected `icmp`, `icmpv6`, `icmpx` or `tcp reset` after `with`, found end of line",
        ),
        ("reject with tcp", 16, "expected `reset`, found end of line"),
        ("reject with icmp 200", 1, "missing icmp error type"),
        (
            "reject drop",
            8,
            "Statement after terminal statement has no effect (`reject` ends the rule)",
        ),
        (
            "@nh,0,0 0x45 accept",
            7,
            "expected a raw payload length of 1 to 128 bits",
        ),
        ("@th,16,1 2 drop", 10, "value 2 exceeds valid range 0-1"),
        (
            "tcp option mss exists drop",
            12,
            "expected a tcp option (`maxseg`, `window`",
        ),
        (
            "tcp option sack window 1 drop",
            17,
            "expected `exists` or `missing`, found `window`",
        ),
        ("sctp chunk foo exists drop", 12, "expected an sctp chunk"),
        ("reset tcp option meh", 18, "expected a tcp option"),
        (
            "reset tcp opton maxseg",
            11,
            "expected `option`, found `opton`",
        ),
        (
            "reset tcp option maxseg size",
            18,
            "takes an option only (`reset tcp option sack-perm`)",
        ),
        (
            "tcp option window count set 2",
            1,
            "only 2- and 4-byte fields of a TCP option can be set",
        ),
        (
            "tcp option maxseg size set 70000",
            28,
            "exceeds valid range",
        ),
        (
            "ip option rr exists drop",
            1,
            "`ip option` is nftables syntax",
        ),
        (
            "meta pkttype broadcastttt drop",
            14,
            "expected a packet type (host, unicast, broadcast, multicast, other), found `broadcastttt`",
        ),
        (
            "meta hour \"24:00\" drop",
            11,
            "expected an hour of the day",
        ),
        ("meta day 7 drop", 10, "Day must be in range 0-6"),
        ("queue num 2", 1, "`queue` has no meaning in wasp"),
        (
            "meta ibrname \"br0\" accept",
            1,
            "`meta ibrname` is nftables syntax",
        ),
        ("ip ttl set 256", 12, "value 256 exceeds valid range 0-255"),
        ("ip ttl set foo", 12, "expected a number, found `foo`"),
        (
            "log group 1 level info accept",
            1,
            "level and group are mutually exclusive",
        ),
        (
            "log flags tcp window accept",
            15,
            "expected `sequence` or `options` after `tcp`, found `window`",
        ),
        (
            "ip saddr 1.1.1.1 secmark",
            18,
            "`secmark` is nftables syntax",
        ),
        // nft 1.0.6: "NAT is only supported for IPv4/IPv6" at the statement.
        (
            "ip saddr 1.1.1.1 masquerade",
            18,
            "NAT is only supported for IPv4/IPv6",
        ),
        (
            "ip dprt 1.1.1.1",
            4,
            "expected an `ip` field: `version`, `hdrlength`, `dscp`, `ecn`, `length`, `id`, `frag-off`, `ttl`, `protocol`, `checksum`, `saddr` or `daddr`",
        ),
        ("tcp dport { 22 . 80 } accept", 16, "the end of the key"),
        (
            "meta ipsec maybe",
            12,
            "expected `exists` or `missing`, found `maybe`",
        ),
        (
            "meta secpath 2",
            14,
            "expected `exists` or `missing`, found `2`",
        ),
        (
            "exthdr hbh 2",
            12,
            "expected `exists` or `missing`, found `2`",
        ),
        ("counter bytes x", 15, "expected a number, found `x`"),
        ("counter packets", 16, "expected a number"),
        // `srh sid[N]`: nft 1.0.6 knows entries 1 and 2.
        (
            "srh sid 1",
            9,
            "expected `[` and an index: `sid[1]` or `sid[2]`, found `1`",
        ),
        (
            "srh sid[3] dead::beef",
            9,
            "expected an index of `sid[1]` or `sid[2]`, found `3`",
        ),
        ("srh sid[1 dead::beef", 11, "expected `]`"),
        (
            "srh last dead::beef",
            5,
            "expected a `srh` field: `last-entry`, `flags`, `tag`, `sid[1]` or `sid[2]`",
        ),
    ];
    for (rule, col, needle) in cases {
        if needle.is_empty() {
            // `}` right after a rule needs a separator first, as nft requires.
            check(&rule_case(rule), 4, 23, "expected a newline or `;`");
            continue;
        }
        check(&rule_case(rule), 4, 2 + col, needle);
    }
}

#[test]
fn fib_and_rt_errors() {
    let case = |family: &str, hook: &str, rule: &str| {
        format!(
            "table {family} t {{\n\tchain c {{\n\t\ttype filter hook {hook} priority 0;\n\t\t{rule}\n\t}}\n}}\n"
        )
    };
    // (family, hook, rule on line 4 at column 3, column of the error in the rule, message part)
    let cases: &[(&str, &str, &str, u32, &str)] = &[
        (
            "ip",
            "prerouting",
            "fib saddr . daddr oif \"lo\"",
            5,
            "fib: saddr and daddr are mutually exclusive",
        ),
        (
            "ip",
            "prerouting",
            "fib iif . oif . daddr oif \"lo\"",
            5,
            "fib: iif and oif are mutually exclusive",
        ),
        (
            "ip",
            "prerouting",
            "fib mark oif \"lo\"",
            5,
            "fib: need either saddr or daddr",
        ),
        (
            "ip",
            "prerouting",
            "fib daddr",
            10,
            "expected `oif`, `oifname` or `type`",
        ),
        (
            "ip",
            "prerouting",
            "fib oifname",
            5,
            "expected `saddr`, `daddr`, `mark`, `iif` or `oif`, found `oifname`",
        ),
        (
            "ip",
            "prerouting",
            "fib daddr . oif oif 1",
            1,
            "`fib ... oif` gives a `type` only",
        ),
        (
            "ip",
            "prerouting",
            "fib daddr type exists",
            1,
            "`exists` and `missing` take `fib ... oif`",
        ),
        (
            "ip",
            "prerouting",
            "fib daddr type lokal",
            16,
            "expected an address type",
        ),
        (
            "ip",
            "output",
            "fib saddr . iif oif 0",
            1,
            "`fib saddr . iif oif` does not run at the output hook",
        ),
        (
            "ip",
            "prerouting",
            "fib daddr . oif type local",
            1,
            "does not run at the prerouting hook",
        ),
        (
            "bridge",
            "prerouting",
            "fib daddr type local",
            1,
            "`fib` works in ip, ip6, inet and netdev tables only",
        ),
        (
            "ip",
            "output",
            "rt nexthop fd00::1",
            12,
            "expected an IPv4 address",
        ),
        (
            "ip",
            "output",
            "rt ip6 nexthop fd00::1",
            1,
            "ip6 nexthop will not match",
        ),
        (
            "inet",
            "output",
            "rt nexthop 192.168.0.1",
            1,
            "cannot determine ip protocol version",
        ),
        ("ip", "output", "rt hop 1", 4, "expected a `rt` field"),
        (
            "ip",
            "output",
            "rt ip mtux 1",
            7,
            "expected an `rt` key: `classid`, `nexthop`, `mtu` or `ipsec`",
        ),
        (
            "ip",
            "input",
            "rt mtu 1400",
            1,
            "`rt mtu` does not run at the input hook",
        ),
        (
            "netdev",
            "ingress device \"lo\"",
            "rt mtu 1400",
            1,
            "`rt` works in ip, ip6 and inet tables only",
        ),
    ];
    for &(family, hook, rule, col, needle) in cases {
        check(&case(family, hook, rule), 4, col + 2, needle);
    }
}

#[test]
fn declaration_errors() {
    let cases: &[(&str, u32, u32, &str)] = &[
        (
            "tabel netdev t {\n}\n",
            1,
            1,
            "expected `table`, `define`, `include`, `add`, `flush` or `delete`, found `tabel`",
        ),
        (
            "table netdev t {\n\tchain c {\n\t\ttype filter hook ingress priority 0;\n\t}\n}\n",
            3,
            3,
            "Missing `device' in this chain definition",
        ),
        (
            // nft 1.0.6 points at `priority` (3:40-51).
            "table netdev t {\n\tchain c {\n\t\ttype filter hook ingress device eth0 priority raw;\n\t}\n}\n",
            3,
            40,
            "invalid priority expression value in this context",
        ),
        (
            // nft 1.0.6 points at `priority` (3:26-40).
            "table inet t {\n\tchain c {\n\t\ttype filter hook input priority dstnat;\n\t}\n}\n",
            3,
            26,
            "invalid priority expression value in this context",
        ),
        (
            "table netdev t {\n\tchain c {\n\t\ttype filter hook input device eth0 priority 0;\n\t}\n}\n",
            3,
            20,
            "hook `input` is not valid in the netdev family",
        ),
        (
            "table ip t {\n\tset s { type ipv4_addr; elements = { 10.0.0.0/8 } }\n}\n",
            2,
            39,
            "You must add 'flags interval' to your set declaration if you want to add prefix elements",
        ),
        (
            "table ip t {\n\tset s { type ipv4_addr; elements = { 1.1.1.1-1.1.1.5 } }\n}\n",
            2,
            39,
            "if you want to add range elements",
        ),
        (
            "table ip t {\n\tset s { type ipv4_addr; }\n\tchain c {\n\t\ttcp dport @s accept\n\t}\n}\n",
            4,
            13,
            "datatype mismatch: set `s` has type ipv4_addr, expression `tcp dport` has type inet_service",
        ),
        (
            "table ip t {\n\tset s { type ipv4_adr; }\n}\n",
            2,
            15,
            "expected a data type such as `ipv4_addr`, found `ipv4_adr`",
        ),
        (
            "table ip t {\n\tset s { type ipv4_addr; flags intervall; }\n}\n",
            2,
            32,
            "expected a set flag",
        ),
        (
            "table ip t {\n\tset s { type ipv4_addr; }\n\tset s { type inet_service; }\n}\n",
            3,
            2,
            "set `s` is already declared with a different type",
        ),
        (
            "table ip t {\n\tchain c { type filter hook input priority 0; }\n}\ntable ip t {\n\tchain c { type filter hook output priority 0; }\n}\n",
            5,
            12,
            "chain `c` is already declared with a different hook",
        ),
        (
            "add rule ip nope c accept\n",
            1,
            13,
            "unknown table `ip nope`",
        ),
        (
            "table ip t {\n\tchain c {\n\t}\n}\nadd rule ip t d accept\n",
            5,
            15,
            "unknown chain `d`",
        ),
        (
            "table ip t {\n\tchain c {\n\t\tip saddr \"oops\n",
            3,
            12,
            "unterminated string",
        ),
        (
            "table ip t {\n\tchain c {\n",
            2,
            11,
            "expected a rule or `}`, found end of file",
        ),
        (
            "table ip t { chain c { accept; } }\n",
            1,
            34,
            "expected a newline or `;`",
        ),
        ("include \"/nonexistent/x.nft\"\n", 1, 9, "cannot include"),
        (
            "define x = 1\ndefine x = 2\n",
            2,
            8,
            "redefinition of symbol 'x'",
        ),
        ("define e = { }\n", 1, 14, "expected a set element"),
        (
            "table ip t {\n\tset s { type ipv4_addr; elements = { } }\n}\n",
            2,
            39,
            "expected a set element",
        ),
        (
            "table inet t {\n\tquota q {\n\t}\n}\n",
            2,
            10,
            "expected a quota (`N bytes`) in the object's block",
        ),
        (
            "table ip t {\n\tlimit l { rate 5/second; rate 6/second }\n}\n",
            2,
            27,
            "expected `comment` or `}`, found `rate`",
        ),
        (
            "add table ip t\nadd quota ip t q 5 bytes used 6 bytes\n",
            2,
            18,
            "the quota's used bytes (6) exceed the quota (5 bytes)",
        ),
        (
            "add table ip t\nadd limit ip t l rate over 5 mbytes\n",
            2,
            36,
            "expected `/` and a time unit, found end of line",
        ),
        (
            "table ip t {\n\tchain c {\n\t\ttype filter hook output priority 0;\n\t\treject with icmpx 3\n\t}\n}\n",
            4,
            21,
            "abstracted ICMP unreachable not supported (`icmpx` is for inet and netdev tables; an ip table replies with `icmp`)",
        ),
        (
            "table ip6 t {\n\tchain c {\n\t\ttype filter hook output priority 0;\n\t\treject with icmp 3\n\t}\n}\n",
            4,
            20,
            "conflicting protocols specified: ip vs ip6",
        ),
        (
            "table inet t {\n\tchain c {\n\t\tmeta nfproto ipv6 ip saddr 1.1.1.1 accept\n\t}\n}\n",
            3,
            21,
            "conflicting protocols specified: ip6 vs. ip",
        ),
        (
            "table arp t {\n\tchain c {\n\t\ttype filter hook input priority 0;\n\t\treject\n\t}\n}\n",
            4,
            3,
            "cannot use reject with arp",
        ),
        (
            "table ip t {\n\tchain c {\n\t\ttype filter hook postrouting priority 0;\n\t\treject\n\t}\n}\n",
            4,
            3,
            "`reject` runs at the prerouting, input, forward and output hooks (and ingress in inet and netdev tables) only, and chain `c` is at postrouting (nft: Could not process rule: Operation not supported)",
        ),
        (
            "add table ip t\nadd ct helper ip t h { type \"ftp\" protocol sctp; }\n",
            2,
            44,
            "expected `tcp` or `udp`, found `sctp`",
        ),
        (
            "add table ip t\nadd synproxy ip t s mss 1460 wscale 7\n",
            2,
            5,
            "`add synproxy` (a named object) is nftables syntax that wasp does not support yet",
        ),
        (
            "table ip t {\n\tct helper h {\n\t}\n}\n",
            2,
            12,
            "expected `type \"NAME\" protocol tcp|udp` in the helper's block",
        ),
        (
            "table ip t {\n\tchain c {\n\t}\n}\nlist ruleset\n",
            5,
            1,
            "`list` is nftables syntax that wasp does not support yet",
        ),
    ];
    for (text, line, col, needle) in cases {
        check(text, *line, *col, needle);
    }
}

#[test]
fn include_loops_are_refused() {
    let dir = std::env::temp_dir().join(format!("wasp-ruleset-inc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.nft"), "include \"b.nft\"\n").unwrap();
    std::fs::write(dir.join("b.nft"), "\ninclude \"a.nft\"\n").unwrap();
    let err = wasp_ruleset::parse_file(&dir.join("a.nft")).unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    let Error::At(l) = err else { panic!("{err}") };
    assert_eq!((l.line, l.col), (2, 9));
    assert!(l.path.ends_with("b.nft"), "{}", l.path.display());
    assert!(l.message.contains("include loop"), "{}", l.message);
}

#[test]
fn missing_file_is_an_io_error() {
    let err = wasp_ruleset::parse_file(std::path::Path::new("/nonexistent/rules.nft")).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
}

#[test]
fn nesting_limits() {
    // 64 levels of `{` are read; the 65th `{` (column 10 + 2 * 64 in the rule) is refused,
    // also from far deeper input that would otherwise exhaust the stack.
    for n in [64usize, 65, 20_000] {
        let rule = format!("ip saddr {}1.1.1.1{} drop", "{ ".repeat(n), " }".repeat(n));
        if n == 64 {
            wasp_ruleset::parse_str(&rule_case(&rule), "case.nft").unwrap();
        } else {
            check(
                &rule_case(&rule),
                4,
                2 + 10 + 2 * 64,
                "sets nest too deeply, max 64",
            );
        }
    }
    // The same through a variable: the error points into the define.
    let text = format!(
        "define x = {}1.1.1.1{}\n{}",
        "{ ".repeat(20_000),
        " }".repeat(20_000),
        rule_case("ip saddr $x drop")
    );
    check(&text, 1, 12 + 2 * 64, "sets nest too deeply");
    // 64 bitwise operations are read, the 65th is refused (each wraps the expression again).
    let ops = |n: usize| format!("meta mark{} 1 drop", " & 0xff".repeat(n));
    wasp_ruleset::parse_str(&rule_case(&ops(64)), "case.nft").unwrap();
    check(
        &rule_case(&ops(100_000)),
        4,
        2 + 10 + 7 * 64 + 1,
        "too many bitwise operations in one expression, max 64",
    );
}

#[test]
fn defines_that_double_at_each_level_are_refused() {
    // v1 = { v0, v0 }, v2 = { v1, v1 }, ...: 2^40 tokens if expanded.
    let mut text = String::from("define v0 = 1.1.1.1\n");
    for i in 1..=40 {
        text.push_str(&format!("define v{i} = {{ $v{j}, $v{j} }}\n", j = i - 1));
    }
    let err = wasp_ruleset::parse_str(&text, "case.nft").unwrap_err();
    let Error::At(l) = err else { panic!("{err}") };
    assert!(l.message.contains("expands without end"), "{}", l.message);
    assert!(l.line < 40, "line {}", l.line);
}

#[test]
fn include_depth_is_limited_as_in_nft() {
    // nft 1.0.6: the 16th file in a chain may not include a 17th ("Include nested too
    // deeply, max 16 levels", at the include in the 16th file).
    let dir = std::env::temp_dir().join(format!("wasp-ruleset-incdepth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..3000 {
        std::fs::write(
            dir.join(format!("f{i}.nft")),
            format!("\ninclude \"f{}.nft\"\n", i + 1),
        )
        .unwrap();
    }
    std::fs::write(dir.join("f3000.nft"), "table ip t {\n}\n").unwrap();
    // 16 files (f0 .. f15, f15 holding a table) are fine.
    std::fs::write(dir.join("g15.nft"), "table ip t {\n}\n").unwrap();
    for i in 0..15 {
        std::fs::write(
            dir.join(format!("g{i}.nft")),
            format!("include \"g{}.nft\"\n", i + 1),
        )
        .unwrap();
    }
    let ok = wasp_ruleset::parse_file(&dir.join("g0.nft"));
    let err = wasp_ruleset::parse_file(&dir.join("f0.nft")).unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(ok.unwrap().tables.len(), 1);
    let Error::At(l) = err else { panic!("{err}") };
    assert!(l.path.ends_with("f15.nft"), "{}", l.path.display());
    assert_eq!((l.line, l.col), (2, 9));
    assert_eq!(l.message, "Include nested too deeply, max 16 levels");
}

#[test]
fn bytes_that_are_not_utf8() {
    // Fine in a comment (nft accepts any byte there).
    let text = b"# caf\xe9 \xff\xfe\ntable netdev t {\n}\n";
    assert_eq!(
        wasp_ruleset::parse_bytes(text, "case.nft").unwrap().tables[0].name,
        "t"
    );
    // In a string or elsewhere: an error at the byte.
    let cases: &[(&[u8], u32, u32, &str)] = &[
        (
            b"table netdev t {\n\tcomment \"caf\xe9\"\n}\n",
            2,
            14,
            "byte 0xE9 in a string is not UTF-8",
        ),
        (
            b"table netdev t {\n\tchain \xc3\x28 {\n\t}\n}\n",
            2,
            8,
            "byte 0xC3 is not UTF-8",
        ),
    ];
    for (bytes, line, col, needle) in cases {
        let Err(Error::At(l)) = wasp_ruleset::parse_bytes(bytes, "case.nft") else {
            panic!("accepted {}", String::from_utf8_lossy(bytes));
        };
        assert_eq!((l.line, l.col), (*line, *col), "{}", l.message);
        assert!(l.message.contains(needle), "{}", l.message);
    }
    // Through parse_file too (it read the file as UTF-8 text and failed with no place).
    let dir = std::env::temp_dir().join(format!("wasp-ruleset-utf8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("c.nft"), text).unwrap();
    let r = wasp_ruleset::parse_file(&dir.join("c.nft"));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(r.unwrap().tables.len(), 1);
}

#[test]
fn what_nft_refuses_beside_errors() {
    // `continue` is not terminal, `accept comment` has no statement after the verdict, and
    // `redefine`/`undefine` may give a variable a new value (all accepted by nft -c).
    let text = format!(
        "define x = 22\nredefine x = 23\nundefine x\ndefine x = 24\n{}",
        rule_case("tcp dport $x continue counter accept comment \"x\"")
    );
    let r = wasp_ruleset::parse_str(&text, "case.nft").unwrap();
    assert_eq!(r.tables[0].chains[0].rules[0].stmts.len(), 4);
    // The kernel takes a log prefix of at most 127 bytes (NF_LOG_PREFIXLEN 128 with the NUL;
    // nft 1.0.6 reports ERANGE for 128).
    let ok = format!("log prefix \"{}\" accept", "a".repeat(127));
    wasp_ruleset::parse_str(&rule_case(&ok), "case.nft").unwrap();
    let long = format!("log prefix \"{}\" accept", "a".repeat(128));
    check(
        &rule_case(&long),
        4,
        14,
        "log prefix is 128 bytes long, the kernel takes at most 127",
    );
}

#[test]
fn long_lines_and_control_characters_are_shown_short_and_escaped() {
    // A 3 MB line of junk: the line is cut around the column, the token in the message cut.
    let junk = "x".repeat(3_000_000);
    let err =
        wasp_ruleset::parse_str(&format!("table netdev t {{ {junk}\n}}\n"), "j.nft").unwrap_err();
    let shown = err.to_string();
    assert!(shown.len() < 600, "{} bytes of error", shown.len());
    assert!(
        shown.starts_with(
            "j.nft:1:18: error: expected `chain`, `set`, `map`, `flowtable`, `counter`, `quota`, `limit`, `ct`, `plugin`, `comment` or `}`, found `xxxx"
        ),
        "{shown}"
    );
    assert!(shown.contains("... (3000000 characters)`"), "{shown}");
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), 3, "{shown}");
    assert!(lines[1].starts_with("    table netdev t { xxx") && lines[1].ends_with("..."));
    // The marks start under the column (17 characters before it, plus the indent).
    assert_eq!(lines[2].find('^'), Some(4 + 17));
    // Far along a long line: the window starts with `...` and the mark stays under the column.
    let err = wasp_ruleset::parse_str(
        &rule_case(&format!("ip saddr {{ {} accept", "1.1.1.1, ".repeat(1000))),
        "w.nft",
    )
    .unwrap_err();
    let shown = err.to_string();
    let lines: Vec<&str> = shown.lines().collect();
    assert!(
        lines[1].starts_with("    ...") && lines[1].len() < 140,
        "{shown}"
    );
    assert_eq!(
        &lines[1][lines[2].find('^').unwrap()..][..6],
        "accept",
        "{shown}"
    );
    // A NUL byte is shown as `\0`, in the message and in the line, and the mark is under it.
    let err = wasp_ruleset::parse_str("table netdev t {\0\n}\n", "n.nft").unwrap_err();
    assert_eq!(
        err.to_string(),
        "n.nft:1:17: error: unexpected character `\\0`\n    table netdev t {\\0\n                    ^"
    );
}

#[test]
fn errors_in_included_files_name_the_include_chain() {
    let dir = std::env::temp_dir().join(format!("wasp-ruleset-incchain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.nft"), "table ip t {\n}\ninclude \"b.nft\"\n").unwrap();
    std::fs::write(dir.join("b.nft"), "  include \"c.nft\"\n").unwrap();
    std::fs::write(
        dir.join("c.nft"),
        "table ip u {\n\tchain c {\n\t\tacept\n\t}\n}\n",
    )
    .unwrap();
    let err = wasp_ruleset::parse_file(&dir.join("a.nft")).unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.display();
    // As nft: "In file included from FILE:LINE:COL:", innermost first.
    assert_eq!(
        err.to_string(),
        format!(
            "In file included from {d}/b.nft:1:3:\n                 from {d}/a.nft:3:1:\n{d}/c.nft:3:3: error: expected a verdict, `counter`, `log` or a match, found `acept`\n    \t\tacept\n    \t\t^^^^^"
        )
    );
}

#[test]
fn an_unclosed_block_points_to_where_it_opened() {
    let err = wasp_ruleset::parse_str(
        "table netdev t {\n\tchain c {\n\t\ttype filter hook ingress device \"lan0\" priority 0;\n\t\ttcp dport 22 accept\n\t}\n",
        "u.nft",
    )
    .unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.starts_with(
            "u.nft:5:3: error: expected `chain`, `set`, `map`, `flowtable`, `counter`, `quota`, `limit`, `ct`, `plugin`, `comment` or `}`, found end of file"
        ),
        "{shown}"
    );
    assert!(
        shown.ends_with("\nnote: the block opened here: u.nft:1:16"),
        "{shown}"
    );
    let err =
        wasp_ruleset::parse_str("table ip t {\n\tchain c {\n\t\taccept\n", "v.nft").unwrap_err();
    assert!(
        err.to_string()
            .ends_with("\nnote: the block opened here: v.nft:2:10"),
        "{err}"
    );
    let err = wasp_ruleset::parse_str("table ip t {\n\tset s {\n\t\ttype ipv4_addr;\n", "s.nft")
        .unwrap_err();
    assert!(
        err.to_string()
            .ends_with("\nnote: the block opened here: s.nft:2:8"),
        "{err}"
    );
}

#[test]
fn set_statement_errors() {
    let with_sets = |rule: &str| {
        format!(
            "table netdev t {{\n\tset s {{ type ipv4_addr; }}\n\tset r {{ type ipv4_addr; flags interval; }}\n\tmap m {{ type ipv4_addr : mark; }}\n\tmap f {{ type ipv4_addr : mark; size 8; }}\n\tchain c {{\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n\t\t{rule}\n\t}}\n}}\n"
        )
    };
    // (rule on line 8 at column 3, column of the error in the rule, message part)
    let cases: &[(&str, u32, &str)] = &[
        ("add @s { ip saddr", 18, "expected `}`"),
        ("add @nope { ip saddr }", 5, "unknown set `@nope`"),
        ("add @s { ip daddr . tcp dport }", 5, "datatype mismatch"),
        ("add @s { ip saddr : 1 }", 5, "`@s` is not a map"),
        (
            "add @m { ip saddr }",
            5,
            "`@m` is a map: write the element's data",
        ),
        (
            "delete @s { ip saddr timeout 1s }",
            1,
            "`delete @set` takes the key only",
        ),
        ("update @r { ip saddr }", 8, "has `flags interval`"),
        (
            "add @f { ip saddr : 1 }",
            5,
            "has a `size` but not `flags dynamic`",
        ),
        ("update @s { ip saddr timeout 1x }", 30, "1x"),
        (
            "update @s { ip saddr limit rate 0/second }",
            22,
            "a limit rate of 0",
        ),
    ];
    for (rule, col, needle) in cases {
        check(&with_sets(rule), 8, 2 + col, needle);
    }
}

#[test]
fn dup_to_an_address_errors() {
    let t = |fam: &str, rule: &str| {
        format!(
            "table {fam} t {{\n\tchain c {{\n\t\ttype filter hook input priority 0;\n\t\t{rule}\n\t}}\n}}\n"
        )
    };
    check(
        &t("ip", "dup to abcd::1"),
        4,
        10,
        "expected an IPv4 address",
    );
    check(
        &t("ip6", "dup to 10.0.0.1"),
        4,
        10,
        "expected an IPv6 address",
    );
    check(
        &t("ip", "dup to ip saddr device \"lo\""),
        4,
        10,
        "`dup to EXPRESSION` (a target computed from the packet) is nftables syntax",
    );
    check(
        &t("ip", "dup to ip saddr map { 1.1.1.1 : abcd::1 }"),
        4,
        35,
        "expected an IPv4 address",
    );
    check(&t("ip", "dup to 10.0.0.1 device"), 4, 25, "expected");
    check(
        &t("inet", "dup to 10.0.0.1"),
        4,
        3,
        "netdev, ip and ip6 tables only",
    );
}
