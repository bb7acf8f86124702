//! The payload statement (`ip dscp set cs1`, `tcp dport set 8080`, `@ih,58,6 set 0`): the
//! kernel's `nft_payload_set_eval`. The field's bits are replaced in the packet, and the
//! checksums that cover them are updated incrementally (RFC 1624), as nft asks the kernel to:
//! the IPv4 header checksum for a field of the IPv4 header (NFT_PAYLOAD_CSUM_INET at offset
//! 10), the TCP or UDP checksum for a transport header field and, with
//! NFT_PAYLOAD_L4CSUM_PSEUDOHDR, for the addresses of the pseudo-header. A UDP checksum of 0
//! (none, over IPv4) stays 0; the checksum fields themselves are written as they are.
//!
//! The statement's effect is an edit ([`crate::ExtEdit::Set`]) of the bytes that change: later
//! expressions of the walk see it, and the caller applies the edits to the frame it sends.

use wasp_wire::meta::L3Kind;

use crate::expr::{Load, PktState, Src};
use crate::ext::ExtEdit;
use crate::packet::Packet;

/// A compiled payload statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadSet {
    /// Where the field is (its covering bytes, shift and mask, as for a match).
    pub field: Load,
    /// The new value.
    pub value: Load,
}

/// Which checksum covers a written byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Covered {
    /// The IPv4 header checksum and, for the addresses, the transport checksum.
    Ipv4Header { pseudo: bool },
    /// The IPv6 header (no checksum); its addresses are in the transport pseudo-header.
    Ipv6Header { pseudo: bool },
    /// The transport header or what follows it.
    Transport,
    /// Nothing that wasp updates (link layer).
    None,
}

impl PayloadSet {
    /// Run the statement on packet `p` (`st` its state): the edits it makes, as absolute
    /// frame offsets, or `None` when the field is not there (the kernel's NFT_BREAK: the
    /// rule stops).
    pub(crate) fn edits(&self, p: &Packet<'_>, st: &PktState) -> Option<Vec<ExtEdit>> {
        let f = &self.field;
        let (base, covered) = match f.src {
            Src::Link => (0, Covered::None),
            Src::Net => {
                let net = usize::from(p.meta.net_offset);
                let off = usize::from(f.off);
                match p.meta.l3 {
                    L3Kind::Ipv4 => (
                        net,
                        Covered::Ipv4Header {
                            pseudo: (12..20).contains(&off),
                        },
                    ),
                    L3Kind::Ipv6 => (
                        net,
                        Covered::Ipv6Header {
                            pseudo: (8..40).contains(&off),
                        },
                    ),
                    _ => (net, Covered::None),
                }
            }
            Src::Transport => {
                let l4 = p.meta.l4?;
                if l4.fragoff != 0 {
                    return None;
                }
                (usize::from(l4.offset), Covered::Transport)
            }
            Src::Inner => (crate::expr::inner_base(p)?, Covered::None),
            Src::Opt {
                sctp: false,
                kind,
                present: false,
            } => {
                // nft_exthdr_tcp_set_eval: a TCP packet without the option is left as it is
                // and the rule goes on; an option too short for the field stops the rule.
                let (i, end) = match tcp_option(p, kind) {
                    OptAt::Found(i, end) => (i, end),
                    OptAt::Missing => return Some(Vec::new()),
                    OptAt::NoTcp | OptAt::PastHeader => return None,
                };
                if usize::from(f.off) + usize::from(f.len) > end - i {
                    return None;
                }
                (i, Covered::Transport)
            }
            _ => return None,
        };
        let start = base + usize::from(f.off);
        let len = usize::from(f.len);
        let old = p.frame.get(start..start + len)?;
        let v = self.value.eval(p, st)?;
        let old_word = old.iter().fold(0u128, |a, b| a << 8 | u128::from(*b));
        let field_mask = f.mask << f.shift;
        let new_word = (old_word & !field_mask) | ((v & f.mask) << f.shift);
        if let Src::Opt { kind: MSS, .. } = f.src
            && len == 2
            && new_word >= old_word
        {
            // The kernel never raises an MSS: "increase can cause connection to stall".
            return Some(Vec::new());
        }
        let new: Vec<u8> = new_word.to_be_bytes()[16 - len..].to_vec();
        write(p, start, &new, covered)
    }
}

/// The TCP option kind of the maximum segment size.
const MSS: u8 = 2;

/// Where the first TCP option of a kind is ([`tcp_option`]).
enum OptAt {
    /// No TCP header (not TCP, a later fragment).
    NoTcp,
    /// A TCP header without such an option.
    Missing,
    /// The option runs past the TCP header (the kernel refuses it).
    PastHeader,
    /// The option's start and end, frame offsets.
    Found(usize, usize),
}

/// The first TCP option of `kind` in `p`, its length read as the kernel's `optlen` does.
fn tcp_option(p: &Packet<'_>, kind: u8) -> OptAt {
    let Some(l4) = p.meta.l4.filter(|l| l.proto == 6 && l.fragoff == 0) else {
        return OptAt::NoTcp;
    };
    let Some((i, hdr_end)) = crate::expr::opt_base(p, false, kind) else {
        return OptAt::Missing;
    };
    let optl = match p.frame.get(i + 1) {
        Some(&l) if kind > 1 && l != 0 => usize::from(l),
        _ => 1,
    };
    let th = usize::from(l4.offset);
    let Some(&doff) = p.frame.get(th + 12) else {
        return OptAt::NoTcp;
    };
    if i + optl > (th + usize::from(doff >> 4) * 4).min(hdr_end) {
        OptAt::PastHeader
    } else {
        OptAt::Found(i, i + optl)
    }
}

/// `reset tcp option KIND` on `p` (the kernel's nft_exthdr_tcp_strip_eval): the edits that
/// turn the first option of that kind into NOPs (kind 1) with the TCP checksum updated;
/// `Some(Vec::new())` when the packet has no such option; `None` when it has no TCP header
/// (the rule stops, NFT_BREAK); `Some(None)` when the option runs past the TCP header (the
/// kernel drops the packet).
pub(crate) fn opt_reset(p: &Packet<'_>, kind: u8) -> Option<Option<Vec<ExtEdit>>> {
    match tcp_option(p, kind) {
        OptAt::NoTcp => None,
        OptAt::Missing => Some(Some(Vec::new())),
        OptAt::PastHeader => Some(None),
        OptAt::Found(i, end) => Some(write(p, i, &vec![1u8; end - i], Covered::Transport)),
    }
}

/// The edits that write `new` at frame offset `start` of `p` and update the checksums that
/// `covered` says cover it (RFC 1624 over the 16-bit words that hold the change,
/// [`wasp_wire::checksum::adjust`]).
fn write(p: &Packet<'_>, start: usize, new: &[u8], covered: Covered) -> Option<Vec<ExtEdit>> {
    let len = new.len();
    let a = start & !1;
    let b = (start + len).div_ceil(2) * 2;
    let mut before = p.frame.get(a..b.min(p.frame.len()))?.to_vec();
    if before.len() % 2 == 1 {
        // The frame's odd last byte, padded as the checksum pads it.
        before.push(0);
    }
    let mut after = before.clone();
    after
        .get_mut(start - a..start - a + len)?
        .copy_from_slice(new);
    let mut out = Vec::with_capacity(3);
    out.push(ExtEdit::Set {
        offset: start as u32,
        data: new.to_vec(),
    });
    let mut fix = |at: usize, zero_means_none: bool| {
        if let Some(c) = p
            .frame
            .get(at..at + 2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            && !(zero_means_none && c == 0)
            && !(at >= start && at < start + len)
        {
            let n = wasp_wire::checksum::adjust(c, &before, &after);
            out.push(ExtEdit::Set {
                offset: at as u32,
                data: n.to_be_bytes().to_vec(),
            });
        }
    };
    let l4 = p.meta.l4.filter(|l| l.fragoff == 0);
    let l4_csum = l4.and_then(|l| {
        let th = usize::from(l.offset);
        match l.proto {
            6 => Some((th + 16, false)),
            // Over IPv4 a UDP checksum of 0 means none.
            17 => Some((th + 6, p.meta.l3 == L3Kind::Ipv4)),
            _ => None,
        }
    });
    match covered {
        Covered::Ipv4Header { pseudo } => {
            fix(usize::from(p.meta.net_offset) + 10, false);
            if pseudo && let Some((at, z)) = l4_csum {
                fix(at, z);
            }
        }
        Covered::Ipv6Header { pseudo: true } | Covered::Transport => {
            if let Some((at, z)) = l4_csum {
                fix(at, z);
            }
        }
        Covered::Ipv6Header { pseudo: false } | Covered::None => {}
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incremental_update_equals_a_recomputed_checksum() {
        // An IPv4 header with its checksum, then the TTL (byte 8) written from 64 to 23
        // through the statement's edits: the checksum edit equals a full computation.
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let mut h = vec![
            0x45u8, 0, 0, 20, 0x12, 0x34, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let c = wasp_wire::checksum::checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&h);
        let p = Packet {
            frame: &f,
            meta: wasp_wire::parse(&f),
            iifname: "",
            mark: 0,
            oifname: "",
            ct: crate::CtMeta::NONE,
            ct_detail: None,
            nftrace: false,
            route: None,
        };
        let edits = write(&p, 14 + 8, &[23], Covered::Ipv4Header { pseudo: false }).unwrap();
        let mut g = f.clone();
        for e in &edits {
            crate::ext::apply_edit(&mut g, e);
        }
        assert_eq!(g[14 + 8], 23);
        assert_eq!(wasp_wire::checksum::checksum(&g[14..34]), 0);
        assert_ne!(g[24..26], f[24..26], "the checksum changed");
    }
}
