//! flow-path: what the flowtable saves. The same packet of an established TCP connection
//! through a NAT gateway, two ways, in the same run:
//!
//! - **slow**: the IP path with the chains: conntrack lookup, prerouting (a nat chain, not run
//!   for an established connection), the route, a forward chain of 100 rules that do not match
//!   before `ct state established accept`, postrouting, the NAT rewrite of both halves, TTL,
//!   MACs;
//! - **fast**: the connection offloaded (`flow add @ft`): the flowtable's lookup at ingress and
//!   its cached edit, no chain;
//!
//! each through `Forwarder::after_ingress` (what `wasp replay` and the daemon call, with the
//! ingress hook's parse of the frame) with the
//! frame written to a send buffer as the daemon writes it (`Body::write`), for 64- and
//! 1500-byte frames. Prints CPU ns per packet (thread CPU time; median of the rounds), packets
//! per second of CPU, and the ratio slow / fast (issue 6's target: at least 3).
//!
//! A second table does the same through a Geneve tunnel device (the Geneve gateway sample's
//! set-up, no NAT): packets that arrive encapsulated from the tunnel's peer (slow: the outer
//! packet's conntrack and input chain, then the inner packet's whole path; fast: the flow's
//! decapsulation) and the answers that leave encapsulated (slow: the chains then the tunnel
//! device's encapsulation; fast: the flow's cached outer header).
//!
//! With `--egress N`, a netdev egress chain of N rules that match nothing sits on the output
//! device: every forwarded frame, slow or fast, runs it before it leaves (as the kernel's
//! dev_queue_xmit runs nf_hook_egress), one hook call per packet at 1/call and one per vector
//! at N/call.
//!
//! Usage: `cargo run --release -p wasp-perf --bin flow-path [-- --packets N --rounds R
//! --egress N]`.

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::sync::Arc;

use clap::Parser;
use wasp_conntrack::{Config, Conntrack};
use wasp_core::{At, CtMeta, Engine, HookResult, Packet};
use wasp_gateway::{Decided, Forwarder, Gateway, Netfilter, SendKind, WayOut};
use wasp_perf::traffic::build::{Net, PacketSpec, Transport, tcp_flags};

#[derive(Parser)]
#[command(about = "ns per packet: an offloaded flow vs the same packet through the chains")]
struct Args {
    /// Packets per round and case.
    #[arg(long, default_value_t = 200_000)]
    packets: usize,
    /// Rounds per case (the median is printed).
    #[arg(long, default_value_t = 7)]
    rounds: usize,
    /// Rules in the forward chain before the one that accepts.
    #[arg(long, default_value_t = 100)]
    rules: usize,
    /// Packets per call in the vector columns (the daemon's receive batch).
    #[arg(long, default_value_t = 64)]
    vector: usize,
    /// Rules of a netdev egress chain on the output device `w1` (none that match, policy
    /// accept): every forwarded frame runs it before it leaves. 0: no egress chain.
    #[arg(long, default_value_t = 0)]
    egress: usize,
}

const GW: &str = "\
device w0 mac 02:00:00:00:00:01
device w1 mac 02:00:00:00:00:02 mtu 9000
address w0 10.1.0.1/24
address w1 10.2.0.1/24
neighbour 10.1.0.2 lladdr 02:00:00:00:01:02 dev w0
neighbour 10.2.0.2 lladdr 02:00:00:00:02:02 dev w1
";

const W0: [u8; 6] = [2, 0, 0, 0, 0, 1];
const W1: [u8; 6] = [2, 0, 0, 0, 0, 2];
const CLIENT: [u8; 6] = [2, 0, 0, 0, 1, 2];
const SERVER: [u8; 6] = [2, 0, 0, 0, 2, 2];

/// `rules` forward rules that do not match (other sources, other ports), then, with
/// `offload`, `ct state established flow add @ft`.
fn forward_rules(s: &mut String, rules: usize, offload: bool) {
    for i in 0..rules {
        let _ = writeln!(
            s,
            "  ip saddr 192.0.2.{} tcp dport {} drop",
            i % 250 + 1,
            1000 + i
        );
    }
    if offload {
        s.push_str("  ct state established flow add @ft\n");
    }
}

/// The gateway's ruleset: port forwarding and masquerade, a forward chain of `rules`
/// non-matching rules, then the established accept; with `offload`, `flow add @ft` too; with
/// `egress` > 0, a netdev egress chain of that many non-matching rules on `w1`.
fn ruleset(rules: usize, offload: bool, egress: usize) -> String {
    let mut s = String::from(
        "table ip nat {\n chain pre {\n  type nat hook prerouting priority dstnat; policy accept;\n  iifname \"w0\" tcp dport 8080 dnat to 10.2.0.2:80\n }\n chain post {\n  type nat hook postrouting priority srcnat; policy accept;\n  oifname \"w1\" masquerade\n }\n}\ntable ip filter {\n flowtable ft {\n  hook ingress priority 0; devices = { w0, w1 };\n }\n chain forward {\n  type filter hook forward priority filter; policy drop;\n",
    );
    forward_rules(&mut s, rules, offload);
    s.push_str(
        "  ct state established,related accept\n  ct state new iifname \"w0\" accept\n }\n}\n",
    );
    if egress > 0 {
        s.push_str("table netdev out {\n chain eg {\n  type filter hook egress device \"w1\" priority 0; policy accept;\n");
        for i in 0..egress {
            let _ = writeln!(
                s,
                "  ip daddr 198.51.100.{} tcp sport {} drop",
                i % 250 + 1,
                2000 + i
            );
        }
        s.push_str(" }\n}\n");
    }
    s
}

fn frame(from_client: bool, flags: u8, size: usize) -> Vec<u8> {
    if from_client {
        tcp_frame(
            (CLIENT, W0),
            ([10, 1, 0, 2], [10, 1, 0, 1]),
            (40000, 8080),
            flags,
            size,
        )
    } else {
        tcp_frame(
            (SERVER, W1),
            ([10, 2, 0, 2], [10, 2, 0, 1]),
            (80, 40000),
            flags,
            size,
        )
    }
}

/// A TCP frame of `size` bytes: MACs (source, destination), addresses, ports, `flags`.
fn tcp_frame(
    macs: ([u8; 6], [u8; 6]),
    addrs: ([u8; 4], [u8; 4]),
    ports: (u16, u16),
    flags: u8,
    size: usize,
) -> Vec<u8> {
    let mut p = PacketSpec::new(
        Net::v4(Ipv4Addr::from(addrs.0), Ipv4Addr::from(addrs.1)),
        Some(Transport::tcp(ports.0, ports.1, flags)),
    );
    p.src_mac = macs.0;
    p.dst_mac = macs.1;
    // Ethernet 14 + IPv4 20 + TCP 20 + payload = size.
    p.payload = vec![0x61; size.saturating_sub(54)];
    p.build()
}

struct Rig {
    engine: Engine,
    fw: Forwarder,
    res: HookResult,
    way: WayOut,
    buf: Vec<u8>,
}

impl Rig {
    fn new(rules: usize, offload: bool, egress: usize) -> Rig {
        Rig::with(GW, &ruleset(rules, offload, egress))
    }

    fn with(gw: &str, rules: &str) -> Rig {
        let rs = wasp_ruleset::parse_str(rules, "flow-path.nft").expect("ruleset");
        let mut engine = Engine::compile(&rs).expect("compile");
        let nf = Netfilter::new(
            Arc::new(Conntrack::new(Config::default())),
            engine.flowtables(),
            None,
            None,
        );
        engine.set_conn_count(nf.conn_count());
        let mut fw = Forwarder::new(Some(Gateway::parse(gw, "gw.conf").expect("gateway")));
        fw.set_netfilter(Some(nf));
        Rig {
            engine,
            fw,
            res: HookResult::new(),
            way: WayOut::default(),
            buf: vec![0; 2048],
        }
    }

    /// One packet in on `dev`, written to the send buffer as the daemon does; the kind sent.
    fn one(&mut self, dev: &str, f: &[u8], now: u64) -> Option<SendKind> {
        let p = Packet {
            frame: f,
            meta: wasp_wire::parse(f),
            iifname: dev,
            mark: 0,
            oifname: "",
            ct: CtMeta::NONE,
            ct_detail: None,
            nftrace: false,
            route: None,
        };
        self.engine
            .run(At::Ingress(dev), &[p], now, &mut self.res, None, None);
        self.way.sends.clear();
        self.fw.after_ingress(
            &mut self.engine,
            None,
            dev,
            f,
            Some(&p.meta),
            &[],
            &self.res.outcomes[0],
            now,
            &mut self.way,
        );
        let s = self.way.sends.first()?;
        let n = s.body.len(f);
        s.body.write(f, &mut self.buf[..n]);
        Some(s.kind)
    }

    /// `frames` in on `dev` as one vector (one ingress hook call, one [`Forwarder::vector`]),
    /// each sent frame written to the send buffer as the daemon does; the kind of the last
    /// send.
    fn many(&mut self, dev: &str, frames: &[&[u8]], now: u64) -> Option<SendKind> {
        let pkts: Vec<Packet<'_>> = frames
            .iter()
            .map(|f| Packet {
                frame: f,
                meta: wasp_wire::parse(f),
                iifname: dev,
                mark: 0,
                oifname: "",
                ct: CtMeta::NONE,
                ct_detail: None,
                nftrace: false,
                route: None,
            })
            .collect();
        self.engine
            .run(At::Ingress(dev), &pkts, now, &mut self.res, None, None);
        let decided: Vec<Decided<'_>> = pkts
            .iter()
            .zip(&self.res.outcomes)
            .map(|(p, o)| Decided {
                frame: p.frame,
                meta: Some(&p.meta),
                dups: &[],
                outcome: o,
                nftrace: false,
            })
            .collect();
        let mut kind = None;
        let buf = &mut self.buf;
        self.fw.vector(
            &mut self.engine,
            None,
            dev,
            &decided,
            now,
            &mut self.way,
            None,
            |i, _, way: &mut WayOut| {
                for s in way.sends.drain(..) {
                    let n = s.body.len(frames[i]);
                    s.body.write(frames[i], &mut buf[..n]);
                    kind = Some(s.kind);
                }
            },
        );
        kind
    }
}

fn cpu_ns() -> u64 {
    wasp_perf::sys::thread_cpu_ns()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// CPU ns per packet of `packets` client packets of the established connection (median of
/// `rounds`), `vector` per call, and the kind of send the last one got.
fn measure(
    rig: &mut Rig,
    size: usize,
    packets: usize,
    rounds: usize,
    vector: usize,
) -> (f64, Option<SendKind>) {
    let data = frame(true, tcp_flags::ACK | tcp_flags::PSH, size);
    measure_frame(rig, "w0", &data, packets, rounds, vector)
}

/// CPU ns per packet of `packets` copies of `data` in on `dev` (median of `rounds`), `vector`
/// per call (1: [`Rig::one`]), and the kind of send the last one got.
fn measure_frame(
    rig: &mut Rig,
    dev: &str,
    data: &[u8],
    packets: usize,
    rounds: usize,
    vector: usize,
) -> (f64, Option<SendKind>) {
    let mut kind = None;
    let mut per = Vec::with_capacity(rounds);
    let mut now = 2_000_000_000u64;
    let frames = vec![data; vector.max(1)];
    let calls = packets.div_ceil(frames.len());
    for _ in 0..rounds {
        let t0 = cpu_ns();
        for _ in 0..calls {
            now += 1_000;
            kind = if frames.len() == 1 {
                rig.one(dev, data, now)
            } else {
                rig.many(dev, &frames, now)
            };
        }
        per.push((cpu_ns() - t0) as f64 / (calls * frames.len()) as f64);
    }
    (median(per), kind)
}

fn main() {
    let args = Args::parse();
    println!(
        "flow-path: one established TCP connection through a NAT gateway ({} forward rules before the accept, {} egress rules on the output device), {} packets x {} rounds, CPU ns/packet (median)",
        args.rules, args.egress, args.packets, args.rounds
    );
    println!();
    let v = args.vector;
    println!(
        "| frame | slow path (chains) ns, 1/call | slow, {v}/call | fast path (flowtable) ns, 1/call | fast, {v}/call | slow Mpps/CPU ({v}) | fast Mpps/CPU ({v}) | slow / fast ({v}) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for size in [64usize, 1500] {
        let mut slow = Rig::new(args.rules, false, args.egress);
        let mut fast = Rig::new(args.rules, true, args.egress);
        for r in [&mut slow, &mut fast] {
            // Handshake: SYN, SYN-ACK, ACK (the ACK offloads it in `fast`).
            let _ = r.one("w0", &frame(true, tcp_flags::SYN, 64), 1_000_000_000);
            let _ = r.one(
                "w1",
                &frame(false, tcp_flags::SYN | tcp_flags::ACK, 64),
                1_100_000_000,
            );
            let _ = r.one("w0", &frame(true, tcp_flags::ACK, 64), 1_200_000_000);
        }
        let (s1, _) = measure(&mut slow, size, args.packets, args.rounds, 1);
        let (f1, _) = measure(&mut fast, size, args.packets, args.rounds, 1);
        let (s, sk) = measure(&mut slow, size, args.packets, args.rounds, v);
        let (f, fk) = measure(&mut fast, size, args.packets, args.rounds, v);
        assert_eq!(
            sk,
            Some(SendKind::Forward),
            "the slow case went through the chains"
        );
        assert_eq!(fk, Some(SendKind::Flow), "the fast case took the flowtable");
        println!(
            "| {size} B | {s1:.0} | {s:.0} | {f1:.0} | {f:.0} | {:.2} | {:.2} | {:.1}x |",
            1e3 / s,
            1e3 / f,
            s / f
        );
    }
    tunnel(&args);
}

/// The remote VTEP 192.0.2.2 on trunk0 with 10.20.0.2 behind the tunnel gnv0 (VNI 11); the
/// server 10.30.0.2 on lan0.
const TUNNEL_GW: &str = "\
device trunk0 mac 02:00:00:00:00:0a mtu 9000
address trunk0 192.0.2.1/24
neighbour 192.0.2.2 lladdr 02:00:00:00:0a:02 dev trunk0
tunnel gnv0 geneve id 11 remote 192.0.2.2 dev trunk0
device gnv0 mac 02:00:00:00:00:0c
address gnv0 10.20.0.1/24
neighbour 10.20.0.2 lladdr 02:00:00:00:0c:02 dev gnv0
device lan0 mac 02:00:00:00:00:0b mtu 9000
address lan0 10.30.0.1/24
neighbour 10.30.0.2 lladdr 02:00:00:00:0b:02 dev lan0
";

/// The tunnel gateway's ruleset: an input chain for the tunnel's packets, a forward chain of
/// `rules` non-matching rules, then the established accept; with `offload`, `flow add @ft`.
fn tunnel_ruleset(rules: usize, offload: bool) -> String {
    let mut s = String::from(
        "table inet filter {\n flowtable ft {\n  hook ingress priority 0; devices = { trunk0, lan0 };\n }\n chain input {\n  type filter hook input priority filter; policy drop;\n  ct state established,related accept\n  iifname \"trunk0\" udp dport 6081 accept\n }\n chain forward {\n  type filter hook forward priority filter; policy drop;\n",
    );
    forward_rules(&mut s, rules, offload);
    s.push_str(
        "  ct state established,related accept\n  iifname \"gnv0\" ct state new accept\n }\n}\n",
    );
    s
}

/// A TCP frame of `size` bytes (inner) between the overlay host and the server: from the
/// overlay host, inside Geneve VNI 11 from its VTEP; else from the server, plain.
fn tunnel_frame(from_remote: bool, flags: u8, size: usize) -> Vec<u8> {
    let inner = if from_remote {
        let macs = ([2, 0, 0, 0, 0x0c, 2], [2, 0, 0, 0, 0, 0x0c]);
        tcp_frame(
            macs,
            ([10, 20, 0, 2], [10, 30, 0, 2]),
            (40000, 22),
            flags,
            size,
        )
    } else {
        let macs = ([2, 0, 0, 0, 0x0b, 2], [2, 0, 0, 0, 0, 0x0b]);
        tcp_frame(
            macs,
            ([10, 30, 0, 2], [10, 20, 0, 2]),
            (22, 40000),
            flags,
            size,
        )
    };
    if !from_remote {
        return inner;
    }
    let mut o = PacketSpec::new(
        Net::v4(Ipv4Addr::new(192, 0, 2, 2), Ipv4Addr::new(192, 0, 2, 1)),
        Some(Transport::Udp {
            sport: 50000,
            dport: 6081,
        }),
    );
    o.src_mac = [2, 0, 0, 0, 0x0a, 2];
    o.dst_mac = [2, 0, 0, 0, 0, 0x0a];
    o.payload = [0, 0, 0x65, 0x58, 0, 0, 11, 0].to_vec();
    o.payload.extend_from_slice(&inner);
    o.build()
}

fn tunnel(args: &Args) {
    println!();
    println!(
        "flow-path through a Geneve tunnel device (VNI 11, {} forward rules before the accept), CPU ns/packet (median)",
        args.rules
    );
    println!();
    let v = args.vector;
    println!(
        "| packet | inner frame | slow path (chains) ns, 1/call | slow, {v}/call | fast path (flowtable) ns, 1/call | fast, {v}/call | slow / fast ({v}) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (what, from_remote, dev) in [
        ("in from the tunnel (decap)", true, "trunk0"),
        ("out to the tunnel (encap)", false, "lan0"),
    ] {
        for size in [64usize, 1500] {
            let mut slow = Rig::with(TUNNEL_GW, &tunnel_ruleset(args.rules, false));
            let mut fast = Rig::with(TUNNEL_GW, &tunnel_ruleset(args.rules, true));
            for r in [&mut slow, &mut fast] {
                let _ = r.one(
                    "trunk0",
                    &tunnel_frame(true, tcp_flags::SYN, 64),
                    1_000_000_000,
                );
                let _ = r.one(
                    "lan0",
                    &tunnel_frame(false, tcp_flags::SYN | tcp_flags::ACK, 64),
                    1_100_000_000,
                );
                let _ = r.one(
                    "trunk0",
                    &tunnel_frame(true, tcp_flags::ACK, 64),
                    1_200_000_000,
                );
            }
            let data = tunnel_frame(from_remote, tcp_flags::ACK | tcp_flags::PSH, size);
            let (p, r) = (args.packets, args.rounds);
            let (s1, _) = measure_frame(&mut slow, dev, &data, p, r, 1);
            let (f1, _) = measure_frame(&mut fast, dev, &data, p, r, 1);
            let (s, sk) = measure_frame(&mut slow, dev, &data, p, r, v);
            let (f, fk) = measure_frame(&mut fast, dev, &data, p, r, v);
            assert_eq!(
                sk,
                Some(SendKind::Forward),
                "the slow case went through the chains"
            );
            assert_eq!(fk, Some(SendKind::Flow), "the fast case took the flowtable");
            println!(
                "| {what} | {size} B | {s1:.0} | {s:.0} | {f1:.0} | {f:.0} | {:.1}x |",
                s / f
            );
        }
    }
}
