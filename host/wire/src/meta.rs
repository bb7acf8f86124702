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
    /// Offset in bytes of the transport header from the start of the frame: the kernel's
    /// `thoff` plus the network offset. Where the kernel's `thoff` lies past the end of the
    /// frame (an IPv6 extension header longer than the capture, whose next header is not an
    /// extension header), this is the frame length, so every transport read fails as in the
    /// kernel. For a non-first IPv6 fragment it is the network header itself: `ipv6_find_hdr`
    /// returns there without writing its offset, so `thoff` stays 0 (see
    /// [`ipv6_ext::Found::offset`]); for a non-first IPv4 fragment it is the fragment's data after
    /// the IPv4 header. The kernel's fast payload path reads transport fields from there.
    pub offset: u16,
    /// Fragment offset in bytes (0 for an unfragmented packet or a first fragment). A non-zero
    /// value makes the kernel's generic transport load (`nft_payload_eval`) fail, but not its
    /// fast path (`nft_payload_fast_eval`, 1-, 2- or 4-byte loads aligned to their length), which
    /// checks only that L4 info exists: `tcp dport`, `th sport`, `icmp type`... still read the
    /// fragment's bytes at `offset`. (The kernel keeps IPv4's in 8-byte units; only zero versus
    /// non-zero matters to nftables.)
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
    /// header): its EtherType at offset 12 is 0x8100 or 0x88a8 and it is shorter than 20 bytes.
    /// No ingress chain sees such a frame; the engine gives it drop with no decision.
    pub untag_drop: bool,
    /// Tunnel found behind the inner transport header (`inner_l4`, UDP destination port 4789 or
    /// 6081, not a non-first fragment), if any.
    pub tunnel: Option<Tunnel>,
    /// First problem found; `None` for a well-formed frame.
    pub malformed: Option<Malformed>,
}

impl PacketMeta {
    /// The (source, destination) addresses of the network header at `net_offset` of `frame`
    /// (the frame this meta was parsed from): IPv4 or IPv6 by `l3`; `None` for another header
    /// or one cut short before its addresses.
    pub fn ip_addrs(&self, frame: &[u8]) -> Option<(std::net::IpAddr, std::net::IpAddr)> {
        let ip = frame.get(usize::from(self.net_offset)..)?;
        let pair = |s: std::ops::Range<usize>, d: std::ops::Range<usize>| -> Option<_> {
            let (s, d) = (ip.get(s)?, ip.get(d)?);
            Some(match s.len() {
                4 => (
                    <[u8; 4]>::try_from(s).ok()?.into(),
                    <[u8; 4]>::try_from(d).ok()?.into(),
                ),
                _ => (
                    <[u8; 16]>::try_from(s).ok()?.into(),
                    <[u8; 16]>::try_from(d).ok()?.into(),
                ),
            })
        };
        match self.l3 {
            L3Kind::Ipv4 => pair(12..16, 16..20),
            L3Kind::Ipv6 => pair(8..24, 24..40),
            _ => None,
        }
    }
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
///
/// The common frame (untagged IPv4 without options or IPv6 without extension headers, valid,
/// not a fragment, carrying a whole TCP header, a UDP header on a port that is no tunnel's,
/// or ICMP/ICMPv6) is described by one straight walk; every other frame by the general one,
/// which gives the same answer for the common frame too.
#[inline]
pub fn parse(frame: &[u8]) -> PacketMeta {
    let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
    let f = &frame[..frame.len().min(MAX_WALK_LEN)];
    parse_common(f, len).unwrap_or_else(|| parse_walk(f, len))
}

/// Offsets of the common frame's headers: Ethernet, then the network header, then IPv4's
/// transport header (no options) and IPv6's (no extension header).
const NET: usize = ethernet::HEADER_LEN;
const TH4: usize = NET + ipv4::MIN_HEADER_LEN;
const TH6: usize = NET + ipv6::HEADER_LEN;

/// The description of the common frame, in one straight walk: untagged, IPv4 without
/// options or IPv6 without extension headers, valid as the kernel validates it, not a
/// fragment, carrying a whole TCP header, a UDP header on a port that is no tunnel's, or an
/// ICMP (IPv4) or ICMPv6 (IPv6) header. `None` for any other frame. `f` is the frame cut to
/// [`MAX_WALK_LEN`], `len` its whole length. For every frame where it answers, it answers as
/// [`parse_walk`] (a test compares the two over generated and mutated frames).
#[inline]
fn parse_common(f: &[u8], len: u32) -> Option<PacketMeta> {
    let protocol = get_be16(f, ethernet::field::ETHERTYPE)?;
    let (l3, proto, th, end) = match protocol {
        ethertype::IPV4 => {
            // Version 4, IHL 5; total length within the capture; no fragment offset.
            let ip = f.get(NET..TH4)?;
            let total = usize::from(be16(ip, ipv4::field::TOTAL_LEN));
            let frag = be16(ip, ipv4::field::FLAGS_FRAG) & ipv4::FRAG_OFFSET_MASK;
            let proto = ip[ipv4::field::PROTOCOL];
            if ip[0] != 0x45 || total < ipv4::MIN_HEADER_LEN || NET + total > f.len() || frag != 0 {
                return None;
            }
            if !matches!(
                proto,
                ipv4::protocol::TCP | ipv4::protocol::UDP | ipv4::protocol::ICMP
            ) {
                return None;
            }
            (L3Kind::Ipv4, proto, TH4, NET + total)
        }
        ethertype::IPV6 => {
            // Version 6; a payload length within the capture (not a jumbogram); a transport
            // header next.
            let ip = f.get(NET..TH6)?;
            let plen = usize::from(be16(ip, ipv6::field::PAYLOAD_LEN));
            let proto = ip[ipv6::field::NEXT_HEADER];
            if ip[0] >> 4 != 6 || plen == 0 || TH6 + plen > f.len() {
                return None;
            }
            if !matches!(
                proto,
                ipv4::protocol::TCP | ipv4::protocol::UDP | ipv4::protocol::ICMPV6
            ) {
                return None;
            }
            (L3Kind::Ipv6, proto, TH6, TH6 + plen)
        }
        _ => return None,
    };
    let seg = &f[th..end];
    let whole = match proto {
        ipv4::protocol::TCP => {
            let hl = usize::from(*seg.get(tcp::field::DATA_OFF)? >> 4) * 4;
            hl >= tcp::MIN_HEADER_LEN && seg.len() >= hl
        }
        ipv4::protocol::UDP => {
            let port = get_be16(seg, udp::field::DST_PORT)?;
            if port == udp::PORT_VXLAN || port == udp::PORT_GENEVE {
                return None;
            }
            seg.len() >= udp::HEADER_LEN
        }
        _ => seg.len() >= icmp::MIN_HEADER_LEN,
    };
    if !whole {
        return None;
    }
    let l4 = Some(L4Info {
        proto,
        offset: th as u16,
        fragoff: 0,
    });
    Some(PacketMeta {
        len,
        vlans: [VlanTag::default(); MAX_VLAN_TAGS],
        vlan_count: 0,
        inner_ethertype: protocol,
        inner_l3_offset: NET as u16,
        protocol,
        net_offset: NET as u16,
        l3,
        l4,
        ip6_exthdrs: 0,
        inner_l4: l4,
        untag_drop: false,
        tunnel: None,
        malformed: None,
    })
}

/// The general walk of [`parse`]: every link layer, tag stack, network and transport header
/// and tunnel it knows. `f` is the frame cut to [`MAX_WALK_LEN`], `len` its whole length.
fn parse_walk(f: &[u8], len: u32) -> PacketMeta {
    let mut m = PacketMeta {
        len,
        ..PacketMeta::default()
    };
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
    let mut mask = 0;
    walk_exthdrs(ip6, |next, _| {
        mask |= exthdr_bit(next).unwrap_or(0);
        false
    });
    mask
}

/// Offset in `ip6` (an IPv6 header and what follows it) of the extension header of type
/// `target`, where the kernel's `ipv6_find_hdr(target)` finds it (nft's `exthdr load ipv6`):
/// `None` when the chain does not hold it, or ends (truncated, a non-first fragment) before it.
pub fn ip6_exthdr_offset(ip6: &[u8], target: u8) -> Option<usize> {
    let mut found = None;
    walk_exthdrs(ip6, |next, start| {
        if next == target {
            found = Some(start);
        }
        found.is_some()
    });
    found
}

/// Walks the extension header chain of the IPv6 header at the start of `ip6` as
/// `ipv6_find_hdr` does, calling `visit(type, offset)` for each header it would find (the last
/// one, ESP or mobility or a non-first fragment, ends the walk); `visit` returns `true` to stop.
fn walk_exthdrs(ip6: &[u8], mut visit: impl FnMut(u8, usize) -> bool) {
    use ipv4::protocol::{FRAGMENT, NONE, ROUTING};
    let Some(&first) = ip6.get(ipv6::field::NEXT_HEADER) else {
        return;
    };
    let mut next = first;
    let mut start = ipv6::HEADER_LEN;
    loop {
        if !ipv6_ext::is_kernel_ext_hdr(next) || next == NONE {
            // Found only when it is the target itself (ESP, mobility); the walk ends here.
            visit(next, start);
            return;
        }
        let (Some(&hp_next), Some(&hp_len)) = (ip6.get(start), ip6.get(start + 1)) else {
            return;
        };
        if next == ROUTING && ip6.get(start + 3).is_none() {
            return;
        }
        if next == FRAGMENT {
            let Some(word) = get_be16(ip6, start + ipv6_ext::field::FRAG_OFFSET) else {
                return;
            };
            if word & !0x7 != 0 {
                // A non-first fragment: found if it is the target, nothing after it is.
                visit(next, start);
                return;
            }
        }
        if visit(next, start) {
            return;
        }
        start += ipv6_ext::header_len(next, hp_len);
        next = hp_next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv4::protocol::*;
    use crate::samples::{self, ethernet as eth};
    use ethertype::{ARP, IPV4, IPV6, QINQ, VLAN, VLAN_9100};

    fn sample(name: &str) -> Vec<u8> {
        samples::all()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| f)
            .unwrap_or_else(|| panic!("no sample {name}"))
    }

    fn l4(proto: u8, offset: u16, fragoff: u16) -> Option<L4Info> {
        Some(L4Info {
            proto,
            offset,
            fragoff,
        })
    }

    /// The common frames of both families and their transports, and every sample.
    fn common_bases() -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        for (ethertype, ip) in [
            (IPV4, samples::ipv4 as fn(u8, &[u8]) -> Vec<u8>),
            (IPV6, samples::ipv6),
        ] {
            let icmp = if ethertype == IPV4 { ICMP } else { ICMPV6 };
            v.push(eth(
                &[],
                ethertype,
                &ip(TCP, &samples::tcp(1000, 80, 0x02, b"x")),
            ));
            v.push(eth(
                &[],
                ethertype,
                &ip(UDP, &samples::udp(1000, 53, b"query")),
            ));
            v.push(eth(&[], ethertype, &ip(icmp, &samples::icmp_echo(8, 1, 2))));
        }
        v.extend(samples::all().into_iter().map(|(_, f)| f));
        v
    }

    /// Where the straight walk answers, it answers as the general walk: over the common
    /// frames and the samples, each header byte set to values that move a check across its
    /// edge, each cut of the frame, and trailing bytes past the packet.
    #[test]
    fn the_straight_walk_answers_as_the_general_walk() {
        const VALUES: [u8; 16] = [
            0, 1, 4, 5, 6, 8, 0x11, 0x14, 0x3a, 0x40, 0x45, 0x46, 0x50, 0x60, 0x86, 0xff,
        ];
        let (mut straight, mut tried) = (0, 0);
        let mut check = |f: &[u8]| {
            let len = f.len() as u32;
            tried += 1;
            if let Some(m) = parse_common(f, len) {
                straight += 1;
                assert_eq!(m, parse_walk(f, len), "frame {f:02x?}");
            }
            assert_eq!(parse(f), parse_walk(f, len), "frame {f:02x?}");
        };
        for base in common_bases() {
            check(&base);
            for cut in 0..base.len() {
                check(&base[..cut]);
            }
            let mut longer = base.clone();
            longer.extend_from_slice(&[0xaa; 7]);
            check(&longer);
            for at in 0..base.len().min(80) {
                for value in VALUES.into_iter().chain([base[at] ^ 1, base[at] ^ 0x80]) {
                    let mut f = base.clone();
                    f[at] = value;
                    check(&f);
                }
            }
        }
        // The common frames themselves take the straight walk.
        for base in &common_bases()[..6] {
            assert!(
                parse_common(base, base.len() as u32).is_some(),
                "{base:02x?}"
            );
        }
        assert!(
            straight > 1000,
            "{straight} of {tried} frames took the straight walk"
        );
    }

    proptest::proptest! {
        /// Random bytes behind an Ethernet and IP header of either family.
        #[test]
        fn random_packets_parse_as_the_general_walk(
            v6 in proptest::bool::ANY,
            body in proptest::collection::vec(proptest::num::u8::ANY, 0..120),
        ) {
            let mut f = if v6 {
                eth(&[], IPV6, &[0x60, 0, 0, 0])
            } else {
                eth(&[], IPV4, &[0x45, 0])
            };
            f.extend_from_slice(&body);
            let len = f.len() as u32;
            proptest::prop_assert_eq!(parse(&f), parse_walk(&f, len));
        }
    }

    #[test]
    fn ip_addrs_reads_the_network_header_s_addresses() {
        use std::net::IpAddr;
        let v4 = eth(&[], IPV4, &samples::ipv4(UDP, &[0; 8]));
        let m = crate::parse(&v4);
        let want4: (IpAddr, IpAddr) = (samples::SRC_V4.into(), samples::DST_V4.into());
        assert_eq!(m.ip_addrs(&v4), Some(want4));
        // Behind an 802.1Q tag (net_offset 18).
        let tagged = eth(&[(VLAN, 7)], IPV4, &samples::ipv4(UDP, &[0; 8]));
        assert_eq!(crate::parse(&tagged).ip_addrs(&tagged), Some(want4));
        let v6 = eth(&[], IPV6, &samples::ipv6(UDP, &[0; 8]));
        let want6: (IpAddr, IpAddr) = (samples::SRC_V6.into(), samples::DST_V6.into());
        assert_eq!(crate::parse(&v6).ip_addrs(&v6), Some(want6));
        // Cut before the destination address, or not IP: none.
        assert_eq!(m.ip_addrs(&v4[..14 + 19]), None);
        let arp = sample("eth-arp");
        assert_eq!(crate::parse(&arp).ip_addrs(&arp), None);
    }

    #[test]
    fn untagged_ipv4_tcp() {
        let f = sample("eth-v4-tcp-syn");
        let m = parse(&f);
        assert_eq!(m.len, 54);
        assert_eq!((m.protocol, m.net_offset, m.l3), (IPV4, 14, L3Kind::Ipv4));
        assert_eq!(m.l4, l4(TCP, 34, 0));
        assert_eq!(m.inner_l4, m.l4);
        assert_eq!(
            (m.vlan_count, m.inner_ethertype, m.inner_l3_offset),
            (0, IPV4, 14)
        );
        assert_eq!((m.malformed, m.tunnel, m.untag_drop), (None, None, false));
    }

    #[test]
    fn one_vlan_tag_is_popped_by_the_kernel() {
        let m = parse(&sample("vlan1-v4-tcp"));
        assert_eq!((m.protocol, m.net_offset, m.l3), (IPV4, 18, L3Kind::Ipv4));
        assert_eq!(m.l4, l4(TCP, 38, 0));
        assert_eq!(m.vlan_count, 1);
        assert_eq!(
            m.vlans[0],
            VlanTag {
                offset: 12,
                tpid: VLAN,
                tci: 0xa064
            }
        );
        assert_eq!((m.inner_ethertype, m.inner_l3_offset), (IPV4, 18));
    }

    #[test]
    fn two_tags_leave_the_inner_tpid_as_protocol() {
        let m = parse(&sample("vlan2-qinq-v4-tcp"));
        // skb_vlan_untag pops the 802.1ad tag only: protocol is the inner tag's 0x8100.
        assert_eq!(
            (m.protocol, m.net_offset, m.l3),
            (VLAN, 18, L3Kind::Other(VLAN))
        );
        assert_eq!(m.l4, None);
        assert_eq!(m.inner_l4, l4(TCP, 42, 0));
        assert_eq!(m.vlan_count, 2);
        assert_eq!(
            m.vlans[0],
            VlanTag {
                offset: 12,
                tpid: QINQ,
                tci: 200
            }
        );
        assert_eq!(
            m.vlans[1],
            VlanTag {
                offset: 16,
                tpid: VLAN,
                tci: 2001
            }
        );
        assert_eq!(
            (m.inner_ethertype, m.inner_l3_offset, m.malformed),
            (IPV4, 22, None)
        );
    }

    #[test]
    fn three_tags() {
        let m = parse(&sample("vlan3-v4-icmp"));
        assert_eq!((m.protocol, m.net_offset, m.l4), (VLAN, 18, None));
        let vids: Vec<u16> = m.vlans[..3].iter().map(|t| t.tci & 0xfff).collect();
        assert_eq!((m.vlan_count, vids), (3, vec![1, 10, 100]));
        assert_eq!((m.vlans[2].offset, m.inner_l3_offset), (20, 26));
        assert_eq!(m.inner_l4, l4(ICMP, 46, 0));
    }

    #[test]
    fn deeper_stacks_keep_the_first_four_tags() {
        let tags: Vec<(u16, u16)> = (1..=6).map(|v| (VLAN, v)).collect();
        let f = eth(&tags, IPV4, &samples::ipv4(UDP, &samples::udp(1, 2, &[])));
        let m = parse(&f);
        assert_eq!(m.vlan_count as usize, MAX_VLAN_TAGS);
        assert_eq!(m.vlans[3].tci, 4);
        assert_eq!((m.inner_l3_offset, m.inner_l4), (38, l4(UDP, 58, 0)));
    }

    #[test]
    fn tag_9100_is_not_popped_by_the_kernel() {
        let m = parse(&sample("vlan-9100-arp"));
        assert_eq!((m.protocol, m.net_offset), (VLAN_9100, 14));
        assert_eq!(m.l3, L3Kind::Other(VLAN_9100));
        assert_eq!(
            (m.vlan_count, m.vlans[0].tpid, m.vlans[0].tci),
            (1, VLAN_9100, 7)
        );
        assert_eq!(
            (m.inner_ethertype, m.inner_l3_offset, m.malformed),
            (ARP, 18, None)
        );
    }

    #[test]
    fn arp_and_mpls_have_no_l4() {
        let m = parse(&sample("eth-arp"));
        assert_eq!((m.l3, m.l4, m.malformed), (L3Kind::Arp, None, None));
        let m = parse(&sample("eth-mpls"));
        assert_eq!(
            (m.protocol, m.l3, m.l4),
            (0x8847, L3Kind::Other(0x8847), None)
        );
        assert_eq!(m.malformed, None);
        let mut short_arp = sample("eth-arp");
        short_arp.truncate(14 + 20);
        assert_eq!(parse(&short_arp).malformed, Some(Malformed::TruncatedArp));
    }

    #[test]
    fn ipv6_hop_by_hop_routing_udp() {
        let m = parse(&sample("eth-v6-hbh-rt-udp"));
        assert_eq!((m.protocol, m.l3), (IPV6, L3Kind::Ipv6));
        // 14 + 40 (IPv6) + 8 (hop-by-hop) + 24 (routing, one address) = 86.
        assert_eq!(m.l4, l4(UDP, 86, 0));
        let hbh = exthdr_bit(HOPOPTS).unwrap();
        let rt = exthdr_bit(ROUTING).unwrap();
        assert_eq!(m.ip6_exthdrs, hbh | rt);
        assert_eq!(m.malformed, None);
    }

    #[test]
    fn ipv6_non_first_fragment() {
        // thoff stays 0: transport reads start at the IPv6 header (network offset 14).
        let m = parse(&sample("eth-v6-frag-later"));
        assert_eq!(m.l4, l4(TCP, 14, 1232));
        assert_eq!(m.ip6_exthdrs, exthdr_bit(FRAGMENT).unwrap());
        assert_eq!(m.malformed, None);
    }

    #[test]
    fn ipv6_payload_len_zero_with_fragment_header() {
        // payload_len 0 passes validation (0 + 40 <= len); the first fragment's header is walked.
        let m = parse(&sample("eth-v6-len0-frag"));
        assert_eq!(m.l4, l4(UDP, 62, 0));
        assert_eq!(m.ip6_exthdrs, exthdr_bit(FRAGMENT).unwrap());
        assert_eq!(m.malformed, None);
    }

    #[test]
    fn ipv6_ext_header_longer_than_the_frame() {
        // Hop-by-hop announcing 2048 bytes, next header UDP: the kernel reports l4proto UDP with
        // thoff past the end; the offset is clamped to the frame length.
        let mut hbh = vec![UDP, 255, 1, 2, 0, 0, 0, 0];
        hbh.extend_from_slice(&[0; 8]);
        let mut ip = samples::ipv6(HOPOPTS, &hbh);
        ip[4..6].copy_from_slice(&[0, 16]);
        let f = eth(&[], IPV6, &ip);
        let m = parse(&f);
        assert_eq!(m.l4, l4(UDP, f.len() as u16, 0));
        assert_eq!(m.malformed, Some(Malformed::BadIpv6ExtHeader));
        // With another extension header behind it, the walk fails: no L4 info.
        let mut ip2 = ip.clone();
        ip2[40] = DSTOPTS;
        let m = parse(&eth(&[], IPV6, &ip2));
        assert_eq!(
            (m.l4, m.malformed),
            (None, Some(Malformed::BadIpv6ExtHeader))
        );
        assert_eq!(m.ip6_exthdrs, exthdr_bit(HOPOPTS).unwrap());
    }

    #[test]
    fn ipv6_ah_stops_the_walk_and_esp_is_transport() {
        let mut ah = vec![TCP, 4, 0, 0, 0, 0, 1, 0, 0, 0, 0, 7];
        ah.extend_from_slice(&[0; 12]);
        ah.extend_from_slice(&samples::tcp(1, 2, 0x10, &[]));
        let m = parse(&eth(&[], IPV6, &samples::ipv6(AH, &ah)));
        assert_eq!(m.l4, l4(AH, 54, 0));
        assert_eq!(m.ip6_exthdrs, exthdr_bit(AH).unwrap());
        let m = parse(&eth(&[], IPV6, &samples::ipv6(ESP, &[0; 16])));
        assert_eq!(
            (m.l4, m.ip6_exthdrs),
            (l4(ESP, 54, 0), exthdr_bit(ESP).unwrap())
        );
    }

    #[test]
    fn ipv6_bad_payload_length() {
        let mut ip = samples::ipv6(UDP, &samples::udp(1, 2, &[]));
        ip[5] = 9;
        let m = parse(&eth(&[], IPV6, &ip));
        assert_eq!(
            (m.l3, m.l4, m.malformed),
            (L3Kind::Ipv6, None, Some(Malformed::BadIpv6))
        );
    }

    #[test]
    fn ipv4_fragments() {
        let m = parse(&sample("eth-v4-frag-later"));
        assert_eq!((m.l4, m.malformed), (l4(UDP, 34, 1480), None));
        let m = parse(&sample("eth-v4-frag-first"));
        assert_eq!((m.l4, m.malformed), (l4(UDP, 34, 0), None));
    }

    #[test]
    fn ipv4_total_length_past_the_capture() {
        // As tcpdump's udp-length-heapoverflow: tot_len 12336 in a short frame.
        let m = parse(&sample("eth-v4-totlen-overflow"));
        assert_eq!((m.protocol, m.l3), (IPV4, L3Kind::Ipv4));
        assert_eq!((m.l4, m.malformed), (None, Some(Malformed::BadIpv4)));
    }

    #[test]
    fn ipv4_header_checks() {
        let good = samples::ipv4(UDP, &samples::udp(1, 2, &[]));
        let cases: [(usize, u8); 3] = [(0, 0x44), (0, 0x55), (3, 19)];
        for (at, v) in cases {
            let mut ip = good.clone();
            ip[at] = v;
            let m = parse(&eth(&[], IPV4, &ip));
            assert_eq!(
                (m.l4, m.malformed),
                (None, Some(Malformed::BadIpv4)),
                "{at} {v}"
            );
        }
        // Options are skipped: router alert, NOP, EOL padded to 8 bytes, so IHL 7.
        let m = parse(&sample("eth-v4-options-udp"));
        assert_eq!((m.l4, m.malformed), (l4(UDP, 14 + 28, 0), None));
        // Padding after tot_len is fine, a TCP header cut by tot_len is not.
        let mut padded = eth(&[], IPV4, &good);
        padded.resize(60, 0);
        assert_eq!(parse(&padded).malformed, None);
        let cut_tcp = samples::ipv4(TCP, &[0; 12]);
        let m = parse(&eth(&[], IPV4, &cut_tcp));
        assert_eq!(
            (m.l4, m.malformed),
            (l4(TCP, 34, 0), Some(Malformed::TruncatedL4))
        );
    }

    #[test]
    fn vxlan() {
        let m = parse(&sample("eth-v4-vxlan"));
        let t = m.tunnel.unwrap();
        assert_eq!(
            (t.kind, t.offset, t.inner_offset, t.vni),
            (TunnelKind::Vxlan, 42, Some(50), 100)
        );
        assert_eq!((t.inner_proto, m.malformed), (0x6558, None));
    }

    #[test]
    fn geneve_with_options_of_mixed_lengths() {
        let f = sample("eth-v4-geneve-options");
        let m = parse(&f);
        let t = m.tunnel.unwrap();
        assert_eq!(
            (t.kind, t.offset, t.vni, t.inner_proto),
            (TunnelKind::Geneve, 42, 0x0c012e, 0x6558)
        );
        // Options: 8 + 20 + 4 + 12 bytes after the 8-byte header.
        assert_eq!((t.inner_offset, m.malformed), (Some(42 + 8 + 44), None));
        let h = geneve::Header::new_checked(&f[42..]).unwrap();
        let opts: Vec<(u16, u8, bool, u8)> = h
            .option_iter()
            .map(|o| (o.class, o.opt_type, o.is_critical(), o.len_words))
            .collect();
        assert_eq!(
            opts,
            vec![
                (0x0132, 1, false, 1),
                (0x0100, 0x82, true, 4),
                (0xff72, 0x7f, false, 0),
                (0, 0x80, true, 2)
            ]
        );
        assert!(h.critical());
    }

    #[test]
    fn geneve_over_ipv6_and_truncated_option() {
        let m = parse(&sample("eth-v6-geneve-v4-inner"));
        let t = m.tunnel.unwrap();
        assert_eq!(
            (t.offset, t.inner_offset, t.vni, t.inner_proto),
            (62, Some(70), 0x123456, 0x0800)
        );
        let m = parse(&sample("eth-v4-geneve-truncated-option"));
        assert_eq!(m.malformed, Some(Malformed::BadTunnel));
        assert_eq!(m.tunnel.map(|t| (t.vni, t.inner_offset)), Some((11, None)));
    }

    #[test]
    fn short_and_truncated_link_layers() {
        let m = parse(&sample("short-ethernet"));
        assert_eq!(
            (m.len, m.l3, m.malformed),
            (7, L3Kind::None, Some(Malformed::ShortEthernet))
        );
        let m = parse(&sample("vlan-truncated"));
        assert_eq!((m.untag_drop, m.protocol, m.vlan_count), (true, VLAN, 0));
        assert_eq!(m.malformed, Some(Malformed::TruncatedVlan));
        // A whole tag but fewer than 2 bytes after it: complete for us, dropped by the kernel.
        let m = parse(&eth(&[(VLAN, 5)], 0x1234, &[]));
        assert_eq!((m.untag_drop, m.vlan_count, m.malformed), (true, 1, None));
        let m = parse(&eth(&[(VLAN, 5)], 0x1234, &[0, 0]));
        assert_eq!(
            (m.untag_drop, m.protocol, m.net_offset),
            (false, 0x1234, 18)
        );
    }

    #[test]
    fn untag_drop_below_20_bytes_for_both_kernel_tpids() {
        // skb_vlan_untag pulls VLAN_HLEN + 2 = 6 bytes after the 14-byte Ethernet header: a frame
        // with TPID 0x8100 or 0x88a8 at offset 12 is freed when it is shorter than 20 bytes.
        for tpid in [VLAN, QINQ] {
            let full = eth(&[(tpid, 42)], IPV4, &[0x45, 0, 0, 0]);
            for len in 14..full.len() {
                let m = parse(&full[..len]);
                assert_eq!(m.untag_drop, len < 20, "tpid {tpid:#x} len {len}");
            }
        }
        // 0x9100 is not a tag the kernel pops: never dropped.
        let f = eth(&[(VLAN_9100, 42)], IPV4, &[]);
        assert!(!parse(&f[..15]).untag_drop);
    }

    #[test]
    fn ieee_802_3_frames_get_the_kernels_protocol() {
        let m = parse(&eth(&[], 0x0026, &[0xaa, 0xaa, 0x03]));
        assert_eq!((m.protocol, m.inner_ethertype), (0x0004, 0x0026));
        let m = parse(&eth(&[(VLAN, 1)], 0x0026, &[0xff, 0xff]));
        assert_eq!(m.protocol, 0x0001);
    }

    #[test]
    fn exthdr_mask_follows_ipv6_find_hdr() {
        // hop-by-hop, then dest options, then a non-first fragment, then routing (not found).
        let frag = samples::ip6_fragment_header(ROUTING, 8, false, &[0; 24]);
        let ip = samples::ipv6(
            HOPOPTS,
            &samples::ip6_opts_header(DSTOPTS, 8, &samples::ip6_opts_header(FRAGMENT, 8, &frag)),
        );
        let m = parse(&eth(&[], IPV6, &ip));
        let want = [HOPOPTS, DSTOPTS, FRAGMENT]
            .iter()
            .fold(0, |a, &t| a | exthdr_bit(t).unwrap());
        assert_eq!(m.ip6_exthdrs, want);
        // Non-first fragment followed by an extension header: no transport header.
        assert_eq!(
            (m.l4, m.malformed),
            (None, Some(Malformed::BadIpv6ExtHeader))
        );
        // The mask is computed even when validation fails (bad version).
        let mut bad = ip.clone();
        bad[0] = 0x40;
        assert_eq!(parse(&eth(&[], IPV6, &bad)).ip6_exthdrs, want);
        // ... but only for protocol 0x86dd.
        assert_eq!(parse(&eth(&[], IPV4, &ip)).ip6_exthdrs, 0);
    }
}
