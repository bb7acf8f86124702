//! Where each named field lives and which implicit dependencies nft puts in front of it, as
//! `nft --debug=netlink` (nftables 1.0.6) shows the bytecode for the netdev and inet families.
//!
//! Examples from the real bytecode: `vlan id 100` is `payload load 2b @ link header + 14`,
//! `bitwise & 0x0fff`, after `ether type 0x8100`; `ip dscp cs1` loads 1 byte at network + 1 and
//! masks 0xfc; `icmp type` has both `meta protocol ip` and `meta l4proto 1` in front; `th dport`
//! has no dependency at all (it only needs a transport header).

use wasp_ruleset::model::{
    DataType, Dependency, Family, Ip6ExtHdr, MetaKey, PayloadBase, PayloadField,
};

use crate::expr::{Load, Src, mask_bits};

/// An implicit dependency (a match that must hold before the field is read): the ruleset's
/// [`Dependency`]. `Ipv4`/`Ipv6` are `meta protocol ip` (netdev) or `meta nfproto ipv4`
/// (inet); `L4Proto(n)` is `meta l4proto n`; `Vlan(d)` is `ether type 8021q` for the first
/// tag, `vlan type 8021q` of tag `d - 1` for tag `d`; `Arp` is `meta protocol arp`.
pub(crate) type Dep = Dependency;

/// A payload field's position: source, bit offset and bit length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FieldPos {
    pub src: Src,
    pub off_bits: u32,
    pub len_bits: u32,
}

/// Position and dependencies of a payload field, from the protocol tables of
/// [`wasp_ruleset::proto`].
pub(crate) fn payload_field(f: PayloadField) -> (FieldPos, &'static [Dep]) {
    let d = f.desc();
    let src = match d.base {
        PayloadBase::Link => Src::Link,
        PayloadBase::Network => Src::Net,
        PayloadBase::Transport => Src::Transport,
        PayloadBase::Ip6Ext(n) => Src::Ip6Ext(n),
        PayloadBase::Inner => Src::Inner,
    };
    (
        FieldPos {
            src,
            off_bits: u32::from(d.offset_bits),
            len_bits: u32::from(d.len_bits),
        },
        d.deps,
    )
}

/// The load of a raw payload expression `@BASE,OFFSET,LENGTH`.
pub(crate) fn raw_load(base: PayloadBase, off_bits: u16, len_bits: u16) -> Load {
    let src = match base {
        PayloadBase::Link => Src::Link,
        PayloadBase::Network => Src::Net,
        PayloadBase::Transport => Src::Transport,
        PayloadBase::Ip6Ext(n) => Src::Ip6Ext(n),
        PayloadBase::Inner => Src::Inner,
    };
    payload_load(FieldPos {
        src,
        off_bits: u32::from(off_bits),
        len_bits: u32::from(len_bits),
    })
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
        MetaKey::Priority => (Src::Priority, 4),
        MetaKey::Iif => (Src::Iifname, 16),
        MetaKey::Oif => (Src::Oifname, 16),
        // Constants (see `meta_const`); the load is replaced.
        MetaKey::Iiftype => (Src::Const, 2),
        MetaKey::Iifgroup => (Src::Const, 4),
        MetaKey::Oiftype => (Src::OifConst, 2),
        MetaKey::Oifgroup => (Src::OifConst, 4),
        MetaKey::Secpath => (Src::Const, 1),
        MetaKey::Sdif | MetaKey::Sdifname => (Src::Const, 16),
        MetaKey::Skuid | MetaKey::Skgid | MetaKey::Cgroup | MetaKey::Rtclassid => (Src::Never, 4),
        MetaKey::Cpu => (Src::Cpu, 4),
        MetaKey::Pkttype => (Src::Pkttype, 1),
        MetaKey::Random => (Src::Random, 4),
        MetaKey::Time => (Src::Time, 8),
        MetaKey::Day => (Src::Day, 1),
        MetaKey::Hour => (Src::Hour, 4),
    }
}

/// The constant a meta key reads on wasp's devices, for the keys that have one: `iiftype` and
/// `oiftype` are `ether` (ARPHRD_ETHER 1), `iifgroup` and `oifgroup` 0; `ipsec` 0 (no xfrm:
/// `secpath_exists` is false), `sdif` and `sdifname` 0 and `""` (no VRF: the kernel's
/// `nft_meta_get_eval_sdif` reads 0, and no device has index 0).
pub(crate) fn meta_const(k: MetaKey) -> Option<u128> {
    match k {
        MetaKey::Iiftype | MetaKey::Oiftype => Some(1),
        MetaKey::Iifgroup | MetaKey::Oifgroup => Some(0),
        MetaKey::Secpath | MetaKey::Sdif | MetaKey::Sdifname => Some(0),
        _ => None,
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

/// Width in bytes of a value of data type `t` in a set key (its width rounded up to bytes,
/// at least 1).
pub(crate) fn dtype_width(t: DataType) -> u8 {
    t.width_bytes().clamp(1, 16) as u8
}

/// The load and comparison value of a dependency in `family`: `(load, expected value)`.
pub(crate) fn dep_check(d: Dep, family: Family) -> (Load, u128) {
    let inet = family == Family::Inet;
    match d {
        Dep::Ipv4 if inet => (Load::meta(Src::Nfproto, 1), 2),
        Dep::Ipv6 if inet => (Load::meta(Src::Nfproto, 1), 10),
        Dep::Ipv4 => (Load::meta(Src::Protocol, 2), 0x0800),
        Dep::Ipv6 => (Load::meta(Src::Protocol, 2), 0x86dd),
        Dep::Arp => (Load::meta(Src::Protocol, 2), 0x0806),
        Dep::L4Proto(p) => (Load::meta(Src::L4proto, 1), u128::from(p)),
        Dep::IcmpType(t) => (
            payload_load(payload_field(PayloadField::ICMP_TYPE).0),
            u128::from(t),
        ),
        Dep::Vlan(0) => (
            payload_load(payload_field(PayloadField::ETHER_TYPE).0),
            0x8100,
        ),
        Dep::Vlan(d) => (
            payload_load(payload_field(PayloadField::VLAN_TYPE.at_depth(d - 1)).0),
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

    fn pf(proto: &str, field: &str) -> PayloadField {
        PayloadField::named(proto, field).expect("a field of the protocol tables")
    }

    #[test]
    fn loads_match_nft_bytecode() {
        // vlan id: payload load 2b @ link header + 14, & 0x0fff
        let l = payload_load(payload_field(pf("vlan", "id")).0);
        assert_eq!(
            (l.src, l.off, l.len, l.shift, l.mask),
            (Src::Link, 14, 2, 0, 0xfff)
        );
        // second tag: + 18
        let l = payload_load(payload_field(pf("vlan", "id").at_depth(1)).0);
        assert_eq!((l.off, l.len), (18, 2));
        // vlan pcp: 1b @ link + 14, & 0xe0 (here: >> 5, & 7)
        let l = payload_load(payload_field(pf("vlan", "pcp")).0);
        assert_eq!((l.off, l.len, l.shift, l.mask), (14, 1, 5, 7));
        // ip dscp: 1b @ network + 1, & 0xfc
        let l = payload_load(payload_field(pf("ip", "dscp")).0);
        assert_eq!(
            (l.src, l.off, l.len, l.shift, l.mask),
            (Src::Net, 1, 1, 2, 0x3f)
        );
        // ip6 flowlabel: 3b @ network + 1, & 0x0fffff
        let l = payload_load(payload_field(pf("ip6", "flowlabel")).0);
        assert_eq!(
            (l.off, l.len, l.shift, l.mask, l.width),
            (1, 3, 0, 0xfffff, 3)
        );
        // tcp flags: 1b @ transport + 13
        let l = payload_load(payload_field(pf("tcp", "flags")).0);
        assert_eq!((l.src, l.off, l.len), (Src::Transport, 13, 1));
        // ip6 saddr: 16b @ network + 8
        let l = payload_load(payload_field(pf("ip6", "saddr")).0);
        assert_eq!((l.off, l.len, l.mask), (8, 16, u128::MAX));
        // ip hdrlength: low nibble of byte 0
        let l = payload_load(payload_field(pf("ip", "hdrlength")).0);
        assert_eq!((l.off, l.len, l.shift, l.mask), (0, 1, 0, 0xf));
    }
}
