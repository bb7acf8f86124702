//! The bundled plugins at run time: where the component of a bare plugin name (`plugin
//! geneve;`, `path "counter"`, the counter plugin that serves every `counter`, `--swap
//! NAME=counter@N`, `--offload-plugin offload_table`) comes from.
//!
//! Contract: the `wasp` binary carries every bundled plugin (`counter`, `geneve`,
//! `idletimer`, `offload_table`), embedded at build time ([`wasp_guests::EMBEDDED`]), so a
//! binary that is copied, installed with `cargo install` or packaged runs every ruleset and
//! sample with the build directory gone. A user overrides a bundled plugin, or adds one under
//! a bare name, with a file `NAME.wasm` in one of these directories, searched in this order
//! ([`SearchPath::from_env`]):
//!
//! 1. each directory of `WASP_PLUGIN_PATH` ([`PLUGIN_PATH_ENV`]; `:`-separated, as `PATH`;
//!    empty entries are skipped; relative ones are relative to the current directory),
//! 2. `plugins/` beside the executable ([`EXE_SUBDIR`]; e.g. `/opt/wasp/bin/plugins/`),
//! 3. the system directory `/usr/lib/wasp/plugins` ([`SYSTEM_DIR`]),
//! 4. the embedded copy.
//!
//! The first file found wins, and is used as it is: a file that exists but does not load is
//! an error naming it (the search does not fall back past a broken override). A name found
//! nowhere is an error that lists the directories searched and the embedded names. The
//! search is made each time a ruleset is loaded (no cache of what was found; compiled
//! components are cached by [`crate::plugins::PluginCache`]). `wasp plugin list` prints what
//! the search finds ([`list`]).

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use wasp_plugin::{Plugin, PluginBlock, PluginError, PluginHost};

/// The environment variable of override directories (searched first, `:`-separated).
pub const PLUGIN_PATH_ENV: &str = "WASP_PLUGIN_PATH";

/// The directory beside the executable that is searched second (`<exe dir>/plugins`).
pub const EXE_SUBDIR: &str = "plugins";

/// The system directory, searched third (a package installs no plugins there: they are
/// embedded; an administrator's override goes there).
pub const SYSTEM_DIR: &str = "/usr/lib/wasp/plugins";

/// Where a bundled plugin's component was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A directory of `WASP_PLUGIN_PATH`.
    EnvPath,
    /// `plugins/` beside the executable.
    BesideExe,
    /// [`SYSTEM_DIR`].
    System,
    /// The copy embedded in the binary.
    Embedded,
}

impl Origin {
    /// The origin as `wasp plugin list` names it: `WASP_PLUGIN_PATH`, `beside the
    /// executable`, `system`, `embedded`.
    pub fn label(self) -> &'static str {
        match self {
            Origin::EnvPath => PLUGIN_PATH_ENV,
            Origin::BesideExe => "beside the executable",
            Origin::System => "system",
            Origin::Embedded => "embedded",
        }
    }
}

/// A component to load: a file, or a plugin embedded in the binary (by its name in
/// [`wasp_guests::EMBEDDED`]). Compared and hashed by path or name (the cache key of
/// compiled plugins).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Component {
    /// A `.wasm` file.
    File(PathBuf),
    /// The embedded copy of bundled plugin `NAME` (a name of [`wasp_guests::EMBEDDED`]).
    Embedded(&'static str),
}

impl Component {
    /// The path messages name: the file, or `<embedded>/NAME.wasm`.
    pub fn path(&self) -> PathBuf {
        match self {
            Component::File(p) => p.clone(),
            Component::Embedded(n) => PathBuf::from(format!("<embedded>/{n}.wasm")),
        }
    }

    /// The component's bytes.
    ///
    /// # Errors
    /// [`PluginError::Read`] for a file that cannot be read.
    fn bytes(&self) -> Result<std::borrow::Cow<'static, [u8]>, PluginError> {
        match self {
            Component::File(p) => {
                std::fs::read(p)
                    .map(std::borrow::Cow::Owned)
                    .map_err(|e| PluginError::Read {
                        path: p.clone(),
                        msg: e.to_string(),
                    })
            }
            Component::Embedded(n) => wasp_guests::embedded(n)
                .map(std::borrow::Cow::Borrowed)
                .ok_or_else(|| PluginError::Read {
                    path: self.path(),
                    msg: "no such embedded plugin".to_string(),
                }),
        }
    }

    /// Load it as a plugin (world `wasp-plugin`) with `host`: [`PluginHost::load_bytes`].
    ///
    /// # Errors
    /// The host's error, naming [`Component::path`].
    pub fn load(&self, host: &PluginHost) -> Result<Plugin, PluginError> {
        host.load_bytes(self.path(), &self.bytes()?)
    }

    /// Load it as flowtable offload block `name` configured with `args`
    /// ([`PluginBlock::load_bytes`]).
    ///
    /// # Errors
    /// The host's error, naming [`Component::path`].
    pub fn load_block(
        &self,
        host: &PluginHost,
        name: &str,
        args: &str,
    ) -> Result<PluginBlock, PluginError> {
        PluginBlock::load_bytes(host, self.path(), &self.bytes()?, name, args)
    }
}

impl std::fmt::Display for Component {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.path().display())
    }
}

/// A bare name's component, as the search found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The bare name (`counter`).
    pub name: String,
    /// Where it was found.
    pub origin: Origin,
    /// What to load.
    pub component: Component,
}

/// The directories searched before the embedded copies, in order (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchPath {
    dirs: Vec<(Origin, PathBuf)>,
}

impl SearchPath {
    /// The search of this process: `WASP_PLUGIN_PATH`'s directories, `plugins/` beside the
    /// executable (left out when the executable's path is unknown), [`SYSTEM_DIR`].
    pub fn from_env() -> Self {
        let env = std::env::var_os(PLUGIN_PATH_ENV);
        let exe = std::env::current_exe().ok();
        Self::new(env.as_deref(), exe.as_deref())
    }

    /// The search for a `WASP_PLUGIN_PATH` of `env` (`None`: not set) and an executable at
    /// `exe`.
    pub fn new(env: Option<&std::ffi::OsStr>, exe: Option<&Path>) -> Self {
        let mut dirs: Vec<(Origin, PathBuf)> = env
            .map(|v| {
                std::env::split_paths(v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .map(|p| (Origin::EnvPath, p))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(dir) = exe.and_then(Path::parent) {
            dirs.push((Origin::BesideExe, dir.join(EXE_SUBDIR)));
        }
        dirs.push((Origin::System, PathBuf::from(SYSTEM_DIR)));
        SearchPath { dirs }
    }

    /// Exactly these directories, then the embedded copies (for tests).
    pub fn with_dirs(dirs: Vec<(Origin, PathBuf)>) -> Self {
        SearchPath { dirs }
    }

    /// The directories searched before the embedded copies, in order.
    pub fn dirs(&self) -> &[(Origin, PathBuf)] {
        &self.dirs
    }

    /// The component of bare name `name`: `NAME.wasm` in the first directory that has it
    /// (a file, or a symbolic link to one), else the embedded copy; `None` when neither.
    pub fn find(&self, name: &str) -> Option<Found> {
        let file = format!("{name}.wasm");
        for (origin, dir) in &self.dirs {
            let p = dir.join(&file);
            if p.is_file() {
                return Some(Found {
                    name: name.to_string(),
                    origin: *origin,
                    component: Component::File(p),
                });
            }
        }
        let (embedded, _) = wasp_guests::EMBEDDED.iter().find(|(n, _)| *n == name)?;
        Some(Found {
            name: name.to_string(),
            origin: Origin::Embedded,
            component: Component::Embedded(embedded),
        })
    }

    /// As [`SearchPath::find`], with the error a load reports for a name found nowhere.
    ///
    /// # Errors
    /// [`PluginError::Read`] for `NAME.wasm`: "no plugin of that name in DIR, DIR, ... nor
    /// embedded (embedded: counter, geneve, ...)".
    pub fn require(&self, name: &str) -> Result<Found, PluginError> {
        self.find(name).ok_or_else(|| PluginError::Read {
            path: PathBuf::from(format!("{name}.wasm")),
            msg: format!(
                "no plugin of that name in {}, nor embedded (embedded: {})",
                self.describe_dirs(),
                embedded_names().join(", ")
            ),
        })
    }

    /// The directories as a message lists them: `DIR (WASP_PLUGIN_PATH), DIR, DIR`.
    pub fn describe_dirs(&self) -> String {
        if self.dirs.is_empty() {
            return "no directory".to_string();
        }
        self.dirs
            .iter()
            .map(|(o, d)| match o {
                Origin::EnvPath => format!("{} ({PLUGIN_PATH_ENV})", d.display()),
                _ => d.display().to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Every name the search knows, each as [`SearchPath::find`] finds it, sorted by name:
    /// the embedded ones and every `NAME.wasm` in the directories.
    pub fn all(&self) -> Vec<Found> {
        let mut names: BTreeSet<String> = embedded_names().into_iter().map(String::from).collect();
        for (_, dir) in &self.dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "wasm")
                    && p.is_file()
                    && let Some(stem) = p.file_stem().and_then(|s| s.to_str())
                {
                    names.insert(stem.to_string());
                }
            }
        }
        names.iter().filter_map(|n| self.find(n)).collect()
    }
}

/// The names of the embedded plugins, sorted.
pub fn embedded_names() -> Vec<&'static str> {
    wasp_guests::EMBEDDED.iter().map(|(n, _)| *n).collect()
}

/// What a component is, as `wasp plugin list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// Its version (`describe`'s; `-` for an offload block, whose world has no `describe`, or
    /// a component that does not load).
    pub version: String,
    /// Its kinds (`match`, `statement`, `stateful`, comma-separated), `offload-block`, or
    /// `error` when it does not load.
    pub kinds: String,
    /// Why it does not load (the plugin load's error, on one line).
    pub error: Option<String>,
}

/// Load `c` with `host` and say what it is: a plugin (its `describe`), else an offload block
/// (configured with no arguments), else the plugin load's error.
pub fn describe(host: &PluginHost, c: &Component) -> Described {
    match c.load(host) {
        Ok(p) => {
            let info = p.info();
            let kinds = info
                .kinds
                .iter()
                .map(|k| match k {
                    wasp_core::ExtKind::Match => "match",
                    wasp_core::ExtKind::Statement => "statement",
                    wasp_core::ExtKind::Stateful => "stateful",
                })
                .collect::<Vec<_>>()
                .join(",");
            Described {
                version: info.version.clone(),
                kinds,
                error: None,
            }
        }
        Err(e) => match c.load_block(host, "list", "") {
            Ok(_) => Described {
                version: "-".to_string(),
                kinds: "offload-block".to_string(),
                error: None,
            },
            Err(_) => Described {
                version: "-".to_string(),
                kinds: "error".to_string(),
                error: Some(
                    e.to_string()
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
            },
        },
    }
}

/// `wasp plugin list`: one line per name the search knows (sorted): name, version, kinds,
/// and where it comes from (`embedded`, or the file and which directory of the search), under
/// a header, each followed by `  error: WHY` when its component does not load; then the
/// search order. Loads each component with `host` to ask its version.
///
/// # Errors
/// Those of writing to `out`.
pub fn list(host: &PluginHost, search: &SearchPath, out: &mut dyn Write) -> std::io::Result<()> {
    let mut errors: Vec<Option<String>> = Vec::new();
    let rows: Vec<[String; 4]> = search
        .all()
        .into_iter()
        .map(|f| {
            let d = describe(host, &f.component);
            let from = match &f.component {
                Component::Embedded(_) => "embedded".to_string(),
                Component::File(p) => format!("{} ({})", p.display(), f.origin.label()),
            };
            errors.push(d.error);
            [f.name, d.version, d.kinds, from]
        })
        .collect();
    let header = ["NAME", "VERSION", "KINDS", "FROM"].map(String::from);
    let mut width = [0usize; 3];
    for r in std::iter::once(&header).chain(&rows) {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.len());
        }
    }
    let errors = std::iter::once(None).chain(errors);
    for (r, error) in std::iter::once(&header).chain(&rows).zip(errors) {
        writeln!(
            out,
            "{:<w0$}  {:<w1$}  {:<w2$}  {}",
            r[0],
            r[1],
            r[2],
            r[3],
            w0 = width[0],
            w1 = width[1],
            w2 = width[2]
        )?;
        if let Some(e) = error {
            writeln!(out, "  error: {e}")?;
        }
    }
    writeln!(out)?;
    let mut order = Vec::new();
    if !search.dirs.iter().any(|(o, _)| *o == Origin::EnvPath) {
        order.push(format!("{PLUGIN_PATH_ENV} (not set)"));
    }
    order.extend(search.dirs.iter().map(|(o, d)| match o {
        Origin::EnvPath => format!("{} ({PLUGIN_PATH_ENV})", d.display()),
        _ => d.display().to_string(),
    }));
    order.push("embedded".to_string());
    writeln!(out, "search order: {}", order.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(names: &[&str], bytes: &[u8]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for n in names {
            std::fs::write(d.path().join(format!("{n}.wasm")), bytes).unwrap();
        }
        d
    }

    #[test]
    fn the_search_order_is_env_then_beside_the_exe_then_system() {
        let env = std::ffi::OsString::from("/a::/b");
        let s = SearchPath::new(Some(&env), Some(Path::new("/opt/wasp/bin/wasp")));
        assert_eq!(
            s.dirs(),
            [
                (Origin::EnvPath, PathBuf::from("/a")),
                (Origin::EnvPath, PathBuf::from("/b")),
                (Origin::BesideExe, PathBuf::from("/opt/wasp/bin/plugins")),
                (Origin::System, PathBuf::from(SYSTEM_DIR)),
            ]
        );
        let s = SearchPath::new(None, None);
        assert_eq!(s.dirs(), [(Origin::System, PathBuf::from(SYSTEM_DIR))]);
    }

    #[test]
    fn the_first_directory_with_the_file_wins_then_the_embedded_copy() {
        let first = dir_with(&["geneve"], b"first");
        let second = dir_with(&["geneve", "counter", "mine"], b"second");
        let s = SearchPath::with_dirs(vec![
            (Origin::EnvPath, first.path().to_path_buf()),
            (Origin::System, second.path().to_path_buf()),
        ]);
        let f = s.find("geneve").unwrap();
        assert_eq!(f.origin, Origin::EnvPath);
        assert_eq!(
            f.component,
            Component::File(first.path().join("geneve.wasm"))
        );
        assert_eq!(s.find("counter").unwrap().origin, Origin::System);
        assert_eq!(s.find("mine").unwrap().origin, Origin::System);
        let idle = s.find("idletimer").unwrap();
        assert_eq!(idle.origin, Origin::Embedded);
        assert_eq!(idle.component, Component::Embedded("idletimer"));
        assert_eq!(
            idle.component.path(),
            PathBuf::from("<embedded>/idletimer.wasm")
        );
        assert_eq!(s.find("nothing"), None);
        let e = s.require("nothing").unwrap_err().to_string();
        assert!(
            e.starts_with("nothing.wasm: cannot read: no plugin of that name in "),
            "{e}"
        );
        assert!(
            e.ends_with("nor embedded (embedded: counter, geneve, idletimer, offload_table)"),
            "{e}"
        );
        let names: Vec<String> = s.all().into_iter().map(|f| f.name).collect();
        assert_eq!(
            names,
            ["counter", "geneve", "idletimer", "mine", "offload_table"]
        );
    }

    #[test]
    fn embedded_plugins_load_and_describe_themselves() {
        let host = PluginHost::new(wasp_plugin::HostConfig::default()).unwrap();
        let d = describe(&host, &Component::Embedded("counter"));
        assert_eq!(d.kinds, "stateful,statement", "{d:?}");
        assert!(!d.version.is_empty() && d.version != "-", "{d:?}");
        let d = describe(&host, &Component::Embedded("offload_table"));
        assert_eq!(d.version, "-");
        assert_eq!(d.kinds, "offload-block");
        // A broken override is shown with its error, not replaced by the embedded copy.
        let bad = dir_with(&["counter"], b"not wasm");
        let s = SearchPath::with_dirs(vec![(Origin::EnvPath, bad.path().to_path_buf())]);
        let f = s.find("counter").unwrap();
        let d = describe(&host, &f.component);
        assert_eq!(d.kinds, "error", "{d:?}");
        let why = d.error.unwrap();
        assert!(
            why.contains("counter.wasm: not a valid WebAssembly component: ")
                && !why.contains('\n'),
            "{why}"
        );
        let mut out = Vec::new();
        list(&host, &s, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("NAME "), "{text}");
        assert!(
            lines[1].starts_with("counter ")
                && lines[1].contains(" error ")
                && lines[1].ends_with(&format!(
                    "{} (WASP_PLUGIN_PATH)",
                    bad.path().join("counter.wasm").display()
                )),
            "{text}"
        );
        assert!(lines[2].starts_with("  error: "), "{text}");
        assert!(lines[3].starts_with("geneve ") && lines[3].ends_with(" embedded"));
        assert!(
            lines[5].starts_with("offload_table ") && lines[5].contains(" offload-block "),
            "{text}"
        );
        assert_eq!(lines[6], "");
        assert_eq!(
            lines[7],
            format!(
                "search order: {} (WASP_PLUGIN_PATH), embedded",
                bad.path().display()
            ),
            "{text}"
        );
    }
}
