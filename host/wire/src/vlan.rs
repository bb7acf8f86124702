//! IEEE 802.1Q / 802.1ad VLAN tags. A tag is the TPID (0x8100, 0x88a8 or 0x9100, read where an
//! EtherType would be) followed by the 2-byte TCI and the 2-byte EtherType of what comes next.
//! The view [`Tag`] covers the 4 bytes after the TPID; [`Stack`] walks stacked tags.

use crate::bytes::be16;
use crate::ethernet::{self, is_vlan_tpid};
use crate::{Error, Result};

/// Byte offsets inside a tag body (after the TPID).
pub mod field {
    /// Tag control information: PCP (3 bits), DEI (1 bit), VID (12 bits).
    pub const TCI: usize = 0;
    /// EtherType of what follows the tag (another TPID when tags are stacked).
    pub const ETHERTYPE: usize = 2;
    /// First byte after the tag.
    pub const PAYLOAD: usize = 4;
}

/// Length in bytes of a tag body (TCI + EtherType), not counting the TPID before it.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A view of one tag body: the 4 bytes after its TPID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag<'a> {
    buf: &'a [u8],
}

impl<'a> Tag<'a> {
    /// Wrap `buf`, which starts right after the TPID.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 4 bytes.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Tag { buf })
    }

    /// Tag control information (16 bits).
    pub fn tci(&self) -> u16 {
        be16(self.buf, field::TCI)
    }

    /// Priority code point (3 bits), `vlan pcp`.
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator (1 bit), `vlan dei` (formerly CFI).
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (12 bits), `vlan id`.
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// EtherType of what follows, `vlan type`.
    pub fn ethertype(&self) -> u16 {
        be16(self.buf, field::ETHERTYPE)
    }

    /// Bytes after the tag.
    pub fn payload(&self) -> &'a [u8] {
        &self.buf[field::PAYLOAD..]
    }
}

/// One tag found by [`Stack`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackedTag<'a> {
    /// Offset in bytes of the TPID from the start of the frame.
    pub offset: usize,
    /// The TPID that announced the tag.
    pub tpid: u16,
    /// The tag body.
    pub tag: Tag<'a>,
}

/// Iterator over the VLAN tags of an Ethernet frame, outermost first. It follows TPIDs 0x8100,
/// 0x88a8 and 0x9100 in any order and depth, and stops at the first other EtherType or at a tag
/// cut off by the end of the frame ([`Stack::truncated`] tells which).
#[derive(Debug, Clone)]
pub struct Stack<'a> {
    frame: &'a [u8],
    /// Offset of the next type field to look at.
    type_at: usize,
    truncated: bool,
}

impl<'a> Stack<'a> {
    /// Walk the tags of `frame`, a whole Ethernet frame.
    pub fn new(frame: ethernet::Frame<'a>) -> Self {
        Stack {
            frame: frame.bytes(),
            type_at: ethernet::field::ETHERTYPE,
            truncated: false,
        }
    }

    /// Offset of the type field after the tags walked so far; once the iterator is exhausted this
    /// is where the payload's EtherType (or a cut-off TPID) sits.
    pub fn type_offset(&self) -> usize {
        self.type_at
    }

    /// The EtherType at [`Stack::type_offset`].
    pub fn ethertype(&self) -> u16 {
        be16(self.frame, self.type_at)
    }

    /// Whether the walk stopped on a tag cut off by the end of the frame.
    pub fn truncated(&self) -> bool {
        self.truncated
    }
}

impl<'a> Iterator for Stack<'a> {
    type Item = StackedTag<'a>;

    fn next(&mut self) -> Option<StackedTag<'a>> {
        if self.truncated {
            return None;
        }
        let tpid = be16(self.frame, self.type_at);
        if !is_vlan_tpid(tpid) {
            return None;
        }
        match Tag::new_checked(&self.frame[self.type_at + 2..]) {
            Ok(tag) => {
                let offset = self.type_at;
                self.type_at += HEADER_LEN;
                Some(StackedTag { offset, tpid, tag })
            }
            Err(_) => {
                self.truncated = true;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// dst, src, 0x88a8 VID 200 (PCP 5), 0x8100 VID 2001 (DEI), 0x9100 VID 7, then ARP.
    const TRIPLE: [u8; 28] = [
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, //
        0x88, 0xa8, 0xa0, 0xc8, // S-tag: PCP 5, VID 200
        0x81, 0x00, 0x17, 0xd1, // C-tag: DEI, VID 2001
        0x91, 0x00, 0x00, 0x07, // 0x9100 tag: VID 7
        0x08, 0x06, 0x00, 0x01, // ARP follows
    ];

    #[test]
    fn tag_fields() {
        let t = Tag::new_checked(&TRIPLE[14..]).unwrap();
        assert_eq!(t.tci(), 0xa0c8);
        assert_eq!((t.pcp(), t.dei(), t.vid()), (5, false, 200));
        assert_eq!(t.ethertype(), 0x8100);
        let t = Tag::new_checked(&TRIPLE[18..]).unwrap();
        assert_eq!((t.pcp(), t.dei(), t.vid()), (0, true, 2001));
        assert_eq!(Tag::new_checked(&TRIPLE[25..]), Err(Error::Truncated));
    }

    #[test]
    fn stack_of_three() {
        let f = ethernet::Frame::new_checked(&TRIPLE).unwrap();
        let mut s = Stack::new(f);
        let tags: Vec<(usize, u16, u16)> = s
            .by_ref()
            .map(|t| (t.offset, t.tpid, t.tag.vid()))
            .collect();
        assert_eq!(
            tags,
            vec![(12, 0x88a8, 200), (16, 0x8100, 2001), (20, 0x9100, 7)]
        );
        assert_eq!(
            (s.type_offset(), s.ethertype(), s.truncated()),
            (24, 0x0806, false)
        );
    }

    #[test]
    fn stack_stops_on_truncated_tag() {
        let f = ethernet::Frame::new_checked(&TRIPLE[..19]).unwrap();
        let mut s = Stack::new(f);
        assert_eq!(s.next().map(|t| t.tag.vid()), Some(200));
        assert_eq!(s.next(), None);
        assert!(s.truncated());
        assert_eq!((s.type_offset(), s.ethertype()), (16, 0x8100));
    }
}
