use super::*;
use alloc::vec;
use wasp_plugin_sdk::hdr::ones_sum;
use wasp_plugin_sdk::testing::{TestPkt, batch};

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// Geneve options of the C26 vector e33d: 0102:80:00880022, 0408:42:0040007611223344,
/// 0111:02:1020304011223344.
fn e33d() -> Vec<u8> {
    let mut o = Vec::new();
    for (class, typ, data) in [
        (0x0102u16, 0x80u8, &[0x00, 0x88, 0x00, 0x22][..]),
        (
            0x0408,
            0x42,
            &[0x00, 0x40, 0x00, 0x76, 0x11, 0x22, 0x33, 0x44],
        ),
        (
            0x0111,
            0x02,
            &[0x10, 0x20, 0x30, 0x40, 0x11, 0x22, 0x33, 0x44],
        ),
    ] {
        NewOpt {
            class,
            typ,
            data: data.to_vec(),
        }
        .encode(&mut o);
    }
    o
}

/// Ethernet + IPv4 or IPv6 + UDP to `dport` + Geneve (VNI `vni`) with `opts` + 20 payload
/// bytes, with valid lengths and checksums (the UDP checksum is zero for IPv4 when `v4_csum`
/// is false).
fn frame(v6: bool, dport: u16, vni: u32, opts: &[u8], v4_csum: bool) -> TestPkt {
    let mut gnv = vec![(opts.len() / 4) as u8, 0, 0x65, 0x58];
    gnv.extend_from_slice(&vni.to_be_bytes()[1..]);
    gnv.push(0);
    gnv.extend_from_slice(opts);
    gnv.extend_from_slice(&[0xaa; 20]);
    let udp_len = (8 + gnv.len()) as u16;
    let mut udp = vec![0x30, 0x39];
    udp.extend_from_slice(&dport.to_be_bytes());
    udp.extend_from_slice(&udp_len.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(&gnv);
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    let (ip, nfproto) = if v6 {
        f.extend_from_slice(&[0x86, 0xdd]);
        let mut ip = vec![0x60, 0, 0, 0];
        ip.extend_from_slice(&udp_len.to_be_bytes());
        ip.extend_from_slice(&[17, 64]);
        ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8].repeat(4));
        ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb9].repeat(4));
        (ip, NFPROTO_IPV6)
    } else {
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = vec![
            0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2,
        ];
        ip[2..4].copy_from_slice(&(20 + udp_len).to_be_bytes());
        let c = hdr::ipv4_checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        (ip, NFPROTO_IPV4)
    };
    f.extend_from_slice(&ip);
    f.extend_from_slice(&udp);
    let mut p = TestPkt {
        frame: f,
        l3: 14,
        l4: (14 + ip.len()) as u16,
        l4proto: 17,
        nfproto,
        ..Default::default()
    };
    if v6 || v4_csum {
        let c = udp_checksum(&p);
        let l4 = p.l4 as usize;
        p.frame[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
    }
    p
}

/// The UDP checksum of `p` computed from scratch (RFC 768, RFC 8200 8.1).
fn udp_checksum(p: &TestPkt) -> u16 {
    let (l3, l4) = (p.l3 as usize, p.l4 as usize);
    let udp = &p.frame[l4..];
    let mut sum = if p.nfproto == NFPROTO_IPV6 {
        ones_sum(&p.frame[l3 + 8..l3 + 40])
    } else {
        ones_sum(&p.frame[l3 + 12..l3 + 20])
    };
    sum += 17 + udp.len() as u64;
    sum += ones_sum(&udp[..6]) + ones_sum(&udp[8..]);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    match !(sum as u16) {
        0 => 0xffff,
        c => c,
    }
}

fn run_match(site_args: &str, pkts: &[TestPkt]) -> Vec<u8> {
    let mut g = GenevePlugin::default();
    g.configure(0, Kind::MatchExpr, &args(site_args)).unwrap();
    let (buf, count, stride) = batch(pkts, WINDOW);
    wasp_plugin_sdk::__glue::matches(&mut g, 0, &buf, count, stride)
}

#[test]
fn match_class_type_data_mask_critical_vni() {
    let v4 = frame(false, 6081, 42, &e33d(), false);
    let v6 = frame(true, 6081, 42, &e33d(), true);
    let none = frame(false, 6081, 7, &[], false);
    let other_port = frame(false, 6082, 42, &e33d(), false);
    let all = [v4, v6, none, other_port];
    assert_eq!(run_match("present", &all), [1, 1, 0, 0]);
    assert_eq!(run_match("vni 42", &all), [1, 1, 0, 0]);
    assert_eq!(run_match("vni 7", &all), [0, 0, 1, 0]);
    assert_eq!(run_match("opt class 0x0102 type 0x80", &all), [1, 1, 0, 0]);
    assert_eq!(
        run_match(
            "opt class 0x0102 type 0x80 data 0x00880022 mask 0xffffffff",
            &all
        ),
        [1, 1, 0, 0]
    );
    assert_eq!(
        run_match("opt class 0x0102 type 0x80 data 0x00880023", &all),
        [0, 0, 0, 0]
    );
    assert_eq!(
        run_match("opt class 0x0102 data 0x00880023 mask 0xfffffff0", &all),
        [1, 1, 0, 0]
    );
    assert_eq!(run_match("opt type 0x80 critical", &all), [1, 1, 0, 0]);
    // 0x0408 type 0x42 has no critical bit.
    assert_eq!(run_match("opt class 0x0408 critical", &all), [0, 0, 0, 0]);
    assert_eq!(
        run_match("opt class 0x0408 type 0x42 data 0x0040007611223344", &all),
        [1, 1, 0, 0]
    );
    // Data must be as long as the option's: a 4-byte prefix of an 8-byte option does not match.
    assert_eq!(
        run_match("opt class 0x0408 data 0x00400076", &all),
        [0, 0, 0, 0]
    );
    // Two clauses met by different options; and one that no option meets.
    assert_eq!(
        run_match("vni 42 opt class 0x0111 opt type 0x80", &all),
        [1, 1, 0, 0]
    );
    assert_eq!(run_match("opt class 0x0111 type 0x80", &all), [0, 0, 0, 0]);
}

#[test]
fn option_running_past_the_block_ends_the_walk() {
    let mut opts = e33d();
    // The second option says 31 words: past the 24-byte block. The first still counts.
    opts[8 + 3] = 31;
    let p = frame(false, 6081, 42, &opts, false);
    assert_eq!(
        run_match("opt class 0x0102", core::slice::from_ref(&p)),
        [1]
    );
    assert_eq!(
        run_match("opt class 0x0111", core::slice::from_ref(&p)),
        [0]
    );
    // Cut off by the capture: caplen shorter than the header says.
    let mut short = frame(false, 6081, 42, &e33d(), false);
    short.frame.truncate(14 + 20 + 8 + 8 + 10);
    assert_eq!(
        run_match("opt class 0x0102", core::slice::from_ref(&short)),
        [1]
    );
    assert_eq!(
        run_match("opt class 0x0408", core::slice::from_ref(&short)),
        [0]
    );
    // A non-first fragment (no l4) never matches.
    let mut frag = frame(false, 6081, 42, &e33d(), false);
    frag.l4 = 0xffff;
    assert_eq!(run_match("present", &[frag]), [0]);
}

#[test]
fn configure_validates_like_tc_and_the_kernel() {
    let m = |s: &str| parse(Kind::MatchExpr, &args(s));
    let st = |s: &str| parse(Kind::Statement, &args(s));
    // C26 vectors (tunnel_key.json).
    assert_eq!(
        m("opt class 0x824212").unwrap_err(),
        "geneve: class 0x824212 is more than 0xffff"
    );
    assert_eq!(
        m("opt type 0x4224").unwrap_err(),
        "geneve: type 0x4224 is more than 0xff"
    );
    assert_eq!(
        m("opt data 0x4288").unwrap_err(),
        "geneve: data 0x4288 is 2 bytes, not a multiple of 4"
    );
    assert_eq!(
        m("opt data 0x4288428822").unwrap_err(),
        "geneve: data 0x4288428822 is 5 bytes, not a multiple of 4"
    );
    assert_eq!(
        st("add opt class 0x0102 type 0x80 data 0x00880022 opt class 0x0408 type 0x42")
            .unwrap_err(),
        "geneve: add opt needs data (an option without data is refused)"
    );
    // C27 boundaries: 4, 120, 124 accepted; 126 and 128 refused.
    for n in [4, 120, 124] {
        let d = format!("0x{}", "ab".repeat(n));
        assert!(m(&format!("opt data {d}")).is_ok(), "{n}");
        assert!(
            st(&format!("add opt class 1 type 2 data {d}")).is_ok(),
            "{n}"
        );
    }
    assert_eq!(
        m(&format!("opt data 0x{}", "ab".repeat(126))).unwrap_err(),
        format!(
            "geneve: data 0x{} is 126 bytes, not a multiple of 4",
            "ab".repeat(126)
        )
    );
    assert_eq!(
        st(&format!(
            "add opt class 1 type 2 data 0x{}",
            "ab".repeat(128)
        ))
        .unwrap_err(),
        format!(
            "geneve: data 0x{} is 128 bytes, more than 124",
            "ab".repeat(128)
        )
    );
    // Block of 3 x 128 bytes > 252.
    let d = format!("0x{}", "00".repeat(124));
    assert_eq!(
        st(&format!("add opt class 1 type 2 data {d} opt class 1 type 3 data {d} opt class 1 type 4 data 0x00000000"))
            .unwrap_err(),
        "geneve: the options take 264 bytes, more than 252"
    );
    assert_eq!(
        m("vni 0x1000000").unwrap_err(),
        "geneve: vni 0x1000000 is more than 0xffffff"
    );
    assert_eq!(
        m("opt type 0x01 critical").unwrap_err(),
        "geneve: type 0x01 has no critical bit (0x80), so critical never holds"
    );
    assert_eq!(
        m("opt mask 0xffffffff").unwrap_err(),
        "geneve: mask without data"
    );
    assert_eq!(
        m("opt data 0x00000001 mask 0xffffffffffffffff").unwrap_err(),
        "geneve: mask is 8 bytes and data 4: they must be as long"
    );
    assert_eq!(
        m("opt").unwrap_err(),
        "geneve: opt needs class, type, critical or data"
    );
    assert_eq!(m("opt class").unwrap_err(), "geneve: class needs a value");
    assert_eq!(
        m("").unwrap_err(),
        "geneve: nothing to match (present, vni N, opt ...)"
    );
    assert_eq!(
        m("frob").unwrap_err(),
        "geneve: unexpected \"frob\" (expected present, vni or opt)"
    );
    assert_eq!(
        m("set opt class 1 type 2 data 0x00000000").unwrap_err(),
        "geneve: set is a statement, not a match"
    );
    assert_eq!(
        st("present").unwrap_err(),
        "geneve: as a statement, use set opt, add opt, encap or decap"
    );
    assert_eq!(st("add").unwrap_err(), "geneve: add needs at least one opt");
    assert_eq!(
        st("add opt class 1 data 0x00000000").unwrap_err(),
        "geneve: add opt needs class and type"
    );
}

/// Applies edits one after the other, as the host does.
fn apply_edits(frame: &mut Vec<u8>, edits: &[Edit]) {
    for e in edits {
        let off = e.offset as usize;
        match &e.op {
            wasp_plugin_sdk::EditOp::Set(d) => frame[off..off + d.len()].copy_from_slice(d),
            wasp_plugin_sdk::EditOp::Insert(d) => {
                frame.splice(off..off, d.iter().copied());
            }
            wasp_plugin_sdk::EditOp::Remove(n) => {
                frame.drain(off..off + *n as usize);
            }
        }
    }
}

fn run_write(site_args: &str, p: &TestPkt) -> TestPkt {
    let mut g = GenevePlugin::default();
    g.configure(0, Kind::Statement, &args(site_args)).unwrap();
    let (buf, count, stride) = batch(core::slice::from_ref(p), WINDOW);
    let r = wasp_plugin_sdk::__glue::apply(&mut g, 0, &buf, count, stride);
    // Every packet continues: one Continue with edits, none (the empty list) without.
    let want: &[Verdict] = if r.edits.is_empty() {
        &[]
    } else {
        &[Verdict::Continue]
    };
    assert_eq!(r.verdicts, want);
    let mut out = p.clone();
    apply_edits(&mut out.frame, &r.edits);
    out
}

/// Checks lengths and checksums of a rewritten frame, and returns its options.
fn check(p: &TestPkt) -> Vec<(u16, u8, Vec<u8>)> {
    let (l3, l4) = (p.l3 as usize, p.l4 as usize);
    let udp = Udp::parse(&p.frame[l4..]).unwrap();
    assert_eq!(udp.len as usize, p.frame.len() - l4, "udp length");
    if p.nfproto == NFPROTO_IPV4 {
        let ip = &p.frame[l3..l3 + 20];
        assert_eq!(
            u16::from_be_bytes([ip[2], ip[3]]) as usize,
            p.frame.len() - l3,
            "ip total length"
        );
        assert_eq!(
            hdr::ipv4_checksum(ip),
            u16::from_be_bytes([ip[10], ip[11]]),
            "ip checksum"
        );
    } else {
        assert_eq!(
            hdr::be16(&p.frame, l3 + 4).unwrap() as usize,
            p.frame.len() - l4,
            "ipv6 payload length"
        );
    }
    if udp.csum != 0 {
        assert_eq!(udp.csum, udp_checksum(p), "udp checksum");
    }
    let g = Geneve::parse(&p.frame[l4 + 8..]).unwrap();
    assert!(g.complete);
    let mut it = g.opts();
    let opts = it
        .by_ref()
        .map(|o| (o.class, o.typ, o.data.to_vec()))
        .collect();
    assert!(!it.malformed());
    // The payload after the options is untouched.
    assert_eq!(&p.frame[p.frame.len() - 20..], &[0xaa; 20]);
    opts
}

#[test]
fn add_packs_options_back_to_back() {
    // C26 e33d: three options written by one statement land back to back, in order.
    for (v6, csum) in [(false, false), (false, true), (true, true)] {
        let p = frame(v6, 6081, 42, &[], csum);
        let out = run_write(
            "add opt class 0x0102 type 0x80 data 0x00880022 opt class 0x0408 type 0x42 data 0x0040007611223344 \
             opt class 0x0111 type 0x02 data 0x1020304011223344",
            &p,
        );
        assert_eq!(out.frame.len(), p.frame.len() + 32);
        let g_off = out.l4 as usize + 8;
        assert_eq!(&out.frame[g_off + 8..g_off + 8 + 32], &e33d()[..]);
        let opts = check(&out);
        assert_eq!(opts.len(), 3);
        assert_eq!(
            opts[1],
            (
                0x0408,
                0x42,
                vec![0x00, 0x40, 0x00, 0x76, 0x11, 0x22, 0x33, 0x44]
            )
        );
        if !csum && !v6 {
            assert_eq!(
                Udp::parse(&out.frame[out.l4 as usize..]).unwrap().csum,
                0,
                "a zero checksum stays zero"
            );
        }
    }
}

#[test]
fn set_overwrites_in_place_or_replaces() {
    let p = frame(false, 6081, 42, &e33d(), true);
    // Same length: in place, the frame keeps its length.
    let out = run_write("set opt class 0x0408 type 0x42 data 0xffffffffeeeeeeee", &p);
    assert_eq!(out.frame.len(), p.frame.len());
    let opts = check(&out);
    assert_eq!(
        opts[1],
        (
            0x0408,
            0x42,
            vec![0xff, 0xff, 0xff, 0xff, 0xee, 0xee, 0xee, 0xee]
        )
    );
    assert_eq!(opts.len(), 3);
    // Another length: removed where it was and appended.
    let out = run_write("set opt class 0x0102 type 0x80 data 0x0102030405060708", &p);
    assert_eq!(out.frame.len(), p.frame.len() + 4);
    let opts = check(&out);
    assert_eq!(
        opts.iter().map(|o| o.0).collect::<Vec<_>>(),
        [0x0408, 0x0111, 0x0102]
    );
    assert_eq!(opts[2].2, [1, 2, 3, 4, 5, 6, 7, 8]);
    // Absent: appended.
    let p6 = frame(true, 6081, 42, &e33d(), true);
    let out = run_write("set opt class 0x0999 type 0x01 data 0x00000001", &p6);
    let opts = check(&out);
    assert_eq!(opts.len(), 4);
    assert_eq!(opts[3], (0x0999, 0x01, vec![0, 0, 0, 1]));
}

#[test]
fn write_leaves_non_geneve_and_full_blocks_alone() {
    let other = frame(false, 4789, 42, &[], false);
    assert_eq!(
        run_write("add opt class 1 type 2 data 0x00000000", &other).frame,
        other.frame
    );
    // 244 bytes of options: a 12-byte option would pass 252.
    let mut big = Vec::new();
    NewOpt {
        class: 1,
        typ: 0,
        data: vec![0; 120],
    }
    .encode(&mut big);
    NewOpt {
        class: 1,
        typ: 1,
        data: vec![0; 116],
    }
    .encode(&mut big);
    let full = frame(false, 6081, 42, &big, true);
    assert_eq!(
        run_write("add opt class 1 type 9 data 0x0000000000000000", &full).frame,
        full.frame
    );
    // An 8-byte one fits exactly (252 bytes, opt_len 63).
    let out = run_write("add opt class 1 type 9 data 0x00000000", &full);
    assert_eq!(check(&out).len(), 3);
    assert_eq!(out.frame[out.l4 as usize + 8] & 0x3f, 63);
}

fn encap(s: &str) -> Result<tunnel::Encap, String> {
    match parse(Kind::Statement, &args(&format!("encap {s}")))? {
        Site::Encap(e) => Ok(e),
        other => panic!("{other:?}"),
    }
}

#[test]
fn vlan_to_vni_ranges_as_the_bridge_c30() {
    let e = encap("vlan 1-3 vni 1-3 src 192.0.2.1 dst 192.0.2.2").unwrap();
    let tunnel::VniSource::Vlan(maps) = &e.vni else {
        panic!()
    };
    let got: Vec<_> = (0..=4).map(|v| tunnel::map_vlan(maps, v)).collect();
    assert_eq!(got, [None, Some(1), Some(2), Some(3), None]);
    // A start VNI alone: vid(i) -> start + (i - first vid).
    let e = encap("vlan 100-199 vni 5000 vlan 300 vni 9000 src 192.0.2.1 dst 192.0.2.2").unwrap();
    let tunnel::VniSource::Vlan(maps) = &e.vni else {
        panic!()
    };
    assert_eq!(tunnel::map_vlan(maps, 100), Some(5000));
    assert_eq!(tunnel::map_vlan(maps, 150), Some(5050));
    assert_eq!(tunnel::map_vlan(maps, 199), Some(5099));
    assert_eq!(tunnel::map_vlan(maps, 300), Some(9000));
    assert_eq!(tunnel::map_vlan(maps, 200), None);
    // Ranges split into tokens by the ruleset's tokenizer.
    let split: Vec<String> = [
        "vlan",
        "1",
        "-",
        "3",
        "vni",
        "10",
        "-",
        "12",
        "src",
        "192.0.2.1",
        "dst",
        "192.0.2.2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert!(matches!(
        parse(
            Kind::Statement,
            &[&["encap".to_string()][..], &split].concat()
        ),
        Ok(Site::Encap(_))
    ));
    let err = |s: &str| encap(&format!("{s} src 192.0.2.1 dst 192.0.2.2")).unwrap_err();
    assert_eq!(
        err("vlan 100-199 vni 5000-5050"),
        "geneve: vlan 100-199 and vni 5000-5050 are ranges of different sizes"
    );
    assert_eq!(
        err("vlan 1-10 vni 100 vlan 5 vni 500"),
        "geneve: vlan 5 is mapped twice"
    );
    assert_eq!(
        err("vlan 1-10 vni 100 vlan 20 vni 105"),
        "geneve: vni 105 is used twice"
    );
    assert_eq!(
        err("vlan 0 vni 1"),
        "geneve: vlan 0 is not a VLAN (1 to 4094)"
    );
    assert_eq!(
        err("vlan 4095 vni 1"),
        "geneve: vlan 4095 is more than 4094"
    );
    assert_eq!(
        err("vlan 10-1 vni 1"),
        "geneve: vlan range 10-1 ends before it starts"
    );
    assert_eq!(
        err("vlan 1-2 vni 0xffffff"),
        "geneve: vlan 1-2 maps past vni 0xffffff"
    );
    assert_eq!(err("vlan 1 500"), "geneve: vlan 1 needs a vni after it");
    assert_eq!(
        err("vni 1 vlan 2 vni 3"),
        "geneve: encap takes vni N or vlan ... vni ... ranges, not both"
    );
    assert_eq!(err(""), "geneve: encap needs vni N or vlan V vni N");
    assert_eq!(
        encap("vni 1 dst 192.0.2.2").unwrap_err(),
        "geneve: encap needs src"
    );
    assert_eq!(
        err("vni 1 smac 02:00:00"),
        "geneve: smac \"02:00:00\" is not a MAC address"
    );
    assert_eq!(
        encap("vni 1 src 192.0.2 dst 192.0.2.2").unwrap_err(),
        "geneve: src \"192.0.2\" is not an IPv4 address"
    );
    assert_eq!(
        err("vni 1 opt class 1 type 2"),
        "geneve: encap opt needs class, type and data"
    );
    assert_eq!(
        err("vni 1 frob 2"),
        "geneve: unexpected \"frob\" in encap (expected vni, vlan, src, dst, sport, smac, dmac, ttl or opt)"
    );
    assert_eq!(
        parse(Kind::MatchExpr, &args("decap")).unwrap_err(),
        "geneve: decap is a statement, not a match"
    );
    assert_eq!(
        parse(Kind::Statement, &args("decap now")).unwrap_err(),
        "geneve: decap takes no arguments (got \"now\")"
    );
}

#[test]
fn encap_then_decap_gives_the_frame_back() {
    let mut g = GenevePlugin::default();
    g.configure(0, Kind::Statement, &args("encap vni 42 src 192.0.2.1 dst 192.0.2.2 sport 50000 opt class 0x0102 type 0x80 data 0x00880022"))
        .unwrap();
    g.configure(1, Kind::Statement, &args("decap")).unwrap();
    let inner = frame(false, 80, 0, &[], false); // any Ethernet frame
    let (buf, n, stride) = batch(core::slice::from_ref(&inner), WINDOW);
    let r = wasp_plugin_sdk::__glue::apply(&mut g, 0, &buf, n, stride);
    let mut outer = inner.clone();
    apply_edits(&mut outer.frame, &r.edits);
    assert_eq!(outer.frame.len(), inner.frame.len() + 14 + 20 + 8 + 8 + 8);
    let ip = &outer.frame[14..34];
    assert_eq!(hdr::ipv4_checksum(ip), hdr::be16(ip, 10).unwrap());
    assert_eq!(hdr::be16(ip, 2).unwrap() as usize, outer.frame.len() - 14);
    assert_eq!(&ip[12..20], &[192, 0, 2, 1, 192, 0, 2, 2]);
    let udp = Udp::parse(&outer.frame[34..]).unwrap();
    assert_eq!(
        (udp.sport, udp.dport, udp.len as usize, udp.csum),
        (50000, 6081, outer.frame.len() - 34, 0)
    );
    let gh = Geneve::parse(&outer.frame[42..]).unwrap();
    assert_eq!(
        (gh.vni, gh.protocol, gh.opt_len, gh.critical),
        (42, 0x6558, 2, true)
    );
    assert_eq!(&outer.frame[58..], &inner.frame[..]);
    // Decap through the plugin, with the offsets the host gives.
    let outer_pkt = TestPkt {
        l3: 14,
        l4: 34,
        l4proto: 17,
        nfproto: NFPROTO_IPV4,
        ..outer.clone()
    };
    let (buf, n, stride) = batch(core::slice::from_ref(&outer_pkt), WINDOW);
    let r = wasp_plugin_sdk::__glue::apply(&mut g, 1, &buf, n, stride);
    let mut back = outer.frame.clone();
    apply_edits(&mut back, &r.edits);
    assert_eq!(back, inner.frame);
}

/// `fast-match.matches-first` on `pkts` cut to [`FIRST_WINDOW`] bytes: (hits, more), and the
/// final answers as the host makes them (the packets marked `more` asked again through
/// `matches` with the whole window).
fn run_first(site_args: &str, pkts: &[TestPkt]) -> (u64, u64, Vec<u8>) {
    let mut g = GenevePlugin::default();
    g.configure(0, Kind::MatchExpr, &args(site_args)).unwrap();
    let (buf, count, stride) = batch(pkts, FIRST_WINDOW);
    let (hits, more) = wasp_plugin_sdk::__glue::matches_first(&mut g, 0, &buf, count, stride);
    let again: Vec<TestPkt> = (0..pkts.len())
        .filter(|i| more >> i & 1 == 1)
        .map(|i| pkts[i].clone())
        .collect();
    let (buf, count, stride) = batch(&again, WINDOW);
    let mut second = wasp_plugin_sdk::__glue::matches(&mut g, 0, &buf, count, stride).into_iter();
    let answers = (0..pkts.len())
        .map(|i| match more >> i & 1 {
            1 => second.next().unwrap(),
            _ => (hits >> i & 1) as u8,
        })
        .collect();
    (hits, more, answers)
}

/// 15 options of 4 data bytes (120 bytes: the block ends past [`FIRST_WINDOW`] in an IPv4
/// frame), class 0x0200 + i; the last one class 0x0102 type 0x80.
fn long_block() -> Vec<u8> {
    let mut o = Vec::new();
    for i in 0..15u16 {
        let class = if i == 14 { 0x0102 } else { 0x0200 + i };
        NewOpt {
            class,
            typ: 0x80,
            data: vec![0, 0, 0, i as u8],
        }
        .encode(&mut o);
    }
    o
}

#[test]
fn first_window_answers_or_asks_for_the_whole_window() {
    let short = [
        frame(false, 6081, 42, &e33d(), false),
        frame(true, 6081, 42, &e33d(), true),
        frame(false, 6081, 7, &[], false),
        frame(false, 6082, 42, &e33d(), false),
    ];
    // Frames within the first window: answered at once, as by `matches`.
    for m in [
        "present",
        "vni 42",
        "opt class 0x0102 type 0x80",
        "opt class 0x0111",
    ] {
        let (hits, more, answers) = run_first(m, &short);
        assert_eq!(more, 0, "{m}");
        assert_eq!(answers, run_match(m, &short), "{m}");
        assert_eq!(u64::from(answers[0]) | u64::from(answers[1]) << 1, hits & 3);
    }
    let long = frame(false, 6081, 42, &long_block(), false);
    assert_eq!(long.frame.len(), 14 + 20 + 8 + 8 + 120 + 20);
    let other = frame(false, 6082, 42, &long_block(), false);
    // An option block that runs past 128 bytes: asked again, found with the whole window.
    let (hits, more, answers) =
        run_first("opt class 0x0102 type 0x80", &[long.clone(), other.clone()]);
    assert_eq!((hits, more), (0, 0b01));
    assert_eq!(answers, [1, 0]);
    let (_, more, answers) = run_first("opt class 0x0201", core::slice::from_ref(&long));
    assert_eq!((more, answers.as_slice()), (1, &[1u8][..]));
    // A VNI match does not need the options.
    assert_eq!(
        run_first("vni 42", &[long.clone(), other]),
        (1, 0, vec![1, 0])
    );
    // A transport header past the first window: the port is not there, so ask again.
    let mut deep = long.clone();
    deep.l4 = 130;
    assert_eq!(run_first("vni 42", &[deep]).1, 1);
    // Not UDP: false at once.
    let mut tcp = long;
    tcp.l4proto = 6;
    assert_eq!(run_first("present", &[tcp]), (0, 0, vec![0]));
}

/// A small xorshift generator: the same cases on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random option block: classes, types and data from small sets (so clauses hit), some
/// blocks with an option whose length runs past the block, opt_len that may not fit.
fn random_opts(r: &mut Rng) -> Vec<u8> {
    let mut o = Vec::new();
    for _ in 0..r.below(6) {
        let class = [0x0102u16, 0x0103, 0x0408, 0xffff][r.below(4) as usize];
        let typ = [0x80u8, 0x00, 0x42, 0xc2][r.below(4) as usize];
        let words = r.below(4) as u8;
        o.extend_from_slice(&class.to_be_bytes());
        o.push(typ);
        // Reserved bits set now and then: they are not part of the length.
        o.push(words | if r.below(5) == 0 { 0xe0 } else { 0 });
        for _ in 0..words * 4 {
            o.push([0x00u8, 0x11, 0x88, 0xff][r.below(4) as usize]);
        }
    }
    if r.below(6) == 0 {
        // A last option that says more data than the block holds.
        o.extend_from_slice(&[0x01, 0x02, 0x80, 0x1f]);
    }
    o
}

fn random_clause(r: &mut Rng) -> String {
    let mut s = String::from("opt");
    let mut any = false;
    if r.below(2) == 0 {
        s += [" class 0x0102", " class 0x0408", " class 0x0103"][r.below(3) as usize];
        any = true;
    }
    if r.below(2) == 0 {
        s += [" type 0x80", " type 0x42", " type 0xc2"][r.below(3) as usize];
        any = true;
    }
    if r.below(4) == 0 && !s.contains("0x42") {
        s += " critical";
        any = true;
    }
    if r.below(3) == 0 || !any {
        s += [
            " data 0x00118800",
            " data 0x0011ff88 mask 0x00ffff00",
            " data 0x0000000000000000 mask 0x0000000000000000",
        ][r.below(3) as usize];
    }
    s
}

#[test]
fn compiled_match_answers_as_eval_match() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut hits, mut ones) = (0, 0);
    for case in 0..3000 {
        let mut m = String::new();
        if r.below(4) == 0 {
            m += " present";
        }
        if r.below(5) == 0 {
            m += [" vni 42", " vni 7"][r.below(2) as usize];
        }
        for _ in 0..r.below(4) {
            m.push(' ');
            m += &random_clause(&mut r);
        }
        if m.is_empty() {
            m = "present".into();
        }
        let Ok(Site::Match(site)) = parse(Kind::MatchExpr, &args(&m)) else {
            panic!("{m}");
        };
        let c = Compiled::new(&site);
        let pkts: Vec<TestPkt> = (0..8)
            .map(|_| {
                let opts = random_opts(&mut r);
                let mut p = frame(
                    r.below(2) == 0,
                    6081,
                    [42, 7][r.below(2) as usize],
                    &opts,
                    false,
                );
                if r.below(8) == 0 {
                    p.frame[p.l4 as usize + 3] ^= 1; // another port
                }
                if r.below(4) == 0 {
                    // opt_len of another size than the options (longer or shorter).
                    let g = p.l4 as usize + 8;
                    p.frame[g] = (p.frame[g] & 0xc0) | r.below(64) as u8;
                }
                if r.below(6) == 0 {
                    p.frame.truncate(p.l4 as usize + r.below(60) as usize);
                }
                p
            })
            .collect();
        let mut g = GenevePlugin::default();
        g.configure(0, Kind::MatchExpr, &args(&m)).unwrap();
        for window in [WINDOW, FIRST_WINDOW, 64] {
            let (buf, count, stride) = batch(&pkts, window);
            let batch = Packets::new(&buf, count, stride);
            let (mut bits, mut more_bits) = (0u64, 0u64);
            for (i, p) in batch.iter().enumerate() {
                let want = eval_match(&site, &p);
                assert_eq!(
                    c.eval(&site, &p),
                    want,
                    "case {case}: {m} on {:02x?}",
                    p.bytes
                );
                hits += usize::from(want);
                let first = match needs_more(&site, &p) {
                    true => compiled::MORE,
                    false => u8::from(want),
                };
                assert_eq!(
                    c.first(&site, &p),
                    first,
                    "case {case}: {m} on {:02x?}",
                    p.bytes
                );
                if let Some((mask, value)) = c.one_clause() {
                    assert_eq!(
                        compiled::first_one(mask, value, &p),
                        first,
                        "case {case}: {m}"
                    );
                    ones += 1;
                }
                bits |= u64::from(first == compiled::YES) << i;
                more_bits |= u64::from(first == compiled::MORE) << i;
            }
            // The plugin's own bitmasks, and the SDK's default from `matches_first`'s bools.
            assert_eq!(g.matches_first_bits(0, batch), (bits, more_bits));
            let (mut out, mut more) = ([false; 8], [false; 8]);
            g.matches_first(0, batch, &mut out, &mut more);
            for i in 0..8 {
                assert_eq!(
                    (out[i], more[i]),
                    (bits >> i & 1 == 1, more_bits >> i & 1 == 1)
                );
            }
        }
    }
    // The cases are not all "no": both answers are compared.
    assert!(hits > 2000, "{hits} matches");
    assert!(ones > 5000, "{ones} packets of one-clause matches");
}

#[test]
fn compiled_clauses_that_never_hold() {
    let p = frame(false, 6081, 42, &e33d(), false);
    let (buf, count, stride) = batch(core::slice::from_ref(&p), WINDOW);
    let pkt = Packets::new(&buf, count, stride).get(0).unwrap();
    // Built by hand (configure refuses them): critical with a type without 0x80, data of 6
    // bytes; neither holds, in both implementations.
    for o in [
        OptMatch {
            typ: Some(0x02),
            critical: true,
            ..Default::default()
        },
        OptMatch {
            data: Some((vec![0; 6], vec![0; 6])),
            ..Default::default()
        },
    ] {
        let m = Match {
            opts: vec![o],
            ..Default::default()
        };
        assert!(!eval_match(&m, &pkt));
        assert!(!Compiled::new(&m).eval(&m, &pkt));
    }
    // 65 clauses: the slow path, the same answer.
    let m = Match {
        opts: vec![
            OptMatch {
                class: Some(0x0102),
                ..Default::default()
            };
            65
        ],
        ..Default::default()
    };
    assert!(eval_match(&m, &pkt));
    assert!(Compiled::new(&m).eval(&m, &pkt));
}

/// A Geneve packet (VNI 7, no options) over IPv4 whose Geneve header names `protocol` and
/// carries `inner`.
fn carrying(protocol: u16, inner: &[u8]) -> TestPkt {
    let mut gnv = vec![0, 0];
    gnv.extend_from_slice(&protocol.to_be_bytes());
    gnv.extend_from_slice(&[0, 0, 7, 0]);
    gnv.extend_from_slice(inner);
    let udp_len = (8 + gnv.len()) as u16;
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    let mut ip = vec![
        0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2,
    ];
    ip[2..4].copy_from_slice(&(20 + udp_len).to_be_bytes());
    let c = hdr::ipv4_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0x30, 0x39, 0x17, 0xc1]);
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&gnv);
    TestPkt {
        frame: f,
        l3: 14,
        l4: 34,
        l4proto: 17,
        nfproto: NFPROTO_IPV4,
        ..Default::default()
    }
}

#[test]
fn decap_counts_an_inner_header_that_does_not_fit_as_malformed() {
    let mut g = GenevePlugin::default();
    g.configure(1, Kind::Statement, &args("decap")).unwrap();
    let mut v6 = vec![0x60, 0, 0, 0, 0, 0, 59, 64];
    v6.extend_from_slice(&[0x20; 32]);
    let pkts = [
        // IPv6 named, 20 bytes inside: not an IPv6 header.
        carrying(0x86dd, &[0x60; 20]),
        // IPv4 named, an IPv6 header inside.
        carrying(0x0800, &v6),
        // IPv4 named, a header length (IHL 15: 60 bytes) beyond the 20 bytes inside.
        carrying(0x0800, &[0x4f; 20]),
        // Ethernet named, 10 bytes inside.
        carrying(0x6558, &[0xaa; 10]),
        // A whole IPv6 header inside: decapsulated.
        carrying(0x86dd, &v6),
    ];
    let (buf, n, stride) = batch(&pkts, WINDOW);
    let r = wasp_plugin_sdk::__glue::apply(&mut g, 1, &buf, n, stride);
    assert!(r.edits.iter().all(|e| e.packet == 4), "{:?}", r.edits);
    let mut out = pkts[4].frame.clone();
    apply_edits(&mut out, &r.edits);
    assert_eq!(&out[12..14], &[0x86, 0xdd]);
    assert_eq!(&out[14..], &v6[..]);
    let state = g.list_state(1);
    assert_eq!(
        state[0].values,
        [
            ("decapsulated".to_string(), 1),
            ("malformed".to_string(), 4)
        ]
    );
    g.reset_state(1, 0);
    assert_eq!(g.list_state(1)[0].values[1].1, 0);
}
