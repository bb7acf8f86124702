//! Applying a NAT rewrite to a frame with incremental checksum updates (RFC 1624), as the
//! kernel's `nf_nat_ipv4_manip_pkt` / `nf_nat_ipv6_manip_pkt` with the per-protocol
//! `*_manip_pkt` of `nf_nat_proto.c`, and `nf_nat_icmp_reply_translation` for ICMP errors.

use std::net::IpAddr;

use wasp_wire::{L3Kind, PacketMeta};

use crate::nat::Manip;
use crate::table::ip_end;
use crate::tuple::proto;

/// What NAT writes into a packet of a connection in one direction (from
/// [`crate::Conntrack::nat_rewrite`]). Copyable; 44 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NatRewrite {
    /// New source address and port (the source manip of this direction). For ICMP the port is
    /// the new identifier.
    pub src: Option<(IpAddr, u16)>,
    /// New destination address and port (the destination manip of this direction).
    pub dst: Option<(IpAddr, u16)>,
    /// New ICMP / ICMPv6 echo identifier, when it changes.
    pub icmp_id: Option<u16>,
}

/// Why [`NatRewrite::apply`] changed nothing. The kernel drops such packets
/// (`skb_ensure_writable` fails, or the family does not match).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    /// The frame is not IPv4 or IPv6 (or its header failed validation).
    #[error("not an IP packet")]
    NotIp,
    /// The rewrite's addresses are of the other family.
    #[error("address family mismatch")]
    Family,
    /// The transport header to rewrite is cut off.
    #[error("transport header truncated")]
    Truncated,
}

/// RFC 1624 eqn. 3: the checksum `check` after `old` became `new` (both of even length).
fn csum_adjust(check: u16, old: &[u8], new: &[u8]) -> u16 {
    wasp_wire::checksum::adjust(check, old, new)
}

/// The Internet checksum of `data` plus `initial` (a folded-or-not partial sum).
pub(crate) fn checksum(data: &[u8], initial: u32) -> u16 {
    !wasp_wire::checksum::sum(u64::from(initial), data)
}

fn get16(f: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?]))
}

fn put16(f: &mut [u8], at: usize, v: u16) {
    if let Some(b) = f.get_mut(at..at + 2) {
        b.copy_from_slice(&v.to_be_bytes());
    }
}

/// Adjust the 16-bit checksum at `at` (if it is in the frame) for `old` -> `new`; with
/// `udp`, a zero checksum (none) stays zero and a result of zero is written as 0xffff.
fn adjust_at(f: &mut [u8], at: usize, old: &[u8], new: &[u8], udp: bool) {
    let Some(c) = get16(f, at) else {
        return;
    };
    if udp && c == 0 {
        return;
    }
    let mut n = csum_adjust(c, old, new);
    if udp && n == 0 {
        n = 0xffff;
    }
    put16(f, at, n);
}

fn addr_vec(a: IpAddr, v4: bool) -> Result<Vec<u8>, RewriteError> {
    match (a, v4) {
        (IpAddr::V4(x), true) => Ok(x.octets().to_vec()),
        (IpAddr::V6(x), false) => Ok(x.octets().to_vec()),
        _ => Err(RewriteError::Family),
    }
}

/// ICMP types whose header carries an identifier (echo, timestamp, information, address mask
/// requests and replies).
fn icmp_has_id(t: u8) -> bool {
    matches!(t, 0 | 8 | 13 | 14 | 15 | 16 | 17 | 18)
}

fn icmpv6_has_id(t: u8) -> bool {
    matches!(t, 128 | 129 | 139 | 140)
}

/// One IP header's layout in the frame.
struct Ip {
    at: usize,
    v4: bool,
}

impl Ip {
    fn src(&self) -> usize {
        self.at + if self.v4 { 12 } else { 8 }
    }
    fn dst(&self) -> usize {
        self.at + if self.v4 { 16 } else { 24 }
    }
    fn alen(&self) -> usize {
        if self.v4 { 4 } else { 16 }
    }
}

/// Rewrite the transport header at `l4` (protocol `p`) for address changes `old_a -> new_a`
/// (the pseudo-header, concatenated source and destination) and port changes: the TCP/UDP
/// ports at `sport`/`dport` or the ICMP id.
#[allow(clippy::too_many_arguments)]
fn rewrite_l4(
    f: &mut [u8],
    p: u8,
    l4: usize,
    old_a: &[u8],
    new_a: &[u8],
    sport: Option<u16>,
    dport: Option<u16>,
    id: Option<u16>,
) -> Result<(), RewriteError> {
    match p {
        proto::TCP | proto::UDP | proto::UDPLITE => {
            if f.len() < l4 + 4 {
                return Err(RewriteError::Truncated);
            }
            let (coff, udp) = match p {
                proto::TCP => (16, false),
                proto::UDP => (6, true),
                _ => (6, false),
            };
            // Only when the whole checksum field is there (ICMP errors quote 8 bytes).
            let has_csum = f.len() >= l4 + coff + 2;
            let old_ports = [f[l4], f[l4 + 1], f[l4 + 2], f[l4 + 3]];
            let mut new_ports = old_ports;
            if let Some(s) = sport {
                new_ports[..2].copy_from_slice(&s.to_be_bytes());
            }
            if let Some(d) = dport {
                new_ports[2..].copy_from_slice(&d.to_be_bytes());
            }
            if has_csum {
                adjust_at(f, l4 + coff, old_a, new_a, udp);
                adjust_at(f, l4 + coff, &old_ports, &new_ports, udp);
            }
            f[l4..l4 + 4].copy_from_slice(&new_ports);
        }
        proto::ICMP | proto::ICMPV6 => {
            let t = *f.get(l4).ok_or(RewriteError::Truncated)?;
            let has_id = if p == proto::ICMP {
                icmp_has_id(t)
            } else {
                icmpv6_has_id(t)
            };
            if p == proto::ICMPV6 {
                adjust_at(f, l4 + 2, old_a, new_a, false);
            }
            if has_id && let Some(id) = id {
                let old = get16(f, l4 + 4).ok_or(RewriteError::Truncated)?;
                adjust_at(f, l4 + 2, &old.to_be_bytes(), &id.to_be_bytes(), false);
                put16(f, l4 + 4, id);
            }
        }
        _ => {}
    }
    Ok(())
}

impl NatRewrite {
    /// Only the half of one manip (the kernel applies DST at prerouting and SRC at
    /// postrouting). The ICMP id goes with the half that changes an address (with the source
    /// half when neither does).
    pub fn only(self, m: Manip) -> NatRewrite {
        match m {
            Manip::Src => NatRewrite {
                dst: None,
                icmp_id: self
                    .icmp_id
                    .filter(|_| self.src.is_some() || self.dst.is_none()),
                ..self
            },
            Manip::Dst => NatRewrite {
                src: None,
                icmp_id: self.icmp_id.filter(|_| self.dst.is_some()),
                ..self
            },
        }
    }

    /// Rewrite the packet in `frame` (described by `meta`) in place: addresses in the IP header
    /// (IPv4 header checksum updated), ports in TCP/UDP/UDP-Lite with their checksums (a UDP
    /// checksum of 0 stays 0, as `udp_manip_pkt`), the ICMP / ICMPv6 echo identifier, and for
    /// an ICMP error the quoted packet too (`nf_nat_icmp_reply_translation`: its source gets
    /// the new destination and its destination the new source, with its IP and transport
    /// checksums updated), after which the ICMP checksum is computed over the whole message.
    /// Non-first fragments get only their addresses changed.
    ///
    /// Errors: [`RewriteError`]; the frame is unchanged then.
    pub fn apply(&self, frame: &mut [u8], meta: &PacketMeta) -> Result<(), RewriteError> {
        let v4 = match meta.l3 {
            L3Kind::Ipv4 => true,
            L3Kind::Ipv6 => false,
            _ => return Err(RewriteError::NotIp),
        };
        let l4 = meta.l4.ok_or(RewriteError::NotIp)?;
        let ip = Ip {
            at: usize::from(meta.net_offset),
            v4,
        };
        let end = ip_end(frame, meta).ok_or(RewriteError::NotIp)?;
        if end < ip.dst() + ip.alen() {
            return Err(RewriteError::NotIp);
        }
        let new_src = self.src.map(|(a, _)| addr_vec(a, v4)).transpose()?;
        let new_dst = self.dst.map(|(a, _)| addr_vec(a, v4)).transpose()?;
        let old_a = frame[ip.src()..ip.dst() + ip.alen()].to_vec();
        let mut new_a = old_a.clone();
        let al = ip.alen();
        if let Some(s) = &new_src {
            new_a[..al].copy_from_slice(s);
        }
        if let Some(d) = &new_dst {
            new_a[al..].copy_from_slice(d);
        }
        let lo = usize::from(l4.offset);
        if l4.fragoff == 0 && lo < end {
            let f = &mut frame[..end];
            let t = f.get(lo).copied().unwrap_or(0);
            let is_err = match l4.proto {
                proto::ICMP => matches!(t, 3 | 4 | 5 | 11 | 12),
                proto::ICMPV6 => t < 128,
                _ => false,
            };
            if is_err {
                self.icmp_error(f, &ip, lo, &new_a)?;
            } else {
                rewrite_l4(
                    f,
                    l4.proto,
                    lo,
                    &old_a,
                    &new_a,
                    self.src.map(|s| s.1),
                    self.dst.map(|d| d.1),
                    self.icmp_id,
                )?;
            }
        }
        if v4 {
            adjust_at(frame, ip.at + 10, &old_a, &new_a, false);
        }
        frame[ip.src()..ip.dst() + al].copy_from_slice(&new_a);
        Ok(())
    }

    /// The quoted packet of an ICMP error at `lo` (outer addresses not yet written; `new_a` is
    /// what they become), then the ICMP checksum over the message.
    fn icmp_error(
        &self,
        f: &mut [u8],
        outer: &Ip,
        lo: usize,
        new_a: &[u8],
    ) -> Result<(), RewriteError> {
        let inner_at = lo + 8;
        let ip = Ip {
            at: inner_at,
            v4: outer.v4,
        };
        let al = ip.alen();
        if f.len() < ip.dst() + al {
            return Err(RewriteError::Truncated);
        }
        let (iproto, il4) = if ip.v4 {
            let ihl = usize::from(f[inner_at] & 0xf) * 4;
            (f[inner_at + 9], inner_at + ihl)
        } else {
            (f[inner_at + 6], inner_at + 40)
        };
        let old_ia = f[ip.src()..ip.dst() + al].to_vec();
        let mut new_ia = old_ia.clone();
        // The quoted packet went the other way: its source is our destination.
        if let Some((a, _)) = self.dst {
            new_ia[..al].copy_from_slice(&addr_vec(a, ip.v4)?);
        }
        if let Some((a, _)) = self.src {
            new_ia[al..].copy_from_slice(&addr_vec(a, ip.v4)?);
        }
        if il4 < f.len() {
            rewrite_l4(
                f,
                iproto,
                il4,
                &old_ia,
                &new_ia,
                self.dst.map(|d| d.1),
                self.src.map(|s| s.1),
                self.icmp_id,
            )?;
        }
        if ip.v4 {
            adjust_at(f, inner_at + 10, &old_ia, &new_ia, false);
        }
        f[ip.src()..ip.dst() + al].copy_from_slice(&new_ia);
        // The whole ICMP message.
        put16(f, lo + 2, 0);
        let c = if outer.v4 {
            checksum(&f[lo..], 0)
        } else {
            let len = (f.len() - lo) as u32;
            let mut pseudo = 0u32;
            for w in new_a.chunks(2) {
                pseudo += u32::from(u16::from_be_bytes([w[0], w[1]]));
            }
            pseudo += (len >> 16) + (len & 0xffff) + u32::from(proto::ICMPV6);
            checksum(&f[lo..], pseudo)
        };
        put16(f, lo + 2, c);
        Ok(())
    }
}
