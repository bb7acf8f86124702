//! The contract's versions (`wasp_plugin::contract`): a component built against any earlier
//! `0.1.y` loads and runs, its optional exports found across the version; one built against a
//! later `0.1.y` or another `0.x` is refused with both versions named.
//!
//! Components of other versions are made from this build's own by rewriting the version in
//! their `wasp:plugin` names (`@0.1.3` to `@0.1.0`, same length, so the binary stays valid):
//! exactly what a plugin built against that version's WIT carries.

mod common;

use common::{host, pkt, runtime, site};
use wasp_core::{Extensions, Fallback};
use wasp_plugin::{CONTRACT_VERSION, PluginError};

/// `bytes` with every `@<CONTRACT_VERSION>` in `wasp:plugin` names rewritten to `@version`.
fn as_built_against(bytes: &[u8], version: &str) -> Vec<u8> {
    assert_eq!(
        version.len(),
        CONTRACT_VERSION.len(),
        "same-length versions only"
    );
    let from = format!("@{CONTRACT_VERSION}").into_bytes();
    let to = format!("@{version}").into_bytes();
    let mut out = bytes.to_vec();
    let mut n = 0;
    let mut i = 0;
    while i + from.len() <= out.len() {
        if out[i..].starts_with(&from) && out[..i].ends_with_name() {
            out[i..i + to.len()].copy_from_slice(&to);
            n += 1;
            i += from.len();
        } else {
            i += 1;
        }
    }
    assert!(n > 0, "no wasp:plugin name in the component");
    out
}

/// Whether the bytes before a version are a `wasp:plugin/<interface>` name.
trait EndsWithName {
    fn ends_with_name(&self) -> bool;
}

impl EndsWithName for [u8] {
    fn ends_with_name(&self) -> bool {
        let start = self.len().saturating_sub(64);
        let tail = &self[start..];
        tail.windows(12)
            .rposition(|w| w == b"wasp:plugin/")
            .is_some_and(|p| {
                tail[p + 12..]
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || *b == b'-')
            })
    }
}

#[test]
fn a_plugin_of_an_earlier_patch_loads_and_matches() {
    let host = host();
    let bytes = std::fs::read(wasp_guests::test_guest("trivial")).unwrap();
    for v in ["0.1.0", "0.1.1", "0.1.2"] {
        let old = as_built_against(&bytes, v);
        let p = host
            .load_bytes("trivial.wasm", &old)
            .unwrap_or_else(|e| panic!("{v}: {e}"));
        assert_eq!(p.info().name, "trivial");
        let mut rt = runtime(&host, &p);
        rt.configure(&site(1, "trivial", &[], Fallback::Absent))
            .unwrap();
        // trivial matches TCP (l4proto 6).
        let frame = [0u8; 64];
        let mut tcp = pkt(&frame, 1, 0, 0);
        tcp.l4proto = 6;
        let udp = pkt(&frame, 1, 0, 0);
        let mut out = vec![false, true];
        rt.matches(1, &[tcp, udp], &mut out);
        assert_eq!(out, [true, false], "{v}");
    }
}

#[test]
fn optional_exports_are_found_across_patch_versions() {
    // The bundled geneve plugin exports fast-match and area-match (Rust SDK): a build that
    // names them @0.1.0 still gets its first window.
    let host = host();
    let bytes = std::fs::read(wasp_guests::plugin("geneve")).unwrap();
    let now = host.load_bytes("geneve.wasm", &bytes).unwrap();
    let old = host
        .load_bytes("geneve.wasm", &as_built_against(&bytes, "0.1.0"))
        .unwrap();
    assert!(now.info().first_window.is_some());
    assert_eq!(old.info().first_window, now.info().first_window);
}

#[test]
fn a_later_patch_or_another_contract_is_refused_naming_both() {
    let host = host();
    let bytes = std::fs::read(wasp_guests::test_guest("trivial")).unwrap();
    for (v, says) in [
        (
            "0.1.9",
            "built against wasp:plugin@0.1.9, newer than this wasp's wasp:plugin@0.1.3",
        ),
        (
            "0.2.0",
            "built against wasp:plugin@0.2.0, another contract than this wasp's",
        ),
    ] {
        let err = host
            .load_bytes("future.wasm", &as_built_against(&bytes, v))
            .expect_err(v);
        assert!(matches!(err, PluginError::World { .. }), "{v}: {err:?}");
        let msg = err.to_string();
        assert!(msg.contains(says), "{v}: {msg}");
        assert!(msg.contains("it loads 0.1.0 to 0.1.3"), "{v}: {msg}");
    }
}

#[test]
fn a_core_module_is_refused_with_how_to_make_it_a_component() {
    // The smallest core module: the magic and version 1, no sections. A component's
    // header carries version 0x1000d instead.
    let Err(err) = host().compile("match.wasm", b"\0asm\x01\0\0\0") else {
        panic!("a core module compiled as a component");
    };
    assert!(matches!(err, PluginError::Compile { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("match.wasm"), "{msg}");
    assert!(
        msg.contains("a core WebAssembly module, not a component"),
        "{msg}"
    );
    assert!(msg.contains("wasm-tools component new"), "{msg}");
}
