//! Where the bundled plugins (`plugins/`) and the test guests (`tests/guests/`) are after the
//! build compiled them to `wasm32-wasip2`.
//!
//! The build script runs `cargo build --release --target wasm32-wasip2` in each guest
//! workspace (a nested build with a target dir of its own, `<target>/wasm-guests/target`) and
//! copies the components to `<target>/wasm-guests/out/<label>/`. So a crate that depends on
//! `wasp-guests` cannot use a guest that was not built: the build fails first, with cargo's
//! error output (or with `rustup target add wasm32-wasip2` when the target is missing).

#![forbid(unsafe_code)]

use std::path::PathBuf;

/// The directory that holds every guest workspace's output, one subdirectory per label.
const OUT: &str = env!("WASP_GUESTS_OUT");

/// The directory of the bundled plugins: `counter.wasm`, `geneve.wasm`, `idletimer.wasm`
/// (the plugin directory where the ruleset's bare plugin names are looked up).
pub fn plugin_dir() -> PathBuf {
    PathBuf::from(OUT).join("plugins")
}

/// The component of bundled plugin `name` (`plugin("counter")` is `<plugin_dir>/counter.wasm`).
pub fn plugin(name: &str) -> PathBuf {
    plugin_dir().join(format!("{name}.wasm"))
}

/// The component of test guest `name` from `tests/guests/` (the crate name with `-` as `_`,
/// e.g. `test_guest("swap_v1")`).
pub fn test_guest(name: &str) -> PathBuf {
    PathBuf::from(OUT)
        .join("tests-guests")
        .join(format!("{}.wasm", name.replace('-', "_")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_plugins_are_built() {
        for name in ["counter", "geneve", "idletimer"] {
            let path = plugin(name);
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            // A component: "\0asm", version 0x0d, layer 1 (a core module has layer 0).
            assert_eq!(&bytes[..8], b"\0asm\x0d\x00\x01\x00", "{}", path.display());
        }
    }
}
