//! The geneve plugin on the Geneve captures in ../shared/pcaps (MANIFEST.md describes them).
//! Expected counts come from the captures' descriptions and tshark's Geneve dissector.

use geneve::{GenevePlugin, WINDOW};
use std::path::PathBuf;
use wasp_plugin_sdk::hdr::{self, Geneve, Udp, ones_sum};
use wasp_plugin_sdk::testing::{TestPkt, batch};
use wasp_plugin_sdk::{EditOp, Kind, NFPROTO_IPV4, NFPROTO_IPV6, Plugin};

fn pcaps() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/pcaps");
    assert!(
        dir.is_dir(),
        "{} is missing (shared/ sits beside the repository)",
        dir.display()
    );
    dir
}

/// The frames of a pcap or pcapng file (Ethernet link type only).
fn frames(name: &str) -> Vec<Vec<u8>> {
    let b = std::fs::read(pcaps().join(name)).unwrap();
    let mut out = Vec::new();
    let le32 = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    if b[..4] == [0x0a, 0x0d, 0x0d, 0x0a] {
        // pcapng, little-endian: blocks of (type, length, body, length).
        let mut i = 0;
        while i + 12 <= b.len() {
            let (ty, len) = (le32(&b, i), le32(&b, i + 4) as usize);
            if ty == 6 {
                let caplen = le32(&b, i + 20) as usize;
                out.push(b[i + 28..i + 28 + caplen].to_vec());
            }
            i += len;
        }
    } else {
        assert_eq!(le32(&b, 0) & 0xffff_fff0, 0xa1b2_c3d0, "little-endian pcap");
        assert_eq!(le32(&b, 20), 1, "Ethernet");
        let mut i = 24;
        while i + 16 <= b.len() {
            let caplen = le32(&b, i + 8) as usize;
            out.push(b[i + 16..i + 16 + caplen].to_vec());
            i += 16 + caplen;
        }
    }
    out
}

/// The packet as the host hands it: network and transport offsets (VLAN tags skipped).
fn packet(frame: Vec<u8>) -> TestPkt {
    let mut p = TestPkt {
        frame,
        l3: 0xffff,
        l4: 0xffff,
        ..Default::default()
    };
    let f = &p.frame;
    let mut off = 12;
    let mut ty = hdr::be16(f, off).unwrap();
    while ty == 0x8100 || ty == 0x88a8 {
        off += 4;
        ty = hdr::be16(f, off).unwrap();
    }
    let l3 = off + 2;
    p.l3 = l3 as u16;
    match ty {
        0x0800 => {
            p.nfproto = NFPROTO_IPV4;
            p.l4proto = f[l3 + 9];
            let frag = hdr::be16(f, l3 + 6).unwrap() & 0x1fff;
            if frag == 0 {
                p.l4 = (l3 + (f[l3] & 0x0f) as usize * 4) as u16;
            }
        }
        0x86dd => {
            p.nfproto = NFPROTO_IPV6;
            p.l4proto = f[l3 + 6];
            p.l4 = (l3 + 40) as u16;
        }
        _ => {}
    }
    p
}

fn count(file: &str, args: &str) -> usize {
    let mut g = GenevePlugin::default();
    let args: Vec<String> = args.split_whitespace().map(String::from).collect();
    g.configure(0, Kind::MatchExpr, &args).unwrap();
    let pkts: Vec<TestPkt> = frames(file).into_iter().map(packet).collect();
    let (buf, n, stride) = batch(&pkts, WINDOW);
    let out = wasp_plugin_sdk::__glue::matches(&mut g, 0, &buf, n, stride);
    out.iter().filter(|&&m| m == 1).count()
}

fn zeros(n: usize) -> String {
    format!("0x{}", "00".repeat(n))
}

#[test]
fn tcpdump_geneve() {
    let f = "tcpdump-geneve.pcap";
    assert_eq!(frames(f).len(), 39);
    assert_eq!(count(f, "present"), 19);
    assert_eq!(count(f, "vni 10"), 19);
    assert_eq!(count(f, "vni 0xb"), 20);
    assert_eq!(
        count(f, "opt class 0 type 0x80 critical data 0x0000000c"),
        19
    );
    assert_eq!(count(f, "opt type 0x80 critical"), 19);
    assert_eq!(count(f, "opt class 0 type 0x80 data 0x0000000d"), 0);
    assert_eq!(count(f, "vni 11 present"), 0);
}

#[test]
fn gcp_options_of_mixed_length() {
    let f = "tcpdump-geneve-gcp.pcap";
    assert_eq!(count(f, "vni 0"), 1);
    let mask = |n| format!("data {} mask {}", zeros(n), zeros(n));
    // type 1: 4 data bytes, type 2: 16, type 3: 8 (walked in order).
    assert_eq!(count(f, &format!("opt class 0x0132 type 1 {}", mask(4))), 1);
    assert_eq!(
        count(f, &format!("opt class 0x0132 type 2 {}", mask(16))),
        1
    );
    assert_eq!(count(f, &format!("opt class 0x0132 type 3 {}", mask(8))), 1);
    assert_eq!(count(f, &format!("opt class 0x0132 type 3 {}", mask(4))), 0);
    assert_eq!(count(f, "opt class 0x0132 type 4"), 0);
    assert_eq!(
        count(f, "opt class 0x0132 type 1 opt class 0x0132 type 3"),
        1
    );
}

#[test]
fn zeek_many_options() {
    let f = "zeek-geneve-many-options.pcap";
    assert_eq!(count(f, "vni 0x0c012e"), 10);
    // Data 16, 36 and 12 bytes.
    for (t, n) in [(1, 16), (2, 36), (3, 12)] {
        assert_eq!(
            count(
                f,
                &format!(
                    "opt class 0x0100 type {t} data {} mask {}",
                    zeros(n),
                    zeros(n)
                )
            ),
            10
        );
    }
    assert_eq!(count(f, "opt class 0x0100 critical"), 0);
}

#[test]
fn zeek_long_option_truncated_and_ipv6() {
    let tagged = "zeek-geneve-tagged-udp-packet.pcap";
    assert_eq!(count(tagged, "opt class 0xff72 type 0x7f"), 4);
    assert_eq!(
        count(
            tagged,
            &format!("opt class 0xff72 data {} mask {}", zeros(56), zeros(56))
        ),
        4
    );
    assert_eq!(count(tagged, "opt class 0xff72 critical"), 0);
    let trunc = "zeek-geneve-truncated.pcapng";
    assert_eq!(count(trunc, "present"), 1);
    assert_eq!(count(trunc, "opt class 0 type 0 data 0x0000000a"), 1);
    let v6 = "zeek-geneve-ipv6.pcap";
    assert_eq!(count(v6, "vni 0x123456"), 2);
    assert_eq!(count(v6, "present"), 0);
    // An IPv6 underlay (a GSO super-packet longer than the window).
    let gso = "tcpdump-gso-ipv6-geneve-ipv6.pcap";
    assert_eq!(count(gso, "vni 0x1389"), 1);
    assert_eq!(count(gso, "present"), 0);
}

fn udp_checksum(p: &TestPkt) -> u16 {
    let (l3, l4) = (p.l3 as usize, p.l4 as usize);
    let udp = &p.frame[l4..];
    let mut sum = if p.nfproto == NFPROTO_IPV6 {
        ones_sum(&p.frame[l3 + 8..l3 + 40])
    } else {
        ones_sum(&p.frame[l3 + 12..l3 + 20])
    };
    sum += 17 + udp.len() as u64 + ones_sum(&udp[..6]) + ones_sum(&udp[8..]);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    match !(sum as u16) {
        0 => 0xffff,
        c => c,
    }
}

/// `geneve add opt` on every packet of a capture: lengths, checksums and option lists.
#[test]
fn add_opt_on_captures() {
    for file in [
        "tcpdump-geneve.pcap",
        "zeek-geneve-tagged-udp-packet.pcap",
        "zeek-geneve-many-options.pcap",
    ] {
        let mut g = GenevePlugin::default();
        let args: Vec<String> = "add opt class 0x0102 type 0x80 data 0x00880022"
            .split_whitespace()
            .map(String::from)
            .collect();
        g.configure(0, Kind::Statement, &args).unwrap();
        let mut pkts: Vec<TestPkt> = frames(file).into_iter().map(packet).collect();
        // The zeek captures were taken before checksum offload filled the UDP checksum in
        // (tshark: "incorrect, should be 0xc614"): put the right one in first.
        for p in &mut pkts {
            let l4 = p.l4 as usize;
            if hdr::be16(&p.frame, l4 + 6) != Some(0) {
                let c = udp_checksum(p);
                p.frame[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
            }
        }
        let (buf, n, stride) = batch(&pkts, WINDOW);
        let r = wasp_plugin_sdk::__glue::apply(&mut g, 0, &buf, n, stride);
        let mut out = pkts.clone();
        for e in &r.edits {
            let f = &mut out[e.packet as usize].frame;
            let off = e.offset as usize;
            match &e.op {
                EditOp::Set(d) => f[off..off + d.len()].copy_from_slice(d),
                EditOp::Insert(d) => {
                    f.splice(off..off, d.iter().copied());
                }
                EditOp::Remove(c) => {
                    f.drain(off..off + *c as usize);
                }
            }
        }
        for (before, after) in pkts.iter().zip(&out) {
            let (l3, l4) = (after.l3 as usize, after.l4 as usize);
            assert_eq!(after.frame.len(), before.frame.len() + 8, "{file}");
            let ip = &after.frame[l3..l3 + 20];
            assert_eq!(
                hdr::be16(ip, 2).unwrap() as usize,
                after.frame.len() - l3,
                "{file}: total length"
            );
            assert_eq!(
                hdr::ipv4_checksum(ip),
                hdr::be16(ip, 10).unwrap(),
                "{file}: ip checksum"
            );
            let udp = Udp::parse(&after.frame[l4..]).unwrap();
            assert_eq!(
                udp.len as usize,
                after.frame.len() - l4,
                "{file}: udp length"
            );
            let old_csum = Udp::parse(&before.frame[before.l4 as usize..])
                .unwrap()
                .csum;
            if old_csum != 0 {
                assert_eq!(udp.csum, udp_checksum(after), "{file}: udp checksum");
            } else {
                assert_eq!(udp.csum, 0);
            }
            let old = Geneve::parse(&before.frame[before.l4 as usize + 8..]).unwrap();
            let new = Geneve::parse(&after.frame[l4 + 8..]).unwrap();
            assert_eq!(new.opt_len, old.opt_len + 2);
            let old_opts: Vec<_> = old
                .opts()
                .map(|o| (o.class, o.typ, o.data.to_vec()))
                .collect();
            let new_opts: Vec<_> = new
                .opts()
                .map(|o| (o.class, o.typ, o.data.to_vec()))
                .collect();
            assert_eq!(&new_opts[..old_opts.len()], &old_opts[..]);
            assert_eq!(
                new_opts.last().unwrap(),
                &(0x0102, 0x80, vec![0x00, 0x88, 0x00, 0x22])
            );
            // The inner frame after the options is unchanged.
            let tail = before.frame.len() - (before.l4 as usize + 16 + old.options.len());
            assert_eq!(
                after.frame[after.frame.len() - tail..],
                before.frame[before.frame.len() - tail..]
            );
        }
    }
}

fn apply_edits(pkts: &mut [TestPkt], edits: &[wasp_plugin_sdk::Edit]) {
    for e in edits {
        let f = &mut pkts[e.packet as usize].frame;
        let off = e.offset as usize;
        match &e.op {
            EditOp::Set(d) => f[off..off + d.len()].copy_from_slice(d),
            EditOp::Insert(d) => {
                f.splice(off..off, d.iter().copied());
            }
            EditOp::Remove(c) => {
                f.drain(off..off + *c as usize);
            }
        }
    }
}

fn statement(g: &mut GenevePlugin, site: u32, pkts: &[TestPkt]) -> Vec<TestPkt> {
    let (buf, n, stride) = batch(pkts, WINDOW);
    let r = wasp_plugin_sdk::__glue::apply(g, site, &buf, n, stride);
    let mut out = pkts.to_vec();
    apply_edits(&mut out, &r.edits);
    out.into_iter().map(|p| packet(p.frame)).collect()
}

/// VLAN-tagged captures into Geneve by the VLAN-range to VNI-range map (C30), and back.
#[test]
fn encap_by_vlan_map_and_decap_on_captures() {
    let mut g = GenevePlugin::default();
    let conf = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    g.configure(
        0,
        Kind::Statement,
        &conf("encap vlan 1-10 vni 5000-5009 vlan 200 vni 42 src 192.0.2.1 dst 192.0.2.2"),
    )
    .unwrap();
    g.configure(1, Kind::Statement, &conf("decap")).unwrap();
    for (file, vnis) in [
        ("sv-eve-flow-vlan-02.pcap", vec![5005, 5000, 5000]),
        ("tcpdump-802.1ad_QinQ.pcap", vec![42, 42]),
    ] {
        let pkts: Vec<TestPkt> = frames(file).into_iter().map(packet).collect();
        let enc = statement(&mut g, 0, &pkts);
        for ((before, after), vni) in pkts.iter().zip(&enc).zip(&vnis) {
            assert_eq!(after.frame.len(), before.frame.len() - 4 + 50, "{file}");
            let (_, gh) =
                hdr::geneve_in_udp(after.l4proto, &after.frame[after.l4 as usize..]).unwrap();
            assert_eq!(gh.vni, *vni, "{file}");
            let ip = &after.frame[14..34];
            assert_eq!(hdr::ipv4_checksum(ip), hdr::be16(ip, 10).unwrap());
            assert!(Udp::parse(&after.frame[34..]).unwrap().sport >= 49152);
            // The inner frame is the original without its first VLAN tag.
            let mut untagged = before.frame.clone();
            untagged.drain(12..16);
            assert_eq!(after.frame[50..], untagged[..], "{file}");
        }
        let dec = statement(&mut g, 1, &enc);
        for (before, back) in pkts.iter().zip(&dec) {
            let mut untagged = before.frame.clone();
            untagged.drain(12..16);
            assert_eq!(back.frame, untagged, "{file}");
        }
    }
    // Untagged frames are left alone.
    let plain: Vec<TestPkt> = frames("tcpdump-geneve.pcap")
        .into_iter()
        .map(packet)
        .collect();
    let same = statement(&mut g, 0, &plain);
    assert!(plain.iter().zip(&same).all(|(a, b)| a.frame == b.frame));
}

/// Decap of the Geneve captures: Ethernet inside (0x6558), IPv4 and IPv6 inside.
#[test]
fn decap_on_captures() {
    let mut g = GenevePlugin::default();
    g.configure(0, Kind::Statement, &["decap".to_string()])
        .unwrap();
    // tcpdump-geneve: Ethernet inside, at UDP + 8 + 8 (VNI 0xa) + options.
    let pkts: Vec<TestPkt> = frames("tcpdump-geneve.pcap")
        .into_iter()
        .map(packet)
        .collect();
    let dec = statement(&mut g, 0, &pkts);
    for (p, d) in pkts.iter().zip(&dec) {
        let gh = Geneve::parse(&p.frame[p.l4 as usize + 8..]).unwrap();
        let inner = p.l4 as usize + 16 + gh.options.len();
        assert_eq!(d.frame, p.frame[inner..]);
    }
    // GCP: IPv4 directly inside; zeek ipv6: IPv6 directly inside (outer IPv4).
    for (file, ethertype) in [
        ("tcpdump-geneve-gcp.pcap", 0x0800),
        ("zeek-geneve-ipv6.pcap", 0x86dd),
    ] {
        let pkts: Vec<TestPkt> = frames(file).into_iter().map(packet).collect();
        let dec = statement(&mut g, 0, &pkts);
        for (p, d) in pkts.iter().zip(&dec) {
            let gh = Geneve::parse(&p.frame[p.l4 as usize + 8..]).unwrap();
            let inner = p.l4 as usize + 16 + gh.options.len();
            assert_eq!(hdr::be16(&d.frame, 12), Some(ethertype), "{file}");
            assert_eq!(d.frame[..12], p.frame[..12], "{file}: the outer MACs stay");
            assert_eq!(d.frame[14..], p.frame[inner..], "{file}");
            assert_eq!(
                d.nfproto,
                if ethertype == 0x0800 {
                    NFPROTO_IPV4
                } else {
                    NFPROTO_IPV6
                }
            );
        }
    }
    // Nothing inside: left alone.
    let t: Vec<TestPkt> = frames("zeek-geneve-truncated.pcapng")
        .into_iter()
        .map(packet)
        .collect();
    assert_eq!(statement(&mut g, 0, &t)[0].frame, t[0].frame);
}
