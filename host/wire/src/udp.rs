//! UDP header (RFC 768).

use crate::bytes::be16;
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
}
