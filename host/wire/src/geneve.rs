//! Geneve header (RFC 8926), UDP port 6081: version, option length, O and C bits, protocol type,
//! VNI, and the option TLVs (class, type whose top bit is the critical bit, length in 4-byte
//! words, data).

use crate::bytes::{be16, be24, put16};
use crate::{Error, Result};

/// Byte offsets of the Geneve header fields.
pub mod field {
    /// Version (high 2 bits) and option length in 4-byte words (low 6 bits).
    pub const VER_OPTLEN: usize = 0;
    /// O bit (0x80, control packet), C bit (0x40, critical options present), 6 reserved bits.
    pub const FLAGS: usize = 1;
    /// Protocol type of the payload (an EtherType; 0x6558 = Ethernet).
    pub const PROTOCOL: usize = 2;
    /// Virtual network identifier (24 bits).
    pub const VNI: usize = 4;
    /// Reserved 8 bits.
    pub const RESERVED: usize = 7;
    /// Options start here.
    pub const OPTIONS: usize = 8;
}

/// Byte offsets inside an option TLV.
pub mod opt_field {
    /// Option class (16 bits).
    pub const CLASS: usize = 0;
    /// Type (8 bits, top bit = critical).
    pub const TYPE: usize = 2;
    /// Three reserved bits and the data length in 4-byte words (5 bits).
    pub const LEN: usize = 3;
    /// Option data starts here.
    pub const DATA: usize = 4;
}

/// Length in bytes of the fixed Geneve header.
pub const MIN_HEADER_LEN: usize = field::OPTIONS;
/// The O (control packet) bit in the flags byte.
pub const FLAG_O: u8 = 0x80;
/// The C (critical options present) bit in the flags byte.
pub const FLAG_C: u8 = 0x40;
/// The critical bit in an option's type.
pub const OPT_TYPE_CRITICAL: u8 = 0x80;

/// A view of a Geneve header whose options (`opt_len` words) are within the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    buf: &'a [u8],
}

impl<'a> Header<'a> {
    /// Wrap `buf`, which starts at the Geneve header (the outer UDP payload). Any version is
    /// accepted; the caller decides what to do with a version other than 0.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 8 bytes plus the option length.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let h = Header { buf };
        if buf.len() < h.header_len() {
            return Err(Error::Truncated);
        }
        Ok(h)
    }
    /// Version (2 bits; 0 is the only one defined).
    pub fn version(&self) -> u8 {
        self.buf[field::VER_OPTLEN] >> 6
    }
    /// Length of the options in 4-byte words (6 bits).
    pub fn opt_len_words(&self) -> u8 {
        self.buf[field::VER_OPTLEN] & 0x3f
    }
    /// Length of the header with its options, in bytes.
    pub fn header_len(&self) -> usize {
        MIN_HEADER_LEN + usize::from(self.opt_len_words()) * 4
    }
    /// O bit: a control packet.
    pub fn oam(&self) -> bool {
        self.buf[field::FLAGS] & FLAG_O != 0
    }
    /// C bit: critical options are present.
    pub fn critical(&self) -> bool {
        self.buf[field::FLAGS] & FLAG_C != 0
    }
    /// Protocol type of the payload.
    pub fn protocol(&self) -> u16 {
        be16(self.buf, field::PROTOCOL)
    }
    /// Virtual network identifier.
    pub fn vni(&self) -> u32 {
        be24(self.buf, field::VNI)
    }
    /// The option bytes (`opt_len_words * 4` of them).
    pub fn options(&self) -> &'a [u8] {
        &self.buf[field::OPTIONS..self.header_len()]
    }
    /// Iterator over the option TLVs.
    pub fn option_iter(&self) -> OptionIter<'a> {
        OptionIter {
            rest: self.options(),
            offset: 0,
        }
    }
    /// Bytes after the options (to the end of the buffer).
    pub fn payload(&self) -> &'a [u8] {
        &self.buf[self.header_len()..]
    }
}

/// One Geneve option TLV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeneveOption<'a> {
    /// Offset of the option from the start of the option area.
    pub offset: usize,
    /// Option class.
    pub class: u16,
    /// Type, critical bit included.
    pub opt_type: u8,
    /// Data length in 4-byte words (0 to 31).
    pub len_words: u8,
    /// The data (`len_words * 4` bytes).
    pub data: &'a [u8],
}

impl GeneveOption<'_> {
    /// Whether the critical bit (top bit of the type) is set.
    pub fn is_critical(&self) -> bool {
        self.opt_type & OPT_TYPE_CRITICAL != 0
    }
}

/// Iterator over Geneve option TLVs. Stops cleanly at the end of the option area or at an option
/// whose header or data is cut off by it; [`OptionIter::remainder`] then holds the unread bytes
/// (non-empty means a truncated option).
#[derive(Debug, Clone)]
pub struct OptionIter<'a> {
    rest: &'a [u8],
    offset: usize,
}

impl<'a> OptionIter<'a> {
    /// Iterate over `area`, a Geneve option area.
    pub fn new(area: &'a [u8]) -> Self {
        OptionIter {
            rest: area,
            offset: 0,
        }
    }
    /// Bytes not consumed: empty after a clean walk, the truncated option after a bad one.
    pub fn remainder(&self) -> &'a [u8] {
        self.rest
    }
}

impl<'a> Iterator for OptionIter<'a> {
    type Item = GeneveOption<'a>;

    fn next(&mut self) -> Option<GeneveOption<'a>> {
        let hdr = self.rest.get(..opt_field::DATA)?;
        let len_words = hdr[opt_field::LEN] & 0x1f;
        let total = opt_field::DATA + usize::from(len_words) * 4;
        let data = self.rest.get(opt_field::DATA..total)?;
        let opt = GeneveOption {
            offset: self.offset,
            class: be16(hdr, opt_field::CLASS),
            opt_type: hdr[opt_field::TYPE],
            len_words,
            data,
        };
        self.rest = &self.rest[total..];
        self.offset += total;
        Some(opt)
    }
}

/// The fields of a Geneve header (version 0), for building one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr<'a> {
    /// O bit: a control packet.
    pub oam: bool,
    /// C bit: critical options are present.
    pub critical: bool,
    /// Protocol type of the payload (an EtherType; 0x6558 = Ethernet).
    pub protocol: u16,
    /// Virtual network identifier (24 bits).
    pub vni: u32,
    /// The options, already encoded as TLVs: a multiple of 4 bytes, at most 252.
    pub options: &'a [u8],
}

impl Repr<'_> {
    /// Length in bytes of the header with its options.
    pub fn header_len(&self) -> usize {
        MIN_HEADER_LEN + self.options.len()
    }

    /// Write the header and its options into `buf[..self.header_len()]`.
    ///
    /// # Errors
    /// [`Error::Malformed`] for options that are not a multiple of 4 bytes or longer than 252
    /// bytes (the 6-bit length field), or a VNI over 24 bits; [`Error::Truncated`] when `buf`
    /// is shorter than the header. Nothing is written then.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let words = self.options.len() / 4;
        if !self.options.len().is_multiple_of(4) || words > 0x3f || self.vni > 0xff_ffff {
            return Err(Error::Malformed);
        }
        let buf = buf.get_mut(..self.header_len()).ok_or(Error::Truncated)?;
        buf[field::VER_OPTLEN] = words as u8;
        buf[field::FLAGS] =
            if self.oam { FLAG_O } else { 0 } | if self.critical { FLAG_C } else { 0 };
        put16(buf, field::PROTOCOL, self.protocol);
        buf[field::VNI..field::VNI + 3].copy_from_slice(&self.vni.to_be_bytes()[1..]);
        buf[field::RESERVED] = 0;
        buf[field::OPTIONS..].copy_from_slice(self.options);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// opt_len 8 words, C bit, protocol 0x0800, VNI 0; options: class 0x0132 type 1 (4 data
    /// bytes), class 0x0132 type 0x82 (critical, 8 data bytes), class 0xffff type 3 (no data).
    const HDR: [u8; 42] = [
        0x08, 0x40, 0x08, 0x00, 0, 0, 0, 0, //
        0x01, 0x32, 0x01, 0x01, 1, 2, 3, 4, //
        0x01, 0x32, 0x82, 0x02, 1, 2, 3, 4, 5, 6, 7, 8, //
        0xff, 0xff, 0x03, 0xe0, // reserved bits set, length 0
        0, 0, 0, 0, 0, 0, 0, 0, // two empty class-0 options fill the area
        0x45, 0x00,
    ];

    #[test]
    fn header_fields() {
        let h = Header::new_checked(&HDR).unwrap();
        assert_eq!((h.version(), h.opt_len_words(), h.header_len()), (0, 8, 40));
        assert!(h.critical() && !h.oam());
        assert_eq!((h.protocol(), h.vni()), (0x0800, 0));
        assert_eq!(h.payload(), &[0x45, 0x00]);
        assert_eq!(Header::new_checked(&HDR[..39]), Err(Error::Truncated));
    }

    #[test]
    fn options_of_mixed_lengths() {
        let h = Header::new_checked(&HDR).unwrap();
        let mut it = h.option_iter();
        let got: Vec<(usize, u16, u8, bool, u8, usize)> = it
            .by_ref()
            .map(|o| {
                (
                    o.offset,
                    o.class,
                    o.opt_type,
                    o.is_critical(),
                    o.len_words,
                    o.data.len(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (0, 0x0132, 0x01, false, 1, 4),
                (8, 0x0132, 0x82, true, 2, 8),
                (20, 0xffff, 0x03, false, 0, 0),
                (24, 0x0000, 0x00, false, 0, 0),
                (28, 0x0000, 0x00, false, 0, 0),
            ]
        );
        assert!(it.remainder().is_empty());
    }

    #[test]
    fn truncated_option_stops_cleanly() {
        // One option announcing 2 words of data in an area of 8 bytes.
        let mut it = OptionIter::new(&[0x01, 0x00, 0x01, 0x02, 0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(it.next(), None);
        assert_eq!(it.remainder().len(), 8);
        // A 3-byte leftover after a good option.
        let mut it = OptionIter::new(&[0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01]);
        assert_eq!(it.next().map(|o| o.len_words), Some(0));
        assert_eq!(it.next(), None);
        assert_eq!(it.remainder().len(), 3);
    }

    #[test]
    fn repr_builds_the_header() {
        let r = Repr {
            oam: false,
            critical: true,
            protocol: 0x0800,
            vni: 0,
            options: &HDR[8..40],
        };
        let mut b = [0xaa; 41];
        r.emit(&mut b).unwrap();
        assert_eq!(b[..40], HDR[..40]);
        assert_eq!(b[40], 0xaa, "nothing past the header");
        let r = Repr {
            oam: true,
            critical: false,
            protocol: 0x6558,
            vni: 0x00ab_cdef,
            options: &[],
        };
        let mut b = [0u8; 8];
        r.emit(&mut b).unwrap();
        assert_eq!(b, [0, 0x80, 0x65, 0x58, 0xab, 0xcd, 0xef, 0]);
        let h = Header::new_checked(&b).unwrap();
        assert_eq!((h.vni(), h.oam(), h.protocol()), (0xab_cdef, true, 0x6558));
        assert_eq!(r.emit(&mut b[..7]), Err(Error::Truncated));
        let bad = Repr { vni: 1 << 24, ..r };
        assert_eq!(bad.emit(&mut b), Err(Error::Malformed));
        let bad = Repr {
            options: &[0; 3],
            ..r
        };
        assert_eq!(bad.emit(&mut [0; 11]), Err(Error::Malformed));
    }
}
