//! Plugins in `wasp replay`: the ruleset's plugins loaded into one [`Runtime`] (the replay is
//! one worker), every use site configured with its arguments, and the swaps `--swap
//! NAME=PATH@N` asks for.
//!
//! Where a plugin comes from: a declaration's path ending in `.wasm` or holding a `/` is a
//! file relative to the ruleset file that declares it; a bare name (`plugin counter`, `path
//! "counter"`) is a bundled plugin, found by [`crate::bundled`]'s search (`WASP_PLUGIN_PATH`,
//! `plugins/` beside the executable, `/usr/lib/wasp/plugins`, then the copy embedded in the
//! binary), unless `wasp ctl plugin load` registered the name. A `--swap` path reads the same
//! way, relative to the current directory.
//!
//! Counters: every `counter` of the ruleset (in rules, `counter name X` and named counter
//! objects, set elements) is a use site of the counter plugin ([`wasp_core::COUNTER_PLUGIN`]),
//! the bundled one, loaded without a declaration (a table's own `plugin counter` declaration
//! takes its place). Their counts are read and reset through [`RuntimeCounters`].
//!
//! Calls run with a 100 ms deadline ([`REPLAY_DEADLINE_TICKS`]).
//!
//! Errors: a plugin that cannot be loaded is a ruleset error at its declaration, a use site
//! whose arguments the plugin refuses (`configure`) a ruleset error at the use (file:line:col;
//! the command exits 1). A swap whose plugin cannot be loaded or configured changes nothing:
//! an event says why.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use wasp_core::carry::CounterCarry;
use wasp_core::{COUNTER_PLUGIN, CounterSource, Engine, ExtKind};
use wasp_plugin::{Plugin, PluginEvent, PluginHost, Runtime, SharedTimers};
use wasp_ruleset::Ruleset;
use wasp_ruleset::model::PluginSource;

use crate::bundled::{Component, SearchPath};
use crate::error::Error;

/// Epoch ticks (1 ms each) a plugin call may run in a replay before it is interrupted: 100 ms,
/// ten times the live default, so that a loaded machine (a test run, a CI worker) does not
/// interrupt calls that are merely slow and make the replay's results depend on the load.
pub const REPLAY_DEADLINE_TICKS: u64 = 100;

/// `--swap NAME=PATH@N`: replace plugin `NAME` by the component at `PATH` after input packet
/// `N` (counted from 1 over all inputs; 0 swaps before the first packet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapSpec {
    /// The plugin's name in the ruleset.
    pub name: String,
    /// The new component, as written (see the module docs for how it is found).
    pub path: String,
    /// Input packets evaluated by the old version.
    pub after: u64,
}

impl FromStr for SwapSpec {
    type Err = String;

    /// `NAME=PATH@N`; the last `@` separates `N`.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("expected NAME=PATH@N (e.g. counter=counter-v2.wasm@100), found \"{s}\"");
        let (name, rest) = s.split_once('=').ok_or_else(bad)?;
        let (path, n) = rest.rsplit_once('@').ok_or_else(bad)?;
        let after = n.parse::<u64>().map_err(|_| bad())?;
        if name.is_empty() || path.is_empty() {
            return Err(bad());
        }
        Ok(SwapSpec {
            name: name.to_string(),
            path: path.to_string(),
            after,
        })
    }
}

/// `true` when a plugin path as written names a file (it holds a `/` or ends in `.wasm`),
/// `false` for the bare name of a bundled plugin.
pub fn is_file_path(path: &str) -> bool {
    path.contains('/') || path.ends_with(".wasm")
}

/// Where a plugin's component is, for a path as written in a `--swap` (`base`: the folder
/// relative paths start from; a bare name is looked up by `search`).
///
/// # Errors
/// [`SearchPath::require`]'s, for a bare name found nowhere.
fn resolve(
    path: &str,
    base: &Path,
    search: &SearchPath,
) -> Result<Component, wasp_plugin::PluginError> {
    if !is_file_path(path) {
        return search.require(path).map(|f| f.component);
    }
    Ok(Component::File(base.join(path)))
}

/// A swap waiting for its packet.
struct PendingSwap {
    spec: SwapSpec,
    /// The new version, loaded before the run (off the packet path).
    plugin: Plugin,
}

/// The plugin swaps of a replay (`--swap`), applied to its one worker's runtime.
pub struct ReplayPlugins {
    swaps: Vec<PendingSwap>,
    /// Events not yet taken (the swaps' failures).
    events: Vec<PluginEvent>,
    /// The packet clock of the last vector (ns).
    last_now: u64,
}

impl std::fmt::Debug for ReplayPlugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayPlugins")
            .field("swaps", &self.swaps.len())
            .finish_non_exhaustive()
    }
}

impl ReplayPlugins {
    /// Load the new versions `swaps` asks for with `host`, for a runtime made for `ruleset`
    /// (`engine` compiled from it) whose clock starts at `start_ns` (the first packet's time).
    ///
    /// A bare name in a swap is looked up by `search` (the replay's [`PluginCache::search`]).
    ///
    /// # Errors
    /// [`Error::Usage`] for a `--swap` of a plugin the ruleset neither declares nor uses (the
    /// counter plugin serves its counters), or whose component cannot be found or loaded.
    pub fn load(
        host: &PluginHost,
        search: &SearchPath,
        ruleset: &Ruleset,
        engine: &Engine,
        swaps: &[SwapSpec],
        start_ns: u64,
    ) -> Result<Self, Error> {
        let known = |name: &str| {
            ruleset
                .tables
                .iter()
                .any(|t| t.plugins.iter().any(|d| d.name == name))
                || (name == COUNTER_PLUGIN && engine.has_counters())
        };
        let mut pending = Vec::with_capacity(swaps.len());
        for s in swaps {
            if !known(&s.name) {
                return Err(Error::Usage(format!(
                    "--swap {}=...: the ruleset declares no plugin `{}`",
                    s.name, s.name
                )));
            }
            // A component that cannot be loaded is known before the first packet: refused,
            // as a bad argument (a swap that loads and then fails stays an event of the run).
            let plugin = resolve(&s.path, Path::new(""), search)
                .and_then(|c| c.load(host))
                .map_err(|e| {
                    Error::Usage(format!(
                        "--swap {}={}@{}: cannot load the component: {e}",
                        s.name, s.path, s.after
                    ))
                })?;
            pending.push(PendingSwap {
                spec: s.clone(),
                plugin,
            });
        }
        // Swaps in packet order (a stable sort keeps the command line's order for equal N).
        pending.sort_by_key(|p| p.spec.after);
        Ok(ReplayPlugins {
            swaps: pending,
            events: Vec::new(),
            last_now: start_ns,
        })
    }

    /// The input packet after which the next swap is due (`None`: no swap left).
    pub fn next_swap(&self) -> Option<u64> {
        self.swaps.first().map(|s| s.spec.after)
    }

    /// Apply every swap due after input packet `done` (at a vector boundary). A swap that
    /// fails changes nothing and leaves an event saying why; a successful one leaves the
    /// runtime's event.
    pub fn apply_swaps(&mut self, runtime: &mut Runtime, done: u64) {
        while self.swaps.first().is_some_and(|s| s.spec.after <= done) {
            let s = self.swaps.remove(0);
            let name = &s.spec.name;
            let failed = runtime.swap(name, &s.plugin).err().map(|e| e.to_string());
            if let Some(why) = failed {
                self.events.push(PluginEvent {
                    at_ns: self.last_now,
                    plugin: name.clone(),
                    text: format!(
                        "plugin {name} swap to {} after packet {} failed, nothing changed: {why}",
                        s.spec.path, s.spec.after
                    ),
                });
            }
        }
    }

    /// Swaps never applied (the run ended first), as notes.
    pub fn unapplied(&self, packets: u64) -> Vec<String> {
        self.swaps
            .iter()
            .map(|s| {
                format!(
                    "--swap {}={}@{}: the replay ended after {packets} packets, the swap was not made",
                    s.spec.name, s.spec.path, s.spec.after
                )
            })
            .collect()
    }

    /// The state every plugin use lists: [`plugin_states`].
    pub fn states(
        &self,
        runtime: &mut Runtime,
        engine: &Engine,
    ) -> Vec<(u32, String, Vec<String>)> {
        plugin_states(runtime, engine)
    }

    /// Events since the last call, oldest first.
    pub fn take_events(&mut self, runtime: &mut Runtime) -> Vec<PluginEvent> {
        let mut ev = std::mem::take(&mut self.events);
        ev.extend(runtime.take_events());
        ev.sort_by_key(|e| e.at_ns);
        ev
    }

    /// The packet clock moved to `now_ns` (the vector about to run).
    pub fn note_time(&mut self, now_ns: u64) {
        self.last_now = now_ns;
    }
}

/// Compiled plugins by component (file or embedded), so that each worker's runtime (and each
/// new ruleset) reuses one compilation per component; the names `wasp ctl plugin load NAME
/// PATH` registered, which a ruleset's bare `plugin NAME;` then means instead of the bundled
/// one; and the search that finds the bundled ones ([`SearchPath`]; `default()` is this
/// process's, [`SearchPath::from_env`]).
pub struct PluginCache {
    compiled: HashMap<Component, Plugin>,
    names: HashMap<String, PathBuf>,
    search: SearchPath,
}

impl Default for PluginCache {
    fn default() -> Self {
        Self::with_search(SearchPath::from_env())
    }
}

impl std::fmt::Debug for PluginCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginCache")
            .field("compiled", &self.compiled.keys().collect::<Vec<_>>())
            .field("names", &self.names)
            .field("search", &self.search)
            .finish()
    }
}

impl PluginCache {
    /// An empty cache whose bundled names are found by `search`.
    pub fn with_search(search: SearchPath) -> Self {
        PluginCache {
            compiled: HashMap::new(),
            names: HashMap::new(),
            search,
        }
    }

    /// The search that finds bundled plugins.
    pub fn search(&self) -> &SearchPath {
        &self.search
    }

    /// The plugin compiled from `component`, compiling it on first use.
    ///
    /// # Errors
    /// The host's error for a component that cannot be read, compiled or checked against the
    /// world.
    pub fn load(
        &mut self,
        host: &PluginHost,
        component: &Component,
    ) -> Result<Plugin, wasp_plugin::PluginError> {
        if let Some(p) = self.compiled.get(component) {
            return Ok(p.clone());
        }
        let p = component.load(host)?;
        self.compiled.insert(component.clone(), p.clone());
        Ok(p)
    }

    /// Compile `file` and register it as `name` (replacing an earlier registration).
    ///
    /// # Errors
    /// As [`PluginCache::load`]; nothing is registered then.
    pub fn register(
        &mut self,
        host: &PluginHost,
        name: &str,
        file: &Path,
    ) -> Result<Plugin, wasp_plugin::PluginError> {
        let p = self.load(host, &Component::File(file.to_path_buf()))?;
        self.names.insert(name.to_string(), file.to_path_buf());
        Ok(p)
    }

    /// Forget the registration of `name`; `false` when there was none.
    pub fn unregister(&mut self, name: &str) -> bool {
        self.names.remove(name).is_some()
    }

    /// The component of a bare name: the registered file, else what the search finds
    /// (a file of an override directory, or the embedded copy).
    ///
    /// # Errors
    /// [`SearchPath::require`]'s, for a name found nowhere.
    pub fn bundled(&self, name: &str) -> Result<Component, wasp_plugin::PluginError> {
        match self.names.get(name) {
            Some(file) => Ok(Component::File(file.clone())),
            None => self.search.require(name).map(|f| f.component),
        }
    }
}

/// Plugins loaded for one ruleset in one runtime: name -> (component, declaration).
pub type Loaded = HashMap<String, (Component, wasp_ruleset::model::Span)>;

/// One worker's [`Runtime`] for `ruleset`: the plugins it declares (and the bundled counter
/// plugin when `engine` has counters), every use site of `engine` (compiled from `ruleset`)
/// configured with its arguments, and the kinds given to the engine. The runtime's clocks
/// start at `start_ns`. With `share` (a daemon's workers: the table and this worker's index),
/// the plugins' timers are one per key across the workers ([`SharedTimers`]).
///
/// # Errors
/// As [`ReplayPlugins::load`]: a ruleset error at the declaration or the use.
pub fn build_runtime(
    host: &PluginHost,
    cache: &mut PluginCache,
    ruleset: &Ruleset,
    engine: &mut Engine,
    start_ns: u64,
    share: Option<(Arc<SharedTimers>, usize)>,
) -> Result<(Runtime, Loaded), Error> {
    let counters = engine.has_counters();
    let mut runtime = Runtime::new(host);
    if let Some((table, worker)) = share {
        runtime.share_timers(table, worker);
    }
    // The replay's clock starts at the first packet: timers armed while configuring count
    // from there.
    runtime.set_clocks(start_ns, start_ns);
    // name -> (component, declaration) of the first declaration.
    let mut loaded: Loaded = HashMap::new();
    for t in &ruleset.tables {
        for d in &t.plugins {
            let file = match d.source(ruleset) {
                PluginSource::Bundled(n) => cache.bundled(&n).map_err(|e| {
                    wasp_ruleset::Error::at(ruleset, d.span, format!("plugin `{}`: {e}", d.name))
                })?,
                PluginSource::File(p) => Component::File(p),
            };
            if let Some((first, at)) = loaded.get(&d.name) {
                if *first != file {
                    return Err(wasp_ruleset::Error::at(
                        ruleset,
                        d.span,
                        format!(
                            "plugin `{}` is declared by another table with another file ({}): a replay runs one plugin per name",
                            d.name,
                            first
                        ),
                    )
                    .with_note(format!(
                        "note: the other declaration: {}:{}:{}",
                        source_path(ruleset, *at),
                        at.line,
                        at.col
                    ))
                    .into());
                }
                continue;
            }
            let plugin = cache.load(host, &file).map_err(|e| {
                wasp_ruleset::Error::at(ruleset, d.span, format!("plugin `{}`: {e}", d.name))
            })?;
            runtime.add(&d.name, &plugin).map_err(|e| {
                wasp_ruleset::Error::at(ruleset, d.span, format!("plugin `{}`: {e}", d.name))
            })?;
            loaded.insert(d.name.clone(), (file, d.span));
        }
    }
    if counters && !loaded.contains_key(COUNTER_PLUGIN) {
        // The bundled counter serves the ruleset's counters without a declaration.
        let plugin = cache
            .bundled(COUNTER_PLUGIN)
            .and_then(|file| Ok((cache.load(host, &file)?, file)));
        let (plugin, file) = plugin.map_err(|e| {
            Error::Plugin(format!("the bundled counter plugin cannot be loaded: {e}"))
        })?;
        runtime
            .add(COUNTER_PLUGIN, &plugin)
            .map_err(|e| Error::Plugin(format!("the bundled counter plugin: {e}")))?;
        loaded.insert(
            COUNTER_PLUGIN.to_string(),
            (file, wasp_ruleset::model::Span::default()),
        );
    }
    let mut kinds: Vec<ExtKind> = Vec::with_capacity(engine.ext_sites().len());
    for site in engine.ext_sites() {
        match runtime.configure(site) {
            Ok(k) => kinds.push(k),
            Err(msg) => {
                let span = engine.ext_site_span(site.id).unwrap_or_default();
                return Err(wasp_ruleset::Error::at(
                    ruleset,
                    span,
                    format!("plugin `{}` refuses this use: {msg}", site.plugin),
                )
                .into());
            }
        }
    }
    engine.set_ext_kinds(&kinds);
    Ok((runtime, loaded))
}

/// The counter plugin's counts as the engine reads them ([`CounterSource`]): its
/// `list-state` (values `packets` and `bytes` per entry) and `reset-state(site, 0)`. A listing
/// that fails reads as no counts.
pub struct RuntimeCounters<'a>(pub &'a mut Runtime);

impl std::fmt::Debug for RuntimeCounters<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RuntimeCounters")
    }
}

impl CounterSource for RuntimeCounters<'_> {
    fn counts(&mut self, site: u32) -> Vec<(u32, u64, u64)> {
        let Ok(entries) = self.0.list_state(site) else {
            return Vec::new();
        };
        entries
            .into_iter()
            .map(|e| {
                let get = |k: &str| e.values.iter().find(|(n, _)| n == k).map_or(0, |(_, v)| *v);
                (e.elem, get("packets"), get("bytes"))
            })
            .collect()
    }

    fn reset(&mut self, site: u32) {
        // A failed reset leaves an event in the runtime (its instance is re-created).
        let _ = self.0.reset_state(site, 0);
    }
}

/// Move the counts `carry` names from `old` (the running instances of one worker) into `new`
/// (the instances configured for `new_engine`, about to replace them), between two vectors:
/// each continuing counter site of `new` is configured again with its arguments and, as its
/// initial counts, what `old` counted for the entries it continues (entries that do not
/// continue keep the counts the ruleset gives them). Each worker moves its own counts, so the
/// sum over workers stays exact. A site the counter plugin refuses keeps the counts it had
/// (its failure is in the runtime's events).
pub fn carry_counts(
    old: &mut Runtime,
    new: &mut Runtime,
    new_engine: &Engine,
    carry: &CounterCarry,
) {
    let mut was: HashMap<u32, HashMap<u32, (u64, u64)>> = HashMap::new();
    for site in carry.old_sites() {
        let counts = RuntimeCounters(old).counts(site);
        was.insert(
            site,
            counts.into_iter().map(|(e, p, b)| (e, (p, b))).collect(),
        );
    }
    for sc in &carry.sites {
        let (Some(site), Some(kind)) = (
            new_engine.ext_sites().get(sc.site as usize),
            new.site_kind(sc.site),
        ) else {
            continue;
        };
        let count = |old_site: u32, old_elem: u32| {
            was.get(&old_site)
                .and_then(|m| m.get(&old_elem))
                .copied()
                .unwrap_or_default()
        };
        let entries: Vec<(u32, (u64, u64))> = sc
            .entries
            .iter()
            .map(|&(e, s, oe)| (e, count(s, oe)))
            .collect();
        // Nothing to move when the new site already starts where the old one is (no traffic
        // since the counts it was configured with: the usual case of a big ruleset change).
        let declared = declared_counts(&site.args);
        if entries
            .iter()
            .all(|(e, c)| declared.get(e).copied().unwrap_or_default() == *c)
        {
            continue;
        }
        let args = carried_args(&site.args, entries.into_iter());
        let again = wasp_core::ExtSite {
            args,
            ..site.clone()
        };
        let _ = new.configure_as(&again, kind);
    }
}

/// The counter plugin's arguments `args` (`[name N] [packets P] [bytes B] [elem E packets P
/// bytes B]...`) with the counts of `entries` (`(elem, (packets, bytes))`, elem 0 the site's
/// own) in place of those written: the plugin takes the last value given for an entry.
fn carried_args(args: &[String], entries: impl Iterator<Item = (u32, (u64, u64))>) -> Vec<String> {
    // The site's own arguments end at the first `elem` key (keys are every other token).
    let own = args
        .chunks(2)
        .position(|kv| kv[0] == "elem")
        .map_or(args.len(), |i| i * 2);
    let mut out: Vec<String> = args[..own].to_vec();
    let mut elems: Vec<String> = args[own..].to_vec();
    for (elem, (p, b)) in entries {
        let counts = [
            "packets".into(),
            p.to_string(),
            "bytes".into(),
            b.to_string(),
        ];
        if elem == 0 {
            out.extend(counts);
        } else {
            elems.extend(["elem".into(), elem.to_string()]);
            elems.extend(counts);
        }
    }
    out.extend(elems);
    out
}

/// The counts the counter plugin's arguments `args` give each entry (0: the site's own,
/// `elem E`: element E's), as the plugin reads them: the last value given wins.
fn declared_counts(args: &[String]) -> HashMap<u32, (u64, u64)> {
    let mut out: HashMap<u32, (u64, u64)> = HashMap::new();
    let mut elem = 0;
    for kv in args.chunks(2) {
        let [k, v] = kv else { break };
        match k.as_str() {
            "elem" => elem = v.parse().unwrap_or(0),
            "packets" => out.entry(elem).or_default().0 = v.parse().unwrap_or(0),
            "bytes" => out.entry(elem).or_default().1 = v.parse().unwrap_or(0),
            _ => {}
        }
    }
    out
}

/// No counts at all (a ruleset without counters).
#[derive(Debug, Default)]
pub struct NoCounters;

impl CounterSource for NoCounters {
    fn counts(&mut self, _: u32) -> Vec<(u32, u64, u64)> {
        Vec::new()
    }

    fn reset(&mut self, _: u32) {}
}

/// The path of the file of `span`, for messages.
fn source_path(ruleset: &Ruleset, span: wasp_ruleset::model::Span) -> String {
    ruleset
        .source(span.file)
        .map_or_else(|| "<ruleset>".to_string(), |s| s.path.display().to_string())
}

/// The state every plugin use written in the ruleset lists, as `wasp replay` and `wasp ctl
/// plugin state` show it (a declared plugin's; the counters the engine made are read through
/// [`RuntimeCounters`]), in site order: (site, plugin, entries as text: `name value` pairs, then the plugin's text in
/// parentheses when it says more). A listing that fails gives its error as text.
pub fn plugin_states(runtime: &mut Runtime, engine: &Engine) -> Vec<(u32, String, Vec<String>)> {
    let made: std::collections::HashSet<u32> =
        engine.counter_uses().map(|(site, _)| site).collect();
    engine
        .ext_sites()
        .iter()
        .filter(|s| !made.contains(&s.id))
        .map(|s| {
            let text = match runtime.list_state(s.id) {
                Ok(entries) => entries
                    .into_iter()
                    .map(|e| {
                        // The values, and the plugin's text when it says more.
                        let values = e
                            .values
                            .iter()
                            .map(|(k, v)| format!("{k} {v}"))
                            .collect::<Vec<_>>()
                            .join(" ");
                        match (values.is_empty(), e.text.is_empty()) {
                            (_, true) => values,
                            (true, false) => e.text,
                            (false, false) if e.text == values => values,
                            (false, false) => format!("{values} ({})", e.text),
                        }
                    })
                    .collect(),
                Err(e) => vec![format!("(cannot list: {e})")],
            };
            (s.id, s.plugin.clone(), text)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carried_counts_replace_what_the_arguments_declare() {
        let args: Vec<String> = [
            "name", "\"x\"", "packets", "5", "bytes", "10", "elem", "2", "packets", "1", "bytes",
            "2",
        ]
        .map(String::from)
        .to_vec();
        let out = carried_args(&args, [(0, (7, 70)), (3, (1, 1))].into_iter());
        let got = declared_counts(&out);
        assert_eq!(got[&0], (7, 70), "the site's own, before any elem: {out:?}");
        assert_eq!(got[&2], (1, 2), "an element not carried keeps its count");
        assert_eq!(got[&3], (1, 1));
        assert_eq!(&out[..2], &args[..2], "the name stays");
    }

    #[test]
    fn swap_specs() {
        assert_eq!(
            "counter=v2/counter.wasm@100".parse::<SwapSpec>(),
            Ok(SwapSpec {
                name: "counter".into(),
                path: "v2/counter.wasm".into(),
                after: 100
            })
        );
        // The last `@` separates the packet number.
        assert_eq!(
            "g=a@b.wasm@0"
                .parse::<SwapSpec>()
                .map(|s| (s.path, s.after)),
            Ok(("a@b.wasm".to_string(), 0))
        );
        for bad in [
            "counter",
            "counter=x.wasm",
            "=x@1",
            "c=@1",
            "c=x@-1",
            "c=x@",
        ] {
            assert!(bad.parse::<SwapSpec>().is_err(), "{bad}");
        }
        let search = SearchPath::with_dirs(Vec::new());
        assert_eq!(
            resolve("counter", Path::new("/x"), &search).unwrap(),
            Component::Embedded("counter")
        );
        assert_eq!(
            resolve("a/b.wasm", Path::new("/x"), &search).unwrap(),
            Component::File(PathBuf::from("/x/a/b.wasm"))
        );
        assert!(resolve("nothing", Path::new("/x"), &search).is_err());
    }
}
