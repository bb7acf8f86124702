//! The capture of `samples/firewall` (`office.pcap`): traffic on the office switch port
//! "lan0", built so that every rule and the policy of `samples/firewall/firewall.nft` decide at
//! least one packet.
//!
//! [`CLASSES`] lists the packet classes in the order of the ruleset, each with the verdict the
//! kernel gives it under that ruleset (`<verdict> <chain> <handle|policy>`, handles as
//! `nft -a list ruleset` numbers them for `firewall.nft`). [`office`] emits every class once,
//! in that order, then a seeded random pick of the well-formed classes (with random ephemeral
//! ports, hosts inside the same zone, payload sizes and gaps) up to [`OFFICE_PACKETS`] frames.
//! [`expected_verdicts`] gives the verdict lines `wasp replay --verdicts` must write for it.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::build::{Damage, ExtHeader, Net, PacketSpec, Tag, Transport, damage, tcp_flags};
use super::{BASE_TS_NS, Rng};

/// Seed of the committed `office.pcap`.
pub const OFFICE_SEED: u64 = 2024;
/// Frames in the committed `office.pcap`.
pub const OFFICE_PACKETS: usize = 300;
/// Table name in `firewall.nft`.
pub const TABLE: &str = "office";

/// One class of office traffic.
#[derive(Debug, Clone, Copy)]
pub struct Class {
    /// What the packet is.
    pub what: &'static str,
    /// The kernel's verdict under `firewall.nft`: `<accept|drop> <chain> <handle|policy>`.
    pub expect: &'static str,
    /// Whether the random fill may repeat it (malformed classes appear once).
    pub repeat: bool,
    build: fn(&mut Rng) -> Vec<u8>,
}

impl Class {
    /// Build one frame of this class.
    pub fn frame(&self, rng: &mut Rng) -> Vec<u8> {
        (self.build)(rng)
    }
}

const GW_MAC: [u8; 6] = [0x02, 0x00, 0x5e, 0x00, 0x00, 0x01];

fn staff(rng: &mut Rng) -> Ipv4Addr {
    Ipv4Addr::new(172, 16, 238, rng.range(100, 129) as u8)
}

fn guest(rng: &mut Rng) -> Ipv4Addr {
    Ipv4Addr::new(10, 30, 0, rng.range(10, 250) as u8)
}

fn eph(rng: &mut Rng) -> u16 {
    rng.range(32768, 60999) as u16
}

const SERVER: Ipv4Addr = Ipv4Addr::new(172, 16, 238, 131);
const RESOLVER: Ipv4Addr = Ipv4Addr::new(172, 16, 238, 2);
const WEB: Ipv4Addr = Ipv4Addr::new(93, 184, 216, 34);
const NTP: Ipv4Addr = Ipv4Addr::new(162, 159, 200, 1);
const PUBDNS: Ipv4Addr = Ipv4Addr::new(8, 8, 8, 8);
const SCANNER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

fn staff6(rng: &mut Rng) -> Ipv6Addr {
    Ipv6Addr::new(
        0x2001,
        0xdb8,
        0x10,
        0,
        0,
        0,
        0,
        rng.range(0x20, 0x7f) as u16,
    )
}

fn ll6(rng: &mut Rng) -> Ipv6Addr {
    Ipv6Addr::new(
        0xfe80,
        0,
        0,
        0,
        0x0200,
        0x5eff,
        0xfe00,
        rng.range(0x100, 0x1ff) as u16,
    )
}

const CF6: Ipv6Addr = Ipv6Addr::new(0x2606, 0x4700, 0, 0, 0, 0, 0, 0x1111);
const FOREIGN6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x99, 0, 0, 0, 0, 0x25);

/// A frame from a host MAC to the gateway, with `tags`, `net`, `t` and a payload of random size
/// up to `max_payload` bytes.
fn frame(
    rng: &mut Rng,
    tags: Vec<Tag>,
    net: Net,
    t: Option<Transport>,
    max_payload: u64,
) -> Vec<u8> {
    let r = rng.next_u64().to_be_bytes();
    let mut p = PacketSpec::new(net, t);
    p.src_mac = [0x02, 0x10, r[0], r[1], r[2], r[3]];
    p.dst_mac = GW_MAC;
    p.tags = tags;
    if let Net::V4 { id, .. } = &mut p.net {
        *id = rng.below(65536) as u16;
    }
    p.payload = vec![0x6f; rng.below(max_payload + 1) as usize];
    p.build()
}

fn v4(rng: &mut Rng, tags: Vec<Tag>, src: Ipv4Addr, dst: Ipv4Addr, t: Transport) -> Vec<u8> {
    frame(rng, tags, Net::v4(src, dst), Some(t), 400)
}

fn v6(rng: &mut Rng, src: Ipv6Addr, dst: Ipv6Addr, ext: Vec<ExtHeader>, t: Transport) -> Vec<u8> {
    let net = Net::V6 {
        src,
        dst,
        hop_limit: 64,
        flow_label: rng.below(1 << 20) as u32,
        ext,
    };
    frame(rng, Vec::new(), net, Some(t), 300)
}

fn tcp(sport: u16, dport: u16, flags: u8) -> Transport {
    Transport::tcp(sport, dport, flags)
}

fn udp(sport: u16, dport: u16) -> Transport {
    Transport::Udp { sport, dport }
}

fn icmp(ty: u8) -> Transport {
    Transport::Icmp {
        ty,
        code: 0,
        rest: [0x12, 0x34, 0, 1],
    }
}

fn icmp6(ty: u8) -> Transport {
    Transport::Icmpv6 {
        ty,
        code: 0,
        rest: [0, 0, 0, 0],
    }
}

const SYN: u8 = tcp_flags::SYN;
const SYNACK: u8 = tcp_flags::SYN | tcp_flags::ACK;
const ACK: u8 = tcp_flags::ACK;
const PSHACK: u8 = tcp_flags::PSH | tcp_flags::ACK;

/// The office's packet classes, in ruleset order.
pub const CLASSES: &[Class] = &[
    Class {
        what: "ARP request from a staff PC for the server",
        expect: "accept ingress 10",
        repeat: true,
        build: |r| {
            let spa = staff(r);
            let sha = [0x02, 0x10, 0, 0, 0, spa.octets()[3]];
            let mut p = PacketSpec::new(
                Net::Arp {
                    op: 1,
                    sha,
                    spa,
                    tha: [0; 6],
                    tpa: SERVER,
                },
                None,
            );
            p.src_mac = sha;
            p.dst_mac = [0xff; 6];
            p.build()
        },
    },
    Class {
        what: "guest VLAN 30: DNS to the office resolver",
        expect: "accept guest 47",
        repeat: true,
        build: |r| {
            let (s, e) = (guest(r), eph(r));
            v4(r, vec![Tag::q(30)], s, RESOLVER, udp(e, 53))
        },
    },
    Class {
        what: "guest VLAN 30: SMB to a private address",
        expect: "drop guest 49",
        repeat: true,
        build: |r| {
            let (s, e) = (guest(r), eph(r));
            v4(
                r,
                vec![Tag::q(30)],
                s,
                Ipv4Addr::new(192, 168, 1, 10),
                tcp(e, 445, SYN),
            )
        },
    },
    Class {
        what: "guest VLAN 30: HTTPS to the internet",
        expect: "accept guest 51",
        repeat: true,
        build: |r| {
            let (s, e) = (guest(r), eph(r));
            v4(r, vec![Tag::q(30)], s, WEB, tcp(e, 443, PSHACK))
        },
    },
    Class {
        what: "guest VLAN 30: DNS to a public resolver",
        expect: "accept guest 52",
        repeat: true,
        build: |r| {
            let (s, e) = (guest(r), eph(r));
            v4(
                r,
                vec![Tag::q(30)],
                s,
                Ipv4Addr::new(9, 9, 9, 9),
                udp(e, 53),
            )
        },
    },
    Class {
        what: "guest VLAN 30: ping to the internet",
        expect: "accept guest 53",
        repeat: true,
        build: |r| {
            let s = guest(r);
            v4(r, vec![Tag::q(30)], s, Ipv4Addr::new(1, 1, 1, 1), icmp(8))
        },
    },
    Class {
        what: "guest VLAN 30: SIP to the internet",
        expect: "drop guest 54",
        repeat: true,
        build: |r| {
            let (s, e) = (guest(r), eph(r));
            v4(r, vec![Tag::q(30)], s, PUBDNS, udp(e, 5060))
        },
    },
    Class {
        what: "management VLAN 4093: admin to a switch web UI",
        expect: "accept mgmt 55",
        repeat: true,
        build: |r| {
            let e = eph(r);
            v4(
                r,
                vec![Tag::q(4093)],
                Ipv4Addr::new(10, 20, 80, 5),
                Ipv4Addr::new(10, 0, 0, 2),
                tcp(e, 80, SYN),
            )
        },
    },
    Class {
        what: "management VLAN 4093: switch web UI replies",
        expect: "accept mgmt 56",
        repeat: true,
        build: |r| {
            let e = eph(r);
            v4(
                r,
                vec![Tag::q(4093)],
                Ipv4Addr::new(10, 0, 0, 2),
                Ipv4Addr::new(10, 20, 80, 5),
                tcp(80, e, SYNACK),
            )
        },
    },
    Class {
        what: "management VLAN 4093: telnet to a switch",
        expect: "drop mgmt 57",
        repeat: true,
        build: |r| {
            let e = eph(r);
            v4(
                r,
                vec![Tag::q(4093)],
                Ipv4Addr::new(10, 20, 80, 5),
                Ipv4Addr::new(10, 0, 0, 2),
                tcp(e, 23, SYN),
            )
        },
    },
    Class {
        what: "three stacked tags 1/10/100, ping",
        expect: "drop ingress 13",
        repeat: true,
        build: |r| {
            let s = staff(r);
            v4(
                r,
                vec![Tag::q(1), Tag::q(10), Tag::q(100)],
                s,
                Ipv4Addr::BROADCAST,
                icmp(8),
            )
        },
    },
    Class {
        what: "two stacked tags 1/10, ping",
        expect: "drop ingress 14",
        repeat: true,
        build: |r| {
            let s = staff(r);
            v4(
                r,
                vec![Tag::q(1), Tag::q(10)],
                s,
                Ipv4Addr::BROADCAST,
                icmp(8),
            )
        },
    },
    Class {
        what: "unknown VLAN 6, ping",
        expect: "drop ingress 15",
        repeat: true,
        build: |r| {
            let s = staff(r);
            v4(r, vec![Tag::q(6)], s, Ipv4Addr::BROADCAST, icmp(8))
        },
    },
    Class {
        what: "802.1ad 200 + 802.1Q 2001 (QinQ), ARP",
        expect: "drop ingress 17",
        repeat: true,
        build: |r| {
            let spa = staff(r);
            let mut p = PacketSpec::new(
                Net::Arp {
                    op: 1,
                    sha: [0x02, 0x10, 0, 0, 0, 9],
                    spa,
                    tha: [0; 6],
                    tpa: SERVER,
                },
                None,
            );
            p.tags = vec![Tag::ad(200), Tag::q(2001)];
            p.dst_mac = [0xff; 6];
            p.build()
        },
    },
    Class {
        what: "MPLS unicast (EtherType 0x8847)",
        expect: "drop ingress 17",
        repeat: true,
        build: |r| {
            let label = r.range(16, 1000) as u32;
            // Label stack entry (bottom of stack, TTL 64), then an IPv4 telnet segment.
            let mut bytes = ((label << 12) | 0x100 | 64).to_be_bytes().to_vec();
            let e = eph(r);
            let inner = PacketSpec::new(
                Net::v4(Ipv4Addr::new(10, 1, 2, 1), Ipv4Addr::new(10, 34, 0, 1)),
                Some(tcp(e, 23, PSHACK)),
            )
            .build();
            bytes.extend_from_slice(&inner[14..]);
            frame(
                r,
                Vec::new(),
                Net::Raw {
                    ethertype: 0x8847,
                    bytes,
                },
                None,
                0,
            )
        },
    },
    Class {
        what: "LLDP (EtherType 0x88cc)",
        expect: "drop ingress 17",
        repeat: true,
        build: |r| {
            let mut p = PacketSpec::new(
                Net::Raw {
                    ethertype: 0x88cc,
                    // Chassis ID (MAC), port ID (MAC), TTL 120, end (IEEE 802.1AB).
                    bytes: vec![
                        0x02, 0x07, 0x04, 0x02, 0x10, 0, 0, 0, 0x09, 0x04, 0x07, 0x03, 0x02, 0x10,
                        0, 0, 0, 0x09, 0x06, 0x02, 0x00, 0x78, 0x00, 0x00,
                    ],
                },
                None,
            );
            p.dst_mac = [0x01, 0x80, 0xc2, 0, 0, 0x0e];
            p.src_mac[5] = r.below(256) as u8;
            p.build()
        },
    },
    Class {
        what: "blocklisted host 141.142.192.39 to a staff PC (ssh)",
        expect: "drop ingress 18",
        repeat: true,
        build: |r| {
            let d = staff(r);
            let e = eph(r);
            v4(
                r,
                Vec::new(),
                Ipv4Addr::new(141, 142, 192, 39),
                d,
                tcp(22, e, ACK),
            )
        },
    },
    Class {
        what: "staff PC to blocklisted 203.0.113.66 (https)",
        expect: "drop ingress 19",
        repeat: true,
        build: |r| {
            let (s, e) = (staff(r), eph(r));
            v4(
                r,
                Vec::new(),
                s,
                Ipv4Addr::new(203, 0, 113, 66),
                tcp(e, 443, SYN),
            )
        },
    },
    Class {
        what: "staff PC: DNS query to the resolver",
        expect: "accept lan_out 28",
        repeat: true,
        build: |r| {
            let (s, e) = (staff(r), eph(r));
            v4(r, Vec::new(), s, RESOLVER, udp(e, 53))
        },
    },
    Class {
        what: "resolver: DNS answer to a staff PC",
        expect: "accept lan_out 29",
        repeat: true,
        build: |r| {
            let (d, e) = (staff(r), eph(r));
            v4(r, Vec::new(), RESOLVER, d, udp(53, e))
        },
    },
    Class {
        what: "staff PC: ssh to the server",
        expect: "accept lan_out 31",
        repeat: true,
        build: |r| {
            let (s, e) = (staff(r), eph(r));
            v4(r, Vec::new(), s, SERVER, tcp(e, 22, PSHACK))
        },
    },
    Class {
        what: "server: ftp control reply to a staff PC",
        expect: "accept lan_out 33",
        repeat: true,
        build: |r| {
            let (d, e) = (staff(r), eph(r));
            v4(r, Vec::new(), SERVER, d, tcp(21, e, PSHACK))
        },
    },
    Class {
        what: "staff PC: HTTPS to the internet",
        expect: "accept lan_out 34",
        repeat: true,
        build: |r| {
            let (s, e) = (staff(r), eph(r));
            v4(r, Vec::new(), s, WEB, tcp(e, 443, PSHACK))
        },
    },
    Class {
        what: "staff PC: NTP query",
        expect: "accept lan_out 35",
        repeat: true,
        build: |r| {
            let s = staff(r);
            v4(r, Vec::new(), s, NTP, udp(123, 123))
        },
    },
    Class {
        what: "staff PC: mDNS",
        expect: "accept lan_out 36",
        repeat: true,
        build: |r| {
            let s = staff(r);
            v4(
                r,
                Vec::new(),
                s,
                Ipv4Addr::new(224, 0, 0, 251),
                udp(5353, 5353),
            )
        },
    },
    Class {
        what: "staff PC: Dropbox LAN sync broadcast",
        expect: "drop lan_out 37",
        repeat: true,
        build: |r| {
            let s = staff(r);
            v4(
                r,
                Vec::new(),
                s,
                Ipv4Addr::new(172, 16, 238, 255),
                udp(17500, 17500),
            )
        },
    },
    Class {
        what: "staff PC: ping to the internet",
        expect: "accept lan_out 39",
        repeat: true,
        build: |r| {
            let s = staff(r);
            v4(r, Vec::new(), s, PUBDNS, icmp(8))
        },
    },
    Class {
        what: "staff PC: SMTP to the internet",
        expect: "drop lan_out 40",
        repeat: true,
        build: |r| {
            let (s, e) = (staff(r), eph(r));
            v4(
                r,
                Vec::new(),
                s,
                Ipv4Addr::new(198, 51, 100, 25),
                tcp(e, 25, SYN),
            )
        },
    },
    Class {
        what: "internet: new ssh connection to a staff PC",
        expect: "drop lan_in 41",
        repeat: true,
        build: |r| {
            let (d, e) = (staff(r), eph(r));
            v4(r, Vec::new(), SCANNER, d, tcp(e, 22, SYN))
        },
    },
    Class {
        what: "internet: HTTPS reply to a staff PC",
        expect: "accept lan_in 42",
        repeat: true,
        build: |r| {
            let (d, e) = (staff(r), eph(r));
            v4(r, Vec::new(), WEB, d, tcp(443, e, SYNACK))
        },
    },
    Class {
        what: "internet: NTP reply",
        expect: "accept lan_in 43",
        repeat: true,
        build: |r| {
            let d = staff(r);
            v4(r, Vec::new(), NTP, d, udp(123, 123))
        },
    },
    Class {
        what: "internet: ping reply",
        expect: "accept lan_in 45",
        repeat: true,
        build: |r| {
            let d = staff(r);
            v4(r, Vec::new(), PUBDNS, d, icmp(0))
        },
    },
    Class {
        what: "internet: SNMP probe to a staff PC",
        expect: "drop lan_in 46",
        repeat: true,
        build: |r| {
            let (d, e) = (staff(r), eph(r));
            v4(r, Vec::new(), SCANNER, d, udp(e, 161))
        },
    },
    Class {
        what: "IPv6 with a type-0 routing header",
        expect: "drop ingress 22",
        repeat: true,
        build: |r| {
            let (s, e) = (staff6(r), eph(r));
            let ext = vec![ExtHeader::Routing {
                rtype: 0,
                segments_left: 1,
                addresses: vec![CF6],
            }];
            v6(r, s, FOREIGN6, ext, udp(e, 53))
        },
    },
    Class {
        what: "IPv6 first fragment",
        expect: "drop ingress 23",
        repeat: true,
        build: |r| {
            let (s, e) = (staff6(r), eph(r));
            let ext = vec![ExtHeader::Fragment {
                offset: 0,
                more: true,
                id: r.next_u64() as u32,
            }];
            v6(r, s, CF6, ext, udp(e, 53))
        },
    },
    Class {
        what: "MLDv2 report (hop-by-hop router alert)",
        expect: "accept ingress 25",
        repeat: true,
        build: |r| {
            let s = ll6(r);
            let ext = vec![ExtHeader::HopByHop { router_alert: true }];
            v6(r, s, "ff02::16".parse().unwrap_or(CF6), ext, icmp6(143))
        },
    },
    Class {
        what: "link-local router solicitation",
        expect: "accept link_local 59",
        repeat: true,
        build: |r| {
            let s = ll6(r);
            v6(
                r,
                s,
                "ff02::2".parse().unwrap_or(CF6),
                Vec::new(),
                icmp6(133),
            )
        },
    },
    Class {
        what: "link-local neighbour solicitation",
        expect: "accept link_local 59",
        repeat: true,
        build: |r| {
            let s = ll6(r);
            v6(
                r,
                s,
                "ff02::1:ff00:1".parse().unwrap_or(CF6),
                Vec::new(),
                icmp6(135),
            )
        },
    },
    Class {
        what: "link-local mDNS",
        expect: "accept link_local 60",
        repeat: true,
        build: |r| {
            let s = ll6(r);
            v6(
                r,
                s,
                "ff02::fb".parse().unwrap_or(CF6),
                Vec::new(),
                udp(5353, 5353),
            )
        },
    },
    Class {
        what: "link-local DHCPv6 solicit",
        expect: "drop link_local 61",
        repeat: true,
        build: |r| {
            let s = ll6(r);
            v6(
                r,
                s,
                "ff02::1:2".parse().unwrap_or(CF6),
                Vec::new(),
                udp(546, 547),
            )
        },
    },
    Class {
        what: "staff IPv6: HTTPS",
        expect: "accept lan6_out 62",
        repeat: true,
        build: |r| {
            let (s, e) = (staff6(r), eph(r));
            v6(r, s, CF6, Vec::new(), tcp(e, 443, PSHACK))
        },
    },
    Class {
        what: "staff IPv6: DNS",
        expect: "accept lan6_out 63",
        repeat: true,
        build: |r| {
            let (s, e) = (staff6(r), eph(r));
            v6(r, s, CF6, Vec::new(), udp(e, 53))
        },
    },
    Class {
        what: "staff IPv6: ping",
        expect: "accept lan6_out 65",
        repeat: true,
        build: |r| {
            let s = staff6(r);
            v6(r, s, CF6, Vec::new(), icmp6(128))
        },
    },
    Class {
        what: "staff IPv6: SMTP",
        expect: "drop lan6_out 66",
        repeat: true,
        build: |r| {
            let (s, e) = (staff6(r), eph(r));
            v6(r, s, FOREIGN6, Vec::new(), tcp(e, 25, SYN))
        },
    },
    Class {
        what: "staff IPv6: HTTPS behind destination options",
        expect: "accept lan6_out 62",
        repeat: true,
        build: |r| {
            let (s, e) = (staff6(r), eph(r));
            v6(r, s, CF6, vec![ExtHeader::DestOpts], tcp(e, 443, SYN))
        },
    },
    Class {
        what: "foreign IPv4 networks on the wire",
        expect: "drop ingress policy",
        repeat: true,
        build: |r| {
            let e = eph(r);
            v4(
                r,
                Vec::new(),
                Ipv4Addr::new(198, 51, 100, 1),
                Ipv4Addr::new(203, 0, 113, 5),
                tcp(e, 80, SYN),
            )
        },
    },
    Class {
        what: "foreign IPv6 networks on the wire",
        expect: "drop ingress policy",
        repeat: true,
        build: |r| {
            let e = eph(r);
            v6(
                r,
                "2001:db8:99::1".parse().unwrap_or(CF6),
                FOREIGN6,
                Vec::new(),
                udp(e, 53),
            )
        },
    },
    Class {
        what: "malformed: IPv4 header cut off after 10 bytes",
        expect: "drop ingress policy",
        repeat: false,
        build: |r| {
            let (s, e) = (staff(r), eph(r));
            let f = v4(r, Vec::new(), s, RESOLVER, udp(e, 53));
            damage(f, 14, Damage::Truncate(24))
        },
    },
    Class {
        what: "malformed: IPv4 total length past the frame (DNS query)",
        expect: "drop lan_out 40",
        repeat: false,
        build: |r| {
            let (s, e) = (staff(r), eph(r));
            let f = v4(r, Vec::new(), s, RESOLVER, udp(e, 53));
            damage(f, 14, Damage::Ipv4TotalLength(1400))
        },
    },
    Class {
        what: "malformed: TCP header cut to its 8 first bytes (ports present)",
        expect: "accept lan_out 34",
        repeat: false,
        build: |r| {
            let (s, e) = (staff(r), eph(r));
            let mut p = PacketSpec::new(Net::v4(s, WEB), Some(Transport::Raw { proto: 6 }));
            p.dst_mac = GW_MAC;
            let mut hdr = e.to_be_bytes().to_vec();
            hdr.extend_from_slice(&443u16.to_be_bytes());
            hdr.extend_from_slice(&[0, 0, 0, 1]);
            p.payload = hdr;
            p.build()
        },
    },
    Class {
        what: "malformed: runt frame of 10 bytes (no EtherType: meta protocol reads 0)",
        expect: "drop ingress 17",
        repeat: false,
        build: |_| vec![0x02, 0x00, 0x5e, 0x00, 0x00, 0x01, 0x02, 0x10, 0x00, 0x00],
    },
];

/// The office capture: `(timestamp ns, frame)`, every class once in [`CLASSES`] order, then a
/// random pick of the repeatable classes, `count` frames in all (at least `CLASSES.len()`).
/// Returns each frame's class index too.
pub fn office(seed: u64, count: usize) -> Vec<(u64, Vec<u8>, usize)> {
    let mut rng = Rng::new(seed);
    let repeatable: Vec<usize> = (0..CLASSES.len()).filter(|&i| CLASSES[i].repeat).collect();
    let mut ts = BASE_TS_NS;
    let mut out = Vec::with_capacity(count.max(CLASSES.len()));
    for i in 0..count.max(CLASSES.len()) {
        let class = if i < CLASSES.len() {
            i
        } else {
            *rng.pick(&repeatable)
        };
        ts += rng.range(100, 50_000) * 1_000;
        out.push((ts, CLASSES[class].frame(&mut rng), class));
    }
    out
}

/// The verdict lines (`wasp replay --verdicts` format) of [`office`]`(seed, count)`.
pub fn expected_verdicts(seed: u64, count: usize) -> String {
    let mut s = String::new();
    for (i, (_, _, class)) in office(seed, count).iter().enumerate() {
        let mut words = CLASSES[*class].expect.split(' ');
        let verdict = words.next().unwrap_or("");
        let chain = words.next().unwrap_or("");
        let by = words.next().unwrap_or("");
        s.push_str(&format!("{} {verdict} {TABLE} {chain} {by}\n", i + 1));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_once_then_fill() {
        let o = office(OFFICE_SEED, OFFICE_PACKETS);
        assert_eq!(o.len(), OFFICE_PACKETS);
        for (i, (_, _, c)) in o.iter().take(CLASSES.len()).enumerate() {
            assert_eq!(*c, i);
        }
        assert!(
            o[CLASSES.len()..]
                .iter()
                .all(|(_, _, c)| CLASSES[*c].repeat)
        );
        assert_eq!(office(OFFICE_SEED, OFFICE_PACKETS), o);
    }

    #[test]
    fn expectations_are_well_formed() {
        for c in CLASSES {
            let w: Vec<&str> = c.expect.split(' ').collect();
            assert_eq!(w.len(), 3, "{}", c.what);
            assert!(w[0] == "accept" || w[0] == "drop", "{}", c.what);
            assert!(
                w[2] == "policy" || w[2].parse::<u64>().is_ok(),
                "{}",
                c.what
            );
        }
        let v = expected_verdicts(OFFICE_SEED, OFFICE_PACKETS);
        assert_eq!(v.lines().count(), OFFICE_PACKETS);
        assert_eq!(v.lines().next(), Some("1 accept office ingress 10"));
    }

    #[test]
    fn guest_frames_carry_vlan_30() {
        let f = CLASSES[1].frame(&mut Rng::new(1));
        assert_eq!(&f[12..16], &[0x81, 0x00, 0x00, 30]);
        assert_eq!(&f[16..18], &[0x08, 0x00]);
    }
}
