//! IPv4 header (RFC 791) with options. The view checks only what it needs to stay in bounds
//! (fixed part, IHL of at least 5, options present); the kernel's own validation of a packet
//! (version, total length) is done by [`crate::parse`].

use crate::bytes::{array, be16};
use crate::options::OptionIter;
use crate::{Error, Result};

/// Byte offsets of the IPv4 header fields.
pub mod field {
    use core::ops::Range;
    /// Version (high 4 bits) and IHL in 32-bit words (low 4 bits).
    pub const VER_IHL: usize = 0;
    /// DSCP (high 6 bits) and ECN (low 2 bits).
    pub const DSCP_ECN: usize = 1;
    /// Total length of header and data in bytes.
    pub const TOTAL_LEN: usize = 2;
    /// Identification.
    pub const IDENT: usize = 4;
    /// Flags (reserved, DF, MF) and fragment offset in 8-byte units.
    pub const FLAGS_FRAG: usize = 6;
    /// Time to live.
    pub const TTL: usize = 8;
    /// Protocol of the payload.
    pub const PROTOCOL: usize = 9;
    /// Header checksum.
    pub const CHECKSUM: usize = 10;
    /// Source address.
    pub const SRC: Range<usize> = 12..16;
    /// Destination address.
    pub const DST: Range<usize> = 16..20;
    /// Options start here and run to IHL * 4.
    pub const OPTIONS: usize = 20;
}

/// Length in bytes of the header without options.
pub const MIN_HEADER_LEN: usize = field::OPTIONS;

/// IP protocol numbers (shared by IPv4's protocol and IPv6's next header). Any other value is
/// kept as a plain number.
pub mod protocol {
    /// IPv6 hop-by-hop options.
    pub const HOPOPTS: u8 = 0;
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// IPv6 routing header.
    pub const ROUTING: u8 = 43;
    /// IPv6 fragment header.
    pub const FRAGMENT: u8 = 44;
    /// Encapsulating security payload.
    pub const ESP: u8 = 50;
    /// Authentication header.
    pub const AH: u8 = 51;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// IPv6 "no next header".
    pub const NONE: u8 = 59;
    /// IPv6 destination options.
    pub const DSTOPTS: u8 = 60;
    /// DCCP.
    pub const DCCP: u8 = 33;
    /// SCTP.
    pub const SCTP: u8 = 132;
    /// Mobility header.
    pub const MOBILITY: u8 = 135;
    /// UDP-Lite.
    pub const UDPLITE: u8 = 136;
}

/// "More fragments" flag in the flags/fragment word.
pub const FLAG_MF: u16 = 0x2000;
/// "Don't fragment" flag in the flags/fragment word.
pub const FLAG_DF: u16 = 0x4000;
/// Mask of the fragment offset (8-byte units) in the flags/fragment word (`IP_OFFSET`).
pub const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// A view of an IPv4 header whose IHL is sane and whose options are within the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    buf: &'a [u8],
}

impl<'a> Packet<'a> {
    /// Wrap `buf`, which starts at the IPv4 header and may run past the packet (padding).
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 20 bytes or than IHL * 4;
    /// [`Error::Malformed`] when IHL is below 5.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = usize::from(buf[field::VER_IHL] & 0x0f) * 4;
        if hl < MIN_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if buf.len() < hl {
            return Err(Error::Truncated);
        }
        Ok(Packet { buf })
    }

    /// Version field (4 for IPv4; not checked by the view).
    pub fn version(&self) -> u8 {
        self.buf[field::VER_IHL] >> 4
    }
    /// Header length in bytes (IHL * 4, 20 to 60).
    pub fn header_len(&self) -> usize {
        usize::from(self.buf[field::VER_IHL] & 0x0f) * 4
    }
    /// DSCP (6 bits), `ip dscp`.
    pub fn dscp(&self) -> u8 {
        self.buf[field::DSCP_ECN] >> 2
    }
    /// ECN (2 bits).
    pub fn ecn(&self) -> u8 {
        self.buf[field::DSCP_ECN] & 0x03
    }
    /// Total length field in bytes, `ip length`.
    pub fn total_len(&self) -> u16 {
        be16(self.buf, field::TOTAL_LEN)
    }
    /// Identification.
    pub fn ident(&self) -> u16 {
        be16(self.buf, field::IDENT)
    }
    /// The raw flags and fragment offset word.
    pub fn flags_frag(&self) -> u16 {
        be16(self.buf, field::FLAGS_FRAG)
    }
    /// Don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.flags_frag() & FLAG_DF != 0
    }
    /// More-fragments flag.
    pub fn more_frags(&self) -> bool {
        self.flags_frag() & FLAG_MF != 0
    }
    /// Fragment offset in bytes (the 13-bit field times 8).
    pub fn frag_offset(&self) -> u16 {
        (self.flags_frag() & FRAG_OFFSET_MASK) * 8
    }
    /// Time to live, `ip ttl`.
    pub fn ttl(&self) -> u8 {
        self.buf[field::TTL]
    }
    /// Protocol of the payload, `ip protocol`.
    pub fn protocol(&self) -> u8 {
        self.buf[field::PROTOCOL]
    }
    /// Header checksum as carried (not verified).
    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }
    /// Source address.
    pub fn src(&self) -> [u8; 4] {
        array(self.buf, field::SRC.start)
    }
    /// Destination address.
    pub fn dst(&self) -> [u8; 4] {
        array(self.buf, field::DST.start)
    }
    /// The option bytes (IHL * 4 - 20 of them).
    pub fn options(&self) -> &'a [u8] {
        &self.buf[field::OPTIONS..self.header_len()]
    }
    /// Iterator over the options.
    pub fn option_iter(&self) -> OptionIter<'a> {
        OptionIter::new(self.options())
    }
    /// The payload: from the end of the header to the total length, cut at the end of the buffer
    /// (empty when the total length is below the header length).
    pub fn payload(&self) -> &'a [u8] {
        let end = usize::from(self.total_len()).min(self.buf.len());
        self.buf.get(self.header_len()..end).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IHL 6 (one router-alert option), DSCP 46, tot_len 28, MF set, offset 185*8, TTL 64,
    /// UDP, 10.0.0.1 -> 10.0.0.2, 4 payload bytes and 2 bytes of padding.
    const PKT: [u8; 30] = [
        0x46, 0xb8, 0x00, 0x1c, 0x12, 0x34, 0x20, 0xb9, 0x40, 0x11, 0xab, 0xcd, 10, 0, 0, 1, 10, 0,
        0, 2, // fixed header
        0x94, 0x04, 0x00, 0x00, // router alert
        0xde, 0xad, 0xbe, 0xef, // payload
        0, 0, // padding
    ];

    #[test]
    fn fields() {
        let p = Packet::new_checked(&PKT).unwrap();
        assert_eq!((p.version(), p.header_len()), (4, 24));
        assert_eq!((p.dscp(), p.ecn()), (46, 0));
        assert_eq!((p.total_len(), p.ident()), (28, 0x1234));
        assert!(p.more_frags() && !p.dont_frag());
        assert_eq!(p.frag_offset(), 1480);
        assert_eq!((p.ttl(), p.protocol(), p.checksum()), (64, 17, 0xabcd));
        assert_eq!((p.src(), p.dst()), ([10, 0, 0, 1], [10, 0, 0, 2]));
        let opts: Vec<(u8, usize)> = p.option_iter().map(|o| (o.kind, o.data.len())).collect();
        assert_eq!(opts, vec![(0x94, 2)]);
        assert_eq!(p.payload(), &[0xde, 0xad, 0xbe, 0xef]);
    }

    #[test]
    fn bounds() {
        assert_eq!(Packet::new_checked(&PKT[..19]), Err(Error::Truncated));
        assert_eq!(Packet::new_checked(&PKT[..23]), Err(Error::Truncated));
        let mut bad = PKT;
        bad[0] = 0x44;
        assert_eq!(Packet::new_checked(&bad), Err(Error::Malformed));
        // Total length past the capture: the payload stops at the end of the buffer.
        let p = Packet::new_checked(&PKT[..26]).unwrap();
        assert_eq!(p.payload(), &[0xde, 0xad]);
        // Total length below the header length: empty payload, no panic.
        let mut short = PKT;
        short[3] = 8;
        assert!(Packet::new_checked(&short).unwrap().payload().is_empty());
    }
}
