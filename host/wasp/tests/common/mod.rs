//! Helpers shared by the integration tests: paths, running the binary, building frames.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use wasp_io::capture::{CaptureReader, CaptureWriter, Format, OutFrame, TsResolution};

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

/// A pcapng file (wasp-io's writer): one Ethernet interface without a name at microsecond
/// resolution, one enhanced packet block per frame (`ts_us` microseconds since the epoch).
pub fn pcapng(frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut w = CaptureWriter::new(
        Path::new("<memory>"),
        Vec::new(),
        Format::PcapNg,
        TsResolution::Micro,
    )
    .expect("pcapng header");
    w.add_interface("").expect("interface");
    for (ts_us, f) in frames {
        w.write(&OutFrame::new(ts_us * 1_000, f)).expect("frame");
    }
    w.finish().expect("pcapng")
}

/// A classic pcap file (wasp-io's writer: little-endian, microseconds, Ethernet) of
/// `(ts_ns, frame)` pairs.
pub fn pcap_bytes(frames: &[(u64, &[u8])]) -> Vec<u8> {
    let mut w = CaptureWriter::new(
        Path::new("<memory>"),
        Vec::new(),
        Format::Pcap,
        TsResolution::Micro,
    )
    .expect("pcap header");
    for (ts_ns, f) in frames {
        w.write(&OutFrame::new(*ts_ns, f)).expect("frame");
    }
    w.finish().expect("pcap")
}

/// A pcapng file as `dumpcap -i A -i B` records one (wasp-io's writer): one interface per
/// entry of `interfaces` (named after it unless empty, nanosecond timestamps), one enhanced
/// packet block per `(interface index, ts_ns, frame)`.
///
/// # Errors
/// The writer's message when a frame names an interface not given.
pub fn pcapng_bytes(interfaces: &[&str], frames: &[(u32, u64, &[u8])]) -> Result<Vec<u8>, String> {
    let mut w = CaptureWriter::new(
        Path::new("<memory>"),
        Vec::new(),
        Format::PcapNg,
        TsResolution::Nano,
    )
    .map_err(|e| e.to_string())?;
    for name in interfaces {
        w.add_interface(name).map_err(|e| e.to_string())?;
    }
    for &(interface, ts_ns, data) in frames {
        w.write(&OutFrame {
            interface,
            ..OutFrame::new(ts_ns, data)
        })
        .map_err(|e| e.to_string())?;
    }
    w.finish().map_err(|e| e.to_string())
}

/// Write the pcapng of [`pcapng_bytes`] to `path`.
///
/// # Errors
/// As [`pcapng_bytes`], or the file cannot be written.
pub fn write_pcapng(
    path: &Path,
    interfaces: &[&str],
    frames: &[(u32, u64, &[u8])],
) -> Result<(), String> {
    std::fs::write(path, pcapng_bytes(interfaces, frames)?).map_err(|e| e.to_string())
}

/// Frames of a pcap or pcapng file: `(ts_ns, bytes)`.
pub fn read_frames(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let mut r = CaptureReader::open(path).expect("open capture");
    let mut out = Vec::new();
    while let Some(f) = r.next_frame() {
        let f = f.expect("frame");
        out.push((f.ts_ns, f.data.to_vec()));
    }
    out
}

/// The IP TTL (IPv4) or hop limit (IPv6) of an untagged Ethernet frame (None for others).
pub fn ttl(frame: &[u8]) -> Option<u8> {
    match u16::from_be_bytes([frame[12], frame[13]]) {
        0x0800 => frame.get(14 + 8).copied(),
        0x86dd => frame.get(14 + 7).copied(),
        _ => None,
    }
}

/// Build an SDK guide's example with `sdk/LANG/build.sh OUT`, `OUT` being `LANG-example`'s
/// file under the target's temporary directory. `None`, after saying why, when `missing`
/// names tools the guide needs (a CI run fails instead: `.ci/run` installs them all).
pub fn build_sdk_example(lang: &str, missing: &[String]) -> Option<PathBuf> {
    use std::io::Write;
    if !missing.is_empty() {
        let msg = format!(
            "the {lang} plugin toolchain is missing: {}; see sdk/{lang}/README.md",
            missing.join(", ")
        );
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{msg}");
        // Straight to stderr, past the test harness's capture, so a passing run says so.
        let _ = writeln!(std::io::stderr(), "skipping the sdk/{lang} tests: {msg}");
        return None;
    }
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("sdk-{lang}/ttlbelow.wasm"));
    let _ = std::fs::remove_file(&out);
    let script = format!("sdk/{lang}/build.sh");
    let build = Command::new("bash")
        .arg(repo().join(&script))
        .arg(&out)
        .output()
        .unwrap_or_else(|e| panic!("run {script}: {e}"));
    let (so, se) = text(&build);
    assert!(build.status.success(), "{script} failed:\n{so}\n{se}");
    Some(out)
}
