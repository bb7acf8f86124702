//! What a flow does to its packets, per direction: the kernel's cached route in
//! `flow_offload_tuple` (output device, MACs, MTU: `flow_offload_fill_route`), the NAT edit
//! (`nf_flow_nat_ip` / `nf_flow_nat_ipv6`), the TTL decrement, and wasp's Geneve tunnel work.
//! [`Route`] is what the caller gives; [`DirPlan`] is what [`crate::Flowtable::add`] precomputes
//! from it for the fast path.

use std::net::IpAddr;

use wasp_wire::{ethernet, geneve, ipv4, ipv6, udp};

use crate::checksum;
use crate::key::{ETH_TEB, FlowKey, UDP};
use crate::table::AddError;

/// Where and how one direction's packets leave (given by the caller when the flow is added).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Output device id (the caller's numbering, as [`FlowKey::iif`]).
    pub out_dev: u16,
    /// Source MAC of the forwarded frame (the output device's).
    pub smac: [u8; 6],
    /// Destination MAC of the forwarded frame (the next hop's).
    pub dmac: [u8; 6],
    /// Largest IP packet (L3 bytes, headers included) sent on `out_dev`: the kernel's
    /// `tuple.mtu` (`ip_dst_mtu_maybe_forward`). For an encapsulating direction it bounds the
    /// outer packet (template's IP header + UDP + Geneve + inner Ethernet + inner IP packet).
    /// A bigger packet goes to the slow path ([`crate::SlowReason::Mtu`]).
    pub mtu: u32,
    /// Decrement the TTL / hop limit (with the IPv4 checksum), as forwarding does
    /// (`ip_decrease_ttl`). False for a flowtable bridging frames at L2.
    pub dec_ttl: bool,
    /// Address and port rewrite.
    pub nat: NatEdit,
    /// Tunnel work.
    pub tunnel: TunnelWork,
}

/// The NAT rewrite of one direction, as plain new values (`None`: unchanged). The caller
/// derives them from conntrack (e.g. for SNAT, original: new `src` and `src_port`; reply: new
/// `dst` and `dst_port`), as the kernel derives them from the other direction's tuple
/// (`nf_flow_snat_ip`, `nf_flow_dnat_port`...). Addresses must be of the key's family.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NatEdit {
    /// New source address.
    pub src: Option<IpAddr>,
    /// New destination address.
    pub dst: Option<IpAddr>,
    /// New source port.
    pub src_port: Option<u16>,
    /// New destination port.
    pub dst_port: Option<u16>,
}

impl NatEdit {
    /// True when nothing changes.
    pub fn is_none(&self) -> bool {
        *self == NatEdit::default()
    }
}

/// Tunnel work of one direction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum TunnelWork {
    /// Plain forwarding.
    #[default]
    None,
    /// The packets arrive Geneve-encapsulated carrying Ethernet (the key has `tun_id`): the
    /// outer Ethernet + IP + UDP + Geneve (with its options, as long as each packet says) are
    /// stripped, and the inner frame is forwarded (its Ethernet header gets the route's MACs).
    Decap {
        /// The outer (source, destination) addresses the packets must carry: the tunnel's
        /// remote and local ends. A packet from elsewhere is not the flow's
        /// ([`crate::FastPath::Miss`]: the slow path judges it). `None`: any.
        outer: Option<(IpAddr, IpAddr)>,
    },
    /// Prepend this outer header to the forwarded frame (after its own MAC rewrite, NAT and
    /// TTL decrement); the outer IP length and checksum and the UDP length (and checksum, over
    /// IPv6) are set per packet.
    Encap(EncapTemplate),
}

/// A cached outer header: Ethernet + IPv4 (20 bytes, no options) or IPv6 (40 bytes, next header
/// UDP) + UDP + Geneve (8 bytes + options) with protocol type 0x6558 (Ethernet).
///
/// Per packet: the IPv4 total length and header checksum (from a precomputed sum), or the IPv6
/// payload length; the UDP length; the UDP checksum stays 0 over IPv4 (RFC 8926 3.3 allows it;
/// Linux's geneve driver sends 0 unless `udpcsum`) and is computed over IPv6 (Linux's default,
/// `udp6zerocsumtx` off). Every other byte (MACs, addresses, ports, TTL, ID, VNI, options) is
/// sent as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncapTemplate {
    bytes: Vec<u8>,
    ipv6: bool,
    /// Offset of the UDP header.
    udp: usize,
    /// Sum of the IPv4 header with its total length and checksum fields zero.
    ip_sum: u16,
    /// The outer IPv6 addresses (for the UDP checksum's pseudo-header).
    v6_addrs: Option<(std::net::Ipv6Addr, std::net::Ipv6Addr)>,
}

/// The parts of a Geneve outer header, for [`EncapTemplate::geneve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneveEncap {
    /// Outer source MAC.
    pub smac: [u8; 6],
    /// Outer destination MAC.
    pub dmac: [u8; 6],
    /// Outer source address (IPv4 or IPv6, as `dst`).
    pub src: IpAddr,
    /// Outer destination address.
    pub dst: IpAddr,
    /// UDP source port (often a hash of the inner flow, for ECMP).
    pub src_port: u16,
    /// UDP destination port (6081 for Geneve).
    pub dst_port: u16,
    /// TTL / hop limit of the outer header.
    pub ttl: u8,
    /// IPv4: set Don't Fragment.
    pub df: bool,
    /// Virtual network identifier (24 bits).
    pub vni: u32,
    /// Geneve's C bit (critical options present).
    pub critical: bool,
    /// Options, already encoded (class, type, length, data), a multiple of 4 bytes, at most 252.
    pub options: Vec<u8>,
}

impl EncapTemplate {
    /// Build the template from its parts. Errors: mixed address families, a VNI over 24 bits,
    /// options not a multiple of 4 bytes or longer than 252 bytes.
    pub fn geneve(g: &GeneveEncap) -> Result<EncapTemplate, AddError> {
        let tunnel = geneve::Repr {
            oam: false,
            critical: g.critical,
            protocol: ETH_TEB,
            vni: g.vni,
            options: &g.options,
        };
        let mut gnv = vec![0; tunnel.header_len()];
        tunnel
            .emit(&mut gnv)
            .map_err(|_| AddError::Invalid("geneve options or vni"))?;
        // Lengths and checksums are set per packet (`write`): 0 here.
        let (ethertype, ip) = match (g.src, g.dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                let ip = ipv4::Repr {
                    src,
                    dst,
                    protocol: UDP,
                    payload_len: 0,
                    ttl: g.ttl,
                    tos: 0,
                    ident: 0,
                    dont_frag: g.df,
                };
                (ethernet::ethertype::IPV4, ip.to_bytes().to_vec())
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                let ip = ipv6::Repr {
                    src,
                    dst,
                    next_header: UDP,
                    payload_len: 0,
                    hop_limit: g.ttl,
                };
                (ethernet::ethertype::IPV6, ip.to_bytes().to_vec())
            }
            _ => {
                return Err(AddError::Invalid(
                    "geneve outer addresses of mixed families",
                ));
            }
        };
        let eth = ethernet::Repr {
            dst: g.dmac,
            src: g.smac,
            ethertype,
        };
        let outer_udp = udp::Repr {
            src_port: g.src_port,
            dst_port: g.dst_port,
            length: 0,
            checksum: 0,
        };
        let mut b =
            Vec::with_capacity(ethernet::HEADER_LEN + ip.len() + udp::HEADER_LEN + gnv.len());
        b.extend_from_slice(&eth.to_bytes());
        b.extend_from_slice(&ip);
        b.extend_from_slice(&outer_udp.to_bytes());
        b.extend_from_slice(&gnv);
        EncapTemplate::from_bytes(&b)
    }

    /// Take `bytes` (e.g. the outer headers of a captured Geneve frame) as the template: it must
    /// be exactly Ethernet (EtherType 0x0800 or 0x86dd) + IPv4 without options (protocol 17) or
    /// IPv6 (next header 17) + UDP + Geneve version 0 with protocol type 0x6558 and its options.
    /// Length, checksum fields are ignored (set per packet).
    pub fn from_bytes(bytes: &[u8]) -> Result<EncapTemplate, AddError> {
        let bad = |what| Err(AddError::Invalid(what));
        let Ok(eth) = ethernet::Frame::new_checked(bytes) else {
            return bad("encap template shorter than Ethernet");
        };
        let not_ip_udp = "encap template: not Ethernet + IPv4/IPv6 (no options) + UDP";
        let l3 = eth.payload();
        let (ipv6, ip_len, v6_addrs) = match eth.ethertype() {
            ethernet::ethertype::IPV4 => match ipv4::Packet::new_checked(l3) {
                Ok(h) if h.version() == 4 && h.header_len() == ipv4::MIN_HEADER_LEN => {
                    (false, ipv4::MIN_HEADER_LEN, None)
                }
                _ => return bad(not_ip_udp),
            },
            ethernet::ethertype::IPV6 => match ipv6::Packet::new_checked(l3) {
                Ok(h) if h.version() == 6 => {
                    (true, ipv6::HEADER_LEN, Some((h.src_addr(), h.dst_addr())))
                }
                _ => return bad(not_ip_udp),
            },
            _ => return bad(not_ip_udp),
        };
        let next = if ipv6 {
            ipv6::Packet::new_checked(l3).map(|h| h.next_header())
        } else {
            ipv4::Packet::new_checked(l3).map(|h| h.protocol())
        };
        if next != Ok(UDP) {
            return bad(not_ip_udp);
        }
        let udp = ethernet::HEADER_LEN + ip_len;
        let gnv = bytes.get(udp + udp::HEADER_LEN..).unwrap_or(&[]);
        if gnv.len() < geneve::MIN_HEADER_LEN {
            return bad("encap template: Geneve header cut short");
        }
        match geneve::Header::new_checked(gnv) {
            Ok(h) if h.version() == 0 && h.protocol() == ETH_TEB && h.payload().is_empty() => {}
            _ => {
                return bad("encap template: Geneve version, protocol (0x6558) or option length");
            }
        }
        let mut b = bytes.to_vec();
        let ip_sum = if ipv6 {
            if let Ok(mut h) = ipv6::PacketMut::new_checked(&mut b[ethernet::HEADER_LEN..]) {
                h.set_payload_len(0);
            }
            0
        } else {
            let ip = &mut b[ethernet::HEADER_LEN..udp];
            if let Ok(mut h) = ipv4::PacketMut::new_checked(ip) {
                h.set_total_len(0);
                h.set_checksum(0);
            }
            checksum::sum(0, ip)
        };
        if let Ok(mut u) = udp::PacketMut::new_checked(&mut b[udp..]) {
            u.set_length(0);
            u.set_checksum(0);
        }
        Ok(EncapTemplate {
            bytes: b,
            ipv6,
            udp,
            ip_sum,
            v6_addrs,
        })
    }

    /// The template's bytes (length and checksum fields zero).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Bytes the template adds in front of the forwarded frame.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Never true (a template has at least its headers); for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// `inner` (an Ethernet frame) inside the template's outer headers, lengths and checksums
    /// set as the fast path sets them: the slow path's encapsulation, so that a flow's packets
    /// leave with the same outer header before and after it is offloaded.
    pub fn encapsulate(&self, inner: &[u8]) -> Vec<u8> {
        let t = self.bytes.len();
        let mut out = vec![0; t + inner.len()];
        out[t..].copy_from_slice(inner);
        self.write(&mut out, inner.len());
        out
    }

    /// Write the template into `out[..self.len()]` for an inner frame of `inner_len` bytes that
    /// is already in `out[self.len()..]`: lengths and checksums fixed.
    pub(crate) fn write(&self, out: &mut [u8], inner_len: usize) {
        let t = self.bytes.len();
        out[..t].copy_from_slice(&self.bytes);
        let end = t + inner_len;
        let udp_len = (end - self.udp) as u16;
        let (l3, datagram) = out[..end].split_at_mut(self.udp);
        let l3 = &mut l3[ethernet::HEADER_LEN..];
        let Ok(mut u) = udp::PacketMut::new_checked(datagram) else {
            return;
        };
        u.set_length(udp_len);
        match self.v6_addrs {
            Some((src, dst)) => {
                if let Ok(mut h) = ipv6::PacketMut::new_checked(l3) {
                    h.set_payload_len(udp_len);
                }
                u.fill_checksum_v6(&src, &dst);
            }
            None => {
                let total = (end - ethernet::HEADER_LEN) as u16;
                if let Ok(mut h) = ipv4::PacketMut::new_checked(l3) {
                    h.set_total_len(total);
                    h.set_checksum(!checksum::fold(u64::from(self.ip_sum) + u64::from(total)));
                }
            }
        }
    }
}

/// A direction's NAT, ready for the fast path: the new bytes and the checksum deltas (constant
/// per direction, since every packet of a direction carries its key's addresses and ports).
#[derive(Debug, Clone, Default)]
pub(crate) struct NatPlan {
    pub src: Option<IpAddr>,
    pub dst: Option<IpAddr>,
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    /// IPv4 header checksum delta of the address changes.
    pub l3_delta: u64,
    /// TCP/UDP checksum delta: addresses (pseudo-header) and ports.
    pub l4_delta: u64,
}

/// A direction's route, checked and precomputed by [`crate::Flowtable::add`].
#[derive(Debug, Clone)]
pub(crate) struct DirPlan {
    pub route: Route,
    pub nat: Option<NatPlan>,
    pub l4proto: u8,
}

fn octets(a: IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

impl DirPlan {
    /// Check `route` against `key` and precompute.
    pub(crate) fn new(key: &FlowKey, route: &Route) -> Result<DirPlan, AddError> {
        let fam = key.src.is_ipv4();
        let n = &route.nat;
        if [n.src, n.dst].iter().flatten().any(|a| a.is_ipv4() != fam) {
            return Err(AddError::Invalid(
                "NAT address of another family than the key",
            ));
        }
        if key.tun_id.is_some() != matches!(route.tunnel, TunnelWork::Decap { .. }) {
            return Err(AddError::Invalid(
                "a key with tun_id needs TunnelWork::Decap, and Decap needs a key with tun_id",
            ));
        }
        if route.mtu == 0 {
            return Err(AddError::Invalid("MTU 0"));
        }
        let nat = (!n.is_none()).then(|| {
            let mut l3 = 0;
            if let Some(a) = n.src {
                l3 += checksum::delta(&octets(key.src), &octets(a));
            }
            if let Some(a) = n.dst {
                l3 += checksum::delta(&octets(key.dst), &octets(a));
            }
            let mut l4 = l3;
            if let Some(p) = n.src_port {
                l4 += checksum::delta(&key.src_port.to_be_bytes(), &p.to_be_bytes());
            }
            if let Some(p) = n.dst_port {
                l4 += checksum::delta(&key.dst_port.to_be_bytes(), &p.to_be_bytes());
            }
            NatPlan {
                src: n.src,
                dst: n.dst,
                src_port: n.src_port,
                dst_port: n.dst_port,
                l3_delta: if fam { l3 } else { 0 },
                l4_delta: l4,
            }
        });
        Ok(DirPlan {
            route: route.clone(),
            nat,
            l4proto: key.l4proto,
        })
    }

    /// Encapsulation overhead in bytes (0 without encap).
    pub(crate) fn encap_len(&self) -> usize {
        match &self.route.tunnel {
            TunnelWork::Encap(t) => t.len(),
            _ => 0,
        }
    }
}
