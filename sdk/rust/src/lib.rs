//! Write wasp plugins in Rust.
//!
//! A plugin is a type that implements [`Plugin`] (only [`Plugin::describe`] is required; every
//! other method has a default that does nothing harmful) and is exported with
//! [`export_plugin!`]. The SDK hides wit-bindgen: the contract is `wit/plugin.wit`
//! (`wasp:plugin@0.1.3`), built into [`bindings`].
//!
//! The host calls a plugin once per vector of packets, with one flat buffer; [`Packets`] walks
//! it and gives each packet's header fields and leading bytes ([`Pkt`]). [`hdr`] reads UDP and
//! Geneve headers; [`host`] wraps what the host offers (clocks, timers, events, logging, sets).
//!
//! Plugins build for `wasm32-wasip2` and stay lean: `#![no_std]` with `alloc`, so the
//! component imports nothing but `wasp:plugin/host` (no WASI). On wasm the SDK supplies the
//! allocator and a panic handler that traps (the host then gives the vector the use site's
//! fallback and re-creates the instance). Build with `panic = "abort"` in the release profile.
//! A guest that wants std (and so imports WASI) turns on the SDK's `std` feature.
//!
//! The plugin value lives in one `static` the export macro declares: guests are
//! single-threaded, and the host never calls into an instance while a call is running, so
//! `&mut self` is all the state management a plugin needs. [`Sites`] keeps state per use site.
//!
//! # Example: a match on the UDP destination port
//!
//! ```
//! #![no_std]
//! extern crate alloc;
//! use alloc::string::{String, ToString};
//! use wasp_plugin_sdk::{Info, Kind, Packets, Plugin, Sites, hdr};
//!
//! /// `udpport 53`: true for UDP packets to that port.
//! #[derive(Default)]
//! pub struct UdpPort {
//!     ports: Sites<u16>,
//! }
//!
//! impl Plugin for UdpPort {
//!     fn describe(&self) -> Info {
//!         Info::new("udpport", "0.1.0", &[Kind::MatchExpr], 64)
//!     }
//!
//!     fn configure(&mut self, site: u32, _kind: Kind, args: &[String]) -> Result<(), String> {
//!         let [port] = args else { return Err("usage: udpport PORT".to_string()) };
//!         let port = wasp_plugin_sdk::args::parse_uint(port, 0xffff)
//!             .map_err(|e| alloc::format!("port {port:?}: {e}"))?;
//!         self.ports.insert(site, port as u16);
//!         Ok(())
//!     }
//!
//!     fn release(&mut self, site: u32) {
//!         self.ports.remove(site);
//!     }
//!
//!     fn matches(&mut self, site: u32, pkts: Packets<'_>, out: &mut [bool]) {
//!         let Some(&port) = self.ports.get(site) else { return };
//!         for (pkt, out) in pkts.iter().zip(out) {
//!             *out = pkt.l4proto == 17 && pkt.l4().and_then(hdr::Udp::parse).is_some_and(|u| u.dport == port);
//!         }
//!     }
//! }
//!
//! wasp_plugin_sdk::export_plugin!(UdpPort);
//! # fn main() {
//! #     let mut p = UdpPort::default();
//! #     assert!(p.configure(0, Kind::MatchExpr, &["53".into()]).is_ok());
//! #     assert_eq!(p.configure(1, Kind::MatchExpr, &["65536".into()]).unwrap_err(),
//! #         "port \"65536\": 65536 is more than 65535");
//! # }
//! ```

#![no_std]
#![deny(unsafe_code)]

extern crate alloc;
#[cfg(not(target_arch = "wasm32"))]
extern crate std;

pub mod args;
pub mod blob;
mod cell;
pub mod hdr;
pub mod host;
mod packets;
mod plugin;
mod sites;
#[cfg(all(target_arch = "wasm32", not(feature = "std")))]
mod wasm_rt;

pub use cell::GuestCell;
#[cfg(not(target_arch = "wasm32"))]
pub use packets::testing;
pub use packets::{HEADER_LEN, NFPROTO_IPV4, NFPROTO_IPV6, Packets, Pkt, stride_for};
pub use plugin::Plugin;
pub use sites::Sites;

/// The code wit-bindgen generates from `wit/plugin.wit`. Plugins use the re-exported types
/// below and [`export_plugin!`]; the raw bindings are here for what the SDK does not wrap.
#[allow(missing_docs, unsafe_code, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "wasp-plugin-area",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "__export_wasp_plugin",
        default_bindings_module: "wasp_plugin_sdk::bindings",
    });
}

pub use bindings::wasp::plugin::types::{
    Clock, Edit, EditOp, Info, Kind, Level, StateEntry, StatementResult, Verdict,
};

impl Info {
    /// An [`Info`] without state transfer: `name`, `version`, the `kinds` it implements and
    /// the `window` of leading frame bytes it needs (0..=1514).
    pub fn new(name: &str, version: &str, kinds: &[Kind], window: u32) -> Info {
        Info {
            name: name.into(),
            version: version.into(),
            kinds: kinds.into(),
            window,
            state_transfer: false,
        }
    }

    /// The same, with `state-transfer` on: the plugin exports and imports a state blob.
    pub fn with_state_transfer(mut self) -> Info {
        self.state_transfer = true;
        self
    }
}

impl StateEntry {
    /// A state entry for element `elem` (0: the use site) with named values and no text.
    pub fn values(elem: u32, values: &[(&str, u64)]) -> StateEntry {
        StateEntry {
            elem,
            values: values.iter().map(|(k, v)| ((*k).into(), *v)).collect(),
            text: alloc::string::String::new(),
        }
    }
}

impl Edit {
    /// Overwrite `data` at `offset` of packet `packet`.
    pub fn set(packet: u32, offset: u32, data: alloc::vec::Vec<u8>) -> Edit {
        Edit {
            packet,
            offset,
            op: EditOp::Set(data),
        }
    }

    /// Insert `data` before `offset` of packet `packet`.
    pub fn insert(packet: u32, offset: u32, data: alloc::vec::Vec<u8>) -> Edit {
        Edit {
            packet,
            offset,
            op: EditOp::Insert(data),
        }
    }

    /// Remove `count` bytes at `offset` of packet `packet`.
    pub fn remove(packet: u32, offset: u32, count: u32) -> Edit {
        Edit {
            packet,
            offset,
            op: EditOp::Remove(count),
        }
    }
}

/// Glue between the generated `Guest` trait and [`Plugin`]; used by [`export_plugin!`].
#[doc(hidden)]
pub mod __glue {
    pub use crate::plugin::glue::*;
}

/// Exports `$ty` (a type that implements [`Plugin`] and `Default`) as the component's
/// `wasp:plugin/plugin` interface. Use it once, at the plugin crate's root. On targets other
/// than wasm32 it expands to nothing, so the plugin's unit tests run natively.
#[macro_export]
macro_rules! export_plugin {
    ($ty:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            static PLUGIN: $crate::GuestCell<$ty> = $crate::GuestCell::new();
            static VERDICTS: $crate::GuestCell<$crate::__glue::Vec<$crate::Verdict>> =
                $crate::GuestCell::new();
            static AREA: $crate::GuestCell<$crate::__glue::Vec<u8>> = $crate::GuestCell::new();

            struct Export;

            impl $crate::bindings::exports::wasp::plugin::plugin::Guest for Export {
                fn describe() -> $crate::Info {
                    PLUGIN.with(|p| $crate::Plugin::describe(p))
                }
                fn configure(
                    site: u32,
                    kind: $crate::Kind,
                    args: $crate::__glue::Vec<$crate::__glue::String>,
                ) -> Result<(), $crate::__glue::String> {
                    PLUGIN.with(|p| $crate::Plugin::configure(p, site, kind, &args))
                }
                fn release(site: u32) {
                    PLUGIN.with(|p| $crate::Plugin::release(p, site))
                }
                fn matches(
                    site: u32,
                    batch: $crate::__glue::Vec<u8>,
                    count: u32,
                    stride: u32,
                ) -> $crate::__glue::Vec<u8> {
                    PLUGIN.with(|p| $crate::__glue::matches(p, site, &batch, count, stride))
                }
                fn apply(
                    site: u32,
                    batch: $crate::__glue::Vec<u8>,
                    count: u32,
                    stride: u32,
                ) -> $crate::StatementResult {
                    PLUGIN.with(|p| {
                        VERDICTS
                            .with(|v| $crate::__glue::apply_with(p, v, site, &batch, count, stride))
                    })
                }
                fn on_timer(key: u64) {
                    PLUGIN.with(|p| $crate::Plugin::on_timer(p, key))
                }
                fn list_state(site: u32) -> $crate::__glue::Vec<$crate::StateEntry> {
                    PLUGIN.with(|p| $crate::Plugin::list_state(p, site))
                }
                fn reset_state(site: u32, elem: u32) {
                    PLUGIN.with(|p| $crate::Plugin::reset_state(p, site, elem))
                }
                fn export_state() -> $crate::__glue::Vec<u8> {
                    PLUGIN.with(|p| $crate::Plugin::export_state(p))
                }
                fn import_state(
                    blob: $crate::__glue::Vec<u8>,
                ) -> Result<(), $crate::__glue::String> {
                    PLUGIN.with(|p| $crate::Plugin::import_state(p, &blob))
                }
            }

            impl $crate::bindings::exports::wasp::plugin::fast_match::Guest for Export {
                fn first_window() -> u32 {
                    PLUGIN.with(|p| $crate::__glue::first_window(p))
                }
                fn matches_first(
                    site: u32,
                    batch: $crate::__glue::Vec<u8>,
                    count: u32,
                    stride: u32,
                ) -> (u64, u64) {
                    PLUGIN.with(|p| $crate::__glue::matches_first(p, site, &batch, count, stride))
                }
            }

            impl $crate::bindings::exports::wasp::plugin::area_match::Guest for Export {
                fn batch_area(size: u32) -> u32 {
                    AREA.with(|a| $crate::__glue::batch_area(a, size))
                }
                fn matches_first_at(site: u32, count: u32, stride: u32) -> (u64, u64) {
                    PLUGIN.with(|p| {
                        AREA.with(|a| $crate::__glue::matches_first(p, site, a, count, stride))
                    })
                }
            }

    $crate::bindings::__export_wasp_plugin!(Export with_types_in $crate::bindings);
        };
    };
}
