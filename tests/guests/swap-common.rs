// Shared body of the swap-v1/v2/v3 test guests: a per-site packet counter named "swapper",
// whose version constants (VERSION, ANSWER, TRANSFER) the including crate defines. Its state
// blob is (site u32 LE, packets u64 LE) records.

use std::cell::RefCell;
use std::collections::BTreeMap;

wit_bindgen::generate!({ world: "wasp-plugin", path: "../../../wit" });

use exports::wasp::plugin::plugin::Guest;
use wasp::plugin::types::{Info, Kind, StateEntry, StatementResult, Verdict};

thread_local! {
    static COUNTS: RefCell<BTreeMap<u32, u64>> = const { RefCell::new(BTreeMap::new()) };
}

fn count(site: u32, n: u32) {
    COUNTS.with(|c| *c.borrow_mut().entry(site).or_insert(0) += u64::from(n));
}

struct Swapper;

impl Guest for Swapper {
    fn describe() -> Info {
        Info {
            name: "swapper".into(),
            version: VERSION.into(),
            kinds: vec![Kind::MatchExpr, Kind::Stateful],
            window: 0,
            state_transfer: TRANSFER,
        }
    }

    fn configure(site: u32, _kind: Kind, args: Vec<String>) -> Result<(), String> {
        if args.iter().any(|a| a == REFUSE) {
            return Err(format!("swapper {VERSION}: argument \"{REFUSE}\" is refused"));
        }
        COUNTS.with(|c| {
            c.borrow_mut().entry(site).or_insert(0);
        });
        Ok(())
    }

    fn release(site: u32) {
        COUNTS.with(|c| {
            c.borrow_mut().remove(&site);
        });
    }

    fn matches(site: u32, _batch: Vec<u8>, count_: u32, _stride: u32) -> Vec<u8> {
        count(site, count_);
        vec![ANSWER; count_ as usize]
    }

    fn apply(site: u32, _batch: Vec<u8>, count_: u32, _stride: u32) -> StatementResult {
        count(site, count_);
        StatementResult { verdicts: vec![Verdict::Continue; count_ as usize], edits: vec![] }
    }

    fn on_timer(_key: u64) {}

    fn list_state(site: u32) -> Vec<StateEntry> {
        let n = COUNTS.with(|c| c.borrow().get(&site).copied().unwrap_or(0));
        vec![StateEntry { elem: 0, values: vec![("packets".into(), n)], text: format!("v{VERSION}") }]
    }

    fn reset_state(site: u32, _elem: u32) {
        COUNTS.with(|c| {
            c.borrow_mut().insert(site, 0);
        });
    }

    fn export_state() -> Vec<u8> {
        if !TRANSFER {
            return Vec::new();
        }
        let mut out = Vec::new();
        COUNTS.with(|c| {
            for (s, n) in c.borrow().iter() {
                out.extend_from_slice(&s.to_le_bytes());
                out.extend_from_slice(&n.to_le_bytes());
            }
        });
        out
    }

    fn import_state(blob: Vec<u8>) -> Result<(), String> {
        if blob.len() % 12 != 0 {
            return Err(format!("swapper {VERSION}: state blob of {} bytes", blob.len()));
        }
        COUNTS.with(|c| {
            let mut c = c.borrow_mut();
            for r in blob.chunks(12) {
                let s = u32::from_le_bytes([r[0], r[1], r[2], r[3]]);
                let mut n = [0u8; 8];
                n.copy_from_slice(&r[4..12]);
                c.insert(s, u64::from_le_bytes(n));
            }
        });
        Ok(())
    }
}

export!(Swapper);
