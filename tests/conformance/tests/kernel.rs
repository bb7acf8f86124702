//! Conformance against the kernel: every ruleset in `rulesets/` x every capture in
//! `../shared/pcaps/` (when present) plus the generated frames, through kernel nftables and
//! through `wasp replay --verdicts`; every difference fails the ruleset's test.
//!
//! Skips (passes with a message) only when not root, nft is missing or no network namespace
//! can be created. Artifacts of each run: `<target>/conformance/<ruleset>/` (sent.pcap,
//! kernel.verdicts, wasp.verdicts, report.txt). `WASP_BIN` overrides the wasp binary,
//! `WASP_CONF_PCAPS` the capture folder.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use wasp_conformance::run::{Packet, build_wasp, compare, inputs, skip_reason};

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn packets() -> &'static [Packet] {
    static PACKETS: OnceLock<Vec<Packet>> = OnceLock::new();
    PACKETS.get_or_init(|| {
        let dir = std::env::var_os("WASP_CONF_PCAPS")
            .map(PathBuf::from)
            .unwrap_or_else(|| manifest_dir().join("../../../shared/pcaps"));
        let dir = dir.is_dir().then_some(dir);
        if dir.is_none() {
            eprintln!("conformance: no ../shared/pcaps folder; generated frames only");
        }
        let (packets, notes) = inputs(dir.as_deref());
        for n in notes {
            eprintln!("conformance: {n}");
        }
        packets
    })
}

fn wasp() -> &'static Result<PathBuf, String> {
    static WASP: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    WASP.get_or_init(|| build_wasp().map_err(|e| e.to_string()))
}

fn out_dir(stem: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let target = exe
        .ancestors()
        .nth(3)
        .map_or_else(std::env::temp_dir, Path::to_path_buf);
    target.join("conformance").join(stem)
}

fn check(file: &str) {
    if let Some(why) = skip_reason() {
        eprintln!("SKIPPED conformance {file}: {why}");
        return;
    }
    let wasp = match wasp() {
        Ok(p) => p,
        Err(e) => panic!("cannot build wasp: {e}"),
    };
    let ruleset = manifest_dir().join("rulesets").join(file);
    let stem = file.trim_end_matches(".nft");
    let out = out_dir(stem);
    let c = compare(wasp, &ruleset, packets(), &out)
        .unwrap_or_else(|e| panic!("conformance {file}: {e}"));
    eprintln!(
        "conformance {file}: {} frames, {} skipped, {} differences (kernel {:.1} s, wasp {:.1} s); \
         artifacts in {}",
        c.compared,
        c.skipped.len(),
        c.differences.len(),
        c.kernel_secs,
        c.wasp_secs,
        out.display()
    );
    assert!(
        c.differences.is_empty(),
        "{file}: {} of {} frames differ between the kernel and wasp:\n{}",
        c.differences.len(),
        c.compared,
        c.differences.join("\n")
    );
}

#[test]
fn ether() {
    check("01-ether.nft");
}

#[test]
fn vlan() {
    check("02-vlan.nft");
}

#[test]
fn ipv4() {
    check("03-ipv4.nft");
}

#[test]
fn ipv6() {
    check("04-ipv6.nft");
}

#[test]
fn tcp_udp() {
    check("05-tcp-udp.nft");
}

#[test]
fn icmp() {
    check("06-icmp.nft");
}

#[test]
fn th_meta() {
    check("07-th-meta.nft");
}

#[test]
fn exthdr() {
    check("08-exthdr.nft");
}

#[test]
fn named_sets() {
    check("09-sets.nft");
}

#[test]
fn verdicts() {
    check("10-verdicts.nft");
}

#[test]
fn base_chains() {
    check("11-chains.nft");
}

#[test]
fn inet_ingress() {
    check("12-inet.nft");
}

#[test]
fn interval_sets() {
    check("13-interval-sets.nft");
}

#[test]
fn verdict_maps() {
    check("14-maps.nft");
}

#[test]
fn data_maps() {
    check("15-data-maps.nft");
}

/// Every ruleset file has its test above.
#[test]
fn every_ruleset_has_a_test() {
    let src = include_str!("kernel.rs");
    let mut files: Vec<String> = std::fs::read_dir(manifest_dir().join("rulesets"))
        .expect("rulesets/")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".nft"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for f in files {
        assert!(src.contains(&format!("check(\"{f}\")")), "no test for {f}");
    }
}
