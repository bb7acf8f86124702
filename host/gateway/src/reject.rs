//! The replies of `reject`: a TCP reset or an ICMP / ICMPv6 destination unreachable about the
//! packet the statement dropped, built as the kernel builds them, and when the kernel sends
//! none.
//!
//! The kernel has two ways of replying, and wasp follows the one of the hook the rule ran on
//! ([`RejectWay`]):
//! - the netdev family (nft_reject_netdev_eval) builds the reply itself (nf_reject_skb_v4_unreach,
//!   nf_reject_skb_v4_tcp_reset, nf_reject_skb_v6_unreach, nf_reject_skb_v6_tcp_reset) and sends
//!   it straight out of the input device, its Ethernet addresses the frame's swapped
//!   (dev_hard_header with the old source as destination): IPv4 TOS 0, DF, ID 0, TTL 64
//!   (ip_default_ttl); IPv6 traffic class 0, hop limit 64; an ICMP error quotes at most 536
//!   bytes (IPv4) or 1220 bytes (IPv6) of the packet; the addresses are the packet's swapped.
//!   Nothing for a frame to a broadcast or multicast MAC.
//! - the ip, ip6 and inet families (nft_reject_ipv4_eval, nft_reject_ipv6_eval,
//!   nft_reject_inet_eval) call nf_send_reset / nf_send_reset6 (the same TCP reset, routed to
//!   the packet's source) and nf_send_unreach / nf_send_unreach6, which leave the error to
//!   icmp_send / icmpv6_send: the gateway's own ICMP error ([`super::icmp::ICMP_SEND`]: TOS
//!   0xc0, no DF, quoting up to 576 bytes in all; ICMPv6 up to 1280), from the packet's
//!   destination when that is the gateway's own address (the input hook), else from the
//!   gateway's address on the input device, and only where icmp_send would answer
//!   ([`super::icmp::v4_may_answer`], [`super::icmp::v6_may_answer`]). A TCP reset is not
//!   sent for a packet to a broadcast or multicast address.
//!
//! Both ways send nothing about a fragment other than the first, about a TCP segment with RST
//! (no reset for a reset), about an ICMP destination unreachable (an unreachable for an
//! unreachable), or about a packet whose checksum is wrong (nf_reject_verify_csum and
//! nf_ip_checksum / nf_ip6_checksum: the IPv4 header and the transport checksum, with the
//! pseudo-header for TCP, UDP and ICMPv6; a UDP datagram without a checksum, GRE, AH, ESP,
//! SCTP, UDP-Lite and DCCP are not checked). The checksum covers `skb->len` bytes as the
//! kernel has it at the hook: at the netdev hooks the frame after its link header, Ethernet
//! padding included (so a padded segment fails the check and gets no reset, as in the
//! kernel); at the IP hooks the IP packet's own length.
//!
//! `icmpx` codes map to each family's own as nft_reject_icmp_code / nft_reject_icmpv6_code
//! do: no-route 0 -> net-unreachable 0 / no-route 0, port-unreachable 1 -> 3 / 4,
//! host-unreachable 2 -> 1 / address-unreachable 3, admin-prohibited 3 -> 13 / 1.
//!
//! Not done: the kernel's ICMP rate limits (icmp_ratelimit, icmpv6 ratelimit), and the output
//! and postrouting chains the kernel runs on a reply it routes (ip_local_out); the reply runs
//! the egress hook of its device, as every frame wasp sends.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wasp_ruleset::model::RejectKind;
use wasp_wire::{checksum, icmp as icmp4, icmpv6, ipv4, ipv6, tcp, udp};

use super::icmp;

/// How the kernel replies, by the family of the chain whose `reject` ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectWay {
    /// A netdev chain (nft_reject_netdev_eval): nf_reject_skb_* build the reply, it leaves
    /// on the input device with the frame's MACs swapped.
    Netdev,
    /// An ip, ip6 or inet chain (nf_send_unreach*, nf_send_reset*): the reply is routed to
    /// the packet's source; an ICMP error is icmp_send's.
    Routed {
        /// The source of an ICMP error (icmp_send's choice: the packet's destination at the
        /// input hook, else the gateway's address on the input device); `None`: none can be
        /// sent (a TCP reset always comes from the packet's destination).
        icmp_src: Option<IpAddr>,
    },
}

/// ICMP destination-unreachable codes of `icmpx` by its code (nft_reject_icmp_code).
const ICMPX_V4: [u8; 4] = [0, 3, 1, 13];
/// ICMPv6 destination-unreachable codes of `icmpx` (nft_reject_icmpv6_code).
const ICMPX_V6: [u8; 4] = [0, 4, 3, 1];

/// The ICMP destination-unreachable code `kind` gives a packet of family `v6`; `None` for a
/// TCP reset.
pub fn unreach_code(kind: RejectKind, v6: bool) -> Option<u8> {
    match kind {
        RejectKind::Icmp(c) | RejectKind::Icmpv6(c) => Some(c),
        RejectKind::Icmpx(c) => {
            let t = if v6 { &ICMPX_V6 } else { &ICMPX_V4 };
            t.get(usize::from(c)).copied()
        }
        RejectKind::TcpReset => None,
    }
}

/// Build into `out` the reply of a `reject` of `kind` (an Ethernet frame from `l2.0` to
/// `l2.1`) about the IP packet `ip` (its network header first, the rest of the frame after
/// it), of which the kernel's skb holds `skb_len` bytes at the hook (see the module doc), the
/// way `way` says. `v6` is the packet's family (`meta protocol`). Returns `false`, with `out`
/// empty, when the kernel sends nothing (see the module doc): a malformed packet never
/// panics here, it only gets no reply.
pub fn build(
    kind: RejectKind,
    way: RejectWay,
    v6: bool,
    ip: &[u8],
    skb_len: usize,
    l2: ([u8; 6], [u8; 6]),
    out: &mut Vec<u8>,
) -> bool {
    out.clear();
    let ip = &ip[..skb_len.min(ip.len())];
    let made = match (v6, unreach_code(kind, v6)) {
        (false, None) => v4_reset(way, ip, l2, out),
        (false, Some(code)) => v4_unreach(way, ip, code, l2, out),
        (true, None) => v6_reset(way, ip, l2, out),
        (true, Some(code)) => v6_unreach(way, ip, code, l2, out),
    };
    if !made {
        out.clear();
    }
    made
}

/// The IPv4 header's length when `ip` holds a header the kernel's reject takes
/// (nf_reject_iphdr_validate: version 4, IHL at least 5, total length within the skb and at
/// least the header).
fn v4_valid(ip: &[u8]) -> Option<usize> {
    let h = ipv4::Packet::new_checked(ip).ok()?;
    let total = usize::from(h.total_len());
    (h.version() == 4 && total <= ip.len() && total >= h.header_len()).then_some(h.header_len())
}

/// `true` when the transport checksum of protocol `proto` at `thoff` of `l3` is not to be
/// checked (nf_reject_verify_csum false): GRE, AH, ESP, SCTP, UDP-Lite, DCCP, and UDP whose
/// checksum field is 0.
fn csum_unchecked(l3: &[u8], thoff: usize, proto: u8) -> bool {
    use ipv4::protocol as p;
    match proto {
        p::UDP => l3
            .get(thoff..)
            .and_then(|b| udp::Packet::new_checked(b).ok())
            .is_some_and(|u| u.checksum() == 0),
        p::GRE | p::AH | p::ESP | p::SCTP | p::UDPLITE | p::DCCP => true,
        _ => false,
    }
}

/// nf_ip_checksum over the skb (CHECKSUM_NONE): the sum of every byte of `ip` (the IPv4
/// header included, which adds nothing when its own checksum is right) and, for TCP and UDP,
/// the pseudo-header of `ip.len() - thoff` bytes, folds to 0xffff.
fn v4_csum_ok(ip: &[u8], thoff: usize, proto: u8) -> bool {
    let mut init = 0u32;
    if matches!(proto, ipv4::protocol::TCP | ipv4::protocol::UDP) {
        let Ok(h) = ipv4::Packet::new_checked(ip) else {
            return false;
        };
        let len = ip.len().saturating_sub(thoff) as u32;
        init = checksum::pseudo_v4(&h.src_addr(), &h.dst_addr(), len, proto);
    }
    checksum::sum(u64::from(init), ip) == 0xffff
}

/// nf_ip6_checksum: the transport bytes from `thoff` with the pseudo-header of protocol
/// `proto` fold to 0xffff.
fn v6_csum_ok(ip: &[u8], thoff: usize, proto: u8) -> bool {
    let (Some(l4), Ok(h)) = (ip.get(thoff..), ipv6::Packet::new_checked(ip)) else {
        return false;
    };
    let pseudo = checksum::pseudo_v6(&h.src_addr(), &h.dst_addr(), l4.len() as u32, proto);
    checksum::sum(u64::from(pseudo), l4) == 0xffff
}

/// The TCP header of `l3` at `thoff` that a reset answers (nf_reject_ip_tcphdr_get /
/// nf_reject_ip6_tcphdr_get): whole, without RST.
fn tcp_to_reset(l3: &[u8], thoff: usize) -> Option<tcp::Packet<'_>> {
    let t = tcp::Packet::new_checked(l3.get(thoff..)?).ok()?;
    (t.flags() & tcp::flags::RST == 0).then_some(t)
}

/// Append the 20-byte TCP reset answering `t` (of `seg_len` bytes: header and data) to
/// `out`, its checksum over the pseudo-header sum `pseudo` (nf_reject_ip_tcphdr_put,
/// nf_reject_ip6_tcphdr_put): ports swapped; with ACK in `t`, sequence = its ack number and
/// no ACK; without, sequence 0 and ACK of its sequence + SYN + FIN + data length.
fn put_reset(t: &tcp::Packet<'_>, seg_len: usize, pseudo: u32, out: &mut Vec<u8>) {
    use tcp::flags;
    let f = t.flags();
    let (seq, ack, flags) = if f & flags::ACK != 0 {
        (t.ack(), 0, flags::RST)
    } else {
        let data = seg_len.saturating_sub(t.header_len()) as u32;
        let ack = t
            .seq()
            .wrapping_add(u32::from(f & flags::SYN != 0))
            .wrapping_add(u32::from(f & flags::FIN != 0))
            .wrapping_add(data);
        (0, ack, flags::RST | flags::ACK)
    };
    let reset = tcp::Repr {
        src_port: t.dst_port(),
        dst_port: t.src_port(),
        seq,
        ack,
        flags,
        window: 0,
    };
    out.extend_from_slice(&reset.to_bytes(pseudo));
}

/// `true` for a broadcast or multicast IPv4 address (the kernel's RTCF_BROADCAST |
/// RTCF_MULTICAST route of the packet; a subnet's directed broadcast is not known here).
fn v4_group(a: [u8; 4]) -> bool {
    let a = Ipv4Addr::from(a);
    a.is_broadcast() || a.is_multicast()
}

fn v4_reset(way: RejectWay, ip: &[u8], l2: ([u8; 6], [u8; 6]), out: &mut Vec<u8>) -> bool {
    let Some(ihl) = v4_valid(ip) else {
        return false;
    };
    let Ok(h) = ipv4::Packet::new_checked(ip) else {
        return false;
    };
    if h.frag_offset() != 0 || h.protocol() != ipv4::protocol::TCP {
        return false;
    }
    let Some(t) = tcp_to_reset(ip, ihl) else {
        return false;
    };
    if !v4_csum_ok(ip, ihl, ipv4::protocol::TCP) {
        return false;
    }
    if matches!(way, RejectWay::Routed { .. }) && v4_group(h.dst()) {
        return false;
    }
    let (src, dst) = (h.dst(), h.src());
    icmp::v4_headers(
        icmp::NF_REJECT,
        ipv4::protocol::TCP,
        src,
        dst,
        tcp::MIN_HEADER_LEN,
        l2,
        out,
    );
    let pseudo = checksum::pseudo_v4(
        &src.into(),
        &dst.into(),
        tcp::MIN_HEADER_LEN as u32,
        ipv4::protocol::TCP,
    );
    put_reset(&t, ip.len() - ihl, pseudo, out);
    true
}

fn v4_unreach(
    way: RejectWay,
    ip: &[u8],
    code: u8,
    l2: ([u8; 6], [u8; 6]),
    out: &mut Vec<u8>,
) -> bool {
    let Some(ihl) = v4_valid(ip) else {
        return false;
    };
    let Ok(h) = ipv4::Packet::new_checked(ip) else {
        return false;
    };
    if h.frag_offset() != 0 {
        return false;
    }
    // nf_skb_is_icmp_unreach reads the type right after a 20-byte header, whatever the IHL.
    let unreach = icmp4::msg_type::DEST_UNREACHABLE;
    if h.protocol() == ipv4::protocol::ICMP
        && ip.get(ipv4::MIN_HEADER_LEN + icmp4::field::TYPE) == Some(&unreach)
    {
        return false;
    }
    // Checked on the packet cut to its length (pskb_trim_rcsum); quoted from the skb.
    let packet = &ip[..usize::from(h.total_len())];
    if !csum_unchecked(packet, ihl, h.protocol()) && !v4_csum_ok(packet, ihl, h.protocol()) {
        return false;
    }
    let dst = Ipv4Addr::from(h.dst());
    match way {
        RejectWay::Netdev => {
            icmp::v4_error_shaped(icmp::NF_REJECT, ip, [unreach, code], 0, dst, l2, out);
        }
        RejectWay::Routed { icmp_src } => {
            let Some(IpAddr::V4(src)) = icmp_src else {
                return false;
            };
            if v4_group(h.dst()) || !icmp::v4_may_answer(packet) {
                return false;
            }
            icmp::v4_error_shaped(icmp::ICMP_SEND, packet, [unreach, code], 0, src, l2, out);
        }
    }
    !out.is_empty()
}

/// The IPv6 header's transport protocol and offset as the reject code finds them
/// (ipv6_skip_exthdr, after nf_reject_ip6hdr_validate: version 6, payload within the skb);
/// `None` for a packet it refuses or a non-first fragment.
fn v6_transport(ip: &[u8]) -> Option<(u8, usize)> {
    let h = ipv6::Packet::new_checked(ip).ok()?;
    if h.version() != 6 || usize::from(h.payload_len()) + ipv6::HEADER_LEN > ip.len() {
        return None;
    }
    let f = wasp_wire::ipv6_ext::find_hdr(ip, None, false).ok()?;
    (f.fragoff == 0 && f.offset >= ipv6::HEADER_LEN && f.offset <= ip.len())
        .then_some((f.proto, f.offset))
}

/// `true` for an address whose ipv6_addr_type lacks IPV6_ADDR_UNICAST (unspecified,
/// multicast).
fn v6_not_unicast(a: &Ipv6Addr) -> bool {
    a.is_unspecified() || a.is_multicast()
}

fn v6_reset(way: RejectWay, ip: &[u8], l2: ([u8; 6], [u8; 6]), out: &mut Vec<u8>) -> bool {
    let Some((proto, thoff)) = v6_transport(ip) else {
        return false;
    };
    if proto != ipv4::protocol::TCP {
        return false;
    }
    let Some(t) = tcp_to_reset(ip, thoff) else {
        return false;
    };
    if !v6_csum_ok(ip, thoff, proto) {
        return false;
    }
    let Ok(h) = ipv6::Packet::new_checked(ip) else {
        return false;
    };
    let (src, dst) = (h.dst_addr(), h.src_addr());
    if matches!(way, RejectWay::Routed { .. }) && (v6_not_unicast(&src) || v6_not_unicast(&dst)) {
        return false;
    }
    icmp::v6_headers(proto, &src, &dst, tcp::MIN_HEADER_LEN, l2, out);
    let pseudo = checksum::pseudo_v6(&src, &dst, tcp::MIN_HEADER_LEN as u32, proto);
    put_reset(&t, ip.len() - thoff, pseudo, out);
    true
}

fn v6_unreach(
    way: RejectWay,
    ip: &[u8],
    code: u8,
    l2: ([u8; 6], [u8; 6]),
    out: &mut Vec<u8>,
) -> bool {
    let Some((proto, thoff)) = v6_transport(ip) else {
        return false;
    };
    // nf_reject_v6_csum_ok: the packet cut to its payload length first.
    let plen = ipv6::Packet::new_checked(ip).map_or(0, |h| usize::from(h.payload_len()));
    let packet = if plen == 0 {
        ip
    } else {
        &ip[..ipv6::HEADER_LEN + plen]
    };
    if thoff >= packet.len() {
        return false;
    }
    // No unreachable about an ICMPv6 destination unreachable (nf_skb_is_icmp6_unreach).
    let unreach = icmpv6::msg_type::DEST_UNREACHABLE;
    if proto == ipv4::protocol::ICMPV6 && packet.get(thoff + icmpv6::field::TYPE) == Some(&unreach)
    {
        return false;
    }
    if !csum_unchecked(packet, thoff, proto) && !v6_csum_ok(packet, thoff, proto) {
        return false;
    }
    match way {
        RejectWay::Netdev => {
            let Ok(h) = ipv6::Packet::new_checked(ip) else {
                return false;
            };
            icmp::v6_error_quoting(1220, ip, [unreach, code], 0, h.dst_addr(), l2, out);
        }
        RejectWay::Routed { icmp_src } => {
            let Some(IpAddr::V6(src)) = icmp_src else {
                return false;
            };
            if !icmp::v6_may_answer(packet) {
                return false;
            }
            icmp::v6_error_quoting(icmp::V6_QUOTE_MAX, packet, [unreach, code], 0, src, l2, out);
        }
    }
    !out.is_empty()
}

#[cfg(test)]
mod tests;

/// The reply of a `reject` in a netdev chain to `frame` (Ethernet first; `meta` its parse)
/// into `out`: from the frame's destination MAC to its source (nft_reject_queue_xmit's
/// dev_hard_header), untagged; the kernel's skb at the hook holds the frame after its link
/// header (and the VLAN tag it popped). Nothing for a frame to a broadcast or multicast MAC, or
/// that is not IPv4 or IPv6 (nft_reject_netdev_eval); `false` then and `out` empty.
pub fn netdev_reply(
    kind: RejectKind,
    frame: &[u8],
    meta: &wasp_wire::PacketMeta,
    out: &mut Vec<u8>,
) -> bool {
    out.clear();
    let (Some(dst), Some(src)) = (
        frame.get(wasp_wire::ethernet::field::DST),
        frame.get(wasp_wire::ethernet::field::SRC),
    ) else {
        return false;
    };
    // is_multicast_ether_addr (broadcast included).
    if dst[0] & 1 != 0 {
        return false;
    }
    let v6 = match meta.protocol {
        wasp_wire::ethernet::ethertype::IPV4 => false,
        wasp_wire::ethernet::ethertype::IPV6 => true,
        _ => return false,
    };
    let Some(ip) = frame.get(usize::from(meta.net_offset)..) else {
        return false;
    };
    let l2 = (
        dst.try_into().unwrap_or_default(),
        src.try_into().unwrap_or_default(),
    );
    build(kind, RejectWay::Netdev, v6, ip, ip.len(), l2, out)
}

impl super::Gateway {
    /// The reply of a `reject` in an ip, ip6 or inet chain into `out` (nf_send_reset*,
    /// nf_send_unreach*): about the IP packet `ip` (network header first, as the hook saw it)
    /// of a frame that came in on `input` from MAC `from_mac`, routed back out of `input` to
    /// that MAC (the way the gateway's own ICMP errors go), from the input device's MAC.
    /// `at_ingress`: the rule ran at the inet ingress hook, where the kernel's skb still holds
    /// the frame's padding (else it is the IP packet's length). `local`: the rule ran at the
    /// input hook (the packet was for the gateway), so an ICMP error comes from the packet's
    /// destination. `false`, `out` empty, when none is sent (see the module doc) or the input
    /// device has no MAC.
    #[allow(clippy::too_many_arguments)]
    pub fn reject_reply(
        &self,
        kind: RejectKind,
        input: super::DevId,
        from_mac: [u8; 6],
        ip: &[u8],
        at_ingress: bool,
        local: bool,
        out: &mut Vec<u8>,
    ) -> bool {
        out.clear();
        let Some(mac) = self.devices().get(usize::from(input.0)).and_then(|d| d.mac) else {
            return false;
        };
        let v6 = ip.first().is_some_and(|b| b >> 4 == 6);
        let skb_len = if at_ingress {
            ip.len()
        } else if v6 {
            ipv6::Packet::new_checked(ip).map_or(ip.len(), |h| {
                ipv6::HEADER_LEN + usize::from(h.payload_len())
            })
        } else {
            ipv4::Packet::new_checked(ip).map_or(ip.len(), |h| usize::from(h.total_len()))
        };
        let icmp_src = if v6 {
            let Ok(h) = ipv6::Packet::new_checked(ip) else {
                return false;
            };
            let (s, d) = (h.src_addr(), h.dst_addr());
            if local || self.is_local(IpAddr::V6(d)) {
                Some(IpAddr::V6(d))
            } else {
                self.error_src_v6(input, &s).map(IpAddr::V6)
            }
        } else {
            // 20 bytes: build() refuses a shorter header (or an IHL that does not fit) too.
            let Ok(h) = ipv4::Packet::new_checked(ip) else {
                return false;
            };
            if local {
                Some(IpAddr::V4(h.dst_addr()))
            } else {
                self.error_src_v4(input).map(IpAddr::V4)
            }
        };
        let way = RejectWay::Routed { icmp_src };
        build(kind, way, v6, ip, skb_len, (mac, from_mac), out)
    }
}
