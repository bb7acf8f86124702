//! A linear list of elements whose fields are inclusive ranges, for interval sets, prefixes and
//! concatenated ranges. Lookup is a scan: the first element (in insertion order) whose every
//! field holds the key's field wins. The kernel refuses overlapping intervals at load, so with a
//! valid ruleset at most one element matches and the order does not matter.

/// One element: per field, the lowest and highest key bytes it covers (inclusive), laid out as
/// the key is (fields concatenated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeElem {
    /// Low end of every field, concatenated (same length as a key).
    pub low: Box<[u8]>,
    /// High end of every field, concatenated.
    pub high: Box<[u8]>,
    /// Element data.
    pub data: u32,
}

/// Linear range set over keys made of fields of the given byte lengths.
#[derive(Debug, Clone)]
pub struct RangeList {
    field_lens: Box<[usize]>,
    key_len: usize,
    elems: Vec<RangeElem>,
}

impl RangeList {
    /// An empty list for keys whose fields are `field_lens` bytes long.
    pub fn new(field_lens: &[usize]) -> Self {
        RangeList {
            field_lens: field_lens.into(),
            key_len: field_lens.iter().sum(),
            elems: Vec::new(),
        }
    }

    /// Key length in bytes.
    pub fn key_len(&self) -> usize {
        self.key_len
    }

    /// Add an element covering `low..=high` in each field. Returns `false` (and adds nothing)
    /// when a bound has the wrong length or `low > high` in some field.
    pub fn insert(&mut self, low: &[u8], high: &[u8], data: u32) -> bool {
        if low.len() != self.key_len || high.len() != self.key_len {
            return false;
        }
        let mut at = 0;
        for &n in self.field_lens.iter() {
            if low[at..at + n] > high[at..at + n] {
                return false;
            }
            at += n;
        }
        self.elems.push(RangeElem {
            low: low.into(),
            high: high.into(),
            data,
        });
        true
    }

    /// Data of the first element holding `key` in every field.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<u32> {
        if key.len() != self.key_len {
            return None;
        }
        'elems: for e in &self.elems {
            let mut at = 0;
            for &n in self.field_lens.iter() {
                let k = &key[at..at + n];
                if k < &e.low[at..at + n] || k > &e.high[at..at + n] {
                    continue 'elems;
                }
                at += n;
            }
            return Some(e.data);
        }
        None
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.elems.len()
    }

    /// `true` when empty.
    pub fn is_empty(&self) -> bool {
        self.elems.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prefix_and_range_fields() {
        // ip saddr . tcp dport { 10.0.0.0/8 . 1-1024, 192.168.1.1 . 22 }
        let mut r = RangeList::new(&[4, 2]);
        assert!(r.insert(&[10, 0, 0, 0, 0, 1], &[10, 255, 255, 255, 4, 0], 5));
        assert!(r.insert(&[192, 168, 1, 1, 0, 22], &[192, 168, 1, 1, 0, 22], 6));
        assert!(
            !r.insert(&[0, 0, 0, 2, 0, 0], &[0, 0, 0, 1, 0, 0], 9),
            "low > high"
        );
        assert_eq!(r.get(&[10, 1, 2, 3, 0, 22]), Some(5));
        assert_eq!(r.get(&[10, 1, 2, 3, 4, 0]), Some(5));
        assert_eq!(
            r.get(&[10, 1, 2, 3, 4, 1]),
            None,
            "port 1025 above the range"
        );
        assert_eq!(r.get(&[11, 0, 0, 0, 0, 22]), None);
        assert_eq!(r.get(&[192, 168, 1, 1, 0, 22]), Some(6));
        assert_eq!(r.get(&[192, 168, 1, 1, 0, 23]), None);
    }

    proptest! {
        /// Byte-string bounds behave as the numbers they encode.
        #[test]
        fn matches_numeric_ranges(lo in any::<u16>(), hi in any::<u16>(), k in any::<u16>()) {
            let mut r = RangeList::new(&[2]);
            let ok = r.insert(&lo.to_be_bytes(), &hi.to_be_bytes(), 1);
            prop_assert_eq!(ok, lo <= hi);
            let want = (lo <= hi && lo <= k && k <= hi).then_some(1);
            prop_assert_eq!(r.get(&k.to_be_bytes()), want);
        }
    }
}
