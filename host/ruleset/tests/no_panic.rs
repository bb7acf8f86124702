//! Whatever the input, `parse_str` returns a ruleset or an error naming file:line:col: it
//! never panics or exhausts the stack. Random bytes, and random soups of nft's own tokens
//! (which reach far deeper into the parser than random bytes do).

use proptest::prelude::*;
use wasp_ruleset::error::Error;

/// Tokens of nft syntax (no `include`: it would read files of the test's folder).
const VOCAB: &[&str] = &[
    "table",
    "netdev",
    "inet",
    "ip",
    "ip6",
    "bridge",
    "t",
    "chain",
    "c",
    "d",
    "set",
    "map",
    "s",
    "type",
    "typeof",
    "filter",
    "hook",
    "ingress",
    "input",
    "device",
    "devices",
    "\"lan0\"",
    "priority",
    "0",
    "-5",
    "raw",
    "policy",
    "accept",
    "drop",
    "continue",
    "return",
    "jump",
    "goto",
    "counter",
    "packets",
    "bytes",
    "log",
    "prefix",
    "level",
    "info",
    "comment",
    "\"x\"",
    "define",
    "redefine",
    "undefine",
    "$x",
    "x",
    "=",
    "@s",
    "{",
    "}",
    "(",
    ")",
    ",",
    ";",
    ".",
    "-",
    ":",
    "/",
    "&",
    "|",
    "^",
    "!",
    "==",
    "!=",
    "<",
    ">",
    "<=",
    ">=",
    "\n",
    "saddr",
    "daddr",
    "sport",
    "dport",
    "tcp",
    "udp",
    "icmp",
    "icmpv6",
    "ether",
    "vlan",
    "id",
    "meta",
    "mark",
    "nftrace",
    "iifname",
    "exthdr",
    "rt",
    "exists",
    "flags",
    "interval",
    "timeout",
    "elements",
    "ipv4_addr",
    "inet_service",
    "verdict",
    "vmap",
    "add",
    "rule",
    "element",
    "flush",
    "delete",
    "ruleset",
    "handle",
    "1.1.1.1",
    "10.0.0.0/8",
    "1-5",
    "fe80::1",
    "22",
    "syn",
    "ack",
    "ct",
    "state",
    "status",
    "direction",
    "established,related",
    "count",
    "over",
    "snat",
    "dnat",
    "masquerade",
    "redirect",
    "to",
    ":80",
    "10.0.0.1-10.0.0.9:1000-2000",
    "[",
    "]",
    "random",
    "persistent",
    "flowtable",
    "flow",
    "offload",
    "@ft",
    "prerouting",
    "postrouting",
    "limit",
    "rate",
    "nat",
    "\"unterminated",
    "# comment",
    "\\\n",
    "1s",
    "0xff",
];

fn parse_never_panics(text: &str) {
    match wasp_ruleset::parse_str(text, "fuzz.nft") {
        Ok(r) => {
            // What parses also prints.
            let _ = wasp_ruleset::print_ruleset(&r, true);
        }
        Err(Error::At(l)) => {
            assert!(l.line >= 1 && l.col >= 1, "{l:?}");
            let _ = Error::At(l).to_string();
        }
        Err(e @ Error::Io { .. }) => panic!("parse_str read a file: {e}"),
        Err(e @ Error::Json(_)) => panic!("text parsed as JSON: {e}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        parse_never_panics(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn random_token_soup(toks in proptest::collection::vec(0..VOCAB.len(), 0..200)) {
        let text: Vec<&str> = toks.iter().map(|&i| VOCAB[i]).collect();
        parse_never_panics(&text.join(" "));
    }

    #[test]
    fn token_soup_inside_a_chain(toks in proptest::collection::vec(0..VOCAB.len(), 0..120)) {
        let text: Vec<&str> = toks.iter().map(|&i| VOCAB[i]).collect();
        parse_never_panics(&format!(
            "define x = {{ 22, 80 }}\ntable netdev t {{\n\tset s {{ type ipv4_addr; }}\n\tchain d {{\n\t}}\n\tchain c {{\n\t\ttype filter hook ingress device \"lan0\" priority 0;\n\t\t{}\n\t}}\n}}\n",
            text.join(" ")
        ));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Bytes that are not UTF-8 anywhere: an error at a place, never a panic.
    #[test]
    fn random_raw_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        match wasp_ruleset::parse_bytes(&bytes, "fuzz.nft") {
            Ok(_) => {}
            Err(Error::At(l)) => prop_assert!(l.line >= 1 && l.col >= 1),
            Err(e) => panic!("{e}"),
        }
    }
}

/// Constructs continued on the next line (`\` newline) or priorities past i32: inputs that
/// once panicked (an expression's span joined across lines subtracted columns of two lines;
/// `priority raw - 2147483647` overflowed), each now parsed or refused at a place.
#[test]
fn found_by_the_soups() {
    let chain = |body: &str| {
        format!(
            "table netdev t {{\n\tchain c {{\n\t\ttype filter hook ingress device \"lan0\" priority 0;\n\t\t{body}\n\t}}\n}}\n"
        )
    };
    for body in [
        "log tcp \\\n x",
        "meta mark & \\\n 0xff == 1",
        "tcp dport . \\\n udp sport { 1 . 2 }",
        "tcp \\\n dport 22 accept",
    ] {
        parse_never_panics(&chain(body));
    }
    // nft computes priorities in 32 bits and wraps (checked against nft 1.0.6 + Linux 6.18).
    let prio = |p: &str| {
        format!(
            "table inet t {{\n\tchain c {{\n\t\ttype filter hook input priority {p};\n\t}}\n}}\n"
        )
    };
    for (p, want) in [
        ("raw - 2147483647", "priority 2147483349;"),
        ("filter + 2147483647", "priority 2147483647;"),
        ("raw -2147483647", "priority 2147483349;"),
    ] {
        let r = wasp_ruleset::parse_str(&prio(p), "p.nft").unwrap();
        let text = wasp_ruleset::print_ruleset(&r, false);
        assert!(text.contains(want), "{p}: {text}");
    }
    // A field on the next line is still the same expression (nft joins `\` newline).
    let r = wasp_ruleset::parse_str(&chain("tcp \\\n dport 22 accept"), "c.nft").unwrap();
    let text = wasp_ruleset::print_ruleset(&r, false);
    assert!(text.contains("tcp dport 22 accept"), "{text}");
}
