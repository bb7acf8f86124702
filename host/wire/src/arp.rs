//! ARP (RFC 826): hardware and protocol types and lengths, operation, and the four addresses
//! whose sizes those lengths give (6 and 4 bytes for Ethernet/IPv4). [`Repr`] reads and builds
//! the Ethernet/IPv4 form.

use std::net::Ipv4Addr;

use crate::bytes::{array, be16, put16};
use crate::ethernet::ethertype;
use crate::{Error, Result};

/// Byte offsets of the fixed ARP fields.
pub mod field {
    /// Hardware type (1 = Ethernet).
    pub const HTYPE: usize = 0;
    /// Protocol type (an EtherType, 0x0800 for IPv4).
    pub const PTYPE: usize = 2;
    /// Hardware address length in bytes.
    pub const HLEN: usize = 4;
    /// Protocol address length in bytes.
    pub const PLEN: usize = 5;
    /// Operation (1 request, 2 reply).
    pub const OPER: usize = 6;
    /// Sender hardware address; the other addresses follow at offsets given by the lengths.
    pub const SHA: usize = 8;
}

/// Length in bytes of the fixed part, before the addresses.
pub const FIXED_LEN: usize = field::SHA;

/// Hardware type of Ethernet.
pub const HTYPE_ETHERNET: u16 = 1;
/// Length in bytes of an ARP packet for IPv4 over Ethernet (8 + 2 * (6 + 4)).
pub const ETHER_IPV4_LEN: usize = FIXED_LEN + 2 * (6 + 4);

/// ARP operation: request.
pub const OPER_REQUEST: u16 = 1;
/// ARP operation: reply.
pub const OPER_REPLY: u16 = 2;

/// A view of an ARP packet whose four addresses are all within the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    buf: &'a [u8],
}

impl<'a> Packet<'a> {
    /// Wrap `buf`, which starts at the ARP header.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 8 + 2 * (hlen + plen) bytes.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < FIXED_LEN {
            return Err(Error::Truncated);
        }
        let need = FIXED_LEN + 2 * (usize::from(buf[field::HLEN]) + usize::from(buf[field::PLEN]));
        if buf.len() < need {
            return Err(Error::Truncated);
        }
        Ok(Packet { buf })
    }

    /// Hardware type.
    pub fn htype(&self) -> u16 {
        be16(self.buf, field::HTYPE)
    }
    /// Protocol type.
    pub fn ptype(&self) -> u16 {
        be16(self.buf, field::PTYPE)
    }
    /// Hardware address length in bytes.
    pub fn hlen(&self) -> u8 {
        self.buf[field::HLEN]
    }
    /// Protocol address length in bytes.
    pub fn plen(&self) -> u8 {
        self.buf[field::PLEN]
    }
    /// Operation.
    pub fn oper(&self) -> u16 {
        be16(self.buf, field::OPER)
    }
    fn addr(&self, index: usize) -> &'a [u8] {
        let (h, p) = (usize::from(self.hlen()), usize::from(self.plen()));
        let start = FIXED_LEN + (index / 2) * (h + p) + (index % 2) * h;
        let len = if index.is_multiple_of(2) { h } else { p };
        &self.buf[start..start + len]
    }
    /// Sender hardware address (`hlen` bytes).
    pub fn sha(&self) -> &'a [u8] {
        self.addr(0)
    }
    /// Sender protocol address (`plen` bytes).
    pub fn spa(&self) -> &'a [u8] {
        self.addr(1)
    }
    /// Target hardware address (`hlen` bytes).
    pub fn tha(&self) -> &'a [u8] {
        self.addr(2)
    }
    /// Target protocol address (`plen` bytes).
    pub fn tpa(&self) -> &'a [u8] {
        self.addr(3)
    }
}

/// An ARP packet for IPv4 over Ethernet (hardware type 1, protocol 0x0800, lengths 6 and 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Operation ([`OPER_REQUEST`], [`OPER_REPLY`], or any other number).
    pub oper: u16,
    /// Sender hardware address.
    pub sha: [u8; 6],
    /// Sender protocol address.
    pub spa: Ipv4Addr,
    /// Target hardware address.
    pub tha: [u8; 6],
    /// Target protocol address.
    pub tpa: Ipv4Addr,
}

impl Repr {
    /// The packet `p` holds when it is IPv4 over Ethernet; `None` for other hardware or
    /// protocol types or lengths.
    pub fn parse(p: &Packet<'_>) -> Option<Repr> {
        if p.htype() != HTYPE_ETHERNET
            || p.ptype() != ethertype::IPV4
            || p.hlen() != 6
            || p.plen() != 4
        {
            return None;
        }
        Some(Repr {
            oper: p.oper(),
            sha: array(p.sha(), 0),
            spa: Ipv4Addr::from(array::<4>(p.spa(), 0)),
            tha: array(p.tha(), 0),
            tpa: Ipv4Addr::from(array::<4>(p.tpa(), 0)),
        })
    }

    /// The 28 bytes of the packet.
    pub fn to_bytes(&self) -> [u8; ETHER_IPV4_LEN] {
        let mut b = [0u8; ETHER_IPV4_LEN];
        put16(&mut b, field::HTYPE, HTYPE_ETHERNET);
        put16(&mut b, field::PTYPE, ethertype::IPV4);
        b[field::HLEN] = 6;
        b[field::PLEN] = 4;
        put16(&mut b, field::OPER, self.oper);
        let sha = field::SHA;
        b[sha..sha + 6].copy_from_slice(&self.sha);
        b[sha + 6..sha + 10].copy_from_slice(&self.spa.octets());
        b[sha + 10..sha + 16].copy_from_slice(&self.tha);
        b[sha + 16..sha + 20].copy_from_slice(&self.tpa.octets());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Who has 192.168.1.1? Tell 192.168.1.2 (padded as on the wire).
    const REQUEST: [u8; 30] = [
        0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01, //
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 192, 168, 1, 2, //
        0, 0, 0, 0, 0, 0, 192, 168, 1, 1, //
        0, 0,
    ];

    #[test]
    fn request_fields() {
        let a = Packet::new_checked(&REQUEST).unwrap();
        assert_eq!(
            (a.htype(), a.ptype(), a.hlen(), a.plen()),
            (1, 0x0800, 6, 4)
        );
        assert_eq!(a.oper(), OPER_REQUEST);
        assert_eq!(a.sha(), &[2, 0, 0, 0, 0, 2]);
        assert_eq!(a.spa(), &[192, 168, 1, 2]);
        assert_eq!(a.tha(), &[0; 6]);
        assert_eq!(a.tpa(), &[192, 168, 1, 1]);
    }

    #[test]
    fn lengths_bound_the_view() {
        assert_eq!(Packet::new_checked(&REQUEST[..27]), Err(Error::Truncated));
        assert!(Packet::new_checked(&REQUEST[..28]).is_ok());
        // Huge announced lengths cannot make an accessor read past the buffer.
        let mut big = REQUEST;
        big[4] = 255;
        assert_eq!(Packet::new_checked(&big), Err(Error::Truncated));
    }

    #[test]
    fn repr_reads_and_builds() {
        let r = Repr::parse(&Packet::new_checked(&REQUEST).unwrap()).unwrap();
        assert_eq!(
            r,
            Repr {
                oper: OPER_REQUEST,
                sha: [2, 0, 0, 0, 0, 2],
                spa: Ipv4Addr::new(192, 168, 1, 2),
                tha: [0; 6],
                tpa: Ipv4Addr::new(192, 168, 1, 1),
            }
        );
        assert_eq!(r.to_bytes(), REQUEST[..28]);
        let mut other = REQUEST;
        other[1] = 6; // IEEE 802
        assert_eq!(Repr::parse(&Packet::new_checked(&other).unwrap()), None);
    }
}
