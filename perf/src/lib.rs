//! Benchmarks and the traffic generator.
//!
//! - [`acl`]: a set's rules, field definitions and input buffers as DPDK's `rte_acl` takes
//!   them (the `acl-compare` benchmark, feature `dpdk`).
//! - [`traffic`]: deterministic Ethernet frames from a seed (VLAN stacks, IPv4/IPv6 with
//!   extension headers, TCP/UDP/ICMP/ICMPv6, ARP, malformed frames), written as pcap; also the
//!   capture of `samples/firewall` (`wasp-traffic office`).
//! - [`flood`]: keys crafted to collide under the tables' hashes as they were before they were
//!   seeded at random (`hash-flood`).
//! - [`daemon`]: a real `wasp run` on a veth in a namespace of its own, driven through its
//!   control socket, its resident memory read from `/proc` (`load-time`, `apply-soak`).
//! - [`netns`]: namespaces joined by a veth, commands, `ksoftirqd` CPU time (the veth
//!   benchmarks).
//! - [`sys`]: the system calls of the veth benchmarks (root check, thread CPU time, a
//!   `sendmmsg` sender); the only module here with `unsafe`.
#![deny(unsafe_code)]

pub mod acl;
pub mod daemon;
pub mod flood;
pub mod netns;
pub mod sys;
pub mod traffic;
