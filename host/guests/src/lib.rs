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

/// The directory of the bundled plugins: `counter.wasm`, `geneve.wasm`, `idletimer.wasm`,
/// and the flowtable offload block `offload_table.wasm` (`wasp run --offload-plugin`)
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

/// The top-level import names of a WebAssembly component (`wasp:plugin/host@0.1.0`,
/// `wasi:io/streams@0.2.6`, ...), read from its import section (id 10) as the component
/// model's Binary.md lays it out. Errors name what is malformed. Used to check that the
/// bundled plugins import no WASI.
pub fn component_imports(b: &[u8]) -> Result<Vec<String>, String> {
    fn leb(b: &[u8], i: &mut usize) -> Result<u64, String> {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let byte = *b.get(*i).ok_or("cut short")?;
            *i += 1;
            if shift >= 64 {
                return Err("LEB128 too long".into());
            }
            v |= u64::from(byte & 0x7f) << shift;
            shift += 7;
            if byte < 0x80 {
                return Ok(v);
            }
        }
    }
    fn name(b: &[u8], i: &mut usize) -> Result<String, String> {
        let n = leb(b, i)? as usize;
        let s = b.get(*i..*i + n).ok_or("name cut short")?;
        *i += n;
        String::from_utf8(s.to_vec()).map_err(|_| "name is not UTF-8".to_string())
    }
    fn byte(b: &[u8], i: &mut usize) -> Result<u8, String> {
        let v = *b.get(*i).ok_or("cut short")?;
        *i += 1;
        Ok(v)
    }
    if b.len() < 8 || &b[..4] != b"\0asm" || b[6..8] != [1, 0] {
        return Err("not a component (magic or layer)".into());
    }
    let (mut i, mut out) = (8, Vec::new());
    while i < b.len() {
        let id = byte(b, &mut i)?;
        let size = leb(b, &mut i)? as usize;
        let end = i
            .checked_add(size)
            .filter(|&e| e <= b.len())
            .ok_or("section past the end")?;
        if id == 10 {
            let mut j = i;
            for _ in 0..leb(b, &mut j)? {
                let kind = byte(b, &mut j)?;
                out.push(name(b, &mut j)?);
                if kind == 0x01 {
                    name(b, &mut j)?; // version suffix
                }
                match byte(b, &mut j)? {
                    0x00 => {
                        byte(b, &mut j)?;
                        leb(b, &mut j)?;
                    }
                    0x01 | 0x02 | 0x04 | 0x05 => {
                        leb(b, &mut j)?;
                    }
                    0x03 => {
                        if byte(b, &mut j)? == 0x00 {
                            leb(b, &mut j)?;
                        }
                    }
                    other => return Err(format!("unknown extern sort {other:#x}")),
                }
            }
        }
        i = end;
    }
    Ok(out)
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
            // Lean: nothing but the contract's interfaces (no WASI).
            let imports = component_imports(&bytes).unwrap();
            assert!(
                imports.iter().all(|n| n.starts_with("wasp:plugin/")),
                "{name} imports {imports:?}"
            );
            assert!(
                imports.contains(&"wasp:plugin/types@0.1.0".to_string()),
                "{imports:?}"
            );
        }
        // The offload block (world `wasp-offload-block`): lean too; it calls no host function.
        let table = std::fs::read(plugin("offload_table")).unwrap();
        assert_eq!(&table[..8], b"\0asm\x0d\x00\x01\x00");
        let imports = component_imports(&table).unwrap();
        assert!(
            imports.iter().all(|n| n.starts_with("wasp:plugin/")),
            "offload_table imports {imports:?}"
        );
        let idletimer = std::fs::read(plugin("idletimer")).unwrap();
        assert!(
            component_imports(&idletimer)
                .unwrap()
                .contains(&"wasp:plugin/host@0.1.0".into())
        );
    }

    #[test]
    fn imports_of_a_malformed_component_are_an_error() {
        assert!(
            component_imports(b"\0asm\x01\x00\x00\x00").is_err(),
            "a core module"
        );
        // An import section that claims more bytes than there are.
        assert!(component_imports(b"\0asm\x0d\x00\x01\x00\x0a\x7f\x01").is_err());
        // One import `a:b/c` of an instance type 0.
        let mut c = b"\0asm\x0d\x00\x01\x00\x0a\x0a\x01\x00\x05a:b/c\x05\x00".to_vec();
        assert_eq!(component_imports(&c).unwrap(), ["a:b/c"]);
        c.truncate(c.len() - 1);
        assert!(component_imports(&c).is_err());
    }
}
