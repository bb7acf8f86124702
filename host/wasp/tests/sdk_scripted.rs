//! The JavaScript and Python guides (`sdk/js`, `sdk/python`): their examples and misbehaving
//! plugins built by each guide's script (`build.sh`: componentize-js pinned in
//! `sdk/js/package-lock.json`; componentize-py 0.25.1), then run by `wasp replay` and `wasp
//! check`, the same tests for both languages:
//! - `ttlbelow N`: its per-packet results on the guides' capture (`sdk/testdata/ttl.pcap`) and
//!   a refused argument at the rule's file:line:col;
//! - `srccount N` (stateful): its verdicts and listing on `sdk/testdata/srccount.pcap`, and
//!   hot swaps to the other language's build and back (`--swap`) that carry the counts;
//! - `tests/guests/{js,python}/misbehave.*`: a loop without end, an uncaught exception, an
//!   allocation without bound and a flood of stdout, each contained by the host.
//!
//! Without a language's toolchain (Node.js and npm; componentize-py 0.25.1 on PATH) its tests
//! say so and pass, except under CI (`CI=true`), where `.ci/run` installs them and a missing
//! tool fails them.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::*;

/// A scripted language of the guides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    Js,
    Python,
}

/// A component each guide builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Example {
    Ttlbelow,
    Srccount,
    Misbehave,
}

impl Lang {
    /// The guide's directory under `sdk/`.
    fn dir(self) -> &'static str {
        match self {
            Lang::Js => "js",
            Lang::Python => "python",
        }
    }

    fn other(self) -> Lang {
        match self {
            Lang::Js => Lang::Python,
            Lang::Python => Lang::Js,
        }
    }

    /// What of the toolchain is missing, if anything.
    fn missing(self) -> Option<String> {
        match self {
            Lang::Js => {
                let missing: Vec<&str> = ["node", "npm"]
                    .into_iter()
                    .filter(|t| version(t).is_none())
                    .collect();
                (!missing.is_empty()).then(|| format!("{} missing", missing.join(", ")))
            }
            Lang::Python => {
                let have = version("componentize-py");
                (have.as_deref() != Some("componentize-py 0.25.1")).then(|| {
                    format!(
                        "componentize-py 0.25.1 is missing (found: {})",
                        have.as_deref().unwrap_or("none")
                    )
                })
            }
        }
    }

    /// The line an uncaught exception of the misbehaving plugin leaves in the log.
    fn exception_line(self) -> &'static str {
        match self {
            Lang::Js => "stderr: misbehave: thrown on purpose",
            Lang::Python => "stderr: RuntimeError: misbehave: raised on purpose",
        }
    }
}

/// Say why a test does not run; under CI that is a failure.
fn skip(msg: &str) {
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{msg}");
    // Straight to stderr, past the test harness's capture, so a passing run says so.
    let _ = writeln!(std::io::stderr(), "skipping: {msg}");
}

/// The first line `cmd --version` prints, or None when it does not run.
fn version(cmd: &str) -> Option<String> {
    let out = Command::new(cmd).arg("--version").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Component `what` of `lang`, built once per test run with `sdk/<lang>/build.sh` into the
/// target's temporary directory; `None` (after saying why) when the toolchain is missing
/// outside CI.
fn component(lang: Lang, what: Example) -> Option<&'static Path> {
    static BUILT: [OnceLock<Option<PathBuf>>; 6] = [const { OnceLock::new() }; 6];
    let i = lang as usize * 3 + what as usize;
    BUILT[i]
        .get_or_init(|| {
            if let Some(why) = lang.missing() {
                skip(&format!(
                    "the sdk/{} tests: {why}; see sdk/{}/README.md",
                    lang.dir(),
                    lang.dir()
                ));
                return None;
            }
            let (src, out) = match what {
                Example::Ttlbelow => ("ttlbelow".to_string(), "ttlbelow.wasm"),
                Example::Srccount => ("srccount".to_string(), "srccount.wasm"),
                Example::Misbehave => {
                    let file = match lang {
                        Lang::Js => "misbehave.js",
                        Lang::Python => "misbehave.py",
                    };
                    (
                        format!("tests/guests/{}/{file}", lang.dir()),
                        "misbehave.wasm",
                    )
                }
            };
            Some(build(lang.dir(), &src, out))
        })
        .as_deref()
}

/// Build `src` (an example's name or a file) with `sdk/{lang}/build.sh` into the target's
/// temporary directory as `out`.
fn build(lang: &str, src: &str, out: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("sdk-{lang}"));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(out);
    let _ = std::fs::remove_file(&out);
    let started = std::time::Instant::now();
    let run = Command::new("bash")
        .arg(repo().join(format!("sdk/{lang}/build.sh")))
        .arg(src)
        .arg(&out)
        .current_dir(repo())
        .output()
        .expect("run build.sh");
    let (so, se) = text(&run);
    assert!(
        run.status.success(),
        "sdk/{lang}/build.sh {src}:\n{so}\n{se}"
    );
    let _ = writeln!(
        std::io::stderr(),
        "built {} in {:.1} s",
        out.display(),
        started.elapsed().as_secs_f64()
    );
    out
}

/// A directory holding `files` (copied under their names) and `rules` as `r.nft`.
fn setup(files: &[(&Path, &str)], rules: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for (from, name) in files {
        std::fs::copy(from, tmp.path().join(name)).unwrap();
    }
    std::fs::write(tmp.path().join("r.nft"), rules).unwrap();
    tmp
}

/// `wasp replay --ruleset r.nft --in CAPTURE --verdicts v.txt --json` in `dir` with `extra`
/// arguments: the verdict lines and the JSON summary. Fails the test unless it exits 0.
fn replay(dir: &Path, capture: &str, extra: &[&str]) -> (Vec<String>, serde_json::Value, String) {
    let mut args = vec![
        "replay",
        "--ruleset",
        "r.nft",
        "--in",
        capture,
        "--out",
        "out",
        "--verdicts",
        "v.txt",
        "--json",
    ];
    args.extend_from_slice(extra);
    let started = std::time::Instant::now();
    let out = wasp(dir, &args);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{so}\n{se}");
    let _ = writeln!(
        std::io::stderr(),
        "wasp replay {capture} {extra:?}: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let verdicts = std::fs::read_to_string(dir.join("v.txt")).unwrap();
    let summary = serde_json::from_str(&so).unwrap_or_else(|e| panic!("{e}: {so}"));
    (verdicts.lines().map(String::from).collect(), summary, se)
}

/// The IPv4 or IPv6 source address of an untagged Ethernet frame (None for other frames).
fn source(frame: &[u8]) -> Option<&[u8]> {
    match u16::from_be_bytes([frame[12], frame[13]]) {
        0x0800 => frame.get(14 + 12..14 + 16),
        0x86dd => frame.get(14 + 8..14 + 24),
        _ => None,
    }
}

/// The verdict lines `srccount 2 counter drop` (rule handle 2 of `sdk/testdata/srccount.nft`)
/// gives the frames of `capture` when every packet is counted: drop once the source's count,
/// this packet included, is above 2.
fn srccount_verdicts(capture: &Path) -> Vec<String> {
    let mut counts: HashMap<Vec<u8>, u64> = HashMap::new();
    read_frames(capture)
        .iter()
        .enumerate()
        .map(|(i, (_, f))| {
            let n = source(f).map(|s| {
                let c = counts.entry(s.to_vec()).or_default();
                *c += 1;
                *c
            });
            match n {
                Some(n) if n > 2 => format!("{} drop guides in 2", i + 1),
                _ => format!("{} accept guides in policy", i + 1),
            }
        })
        .collect()
}

/// The srccount listing after the whole of `sdk/testdata/srccount.pcap`: A sent 6 packets, B 2,
/// C 4 (`sdk/testdata/make-srccount-capture.py`), sorted by address.
const SRCCOUNT_STATE: [&str; 3] = [
    "packets 6 (10.0.0.1)",
    "packets 2 (10.0.0.2)",
    "packets 4 (fd00::3)",
];

/// The `plugin_state` of a replay's JSON summary: (where, plugin, entries).
fn plugin_state(summary: &serde_json::Value) -> Vec<(String, String, Vec<String>)> {
    summary["plugin_state"]
        .as_array()
        .expect("plugin_state")
        .iter()
        .map(|s| {
            (
                s["at"].as_str().unwrap().to_string(),
                s["plugin"].as_str().unwrap().to_string(),
                s["state"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect()
}

/// The texts of a replay's events (the summary leaves the list out when there is none).
fn events(summary: &serde_json::Value) -> Vec<String> {
    summary["events"]
        .as_array()
        .map(|ev| {
            ev.iter()
                .map(|e| e["text"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// `ttlbelow N` of `lang`: its per-packet results on the guides' capture.
fn ttlbelow_matches(lang: Lang) {
    let Some(ttlbelow) = component(lang, Example::Ttlbelow) else {
        return;
    };
    // Two use sites with their own limits: `ttlbelow 2` (rule handle 2) decides packets with
    // TTL 1; `ttlbelow 64` (handle 3) those with 2..=63; the others reach the policy.
    let rules = "table netdev guides {\n\tplugin ttlbelow { path \"ttlbelow.wasm\"; }\n\tchain in {\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n\t\tttlbelow 2 drop\n\t\tttlbelow 64 drop\n\t}\n}\n";
    let pcap = repo().join("sdk/testdata/ttl.pcap");
    let tmp = setup(&[(ttlbelow, "ttlbelow.wasm"), (&pcap, "ttl.pcap")], rules);
    let (got, summary, _) = replay(tmp.path(), "ttl.pcap", &[]);
    let ttls: Vec<Option<u8>> = read_frames(&pcap).iter().map(|(_, f)| ttl(f)).collect();
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
    assert_eq!(got, want);
    assert_eq!(summary["dropped"], 3, "{summary}");
    assert_eq!(
        events(&summary),
        Vec::<String>::new(),
        "no failure: {summary}"
    );
}

/// `ttlbelow 256` of `lang`: refused at the rule, with the plugin's own message.
fn ttlbelow_refuses(lang: Lang) {
    let Some(ttlbelow) = component(lang, Example::Ttlbelow) else {
        return;
    };
    let rules = "table netdev guides {\n\tplugin ttlbelow { path \"ttlbelow.wasm\"; }\n\tchain in {\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n\t\tudp dport 53 ttlbelow 256 drop\n\t}\n}\n";
    let tmp = setup(&[(ttlbelow, "ttlbelow.wasm")], rules);
    let out = wasp(tmp.path(), &["check", "r.nft"]);
    let (so, se) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{so}\n{se}");
    assert!(
        se.contains("r.nft:5:16: error: plugin `ttlbelow` refuses this use: ttlbelow: \"256\" is not a number in 1..=255"),
        "{se}"
    );
}

/// `srccount 2` of `lang`: its verdicts and listing on `sdk/testdata/srccount.pcap`.
fn srccount_counts(lang: Lang) {
    let Some(srccount) = component(lang, Example::Srccount) else {
        return;
    };
    let pcap = repo().join("sdk/testdata/srccount.pcap");
    let rules = std::fs::read_to_string(repo().join("sdk/testdata/srccount.nft")).unwrap();
    let tmp = setup(
        &[(srccount, "srccount.wasm"), (&pcap, "srccount.pcap")],
        &rules,
    );
    let (got, summary, _) = replay(tmp.path(), "srccount.pcap", &[]);
    let want = srccount_verdicts(&pcap);
    // The capture's plan (make-srccount-capture.py): 5, 8, 10, 11, 12 and 13 are dropped.
    let dropped: Vec<usize> = want
        .iter()
        .enumerate()
        .filter(|(_, v)| v.contains(" drop "))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(dropped, [5, 8, 10, 11, 12, 13]);
    assert_eq!(got, want);
    assert_eq!(
        plugin_state(&summary),
        [(
            "r.nft:7:3".to_string(),
            "srccount".to_string(),
            SRCCOUNT_STATE.map(String::from).to_vec()
        )],
        "{summary}"
    );
}

/// srccount of `lang` swapped to the other language's build and back, mid-replay.
fn srccount_swaps(lang: Lang) {
    let Some(srccount) = component(lang, Example::Srccount) else {
        return;
    };
    let Some(other) = component(lang.other(), Example::Srccount) else {
        return;
    };
    let pcap = repo().join("sdk/testdata/srccount.pcap");
    let rules = std::fs::read_to_string(repo().join("sdk/testdata/srccount.nft")).unwrap();
    let tmp = setup(
        &[
            (srccount, "srccount.wasm"),
            (other, "srccount-other.wasm"),
            (&pcap, "srccount.pcap"),
        ],
        &rules,
    );
    // To the other language after packet 6 (counts then: 10.0.0.1 3, 10.0.0.2 1, fd00::3 1),
    // back after packet 10. Packets 8 and 10 are dropped only if the other build got the
    // counts (fresh, 10.0.0.1 would be at 1 on packet 8), 11 to 13 only if they came back.
    let (got, summary, _) = replay(
        tmp.path(),
        "srccount.pcap",
        &[
            "--swap",
            "srccount=srccount-other.wasm@6",
            "--swap",
            "srccount=srccount.wasm@10",
        ],
    );
    assert_eq!(got, srccount_verdicts(&pcap));
    let ev = events(&summary);
    assert_eq!(ev.len(), 2, "{ev:?}");
    for e in &ev {
        // 59 bytes: the blob of 10.0.0.1, 10.0.0.2 and fd00::3 (8 + 13 + 13 + 25).
        assert!(
            e.starts_with("plugin srccount swapped") && e.ends_with("state carried (59 bytes)"),
            "{ev:?}"
        );
    }
    assert_eq!(
        plugin_state(&summary)[0].2,
        SRCCOUNT_STATE.map(String::from).to_vec(),
        "{summary}"
    );
}

/// `lang`'s misbehaving plugin: each failure contained, the fallback given, events reported.
fn misbehaving_is_contained(lang: Lang) {
    let Some(misbehave) = component(lang, Example::Misbehave) else {
        return;
    };
    let pcap = repo().join("sdk/testdata/ttl.pcap");
    // One worker, four failures in a row, each in its own use site (handles 2 to 5), with
    // the default fallback (the match is false: their counters stay at 0); then a site that
    // behaves (it counts all 7 packets: the worker and the plugin are still there), and a
    // failing site with `fallback drop`, which drops every packet.
    let rules = "table netdev t {\n\tplugin misbehave { path \"misbehave.wasm\"; }\n\tchain in {\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n\t\tmisbehave loop counter\n\t\tmisbehave throw counter\n\t\tmisbehave bomb counter\n\t\tmisbehave spam counter\n\t\tmisbehave ok counter\n\t\tmisbehave throw fallback drop\n\t}\n}\n";
    let tmp = setup(&[(misbehave, "misbehave.wasm"), (&pcap, "ttl.pcap")], rules);
    let (got, summary, log) = replay(tmp.path(), "ttl.pcap", &[]);
    let want: Vec<String> = (1..=7).map(|i| format!("{i} drop t in 7")).collect();
    assert_eq!(got, want);
    let counts: Vec<(u64, u64)> = summary["counters"]
        .as_array()
        .expect("counters")
        .iter()
        .map(|c| (c["rule"].as_u64().unwrap(), c["packets"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        counts,
        [(2, 0), (3, 0), (4, 0), (5, 0), (6, 7)],
        "{summary}"
    );
    // Each failing site's events give its reason (and say when it backs off); the site that
    // behaves has none.
    let mut by_site: Vec<(u32, Vec<&str>)> = Vec::new();
    let ev = events(&summary);
    for e in &ev {
        let site: u32 = e
            .split("use site ")
            .nth(1)
            .and_then(|r| r.split([':', ' ']).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no use site in {e:?}"));
        let why = [
            "hit its deadline",
            "trapped",
            "hit its memory limit",
            "backing off",
        ]
        .into_iter()
        .find(|w| e.contains(w))
        .unwrap_or_else(|| panic!("unexpected event {e:?}"));
        match by_site.iter_mut().find(|(s, _)| *s == site) {
            Some((_, w)) => w.push(why),
            None => by_site.push((site, vec![why])),
        }
    }
    by_site.sort();
    let want = [
        "hit its deadline",
        "trapped",
        "hit its memory limit",
        "hit its deadline",
        "trapped",
    ];
    assert_eq!(by_site.len(), want.len(), "{ev:?}");
    for ((site, got), want) in by_site.iter().zip(want) {
        assert_eq!(got[0], want, "site {site}: {ev:?}");
        assert!(
            got.iter().all(|w| *w == want || *w == "backing off"),
            "site {site}: {ev:?}"
        );
    }
    // The uncaught exception reached the log (stdio is on in both guides' builds).
    assert!(log.contains(lang.exception_line()), "{log}");
    // The flood of stdout reached the log, cut by its rate limit.
    assert!(log.contains("stdout: misbehave: spam line 0"), "{log}");
    assert!(
        log.contains("log lines of this plugin dropped"),
        "no rate limit: {} lines of spam",
        log.matches("spam line").count()
    );
}

#[test]
fn the_js_example_matches_packets_whose_ttl_is_below_its_argument() {
    ttlbelow_matches(Lang::Js);
}

#[test]
fn the_python_example_matches_packets_whose_ttl_is_below_its_argument() {
    ttlbelow_matches(Lang::Python);
}

#[test]
fn the_js_example_refuses_a_bad_argument_at_the_rule() {
    ttlbelow_refuses(Lang::Js);
}

#[test]
fn the_python_example_refuses_a_bad_argument_at_the_rule() {
    ttlbelow_refuses(Lang::Python);
}

#[test]
fn srccount_in_js_counts_per_source_and_lists_the_counts() {
    srccount_counts(Lang::Js);
}

#[test]
fn srccount_in_python_counts_per_source_and_lists_the_counts() {
    srccount_counts(Lang::Python);
}

#[test]
fn srccount_swapped_from_js_to_python_and_back_carries_the_counts() {
    srccount_swaps(Lang::Js);
}

#[test]
fn srccount_swapped_from_python_to_js_and_back_carries_the_counts() {
    srccount_swaps(Lang::Python);
}

#[test]
fn misbehaving_js_plugins_are_contained() {
    misbehaving_is_contained(Lang::Js);
}

#[test]
fn misbehaving_python_plugins_are_contained() {
    misbehaving_is_contained(Lang::Python);
}
