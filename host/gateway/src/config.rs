//! The gateway companion file: devices, addresses, routes and neighbours, one per line, in
//! words that follow iproute2's:
//!
//! ```text
//! # comment
//! device veth0 mac 02:00:00:00:01:01 mtu 1500   # [mac MAC] [mtu BYTES] [up|down]
//! address veth0 10.0.1.1/24                      # also adds the route 10.0.1.0/24 dev veth0
//! address veth0 fd00:1::1/64
//! route 10.0.2.0/24 via 10.0.1.2 dev veth0
//! route 10.0.3.0/24 dev veth1                    # directly connected
//! route default via 10.0.1.254 dev veth0         # 0.0.0.0/0 (::/0 with an IPv6 next hop)
//! neighbour 10.0.1.2 lladdr 02:00:00:00:02:02 dev veth0   # `neigh` also
//! tunnel gnv0 geneve id 11 remote 192.0.2.2 local 192.0.2.1 dev trunk0   # [local ADDR]
//! ```
//!
//! A `tunnel` line makes a Geneve tunnel device (as `ip link add gnv0 type geneve id 11 remote
//! 192.0.2.2`; see [`super::tunnel`]) whose outer packets use `dev`; give it addresses, routes
//! and neighbours as any device. Unless a `device` line gives them, its MAC is 02:67:6e and
//! the VNI's three bytes, its MTU the underlay's minus 50 (IPv4 remote) or 70 (IPv6).
//!
//! Devices named by any line exist; their MAC is given by a `device` line, set later
//! ([`super::Gateway::set_mac`], e.g. from the port a daemon opened), or learned from the
//! first unicast frame the device receives. Errors give
//! file:line:col and what was expected, as the ruleset's do.

use std::net::IpAddr;
use std::path::PathBuf;

use ipnet::IpNet;
use wasp_ruleset::Error;
use wasp_ruleset::error::Located;

use super::routes::Route;
use super::{DevId, Device, Gateway};

/// One word of a line: its text and 1-based column (in characters).
#[derive(Debug, Clone, Copy)]
struct Word<'a> {
    text: &'a str,
    col: u32,
}

/// The words of `line` before a `#`.
fn words(line: &str) -> Vec<Word<'_>> {
    let line = line.split('#').next().unwrap_or("");
    let mut out = Vec::new();
    let mut start: Option<(usize, u32)> = None;
    let mut col = 0u32;
    for (i, c) in line.char_indices() {
        col += 1;
        if c.is_whitespace() {
            if let Some((s, sc)) = start.take() {
                out.push(Word {
                    text: &line[s..i],
                    col: sc,
                });
            }
        } else if start.is_none() {
            start = Some((i, col));
        }
    }
    if let Some((s, sc)) = start {
        out.push(Word {
            text: &line[s..],
            col: sc,
        });
    }
    out
}

/// A parse in progress: the file name and the current line, for errors.
struct Cx<'a> {
    file: &'a str,
    line_no: u32,
    line: &'a str,
    /// Where the end of the line is (for "expected X, found end of line").
    eol: u32,
}

impl Cx<'_> {
    fn err(&self, col: u32, len: u32, message: impl Into<String>) -> Error {
        Error::At(Box::new(Located {
            path: PathBuf::from(self.file),
            line: self.line_no,
            col,
            len: len.max(1),
            line_text: self.line.to_string(),
            message: message.into(),
            included_from: Vec::new(),
            notes: Vec::new(),
        }))
    }

    fn at(&self, w: &Word<'_>, message: impl Into<String>) -> Error {
        self.err(w.col, w.text.chars().count() as u32, message)
    }

    /// "expected WHAT, found ..." at word `i` of `ws` (or the end of the line).
    fn expected(&self, ws: &[Word<'_>], i: usize, what: &str) -> Error {
        match ws.get(i) {
            Some(w) => self.at(w, format!("expected {what}, found \"{}\"", w.text)),
            None => self.err(self.eol, 1, format!("expected {what}, found end of line")),
        }
    }

    fn word<'w>(&self, ws: &[Word<'w>], i: usize, what: &str) -> Result<Word<'w>, Error> {
        ws.get(i).copied().ok_or_else(|| self.expected(ws, i, what))
    }

    fn keyword(&self, ws: &[Word<'_>], i: usize, kw: &str) -> Result<(), Error> {
        match ws.get(i) {
            Some(w) if w.text == kw => Ok(()),
            _ => Err(self.expected(ws, i, &format!("`{kw}`"))),
        }
    }

    fn end(&self, ws: &[Word<'_>], i: usize) -> Result<(), Error> {
        match ws.get(i) {
            None => Ok(()),
            Some(w) => Err(self.at(w, format!("expected end of line, found \"{}\"", w.text))),
        }
    }

    fn addr(&self, w: &Word<'_>) -> Result<IpAddr, Error> {
        w.text.parse().map_err(|_| {
            self.at(
                w,
                format!("expected an IPv4 or IPv6 address, found \"{}\"", w.text),
            )
        })
    }

    fn mac(&self, w: &Word<'_>) -> Result<[u8; 6], Error> {
        parse_mac(w.text).ok_or_else(|| {
            self.at(
                w,
                format!(
                    "expected a MAC address such as 02:00:00:00:00:01, found \"{}\"",
                    w.text
                ),
            )
        })
    }

    fn dev_name(&self, w: &Word<'_>) -> Result<(), Error> {
        if w.text.len() >= 16 || w.text.contains('/') {
            return Err(self.at(
                w,
                format!(
                    "\"{}\" is not a device name (at most 15 characters, no `/`)",
                    w.text
                ),
            ));
        }
        Ok(())
    }
}

/// `aa:bb:cc:dd:ee:ff` (or with `-`).
pub(crate) fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut n = 0;
    for part in s.split([':', '-']) {
        if n == 6 || part.is_empty() || part.len() > 2 {
            return None;
        }
        out[n] = u8::from_str_radix(part, 16).ok()?;
        n += 1;
    }
    (n == 6).then_some(out)
}

/// A route kept with its place until every line is read (its next hop is checked against the
/// addresses, which may come later in the file).
struct Pending {
    route: Route,
    line_no: u32,
    line: String,
    via_col: u32,
    via_len: u32,
    eol: u32,
}

impl Gateway {
    /// Read a gateway file (`file` names it in errors).
    ///
    /// # Errors
    /// The first bad line, at file:line:col: an unknown word, an address, prefix or MAC that
    /// does not parse, a route whose next hop is of the other family or not on a subnet of its
    /// device (iproute2: "Nexthop has invalid gateway"), a prefix routed twice (iproute2:
    /// "File exists"), an address given twice.
    pub fn parse(text: &str, file: &str) -> Result<Gateway, Error> {
        let mut g = Gateway::default();
        let mut pending: Vec<Pending> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let ws = words(line);
            let cx = Cx {
                file,
                line_no: n as u32 + 1,
                line,
                eol: line.chars().count() as u32 + 1,
            };
            let Some(first) = ws.first() else { continue };
            match first.text {
                "device" | "link" => {
                    let name = cx.word(&ws, 1, "a device name")?;
                    cx.dev_name(&name)?;
                    let dev = g.device_or_add(name.text);
                    let mut i = 2;
                    while let Some(w) = ws.get(i) {
                        match w.text {
                            "mac" | "address" | "lladdr" => {
                                let m = cx.word(&ws, i + 1, "a MAC address")?;
                                g.devices[usize::from(dev.0)].mac = Some(cx.mac(&m)?);
                                i += 2;
                            }
                            "mtu" => {
                                let m = cx.word(&ws, i + 1, "an MTU in bytes")?;
                                let mtu = m.text.parse::<u32>().ok().filter(|&v| v >= 68).ok_or_else(|| {
                                    cx.at(&m, format!("expected an MTU in bytes (at least 68), found \"{}\"", m.text))
                                })?;
                                g.devices[usize::from(dev.0)].mtu = Some(mtu);
                                i += 2;
                            }
                            "up" => {
                                g.devices[usize::from(dev.0)].up = true;
                                i += 1;
                            }
                            "down" => {
                                g.devices[usize::from(dev.0)].up = false;
                                i += 1;
                            }
                            _ => return Err(cx.expected(&ws, i, "`mac`, `mtu`, `up` or `down`")),
                        }
                    }
                }
                "address" | "addr" => {
                    let name = cx.word(&ws, 1, "a device name")?;
                    cx.dev_name(&name)?;
                    let pw = cx.word(
                        &ws,
                        2,
                        "an address with its prefix length, such as 10.0.1.1/24",
                    )?;
                    let net: IpNet = pw.text.parse().map_err(|_| {
                        cx.at(
                            &pw,
                            format!(
                                "expected an address with its prefix length, such as 10.0.1.1/24 or fd00:1::1/64, found \"{}\"",
                                pw.text
                            ),
                        )
                    })?;
                    cx.end(&ws, 3)?;
                    if g.is_local(net.addr()) {
                        return Err(cx.at(
                            &pw,
                            format!(
                                "address {} is given twice (iproute2: File exists)",
                                net.addr()
                            ),
                        ));
                    }
                    let dev = g.device_or_add(name.text);
                    g.devices[usize::from(dev.0)].addrs.push(net);
                    // The kernel's prefix route for the address (proto kernel scope link).
                    let full = net.prefix_len() == net.max_prefix_len();
                    if !full && !g.routes.has(&net) {
                        g.routes.add(Route {
                            prefix: net.trunc(),
                            via: None,
                            dev,
                        });
                    }
                }
                "route" => {
                    let pw = cx.word(&ws, 1, "a prefix or `default`")?;
                    let mut i = 2;
                    let mut via = None;
                    let mut via_w = None;
                    if ws.get(i).is_some_and(|w| w.text == "via") {
                        let vw = cx.word(&ws, i + 1, "a next hop address")?;
                        via = Some(cx.addr(&vw)?);
                        via_w = Some(vw);
                        i += 2;
                    }
                    cx.keyword(&ws, i, "dev")?;
                    let name = cx.word(&ws, i + 1, "a device name")?;
                    cx.dev_name(&name)?;
                    cx.end(&ws, i + 2)?;
                    let prefix: IpNet = if pw.text == "default" {
                        match via {
                            Some(IpAddr::V4(_)) => "0.0.0.0/0".parse().unwrap_or_default(),
                            Some(IpAddr::V6(_)) => "::/0".parse().unwrap_or_default(),
                            None => {
                                return Err(cx.at(
                                    &pw,
                                    "`default` without `via` has no family: write 0.0.0.0/0 or ::/0",
                                ));
                            }
                        }
                    } else if let Ok(p) = pw.text.parse::<IpNet>() {
                        p
                    } else if let Ok(a) = pw.text.parse::<IpAddr>() {
                        IpNet::from(a)
                    } else {
                        return Err(cx.at(
                            &pw,
                            format!(
                                "expected a prefix such as 10.0.2.0/24 or `default`, found \"{}\"",
                                pw.text
                            ),
                        ));
                    };
                    if let (Some(v), Some(vw)) = (via, via_w)
                        && v.is_ipv4() != prefix.addr().is_ipv4()
                    {
                        return Err(cx.at(
                            &vw,
                            format!("next hop {v} is not of the family of {prefix}"),
                        ));
                    }
                    if g.routes.has(&prefix) {
                        return Err(cx.at(
                            &pw,
                            format!(
                                "a route for {} exists already (iproute2: File exists)",
                                prefix.trunc()
                            ),
                        ));
                    }
                    let dev = g.device_or_add(name.text);
                    let route = Route { prefix, via, dev };
                    match via_w {
                        Some(vw) => pending.push(Pending {
                            route,
                            line_no: cx.line_no,
                            line: line.to_string(),
                            via_col: vw.col,
                            via_len: vw.text.chars().count() as u32,
                            eol: cx.eol,
                        }),
                        None => g.routes.add(route),
                    }
                }
                "neighbour" | "neighbor" | "neigh" => {
                    let aw = cx.word(&ws, 1, "an address")?;
                    let addr = cx.addr(&aw)?;
                    cx.keyword(&ws, 2, "lladdr")?;
                    let mw = cx.word(&ws, 3, "a MAC address")?;
                    let mac = cx.mac(&mw)?;
                    cx.keyword(&ws, 4, "dev")?;
                    let name = cx.word(&ws, 5, "a device name")?;
                    cx.dev_name(&name)?;
                    cx.end(&ws, 6)?;
                    let dev = g.device_or_add(name.text);
                    g.neigh.declare(dev, addr, mac);
                }
                "tunnel" => {
                    let name = cx.word(&ws, 1, "a device name")?;
                    cx.dev_name(&name)?;
                    if g.device(name.text).is_some() {
                        return Err(cx.at(
                            &name,
                            format!(
                                "device {} exists already: a `tunnel` line makes its device (iproute2: File exists)",
                                name.text
                            ),
                        ));
                    }
                    cx.keyword(&ws, 2, "geneve")?;
                    let mut i = 3;
                    let (mut vni, mut remote, mut local, mut under) = (None, None, None, None);
                    let mut seen: Vec<&str> = Vec::new();
                    while let Some(w) = ws.get(i) {
                        let v = cx.word(&ws, i + 1, "a value")?;
                        let key = if w.text == "vni" { "id" } else { w.text };
                        if seen.contains(&key) {
                            return Err(cx.at(w, format!("`{}` is given twice", w.text)));
                        }
                        seen.push(key);
                        match w.text {
                            "id" | "vni" => {
                                vni = Some(
                                    v.text
                                        .parse::<u32>()
                                        .ok()
                                        .filter(|&n| n <= 0xff_ffff)
                                        .ok_or_else(|| {
                                            cx.at(
                                                &v,
                                                format!(
                                                    "expected a VNI (0-16777215), found \"{}\"",
                                                    v.text
                                                ),
                                            )
                                        })?,
                                );
                            }
                            "remote" => {
                                let a = cx.addr(&v)?;
                                if a.is_unspecified()
                                    || a.is_multicast()
                                    || a == IpAddr::from([255, 255, 255, 255])
                                {
                                    return Err(cx.at(&v, format!("remote {a} is not a unicast address (a point-to-point tunnel needs one peer)")));
                                }
                                remote = Some(a);
                            }
                            "local" => local = Some((cx.addr(&v)?, v)),
                            "dev" => {
                                cx.dev_name(&v)?;
                                under = Some(v);
                            }
                            _ => {
                                return Err(cx.expected(
                                    &ws,
                                    i,
                                    "`id`, `remote`, `local` or `dev`",
                                ));
                            }
                        }
                        i += 2;
                    }
                    let eol = Word {
                        text: "",
                        col: cx.eol,
                    };
                    let vni = vni.ok_or_else(|| cx.at(&eol, "expected `id VNI`"))?;
                    let remote = remote.ok_or_else(|| cx.at(&eol, "expected `remote ADDRESS`"))?;
                    let under = under.ok_or_else(|| cx.at(&eol, "expected `dev UNDERLAY`"))?;
                    if under.text == name.text {
                        return Err(cx.at(&under, "a tunnel cannot run over itself"));
                    }
                    if let Some((l, lw)) = &local
                        && l.is_ipv4() != remote.is_ipv4()
                    {
                        return Err(cx.at(
                            lw,
                            format!("local {l} is not of the family of remote {remote}"),
                        ));
                    }
                    if let Some(other) = g.devices.iter().find(|d| {
                        d.tunnel.as_ref().is_some_and(|t| {
                            t.vni == vni
                                && t.remote == remote
                                && g.device(under.text) == Some(t.underlay)
                        })
                    }) {
                        return Err(cx.at(
                            &name,
                            format!(
                                "{} has VNI {vni} to {remote} over {} already (the kernel: a geneve device with the specified VNI already exists)",
                                other.name, under.text
                            ),
                        ));
                    }
                    let underlay = g.device_or_add(under.text);
                    if g.devices[usize::from(underlay.0)].tunnel.is_some() {
                        return Err(cx.at(
                            &under,
                            format!(
                                "{} is a tunnel: tunnels over tunnels are not supported",
                                under.text
                            ),
                        ));
                    }
                    let dev = g.device_or_add(name.text);
                    g.devices[usize::from(dev.0)].tunnel = Some(super::Tunnel {
                        vni,
                        remote,
                        local: local.map(|l| l.0),
                        underlay,
                    });
                }
                _ => {
                    return Err(cx.at(
                        first,
                        format!(
                            "expected `device`, `address`, `route`, `neighbour` or `tunnel`, found \"{}\"",
                            first.text
                        ),
                    ));
                }
            }
        }
        for p in pending {
            let Some(via) = p.route.via else { continue };
            let dev = &g.devices[usize::from(p.route.dev.0)];
            let link_local = matches!(via, IpAddr::V6(a) if a.segments()[0] & 0xffc0 == 0xfe80);
            if !link_local && !dev.addrs.iter().any(|n| n.contains(&via)) {
                let cx = Cx {
                    file,
                    line_no: p.line_no,
                    line: &p.line,
                    eol: p.eol,
                };
                return Err(cx.err(
                    p.via_col,
                    p.via_len,
                    format!(
                        "next hop {via} is not on a subnet of {} (give it an `address` there; iproute2: Nexthop has invalid gateway)",
                        dev.name
                    ),
                ));
            }
            g.routes.add(p.route);
        }
        // A tunnel's MTU: its underlay's minus the encapsulation, unless the file gives one;
        // its MAC, unless given: 02:67:6e (locally administered, "gn") and the VNI.
        for i in 0..g.devices.len() {
            if g.devices[i].mac.is_none()
                && let Some(t) = &g.devices[i].tunnel
            {
                let v = t.vni.to_be_bytes();
                g.devices[i].mac = Some([0x02, 0x67, 0x6e, v[1], v[2], v[3]]);
            }
            if g.devices[i].mtu.is_none()
                && let Some(t) = &g.devices[i].tunnel
                && let Some(m) = g.devices[usize::from(t.underlay.0)].mtu
            {
                g.devices[i].mtu =
                    Some(m.saturating_sub(super::tunnel::overhead(t.remote.is_ipv6())));
            }
        }
        Ok(g)
    }

    /// The id of device `name`, added (up, no MAC, no address) when new.
    fn device_or_add(&mut self, name: &str) -> DevId {
        if let Some(d) = self.device(name) {
            return d;
        }
        self.devices.push(Device {
            name: name.to_string(),
            mac: None,
            up: true,
            addrs: Vec::new(),
            mtu: None,
            tunnel: None,
        });
        DevId((self.devices.len() - 1) as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
# a gateway between two subnets
device veth0 mac 02:00:00:00:01:01
device veth1 mac 02:00:00:00:01:02
address veth0 10.0.1.1/24
address veth0 fd00:1::1/64
address veth1 10.0.2.1/24
address veth1 fd00:2::1/64
route 10.9.0.0/16 via 10.0.2.2 dev veth1
route default via 10.0.1.254 dev veth0
route ::/0 via fd00:2::2 dev veth1
neighbour 10.0.2.2 lladdr 02:00:00:00:02:02 dev veth1
neigh fd00:2::2 lladdr 02:00:00:00:02:02 dev veth1
";

    #[test]
    fn reads_devices_addresses_routes_neighbours() {
        let g = Gateway::parse(FILE, "gw.conf").unwrap();
        assert_eq!(g.devices().len(), 2);
        let v1 = g.device("veth1").unwrap();
        assert_eq!(g.devices()[usize::from(v1.0)].mac, Some([2, 0, 0, 0, 1, 2]));
        // 4 prefix routes from the addresses + 3 written.
        assert_eq!(g.routes().routes().len(), 7);
        let r = g.routes().lookup("10.9.1.1".parse().unwrap()).unwrap();
        assert_eq!((r.dev, r.via), (v1, Some("10.0.2.2".parse().unwrap())));
        let r = g.routes().lookup("10.0.2.77".parse().unwrap()).unwrap();
        assert_eq!((r.dev, r.via), (v1, None));
        let r = g.routes().lookup("8.8.8.8".parse().unwrap()).unwrap();
        assert_eq!(r.via, Some("10.0.1.254".parse().unwrap()));
        assert!(
            g.neighbours()
                .get(v1, "fd00:2::2".parse().unwrap())
                .is_some()
        );
    }

    fn err(text: &str) -> String {
        Gateway::parse(text, "gw.conf").unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_place() {
        let e = err("address veth0 10.0.1.1\n");
        assert!(
            e.starts_with("gw.conf:1:15: error: expected an address with its prefix length"),
            "{e}"
        );
        let e = err("device veth0 mac 02:00:00:00:01\n");
        assert!(
            e.starts_with("gw.conf:1:18: error: expected a MAC address"),
            "{e}"
        );
        let e = err("\nroute 10.0.0.0/8 via 10.0.1.2\n");
        assert!(
            e.starts_with("gw.conf:2:30: error: expected `dev`, found end of line"),
            "{e}"
        );
        let e = err("rout 10.0.0.0/8 dev x\n");
        assert!(
            e.starts_with("gw.conf:1:1: error: expected `device`, `address`"),
            "{e}"
        );
        let e = err("route default dev veth0\n");
        assert!(
            e.starts_with("gw.conf:1:7: error: `default` without `via`"),
            "{e}"
        );
        let e = err("address veth0 10.0.1.1/24\nroute 10.0.0.0/8 via fd00::1 dev veth0\n");
        assert!(
            e.starts_with("gw.conf:2:22: error: next hop fd00::1 is not of the family"),
            "{e}"
        );
        // The next hop must be on a subnet of the device (checked when every address is known).
        let e = err("route 10.9.0.0/16 via 10.0.3.2 dev veth1\naddress veth1 10.0.2.1/24\n");
        assert!(
            e.starts_with("gw.conf:1:23: error: next hop 10.0.3.2 is not on a subnet of veth1"),
            "{e}"
        );
        let e = err("address veth1 10.0.2.1/24\nroute 10.0.2.0/24 dev veth1\n");
        assert!(
            e.contains("gw.conf:2:7") && e.contains("File exists"),
            "{e}"
        );
        let e = err("neighbour 10.0.2.2 lladdr 02:00:00:00:02:02 dev veth1 extra\n");
        assert!(
            e.starts_with("gw.conf:1:55: error: expected end of line"),
            "{e}"
        );
    }

    #[test]
    fn link_local_next_hops_need_no_subnet() {
        let g = Gateway::parse("route ::/0 via fe80::1 dev veth0\n", "gw.conf").unwrap();
        assert_eq!(g.routes().routes().len(), 1);
    }
}
