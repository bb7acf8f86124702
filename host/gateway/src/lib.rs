//! wasp's way out, sans-IO: everything after the netdev ingress hook decided a frame. The
//! entry point is [`Forwarder::after_ingress`] ([`path`]): `dup` copies, `reject` replies,
//! `fwd`, then the gateway; a gateway with conntrack takes the IP path ([`netfilter`]: the
//! flowtables' fast path, conntrack, the IP hooks' chains, NAT), and every frame sent runs
//! the netdev egress hook of its device. What leaves goes into a caller-owned [`WayOut`];
//! what became of the packet is its [`Fate`], with the [`DropReason`] when it was dropped.
//!
//! The gateway's forward path: after the ingress hook accepted a frame, [`Gateway`] says what
//! becomes of it. The caller (the daemon's worker, `wasp replay`) gives the input
//! device, the frame and the packet clock's `now`, and gets one [`Action`]: send a frame on a
//! device (the packet, rewritten for its next hop), send a reply the gateway built (an ARP
//! reply, a neighbour advertisement, an ICMP time exceeded), deliver it to the gateway itself,
//! or drop it for a [`DropReason`]. Nothing here reads a clock or makes a syscall.
//!
//! What the gateway does follows the kernel's IPv4/IPv6 forwarding with static routes
//! (`ip_forward`, `ip6_forward`, `arp_process`, `ndisc_recv_ns`):
//! - the frame must be addressed to the input device's MAC to be forwarded (other unicast
//!   MACs are another host's: PACKET_OTHERHOST, dropped); broadcast and multicast frames are
//!   delivered locally, never forwarded;
//! - an IPv4 header that fails the kernel's checks (version, IHL, total length, checksum:
//!   ip_rcv_core) is dropped, as are martian addresses (0/8, 127/8 and multicast sources,
//!   0/8 and 127/8 destinations) and IPv6 packets with a link-local source or destination that
//!   is not the gateway's (RFC 4291 2.5.6);
//! - a packet for one of the gateway's addresses (or a broadcast or multicast one) is
//!   delivered locally ([`Action::Local`]), except ARP requests and neighbour solicitations for
//!   its addresses, which are answered;
//! - otherwise the route is the longest prefix that holds the destination ([`RouteTable`]);
//!   then a TTL or hop limit of 1 or less gets an ICMP time exceeded from the gateway's address
//!   on the input device ([`icmp`]); else the TTL is decremented (the IPv4 checksum updated
//!   incrementally, RFC 1624, as ip_decrease_ttl), the Ethernet source becomes the output
//!   device's MAC and the destination the next hop's ([`NeighbourTable`]); a frame is cut to
//!   the IP packet's length (Ethernet padding dropped, as pskb_trim_rcsum).
//!
//! A next hop without a neighbour entry: the packet is dropped ([`DropReason::NoNeighbour`])
//! and an ARP request or neighbour solicitation for it goes out ([`Action::Resolve`]; at most
//! one per next hop per second, the kernel's retrans_time); the answer (an ARP reply or a
//! neighbour advertisement to the gateway) fills the entry, so the following packets pass.
//! The kernel would queue a few packets meanwhile (arp_queue); wasp drops them.
//!
//! A destination without a route is dropped ([`DropReason::NoRoute`]) and answered with an
//! ICMP destination unreachable (net unreachable; ICMPv6 no route), as ip_error and
//! ip6_pkt_drop answer it ([`Action::Unreachable`]).
//!
//! A packet longer than the output device's MTU ([`Device::mtu`]) is dropped
//! ([`DropReason::TooBig`]) and answered with fragmentation needed (IPv4 with DF, the MTU in
//! the header) or packet too big (IPv6), after the TTL check, as ip_forward / ip6_forward.
//!
//! Not done (yet): fragmenting IPv4 datagrams without DF (dropped as too big), ICMP redirects,
//! ICMP rate limits, VLAN-tagged frames (dropped as [`DropReason::NotIp`]), queueing packets while a
//! next hop is resolved, expiry of learned neighbours.
//!
//! One [`Gateway`] serves one worker at a time (its reply buffer and statistics are its own);
//! a daemon clones it per worker. Neighbours learned from ARP and solicitations stay in the
//! worker's copy.

pub mod arp;
pub mod checksum;
mod config;
mod fib;
#[cfg(test)]
mod fib_tests;
pub mod icmp;
pub mod ip_path;
#[cfg(test)]
mod ip_path_tests;
pub mod nd;
mod neigh;
pub mod netfilter;
#[cfg(test)]
mod netfilter_tests;
pub mod path;
pub mod reject;
mod routes;
pub mod tunnel;
#[cfg(test)]
mod tunnel_tests;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use wasp_wire::{ethernet, ipv4, ipv6};

pub use ip_path::FlowHit;
pub use neigh::{Neighbour, NeighbourTable};
pub use netfilter::Netfilter;
pub use path::{Decided, Fate, ForwardStats, Forwarder, MAX_HOOK_LOGS, Send, SendKind, WayOut};
pub use routes::{Route, RouteTable};
pub use tunnel::Tunnel;

/// A device of the gateway: index into [`Gateway::devices`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DevId(pub u16);

/// A device of the gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Its name (`veth0`).
    pub name: String,
    /// Its MAC: given in the file (`device veth0 mac ...`), set by the daemon from the port
    /// ([`Gateway::set_mac`]), or learned from the first unicast frame received on the device
    /// (its destination). A device without one forwards nothing out and answers nothing.
    pub mac: Option<[u8; 6]>,
    /// Up (the default) or down (`device veth0 down`, [`Gateway::set_up`]): a packet routed
    /// to a device that is down is dropped ([`DropReason::DeviceDown`]).
    pub up: bool,
    /// Its addresses with their prefix lengths, in file order.
    pub addrs: Vec<IpNet>,
    /// Its MTU (`device veth0 mtu 1500`, [`Gateway::set_mtu`]): an IP packet longer than
    /// this is not forwarded out of it. `None`: no limit.
    pub mtu: Option<u32>,
    /// A Geneve tunnel device's parameters (`tunnel` line; [`tunnel`]); `None` for a port.
    pub tunnel: Option<Tunnel>,
}

/// Why a packet was dropped, wherever it was: a chain's verdict, the gateway, the way out,
/// conntrack, or the ports. The one list of reasons every count and summary uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// A chain's verdict: `drop`, `reject`, a policy, or a header the kernel discards before
    /// the chain (at the ingress hook or an IP hook).
    Verdict,
    /// No route holds the destination.
    NoRoute,
    /// The route's next hop has no neighbour entry on the output device.
    NoNeighbour,
    /// The output (or input) device is down.
    DeviceDown,
    /// The output device has no MAC to send from.
    NoMac,
    /// The frame is for another host's MAC (PACKET_OTHERHOST), or a broadcast or multicast
    /// frame whose packet is not for the gateway.
    OtherHost,
    /// Not ARP, IPv4 or IPv6 (or VLAN-tagged, or an ARP packet the gateway does not answer).
    NotIp,
    /// An IPv4 or IPv6 header the kernel refuses (bad version, length or checksum), or a frame
    /// cut short.
    BadHeader,
    /// A martian address (0/8, 127/8, multicast source; 0/8, 127/8 destination), or an IPv6
    /// link-local source or destination that is not the gateway's (not forwardable).
    Martian,
    /// TTL or hop limit exceeded, and no ICMP error is allowed (about an ICMP error, a later
    /// fragment, an odd source) or the gateway has no address to send one from.
    TtlExceeded,
    /// The input device is not one of the gateway's.
    UnknownDevice,
    /// Longer than the output device's MTU: an IPv4 datagram with DF set or an IPv6 packet
    /// (answered with fragmentation needed / packet too big), or an IPv4 datagram without DF
    /// (the kernel would fragment it; wasp does not yet).
    TooBig,
    /// The egress hook of the output device dropped it.
    Egress,
    /// `fwd`/`dup` nested past [`path::RECURSION_LIMIT`].
    Recursion,
    /// Conntrack refused it: the table is full and nothing could be early-dropped, or its new
    /// connection clashed with one another worker confirmed (the kernel's NF_DROP).
    Conntrack,
    /// The output device is not one of the worker's ports.
    NoPort,
    /// The output port's send queue was full.
    TxFull,
}

impl DropReason {
    /// Every reason, in the order of their counters ([`GatewayStats::dropped`], the daemon's
    /// drop slots).
    pub const ALL: [DropReason; 17] = [
        DropReason::Verdict,
        DropReason::NoRoute,
        DropReason::NoNeighbour,
        DropReason::DeviceDown,
        DropReason::NoMac,
        DropReason::OtherHost,
        DropReason::NotIp,
        DropReason::BadHeader,
        DropReason::Martian,
        DropReason::TtlExceeded,
        DropReason::UnknownDevice,
        DropReason::TooBig,
        DropReason::Egress,
        DropReason::Recursion,
        DropReason::Conntrack,
        DropReason::NoPort,
        DropReason::TxFull,
    ];

    /// A short name for summaries: `verdict`, `no-route`, `no-neighbour`, `device-down`,
    /// `no-mac`, `other-host`, `not-ip`, `bad-header`, `martian`, `ttl-exceeded`,
    /// `unknown-device`, `too-big`, `egress-drop`, `recursion`, `conntrack`, `no-port`,
    /// `tx-full`.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Verdict => "verdict",
            DropReason::NoRoute => "no-route",
            DropReason::NoNeighbour => "no-neighbour",
            DropReason::DeviceDown => "device-down",
            DropReason::NoMac => "no-mac",
            DropReason::OtherHost => "other-host",
            DropReason::NotIp => "not-ip",
            DropReason::BadHeader => "bad-header",
            DropReason::Martian => "martian",
            DropReason::TtlExceeded => "ttl-exceeded",
            DropReason::UnknownDevice => "unknown-device",
            DropReason::TooBig => "too-big",
            DropReason::Egress => "egress-drop",
            DropReason::Recursion => "recursion",
            DropReason::Conntrack => "conntrack",
            DropReason::NoPort => "no-port",
            DropReason::TxFull => "tx-full",
        }
    }

    /// Its counter's index in [`DropReason::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// What becomes of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action<'a> {
    /// Send `frame` (the packet rewritten for its next hop, in the gateway's buffer) on `dev`.
    /// The netdev egress hook of `dev` runs on it before it leaves ([`wasp_core::Engine::run`] at [`wasp_core::At::Egress`]).
    Transmit {
        /// Output device.
        dev: DevId,
        /// The frame to send.
        frame: &'a [u8],
    },
    /// [`Gateway::route_in_place`] and [`Gateway::fwd_neigh_in_place`] only: send the packet
    /// on `dev` as [`Action::Transmit`] would, but as the received frame with `rewrite`
    /// applied (to be done in the send buffer itself: one copy from receive to send).
    Forward {
        /// Output device.
        dev: DevId,
        /// What changes.
        rewrite: Rewrite,
    },
    /// The packet is consumed and the gateway answers it with `frame` on `dev` (the input
    /// device): an ARP reply, a neighbour advertisement or an ICMP time exceeded.
    Reply {
        /// Output device (the one the packet came in on).
        dev: DevId,
        /// The reply.
        frame: &'a [u8],
    },
    /// For the gateway itself (one of its addresses, broadcast, multicast, ARP and ND that
    /// needs no answer): delivered to the host side.
    Local,
    /// The packet is dropped (counted) for `reason`: no route ([`DropReason::NoRoute`]), or
    /// too big for the output device ([`DropReason::TooBig`]); and `frame`, the ICMP error
    /// about it (destination unreachable: net unreachable or fragmentation needed; ICMPv6 no
    /// route or packet too big), goes back on `dev` (the input device).
    Unreachable {
        /// The input device.
        dev: DevId,
        /// The ICMP error.
        frame: &'a [u8],
        /// Why the packet was dropped.
        reason: DropReason,
    },
    /// The packet is dropped for want of a neighbour entry for its next hop
    /// ([`DropReason::NoNeighbour`], counted), and `frame`, an ARP request or a neighbour
    /// solicitation for that next hop, is sent on `dev` (the output device).
    Resolve {
        /// The output device.
        dev: DevId,
        /// The request.
        frame: &'a [u8],
    },
    /// Dropped.
    Drop(DropReason),
}

/// What the gateway did since it was made (or [`Gateway::reset_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GatewayStats {
    /// Packets forwarded ([`Action::Transmit`] of [`Gateway::route`]).
    pub forwarded: u64,
    /// Packets delivered locally.
    pub local: u64,
    /// ARP replies sent.
    pub arp_replies: u64,
    /// Neighbour advertisements sent.
    pub nd_replies: u64,
    /// ICMP / ICMPv6 time exceeded sent.
    pub time_exceeded: u64,
    /// ARP requests and neighbour solicitations sent for next hops without an entry.
    pub solicitations: u64,
    /// ICMP / ICMPv6 destination unreachable sent (no route).
    pub unreachable: u64,
    /// ICMP fragmentation needed / ICMPv6 packet too big sent.
    pub too_big: u64,
    /// Drops by reason, indexed as [`DropReason::ALL`].
    pub dropped: [u64; DropReason::ALL.len()],
}

impl GatewayStats {
    /// Packets dropped for `r`.
    pub fn dropped(&self, r: DropReason) -> u64 {
        self.dropped[r.index()]
    }

    /// Replies of every kind.
    pub fn replied(&self) -> u64 {
        self.arp_replies + self.nd_replies + self.time_exceeded
    }
}

/// How a forwarded frame differs from the received one: its first `len` bytes (the Ethernet
/// header and the IP packet, without trailing padding), new Ethernet addresses, and the TTL
/// (IPv4, checksum updated incrementally) or hop limit (IPv6) one lower, as ip_forward /
/// ip6_forward and nft_fwd_neigh_eval leave them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rewrite {
    /// Bytes of the received frame that are sent (14 + the IP packet's length).
    pub len: usize,
    /// New destination MAC (the next hop's).
    pub dmac: [u8; 6],
    /// New source MAC (the output device's).
    pub smac: [u8; 6],
    /// The IP version whose TTL / hop limit (of the header after the Ethernet header) is
    /// decremented.
    pub ipv6: bool,
}

impl Rewrite {
    /// Apply to `buf`, a copy of the received frame's first [`Rewrite::len`] bytes (shorter
    /// buffers are left as they are).
    pub fn apply(&self, buf: &mut [u8]) {
        self.apply_ip(buf);
        self.apply_link(buf);
    }

    /// The IP header's part: the TTL or hop limit one lower. What the forward and
    /// postrouting hooks see: ip_forward decrements it before NF_INET_FORWARD, while the
    /// link header stays the received one until the neighbour output after postrouting.
    pub fn apply_ip(&self, buf: &mut [u8]) {
        let Ok(mut eth) = ethernet::FrameMut::new_checked(buf) else {
            return;
        };
        let ip = eth.payload_mut();
        if self.ipv6 {
            let Ok(mut ip) = ipv6::PacketMut::new_checked(ip) else {
                return;
            };
            ip.decrement_hop_limit();
        } else {
            let Ok(mut ip) = ipv4::PacketMut::new_checked(ip) else {
                return;
            };
            ip.decrement_ttl();
        }
    }

    /// The link header's part: the next hop's and the output device's addresses (the
    /// neighbour output, after the postrouting hook).
    pub fn apply_link(&self, buf: &mut [u8]) {
        let Ok(mut eth) = ethernet::FrameMut::new_checked(buf) else {
            return;
        };
        eth.set_dst(self.dmac);
        eth.set_src(self.smac);
    }

    /// The frame to send: `input`'s first [`Rewrite::len`] bytes, rewritten (a new buffer).
    pub fn to_frame(&self, input: &[u8]) -> Vec<u8> {
        let mut v = input[..self.len.min(input.len())].to_vec();
        self.apply(&mut v);
        v
    }
}

/// Where a packet leaves: see [`Gateway::hop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop {
    /// Output device.
    pub dev: DevId,
    /// The output device's MAC (the frame's new source).
    pub smac: [u8; 6],
    /// The next hop's MAC (the frame's new destination).
    pub dmac: [u8; 6],
    /// The output device's MTU in bytes, if known.
    pub mtu: Option<u32>,
}

/// Devices, addresses, routes and neighbours of a gateway, with the buffer its actions'
/// frames live in. Made by [`Gateway::parse`] from the companion file.
#[derive(Debug, Clone, Default)]
pub struct Gateway {
    devices: Vec<Device>,
    routes: RouteTable,
    neigh: NeighbourTable,
    stats: GatewayStats,
    buf: Vec<u8>,
    /// When a solicitation for a next hop was last sent (ns on the packet clock).
    solicited: HashMap<(DevId, IpAddr), u64>,
}

/// Least time between two solicitations for one next hop (the kernel's retrans_time, 1 s).
pub const SOLICIT_INTERVAL_NS: u64 = 1_000_000_000;

impl Gateway {
    /// The devices, indexed by [`DevId`].
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// The id of device `name`.
    pub fn device(&self, name: &str) -> Option<DevId> {
        self.devices
            .iter()
            .position(|d| d.name == name)
            .map(|i| DevId(i as u16))
    }

    /// The name of device `dev` (`""` when out of range).
    pub fn name(&self, dev: DevId) -> &str {
        self.devices
            .get(usize::from(dev.0))
            .map_or("", |d| d.name.as_str())
    }

    /// The routes (the prefix routes of the addresses included).
    pub fn routes(&self) -> &RouteTable {
        &self.routes
    }

    /// The neighbours (declared and learned).
    pub fn neighbours(&self) -> &NeighbourTable {
        &self.neigh
    }

    /// Set the MAC of device `name` (a daemon learns it from the port). `false` when the
    /// gateway has no such device.
    pub fn set_mac(&mut self, name: &str, mac: [u8; 6]) -> bool {
        match self.device(name) {
            Some(d) => {
                self.devices[usize::from(d.0)].mac = Some(mac);
                true
            }
            None => false,
        }
    }

    /// Set the MTU of device `name` (a daemon learns it from the port). `false` when the
    /// gateway has no such device.
    pub fn set_mtu(&mut self, name: &str, mtu: u32) -> bool {
        match self.device(name) {
            Some(d) => {
                self.devices[usize::from(d.0)].mtu = Some(mtu);
                true
            }
            None => false,
        }
    }

    /// Mark device `name` up or down. `false` when the gateway has no such device.
    pub fn set_up(&mut self, name: &str, up: bool) -> bool {
        match self.device(name) {
            Some(d) => {
                self.devices[usize::from(d.0)].up = up;
                true
            }
            None => false,
        }
    }

    /// `true` unless device `name` is one of the gateway's and down (a device the gateway
    /// does not know is taken to be up: `fwd to` and `dup to` may name any device).
    pub fn is_up(&self, name: &str) -> bool {
        self.device(name)
            .is_none_or(|d| self.devices[usize::from(d.0)].up)
    }

    /// The statistics.
    pub fn stats(&self) -> &GatewayStats {
        &self.stats
    }

    /// Zero the statistics.
    pub fn reset_stats(&mut self) {
        self.stats = GatewayStats::default();
    }

    /// `true` when `a` is one of the gateway's addresses (on any device), or the IPv6
    /// link-local address it derives from a device's MAC.
    pub fn is_local(&self, a: IpAddr) -> bool {
        self.devices
            .iter()
            .any(|d| d.addrs.iter().any(|n| n.addr() == a) || link_local(d) == Some(a))
    }

    /// Count and return a drop.
    fn drop(&mut self, r: DropReason) -> Action<'static> {
        self.stats.dropped[r.index()] += 1;
        Action::Drop(r)
    }

    /// What becomes of `frame` (Ethernet first, as received) that came in on `input` and that
    /// the ingress hook accepted, at `now_ns` on the packet clock (when learned neighbours are
    /// stamped). The frame in a [`Action::Transmit`] or [`Action::Reply`] lives in the
    /// gateway's buffer until the next call. Counts every outcome in [`Gateway::stats`].
    pub fn route(&mut self, input: DevId, frame: &[u8], now_ns: u64) -> Action<'_> {
        self.route_as(input, frame, now_ns, false)
    }

    /// [`Gateway::route`], but a forwarded packet comes back as [`Action::Forward`] (the
    /// rewrite to apply to the received frame) instead of a rewritten copy in the gateway's
    /// buffer: the caller copies the frame once, into its send buffer, and rewrites it there.
    pub fn route_in_place(&mut self, input: DevId, frame: &[u8], now_ns: u64) -> Action<'_> {
        self.route_as(input, frame, now_ns, true)
    }

    fn route_as(&mut self, input: DevId, frame: &[u8], now_ns: u64, in_place: bool) -> Action<'_> {
        let Some((up, in_mac)) = self
            .devices
            .get(usize::from(input.0))
            .map(|d| (d.up, d.mac))
        else {
            return self.drop(DropReason::UnknownDevice);
        };
        if !up {
            return self.drop(DropReason::DeviceDown);
        }
        let Ok(eth) = ethernet::Frame::new_checked(frame) else {
            return self.drop(DropReason::BadHeader);
        };
        let dst_mac = eth.dst();
        let group = dst_mac[0] & 1 != 0;
        // A unicast frame for another MAC is another host's (PACKET_OTHERHOST).
        let for_us = in_mac.is_none_or(|m| m == dst_mac);
        if !group && !for_us {
            return self.drop(DropReason::OtherHost);
        }
        if in_mac.is_none() && !group && dst_mac != [0; 6] {
            // A device without a MAC learns it from the first unicast frame sent to it (a
            // capture from a network whose gateway MAC the file does not give).
            self.devices[usize::from(input.0)].mac = Some(dst_mac);
        }
        match eth.ethertype() {
            ethernet::ethertype::ARP => self.arp(input, frame, now_ns),
            ethernet::ethertype::IPV4 => self.ipv4(input, frame, group, now_ns, in_place),
            ethernet::ethertype::IPV6 => self.ipv6(input, frame, group, now_ns, in_place),
            _ => self.drop(DropReason::NotIp),
        }
    }

    fn arp(&mut self, input: DevId, frame: &[u8], now_ns: u64) -> Action<'_> {
        let Some(a) = arp::read(frame) else {
            return self.drop(DropReason::NotIp);
        };
        let for_us = self.is_local(IpAddr::V4(a.tpa));
        // arp_process: the sender of a request for us (or of any reply to us) is learned,
        // unless it is the unspecified address of a duplicate address probe.
        if for_us && !a.spa.is_unspecified() {
            self.neigh.learn(input, IpAddr::V4(a.spa), a.sha, now_ns);
        }
        // A gratuitous ARP (sender = target) asks nothing.
        if a.op == arp::OP_REQUEST && for_us && a.spa != a.tpa {
            let Some(mac) = self.devices[usize::from(input.0)].mac else {
                return self.drop(DropReason::NoMac);
            };
            arp::reply(&a, mac, &mut self.buf);
            self.stats.arp_replies += 1;
            return Action::Reply {
                dev: input,
                frame: &self.buf,
            };
        }
        self.stats.local += 1;
        Action::Local
    }

    /// The IPv4 header of `frame` when it passes ip_rcv_core's checks: version 4, IHL at
    /// least 5 and within the frame, total length within the frame and at least the header, a
    /// good checksum. Its view over the IP packet (total length bytes).
    fn v4_header(frame: &[u8]) -> Option<ipv4::Packet<'_>> {
        let ip = frame.get(ethernet::HEADER_LEN..)?;
        let h = ipv4::Packet::new_checked(ip).ok()?;
        let total = usize::from(h.total_len());
        if h.version() != 4 || total < h.header_len() || total > ip.len() || !h.checksum_ok() {
            return None;
        }
        ipv4::Packet::new_checked(&ip[..total]).ok()
    }

    /// The IPv6 header of `frame` when its version is 6 and its payload is within the frame;
    /// its view over the IP packet (40 + payload length bytes).
    fn v6_header(frame: &[u8]) -> Option<ipv6::Packet<'_>> {
        let ip = frame.get(ethernet::HEADER_LEN..)?;
        let h = ipv6::Packet::new_checked(ip).ok()?;
        let total = ipv6::HEADER_LEN + usize::from(h.payload_len());
        if h.version() != 6 || total > ip.len() {
            return None;
        }
        ipv6::Packet::new_checked(&ip[..total]).ok()
    }

    fn ipv4(
        &mut self,
        input: DevId,
        frame: &[u8],
        group: bool,
        now_ns: u64,
        in_place: bool,
    ) -> Action<'_> {
        let Some(ip) = Self::v4_header(frame) else {
            return self.drop(DropReason::BadHeader);
        };
        let total = usize::from(ip.total_len());
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let martian = |a: Ipv4Addr| a.octets()[0] == 0 || a.is_loopback();
        if martian(src) || src.is_multicast() || src.is_broadcast() || martian(dst) {
            return self.drop(DropReason::Martian);
        }
        if dst.is_broadcast()
            || dst.is_multicast()
            || self.is_local(IpAddr::V4(dst))
            || self.is_subnet_broadcast(dst)
        {
            self.stats.local += 1;
            return Action::Local;
        }
        if group {
            // ip_forward: only PACKET_HOST frames are forwarded.
            return self.drop(DropReason::OtherHost);
        }
        // The route is looked up first (ip_rcv_finish / ip6_rcv_finish), the TTL checked
        // on the way out (ip_forward / ip6_forward).
        let (out, next) = match self.next_hop(IpAddr::V4(dst)) {
            Ok(x) => x,
            Err(DropReason::NoRoute) => return self.unreachable_v4(input, frame, total),
            Err(r) => return self.drop(r),
        };
        if ip.ttl() <= 1 {
            return self.time_exceeded_v4(input, frame, total);
        }
        if let Some(mtu) = self.devices.get(usize::from(out.0)).and_then(|d| d.mtu)
            && total > mtu as usize
        {
            // ip_forward: ip_exceeds_mtu only with DF set (otherwise the kernel fragments).
            let df = ip.dont_frag();
            self.stats.dropped[DropReason::TooBig.index()] += 1;
            if !df || !self.error_v4(input, frame, total, 3, 4, mtu.min(0xffff)) {
                return Action::Drop(DropReason::TooBig);
            }
            self.stats.too_big += 1;
            return Action::Unreachable {
                dev: input,
                frame: &self.buf,
                reason: DropReason::TooBig,
            };
        }
        let (smac, dmac) = match self.link(out, next) {
            Ok(x) => x,
            Err(DropReason::NoNeighbour) => return self.resolve(out, next, now_ns),
            Err(r) => return self.drop(r),
        };
        let rewrite = Rewrite {
            len: ethernet::HEADER_LEN + total,
            dmac,
            smac,
            ipv6: false,
        };
        self.forward(out, frame, rewrite, in_place)
    }

    /// A forwarded packet: counted, and either described ([`Action::Forward`]) or rewritten
    /// into the buffer ([`Action::Transmit`]).
    fn forward(
        &mut self,
        out: DevId,
        frame: &[u8],
        rewrite: Rewrite,
        in_place: bool,
    ) -> Action<'_> {
        self.stats.forwarded += 1;
        if in_place {
            return Action::Forward { dev: out, rewrite };
        }
        self.buf.clear();
        self.buf
            .extend_from_slice(&frame[..rewrite.len.min(frame.len())]);
        rewrite.apply(&mut self.buf);
        Action::Transmit {
            dev: out,
            frame: &self.buf,
        }
    }

    /// `true` when `a` is the broadcast address of one of the gateway's IPv4 subnets.
    fn is_subnet_broadcast(&self, a: Ipv4Addr) -> bool {
        self.devices.iter().flat_map(|d| &d.addrs).any(|n| match n {
            IpNet::V4(n) => n.prefix_len() < 31 && n.broadcast() == a,
            IpNet::V6(_) => false,
        })
    }

    /// The output device and next hop for `dst`, or why there is none.
    fn next_hop(&self, dst: IpAddr) -> Result<(DevId, IpAddr), DropReason> {
        let r = self.routes.lookup(dst).ok_or(DropReason::NoRoute)?;
        Ok((r.dev, r.via.unwrap_or(dst)))
    }

    /// Where a packet to `dst` would leave, without sending anything: the output device,
    /// its MAC, the next hop's MAC and the device's MTU (bytes of IP packet; `None` when the
    /// file gives none). `None` when there is no route, the device is down or has no MAC, or
    /// the next hop's MAC is not known yet. What a flowtable caches for a flow's direction
    /// (the kernel's nft_flow_route looks the route of both directions up the same way).
    pub fn hop(&self, dst: IpAddr) -> Option<Hop> {
        let (dev, next) = self.next_hop(dst).ok()?;
        let (smac, dmac) = self.link(dev, next).ok()?;
        let mtu = self.devices.get(usize::from(dev.0)).and_then(|d| d.mtu);
        Some(Hop {
            dev,
            smac,
            dmac,
            mtu,
        })
    }

    /// The first address of family `v6` of device `dev` (what `masquerade` translates the
    /// source to, and `redirect` the destination: the kernel picks the output device's
    /// primary address, the input device's for redirect).
    pub fn device_addr(&self, dev: DevId, v6: bool) -> Option<IpAddr> {
        let d = self.devices.get(usize::from(dev.0))?;
        d.addrs.iter().map(IpNet::addr).find(|a| {
            a.is_ipv6() == v6 && !matches!(a, IpAddr::V6(v) if v.segments()[0] & 0xffc0 == 0xfe80)
        })
    }

    /// (source MAC, destination MAC) to send to neighbour `next` on `out`.
    fn link(&self, out: DevId, next: IpAddr) -> Result<([u8; 6], [u8; 6]), DropReason> {
        let d = self
            .devices
            .get(usize::from(out.0))
            .ok_or(DropReason::UnknownDevice)?;
        if !d.up {
            return Err(DropReason::DeviceDown);
        }
        let smac = d.mac.ok_or(DropReason::NoMac)?;
        let n = self.neigh.get(out, next).ok_or(DropReason::NoNeighbour)?;
        Ok((smac, n.mac))
    }

    /// No neighbour entry for `next` on `out`: count the drop, and solicit it unless that was
    /// done less than [`SOLICIT_INTERVAL_NS`] ago (or the device cannot: no MAC, no address of
    /// the family).
    fn resolve(&mut self, out: DevId, next: IpAddr, now_ns: u64) -> Action<'_> {
        let due = self
            .solicited
            .get(&(out, next))
            .is_none_or(|&t| now_ns.saturating_sub(t) >= SOLICIT_INTERVAL_NS);
        let d = &self.devices[usize::from(out.0)];
        let src = match next {
            IpAddr::V4(n) => {
                let on_link = d.addrs.iter().find_map(|a| match a {
                    IpNet::V4(a) if a.contains(&n) => Some(IpAddr::V4(a.addr())),
                    _ => None,
                });
                on_link.or_else(|| d.addrs.iter().map(IpNet::addr).find(IpAddr::is_ipv4))
            }
            IpAddr::V6(n) => {
                let ll = link_local(d);
                let on_link = d.addrs.iter().find_map(|a| match a {
                    IpNet::V6(a) if a.contains(&n) => Some(IpAddr::V6(a.addr())),
                    _ => None,
                });
                if is_link_local(&n) {
                    ll.or(on_link)
                } else {
                    on_link.or(ll)
                }
            }
        };
        let (Some(mac), Some(src), true) = (d.mac, src, due) else {
            return self.drop(DropReason::NoNeighbour);
        };
        self.stats.dropped[DropReason::NoNeighbour.index()] += 1;
        match (next, src) {
            (IpAddr::V4(t), IpAddr::V4(s)) => arp::request(t, s, mac, &mut self.buf),
            (IpAddr::V6(t), IpAddr::V6(s)) => nd::solicit(&t, &s, mac, &mut self.buf),
            _ => return Action::Drop(DropReason::NoNeighbour),
        }
        self.solicited.insert((out, next), now_ns);
        self.stats.solicitations += 1;
        Action::Resolve {
            dev: out,
            frame: &self.buf,
        }
    }

    fn time_exceeded_v4(&mut self, input: DevId, frame: &[u8], total: usize) -> Action<'_> {
        if !self.error_v4(input, frame, total, 11, 0, 0) {
            return self.drop(DropReason::TtlExceeded);
        }
        self.stats.time_exceeded += 1;
        Action::Reply {
            dev: input,
            frame: &self.buf,
        }
    }

    fn unreachable_v4(&mut self, input: DevId, frame: &[u8], total: usize) -> Action<'_> {
        self.stats.dropped[DropReason::NoRoute.index()] += 1;
        if !self.error_v4(input, frame, total, 3, 0, 0) {
            return Action::Drop(DropReason::NoRoute);
        }
        self.stats.unreachable += 1;
        Action::Unreachable {
            dev: input,
            frame: &self.buf,
            reason: DropReason::NoRoute,
        }
    }

    /// Build in the buffer an ICMP error of `typ`, `code` and `rest` (the header's last four
    /// bytes) about the datagram, from the gateway's address on `input`; `false` when none
    /// may or can be sent.
    fn error_v4(
        &mut self,
        input: DevId,
        frame: &[u8],
        total: usize,
        typ: u8,
        code: u8,
        rest: u32,
    ) -> bool {
        let Some(ip) = frame.get(ethernet::HEADER_LEN..ethernet::HEADER_LEN + total) else {
            return false;
        };
        let d = &self.devices[usize::from(input.0)];
        let src = self.error_src_v4(input);
        let (Some(src), Some(mac), true) = (src, d.mac, icmp::v4_may_answer(ip)) else {
            return false;
        };
        let to_mac = ethernet::Frame::new_checked(frame).map_or([0; 6], |e| e.src());
        icmp::v4_error(ip, typ, code, rest, src, mac, to_mac, &mut self.buf);
        true
    }

    /// The source of the gateway's ICMP errors about packets that came in on `input`: its first
    /// IPv4 address, else the first of any device (icmp_send with no source given: the
    /// route's preferred source).
    fn error_src_v4(&self, input: DevId) -> Option<Ipv4Addr> {
        let d = self.devices.get(usize::from(input.0))?;
        d.addrs
            .iter()
            .chain(self.devices.iter().flat_map(|d| &d.addrs))
            .find_map(|n| match n.addr() {
                IpAddr::V4(a) => Some(a),
                IpAddr::V6(_) => None,
            })
    }

    /// The source of the gateway's ICMPv6 errors about packets from `orig_src` that came in
    /// on `input`: an address of the input device of the source's scope (link-local or
    /// not), else its first.
    fn error_src_v6(&self, input: DevId, orig_src: &Ipv6Addr) -> Option<Ipv6Addr> {
        let d = self.devices.get(usize::from(input.0))?;
        let v6s: Vec<Ipv6Addr> = d
            .addrs
            .iter()
            .filter_map(|n| match n.addr() {
                IpAddr::V6(a) => Some(a),
                IpAddr::V4(_) => None,
            })
            .chain(link_local(d).and_then(|a| match a {
                IpAddr::V6(a) => Some(a),
                IpAddr::V4(_) => None,
            }))
            .collect();
        v6s.iter()
            .find(|a| is_link_local(a) == is_link_local(orig_src))
            .or(v6s.first())
            .copied()
    }

    fn ipv6(
        &mut self,
        input: DevId,
        frame: &[u8],
        group: bool,
        now_ns: u64,
        in_place: bool,
    ) -> Action<'_> {
        let Some(ip) = Self::v6_header(frame) else {
            return self.drop(DropReason::BadHeader);
        };
        let total = ipv6::HEADER_LEN + usize::from(ip.payload_len());
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        if src.is_multicast() || src.is_loopback() || dst.is_loopback() || dst.is_unspecified() {
            return self.drop(DropReason::Martian);
        }
        if let Some(ns) = nd::read(frame) {
            return self.solicitation(input, frame, ns, now_ns);
        }
        if let Some(na) = nd::read_advert(frame) {
            // ndisc_recv_na: an advertisement updates an entry; wasp takes one it asked for
            // (or refreshes one it has), not unsolicited news of strangers.
            let t = IpAddr::V6(na.target);
            let known =
                self.solicited.contains_key(&(input, t)) || self.neigh.get(input, t).is_some();
            if let (Some(m), true) = (na.tllao, known) {
                self.neigh.learn(input, t, m, now_ns);
            }
            self.stats.local += 1;
            return Action::Local;
        }
        if dst.is_multicast() || self.is_local(IpAddr::V6(dst)) {
            self.stats.local += 1;
            return Action::Local;
        }
        if group {
            return self.drop(DropReason::OtherHost);
        }
        if is_link_local(&src) || is_link_local(&dst) {
            // RFC 4291 2.5.6: not forwarded.
            return self.drop(DropReason::Martian);
        }
        // The route is looked up first (ip_rcv_finish / ip6_rcv_finish), the TTL checked
        // on the way out (ip_forward / ip6_forward).
        let (out, next) = match self.next_hop(IpAddr::V6(dst)) {
            Ok(x) => x,
            Err(DropReason::NoRoute) => return self.unreachable_v6(input, frame, total),
            Err(r) => return self.drop(r),
        };
        if ip.hop_limit() <= 1 {
            return self.time_exceeded_v6(input, frame, total);
        }
        if let Some(mtu) = self.devices.get(usize::from(out.0)).and_then(|d| d.mtu)
            && total > mtu as usize
        {
            // ip6_forward: ip6_pkt_too_big -> ICMPV6_PKT_TOOBIG with the MTU.
            self.stats.dropped[DropReason::TooBig.index()] += 1;
            if !self.error_v6(input, frame, total, 2, mtu) {
                return Action::Drop(DropReason::TooBig);
            }
            self.stats.too_big += 1;
            return Action::Unreachable {
                dev: input,
                frame: &self.buf,
                reason: DropReason::TooBig,
            };
        }
        let (smac, dmac) = match self.link(out, next) {
            Ok(x) => x,
            Err(DropReason::NoNeighbour) => return self.resolve(out, next, now_ns),
            Err(r) => return self.drop(r),
        };
        let rewrite = Rewrite {
            len: ethernet::HEADER_LEN + total,
            dmac,
            smac,
            ipv6: true,
        };
        self.forward(out, frame, rewrite, in_place)
    }

    fn solicitation(
        &mut self,
        input: DevId,
        frame: &[u8],
        ns: nd::Solicitation,
        now_ns: u64,
    ) -> Action<'_> {
        let d = &self.devices[usize::from(input.0)];
        // ndisc_recv_ns: the target must be an address of the receiving device.
        let ours = d.addrs.iter().any(|n| n.addr() == IpAddr::V6(ns.target))
            || link_local(d) == Some(IpAddr::V6(ns.target));
        let mac = d.mac;
        if let (Some(m), false) = (ns.sllao, ns.src.is_unspecified()) {
            // RFC 4861 7.2.3: the solicitation's source is learned.
            self.neigh.learn(input, IpAddr::V6(ns.src), m, now_ns);
        }
        if !ours {
            self.stats.local += 1;
            return Action::Local;
        }
        let Some(mac) = mac else {
            return self.drop(DropReason::NoMac);
        };
        let frame_src = ethernet::Frame::new_checked(frame).map_or([0; 6], |e| e.src());
        nd::advertise(&ns, frame_src, mac, &mut self.buf);
        self.stats.nd_replies += 1;
        Action::Reply {
            dev: input,
            frame: &self.buf,
        }
    }

    fn time_exceeded_v6(&mut self, input: DevId, frame: &[u8], total: usize) -> Action<'_> {
        if !self.error_v6(input, frame, total, 3, 0) {
            return self.drop(DropReason::TtlExceeded);
        }
        self.stats.time_exceeded += 1;
        Action::Reply {
            dev: input,
            frame: &self.buf,
        }
    }

    fn unreachable_v6(&mut self, input: DevId, frame: &[u8], total: usize) -> Action<'_> {
        self.stats.dropped[DropReason::NoRoute.index()] += 1;
        if !self.error_v6(input, frame, total, 1, 0) {
            return Action::Drop(DropReason::NoRoute);
        }
        self.stats.unreachable += 1;
        Action::Unreachable {
            dev: input,
            frame: &self.buf,
            reason: DropReason::NoRoute,
        }
    }

    /// Build in the buffer an ICMPv6 error of `typ` (code 0) with `rest` (the four bytes after
    /// the checksum) about the packet, from an address of `input`; `false` when none may or
    /// can be sent.
    fn error_v6(&mut self, input: DevId, frame: &[u8], total: usize, typ: u8, rest: u32) -> bool {
        let Some(ip) = frame.get(ethernet::HEADER_LEN..ethernet::HEADER_LEN + total) else {
            return false;
        };
        let Ok(h) = ipv6::Packet::new_checked(ip) else {
            return false;
        };
        let d = &self.devices[usize::from(input.0)];
        let orig_src = h.src_addr();
        // An address of the input device, of the source's scope where there is one.
        let src = self.error_src_v6(input, &orig_src);
        let (Some(src), Some(mac), true) = (src, d.mac, icmp::v6_may_answer(ip)) else {
            return false;
        };
        let to_mac = ethernet::Frame::new_checked(frame).map_or([0; 6], |e| e.src());
        icmp::v6_error(ip, typ, 0, rest, src, mac, to_mac, &mut self.buf);
        true
    }

    /// `fwd ip to ADDR device "dev"` / `fwd ip6 to ADDR device "dev"` (nft_fwd_neigh_eval):
    /// the TTL or hop limit is decremented without a check (ip_decrease_ttl; a TTL of 0 wraps,
    /// as in the kernel), and the frame goes to the neighbour `via` on device `out` (named; it
    /// must be one of the gateway's, with a MAC and a neighbour entry for `via`, else it is
    /// solicited as for a route, [`Action::Resolve`]). A frame of
    /// the other family is not the statement's: the engine's rule did not match it, so it
    /// never gets here; here it is dropped as [`DropReason::NotIp`].
    pub fn fwd_neigh(&mut self, out: &str, via: IpAddr, frame: &[u8], now_ns: u64) -> Action<'_> {
        self.fwd_neigh_as(out, via, frame, now_ns, false)
    }

    /// [`Gateway::fwd_neigh`], the frame sent coming back as [`Action::Forward`] (as
    /// [`Gateway::route_in_place`]).
    pub fn fwd_neigh_in_place(
        &mut self,
        out: &str,
        via: IpAddr,
        frame: &[u8],
        now_ns: u64,
    ) -> Action<'_> {
        self.fwd_neigh_as(out, via, frame, now_ns, true)
    }

    fn fwd_neigh_as(
        &mut self,
        out: &str,
        via: IpAddr,
        frame: &[u8],
        now_ns: u64,
        in_place: bool,
    ) -> Action<'_> {
        let Some(out) = self.device(out) else {
            return self.drop(DropReason::UnknownDevice);
        };
        let (smac, dmac) = match self.link(out, via) {
            Ok(x) => x,
            Err(DropReason::NoNeighbour) => return self.resolve(out, via, now_ns),
            Err(r) => return self.drop(r),
        };
        let ethertype = ethernet::Frame::new_checked(frame).map(|e| e.ethertype());
        let total = match (via, ethertype) {
            (IpAddr::V4(_), Ok(ethernet::ethertype::IPV4)) => {
                Self::v4_header(frame).map(|h| usize::from(h.total_len()))
            }
            (IpAddr::V6(_), Ok(ethernet::ethertype::IPV6))
                if frame.len() >= ethernet::HEADER_LEN + ipv6::HEADER_LEN =>
            {
                let ip = ipv6::Packet::new_checked(&frame[ethernet::HEADER_LEN..]).ok();
                let total = ip.map(|h| ipv6::HEADER_LEN + usize::from(h.payload_len()));
                total.filter(|&t| frame.len() >= ethernet::HEADER_LEN + t)
            }
            _ => return self.drop(DropReason::NotIp),
        };
        let Some(total) = total else {
            return self.drop(DropReason::BadHeader);
        };
        let rewrite = Rewrite {
            len: ethernet::HEADER_LEN + total,
            dmac,
            smac,
            ipv6: via.is_ipv6(),
        };
        self.forward(out, frame, rewrite, in_place)
    }
}

/// The IPv6 link-local address the kernel gives a device from its MAC (modified EUI-64,
/// RFC 4291 appendix A: `fe80::MAC[0]^2 MAC[1] MAC[2] ff fe MAC[3..]`).
pub fn link_local(d: &Device) -> Option<IpAddr> {
    let m = d.mac?;
    Some(IpAddr::V6(Ipv6Addr::from([
        0xfe,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        m[0] ^ 2,
        m[1],
        m[2],
        0xff,
        0xfe,
        m[3],
        m[4],
        m[5],
    ])))
}

fn is_link_local(a: &Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

impl Gateway {
    /// The output device of the route to `dst` (`None`: no route).
    pub fn route_dev(&self, dst: IpAddr) -> Option<DevId> {
        self.routes.lookup(dst).map(|r| r.dev)
    }
}

/// Decrement the TTL of the IPv4 header at the start of `ip` and update its checksum
/// incrementally (RFC 1624 eqn. 3 over the TTL/protocol word), as the kernel's
/// ip_decrease_ttl: [`ipv4::PacketMut::decrement_ttl`]. A TTL of 0 wraps to 255 (only `fwd ip
/// to` decrements without a check). Nothing happens to a buffer shorter than 20 bytes.
pub fn decrement_ttl_v4(ip: &mut [u8]) {
    if let Ok(mut h) = ipv4::PacketMut::new_checked(ip) {
        h.decrement_ttl();
    }
}

/// Raise the TTL of the IPv4 header at the start of `ip` by one (wrapping), checksum updated:
/// the inverse of [`decrement_ttl_v4`].
pub fn raise_ttl_v4(ip: &mut [u8]) {
    if let Ok(mut h) = ipv4::PacketMut::new_checked(ip) {
        h.increment_ttl();
    }
}

/// Raise the hop limit of the IPv6 header at the start of `ip` by one (wrapping): the inverse
/// of the forward path's decrement. Nothing happens to a buffer shorter than 40 bytes.
pub fn raise_hop_limit_v6(ip: &mut [u8]) {
    if let Ok(mut h) = ipv6::PacketMut::new_checked(ip) {
        h.increment_hop_limit();
    }
}

#[cfg(test)]
mod tests;
