//! Frames built from a rule's constants: the fields a rule compares (`ip saddr 10.1.1.1`,
//! `tcp flags & (fin | syn) == syn`, `vlan id { 1, 2 }`, `ip6 daddr fe80::/64` ...) are read
//! from its text, and frames are built with those fields set to the rule's values (a frame
//! that should match) and to values next to them (one more, one less, the other end of a range,
//! a bit past a prefix, a bit of a mask flipped: near misses), over IPv4 and IPv6, with and
//! without a VLAN tag. Headers are laid out as nft's protocol templates lay them out
//! (`src/proto.c` of nftables); checksums are not computed (nothing on the ingress path checks
//! them). Deterministic: the same rule text gives the same frames.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::generate::{DST_MAC, SRC_MAC};

/// Where a field lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layer {
    /// The Ethernet header (14 bytes).
    Eth,
    /// The 802.1Q tag after the MAC addresses: TCI (2 bytes) and the inner EtherType.
    Vlan,
    /// The network header (IPv4, IPv6 or ARP, by the field's protocol word).
    Net,
    /// The transport header of the field's protocol.
    L4,
    /// `meta protocol`: the EtherType of the network header (inner when tagged).
    MetaProtocol,
    /// `meta l4proto`: the IPv4 protocol or IPv6 next header.
    MetaL4proto,
    /// `meta length`: the frame's length after the Ethernet header.
    MetaLength,
    /// `meta pkttype`: the destination MAC address's kind.
    MetaPkttype,
}

/// How a field's values are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Ipv4,
    Ipv6,
    Mac,
    EtherType,
    Proto,
    TcpFlags,
    IcmpType,
    Icmpv6Type,
    IcmpCode,
    Icmpv6Code,
    Dscp,
    Ecn,
    ArpOp,
    Service,
    Pkttype,
    DccpType,
    /// An SCTP chunk type, by name only (`sctp chunk init flags 23`: the 23 is another field's).
    SctpChunk,
}

/// A field a rule can compare: protocol word, field words, layer, bit offset, bit width.
#[derive(Debug, Clone, Copy)]
struct Field {
    proto: &'static str,
    name: &'static str,
    layer: Layer,
    off: usize,
    bits: usize,
    kind: Kind,
}

const fn f(
    proto: &'static str,
    name: &'static str,
    layer: Layer,
    off: usize,
    bits: usize,
    kind: Kind,
) -> Field {
    Field {
        proto,
        name,
        layer,
        off,
        bits,
        kind,
    }
}

use Kind as K;
use Layer as L;

/// The fields recognised, as nftables' `src/proto.c` defines them (bit offsets from the start
/// of the header).
const FIELDS: &[Field] = &[
    f("ether", "daddr", L::Eth, 0, 48, K::Mac),
    f("ether", "saddr", L::Eth, 48, 48, K::Mac),
    f("ether", "type", L::Eth, 96, 16, K::EtherType),
    f("vlan", "pcp", L::Vlan, 0, 3, K::Int),
    f("vlan", "dei", L::Vlan, 3, 1, K::Int),
    f("vlan", "cfi", L::Vlan, 3, 1, K::Int),
    f("vlan", "id", L::Vlan, 4, 12, K::Int),
    f("vlan", "type", L::Vlan, 16, 16, K::EtherType),
    f("arp", "htype", L::Net, 0, 16, K::Int),
    f("arp", "ptype", L::Net, 16, 16, K::EtherType),
    f("arp", "hlen", L::Net, 32, 8, K::Int),
    f("arp", "plen", L::Net, 40, 8, K::Int),
    f("arp", "operation", L::Net, 48, 16, K::ArpOp),
    f("arp", "saddr ether", L::Net, 64, 48, K::Mac),
    f("arp", "saddr ip", L::Net, 112, 32, K::Ipv4),
    f("arp", "daddr ether", L::Net, 144, 48, K::Mac),
    f("arp", "daddr ip", L::Net, 192, 32, K::Ipv4),
    f("ip", "version", L::Net, 0, 4, K::Int),
    f("ip", "hdrlength", L::Net, 4, 4, K::Int),
    f("ip", "dscp", L::Net, 8, 6, K::Dscp),
    f("ip", "ecn", L::Net, 14, 2, K::Ecn),
    f("ip", "length", L::Net, 16, 16, K::Int),
    f("ip", "id", L::Net, 32, 16, K::Int),
    f("ip", "frag-off", L::Net, 48, 16, K::Int),
    f("ip", "ttl", L::Net, 64, 8, K::Int),
    f("ip", "protocol", L::Net, 72, 8, K::Proto),
    f("ip", "checksum", L::Net, 80, 16, K::Int),
    f("ip", "saddr", L::Net, 96, 32, K::Ipv4),
    f("ip", "daddr", L::Net, 128, 32, K::Ipv4),
    f("ip6", "version", L::Net, 0, 4, K::Int),
    f("ip6", "dscp", L::Net, 4, 6, K::Dscp),
    f("ip6", "ecn", L::Net, 10, 2, K::Ecn),
    f("ip6", "flowlabel", L::Net, 12, 20, K::Int),
    f("ip6", "length", L::Net, 32, 16, K::Int),
    f("ip6", "nexthdr", L::Net, 48, 8, K::Proto),
    f("ip6", "hoplimit", L::Net, 56, 8, K::Int),
    f("ip6", "saddr", L::Net, 64, 128, K::Ipv6),
    f("ip6", "daddr", L::Net, 192, 128, K::Ipv6),
    f("tcp", "sport", L::L4, 0, 16, K::Service),
    f("tcp", "dport", L::L4, 16, 16, K::Service),
    f("tcp", "sequence", L::L4, 32, 32, K::Int),
    f("tcp", "ackseq", L::L4, 64, 32, K::Int),
    f("tcp", "doff", L::L4, 96, 4, K::Int),
    f("tcp", "reserved", L::L4, 100, 4, K::Int),
    f("tcp", "flags", L::L4, 104, 8, K::TcpFlags),
    f("tcp", "window", L::L4, 112, 16, K::Int),
    f("tcp", "checksum", L::L4, 128, 16, K::Int),
    f("tcp", "urgptr", L::L4, 144, 16, K::Int),
    f("udp", "sport", L::L4, 0, 16, K::Service),
    f("udp", "dport", L::L4, 16, 16, K::Service),
    f("udp", "length", L::L4, 32, 16, K::Int),
    f("udp", "checksum", L::L4, 48, 16, K::Int),
    f("udplite", "sport", L::L4, 0, 16, K::Service),
    f("udplite", "dport", L::L4, 16, 16, K::Service),
    f("udplite", "csumcov", L::L4, 32, 16, K::Int),
    f("udplite", "checksum", L::L4, 48, 16, K::Int),
    f("sctp", "sport", L::L4, 0, 16, K::Service),
    f("sctp", "dport", L::L4, 16, 16, K::Service),
    f("sctp", "vtag", L::L4, 32, 32, K::Int),
    f("sctp", "checksum", L::L4, 64, 32, K::Int),
    f("dccp", "sport", L::L4, 0, 16, K::Service),
    f("dccp", "dport", L::L4, 16, 16, K::Service),
    f("dccp", "type", L::L4, 67, 4, K::DccpType),
    // The first chunk's type (the template has one chunk, after the 12-byte common header).
    f("sctp", "chunk", L::L4, 96, 8, K::SctpChunk),
    // IPv6 fragment header fields (RFC 8200 4.5), as a header of protocol 44.
    f("frag", "nexthdr", L::L4, 0, 8, K::Proto),
    f("frag", "reserved", L::L4, 8, 8, K::Int),
    f("frag", "frag-off", L::L4, 16, 13, K::Int),
    f("frag", "reserved2", L::L4, 29, 2, K::Int),
    f("frag", "more-fragments", L::L4, 31, 1, K::Int),
    f("frag", "id", L::L4, 32, 32, K::Int),
    f("icmp", "type", L::L4, 0, 8, K::IcmpType),
    f("icmp", "code", L::L4, 8, 8, K::IcmpCode),
    f("icmp", "checksum", L::L4, 16, 16, K::Int),
    f("icmp", "id", L::L4, 32, 16, K::Int),
    f("icmp", "sequence", L::L4, 48, 16, K::Int),
    f("icmp", "gateway", L::L4, 32, 32, K::Ipv4),
    f("icmp", "mtu", L::L4, 48, 16, K::Int),
    f("icmpv6", "type", L::L4, 0, 8, K::Icmpv6Type),
    f("icmpv6", "code", L::L4, 8, 8, K::Icmpv6Code),
    f("icmpv6", "checksum", L::L4, 16, 16, K::Int),
    f("icmpv6", "parameter-problem", L::L4, 32, 32, K::Int),
    f("icmpv6", "mtu", L::L4, 32, 32, K::Int),
    f("icmpv6", "id", L::L4, 32, 16, K::Int),
    f("icmpv6", "sequence", L::L4, 48, 16, K::Int),
    f("icmpv6", "max-delay", L::L4, 32, 16, K::Int),
    f("esp", "spi", L::L4, 0, 32, K::Int),
    f("esp", "sequence", L::L4, 32, 32, K::Int),
    f("ah", "nexthdr", L::L4, 0, 8, K::Proto),
    f("ah", "hdrlength", L::L4, 8, 8, K::Int),
    f("ah", "reserved", L::L4, 16, 16, K::Int),
    f("ah", "spi", L::L4, 32, 32, K::Int),
    f("ah", "sequence", L::L4, 64, 32, K::Int),
    f("comp", "nexthdr", L::L4, 0, 8, K::Proto),
    f("comp", "flags", L::L4, 8, 8, K::Int),
    f("comp", "cpi", L::L4, 16, 16, K::Int),
    f("meta", "protocol", L::MetaProtocol, 0, 16, K::EtherType),
    f("meta", "l4proto", L::MetaL4proto, 0, 8, K::Proto),
    f("meta", "length", L::MetaLength, 0, 16, K::Int),
    f("meta", "pkttype", L::MetaPkttype, 0, 8, K::Pkttype),
];

/// IP protocol number of a transport protocol word.
fn l4_number(proto: &str) -> Option<u8> {
    Some(match proto {
        "icmp" => 1,
        "tcp" => 6,
        "udp" => 17,
        "dccp" => 33,
        "frag" => 44,
        "esp" => 50,
        "ah" => 51,
        "icmpv6" => 58,
        "comp" => 108,
        "sctp" => 132,
        "udplite" => 136,
        _ => return None,
    })
}

/// A transport header template for protocol number `p` (a minimal valid header).
fn l4_template(p: u8) -> Vec<u8> {
    match p {
        6 => {
            let mut h = vec![0; 20];
            h[0..2].copy_from_slice(&40000u16.to_be_bytes());
            h[2..4].copy_from_slice(&80u16.to_be_bytes());
            h[7] = 1;
            h[12] = 0x50;
            h[13] = 0x10;
            h[14] = 0xff;
            h[15] = 0xff;
            h
        }
        17 | 136 => vec![0x9c, 0x40, 0, 53, 0, 16, 0, 0],
        132 => {
            // Common header, then a DATA chunk of 16 bytes.
            let mut h = vec![0x9c, 0x40, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0];
            h.extend_from_slice(&[0, 3, 0, 16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
            h
        }
        1 | 58 => vec![8, 0, 0, 0, 0, 1, 0, 1],
        33 => {
            let mut h = vec![0; 16];
            h[0..2].copy_from_slice(&40000u16.to_be_bytes());
            h[2..4].copy_from_slice(&80u16.to_be_bytes());
            h[4] = 4;
            h
        }
        50 => vec![0, 0, 1, 0, 0, 0, 0, 1],
        51 => vec![59, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1],
        108 => vec![59, 0, 0, 1],
        44 => vec![59, 0, 0, 0, 0, 0, 0, 1],
        _ => vec![0; 8],
    }
}

fn name_value(kind: Kind, s: &str) -> Option<u128> {
    let table: &[(&str, u128)] = match kind {
        K::EtherType => &[
            ("ip", 0x0800),
            ("ip6", 0x86dd),
            ("arp", 0x0806),
            ("vlan", 0x8100),
            ("8021q", 0x8100),
            ("8021ad", 0x88a8),
        ],
        K::Proto => &[
            ("icmp", 1),
            ("igmp", 2),
            ("tcp", 6),
            ("udp", 17),
            ("dccp", 33),
            ("ipv6", 41),
            ("gre", 47),
            ("esp", 50),
            ("ah", 51),
            ("icmpv6", 58),
            ("ipv6-icmp", 58),
            ("comp", 108),
            ("sctp", 132),
            ("udplite", 136),
        ],
        K::TcpFlags => &[
            ("fin", 1),
            ("syn", 2),
            ("rst", 4),
            ("psh", 8),
            ("ack", 16),
            ("urg", 32),
            ("ecn", 64),
            ("cwr", 128),
        ],
        K::IcmpType => &[
            ("echo-reply", 0),
            ("destination-unreachable", 3),
            ("source-quench", 4),
            ("redirect", 5),
            ("echo-request", 8),
            ("router-advertisement", 9),
            ("router-solicitation", 10),
            ("time-exceeded", 11),
            ("parameter-problem", 12),
            ("timestamp-request", 13),
            ("timestamp-reply", 14),
            ("info-request", 15),
            ("info-reply", 16),
            ("address-mask-request", 17),
            ("address-mask-reply", 18),
        ],
        K::Icmpv6Type => &[
            ("destination-unreachable", 1),
            ("packet-too-big", 2),
            ("time-exceeded", 3),
            ("parameter-problem", 4),
            ("echo-request", 128),
            ("echo-reply", 129),
            ("mld-listener-query", 130),
            ("mld-listener-report", 131),
            ("mld-listener-done", 132),
            ("mld-listener-reduction", 132),
            ("nd-router-solicit", 133),
            ("nd-router-advert", 134),
            ("nd-neighbor-solicit", 135),
            ("nd-neighbor-advert", 136),
            ("nd-redirect", 137),
            ("router-renumbering", 138),
            ("ind-neighbor-solicit", 141),
            ("ind-neighbor-advert", 142),
            ("mld2-listener-report", 143),
        ],
        K::IcmpCode => &[
            ("net-unreachable", 0),
            ("host-unreachable", 1),
            ("prot-unreachable", 2),
            ("port-unreachable", 3),
            ("frag-needed", 4),
            ("net-prohibited", 9),
            ("host-prohibited", 10),
            ("admin-prohibited", 13),
        ],
        K::Icmpv6Code => &[
            ("no-route", 0),
            ("admin-prohibited", 1),
            ("addr-unreachable", 3),
            ("port-unreachable", 4),
            ("policy-fail", 5),
            ("reject-route", 6),
        ],
        K::Dscp => &[
            ("cs0", 0),
            ("cs1", 8),
            ("cs2", 16),
            ("cs3", 24),
            ("cs4", 32),
            ("cs5", 40),
            ("cs6", 48),
            ("cs7", 56),
            ("af11", 10),
            ("af12", 12),
            ("af13", 14),
            ("af21", 18),
            ("af22", 20),
            ("af23", 22),
            ("af31", 26),
            ("af32", 28),
            ("af33", 30),
            ("af41", 34),
            ("af42", 36),
            ("af43", 38),
            ("va", 44),
            ("ef", 46),
            ("le", 1),
        ],
        K::Ecn => &[("not-ect", 0), ("ect1", 1), ("ect0", 2), ("ce", 3)],
        K::ArpOp => &[
            ("request", 1),
            ("reply", 2),
            ("rrequest", 3),
            ("rreply", 4),
            ("inrequest", 8),
            ("inreply", 9),
            ("nak", 10),
        ],
        K::Service => &[
            ("ftp", 21),
            ("ssh", 22),
            ("telnet", 23),
            ("smtp", 25),
            ("domain", 53),
            ("bootps", 67),
            ("bootpc", 68),
            ("http", 80),
            ("ntp", 123),
            ("snmp", 161),
            ("https", 443),
        ],
        K::Pkttype => &[
            ("host", 0),
            ("broadcast", 1),
            ("multicast", 2),
            ("other", 3),
        ],
        K::DccpType => &[
            ("request", 0),
            ("response", 1),
            ("data", 2),
            ("ack", 3),
            ("dataack", 4),
            ("closereq", 5),
            ("close", 6),
            ("reset", 7),
            ("sync", 8),
            ("syncack", 9),
        ],
        K::SctpChunk => &[
            ("data", 0),
            ("init", 1),
            ("init-ack", 2),
            ("sack", 3),
            ("heartbeat", 4),
            ("heartbeat-ack", 5),
            ("abort", 6),
            ("shutdown", 7),
            ("shutdown-ack", 8),
            ("error", 9),
            ("cookie-echo", 10),
            ("cookie-ack", 11),
            ("ecne", 12),
            ("cwr", 13),
            ("shutdown-complete", 14),
            ("asconf-ack", 128),
            ("forward-tsn", 192),
            ("asconf", 193),
        ],
        _ => &[],
    };
    table.iter().find(|(n, _)| *n == s).map(|(_, v)| *v)
}

/// One number, address or name as a value of `field`.
fn atom(field: &Field, s: &str) -> Option<u128> {
    let s = s.trim_matches('"');
    if let Some(v) = name_value(field.kind, s) {
        return Some(v);
    }
    match field.kind {
        K::SctpChunk => None,
        K::Ipv4 => s.parse::<Ipv4Addr>().ok().map(|a| u128::from(u32::from(a))),
        K::Ipv6 => s.parse::<Ipv6Addr>().ok().map(u128::from),
        K::Mac => {
            let parts: Vec<&str> = s.split(':').collect();
            if parts.len() != 6 {
                return None;
            }
            parts.iter().try_fold(0u128, |acc, p| {
                u8::from_str_radix(p, 16)
                    .ok()
                    .map(|b| (acc << 8) | u128::from(b))
            })
        }
        _ => {
            if let Some(h) = s.strip_prefix("0x") {
                u128::from_str_radix(h, 16).ok()
            } else {
                s.parse::<u128>().ok()
            }
        }
    }
}

/// What a rule says about one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Constraint {
    One(u128),
    Range(u128, u128),
    Prefix(u128, usize),
    Masked(u128, u128),
}

fn mask(bits: usize) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

impl Constraint {
    /// A value inside.
    fn inside(self) -> u128 {
        match self {
            Constraint::One(v) | Constraint::Range(v, _) | Constraint::Prefix(v, _) => v,
            Constraint::Masked(v, _) => v,
        }
    }

    /// Values inside and just outside, for a field `bits` wide.
    fn probes(self, bits: usize) -> Vec<u128> {
        let m = mask(bits);
        let mut v = match self {
            Constraint::One(v) => vec![v, v.wrapping_add(1) & m, v.wrapping_sub(1) & m],
            Constraint::Range(a, b) => vec![a, b, a.wrapping_sub(1) & m, b.wrapping_add(1) & m],
            Constraint::Prefix(v, len) => {
                let host = bits.saturating_sub(len);
                let mut p = vec![v];
                if host > 0 {
                    p.push(v | (mask(host) & m));
                }
                if host < bits {
                    p.push(v ^ (1u128 << host));
                }
                p
            }
            Constraint::Masked(c, mk) => {
                let low = mk & mk.wrapping_neg();
                vec![c, c ^ low, (c | (!mk & m)) & m]
            }
        };
        v.dedup();
        v
    }
}

/// The values of one field's comparison: `{ a, b-c }`, `a,b`, `a/n`, `x | y`, `& m == v`.
fn constraints(field: &Field, toks: &[String]) -> Vec<Constraint> {
    // The tokens after a `&` up to a comparison or a value are the mask.
    let mut mask_v: Option<u128> = None;
    let mut rest: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i].as_str();
        if t == "&" || t == "and" {
            // `& (a | b)` or `& a | b`: atoms joined by `|`, in parentheses or not.
            let mut m = 0u128;
            let mut j = i + 1;
            let paren = toks.get(j).is_some_and(|x| x == "(");
            if paren {
                j += 1;
            }
            while let Some(u) = toks.get(j) {
                if let Some(v) = atom(field, u) {
                    m |= v;
                    j += 1;
                } else {
                    break;
                }
                match toks.get(j).map(String::as_str) {
                    Some("|") => j += 1,
                    Some(")") if paren => {
                        j += 1;
                        break;
                    }
                    _ => break,
                }
            }
            mask_v = Some(m);
            i = j;
            continue;
        }
        rest.push(t);
        i += 1;
    }
    // Alternatives separated by commas; an alternative is atoms joined by `|`.
    let mut out = Vec::new();
    let mut cur: Option<u128> = None;
    let push = |c: Constraint, out: &mut Vec<Constraint>| {
        out.push(match (c, mask_v) {
            (Constraint::One(v), Some(m)) => Constraint::Masked(v, m),
            (c, _) => c,
        })
    };
    let mut pending_or = false;
    for t in rest {
        match t {
            "{" | "}" | "(" | ")" | "==" | "!=" | "eq" | "ne" | "<" | ">" | "<=" | ">=" | "lt"
            | "gt" | "le" | "ge" => {}
            "," => {
                if let Some(v) = cur.take() {
                    push(Constraint::One(v), &mut out);
                }
            }
            "|" => pending_or = true,
            _ => {
                if let Some(v) = atom(field, t) {
                    cur = Some(if pending_or {
                        cur.unwrap_or(0) | v
                    } else {
                        if let Some(p) = cur.take() {
                            push(Constraint::One(p), &mut out);
                        }
                        v
                    });
                    pending_or = false;
                    continue;
                }
                pending_or = false;
                if let Some((a, n)) = t.split_once('/')
                    && let (Some(a), Ok(n)) = (atom(field, a), n.parse::<usize>())
                {
                    if let Some(p) = cur.take() {
                        push(Constraint::One(p), &mut out);
                    }
                    out.push(Constraint::Prefix(a, n.min(field.bits)));
                    continue;
                }
                if let Some((a, b)) = split_range(t)
                    && let (Some(a), Some(b)) = (atom(field, a), atom(field, b))
                {
                    if let Some(p) = cur.take() {
                        push(Constraint::One(p), &mut out);
                    }
                    out.push(Constraint::Range(a, b));
                }
            }
        }
    }
    if let Some(v) = cur {
        push(Constraint::One(v), &mut out);
    }
    out
}

/// `a-b` where neither side is empty (names such as `echo-request` are tried whole first).
fn split_range(t: &str) -> Option<(&str, &str)> {
    let (a, b) = t.split_once('-')?;
    (!a.is_empty() && !b.is_empty()).then_some((a, b))
}

/// The rule's words: braces, parentheses, commas, `|` and `&` apart; quoted strings whole.
pub fn tokens(rule: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in rule.chars() {
        if quoted {
            cur.push(c);
            if c == '"' {
                quoted = false;
            }
            continue;
        }
        match c {
            '"' => {
                cur.push(c);
                quoted = true;
            }
            ' ' | '\t' => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            '{' | '}' | '(' | ')' | ',' | '|' | '&' => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                out.push(c.to_string());
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The fields a rule compares and what it says about each.
fn read_fields(rule: &str) -> Vec<(Field, Vec<Constraint>)> {
    let toks = tokens(rule);
    let mut found: Vec<(Field, usize, usize)> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let two = toks.get(i + 2).map(|t| format!("{} {t}", toks[i + 1]));
        let hit = FIELDS.iter().find(|fd| {
            toks[i] == fd.proto
                && (toks.get(i + 1).is_some_and(|t| t == fd.name)
                    || two.as_deref() == Some(fd.name))
        });
        if let Some(fd) = hit {
            let width = 1 + fd.name.split(' ').count();
            found.push((*fd, i, i + width));
            i += width;
        } else {
            i += 1;
        }
    }
    let mut out = Vec::new();
    for (k, (fd, _, from)) in found.iter().enumerate() {
        let to = found.get(k + 1).map_or(toks.len(), |n| n.1);
        let c = constraints(fd, &toks[*from..to]);
        if !c.is_empty() {
            out.push((*fd, c));
        }
    }
    out
}

/// The network layer of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Net {
    V4,
    V6,
    Arp,
    /// No network header known: 46 bytes of 0x77 after the EtherType.
    Other(u16),
}

/// A frame being built.
#[derive(Debug, Clone)]
struct Spec {
    eth: Vec<u8>,
    vlan: Option<Vec<u8>>,
    net: Net,
    v4: Vec<u8>,
    v6: Vec<u8>,
    arp: Vec<u8>,
    l4_proto: Option<u8>,
    l4: Vec<u8>,
    /// Fields written by the rule: the builder leaves them as they are.
    ether_type: Option<u16>,
    net_type: Option<u16>,
    ip_proto: Option<u8>,
    ip_len: bool,
    l4_len: bool,
    meta_len: Option<usize>,
}

fn set_bits(buf: &mut [u8], off: usize, bits: usize, v: u128) {
    for b in 0..bits {
        let bit = (v >> (bits - 1 - b)) & 1 == 1;
        let pos = off + b;
        let (byte, shift) = (pos / 8, 7 - pos % 8);
        if let Some(x) = buf.get_mut(byte) {
            if bit {
                *x |= 1 << shift;
            } else {
                *x &= !(1 << shift);
            }
        }
    }
}

impl Spec {
    fn new(net: Net, l4_proto: Option<u8>, vlan: bool) -> Spec {
        let mut eth = Vec::with_capacity(14);
        eth.extend_from_slice(&DST_MAC);
        eth.extend_from_slice(&SRC_MAC);
        eth.extend_from_slice(&[0, 0]);
        let mut v4 = vec![0x45, 0, 0, 0, 0x12, 0x34, 0, 0, 64, 0, 0, 0];
        v4.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        let mut v6 = vec![0x60, 0, 0, 0, 0, 0, 0, 64];
        v6.extend_from_slice(&crate::generate::v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 1]));
        v6.extend_from_slice(&crate::generate::v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 2]));
        let arp = crate::generate::arp(1);
        Spec {
            eth,
            vlan: vlan.then(|| vec![0, 1, 0, 0]),
            net,
            v4,
            v6,
            arp,
            l4_proto,
            l4: l4_proto.map(l4_template).unwrap_or_default(),
            ether_type: None,
            net_type: None,
            ip_proto: None,
            ip_len: false,
            l4_len: false,
            meta_len: None,
        }
    }

    fn write(&mut self, fd: &Field, v: u128) {
        let v = v & mask(fd.bits);
        match fd.layer {
            L::Eth => {
                if fd.name == "type" {
                    self.ether_type = Some(v as u16);
                } else {
                    set_bits(&mut self.eth, fd.off, fd.bits, v);
                }
            }
            L::Vlan => {
                if fd.name == "type" {
                    self.net_type = Some(v as u16);
                } else {
                    let tag = self.vlan.get_or_insert_with(|| vec![0, 1, 0, 0]);
                    set_bits(tag, fd.off, fd.bits, v);
                }
            }
            L::Net => {
                let buf = match fd.proto {
                    "ip" => &mut self.v4,
                    "ip6" => &mut self.v6,
                    _ => &mut self.arp,
                };
                set_bits(buf, fd.off, fd.bits, v);
                match fd.name {
                    "protocol" | "nexthdr" => self.ip_proto = Some(v as u8),
                    "length" => self.ip_len = true,
                    _ => {}
                }
            }
            L::L4 => {
                if matches!(fd.name, "length" | "csumcov") {
                    self.l4_len = true;
                }
                set_bits(&mut self.l4, fd.off, fd.bits, v);
            }
            L::MetaProtocol => self.net_type = Some(v as u16),
            L::MetaL4proto => self.ip_proto = Some(v as u8),
            L::MetaLength => self.meta_len = Some(v as usize),
            L::MetaPkttype => {
                let mac: [u8; 6] = match v {
                    1 => [0xff; 6],
                    2 => [0x01, 0, 0x5e, 0, 0, 1],
                    3 => [0x02, 0, 0, 0, 0, 0x99],
                    _ => DST_MAC,
                };
                self.eth[..6].copy_from_slice(&mac);
            }
        }
    }

    fn build(&self) -> Vec<u8> {
        let mut l4 = self.l4.clone();
        l4.extend_from_slice(&[0x77; 8]);
        if !self.l4_len && matches!(self.l4_proto, Some(17)) && l4.len() >= 6 {
            let n = l4.len() as u16;
            l4[4..6].copy_from_slice(&n.to_be_bytes());
        }
        let proto = self.ip_proto.or(self.l4_proto).unwrap_or(59);
        let (net_type, mut net) = match self.net {
            Net::V4 => {
                let mut h = self.v4.clone();
                if self.ip_proto.is_none() {
                    h[9] = proto;
                }
                if !self.ip_len {
                    let n = (h.len() + l4.len()) as u16;
                    h[2..4].copy_from_slice(&n.to_be_bytes());
                }
                h.extend_from_slice(&l4);
                (0x0800, h)
            }
            Net::V6 => {
                let mut h = self.v6.clone();
                if self.ip_proto.is_none() {
                    h[6] = proto;
                }
                if !self.ip_len {
                    let n = l4.len() as u16;
                    h[4..6].copy_from_slice(&n.to_be_bytes());
                }
                h.extend_from_slice(&l4);
                (0x86dd, h)
            }
            Net::Arp => (0x0806, self.arp.clone()),
            Net::Other(t) => (t, vec![0x77; 46]),
        };
        let net_type = self.net_type.unwrap_or(net_type);
        let mut frame = self.eth.clone();
        match &self.vlan {
            Some(tag) => {
                let outer = self.ether_type.unwrap_or(0x8100);
                frame[12..14].copy_from_slice(&outer.to_be_bytes());
                frame.extend_from_slice(&tag[..2]);
                frame.extend_from_slice(&net_type.to_be_bytes());
            }
            None => {
                let t = self.ether_type.unwrap_or(net_type);
                frame[12..14].copy_from_slice(&t.to_be_bytes());
            }
        }
        if let Some(want) = self.meta_len {
            // `meta length` is the length after the Ethernet header (and the tag).
            net.resize(want.min(9000), 0x77);
        }
        frame.append(&mut net);
        frame
    }
}

/// The shape of a rule's frames: network layer, transport protocol, whether tagged.
fn shape(fields: &[(Field, Vec<Constraint>)]) -> (Option<Net>, Option<u8>, bool) {
    let mut net = None;
    let mut l4 = None;
    let mut vlan = false;
    for (fd, c) in fields {
        let first = c[0].inside();
        match (fd.proto, fd.layer) {
            ("ip", _) => net = net.or(Some(Net::V4)),
            ("ip6", _) => net = net.or(Some(Net::V6)),
            ("arp", _) => net = net.or(Some(Net::Arp)),
            ("vlan", _) => vlan = true,
            _ => {}
        }
        if fd.layer == L::L4 {
            l4 = l4.or(l4_number(fd.proto));
        }
        if fd.kind == K::EtherType && fd.proto != "arp" {
            match first {
                0x0800 => net = net.or(Some(Net::V4)),
                0x86dd => net = net.or(Some(Net::V6)),
                0x0806 => net = net.or(Some(Net::Arp)),
                0x8100 | 0x88a8 if fd.name == "type" && fd.proto == "ether" => vlan = true,
                t => net = net.or(Some(Net::Other(t as u16))),
            }
        }
        if fd.kind == K::Proto && fd.layer != L::L4 {
            l4 = l4.or(Some(first as u8));
        }
    }
    (net, l4, vlan)
}

/// Frames for one rule: one that should match, then near misses of each field's values, the
/// other IP version, and the frame with a VLAN tag added; at most `cap`, no duplicates.
pub fn rule_frames(rule: &str, cap: usize) -> Vec<Vec<u8>> {
    let fields = read_fields(rule);
    let (net, l4, vlan) = shape(&fields);
    let nets: Vec<Net> = match net {
        Some(n) => vec![n],
        None if l4.is_some() => vec![Net::V4, Net::V6],
        None => vec![Net::V4, Net::V6, Net::Arp],
    };
    let mut out: Vec<Vec<u8>> = Vec::new();
    let add = |f: Vec<u8>, out: &mut Vec<Vec<u8>>| {
        if out.len() < cap && !out.contains(&f) {
            out.push(f);
        }
    };
    let base = |n: Net, tagged: bool| {
        let mut s = Spec::new(n, l4, tagged);
        for (fd, c) in &fields {
            s.write(fd, c[0].inside());
        }
        s
    };
    for &n in &nets {
        add(base(n, vlan).build(), &mut out);
    }
    for &n in &nets {
        for (fd, cs) in &fields {
            for c in cs.iter().take(6) {
                for v in c.probes(fd.bits) {
                    let mut s = base(n, vlan);
                    s.write(fd, v);
                    add(s.build(), &mut out);
                }
            }
        }
    }
    let first = nets[0];
    let other = match first {
        Net::V4 => Some(Net::V6),
        Net::V6 => Some(Net::V4),
        _ => None,
    };
    if let Some(o) = other {
        let mut s = base(first, vlan);
        s.net = o;
        add(s.build(), &mut out);
    }
    if !vlan {
        add(base(first, true).build(), &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_near_misses_of_an_address() {
        let frames = rule_frames("ip saddr 192.168.2.1", 10);
        assert_eq!(frames[0][12..14], [0x08, 0x00]);
        assert_eq!(frames[0][26..30], [192, 168, 2, 1]);
        assert!(frames.iter().any(|f| f[26..30] == [192, 168, 2, 2]));
        assert!(frames.iter().any(|f| f[26..30] == [192, 168, 2, 0]));
    }

    #[test]
    fn masked_flags_keep_the_compared_value() {
        let fields = read_fields("tcp flags & (fin | syn | rst | ack) == syn");
        assert_eq!(fields.len(), 1);
        assert_eq!(fields[0].1, vec![Constraint::Masked(2, 0x17)]);
        let frames = rule_frames("tcp flags & (fin | syn | rst | ack) == syn", 20);
        // IPv4 and IPv6 frames with flags SYN: the TCP flags byte is at 14 + 20 + 13.
        assert_eq!(frames[0][47], 2);
        assert!(frames.iter().any(|f| f.len() > 47 && f[47] == 3));
    }

    #[test]
    fn sets_ranges_and_prefixes() {
        let fields = read_fields("tcp dport { 22, 80-90 } ip6 daddr fe80::/64");
        assert_eq!(
            fields[0].1,
            vec![Constraint::One(22), Constraint::Range(80, 90)]
        );
        assert_eq!(
            fields[1].1,
            vec![Constraint::Prefix(u128::from(0xfe80u16) << 112, 64)]
        );
    }

    #[test]
    fn sctp_chunks_by_name_and_fragment_headers() {
        let frames = rule_frames("sctp chunk init flags 23", 20);
        // IPv4 (20 bytes) then the SCTP common header (12): the chunk type.
        assert_eq!(frames[0][14 + 9], 132);
        assert_eq!(frames[0][14 + 20 + 12], 1);
        let frames = rule_frames("frag id 22", 20);
        assert_eq!(frames[0][14 + 9], 44);
        assert_eq!(frames[0][14 + 20 + 4..14 + 20 + 8], [0, 0, 0, 22]);
    }

    #[test]
    fn vlan_rules_are_tagged() {
        let frames = rule_frames("ether type vlan ip protocol 1", 20);
        assert_eq!(frames[0][12..14], [0x81, 0x00]);
        assert_eq!(frames[0][16..18], [0x08, 0x00]);
        assert_eq!(frames[0][18 + 9], 1);
        // The same frame over IPv6 (the other IP version) is among them.
        assert!(frames.iter().any(|f| f[16..18] == [0x86, 0xdd]));
    }
}
