//! WASI guests: the Python guide's example (`sdk/python`, built with
//! componentize-py, which embeds CPython and calls WASI as it starts) loads, refuses bad
//! arguments with its own messages, and answers `ttlbelow 64` per packet as the guide says.
//!
//! Runs only when the component was built (`sdk/python/build.sh`,
//! written to `sdk/python/ttlbelow.wasm`, or the path in `WASP_PYTHON_GUEST`); otherwise it says
//! why and passes. The 18 MB component takes minutes to compile in a debug build: run it with
//! `--release`.

mod common;

use std::io::Write;
use std::path::PathBuf;

use common::{host, runtime, site};
use wasp_core::{ExtKind, ExtPacket, Extensions, Fallback};

fn python_guest() -> Option<PathBuf> {
    let path = std::env::var_os("WASP_PYTHON_GUEST").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../sdk/python/ttlbelow.wasm"),
        PathBuf::from,
    );
    if path.exists() {
        return Some(path);
    }
    let _ = writeln!(
        std::io::stderr(),
        "skipping the Python guest test: {} is not built (sdk/python/build.sh)",
        path.display()
    );
    None
}

/// The guides' frames (`sdk/testdata/make-ttl-capture.py`): IPv4 with TTL 1, 63, 64, 200, IPv6
/// with hop limit 10 and 255 (UDP to port 53), and an ARP request.
fn frames() -> Vec<(Vec<u8>, u8)> {
    let eth = |ty: u16| {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
        f.extend_from_slice(&ty.to_be_bytes());
        f
    };
    let udp = [0x13, 0x88, 0, 53, 0, 12, 0, 0, b'w', b'a', b's', b'p'];
    let mut out = Vec::new();
    for ttl in [1u8, 63, 64, 200] {
        let mut f = eth(0x0800);
        f.extend_from_slice(&[
            0x45, 0, 0, 32, 0, 1, 0x40, 0, ttl, 17, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1,
        ]);
        f.extend_from_slice(&udp);
        out.push((f, 2));
    }
    for hops in [10u8, 255] {
        let mut f = eth(0x86dd);
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, 12, 17, hops]);
        f.extend_from_slice(&[0xfd; 32]);
        f.extend_from_slice(&udp);
        out.push((f, 10));
    }
    let mut arp = eth(0x0806);
    arp.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    arp.extend_from_slice(&[0; 20]);
    out.push((arp, 0));
    out
}

#[test]
fn the_python_guide_example_runs_with_wasi() {
    let Some(path) = python_guest() else { return };
    let host = host();
    let p = host
        .load(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(p.info().name, "ttlbelow");
    assert_eq!(p.info().kinds, [ExtKind::Match]);
    assert_eq!(p.info().window, 64);
    assert_eq!(
        p.info().first_window,
        None,
        "a plugin of the world wasp-plugin"
    );
    let mut rt = runtime(&host, &p);
    assert_eq!(
        rt.configure(&site(1, "ttlbelow", &["300"], Fallback::Absent)),
        Err("ttlbelow: \"300\" is not a number in 1..=255".to_string())
    );
    assert_eq!(
        rt.configure(&site(1, "ttlbelow", &[], Fallback::Absent)),
        Err("usage: ttlbelow N (N in 1..=255)".to_string())
    );
    assert_eq!(
        rt.configure(&site(0, "ttlbelow", &["64"], Fallback::Absent)),
        Ok(ExtKind::Match)
    );
    let frames = frames();
    let pkts: Vec<ExtPacket<'_>> = frames
        .iter()
        .map(|(f, nfproto)| ExtPacket {
            frame: f,
            len: f.len() as u32,
            iif: 0,
            mark: 0,
            elem: 0,
            l3: if *nfproto == 0 { 0xffff } else { 14 },
            l4: 0xffff,
            l4proto: 17,
            nfproto: *nfproto,
            iftype: 1,
        })
        .collect();
    let mut out = vec![false; pkts.len()];
    rt.matches(0, &pkts, &mut out);
    assert!(!rt.last_call_failed(), "{:?}", rt.take_events());
    // TTL 1 and 63 and hop limit 10 are below 64.
    assert_eq!(out, [true, true, false, false, true, false, false]);
    assert_eq!(rt.failures("ttlbelow"), Default::default());
}
