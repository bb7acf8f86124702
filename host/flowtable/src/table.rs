//! [`Flowtable`]: the shared, sharded flow table, its fast path, teardown, GC and listing.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use parking_lot::{Mutex, RwLock};
use wasp_index::{Head, Index};
use wasp_wire::meta::PacketMeta;

use crate::block::{BlockList, BlockLock, BlockSlot, FlowView, OffloadBlock};
use crate::edit::FlowEdit;
use crate::key::{Dir, FlowKey, KeyHash, Parsed, geneve_inner, parse_at};
use crate::route::{DirPlan, Route, TunnelWork};

/// Flows from which [`Flowtable::prefetch`] prefetches: below, the index (two buckets of
/// about 64 bytes per flow) and the flows stay in a core's caches.
pub const PREFETCH_MIN: usize = 4096;

/// The kernel's default flow timeout (`nf_flowtable_tcp_timeout` and `nf_flowtable_udp_timeout`,
/// 30 s): a flow that moved no packet for this long is torn down by [`Flowtable::gc`].
pub const DEFAULT_TIMEOUT_NS: u64 = 30_000_000_000;

/// A flow in a [`Flowtable`]: a number given by [`Flowtable::add`], never reused by that table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowId(pub u64);

/// How a flowtable is made.
#[derive(Debug, Clone)]
pub struct FlowtableConfig {
    /// Its name (`flowtable NAME`), for listings.
    pub name: String,
    /// Idle timeout, ns ([`DEFAULT_TIMEOUT_NS`]).
    pub timeout_ns: u64,
    /// Most flows held; [`Flowtable::add`] beyond fails with [`AddError::Full`].
    pub max_flows: usize,
    /// The flowtable's `counter` flag: listings show per-flow counters. Flows count always.
    pub counter: bool,
    /// The block list's lock.
    pub block_lock: BlockLock,
    /// Number of shards of the key map (rounded up to a power of two, at least 1).
    pub shards: usize,
    /// Seed of the flow maps' hash: drawn at random by [`FlowtableConfig::default`]; replay
    /// and tests may fix it.
    pub seed: u64,
}

impl Default for FlowtableConfig {
    fn default() -> Self {
        FlowtableConfig {
            name: "ft".to_string(),
            timeout_ns: DEFAULT_TIMEOUT_NS,
            max_flows: 1 << 20,
            counter: false,
            block_lock: BlockLock::RwLock,
            shards: 64,
            seed: std::collections::hash_map::RandomState::new().hash_one(0xf10u64),
        }
    }
}

/// A flow to add: both directions' keys and routes, and the caller's connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSpec {
    /// The caller's connection id (e.g. the conntrack entry's), given back in teardowns and
    /// events.
    pub ct_id: u64,
    /// Keys, indexed by [`Dir::index`]: original then reply. The reply key is the original's
    /// reply tuple after NAT, with the reply's input device.
    pub keys: [FlowKey; 2],
    /// Routes, indexed by [`Dir::index`].
    pub routes: [Route; 2],
}

/// Why [`Flowtable::add`] refused a flow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddError {
    /// A flow already holds this direction's key (the kernel's `rhashtable_insert_fast`
    /// -EEXIST).
    #[error("a flow with the {0:?} key exists")]
    Exists(Dir),
    /// The table holds `max_flows` flows.
    #[error("flowtable full ({0} flows)")]
    Full(usize),
    /// The spec is inconsistent (a key of mixed families or not TCP/UDP, both keys equal, a NAT
    /// address of the other family, Decap without a tunnel key, a bad encap template, MTU 0).
    #[error("invalid flow: {0}")]
    Invalid(&'static str),
}

/// Why a block could not be registered or removed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    /// A block of this name is registered.
    #[error("offload block {0} exists")]
    Exists(String),
    /// No block of this name.
    #[error("no offload block {0}")]
    NotFound(String),
}

/// Why the fast path handed a packet of a flow to the slow path (the chains).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SlowReason {
    /// TTL or hop limit <= 1 (`nf_flow_tuple_ip`, case C20): the slow path drops it and sends
    /// ICMP time exceeded. The flow stays.
    Ttl,
    /// The packet is bigger than the route's MTU (`nf_flow_exceeds_mtu`): the slow path sends
    /// fragmentation needed / packet too big. The flow stays.
    Mtu,
    /// A TCP FIN (`nf_flow_state_check`, case C19): the flow was torn down.
    Fin,
    /// A TCP RST: the flow was torn down.
    Rst,
    /// The flow is being torn down (`flow_offload_lookup` skips `NF_FLOW_TEARDOWN` flows).
    Teardown,
}

/// Why a flow left the table. What the caller does to its conntrack entry (case C19, Linux
/// `e5eaac2beb54` "netfilter: flowtable: fix TCP flow teardown" and the 2024 follow-up "infer
/// TCP state and timeout before flow teardown"): clear its offload bit (IPS_OFFLOAD) first, then
/// - [`TeardownReason::Fin`]: TCP state FIN_WAIT, timeout 120 s;
/// - [`TeardownReason::Rst`]: TCP state CLOSE, timeout 10 s;
/// - any other reason: TCP stays ESTABLISHED with the mid-stream pickup (UNACK) timeout, 300 s;
///   UDP gets its replied ("stream") timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TeardownReason {
    /// A TCP FIN in the fast path.
    Fin,
    /// A TCP RST in the fast path.
    Rst,
    /// No packet for the flowtable's timeout (software and blocks): [`Flowtable::gc`].
    Idle,
    /// The caller marked the connection dying ([`Flowtable::teardown`]; the kernel's GC tears
    /// down flows whose conntrack entry `nf_ct_is_dying`).
    Dying,
    /// [`Flowtable::del`].
    Deleted,
    /// [`Flowtable::flush`] (the flowtable or a device goes away).
    Flush,
}

impl TeardownReason {
    /// `fin`, `rst`, `idle`, `dying`, `deleted`, `flush`.
    pub fn name(self) -> &'static str {
        match self {
            TeardownReason::Fin => "fin",
            TeardownReason::Rst => "rst",
            TeardownReason::Idle => "idle",
            TeardownReason::Dying => "dying",
            TeardownReason::Deleted => "deleted",
            TeardownReason::Flush => "flush",
        }
    }
}

/// Per-direction counters of a flow: software plus what its blocks report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowCounters {
    /// Packets per direction ([`Dir::index`]).
    pub packets: [u64; 2],
    /// Bytes per direction: IP packet lengths, as the kernel's `nf_ct_acct_update(skb->len)`
    /// (the inner packet of a decapsulated direction).
    pub bytes: [u64; 2],
}

impl FlowCounters {
    fn add(&mut self, p: [u64; 2], b: [u64; 2]) {
        for i in 0..2 {
            self.packets[i] += p[i];
            self.bytes[i] += b[i];
        }
    }
}

/// A flow that left the table: the caller updates its connection (see [`TeardownReason`]).
/// Given once per flow, to whoever removed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Teardown {
    /// The flow.
    pub id: FlowId,
    /// The caller's connection id.
    pub ct_id: u64,
    /// The flow's keys (original, reply).
    pub keys: [FlowKey; 2],
    /// Why.
    pub reason: TeardownReason,
    /// Its final counters (software + blocks), whatever the `counter` flag.
    pub counters: FlowCounters,
}

/// What the fast path says about a frame.
#[derive(Debug, Clone)]
pub enum FastPath {
    /// No flow (or not a packet the fast path handles: not TCP/UDP, IPv4 options or fragments,
    /// IPv6 extension headers, VLAN tags): the chains see it.
    Miss,
    /// A packet of a flow that the chains must see.
    Slow {
        /// Why.
        reason: SlowReason,
        /// For [`SlowReason::Fin`] / [`SlowReason::Rst`]: the flow's teardown, if this call
        /// removed it (`None` when another worker did first).
        teardown: Option<Teardown>,
    },
    /// Forward: write the frame with `edit` and send it on `out_dev`. Counters are updated.
    Forward {
        /// Output device id.
        out_dev: u16,
        /// The flow.
        id: FlowId,
        /// The flow's offload block forwards it (its counters counted the packet, the software
        /// counters did not): the model of a packet the NIC forwarded. The caller still writes
        /// and sends the frame (the model forwards in software).
        by_block: bool,
        /// The rewrite.
        edit: FlowEdit,
    },
}

/// A `flow add` / `flow del` monitor event (`wasp ctl monitor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowEvent {
    /// Added or deleted (and why).
    pub kind: FlowEventKind,
    /// The flowtable's name.
    pub table: String,
    /// The flow.
    pub id: FlowId,
    /// The caller's connection id.
    pub ct_id: u64,
    /// Keys (original, reply).
    pub keys: [FlowKey; 2],
}

/// Kind of [`FlowEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowEventKind {
    /// The flow was added.
    Add,
    /// The flow left the table.
    Del(TeardownReason),
}

/// Receives [`FlowEvent`]s, called on the thread that added or removed the flow, with no
/// flowtable lock held.
pub type EventSink = Box<dyn Fn(&FlowEvent) + Send + Sync>;

/// Where a flow is forwarded, as listings show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffloadState {
    /// The software fast path.
    Software,
    /// Given to block `block`, which forwards it from `active_at_ns` on (software until then).
    Pending {
        /// The block's name.
        block: String,
        /// When the block takes over, ns.
        active_at_ns: u64,
    },
    /// Forwarded by block `block`.
    Offloaded {
        /// The block's name.
        block: String,
    },
}

/// One flow in a listing ([`Flowtable::flows`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowInfo {
    /// The flow.
    pub id: FlowId,
    /// The caller's connection id.
    pub ct_id: u64,
    /// Keys (original, reply).
    pub keys: [FlowKey; 2],
    /// Time since it was added, ns.
    pub age_ns: u64,
    /// Time since its last packet (software or block), ns.
    pub idle_ns: u64,
    /// Counters (software + blocks), shown when the flowtable has the `counter` flag.
    pub counters: Option<FlowCounters>,
    /// The part of `counters` that the flow's blocks reported (`nf_flow_offload_stats`), shown
    /// with the `counter` flag.
    pub block_counters: Option<FlowCounters>,
    /// Where it is forwarded.
    pub offload: OffloadState,
    /// Names of every block that holds it (forwarding it or not).
    pub blocks: Vec<String>,
}

/// Counts of a flowtable since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowtableStats {
    /// Flows in the table now.
    pub flows: usize,
    /// Flows added.
    pub added: u64,
    /// Flows removed (every [`TeardownReason`]).
    pub removed: u64,
    /// Block adds refused ([`crate::OffloadError`]): those flows stayed in software for that
    /// block.
    pub offload_refused: u64,
}

struct Binding {
    block: Arc<dyn OffloadBlock>,
    slot: Option<Arc<BlockSlot>>,
}

const F_TEARDOWN: u32 = 1;
/// Some binding has a slot.
const F_SLOT: u32 = 2;
/// Some binding.
const F_BOUND: u32 = 4;

struct Flow {
    id: FlowId,
    ct_id: u64,
    keys: [FlowKey; 2],
    plans: [Arc<DirPlan>; 2],
    created_ns: u64,
    last_seen_ns: AtomicU64,
    packets: [AtomicU64; 2],
    bytes: [AtomicU64; 2],
    flags: AtomicU32,
    bindings: RwLock<Vec<Binding>>,
}

impl Flow {
    fn flags(&self) -> u32 {
        self.flags.load(Ordering::Acquire)
    }

    fn count(&self, dir: Dir, bytes: u64, now_ns: u64) {
        self.packets[dir.index()].fetch_add(1, Ordering::Relaxed);
        self.bytes[dir.index()].fetch_add(bytes, Ordering::Relaxed);
        self.last_seen_ns.fetch_max(now_ns, Ordering::Relaxed);
    }

    fn software(&self) -> FlowCounters {
        let l = |a: &[AtomicU64; 2]| [a[0].load(Ordering::Relaxed), a[1].load(Ordering::Relaxed)];
        FlowCounters {
            packets: l(&self.packets),
            bytes: l(&self.bytes),
        }
    }

    /// Software counters plus every block's stats, the blocks' part alone, and the last time
    /// anything moved a packet.
    fn merged(&self, now_ns: u64) -> (FlowCounters, FlowCounters, u64) {
        let mut c = self.software();
        let mut blocks = FlowCounters::default();
        let mut last = self.last_seen_ns.load(Ordering::Relaxed);
        if self.flags() & F_BOUND != 0 {
            for b in self.bindings.read().iter() {
                if let Some(s) = b.block.stats(self.id, &self.keys, now_ns) {
                    c.add(s.packets, s.bytes);
                    blocks.add(s.packets, s.bytes);
                    last = last.max(s.last_used_ns);
                }
            }
        }
        (c, blocks, last)
    }

    fn view(&self) -> FlowView<'_> {
        FlowView {
            id: self.id,
            ct_id: self.ct_id,
            keys: &self.keys,
            routes: [&self.plans[0].route, &self.plans[1].route],
        }
    }
}

type KeyMap = Index<FlowKey, (Arc<Flow>, Dir), KeyHash>;
type IdMap = HashMap<u64, Arc<Flow>, KeyHash>;

/// A flowtable: flows keyed both ways, shared by every worker (`Send + Sync`, all methods take
/// `&self`), with its offload blocks. Sans-IO: every method that needs the time takes `now_ns`
/// (the caller's packet clock, ns).
///
/// Locks: the key map is split in shards, each a `parking_lot::RwLock` (lookups share it); flows
/// by id sit in mutex shards; the block list has its own lock ([`BlockLock`]). A thread takes at
/// most the block list, then a shard, then a flow's block bindings, in that order, and never
/// holds one while calling the event sink. [`FlowEdit::write`] runs with no lock held.
pub struct Flowtable {
    cfg: FlowtableConfig,
    shards: Box<[RwLock<KeyMap>]>,
    /// Per shard: where its index's buckets are, read without the lock by
    /// [`Flowtable::prefetch`].
    heads: Box<[Head<KeyHash>]>,
    ids: Box<[Mutex<IdMap>]>,
    next_id: AtomicU64,
    count: AtomicUsize,
    added: AtomicU64,
    removed: AtomicU64,
    refused: AtomicU64,
    blocks: BlockList,
    sink: Option<EventSink>,
    /// The keyed hash of the keys: its bits 32 and up pick a key's shard, its low bits the
    /// bucket in the shard's index (which hashes with the same seed).
    hash: KeyHash,
}

impl Flowtable {
    /// An empty flowtable.
    pub fn new(cfg: FlowtableConfig) -> Flowtable {
        let n = cfg.shards.max(1).next_power_of_two();
        // One hash per key: its bits 32 and up pick the shard, its low bits the bucket.
        let index_hash = || KeyHash::with_seed(cfg.seed);
        Flowtable {
            shards: (0..n)
                .map(|_| RwLock::new(KeyMap::new(index_hash())))
                .collect(),
            heads: (0..n).map(|_| Head::new(index_hash())).collect(),
            ids: (0..n)
                .map(|_| Mutex::new(IdMap::with_hasher(KeyHash::with_seed(cfg.seed))))
                .collect(),
            hash: KeyHash::with_seed(cfg.seed),
            next_id: AtomicU64::new(1),
            count: AtomicUsize::new(0),
            added: AtomicU64::new(0),
            removed: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            blocks: BlockList::new(cfg.block_lock),
            sink: None,
            cfg,
        }
    }

    /// The same flowtable, sending its flow add/del events to `sink`.
    pub fn with_event_sink(mut self, sink: EventSink) -> Flowtable {
        self.sink = Some(sink);
        self
    }

    /// Its configuration.
    pub fn config(&self) -> &FlowtableConfig {
        &self.cfg
    }

    /// Flows in the table.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// True when no flow is in the table.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counts since the table was made.
    pub fn stats(&self) -> FlowtableStats {
        FlowtableStats {
            flows: self.len(),
            added: self.added.load(Ordering::Relaxed),
            removed: self.removed.load(Ordering::Relaxed),
            offload_refused: self.refused.load(Ordering::Relaxed),
        }
    }

    /// The shard of `key`: its index's lock and head, and the key's hash.
    fn shard(&self, key: &FlowKey) -> (&RwLock<KeyMap>, &Head<KeyHash>, u64) {
        let h = self.hash.hash_one(key);
        let i = ((h >> 32) as usize) & (self.shards.len() - 1);
        (&self.shards[i], &self.heads[i], h)
    }

    fn id_shard(&self, id: u64) -> &Mutex<IdMap> {
        &self.ids[(id as usize) & (self.ids.len() - 1)]
    }

    fn emit(&self, kind: FlowEventKind, f: &Flow) {
        if let Some(sink) = &self.sink {
            sink(&FlowEvent {
                kind,
                table: self.cfg.name.clone(),
                id: f.id,
                ct_id: f.ct_id,
                keys: f.keys,
            });
        }
    }

    /// Add a flow (the kernel's `flow_offload_add`, called by `nft_flow_offload_eval`) at
    /// `now_ns`, then offer it to every registered block in registration order (each may take
    /// it, forward it or refuse it: refused adds are counted in
    /// [`FlowtableStats::offload_refused`] and leave the flow in software for that block).
    ///
    /// The caller decides whether the connection may be offloaded, as `nft_flow_offload_eval`
    /// does: a confirmed conntrack entry, TCP only in ESTABLISHED and with no FIN or RST seen in
    /// this packet, no helper, and only once: test-and-set the entry's offload bit
    /// (IPS_OFFLOAD) before calling, clear it when the flow is torn down ([`Teardown`]) or
    /// refused here. Errors: [`AddError`].
    pub fn add(&self, spec: FlowSpec, now_ns: u64) -> Result<FlowId, AddError> {
        let [k0, k1] = spec.keys;
        if !k0.valid() || !k1.valid() || k0.l4proto != k1.l4proto {
            return Err(AddError::Invalid("keys: mixed families, or not TCP/UDP"));
        }
        if k0 == k1 {
            return Err(AddError::Invalid("both keys are the same"));
        }
        let plans = [
            Arc::new(DirPlan::new(&k0, &spec.routes[0])?),
            Arc::new(DirPlan::new(&k1, &spec.routes[1])?),
        ];
        if self.count.fetch_add(1, Ordering::Relaxed) >= self.cfg.max_flows {
            self.count.fetch_sub(1, Ordering::Relaxed);
            return Err(AddError::Full(self.cfg.max_flows));
        }
        let id = FlowId(self.next_id.fetch_add(1, Ordering::Relaxed));
        let flow = Arc::new(Flow {
            id,
            ct_id: spec.ct_id,
            keys: spec.keys,
            plans,
            created_ns: now_ns,
            last_seen_ns: AtomicU64::new(now_ns),
            packets: Default::default(),
            bytes: Default::default(),
            flags: AtomicU32::new(0),
            bindings: RwLock::new(Vec::new()),
        });
        // Both keys in, or neither.
        for (i, dir) in [Dir::Original, Dir::Reply].into_iter().enumerate() {
            let key = &flow.keys[i];
            let (shard, head, _) = self.shard(key);
            let mut s = shard.write();
            if s.get(key).is_some() {
                drop(s);
                if i == 1 {
                    self.unmap(&flow, 0);
                }
                self.count.fetch_sub(1, Ordering::Relaxed);
                return Err(AddError::Exists(dir));
            }
            s.insert(*key, (Arc::clone(&flow), dir), head);
        }
        self.id_shard(id.0).lock().insert(id.0, Arc::clone(&flow));
        self.added.fetch_add(1, Ordering::Relaxed);
        self.blocks.read(|blocks| {
            if blocks.is_empty() {
                return;
            }
            let mut bindings = flow.bindings.write();
            if flow.flags() & F_TEARDOWN != 0 {
                return;
            }
            let view = flow.view();
            for b in blocks {
                match b.add(&view, now_ns) {
                    Ok(slot) => bindings.push(Binding {
                        block: Arc::clone(b),
                        slot,
                    }),
                    Err(_) => {
                        self.refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            let mut fl = if bindings.is_empty() { 0 } else { F_BOUND };
            if bindings.iter().any(|b| b.slot.is_some()) {
                fl |= F_SLOT;
            }
            flow.flags.fetch_or(fl, Ordering::AcqRel);
        });
        self.emit(FlowEventKind::Add, &flow);
        Ok(id)
    }

    /// Remove `flow.keys[i]` from its shard if it still maps to `flow`.
    fn unmap(&self, flow: &Arc<Flow>, i: usize) {
        let key = &flow.keys[i];
        let mut s = self.shard(key).0.write();
        if s.get(key).is_some_and(|(f, _)| Arc::ptr_eq(f, flow)) {
            s.remove(key);
        }
    }

    fn get(&self, key: &FlowKey) -> Option<(Arc<Flow>, Dir)> {
        let (shard, _, h) = self.shard(key);
        shard
            .read()
            .get_hashed(h, key)
            .map(|(f, d)| (Arc::clone(f), *d))
    }

    fn by_id(&self, id: FlowId) -> Option<Arc<Flow>> {
        self.id_shard(id.0).lock().get(&id.0).cloned()
    }

    /// The flow and direction that `key` belongs to (torn-down flows included until removed).
    pub fn lookup(&self, key: &FlowKey) -> Option<(FlowId, Dir)> {
        self.get(key).map(|(f, d)| (f.id, d))
    }

    /// Remove `flow` for `reason`: marked torn down first (test-and-set: only one caller gets
    /// the teardown), out of both maps, deleted from its blocks (their stats merged into the
    /// final counters), event sent.
    fn remove(&self, flow: &Arc<Flow>, reason: TeardownReason, now_ns: u64) -> Option<Teardown> {
        if flow.flags.fetch_or(F_TEARDOWN, Ordering::AcqRel) & F_TEARDOWN != 0 {
            return None;
        }
        self.unmap(flow, 0);
        self.unmap(flow, 1);
        self.id_shard(flow.id.0).lock().remove(&flow.id.0);
        self.count.fetch_sub(1, Ordering::Relaxed);
        self.removed.fetch_add(1, Ordering::Relaxed);
        let mut counters = flow.software();
        // Always under the block list and the bindings lock: an add still binding this flow
        // (it checks F_TEARDOWN under the bindings lock) is either done or will not bind.
        {
            self.blocks.read(|_| {
                let mut bindings = flow.bindings.write();
                for b in bindings.drain(..) {
                    if let Some(s) = b.block.stats(flow.id, &flow.keys, now_ns) {
                        counters.add(s.packets, s.bytes);
                    }
                    b.block.del(flow.id, &flow.keys);
                }
                flow.flags.fetch_and(!(F_SLOT | F_BOUND), Ordering::AcqRel);
            });
        }
        self.emit(FlowEventKind::Del(reason), flow);
        Some(Teardown {
            id: flow.id,
            ct_id: flow.ct_id,
            keys: flow.keys,
            reason,
            counters,
        })
    }

    /// Tear down flow `id` for `reason` (e.g. [`TeardownReason::Dying`] when its conntrack
    /// entry dies) and return its [`Teardown`]; `None` when there is no such flow (or another
    /// thread removed it first).
    pub fn teardown(&self, id: FlowId, reason: TeardownReason, now_ns: u64) -> Option<Teardown> {
        let f = self.by_id(id)?;
        self.remove(&f, reason, now_ns)
    }

    /// Delete flow `id` ([`TeardownReason::Deleted`]).
    pub fn del(&self, id: FlowId, now_ns: u64) -> Option<Teardown> {
        self.teardown(id, TeardownReason::Deleted, now_ns)
    }

    /// Remove every flow ([`TeardownReason::Flush`]).
    pub fn flush(&self, now_ns: u64) -> Vec<Teardown> {
        self.all()
            .iter()
            .filter_map(|f| self.remove(f, TeardownReason::Flush, now_ns))
            .collect()
    }

    /// Every flow, snapshot.
    fn all(&self) -> Vec<Arc<Flow>> {
        let mut v = Vec::with_capacity(self.len());
        for s in self.ids.iter() {
            v.extend(s.lock().values().cloned());
        }
        v.sort_by_key(|f| f.id);
        v
    }

    /// Start loading the index buckets that [`Flowtable::fast_path`] of this frame (`meta` its
    /// parse, received on `iif`) reads first: its plain key's and, for a Geneve frame, its
    /// inner key's. Call it for each packet of a vector, then run their fast paths in order:
    /// the lookups of a large table then overlap their cache misses. Changes nothing; a table
    /// of fewer than [`PREFETCH_MIN`] flows (held in the caches anyway) is not touched.
    #[inline]
    pub fn prefetch(&self, frame: &[u8], meta: &PacketMeta, iif: u16) {
        if self.len() < PREFETCH_MIN {
            return;
        }
        let touch = |key: &FlowKey| {
            let (_, head, h) = self.shard(key);
            head.prefetch(h);
        };
        if let Some((off, vni)) = geneve_inner(meta)
            && let Some(p) = parse_at(frame, off, iif, Some(vni))
        {
            touch(&p.key);
        }
        if let Some(p) = parse_at(frame, 0, iif, None) {
            touch(&p.key);
        }
    }

    /// The fast path (`nf_flow_offload_ip_hook` / `nf_flow_offload_ipv6_hook`) for `frame`,
    /// received on device `iif` at `now_ns`, with `meta` = `wasp_wire::parse(frame)`.
    ///
    /// A Geneve frame carrying Ethernet (found by `meta.tunnel`) is first looked up by its
    /// inner packet (key with `tun_id = Some(vni)`), then by its outer packet. A packet the fast
    /// path does not handle (see [`FastPath::Miss`]) or without a flow misses. For a packet of a
    /// flow, in the kernel's order: a torn-down flow, TTL / hop limit <= 1, a packet longer
    /// than the route's MTU, then a TCP FIN or RST (the flow is torn down here, case C19) go
    /// to the slow path; anything else is counted (in the flow, or in its block's slot when the
    /// block forwards it) and forwarded with a [`FlowEdit`].
    ///
    /// The kernel checks the TTL before the lookup, so a TTL-1 packet without a flow also goes
    /// to the chains; here it is a [`FastPath::Miss`], which the caller treats the same way.
    pub fn fast_path(&self, frame: &[u8], meta: &PacketMeta, iif: u16, now_ns: u64) -> FastPath {
        let mut hit: Option<(Parsed, Arc<Flow>, Dir)> = None;
        if let Some((off, vni)) = geneve_inner(meta)
            && let Some(p) = parse_at(frame, off, iif, Some(vni))
            && let Some((f, d)) = self.get(&p.key)
        {
            hit = Some((p, f, d));
        }
        if hit.is_none()
            && let Some(p) = parse_at(frame, 0, iif, None)
            && let Some((f, d)) = self.get(&p.key)
        {
            hit = Some((p, f, d));
        }
        let Some((p, flow, dir)) = hit else {
            return FastPath::Miss;
        };
        let flags = flow.flags();
        let slow = |reason| FastPath::Slow {
            reason,
            teardown: None,
        };
        if flags & F_TEARDOWN != 0 {
            return slow(SlowReason::Teardown);
        }
        if p.ttl <= 1 {
            return slow(SlowReason::Ttl);
        }
        let plan = &flow.plans[dir.index()];
        if let TunnelWork::Decap { outer: Some(ends) } = &plan.route.tunnel
            && meta.ip_addrs(frame) != Some(*ends)
        {
            return FastPath::Miss;
        }
        let out_l3 = match &plan.route.tunnel {
            // The outer IP packet: the template after its Ethernet header, the inner frame.
            TunnelWork::Encap(t) => {
                t.len() - wasp_wire::ethernet::HEADER_LEN
                    + wasp_wire::ethernet::HEADER_LEN
                    + p.l3_len
            }
            _ => p.l3_len,
        };
        if out_l3 > plan.route.mtu as usize {
            return slow(SlowReason::Mtu);
        }
        use wasp_wire::tcp::flags::{FIN, RST};
        if p.tcp_flags & (FIN | RST) != 0 {
            let (sr, tr) = if p.tcp_flags & RST != 0 {
                (SlowReason::Rst, TeardownReason::Rst)
            } else {
                (SlowReason::Fin, TeardownReason::Fin)
            };
            return FastPath::Slow {
                reason: sr,
                teardown: self.remove(&flow, tr, now_ns),
            };
        }
        let bytes = p.l3_len as u64;
        let mut by_block = false;
        if flags & F_SLOT != 0 {
            let b = flow.bindings.read();
            if let Some(slot) = b
                .iter()
                .find_map(|b| b.slot.as_ref())
                .filter(|s| s.is_active(now_ns))
            {
                slot.count(dir, bytes, now_ns);
                by_block = true;
            }
        }
        if !by_block {
            flow.count(dir, bytes, now_ns);
        }
        FastPath::Forward {
            out_dev: plan.route.out_dev,
            id: flow.id,
            by_block,
            edit: FlowEdit {
                plan: Arc::clone(plan),
                dir,
                strip: p.strip,
                l3_len: p.l3_len,
                ipv6: p.ipv6,
            },
        }
    }

    /// The GC pass (`nf_flow_offload_gc_step`, run every second by the kernel): flows with no
    /// packet for the timeout, counting packets their blocks moved (a block's `last_used_ns`
    /// keeps a flow alive, as `nf_flow_offload_stats` extends the flow's timeout), are torn
    /// down ([`TeardownReason::Idle`]) and returned.
    pub fn gc(&self, now_ns: u64) -> Vec<Teardown> {
        let mut out = Vec::new();
        for f in self.all() {
            if f.flags() & F_TEARDOWN != 0 {
                continue;
            }
            let last = if f.flags() & F_BOUND != 0 {
                self.blocks.read(|_| f.merged(now_ns).2)
            } else {
                f.last_seen_ns.load(Ordering::Relaxed)
            };
            if now_ns.saturating_sub(last) >= self.cfg.timeout_ns
                && let Some(t) = self.remove(&f, TeardownReason::Idle, now_ns)
            {
                out.push(t);
            }
        }
        out
    }

    /// A snapshot of every flow, by id, at `now_ns` (`wasp ctl list flowtable NAME`).
    pub fn flows(&self, now_ns: u64) -> Vec<FlowInfo> {
        let flows = self.all();
        self.blocks.read(|_| {
            flows
                .iter()
                .map(|f| {
                    let (c, bc, last) = f.merged(now_ns);
                    let (offload, blocks) = {
                        let b = f.bindings.read();
                        let names = b.iter().map(|b| b.block.name().to_string()).collect();
                        let st = match b.iter().find(|b| b.slot.is_some()) {
                            Some(Binding {
                                block,
                                slot: Some(s),
                            }) if s.is_active(now_ns) => OffloadState::Offloaded {
                                block: block.name().to_string(),
                            },
                            Some(Binding {
                                block,
                                slot: Some(s),
                            }) => OffloadState::Pending {
                                block: block.name().to_string(),
                                active_at_ns: s.active_at_ns(),
                            },
                            _ => OffloadState::Software,
                        };
                        (st, names)
                    };
                    FlowInfo {
                        id: f.id,
                        ct_id: f.ct_id,
                        keys: f.keys,
                        age_ns: now_ns.saturating_sub(f.created_ns),
                        idle_ns: now_ns.saturating_sub(last),
                        counters: self.cfg.counter.then_some(c),
                        block_counters: self.cfg.counter.then_some(bc),
                        offload,
                        blocks,
                    }
                })
                .collect()
        })
    }

    /// Register an offload block (the kernel's `nf_flow_table_offload_add_cb`, under the write
    /// side of the block lock). Flows already in the table stay where they are; flows added
    /// from now on are offered to it. Error: a block of the same name exists.
    pub fn register_block(&self, block: Arc<dyn OffloadBlock>) -> Result<(), BlockError> {
        self.blocks.write(|list| {
            if list.iter().any(|b| b.name() == block.name()) {
                return Err(BlockError::Exists(block.name().to_string()));
            }
            list.push(block);
            Ok(())
        })
    }

    /// Remove block `name` (`nf_flow_table_offload_del_cb`, write side): every flow it held is
    /// deleted from it and goes back to software, its block counters added to the flow's
    /// software counters (nothing counted is lost). Returns how many flows it held. Error: no
    /// such block.
    pub fn unregister_block(&self, name: &str, now_ns: u64) -> Result<usize, BlockError> {
        self.blocks.write(|list| {
            let Some(pos) = list.iter().position(|b| b.name() == name) else {
                return Err(BlockError::NotFound(name.to_string()));
            };
            let block = list.remove(pos);
            let mut held = 0;
            for f in self.all() {
                if f.flags() & F_BOUND == 0 {
                    continue;
                }
                let mut bindings = f.bindings.write();
                let before = bindings.len();
                bindings.retain(|b| !Arc::ptr_eq(&b.block, &block));
                if bindings.len() == before {
                    continue;
                }
                held += 1;
                if let Some(s) = block.stats(f.id, &f.keys, now_ns) {
                    for i in 0..2 {
                        f.packets[i].fetch_add(s.packets[i], Ordering::Relaxed);
                        f.bytes[i].fetch_add(s.bytes[i], Ordering::Relaxed);
                    }
                    f.last_seen_ns.fetch_max(s.last_used_ns, Ordering::Relaxed);
                }
                block.del(f.id, &f.keys);
                let mut fl = 0;
                if !bindings.is_empty() {
                    fl |= F_BOUND;
                }
                if bindings.iter().any(|b| b.slot.is_some()) {
                    fl |= F_SLOT;
                }
                f.flags
                    .fetch_and(!(F_SLOT | F_BOUND) | fl, Ordering::AcqRel);
            }
            Ok(held)
        })
    }

    /// Names of the registered blocks, in registration order.
    pub fn blocks(&self) -> Vec<String> {
        self.blocks
            .read(|l| l.iter().map(|b| b.name().to_string()).collect())
    }
}
