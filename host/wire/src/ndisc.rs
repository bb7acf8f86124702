//! Neighbour solicitation and advertisement (RFC 4861 sections 4.3 and 4.4): the ICMPv6
//! message (type 135 or 136) with its flags, target address and options (4.6; the link-layer
//! address options of 4.6.1 over Ethernet, RFC 2464 section 8). [`Message`] reads one;
//! [`Repr`] builds one (its checksum filled with [`crate::icmpv6::PacketMut::fill_checksum`]).

use std::net::Ipv6Addr;

use crate::bytes::array;
use crate::icmpv6;
use crate::{Error, Result};

/// Byte offsets of the message fields (from the start of the ICMPv6 header).
pub mod field {
    use core::ops::Range;
    /// An advertisement's flags (see [`super::flags`]); reserved in a solicitation.
    pub const FLAGS: usize = 4;
    /// Target address.
    pub const TARGET: Range<usize> = 8..24;
    /// Options start here.
    pub const OPTIONS: usize = 24;
}

/// Length in bytes of a message without options.
pub const MIN_LEN: usize = field::OPTIONS;

/// Flag bits of an advertisement (RFC 4861 4.4).
pub mod flags {
    /// Router.
    pub const ROUTER: u8 = 0x80;
    /// Solicited.
    pub const SOLICITED: u8 = 0x40;
    /// Override.
    pub const OVERRIDE: u8 = 0x20;
}

/// Option types (RFC 4861 4.6). Any other value is kept as a plain number.
pub mod option {
    /// Source link-layer address.
    pub const SOURCE_LL_ADDR: u8 = 1;
    /// Target link-layer address.
    pub const TARGET_LL_ADDR: u8 = 2;
}

/// Length in bytes of a link-layer address option carrying a MAC (type, length 1, 6 bytes).
pub const LL_OPTION_LEN: usize = 8;

/// A view of a neighbour solicitation or advertisement at least 24 bytes long. The view does
/// not judge the type, code or checksum: the caller validates (RFC 4861 7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    buf: &'a [u8],
}

impl<'a> Message<'a> {
    /// Wrap `buf`, the whole ICMPv6 message.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 24 bytes.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < MIN_LEN {
            return Err(Error::Truncated);
        }
        Ok(Message { buf })
    }
    /// ICMPv6 type (135 solicitation, 136 advertisement).
    pub fn msg_type(&self) -> u8 {
        self.buf[icmpv6::field::TYPE]
    }
    /// ICMPv6 code (0 for a valid message).
    pub fn code(&self) -> u8 {
        self.buf[icmpv6::field::CODE]
    }
    /// The advertisement's flags byte.
    pub fn flags(&self) -> u8 {
        self.buf[field::FLAGS]
    }
    /// Target address.
    pub fn target(&self) -> Ipv6Addr {
        Ipv6Addr::from(array::<16>(self.buf, field::TARGET.start))
    }
    /// Iterator over the options.
    pub fn options(&self) -> OptionIter<'a> {
        OptionIter {
            rest: &self.buf[field::OPTIONS..],
            malformed: false,
        }
    }
}

/// One option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdOption<'a> {
    /// Option type (see [`option`]).
    pub kind: u8,
    /// The whole option: type, length (in 8-byte units) and data.
    pub bytes: &'a [u8],
}

impl NdOption<'_> {
    /// The MAC of a link-layer address option at least 8 bytes long (its bytes 2 to 8).
    pub fn ll_addr(&self) -> Option<[u8; 6]> {
        let b = self.bytes.get(2..LL_OPTION_LEN)?;
        Some(array(b, 0))
    }
}

/// Iterator over the options (RFC 4861 4.6: type, length in 8-byte units, data). Stops when
/// fewer than 2 bytes remain, or at an option of length 0 or one that runs past the message,
/// which RFC 4861 7.1 makes the message invalid ([`OptionIter::malformed`]).
#[derive(Debug, Clone)]
pub struct OptionIter<'a> {
    rest: &'a [u8],
    malformed: bool,
}

impl OptionIter<'_> {
    /// Whether the walk stopped at an option of length 0 or one that runs past the message.
    pub fn malformed(&self) -> bool {
        self.malformed
    }
}

impl<'a> Iterator for OptionIter<'a> {
    type Item = NdOption<'a>;

    fn next(&mut self) -> Option<NdOption<'a>> {
        let (&kind, &units) = (self.rest.first()?, self.rest.get(1)?);
        let len = usize::from(units) * 8;
        if len == 0 || len > self.rest.len() {
            self.malformed = true;
            self.rest = &[];
            return None;
        }
        let (bytes, rest) = self.rest.split_at(len);
        self.rest = rest;
        Some(NdOption { kind, bytes })
    }
}

/// A neighbour solicitation or advertisement to build: type, flags (0 in a solicitation),
/// target, and at most one link-layer address option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// [`icmpv6::msg_type::NEIGHBOUR_SOLICIT`] or [`icmpv6::msg_type::NEIGHBOUR_ADVERT`].
    pub msg_type: u8,
    /// Flags (see [`flags`]).
    pub flags: u8,
    /// Target address.
    pub target: Ipv6Addr,
    /// A link-layer address option: (its type, the MAC).
    pub ll_option: Option<(u8, [u8; 6])>,
}

impl Repr {
    /// Length in bytes of the message.
    pub fn len(&self) -> usize {
        MIN_LEN
            + if self.ll_option.is_some() {
                LL_OPTION_LEN
            } else {
                0
            }
    }

    /// Never true: a message is at least 24 bytes.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Write the message into `buf[..self.len()]`, code and checksum 0.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than the message; nothing is written then.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let buf = buf.get_mut(..self.len()).ok_or(Error::Truncated)?;
        buf.fill(0);
        buf[icmpv6::field::TYPE] = self.msg_type;
        buf[field::FLAGS] = self.flags;
        buf[field::TARGET].copy_from_slice(&self.target.octets());
        if let Some((kind, mac)) = self.ll_option {
            let o = &mut buf[field::OPTIONS..];
            o[0] = kind;
            o[1] = (LL_OPTION_LEN / 8) as u8;
            o[2..LL_OPTION_LEN].copy_from_slice(&mac);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The advertisement Linux 6.18 sent for fd00:1::1 (router, solicited, override; target
    /// link-layer address 02:00:00:00:01:01), checksum left 0.
    const NA: [u8; 32] = [
        136, 0, 0, 0, 0xe0, 0, 0, 0, //
        0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, //
        2, 1, 2, 0, 0, 0, 1, 1,
    ];

    #[test]
    fn reads_an_advertisement() {
        let m = Message::new_checked(&NA).unwrap();
        assert_eq!((m.msg_type(), m.code(), m.flags()), (136, 0, 0xe0));
        assert_eq!(m.target(), "fd00:1::1".parse::<Ipv6Addr>().unwrap());
        let mut it = m.options();
        let o = it.next().unwrap();
        assert_eq!((o.kind, o.ll_addr()), (2, Some([2, 0, 0, 0, 1, 1])));
        assert_eq!(it.next(), None);
        assert!(!it.malformed());
        assert_eq!(Message::new_checked(&NA[..23]), Err(Error::Truncated));
    }

    #[test]
    fn builds_it_back() {
        let r = Repr {
            msg_type: icmpv6::msg_type::NEIGHBOUR_ADVERT,
            flags: flags::ROUTER | flags::SOLICITED | flags::OVERRIDE,
            target: "fd00:1::1".parse().unwrap(),
            ll_option: Some((option::TARGET_LL_ADDR, [2, 0, 0, 0, 1, 1])),
        };
        let mut b = [0xaa; 33];
        r.emit(&mut b).unwrap();
        assert_eq!(b[..32], NA);
        assert_eq!(b[32], 0xaa);
        let ns = Repr {
            msg_type: icmpv6::msg_type::NEIGHBOUR_SOLICIT,
            flags: 0,
            ll_option: None,
            ..r
        };
        assert_eq!(ns.len(), 24);
        assert_eq!(ns.emit(&mut b[..23]), Err(Error::Truncated));
    }

    #[test]
    fn bad_options_are_malformed() {
        let mut m = NA;
        m[25] = 0; // length 0
        let mut it = Message::new_checked(&m).unwrap().options();
        assert_eq!(it.next(), None);
        assert!(it.malformed());
        m[25] = 2; // 16 bytes in an 8-byte area
        let mut it = Message::new_checked(&m).unwrap().options();
        assert_eq!(it.next(), None);
        assert!(it.malformed());
        // One trailing byte is not an option and not an error.
        let mut long = NA.to_vec();
        long.push(9);
        let mut it = Message::new_checked(&long).unwrap().options();
        assert_eq!(it.by_ref().count(), 1);
        assert!(!it.malformed());
        // A 1-unit option of another type has no MAC read from it unless asked.
        let o = NdOption {
            kind: 14,
            bytes: &[14, 1, 0, 0, 0, 0, 0, 0],
        };
        assert_eq!(o.ll_addr(), Some([0; 6]));
    }
}
