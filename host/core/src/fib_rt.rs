//! The `fib` and `rt` keys on a packet: the kernel's meaning computed from what the packet's
//! [`RouteView`] answers (see [`crate::route`]).
//!
//! The kernel's meaning, computed here from what the view answers:
//! - `fib` (nft_fib4_eval, nft_fib4_eval_type, nft_fib6_eval, nft_fib6_eval_type): the source
//!   or destination address is looked up; `oif`/`oifname` give the route's device (none for a
//!   route to one of the router's own addresses, or when `iif`/`oif` names another device),
//!   `type` the address type (`inet_dev_addr_type` for IPv4: local or broadcast when an address
//!   of the device named by `iif`/`oif` (any device without one), multicast, else unicast;
//!   IPv6: local, anycast, multicast, unicast, or unreachable without a route). `exists` /
//!   `missing` say whether a device was found. The routes do not depend on the mark.
//! - `rt` (nft_rt_get_eval): before routing (prerouting) the packet has no route and every key
//!   ends the rule; after it `classid` reads 0 (no realms), `ipsec` reads 0 (no xfrm),
//!   `ip nexthop` / `ip6 nexthop` the route's gateway or, for a connected route, the
//!   destination itself (`rt_nexthop`, `rt6_nexthop`; the other family's packet ends the rule),
//!   and `mtu` the TCP MSS the route allows (`get_tcpmss`: the smaller MTU of the route and
//!   of the route back to the source, minus the IP and TCP headers; 536 when out of range).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wasp_ruleset::model::{FibExpr, FibResult, RtKey};

use crate::expr::ifname_value;
use crate::packet::Packet;
use crate::route::{RouteKind, RouteView, TCP_MSS_DEFAULT, rtn};

/// The IP addresses of the packet: (source, destination); `None` for a frame that is not IP
/// or cut short (the kernel's `skb_header_pointer` failing: NFT_BREAK).
fn addrs(p: &Packet<'_>) -> Option<(IpAddr, IpAddr)> {
    let net = usize::from(p.meta.net_offset);
    match p.meta.protocol {
        0x0800 => {
            let h = p.frame.get(net..net + 20)?;
            let a = |i: usize| IpAddr::V4(Ipv4Addr::new(h[i], h[i + 1], h[i + 2], h[i + 3]));
            Some((a(12), a(16)))
        }
        0x86dd => {
            let h = p.frame.get(net..net + 40)?;
            let a = |i: usize| {
                let mut b = [0u8; 16];
                b.copy_from_slice(&h[i..i + 16]);
                IpAddr::V6(Ipv6Addr::from(b))
            };
            Some((a(8), a(24)))
        }
        _ => None,
    }
}

/// The value of `fib` `f` for packet `p` (see the module documentation); `None` ends the rule.
pub(crate) fn fib_value(f: FibExpr, p: &Packet<'_>) -> Option<u128> {
    let view = p.route?;
    let (saddr, daddr) = addrs(p)?;
    let dev = if f.flags & FibExpr::IIF != 0 {
        Some(p.iifname)
    } else if f.flags & FibExpr::OIF != 0 {
        Some(p.oifname).filter(|d| !d.is_empty())
    } else {
        None
    };
    let addr = if f.flags & FibExpr::DADDR != 0 {
        daddr
    } else {
        saddr
    };
    if f.result == FibResult::Type {
        let t = match addr {
            IpAddr::V4(a) => addr_type4(view, a, dev),
            IpAddr::V6(a) => addr_type6(view, a, dev),
        };
        return Some(u128::from(t));
    }
    let found = match addr {
        IpAddr::V4(a) => fib_dev4(view, a, saddr, daddr, p, dev),
        IpAddr::V6(a) => fib_dev6(view, a, saddr, daddr, p, dev),
    };
    Some(if f.flags & FibExpr::PRESENT != 0 {
        u128::from(found.is_some())
    } else {
        found.map_or(0, ifname_value)
    })
}

/// The device `fib ... oif|oifname` finds for IPv4 address `a` (nft_fib4_eval).
fn fib_dev4<'a>(
    view: &'a dyn RouteView,
    a: Ipv4Addr,
    saddr: IpAddr,
    daddr: IpAddr,
    p: &Packet<'a>,
    dev: Option<&'a str>,
) -> Option<&'a str> {
    // A DHCP-style packet from 0.0.0.0 to a broadcast or local multicast address: the input
    // device.
    if let (IpAddr::V4(s), IpAddr::V4(d)) = (saddr, daddr)
        && s.is_unspecified()
        && (d.is_broadcast() || d.octets()[..3] == [224, 0, 0])
    {
        return Some(p.iifname);
    }
    let hop = view.lookup(IpAddr::V4(a))?;
    // fib_lookup fails for blackhole, unreachable and prohibit routes (wasp has none) and a
    // local route gives nothing.
    if hop.kind == RouteKind::Local {
        return None;
    }
    match dev {
        Some(d) if d != hop.dev => None,
        Some(d) => Some(d),
        None => Some(hop.dev),
    }
}

/// The device `fib ... oif|oifname` finds for IPv6 address `a` (nft_fib6_eval).
fn fib_dev6<'a>(
    view: &'a dyn RouteView,
    a: Ipv6Addr,
    saddr: IpAddr,
    daddr: IpAddr,
    p: &Packet<'a>,
    dev: Option<&'a str>,
) -> Option<&'a str> {
    if !view.routed()
        && p.meta.l4.is_some_and(|l| l.proto == 58)
        && saddr.is_unspecified()
        && matches!(daddr, IpAddr::V6(d) if is_link_local6(d))
    {
        // nft_fib_v6_skip_icmpv6: duplicate address detection and the like.
        return Some(p.iifname);
    }
    if is_link_local6(a) {
        // The lookup is restricted to the device (RT6_LOOKUP_F_IFACE): fe80::/64 is on every
        // device, and one of the router's own addresses gives nothing.
        let d = dev.unwrap_or(p.iifname);
        return match view.lookup(IpAddr::V6(a)) {
            Some(h) if h.kind == RouteKind::Local => None,
            _ => Some(d),
        };
    }
    let hop = view.lookup(IpAddr::V6(a))?;
    if matches!(hop.kind, RouteKind::Local | RouteKind::Anycast) {
        return None;
    }
    match dev {
        Some(d) if d != hop.dev => None,
        _ => Some(hop.dev),
    }
}

fn is_link_local6(a: Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

/// `inet_dev_addr_type(net, dev, addr)`: broadcast for 0.0.0.0/8 and 255.255.255.255,
/// multicast, else the local table's type when its route is on `dev` (or `dev` is `None`),
/// else unicast.
fn addr_type4(view: &dyn RouteView, a: Ipv4Addr, dev: Option<&str>) -> u32 {
    if a.octets()[0] == 0 || a.is_broadcast() {
        return rtn::BROADCAST;
    }
    if a.is_multicast() {
        return rtn::MULTICAST;
    }
    if a.is_loopback() {
        // The kernel's local table holds 127.0.0.0/8 on `lo`.
        return if dev.is_none() {
            rtn::LOCAL
        } else {
            rtn::UNICAST
        };
    }
    match view.lookup(IpAddr::V4(a)) {
        Some(h) if dev.is_none_or(|d| d == h.dev) => match h.kind {
            RouteKind::Local => rtn::LOCAL,
            RouteKind::Broadcast => rtn::BROADCAST,
            _ => rtn::UNICAST,
        },
        _ => rtn::UNICAST,
    }
}

/// `__nft_fib6_eval_type`: local when `addr` is an address of `dev`; then by the route:
/// unreachable without one, anycast, local (without `dev`); else multicast, unicast or unspec
/// by the address itself.
fn addr_type6(view: &dyn RouteView, a: Ipv6Addr, dev: Option<&str>) -> u32 {
    let hop = view.lookup(IpAddr::V6(a));
    let mut ret = 0;
    if let (Some(d), Some(h)) = (dev, hop)
        && h.kind == RouteKind::Local
        && h.dev == d
    {
        ret = rtn::LOCAL;
    }
    // The kernel has ff00::/8 and fe80::/64 on every device and ::1 on `lo`.
    let routed = hop.is_some() || a.is_multicast() || is_link_local6(a) || a.is_loopback();
    if !routed {
        return rtn::UNREACHABLE;
    }
    match hop.map(|h| h.kind) {
        Some(RouteKind::Anycast) => ret = rtn::ANYCAST,
        Some(RouteKind::Local) if dev.is_none() => ret = rtn::LOCAL,
        _ if a.is_loopback() && dev.is_none() => ret = rtn::LOCAL,
        _ => {}
    }
    if ret != 0 {
        ret
    } else if a.is_multicast() {
        rtn::MULTICAST
    } else if a.is_unspecified() {
        rtn::UNSPEC
    } else {
        rtn::UNICAST
    }
}

/// The value of `rt` key `k` for packet `p` (see the module documentation); `None` ends the
/// rule.
pub(crate) fn rt_value(k: RtKey, p: &Packet<'_>) -> Option<u128> {
    let view = p.route.filter(|v| v.routed())?;
    Some(match k {
        RtKey::Classid | RtKey::Ipsec => 0,
        RtKey::Nexthop4 | RtKey::Nexthop6 => {
            let (_, daddr) = addrs(p)?;
            if daddr.is_ipv4() != (k == RtKey::Nexthop4) {
                return None;
            }
            let hop = view.lookup(daddr).and_then(|h| h.gateway).unwrap_or(daddr);
            match hop {
                IpAddr::V4(a) => u128::from(u32::from(a)),
                IpAddr::V6(a) => u128::from(a),
            }
        }
        RtKey::Tcpmss => {
            let (saddr, daddr) = addrs(p)?;
            let minlen = if daddr.is_ipv4() { 20 + 20 } else { 40 + 20 };
            let mtu_of = |a: IpAddr| view.lookup(a).map(|h| view.mtu(h.dev));
            // The route's device, or the packet's output device.
            let out = (!p.oifname.is_empty()).then(|| view.mtu(p.oifname));
            let mut mtu = mtu_of(daddr).or(out).unwrap_or(u32::MAX);
            if let Some(back) = mtu_of(saddr) {
                mtu = mtu.min(back);
            }
            u128::from(if mtu <= minlen || mtu > 0xffff {
                TCP_MSS_DEFAULT
            } else {
                mtu - minlen
            })
        }
    })
}
