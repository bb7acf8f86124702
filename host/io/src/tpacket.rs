//! Reading `TPACKET_V3` blocks in place (<linux/if_packet.h>: `struct tpacket_block_desc`,
//! `struct tpacket3_hdr`), bounds-checked: a malformed block yields `None`, never a panic.

/// Offsets in `struct tpacket_block_desc` (`hdr.bh1`).
const NUM_PKTS: usize = 12;
const OFFSET_TO_FIRST_PKT: usize = 16;
/// Offsets in `struct tpacket3_hdr`.
const TP_NEXT_OFFSET: usize = 0;
const TP_SNAPLEN: usize = 12;
const TP_STATUS: usize = 20;
const TP_MAC: usize = 24;
/// `hv1.tp_vlan_tci` and `hv1.tp_vlan_tpid` (after `tp_rxhash`).
const TP_VLAN_TCI: usize = 32;
const TP_VLAN_TPID: usize = 36;
/// Bytes of `struct tpacket3_hdr` we read (up to and including `tp_mac`/`tp_net`).
const HDR_LEN: usize = 28;
/// Bytes up to and including `hv1.tp_vlan_tpid`.
const HDR_VLAN_LEN: usize = 38;
/// `tp_status` bits (<linux/if_packet.h>): the VLAN fields hold the tag the kernel took out of
/// the frame (hardware or software VLAN acceleration: the frame in the ring has no tag), and
/// the TPID field is set (else the tag is 802.1Q, 0x8100).
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
/// `tp_status` bit: the frame's L4 checksum is partial (`CHECKSUM_PARTIAL`: the field holds
/// the pseudo-header sum; `tpacket_rcv`, `packet_recvmsg`'s `PACKET_AUXDATA`).
pub(crate) const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;

/// One packet of a block, as [`packet`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Packet {
    /// Offset of the frame in the block.
    pub start: u32,
    /// Bytes of the frame in the block (`tp_snaplen`).
    pub len: u32,
    /// Offset of the next packet's header.
    pub next: u32,
    /// The VLAN tag the kernel took out of the frame.
    pub vlan: Option<VlanTag>,
    /// `TP_STATUS_CSUMNOTREADY`: the TCP/UDP checksum is to be completed.
    pub csum_partial: bool,
}

/// A VLAN tag the kernel took out of a frame: the 4 bytes to put back after the MAC addresses
/// (TPID, then TCI, both big-endian).
pub(crate) type VlanTag = [u8; 4];

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off + 4)?;
    Some(u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

/// `(num_pkts, offset_to_first_pkt)` of a block the kernel handed over.
pub(crate) fn block(b: &[u8]) -> Option<(u32, u32)> {
    Some((u32_at(b, NUM_PKTS)?, u32_at(b, OFFSET_TO_FIRST_PKT)?))
}

/// The packet whose header is at `off` in block `b`.
///
/// The kernel moves a received 802.1Q/802.1ad tag out of the frame into the skb's metadata
/// (`skb_vlan_untag`, or the device does it) before AF_PACKET sees it, and reports it in
/// `tp_vlan_tci`/`tp_vlan_tpid` with `TP_STATUS_VLAN_VALID` (as `prb_fill_vlan_info`). The
/// caller puts it back so that the frame is the one on the wire.
pub(crate) fn packet(b: &[u8], off: u32) -> Option<Packet> {
    let o = off as usize;
    if o.checked_add(HDR_LEN)? > b.len() {
        return None;
    }
    let next = u32_at(b, o + TP_NEXT_OFFSET)?;
    let snap = u32_at(b, o + TP_SNAPLEN)?;
    let mac = u16::from_ne_bytes([b[o + TP_MAC], b[o + TP_MAC + 1]]) as u32;
    let start = off.checked_add(mac)?;
    let end = start.checked_add(snap)?;
    if end as usize > b.len() {
        return None;
    }
    let status = u32_at(b, o + TP_STATUS)?;
    let vlan = if o + HDR_VLAN_LEN <= b.len() {
        let tci = u32_at(b, o + TP_VLAN_TCI)? as u16;
        let tpid = u16::from_ne_bytes([b[o + TP_VLAN_TPID], b[o + TP_VLAN_TPID + 1]]);
        status_vlan(status, tci, tpid)
    } else {
        None
    };
    Some(Packet {
        start,
        len: snap,
        next: off.checked_add(next)?,
        vlan,
        csum_partial: status & TP_STATUS_CSUMNOTREADY != 0,
    })
}

/// The 4 bytes of a VLAN tag: TPID, then TCI, both big-endian.
pub(crate) fn vlan_tag(tpid: u16, tci: u16) -> VlanTag {
    let (p, t) = (tpid.to_be_bytes(), tci.to_be_bytes());
    [p[0], p[1], t[0], t[1]]
}

/// The VLAN tag reported by a `tp_status` and its `tp_vlan_tci`/`tp_vlan_tpid` (the fields of
/// `struct tpacket_auxdata` too), as [`packet`] reads them.
pub(crate) fn status_vlan(status: u32, tci: u16, tpid: u16) -> Option<VlanTag> {
    if status & TP_STATUS_VLAN_VALID == 0 {
        return None;
    }
    let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 {
        tpid
    } else {
        0x8100
    };
    Some(vlan_tag(tpid, tci))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block of 256 bytes holding two packets as the kernel lays them out.
    fn sample() -> Vec<u8> {
        let mut b = vec![0u8; 256];
        b[12..16].copy_from_slice(&2u32.to_ne_bytes()); // num_pkts
        b[16..20].copy_from_slice(&48u32.to_ne_bytes()); // offset_to_first_pkt
        // packet 1 at 48: next 96, snaplen 10, mac 32
        b[48..52].copy_from_slice(&96u32.to_ne_bytes());
        b[60..64].copy_from_slice(&10u32.to_ne_bytes());
        b[72..74].copy_from_slice(&32u16.to_ne_bytes());
        b[80..90].copy_from_slice(b"0123456789");
        // packet 2 at 144: last (next 0), snaplen 4, mac 32
        b[156..160].copy_from_slice(&4u32.to_ne_bytes());
        b[168..170].copy_from_slice(&32u16.to_ne_bytes());
        b[176..180].copy_from_slice(b"abcd");
        b
    }

    #[test]
    fn walks_the_packets_of_a_block() {
        let b = sample();
        assert_eq!(block(&b), Some((2, 48)));
        let p = packet(&b, 48).unwrap();
        assert_eq!(
            &b[p.start as usize..(p.start + p.len) as usize],
            b"0123456789"
        );
        assert_eq!((p.next, p.vlan, p.csum_partial), (144, None, false));
        let q = packet(&b, p.next).unwrap();
        assert_eq!(&b[q.start as usize..(q.start + q.len) as usize], b"abcd");
    }

    #[test]
    fn reports_the_vlan_tag_the_kernel_took_out() {
        let mut b = sample();
        // packet 1: status VLAN_VALID, tci 0x2003 (PCP 1, VID 3), no TPID: 802.1Q.
        b[68..72].copy_from_slice(&TP_STATUS_VLAN_VALID.to_ne_bytes());
        b[80..84].copy_from_slice(&0x2003u32.to_ne_bytes());
        assert_eq!(packet(&b, 48).unwrap().vlan, Some([0x81, 0x00, 0x20, 0x03]));
        // With the TPID given: 802.1ad.
        b[68..72]
            .copy_from_slice(&(TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID).to_ne_bytes());
        b[84..86].copy_from_slice(&0x88a8u16.to_ne_bytes());
        assert_eq!(packet(&b, 48).unwrap().vlan, Some([0x88, 0xa8, 0x20, 0x03]));
    }

    #[test]
    fn reports_a_partial_checksum() {
        let mut b = sample();
        // TP_STATUS_USER | TP_STATUS_CSUMNOTREADY, as the kernel sets it for a frame a local
        // stack sent through veth (captured: 0x9).
        b[68..72].copy_from_slice(&0x9u32.to_ne_bytes());
        assert!(packet(&b, 48).unwrap().csum_partial);
        assert!(!packet(&b, 144).unwrap().csum_partial);
    }

    #[test]
    fn rejects_out_of_bounds_headers_and_frames() {
        let mut b = sample();
        assert_eq!(packet(&b, 250), None, "header past the block");
        b[156..160].copy_from_slice(&200u32.to_ne_bytes()); // snaplen past the end
        assert_eq!(packet(&b, 144), None);
        assert_eq!(packet(&b, u32::MAX - 3), None);
        assert_eq!(block(&b[..10]), None);
    }
}
