//! The engine shared by all workers, and loaded (compiled, checked, described) plugins.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use wasmtime::component::{Component, ComponentExportIndex, Func, InstancePre, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasp_core::ExtKind;

use crate::area::{self, Area};
use crate::bindings::{Kind, SetFn, StoreState, WaspPlugin, WaspPluginIndices};
use crate::contract::NameCheck;
use crate::error::PluginError;
use crate::pack;

/// Limits and sizes of a [`PluginHost`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostConfig {
    /// Linear memory limit of one instance, in bytes (default 64 MiB). Growing past it fails,
    /// and a guest that then traps is reported as [`crate::FailureReason::MemoryLimit`].
    pub max_memory: usize,
    /// Most instances alive at once across all runtimes (the pool's size; default 128, i.e.
    /// workers × plugins, plus one per swap or recovery in progress).
    pub max_instances: u32,
    /// Epoch tick of the ticker thread (default 1 ms).
    pub tick: Duration,
    /// Ticks a call may run before it is interrupted (default 10, i.e. 10 ms at the default
    /// tick). The ticks run on wall time and the first may come right after the call starts;
    /// once they have passed, the call may still use as much CPU time as the deadline is long
    /// (the calling thread's clock), so a call that was descheduled is not interrupted, and a
    /// plugin that loops is stopped after one to two deadlines (see `arm_deadline`).
    pub deadline_ticks: u64,
    /// Ticks a call off the packet path may run: instantiation, `describe`, `configure`,
    /// `release`, state listing, reset and transfer (default 1000, i.e. 1 s). These run when a
    /// ruleset is loaded or changed, on a machine that may be busy compiling or forwarding; a
    /// packet-path deadline there refused good rulesets on a loaded machine.
    pub setup_ticks: u64,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            max_memory: 64 << 20,
            max_instances: 128,
            tick: Duration::from_millis(1),
            deadline_ticks: 10,
            setup_ticks: 1000,
        }
    }
}

/// Stops the ticker thread when the last user of the engine goes away.
struct Ticker {
    stop: Arc<AtomicBool>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

pub(crate) struct HostInner {
    pub(crate) engine: Engine,
    pub(crate) config: HostConfig,
    _ticker: Ticker,
}

/// One wasmtime engine for all plugins and workers: Cranelift, the component model, the
/// pooling allocator (memory limit per instance), epoch interruption (a ticker thread bumps
/// the epoch every [`HostConfig::tick`]), and `concurrency_support` off (a component call
/// costs about 500 ns with it on, 165 ns off: research/plugins.md). Cheap to clone.
#[derive(Clone)]
pub struct PluginHost {
    pub(crate) inner: Arc<HostInner>,
}

impl PluginHost {
    /// A host with the given limits; starts the epoch ticker thread (which ends when the host,
    /// every plugin and every runtime are dropped). With `WASP_PLUGIN_PERFMAP=1` in the
    /// environment, compiled guest code is listed in `/tmp/perf-PID.map` for `perf report`.
    ///
    /// Errors: [`PluginError::Engine`] when wasmtime refuses the configuration (e.g. a memory
    /// limit larger than 4 GiB).
    pub fn new(config: HostConfig) -> Result<PluginHost, PluginError> {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(config.max_instances)
            .total_core_instances(config.max_instances.saturating_mul(4))
            .total_memories(config.max_instances.saturating_mul(2))
            .total_tables(config.max_instances.saturating_mul(4))
            .max_memory_size(config.max_memory);
        let mut c = Config::new();
        c.wasm_component_model(true)
            .concurrency_support(false)
            .epoch_interruption(true)
            .parallel_compilation(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        // For profiling guests: `perf` names the JIT code through /tmp/perf-PID.map.
        if std::env::var_os("WASP_PLUGIN_PERFMAP").is_some_and(|v| v == "1") {
            c.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&c).map_err(|e| PluginError::Engine(format!("{e:#}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let (tick_engine, tick_stop, tick) = (engine.clone(), stop.clone(), config.tick);
        thread::Builder::new()
            .name("wasp-plugin-epoch".into())
            .spawn(move || {
                while !tick_stop.load(Ordering::Relaxed) {
                    thread::sleep(tick);
                    tick_engine.increment_epoch();
                }
            })
            .map_err(|e| PluginError::Engine(format!("cannot start the epoch ticker: {e}")))?;
        Ok(PluginHost {
            inner: Arc::new(HostInner {
                engine,
                config,
                _ticker: Ticker { stop },
            }),
        })
    }

    /// The limits this host was made with.
    pub fn config(&self) -> &HostConfig {
        &self.inner.config
    }

    /// Load the component at `path`: compile it, check that it implements the world
    /// `wasp-plugin` and imports nothing but the world's `host` interface and WASI (WASI
    /// imports, if any, are defined as traps: a lean plugin has none),
    /// prepare its instantiation, and call `describe` once.
    ///
    /// Errors name the file and what is wrong: [`PluginError::Read`],
    /// [`PluginError::Compile`], [`PluginError::World`], [`PluginError::Describe`].
    pub fn load(&self, path: impl AsRef<Path>) -> Result<Plugin, PluginError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| PluginError::Read {
            path: path.to_path_buf(),
            msg: e.to_string(),
        })?;
        self.load_bytes(path, &bytes)
    }

    /// Compiles component `bytes` (Cranelift; the costly part of a load: about 10 s of CPU
    /// for an 18 MB Python component, tens of ms for a Rust one) without checking it against
    /// the contract; `path` is only used in messages. [`Compiled::interfaces`] then says what
    /// it imports and exports, and [`PluginHost::load_compiled`] or
    /// [`crate::PluginBlock::load_compiled`] finish the load without compiling again.
    ///
    /// # Errors
    /// [`PluginError::Compile`] when `bytes` is not a component this host can compile.
    pub fn compile(&self, path: impl AsRef<Path>, bytes: &[u8]) -> Result<Compiled, PluginError> {
        let path = path.as_ref().to_path_buf();
        // A core module (what clang, Go or a Rust wasm32 build make before `wasm-tools
        // component new`): the header's version field is 1, a component's 0x1000d.
        if bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[4..8] == [1, 0, 0, 0] {
            return Err(PluginError::Compile {
                path,
                msg: "a core WebAssembly module, not a component: make it one with `wasm-tools \
                      component new` (the build scripts of `wasp plugin new` projects do)"
                    .into(),
            });
        }
        let t0 = Instant::now();
        let component =
            Component::new(&self.inner.engine, bytes).map_err(|e| PluginError::Compile {
                path: path.clone(),
                msg: format!("{e:#}"),
            })?;
        Ok(Compiled {
            path,
            component,
            compile_time: t0.elapsed(),
        })
    }

    /// What went wrong in a setup call (instantiation, `describe`, `configure`), on one line:
    /// the trap, or the deadline with its length, or the root cause, without the guest's
    /// backtrace (a line per frame, mostly `<unknown>!<wasm function N>` in a stripped guest).
    /// A guest with WASI prints its own account (an exception, a traceback) to its stderr,
    /// which reaches the log.
    pub(crate) fn setup_failure(&self, e: &wasmtime::Error) -> String {
        let cfg = &self.inner.config;
        match e.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::Interrupt) => format!(
                "did not return within the {} ms a setup call may take (it loops, or is too slow \
                 to start)",
                (cfg.tick * cfg.setup_ticks.max(1) as u32).as_millis()
            ),
            Some(t) => format!("{t} (the plugin's stderr, in the log, may say why)"),
            None => e
                .root_cause()
                .to_string()
                .lines()
                .next()
                .unwrap_or("failed")
                .to_string(),
        }
    }

    /// As [`PluginHost::load`], from the component's bytes; `path` is only used in messages.
    pub fn load_bytes(&self, path: impl AsRef<Path>, bytes: &[u8]) -> Result<Plugin, PluginError> {
        self.load_compiled(self.compile(path, bytes)?)
    }

    /// As [`PluginHost::load`], for a component [`PluginHost::compile`] compiled.
    ///
    /// # Errors
    /// As [`PluginHost::load`], but for reading and compiling.
    pub fn load_compiled(&self, compiled: Compiled) -> Result<Plugin, PluginError> {
        let Compiled {
            path,
            component,
            compile_time,
        } = compiled;
        let world = |e: wasmtime::Error| PluginError::World {
            path: path.clone(),
            msg: format!("{e:#}"),
        };
        let mut linker: Linker<StoreState> = Linker::new(&self.inner.engine);
        WaspPlugin::add_to_linker::<StoreState, wasmtime::component::HasSelf<StoreState>>(
            &mut linker,
            |s| s,
        )
        .map_err(world)?;
        let ty = component.component_type();
        let engine = &self.inner.engine;
        let wasi = check_imports(
            ty.imports(engine).map(|(n, _)| n),
            ty.exports(engine).map(|(n, _)| n),
        )
        .map_err(|msg| PluginError::World {
            path: path.clone(),
            msg,
        })?;
        link_wasi_or_traps(&mut linker, &component, wasi).map_err(world)?;
        let pre = linker.instantiate_pre(&component).map_err(world)?;
        let indices = WaspPluginIndices::new(&pre).map_err(world)?;
        // The optional `fast-match` export (world `wasp-plugin-fast`).
        let fast = component
            .get_export_index(None, FAST_MATCH)
            .map(|iface| {
                let f = |name| {
                    component
                        .get_export_index(Some(&iface), name)
                        .ok_or_else(|| PluginError::World {
                            path: path.clone(),
                            msg: format!("exports {FAST_MATCH} without {name}"),
                        })
                };
                Ok::<_, PluginError>((f("first-window")?, f("matches-first")?))
            })
            .transpose()?;
        // The optional `area-match` export (world `wasp-plugin-area`), used with `fast-match`.
        let area = component
            .get_export_index(None, AREA_MATCH)
            .map(|iface| {
                let f = |name| {
                    component
                        .get_export_index(Some(&iface), name)
                        .ok_or_else(|| PluginError::World {
                            path: path.clone(),
                            msg: format!("exports {AREA_MATCH} without {name}"),
                        })
                };
                Ok::<_, PluginError>((f("batch-area")?, f("matches-first-at")?))
            })
            .transpose()?;
        if area.is_some() && fast.is_none() {
            return Err(PluginError::World {
                path,
                msg: format!("exports {AREA_MATCH} without {FAST_MATCH}"),
            });
        }
        let mut plugin = Plugin {
            inner: Arc::new(PluginInner {
                host: self.clone(),
                path: path.clone(),
                pre,
                indices,
                area_fns: area,
                matches_first: fast.map(|f| f.1),
                info: PluginInfo::default(),
                compile_time,
                log_limit: Default::default(),
            }),
        };
        let describe = |msg: String| PluginError::Describe {
            path: path.clone(),
            msg,
        };
        // Until it says its name, the plugin's log lines carry its file's.
        let file_name: Arc<str> = path
            .file_stem()
            .map_or_else(|| "?".into(), |s| s.to_string_lossy().into());
        let mut live = plugin
            .instantiate(file_name, None)
            .map_err(|e| describe(e.to_string()))?;
        let info = live
            .bindings
            .wasp_plugin_plugin()
            .call_describe(&mut live.store)
            .map_err(|e| describe(format!("describe failed: {}", self.setup_failure(&e))))?;
        let first_window = match &fast {
            None => None,
            Some((first, matches_first)) => {
                // Both functions' types are checked here, once.
                let bad = |e: wasmtime::Error| PluginError::World {
                    path: path.clone(),
                    msg: format!("{FAST_MATCH} does not fit: {e:#}"),
                };
                let mut func = |idx: &ComponentExportIndex| {
                    live.instance
                        .get_func(&mut live.store, idx)
                        .ok_or_else(|| bad(wasmtime::format_err!("not a function")))
                };
                let (mf, fw) = (func(matches_first)?, func(first)?);
                let area_funcs = match &area {
                    Some((ba, at)) => Some((func(ba)?, func(at)?)),
                    None => None,
                };
                mf.typed::<MatchesFirstParams<'_>, MatchesFirstResults>(&live.store)
                    .map_err(bad)?;
                let fw = fw.typed::<(), (u32,)>(&live.store).map_err(bad)?;
                if let Some((ba, at)) = area_funcs {
                    let bad = |e: wasmtime::Error| PluginError::World {
                        path: path.clone(),
                        msg: format!("{AREA_MATCH} does not fit: {e:#}"),
                    };
                    ba.typed::<(u32,), (u32,)>(&live.store).map_err(bad)?;
                    area::check(at, &live.store).map_err(bad)?;
                }
                let (n,) = fw
                    .call(&mut live.store, ())
                    .map_err(|e| describe(format!("first-window failed: {e:#}")))?;
                Some(n.min(info.window))
            }
        };
        drop(live);
        if info.name.is_empty() {
            return Err(describe("empty name".into()));
        }
        if info.kinds.is_empty() {
            return Err(describe("no kind".into()));
        }
        if info.window > 1514 {
            return Err(describe(format!(
                "window of {} bytes (at most 1514)",
                info.window
            )));
        }
        let info = PluginInfo {
            name: info.name,
            version: info.version,
            kinds: info.kinds.iter().map(|k| ext_kind(*k)).collect(),
            window: info.window,
            state_transfer: info.state_transfer,
            first_window,
        };
        // Only this function holds the Arc yet.
        match Arc::get_mut(&mut plugin.inner) {
            Some(inner) => inner.info = info,
            None => return Err(describe("internal: plugin shared during load".into())),
        }
        Ok(plugin)
    }
}

/// Checks a component's names against the host: every `wasp:plugin` import and export of a
/// contract version this host loads ([`crate::contract::check_name`]), and no import but
/// `wasp:plugin` and `wasi:` ones. Returns whether it imports WASI.
///
/// # Errors
/// The message for the first name refused.
pub(crate) fn check_imports<'a>(
    imports: impl Iterator<Item = &'a str>,
    exports: impl Iterator<Item = &'a str>,
) -> Result<bool, String> {
    let mut wasi = false;
    for name in imports {
        match crate::contract::check_name(name)? {
            NameCheck::Known(_) => {}
            NameCheck::Other if name.starts_with("wasi:") => wasi = true,
            NameCheck::Other => {
                return Err(format!("imports {name}, which the host does not offer"));
            }
        }
    }
    for name in exports {
        crate::contract::check_name(name)?;
    }
    Ok(wasi)
}

/// Links WASI 0.2 for a component that imports it (deny-all, `crate::wasi`), and otherwise
/// defines whatever the component imports beyond the contract as traps: a plugin that imports
/// nothing keeps the lean linker. With WASI, no trap stubs: `define_unknown_imports_as_traps`
/// looks names up exactly, so it would shadow WASI 0.2.12's definitions with traps for a
/// guest that imports 0.2.9 (semver-compatible for instantiation); a WASI import that
/// wasmtime-wasi lacks then fails the load by name.
pub(crate) fn link_wasi_or_traps(
    linker: &mut Linker<StoreState>,
    component: &Component,
    wasi: bool,
) -> wasmtime::Result<()> {
    if wasi {
        crate::wasi::add_to_linker(linker)
    } else {
        linker.define_unknown_imports_as_traps(component)
    }
}

/// A compiled component, not yet checked against the contract ([`PluginHost::compile`]).
pub struct Compiled {
    pub(crate) path: PathBuf,
    pub(crate) component: Component,
    pub(crate) compile_time: Duration,
}

impl Compiled {
    /// The names it imports and exports (`wasp:plugin/host@0.1.3`, `wasi:cli/stdout@0.2.0`,
    /// ...), in its order: what `wasp plugin check` reports.
    pub fn interfaces(&self) -> Interfaces {
        let ty = self.component.component_type();
        let engine = self.component.engine();
        Interfaces {
            imports: ty.imports(engine).map(|(n, _)| n.to_string()).collect(),
            exports: ty.exports(engine).map(|(n, _)| n.to_string()).collect(),
        }
    }

    /// Wall time the compile took.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }
}

/// What a component imports and exports, by name ([`Compiled::interfaces`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interfaces {
    /// Imported instance and function names.
    pub imports: Vec<String>,
    /// Exported instance and function names.
    pub exports: Vec<String>,
}

/// What a plugin said about itself (`describe`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginInfo {
    /// Its name, e.g. "geneve".
    pub name: String,
    /// Its version, e.g. "1.2.0".
    pub version: String,
    /// The kinds it implements.
    pub kinds: Vec<ExtKind>,
    /// Bytes of each frame it sees (0..=1514).
    pub window: u32,
    /// Whether it exports and imports a state blob across a hot swap.
    pub state_transfer: bool,
    /// When it exports `fast-match` (world `wasp-plugin-fast`, every plugin of the Rust SDK):
    /// the bytes of each frame a match sees first (its `first-window`, at most `window`).
    /// `None`: matches go through `plugin.matches` with the whole window.
    pub first_window: Option<u32>,
}

/// The optional interface of the world `wasp-plugin-fast`.
pub(crate) const FAST_MATCH: &str = "wasp:plugin/fast-match@0.1.3";

/// The optional interface of the world `wasp-plugin-area`.
pub(crate) const AREA_MATCH: &str = "wasp:plugin/area-match@0.1.3";

/// `fast-match.matches-first`'s parameters: (site, batch, count, stride).
pub(crate) type MatchesFirstParams<'a> = (u32, &'a [u8], u32, u32);

/// `fast-match.matches-first`'s result: (hits, more) bitmasks.
pub(crate) type MatchesFirstResults = ((u64, u64),);

pub(crate) struct PluginInner {
    pub(crate) host: PluginHost,
    pub(crate) path: PathBuf,
    pub(crate) pre: InstancePre<StoreState>,
    pub(crate) indices: WaspPluginIndices,
    /// `fast-match.matches-first`, when the plugin exports it.
    pub(crate) matches_first: Option<ComponentExportIndex>,
    /// `area-match.batch-area` and `matches-first-at`, when the plugin exports them.
    pub(crate) area_fns: Option<(ComponentExportIndex, ComponentExportIndex)>,
    pub(crate) info: PluginInfo,
    pub(crate) compile_time: Duration,
    /// The rate limit on the log lines of every instance of this load.
    pub(crate) log_limit: crate::loglimit::LogLimit,
}

/// A loaded plugin: compiled, checked against the world, ready to instantiate (an
/// `InstancePre`). Cheap to clone; workers share it.
#[derive(Clone)]
pub struct Plugin {
    pub(crate) inner: Arc<PluginInner>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("path", &self.inner.path)
            .field("info", &self.inner.info)
            .finish()
    }
}

/// A live instance: its store and its exports.
pub(crate) struct Live {
    pub(crate) store: Store<StoreState>,
    pub(crate) instance: wasmtime::component::Instance,
    pub(crate) bindings: WaspPlugin,
    /// `fast-match.matches-first` (its type checked at load).
    pub(crate) matches_first: Option<Func>,
    /// `area-match.batch-area` and `matches-first-at`, when the plugin exports them (types
    /// checked for this instance when it was made).
    pub(crate) area_fns: Option<(Func, Func)>,
    /// The batch area: `None` until the first match that wants it asks (an instance that is
    /// never asked for a match pays nothing), then the one the plugin gave, or `Some(None)`
    /// when it gave none.
    pub(crate) area: Option<Option<Area>>,
}

impl Live {
    /// Ask the instance for its batch area, for 64 records of `first`-byte windows; once.
    pub(crate) fn ask_area(&mut self, first: u32) -> wasmtime::Result<()> {
        let (Some((ba, _)), None) = (self.area_fns, self.area) else {
            return Ok(());
        };
        let size = pack::FIRST_MAX * pack::stride(first);
        let (addr,) = ba
            .typed::<(u32,), (u32,)>(&self.store)?
            .call(&mut self.store, (size as u32,))?;
        self.area = Some((addr != 0).then_some(Area {
            addr: addr as usize,
            size,
        }));
        Ok(())
    }

    /// `matches-first-at` and the batch area, once asked for and given.
    pub(crate) fn area(&self) -> Option<(Func, Area)> {
        Some((self.area_fns?.1, self.area??))
    }
}

impl Plugin {
    /// What the plugin said about itself.
    pub fn info(&self) -> &PluginInfo {
        &self.inner.info
    }

    /// The file it was loaded from.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// How long compiling took (wall clock).
    pub fn compile_time(&self) -> Duration {
        self.inner.compile_time
    }

    /// Handles to this plugin alive (this one included): clones, and runtimes using it. After
    /// a swap away from it, the runtime holds none (case C35).
    pub fn users(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// Create one instance (for benchmarks: instantiate time); dropped at once.
    pub fn instantiate_once(&self) -> Result<(), PluginError> {
        self.instantiate(self.inner.info.name.as_str().into(), None)
            .map(drop)
    }

    pub(crate) fn instantiate(
        &self,
        name: Arc<str>,
        set_fn: Option<SetFn>,
    ) -> Result<Live, PluginError> {
        let host = &self.inner.host.inner;
        let mut store = Store::new(
            &host.engine,
            StoreState::new(
                name.clone(),
                host.config.max_memory,
                set_fn,
                self.inner.log_limit.clone(),
            ),
        );
        store.limiter(|s| &mut s.limit);
        store.data_mut().tick = host.config.tick;
        store.epoch_deadline_callback(deadline_reached);
        arm_deadline(&mut store, host.config.setup_ticks.max(1));
        let err = |e: wasmtime::Error| PluginError::Instantiate {
            plugin: name.to_string(),
            msg: self.inner.host.setup_failure(&e),
        };
        let instance = self.inner.pre.instantiate(&mut store).map_err(err)?;
        let bindings = self
            .inner
            .indices
            .load(&mut store, &instance)
            .map_err(err)?;
        let matches_first = self
            .inner
            .matches_first
            .as_ref()
            .and_then(|i| instance.get_func(&mut store, i));
        // `area-match`, its types checked for this instance (the area is asked for later).
        let mut area_fns = None;
        if let Some((ba, at)) = &self.inner.area_fns {
            let func = |store: &mut Store<StoreState>, i| {
                instance
                    .get_func(&mut *store, i)
                    .ok_or_else(|| wasmtime::format_err!("{AREA_MATCH}: not a function"))
            };
            let ba = func(&mut store, ba).map_err(err)?;
            let at = func(&mut store, at).map_err(err)?;
            ba.typed::<(u32,), (u32,)>(&store).map_err(err)?;
            area::check(at, &store).map_err(err)?;
            area_fns = Some((ba, at));
        }
        Ok(Live {
            store,
            instance,
            bindings,
            matches_first,
            area_fns,
            area: None,
        })
    }
}

pub(crate) fn ext_kind(k: Kind) -> ExtKind {
    match k {
        Kind::MatchExpr => ExtKind::Match,
        Kind::Statement => ExtKind::Statement,
        Kind::Stateful => ExtKind::Stateful,
    }
}

pub(crate) fn wit_kind(k: ExtKind) -> Kind {
    match k {
        ExtKind::Match => Kind::MatchExpr,
        ExtKind::Statement => Kind::Statement,
        ExtKind::Stateful => Kind::Stateful,
    }
}

/// Give the next call of `store` a deadline of `ticks` epoch ticks.
///
/// The ticks run on wall time (the ticker thread), so a worker descheduled in the middle of a
/// call would reach the deadline without the plugin having run that long. When the wall-clock
/// deadline passes, [`deadline_reached`] starts counting this thread's CPU time instead, and
/// interrupts the call (`Trap::Interrupt`, reported as a deadline hit) only once it has used
/// the deadline's length of CPU time since: a plugin that loops is stopped after between one
/// and two deadlines, a call that was merely descheduled is not.
pub(crate) fn arm_deadline(store: &mut Store<StoreState>, ticks: u64) {
    let ticks = ticks.max(1);
    let d = store.data_mut();
    d.budget = d
        .tick
        .saturating_mul(u32::try_from(ticks).unwrap_or(u32::MAX));
    d.cpu_mark = None;
    store.set_epoch_deadline(ticks);
}

/// The epoch deadline of a call passed (see [`arm_deadline`]): go on one more tick while the
/// thread's CPU time since then is under the budget, else interrupt.
pub(crate) fn deadline_reached(
    mut ctx: wasmtime::StoreContextMut<'_, StoreState>,
) -> wasmtime::Result<wasmtime::UpdateDeadline> {
    let d = ctx.data_mut();
    let Ok(now) = cpu_time::ThreadTime::try_now().map(|t| t.as_duration()) else {
        // No thread clock: the wall-clock deadline is all there is.
        return Err(wasmtime::Trap::Interrupt.into());
    };
    match d.cpu_mark {
        None => {
            d.cpu_mark = Some(now);
            Ok(wasmtime::UpdateDeadline::Continue(1))
        }
        Some(mark) if now.saturating_sub(mark) < d.budget => {
            Ok(wasmtime::UpdateDeadline::Continue(1))
        }
        Some(_) => Err(wasmtime::Trap::Interrupt.into()),
    }
}
