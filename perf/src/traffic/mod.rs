//! A deterministic traffic generator: Ethernet frames from a seed, written as pcap.
//!
//! - [`build`]: one frame from a [`build::PacketSpec`] (VLAN tags, IPv4/IPv6 with extension
//!   headers, ARP, TCP/UDP/ICMP/ICMPv6, correct lengths and checksums) and ways to damage it.
//! - [`generate`]: `count` frames of a [`Mix`] from a seed (the benchmark's input).
//! - [`office`]: the capture of `samples/firewall` (`office.pcap`), built so that every rule of
//!   the sample firewall is hit.
//! - [`pcap_bytes`] / [`write_pcap`]: classic pcap, microsecond timestamps, Ethernet.
//!
//! The same seed gives the same bytes on every machine: the generator uses its own
//! [`Rng`] (splitmix64), no platform randomness and no clock.

pub mod build;
pub mod office;

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;

use wasp_io::capture::{CaptureWriter, Format, OutFrame, TsResolution};

use build::{Damage, ExtHeader, Net, PacketSpec, Tag, Transport, damage, tcp_flags};

/// First timestamp of generated captures: 2024-03-01 09:00:00 UTC, in ns since the epoch.
pub const BASE_TS_NS: u64 = 1_709_283_600_000_000_000;

/// splitmix64 (Steele, Lea, Flood 2014): small, fast, and the same everywhere.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// `true` with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One element of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// What kind of traffic [`generate`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    /// Plain LAN traffic: IPv4 TCP 55 %, IPv4 UDP 20 %, IPv6 TCP/UDP 15 %, ICMP/ICMPv6 5 %,
    /// ARP 5 %; untagged, well formed.
    Lan,
    /// Every kind the generator knows, in equal parts: also VLAN stacks 0-3 deep (802.1Q and
    /// 802.1ad), IPv6 hop-by-hop/routing/fragment/destination headers, IPv4 options and
    /// fragments, other EtherTypes, and about 5 % malformed or truncated frames.
    All,
}

impl Mix {
    /// `lan` or `all`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "lan" => Some(Mix::Lan),
            "all" => Some(Mix::All),
            _ => None,
        }
    }
}

fn mac(rng: &mut Rng) -> [u8; 6] {
    let r = rng.next_u64().to_be_bytes();
    [0x02, r[0], r[1], r[2], r[3], r[4]]
}

fn v4(rng: &mut Rng) -> Ipv4Addr {
    let host = rng.range(1, 254) as u8;
    match rng.below(3) {
        0 => Ipv4Addr::new(10, rng.below(4) as u8, rng.below(256) as u8, host),
        1 => Ipv4Addr::new(192, 168, rng.below(4) as u8, host),
        _ => Ipv4Addr::new(
            rng.range(1, 223) as u8,
            rng.below(256) as u8,
            rng.below(256) as u8,
            host,
        ),
    }
}

fn v6(rng: &mut Rng) -> Ipv6Addr {
    let host = rng.next_u64();
    let prefix = *rng.pick(&[
        0x2001_0db8_0010_0000u64,
        0x2001_0db8_0020_0000,
        0xfe80_0000_0000_0000,
    ]);
    Ipv6Addr::from((u128::from(prefix) << 64) | u128::from(host & 0xffff_ffff))
}

fn port(rng: &mut Rng) -> u16 {
    if rng.chance(50) {
        *rng.pick(&[22, 25, 53, 80, 123, 443, 993, 3389, 5353, 8080])
    } else {
        rng.range(1024, 65535) as u16
    }
}

fn transport(rng: &mut Rng, v6: bool) -> Transport {
    match rng.below(3) {
        0 => Transport::tcp(
            port(rng),
            port(rng),
            *rng.pick(&[
                tcp_flags::SYN,
                tcp_flags::SYN | tcp_flags::ACK,
                tcp_flags::ACK,
                tcp_flags::PSH | tcp_flags::ACK,
                tcp_flags::FIN | tcp_flags::ACK,
                tcp_flags::RST,
            ]),
        ),
        1 => Transport::Udp {
            sport: port(rng),
            dport: port(rng),
        },
        _ if v6 => Transport::Icmpv6 {
            ty: *rng.pick(&[128, 129, 1, 135, 136, 133, 143]),
            code: 0,
            rest: [0, 1, 0, rng.below(256) as u8],
        },
        _ => Transport::Icmp {
            ty: *rng.pick(&[8, 0, 3, 11]),
            code: 0,
            rest: [0, 1, 0, rng.below(256) as u8],
        },
    }
}

fn lan_frame(rng: &mut Rng) -> Vec<u8> {
    let roll = rng.below(100);
    let (net, t) = if roll < 55 {
        (
            Net::v4(v4(rng), v4(rng)),
            Transport::tcp(port(rng), port(rng), tcp_flags::ACK),
        )
    } else if roll < 75 {
        (
            Net::v4(v4(rng), v4(rng)),
            Transport::Udp {
                sport: port(rng),
                dport: port(rng),
            },
        )
    } else if roll < 90 {
        let t = if rng.chance(60) {
            Transport::tcp(port(rng), port(rng), tcp_flags::ACK)
        } else {
            Transport::Udp {
                sport: port(rng),
                dport: port(rng),
            }
        };
        (Net::v6(v6(rng), v6(rng)), t)
    } else if roll < 95 {
        if rng.chance(50) {
            (Net::v4(v4(rng), v4(rng)), transport_icmp(rng, false))
        } else {
            (Net::v6(v6(rng), v6(rng)), transport_icmp(rng, true))
        }
    } else {
        let sha = mac(rng);
        let p = PacketSpec {
            dst_mac: [0xff; 6],
            src_mac: sha,
            tags: Vec::new(),
            net: Net::Arp {
                op: 1,
                sha,
                spa: v4(rng),
                tha: [0; 6],
                tpa: v4(rng),
            },
            transport: None,
            payload: Vec::new(),
        };
        return p.build();
    };
    let mut p = PacketSpec::new(net, Some(t));
    p.src_mac = mac(rng);
    p.dst_mac = mac(rng);
    p.payload = vec![0x61; rng.below(200) as usize];
    p.build()
}

fn transport_icmp(rng: &mut Rng, v6: bool) -> Transport {
    loop {
        let t = transport(rng, v6);
        if matches!(t, Transport::Icmp { .. } | Transport::Icmpv6 { .. }) {
            return t;
        }
    }
}

fn all_frame(rng: &mut Rng) -> Vec<u8> {
    let tags: Vec<Tag> = (0..rng.below(4))
        .map(|i| {
            if i == 0 && rng.chance(30) {
                Tag::ad(rng.range(1, 4094) as u16)
            } else {
                Tag::q(rng.range(1, 4094) as u16)
            }
        })
        .collect();
    let net_offset = 14 + 4 * tags.len();
    let kind = rng.below(6);
    let mut p = match kind {
        0 | 1 => {
            let mut net = Net::v4(v4(rng), v4(rng));
            if let Net::V4 {
                options,
                frag_offset,
                more_fragments,
                ttl,
                id,
                dscp,
                ..
            } = &mut net
            {
                *ttl = rng.range(1, 255) as u8;
                *id = rng.below(65536) as u16;
                *dscp = *rng.pick(&[0, 8, 10, 46]);
                if rng.chance(10) {
                    // Router alert option (RFC 2113).
                    *options = vec![0x94, 4, 0, 0];
                }
                if rng.chance(10) {
                    *more_fragments = rng.chance(50);
                    *frag_offset = if *more_fragments {
                        0
                    } else {
                        rng.range(1, 100) as u16
                    };
                }
            }
            PacketSpec::new(net, Some(transport(rng, false)))
        }
        2 | 3 => {
            let mut net = Net::v6(v6(rng), v6(rng));
            if let Net::V6 { ext, hop_limit, .. } = &mut net {
                *hop_limit = rng.range(1, 255) as u8;
                if rng.chance(20) {
                    ext.push(ExtHeader::HopByHop {
                        router_alert: rng.chance(50),
                    });
                }
                if rng.chance(15) {
                    ext.push(ExtHeader::Routing {
                        rtype: *rng.pick(&[0, 2, 4]),
                        segments_left: rng.below(3) as u8,
                        addresses: vec![v6(rng)],
                    });
                }
                if rng.chance(15) {
                    ext.push(ExtHeader::Fragment {
                        offset: if rng.chance(50) {
                            0
                        } else {
                            rng.range(1, 100) as u16
                        },
                        more: rng.chance(50),
                        id: rng.next_u64() as u32,
                    });
                }
                if rng.chance(15) {
                    ext.push(ExtHeader::DestOpts);
                }
            }
            PacketSpec::new(net, Some(transport(rng, true)))
        }
        4 => {
            let sha = mac(rng);
            PacketSpec::new(
                Net::Arp {
                    op: rng.range(1, 2) as u16,
                    sha,
                    spa: v4(rng),
                    tha: [0; 6],
                    tpa: v4(rng),
                },
                None,
            )
        }
        _ => PacketSpec::new(
            Net::Raw {
                ethertype: *rng.pick(&[0x8847, 0x88cc, 0x8863, 0x0842]),
                bytes: vec![0; 46],
            },
            None,
        ),
    };
    p.tags = tags;
    p.src_mac = mac(rng);
    p.dst_mac = mac(rng);
    p.payload = vec![0x62; rng.below(120) as usize];
    let f = p.build();
    if rng.chance(5) {
        let d = match rng.below(4) {
            0 => Damage::Truncate(rng.below(f.len() as u64) as usize),
            1 => Damage::Ipv4TotalLength(rng.below(65536) as u16),
            2 => Damage::Ipv4VersionIhl(rng.below(256) as u8),
            _ => Damage::Ipv6PayloadLength(rng.below(65536) as u16),
        };
        return damage(f, net_offset, d);
    }
    f
}

/// `count` frames of `mix` from `seed`, with timestamps from [`BASE_TS_NS`] at gaps of 1 µs
/// to 1 ms. The same arguments always give the same frames.
pub fn generate(seed: u64, count: usize, mix: Mix) -> Vec<(u64, Vec<u8>)> {
    let mut rng = Rng::new(seed);
    let mut ts = BASE_TS_NS;
    (0..count)
        .map(|_| {
            ts += rng.range(1, 1000) * 1_000;
            let f = match mix {
                Mix::Lan => lan_frame(&mut rng),
                Mix::All => all_frame(&mut rng),
            };
            (ts, f)
        })
        .collect()
}

/// A classic pcap file (little-endian, microsecond timestamps, snap length 262144, Ethernet)
/// holding `frames` as `(timestamp ns, bytes)`, made by wasp-io's capture writer.
///
/// # Panics
/// When a frame is longer than the snap length or stamped after 2106 (the generator makes
/// neither).
pub fn pcap_bytes(frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut w = CaptureWriter::new(
        Path::new("<memory>"),
        Vec::new(),
        Format::Pcap,
        TsResolution::Micro,
    )
    .expect("a header in memory");
    for (ts, f) in frames {
        w.write(&OutFrame::new(*ts, f))
            .expect("generated frames fit a pcap");
    }
    w.finish().expect("a capture in memory")
}

/// Write `frames` to `path` as pcap (see [`pcap_bytes`]).
///
/// # Errors
/// The I/O error of creating or writing the file.
pub fn write_pcap(path: &Path, frames: &[(u64, Vec<u8>)]) -> io::Result<()> {
    std::fs::write(path, pcap_bytes(frames))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_frames_other_seed_other_frames() {
        let a = generate(7, 200, Mix::All);
        let b = generate(7, 200, Mix::All);
        let c = generate(8, 200, Mix::All);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.len(), 200);
        assert!(a.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn splitmix64_reference_values() {
        // First outputs of splitmix64 seeded with 0 (the reference C implementation).
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn all_mix_has_vlans_ext_headers_and_damage() {
        let frames = generate(1, 2000, Mix::All);
        let tagged = frames
            .iter()
            .filter(|(_, f)| f.len() >= 14 && (f[12..14] == [0x81, 0] || f[12..14] == [0x88, 0xa8]))
            .count();
        let triple = frames
            .iter()
            .filter(|(_, f)| f.len() >= 22 && f[16..18] == [0x81, 0] && f[20..22] == [0x81, 0])
            .count();
        assert!(tagged > 500, "{tagged}");
        assert!(triple > 50, "{triple}");
    }

    #[test]
    fn pcap_layout() {
        let b = pcap_bytes(&[(BASE_TS_NS + 1_500, vec![1, 2, 3])]);
        assert_eq!(b.len(), 24 + 16 + 3);
        assert_eq!(&b[24..28], &1_709_283_600u32.to_le_bytes());
        assert_eq!(&b[28..32], &1u32.to_le_bytes());
    }
}
