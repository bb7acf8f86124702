//! nftables' own rule-level test suite (`tests/py/` of nftables, read from
//! `../shared/nft-tests/py/`) as a conformance test: every unit through the kernel and
//! through `wasp check --print`, classified ([`outcome::Class`]) and tabulated per family and
//! per file.
//!
//! The kernel is the oracle: a unit the local `nft` and kernel load must load in wasp and list
//! the same (`nft list ruleset` against `wasp check --print`); a unit they refuse must be
//! refused. A `;ok` unit the local nft refuses is newer syntax than the oracle here and out of
//! scope. Families netdev, ip, ip6 and inet are required ([`REQUIRED_FAMILIES`]); bridge and
//! arp are counted and reported.
//!
//! The ratchets kept in the repository ([`known`]): the acceptance floor (only ever rises) and
//! the list of known differences (only ever shrinks: a difference not in it fails the test,
//! and so does an entry that no longer holds).

pub mod frames;
pub mod json_input;
pub mod known;
pub mod outcome;
pub mod packets;
pub mod report;
pub mod units;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use outcome::{Outcome, classify, kernel_side, wasp_side};
use units::Unit;

use crate::netns::Netns;

/// The families whose units must pass; the others are reported only.
pub const REQUIRED_FAMILIES: [&str; 4] = ["netdev", "ip", "ip6", "inet"];

/// Where the suite's files are: `WASP_NFT_TESTS` or `../shared/nft-tests/py` from the
/// repository root (`None` when absent).
pub fn default_py_dir() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("WASP_NFT_TESTS") {
        return Some(PathBuf::from(p));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let p = root.join("../shared/nft-tests/py");
    p.is_dir().then_some(p)
}

/// Runs every unit through the kernel (one namespace per thread) and through `wasp`,
/// `threads` units at a time; `progress` is called after each unit with (done, total).
///
/// # Errors
/// When a namespace, a temporary folder, `nft` or `wasp` cannot be had.
pub fn run(
    units: &[Unit],
    wasp: &Path,
    threads: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> crate::Result<Vec<Outcome>> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Outcome>>> = Mutex::new(vec![None; units.len()]);
    let failure: Mutex<Option<crate::Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for t in 0..threads.max(1) {
            let (next, done, results, failure) = (&next, &done, &results, &failure);
            s.spawn(move || {
                let work = || -> crate::Result<()> {
                    let ns = Netns::create()?;
                    let dir = std::env::temp_dir()
                        .join(format!("wasp-nft-suite-{}-{t}", std::process::id()));
                    std::fs::create_dir_all(&dir).map_err(|e| crate::Error::io("temp dir", e))?;
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(unit) = units.get(i) else { break };
                        if failure.lock().map(|f| f.is_some()).unwrap_or(true) {
                            break;
                        }
                        let kernel =
                            kernel_side(&ns, &dir, unit).map_err(|e| crate::Error::io("nft", e))?;
                        let wasp = wasp_side(wasp, &dir, unit)
                            .map_err(|e| crate::Error::io("wasp check", e))?;
                        let class = classify(unit, &kernel, &wasp);
                        if let Ok(mut r) = results.lock() {
                            r[i] = Some(Outcome {
                                kernel,
                                wasp,
                                class,
                            });
                        }
                        progress(done.fetch_add(1, Ordering::Relaxed) + 1, units.len());
                    }
                    let _ = std::fs::remove_dir_all(&dir);
                    Ok(())
                };
                if let Err(e) = work()
                    && let Ok(mut f) = failure.lock()
                {
                    f.get_or_insert(e);
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().ok().flatten() {
        return Err(e);
    }
    Ok(results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect())
}
