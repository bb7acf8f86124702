//! The start every port-carrying transport header shares (TCP, UDP, UDP-Lite, SCTP, DCCP: RFC
//! 9293, 768, 3828, 9260, 4340): the source port then the destination port, nft's `th`. What
//! reads or rewrites only the ports (conntrack's tuple, NAT, the flowtable's key) works on this
//! view whatever the protocol, as the kernel pulls only these 4 bytes from a packet quoted in
//! an ICMP error.

use crate::bytes::{array, be16, put16};
use crate::{Error, Result};

/// Byte offsets of the ports.
pub mod field {
    /// Source port.
    pub const SRC_PORT: usize = 0;
    /// Destination port.
    pub const DST_PORT: usize = 2;
}

/// Length in bytes of the two ports.
pub const PORTS_LEN: usize = 4;

/// A view of the ports at the start of a transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports<'a> {
    buf: &'a [u8],
}

impl<'a> Ports<'a> {
    /// Wrap `buf`, which starts at the transport header.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 4 bytes.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < PORTS_LEN {
            return Err(Error::Truncated);
        }
        Ok(Ports { buf })
    }
    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buf, field::SRC_PORT)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buf, field::DST_PORT)
    }
}

/// A writable view of the ports at the start of a transport header.
#[derive(Debug, PartialEq, Eq)]
pub struct PortsMut<'a> {
    buf: &'a mut [u8],
}

impl<'a> PortsMut<'a> {
    /// Wrap `buf`, which starts at the transport header, for writing.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 4 bytes.
    pub fn new_checked(buf: &'a mut [u8]) -> Result<Self> {
        if buf.len() < PORTS_LEN {
            return Err(Error::Truncated);
        }
        Ok(PortsMut { buf })
    }
    /// The 4 bytes of the two ports (source then destination, big-endian): what a checksum
    /// delta of a port rewrite is computed over.
    pub fn bytes(&self) -> [u8; PORTS_LEN] {
        array(self.buf, 0)
    }
    /// Set the source port.
    pub fn set_src_port(&mut self, p: u16) {
        put16(self.buf, field::SRC_PORT, p);
    }
    /// Set the destination port.
    pub fn set_dst_port(&mut self, p: u16) {
        put16(self.buf, field::DST_PORT, p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_read_and_write() {
        let mut b = [0x9c, 0x40, 0x00, 0x16, 0xff];
        let p = Ports::new_checked(&b).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (40000, 22));
        let mut w = PortsMut::new_checked(&mut b).unwrap();
        assert_eq!(w.bytes(), [0x9c, 0x40, 0x00, 0x16]);
        w.set_src_port(22);
        w.set_dst_port(40000);
        assert_eq!(b, [0x00, 0x16, 0x9c, 0x40, 0xff]);
        assert_eq!(Ports::new_checked(&b[..3]), Err(Error::Truncated));
        assert_eq!(PortsMut::new_checked(&mut b[..3]), Err(Error::Truncated));
    }
}
