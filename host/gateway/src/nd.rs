//! IPv6 neighbour discovery (RFC 4861) for the gateway's own addresses: a neighbour
//! solicitation is validated (7.1.1) and answered with a neighbour advertisement (7.2.4) as the
//! kernel's ndisc_recv_ns / ndisc_send_na answer it: router flag set (the gateway forwards),
//! solicited flag unless the solicitation came from the unspecified address (then to all-nodes),
//! override flag set (the address is the gateway's own), with the target link-layer address
//! option.

use std::net::Ipv6Addr;

use wasp_wire::{checksum, ethernet, icmpv6, ipv4, ipv6, ndisc};

/// ICMPv6 type of a neighbour solicitation.
pub const NS: u8 = icmpv6::msg_type::NEIGHBOUR_SOLICIT;
/// ICMPv6 type of a neighbour advertisement.
pub const NA: u8 = icmpv6::msg_type::NEIGHBOUR_ADVERT;
/// NA flags: router, solicited, override (RFC 4861 4.4).
pub const FLAG_ROUTER: u8 = ndisc::flags::ROUTER;
/// Solicited flag.
pub const FLAG_SOLICITED: u8 = ndisc::flags::SOLICITED;
/// Override flag.
pub const FLAG_OVERRIDE: u8 = ndisc::flags::OVERRIDE;
/// Hop limit of every neighbour discovery message (RFC 4861 7.1.1: a message received with
/// another one was forwarded, and is invalid).
const ND_HOP_LIMIT: u8 = 255;

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

/// The IPv6 header and the neighbour discovery message of type `typ` in an IPv6 frame (fixed
/// header directly followed by ICMPv6), when they pass the checks RFC 4861 7.1.1 and 7.1.2
/// share: hop limit 255, the whole payload in the frame, at least 24 bytes, code 0, a good
/// ICMPv6 checksum, a target that is not multicast; and the link-layer address option of type
/// `ll_kind` in it, when options of non-zero length fill the message.
fn message(
    frame: &[u8],
    typ: u8,
    ll_kind: u8,
) -> Option<(ipv6::Packet<'_>, ndisc::Message<'_>, Option<[u8; 6]>)> {
    let ip = ipv6::Packet::new_checked(frame.get(ethernet::HEADER_LEN..)?).ok()?;
    if ip.version() != 6
        || ip.next_header() != ipv4::protocol::ICMPV6
        || ip.hop_limit() != ND_HOP_LIMIT
    {
        return None;
    }
    let plen = usize::from(ip.payload_len());
    let msg = ip.bytes().get(ipv6::HEADER_LEN..ipv6::HEADER_LEN + plen)?;
    let m = ndisc::Message::new_checked(msg).ok()?;
    if m.msg_type() != typ || m.code() != 0 {
        return None;
    }
    let pseudo = checksum::pseudo_v6(
        &ip.src_addr(),
        &ip.dst_addr(),
        plen as u32,
        ipv4::protocol::ICMPV6,
    );
    if checksum::sum(u64::from(pseudo), msg) != 0xffff || m.target().is_multicast() {
        return None;
    }
    let mut ll = None;
    let mut opts = m.options();
    for o in opts.by_ref() {
        if o.kind == ll_kind {
            ll = o.ll_addr().or(ll);
        }
    }
    if opts.malformed() {
        return None;
    }
    Some((ip, m, ll))
}

/// The neighbour solicitation in an IPv6 frame (fixed header directly followed by ICMPv6), when
/// it passes RFC 4861 7.1.1's checks: hop limit 255, a good ICMPv6 checksum, code 0, at least
/// 24 bytes, a target that is not multicast, options of non-zero length, and from the
/// unspecified address only to a solicited-node multicast address and without a source
/// link-layer address option.
pub fn read(frame: &[u8]) -> Option<Solicitation> {
    let (ip, m, sllao) = message(frame, NS, ndisc::option::SOURCE_LL_ADDR)?;
    let src = ip.src_addr();
    if src.is_unspecified() && (!is_solicited_node(&ip.dst_addr()) || sllao.is_some()) {
        return None;
    }
    Some(Solicitation {
        src,
        target: m.target(),
        sllao,
    })
}

/// `true` for a solicited-node multicast address ff02::1:ffXX:XXXX.
fn is_solicited_node(a: &Ipv6Addr) -> bool {
    let o = a.octets();
    o[..13] == [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff]
}

/// Write into `out` the Ethernet frame from `mac` to `to_mac` of an IPv6 packet from `src` to
/// `dst` (hop limit 255) carrying the neighbour discovery message `msg`, its checksum filled.
fn put_message(
    msg: &ndisc::Repr,
    (src, dst): (&Ipv6Addr, &Ipv6Addr),
    (mac, to_mac): ([u8; 6], [u8; 6]),
    out: &mut Vec<u8>,
) {
    out.clear();
    let eth = ethernet::Repr {
        dst: to_mac,
        src: mac,
        ethertype: ethernet::ethertype::IPV6,
    };
    out.extend_from_slice(&eth.to_bytes());
    let ip = ipv6::Repr {
        src: *src,
        dst: *dst,
        next_header: ipv4::protocol::ICMPV6,
        payload_len: msg.len() as u16,
        hop_limit: ND_HOP_LIMIT,
    };
    out.extend_from_slice(&ip.to_bytes());
    let at = out.len();
    out.resize(at + msg.len(), 0);
    if msg.emit(&mut out[at..]).is_ok()
        && let Ok(mut m) = icmpv6::PacketMut::new_checked(&mut out[at..])
    {
        m.fill_checksum(src, dst);
    }
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
    let msg = ndisc::Repr {
        msg_type: NA,
        flags,
        target: ns.target,
        ll_option: Some((ndisc::option::TARGET_LL_ADDR, mac)),
    };
    put_message(&msg, (&ns.target, &dst), (mac, to_mac), out);
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
    let (_, m, tllao) = message(frame, NA, ndisc::option::TARGET_LL_ADDR)?;
    Some(Advertisement {
        target: m.target(),
        tllao,
    })
}

/// Write into `out` a neighbour solicitation for `target` from `src` (an address of the
/// sending device) with MAC `mac`, as the kernel's ndisc_solicit sends one to resolve a next
/// hop: to the target's solicited-node multicast address, hop limit 255, with the source
/// link-layer address option.
pub fn solicit(target: &Ipv6Addr, src: &Ipv6Addr, mac: [u8; 6], out: &mut Vec<u8>) {
    let (dst, dmac) = solicited_node(target);
    let msg = ndisc::Repr {
        msg_type: NS,
        flags: 0,
        target: *target,
        ll_option: Some((ndisc::option::SOURCE_LL_ADDR, mac)),
    };
    put_message(&msg, (src, &dst), (mac, dmac), out);
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

    fn v6(b: &[u8]) -> Ipv6Addr {
        Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap())
    }

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
