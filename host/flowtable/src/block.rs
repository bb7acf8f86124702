//! Offload blocks: callbacks told of flow add, delete and stats requests, modelled on the
//! kernel's flow block callbacks (`flow_block_cb` on `nf_flowtable.flow_block`, called by
//! `nf_flow_offload_tuple` in net/netfilter/nf_flow_table_offload.c), and the lock that guards
//! their list.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use crate::key::{Dir, FlowKey};
use crate::route::Route;
use crate::table::FlowId;

/// A flow as an offload block sees it when it is added.
#[derive(Debug, Clone, Copy)]
pub struct FlowView<'a> {
    /// The flow's id in its flowtable.
    pub id: FlowId,
    /// The caller's connection id.
    pub ct_id: u64,
    /// Keys, indexed by [`Dir::index`].
    pub keys: &'a [FlowKey; 2],
    /// Routes, indexed by [`Dir::index`].
    pub routes: [&'a Route; 2],
}

/// Statistics of one flow in a block (the kernel's `flow_stats`: packets, bytes, lastused),
/// per direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockStats {
    /// Packets per direction ([`Dir::index`]).
    pub packets: [u64; 2],
    /// Bytes (IP packet lengths) per direction.
    pub bytes: [u64; 2],
    /// When the block last moved a packet of the flow, ns on the caller's packet clock; 0 for
    /// never.
    pub last_used_ns: u64,
}

/// Why a block refused a flow. The flow stays in software (counted by the flowtable).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OffloadError {
    /// The block's table is full.
    #[error("offload table full")]
    Full,
    /// The block cannot do what the flow needs (e.g. an edit it has no action for).
    #[error("not supported: {0}")]
    Unsupported(String),
}

/// Counters a block hands back for a flow it forwards itself: from `active_at_ns` on, the fast
/// path counts the flow's packets here instead of in the flow's software counters (the model of
/// a NIC that forwards the flow without the host seeing it), and [`OffloadBlock::stats`] reports
/// them. Before `active_at_ns` (the block's setup latency) the software path counts.
#[derive(Debug)]
pub struct BlockSlot {
    active_at_ns: u64,
    packets: [AtomicU64; 2],
    bytes: [AtomicU64; 2],
    last_used_ns: AtomicU64,
}

impl BlockSlot {
    /// A slot that becomes active at `active_at_ns` (ns, packet clock).
    pub fn new(active_at_ns: u64) -> BlockSlot {
        BlockSlot {
            active_at_ns,
            packets: Default::default(),
            bytes: Default::default(),
            last_used_ns: AtomicU64::new(0),
        }
    }

    /// When the slot becomes active, ns.
    pub fn active_at_ns(&self) -> u64 {
        self.active_at_ns
    }

    /// Whether the block forwards the flow at `now_ns`.
    #[inline]
    pub fn is_active(&self, now_ns: u64) -> bool {
        now_ns >= self.active_at_ns
    }

    /// Count one packet of `bytes` bytes in direction `dir` at `now_ns`.
    #[inline]
    pub fn count(&self, dir: Dir, bytes: u64, now_ns: u64) {
        self.packets[dir.index()].fetch_add(1, Ordering::Relaxed);
        self.bytes[dir.index()].fetch_add(bytes, Ordering::Relaxed);
        self.last_used_ns.fetch_max(now_ns, Ordering::Relaxed);
    }

    /// The counts so far.
    pub fn stats(&self) -> BlockStats {
        let l = |a: &[AtomicU64; 2]| [a[0].load(Ordering::Relaxed), a[1].load(Ordering::Relaxed)];
        BlockStats {
            packets: l(&self.packets),
            bytes: l(&self.bytes),
            last_used_ns: self.last_used_ns.load(Ordering::Relaxed),
        }
    }
}

/// An offload block: told of every flow added to the flowtable (after it is in the table), of
/// its deletion, and asked for its statistics by listings and the GC pass (the kernel's
/// `FLOW_CLS_REPLACE`, `FLOW_CLS_DESTROY`, `FLOW_CLS_STATS`). Calls come from any worker, under
/// the read side of the flowtable's block-list lock, so `add` runs concurrently with itself:
/// implementations synchronise their own state. Object-safe, so that an adapter (e.g. a plugin)
/// can implement it.
pub trait OffloadBlock: Send + Sync {
    /// The block's name (unique in a flowtable), shown in listings.
    fn name(&self) -> &str;

    /// Take `flow` (at `now_ns`). `Ok(Some(slot))`: the block forwards the flow's packets and
    /// counts them in `slot` from `slot.active_at_ns()` on. `Ok(None)`: the block knows of the
    /// flow but the software path keeps forwarding and counting it (a logger, a plugin).
    /// `Err`: refused; the flow stays in software for this block.
    fn add(&self, flow: &FlowView<'_>, now_ns: u64)
    -> Result<Option<Arc<BlockSlot>>, OffloadError>;

    /// Forget the flow (it was deleted, torn down, or the block is unregistered).
    fn del(&self, id: FlowId, keys: &[FlowKey; 2]);

    /// The flow's counters in the block, or `None` when it counts nothing for it. They are added
    /// to the flow's software counters in listings, teardowns and the GC's idle check
    /// (`nf_flow_offload_stats` pushes `lastused` into the flow's timeout).
    fn stats(&self, id: FlowId, keys: &[FlowKey; 2], now_ns: u64) -> Option<BlockStats>;
}

/// Which lock guards a flowtable's block list. The kernel's was a mutex until Paul Blakey's
/// "netfilter: flowtable: Use rw sem as flow block lock" (Linux 5.7, March 2020; patch mail
/// <20200330192136.230459-16-pablo@netfilter.org> in Pablo Neira Ayuso's nf-next pull), which
/// made it a reader-writer semaphore so that flow insertions, which only read the list, run in
/// parallel. Both are kept here so that the benchmark measures the two in the same run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BlockLock {
    /// `parking_lot::RwLock`: flow add/del/stats take the read side (the kernel since 5.7).
    #[default]
    RwLock,
    /// `parking_lot::Mutex`: every access is exclusive (the kernel before 5.7).
    Mutex,
}

/// The registered blocks.
pub(crate) type Blocks = Vec<Arc<dyn OffloadBlock>>;

/// The block list under the chosen lock.
pub(crate) enum BlockList {
    Rw(RwLock<Blocks>),
    Mx(Mutex<Blocks>),
}

impl BlockList {
    pub(crate) fn new(kind: BlockLock) -> BlockList {
        match kind {
            BlockLock::RwLock => BlockList::Rw(RwLock::new(Vec::new())),
            BlockLock::Mutex => BlockList::Mx(Mutex::new(Vec::new())),
        }
    }

    /// Run `f` on the list under the read side (the mutex for [`BlockLock::Mutex`]). Never
    /// called with the list already held by this thread.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&Blocks) -> R) -> R {
        match self {
            BlockList::Rw(l) => f(&l.read()),
            BlockList::Mx(l) => f(&l.lock()),
        }
    }

    /// Run `f` on the list under the write side.
    pub(crate) fn write<R>(&self, f: impl FnOnce(&mut Blocks) -> R) -> R {
        match self {
            BlockList::Rw(l) => f(&mut l.write()),
            BlockList::Mx(l) => f(&mut l.lock()),
        }
    }
}
