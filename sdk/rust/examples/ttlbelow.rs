//! `ttlbelow N`: a wasp match, true for IPv4 packets whose TTL is below N and IPv6 packets
//! whose hop limit is below N (N in 1..=255, checked in `configure`). The same plugin as the
//! C, JavaScript, Python and Go guides' (`sdk/*/`), on the SDK: the example that
//! `wasp plugin new NAME --lang rust` starts from.
//!
//! Build: `cargo build --release --target wasm32-wasip2 --example ttlbelow` (in `sdk/rust`),
//! which writes `target/wasm32-wasip2/release/examples/ttlbelow.wasm`.

#![cfg_attr(target_arch = "wasm32", no_std)]
extern crate alloc;

use alloc::format;
use alloc::string::{String, ToString};
use wasp_plugin_sdk::{Info, Kind, NFPROTO_IPV4, NFPROTO_IPV6, Packets, Plugin, Sites, args};

/// Bytes of each frame the match needs: Ethernet, VLAN tags and the IP header's first bytes.
const WINDOW: u32 = 64;

/// The plugin: the limit N of each use site.
#[derive(Default)]
pub struct TtlBelow {
    limits: Sites<u8>,
}

impl Plugin for TtlBelow {
    fn describe(&self) -> Info {
        Info::new("ttlbelow", "0.1.0", &[Kind::MatchExpr], WINDOW)
    }

    fn configure(&mut self, site: u32, kind: Kind, args: &[String]) -> Result<(), String> {
        if kind != Kind::MatchExpr {
            return Err("ttlbelow is a match".to_string());
        }
        let [n] = args else {
            return Err("usage: ttlbelow N (N in 1..=255)".to_string());
        };
        match args::parse_uint(n, 255) {
            Ok(limit) if limit >= 1 => {
                self.limits.insert(site, limit as u8);
                Ok(())
            }
            _ => Err(format!("ttlbelow: {n:?} is not a number in 1..=255")),
        }
    }

    fn release(&mut self, site: u32) {
        self.limits.remove(site);
    }

    fn matches(&mut self, site: u32, pkts: Packets<'_>, out: &mut [bool]) {
        let Some(&limit) = self.limits.get(site) else {
            return;
        };
        for (pkt, out) in pkts.iter().zip(out) {
            // The TTL is byte 8 of the IPv4 header (RFC 791), the hop limit byte 7 of the
            // IPv6 header (RFC 8200); a packet too short for it does not match.
            let at = match pkt.nfproto {
                NFPROTO_IPV4 => 8,
                NFPROTO_IPV6 => 7,
                _ => continue,
            };
            *out = pkt.l3().and_then(|l3| l3.get(at)).is_some_and(|&ttl| ttl < limit);
        }
    }
}

wasp_plugin_sdk::export_plugin!(TtlBelow);
