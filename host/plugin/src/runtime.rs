//! The per-worker runtime: one instance per plugin, use sites, batched calls with containment,
//! timers, events, and hot swap.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use wasmtime::Trap;
use wasp_core::{ExtEdit, ExtKind, ExtPacket, ExtSite, ExtVerdict, Extensions, Fallback};

use crate::area::{self, AreaCount};
use crate::bindings::{Clock, TimerOp};
use crate::error::{FailureReason, PluginError};
use crate::host::{Live, MatchesFirstParams, MatchesFirstResults, Plugin, PluginHost, wit_kind};
use crate::pack;
use crate::timers::{SharedTimers, TimerQueue};

/// The embedder's look-up behind the host import `set-contains`: called with (plugin name,
/// set name, key bytes as the set's type has them), true when the set holds the key.
pub type SetLookup = Arc<dyn Fn(&str, &str, &[u8]) -> bool + Send + Sync>;

/// An event for the control side: emitted by a plugin (`idletimer wlan0 expired`), or by the
/// host about a plugin (`plugin geneve trapped: ...`, a swap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginEvent {
    /// The runtime's monotonic clock when it was recorded, ns (the capture's time in a replay).
    pub at_ns: u64,
    /// The plugin's name as the runtime knows it.
    pub plugin: String,
    /// The text, e.g. `idletimer wlan0 expired`.
    pub text: String,
}

/// Failed calls of one plugin in one runtime, per reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FailureCounts {
    /// Calls interrupted at their epoch deadline.
    pub deadline: u64,
    /// Calls that hit the memory limit.
    pub memory: u64,
    /// Other traps.
    pub trap: u64,
    /// Malformed results.
    pub malformed: u64,
    /// Instances re-created after a failure.
    pub recreated: u64,
    /// Events dropped because the plugin emitted too many between two drains.
    pub dropped_events: u64,
    /// Calls not made because their use site was backing off ([`Backoff`]): their packets
    /// got the fallback.
    pub skipped: u64,
}

/// How a use site whose calls keep failing backs off: after `after` failed calls in a row,
/// its next `first` calls are not made (their packets get the use site's fallback at once,
/// with no instance to re-create); each back-off that ends in another failure doubles the
/// next one, up to `max` calls. A call that succeeds, a swap of the plugin, or configuring the
/// use site again ends it. One event per back-off. One call is one vector at one use site.
/// As Envoy reloads a crashed proxy-wasm VM with back-off (research/plugins.md, "peers").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Failed calls in a row before backing off (default 3; 0 counts as 1).
    pub after: u32,
    /// Calls skipped by the first back-off (default 8).
    pub first: u32,
    /// Most calls skipped by one back-off (default 65536).
    pub max: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            after: 3,
            first: 8,
            max: 1 << 16,
        }
    }
}

/// One listed piece of a use site's state (WIT `state-entry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateEntry {
    /// The set element's id + 1, or 0 for the use site itself.
    pub elem: u32,
    /// Named values, e.g. `[("packets", 12), ("bytes", 1440)]`.
    pub values: Vec<(String, u64)>,
    /// Free text, printed as is.
    pub text: String,
}

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
    sites: Vec<(u32, Arc<str>, ExtKind, Vec<String>)>,
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
                .filter(|s| &*s.1 == name)
                .map(|(id, _, kind, args)| (*id, *kind, args.clone()))
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

/// A plugin in a runtime: its current version and instance.
struct Slot {
    name: Arc<str>,
    plugin: Plugin,
    live: Option<Live>,
    failures: FailureCounts,
    /// Re-creating the instance failed and was reported; not reported again until it works.
    recreate_failed: bool,
}

/// A configured use site.
struct Site {
    slot: usize,
    kind: ExtKind,
    args: Vec<String>,
    fallback: Fallback,
    /// Its calls that failed in a row.
    streak: u32,
    /// Calls still to skip (backing off).
    skip: u32,
    /// Length of its next back-off (0: [`Backoff::first`]).
    next_backoff: u32,
}

impl Site {
    fn new(slot: usize, kind: ExtKind, args: &[String], fallback: Fallback) -> Site {
        Site {
            slot,
            kind,
            args: args.to_vec(),
            fallback,
            streak: 0,
            skip: 0,
            next_backoff: 0,
        }
    }
}

/// Plugins as one worker runs them: one instance per plugin, implementing
/// [`wasp_core::Extensions`]. Not shared between threads (move it to its worker).
pub struct Runtime {
    host: PluginHost,
    slots: Vec<Slot>,
    by_name: HashMap<String, usize>,
    sites: Vec<Option<Site>>,
    timers: TimerQueue,
    events: Vec<PluginEvent>,
    now: [u64; 2],
    set_fn: Option<SetLookup>,
    buf: Vec<u8>,
    swaps: SwapHandle,
    /// Whether the last `matches`/`apply` call failed (`Extensions::last_call_failed`).
    last_failed: bool,
    backoff: Backoff,
    /// Whether matches use a plugin's `fast-match` export when it has one.
    fast_match: bool,
    /// Whether `fast-match` batches go into a plugin's batch area when it has one.
    batch_area: bool,
    /// The timer table shared with other workers' runtimes, and this runtime's member index.
    share: Option<(Arc<SharedTimers>, usize)>,
}

/// Outcome of one guarded call.
enum CallError {
    /// The call failed: count, report, re-create.
    Failed(FailureReason, String),
    /// There is no instance (re-creating it failed, which was reported once): fallback only.
    NoInstance(String),
}

impl Runtime {
    /// An empty runtime on `host`.
    pub fn new(host: &PluginHost) -> Runtime {
        Runtime {
            host: host.clone(),
            slots: Vec::new(),
            by_name: HashMap::new(),
            sites: Vec::new(),
            timers: TimerQueue::default(),
            share: None,
            events: Vec::new(),
            now: [0, 0],
            set_fn: None,
            buf: Vec::new(),
            swaps: SwapHandle {
                shared: Arc::new(SwapShared {
                    pending: AtomicBool::new(false),
                    queue: Mutex::new(Vec::new()),
                    book: Mutex::new(SiteBook::default()),
                    now: [AtomicU64::new(0), AtomicU64::new(0)],
                    graveyard: Mutex::new(Vec::new()),
                }),
            },
            last_failed: false,
            backoff: Backoff::default(),
            fast_match: true,
            batch_area: true,
        }
    }

    /// Whether matches go through a plugin's `fast-match` export when it has one (default
    /// true: `matches-first` with its first window, then `matches` with the whole window for
    /// the packets that need more). Off, every match is one `plugin.matches` call with the
    /// whole window, as for a plugin without the export (for comparison in benchmarks).
    pub fn set_fast_match(&mut self, on: bool) {
        self.fast_match = on;
    }

    /// Whether `fast-match` batches are written straight into the plugin's memory when it
    /// exports `area-match` (default true: `matches-first-at`, the records written into its
    /// batch area while the call's arguments are lowered). Off, they go as a `list<u8>`
    /// through `matches-first`, as for a plugin without the export (the safe twin of the
    /// same path; for comparison in benchmarks and tests). The answers are the same.
    pub fn set_batch_area(&mut self, on: bool) {
        self.batch_area = on;
    }

    /// Set how use sites whose calls keep failing back off (default [`Backoff::default`]).
    pub fn set_backoff(&mut self, backoff: Backoff) {
        self.backoff = backoff;
    }

    /// Add `plugin` under `name` (the name use sites give in [`ExtSite::plugin`]) and create
    /// its instance. Adding a name again replaces nothing and is an error.
    pub fn add(&mut self, name: &str, plugin: &Plugin) -> Result<(), PluginError> {
        if self.by_name.contains_key(name) {
            return Err(PluginError::Instantiate {
                plugin: name.to_string(),
                msg: "a plugin of this name is already added".into(),
            });
        }
        let name: Arc<str> = name.into();
        let live = plugin.instantiate(name.clone(), self.set_fn.clone())?;
        self.by_name.insert(name.to_string(), self.slots.len());
        self.slots.push(Slot {
            name,
            plugin: plugin.clone(),
            live: Some(live),
            failures: FailureCounts::default(),
            recreate_failed: false,
        });
        Ok(())
    }

    /// Install the look-up behind `set-contains` (without one, every look-up is false). Takes
    /// effect for instances created from now on; call it before [`Runtime::add`].
    pub fn set_lookup(&mut self, f: SetLookup) {
        self.set_fn = Some(f);
        self.update_book();
    }

    /// Set up use site `site` on its plugin ([`ExtSite::plugin`]) with its arguments: as a
    /// match first when the plugin offers that kind, else (or when the match is refused) as a
    /// statement, then as a stateful expression, whichever the plugin offers. Returns the kind
    /// that took. A site id configured before is released first.
    ///
    /// Errors: the plugin's own message (for the ruleset error at the rule's file:line:col);
    /// when it refused two kinds, both messages (`as a match: ...; as a statement: ...`);
    /// `no plugin named "x"` for an unknown plugin; a trap's description.
    pub fn configure(&mut self, site: &ExtSite) -> Result<ExtKind, String> {
        let Some(&slot) = self.by_name.get(&site.plugin) else {
            return Err(PluginError::UnknownPlugin(site.plugin.clone()).to_string());
        };
        self.release(site.id);
        let offered = self.slots[slot].plugin.info().kinds.clone();
        let mut errors = Vec::new();
        for kind in [ExtKind::Match, ExtKind::Statement, ExtKind::Stateful] {
            if !offered.contains(&kind) {
                continue;
            }
            match self.configure_on(slot, site.id, kind, &site.args) {
                Ok(()) => {
                    let i = site.id as usize;
                    if self.sites.len() <= i {
                        self.sites.resize_with(i + 1, || None);
                    }
                    self.sites[i] = Some(Site::new(slot, kind, &site.args, site.fallback));
                    self.update_book();
                    return Ok(kind);
                }
                Err(e) => errors.push((kind, e)),
            }
        }
        Err(match errors.len() {
            1 => errors.remove(0).1,
            _ => errors
                .iter()
                .map(|(k, e)| format!("as {}: {e}", kind_name(*k)))
                .collect::<Vec<_>>()
                .join("; "),
        })
    }

    /// Set up use site `site` as exactly `kind` (when the syntax decides the kind, e.g. a
    /// `counter` on a set element is stateful). Errors as [`Runtime::configure`], plus
    /// `plugin P does not offer KIND` when it does not declare that kind.
    pub fn configure_as(&mut self, site: &ExtSite, kind: ExtKind) -> Result<(), String> {
        let Some(&slot) = self.by_name.get(&site.plugin) else {
            return Err(PluginError::UnknownPlugin(site.plugin.clone()).to_string());
        };
        self.release(site.id);
        if !self.slots[slot].plugin.info().kinds.contains(&kind) {
            return Err(format!(
                "plugin {} does not offer {}",
                site.plugin,
                kind_name(kind)
            ));
        }
        self.configure_on(slot, site.id, kind, &site.args)?;
        let i = site.id as usize;
        if self.sites.len() <= i {
            self.sites.resize_with(i + 1, || None);
        }
        self.sites[i] = Some(Site::new(slot, kind, &site.args, site.fallback));
        self.update_book();
        Ok(())
    }

    /// One `configure` call on the slot's live instance.
    fn configure_on(
        &mut self,
        slot: usize,
        site: u32,
        kind: ExtKind,
        args: &[String],
    ) -> Result<(), String> {
        let r = self.guarded_for(slot, self.host.config().setup_ticks, |live| {
            let b = &live.bindings;
            b.wasp_plugin_plugin()
                .call_configure(&mut live.store, site, wit_kind(kind), args)
        });
        match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(msg)) => Err(msg),
            Err(CallError::Failed(reason, msg)) => {
                let name = self.slots[slot].name.clone();
                self.fail(slot, reason, &msg);
                Err(format!("plugin {name}: {reason} in configure: {msg}"))
            }
            Err(CallError::NoInstance(msg)) => Err(msg),
        }
    }

    /// The use site is gone: tell its plugin (`release`) and forget it. Nothing happens for
    /// an unknown site.
    pub fn release(&mut self, site: u32) {
        let Some(s) = self.sites.get_mut(site as usize).and_then(Option::take) else {
            return;
        };
        let slot = s.slot;
        self.update_book();
        if let Err(CallError::Failed(reason, msg)) =
            self.guarded_for(slot, self.host.config().setup_ticks, |live| {
                let b = &live.bindings;
                b.wasp_plugin_plugin().call_release(&mut live.store, site)
            })
        {
            self.fail(slot, reason, &msg);
        }
    }

    /// The kind use site `site` was configured as.
    pub fn site_kind(&self, site: u32) -> Option<ExtKind> {
        self.site(site).map(|s| s.kind)
    }

    fn site(&self, site: u32) -> Option<&Site> {
        self.sites.get(site as usize).and_then(Option::as_ref)
    }

    /// The state of use site `site` (WIT `list-state`).
    pub fn list_state(&mut self, site: u32) -> Result<Vec<StateEntry>, PluginError> {
        let slot = self.site(site).ok_or(PluginError::UnknownSite(site))?.slot;
        let r = self.guarded_for(slot, self.host.config().setup_ticks, |live| {
            let b = &live.bindings;
            b.wasp_plugin_plugin()
                .call_list_state(&mut live.store, site)
        });
        match r {
            Ok(entries) => Ok(entries
                .into_iter()
                .map(|e| StateEntry {
                    elem: e.elem,
                    values: e.values,
                    text: e.text,
                })
                .collect()),
            Err(CallError::Failed(reason, msg)) => Err(self.fail(slot, reason, &msg)),
            Err(CallError::NoInstance(msg)) => Err(no_instance(&self.slots[slot].name, msg)),
        }
    }

    /// Reset use site `site`'s state (`elem` 0: all of it; else that element's; WIT
    /// `reset-state`).
    pub fn reset_state(&mut self, site: u32, elem: u32) -> Result<(), PluginError> {
        let slot = self.site(site).ok_or(PluginError::UnknownSite(site))?.slot;
        let r = self.guarded_for(slot, self.host.config().setup_ticks, |live| {
            let b = &live.bindings;
            b.wasp_plugin_plugin()
                .call_reset_state(&mut live.store, site, elem)
        });
        r.map_err(|e| match e {
            CallError::Failed(reason, msg) => self.fail(slot, reason, &msg),
            CallError::NoInstance(msg) => no_instance(&self.slots[slot].name, msg),
        })
    }

    /// The plugin added under `name` (its current version).
    pub fn plugin(&self, name: &str) -> Option<&Plugin> {
        self.by_name.get(name).map(|&i| &self.slots[i].plugin)
    }

    /// Failed calls of plugin `name`, per reason.
    pub fn failures(&self, name: &str) -> FailureCounts {
        self.by_name
            .get(name)
            .map(|&i| self.slots[i].failures)
            .unwrap_or_default()
    }

    /// Take the events recorded since the last call, oldest first.
    pub fn take_events(&mut self) -> Vec<PluginEvent> {
        std::mem::take(&mut self.events)
    }

    /// Share timers with other workers' runtimes as member `worker` of `table` (see
    /// [`SharedTimers`]: each timer's `on-timer` then runs once, on the runtime whose timer
    /// for it falls due last). Call it before configuring use sites, so that the timers
    /// they arm are shared too.
    pub fn share_timers(&mut self, table: Arc<SharedTimers>, worker: usize) {
        self.share = Some((table, worker));
    }

    /// Drop every timer of plugin slot `slot`, here and in the shared table.
    fn clear_timers(&mut self, slot: usize) {
        self.timers.clear_slot(slot);
        if let Some((t, w)) = &self.share {
            t.cancel_all(&self.slots[slot].name, *w);
        }
    }

    /// Timers armed by this runtime's plugins.
    pub fn timers_armed(&self) -> usize {
        self.timers.len()
    }

    /// Set both clocks without firing timers (the first packet's time in a replay).
    pub fn set_clocks(&mut self, mono_ns: u64, boot_ns: u64) {
        self.now = [mono_ns, boot_ns];
        self.publish_clocks();
    }

    /// Move the clocks to `mono_ns` and `boot_ns` and fire, in deadline order, every timer
    /// that fell due on its clock (`on-timer`). Timers armed while firing wait for the next
    /// advance. Also applies queued swaps ([`SwapHandle`]) first: this is the vector boundary.
    ///
    /// Each timer runs at the time it fell due, not at the new time: while its `on-timer`
    /// runs, its clock reads the timer's deadline (the other clock the same distance before
    /// its new value, never before its old one), so what it emits is stamped with the
    /// deadline (an IDLETIMER expiry in a replay shows at the capture time it fell due, as
    /// the kernel's timer would have fired then). Then the clocks read the new time.
    pub fn advance_clocks(&mut self, mono_ns: u64, boot_ns: u64) {
        self.apply_requested_swaps();
        let old = self.now;
        let new = [mono_ns.max(old[0]), boot_ns.max(old[1])];
        let bound = self.timers.next_seq();
        while let Some((clock, deadline, (slot, key))) = self.timers.pop_due(new, bound) {
            if let Some((t, w)) = &self.share
                && !t.due(&self.slots[slot].name, key, *w)
            {
                // Another worker holds it armed: it fires there, once.
                continue;
            }
            self.now = due_clocks(old, new, usize::from(clock), deadline);
            if let Err(CallError::Failed(reason, msg)) = self.guarded(slot, |live| {
                let b = &live.bindings;
                b.wasp_plugin_plugin().call_on_timer(&mut live.store, key)
            }) {
                self.fail(slot, reason, &msg);
            }
        }
        self.now = [mono_ns, boot_ns];
        self.publish_clocks();
    }

    /// The clocks for configure calls made by a [`SwapHandle`] off the worker.
    fn publish_clocks(&self) {
        let n = &self.swaps.shared.now;
        n[0].store(self.now[0], Ordering::Relaxed);
        n[1].store(self.now[1], Ordering::Relaxed);
    }

    /// A handle for other threads to request swaps, applied at this runtime's next vector
    /// boundary.
    pub fn swap_handle(&self) -> SwapHandle {
        self.swaps.clone()
    }

    fn apply_requested_swaps(&mut self) {
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

    /// Record the use sites for [`SwapHandle`]s (after configure or release).
    fn update_book(&mut self) {
        let sites = self
            .sites
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let s = s.as_ref()?;
                Some((
                    i as u32,
                    self.slots[s.slot].name.clone(),
                    s.kind,
                    s.args.clone(),
                ))
            })
            .collect();
        let mut b = lock(&self.swaps.shared.book);
        b.generation += 1;
        b.sites = sites;
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
            (Some(o), true, true) => {
                crate::host::arm_deadline(&mut o.store, deadline);
                match o
                    .bindings
                    .wasp_plugin_plugin()
                    .call_export_state(&mut o.store)
                {
                    Err(e) => StateMove::Fresh {
                        reason: format!("export-state failed: {}", describe_error(&e, deadline)),
                    },
                    Ok(blob) => {
                        crate::host::arm_deadline(&mut live.store, deadline);
                        match live
                            .bindings
                            .wasp_plugin_plugin()
                            .call_import_state(&mut live.store, &blob)
                        {
                            Ok(Ok(())) => StateMove::Carried { bytes: blob.len() },
                            Ok(Err(msg)) => StateMove::Fresh {
                                reason: format!("import-state refused: {msg}"),
                            },
                            Err(e) => {
                                return Err(PluginError::Call {
                                    plugin: pname.to_string(),
                                    reason: FailureReason::Trap,
                                    msg: format!(
                                        "import-state failed: {}",
                                        describe_error(&e, deadline)
                                    ),
                                });
                            }
                        }
                    }
                }
            }
        };
        // Commit: the old version is dropped here; its instance too, or, for a swap requested
        // through a handle, by the handle's next request (off the worker).
        match old.live.replace(live) {
            Some(gone) if bury => lock(&self.swaps.shared.graveyard).push(gone),
            gone => drop(gone),
        }
        old.recreate_failed = false;
        old.plugin = new.clone();
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

    fn event(&mut self, plugin: String, text: String) {
        self.events.push(PluginEvent {
            at_ns: self.now[0],
            plugin,
            text,
        });
    }

    /// Run `f` on the slot's instance with a fresh epoch deadline and the clocks set, then
    /// collect the timers and events it asked for. An instance that failed before is
    /// re-created first.
    fn guarded<R>(
        &mut self,
        slot: usize,
        f: impl FnOnce(&mut Live) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let ticks = self.host.config().deadline_ticks;
        self.guarded_for(slot, ticks, f)
    }

    /// [`Runtime::guarded`] with a deadline of `ticks` (the setup deadline for calls off the
    /// packet path).
    fn guarded_for<R>(
        &mut self,
        slot: usize,
        ticks: u64,
        f: impl FnOnce(&mut Live) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        if self.slots[slot].live.is_none() {
            self.recreate(slot);
        }
        let deadline = ticks.max(1);
        let now = self.now;
        let s = &mut self.slots[slot];
        let Some(live) = s.live.as_mut() else {
            return Err(CallError::NoInstance(format!(
                "plugin {}: no instance (re-creating it failed)",
                s.name
            )));
        };
        {
            let d = live.store.data_mut();
            d.now_mono = now[0];
            d.now_boot = now[1];
            // A refused growth that the guest survived is not this call's failure.
            d.limit.hit = false;
        }
        crate::host::arm_deadline(&mut live.store, deadline);
        let r = f(live);
        let r = r.map_err(|e| {
            let reason = classify(&e, live);
            CallError::Failed(reason, describe_error(&e, deadline))
        });
        self.drain(slot);
        r
    }

    /// Move the timers and events the slot's instance asked for into the runtime.
    fn drain(&mut self, slot: usize) {
        let s = &mut self.slots[slot];
        let Some(live) = s.live.as_mut() else { return };
        let d = live.store.data_mut();
        if d.ops.is_empty() && d.events.is_empty() && d.dropped_events == 0 {
            return;
        }
        let ops = std::mem::take(&mut d.ops);
        let evs = std::mem::take(&mut d.events);
        s.failures.dropped_events += std::mem::take(&mut d.dropped_events);
        let name = s.name.to_string();
        for op in ops {
            match op {
                TimerOp::Arm {
                    key,
                    clock,
                    deadline,
                } => {
                    self.timers
                        .arm((slot, key), u8::from(clock == Clock::Boottime), deadline);
                    if let Some((t, w)) = &self.share {
                        t.arm(&self.slots[slot].name, key, *w, deadline);
                    }
                }
                TimerOp::Cancel { key } => {
                    self.timers.cancel((slot, key));
                    if let Some((t, w)) = &self.share {
                        t.cancel(&self.slots[slot].name, key, *w);
                    }
                }
            }
        }
        for text in evs {
            self.event(name.clone(), text);
        }
    }

    /// Count and report a failure, drop the instance and create a new one (configure
    /// replayed for its sites; its timers are gone with its state).
    fn fail(&mut self, slot: usize, reason: FailureReason, msg: &str) -> PluginError {
        let s = &mut self.slots[slot];
        match reason {
            FailureReason::Deadline => s.failures.deadline += 1,
            FailureReason::MemoryLimit => s.failures.memory += 1,
            FailureReason::Trap => s.failures.trap += 1,
            FailureReason::Malformed => s.failures.malformed += 1,
        }
        let name = s.name.to_string();
        let text = match reason {
            FailureReason::Deadline => format!("plugin {name} hit its deadline: {msg}"),
            FailureReason::MemoryLimit => format!("plugin {name} hit its memory limit: {msg}"),
            FailureReason::Trap => format!("plugin {name} trapped: {msg}"),
            FailureReason::Malformed => format!("plugin {name} returned a malformed result: {msg}"),
        };
        s.live = None;
        self.event(name.clone(), text);
        self.clear_timers(slot);
        self.recreate(slot);
        PluginError::Call {
            plugin: name,
            reason,
            msg: msg.to_string(),
        }
    }

    /// A new instance for the slot, with configure replayed for each of its sites. A site the
    /// new instance refuses keeps its place and gets its fallback until it is configured again.
    fn recreate(&mut self, slot: usize) {
        let s = &mut self.slots[slot];
        let name = s.name.clone();
        match s.plugin.instantiate(name.clone(), self.set_fn.clone()) {
            Ok(live) => {
                s.live = Some(live);
                s.failures.recreated += 1;
                s.recreate_failed = false;
            }
            Err(e) => {
                if std::mem::replace(&mut s.recreate_failed, true) {
                    return;
                }
                self.event(
                    name.to_string(),
                    format!("plugin {name} cannot be re-created: {e}"),
                );
                return;
            }
        }
        let sites: Vec<(u32, ExtKind, Vec<String>)> = self
            .sites
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.as_ref()
                    .filter(|s| s.slot == slot)
                    .map(|s| (i as u32, s.kind, s.args.clone()))
            })
            .collect();
        let deadline = self.host.config().setup_ticks.max(1);
        for (id, kind, args) in sites {
            let Some(live) = self.slots[slot].live.as_mut() else {
                return;
            };
            crate::host::arm_deadline(&mut live.store, deadline);
            let r = live.bindings.wasp_plugin_plugin().call_configure(
                &mut live.store,
                id,
                wit_kind(kind),
                &args,
            );
            let msg = match r {
                Ok(Ok(())) => continue,
                Ok(Err(msg)) => msg,
                Err(e) => {
                    // A trap in configure while recovering: no instance until the next call.
                    let msg = describe_error(&e, deadline);
                    self.slots[slot].live = None;
                    msg
                }
            };
            self.event(
                name.to_string(),
                format!("plugin {name} re-created, use site {id} refused: {msg}"),
            );
        }
    }

    /// Check and fetch a site for a packet call.
    fn call_site(&self, site: u32, want: &[ExtKind]) -> Option<(usize, Fallback)> {
        let s = self.site(site)?;
        want.contains(&s.kind).then_some((s.slot, s.fallback))
    }
}

/// The clocks while a timer due at `deadline` on clock `c` fires during an advance from `old`
/// to `new`: clock `c` at the deadline (within `old[c]..=new[c]`), the other clock as far
/// before its new value, and never before its old one (and never after its new one: timers
/// fire in deadline order, so the clocks only move forward).
fn due_clocks(old: [u64; 2], new: [u64; 2], c: usize, deadline: u64) -> [u64; 2] {
    let at = deadline.clamp(old[c], new[c]);
    let early = new[c] - at;
    let o = 1 - c;
    let mut now = [0; 2];
    now[c] = at;
    now[o] = new[o].saturating_sub(early).max(old[o]).min(new[o]);
    now
}

fn no_instance(name: &str, msg: String) -> PluginError {
    PluginError::Instantiate {
        plugin: name.to_string(),
        msg,
    }
}

fn kind_name(k: ExtKind) -> &'static str {
    match k {
        ExtKind::Match => "a match",
        ExtKind::Statement => "a statement",
        ExtKind::Stateful => "a stateful expression",
    }
}

fn classify(e: &wasmtime::Error, live: &mut Live) -> FailureReason {
    if std::mem::take(&mut live.store.data_mut().limit.hit) {
        return FailureReason::MemoryLimit;
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => FailureReason::Deadline,
        Some(_) => FailureReason::Trap,
        // Not a trap: e.g. a result that does not lift (a bad enum discriminant).
        None => FailureReason::Malformed,
    }
}

fn describe_error(e: &wasmtime::Error, ticks: u64) -> String {
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => {
            format!("interrupted after {ticks} epoch ticks and as long again of CPU time")
        }
        Some(t) => t.to_string(),
        None => format!("{e}"),
    }
}

/// Where the fallback goes when a call fails.
fn fail_matches(out: &mut [bool], fallback: Fallback) {
    // A match has no verdict of its own: fail closed is the engine's business (it asks
    // `last_call_failed` for a site with fallback drop); the answer here is "no match".
    let _ = fallback;
    out.fill(false);
}

impl Runtime {
    /// One batched call on the slot's instance: pack `pkts` into the flat buffer (the WIT
    /// layout, `window` bytes of each frame), then run `call(live, buffer, count, stride)`
    /// under [`Runtime::guarded`]. The buffer is reused across calls.
    fn call_batch<R>(
        &mut self,
        slot: usize,
        pkts: &[ExtPacket<'_>],
        window: u32,
        call: impl FnOnce(&mut Live, &[u8], u32, u32) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let stride = pack::batch_stride(pkts, window, pack::stride(window));
        let mut buf = std::mem::take(&mut self.buf);
        pack::pack(&mut buf, pkts, window, stride);
        let n = pkts.len() as u32;
        let r = self.guarded(slot, |live| call(live, &buf, n, stride as u32));
        self.buf = buf;
        r
    }

    /// A failed `matches`/`apply` call (its packets already have the fallback): remember it
    /// for `last_call_failed`, and count, report and re-create unless there was no instance.
    fn call_failed(&mut self, slot: usize, e: CallError, what: &str) {
        self.last_failed = true;
        if let CallError::Failed(reason, msg) = e {
            self.fail(slot, reason, &format!("{what}: {msg}"));
        }
    }
}

impl Runtime {
    /// Whether use site `site` (of `slot`) is backing off: then this call is skipped (and
    /// counted).
    fn backing_off(&mut self, site: u32, slot: usize) -> bool {
        let Some(s) = self.sites.get_mut(site as usize).and_then(Option::as_mut) else {
            return false;
        };
        if s.skip == 0 {
            return false;
        }
        s.skip -= 1;
        self.slots[slot].failures.skipped += 1;
        true
    }

    /// A call of use site `site` worked: its failure streak and back-off end.
    fn call_ok(&mut self, site: u32) {
        if let Some(s) = self.sites.get_mut(site as usize).and_then(Option::as_mut)
            && s.streak != 0
        {
            (s.streak, s.next_backoff) = (0, 0);
        }
    }

    /// A call of use site `site` failed: count the streak, and back off when it is long
    /// enough (an event says for how many calls).
    fn site_failed(&mut self, site: u32) {
        let b = self.backoff;
        let Some(s) = self.sites.get_mut(site as usize).and_then(Option::as_mut) else {
            return;
        };
        s.streak = s.streak.saturating_add(1);
        if s.streak < b.after.max(1) {
            return;
        }
        let n = match s.next_backoff {
            0 => b.first,
            n => n,
        }
        .min(b.max);
        s.skip = n;
        s.next_backoff = n.saturating_mul(2).min(b.max);
        let streak = s.streak;
        let name = self.slots[s.slot].name.to_string();
        self.event(
            name.clone(),
            format!(
                "plugin {name}: use site {site} failed {streak} calls in a row, backing off: its next {n} calls get the fallback without calling the plugin"
            ),
        );
    }

    /// `plugin.matches` on `pkts` with the plugin's whole window.
    fn matches_whole(
        &mut self,
        slot: usize,
        site: u32,
        pkts: &[ExtPacket<'_>],
        out: &mut [bool],
    ) -> Result<(), CallError> {
        let window = self.slots[slot].plugin.info().window;
        let res = self.call_batch(slot, pkts, window, |live, buf, n, stride| {
            live.bindings
                .wasp_plugin_plugin()
                .call_matches(&mut live.store, site, buf, n, stride)
        })?;
        pack::check_matches(&res, out).map_err(|m| CallError::Failed(FailureReason::Malformed, m))
    }

    /// `fast-match.matches-first` on `pkts` (at most 64) with the plugin's first window, then
    /// `plugin.matches` with the whole window for the packets it marked `more`.
    fn matches_first(
        &mut self,
        slot: usize,
        site: u32,
        pkts: &[ExtPacket<'_>],
        first: u32,
        out: &mut [bool],
    ) -> Result<(), CallError> {
        if self.batch_area
            && self.slots[slot]
                .live
                .as_ref()
                .is_some_and(|l| l.area_fns.is_some() && l.area.is_none())
        {
            // The first match of this instance: ask for its batch area (a failure is this
            // call's).
            self.guarded(slot, |live| live.ask_area(first))?;
        }
        let area = self.batch_area
            && self.slots[slot]
                .live
                .as_ref()
                .is_some_and(|l| l.area().is_some());
        let (hits, more) = if area {
            let stride = pack::batch_stride(pkts, first, pack::stride(first));
            self.guarded(slot, |live| {
                let Some((f, area)) = live.area() else {
                    wasmtime::bail!("area-match is not exported");
                };
                let f = area::typed(f);
                let count = AreaCount {
                    pkts,
                    window: first,
                    stride,
                    area,
                };
                Ok(f.call(&mut live.store, (site, count, stride as u32))?.0)
            })?
        } else {
            self.call_batch(slot, pkts, first, |live, buf, n, stride| {
                let f = live
                    .matches_first
                    .ok_or_else(|| wasmtime::format_err!("matches-first is not exported"))?;
                // The type was checked at load; this repeats it (a few comparisons).
                let f = f.typed::<MatchesFirstParams<'_>, MatchesFirstResults>(&live.store)?;
                Ok(f.call(&mut live.store, (site, buf, n, stride))?.0)
            })?
        };
        pack::check_first(hits, more, out)
            .map_err(|m| CallError::Failed(FailureReason::Malformed, m))?;
        if more == 0 {
            return Ok(());
        }
        let again: Vec<usize> = (0..pkts.len()).filter(|i| more >> i & 1 == 1).collect();
        let sub: Vec<ExtPacket<'_>> = again.iter().map(|&i| pkts[i]).collect();
        let mut answers = vec![false; sub.len()];
        self.matches_whole(slot, site, &sub, &mut answers)?;
        for (&i, a) in again.iter().zip(answers) {
            out[i] = a;
        }
        Ok(())
    }
}

fn fail_apply(verdicts: &mut [ExtVerdict], fallback: Fallback) {
    verdicts.fill(match fallback {
        Fallback::Absent => ExtVerdict::Continue,
        Fallback::Drop => ExtVerdict::Drop,
    });
}

impl Extensions for Runtime {
    fn matches(&mut self, site: u32, pkts: &[ExtPacket<'_>], out: &mut [bool]) {
        self.last_failed = false;
        let Some((slot, fallback)) = self.call_site(site, &[ExtKind::Match]) else {
            return fail_matches(out, Fallback::Absent);
        };
        if pkts.is_empty() {
            return;
        }
        if self.backing_off(site, slot) {
            self.last_failed = true;
            return fail_matches(out, fallback);
        }
        let r = match self.slots[slot].plugin.info().first_window {
            Some(first) if self.fast_match && pkts.len() <= pack::FIRST_MAX => {
                self.matches_first(slot, site, pkts, first, out)
            }
            _ => self.matches_whole(slot, site, pkts, out),
        };
        match r {
            Ok(()) => self.call_ok(site),
            Err(e) => {
                fail_matches(out, fallback);
                self.call_failed(slot, e, &format!("matches at use site {site}"));
                self.site_failed(site);
            }
        }
    }

    fn apply(
        &mut self,
        site: u32,
        pkts: &[ExtPacket<'_>],
        verdicts: &mut [ExtVerdict],
        edits: &mut Vec<(usize, ExtEdit)>,
    ) {
        self.last_failed = false;
        let Some((slot, fallback)) = self.call_site(site, &[ExtKind::Statement, ExtKind::Stateful])
        else {
            return fail_apply(verdicts, Fallback::Absent);
        };
        if pkts.is_empty() {
            return;
        }
        if self.backing_off(site, slot) {
            self.last_failed = true;
            return fail_apply(verdicts, fallback);
        }
        let window = self.slots[slot].plugin.info().window;
        let r = self
            .call_batch(slot, pkts, window, |live, buf, n, stride| {
                live.bindings
                    .wasp_plugin_plugin()
                    .call_apply(&mut live.store, site, buf, n, stride)
            })
            .and_then(|res| {
                pack::check_apply(&res.verdicts, res.edits, pkts, verdicts, edits)
                    .map_err(|m| CallError::Failed(FailureReason::Malformed, m))
            });
        match r {
            Ok(()) => self.call_ok(site),
            Err(e) => {
                fail_apply(verdicts, fallback);
                self.call_failed(slot, e, &format!("apply at use site {site}"));
                self.site_failed(site);
            }
        }
    }

    fn advance(&mut self, now_ns: u64) {
        self.advance_clocks(now_ns, now_ns);
    }

    fn last_call_failed(&mut self) -> bool {
        self.last_failed
    }
}
