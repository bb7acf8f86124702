//! `trivial`: the cheapest useful match, for the cost benchmark: true when the packet's
//! transport protocol (header byte 22) is TCP. Its window is 64 bytes, as a header match
//! would declare, so the benchmark's buffer holds headers and 64 frame bytes per packet.

wit_bindgen::generate!({ world: "wasp-plugin", path: "../../../wit" });

use exports::wasp::plugin::plugin::Guest;
use wasp::plugin::types::{Info, Kind, StateEntry, StatementResult, Verdict};

struct Trivial;

impl Guest for Trivial {
    fn describe() -> Info {
        Info {
            name: "trivial".into(),
            version: "1.0.0".into(),
            kinds: vec![Kind::MatchExpr, Kind::Statement],
            window: 64,
            state_transfer: false,
        }
    }
    fn configure(_site: u32, _kind: Kind, _args: Vec<String>) -> Result<(), String> {
        Ok(())
    }
    fn release(_site: u32) {}
    fn matches(_site: u32, batch: Vec<u8>, count: u32, stride: u32) -> Vec<u8> {
        batch.chunks(stride as usize).take(count as usize).map(|r| (r[22] == 6) as u8).collect()
    }
    fn apply(_site: u32, _batch: Vec<u8>, count: u32, _stride: u32) -> StatementResult {
        StatementResult { verdicts: vec![Verdict::Continue; count as usize], edits: vec![] }
    }
    fn on_timer(_key: u64) {}
    fn list_state(_site: u32) -> Vec<StateEntry> {
        Vec::new()
    }
    fn reset_state(_site: u32, _elem: u32) {}
    fn export_state() -> Vec<u8> {
        Vec::new()
    }
    fn import_state(_blob: Vec<u8>) -> Result<(), String> {
        Ok(())
    }
}

export!(Trivial);
