//! The gateway as `fib` and `rt` read it ([`wasp_core::route::RouteView`]): its addresses are
//! the kernel's local table (each address local on its device, the broadcast address of an
//! IPv4 subnet shorter than /31 broadcast, the subnet-router anycast address of an IPv6 prefix
//! shorter than /127 anycast), its routes the main table, and a device without an MTU has
//! Ethernet's 1500.

use std::net::IpAddr;

use super::{Gateway, link_local};
use wasp_core::route::{RouteHop, RouteKind, RouteView};

/// Ethernet's MTU: what a device without one configured has.
const DEFAULT_MTU: u32 = 1500;

/// The gateway at one IP hook: before the route (prerouting) or after it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GatewayView<'a> {
    /// The gateway.
    pub g: &'a Gateway,
    /// The packet has its route (every IP hook after prerouting).
    pub routed: bool,
}

impl RouteView for GatewayView<'_> {
    fn routed(&self) -> bool {
        self.routed
    }

    fn lookup(&self, addr: IpAddr) -> Option<RouteHop<'_>> {
        for d in self.g.devices() {
            let hop = |kind| RouteHop {
                kind,
                dev: d.name.as_str(),
                gateway: None,
            };
            if link_local(d) == Some(addr) {
                return Some(hop(RouteKind::Local));
            }
            for n in &d.addrs {
                if n.addr() == addr {
                    return Some(hop(RouteKind::Local));
                }
                match n {
                    ipnet::IpNet::V4(v4)
                        if v4.prefix_len() < 31 && IpAddr::V4(v4.broadcast()) == addr =>
                    {
                        return Some(hop(RouteKind::Broadcast));
                    }
                    ipnet::IpNet::V6(v6)
                        if v6.prefix_len() < 127 && IpAddr::V6(v6.network()) == addr =>
                    {
                        return Some(hop(RouteKind::Anycast));
                    }
                    _ => {}
                }
            }
        }
        let r = self.g.routes().lookup(addr)?;
        Some(RouteHop {
            kind: RouteKind::Unicast,
            dev: self.g.name(r.dev),
            gateway: r.via,
        })
    }

    fn mtu(&self, dev: &str) -> u32 {
        self.g
            .device(dev)
            .and_then(|d| self.g.devices()[usize::from(d.0)].mtu)
            .unwrap_or(DEFAULT_MTU)
    }
}
