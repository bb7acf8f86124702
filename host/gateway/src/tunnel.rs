//! Geneve tunnel devices of the gateway, as the kernel's geneve driver in its point-to-point
//! mode (`ip link add gnv0 type geneve id 11 remote 192.0.2.2`): a device of its own, routed to
//! like any other, whose frames travel Ethernet-in-UDP (port 6081) to one remote tunnel
//! endpoint over an underlay device.
//!
//! - **Receive** ([`Gateway::tunnel_rx`]): a Geneve packet that arrives on the underlay device
//!   for the tunnel's local address, from its remote, with its VNI and an Ethernet payload
//!   (protocol type 0x6558), is delivered locally (it passes the input hook as the UDP packet it
//!   is), then its inner frame enters the IP path again on the tunnel device (`geneve_rx` hands
//!   it to the device). Options are accepted and dropped with the outer headers.
//! - **Send** ([`Gateway::tunnel_tx`]): a frame sent on the tunnel device goes out of the
//!   underlay device inside Ethernet + IPv4/IPv6 + UDP + Geneve (no options, VNI of the
//!   tunnel, protocol 0x6558), from the tunnel's local address (the underlay device's first
//!   address of the remote's family when the file gives none) to the remote, to the next hop's
//!   MAC on the underlay. The UDP source port is a hash of the inner packet's addresses,
//!   protocol and ports in the kernel's range 32768-60999 (`udp_flow_src_port`), so every
//!   packet of a flow gets the same one, the flowtable's cached header included; the UDP
//!   checksum is 0 over IPv4 and computed over IPv6 (the driver's defaults); TTL 64, DF clear
//!   (the driver's `ttl 0` inherits the route's 64; `df unset`).
//!
//! A tunnel device's MTU, when the file gives none, is its underlay device's minus the
//! encapsulation (50 bytes over IPv4, 70 over IPv6), as the driver sets it.
//!
//! A flow through a tunnel is offloaded with the tunnel ([`super::netfilter`]): keyed on the
//! underlay with the VNI and the tunnel's two ends (a packet from another peer is not the
//! flow's), or encapsulated with the header [`Gateway::tunnel_template`] builds, the same the
//! slow path sends.
//!
//! The netdev egress chains of the tunnel device see the inner frame, then the underlay's the
//! encapsulated one. Not done: a tunnel device's netdev ingress chains do not run on the
//! frames it receives (the underlay's saw them encapsulated), the outer packet sent does not
//! pass the output and postrouting hooks, external (`collect_md`) mode, VXLAN.

use std::net::IpAddr;

use wasp_flowtable::{EncapTemplate, GeneveEncap};
use wasp_wire::{ethernet, geneve, ipv4, ipv6, th, udp};

use super::{DevId, DropReason, Gateway};

/// The Geneve UDP port (RFC 8926).
pub const GENEVE_PORT: u16 = udp::PORT_GENEVE;

/// Outer TTL / hop limit of the frames a tunnel sends.
pub const TUNNEL_TTL: u8 = 64;

/// A Geneve tunnel device's parameters (`tunnel NAME geneve id VNI remote ADDR [local ADDR] dev
/// UNDERLAY` in the gateway file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tunnel {
    /// Virtual network identifier (24 bits).
    pub vni: u32,
    /// The remote tunnel endpoint.
    pub remote: IpAddr,
    /// The local endpoint; `None`: the underlay device's first address of `remote`'s family.
    pub local: Option<IpAddr>,
    /// The device the outer packets leave and arrive on.
    pub underlay: DevId,
}

/// Bytes a Geneve encapsulation without options takes from the underlay's MTU (IP packet
/// bytes): the inner Ethernet header 14 + outer IP 20 or 40 + UDP 8 + Geneve 8.
pub fn overhead(v6: bool) -> u32 {
    let ip = if v6 {
        ipv6::HEADER_LEN
    } else {
        ipv4::MIN_HEADER_LEN
    };
    (ethernet::HEADER_LEN + ip + udp::HEADER_LEN + geneve::MIN_HEADER_LEN) as u32
}

/// The UDP source port of a Geneve frame carrying `inner` (an Ethernet frame): see
/// [`flow_src_port`] (the ports left out when the transport header is cut off before them,
/// found at the IHL the IPv4 header carries); non-IP frames, and IP frames shorter than their
/// fixed header, hash their Ethernet header.
pub fn src_port(inner: &[u8]) -> u16 {
    let Ok(eth) = ethernet::Frame::new_checked(inner) else {
        return hash_port(&[inner]);
    };
    let ports = |l4: Option<&[u8]>| {
        l4.and_then(|b| th::Ports::new_checked(b).ok())
            .map_or(Vec::new(), |p| {
                [p.src_port().to_be_bytes(), p.dst_port().to_be_bytes()].concat()
            })
    };
    let ip = eth.payload();
    match eth.ethertype() {
        ethernet::ethertype::IPV4 => match ipv4::FixedHeader::new_checked(ip) {
            Ok(h) => hash_port(&[
                &h.src(),
                &h.dst(),
                &[h.protocol()],
                &ports(ip.get(h.header_len()..)),
            ]),
            Err(_) => hash_port(&[eth.header()]),
        },
        ethernet::ethertype::IPV6 => match ipv6::Packet::new_checked(ip) {
            Ok(h) => hash_port(&[
                &h.src(),
                &h.dst(),
                &[h.next_header()],
                &ports(ip.get(ipv6::HEADER_LEN..)),
            ]),
            Err(_) => hash_port(&[eth.header()]),
        },
        _ => hash_port(&[eth.header()]),
    }
}

/// The UDP source port of the Geneve frames of a flow (addresses, protocol, source and
/// destination port of the inner packet as it is sent): FNV-1a over them, folded into
/// 32768-60999 as the kernel's `udp_flow_src_port` folds its flow hash. [`src_port`] gives the
/// same for each of the flow's frames, so the flowtable's cached header agrees with the slow
/// path's.
pub fn flow_src_port(src: IpAddr, dst: IpAddr, proto: u8, sport: u16, dport: u16) -> u16 {
    let oct = |a: IpAddr| match a {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    let mut p = [0u8; 4];
    p[..2].copy_from_slice(&sport.to_be_bytes());
    p[2..].copy_from_slice(&dport.to_be_bytes());
    hash_port(&[&oct(src), &oct(dst), &[proto], &p])
}

fn hash_port(parts: &[&[u8]]) -> u16 {
    let mut h: u32 = 0x811c_9dc5;
    for &x in parts.iter().flat_map(|p| p.iter()) {
        h ^= u32::from(x);
        h = h.wrapping_mul(0x0100_0193);
    }
    (32768 + h % (61000 - 32768)) as u16
}

impl Gateway {
    /// `true` when the gateway has a tunnel device (the send path looks its device up by name
    /// only then).
    pub fn has_tunnels(&self) -> bool {
        self.devices.iter().any(|d| d.tunnel.is_some())
    }

    /// The tunnel device `dev` is, if it is one.
    pub fn tunnel(&self, dev: DevId) -> Option<&Tunnel> {
        self.devices.get(usize::from(dev.0))?.tunnel.as_ref()
    }

    /// (remote, local) of tunnel device `dev`: the outer source and destination of what it
    /// receives.
    pub fn tunnel_ends(&self, dev: DevId) -> Option<(IpAddr, IpAddr)> {
        let t = self.tunnel(dev)?;
        Some((t.remote, self.tunnel_local(t)?))
    }

    /// The local endpoint of tunnel `t`.
    fn tunnel_local(&self, t: &Tunnel) -> Option<IpAddr> {
        t.local
            .or_else(|| self.device_addr(t.underlay, t.remote.is_ipv6()))
    }

    /// The tunnel device whose packet `frame` (received on `input`, delivered locally) is, and
    /// the offset of its inner Ethernet frame: a Geneve packet with an Ethernet payload, from
    /// the tunnel's remote to its local address, with its VNI. `None` for anything else.
    pub fn tunnel_rx(&self, input: DevId, frame: &[u8]) -> Option<(DevId, usize)> {
        let meta = wasp_wire::parse(frame);
        let t = meta.tunnel?;
        if t.kind != wasp_wire::meta::TunnelKind::Geneve
            || t.inner_proto != ethernet::ethertype::TEB
        {
            return None;
        }
        let inner = usize::from(t.inner_offset?);
        let (src, dst) = meta.ip_addrs(frame)?;
        if frame.len() < inner + ethernet::HEADER_LEN {
            return None;
        }
        self.devices.iter().enumerate().find_map(|(i, d)| {
            let tun = d.tunnel.as_ref()?;
            (tun.underlay == input
                && tun.vni == t.vni
                && tun.remote == src
                && self.tunnel_local(tun) == Some(dst))
            .then_some((DevId(i as u16), inner))
        })
    }

    /// The outer header tunnel device `dev` puts in front of an inner frame whose UDP source
    /// port is `sport`: the underlay device it leaves on, and the template. Errors: `dev` is
    /// not a tunnel ([`DropReason::UnknownDevice`]), no local address ([`DropReason::NoRoute`]),
    /// or the underlay next hop to the remote is not known ([`DropReason::NoNeighbour`]).
    pub fn tunnel_template(
        &self,
        dev: DevId,
        sport: u16,
    ) -> Result<(DevId, EncapTemplate), DropReason> {
        let t = self.tunnel(dev).ok_or(DropReason::UnknownDevice)?;
        let local = self.tunnel_local(t).ok_or(DropReason::NoRoute)?;
        let next = self
            .routes
            .lookup(t.remote)
            .filter(|r| r.dev == t.underlay)
            .map(|r| r.via.unwrap_or(t.remote))
            .unwrap_or(t.remote);
        let (smac, dmac) = self.link(t.underlay, next)?;
        let tpl = EncapTemplate::geneve(&GeneveEncap {
            smac,
            dmac,
            src: local,
            dst: t.remote,
            src_port: sport,
            dst_port: GENEVE_PORT,
            ttl: TUNNEL_TTL,
            df: false,
            vni: t.vni,
            critical: false,
            options: Vec::new(),
        })
        .map_err(|_| DropReason::NoRoute)?;
        Ok((t.underlay, tpl))
    }

    /// `inner`, sent on tunnel device `dev`, as it leaves the underlay device: (that device,
    /// the encapsulated frame). Errors as [`Gateway::tunnel_template`], and
    /// [`DropReason::TooBig`] when the outer packet would not fit the underlay's MTU (a tunnel
    /// MTU set above the underlay's minus the encapsulation; the kernel would fragment the
    /// outer packet, wasp does not fragment).
    pub fn tunnel_tx(&self, dev: DevId, inner: &[u8]) -> Result<(DevId, Vec<u8>), DropReason> {
        let (under, tpl) = self.tunnel_template(dev, src_port(inner))?;
        let outer_l3 = tpl.len() - ethernet::HEADER_LEN + inner.len();
        if let Some(mtu) = self.devices.get(usize::from(under.0)).and_then(|d| d.mtu)
            && outer_l3 > mtu as usize
        {
            return Err(DropReason::TooBig);
        }
        Ok((under, tpl.encapsulate(inner)))
    }
}
