//! Type-length-value option lists as IPv4 (RFC 791 section 3.1) and TCP (RFC 9293 section 3.1)
//! carry them: kind 0 ends the list, kind 1 is a one-byte no-op, every other kind is followed by
//! a length byte counting the kind and length bytes themselves (so at least 2).

/// One option from an [`OptionIter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlvOption<'a> {
    /// Option kind (type) byte, kept as a number.
    pub kind: u8,
    /// Offset of the kind byte from the start of the option area.
    pub offset: usize,
    /// Option data after the kind and length bytes (empty for kinds 0 and 1).
    pub data: &'a [u8],
}

/// End of option list.
pub const KIND_END: u8 = 0;
/// No operation (one byte, padding).
pub const KIND_NOP: u8 = 1;

/// Iterator over an option area. Yields the end-of-list option (kind 0) and stops after it;
/// stops without yielding on an option whose length byte is missing, below 2, or runs past the
/// area ([`OptionIter::malformed`] then reports it).
#[derive(Debug, Clone)]
pub struct OptionIter<'a> {
    area: &'a [u8],
    pos: usize,
    malformed: bool,
}

impl<'a> OptionIter<'a> {
    /// Iterate over `area`, the option bytes after a fixed header.
    pub fn new(area: &'a [u8]) -> Self {
        OptionIter {
            area,
            pos: 0,
            malformed: false,
        }
    }

    /// Whether the walk stopped on a malformed option.
    pub fn malformed(&self) -> bool {
        self.malformed
    }
}

impl<'a> Iterator for OptionIter<'a> {
    type Item = TlvOption<'a>;

    fn next(&mut self) -> Option<TlvOption<'a>> {
        let offset = self.pos;
        let kind = *self.area.get(offset)?;
        if kind == KIND_END || kind == KIND_NOP {
            self.pos = if kind == KIND_END {
                self.area.len()
            } else {
                offset + 1
            };
            return Some(TlvOption {
                kind,
                offset,
                data: &[],
            });
        }
        let len = self.area.get(offset + 1).map_or(0, |&l| usize::from(l));
        match self.area.get(offset + 2..offset + len.max(2)) {
            Some(data) if len >= 2 => {
                self.pos = offset + len;
                Some(TlvOption { kind, offset, data })
            }
            _ => {
                self.malformed = true;
                self.pos = self.area.len();
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_syn_options() {
        // MSS 1460, SACK permitted, timestamps, NOP, window scale 7.
        let area = [
            2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
        ];
        let mut it = OptionIter::new(&area);
        let got: Vec<(u8, usize, usize)> = it
            .by_ref()
            .map(|o| (o.kind, o.offset, o.data.len()))
            .collect();
        assert_eq!(
            got,
            vec![(2, 0, 2), (4, 4, 0), (8, 6, 8), (1, 16, 0), (3, 17, 1)]
        );
        assert!(!it.malformed());
    }

    #[test]
    fn end_stops_and_bad_lengths_are_reported() {
        let got: Vec<u8> = OptionIter::new(&[1, 0, 2, 4, 0, 0])
            .map(|o| o.kind)
            .collect();
        assert_eq!(got, vec![1, 0]);
        for bad in [&[2u8, 1, 0][..], &[2, 9, 0, 0], &[7]] {
            let mut it = OptionIter::new(bad);
            assert_eq!(it.next(), None);
            assert!(it.malformed());
        }
    }
}
