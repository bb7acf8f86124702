//! IPv6 fixed header (RFC 8200 section 3). Extension headers and the walk that finds the
//! transport header behind them are in [`crate::ipv6_ext`]. [`PacketMut`] writes the hop limit,
//! addresses and payload length; [`Repr`] builds a header.

use std::net::Ipv6Addr;

use crate::bytes::{array, be16, be32, put16};
use crate::{Error, Result};

/// Byte offsets of the IPv6 header fields.
pub mod field {
    use core::ops::Range;
    /// Version (4 bits), traffic class (8 bits), flow label (20 bits).
    pub const VER_TC_FLOW: usize = 0;
    /// Payload length in bytes (everything after this 40-byte header, extension headers
    /// included).
    pub const PAYLOAD_LEN: usize = 4;
    /// Next header.
    pub const NEXT_HEADER: usize = 6;
    /// Hop limit.
    pub const HOP_LIMIT: usize = 7;
    /// Source address.
    pub const SRC: Range<usize> = 8..24;
    /// Destination address.
    pub const DST: Range<usize> = 24..40;
    /// First byte after the header.
    pub const PAYLOAD: usize = 40;
}

/// Length in bytes of the fixed header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A view of an IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    buf: &'a [u8],
}

impl<'a> Packet<'a> {
    /// Wrap `buf`, which starts at the IPv6 header and may run past the packet.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 40 bytes.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Packet { buf })
    }

    /// The bytes the view was built over, from the IPv6 header to the end of the buffer.
    pub fn bytes(&self) -> &'a [u8] {
        self.buf
    }
    /// Version field (6 for IPv6; not checked by the view).
    pub fn version(&self) -> u8 {
        self.buf[field::VER_TC_FLOW] >> 4
    }
    /// Traffic class (8 bits).
    pub fn traffic_class(&self) -> u8 {
        ((be16(self.buf, field::VER_TC_FLOW) >> 4) & 0xff) as u8
    }
    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        be32(self.buf, field::VER_TC_FLOW) & 0x000f_ffff
    }
    /// Payload length field in bytes (0 for a jumbogram).
    pub fn payload_len(&self) -> u16 {
        be16(self.buf, field::PAYLOAD_LEN)
    }
    /// Next header, `ip6 nexthdr` (the first extension header's type, if any).
    pub fn next_header(&self) -> u8 {
        self.buf[field::NEXT_HEADER]
    }
    /// Hop limit, `ip6 hoplimit`.
    pub fn hop_limit(&self) -> u8 {
        self.buf[field::HOP_LIMIT]
    }
    /// Source address.
    pub fn src(&self) -> [u8; 16] {
        array(self.buf, field::SRC.start)
    }
    /// Destination address.
    pub fn dst(&self) -> [u8; 16] {
        array(self.buf, field::DST.start)
    }
    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.src())
    }
    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.dst())
    }
    /// The payload: `payload_len` bytes after the header, cut at the end of the buffer; the
    /// whole rest of the buffer when `payload_len` is 0 (jumbogram or broken).
    pub fn payload(&self) -> &'a [u8] {
        let rest = &self.buf[HEADER_LEN..];
        match self.payload_len() {
            0 => rest,
            n => &rest[..usize::from(n).min(rest.len())],
        }
    }
}

/// A writable view of an IPv6 fixed header (IPv6 has no header checksum: every write stands
/// alone; the upper-layer checksums over the pseudo-header are the caller's).
#[derive(Debug, PartialEq, Eq)]
pub struct PacketMut<'a> {
    buf: &'a mut [u8],
}

impl<'a> PacketMut<'a> {
    /// Wrap `buf`, which starts at the IPv6 header, for writing.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 40 bytes.
    pub fn new_checked(buf: &'a mut [u8]) -> Result<Self> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(PacketMut { buf })
    }
    /// Next header.
    pub fn next_header(&self) -> u8 {
        self.buf[field::NEXT_HEADER]
    }
    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buf[field::HOP_LIMIT]
    }
    /// Source address.
    pub fn src(&self) -> [u8; 16] {
        array(self.buf, field::SRC.start)
    }
    /// Destination address.
    pub fn dst(&self) -> [u8; 16] {
        array(self.buf, field::DST.start)
    }
    /// Set the payload length in bytes.
    pub fn set_payload_len(&mut self, len: u16) {
        put16(self.buf, field::PAYLOAD_LEN, len);
    }
    /// Set the hop limit.
    pub fn set_hop_limit(&mut self, h: u8) {
        self.buf[field::HOP_LIMIT] = h;
    }
    /// Decrement the hop limit by one (0 wraps to 255), as `ip6_forward`'s `hop_limit--`.
    pub fn decrement_hop_limit(&mut self) {
        self.buf[field::HOP_LIMIT] = self.buf[field::HOP_LIMIT].wrapping_sub(1);
    }
    /// Raise the hop limit by one (255 wraps to 0).
    pub fn increment_hop_limit(&mut self) {
        self.buf[field::HOP_LIMIT] = self.buf[field::HOP_LIMIT].wrapping_add(1);
    }
    /// Set the source address.
    pub fn set_src(&mut self, a: [u8; 16]) {
        self.buf[field::SRC].copy_from_slice(&a);
    }
    /// Set the destination address.
    pub fn set_dst(&mut self, a: [u8; 16]) {
        self.buf[field::DST].copy_from_slice(&a);
    }
}

/// The fields of an IPv6 fixed header with traffic class and flow label 0, for building one
/// (RFC 8200 section 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Next header.
    pub next_header: u8,
    /// Payload length in bytes.
    pub payload_len: u16,
    /// Hop limit.
    pub hop_limit: u8,
}

impl Repr {
    /// The 40 header bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[field::VER_TC_FLOW] = 0x60;
        put16(&mut h, field::PAYLOAD_LEN, self.payload_len);
        h[field::NEXT_HEADER] = self.next_header;
        h[field::HOP_LIMIT] = self.hop_limit;
        h[field::SRC].copy_from_slice(&self.src.octets());
        h[field::DST].copy_from_slice(&self.dst.octets());
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TC 0xb8, flow 0x12345, payload 4, next UDP, hop limit 64, 2001:db8::1 -> ff02::fb.
    const PKT: [u8; 46] = [
        0x6b, 0x81, 0x23, 0x45, 0x00, 0x04, 17, 64, //
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, //
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xfb, //
        1, 2, 3, 4, 0, 0,
    ];

    #[test]
    fn fields() {
        let p = Packet::new_checked(&PKT).unwrap();
        assert_eq!(
            (p.version(), p.traffic_class(), p.flow_label()),
            (6, 0xb8, 0x12345)
        );
        assert_eq!(
            (p.payload_len(), p.next_header(), p.hop_limit()),
            (4, 17, 64)
        );
        assert_eq!(p.src()[..4], [0x20, 0x01, 0x0d, 0xb8]);
        assert_eq!(p.src()[15], 1);
        assert_eq!(p.dst()[15], 0xfb);
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
    }

    #[test]
    fn bounds() {
        assert_eq!(Packet::new_checked(&PKT[..39]), Err(Error::Truncated));
        let p = Packet::new_checked(&PKT[..42]).unwrap();
        assert_eq!(p.payload(), &[1, 2]);
        let mut jumbo = PKT;
        jumbo[5] = 0;
        assert_eq!(Packet::new_checked(&jumbo).unwrap().payload().len(), 6);
    }

    #[test]
    fn repr_and_writes() {
        let r = Repr {
            src: "2001:db8::1".parse().unwrap(),
            dst: "ff02::fb".parse().unwrap(),
            next_header: 17,
            payload_len: 4,
            hop_limit: 64,
        };
        let b = r.to_bytes();
        // PKT without its traffic class and flow label.
        assert_eq!(&b[..4], &[0x60, 0, 0, 0]);
        assert_eq!(b[4..], PKT[4..40]);
        let p = Packet::new_checked(&b).unwrap();
        assert_eq!((p.src_addr(), p.dst_addr()), (r.src, r.dst));
        let mut f = PKT;
        let mut w = PacketMut::new_checked(&mut f).unwrap();
        w.decrement_hop_limit();
        assert_eq!(w.hop_limit(), 63);
        w.increment_hop_limit();
        w.set_payload_len(6);
        w.set_src(r.dst.octets());
        w.set_dst(r.src.octets());
        w.set_hop_limit(0);
        w.decrement_hop_limit();
        assert_eq!((f[4], f[5], f[7]), (0, 6, 255));
        assert_eq!(f[8..24], b[24..40]);
        assert_eq!(f[24..40], b[8..24]);
        assert_eq!(
            PacketMut::new_checked(&mut [0u8; 39]),
            Err(Error::Truncated)
        );
    }
}
