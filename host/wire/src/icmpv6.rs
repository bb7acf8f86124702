//! ICMPv6 (RFC 4443): type, code, checksum, and the echo identifier and sequence.

use crate::bytes::{be16, get_be16};
use crate::{Error, Result};

/// Byte offsets of the ICMPv6 header fields.
pub mod field {
    /// Type, `icmpv6 type`.
    pub const TYPE: usize = 0;
    /// Code, `icmpv6 code`.
    pub const CODE: usize = 1;
    /// Checksum.
    pub const CHECKSUM: usize = 2;
    /// Echo identifier (echo request/reply only).
    pub const ECHO_IDENT: usize = 4;
    /// Echo sequence number (echo request/reply only).
    pub const ECHO_SEQ: usize = 6;
}

/// Length in bytes of the part every ICMPv6 message has (type, code, checksum).
pub const MIN_HEADER_LEN: usize = 4;

/// Well-known ICMPv6 types. Any other value is kept as a plain number.
pub mod msg_type {
    /// Destination unreachable.
    pub const DEST_UNREACHABLE: u8 = 1;
    /// Packet too big.
    pub const PACKET_TOO_BIG: u8 = 2;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 3;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 129;
    /// Multicast listener report v2.
    pub const MLD2_REPORT: u8 = 143;
    /// Router solicitation.
    pub const ROUTER_SOLICIT: u8 = 133;
    /// Router advertisement.
    pub const ROUTER_ADVERT: u8 = 134;
    /// Neighbour solicitation.
    pub const NEIGHBOUR_SOLICIT: u8 = 135;
    /// Neighbour advertisement.
    pub const NEIGHBOUR_ADVERT: u8 = 136;
}

/// A view of an ICMPv6 message at least 4 bytes long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    buf: &'a [u8],
}

impl<'a> Packet<'a> {
    /// Wrap `buf`, which starts at the ICMPv6 header.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 4 bytes.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Packet { buf })
    }
    /// Message type.
    pub fn msg_type(&self) -> u8 {
        self.buf[field::TYPE]
    }
    /// Message code.
    pub fn code(&self) -> u8 {
        self.buf[field::CODE]
    }
    /// Checksum as carried (not verified).
    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }
    /// Echo identifier, or `None` when the message is not an echo or is cut off.
    pub fn echo_ident(&self) -> Option<u16> {
        self.is_echo()
            .then(|| get_be16(self.buf, field::ECHO_IDENT))
            .flatten()
    }
    /// Echo sequence number, or `None` when the message is not an echo or is cut off.
    pub fn echo_seq(&self) -> Option<u16> {
        self.is_echo()
            .then(|| get_be16(self.buf, field::ECHO_SEQ))
            .flatten()
    }
    fn is_echo(&self) -> bool {
        matches!(
            self.msg_type(),
            msg_type::ECHO_REQUEST | msg_type::ECHO_REPLY
        )
    }
    /// Bytes after the 4-byte common part (rest of header and data).
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[MIN_HEADER_LEN..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_request() {
        let b = [128, 0, 0x12, 0x34, 0x00, 0x07, 0x01, 0x00];
        let p = Packet::new_checked(&b).unwrap();
        assert_eq!((p.msg_type(), p.code(), p.checksum()), (128, 0, 0x1234));
        assert_eq!((p.echo_ident(), p.echo_seq()), (Some(7), Some(256)));
        assert_eq!(Packet::new_checked(&b[..3]), Err(Error::Truncated));
    }

    #[test]
    fn type_8_is_not_an_echo_in_icmpv6() {
        let p = Packet::new_checked(&[8, 0, 0, 0, 0, 1, 0, 2]).unwrap();
        assert_eq!(p.echo_ident(), None);
        let p = Packet::new_checked(&[135, 0, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(p.msg_type(), msg_type::NEIGHBOUR_SOLICIT);
    }
}
