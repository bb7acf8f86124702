//! The suite's ratchets, kept in the repository next to this crate:
//!
//! - `nft-suite-floor.txt`: the lowest acceptance (percent of the units the kernel loads that
//!   wasp loads, netdev/ip/ip6/inet) the test allows. Raise it when wasp gets better; it never
//!   goes down.
//! - `nft-suite-known.txt`: the differences wasp still has, one unit a line,
//!   `CLASS FILE:LINE FAMILY TABLE CHAIN` (`listing-differs ip/ip.t:42 ip test-ip4 input`).
//!   Only `wasp-accepts` and `listing-differs` may be listed (a crash never may). A difference
//!   not listed fails the test; so does a listed one that no longer holds (delete the line).
//!   `#` starts a comment.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::REQUIRED_FAMILIES;
use super::outcome::{Class, Outcome};
use super::report::Report;
use super::units::Unit;

/// The floor file's path.
pub fn floor_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("nft-suite-floor.txt")
}

/// The known-differences file's path.
pub fn known_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("nft-suite-known.txt")
}

/// The acceptance floor in percent (the first number in the floor file).
///
/// # Errors
/// When the file cannot be read or holds no number.
pub fn floor(text: &str) -> Result<f64, String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .find(|l| !l.is_empty())
        .and_then(|l| l.parse::<f64>().ok())
        .ok_or_else(|| "the floor file holds no number".to_string())
}

/// The known differences: (class, unit id) pairs.
///
/// # Errors
/// A line whose class is not `wasp-accepts` or `listing-differs`.
pub fn known(text: &str) -> Result<BTreeSet<(Class, String)>, String> {
    let mut set = BTreeSet::new();
    for (n, l) in text.lines().enumerate() {
        let l = l.split('#').next().unwrap_or("").trim();
        if l.is_empty() {
            continue;
        }
        let (class, id) = l.split_once(' ').unwrap_or((l, ""));
        match Class::from_label(class) {
            Some(c @ (Class::WaspAccepts | Class::ListingDiffers)) => {
                set.insert((c, id.trim().to_string()));
            }
            _ => {
                return Err(format!(
                    "line {}: `{class}` cannot be a known difference (only wasp-accepts and \
                     listing-differs)",
                    n + 1
                ));
            }
        }
    }
    Ok(set)
}

/// The known-differences file for the differences of this run (required families).
pub fn known_file(units: &[Unit], outcomes: &[Outcome]) -> String {
    let mut s = String::from(
        "# Differences from the kernel that wasp still has on nftables' own test suite\n\
         # (tests/conformance/src/nft_suite/known.rs). Only ever shrinks.\n",
    );
    for line in current(units, outcomes) {
        s.push_str(line.0.label());
        s.push(' ');
        s.push_str(&line.1);
        s.push('\n');
    }
    s
}

fn current(units: &[Unit], outcomes: &[Outcome]) -> BTreeSet<(Class, String)> {
    units
        .iter()
        .zip(outcomes)
        .filter(|(u, o)| {
            REQUIRED_FAMILIES.contains(&u.family.as_str())
                && matches!(o.class, Class::WaspAccepts | Class::ListingDiffers)
        })
        .map(|(u, o)| (o.class, u.id()))
        .collect()
}

/// What fails the test: crashes (any family), differences of the required families not in
/// `known`, entries of `known` that no longer hold, and acceptance under `floor`. Empty when
/// the run passes.
pub fn failures(
    units: &[Unit],
    outcomes: &[Outcome],
    report: &Report,
    floor: f64,
    known: &BTreeSet<(Class, String)>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (u, o) in units.iter().zip(outcomes) {
        if o.class == Class::Crash {
            out.push(format!("crash: {}: {}", u.id(), u.rule));
        }
    }
    let now = current(units, outcomes);
    for (c, id) in now.difference(known) {
        out.push(format!("new difference: {} {id}", c.label()));
    }
    for (c, id) in known.difference(&now) {
        out.push(format!(
            "known difference no longer holds (delete its line): {} {id}",
            c.label()
        ));
    }
    let rate = report.required.acceptance_percent();
    if rate + 1e-9 < floor {
        out.push(format!(
            "acceptance {rate:.2} % is under the floor {floor:.1} %"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_and_known_files_parse() {
        assert_eq!(floor("# comment\n93.8  # percent\n"), Ok(93.8));
        assert!(floor("none").is_err());
        let k = known("# x\nlisting-differs ip/ip.t:4 ip test-ip4 input\n\n").unwrap();
        assert!(k.contains(&(Class::ListingDiffers, "ip/ip.t:4 ip test-ip4 input".into())));
        assert!(known("crash ip/ip.t:4 ip test-ip4 input").is_err());
        assert!(known("wasp-refuses ip/ip.t:4 ip test-ip4 input").is_err());
    }
}
