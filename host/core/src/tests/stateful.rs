//! `limit` and `quota` (nft_limit, nft_quota): token buckets filled by the packets' `now`,
//! quotas consumed by each packet's `skb->len`, one state per statement or named object, shared
//! by engines that share it.

use super::*;

const SEC: u64 = 1_000_000_000;
/// A time well after the engines' epoch.
const T0: u64 = 1_000 * SEC;

fn engine(text: &str) -> Engine {
    let rs = wasp_ruleset::parse_str(text, "stateful.nft").expect("parses");
    Engine::compile(&rs).expect("compiles")
}

fn chain(rules: &str, policy: &str) -> String {
    format!(
        "table netdev t {{\n  chain c {{\n    type filter hook ingress device \"eth0\" priority 0; policy {policy};\n{rules}\n  }}\n}}\n"
    )
}

/// `n` TCP packets to port `dport` (40 bytes of `skb->len` each: IPv4 and TCP headers).
fn frames(n: usize, dport: u16) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 0, &tcp(1000, dport, 0x02)))
        .collect()
}

fn verdicts_at(e: &mut Engine, frames: &[Vec<u8>], now_ns: u64) -> Vec<FinalVerdict> {
    run_at(e, frames, now_ns)
        .iter()
        .map(|o| o.verdict)
        .collect()
}

/// The verdicts of `frames` walked one by one (the per-packet reference walk).
fn walk_at(e: &mut Engine, frames: &[Vec<u8>], now_ns: u64) -> Vec<FinalVerdict> {
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| e.one("eth0", &pkt(f), i, now_ns, None).0.verdict)
        .collect()
}

use FinalVerdict::{Accept as A, Drop as D};

#[test]
fn a_limit_passes_its_burst_then_drops_until_the_bucket_refills() {
    let text = chain("    limit rate 3/second burst 3 packets accept", "drop");
    let mut e = engine(&text);
    e.set_epoch(T0);
    assert_eq!(verdicts_at(&mut e, &frames(5, 22), T0), vec![A, A, A, D, D]);
    // A packet costs 1/3 s of credit (333333333 ns).
    assert_eq!(
        verdicts_at(&mut e, &frames(1, 22), T0 + 333_333_332),
        vec![D]
    );
    assert_eq!(
        verdicts_at(&mut e, &frames(2, 22), T0 + 333_333_333),
        vec![A, D]
    );
    // A minute later the bucket holds its burst again, no more.
    assert_eq!(
        walk_at(&mut e, &frames(4, 22), T0 + 60 * SEC),
        vec![A, A, A, D]
    );
}

#[test]
fn limit_over_matches_the_packets_beyond_the_rate() {
    let text = chain(
        "    limit rate over 2/minute burst 2 packets drop",
        "accept",
    );
    let mut e = engine(&text);
    assert_eq!(verdicts_at(&mut e, &frames(4, 22), T0), vec![A, A, D, D]);
    assert_eq!(
        verdicts_at(&mut e, &frames(2, 22), T0 + 30 * SEC),
        vec![A, D]
    );
}

#[test]
fn a_byte_limit_charges_each_packet_its_length() {
    // 100 bytes/second with a burst of 20 bytes: the bucket holds 1.2 s of credit, a 40-byte
    // packet costs 0.4 s.
    let text = chain(
        "    limit rate 100 bytes/second burst 20 bytes accept",
        "drop",
    );
    let mut e = engine(&text);
    assert_eq!(verdicts_at(&mut e, &frames(4, 22), T0), vec![A, A, A, D]);
    assert_eq!(
        verdicts_at(&mut e, &frames(2, 22), T0 + 400_000_000),
        vec![A, D]
    );
}

#[test]
fn a_quota_matches_until_its_bytes_are_used_then_over_takes_the_rest() {
    let text = chain(
        "    quota 100 bytes used 20 bytes accept\n    quota over 50 bytes drop",
        "accept",
    );
    let mut e = engine(&text);
    // 20 + 40 = 60, 100: within; 140: beyond the first quota, so the second rule sees the
    // packet (40 bytes, not beyond 50), then 80: beyond.
    assert_eq!(verdicts_at(&mut e, &frames(4, 22), T0), vec![A, A, A, D]);
    let mut rs = wasp_ruleset::parse_str(&text, "q.nft").unwrap();
    e.store_quotas(&mut rs);
    let listed = wasp_ruleset::print_ruleset(&rs, false);
    assert!(
        listed.contains("quota 100 bytes used 180 bytes accept"),
        "{listed}"
    );
    assert!(
        listed.contains("quota over 50 bytes used 80 bytes drop"),
        "{listed}"
    );
}

#[test]
fn named_objects_are_one_state_for_every_rule_that_names_them() {
    let text = "table netdev t {
  limit l { rate 2/second burst 2 packets }
  quota q { 80 bytes }
  chain c {
    type filter hook ingress device \"eth0\" priority 0; policy drop;
    tcp dport 22 limit name \"l\" accept
    tcp dport 23 limit name l accept
    tcp dport 24 quota name q accept
    tcp dport 25 quota name q accept
  }
}
";
    let mut e = engine(text);
    let mut f = frames(1, 22);
    f.extend(frames(2, 23));
    assert_eq!(verdicts_at(&mut e, &f, T0), vec![A, A, D]);
    let mut f = frames(1, 24);
    f.extend(frames(2, 25));
    assert_eq!(verdicts_at(&mut e, &f, T0), vec![A, A, D]);
    // A statement of its own has a bucket of its own.
    let text = chain(
        "    tcp dport 22 limit rate 1/second burst 1 packets accept\n    tcp dport 23 limit rate 1/second burst 1 packets accept",
        "drop",
    );
    let mut e = engine(&text);
    let mut f = frames(2, 22);
    f.extend(frames(2, 23));
    assert_eq!(verdicts_at(&mut e, &f, T0), vec![A, D, A, D]);
}

#[test]
fn engines_that_share_their_state_count_against_one_bucket_and_one_quota() {
    let text = chain(
        "    tcp dport 22 limit rate 4/second burst 4 packets accept\n    tcp dport 23 quota 80 bytes accept",
        "drop",
    );
    let (mut a, mut b) = (engine(&text), engine(&text));
    assert!(b.share_stateful(a.stateful()));
    assert_eq!(verdicts_at(&mut a, &frames(3, 22), T0), vec![A, A, A]);
    assert_eq!(verdicts_at(&mut b, &frames(2, 22), T0), vec![A, D]);
    assert_eq!(verdicts_at(&mut b, &frames(1, 23), T0), vec![A]);
    assert_eq!(verdicts_at(&mut a, &frames(2, 23), T0), vec![A, D]);
    // Another ruleset's state is not taken.
    let other = engine(&chain("    limit rate 1/second accept", "drop"));
    assert!(!b.share_stateful(other.stateful()));
}

#[test]
fn an_unknown_object_name_is_refused_at_compile() {
    for (stmt, kind) in [
        ("limit name \"nope\"", "limit"),
        ("quota name nope", "quota"),
    ] {
        let rs = wasp_ruleset::parse_str(&chain(&format!("    {stmt} accept"), "drop"), "u.nft")
            .unwrap();
        let err = Engine::compile(&rs).unwrap_err().to_string();
        assert!(err.contains("u.nft:4:5"), "{err}");
        assert!(
            err.contains(&format!(
                "unknown {kind} `nope`: table `netdev t` declares no {kind} object of that name"
            )),
            "{err}"
        );
    }
}

#[test]
fn object_maps_pick_the_object_by_the_packets_key() {
    let text = "table netdev t {
  counter c22 { }
  counter c23 { }
  quota q { 40 bytes }
  limit l { rate 1/second burst 1 packets }
  chain c {
    type filter hook ingress device \"eth0\" priority 0; policy drop;
    counter name tcp dport map { 22 : \"c22\", 23 : c23 }
    tcp dport 22 quota name tcp dport map { 22 : \"q\" } accept
    tcp dport 23 limit name tcp dport map { 23 : \"l\" } accept
  }
}
";
    let mut e = engine(text);
    let mut c = count(&mut e);
    let mut f = frames(2, 22);
    f.extend(frames(3, 23));
    f.extend(frames(1, 24));
    // Port 22: the quota's 40 bytes let one packet through; port 23: the bucket one; port 24
    // is in neither map (the counter map ends its rule, the others do not match).
    assert_eq!(verdicts_at(&mut e, &f, T0), vec![A, D, A, D, D, D]);
    let named: Vec<(String, u64, u64)> = e
        .named_counters(&mut c)
        .into_iter()
        .map(|n| (n.name, n.packets, n.bytes))
        .collect();
    assert_eq!(named, [("c22".into(), 2, 80), ("c23".into(), 3, 120)]);
    // An unknown name is the kernel's ENOENT, at the element.
    let rs = wasp_ruleset::parse_str(
        &chain("    quota name tcp dport map { 22 : \"nope\" }", "drop"),
        "m.nft",
    )
    .unwrap();
    let err = Engine::compile(&rs).unwrap_err().to_string();
    assert!(err.contains("m.nft:4:32"), "{err}");
    assert!(err.contains("unknown quota `nope`"), "{err}");
}

#[test]
fn set_statements_change_the_set_that_later_packets_look_up() {
    // The classic blocklist: a packet to port 23 puts its source in `@bad` for 10 s; every
    // packet from a source in `@bad` is dropped. In one vector, the packets after the one
    // that added the source see it (the kernel walks packet by packet).
    let text = "table netdev t {\n  set bad { type ipv4_addr; timeout 10s; }\n  chain c {\n    type filter hook ingress device \"eth0\" priority 0; policy accept;\n    ip saddr @bad drop\n    tcp dport 23 add @bad { ip saddr }\n  }\n}\n";
    let (mut a, mut b) = (engine(text), engine(text));
    a.set_epoch(T0);
    b.set_epoch(T0);
    assert!(b.share_stateful(a.stateful()));
    let mut f = frames(1, 22);
    f.extend(frames(1, 23));
    f.extend(frames(2, 22));
    assert_eq!(verdicts_at(&mut a, &f, T0), vec![A, A, D, D]);
    // The other worker's engine sees the element; it expires after the set's timeout.
    assert_eq!(verdicts_at(&mut b, &frames(1, 22), T0 + 9 * SEC), vec![D]);
    assert_eq!(verdicts_at(&mut b, &frames(1, 22), T0 + 10 * SEC), vec![A]);
    // `delete` takes it out at once.
    let text = "table netdev t {\n  set bad { type ipv4_addr; elements = { 10.0.0.1 } }\n  chain c {\n    type filter hook ingress device \"eth0\" priority 0; policy accept;\n    tcp dport 24 delete @bad { ip saddr }\n    ip saddr @bad drop\n  }\n}\n";
    let mut e = engine(text);
    e.set_epoch(T0);
    let mut f = frames(1, 22);
    f.extend(frames(1, 24));
    f.extend(frames(1, 22));
    assert_eq!(verdicts_at(&mut e, &f, T0), vec![D, A, A]);
}

#[test]
fn a_set_statement_s_limit_is_per_element_and_maps_take_data_from_the_packet() {
    // At most 2 packets per source and second (burst 2): a meter.
    let text = chain(
        "    update @m { ip saddr limit rate over 2/second burst 2 packets } drop",
        "accept",
    )
    .replace(
        "  chain c",
        "  set m { type ipv4_addr; size 1024; flags dynamic; }\n  chain c",
    );
    let mut e = engine(&text);
    e.set_epoch(T0);
    assert_eq!(verdicts_at(&mut e, &frames(4, 22), T0), vec![A, A, D, D]);
    let other = vec![ipv4(
        6,
        [10, 0, 0, 9],
        [10, 0, 0, 2],
        0,
        &tcp(1000, 22, 0x02),
    )];
    assert_eq!(verdicts_at(&mut e, &other, T0), vec![A], "another source");
    // A map filled from the packet: the mark the first rule set is the data of the element.
    let text = "table netdev t {\n  map marks { type ipv4_addr : mark; }\n  chain c {\n    type filter hook ingress device \"eth0\" priority 0; policy accept;\n    tcp dport 22 meta mark set 0x2a add @marks { ip saddr : meta mark }\n    tcp dport 25 meta mark set ip saddr map @marks\n    meta mark 0x2a drop\n  }\n}\n";
    let mut e = engine(text);
    e.set_epoch(T0);
    assert_eq!(
        verdicts_at(&mut e, &frames(1, 25), T0),
        vec![A],
        "no element yet"
    );
    let mut f = frames(1, 22);
    f.extend(frames(1, 25));
    assert_eq!(verdicts_at(&mut e, &f, T0), vec![D, D]);
}

/// `ct helper|timeout|expectation set`: the object must exist (the kernel: ENOENT), the
/// statement changes nothing in wasp (`wasp_ruleset::model::CtObj`), and a map of objects
/// ends the rule for a key it does not hold (nft_objref_map_eval: NFT_BREAK), as the kernel.
#[test]
fn conntrack_objects_load_and_only_a_map_miss_ends_the_rule() {
    let objects = r#"table ip t {
 ct helper ftp1 { type "ftp" protocol tcp; }
 ct timeout short { protocol tcp; policy = { established: 60 }; }
 ct expectation ex { protocol tcp; dport 2121; timeout 1m; size 4; }
 chain c {
  type filter hook prerouting priority 0; policy accept;
  RULES
 }
}
"#;
    let unknown = objects.replace("RULES", "ct timeout set \"long\"");
    let rs = wasp_ruleset::parse_str(&unknown, "ct.nft").unwrap();
    let e = Engine::compile(&rs).map(|_| ()).unwrap_err().to_string();
    assert!(
        e.contains("ct.nft:7:3") && e.contains("unknown ct timeout `long`"),
        "{e}"
    );
    let unknown_in_map = objects.replace("RULES", "ct helper set tcp dport map { 21 : \"nope\" }");
    let rs = wasp_ruleset::parse_str(&unknown_in_map, "ct.nft").unwrap();
    let e = Engine::compile(&rs).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("unknown ct helper `nope`"), "{e}");

    let rules =
        "ct helper set \"ftp1\" ct timeout set \"short\" ct expectation set \"ex\" meta mark set 1
  ct helper set tcp dport map { 21 : \"ftp1\", 2121 : \"ftp1\" } meta mark set meta mark | 2";
    let rs = wasp_ruleset::parse_str(&objects.replace("RULES", rules), "ct.nft").unwrap();
    let mut e = Engine::compile(&rs).unwrap();
    let marks: Vec<u32> = [21u16, 22]
        .iter()
        .map(|&dport| {
            let f = ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 0, &tcp(1000, dport, 0x02));
            let mut p = pkt(&f);
            p.ct = crate::CtMeta {
                state: crate::conn::state::NEW,
                id: 1,
                ..crate::CtMeta::NONE
            };
            let mut out = [Outcome::unseen(0)];
            e.ip_hook(
                wasp_ruleset::model::Hook::Prerouting,
                &[p],
                0,
                &mut out,
                None,
            );
            assert_eq!(out[0].verdict, FinalVerdict::Accept);
            out[0].mark
        })
        .collect();
    // Port 21: both rules ran to their end; port 22: the map missed before `| 2`.
    assert_eq!(marks, [3, 1]);
}
