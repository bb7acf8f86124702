//! Reading what a multishot `recvmsg` put in a provided buffer (<linux/io_uring.h>: `struct
//! io_uring_recvmsg_out`, then the name and control areas the `msghdr` reserved, then the
//! payload), bounds-checked: a malformed buffer yields `None`, never a panic.
//!
//! AF_PACKET sockets receive with `PACKET_AUXDATA`, so the control area holds one `struct
//! tpacket_auxdata` per frame (`packet_recvmsg`): its `tp_status` says whether the frame's
//! checksum is partial (`TP_STATUS_CSUMNOTREADY`) and whether the kernel took a VLAN tag out
//! of it, as the `TPACKET_V3` header does.

use crate::tpacket::{self, TP_STATUS_CSUMNOTREADY, VlanTag};

/// Bytes of `struct io_uring_recvmsg_out` (`namelen`, `controllen`, `payloadlen`, `flags`).
pub(crate) const OUT_LEN: usize = 16;
/// Bytes of `struct cmsghdr` on this target (`cmsg_len` is a `size_t`, then two ints).
const CMSG_HDR: usize = size_of::<usize>() + 8;
/// Bytes of `struct tpacket_auxdata`.
const AUXDATA_LEN: usize = 20;
/// `CMSG_ALIGN`: to the size of a `size_t`.
const fn cmsg_align(n: usize) -> usize {
    n.next_multiple_of(size_of::<usize>())
}
/// Control bytes reserved per frame: `CMSG_SPACE(sizeof(struct tpacket_auxdata))`.
pub(crate) const CONTROL_LEN: usize = cmsg_align(CMSG_HDR) + cmsg_align(AUXDATA_LEN);
/// Where the payload starts in a buffer (no name area is reserved).
pub(crate) const HEAD: usize = OUT_LEN + CONTROL_LEN;
/// `SOL_PACKET` and `PACKET_AUXDATA` (<linux/if_packet.h>).
const SOL_PACKET: i32 = 263;
const PACKET_AUXDATA: i32 = 8;

/// One received frame in a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Msg {
    /// Offset of the frame in the buffer.
    pub start: u32,
    /// Bytes of the frame in the buffer.
    pub len: u32,
    /// The VLAN tag the kernel took out of the frame.
    pub vlan: Option<VlanTag>,
    /// `TP_STATUS_CSUMNOTREADY`: the TCP/UDP checksum is to be completed.
    pub csum_partial: bool,
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off + 4)?;
    Some(u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    let s = b.get(off..off + 2)?;
    Some(u16::from_ne_bytes([s[0], s[1]]))
}

/// The frame in buffer `b`, of which the completion reported `res` bytes used. Frames longer
/// than the buffer are cut to it (`MSG_TRUNC`, as `recv` cuts them).
pub(crate) fn parse(b: &[u8], res: u32) -> Option<Msg> {
    let used = (res as usize).min(b.len());
    if used < HEAD {
        return None;
    }
    let controllen = (u32_at(b, 4)? as usize).min(CONTROL_LEN);
    let payloadlen = u32_at(b, 8)? as usize;
    let mut status = 0;
    let mut vlan = None;
    let ctl = &b[OUT_LEN..OUT_LEN + controllen];
    let mut at = 0;
    while at + CMSG_HDR <= ctl.len() {
        let len = if size_of::<usize>() == 8 {
            let s = &ctl[at..at + 8];
            u64::from_ne_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]) as usize
        } else {
            u32_at(ctl, at)? as usize
        };
        let level = u32_at(ctl, at + CMSG_HDR - 8)? as i32;
        let kind = u32_at(ctl, at + CMSG_HDR - 4)? as i32;
        if len < CMSG_HDR || at + len > ctl.len() {
            break;
        }
        if level == SOL_PACKET && kind == PACKET_AUXDATA && len >= CMSG_HDR + AUXDATA_LEN {
            let d = at + CMSG_HDR;
            status = u32_at(ctl, d)?;
            vlan = tpacket::status_vlan(status, u16_at(ctl, d + 16)?, u16_at(ctl, d + 18)?);
        }
        at += cmsg_align(len);
    }
    Some(Msg {
        start: HEAD as u32,
        len: payloadlen.min(used - HEAD) as u32,
        vlan,
        csum_partial: status & TP_STATUS_CSUMNOTREADY != 0,
    })
}

/// Lays out `frame` in `b` as a multishot `recvmsg` with `PACKET_AUXDATA` would (status
/// `status`, VLAN fields `tci`/`tpid`); returns the bytes used. For the fake kernel.
#[cfg(test)]
pub(crate) fn lay_out(b: &mut [u8], frame: &[u8], status: u32, tci: u16, tpid: u16) -> usize {
    b[..HEAD].fill(0);
    let n = frame.len().min(b.len() - HEAD);
    let clen = CMSG_HDR + AUXDATA_LEN;
    b[4..8].copy_from_slice(&(clen as u32).to_ne_bytes());
    b[8..12].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
    if n < frame.len() {
        b[12..16].copy_from_slice(&(libc::MSG_TRUNC as u32).to_ne_bytes());
    }
    let c = OUT_LEN;
    if size_of::<usize>() == 8 {
        b[c..c + 8].copy_from_slice(&(clen as u64).to_ne_bytes());
    } else {
        b[c..c + 4].copy_from_slice(&(clen as u32).to_ne_bytes());
    }
    b[c + CMSG_HDR - 8..c + CMSG_HDR - 4].copy_from_slice(&(SOL_PACKET as u32).to_ne_bytes());
    b[c + CMSG_HDR - 4..c + CMSG_HDR].copy_from_slice(&(PACKET_AUXDATA as u32).to_ne_bytes());
    let d = c + CMSG_HDR;
    b[d..d + 4].copy_from_slice(&status.to_ne_bytes());
    b[d + 4..d + 8].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
    b[d + 8..d + 12].copy_from_slice(&(n as u32).to_ne_bytes());
    b[d + 16..d + 18].copy_from_slice(&tci.to_ne_bytes());
    b[d + 18..d + 20].copy_from_slice(&tpid.to_ne_bytes());
    b[HEAD..HEAD + n].copy_from_slice(&frame[..n]);
    HEAD + n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_space_is_cmsg_space_of_the_auxdata() {
        // CMSG_SPACE(20) on a 64-bit target: a 16-byte header and 20 bytes padded to 24.
        if size_of::<usize>() == 8 {
            assert_eq!(CONTROL_LEN, 40);
            assert_eq!(HEAD, 56);
        }
    }

    #[test]
    fn reads_the_frame_its_status_and_vlan_tag() {
        let mut b = vec![0u8; 256];
        let used = lay_out(&mut b, b"0123456789", 0x1 | 0x8 | 0x10, 0x2003, 0);
        let m = parse(&b, used as u32).unwrap();
        assert_eq!(
            &b[m.start as usize..(m.start + m.len) as usize],
            b"0123456789"
        );
        assert!(m.csum_partial);
        assert_eq!(m.vlan, Some([0x81, 0x00, 0x20, 0x03]));
        let used = lay_out(&mut b, b"abc", 0x1, 0, 0);
        let m = parse(&b, used as u32).unwrap();
        assert_eq!((m.len, m.csum_partial, m.vlan), (3, false, None));
    }

    #[test]
    fn a_frame_longer_than_the_buffer_is_cut_to_it() {
        let mut b = vec![0u8; HEAD + 8];
        let used = lay_out(&mut b, &[7; 100], 0x1, 0, 0);
        assert_eq!(parse(&b, used as u32).unwrap().len, 8);
    }

    #[test]
    fn malformed_buffers_yield_none_or_stay_in_bounds() {
        let b = vec![0u8; HEAD - 1];
        assert_eq!(parse(&b, 1000), None);
        let mut b = vec![0xffu8; 128];
        let m = parse(&b, 128).unwrap();
        assert!(m.start as usize + m.len as usize <= b.len());
        b[4..8].copy_from_slice(&0u32.to_ne_bytes());
        assert!(parse(&b, 128).is_some());
        assert_eq!(parse(&b, 10), None);
    }
}
