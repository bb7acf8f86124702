//! [`PluginBlock`]: a component of the world `wasp-offload-block` (`wit/plugin.wit`) as a
//! flowtable offload block ([`wasp_flowtable::OffloadBlock`]), the "let a plugin be another
//! callback" of the kernel's flow block callbacks (`FLOW_CLS_REPLACE` / `DESTROY` / `STATS`).
//!
//! One instance serves every worker, behind a `parking_lot::Mutex` (offload calls come from any
//! worker, under the read side of the flowtable's block-list lock). Each call has the packet
//! path's epoch deadline ([`crate::HostConfig::deadline_ticks`]) and the instance memory limit;
//! instantiation and `configure` have the setup deadline. A trap, a deadline, the memory limit
//! or a malformed answer refuses that add (`OffloadError::Unsupported("plugin trapped: ...")`),
//! is counted ([`PluginBlock::counts`]) and logged (`tracing` warn), and the instance is dropped:
//! the next call re-creates it, configures it again with the same arguments and offers it the
//! flows the block held (so that its table agrees with the host's slots, which the flowtable
//! keeps bound). Nothing here panics on what a guest does.
//!
//! Flows the block forwards get a [`BlockSlot`] that the host keeps (by flow id): the fast path
//! counts in it, and `stats` answers from it without calling the guest; flows it observes are
//! asked of the guest (`flow-stats`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use wasmtime::component::{InstancePre, Linker};
use wasmtime::{Store, Trap};
use wasp_flowtable::{
    BlockSlot, BlockStats, FlowId, FlowKey, FlowView, OffloadBlock, OffloadError, Route, TunnelWork,
};

use crate::bindings::StoreState;
use crate::error::{FailureReason, PluginError};
use crate::host::{PluginHost, arm_deadline, deadline_reached};

mod world {
    wasmtime::component::bindgen!({
        world: "wasp-offload-block",
        path: "../../wit",
        with: {
            "wasp:plugin/host": crate::bindings::wasp::plugin::host,
            "wasp:plugin/types": crate::bindings::wasp::plugin::types,
        },
    });
}

use world::exports::wasp::plugin::offload_block::{
    OffloadAccept, OffloadFlow, OffloadKey, OffloadRefusal, OffloadRoute, OffloadStats, TunnelKind,
};
use world::{WaspOffloadBlock, WaspOffloadBlockIndices};

/// The interface a component must export to be an offload block.
pub const OFFLOAD_BLOCK: &str = "wasp:plugin/offload-block@0.1.3";

/// Longest setup latency a `forward` answer may give (60 s, in ns): a larger one is a malformed
/// answer (no NIC takes a minute to program a flow; the flow's idle timeout is 30 s).
pub const MAX_LATENCY_NS: u64 = 60_000_000_000;

/// What a [`PluginBlock`] has done since it was loaded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PluginBlockCounts {
    /// Flows the guest took to forward.
    pub forwarded: u64,
    /// Flows the guest took to observe.
    pub observed: u64,
    /// Adds the guest refused with `full`.
    pub full: u64,
    /// Adds the guest refused with `unsupported`.
    pub unsupported: u64,
    /// Calls interrupted at their deadline.
    pub deadline: u64,
    /// Calls that hit the memory limit.
    pub memory: u64,
    /// Other traps.
    pub trap: u64,
    /// Malformed answers (a value that does not lift, a latency over `MAX_LATENCY_NS`).
    pub malformed: u64,
    /// Instances re-created after a failure.
    pub recreated: u64,
    /// Calls refused because no instance could be made (instantiation or `configure` failed).
    pub unavailable: u64,
    /// Flows offered again to a re-created instance and taken.
    pub reoffered: u64,
    /// Flows offered again to a re-created instance and refused (their slots stay).
    pub reoffer_refused: u64,
}

#[derive(Default)]
struct Counters {
    forwarded: AtomicU64,
    observed: AtomicU64,
    full: AtomicU64,
    unsupported: AtomicU64,
    deadline: AtomicU64,
    memory: AtomicU64,
    trap: AtomicU64,
    malformed: AtomicU64,
    recreated: AtomicU64,
    unavailable: AtomicU64,
    reoffered: AtomicU64,
    reoffer_refused: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A live instance.
struct Live {
    store: Store<StoreState>,
    bindings: WaspOffloadBlock,
}

/// A flow the guest took: what it was offered (for a re-created instance), and the slot the
/// host counts in when the guest forwards it.
struct Held {
    flow: OffloadFlow,
    slot: Option<Arc<BlockSlot>>,
}

/// The instance, or none after a failure (re-created by the next call).
struct Slot {
    live: Option<Live>,
    /// An instance existed and failed: the next one made counts as a re-creation.
    failed: bool,
}

/// A Wasm plugin as a flowtable offload block (see the module docs). Made with
/// [`PluginBlock::load`]; register it with `Flowtable::register_block` (as an
/// `Arc<dyn OffloadBlock>`).
pub struct PluginBlock {
    name: String,
    path: PathBuf,
    args: String,
    host: PluginHost,
    pre: InstancePre<StoreState>,
    indices: WaspOffloadBlockIndices,
    instance: Mutex<Slot>,
    /// The flows the guest took, by flow id (locked after `instance` when both are held).
    held: Mutex<HashMap<FlowId, Held>>,
    counters: Counters,
    /// The rate limit on the log lines of every instance.
    log_limit: crate::loglimit::LogLimit,
}

impl std::fmt::Debug for PluginBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginBlock")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("args", &self.args)
            .finish()
    }
}

/// Why a call failed: `reason` `None` when no instance could be made.
struct Failure {
    reason: Option<FailureReason>,
    msg: String,
}

impl PluginBlock {
    /// Load the component at `path` as offload block `name` (shown in flowtable listings), and
    /// configure one instance with `args` (the block's own syntax, e.g.
    /// `capacity 2 latency-us 100` for `offload-table`).
    ///
    /// Errors name the file and what is wrong: [`PluginError::Read`], [`PluginError::Compile`],
    /// [`PluginError::Offload`] (no `wasp:plugin/offload-block` export, an import the
    /// host does not offer, `configure` refusing `args` or failing), [`PluginError::World`]
    /// (the export's functions do not have the contract's types).
    pub fn load(
        host: &PluginHost,
        path: impl AsRef<Path>,
        name: &str,
        args: &str,
    ) -> Result<PluginBlock, PluginError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| PluginError::Read {
            path: path.to_path_buf(),
            msg: e.to_string(),
        })?;
        Self::load_bytes(host, path, &bytes, name, args)
    }

    /// As [`PluginBlock::load`], from the component's bytes; `path` is only used in messages.
    pub fn load_bytes(
        host: &PluginHost,
        path: impl AsRef<Path>,
        bytes: &[u8],
        name: &str,
        args: &str,
    ) -> Result<PluginBlock, PluginError> {
        Self::load_compiled(host, host.compile(path, bytes)?, name, args)
    }

    /// As [`PluginBlock::load`], for a component [`PluginHost::compile`] compiled.
    ///
    /// # Errors
    /// As [`PluginBlock::load`], but for reading and compiling.
    pub fn load_compiled(
        host: &PluginHost,
        compiled: crate::Compiled,
        name: &str,
        args: &str,
    ) -> Result<PluginBlock, PluginError> {
        let crate::Compiled {
            path, component, ..
        } = compiled;
        let engine = &host.inner.engine;
        let offload = |msg: String| PluginError::Offload {
            path: path.clone(),
            msg,
        };
        if component.get_export_index(None, OFFLOAD_BLOCK).is_none() {
            return Err(offload(format!(
                "exports no {OFFLOAD_BLOCK} (build it for the world wasp:plugin/wasp-offload-block; \
                 a packet plugin goes in the ruleset instead)"
            )));
        }
        let ty = component.component_type();
        let wasi = crate::host::check_imports(
            ty.imports(engine).map(|(n, _)| n),
            ty.exports(engine).map(|(n, _)| n),
        )
        .map_err(offload)?;
        let world = |e: wasmtime::Error| PluginError::World {
            path: path.clone(),
            msg: format!("{e:#}"),
        };
        let mut linker: Linker<StoreState> = Linker::new(engine);
        WaspOffloadBlock::add_to_linker::<StoreState, wasmtime::component::HasSelf<StoreState>>(
            &mut linker,
            |s| s,
        )
        .map_err(world)?;
        crate::host::link_wasi_or_traps(&mut linker, &component, wasi).map_err(world)?;
        let pre = linker.instantiate_pre(&component).map_err(world)?;
        let indices = WaspOffloadBlockIndices::new(&pre).map_err(world)?;
        let block = PluginBlock {
            name: name.to_string(),
            path: path.clone(),
            args: args.to_string(),
            host: host.clone(),
            pre,
            indices,
            instance: Mutex::new(Slot {
                live: None,
                failed: false,
            }),
            held: Mutex::new(HashMap::new()),
            counters: Counters::default(),
            log_limit: Default::default(),
        };
        let live = block.instantiate().map_err(offload)?;
        block.instance.lock().live = Some(live);
        Ok(block)
    }

    /// The file it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The arguments given to `configure`.
    pub fn args(&self) -> &str {
        &self.args
    }

    /// Flows forwarded by the block now (slots the host holds for it).
    pub fn forwarding(&self) -> usize {
        self.held
            .lock()
            .values()
            .filter(|h| h.slot.is_some())
            .count()
    }

    /// Flows the block holds now (forwarded or observed).
    pub fn held(&self) -> usize {
        self.held.lock().len()
    }

    /// What the block has done since it was loaded.
    pub fn counts(&self) -> PluginBlockCounts {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        PluginBlockCounts {
            forwarded: l(&c.forwarded),
            observed: l(&c.observed),
            full: l(&c.full),
            unsupported: l(&c.unsupported),
            deadline: l(&c.deadline),
            memory: l(&c.memory),
            trap: l(&c.trap),
            malformed: l(&c.malformed),
            recreated: l(&c.recreated),
            unavailable: l(&c.unavailable),
            reoffered: l(&c.reoffered),
            reoffer_refused: l(&c.reoffer_refused),
        }
    }

    /// A new instance, configured with the block's arguments. Errors: what failed, as text.
    fn instantiate(&self) -> Result<Live, String> {
        let cfg = &self.host.inner.config;
        let mut store = Store::new(
            &self.host.inner.engine,
            StoreState::new(
                self.name.as_str().into(),
                cfg.max_memory,
                None,
                self.log_limit.clone(),
            ),
        );
        store.limiter(|s| &mut s.limit);
        store.data_mut().tick = cfg.tick;
        store.epoch_deadline_callback(deadline_reached);
        arm_deadline(&mut store, cfg.setup_ticks.max(1));
        let instance = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| format!("cannot instantiate: {e:#}"))?;
        let bindings = self
            .indices
            .load(&mut store, &instance)
            .map_err(|e| format!("cannot instantiate: {e:#}"))?;
        arm_deadline(&mut store, cfg.setup_ticks.max(1));
        let r = bindings
            .wasp_plugin_offload_block()
            .call_configure(&mut store, &self.args);
        drain(&mut store);
        match r {
            Ok(Ok(())) => Ok(Live { store, bindings }),
            Ok(Err(msg)) => Err(format!("configure {:?} refused: {msg}", self.args)),
            Err(e) => Err(format!("configure {:?} failed: {e:#}", self.args)),
        }
    }

    /// Make sure `slot` has an instance: made (and configured) when there is none; after a
    /// failure, the flows the block holds are offered to the new one again (`flow-add`, in
    /// flow id order, at `now_ns`), so that its table agrees with the host's slots. A refusal
    /// during the replay is counted and logged (the host keeps the flow's slot: the flowtable
    /// still has it bound); a failure drops the instance again and fails this call.
    fn ensure(&self, slot: &mut Slot, now_ns: u64) -> Result<(), Failure> {
        if slot.live.is_some() {
            return Ok(());
        }
        let live = self.instantiate().map_err(|msg| {
            bump(&self.counters.unavailable);
            tracing::warn!(block = %self.name, path = %self.path.display(), "offload plugin unavailable: {msg}");
            Failure { reason: None, msg }
        })?;
        slot.live = Some(live);
        if !std::mem::take(&mut slot.failed) {
            return Ok(());
        }
        bump(&self.counters.recreated);
        let mut flows: Vec<OffloadFlow> =
            self.held.lock().values().map(|h| h.flow.clone()).collect();
        flows.sort_by_key(|f| f.id);
        for flow in flows {
            let r = self.invoke(
                slot,
                "flow-add (re-offer)",
                now_ns,
                |live| {
                    live.bindings.wasp_plugin_offload_block().call_flow_add(
                        &mut live.store,
                        &flow,
                        now_ns,
                    )
                },
                |_| Ok(()),
            );
            match r {
                Ok(Ok(_)) => bump(&self.counters.reoffered),
                Ok(Err(refusal)) => {
                    bump(&self.counters.reoffer_refused);
                    tracing::warn!(
                        block = %self.name,
                        flow = flow.id,
                        "offload plugin refused a flow it held before its re-creation: {refusal:?}"
                    );
                }
                Err(f) => {
                    return Err(Failure {
                        reason: f.reason,
                        msg: format!("re-offering flow {}: {}", flow.id, f.msg),
                    });
                }
            }
        }
        Ok(())
    }

    /// [`PluginBlock::ensure`], then [`PluginBlock::invoke`].
    fn call<R>(
        &self,
        slot: &mut Slot,
        what: &str,
        now_ns: u64,
        f: impl FnOnce(&mut Live) -> wasmtime::Result<R>,
        check: impl FnOnce(&R) -> Result<(), String>,
    ) -> Result<R, Failure> {
        self.ensure(slot, now_ns)?;
        self.invoke(slot, what, now_ns, f, check)
    }

    /// Run `f` on the instance with the packet path's deadline and the host clocks at
    /// `now_ns`, then `check` its answer. On a failure the instance is dropped (the next call
    /// re-creates it), the failure counted and logged.
    fn invoke<R>(
        &self,
        slot: &mut Slot,
        what: &str,
        now_ns: u64,
        f: impl FnOnce(&mut Live) -> wasmtime::Result<R>,
        check: impl FnOnce(&R) -> Result<(), String>,
    ) -> Result<R, Failure> {
        let Some(live) = slot.live.as_mut() else {
            return Err(Failure {
                reason: None,
                msg: "no instance".into(),
            });
        };
        let ticks = self.host.inner.config.deadline_ticks.max(1);
        {
            let d = live.store.data_mut();
            d.now_mono = now_ns;
            d.now_boot = now_ns;
            d.limit.hit = false;
        }
        arm_deadline(&mut live.store, ticks);
        let r = f(live);
        drain(&mut live.store);
        let (reason, msg) = match r {
            Ok(v) => match check(&v) {
                Ok(()) => return Ok(v),
                Err(msg) => (FailureReason::Malformed, msg),
            },
            Err(e) => {
                let reason = if std::mem::take(&mut live.store.data_mut().limit.hit) {
                    FailureReason::MemoryLimit
                } else {
                    match e.downcast_ref::<Trap>() {
                        Some(Trap::Interrupt) => FailureReason::Deadline,
                        Some(_) => FailureReason::Trap,
                        None => FailureReason::Malformed,
                    }
                };
                let msg = match e.downcast_ref::<Trap>() {
                    Some(Trap::Interrupt) => format!(
                        "interrupted after {ticks} epoch ticks and as long again of CPU time"
                    ),
                    Some(t) => t.to_string(),
                    None => format!("{e:#}"),
                };
                (reason, msg)
            }
        };
        slot.live = None;
        slot.failed = true;
        let c = &self.counters;
        bump(match reason {
            FailureReason::Deadline => &c.deadline,
            FailureReason::MemoryLimit => &c.memory,
            FailureReason::Trap => &c.trap,
            FailureReason::Malformed => &c.malformed,
        });
        tracing::warn!(
            block = %self.name,
            path = %self.path.display(),
            call = what,
            reason = %reason,
            "offload plugin failed, instance dropped: {msg}"
        );
        Err(Failure {
            reason: Some(reason),
            msg,
        })
    }
}

/// Log what the guest emitted during a call; drop its timer requests (an offload block has no
/// timers).
fn drain(store: &mut Store<StoreState>) {
    let d = store.data_mut();
    d.ops.clear();
    for e in d.events.drain(..) {
        tracing::info!(plugin = %d.plugin, "{e}");
    }
}

fn addr(a: IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

fn key(k: &FlowKey) -> OffloadKey {
    OffloadKey {
        src: addr(k.src),
        dst: addr(k.dst),
        src_port: k.src_port,
        dst_port: k.dst_port,
        l4proto: k.l4proto,
        iif: k.iif,
        tun_id: k.tun_id,
    }
}

fn route(r: &Route) -> OffloadRoute {
    OffloadRoute {
        out_dev: r.out_dev,
        mtu: r.mtu,
        nat: !r.nat.is_none(),
        dec_ttl: r.dec_ttl,
        tunnel: match r.tunnel {
            TunnelWork::None => TunnelKind::None,
            TunnelWork::Decap { .. } => TunnelKind::Decap,
            TunnelWork::Encap(_) => TunnelKind::Encap,
        },
    }
}

impl OffloadBlock for PluginBlock {
    fn name(&self) -> &str {
        &self.name
    }

    /// `flow-add`. Forwarding: a slot active at `now_ns` + the guest's latency, kept by the
    /// host. A failed call refuses the flow with `Unsupported("plugin trapped: ...")` (or
    /// "plugin hit its deadline", "... memory limit", "... malformed answer").
    fn add(
        &self,
        flow: &FlowView<'_>,
        now_ns: u64,
    ) -> Result<Option<Arc<BlockSlot>>, OffloadError> {
        let arg = OffloadFlow {
            id: flow.id.0,
            ct_id: flow.ct_id,
            original: key(&flow.keys[0]),
            reply: key(&flow.keys[1]),
            original_route: route(flow.routes[0]),
            reply_route: route(flow.routes[1]),
        };
        let mut inst = self.instance.lock();
        let r = self.call(
            &mut inst,
            "flow-add",
            now_ns,
            |live| {
                live.bindings.wasp_plugin_offload_block().call_flow_add(
                    &mut live.store,
                    &arg,
                    now_ns,
                )
            },
            |r| match r {
                Ok(OffloadAccept::Forward(lat)) if *lat > MAX_LATENCY_NS => Err(format!(
                    "setup latency of {lat} ns (at most {MAX_LATENCY_NS})"
                )),
                _ => Ok(()),
            },
        );
        let c = &self.counters;
        match r {
            Ok(Ok(OffloadAccept::Forward(lat))) => {
                bump(&c.forwarded);
                let slot = Arc::new(BlockSlot::new(now_ns.saturating_add(lat)));
                let held = Held {
                    flow: arg,
                    slot: Some(Arc::clone(&slot)),
                };
                self.held.lock().insert(flow.id, held);
                Ok(Some(slot))
            }
            Ok(Ok(OffloadAccept::Observe)) => {
                bump(&c.observed);
                let held = Held {
                    flow: arg,
                    slot: None,
                };
                self.held.lock().insert(flow.id, held);
                Ok(None)
            }
            Ok(Err(OffloadRefusal::Full)) => {
                bump(&c.full);
                Err(OffloadError::Full)
            }
            Ok(Err(OffloadRefusal::Unsupported(msg))) => {
                bump(&c.unsupported);
                Err(OffloadError::Unsupported(msg))
            }
            Err(f) => Err(OffloadError::Unsupported(match f.reason {
                Some(FailureReason::Deadline) => format!("plugin hit its deadline: {}", f.msg),
                Some(FailureReason::MemoryLimit) => {
                    format!("plugin hit its memory limit: {}", f.msg)
                }
                Some(FailureReason::Trap) => format!("plugin trapped: {}", f.msg),
                Some(FailureReason::Malformed) => {
                    format!("plugin gave a malformed answer: {}", f.msg)
                }
                None => format!("plugin unavailable: {}", f.msg),
            })),
        }
    }

    /// Drops the host's slot and calls `flow-del` for a flow the guest took (a failure is
    /// counted and logged only).
    fn del(&self, id: FlowId, _keys: &[FlowKey; 2]) {
        let mut inst = self.instance.lock();
        if self.held.lock().remove(&id).is_none() {
            return;
        }
        let _ = self.call(
            &mut inst,
            "flow-del",
            0,
            |live| {
                live.bindings
                    .wasp_plugin_offload_block()
                    .call_flow_del(&mut live.store, id.0)
            },
            |_| Ok(()),
        );
    }

    /// From the host's slot for a forwarded flow; `flow-stats` for an observed one (a failure
    /// or a `last-used-ns` after `now_ns` gives `None`, counted); `None` for a flow the guest
    /// did not take.
    fn stats(&self, id: FlowId, _keys: &[FlowKey; 2], now_ns: u64) -> Option<BlockStats> {
        match self.held.lock().get(&id) {
            None => return None,
            Some(Held {
                slot: Some(slot), ..
            }) => return Some(slot.stats()),
            Some(_) => {}
        }
        let mut inst = self.instance.lock();
        let r = self.call(
            &mut inst,
            "flow-stats",
            now_ns,
            |live| {
                live.bindings.wasp_plugin_offload_block().call_flow_stats(
                    &mut live.store,
                    id.0,
                    now_ns,
                )
            },
            |s: &Option<OffloadStats>| match s {
                Some(s) if s.last_used_ns > now_ns => Err(format!(
                    "last-used-ns {} after now-ns {now_ns}",
                    s.last_used_ns
                )),
                _ => Ok(()),
            },
        );
        let s = r.ok()??;
        Some(BlockStats {
            packets: [s.original_packets, s.reply_packets],
            bytes: [s.original_bytes, s.reply_bytes],
            last_used_ns: s.last_used_ns,
        })
    }
}
