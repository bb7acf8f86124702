//! Facts about the public captures in `../shared/pcaps` (see its MANIFEST.md), checked against
//! `parse`. Skips with a message when the folder is missing (a clone outside this workplace).

use std::path::PathBuf;

use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::{Block, PcapNgReader};
use wasp_wire::{L3Kind, Malformed, PacketMeta, TunnelKind, exthdr_bit, geneve, parse, vxlan};

fn pcap_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("WASP_PCAPS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/pcaps"),
        PathBuf::from,
    );
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipped: no capture folder at {}", dir.display());
        None
    }
}

/// The frames of capture `name` (pcap or pcapng), or `None` when the folder is missing.
fn frames(name: &str) -> Option<Vec<Vec<u8>>> {
    let path = pcap_dir()?.join(name);
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    if name.ends_with(".pcapng") {
        let mut r = PcapNgReader::new(file).expect("pcapng header");
        while let Some(block) = r.next_block() {
            match block.expect("pcapng block") {
                Block::EnhancedPacket(p) => out.push(p.data.into_owned()),
                Block::SimplePacket(p) => out.push(p.data.into_owned()),
                _ => {}
            }
        }
    } else {
        let mut r = PcapReader::new(file).expect("pcap header");
        while let Some(p) = r.next_packet() {
            match p {
                Ok(p) => out.push(p.data.into_owned()),
                // pcap-file rejects records longer than the header's snaplen, which the fuzzed
                // tcpdump captures have; read those files record by record instead.
                Err(_) => return Some(raw_pcap_records(&std::fs::read(&path).expect("read"))),
            }
        }
    }
    Some(out)
}

/// The records of a classic pcap file, without any check of the global header's snaplen.
fn raw_pcap_records(file: &[u8]) -> Vec<Vec<u8>> {
    let magic = &file[..4];
    let le = magic == [0xd4, 0xc3, 0xb2, 0xa1] || magic == [0x4d, 0x3c, 0xb2, 0xa1];
    let u32_at = |at: usize| {
        let b: [u8; 4] = file[at..at + 4].try_into().unwrap();
        if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= file.len() {
        let incl = u32_at(at + 8) as usize;
        let data = &file[at + 16..(at + 16 + incl).min(file.len())];
        out.push(data.to_vec());
        at += 16 + incl;
    }
    out
}

/// (class, type, data length in bytes) of the Geneve options of a parsed frame.
fn geneve_options(frame: &[u8], m: &PacketMeta) -> Vec<(u16, u8, usize)> {
    let t = m.tunnel.expect("a tunnel");
    assert_eq!(t.kind, TunnelKind::Geneve);
    let h = geneve::Header::new_checked(&frame[usize::from(t.offset)..]).expect("geneve header");
    h.option_iter()
        .map(|o| (o.class, o.opt_type, o.data.len()))
        .collect()
}

fn vids(m: &PacketMeta) -> Vec<u16> {
    m.vlans[..usize::from(m.vlan_count)]
        .iter()
        .map(|t| t.tci & 0x0fff)
        .collect()
}

#[test]
fn every_capture_parses_within_bounds() {
    let Some(dir) = pcap_dir() else { return };
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("read pcaps")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".pcap") || n.ends_with(".pcapng"))
        .collect();
    names.sort();
    assert!(names.len() >= 20, "{names:?}");
    for name in names {
        for (i, f) in frames(&name).unwrap().iter().enumerate() {
            let m = parse(f);
            assert_eq!(m.len as usize, f.len());
            for off in [m.net_offset, m.inner_l3_offset] {
                assert!(usize::from(off) <= f.len(), "{name} #{i}");
            }
            if let Some(l4) = m.l4 {
                assert!(usize::from(l4.offset) <= f.len(), "{name} #{i}");
            }
        }
    }
}

#[test]
fn geneve_gcp_options_of_mixed_lengths() {
    let Some(fr) = frames("tcpdump-geneve-gcp.pcap") else {
        return;
    };
    assert_eq!(fr.len(), 1);
    let m = parse(&fr[0]);
    let t = m.tunnel.unwrap();
    assert_eq!((t.vni, t.inner_proto, m.malformed), (0, 0x0800, None));
    assert_eq!(
        geneve_options(&fr[0], &m),
        vec![(0x0132, 1, 4), (0x0132, 2, 16), (0x0132, 3, 8)]
    );
    // IPv4 follows the options directly.
    assert_eq!(fr[0][usize::from(t.inner_offset.unwrap())] >> 4, 4);
}

#[test]
fn geneve_many_options() {
    let Some(fr) = frames("zeek-geneve-many-options.pcap") else {
        return;
    };
    assert_eq!(fr.len(), 10);
    for f in &fr {
        let m = parse(f);
        assert_eq!(m.tunnel.unwrap().vni, 0x0c012e);
        assert_eq!(
            geneve_options(f, &m),
            vec![(0x0100, 1, 16), (0x0100, 2, 36), (0x0100, 3, 12)]
        );
        assert_eq!(m.malformed, None);
    }
}

#[test]
fn geneve_critical_option_and_no_options() {
    let Some(fr) = frames("tcpdump-geneve.pcap") else {
        return;
    };
    assert_eq!(fr.len(), 39);
    let (mut a, mut b) = (0, 0);
    for f in &fr {
        let m = parse(f);
        let t = m.tunnel.unwrap();
        let h = geneve::Header::new_checked(&f[usize::from(t.offset)..]).unwrap();
        let opts: Vec<(u16, u8, bool, Vec<u8>)> = h
            .option_iter()
            .map(|o| (o.class, o.opt_type, o.is_critical(), o.data.to_vec()))
            .collect();
        match t.vni {
            0xa => {
                a += 1;
                assert!(h.critical());
                assert_eq!(opts, vec![(0, 0x80, true, vec![0, 0, 0, 0x0c])]);
            }
            0xb => {
                b += 1;
                assert!(opts.is_empty() && !h.critical());
            }
            vni => panic!("unexpected VNI {vni:#x}"),
        }
        assert_eq!(t.inner_proto, 0x6558);
    }
    assert!(a > 0 && b > 0);
}

#[test]
fn geneve_long_experimental_option() {
    let Some(fr) = frames("zeek-geneve-tagged-udp-packet.pcap") else {
        return;
    };
    for f in &fr {
        let m = parse(f);
        assert_eq!(m.tunnel.unwrap().vni, 100);
        assert_eq!(geneve_options(f, &m), vec![(0xff72, 0x7f, 56)]);
    }
}

#[test]
fn geneve_ipv6_payload_and_truncated_payload() {
    if let Some(fr) = frames("zeek-geneve-ipv6.pcap") {
        for f in &fr {
            let t = parse(f).tunnel.unwrap();
            assert_eq!((t.vni, t.inner_proto), (0x123456, 0x86dd));
        }
    }
    if let Some(fr) = frames("zeek-geneve-truncated.pcapng") {
        assert_eq!(fr.len(), 1);
        let m = parse(&fr[0]);
        let t = m.tunnel.unwrap();
        assert_eq!(t.inner_offset, None);
        assert_eq!(geneve_options(&fr[0], &m).len(), 1);
    }
}

#[test]
fn vxlan_captures() {
    if let Some(fr) = frames("tcpdump-vxlan.pcap") {
        assert_eq!(fr.len(), 10);
        for f in &fr {
            let t = parse(f).tunnel.unwrap();
            assert_eq!((t.kind, t.vni), (TunnelKind::Vxlan, 100));
        }
    }
    // MANIFEST.md says VNI 0xfa16, but that is the start of the inner MACs (fa:16:3e:..): the
    // flags byte is 0xff, the reserved field 0x01d1f2 and the VNI 11, as tshark decodes it.
    if let Some(fr) = frames("sv-vxlan-non-zero-reserved-fields.pcap") {
        for f in &fr {
            let m = parse(f);
            let t = m.tunnel.unwrap();
            assert_eq!(
                (t.kind, t.vni, t.inner_offset, m.malformed),
                (TunnelKind::Vxlan, 11, Some(50), None)
            );
            let h = vxlan::Header::new_checked(&f[42..]).unwrap();
            assert_eq!(h.flags(), 0xff);
            assert_ne!(h.reserved1(), 0);
        }
    }
}

#[test]
fn qinq_tags() {
    let Some(fr) = frames("tcpdump-802.1ad_QinQ.pcap") else {
        return;
    };
    assert_eq!(fr.len(), 2);
    for f in &fr {
        let m = parse(f);
        assert_eq!(vids(&m), vec![200, 2001]);
        assert_eq!((m.vlans[0].tpid, m.vlans[1].tpid), (0x88a8, 0x8100));
        assert_eq!((m.protocol, m.net_offset), (0x8100, 18));
        assert_eq!((m.inner_ethertype, m.inner_l3_offset), (0x0806, 22));
    }
}

#[test]
fn stacked_vlans_with_icmp() {
    let Some(fr) = frames("sv-eve-flow-vlan-02.pcap") else {
        return;
    };
    let stacks: Vec<Vec<u16>> = fr.iter().map(|f| vids(&parse(f))).collect();
    assert_eq!(stacks, vec![vec![6], vec![1, 10], vec![1, 10, 100]]);
    for f in &fr {
        let m = parse(f);
        assert_eq!(m.inner_l4.map(|l| l.proto), Some(1));
        // Only the single-tagged frame reaches nftables with L4 info.
        assert_eq!(m.l4.is_some(), m.vlan_count == 1);
    }
}

#[test]
fn mixed_vlan_and_mpls() {
    let Some(fr) = frames("zeek-mixed-vlan-mpls.pcap") else {
        return;
    };
    let count = |p: &dyn Fn(&PacketMeta) -> bool| fr.iter().filter(|f| p(&parse(f))).count();
    assert_eq!(fr.len(), 47);
    assert_eq!(
        count(&|m| m.vlan_count == 0 && m.l4.map(|l| l.proto) == Some(6)),
        22
    );
    assert_eq!(
        count(&|m| vids(m) == [4093] && m.l4.map(|l| l.proto) == Some(6)),
        14
    );
    assert_eq!(
        count(&|m| m.l3 == L3Kind::Other(0x8847) && m.l4.is_none()),
        11
    );
}

#[test]
fn udp_length_heap_overflow_has_no_l4() {
    let Some(fr) = frames("tcpdump-udp-length-heapoverflow.pcap") else {
        return;
    };
    let m = parse(&fr[0]);
    assert_eq!((m.l3, m.l4), (L3Kind::Ipv4, None));
    assert_eq!(m.malformed, Some(Malformed::BadIpv4));
}

#[test]
fn ipv6_extension_header_captures() {
    if let Some(fr) = frames("zeek-ipv6-hbh-routing0.pcap") {
        let m = parse(&fr[0]);
        let want = exthdr_bit(0).unwrap() | exthdr_bit(43).unwrap();
        assert_eq!((m.ip6_exthdrs, m.l4.map(|l| l.proto)), (want, Some(17)));
    }
    if let Some(fr) = frames("tcpdump-ipv6-routing-header.pcap") {
        assert_eq!(fr.len(), 4);
        for f in &fr {
            let m = parse(f);
            assert_eq!(m.ip6_exthdrs, exthdr_bit(43).unwrap());
            assert!(matches!(m.l4.map(|l| l.proto), Some(58 | 17)));
        }
    }
}

#[test]
fn fragments() {
    if let Some(fr) = frames("zeek-ipv4-fragmented-1.pcap") {
        let offs: Vec<Option<u16>> = fr.iter().map(|f| parse(f).l4.map(|l| l.fragoff)).collect();
        assert_eq!(offs, vec![Some(0), Some(48), Some(0)]);
    }
    if let Some(fr) = frames("sv-frag-eth-vlan-ipv6-tcp.pcap") {
        assert_eq!(fr.len(), 3);
        for f in &fr {
            let m = parse(f);
            assert_eq!((vids(&m), m.protocol), (vec![6], 0x86dd));
            assert_eq!(m.ip6_exthdrs, exthdr_bit(44).unwrap());
            assert_eq!(m.l4.map(|l| l.proto), Some(6));
        }
        // #2 and #3 are non-first fragments: the kernel's thoff stays at the IPv6 header (after
        // the popped tag, at 18), where `tcp flags` reads saddr byte 5 (0 for ::1); the kernel
        // drops both with `tcp flags & (fin|syn|rst|psh|ack|urg) == 0` (conformance 05-tcp-udp).
        for f in &fr[1..] {
            let l4 = parse(f).l4.unwrap();
            assert_eq!((l4.offset, l4.fragoff != 0), (18, true));
            assert_eq!(f[18 + 13], 0);
        }
    }
}

#[test]
fn ipv6_payload_len_zero_non_first_fragment() {
    // Payload length 0 passes nftables' validation (0 + 40 <= 56 bytes); the fragment header
    // (offset 0x0500 & !7 = 1280, next header 2) is a non-first fragment, so the walk stops there.
    let Some(fr) = frames("tcpdump-ipv6_frag6_negative_len.pcap") else {
        return;
    };
    let m = parse(&fr[0]);
    assert_eq!(fr[0].len(), 70);
    let l4 = m.l4.unwrap();
    // ipv6_find_hdr leaves the offset at 0 for a non-first fragment: thoff is the IPv6 header.
    assert_eq!((l4.proto, l4.offset, l4.fragoff), (2, 14, 1280));
    assert_eq!(
        (m.ip6_exthdrs, m.malformed),
        (exthdr_bit(44).unwrap(), None)
    );
}
