//! The shared, sharded table: lookup and update per packet, unconfirmed entries, confirmation
//! with clash resolution, limits with early drop, expiry and the setters the flowtable uses.

use std::collections::HashMap;
use std::hash::BuildHasher;

use foldhash::fast::FixedState;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::{Mutex, MutexGuard};
use wasp_index::{Head, Index};
use wasp_wire::{L3Kind, PacketMeta, icmp, icmpv6, ipv4, ipv6, tcp as tcp_hdr, udp};

use crate::count::Counts;
use crate::display::EntryInfo;
use crate::tcp::{self, NS, Segment, Tcp, TcpState, Timeouts, Verdict};
use crate::tuple::{Key, l4_fields, proto};
use crate::{CtInfo, Dir, ct_state, status};

/// Number of shards (a power of two).
pub(crate) const SHARDS: usize = 64;
/// Entries from which [`Conntrack::prefetch`] prefetches: below, the table's index and slots
/// (about 290 bytes per connection) stay in a core's caches.
pub const PREFETCH_MIN: usize = 8192;
/// Slots per shard are numbered in 24 bits.
const SLOT_BITS: u32 = 24;
const MAX_SLOTS: usize = 1 << SLOT_BITS;
/// Slots looked at by an early drop (the kernel's `NF_CT_EVICTION_RANGE` is 8 buckets).
const EVICTION_RANGE: usize = 8;
/// An unconfirmed entry older than this (caller's clock) was forgotten by its caller: the gc
/// reclaims it (the kernel frees it with its packet, which cannot be forgotten).
const PENDING_MAX_AGE_NS: u64 = 10 * NS;
/// The timeout the gc keeps giving an offloaded connection (`NF_CT_DAY`).
const OFFLOAD_DAY_NS: u64 = 86_400 * NS;
/// UDP: replies after this long make a stream (`stream_ts`, 2 s).
const UDP_STREAM_DELAY_NS: u64 = 2 * NS;

/// Table settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Maximum number of entries, confirmed and unconfirmed (`nf_conntrack_max`; 262144 on
    /// this machine, the default). When full, a new connection early-drops entries that are
    /// not ASSURED near its hash, or is refused ([`crate::CtInfo::drop`]).
    pub max_entries: usize,
    /// Timeouts per protocol and state.
    pub timeouts: Timeouts,
    /// Pick up TCP connections mid-stream from an ACK (`nf_conntrack_tcp_loose`, default 1).
    pub tcp_loose: bool,
    /// Seed of the table's hashes and of NAT's random port offsets: drawn at random by
    /// [`Config::default`] (the kernel's `nf_conntrack_hash_rnd` is random too); replay and
    /// tests fix it for reproducible output.
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_entries: 262_144,
            timeouts: Timeouts::default(),
            tcp_loose: true,
            seed: std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64),
        }
    }
}

/// Counters of the table (the kernel's `nf_conntrack` statistics, `conntrack -S`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Packets that found their connection.
    pub found: u64,
    /// Packets given no connection (`invalid`).
    pub invalid: u64,
    /// Unconfirmed entries created.
    pub new: u64,
    /// Packets refused because the table was full (`drop`).
    pub drop: u64,
    /// Entries removed by early drop (`early_drop`).
    pub early_drop: u64,
    /// Confirmations that failed on a clash (`insert_failed`).
    pub insert_failed: u64,
    /// Confirmations that found the same connection confirmed and took it (`clash_resolve`).
    pub clash_resolve: u64,
}

#[derive(Default)]
struct AtomicStats {
    /// The per-packet counts, one stripe per tracking thread (as the kernel's per-CPU
    /// `nf_conntrack_stat`): threads that track at once do not write one cache line.
    per_packet: [Stripe; STRIPES],
    early_drop: AtomicU64,
    insert_failed: AtomicU64,
    clash_resolve: AtomicU64,
}

/// Stripes of the per-packet counts (threads beyond share them, still exactly).
const STRIPES: usize = 8;

/// One thread's stripe of the per-packet counts: `found`, `invalid`, `new`, `drop`, on a
/// cache line of its own.
#[derive(Default)]
#[repr(align(64))]
struct Stripe([AtomicU64; 4]);

/// The stripe of the calling thread: threads take stripes in turn, at their first track.
fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static MINE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    MINE.with(|m| *m)
}

/// Why [`Conntrack::confirm`] failed. Either way the packet is dropped, as the kernel's
/// `__nf_conntrack_confirm` returns NF_DROP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConfirmError {
    /// No unconfirmed entry has this id (discarded, reclaimed by the gc, or never existed).
    #[error("no unconfirmed connection with this id")]
    Gone,
    /// Another connection holds one of the tuples with a different NAT binding
    /// (`insert_failed`); the unconfirmed entry is freed.
    #[error("another connection holds this tuple")]
    Clash,
}

/// Why a flow leaves the flowtable ([`Conntrack::flow_teardown`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Teardown {
    /// A FIN was seen in the fast path: TCP goes to FIN_WAIT with its timeout (120 s).
    Fin,
    /// A RST was seen in the fast path: TCP goes to CLOSE with its timeout (10 s).
    Rst,
    /// The flow expired for idleness (or was removed for another reason): TCP goes back to
    /// ESTABLISHED with the mid-stream pickup (UNACK) timeout (300 s), UDP gets the stream
    /// timeout.
    Idle,
}

/// Slot kinds.
const FREE: u8 = 0;
const PENDING: u8 = 1;
const LIVE: u8 = 2;

/// One connection. `repr(C)` with the fields every packet touches first: with the slot's
/// header they fill the slot's first cache line.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub(crate) struct Entry {
    /// Unconfirmed: the timeout in ns; confirmed: the deadline in ns.
    pub deadline: u64,
    /// When the entry was created (UDP replies after `born` + 2 s make a stream: the kernel's
    /// `stream_ts`, set by the only unconfirmed packet).
    pub born: u64,
    pub packets: [u64; 2],
    pub bytes: [u64; 2],
    pub status: u32,
    pub mark: u32,
    pub tcp: Tcp,
    /// Original and reply tuples.
    pub tuple: [Key; 2],
}

impl Entry {
    /// Whether a confirmed entry is past its deadline. An offloaded flow never is: its packets
    /// bypass conntrack, and the kernel's gc keeps pushing its timeout (`nf_ct_offload_timeout`).
    #[inline]
    pub fn expired(&self, now: u64) -> bool {
        now >= self.deadline && self.status & status::OFFLOAD == 0
    }
}

/// A slab slot: generation, kind and protocol, then the entry; 192 bytes, cache-line aligned so
/// that a UDP packet reads one line and a TCP packet two.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
pub(crate) struct Slot {
    generation: u32,
    kind: u8,
    proto: u8,
    pub entry: Entry,
}

/// Where a tuple's entry is: shard, slot and which of its tuples it is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Loc {
    slot: u32,
    shard: u8,
    dir: u8,
}

/// The keyed hasher of the index maps: foldhash seeded from the table's seed, so a sender
/// who cannot see the seed cannot aim tuples at one bucket.
pub(crate) type Hb = FixedState;

/// The hasher of the table's seed mixed with `salt` (one per map).
pub(crate) fn keyed(seed: u64, salt: u64) -> Hb {
    FixedState::with_seed(fmix(seed ^ salt))
}

#[inline]
pub(crate) fn fmix(mut z: u64) -> u64 {
    z ^= z >> 33;
    z = z.wrapping_mul(0xff51_afd7_ed55_8ccd);
    z ^= z >> 33;
    z = z.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    z ^ (z >> 33)
}

pub(crate) struct Shard {
    index: Index<Key, Loc, Hb>,
    pub slots: Vec<Slot>,
    free: Vec<u32>,
}

/// The connection tracking table. See the crate documentation.
pub struct Conntrack {
    shards: Box<[Mutex<Shard>]>,
    /// Per shard: where its index's buckets are, read without the lock by
    /// [`Conntrack::prefetch`].
    heads: Box<[Head<Hb>]>,
    pub(crate) cfg: Config,
    count: AtomicUsize,
    stats: AtomicStats,
    rng: AtomicU64,
    /// The keyed hash that picks a tuple's shard and its early-drop window.
    shard_hash: Hb,
    gc_cursor: AtomicUsize,
    pub(crate) counts: Counts,
    /// Source-NATed connections by their original source (`nf_nat_bysource`), for
    /// `find_appropriate_src`. Taken after shard locks, never before one.
    pub(crate) bysource: Mutex<HashMap<SrcKey, Vec<u64>, Hb>>,
    /// The rarely used extensions of connections, by id, outside the slots (which stay three
    /// cache lines): `ct label` bits and the `ct event set` mask (the kernel's
    /// `nf_conn_labels` and ecache extensions). Entries of gone connections leave at `gc`.
    extras: Mutex<HashMap<u64, Extras>>,
}

/// A connection's extensions kept beside its slot (see [`Conntrack::add_labels`],
/// [`Conntrack::set_events`]).
#[derive(Debug, Clone, Copy, Default)]
struct Extras {
    /// `ct label`: bit N is `1 << N`.
    labels: u128,
    /// `ct event set` mask (`ct_event` bits).
    events: u32,
}

/// The original source of a connection: address, port (ICMP id), protocol, zone, family.
pub(crate) type SrcKey = ([u8; 16], u16, u8, u16, u8);

pub(crate) fn src_key(k: &Key) -> SrcKey {
    (k.src, k.sport, k.proto, k.zone, k.family)
}

/// Decode an id: (shard, slot, generation).
#[inline]
fn decode(id: u64) -> (usize, usize, u32) {
    let low = id as u32;
    (
        (low >> SLOT_BITS) as usize % SHARDS,
        (low & (MAX_SLOTS as u32 - 1)) as usize,
        (id >> 32) as u32,
    )
}

#[inline]
fn encode(shard: usize, slot: usize, generation: u32) -> u64 {
    u64::from(generation) << 32 | (shard as u64) << SLOT_BITS | slot as u64
}

/// The facts of a packet that the trackers read.
#[derive(Debug, Clone, Copy, Default)]
struct Pkt {
    /// IP length in bytes (what the kernel's accounting counts).
    len: u32,
    seg: Segment,
}

/// Result of looking a tuple up and updating its entry.
enum Found {
    Info(CtInfo),
    Miss,
    /// The entry is expired or is to be reopened: remove it, then track as new.
    Remove(u64),
}

impl Conntrack {
    /// An empty table.
    pub fn new(cfg: Config) -> Conntrack {
        // Each shard's index and its head hash alike.
        let (shards, heads): (Vec<_>, Vec<_>) = (0..SHARDS)
            .map(|i| {
                let hasher = keyed(cfg.seed, i as u64);
                let shard = Mutex::new(Shard {
                    index: Index::new(hasher.clone()),
                    slots: Vec::new(),
                    free: Vec::new(),
                });
                (shard, Head::new(hasher))
            })
            .unzip();
        Conntrack {
            shards: shards.into(),
            heads: heads.into(),
            cfg,
            count: AtomicUsize::new(0),
            stats: AtomicStats::default(),
            rng: AtomicU64::new(cfg.seed),
            shard_hash: keyed(cfg.seed, SHARDS as u64),
            gc_cursor: AtomicUsize::new(0),
            counts: Counts::default(),
            bysource: Mutex::new(HashMap::with_hasher(keyed(cfg.seed, u64::MAX))),
            extras: Mutex::new(HashMap::default()),
        }
    }

    /// The settings the table was made with.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Number of entries, confirmed and unconfirmed (what counts against `max_entries`).
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Whether the table has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The table's counters.
    pub fn stats(&self) -> Stats {
        let s = &self.stats;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let per = |k: usize| s.per_packet.iter().map(|st| l(&st.0[k])).sum();
        Stats {
            found: per(0),
            invalid: per(1),
            new: per(2),
            drop: per(3),
            early_drop: l(&s.early_drop),
            insert_failed: l(&s.insert_failed),
            clash_resolve: l(&s.clash_resolve),
        }
    }

    /// A pseudo-random number (splitmix64 over a shared counter).
    pub(crate) fn random(&self) -> u64 {
        fmix(self.rng.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed))
    }

    #[inline]
    pub(crate) fn shard_of(&self, k: &Key) -> usize {
        let w = k.sym_words();
        (self.shard_hash.hash_one(&w[..3]) as usize) & (SHARDS - 1)
    }

    fn lock2(&self, a: usize, b: usize) -> (MutexGuard<'_, Shard>, Option<MutexGuard<'_, Shard>>) {
        if a == b {
            (self.shards[a].lock(), None)
        } else if a < b {
            let ga = self.shards[a].lock();
            let gb = self.shards[b].lock();
            (ga, Some(gb))
        } else {
            let gb = self.shards[b].lock();
            let ga = self.shards[a].lock();
            (ga, Some(gb))
        }
    }

    /// Track a packet: find its connection and update it, or create an unconfirmed one. See
    /// [`CtInfo`] for the result; `frame` is the Ethernet frame, `meta` its
    /// [`wasp_wire::parse`] result, `zone` the conntrack zone, `now_ns` the caller's clock.
    /// Call it once per packet (the kernel tracks a packet once, at its first conntrack hook,
    /// and later hooks read the attached result): a second call would count the packet twice
    /// and, for a packet of a new connection, create a second unconfirmed entry.
    ///
    /// As the kernel's `nf_conntrack_in` at prerouting with defragmentation off: non-IP
    /// packets, non-first fragments, truncated transport headers, invalid TCP flag
    /// combinations (`tcp_error`), malformed UDP lengths (`udp_error`), ICMP types above 18,
    /// TCP packets the state table calls invalid, ICMP errors about no tracked connection, and
    /// first packets that cannot start a connection (a TCP packet other than SYN or ACK, an
    /// ICMP type other than a request) get `invalid`; ICMPv6 neighbour discovery and MLD get
    /// `untracked`; ICMP errors whose inner packet belongs to a connection get `related`.
    pub fn track(&self, frame: &[u8], meta: &PacketMeta, zone: u16, now_ns: u64) -> CtInfo {
        let info = self.track_inner(frame, meta, zone, now_ns);
        let k = if info.drop {
            3
        } else if info.state == ct_state::INVALID {
            1
        } else if info.pending {
            2
        } else if info.id != 0 {
            0
        } else {
            return info;
        };
        self.stats.per_packet[stripe()].0[k].fetch_add(1, Ordering::Relaxed);
        info
    }

    /// Start loading the part of the table that [`Conntrack::track`] of this packet reads
    /// first (the bucket of its tuple's index), so that the lookups of a vector of packets
    /// overlap their cache misses: call it for each packet of the vector, then track them in
    /// order. It changes nothing and answers nothing; a table of fewer than
    /// [`PREFETCH_MIN`] entries (held in the caches anyway) is not touched.
    #[inline]
    pub fn prefetch(&self, frame: &[u8], meta: &PacketMeta, zone: u16) {
        if self.len() < PREFETCH_MIN {
            return;
        }
        if let Ok(key) = Key::from_packet(frame, meta, zone) {
            let head = &self.heads[self.shard_of(&key)];
            head.prefetch(head.hash(&key));
        }
    }

    fn track_inner(&self, frame: &[u8], meta: &PacketMeta, zone: u16, now: u64) -> CtInfo {
        let Ok(key) = Key::from_packet(frame, meta, zone) else {
            return CtInfo::INVALID;
        };
        let l4 = usize::from(meta.l4.map_or(0, |l| l.offset));
        let net = usize::from(meta.net_offset);
        let ip_end = ip_end(frame, meta).unwrap_or(frame.len());
        let mut pkt = Pkt {
            len: (ip_end.saturating_sub(net)) as u32,
            seg: Segment::default(),
        };
        match key.proto {
            proto::TCP => match tcp_segment(frame, l4, ip_end) {
                Some(s) => pkt.seg = s,
                None => return CtInfo::INVALID,
            },
            proto::UDP => {
                let len = be16(frame, l4 + udp::field::LENGTH).map_or(0, usize::from);
                if len < udp::HEADER_LEN || len > ip_end.saturating_sub(l4) {
                    return CtInfo::INVALID;
                }
            }
            proto::UDPLITE => {
                // UDP-Lite has UDP's layout, its length field the checksum coverage (RFC 3828);
                // the fields are read as far as they are there (udplite_error).
                let cov = be16(frame, l4 + udp::field::LENGTH).map_or(0, usize::from);
                let udplen = ip_end.saturating_sub(l4);
                if (cov != 0 && (cov < udp::HEADER_LEN || cov > udplen))
                    || be16(frame, l4 + udp::field::CHECKSUM) == Some(0)
                {
                    return CtInfo::INVALID;
                }
            }
            proto::ICMP => {
                let t = (key.dport >> 8) as u8;
                if t > 18 {
                    return CtInfo::INVALID;
                }
                if icmp::is_error(t) {
                    return self.related(frame, meta, &key, l4 + icmp::field::QUOTE, ip_end, now);
                }
            }
            proto::ICMPV6 => {
                let t = (key.dport >> 8) as u8;
                if matches!(t, 130..=136 | 143) {
                    return CtInfo {
                        state: ct_state::UNTRACKED,
                        ..CtInfo::INVALID
                    };
                }
                if icmpv6::is_error(t) {
                    let quote = l4 + icmpv6::field::QUOTE;
                    return self.related(frame, meta, &key, quote, ip_end, now);
                }
            }
            _ => {}
        }
        for _ in 0..3 {
            match self.find_update(&key, &pkt, now) {
                Found::Info(i) => return i,
                Found::Miss => return self.create(key, &pkt, now),
                Found::Remove(id) => {
                    self.remove_where(id, |_| true);
                }
            }
        }
        CtInfo::INVALID
    }

    /// An ICMP error: `related` to the connection of the inner packet (at `inner` in the frame),
    /// as `nf_conntrack_inet_error`: the inner tuple is inverted and looked up; the outer
    /// destination must be the found direction's destination.
    fn related(
        &self,
        frame: &[u8],
        meta: &PacketMeta,
        outer: &Key,
        inner: usize,
        end: usize,
        now: u64,
    ) -> CtInfo {
        let frame = &frame[..end.min(frame.len())];
        let Some(ik) = inner_key(frame, meta, outer, inner) else {
            return CtInfo::INVALID;
        };
        let Some(inv) = ik.invert() else {
            return CtInfo::INVALID;
        };
        let Some((loc, g)) = self.find_locked(&inv) else {
            return CtInfo::INVALID;
        };
        let slot = &g.slots[loc.slot as usize];
        let e = &slot.entry;
        if e.expired(now) || e.tuple[usize::from(loc.dir)].dst != outer.dst {
            return CtInfo::INVALID;
        }
        CtInfo {
            state: ct_state::RELATED,
            dir: if loc.dir == 0 {
                Dir::Original
            } else {
                Dir::Reply
            },
            status: e.status,
            mark: e.mark,
            id: encode(usize::from(loc.shard), loc.slot as usize, slot.generation),
            pending: false,
            drop: false,
        }
    }

    /// Find a confirmed entry by tuple and lock its shard.
    fn find_locked(&self, key: &Key) -> Option<(Loc, MutexGuard<'_, Shard>)> {
        let s = self.shard_of(key);
        let g = self.shards[s].lock();
        let loc = *g.index.get(key)?;
        if usize::from(loc.shard) == s {
            return Some((loc, g));
        }
        drop(g);
        let g = self.shards[usize::from(loc.shard)].lock();
        let slot = g.slots.get(loc.slot as usize)?;
        (slot.kind == LIVE && slot.entry.tuple[usize::from(loc.dir)] == *key).then_some((loc, g))
    }

    fn find_update(&self, key: &Key, pkt: &Pkt, now: u64) -> Found {
        let Some((loc, mut g)) = self.find_locked(key) else {
            return Found::Miss;
        };
        let shard = usize::from(loc.shard);
        let to = &self.cfg.timeouts;
        let slot = &mut g.slots[loc.slot as usize];
        let id = encode(shard, loc.slot as usize, slot.generation);
        let slot_proto = slot.proto;
        let e = &mut slot.entry;
        if e.expired(now) {
            return Found::Remove(id);
        }
        let dir = if loc.dir == 0 {
            Dir::Original
        } else {
            Dir::Reply
        };
        let state = if dir == Dir::Reply || e.status & status::SEEN_REPLY != 0 {
            ct_state::ESTABLISHED
        } else {
            ct_state::NEW
        };
        let (timeout_s, kill) = match l4_packet(e, slot_proto, dir, pkt, now, to) {
            L4::Invalid => return Found::Info(CtInfo::INVALID),
            L4::Reopen => return Found::Remove(id),
            L4::Accept => (None, false),
            L4::Refresh(t, kill) => (Some(t), kill),
        };
        if let Some(t) = timeout_s
            && e.status & status::FIXED_TIMEOUT == 0
        {
            e.deadline = now.saturating_add(u64::from(t) * NS);
        }
        if timeout_s.is_some() {
            e.packets[dir as usize] += 1;
            e.bytes[dir as usize] += u64::from(pkt.len);
        }
        if dir == Dir::Reply {
            e.status |= status::SEEN_REPLY;
        }
        let info = CtInfo {
            state,
            dir,
            status: e.status,
            mark: e.mark,
            id,
            pending: false,
            drop: false,
        };
        if kill {
            drop(g);
            self.remove_where(id, |_| true);
        }
        Found::Info(info)
    }

    fn create(&self, key: Key, pkt: &Pkt, now: u64) -> CtInfo {
        let Some(reply) = key.invert() else {
            return CtInfo::INVALID;
        };
        let mut e = Entry {
            tuple: [key, reply],
            born: now,
            ..Entry::default()
        };
        match key.proto {
            proto::TCP => match Tcp::new(&pkt.seg) {
                Some(t) if self.cfg.tcp_loose || tcp::index(pkt.seg.flags) == tcp::Index::Syn => {
                    e.tcp = t
                }
                _ => return CtInfo::INVALID,
            },
            // Only requests start ICMP connections (`valid_new`).
            proto::ICMP if !matches!(key.dport >> 8, 8 | 13 | 15 | 17) => return CtInfo::INVALID,
            proto::ICMPV6 if !matches!(key.dport >> 8, 128 | 139) => return CtInfo::INVALID,
            _ => {}
        }
        let timeout = match l4_packet(
            &mut e,
            key.proto,
            Dir::Original,
            pkt,
            now,
            &self.cfg.timeouts,
        ) {
            L4::Refresh(t, false) => t,
            // A first packet the tracker refuses (or that would kill its own entry).
            _ => return CtInfo::INVALID,
        };
        e.deadline = u64::from(timeout) * NS;
        e.packets[0] = 1;
        e.bytes[0] = u64::from(pkt.len);
        let s = self.shard_of(&key);
        if self.count.fetch_add(1, Ordering::AcqRel) >= self.cfg.max_entries {
            self.count.fetch_sub(1, Ordering::AcqRel);
            if !self.early_drop(s, &key, now) {
                return CtInfo {
                    drop: true,
                    ..CtInfo::INVALID
                };
            }
            self.count.fetch_add(1, Ordering::AcqRel);
        }
        let mut g = self.shards[s].lock();
        let Some(slot) = alloc(&mut g) else {
            self.count.fetch_sub(1, Ordering::AcqRel);
            return CtInfo {
                drop: true,
                ..CtInfo::INVALID
            };
        };
        let sl = &mut g.slots[slot];
        sl.kind = PENDING;
        sl.proto = key.proto;
        sl.entry = e;
        CtInfo {
            state: ct_state::NEW,
            dir: Dir::Original,
            status: 0,
            mark: 0,
            id: encode(s, slot, sl.generation),
            pending: true,
            drop: false,
        }
    }

    /// `early_drop`: look at the slots near the new tuple's hash in its shard and remove every
    /// expired entry and every confirmed entry that is not ASSURED (nor dying). True if one
    /// was removed.
    fn early_drop(&self, s: usize, key: &Key, now: u64) -> bool {
        let mut victims = Vec::new();
        {
            let g = self.shards[s].lock();
            let n = g.slots.len();
            if n == 0 {
                return false;
            }
            let start = (self.shard_hash.hash_one(key) as usize) % n;
            for i in 0..EVICTION_RANGE.min(n) {
                let at = (start + i) % n;
                let sl = &g.slots[at];
                if sl.kind != LIVE {
                    continue;
                }
                let e = &sl.entry;
                if e.expired(now) || e.status & (status::ASSURED | status::DYING) == 0 {
                    victims.push(encode(s, at, sl.generation));
                }
            }
        }
        let mut dropped = 0;
        for id in victims {
            if self.remove_where(id, |e| {
                e.expired(now) || e.status & (status::ASSURED | status::DYING) == 0
            }) {
                dropped += 1;
            }
        }
        self.stats.early_drop.fetch_add(dropped, Ordering::Relaxed);
        dropped > 0
    }

    /// Put an unconfirmed entry in the table (`__nf_conntrack_confirm`) with its deadline
    /// counted from `now_ns`. Returns the id of the connection the packet belongs to: `id`,
    /// or on a clash with the same connection confirmed meanwhile by another worker (same
    /// tuples, or an existing entry without NAT) that entry's id, as `nf_ct_resolve_clash`
    /// (this packet's counts are added to it). Confirming a confirmed entry returns its id.
    ///
    /// Errors: [`ConfirmError::Gone`], [`ConfirmError::Clash`] (drop the packet).
    pub fn confirm(&self, id: u64, now_ns: u64) -> Result<u64, ConfirmError> {
        let (a, slot, generation) = decode(id);
        let reply = {
            let g = self.shards[a].lock();
            match g.slots.get(slot) {
                Some(s) if s.generation == generation && s.kind == PENDING => s.entry.tuple[1],
                Some(s) if s.generation == generation && s.kind == LIVE => return Ok(id),
                _ => return Err(ConfirmError::Gone),
            }
        };
        let b = self.shard_of(&reply);
        let (mut ga, mut gb) = self.lock2(a, b);
        let sl = match ga.slots.get(slot) {
            Some(s) if s.generation == generation && s.kind == PENDING => *s,
            _ => return Err(ConfirmError::Gone),
        };
        let orig = sl.entry.tuple[0];
        let reply = sl.entry.tuple[1];
        // Both tuples go in, each in one probe that stops at a tuple already there: a clash,
        // resolved with the entry that holds the original tuple if one does, else the reply's
        // (the tuple put in first is taken out again).
        let here = |dir| Loc {
            slot: slot as u32,
            shard: a as u8,
            dir,
        };
        if let Err(&other) = ga.index.insert_new(orig, here(0), &self.heads[a]) {
            drop(gb);
            drop(ga);
            return self.resolve_clash(id, &sl.entry, other, now_ns);
        }
        // A connection to itself (generic protocols, a TCP self-connect) has equal tuples: the
        // kernel hashes it twice and finds the original direction first; one entry does that.
        if reply != orig {
            let gbr = gb.as_deref_mut().unwrap_or(&mut ga);
            let clash = gbr
                .index
                .insert_new(reply, here(1), &self.heads[b])
                .err()
                .copied();
            if let Some(other) = clash {
                ga.index.remove(&orig);
                drop(gb);
                drop(ga);
                return self.resolve_clash(id, &sl.entry, other, now_ns);
            }
        }
        let s = &mut ga.slots[slot];
        s.kind = LIVE;
        s.entry.status |= status::CONFIRMED;
        s.entry.deadline = now_ns.saturating_add(s.entry.deadline);
        if s.entry.status & status::SRC_NAT_DONE != 0 {
            self.bysource
                .lock()
                .entry(src_key(&orig))
                .or_default()
                .push(id);
        }
        Ok(id)
    }

    fn resolve_clash(
        &self,
        id: u64,
        loser: &Entry,
        other: Loc,
        now: u64,
    ) -> Result<u64, ConfirmError> {
        let res = {
            let mut g = self.shards[usize::from(other.shard)].lock();
            match g.slots.get_mut(other.slot as usize) {
                Some(s) if s.kind == LIVE => {
                    let e = &mut s.entry;
                    let winner =
                        encode(usize::from(other.shard), other.slot as usize, s.generation);
                    let nat_done = status::SRC_NAT_DONE | status::DST_NAT_DONE;
                    if e.status & status::DYING == 0
                        && !e.expired(now)
                        && (e.status & nat_done == 0 || e.tuple == loser.tuple)
                    {
                        // The packet's direction in the winner.
                        let d = usize::from(e.tuple[0] != loser.tuple[0]);
                        e.packets[d] += loser.packets[0];
                        e.bytes[d] += loser.bytes[0];
                        Ok(winner)
                    } else {
                        Err(ConfirmError::Clash)
                    }
                }
                _ => Err(ConfirmError::Clash),
            }
        };
        self.discard(id);
        match res {
            Ok(_) => self.stats.clash_resolve.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.stats.insert_failed.fetch_add(1, Ordering::Relaxed),
        };
        res
    }

    /// Free an unconfirmed entry (its packet was dropped): the kernel frees the unconfirmed
    /// conntrack with its skb. Returns false if `id` names no unconfirmed entry.
    pub fn discard(&self, id: u64) -> bool {
        let (a, slot, generation) = decode(id);
        let mut g = self.shards[a].lock();
        let ok =
            matches!(g.slots.get(slot), Some(s) if s.generation == generation && s.kind == PENDING);
        if ok {
            free(&mut g, slot);
            self.count.fetch_sub(1, Ordering::AcqRel);
        }
        ok
    }

    /// Remove the confirmed entry `id` (both index entries) if `cond` holds for it; unconfirmed
    /// entries are freed the same way. True if removed.
    fn remove_where(&self, id: u64, cond: impl Fn(&Entry) -> bool) -> bool {
        let (a, slot, generation) = decode(id);
        let reply = {
            let g = self.shards[a].lock();
            match g.slots.get(slot) {
                Some(s) if s.generation == generation && s.kind == LIVE => s.entry.tuple[1],
                Some(s) if s.generation == generation && s.kind == PENDING => {
                    drop(g);
                    return self.discard(id);
                }
                _ => return false,
            }
        };
        let b = self.shard_of(&reply);
        let (mut ga, mut gb) = self.lock2(a, b);
        match ga.slots.get(slot) {
            Some(s) if s.generation == generation && s.kind == LIVE && cond(&s.entry) => {}
            _ => return false,
        }
        let [orig, reply] = ga.slots[slot].entry.tuple;
        let snat = ga.slots[slot].entry.status & status::SRC_NAT_DONE != 0;
        ga.index.remove(&orig);
        let gbr = gb.as_deref_mut().unwrap_or(&mut ga);
        gbr.index.remove(&reply);
        free(&mut ga, slot);
        if snat {
            let mut by = self.bysource.lock();
            let k = src_key(&orig);
            if let Some(v) = by.get_mut(&k) {
                v.retain(|&x| x != id);
                if v.is_empty() {
                    by.remove(&k);
                }
            }
        }
        self.count.fetch_sub(1, Ordering::AcqRel);
        true
    }

    /// Run `f` on entry `id` (confirmed or not) under its shard's lock.
    pub(crate) fn with_entry<R>(
        &self,
        id: u64,
        f: impl FnOnce(&mut Entry, bool) -> R,
    ) -> Option<R> {
        let (a, slot, generation) = decode(id);
        let mut g = self.shards[a].lock();
        match g.slots.get_mut(slot) {
            Some(s) if s.generation == generation && s.kind != FREE => {
                let live = s.kind == LIVE;
                Some(f(&mut s.entry, live))
            }
            _ => None,
        }
    }

    /// Whether `id` names a connection that is in the table and not expired at `now_ns`, or an
    /// unconfirmed one.
    pub fn is_alive(&self, id: u64, now_ns: u64) -> bool {
        self.with_entry(id, |e, live| !live || !e.expired(now_ns)) == Some(true)
    }

    /// Set the connection's mark (`ct mark set`, nft_ct_set_eval). False if `id` is gone.
    pub fn set_mark(&self, id: u64, mark: u32) -> bool {
        self.with_entry(id, |e, _| e.mark = mark).is_some()
    }

    /// Add `bits` to the connection's labels (`ct label set N`: bit N is `1 << N`; the
    /// kernel's `nf_connlabels_replace` with the bits as mask and value). False if `id` is gone.
    pub fn add_labels(&self, id: u64, bits: u128) -> bool {
        if self.with_entry(id, |_, _| ()).is_none() {
            return false;
        }
        self.extras.lock().entry(id).or_default().labels |= bits;
        true
    }

    /// Set the connection's event mask (`ct event set`, `ct_event` bits: new 1, related 2,
    /// destroy 4, ...; the kernel's `nf_ct_ecache_ext_add` ctmask). wasp reports no conntrack
    /// events, so the mask has no effect beyond being shown in [`EntryInfo::events`]. False if
    /// `id` is gone.
    pub fn set_events(&self, id: u64, mask: u32) -> bool {
        if self.with_entry(id, |_, _| ()).is_none() {
            return false;
        }
        self.extras.lock().entry(id).or_default().events = mask;
        true
    }

    /// Set the connection's timeout to `timeout_ns` from `now_ns` (ctnetlink's
    /// `CTA_TIMEOUT`). False if `id` is gone.
    pub fn set_timeout(&self, id: u64, timeout_ns: u64, now_ns: u64) -> bool {
        self.with_entry(id, |e, live| {
            e.deadline = if live {
                now_ns.saturating_add(timeout_ns)
            } else {
                timeout_ns
            }
        })
        .is_some()
    }

    /// Set (`on`) or clear the IPS_OFFLOAD bit (a flowtable took the flow, or gave it back).
    /// False if `id` is gone.
    pub fn set_offload(&self, id: u64, on: bool) -> bool {
        self.with_entry(id, |e, _| {
            if on {
                e.status |= status::OFFLOAD;
            } else {
                e.status &= !(status::OFFLOAD | status::HW_OFFLOAD);
            }
        })
        .is_some()
    }

    /// Set a TCP connection's state and its timeout (`timeout_ns` from `now_ns`). False if `id`
    /// is gone or not TCP.
    pub fn set_tcp_state(&self, id: u64, state: TcpState, timeout_ns: u64, now_ns: u64) -> bool {
        self.with_entry(id, |e, live| {
            if e.tuple[0].proto != proto::TCP {
                return false;
            }
            e.tcp.set_state(state);
            e.deadline = if live {
                now_ns.saturating_add(timeout_ns)
            } else {
                timeout_ns
            };
            true
        }) == Some(true)
    }

    /// Give a flow back from the flowtable (`flow_offload_teardown` with the fix of cases C19):
    /// the OFFLOAD bits are cleared first (so that a later packet cannot re-offload a closing
    /// connection), then TCP gets FIN_WAIT and its timeout on [`Teardown::Fin`], CLOSE and its
    /// timeout on [`Teardown::Rst`], ESTABLISHED and the UNACK timeout on [`Teardown::Idle`];
    /// UDP gets the stream timeout; other protocols their usual timeout. False if `id` is gone.
    pub fn flow_teardown(&self, id: u64, why: Teardown, now_ns: u64) -> bool {
        let to = self.cfg.timeouts;
        self.with_entry(id, |e, live| {
            e.status &= !(status::OFFLOAD | status::HW_OFFLOAD);
            let secs = match e.tuple[0].proto {
                proto::TCP => {
                    let (st, t) = match why {
                        Teardown::Fin => (TcpState::FinWait, to.tcp[TcpState::FinWait as usize]),
                        Teardown::Rst => (TcpState::Close, to.tcp[TcpState::Close as usize]),
                        Teardown::Idle => (TcpState::Established, to.tcp_unack),
                    };
                    e.tcp.set_state(st);
                    t
                }
                proto::UDP | proto::UDPLITE => to.udp_stream,
                proto::ICMP => to.icmp,
                proto::ICMPV6 => to.icmpv6,
                _ => to.generic,
            };
            let t = u64::from(secs) * NS;
            e.deadline = if live { now_ns.saturating_add(t) } else { t };
        })
        .is_some()
    }

    /// Kill a connection (`nf_ct_kill`): it is marked DYING and leaves the table at once, so no
    /// packet finds it again and [`Conntrack::is_alive`] is false. False if `id` is gone.
    pub fn kill(&self, id: u64) -> bool {
        self.with_entry(id, |e, _| e.status |= status::DYING);
        self.remove_where(id, |_| true)
    }

    /// Kill every confirmed, unexpired connection `pick` selects (`conntrack -D` with a filter,
    /// `conntrack -F` with none), each as [`Conntrack::kill`]: its tuples, and with them its NAT
    /// binding, leave the table at once. Returns the ids killed.
    pub fn kill_where(&self, now_ns: u64, pick: impl Fn(&EntryInfo) -> bool) -> Vec<u64> {
        self.entries(now_ns)
            .into_iter()
            .filter(|e| pick(e))
            .filter_map(|e| self.kill(e.id).then_some(e.id))
            .collect()
    }

    /// One bounded garbage-collection pass (`gc_worker`): look at up to `max_slots` slots from
    /// where the last pass stopped, remove confirmed entries expired at `now_ns` and free
    /// unconfirmed entries older than 10 s (forgotten by their caller), and give offloaded
    /// entries with less than half a day left a day again (`nf_ct_offload_timeout`; an offloaded
    /// entry never expires while OFFLOAD is set). Returns how many were
    /// removed. Calling it with `max_slots` of at least the table's slot count covers the whole
    /// table.
    pub fn gc(&self, now_ns: u64, max_slots: usize) -> usize {
        let mut left = max_slots;
        let mut removed = 0;
        let mut visited_shards = 0;
        while left > 0 && visited_shards <= SHARDS {
            let cur = self.gc_cursor.load(Ordering::Relaxed);
            let (s, start) = ((cur >> SLOT_BITS) % SHARDS, cur & (MAX_SLOTS - 1));
            let mut dead = Vec::new();
            let next;
            {
                let mut g = self.shards[s].lock();
                let end = g.slots.len().min(start + left);
                for (i, sl) in g.slots.iter_mut().enumerate().take(end).skip(start) {
                    let e = &mut sl.entry;
                    if sl.kind == LIVE && e.status & status::OFFLOAD != 0 {
                        // nf_ct_offload_timeout: below half a day left, a day again.
                        if e.deadline.saturating_sub(now_ns) < OFFLOAD_DAY_NS / 2 {
                            e.deadline = now_ns.saturating_add(OFFLOAD_DAY_NS);
                        }
                        continue;
                    }
                    let gone = match sl.kind {
                        LIVE => e.expired(now_ns),
                        PENDING => now_ns.saturating_sub(e.born) > PENDING_MAX_AGE_NS,
                        _ => false,
                    };
                    if gone {
                        dead.push(encode(s, i, sl.generation));
                    }
                }
                left -= end.saturating_sub(start).max(1).min(left);
                if end >= g.slots.len() {
                    next = ((s + 1) % SHARDS) << SLOT_BITS;
                    visited_shards += 1;
                } else {
                    next = s << SLOT_BITS | end;
                }
            }
            self.gc_cursor.store(next, Ordering::Relaxed);
            for id in dead {
                let ok = self.remove_where(id, |e| e.expired(now_ns))
                    || self.with_entry(id, |e, live| {
                        !live && now_ns.saturating_sub(e.born) > PENDING_MAX_AGE_NS
                    }) == Some(true)
                        && self.discard(id);
                removed += usize::from(ok);
            }
        }
        let mut extras = self.extras.lock();
        if !extras.is_empty() {
            extras.retain(|id, _| self.with_entry(*id, |_, _| ()).is_some());
        }
        removed
    }

    /// A snapshot of one connection at `now_ns` (confirmed or not).
    pub fn get(&self, id: u64, now_ns: u64) -> Option<EntryInfo> {
        let mut info = self.with_entry(id, |e, live| EntryInfo::new(id, e, live, now_ns))?;
        if let Some(x) = self.extras.lock().get(&id) {
            info.label = x.labels;
            info.events = x.events;
        }
        Some(info)
    }

    /// A snapshot of every confirmed, unexpired connection at `now_ns`, as `conntrack -L`
    /// lists them (in table order).
    pub fn entries(&self, now_ns: u64) -> Vec<EntryInfo> {
        let mut out = Vec::new();
        for (s, m) in self.shards.iter().enumerate() {
            let g = m.lock();
            for (i, sl) in g.slots.iter().enumerate() {
                if sl.kind == LIVE && !sl.entry.expired(now_ns) {
                    out.push(EntryInfo::new(
                        encode(s, i, sl.generation),
                        &sl.entry,
                        true,
                        now_ns,
                    ));
                }
            }
        }
        out
    }

    /// Confirmed, unexpired connections at `now_ns` by protocol and state, for metrics: TCP by
    /// its state's name (`ESTABLISHED`, ...), every other protocol by whether it is assured
    /// (`ASSURED`, `UNREPLIED` when no reply was seen, else `REPLIED`). Sorted, without
    /// zeros. Walks the table one shard at a time, as [`Conntrack::entries`], allocating
    /// nothing per entry.
    pub fn state_counts(&self, now_ns: u64) -> Vec<(&'static str, &'static str, u64)> {
        let mut counts: std::collections::BTreeMap<(&'static str, &'static str), u64> =
            std::collections::BTreeMap::new();
        for m in &self.shards {
            let g = m.lock();
            for sl in &g.slots {
                if sl.kind != LIVE || sl.entry.expired(now_ns) {
                    continue;
                }
                let e = &sl.entry;
                let p = e.tuple[0].proto;
                let state = if p == proto::TCP {
                    e.tcp.state().name()
                } else if e.status & status::ASSURED != 0 {
                    "ASSURED"
                } else if e.status & status::SEEN_REPLY == 0 {
                    "UNREPLIED"
                } else {
                    "REPLIED"
                };
                *counts
                    .entry((crate::display::proto_name(p), state))
                    .or_default() += 1;
            }
        }
        counts.into_iter().map(|((p, s), n)| (p, s, n)).collect()
    }

    /// Whether a confirmed connection other than `except` holds `key` in either direction and
    /// is not expired (`nf_conntrack_tuple_taken`).
    pub(crate) fn tuple_taken(&self, key: &Key, except: u64, now: u64) -> bool {
        match self.find_locked(key) {
            Some((loc, g)) => {
                let sl = &g.slots[loc.slot as usize];
                encode(usize::from(loc.shard), loc.slot as usize, sl.generation) != except
                    && !sl.entry.expired(now)
            }
            None => false,
        }
    }

    /// Consistency check for tests: every index entry points at a live entry holding that tuple
    /// and every live entry is indexed by both tuples; returns the number of live entries.
    #[doc(hidden)]
    pub fn check_consistency(&self) -> Result<usize, String> {
        let guards: Vec<_> = self.shards.iter().map(|m| m.lock()).collect();
        let mut live = 0;
        let mut pending = 0;
        for (s, g) in guards.iter().enumerate() {
            for (k, loc) in g.index.iter() {
                if self.shard_of(k) != s {
                    return Err(format!("{k:?} indexed in shard {s}"));
                }
                let sl = guards[usize::from(loc.shard)]
                    .slots
                    .get(loc.slot as usize)
                    .ok_or("dangling slot")?;
                if sl.kind != LIVE || sl.entry.tuple[usize::from(loc.dir)] != *k {
                    return Err(format!("stale index entry {k:?}"));
                }
            }
            for (i, sl) in g.slots.iter().enumerate() {
                match sl.kind {
                    LIVE => {
                        live += 1;
                        let self_conn = sl.entry.tuple[0] == sl.entry.tuple[1];
                        for d in 0..if self_conn { 1 } else { 2 } {
                            let k = sl.entry.tuple[d];
                            let l = guards[self.shard_of(&k)]
                                .index
                                .get(&k)
                                .ok_or(format!("entry {s}/{i} not indexed by {d}"))?;
                            if usize::from(l.shard) != s
                                || l.slot as usize != i
                                || usize::from(l.dir) != d
                            {
                                return Err(format!("entry {s}/{i} indexed elsewhere"));
                            }
                        }
                    }
                    PENDING => pending += 1,
                    _ => {}
                }
            }
        }
        if live + pending != self.len() {
            return Err(format!("count {} != {live} + {pending}", self.len()));
        }
        let by = self.bysource.lock();
        let mut snat = 0;
        for (k, ids) in by.iter() {
            for &id in ids {
                let (a, slot, generation) = decode(id);
                match guards[a].slots.get(slot) {
                    Some(sl)
                        if sl.generation == generation
                            && sl.kind == LIVE
                            && sl.entry.status & status::SRC_NAT_DONE != 0
                            && src_key(&sl.entry.tuple[0]) == *k => {}
                    _ => return Err(format!("stale bysource entry {id:#x}")),
                }
                snat += 1;
            }
        }
        let want = guards
            .iter()
            .flat_map(|g| g.slots.iter())
            .filter(|sl| sl.kind == LIVE && sl.entry.status & status::SRC_NAT_DONE != 0)
            .count();
        if snat != want {
            return Err(format!(
                "bysource holds {snat} of {want} source-NATed entries"
            ));
        }
        Ok(live)
    }
}

fn alloc(g: &mut Shard) -> Option<usize> {
    let slot = match g.free.pop() {
        Some(s) => s as usize,
        None => {
            if g.slots.len() >= MAX_SLOTS {
                return None;
            }
            g.slots.push(Slot::default());
            g.slots.len() - 1
        }
    };
    let s = &mut g.slots[slot];
    s.generation = s.generation.wrapping_add(1).max(1);
    Some(slot)
}

fn free(g: &mut Shard, slot: usize) {
    g.slots[slot].kind = FREE;
    g.free.push(slot as u32);
}

/// What a tracker decided.
enum L4 {
    Invalid,
    Reopen,
    Accept,
    /// Timeout in seconds; kill the entry after this packet.
    Refresh(u32, bool),
}

/// The per-protocol `packet` handlers (`nf_conntrack_tcp_packet`, `nf_conntrack_udp_packet`,
/// `nf_conntrack_icmp_packet`, generic).
fn l4_packet(e: &mut Entry, proto: u8, dir: Dir, pkt: &Pkt, now: u64, to: &Timeouts) -> L4 {
    let seen_reply = e.status & status::SEEN_REPLY != 0;
    match proto {
        proto::TCP => {
            let assured = e.status & status::ASSURED != 0;
            let (v, set_assured, kill) = e.tcp.packet(dir, &pkt.seg, seen_reply, assured, to);
            if set_assured {
                e.status |= status::ASSURED;
            }
            match v {
                Verdict::Invalid => L4::Invalid,
                Verdict::Reopen => L4::Reopen,
                Verdict::Accept => L4::Accept,
                Verdict::Refresh(t) => L4::Refresh(t, kill),
            }
        }
        proto::UDP | proto::UDPLITE => {
            if seen_reply {
                let udplite = proto == proto::UDPLITE;
                if udplite || now > e.born.saturating_add(UDP_STREAM_DELAY_NS) {
                    if e.status & status::ASSURED == 0 {
                        e.status |= status::ASSURED;
                    }
                    L4::Refresh(to.udp_stream, false)
                } else {
                    L4::Refresh(to.udp, false)
                }
            } else {
                L4::Refresh(to.udp, false)
            }
        }
        proto::ICMP => L4::Refresh(to.icmp, false),
        proto::ICMPV6 => L4::Refresh(to.icmpv6, false),
        _ => L4::Refresh(to.generic, false),
    }
}

#[inline]
fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// End of the IP packet in the frame (total length / payload length), never past the frame.
/// `meta.l4` being set, the header at `net_offset` passed validation (so its view builds).
pub(crate) fn ip_end(frame: &[u8], meta: &PacketMeta) -> Option<usize> {
    let net = usize::from(meta.net_offset);
    let ip = frame.get(net..)?;
    let end = match meta.l3 {
        L3Kind::Ipv4 => net + usize::from(ipv4::Packet::new_checked(ip).ok()?.total_len()),
        L3Kind::Ipv6 => match ipv6::Packet::new_checked(ip).ok()?.payload_len() {
            0 => frame.len(),
            pl => net + ipv6::HEADER_LEN + usize::from(pl),
        },
        _ => return None,
    };
    Some(end.min(frame.len()))
}

/// The TCP segment at `at` (`tcp_error`: header within the packet, flags valid).
fn tcp_segment(frame: &[u8], at: usize, end: usize) -> Option<Segment> {
    let seg = frame.get(at..end.min(frame.len()))?;
    let t = tcp_hdr::Packet::new_checked(seg).ok()?;
    if !tcp::valid_flags(t.flags()) {
        return None;
    }
    Some(Segment {
        flags: t.flags(),
        seq: t.seq(),
        ack: t.ack(),
        win: t.window(),
        payload: (end - at - t.header_len()) as u32,
    })
}

/// The tuple of the packet embedded in an ICMP error at `at` (`nf_ct_get_tuplepr` on the inner
/// header): same family as the outer packet, ports or ICMP fields from its first 8 bytes.
pub(crate) fn inner_key(frame: &[u8], _meta: &PacketMeta, outer: &Key, at: usize) -> Option<Key> {
    let mut k = Key {
        zone: outer.zone,
        family: outer.family,
        ..Key::default()
    };
    let quoted = frame.get(at..)?;
    let l4 = if outer.is_v4() {
        // The fixed part only: the options of a quoted header may be cut off.
        let h = ipv4::FixedHeader::new_checked(quoted).ok()?;
        if h.version() != 4 || h.header_len() < ipv4::MIN_HEADER_LEN {
            return None;
        }
        // Inner non-first fragments have no ports.
        if h.frag_offset() != 0 {
            return None;
        }
        k.proto = h.protocol();
        k.src[..4].copy_from_slice(&h.src());
        k.dst[..4].copy_from_slice(&h.dst());
        at + h.header_len()
    } else {
        let h = ipv6::Packet::new_checked(quoted).ok()?;
        if h.version() != 6 {
            return None;
        }
        k.proto = h.next_header();
        k.src.copy_from_slice(&h.src());
        k.dst.copy_from_slice(&h.dst());
        at + ipv6::HEADER_LEN
    };
    l4_fields(&mut k, frame, l4).ok()?;
    Some(k)
}
