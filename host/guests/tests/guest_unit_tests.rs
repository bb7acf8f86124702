//! The guest workspaces' own unit tests (the SDK's helpers, the bundled plugins' logic on the
//! shared captures) run natively with `cargo test` in `plugins/`, which is a workspace of its
//! own. This test runs them, so that the README's one test command covers them too.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `cargo test` in the guest workspace `ws`, with an environment cleaned of the outer build's
/// variables and a target dir of its own next to the guests' wasm target dir.
fn cargo_test(ws: &Path) -> std::process::Output {
    let target = PathBuf::from(env!("WASP_GUESTS_OUT"))
        .parent()
        .expect("wasm-guests dir")
        .join("native-target");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(ws)
        .args(["test", "--quiet", "--target-dir"])
        .arg(&target);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        let keep = matches!(key.as_str(), "CARGO_HOME" | "CARGO_NET_OFFLINE");
        if (key.starts_with("CARGO_") && !keep)
            || matches!(
                key.as_str(),
                "RUSTFLAGS" | "RUSTDOCFLAGS" | "RUSTC_WRAPPER" | "RUSTC_WORKSPACE_WRAPPER"
            )
        {
            cmd.env_remove(&key);
        }
    }
    cmd.output().expect("run cargo test in the guest workspace")
}

#[test]
fn plugins_workspace_unit_tests_pass() {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins");
    let out = cargo_test(&ws);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cargo test in {} failed ({}):\n{stdout}\n{stderr}",
        ws.display(),
        out.status
    );
    // The run really ran tests: at least one "test result: ok. N passed" with N > 0.
    let passed: u32 = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("test result: ok. "))
        .filter_map(|l| l.split(' ').next()?.parse::<u32>().ok())
        .sum();
    assert!(passed > 0, "no guest test ran:\n{stdout}\n{stderr}");
}
