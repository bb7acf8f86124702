//! The idletimer plugin (being written).
#![cfg_attr(target_arch = "wasm32", no_std)]

use wasp_plugin_sdk::{Info, Kind, Plugin};

/// The plugin.
#[derive(Debug, Default)]
pub struct P;

impl Plugin for P {
    fn describe(&self) -> Info {
        Info::new(
            "idletimer",
            env!("CARGO_PKG_VERSION"),
            &[Kind::MatchExpr],
            0,
        )
    }
}

wasp_plugin_sdk::export_plugin!(P);
