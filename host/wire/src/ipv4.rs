//! IPv4 header (RFC 791) with options. The view checks only what it needs to stay in bounds
//! (fixed part, IHL of at least 5, options present); the kernel's own validation of a packet
//! (version, total length) is done by [`crate::parse`]. [`PacketMut`] writes the fixed part's
//! fields (TTL with its incremental checksum update, RFC 1624; addresses; total length;
//! checksum) and [`Repr`] builds a header without options.

use std::net::Ipv4Addr;

use crate::bytes::{array, be16, put16};
use crate::checksum;
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
    /// GRE.
    pub const GRE: u8 = 47;
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
    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.src())
    }
    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.dst())
    }
    /// Whether the header checksum verifies over the header's IHL * 4 bytes (RFC 1071: the sum
    /// of the header, checksum field included, is all ones), as `ip_rcv_core` checks it.
    pub fn checksum_ok(&self) -> bool {
        checksum::checksum(&self.buf[..self.header_len()]) == 0
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

/// A view of an IPv4 header's fixed part (20 bytes), IHL not checked: what a reader that pulls
/// only `sizeof(struct iphdr)` sees (the kernel's `nf_ct_get_tuplepr` on the header an ICMP
/// error quotes, the flow hash of `udp_flow_src_port`). [`Packet`] is the checked view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedHeader<'a> {
    buf: &'a [u8],
}

impl<'a> FixedHeader<'a> {
    /// Wrap `buf`, which starts at the IPv4 header.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 20 bytes.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(FixedHeader { buf })
    }
    /// Version field.
    pub fn version(&self) -> u8 {
        self.buf[field::VER_IHL] >> 4
    }
    /// Header length in bytes, IHL * 4 as carried (0 to 60; not checked against anything).
    pub fn header_len(&self) -> usize {
        usize::from(self.buf[field::VER_IHL] & 0x0f) * 4
    }
    /// Total length field in bytes.
    pub fn total_len(&self) -> u16 {
        be16(self.buf, field::TOTAL_LEN)
    }
    /// Fragment offset in bytes (the 13-bit field times 8).
    pub fn frag_offset(&self) -> u16 {
        (be16(self.buf, field::FLAGS_FRAG) & FRAG_OFFSET_MASK) * 8
    }
    /// Protocol of the payload.
    pub fn protocol(&self) -> u8 {
        self.buf[field::PROTOCOL]
    }
    /// Source address.
    pub fn src(&self) -> [u8; 4] {
        array(self.buf, field::SRC.start)
    }
    /// Destination address.
    pub fn dst(&self) -> [u8; 4] {
        array(self.buf, field::DST.start)
    }
    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.src())
    }
}

/// The checksum delta of a TTL decrement by one ([`checksum::apply`] it): in the 16-bit word
/// (TTL, protocol), `~m + (m - 0x0100)` is the constant 0xfeff for every TTL of at least 1
/// (RFC 1624 eqn. 3 with a precomputed delta). With a TTL of 0 the decrement wraps and this
/// delta is wrong: use [`PacketMut::decrement_ttl`] there.
pub const TTL_DECREMENT_DELTA: u64 = 0xfeff;

/// A writable view of an IPv4 header's fixed part (20 bytes). Only the fixed part is checked:
/// every field it writes lives there, and the kernel's writers (`ip_decrease_ttl`,
/// `nf_nat_ipv4_manip_pkt`) pull no more. [`PacketMut::fill_checksum`], which covers IHL * 4
/// bytes, checks the rest itself.
#[derive(Debug, PartialEq, Eq)]
pub struct PacketMut<'a> {
    buf: &'a mut [u8],
}

impl<'a> PacketMut<'a> {
    /// Wrap `buf`, which starts at the IPv4 header, for writing.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 20 bytes.
    pub fn new_checked(buf: &'a mut [u8]) -> Result<Self> {
        if buf.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(PacketMut { buf })
    }
    /// Header length in bytes, IHL * 4 as carried (not checked: 0 to 60).
    pub fn header_len(&self) -> usize {
        usize::from(self.buf[field::VER_IHL] & 0x0f) * 4
    }
    /// Protocol of the payload.
    pub fn protocol(&self) -> u8 {
        self.buf[field::PROTOCOL]
    }
    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buf[field::TTL]
    }
    /// Header checksum as carried.
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
    /// Set the total length in bytes (the checksum is not updated).
    pub fn set_total_len(&mut self, len: u16) {
        put16(self.buf, field::TOTAL_LEN, len);
    }
    /// Set the TTL (the checksum is not updated).
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buf[field::TTL] = ttl;
    }
    /// Set the header checksum.
    pub fn set_checksum(&mut self, c: u16) {
        put16(self.buf, field::CHECKSUM, c);
    }
    /// Set the source address (the checksum is not updated).
    pub fn set_src(&mut self, a: [u8; 4]) {
        self.buf[field::SRC].copy_from_slice(&a);
    }
    /// Set the destination address (the checksum is not updated).
    pub fn set_dst(&mut self, a: [u8; 4]) {
        self.buf[field::DST].copy_from_slice(&a);
    }
    /// Decrement the TTL by one (0 wraps to 255) and update the checksum incrementally (RFC 1624
    /// eqn. 3 over the (TTL, protocol) word), as the kernel's `ip_decrease_ttl`.
    pub fn decrement_ttl(&mut self) {
        self.step_ttl(u8::wrapping_sub);
    }
    /// Raise the TTL by one (255 wraps to 0), checksum updated: the inverse of
    /// [`PacketMut::decrement_ttl`].
    pub fn increment_ttl(&mut self) {
        self.step_ttl(u8::wrapping_add);
    }
    fn step_ttl(&mut self, step: fn(u8, u8) -> u8) {
        let old = be16(self.buf, field::TTL);
        self.buf[field::TTL] = step(self.buf[field::TTL], 1);
        let new = be16(self.buf, field::TTL);
        let c = checksum::update(self.checksum(), old, new);
        self.set_checksum(c);
    }
    /// Update the checksum for covered bytes that changed from `old` to `new` (same even length;
    /// RFC 1624 eqn. 3), e.g. addresses a NAT rewrote.
    pub fn adjust_checksum(&mut self, old: &[u8], new: &[u8]) {
        let c = checksum::adjust(self.checksum(), old, new);
        self.set_checksum(c);
    }
    /// Update the checksum with a precomputed [`checksum::delta`] (RFC 1624 eqn. 3).
    pub fn apply_checksum_delta(&mut self, delta: u64) {
        let c = checksum::apply(self.checksum(), delta);
        self.set_checksum(c);
    }
    /// Compute the checksum from scratch over IHL * 4 bytes and write it.
    ///
    /// # Errors
    /// [`Error::Malformed`] when IHL is below 5; [`Error::Truncated`] when the buffer is shorter
    /// than IHL * 4. Nothing is written then.
    pub fn fill_checksum(&mut self) -> Result<()> {
        let hl = self.header_len();
        if hl < MIN_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if self.buf.len() < hl {
            return Err(Error::Truncated);
        }
        self.set_checksum(0);
        let c = checksum::checksum(&self.buf[..hl]);
        self.set_checksum(c);
        Ok(())
    }
}

/// The fields of an IPv4 header without options, for building one (RFC 791; version 4, IHL 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol of the payload (see [`protocol`]).
    pub protocol: u8,
    /// Length of the payload in bytes (the total length is 20 more).
    pub payload_len: u16,
    /// Time to live.
    pub ttl: u8,
    /// The DSCP/ECN byte (the old TOS).
    pub tos: u8,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment.
    pub dont_frag: bool,
}

impl Repr {
    /// The 20 header bytes, checksum computed. The total length wraps at 65535 bytes (a
    /// payload of more than 65515 bytes does not fit an IPv4 packet).
    pub fn to_bytes(&self) -> [u8; MIN_HEADER_LEN] {
        let mut h = [0u8; MIN_HEADER_LEN];
        h[field::VER_IHL] = 0x45;
        h[field::DSCP_ECN] = self.tos;
        put16(
            &mut h,
            field::TOTAL_LEN,
            self.payload_len.wrapping_add(MIN_HEADER_LEN as u16),
        );
        put16(&mut h, field::IDENT, self.ident);
        if self.dont_frag {
            put16(&mut h, field::FLAGS_FRAG, FLAG_DF);
        }
        h[field::TTL] = self.ttl;
        h[field::PROTOCOL] = self.protocol;
        h[field::SRC].copy_from_slice(&self.src.octets());
        h[field::DST].copy_from_slice(&self.dst.octets());
        let c = checksum::checksum(&h);
        put16(&mut h, field::CHECKSUM, c);
        h
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

    /// The header of `checksum`'s tests (192.168.0.1 -> 192.168.0.199, TTL 64, UDP, checksum
    /// 0xb861), from a capture.
    const CAPTURED: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    #[test]
    fn repr_builds_the_captured_header() {
        let r = Repr {
            src: Ipv4Addr::new(192, 168, 0, 1),
            dst: Ipv4Addr::new(192, 168, 0, 199),
            protocol: protocol::UDP,
            payload_len: 0x73 - 20,
            ttl: 64,
            tos: 0,
            ident: 0,
            dont_frag: true,
        };
        assert_eq!(r.to_bytes(), CAPTURED);
        let p = Packet::new_checked(&CAPTURED).unwrap();
        assert!(p.checksum_ok());
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 0, 1));
    }

    #[test]
    fn ttl_decrement_known_bytes() {
        let mut h = CAPTURED;
        PacketMut::new_checked(&mut h).unwrap().decrement_ttl();
        // TTL 63; checksum 0xb861 + 0x0100 = 0xb961 (RFC 1624: one less in the high byte).
        assert_eq!((h[8], h[10], h[11]), (63, 0xb9, 0x61));
        PacketMut::new_checked(&mut h).unwrap().increment_ttl();
        assert_eq!(h, CAPTURED);
        assert_eq!(
            PacketMut::new_checked(&mut [0u8; 19]),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn writes_and_fill_checksum() {
        let mut h = CAPTURED;
        let mut w = PacketMut::new_checked(&mut h).unwrap();
        let old = w.src();
        w.set_src([10, 0, 0, 1]);
        w.adjust_checksum(&old, &[10, 0, 0, 1]);
        let inc = w.checksum();
        w.set_dst([10, 0, 0, 2]);
        w.set_total_len(40);
        w.set_ttl(1);
        w.fill_checksum().unwrap();
        assert!(Packet::new_checked(&h).unwrap().checksum_ok());
        assert_eq!((h[2], h[3], h[8]), (0, 40, 1));
        assert_eq!(&h[12..20], &[10, 0, 0, 1, 10, 0, 0, 2]);
        // The incremental update after the source change equals a recompute.
        let mut r = CAPTURED;
        r[12..16].copy_from_slice(&[10, 0, 0, 1]);
        r[10..12].copy_from_slice(&[0, 0]);
        assert_eq!(inc, checksum::checksum(&r));
        // IHL 4, or a header announcing options it does not have: no checksum written.
        let mut bad = CAPTURED;
        bad[0] = 0x44;
        assert_eq!(
            PacketMut::new_checked(&mut bad).unwrap().fill_checksum(),
            Err(Error::Malformed)
        );
        bad[0] = 0x46;
        assert_eq!(
            PacketMut::new_checked(&mut bad).unwrap().fill_checksum(),
            Err(Error::Truncated)
        );
        assert_eq!(&bad[10..12], &CAPTURED[10..12]);
    }

    proptest::proptest! {
        /// Every TTL step, updated incrementally (per word, or with the constant delta for a
        /// TTL of at least 1), equals the checksum recomputed from scratch.
        #[test]
        fn incremental_ttl_equals_recompute(
            mut h in proptest::array::uniform20(proptest::num::u8::ANY),
            up in proptest::bool::ANY,
        ) {
            h[0] = 0x45;
            PacketMut::new_checked(&mut h).unwrap().fill_checksum().unwrap();
            let ttl = h[field::TTL];
            let mut by_delta = h;
            let mut w = PacketMut::new_checked(&mut h).unwrap();
            if up { w.increment_ttl() } else { w.decrement_ttl() }
            proptest::prop_assert_eq!(checksum::checksum(&h), 0);
            if !up && ttl >= 1 {
                let mut w = PacketMut::new_checked(&mut by_delta).unwrap();
                w.set_ttl(ttl - 1);
                w.apply_checksum_delta(TTL_DECREMENT_DELTA);
                proptest::prop_assert_eq!(by_delta, h);
            }
        }

        /// An address rewrite with an incremental update equals a recompute.
        #[test]
        fn incremental_address_equals_recompute(
            mut h in proptest::array::uniform20(proptest::num::u8::ANY),
            a in proptest::array::uniform4(proptest::num::u8::ANY),
        ) {
            h[0] = 0x45;
            PacketMut::new_checked(&mut h).unwrap().fill_checksum().unwrap();
            let mut w = PacketMut::new_checked(&mut h).unwrap();
            let old = w.dst();
            w.set_dst(a);
            w.adjust_checksum(&old, &a);
            proptest::prop_assert_eq!(checksum::checksum(&h), 0);
        }
    }

    #[test]
    fn fixed_header_trusts_ihl() {
        // IHL 4 and IHL 6 without its option: the checked view refuses, the fixed one reads.
        let mut h = CAPTURED;
        h[0] = 0x44;
        assert_eq!(Packet::new_checked(&h), Err(Error::Malformed));
        let f = FixedHeader::new_checked(&h).unwrap();
        assert_eq!((f.version(), f.header_len(), f.protocol()), (4, 16, 17));
        assert_eq!((f.total_len(), f.frag_offset()), (0x73, 0));
        assert_eq!((f.src(), f.dst()), ([192, 168, 0, 1], [192, 168, 0, 199]));
        h[0] = 0x46;
        assert_eq!(FixedHeader::new_checked(&h).unwrap().header_len(), 24);
        assert_eq!(FixedHeader::new_checked(&h[..19]), Err(Error::Truncated));
    }
}
