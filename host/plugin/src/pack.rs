//! The flat packet buffer of a batched call (layout in `wit/plugin.wit`, "The packet
//! buffer") and the checks of what comes back.

use wasp_core::{ExtEdit, ExtPacket, ExtVerdict};

use crate::bindings::{Edit, EditOp, Verdict};

/// Size of the per-packet header.
pub(crate) const HEADER: usize = 32;

/// Largest frame an edit may produce (an IPv4 total length's range, with the L2 header).
pub(crate) const MAX_FRAME: u64 = 65535;

/// Record stride for a plugin's `window`: 32 + window, rounded up to a multiple of 8.
pub(crate) fn stride(window: u32) -> usize {
    (HEADER + window as usize).div_ceil(8) * 8
}

/// The stride for a batch: [`stride`] of the window, or less when every frame of the batch is
/// shorter than the window (32 + the longest frame, rounded up to 8; `wit/plugin.wit`).
pub(crate) fn batch_stride(pkts: &[ExtPacket<'_>], window: u32, stride: usize) -> usize {
    let longest = pkts.iter().map(|p| p.frame.len()).max().unwrap_or(0);
    if longest >= window as usize {
        return stride;
    }
    (HEADER + longest).div_ceil(8) * 8
}

/// Write `pkts` into `buf` (resized to `pkts.len() * stride`), one record each. `stride` is
/// at least 32 + the longest `min(frame, window)` (see [`batch_stride`]).
pub(crate) fn pack(buf: &mut Vec<u8>, pkts: &[ExtPacket<'_>], window: u32, stride: usize) {
    let need = pkts.len() * stride;
    if buf.len() != need {
        buf.resize(need, 0);
    }
    pack_into(buf, pkts, window, stride);
}

/// Write `pkts` into `buf` (at least `pkts.len() * stride` bytes; the rest is left alone),
/// one record each, as [`pack`]: the host's buffer, or a plugin's batch area in its memory.
#[inline]
pub(crate) fn pack_into(buf: &mut [u8], pkts: &[ExtPacket<'_>], window: u32, stride: usize) {
    for (rec, p) in buf.chunks_exact_mut(stride).zip(pkts) {
        let caplen = p.frame.len().min(window as usize);
        rec[0..4].copy_from_slice(&p.len.to_le_bytes());
        rec[4..8].copy_from_slice(&p.iif.to_le_bytes());
        rec[8..12].copy_from_slice(&p.mark.to_le_bytes());
        rec[12..16].copy_from_slice(&p.elem.to_le_bytes());
        rec[16..18].copy_from_slice(&p.l3.to_le_bytes());
        rec[18..20].copy_from_slice(&p.l4.to_le_bytes());
        rec[20..22].copy_from_slice(&(caplen as u16).to_le_bytes());
        rec[22] = p.l4proto;
        rec[23] = p.nfproto;
        rec[24..28].copy_from_slice(&p.iftype.to_le_bytes());
        rec[28..32].fill(0);
        // Window 0 (a counter): headers only, no call to copy or clear nothing.
        if rec.len() > HEADER {
            let (win, tail) = rec[HEADER..].split_at_mut(caplen);
            copy_small(win, &p.frame[..caplen]);
            if !tail.is_empty() {
                tail.fill(0);
            }
        }
    }
}

/// `dst.copy_from_slice(src)` (same lengths) in 16-byte steps, which compile to vector moves
/// in place: a window of 64 or 128 bytes was a call of `memmove` per packet, ~6 % of a
/// geneve match's samples (perf/RESULTS.md, "Geneve match: batch area").
#[inline]
fn copy_small(dst: &mut [u8], src: &[u8]) {
    let mut d = dst.chunks_exact_mut(16);
    let mut s = src.chunks_exact(16);
    for (d, s) in (&mut d).zip(&mut s) {
        d.copy_from_slice(s);
    }
    for (d, s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d = *s;
    }
}

/// Check a match result: one byte per packet, each 0 or 1; write it into `out`.
pub(crate) fn check_matches(res: &[u8], out: &mut [bool]) -> Result<(), String> {
    if res.len() != out.len() {
        return Err(format!("{} answers for {} packets", res.len(), out.len()));
    }
    if let Some(i) = res.iter().position(|b| *b > 1) {
        return Err(format!(
            "answer {} for packet {i} (0 or 1 expected)",
            res[i]
        ));
    }
    for (o, r) in out.iter_mut().zip(res) {
        *o = *r == 1;
    }
    Ok(())
}

/// Most packets of a `fast-match.matches-first` call (the bits of a `u64`).
pub(crate) const FIRST_MAX: usize = 64;

/// Check a `matches-first` result for `out.len()` packets (no bit at or past it) and write the
/// answers of the packets not marked `more` into `out` (the others are left alone).
pub(crate) fn check_first(hits: u64, more: u64, out: &mut [bool]) -> Result<(), String> {
    let n = out.len();
    let high = if n >= 64 { 0 } else { !0u64 << n };
    if (hits | more) & high != 0 {
        return Err(format!(
            "answer bits {:#x}, more bits {:#x} for {n} packets",
            hits & high,
            more & high
        ));
    }
    for (i, o) in out.iter_mut().enumerate() {
        if more >> i & 1 == 0 {
            *o = hits >> i & 1 == 1;
        }
    }
    Ok(())
}

/// Check a statement result against the packets (one verdict each; every edit names a packet
/// of the batch and stays within its frame as the earlier edits left it; the frame stays at
/// most 65535 bytes) and write it into `verdicts` and `edits`. Nothing is written on error.
pub(crate) fn check_apply(
    verdicts_in: &[Verdict],
    edits_in: Vec<Edit>,
    pkts: &[ExtPacket<'_>],
    verdicts: &mut [ExtVerdict],
    edits: &mut Vec<(usize, ExtEdit)>,
) -> Result<(), String> {
    if verdicts_in.is_empty() && edits_in.is_empty() {
        // Every packet continues (`statement-result.verdicts` empty).
        verdicts.fill(ExtVerdict::Continue);
        return Ok(());
    }
    if verdicts_in.len() != pkts.len() {
        return Err(format!(
            "{} verdicts for {} packets",
            verdicts_in.len(),
            pkts.len()
        ));
    }
    let mut lens: Vec<u64> = Vec::new();
    if !edits_in.is_empty() {
        lens = pkts.iter().map(|p| p.frame.len() as u64).collect();
    }
    for (n, e) in edits_in.iter().enumerate() {
        let i = e.packet as usize;
        let Some(len) = lens.get_mut(i) else {
            return Err(format!(
                "edit {n} names packet {} of {}",
                e.packet,
                pkts.len()
            ));
        };
        let off = u64::from(e.offset);
        let (ok, new_len) = match &e.op {
            EditOp::Set(d) => (off + d.len() as u64 <= *len, *len),
            EditOp::Insert(d) => (off <= *len, *len + d.len() as u64),
            EditOp::Remove(c) => (
                off + u64::from(*c) <= *len,
                len.saturating_sub(u64::from(*c)),
            ),
        };
        if !ok || new_len > MAX_FRAME {
            return Err(format!(
                "edit {n} of packet {i} at offset {off} is out of its {len}-byte frame"
            ));
        }
        *len = new_len;
    }
    for (o, v) in verdicts.iter_mut().zip(verdicts_in) {
        *o = match v {
            Verdict::Continue => ExtVerdict::Continue,
            Verdict::Accept => ExtVerdict::Accept,
            Verdict::Drop => ExtVerdict::Drop,
            Verdict::Return => ExtVerdict::Return,
        };
    }
    edits.extend(edits_in.into_iter().map(|e| {
        let offset = e.offset;
        let edit = match e.op {
            EditOp::Set(data) => ExtEdit::Set { offset, data },
            EditOp::Insert(data) => ExtEdit::Insert { offset, data },
            EditOp::Remove(count) => ExtEdit::Remove { offset, count },
        };
        (e.packet as usize, edit)
    }));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(frame: &[u8]) -> ExtPacket<'_> {
        ExtPacket {
            frame,
            len: frame.len() as u32,
            iif: 3,
            mark: 0x1234,
            elem: 0,
            l3: 14,
            l4: 34,
            l4proto: 17,
            nfproto: 2,
            iftype: 1,
        }
    }

    #[test]
    fn layout_matches_the_wit_table() {
        assert_eq!(stride(0), 32);
        assert_eq!(stride(1), 40);
        assert_eq!(stride(64), 96);
        let f: Vec<u8> = (0..10).collect();
        let mut buf = vec![0xee; 7];
        pack(&mut buf, &[pkt(&f), pkt(&f[..3])], 8, stride(8));
        assert_eq!(buf.len(), 80);
        assert_eq!(&buf[0..4], &10u32.to_le_bytes());
        assert_eq!(&buf[4..8], &3u32.to_le_bytes());
        assert_eq!(&buf[8..12], &0x1234u32.to_le_bytes());
        assert_eq!(&buf[16..24], &[14, 0, 34, 0, 8, 0, 17, 2]);
        assert_eq!(&buf[24..32], &[1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&buf[32..40], &[0, 1, 2, 3, 4, 5, 6, 7]);
        // Second record: caplen 3, the rest of the window zero.
        assert_eq!(&buf[40 + 20..40 + 22], &[3, 0]);
        assert_eq!(&buf[72..80], &[0, 1, 2, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn small_copies_are_whole() {
        let src: Vec<u8> = (0..=200).collect();
        for n in [0, 1, 15, 16, 17, 60, 64, 127, 128, 200] {
            let mut dst = vec![0xee; n];
            copy_small(&mut dst, &src[..n]);
            assert_eq!(dst, src[..n]);
        }
    }

    #[test]
    fn short_frames_get_a_shorter_stride() {
        let (a, b) = ([1u8; 60], [2u8; 20]);
        let pkts = [pkt(&a), pkt(&b)];
        // Window 336: the longest frame (60) sets it: 32 + 60 rounded up to 96.
        assert_eq!(batch_stride(&pkts, 336, stride(336)), 96);
        // Window 40: the window sets it.
        assert_eq!(batch_stride(&pkts, 40, stride(40)), 72);
        let mut buf = Vec::new();
        pack(&mut buf, &pkts, 336, 96);
        assert_eq!(buf.len(), 192);
        assert_eq!(&buf[20..22], &60u16.to_le_bytes());
        assert_eq!(&buf[32..92], &a[..]);
        assert_eq!(&buf[92..96], &[0; 4]);
        assert_eq!(&buf[96 + 32..96 + 52], &b[..]);
        assert!(buf[96 + 52..].iter().all(|x| *x == 0));
    }

    #[test]
    fn empty_verdicts_mean_every_packet_continues() {
        let f = [0u8; 20];
        let pkts = [pkt(&f), pkt(&f)];
        let (mut v, mut e) = ([ExtVerdict::Drop; 2], Vec::new());
        check_apply(&[], Vec::new(), &pkts, &mut v, &mut e).unwrap();
        assert_eq!(v, [ExtVerdict::Continue; 2]);
        // Empty verdicts with an edit: malformed (the edit's packet has no verdict).
        let ed = Edit {
            packet: 0,
            offset: 0,
            op: EditOp::Set(vec![1]),
        };
        assert!(check_apply(&[], vec![ed], &pkts, &mut v, &mut e).is_err());
        // One verdict for two packets: malformed.
        assert!(check_apply(&[Verdict::Accept], Vec::new(), &pkts, &mut v, &mut e).is_err());
    }

    #[test]
    fn first_answers_are_checked() {
        let mut out = [false; 3];
        check_first(0b101, 0b010, &mut out).unwrap();
        assert_eq!(out, [true, false, true]);
        // Packet 1 marked `more`: its answer is left for the second call.
        let mut out = [true; 3];
        check_first(0b000, 0b010, &mut out).unwrap();
        assert_eq!(out, [false, true, false]);
        assert!(check_first(0b1000, 0, &mut out).is_err());
        assert!(check_first(0, 1 << 63, &mut out).is_err());
        let mut all = [false; 64];
        check_first(!0, 0, &mut all).unwrap();
        assert!(all.iter().all(|b| *b));
    }

    #[test]
    fn results_are_checked() {
        let mut out = [false; 2];
        assert!(check_matches(&[1], &mut out).is_err());
        assert!(check_matches(&[1, 2], &mut out).is_err());
        check_matches(&[1, 0], &mut out).unwrap();
        assert_eq!(out, [true, false]);

        let f = [0u8; 20];
        let pkts = [pkt(&f)];
        let (mut v, mut e) = ([ExtVerdict::Drop], Vec::new());
        let set = |off, n| Edit {
            packet: 0,
            offset: off,
            op: EditOp::Set(vec![0; n]),
        };
        assert!(check_apply(&[Verdict::Accept], vec![set(19, 2)], &pkts, &mut v, &mut e).is_err());
        assert!(
            check_apply(
                &[Verdict::Accept],
                vec![Edit {
                    packet: 1,
                    ..set(0, 1)
                }],
                &pkts,
                &mut v,
                &mut e
            )
            .is_err()
        );
        // An insert makes room for a later set past the old end.
        let ins = Edit {
            packet: 0,
            offset: 20,
            op: EditOp::Insert(vec![9; 4]),
        };
        assert!(e.is_empty() && v == [ExtVerdict::Drop]);
        check_apply(
            &[Verdict::Accept],
            vec![ins, set(22, 2)],
            &pkts,
            &mut v,
            &mut e,
        )
        .unwrap();
        assert_eq!(v, [ExtVerdict::Accept]);
        assert_eq!(e.len(), 2);
        let rm = Edit {
            packet: 0,
            offset: 10,
            op: EditOp::Remove(11),
        };
        assert!(check_apply(&[Verdict::Accept], vec![rm], &pkts, &mut v, &mut e).is_err());
    }
}
