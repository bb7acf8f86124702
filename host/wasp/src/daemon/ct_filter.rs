//! `delete conntrack` filters: a control request's [`CtFilter`] as a test on a connection's
//! original direction, as `conntrack -D` reads its options.

use std::net::IpAddr;

use ipnet::IpNet;
use wasp_conntrack::EntryInfo;
use wasp_ctl::proto::CtFilter;

/// A [`CtFilter`] made ready to test connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnPick {
    proto: Option<u8>,
    src: Option<IpNet>,
    dst: Option<IpNet>,
    sport: Option<u16>,
    dport: Option<u16>,
    mark: Option<(u32, u32)>,
    zone: Option<u16>,
}

impl ConnPick {
    /// The test `f` asks for.
    ///
    /// # Errors
    /// What is wrong: an unknown protocol name, an address or prefix that does not parse, a
    /// port filter without a protocol that has ports.
    pub fn new(f: &CtFilter) -> Result<ConnPick, String> {
        let proto = f.proto.as_deref().map(protocol).transpose()?;
        let net = |what: &str, s: &Option<String>| -> Result<Option<IpNet>, String> {
            s.as_deref()
                .map(|t| {
                    t.parse::<IpNet>()
                        .or_else(|_| t.parse::<IpAddr>().map(IpNet::from))
                        .map(|n| n.trunc())
                        .map_err(|_| format!("{what} `{t}` is not an address or prefix"))
                })
                .transpose()
        };
        if (f.sport.is_some() || f.dport.is_some()) && !proto.is_some_and(has_ports) {
            return Err("sport/dport need proto tcp, udp, udplite, sctp or dccp".to_string());
        }
        Ok(ConnPick {
            proto,
            src: net("src", &f.src)?,
            dst: net("dst", &f.dst)?,
            sport: f.sport,
            dport: f.dport,
            mark: f.mark.map(|m| (m, f.mark_mask.unwrap_or(u32::MAX))),
            zone: f.zone,
        })
    }

    /// Whether connection `e` is picked.
    pub fn picks(&self, e: &EntryInfo) -> bool {
        let o = &e.orig;
        self.proto.is_none_or(|p| p == o.proto)
            && self.src.is_none_or(|n| n.contains(&o.src))
            && self.dst.is_none_or(|n| n.contains(&o.dst))
            && self.sport.is_none_or(|p| p == o.sport)
            && self.dport.is_none_or(|p| p == o.dport)
            && self.mark.is_none_or(|(m, mask)| e.mark & mask == m & mask)
            && self.zone.is_none_or(|z| z == o.zone)
    }
}

/// The protocol number of a name `conntrack -p` takes, or a number.
fn protocol(name: &str) -> Result<u8, String> {
    Ok(match name {
        "icmp" => 1,
        "tcp" => 6,
        "udp" => 17,
        "dccp" => 33,
        "gre" => 47,
        "icmpv6" | "ipv6-icmp" => 58,
        "sctp" => 132,
        "udplite" => 136,
        n => n.parse().map_err(|_| {
            format!("unknown protocol `{n}` (tcp, udp, udplite, icmp, icmpv6, sctp, dccp, gre or a number)")
        })?,
    })
}

/// Protocols whose tuples hold ports.
fn has_ports(p: u8) -> bool {
    matches!(p, 6 | 17 | 33 | 132 | 136)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse_and_refuse_as_conntrack_does() {
        let f = CtFilter {
            proto: Some("tcp".into()),
            src: Some("10.1.0.0/16".into()),
            dport: Some(80),
            mark: Some(0x2a),
            mark_mask: Some(0xff),
            ..CtFilter::default()
        };
        let p = ConnPick::new(&f).unwrap();
        assert_eq!(p.proto, Some(6));
        assert_eq!(p.src, Some("10.1.0.0/16".parse().unwrap()));
        assert_eq!(p.mark, Some((0x2a, 0xff)));
        let bad = |f: CtFilter| ConnPick::new(&f).unwrap_err();
        assert!(
            bad(CtFilter {
                proto: Some("tpc".into()),
                ..CtFilter::default()
            })
            .contains("unknown protocol `tpc`")
        );
        assert!(
            bad(CtFilter {
                src: Some("10.1.0".into()),
                ..CtFilter::default()
            })
            .contains("src `10.1.0`")
        );
        assert!(
            bad(CtFilter {
                dport: Some(22),
                ..CtFilter::default()
            })
            .contains("need proto")
        );
        // A bare address is a /32 (or /128).
        let p = ConnPick::new(&CtFilter {
            dst: Some("2001:db8::1".into()),
            ..CtFilter::default()
        })
        .unwrap();
        assert_eq!(p.dst, Some("2001:db8::1/128".parse().unwrap()));
    }
}
