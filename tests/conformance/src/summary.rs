//! One-line descriptions of frames for difference reports: a short decode of the headers
//! (Ethernet, tags, IPv4/IPv6, ports) plus a hex dump of the first bytes; tshark's one-line
//! summaries are added by [`tshark_lines`] when tshark is installed.

use std::fmt::Write;
use std::path::Path;
use std::process::Command;

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// A short decode of `frame`, e.g.
/// `74 B 02:00:00:00:00:01 > 02:00:00:00:00:02 vlan 6 ip 10.0.0.1 > 10.0.0.2 proto 17 ttl 64 5000 > 53`.
pub fn describe(frame: &[u8]) -> String {
    let mut s = format!("{} B", frame.len());
    if frame.len() < 14 {
        return s;
    }
    let mac = |m: &[u8]| {
        m.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    let _ = write!(s, " {} > {}", mac(&frame[6..12]), mac(&frame[0..6]));
    let mut at = 12;
    let mut et = be16(frame, at).unwrap_or(0);
    while et == 0x8100 || et == 0x88a8 {
        match be16(frame, at + 2) {
            Some(tci) => {
                let _ = write!(
                    s,
                    " {} {} pcp {}",
                    if et == 0x8100 { "vlan" } else { "qinq" },
                    tci & 0xfff,
                    tci >> 13
                );
            }
            None => {
                s.push_str(" [cut tag]");
                return s;
            }
        }
        at += 4;
        et = match be16(frame, at) {
            Some(e) => e,
            None => {
                s.push_str(" [cut type]");
                return s;
            }
        };
    }
    let l3 = &frame[at + 2..];
    match et {
        0x0800 if l3.len() >= 20 => {
            let ihl = usize::from(l3[0] & 0xf) * 4;
            let _ = write!(
                s,
                " ip {}.{}.{}.{} > {}.{}.{}.{} ver {} ihl {} len {} frag 0x{:04x} proto {} ttl {}",
                l3[12],
                l3[13],
                l3[14],
                l3[15],
                l3[16],
                l3[17],
                l3[18],
                l3[19],
                l3[0] >> 4,
                ihl,
                be16(l3, 2).unwrap_or(0),
                be16(l3, 6).unwrap_or(0),
                l3[9],
                l3[8]
            );
            if let (Some(sp), Some(dp)) = (be16(l3, ihl), be16(l3, ihl + 2)) {
                let _ = write!(s, " l4 {sp} > {dp}");
            }
        }
        0x86dd if l3.len() >= 40 => {
            let a = |o: usize| {
                (0..8)
                    .map(|i| format!("{:x}", be16(l3, o + 2 * i).unwrap_or(0)))
                    .collect::<Vec<_>>()
                    .join(":")
            };
            let _ = write!(
                s,
                " ip6 {} > {} plen {} next {} hlim {}",
                a(8),
                a(24),
                be16(l3, 4).unwrap_or(0),
                l3[6],
                l3[7]
            );
        }
        _ => {
            let _ = write!(s, " type 0x{et:04x}");
        }
    }
    s
}

/// Hex of the first `max` bytes of `frame`, space-separated.
pub fn hex(frame: &[u8], max: usize) -> String {
    let mut s: String = frame
        .iter()
        .take(max)
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ");
    if frame.len() > max {
        s.push_str(" ...");
    }
    s
}

/// tshark's one-line summary of each packet of `pcap` (index 0 = packet 1), or `None` when
/// tshark is not installed or fails.
pub fn tshark_lines(pcap: &Path) -> Option<Vec<String>> {
    let out = Command::new("tshark").arg("-r").arg(pcap).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().to_string())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_tagged_udp() {
        let f = crate::generate::ether(
            [2, 0, 0, 0, 0, 2],
            [2, 0, 0, 0, 0, 1],
            &[(0x8100, 6)],
            0x0800,
            &crate::generate::V4::new(17).build(&crate::generate::udp(5000, 53, b"", None)),
        );
        assert_eq!(
            describe(&f),
            "46 B 02:00:00:00:00:01 > 02:00:00:00:00:02 vlan 6 pcp 0 ip 10.0.0.1 > 10.0.0.2 \
             ver 4 ihl 20 len 28 frag 0x0000 proto 17 ttl 64 l4 5000 > 53"
        );
        assert_eq!(hex(&f, 4), "02 00 00 00 ...");
    }
}
