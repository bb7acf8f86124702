//! `area-match` (world `wasp-plugin-area`, what the Rust SDK builds): the host writes a
//! `fast-match` batch straight into the plugin's batch area while lowering the call's `count`
//! (the only unsafe code of the crate, src/area.rs). Its safe twin is `matches-first` with a
//! `list<u8>` (`Runtime::set_batch_area(false)`), and before that `plugin.matches` with the
//! whole window (`Runtime::set_fast_match(false)`): all three give the same answers, on the
//! bundled geneve plugin, for every vector size, across a re-created instance.

mod common;

use common::{host, site};
use wasp_core::{ExtKind, ExtPacket, Extensions, Fallback};
use wasp_plugin::{PluginHost, Runtime};

/// Ethernet + IPv4 or IPv6 + UDP to `dport` + Geneve (VNI 7) with `opts` + `pad` bytes.
fn geneve_frame(v6: bool, dport: u16, opts: &[u8], pad: usize) -> (Vec<u8>, u16) {
    let l3_len = if v6 { 40 } else { 20 };
    let l4 = 14 + l3_len;
    let udp_len = 8 + 8 + opts.len() + pad;
    let mut f = vec![0u8; l4 + udp_len];
    if v6 {
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[18..20].copy_from_slice(&(udp_len as u16).to_be_bytes());
        f[20] = 17;
    } else {
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
        f[23] = 17;
    }
    f[l4 + 2..l4 + 4].copy_from_slice(&dport.to_be_bytes());
    f[l4 + 4..l4 + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    f[l4 + 8] = (opts.len() / 4) as u8;
    f[l4 + 10..l4 + 12].copy_from_slice(&[0x65, 0x58]);
    f[l4 + 14] = 7;
    f[l4 + 16..l4 + 16 + opts.len()].copy_from_slice(opts);
    (f, l4 as u16)
}

/// Options with these (class, type, data words).
fn opts(list: &[(u16, u8, u8)]) -> Vec<u8> {
    let mut o = Vec::new();
    for &(class, typ, words) in list {
        o.extend_from_slice(&class.to_be_bytes());
        o.extend_from_slice(&[typ, words]);
        o.extend((0..words * 4).map(|i| i.wrapping_mul(37)));
    }
    o
}

/// A mix: both underlays, the option first, last, absent, in a block past the 128-byte
/// first window, another port, a frame cut inside the UDP header, short and long frames.
fn frames() -> Vec<(Vec<u8>, u16)> {
    let hit = (0x0102, 0x80, 1);
    let other = (0x0103, 0x80, 1);
    let long: Vec<_> = (0..14)
        .map(|i| (0x0200 + i, 0x80, 1))
        .chain([hit])
        .collect();
    let mut v = Vec::new();
    for v6 in [false, true] {
        for pad in [4, 1400] {
            v.push(geneve_frame(v6, 6081, &opts(&[hit]), pad));
            v.push(geneve_frame(
                v6,
                6081,
                &opts(&[other, (0x0102, 0x00, 2), hit]),
                pad,
            ));
            v.push(geneve_frame(v6, 6081, &opts(&[other]), pad));
            v.push(geneve_frame(v6, 6081, &opts(&long), pad));
            v.push(geneve_frame(v6, 6081, &opts(&long[..14]), pad));
            v.push(geneve_frame(v6, 6082, &opts(&[hit]), pad));
            v.push(geneve_frame(v6, 6081, &[], pad));
        }
        let (mut cut, l4) = geneve_frame(v6, 6081, &opts(&[hit]), 0);
        cut.truncate(l4 as usize + 5);
        v.push((cut, l4));
    }
    v
}

fn packets(frames: &[(Vec<u8>, u16)]) -> Vec<ExtPacket<'_>> {
    frames
        .iter()
        .map(|(f, l4)| ExtPacket {
            frame: f,
            len: f.len() as u32,
            iif: 1,
            mark: 0,
            elem: 0,
            l3: 14,
            l4: *l4,
            l4proto: 17,
            nfproto: if *l4 == 54 { 10 } else { 2 },
            iftype: 1,
        })
        .collect()
}

/// Runtimes of the three paths (area, list, whole window) for the geneve plugin with `args`.
fn runtimes(host: &PluginHost, args: &[&str]) -> Vec<(&'static str, Runtime)> {
    let g = host
        .load(wasp_guests::plugin("geneve"))
        .expect("geneve plugin");
    assert_eq!(g.info().first_window, Some(128));
    [
        ("batch area", true, true),
        ("list", true, false),
        ("whole", false, false),
    ]
    .into_iter()
    .map(|(name, fast, area)| {
        let mut rt = Runtime::new(host);
        rt.add("geneve", &g).expect("add");
        rt.set_fast_match(fast);
        rt.set_batch_area(area);
        assert_eq!(
            rt.configure(&site(0, "geneve", args, Fallback::Absent)),
            Ok(ExtKind::Match)
        );
        (name, rt)
    })
    .collect()
}

#[test]
fn batch_area_answers_as_the_list_and_the_whole_window() {
    let host = host();
    let fr = frames();
    let base = packets(&fr);
    // 4 copies in a row (68 packets): vectors past 64 go through `plugin.matches`.
    let pkts: Vec<ExtPacket<'_>> = base.iter().cycle().take(base.len() * 4).copied().collect();
    for args in [
        &["opt", "class", "0x0102", "type", "0x80"][..],
        &["opt", "class", "0x0102"],
        &["vni", "7"],
        &["present", "opt", "type", "0x80", "opt", "class", "0x0103"],
        &["opt", "class", "0x0102", "data", "0x00254a6f"],
    ] {
        let mut rts = runtimes(&host, args);
        for vec in [1, 7, 17, 32, 64, 68] {
            let mut answers = Vec::new();
            for (name, rt) in &mut rts {
                let mut out = vec![false; pkts.len()];
                for (p, o) in pkts.chunks(vec).zip(out.chunks_mut(vec)) {
                    rt.matches(0, p, o);
                    assert!(
                        !rt.last_call_failed(),
                        "{name} {args:?}: {:?}",
                        rt.take_events()
                    );
                }
                answers.push(out);
            }
            assert_eq!(
                answers[0], answers[1],
                "{args:?} vector {vec}: area vs list"
            );
            assert_eq!(
                answers[1], answers[2],
                "{args:?} vector {vec}: list vs whole"
            );
        }
        for (name, rt) in &mut rts {
            assert_eq!(rt.failures("geneve"), Default::default(), "{name}");
        }
    }
    // The answers themselves (the first 14 frames, IPv4, 7 of each size): the option is in
    // frames 0, 1, 3 (in a block past the first window), not in 2, 4 (a long block without
    // it), 5 (port 6082) or 6 (no options).
    let mut rts = runtimes(&host, &["opt", "class", "0x0102", "type", "0x80"]);
    let mut out = vec![false; 14];
    rts[0].1.matches(0, &base[..14], &mut out);
    let one = [true, true, false, true, false, false, false];
    assert_eq!(out, [one, one].concat());
}

#[test]
fn batch_area_survives_a_recreated_instance() {
    let host = host();
    let fr = frames();
    let pkts = packets(&fr);
    let mut rts = runtimes(&host, &["opt", "class", "0x0102", "type", "0x80"]);
    let (_, rt) = &mut rts[0];
    let mut before = vec![false; pkts.len()];
    rt.matches(0, &pkts, &mut before);
    // A swap to the same plugin makes a new instance, which gives a new batch area.
    let g = host
        .load(wasp_guests::plugin("geneve"))
        .expect("geneve plugin");
    rt.swap("geneve", &g).expect("swap");
    let mut after = vec![false; pkts.len()];
    rt.matches(0, &pkts, &mut after);
    assert!(!rt.last_call_failed(), "{:?}", rt.take_events());
    assert_eq!(before, after);
    assert!(after.iter().any(|a| *a) && !after.iter().all(|a| *a));
}
