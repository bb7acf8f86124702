//! [`HwModel`]: a software model of a NIC's flow offload table, shipped as one
//! [`OffloadBlock`]: an exact-match table with a capacity, a setup latency and its own counters.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::block::{BlockSlot, BlockStats, FlowView, OffloadBlock, OffloadError};
use crate::key::FlowKey;

/// The model's own keyed hash, seeded at random per table.
type Hash = foldhash::fast::RandomState;
use crate::table::FlowId;

const SHARDS: usize = 16;

type Table = Mutex<HashMap<FlowKey, Arc<BlockSlot>, Hash>>;

/// A "hardware" offload table: flows are entered by their original key; an entry forwards (and
/// counts) the flow's packets in both directions `latency_ns` after it was added (a NIC
/// programs its table asynchronously: the kernel's offload work queue, `nf_flow_offload_work`);
/// an add beyond `capacity` entries fails with [`OffloadError::Full`] (counted in
/// [`HwModel::rejected`]) and the flow stays in software.
pub struct HwModel {
    name: String,
    capacity: usize,
    latency_ns: u64,
    used: AtomicUsize,
    rejected: AtomicU64,
    shards: Box<[Table]>,
    hash: Hash,
}

impl HwModel {
    /// A model named `name` holding at most `capacity` flows, each active `latency_ns` after
    /// its add.
    pub fn new(name: &str, capacity: usize, latency_ns: u64) -> HwModel {
        HwModel {
            name: name.to_string(),
            capacity,
            latency_ns,
            used: AtomicUsize::new(0),
            rejected: AtomicU64::new(0),
            shards: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::default()))
                .collect(),
            hash: Hash::default(),
        }
    }

    fn shard(&self, key: &FlowKey) -> &Table {
        use std::hash::BuildHasher;
        let h = self.hash.hash_one(key);
        &self.shards[(h as usize) % SHARDS]
    }

    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// True when the table holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The capacity, in flows.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Adds refused because the table was full, since the model was made.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// The entry for the flow whose original key is `key`.
    pub fn entry(&self, key: &FlowKey) -> Option<BlockStats> {
        self.shard(key).lock().get(key).map(|s| s.stats())
    }
}

impl OffloadBlock for HwModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn add(
        &self,
        flow: &FlowView<'_>,
        now_ns: u64,
    ) -> Result<Option<Arc<BlockSlot>>, OffloadError> {
        if self.used.fetch_add(1, Ordering::Relaxed) >= self.capacity {
            self.used.fetch_sub(1, Ordering::Relaxed);
            self.rejected.fetch_add(1, Ordering::Relaxed);
            return Err(OffloadError::Full);
        }
        let slot = Arc::new(BlockSlot::new(now_ns.saturating_add(self.latency_ns)));
        let key = flow.keys[0];
        if self
            .shard(&key)
            .lock()
            .insert(key, Arc::clone(&slot))
            .is_some()
        {
            // Replaced an entry for the same key: the count stays.
            self.used.fetch_sub(1, Ordering::Relaxed);
        }
        Ok(Some(slot))
    }

    fn del(&self, _id: FlowId, keys: &[FlowKey; 2]) {
        if self.shard(&keys[0]).lock().remove(&keys[0]).is_some() {
            self.used.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn stats(&self, _id: FlowId, keys: &[FlowKey; 2], _now_ns: u64) -> Option<BlockStats> {
        self.entry(&keys[0])
    }
}
