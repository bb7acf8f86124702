//! Shared pieces of the plugin host's tests: a host with small limits, use sites, packets.

#![allow(dead_code)]

use std::time::Duration;

use wasp_core::{ExtKind, ExtPacket, ExtSite, Fallback};
use wasp_plugin::{HostConfig, Plugin, PluginHost, Runtime};

/// A host with a 16 MiB memory limit, a 100 ms deadline for packet calls and 300 ms for setup
/// calls (1 ms ticks; generous, as the epoch runs on wall time and the test machine may be
/// loaded).
pub fn host() -> PluginHost {
    PluginHost::new(HostConfig {
        max_memory: 16 << 20,
        max_instances: 16,
        tick: Duration::from_millis(1),
        deadline_ticks: 100,
        setup_ticks: 300,
    })
    .expect("host")
}

/// Load test guest `name` (tests/guests, built by wasp-guests).
pub fn guest(host: &PluginHost, name: &str) -> Plugin {
    let path = wasp_guests::test_guest(name);
    host.load(&path)
        .unwrap_or_else(|e| panic!("loading {}: {e}", path.display()))
}

/// A runtime with `plugin` added under its own name.
pub fn runtime(host: &PluginHost, plugin: &Plugin) -> Runtime {
    let mut rt = Runtime::new(host);
    rt.add(&plugin.info().name, plugin).expect("add");
    rt
}

/// Use site `id` of `plugin` with `args`.
pub fn site(id: u32, plugin: &str, args: &[&str], fallback: Fallback) -> ExtSite {
    ExtSite {
        id,
        table: 0,
        plugin: plugin.to_string(),
        kind: ExtKind::Match,
        args: args.iter().map(|a| a.to_string()).collect(),
        fallback,
    }
}

/// A packet over `frame` with the given header fields (the rest as an IPv4/UDP frame has them).
pub fn pkt(frame: &[u8], iif: u32, mark: u32, elem: u32) -> ExtPacket<'_> {
    ExtPacket {
        frame,
        len: frame.len() as u32,
        iif,
        mark,
        elem,
        l3: 14,
        l4: 34,
        l4proto: 17,
        nfproto: 2,
        iftype: 1,
    }
}
