//! Meta keys and protocol fields from the tables of `wasp_ruleset::meta_keys` and
//! `wasp_ruleset::proto`, compiled from nft text and run on frames: what each key reads on
//! wasp's paths.

use super::*;

/// Verdicts of `frames` (received on `eth0` at `now_ns`) under one netdev ingress rule
/// `RULE accept` in a chain with policy drop; `true` for accept.
fn text_accepts(rule: &str, frames: &[Vec<u8>], now_ns: u64) -> Vec<bool> {
    let text = format!(
        "table netdev t {{\n chain c {{\n  type filter hook ingress device \"eth0\" priority 0; policy drop;\n  {rule} accept\n }}\n}}\n"
    );
    let rs = wasp_ruleset::parse_str(&text, "keys.nft").expect("parses");
    let mut e = Engine::compile(&rs).expect("compiles");
    run_at(&mut e, frames, now_ns)
        .iter()
        .map(|o| o.verdict == FinalVerdict::Accept)
        .collect()
}

fn with_dst_mac(mut f: Vec<u8>, mac: [u8; 6]) -> Vec<u8> {
    f[..6].copy_from_slice(&mac);
    f
}

#[test]
fn pkttype_reads_the_destination_address() {
    let f = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], 0, &udp(1, 2));
    let frames = [
        with_dst_mac(f.clone(), [0xff; 6]),
        with_dst_mac(f.clone(), [0x01, 0, 0x5e, 0, 0, 1]),
        with_dst_mac(f, [0x02, 0, 0, 0, 0, 1]),
    ];
    assert_eq!(
        text_accepts("meta pkttype broadcast", &frames, 0),
        [true, false, false]
    );
    assert_eq!(
        text_accepts("meta pkttype multicast", &frames, 0),
        [false, true, false]
    );
    assert_eq!(
        text_accepts("meta pkttype host", &frames, 0),
        [false, false, true]
    );
    // Once the device's own address is known, a unicast frame to another one is `other`
    // (PACKET_OTHERHOST), as the kernel's eth_type_trans decides.
    let mut other = frames.to_vec();
    other.push(with_dst_mac(frames[2].clone(), [0x02, 0, 0, 0, 0, 9]));
    for (rule, want) in [
        ("meta pkttype host", [false, false, true, false]),
        ("meta pkttype other", [false, false, false, true]),
        ("meta pkttype broadcast", [true, false, false, false]),
    ] {
        let text = format!(
            "table netdev t {{\n chain c {{\n  type filter hook ingress device \"eth0\" priority 0; policy drop;\n  {rule} accept\n }}\n}}\n"
        );
        let rs = wasp_ruleset::parse_str(&text, "keys.nft").expect("parses");
        let mut e = Engine::compile(&rs).expect("compiles");
        e.set_device_mac("eth0", [0x02, 0, 0, 0, 0, 1]);
        let got: Vec<bool> = run_at(&mut e, &other, 0)
            .iter()
            .map(|o| o.verdict == FinalVerdict::Accept)
            .collect();
        assert_eq!(got, want, "{rule}");
    }
}

#[test]
fn socket_keys_never_match_negated_or_not() {
    let f = vec![ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 0, &tcp(1, 22, SYN))];
    for rule in [
        "meta skuid 0",
        "meta skuid != 0",
        "meta skgid != 1",
        "meta cgroup != 5",
        "meta rtclassid != 3",
    ] {
        assert_eq!(text_accepts(rule, &f, 0), [false], "{rule}");
    }
}

#[test]
fn device_keys_read_wasp_s_ports() {
    let f = vec![ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 0, &tcp(1, 22, SYN))];
    assert_eq!(text_accepts("iif \"eth0\"", &f, 0), [true]);
    assert_eq!(text_accepts("iif \"eth1\"", &f, 0), [false]);
    assert_eq!(text_accepts("meta iiftype ether", &f, 0), [true]);
    assert_eq!(text_accepts("iifgroup \"default\"", &f, 0), [true]);
    assert_eq!(text_accepts("iifgroup 1", &f, 0), [false]);
    assert_eq!(text_accepts("meta priority none", &f, 0), [true]);
    assert_eq!(text_accepts("meta cpu 0", &f, 0), [true]);
}

#[test]
fn clock_keys_read_the_packet_time_in_utc() {
    let f = vec![ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 0, &tcp(1, 22, SYN))];
    // 2019-06-21 17:00:00 UTC, a Friday.
    let t = 1_561_136_400u64 * 1_000_000_000;
    assert_eq!(
        text_accepts("meta time \"2019-06-21 17:00:00\"", &f, t),
        [true]
    );
    assert_eq!(text_accepts("meta day \"Friday\"", &f, t), [true]);
    assert_eq!(text_accepts("meta day \"Saturday\"", &f, t), [false]);
    assert_eq!(text_accepts("meta hour \"16:00\"-\"18:00\"", &f, t), [true]);
    // Wrapping around midnight: 21:00 to 02:00 does not hold 17:00.
    assert_eq!(
        text_accepts("meta hour \"21:00\"-\"02:00\"", &f, t),
        [false]
    );
}

#[test]
fn new_transport_headers_read_their_fields() {
    // ESP (50): spi at 0, sequence at 4.
    let mut esp = vec![0, 0, 0, 100, 0, 0, 0, 7];
    esp.extend([0; 8]);
    let f = vec![ipv4(50, [10, 0, 0, 1], [10, 0, 0, 2], 0, &esp)];
    assert_eq!(text_accepts("esp spi 100", &f, 0), [true]);
    assert_eq!(text_accepts("esp sequence 7", &f, 0), [true]);
    assert_eq!(text_accepts("ah spi 100", &f, 0), [false]);
    // DCCP (33): type in bits 3..7 of byte 8.
    let mut dccp = vec![0u8; 16];
    dccp[8] = 4 << 1; // dataack
    let f = vec![ipv4(33, [10, 0, 0, 1], [10, 0, 0, 2], 0, &dccp)];
    assert_eq!(text_accepts("dccp type dataack", &f, 0), [true]);
    assert_eq!(text_accepts("dccp type ack", &f, 0), [false]);
}

#[test]
fn ipv6_extension_header_fields_are_found_in_the_chain() {
    // A fragment header (44) with offset 22 (in 8-byte units), then UDP.
    let mut frag = vec![17, 0];
    frag.extend((22u16 << 3).to_be_bytes());
    frag.extend([0, 0, 0, 9]);
    frag.extend(udp(1, 2));
    let f = vec![ipv6(44, 1, &frag), ipv6(17, 1, &udp(1, 2))];
    assert_eq!(text_accepts("frag frag-off 22", &f, 0), [true, false]);
    assert_eq!(text_accepts("frag id 9", &f, 0), [true, false]);
    // No fragment header: no match, negated or not.
    assert_eq!(text_accepts("frag id != 1", &f, 0), [true, false]);
}

#[test]
fn icmpv6_in_an_ip_table_has_no_network_dependency() {
    // The kernel's bytecode for `icmpv6 type 1` in an ip table is `meta l4proto 58` alone.
    let icmp6 = [1u8, 0, 0, 0, 0, 0, 0, 0];
    let text = "table ip t {\n chain c {\n  type filter hook prerouting priority 0; policy drop;\n  icmpv6 type destination-unreachable accept\n }\n}\n";
    let rs = wasp_ruleset::parse_str(text, "k.nft").expect("parses");
    let e = Engine::compile(&rs).expect("compiles");
    let f = ipv4(58, [10, 0, 0, 1], [10, 0, 0, 2], 0, &icmp6);
    let p = pkt(&f);
    let mut e = e;
    let mut out = [Outcome::unseen(0)];
    e.ip_hook(
        wasp_ruleset::model::Hook::Prerouting,
        &[p],
        0,
        &mut out,
        None,
    );
    assert_eq!(out[0].verdict, FinalVerdict::Accept);
}

#[test]
fn tcp_options_are_found_by_walking_the_header() {
    // TCP header with doff 8: NOP, NOP, MSS 1460 (kind 2, len 4), window scale 7 (3, 3), EOL.
    let mut t = tcp(1000, 22, SYN);
    t[12] = 8 << 4;
    t.extend([1, 1, 2, 4, 0x05, 0xb4, 3, 3, 7, 0, 0, 0]);
    let u = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], 0, &udp(1, 2));
    let f = vec![ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 0, &t), u];
    assert_eq!(
        text_accepts("tcp option maxseg size 1460", &f, 0),
        [true, false]
    );
    assert_eq!(
        text_accepts("tcp option window count 7", &f, 0),
        [true, false]
    );
    assert_eq!(
        text_accepts("tcp option maxseg size 1400", &f, 0),
        [false, false]
    );
    // Presence never fails: a UDP packet has no tcp option at all.
    assert_eq!(
        text_accepts("tcp option timestamp missing", &f, 0),
        [true, true]
    );
    assert_eq!(
        text_accepts("tcp option window exists", &f, 0),
        [true, false]
    );
    assert_eq!(
        text_accepts("tcp option @2,16,16 1460", &f, 0),
        [true, false]
    );
}

#[test]
fn sctp_chunks_are_found_by_walking_the_packet() {
    // Common header (12 bytes), a DATA chunk of 20 bytes (stream 1337), then INIT (flags 23).
    let mut s = vec![0u8; 12];
    let mut data = vec![0u8, 0, 0, 20, 0, 0, 0, 1];
    data.extend(1337u16.to_be_bytes());
    data.extend([0; 10]);
    s.extend(&data);
    s.extend([1, 23, 0, 20]);
    s.extend([0; 16]);
    let f = vec![ipv4(132, [10, 0, 0, 1], [10, 0, 0, 2], 0, &s)];
    assert_eq!(text_accepts("sctp chunk data stream 1337", &f, 0), [true]);
    assert_eq!(text_accepts("sctp chunk init flags 23", &f, 0), [true]);
    assert_eq!(text_accepts("sctp chunk sack exists", &f, 0), [false]);
    assert_eq!(text_accepts("sctp chunk sack missing", &f, 0), [true]);
}

#[test]
fn raw_payload_reads_from_its_base() {
    let mut u = udp(1000, 53);
    u.extend([0x14, 0, 0, 0]);
    let f = vec![ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], 0, &u)];
    // The IPv4 header's TTL byte, the UDP destination port, the first payload word.
    assert_eq!(text_accepts("@nh,64,8 64", &f, 0), [true]);
    assert_eq!(text_accepts("@th,16,16 53", &f, 0), [true]);
    assert_eq!(text_accepts("@ih,0,32 0x14000000", &f, 0), [true]);
    assert_eq!(text_accepts("@ih,0,32 0x14000001", &f, 0), [false]);
    // Unaligned: bit 3 of the first payload byte (0x14 = 0b0001_0100).
    assert_eq!(text_accepts("@ih,3,1 1", &f, 0), [true]);
    assert_eq!(text_accepts("@ih,4,1 1", &f, 0), [false]);
}

#[test]
fn ct_keys_read_the_connection_detail() {
    use crate::{CtDetail, CtMeta, CtTuple};
    let f = ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 0, &tcp(1000, 22, ACK));
    let mut reply = CtTuple::default();
    reply.src[..4].copy_from_slice(&[192, 0, 2, 7]);
    reply.sport = 22;
    let detail = CtDetail {
        l3proto: 2,
        protocol: 6,
        reply,
        expires_ms: 30_000,
        packets: [3, 2],
        bytes: [300, 1000],
        ..CtDetail::default()
    };
    let run = |rule: &str, with: bool| -> bool {
        let text = format!(
            "table ip t {{\n chain c {{\n  type filter hook prerouting priority 0; policy drop;\n  {rule} accept\n }}\n}}\n"
        );
        let rs = wasp_ruleset::parse_str(&text, "ct.nft").expect("parses");
        let mut e = Engine::compile(&rs).expect("compiles");
        let mut p = pkt(&f);
        p.ct = CtMeta {
            id: 9,
            ..CtMeta::NONE
        };
        p.ct_detail = with.then_some(&detail);
        let mut out = [Outcome::unseen(0)];
        e.ip_hook(
            wasp_ruleset::model::Hook::Prerouting,
            &[p],
            0,
            &mut out,
            None,
        );
        out[0].verdict == FinalVerdict::Accept
    };
    assert!(run("ct reply ip saddr 192.0.2.7", true));
    assert!(!run("ct reply ip saddr 192.0.2.8", true));
    assert!(run("ct protocol tcp ct reply proto-src 22", true));
    assert!(run("ct expiration 30s", true));
    assert!(run("ct bytes 1300", true));
    assert!(run("ct original packets 3", true));
    assert!(run("ct reply avgpkt 500", true));
    assert!(run("ct l3proto ipv4", true));
    // Without the detail (no live entry) the keys end the rule, negated or not.
    assert!(!run("ct bytes != 5", false));
    // No helpers in wasp.
    assert!(!run("ct helper != \"ftp\"", true));
}

#[test]
fn payload_statement_writes_the_field_and_its_checksums() {
    // A TCP packet with correct IPv4 and TCP checksums.
    let mut f = ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 0, &tcp(1000, 22, SYN));
    let ip = 14;
    let th = ip + 20;
    let csum = |b: &[u8]| {
        let mut s: u32 = b
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
            .sum();
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    };
    let tcp_csum = |f: &[u8]| {
        let seg = &f[th..];
        let mut pseudo = f[ip + 12..ip + 20].to_vec();
        pseudo.extend([0, 6]);
        pseudo.extend((seg.len() as u16).to_be_bytes());
        pseudo.extend(seg);
        csum(&pseudo)
    };
    f[ip + 10..ip + 12].copy_from_slice(&[0, 0]);
    let c = csum(&f[ip..ip + 20]);
    f[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
    f[th + 16..th + 18].copy_from_slice(&[0, 0]);
    let c = tcp_csum(&f);
    f[th + 16..th + 18].copy_from_slice(&c.to_be_bytes());
    let text = "table netdev t {\n chain c {\n  type filter hook ingress device \"eth0\" priority 0; policy drop;\n  ip daddr set 192.0.2.9 tcp dport set 8080\n  ip daddr 192.0.2.9 tcp dport 8080 accept\n }\n}\n";
    let rs = wasp_ruleset::parse_str(text, "set.nft").expect("parses");
    let mut e = Engine::compile(&rs).expect("compiles");
    let frames = [f.clone()];
    let pk = [pkt(&f)];
    let mut out = [Outcome::unseen(0)];
    let res = e.ingress("eth0", &pk, 0, &mut out, None);
    // The second rule saw the edited packet.
    assert_eq!(out[0].verdict, FinalVerdict::Accept);
    let edited = res.edited_frames(frames.iter().map(Vec::as_slice));
    let g = edited[0].as_ref().expect("the packet was edited");
    assert_eq!(&g[ip + 16..ip + 20], &[192, 0, 2, 9]);
    assert_eq!(&g[th + 2..th + 4], &8080u16.to_be_bytes());
    // Both checksums are what a full computation gives.
    assert_eq!(csum(&g[ip..ip + 20]), 0);
    let mut z = g.clone();
    z[th + 16..th + 18].copy_from_slice(&[0, 0]);
    assert_eq!(&g[th + 16..th + 18], &tcp_csum(&z).to_be_bytes());
    // The same packet in a vector of three (the pipeline) and alone (the plain walk): the
    // same verdicts and the same edited frames.
    let mut other = f.clone();
    other[th + 2..th + 4].copy_from_slice(&81u16.to_be_bytes());
    let three = [pkt(&f), pkt(&other), pkt(&f)];
    let mut out3 = [Outcome::unseen(0); 3];
    let res3 = e.ingress("eth0", &three, 0, &mut out3, None);
    let frames3 = [f.clone(), other.clone(), f.clone()];
    let edited3 = res3.edited_frames(frames3.iter().map(Vec::as_slice));
    for (i, frame) in frames3.iter().enumerate() {
        let mut one = [Outcome::unseen(0)];
        let res1 = e.ingress("eth0", &[pkt(frame)], 0, &mut one, None);
        assert_eq!(one[0], out3[i], "packet {i}");
        let edited1 = res1.edited_frames(std::iter::once(frame.as_slice()));
        assert_eq!(edited1[0], edited3[i], "packet {i}");
        assert_eq!(one[0].verdict, FinalVerdict::Accept);
    }
}

#[test]
fn ipsec_socket_and_osf_read_the_state_wasp_has() {
    let syn = ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 0, &tcp(1000, 22, SYN));
    let ack = ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 0, &tcp(1000, 22, ACK));
    let f = vec![syn, ack];
    // No IPsec state, no local sockets: never, negated or not.
    assert_eq!(text_accepts("ipsec in reqid != 1", &f, 0), [false, false]);
    assert_eq!(
        text_accepts("socket transparent != 1", &f, 0),
        [false, false]
    );
    // No fingerprints: a SYN is "unknown", other packets have no fingerprint at all.
    assert_eq!(text_accepts("osf name \"unknown\"", &f, 0), [true, false]);
    assert_eq!(text_accepts("osf name != \"Linux\"", &f, 0), [true, false]);
}

#[test]
fn l4proto_negated_never_matches_a_frame_without_a_transport_protocol() {
    // nft_meta_get_eval: NFT_META_L4PROTO breaks to NFT_BREAK when the packet has no
    // transport header (`pkt->tprot_set` false): ARP and other non-IP frames fail the
    // comparison whatever its operator.
    let arp = eth(0x0806, &[0, 1, 8, 0, 6, 4, 0, 1]);
    let other = eth(0x88b5, &[0x77; 46]);
    let u = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], 0, &udp(1, 2));
    let f = [arp, other, u];
    assert_eq!(
        text_accepts("meta l4proto != 233", &f, 0),
        [false, false, true]
    );
    assert_eq!(text_accepts("meta l4proto 17", &f, 0), [false, false, true]);
}

#[test]
fn vlan_ip_protocol_needs_the_inner_ethertype_ip() {
    // `ether type vlan ip protocol 1`: nft adds `vlan type ip` (the tag's inner EtherType)
    // as the dependency of `ip protocol`, so a tagged IPv6 frame whose byte 6 is 1 does not
    // match.
    let v4 = tag(
        &ipv4(
            1,
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            0,
            &[8, 0, 0, 0, 0, 1, 0, 1],
        ),
        0x8100,
        5,
    );
    let v6 = tag(&ipv6(1, 1, &[8, 0, 0, 0, 0, 1, 0, 1]), 0x8100, 5);
    let untagged = ipv4(
        1,
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        0,
        &[8, 0, 0, 0, 0, 1, 0, 1],
    );
    assert_eq!(
        text_accepts("ether type vlan ip protocol 1", &[v4, v6, untagged], 0),
        [true, false, false]
    );
}

#[test]
fn tcp_flags_under_a_mask_compare_the_masked_value() {
    // `tcp flags & (fin|syn|rst|ack) syn` is `(flags & 0x17) == 0x02`: SYN alone and SYN with
    // PSH or ECE match, SYN-ACK and FIN-SYN do not.
    let flags = [SYN, SYN | 0x08, SYN | 0x40, SYN | ACK, SYN | 0x01, ACK];
    let f: Vec<Vec<u8>> = flags
        .iter()
        .map(|&fl| ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 0, &tcp(1000, 22, fl)))
        .collect();
    assert_eq!(
        text_accepts("tcp flags & (fin|syn|rst|ack) syn", &f, 0),
        [true, true, true, false, false, false]
    );
    assert_eq!(
        text_accepts("tcp flags & (fin | syn | rst | ack) == syn", &f, 0),
        [true, true, true, false, false, false]
    );
}

#[test]
fn output_device_keys_never_match_without_an_output_device() {
    // nft_meta_store_iftype / nft_meta_store_ifgroup fail on a NULL device: at ingress there
    // is no output device, so `meta oiftype` and `meta oifgroup` break (negated or not);
    // `meta iiftype` and `meta iifgroup` read the input device.
    let f = [ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], 0, &udp(1, 2))];
    assert_eq!(text_accepts("meta oiftype ether", &f, 0), [false]);
    assert_eq!(text_accepts("meta oifgroup 0", &f, 0), [false]);
    assert_eq!(text_accepts("meta oifgroup != 11", &f, 0), [false]);
    assert_eq!(text_accepts("meta iiftype ether", &f, 0), [true]);
    assert_eq!(text_accepts("meta iifgroup 0", &f, 0), [true]);
}

#[test]
fn iiftype_ether_makes_ip_fields_depend_on_the_ether_type() {
    // `iiftype ether ip daddr X` is `ether type ip` (link + 12) then the address: a tagged
    // IPv4 frame (0x8100 at offset 12) does not match; without `iiftype ether` the dependency
    // is `meta protocol ip`, which the tagged frame passes (nft 1.0.6 `--debug=netlink`).
    let plain = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], 0, &udp(1, 2));
    let tagged = tag(&plain, 0x8100, 5);
    let f = [plain, tagged];
    assert_eq!(
        text_accepts("iiftype ether ip daddr 10.0.0.2", &f, 0),
        [true, false]
    );
    assert_eq!(text_accepts("ip daddr 10.0.0.2", &f, 0), [true, true]);
}

/// Run `rules` in an ip prerouting chain of type `chain_type` over `frames` one call each,
/// every packet with a new connection (id 1); the outcomes and the connection effects.
fn prerouting_runs(
    chain_type: &str,
    rules: &str,
    frames: &[Vec<u8>],
) -> Vec<(Outcome, crate::ConnFx)> {
    prerouting_runs_with("", chain_type, rules, frames)
}

/// [`prerouting_runs`] in a table that also declares `decls` (sets, maps, objects).
fn prerouting_runs_with(
    decls: &str,
    chain_type: &str,
    rules: &str,
    frames: &[Vec<u8>],
) -> Vec<(Outcome, crate::ConnFx)> {
    let text = format!(
        "table ip t {{\n {decls}\n chain c {{\n  type {chain_type} hook prerouting priority -100;\n  {rules}\n }}\n}}\n"
    );
    let rs = wasp_ruleset::parse_str(&text, "calc.nft").expect("parses");
    let mut e = Engine::compile(&rs).expect("compiles");
    frames
        .iter()
        .map(|f| {
            let mut p = pkt(f);
            p.ct = crate::CtMeta {
                state: crate::conn::state::NEW,
                id: 1,
                nat_pending: true,
                ..crate::CtMeta::NONE
            };
            let mut out = [Outcome::unseen(0)];
            let res = e.ip_hook(
                wasp_ruleset::model::Hook::Prerouting,
                &[p],
                0,
                &mut out,
                None,
            );
            let fx = res.conn_of(0);
            (out[0], fx)
        })
        .collect()
}

#[test]
fn numgen_inc_cycles_per_rule_and_jhash_is_the_kernels() {
    let f = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], 0, &udp(1, 2));
    let frames = vec![f.clone(); 5];
    let marks: Vec<u32> = prerouting_runs("filter", "meta mark set numgen inc mod 2", &frames)
        .iter()
        .map(|(o, _)| o.mark)
        .collect();
    assert_eq!(marks, [0, 1, 0, 1, 0]);
    let marks: Vec<u32> = prerouting_runs(
        "filter",
        "meta mark set numgen inc mod 3 offset 100",
        &frames[..4],
    )
    .iter()
    .map(|(o, _)| o.mark)
    .collect();
    assert_eq!(marks, [100, 101, 102, 100]);
    // jhash(ip saddr . ip daddr, 8 bytes, seed) scaled: the kernel's nft_jhash_eval.
    let data = [10, 0, 0, 1, 10, 0, 0, 2];
    let want = ((u64::from(crate::jhash(&data, 0xdead_beef)) * 1000) >> 32) as u32 + 7;
    let got = prerouting_runs(
        "filter",
        "meta mark set jhash ip saddr . ip daddr mod 1000 seed 0xdeadbeef offset 7",
        &frames[..1],
    );
    assert_eq!(got[0].0.mark, want);
    // A 2-byte field in a concatenation is padded to 4 bytes: dport(2) 0 0 saddr(4).
    let data = [0, 2, 0, 0, 10, 0, 0, 1];
    let want = ((u64::from(crate::jhash(&data, 0)) * 1000) >> 32) as u32;
    let got = prerouting_runs(
        "filter",
        "meta l4proto udp meta mark set jhash udp dport . ip saddr mod 1000",
        &frames[..1],
    );
    assert_eq!(got[0].0.mark, want);
    // Shifts and bitwise operations on a computed value, within the field's 32 bits.
    let got = prerouting_runs(
        "filter",
        "meta mark set 0x80000001 meta mark set (meta mark | 0x10) << 8",
        &frames[..1],
    );
    assert_eq!(got[0].0.mark, 0x0000_1100);
}

#[test]
fn dnat_to_a_map_computes_the_target_per_packet() {
    use std::net::IpAddr;
    let a = ipv4(6, [10, 0, 0, 1], [10, 0, 0, 9], 0, &tcp(1000, 80, SYN));
    let b = ipv4(6, [10, 0, 0, 2], [10, 0, 0, 9], 0, &tcp(1000, 80, SYN));
    let runs = prerouting_runs(
        "nat",
        "dnat ip to ip saddr . tcp dport map { 10.0.0.1 . 80 : 192.168.1.0/24 . 8000-8999, 10.0.0.2 . 80 : 192.168.2.2 }",
        &[a.clone(), b],
    );
    let t = runs[0].1.nat_target.expect("a target");
    assert_eq!(
        t.addr,
        Some((
            IpAddr::from([192, 168, 1, 0]),
            IpAddr::from([192, 168, 1, 255])
        ))
    );
    assert_eq!(t.ports, Some((8000, 8999)));
    let t = runs[1].1.nat_target.expect("a target");
    let two = IpAddr::from([192, 168, 2, 2]);
    assert_eq!((t.addr, t.ports), (Some((two, two)), None));
    // numgen as the address: 10.0.0.1, then 10.0.0.2.
    let runs = prerouting_runs(
        "nat",
        "dnat to numgen inc mod 2 offset 167772161",
        &[a.clone(), a.clone(), a.clone()],
    );
    let addrs: Vec<IpAddr> = runs
        .iter()
        .map(|r| r.1.nat_target.unwrap().addr.unwrap().0)
        .collect();
    assert_eq!(
        addrs,
        [
            IpAddr::from([10, 0, 0, 1]),
            IpAddr::from([10, 0, 0, 2]),
            IpAddr::from([10, 0, 0, 1])
        ]
    );
    // A key the map does not hold ends the rule: no NAT.
    let c = ipv4(6, [10, 0, 0, 3], [10, 0, 0, 9], 0, &tcp(1000, 80, SYN));
    let runs = prerouting_runs("nat", "dnat to ip saddr map { 10.0.0.1 : 1.1.1.1 }", &[c]);
    assert_eq!(runs[0].1.nat, None);
}

#[test]
fn dnat_to_a_named_map_takes_the_elements_data() {
    use std::net::IpAddr;
    let a = ipv4(6, [10, 0, 0, 1], [10, 0, 0, 9], 0, &tcp(1000, 80, SYN));
    let b = ipv4(6, [10, 0, 0, 2], [10, 0, 0, 9], 0, &tcp(1000, 443, SYN));
    let c = ipv4(6, [10, 0, 0, 3], [10, 0, 0, 9], 0, &tcp(1000, 80, SYN));
    let runs = prerouting_runs_with(
        "map m { type ipv4_addr : ipv4_addr; elements = { 10.0.0.1 : 1.1.1.1, 10.0.0.2 : 2.2.2.2 } }",
        "nat",
        "dnat to ip saddr map @m",
        &[a.clone(), b.clone(), c.clone()],
    );
    let addr = |r: &(Outcome, crate::ConnFx)| r.1.nat_target.and_then(|t| t.addr);
    let one = IpAddr::from([1, 1, 1, 1]);
    let two = IpAddr::from([2, 2, 2, 2]);
    assert_eq!(addr(&runs[0]), Some((one, one)));
    assert_eq!(addr(&runs[1]), Some((two, two)));
    assert_eq!(runs[2].1.nat, None);
    // Data of an address and a port (concatenated data): `dnat ip to tcp dport map @fw`.
    let runs = prerouting_runs_with(
        "map fw { type inet_service : ipv4_addr . inet_service; elements = { 80 : 10.0.0.2 . 8080, 443 : 10.0.0.3 . 8443 } }",
        "nat",
        "dnat ip to tcp dport map @fw",
        &[a.clone(), b.clone()],
    );
    let target = |r: &(Outcome, crate::ConnFx)| r.1.nat_target.map(|t| (t.addr, t.ports));
    let at = |a: [u8; 4], p: u16| {
        let a = IpAddr::from(a);
        Some((Some((a, a)), Some((p, p))))
    };
    assert_eq!(target(&runs[0]), at([10, 0, 0, 2], 8080));
    assert_eq!(target(&runs[1]), at([10, 0, 0, 3], 8443));
    // A map the packet path fills (`add @d { KEY : ADDR . PORT }`), read by the NAT of the
    // next packet: the first packet finds no element, the second the one the first added.
    let runs = prerouting_runs_with(
        "map d { type ipv4_addr : ipv4_addr . inet_service; }",
        "nat",
        "meta l4proto tcp dnat ip to ip saddr map @d\n  add @d { ip saddr : 10.9.9.9 . 99 }",
        &[a.clone(), a.clone(), c.clone()],
    );
    assert_eq!(runs[0].1.nat, None);
    assert_eq!(target(&runs[1]), at([10, 9, 9, 9], 99));
    assert_eq!(target(&runs[2]), None);
}

#[test]
fn ct_zone_label_event_and_notrack_reach_the_connection_effects() {
    let f = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], 0, &udp(1, 2));
    let runs = prerouting_runs(
        "filter",
        "meta mark set 2 ct zone set mark map { 1 : 10, 2 : 20 } ct label set 127 ct event set new,destroy notrack",
        &[f],
    );
    let fx = runs[0].1;
    assert_eq!(fx.zone, Some(20));
    assert_eq!(fx.label, Some(1u128 << 127));
    assert_eq!(fx.event, Some(5));
    assert!(fx.notrack);
}

/// An IPv6 packet with a segment routing header (routing type 4) holding `sids`, then UDP.
fn ipv6_srh(last_entry: u8, tag: u16, sids: &[[u8; 16]]) -> Vec<u8> {
    let mut h = vec![17, (2 * sids.len()) as u8, 4, 0, last_entry, 0];
    h.extend_from_slice(&tag.to_be_bytes());
    for s in sids {
        h.extend_from_slice(s);
    }
    h.extend_from_slice(&udp(1, 2));
    ipv6(43, 1, &h)
}

#[test]
fn srh_fields_read_the_routing_header() {
    let sid = |last: u8| {
        let mut a = [0u8; 16];
        a[0] = 0xde;
        a[1] = 0xad;
        a[15] = last;
        a
    };
    let frames = [
        ipv6_srh(1, 7, &[sid(1), sid(2)]),
        ipv6_srh(1, 8, &[sid(2), sid(1)]),
        // No routing header: no srh field, negated or not.
        ipv6(17, 1, &udp(1, 2)),
    ];
    assert_eq!(
        text_accepts("srh sid[2] dead::2", &frames, 0),
        [true, false, false]
    );
    assert_eq!(
        text_accepts("srh sid[1] dead::2", &frames, 0),
        [false, true, false]
    );
    assert_eq!(
        text_accepts("srh tag != 7", &frames, 0),
        [false, true, false]
    );
    assert_eq!(
        text_accepts("srh last-entry 1", &frames, 0),
        [true, true, false]
    );
}

#[test]
fn ipsec_and_sdif_read_what_a_packet_without_xfrm_or_vrf_has() {
    let frames = [ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], 0, &udp(1, 2))];
    // secpath_exists() is false without xfrm; outside a VRF sdif is 0 and sdifname "".
    assert_eq!(text_accepts("meta ipsec missing", &frames, 0), [true]);
    assert_eq!(text_accepts("meta secpath exists", &frames, 0), [false]);
    assert_eq!(text_accepts("meta sdif \"lo\"", &frames, 0), [false]);
    assert_eq!(text_accepts("meta sdif != \"lo\"", &frames, 0), [true]);
    assert_eq!(
        text_accepts("meta sdifname != \"vrf1\"", &frames, 0),
        [true]
    );
    assert_eq!(text_accepts("meta sdifname \"vrf1\"", &frames, 0), [false]);
}

#[test]
fn exthdr_presence_compares_with_any_operator() {
    let frames = [
        ipv6(0, 1, &[17, 0, 1, 4, 0, 0, 0, 0]),
        ipv6(17, 1, &udp(1, 2)),
    ];
    assert_eq!(
        text_accepts("exthdr hbh != exists", &frames, 0),
        [false, true]
    );
    assert_eq!(text_accepts("exthdr hbh 1", &frames, 0), [true, false]);
    assert_eq!(
        text_accepts("exthdr hbh > missing", &frames, 0),
        [true, false]
    );
}
