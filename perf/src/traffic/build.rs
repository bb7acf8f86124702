//! Frame construction: Ethernet II with 0-3 VLAN tags, IPv4 (with options and fragment fields),
//! IPv6 with extension headers, ARP, TCP, UDP, ICMP, ICMPv6, all with correct lengths and
//! checksums (RFC 791, 8200, 9293, 768, 792, 4443), so that tshark and the kernel see valid
//! packets unless a test damages them on purpose ([`truncate`], [`Damage`]).

use std::net::{Ipv4Addr, Ipv6Addr};

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// TPID of an 802.1Q tag.
pub const TPID_8021Q: u16 = 0x8100;
/// TPID of an 802.1ad (service) tag.
pub const TPID_8021AD: u16 = 0x88a8;

/// TCP flag bits (RFC 9293 section 3.1).
pub mod tcp_flags {
    /// FIN
    pub const FIN: u8 = 0x01;
    /// SYN
    pub const SYN: u8 = 0x02;
    /// RST
    pub const RST: u8 = 0x04;
    /// PSH
    pub const PSH: u8 = 0x08;
    /// ACK
    pub const ACK: u8 = 0x10;
}

/// One 802.1Q / 802.1ad tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    /// TPID (0x8100 or 0x88a8).
    pub tpid: u16,
    /// Priority code point (3 bits).
    pub pcp: u8,
    /// VLAN id (12 bits).
    pub vid: u16,
}

impl Tag {
    /// An 802.1Q tag with priority 0.
    pub fn q(vid: u16) -> Self {
        Tag {
            tpid: TPID_8021Q,
            pcp: 0,
            vid,
        }
    }

    /// An 802.1ad service tag with priority 0.
    pub fn ad(vid: u16) -> Self {
        Tag {
            tpid: TPID_8021AD,
            pcp: 0,
            vid,
        }
    }
}

/// IPv6 extension headers (RFC 8200 section 4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtHeader {
    /// Hop-by-hop options (next header 0) holding a router alert (RFC 2711) when `router_alert`,
    /// padding otherwise.
    HopByHop {
        /// Carry a router-alert option (MLD).
        router_alert: bool,
    },
    /// Routing header (43) of `rtype` with `segments_left` and these addresses.
    Routing {
        /// Routing type (0 = the deprecated source route of RFC 5095).
        rtype: u8,
        /// Segments left.
        segments_left: u8,
        /// Addresses (16 bytes each).
        addresses: Vec<Ipv6Addr>,
    },
    /// Fragment header (44).
    Fragment {
        /// Fragment offset in 8-byte units.
        offset: u16,
        /// More fragments follow.
        more: bool,
        /// Identification.
        id: u32,
    },
    /// Destination options (60) with padding only.
    DestOpts,
}

impl ExtHeader {
    fn number(&self) -> u8 {
        match self {
            ExtHeader::HopByHop { .. } => 0,
            ExtHeader::Routing { .. } => 43,
            ExtHeader::Fragment { .. } => 44,
            ExtHeader::DestOpts => 60,
        }
    }

    fn bytes(&self, next: u8) -> Vec<u8> {
        match self {
            ExtHeader::HopByHop { router_alert } => {
                // 8 bytes: next, len 0, then 6 bytes of options.
                let mut b = vec![next, 0];
                if *router_alert {
                    // Router alert (type 5, len 2, value 0 = MLD), then PadN of 0 data bytes.
                    b.extend_from_slice(&[5, 2, 0, 0, 1, 0]);
                } else {
                    b.extend_from_slice(&[1, 4, 0, 0, 0, 0]);
                }
                b
            }
            ExtHeader::Routing {
                rtype,
                segments_left,
                addresses,
            } => {
                let len = (addresses.len() * 2) as u8;
                let mut b = vec![next, len, *rtype, *segments_left, 0, 0, 0, 0];
                for a in addresses {
                    b.extend_from_slice(&a.octets());
                }
                b
            }
            ExtHeader::Fragment { offset, more, id } => {
                let off = (offset << 3) | u16::from(*more);
                let mut b = vec![next, 0];
                b.extend_from_slice(&off.to_be_bytes());
                b.extend_from_slice(&id.to_be_bytes());
                b
            }
            ExtHeader::DestOpts => vec![next, 0, 1, 4, 0, 0, 0, 0],
        }
    }
}

/// The network layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Net {
    /// IPv4.
    V4 {
        /// Source.
        src: Ipv4Addr,
        /// Destination.
        dst: Ipv4Addr,
        /// Time to live.
        ttl: u8,
        /// Identification.
        id: u16,
        /// DSCP (6 bits).
        dscp: u8,
        /// Fragment offset in 8-byte units.
        frag_offset: u16,
        /// More fragments.
        more_fragments: bool,
        /// Options (padded to 4 bytes with end-of-list).
        options: Vec<u8>,
    },
    /// IPv6.
    V6 {
        /// Source.
        src: Ipv6Addr,
        /// Destination.
        dst: Ipv6Addr,
        /// Hop limit.
        hop_limit: u8,
        /// Flow label (20 bits).
        flow_label: u32,
        /// Extension headers in order.
        ext: Vec<ExtHeader>,
    },
    /// ARP for IPv4 over Ethernet (RFC 826).
    Arp {
        /// 1 request, 2 reply.
        op: u16,
        /// Sender MAC.
        sha: [u8; 6],
        /// Sender IPv4.
        spa: Ipv4Addr,
        /// Target MAC.
        tha: [u8; 6],
        /// Target IPv4.
        tpa: Ipv4Addr,
    },
    /// Any other EtherType with raw bytes after it.
    Raw {
        /// EtherType.
        ethertype: u16,
        /// Bytes.
        bytes: Vec<u8>,
    },
}

impl Net {
    /// IPv4 with TTL 64, id 0, DSCP 0, no fragmentation, no options.
    pub fn v4(src: Ipv4Addr, dst: Ipv4Addr) -> Self {
        Net::V4 {
            src,
            dst,
            ttl: 64,
            id: 0,
            dscp: 0,
            frag_offset: 0,
            more_fragments: false,
            options: Vec::new(),
        }
    }

    /// IPv6 with hop limit 64, flow label 0, no extension headers.
    pub fn v6(src: Ipv6Addr, dst: Ipv6Addr) -> Self {
        Net::V6 {
            src,
            dst,
            hop_limit: 64,
            flow_label: 0,
            ext: Vec::new(),
        }
    }
}

/// The transport layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// TCP with a 20-byte header.
    Tcp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
        /// Flags ([`tcp_flags`]).
        flags: u8,
        /// Sequence number.
        seq: u32,
        /// Acknowledgment number.
        ack: u32,
        /// Window.
        window: u16,
    },
    /// UDP.
    Udp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
    },
    /// ICMP: type, code and the 4 bytes after the checksum (id and sequence for echo).
    Icmp {
        /// Type.
        ty: u8,
        /// Code.
        code: u8,
        /// Rest of the header.
        rest: [u8; 4],
    },
    /// ICMPv6: type, code and the 4 bytes after the checksum.
    Icmpv6 {
        /// Type.
        ty: u8,
        /// Code.
        code: u8,
        /// Rest of the header.
        rest: [u8; 4],
    },
    /// No transport header: the payload follows the network header with this protocol number.
    Raw {
        /// Protocol number.
        proto: u8,
    },
}

impl Transport {
    /// TCP with sequence 1, ack 0 (or 1 when ACK is set), window 64240.
    pub fn tcp(sport: u16, dport: u16, flags: u8) -> Self {
        Transport::Tcp {
            sport,
            dport,
            flags,
            seq: 1,
            ack: if flags & tcp_flags::ACK != 0 { 1 } else { 0 },
            window: 64240,
        }
    }

    fn proto(&self) -> u8 {
        match self {
            Transport::Tcp { .. } => 6,
            Transport::Udp { .. } => 17,
            Transport::Icmp { .. } => 1,
            Transport::Icmpv6 { .. } => 58,
            Transport::Raw { proto } => *proto,
        }
    }
}

/// A whole frame to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketSpec {
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// VLAN tags, outermost first.
    pub tags: Vec<Tag>,
    /// Network layer.
    pub net: Net,
    /// Transport layer (ignored for ARP and raw EtherTypes).
    pub transport: Option<Transport>,
    /// Application bytes.
    pub payload: Vec<u8>,
}

/// Internet checksum (RFC 1071) over `data`, starting from `sum`.
fn checksum(mut sum: u32, data: &[u8]) -> u16 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn pseudo_sum(src: &[u8], dst: &[u8], proto: u8, len: usize) -> u32 {
    let mut sum = 0u32;
    for c in src.chunks(2).chain(dst.chunks(2)) {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    sum += u32::from(proto);
    sum += (len as u32) & 0xffff;
    sum += (len as u32) >> 16;
    sum
}

impl PacketSpec {
    /// A frame between two fixed locally administered MACs, untagged, no payload.
    pub fn new(net: Net, transport: Option<Transport>) -> Self {
        PacketSpec {
            dst_mac: [0x02, 0, 0, 0, 0, 0x01],
            src_mac: [0x02, 0, 0, 0, 0, 0x02],
            tags: Vec::new(),
            net,
            transport,
            payload: Vec::new(),
        }
    }

    /// The frame's bytes.
    pub fn build(&self) -> Vec<u8> {
        let mut f = Vec::with_capacity(128 + self.payload.len());
        f.extend_from_slice(&self.dst_mac);
        f.extend_from_slice(&self.src_mac);
        for t in &self.tags {
            f.extend_from_slice(&t.tpid.to_be_bytes());
            let tci = (u16::from(t.pcp & 7) << 13) | (t.vid & 0x0fff);
            f.extend_from_slice(&tci.to_be_bytes());
        }
        match &self.net {
            Net::Arp {
                op,
                sha,
                spa,
                tha,
                tpa,
            } => {
                f.extend_from_slice(&ETHERTYPE_ARP.to_be_bytes());
                f.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4]);
                f.extend_from_slice(&op.to_be_bytes());
                f.extend_from_slice(sha);
                f.extend_from_slice(&spa.octets());
                f.extend_from_slice(tha);
                f.extend_from_slice(&tpa.octets());
            }
            Net::Raw { ethertype, bytes } => {
                f.extend_from_slice(&ethertype.to_be_bytes());
                f.extend_from_slice(bytes);
            }
            Net::V4 {
                src,
                dst,
                ttl,
                id,
                dscp,
                frag_offset,
                more_fragments,
                options,
            } => {
                f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
                let proto = self.transport.as_ref().map_or(59, Transport::proto);
                let l4 = self.l4_bytes(&src.octets(), &dst.octets(), *frag_offset == 0);
                let mut opts = options.clone();
                while opts.len() % 4 != 0 {
                    opts.push(0);
                }
                let ihl = 5 + opts.len() / 4;
                let total = ihl * 4 + l4.len();
                let mut h = vec![0x40 | ihl as u8, dscp << 2, (total >> 8) as u8, total as u8];
                h.extend_from_slice(&id.to_be_bytes());
                let frag = (u16::from(*more_fragments) << 13) | (frag_offset & 0x1fff);
                h.extend_from_slice(&frag.to_be_bytes());
                h.extend_from_slice(&[*ttl, proto, 0, 0]);
                h.extend_from_slice(&src.octets());
                h.extend_from_slice(&dst.octets());
                h.extend_from_slice(&opts);
                let c = checksum(0, &h);
                h[10..12].copy_from_slice(&c.to_be_bytes());
                f.extend_from_slice(&h);
                f.extend_from_slice(&l4);
            }
            Net::V6 {
                src,
                dst,
                hop_limit,
                flow_label,
                ext,
            } => {
                f.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
                let proto = self.transport.as_ref().map_or(59, Transport::proto);
                // The upper-layer checksum uses the final destination (RFC 8200 8.1): the last
                // address of a routing header with segments left.
                let mut final_dst = *dst;
                for e in ext {
                    if let ExtHeader::Routing {
                        segments_left,
                        addresses,
                        ..
                    } = e
                        && *segments_left > 0
                        && let Some(a) = addresses.last()
                    {
                        final_dst = *a;
                    }
                }
                let first_fragment = !ext
                    .iter()
                    .any(|e| matches!(e, ExtHeader::Fragment { offset, .. } if *offset != 0));
                let l4 = self.l4_bytes(&src.octets(), &final_dst.octets(), first_fragment);
                let mut exts = Vec::new();
                for (i, e) in ext.iter().enumerate() {
                    let next = ext.get(i + 1).map_or(proto, ExtHeader::number);
                    exts.extend_from_slice(&e.bytes(next));
                }
                let first = ext.first().map_or(proto, ExtHeader::number);
                let plen = (exts.len() + l4.len()) as u16;
                let vtf = (6u32 << 28) | (flow_label & 0xf_ffff);
                f.extend_from_slice(&vtf.to_be_bytes());
                f.extend_from_slice(&plen.to_be_bytes());
                f.extend_from_slice(&[first, *hop_limit]);
                f.extend_from_slice(&src.octets());
                f.extend_from_slice(&dst.octets());
                f.extend_from_slice(&exts);
                f.extend_from_slice(&l4);
            }
        }
        f
    }

    /// Transport header + payload, with the checksum computed over the pseudo header of
    /// `src`/`dst` (IPv4 or IPv6 addresses). ICMP (v4) has no pseudo header. A non-first
    /// fragment carries only payload.
    fn l4_bytes(&self, src: &[u8], dst: &[u8], first_fragment: bool) -> Vec<u8> {
        let Some(t) = &self.transport else {
            return self.payload.clone();
        };
        if !first_fragment {
            return self.payload.clone();
        }
        let mut b = Vec::new();
        let csum_at = match t {
            Transport::Tcp {
                sport,
                dport,
                flags,
                seq,
                ack,
                window,
            } => {
                b.extend_from_slice(&sport.to_be_bytes());
                b.extend_from_slice(&dport.to_be_bytes());
                b.extend_from_slice(&seq.to_be_bytes());
                b.extend_from_slice(&ack.to_be_bytes());
                b.extend_from_slice(&[0x50, *flags]);
                b.extend_from_slice(&window.to_be_bytes());
                b.extend_from_slice(&[0, 0, 0, 0]);
                Some(16)
            }
            Transport::Udp { sport, dport } => {
                b.extend_from_slice(&sport.to_be_bytes());
                b.extend_from_slice(&dport.to_be_bytes());
                b.extend_from_slice(&((8 + self.payload.len()) as u16).to_be_bytes());
                b.extend_from_slice(&[0, 0]);
                Some(6)
            }
            Transport::Icmp { ty, code, rest } | Transport::Icmpv6 { ty, code, rest } => {
                b.extend_from_slice(&[*ty, *code, 0, 0]);
                b.extend_from_slice(rest);
                Some(2)
            }
            Transport::Raw { .. } => None,
        };
        b.extend_from_slice(&self.payload);
        if let Some(at) = csum_at {
            let start = match t {
                Transport::Icmp { .. } => 0,
                _ => pseudo_sum(src, dst, t.proto(), b.len()),
            };
            let mut c = checksum(start, &b);
            if c == 0 && matches!(t, Transport::Udp { .. }) {
                c = 0xffff;
            }
            b[at..at + 2].copy_from_slice(&c.to_be_bytes());
        }
        b
    }
}

/// Ways to damage a built frame, to make malformed packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// Keep only the first N bytes (a capture cut short by the snap length or a bad driver).
    Truncate(usize),
    /// Set the IPv4 total length (at the network header offset + 2) to this value.
    Ipv4TotalLength(u16),
    /// Set the IPv4 version/IHL byte.
    Ipv4VersionIhl(u8),
    /// Set the IPv6 payload length.
    Ipv6PayloadLength(u16),
}

/// Cut `frame` to `len` bytes (no-op when shorter).
pub fn truncate(mut frame: Vec<u8>, len: usize) -> Vec<u8> {
    frame.truncate(len);
    frame
}

/// Apply `damage` to `frame`, whose network header starts at `net_offset`.
pub fn damage(mut frame: Vec<u8>, net_offset: usize, damage: Damage) -> Vec<u8> {
    match damage {
        Damage::Truncate(n) => frame.truncate(n),
        Damage::Ipv4TotalLength(v) => {
            if let Some(s) = frame.get_mut(net_offset + 2..net_offset + 4) {
                s.copy_from_slice(&v.to_be_bytes());
            }
        }
        Damage::Ipv4VersionIhl(v) => {
            if let Some(b) = frame.get_mut(net_offset) {
                *b = v;
            }
        }
        Damage::Ipv6PayloadLength(v) => {
            if let Some(s) = frame.get_mut(net_offset + 4..net_offset + 6) {
                s.copy_from_slice(&v.to_be_bytes());
            }
        }
    }
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_udp_bytes_and_checksums() {
        let mut p = PacketSpec::new(
            Net::v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)),
            Some(Transport::Udp {
                sport: 1024,
                dport: 53,
            }),
        );
        p.payload = b"hi".to_vec();
        let f = p.build();
        assert_eq!(f.len(), 14 + 20 + 8 + 2);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        // Version/IHL, total length 30, TTL 64, protocol 17.
        assert_eq!(f[14], 0x45);
        assert_eq!(&f[16..18], &[0, 30]);
        assert_eq!(f[22], 64);
        assert_eq!(f[23], 17);
        // A correct header checksums to zero.
        assert_eq!(checksum(0, &f[14..34]), 0);
        // UDP length 10, and the UDP checksum verifies with the pseudo header.
        assert_eq!(&f[38..40], &[0, 10]);
        let ps = pseudo_sum(&f[26..30], &f[30..34], 17, 10);
        assert_eq!(checksum(ps, &f[34..]), 0);
    }

    #[test]
    fn vlan_tags_and_ipv6_extension_chain() {
        let mut p = PacketSpec::new(
            Net::V6 {
                src: "2001:db8::1".parse().unwrap(),
                dst: "2001:db8::2".parse().unwrap(),
                hop_limit: 64,
                flow_label: 0,
                ext: vec![
                    ExtHeader::HopByHop {
                        router_alert: false,
                    },
                    ExtHeader::Routing {
                        rtype: 0,
                        segments_left: 1,
                        addresses: vec!["2001:db8::3".parse().unwrap()],
                    },
                    ExtHeader::Fragment {
                        offset: 0,
                        more: false,
                        id: 7,
                    },
                    ExtHeader::DestOpts,
                ],
            },
            Some(Transport::tcp(40000, 443, tcp_flags::SYN)),
        );
        p.tags = vec![Tag::ad(100), Tag::q(30)];
        let f = p.build();
        assert_eq!(&f[12..18], &[0x88, 0xa8, 0x00, 100, 0x81, 0x00]);
        assert_eq!(&f[18..20], &[0x00, 30]);
        assert_eq!(&f[20..22], &[0x86, 0xdd]);
        let ip6 = 22;
        // next header chain: 0 -> 43 -> 44 -> 60 -> 6
        assert_eq!(f[ip6 + 6], 0);
        assert_eq!(f[ip6 + 40], 43);
        assert_eq!(f[ip6 + 48], 44);
        assert_eq!(f[ip6 + 48 + 24], 60);
        assert_eq!(f[ip6 + 48 + 24 + 8], 6);
        // payload length: 8 + 24 + 8 + 8 + 20
        assert_eq!(u16::from_be_bytes([f[ip6 + 4], f[ip6 + 5]]), 68);
        assert_eq!(f.len(), ip6 + 40 + 68);
    }

    #[test]
    fn arp_request_layout() {
        let p = PacketSpec::new(
            Net::Arp {
                op: 1,
                sha: [2, 0, 0, 0, 0, 2],
                spa: Ipv4Addr::new(10, 0, 0, 2),
                tha: [0; 6],
                tpa: Ipv4Addr::new(10, 0, 0, 1),
            },
            None,
        );
        let f = p.build();
        assert_eq!(f.len(), 42);
        assert_eq!(&f[12..22], &[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    }

    #[test]
    fn damage_kinds() {
        let f = PacketSpec::new(
            Net::v4(Ipv4Addr::new(1, 1, 1, 1), Ipv4Addr::new(2, 2, 2, 2)),
            Some(Transport::tcp(1, 2, tcp_flags::SYN)),
        )
        .build();
        assert_eq!(damage(f.clone(), 14, Damage::Truncate(20)).len(), 20);
        let g = damage(f.clone(), 14, Damage::Ipv4TotalLength(9000));
        assert_eq!(&g[16..18], &[0x23, 0x28]);
        let g = damage(f, 14, Damage::Ipv4VersionIhl(0x44));
        assert_eq!(g[14], 0x44);
    }
}
