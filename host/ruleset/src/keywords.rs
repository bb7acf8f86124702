//! The words of nft's language that cannot name a table, chain, set, map, flowtable, object
//! or variable: nft 1.0.6's scanner turns them into keywords, and its grammar wants a plain
//! string where a name goes ("syntax error, unexpected fwd, expecting string"). The list is
//! what nft 1.0.6 refuses as `chain WORD` (and as `table ip WORD`) among the words of its
//! scanner, of its rule-level tests and of wasp's parser, checked one by one against the
//! installed nft.

/// The keywords, sorted (for a binary search).
const KEYWORDS: &[&str] = &[
    "accept", "add", "ah", "all", "and", "arp", "auto-merge", "bridge", "cgroup", "chain",
    "comment", "comp", "constant", "continue", "counter", "cpu", "create", "ct", "day", "dccp",
    "define", "delete", "describe", "device", "devices", "dnat", "drop", "dst", "dup",
    "dynamic", "ecn", "element", "elements", "eq", "esp", "ether", "exists", "expires",
    "export", "exthdr", "fib", "flags", "flow", "flowtable", "flush", "frag", "fwd",
    "gc-interval", "ge", "get", "goto", "gt", "handle", "hbh", "hook", "hour", "ibriport",
    "ibrname", "icmp", "icmpv6", "igmp", "iif", "iifgroup", "iifname", "iiftype", "import",
    "include", "index", "inet", "insert", "interval", "ip", "ip6", "ipsec", "jhash", "jump",
    "le", "limit", "list", "log", "lshift", "lt", "map", "mark", "masquerade", "meta", "meter",
    "mh", "missing", "monitor", "ne", "netdev", "nftrace", "not", "notrack", "numgen",
    "obriport", "obrname", "offload", "oif", "oifgroup", "oifname", "oiftype", "or", "osf",
    "pkttype", "policy", "position", "priority", "queue", "quota", "random", "redefine",
    "redirect", "reject", "rename", "replace", "reset", "return", "rshift", "rt", "rt0", "rt2",
    "rtclassid", "rule", "ruleset", "sctp", "secmark", "set", "size", "skgid", "skuid", "snat",
    "socket", "srh", "symhash", "synproxy", "table", "tcp", "th", "time", "timeout", "tproxy",
    "type", "typeof", "udp", "udplite", "undefine", "update", "vlan", "vmap", "xor", "xt",
];

/// `true` when nft 1.0.6 reads `word`, written without quotes, as a keyword where a name is
/// expected (so that it refuses it as a name).
pub fn is_keyword(word: &str) -> bool {
    KEYWORDS.binary_search(&word).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_sorted_and_answers() {
        assert!(KEYWORDS.windows(2).all(|w| w[0] < w[1]));
        for w in ["fwd", "drop", "ip", "time", "dst", "missing", "auto-merge"] {
            assert!(is_keyword(w), "{w}");
        }
        for w in ["foo", "filter", "input", "nat", "wan", "t", "fwd0"] {
            assert!(!is_keyword(w), "{w}");
        }
    }
}
