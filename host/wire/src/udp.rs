//! UDP header (RFC 768). UDP-Lite (RFC 3828) has the same layout, its length field holding the
//! checksum coverage. [`PacketMut`] writes ports, length and checksum; [`Repr`] builds a
//! header.

use std::net::Ipv6Addr;

use crate::bytes::{be16, put16};
use crate::checksum;
use crate::{Error, Result};

/// Byte offsets of the UDP header fields.
pub mod field {
    /// Source port.
    pub const SRC_PORT: usize = 0;
    /// Destination port.
    pub const DST_PORT: usize = 2;
    /// Length of header and data in bytes.
    pub const LENGTH: usize = 4;
    /// Checksum (0 = none over IPv4).
    pub const CHECKSUM: usize = 6;
    /// First byte after the header.
    pub const PAYLOAD: usize = 8;
}

/// Length in bytes of the UDP header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// VXLAN's IANA-assigned UDP port.
pub const PORT_VXLAN: u16 = 4789;
/// Geneve's IANA-assigned UDP port.
pub const PORT_GENEVE: u16 = 6081;

/// A view of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    buf: &'a [u8],
}

impl<'a> Packet<'a> {
    /// Wrap `buf`, which starts at the UDP header.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 8 bytes.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Packet { buf })
    }

    /// Source port, `udp sport`.
    pub fn src_port(&self) -> u16 {
        be16(self.buf, field::SRC_PORT)
    }
    /// Destination port, `udp dport`.
    pub fn dst_port(&self) -> u16 {
        be16(self.buf, field::DST_PORT)
    }
    /// Length field in bytes, `udp length` (not checked against the buffer).
    pub fn length(&self) -> u16 {
        be16(self.buf, field::LENGTH)
    }
    /// Checksum as carried (not verified).
    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }
    /// Bytes after the header, to the end of the buffer.
    pub fn payload(&self) -> &'a [u8] {
        &self.buf[field::PAYLOAD..]
    }
}

/// The UDP checksum `c` after an edit whose checksum delta is `delta` ([`checksum::delta`];
/// RFC 1624 eqn. 3), with RFC 768's zero rule: a checksum of 0 (none was computed) stays 0,
/// and a result of 0 is sent as 0xffff (the kernel's `CSUM_MANGLED_0`, as `udp_manip_pkt` and
/// `nf_flow_nat_port_udp` do).
pub fn apply_checksum_delta(c: u16, delta: u64) -> u16 {
    if c == 0 {
        return 0;
    }
    match checksum::apply(c, delta) {
        0 => 0xffff,
        n => n,
    }
}

/// A writable view of a UDP header.
#[derive(Debug, PartialEq, Eq)]
pub struct PacketMut<'a> {
    buf: &'a mut [u8],
}

impl<'a> PacketMut<'a> {
    /// Wrap `buf`, which starts at the UDP header, for writing. For
    /// [`PacketMut::fill_checksum_v6`] it must end where the datagram ends.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 8 bytes.
    pub fn new_checked(buf: &'a mut [u8]) -> Result<Self> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(PacketMut { buf })
    }
    /// Checksum as carried.
    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }
    /// Set the source port.
    pub fn set_src_port(&mut self, p: u16) {
        put16(self.buf, field::SRC_PORT, p);
    }
    /// Set the destination port.
    pub fn set_dst_port(&mut self, p: u16) {
        put16(self.buf, field::DST_PORT, p);
    }
    /// Set the length field in bytes.
    pub fn set_length(&mut self, len: u16) {
        put16(self.buf, field::LENGTH, len);
    }
    /// Set the checksum.
    pub fn set_checksum(&mut self, c: u16) {
        put16(self.buf, field::CHECKSUM, c);
    }
    /// Compute the checksum over the IPv6 pseudo-header (RFC 8200 8.1, from `src` to `dst`,
    /// the length the whole buffer) and the buffer, and write it; a result of 0 is written as
    /// 0xffff (RFC 8200 8.1: over IPv6 the checksum is mandatory).
    pub fn fill_checksum_v6(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let len = u32::try_from(self.buf.len()).unwrap_or(u32::MAX);
        let pseudo = checksum::pseudo_v6(src, dst, len, crate::ipv4::protocol::UDP);
        self.set_checksum(0);
        let c = match !checksum::sum(u64::from(pseudo), self.buf) {
            0 => 0xffff,
            c => c,
        };
        self.set_checksum(c);
    }
}

/// The fields of a UDP header, for building one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Length of header and data in bytes.
    pub length: u16,
    /// Checksum (0: none, IPv4 only).
    pub checksum: u16,
}

impl Repr {
    /// The 8 header bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        put16(&mut b, field::SRC_PORT, self.src_port);
        put16(&mut b, field::DST_PORT, self.dst_port);
        put16(&mut b, field::LENGTH, self.length);
        put16(&mut b, field::CHECKSUM, self.checksum);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DNS: [u8; 10] = [0xc0, 0x01, 0x00, 0x35, 0x00, 0x0a, 0xbe, 0xef, 0x12, 0x34];

    #[test]
    fn fields() {
        let u = Packet::new_checked(&DNS).unwrap();
        assert_eq!(
            (u.src_port(), u.dst_port(), u.length(), u.checksum()),
            (49153, 53, 10, 0xbeef)
        );
        assert_eq!(u.payload(), &[0x12, 0x34]);
        assert_eq!(Packet::new_checked(&DNS[..7]), Err(Error::Truncated));
    }

    #[test]
    fn repr_and_writes() {
        let r = Repr {
            src_port: 49153,
            dst_port: 53,
            length: 10,
            checksum: 0xbeef,
        };
        assert_eq!(r.to_bytes(), DNS[..8]);
        let mut d = DNS;
        let mut w = PacketMut::new_checked(&mut d).unwrap();
        w.set_src_port(53);
        w.set_dst_port(49153);
        w.set_length(9);
        w.set_checksum(0);
        assert_eq!(d, [0x00, 0x35, 0xc0, 0x01, 0x00, 0x09, 0, 0, 0x12, 0x34]);
        assert_eq!(PacketMut::new_checked(&mut d[..7]), Err(Error::Truncated));
    }

    /// The UDP/IPv6 datagram a Linux 6.18 stack sent (fd77::1 -> fd78::1, 25 bytes, checksum
    /// 0x5c88 once the kernel completed it): filled from scratch, the same checksum.
    #[test]
    fn v6_checksum_of_a_captured_datagram() {
        let mut u = [
            0x87, 0xa9, 0x23, 0x28, 0x00, 0x19, 0, 0, b'w', b'a', b's', b'p', b' ', b'p', b'a',
            b'r', b't', b'i', b'a', b'l', b' ', b'u', b'd', b'p', b'6',
        ];
        let (s, d) = ("fd77::1".parse().unwrap(), "fd78::1".parse().unwrap());
        PacketMut::new_checked(&mut u)
            .unwrap()
            .fill_checksum_v6(&s, &d);
        assert_eq!(Packet::new_checked(&u).unwrap().checksum(), 0x5c88);
    }

    #[test]
    fn zero_rule() {
        // No checksum stays none.
        assert_eq!(
            apply_checksum_delta(0, checksum::delta(&[0, 1], &[0, 2])),
            0
        );
        assert_eq!(
            apply_checksum_delta(1, checksum::delta(&[0, 0], &[0, 0])),
            1
        );
        // ~1 + ~0xffff + 1 = 0xffff: the complement is 0, sent as 0xffff.
        let c = 0x0001;
        let d = checksum::delta(&[0xff, 0xff], &[0, 1]);
        assert_eq!(checksum::apply(c, d), 0);
        assert_eq!(apply_checksum_delta(c, d), 0xffff);
    }

    proptest::proptest! {
        /// A port rewrite updated incrementally equals the checksum recomputed (up to the
        /// zero rule's 0xffff).
        #[test]
        fn incremental_port_equals_recompute(
            mut seg in proptest::collection::vec(proptest::num::u8::ANY, 8..40),
            port in proptest::num::u16::ANY,
        ) {
            let (s, d) = ("2001:db8::1".parse().unwrap(), "2001:db8::2".parse().unwrap());
            PacketMut::new_checked(&mut seg).unwrap().fill_checksum_v6(&s, &d);
            let c = Packet::new_checked(&seg).unwrap().checksum();
            let old = seg[..2].to_vec();
            let mut w = PacketMut::new_checked(&mut seg).unwrap();
            w.set_src_port(port);
            w.set_checksum(apply_checksum_delta(c, checksum::delta(&old, &port.to_be_bytes())));
            let inc = Packet::new_checked(&seg).unwrap().checksum();
            PacketMut::new_checked(&mut seg).unwrap().fill_checksum_v6(&s, &d);
            proptest::prop_assert_eq!(inc, Packet::new_checked(&seg).unwrap().checksum());
        }
    }
}
