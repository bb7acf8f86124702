//! `wasp plugin check FILE.wasm`: what a component is to this wasp. The world it implements
//! (from what it exports of `wasp:plugin`), the contract version its `wasp:plugin` names carry
//! against this host's, what it imports (WASI apart),
//! what its `describe` says, and whether this wasp loads it, with the load's own error when
//! not.

use std::fmt::Write as _;
use std::path::Path;

use wasp_plugin::{CONTRACT_VERSION, Interfaces, PluginBlock, PluginHost, Version, contract};

use crate::error::Error;

/// The worlds of `wit/plugin.wit`, by the optional interface that tells each apart (checked
/// in this order).
const WORLDS: [(&str, &str); 4] = [
    ("offload-block", "wasp-offload-block"),
    ("area-match", "wasp-plugin-area"),
    ("fast-match", "wasp-plugin-fast"),
    ("plugin", "wasp-plugin"),
];

/// The interface part of a `wasp:plugin/NAME@VERSION` name, and its version.
fn wasp_name(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix("wasp:plugin/")?.split_once('@')
}

/// `s` on one line, runs of white space as one space.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The report on the component at `path`, and whether this wasp loads it.
///
/// # Errors
/// [`Error::Output`] when the file cannot be read.
pub fn report(host: &PluginHost, path: &Path) -> Result<(String, bool), Error> {
    let bytes = std::fs::read(path).map_err(|e| Error::Output {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut out = String::new();
    let _ = writeln!(out, "file: {} ({} bytes)", path.display(), bytes.len());
    let compiled = match host.compile(path, &bytes) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(out, "loads: no: {}", one_line(&e.to_string()));
            return Ok((out, false));
        }
    };
    let _ = writeln!(
        out,
        "compile: {:.0} ms",
        compiled.compile_time().as_secs_f64() * 1e3
    );
    let Interfaces { imports, exports } = compiled.interfaces();
    let ours: Vec<(&str, &str)> = exports.iter().filter_map(|n| wasp_name(n)).collect();
    match WORLDS
        .iter()
        .find(|(iface, _)| ours.iter().any(|(i, _)| i == iface))
    {
        Some((_, world)) => {
            let names: Vec<&str> = ours.iter().map(|(i, _)| *i).collect();
            let _ = writeln!(out, "world: {world} (exports {})", names.join(", "));
        }
        None => {
            let _ = writeln!(
                out,
                "world: none of wasp's (exports {})",
                if exports.is_empty() {
                    "nothing".to_string()
                } else {
                    exports.join(", ")
                }
            );
        }
    }
    let mut versions: Vec<&str> = ours
        .iter()
        .map(|(_, v)| *v)
        .chain(imports.iter().filter_map(|n| wasp_name(n)).map(|(_, v)| v))
        .collect();
    versions.sort_unstable();
    versions.dedup();
    let ours_v = Version::ours();
    let verdict = match contract::built_against(imports.iter().chain(&exports).map(|s| s.as_str()))
    {
        Ok(Some(_)) => format!("loads 0.{}.0 to {ours_v}", ours_v.minor),
        Ok(None) => "no wasp:plugin names".to_string(),
        Err(e) => format!("refused: {e}"),
    };
    let _ = writeln!(
        out,
        "contract: {} (this wasp: {CONTRACT_VERSION}, {verdict})",
        if versions.is_empty() {
            "none".to_string()
        } else {
            versions.join(", ")
        }
    );
    let (wasi, other): (Vec<&String>, Vec<&String>) =
        imports.iter().partition(|n| n.starts_with("wasi:"));
    let list = |v: &[&String]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        }
    };
    let _ = writeln!(out, "imports: {}", list(&other));
    let _ = writeln!(
        out,
        "wasi: {}{}",
        list(&wasi),
        if wasi.is_empty() {
            ""
        } else {
            " (this wasp links WASI 0.2, deny-all: no files, sockets or environment)"
        }
    );
    let is_block = ours.iter().any(|(i, _)| *i == "offload-block");
    let loaded = if is_block {
        PluginBlock::load_compiled(host, compiled, "check", "").map(|_| {
            let _ = writeln!(out, "kind: offload block");
        })
    } else {
        host.load_compiled(compiled).map(|p| {
            let i = p.info();
            let kinds: Vec<&str> = i
                .kinds
                .iter()
                .map(|k| match k {
                    wasp_core::ExtKind::Match => "match",
                    wasp_core::ExtKind::Statement => "statement",
                    wasp_core::ExtKind::Stateful => "stateful",
                })
                .collect();
            let _ = writeln!(
                out,
                "describe: name {}, version {}, kinds {}, window {} bytes{}, state transfer {}",
                i.name,
                i.version,
                kinds.join(","),
                i.window,
                i.first_window
                    .map(|w| format!(" (first {w})"))
                    .unwrap_or_default(),
                if i.state_transfer { "yes" } else { "no" }
            );
        })
    };
    Ok(match loaded {
        Ok(()) => {
            out.push_str("loads: yes\n");
            (out, true)
        }
        Err(e) => {
            let _ = writeln!(out, "loads: no: {}", one_line(&e.to_string()));
            (out, false)
        }
    })
}
