//! Header readers for guests: big-endian fields, UDP, Geneve (RFC 8926) and its options.
//! Every reader takes a byte slice that starts at the header and returns `None` when it is
//! too short; nothing panics on bad input.

/// Big-endian u16 at `off`.
#[inline]
pub fn be16(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(off)?, *b.get(off + 1)?]))
}

/// Big-endian u32 at `off`.
#[inline]
pub fn be32(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off + 4)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// The UDP destination port of Geneve (RFC 8926, section 3.3).
pub const GENEVE_PORT: u16 = 6081;

/// A UDP header (RFC 768).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Udp {
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Length of header and payload, bytes.
    pub len: u16,
    /// Checksum (0: none, IPv4 only).
    pub csum: u16,
}

impl Udp {
    /// Bytes of a UDP header.
    pub const LEN: usize = 8;

    /// Reads the header at the start of `b`.
    #[inline]
    pub fn parse(b: &[u8]) -> Option<Udp> {
        Some(Udp {
            sport: be16(b, 0)?,
            dport: be16(b, 2)?,
            len: be16(b, 4)?,
            csum: be16(b, 6)?,
        })
    }
}

/// A Geneve header (RFC 8926, section 3.4) and its option block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geneve<'a> {
    /// Version (2 bits; 0 is the only one defined).
    pub version: u8,
    /// Length of the option block in 4-byte words (6 bits: at most 252 bytes).
    pub opt_len: u8,
    /// O bit: an OAM packet.
    pub oam: bool,
    /// C bit: critical options are present.
    pub critical: bool,
    /// Protocol type of the payload (an EtherType; 0x6558 for Ethernet).
    pub protocol: u16,
    /// Virtual network identifier (24 bits).
    pub vni: u32,
    /// The option block as far as it is in `b` (shorter than `opt_len * 4` when cut off).
    pub options: &'a [u8],
    /// True when the whole option block (`opt_len * 4` bytes) is in `b`.
    pub complete: bool,
}

impl<'a> Geneve<'a> {
    /// Bytes of the fixed header.
    pub const LEN: usize = 8;

    /// Reads the Geneve header at the start of `b` (the UDP payload).
    #[inline]
    pub fn parse(b: &'a [u8]) -> Option<Geneve<'a>> {
        let fixed = b.get(..Self::LEN)?;
        let opt_len = fixed[0] & 0x3f;
        let block = &b[Self::LEN..];
        let want = opt_len as usize * 4;
        Some(Geneve {
            version: fixed[0] >> 6,
            opt_len,
            oam: fixed[1] & 0x80 != 0,
            critical: fixed[1] & 0x40 != 0,
            protocol: u16::from_be_bytes([fixed[2], fixed[3]]),
            vni: u32::from_be_bytes([0, fixed[4], fixed[5], fixed[6]]),
            options: &block[..want.min(block.len())],
            complete: block.len() >= want,
        })
    }

    /// The options in order.
    #[inline]
    pub fn opts(&self) -> GeneveOpts<'a> {
        GeneveOpts::new(self.options)
    }
}

/// One Geneve option (RFC 8926, section 3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeneveOpt<'a> {
    /// Option class.
    pub class: u16,
    /// Type; its top bit is the critical bit.
    pub typ: u8,
    /// The option's data (its length field times 4 bytes).
    pub data: &'a [u8],
    /// Offset of the option's header in the option block.
    pub offset: usize,
}

impl GeneveOpt<'_> {
    /// True when the type's critical bit (0x80) is set.
    #[inline]
    pub fn critical(&self) -> bool {
        self.typ & 0x80 != 0
    }
}

/// Iterates over an option block. It stops cleanly at the end of the block and at an option
/// whose stated length runs past the block (a cut-off capture, or a malformed packet: cases
/// C27); [`GeneveOpts::malformed`] then tells which.
#[derive(Debug, Clone)]
pub struct GeneveOpts<'a> {
    block: &'a [u8],
    pos: usize,
    malformed: bool,
}

impl<'a> GeneveOpts<'a> {
    /// The options of `block` (the bytes after the fixed Geneve header).
    #[inline]
    pub fn new(block: &'a [u8]) -> GeneveOpts<'a> {
        GeneveOpts {
            block,
            pos: 0,
            malformed: false,
        }
    }

    /// True when iteration stopped at an option that did not fit the block.
    pub fn malformed(&self) -> bool {
        self.malformed
    }
}

impl<'a> Iterator for GeneveOpts<'a> {
    type Item = GeneveOpt<'a>;

    #[inline]
    fn next(&mut self) -> Option<GeneveOpt<'a>> {
        if self.malformed || self.pos >= self.block.len() {
            return None;
        }
        let rest = &self.block[self.pos..];
        let (Some(class), Some(&typ), Some(&len)) = (be16(rest, 0), rest.get(2), rest.get(3))
        else {
            self.malformed = true;
            return None;
        };
        let data_len = (len & 0x1f) as usize * 4;
        let Some(data) = rest.get(4..4 + data_len) else {
            self.malformed = true;
            return None;
        };
        let opt = GeneveOpt {
            class,
            typ,
            data,
            offset: self.pos,
        };
        self.pos += 4 + data_len;
        Some(opt)
    }
}

/// Where the Geneve header of a packet is: the transport header is UDP to port 6081 and the
/// Geneve fixed header fits in `l4`. Returns the UDP header and the Geneve view.
#[inline]
pub fn geneve_in_udp(l4proto: u8, l4: &[u8]) -> Option<(Udp, Geneve<'_>)> {
    if l4proto != 17 {
        return None;
    }
    let udp = Udp::parse(l4)?;
    if udp.dport != GENEVE_PORT {
        return None;
    }
    Some((udp, Geneve::parse(&l4[Udp::LEN..])?))
}

/// The 16-bit one's complement sum of `b` (RFC 1071), not folded; an odd last byte is padded
/// with zero.
pub fn ones_sum(b: &[u8]) -> u64 {
    let mut sum = 0u64;
    let mut chunks = b.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u64) << 8;
    }
    sum
}

fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The IPv4 header checksum of `hdr` (its checksum field, bytes 10..12, counted as zero), as
/// RFC 791 defines it.
pub fn ipv4_checksum(hdr: &[u8]) -> u16 {
    let mut sum = ones_sum(hdr);
    if let Some(c) = be16(hdr, 10) {
        sum += (!c) as u64; // take the stored checksum out of the sum
    }
    !fold(sum)
}

/// Incremental update of an Internet checksum (RFC 1624, eqn. 3) when the 16-bit aligned words
/// `removed` leave the covered data and `added` come in (for a changed field: its old and new
/// bytes; for inserted bytes: nothing and the bytes). Both slices have an even length.
pub fn csum_update(old: u16, removed: &[u8], added: &[u8]) -> u16 {
    let mut sum = (!old) as u64;
    let mut chunks = removed.chunks_exact(2);
    for c in &mut chunks {
        sum += (!u16::from_be_bytes([c[0], c[1]])) as u64;
    }
    sum += ones_sum(added);
    !fold(sum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// Geneve header, VNI 42, two options: {0x0102, 0x80, 00880022}, {0x0408, 0x42, 8 bytes}.
    fn sample() -> Vec<u8> {
        let mut b = alloc::vec![0x05, 0x40, 0x65, 0x58, 0x00, 0x00, 0x2a, 0x00];
        b.extend_from_slice(&[0x01, 0x02, 0x80, 0x01, 0x00, 0x88, 0x00, 0x22]);
        b.extend_from_slice(&[
            0x04, 0x08, 0x42, 0x02, 0x00, 0x40, 0x00, 0x76, 0x11, 0x22, 0x33, 0x44,
        ]);
        b
    }

    #[test]
    fn checksums() {
        // RFC 1071's example header (Wikipedia's IPv4 checksum example): 0xb861.
        let mut ip = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(ipv4_checksum(&ip), 0xb861);
        ip[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(
            ipv4_checksum(&ip),
            0xb861,
            "the stored checksum is not counted"
        );
        // Incremental: change total length 0x0073 -> 0x0083; same as recomputing.
        let upd = csum_update(0xb861, &[0x00, 0x73], &[0x00, 0x83]);
        ip[2..4].copy_from_slice(&[0x00, 0x83]);
        assert_eq!(upd, ipv4_checksum(&ip));
        // Adding words and taking them out again gives the checksum back.
        let more = csum_update(upd, &[], &[0x12, 0x34, 0xab, 0xcd]);
        assert_eq!(csum_update(more, &[0x12, 0x34, 0xab, 0xcd], &[]), upd);
    }

    #[test]
    fn udp() {
        let u = Udp::parse(&[0x12, 0x34, 0x17, 0xc1, 0x00, 0x20, 0xab, 0xcd]).unwrap();
        assert_eq!(
            u,
            Udp {
                sport: 0x1234,
                dport: 6081,
                len: 32,
                csum: 0xabcd
            }
        );
        assert_eq!(Udp::parse(&[0; 7]), None);
    }

    #[test]
    fn geneve_header_and_options() {
        let b = sample();
        let g = Geneve::parse(&b).unwrap();
        assert_eq!(
            (g.version, g.opt_len, g.oam, g.critical),
            (0, 5, false, true)
        );
        assert_eq!((g.protocol, g.vni, g.complete), (0x6558, 42, true));
        let opts: Vec<_> = g.opts().collect();
        assert_eq!(opts.len(), 2);
        assert_eq!(
            (opts[0].class, opts[0].typ, opts[0].data, opts[0].offset),
            (0x0102, 0x80, &[0, 0x88, 0, 0x22][..], 0)
        );
        assert!(opts[0].critical());
        assert_eq!(
            (
                opts[1].class,
                opts[1].typ,
                opts[1].data.len(),
                opts[1].offset
            ),
            (0x0408, 0x42, 8, 8)
        );
        assert!(!opts[1].critical());
    }

    #[test]
    fn option_running_past_the_block_stops_cleanly() {
        let mut b = sample();
        // Second option claims 31 words: past the 20-byte block.
        b[8 + 8 + 3] = 0x1f;
        let g = Geneve::parse(&b).unwrap();
        let mut it = g.opts();
        assert_eq!(it.next().map(|o| o.class), Some(0x0102));
        assert_eq!(it.next(), None);
        assert!(it.malformed());
        // A cut-off capture: the block is shorter than opt_len says.
        let g = Geneve::parse(&b[..8 + 6]).unwrap();
        assert!(!g.complete);
        let mut it = g.opts();
        assert_eq!(it.next(), None);
        assert!(it.malformed());
        // Length bits above the 5-bit field are reserved and ignored.
        let mut c = sample();
        c[8 + 3] = 0xe1;
        assert_eq!(Geneve::parse(&c).unwrap().opts().count(), 2);
    }

    #[test]
    fn geneve_in_udp_needs_port_6081() {
        let mut l4 = alloc::vec![0x30, 0x39, 0x17, 0xc1, 0, 36, 0, 0];
        l4.extend_from_slice(&sample());
        assert_eq!(geneve_in_udp(17, &l4).map(|(_, g)| g.vni), Some(42));
        assert!(geneve_in_udp(6, &l4).is_none());
        l4[3] = 0xc2;
        assert!(geneve_in_udp(17, &l4).is_none());
    }
}
