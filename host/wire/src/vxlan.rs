//! VXLAN header (RFC 7348), UDP port 4789: flags (I bit = VNI valid), VNI. Reserved fields are
//! exposed but never checked: group-policy (GBP) and other extensions put data there, and
//! receivers such as Suricata decode such packets anyway.

use crate::bytes::be24;
use crate::{Error, Result};

/// Byte offsets of the VXLAN header fields.
pub mod field {
    /// Flags byte (bit 3 = I).
    pub const FLAGS: usize = 0;
    /// Reserved 24 bits (GBP: flags and group policy id).
    pub const RESERVED1: usize = 1;
    /// VXLAN network identifier (24 bits).
    pub const VNI: usize = 4;
    /// Reserved 8 bits.
    pub const RESERVED2: usize = 7;
    /// First byte after the header (an Ethernet frame).
    pub const PAYLOAD: usize = 8;
}

/// Length in bytes of the VXLAN header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// The I flag: the VNI is valid.
pub const FLAG_I: u8 = 0x08;

/// A view of a VXLAN header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    buf: &'a [u8],
}

impl<'a> Header<'a> {
    /// Wrap `buf`, which starts at the VXLAN header (the outer UDP payload).
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 8 bytes.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Header { buf })
    }
    /// Flags byte.
    pub fn flags(&self) -> u8 {
        self.buf[field::FLAGS]
    }
    /// Whether the I flag is set.
    pub fn vni_valid(&self) -> bool {
        self.flags() & FLAG_I != 0
    }
    /// The 24 reserved bits after the flags.
    pub fn reserved1(&self) -> u32 {
        be24(self.buf, field::RESERVED1)
    }
    /// VXLAN network identifier.
    pub fn vni(&self) -> u32 {
        be24(self.buf, field::VNI)
    }
    /// The last reserved byte.
    pub fn reserved2(&self) -> u8 {
        self.buf[field::RESERVED2]
    }
    /// The encapsulated Ethernet frame (to the end of the buffer).
    pub fn payload(&self) -> &'a [u8] {
        &self.buf[field::PAYLOAD..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vni_100() {
        let b = [0x08, 0, 0, 0, 0x00, 0x00, 0x64, 0, 0xff];
        let h = Header::new_checked(&b).unwrap();
        assert_eq!((h.flags(), h.vni_valid(), h.vni()), (0x08, true, 100));
        assert_eq!((h.reserved1(), h.reserved2()), (0, 0));
        assert_eq!(h.payload(), &[0xff]);
        assert_eq!(Header::new_checked(&b[..7]), Err(Error::Truncated));
    }

    #[test]
    fn non_zero_reserved_fields_are_kept() {
        // GBP-style: G bit and group id 0x1234 in the first reserved field, VNI 0xfa16.
        let b = [0x88, 0x00, 0x12, 0x34, 0x00, 0xfa, 0x16, 0x5a];
        let h = Header::new_checked(&b).unwrap();
        assert!(h.vni_valid());
        assert_eq!(
            (h.reserved1(), h.vni(), h.reserved2()),
            (0x1234, 0xfa16, 0x5a)
        );
    }
}
