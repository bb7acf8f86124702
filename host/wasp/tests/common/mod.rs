//! Helpers shared by the integration tests: paths, running the binary, building frames.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `samples/firewall`.
pub fn firewall_dir() -> PathBuf {
    repo().join("samples/firewall")
}

/// Run the `wasp` binary with `args` in `cwd`.
pub fn wasp(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasp"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run wasp")
}

/// stdout and stderr of `out` as text.
pub fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An Ethernet II frame from `src_mac` last byte `s` with `ethertype` and `payload`.
pub fn eth(s: u8, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, s];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An IPv4 header (no options, checksum left 0: nothing in the data path checks it) carrying
/// `l4` of protocol `proto` from `src` to `dst`.
pub fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, l4: &[u8]) -> Vec<u8> {
    let total = (20 + l4.len()) as u16;
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(l4);
    h
}

/// A UDP header (length set, checksum 0) with 4 bytes of payload.
pub fn udp(sport: u16, dport: u16) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&12u16.to_be_bytes());
    u.extend_from_slice(&[0, 0, b'w', b'a', b's', b'p']);
    u
}

/// A TCP header of 20 bytes with `flags`.
pub fn tcp(sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&sport.to_be_bytes());
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags, 0xfa, 0xf0, 0, 0, 0, 0]);
    t
}

/// A pcapng file: section header, one Ethernet interface (default microsecond resolution),
/// one enhanced packet block per frame (`ts_us` microseconds since the epoch).
pub fn pcapng(frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    fn block(out: &mut Vec<u8>, ty: u32, body: &[u8]) {
        let len = (12 + body.len()) as u32;
        out.extend_from_slice(&ty.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(&len.to_le_bytes());
    }
    let mut out = Vec::new();
    let mut shb = Vec::new();
    shb.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&u64::MAX.to_le_bytes());
    block(&mut out, 0x0a0d_0d0a, &shb);
    let mut idb = Vec::new();
    idb.extend_from_slice(&1u16.to_le_bytes());
    idb.extend_from_slice(&0u16.to_le_bytes());
    idb.extend_from_slice(&0u32.to_le_bytes());
    block(&mut out, 1, &idb);
    for (ts_us, f) in frames {
        let mut epb = Vec::new();
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&((ts_us >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(*ts_us as u32).to_le_bytes());
        epb.extend_from_slice(&(f.len() as u32).to_le_bytes());
        epb.extend_from_slice(&(f.len() as u32).to_le_bytes());
        epb.extend_from_slice(f);
        while epb.len() % 4 != 0 {
            epb.push(0);
        }
        block(&mut out, 6, &epb);
    }
    out
}

/// Frames of a pcap or pcapng file: `(ts_ns, bytes)`.
pub fn read_frames(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let cap = wasp::capture::Capture::open(path).expect("open capture");
    cap.frames()
        .expect("capture header")
        .map(|f| {
            let f = f.expect("frame");
            (f.ts_ns, f.data.to_vec())
        })
        .collect()
}
