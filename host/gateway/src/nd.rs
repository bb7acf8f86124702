//! IPv6 neighbour discovery (RFC 4861) for the gateway's own addresses: a neighbour
//! solicitation is validated (7.1.1) and answered with a neighbour advertisement (7.2.4) as the
//! kernel's ndisc_recv_ns / ndisc_send_na answer it: router flag set (the gateway forwards),
//! solicited flag unless the solicitation came from the unspecified address (then to all-nodes),
//! override flag set (the address is the gateway's own), with the target link-layer address
//! option.

use std::net::Ipv6Addr;

use super::checksum;
use super::icmp::v6;

/// ICMPv6 type of a neighbour solicitation.
pub const NS: u8 = 135;
/// ICMPv6 type of a neighbour advertisement.
pub const NA: u8 = 136;
/// NA flags: router, solicited, override (RFC 4861 4.4).
pub const FLAG_ROUTER: u8 = 0x80;
/// Solicited flag.
pub const FLAG_SOLICITED: u8 = 0x40;
/// Override flag.
pub const FLAG_OVERRIDE: u8 = 0x20;

/// A valid neighbour solicitation read from a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Solicitation {
    /// IPv6 source (unspecified for duplicate address detection).
    pub src: Ipv6Addr,
    /// The address asked for.
    pub target: Ipv6Addr,
    /// The source link-layer address option, when present.
    pub sllao: Option<[u8; 6]>,
}

/// The neighbour solicitation in an IPv6 frame (fixed header directly followed by ICMPv6), when
/// it passes RFC 4861 7.1.1's checks: hop limit 255, a good ICMPv6 checksum, code 0, at least
/// 24 bytes, a target that is not multicast, options of non-zero length, and from the
/// unspecified address only to a solicited-node multicast address and without a source
/// link-layer address option.
pub fn read(frame: &[u8]) -> Option<Solicitation> {
    let ip = frame.get(14..54)?;
    if ip[0] >> 4 != 6 || ip[6] != 58 || ip[7] != 255 {
        return None;
    }
    let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
    let msg = frame.get(54..54 + plen)?;
    if msg.len() < 24 || msg[0] != NS || msg[1] != 0 {
        return None;
    }
    let src = v6(&ip[8..24]);
    let dst = v6(&ip[24..40]);
    if checksum::sum(
        u64::from(checksum::pseudo_v6(&src, &dst, plen as u32, 58)),
        msg,
    ) != 0xffff
    {
        return None;
    }
    let target = v6(&msg[8..24]);
    if target.is_multicast() {
        return None;
    }
    let mut sllao = None;
    let mut opts = &msg[24..];
    while opts.len() >= 2 {
        let len = usize::from(opts[1]) * 8;
        if len == 0 || len > opts.len() {
            return None;
        }
        if opts[0] == 1 && len >= 8 {
            let mut m = [0u8; 6];
            m.copy_from_slice(&opts[2..8]);
            sllao = Some(m);
        }
        opts = &opts[len..];
    }
    if src.is_unspecified() && (!is_solicited_node(&dst) || sllao.is_some()) {
        return None;
    }
    Some(Solicitation { src, target, sllao })
}

/// `true` for a solicited-node multicast address ff02::1:ffXX:XXXX.
fn is_solicited_node(a: &Ipv6Addr) -> bool {
    let o = a.octets();
    o[..13] == [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff]
}

/// Write into `out` the advertisement answering `ns` (whose frame came from `frame_src`) for
/// the gateway's address `ns.target`, from MAC `mac`: to the soliciting address (Ethernet to
/// its source link-layer address option, else the frame's source), or to all-nodes ff02::1
/// (33:33:00:00:00:01) without the solicited flag when the solicitation came from `::`; hop
/// limit 255, source the target address.
pub fn advertise(ns: &Solicitation, frame_src: [u8; 6], mac: [u8; 6], out: &mut Vec<u8>) {
    let (dst, to_mac, flags) = if ns.src.is_unspecified() {
        (
            Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
            [0x33, 0x33, 0, 0, 0, 1],
            FLAG_ROUTER | FLAG_OVERRIDE,
        )
    } else {
        (
            ns.src,
            ns.sllao.unwrap_or(frame_src),
            FLAG_ROUTER | FLAG_SOLICITED | FLAG_OVERRIDE,
        )
    };
    out.clear();
    out.extend_from_slice(&to_mac);
    out.extend_from_slice(&mac);
    out.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 32, 58, 255]);
    out.extend_from_slice(&ns.target.octets());
    out.extend_from_slice(&dst.octets());
    let at = out.len();
    out.extend_from_slice(&[NA, 0, 0, 0, flags, 0, 0, 0]);
    out.extend_from_slice(&ns.target.octets());
    out.extend_from_slice(&[2, 1]);
    out.extend_from_slice(&mac);
    let c = checksum::icmpv6(&ns.target, &dst, &out[at..]);
    out[at + 2..at + 4].copy_from_slice(&c.to_be_bytes());
}

/// A valid neighbour advertisement read from a frame: its target and target link-layer
/// address option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Advertisement {
    /// The address advertised.
    pub target: Ipv6Addr,
    /// Its link-layer address (the option; an advertisement without one teaches nothing).
    pub tllao: Option<[u8; 6]>,
}

/// The neighbour advertisement in an IPv6 frame (fixed header directly followed by ICMPv6),
/// when it passes RFC 4861 7.1.2's checks: hop limit 255, a good checksum, code 0, at least 24
/// bytes, a target that is not multicast, options of non-zero length.
pub fn read_advert(frame: &[u8]) -> Option<Advertisement> {
    let ip = frame.get(14..54)?;
    if ip[0] >> 4 != 6 || ip[6] != 58 || ip[7] != 255 {
        return None;
    }
    let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
    let msg = frame.get(54..54 + plen)?;
    if msg.len() < 24 || msg[0] != NA || msg[1] != 0 {
        return None;
    }
    let src = v6(&ip[8..24]);
    let dst = v6(&ip[24..40]);
    if checksum::sum(
        u64::from(checksum::pseudo_v6(&src, &dst, plen as u32, 58)),
        msg,
    ) != 0xffff
    {
        return None;
    }
    let target = v6(&msg[8..24]);
    if target.is_multicast() {
        return None;
    }
    let mut tllao = None;
    let mut opts = &msg[24..];
    while opts.len() >= 2 {
        let len = usize::from(opts[1]) * 8;
        if len == 0 || len > opts.len() {
            return None;
        }
        if opts[0] == 2 && len >= 8 {
            let mut m = [0u8; 6];
            m.copy_from_slice(&opts[2..8]);
            tllao = Some(m);
        }
        opts = &opts[len..];
    }
    Some(Advertisement { target, tllao })
}

/// Write into `out` a neighbour solicitation for `target` from `src` (an address of the
/// sending device) with MAC `mac`, as the kernel's ndisc_solicit sends one to resolve a next
/// hop: to the target's solicited-node multicast address, hop limit 255, with the source
/// link-layer address option.
pub fn solicit(target: &Ipv6Addr, src: &Ipv6Addr, mac: [u8; 6], out: &mut Vec<u8>) {
    let (dst, dmac) = solicited_node(target);
    out.clear();
    out.extend_from_slice(&dmac);
    out.extend_from_slice(&mac);
    out.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 32, 58, 255]);
    out.extend_from_slice(&src.octets());
    out.extend_from_slice(&dst.octets());
    let at = out.len();
    out.extend_from_slice(&[NS, 0, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&target.octets());
    out.extend_from_slice(&[1, 1]);
    out.extend_from_slice(&mac);
    let c = checksum::icmpv6(src, &dst, &out[at..]);
    out[at + 2..at + 4].copy_from_slice(&c.to_be_bytes());
}

/// The solicited-node multicast address of `a` (RFC 4291 2.7.1) and its MAC (RFC 2464 7).
pub fn solicited_node(a: &Ipv6Addr) -> (Ipv6Addr, [u8; 6]) {
    let o = a.octets();
    let mut m = [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0];
    m[13..].copy_from_slice(&o[13..]);
    (Ipv6Addr::from(m), [0x33, 0x33, 0xff, o[13], o[14], o[15]])
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A solicitation for `target` from `src` (with its MAC in a source link-layer address
    /// option unless `src` is `::`), to the target's solicited-node address, as Linux sends it.
    pub(crate) fn solicitation(src: Ipv6Addr, target: Ipv6Addr, mac: [u8; 6]) -> Vec<u8> {
        let (dst, dmac) = solicited_node(&target);
        let mut msg = vec![NS, 0, 0, 0, 0, 0, 0, 0];
        msg.extend_from_slice(&target.octets());
        if !src.is_unspecified() {
            msg.extend_from_slice(&[1, 1]);
            msg.extend_from_slice(&mac);
        }
        let c = checksum::icmpv6(&src, &dst, &msg);
        msg[2..4].copy_from_slice(&c.to_be_bytes());
        let mut f = dmac.to_vec();
        f.extend_from_slice(&mac);
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&(msg.len() as u16).to_be_bytes());
        f.extend_from_slice(&[58, 255]);
        f.extend_from_slice(&src.octets());
        f.extend_from_slice(&dst.octets());
        f.extend_from_slice(&msg);
        f
    }

    /// The fields are those Linux 6.18 sent (forwarding on) when a client resolved its
    /// address in a namespace: to the client's MAC, hop limit 255, from the target address,
    /// flags 0xe0, 32 bytes of ICMPv6 ending with the option `02 01 MAC`.
    #[test]
    fn advertisement_fields_and_checksum() {
        let host: Ipv6Addr = "fd00:1::2".parse().unwrap();
        let gw: Ipv6Addr = "fd00:1::1".parse().unwrap();
        let hmac = [2, 0, 0, 0, 0, 2];
        let gmac = [2, 0, 0, 0, 1, 1];
        let f = solicitation(host, gw, hmac);
        // The solicitation goes to ff02::1:ff00:1, MAC 33:33:ff:00:00:01.
        assert_eq!(&f[..6], &[0x33, 0x33, 0xff, 0, 0, 1]);
        let ns = read(&f).unwrap();
        assert_eq!((ns.src, ns.target, ns.sllao), (host, gw, Some(hmac)));
        let mut out = Vec::new();
        advertise(&ns, hmac, gmac, &mut out);
        assert_eq!(out.len(), 14 + 40 + 32);
        assert_eq!(
            &out[..14],
            &[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 1, 1, 0x86, 0xdd]
        );
        assert_eq!(&out[18..22], &[0, 32, 58, 255]);
        assert_eq!(v6(&out[22..38]), gw);
        assert_eq!(v6(&out[38..54]), host);
        let msg = &out[54..];
        assert_eq!((msg[0], msg[1]), (NA, 0));
        assert_eq!(msg[4], 0xe0, "router, solicited, override");
        assert_eq!(v6(&msg[8..24]), gw);
        assert_eq!(&msg[24..32], &[2, 1, 2, 0, 0, 0, 1, 1]);
        let s = checksum::sum(u64::from(checksum::pseudo_v6(&gw, &host, 32, 58)), msg);
        assert_eq!(s, 0xffff, "ICMPv6 checksum verifies");
    }

    #[test]
    fn duplicate_address_detection_is_answered_to_all_nodes() {
        let gw: Ipv6Addr = "fd00:1::1".parse().unwrap();
        let f = solicitation(Ipv6Addr::UNSPECIFIED, gw, [2, 0, 0, 0, 0, 2]);
        let ns = read(&f).unwrap();
        let mut out = Vec::new();
        advertise(&ns, [2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 1, 1], &mut out);
        assert_eq!(&out[..6], &[0x33, 0x33, 0, 0, 0, 1]);
        assert_eq!(v6(&out[38..54]), "ff02::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(out[54 + 4], 0xa0, "router, override; not solicited");
    }

    #[test]
    fn our_solicitation_reads_back_and_our_advertisement_teaches() {
        let me: Ipv6Addr = "fd00:2::1".parse().unwrap();
        let t: Ipv6Addr = "fd00:2::2".parse().unwrap();
        let mut out = Vec::new();
        solicit(&t, &me, [2, 0, 0, 0, 1, 2], &mut out);
        assert_eq!(&out[..6], &[0x33, 0x33, 0xff, 0, 0, 2]);
        let ns = read(&out).unwrap();
        assert_eq!(
            (ns.src, ns.target, ns.sllao),
            (me, t, Some([2, 0, 0, 0, 1, 2]))
        );
        // The advertisement that answers it carries the target's MAC.
        let mut na = Vec::new();
        advertise(&ns, [2, 0, 0, 0, 1, 2], [2, 0, 0, 0, 2, 2], &mut na);
        // (`advertise` answers for `ns.target` from the target's side.)
        let a = read_advert(&na).unwrap();
        assert_eq!((a.target, a.tllao), (t, Some([2, 0, 0, 0, 2, 2])));
        na[54 + 2] ^= 1;
        assert!(read_advert(&na).is_none());
    }

    #[test]
    fn invalid_solicitations_are_ignored() {
        let host: Ipv6Addr = "fd00:1::2".parse().unwrap();
        let gw: Ipv6Addr = "fd00:1::1".parse().unwrap();
        let good = solicitation(host, gw, [2, 0, 0, 0, 0, 2]);
        let mut f = good.clone();
        f[21] = 64; // hop limit
        assert!(read(&f).is_none());
        let mut f = good.clone();
        f[54 + 2] ^= 1; // checksum
        assert!(read(&f).is_none());
        let mut f = good.clone();
        f[54 + 1] = 1; // code
        assert!(read(&f).is_none());
        assert!(read(&good[..70]).is_none());
    }
}
