//! ARP (RFC 826) for the gateway's own IPv4 addresses: requests are answered as the kernel's
//! arp_process answers them (with the default arp_ignore=0: for any local address, whatever the
//! device it is on), and the sender is learned as a neighbour.

use std::net::Ipv4Addr;

use wasp_wire::{arp, ethernet};

/// Ethernet + ARP for IPv4 over Ethernet: 14 + 28 bytes.
pub const FRAME_LEN: usize = ethernet::HEADER_LEN + arp::ETHER_IPV4_LEN;
/// EtherType of ARP.
pub const ETHERTYPE: u16 = ethernet::ethertype::ARP;
/// `ar_op` of a request.
pub const OP_REQUEST: u16 = arp::OPER_REQUEST;
/// `ar_op` of a reply.
pub const OP_REPLY: u16 = arp::OPER_REPLY;

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
    let eth = ethernet::Frame::new_checked(frame).ok()?;
    if eth.ethertype() != ETHERTYPE {
        return None;
    }
    let r = arp::Repr::parse(&arp::Packet::new_checked(eth.payload()).ok()?)?;
    Some(Arp {
        op: r.oper,
        sha: r.sha,
        spa: r.spa,
        tha: r.tha,
        tpa: r.tpa,
    })
}

/// Write into `out` the frame from `mac` to `to_mac` carrying `packet`. 42 bytes (no padding:
/// the device pads short frames).
fn put(packet: &arp::Repr, mac: [u8; 6], to_mac: [u8; 6], out: &mut Vec<u8>) {
    out.clear();
    let eth = ethernet::Repr {
        dst: to_mac,
        src: mac,
        ethertype: ETHERTYPE,
    };
    out.extend_from_slice(&eth.to_bytes());
    out.extend_from_slice(&packet.to_bytes());
}

/// The reply to `req` from the owner of `req.tpa` whose MAC is `mac` (arp_send(ARPOP_REPLY,
/// ..., sip, dev, tip, sha, dev->dev_addr, sha)): to the requester's hardware address, sender
/// `mac`/`tpa`, target the requester. 42 bytes (no padding: the device pads short frames).
pub fn reply(req: &Arp, mac: [u8; 6], out: &mut Vec<u8>) {
    let packet = arp::Repr {
        oper: OP_REPLY,
        sha: mac,
        spa: req.tpa,
        tha: req.sha,
        tpa: req.spa,
    };
    put(&packet, mac, req.sha, out);
}

/// A request for `target` from the owner of `mac`/`spa`, as the kernel's arp_solicit sends
/// it: broadcast, target hardware address zero. 42 bytes.
pub fn request(target: Ipv4Addr, spa: Ipv4Addr, mac: [u8; 6], out: &mut Vec<u8>) {
    let packet = arp::Repr {
        oper: OP_REQUEST,
        sha: mac,
        spa,
        tha: [0; 6],
        tpa: target,
    };
    put(&packet, mac, [0xff; 6], out);
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
