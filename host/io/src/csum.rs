//! Completing the TCP/UDP checksum of a frame the kernel handed over with a partial one.
//!
//! A frame sent by a local stack through a device with checksum offload (veth, TAP with
//! offloads) is `CHECKSUM_PARTIAL`: its L4 checksum field holds only the pseudo-header sum,
//! and the hardware, or `skb_checksum_help` when the frame leaves through a device without the
//! offload, finishes it. AF_PACKET hands such a frame over as it is, flagged
//! `TP_STATUS_CSUMNOTREADY` (`tpacket_rcv`; `PACKET_AUXDATA` on the `recvmsg` path), so a copy
//! wasp sends out another device would reach its receiver with a bad checksum. [`complete`]
//! does what `skb_checksum_help` would: the ones' complement of the ones'-complement sum of the
//! pseudo-header and the L4 segment, a result of 0 stored as 0xffff (`CSUM_MANGLED_0`).
//!
//! The kernel leaves only TCP and UDP partial (ICMP, ICMPv6 and the IPv6 pseudo-header
//! protocols' other users compute theirs in software: checked on Linux 6.18, veth, with
//! `PACKET_AUXDATA`). AF_PACKET does not say where the checksum starts (`csum_start`), so
//! the outermost TCP or UDP header is taken: for a tunnel whose inner segment is the partial
//! one, the outer checksum is recomputed (to the value it had) and the inner one stays partial.

use wasp_wire::ipv4::protocol;
use wasp_wire::meta::Malformed;
use wasp_wire::{checksum, ethernet, ipv4, ipv6, ipv6_ext, tcp, udp};

/// Why a partial checksum was not completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unresolved {
    /// Not IPv4/IPv6 carrying TCP or UDP (an IPv4 fragment, an IPv6 fragment header, another
    /// protocol), or headers cut short.
    NoL4,
    /// The frame holds less than the IP header says (a capture cut by the snap length or the
    /// buffer).
    Truncated,
}

/// Where a frame's L4 segment is: its pseudo-header sum (addresses and protocol, without the
/// length), the protocol, and the segment's bounds in the frame.
struct L4 {
    pseudo: u64,
    proto: u8,
    start: usize,
    end: usize,
}

impl L4 {
    /// Offset of the checksum field in the frame.
    fn checksum_at(&self) -> usize {
        self.start
            + if self.proto == protocol::TCP {
                tcp::field::CHECKSUM
            } else {
                udp::field::CHECKSUM
            }
    }
}

/// Finds the outermost TCP or UDP segment of an Ethernet frame: behind the 802.1Q/802.1ad tags
/// in the frame ([`wasp_wire::parse`]'s walk; a frame with another tag, 0x9100, is left
/// alone), an IPv4 header that is not a fragment, or an IPv6 header and its hop-by-hop, routing
/// and destination options headers.
fn locate(f: &[u8]) -> Result<L4, Unresolved> {
    let m = wasp_wire::parse(f);
    let tags = &m.vlans[..usize::from(m.vlan_count)];
    if m.malformed == Some(Malformed::TruncatedVlan)
        || tags.iter().any(|t| !ethernet::is_kernel_vlan_tpid(t.tpid))
    {
        return Err(Unresolved::NoL4);
    }
    let ip = usize::from(m.inner_l3_offset);
    let l3 = f.get(ip..).ok_or(Unresolved::NoL4)?;
    match m.inner_ethertype {
        ethernet::ethertype::IPV4 => {
            let h = ipv4::Packet::new_checked(l3).map_err(|_| Unresolved::NoL4)?;
            let total = usize::from(h.total_len());
            // A fragment (MF or an offset) is never partial: fragmentation completes first.
            if h.version() != 4 || h.more_frags() || h.frag_offset() != 0 || total < h.header_len()
            {
                return Err(Unresolved::NoL4);
            }
            let proto = h.protocol();
            if proto != protocol::TCP && proto != protocol::UDP {
                return Err(Unresolved::NoL4);
            }
            let pseudo = checksum::pseudo_v4(&h.src_addr(), &h.dst_addr(), 0, proto);
            Ok(L4 {
                pseudo: u64::from(pseudo),
                proto,
                start: ip + h.header_len(),
                end: ip + total,
            })
        }
        ethernet::ethertype::IPV6 => {
            let h = ipv6::Packet::new_checked(l3).map_err(|_| Unresolved::NoL4)?;
            if h.version() != 6 {
                return Err(Unresolved::NoL4);
            }
            let end = ip + ipv6::HEADER_LEN + usize::from(h.payload_len());
            // Hop-by-hop, routing, destination options; not a fragment header or AH.
            let mut chain = ipv6_ext::Chain::new(h);
            for item in chain.by_ref() {
                if matches!(item.header.kind(), protocol::FRAGMENT | protocol::AH) {
                    return Err(Unresolved::NoL4);
                }
            }
            if chain.end() != ipv6_ext::ChainEnd::Upper {
                return Err(if end > f.len() {
                    Unresolved::Truncated
                } else {
                    Unresolved::NoL4
                });
            }
            let proto = chain.next_header();
            if proto != protocol::TCP && proto != protocol::UDP {
                return Err(Unresolved::NoL4);
            }
            let pseudo = checksum::pseudo_v6(&h.src_addr(), &h.dst_addr(), 0, proto);
            Ok(L4 {
                pseudo: u64::from(pseudo),
                proto,
                start: ip + chain.offset(),
                end,
            })
        }
        _ => Err(Unresolved::NoL4),
    }
}

/// Completes the TCP or UDP checksum of Ethernet frame `f` in place, as `skb_checksum_help`
/// would for a `CHECKSUM_PARTIAL` frame: the field is set to the checksum over the pseudo-header
/// (addresses, protocol, L4 length) and the segment (the IP header's length, not the frame's:
/// padding after it is not summed). Returns what stopped it, leaving `f` untouched.
pub(crate) fn complete(f: &mut [u8]) -> Result<(), Unresolved> {
    let l4 = locate(f)?;
    let field = l4.checksum_at();
    if l4.end > f.len() || field + 2 > l4.end || l4.start > l4.end {
        return Err(if l4.end > f.len() {
            Unresolved::Truncated
        } else {
            Unresolved::NoL4
        });
    }
    let len = (l4.end - l4.start) as u64;
    f[field..field + 2].fill(0);
    let c = !checksum::sum(l4.pseudo + len, &f[l4.start..l4.end]);
    let c = if c == 0 { 0xffff } else { c };
    f[field..field + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use wasp_wire::checksum::fold;

    const ETH_P_IP: u16 = ethernet::ethertype::IPV4;
    const ETH_P_IPV6: u16 = ethernet::ethertype::IPV6;

    /// Ones'-complement sum of `b` added to `acc`.
    fn sum(b: &[u8], acc: u64) -> u64 {
        u64::from(checksum::sum(acc, b))
    }

    /// The checksum a receiver computes over the pseudo-header and the segment (0 or 0xffff,
    /// i.e. ones'-complement zero, when the field is right), as `tcp_v4_check` et al.
    pub(crate) fn verify(f: &[u8]) -> bool {
        let l4 = locate(f).expect("tcp or udp");
        let len = (l4.end - l4.start) as u64;
        matches!(fold(sum(&f[l4.start..l4.end], l4.pseudo + len)), 0xffff | 0)
    }

    fn eth(ethertype: u16) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f
    }

    /// A UDP/IPv4 frame from 10.9.0.1:40000 to 10.9.0.2:9000 with `payload`, its checksum
    /// field holding what the kernel leaves in a partial one: the pseudo-header sum, folded,
    /// not complemented (`udp4_hwcsum`: `~udp_v4_check(len, saddr, daddr, 0)`).
    pub(crate) fn partial_udp4(payload: &[u8]) -> Vec<u8> {
        let mut f = eth(ETH_P_IP);
        let total = 28 + payload.len() as u16;
        f.extend_from_slice(&[0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 17, 0, 0]);
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&[10, 9, 0, 1, 10, 9, 0, 2]);
        let ip_csum = !fold(sum(&f[14..34], 0));
        f[24..26].copy_from_slice(&ip_csum.to_be_bytes());
        let ulen = 8 + payload.len() as u16;
        f.extend_from_slice(&40000u16.to_be_bytes());
        f.extend_from_slice(&9000u16.to_be_bytes());
        f.extend_from_slice(&ulen.to_be_bytes());
        let pseudo = fold(sum(&f[26..34], 17 + u64::from(ulen)));
        f.extend_from_slice(&pseudo.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// A TCP/IPv6 SYN-like segment (20-byte header and `payload`) behind a hop-by-hop options
    /// header, its checksum partial (`~csum_ipv6_magic(saddr, daddr, len, IPPROTO_TCP, 0)`).
    fn partial_tcp6(payload: &[u8]) -> Vec<u8> {
        let mut f = eth(ETH_P_IPV6);
        let plen = 8 + 20 + payload.len() as u16;
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&plen.to_be_bytes());
        f.extend_from_slice(&[0, 64]); // next header: hop-by-hop
        let mut src = [0u8; 16];
        src[0] = 0xfd;
        src[15] = 1;
        let mut dst = src;
        dst[15] = 2;
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]); // HBH: next TCP, PadN
        let tlen = 20 + payload.len() as u64;
        let mut tcp = vec![0u8; 20];
        tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = 0x02;
        let pseudo = fold(sum(&f[22..54], 6 + tlen));
        tcp[16..18].copy_from_slice(&pseudo.to_be_bytes());
        f.extend_from_slice(&tcp);
        f.extend_from_slice(payload);
        f
    }

    /// Frames a Linux 6.18 stack sent through veth (captured with `PACKET_AUXDATA` on the
    /// peer: `tp_status` 0x9, `TP_STATUS_USER | TP_STATUS_CSUMNOTREADY`), and the checksum the
    /// same frames carried after the kernel forwarded them out a device without checksum
    /// offload (`ethtool -K r1 tx off`: `skb_checksum_help` completed them).
    const KERNEL_PARTIAL: [(&str, u16); 4] = [
        // UDP/IPv4: partial 14c8, completed by the kernel 4bc5
        (
            "eef04d163be0e209fe8a20cc08004500002e9d8840004011889a0a4d00010a4e0001809f2328001a14c877617370207061727469616c207564703421",
            0x4bc5,
        ),
        // UDP/IPv6: partial fb1c, completed by the kernel 5c88
        (
            "eef04d163be0e209fe8a20cc86dd6004ad1600191140fd770000000000000000000000000001fd78000000000000000000000000000187a923280019fb1c77617370207061727469616c2075647036",
            0x5c88,
        ),
        // TCP/IPv4 SYN: partial 14cb, completed by the kernel f967
        (
            "eef04d163be0e209fe8a20cc08004500003c8d274000400698f80a4d00010a4e0001ac120050ad27962800000000a002faf014cb0000020405b40402080a13da3b7b000000000103030a",
            0xf967,
        ),
        // TCP/IPv6 SYN: partial fb20, completed by the kernel 744d
        (
            "eef04d163be0e209fe8a20cc86dd6001cdc300280640fd770000000000000000000000000001fd780000000000000000000000000001c66c0050b11b213c00000000a002fd20fb200000020405a00402080a9ca3a5f8000000000103030a",
            0x744d,
        ),
    ];

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn completes_as_the_kernels_skb_checksum_help() {
        for (hex, want) in KERNEL_PARTIAL {
            let mut f = unhex(hex);
            let field = locate(&f).unwrap().checksum_at();
            assert!(!verify(&f), "partial as captured");
            complete(&mut f).unwrap();
            assert_eq!(u16::from_be_bytes([f[field], f[field + 1]]), want, "{hex}");
            assert!(verify(&f));
        }
    }

    #[test]
    fn completes_a_partial_udp4_checksum_as_the_receiver_checks_it() {
        let mut f = partial_udp4(b"hello, wasp");
        assert!(!verify(&f), "partial: the receiver would refuse it");
        complete(&mut f).unwrap();
        assert!(verify(&f));
        // Odd payload length: the last byte is summed as the high half of a word (RFC 1071).
        let mut g = partial_udp4(b"x");
        complete(&mut g).unwrap();
        assert!(verify(&g));
        // Completing again gives the same bytes (the field is recomputed, not added to).
        let once = f.clone();
        complete(&mut f).unwrap();
        assert_eq!(f, once);
    }

    #[test]
    fn completes_tcp6_behind_extension_headers_and_ignores_padding() {
        let mut f = partial_tcp6(b"abc");
        assert!(!verify(&f));
        let len = f.len();
        f.extend_from_slice(&[0xaa; 7]); // Ethernet padding after the IP datagram
        complete(&mut f).unwrap();
        assert!(verify(&f[..len]));
        assert_eq!(&f[len..], &[0xaa; 7], "padding untouched");
    }

    #[test]
    fn a_vlan_tag_in_the_frame_is_skipped() {
        let plain = partial_udp4(b"tagged");
        let mut f = plain[..12].to_vec();
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        f.extend_from_slice(&plain[12..]);
        complete(&mut f).unwrap();
        let mut p = plain.clone();
        complete(&mut p).unwrap();
        assert_eq!(&f[16..], &p[12..], "same checksum as untagged");
    }

    #[test]
    fn a_9100_tag_is_left_alone() {
        // Only 802.1Q and 802.1ad tags are walked (the TPIDs of the kernel's eth_type_vlan);
        // behind a 0x9100 tag the frame is left as it is.
        let plain = partial_udp4(b"tagged");
        let mut f = plain[..12].to_vec();
        f.extend_from_slice(&[0x91, 0x00, 0x00, 0x05]);
        f.extend_from_slice(&plain[12..]);
        let before = f.clone();
        assert_eq!(complete(&mut f), Err(Unresolved::NoL4));
        assert_eq!(f, before);
        // Two kernel tags are walked.
        let mut g = plain[..12].to_vec();
        g.extend_from_slice(&[0x88, 0xa8, 0x00, 0x05, 0x81, 0x00, 0x00, 0x06]);
        g.extend_from_slice(&plain[12..]);
        complete(&mut g).unwrap();
        assert!(verify(&g));
    }

    #[test]
    fn a_zero_result_is_stored_as_ffff() {
        // Choose a payload word so that the complemented sum is 0: the field then reads
        // 0xffff (CSUM_MANGLED_0), which a UDP receiver must not take for "no checksum".
        let mut f = partial_udp4(&[0, 0]);
        complete(&mut f).unwrap();
        let c = u16::from_be_bytes([f[40], f[41]]);
        // Put the checksum's value into the payload word: the new sum is all ones, so the
        // complement would be 0.
        let n = f.len();
        f[n - 2..].copy_from_slice(&c.to_be_bytes());
        complete(&mut f).unwrap();
        assert_eq!(u16::from_be_bytes([f[40], f[41]]), 0xffff);
        assert!(verify(&f));
    }

    #[test]
    fn what_cannot_be_completed_is_left_alone() {
        let mut f = partial_udp4(b"0123456789");
        let cut = f.len() - 3;
        let mut short = f[..cut].to_vec();
        let before = short.clone();
        assert_eq!(complete(&mut short), Err(Unresolved::Truncated));
        assert_eq!(short, before);
        f[20] = 0x20; // MF: a fragment
        assert_eq!(complete(&mut f), Err(Unresolved::NoL4));
        let mut icmp = partial_udp4(b"..");
        icmp[23] = 1;
        assert_eq!(complete(&mut icmp), Err(Unresolved::NoL4));
        for n in 0..40 {
            let mut g = partial_udp4(b"abc")[..n].to_vec();
            assert!(complete(&mut g).is_err(), "{n} bytes");
        }
        let mut arp = eth(0x0806);
        arp.resize(60, 0);
        assert_eq!(complete(&mut arp), Err(Unresolved::NoL4));
    }
}
