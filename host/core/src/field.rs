//! Where each named field lives and which implicit dependencies nft puts in front of it, as
//! `nft --debug=netlink` (nftables 1.0.6) shows the bytecode for the netdev and inet families.
//!
//! Examples from the real bytecode: `vlan id 100` is `payload load 2b @ link header + 14`,
//! `bitwise & 0x0fff`, after `ether type 0x8100`; `ip dscp cs1` loads 1 byte at network + 1 and
//! masks 0xfc; `icmp type` has both `meta protocol ip` and `meta l4proto 1` in front; `th dport`
//! has no dependency at all (it only needs a transport header).

use wasp_ruleset::model::{DataType, Family, Ip6ExtHdr, MetaKey, PayloadField};

use crate::expr::{Load, Src, mask_bits};

/// An implicit dependency (a match that must hold before the field is read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dep {
    /// The packet is IPv4: `meta protocol ip` (netdev) or `meta nfproto ipv4` (inet).
    Ipv4,
    /// The packet is IPv6.
    Ipv6,
    /// `meta l4proto N`.
    L4(u8),
    /// `ether type 8021q` for the first tag, `vlan type 8021q` of tag `d - 1` for tag `d`.
    Vlan(u8),
}

/// A payload field's position: source, bit offset and bit length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FieldPos {
    pub src: Src,
    pub off_bits: u32,
    pub len_bits: u32,
}

/// Position and dependencies of a payload field.
pub(crate) fn payload_field(f: PayloadField) -> (FieldPos, &'static [Dep]) {
    use PayloadField as P;
    let vlan = |d: u8, bit: u32, len: u32| {
        (
            FieldPos {
                src: Src::Link,
                off_bits: (14 + 4 * u32::from(d)) * 8 + bit,
                len_bits: len,
            },
            d,
        )
    };
    let pos = |src, off_bits, len_bits| FieldPos {
        src,
        off_bits,
        len_bits,
    };
    const V4: &[Dep] = &[Dep::Ipv4];
    const V6: &[Dep] = &[Dep::Ipv6];
    const TCP: &[Dep] = &[Dep::L4(6)];
    const UDP: &[Dep] = &[Dep::L4(17)];
    const ICMP: &[Dep] = &[Dep::Ipv4, Dep::L4(1)];
    const ICMP6: &[Dep] = &[Dep::Ipv6, Dep::L4(58)];
    const VLAN: [&[Dep]; 4] = [
        &[Dep::Vlan(0)],
        &[Dep::Vlan(1)],
        &[Dep::Vlan(2)],
        &[Dep::Vlan(3)],
    ];
    let vdep = |d: u8| VLAN[usize::from(d.min(3))];
    match f {
        P::EtherDaddr => (pos(Src::Link, 0, 48), &[]),
        P::EtherSaddr => (pos(Src::Link, 48, 48), &[]),
        P::EtherType => (pos(Src::Link, 96, 16), &[]),
        P::VlanPcp { depth } => {
            let (p, d) = vlan(depth, 0, 3);
            (p, vdep(d))
        }
        P::VlanCfi { depth } => {
            let (p, d) = vlan(depth, 3, 1);
            (p, vdep(d))
        }
        P::VlanId { depth } => {
            let (p, d) = vlan(depth, 4, 12);
            (p, vdep(d))
        }
        P::VlanType { depth } => {
            let (p, d) = vlan(depth, 16, 16);
            (p, vdep(d))
        }
        P::IpVersion => (pos(Src::Net, 0, 4), V4),
        P::IpHdrLength => (pos(Src::Net, 4, 4), V4),
        P::IpDscp => (pos(Src::Net, 8, 6), V4),
        P::IpLength => (pos(Src::Net, 16, 16), V4),
        P::IpId => (pos(Src::Net, 32, 16), V4),
        P::IpTtl => (pos(Src::Net, 64, 8), V4),
        P::IpProtocol => (pos(Src::Net, 72, 8), V4),
        P::IpSaddr => (pos(Src::Net, 96, 32), V4),
        P::IpDaddr => (pos(Src::Net, 128, 32), V4),
        P::Ip6Flowlabel => (pos(Src::Net, 12, 20), V6),
        P::Ip6Length => (pos(Src::Net, 32, 16), V6),
        P::Ip6Nexthdr => (pos(Src::Net, 48, 8), V6),
        P::Ip6Hoplimit => (pos(Src::Net, 56, 8), V6),
        P::Ip6Saddr => (pos(Src::Net, 64, 128), V6),
        P::Ip6Daddr => (pos(Src::Net, 192, 128), V6),
        P::TcpSport => (pos(Src::Transport, 0, 16), TCP),
        P::TcpDport => (pos(Src::Transport, 16, 16), TCP),
        P::TcpFlags => (pos(Src::Transport, 104, 8), TCP),
        P::UdpSport => (pos(Src::Transport, 0, 16), UDP),
        P::UdpDport => (pos(Src::Transport, 16, 16), UDP),
        P::UdpLength => (pos(Src::Transport, 32, 16), UDP),
        P::IcmpType => (pos(Src::Transport, 0, 8), ICMP),
        P::IcmpCode => (pos(Src::Transport, 8, 8), ICMP),
        P::Icmpv6Type => (pos(Src::Transport, 0, 8), ICMP6),
        P::Icmpv6Code => (pos(Src::Transport, 8, 8), ICMP6),
        P::ThSport => (pos(Src::Transport, 0, 16), &[]),
        P::ThDport => (pos(Src::Transport, 16, 16), &[]),
    }
}

/// The load of a payload field: the byte-aligned bytes that cover it (as nft loads them), then a
/// shift and mask that right-align the field's bits.
pub(crate) fn payload_load(p: FieldPos) -> Load {
    let first = p.off_bits / 8;
    let lead = p.off_bits % 8;
    let len = (lead + p.len_bits).div_ceil(8);
    let shift = len * 8 - lead - p.len_bits;
    let width = p.len_bits.div_ceil(8);
    Load {
        src: p.src,
        off: first as u16,
        len: len as u8,
        need: len as u8,
        shift: shift as u8,
        mask: mask_bits(p.len_bits),
        xor: 0,
        width: width as u8,
    }
}

/// Source and width in bytes of a meta key.
pub(crate) fn meta_src(k: MetaKey) -> (Src, u8) {
    match k {
        MetaKey::Iifname => (Src::Iifname, 16),
        MetaKey::Oifname => (Src::Oifname, 16),
        MetaKey::L4proto => (Src::L4proto, 1),
        MetaKey::Nfproto => (Src::Nfproto, 1),
        MetaKey::Protocol => (Src::Protocol, 2),
        MetaKey::Len => (Src::Len, 4),
        MetaKey::Mark => (Src::Mark, 4),
        MetaKey::Nftrace => (Src::Nftrace, 1),
    }
}

/// Bit of an extension header in `PacketMeta::ip6_exthdrs`.
pub(crate) fn exthdr_bit(h: Ip6ExtHdr) -> u16 {
    let n = match h {
        Ip6ExtHdr::HopByHop => 0,
        Ip6ExtHdr::Routing => 43,
        Ip6ExtHdr::Fragment => 44,
        Ip6ExtHdr::DestOpts => 60,
        Ip6ExtHdr::Mobility => 135,
    };
    wasp_wire::meta::exthdr_bit(n).unwrap_or(0)
}

/// Width in bytes of a value of data type `t` in a set key.
pub(crate) fn dtype_width(t: DataType) -> u8 {
    match t {
        DataType::Integer(bits) => u32::from(bits).div_ceil(8).clamp(1, 16) as u8,
        DataType::Ipv4Addr => 4,
        DataType::Ipv6Addr => 16,
        DataType::EtherAddr => 6,
        DataType::EtherType => 2,
        DataType::InetProto => 1,
        DataType::InetService => 2,
        DataType::Mark => 4,
        DataType::Ifname => 16,
        DataType::TcpFlag => 1,
        DataType::IcmpType | DataType::IcmpCode => 1,
        DataType::Icmpv6Type | DataType::Icmpv6Code => 1,
        DataType::Dscp => 1,
        DataType::NfProto => 1,
        DataType::Boolean => 1,
        DataType::Verdict | DataType::CtState | DataType::CtStatus => 4,
        DataType::CtDir => 1,
    }
}

/// The load and comparison value of a dependency in `family`: `(load, expected value)`.
pub(crate) fn dep_check(d: Dep, family: Family) -> (Load, u128) {
    let inet = family == Family::Inet;
    match d {
        Dep::Ipv4 if inet => (Load::meta(Src::Nfproto, 1), 2),
        Dep::Ipv6 if inet => (Load::meta(Src::Nfproto, 1), 10),
        Dep::Ipv4 => (Load::meta(Src::Protocol, 2), 0x0800),
        Dep::Ipv6 => (Load::meta(Src::Protocol, 2), 0x86dd),
        Dep::L4(p) => (Load::meta(Src::L4proto, 1), u128::from(p)),
        Dep::Vlan(0) => (
            payload_load(payload_field(PayloadField::EtherType).0),
            0x8100,
        ),
        Dep::Vlan(d) => (
            payload_load(payload_field(PayloadField::VlanType { depth: d - 1 }).0),
            0x8100,
        ),
    }
}

/// The field an explicit match must name to stand in for dependency `d` (nft adds no implicit
/// dependency when the rule already matches that field, e.g. `ether type 8021ad vlan id 10`).
pub(crate) fn dep_field_load(d: Dep, family: Family) -> Load {
    dep_check(d, family).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_match_nft_bytecode() {
        // vlan id: payload load 2b @ link header + 14, & 0x0fff
        let l = payload_load(payload_field(PayloadField::VlanId { depth: 0 }).0);
        assert_eq!(
            (l.src, l.off, l.len, l.shift, l.mask),
            (Src::Link, 14, 2, 0, 0xfff)
        );
        // second tag: + 18
        let l = payload_load(payload_field(PayloadField::VlanId { depth: 1 }).0);
        assert_eq!((l.off, l.len), (18, 2));
        // vlan pcp: 1b @ link + 14, & 0xe0 (here: >> 5, & 7)
        let l = payload_load(payload_field(PayloadField::VlanPcp { depth: 0 }).0);
        assert_eq!((l.off, l.len, l.shift, l.mask), (14, 1, 5, 7));
        // ip dscp: 1b @ network + 1, & 0xfc
        let l = payload_load(payload_field(PayloadField::IpDscp).0);
        assert_eq!(
            (l.src, l.off, l.len, l.shift, l.mask),
            (Src::Net, 1, 1, 2, 0x3f)
        );
        // ip6 flowlabel: 3b @ network + 1, & 0x0fffff
        let l = payload_load(payload_field(PayloadField::Ip6Flowlabel).0);
        assert_eq!(
            (l.off, l.len, l.shift, l.mask, l.width),
            (1, 3, 0, 0xfffff, 3)
        );
        // tcp flags: 1b @ transport + 13
        let l = payload_load(payload_field(PayloadField::TcpFlags).0);
        assert_eq!((l.src, l.off, l.len), (Src::Transport, 13, 1));
        // ip6 saddr: 16b @ network + 8
        let l = payload_load(payload_field(PayloadField::Ip6Saddr).0);
        assert_eq!((l.off, l.len, l.mask), (8, 16, u128::MAX));
        // ip hdrlength: low nibble of byte 0
        let l = payload_load(payload_field(PayloadField::IpHdrLength).0);
        assert_eq!((l.off, l.len, l.shift, l.mask), (0, 1, 0, 0xf));
    }
}
