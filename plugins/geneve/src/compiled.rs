//! The match as the packet path runs it: [`Compiled`], made once per use site from a
//! [`Match`], gives the same answer as [`eval_match`] with less work per packet in the code
//! Cranelift makes of it (perf/RESULTS.md, "Geneve match: batch area"): one pass over the
//! options for all `opt` clauses (a bit per clause), each option's 4-byte header read as one
//! little-endian word and compared under a mask (class, type, critical bit and, for a data
//! clause, the length), and no call per packet. [`eval_match`] stays the reference; the tests
//! compare both on every case.

use alloc::vec::Vec;
use wasp_plugin_sdk::Pkt;
use wasp_plugin_sdk::hdr::{GENEVE_PORT, Geneve, Udp};

use crate::{Match, eval_match};

/// One `opt` clause on an option's header word (read little-endian: byte 0, the class's high
/// byte, in bits 0..8; the type in bits 16..24; the length in words in bits 24..29).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Clause {
    mask: u32,
    value: u32,
    /// Data and mask of a data clause (its length is in `mask`/`value`).
    data: Option<(Vec<u8>, Vec<u8>)>,
}

/// A [`Match`] compiled for the packet path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    vni: Option<u32>,
    present: bool,
    clauses: Vec<Clause>,
    /// A bit per clause.
    all: u64,
    /// More than 64 clauses: [`eval_match`] does the work.
    slow: bool,
    /// Exactly one `opt` clause and no data (`opt class C type T`, the common match): its
    /// mask and value, walked by a loop small enough for Cranelift to keep in registers.
    one: Option<(u32, u32)>,
    /// The answer depends on the options (`present` or an `opt` clause).
    wants_opts: bool,
}

/// [`Compiled::first`]: the packet's answer is "no".
pub const NO: u8 = 0;
/// [`Compiled::first`]: the packet's answer is "yes".
pub const YES: u8 = 1;
/// [`Compiled::first`]: the packet needs bytes past its first window.
pub const MORE: u8 = 2;

/// A clause that no option meets (`value` has a bit outside `mask`).
const NEVER: (u32, u32) = (0, 1);

impl Compiled {
    /// Compiles `m`.
    pub fn new(m: &Match) -> Compiled {
        let clauses: Vec<Clause> = m
            .opts
            .iter()
            .map(|o| {
                let (mut mask, mut value) = (0u32, 0u32);
                if let Some(c) = o.class {
                    mask |= 0xffff;
                    value |= u32::from(c.swap_bytes());
                }
                if let Some(t) = o.typ {
                    mask |= 0xff << 16;
                    value |= u32::from(t) << 16;
                }
                if o.critical {
                    if o.typ.is_some_and(|t| t & 0x80 == 0) {
                        (mask, value) = NEVER;
                    } else {
                        mask |= 0x80 << 16;
                        value |= 0x80 << 16;
                    }
                }
                if let Some((d, _)) = &o.data {
                    // An option's data is 0..=124 bytes, a multiple of 4.
                    if d.len() % 4 != 0 || d.len() > crate::MAX_OPT_DATA {
                        (mask, value) = NEVER;
                    } else if (mask, value) != NEVER {
                        mask |= 0x1f << 24;
                        value |= ((d.len() / 4) as u32) << 24;
                    }
                }
                Clause {
                    mask,
                    value,
                    data: o.data.clone(),
                }
            })
            .collect();
        let n = clauses.len();
        let one = match clauses.as_slice() {
            [c] if c.data.is_none() => Some((c.mask, c.value)),
            _ => None,
        };
        Compiled {
            vni: m.vni,
            present: m.present,
            all: if n >= 64 { !0 } else { (1u64 << n) - 1 },
            slow: n > 64,
            one,
            wants_opts: m.present || n > 0,
            clauses,
        }
    }

    /// The mask and value of the match when it is one `opt` clause without data and no
    /// `vni`: then [`first_one`] gives the same answers as [`Compiled::first`], with the
    /// dispatch out of the loop over the packets.
    pub fn one_clause(&self) -> Option<(u32, u32)> {
        self.one.filter(|_| self.vni.is_none())
    }

    /// The fast-match answer for a packet cut to its first window: [`MORE`] where
    /// [`crate::needs_more`] says so, else [`YES`] or [`NO`] as [`Compiled::eval`]. Inlined
    /// into the loop over the packets: one function prologue per call, not per packet.
    #[inline(always)]
    pub fn first(&self, m: &Match, p: &Pkt<'_>) -> u8 {
        let b = p.bytes;
        if b.len() < p.len as usize && p.l4proto == 17 && p.l4 != 0xffff {
            // Cut short: as `needs_more`.
            let l4 = p.l4 as usize;
            let head = l4 + Udp::LEN + Geneve::LEN;
            let port = b
                .get(l4 + 2..l4 + 4)
                .map(|d| u16::from_be_bytes([d[0], d[1]]));
            if head > b.len() {
                return if port.is_none_or(|d| d == GENEVE_PORT) {
                    MORE
                } else {
                    NO
                };
            }
            if port == Some(GENEVE_PORT)
                && self.wants_opts
                && head + (b[l4 + Udp::LEN] & 0x3f) as usize * 4 > b.len()
            {
                return MORE;
            }
        }
        u8::from(self.eval(m, p))
    }

    /// [`eval_match`] of the [`Match`] this was compiled from (`m`, used only past 64
    /// clauses).
    #[inline(always)]
    pub fn eval(&self, m: &Match, p: &Pkt<'_>) -> bool {
        match self.one {
            Some((mask, value)) if self.vni.is_none() => one(mask, value, p),
            _ => self.eval_general(m, p.bytes, p.l4, p.l4proto),
        }
    }

    /// [`Compiled::eval`] for every other match: out of line, so that the loop over the
    /// packets of the common one stays small; it takes the three fields the match reads
    /// rather than a `&Pkt`, which made the loop store every packet's fields in memory.
    #[inline(never)]
    fn eval_general(&self, m: &Match, b: &[u8], l4: u16, l4proto: u8) -> bool {
        if self.slow {
            // `eval_match` reads these three fields only.
            let p = Pkt {
                len: 0,
                iif: 0,
                mark: 0,
                elem: 0,
                l3: 0xffff,
                l4,
                caplen: b.len() as u16,
                l4proto,
                nfproto: 0,
                iftype: 0,
                bytes: b,
            };
            return eval_match(m, &p);
        }
        if l4proto != 17 || l4 == 0xffff {
            return false;
        }
        let l4 = l4 as usize;
        let head = l4 + Udp::LEN + Geneve::LEN;
        let Some(h) = b.get(l4..head) else {
            return false;
        };
        if u16::from_be_bytes([h[2], h[3]]) != GENEVE_PORT {
            return false;
        }
        if let Some(v) = self.vni
            && u32::from_be_bytes([0, h[12], h[13], h[14]]) != v
        {
            return false;
        }
        let want = (h[8] & 0x3f) as usize * 4;
        let rest = &b[head..];
        let block = &rest[..want.min(rest.len())];
        let (mut found, mut seen) = (0u64, false);
        let mut pos = 0;
        // As `GeneveOpts`: an option whose header or data runs past the block ends the walk.
        while let Some(w) = block.get(pos..pos + 4) {
            let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            let end = pos + 4 + (w >> 24 & 0x1f) as usize * 4;
            let Some(data) = block.get(pos + 4..end) else {
                break;
            };
            seen = true;
            for (i, c) in self.clauses.iter().enumerate() {
                if w & c.mask == c.value
                    && c.data.as_ref().is_none_or(|(d, m)| {
                        data.iter().zip(d).zip(m).all(|((x, y), m)| x & m == y & m)
                    })
                {
                    found |= 1 << i;
                }
            }
            if found == self.all {
                return true;
            }
            pos = end;
        }
        (seen || !self.present) && found == self.all
    }
}

/// [`Compiled::first`] of a match that is one `opt` clause without data and no `vni`
/// ([`Compiled::one_clause`] gives `mask` and `value`): the headers read once for both
/// questions (does it need more bytes, is the option there).
#[inline(always)]
pub fn first_one(mask: u32, value: u32, p: &Pkt<'_>) -> u8 {
    if p.l4proto != 17 || p.l4 == 0xffff {
        return NO;
    }
    let b = p.bytes;
    let cut = b.len() < p.len as usize;
    let l4 = p.l4 as usize;
    let head = l4 + Udp::LEN + Geneve::LEN;
    let Some(h) = b.get(l4..head) else {
        // UDP and Geneve headers not all here: the port decides, if it is here (`needs_more`).
        let port = b
            .get(l4 + 2..l4 + 4)
            .map(|d| u16::from_be_bytes([d[0], d[1]]));
        return if cut && port.is_none_or(|d| d == GENEVE_PORT) {
            MORE
        } else {
            NO
        };
    };
    if u16::from_be_bytes([h[2], h[3]]) != GENEVE_PORT {
        return NO;
    }
    let want = (h[8] & 0x3f) as usize * 4;
    if cut && head + want > b.len() {
        return MORE;
    }
    u8::from(walk_one(mask, value, &b[head..], want))
}

/// A match of one `opt` clause without data, no `vni` (`present` adds nothing to it): is there
/// an option, in the walk of [`crate::hdr::GeneveOpts`], whose header word (little-endian)
/// under `mask` is `value`.
#[inline(always)]
fn one(mask: u32, value: u32, p: &Pkt<'_>) -> bool {
    if p.l4proto != 17 || p.l4 == 0xffff {
        return false;
    }
    let b = p.bytes;
    let head = p.l4 as usize + Udp::LEN + Geneve::LEN;
    let Some(h) = b.get(head - 16..head) else {
        return false;
    };
    if u16::from_be_bytes([h[2], h[3]]) != GENEVE_PORT {
        return false;
    }
    walk_one(mask, value, &b[head..], (h[8] & 0x3f) as usize * 4)
}

/// The option walk of [`one`] over `rest` (the bytes after the Geneve header), the block being
/// `want` bytes or what of it is there.
#[inline(always)]
fn walk_one(mask: u32, value: u32, rest: &[u8], want: usize) -> bool {
    let mut block = &rest[..want.min(rest.len())];
    // One bounds check per option (the header word), none per byte.
    while let Some((w, after)) = block.split_first_chunk::<4>() {
        let w = u32::from_le_bytes(*w);
        let Some(next) = after.get((w >> 22 & 0x7c) as usize..) else {
            return false;
        };
        if w & mask == value {
            return true;
        }
        block = next;
    }
    false
}
