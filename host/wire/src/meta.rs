//! Per-packet metadata: one walk over the frame, read by every expression.

/// Maximum number of VLAN tags recorded in [`PacketMeta::vlans`]. Deeper stacks are parsed past
/// (the walk continues to the payload) but only the first `MAX_VLAN_TAGS` are kept.
pub const MAX_VLAN_TAGS: usize = 4;

/// One 802.1Q / 802.1ad tag as found in the frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VlanTag {
    /// Offset in bytes of the tag's TPID field (the EtherType that announced the tag) from the
    /// start of the frame; the TCI follows at `offset + 2`.
    pub offset: u16,
    /// Tag protocol identifier: 0x8100 (802.1Q), 0x88a8 (802.1ad) or 0x9100.
    pub tpid: u16,
    /// Tag control information: PCP (3 bits), DEI (1 bit), VID (12 bits).
    pub tci: u16,
}

/// Kind of network header found behind the link layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum L3Kind {
    /// Nothing recognised (or the frame ends before a network header).
    #[default]
    None,
    /// IPv4 (EtherType 0x0800).
    Ipv4,
    /// IPv6 (EtherType 0x86dd).
    Ipv6,
    /// ARP (EtherType 0x0806).
    Arp,
    /// Any other EtherType, kept as a number.
    Other(u16),
}

/// Transport-layer facts in the form of the kernel's `nft_pktinfo` (`tprot`, `thoff`, `fragoff`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct L4Info {
    /// L4 protocol number (`meta l4proto`), e.g. 6 for TCP, 58 for ICMPv6.
    pub proto: u8,
    /// Offset in bytes of the transport header from the start of the frame.
    pub offset: u16,
    /// Fragment offset in bytes (0 for an unfragmented packet or a first fragment). Transport
    /// header matches never match when this is non-zero, as in the kernel.
    pub fragoff: u16,
}

/// The first problem found while walking a frame. The packet still gets a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// The frame is shorter than an Ethernet header (14 bytes).
    ShortEthernet,
    /// A VLAN tag is cut off by the end of the capture.
    TruncatedVlan,
    /// The IPv4 header is cut off, has a bad version or IHL, or a total length that does not fit
    /// the captured bytes.
    BadIpv4,
    /// The IPv6 header is cut off, has a bad version, or a payload length that does not fit.
    BadIpv6,
    /// An IPv6 extension header is cut off or its length runs past the capture.
    BadIpv6ExtHeader,
    /// The transport header is shorter than its fixed part (TCP 20, UDP 8, ICMP 4 bytes) or TCP's
    /// data offset is below 5 or past the capture.
    TruncatedL4,
    /// A tunnel header (VXLAN, Geneve) or a Geneve option is cut off.
    BadTunnel,
    /// An ARP packet is shorter than its fixed header.
    TruncatedArp,
}

/// Tunnel encapsulation recognised on a well-known UDP port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunnelKind {
    /// VXLAN, UDP port 4789.
    Vxlan,
    /// Geneve, UDP port 6081.
    Geneve,
}

/// Where a tunnel header and its payload sit in the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunnel {
    /// Which tunnel protocol.
    pub kind: TunnelKind,
    /// Offset in bytes of the tunnel header (just after the outer UDP header).
    pub offset: u16,
    /// Offset in bytes of the inner payload (after Geneve options), or `None` when the header
    /// ends the capture.
    pub inner_offset: Option<u16>,
    /// Virtual network identifier (24 bits).
    pub vni: u32,
}

/// Everything learned about a frame in one walk. All offsets are in bytes from the start of the
/// frame and are guaranteed to be within `len`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketMeta {
    /// Captured length of the frame in bytes.
    pub len: u32,
    /// VLAN tags in frame order (outermost first); `vlan_count` of them are valid.
    pub vlans: [VlanTag; MAX_VLAN_TAGS],
    /// Number of valid entries in `vlans`.
    pub vlan_count: u8,
    /// The EtherType after every VLAN tag: the protocol of the payload (e.g. 0x0800).
    pub inner_ethertype: u16,
    /// Offset of the header behind every VLAN tag (where `inner_ethertype`'s header starts).
    pub inner_l3_offset: u16,
    /// `skb->protocol` as the kernel's netdev ingress hook sees it. The kernel moves the first
    /// VLAN tag into skb metadata before the hook (`skb_vlan_untag`), so this is the EtherType
    /// after the outermost tag only: 0x0800 for `eth/vlan/ip`, 0x8100 for `eth/vlan/vlan/ip`.
    pub protocol: u16,
    /// Offset of the network header as the kernel's netdev ingress hook sees it: after the
    /// Ethernet header and the first VLAN tag, if any. `ip ...`/`ip6 ...` payload matches read
    /// here.
    pub net_offset: u16,
    /// The header found at `net_offset`, judged by `protocol`.
    pub l3: L3Kind,
    /// Transport facts, present only when the network header passed the kernel's validation
    /// (`nft_set_pktinfo_ipv4_validate` / `_ipv6_validate`): IPv4 version and IHL sane, total
    /// length within the captured bytes and at least the header length; IPv6 version 6, payload
    /// length within the captured bytes, the extension header chain walkable as
    /// `ipv6_find_hdr` walks it. `None` means `meta l4proto` reads 0 and transport matches fail.
    pub l4: Option<L4Info>,
    /// Bit mask of IPv6 extension headers present in the chain, indexed by [`exthdr_bit`].
    pub ip6_exthdrs: u16,
    /// Tunnel found behind the transport header, if any.
    pub tunnel: Option<Tunnel>,
    /// First problem found; `None` for a well-formed frame.
    pub malformed: Option<Malformed>,
}

/// Bit in [`PacketMeta::ip6_exthdrs`] for an IPv6 extension header type: hop-by-hop (0),
/// routing (43), fragment (44), destination options (60), mobility (135), AH (51), ESP (50).
/// Returns `None` for a protocol number that is not an extension header.
pub fn exthdr_bit(nexthdr: u8) -> Option<u16> {
    let bit = match nexthdr {
        0 => 0,
        43 => 1,
        44 => 2,
        60 => 3,
        135 => 4,
        51 => 5,
        50 => 6,
        _ => return None,
    };
    Some(1 << bit)
}

/// Walk `frame` (an Ethernet II frame as captured) once and describe it.
///
/// Never panics and never reads past `frame.len()`, whatever the bytes.
pub fn parse(frame: &[u8]) -> PacketMeta {
    let _ = frame;
    todo!("implemented by the wire parser")
}
