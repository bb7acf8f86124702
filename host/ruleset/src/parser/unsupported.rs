//! nft syntax that wasp does not read yet, so that a valid nft ruleset gets "wasp does not
//! support this yet" rather than a syntax error. The lists follow nft 1.0.6's grammar
//! (`parser_bison.y`: statements, `meta_key_unqualified`, header fields, table objects).

/// Words that start a statement or an expression in nft and that wasp does not read.
const STATEMENT_WORDS: &[&str] = &[
    // Expressions.
    "numgen", "jhash", "symhash", "gre", "gretap", "vxlan", "geneve", "inner", "rt0", "rt2", "dscp",
    "ecn", "priority",
    // Meta keys nft accepts without `meta` (`meta_key_unqualified`).
    "ibriport", "obriport", "ibrname", "obrname", // Statements.
    "queue", "tproxy", "synproxy", "meter", "set", "update", "add", "delete", "secmark", "last",
    "xt",
];

/// `meta KEY` keys of nft that wasp does not read.
const META_KEYS: &[&str] = &[
    "ibrname",
    "obrname",
    "ibriport",
    "obriport",
    "ibrvproto",
    "ibrpvid",
    "iifkind",
    "oifkind",
    "secmark",
    "broute",
];

/// Header fields of nft that wasp does not read, by header keyword.
fn fields(head: &str) -> &'static [&'static str] {
    match head {
        "ip" => &["option"],
        "ip6" => &["priority"],
        "icmpv6" => &["packet-too-big", "taddr", "daddr"],
        "dccp" => &["option"],
        "vlan" => &[],
        "ether" => &[],
        "exthdr" => &["rt0", "rt2", "srh"],
        _ => &[],
    }
}

/// Objects a `table` block may declare in nft that wasp does not read.
pub(crate) const TABLE_ITEMS: &[&str] = &["secmark", "synproxy"];

/// Top-level commands of nft that wasp does not read.
pub(crate) const COMMANDS: &[&str] = &[
    "list", "reset", "rename", "monitor", "describe", "export", "import",
];

/// Raw payload bases: `@ll,OFFSET,LENGTH`, `@nh,...`, `@th,...`, `@ih,...`.
pub(crate) const RAW_BASES: &[&str] = &["ll", "nh", "th", "ih"];

/// `true` when `w` starts an nft statement or expression that wasp does not read.
pub(crate) fn statement(w: &str) -> bool {
    STATEMENT_WORDS.contains(&w)
}

/// `true` when `meta KEY` is valid nft that wasp does not read.
pub(crate) fn meta_key(key: &str) -> bool {
    META_KEYS.contains(&key)
}

/// `true` when `HEAD FIELD` is valid nft that wasp does not read.
pub(crate) fn field(head: &str, field: &str) -> bool {
    fields(head).contains(&field)
}

/// The message: "`what` is nftables syntax that wasp does not support yet", or for a
/// statement that cannot mean anything in wasp, why ("`queue` has no meaning in wasp: ...").
pub(crate) fn message(what: &str) -> String {
    match no_meaning(what) {
        Some(why) => format!("`{what}` has no meaning in wasp: {why}"),
        None => format!("`{what}` is nftables syntax that wasp does not support yet"),
    }
}

/// Statements that hand the packet to the kernel's own stack, which wasp does not have: why
/// each cannot mean anything in wasp.
fn no_meaning(what: &str) -> Option<&'static str> {
    Some(match what {
        "queue" => {
            "it hands the packet to a user-space program through the kernel's nfnetlink_queue; wasp is itself that program (write the decision as a plugin)"
        }
        "tproxy" => {
            "it steers the packet to a local socket of the kernel's TCP/UDP stack, which wasp does not have"
        }
        "synproxy" => {
            "it answers SYNs with syncookies from the kernel's TCP stack, which wasp does not have"
        }
        _ => return None,
    })
}

/// The message with a note on what `what` is: "`what` (note) is nftables syntax ...".
pub(crate) fn message_with(what: &str, note: &str) -> String {
    format!("`{what}` ({note}) is nftables syntax that wasp does not support yet")
}
