//! One unit through the kernel (`nft -f` in a namespace, then `nft list ruleset`) and through
//! `wasp check --print`, and what the pair of results means.

use std::path::Path;
use std::process::Command;

use super::units::{Expect, Unit};
use crate::netns::Netns;

/// What one side did with a unit's command file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Side {
    /// Loaded; the listing that followed (`nft list ruleset`, `wasp check --print`).
    Accepted(String),
    /// Refused, with the first line of the message.
    Refused(String),
    /// wasp only: the process died or exited with neither 0 nor 1 (a panic, a signal).
    Crashed(String),
}

/// How a unit came out, kernel against wasp. The first two are agreement; the others are
/// differences to fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// Both loaded it and list it the same.
    BothAccept,
    /// Both refused it.
    BothRefuse,
    /// The file says `;ok` and the local `nft` (1.0.6) or kernel refuses it: newer syntax than
    /// the oracle here, out of scope.
    OutOfScope,
    /// The kernel loads it, wasp refuses it with a message that says wasp cannot give it a
    /// meaning (`queue`, `tproxy`, ...): a refusal of its own kind, not a gap.
    WaspRefusesByDesign,
    /// The kernel loads it, wasp refuses it.
    WaspRefuses,
    /// The kernel refuses it, wasp loads it.
    WaspAccepts,
    /// Both load it, the listings differ.
    ListingDiffers,
    /// wasp crashed.
    Crash,
}

impl Class {
    /// Every class, in report order.
    pub const ALL: [Class; 8] = [
        Class::BothAccept,
        Class::BothRefuse,
        Class::OutOfScope,
        Class::WaspRefusesByDesign,
        Class::WaspRefuses,
        Class::WaspAccepts,
        Class::ListingDiffers,
        Class::Crash,
    ];

    /// Short column name for the tables.
    pub fn label(self) -> &'static str {
        match self {
            Class::BothAccept => "both-accept",
            Class::BothRefuse => "both-refuse",
            Class::OutOfScope => "newer-syntax",
            Class::WaspRefusesByDesign => "no-meaning",
            Class::WaspRefuses => "wasp-refuses",
            Class::WaspAccepts => "wasp-accepts",
            Class::ListingDiffers => "listing-differs",
            Class::Crash => "crash",
        }
    }

    /// The label's class (for the known-differences file).
    pub fn from_label(s: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|c| c.label() == s)
    }

    /// A difference between kernel and wasp (everything but agreement, out-of-scope units and
    /// refusals by design).
    pub fn is_difference(self) -> bool {
        matches!(
            self,
            Class::WaspRefuses | Class::WaspAccepts | Class::ListingDiffers | Class::Crash
        )
    }
}

/// Marker in wasp's refusal message for constructs that cannot have a meaning in wasp (the
/// statement needs the kernel's own stack: a queue to user space, a local socket, ...).
pub const NO_MEANING_MARK: &str = "has no meaning in wasp";

/// A unit's result on both sides and its class.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The kernel's side.
    pub kernel: Side,
    /// wasp's side.
    pub wasp: Side,
    /// What the pair means.
    pub class: Class,
}

/// Classifies a pair of results for `unit`.
pub fn classify(unit: &Unit, kernel: &Side, wasp: &Side) -> Class {
    match (kernel, wasp) {
        (_, Side::Crashed(_)) => Class::Crash,
        (Side::Refused(_), _) if unit.expect != Expect::Fail => Class::OutOfScope,
        (Side::Refused(_), Side::Refused(_)) => Class::BothRefuse,
        (Side::Refused(_), Side::Accepted(_)) => Class::WaspAccepts,
        (Side::Accepted(_), Side::Refused(m)) if m.contains(NO_MEANING_MARK) => {
            Class::WaspRefusesByDesign
        }
        (Side::Accepted(_), Side::Refused(_)) => Class::WaspRefuses,
        (Side::Accepted(k), Side::Accepted(w)) => {
            if normalize(k) == normalize(w) {
                Class::BothAccept
            } else {
                Class::ListingDiffers
            }
        }
        (Side::Crashed(_), _) => Class::Crash,
    }
}

/// Trailing blanks and blank lines do not count in a listing, nor the time an element has
/// left (`expires 59s984ms`: the kernel counts down from the moment of the load; `wasp check`
/// lists none).
fn normalize(listing: &str) -> String {
    let mut s: String = listing
        .lines()
        .map(|l| {
            let mut l = l.trim_end().to_string();
            while let Some(at) = l.find(" expires ") {
                let end = l[at + 9..]
                    .find([',', ' ', '}'])
                    .map_or(l.len(), |e| at + 9 + e);
                l.replace_range(at..end, "");
            }
            l
        })
        .collect::<Vec<_>>()
        .join("\n");
    while s.ends_with('\n') {
        s.pop();
    }
    s
}

fn first_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

/// The kernel's side of a unit: `flush ruleset`, then the command file with `nft -f` inside
/// `ns`, then `nft list ruleset` when it loaded. `dir` holds the written file.
///
/// # Errors
/// When `nft` cannot be started.
pub fn kernel_side(ns: &Netns, dir: &Path, unit: &Unit) -> std::io::Result<Side> {
    let path = dir.join("kernel.nft");
    std::fs::write(&path, format!("flush ruleset\n{}", unit.commands))?;
    let load = ns.command("nft").arg("-f").arg(&path).output()?;
    if !load.status.success() {
        return Ok(Side::Refused(first_line(&load.stderr)));
    }
    let list = ns.command("nft").args(["list", "ruleset"]).output()?;
    if !list.status.success() {
        return Ok(Side::Refused(format!(
            "loaded, but `nft list ruleset` failed: {}",
            first_line(&list.stderr)
        )));
    }
    Ok(Side::Accepted(
        String::from_utf8_lossy(&list.stdout).into_owned(),
    ))
}

/// wasp's side of a unit: `wasp check --print` of the command file (written to `dir`).
///
/// # Errors
/// When `wasp` cannot be started.
pub fn wasp_side(wasp: &Path, dir: &Path, unit: &Unit) -> std::io::Result<Side> {
    let path = dir.join("wasp.nft");
    std::fs::write(&path, &unit.commands)?;
    let out = Command::new(wasp)
        .args(["check", "--print"])
        .arg(&path)
        .output()?;
    Ok(match out.status.code() {
        Some(0) => Side::Accepted(String::from_utf8_lossy(&out.stdout).into_owned()),
        Some(1) if !String::from_utf8_lossy(&out.stderr).contains("panicked") => {
            Side::Refused(first_line(&out.stderr))
        }
        code => Side::Crashed(format!(
            "exit {code:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn expiry_countdown_is_not_compared() {
        assert_eq!(
            normalize(
                "elements = { 10.2.1.1 expires 59s984ms, 1.1.1.1 timeout 30s expires 29s9ms }\n\n"
            ),
            "elements = { 10.2.1.1, 1.1.1.1 timeout 30s }"
        );
    }
}
