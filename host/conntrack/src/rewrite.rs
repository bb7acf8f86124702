//! Applying a NAT rewrite to a frame with incremental checksum updates (RFC 1624), as the
//! kernel's `nf_nat_ipv4_manip_pkt` / `nf_nat_ipv6_manip_pkt` with the per-protocol
//! `*_manip_pkt` of `nf_nat_proto.c`, and `nf_nat_icmp_reply_translation` for ICMP errors.

use std::net::IpAddr;
use std::ops::Range;

use wasp_wire::{L3Kind, PacketMeta, icmp, icmpv6, ipv4, ipv6, tcp, th, udp};

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

fn get16(f: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?]))
}

fn put16(f: &mut [u8], at: usize, v: u16) {
    if let Some(b) = f.get_mut(at..at + 2) {
        b.copy_from_slice(&v.to_be_bytes());
    }
}

/// Adjust the 16-bit checksum field at `at` (if it is whole in the frame: a transport header
/// quoted in an ICMP error may be cut after 8 bytes) for `old` -> `new` (RFC 1624 eqn. 3);
/// with `zero_rule`, UDP's ([`udp::apply_checksum_delta`]).
fn adjust_at(f: &mut [u8], at: usize, old: &[u8], new: &[u8], zero_rule: bool) {
    let Some(c) = get16(f, at) else {
        return;
    };
    let delta = wasp_wire::checksum::delta(old, new);
    let n = if zero_rule {
        udp::apply_checksum_delta(c, delta)
    } else {
        wasp_wire::checksum::apply(c, delta)
    };
    put16(f, at, n);
}

fn put_addr(to: &mut [u8], a: IpAddr, v4: bool) -> Result<(), RewriteError> {
    match (a, v4) {
        (IpAddr::V4(x), true) => to.copy_from_slice(&x.octets()),
        (IpAddr::V6(x), false) => to.copy_from_slice(&x.octets()),
        _ => return Err(RewriteError::Family),
    }
    Ok(())
}

/// A header's source and destination addresses, one after the other as the header holds them
/// (8 bytes for IPv4, 32 for IPv6), kept on the stack: what a rewrite reads and writes per
/// packet without allocating.
#[derive(Clone, Copy)]
struct Pair {
    b: [u8; 32],
    len: usize,
}

impl Pair {
    /// A copy of `addrs` (at most 32 bytes: the addresses of one header).
    fn of(addrs: &[u8]) -> Pair {
        let mut b = [0; 32];
        b[..addrs.len()].copy_from_slice(addrs);
        Pair {
            b,
            len: addrs.len(),
        }
    }

    /// Write `a` as the first (`first`) or second address.
    fn put(&mut self, first: bool, a: IpAddr, v4: bool) -> Result<(), RewriteError> {
        let al = self.len / 2;
        let at = if first { 0 } else { al };
        put_addr(&mut self.b[at..at + al], a, v4)
    }
}

impl std::ops::Deref for Pair {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.b[..self.len]
    }
}

/// One IP header in the frame: where it starts and its version.
struct Ip {
    at: usize,
    v4: bool,
}

impl Ip {
    /// The source and destination addresses, one after the other, in the frame.
    fn addrs(&self) -> Range<usize> {
        let (s, d) = if self.v4 {
            (ipv4::field::SRC, ipv4::field::DST)
        } else {
            (ipv6::field::SRC, ipv6::field::DST)
        };
        self.at + s.start..self.at + d.end
    }
    /// Length of one address in bytes.
    fn alen(&self) -> usize {
        self.addrs().len() / 2
    }
    /// Update the IPv4 header checksum for addresses `old` -> `new` (concatenated source and
    /// destination) and write them; for IPv6 (no header checksum) only write them. The caller
    /// has checked that the addresses are in `f`.
    fn set_addrs(&self, f: &mut [u8], old: &[u8], new: &[u8]) {
        let al = self.alen();
        let (src, dst) = new.split_at(al);
        if self.v4 {
            if let Ok(mut h) = ipv4::PacketMut::new_checked(&mut f[self.at..]) {
                h.adjust_checksum(old, new);
                h.set_src(src.try_into().unwrap_or_default());
                h.set_dst(dst.try_into().unwrap_or_default());
            }
        } else if let Ok(mut h) = ipv6::PacketMut::new_checked(&mut f[self.at..]) {
            h.set_src(src.try_into().unwrap_or_default());
            h.set_dst(dst.try_into().unwrap_or_default());
        }
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
            let seg = f.get_mut(l4..).ok_or(RewriteError::Truncated)?;
            let old_ports = th::PortsMut::new_checked(seg)
                .map_err(|_| RewriteError::Truncated)?
                .bytes();
            // UDP-Lite has UDP's layout (RFC 3828), not its zero rule.
            let (coff, zero_rule) = match p {
                proto::TCP => (tcp::field::CHECKSUM, false),
                proto::UDP => (udp::field::CHECKSUM, true),
                _ => (udp::field::CHECKSUM, false),
            };
            // Only when the whole checksum field is there (ICMP errors quote 8 bytes), as
            // adjust_at checks.
            adjust_at(seg, coff, old_a, new_a, zero_rule);
            let mut ports = th::PortsMut::new_checked(seg).map_err(|_| RewriteError::Truncated)?;
            if let Some(s) = sport {
                ports.set_src_port(s);
            }
            if let Some(d) = dport {
                ports.set_dst_port(d);
            }
            let new_ports = ports.bytes();
            adjust_at(seg, coff, &old_ports, &new_ports, zero_rule);
        }
        proto::ICMP | proto::ICMPV6 => {
            // ICMP and ICMPv6 share the layout of type, checksum and identifier.
            let t = *f
                .get(l4 + icmp::field::TYPE)
                .ok_or(RewriteError::Truncated)?;
            let has_id = if p == proto::ICMP {
                icmp::has_ident(t)
            } else {
                icmpv6::has_ident(t)
            };
            let csum = l4 + icmp::field::CHECKSUM;
            if p == proto::ICMPV6 {
                adjust_at(f, csum, old_a, new_a, false);
            }
            if has_id && let Some(id) = id {
                let ident = l4 + icmp::field::ECHO_IDENT;
                let old = get16(f, ident).ok_or(RewriteError::Truncated)?;
                adjust_at(f, csum, &old.to_be_bytes(), &id.to_be_bytes(), false);
                put16(f, ident, id);
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
        if end < ip.addrs().end {
            return Err(RewriteError::NotIp);
        }
        let old_a = Pair::of(&frame[ip.addrs()]);
        let mut new_a = old_a;
        if let Some((a, _)) = self.src {
            new_a.put(true, a, v4)?;
        }
        if let Some((a, _)) = self.dst {
            new_a.put(false, a, v4)?;
        }
        let lo = usize::from(l4.offset);
        if l4.fragoff == 0 && lo < end {
            let f = &mut frame[..end];
            let t = f.get(lo).copied().unwrap_or(0);
            let is_err = match l4.proto {
                proto::ICMP => icmp::is_error(t),
                proto::ICMPV6 => icmpv6::is_error(t),
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
        ip.set_addrs(frame, &old_a, &new_a);
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
        // ICMP and ICMPv6 errors quote the packet after the same 8 bytes.
        let inner_at = lo + icmp::field::QUOTE;
        let ip = Ip {
            at: inner_at,
            v4: outer.v4,
        };
        let al = ip.alen();
        if f.len() < ip.addrs().end {
            return Err(RewriteError::Truncated);
        }
        // The inner header's length as carried (nf_nat_ipv4_manip_pkt pulls only the fixed
        // part and trusts IHL).
        let inner = &mut f[inner_at..];
        let (iproto, il4) = if ip.v4 {
            let h = ipv4::PacketMut::new_checked(inner).map_err(|_| RewriteError::Truncated)?;
            (h.protocol(), inner_at + h.header_len())
        } else {
            let h = ipv6::PacketMut::new_checked(inner).map_err(|_| RewriteError::Truncated)?;
            (h.next_header(), inner_at + ipv6::HEADER_LEN)
        };
        let old_ia = Pair::of(&f[ip.addrs()]);
        let mut new_ia = old_ia;
        // The quoted packet went the other way: its source is our destination.
        if let Some((a, _)) = self.dst {
            new_ia.put(true, a, ip.v4)?;
        }
        if let Some((a, _)) = self.src {
            new_ia.put(false, a, ip.v4)?;
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
        ip.set_addrs(f, &old_ia, &new_ia);
        // The whole ICMP message.
        let msg = &mut f[lo..];
        if outer.v4 {
            if let Ok(mut m) = icmp::PacketMut::new_checked(msg) {
                m.fill_checksum();
            }
        } else if let Ok(mut m) = icmpv6::PacketMut::new_checked(msg) {
            let (s, d) = new_a.split_at(al);
            let s: [u8; 16] = s.try_into().unwrap_or_default();
            let d: [u8; 16] = d.try_into().unwrap_or_default();
            m.fill_checksum(&s.into(), &d.into());
        }
        Ok(())
    }
}
