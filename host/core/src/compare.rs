//! Matches lowered to the width of their field: a [`Test`] is a [`Load`] + [`Cmp`] pair (the
//! kernel's payload/meta + bitwise + cmp/range expressions) computed in `u32` for fields of up
//! to 4 bytes, `u64` up to 8 and `u128` only for the 16-byte ones (IPv6 addresses, interface
//! names). Payload bytes are read with `from_be_bytes` on fixed-size slices, and every
//! comparison becomes one range test `(x - lo <= span) != neg` in wrapping arithmetic.
//!
//! A test gives exactly what `load.eval(..).is_some_and(|x| cmp.test(x))` gives (checked by a
//! property test below); the width only changes how fast it is computed.

use std::fmt::Debug;
use std::ops::{BitAnd, BitXor, Shl, Shr};

use crate::expr::{Cmp, Load, PktState, Src};
use crate::ext::Edited;
use crate::packet::{MAX_VECTOR, Packet};
use crate::pipeline::View;

/// An unsigned integer that holds a loaded field as its big-endian bytes read as a number.
pub(crate) trait Word:
    Copy
    + Debug
    + Default
    + Eq
    + Ord
    + BitAnd<Output = Self>
    + BitXor<Output = Self>
    + Shl<u32, Output = Self>
    + Shr<u32, Output = Self>
{
    /// Size in bytes.
    const BYTES: usize;
    /// `w` (exactly [`Word::BYTES`] bytes, else 0) read big-endian: one load and a byte swap.
    fn from_window(w: &[u8]) -> Self;
    /// The low bits of `v`.
    fn from_u128(v: u128) -> Self;
    /// `b` (no longer than the type) read big-endian.
    fn from_be(b: &[u8]) -> Self;
    /// `self - o`, wrapping.
    fn wsub(self, o: Self) -> Self;
    /// The values of this width kept in a [`ReadCache`] entry.
    fn lanes(e: &mut CacheEntry) -> &mut [Self; MAX_VECTOR];
}

macro_rules! word {
    ($t:ty, $lanes:ident, $($n:literal => $via:ty),*) => {
        impl Word for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn from_window(w: &[u8]) -> Self {
                match w.try_into() {
                    Ok(a) => <$t>::from_be_bytes(a),
                    Err(_) => 0,
                }
            }
            #[inline]
            fn from_u128(v: u128) -> Self {
                v as $t
            }
            #[inline]
            fn from_be(b: &[u8]) -> Self {
                match b.len() {
                    1 => <$t>::from(b[0]),
                    $($n => match b.try_into() {
                        Ok(a) => <$t>::from(<$via>::from_be_bytes(a)),
                        Err(_) => 0,
                    },)*
                    _ => b.iter().fold(0, |v, &x| (v << 8) | <$t>::from(x)),
                }
            }
            #[inline]
            fn wsub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline(always)]
            fn lanes(e: &mut CacheEntry) -> &mut [Self; MAX_VECTOR] {
                &mut e.$lanes
            }
        }
    };
}

word!(u32, vals32, 2 => u16, 4 => u32);
word!(u64, vals64, 2 => u16, 4 => u32, 8 => u64);
word!(u128, vals128, 2 => u16, 4 => u32, 8 => u64, 16 => u128);

/// Read `len` bytes at `start` big-endian, as `read_be` in `expr` does: `None` when fewer than
/// `need` bytes are inside the frame; bytes past the end of a prefix read (`need < len`) are 0.
#[inline]
fn read<T: Word>(frame: &[u8], start: usize, len: usize, need: usize) -> Option<T> {
    if let Some(b) = frame.get(start..start + len) {
        return Some(T::from_be(b));
    }
    let avail = frame.len().checked_sub(start)?;
    if avail < need {
        return None;
    }
    Some(T::from_be(&frame[start..]) << (8 * (len - avail) as u32))
}

/// One match at width `T`: `(((read >> shift) & mask) ^ xor) - lo <= span`, inverted by `neg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TestW<T> {
    /// Where the bytes come from.
    pub src: Src,
    /// Byte offset from the source's base (payload sources).
    pub off: u16,
    /// Bytes read.
    pub len: u8,
    /// Bytes that must be inside the frame.
    pub need: u8,
    /// A transport read that also works on a non-first fragment (the kernel's fast path, see
    /// [`Load::kernel_fast_path`]).
    pub frag_ok: bool,
    /// Right shift after the read.
    pub shift: u8,
    /// The same shift for a read of a whole `T` starting at the field (the field's bytes
    /// first, then `T::BYTES - len` bytes that the shift drops).
    pub wide_shift: u8,
    /// Mask after the shift.
    pub mask: T,
    /// Xor after the mask.
    pub xor: T,
    /// Low end of the accepted range.
    pub lo: T,
    /// Width of the accepted range minus one (`hi - lo`).
    pub span: T,
    /// Accept values outside the range instead.
    pub neg: bool,
    /// Non-zero when another test of the program makes the same read: the number of that
    /// read in the program, under which the vector's [`ReadCache`] keeps the values (payload
    /// reads only).
    pub read_id: u16,
}

impl<T: Word> TestW<T> {
    /// Whether a read, already shifted, satisfies the comparison.
    #[inline(always)]
    fn check(&self, shifted: T) -> bool {
        let x = (shifted & self.mask) ^ self.xor;
        (x.wsub(self.lo) <= self.span) != self.neg
    }

    /// The value of a non-payload source.
    #[inline]
    fn meta(&self, p: &Packet<'_>, st: &PktState) -> T {
        let v: u128 = match self.src {
            Src::Protocol => u128::from(p.meta.protocol),
            Src::L4proto => p.meta.l4.map_or(0, |l| u128::from(l.proto)),
            Src::Nfproto => u128::from(st.nfproto),
            Src::Len => u128::from(st.skb_len),
            Src::Mark => u128::from(st.mark),
            Src::Iifname => st.iif,
            Src::Oifname => st.oif,
            Src::OifConst => 0,
            Src::Nftrace => u128::from(st.nftrace),
            Src::Exthdr(bit) => u128::from(p.meta.ip6_exthdrs & bit != 0),
            Src::CtState => u128::from(st.ct_state),
            Src::CtDir => u128::from(st.ct_dir),
            Src::CtStatus => u128::from(st.ct_status),
            Src::CtMark => u128::from(st.ct_mark),
            s if s.is_computed() => crate::expr::meta_value(s, p, st).unwrap_or(0),
            // Payload sources are read by `read_at`; a constant is the test's xor.
            _ => 0,
        };
        T::from_u128(v) >> u32::from(self.shift)
    }

    /// Read the field at `base + off` in `frame`, shifted: a whole `T` when the frame holds
    /// one there (the common case: one load), else exactly the field's bytes.
    #[inline(always)]
    fn read_at(&self, frame: &[u8], base: u16) -> Option<T> {
        let start = usize::from(base) + usize::from(self.off);
        match frame.get(start..start + T::BYTES) {
            Some(w) => Some(T::from_window(w) >> u32::from(self.wide_shift)),
            None => read::<T>(frame, start, usize::from(self.len), usize::from(self.need))
                .map(|r| r >> u32::from(self.shift)),
        }
    }

    /// The test for one packet.
    #[inline(always)]
    fn one(&self, p: &Packet<'_>, st: &PktState) -> bool {
        let raw = match self.src {
            Src::Link => self.read_at(p.frame, 0),
            Src::Net => self.read_at(p.frame, p.meta.net_offset),
            Src::Transport => match p.meta.l4 {
                Some(l4) if l4.fragoff == 0 || self.frag_ok => self.read_at(p.frame, l4.offset),
                _ => None,
            },
            Src::Ip6Ext(t) => crate::expr::ip6_ext_base(p, t)
                .and_then(|b| u16::try_from(b).ok())
                .and_then(|b| self.read_at(p.frame, b)),
            Src::Inner => crate::expr::inner_base(p)
                .and_then(|b| u16::try_from(b).ok())
                .and_then(|b| self.read_at(p.frame, b)),
            Src::Opt {
                sctp,
                kind,
                present: false,
            } => crate::expr::opt_base(p, sctp, kind)
                .filter(|(b, end)| b + usize::from(self.off) + usize::from(self.len) <= *end)
                .and_then(|(b, _)| u16::try_from(b).ok())
                .and_then(|b| self.read_at(p.frame, b)),
            // The frequent sources, before the guards below (each guard costs a test for every
            // source that reaches it; these need neither the connection nor a computation).
            Src::Protocol | Src::Nfproto | Src::Mark | Src::Iifname | Src::Len => {
                Some(self.meta(p, st))
            }
            Src::L4proto if p.meta.l4.is_none() => None,
            Src::OifConst if st.oif == 0 => None,
            s if s.needs_conn() && st.ct_id == 0 => None,
            s if s.is_computed() => {
                crate::expr::meta_value(s, p, st).map(|v| T::from_u128(v) >> u32::from(self.shift))
            }
            _ => Some(self.meta(p, st)),
        };
        raw.is_some_and(|r| self.check(r))
    }

    /// The packets of `live` (a bitmask over the vector) that pass the test: those a
    /// statement edited from their copies ([`Edited`]), the others from the frames as
    /// received.
    #[inline]
    fn vector(
        &self,
        live: u64,
        v: &View<'_>,
        pkts: &[Packet<'_>],
        st: &[PktState],
        ed: &Edited,
        cache: &mut ReadCache,
    ) -> u64 {
        let edited = live & ed.mask;
        let got = self.received(live & !edited, v, pkts, st, cache);
        if edited == 0 {
            return got;
        }
        got | self.edited(edited, pkts, st, ed)
    }

    /// The packets of `edited` (all with a copy) that pass the test, read from their copies
    /// (the view's offsets and the read cache are the received frames').
    #[cold]
    #[inline(never)]
    fn edited(&self, edited: u64, pkts: &[Packet<'_>], st: &[PktState], ed: &Edited) -> u64 {
        filter(edited, |i| self.one(&ed.packet(i, &pkts[i]), &st[i]))
    }

    /// The packets of `live` that pass the test, all read from the frames as received.
    #[inline(always)]
    fn received(
        &self,
        live: u64,
        v: &View<'_>,
        pkts: &[Packet<'_>],
        st: &[PktState],
        cache: &mut ReadCache,
    ) -> u64 {
        let pass = |raw: Option<T>| raw.is_some_and(|r| self.check(r));
        if let Src::Ip6Ext(_) | Src::Inner | Src::Opt { .. } = self.src {
            // Found by a walk of the header chain: no offset in the view, no cache.
            return filter(live, |i| self.one(&pkts[i], &st[i]));
        }
        if self.read_id != 0 {
            // Read the packets the cache does not have yet, then test the cached values.
            let readable = match self.src {
                Src::Transport if self.frag_ok => v.l4,
                Src::Transport => v.l4_whole,
                _ => u64::MAX,
            };
            let e = cache.entry(self.read_id);
            let fresh = live & readable & !e.have;
            e.have |= fresh;
            let mut ok = e.ok;
            for i in bits(fresh) {
                let base = match self.src {
                    Src::Net => v.net[i],
                    Src::Transport => v.th[i],
                    _ => 0,
                };
                if let Some(x) = self.read_at(v.frames[i], base) {
                    T::lanes(e)[i] = x;
                    ok |= 1 << i;
                }
            }
            e.ok = ok;
            let want = live & ok;
            let vals = &*T::lanes(e);
            if want.count_ones() < 8 {
                return filter(want, |i| self.check(vals[i]));
            }
            // Many packets: test every slot up to the last one wanted, without a loop-carried
            // dependency (values of other slots are tested too and masked out).
            let end = (64 - want.leading_zeros() as usize).div_ceil(8);
            let mut hit = 0u64;
            for (c, chunk) in vals.chunks_exact(8).take(end).enumerate() {
                let mut b = 0u64;
                for (j, &x) in chunk.iter().enumerate() {
                    b |= u64::from(self.check(x)) << j;
                }
                hit |= b << (8 * c);
            }
            return hit & want;
        }
        match self.src {
            Src::Link => filter(live, |i| pass(self.read_at(v.frames[i], 0))),
            Src::Net => filter(live, |i| pass(self.read_at(v.frames[i], v.net[i]))),
            Src::Transport => {
                let readable = if self.frag_ok { v.l4 } else { v.l4_whole };
                filter(live & readable, |i| {
                    pass(self.read_at(v.frames[i], v.th[i]))
                })
            }
            s if s.needs_conn() => filter(live, |i| {
                pass((st[i].ct_id != 0).then(|| self.meta(&pkts[i], &st[i])))
            }),
            // No transport protocol (a non-IP frame): the load breaks.
            Src::L4proto => self.meta_filter(live & v.l4, pkts, st, |p, _| {
                p.meta.l4.map_or(0, |l| u128::from(l.proto))
            }),
            // The frequent sources (the dependencies nft writes, the mark, the devices) each
            // with a loop of its own: no dispatch per packet.
            Src::Protocol => self.meta_filter(live, pkts, st, |p, _| u128::from(p.meta.protocol)),
            Src::Nfproto => self.meta_filter(live, pkts, st, |_, s| u128::from(s.nfproto)),
            Src::Mark => self.meta_filter(live, pkts, st, |_, s| u128::from(s.mark)),
            Src::Iifname => self.meta_filter(live, pkts, st, |_, s| s.iif),
            Src::Oifname => self.meta_filter(live, pkts, st, |_, s| s.oif),
            Src::Len => self.meta_filter(live, pkts, st, |_, s| u128::from(s.skb_len)),
            s if s.is_computed() || s == Src::OifConst => {
                filter(live, |i| self.one(&pkts[i], &st[i]))
            }
            _ => filter(live, |i| pass(Some(self.meta(&pkts[i], &st[i])))),
        }
    }

    /// The packets of `live` whose value of a non-payload source, read by `get` (the same
    /// as [`Self::meta`] gives for that source), passes the test.
    #[inline(always)]
    fn meta_filter(
        &self,
        live: u64,
        pkts: &[Packet<'_>],
        st: &[PktState],
        get: impl Fn(&Packet<'_>, &PktState) -> u128,
    ) -> u64 {
        filter(live, |i| {
            self.check(T::from_u128(get(&pkts[i], &st[i])) >> u32::from(self.shift))
        })
    }

    fn new(load: &Load, cmp: &Cmp) -> Self {
        let t = |v: u128| T::from_u128(v);
        let max = t(u128::MAX);
        // Every comparison as an inclusive range [lo, lo + span], possibly negated. A loaded
        // value never exceeds `T::MAX` (the width is chosen so that it and all constants fit).
        let never = (T::default(), max, true);
        let (lo, span, neg) = match *cmp {
            Cmp::Eq(v) => (t(v), T::default(), false),
            Cmp::Ne(v) => (t(v), T::default(), true),
            Cmp::Lt(0) => never,
            Cmp::Lt(v) => (T::default(), t(v - 1), false),
            Cmp::Gt(v) if t(v) == max => never,
            Cmp::Gt(v) => (t(v + 1), max.wsub(t(v + 1)), false),
            Cmp::Le(v) => (T::default(), t(v), false),
            Cmp::Ge(v) => (t(v), max.wsub(t(v)), false),
            Cmp::In(a, b) if a > b => never,
            Cmp::In(a, b) => (t(a), t(b - a), false),
            Cmp::NotIn(a, b) if a > b => (T::default(), max, false),
            Cmp::NotIn(a, b) => (t(a), t(b - a), true),
        };
        TestW {
            src: load.src,
            off: load.off,
            len: load.len,
            need: load.need,
            frag_ok: load.kernel_fast_path(),
            shift: load.shift,
            wide_shift: load.shift + 8 * (T::BYTES as u8).saturating_sub(load.len),
            mask: t(load.mask),
            xor: t(load.xor),
            lo,
            span,
            neg,
            read_id: 0,
        }
    }

    /// What identifies the read, for the [`ReadCache`] (`None`: not a payload read).
    fn key(&self) -> Option<ReadKey> {
        matches!(self.src, Src::Link | Src::Net | Src::Transport).then_some(ReadKey {
            src: self.src,
            off: self.off,
            len: self.len,
            need: self.need,
            shift: self.shift,
            wide_shift: self.wide_shift,
            frag_ok: self.frag_ok,
            bytes: size_of::<T>() as u8,
        })
    }
}

/// A match lowered to the narrowest width that holds its field and constants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Test {
    /// Fields and constants of up to 4 bytes.
    W32(TestW<u32>),
    /// Up to 8 bytes.
    W64(TestW<u64>),
    /// Up to 16 bytes (boxed: rare, and it would double the size of every operation).
    W128(Box<TestW<u128>>),
}

impl Test {
    /// Lower `load` compared by `cmp`.
    pub fn new(load: &Load, cmp: &Cmp) -> Test {
        let raw_bytes = match load.src {
            Src::Link
            | Src::Net
            | Src::Transport
            | Src::Ip6Ext(_)
            | Src::Inner
            | Src::Opt { .. } => usize::from(load.len),
            Src::Protocol => 2,
            Src::Len
            | Src::Mark
            | Src::CtState
            | Src::CtStatus
            | Src::CtMark
            | Src::Priority
            | Src::Cpu
            | Src::Random
            | Src::Hour => 4,
            Src::Time => 8,
            Src::CtDetail(k) => wasp_ruleset::model::Expr::Ct(k).dtype().width_bytes(),
            Src::Fib(f) => f.dtype().width_bytes(),
            Src::Rt(k) => k.dtype().width_bytes(),
            Src::Pkttype | Src::Day | Src::Never => 1,
            Src::Osf => 16,
            Src::Iifname | Src::Oifname => 16,
            Src::L4proto
            | Src::Nfproto
            | Src::Nftrace
            | Src::Exthdr(_)
            | Src::Const
            | Src::OifConst
            | Src::CtDir => 1,
        };
        let consts: [u128; 4] = match *cmp {
            Cmp::Eq(v) | Cmp::Ne(v) | Cmp::Lt(v) | Cmp::Gt(v) | Cmp::Le(v) | Cmp::Ge(v) => {
                [load.mask, load.xor, v, 0]
            }
            Cmp::In(a, b) | Cmp::NotIn(a, b) => [load.mask, load.xor, a, b],
        };
        let fits = |bytes: usize| {
            raw_bytes <= bytes
                && consts
                    .iter()
                    .all(|&c| bytes >= 16 || c >> (8 * bytes as u32) == 0)
        };
        if fits(4) {
            Test::W32(TestW::new(load, cmp))
        } else if fits(8) {
            Test::W64(TestW::new(load, cmp))
        } else {
            Test::W128(Box::new(TestW::new(load, cmp)))
        }
    }

    /// The read of a payload test (`None` for other sources).
    pub fn read_key(&self) -> Option<ReadKey> {
        match self {
            Test::W32(t) => t.key(),
            Test::W64(t) => t.key(),
            Test::W128(t) => t.key(),
        }
    }

    /// Keep this test's values in the [`ReadCache`] under `id` (non-zero; the same for every
    /// test of the program with the same [`Test::read_key`]). No effect on a test without one.
    pub fn set_read_id(&mut self, id: u16) {
        match self {
            Test::W32(t) if t.key().is_some() => t.read_id = id,
            Test::W64(t) if t.key().is_some() => t.read_id = id,
            Test::W128(t) if t.key().is_some() => t.read_id = id,
            _ => {}
        }
    }

    /// Whether the answer depends only on the packet's bytes, so that it is the same wherever
    /// the test runs in the walk of a packet that no statement edited: every source but `meta
    /// mark` and `meta nftrace`, which statements can set. (A plugin statement's edits change
    /// the bytes: the evaluators forget the remembered answers of the packets it edits.)
    pub fn is_pure(&self) -> bool {
        let src = match self {
            Test::W32(t) => t.src,
            Test::W64(t) => t.src,
            Test::W128(t) => t.src,
        };
        !matches!(src, Src::Mark | Src::Nftrace)
    }

    /// The test for one packet (`false` where the load breaks). Not inlined: the per-packet
    /// walk stays small (inlined, its set-up for every width and source costs more than the
    /// call for short chains).
    #[inline(never)]
    pub fn one(&self, p: &Packet<'_>, st: &PktState) -> bool {
        match self {
            Test::W32(t) => t.one(p, st),
            Test::W64(t) => t.one(p, st),
            Test::W128(t) => t.one(p, st),
        }
    }

    /// The packets of `live` that pass, over a whole vector (whose cached reads are `cache`;
    /// the packets statements edited are read from their copies in `ed`).
    #[inline]
    pub fn vector(
        &self,
        live: u64,
        v: &View<'_>,
        pkts: &[Packet<'_>],
        st: &[PktState],
        ed: &Edited,
        cache: &mut ReadCache,
    ) -> u64 {
        match self {
            Test::W32(t) => t.vector(live, v, pkts, st, ed, cache),
            Test::W64(t) => t.vector(live, v, pkts, st, ed, cache),
            Test::W128(t) => t.vector(live, v, pkts, st, ed, cache),
        }
    }
}

/// What identifies a payload read: everything of a test but its comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ReadKey {
    src: Src,
    off: u16,
    len: u8,
    need: u8,
    shift: u8,
    wide_shift: u8,
    frag_ok: bool,
    bytes: u8,
}

/// Reads kept per vector.
const READ_CACHE: usize = 4;

/// The field values of the vector being classified, per payload read that several tests of
/// the program make (the same field against different constants in consecutive rules, say):
/// the frames as received do not change while a vector is classified (a statement's edits go
/// to a copy, which tests read directly), so each packet's field is read once per vector and
/// the tests compare the kept value. Holds [`READ_CACHE`] reads, replaced in turn.
#[derive(Debug, Clone)]
pub(crate) struct ReadCache {
    entries: [CacheEntry; READ_CACHE],
    next: usize,
}

#[derive(Debug, Clone)]
pub(crate) struct CacheEntry {
    /// The read's id ([`TestW::read_id`]), 0 for none.
    key: u16,
    /// Packets whose read was tried.
    have: u64,
    /// Of those, the ones whose read succeeded (value in the lanes of the read's width).
    ok: u64,
    vals32: [u32; MAX_VECTOR],
    vals64: [u64; MAX_VECTOR],
    vals128: [u128; MAX_VECTOR],
}

impl Default for ReadCache {
    fn default() -> Self {
        let e = CacheEntry {
            key: 0,
            have: 0,
            ok: 0,
            vals32: [0; MAX_VECTOR],
            vals64: [0; MAX_VECTOR],
            vals128: [0; MAX_VECTOR],
        };
        ReadCache {
            entries: [e.clone(), e.clone(), e.clone(), e],
            next: 0,
        }
    }
}

impl ReadCache {
    /// Forget every value (a new vector).
    pub fn clear(&mut self) {
        for e in &mut self.entries {
            e.key = 0;
        }
    }

    /// The entry of `key`, taking over the oldest one when it has none.
    #[inline]
    fn entry(&mut self, key: u16) -> &mut CacheEntry {
        let at = match self.entries.iter().position(|e| e.key == key) {
            Some(at) => at,
            None => {
                let at = self.next;
                self.next = (at + 1) % READ_CACHE;
                let e = &mut self.entries[at];
                e.key = key;
                e.have = 0;
                e.ok = 0;
                at
            }
        };
        &mut self.entries[at]
    }
}

/// The bits of `live` whose index passes `f` (called once per set bit, lowest first).
#[inline(always)]
fn filter(mut live: u64, mut f: impl FnMut(usize) -> bool) -> u64 {
    let mut out = 0;
    while live != 0 {
        let low = live & live.wrapping_neg();
        live ^= low;
        // Branch-free: keep `low` when `f` passes.
        out |= low & 0u64.wrapping_sub(u64::from(f(low.trailing_zeros() as usize)));
    }
    out
}

/// The indices of the set bits of `m`, lowest first.
#[inline]
pub(crate) fn bits(mut m: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if m == 0 {
            return None;
        }
        let i = m.trailing_zeros() as usize;
        m &= m - 1;
        Some(i)
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use wasp_wire::{L4Info, PacketMeta};

    use super::*;
    use crate::expr::mask_bits;

    fn src_of(k: u8) -> Src {
        match k % 12 {
            0 => Src::Link,
            1 | 2 => Src::Net,
            3 | 4 => Src::Transport,
            5 => Src::Protocol,
            6 => Src::L4proto,
            7 => Src::Len,
            8 => Src::Mark,
            9 => Src::Iifname,
            10 => Src::Exthdr(4),
            _ => Src::Nfproto,
        }
    }

    fn cmp_of(k: u8, a: u128, b: u128) -> Cmp {
        match k % 8 {
            0 => Cmp::Eq(a),
            1 => Cmp::Ne(a),
            2 => Cmp::Lt(a),
            3 => Cmp::Gt(a),
            4 => Cmp::Le(a),
            5 => Cmp::Ge(a),
            6 => Cmp::In(a.min(b), a.max(b)),
            _ => Cmp::NotIn(a.min(b), a.max(b)),
        }
    }

    /// A constant near the field's range: small, at the edges of a width, or from the frame.
    fn constant(k: u8, raw: u128, len: u8) -> u128 {
        let full = mask_bits(u32::from(len) * 8);
        match k % 6 {
            0 => raw,
            1 => raw.wrapping_add(1) & full,
            2 => 0,
            3 => full,
            4 => u128::from(k),
            _ => raw.saturating_sub(1),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]
        /// A lowered test answers as the generic load and comparison, one packet at a time and
        /// over a vector.
        #[test]
        fn test_equals_load_and_cmp(
            frame in prop::collection::vec(any::<u8>(), 0..80),
            net in 0u16..30, th in prop::option::of((0u16..70, 0u16..2)),
            sk in any::<u8>(), off in 0u16..50, len in 1u8..=16, need_cut in 0u8..16,
            shift in 0u8..8, mask_bits_ in 0u32..=128, xor in any::<u128>(),
            ck in any::<u8>(), ak in any::<u8>(), bk in any::<u8>(), mark in any::<u32>(),
        ) {
            let src = src_of(sk);
            let meta = PacketMeta {
                len: frame.len() as u32,
                net_offset: net,
                protocol: 0x0800,
                ip6_exthdrs: u16::from(sk & 4),
                l4: th.map(|(o, f)| L4Info { proto: 6, offset: o, fragoff: f * 8 }),
                ..PacketMeta::default()
            };
            let p = Packet { frame: &frame, meta, iifname: "eth0", mark, oifname: "", ct: crate::CtMeta::NONE, ct_detail: None, nftrace: false, route: None };
            let st = PktState { mark, skb_len: frame.len() as u32, nfproto: 2, iif: crate::expr::ifname_value("eth0"), ..PktState::default() };
            let width = match src { Src::Link | Src::Net | Src::Transport => len, Src::Iifname => 16, Src::Len | Src::Mark => 4, Src::Protocol => 2, _ => 1 };
            let mut load = Load::meta(src, width);
            if matches!(src, Src::Link | Src::Net | Src::Transport) {
                load.off = off;
                load.len = len;
                load.need = len - need_cut.min(len - 1);
                load.shift = shift.min(len * 8 - 1);
            }
            load.mask &= mask_bits(mask_bits_);
            load.xor = xor & load.mask & if sk & 1 == 0 { 0 } else { u128::MAX };
            let raw = load.eval(&p, &st).unwrap_or(0);
            let cmp = cmp_of(ck, constant(ak, raw, width), constant(bk, raw ^ 0x55, width));
            let want = load.eval(&p, &st).is_some_and(|x| cmp.test(x));
            let t = Test::new(&load, &cmp);
            prop_assert_eq!(t.one(&p, &st), want, "{:?} {:?} {:?}", load, cmp, t);
            let pkts = [p];
            let v = View::new(&pkts);
            let mut cache = ReadCache::default();
            let ed = Edited::default();
            prop_assert_eq!(t.vector(1, &v, &pkts, &[st], &ed, &mut cache), u64::from(want));
            // The same through the read cache, filled and then hit.
            let mut t = t;
            t.set_read_id(1);
            prop_assert_eq!(t.vector(1, &v, &pkts, &[st], &ed, &mut cache), u64::from(want));
            prop_assert_eq!(t.vector(1, &v, &pkts, &[st], &ed, &mut cache), u64::from(want));
        }
    }

    #[test]
    fn widths() {
        let ip_saddr = Load {
            src: Src::Net,
            off: 12,
            len: 4,
            need: 4,
            shift: 0,
            mask: 0xffff_ffff,
            xor: 0,
            width: 4,
        };
        assert!(matches!(
            Test::new(&ip_saddr, &Cmp::Eq(0x0a00_0001)),
            Test::W32(_)
        ));
        let mac = Load {
            src: Src::Link,
            off: 6,
            len: 6,
            mask: mask_bits(48),
            need: 6,
            width: 6,
            ..ip_saddr
        };
        assert!(matches!(Test::new(&mac, &Cmp::Eq(1)), Test::W64(_)));
        let iif = Load::meta(Src::Iifname, 16);
        assert!(matches!(Test::new(&iif, &Cmp::Eq(1)), Test::W128(_)));
        // A constant wider than the field widens the test (and never matches).
        assert!(matches!(
            Test::new(&ip_saddr, &Cmp::Eq(1 << 40)),
            Test::W64(_)
        ));
    }

    #[test]
    fn bits_in_order() {
        assert_eq!(bits(0b1010_0001).collect::<Vec<_>>(), vec![0, 5, 7]);
        assert_eq!(bits(1 << 63).collect::<Vec<_>>(), vec![63]);
        assert_eq!(bits(0).count(), 0);
    }
}
