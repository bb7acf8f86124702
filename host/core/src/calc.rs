//! Values computed from the packet for statements (`meta mark set`, `ct mark set`, `ct zone
//! set`, the target of `dnat to EXPR`): a field load, bitwise operations and shifts on it,
//! `numgen`, `jhash`, `symhash`, and the data of a map element, as the kernel's registers
//! carry them from one expression to the next.
//!
//! Semantics (kernel sources):
//! - bitwise (`nft_bitwise_eval`): `&`, `|`, `^` with a constant, `<<` / `>>` by a constant
//!   within the field's width (bits shifted out are lost);
//! - `numgen inc` (`nft_ng_inc_gen`): one counter per expression, starting so that the first
//!   packet gets 0, then 1, ..., `mod - 1`, 0, ...; shared by every worker (an atomic, as the
//!   kernel's `atomic_t`); plus `offset`;
//! - `numgen random` (`nft_ng_random_gen`): `reciprocal_scale(random, mod) + offset`, the
//!   random number from wasp's per-packet generator (`meta random`'s);
//! - `jhash` (`nft_jhash_eval`): `reciprocal_scale(jhash(data, len, seed), mod) + offset`,
//!   [`jhash`] being Bob Jenkins' lookup3 as `include/linux/jhash.h` has it; `data` is the
//!   expression's bytes as the kernel's registers hold them: a network-order field as it is on
//!   the wire, a host-order key (`meta mark`, `ct mark`, `ct zone`) in little-endian bytes (the
//!   kernel on a little-endian CPU), each field of a concatenation padded with zeros to 4
//!   bytes;
//! - `symhash` (`nft_symhash_eval` over `__skb_get_hash_symmetric`): the kernel hashes the
//!   flow dissector's keys with a per-boot random key (siphash), which wasp cannot reproduce:
//!   wasp's [`symhash`] is the jhash of the flow's two (address, port) ends in sorted order and
//!   the protocol, the same value for both directions of a flow, but not the kernel's value.
//!   Scaled like `jhash`.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::expr::{KEY_MAX, Load, PktState, mask_bits};
use crate::packet::Packet;

/// A value computed from the packet ([`Calc::eval`]).
#[derive(Debug, Clone)]
pub(crate) enum Calc {
    /// One field (with the bitwise operations that fold into a load).
    Load(Load),
    /// `(inner & mask) ^ xor` (`&`, `|`, `^` with constants on a computed value).
    Bits {
        inner: Box<Calc>,
        mask: u128,
        xor: u128,
    },
    /// `inner << bits` (or `>>` without `left`), within `width` bytes.
    Shift {
        inner: Box<Calc>,
        left: bool,
        bits: u32,
        width: u8,
    },
    /// `numgen inc mod N offset M`: `counter` indexes [`crate::Stateful`]'s counters.
    NumgenInc {
        counter: u32,
        modulus: u32,
        offset: u32,
    },
    /// `numgen random mod N offset M`.
    NumgenRandom { modulus: u32, offset: u32 },
    /// `jhash KEYS mod N seed S offset M`: `keys` are the concatenated fields, `host` has bit
    /// `i` set when field `i` is held in host byte order.
    Jhash {
        keys: Box<[Load]>,
        host: u32,
        seed: u32,
        modulus: u32,
        offset: u32,
    },
    /// `symhash mod N offset M`.
    Symhash { modulus: u32, offset: u32 },
    /// `KEY map { ... }`: the data of the element holding the key (`set` indexes the
    /// program's sets); a miss or a key that fails ends the rule.
    Map {
        keys: Box<[Calc]>,
        widths: Box<[u8]>,
        set: crate::compiled::SetId,
    },
}

/// What [`Calc::eval`] reads besides the packet.
pub(crate) struct CalcEnv<'a> {
    /// The program (its sets, also those set statements change, for [`Calc::Map`]).
    pub prog: &'a crate::compiled::Program,
    /// The `numgen inc` counters.
    pub numgens: &'a [AtomicU32],
    /// Set elements' time (expiry).
    pub now: u64,
}

impl Calc {
    /// The value, or `None` for the kernel's NFT_BREAK (a field that is not there, a map
    /// miss).
    pub fn eval(&self, p: &Packet<'_>, st: &PktState, env: &CalcEnv<'_>) -> Option<u128> {
        Some(match self {
            Calc::Load(l) => l.eval(p, st)?,
            Calc::Bits { inner, mask, xor } => (inner.eval(p, st, env)? & mask) ^ xor,
            Calc::Shift {
                inner,
                left,
                bits,
                width,
            } => {
                let v = inner.eval(p, st, env)?;
                let v = if *left {
                    v.checked_shl(*bits).unwrap_or(0)
                } else {
                    v.checked_shr(*bits).unwrap_or(0)
                };
                v & mask_bits(u32::from(*width) * 8)
            }
            Calc::NumgenInc {
                counter,
                modulus,
                offset,
            } => {
                let c = env.numgens.get(*counter as usize)?;
                u128::from(numgen_inc(c, *modulus).wrapping_add(*offset))
            }
            Calc::NumgenRandom { modulus, offset } => {
                u128::from(reciprocal_scale(st.random, *modulus).wrapping_add(*offset))
            }
            Calc::Jhash {
                keys,
                host,
                seed,
                modulus,
                offset,
            } => {
                let mut buf = [0u8; KEY_MAX];
                let n = hash_data(keys, *host, p, st, &mut buf)?;
                let h = jhash(&buf[..n], *seed);
                u128::from(reciprocal_scale(h, *modulus).wrapping_add(*offset))
            }
            Calc::Symhash { modulus, offset } => {
                u128::from(reciprocal_scale(symhash(p), *modulus).wrapping_add(*offset))
            }
            Calc::Map { keys, widths, set } => {
                let mut buf = [0u8; KEY_MAX];
                let mut at = 0;
                for (k, &w) in keys.iter().zip(widths.iter()) {
                    let v = k.eval(p, st, env)?;
                    let w = usize::from(w);
                    if at + w > KEY_MAX {
                        return None;
                    }
                    buf[at..at + w].copy_from_slice(&v.to_be_bytes()[16 - w..]);
                    at += w;
                }
                let e = env.prog.lookup(*set, &buf[..at], env.now)?;
                u128::from(e.value)
            }
        })
    }
}

/// The bytes `jhash` reads: each field as the kernel's register holds it (see the module
/// documentation), a concatenation's fields each padded to 4 bytes. The length, or `None`
/// when a field fails.
fn hash_data(
    keys: &[Load],
    host: u32,
    p: &Packet<'_>,
    st: &PktState,
    buf: &mut [u8; KEY_MAX],
) -> Option<usize> {
    let mut at = 0;
    let concat = keys.len() > 1;
    for (i, l) in keys.iter().enumerate() {
        let v = l.eval(p, st)?;
        let w = usize::from(l.width);
        let padded = if concat { w.div_ceil(4) * 4 } else { w };
        if at + padded > KEY_MAX {
            return None;
        }
        let be = v.to_be_bytes();
        let field = &be[16 - w..];
        if host & (1 << i.min(31)) != 0 {
            for (k, b) in field.iter().rev().enumerate() {
                buf[at + k] = *b;
            }
        } else {
            buf[at..at + w].copy_from_slice(field);
        }
        at += padded;
    }
    Some(at)
}

/// The next value of a `numgen inc` counter with `modulus` values (`nft_ng_inc_gen`): the
/// counter holds the last value given; it starts at `modulus - 1` so that the first is 0.
pub(crate) fn numgen_inc(counter: &AtomicU32, modulus: u32) -> u32 {
    let mut old = counter.load(Ordering::Relaxed);
    loop {
        let next = if old.wrapping_add(1) < modulus {
            old + 1
        } else {
            0
        };
        match counter.compare_exchange_weak(old, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(now) => old = now,
        }
    }
}

/// `reciprocal_scale(val, ep_ro)` of `include/linux/kernel.h`: `val` scaled into `0..ep_ro`.
pub(crate) fn reciprocal_scale(val: u32, ep_ro: u32) -> u32 {
    ((u64::from(val) * u64::from(ep_ro)) >> 32) as u32
}

/// Bob Jenkins' lookup3 hash as `include/linux/jhash.h`'s `jhash(key, length, initval)`:
/// 32-bit words read in little-endian order (the kernel's `get_unaligned_cpu32` on a
/// little-endian CPU), `JHASH_INITVAL` 0xdeadbeef.
pub fn jhash(key: &[u8], initval: u32) -> u32 {
    const JHASH_INITVAL: u32 = 0xdead_beef;
    let mut a = JHASH_INITVAL
        .wrapping_add(key.len() as u32)
        .wrapping_add(initval);
    let (mut b, mut c) = (a, a);
    let word = |k: &[u8]| {
        let mut w = [0u8; 4];
        w[..k.len()].copy_from_slice(k);
        u32::from_le_bytes(w)
    };
    let mut k = key;
    while k.len() > 12 {
        a = a.wrapping_add(word(&k[0..4]));
        b = b.wrapping_add(word(&k[4..8]));
        c = c.wrapping_add(word(&k[8..12]));
        (a, b, c) = mix(a, b, c);
        k = &k[12..];
    }
    if k.is_empty() {
        return c;
    }
    // The tail: bytes added into a, b, c as the kernel's switch does (a little-endian read
    // of the bytes that are there).
    a = a.wrapping_add(word(&k[..k.len().min(4)]));
    if k.len() > 4 {
        b = b.wrapping_add(word(&k[4..k.len().min(8)]));
    }
    if k.len() > 8 {
        c = c.wrapping_add(word(&k[8..]));
    }
    final_mix(a, b, c)
}

/// `__jhash_mix`.
fn mix(mut a: u32, mut b: u32, mut c: u32) -> (u32, u32, u32) {
    a = a.wrapping_sub(c);
    a ^= c.rotate_left(4);
    c = c.wrapping_add(b);
    b = b.wrapping_sub(a);
    b ^= a.rotate_left(6);
    a = a.wrapping_add(c);
    c = c.wrapping_sub(b);
    c ^= b.rotate_left(8);
    b = b.wrapping_add(a);
    a = a.wrapping_sub(c);
    a ^= c.rotate_left(16);
    c = c.wrapping_add(b);
    b = b.wrapping_sub(a);
    b ^= a.rotate_left(19);
    a = a.wrapping_add(c);
    c = c.wrapping_sub(b);
    c ^= b.rotate_left(4);
    b = b.wrapping_add(a);
    (a, b, c)
}

/// `__jhash_final`: the value is `c`.
fn final_mix(mut a: u32, mut b: u32, mut c: u32) -> u32 {
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(14));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(11));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(25));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(16));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(4));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(14));
    c ^= b;
    c.wrapping_sub(b.rotate_left(24))
}

/// wasp's symmetric flow hash (see the module documentation): the jhash of the lower then the
/// higher (address, port) end of the packet's flow and its protocol; 0 for a packet that is
/// not IPv4 or IPv6.
pub(crate) fn symhash(p: &Packet<'_>) -> u32 {
    let f = p.frame;
    let net = usize::from(p.meta.net_offset);
    let (src, dst) = match p.meta.protocol {
        0x0800 => (f.get(net + 12..net + 16), f.get(net + 16..net + 20)),
        0x86dd => (f.get(net + 8..net + 24), f.get(net + 24..net + 40)),
        _ => return 0,
    };
    let (Some(src), Some(dst)) = (src, dst) else {
        return 0;
    };
    let l4 = p.meta.l4.filter(|l| l.fragoff == 0);
    let ports = l4
        .filter(|l| matches!(l.proto, 6 | 17 | 132 | 33 | 136))
        .and_then(|l| f.get(usize::from(l.offset)..usize::from(l.offset) + 4));
    let (sp, dp) = ports.map_or((&[0u8, 0][..], &[0u8, 0][..]), |b| (&b[..2], &b[2..]));
    let (lo, hi) = if (src, sp) <= (dst, dp) {
        ((src, sp), (dst, dp))
    } else {
        ((dst, dp), (src, sp))
    };
    let mut buf = [0u8; 40];
    let mut at = 0;
    for part in [lo.0, lo.1, hi.0, hi.1] {
        buf[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    buf[at] = l4.map_or(0, |l| l.proto);
    jhash(&buf[..=at], 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jhash_is_lookup3_hashlittle() {
        // lookup3.c's own test values (driver5): hashlittle is the kernel's jhash.
        assert_eq!(jhash(b"", 0), 0xdead_beef);
        assert_eq!(jhash(b"", 0xdead_beef), 0xbd5b_7dde);
        assert_eq!(jhash(b"Four score and seven years ago", 0), 0x1777_0551);
        assert_eq!(jhash(b"Four score and seven years ago", 1), 0xcd62_8161);
    }

    #[test]
    fn numgen_inc_starts_at_zero_and_wraps() {
        let c = AtomicU32::new(2 - 1);
        let got: Vec<u32> = (0..5).map(|_| numgen_inc(&c, 2)).collect();
        assert_eq!(got, [0, 1, 0, 1, 0]);
        let c = AtomicU32::new(u32::MAX - 1);
        assert_eq!(numgen_inc(&c, u32::MAX), 0);
    }

    #[test]
    fn reciprocal_scale_maps_into_range() {
        assert_eq!(reciprocal_scale(0, 2), 0);
        assert_eq!(reciprocal_scale(u32::MAX, 2), 1);
        assert_eq!(reciprocal_scale(0x8000_0000, 10), 5);
    }
}
