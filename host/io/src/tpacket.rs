//! Reading `TPACKET_V3` blocks in place (<linux/if_packet.h>: `struct tpacket_block_desc`,
//! `struct tpacket3_hdr`), bounds-checked: a malformed block yields `None`, never a panic.

/// Offsets in `struct tpacket_block_desc` (`hdr.bh1`).
const NUM_PKTS: usize = 12;
const OFFSET_TO_FIRST_PKT: usize = 16;
/// Offsets in `struct tpacket3_hdr`.
const TP_NEXT_OFFSET: usize = 0;
const TP_SNAPLEN: usize = 12;
const TP_MAC: usize = 24;
/// Bytes of `struct tpacket3_hdr` we read (up to and including `tp_mac`/`tp_net`).
const HDR_LEN: usize = 28;

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off + 4)?;
    Some(u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

/// `(num_pkts, offset_to_first_pkt)` of a block the kernel handed over.
pub(crate) fn block(b: &[u8]) -> Option<(u32, u32)> {
    Some((u32_at(b, NUM_PKTS)?, u32_at(b, OFFSET_TO_FIRST_PKT)?))
}

/// The packet whose header is at `off` in block `b`: `(frame offset, frame length, offset of
/// the next packet's header)`.
pub(crate) fn packet(b: &[u8], off: u32) -> Option<(u32, u32, u32)> {
    let o = off as usize;
    if o.checked_add(HDR_LEN)? > b.len() {
        return None;
    }
    let next = u32_at(b, o + TP_NEXT_OFFSET)?;
    let snap = u32_at(b, o + TP_SNAPLEN)?;
    let mac = u16::from_ne_bytes([b[o + TP_MAC], b[o + TP_MAC + 1]]) as u32;
    let start = off.checked_add(mac)?;
    let end = start.checked_add(snap)?;
    if end as usize > b.len() {
        return None;
    }
    Some((start, snap, off.checked_add(next)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block of 256 bytes holding two packets as the kernel lays them out.
    fn sample() -> Vec<u8> {
        let mut b = vec![0u8; 256];
        b[12..16].copy_from_slice(&2u32.to_ne_bytes()); // num_pkts
        b[16..20].copy_from_slice(&48u32.to_ne_bytes()); // offset_to_first_pkt
        // packet 1 at 48: next 96, snaplen 10, mac 32
        b[48..52].copy_from_slice(&96u32.to_ne_bytes());
        b[60..64].copy_from_slice(&10u32.to_ne_bytes());
        b[72..74].copy_from_slice(&32u16.to_ne_bytes());
        b[80..90].copy_from_slice(b"0123456789");
        // packet 2 at 144: last (next 0), snaplen 4, mac 32
        b[156..160].copy_from_slice(&4u32.to_ne_bytes());
        b[168..170].copy_from_slice(&32u16.to_ne_bytes());
        b[176..180].copy_from_slice(b"abcd");
        b
    }

    #[test]
    fn walks_the_packets_of_a_block() {
        let b = sample();
        assert_eq!(block(&b), Some((2, 48)));
        let (f, n, next) = packet(&b, 48).unwrap();
        assert_eq!(&b[f as usize..(f + n) as usize], b"0123456789");
        assert_eq!(next, 144);
        let (f, n, _) = packet(&b, next).unwrap();
        assert_eq!(&b[f as usize..(f + n) as usize], b"abcd");
    }

    #[test]
    fn rejects_out_of_bounds_headers_and_frames() {
        let mut b = sample();
        assert_eq!(packet(&b, 250), None, "header past the block");
        b[156..160].copy_from_slice(&200u32.to_ne_bytes()); // snaplen past the end
        assert_eq!(packet(&b, 144), None);
        assert_eq!(packet(&b, u32::MAX - 3), None);
        assert_eq!(block(&b[..10]), None);
    }
}
