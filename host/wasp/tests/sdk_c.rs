//! The C guide's example (`sdk/c`): `ttlbelow N` built by the guide's script (`sdk/c/build.sh`:
//! wit-bindgen c, clang-19 for wasm32-wasi, wasm-tools component new), then loaded by `wasp
//! replay` and `wasp check`: its per-packet results on the guides' capture
//! (`sdk/testdata/ttl.pcap`), its configure refusals at the rule's file:line:col, and no WASI
//! in its imports.
//!
//! Without the C toolchain (README of `sdk/c`) the tests say so and pass, except under CI
//! (`CI=true`), where `.ci/run` installs the toolchain and a missing tool fails them.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::*;

/// The tools the build script needs, with the versions it checks (`sdk/c/build.sh`).
const TOOLS: [(&str, &str); 3] = [
    ("clang-19", ""),
    ("wit-bindgen", "0.61.1"),
    ("wasm-tools", "1.258.3"),
];

/// What is missing of the toolchain, if anything.
fn missing_tools() -> Vec<String> {
    TOOLS
        .iter()
        .filter_map(|(tool, version)| {
            let out = Command::new(tool).arg("--version").output().ok();
            let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
            let found = |t: &str| {
                t.split_whitespace()
                    .any(|w| version.is_empty() || w == *version)
            };
            match text {
                Some(t) if found(&t) => None,
                Some(t) => Some(format!("{tool} {version} (found: {})", t.trim())),
                None => Some(format!("{tool} {version}").trim().to_string()),
            }
        })
        .collect()
}

/// The component, built once per test run into the target's temporary directory; `None`
/// (after saying why) when the toolchain is missing outside CI.
fn component() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| build_sdk_example("c", &missing_tools()))
        .as_deref()
}

/// A directory holding the component (as `ttlbelow.wasm`), the guides' capture and `rules`
/// as `r.nft`.
fn setup(wasm: &Path, rules: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(wasm, tmp.path().join("ttlbelow.wasm")).unwrap();
    std::fs::copy(
        repo().join("sdk/testdata/ttl.pcap"),
        tmp.path().join("ttl.pcap"),
    )
    .unwrap();
    std::fs::write(tmp.path().join("r.nft"), rules).unwrap();
    tmp
}

#[test]
fn the_c_example_matches_packets_whose_ttl_is_below_its_argument() {
    let Some(wasm) = component() else { return };
    // Two use sites with their own limits: `ttlbelow 2` (rule handle 2) decides packets with
    // TTL 1; `ttlbelow 64` (handle 3) those with 2..=63; the others reach the policy.
    let rules = "table netdev guides {\n\tplugin ttlbelow { path \"ttlbelow.wasm\"; }\n\tchain in {\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n\t\tttlbelow 2 drop\n\t\tttlbelow 64 drop\n\t}\n}\n";
    let tmp = setup(wasm, rules);
    let out = wasp(
        tmp.path(),
        &[
            "replay",
            "--ruleset",
            "r.nft",
            "--in",
            "ttl.pcap",
            "--out",
            "out",
            "--verdicts",
            "v.txt",
        ],
    );
    let (so, se) = text(&out);
    assert!(out.status.success(), "{so}\n{se}");
    // The expected verdicts, from the capture's own bytes.
    let frames = read_frames(&tmp.path().join("ttl.pcap"));
    let ttls: Vec<Option<u8>> = frames.iter().map(|(_, f)| ttl(f)).collect();
    assert_eq!(
        ttls,
        [
            Some(1),
            Some(63),
            Some(64),
            Some(200),
            Some(10),
            Some(255),
            None
        ]
    );
    let want: Vec<String> = ttls
        .iter()
        .enumerate()
        .map(|(i, t)| match t {
            Some(t) if *t < 2 => format!("{} drop guides in 2", i + 1),
            Some(t) if *t < 64 => format!("{} drop guides in 3", i + 1),
            _ => format!("{} accept guides in policy", i + 1),
        })
        .collect();
    let got = std::fs::read_to_string(tmp.path().join("v.txt")).unwrap();
    assert_eq!(got.lines().collect::<Vec<_>>(), want);
    // And the same packets in the output captures.
    let dropped = read_frames(&tmp.path().join("out/dropped.pcap"));
    assert_eq!(dropped.len(), 3);
    assert_eq!(dropped[2].1, frames[4].1);
}

#[test]
fn the_c_example_refuses_bad_arguments_at_the_rule() {
    let Some(wasm) = component() else { return };
    for (args, msg) in [
        ("0", "ttlbelow: \"0\" is not a number in 1..=255"),
        ("256", "ttlbelow: \"256\" is not a number in 1..=255"),
        ("ten", "ttlbelow: \"ten\" is not a number in 1..=255"),
        ("1 2", "usage: ttlbelow N (N in 1..=255)"),
    ] {
        let rules = format!(
            "table netdev guides {{\n\tplugin ttlbelow {{ path \"ttlbelow.wasm\"; }}\n\tchain in {{\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n\t\tttlbelow {args} drop\n\t}}\n}}\n"
        );
        let tmp = setup(wasm, &rules);
        let out = wasp(tmp.path(), &["check", "r.nft"]);
        let (so, se) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args}: {so}\n{se}");
        assert!(se.contains("r.nft:5:3"), "{args}: {se}");
        assert!(se.contains(msg), "{args}: {se}");
    }
}

#[test]
fn the_c_example_imports_only_the_wasp_host() {
    let Some(wasm) = component() else { return };
    let out = Command::new("wasm-tools")
        .args(["component", "wit"])
        .arg(wasm)
        .output()
        .expect("run wasm-tools");
    let (wit, se) = text(&out);
    assert!(out.status.success(), "{se}");
    let imports: Vec<&str> = wit
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("import "))
        .collect();
    // Only the contract's interfaces (`types`; `host` too when the plugin calls it), no WASI.
    assert!(!imports.is_empty(), "{wit}");
    assert!(
        imports
            .iter()
            .all(|i| i.starts_with("import wasp:plugin/") && i.ends_with("@0.1.3;")),
        "{wit}"
    );
    assert!(!wit.contains("wasi:"), "{wit}");
    assert!(wit.contains("export wasp:plugin/plugin@0.1.3;"), "{wit}");
}
