//! The offload-table plugin: a flowtable offload block (world `wasp-offload-block` of
//! `wit/plugin.wit`) modelled on a NIC's exact-match flow table, as wasp's built-in `HwModel`
//! but written as a plugin: flows are entered by their original key, at most `capacity` of
//! them; a flow beyond that is refused with `full`, a flow whose route carries a tunnel
//! (Geneve encapsulation or decapsulation, or a key with a tunnel id) with `unsupported` (the
//! model has no tunnel action); every other flow is forwarded by the block from `latency-us`
//! after its add.
//!
//! Arguments (`configure`, whitespace-separated):
//!
//! ```text
//! capacity N        most flows held (default 1024)
//! latency-us N      setup latency in µs (default 0)
//! observe           take flows as an observer (software keeps forwarding; flow-stats answers)
//! loop-on-port P    loop forever on the add of a flow whose original destination port is P
//! trap-on-port P    trap on the add of such a flow
//! ```
//!
//! The last two exist for the host's tests (a guest that hits its deadline or traps).

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// The bindings of the world `wasp-offload-block`.
#[allow(missing_docs, unsafe_code, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "wasp-offload-block",
        path: "../../wit",
        additional_derives: [PartialEq, Eq],
    });
}

use bindings::exports::wasp::plugin::offload_block::{
    OffloadAccept, OffloadFlow, OffloadRefusal, OffloadStats, TunnelKind,
};

/// The block's settings (from `configure`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Most flows held.
    pub capacity: usize,
    /// Setup latency, ns.
    pub latency_ns: u64,
    /// Observe instead of forwarding.
    pub observe: bool,
    /// Loop forever on the add of a flow to this original destination port.
    pub loop_on_port: Option<u16>,
    /// Trap on the add of a flow to this original destination port.
    pub trap_on_port: Option<u16>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            capacity: 1024,
            latency_ns: 0,
            observe: false,
            loop_on_port: None,
            trap_on_port: None,
        }
    }
}

fn number(args: &[&str], i: usize, what: &str) -> Result<u64, String> {
    let v = args
        .get(i)
        .ok_or_else(|| format!("offload-table: {what} needs a value"))?;
    v.parse::<u64>()
        .map_err(|_| format!("offload-table: {what} {v:?} is not a number"))
}

fn port(args: &[&str], i: usize, what: &str) -> Result<u16, String> {
    let v = number(args, i, what)?;
    u16::try_from(v).map_err(|_| format!("offload-table: {what} {v} is over 65535"))
}

impl Config {
    /// Parse the arguments (see the crate docs). Errors say which argument is wrong.
    pub fn parse(args: &str) -> Result<Config, String> {
        let a: Vec<&str> = args.split_whitespace().collect();
        let mut c = Config::default();
        let mut i = 0;
        while i < a.len() {
            match a[i] {
                "capacity" => {
                    c.capacity = number(&a, i + 1, "capacity")? as usize;
                    i += 2;
                }
                "latency-us" => {
                    let us = number(&a, i + 1, "latency-us")?;
                    c.latency_ns = us
                        .checked_mul(1000)
                        .filter(|&ns| ns <= 60_000_000_000)
                        .ok_or_else(|| format!("offload-table: latency-us {us} is over 60 s"))?;
                    i += 2;
                }
                "observe" => {
                    c.observe = true;
                    i += 1;
                }
                "loop-on-port" => {
                    c.loop_on_port = Some(port(&a, i + 1, "loop-on-port")?);
                    i += 2;
                }
                "trap-on-port" => {
                    c.trap_on_port = Some(port(&a, i + 1, "trap-on-port")?);
                    i += 2;
                }
                other => {
                    return Err(format!(
                        "offload-table: unknown argument {other:?} (expected capacity, \
                         latency-us, observe, loop-on-port or trap-on-port)"
                    ));
                }
            }
        }
        Ok(c)
    }
}

/// The original key as the table's exact-match key: (src, dst, src port, dst port, l4proto,
/// iif).
type Key = (Vec<u8>, Vec<u8>, u16, u16, u8, u16);

/// The table: entries by original key, and each flow id's key.
#[derive(Debug, Default)]
pub struct Table {
    /// Settings.
    pub config: Config,
    entries: BTreeMap<Key, u64>,
    ids: BTreeMap<u64, (Key, u64)>,
}

/// What [`Table::add`] decided besides an answer: the test hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// Answer normally.
    None,
    /// Loop forever (`loop-on-port`).
    Loop,
    /// Trap (`trap-on-port`).
    Trap,
}

impl Table {
    /// Flows held.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when no flow is held.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The test hook for `flow`.
    pub fn hook(&self, flow: &OffloadFlow) -> Hook {
        let p = Some(flow.original.dst_port);
        if p == self.config.loop_on_port {
            Hook::Loop
        } else if p == self.config.trap_on_port {
            Hook::Trap
        } else {
            Hook::None
        }
    }

    /// `flow-add` at `now_ns`: refuses tunnels (`unsupported`), then a new key beyond the
    /// capacity (`full`); a key already held is replaced (its old flow id forgotten).
    pub fn add(
        &mut self,
        flow: &OffloadFlow,
        now_ns: u64,
    ) -> Result<OffloadAccept, OffloadRefusal> {
        let tunnel = |k: TunnelKind| !matches!(k, TunnelKind::None);
        if tunnel(flow.original_route.tunnel)
            || tunnel(flow.reply_route.tunnel)
            || flow.original.tun_id.is_some()
            || flow.reply.tun_id.is_some()
        {
            return Err(OffloadRefusal::Unsupported(
                "offload-table: no tunnel action (geneve encap/decap)".to_string(),
            ));
        }
        let o = &flow.original;
        let key: Key = (
            o.src.clone(),
            o.dst.clone(),
            o.src_port,
            o.dst_port,
            o.l4proto,
            o.iif,
        );
        match self.entries.get(&key) {
            Some(&old) => {
                self.ids.remove(&old);
            }
            None if self.entries.len() >= self.config.capacity => {
                return Err(OffloadRefusal::Full);
            }
            None => {}
        }
        self.entries.insert(key.clone(), flow.id);
        self.ids.insert(flow.id, (key, now_ns));
        Ok(if self.config.observe {
            OffloadAccept::Observe
        } else {
            OffloadAccept::Forward(self.config.latency_ns)
        })
    }

    /// `flow-del`: forget flow `id` (unknown ids are ignored).
    pub fn del(&mut self, id: u64) {
        if let Some((key, _)) = self.ids.remove(&id)
            && self.entries.get(&key) == Some(&id)
        {
            self.entries.remove(&key);
        }
    }

    /// `flow-stats`: for a held flow, no packets (an observer counts nothing itself) and
    /// `last-used-ns` its add time.
    pub fn stats(&self, id: u64) -> Option<OffloadStats> {
        self.ids.get(&id).map(|&(_, added)| OffloadStats {
            original_packets: 0,
            reply_packets: 0,
            original_bytes: 0,
            reply_bytes: 0,
            last_used_ns: added,
        })
    }
}

#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)]
mod export {
    use super::*;
    use bindings::exports::wasp::plugin::offload_block::Guest;
    use wasp_plugin_sdk::GuestCell;

    static TABLE: GuestCell<Table> = GuestCell::new();

    struct Block;

    impl Guest for Block {
        fn configure(args: String) -> Result<(), String> {
            let c = Config::parse(&args)?;
            TABLE.with(|t| {
                *t = Table {
                    config: c,
                    ..Table::default()
                }
            });
            Ok(())
        }

        fn flow_add(flow: OffloadFlow, now_ns: u64) -> Result<OffloadAccept, OffloadRefusal> {
            match TABLE.with(|t| t.hook(&flow)) {
                Hook::None => {}
                Hook::Loop => loop {
                    core::hint::spin_loop();
                },
                Hook::Trap => core::arch::wasm32::unreachable(),
            }
            TABLE.with(|t| t.add(&flow, now_ns))
        }

        fn flow_del(id: u64) {
            TABLE.with(|t| t.del(id));
        }

        fn flow_stats(id: u64, _now_ns: u64) -> Option<OffloadStats> {
            TABLE.with(|t| t.stats(id))
        }
    }

    bindings::export!(Block with_types_in bindings);
}

#[cfg(test)]
mod tests {
    use super::*;
    use bindings::exports::wasp::plugin::offload_block::{OffloadKey, OffloadRoute};

    fn flow(id: u64, dport: u16, tunnel: TunnelKind) -> OffloadFlow {
        let key = |s: [u8; 4], d: [u8; 4], sp, dp, iif| OffloadKey {
            src: s.to_vec(),
            dst: d.to_vec(),
            src_port: sp,
            dst_port: dp,
            l4proto: 6,
            iif,
            tun_id: None,
        };
        let route = |out_dev, tunnel| OffloadRoute {
            out_dev,
            mtu: 1500,
            nat: false,
            dec_ttl: true,
            tunnel,
        };
        OffloadFlow {
            id,
            ct_id: id + 100,
            original: key([10, 0, 0, 2], [192, 0, 2, 1], 40000, dport, 0),
            reply: key([192, 0, 2, 1], [10, 0, 0, 2], dport, 40000, 1),
            original_route: route(1, tunnel),
            reply_route: route(0, TunnelKind::None),
        }
    }

    #[test]
    fn capacity_tunnels_and_replacement() {
        let mut t = Table {
            config: Config::parse("capacity 2 latency-us 100").unwrap(),
            ..Table::default()
        };
        assert_eq!(
            t.add(&flow(1, 80, TunnelKind::None), 5),
            Ok(OffloadAccept::Forward(100_000))
        );
        assert_eq!(
            t.add(&flow(2, 81, TunnelKind::None), 5),
            Ok(OffloadAccept::Forward(100_000))
        );
        assert_eq!(
            t.add(&flow(3, 82, TunnelKind::None), 5),
            Err(OffloadRefusal::Full)
        );
        assert!(matches!(
            t.add(&flow(4, 83, TunnelKind::Decap), 5),
            Err(OffloadRefusal::Unsupported(_))
        ));
        // The same key again replaces the entry (no capacity used).
        assert!(t.add(&flow(5, 80, TunnelKind::None), 6).is_ok());
        assert_eq!(t.len(), 2);
        assert_eq!(t.stats(1), None);
        assert_eq!(t.stats(5).map(|s| s.last_used_ns), Some(6));
        t.del(5);
        t.del(99);
        assert_eq!(t.len(), 1);
        assert!(t.add(&flow(6, 84, TunnelKind::None), 7).is_ok());
    }

    #[test]
    fn arguments() {
        assert_eq!(Config::parse("").unwrap(), Config::default());
        let c = Config::parse("capacity 3 observe loop-on-port 9 trap-on-port 7").unwrap();
        assert_eq!(
            (c.capacity, c.observe, c.loop_on_port, c.trap_on_port),
            (3, true, Some(9), Some(7))
        );
        assert_eq!(
            Config::parse("capacity").unwrap_err(),
            "offload-table: capacity needs a value"
        );
        assert_eq!(
            Config::parse("capacity x").unwrap_err(),
            "offload-table: capacity \"x\" is not a number"
        );
        assert!(
            Config::parse("frob")
                .unwrap_err()
                .contains("unknown argument \"frob\"")
        );
        assert_eq!(
            Config::parse("loop-on-port 70000").unwrap_err(),
            "offload-table: loop-on-port 70000 is over 65535"
        );
    }
}
