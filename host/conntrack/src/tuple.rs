//! Connection tuples: the public [`Tuple`], the compact [`Key`] the table hashes, and their
//! extraction from a frame (the kernel's `nf_ct_get_tuple` with each tracker's `pkt_to_tuple`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wasp_wire::{L3Kind, PacketMeta, icmp, ipv4, ipv6, th};

/// IP protocol numbers the trackers know.
pub mod proto {
    /// ICMP (`nf_conntrack_proto_icmp.c`).
    pub const ICMP: u8 = 1;
    /// TCP (`nf_conntrack_proto_tcp.c`).
    pub const TCP: u8 = 6;
    /// UDP (`nf_conntrack_proto_udp.c`).
    pub const UDP: u8 = 17;
    /// ICMPv6 (`nf_conntrack_proto_icmpv6.c`).
    pub const ICMPV6: u8 = 58;
    /// UDP-Lite (`nf_conntrack_proto_udp.c`, `nf_conntrack_l4proto_udplite`).
    pub const UDPLITE: u8 = 136;
}

/// Whether `p` carries ports (TCP, UDP, UDP-Lite); other protocols but ICMP are tracked by the
/// generic tracker with ports 0.
pub(crate) fn has_ports(p: u8) -> bool {
    matches!(p, proto::TCP | proto::UDP | proto::UDPLITE)
}

/// Whether `p` is ICMP or ICMPv6.
pub(crate) fn is_icmp(p: u8) -> bool {
    matches!(p, proto::ICMP | proto::ICMPV6)
}

/// One direction of a connection, as the kernel's `nf_conntrack_tuple` (plus the zone).
///
/// - TCP, UDP, UDP-Lite: `sport`/`dport` are the ports.
/// - ICMP / ICMPv6: `sport` is the identifier (`src.u.icmp.id`, the echo id) and `dport` is
///   `type << 8 | code` (`dst.u.icmp.type` and `.code`), so the reply tuple of an echo request
///   (type 8) has type 0, as the kernel's `icmp_invert_tuple`.
/// - Any other protocol (the generic tracker): both 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tuple {
    /// Source address.
    pub src: IpAddr,
    /// Destination address (same family as `src`).
    pub dst: IpAddr,
    /// IP protocol number (`meta l4proto`).
    pub proto: u8,
    /// Source port, or the ICMP identifier.
    pub sport: u16,
    /// Destination port, or ICMP `type << 8 | code`.
    pub dport: u16,
    /// Conntrack zone (`ct zone`), 0 by default.
    pub zone: u16,
}

impl Tuple {
    /// The ICMP type (`dport >> 8`); meaningful for ICMP/ICMPv6 tuples only.
    pub fn icmp_type(&self) -> u8 {
        (self.dport >> 8) as u8
    }

    /// The ICMP code (`dport & 0xff`); meaningful for ICMP/ICMPv6 tuples only.
    pub fn icmp_code(&self) -> u8 {
        self.dport as u8
    }

    /// The tuple of the other direction (the kernel's `nf_ct_invert_tuple`): addresses and ports
    /// swapped; for ICMP the type mapped to its answer (echo 8 <-> reply 0, timestamp 13 <-> 14,
    /// info 15 <-> 16, address mask 17 <-> 18; ICMPv6 echo 128 <-> 129, node information 139 <->
    /// 140) and the id kept. `None` for an ICMP type without an answer (errors, for example),
    /// where the kernel's `icmp_invert_tuple` fails too.
    pub fn invert(&self) -> Option<Tuple> {
        Key::from_tuple(self).invert().map(|k| k.to_tuple())
    }

    /// Extract the tuple of the packet in `frame` as the kernel's conntrack sees it at the
    /// prerouting hook (`nf_ct_get_tuple`), reading the network header at `meta.net_offset` and
    /// the transport header at `meta.l4`. `zone` is the conntrack zone to put in the tuple.
    ///
    /// Errors: see [`NoTuple`]. A non-first fragment has no tuple: with defragmentation off the
    /// kernel's `ipv4_get_l4proto` / `ipv6_get_l4proto` return -1 for it ("can't handle
    /// fragments") and the packet gets no conntrack, so `ct state` reads `invalid`.
    pub fn from_packet(frame: &[u8], meta: &PacketMeta, zone: u16) -> Result<Tuple, NoTuple> {
        Key::from_packet(frame, meta, zone).map(|k| k.to_tuple())
    }
}

/// Why a packet has no tuple. Every case gives the packet no conntrack (`ct state invalid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoTuple {
    /// Not IPv4 or IPv6, or the network header failed validation (`meta.l4` is `None`).
    NotIp,
    /// A non-first fragment (fragment offset not 0): the kernel's conntrack without
    /// defragmentation does not handle it.
    Fragment,
    /// The transport header is shorter than what the tracker reads (TCP/UDP ports, ICMP's 8
    /// bytes).
    Truncated,
}

/// Address family of a [`Key`].
pub(crate) const FAMILY_V4: u8 = 4;
/// Address family of a [`Key`].
pub(crate) const FAMILY_V6: u8 = 6;

/// The table's compact form of a [`Tuple`]: 40 bytes, addresses as 16 bytes (IPv4 in the first
/// 4, the rest zero), no enum tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Key {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub sport: u16,
    pub dport: u16,
    pub zone: u16,
    pub proto: u8,
    pub family: u8,
}

impl std::hash::Hash for Key {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let w = self.words();
        for x in w {
            h.write_u64(x);
        }
    }
}

/// The ICMP type that answers `t` (`invmap` in `nf_conntrack_proto_icmp.c`), if any.
fn icmp_answer(t: u8) -> Option<u8> {
    Some(match t {
        8 => 0,
        0 => 8,
        13 => 14,
        14 => 13,
        15 => 16,
        16 => 15,
        17 => 18,
        18 => 17,
        _ => return None,
    })
}

/// The ICMPv6 type that answers `t` (`invmap` in `nf_conntrack_proto_icmpv6.c`), if any.
fn icmpv6_answer(t: u8) -> Option<u8> {
    Some(match t {
        128 => 129,
        129 => 128,
        139 => 140,
        140 => 139,
        _ => return None,
    })
}

pub(crate) fn addr_bytes(a: IpAddr) -> ([u8; 16], u8) {
    match a {
        IpAddr::V4(v) => {
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&v.octets());
            (b, FAMILY_V4)
        }
        IpAddr::V6(v) => (v.octets(), FAMILY_V6),
    }
}

pub(crate) fn bytes_addr(b: &[u8; 16], family: u8) -> IpAddr {
    if family == FAMILY_V4 {
        IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
    } else {
        IpAddr::V6(Ipv6Addr::from(*b))
    }
}

impl Key {
    /// Five words for hashing.
    #[inline]
    pub fn words(&self) -> [u64; 5] {
        let s = &self.src;
        let d = &self.dst;
        let w = |b: &[u8; 16], i: usize| {
            u64::from_le_bytes([
                b[i],
                b[i + 1],
                b[i + 2],
                b[i + 3],
                b[i + 4],
                b[i + 5],
                b[i + 6],
                b[i + 7],
            ])
        };
        [
            w(s, 0),
            w(s, 8),
            w(d, 0),
            w(d, 8),
            u64::from(self.sport)
                | u64::from(self.dport) << 16
                | u64::from(self.zone) << 32
                | u64::from(self.proto) << 48
                | u64::from(self.family) << 56,
        ]
    }

    pub fn from_tuple(t: &Tuple) -> Key {
        let (src, family) = addr_bytes(t.src);
        let (dst, _) = addr_bytes(t.dst);
        Key {
            src,
            dst,
            sport: t.sport,
            dport: t.dport,
            zone: t.zone,
            proto: t.proto,
            family,
        }
    }

    pub fn to_tuple(self) -> Tuple {
        Tuple {
            src: bytes_addr(&self.src, self.family),
            dst: bytes_addr(&self.dst, self.family),
            proto: self.proto,
            sport: self.sport,
            dport: self.dport,
            zone: self.zone,
        }
    }

    pub fn is_v4(&self) -> bool {
        self.family == FAMILY_V4
    }

    /// `nf_ct_invert_tuple`.
    pub fn invert(&self) -> Option<Key> {
        let mut k = *self;
        k.src = self.dst;
        k.dst = self.src;
        match self.proto {
            proto::ICMP | proto::ICMPV6 => {
                let t = (self.dport >> 8) as u8;
                let a = if self.proto == proto::ICMP {
                    icmp_answer(t)?
                } else {
                    icmpv6_answer(t)?
                };
                k.dport = u16::from(a) << 8 | (self.dport & 0xff);
            }
            _ => {
                k.sport = self.dport;
                k.dport = self.sport;
            }
        }
        Some(k)
    }

    /// Shard selector that is the same for a tuple and its inverse when no NAT changed it:
    /// endpoints sorted, ICMP by its id only.
    pub fn sym_words(&self) -> [u64; 3] {
        let (pa, pb) = if is_icmp(self.proto) {
            (self.sport, self.sport)
        } else {
            (self.sport, self.dport)
        };
        let a = (self.src, pa);
        let b = (self.dst, pb);
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let fold = |x: &[u8; 16]| {
            let mut v = 0u64;
            for c in x.chunks_exact(8) {
                v ^= u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            }
            v
        };
        [
            fold(&lo.0) ^ u64::from(lo.1) << 48,
            fold(&hi.0) ^ u64::from(hi.1) << 48,
            u64::from(self.proto) | u64::from(self.zone) << 8,
        ]
    }

    /// The packet's tuple (see [`Tuple::from_packet`]).
    pub fn from_packet(frame: &[u8], meta: &PacketMeta, zone: u16) -> Result<Key, NoTuple> {
        let l4 = meta.l4.ok_or(NoTuple::NotIp)?;
        let net = usize::from(meta.net_offset);
        let mut k = Key {
            zone,
            proto: l4.proto,
            ..Key::default()
        };
        match meta.l3 {
            L3Kind::Ipv4 => {
                let ip = frame.get(net..).ok_or(NoTuple::NotIp)?;
                let h = ipv4::FixedHeader::new_checked(ip).map_err(|_| NoTuple::NotIp)?;
                k.src[..4].copy_from_slice(&h.src());
                k.dst[..4].copy_from_slice(&h.dst());
                k.family = FAMILY_V4;
            }
            L3Kind::Ipv6 => {
                let ip = frame.get(net..).ok_or(NoTuple::NotIp)?;
                let h = ipv6::Packet::new_checked(ip).map_err(|_| NoTuple::NotIp)?;
                k.src.copy_from_slice(&h.src());
                k.dst.copy_from_slice(&h.dst());
                k.family = FAMILY_V6;
            }
            _ => return Err(NoTuple::NotIp),
        }
        if l4.fragoff != 0 {
            return Err(NoTuple::Fragment);
        }
        let at = usize::from(l4.offset);
        l4_fields(&mut k, frame, at)?;
        Ok(k)
    }
}

/// Fill the ports / ICMP fields of `k` from the transport header at `at` (`pkt_to_tuple`).
pub(crate) fn l4_fields(k: &mut Key, frame: &[u8], at: usize) -> Result<(), NoTuple> {
    match k.proto {
        p if has_ports(p) => {
            let l4 = frame.get(at..).ok_or(NoTuple::Truncated)?;
            let ports = th::Ports::new_checked(l4).map_err(|_| NoTuple::Truncated)?;
            k.sport = ports.src_port();
            k.dport = ports.dst_port();
        }
        proto::ICMP | proto::ICMPV6 => {
            // icmp_pkt_to_tuple reads the whole 8-byte header: (type, code) as the
            // destination "port", the identifier as the source. ICMPv6 has ICMP's layout.
            let h = frame
                .get(at..at + icmp::HEADER_LEN)
                .ok_or(NoTuple::Truncated)?;
            k.dport = u16::from_be_bytes([h[icmp::field::TYPE], h[icmp::field::CODE]]);
            k.sport =
                u16::from_be_bytes([h[icmp::field::ECHO_IDENT], h[icmp::field::ECHO_IDENT + 1]]);
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_40_bytes() {
        assert_eq!(std::mem::size_of::<Key>(), 40);
    }

    #[test]
    fn invert_icmp_echo_and_error() {
        let t = Tuple {
            src: "192.0.2.1".parse().unwrap(),
            dst: "198.51.100.2".parse().unwrap(),
            proto: proto::ICMP,
            sport: 0x1234,
            dport: 8 << 8,
            zone: 0,
        };
        let r = t.invert().unwrap();
        assert_eq!(
            (r.src, r.dst, r.sport, r.icmp_type()),
            (t.dst, t.src, 0x1234, 0)
        );
        assert_eq!(r.invert(), Some(t));
        // Destination unreachable has no answer: icmp_invert_tuple fails.
        let e = Tuple {
            dport: 3 << 8 | 1,
            ..t
        };
        assert_eq!(e.invert(), None);
        let v6 = Tuple {
            src: "2001:db8::1".parse().unwrap(),
            dst: "2001:db8::2".parse().unwrap(),
            proto: proto::ICMPV6,
            sport: 7,
            dport: 128 << 8,
            zone: 3,
        };
        assert_eq!(v6.invert().unwrap().icmp_type(), 129);
        assert_eq!(v6.invert().unwrap().zone, 3);
    }

    #[test]
    fn symmetric_shard_words() {
        let t = Tuple {
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            proto: proto::TCP,
            sport: 40000,
            dport: 80,
            zone: 0,
        };
        let k = Key::from_tuple(&t);
        assert_eq!(k.sym_words(), k.invert().unwrap().sym_words());
        let i = Key::from_tuple(&Tuple {
            dport: 8 << 8,
            proto: proto::ICMP,
            ..t
        });
        assert_eq!(i.sym_words(), i.invert().unwrap().sym_words());
    }
}
