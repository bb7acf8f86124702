//! Text for trace events: verdict names and `log` lines (as nf_log_syslog writes them).

use std::fmt::Write;

use crate::compiled::{self, ChainId, Program};
use crate::packet::Packet;

/// A verdict as nft prints it (`accept`, `jump sub`, ...).
pub(crate) fn verdict_text(prog: &Program, v: Option<compiled::Verdict>) -> String {
    let name = |c: ChainId| prog.chains[c].name.as_str();
    match v {
        None | Some(compiled::Verdict::Continue) => "continue".into(),
        Some(compiled::Verdict::Accept) => "accept".into(),
        Some(compiled::Verdict::Drop) => "drop".into(),
        Some(compiled::Verdict::Return) => "return".into(),
        Some(compiled::Verdict::Jump(c)) => format!("jump {}", name(c)),
        Some(compiled::Verdict::Goto(c)) => format!("goto {}", name(c)),
        Some(compiled::Verdict::Stolen) => "stolen".into(),
    }
}

/// A compiled `log` statement: what its line needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Log {
    /// `prefix "..."` (empty without).
    pub prefix: String,
    /// `flags ...` ([`wasp_ruleset::model::LogFlags`] bits): `tcp sequence` adds SEQ= ACK=.
    pub flags: u8,
    /// `group N`: nflog (nfnetlink_log) in the kernel; wasp has no netlink listener, so the
    /// line is the same, ending with ` GROUP=N`.
    pub group: Option<u16>,
}

/// A `log` line as the kernel's nf_log_syslog writes it to the kernel log (nf_log_netdev_packet,
/// nf_log_ip_packet, nf_log_ip6_packet), without its trailing space: the prefix, `IN=` and
/// `OUT=` devices, `MAC=` the link header, then for IPv4 `SRC= DST= LEN= TOS= PREC= TTL= ID=`
/// (`CE DF MF`, `FRAG:`) and for IPv6 `SRC= DST= LEN= TC= HOPLIMIT= FLOWLBL=`, the transport
/// (`PROTO=TCP SPT= DPT= [SEQ= ACK=] WINDOW= RES= flags URGP=`, `PROTO=UDP SPT= DPT= LEN=`,
/// `PROTO=ICMP TYPE= CODE= [ID= SEQ=]`, `PROTO=ICMPv6 ...`, else `PROTO=N`), `MARK=0x..` when
/// the mark is set. A header cut short prints `INCOMPLETE [N bytes]` where the kernel does.
/// `mark` is `meta mark` at the statement; `oif` the output device (empty before routing).
pub(crate) fn log_text(l: &Log, p: &Packet<'_>, mark: u32, oif: &str) -> String {
    let mut s = String::with_capacity(200);
    let _ = write!(s, "{}IN={} OUT={oif} MAC=", l.prefix, p.iifname);
    let f = p.frame;
    let net = usize::from(p.meta.net_offset).min(f.len());
    // The link header the kernel keeps: destination, source and the type before the network
    // header (a popped VLAN tag is not in it).
    let mut mac: Vec<u8> = f[..net.min(12)].to_vec();
    if net >= 14 {
        mac.extend_from_slice(&f[net - 2..net]);
    }
    for (i, b) in mac.iter().enumerate() {
        let _ = write!(s, "{}{b:02x}", if i == 0 { "" } else { ":" });
    }
    s.push(' ');
    let ip = &f[net..];
    match p.meta.protocol {
        0x0800 => ipv4_text(&mut s, ip, l.flags),
        0x86dd => ipv6_text(&mut s, ip, p, l.flags),
        _ => {}
    }
    if mark != 0 {
        let _ = write!(s, "MARK=0x{mark:x} ");
    }
    if let Some(g) = l.group {
        let _ = write!(s, "GROUP={g} ");
    }
    s.truncate(s.trim_end().len());
    s
}

/// nf_log_dump_tcp_header / nf_log_dump_udp_header / the ICMP cases, for the transport header
/// `t` (the bytes from it to the end of the packet).
fn l4_text(s: &mut String, proto: u8, fragment: bool, t: &[u8], flags: u8, v6: bool) {
    let be16 = |o: usize| u16::from_be_bytes([t[o], t[o + 1]]);
    let be32 = |o: usize| u32::from_be_bytes([t[o], t[o + 1], t[o + 2], t[o + 3]]);
    match proto {
        6 => {
            s.push_str("PROTO=TCP ");
            if fragment {
                return;
            }
            if t.len() < 20 {
                let _ = write!(s, "INCOMPLETE [{} bytes] ", t.len());
                return;
            }
            let _ = write!(s, "SPT={} DPT={} ", be16(0), be16(2));
            if flags & wasp_ruleset::model::LogFlags::TCPSEQ != 0 {
                let _ = write!(s, "SEQ={} ACK={} ", be32(4), be32(8));
            }
            let _ = write!(s, "WINDOW={} RES=0x{:02x} ", be16(14), t[12] & 0x0f);
            for (bit, name) in [
                (0x80, "CWR"),
                (0x40, "ECE"),
                (0x20, "URG"),
                (0x10, "ACK"),
                (0x08, "PSH"),
                (0x04, "RST"),
                (0x02, "SYN"),
                (0x01, "FIN"),
            ] {
                if t[13] & bit != 0 {
                    let _ = write!(s, "{name} ");
                }
            }
            let _ = write!(s, "URGP={} ", be16(18));
        }
        17 | 136 => {
            s.push_str(if proto == 17 {
                "PROTO=UDP "
            } else {
                "PROTO=UDPLITE "
            });
            if fragment {
                return;
            }
            if t.len() < 8 {
                let _ = write!(s, "INCOMPLETE [{} bytes] ", t.len());
                return;
            }
            let _ = write!(s, "SPT={} DPT={} LEN={} ", be16(0), be16(2), be16(4));
        }
        1 | 58 if (proto == 1) != v6 => {
            s.push_str(if v6 { "PROTO=ICMPv6 " } else { "PROTO=ICMP " });
            if fragment {
                return;
            }
            if t.len() < 4 {
                let _ = write!(s, "INCOMPLETE [{} bytes] ", t.len());
                return;
            }
            let _ = write!(s, "TYPE={} CODE={} ", t[0], t[1]);
            let echo = if v6 {
                matches!(t[0], 128 | 129)
            } else {
                matches!(t[0], 0 | 8)
            };
            if echo && t.len() >= 8 {
                let _ = write!(s, "ID={} SEQ={} ", be16(4), be16(6));
            }
        }
        n => {
            let _ = write!(s, "PROTO={n} ");
        }
    }
}

fn ipv4_text(s: &mut String, ip: &[u8], flags: u8) {
    let Ok(h) = wasp_wire::ipv4::Packet::new_checked(ip) else {
        let _ = write!(s, "TRUNCATED ");
        return;
    };
    let (a, b) = (h.src(), h.dst());
    let _ = write!(
        s,
        "SRC={} DST={} LEN={} TOS=0x{:02X} PREC=0x{:02X} TTL={} ID={} ",
        std::net::Ipv4Addr::from(a),
        std::net::Ipv4Addr::from(b),
        h.total_len(),
        ip[1] & 0x1e,
        ip[1] & 0xe0,
        h.ttl(),
        h.ident()
    );
    let ff = h.flags_frag();
    for (bit, name) in [(0x8000, "CE"), (0x4000, "DF"), (0x2000, "MF")] {
        if ff & bit != 0 {
            let _ = write!(s, "{name} ");
        }
    }
    let frag = ff & 0x1fff;
    if frag != 0 {
        let _ = write!(s, "FRAG:{frag} ");
    }
    let end = usize::from(h.total_len()).clamp(h.header_len(), ip.len());
    l4_text(
        s,
        h.protocol(),
        frag != 0,
        &ip[h.header_len()..end],
        flags,
        false,
    );
}

fn ipv6_text(s: &mut String, ip: &[u8], p: &Packet<'_>, flags: u8) {
    let Ok(h) = wasp_wire::ipv6::Packet::new_checked(ip) else {
        let _ = write!(s, "TRUNCATED ");
        return;
    };
    let _ = write!(
        s,
        "SRC={} DST={} LEN={} TC={} HOPLIMIT={} FLOWLBL={} ",
        std::net::Ipv6Addr::from(h.src()),
        std::net::Ipv6Addr::from(h.dst()),
        usize::from(h.payload_len()) + 40,
        h.traffic_class(),
        h.hop_limit(),
        h.flow_label()
    );
    let Some(l4) = p.meta.l4 else { return };
    let at = usize::from(l4.offset).saturating_sub(usize::from(p.meta.net_offset));
    let end = (usize::from(h.payload_len()) + 40).min(ip.len());
    let t = ip.get(at..end.max(at)).unwrap_or(&[]);
    l4_text(s, l4.proto, l4.fragoff != 0, t, flags, true);
}
