//! The IP path end to end on byte vectors: conntrack states seen by the chains, source and
//! destination NAT both ways with checksums that verify from scratch, a flowtable offload after
//! the handshake and its fast path, teardown on FIN and RST with the conntrack state of cases
//! C19, TTL 1 and MTU to the slow path (C20), expiry, `ct count`, `ct mark set`.

use crate::DropReason;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use wasp_conntrack::{Config, Conntrack, TcpState};

use super::path::{Fate, Forwarder, SendKind};
use super::{Gateway, Netfilter, checksum};
use wasp_core::Engine;
use wasp_core::Packet;

/// client 10.1.0.2 (02:..:01:02) -- w0 [gateway] w1 -- server 10.2.0.2 (02:..:02:02).
pub(super) const GW: &str = "\
device w0 mac 02:00:00:00:00:01
device w1 mac 02:00:00:00:00:02 mtu 1500
address w0 10.1.0.1/24
address w1 10.2.0.1/24
neighbour 10.1.0.2 lladdr 02:00:00:00:01:02 dev w0
neighbour 10.2.0.2 lladdr 02:00:00:00:02:02 dev w1
";

pub(super) const W0: [u8; 6] = [2, 0, 0, 0, 0, 1];
pub(super) const W1: [u8; 6] = [2, 0, 0, 0, 0, 2];
pub(super) const CLIENT: [u8; 6] = [2, 0, 0, 0, 1, 2];
pub(super) const SERVER: [u8; 6] = [2, 0, 0, 0, 2, 2];

pub(super) const SYN: u8 = 0x02;
pub(super) const ACK: u8 = 0x10;
pub(super) const FIN: u8 = 0x01;
pub(super) const RST: u8 = 0x04;
pub(super) const PSH: u8 = 0x08;

const NAT_RULES: &str = r#"
table ip nat {
    chain pre {
        type nat hook prerouting priority dstnat; policy accept;
        iifname "w0" tcp dport 8080 dnat to 10.2.0.2:80
    }
    chain post {
        type nat hook postrouting priority srcnat; policy accept;
        oifname "w1" masquerade
    }
}
table ip filter {
    flowtable ft {
        hook ingress priority 0; devices = { w0, w1 }; counter;
    }
    chain forward {
        type filter hook forward priority filter; policy drop;
        ct state established ip protocol tcp flow add @ft
        ct state established,related accept
        ct state new iifname "w0" ct mark set 0x2a accept
    }
}
"#;

/// A TCP segment in a frame: from `src:sport` to `dst:dport`, with `flags` and `payload`,
/// checksums right, Ethernet from `smac` to `dmac`.
#[allow(clippy::too_many_arguments)]
pub(super) fn tcp(
    smac: [u8; 6],
    dmac: [u8; 6],
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    flags: u8,
    ttl: u8,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = dmac.to_vec();
    f.extend_from_slice(&smac);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = 20 + 20 + payload.len();
    let mut ip = vec![
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0x12,
        0x34,
        0x40,
        0,
        ttl,
        6,
        0,
        0,
    ];
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let c = checksum::checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut t = Vec::new();
    t.extend_from_slice(&sport.to_be_bytes());
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&1000u32.to_be_bytes());
    t.extend_from_slice(&2000u32.to_be_bytes());
    t.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    t.extend_from_slice(payload);
    let c = l4_sum(&src, &dst, 6, &t);
    t[16..18].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&t);
    f
}

/// The TCP/UDP checksum of segment `t` from scratch.
pub(super) fn l4_sum(src: &[u8], dst: &[u8], proto: u8, t: &[u8]) -> u16 {
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(src);
    pseudo.extend_from_slice(dst);
    pseudo.extend_from_slice(&[0, proto]);
    pseudo.extend_from_slice(&(t.len() as u16).to_be_bytes());
    let mut all = pseudo;
    let mut seg = t.to_vec();
    seg[16] = 0;
    seg[17] = 0;
    all.extend_from_slice(&seg);
    checksum::checksum(&all)
}

/// Addresses, ports and checksum verdicts of a sent IPv4 TCP frame:
/// (src, sport, dst, dport, ttl, ip checksum ok, tcp checksum ok).
pub(super) fn read(f: &[u8]) -> (Ipv4Addr, u16, Ipv4Addr, u16, u8, bool, bool) {
    let ip = &f[14..34];
    let t = &f[34..];
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    let ip_ok = checksum::checksum(ip) == 0;
    let want = l4_sum(&ip[12..16], &ip[16..20], 6, t);
    let tcp_ok = u16::from_be_bytes([t[16], t[17]]) == want;
    (
        src,
        u16::from_be_bytes([t[0], t[1]]),
        dst,
        u16::from_be_bytes([t[2], t[3]]),
        ip[8],
        ip_ok,
        tcp_ok,
    )
}

pub(super) struct Rig {
    pub(super) engine: Engine,
    pub(super) fw: Forwarder,
    pub(super) nf: Netfilter,
    /// The way out of the packets sent so far (its `log` lines accumulate).
    pub(super) way: super::WayOut,
}

fn rig(rules: &str) -> Rig {
    rig_with(GW, rules)
}

/// A rig with gateway file `gw` and ruleset `rules`.
pub(super) fn rig_with(gw: &str, rules: &str) -> Rig {
    let rs = wasp_ruleset::parse_str(rules, "nf.nft").unwrap();
    let mut engine = Engine::compile(&rs).unwrap();
    // A fixed seed: rigs compared with each other place connections alike.
    let ct = Arc::new(Conntrack::new(Config {
        seed: 7,
        ..Config::default()
    }));
    let nf = Netfilter::new(ct, engine.flowtables(), None, None);
    engine.set_conn_count(nf.conn_count());
    let mut fw = Forwarder::new(Some(Gateway::parse(gw, "gw.conf").unwrap()));
    fw.set_netfilter(Some(nf.clone()));
    Rig {
        engine,
        fw,
        nf,
        way: super::WayOut::default(),
    }
}

impl Rig {
    /// `frame` in on `dev` at `now` (s): its fate and the frames sent (device, kind, bytes).
    pub(super) fn send(
        &mut self,
        dev: &str,
        frame: &[u8],
        now_s: f64,
    ) -> (Fate, Vec<(String, SendKind, Vec<u8>)>) {
        self.send_at(dev, frame, (now_s * 1e9) as u64)
    }

    /// [`Rig::send`] at `now` ns.
    pub(super) fn send_at(
        &mut self,
        dev: &str,
        frame: &[u8],
        now: u64,
    ) -> (Fate, Vec<(String, SendKind, Vec<u8>)>) {
        let p = Packet {
            frame,
            meta: wasp_wire::parse(frame),
            iifname: dev,
            mark: 0,
            oifname: "",
            ct: wasp_core::CtMeta::NONE,
            ct_detail: None,
            nftrace: false,
            route: None,
        };
        let mut res = wasp_core::HookResult::new();
        self.engine
            .run(wasp_core::At::Ingress(dev), &[p], now, &mut res, None, None);
        let o = [res.outcomes[0]];
        // With the ingress hook's parse, as the data path gives it.
        let fate = self.fw.after_ingress(
            &mut self.engine,
            None,
            dev,
            frame,
            Some(&p.meta),
            &[],
            &o[0],
            now,
            &mut self.way,
        );
        let sent = self
            .way
            .sends
            .drain(..)
            .map(|s| (s.dev.to_string(), s.kind, s.frame(frame).into_owned()))
            .collect();
        (fate, sent)
    }

    fn ct(&self) -> &Conntrack {
        self.nf.conntrack()
    }
}

pub(super) const C: [u8; 4] = [10, 1, 0, 2];
pub(super) const ROUTER_IN: [u8; 4] = [10, 1, 0, 1];
pub(super) const ROUTER_OUT: [u8; 4] = [10, 2, 0, 1];
pub(super) const S: [u8; 4] = [10, 2, 0, 2];

/// The client's segment of the port-forwarded connection (to 10.1.0.1:8080).
fn c2s(flags: u8, ttl: u8, payload: &[u8]) -> Vec<u8> {
    tcp(CLIENT, W0, C, ROUTER_IN, 40000, 8080, flags, ttl, payload)
}

/// The server's answer as it sends it: to the masqueraded client 10.2.0.1:40000.
fn s2c(flags: u8, ttl: u8) -> Vec<u8> {
    tcp(SERVER, W1, S, ROUTER_OUT, 80, 40000, flags, ttl, b"")
}

/// Handshake of the port-forwarded connection; returns the rig after it.
fn handshake(r: &mut Rig) {
    let (fate, sent) = r.send("w0", &c2s(SYN, 64, b""), 1.0);
    assert_eq!(fate, Fate::Sent);
    assert_eq!(sent.len(), 1);
    let (dev, kind, f) = &sent[0];
    assert_eq!((dev.as_str(), *kind), ("w1", SendKind::Forward));
    // DNAT to the server, masqueraded to w1's address; the port kept; TTL one lower; MACs
    // of w1 and the server; checksums right.
    assert_eq!(
        read(f),
        (
            Ipv4Addr::from(ROUTER_OUT),
            40000,
            Ipv4Addr::from(S),
            80,
            63,
            true,
            true
        )
    );
    assert_eq!((&f[0..6], &f[6..12]), (&SERVER[..], &W1[..]));
    let (fate, sent) = r.send("w1", &s2c(SYN | ACK, 64), 1.1);
    assert_eq!(fate, Fate::Sent);
    // The reply back to the client, from the address it connected to.
    assert_eq!(
        read(&sent[0].2),
        (
            Ipv4Addr::from(ROUTER_IN),
            8080,
            Ipv4Addr::from(C),
            40000,
            63,
            true,
            true
        )
    );
    assert_eq!(sent[0].0, "w0");
    let (fate, _) = r.send("w0", &c2s(ACK, 64, b""), 1.2);
    assert_eq!(fate, Fate::Sent);
}

#[test]
fn port_forwarding_and_masquerade_both_ways_with_the_kernel_s_conntrack_states() {
    let mut r = rig(NAT_RULES);
    handshake(&mut r);
    let e = r.ct().entries(1_300_000_000);
    assert_eq!(e.len(), 1);
    let e = e[0];
    assert_eq!(e.tcp_state, Some(TcpState::Established));
    assert_eq!(e.mark, 0x2a, "ct mark set on the first packet");
    assert_eq!(
        (e.orig.src, e.orig.dst, e.orig.sport, e.orig.dport),
        (IpAddr::from(C), IpAddr::from(ROUTER_IN), 40000, 8080)
    );
    assert_eq!(
        (e.reply.src, e.reply.dst, e.reply.sport, e.reply.dport),
        (IpAddr::from(S), IpAddr::from(ROUTER_OUT), 80, 40000)
    );
    // A connection the server opens is new from w1: the forward policy drops it, and its
    // unconfirmed entry goes with it.
    let (fate, sent) = r.send("w1", &tcp(SERVER, W1, S, C, 5000, 22, SYN, 64, b""), 2.0);
    assert_eq!((fate, sent.len()), (Fate::Dropped(DropReason::Verdict), 0));
    assert_eq!(r.ct().len(), 1);
}

#[test]
fn an_established_connection_is_offloaded_and_then_skips_the_chains() {
    let mut r = rig(NAT_RULES);
    handshake(&mut r);
    // The handshake's last ACK was the first packet seen established: offloaded then.
    let flows = r.nf.flowtables()[0].flows(1_300_000_000);
    assert_eq!(flows.len(), 1, "one flow after the handshake");
    // Data both ways now takes the fast path, with the same rewrite the chains gave.
    let (fate, sent) = r.send("w0", &c2s(ACK | PSH, 64, b"hello"), 1.4);
    assert_eq!(fate, Fate::Sent);
    let (dev, kind, f) = &sent[0];
    assert_eq!((dev.as_str(), *kind), ("w1", SendKind::Flow));
    assert_eq!(
        read(f),
        (
            Ipv4Addr::from(ROUTER_OUT),
            40000,
            Ipv4Addr::from(S),
            80,
            63,
            true,
            true
        )
    );
    assert_eq!(&f[f.len() - 5..], b"hello");
    let (_, sent) = r.send("w1", &s2c(ACK, 64), 1.5);
    assert_eq!(sent[0].1, SendKind::Flow);
    assert_eq!(
        read(&sent[0].2),
        (
            Ipv4Addr::from(ROUTER_IN),
            8080,
            Ipv4Addr::from(C),
            40000,
            63,
            true,
            true
        )
    );
    let flows = r.nf.flowtables()[0].flows(1_600_000_000);
    let c = flows[0].counters.expect("counter flag");
    assert_eq!(c.packets, [1, 1], "one packet each way by the fast path");
    // The offloaded connection's status says so.
    let e = r.ct().entries(1_600_000_000)[0];
    assert_ne!(e.status & wasp_conntrack::status::OFFLOAD, 0);
}

#[test]
fn fin_in_the_fast_path_tears_down_to_fin_wait_and_cannot_offload_again() {
    // Case C19: FIN -> FIN_WAIT with its 120 s timeout, not ESTABLISHED with days.
    let mut r = rig(NAT_RULES);
    handshake(&mut r);
    let (fate, sent) = r.send("w0", &c2s(FIN | ACK, 64, b""), 2.0);
    assert_eq!(fate, Fate::Sent);
    assert_eq!(sent[0].1, SendKind::Forward, "the FIN took the slow path");
    assert!(r.nf.flowtables()[0].flows(2_000_000_000).is_empty());
    let e = r.ct().entries(2_000_000_000)[0];
    assert_eq!(e.status & wasp_conntrack::status::OFFLOAD, 0);
    assert_eq!(e.tcp_state, Some(TcpState::FinWait));
    assert!(
        e.timeout_ns <= 120_000_000_000 && e.timeout_ns > 100_000_000_000,
        "FIN_WAIT timeout: {} ns",
        e.timeout_ns
    );
    // A FIN from the other side: the chains see it (no flow), established, not offloaded again.
    let (_, sent) = r.send("w1", &s2c(FIN | ACK, 64), 2.1);
    assert_eq!(sent[0].1, SendKind::Forward);
    assert!(r.nf.flowtables()[0].flows(2_100_000_000).is_empty());
}

#[test]
fn rst_in_the_fast_path_tears_down_to_close() {
    let mut r = rig(NAT_RULES);
    handshake(&mut r);
    let (_, sent) = r.send("w1", &s2c(RST, 64), 2.0);
    assert_eq!(sent[0].1, SendKind::Forward);
    let e = r.ct().entries(2_000_000_000)[0];
    assert_eq!(e.tcp_state, Some(TcpState::Close));
    assert!(
        e.timeout_ns <= 10_000_000_000,
        "CLOSE timeout: {}",
        e.timeout_ns
    );
}

#[test]
fn ttl_one_leaves_the_fast_path_and_gets_time_exceeded() {
    // Case C20: TTL 1 goes to the slow path, which answers time exceeded; the flow stays and
    // the next packet is fast again.
    let mut r = rig(NAT_RULES);
    handshake(&mut r);
    let (fate, sent) = r.send("w0", &c2s(ACK, 1, b""), 2.0);
    assert_eq!(fate, Fate::Replied);
    assert_eq!(sent[0].1, SendKind::Reply);
    let icmp = &sent[0].2;
    assert_eq!((icmp[23], icmp[34]), (1, 11), "ICMP time exceeded");
    assert_eq!(
        r.fw.gateway().unwrap().stats().time_exceeded,
        1,
        "routed once, answered once"
    );
    assert_eq!(r.nf.flowtables()[0].flows(2_000_000_000).len(), 1);
    let (_, sent) = r.send("w0", &c2s(ACK, 64, b""), 2.1);
    assert_eq!(sent[0].1, SendKind::Flow);
}

#[test]
fn a_packet_over_the_mtu_takes_the_slow_path() {
    let mut r = rig(NAT_RULES);
    handshake(&mut r);
    // 1500 bytes of IP packet fit w1's MTU of 1500; 1501 do not (DF set: frag needed).
    let fits = c2s(ACK, 64, &[0u8; 1460]);
    let (_, sent) = r.send("w0", &fits, 2.0);
    assert_eq!(sent[0].1, SendKind::Flow);
    let big = c2s(ACK, 64, &[0u8; 1461]);
    let (fate, sent) = r.send("w0", &big, 2.1);
    assert_eq!(fate, Fate::Dropped(super::DropReason::TooBig));
    assert_eq!(sent[0].1, SendKind::Unreachable);
}

#[test]
fn idle_flows_expire_and_their_connection_goes_back_established_with_the_pickup_timeout() {
    let mut r = rig(NAT_RULES);
    handshake(&mut r);
    assert_eq!(r.nf.flowtables()[0].len(), 1);
    // 31 s without a packet: the flowtable's 30 s timeout has passed.
    let (flows, _) = r.nf.gc(32_500_000_000);
    assert_eq!(flows, 1);
    assert!(r.nf.flowtables()[0].is_empty());
    let e = r.ct().entries(32_500_000_000)[0];
    assert_eq!(e.tcp_state, Some(TcpState::Established));
    assert_eq!(e.status & wasp_conntrack::status::OFFLOAD, 0);
    assert!(
        e.timeout_ns <= 300_000_000_000 && e.timeout_ns > 290_000_000_000,
        "pickup (UNACK) timeout: {}",
        e.timeout_ns
    );
}

#[test]
fn ct_count_limits_connections_per_rule() {
    let rules = r#"
table inet filter {
    chain forward {
        type filter hook forward priority filter; policy accept;
        ct state new tcp dport 80 ct count over 2 drop
    }
}
"#;
    let mut r = rig(rules);
    let mut fates = Vec::new();
    for port in 1..=4u16 {
        let f = tcp(CLIENT, W0, C, S, 50000 + port, 80, SYN, 64, b"");
        fates.push(r.send("w0", &f, 1.0).0);
    }
    assert_eq!(
        fates,
        [
            Fate::Sent,
            Fate::Sent,
            Fate::Dropped(DropReason::Verdict),
            Fate::Dropped(DropReason::Verdict)
        ],
        "the third and fourth connections are over the limit of 2"
    );
}

#[test]
fn invalid_packets_are_seen_invalid() {
    // A SYN|FIN is invalid to conntrack (tcp_error): `ct state invalid drop` drops it.
    let rules = r#"
table inet filter {
    chain forward {
        type filter hook forward priority filter; policy accept;
        ct state invalid counter drop
    }
}
"#;
    let mut r = rig(rules);
    let (fate, _) = r.send(
        "w0",
        &tcp(CLIENT, W0, C, S, 50000, 80, SYN | FIN, 64, b""),
        1.0,
    );
    assert_eq!(fate, Fate::Dropped(DropReason::Verdict));
    let (fate, _) = r.send("w0", &tcp(CLIENT, W0, C, S, 50001, 80, SYN, 64, b""), 1.0);
    assert_eq!(fate, Fate::Sent);
    assert_eq!(r.ct().len(), 1, "only the valid connection is tracked");
}

#[test]
fn ct_direction_and_status_read_the_connection() {
    // Replies of a destination-NATed connection are `ct direction reply` with `ct status dnat`:
    // this forward chain drops exactly those, so the handshake's SYN passes and its SYN-ACK
    // does not; the first packet is `original`, and only `ct state new` reads as new.
    let rules = r#"
table ip nat {
    chain pre {
        type nat hook prerouting priority dstnat; policy accept;
        tcp dport 8080 dnat to 10.2.0.2:80
    }
}
table ip filter {
    chain forward {
        type filter hook forward priority filter; policy accept;
        ct direction reply ct status dnat drop
        ct direction original ct state new ct status & dnat == 0 drop
    }
}
"#;
    let mut r = rig(rules);
    let (fate, sent) = r.send("w0", &c2s(SYN, 64, b""), 1.0);
    assert_eq!(fate, Fate::Sent);
    assert_eq!(
        read(&sent[0].2).2,
        Ipv4Addr::from(S),
        "translated to the server"
    );
    // Without NAT the server would answer the client itself; here it answers the router's
    // address on the client side (not masqueraded: the reply goes to 10.1.0.2 directly).
    let reply = tcp(SERVER, W1, S, C, 80, 40000, SYN | ACK, 64, b"");
    let (fate, sent) = r.send("w1", &reply, 1.1);
    assert_eq!((fate, sent.len()), (Fate::Dropped(DropReason::Verdict), 0));
    // A new connection to a port without NAT: original, new, no dnat status: dropped by the
    // second rule.
    let (fate, _) = r.send("w0", &tcp(CLIENT, W0, C, S, 40001, 22, SYN, 64, b""), 1.2);
    assert_eq!(fate, Fate::Dropped(DropReason::Verdict));
}

#[test]
fn payload_statements_of_the_ip_hooks_edit_what_is_routed_and_sent() {
    // Prerouting rewrites the destination before the route (so the packet for the router's
    // own address is forwarded to the server instead of delivered), forward sets the DSCP and
    // postrouting the TTL; each later hook matches on what the earlier one wrote, and the
    // frame sent carries all three with checksums that verify from scratch.
    let rules = r#"
table ip t {
    chain pre {
        type filter hook prerouting priority 0; policy accept;
        ip daddr 10.1.0.1 tcp dport 8080 ip daddr set 10.2.0.2
    }
    chain forward {
        type filter hook forward priority 0; policy drop;
        ip daddr 10.2.0.2 ip dscp set af21 accept
    }
    chain post {
        type filter hook postrouting priority 0; policy drop;
        ip dscp af21 ip ttl set 9 accept
    }
}
"#;
    let mut r = rig(rules);
    let (fate, sent) = r.send("w0", &c2s(SYN, 64, b"hi"), 1.0);
    assert_eq!(fate, Fate::Sent);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, "w1");
    let f = &sent[0].2;
    let (src, sport, dst, dport, ttl, ip_ok, tcp_ok) = read(f);
    assert_eq!((src, sport), (Ipv4Addr::from(C), 40000));
    assert_eq!((dst, dport), (Ipv4Addr::from(S), 8080));
    assert_eq!(ttl, 9);
    assert_eq!(f[15] >> 2, 18, "dscp af21");
    assert!(ip_ok && tcp_ok, "checksums after three edits");
    // Without the prerouting edit the same packet is for the router: not forwarded.
    let other_port = tcp(CLIENT, W0, C, ROUTER_IN, 40000, 8081, SYN, 64, b"hi");
    let (fate, sent) = r.send("w0", &other_port, 1.1);
    assert_eq!(
        (fate, sent.len()),
        (Fate::Local, 0),
        "port 8081 stays local"
    );
}

#[test]
fn forward_and_postrouting_see_the_received_link_header_and_the_lower_ttl() {
    // ip_forward decrements the TTL before NF_INET_FORWARD; the link header stays the
    // received one until the neighbour output after postrouting (checked on the kernel: a
    // forward chain's `ether saddr` is the sender's address).
    let mac = |m: [u8; 6]| {
        m.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    let rules = format!(
        r#"
table inet t {{
    chain forward {{
        type filter hook forward priority 0; policy drop;
        ether saddr {c} ether daddr {w0} ip ttl 63 accept
    }}
    chain post {{
        type filter hook postrouting priority 0; policy drop;
        ether saddr {c} ip ttl 63 accept
    }}
}}
"#,
        c = mac(CLIENT),
        w0 = mac(W0)
    );
    let mut r = rig(&rules);
    let (fate, sent) = r.send("w0", &tcp(CLIENT, W0, C, S, 40000, 80, SYN, 64, b""), 1.0);
    assert_eq!((fate, sent.len()), (Fate::Sent, 1), "both chains accept");
    let f = &sent[0].2;
    // Sent with the next hop's and the output device's addresses.
    assert_eq!((&f[0..6], &f[6..12]), (&SERVER[..], &W1[..]));
    assert_eq!(f[22], 63);
}

/// The client's SYN to the server with TCP options `opts` (a multiple of 4 bytes), checksums
/// right.
pub(super) fn syn_with_options(opts: &[u8]) -> Vec<u8> {
    let mut f = tcp(CLIENT, W0, C, S, 40000, 80, SYN, 64, b"");
    f.splice(54..54, opts.iter().copied());
    f[46] = (((20 + opts.len()) / 4) << 4) as u8;
    let total = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f[24..26].copy_from_slice(&[0, 0]);
    let c = checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    let c = l4_sum(&C, &S, 6, &f[34..]);
    f[50..52].copy_from_slice(&c.to_be_bytes());
    f
}

#[test]
fn tcp_option_statements_clamp_the_mss_and_strip_options_in_the_forward_hook() {
    // MSS 1460, NOP, NOP, SACK permitted (4, 2) — the SACK option starts at an odd word.
    let opts = [2, 4, 0x05, 0xb4, 1, 1, 4, 2];
    let rules = r#"
table inet t {
    chain forward {
        type filter hook forward priority 0; policy accept;
        tcp flags syn tcp option maxseg size set 1360 reset tcp option sack-perm
    }
    chain post {
        type filter hook postrouting priority 0; policy drop;
        tcp option maxseg size 1360 tcp option sack-perm missing accept
        tcp option maxseg size 1200 accept
    }
}
"#;
    let mut r = rig(rules);
    let (fate, sent) = r.send("w0", &syn_with_options(&opts), 1.0);
    assert_eq!(
        fate,
        Fate::Sent,
        "postrouting saw the clamped MSS and no SACK-perm"
    );
    let f = &sent[0].2;
    assert_eq!(&f[54..62], &[2, 4, 0x05, 0x50, 1, 1, 1, 1]);
    assert!(read(f).6, "TCP checksum after both edits");
    // An MSS already below 1360 is never raised, and the SACK option is stripped all the same.
    let low = [2, 4, 0x04, 0xb0, 1, 1, 4, 2];
    let (fate, sent) = r.send("w0", &syn_with_options(&low), 1.1);
    assert_eq!(fate, Fate::Sent);
    assert_eq!(&sent[0].2[54..62], &[2, 4, 0x04, 0xb0, 1, 1, 1, 1]);
    assert!(read(&sent[0].2).6);
    // Without the options the statements change nothing and the rule goes on.
    let (fate, _) = r.send("w0", &tcp(CLIENT, W0, C, S, 40001, 80, SYN, 64, b""), 1.2);
    assert_eq!(
        fate,
        Fate::Dropped(DropReason::Verdict),
        "no MSS option: postrouting's rules do not match"
    );
}

#[test]
fn a_raw_chain_puts_identical_flows_in_zones_and_notrack_leaves_them_untracked() {
    // The same 5-tuple twice, in zone 1 then zone 2 (numgen alternates): two connections,
    // both `new` (without zones the second SYN would find the first's entry).
    let rules = r#"
table ip raw {
    chain pre {
        type filter hook prerouting priority raw; policy accept;
        tcp sport 50001 ct zone set numgen inc mod 2 map { 0 : 1, 1 : 2 }
        tcp sport 50002 notrack
    }
}
table ip filter {
    chain forward {
        type filter hook forward priority filter; policy drop;
        ct state new accept
        ct state untracked accept
    }
}
"#;
    let mut r = rig(rules);
    let f = tcp(CLIENT, W0, C, S, 50001, 80, SYN, 64, b"");
    assert_eq!(r.send("w0", &f, 1.0).0, Fate::Sent);
    assert_eq!(r.send("w0", &f, 1.0).0, Fate::Sent);
    let mut zones: Vec<u16> = r.ct().entries(1).iter().map(|e| e.orig.zone).collect();
    zones.sort_unstable();
    assert_eq!(zones, [1, 2]);
    // Untracked: forwarded by `ct state untracked accept`, no connection made.
    let f = tcp(CLIENT, W0, C, S, 50002, 80, SYN, 64, b"");
    assert_eq!(r.send("w0", &f, 1.0).0, Fate::Sent);
    assert_eq!(r.ct().len(), 2);
}

#[test]
fn dnat_to_a_map_picks_the_mapped_address_on_a_real_frame() {
    let rules = r#"
table ip nat {
    chain pre {
        type nat hook prerouting priority dstnat; policy accept;
        dnat ip to tcp dport map { 8080 : 10.2.0.2 . 80, 8081 : 10.2.0.3 . 81 }
    }
}
"#;
    let mut r = rig(rules);
    let (fate, sent) = r.send("w0", &c2s(SYN, 64, b""), 1.0);
    assert_eq!(fate, Fate::Sent);
    let (_, _, f) = &sent[0];
    let (src, sport, dst, dport, _, ip_ok, tcp_ok) = read(f);
    assert_eq!(
        (src, sport, dst, dport, ip_ok, tcp_ok),
        (Ipv4Addr::from(C), 40000, Ipv4Addr::from(S), 80, true, true)
    );
}

#[test]
fn log_statements_of_the_ip_hooks_leave_their_lines_in_the_engine() {
    let rules = r#"
table ip t {
    chain forward {
        type filter hook forward priority 0; policy accept;
        tcp dport 80 log prefix "fwd: "
    }
}
"#;
    let mut r = rig(rules);
    let (fate, _) = r.send("w0", &tcp(CLIENT, W0, C, S, 40000, 80, SYN, 64, b""), 1.0);
    assert_eq!(fate, Fate::Sent);
    let (fate, _) = r.send("w0", &tcp(CLIENT, W0, C, S, 40000, 81, SYN, 64, b""), 1.1);
    assert_eq!(fate, Fate::Sent);
    let lines = std::mem::take(&mut r.way.logs);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let l = &lines[0];
    // (The MAC is the routed frame's: wasp's forward hook sees the frame after the route
    // rewrote its link header, the kernel's the frame as received.)
    assert!(l.starts_with("fwd: IN=w0 OUT=w1 MAC="), "{l}");
    assert!(
        l.contains("SRC=10.1.0.2 DST=10.2.0.2") && l.contains("DPT=80"),
        "{l}"
    );
    r.send("w0", &tcp(CLIENT, W0, C, S, 40000, 81, SYN, 64, b""), 1.2);
    assert!(
        r.way.logs.is_empty(),
        "a packet no log statement matched adds no line"
    );
}

#[test]
fn dup_to_an_address_sends_a_copy_to_that_neighbour() {
    // A forward-hook copy keeps the TTL the forward hook saw (63: the kernel's ip_forward
    // decrements before the hook, nf_dup_ipv4 not again); a prerouting copy has it
    // decremented once. The copy goes to the neighbour's MAC, the IP header as it was.
    let rules = r#"
table ip t {
    chain pre {
        type filter hook prerouting priority 0; policy accept;
        tcp dport 81 dup to 10.2.0.2
    }
    chain forward {
        type filter hook forward priority 0; policy accept;
        tcp dport 80 dup to 10.1.0.2 device "w0"
    }
}
"#;
    let mut r = rig(rules);
    let (fate, sent) = r.send("w0", &tcp(CLIENT, W0, C, S, 40000, 80, SYN, 64, b""), 1.0);
    assert_eq!(fate, Fate::Sent);
    assert_eq!(sent.len(), 2, "{sent:?}");
    let (dev, kind, copy) = &sent[0];
    assert_eq!((dev.as_str(), *kind), ("w0", SendKind::Dup));
    assert_eq!(&copy[..6], &CLIENT, "to the neighbour 10.1.0.2");
    let (_, _, dst, dport, ttl, ip_ok, _) = read(copy);
    assert_eq!((dst, dport, ttl, ip_ok), (Ipv4Addr::from(S), 80, 63, true));
    assert_eq!(sent[1].0, "w1", "the packet itself goes on");
    // Prerouting, no device: the route to 10.2.0.2 is out of w1.
    let (fate, sent) = r.send("w0", &tcp(CLIENT, W0, C, S, 40001, 81, SYN, 64, b""), 1.1);
    assert_eq!(fate, Fate::Sent);
    let dups: Vec<_> = sent.iter().filter(|s| s.1 == SendKind::Dup).collect();
    assert_eq!(dups.len(), 1);
    assert_eq!(dups[0].0, "w1");
    assert_eq!(&dups[0].2[..6], &SERVER);
    assert_eq!(read(&dups[0].2).4, 63, "decremented once at prerouting");
}

#[test]
fn a_deleted_connection_leaves_the_fast_path_at_once_and_its_next_packet_is_tracked_anew() {
    let mut r = rig(NAT_RULES);
    handshake(&mut r);
    assert_eq!(r.nf.flowtables()[0].flows(1_300_000_000).len(), 1);
    let (_, sent) = r.send("w0", &c2s(ACK | PSH, 64, b"one"), 1.3);
    assert_eq!(sent[0].1, SendKind::Flow);
    // A filter that matches nothing deletes nothing.
    assert_eq!(r.nf.delete_conns(1_350_000_000, |e| e.mark == 7), 0);
    // By mark (the ruleset set 0x2a): the connection, its NAT binding and its flow go now.
    assert_eq!(r.nf.delete_conns(1_350_000_000, |e| e.mark == 0x2a), 1);
    assert_eq!(r.ct().len(), 0);
    assert!(r.nf.flowtables()[0].flows(1_360_000_000).is_empty());
    // The next packet takes the chains (no flow) and is tracked anew: a mid-stream ACK is
    // picked up as a new connection (nf_conntrack_tcp_loose), DNATed again by the rules.
    let (fate, sent) = r.send("w0", &c2s(ACK | PSH, 64, b"two"), 1.4);
    assert_eq!(fate, Fate::Sent);
    assert_eq!(
        sent[0].1,
        SendKind::Forward,
        "the chains, not the flowtable"
    );
    assert_eq!(
        read(&sent[0].2),
        (
            Ipv4Addr::from(ROUTER_OUT),
            40000,
            Ipv4Addr::from(S),
            80,
            63,
            true,
            true
        )
    );
    let e = r.ct().entries(1_400_000_000);
    assert_eq!(e.len(), 1, "tracked anew");
    assert_eq!(e[0].mark, 0x2a);
}

#[test]
fn ct_detail_keys_read_the_connection_of_every_packet() {
    // Only a connection whose reply comes from the server's port 80 passes: the port
    // forwarded one, all of its packets both ways (new, then established); the one to port 22
    // has another reply tuple and is dropped. Without the connection's detail every packet
    // would be dropped.
    let rules = r#"
table ip nat {
    chain pre {
        type nat hook prerouting priority dstnat; policy accept;
        tcp dport 8080 dnat to 10.2.0.2:80
    }
}
table ip filter {
    chain forward {
        type filter hook forward priority filter; policy drop;
        ct protocol tcp ct original ip saddr 10.1.0.2 ct reply ip saddr 10.2.0.2 ct reply proto-src 80 accept
    }
}
"#;
    let mut r = rig(rules);
    let (fate, _) = r.send("w0", &c2s(SYN, 64, b""), 1.0);
    assert_eq!(fate, Fate::Sent);
    let reply = tcp(SERVER, W1, S, C, 80, 40000, SYN | ACK, 64, b"");
    assert_eq!(r.send("w1", &reply, 1.1).0, Fate::Sent);
    assert_eq!(r.send("w0", &c2s(ACK, 64, b""), 1.2).0, Fate::Sent);
    assert_eq!(
        r.send("w0", &c2s(ACK | PSH, 64, b"data"), 1.3).0,
        Fate::Sent
    );
    let other = tcp(CLIENT, W0, C, S, 40001, 22, SYN, 64, b"");
    assert_eq!(
        r.send("w0", &other, 1.4).0,
        Fate::Dropped(DropReason::Verdict)
    );
}
