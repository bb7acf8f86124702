//! The protocol descriptions: every header nft names in a payload expression, one table per
//! protocol (its fields with offset, width and data type; the base the offsets count from; the
//! implicit dependency nft puts in front of a match on it). The parser, the printer, the
//! payload merge and wasp-core's compiler all read these tables: adding a protocol is adding a
//! table here.
//!
//! Offsets and widths are in bits from the start of the header, as the kernel bytecode in
//! nftables' `tests/py/*.t.payload` files shows them (`payload load 1b @ transport header + 8`
//! with `bitwise & 0x1e` is `dccp type`: bit 67, 4 bits). Values are big-endian (network
//! order). The dependencies are nft 1.0.6's: `meta l4proto N` in front of a transport header
//! field, `meta protocol`/`meta nfproto` in front of a network header field (none in a table
//! of that family), and for IPv6 extension headers, a search of the header chain
//! (`exthdr load ipv6 2b @ 44 + 2`: the fragment header, the kernel's `ipv6_find_hdr`).

use crate::model::{DataType, Dependency, FieldDesc, PayloadBase, PayloadField};

/// A protocol nft names in payload expressions (`tcp`, `ip6`, `frag`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Proto {
    /// Ethernet.
    Ether,
    /// 802.1Q/802.1ad tags (the tag at [`PayloadField::depth`]).
    Vlan,
    /// ARP (RFC 826, Ethernet and IPv4 addresses).
    Arp,
    /// IPv4.
    Ip,
    /// IPv6.
    Ip6,
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// UDP-Lite (RFC 3828).
    Udplite,
    /// SCTP common header.
    Sctp,
    /// DCCP.
    Dccp,
    /// IPsec authentication header.
    Ah,
    /// IPsec encapsulating security payload.
    Esp,
    /// IP payload compression (RFC 3173).
    Comp,
    /// ICMP.
    Icmp,
    /// ICMPv6.
    Icmpv6,
    /// IGMP.
    Igmp,
    /// Any transport header with ports (`th`).
    Th,
    /// IPv6 hop-by-hop options header.
    Hbh,
    /// IPv6 routing header.
    Rt,
    /// IPv6 fragment header.
    Frag,
    /// IPv6 destination options header.
    Dst,
    /// IPv6 mobility header.
    Mh,
    /// IPv6 segment routing header (RFC 8754: the routing header of type 4; nft's `srh`,
    /// which, as nft 1.0.6, reads any routing header at these offsets without checking its
    /// type).
    Srh,
}

/// One field of a protocol's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldRow {
    /// The name after the protocol (`saddr`, `frag-off`; `saddr ip` for arp's two-word names;
    /// `sid[1]` for an entry of an array, written `sid [1]` too), as nft lists it.
    pub name: &'static str,
    /// Offset in bits from the start of the header.
    pub offset_bits: u16,
    /// Width in bits.
    pub len_bits: u16,
    /// The data type of its values.
    pub dtype: DataType,
    /// Dependencies of this field in place of its protocol's (empty: the protocol's). nft
    /// 1.0.6 puts a hidden `icmp type` match in front of a field that exists in one message
    /// type only (`icmp mtu`: destination-unreachable).
    pub deps: &'static [Dependency],
    /// The ICMP/ICMPv6 message types the field exists in when there are several (`icmp id`:
    /// echo-reply, echo-request): nft 1.0.6 puts an explicit `icmp type { ... }` in front of
    /// it, which the listing shows.
    pub types: &'static [u8],
}

/// Other names nft reads for a field: (protocol, alias, the listed name).
pub const ALIASES: &[(Proto, &str, &str)] = &[(Proto::Vlan, "cfi", "dei")];

/// A protocol's description.
#[derive(Debug, Clone, Copy)]
pub struct ProtoDesc {
    /// Which protocol.
    pub proto: Proto,
    /// The keyword (`tcp`).
    pub name: &'static str,
    /// The header the offsets count from.
    pub base: PayloadBase,
    /// The implicit dependencies nft adds in front of a match (outermost first).
    pub deps: &'static [Dependency],
    /// The network protocol the header belongs to (`ip`, `ip6`), for nft's "conflicting
    /// protocols" check.
    pub l3: Option<&'static str>,
    /// The transport protocol the header is (`tcp`), for the same check.
    pub l4: Option<&'static str>,
    /// The fields; the first row of a name is the one printed (`vlan dei` and `vlan cfi`).
    pub fields: &'static [FieldRow],
}

const fn f(name: &'static str, offset_bits: u16, len_bits: u16, dtype: DataType) -> FieldRow {
    FieldRow {
        name,
        offset_bits,
        len_bits,
        dtype,
        deps: &[],
        types: &[],
    }
}

/// A field that exists in some ICMP/ICMPv6 message types only: `deps` with a hidden type
/// dependency (one type), or the explicit `types` (several).
const fn icmp_f(
    name: &'static str,
    offset_bits: u16,
    len_bits: u16,
    deps: &'static [Dependency],
    types: &'static [u8],
) -> FieldRow {
    FieldRow {
        name,
        offset_bits,
        len_bits,
        dtype: DataType::Integer(len_bits as u8),
        deps,
        types,
    }
}

use DataType as T;
use Dependency as D;

const PORTS: [FieldRow; 2] = [
    f("sport", 0, 16, T::InetService),
    f("dport", 16, 16, T::InetService),
];

/// Length in bits of a vlan tag; a tag at depth `d` starts at bit `8 * (14 + 4 * d)`.
pub const VLAN_TAG_BITS: u16 = 32;

/// Every protocol, in the order of [`Proto`].
pub static PROTOCOLS: &[ProtoDesc] = &[
    ProtoDesc {
        proto: Proto::Ether,
        name: "ether",
        base: PayloadBase::Link,
        deps: &[],
        l3: None,
        l4: None,
        fields: &[
            f("daddr", 0, 48, T::EtherAddr),
            f("saddr", 48, 48, T::EtherAddr),
            f("type", 96, 16, T::EtherType),
        ],
    },
    ProtoDesc {
        proto: Proto::Vlan,
        name: "vlan",
        base: PayloadBase::Link,
        deps: &[],
        l3: None,
        l4: None,
        fields: &[
            f("pcp", 0, 3, T::Integer(3)),
            f("dei", 3, 1, T::Integer(1)),
            f("id", 4, 12, T::Integer(12)),
            f("type", 16, 16, T::EtherType),
        ],
    },
    ProtoDesc {
        proto: Proto::Arp,
        name: "arp",
        base: PayloadBase::Network,
        deps: &[D::Arp],
        l3: Some("arp"),
        l4: None,
        fields: &[
            f("htype", 0, 16, T::Integer(16)),
            f("ptype", 16, 16, T::EtherType),
            f("hlen", 32, 8, T::Integer(8)),
            f("plen", 40, 8, T::Integer(8)),
            f("operation", 48, 16, T::ArpOp),
            f("saddr ether", 64, 48, T::EtherAddr),
            f("saddr ip", 112, 32, T::Ipv4Addr),
            f("daddr ether", 144, 48, T::EtherAddr),
            f("daddr ip", 192, 32, T::Ipv4Addr),
        ],
    },
    ProtoDesc {
        proto: Proto::Ip,
        name: "ip",
        base: PayloadBase::Network,
        deps: &[D::Ipv4],
        l3: Some("ip"),
        l4: None,
        fields: &[
            f("version", 0, 4, T::Integer(4)),
            f("hdrlength", 4, 4, T::Integer(4)),
            f("dscp", 8, 6, T::Dscp),
            f("ecn", 14, 2, T::Ecn),
            f("length", 16, 16, T::Integer(16)),
            f("id", 32, 16, T::Integer(16)),
            f("frag-off", 48, 16, T::Integer(16)),
            f("ttl", 64, 8, T::Integer(8)),
            f("protocol", 72, 8, T::InetProto),
            f("checksum", 80, 16, T::Integer(16)),
            f("saddr", 96, 32, T::Ipv4Addr),
            f("daddr", 128, 32, T::Ipv4Addr),
        ],
    },
    ProtoDesc {
        proto: Proto::Ip6,
        name: "ip6",
        base: PayloadBase::Network,
        deps: &[D::Ipv6],
        l3: Some("ip6"),
        l4: None,
        fields: &[
            f("version", 0, 4, T::Integer(4)),
            f("dscp", 4, 6, T::Dscp),
            f("ecn", 10, 2, T::Ecn),
            f("flowlabel", 12, 20, T::Integer(20)),
            f("length", 32, 16, T::Integer(16)),
            f("nexthdr", 48, 8, T::InetProto),
            f("hoplimit", 56, 8, T::Integer(8)),
            f("saddr", 64, 128, T::Ipv6Addr),
            f("daddr", 192, 128, T::Ipv6Addr),
        ],
    },
    ProtoDesc {
        proto: Proto::Tcp,
        name: "tcp",
        base: PayloadBase::Transport,
        deps: &[D::L4Proto(6)],
        l3: None,
        l4: Some("tcp"),
        fields: &[
            PORTS[0],
            PORTS[1],
            f("sequence", 32, 32, T::Integer(32)),
            f("ackseq", 64, 32, T::Integer(32)),
            f("doff", 96, 4, T::Integer(4)),
            f("reserved", 100, 4, T::Integer(4)),
            f("flags", 104, 8, T::TcpFlag),
            f("window", 112, 16, T::Integer(16)),
            f("checksum", 128, 16, T::Integer(16)),
            f("urgptr", 144, 16, T::Integer(16)),
        ],
    },
    ProtoDesc {
        proto: Proto::Udp,
        name: "udp",
        base: PayloadBase::Transport,
        deps: &[D::L4Proto(17)],
        l3: None,
        l4: Some("udp"),
        fields: &[
            PORTS[0],
            PORTS[1],
            f("length", 32, 16, T::Integer(16)),
            f("checksum", 48, 16, T::Integer(16)),
        ],
    },
    ProtoDesc {
        proto: Proto::Udplite,
        name: "udplite",
        base: PayloadBase::Transport,
        deps: &[D::L4Proto(136)],
        l3: None,
        l4: Some("udplite"),
        fields: &[
            PORTS[0],
            PORTS[1],
            f("csumcov", 32, 16, T::Integer(16)),
            f("checksum", 48, 16, T::Integer(16)),
        ],
    },
    ProtoDesc {
        proto: Proto::Sctp,
        name: "sctp",
        base: PayloadBase::Transport,
        deps: &[D::L4Proto(132)],
        l3: None,
        l4: Some("sctp"),
        fields: &[
            PORTS[0],
            PORTS[1],
            f("vtag", 32, 32, T::Integer(32)),
            f("checksum", 64, 32, T::Integer(32)),
        ],
    },
    ProtoDesc {
        proto: Proto::Dccp,
        name: "dccp",
        base: PayloadBase::Transport,
        deps: &[D::L4Proto(33)],
        l3: None,
        l4: Some("dccp"),
        fields: &[PORTS[0], PORTS[1], f("type", 67, 4, T::DccpPkttype)],
    },
    ProtoDesc {
        proto: Proto::Ah,
        name: "ah",
        base: PayloadBase::Transport,
        deps: &[D::L4Proto(51)],
        l3: None,
        l4: Some("ah"),
        fields: &[
            f("nexthdr", 0, 8, T::InetProto),
            f("hdrlength", 8, 8, T::Integer(8)),
            f("reserved", 16, 16, T::Integer(16)),
            f("spi", 32, 32, T::Integer(32)),
            f("sequence", 64, 32, T::Integer(32)),
        ],
    },
    ProtoDesc {
        proto: Proto::Esp,
        name: "esp",
        base: PayloadBase::Transport,
        deps: &[D::L4Proto(50)],
        l3: None,
        l4: Some("esp"),
        fields: &[
            f("spi", 0, 32, T::Integer(32)),
            f("sequence", 32, 32, T::Integer(32)),
        ],
    },
    ProtoDesc {
        proto: Proto::Comp,
        name: "comp",
        base: PayloadBase::Transport,
        deps: &[D::L4Proto(108)],
        l3: None,
        l4: Some("comp"),
        fields: &[
            f("nexthdr", 0, 8, T::InetProto),
            f("flags", 8, 8, T::Hex(8)),
            f("cpi", 16, 16, T::Integer(16)),
        ],
    },
    ProtoDesc {
        proto: Proto::Icmp,
        name: "icmp",
        base: PayloadBase::Transport,
        deps: &[D::Ipv4, D::L4Proto(1)],
        l3: None,
        l4: Some("icmp"),
        fields: &[
            f("type", 0, 8, T::IcmpType),
            f("code", 8, 8, T::IcmpCode),
            f("checksum", 16, 16, T::Integer(16)),
            icmp_f("id", 32, 16, &[], &[0, 8]),
            icmp_f("sequence", 48, 16, &[], &[0, 8]),
            icmp_f(
                "gateway",
                32,
                32,
                &[D::Ipv4, D::L4Proto(1), D::IcmpType(5)],
                &[5],
            ),
            icmp_f(
                "mtu",
                48,
                16,
                &[D::Ipv4, D::L4Proto(1), D::IcmpType(3)],
                &[3],
            ),
        ],
    },
    ProtoDesc {
        proto: Proto::Icmpv6,
        name: "icmpv6",
        base: PayloadBase::Transport,
        deps: &[D::Ipv6, D::L4Proto(58)],
        l3: None,
        l4: Some("icmpv6"),
        fields: &[
            f("type", 0, 8, T::Icmpv6Type),
            f("code", 8, 8, T::Icmpv6Code),
            f("checksum", 16, 16, T::Integer(16)),
            icmp_f(
                "mtu",
                32,
                32,
                &[D::Ipv6, D::L4Proto(58), D::IcmpType(2)],
                &[2],
            ),
            icmp_f("id", 32, 16, &[], &[128, 129]),
            icmp_f("sequence", 48, 16, &[], &[128, 129]),
            f("max-delay", 32, 16, T::Integer(16)),
        ],
    },
    ProtoDesc {
        proto: Proto::Igmp,
        name: "igmp",
        base: PayloadBase::Transport,
        deps: &[D::Ipv4, D::L4Proto(2)],
        l3: None,
        l4: Some("igmp"),
        fields: &[
            f("type", 0, 8, T::IgmpType),
            f("mrt", 8, 8, T::Integer(8)),
            f("checksum", 16, 16, T::Integer(16)),
            f("group", 32, 32, T::Integer(32)),
        ],
    },
    ProtoDesc {
        proto: Proto::Th,
        name: "th",
        base: PayloadBase::Transport,
        deps: &[],
        l3: None,
        l4: None,
        fields: &PORTS,
    },
    ProtoDesc {
        proto: Proto::Hbh,
        name: "hbh",
        base: PayloadBase::Ip6Ext(0),
        deps: &[D::Ipv6],
        l3: Some("ip6"),
        l4: None,
        fields: &[
            f("nexthdr", 0, 8, T::InetProto),
            f("hdrlength", 8, 8, T::Integer(8)),
        ],
    },
    ProtoDesc {
        proto: Proto::Rt,
        name: "rt",
        base: PayloadBase::Ip6Ext(43),
        deps: &[D::Ipv6],
        l3: Some("ip6"),
        l4: None,
        fields: &[
            f("nexthdr", 0, 8, T::InetProto),
            f("hdrlength", 8, 8, T::Integer(8)),
            f("type", 16, 8, T::Integer(8)),
            f("seg-left", 24, 8, T::Integer(8)),
        ],
    },
    ProtoDesc {
        proto: Proto::Frag,
        name: "frag",
        base: PayloadBase::Ip6Ext(44),
        deps: &[D::Ipv6],
        l3: Some("ip6"),
        l4: None,
        fields: &[
            f("nexthdr", 0, 8, T::InetProto),
            f("reserved", 8, 8, T::Integer(8)),
            f("frag-off", 16, 13, T::Integer(13)),
            f("reserved2", 29, 2, T::Integer(2)),
            f("more-fragments", 31, 1, T::Integer(1)),
            f("id", 32, 32, T::Integer(32)),
        ],
    },
    ProtoDesc {
        proto: Proto::Dst,
        name: "dst",
        base: PayloadBase::Ip6Ext(60),
        deps: &[D::Ipv6],
        l3: Some("ip6"),
        l4: None,
        fields: &[
            f("nexthdr", 0, 8, T::InetProto),
            f("hdrlength", 8, 8, T::Integer(8)),
        ],
    },
    ProtoDesc {
        proto: Proto::Mh,
        name: "mh",
        base: PayloadBase::Ip6Ext(135),
        deps: &[D::Ipv6],
        l3: Some("ip6"),
        l4: None,
        fields: &[
            f("nexthdr", 0, 8, T::InetProto),
            f("hdrlength", 8, 8, T::Integer(8)),
            f("type", 16, 8, T::MhType),
            f("reserved", 24, 8, T::Integer(8)),
            f("checksum", 32, 16, T::Integer(16)),
        ],
    },
    ProtoDesc {
        proto: Proto::Srh,
        name: "srh",
        base: PayloadBase::Ip6Ext(43),
        deps: &[D::Ipv6],
        l3: Some("ip6"),
        l4: None,
        // nft's `exthdr_rt4`: the segment list's entries are array fields `sid[N]` (see
        // [`FieldRow::name`]); nft 1.0.6 has templates for the first two only.
        fields: &[
            f("last-entry", 32, 8, T::Integer(8)),
            f("flags", 40, 8, T::Integer(8)),
            f("tag", 48, 16, T::Integer(16)),
            f("sid[1]", 64, 128, T::Ipv6Addr),
            f("sid[2]", 192, 128, T::Ipv6Addr),
        ],
    },
];

const VLAN_DEPS: [[Dependency; 1]; 8] = [
    [D::Vlan(0)],
    [D::Vlan(1)],
    [D::Vlan(2)],
    [D::Vlan(3)],
    [D::Vlan(4)],
    [D::Vlan(5)],
    [D::Vlan(6)],
    [D::Vlan(7)],
];

impl Proto {
    /// The protocol's description.
    pub fn desc(self) -> &'static ProtoDesc {
        &PROTOCOLS[self as usize]
    }

    /// The protocol whose keyword is `name` (`tcp`).
    pub fn by_name(name: &str) -> Option<Proto> {
        PROTOCOLS.iter().find(|d| d.name == name).map(|d| d.proto)
    }
}

impl PayloadField {
    /// `ether type`.
    pub const ETHER_TYPE: PayloadField = PayloadField {
        proto: Proto::Ether,
        field: 2,
        depth: 0,
    };
    /// `vlan type` of the outermost tag (see [`PayloadField::at_depth`]).
    pub const VLAN_TYPE: PayloadField = PayloadField {
        proto: Proto::Vlan,
        field: 3,
        depth: 0,
    };
    /// `ip protocol`.
    pub const IP_PROTOCOL: PayloadField = PayloadField {
        proto: Proto::Ip,
        field: 8,
        depth: 0,
    };
    /// `ip6 nexthdr`.
    pub const IP6_NEXTHDR: PayloadField = PayloadField {
        proto: Proto::Ip6,
        field: 5,
        depth: 0,
    };
    /// `icmp type` (ICMPv6's type sits at the same place: the hidden match of
    /// [`Dependency::IcmpType`] reads either).
    pub const ICMP_TYPE: PayloadField = PayloadField {
        proto: Proto::Icmp,
        field: 0,
        depth: 0,
    };

    /// The field `field` of protocol `proto` (`("ip", "saddr")`; an alias such as `vlan cfi`
    /// too), at vlan depth 0.
    pub fn named(proto: &str, field: &str) -> Option<PayloadField> {
        let p = Proto::by_name(proto)?;
        let field = ALIASES
            .iter()
            .find(|(ap, alias, _)| *ap == p && *alias == field)
            .map_or(field, |(_, _, name)| name);
        let i = p.desc().fields.iter().position(|r| r.name == field)?;
        Some(PayloadField {
            proto: p,
            field: i as u8,
            depth: 0,
        })
    }

    /// The same field of the vlan tag at `depth`.
    pub fn at_depth(self, depth: u8) -> PayloadField {
        PayloadField { depth, ..self }
    }

    /// The field's row in its protocol's table.
    pub fn row(self) -> &'static FieldRow {
        &self.proto.desc().fields[usize::from(self.field)]
    }

    /// The field's name as nft lists it: `ip saddr`, `vlan dei` (for `cfi` too), `arp saddr
    /// ip`.
    pub fn name(self) -> String {
        format!("{} {}", self.proto.desc().name, self.row().name)
    }

    /// `true` for nft's protocol fields (EXPR_F_PROTOCOL): `ether type`, `vlan type`, `ip
    /// protocol`, `ip6 nexthdr`: the field that names the next header.
    pub fn is_protocol_key(self) -> bool {
        matches!(
            (self.proto, self.row().name),
            (Proto::Ether | Proto::Vlan, "type")
                | (Proto::Ip, "protocol")
                | (Proto::Ip6, "nexthdr")
        )
    }

    /// `true` for the EtherType fields a vlan dependency reads (`ether type`, `vlan type`).
    pub fn is_link_type(self) -> bool {
        matches!(self.proto, Proto::Ether | Proto::Vlan) && self.row().name == "type"
    }

    /// Where the field lives: base, bit offset and length, data type, and the dependencies
    /// nft adds in front of a match on it.
    pub fn desc(self) -> FieldDesc {
        let d = self.proto.desc();
        let row = self.row();
        let (offset_bits, deps): (u16, &'static [Dependency]) = if self.proto == Proto::Vlan {
            let depth = usize::from(self.depth.min(7));
            (
                8 * 14 + VLAN_TAG_BITS * u16::from(self.depth) + row.offset_bits,
                &VLAN_DEPS[depth],
            )
        } else if !row.deps.is_empty() {
            (row.offset_bits, row.deps)
        } else {
            (row.offset_bits, d.deps)
        };
        FieldDesc {
            base: d.base,
            offset_bits,
            len_bits: row.len_bits,
            dtype: row.dtype,
            deps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_order_is_the_enum_order() {
        for (i, d) in PROTOCOLS.iter().enumerate() {
            assert_eq!(d.proto as usize, i, "{}", d.name);
        }
    }

    #[test]
    fn fields_fit_their_types_and_names_are_unique() {
        for d in PROTOCOLS {
            for (i, r) in d.fields.iter().enumerate() {
                assert!(
                    r.len_bits <= r.dtype.width_bits(),
                    "{} {}: {} bits in a {}-bit type",
                    d.name,
                    r.name,
                    r.len_bits,
                    r.dtype.width_bits()
                );
                assert!(
                    d.fields[..i].iter().all(|o| o.name != r.name),
                    "{} {} twice",
                    d.name,
                    r.name
                );
            }
        }
    }

    #[test]
    fn named_constants_are_their_rows() {
        assert_eq!(PayloadField::ETHER_TYPE.name(), "ether type");
        assert_eq!(PayloadField::VLAN_TYPE.name(), "vlan type");
        assert_eq!(PayloadField::IP_PROTOCOL.name(), "ip protocol");
        assert_eq!(PayloadField::IP6_NEXTHDR.name(), "ip6 nexthdr");
        assert_eq!(PayloadField::ICMP_TYPE.name(), "icmp type");
        let v6 = PayloadField::named("icmpv6", "type").unwrap().desc();
        let v4 = PayloadField::ICMP_TYPE.desc();
        assert_eq!(
            (v4.base, v4.offset_bits, v4.len_bits),
            (v6.base, v6.offset_bits, v6.len_bits)
        );
    }

    #[test]
    fn positions_match_nft_bytecode() {
        // dccp type: payload load 1b @ transport header + 8, bitwise & 0x1e.
        let d = PayloadField::named("dccp", "type").unwrap().desc();
        assert_eq!(
            (d.offset_bits / 8, d.offset_bits % 8, d.len_bits),
            (8, 3, 4)
        );
        // frag frag-off: exthdr load ipv6 2b @ 44 + 2, & 0xfff8.
        let d = PayloadField::named("frag", "frag-off").unwrap().desc();
        assert_eq!(
            (d.base, d.offset_bits, d.len_bits),
            (PayloadBase::Ip6Ext(44), 16, 13)
        );
        // second vlan tag's id: link header + 18.
        let d = PayloadField::named("vlan", "id")
            .unwrap()
            .at_depth(1)
            .desc();
        assert_eq!(
            (d.offset_bits, d.deps),
            (8 * 18 + 4, &[Dependency::Vlan(1)][..])
        );
        assert_eq!(
            PayloadField::named("vlan", "cfi").unwrap().name(),
            "vlan dei"
        );
        // srh sid[2]: exthdr load ipv6 16b @ 43 + 24; srh tag: 2b @ 43 + 6.
        let d = PayloadField::named("srh", "sid[2]").unwrap().desc();
        assert_eq!(
            (d.base, d.offset_bits / 8, d.len_bits / 8),
            (PayloadBase::Ip6Ext(43), 24, 16)
        );
        let d = PayloadField::named("srh", "tag").unwrap().desc();
        assert_eq!((d.offset_bits / 8, d.len_bits), (6, 16));
    }
}
