//! Values typed by their data type: parsing the text nft accepts and printing the form
//! `nft list ruleset` shows (nft 1.0.6, checked against the kernel in a netns).

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::model::{DataType, Value};
use crate::services::SERVICES;

/// Protocol names nft resolves with getprotobyname(3) / prints with getprotobynumber(3):
/// the Debian netbase `/etc/protocols` (first name of a number is the printed one).
const PROTOCOLS: &[(&str, u8)] = &[
    ("ip", 0),
    ("hopopt", 0),
    ("icmp", 1),
    ("igmp", 2),
    ("ggp", 3),
    ("ipencap", 4),
    ("st", 5),
    ("tcp", 6),
    ("egp", 8),
    ("igp", 9),
    ("pup", 12),
    ("udp", 17),
    ("hmp", 20),
    ("xns-idp", 22),
    ("rdp", 27),
    ("iso-tp4", 29),
    ("dccp", 33),
    ("xtp", 36),
    ("ddp", 37),
    ("idpr-cmtp", 38),
    ("ipv6", 41),
    ("ipv6-route", 43),
    ("ipv6-frag", 44),
    ("idrp", 45),
    ("rsvp", 46),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
    ("skip", 57),
    ("ipv6-icmp", 58),
    ("ipv6-nonxt", 59),
    ("ipv6-opts", 60),
    ("rspf", 73),
    ("vmtp", 81),
    ("eigrp", 88),
    ("ospf", 89),
    ("ax.25", 93),
    ("ipip", 94),
    ("etherip", 97),
    ("encap", 98),
    ("pim", 103),
    ("ipcomp", 108),
    ("vrrp", 112),
    ("l2tp", 115),
    ("isis", 124),
    ("sctp", 132),
    ("fc", 133),
    ("mobility-header", 135),
    ("udplite", 136),
    ("mpls-in-ip", 137),
    ("manet", 138),
    ("hip", 139),
    ("shim6", 140),
    ("wesp", 141),
    ("rohc", 142),
    ("ethernet", 143),
];

/// `ether_type` symbols (`nft describe ether type`); the first of a value is printed.
const ETHER_TYPES: &[(&str, u16)] = &[
    ("ip", 0x0800),
    ("arp", 0x0806),
    ("ip6", 0x86dd),
    ("8021q", 0x8100),
    ("8021ad", 0x88a8),
    ("vlan", 0x8100),
];

/// `icmp_type` symbols (`nft describe icmp type`).
const ICMP_TYPES: &[(&str, u8)] = &[
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
];

/// `icmp_code` symbols (`nft describe icmp code`).
const ICMP_CODES: &[(&str, u8)] = &[
    ("net-unreachable", 0),
    ("host-unreachable", 1),
    ("prot-unreachable", 2),
    ("port-unreachable", 3),
    ("net-prohibited", 9),
    ("host-prohibited", 10),
    ("admin-prohibited", 13),
    ("frag-needed", 4),
];

/// `icmpv6_type` symbols (`nft describe icmpv6 type`).
const ICMPV6_TYPES: &[(&str, u8)] = &[
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
];

/// `icmpv6_code` symbols (`nft describe icmpv6 code`).
const ICMPV6_CODES: &[(&str, u8)] = &[
    ("no-route", 0),
    ("admin-prohibited", 1),
    ("addr-unreachable", 3),
    ("port-unreachable", 4),
    ("policy-fail", 5),
    ("reject-route", 6),
];

/// `dscp` symbols (`nft describe ip dscp`).
const DSCP: &[(&str, u8)] = &[
    ("cs0", 0x00),
    ("cs1", 0x08),
    ("cs2", 0x10),
    ("cs3", 0x18),
    ("cs4", 0x20),
    ("cs5", 0x28),
    ("cs6", 0x30),
    ("cs7", 0x38),
    ("df", 0x00),
    ("be", 0x00),
    ("lephb", 0x01),
    ("af11", 0x0a),
    ("af12", 0x0c),
    ("af13", 0x0e),
    ("af21", 0x12),
    ("af22", 0x14),
    ("af23", 0x16),
    ("af31", 0x1a),
    ("af32", 0x1c),
    ("af33", 0x1e),
    ("af41", 0x22),
    ("af42", 0x24),
    ("af43", 0x26),
    ("va", 0x2c),
    ("ef", 0x2e),
];

/// `tcp_flag` symbols (`nft describe tcp flags`), in bit order.
pub const TCP_FLAGS: &[(&str, u8)] = &[
    ("fin", 0x01),
    ("syn", 0x02),
    ("rst", 0x04),
    ("psh", 0x08),
    ("ack", 0x10),
    ("urg", 0x20),
    ("ecn", 0x40),
    ("cwr", 0x80),
];

/// `ct_state` symbols (`nft describe ct state`; NF_CT_STATE_* bits of nft_ct).
pub const CT_STATES: &[(&str, u32)] = &[
    ("invalid", 0x01),
    ("established", 0x02),
    ("related", 0x04),
    ("new", 0x08),
    ("untracked", 0x40),
];

/// `ct_dir` symbols (IP_CT_DIR_ORIGINAL, IP_CT_DIR_REPLY).
pub const CT_DIRS: &[(&str, u8)] = &[("original", 0), ("reply", 1)];

/// `ct_status` symbols (`nft describe ct status`; IPS_* bits of nf_conntrack_common.h).
pub const CT_STATUS: &[(&str, u32)] = &[
    ("expected", 0x01),
    ("seen-reply", 0x02),
    ("assured", 0x04),
    ("confirmed", 0x08),
    ("snat", 0x10),
    ("dnat", 0x20),
    ("dying", 0x200),
];

/// `ct_event` bits (nft's `ct_events_tbl`, the kernel's `1 << IPCT_*`).
pub const CT_EVENTS: &[(&str, u32)] = &[
    ("new", 1),
    ("related", 2),
    ("destroy", 4),
    ("reply", 8),
    ("assured", 16),
    ("protoinfo", 32),
    ("helper", 64),
    ("mark", 128),
    ("seqadj", 256),
    ("secmark", 512),
    ("label", 1024),
];

/// Names of the bits of `bits` in `table` joined by `sep` (`established,related`), as nft's
/// bitmask printing: the named bits in table order, then the bits without a name as one hex
/// number (`established,0x10`); `0x0` for none (checked with `nft list ruleset`, 1.0.6).
pub fn bit_names(table: &[(&str, u32)], bits: u32, sep: &str) -> String {
    if bits == 0 {
        return "0x0".to_string();
    }
    let named: u32 = table.iter().map(|(_, b)| b).fold(0, |a, b| a | b);
    let mut parts: Vec<String> = table
        .iter()
        .filter(|(_, b)| bits & b != 0)
        .map(|(n, _)| (*n).to_string())
        .collect();
    if bits & !named != 0 {
        parts.push(format!("0x{:x}", bits & !named));
    }
    parts.join(sep)
}

/// `ecn` symbols (`nft describe ip ecn`).
const ECN: &[(&str, u8)] = &[("not-ect", 0), ("ect1", 1), ("ect0", 2), ("ce", 3)];

/// `dccp_pkttype` symbols (`nft describe dccp type`).
const DCCP_PKTTYPES: &[(&str, u8)] = &[
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
];

/// `igmp_type` symbols (`nft describe igmp type`).
const IGMP_TYPES: &[(&str, u8)] = &[
    ("membership-query", 0x11),
    ("membership-report-v1", 0x12),
    ("membership-report-v2", 0x16),
    ("membership-report-v3", 0x22),
    ("leave-group", 0x17),
];

/// `mh_type` symbols (`nft describe mh type`, RFC 6275 and RFC 5568).
const MH_TYPES: &[(&str, u8)] = &[
    ("binding-refresh-request", 0),
    ("home-test-init", 1),
    ("careof-test-init", 2),
    ("home-test", 3),
    ("careof-test", 4),
    ("binding-update", 5),
    ("binding-acknowledgement", 6),
    ("binding-error", 7),
    ("fast-binding-update", 8),
    ("fast-binding-acknowledgement", 9),
    ("fast-binding-advertisement", 10),
    ("experimental-mobility-header", 11),
    ("home-agent-switch-message", 12),
];

/// `arp_op` symbols (`nft describe arp operation`).
const ARP_OPS: &[(&str, u16)] = &[
    ("request", 1),
    ("reply", 2),
    ("rrequest", 3),
    ("rreply", 4),
    ("inrequest", 8),
    ("inreply", 9),
    ("nak", 10),
];

/// `iface_type` symbols (`nft describe meta iiftype`; ARPHRD_* of if_arp.h).
const IFACE_TYPES: &[(&str, u16)] = &[
    ("ether", 1),
    ("ppp", 512),
    ("ipip", 768),
    ("ipip6", 769),
    ("loopback", 772),
    ("sit", 776),
    ("ipgre", 778),
];

/// `pkt_type` symbols (PACKET_HOST, PACKET_BROADCAST, PACKET_MULTICAST, PACKET_OTHERHOST).
const PKT_TYPES: &[(&str, u8)] = &[
    ("host", 0),
    ("unicast", 0),
    ("broadcast", 1),
    ("multicast", 2),
    ("other", 3),
];

/// `fib_addrtype` symbols (RTN_*), as nft's `addrtype_tbl`.
const FIB_ADDR_TYPES: &[(&str, u8)] = &[
    ("unspec", 0),
    ("unicast", 1),
    ("local", 2),
    ("broadcast", 3),
    ("anycast", 4),
    ("multicast", 5),
    ("blackhole", 6),
    ("unreachable", 7),
    ("prohibit", 8),
];

/// `day` names, Sunday first (the kernel's `tm_wday`).
const DAYS: &[&str] = &[
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// Seconds in a day.
const DAY_S: u64 = 86_400;

/// `nf_proto` symbols.
const NFPROTO: &[(&str, u8)] = &[("ipv4", 2), ("ipv6", 10)];

/// What a value of `dtype` looks like, for "expected ..." messages.
pub fn expected(dtype: DataType) -> &'static str {
    match dtype {
        DataType::Integer(_) | DataType::Hex(_) => "a number",
        DataType::Ecn => "an ecn name (not-ect, ect1, ect0, ce) or number",
        DataType::DccpPkttype => "a dccp packet type name or number",
        DataType::IgmpType => "an igmp type name or number",
        DataType::MhType => "a mobility header type name or number",
        DataType::ArpOp => "an arp operation name or number",
        DataType::IfaceIndex => "an interface name",
        DataType::IfaceType => {
            "an interface type (ether, ppp, ipip, ipip6, loopback, sit, ipgre) or number"
        }
        DataType::Devgroup => "a device group name or number",
        DataType::TcHandle => "a tc handle (`root`, `none`, MAJOR:MINOR in hex, or a number)",
        DataType::Uid => "a user name or uid",
        DataType::Gid => "a group name or gid",
        DataType::PktType => "a packet type (host, unicast, broadcast, multicast, other)",
        DataType::FibAddrType => {
            "an address type (unspec, unicast, local, broadcast, anycast, multicast, blackhole, unreachable, prohibit) or number"
        }
        DataType::Day => "a day of the week (\"Sunday\" ... \"Saturday\", or 0 to 6)",
        DataType::Hour => "an hour of the day (\"HH:MM\" or \"HH:MM:SS\")",
        DataType::TimeRel(_) => "a time such as `30s` or `1h2m`",
        DataType::Time => "a date and time (\"YYYY-MM-DD HH:MM:SS\") or seconds since 1970",
        DataType::Realm => "a realm name or number",
        DataType::Ipv4Addr => "an IPv4 address",
        DataType::Ipv6Addr => "an IPv6 address",
        DataType::EtherAddr => "a MAC address",
        DataType::EtherType => "an ether type (ip, ip6, arp, vlan, 8021q, 8021ad or a number)",
        DataType::InetProto => "a protocol name or number",
        DataType::InetService => "a port number or service name",
        DataType::Mark => "a mark (a number)",
        DataType::Ifname => "an interface name",
        DataType::TcpFlag => "a tcp flag (fin, syn, rst, psh, ack, urg, ecn, cwr)",
        DataType::CtState => "a ct state (invalid, established, related, new, untracked)",
        DataType::CtDir => "a ct direction (original, reply)",
        DataType::CtStatus => {
            "a ct status (expected, seen-reply, assured, confirmed, snat, dnat, dying)"
        }
        DataType::CtEvent => {
            "a ct event (new, related, destroy, reply, assured, protoinfo, helper, mark, seqadj, secmark, label)"
        }
        DataType::CtLabel => "a ct label (a bit number 0 to 127, or a name in /etc/connlabel.conf)",
        DataType::IcmpType => "an icmp type name or number",
        DataType::IcmpCode => "an icmp code name or number",
        DataType::Icmpv6Type => "an icmpv6 type name or number",
        DataType::Icmpv6Code => "an icmpv6 code name or number",
        DataType::Dscp => "a dscp name or number",
        DataType::NfProto => "ipv4 or ipv6",
        DataType::Boolean => "`exists` or `missing`",
        DataType::Verdict => "a verdict",
    }
}

/// Parse an unsigned integer in decimal or `0x` hexadecimal.
pub fn parse_uint(text: &str) -> Option<u128> {
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        if hex.is_empty() {
            return None;
        }
        u128::from_str_radix(hex, 16).ok()
    } else if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse().ok()
    } else {
        None
    }
}

/// A value of `dtype` from an integer, or an error when it does not fit the type's width.
pub fn from_uint(dtype: DataType, n: u128) -> Result<Value, String> {
    let bits = u32::from(dtype.width_bits());
    if bits < 128 && n >> bits != 0 {
        return Err(format!(
            "value {n} exceeds valid range 0-{} of {} ({bits} bits)",
            (1u128 << bits) - 1,
            dtype.name()
        ));
    }
    let width = dtype.width_bytes();
    let bytes = n.to_be_bytes()[16 - width..].to_vec();
    Ok(Value {
        dtype,
        bytes: bytes.into(),
        wildcard: false,
    })
}

/// The integer a value holds (big-endian bytes).
pub fn to_uint(v: &Value) -> u128 {
    v.bytes
        .iter()
        .fold(0u128, |acc, b| (acc << 8) | u128::from(*b))
}

fn lookup<T: Copy>(table: &[(&str, T)], name: &str) -> Option<T> {
    table.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

fn name_of<T: Copy + PartialEq>(table: &[(&'static str, T)], v: T) -> Option<&'static str> {
    table.iter().find(|(_, x)| *x == v).map(|(n, _)| *n)
}

/// Parse `text` as a value of `dtype`, written as a word or as a `"..."` string (nft resolves
/// a string by its data type too: `ip saddr "10.0.0.1"`, `tcp dport "ssh"`). The error says
/// what was expected.
///
/// # Errors
/// A message such as "expected a port number or service name, found `htps`".
pub fn parse_value(dtype: DataType, text: &str) -> Result<Value, String> {
    let bad = || format!("expected {}, found `{text}`", expected(dtype));
    if let Some(v) = parse_meta_value(dtype, text) {
        return v;
    }
    let symbolic = |table: &[(&str, u8)]| -> Result<Value, String> {
        match lookup(table, text) {
            Some(n) => from_uint(dtype, u128::from(n)),
            None => match parse_uint(text) {
                Some(n) => from_uint(dtype, n),
                None => Err(bad()),
            },
        }
    };
    match dtype {
        DataType::Ecn => symbolic(ECN),
        DataType::DccpPkttype => symbolic(DCCP_PKTTYPES),
        DataType::IgmpType => symbolic(IGMP_TYPES),
        DataType::MhType => symbolic(MH_TYPES),
        DataType::ArpOp => match lookup(ARP_OPS, text) {
            Some(n) => from_uint(dtype, u128::from(n)),
            None => parse_uint(text)
                .ok_or_else(bad)
                .and_then(|n| from_uint(dtype, n)),
        },
        DataType::Integer(_) | DataType::Hex(_) | DataType::Mark => match parse_uint(text) {
            Some(n) => from_uint(dtype, n),
            None => Err(bad()),
        },
        // A number is an address too (`ip saddr & 0xffff0000`, `... == 1`: nft reads a number
        // token as the integer the address type is based on).
        DataType::Ipv4Addr
            if text.starts_with("0x") || text.bytes().all(|b| b.is_ascii_digit()) =>
        {
            match parse_uint(text) {
                Some(n) => from_uint(dtype, n),
                None => Err(bad()),
            }
        }
        DataType::Ipv4Addr => text
            .parse::<Ipv4Addr>()
            .map(|a| Value {
                dtype,
                bytes: a.octets().to_vec().into(),
                wildcard: false,
            })
            .map_err(|_| bad()),
        DataType::Ipv6Addr => text
            .parse::<Ipv6Addr>()
            .map(|a| Value {
                dtype,
                bytes: a.octets().to_vec().into(),
                wildcard: false,
            })
            .map_err(|_| bad()),
        DataType::EtherAddr => {
            let parts: Vec<&str> = text.split(':').collect();
            if parts.len() != 6 {
                return Err(bad());
            }
            let mut bytes = Vec::with_capacity(6);
            for p in parts {
                if p.is_empty() || p.len() > 2 {
                    return Err(bad());
                }
                bytes.push(u8::from_str_radix(p, 16).map_err(|_| bad())?);
            }
            Ok(Value {
                dtype,
                bytes: bytes.into(),
                wildcard: false,
            })
        }
        DataType::EtherType => match lookup(ETHER_TYPES, text) {
            Some(n) => from_uint(dtype, u128::from(n)),
            None => parse_uint(text)
                .ok_or_else(bad)
                .and_then(|n| from_uint(dtype, n)),
        },
        DataType::InetProto => {
            let alias = match text {
                "icmpv6" => Some(58),
                "comp" => Some(108),
                _ => None,
            };
            match alias.or_else(|| lookup(PROTOCOLS, text)) {
                Some(n) => from_uint(dtype, u128::from(n)),
                None => parse_uint(text)
                    .ok_or_else(bad)
                    .and_then(|n| from_uint(dtype, n)),
            }
        }
        DataType::InetService => match parse_uint(text) {
            Some(n) => from_uint(dtype, n),
            None => match SERVICES.binary_search_by(|(n, _)| (*n).cmp(text)) {
                Ok(i) => from_uint(dtype, u128::from(SERVICES[i].1)),
                Err(_) => Err(bad()),
            },
        },
        DataType::Ifname => {
            let (name, wildcard) = match text.strip_suffix('*') {
                Some(n) => (n, true),
                None => (text, false),
            };
            if name.len() >= 16 || (text.is_empty()) {
                return Err(format!(
                    "expected an interface name of at most 15 characters, found \"{text}\""
                ));
            }
            let mut bytes = name.as_bytes().to_vec();
            bytes.resize(16, 0);
            Ok(Value {
                dtype,
                bytes: bytes.into(),
                wildcard,
            })
        }
        DataType::TcpFlag => symbolic(TCP_FLAGS),
        DataType::CtLabel => {
            let bit =
                match crate::system_names::lookup(crate::system_names::Names::Connlabels, text) {
                    Some(b) => u128::from(b),
                    None => parse_uint(text).ok_or_else(bad)?,
                };
            if bit > 127 {
                return Err(format!(
                    "{text}: ct label out of range (the labels are bits 0 to 127)"
                ));
            }
            from_uint(dtype, 1u128 << bit)
        }
        DataType::CtState | DataType::CtStatus | DataType::CtEvent => {
            let table = match dtype {
                DataType::CtState => CT_STATES,
                DataType::CtStatus => CT_STATUS,
                _ => CT_EVENTS,
            };
            match table.iter().find(|(n, _)| *n == text) {
                Some((_, b)) => from_uint(dtype, u128::from(*b)),
                None => match parse_uint(text) {
                    Some(n) => from_uint(dtype, n),
                    None => Err(bad()),
                },
            }
        }
        DataType::CtDir => symbolic(CT_DIRS),
        DataType::IcmpType => symbolic(ICMP_TYPES),
        DataType::IcmpCode => symbolic(ICMP_CODES),
        DataType::Icmpv6Type => symbolic(ICMPV6_TYPES),
        DataType::Icmpv6Code => symbolic(ICMPV6_CODES),
        DataType::Dscp => symbolic(DSCP),
        DataType::NfProto => symbolic(NFPROTO),
        // nft's boolean_type is an integer type with these two symbols: `1` and `0` too.
        DataType::Boolean => match text {
            "exists" | "1" => from_uint(dtype, 1),
            "missing" | "0" => from_uint(dtype, 0),
            _ => Err(bad()),
        },
        DataType::Verdict => Err(bad()),
        // Read by `parse_meta_value` above.
        DataType::IfaceIndex
        | DataType::IfaceType
        | DataType::Devgroup
        | DataType::TcHandle
        | DataType::Uid
        | DataType::Gid
        | DataType::PktType
        | DataType::FibAddrType
        | DataType::Day
        | DataType::Hour
        | DataType::Time
        | DataType::TimeRel(_)
        | DataType::Realm => Err(bad()),
    }
}

/// The values of the meta keys' types (a word or a string alike, as nft reads them);
/// `None` for the other types.
fn parse_meta_value(dtype: DataType, text: &str) -> Option<Result<Value, String>> {
    use crate::system_names::Names;
    let bad = || Err(format!("expected {}, found `{text}`", expected(dtype)));
    let num_or = |names: Option<Names>| -> Result<Value, String> {
        match parse_uint(text) {
            Some(n) => from_uint(dtype, n),
            None => match names.and_then(|w| crate::system_names::lookup(w, text)) {
                Some(n) => from_uint(dtype, u128::from(n)),
                None => bad(),
            },
        }
    };
    Some(match dtype {
        // Index 0 is no device (nft reads a number when no device has the name, and lists an
        // index without a device as its number: `fib saddr . iif oif != 0`).
        DataType::IfaceIndex if text == "0" => Ok(Value {
            dtype,
            bytes: vec![0; 16].into(),
            wildcard: false,
        }),
        DataType::IfaceIndex => {
            if text.is_empty() || text.len() >= 16 {
                return Some(Err(format!(
                    "expected an interface name of at most 15 characters, found \"{text}\""
                )));
            }
            let mut bytes = text.as_bytes().to_vec();
            bytes.resize(16, 0);
            Ok(Value {
                dtype,
                bytes: bytes.into(),
                wildcard: false,
            })
        }
        DataType::IfaceType => match lookup(IFACE_TYPES, text) {
            Some(n) => from_uint(dtype, u128::from(n)),
            None => num_or(None),
        },
        DataType::PktType => match lookup(PKT_TYPES, text) {
            Some(n) => from_uint(dtype, u128::from(n)),
            None => num_or(None),
        },
        DataType::FibAddrType => match lookup(FIB_ADDR_TYPES, text) {
            Some(n) => from_uint(dtype, u128::from(n)),
            None => num_or(None),
        },
        DataType::Uid => num_or(Some(Names::Users)),
        DataType::Gid => num_or(Some(Names::Groups)),
        DataType::Devgroup => num_or(Some(Names::Devgroups)),
        DataType::Realm => num_or(Some(Names::Realms)),
        DataType::TcHandle => match text {
            "root" => from_uint(dtype, 0xffff_ffff),
            "none" => from_uint(dtype, 0),
            _ => match text.split_once(':') {
                Some((maj, min)) => {
                    let hex = |t: &str| {
                        if t.is_empty() {
                            Some(0)
                        } else {
                            u32::from_str_radix(t, 16).ok().filter(|n| *n <= 0xffff)
                        }
                    };
                    match (hex(maj), hex(min)) {
                        (Some(a), Some(b)) => from_uint(dtype, u128::from(a << 16 | b)),
                        _ => bad(),
                    }
                }
                None => num_or(None),
            },
        },
        DataType::Day => match DAYS.iter().position(|d| d.eq_ignore_ascii_case(text)) {
            Some(n) => from_uint(dtype, n as u128),
            None => match parse_uint(text) {
                Some(n) if n < 7 => from_uint(dtype, n),
                Some(_) => Err("Day must be in range 0-6".to_string()),
                None => bad(),
            },
        },
        DataType::Hour => match parse_hour(text) {
            Some(s) => from_uint(dtype, u128::from(s % DAY_S)),
            None => bad(),
        },
        DataType::TimeRel(_) => parse_time_ms(text).and_then(|ms| from_uint(dtype, u128::from(ms))),
        DataType::Time => match parse_uint(text) {
            Some(secs) => from_uint(dtype, secs.saturating_mul(1_000_000_000)),
            None => match parse_date_time(text) {
                Some(secs) => from_uint(dtype, u128::from(secs) * 1_000_000_000),
                None => bad(),
            },
        },
        _ => return None,
    })
}

/// `HH:MM` or `HH:MM:SS` (hours 0-23, seconds up to 60) as seconds since midnight.
fn parse_hour(text: &str) -> Option<u64> {
    let f: Vec<&str> = text.split(':').collect();
    let num = |t: &str| (!t.is_empty() && t.len() <= 2).then(|| t.parse::<u64>().ok())?;
    let (h, m, s) = match f.as_slice() {
        [h, m] => (num(h)?, num(m)?, 0),
        [h, m, s] => (num(h)?, num(m)?, num(s)?),
        _ => return None,
    };
    (h < 24 && m < 60 && s <= 60).then_some(h * 3600 + m * 60 + s)
}

/// `YYYY-MM-DD HH:MM[:SS]` (UTC) as seconds since 1970.
fn parse_date_time(text: &str) -> Option<u64> {
    let (date, time) = text.split_once(' ').unwrap_or((text, "00:00"));
    let d: Vec<&str> = date.split('-').collect();
    let [y, mo, da] = d.as_slice() else {
        return None;
    };
    let (y, mo, da): (i64, u32, u32) = (y.parse().ok()?, mo.parse().ok()?, da.parse().ok()?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&da) || y < 1970 {
        return None;
    }
    let days = days_from_civil(y, mo, da);
    let secs = parse_hour(time)?;
    u64::try_from(days).ok().map(|d| d * DAY_S + secs)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the well-known civil-from-days
/// inverse: eras of 400 years).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01: (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `"HH:MM"`, or `"HH:MM:SS"` when the seconds are not 0, as nft lists an hour.
fn hour_text(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    if s == 0 {
        format!("\"{h:02}:{m:02}\"")
    } else {
        format!("\"{h:02}:{m:02}:{s:02}\"")
    }
}

/// `"YYYY-MM-DD HH:MM:SS"` (UTC) of ns since 1970, as nft lists a time.
fn date_time_text(ns: u128) -> String {
    let secs = (ns / 1_000_000_000) as i64;
    let (y, mo, d) = civil_from_days(secs.div_euclid(DAY_S as i64));
    let t = secs.rem_euclid(DAY_S as i64);
    format!(
        "\"{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02}\"",
        t / 3600,
        t / 60 % 60,
        t % 60
    )
}

/// IPv6 text as glibc's inet_ntop writes it (what nft prints): RFC 5952 compression, and the
/// embedded IPv4 form for `::ffff:a.b.c.d` and `::a.b.c.d`.
pub fn ipv6_text(bytes: &[u8]) -> String {
    let mut b = [0u8; 16];
    b.copy_from_slice(&bytes[..16]);
    let a = Ipv6Addr::from(b);
    let w = a.segments();
    if w[..6].iter().all(|x| *x == 0) && w[6] != 0 {
        return format!("::{}.{}.{}.{}", b[12], b[13], b[14], b[15]);
    }
    a.to_string()
}

/// Print a value as nft lists it.
pub fn print_value(v: &Value) -> String {
    let n = to_uint(v);
    let num8 = |table: &[(&'static str, u8)]| match name_of(table, n as u8) {
        Some(s) => s.to_string(),
        None => n.to_string(),
    };
    match v.dtype {
        DataType::Integer(_) | DataType::InetService | DataType::Uid | DataType::Gid => {
            n.to_string()
        }
        DataType::Hex(_) => format!("0x{n:x}"),
        DataType::IfaceIndex if n == 0 => "0".to_string(),
        DataType::IfaceIndex => {
            let end = v
                .bytes
                .iter()
                .position(|b| *b == 0)
                .unwrap_or(v.bytes.len());
            format!("\"{}\"", String::from_utf8_lossy(&v.bytes[..end]))
        }
        DataType::IfaceType => match name_of(IFACE_TYPES, n as u16) {
            Some(s) => s.to_string(),
            None => n.to_string(),
        },
        DataType::PktType => num8(PKT_TYPES),
        DataType::FibAddrType => match u8::try_from(n)
            .ok()
            .and_then(|b| name_of(FIB_ADDR_TYPES, b))
        {
            Some(s) => s.to_string(),
            None => n.to_string(),
        },
        DataType::Devgroup | DataType::Realm => {
            use crate::system_names::{Names, name_of};
            let which = if v.dtype == DataType::Devgroup {
                Names::Devgroups
            } else {
                Names::Realms
            };
            match name_of(which, n as u32) {
                Some(s) => format!("\"{s}\""),
                None => n.to_string(),
            }
        }
        DataType::TcHandle => match n {
            0xffff_ffff => "root".to_string(),
            0 => "none".to_string(),
            _ => format!("{:x}:{:x}", n >> 16, n & 0xffff),
        },
        DataType::Day => match DAYS.get(n as usize) {
            Some(d) => format!("\"{d}\""),
            None => n.to_string(),
        },
        DataType::Hour => hour_text(n as u64),
        DataType::TimeRel(_) => time_text(n as u64),
        DataType::Time => date_time_text(n),
        DataType::Ecn => num8(ECN),
        DataType::DccpPkttype => num8(DCCP_PKTTYPES),
        DataType::IgmpType => num8(IGMP_TYPES),
        DataType::MhType => num8(MH_TYPES),
        DataType::ArpOp => match name_of(ARP_OPS, n as u16) {
            Some(s) => s.to_string(),
            None => n.to_string(),
        },
        DataType::Mark => format!("0x{n:08x}"),
        DataType::Ipv4Addr => {
            Ipv4Addr::new(v.bytes[0], v.bytes[1], v.bytes[2], v.bytes[3]).to_string()
        }
        DataType::Ipv6Addr => ipv6_text(&v.bytes),
        DataType::EtherAddr => v
            .bytes
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":"),
        DataType::EtherType => match name_of(ETHER_TYPES, n as u16) {
            Some(s) => s.to_string(),
            None => format!("0x{n:04x}"),
        },
        DataType::InetProto => num8(PROTOCOLS),
        DataType::Ifname => {
            let end = v
                .bytes
                .iter()
                .position(|b| *b == 0)
                .unwrap_or(v.bytes.len());
            let name = String::from_utf8_lossy(&v.bytes[..end]);
            format!("\"{}{}\"", name, if v.wildcard { "*" } else { "" })
        }
        DataType::TcpFlag => tcp_flags_text(n as u8, " | "),
        DataType::CtState => bit_names(CT_STATES, n as u32, ","),
        DataType::CtStatus => bit_names(CT_STATUS, n as u32, ","),
        DataType::CtEvent => bit_names(CT_EVENTS, n as u32, ","),
        // nft's `ct_label_type_print`: the lowest bit, by name when connlabel.conf has one.
        DataType::CtLabel => {
            let bit = n.trailing_zeros().min(127);
            match crate::system_names::name_of(crate::system_names::Names::Connlabels, bit) {
                Some(name) => format!("\"{name}\""),
                None => bit.to_string(),
            }
        }
        DataType::CtDir => num8(CT_DIRS),
        DataType::IcmpType => num8(ICMP_TYPES),
        DataType::IcmpCode => num8(ICMP_CODES),
        DataType::Icmpv6Type => num8(ICMPV6_TYPES),
        DataType::Icmpv6Code => num8(ICMPV6_CODES),
        DataType::Dscp => match name_of(DSCP, n as u8) {
            Some(s) => s.to_string(),
            None => format!("0x{n:02x}"),
        },
        DataType::NfProto => num8(NFPROTO),
        DataType::Boolean => if n != 0 { "exists" } else { "missing" }.to_string(),
        DataType::Verdict => n.to_string(),
    }
}

/// An end of a range as nft lists it: a symbolic type as its number, in the form its values
/// without a name take (`meta l4proto 33-45`, not `dccp-idrp`: nft could not read the
/// latter back; `ether type 0x0800-0x0806`, `ip dscp 0x08-0x10`).
pub fn print_range_end(v: &Value) -> String {
    let n = to_uint(v);
    match v.dtype {
        DataType::EtherType => format!("0x{n:04x}"),
        DataType::Dscp => format!("0x{n:02x}"),
        DataType::TcpFlag | DataType::CtState | DataType::CtStatus | DataType::CtEvent => {
            format!("0x{n:x}")
        }
        DataType::InetProto
        | DataType::IcmpType
        | DataType::IcmpCode
        | DataType::Icmpv6Type
        | DataType::Icmpv6Code
        | DataType::NfProto
        | DataType::CtDir
        | DataType::Ecn
        | DataType::DccpPkttype
        | DataType::IgmpType
        | DataType::MhType
        | DataType::ArpOp
        | DataType::IfaceType
        | DataType::PktType
        | DataType::FibAddrType
        | DataType::Devgroup
        | DataType::Realm => n.to_string(),
        DataType::TimeRel(_) => format!("{}s", n / 1000),
        _ => print_value(v),
    }
}

/// TCP flag names of the bits of `bits` joined by `sep` (`syn,ack` in a mask, `fin | syn` in
/// a value); `0x0` for none.
pub fn tcp_flags_text(bits: u8, sep: &str) -> String {
    if bits == 0 {
        return "0x0".to_string();
    }
    TCP_FLAGS
        .iter()
        .filter(|(_, b)| bits & b != 0)
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(sep)
}

/// Parse a duration as nft writes it: `30s`, `1h2m3s`, `500ms`, `2d`, or a bare number of
/// seconds. Returns milliseconds.
///
/// # Errors
/// A message naming what was expected.
pub fn parse_time_ms(text: &str) -> Result<u64, String> {
    let bad = || format!("expected a time such as `30s` or `1h2m`, found `{text}`");
    if let Some(n) = parse_uint(text) {
        return u64::try_from(n)
            .ok()
            .and_then(|s| s.checked_mul(1000))
            .ok_or_else(bad);
    }
    let mut total: u64 = 0;
    let mut rest = text;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let (unit, len) = if rest.starts_with("ms") {
            (1, 2)
        } else if rest.starts_with('s') {
            (1000, 1)
        } else if rest.starts_with('m') {
            (60_000, 1)
        } else if rest.starts_with('h') {
            (3_600_000, 1)
        } else if rest.starts_with('d') {
            (86_400_000, 1)
        } else {
            return Err(bad());
        };
        rest = &rest[len..];
        total = n
            .checked_mul(unit)
            .and_then(|x| total.checked_add(x))
            .ok_or_else(bad)?;
    }
    Ok(total)
}

/// Print milliseconds as nft does: `1h2m3s`, `30s`, `9s996ms`, `1d`.
pub fn time_text(ms: u64) -> String {
    let mut out = String::new();
    let mut rest = ms;
    for (unit, name) in [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1000, "s"),
        (1, "ms"),
    ] {
        if rest >= unit {
            out.push_str(&format!("{}{}", rest / unit, name));
            rest %= unit;
        }
    }
    if out.is_empty() {
        out.push_str("0s");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(d: DataType, t: &str) -> Value {
        parse_value(d, t).unwrap()
    }

    #[test]
    fn values_take_their_type_width() {
        assert_eq!(p(DataType::Integer(12), "100").bytes[..], [0x00, 0x64]);
        assert_eq!(p(DataType::Dscp, "cs1").bytes[..], [0x08]);
        assert_eq!(p(DataType::InetService, "https").bytes[..], [0x01, 0xbb]);
        assert_eq!(p(DataType::InetService, "domain").bytes[..], [0x00, 53]);
        assert_eq!(p(DataType::InetProto, "icmpv6").bytes[..], [58]);
        assert_eq!(p(DataType::EtherType, "vlan").bytes[..], [0x81, 0x00]);
        assert_eq!(
            p(DataType::EtherAddr, "0:0:0:0:0:1").bytes[..],
            [0, 0, 0, 0, 0, 1]
        );
        assert_eq!(p(DataType::Mark, "0x10").bytes[..], [0, 0, 0, 0x10]);
        assert_eq!(
            p(DataType::Ipv6Addr, "::ffff:1.2.3.4").bytes[10..],
            [0xff, 0xff, 1, 2, 3, 4]
        );
        assert!(
            parse_value(DataType::Integer(12), "4096")
                .unwrap_err()
                .contains("exceeds")
        );
        assert!(parse_value(DataType::Dscp, "64").is_err());
        assert!(
            parse_value(DataType::InetService, "htps")
                .unwrap_err()
                .contains("port number")
        );
        assert!(parse_value(DataType::Ifname, "0123456789abcdef").is_err());
    }

    #[test]
    fn printing_matches_nft_list() {
        assert_eq!(print_value(&p(DataType::InetProto, "58")), "ipv6-icmp");
        assert_eq!(print_value(&p(DataType::InetProto, "47")), "gre");
        assert_eq!(print_value(&p(DataType::Dscp, "be")), "cs0");
        assert_eq!(print_value(&p(DataType::EtherType, "vlan")), "8021q");
        assert_eq!(print_value(&p(DataType::EtherType, "0x1234")), "0x1234");
        assert_eq!(print_value(&p(DataType::Mark, "5")), "0x00000005");
        assert_eq!(print_value(&p(DataType::IcmpCode, "0")), "net-unreachable");
        assert_eq!(print_value(&p(DataType::IcmpCode, "5")), "5");
        assert_eq!(print_value(&p(DataType::TcpFlag, "3")), "fin | syn");
        assert_eq!(
            print_value(&p(DataType::EtherAddr, "0:0:0:0:0:1")),
            "00:00:00:00:00:01"
        );
        assert_eq!(
            print_value(&p(DataType::Ipv6Addr, "2001:db8:0:0:0:0:0:1")),
            "2001:db8::1"
        );
        assert_eq!(
            print_value(&p(DataType::Ipv6Addr, "::ffff:1.2.3.4")),
            "::ffff:1.2.3.4"
        );
        assert_eq!(print_value(&p(DataType::Ifname, "eth*")), "\"eth*\"");
    }

    #[test]
    fn times() {
        assert_eq!(parse_time_ms("1h2m3s").unwrap(), 3_723_000);
        assert_eq!(parse_time_ms("30").unwrap(), 30_000);
        assert_eq!(time_text(9_996), "9s996ms");
        assert_eq!(time_text(60_000), "1m");
        assert!(parse_time_ms("3x").is_err());
    }
}
