//! `--trace` output in the form of `nft monitor trace` (nftables 1.0.6), for example:
//!
//! ```text
//! trace id 00000001 netdev office ingress packet: iif "lan0" ether saddr 00:01:02:03:04:05 ether daddr ff:ff:ff:ff:ff:ff ip saddr 10.0.0.1 ...
//! trace id 00000001 netdev office ingress rule ip saddr 10.0.0.0/8 jump lan (verdict jump lan)
//! trace id 00000001 netdev office lan rule udp dport 53 accept (verdict accept)
//! trace id 00000002 netdev office ingress policy drop
//! ```
//!
//! As in the kernel (`nft_trace_packet` dumps the headers once per base chain walk), a
//! `packet:` line opens each base chain's walk. An implicit return from a regular chain prints
//! nothing, as nft 1.0.6 prints nothing for it. The trace id is the packet's index in the run
//! (the kernel uses a hash of the skb), in 8 hex digits. `log` statements print
//! `trace id ID log TEXT`.

use std::fmt::Write as _;

use wasp_core::{FinalVerdict, TraceEvent, TraceSink};
use wasp_wire::{L3Kind, PacketMeta};

use crate::names::Names;

/// A [`TraceSink`] that keeps the events of one vector, to be read back per packet.
#[derive(Debug, Default)]
pub struct Collector {
    events: Vec<TraceEvent>,
}

impl TraceSink for Collector {
    fn event(&mut self, ev: TraceEvent) {
        self.events.push(ev);
    }
}

impl Collector {
    /// Remove and return the events, grouped by packet index in the vector (ascending), each
    /// packet's events in the order they happened.
    pub fn take_by_packet(&mut self, packets: usize) -> Vec<Vec<TraceEvent>> {
        let mut out: Vec<Vec<TraceEvent>> = vec![Vec::new(); packets];
        for ev in self.events.drain(..) {
            let p = ev.packet();
            if let Some(slot) = out.get_mut(p) {
                slot.push(ev);
            }
        }
        out
    }
}

/// A [`TraceSink`] that keeps only the lines of `log` statements, in the order they ran,
/// with the packet (index in its vector) of each; the engine makes no other event for it
/// ([`TraceSink::walk`] is `false`), so it costs nothing on rules without `log`. What
/// `wasp replay` prints on standard error and the daemon's workers publish.
#[derive(Debug, Default)]
pub struct LogLines {
    /// (packet index in its vector, the line as the kernel log would show it).
    pub lines: Vec<(usize, String)>,
}

impl TraceSink for LogLines {
    fn event(&mut self, ev: TraceEvent) {
        if let TraceEvent::Log { packet, text } = ev {
            self.lines.push((packet, text));
        }
    }

    fn walk(&self) -> bool {
        false
    }
}

/// A [`TraceSink`] of the packets `meta nftrace set 1` marked (what `nft monitor trace`
/// shows; [`TraceSink::marked_only`]) and of every packet's `log` lines, kept for one vector
/// and read back per packet. The events are grouped by packet once, at the first read; what
/// comes after (a packet's IP hooks, just before its turn) goes to its packet's group.
#[derive(Debug, Default)]
pub struct Marked {
    events: Vec<TraceEvent>,
    by_packet: Vec<Vec<TraceEvent>>,
    grouped: bool,
}

impl TraceSink for Marked {
    fn event(&mut self, ev: TraceEvent) {
        if self.grouped {
            self.group(ev);
        } else {
            self.events.push(ev);
        }
    }

    fn marked_only(&self) -> bool {
        true
    }
}

impl Marked {
    fn group(&mut self, ev: TraceEvent) {
        let p = ev.packet();
        if self.by_packet.len() <= p {
            self.by_packet.resize_with(p + 1, Vec::new);
        }
        self.by_packet[p].push(ev);
    }

    /// Remove and return packet `packet`'s events (index in its vector): its `log` lines and
    /// its walk events, each in the order they happened.
    pub fn take_packet(&mut self, packet: usize) -> (Vec<String>, Vec<TraceEvent>) {
        if !self.grouped {
            self.grouped = true;
            for ev in std::mem::take(&mut self.events) {
                self.group(ev);
            }
        }
        let walk = self
            .by_packet
            .get_mut(packet)
            .map(std::mem::take)
            .unwrap_or_default();
        let logs = walk
            .iter()
            .filter_map(|ev| match ev {
                TraceEvent::Log { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect();
        (logs, walk)
    }

    /// Forget what is left (the vector is done).
    pub fn clear(&mut self) {
        self.events.clear();
        self.by_packet.clear();
        self.grouped = false;
    }
}

/// The (table, chain) an event happened in, if it names one.
pub fn event_chain(ev: &TraceEvent) -> Option<(u32, u32)> {
    match ev {
        TraceEvent::Rule { table, chain, .. } | TraceEvent::ChainEnd { table, chain, .. } => {
            Some((*table, *chain))
        }
        TraceEvent::Log { .. } | TraceEvent::Plugin { .. } => None,
    }
}

/// The base chains a packet's walk went through, in order, from its events.
pub fn base_chains_walked(events: &[TraceEvent], names: &Names) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for ev in events {
        if let Some((t, c)) = event_chain(ev)
            && names.is_base(t, c)
            && out.last() != Some(&(t, c))
        {
            out.push((t, c));
        }
    }
    out
}

/// Format the trace lines of one packet (`id` is its index in the run, counted from 1).
pub fn format_packet_trace(
    id: u64,
    events: &[TraceEvent],
    names: &Names,
    iif: &str,
    frame: &[u8],
    meta: &PacketMeta,
) -> String {
    format_trace(id, events, names, &describe_packet(iif, frame, meta))
}

/// Format the trace lines of one packet whose `packet:` lines say `packet_desc`
/// ([`describe_packet`]).
pub fn format_trace(id: u64, events: &[TraceEvent], names: &Names, packet_desc: &str) -> String {
    let mut s = String::new();
    let mut current_base: Option<(u32, u32)> = None;
    for (i, ev) in events.iter().enumerate() {
        // A log line comes before its rule's event: open the walk with the packet line of the
        // next event's chain first.
        let chain = match ev {
            TraceEvent::Log { .. } | TraceEvent::Plugin { .. } if current_base.is_none() => {
                events[i..].iter().find_map(event_chain)
            }
            _ => event_chain(ev),
        };
        if let Some((t, c)) = chain
            && names.is_base(t, c)
            && current_base != Some((t, c))
        {
            current_base = Some((t, c));
            let _ = writeln!(
                s,
                "trace id {id:08x} {} {} {} packet: {packet_desc}",
                names.family(t),
                names.table(t),
                names.chain(t, c)
            );
        }
        match ev {
            TraceEvent::Rule {
                table,
                chain,
                handle,
                verdict,
                ..
            } => {
                let _ = writeln!(
                    s,
                    "trace id {id:08x} {} {} {} rule {} (verdict {verdict})",
                    names.family(*table),
                    names.table(*table),
                    names.chain(*table, *chain),
                    names.rule_text(*table, *chain, *handle)
                );
            }
            TraceEvent::ChainEnd {
                table,
                chain,
                policy: Some(p),
                ..
            } => {
                let p = match p {
                    FinalVerdict::Accept => "accept",
                    FinalVerdict::Drop => "drop",
                };
                let _ = writeln!(
                    s,
                    "trace id {id:08x} {} {} {} policy {p}",
                    names.family(*table),
                    names.table(*table),
                    names.chain(*table, *chain)
                );
            }
            TraceEvent::ChainEnd { policy: None, .. } => {}
            TraceEvent::Log { text, .. } => {
                let _ = writeln!(s, "trace id {id:08x} log {text}");
            }
            TraceEvent::Plugin { site, result, .. } => {
                let _ = writeln!(
                    s,
                    "trace id {id:08x} plugin {}: {result}",
                    names.site_text(*site)
                );
            }
        }
    }
    s
}

fn be16(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(off)?, *b.get(off + 1)?]))
}

fn be32(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_be_bytes([
        *b.get(off)?,
        *b.get(off + 1)?,
        *b.get(off + 2)?,
        *b.get(off + 3)?,
    ]))
}

fn mac(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// nft's names for DSCP values (`nft describe dscp`).
fn dscp_name(v: u8) -> String {
    let named = match v {
        0 => "cs0",
        8 => "cs1",
        16 => "cs2",
        24 => "cs3",
        32 => "cs4",
        40 => "cs5",
        48 => "cs6",
        56 => "cs7",
        10 => "af11",
        12 => "af12",
        14 => "af13",
        18 => "af21",
        20 => "af22",
        22 => "af23",
        26 => "af31",
        28 => "af32",
        30 => "af33",
        34 => "af41",
        36 => "af42",
        38 => "af43",
        46 => "ef",
        _ => return format!("0x{v:02x}"),
    };
    named.to_string()
}

fn ecn_name(v: u8) -> &'static str {
    match v & 3 {
        0 => "not-ect",
        1 => "ect1",
        2 => "ect0",
        _ => "ce",
    }
}

/// Protocol names as nft prints `ip protocol` / `ip6 nexthdr` (from /etc/protocols).
fn proto_name(p: u8) -> String {
    let named = match p {
        0 => "hopopt",
        1 => "icmp",
        2 => "igmp",
        6 => "tcp",
        17 => "udp",
        41 => "ipv6",
        43 => "ipv6-route",
        44 => "ipv6-frag",
        47 => "gre",
        50 => "esp",
        51 => "ah",
        58 => "ipv6-icmp",
        59 => "ipv6-nonxt",
        60 => "ipv6-opts",
        132 => "sctp",
        136 => "udplite",
        _ => return p.to_string(),
    };
    named.to_string()
}

fn icmp_type_name(t: u8) -> String {
    let named = match t {
        0 => "echo-reply",
        3 => "destination-unreachable",
        4 => "source-quench",
        5 => "redirect",
        8 => "echo-request",
        9 => "router-advertisement",
        10 => "router-solicitation",
        11 => "time-exceeded",
        12 => "parameter-problem",
        13 => "timestamp-request",
        14 => "timestamp-reply",
        15 => "info-request",
        16 => "info-reply",
        17 => "address-mask-request",
        18 => "address-mask-reply",
        _ => return t.to_string(),
    };
    named.to_string()
}

fn icmp_code_name(c: u8) -> String {
    let named = match c {
        0 => "net-unreachable",
        1 => "host-unreachable",
        2 => "prot-unreachable",
        3 => "port-unreachable",
        4 => "frag-needed",
        9 => "net-prohibited",
        10 => "host-prohibited",
        13 => "admin-prohibited",
        _ => return c.to_string(),
    };
    named.to_string()
}

fn icmpv6_type_name(t: u8) -> String {
    let named = match t {
        1 => "destination-unreachable",
        2 => "packet-too-big",
        3 => "time-exceeded",
        4 => "parameter-problem",
        128 => "echo-request",
        129 => "echo-reply",
        130 => "mld-listener-query",
        131 => "mld-listener-report",
        132 => "mld-listener-done",
        133 => "nd-router-solicit",
        134 => "nd-router-advert",
        135 => "nd-neighbor-solicit",
        136 => "nd-neighbor-advert",
        137 => "nd-redirect",
        138 => "router-renumbering",
        141 => "ind-neighbor-solicit",
        142 => "ind-neighbor-advert",
        143 => "mld2-listener-report",
        _ => return t.to_string(),
    };
    named.to_string()
}

fn icmpv6_code_name(c: u8) -> String {
    let named = match c {
        0 => "no-route",
        1 => "admin-prohibited",
        3 => "addr-unreachable",
        4 => "port-unreachable",
        5 => "policy-fail",
        6 => "reject-route",
        _ => return c.to_string(),
    };
    named.to_string()
}

fn tcp_flags(f: u8) -> String {
    const NAMES: [(u8, &str); 8] = [
        (0x01, "fin"),
        (0x02, "syn"),
        (0x04, "rst"),
        (0x08, "psh"),
        (0x10, "ack"),
        (0x20, "urg"),
        (0x40, "ecn"),
        (0x80, "cwr"),
    ];
    let set: Vec<&str> = NAMES
        .iter()
        .filter(|(bit, _)| f & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    if set.is_empty() {
        "0x0".to_string()
    } else {
        set.join(" | ")
    }
}

fn ipv6(b: &[u8]) -> String {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[..16]);
    std::net::Ipv6Addr::from(a).to_string()
}

/// Bytes of the transport header that the kernel puts in a trace (`NFT_TRACETYPE_TRANSPORT_HSIZE`
/// in nf_tables_trace.c).
const TRACE_TRANSPORT_BYTES: usize = 20;

/// The transport bytes after the `known` header bytes that the kernel's trace carries, printed
/// as nft prints what it cannot name: `@th,OFFSET_BITS,LEN_BITS 0xHEX`.
fn raw_rest(s: &mut String, frame: &[u8], th: usize, known: usize) {
    let end = frame.len().min(th + TRACE_TRANSPORT_BYTES);
    let Some(rest) = frame.get(th + known..end) else {
        return;
    };
    if rest.is_empty() {
        return;
    }
    let hex: String = rest.iter().map(|b| format!("{b:02x}")).collect();
    let _ = write!(s, " @th,{},{} 0x{hex}", known * 8, rest.len() * 8);
}

/// The `packet:` part of a trace line: the input interface and the headers, in the words nft
/// uses (`ether saddr ...`, `ip saddr ...`, `tcp dport ...`). Fields that are cut off by the
/// end of the capture are left out.
pub fn describe_packet(iif: &str, frame: &[u8], meta: &PacketMeta) -> String {
    let mut s = format!("iif \"{iif}\"");
    if frame.len() >= 14 {
        let _ = write!(
            s,
            " ether saddr {} ether daddr {}",
            mac(&frame[6..12]),
            mac(&frame[0..6])
        );
    }
    for tag in meta.vlans.iter().take(meta.vlan_count as usize) {
        let _ = write!(
            s,
            " vlan pcp {} vlan dei {} vlan id {}",
            tag.tci >> 13,
            (tag.tci >> 12) & 1,
            tag.tci & 0x0fff
        );
    }
    let off = meta.net_offset as usize;
    match meta.l3 {
        L3Kind::Ipv4 if frame.len() >= off + 20 => {
            let h = &frame[off..];
            let _ = write!(
                s,
                " ip saddr {} ip daddr {} ip dscp {} ip ecn {} ip ttl {} ip id {} ip protocol {} ip length {}",
                std::net::Ipv4Addr::new(h[12], h[13], h[14], h[15]),
                std::net::Ipv4Addr::new(h[16], h[17], h[18], h[19]),
                dscp_name(h[1] >> 2),
                ecn_name(h[1]),
                h[8],
                u16::from_be_bytes([h[4], h[5]]),
                proto_name(h[9]),
                u16::from_be_bytes([h[2], h[3]])
            );
        }
        L3Kind::Ipv6 if frame.len() >= off + 40 => {
            let h = &frame[off..];
            let tc = ((h[0] & 0x0f) << 4) | (h[1] >> 4);
            let flow = (u32::from(h[1] & 0x0f) << 16) | (u32::from(h[2]) << 8) | u32::from(h[3]);
            let _ = write!(
                s,
                " ip6 saddr {} ip6 daddr {} ip6 dscp {} ip6 ecn {} ip6 hoplimit {} ip6 flowlabel {} ip6 nexthdr {} ip6 length {}",
                ipv6(&h[8..24]),
                ipv6(&h[24..40]),
                dscp_name(tc >> 2),
                ecn_name(tc),
                h[7],
                flow,
                proto_name(h[6]),
                u16::from_be_bytes([h[4], h[5]])
            );
        }
        L3Kind::Arp if frame.len() >= off + 8 => {
            // nft prints only the operation: the hardware/protocol types and lengths are the
            // dependency it implies.
            let op = match be16(frame, off + 6).unwrap_or(0) {
                1 => "request".to_string(),
                2 => "reply".to_string(),
                o => o.to_string(),
            };
            let _ = write!(s, " arp operation {op}");
        }
        _ => {
            if let Some(t) = be16(frame, 12) {
                let _ = write!(s, " ether type 0x{t:04x}");
            }
        }
    }
    if let Some(l4) = meta.l4
        && l4.fragoff == 0
    {
        let o = l4.offset as usize;
        match l4.proto {
            6 => {
                if let (Some(sp), Some(dp), Some(fl), Some(win)) = (
                    be16(frame, o),
                    be16(frame, o + 2),
                    frame.get(o + 13),
                    be16(frame, o + 14),
                ) {
                    let _ = write!(
                        s,
                        " tcp sport {sp} tcp dport {dp} tcp flags == {} tcp window {win}",
                        tcp_flags(*fl)
                    );
                }
            }
            17 => {
                if let (Some(sp), Some(dp), Some(len)) =
                    (be16(frame, o), be16(frame, o + 2), be16(frame, o + 4))
                {
                    let _ = write!(s, " udp sport {sp} udp dport {dp} udp length {len}");
                    raw_rest(&mut s, frame, o, 8);
                }
            }
            1 => {
                if let (Some(t), Some(c)) = (frame.get(o), frame.get(o + 1)) {
                    let _ = write!(
                        s,
                        " icmp type {} icmp code {}",
                        icmp_type_name(*t),
                        icmp_code_name(*c)
                    );
                    if matches!(t, 0 | 8)
                        && let Some(idseq) = be32(frame, o + 4)
                    {
                        let _ = write!(
                            s,
                            " icmp id {} icmp sequence {}",
                            idseq >> 16,
                            idseq & 0xffff
                        );
                        raw_rest(&mut s, frame, o, 8);
                    }
                }
            }
            58 => {
                if let (Some(t), Some(c)) = (frame.get(o), frame.get(o + 1)) {
                    let _ = write!(
                        s,
                        " icmpv6 type {} icmpv6 code {}",
                        icmpv6_type_name(*t),
                        icmpv6_code_name(*c)
                    );
                    if matches!(t, 128 | 129)
                        && let Some(idseq) = be32(frame, o + 4)
                    {
                        let _ = write!(
                            s,
                            " icmpv6 id {} icmpv6 sequence {}",
                            idseq >> 16,
                            idseq & 0xffff
                        );
                        raw_rest(&mut s, frame, o, 8);
                    }
                }
            }
            _ => {}
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasp_wire::L4Info;

    fn rule(packet: usize, handle: u64) -> TraceEvent {
        TraceEvent::Rule {
            packet,
            table: 0,
            chain: 0,
            handle,
            verdict: "continue".into(),
        }
    }

    /// Each packet gets its own events in the order they came, its `log` lines apart, also
    /// those that come after the first read (its IP hooks), and nothing of another packet.
    #[test]
    fn marked_gives_each_packet_its_events() {
        let mut m = Marked::default();
        for ev in [
            rule(1, 2),
            rule(0, 2),
            TraceEvent::Log {
                packet: 1,
                text: "one".into(),
            },
            rule(1, 3),
            rule(0, 4),
        ] {
            m.event(ev);
        }
        let handles = |w: &[TraceEvent]| -> Vec<u64> {
            w.iter()
                .filter_map(|e| match e {
                    TraceEvent::Rule { handle, .. } => Some(*handle),
                    _ => None,
                })
                .collect()
        };
        let (logs, walk) = m.take_packet(0);
        assert!(logs.is_empty());
        assert_eq!(handles(&walk), [2, 4]);
        m.event(rule(1, 9));
        let (logs, walk) = m.take_packet(1);
        assert_eq!(logs, ["one"]);
        assert_eq!(walk.len(), 4);
        assert_eq!(handles(&walk), [2, 3, 9]);
        assert!(m.take_packet(1).1.is_empty(), "taken once");
        m.clear();
        m.event(rule(0, 5));
        assert_eq!(
            handles(&m.take_packet(0).1),
            [5],
            "a new vector starts empty"
        );
    }

    /// The TCP SYN of the `nft monitor trace` run recorded in this module's docs (netdev
    /// ingress on a veth, nftables 1.0.6): the same header words, in the same order.
    #[test]
    fn tcp_syn_reads_like_nft_monitor_trace() {
        let mut f = vec![
            0x02, 0, 0, 0, 0, 0x02, 0x5e, 0xf1, 0xd9, 0xe6, 0x38, 0x4b, 0x08, 0x00,
        ];
        // IPv4: len 60, id 750, ttl 64, tcp, 10.9.0.1 -> 10.9.0.2
        f.extend_from_slice(&[
            0x45, 0x00, 0x00, 0x3c, 0x02, 0xee, 0x40, 0x00, 0x40, 0x06, 0, 0, 10, 9, 0, 1, 10, 9,
            0, 2,
        ]);
        // TCP 50038 -> 80 SYN, window 64240
        f.extend_from_slice(&[
            0xc3, 0x76, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0xa0, 0x02, 0xfa, 0xf0, 0, 0, 0, 0,
        ]);
        f.extend_from_slice(&[0; 20]);
        let meta = PacketMeta {
            len: f.len() as u32,
            protocol: 0x0800,
            net_offset: 14,
            l3: L3Kind::Ipv4,
            l4: Some(L4Info {
                proto: 6,
                offset: 34,
                fragoff: 0,
            }),
            ..PacketMeta::default()
        };
        assert_eq!(
            describe_packet("a1", &f, &meta),
            "iif \"a1\" ether saddr 5e:f1:d9:e6:38:4b ether daddr 02:00:00:00:00:02 ip saddr 10.9.0.1 ip daddr 10.9.0.2 ip dscp cs0 ip ecn not-ect ip ttl 64 ip id 750 ip protocol tcp ip length 60 tcp sport 50038 tcp dport 80 tcp flags == syn tcp window 64240"
        );
    }

    #[test]
    fn events_are_grouped_per_packet_in_order() {
        let mut c = Collector::default();
        let rule = |packet, handle| TraceEvent::Rule {
            packet,
            table: 0,
            chain: 0,
            handle,
            verdict: "continue".to_string(),
        };
        c.event(rule(1, 4));
        c.event(rule(0, 4));
        c.event(rule(1, 5));
        c.event(rule(7, 5)); // out of range: ignored
        let g = c.take_by_packet(2);
        assert_eq!(g[0], vec![rule(0, 4)]);
        assert_eq!(g[1], vec![rule(1, 4), rule(1, 5)]);
    }
}
