//! The flow key (the kernel's `struct flow_offload_tuple`, include/net/netfilter/nf_flow_table.h)
//! and its extraction from a frame (`nf_flow_tuple_ip` / `nf_flow_tuple_ipv6`,
//! net/netfilter/nf_flow_table_ip.c).

use std::net::IpAddr;

use wasp_wire::meta::{PacketMeta, TunnelKind};
use wasp_wire::{ethernet, ipv4, ipv6, tcp, th, udp};

/// IP protocol number of TCP.
pub const TCP: u8 = ipv4::protocol::TCP;
/// IP protocol number of UDP.
pub const UDP: u8 = ipv4::protocol::UDP;

const ETH_IPV4: u16 = ethernet::ethertype::IPV4;
const ETH_IPV6: u16 = ethernet::ethertype::IPV6;
/// Geneve's protocol type for an Ethernet payload (RFC 8926 3.4, "Transparent Ethernet
/// Bridging").
pub(crate) const ETH_TEB: u16 = ethernet::ethertype::TEB;

/// One direction of a flow as the fast path looks it up: the kernel's `flow_offload_tuple`
/// (addresses, ports, L3 and L4 protocol, input interface), plus the Geneve VNI the packet came
/// in when the flow is decapsulated (the kernel's tunnel offload keys on the tunnel too; wasp's
/// Geneve gateway has tenants whose inner addresses may overlap).
///
/// The L3 protocol is the family of `src` and `dst` (both the same family: [`FlowKey::valid`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct FlowKey {
    /// Source address of the packets of this direction.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// TCP/UDP source port (host order).
    pub src_port: u16,
    /// TCP/UDP destination port (host order).
    pub dst_port: u16,
    /// L4 protocol: [`TCP`] or [`UDP`] (the only ones the kernel's flowtable offloads besides
    /// GRE, which wasp does not).
    pub l4proto: u8,
    /// Input device id (chosen by the caller, e.g. wasp-core's `DevId.0`): the kernel's
    /// `iifidx`. A packet of the flow arriving on another device misses.
    pub iif: u16,
    /// `Some(vni)`: the packets of this direction arrive Geneve-encapsulated (carrying Ethernet)
    /// in VNI `vni`, and the addresses and ports are those of the inner packet. `None`: plain.
    pub tun_id: Option<u32>,
}

/// The key hashed as five words (addresses as 128 bits each, then ports, protocols, device and
/// VNI packed): a fifth of the hashing work of the fields one by one, on the fast path of every
/// packet. Keys that are equal hash equal.
impl std::hash::Hash for FlowKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let bits = |a: IpAddr| match a {
            IpAddr::V4(v) => u128::from(u32::from(v)),
            IpAddr::V6(v) => u128::from(v),
        };
        h.write_u128(bits(self.src));
        h.write_u128(bits(self.dst));
        h.write_u64(
            u64::from(self.src_port)
                | u64::from(self.dst_port) << 16
                | u64::from(self.l4proto) << 32
                | u64::from(self.iif) << 40
                | u64::from(self.src.is_ipv6()) << 56
                | u64::from(self.tun_id.is_some()) << 57,
        );
        h.write_u32(self.tun_id.unwrap_or(0));
    }
}

impl FlowKey {
    /// The L3 protocol as an EtherType: 0x0800 (IPv4) or 0x86dd (IPv6).
    pub fn l3proto(&self) -> u16 {
        if self.src.is_ipv4() {
            ETH_IPV4
        } else {
            ETH_IPV6
        }
    }

    /// Whether the key can describe a flow: both addresses of one family, TCP or UDP.
    pub fn valid(&self) -> bool {
        self.src.is_ipv4() == self.dst.is_ipv4() && matches!(self.l4proto, TCP | UDP)
    }
}

/// Direction of a flow: which of its two keys a packet matched (the kernel's
/// `flow_offload_tuple_dir`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dir {
    /// The direction of the connection's first packet (`FLOW_OFFLOAD_DIR_ORIGINAL`).
    Original = 0,
    /// The other direction (`FLOW_OFFLOAD_DIR_REPLY`).
    Reply = 1,
}

impl Dir {
    /// 0 for [`Dir::Original`], 1 for [`Dir::Reply`]: the index into per-direction arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The keyed hasher of the flow maps (foldhash, seeded from [`crate::FlowtableConfig::seed`]):
/// flow keys are tuples that packets choose, so a sender who cannot see the seed cannot aim
/// them at one bucket.
pub(crate) type KeyHash = foldhash::fast::FixedState;

/// What the fast path read from a frame: the key to look up and where the headers are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Parsed {
    pub key: FlowKey,
    /// Bytes in front of the packet's own Ethernet header (the outer Ethernet + IP + UDP +
    /// Geneve of a decapsulated flow's packet; 0 otherwise).
    pub strip: usize,
    /// Length of the IP packet (IPv4 total length, IPv6 40 + payload length), bytes.
    pub l3_len: usize,
    /// IPv6 (else IPv4).
    pub ipv6: bool,
    /// TTL or hop limit of the packet.
    pub ttl: u8,
    /// TCP flags byte (0 for UDP).
    pub tcp_flags: u8,
}

/// Read the key of the (untagged) Ethernet frame at `frame[at..]`, as `nf_flow_tuple_ip` /
/// `nf_flow_tuple_ipv6` do: `None` (not for the fast path) for anything but IPv4 without options
/// and unfragmented, or IPv6 whose next header is TCP or UDP, with a complete TCP (20 bytes) or
/// UDP (8 bytes) header inside the IP packet's length. The TTL is read, not judged (the caller
/// sends TTL <= 1 to the slow path after the lookup).
pub(crate) fn parse_at(frame: &[u8], at: usize, iif: u16, tun_id: Option<u32>) -> Option<Parsed> {
    let eth = ethernet::Frame::new_checked(frame.get(at..)?).ok()?;
    let ip = eth.payload();
    let (src, dst, l4off, l3_len, proto, ttl, ipv6) = match eth.ethertype() {
        ETH_IPV4 => {
            let h = ipv4::Packet::new_checked(ip).ok()?;
            if h.version() != 4 || h.header_len() != ipv4::MIN_HEADER_LEN {
                // Wrong version, or options (ihl != 5): ip_has_options() keeps it slow.
                return None;
            }
            let total = usize::from(h.total_len());
            if total < ipv4::MIN_HEADER_LEN
                || total > ip.len()
                || h.more_frags()
                || h.frag_offset() != 0
            {
                return None;
            }
            let (s, d): (IpAddr, IpAddr) = (h.src_addr().into(), h.dst_addr().into());
            (
                s,
                d,
                ipv4::MIN_HEADER_LEN,
                total,
                h.protocol(),
                h.ttl(),
                false,
            )
        }
        ETH_IPV6 => {
            let h = ipv6::Packet::new_checked(ip).ok()?;
            if h.version() != 6 {
                return None;
            }
            let total = ipv6::HEADER_LEN + usize::from(h.payload_len());
            if total > ip.len() {
                return None;
            }
            let (s, d): (IpAddr, IpAddr) = (h.src_addr().into(), h.dst_addr().into());
            (
                s,
                d,
                ipv6::HEADER_LEN,
                total,
                h.next_header(),
                h.hop_limit(),
                true,
            )
        }
        _ => return None,
    };
    let need = match proto {
        TCP => tcp::MIN_HEADER_LEN,
        UDP => udp::HEADER_LEN,
        _ => return None,
    };
    if l3_len < l4off + need {
        return None;
    }
    let l4 = &ip[l4off..];
    let ports = th::Ports::new_checked(l4).ok()?;
    Some(Parsed {
        key: FlowKey {
            src,
            dst,
            src_port: ports.src_port(),
            dst_port: ports.dst_port(),
            l4proto: proto,
            iif,
            tun_id,
        },
        strip: at,
        l3_len,
        ipv6,
        ttl,
        tcp_flags: if proto == TCP {
            tcp::flags_of(l4).unwrap_or(0)
        } else {
            0
        },
    })
}

/// The Geneve-encapsulated Ethernet frame inside `frame`, if `meta` found one: (offset of the
/// inner Ethernet header, VNI).
pub(crate) fn geneve_inner(meta: &PacketMeta) -> Option<(usize, u32)> {
    let t = meta.tunnel?;
    if t.kind != TunnelKind::Geneve || t.inner_proto != ETH_TEB {
        return None;
    }
    Some((usize::from(t.inner_offset?), t.vni))
}
