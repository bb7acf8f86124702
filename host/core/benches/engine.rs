//! The engine over one vector of 64 packets (`cargo bench -p wasp-core`): a chain of 10 linear
//! rules that no packet matches (each packet walks every rule and ends at the policy), and an
//! empty chain (the fixed cost per packet), through the vector pipeline ([`Engine::run`])
//! and the per-packet walk ([`Engine::ingress_one`]). Rules are shaped as `ruleset-scaling`'s:
//! `ip saddr A udp dport P counter drop`. Frames are parsed once, outside the timing.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use wasp_core::{At, Engine, HookResult, Outcome, Packet};
use wasp_wire::ethernet::ethertype;
use wasp_wire::samples::{ethernet, ipv4, ipv6, tcp, udp};

const DEV: &str = "lan0";

/// A chain of `n` rules on `DEV`'s ingress that match none of [`frames`].
fn ruleset(n: usize) -> String {
    let mut s = format!(
        "table netdev bench {{\n\tchain in {{\n\t\ttype filter hook ingress device \"{DEV}\" priority 0; policy accept;\n"
    );
    for i in 0..n {
        s.push_str(&format!(
            "\t\tip saddr 203.0.113.{} udp dport {} counter drop\n",
            1 + i,
            20000 + i
        ));
    }
    s.push_str("\t}\n}\n");
    s
}

/// 64 frames: mostly IPv4 (UDP and TCP), some IPv6 and ARP, as on an office LAN.
fn frames() -> Vec<Vec<u8>> {
    (0..64u16)
        .map(|i| match i % 8 {
            0..=3 => ethernet(
                &[],
                ethertype::IPV4,
                &ipv4(17, &udp(40000 + i, 53, &[0; 32])),
            ),
            4 | 5 => ethernet(
                &[],
                ethertype::IPV4,
                &ipv4(6, &tcp(40000 + i, 443, 0x10, &[])),
            ),
            6 => ethernet(
                &[],
                ethertype::IPV6,
                &ipv6(6, &tcp(40000 + i, 443, 0x10, &[])),
            ),
            _ => ethernet(&[], ethertype::ARP, &[0; 28]),
        })
        .collect()
}

fn engine(c: &mut Criterion) {
    let frames = frames();
    let packets: Vec<Packet<'_>> = frames
        .iter()
        .map(|f| Packet {
            frame: f,
            meta: wasp_wire::parse(f),
            iifname: DEV,
            mark: 0,
            oifname: "",
            ct: wasp_core::CtMeta::NONE,
            ct_detail: None,
            nftrace: false,
            route: None,
        })
        .collect();
    let mut out = [Outcome::unseen(0); 64];
    let mut res = HookResult::new();
    for n in [0, 10] {
        let rs = wasp_ruleset::parse_str(&ruleset(n), "bench.nft").expect("bench ruleset");
        let mut e = Engine::compile(&rs).expect("bench ruleset compiles");
        let mut g = c.benchmark_group(format!("engine/{n} rules"));
        g.throughput(Throughput::Elements(packets.len() as u64));
        g.bench_function("vector", |b| {
            b.iter(|| {
                e.run(
                    At::Ingress(DEV),
                    black_box(&packets),
                    0,
                    &mut res,
                    None,
                    None,
                )
            })
        });
        g.bench_function("per packet", |b| {
            b.iter(|| {
                for (i, p) in black_box(&packets).iter().enumerate() {
                    out[i] = e.ingress_one(DEV, p, i, 0, &mut res, None);
                }
            })
        });
        g.finish();
    }
}

criterion_group!(benches, engine);
criterion_main!(benches);
