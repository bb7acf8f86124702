//! Hot swap: replacing a plugin's version in a runtime, now ([`Runtime::swap`]) or at its next
//! vector boundary from another thread ([`SwapHandle`]). Either all of a plugin's use sites
//! take the new version or nothing changes; the state moves when both versions declare state
//! transfer, else the new version starts fresh.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use wasp_core::ExtKind;

use super::containment::describe_error;
use super::sites::kind_name;
use super::{Runtime, SetLookup};
use crate::error::{FailureReason, PluginError};
use crate::host::{Live, Plugin, wit_kind};

/// What happened to the state in a swap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateMove {
    /// The old version's blob went to the new one.
    Carried {
        /// Blob size in bytes.
        bytes: usize,
    },
    /// The new version started fresh.
    Fresh {
        /// Why (a version without state transfer, an export trap, the import's error).
        reason: String,
    },
}

/// The result of a swap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapOutcome {
    /// The plugin's name in the runtime.
    pub plugin: String,
    /// Old version (its `describe`).
    pub from_version: String,
    /// New version.
    pub to_version: String,
    /// Use sites re-configured on the new version.
    pub sites: usize,
    /// What happened to the state.
    pub state: StateMove,
}

/// A swap queued by a [`SwapHandle`]: the plugin's name, the new version, the new instance
/// when the requester could prepare it, and where the result goes.
struct SwapRequest {
    name: String,
    plugin: Plugin,
    prepared: Option<Prepared>,
    reply: mpsc::Sender<Result<SwapOutcome, PluginError>>,
}

/// A new version's instance, made and configured off the worker by [`SwapHandle::request`]
/// for the use sites the runtime had at generation `generation` of its [`SiteBook`].
struct Prepared {
    live: Live,
    generation: u64,
    sites: usize,
}

/// What a [`SwapHandle`] needs to prepare a new version off the worker: every configured use
/// site (plugin name, kind, arguments), the set look-up, bumped `generation` on each change.
#[derive(Default)]
struct SiteBook {
    generation: u64,
    /// By site id: (plugin name, kind, arguments).
    sites: std::collections::BTreeMap<u32, (Arc<str>, ExtKind, Vec<String>)>,
    set_fn: Option<SetLookup>,
}

/// State shared by a runtime and its swap handles.
struct SwapShared {
    pending: AtomicBool,
    queue: Mutex<Vec<SwapRequest>>,
    book: Mutex<SiteBook>,
    /// The runtime's clocks at its last boundary (for `configure` calls made off the worker).
    now: [AtomicU64; 2],
    /// Old instances to drop off the worker (at the next request, or with the last handle).
    graveyard: Mutex<Vec<Live>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Asks a [`Runtime`] on another thread to swap a plugin: the request is applied at the
/// runtime's next vector boundary (its next `advance`), and the result comes back on the
/// returned channel. Cheap to clone, `Send + Sync`.
///
/// The new version is instantiated and its use sites configured on the requesting thread, so
/// the worker only moves the state and switches at the boundary; when the use sites changed in
/// between (or preparing failed), the worker does it all itself, with the same result.
#[derive(Clone)]
pub struct SwapHandle {
    shared: Arc<SwapShared>,
}

impl SwapHandle {
    /// A handle with nothing queued, for a new runtime.
    pub(super) fn new() -> SwapHandle {
        SwapHandle {
            shared: Arc::new(SwapShared {
                pending: AtomicBool::new(false),
                queue: Mutex::new(Vec::new()),
                book: Mutex::new(SiteBook::default()),
                now: [AtomicU64::new(0), AtomicU64::new(0)],
                graveyard: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Queue a swap of `name` to `new` (already loaded: compiled off the packet path).
    pub fn request(
        &self,
        name: &str,
        new: Plugin,
    ) -> mpsc::Receiver<Result<SwapOutcome, PluginError>> {
        let prepared = self.prepare(name, &new);
        self.queue(name, new, prepared)
    }

    /// As [`SwapHandle::request`], but the worker instantiates and configures the new version
    /// at the boundary itself (a longer pause there; for comparison in benchmarks).
    pub fn request_on_worker(
        &self,
        name: &str,
        new: Plugin,
    ) -> mpsc::Receiver<Result<SwapOutcome, PluginError>> {
        self.queue(name, new, None)
    }

    fn queue(
        &self,
        name: &str,
        new: Plugin,
        prepared: Option<Prepared>,
    ) -> mpsc::Receiver<Result<SwapOutcome, PluginError>> {
        // Old instances of earlier swaps are dropped here, not on the worker.
        drop(std::mem::take(&mut *lock(&self.shared.graveyard)));
        let (tx, rx) = mpsc::channel();
        lock(&self.shared.queue).push(SwapRequest {
            name: name.to_string(),
            plugin: new,
            prepared,
            reply: tx,
        });
        self.shared.pending.store(true, Ordering::Release);
        rx
    }

    /// Instantiate `new` and configure the use sites of `name` on it, as the runtime's swap
    /// would; `None` when anything fails (the worker then does it and reports why).
    fn prepare(&self, name: &str, new: &Plugin) -> Option<Prepared> {
        let (generation, sites, set_fn) = {
            let b = lock(&self.shared.book);
            let sites: Vec<_> = b
                .sites
                .iter()
                .filter(|(_, s)| &*s.0 == name)
                .map(|(id, (_, kind, args))| (*id, *kind, args.clone()))
                .collect();
            (b.generation, sites, b.set_fn.clone())
        };
        let mut live = new.instantiate(name.into(), set_fn).ok()?;
        {
            let d = live.store.data_mut();
            d.now_mono = self.shared.now[0].load(Ordering::Relaxed);
            d.now_boot = self.shared.now[1].load(Ordering::Relaxed);
        }
        let deadline = new.inner.host.config().setup_ticks.max(1);
        for (id, kind, args) in &sites {
            if !new.info().kinds.contains(kind) {
                return None;
            }
            crate::host::arm_deadline(&mut live.store, deadline);
            let r = live.bindings.wasp_plugin_plugin().call_configure(
                &mut live.store,
                *id,
                wit_kind(*kind),
                args,
            );
            if !matches!(r, Ok(Ok(()))) {
                return None;
            }
        }
        Some(Prepared {
            live,
            generation,
            sites: sites.len(),
        })
    }
}

impl Runtime {
    /// The clocks for configure calls made by a [`SwapHandle`] off the worker.
    pub(super) fn publish_clocks(&self) {
        let n = &self.swaps.shared.now;
        n[0].store(self.now[0], Ordering::Relaxed);
        n[1].store(self.now[1], Ordering::Relaxed);
    }

    /// A handle for other threads to request swaps, applied at this runtime's next vector
    /// boundary.
    pub fn swap_handle(&self) -> SwapHandle {
        self.swaps.clone()
    }

    pub(super) fn apply_requested_swaps(&mut self) {
        // A plain load first: this runs before every vector.
        let sh = &self.swaps.shared;
        if !sh.pending.load(Ordering::Relaxed) || !sh.pending.swap(false, Ordering::Acquire) {
            return;
        }
        let reqs = std::mem::take(&mut *lock(&sh.queue));
        for req in reqs {
            let SwapRequest {
                name,
                plugin,
                prepared,
                reply,
            } = req;
            let generation = lock(&self.swaps.shared.book).generation;
            // Prepared for the use sites as they are now, or not at all.
            let prepared = prepared.filter(|p| p.generation == generation);
            let r = self.swap_with(&name, &plugin, prepared, true);
            if let Err(e) = &r {
                self.event(
                    name.clone(),
                    format!("plugin {name} swap failed, nothing changed: {e}"),
                );
            }
            // The requester may have gone away; the event stays.
            let _ = reply.send(r);
        }
    }

    /// Record use site `id` as it is now (configured or released) for [`SwapHandle`]s: one
    /// entry changes, so configuring N sites costs O(N log N), not O(N²).
    pub(super) fn book_site(&mut self, id: u32) {
        let entry = self
            .sites
            .get(id as usize)
            .and_then(Option::as_ref)
            .map(|s| (self.slots[s.slot].name.clone(), s.kind, s.args.clone()));
        let mut b = lock(&self.swaps.shared.book);
        b.generation += 1;
        match entry {
            Some(e) => {
                b.sites.insert(id, e);
            }
            None => {
                b.sites.remove(&id);
            }
        }
    }

    /// Record the set look-up for [`SwapHandle`]s.
    pub(super) fn book_set_fn(&mut self) {
        let mut b = lock(&self.swaps.shared.book);
        b.generation += 1;
        b.set_fn = self.set_fn.clone();
    }

    /// Replace plugin `name` by `new` now (call it between vectors: this is the vector
    /// boundary). The new version is instantiated and every use site of `name` re-configured
    /// on it first; if any of that fails, nothing changes and the error says why. Then the
    /// state moves (`export-state` from the old instance, `import-state` into the new) when
    /// both versions declare state transfer, else the new one starts fresh (its timers too);
    /// an event says which. The old instance is dropped: no handle to it stays (case C35).
    pub fn swap(&mut self, name: &str, new: &Plugin) -> Result<SwapOutcome, PluginError> {
        self.swap_with(name, new, None, false)
    }

    /// [`Runtime::swap`], with the new instance already made and configured when `prepared`;
    /// with `bury`, the old instance is left for the handles to drop (off the worker).
    fn swap_with(
        &mut self,
        name: &str,
        new: &Plugin,
        prepared: Option<Prepared>,
        bury: bool,
    ) -> Result<SwapOutcome, PluginError> {
        let slot = *self
            .by_name
            .get(name)
            .ok_or_else(|| PluginError::UnknownPlugin(name.to_string()))?;
        let pname = self.slots[slot].name.clone();
        let deadline = self.host.config().setup_ticks.max(1);
        let (mut live, nsites) = match prepared {
            Some(p) => (p.live, p.sites),
            None => self.instantiate_configured(slot, new)?,
        };
        live.store.data_mut().now_mono = self.now[0];
        live.store.data_mut().now_boot = self.now[1];
        let old = &mut self.slots[slot];
        let from_version = old.plugin.info().version.clone();
        let to_version = new.info().version.clone();
        let state = match (
            &mut old.live,
            old.plugin.info().state_transfer,
            new.info().state_transfer,
        ) {
            (_, false, _) => StateMove::Fresh {
                reason: format!("version {from_version} has no state transfer"),
            },
            (_, _, false) => StateMove::Fresh {
                reason: format!("version {to_version} has no state transfer"),
            },
            (None, _, _) => StateMove::Fresh {
                reason: "the old instance had failed".into(),
            },
            (Some(o), true, true) => match move_blob(o, &mut live, deadline) {
                Ok(m) => m,
                Err(msg) => {
                    return Err(PluginError::Call {
                        plugin: pname.to_string(),
                        reason: FailureReason::Trap,
                        msg,
                    });
                }
            },
        };
        // Commit: the old version is dropped here; its instance too, or, for a swap requested
        // through a handle, by the handle's next request (off the worker).
        match old.live.replace(live) {
            Some(gone) if bury => lock(&self.swaps.shared.graveyard).push(gone),
            gone => drop(gone),
        }
        old.recreate_failed = false;
        old.plugin = new.clone();
        old.swaps += 1;
        for s in self.sites.iter_mut().flatten().filter(|s| s.slot == slot) {
            (s.streak, s.skip, s.next_backoff) = (0, 0, 0);
        }
        if matches!(state, StateMove::Fresh { .. }) {
            self.clear_timers(slot);
        }
        let text = match &state {
            StateMove::Carried { bytes } => {
                format!(
                    "plugin {pname} swapped {from_version} -> {to_version}, state carried ({bytes} bytes)"
                )
            }
            StateMove::Fresh { reason } => {
                format!(
                    "plugin {pname} swapped {from_version} -> {to_version}, started fresh: {reason}"
                )
            }
        };
        self.event(pname.to_string(), text);
        Ok(SwapOutcome {
            plugin: pname.to_string(),
            from_version,
            to_version,
            sites: nsites,
            state,
        })
    }

    /// A new instance of `new` for the slot, with every use site of the slot configured on it.
    /// Errors: the instantiation's, or the first refusal (the site and the plugin's message).
    fn instantiate_configured(
        &self,
        slot: usize,
        new: &Plugin,
    ) -> Result<(Live, usize), PluginError> {
        let pname = self.slots[slot].name.clone();
        let mut live = new.instantiate(pname.clone(), self.set_fn.clone())?;
        live.store.data_mut().now_mono = self.now[0];
        live.store.data_mut().now_boot = self.now[1];
        let deadline = self.host.config().setup_ticks.max(1);
        let mut nsites = 0;
        for (id, s) in self.sites.iter().enumerate() {
            let Some(s) = s.as_ref().filter(|s| s.slot == slot) else {
                continue;
            };
            let refuse = |msg: String| PluginError::Configure {
                plugin: pname.to_string(),
                site: id as u32,
                msg,
            };
            if !new.info().kinds.contains(&s.kind) {
                return Err(refuse(format!(
                    "it does not offer the kind {}",
                    kind_name(s.kind)
                )));
            }
            crate::host::arm_deadline(&mut live.store, deadline);
            let r = live.bindings.wasp_plugin_plugin().call_configure(
                &mut live.store,
                id as u32,
                wit_kind(s.kind),
                &s.args,
            );
            match r {
                Ok(Ok(())) => nsites += 1,
                Ok(Err(msg)) => return Err(refuse(msg)),
                Err(e) => {
                    return Err(refuse(format!(
                        "configure failed: {}",
                        describe_error(&e, deadline)
                    )));
                }
            }
        }
        Ok((live, nsites))
    }
}

/// Move `old`'s state blob into `new` (export-state, then import-state; each call within
/// `deadline` ticks). `Ok(Fresh)` when the export fails or the import refuses the blob (the
/// new instance then starts as configured); `Err` when the import traps (the new instance is
/// spoilt).
pub(super) fn move_blob(
    old: &mut Live,
    new: &mut Live,
    deadline: u64,
) -> Result<StateMove, String> {
    crate::host::arm_deadline(&mut old.store, deadline);
    let blob = match old
        .bindings
        .wasp_plugin_plugin()
        .call_export_state(&mut old.store)
    {
        Err(e) => {
            return Ok(StateMove::Fresh {
                reason: format!("export-state failed: {}", describe_error(&e, deadline)),
            });
        }
        Ok(blob) => blob,
    };
    crate::host::arm_deadline(&mut new.store, deadline);
    match new
        .bindings
        .wasp_plugin_plugin()
        .call_import_state(&mut new.store, &blob)
    {
        Ok(Ok(())) => Ok(StateMove::Carried { bytes: blob.len() }),
        Ok(Err(msg)) => Ok(StateMove::Fresh {
            reason: format!("import-state refused: {msg}"),
        }),
        Err(e) => Err(format!(
            "import-state failed: {}",
            describe_error(&e, deadline)
        )),
    }
}
