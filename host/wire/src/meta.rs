//! Per-packet metadata: one walk over the frame, read by every expression.

use crate::bytes::{be16, get_be16};
use crate::ethernet::{self, ethertype};
use crate::{arp, geneve, icmp, icmpv6, ipv4, ipv6, ipv6_ext, tcp, udp, vlan, vxlan};

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
    /// Offset in bytes of the transport header from the start of the frame (the kernel's
    /// `thoff` plus the network offset). Where the kernel's `thoff` lies past the end of the
    /// frame (an IPv6 extension header longer than the capture, whose next header is not an
    /// extension header), this is the frame length, so every transport read fails as in the
    /// kernel. For a non-first IPv6 fragment it is the fragment's data (the kernel leaves `thoff`
    /// at 0 there; `fragoff` is non-zero so no transport read happens either way).
    pub offset: u16,
    /// Fragment offset in bytes (0 for an unfragmented packet or a first fragment). Transport
    /// header matches never match when this is non-zero, as in the kernel. (The kernel keeps
    /// IPv4's in 8-byte units; only zero versus non-zero matters to nftables.)
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
    /// Protocol of the inner payload as an EtherType: Geneve's protocol type field (0x6558 for
    /// Ethernet, 0x0800 for IPv4 directly, ...); always 0x6558 for VXLAN.
    pub inner_proto: u16,
}

/// Everything learned about a frame in one walk. All offsets are in bytes from the start of the
/// frame and are guaranteed to be at most `len` (and at most [`MAX_WALK_LEN`]).
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
    /// Bit mask of IPv6 extension headers present in the chain, indexed by [`exthdr_bit`]: bit
    /// set exactly when the kernel's `exthdr <type> exists` is true, i.e. when
    /// `ipv6_find_hdr(skb, &off, type, NULL, NULL)` succeeds (it walks through AH, stops after a
    /// non-first fragment's header, finds ESP and mobility only as the last header of the
    /// chain). Computed on the network header when `protocol` is 0x86dd, whether or not the
    /// packet passed validation (nftables adds only a `meta protocol ip6` dependency); 0
    /// otherwise.
    pub ip6_exthdrs: u16,
    /// Transport facts for the header behind every VLAN tag (at `inner_l3_offset`, judged by
    /// `inner_ethertype`), validated as `l4` is. Equal to `l4` for a frame with at most one
    /// 802.1Q/802.1ad tag; for deeper stacks (which the kernel's hook sees as `protocol` 0x8100
    /// and no L4 info) it still describes the inner packet.
    pub inner_l4: Option<L4Info>,
    /// The kernel frees this frame before the netdev ingress hook: its first 802.1Q/802.1ad tag
    /// is not followed by 2 more bytes (`skb_vlan_untag` pulls 4 + 2 bytes after the Ethernet
    /// header). No ingress chain sees such a frame.
    pub untag_drop: bool,
    /// Tunnel found behind the inner transport header (`inner_l4`, UDP destination port 4789 or
    /// 6081, not a non-first fragment), if any.
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

/// Frames longer than this many bytes are walked over their first `MAX_WALK_LEN` bytes only
/// (offsets are `u16`); `len` still reports the whole length.
pub const MAX_WALK_LEN: usize = u16::MAX as usize;

/// Walk `frame` (an Ethernet II frame as captured, without FCS) once and describe it.
///
/// The kernel-view fields (`protocol`, `net_offset`, `l3`, `l4`, `ip6_exthdrs`, `untag_drop`)
/// follow `eth_type_trans`, `skb_vlan_untag` and `nft_do_chain_netdev` with
/// `nft_set_pktinfo_ipv4_validate` / `nft_set_pktinfo_ipv6_validate`; the generic fields walk
/// every VLAN tag. Never panics, never reads past `frame.len()`, allocates nothing.
pub fn parse(frame: &[u8]) -> PacketMeta {
    let mut m = PacketMeta {
        len: u32::try_from(frame.len()).unwrap_or(u32::MAX),
        ..PacketMeta::default()
    };
    let f = &frame[..frame.len().min(MAX_WALK_LEN)];
    let Ok(eth) = ethernet::Frame::new_checked(f) else {
        m.malformed = Some(Malformed::ShortEthernet);
        return m;
    };
    kernel_link_layer(f, eth, &mut m);

    // Generic view: every tag.
    let mut stack = vlan::Stack::new(eth);
    for t in stack.by_ref() {
        if let Some(slot) = m.vlans.get_mut(usize::from(m.vlan_count)) {
            *slot = VlanTag {
                offset: off16(t.offset),
                tpid: t.tpid,
                tci: t.tag.tci(),
            };
            m.vlan_count += 1;
        }
    }
    let l3_offset = stack.type_offset() + 2;
    m.inner_ethertype = stack.ethertype();
    m.inner_l3_offset = off16(l3_offset);
    if stack.truncated() {
        flag(&mut m.malformed, Malformed::TruncatedVlan);
        return m;
    }

    let transport = network_layer(f, m.inner_ethertype, l3_offset, &mut m.malformed);
    m.inner_l4 = transport.map(|t| t.info);
    if matches!(m.protocol, ethertype::IPV4 | ethertype::IPV6)
        && m.net_offset == m.inner_l3_offset
        && m.protocol == m.inner_ethertype
    {
        m.l4 = m.inner_l4;
    }
    if m.protocol == ethertype::IPV6 {
        m.ip6_exthdrs = exthdr_mask(&f[usize::from(m.net_offset)..]);
    }
    if let Some(t) = transport {
        transport_layer(f, t, &mut m);
    }
    m
}

/// Record `what` unless an earlier problem was found.
#[inline]
fn flag(slot: &mut Option<Malformed>, what: Malformed) {
    if slot.is_none() {
        *slot = Some(what);
    }
}

/// An offset already known to be at most `MAX_WALK_LEN`.
#[inline]
fn off16(x: usize) -> u16 {
    u16::try_from(x).unwrap_or(u16::MAX)
}

/// `skb->protocol` and the network header as the netdev ingress hook sees them.
fn kernel_link_layer(f: &[u8], eth: ethernet::Frame<'_>, m: &mut PacketMeta) {
    let t = eth.ethertype();
    let (protocol, net) = if ethernet::is_kernel_vlan_tpid(t) {
        // skb_vlan_untag: pskb_may_pull(VLAN_HLEN + 2) after the Ethernet header, or the frame
        // is freed; then vlan_set_encap_proto on the tag's type and the 2 bytes after it.
        match f.get(ethernet::HEADER_LEN..ethernet::HEADER_LEN + vlan::HEADER_LEN + 2) {
            Some(_) => {
                let inner = be16(f, ethernet::HEADER_LEN + vlan::field::ETHERTYPE);
                let net = ethernet::HEADER_LEN + vlan::HEADER_LEN;
                (ethernet::kernel_protocol(inner, &f[net..]), net)
            }
            None => {
                m.untag_drop = true;
                (t, ethernet::HEADER_LEN)
            }
        }
    } else {
        (
            ethernet::kernel_protocol(t, eth.payload()),
            ethernet::HEADER_LEN,
        )
    };
    m.protocol = protocol;
    m.net_offset = off16(net);
    m.l3 = if net >= f.len() {
        L3Kind::None
    } else {
        match protocol {
            ethertype::IPV4 => L3Kind::Ipv4,
            ethertype::IPV6 => L3Kind::Ipv6,
            ethertype::ARP => L3Kind::Arp,
            p => L3Kind::Other(p),
        }
    };
}

/// What the network layer walk found: the transport facts and where the network payload ends.
#[derive(Clone, Copy)]
struct Transport {
    info: L4Info,
    /// End of the network packet (IPv4 total length, IPv6 payload length; the frame end for an
    /// IPv6 jumbogram), never past the frame.
    end: usize,
}

/// Validate the network header at `at` as the kernel does and find the transport header.
fn network_layer(
    f: &[u8],
    ethertype: u16,
    at: usize,
    malformed: &mut Option<Malformed>,
) -> Option<Transport> {
    let b = &f[at..];
    match ethertype {
        ethertype::IPV4 => {
            let r = ipv4_validate(b);
            if r.is_none() {
                flag(malformed, Malformed::BadIpv4);
            }
            r.map(|(info, end)| Transport {
                info: L4Info {
                    offset: off16(at + usize::from(info.offset)),
                    ..info
                },
                end: at + end,
            })
        }
        ethertype::IPV6 => {
            let (info, end) = match ipv6_validate(b) {
                Ok(r) => r,
                Err(what) => {
                    flag(malformed, what);
                    return None;
                }
            };
            let abs = at + usize::from(info.offset);
            if abs > f.len() {
                flag(malformed, Malformed::BadIpv6ExtHeader);
            }
            Some(Transport {
                info: L4Info {
                    offset: off16(abs.min(f.len())),
                    ..info
                },
                end: at + end,
            })
        }
        ethertype::ARP => {
            if arp::Packet::new_checked(b).is_err() {
                flag(malformed, Malformed::TruncatedArp);
            }
            None
        }
        _ => None,
    }
}

/// `nft_set_pktinfo_ipv4_validate` over `b` (network header to end of frame): `L4Info` with the
/// offset relative to `b`, and the end of the packet (total length).
fn ipv4_validate(b: &[u8]) -> Option<(L4Info, usize)> {
    let ip = ipv4::Packet::new_checked(b).ok()?;
    let hl = ip.header_len();
    let total = usize::from(ip.total_len());
    if ip.version() != 4 || total > b.len() || total < hl {
        return None;
    }
    Some((
        L4Info {
            proto: ip.protocol(),
            offset: off16(hl),
            fragoff: ip.frag_offset(),
        },
        total,
    ))
}

/// `nft_set_pktinfo_ipv6_validate` over `b`: `L4Info` with the offset relative to `b` (possibly
/// past its end, see [`ipv6_ext::Found::offset`]), and the end of the packet.
fn ipv6_validate(b: &[u8]) -> Result<(L4Info, usize), Malformed> {
    let ip = ipv6::Packet::new_checked(b).map_err(|_| Malformed::BadIpv6)?;
    let end = ipv6::HEADER_LEN + usize::from(ip.payload_len());
    if ip.version() != 6 || end > b.len() {
        return Err(Malformed::BadIpv6);
    }
    let found = ipv6_ext::find_hdr(b, None, true).map_err(|_| Malformed::BadIpv6ExtHeader)?;
    // nft_set_pktinfo_ipv6_validate: `thoff > U16_MAX` fails.
    let offset = u16::try_from(found.offset).map_err(|_| Malformed::BadIpv6ExtHeader)?;
    let end = if ip.payload_len() == 0 { b.len() } else { end };
    Ok((
        L4Info {
            proto: found.proto,
            offset,
            fragoff: found.fragoff,
        },
        end,
    ))
}

/// Check the transport header's fixed part and look for a tunnel behind UDP.
fn transport_layer(f: &[u8], t: Transport, m: &mut PacketMeta) {
    if t.info.fragoff != 0 {
        return;
    }
    let start = usize::from(t.info.offset);
    let seg = f.get(start..t.end.min(f.len())).unwrap_or(&[]);
    let ok = match t.info.proto {
        ipv4::protocol::TCP => tcp::Packet::new_checked(seg).is_ok(),
        ipv4::protocol::ICMP => icmp::Packet::new_checked(seg).is_ok(),
        ipv4::protocol::ICMPV6 => icmpv6::Packet::new_checked(seg).is_ok(),
        ipv4::protocol::UDP => match udp::Packet::new_checked(seg) {
            Ok(u) => {
                tunnel(u, start + udp::HEADER_LEN, m);
                true
            }
            Err(_) => false,
        },
        _ => true,
    };
    if !ok {
        flag(&mut m.malformed, Malformed::TruncatedL4);
    }
}

/// Recognise VXLAN or Geneve on the UDP destination port; `at` is the UDP payload's offset.
fn tunnel(u: udp::Packet<'_>, at: usize, m: &mut PacketMeta) {
    let payload = u.payload();
    let inner = |hl: usize| (payload.len() > hl).then(|| off16(at + hl));
    match u.dst_port() {
        udp::PORT_VXLAN => match vxlan::Header::new_checked(payload) {
            Ok(h) => {
                m.tunnel = Some(Tunnel {
                    kind: TunnelKind::Vxlan,
                    offset: off16(at),
                    inner_offset: inner(vxlan::HEADER_LEN),
                    vni: h.vni(),
                    inner_proto: ethertype::TEB,
                });
            }
            Err(_) => flag(&mut m.malformed, Malformed::BadTunnel),
        },
        udp::PORT_GENEVE => {
            let Some(fixed) = payload.get(..geneve::MIN_HEADER_LEN) else {
                flag(&mut m.malformed, Malformed::BadTunnel);
                return;
            };
            let mut tunnel = Tunnel {
                kind: TunnelKind::Geneve,
                offset: off16(at),
                inner_offset: None,
                vni: crate::bytes::be24(fixed, geneve::field::VNI),
                inner_proto: be16(fixed, geneve::field::PROTOCOL),
            };
            match geneve::Header::new_checked(payload) {
                Ok(h) if h.version() == 0 => {
                    tunnel.inner_offset = inner(h.header_len());
                    if !options_complete(h) {
                        flag(&mut m.malformed, Malformed::BadTunnel);
                    }
                }
                _ => flag(&mut m.malformed, Malformed::BadTunnel),
            }
            m.tunnel = Some(tunnel);
        }
        _ => {}
    }
}

/// Whether a Geneve header's options fill its option area exactly.
fn options_complete(h: geneve::Header<'_>) -> bool {
    let mut it = h.option_iter();
    for _ in it.by_ref() {}
    it.remainder().is_empty()
}

/// The bits of [`PacketMeta::ip6_exthdrs`] for the IPv6 header at the start of `ip6`: one walk
/// that gives, for every type at once, what `ipv6_find_hdr(target = type, flags = NULL)` gives.
fn exthdr_mask(ip6: &[u8]) -> u16 {
    use ipv4::protocol::{FRAGMENT, NONE, ROUTING};
    let Some(&first) = ip6.get(ipv6::field::NEXT_HEADER) else {
        return 0;
    };
    let mut mask = 0;
    let mut next = first;
    let mut start = ipv6::HEADER_LEN;
    loop {
        let bit = exthdr_bit(next).unwrap_or(0);
        if !ipv6_ext::is_kernel_ext_hdr(next) || next == NONE {
            // Found only when it is the target itself (ESP, mobility); the walk ends here.
            return mask | bit;
        }
        let (Some(&hp_next), Some(&hp_len)) = (ip6.get(start), ip6.get(start + 1)) else {
            return mask;
        };
        if next == ROUTING && ip6.get(start + 3).is_none() {
            return mask;
        }
        if next == FRAGMENT {
            let Some(word) = get_be16(ip6, start + ipv6_ext::field::FRAG_OFFSET) else {
                return mask;
            };
            if word & !0x7 != 0 {
                // A non-first fragment: found if it is the target, nothing after it is.
                return mask | bit;
            }
        }
        mask |= bit;
        start += ipv6_ext::header_len(next, hp_len);
        next = hp_next;
    }
}
