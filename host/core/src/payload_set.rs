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

use crate::engine::Packet;
use crate::expr::{Load, PktState, Src};
use crate::ext::ExtEdit;

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

/// One's complement sum of 16-bit words of `b` (an odd last byte padded with 0).
fn sum16(b: &[u8]) -> u32 {
    b.chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum()
}

fn fold(mut s: u32) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// The checksum `csum` after bytes with word sum `old` became bytes with word sum `new`
/// (RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m')).
fn update(csum: u16, old: u32, new: u32) -> u16 {
    let not_old = fold(old) ^ 0xffff;
    !fold(u32::from(!csum) + u32::from(not_old) + fold(new) as u32)
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
                let Some(found) = tcp_option(p, kind)? else {
                    return Some(Vec::new());
                };
                let (i, end) = found.ok()?;
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

/// The first TCP option of `kind` in `p` as `(start, end)` frame offsets, its length read
/// as the kernel's `optlen` does: `None` when `p` has no TCP header (not TCP, a later
/// fragment), `Some(None)` when it has no such option, `Some(Some(Err(())))` when the option
/// runs past the TCP header (the callers refuse it as the kernel does).
#[allow(clippy::type_complexity)]
fn tcp_option(p: &Packet<'_>, kind: u8) -> Option<Option<Result<(usize, usize), ()>>> {
    let l4 = p.meta.l4.filter(|l| l.proto == 6 && l.fragoff == 0)?;
    let Some((i, hdr_end)) = crate::expr::opt_base(p, false, kind) else {
        return Some(None);
    };
    let optl = match p.frame.get(i + 1) {
        Some(&l) if kind > 1 && l != 0 => usize::from(l),
        _ => 1,
    };
    let th = usize::from(l4.offset);
    let doff = usize::from(*p.frame.get(th + 12)? >> 4) * 4;
    Some(Some(if i + optl > (th + doff).min(hdr_end) {
        Err(())
    } else {
        Ok((i, i + optl))
    }))
}

/// `reset tcp option KIND` on `p` (the kernel's nft_exthdr_tcp_strip_eval): the edits that
/// turn the first option of that kind into NOPs (kind 1) with the TCP checksum updated;
/// `Some(Vec::new())` when the packet has no such option; `None` when it has no TCP header
/// (the rule stops, NFT_BREAK); `Some(None)` when the option runs past the TCP header (the
/// kernel drops the packet).
pub(crate) fn opt_reset(p: &Packet<'_>, kind: u8) -> Option<Option<Vec<ExtEdit>>> {
    let Some(found) = tcp_option(p, kind)? else {
        return Some(Some(Vec::new()));
    };
    let Ok((i, end)) = found else {
        return Some(None);
    };
    Some(write(p, i, &vec![1u8; end - i], Covered::Transport))
}

/// The edits that write `new` at frame offset `start` of `p` and update the checksums that
/// `covered` says cover it.
fn write(p: &Packet<'_>, start: usize, new: &[u8], covered: Covered) -> Option<Vec<ExtEdit>> {
    let len = new.len();
    let new = new.to_vec();
    {
        let mut out = Vec::with_capacity(3);
        // Sums over the 16-bit aligned words that hold the change.
        let a = start & !1;
        let b = (start + len).div_ceil(2) * 2;
        let mut after = p.frame.get(a..b.min(p.frame.len()))?.to_vec();
        let old_sum = sum16(&after);
        after[start - a..start - a + len].copy_from_slice(&new);
        let new_sum = sum16(&after);
        out.push(ExtEdit::Set {
            offset: start as u32,
            data: new,
        });
        let csum_at = |p: &Packet<'_>, at: usize| -> Option<u16> {
            p.frame
                .get(at..at + 2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
        };
        let mut fix = |at: usize, zero_means_none: bool| {
            if let Some(c) = csum_at(p, at)
                && !(zero_means_none && c == 0)
                && !(at >= start && at < start + len)
            {
                let n = update(c, old_sum, new_sum);
                out.push(ExtEdit::Set {
                    offset: at as u32,
                    data: n.to_be_bytes().to_vec(),
                });
            }
        };
        let l4_csum = |p: &Packet<'_>| -> Option<(usize, bool)> {
            let l4 = p.meta.l4.filter(|l| l.fragoff == 0)?;
            let th = usize::from(l4.offset);
            match l4.proto {
                6 => Some((th + 16, false)),
                // Over IPv4 a UDP checksum of 0 means none.
                17 => Some((th + 6, p.meta.l3 == L3Kind::Ipv4)),
                _ => None,
            }
        };
        match covered {
            Covered::Ipv4Header { pseudo } => {
                fix(usize::from(p.meta.net_offset) + 10, false);
                if pseudo && let Some((at, z)) = l4_csum(p) {
                    fix(at, z);
                }
            }
            Covered::Ipv6Header { pseudo: true } | Covered::Transport => {
                if let Some((at, z)) = l4_csum(p) {
                    fix(at, z);
                }
            }
            Covered::Ipv6Header { pseudo: false } | Covered::None => {}
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incremental_update_equals_a_recomputed_checksum() {
        // An IPv4 header with its checksum, then the TTL (byte 8) changed from 64 to 23.
        let mut h = [
            0x45u8, 0, 0, 20, 0x12, 0x34, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let full = |h: &[u8]| !fold(sum16(h));
        let c = full(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        let old = sum16(&h[8..10]);
        h[8] = 23;
        let new = sum16(&h[8..10]);
        let upd = update(c, old, new);
        h[10..12].copy_from_slice(&[0, 0]);
        assert_eq!(upd, full(&h));
    }
}
