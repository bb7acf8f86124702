//! ARP (RFC 826) for the gateway's own IPv4 addresses: requests are answered as the kernel's
//! arp_process answers them (with the default arp_ignore=0: for any local address, whatever the
//! device it is on), and the sender is learned as a neighbour.

use std::net::Ipv4Addr;

/// Ethernet + ARP for IPv4 over Ethernet: 14 + 28 bytes.
pub const FRAME_LEN: usize = 42;
/// EtherType of ARP.
pub const ETHERTYPE: u16 = 0x0806;
/// `ar_op` of a request.
pub const OP_REQUEST: u16 = 1;
/// `ar_op` of a reply.
pub const OP_REPLY: u16 = 2;

/// An ARP packet for IPv4 over Ethernet, read from a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arp {
    /// `ar_op`.
    pub op: u16,
    /// Sender hardware address.
    pub sha: [u8; 6],
    /// Sender protocol address.
    pub spa: Ipv4Addr,
    /// Target hardware address.
    pub tha: [u8; 6],
    /// Target protocol address.
    pub tpa: Ipv4Addr,
}

/// The ARP packet of an Ethernet frame (EtherType 0x0806, hardware type 1, protocol 0x0800,
/// lengths 6 and 4); `None` for anything else or a frame too short.
pub fn read(frame: &[u8]) -> Option<Arp> {
    let a = frame.get(14..FRAME_LEN)?;
    if u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE
        || a[0..2] != [0, 1]
        || a[2..4] != [0x08, 0x00]
        || a[4] != 6
        || a[5] != 4
    {
        return None;
    }
    let mut sha = [0u8; 6];
    let mut tha = [0u8; 6];
    sha.copy_from_slice(&a[8..14]);
    tha.copy_from_slice(&a[18..24]);
    Some(Arp {
        op: u16::from_be_bytes([a[6], a[7]]),
        sha,
        spa: Ipv4Addr::new(a[14], a[15], a[16], a[17]),
        tha,
        tpa: Ipv4Addr::new(a[24], a[25], a[26], a[27]),
    })
}

/// The reply to `req` from the owner of `req.tpa` whose MAC is `mac` (arp_send(ARPOP_REPLY,
/// ..., sip, dev, tip, sha, dev->dev_addr, sha)): to the requester's hardware address, sender
/// `mac`/`tpa`, target the requester. 42 bytes (no padding: the device pads short frames).
pub fn reply(req: &Arp, mac: [u8; 6], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&req.sha);
    out.extend_from_slice(&mac);
    out.extend_from_slice(&ETHERTYPE.to_be_bytes());
    out.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4]);
    out.extend_from_slice(&OP_REPLY.to_be_bytes());
    out.extend_from_slice(&mac);
    out.extend_from_slice(&req.tpa.octets());
    out.extend_from_slice(&req.sha);
    out.extend_from_slice(&req.spa.octets());
}

/// A request for `target` from the owner of `mac`/`spa`, as the kernel's arp_solicit sends
/// it: broadcast, target hardware address zero. 42 bytes.
pub fn request(target: Ipv4Addr, spa: Ipv4Addr, mac: [u8; 6], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&[0xff; 6]);
    out.extend_from_slice(&mac);
    out.extend_from_slice(&ETHERTYPE.to_be_bytes());
    out.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4]);
    out.extend_from_slice(&OP_REQUEST.to_be_bytes());
    out.extend_from_slice(&mac);
    out.extend_from_slice(&spa.octets());
    out.extend_from_slice(&[0; 6]);
    out.extend_from_slice(&target.octets());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request "who has 10.0.1.1? tell 10.0.1.2" as Linux sends it (broadcast, tha zero).
    pub(crate) fn request() -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[2, 0, 0, 0, 0, 2, 0x08, 0x06]);
        f.extend_from_slice(&[0, 1, 0x08, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&[2, 0, 0, 0, 0, 2, 10, 0, 1, 2]);
        f.extend_from_slice(&[0, 0, 0, 0, 0, 0, 10, 0, 1, 1]);
        f
    }

    /// The reply is byte for byte what Linux 6.18 sent for its address in a namespace
    /// (42 bytes, no padding on a veth).
    #[test]
    fn reads_a_request_and_builds_the_reply() {
        let req = read(&request()).unwrap();
        assert_eq!(req.op, OP_REQUEST);
        assert_eq!(req.spa, Ipv4Addr::new(10, 0, 1, 2));
        assert_eq!(req.tpa, Ipv4Addr::new(10, 0, 1, 1));
        let mut out = Vec::new();
        reply(&req, [2, 0, 0, 0, 1, 1], &mut out);
        #[rustfmt::skip]
        let want = [
            2, 0, 0, 0, 0, 2,   2, 0, 0, 0, 1, 1,   0x08, 0x06,
            0, 1,  0x08, 0,  6, 4,  0, 2,
            2, 0, 0, 0, 1, 1,  10, 0, 1, 1,
            2, 0, 0, 0, 0, 2,  10, 0, 1, 2,
        ];
        assert_eq!(out, want);
    }

    #[test]
    fn a_request_reads_back() {
        let mut out = Vec::new();
        let (t, me) = (Ipv4Addr::new(10, 0, 2, 2), Ipv4Addr::new(10, 0, 2, 1));
        super::request(t, me, [2, 0, 0, 0, 1, 2], &mut out);
        assert_eq!(out.len(), FRAME_LEN);
        assert_eq!(&out[..6], &[0xff; 6]);
        let a = read(&out).unwrap();
        assert_eq!(
            (a.op, a.sha, a.spa, a.tha, a.tpa),
            (OP_REQUEST, [2, 0, 0, 0, 1, 2], me, [0; 6], t)
        );
    }

    #[test]
    fn refuses_other_hardware_or_protocols() {
        let mut f = request();
        f[15] = 6; // hardware type 6 (IEEE 802)
        assert!(read(&f).is_none());
        let mut f = request();
        f[18] = 16; // hlen
        assert!(read(&f).is_none());
        assert!(read(&request()[..41]).is_none());
    }
}
