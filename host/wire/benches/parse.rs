//! `parse` of a few frame kinds (`cargo bench -p wasp-wire`): the per-packet cost under every
//! ruleset. Frames come from [`wasp_wire::samples`].

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use wasp_wire::ethernet::ethertype;
use wasp_wire::samples::{ethernet, ip6_routing_header, ipv4, ipv6, tcp, udp};

fn frames() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (
            "ipv4 udp",
            ethernet(&[], ethertype::IPV4, &ipv4(17, &udp(5353, 53, &[0; 32]))),
        ),
        (
            "ipv4 tcp",
            ethernet(
                &[],
                ethertype::IPV4,
                &ipv4(6, &tcp(40000, 443, 0x10, &[0; 64])),
            ),
        ),
        (
            "vlan ipv4 tcp",
            ethernet(
                &[(0x8100, 10)],
                ethertype::IPV4,
                &ipv4(6, &tcp(40000, 22, 0x02, &[])),
            ),
        ),
        (
            "ipv6 tcp",
            ethernet(
                &[],
                ethertype::IPV6,
                &ipv6(6, &tcp(40000, 443, 0x10, &[0; 64])),
            ),
        ),
        (
            "ipv6 routing hdr udp",
            ethernet(
                &[],
                ethertype::IPV6,
                &ipv6(43, &ip6_routing_header(17, 1, 1, &udp(1000, 53, &[0; 16]))),
            ),
        ),
        ("arp", ethernet(&[], ethertype::ARP, &[0; 28])),
    ]
}

fn parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Elements(1));
    for (name, f) in frames() {
        g.bench_function(name, |b| b.iter(|| wasp_wire::parse(black_box(&f))));
    }
    g.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
