//! The flat packet buffer of a batched call (`wit/plugin.wit`, "The packet buffer").

/// Bytes of the header before each packet's window.
pub const HEADER_LEN: usize = 32;

/// The stride the host uses for a plugin that declared `window`: 32 + window, rounded up to a
/// multiple of 8.
pub const fn stride_for(window: u32) -> usize {
    (HEADER_LEN + window as usize).div_ceil(8) * 8
}

/// The packets of one call: `count` records of `stride` bytes. A buffer shorter than
/// `count * stride`, or a stride under 32, yields only the records that fit whole (none for a
/// bad stride), so a malformed call cannot make the guest read out of bounds.
#[derive(Debug, Clone, Copy)]
pub struct Packets<'a> {
    batch: &'a [u8],
    count: usize,
    stride: usize,
}

impl<'a> Packets<'a> {
    /// The packets in `batch` as the host passed them.
    #[inline]
    pub fn new(batch: &'a [u8], count: u32, stride: u32) -> Packets<'a> {
        let stride = stride as usize;
        let fits = if stride < HEADER_LEN {
            0
        } else {
            batch.len() / stride
        };
        Packets {
            batch,
            count: (count as usize).min(fits),
            stride,
        }
    }

    /// Number of packets that can be read (the call's `count` unless the buffer is short).
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when there is no packet.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Packet `i` (0-based), if there is one.
    #[inline]
    pub fn get(&self, i: usize) -> Option<Pkt<'a>> {
        if i >= self.count {
            return None;
        }
        let rec = self.batch.get(i * self.stride..(i + 1) * self.stride)?;
        Some(Pkt::from_record(rec))
    }

    /// The packets in order.
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = Pkt<'a>> + 'a {
        // Whole records only (`count` of them fit: see `new`), without a bounds check each.
        let stride = self.stride.max(HEADER_LEN);
        self.batch
            .chunks_exact(stride)
            .take(self.count)
            .map(Pkt::from_record)
    }
}

/// One packet of a batch: the header fields and the leading bytes of the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pkt<'a> {
    /// Frame length in bytes as received (nft `meta length`).
    pub len: u32,
    /// Input interface index (0 in a replay).
    pub iif: u32,
    /// Packet mark (nft `meta mark`).
    pub mark: u32,
    /// For a per-element stateful expression, the set element's id + 1; else 0.
    pub elem: u32,
    /// Offset of the network header in the frame (0xffff: none).
    pub l3: u16,
    /// Offset of the transport header (0xffff: none, or a non-first fragment).
    pub l4: u16,
    /// Bytes of the frame present in the window (`min(len, window)`).
    pub caplen: u16,
    /// Transport protocol number (nft `meta l4proto`; 0 when none).
    pub l4proto: u8,
    /// 2 for IPv4, 10 for IPv6, 0 otherwise (nft `meta nfproto`).
    pub nfproto: u8,
    /// ARPHRD type of the input device (1 for Ethernet).
    pub iftype: u32,
    /// The frame's first `caplen` bytes (fewer if the record is shorter), Ethernet header first.
    pub bytes: &'a [u8],
}

/// `nfproto` of IPv4.
pub const NFPROTO_IPV4: u8 = 2;
/// `nfproto` of IPv6.
pub const NFPROTO_IPV6: u8 = 10;

impl<'a> Pkt<'a> {
    /// Reads one record (at least [`HEADER_LEN`] bytes).
    #[inline]
    fn from_record(rec: &'a [u8]) -> Pkt<'a> {
        // One bounds check for the header, none per field.
        let (head, window) = rec.split_at(HEADER_LEN);
        let head: &[u8; HEADER_LEN] = head.try_into().expect("HEADER_LEN bytes");
        let u32_at =
            |o: usize| u32::from_le_bytes([head[o], head[o + 1], head[o + 2], head[o + 3]]);
        let u16_at = |o: usize| u16::from_le_bytes([head[o], head[o + 1]]);
        let caplen = u16_at(20);
        let bytes = &window[..(caplen as usize).min(window.len())];
        Pkt {
            len: u32_at(0),
            iif: u32_at(4),
            mark: u32_at(8),
            elem: u32_at(12),
            l3: u16_at(16),
            l4: u16_at(18),
            caplen,
            l4proto: head[22],
            nfproto: head[23],
            iftype: u32_at(24),
            bytes,
        }
    }

    /// The bytes from the network header on, if there is one inside the window.
    #[inline]
    pub fn l3(&self) -> Option<&'a [u8]> {
        self.at_offset(self.l3)
    }

    /// The bytes from the transport header on, if there is one inside the window.
    #[inline]
    pub fn l4(&self) -> Option<&'a [u8]> {
        self.at_offset(self.l4)
    }

    #[inline]
    fn at_offset(&self, off: u16) -> Option<&'a [u8]> {
        if off == 0xffff {
            return None;
        }
        self.bytes.get(off as usize..)
    }
}

/// Writes one record as the host does: for tests of plugins and of the SDK.
#[cfg(any(test, not(target_arch = "wasm32")))]
pub mod testing {
    use super::{HEADER_LEN, stride_for};
    use alloc::vec::Vec;

    /// The header fields of a test packet (see [`super::Pkt`]); `frame` is the whole frame.
    #[derive(Debug, Clone, Default)]
    pub struct TestPkt {
        /// The frame, Ethernet header first; `len` is its length.
        pub frame: Vec<u8>,
        /// `iif`.
        pub iif: u32,
        /// `mark`.
        pub mark: u32,
        /// `elem`.
        pub elem: u32,
        /// `l3` (0xffff for none).
        pub l3: u16,
        /// `l4` (0xffff for none).
        pub l4: u16,
        /// `l4proto`.
        pub l4proto: u8,
        /// `nfproto`.
        pub nfproto: u8,
    }

    /// A batch buffer for `window`: returns (buffer, count, stride).
    pub fn batch(pkts: &[TestPkt], window: u32) -> (Vec<u8>, u32, u32) {
        let stride = stride_for(window);
        let mut buf = Vec::new();
        for p in pkts {
            let caplen = p.frame.len().min(window as usize);
            let start = buf.len();
            buf.resize(start + stride, 0);
            let rec = &mut buf[start..];
            rec[0..4].copy_from_slice(&(p.frame.len() as u32).to_le_bytes());
            rec[4..8].copy_from_slice(&p.iif.to_le_bytes());
            rec[8..12].copy_from_slice(&p.mark.to_le_bytes());
            rec[12..16].copy_from_slice(&p.elem.to_le_bytes());
            rec[16..18].copy_from_slice(&p.l3.to_le_bytes());
            rec[18..20].copy_from_slice(&p.l4.to_le_bytes());
            rec[20..22].copy_from_slice(&(caplen as u16).to_le_bytes());
            rec[22] = p.l4proto;
            rec[23] = p.nfproto;
            rec[24..28].copy_from_slice(&1u32.to_le_bytes());
            rec[HEADER_LEN..HEADER_LEN + caplen].copy_from_slice(&p.frame[..caplen]);
        }
        (buf, pkts.len() as u32, stride as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{TestPkt, batch};
    use super::*;
    use alloc::vec;

    #[test]
    fn stride_rounds_to_eight() {
        assert_eq!(stride_for(0), 32);
        assert_eq!(stride_for(1), 40);
        assert_eq!(stride_for(64), 96);
        assert_eq!(stride_for(1514), 1552);
    }

    #[test]
    fn fields_and_window_are_read() {
        let a = TestPkt {
            frame: (0..100u8).collect(),
            iif: 3,
            mark: 0xdead_beef,
            elem: 7,
            l3: 14,
            l4: 34,
            l4proto: 17,
            nfproto: 2,
        };
        let b = TestPkt {
            frame: vec![9; 20],
            l3: 0xffff,
            l4: 0xffff,
            ..Default::default()
        };
        let (buf, count, stride) = batch(&[a, b], 64);
        assert_eq!(stride, 96);
        let pkts = Packets::new(&buf, count, stride);
        assert_eq!(pkts.len(), 2);
        let p = pkts.get(0).unwrap();
        assert_eq!((p.len, p.iif, p.mark, p.elem), (100, 3, 0xdead_beef, 7));
        assert_eq!(
            (p.l3, p.l4, p.caplen, p.l4proto, p.nfproto, p.iftype),
            (14, 34, 64, 17, 2, 1)
        );
        assert_eq!(p.bytes.len(), 64);
        assert_eq!(p.l4().unwrap()[0], 34);
        let q = pkts.get(1).unwrap();
        assert_eq!((q.len, q.caplen, q.bytes.len()), (20, 20, 20));
        assert_eq!(q.l3(), None);
        assert_eq!(pkts.iter().count(), 2);
    }

    #[test]
    fn short_buffer_and_bad_stride_read_nothing_out_of_bounds() {
        let (buf, _, stride) = batch(
            &[TestPkt {
                frame: vec![1; 10],
                ..Default::default()
            }],
            8,
        );
        // count says 5, the buffer holds 1.
        assert_eq!(Packets::new(&buf, 5, stride).len(), 1);
        assert_eq!(Packets::new(&buf, 1, 16).len(), 0);
        assert_eq!(Packets::new(&buf[..39], 1, stride).len(), 0);
        // A caplen larger than the window is clipped to the record.
        let mut bad = buf.clone();
        bad[20..22].copy_from_slice(&500u16.to_le_bytes());
        assert_eq!(Packets::new(&bad, 1, stride).get(0).unwrap().bytes.len(), 8);
    }
}
