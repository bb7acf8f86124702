//! Feed arbitrary bytes to `wasp_wire::parse` as a captured Ethernet frame, then build every
//! view the metadata points at and read every field, so an offset that lets an accessor panic
//! or read out of bounds is found here. All logic lives in wasp-wire.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wasp_wire::{L3Kind, TunnelKind, arp, ethernet, geneve, icmp, icmpv6, ipv4, ipv6, ipv6_ext};
use wasp_wire::{tcp, udp, vlan, vxlan};

fuzz_target!(|frame: &[u8]| {
    let m = wasp_wire::parse(frame);
    let at = |off: u16| frame.get(usize::from(off)..).unwrap_or(&[]);

    if let Ok(eth) = ethernet::Frame::new_checked(frame) {
        let _ = (eth.dst(), eth.src(), eth.ethertype());
        let tags: usize = vlan::Stack::new(eth)
            .map(|t| usize::from(t.tag.pcp()) + usize::from(t.tag.vid()) + usize::from(t.tag.dei()))
            .count();
        assert!(tags >= usize::from(m.vlan_count));
    }
    match m.l3 {
        L3Kind::Ipv4 => {
            if let Ok(ip) = ipv4::Packet::new_checked(at(m.net_offset)) {
                let _ = (
                    ip.total_len(),
                    ip.frag_offset(),
                    ip.src(),
                    ip.dst(),
                    ip.dscp(),
                );
                let _ = ip.option_iter().count();
                let _ = ip.payload().len();
            }
        }
        L3Kind::Ipv6 => {
            if let Ok(ip) = ipv6::Packet::new_checked(at(m.net_offset)) {
                let _ = (ip.flow_label(), ip.traffic_class(), ip.payload().len());
                for item in ipv6_ext::Chain::new(ip) {
                    let h = item.header;
                    let _ = (
                        h.frag_offset(),
                        h.frag_ident(),
                        h.segments_left(),
                        h.ah_spi(),
                    );
                    let _ = h.options().count();
                }
                let _ = ipv6_ext::find_hdr(ip.bytes(), None, true);
            }
        }
        L3Kind::Arp => {
            if let Ok(a) = arp::Packet::new_checked(at(m.net_offset)) {
                let _ = (a.sha(), a.spa(), a.tha(), a.tpa(), a.oper());
            }
        }
        L3Kind::Other(_) | L3Kind::None => {}
    }
    if let Some(l4) = m.inner_l4.filter(|l| l.fragoff == 0) {
        let b = at(l4.offset);
        match l4.proto {
            6 => {
                if let Ok(t) = tcp::Packet::new_checked(b) {
                    let _ = (
                        t.flags(),
                        t.seq(),
                        t.option_iter().count(),
                        t.payload().len(),
                    );
                }
            }
            17 => {
                if let Ok(u) = udp::Packet::new_checked(b) {
                    let _ = (u.src_port(), u.dst_port(), u.length());
                }
            }
            1 => {
                if let Ok(i) = icmp::Packet::new_checked(b) {
                    let _ = (i.msg_type(), i.echo_ident(), i.echo_seq());
                }
            }
            58 => {
                if let Ok(i) = icmpv6::Packet::new_checked(b) {
                    let _ = (i.msg_type(), i.echo_ident(), i.echo_seq());
                }
            }
            _ => {}
        }
    }
    if let Some(t) = m.tunnel {
        match t.kind {
            TunnelKind::Vxlan => {
                let h = vxlan::Header::new_checked(at(t.offset)).expect("parse saw a VXLAN header");
                assert_eq!(h.vni(), t.vni);
            }
            TunnelKind::Geneve => {
                if let Ok(h) = geneve::Header::new_checked(at(t.offset)) {
                    assert_eq!(h.vni(), t.vni);
                    let mut opts = h.option_iter();
                    for o in opts.by_ref() {
                        assert_eq!(o.data.len(), usize::from(o.len_words) * 4);
                        let _ = (o.class, o.is_critical());
                    }
                    let _ = opts.remainder();
                }
            }
        }
        if let Some(inner) = t.inner_offset {
            // The inner frame is parsed like any other.
            let _ = wasp_wire::parse(at(inner));
        }
    }
});
