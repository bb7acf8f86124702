//! Set and map lookups through the kernel's back-ends (hash, rbtree interval, pipapo), element
//! timeouts on the packet path's clock, and per-element counters. Rulesets are parsed from
//! text; expected verdicts follow the kernel (checked in the conformance harness for the
//! timeout-free cases).

use super::*;

fn engine(text: &str) -> Engine {
    let rs = wasp_ruleset::parse_str(text, "t.nft").expect("parses");
    Engine::compile(&rs).expect("compiles")
}

fn udp4(src: [u8; 4], dport: u16) -> Vec<u8> {
    ipv4(17, src, [10, 9, 9, 9], 0, &udp(1000, dport))
}

fn tcp4(src: [u8; 4], dport: u16) -> Vec<u8> {
    ipv4(6, src, [10, 9, 9, 9], 0, &tcp(1000, dport, SYN))
}

/// Verdicts at time `now` (ns), `true` for accept.
fn verdicts_at(e: &mut Engine, frames: &[Vec<u8>], now: u64) -> Vec<bool> {
    let pk: Vec<Packet<'_>> = frames.iter().map(|f| pkt(f)).collect();
    let mut out = vec![
        Outcome {
            verdict: FinalVerdict::Accept,
            decision: None,
            mark: 0,
            fwd: None,
            dup: 0,
            reject: None,
        };
        pk.len()
    ];
    e.ingress("eth0", &pk, now, &mut out, None);
    out.iter()
        .map(|o| o.verdict == FinalVerdict::Accept)
        .collect()
}

const HEAD: &str = "table netdev t {\n";
const CHAIN: &str = "chain c { type filter hook ingress device \"eth0\" priority 0; policy drop;\n";

#[test]
fn named_interval_set_single_field() {
    let mut e = engine(&format!(
        "{HEAD}set ports {{ type inet_service; flags interval; elements = {{ 10-20, 30, 40-50 }} }}\n{CHAIN}udp dport @ports accept\n}}\n}}\n"
    ));
    let frames: Vec<_> = [9, 10, 20, 21, 29, 30, 31, 40, 50, 51]
        .iter()
        .map(|&p| udp4([10, 0, 0, 1], p))
        .collect();
    assert_eq!(
        verdicts_at(&mut e, &frames, 0),
        [
            false, true, true, false, false, true, false, true, true, false
        ]
    );
}

#[test]
fn concatenated_ranges_in_pipapo() {
    // C06's shape: 10.i.j.0/24 . j-(j+1)0 . 6-17.
    let mut elems = Vec::new();
    for i in 1..=3 {
        for j in 1..=4 {
            elems.push(format!("10.{i}.{j}.0/24 . {j}-{}0 . 6-17", j + 1));
        }
    }
    let text = format!(
        "{HEAD}set s {{ type ipv4_addr . inet_service . inet_proto; flags interval; elements = {{ {} }} }}\n{CHAIN}ip saddr . udp dport . meta l4proto @s accept\nip saddr . tcp dport . meta l4proto @s accept\n}}\n}}\n",
        elems.join(", ")
    );
    let mut e = engine(&text);
    let frames = vec![
        udp4([10, 1, 1, 1], 1),    // j=1: port 1 in 1-20
        udp4([10, 1, 1, 1], 20),   // top of the range
        udp4([10, 1, 1, 1], 21),   // (j+1)1: outside
        udp4([10, 2, 3, 200], 3),  // j=3
        udp4([10, 2, 3, 200], 40), // 3-40
        udp4([10, 2, 3, 200], 41),
        udp4([10, 3, 5, 1], 5),  // j=5 was not added
        tcp4([10, 3, 4, 9], 50), // tcp 6 in 6-17
        udp4([10, 4, 1, 1], 1),  // i=4 not added
    ];
    assert_eq!(
        verdicts_at(&mut e, &frames, 0),
        [true, true, false, true, true, false, false, true, false]
    );
}

#[test]
fn anonymous_interval_sets_and_vmaps() {
    let mut e = engine(&format!(
        "{HEAD}chain x {{ meta mark set 7 accept; }}\n{CHAIN}ip saddr . udp dport vmap {{ 10.0.0.0/8 . 1-100 : jump x, 10.1.0.0/16 . 200-300 : accept, 192.168.0.0/16 . 53 : drop }}\nudp dport {{ 1000-2000, 5000 }} accept\n}}\n}}\n"
    ));
    let frames = vec![
        udp4([10, 5, 5, 5], 50),      // jump x: accept (mark 7)
        udp4([10, 1, 2, 3], 250),     // accept
        udp4([10, 2, 2, 3], 250),     // vmap miss, dport not in the anonymous set: drop
        udp4([192, 168, 1, 1], 53),   // drop
        udp4([192, 168, 1, 1], 1500), // vmap miss, anonymous set hit
        udp4([192, 168, 1, 1], 5000), // accept
        udp4([192, 168, 1, 1], 5001), // drop
    ];
    assert_eq!(
        verdicts_at(&mut e, &frames, 0),
        [true, true, false, false, true, true, false]
    );
}

#[test]
fn named_interval_vmap() {
    let mut e = engine(&format!(
        "{HEAD}map m {{ type inet_service : verdict; flags interval; elements = {{ 1-99 : accept, 100-199 : drop, 200 : accept }} }}\n{CHAIN}udp dport vmap @m\naccept\n}}\n}}\n"
    ));
    let frames: Vec<_> = [1, 99, 100, 199, 200, 201]
        .iter()
        .map(|&p| udp4([10, 0, 0, 1], p))
        .collect();
    // 201 misses the map and reaches `accept`.
    assert_eq!(
        verdicts_at(&mut e, &frames, 0),
        [true, true, false, false, true, true]
    );
}

#[test]
fn element_timeouts_on_the_packet_clock() {
    let s = 1_000_000_000u64;
    let mut e = engine(&format!(
        "{HEAD}set a {{ type ipv4_addr; flags timeout; timeout 10s; elements = {{ 10.0.0.1, 10.0.0.2 timeout 2s, 10.0.0.3 expires 5s }} }}\nset r {{ type ipv4_addr . inet_service; flags interval, timeout; elements = {{ 10.0.1.0/24 . 1-100 timeout 3s, 10.0.1.0/24 . 200-300 }} }}\n{CHAIN}ip saddr @a accept\nip saddr . udp dport @r accept\n}}\n}}\n"
    ));
    let frames = vec![
        udp4([10, 0, 0, 1], 9),
        udp4([10, 0, 0, 2], 9),
        udp4([10, 0, 0, 3], 9),
        udp4([10, 0, 1, 7], 50),
        udp4([10, 0, 1, 7], 250),
    ];
    let t0 = 1_700_000_000 * s; // the epoch is the first packet's time
    assert_eq!(verdicts_at(&mut e, &frames, t0), [true; 5]);
    assert_eq!(
        verdicts_at(&mut e, &frames, t0 + 2 * s - 1),
        [true, true, true, true, true]
    );
    assert_eq!(
        verdicts_at(&mut e, &frames, t0 + 2 * s),
        [true, false, true, true, true]
    );
    assert_eq!(
        verdicts_at(&mut e, &frames, t0 + 3 * s),
        [true, false, true, false, true]
    );
    assert_eq!(
        verdicts_at(&mut e, &frames, t0 + 5 * s),
        [true, false, false, false, true]
    );
    // The set's `timeout 10s` applies to elements without their own.
    assert_eq!(
        verdicts_at(&mut e, &frames, t0 + 10 * s),
        [false, false, false, false, true]
    );
}

#[test]
fn epoch_set_explicitly() {
    let s = 1_000_000_000u64;
    let mut e = engine(&format!(
        "{HEAD}set a {{ type ipv4_addr; flags timeout; elements = {{ 10.0.0.1 timeout 2s }} }}\n{CHAIN}ip saddr @a accept\n}}\n}}\n"
    ));
    e.set_epoch(100 * s);
    let f = vec![udp4([10, 0, 0, 1], 9)];
    assert_eq!(verdicts_at(&mut e, &f, 101 * s), [true]);
    assert_eq!(verdicts_at(&mut e, &f, 102 * s), [false]);
}

#[test]
fn per_element_counters() {
    let mut e = engine(&format!(
        "{HEAD}set a {{ type ipv4_addr; counter; elements = {{ 10.0.0.1, 10.0.0.2 }} }}\nset r {{ type inet_service; flags interval; counter; elements = {{ 1-100 counter packets 5 bytes 500, 200-300 }} }}\n{CHAIN}ip saddr @a accept\nudp dport @r accept\n}}\n}}\n"
    ));
    let mut c = count(&mut e);
    let frames = vec![
        udp4([10, 0, 0, 1], 9),   // a[0]
        udp4([10, 0, 0, 1], 250), // a[0]
        udp4([10, 0, 0, 2], 9),   // a[1]
        udp4([10, 0, 0, 9], 50),  // r[0]
        udp4([10, 0, 0, 9], 250), // r[1]
    ];
    assert_eq!(verdicts_at(&mut e, &frames, 0), [true; 5]);
    // skb->len at ingress: IPv4 20 + UDP 8 = 28 bytes.
    let got: Vec<(String, usize, u64, u64)> = e
        .set_element_counters(&mut c)
        .into_iter()
        .map(|c| (c.set, c.element, c.packets, c.bytes))
        .collect();
    assert_eq!(
        got,
        [
            ("a".to_string(), 0, 2, 56),
            ("a".to_string(), 1, 1, 28),
            ("r".to_string(), 0, 6, 528),
            ("r".to_string(), 1, 1, 28),
        ]
    );
    let mut rs = wasp_ruleset::parse_str(
        &format!(
            "{HEAD}set a {{ type ipv4_addr; counter; elements = {{ 10.0.0.1, 10.0.0.2 }} }}\nset r {{ type inet_service; flags interval; counter; elements = {{ 1-100 counter packets 5 bytes 500, 200-300 }} }}\n{CHAIN}ip saddr @a accept\nudp dport @r accept\n}}\n}}\n"
        ),
        "t.nft",
    )
    .unwrap();
    e.store_counters(&mut rs, &mut c);
    let text = wasp_ruleset::print_ruleset(&rs, false);
    assert!(text.contains("1-100 counter packets 6 bytes 528"), "{text}");
    assert!(
        text.contains("10.0.0.1 counter packets 2 bytes 56"),
        "{text}"
    );
}

#[test]
fn data_maps_set_the_mark() {
    let mut e = engine(&format!(
        "{HEAD}map m {{ type ipv4_addr : mark; flags interval; elements = {{ 10.0.0.0/8 : 0x1, 192.168.0.0/16 : 0x2 }} }}\n{CHAIN}meta mark set ip saddr map @m\nmeta mark set udp dport map {{ 10-20 : 0x3, 53 : 0x4 }} accept\nmeta mark 0x1 accept\n}}\n}}\n"
    ));
    let frames = [
        udp4([10, 1, 1, 1], 15),    // mark 1, then 3: accept (rule 2)
        udp4([10, 1, 1, 1], 99),    // mark 1, port miss: rule 3 accepts
        udp4([192, 168, 1, 1], 99), // mark 2: policy drop
        udp4([11, 0, 0, 1], 53),    // net miss (mark stays 0), port 53: accept, mark 4
    ];
    let pk: Vec<Packet<'_>> = frames.iter().map(|f| pkt(f)).collect();
    let mut out = vec![
        Outcome {
            verdict: FinalVerdict::Accept,
            decision: None,
            mark: 0,
            fwd: None,
            dup: 0,
            reject: None,
        };
        pk.len()
    ];
    e.ingress("eth0", &pk, 0, &mut out, None);
    let got: Vec<(bool, u32)> = out
        .iter()
        .map(|o| (o.verdict == FinalVerdict::Accept, o.mark))
        .collect();
    assert_eq!(got, [(true, 3), (true, 1), (false, 2), (true, 4)]);
}

#[test]
fn catch_all_is_taken_only_when_no_element_holds_the_key() {
    // nft_lookup_eval: the back-end first, then nft_set_catchall_lookup.
    let mut e = engine(&format!(
        "{HEAD}{CHAIN}ip saddr vmap {{ 10.0.0.1 : drop, * : accept }}\n}}\n}}\n"
    ));
    let frames = vec![udp4([10, 0, 0, 1], 1), udp4([10, 0, 0, 2], 1)];
    assert_eq!(verdicts_at(&mut e, &frames, 0), [false, true]);

    // A map's catch-all gives its data to every other key.
    let mut e = engine(&format!(
        "{HEAD}{CHAIN}meta mark set ip saddr map {{ 10.0.0.1 : 0x00000001, * : 0x00000002 }}\nmeta mark 0x00000002 accept\n}}\n}}\n"
    ));
    assert_eq!(verdicts_at(&mut e, &frames, 0), [false, true]);

    // A named interval set with `*` holds every key; without it, only its own.
    let mut e = engine(&format!(
        "{HEAD}set s {{ type ipv4_addr; flags interval; elements = {{ 10.0.0.0/31, * }} }}\nset t {{ type ipv4_addr; flags interval; elements = {{ 10.0.0.0/31 }} }}\n{CHAIN}ip saddr @t drop\nip saddr @s accept\n}}\n}}\n"
    ));
    let frames = vec![udp4([10, 0, 0, 1], 1), udp4([192, 0, 2, 1], 1)];
    assert_eq!(verdicts_at(&mut e, &frames, 0), [false, true]);

    // A concatenation's catch-all, in pipapo.
    let mut e = engine(&format!(
        "{HEAD}{CHAIN}ip saddr . udp dport vmap {{ 10.0.0.1 . 10-20 : drop, * : accept }}\n}}\n}}\n"
    ));
    let frames = vec![udp4([10, 0, 0, 1], 15), udp4([10, 0, 0, 1], 21)];
    assert_eq!(verdicts_at(&mut e, &frames, 0), [false, true]);
}

#[test]
fn catch_all_expires_with_its_timeout() {
    let mut e = engine(&format!(
        "{HEAD}set s {{ type ipv4_addr; flags timeout; elements = {{ * timeout 1s }} }}\n{CHAIN}ip saddr @s accept\n}}\n}}\n"
    ));
    let frames = vec![udp4([10, 0, 0, 1], 1)];
    assert_eq!(verdicts_at(&mut e, &frames, 0), [true]);
    assert_eq!(verdicts_at(&mut e, &frames, 2_000_000_000), [false]);
}
