//! Compiled expressions: a load of a field from the packet (payload at a base + byte offset, a
//! meta key, or an IPv6 extension header's presence) followed by shift, mask and xor, as the
//! kernel's payload/meta/exthdr + bitwise expressions compute it, and a comparison of the result.
//!
//! Every field fits in 128 bits (the widest are IPv6 addresses and interface names), so a loaded
//! field is a `u128` holding its big-endian bytes as a number: comparing numbers is comparing the
//! kernel's big-endian registers with `memcmp`, which is what `cmp` and `range` do for network
//! byte order data (and what `byteorder` + `cmp` give for host-order `meta len` / `meta mark`).

use wasp_wire::PacketMeta;

use crate::packet::Packet;

/// Where a load reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Src {
    /// Frame bytes from offset 0 (link-layer header; VLAN tags appear at their original
    /// offsets, as `nft_payload_copy_vlan` rebuilds them).
    Link,
    /// From the network header (`PacketMeta::net_offset`).
    Net,
    /// From the transport header (`PacketMeta::l4`'s offset, the kernel's `thoff`); fails
    /// without L4 info, and on a non-first fragment unless the load takes the kernel's fast path
    /// (see [`Load::kernel_fast_path`]).
    Transport,
    /// `meta protocol` (2 bytes, big-endian EtherType).
    Protocol,
    /// `meta l4proto` (1 byte). The load fails without L4 info (a non-IP frame), as
    /// `nft_meta_get_eval` breaks without `NFT_PKTINFO_L4PROTO`: no match, negated or not.
    L4proto,
    /// `meta nfproto` (1 byte: 2 for IPv4, 10 for IPv6; inet family only).
    Nfproto,
    /// `meta len` (4 bytes, skb->len).
    Len,
    /// `meta mark` (4 bytes).
    Mark,
    /// `meta iifname` (16 NUL-padded bytes).
    Iifname,
    /// `meta oifname` (16 NUL-padded bytes).
    Oifname,
    /// A constant of the output device (`meta oiftype`, `meta oifgroup`: the load's mask and
    /// xor give the value): the load fails without an output device (ingress, prerouting,
    /// input), as `nft_meta_store_iftype` and `nft_meta_store_ifgroup` fail on a NULL device.
    OifConst,
    /// `meta nftrace` (1 byte, 0 or 1).
    Nftrace,
    /// `exthdr X exists`: 1 when the IPv6 extension header with this bit is present.
    Exthdr(u16),
    /// From the start of the IPv6 extension header with this next-header number
    /// (`wasp_wire::meta::ip6_exthdr_offset`, the kernel's `ipv6_find_hdr`); fails when the
    /// packet is not IPv6 or has no such header.
    Ip6Ext(u8),
    /// From the inner header: after the TCP header (its data offset) or the UDP header, the
    /// kernel's NFT_PAYLOAD_INNER_HEADER; fails for other packets.
    Inner,
    /// A constant (the value is the load's `xor`, `mask` is 0).
    Const,
    /// `ct state` (4 bytes; `invalid` without a connection).
    CtState,
    /// `ct direction` (1 byte; fails without a connection).
    CtDir,
    /// `ct status` (4 bytes; fails without a connection).
    CtStatus,
    /// `ct mark` (4 bytes; fails without a connection).
    CtMark,
    /// `meta priority` (4 bytes).
    Priority,
    /// `meta cpu` (4 bytes).
    Cpu,
    /// `meta random` (4 bytes).
    Random,
    /// `meta pkttype` (1 byte): from the destination address, broadcast 1, multicast 2, else
    /// host 0 (the kernel's `eth_type_trans` with wasp's ports taking every unicast frame as
    /// their own).
    Pkttype,
    /// `meta time` (8 bytes, Unix time in ns).
    Time,
    /// `meta day` (1 byte, Sunday 0, UTC).
    Day,
    /// `meta hour` (4 bytes, seconds since midnight UTC).
    Hour,
    /// A TCP option (`sctp: false`) or SCTP chunk of type `kind`: reads from its start, fails
    /// when the packet has none ([`opt_base`]); with `present`, 1 or 0 and never fails (the
    /// kernel's `nft_exthdr_tcp_eval` / `nft_exthdr_sctp_eval` with NFT_EXTHDR_F_PRESENT).
    Opt {
        /// SCTP chunks rather than TCP options.
        sctp: bool,
        /// Option kind or chunk type.
        kind: u8,
        /// Presence only.
        present: bool,
    },
    /// A `ct` key read from the connection's detail (`Packet::ct_detail`): the tuples,
    /// expiration, accounting, zone; fails without a connection.
    CtDetail(wasp_ruleset::model::CtKey),
    /// `osf name|version` (16 bytes): `"unknown"` for a TCP SYN (no fingerprint database),
    /// fails for any other packet, as the kernel's nft_osf_eval.
    Osf,
    /// `fib` (4 bytes for `type`, 16 for `oif`/`oifname`: the device's name, 1 with
    /// `exists`/`missing`): [`crate::fib_rt::fib_value`]; fails without a route view.
    Fib(wasp_ruleset::model::FibExpr),
    /// `rt` (4 bytes `classid`, `ip nexthop`; 16 `ip6 nexthop`; 2 `mtu`; 1 `ipsec`):
    /// [`crate::fib_rt::rt_value`]; fails before routing and without a route view.
    Rt(wasp_ruleset::model::RtKey),
    /// A key whose state wasp never has (`meta skuid`: no local socket): the load fails, so the
    /// rule stops, negated or not (the kernel's NFT_BREAK).
    Never,
}

impl Src {
    /// `true` for the `ct` keys that fail to load when the packet has no connection
    /// (nft_ct_get_eval ends the rule with NFT_BREAK for every key but `state`).
    #[inline]
    pub fn needs_conn(self) -> bool {
        matches!(self, Src::CtDir | Src::CtStatus | Src::CtMark)
    }

    /// `true` for the sources whose value [`meta_value`] computes (from the packet's state,
    /// the clock, a walk of an option list, the connection's detail) and which may fail.
    #[inline]
    pub fn is_computed(self) -> bool {
        matches!(
            self,
            Src::Priority
                | Src::Cpu
                | Src::Random
                | Src::Pkttype
                | Src::Time
                | Src::Day
                | Src::Hour
                | Src::Osf
                | Src::Fib(_)
                | Src::Rt(_)
                | Src::Never
                | Src::Opt { present: true, .. }
                | Src::CtDetail(_)
        )
    }
}

/// A field load: `((read(src, off, len) >> shift) & mask) ^ xor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Load {
    /// Source.
    pub src: Src,
    /// Byte offset from the base (payload sources only).
    pub off: u16,
    /// Bytes read (1..=16).
    pub len: u8,
    /// Bytes that must be inside the frame for the read to succeed (1..=len). Less than `len`
    /// when a prefix match only needs the first bytes, as nft then loads only those.
    pub need: u8,
    /// Right shift after the read (for sub-byte fields).
    pub shift: u8,
    /// Mask after the shift.
    pub mask: u128,
    /// Xor after the mask (composes `|` and `^` with constants).
    pub xor: u128,
    /// Width of the field in a set key, in bytes.
    pub width: u8,
}

/// What the rarer statements asked of one packet (kept beside [`PktState`], see its `rare`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StmtOut {
    /// The computed NAT target of the NAT statement that ran (see `program::NatCalc`).
    pub nat_arg: u128,
    /// `ct zone set` ran: the zone.
    pub ct_zone: Option<u16>,
    /// `ct label set` ran: the label bits set.
    pub ct_label: Option<u128>,
    /// `ct event set` ran: the event mask.
    pub ct_event: Option<u32>,
    /// `notrack` ran.
    pub notrack: bool,
    /// `reject` dropped the packet: the reply it asked for.
    pub reject: Option<crate::packet::Reject>,
}

/// Per-packet state the evaluator reads besides the frame.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PktState {
    /// `meta iifname` as a number (16 NUL-padded bytes, big-endian).
    pub iif: u128,
    /// `meta oifname`.
    pub oif: u128,
    /// `meta len`.
    pub skb_len: u32,
    /// `meta mark`.
    pub mark: u32,
    /// `meta nftrace`.
    pub nftrace: bool,
    /// `meta nfproto` as the inet family sees it (0 for non-IP).
    pub nfproto: u8,
    /// `fwd`: 1 + index into the program's output targets; 0 when no `fwd` ran.
    pub fwd: u16,
    /// `dup`: bit `i` set when a `dup` to output target `i` ran.
    pub dup: u64,
    /// `ct state` bits.
    pub ct_state: u32,
    /// `ct direction`.
    pub ct_dir: u8,
    /// `ct status`.
    pub ct_status: u32,
    /// `ct mark` (after any `ct mark set` of the walk).
    pub ct_mark: u32,
    /// The connection's id (0: none).
    pub ct_id: u64,
    /// `type nat` chains run for the packet.
    pub nat_pending: bool,
    /// A `ct mark set` ran.
    pub ct_mark_set: bool,
    /// A NAT statement ran: 1 + its index; 0 when none.
    pub nat: u16,
    /// `flow add` ran: 1 + the flowtable's index; 0 when none.
    pub flow: u16,
    /// `meta priority` (0 until `meta priority set`).
    pub priority: u32,
    /// `meta cpu`.
    pub cpu: u32,
    /// `meta random`.
    pub random: u32,
    /// The wall clock, Unix time in ns (`meta time`, `day`, `hour`).
    pub wall_ns: u64,
    /// The input device's link-layer address when known (`meta pkttype`).
    pub iif_mac: Option<[u8; 6]>,
    /// Index + 1 into the walk's [`StmtOut`]s (`Effects::rare`) once a statement with a rare
    /// output ran for this packet (NAT to an expression, `ct zone|label|event set`,
    /// `notrack`, `reject`); 0 before. Keeps this per-packet state small for the vector.
    pub rare: u8,
}

/// A device name as the kernel stores it: 16 bytes, NUL-padded (longer names are cut at 16).
pub(crate) fn ifname_value(name: &str) -> u128 {
    let mut b = [0u8; 16];
    let n = name.len().min(16);
    b[..n].copy_from_slice(&name.as_bytes()[..n]);
    u128::from_be_bytes(b)
}

/// `meta len` of a frame at the netdev ingress hook: skb->len, the frame without its Ethernet
/// header and the VLAN tag the kernel popped (everything before the network header).
pub(crate) fn skb_len_ingress(meta: &PacketMeta) -> u32 {
    meta.len.saturating_sub(u32::from(meta.net_offset))
}

#[inline]
fn read_be(frame: &[u8], start: usize, len: usize, need: usize) -> Option<u128> {
    let avail = frame.len().checked_sub(start)?;
    if avail < need {
        return None;
    }
    let n = len.min(avail);
    let mut v: u128 = 0;
    for &b in &frame[start..start + n] {
        v = (v << 8) | u128::from(b);
    }
    // Bytes past the frame (only possible when need < len) read as zero; the mask drops them.
    Some(v << (8 * (len - n)))
}

impl Load {
    /// A constant.
    pub fn constant(v: u128, width: u8) -> Load {
        Load {
            src: Src::Const,
            off: 0,
            len: width,
            need: width,
            shift: 0,
            mask: 0,
            xor: v,
            width,
        }
    }

    /// A whole-value load from a non-payload source of `width` bytes.
    pub fn meta(src: Src, width: u8) -> Load {
        Load {
            src,
            off: 0,
            len: width,
            need: width,
            shift: 0,
            mask: mask_bytes(width),
            xor: 0,
            width,
        }
    }

    /// Whether the kernel runs this payload load through its fast path: `nft_payload_select_ops`
    /// picks `nft_payload_fast_ops` for a load of 1, 2 or 4 bytes at an offset aligned to its
    /// length from the network or transport header (never the link layer), and `nft_do_chain`
    /// then calls `nft_payload_fast_eval`. The kernel's load length is `need` (nft loads only the
    /// bytes a prefix covers).
    ///
    /// For a transport load this decides what a non-first fragment gives: the fast path checks
    /// only that L4 info exists (`NFT_PKTINFO_L4PROTO`) and that the bytes lie inside the linear
    /// data, not `pkt->fragoff`, so it reads the fragment's bytes at `thoff` as if they were the
    /// transport header (`tcp dport`, `tcp flags`, `icmp type`, `udp length`, `th sport`, a
    /// merged 4-byte `udp sport . udp dport`). Any other transport load (3 bytes, unaligned, more
    /// than 4 bytes) goes to `nft_payload_eval`, which breaks when `fragoff != 0`. When the fast
    /// read runs past the data, the kernel falls back to `nft_payload_eval`, which fails too on a
    /// fragment and reads the same bytes otherwise: the same as a failed read here.
    /// (Checked against kernel 6.18; a later kernel patch adds the fragment check to the fast
    /// path.)
    #[inline]
    pub fn kernel_fast_path(&self) -> bool {
        matches!(self.src, Src::Net | Src::Transport)
            && matches!(self.need, 1 | 2 | 4)
            && self.off.is_multiple_of(u16::from(self.need))
    }

    /// Evaluate: `None` is the kernel's NFT_BREAK (read past the frame, no transport header).
    #[inline]
    pub fn eval(&self, p: &Packet<'_>, st: &PktState) -> Option<u128> {
        let raw = match self.src {
            Src::Link => read_be(
                p.frame,
                usize::from(self.off),
                usize::from(self.len),
                usize::from(self.need),
            )?,
            Src::Net => read_be(
                p.frame,
                usize::from(p.meta.net_offset) + usize::from(self.off),
                usize::from(self.len),
                usize::from(self.need),
            )?,
            Src::Transport => {
                let l4 = p.meta.l4?;
                if l4.fragoff != 0 && !self.kernel_fast_path() {
                    return None;
                }
                read_be(
                    p.frame,
                    usize::from(l4.offset) + usize::from(self.off),
                    usize::from(self.len),
                    usize::from(self.need),
                )?
            }
            Src::Ip6Ext(t) => read_be(
                p.frame,
                ip6_ext_base(p, t)? + usize::from(self.off),
                usize::from(self.len),
                usize::from(self.need),
            )?,
            Src::Inner => read_be(
                p.frame,
                inner_base(p)? + usize::from(self.off),
                usize::from(self.len),
                usize::from(self.need),
            )?,
            Src::Protocol => u128::from(p.meta.protocol),
            Src::L4proto => u128::from(p.meta.l4?.proto),
            Src::Nfproto => u128::from(st.nfproto),
            Src::Len => u128::from(st.skb_len),
            Src::Mark => u128::from(st.mark),
            Src::Iifname => st.iif,
            Src::Oifname => st.oif,
            Src::OifConst if st.oif == 0 => return None,
            Src::OifConst => 0,
            Src::Nftrace => u128::from(st.nftrace),
            Src::Exthdr(bit) => u128::from(p.meta.ip6_exthdrs & bit != 0),
            Src::Const => 0,
            Src::CtState => u128::from(st.ct_state),
            s if s.is_computed() => meta_value(s, p, st)?,
            Src::Opt { sctp, kind, .. } => {
                let (base, end) = opt_base(p, sctp, kind)?;
                let start = base + usize::from(self.off);
                if start + usize::from(self.len) > end {
                    return None;
                }
                read_be(
                    p.frame,
                    start,
                    usize::from(self.len),
                    usize::from(self.need),
                )?
            }
            _ if st.ct_id == 0 => return None,
            Src::CtDir => u128::from(st.ct_dir),
            Src::CtStatus => u128::from(st.ct_status),
            Src::CtMark => u128::from(st.ct_mark),
            // The computed sources, all taken by the `is_computed` arm above.
            _ => return None,
        };
        Some(((raw >> self.shift) & self.mask) ^ self.xor)
    }
}

/// The value of a computed source ([`Src::is_computed`]): `None` when the load fails
/// ([`Src::Never`], no option or chunk, no connection detail, not a TCP SYN for `osf`).
#[inline]
pub(crate) fn meta_value(src: Src, p: &Packet<'_>, st: &PktState) -> Option<u128> {
    const DAY_S: u64 = 86_400;
    let secs = st.wall_ns / 1_000_000_000;
    Some(match src {
        Src::Priority => u128::from(st.priority),
        Src::Cpu => u128::from(st.cpu),
        Src::Random => u128::from(st.random),
        Src::Pkttype => match p.frame.get(..6) {
            Some([0xff, 0xff, 0xff, 0xff, 0xff, 0xff]) => 1,
            Some([first, ..]) if first & 1 != 0 => 2,
            // PACKET_OTHERHOST: not to the input device's address (when wasp knows it).
            Some(dst) if st.iif_mac.is_some_and(|m| m[..] != *dst) => 3,
            _ => 0,
        },
        Src::Time => u128::from(st.wall_ns),
        // 1970-01-01 was a Thursday (4).
        Src::Day => u128::from((secs / DAY_S + 4) % 7),
        Src::Hour => u128::from(secs % DAY_S),
        Src::Osf => {
            let l4 = p.meta.l4.filter(|l| l.proto == 6 && l.fragoff == 0)?;
            let flags = *p.frame.get(usize::from(l4.offset) + 13)?;
            // A SYN (without ACK) is what the kernel fingerprints.
            if flags & 0x12 != 0x02 {
                return None;
            }
            ifname_value("unknown")
        }
        Src::Opt {
            sctp,
            kind,
            present: true,
        } => u128::from(opt_base(p, sctp, kind).is_some()),
        Src::CtDetail(k) => ct_detail_value(k, p, st)?,
        Src::Fib(f) => crate::fib_rt::fib_value(f, p)?,
        Src::Rt(k) => crate::fib_rt::rt_value(k, p)?,
        _ => return None,
    })
}

/// The value of a [`Src::CtDetail`] key: `None` without a connection, and for `ct helper`
/// (wasp's connections have no helper: the kernel's NFT_BREAK).
pub(crate) fn ct_detail_value(
    k: wasp_ruleset::model::CtKey,
    p: &Packet<'_>,
    st: &PktState,
) -> Option<u128> {
    use wasp_ruleset::model::{CtDirection as D, CtKey as K, Family};
    if st.ct_id == 0 {
        return None;
    }
    let d = p.ct_detail?;
    let idx = |dir: Option<D>| dir.map(|x| x as usize);
    let sum = |v: [u64; 2], dir: Option<D>| match idx(dir) {
        Some(i) => v[i],
        None => v[0].saturating_add(v[1]),
    };
    let tuple = |dir: D| {
        if dir == D::Original {
            &d.orig
        } else {
            &d.reply
        }
    };
    let addr = |a: &[u8; 16], fam: Family| {
        let n = if fam == Family::Ip6 { 16 } else { 4 };
        a[..n]
            .iter()
            .fold(0u128, |acc, b| acc << 8 | u128::from(*b))
    };
    Some(match k {
        K::Expiration => u128::from(d.expires_ms),
        K::L3proto => u128::from(d.l3proto),
        K::Protocol => u128::from(d.protocol),
        K::Id => u128::from(st.ct_id as u32),
        K::Zone(_) => u128::from(d.zone),
        K::Bytes(dir) => u128::from(sum(d.bytes, dir)),
        K::Packets(dir) => u128::from(sum(d.packets, dir)),
        K::Avgpkt(dir) => {
            let (b, n) = (sum(d.bytes, dir), sum(d.packets, dir));
            u128::from(b.checked_div(n).unwrap_or(0))
        }
        K::Saddr(dir, fam) => addr(&tuple(dir).src, fam),
        K::Daddr(dir, fam) => addr(&tuple(dir).dst, fam),
        K::ProtoSrc(dir) => u128::from(tuple(dir).sport),
        K::ProtoDst(dir) => u128::from(tuple(dir).dport),
        K::Label => d.label,
        K::Helper | K::State | K::Direction | K::Status | K::Mark | K::Event => return None,
    })
}

/// Frame offset of the inner header (see [`Src::Inner`]).
#[inline]
pub(crate) fn inner_base(p: &Packet<'_>) -> Option<usize> {
    let l4 = p.meta.l4?;
    if l4.fragoff != 0 {
        return None;
    }
    let th = usize::from(l4.offset);
    match l4.proto {
        6 => Some(th + usize::from(*p.frame.get(th + 12)? >> 4) * 4),
        17 => Some(th + 8),
        _ => None,
    }
}

/// Frame offset of the first TCP option of kind `kind` (or, with `sctp`, SCTP chunk of type
/// `kind`) in `p`, and the end of the bytes a field of it may be read from (the TCP header's
/// end, the chunk's end): `None` when the packet is not of that protocol, is a non-first
/// fragment, or has no such option. The walk is the kernel's: TCP options from byte 20 to the
/// header length, EOL and NOP one byte long, a length under 2 ending the walk; SCTP chunks
/// from byte 12, each padded to 4 bytes, a zero length ending the walk.
pub(crate) fn opt_base(p: &Packet<'_>, sctp: bool, kind: u8) -> Option<(usize, usize)> {
    let l4 = p.meta.l4?;
    let proto = if sctp { 132 } else { 6 };
    if l4.proto != proto || l4.fragoff != 0 {
        return None;
    }
    let th = usize::from(l4.offset);
    let f = p.frame;
    if sctp {
        let mut off = th + 12;
        while off + 4 <= f.len() {
            let len = usize::from(u16::from_be_bytes([f[off + 2], f[off + 3]]));
            if len == 0 {
                return None;
            }
            if f[off] == kind {
                return Some((off, (off + len).min(f.len())));
            }
            off += len.div_ceil(4) * 4;
        }
        return None;
    }
    let doff = usize::from(*f.get(th + 12)? >> 4) * 4;
    let end = (th + doff).min(f.len());
    let mut i = th + 20;
    while i + 1 < end {
        let k = f[i];
        if k == kind {
            return Some((i, end));
        }
        let len = if k <= 1 { 1 } else { usize::from(f[i + 1]) };
        if len < 1 || (k > 1 && len < 2) {
            return None;
        }
        i += len;
    }
    None
}

/// Frame offset of the IPv6 extension header of type `t` in `p` (see [`Src::Ip6Ext`]).
#[inline]
pub(crate) fn ip6_ext_base(p: &Packet<'_>, t: u8) -> Option<usize> {
    if p.meta.l3 != wasp_wire::meta::L3Kind::Ipv6 {
        return None;
    }
    let net = usize::from(p.meta.net_offset);
    Some(net + wasp_wire::meta::ip6_exthdr_offset(p.frame.get(net..)?, t)?)
}

/// All-ones mask of `bytes` bytes.
pub(crate) fn mask_bytes(bytes: u8) -> u128 {
    mask_bits(u32::from(bytes) * 8)
}

/// All-ones mask of the low `bits` bits.
pub(crate) fn mask_bits(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

/// A comparison of a loaded value, as the kernel's `cmp` and `range` expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cmp {
    /// `==`
    Eq(u128),
    /// `!=`
    Ne(u128),
    /// `<`
    Lt(u128),
    /// `>`
    Gt(u128),
    /// `<=`
    Le(u128),
    /// `>=`
    Ge(u128),
    /// `lo..=hi`
    In(u128, u128),
    /// not `lo..=hi`
    NotIn(u128, u128),
}

impl Cmp {
    /// Whether `x` satisfies the comparison.
    #[inline]
    pub fn test(&self, x: u128) -> bool {
        match *self {
            Cmp::Eq(v) => x == v,
            Cmp::Ne(v) => x != v,
            Cmp::Lt(v) => x < v,
            Cmp::Gt(v) => x > v,
            Cmp::Le(v) => x <= v,
            Cmp::Ge(v) => x >= v,
            Cmp::In(lo, hi) => lo <= x && x <= hi,
            Cmp::NotIn(lo, hi) => x < lo || hi < x,
        }
    }
}

/// Write the key of a lookup: each load's value in big-endian bytes of its width, concatenated.
/// Returns the key length, or `None` when a load breaks.
#[inline]
pub(crate) fn build_key(
    loads: &[Load],
    p: &Packet<'_>,
    st: &PktState,
    buf: &mut [u8; KEY_MAX],
) -> Option<usize> {
    let mut at = 0;
    for l in loads {
        let v = l.eval(p, st)?;
        let w = usize::from(l.width);
        let bytes = v.to_be_bytes();
        buf[at..at + w].copy_from_slice(&bytes[16 - w..]);
        at += w;
    }
    Some(at)
}

/// Largest key of a lookup, in bytes.
pub(crate) const KEY_MAX: usize = 128;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_be_bounds() {
        let f = [1u8, 2, 3, 4];
        assert_eq!(read_be(&f, 0, 2, 2), Some(0x0102));
        assert_eq!(read_be(&f, 2, 2, 2), Some(0x0304));
        assert_eq!(read_be(&f, 3, 2, 2), None, "one byte past the end");
        assert_eq!(
            read_be(&f, 3, 2, 1),
            Some(0x0400),
            "prefix needs only one byte"
        );
        assert_eq!(read_be(&f, 5, 1, 1), None);
    }

    #[test]
    fn fast_path_loads_read_non_first_fragments() {
        use wasp_wire::L4Info;
        // Ethernet + IPv4 header, then 8 bytes of a non-first fragment's data at 34.
        let mut f = vec![0u8; 34];
        f.extend_from_slice(&[0x13, 0x88, 0x00, 0x35, 0x00, 0x0c, 0xab, 0xcd]);
        let meta = PacketMeta {
            len: f.len() as u32,
            net_offset: 14,
            l4: Some(L4Info {
                proto: 17,
                offset: 34,
                fragoff: 8,
            }),
            ..PacketMeta::default()
        };
        let p = Packet {
            frame: &f,
            meta,
            iifname: "",
            mark: 0,
            oifname: "",
            ct: crate::CtMeta::NONE,
            ct_detail: None,
            nftrace: false,
            route: None,
        };
        let st = PktState::default();
        let ld = |off: u16, len: u8| Load {
            src: Src::Transport,
            off,
            len,
            need: len,
            shift: 0,
            mask: mask_bytes(len),
            xor: 0,
            width: len,
        };
        // Fast path: 1, 2, 4 bytes aligned to their length.
        assert_eq!(ld(2, 2).eval(&p, &st), Some(53));
        assert_eq!(ld(0, 4).eval(&p, &st), Some(0x1388_0035));
        assert_eq!(ld(7, 1).eval(&p, &st), Some(0xcd));
        // nft_payload_eval: 4 bytes at 2 (unaligned), 3 bytes, 8 bytes, 2 bytes at an odd offset.
        for (off, len) in [(2, 4), (0, 3), (0, 8), (1, 2)] {
            assert_eq!(ld(off, len).eval(&p, &st), None, "{off} {len}");
        }
        // A fast read past the end falls back to the slow path and fails as well.
        assert_eq!(ld(8, 2).eval(&p, &st), None);
        // Not a fragment: every read inside the frame works.
        let whole = Packet {
            meta: PacketMeta {
                l4: Some(L4Info {
                    proto: 17,
                    offset: 34,
                    fragoff: 0,
                }),
                ..meta
            },
            ..p
        };
        assert_eq!(ld(2, 4).eval(&whole, &st), Some(0x0035_000c));
        assert_eq!(ld(0, 8).eval(&whole, &st), Some(0x1388_0035_000c_abcd));
        // Link loads never take the fast path.
        assert!(
            !Load {
                src: Src::Link,
                ..ld(0, 2)
            }
            .kernel_fast_path()
        );
        assert!(
            Load {
                src: Src::Net,
                ..ld(12, 4)
            }
            .kernel_fast_path()
        );
    }

    #[test]
    fn ifname_is_nul_padded() {
        let v = ifname_value("eth0");
        let b = v.to_be_bytes();
        assert_eq!(&b[..4], b"eth0");
        assert!(b[4..].iter().all(|&x| x == 0));
    }

    #[test]
    fn cmp_ops() {
        assert!(Cmp::In(1, 1024).test(22));
        assert!(!Cmp::In(1, 1024).test(1025));
        assert!(Cmp::NotIn(1, 1024).test(0));
        assert!(Cmp::Lt(5).test(4) && !Cmp::Lt(5).test(5));
        assert!(Cmp::Ge(5).test(5) && !Cmp::Gt(5).test(5));
    }
}
