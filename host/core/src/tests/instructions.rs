//! One test per instruction kind, on hand-made frames.

use super::*;

fn t22() -> Vec<u8> {
    ipv4(6, [10, 1, 2, 3], [192, 168, 0, 1], 0, &tcp(40000, 22, SYN))
}

#[test]
fn ip_saddr_exact_prefix_and_negation() {
    let frames = vec![
        t22(),
        ipv4(6, [11, 1, 2, 3], [192, 168, 0, 1], 0, &tcp(1, 22, SYN)),
        ipv6(6, 3, &tcp(1, 22, SYN)),
    ];
    let l = || pf(PayloadField::named("ip", "saddr").unwrap());
    assert_eq!(
        accepts(vec![eq(l(), v4([10, 1, 2, 3]))], &frames),
        [true, false, false]
    );
    let pre = vec![mpart(
        RelOp::Eq,
        l(),
        vec![KeyPart::Prefix(v4([10, 0, 0, 0]), 8)],
    )];
    assert_eq!(accepts(pre, &frames), [true, false, false]);
    // `ip saddr != 10.0.0.0/8` still needs `meta protocol ip`: the IPv6 frame does not match.
    let ne = vec![mpart(
        RelOp::Ne,
        l(),
        vec![KeyPart::Prefix(v4([10, 0, 0, 0]), 8)],
    )];
    assert_eq!(accepts(ne, &frames), [false, true, false]);
}

#[test]
fn prefix_needs_only_the_bytes_it_covers() {
    // An IPv4 header cut after byte 12 of the network header (saddr's first byte): nft loads
    // 1 byte for a /8, so the /8 matches, while the full address read fails.
    let mut f = t22();
    f.truncate(14 + 13);
    let frames = vec![f];
    let l = || pf(PayloadField::named("ip", "saddr").unwrap());
    let pre = vec![mpart(
        RelOp::Eq,
        l(),
        vec![KeyPart::Prefix(v4([10, 0, 0, 0]), 8)],
    )];
    assert_eq!(accepts(pre, &frames), [true]);
    assert_eq!(accepts(vec![eq(l(), v4([10, 1, 2, 3]))], &frames), [false]);
    // `!=` on a failed read does not match either (NFT_BREAK, not "not equal").
    assert_eq!(
        accepts(vec![mt(RelOp::Ne, l(), v4([9, 9, 9, 9]))], &frames),
        [false]
    );
}

#[test]
fn ports_ranges_and_ordering() {
    let frames = vec![
        t22(),
        ipv4(6, [1, 1, 1, 1], [2, 2, 2, 2], 0, &tcp(1, 8080, 0)),
        ipv4(17, [1, 1, 1, 1], [2, 2, 2, 2], 0, &udp(1, 22)),
    ];
    let d = || pf(PayloadField::named("tcp", "dport").unwrap());
    assert_eq!(
        accepts(vec![eq(d(), port(22))], &frames),
        [true, false, false]
    );
    assert_eq!(
        accepts(vec![mt(RelOp::Ne, d(), port(22))], &frames),
        [false, true, false]
    );
    assert_eq!(
        accepts(vec![mt(RelOp::Lt, d(), port(1024))], &frames),
        [true, false, false]
    );
    assert_eq!(
        accepts(vec![mt(RelOp::Ge, d(), port(8080))], &frames),
        [false, true, false]
    );
    let range = vec![mpart(
        RelOp::Eq,
        d(),
        vec![KeyPart::Range(port(1), port(1024))],
    )];
    assert_eq!(accepts(range, &frames), [true, false, false]);
    let out = vec![mpart(
        RelOp::Ne,
        d(),
        vec![KeyPart::Range(port(1), port(1024))],
    )];
    assert_eq!(accepts(out, &frames), [false, true, false]);
    // th dport has no l4proto dependency: the UDP frame's port 22 matches too.
    assert_eq!(
        accepts(
            vec![eq(
                pf(PayloadField::named("th", "dport").unwrap()),
                port(22)
            )],
            &frames
        ),
        [true, false, true]
    );
}

#[test]
fn transport_reads_on_fragments_and_short_frames() {
    // Non-first fragment (offset 8 units = 64 bytes) whose data happens to look like a TCP
    // header to port 22: the kernel's fast path (2-byte aligned load) reads it at thoff.
    let frag = ipv4(6, [1, 1, 1, 1], [2, 2, 2, 2], 8, &tcp(1, 22, SYN));
    // First fragment (MF set, offset 0): a real header.
    let first = ipv4(6, [1, 1, 1, 1], [2, 2, 2, 2], 0x2000, &tcp(1, 22, SYN));
    // TCP header cut after the source port.
    let mut short = t22();
    short.truncate(14 + 20 + 2);
    short[14 + 3] = 22; // total length 22 so the IPv4 header validates
    short[14 + 2] = 0;
    let frames = vec![frag, first, short];
    assert_eq!(
        accepts(
            vec![eq(
                pf(PayloadField::named("tcp", "dport").unwrap()),
                port(22)
            )],
            &frames
        ),
        [true, true, false]
    );
    assert_eq!(
        accepts(
            vec![eq(
                pf(PayloadField::named("th", "dport").unwrap()),
                port(22)
            )],
            &frames
        ),
        [true, true, false]
    );
    let syn = mt(
        RelOp::Implicit,
        pf(PayloadField::named("tcp", "flags").unwrap()),
        byte(DataType::TcpFlag, SYN),
    );
    assert_eq!(accepts(vec![syn], &frames), [true, true, false]);
    // meta l4proto still reads 6 for all three.
    let l4 = vec![eq(
        Expr::Meta(MetaKey::L4proto),
        byte(DataType::InetProto, 6),
    )];
    assert_eq!(accepts(l4, &frames), [true, true, true]);
}

#[test]
fn tcp_flags_implicit_and_masked() {
    let frames = vec![
        ipv4(6, [1; 4], [2; 4], 0, &tcp(1, 2, SYN)),
        ipv4(6, [1; 4], [2; 4], 0, &tcp(1, 2, SYN | ACK)),
        ipv4(6, [1; 4], [2; 4], 0, &tcp(1, 2, ACK)),
    ];
    let fl = || pf(PayloadField::named("tcp", "flags").unwrap());
    // `tcp flags syn`: (flags & syn) != 0
    let imp = vec![mt(RelOp::Implicit, fl(), byte(DataType::TcpFlag, SYN))];
    assert_eq!(accepts(imp, &frames), [true, true, false]);
    // `tcp flags == syn`: exact
    assert_eq!(
        accepts(vec![eq(fl(), byte(DataType::TcpFlag, SYN))], &frames),
        [true, false, false]
    );
    // `tcp flags & (syn|ack) == syn`
    let masked = Expr::Binop {
        expr: Box::new(fl()),
        op: BinOp::And,
        value: byte(DataType::TcpFlag, SYN | ACK),
    };
    assert_eq!(
        accepts(vec![eq(masked, byte(DataType::TcpFlag, SYN))], &frames),
        [true, false, false]
    );
}

#[test]
fn vlan_fields_and_dependencies() {
    let base = ipv4(17, [1; 4], [2; 4], 0, &udp(1, 53));
    let q100 = tag(&base, 0x8100, (3 << 13) | 100);
    let ad100 = tag(&base, 0x88a8, 100);
    let qinq = tag(&tag(&base, 0x8100, 200), 0x88a8, 100);
    let frames = vec![base.clone(), q100, ad100, qinq];
    let id = |d| pf(PayloadField::named("vlan", "id").unwrap().at_depth(d));
    let vid = |v: u16| val(DataType::Integer(12), &v.to_be_bytes());
    // `vlan id 100` depends on `ether type 8021q`.
    assert_eq!(
        accepts(vec![eq(id(0), vid(100))], &frames),
        [false, true, false, false]
    );
    // With an explicit `ether type 8021ad`, no implicit 8021q dependency.
    let ad = vec![
        eq(
            pf(PayloadField::named("ether", "type").unwrap()),
            val(DataType::EtherType, &[0x88, 0xa8]),
        ),
        eq(id(0), vid(100)),
    ];
    assert_eq!(accepts(ad, &frames), [false, false, true, true]);
    // Second tag: `... vlan type 8021q vlan id 200` reads at link + 18.
    let inner = vec![
        eq(
            pf(PayloadField::named("ether", "type").unwrap()),
            val(DataType::EtherType, &[0x88, 0xa8]),
        ),
        eq(
            pf(PayloadField::named("vlan", "type").unwrap().at_depth(0)),
            val(DataType::EtherType, &[0x81, 0x00]),
        ),
        eq(id(1), vid(200)),
    ];
    assert_eq!(accepts(inner, &frames), [false, false, false, true]);
    // vlan pcp 3
    let pcp = vec![eq(
        pf(PayloadField::named("vlan", "pcp").unwrap().at_depth(0)),
        byte(DataType::Integer(3), 3),
    )];
    assert_eq!(accepts(pcp, &frames), [false, true, false, false]);
    // With the tag popped, `ip saddr` still reads at network header 18 and `meta protocol` is ip.
    let ip = vec![eq(
        pf(PayloadField::named("ip", "saddr").unwrap()),
        v4([1; 4]),
    )];
    assert_eq!(accepts(ip, &frames), [true, true, true, false]);
}

#[test]
fn meta_keys() {
    let f = t22();
    let q = tag(&f, 0x8100, 5);
    let frames = vec![f.clone(), q];
    // meta len: frame minus Ethernet header (and the popped tag): 54 - 14 = 40 both times.
    assert_eq!(f.len(), 54);
    let len = |op, n: u32| {
        vec![mt(
            op,
            Expr::Meta(MetaKey::Len),
            val(DataType::Integer(32), &n.to_be_bytes()),
        )]
    };
    assert_eq!(accepts(len(RelOp::Eq, 40), &frames), [true, true]);
    assert_eq!(accepts(len(RelOp::Gt, 40), &frames), [false, false]);
    let proto = vec![eq(
        Expr::Meta(MetaKey::Protocol),
        val(DataType::EtherType, &[8, 0]),
    )];
    assert_eq!(accepts(proto, &frames), [true, true]);
    let ifn = |n, w| vec![eq(Expr::Meta(MetaKey::Iifname), ifname(n, w))];
    assert_eq!(accepts(ifn("eth0", false), &frames), [true, true]);
    assert_eq!(accepts(ifn("eth", false), &frames), [false, false]);
    assert_eq!(accepts(ifn("eth", true), &frames), [true, true]);
    assert_eq!(accepts(ifn("et0", true), &frames), [false, false]);
    // oifname at ingress is empty.
    let oif = vec![eq(Expr::Meta(MetaKey::Oifname), ifname("", false))];
    assert_eq!(accepts(oif, &frames), [true, true]);
}

#[test]
fn ip6_icmp_and_exthdr() {
    let mut rt = pkt_owned(ipv6(6, 7, &tcp(1, 22, SYN)));
    rt.1.ip6_exthdrs = wasp_wire::meta::exthdr_bit(43).unwrap();
    let plain = pkt_owned(ipv6(58, 7, &[128, 0, 0, 0]));
    let v4icmp = pkt_owned(ipv4(1, [1; 4], [2; 4], 0, &[8, 0, 0, 0]));
    let mut saddr = [0u8; 16];
    saddr[0] = 0x20;
    saddr[1] = 0x01;
    saddr[15] = 7;
    let cases: Vec<(Vec<Stmt>, [bool; 3])> = vec![
        (
            vec![eq(
                pf(PayloadField::named("ip6", "saddr").unwrap()),
                val(DataType::Ipv6Addr, &saddr),
            )],
            [true, true, false],
        ),
        (
            vec![eq(
                Expr::ExthdrExists(Ip6ExtHdr::Routing),
                byte(DataType::Boolean, 1),
            )],
            [true, false, false],
        ),
        (
            vec![eq(
                Expr::ExthdrExists(Ip6ExtHdr::Routing),
                byte(DataType::Boolean, 0),
            )],
            [false, true, false],
        ),
        (
            vec![eq(
                pf(PayloadField::named("icmpv6", "type").unwrap()),
                byte(DataType::Icmpv6Type, 128),
            )],
            [false, true, false],
        ),
        (
            vec![eq(
                pf(PayloadField::named("icmp", "type").unwrap()),
                byte(DataType::IcmpType, 8),
            )],
            [false, false, true],
        ),
        (
            vec![eq(
                pf(PayloadField::named("ip6", "flowlabel").unwrap()),
                val(DataType::Integer(20), &[0, 0, 5]),
            )],
            [true, true, false],
        ),
    ];
    for (stmts, want) in cases {
        let mut s = stmts.clone();
        s.push(accept());
        let mut e = one(Policy::Drop, vec![s]);
        let got: Vec<bool> = [&rt, &plain, &v4icmp]
            .iter()
            .map(|(f, m)| {
                let p = Packet {
                    frame: f,
                    meta: *m,
                    iifname: "eth0",
                    mark: 0,
                    oifname: "",
                    ct: crate::CtMeta::NONE,
                    ct_detail: None,
                    nftrace: false,
                    route: None,
                };
                e.one("eth0", &p, 0, 0, None).0.verdict == FinalVerdict::Accept
            })
            .collect();
        assert_eq!(got, want, "{stmts:?}");
    }
}

fn pkt_owned(f: Vec<u8>) -> (Vec<u8>, PacketMeta) {
    let m = meta_of(&f);
    (f, m)
}

#[test]
fn sets_exact_ranges_concat_named_and_negated() {
    let frames = vec![
        t22(),
        ipv4(6, [10, 0, 0, 2], [2; 4], 0, &tcp(1, 80, 0)),
        ipv4(6, [10, 0, 0, 3], [2; 4], 0, &tcp(1, 443, 0)),
        ipv4(6, [10, 0, 0, 4], [2; 4], 0, &tcp(1, 5000, 0)),
    ];
    let d = || pf(PayloadField::named("tcp", "dport").unwrap());
    let anon = SetRef::Anonymous(vec![
        elem(vec![kv(port(22))], None),
        elem(vec![kv(port(80))], None),
    ]);
    assert_eq!(
        accepts(vec![in_set(RelOp::Eq, d(), anon.clone())], &frames),
        [true, true, false, false]
    );
    assert_eq!(
        accepts(vec![in_set(RelOp::Ne, d(), anon)], &frames),
        [false, false, true, true]
    );
    let ranges = SetRef::Anonymous(vec![
        elem(vec![KeyPart::Range(port(400), port(500))], None),
        elem(vec![kv(port(22))], None),
    ]);
    assert_eq!(
        accepts(vec![in_set(RelOp::Eq, d(), ranges)], &frames),
        [true, false, true, false]
    );
    // ip saddr . tcp dport { 10.1.2.3 . 22, 10.0.0.0/24 . 5000 }
    let cat = Expr::Concat(vec![pf(PayloadField::named("ip", "saddr").unwrap()), d()]);
    let cset = SetRef::Anonymous(vec![
        elem(vec![kv(v4([10, 1, 2, 3])), kv(port(22))], None),
        elem(
            vec![KeyPart::Prefix(v4([10, 0, 0, 0]), 24), kv(port(5000))],
            None,
        ),
    ]);
    assert_eq!(
        accepts(vec![in_set(RelOp::Eq, cat.clone(), cset)], &frames),
        [true, false, false, true]
    );
    // A concatenated single key: ip saddr . tcp dport 10.0.0.2 . 80
    let key = mpart(RelOp::Eq, cat, vec![kv(v4([10, 0, 0, 2])), kv(port(80))]);
    assert_eq!(accepts(vec![key], &frames), [false, true, false, false]);
    // Named set @web { 80, 443 }
    let decl = SetDecl {
        name: "web".into(),
        handle: 0,
        is_map: false,
        key: vec![DataType::InetService],
        key_typeof: None,
        data_typeof: None,
        data: None,
        data_tail: Vec::new(),
        flags: SetFlags::default(),
        timeout_ms: None,
        gc_interval_ms: None,
        size: None,
        counter: false,
        elements: vec![
            elem(vec![kv(port(80))], None),
            elem(vec![kv(port(443))], None),
        ]
        .into(),
        comment: None,
        span: Span::default(),
    };
    let rs = ruleset(vec![table(
        Family::Netdev,
        "t",
        vec![chain(
            "c",
            Some((0, Policy::Drop)),
            vec![rule(vec![
                in_set(RelOp::Eq, d(), SetRef::Named("web".into())),
                accept(),
            ])],
        )],
        vec![decl],
    )]);
    let mut e = Engine::compile(&rs).unwrap();
    let got: Vec<FinalVerdict> = run(&mut e, &frames).iter().map(|o| o.verdict).collect();
    use FinalVerdict::{Accept as A, Drop as D};
    assert_eq!(got, [D, A, A, D]);
}

#[test]
fn verdict_map_and_mark() {
    let frames = vec![
        t22(),
        ipv4(6, [1; 4], [2; 4], 0, &tcp(1, 23, 0)),
        ipv4(6, [1; 4], [2; 4], 0, &tcp(1, 24, 0)),
    ];
    let vmap = Stmt::VerdictMap {
        key: pf(PayloadField::named("tcp", "dport").unwrap()),
        map: SetRef::Anonymous(vec![
            elem(vec![kv(port(22))], Some(ElemData::Verdict(Verdict::Accept))),
            elem(vec![kv(port(23))], Some(ElemData::Verdict(Verdict::Drop))),
        ]),
        span: Span::default(),
    };
    // policy accept; port 24 misses the map and falls to the next rule, which sets mark 7.
    let mut e = one(Policy::Accept, vec![vec![vmap], vec![set_mark(7)]]);
    let out = run(&mut e, &frames);
    assert_eq!(out[0].verdict, FinalVerdict::Accept);
    assert_eq!(out[0].decision.unwrap().rule, Some(2));
    assert_eq!(out[1].verdict, FinalVerdict::Drop);
    assert_eq!(out[1].decision.unwrap().rule, Some(2));
    assert_eq!(
        (out[2].verdict, out[2].decision.unwrap().rule, out[2].mark),
        (FinalVerdict::Accept, None, 7)
    );
    assert_eq!(out[0].mark, 0);
}

/// A non-first IPv6 fragment: `ipv6_find_hdr` returns the fragment header's next header without
/// writing the offset, so the kernel's `thoff` stays 0 and fast-path transport loads read the
/// IPv6 header itself (here `tcp dport` reads bytes 2..4, the low half of the flow label, 5).
/// A first fragment reads the real TCP header behind the fragment header.
#[test]
fn non_first_ipv6_fragment_reads_the_ipv6_header() {
    let frag6 = |off_units: u16| {
        let mut fh = vec![6u8, 0];
        fh.extend_from_slice(&((off_units << 3) | 1).to_be_bytes());
        fh.extend_from_slice(&[0, 0, 0x12, 0x34]);
        fh.extend_from_slice(&tcp(1000, 22, SYN));
        ipv6(44, 2, &fh)
    };
    let later = frag6(100);
    let first = frag6(0);
    let m = wasp_wire::parse(&later);
    let l4 = m.l4.expect("validated");
    assert_eq!((l4.proto, l4.offset, l4.fragoff), (6, 14, 800));
    let frames = vec![later, first];
    let dport = |p| {
        vec![eq(
            pf(PayloadField::named("tcp", "dport").unwrap()),
            port(p),
        )]
    };
    assert_eq!(accepts(dport(5), &frames), [true, false]);
    assert_eq!(accepts(dport(22), &frames), [false, true]);
    // tcp sport reads bytes 0..2 of the IPv6 header: 0x6000.
    let sport = vec![eq(
        pf(PayloadField::named("tcp", "sport").unwrap()),
        port(0x6000),
    )];
    assert_eq!(accepts(sport, &frames), [true, false]);
    // tcp flags reads byte 13 (source address byte 5, 0 here): `tcp flags == 0`.
    let flags0 = vec![eq(
        pf(PayloadField::named("tcp", "flags").unwrap()),
        byte(DataType::TcpFlag, 0),
    )];
    assert_eq!(accepts(flags0, &frames), [true, false]);
}

fn u4(sport: u16, dport: u16, frag: u16) -> Vec<u8> {
    ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], frag, &udp(sport, dport))
}

/// nft 1.0.6 merges `udp dport != 31337 udp sport != 12345` into one 4-byte `cmp neq`: the rule
/// matches when EITHER port differs (the kernel accepts 12345 -> 31338 and 40000 -> 31337 with
/// it; conformance 05-tcp-udp), not only when both do.
#[test]
fn merged_neq_ports_match_when_either_differs() {
    let rule = vec![
        mt(
            RelOp::Ne,
            pf(PayloadField::named("udp", "dport").unwrap()),
            port(31337),
        ),
        mt(
            RelOp::Ne,
            pf(PayloadField::named("udp", "sport").unwrap()),
            port(12345),
        ),
    ];
    let frames = vec![
        u4(12345, 31338, 0),
        u4(40000, 31337, 0),
        u4(12345, 31337, 0),
        u4(1, 2, 0),
    ];
    assert_eq!(accepts(rule, &frames), [true, true, false, true]);
    // `==` and `!=` do not merge: both must hold.
    let mixed = vec![
        mt(
            RelOp::Ne,
            pf(PayloadField::named("udp", "sport").unwrap()),
            port(12345),
        ),
        eq(
            pf(PayloadField::named("udp", "dport").unwrap()),
            port(31338),
        ),
    ];
    assert_eq!(accepts(mixed, &frames), [false, false, false, false]);
}

/// `udp dport 53 udp length 8` merges into a 4-byte load at transport + 2: not a fast-path load,
/// so it fails on a non-first fragment, where `udp dport 53` alone (2 bytes at 2) still reads
/// the fragment's bytes. `udp sport 5000 udp dport 53` merges into 4 bytes at 0: fast, reads.
#[test]
fn merged_loads_take_the_kernels_path_on_fragments() {
    let frames = vec![u4(5000, 53, 0), u4(5000, 53, 1)];
    let dport = || eq(pf(PayloadField::named("udp", "dport").unwrap()), port(53));
    let len8 = || eq(pf(PayloadField::named("udp", "length").unwrap()), port(8));
    let sport = || eq(pf(PayloadField::named("udp", "sport").unwrap()), port(5000));
    assert_eq!(accepts(vec![dport()], &frames), [true, true]);
    assert_eq!(accepts(vec![dport(), len8()], &frames), [true, false]);
    assert_eq!(accepts(vec![sport(), dport()], &frames), [true, true]);
    // A range is not merged: two fast 2-byte loads, both read the fragment.
    let range = mpart(
        RelOp::Eq,
        pf(PayloadField::named("udp", "length").unwrap()),
        vec![KeyPart::Range(port(8), port(8))],
    );
    assert_eq!(accepts(vec![dport(), range], &frames), [true, true]);
}

/// nft 1.0.6 keeps a lone payload match in its merge run across a counter: `udp sport 1 counter
/// udp dport 2` becomes one 4-byte match in front of the counter, which then counts only
/// packets with both ports (`[ payload load 4b @ transport header + 0 ] [ cmp eq ]
/// [ counter ]`).
#[test]
fn lone_match_merges_across_a_counter() {
    let rule = vec![
        eq(pf(PayloadField::named("udp", "sport").unwrap()), port(1)),
        counter(),
        eq(pf(PayloadField::named("udp", "dport").unwrap()), port(2)),
        accept(),
    ];
    let mut e = one(Policy::Drop, vec![rule]);
    let mut c = count(&mut e);
    let out = run(&mut e, &[u4(1, 2, 0), u4(1, 3, 0), u4(4, 2, 0)]);
    let acc: Vec<bool> = out
        .iter()
        .map(|o| o.verdict == FinalVerdict::Accept)
        .collect();
    assert_eq!(acc, [true, false, false]);
    assert_eq!(e.counters(&mut c)[0].packets, 1);
}

/// After a link-layer field, nft writes the dependency of a network field as the header's own
/// protocol field, not `meta protocol`: `ether saddr X ip saddr Y` checks `ether type ip` at
/// link + 12 (0x8100 in a tagged frame, as the kernel rebuilds it), `vlan id 5 ip saddr Y`
/// checks `vlan type ip` at link + 16. An explicit `meta protocol ip` leaves no dependency to add.
#[test]
fn network_dependency_follows_the_link_layer_context() {
    let base = ipv4(17, [1; 4], [2; 4], 0, &udp(1, 53));
    let q5 = tag(&base, 0x8100, 5);
    let frames = vec![base.clone(), q5];
    let mac = || {
        eq(
            pf(PayloadField::named("ether", "saddr").unwrap()),
            val(DataType::EtherAddr, &MAC_S),
        )
    };
    let saddr = || eq(pf(PayloadField::named("ip", "saddr").unwrap()), v4([1; 4]));
    assert_eq!(accepts(vec![saddr()], &frames), [true, true]);
    assert_eq!(accepts(vec![mac(), saddr()], &frames), [true, false]);
    // The context outlives a counter (nft 1.0.6 even merges the two across it).
    assert_eq!(
        accepts(vec![mac(), counter(), saddr()], &frames),
        [true, false]
    );
    let proto_ip = eq(
        Expr::Meta(MetaKey::Protocol),
        val(DataType::EtherType, &[0x08, 0x00]),
    );
    assert_eq!(
        accepts(vec![mac(), proto_ip, saddr()], &frames),
        [true, true]
    );
    let vid5 = eq(
        pf(PayloadField::named("vlan", "id").unwrap().at_depth(0)),
        val(DataType::Integer(12), &5u16.to_be_bytes()),
    );
    assert_eq!(accepts(vec![vid5, saddr()], &frames), [false, true]);
}
