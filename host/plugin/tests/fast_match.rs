//! `fast-match` (world `wasp-plugin-fast`, what the Rust SDK builds): the bundled geneve plugin
//! answers from its 128-byte first window, and the packets whose option block runs past it are
//! asked again through `plugin.matches` with the whole window; the answers are the same as
//! with `plugin.matches` alone. A plugin without the export (the test guests, built against the
//! world `wasp-plugin`) has no first window.

mod common;

use common::{guest, host, runtime, site};
use wasp_core::{ExtKind, ExtPacket, Extensions, Fallback};

/// Ethernet + IPv4 + UDP to `dport` + Geneve (VNI 7) with `opts` + `pad` bytes of payload.
fn geneve_frame(dport: u16, opts: &[u8], pad: usize) -> Vec<u8> {
    let udp_len = 8 + 8 + opts.len() + pad;
    let mut f = vec![0u8; 14 + 20 + udp_len];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f[38..40].copy_from_slice(&(udp_len as u16).to_be_bytes());
    f[42] = (opts.len() / 4) as u8;
    f[44..46].copy_from_slice(&[0x65, 0x58]);
    f[46..49].copy_from_slice(&[0, 0, 7]);
    f[50..50 + opts.len()].copy_from_slice(opts);
    f
}

/// Options of 4 data bytes each, with these classes (type 0x80).
fn opts(classes: &[u16]) -> Vec<u8> {
    let mut o = Vec::new();
    for c in classes {
        o.extend_from_slice(&c.to_be_bytes());
        o.extend_from_slice(&[0x80, 1, 0xde, 0xad, 0xbe, 0xef]);
    }
    o
}

fn pkt(frame: &[u8]) -> ExtPacket<'_> {
    ExtPacket {
        frame,
        len: frame.len() as u32,
        iif: 0,
        mark: 0,
        elem: 0,
        l3: 14,
        l4: 34,
        l4proto: 17,
        nfproto: 2,
        iftype: 1,
    }
}

#[test]
fn geneve_answers_from_its_first_window_and_asks_again_past_it() {
    let host = host();
    let g = host
        .load(wasp_guests::plugin("geneve"))
        .expect("geneve plugin");
    assert_eq!(g.info().window, 336);
    assert_eq!(g.info().first_window, Some(128));
    let trivial = guest(&host, "trivial");
    assert_eq!(trivial.info().first_window, None);

    // 15 options (120 bytes): the block ends at byte 170, past the first window.
    let mut long: Vec<u16> = (0x200..0x20e).collect();
    long.push(0x0102);
    let frames = [
        geneve_frame(6081, &opts(&[0x0102]), 10),   // short, has it
        geneve_frame(6081, &opts(&[0x0102]), 1400), // 1458 bytes, has it early
        geneve_frame(6081, &opts(&[0x0103]), 1400), // has another class
        geneve_frame(6081, &opts(&long), 1000),     // has it at byte 166: asked again
        geneve_frame(6081, &opts(&long[..14]), 1000), // long block without it: asked again
        geneve_frame(6082, &opts(&long), 1000),     // not Geneve
    ];
    let pkts: Vec<ExtPacket<'_>> = frames.iter().map(|f| pkt(f)).collect();
    let want = [true, true, false, true, false, false];
    for fast in [true, false] {
        let mut rt = runtime(&host, &g);
        rt.set_fast_match(fast);
        let s = site(
            0,
            "geneve",
            &["opt", "class", "0x0102", "type", "0x80"],
            Fallback::Absent,
        );
        assert_eq!(rt.configure(&s), Ok(ExtKind::Match));
        let mut out = [false; 6];
        rt.matches(0, &pkts, &mut out);
        assert!(!rt.last_call_failed(), "{:?}", rt.take_events());
        assert_eq!(out, want, "fast-match {fast}");
        // Only the packets asked again, in a vector of their own.
        out = [true; 6];
        rt.matches(0, &pkts[3..5], &mut out[..2]);
        assert_eq!(out[..2], [true, false]);
        assert_eq!(rt.failures("geneve"), Default::default());
    }
}
