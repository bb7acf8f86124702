//! Text for trace events: verdict names and `log` lines.

use std::fmt::Write;

use crate::engine::Packet;
use crate::program::{Program, VerdictC};

/// A verdict as nft prints it (`accept`, `jump sub`, ...).
pub(crate) fn verdict_text(prog: &Program, v: Option<VerdictC>) -> String {
    let name = |c: u32| prog.chains[c as usize].name.as_str();
    match v {
        None | Some(VerdictC::Continue) => "continue".into(),
        Some(VerdictC::Accept) => "accept".into(),
        Some(VerdictC::Drop) => "drop".into(),
        Some(VerdictC::Return) => "return".into(),
        Some(VerdictC::Jump(c)) => format!("jump {}", name(c)),
        Some(VerdictC::Goto(c)) => format!("goto {}", name(c)),
        Some(VerdictC::Stolen) => "stolen".into(),
    }
}

/// A `log` line in the shape of the kernel's netdev log (nf_log_syslog): the prefix, the
/// devices, the MAC header, and for IPv4/IPv6 the addresses, protocol and ports.
pub(crate) fn log_text(prefix: &str, p: &Packet<'_>, oif: &str) -> String {
    let mut s = String::with_capacity(160);
    let _ = write!(s, "{prefix}IN={} OUT={oif} MAC=", p.iifname);
    let mac = &p.frame[..p.frame.len().min(14)];
    for (i, b) in mac.iter().enumerate() {
        let _ = write!(s, "{}{b:02x}", if i == 0 { "" } else { ":" });
    }
    let net = usize::from(p.meta.net_offset);
    let f = p.frame;
    let proto = match p.meta.protocol {
        0x0800 if f.len() >= net + 20 => {
            let _ = write!(
                s,
                " SRC={}.{}.{}.{} DST={}.{}.{}.{} LEN={} TTL={}",
                f[net + 12],
                f[net + 13],
                f[net + 14],
                f[net + 15],
                f[net + 16],
                f[net + 17],
                f[net + 18],
                f[net + 19],
                u16::from_be_bytes([f[net + 2], f[net + 3]]),
                f[net + 8]
            );
            Some(f[net + 9])
        }
        0x86dd if f.len() >= net + 40 => {
            let a = |o: usize| {
                let mut b = [0u8; 16];
                b.copy_from_slice(&f[net + o..net + o + 16]);
                std::net::Ipv6Addr::from(b)
            };
            let _ = write!(
                s,
                " SRC={} DST={} LEN={} HOPLIMIT={}",
                a(8),
                a(24),
                u16::from_be_bytes([f[net + 4], f[net + 5]]) as usize + 40,
                f[net + 7]
            );
            Some(f[net + 6])
        }
        _ => None,
    };
    if proto.is_some()
        && let Some(l4) = p.meta.l4
    {
        let name = match l4.proto {
            6 => "TCP".to_string(),
            17 => "UDP".to_string(),
            1 => "ICMP".to_string(),
            58 => "ICMPv6".to_string(),
            n => n.to_string(),
        };
        let _ = write!(s, " PROTO={name}");
        let t = usize::from(l4.offset);
        if matches!(l4.proto, 6 | 17) && l4.fragoff == 0 && f.len() >= t + 4 {
            let _ = write!(
                s,
                " SPT={} DPT={}",
                u16::from_be_bytes([f[t], f[t + 1]]),
                u16::from_be_bytes([f[t + 2], f[t + 3]])
            );
        }
    }
    s
}
