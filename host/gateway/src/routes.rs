//! Static routes and their longest-prefix match (as the kernel's FIB answers for a table of
//! unicast routes: the most specific prefix that holds the destination wins).

use std::net::IpAddr;

use ipnet::IpNet;

use super::DevId;

/// One route: `route PREFIX [via NEXT_HOP] dev DEV`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The destinations it covers (host bits zero).
    pub prefix: IpNet,
    /// The next hop; `None` for a directly connected prefix (the destination itself is the
    /// neighbour, as for the prefix routes the kernel adds for each address).
    pub via: Option<IpAddr>,
    /// The output device.
    pub dev: DevId,
}

/// Routes of both families, most specific first.
#[derive(Debug, Clone, Default)]
pub struct RouteTable {
    /// Sorted by prefix length, longest first; equal lengths keep the order they were added in
    /// (the first one added wins, as `ip route add` refuses a second identical prefix).
    routes: Vec<Route>,
}

impl RouteTable {
    /// Add a route (host bits of its prefix are cleared).
    pub fn add(&mut self, mut r: Route) {
        r.prefix = r.prefix.trunc();
        let at = self
            .routes
            .iter()
            .position(|x| x.prefix.prefix_len() < r.prefix.prefix_len())
            .unwrap_or(self.routes.len());
        self.routes.insert(at, r);
    }

    /// `true` when a route for exactly this prefix exists.
    pub fn has(&self, prefix: &IpNet) -> bool {
        let p = prefix.trunc();
        self.routes.iter().any(|r| r.prefix == p)
    }

    /// The route for `dst`: the longest prefix that contains it (an IPv4 destination matches
    /// only IPv4 prefixes, IPv6 only IPv6).
    pub fn lookup(&self, dst: IpAddr) -> Option<&Route> {
        self.routes.iter().find(|r| r.prefix.contains(&dst))
    }

    /// Every route, most specific first.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(p: &str, via: Option<&str>, dev: u16) -> Route {
        Route {
            prefix: p.parse().unwrap(),
            via: via.map(|v| v.parse().unwrap()),
            dev: DevId(dev),
        }
    }

    #[test]
    fn longest_prefix_wins_whatever_the_order_added() {
        let mut t = RouteTable::default();
        t.add(r("0.0.0.0/0", Some("10.0.0.1"), 0));
        t.add(r("10.1.2.0/24", None, 2));
        t.add(r("10.1.0.0/16", Some("10.0.0.2"), 1));
        t.add(r("10.1.2.128/25", Some("10.0.0.3"), 3));
        t.add(r("::/0", Some("fd00::1"), 4));
        t.add(r("fd00:1::/64", None, 5));
        let dev = |t: &RouteTable, a: &str| t.lookup(a.parse().unwrap()).map(|r| r.dev.0);
        assert_eq!(dev(&t, "10.1.2.200"), Some(3));
        assert_eq!(dev(&t, "10.1.2.127"), Some(2));
        assert_eq!(dev(&t, "10.1.3.1"), Some(1));
        assert_eq!(dev(&t, "192.0.2.1"), Some(0));
        assert_eq!(dev(&t, "fd00:1::9"), Some(5));
        assert_eq!(dev(&t, "2001:db8::1"), Some(4));
        // Host bits in a written prefix are cleared.
        t.add(r("172.16.5.9/12", None, 6));
        assert_eq!(dev(&t, "172.31.0.1"), Some(6));
        assert!(t.has(&"172.16.0.0/12".parse().unwrap()));
    }

    #[test]
    fn no_route_without_a_default() {
        let mut t = RouteTable::default();
        t.add(r("10.0.0.0/8", None, 0));
        assert!(t.lookup("11.0.0.1".parse().unwrap()).is_none());
        // An IPv4-mapped IPv6 destination is not an IPv4 one.
        assert!(t.lookup("::ffff:10.0.0.1".parse().unwrap()).is_none());
    }
}
