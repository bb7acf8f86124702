//! What `fib` and `rt` read: the router's FIB and the packet's route, through a read-only
//! [`RouteView`] that the caller of the IP hooks gives each packet ([`crate::Packet::route`];
//! wasp's gateway gives one, see `wasp_gateway::netfilter`). Without one (netdev hooks, an IP hook
//! run without a gateway) every `fib` and `rt` load ends the rule, as `rt` does in the kernel
//! for a packet without a route. The keys' meaning, computed from what the view answers, is
//! in `fib_rt`.

use std::net::IpAddr;

/// The kind of a route as the kernel's FIB types it (RTN_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouteKind {
    /// A routed or connected destination (RTN_UNICAST).
    Unicast,
    /// One of the router's own addresses (RTN_LOCAL, the kernel's local table).
    Local,
    /// The broadcast address of one of the router's IPv4 subnets (RTN_BROADCAST).
    Broadcast,
    /// The subnet-router anycast address of one of the router's IPv6 prefixes (the prefix with
    /// its host bits zero: `ipv6_anycast_destination`).
    Anycast,
}

/// The route for an address, as [`RouteView::lookup`] gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteHop<'a> {
    /// What the address is to the router.
    pub kind: RouteKind,
    /// The route's device (for a local or broadcast route: the device holding the address).
    pub dev: &'a str,
    /// The route's gateway; `None` for a connected route.
    pub gateway: Option<IpAddr>,
}

/// The router's FIB and devices as `fib` and `rt` read them, for one packet at one hook.
pub trait RouteView: std::fmt::Debug {
    /// `true` once the packet has its route (the kernel's skb dst: the input, forward, output
    /// and postrouting hooks); `false` at prerouting, where `rt` ends the rule.
    fn routed(&self) -> bool;

    /// The route for `addr` (the kernel's local table first, then the main one); `None`
    /// without one.
    fn lookup(&self, addr: IpAddr) -> Option<RouteHop<'_>>;

    /// The MTU of device `dev` in bytes.
    fn mtu(&self, dev: &str) -> u32;
}

/// The kernel's TCP_MSS_DEFAULT: `rt mtu` when the MTU is out of range.
pub(crate) const TCP_MSS_DEFAULT: u32 = 536;

/// RTN_* numbers of the `fib_addrtype` values.
pub(crate) mod rtn {
    pub const UNICAST: u32 = 1;
    pub const LOCAL: u32 = 2;
    pub const BROADCAST: u32 = 3;
    pub const ANYCAST: u32 = 4;
    pub const MULTICAST: u32 = 5;
    pub const UNREACHABLE: u32 = 7;
    pub const UNSPEC: u32 = 0;
}
