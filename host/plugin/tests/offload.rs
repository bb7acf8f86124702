//! `PluginBlock`: the bundled `offload-table` plugin as a flowtable offload block, on its own
//! (capacity, tunnel refusal, slot statistics, a looping or trapping guest, a component without
//! the interface) and through `wasp_flowtable::Flowtable::register_block` (the fast path counts
//! in the block's slot once the plugin's latency has passed; listings merge the counts).

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use wasp_flowtable::{
    BlockStats, Dir, FastPath, FlowId, FlowKey, FlowSpec, FlowView, Flowtable, FlowtableConfig,
    NatEdit, OffloadBlock, OffloadError, OffloadState, Route, TunnelWork, UDP,
};
use wasp_plugin::{PluginBlock, PluginError};

fn offload_table() -> std::path::PathBuf {
    wasp_guests::plugin("offload_table")
}

fn load(args: &str) -> PluginBlock {
    PluginBlock::load(&common::host(), offload_table(), "tbl", args)
        .unwrap_or_else(|e| panic!("loading offload_table: {e}"))
}

fn v4(d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, d))
}

/// A UDP flow from 10.0.0.2:`sport` to 10.0.0.9:`dport`, in on device 0, out on device 1.
fn spec(sport: u16, dport: u16) -> FlowSpec {
    let orig = FlowKey {
        src: v4(2),
        dst: v4(9),
        src_port: sport,
        dst_port: dport,
        l4proto: UDP,
        iif: 0,
        tun_id: None,
    };
    let reply = FlowKey {
        src: v4(9),
        dst: v4(2),
        src_port: dport,
        dst_port: sport,
        l4proto: UDP,
        iif: 1,
        tun_id: None,
    };
    let route = |out_dev, smac: u8, dmac: u8| Route {
        out_dev,
        smac: [2, 0, 0, 0, 0, smac],
        dmac: [2, 0, 0, 0, 0, dmac],
        mtu: 1500,
        dec_ttl: true,
        nat: NatEdit::default(),
        tunnel: TunnelWork::None,
    };
    FlowSpec {
        ct_id: u64::from(sport),
        keys: [orig, reply],
        routes: [route(1, 0x11, 0x22), route(0, 0x10, 0x01)],
    }
}

fn add(b: &PluginBlock, id: u64, s: &FlowSpec, now: u64) -> Result<bool, OffloadError> {
    let view = FlowView {
        id: FlowId(id),
        ct_id: s.ct_id,
        keys: &s.keys,
        routes: [&s.routes[0], &s.routes[1]],
    };
    b.add(&view, now).map(|slot| {
        if let Some(slot) = &slot {
            assert_eq!(slot.active_at_ns(), now + 100_000, "latency-us 100");
        }
        slot.is_some()
    })
}

/// Capacity 2: two flows forwarded, the third refused Full; a tunnel flow Unsupported; a
/// deleted flow frees its entry.
#[test]
fn capacity_and_tunnel_refusal() {
    let b = load("capacity 2 latency-us 100");
    assert_eq!(b.name(), "tbl");
    assert_eq!(add(&b, 1, &spec(1000, 53), 5), Ok(true));
    assert_eq!(add(&b, 2, &spec(1001, 53), 5), Ok(true));
    assert_eq!(add(&b, 3, &spec(1002, 53), 5), Err(OffloadError::Full));
    let mut tun = spec(1003, 53);
    tun.routes[0].tunnel = TunnelWork::Decap { outer: None };
    tun.keys[0].tun_id = Some(77);
    assert_eq!(
        add(&b, 4, &tun, 5),
        Err(OffloadError::Unsupported(
            "offload-table: no tunnel action (geneve encap/decap)".into()
        ))
    );
    let c = b.counts();
    assert_eq!((c.forwarded, c.full, c.unsupported, c.trap), (2, 1, 1, 0));
    assert_eq!(b.forwarding(), 2);
    b.del(FlowId(1), &spec(1000, 53).keys);
    assert_eq!(b.forwarding(), 1);
    assert_eq!(add(&b, 5, &spec(1002, 53), 6), Ok(true));
}

/// A forwarded flow's statistics come from its slot (what the fast path counted), without the
/// guest; an observed flow's from the guest's `flow-stats`.
#[test]
fn stats_from_slot_and_guest() {
    let b = load("capacity 4 latency-us 100");
    let s = spec(2000, 53);
    let view = FlowView {
        id: FlowId(9),
        ct_id: 1,
        keys: &s.keys,
        routes: [&s.routes[0], &s.routes[1]],
    };
    let slot = b.add(&view, 1000).unwrap().expect("forwarded");
    assert!(!slot.is_active(100_999));
    assert!(slot.is_active(101_000));
    slot.count(Dir::Original, 120, 101_000);
    slot.count(Dir::Reply, 80, 101_500);
    slot.count(Dir::Original, 60, 102_000);
    assert_eq!(
        b.stats(FlowId(9), &s.keys, 103_000),
        Some(BlockStats {
            packets: [2, 1],
            bytes: [180, 80],
            last_used_ns: 102_000,
        })
    );
    // Observing: software forwards; the guest reports zero counts, last used at the add.
    let o = load("observe");
    assert!(o.add(&view, 4000).unwrap().is_none());
    assert_eq!(
        o.stats(FlowId(9), &s.keys, 5000),
        Some(BlockStats {
            packets: [0, 0],
            bytes: [0, 0],
            last_used_ns: 4000,
        })
    );
    assert_eq!(o.stats(FlowId(10), &s.keys, 5000), None);
    assert_eq!(o.counts().observed, 1);
}

/// A guest that loops in `flow-add` hits its deadline: the add is refused and counted, and the
/// next add runs on a fresh instance, configured again and offered the flows the old one held
/// (so capacity 2 still counts them); the same for a trap.
#[test]
fn looping_and_trapping_guest() {
    let b = load("capacity 2 latency-us 100 loop-on-port 7 trap-on-port 8");
    assert_eq!(add(&b, 1, &spec(1000, 53), 5), Ok(true));
    let e = add(&b, 2, &spec(1001, 7), 5).unwrap_err();
    let OffloadError::Unsupported(msg) = e else {
        panic!("expected Unsupported, got {e:?}");
    };
    assert!(
        msg.starts_with("plugin hit its deadline: interrupted"),
        "{msg}"
    );
    let c = b.counts();
    assert_eq!((c.deadline, c.recreated, c.reoffered), (1, 0, 0));
    // A fresh instance, offered flow 1 again: one more fits.
    assert_eq!(add(&b, 3, &spec(1002, 53), 6), Ok(true));
    let c = b.counts();
    assert_eq!((c.recreated, c.reoffered), (1, 1));
    let e = add(&b, 4, &spec(1003, 8), 7).unwrap_err();
    let OffloadError::Unsupported(msg) = e else {
        panic!("expected Unsupported, got {e:?}");
    };
    assert!(
        msg.starts_with("plugin trapped: ") && msg.contains("unreachable"),
        "{msg}"
    );
    // Re-created again with flows 1 and 3: full.
    assert_eq!(add(&b, 5, &spec(1004, 53), 8), Err(OffloadError::Full));
    b.del(FlowId(1), &spec(1000, 53).keys);
    assert_eq!(add(&b, 6, &spec(1005, 53), 9), Ok(true));
    assert_eq!((b.forwarding(), b.held()), (2, 2));
    let c = b.counts();
    assert_eq!(
        (
            c.deadline,
            c.trap,
            c.recreated,
            c.reoffered,
            c.reoffer_refused,
            c.forwarded,
            c.full
        ),
        (1, 1, 2, 3, 0, 3, 1)
    );
}

/// Loading: a packet plugin (no offload-block export), a missing file, and arguments the
/// plugin refuses, each named.
#[test]
fn load_errors() {
    let host = common::host();
    let counter = wasp_guests::plugin("counter");
    let e = PluginBlock::load(&host, &counter, "c", "").unwrap_err();
    assert!(matches!(e, PluginError::Offload { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "{}: not a usable offload block: exports no wasp:plugin/offload-block@0.1.3 (build it \
             for the world wasp:plugin/wasp-offload-block; a packet plugin goes in the ruleset \
             instead)",
            counter.display()
        )
    );
    let e = PluginBlock::load(&host, "/nonexistent/x.wasm", "x", "").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("/nonexistent/x.wasm: cannot read: "),
        "{e}"
    );
    let e = PluginBlock::load(&host, offload_table(), "t", "capacity many").unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: not a usable offload block: configure \"capacity many\" refused: offload-table: \
             capacity \"many\" is not a number",
            offload_table().display()
        )
    );
}

/// An IPv4 UDP frame of `k` with an 8-byte payload (IP header checksum set; UDP checksum 0).
fn frame(k: &FlowKey) -> Vec<u8> {
    let (IpAddr::V4(s), IpAddr::V4(d)) = (k.src, k.dst) else {
        unreachable!()
    };
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0x0a, 0x08, 0x00];
    let mut ip = vec![0x45, 0, 0, 36, 0, 1, 0x40, 0, 64, UDP, 0, 0];
    ip.extend(s.octets());
    ip.extend(d.octets());
    let sum: u32 = ip
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    let sum = (sum & 0xffff) + (sum >> 16);
    let c = !((sum & 0xffff) + (sum >> 16)) as u16;
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend(ip);
    f.extend(k.src_port.to_be_bytes());
    f.extend(k.dst_port.to_be_bytes());
    f.extend([0, 16, 0, 0]);
    f.extend(*b"payload!");
    f
}

/// Whether the fast path forwarded the frame of `k` through the block (true) or in software.
fn forward(ft: &Flowtable, k: &FlowKey, now: u64) -> bool {
    let f = frame(k);
    let meta = wasp_wire::parse(&f);
    match ft.fast_path(&f, &meta, k.iif, now) {
        FastPath::Forward {
            out_dev, by_block, ..
        } => {
            assert_eq!(out_dev, if k.iif == 0 { 1 } else { 0 });
            by_block
        }
        other => panic!("expected a forward, got {other:?}"),
    }
}

/// Through a flowtable: three flows added with the plugin registered at capacity 2; the first
/// two pending then offloaded once the 100 µs latency has passed, the third in software; the
/// fast path counts in the slots after the latency; listings merge the block's counts; removing
/// the block sends the flows back to software with their counts.
#[test]
fn through_flowtable() {
    let ft = Flowtable::new(FlowtableConfig {
        counter: true,
        ..FlowtableConfig::default()
    });
    let b = Arc::new(load("capacity 2 latency-us 100"));
    ft.register_block(b.clone()).unwrap();
    let specs: Vec<FlowSpec> = (0..3).map(|i| spec(3000 + i, 53)).collect();
    for s in &specs {
        ft.add(s.clone(), 1_000).unwrap();
    }
    assert_eq!(b.forwarding(), 2);
    let fl = ft.flows(2_000);
    assert_eq!(
        fl[0].offload,
        OffloadState::Pending {
            block: "tbl".into(),
            active_at_ns: 101_000
        }
    );
    assert_eq!(fl[2].offload, OffloadState::Software);
    // Before the latency, software; after, the block (both directions).
    assert!(!forward(&ft, &specs[0].keys[0], 50_000));
    assert!(forward(&ft, &specs[0].keys[0], 101_000));
    assert!(forward(&ft, &specs[0].keys[1], 102_000));
    assert!(forward(&ft, &specs[0].keys[0], 103_000));
    assert!(!forward(&ft, &specs[2].keys[0], 103_000));
    let fl = ft.flows(104_000);
    assert_eq!(
        fl[0].offload,
        OffloadState::Offloaded {
            block: "tbl".into()
        }
    );
    let (c, bc) = (fl[0].counters.unwrap(), fl[0].block_counters.unwrap());
    assert_eq!((c.packets, bc.packets), ([3, 1], [2, 1]));
    // Each frame's IP packet is 36 bytes.
    assert_eq!((c.bytes, bc.bytes), ([108, 36], [72, 36]));
    assert_eq!(fl[2].counters.unwrap().packets, [1, 0]);
    assert_eq!(ft.unregister_block("tbl", 105_000), Ok(2));
    assert_eq!(b.forwarding(), 0);
    let fl = ft.flows(105_000);
    assert_eq!(fl[0].offload, OffloadState::Software);
    assert_eq!(fl[0].counters.unwrap().packets, [3, 1]);
}

/// Two threads add flows through one flowtable at once (offload calls come from any worker):
/// the plugin block, capacity 60, takes exactly 60 of the 100 flows and refuses the rest as
/// full; every flow is in the table, in the block or in software.
#[test]
fn concurrent_adds_from_two_threads() {
    let ft = Arc::new(Flowtable::new(FlowtableConfig::default()));
    let b = Arc::new(load("capacity 60 latency-us 100"));
    ft.register_block(b.clone()).unwrap();
    let threads: Vec<_> = (0..2u16)
        .map(|t| {
            let ft = Arc::clone(&ft);
            std::thread::spawn(move || {
                for i in 0..50u16 {
                    ft.add(spec(10_000 + t * 100 + i, 53), 1_000).expect("add");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    assert_eq!(ft.len(), 100);
    let c = b.counts();
    assert_eq!((c.forwarded, c.full, b.forwarding()), (60, 40, 60));
    let fl = ft.flows(200_000);
    let offloaded = fl
        .iter()
        .filter(|f| matches!(f.offload, OffloadState::Offloaded { .. }))
        .count();
    let software = fl
        .iter()
        .filter(|f| f.offload == OffloadState::Software)
        .count();
    assert_eq!((offloaded, software), (60, 40));
}
