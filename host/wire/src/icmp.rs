//! ICMP for IPv4 (RFC 792): type, code, checksum, and the echo identifier and sequence.

use crate::bytes::{be16, get_be16};
use crate::{Error, Result};

/// Byte offsets of the ICMP header fields.
pub mod field {
    /// Type, `icmp type`.
    pub const TYPE: usize = 0;
    /// Code, `icmp code`.
    pub const CODE: usize = 1;
    /// Checksum.
    pub const CHECKSUM: usize = 2;
    /// Echo identifier (echo request/reply only).
    pub const ECHO_IDENT: usize = 4;
    /// Echo sequence number (echo request/reply only).
    pub const ECHO_SEQ: usize = 6;
}

/// Length in bytes of the part every ICMP message has (type, code, checksum).
pub const MIN_HEADER_LEN: usize = 4;

/// Well-known ICMP types. Any other value is kept as a plain number.
pub mod msg_type {
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 0;
    /// Destination unreachable.
    pub const DEST_UNREACHABLE: u8 = 3;
    /// Redirect.
    pub const REDIRECT: u8 = 5;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 8;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 11;
}

/// A view of an ICMP message at least 4 bytes long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    buf: &'a [u8],
}

impl<'a> Packet<'a> {
    /// Wrap `buf`, which starts at the ICMP header.
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
        let b = [8, 0, 0xf7, 0xfe, 0x00, 0x01, 0x00, 0x02, 0x61];
        let p = Packet::new_checked(&b).unwrap();
        assert_eq!((p.msg_type(), p.code(), p.checksum()), (8, 0, 0xf7fe));
        assert_eq!((p.echo_ident(), p.echo_seq()), (Some(1), Some(2)));
        assert_eq!(p.rest().len(), 5);
        // Cut after the identifier: the sequence number is missing, not a panic.
        let p = Packet::new_checked(&b[..6]).unwrap();
        assert_eq!((p.echo_ident(), p.echo_seq()), (Some(1), None));
        assert_eq!(Packet::new_checked(&b[..3]), Err(Error::Truncated));
    }

    #[test]
    fn unreachable_has_no_echo_fields() {
        let p = Packet::new_checked(&[3, 3, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!((p.msg_type(), p.code(), p.echo_ident()), (3, 3, None));
    }
}
