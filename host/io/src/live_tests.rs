//! Live tests against the kernel: a veth pair between two network namespaces that each test
//! creates (`wio-<pid>-<n>-a/b`) and always deletes (a drop guard, also when a test fails).
//! Skipped with a message when namespaces cannot be created (not root).

use std::collections::HashSet;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::{
    AfPacketGroup, FanoutMode, FanoutSpec, IoError, PortGroup, RingConfig, RxMode, TapGroup,
    TxMode, in_netns,
};

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// Two namespaces joined by veth `v0` (in `a`) / `v1` (in `b`), IPv6 off (no ND/MLD frames
/// to disturb the counts). Deleted on drop.
struct Topo {
    a: String,
    b: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {args:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

impl Topo {
    /// None (and a message) when namespaces cannot be made here.
    fn new() -> Option<Topo> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = format!("wio-{}-{n}", std::process::id());
        let t = Topo {
            a: format!("{base}-a"),
            b: format!("{base}-b"),
        };
        if let Err(e) = ip(&["netns", "add", &t.a]) {
            eprintln!("skipping live test: cannot create a network namespace ({e})");
            return None;
        }
        ip(&["netns", "add", &t.b]).expect("second namespace");
        for ns in [&t.a, &t.b] {
            ip(&[
                "netns",
                "exec",
                ns,
                "sysctl",
                "-q",
                "-w",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ])
            .expect("sysctl");
        }
        ip(&[
            "link", "add", "v0", "netns", &t.a, "type", "veth", "peer", "name", "v1", "netns", &t.b,
        ])
        .expect("veth pair");
        ip(&["-n", &t.a, "link", "set", "v0", "up"]).expect("v0 up");
        ip(&["-n", &t.b, "link", "set", "v1", "up"]).expect("v1 up");
        t.wait_up();
        Some(t)
    }

    /// Waits until both ends are up with their queueing discipline attached: the kernel's
    /// link watch attaches it after `link set up`, later under load, and until then every
    /// frame sent is dropped by the `noop` discipline without an error.
    fn wait_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        for (ns, dev) in [(&self.a, "v0"), (&self.b, "v1")] {
            loop {
                let out = Command::new("ip")
                    .args(["-n", ns, "-o", "link", "show", "dev", dev])
                    .output()
                    .expect("ip link show");
                let line = String::from_utf8_lossy(&out.stdout);
                if line.contains("state UP") && !line.contains("qdisc noop") {
                    break;
                }
                assert!(Instant::now() < deadline, "{ns}/{dev} not up: {line}");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.a]);
        let _ = ip(&["netns", "del", &self.b]);
    }
}

fn open(ns: &str, dev: &str, fanout: Option<FanoutSpec>, mode: RxMode) -> AfPacketGroup {
    open_tx(ns, dev, fanout, mode, TxMode::Send)
}

fn open_tx(
    ns: &str,
    dev: &str,
    fanout: Option<FanoutSpec>,
    mode: RxMode,
    tx: TxMode,
) -> AfPacketGroup {
    let cfg = RingConfig {
        rx_mode: mode,
        tx_mode: tx,
        rx_buffers: 256,
        tx_buffers: 256,
        ..RingConfig::default()
    };
    in_netns(ns, || AfPacketGroup::open(&[dev], fanout, cfg))
        .expect("netns")
        .expect("open")
}

/// An Ethernet/IPv4/UDP frame of `len` bytes (>= 46) for flow `flow`, carrying `seq`.
fn frame(flow: u16, seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 9, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 9, 1, (flow & 0xff) as u8]);
    let mut s: u32 = ip
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    ip[10..12].copy_from_slice(&(!(s as u16)).to_be_bytes());
    f[34..36].copy_from_slice(&(1000 + flow).to_be_bytes());
    f[36..38].copy_from_slice(&(2000 + flow).to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f[42..46].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[46..].iter_mut().enumerate() {
        *b = (seq as usize + i) as u8;
    }
    f
}

fn seq_of(f: &[u8]) -> u32 {
    u32::from_be_bytes([f[42], f[43], f[44], f[45]])
}

/// Sends `frames` through `g` in batches of 64 (retrying while send buffers are in flight).
fn send_all(g: &mut AfPacketGroup, frames: &[Vec<u8>]) {
    for chunk in frames.chunks(64) {
        for f in chunk {
            let deadline = Instant::now() + Duration::from_secs(5);
            while !g.queue(0, f) {
                g.flush().unwrap();
                g.poll(0, 0, Duration::from_millis(1), &mut |_| {}).unwrap();
                assert!(Instant::now() < deadline, "send buffers never came back");
            }
        }
        g.flush().unwrap();
        g.poll(0, 0, Duration::ZERO, &mut |_| {}).unwrap();
    }
}

/// Receives on `gs` until `n` frames arrived in total or 5 s passed.
fn recv_n(gs: &mut [&mut AfPacketGroup], n: usize) -> Vec<Vec<Vec<u8>>> {
    let mut got = vec![Vec::new(); gs.len()];
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.iter().map(Vec::len).sum::<usize>() < n && Instant::now() < deadline {
        for (i, g) in gs.iter_mut().enumerate() {
            g.poll(1, 64, Duration::from_millis(10), &mut |fs| {
                for f in fs {
                    assert_eq!(f.port, 0);
                    got[i].push(f.data.to_vec());
                }
            })
            .unwrap();
        }
    }
    got
}

fn receive_case(mode: RxMode, txm: TxMode) {
    let Some(t) = Topo::new() else { return };
    let mut rx = open_tx(&t.b, "v1", None, mode, txm);
    let mut tx = open_tx(&t.a, "v0", None, RxMode::Multishot, txm);
    assert_eq!(rx.rx_mode(), mode);
    assert_eq!(rx.ports()[0].name, "v1");
    assert_eq!(rx.ports()[0].mtu, 1500);
    let frames: Vec<Vec<u8>> = (0..1000u32)
        .map(|s| frame((s % 7) as u16, s, 60 + (s as usize * 37) % 1450))
        .collect();
    // Arm the receive before sending.
    rx.poll(0, 0, Duration::ZERO, &mut |_| {}).unwrap();
    send_all(&mut tx, &frames);
    let got = recv_n(&mut [&mut rx], frames.len()).remove(0);
    assert_eq!(
        got.len(),
        frames.len(),
        "{mode:?}: every frame, once: {:?}",
        rx.stats()
    );
    assert!(got == frames, "{mode:?}: same bytes, same order");
    let st = rx.stats()[0];
    assert_eq!(st.rx_packets, 1000);
    assert_eq!(
        st.rx_bytes,
        frames.iter().map(|f| f.len() as u64).sum::<u64>()
    );
    assert_eq!(st.rx_dropped, 0);
    let st = tx.stats()[0];
    assert_eq!((st.tx_packets, st.tx_dropped, st.tx_errors), (1000, 0, 0));
    // The sender ignores its own outgoing frames.
    let mut own = 0;
    tx.poll(0, 64, Duration::from_millis(20), &mut |fs| own += fs.len())
        .unwrap();
    assert_eq!(own, 0, "PACKET_IGNORE_OUTGOING");
    // And back: the receiving group sends, the sender's group receives.
    let back: Vec<Vec<u8>> = (0..100u32).map(|s| frame(3, 5000 + s, 64)).collect();
    send_all(&mut rx, &back);
    let got = recv_n(&mut [&mut tx], back.len()).remove(0);
    assert!(got == back, "{mode:?}/{txm:?}: frames sent back arrive");
}

#[test]
fn live_multishot_receives_every_frame() {
    receive_case(RxMode::Multishot, TxMode::Send);
}

#[test]
fn live_tpacket_v3_receives_every_frame() {
    receive_case(RxMode::TpacketV3, TxMode::Ring);
}

#[test]
fn live_tx_ring_with_multishot_receive() {
    receive_case(RxMode::Multishot, TxMode::Ring);
}

#[test]
fn live_fanout_splits_a_device_between_two_groups() {
    fanout_case(RxMode::Multishot);
}

#[test]
fn live_fanout_with_tpacket_v3() {
    fanout_case(RxMode::TpacketV3);
}

#[test]
fn live_frames_forwarded_in_the_callback_leave_rewritten_tpacket_v3() {
    reflect_case(RxMode::TpacketV3, TxMode::Ring);
}

#[test]
fn live_frames_forwarded_in_the_callback_leave_rewritten_multishot() {
    reflect_case(RxMode::Multishot, TxMode::Send);
}

/// `b` sends every frame it receives on `v1` back out of `v1` through the send side lent to
/// its receive callback, its source MAC rewritten in `fill`; `a` receives them all, in order.
fn reflect_case(mode: RxMode, txm: TxMode) {
    let Some(t) = Topo::new() else { return };
    let mut refl = open_tx(&t.b, "v1", None, mode, txm);
    let mut tx = open_tx(&t.a, "v0", None, RxMode::Multishot, txm);
    refl.poll(0, 0, Duration::ZERO, &mut |_| {}).unwrap();
    tx.poll(0, 0, Duration::ZERO, &mut |_| {}).unwrap();
    let frames: Vec<Vec<u8>> = (0..200u32)
        .map(|s| frame((s % 5) as u16, s, 60 + (s as usize * 53) % 1400))
        .collect();
    send_all(&mut tx, &frames);
    let mut done = 0;
    let mut refused = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while done + refused < frames.len() && Instant::now() < deadline {
        refl.poll_tx(1, 64, Duration::from_millis(10), &mut |fs, side| {
            for f in fs {
                let ok = side.queue_with(0, f.data.len(), &mut |b| {
                    b.copy_from_slice(f.data);
                    b[11] = 0xbb;
                });
                if ok {
                    done += 1;
                } else {
                    refused += 1;
                }
            }
        })
        .unwrap();
        refl.flush().unwrap();
    }
    assert_eq!((done, refused), (frames.len(), 0), "{:?}", refl.stats());
    let want: Vec<Vec<u8>> = frames
        .iter()
        .map(|f| {
            let mut f = f.clone();
            f[11] = 0xbb;
            f
        })
        .collect();
    let got = recv_n(&mut [&mut tx], want.len()).remove(0);
    assert_eq!(
        got.len(),
        want.len(),
        "{mode:?}/{txm:?}: {:?}",
        refl.stats()
    );
    assert!(got == want, "{mode:?}/{txm:?}: rewritten bytes, same order");
    // IORING_OP_SEND completions are counted by a later poll.
    let deadline = Instant::now() + Duration::from_secs(2);
    while refl.stats()[0].tx_packets < 200 && Instant::now() < deadline {
        refl.poll(0, 0, Duration::from_millis(1), &mut |_| {})
            .unwrap();
    }
    let st = refl.stats()[0];
    assert_eq!(
        (st.rx_packets, st.tx_packets, st.tx_dropped, st.tx_errors),
        (200, 200, 0, 0)
    );
}

fn fanout_case(mode: RxMode) {
    let Some(t) = Topo::new() else { return };
    let f = FanoutSpec {
        group_id: 0x4a00,
        mode: FanoutMode::Hash,
    };
    let mut g1 = open(&t.b, "v1", Some(f), mode);
    let mut g2 = open(&t.b, "v1", Some(f), mode);
    let mut tx = open(&t.a, "v0", None, RxMode::Multishot);
    g1.poll(0, 0, Duration::ZERO, &mut |_| {}).unwrap();
    g2.poll(0, 0, Duration::ZERO, &mut |_| {}).unwrap();
    let frames: Vec<Vec<u8>> = (0..2000u32)
        .map(|s| frame((s % 64) as u16, s, 64))
        .collect();
    send_all(&mut tx, &frames);
    let got = recv_n(&mut [&mut g1, &mut g2], frames.len());
    let (a, b) = (&got[0], &got[1]);
    assert_eq!(a.len() + b.len(), 2000, "together every frame");
    let seqs: HashSet<u32> = a.iter().chain(b).map(|f| seq_of(f)).collect();
    assert_eq!(seqs.len(), 2000, "each frame exactly once");
    assert!(
        !a.is_empty() && !b.is_empty(),
        "64 flows spread over both ({} / {})",
        a.len(),
        b.len()
    );
    // One flow always lands on one group.
    let flows_a: HashSet<u8> = a.iter().map(|f| f[33]).collect();
    let flows_b: HashSet<u8> = b.iter().map(|f| f[33]).collect();
    assert!(flows_a.is_disjoint(&flows_b), "a flow split between groups");
}

#[test]
fn live_missing_device_and_privilege_errors() {
    let Some(t) = Topo::new() else { return };
    let e = in_netns(&t.b, || {
        AfPacketGroup::open(&["v1", "wio9"], None, RingConfig::default())
    })
    .unwrap()
    .err()
    .expect("wio9 does not exist");
    assert_eq!(e.to_string(), "no such device wio9");
    assert!(matches!(e, IoError::NoDevice { .. }));
    let e = in_netns(&t.b, || {
        crate::sys::real::drop_net_caps_of_this_thread().expect("capset");
        AfPacketGroup::open(&["v1"], None, RingConfig::default())
    })
    .unwrap()
    .err()
    .expect("no CAP_NET_RAW");
    assert_eq!(
        e.to_string(),
        "v1: AF_PACKET socket: needs CAP_NET_RAW (run as root)"
    );
    let e = in_netns(&t.b, || {
        crate::sys::real::drop_net_caps_of_this_thread().expect("capset");
        TapGroup::open(&["wiotap"], RingConfig::default())
    })
    .unwrap()
    .err()
    .expect("no CAP_NET_ADMIN");
    assert_eq!(
        e.to_string(),
        "wiotap: TAP open (TUNSETIFF): needs CAP_NET_ADMIN (run as root)"
    );
    let e = in_netns("wio-no-such-namespace", || ()).err().unwrap();
    assert!(e.to_string().contains("open network namespace"), "{e}");
}

#[test]
fn live_tap_reads_and_writes() {
    let Some(t) = Topo::new() else { return };
    let mut tap = in_netns(&t.b, || TapGroup::open(&["wiotap0"], RingConfig::default()))
        .unwrap()
        .expect("tap");
    assert_eq!(tap.ports()[0].name, "wiotap0");
    assert!(tap.ports()[0].ifindex > 0);
    ip(&["-n", &t.b, "link", "set", "wiotap0", "up"]).expect("tap up");
    let mut pk = open(&t.b, "wiotap0", None, RxMode::Multishot);
    pk.poll(0, 0, Duration::ZERO, &mut |_| {}).unwrap();
    tap.poll(0, 0, Duration::ZERO, &mut |_| {}).unwrap();

    // TAP writes: the kernel receives them on wiotap0, where the packet socket sees them.
    let frames: Vec<Vec<u8>> = (0..300u32).map(|s| frame(1, s, 60 + s as usize)).collect();
    for f in &frames {
        assert!(tap.queue(0, f));
    }
    tap.flush().unwrap();
    let got = recv_n(&mut [&mut pk], frames.len()).remove(0);
    assert!(
        got == frames,
        "written frames arrive intact and in order ({})",
        got.len()
    );
    tap.poll(0, 0, Duration::ZERO, &mut |_| {}).unwrap();
    assert_eq!(tap.stats()[0].tx_packets, 300);

    // Frames sent on wiotap0 come out of the TAP file as reads.
    let back: Vec<Vec<u8>> = (0..300u32).map(|s| frame(2, 1000 + s, 1514)).collect();
    send_all(&mut pk, &back);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < back.len() && Instant::now() < deadline {
        tap.poll(1, 64, Duration::from_millis(10), &mut |fs| {
            got.extend(fs.iter().map(|f| f.data.to_vec()));
        })
        .unwrap();
    }
    assert!(
        got == back,
        "read frames intact and in order ({})",
        got.len()
    );
    let st = tap.stats()[0];
    assert_eq!((st.rx_packets, st.rx_errors), (300, 0));
}

#[test]
fn live_sends_to_a_device_that_is_down_are_counted() {
    down_case(TxMode::Send);
}

#[test]
fn live_tx_ring_sends_to_a_device_that_is_down_are_counted() {
    down_case(TxMode::Ring);
}

fn down_case(txm: TxMode) {
    let Some(t) = Topo::new() else { return };
    let mut tx = open_tx(&t.a, "v0", None, RxMode::Multishot, txm);
    tx.poll(0, 0, Duration::ZERO, &mut |_| {}).unwrap();
    ip(&["-n", &t.a, "link", "set", "v0", "down"]).expect("v0 down");
    for s in 0..10 {
        assert!(tx.queue(0, &frame(0, s, 64)));
    }
    tx.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while tx.stats()[0].tx_errors < 10 && Instant::now() < deadline {
        tx.poll(0, 64, Duration::from_millis(10), &mut |_| {})
            .unwrap();
    }
    let st = tx.stats()[0];
    assert_eq!((st.tx_packets, st.tx_errors, st.tx_dropped), (0, 10, 0));
    // Back up: sending works again, and the receive survived (re-armed if it ended).
    ip(&["-n", &t.a, "link", "set", "v0", "up"]).expect("v0 up");
    let mut rx = open(&t.b, "v1", None, RxMode::Multishot);
    rx.poll(0, 0, Duration::ZERO, &mut |_| {}).unwrap();
    let frames: Vec<Vec<u8>> = (0..20u32).map(|s| frame(0, s, 64)).collect();
    send_all(&mut tx, &frames);
    let got = recv_n(&mut [&mut rx], 20).remove(0);
    assert_eq!(got.len(), 20);
    assert_eq!(tx.stats()[0].tx_packets, 20);
}

#[test]
fn live_tpacket_receive_survives_its_device_going_down() {
    let Some(t) = Topo::new() else { return };
    let mut rx = open(&t.b, "v1", None, RxMode::TpacketV3);
    let mut tx = open(&t.a, "v0", None, RxMode::Multishot);
    rx.poll(0, 0, Duration::ZERO, &mut |_| {}).unwrap();
    ip(&["-n", &t.b, "link", "set", "v1", "down"]).expect("v1 down");
    // The socket's error (ENETDOWN) is read once; polls then wait instead of completing at once.
    for _ in 0..5 {
        let n = rx
            .poll(1, 64, Duration::from_millis(10), &mut |_| {})
            .unwrap();
        assert_eq!(n, 0);
    }
    assert_eq!(rx.stats()[0].rx_errors, 1);
    ip(&["-n", &t.b, "link", "set", "v1", "up"]).expect("v1 up");
    let frames: Vec<Vec<u8>> = (0..50u32).map(|s| frame(0, s, 64)).collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    // The carrier comes back asynchronously: resend until the frames arrive.
    while got.len() < frames.len() && Instant::now() < deadline {
        send_all(&mut tx, &frames);
        got = recv_n(&mut [&mut rx], frames.len()).remove(0);
    }
    assert!(
        got == frames,
        "frames after the device came back ({})",
        got.len()
    );
}

/// `frame` with an 802.1Q (or 802.1ad) tag inserted after the MAC addresses.
fn tagged(tpid: u16, tci: u16, f: &[u8]) -> Vec<u8> {
    let mut t = f[..12].to_vec();
    t.extend_from_slice(&tpid.to_be_bytes());
    t.extend_from_slice(&tci.to_be_bytes());
    t.extend_from_slice(&f[12..]);
    t
}

#[test]
fn live_tpacket_v3_gives_back_the_vlan_tag_the_kernel_took() {
    vlan_case(RxMode::TpacketV3);
}

#[test]
fn live_multishot_gives_back_the_vlan_tag_the_kernel_took() {
    vlan_case(RxMode::Multishot);
}

fn vlan_case(mode: RxMode) {
    let Some(t) = Topo::new() else { return };
    let mut rx = open(&t.b, "v1", None, mode);
    let mut tx = open(&t.a, "v0", None, RxMode::Multishot);
    rx.poll(0, 0, Duration::ZERO, &mut |_| {}).unwrap();
    let frames = vec![
        tagged(0x8100, 0x2003, &frame(1, 1, 64)),
        frame(2, 2, 64),
        tagged(0x88a8, 0x0019, &tagged(0x8100, 0x0005, &frame(3, 3, 80))),
    ];
    send_all(&mut tx, &frames);
    let got = recv_n(&mut [&mut rx], frames.len()).remove(0);
    assert!(
        got == frames,
        "tags as sent: {:02x?}",
        got.iter().map(|f| &f[12..18]).collect::<Vec<_>>()
    );
}

#[test]
fn live_multishot_completes_partial_checksums() {
    partial_case(RxMode::Multishot);
}

#[test]
fn live_tpacket_v3_completes_partial_checksums() {
    partial_case(RxMode::TpacketV3);
}

/// The stack of namespace a sends UDP and a TCP SYN through v0 (veth: checksum offload on, so
/// the frames are CHECKSUM_PARTIAL); the group on v1 hands them over with complete checksums.
fn partial_case(mode: RxMode) {
    let Some(t) = Topo::new() else { return };
    ip(&["-n", &t.a, "addr", "add", "10.66.0.1/24", "dev", "v0"]).expect("addr");
    ip(&[
        "-n",
        &t.a,
        "neigh",
        "add",
        "10.66.0.2",
        "lladdr",
        "02:00:00:00:00:02",
        "dev",
        "v0",
    ])
    .expect("neigh");
    let mut rx = open(&t.b, "v1", None, mode);
    rx.poll(0, 0, Duration::ZERO, &mut |_| {}).unwrap();
    let script = "import socket\n\
        s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
        for i in range(5): s.sendto(b'partial %d' % i,('10.66.0.2',9000))\n\
        s=socket.socket(); s.setblocking(False)\n\
        try: s.connect(('10.66.0.2',80))\n\
        except BlockingIOError: pass\n";
    let out = Command::new("ip")
        .args(["netns", "exec", &t.a, "python3", "-c", script])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = recv_n(&mut [&mut rx], 6).remove(0);
    let l4: Vec<&Vec<u8>> = got
        .iter()
        .filter(|f| f.len() > 23 && f[12..14] == [8, 0] && matches!(f[23], 6 | 17))
        .collect();
    assert_eq!(l4.len(), 6, "5 datagrams and a SYN: {}", got.len());
    for f in &l4 {
        assert!(
            crate::csum::tests::verify(f),
            "checksum completed: {f:02x?}"
        );
    }
    let st = rx.stats()[0];
    assert_eq!(
        (st.csum_completed, st.csum_partial_left),
        (6, 0),
        "{mode:?}: each was partial (veth's offload) and completed"
    );
}

#[test]
fn live_tap_queues_one_per_group_and_single_queue_devices_say_so() {
    let Some(t) = Topo::new() else { return };
    // A device wasp creates is multi-queue: every group gets a queue.
    let groups: Vec<TapGroup> = (0..2)
        .map(|_| {
            in_netns(&t.b, || TapGroup::open(&["wiotapm"], RingConfig::default()))
                .unwrap()
                .expect("queue")
        })
        .collect();
    assert!(groups.iter().all(TapGroup::multi_queue));
    let flags = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &t.b,
            "cat",
            "/sys/class/net/wiotapm/tun_flags",
        ])
        .output()
        .expect("tun_flags");
    let flags = u32::from_str_radix(
        String::from_utf8_lossy(&flags.stdout)
            .trim()
            .trim_start_matches("0x"),
        16,
    )
    .expect("hex flags");
    assert_ne!(flags & 0x0100, 0, "IFF_MULTI_QUEUE");
    // One made without multi_queue: one group, and the second is told why not.
    ip(&["-n", &t.b, "tuntap", "add", "dev", "wiotaps", "mode", "tap"]).expect("tuntap");
    let one = in_netns(&t.b, || TapGroup::open(&["wiotaps"], RingConfig::default()))
        .unwrap()
        .expect("its one queue");
    assert!(!one.multi_queue());
    let e = in_netns(&t.b, || TapGroup::open(&["wiotaps"], RingConfig::default()))
        .unwrap()
        .err()
        .expect("a second queue");
    assert!(
        e.to_string()
            .starts_with("wiotaps: TAP open (TUNSETIFF): the device has one queue"),
        "{e}"
    );
}
