//! Builds the guest workspaces (bundled plugins, test guests) for `wasm32-wasip2` with a nested
//! `cargo build --release`, into a target dir of their own (the outer build holds the lock of
//! its own target dir), and copies each workspace's `.wasm` files into
//! `<target>/wasm-guests/out/<label>/`. The paths reach the library through `rustc-env`.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The guest workspaces, as (label, directory relative to the repository root). The label names
/// the output directory: `plugins` is [`plugin_dir`](../src/lib.rs), `tests-guests` holds the
/// test guests. Add a line here for a new guest workspace.
const GUEST_WORKSPACES: &[(&str, &str)] =
    &[("plugins", "plugins"), ("tests-guests", "tests/guests")];

/// Inputs outside the workspaces that the guests build from (the SDK, the WIT contract).
const SHARED_INPUTS: &[&str] = &["sdk/rust", "wit"];

/// The guest target.
const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest.join("../..");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let guests_dir = guest_target_dir(&out_dir);
    let target_dir = guests_dir.join("target");

    for input in SHARED_INPUTS {
        rerun_on_tree(&root.join(input));
    }
    println!("cargo:rerun-if-changed=build.rs");

    check_target_installed();

    for (label, dir) in GUEST_WORKSPACES {
        let ws = root.join(dir);
        rerun_on_tree(&ws);
        let dest = guests_dir.join("out").join(label);
        if !ws.join("Cargo.toml").exists() {
            println!(
                "cargo:warning=guest workspace {} has no Cargo.toml: skipped",
                ws.display()
            );
            continue;
        }
        let wasm = build_workspace(&ws, &target_dir);
        fs::create_dir_all(&dest)
            .unwrap_or_else(|e| fail(&format!("mkdir {}: {e}", dest.display())));
        for file in wasm {
            let name = file.file_name().expect("artifact has a file name");
            let to = dest.join(name);
            copy_if_changed(&file, &to);
        }
    }
    println!(
        "cargo:rustc-env=WASP_GUESTS_OUT={}",
        guests_dir.join("out").display()
    );
}

/// `<target dir>/wasm-guests`, shared by every profile of the outer build: the outer target
/// dir is the nearest ancestor of `OUT_DIR` that holds cargo's `CACHEDIR.TAG`. Without one
/// (a target dir cargo did not create), the profile dir: `OUT_DIR` is
/// `<profile>/build/<pkg>/out`.
fn guest_target_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .find(|dir| dir.join("CACHEDIR.TAG").is_file())
        .or_else(|| out_dir.ancestors().nth(3))
        .unwrap_or(out_dir)
        .join("wasm-guests")
}

/// Makes sure rustup's `wasm32-wasip2` target is installed: when it is missing, asks rustup to
/// add it to the toolchain of this build (so a fresh clone builds with one command, also where
/// `RUSTUP_AUTO_INSTALL=0` keeps rust-toolchain.toml's `targets` from being installed), and
/// fails the build with a clear message when that does not work.
fn check_target_installed() {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let missing = || match Command::new(&rustc)
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
    {
        Ok(out) if out.status.success() => {
            let dir = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            !has_core_rlib(Path::new(&dir))
        }
        _ => true,
    };
    if missing() {
        let mut add = Command::new("rustup");
        add.args(["target", "add", TARGET]);
        if let Some(tc) = env::var_os("RUSTUP_TOOLCHAIN") {
            add.arg("--toolchain").arg(tc);
        }
        match add.status() {
            Ok(st) if st.success() => {
                println!("cargo:warning=installed the Rust target {TARGET} with rustup")
            }
            _ => {}
        }
    }
    if missing() {
        fail(&format!(
            "the Rust target {TARGET} is not installed, and wasp-guests builds the plugins for \
             it.\n  Install it with: rustup target add {TARGET}"
        ));
    }
}

fn has_core_rlib(dir: &Path) -> bool {
    fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("libcore-") && name.ends_with(".rlib")
        })
    })
}

/// Runs `cargo build --release --target wasm32-wasip2` in `ws` with a clean environment and
/// returns the `.wasm` artifacts it reports.
fn build_workspace(ws: &Path, target_dir: &Path) -> Vec<PathBuf> {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(ws)
        .args([
            "build",
            "--release",
            "--target",
            TARGET,
            "--message-format=json-render-diagnostics",
        ])
        .arg("--target-dir")
        .arg(target_dir);
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        let keep = matches!(
            key.as_str(),
            "CARGO_HOME" | "CARGO_MAKEFLAGS" | "CARGO_NET_OFFLINE"
        );
        let drop = (key.starts_with("CARGO_") && !keep)
            || key.starts_with("DEP_")
            || matches!(
                key.as_str(),
                "RUSTFLAGS"
                    | "RUSTDOCFLAGS"
                    | "RUSTC"
                    | "RUSTC_WRAPPER"
                    | "RUSTC_WORKSPACE_WRAPPER"
                    | "RUSTC_LINKER"
                    | "OUT_DIR"
                    | "TARGET"
                    | "HOST"
                    | "PROFILE"
                    | "OPT_LEVEL"
                    | "DEBUG"
                    | "NUM_JOBS"
            );
        if drop {
            cmd.env_remove(&key);
        }
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| fail(&format!("cannot run cargo for {}: {e}", ws.display())));
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let mut msg = format!(
            "building the guests in {} for {TARGET} failed ({}):\n{stderr}",
            ws.display(),
            out.status
        );
        if stderr.contains("may not be installed") || stderr.contains("can't find crate for `core`")
        {
            msg.push_str(&format!(
                "\n  Install the target with: rustup target add {TARGET}"
            ));
        }
        fail(&msg);
    }
    let mut wasm = Vec::new();
    for line in stdout
        .lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\""))
    {
        for piece in line.split('"') {
            if piece.ends_with(".wasm") {
                let path = PathBuf::from(piece);
                if !wasm.contains(&path) {
                    wasm.push(path);
                }
            }
        }
    }
    wasm
}

/// Copies `from` to `to` unless `to` already has the same bytes (keeps mtimes still on a no-op).
fn copy_if_changed(from: &Path, to: &Path) {
    let new = fs::read(from).unwrap_or_else(|e| fail(&format!("read {}: {e}", from.display())));
    if fs::read(to).is_ok_and(|old| old == new) {
        return;
    }
    fs::write(to, new).unwrap_or_else(|e| fail(&format!("write {}: {e}", to.display())));
}

/// `cargo:rerun-if-changed` for every file under `dir`, skipping `target` and hidden
/// directories (a directory itself is not named: cargo would scan a guest's own `target`).
fn rerun_on_tree(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            rerun_on_tree(&path);
        } else {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1);
}
