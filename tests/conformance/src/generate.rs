//! Generated frames aimed at the boundaries of the conformance rulesets: values just inside and
//! outside ranges and prefixes, stacked tags, truncated headers, fragments, extension headers,
//! malformed IP headers. Every frame is built from the protocol specs (RFC 791, 8200, 793, 768,
//! 792, 4443, IEEE 802.1Q); checksums are left zero (nothing on the ingress path checks them).

/// A generated frame with a short name saying what it is aimed at.
#[derive(Debug, Clone)]
pub struct Generated {
    /// What the frame tests, e.g. `v4-ttl-1`.
    pub name: String,
    /// The frame, Ethernet header included.
    pub frame: Vec<u8>,
}

/// Default destination MAC of generated frames.
pub const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
/// Default source MAC of generated frames.
pub const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

/// EtherTypes.
const ET_IP: u16 = 0x0800;
const ET_IP6: u16 = 0x86dd;
const ET_ARP: u16 = 0x0806;
const ET_8021Q: u16 = 0x8100;
const ET_8021AD: u16 = 0x88a8;

/// IP protocol numbers.
const P_HBH: u8 = 0;
const P_ICMP: u8 = 1;
const P_TCP: u8 = 6;
const P_UDP: u8 = 17;
const P_RT: u8 = 43;
const P_FRAG: u8 = 44;
const P_ICMP6: u8 = 58;
const P_NONE: u8 = 59;
const P_DST: u8 = 60;
const P_SCTP: u8 = 132;
const P_UDPLITE: u8 = 136;

/// TCP flags.
const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
const URG: u8 = 0x20;

/// An Ethernet frame: `dst src [tpid tci]* ethertype payload`.
pub fn ether(
    dst: [u8; 6],
    src: [u8; 6],
    tags: &[(u16, u16)],
    ethertype: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + 4 * tags.len() + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    for (tpid, tci) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A VLAN tag control field: priority (3 bits), DEI (1 bit), id (12 bits).
pub fn tci(pcp: u8, id: u16) -> u16 {
    (u16::from(pcp & 7) << 13) | (id & 0x0fff)
}

/// IPv4 header fields the generator varies.
#[derive(Debug, Clone)]
pub struct V4 {
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// Protocol.
    pub proto: u8,
    /// Time to live.
    pub ttl: u8,
    /// DSCP (6 bits).
    pub dscp: u8,
    /// Flags (3 bits) and fragment offset in 8-byte units (13 bits).
    pub frag: u16,
    /// Options (padded to 4 bytes by the caller).
    pub options: Vec<u8>,
    /// Override of the total length field (None: the real length).
    pub tot_len: Option<u16>,
    /// Override of the version/IHL byte.
    pub ver_ihl: Option<u8>,
}

impl V4 {
    /// 10.0.0.1 -> 10.0.0.2, TTL 64, DSCP 0, no fragmentation.
    pub fn new(proto: u8) -> Self {
        V4 {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            proto,
            ttl: 64,
            dscp: 0,
            frag: 0,
            options: Vec::new(),
            tot_len: None,
            ver_ihl: None,
        }
    }
    fn src(mut self, a: [u8; 4]) -> Self {
        self.src = a;
        self
    }
    fn dst(mut self, a: [u8; 4]) -> Self {
        self.dst = a;
        self
    }
    fn ttl(mut self, t: u8) -> Self {
        self.ttl = t;
        self
    }
    fn dscp(mut self, d: u8) -> Self {
        self.dscp = d;
        self
    }
    fn frag(mut self, f: u16) -> Self {
        self.frag = f;
        self
    }

    /// The header followed by `payload`.
    pub fn build(&self, payload: &[u8]) -> Vec<u8> {
        let hlen = 20 + self.options.len();
        let tot = self.tot_len.unwrap_or((hlen + payload.len()) as u16);
        let mut h = vec![
            self.ver_ihl.unwrap_or(0x40 | (hlen / 4) as u8),
            self.dscp << 2,
        ];
        h.extend_from_slice(&tot.to_be_bytes());
        h.extend_from_slice(&[0x12, 0x34]);
        h.extend_from_slice(&self.frag.to_be_bytes());
        h.extend_from_slice(&[self.ttl, self.proto, 0, 0]);
        h.extend_from_slice(&self.src);
        h.extend_from_slice(&self.dst);
        h.extend_from_slice(&self.options);
        h.extend_from_slice(payload);
        h
    }
}

/// An IPv6 header (traffic class 0, flow label 0) followed by `payload`; `plen` overrides the
/// payload length field.
pub fn ipv6(
    src: [u8; 16],
    dst: [u8; 16],
    next: u8,
    hlim: u8,
    payload: &[u8],
    plen: Option<u16>,
) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&plen.unwrap_or(payload.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, hlim]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(payload);
    h
}

/// An IPv6 address from eight 16-bit groups.
pub fn v6(g: [u16; 8]) -> [u8; 16] {
    let mut a = [0u8; 16];
    for (i, x) in g.iter().enumerate() {
        a[2 * i..2 * i + 2].copy_from_slice(&x.to_be_bytes());
    }
    a
}

/// A generic extension header (hop-by-hop, routing, destination options): next header, length
/// in 8-octet units beyond the first, padded with PadN / zero bytes, then `rest`.
pub fn ext(next: u8, len8: u8, rest: &[u8]) -> Vec<u8> {
    let total = (usize::from(len8) + 1) * 8;
    let mut h = vec![next, len8];
    h.resize(total, 0);
    h.extend_from_slice(rest);
    h
}

/// A fragment header: offset in 8-octet units, more-fragments flag.
pub fn frag6(next: u8, offset: u16, more: bool, rest: &[u8]) -> Vec<u8> {
    let mut h = vec![next, 0];
    h.extend_from_slice(&((offset << 3) | u16::from(more)).to_be_bytes());
    h.extend_from_slice(&[0, 0, 0, 7]);
    h.extend_from_slice(rest);
    h
}

/// A TCP header (data offset 5) with `flags`, then `payload`.
pub fn tcp(sport: u16, dport: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::with_capacity(20 + payload.len());
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    h.extend_from_slice(payload);
    h
}

/// A UDP header with the length field `len` (None: the real length), then `payload`.
pub fn udp(sport: u16, dport: u16, payload: &[u8], len: Option<u16>) -> Vec<u8> {
    let mut h = Vec::with_capacity(8 + payload.len());
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&len.unwrap_or(8 + payload.len() as u16).to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(payload);
    h
}

/// An ICMP or ICMPv6 message: type, code, checksum 0, 4 bytes of rest-of-header.
pub fn icmp(ty: u8, code: u8) -> Vec<u8> {
    vec![ty, code, 0, 0, 0, 1, 0, 1]
}

/// An ARP request (Ethernet/IPv4) body.
pub fn arp(op: u16) -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4];
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&SRC_MAC);
    a.extend_from_slice(&[10, 0, 0, 1]);
    a.extend_from_slice(&[0; 6]);
    a.extend_from_slice(&[10, 0, 0, 2]);
    a
}

struct Corpus(Vec<Generated>);

impl Corpus {
    fn add(&mut self, name: impl Into<String>, frame: Vec<u8>) {
        self.0.push(Generated {
            name: name.into(),
            frame,
        });
    }
    fn eth4(&mut self, name: impl Into<String>, ip: &V4, l4: &[u8]) {
        self.add(name, ether(DST_MAC, SRC_MAC, &[], ET_IP, &ip.build(l4)));
    }
    fn eth6(&mut self, name: impl Into<String>, ip6: Vec<u8>) {
        self.add(name, ether(DST_MAC, SRC_MAC, &[], ET_IP6, &ip6));
    }
}

const A6: [u16; 8] = [0x2001, 0xdb8, 1, 0, 0, 0, 0, 2];
const B6: [u16; 8] = [0x2001, 0xdb8, 1, 0, 0, 0, 0, 1];

/// The generated corpus (deterministic).
pub fn corpus() -> Vec<Generated> {
    let mut c = Corpus(Vec::new());
    ethernet_cases(&mut c);
    vlan_cases(&mut c);
    ipv4_cases(&mut c);
    ipv6_cases(&mut c);
    l4_cases(&mut c);
    icmp_cases(&mut c);
    meta_cases(&mut c);
    exthdr_cases(&mut c);
    malformed_cases(&mut c);
    c.0
}

fn ethernet_cases(c: &mut Corpus) {
    let ip = V4::new(P_UDP).build(&udp(5000, 6000, b"x", None));
    let mac = |last: [u8; 2]| [0x02, 0, 0, 0, last[0], last[1]];
    c.add(
        "eth-src-66",
        ether(DST_MAC, mac([0, 0x66]), &[], ET_IP, &ip),
    );
    c.add(
        "eth-src-67",
        ether(DST_MAC, mac([0, 0x67]), &[], ET_IP, &ip),
    );
    c.add(
        "eth-mcast-arp",
        ether([0x01, 0, 0x5e, 0, 0, 1], SRC_MAC, &[], ET_ARP, &arp(1)),
    );
    c.add(
        "eth-bcast-arp",
        ether([0xff; 6], SRC_MAC, &[], ET_ARP, &arp(1)),
    );
    c.add("eth-bcast-ip", ether([0xff; 6], SRC_MAC, &[], ET_IP, &ip));
    c.add(
        "eth-unicast-arp",
        ether(DST_MAC, SRC_MAC, &[], ET_ARP, &arp(2)),
    );
    c.add(
        "eth-88b5",
        ether(DST_MAC, SRC_MAC, &[], 0x88b5, &[0x77; 46]),
    );
    c.add(
        "eth-88b6",
        ether(DST_MAC, SRC_MAC, &[], 0x88b6, &[0x77; 46]),
    );
    c.add(
        "eth-88b7",
        ether(DST_MAC, SRC_MAC, &[], 0x88b7, &[0x77; 46]),
    );
    c.add(
        "eth-mpls",
        ether(DST_MAC, SRC_MAC, &[], 0x8847, &[0, 0, 0x11, 0x40]),
    );
    c.add(
        "eth-len-type-0x0600",
        ether(DST_MAC, SRC_MAC, &[], 0x0600, &[0; 46]),
    );
    c.add("eth-only-header", ether(DST_MAC, SRC_MAC, &[], ET_IP, &[]));
    c.add(
        "eth-src-range-lo",
        ether(DST_MAC, mac([1, 0]), &[], ET_IP, &ip),
    );
    c.add(
        "eth-src-range-hi",
        ether(DST_MAC, mac([1, 0xff]), &[], ET_IP, &ip),
    );
    c.add(
        "eth-src-range-out",
        ether(DST_MAC, mac([2, 0]), &[], ET_IP, &ip),
    );
    c.add(
        "eth-src-below-range",
        ether(DST_MAC, mac([0, 0xff]), &[], ET_IP, &ip),
    );
    c.add(
        "eth-dst-other",
        ether([0x02, 0, 0, 0, 0, 3], SRC_MAC, &[], ET_IP, &ip),
    );
    c.add(
        "eth-dst-mcast-ip",
        ether([0x01, 0, 0x5e, 0, 0, 0xfb], SRC_MAC, &[], ET_IP, &ip),
    );
    c.add(
        "eth-src-is-dst",
        ether(DST_MAC, [0x02, 0, 0, 0, 0, 1], &[], ET_IP, &ip),
    );
    c.add(
        "eth-ip6-bare",
        ether(DST_MAC, SRC_MAC, &[], ET_IP6, &[0x60, 0, 0]),
    );
    c.add(
        "eth-sender-mac-2",
        ether(DST_MAC, [0x00, 0x1c, 0x42, 0, 0, 8], &[], ET_IP, &ip),
    );
}

fn vlan_cases(c: &mut Corpus) {
    let icmp4 = V4::new(P_ICMP).build(&icmp(8, 0));
    let udp4 = V4::new(P_UDP).build(&udp(5000, 53, b"q", None));
    let six = ipv6(
        v6(A6),
        v6(B6),
        P_UDP,
        64,
        &udp(5000, 5001, b"q", None),
        None,
    );
    let q = |pcp, id| (ET_8021Q, tci(pcp, id));
    let ad = |pcp, id| (ET_8021AD, tci(pcp, id));
    let e = |tags: &[(u16, u16)], et, p: &[u8]| ether(DST_MAC, SRC_MAC, tags, et, p);
    c.add(
        "vlan-1-10-100",
        e(&[q(0, 1), q(0, 10), q(0, 100)], ET_IP, &icmp4),
    );
    c.add(
        "vlan-1-10-101",
        e(&[q(0, 1), q(0, 10), q(0, 101)], ET_IP, &icmp4),
    );
    c.add("vlan-1-10", e(&[q(0, 1), q(0, 10)], ET_IP, &icmp4));
    c.add("vlan-1-11", e(&[q(0, 1), q(0, 11)], ET_IP, &icmp4));
    c.add("vlan-2-10", e(&[q(0, 2), q(0, 10)], ET_IP, &icmp4));
    c.add(
        "vlan-1-10-100-200",
        e(&[q(0, 1), q(0, 10), q(0, 100), q(0, 200)], ET_IP, &icmp4),
    );
    c.add(
        "qinq-200-2001-arp",
        e(&[ad(0, 200), q(0, 2001)], ET_ARP, &arp(1)),
    );
    c.add(
        "qinq-200-2001-ip",
        e(&[ad(0, 200), q(0, 2001)], ET_IP, &udp4),
    );
    c.add(
        "qinq-200-2002-arp",
        e(&[ad(0, 200), q(0, 2002)], ET_ARP, &arp(1)),
    );
    c.add("qinq-300", e(&[ad(0, 300)], ET_IP, &udp4));
    c.add("qinq-300-q5", e(&[ad(0, 300), q(0, 5)], ET_IP, &udp4));
    c.add("q-ad-inner", e(&[q(0, 200), ad(0, 2001)], ET_ARP, &arp(1)));
    c.add("vlan-6-ip6", e(&[q(0, 6)], ET_IP6, &six));
    c.add("vlan-6-ip", e(&[q(0, 6)], ET_IP, &udp4));
    c.add("vlan-4093-pcp0", e(&[q(0, 4093)], ET_IP, &udp4));
    c.add("vlan-4093-pcp1", e(&[q(1, 4093)], ET_IP, &udp4));
    c.add("vlan-4093-arp", e(&[q(0, 4093)], ET_ARP, &arp(1)));
    c.add("vlan-pcp4", e(&[q(4, 50)], ET_IP, &udp4));
    c.add("vlan-pcp5", e(&[q(5, 50)], ET_IP, &udp4));
    c.add("vlan-pcp7", e(&[q(7, 50)], ET_IP, &udp4));
    c.add("vlan-99", e(&[q(0, 99)], ET_IP, &udp4));
    c.add("vlan-100", e(&[q(0, 100)], ET_IP, &udp4));
    c.add("vlan-199", e(&[q(0, 199)], ET_IP, &udp4));
    c.add("vlan-200", e(&[q(0, 200)], ET_IP, &udp4));
    c.add("vlan-7-arp", e(&[q(0, 7)], ET_ARP, &arp(1)));
    c.add("vlan-7-ip", e(&[q(0, 7)], ET_IP, &udp4));
    c.add("vlan-8-arp", e(&[q(0, 8)], ET_ARP, &arp(1)));
    c.add("vlan-1099-ip6", e(&[q(0, 1099)], ET_IP6, &six));
    c.add("vlan-1100-ip6", e(&[q(0, 1100)], ET_IP6, &six));
    c.add("vlan-4000-q", e(&[q(0, 4000), q(0, 5)], ET_IP, &udp4));
    c.add("vlan-3999-q", e(&[q(0, 3999), q(0, 5)], ET_IP, &udp4));
    c.add("vlan-0-prio", e(&[q(3, 0)], ET_IP, &udp4));
    c.add("vlan-4095", e(&[q(0, 4095)], ET_IP, &udp4));
    c.add("vlan-dei", e(&[(ET_8021Q, 0x1000 | 42)], ET_IP, &udp4));
    c.add("vlan-tag-only", e(&[q(0, 42)], ET_IP, &[]));
    // skb_vlan_untag needs the tag and 2 more bytes (20 in all) or drops the frame before
    // the ingress hook.
    c.add("vlan-tag-1-byte", e(&[q(0, 42)], ET_IP, &[0x45]));
    c.add("vlan-tag-2-bytes", e(&[q(0, 42)], ET_IP, &[0x45, 0]));
    c.add("qinq-tag-only", e(&[ad(0, 42)], ET_IP, &[]));
    c.add("qinq-tag-2-bytes", e(&[ad(0, 42)], ET_IP, &[0x45, 0]));
    c.add(
        "vlan-cut-tag",
        ether(DST_MAC, SRC_MAC, &[], ET_8021Q, &[0x00]),
    );
    c.add("vlan-cut-inner", e(&[q(0, 1)], ET_8021Q, &[0x00, 0x0a]));
    c.add(
        "vlan-3-deep-tcp",
        e(
            &[q(0, 5), q(0, 6), q(0, 7)],
            ET_IP,
            &V4::new(P_TCP).build(&tcp(1000, 22, SYN, b"")),
        ),
    );
}

fn ipv4_cases(c: &mut Corpus) {
    let u = udp(5000, 7000, b"data", None);
    let t = tcp(40000, 443, ACK, b"");
    c.eth4(
        "v4-src-10.1-dst-10.2.0.1",
        &V4::new(P_UDP).src([10, 1, 255, 255]).dst([10, 2, 0, 1]),
        &u,
    );
    c.eth4(
        "v4-src-10.0-dst-10.2.0.1",
        &V4::new(P_UDP).src([10, 0, 255, 255]).dst([10, 2, 0, 1]),
        &u,
    );
    c.eth4(
        "v4-src-10.2-dst-10.2.0.1",
        &V4::new(P_UDP).src([10, 2, 0, 0]).dst([10, 2, 0, 1]),
        &u,
    );
    for last in [0u8, 1, 100, 101] {
        c.eth4(
            format!("v4-range-192.168.1.{last}"),
            &V4::new(P_UDP).src([192, 168, 1, last]),
            &u,
        );
    }
    for ttl in [0u8, 1, 2, 199, 200, 250, 251, 255] {
        c.eth4(
            format!("v4-ttl-{ttl}-out"),
            &V4::new(P_TCP).dst([11, 0, 0, 1]).ttl(ttl),
            &t,
        );
        c.eth4(format!("v4-ttl-{ttl}-in"), &V4::new(P_UDP).ttl(ttl), &u);
    }
    for len in [1380usize, 1381, 1400, 0] {
        // total lengths 1400, 1401, 1420 and 28 (ICMP without data)
        if len == 0 {
            c.eth4("v4-len-28", &V4::new(P_ICMP), &icmp(13, 0));
        } else {
            c.eth4(
                format!("v4-len-{}", len + 20),
                &V4::new(P_UDP),
                &udp(5000, 7000, &vec![0; len - 8], None),
            );
        }
    }
    c.eth4("v4-len-29", &V4::new(P_ICMP), &[13, 0, 0, 0, 0, 1, 0, 1, 0]);
    for (dscp, name) in [
        (8u8, "cs1"),
        (46, "ef"),
        (10, "af11"),
        (0, "cs0"),
        (63, "63"),
    ] {
        c.eth4(format!("v4-dscp-{name}"), &V4::new(P_TCP).dscp(dscp), &t);
    }
    c.eth4(
        "v4-dst-172.16.238.255",
        &V4::new(P_TCP).dst([172, 16, 238, 255]),
        &t,
    );
    c.eth4(
        "v4-dst-172.16.239.0",
        &V4::new(P_TCP).dst([172, 16, 239, 0]),
        &t,
    );
    c.eth4(
        "v4-dst-74.125.225.81",
        &V4::new(P_TCP).dst([74, 125, 225, 81]),
        &t,
    );
    c.eth4(
        "v4-dst-74.125.225.82",
        &V4::new(P_TCP).dst([74, 125, 225, 82]),
        &t,
    );
    c.eth4(
        "v4-src-141.42.64.125-icmp",
        &V4::new(P_ICMP).src([141, 42, 64, 125]),
        &icmp(8, 0),
    );
    c.eth4(
        "v4-src-141.42.64.125-udp",
        &V4::new(P_UDP).src([141, 42, 64, 125]),
        &u,
    );
    c.eth4(
        "v4-blocked-10.1.2.3",
        &V4::new(P_UDP).src([10, 1, 2, 3]),
        &u,
    );
    c.eth4(
        "v4-to-blocked-web",
        &V4::new(P_TCP).dst([10, 1, 2, 3]),
        &tcp(1000, 8080, SYN, b""),
    );
    c.eth4(
        "v4-to-blocked-noweb",
        &V4::new(P_TCP).dst([10, 1, 2, 3]),
        &tcp(1000, 8081, SYN, b""),
    );
    c.eth4("v4-proto-gre", &V4::new(47), &[0, 0, 0x08, 0]);
    c.eth4("v4-proto-255", &V4::new(255), &[0; 8]);
    c.eth4(
        "v4-options",
        &V4 {
            options: vec![1, 1, 1, 0],
            ..V4::new(P_UDP)
        },
        &u,
    );
    c.eth4(
        "v4-mf-first",
        &V4::new(P_UDP).frag(0x2000),
        &udp(5000, 53, b"frag", None),
    );
    c.eth4(
        "v4-frag-off-1",
        &V4::new(P_UDP).frag(0x0001),
        &udp(5000, 53, b"frag", None),
    );
    c.eth4(
        "v4-frag-off-last",
        &V4::new(P_TCP).frag(0x1fff),
        &tcp(1000, 22, SYN, b""),
    );
    c.eth4(
        "v4-df",
        &V4::new(P_UDP).frag(0x4000),
        &udp(5000, 53, b"df", None),
    );
    c.add("v4-trailing-bytes", {
        let mut f = ether(
            DST_MAC,
            SRC_MAC,
            &[],
            ET_IP,
            &V4::new(P_UDP).build(&udp(1, 2, b"", None)),
        );
        f.extend_from_slice(&[0xee; 18]);
        f
    });
}

fn ipv6_cases(c: &mut Corpus) {
    let u = udp(5000, 7000, b"six", None);
    let mcast = v6([0xff02, 0, 0, 0, 0, 0, 0, 1]);
    let ll = v6([0xfe80, 0, 0, 0, 0, 0, 0, 1]);
    c.eth6(
        "v6-frag-a-b",
        ipv6(v6(A6), v6(B6), P_FRAG, 64, &frag6(P_UDP, 0, true, &u), None),
    );
    c.eth6(
        "v6-mcast-hl255",
        ipv6(ll, mcast, P_ICMP6, 255, &icmp(134, 0), None),
    );
    c.eth6(
        "v6-mcast-hl254",
        ipv6(ll, mcast, P_ICMP6, 254, &icmp(134, 0), None),
    );
    c.eth6(
        "v6-ff03-hl255",
        ipv6(ll, v6([0xff03, 0, 0, 0, 0, 0, 0, 1]), P_UDP, 255, &u, None),
    );
    c.eth6("v6-ll-hl64", ipv6(ll, v6(B6), P_UDP, 64, &u, None));
    c.eth6(
        "v6-ll-hl255",
        ipv6(ll, v6(B6), P_ICMP6, 255, &icmp(135, 0), None),
    );
    c.eth6(
        "v6-febf",
        ipv6(
            v6([0xfebf, 0, 0, 0, 0, 0, 0, 1]),
            v6(B6),
            P_UDP,
            64,
            &u,
            None,
        ),
    );
    c.eth6(
        "v6-fec0",
        ipv6(
            v6([0xfec0, 0, 0, 0, 0, 0, 0, 1]),
            v6(B6),
            P_UDP,
            64,
            &u,
            None,
        ),
    );
    for last in [0u16, 1, 0xff, 0x100] {
        c.eth6(
            format!("v6-range-aa::{last:x}"),
            ipv6(
                v6([0x2001, 0xdb8, 0xaa, 0, 0, 0, 0, last]),
                v6(B6),
                P_UDP,
                64,
                &u,
                None,
            ),
        );
    }
    for hl in [0u8, 1, 2, 10, 11, 199, 200, 250, 251] {
        c.eth6(
            format!("v6-hl-{hl}-udp"),
            ipv6(v6(A6), v6(B6), P_UDP, hl, &u, None),
        );
        c.eth6(
            format!("v6-hl-{hl}-none"),
            ipv6(v6(A6), v6(B6), P_NONE, hl, &[], None),
        );
    }
    c.eth6(
        "v6-out-udp",
        ipv6(
            v6(A6),
            v6([0x2a00, 0, 0, 0, 0, 0, 0, 1]),
            P_UDP,
            64,
            &u,
            None,
        ),
    );
    c.eth6(
        "v6-out-tcp",
        ipv6(
            v6(A6),
            v6([0x2a00, 0, 0, 0, 0, 0, 0, 1]),
            P_TCP,
            64,
            &tcp(1000, 8080, SYN, b""),
            None,
        ),
    );
    c.eth6(
        "v6-loop-tcp-8080",
        ipv6(
            v6([0, 0, 0, 0, 0, 0, 0, 1]),
            v6([0, 0, 0, 0, 0, 0, 0, 1]),
            P_TCP,
            64,
            &tcp(1000, 8080, SYN, b""),
            None,
        ),
    );
    c.eth6(
        "v6-sctp",
        ipv6(
            v6(A6),
            v6(B6),
            P_SCTP,
            64,
            &[0x13, 0x88, 0x13, 0x89, 0, 0, 0, 0, 0, 0, 0, 0],
            None,
        ),
    );
    c.eth6(
        "v6-udplite",
        ipv6(
            v6(A6),
            v6(B6),
            P_UDPLITE,
            64,
            &udp(5000, 53, b"", Some(8)),
            None,
        ),
    );
}

fn l4_cases(c: &mut Corpus) {
    let v4t = |c: &mut Corpus, name: &str, sport, dport, flags| {
        c.eth4(
            format!("tcp-{name}"),
            &V4::new(P_TCP),
            &tcp(sport, dport, flags, b""),
        );
    };
    v4t(c, "syn-22", 40000, 22, SYN);
    v4t(c, "syn-80", 40000, 80, SYN);
    v4t(c, "syn-81", 40000, 81, SYN);
    v4t(c, "synack-80", 40000, 80, SYN | ACK);
    v4t(c, "null", 40000, 9, 0);
    v4t(c, "ece-cwr-only", 40000, 9, 0xc0);
    v4t(c, "xmas", 40000, 9, FIN | SYN | RST | PSH | ACK | URG);
    v4t(c, "finsyn", 40000, 9, FIN | SYN);
    v4t(c, "rst-999", 999, 9, RST);
    v4t(c, "rst-1000", 1000, 9, RST);
    v4t(c, "rst-2000", 2000, 9, RST | ACK);
    v4t(c, "rst-2001", 2001, 9, RST);
    v4t(c, "syn-high", 40000, 9, SYN | PSH);
    v4t(c, "ack-21", 40000, 21, ACK);
    v4t(c, "sport22-49656", 22, 49656, ACK);
    v4t(c, "sport22-49657", 22, 49657, ACK);
    v4t(c, "ack-8080", 40000, 8080, ACK);
    v4t(c, "ack-60000", 40000, 60000, ACK);
    v4t(c, "ack-60001", 40000, 60001, ACK);
    v4t(c, "ack-65535", 40000, 65535, ACK);
    v4t(c, "1023-1024", 1023, 1024, ACK);
    v4t(c, "1024-1024", 1024, 1024, ACK);
    v4t(c, "1023-1023", 1023, 1023, ACK);
    v4t(c, "0-0", 0, 0, ACK);
    v4t(c, "ack-1", 40000, 1, ACK);
    v4t(c, "ack-1023", 40000, 1023, ACK);
    c.eth4(
        "tcp-concat-hit",
        &V4::new(P_TCP).src([172, 16, 238, 1]),
        &tcp(40000, 22, ACK, b""),
    );
    c.eth4(
        "tcp-concat-miss-port",
        &V4::new(P_TCP).src([172, 16, 238, 1]),
        &tcp(40000, 23, ACK, b""),
    );
    c.eth4(
        "tcp-concat-hit-2",
        &V4::new(P_TCP).src([10, 20, 80, 1]),
        &tcp(80, 50343, ACK, b""),
    );
    c.eth4(
        "tcp-concat-flows-2",
        &V4::new(P_TCP).src([10, 0, 0, 15]),
        &tcp(50343, 80, ACK, b""),
    );
    c.eth4(
        "udp-concat-hit",
        &V4::new(P_UDP).dst([10, 9, 9, 9]),
        &udp(5000, 53, b"", None),
    );
    c.eth4(
        "udp-concat-miss",
        &V4::new(P_UDP).dst([10, 9, 9, 8]),
        &udp(5000, 53, b"", None),
    );
    for (name, sport, dport, payload) in [
        ("4789-small", 5000u16, 4789u16, 91usize),
        ("4789-100", 5000, 4789, 92),
        ("len-999", 5000, 7000, 991),
        ("len-1000", 5000, 7000, 992),
        ("1023-1023", 1023, 1023, 4),
        ("1-1024", 1, 1024, 4),
        ("0-5", 0, 5, 4),
        ("53", 5000, 53, 4),
        ("137", 5000, 137, 4),
        ("6081", 5000, 6081, 4),
        ("12345-31337", 12345, 31337, 4),
        ("12345-31338", 12345, 31338, 4),
        ("40000-31337", 40000, 31337, 4),
    ] {
        c.eth4(
            format!("udp-{name}"),
            &V4::new(P_UDP),
            &udp(sport, dport, &vec![0x61; payload], None),
        );
    }
    c.eth4(
        "udp-len-field-lies",
        &V4::new(P_UDP),
        &udp(5000, 7000, b"ab", Some(2000)),
    );
    c.eth4(
        "udp-geneve-40000",
        &V4::new(P_UDP),
        &udp(40000, 6081, b"gen", None),
    );
    c.eth6(
        "v6-tcp-syn-22",
        ipv6(v6(A6), v6(B6), P_TCP, 64, &tcp(40000, 22, SYN, b""), None),
    );
    c.eth6(
        "v6-udp-53",
        ipv6(v6(A6), v6(B6), P_UDP, 64, &udp(5000, 53, b"", None), None),
    );
    c.eth6(
        "v6-udp-5353",
        ipv6(
            v6(A6),
            v6([0xff02, 0, 0, 0, 0, 0, 0, 0xfb]),
            P_UDP,
            255,
            &udp(5353, 5353, b"", None),
            None,
        ),
    );
}

fn icmp_cases(c: &mut Corpus) {
    for (ty, code) in [
        (8u8, 0u8),
        (8, 1),
        (0, 0),
        (3, 3),
        (3, 4),
        (5, 0),
        (5, 1),
        (11, 1),
        (12, 0),
        (12, 2),
        (13, 0),
        (13, 4),
        (4, 4),
        (14, 9),
        (255, 255),
    ] {
        c.eth4(
            format!("icmp-{ty}-{code}"),
            &V4::new(P_ICMP),
            &icmp(ty, code),
        );
    }
    for (ty, code) in [
        (128u8, 0u8),
        (128, 1),
        (129, 0),
        (135, 0),
        (136, 0),
        (134, 0),
        (133, 0),
        (143, 0),
        (1, 0),
        (1, 1),
        (1, 2),
        (4, 1),
        (5, 0),
        (2, 5),
        (3, 6),
        (200, 4),
    ] {
        c.eth6(
            format!("icmp6-{ty}-{code}"),
            ipv6(v6(A6), v6(B6), P_ICMP6, 64, &icmp(ty, code), None),
        );
    }
    c.eth4("icmp-cut-1-byte", &V4::new(P_ICMP), &[8]);
    c.eth6(
        "icmp6-cut-0-bytes",
        ipv6(v6(A6), v6(B6), P_ICMP6, 64, &[], None),
    );
    c.eth4("icmp-as-proto-58", &V4::new(P_ICMP6), &icmp(128, 0));
    c.eth6(
        "icmp6-as-proto-1",
        ipv6(v6(A6), v6(B6), P_ICMP, 64, &icmp(8, 0), None),
    );
}

fn meta_cases(c: &mut Corpus) {
    // meta length = frame length minus 14 (minus 4 more when a tag was popped).
    for l3 in [6usize, 20, 21, 31, 32, 46, 49, 1499, 1500, 1501] {
        let body = vec![0x45; l3];
        c.add(
            format!("meta-len-{l3}-raw"),
            ether(DST_MAC, SRC_MAC, &[], 0x88b7, &body),
        );
    }
    for l3 in [28usize, 45, 46, 47, 63, 64] {
        c.eth4(
            format!("meta-len-{l3}-udp"),
            &V4::new(P_UDP),
            &udp(5000, 7000, &vec![0; l3 - 28], None),
        );
    }
    for l3 in [36usize, 40, 41] {
        let body = V4::new(P_UDP).build(&udp(5000, 7000, &vec![0; l3 - 28], None));
        c.add(
            format!("meta-len-{l3}-qq"),
            ether(
                DST_MAC,
                SRC_MAC,
                &[(ET_8021Q, 5), (ET_8021Q, 6)],
                ET_IP,
                &body,
            ),
        );
    }
    c.eth6(
        "meta-icmp6-len-63",
        ipv6(
            v6(A6),
            v6(B6),
            P_ICMP6,
            64,
            &[128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            None,
        ),
    );
    c.eth6(
        "meta-icmp6-len-64",
        ipv6(v6(A6), v6(B6), P_ICMP6, 64, &[128; 24], None),
    );
    c.eth4(
        "meta-sctp-v4",
        &V4::new(P_SCTP),
        &[0x13, 0x88, 0, 53, 0, 0, 0, 0, 0, 0, 0, 0],
    );
    c.eth4(
        "meta-udplite-v4",
        &V4::new(P_UDPLITE),
        &udp(5000, 7000, b"", Some(8)),
    );
    c.eth4(
        "meta-gre-v4-thport",
        &V4::new(47),
        &[0, 0, 0, 53, 0, 0, 0, 0],
    );
    c.eth4(
        "th-tcp-sport-1023",
        &V4::new(P_TCP),
        &tcp(1023, 1024, ACK, b""),
    );
    c.eth4("th-udp-dport-0", &V4::new(P_UDP), &udp(5000, 0, b"", None));
    c.add(
        "meta-mpls-60",
        ether(DST_MAC, SRC_MAC, &[], 0x8847, &[0; 46]),
    );
}

fn exthdr_cases(c: &mut Corpus) {
    let (a, b) = (v6(A6), v6(B6));
    let u53 = udp(5000, 53, b"dns", None);
    c.eth6(
        "x-hbh-rt-udp53",
        ipv6(a, b, P_HBH, 64, &ext(P_RT, 0, &ext(P_UDP, 0, &u53)), None),
    );
    c.eth6(
        "x-hbh-udp53",
        ipv6(a, b, P_HBH, 64, &ext(P_UDP, 0, &u53), None),
    );
    c.eth6(
        "x-rt-echo",
        ipv6(a, b, P_RT, 64, &ext(P_ICMP6, 0, &icmp(128, 0)), None),
    );
    c.eth6(
        "x-rt-udp5642",
        ipv6(
            a,
            b,
            P_RT,
            64,
            &ext(P_UDP, 2, &udp(5000, 5642, b"", None)),
            None,
        ),
    );
    c.eth6(
        "x-rt-udp5643",
        ipv6(
            a,
            b,
            P_RT,
            64,
            &ext(P_UDP, 2, &udp(5000, 5643, b"", None)),
            None,
        ),
    );
    c.eth6(
        "x-frag0-tcp8080",
        ipv6(
            a,
            b,
            P_FRAG,
            64,
            &frag6(P_TCP, 0, true, &tcp(1, 8080, SYN, b"")),
            None,
        ),
    );
    c.eth6(
        "x-frag8-tcp8080",
        ipv6(
            a,
            b,
            P_FRAG,
            64,
            &frag6(P_TCP, 1, false, &tcp(1, 8080, SYN, b"")),
            None,
        ),
    );
    c.eth6(
        "x-frag0-echo",
        ipv6(
            a,
            b,
            P_FRAG,
            64,
            &frag6(P_ICMP6, 0, true, &icmp(128, 0)),
            None,
        ),
    );
    c.eth6(
        "x-frag8-echo",
        ipv6(
            a,
            b,
            P_FRAG,
            64,
            &frag6(P_ICMP6, 1, false, &icmp(128, 0)),
            None,
        ),
    );
    c.eth6(
        "x-frag0-reply",
        ipv6(
            a,
            b,
            P_FRAG,
            64,
            &frag6(P_ICMP6, 0, false, &icmp(129, 0)),
            None,
        ),
    );
    c.eth6(
        "x-frag-then-dst",
        ipv6(
            a,
            b,
            P_FRAG,
            64,
            &frag6(P_DST, 0, true, &ext(P_UDP, 0, &u53)),
            None,
        ),
    );
    c.eth6(
        "x-frag8-then-dst",
        ipv6(
            a,
            b,
            P_FRAG,
            64,
            &frag6(P_DST, 1, false, &ext(P_UDP, 0, &u53)),
            None,
        ),
    );
    c.eth6(
        "x-dst-udp",
        ipv6(a, b, P_DST, 64, &ext(P_UDP, 0, &u53), None),
    );
    c.eth6(
        "x-dst-tcp",
        ipv6(a, b, P_DST, 64, &ext(P_TCP, 0, &tcp(1, 22, SYN, b"")), None),
    );
    c.eth6(
        "x-dst-none",
        ipv6(a, b, P_DST, 64, &ext(P_NONE, 0, &[]), None),
    );
    c.eth6(
        "x-hbh-none",
        ipv6(a, b, P_HBH, 64, &ext(P_NONE, 0, &[]), None),
    );
    c.eth6("x-ns", ipv6(a, b, P_ICMP6, 255, &icmp(135, 0), None));
    c.eth6(
        "x-rt-ns",
        ipv6(a, b, P_RT, 255, &ext(P_ICMP6, 0, &icmp(135, 0)), None),
    );
    c.eth6(
        "x-hbh-late",
        ipv6(a, b, P_DST, 64, &ext(P_HBH, 0, &ext(P_UDP, 0, &u53)), None),
    );
    c.eth6(
        "x-ah-udp",
        ipv6(
            a,
            b,
            51,
            64,
            &{
                let mut ah = vec![P_UDP, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1];
                ah.extend_from_slice(&u53);
                ah
            },
            None,
        ),
    );
    c.eth6("x-cut-hbh", ipv6(a, b, P_HBH, 64, &[P_UDP, 4, 1, 2], None));
    c.eth6(
        "x-hbh-len-past-end",
        ipv6(a, b, P_HBH, 64, &ext(P_UDP, 0, &[]), Some(8)),
    );
    c.eth6(
        "x-rt-cut-udp",
        ipv6(a, b, P_RT, 64, &ext(P_UDP, 0, &[0x13, 0x88]), None),
    );
    c.eth6(
        "x-udp-5353",
        ipv6(a, b, P_UDP, 64, &udp(5353, 5353, b"", None), None),
    );
    c.eth6(
        "x-frag-udp-5353",
        ipv6(
            a,
            b,
            P_FRAG,
            64,
            &frag6(P_UDP, 0, true, &udp(5353, 5353, b"", None)),
            None,
        ),
    );
    c.eth6("x-esp", ipv6(a, b, 50, 64, &[0; 16], None));
}

fn malformed_cases(c: &mut Corpus) {
    let u = udp(5000, 53, b"bad", None);
    c.eth4(
        "bad-v4-ihl-4",
        &V4 {
            ver_ihl: Some(0x44),
            ..V4::new(P_UDP)
        },
        &u,
    );
    c.eth4(
        "bad-v4-version-6",
        &V4 {
            ver_ihl: Some(0x65),
            ..V4::new(P_UDP)
        },
        &u,
    );
    c.eth4(
        "bad-v4-totlen-big",
        &V4 {
            tot_len: Some(200),
            ..V4::new(P_UDP)
        },
        &u,
    );
    c.eth4(
        "bad-v4-totlen-small",
        &V4 {
            tot_len: Some(19),
            ..V4::new(P_UDP)
        },
        &u,
    );
    c.eth4(
        "bad-v4-totlen-ihl",
        &V4 {
            tot_len: Some(22),
            ver_ihl: Some(0x46),
            options: vec![1; 4],
            ..V4::new(P_UDP)
        },
        &u,
    );
    c.eth4(
        "v4-totlen-short-payload",
        &V4 {
            tot_len: Some(24),
            ..V4::new(P_UDP)
        },
        &u,
    );
    c.eth4(
        "bad-v4-ihl-past-end",
        &V4 {
            ver_ihl: Some(0x4f),
            ..V4::new(P_UDP)
        },
        &[],
    );
    c.add(
        "bad-v4-cut-19",
        ether(
            DST_MAC,
            SRC_MAC,
            &[],
            ET_IP,
            &V4::new(P_UDP).build(&[])[..19],
        ),
    );
    c.add(
        "bad-v4-cut-tcp",
        ether(DST_MAC, SRC_MAC, &[], ET_IP, &{
            let mut p = V4::new(P_TCP).build(&tcp(1000, 22, SYN, b""));
            p.truncate(20 + 3);
            p[2..4].copy_from_slice(&23u16.to_be_bytes());
            p
        }),
    );
    c.add(
        "bad-v4-tcp-flags-cut",
        ether(DST_MAC, SRC_MAC, &[], ET_IP, &{
            let mut p = V4::new(P_TCP).build(&tcp(1000, 22, SYN, b""));
            p.truncate(20 + 13);
            p[2..4].copy_from_slice(&33u16.to_be_bytes());
            p
        }),
    );
    let (a, b) = (v6(A6), v6(B6));
    c.eth6("bad-v6-plen-big", ipv6(a, b, P_UDP, 64, &u, Some(100)));
    c.eth6("v6-plen-small", ipv6(a, b, P_UDP, 64, &u, Some(4)));
    c.add(
        "bad-v6-cut-39",
        ether(
            DST_MAC,
            SRC_MAC,
            &[],
            ET_IP6,
            &ipv6(a, b, P_UDP, 64, &[], None)[..39],
        ),
    );
    c.add(
        "bad-v6-version-4",
        ether(DST_MAC, SRC_MAC, &[], ET_IP6, &{
            let mut p = ipv6(a, b, P_UDP, 64, &u, None);
            p[0] = 0x40;
            p
        }),
    );
    c.add(
        "bad-vlan-v4-cut",
        ether(
            DST_MAC,
            SRC_MAC,
            &[(ET_8021Q, 6)],
            ET_IP,
            &V4::new(P_UDP).build(&[])[..10],
        ),
    );
    c.add(
        "jumbo-9000",
        ether(
            DST_MAC,
            SRC_MAC,
            &[],
            ET_IP,
            &V4::new(P_UDP).build(&udp(5000, 53, &vec![0; 9000 - 28], None)),
        ),
    );
    c.add(
        "jumbo-9000-tagged",
        ether(
            DST_MAC,
            SRC_MAC,
            &[(ET_8021Q, 6)],
            ET_IP,
            &V4::new(P_UDP).build(&udp(5000, 53, &vec![0; 9000 - 28], None)),
        ),
    );
    c.add(
        "too-long-9001",
        ether(
            DST_MAC,
            SRC_MAC,
            &[],
            ET_IP,
            &V4::new(P_UDP).build(&udp(5000, 53, &vec![0; 9001 - 28], None)),
        ),
    );
    c.add(
        "too-short-13",
        ether(DST_MAC, SRC_MAC, &[], ET_IP, &[])[..13].to_vec(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_follow_the_specs() {
        let f = ether(
            DST_MAC,
            SRC_MAC,
            &[(ET_8021Q, tci(5, 100))],
            ET_IP,
            &V4::new(P_UDP).build(&udp(1, 2, b"ab", None)),
        );
        // TPID at 12, TCI (pcp 5 -> 0xa0) at 14, inner type at 16, IPv4 at 18.
        assert_eq!(&f[12..18], &[0x81, 0x00, 0xa0, 100, 0x08, 0x00]);
        assert_eq!(f[18], 0x45);
        assert_eq!(u16::from_be_bytes([f[20], f[21]]), 20 + 8 + 2);
        assert_eq!(f[18 + 9], P_UDP);
        assert_eq!(u16::from_be_bytes([f[18 + 24], f[18 + 25]]), 10);
        let x = ipv6(
            v6(A6),
            v6(B6),
            P_FRAG,
            64,
            &frag6(P_UDP, 1, true, &[]),
            None,
        );
        assert_eq!(u16::from_be_bytes([x[4], x[5]]), 8);
        assert_eq!(&x[40..44], &[P_UDP, 0, 0, 9]);
        assert_eq!(ext(P_UDP, 1, &[]).len(), 16);
    }

    #[test]
    fn corpus_names_are_unique() {
        let c = corpus();
        let mut names: Vec<_> = c.iter().map(|g| g.name.as_str()).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n);
        assert!(n > 200, "{n}");
    }
}
