//! Ethernet II frame header (DIX / IEEE 802.3 type interpretation): destination MAC, source MAC,
//! EtherType. No FCS: captures and `AF_PACKET` deliver frames without it.

use crate::bytes::{array, be16, get_be16, put16};
use crate::{Error, Result};

/// Byte offsets of the Ethernet II header fields.
pub mod field {
    use core::ops::Range;
    /// Destination MAC address.
    pub const DST: Range<usize> = 0..6;
    /// Source MAC address.
    pub const SRC: Range<usize> = 6..12;
    /// EtherType (or an 802.3 length when below 0x0600).
    pub const ETHERTYPE: usize = 12;
    /// First byte after the header.
    pub const PAYLOAD: usize = 14;
}

/// Length in bytes of the Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// Well-known EtherType values. Any other value is kept as a plain number.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// Transparent Ethernet bridging (an Ethernet frame follows), used by Geneve.
    pub const TEB: u16 = 0x6558;
    /// 802.1Q VLAN tag (C-tag).
    pub const VLAN: u16 = 0x8100;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// MPLS unicast (not parsed by wasp: an unknown EtherType like any other).
    pub const MPLS: u16 = 0x8847;
    /// 802.1ad service VLAN tag (S-tag, QinQ).
    pub const QINQ: u16 = 0x88a8;
    /// Pre-standard QinQ tag used by some switches.
    pub const VLAN_9100: u16 = 0x9100;
    /// `skb->protocol` the kernel gives an 802.3 frame whose payload starts with 0xffff (raw
    /// IPX): `ETH_P_802_3`.
    pub const ETH_P_802_3: u16 = 0x0001;
    /// `skb->protocol` the kernel gives any other 802.3 (length-field) frame: `ETH_P_802_2`.
    pub const ETH_P_802_2: u16 = 0x0004;
}

/// Whether `t` announces a VLAN tag that wasp walks through: 0x8100, 0x88a8 or 0x9100.
#[inline]
pub fn is_vlan_tpid(t: u16) -> bool {
    matches!(t, ethertype::VLAN | ethertype::QINQ | ethertype::VLAN_9100)
}

/// Whether the kernel pops a tag with this TPID before the netdev ingress hook
/// (`eth_type_vlan`: 0x8100 and 0x88a8 only; 0x9100 stays in the frame).
#[inline]
pub fn is_kernel_vlan_tpid(t: u16) -> bool {
    matches!(t, ethertype::VLAN | ethertype::QINQ)
}

/// `skb->protocol` the kernel derives from a type/length field `t` followed by `payload`, as
/// `eth_type_trans` (and `vlan_set_encap_proto` after a tag) do: a value of at least 0x0600 is an
/// EtherType and is kept; a smaller one is an 802.3 length, giving [`ethertype::ETH_P_802_3`]
/// when the payload starts with 0xffff and [`ethertype::ETH_P_802_2`] otherwise.
#[inline]
pub fn kernel_protocol(t: u16, payload: &[u8]) -> u16 {
    if t >= 0x0600 {
        t
    } else if get_be16(payload, 0) == Some(0xffff) {
        ethertype::ETH_P_802_3
    } else {
        ethertype::ETH_P_802_2
    }
}

/// A view of an Ethernet II frame. At least [`HEADER_LEN`] bytes long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    buf: &'a [u8],
}

impl<'a> Frame<'a> {
    /// Wrap `buf` (a whole frame as captured).
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 14 bytes.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Frame { buf })
    }

    /// Destination MAC address.
    pub fn dst(&self) -> [u8; 6] {
        array(self.buf, field::DST.start)
    }

    /// Source MAC address.
    pub fn src(&self) -> [u8; 6] {
        array(self.buf, field::SRC.start)
    }

    /// The EtherType field (an 802.3 length when below 0x0600).
    pub fn ethertype(&self) -> u16 {
        be16(self.buf, field::ETHERTYPE)
    }

    /// The whole frame.
    pub fn bytes(&self) -> &'a [u8] {
        self.buf
    }

    /// The 14 header bytes.
    pub fn header(&self) -> &'a [u8] {
        &self.buf[..HEADER_LEN]
    }

    /// Everything after the 14-byte header (VLAN tags included, if any).
    pub fn payload(&self) -> &'a [u8] {
        &self.buf[field::PAYLOAD..]
    }
}

/// A writable view of an Ethernet II header, at least [`HEADER_LEN`] bytes long.
#[derive(Debug, PartialEq, Eq)]
pub struct FrameMut<'a> {
    buf: &'a mut [u8],
}

impl<'a> FrameMut<'a> {
    /// Wrap `buf` (a whole frame) for writing.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 14 bytes.
    pub fn new_checked(buf: &'a mut [u8]) -> Result<Self> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(FrameMut { buf })
    }
    /// The read view of the same bytes.
    pub fn as_frame(&self) -> Frame<'_> {
        Frame { buf: self.buf }
    }
    /// Set the destination MAC address.
    pub fn set_dst(&mut self, mac: [u8; 6]) {
        self.buf[field::DST].copy_from_slice(&mac);
    }
    /// Set the source MAC address.
    pub fn set_src(&mut self, mac: [u8; 6]) {
        self.buf[field::SRC].copy_from_slice(&mac);
    }
    /// Set the EtherType.
    pub fn set_ethertype(&mut self, t: u16) {
        put16(self.buf, field::ETHERTYPE, t);
    }
    /// Everything after the 14-byte header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buf[field::PAYLOAD..]
    }
}

/// The fields of an Ethernet II header, for building one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Destination MAC address.
    pub dst: [u8; 6],
    /// Source MAC address.
    pub src: [u8; 6],
    /// EtherType (see [`ethertype`]).
    pub ethertype: u16,
}

impl Repr {
    /// The 14 header bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[field::DST].copy_from_slice(&self.dst);
        b[field::SRC].copy_from_slice(&self.src);
        put16(&mut b, field::ETHERTYPE, self.ethertype);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: [u8; 16] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, // dst
        0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, // src
        0x86, 0xdd, // IPv6
        0x60, 0x00,
    ];

    #[test]
    fn fields() {
        let f = Frame::new_checked(&FRAME).unwrap();
        assert_eq!(f.dst(), [0x00, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!(f.src(), [0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb]);
        assert_eq!(f.ethertype(), ethertype::IPV6);
        assert_eq!(f.payload(), &[0x60, 0x00]);
    }

    #[test]
    fn short_frame_is_rejected() {
        assert_eq!(Frame::new_checked(&FRAME[..13]), Err(Error::Truncated));
        assert!(
            Frame::new_checked(&FRAME[..14])
                .unwrap()
                .payload()
                .is_empty()
        );
    }

    #[test]
    fn kernel_protocol_of_802_3_frames() {
        assert_eq!(kernel_protocol(0x0800, &[]), 0x0800);
        assert_eq!(kernel_protocol(0x0600, &[]), 0x0600);
        // 802.3 length with raw-IPX 0xffff payload -> ETH_P_802_3, else ETH_P_802_2.
        assert_eq!(kernel_protocol(0x002e, &[0xff, 0xff, 0]), 0x0001);
        assert_eq!(kernel_protocol(0x002e, &[0xaa, 0xaa, 3]), 0x0004);
        assert_eq!(kernel_protocol(0x05ff, &[0xff]), 0x0004);
    }

    #[test]
    fn tpids() {
        assert!(is_vlan_tpid(0x8100) && is_vlan_tpid(0x88a8) && is_vlan_tpid(0x9100));
        assert!(!is_vlan_tpid(0x8847));
        assert!(is_kernel_vlan_tpid(0x88a8) && !is_kernel_vlan_tpid(0x9100));
    }

    #[test]
    fn write_and_build() {
        let mut f = FRAME;
        let mut w = FrameMut::new_checked(&mut f).unwrap();
        w.set_dst([0xff; 6]);
        w.set_src([2, 0, 0, 0, 0, 1]);
        w.set_ethertype(ethertype::ARP);
        w.payload_mut()[0] = 0x61;
        assert_eq!(w.as_frame().ethertype(), 0x0806);
        assert_eq!(
            f,
            [
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06, 0x61, 0x00
            ]
        );
        let r = Repr {
            dst: [0xff; 6],
            src: [2, 0, 0, 0, 0, 1],
            ethertype: ethertype::ARP,
        };
        assert_eq!(r.to_bytes(), f[..14]);
        assert_eq!(FrameMut::new_checked(&mut [0u8; 13]), Err(Error::Truncated));
    }
}
