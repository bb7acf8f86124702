//! The plugin contract's versions: which `wasp:plugin` package versions this host loads.
//!
//! `wit/plugin.wit` follows semver as the component model reads it for `0.x.y` packages: a
//! version `0.x.y` only adds to `0.x.(y-1)`, and a new `x` may change anything. This host
//! implements [`CONTRACT_VERSION`] and loads a plugin whose `wasp:plugin` imports and exports
//! all name a version `0.x.y` with the same `x` and `y` at most its own (wasmtime then links
//! the names across patch versions, see `wasmtime_environ::component::names`). A plugin built
//! against a later `y` may call or export what this host does not know, and one of another `x`
//! speaks another contract: both are refused with a message that names both versions, where
//! wasmtime would have linked the first and failed on the second by a type mismatch.
//!
//! [`HISTORY`] says which version added what; `wit/README.md` has the same table.

use std::fmt;

/// The version of the plugin contract (`wit/plugin.wit`'s package `wasp:plugin`) this host
/// implements.
pub const CONTRACT_VERSION: &str = "0.1.3";

/// What each contract version added, oldest first: `(version, what)`.
pub const HISTORY: &[(&str, &str)] = &[
    (
        "0.1.0",
        "types, host, plugin: the world wasp-plugin (match expressions and statements, \
         timers, events, state transfer)",
    ),
    (
        "0.1.1",
        "fast-match: the world wasp-plugin-fast (a first, smaller window; bitmask answers)",
    ),
    (
        "0.1.2",
        "area-match: the world wasp-plugin-area (batches written into the plugin's buffer)",
    ),
    (
        "0.1.3",
        "offload-block: the world wasp-offload-block (a plugin as a flowtable offload block)",
    ),
];

/// A `wasp:plugin` package version `major.minor.patch` (no pre-release).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    /// Always 0 so far.
    pub major: u32,
    /// Changes when the contract changes incompatibly (while `major` is 0).
    pub minor: u32,
    /// Moves with each added interface or function.
    pub patch: u32,
}

impl Version {
    /// Parses `"0.1.3"`; `None` for anything else (pre-releases included).
    pub fn parse(s: &str) -> Option<Version> {
        let mut it = s.split('.').map(|p| {
            (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse::<u32>().ok())
                .flatten()
        });
        let v = Version {
            major: it.next()??,
            minor: it.next()??,
            patch: it.next()??,
        };
        it.next().is_none().then_some(v)
    }

    /// This host's version, [`CONTRACT_VERSION`].
    pub fn ours() -> Version {
        Version::parse(CONTRACT_VERSION).expect("CONTRACT_VERSION is a version")
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// What [`check_name`] makes of an import or export name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameCheck {
    /// Not a `wasp:plugin` name (`wasi:...`, a plain function name, another package).
    Other,
    /// A `wasp:plugin` name of a version this host loads.
    Known(Version),
}

/// Checks one import or export `name` of a component against this host's contract.
///
/// # Errors
/// A message naming the plugin's version and this host's, when `name` is a `wasp:plugin` name
/// of a version this host does not load: a later patch of the same `0.x`, another `0.x` or
/// major, a pre-release, or no version at all.
pub fn check_name(name: &str) -> Result<NameCheck, String> {
    let Some(rest) = name.strip_prefix("wasp:plugin/") else {
        return Ok(NameCheck::Other);
    };
    let ours = Version::ours();
    let accepts = format!("it loads 0.{}.0 to {ours}", ours.minor);
    let Some((_, version)) = rest.split_once('@') else {
        return Err(format!(
            "{name} names no contract version; this wasp implements wasp:plugin@{ours} ({accepts})"
        ));
    };
    let Some(v) = Version::parse(version) else {
        return Err(format!(
            "{name}: wasp:plugin@{version} is not a release of the contract; this wasp \
             implements wasp:plugin@{ours} ({accepts})"
        ));
    };
    if v.major != ours.major || v.minor != ours.minor {
        return Err(format!(
            "{name}: the plugin is built against wasp:plugin@{v}, another contract than this \
             wasp's wasp:plugin@{ours} ({accepts}): rebuild it against wit/plugin.wit \
             {ours}, or use a wasp of contract {}.{}",
            v.major, v.minor
        ));
    }
    if v > ours {
        return Err(format!(
            "{name}: the plugin is built against wasp:plugin@{v}, newer than this wasp's \
             wasp:plugin@{ours} ({accepts}): update wasp, or rebuild the plugin against {ours}"
        ));
    }
    Ok(NameCheck::Known(v))
}

/// The contract version a component's names say it was built against: the highest version
/// among its `wasp:plugin` names (`None` when it names none).
///
/// # Errors
/// The first name [`check_name`] refuses.
pub fn built_against<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> Result<Option<Version>, String> {
    let mut best = None;
    for name in names {
        if let NameCheck::Known(v) = check_name(name)? {
            best = best.max(Some(v));
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_strictly() {
        assert_eq!(
            Version::parse("0.1.3"),
            Some(Version {
                major: 0,
                minor: 1,
                patch: 3
            })
        );
        for bad in [
            "0.1",
            "0.1.3.4",
            "0.1.3-rc.1",
            "0..1",
            "x.1.2",
            "+0.1.2",
            "",
        ] {
            assert_eq!(Version::parse(bad), None, "{bad}");
        }
        assert_eq!(Version::ours().to_string(), CONTRACT_VERSION);
        assert_eq!(HISTORY.last().unwrap().0, CONTRACT_VERSION);
    }

    #[test]
    fn every_earlier_patch_loads_and_later_or_other_contracts_are_refused() {
        for (v, _) in HISTORY {
            assert_eq!(
                check_name(&format!("wasp:plugin/host@{v}")),
                Ok(NameCheck::Known(Version::parse(v).unwrap()))
            );
        }
        assert_eq!(
            check_name("wasi:cli/stdout@0.2.0"),
            Ok(NameCheck::Other),
            "WASI is judged elsewhere"
        );
        let later = check_name("wasp:plugin/host@0.1.4").unwrap_err();
        assert!(
            later.contains("wasp:plugin@0.1.4, newer than this wasp's wasp:plugin@0.1.3"),
            "{later}"
        );
        let other = check_name("wasp:plugin/plugin@0.2.0").unwrap_err();
        assert!(
            other
                .contains("wasp:plugin@0.2.0, another contract than this wasp's wasp:plugin@0.1.3"),
            "{other}"
        );
        assert!(check_name("wasp:plugin/plugin@1.1.0").is_err());
        assert!(check_name("wasp:plugin/plugin@0.1.1-rc.1").is_err());
        assert!(check_name("wasp:plugin/plugin").is_err());
    }

    #[test]
    fn a_component_is_as_new_as_its_newest_name() {
        let names = [
            "wasi:io/streams@0.2.3",
            "wasp:plugin/types@0.1.0",
            "wasp:plugin/fast-match@0.1.1",
        ];
        assert_eq!(built_against(names), Ok(Version::parse("0.1.1")));
        assert_eq!(built_against(["run"]), Ok(None));
        assert!(built_against(["wasp:plugin/host@0.1.9"]).is_err());
    }
}
