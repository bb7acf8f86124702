//! ICMP for IPv4 (RFC 792): type, code, checksum, and the echo identifier and sequence.
//! [`PacketMut`] writes the checksum; [`Repr`] builds the 8-byte header of an error or echo.

use crate::bytes::{be16, get_be16, put16, put32};
use crate::checksum;
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
    /// The four bytes after the checksum (an error's unused word, pointer or MTU; an echo's
    /// identifier and sequence).
    pub const REST: usize = 4;
    /// An error's quoted packet starts here.
    pub const QUOTE: usize = 8;
}

/// Length in bytes of the header of an error or echo message (type, code, checksum, and four
/// more bytes).
pub const HEADER_LEN: usize = field::QUOTE;

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

/// Whether type `t` is an error message (the kernel's `icmp_pointers[].error`: destination
/// unreachable, source quench, redirect, time exceeded, parameter problem).
pub fn is_error(t: u8) -> bool {
    matches!(t, 3 | 4 | 5 | 11 | 12)
}

/// Whether messages of type `t` carry an identifier at [`field::ECHO_IDENT`] that NAT maps
/// (the kernel's `icmp_pkt_to_tuple`: echo, timestamp, information and address mask requests
/// and replies).
pub fn has_ident(t: u8) -> bool {
    matches!(t, 0 | 8 | 13 | 14 | 15 | 16 | 17 | 18)
}

/// A writable view of an ICMP message at least 4 bytes long, up to the end of the message.
#[derive(Debug, PartialEq, Eq)]
pub struct PacketMut<'a> {
    buf: &'a mut [u8],
}

impl<'a> PacketMut<'a> {
    /// Wrap `buf`, the whole message, for writing.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 4 bytes.
    pub fn new_checked(buf: &'a mut [u8]) -> Result<Self> {
        if buf.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(PacketMut { buf })
    }
    /// Set the checksum.
    pub fn set_checksum(&mut self, c: u16) {
        put16(self.buf, field::CHECKSUM, c);
    }
    /// Compute the checksum over the whole buffer (the message) and write it (RFC 792).
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buf);
        self.set_checksum(c);
    }
}

/// The 8-byte header of an ICMP error or echo, for building one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Message type (see [`msg_type`]).
    pub msg_type: u8,
    /// Message code.
    pub code: u8,
    /// The four bytes after the checksum, as one big-endian word.
    pub rest: u32,
}

impl Repr {
    /// The 8 header bytes, checksum 0 (fill it with [`PacketMut::fill_checksum`] once the
    /// rest of the message follows).
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[field::TYPE] = self.msg_type;
        b[field::CODE] = self.code;
        put32(&mut b, field::REST, self.rest);
        b
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

    /// The echo request of `echo_request` rebuilt, its checksum filled: 0x96fc (by hand:
    /// ~(0x0800 + 0x0001 + 0x0002 + 0x6100)).
    #[test]
    fn build_and_checksum() {
        let mut m = [0u8; 9];
        m[..8].copy_from_slice(
            &Repr {
                msg_type: msg_type::ECHO_REQUEST,
                code: 0,
                rest: 0x0001_0002,
            }
            .to_bytes(),
        );
        m[8] = 0x61;
        PacketMut::new_checked(&mut m).unwrap().fill_checksum();
        assert_eq!(m, [8, 0, 0x96, 0xfc, 0x00, 0x01, 0x00, 0x02, 0x61]);
        assert_eq!(checksum::checksum(&m), 0);
        assert!(is_error(11) && !is_error(8) && has_ident(13) && !has_ident(3));
        assert_eq!(PacketMut::new_checked(&mut m[..3]), Err(Error::Truncated));
    }
}
