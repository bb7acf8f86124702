//! Tests against frames built here (checksums recomputed from scratch) and a Geneve capture.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::checksum::{checksum, sum};
use crate::*;

const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
const MAC_GW_IN: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const MAC_GW_OUT: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

fn v6(last: u16) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, last))
}

fn addr_bytes(a: IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// The L4 checksum of `seg` (its checksum field included as it is) from `src` to `dst`,
/// recomputed from scratch with the pseudo-header (RFC 793 / RFC 768 / RFC 8200 8.1).
fn l4_sum(src: IpAddr, dst: IpAddr, proto: u8, seg: &[u8]) -> u16 {
    let mut ph = addr_bytes(src);
    ph.extend(addr_bytes(dst));
    if src.is_ipv4() {
        ph.extend([0, proto]);
        ph.extend((seg.len() as u16).to_be_bytes());
    } else {
        ph.extend((seg.len() as u32).to_be_bytes());
        ph.extend([0, 0, 0, proto]);
    }
    let s = u64::from(sum(0, &ph));
    !sum(s, seg)
}

/// A packet of `key` (addresses, ports, protocol) with `ttl`, TCP `flags`, `payload`, and
/// correct checksums. `udp_csum`: false sends UDP checksum 0 (IPv4).
struct Pkt {
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    proto: u8,
    ttl: u8,
    flags: u8,
    payload: Vec<u8>,
    udp_csum: bool,
    dmac: [u8; 6],
    smac: [u8; 6],
}

impl Pkt {
    fn new(k: &FlowKey) -> Pkt {
        Pkt {
            src: k.src,
            dst: k.dst,
            sport: k.src_port,
            dport: k.dst_port,
            proto: k.l4proto,
            ttl: 64,
            flags: 0x10,
            payload: b"hello flowtable".to_vec(),
            udp_csum: true,
            dmac: MAC_GW_IN,
            smac: MAC_A,
        }
    }

    fn build(&self) -> Vec<u8> {
        let mut l4 = Vec::new();
        l4.extend(self.sport.to_be_bytes());
        l4.extend(self.dport.to_be_bytes());
        let csum_at = if self.proto == TCP {
            l4.extend([
                0, 0, 0, 1, 0, 0, 0, 2, 0x50, self.flags, 0xff, 0xff, 0, 0, 0, 0,
            ]);
            16
        } else {
            l4.extend(((8 + self.payload.len()) as u16).to_be_bytes());
            l4.extend([0, 0]);
            6
        };
        l4.extend(&self.payload);
        if self.proto == TCP || self.udp_csum {
            let mut c = l4_sum(self.src, self.dst, self.proto, &l4);
            if self.proto == UDP && c == 0 {
                c = 0xffff;
            }
            l4[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
        }
        let mut f = Vec::new();
        f.extend(self.dmac);
        f.extend(self.smac);
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                f.extend(0x0800u16.to_be_bytes());
                let total = (20 + l4.len()) as u16;
                let mut h = vec![0x45, 0];
                h.extend(total.to_be_bytes());
                h.extend([0x12, 0x34, 0x40, 0, self.ttl, self.proto, 0, 0]);
                h.extend(s.octets());
                h.extend(d.octets());
                let c = checksum(&h);
                h[10..12].copy_from_slice(&c.to_be_bytes());
                f.extend(h);
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                f.extend(0x86ddu16.to_be_bytes());
                f.extend([0x60, 0, 0, 0]);
                f.extend((l4.len() as u16).to_be_bytes());
                f.extend([self.proto, self.ttl]);
                f.extend(s.octets());
                f.extend(d.octets());
            }
            _ => unreachable!(),
        }
        f.extend(l4);
        f
    }
}

fn key(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, proto: u8, iif: u16) -> FlowKey {
    FlowKey {
        src,
        dst,
        src_port: sport,
        dst_port: dport,
        l4proto: proto,
        iif,
        tun_id: None,
    }
}

fn route(out_dev: u16, smac: [u8; 6], dmac: [u8; 6]) -> Route {
    Route {
        out_dev,
        smac,
        dmac,
        mtu: 1500,
        dec_ttl: true,
        nat: NatEdit::default(),
        tunnel: TunnelWork::None,
    }
}

/// A masquerading gateway's flow: client A (dev 0) -> server B (dev 1), source rewritten to
/// the gateway's outside address and port `nat_port`. Returns (spec, original key, reply key).
fn snat_flow(proto: u8, v6_addrs: bool, nat_port: u16) -> FlowSpec {
    let (a, b, gw) = if v6_addrs {
        (v6(0xa), v6(0xb), v6(0x1))
    } else {
        (v4(10, 0, 0, 10), v4(192, 0, 2, 11), v4(198, 51, 100, 1))
    };
    let orig = key(a, b, 40000, 80, proto, 0);
    let reply = key(b, gw, 80, nat_port, proto, 1);
    let mut r0 = route(1, MAC_GW_OUT, MAC_B);
    r0.nat = NatEdit {
        src: Some(gw),
        src_port: Some(nat_port),
        ..NatEdit::default()
    };
    let mut r1 = route(0, MAC_GW_IN, MAC_A);
    r1.nat = NatEdit {
        dst: Some(a),
        dst_port: Some(40000),
        ..NatEdit::default()
    };
    FlowSpec {
        ct_id: 7,
        keys: [orig, reply],
        routes: [r0, r1],
    }
}

fn table() -> Flowtable {
    Flowtable::new(FlowtableConfig {
        counter: true,
        ..FlowtableConfig::default()
    })
}

fn forward(ft: &Flowtable, frame: &[u8], iif: u16, now: u64) -> (Vec<u8>, u16, bool) {
    let meta = wasp_wire::parse(frame);
    match ft.fast_path(frame, &meta, iif, now) {
        FastPath::Forward {
            out_dev,
            edit,
            by_block,
            ..
        } => {
            assert_eq!(out_dev, edit.out_dev());
            (edit.to_vec(frame).expect("write"), out_dev, by_block)
        }
        other => panic!("expected a forward, got {other:?}"),
    }
}

fn slow(ft: &Flowtable, frame: &[u8], iif: u16, now: u64) -> (SlowReason, Option<Teardown>) {
    let meta = wasp_wire::parse(frame);
    match ft.fast_path(frame, &meta, iif, now) {
        FastPath::Slow { reason, teardown } => (reason, teardown),
        other => panic!("expected slow, got {other:?}"),
    }
}

fn is_miss(ft: &Flowtable, frame: &[u8], iif: u16, now: u64) -> bool {
    let meta = wasp_wire::parse(frame);
    matches!(ft.fast_path(frame, &meta, iif, now), FastPath::Miss)
}

/// Check an output frame against the packet it should be, field by field, and its checksums
/// from scratch.
fn check_out(out: &[u8], want: &Pkt, udp_zero: bool) {
    let expect = want.build();
    assert_eq!(out.len(), expect.len());
    let ipv6 = want.src.is_ipv6();
    let l4 = 14 + if ipv6 { 40 } else { 20 };
    if !ipv6 {
        assert_eq!(checksum(&out[14..34]), 0, "IPv4 header checksum");
    }
    let csum_at = l4 + if want.proto == TCP { 16 } else { 6 };
    let got = u16::from_be_bytes([out[csum_at], out[csum_at + 1]]);
    if udp_zero {
        assert_eq!(got, 0, "UDP checksum 0 stays 0");
    } else {
        assert_ne!(got, 0);
        let mut seg = out[l4..].to_vec();
        seg[csum_at - l4..csum_at - l4 + 2].copy_from_slice(&[0, 0]);
        let mut scratch = l4_sum(want.src, want.dst, want.proto, &seg);
        if want.proto == UDP && scratch == 0 {
            scratch = 0xffff;
        }
        assert_eq!(got, scratch, "L4 checksum: incremental vs from scratch");
    }
    // Every byte equals the packet built from scratch with the new fields.
    assert_eq!(out, &expect[..]);
}

#[test]
fn nat_v4_tcp_both_directions() {
    let ft = table();
    let spec = snat_flow(TCP, false, 61000);
    let [orig, reply] = spec.keys;
    ft.add(spec, 0).unwrap();

    let p = Pkt::new(&orig);
    let (out, dev, _) = forward(&ft, &p.build(), 0, 1);
    assert_eq!(dev, 1);
    let mut want = Pkt::new(&orig);
    want.src = v4(198, 51, 100, 1);
    want.sport = 61000;
    want.ttl = 63;
    want.dmac = MAC_B;
    want.smac = MAC_GW_OUT;
    check_out(&out, &want, false);

    let mut p = Pkt::new(&reply);
    p.smac = MAC_B;
    p.dmac = MAC_GW_OUT;
    let (out, dev, _) = forward(&ft, &p.build(), 1, 2);
    assert_eq!(dev, 0);
    let mut want = Pkt::new(&reply);
    want.dst = v4(10, 0, 0, 10);
    want.dport = 40000;
    want.ttl = 63;
    want.dmac = MAC_A;
    want.smac = MAC_GW_IN;
    check_out(&out, &want, false);
}

#[test]
fn nat_v6_tcp_and_udp() {
    for proto in [TCP, UDP] {
        let ft = table();
        let spec = snat_flow(proto, true, 62000);
        let [orig, reply] = spec.keys;
        ft.add(spec, 0).unwrap();
        let (out, _, _) = forward(&ft, &Pkt::new(&orig).build(), 0, 1);
        let mut want = Pkt::new(&orig);
        want.src = v6(1);
        want.sport = 62000;
        want.ttl = 63;
        want.dmac = MAC_B;
        want.smac = MAC_GW_OUT;
        check_out(&out, &want, false);
        let mut p = Pkt::new(&reply);
        p.ttl = 2;
        let (out, _, _) = forward(&ft, &p.build(), 1, 1);
        let mut want = Pkt::new(&reply);
        want.dst = v6(0xa);
        want.dport = 40000;
        want.ttl = 1;
        want.dmac = MAC_A;
        want.smac = MAC_GW_IN;
        check_out(&out, &want, false);
    }
}

#[test]
fn nat_v4_udp_zero_checksum_kept() {
    let ft = table();
    let spec = snat_flow(UDP, false, 61001);
    let orig = spec.keys[0];
    ft.add(spec, 0).unwrap();
    let mut p = Pkt::new(&orig);
    p.udp_csum = false;
    let (out, _, _) = forward(&ft, &p.build(), 0, 1);
    let mut want = Pkt::new(&orig);
    want.udp_csum = false;
    want.src = v4(198, 51, 100, 1);
    want.sport = 61001;
    want.ttl = 63;
    want.dmac = MAC_B;
    want.smac = MAC_GW_OUT;
    check_out(&out, &want, true);
}

/// A UDP checksum that becomes 0 after the NAT is sent as 0xffff (CSUM_MANGLED_0): search a
/// 2-byte payload for which the rewritten packet's checksum computes to 0.
#[test]
fn nat_v4_udp_checksum_zero_becomes_ffff() {
    let ft = table();
    let spec = snat_flow(UDP, false, 61002);
    let orig = spec.keys[0];
    ft.add(spec, 0).unwrap();
    let mut want = Pkt::new(&orig);
    want.src = v4(198, 51, 100, 1);
    want.sport = 61002;
    let payload = (0..=u16::MAX)
        .map(|v| v.to_be_bytes().to_vec())
        .find(|pl| {
            let mut seg = vec![0u8; 8];
            seg[0..2].copy_from_slice(&61002u16.to_be_bytes());
            seg[2..4].copy_from_slice(&80u16.to_be_bytes());
            seg[4..6].copy_from_slice(&10u16.to_be_bytes());
            seg.extend(pl);
            l4_sum(want.src, want.dst, UDP, &seg) == 0
        })
        .expect("some payload gives checksum 0");
    let mut p = Pkt::new(&orig);
    p.payload = payload.clone();
    let (out, _, _) = forward(&ft, &p.build(), 0, 1);
    assert_eq!(&out[40..42], &[0xff, 0xff]);
    want.payload = payload;
    want.ttl = 63;
    want.dmac = MAC_B;
    want.smac = MAC_GW_OUT;
    check_out(&out, &want, false);
}

/// Without NAT: MACs and TTL only, byte-exact; Ethernet padding is not sent.
#[test]
fn plain_forward_v4_drops_padding() {
    let ft = table();
    let orig = key(v4(10, 0, 0, 1), v4(10, 1, 0, 1), 1000, 2000, UDP, 3);
    let reply = key(v4(10, 1, 0, 1), v4(10, 0, 0, 1), 2000, 1000, UDP, 4);
    ft.add(
        FlowSpec {
            ct_id: 1,
            keys: [orig, reply],
            routes: [route(4, MAC_GW_OUT, MAC_B), route(3, MAC_GW_IN, MAC_A)],
        },
        0,
    )
    .unwrap();
    let mut p = Pkt::new(&orig);
    p.payload = vec![1, 2];
    let mut frame = p.build();
    let ip_end = frame.len();
    frame.resize(60, 0xee);
    let (out, dev, _) = forward(&ft, &frame, 3, 1);
    assert_eq!(dev, 4);
    assert_eq!(out.len(), ip_end);
    let mut want = p;
    want.ttl = 63;
    want.dmac = MAC_B;
    want.smac = MAC_GW_OUT;
    check_out(&out, &want, false);
    // Wrong input device: miss.
    assert!(is_miss(&ft, &frame, 4, 1));
}

/// C19: a FIN in the fast path tears the flow down (reason Fin, the caller's ct id), before the
/// packet goes to the chains; the flow is gone, so the reply's FIN misses and cannot tear down
/// or re-offload anything; an RST gives Rst.
#[test]
fn c19_fin_and_rst_tear_down() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let ev = Arc::clone(&events);
    let ft = table().with_event_sink(Box::new(move |e: &FlowEvent| {
        ev.lock().unwrap().push((e.kind, e.ct_id));
    }));
    let spec = snat_flow(TCP, false, 61000);
    let [orig, reply] = spec.keys;
    let id = ft.add(spec.clone(), 0).unwrap();
    forward(&ft, &Pkt::new(&orig).build(), 0, 5);
    let mut fin = Pkt::new(&orig);
    fin.flags = 0x11;
    let (reason, td) = slow(&ft, &fin.build(), 0, 6);
    assert_eq!(reason, SlowReason::Fin);
    let td = td.expect("this call tore the flow down");
    assert_eq!((td.id, td.ct_id, td.reason), (id, 7, TeardownReason::Fin));
    assert_eq!(td.counters.packets, [1, 0]);
    assert_eq!(ft.len(), 0);
    assert_eq!(ft.lookup(&orig), None);
    assert_eq!(ft.lookup(&reply), None);
    let mut fin_reply = Pkt::new(&reply);
    fin_reply.flags = 0x11;
    assert!(is_miss(&ft, &fin_reply.build(), 1, 7));
    assert!(is_miss(&ft, &Pkt::new(&orig).build(), 0, 7));
    assert_eq!(
        *events.lock().unwrap(),
        vec![
            (FlowEventKind::Add, 7),
            (FlowEventKind::Del(TeardownReason::Fin), 7)
        ]
    );
    // Teardown of a gone flow: nothing (only one teardown per flow).
    assert_eq!(ft.teardown(id, TeardownReason::Dying, 8), None);

    // The caller may add the connection again (its own check decides): RST then.
    ft.add(spec, 10).unwrap();
    let mut rst = Pkt::new(&reply);
    rst.flags = 0x04;
    let (reason, td) = slow(&ft, &rst.build(), 1, 11);
    assert_eq!(reason, SlowReason::Rst);
    assert_eq!(td.unwrap().reason, TeardownReason::Rst);
    assert!(ft.is_empty());
}

/// C20: TTL 1 and hop limit 1 go to the slow path (the flow stays), the other packets of the
/// flow stay fast; only forwarded packets count.
#[test]
fn c20_ttl_and_hop_limit_one_go_slow() {
    for v6_addrs in [false, true] {
        let ft = table();
        let spec = snat_flow(UDP, v6_addrs, 61000);
        let orig = spec.keys[0];
        let id = ft.add(spec, 0).unwrap();
        for ttl in [1, 0] {
            let mut p = Pkt::new(&orig);
            p.ttl = ttl;
            assert_eq!(slow(&ft, &p.build(), 0, 1), (SlowReason::Ttl, None));
        }
        let mut p = Pkt::new(&orig);
        p.ttl = 2;
        let (out, _, _) = forward(&ft, &p.build(), 0, 2);
        let ttl_at = if v6_addrs { 14 + 7 } else { 14 + 8 };
        assert_eq!(out[ttl_at], 1);
        forward(&ft, &Pkt::new(&orig).build(), 0, 3);
        let info = &ft.flows(4)[0];
        assert_eq!(info.id, id);
        assert_eq!(info.counters.unwrap().packets, [2, 0]);
    }
}

/// A packet longer than the route's MTU goes to the slow path; one of exactly the MTU is
/// forwarded.
#[test]
fn mtu_overflow_goes_slow() {
    let ft = table();
    let mut spec = snat_flow(UDP, false, 61000);
    spec.routes[0].mtu = 1400;
    let orig = spec.keys[0];
    ft.add(spec, 0).unwrap();
    let mut p = Pkt::new(&orig);
    p.payload = vec![0x5a; 1400 - 28];
    forward(&ft, &p.build(), 0, 1);
    p.payload.push(0);
    assert_eq!(slow(&ft, &p.build(), 0, 2), (SlowReason::Mtu, None));
    assert_eq!(ft.len(), 1);
}

#[test]
fn add_errors() {
    let ft = Flowtable::new(FlowtableConfig {
        max_flows: 1,
        ..FlowtableConfig::default()
    });
    let spec = snat_flow(TCP, false, 61000);
    ft.add(spec.clone(), 0).unwrap();
    assert_eq!(ft.add(spec.clone(), 0), Err(AddError::Full(1)));
    let ft = table();
    ft.add(spec.clone(), 0).unwrap();
    assert_eq!(
        ft.add(spec.clone(), 0),
        Err(AddError::Exists(Dir::Original))
    );
    let mut other = spec.clone();
    other.keys[0].src_port = 1;
    assert_eq!(ft.add(other, 0), Err(AddError::Exists(Dir::Reply)));
    // The failed add left the table as it was.
    assert_eq!(ft.len(), 1);
    let mut bad = spec.clone();
    bad.keys[0].l4proto = 1;
    assert!(matches!(ft.add(bad, 0), Err(AddError::Invalid(_))));
    let mut bad = spec;
    bad.routes[0].nat.src = Some(v6(1));
    assert!(matches!(ft.add(bad, 0), Err(AddError::Invalid(_))));
}

/// GC: idle flows go after the timeout; a flow forwarded by its block is kept alive by the
/// block's stats although its software counters saw nothing.
#[test]
fn gc_expiry_with_block_stats() {
    const S: u64 = 1_000_000_000;
    let ft = table();
    let hw = Arc::new(HwModel::new("hw", 1, 0));
    ft.register_block(hw.clone()).unwrap();
    let a = snat_flow(UDP, false, 61000);
    let mut b = snat_flow(UDP, false, 61001);
    b.keys[0].src_port = 40001;
    b.routes[1].nat.dst_port = Some(40001);
    b.ct_id = 8;
    let (ka, kb) = (a.keys[0], b.keys[0]);
    let ida = ft.add(a, 0).unwrap();
    let idb = ft.add(b, 0).unwrap();
    assert_eq!(hw.len(), 1);
    let fl = ft.flows(0);
    assert_eq!(
        fl[0].offload,
        OffloadState::Offloaded { block: "hw".into() }
    );
    assert_eq!(fl[1].offload, OffloadState::Software);
    assert_eq!(ft.stats().offload_refused, 1);
    // Both see a packet at 20 s: a's in the block, b's in software.
    assert!(forward(&ft, &Pkt::new(&ka).build(), 0, 20 * S).2);
    let mut pb = Pkt::new(&kb);
    pb.sport = 40001;
    assert!(!forward(&ft, &pb.build(), 0, 20 * S).2);
    assert!(ft.gc(35 * S).is_empty(), "a is alive by its block's stats");
    let fl = ft.flows(35 * S);
    assert_eq!(fl[0].idle_ns, 15 * S);
    assert_eq!(fl[0].age_ns, 35 * S);
    let gone = ft.gc(50 * S);
    assert_eq!(gone.len(), 2);
    assert!(gone.iter().all(|t| t.reason == TeardownReason::Idle));
    let ta = gone.iter().find(|t| t.id == ida).unwrap();
    assert_eq!(
        ta.counters.packets,
        [1, 0],
        "the block's count is in the teardown"
    );
    assert_eq!(ta.counters.bytes, [u64::from(20u16 + 8 + 15), 0]);
    assert!(gone.iter().any(|t| t.id == idb && t.ct_id == 8));
    assert!(hw.is_empty(), "deleted from the block");
    assert!(ft.is_empty());
}

/// The idle timeout is the flowtable's.
#[test]
fn gc_custom_timeout() {
    let ft = Flowtable::new(FlowtableConfig {
        timeout_ns: 5,
        ..FlowtableConfig::default()
    });
    ft.add(snat_flow(TCP, false, 1), 100).unwrap();
    assert!(ft.gc(104).is_empty());
    assert_eq!(ft.gc(105).len(), 1);
}

/// The HwModel's capacity (flows beyond it stay in software, counted) and latency (software
/// counts until the entry is active).
#[test]
fn hw_model_capacity_and_latency() {
    let ft = table();
    let hw = Arc::new(HwModel::new("nic0", 2, 1000));
    ft.register_block(hw.clone()).unwrap();
    let mut keys = Vec::new();
    for i in 0..3u16 {
        let mut s = snat_flow(TCP, false, 61000 + i);
        s.keys[0].src_port = 40000 + i;
        s.routes[1].nat.dst_port = Some(40000 + i);
        keys.push(s.keys[0]);
        ft.add(s, 100).unwrap();
    }
    assert_eq!((hw.len(), hw.rejected()), (2, 1));
    let fl = ft.flows(500);
    assert_eq!(
        fl[0].offload,
        OffloadState::Pending {
            block: "nic0".into(),
            active_at_ns: 1100
        }
    );
    assert_eq!(fl[2].offload, OffloadState::Software);
    assert!(fl[2].blocks.is_empty());
    let pkt = |k: &FlowKey| {
        let mut p = Pkt::new(k);
        p.sport = k.src_port;
        p.build()
    };
    // Before the latency: software.
    assert!(!forward(&ft, &pkt(&keys[0]), 0, 600).2);
    // After: the block.
    assert!(forward(&ft, &pkt(&keys[0]), 0, 1100).2);
    assert!(forward(&ft, &pkt(&keys[0]), 0, 1200).2);
    assert!(!forward(&ft, &pkt(&keys[2]), 0, 1200).2);
    let e = hw.entry(&keys[0]).unwrap();
    assert_eq!((e.packets, e.last_used_ns), ([2, 0], 1200));
    let fl = ft.flows(1300);
    assert_eq!(
        fl[0].offload,
        OffloadState::Offloaded {
            block: "nic0".into()
        }
    );
    assert_eq!(fl[0].counters.unwrap().packets, [3, 0]);
    assert_eq!(fl[0].block_counters.unwrap().packets, [2, 0]);
    assert_eq!(fl[2].counters.unwrap().packets, [1, 0]);
    assert_eq!(fl[2].block_counters.unwrap().packets, [0, 0]);
    // Unregistering sends its flows back to software with their counts.
    assert_eq!(ft.unregister_block("nic0", 1400), Ok(2));
    assert!(hw.is_empty());
    let fl = ft.flows(1400);
    assert_eq!(fl[0].offload, OffloadState::Software);
    assert_eq!(fl[0].counters.unwrap().packets, [3, 0]);
    assert!(!forward(&ft, &pkt(&keys[0]), 0, 1500).2);
    assert_eq!(
        ft.unregister_block("nic0", 0),
        Err(BlockError::NotFound("nic0".into()))
    );
}

/// Without the `counter` flag listings show no counters; flows count anyway.
#[test]
fn counter_flag_hides_counters() {
    let ft = Flowtable::new(FlowtableConfig::default());
    let spec = snat_flow(TCP, false, 61000);
    let orig = spec.keys[0];
    let id = ft.add(spec, 0).unwrap();
    forward(&ft, &Pkt::new(&orig).build(), 0, 1);
    assert_eq!(ft.flows(2)[0].counters, None);
    assert_eq!(ft.del(id, 3).unwrap().counters.packets, [1, 0]);
}

/// Flow insertion from 2 threads while a third registers and removes a block in a loop: no flow
/// lost, each ends in software or in the block (the block's table agrees), and every packet
/// sent is counted once (software or block), whichever lock guards the block list.
#[test]
fn concurrent_insert_with_block_churn() {
    for lock in [BlockLock::RwLock, BlockLock::Mutex] {
        let ft = Arc::new(Flowtable::new(FlowtableConfig {
            counter: true,
            block_lock: lock,
            ..FlowtableConfig::default()
        }));
        let hw = Arc::new(HwModel::new("hw", usize::MAX, 0));
        let stop = Arc::new(AtomicBool::new(false));
        const PER: u16 = 2000;
        let churn = {
            let (ft, hw, stop) = (Arc::clone(&ft), Arc::clone(&hw), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::Relaxed) || n < 4 {
                    ft.register_block(hw.clone()).unwrap();
                    std::thread::yield_now();
                    ft.unregister_block("hw", 0).unwrap();
                    n += 1;
                }
                // End registered, with some flows in it maybe.
                ft.register_block(hw.clone()).unwrap();
                n
            })
        };
        let workers: Vec<_> = (0..2u16)
            .map(|t| {
                let ft = Arc::clone(&ft);
                std::thread::spawn(move || {
                    for i in 0..PER {
                        let mut s = snat_flow(UDP, false, 1);
                        s.keys[0].src = v4(10, t as u8, (i >> 8) as u8, i as u8);
                        s.keys[1].dst_port = 1000 + i;
                        s.keys[1].dst = v4(198, 51, 100, t as u8);
                        s.routes[0].nat.src_port = Some(1000 + i);
                        let k = s.keys[0];
                        ft.add(s, 0).unwrap();
                        for now in [1, 2] {
                            let f = Pkt::new(&k).build();
                            let meta = wasp_wire::parse(&f);
                            assert!(matches!(
                                ft.fast_path(&f, &meta, 0, now),
                                FastPath::Forward { .. }
                            ));
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        let cycles = churn.join().unwrap();
        assert!(cycles >= 4);
        let fl = ft.flows(3);
        assert_eq!(fl.len(), 2 * usize::from(PER));
        let in_block = fl.iter().filter(|f| f.blocks == ["hw"]).count();
        assert!(fl.iter().all(|f| f.blocks.is_empty() || f.blocks == ["hw"]));
        assert_eq!(in_block, hw.len(), "{lock:?}");
        assert!(fl.iter().all(|f| f.counters.unwrap().packets == [2, 0]));
        assert_eq!(ft.stats().added, 2 * u64::from(PER));
    }
}

fn geneve_frames() -> Vec<Vec<u8>> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/pcaps/tcpdump-geneve.pcap"
    );
    let file = std::fs::File::open(path).expect("the Geneve capture");
    let mut r = pcap_file::pcap::PcapReader::new(file).expect("pcap header");
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        out.push(p.expect("packet").data.into_owned());
    }
    out
}

/// The inner packet's key (IPv4 TCP) of a captured Geneve frame whose inner frame starts at
/// `inner`.
fn inner_key(f: &[u8], inner: usize, iif: u16, tun: Option<u32>) -> FlowKey {
    let ip = &f[inner + 14..];
    let l4 = &ip[20..];
    FlowKey {
        src: v4(ip[12], ip[13], ip[14], ip[15]),
        dst: v4(ip[16], ip[17], ip[18], ip[19]),
        src_port: u16::from_be_bytes([l4[0], l4[1]]),
        dst_port: u16::from_be_bytes([l4[2], l4[3]]),
        l4proto: ip[9],
        iif,
        tun_id: tun,
    }
}

/// Decapsulation of a captured Geneve frame (VNI 0xa, one 8-byte option, inner SSH over TCP):
/// the output is the inner frame with the route's MACs and the TTL decremented (checksum
/// recomputed from scratch to compare), every other byte as captured. Encapsulation of that
/// inner frame with the captured outer headers as the template gives the captured frame back,
/// byte for byte (outer lengths and checksum computed per packet).
#[test]
fn geneve_decap_and_encap_byte_exact() {
    let frames = geneve_frames();
    let f = &frames[5];
    let meta = wasp_wire::parse(f);
    let t = meta.tunnel.expect("Geneve");
    assert_eq!(t.vni, 0xa);
    let inner = usize::from(t.inner_offset.unwrap());
    assert_eq!(inner, 58);
    let inner_frame = &f[inner..];

    // Decap.
    let ft = table();
    let k0 = inner_key(f, inner, 1, Some(0xa));
    let mut k1 = k0;
    (k1.src, k1.dst, k1.src_port, k1.dst_port, k1.iif, k1.tun_id) =
        (k0.dst, k0.src, k0.dst_port, k0.src_port, 2, None);
    let mut r0 = route(2, MAC_GW_OUT, MAC_B);
    r0.tunnel = TunnelWork::Decap { outer: None };
    let mut r1 = route(1, MAC_GW_IN, MAC_A);
    r1.tunnel = TunnelWork::Encap(EncapTemplate::from_bytes(&f[..inner]).unwrap());
    r1.dec_ttl = false;
    r1.dmac = inner_frame[6..12].try_into().unwrap();
    r1.smac = inner_frame[0..6].try_into().unwrap();
    ft.add(
        FlowSpec {
            ct_id: 1,
            keys: [k0, k1],
            routes: [r0, r1],
        },
        0,
    )
    .unwrap();
    let (out, dev, _) = forward(&ft, f, 1, 1);
    assert_eq!(dev, 2);
    let mut want = inner_frame.to_vec();
    want[0..6].copy_from_slice(&MAC_B);
    want[6..12].copy_from_slice(&MAC_GW_OUT);
    want[14 + 8] -= 1;
    want[24..26].copy_from_slice(&[0, 0]);
    let c = checksum(&want[14..34]);
    want[24..26].copy_from_slice(&c.to_be_bytes());
    assert_eq!(out, want);
    // The same inner packet arriving in another VNI, or not encapsulated on dev 1: miss.
    let mut other_vni = f.clone();
    other_vni[42 + 6] = 0x0c;
    assert!(is_miss(&ft, &other_vni, 1, 2));

    // Encap: a flow whose original direction is the captured inner frame, arriving plain on
    // dev 2, sent encapsulated with the captured outer headers as its template.
    let ft = table();
    let k0 = inner_key(f, inner, 2, None);
    let mut k1 = k0;
    (k1.src, k1.dst, k1.src_port, k1.dst_port) = (k0.dst, k0.src, k0.dst_port, k0.src_port);
    let mut r0 = route(1, [0; 6], [0; 6]);
    r0.smac = inner_frame[6..12].try_into().unwrap();
    r0.dmac = inner_frame[0..6].try_into().unwrap();
    r0.dec_ttl = false;
    r0.tunnel = TunnelWork::Encap(EncapTemplate::from_bytes(&f[..inner]).unwrap());
    ft.add(
        FlowSpec {
            ct_id: 2,
            keys: [k0, k1],
            routes: [r0, route(2, MAC_GW_IN, MAC_A)],
        },
        0,
    )
    .unwrap();
    let (out, dev, _) = forward(&ft, inner_frame, 2, 1);
    assert_eq!(dev, 1);
    assert_eq!(out, *f, "encapsulated frame equals the capture");

    // The template built from parts equals the one taken from the capture.
    let o = &f[..inner];
    let built = EncapTemplate::geneve(&GeneveEncap {
        dmac: o[0..6].try_into().unwrap(),
        smac: o[6..12].try_into().unwrap(),
        src: v4(o[26], o[27], o[28], o[29]),
        dst: v4(o[30], o[31], o[32], o[33]),
        src_port: u16::from_be_bytes([o[34], o[35]]),
        dst_port: 6081,
        ttl: o[22],
        df: true,
        vni: 0xa,
        critical: o[43] & 0x40 != 0,
        options: o[50..58].to_vec(),
    })
    .unwrap();
    let mut from_capture = EncapTemplate::from_bytes(o).unwrap().bytes().to_vec();
    // The capture's IP ID is its own; the builder sends 0.
    from_capture[18..20].copy_from_slice(&[0, 0]);
    assert_eq!(built.bytes(), &from_capture[..]);
}

/// Encapsulation over IPv6: the outer UDP checksum is computed and verifies from scratch; the
/// MTU bounds the outer packet.
#[test]
fn geneve_encap_over_ipv6() {
    let ft = table();
    let spec = snat_flow(TCP, false, 61000);
    let orig = spec.keys[0];
    let mut spec = spec;
    spec.routes[0].tunnel = TunnelWork::Encap(
        EncapTemplate::geneve(&GeneveEncap {
            dmac: MAC_B,
            smac: MAC_GW_OUT,
            src: v6(1),
            dst: v6(2),
            src_port: 5555,
            dst_port: 6081,
            ttl: 64,
            df: false,
            vni: 42,
            critical: false,
            options: vec![],
        })
        .unwrap(),
    );
    let p = Pkt::new(&orig);
    let frame = p.build();
    let l3 = frame.len() - 14;
    // Outer packet: 40 + 8 + 8 + 14 + inner IP packet.
    spec.routes[0].mtu = (40 + 8 + 8 + 14 + l3) as u32;
    ft.add(spec.clone(), 0).unwrap();
    let (out, _, _) = forward(&ft, &frame, 0, 1);
    assert_eq!(out.len(), 14 + 40 + 8 + 8 + frame.len());
    let udp_len = u16::from_be_bytes([out[54 + 4], out[54 + 5]]);
    assert_eq!(usize::from(udp_len), out.len() - 54);
    assert_eq!(&out[18..20], &udp_len.to_be_bytes());
    assert_eq!(
        l4_sum(v6(1), v6(2), UDP, &out[54..]),
        0,
        "outer UDP checksum"
    );
    // The inner frame: NAT and TTL as without the tunnel.
    let mut want = Pkt::new(&orig);
    want.src = v4(198, 51, 100, 1);
    want.sport = 61000;
    want.ttl = 63;
    want.dmac = MAC_B;
    want.smac = MAC_GW_OUT;
    check_out(&out[70..], &want, false);
    // One byte less of MTU: slow.
    let ft = table();
    spec.routes[0].mtu -= 1;
    ft.add(spec, 0).unwrap();
    assert_eq!(slow(&ft, &frame, 0, 1), (SlowReason::Mtu, None));
}

#[test]
fn edit_errors() {
    let ft = table();
    let spec = snat_flow(TCP, false, 61000);
    let orig = spec.keys[0];
    ft.add(spec, 0).unwrap();
    let f = Pkt::new(&orig).build();
    let meta = wasp_wire::parse(&f);
    let FastPath::Forward { edit, .. } = ft.fast_path(&f, &meta, 0, 1) else {
        panic!("forward");
    };
    let mut small = [0u8; 10];
    assert_eq!(
        edit.write(&f, &mut small),
        Err(EditError::ShortBuffer {
            need: f.len(),
            have: 10
        })
    );
    let mut out = vec![0u8; 2000];
    assert!(matches!(
        edit.write(&f[..20], &mut out),
        Err(EditError::WrongInput { .. })
    ));
    assert_eq!(edit.write(&f, &mut out), Ok(f.len()));
}

/// Packets the fast path does not handle miss: IPv4 options, fragments, ICMP, truncated.
#[test]
fn unhandled_packets_miss() {
    let ft = table();
    let spec = snat_flow(UDP, false, 61000);
    let orig = spec.keys[0];
    ft.add(spec, 0).unwrap();
    let good = Pkt::new(&orig).build();
    let mut frag = good.clone();
    frag[20] |= 0x20; // MF
    assert!(is_miss(&ft, &frag, 0, 1));
    let mut opts = good.clone();
    opts[14] = 0x46;
    assert!(is_miss(&ft, &opts, 0, 1));
    assert!(is_miss(&ft, &good[..30], 0, 1));
    assert!(is_miss(&ft, &[], 0, 1));
    let mut tagged = good[..12].to_vec();
    tagged.extend([0x81, 0, 0, 5]);
    tagged.extend(&good[12..]);
    assert!(is_miss(&ft, &tagged, 0, 1));
}

/// The caller marks a connection dying: the flow goes with reason Dying and its counters, its
/// block forgets it; a flush removes the rest.
#[test]
fn teardown_dying_and_flush() {
    let ft = table();
    let hw = Arc::new(HwModel::new("hw", 8, 0));
    ft.register_block(hw.clone()).unwrap();
    assert_eq!(
        ft.register_block(hw.clone()),
        Err(BlockError::Exists("hw".into()))
    );
    let a = snat_flow(TCP, false, 61000);
    let mut b = snat_flow(TCP, false, 61001);
    b.keys[0].src_port = 40001;
    let ka = a.keys[0];
    let ida = ft.add(a, 0).unwrap();
    ft.add(b, 0).unwrap();
    assert_eq!(hw.len(), 2);
    assert!(forward(&ft, &Pkt::new(&ka).build(), 0, 1).2);
    let t = ft.teardown(ida, TeardownReason::Dying, 2).unwrap();
    assert_eq!(
        (t.reason, t.counters.packets),
        (TeardownReason::Dying, [1, 0])
    );
    assert_eq!(hw.len(), 1);
    assert!(is_miss(&ft, &Pkt::new(&ka).build(), 0, 3));
    let rest = ft.flush(4);
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].reason, TeardownReason::Flush);
    assert!(ft.is_empty() && hw.is_empty());
    assert_eq!(ft.stats().removed, 2);
}

/// The default configuration draws the flow maps' hash seed at random.
#[test]
fn default_seeds_are_drawn_at_random() {
    let seeds: std::collections::HashSet<u64> =
        (0..8).map(|_| FlowtableConfig::default().seed).collect();
    assert_eq!(seeds.len(), 8);
}

/// Fast paths of a vector whose lookups were prefetched first answer as without the prefetch:
/// the same table (past [`PREFETCH_MIN`] flows) asked the same frames of both directions,
/// flows it lacks and a frame of neither IP family, with and without the prefetch.
#[test]
fn prefetched_vectors_answer_as_without_prefetch() {
    let ft = table();
    let n = PREFETCH_MIN as u32 + 300;
    let client = |i: u32| v4(10, (i >> 16) as u8, (i >> 8) as u8, i as u8);
    for i in 0..n {
        let mut spec = snat_flow(UDP, false, 1024 + (i % 60000) as u16);
        spec.keys[0].src = client(i);
        spec.routes[1].nat.dst = Some(client(i));
        spec.keys[1].dst_port = 1024 + (i % 60000) as u16;
        spec.keys[1].src_port = 80;
        spec.ct_id = u64::from(i);
        ft.add(spec, 1).expect("add");
    }
    assert_eq!(ft.len(), n as usize);
    let mut frames = Vec::new();
    for i in 0..512u32 {
        let k = i * 41 % (n + 100);
        let mut p = Pkt::new(&key(client(k), v4(192, 0, 2, 11), 40000, 80, UDP, 0));
        if i % 4 == 1 {
            // The reply, to the gateway's address and the flow's port.
            p = Pkt::new(&key(
                v4(192, 0, 2, 11),
                v4(198, 51, 100, 1),
                80,
                1024 + (k % 60000) as u16,
                UDP,
                1,
            ));
        }
        let mut f = p.build();
        if i % 97 == 5 {
            f[12] = 0x08;
            f[13] = 0x06;
        }
        frames.push((f, u16::from(i % 4 == 1)));
    }
    let (mut hits, mut answers) = (0, Vec::new());
    for prefetch in [true, false] {
        let mut got = Vec::new();
        for chunk in frames.chunks(64) {
            let metas: Vec<_> = chunk.iter().map(|(f, _)| wasp_wire::parse(f)).collect();
            if prefetch {
                for ((f, iif), m) in chunk.iter().zip(&metas) {
                    ft.prefetch(f, m, *iif);
                }
            }
            for ((f, iif), m) in chunk.iter().zip(&metas) {
                let r = ft.fast_path(f, m, *iif, 2);
                hits += usize::from(matches!(r, FastPath::Forward { .. }));
                got.push(match r {
                    FastPath::Forward { out_dev, edit, .. } => {
                        format!("{out_dev} {:?}", edit.to_vec(f).expect("write"))
                    }
                    other => format!("{other:?}"),
                });
            }
        }
        answers.push(got);
    }
    assert_eq!(answers[0], answers[1]);
    assert!(hits > 700, "{hits} forwarded of {}", 2 * frames.len());
}
