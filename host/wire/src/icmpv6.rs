//! ICMPv6 (RFC 4443): type, code, checksum, and the echo identifier and sequence.
//! [`PacketMut`] writes the checksum over the IPv6 pseudo-header (RFC 4443 2.3); [`Repr`]
//! builds the 8-byte header of an error or echo.

use std::net::Ipv6Addr;

use crate::bytes::{be16, get_be16, put16, put32};
use crate::checksum;
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
    /// The four bytes after the checksum (an error's unused word, pointer or MTU; an echo's
    /// identifier and sequence).
    pub const REST: usize = 4;
    /// An error's quoted packet starts here.
    pub const QUOTE: usize = 8;
}

/// Length in bytes of the header of an error or echo message (type, code, checksum, and four
/// more bytes).
pub const HEADER_LEN: usize = field::QUOTE;

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

/// Whether type `t` is an error message (RFC 4443 2.1: types 0 to 127).
pub fn is_error(t: u8) -> bool {
    t < 128
}

/// Whether messages of type `t` carry an identifier at [`field::ECHO_IDENT`] that NAT maps
/// (the kernel's `icmpv6_pkt_to_tuple`: echo request and reply, node information query and
/// response).
pub fn has_ident(t: u8) -> bool {
    matches!(t, 128 | 129 | 139 | 140)
}

/// A writable view of an ICMPv6 message at least 4 bytes long, up to the end of the message.
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
    /// Compute the checksum over the IPv6 pseudo-header (from `src` to `dst`, the length the
    /// whole buffer, next header 58) and the message, and write it (RFC 4443 2.3).
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let c = checksum::icmpv6(src, dst, self.buf);
        self.set_checksum(c);
    }
}

/// The 8-byte header of an ICMPv6 error or echo, for building one.
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

    /// An echo request from fd00:1::2 to fd00:2::2 (identifier 1, sequence 1, no data): built,
    /// checksummed, and verified over the pseudo-header.
    #[test]
    fn build_and_checksum() {
        let mut m = Repr {
            msg_type: msg_type::ECHO_REQUEST,
            code: 0,
            rest: 0x0001_0001,
        }
        .to_bytes();
        assert_eq!(m, [128, 0, 0, 0, 0, 1, 0, 1]);
        let (s, d): (Ipv6Addr, Ipv6Addr) =
            ("fd00:1::2".parse().unwrap(), "fd00:2::2".parse().unwrap());
        PacketMut::new_checked(&mut m)
            .unwrap()
            .fill_checksum(&s, &d);
        let p = checksum::pseudo_v6(&s, &d, 8, 58);
        assert_eq!(checksum::sum(u64::from(p), &m), 0xffff);
        assert_eq!(Packet::new_checked(&m).unwrap().echo_ident(), Some(1));
        assert!(is_error(3) && !is_error(128) && has_ident(129) && !has_ident(135));
        assert_eq!(PacketMut::new_checked(&mut m[..3]), Err(Error::Truncated));
    }
}
