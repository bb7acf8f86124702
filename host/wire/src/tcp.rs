//! TCP header (RFC 9293 section 3.1) with options; [`Repr`] builds a header without options.

use crate::bytes::{be16, be32, put16, put32};
use crate::checksum;
use crate::options::OptionIter;
use crate::{Error, Result};

/// Byte offsets of the TCP header fields.
pub mod field {
    /// Source port.
    pub const SRC_PORT: usize = 0;
    /// Destination port.
    pub const DST_PORT: usize = 2;
    /// Sequence number.
    pub const SEQ: usize = 4;
    /// Acknowledgment number.
    pub const ACK: usize = 8;
    /// Data offset (high 4 bits, 32-bit words) and reserved bits (low bit of the byte: AE/NS).
    pub const DATA_OFF: usize = 12;
    /// Flags byte (CWR ECE URG ACK PSH RST SYN FIN), `tcp flags`.
    pub const FLAGS: usize = 13;
    /// Window.
    pub const WINDOW: usize = 14;
    /// Checksum.
    pub const CHECKSUM: usize = 16;
    /// Urgent pointer.
    pub const URGENT: usize = 18;
    /// Options start here and run to the data offset.
    pub const OPTIONS: usize = 20;
}

/// Length in bytes of the header without options.
pub const MIN_HEADER_LEN: usize = field::OPTIONS;

/// Flag bits of the flags byte, as `tcp flags` names them.
pub mod flags {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// PSH.
    pub const PSH: u8 = 0x08;
    /// ACK.
    pub const ACK: u8 = 0x10;
    /// URG.
    pub const URG: u8 = 0x20;
    /// ECE.
    pub const ECE: u8 = 0x40;
    /// CWR.
    pub const CWR: u8 = 0x80;
}

/// A view of a TCP header whose data offset is sane and whose options are within the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    buf: &'a [u8],
}

impl<'a> Packet<'a> {
    /// Wrap `buf`, which starts at the TCP header.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 20 bytes or the data offset;
    /// [`Error::Malformed`] when the data offset is below 5.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = usize::from(buf[field::DATA_OFF] >> 4) * 4;
        if hl < MIN_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if buf.len() < hl {
            return Err(Error::Truncated);
        }
        Ok(Packet { buf })
    }

    /// Source port, `tcp sport`.
    pub fn src_port(&self) -> u16 {
        be16(self.buf, field::SRC_PORT)
    }
    /// Destination port, `tcp dport`.
    pub fn dst_port(&self) -> u16 {
        be16(self.buf, field::DST_PORT)
    }
    /// Sequence number.
    pub fn seq(&self) -> u32 {
        be32(self.buf, field::SEQ)
    }
    /// Acknowledgment number.
    pub fn ack(&self) -> u32 {
        be32(self.buf, field::ACK)
    }
    /// Header length in bytes (data offset * 4, 20 to 60).
    pub fn header_len(&self) -> usize {
        usize::from(self.buf[field::DATA_OFF] >> 4) * 4
    }
    /// The flags byte, `tcp flags` (see [`flags`]).
    pub fn flags(&self) -> u8 {
        self.buf[field::FLAGS]
    }
    /// Window.
    pub fn window(&self) -> u16 {
        be16(self.buf, field::WINDOW)
    }
    /// Checksum as carried (not verified).
    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }
    /// Urgent pointer.
    pub fn urgent(&self) -> u16 {
        be16(self.buf, field::URGENT)
    }
    /// The option bytes.
    pub fn options(&self) -> &'a [u8] {
        &self.buf[field::OPTIONS..self.header_len()]
    }
    /// Iterator over the options.
    pub fn option_iter(&self) -> OptionIter<'a> {
        OptionIter::new(self.options())
    }
    /// Bytes after the header, to the end of the buffer.
    pub fn payload(&self) -> &'a [u8] {
        &self.buf[self.header_len()..]
    }
}

/// The flags byte of the TCP header at the start of `buf` when its fixed 20 bytes are there,
/// the data offset not checked: what a reader that pulls only `sizeof(struct tcphdr)` sees
/// (the kernel's flowtable, `nf_flow_tuple_ip`).
pub fn flags_of(buf: &[u8]) -> Option<u8> {
    buf.get(..MIN_HEADER_LEN).map(|h| h[field::FLAGS])
}

/// A writable view of a TCP header's fixed part (20 bytes): ports and checksum, what NAT and
/// the flowtable rewrite. Only the fixed part is checked, as the kernel's writers
/// (`tcp_manip_pkt`, `nf_flow_nat_port_tcp`) pull only `sizeof(struct tcphdr)`.
#[derive(Debug, PartialEq, Eq)]
pub struct PacketMut<'a> {
    buf: &'a mut [u8],
}

impl<'a> PacketMut<'a> {
    /// Wrap `buf`, which starts at the TCP header, for writing.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 20 bytes.
    pub fn new_checked(buf: &'a mut [u8]) -> Result<Self> {
        if buf.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(PacketMut { buf })
    }
    /// Checksum as carried.
    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }
    /// Set the source port (the checksum is not updated).
    pub fn set_src_port(&mut self, p: u16) {
        put16(self.buf, field::SRC_PORT, p);
    }
    /// Set the destination port (the checksum is not updated).
    pub fn set_dst_port(&mut self, p: u16) {
        put16(self.buf, field::DST_PORT, p);
    }
    /// Set the checksum.
    pub fn set_checksum(&mut self, c: u16) {
        put16(self.buf, field::CHECKSUM, c);
    }
    /// Update the checksum with a precomputed [`checksum::delta`] (RFC 1624 eqn. 3).
    pub fn apply_checksum_delta(&mut self, delta: u64) {
        let c = checksum::apply(self.checksum(), delta);
        self.set_checksum(c);
    }
}

/// The fields of a TCP header without options (data offset 5, urgent pointer 0), for building
/// one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Flags byte (see [`flags`]).
    pub flags: u8,
    /// Window.
    pub window: u16,
}

impl Repr {
    /// The 20 header bytes of a segment without data, the checksum computed over them and
    /// `pseudo`, the pseudo-header sum ([`checksum::pseudo_v4`] or [`checksum::pseudo_v6`] with
    /// a length of 20 and protocol 6).
    pub fn to_bytes(&self, pseudo: u32) -> [u8; MIN_HEADER_LEN] {
        let mut h = [0u8; MIN_HEADER_LEN];
        put16(&mut h, field::SRC_PORT, self.src_port);
        put16(&mut h, field::DST_PORT, self.dst_port);
        put32(&mut h, field::SEQ, self.seq);
        put32(&mut h, field::ACK, self.ack);
        h[field::DATA_OFF] = ((MIN_HEADER_LEN / 4) as u8) << 4;
        h[field::FLAGS] = self.flags;
        put16(&mut h, field::WINDOW, self.window);
        let c = !checksum::sum(u64::from(pseudo), &h);
        put16(&mut h, field::CHECKSUM, c);
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SYN 40000 -> 22, seq 1, data offset 6 with MSS 1460, window 64240.
    const SYN: [u8; 26] = [
        0x9c, 0x40, 0x00, 0x16, 0, 0, 0, 1, 0, 0, 0, 0, 0x60, 0x02, 0xfa, 0xf0, 0x12, 0x34, 0, 0,
        2, 4, 0x05, 0xb4, //
        0xaa, 0xbb,
    ];

    #[test]
    fn fields() {
        let t = Packet::new_checked(&SYN).unwrap();
        assert_eq!((t.src_port(), t.dst_port()), (40000, 22));
        assert_eq!((t.seq(), t.ack(), t.header_len()), (1, 0, 24));
        assert_eq!(t.flags(), flags::SYN);
        assert_eq!((t.window(), t.checksum(), t.urgent()), (64240, 0x1234, 0));
        let o: Vec<(u8, &[u8])> = t.option_iter().map(|o| (o.kind, o.data)).collect();
        assert_eq!(o, vec![(2, &[0x05, 0xb4][..])]);
        assert_eq!(t.payload(), &[0xaa, 0xbb]);
    }

    #[test]
    fn bounds() {
        assert_eq!(Packet::new_checked(&SYN[..19]), Err(Error::Truncated));
        assert_eq!(Packet::new_checked(&SYN[..23]), Err(Error::Truncated));
        let mut bad = SYN;
        bad[12] = 0x40;
        assert_eq!(Packet::new_checked(&bad), Err(Error::Malformed));
    }

    /// A reset as the kernel's nf_reject_ip_tcphdr_put writes one (80 -> 40000, seq 0, ack
    /// 0x01020304, RST|ACK, window 0) from 10.0.0.2 to 10.0.0.1: known bytes, and the checksum
    /// verifies over the pseudo-header.
    #[test]
    fn repr_reset() {
        let r = Repr {
            src_port: 80,
            dst_port: 40000,
            seq: 0,
            ack: 0x0102_0304,
            flags: flags::RST | flags::ACK,
            window: 0,
        };
        let (s, d) = (
            std::net::Ipv4Addr::new(10, 0, 0, 2),
            std::net::Ipv4Addr::new(10, 0, 0, 1),
        );
        let pseudo = checksum::pseudo_v4(&s, &d, 20, 6);
        let h = r.to_bytes(pseudo);
        assert_eq!(
            h[..16],
            [0, 80, 0x9c, 0x40, 0, 0, 0, 0, 1, 2, 3, 4, 0x50, 0x14, 0, 0]
        );
        assert_eq!(&h[18..], &[0, 0]);
        assert_eq!(checksum::sum(u64::from(pseudo), &h), 0xffff);
        let t = Packet::new_checked(&h).unwrap();
        assert_eq!((t.header_len(), t.flags()), (20, 0x14));
    }

    #[test]
    fn flags_without_a_data_offset_check() {
        let mut bad = SYN;
        bad[12] = 0x40;
        assert_eq!(flags_of(&bad), Some(flags::SYN));
        assert_eq!(flags_of(&SYN[..19]), None);
    }

    proptest::proptest! {
        /// A port and pseudo-header address rewrite updated incrementally equals the checksum
        /// recomputed from scratch.
        #[test]
        fn incremental_nat_equals_recompute(
            mut seg in proptest::collection::vec(proptest::num::u8::ANY, 20..60),
            src in proptest::array::uniform4(proptest::num::u8::ANY),
            new_src in proptest::array::uniform4(proptest::num::u8::ANY),
            port in proptest::num::u16::ANY,
        ) {
            let dst = std::net::Ipv4Addr::new(10, 0, 0, 2);
            let len = seg.len() as u32;
            let full = |seg: &mut Vec<u8>, s: [u8; 4]| {
                seg[16] = 0;
                seg[17] = 0;
                let p = checksum::pseudo_v4(&s.into(), &dst, len, 6);
                let c = !checksum::sum(u64::from(p), seg);
                seg[16..18].copy_from_slice(&c.to_be_bytes());
            };
            full(&mut seg, src);
            let old_port = [seg[0], seg[1]];
            let d = checksum::delta(&src, &new_src) + checksum::delta(&old_port, &port.to_be_bytes());
            let mut w = PacketMut::new_checked(&mut seg).unwrap();
            w.set_src_port(port);
            w.apply_checksum_delta(d);
            let inc = w.checksum();
            full(&mut seg, new_src);
            proptest::prop_assert_eq!(inc, u16::from_be_bytes([seg[16], seg[17]]));
        }
    }
}
