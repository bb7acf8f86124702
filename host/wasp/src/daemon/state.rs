//! The daemon's control side: the running ruleset (the model, as `wasp ctl list` shows it),
//! its generation, the plugin host, and the links to every worker. Changes build every
//! worker's new engine and plugin instances first (so a change that fails changes nothing),
//! then hand them over at the workers' next vector boundary.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use wasp_conntrack::Conntrack;
use wasp_core::carry::CounterCarry;
use wasp_core::{CounterSource, Engine};
use wasp_ctl::proto::ResetRequest;
use wasp_gateway::Netfilter;
use wasp_plugin::{HostConfig, PluginHost, SharedTimers};
use wasp_ruleset::Ruleset;
use wasp_ruleset::model::Stmt;

/// The daemon's deadline of a plugin call on the packet path, in ms (`wasp run
/// --plugin-deadline`; the epoch ticks are 1 ms). A call still running after this much wall
/// time goes on only while it has used less than as much again of the worker's CPU time (a
/// worker descheduled on a loaded machine does not lose its vector; see
/// `wasp_plugin::HostConfig::deadline_ticks`): a call that loops gives its vector the fallback
/// within twice this, 6 ms, and the ring keeps that little (5 kpps: 30 frames).
pub const DEFAULT_PLUGIN_DEADLINE_MS: u64 = 3;

use super::events::{Event, EventBus};
use super::mailbox::ask_all;
use super::reset::Reset;
use super::stats::StatsSnapshot;
use super::worker::{Clock, WorkerLinks};
use crate::datapath::{Bundle, Clocks, HostSlot, Shared, build};
use crate::error::Error;
use crate::plugins::{PluginCache, RuntimeCounters};

/// How long the control side waits for a worker to answer (a worker finishes its vector
/// first; a plugin call is bounded by its deadline).
pub const WORKER_ANSWER: Duration = Duration::from_secs(2);

/// The running configuration.
struct Current {
    ruleset: Ruleset,
    generation: u64,
    /// Compiled from `ruleset` on the control side: names, counter use sites, listing.
    engine: Engine,
    /// Conntrack and the ruleset's flowtables, shared by the workers (when the ruleset takes
    /// the IP path).
    netfilter: Option<Netfilter>,
    /// The kernel back-end's view of each named set that a batch checked elements against,
    /// kept for the next batch (`wasp_ruleset::apply_elements`); none for the sets the
    /// control engine holds in the same back-end, which element batches check against
    /// (`Engine::set_oracle`).
    shadows: wasp_ruleset::SetShadows,
}

/// The daemon's shared state (one per `wasp run`).
pub struct Daemon {
    current: Arc<Mutex<Current>>,
    host: PluginHost,
    cache: Mutex<PluginCache>,
    /// One per worker, in worker order.
    pub workers: Vec<WorkerLinks>,
    /// `wasp ctl monitor` subscribers.
    pub events: Arc<EventBus>,
    /// The data path's clock.
    pub clock: Clock,
    /// Where the ruleset came from (for messages).
    pub ruleset_path: PathBuf,
    /// The connection table: one for the daemon's life, whatever the ruleset (as the
    /// kernel's, which a ruleset reload leaves alone).
    pub conntrack: Arc<Conntrack>,
    /// The offload blocks every flowtable gets (`wasp run --hw-offload`, `--offload-plugin`),
    /// also those of later rulesets, in the order given.
    offload: Mutex<Vec<Arc<dyn wasp_flowtable::OffloadBlock>>>,
    /// Element batches applied as set transactions ([`Daemon::set_transactions`]).
    set_txns: std::sync::atomic::AtomicU64,
    /// Tells the indexer ([`spawn_indexer`]) that a set transaction happened.
    indexer: std::sync::mpsc::Sender<()>,
    /// SIGHUP reloads that applied, that were refused, and whether the last one applied.
    reloads: [std::sync::atomic::AtomicU64; 2],
    last_reload_ok: std::sync::atomic::AtomicBool,
    /// The devices the daemon has ports on ([`Daemon::set_ports`]); `None` checks nothing.
    ports: Mutex<Option<Vec<String>>>,
}

/// What one worker's instance of a plugin lists for one use site ([`Daemon::plugin_states`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteState {
    /// The worker's index.
    pub worker: usize,
    /// Where the use is written, `FILE:LINE:COL`.
    pub at: String,
    /// The plugin's name.
    pub plugin: String,
    /// Its entries as text (`name value` pairs, then the plugin's text in parentheses).
    pub state: Vec<String>,
}

/// How long element batches must pause before the indexer builds the field index of the sets
/// they changed anew (during a stream of changes the index's overlay keeps lookups exact and
/// within a few percent of a fresh index: `wasp_sets::pipapo::rebuild_at`).
pub const INDEX_QUIET: Duration = Duration::from_millis(50);

/// Lock `m`, taking it over from a thread that panicked while holding it.
fn lock_current(m: &Mutex<Current>) -> MutexGuard<'_, Current> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One copy of a large set's elements in the daemon, as in the kernel: the model lists them
/// from the program's compiled sets ([`Engine::hold_elements`]; call after every change of
/// `engine` or `ruleset`), and keeps the text of large files packed for messages.
fn one_copy(engine: &Engine, ruleset: &mut Ruleset) {
    engine.hold_elements(ruleset);
    ruleset.pack_sources();
}

/// One pass of the indexer: the sets left with an overlay, their index built anew and swapped
/// in where they are still the running copies; the replaced copies dropped here.
fn reindex(current: &Mutex<Current>, mailboxes: &[Arc<super::mailbox::Mailbox>]) {
    let Some(work) = lock_current(current).engine.lagging_sets() else {
        return;
    };
    let fresh = work.reindexed();
    drop(work);
    let mut retired = Vec::new();
    let acks: Vec<_> = {
        let mut cur = lock_current(current);
        let old = cur.engine.apply_set_update(&fresh);
        if old.is_empty() {
            return;
        }
        retired.push(old);
        // The model lists the held sets from the new copies (the old ones go).
        let Current {
            engine, ruleset, ..
        } = &mut *cur;
        one_copy(engine, ruleset);
        mailboxes
            .iter()
            .map(|mb| {
                let (tx, rx) = std::sync::mpsc::channel();
                let f = fresh.clone();
                mb.post(Box::new(move |ctx| {
                    let _ = tx.send(ctx.dp.engine.apply_set_update(&f));
                }));
                rx
            })
            .collect()
    };
    for rx in acks {
        if let Ok(old) = rx.recv_timeout(WORKER_ANSWER) {
            retired.push(old);
        }
    }
}

/// The indexer: once element batches pause for [`INDEX_QUIET`], it builds the field index of
/// every set they left with an overlay anew (a copy, outside the lock and off the data path:
/// `wasp_core::SetUpdate::reindexed`) and swaps the copies into the control engine and every
/// worker between two vectors, where no newer change came first; the replaced copies are
/// dropped on this thread, and the memory the batches' copies used goes back to the system.
/// Ends when the daemon is dropped.
fn spawn_indexer(
    current: Arc<Mutex<Current>>,
    mailboxes: Vec<Arc<super::mailbox::Mailbox>>,
) -> std::sync::mpsc::Sender<()> {
    use std::sync::mpsc::RecvTimeoutError;
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let run = move || {
        while rx.recv().is_ok() {
            loop {
                match rx.recv_timeout(INDEX_QUIET) {
                    Ok(()) => {}
                    Err(RecvTimeoutError::Timeout) => break,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
            reindex(&current, &mailboxes);
            // The batches are over for now: what their copies used goes back to the system
            // (the control socket skips this after each set transaction, see
            // `ReleaseAfterChange`).
            wasp_io::release_free_heap();
        }
    };
    if let Err(e) = std::thread::Builder::new()
        .name("wasp-indexer".into())
        .spawn(run)
    {
        tracing::warn!("no indexer thread ({e}): changed sets keep their index overlay");
    }
    tx
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("workers", &self.workers.len())
            .field("ruleset", &self.ruleset_path)
            .finish_non_exhaustive()
    }
}

/// One counter use site's counts: (element id, packets, bytes) per entry.
type SiteCounts = (u32, Vec<(u32, u64, u64)>);

/// Counts summed over workers, by counter use site.
#[derive(Debug, Default)]
struct Summed(HashMap<u32, Vec<(u32, u64, u64)>>);

impl Summed {
    /// The sum of the workers' counts.
    fn of(per: Vec<Vec<SiteCounts>>) -> Summed {
        let mut sum: HashMap<u32, HashMap<u32, (u64, u64)>> = HashMap::new();
        for worker in per {
            for (site, counts) in worker {
                let m = sum.entry(site).or_default();
                for (elem, p, b) in counts {
                    let e = m.entry(elem).or_default();
                    e.0 += p;
                    e.1 += b;
                }
            }
        }
        Summed(
            sum.into_iter()
                .map(|(site, m)| {
                    let mut v: Vec<_> = m.into_iter().map(|(e, (p, b))| (e, p, b)).collect();
                    v.sort_unstable();
                    (site, v)
                })
                .collect(),
        )
    }
}

impl CounterSource for Summed {
    fn counts(&mut self, site: u32) -> Vec<(u32, u64, u64)> {
        self.0.get(&site).cloned().unwrap_or_default()
    }

    fn reset(&mut self, _: u32) {}
}

/// Zero every count written in `r` (rules' `counter`, named counters, named and anonymous set
/// elements').
fn zero_counts(r: &mut Ruleset) {
    for t in &mut r.tables {
        for c in &mut t.chains {
            for rule in &mut c.rules {
                for s in &mut rule.stmts {
                    if let Stmt::Counter { packets, bytes } = s {
                        (*packets, *bytes) = (0, 0);
                    }
                }
                for e in rule.anonymous_sets_mut().flatten() {
                    e.set_counts(0, 0);
                }
            }
        }
        for o in &mut t.counters {
            (o.packets, o.bytes) = (0, 0);
        }
        for s in &mut t.sets {
            // Held elements carry no counts: only those added since can.
            let counted = |e: &wasp_ruleset::model::SetElem| e.packets() != 0 || e.bytes() != 0;
            if s.elements.added().iter().any(counted) {
                for e in s.elements.to_mut() {
                    e.set_counts(0, 0);
                }
            }
        }
    }
}

/// `fresh` (a reloaded file) with the elements of `running` that were added at run time (their
/// source is not a file `fresh` was read from) put back into the sets `fresh` declares with
/// the same name and key type, unless `fresh` already holds their key; `None` when there is
/// no such element.
fn with_runtime_elements(running: &Ruleset, fresh: &Ruleset) -> Option<Ruleset> {
    // The files the reload read: its own command text and what it included, transitively
    // (an included file comes after the file that includes it).
    let mut read: std::collections::HashSet<wasp_ruleset::model::FileId> =
        std::collections::HashSet::new();
    for f in &fresh.sources {
        if f.path.as_os_str() == "<reload>"
            || f.included_from.is_some_and(|sp| read.contains(&sp.file))
        {
            read.insert(f.id);
        }
    }
    let files: std::collections::HashSet<&std::path::Path> = fresh
        .sources
        .iter()
        .filter(|f| read.contains(&f.id))
        .map(|f| f.path.as_path())
        .collect();
    let from_file = |e: &wasp_ruleset::model::SetElem| {
        running
            .source(e.span.file)
            .is_some_and(|f| files.contains(f.path.as_path()))
    };
    let mut out = fresh.clone();
    let mut added = false;
    for (ti, t) in out.tables.iter_mut().enumerate() {
        let Some(old_t) = running
            .tables
            .iter()
            .find(|o| o.family == t.family && o.name == t.name)
        else {
            continue;
        };
        for (si, set) in t.sets.iter_mut().enumerate() {
            let Some(old) = old_t.sets.iter().find(|o| {
                o.name == set.name
                    && o.key == set.key
                    && o.flags == set.flags
                    && o.is_map == set.is_map
                    && o.data == set.data
            }) else {
                continue;
            };
            // `out` is a copy of `fresh`: the same set there holds the file's keys. Keys are
            // compared as listed (an element the program holds reads back as its listed form).
            let mut held: std::collections::HashSet<String> = fresh.tables[ti].sets[si]
                .elements
                .iter()
                .map(|e| wasp_ruleset::element_key_text(&e))
                .collect();
            let mut more = Vec::new();
            for e in old.elements.iter().filter(|e| !from_file(e)) {
                if held.insert(wasp_ruleset::element_key_text(&e)) {
                    more.push(e.into_owned());
                }
            }
            added |= !more.is_empty();
            set.elements.to_mut().extend(more);
        }
    }
    added.then_some(out)
}

impl Daemon {
    /// [`Daemon::with_host`] with the default plugin limits and the daemon's packet-path deadline
    /// ([`DEFAULT_PLUGIN_DEADLINE_MS`], as `wasp run`).
    ///
    /// # Errors
    /// As [`Daemon::with_host`].
    pub fn new(
        ruleset: Ruleset,
        ruleset_path: PathBuf,
        links: Vec<WorkerLinks>,
        events: Arc<EventBus>,
        clock: Clock,
    ) -> Result<(Daemon, Vec<Bundle>), Error> {
        Self::with_host(
            ruleset,
            ruleset_path,
            links,
            events,
            clock,
            HostConfig {
                deadline_ticks: DEFAULT_PLUGIN_DEADLINE_MS,
                ..HostConfig::default()
            },
        )
    }

    /// The state for `ruleset` (generation 1) and the first bundle of each of `links`'
    /// workers, with a plugin host of `host`'s limits.
    ///
    /// # Errors
    /// [`Error::Ruleset`] for a ruleset that does not compile or whose plugins refuse it,
    /// [`Error::Plugin`] when the plugin host cannot start.
    pub fn with_host(
        ruleset: Ruleset,
        ruleset_path: PathBuf,
        links: Vec<WorkerLinks>,
        events: Arc<EventBus>,
        clock: Clock,
        host: HostConfig,
    ) -> Result<(Daemon, Vec<Bundle>), Error> {
        let host = PluginHost::new(host).map_err(|e| Error::Plugin(e.to_string()))?;
        let mut engine = Engine::compile(&ruleset)?;
        let now = clock.now_ns();
        engine.set_epoch(now);
        let mut ruleset = ruleset;
        one_copy(&engine, &mut ruleset);
        let current = Arc::new(Mutex::new(Current {
            ruleset,
            generation: 1,
            engine,
            netfilter: None,
            shadows: wasp_ruleset::SetShadows::default(),
        }));
        let indexer = spawn_indexer(
            current.clone(),
            links.iter().map(|w| w.mailbox.clone()).collect(),
        );
        let d = Daemon {
            current,
            host,
            cache: Mutex::new(PluginCache::default()),
            workers: links,
            events,
            clock,
            ruleset_path,
            conntrack: Arc::new(Conntrack::new(wasp_conntrack::Config {
                seed: crate::datapath::daemon_seed(),
                ..wasp_conntrack::Config::default()
            })),
            offload: Mutex::new(Vec::new()),
            set_txns: std::sync::atomic::AtomicU64::new(0),
            indexer,
            reloads: Default::default(),
            last_reload_ok: std::sync::atomic::AtomicBool::new(true),
            ports: Mutex::new(None),
        };
        let bundles = {
            let mut cur = d.lock();
            let (b, nf) = d.bundles(&cur.ruleset, 1, None, &cur.engine, now)?;
            cur.netfilter = nf;
            b
        };
        Ok((d, bundles))
    }

    fn lock(&self) -> MutexGuard<'_, Current> {
        lock_current(&self.current)
    }

    /// One bundle per worker for `ruleset`: worker 0 starts from the counts written in the
    /// ruleset, the others from zero (counts are summed over workers when read); and the
    /// netfilter state the bundles share (flowtables of `prev` that the ruleset still declares
    /// keep their flows).
    ///
    /// Every worker's engine uses `stateful` (the control engine's, compiled from `ruleset`)
    /// for its `limit` buckets and `quota` counts: one state across the workers, as in the
    /// kernel, that the control side reads for listings; and its compiled sets (one copy for
    /// every engine: element batches replace them in all at once). `now` (the packet clock)
    /// is the engines' epoch, as the control engine's.
    fn bundles(
        &self,
        ruleset: &Ruleset,
        generation: u64,
        prev: Option<&Netfilter>,
        control: &Engine,
        now: u64,
    ) -> Result<(Vec<Bundle>, Option<Netfilter>), Error> {
        let stateful = control.stateful();
        // Workers after the first start from zero (one copy of the ruleset, made only when
        // there is such a worker).
        let zeroed = (self.workers.len() > 1).then(|| {
            let mut z = ruleset.clone();
            zero_counts(&mut z);
            z
        });
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let events = self.events.clone();
        let mut shared = Shared {
            host: HostSlot::Given(&self.host),
            cache: &mut cache,
            // One timer per key across the workers (an IDLETIMER label expires once), new
            // with each generation as the instances are.
            timers: Some(SharedTimers::new(self.workers.len().max(1))),
            stateful: Some(stateful),
            conntrack: self.conntrack.clone(),
            prev: prev.cloned(),
            flow_events: Some(Arc::new(move |text| {
                events.publish(Event {
                    kind: "flow",
                    text,
                    json: None,
                });
            })),
            netfilter: None,
        };
        let clocks = Clocks {
            epoch_ns: Some(now),
            wall_epoch_ns: self.clock.wall_epoch_ns(),
            now_ns: now,
        };
        let bundles = (0..self.workers.len())
            .map(|i| {
                let r = match (i, &zeroed) {
                    (0, _) | (_, None) => ruleset,
                    (_, Some(z)) => z,
                };
                let mut b = build(r, i, generation, clocks, true, &mut shared)?;
                b.engine.share_sets(control);
                Ok(b)
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let nf = shared.netfilter;
        if let Some(n) = &nf {
            for b in self
                .offload
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
            {
                n.register_block(b);
            }
        }
        Ok((bundles, nf))
    }

    /// Counts of every counter summed over the workers, by use site of the current engine.
    fn summed(&self) -> Result<Summed, Error> {
        let per = ask_all(&self.mailboxes(), WORKER_ANSWER, |ctx| -> Vec<SiteCounts> {
            let sites: Vec<u32> = ctx.dp.engine.counter_uses().map(|(s, _)| s).collect();
            match ctx.dp.runtime.as_mut() {
                Some(rt) => {
                    let mut src = RuntimeCounters(rt);
                    sites.into_iter().map(|s| (s, src.counts(s))).collect()
                }
                None => Vec::new(),
            }
        })
        .map_err(|w| Error::Daemon(format!("worker {w} did not answer")))?;
        Ok(Summed::of(per))
    }

    fn mailboxes(&self) -> Vec<Arc<super::mailbox::Mailbox>> {
        self.workers.iter().map(|w| w.mailbox.clone()).collect()
    }

    /// The running ruleset with every counter's current count (summed over workers), and its
    /// generation.
    ///
    /// # Errors
    /// [`Error::Daemon`] when a worker does not answer.
    pub fn ruleset(&self) -> Result<(Ruleset, u64), Error> {
        let cur = self.lock();
        let mut r = cur.ruleset.clone();
        let mut sum = self.summed()?;
        cur.engine.store_counters(&mut r, &mut sum);
        let now = self.clock.now_ns();
        cur.engine.store_dynamic_elements(&mut r, now);
        cur.engine.age_timed_elements(&cur.ruleset, &mut r, now);
        Ok((r, cur.generation))
    }

    /// Replace the running ruleset by `new` (a whole ruleset, or the running one with a batch
    /// applied): every worker's engine and plugins are built first; if any of that fails the
    /// running configuration stays as it was. Counters and quotas that `new` keeps (same
    /// table, rule, object or element: [`wasp_core::carry`]) continue counting exactly: each
    /// worker moves its own counts when it switches, between two vectors, so no packet is
    /// lost or counted twice; what `new` adds starts from the counts it declares. Returns the
    /// new generation. (The caller tells `wasp ctl monitor` what changed: it has the commands.)
    ///
    /// # Errors
    /// [`Error::Ruleset`] at the place in `new` that cannot run; [`Error::Daemon`] when a
    /// worker does not answer (it takes the new ruleset at its next vector).
    pub fn replace(&self, new: Ruleset) -> Result<u64, Error> {
        let mut cur = self.lock();
        self.replace_locked(&mut cur, new)
    }

    /// `wasp ctl -f`: apply `text` (a ruleset file or a batch of commands, as `nft -f`; `name`
    /// for messages) to the running ruleset, all or nothing, as [`Daemon::replace`]. Changes
    /// are serialized: each applies to what the one before made.
    ///
    /// # Errors
    /// [`Error::Ruleset`] for text that does not parse or apply (file:line:col) or a result
    /// that cannot run; [`Error::Daemon`] as [`Daemon::replace`].
    ///
    /// A batch of element commands only (`add`/`create`/`delete`/`destroy element`, `flush
    /// set`) changes the running sets in place when it can (a set transaction); any
    /// other batch builds every worker's program anew.
    pub fn apply(&self, text: &str, name: &str) -> Result<u64, Error> {
        self.apply_reporting(text, name, false).map(|(g, _)| g)
    }

    /// [`Daemon::apply`], and with `changes` also what the batch changed, as `nft monitor`
    /// and `nft -e` report it ([`wasp_ctl::changes`]; worked out from the ruleset before and
    /// after, so it costs a walk of both).
    ///
    /// # Errors
    /// As [`Daemon::apply`].
    pub fn apply_reporting(
        &self,
        text: &str,
        name: &str,
        changes: bool,
    ) -> Result<(u64, Vec<wasp_ctl::changes::Change>), Error> {
        let mut cur = self.lock();
        self.drop_expired_locked(&mut cur)?;
        let mut made = Vec::new();
        if let Some(g) = self.apply_elements(&mut cur, text, name, changes.then_some(&mut made))? {
            return Ok((g, made));
        }
        // The sets' views go with the new ruleset; on an error they are dropped.
        let mut shadows = std::mem::take(&mut cur.shadows);
        let (new, inserted) =
            wasp_ruleset::apply_batch_noting_inserts(&cur.ruleset, text, name, &mut shadows)?;
        if changes {
            made = wasp_ctl::changes::diff(&cur.ruleset, &new, &inserted);
        }
        let g = self.replace_locked(&mut cur, new)?;
        // The sets the program holds answer the next element batches' checks themselves.
        shadows.forget_checked_by(&cur.ruleset.tables, &cur.engine.set_oracle());
        cur.shadows = shadows;
        Ok((g, made))
    }

    /// A batch of element commands as set transactions: the elements are checked against the
    /// control engine's sets ([`Engine::set_oracle`]), the model changes in place, the
    /// control engine makes new copies of the changed sets ([`Engine::set_update`]), and every
    /// worker swaps them in at its next vector boundary; the rest of the program, its counters
    /// and the plugins stay as they are, and lookups never wait. `Ok(None)` with nothing
    /// changed when the batch holds another command or a change that needs a whole compile.
    ///
    /// # Errors
    /// As [`Daemon::apply`] for a batch that does not apply (nothing changed).
    fn apply_elements(
        &self,
        cur: &mut Current,
        text: &str,
        name: &str,
        changes: Option<&mut Vec<wasp_ctl::changes::Change>>,
    ) -> Result<Option<u64>, Error> {
        let Current {
            ruleset,
            shadows,
            engine,
            generation,
            ..
        } = cur;
        // Elements of the sets the program holds are checked against it (no copy of them).
        let oracle = Box::new(engine.set_oracle());
        let Some(txn) = wasp_ruleset::apply_elements_against(ruleset, shadows, oracle, text, name)?
        else {
            return Ok(None);
        };
        let Some(update) = engine.set_update(&txn, self.clock.now_ns()) else {
            txn.rollback();
            return Ok(None);
        };
        if let Some(out) = changes {
            *out = wasp_ctl::changes::element_changes(txn.ruleset(), txn.ops());
        }
        txn.commit();
        // Every replaced set is dropped here, on the control side, when the last worker has
        // handed its copy back (a worker never frees a large set between two vectors).
        let mut retired = vec![engine.apply_set_update(&update)];
        // The model lists the sets the program holds from their new copies.
        one_copy(engine, ruleset);
        // Sets that the packet path changes live in the state the engines share: once.
        engine.apply_dynamic_update(&update);
        // A view made where the program could not decide is a copy of the set: not kept.
        shadows.forget_checked_by(&ruleset.tables, &engine.set_oracle());
        *generation += 1;
        self.set_txns
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let g = *generation;
        let acks: Vec<_> = self
            .workers
            .iter()
            .map(|w| {
                let (tx, rx) = std::sync::mpsc::channel();
                let u = update.clone();
                w.mailbox.post(Box::new(move |ctx| {
                    let old = ctx.dp.engine.apply_set_update(&u);
                    ctx.dp.generation = g;
                    let _ = tx.send(old);
                }));
                rx
            })
            .collect();
        for (i, rx) in acks.into_iter().enumerate() {
            retired.push(rx.recv_timeout(WORKER_ANSWER).map_err(|_| {
                Error::Daemon(format!(
                    "worker {i} did not take the new sets in time (it will at its next vector)"
                ))
            })?);
        }
        drop(retired);
        // Once the batches pause, the changed sets' index is built anew off the data path.
        let _ = self.indexer.send(());
        Ok(Some(g))
    }

    /// SIGHUP (`systemctl reload`): load the ruleset file the daemon was started with again,
    /// as `nft -f` of a file that starts with `flush ruleset` (nftables.service's reload): every
    /// table is replaced by the file's (new objects: their counters start from what the file
    /// says, as in the kernel). The connection table and the flowtables' flows the new
    /// ruleset still declares are kept, and so are the elements added at run time (`wasp ctl`
    /// element commands and batches: elements that did not come from the file or its includes)
    /// to sets the new file still declares with the same key; when those no longer fit the new
    /// set (an interval overlap) the reload goes on without them, and says so in its result.
    /// All or nothing: a file that does not load leaves the running configuration as it was.
    /// Returns the new generation and what was dropped, if anything.
    ///
    /// # Errors
    /// [`Error::Ruleset`] at the file's line and column; [`Error::Daemon`] when the path
    /// cannot be named in an `include` or a worker does not answer.
    pub fn reload(&self) -> Result<(u64, Option<String>), Error> {
        let r = self.reload_file();
        let ok = r.is_ok();
        self.reloads[usize::from(!ok)].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.last_reload_ok
            .store(ok, std::sync::atomic::Ordering::Relaxed);
        r
    }

    /// Reloads that applied, reloads that were refused, and whether the last one applied
    /// (`true` before any), for metrics.
    pub fn reload_counts(&self) -> (u64, u64, bool) {
        let l = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        (
            l(&self.reloads[0]),
            l(&self.reloads[1]),
            self.last_reload_ok
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// The generation every worker runs (the lowest of theirs), read without a lock.
    pub fn generation(&self) -> u64 {
        self.workers
            .iter()
            .map(|w| {
                w.stats
                    .generation
                    .load(std::sync::atomic::Ordering::Relaxed)
            })
            .min()
            .unwrap_or(0)
    }

    /// The names a trace line shows (tables, chains, rules as listed, plugin use sites) of
    /// the running ruleset, and its generation.
    pub fn trace_names(&self) -> (u64, crate::names::Names) {
        let cur = self.lock();
        let mut names = crate::names::Names::new(&cur.ruleset);
        names.learn_rule_texts(&wasp_ruleset::print_ruleset(&cur.ruleset, true));
        names.learn_sites(&cur.engine);
        (cur.generation, names)
    }

    /// The connection table.
    pub fn conntrack(&self) -> &Arc<Conntrack> {
        &self.conntrack
    }

    /// [`Daemon::reload`]'s work.
    fn reload_file(&self) -> Result<(u64, Option<String>), Error> {
        let path = self.ruleset_path.display().to_string();
        if path.contains('"') || path.contains('\n') {
            return Err(Error::Daemon(format!(
                "{path}: a ruleset path with a quote or newline cannot be reloaded"
            )));
        }
        let mut cur = self.lock();
        // Elements whose timeout ran out are not carried over as elements added at run time.
        self.drop_expired_locked(&mut cur)?;
        // `include` reads the file with its own name in messages (file:line:col).
        let text = format!("flush ruleset\ninclude \"{path}\"\n");
        let fresh = wasp_ruleset::apply_batch(&cur.ruleset, &text, "<reload>")?;
        if let Some(merged) = with_runtime_elements(&cur.ruleset, &fresh) {
            match self.replace_locked(&mut cur, merged) {
                Ok(g) => return Ok((g, None)),
                Err(Error::Ruleset(e)) => {
                    let g = self.replace_locked(&mut cur, fresh)?;
                    let why = format!(
                        "the elements added at run time do not fit the reloaded sets and were dropped: {e}"
                    );
                    return Ok((g, Some(why)));
                }
                Err(e) => return Err(e),
            }
        }
        Ok((self.replace_locked(&mut cur, fresh)?, None))
    }

    /// `wasp ctl -c`: whether `text` would apply ([`Daemon::apply`]): parsed, applied to a
    /// copy of the running ruleset and compiled; nothing changes.
    ///
    /// # Errors
    /// As [`Daemon::apply`]'s, for text that would not apply.
    pub fn check(&self, text: &str, name: &str) -> Result<(), Error> {
        let base = self.lock().ruleset.clone();
        let new = wasp_ruleset::apply_batch(&base, text, name)?;
        Engine::compile(&new)?;
        Ok(())
    }

    /// How many batches applied as set transactions, changing the running sets in place
    /// (the others compiled the whole ruleset).
    pub fn set_transactions(&self) -> u64 {
        self.set_txns.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Changes the running sets' field indexes carry as overlays (0 once the indexer has
    /// built them anew, [`INDEX_QUIET`] after the last element batch).
    pub fn index_lag(&self) -> usize {
        self.lock().engine.index_lag()
    }

    /// Take the elements whose timeout ran out out of the running ruleset (a whole compile,
    /// as [`Daemon::replace`]), so that a batch sees the sets as the kernel's lookups and
    /// element commands see them: such an element can be added again. Nothing happens when
    /// none has run out.
    fn drop_expired_locked(&self, cur: &mut Current) -> Result<(), Error> {
        if !cur
            .engine
            .has_expired_elements(&cur.ruleset, self.clock.now_ns())
        {
            return Ok(());
        }
        let same = cur.ruleset.clone();
        self.replace_locked(cur, same)?;
        // The sets' views held the elements that went.
        cur.shadows.clear();
        Ok(())
    }

    fn replace_locked(&self, cur: &mut Current, mut new: Ruleset) -> Result<u64, Error> {
        let now = self.clock.now_ns();
        // Elements with a timeout keep the time they have left (not their whole timeout
        // again), and those whose time ran out go, as in the kernel, where a change of the
        // ruleset leaves set elements alone.
        cur.engine.age_timed_elements(&cur.ruleset, &mut new, now);
        let mut engine = Engine::compile(&new)?;
        self.check_ports(&engine)?;
        engine.set_epoch(now);
        engine.carry_quotas(&cur.engine, &cur.ruleset, &new);
        engine.carry_dynamic(&cur.engine, &cur.ruleset, &new, now);
        let carry = Arc::new(CounterCarry::plan(&cur.engine, &cur.ruleset, &engine, &new));
        let generation = cur.generation + 1;
        let (mut bundles, netfilter) =
            self.bundles(&new, generation, cur.netfilter.as_ref(), &engine, now)?;
        for b in &mut bundles {
            b.carry = carry.clone();
        }
        let acks: Vec<_> = self
            .workers
            .iter()
            .zip(bundles)
            .map(|(w, b)| {
                let (tx, rx) = std::sync::mpsc::channel();
                w.mailbox.post(Box::new(move |ctx| {
                    ctx.dp.install(b);
                    let _ = tx.send(());
                }));
                rx
            })
            .collect();
        // Posted: every worker switches at its next vector, so the control side describes the
        // new ruleset from now on, whether or not a worker answers in time.
        // The sets' views stay only where the caller says they describe `new`.
        *cur = Current {
            ruleset: new,
            generation,
            engine,
            netfilter,
            shadows: wasp_ruleset::SetShadows::default(),
        };
        let Current {
            engine, ruleset, ..
        } = cur;
        one_copy(engine, ruleset);
        for (i, rx) in acks.into_iter().enumerate() {
            rx.recv_timeout(WORKER_ANSWER).map_err(|_| {
                Error::Daemon(format!(
                    "worker {i} did not take the new ruleset in time (it will at its next vector)"
                ))
            })?;
        }
        Ok(generation)
    }

    /// Read and zero the counts `req` picks (resolved against the running ruleset:
    /// [`Reset::resolve`]), on every worker in one step each (between two
    /// vectors: a packet is counted either in what is returned or in what stays), serialized
    /// with other resets and changes, so that concurrent resets never report a count twice.
    /// Returns the running ruleset with the values the picked counters had (summed over the
    /// workers), the others as they are now, and what was picked.
    ///
    /// # Errors
    /// [`Error::Daemon`] for a request that names what the ruleset does not have (nft's
    /// message) or when a worker does not answer.
    pub fn reset(&self, req: &ResetRequest) -> Result<(Ruleset, Reset), Error> {
        let cur = self.lock();
        let what = Reset::resolve(&cur.ruleset, req).map_err(Error::Daemon)?;
        let picked: Arc<Vec<(u32, Option<Vec<u32>>)>> = Arc::new(
            cur.engine
                .counter_uses()
                .filter_map(|(site, u)| what.counters(u).map(|elems| (site, elems)))
                .collect(),
        );
        let per = ask_all(&self.mailboxes(), WORKER_ANSWER, move |ctx| {
            let sites: Vec<u32> = ctx.dp.engine.counter_uses().map(|(s, _)| s).collect();
            let Some(rt) = ctx.dp.runtime.as_mut() else {
                return Vec::new();
            };
            let out: Vec<SiteCounts> = sites
                .into_iter()
                .map(|site| (site, RuntimeCounters(rt).counts(site)))
                .collect();
            for (site, elems) in picked.iter() {
                // A failed reset leaves an event in the runtime (its instance is re-created).
                match elems {
                    None => {
                        let _ = rt.reset_state(*site, 0);
                    }
                    Some(es) => {
                        for &e in es {
                            let _ = rt.reset_state(*site, e);
                        }
                    }
                }
            }
            out
        })
        .map_err(|w| Error::Daemon(format!("worker {w} did not answer")))?;
        let mut r = cur.ruleset.clone();
        cur.engine.store_counters(&mut r, &mut Summed::of(per));
        cur.engine.reset_quotas(&mut r, |o| what.quota(o));
        cur.engine
            .age_timed_elements(&cur.ruleset, &mut r, self.clock.now_ns());
        Ok((r, what))
    }

    /// The devices the daemon opened ports on (at start; it opens no others later): a ruleset
    /// change whose netdev chains hook another device, or whose `fwd`/`dup` send to one, is
    /// refused ([`Daemon::apply`], [`Daemon::reload`]), as the kernel refuses a device that
    /// does not exist; before, such packets were dropped without a word.
    pub fn set_ports(&self, names: Vec<String>) {
        *self.ports.lock().unwrap_or_else(|p| p.into_inner()) = Some(names);
    }

    /// `engine`'s hooks and output targets ([`super::devices`]) all have a port.
    ///
    /// # Errors
    /// [`Error::Daemon`] naming the first device without one, and the ports.
    fn check_ports(&self, engine: &Engine) -> Result<(), Error> {
        let ports = self.ports.lock().unwrap_or_else(|p| p.into_inner());
        let Some(ports) = ports.as_ref() else {
            return Ok(());
        };
        match super::devices(engine, None, &[])
            .into_iter()
            .find(|d| !ports.contains(d))
        {
            Some(dev) => Err(Error::Daemon(format!(
                "device `{dev}` has no port in this daemon (it opened {} at start and opens no others): nothing changed; name it in the ruleset or with --device when starting `wasp run`",
                ports.join(", ")
            ))),
            None => Ok(()),
        }
    }

    /// Give every flowtable, now and in later rulesets, offload block `b` too (after the
    /// blocks given before; a block whose name a flowtable already has is not registered on it
    /// again).
    pub fn set_offload_block(&self, b: Arc<dyn wasp_flowtable::OffloadBlock>) {
        let cur = self.lock();
        if let Some(nf) = &cur.netfilter {
            nf.register_block(&b);
        }
        self.offload
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(b);
    }

    /// `delete conntrack` / `flush conntrack`: delete the connections `pick` selects, with
    /// their NAT bindings and, at once, their flowtable entries (the connection table outlives
    /// rulesets; without flowtables only the connections go). Returns how many.
    pub fn delete_conns(&self, pick: &super::ct_filter::ConnPick) -> usize {
        let now = self.clock.now_ns();
        match self.netfilter() {
            Some(nf) => nf.delete_conns(now, |e| pick.picks(e)),
            None => self.conntrack.kill_where(now, |e| pick.picks(e)).len(),
        }
    }

    /// The conntrack and flowtables the workers share now (none when the ruleset does not take
    /// the IP path).
    pub fn netfilter(&self) -> Option<Netfilter> {
        self.lock().netfilter.clone()
    }

    /// Every worker's counts.
    pub fn stats(&self) -> Vec<StatsSnapshot> {
        self.workers.iter().map(|w| w.stats.snapshot()).collect()
    }

    /// Port counts per worker: (worker, device, counts), as of each worker's last loop.
    ///
    /// # Errors
    /// [`Error::Daemon`] when a worker does not answer.
    pub fn port_counts(&self) -> Result<Vec<(usize, String, wasp_io::PortStats)>, Error> {
        let per = ask_all(&self.mailboxes(), WORKER_ANSWER, |ctx| {
            ctx.ports
                .iter()
                .cloned()
                .zip(ctx.port_counts.iter().copied())
                .collect::<Vec<_>>()
        })
        .map_err(|w| Error::Daemon(format!("worker {w} did not answer")))?;
        Ok(per
            .into_iter()
            .enumerate()
            .flat_map(|(w, v)| v.into_iter().map(move |(d, c)| (w, d, c)))
            .collect())
    }

    /// `wasp ctl plugin state`: what each worker's plugin instances list for each use site
    /// (`list-state`; the state is per instance, so per worker), in worker then site order.
    /// Asked of every worker between two vectors.
    ///
    /// # Errors
    /// [`Error::Daemon`] when a worker does not answer in time.
    pub fn plugin_states(&self) -> Result<Vec<SiteState>, Error> {
        let per = ask_all(&self.mailboxes(), WORKER_ANSWER, |ctx| {
            let dp = &mut ctx.dp;
            let Some(rt) = dp.runtime.as_mut() else {
                return Vec::new();
            };
            crate::plugins::plugin_states(rt, &dp.engine)
                .into_iter()
                .map(|(site, plugin, state)| {
                    (
                        dp.engine.ext_site_span(site).unwrap_or_default(),
                        plugin,
                        state,
                    )
                })
                .collect::<Vec<_>>()
        })
        .map_err(|w| Error::Daemon(format!("worker {w} did not answer")))?;
        let cur = self.lock();
        let at = |span: wasp_ruleset::model::Span| {
            let file = cur
                .ruleset
                .source(span.file)
                .map_or_else(String::new, |s| s.path.display().to_string());
            format!("{file}:{}:{}", span.line, span.col)
        };
        Ok(per
            .into_iter()
            .enumerate()
            .flat_map(|(w, sites)| {
                sites
                    .into_iter()
                    .map(|(span, plugin, state)| SiteState {
                        worker: w,
                        at: at(span),
                        plugin,
                        state,
                    })
                    .collect::<Vec<_>>()
            })
            .collect())
    }

    /// The plugin host (loading plugins for swaps).
    pub fn host(&self) -> &PluginHost {
        &self.host
    }

    /// `wasp ctl plugin load NAME PATH`: compile and check the component at `path` (off the
    /// packet path) and register it as `name`: from now on a ruleset's bare `plugin NAME;`
    /// (and a `plugin NAME { path "NAME"; }`) means this file instead of the bundled one.
    /// Running rules are not touched (apply a ruleset that declares it to use it, or swap).
    ///
    /// # Errors
    /// [`Error::Daemon`] when the component cannot be loaded (nothing is registered), or when
    /// `name` is a built-in's ([`wasp_core::COUNTER_PLUGIN`], which serves every `counter`
    /// statement): it cannot be taken silently. To serve a table's counters with another
    /// component, declare it in the table (`plugin counter { path "FILE"; }`, which listings
    /// show), or swap the running one explicitly ([`Daemon::swap_plugin`]).
    pub fn load_plugin(&self, name: &str, path: &std::path::Path) -> Result<(), Error> {
        if name == wasp_core::COUNTER_PLUGIN {
            return Err(Error::Daemon(format!(
                "plugin {name}: the name is the built-in counter's, which serves every `counter` statement; load the component under another name, declare it in a table (`plugin {name} {{ path \"FILE\"; }}`), or swap the running counter with `plugin swap {name} PATH`"
            )));
        }
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .register(&self.host, name, path)
            .map_err(|e| Error::Daemon(format!("plugin {name}: {e}")))?;
        drop(cache);
        self.events.publish(Event {
            kind: "plugin",
            text: format!("plugin {name} loaded from {}", path.display()),
            json: None,
        });
        Ok(())
    }

    /// `wasp ctl plugin unload NAME`: forget the registration of `name`.
    ///
    /// # Errors
    /// [`Error::Daemon`] when the running ruleset still declares `name` (remove its uses and
    /// declaration first) or nothing was loaded under that name.
    pub fn unload_plugin(&self, name: &str) -> Result<(), Error> {
        let cur = self.lock();
        if let Some(t) = cur
            .ruleset
            .tables
            .iter()
            .find(|t| t.plugins.iter().any(|d| d.name == name))
        {
            return Err(Error::Daemon(format!(
                "plugin {name} is in use by table {}: apply a ruleset without it first",
                t.name
            )));
        }
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if !cache.unregister(name) {
            return Err(Error::Daemon(format!("no plugin {name} was loaded")));
        }
        drop(cache);
        drop(cur);
        self.events.publish(Event {
            kind: "plugin",
            text: format!("plugin {name} unloaded"),
            json: None,
        });
        Ok(())
    }

    /// Swap plugin `name` to the component at `path` on every worker while packets flow:
    /// compiled here once, instantiated and configured off the workers, switched at each
    /// worker's next vector boundary (each packet sees exactly one version). Returns what
    /// each worker did with the state, in worker order: `carried N bytes`, or `fresh: WHY`
    /// when the new version started without it (`wasp ctl` warns about those).
    ///
    /// # Errors
    /// [`Error::Daemon`]: the component cannot be loaded (nothing changes), the running
    /// ruleset has no plugin `name`, a worker refused the swap (the text says why; workers
    /// that swapped keep the new version) or did not answer.
    pub fn swap_plugin(&self, name: &str, path: &std::path::Path) -> Result<Vec<String>, Error> {
        let _cur = self.lock();
        let plugin = self
            .host
            .load(path)
            .map_err(|e| Error::Daemon(format!("plugin {name}: {e}")))?;
        let handles = ask_all(&self.mailboxes(), WORKER_ANSWER, {
            let name = name.to_string();
            move |ctx| {
                ctx.dp
                    .runtime
                    .as_ref()
                    .filter(|rt| rt.plugin(&name).is_some())
                    .map(|rt| rt.swap_handle())
            }
        })
        .map_err(|w| Error::Daemon(format!("worker {w} did not answer")))?;
        if handles.iter().any(Option::is_none) {
            return Err(Error::Daemon(format!(
                "the running ruleset has no plugin `{name}`"
            )));
        }
        let pending: Vec<_> = handles
            .into_iter()
            .flatten()
            .map(|h| h.request(name, plugin.clone()))
            .collect();
        let mut done = Vec::with_capacity(pending.len());
        for (i, rx) in pending.into_iter().enumerate() {
            match rx.recv_timeout(WORKER_ANSWER) {
                Ok(Ok(o)) => done.push(match o.state {
                    wasp_plugin::StateMove::Carried { bytes } => format!("carried {bytes} bytes"),
                    wasp_plugin::StateMove::Fresh { reason } => format!("fresh: {reason}"),
                }),
                Ok(Err(e)) => {
                    return Err(Error::Daemon(format!("worker {i}: swap refused: {e}")));
                }
                Err(_) => return Err(Error::Daemon(format!("worker {i} did not answer"))),
            }
        }
        self.events.publish(Event {
            kind: "plugin",
            text: format!("plugin {name} swapped to {}", path.display()),
            json: None,
        });
        Ok(done)
    }
}
