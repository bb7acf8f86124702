//! `wasp plugin new NAME --lang L` for each of the five languages: the project it writes builds
//! with its own `build.sh` as it stands, `wasp plugin check` loads the component, `wasp
//! replay` of the project's test capture with its ruleset gives the guides' verdicts, and each
//! language's build hot-swaps for another's in the middle of a replay (`--swap`) with the
//! verdicts unchanged.
//!
//! A language whose toolchain is missing (the languages' READMEs in `sdk/`) is skipped with a
//! message, except under CI (`CI=true`), where `.ci/run` installs every toolchain and a missing
//! one fails the tests.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::*;

const LANGS: [&str; 5] = ["rust", "c", "js", "python", "go"];

/// The first word after the tool's name in `TOOL ARGS` output, or `go env GOVERSION`'s line.
fn version_of(tool: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(tool).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut words = text.split_whitespace();
    Some(match args {
        ["env", ..] => words.next()?.to_string(),
        _ => words.nth(1).unwrap_or_default().to_string(),
    })
}

/// What `lang`'s build needs and is missing (empty: it can build).
fn missing(lang: &str) -> Vec<String> {
    let need = |tool: &str, args: &[&str], want: &str| -> Option<String> {
        match version_of(tool, args) {
            Some(v) if want.is_empty() || v == want => None,
            found => Some(format!(
                "{tool} {want} (found: {})",
                found.unwrap_or_else(|| "none".into())
            )),
        }
    };
    let tools: Vec<Option<String>> = match lang {
        "rust" => vec![need("cargo", &["--version"], "")],
        "c" => vec![
            need("clang-19", &["--version"], ""),
            need("wit-bindgen", &["--version"], "0.61.1"),
            need("wasm-tools", &["--version"], "1.258.3"),
        ],
        "js" => vec![
            need("node", &["--version"], ""),
            need("npm", &["--version"], ""),
        ],
        "python" => vec![need("componentize-py", &["--version"], "0.25.1")],
        "go" => vec![
            need("go", &["env", "GOVERSION"], "go1.27.3"),
            need("wasm-tools", &["--version"], "1.258.3"),
        ],
        _ => unreachable!(),
    };
    tools.into_iter().flatten().collect()
}

/// The project of `lang` (plugin `hop`), written by `wasp plugin new` and built with its
/// `build.sh`, once per test run; `None` (after saying why) when the toolchain is missing
/// outside CI.
fn project(lang: &str) -> Option<&'static Path> {
    static BUILT: [OnceLock<Option<PathBuf>>; 5] = [const { OnceLock::new() }; 5];
    let i = LANGS.iter().position(|l| *l == lang).unwrap();
    BUILT[i]
        .get_or_init(|| {
            let miss = missing(lang);
            if !miss.is_empty() {
                let msg = format!(
                    "the {lang} plugin toolchain is missing: {}; see sdk/{lang}/README.md",
                    miss.join(", ")
                );
                assert!(std::env::var("CI").as_deref() != Ok("true"), "{msg}");
                let _ = writeln!(std::io::stderr(), "skipping {lang}: {msg}");
                return None;
            }
            let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-new");
            let dir = root.join(lang);
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&root).unwrap();
            let out = wasp(
                &root,
                &["plugin", "new", "hop", "--lang", lang, "--dir", lang],
            );
            let (so, se) = text(&out);
            assert!(out.status.success(), "plugin new --lang {lang}: {so}{se}");
            assert!(so.contains("README.md"), "{so}");
            let mut build = Command::new("bash");
            build.arg("build.sh").current_dir(&dir);
            if lang == "rust" {
                // The Rust projects share one target directory (the SDK's dependencies build
                // once per machine, not once per run).
                build.env("CARGO_TARGET_DIR", root.join("rust-target"));
            }
            let b = build.output().expect("run build.sh");
            let (so, se) = text(&b);
            assert!(b.status.success(), "{lang} build.sh failed:\n{so}\n{se}");
            assert!(dir.join("hop.wasm").exists(), "{lang}: no hop.wasm");
            Some(dir)
        })
        .as_deref()
}

/// The guides' verdicts on `test/ttl.pcap` under `hop 64 counter drop`: TTL 1 and 63 and hop
/// limit 10 are below 64; TTL 64 and 200, hop limit 255 and the ARP request are not.
const VERDICTS: [&str; 7] = [
    "drop", "drop", "accept", "accept", "drop", "accept", "accept",
];

/// The verdict words of a `--verdicts` file.
fn verdicts(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap().to_string())
        .collect()
}

#[test]
fn every_languages_project_builds_as_written_and_gives_the_guides_verdicts() {
    for lang in LANGS {
        let Some(dir) = project(lang) else { continue };
        let out = wasp(dir, &["plugin", "check", "hop.wasm"]);
        let (so, se) = text(&out);
        assert!(out.status.success(), "{lang}: {so}{se}");
        assert!(so.contains("describe: name hop, version"), "{lang}: {so}");
        assert!(
            so.contains("contract: 0.1.3 (this wasp: 0.1.3, loads"),
            "{lang}: {so}"
        );
        assert!(so.ends_with("loads: yes\n"), "{lang}: {so}");
        let v = dir.join("out/verdicts.txt");
        let out = wasp(
            dir,
            &[
                "replay",
                "--ruleset",
                "hop.nft",
                "--in",
                "test/ttl.pcap",
                "--out",
                "out",
                "--verdicts",
                "out/verdicts.txt",
            ],
        );
        let (so, se) = text(&out);
        assert!(out.status.success(), "{lang}: {so}{se}");
        assert_eq!(verdicts(&v), VERDICTS, "{lang}");
        assert!(
            so.contains("hop_test in handle 2: counter packets 3 "),
            "{lang}: {so}"
        );
    }
}

#[test]
fn each_languages_build_hot_swaps_for_anothers_mid_replay() {
    let built: Vec<(&str, &Path)> = LANGS
        .iter()
        .filter_map(|l| project(l).map(|d| (*l, d)))
        .collect();
    let Some((first, dir)) = built.first() else {
        return;
    };
    // The first language's project replays; after packet 1 the next language's build takes
    // over, and so on, and the first comes back at the end.
    let mut order: Vec<&(&str, &Path)> = built.iter().skip(1).collect();
    order.push(&built[0]);
    let swaps: Vec<String> = order
        .iter()
        .enumerate()
        .map(|(i, (_, d))| format!("hop={}@{}", d.join("hop.wasm").display(), i + 1))
        .collect();
    let mut args = vec![
        "replay",
        "--ruleset",
        "hop.nft",
        "--in",
        "test/ttl.pcap",
        "--out",
        "out-swap",
        "--verdicts",
        "out-swap/verdicts.txt",
        "--json",
    ];
    for s in &swaps {
        args.extend(["--swap", s.as_str()]);
    }
    let out = wasp(dir, &args);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{first}: {so}{se}");
    assert_eq!(verdicts(&dir.join("out-swap/verdicts.txt")), VERDICTS);
    let summary: serde_json::Value = serde_json::from_str(&so).expect("json summary");
    let swapped = summary["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["text"]
                .as_str()
                .unwrap()
                .starts_with("plugin hop swapped")
        })
        .count();
    assert_eq!(swapped, swaps.len(), "{so}");
}
