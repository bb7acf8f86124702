//! `probe`: a test guest whose behaviour per use site is chosen by its first argument, to drive
//! the plugin host's containment, edits, timers, events and set look-ups.
//!
//! Modes: `ok` (match: `len >= 100`; statement: accept when `len >= 100`, else continue, and
//! emits `probe site N saw K packets`), `stmt` (refused as a match, accepted as a statement; so are `edit`, `oob` and `timer`),
//! `edit` (sets byte 0 of each frame to 0xaa), `oob` (an edit one past the frame's end),
//! `short` (one result too few), `badbyte` (a match answer of 2), `loop` (never returns),
//! `bomb` (allocates until memory runs out), `trap` (unreachable; `strap` the same, statement only), `timer` (arms timer `mark`
//! at `now + elem` ns, on the boot-time clock when `iif` is 2, cancels it when `iif` is 1; on
//! firing emits `fired K at T`), `set` (match: the set `allowed` holds the frame's first 4
//! bytes), `chatty` (as `ok`, and logs `probe site N saw K packets` through `host::log` at info
//! level on each call), `print` (writes lines to its WASI stdout in a loop, never returns).
//! Anything else, and `fail`, is refused by `configure`.

use std::cell::RefCell;
use std::collections::BTreeMap;

wit_bindgen::generate!({ world: "wasp-plugin", path: "../../../wit" });

use exports::wasp::plugin::plugin::Guest;
use wasp::plugin::host;
use wasp::plugin::types::{Clock, Edit, EditOp, Info, Kind, StateEntry, StatementResult, Verdict};

thread_local! {
    static SITES: RefCell<BTreeMap<u32, String>> = const { RefCell::new(BTreeMap::new()) };
}

const MODES: &[&str] = &[
    "ok", "stmt", "edit", "oob", "short", "badbyte", "loop", "bomb", "trap", "strap", "timer",
    "set", "chatty", "print",
];

/// Modes refused as a match (they only make sense as a statement).
const STATEMENT_ONLY: &[&str] = &["stmt", "edit", "oob", "strap", "timer"];

fn mode(site: u32) -> String {
    SITES.with(|s| s.borrow().get(&site).cloned().unwrap_or_default())
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(w)
}

fn records(batch: &[u8], count: u32, stride: u32) -> impl Iterator<Item = &[u8]> {
    batch.chunks(stride as usize).take(count as usize)
}

#[inline(never)]
fn spin(mut x: u64) -> u64 {
    loop {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        if x == 7 {
            return x;
        }
    }
}

fn misbehave(m: &str) {
    match m {
        "loop" => {
            spin(3);
        }
        "bomb" => {
            let mut keep: Vec<Vec<u8>> = Vec::new();
            loop {
                // Reserve without touching: growth is fast, the limit is reached in a few ms.
                keep.push(Vec::with_capacity(1 << 20));
                std::hint::black_box(&keep);
            }
        }
        "trap" | "strap" => core::arch::wasm32::unreachable(),
        "print" => loop {
            // WASI stdout, a line at a time, until the host stops the call.
            println!("probe floods its stdout");
        },
        _ => {}
    }
}

struct Probe;

impl Guest for Probe {
    fn describe() -> Info {
        Info {
            name: "probe".into(),
            version: "1.0.0".into(),
            kinds: vec![Kind::MatchExpr, Kind::Statement],
            window: 64,
            state_transfer: false,
        }
    }

    fn configure(site: u32, kind: Kind, args: Vec<String>) -> Result<(), String> {
        let m = args.first().cloned().unwrap_or_default();
        if m == "fail" {
            return Err("probe: mode \"fail\" is refused".into());
        }
        if !MODES.contains(&m.as_str()) {
            return Err(format!("probe: unknown mode \"{m}\""));
        }
        if STATEMENT_ONLY.contains(&m.as_str()) && kind == Kind::MatchExpr {
            return Err(format!("probe: {m} is not a match"));
        }
        SITES.with(|s| s.borrow_mut().insert(site, m));
        Ok(())
    }

    fn release(site: u32) {
        SITES.with(|s| s.borrow_mut().remove(&site));
    }

    fn matches(site: u32, batch: Vec<u8>, count: u32, stride: u32) -> Vec<u8> {
        let m = mode(site);
        misbehave(&m);
        if m == "chatty" {
            host::log(
                wasp::plugin::types::Level::Info,
                &format!("probe site {site} saw {count} packets"),
            );
        }
        let mut out: Vec<u8> = records(&batch, count, stride)
            .map(|r| match m.as_str() {
                "badbyte" => 2,
                "set" => {
                    let caplen = u16::from_le_bytes([r[20], r[21]]) as usize;
                    let n = caplen.min(4);
                    host::set_contains("allowed", &r[32..32 + n]) as u8
                }
                _ => (u32_at(r, 0) >= 100) as u8,
            })
            .collect();
        if m == "short" {
            out.pop();
        }
        out
    }

    fn apply(site: u32, batch: Vec<u8>, count: u32, stride: u32) -> StatementResult {
        let m = mode(site);
        misbehave(&m);
        let mut verdicts = Vec::new();
        let mut edits = Vec::new();
        for (i, r) in records(&batch, count, stride).enumerate() {
            let len = u32_at(r, 0);
            match m.as_str() {
                "edit" => edits.push(Edit {
                    packet: i as u32,
                    offset: 0,
                    op: EditOp::Set(vec![0xaa]),
                }),
                "oob" => edits.push(Edit {
                    packet: i as u32,
                    offset: len,
                    op: EditOp::Set(vec![1]),
                }),
                "timer" => {
                    let (iif, key, delay) =
                        (u32_at(r, 4), u32_at(r, 8) as u64, u32_at(r, 12) as u64);
                    match iif {
                        1 => host::timer_cancel(key),
                        2 => host::timer_arm(key, Clock::Boottime, host::boottime_ns() + delay),
                        _ => host::timer_arm(key, Clock::Monotonic, host::monotonic_ns() + delay),
                    }
                }
                _ => {}
            }
            verdicts.push(if m == "ok" && len >= 100 {
                Verdict::Accept
            } else {
                Verdict::Continue
            });
        }
        if m == "short" {
            verdicts.pop();
        }
        if m == "ok" {
            host::emit(&format!("probe site {site} saw {count} packets"));
        }
        StatementResult { verdicts, edits }
    }

    fn on_timer(key: u64) {
        host::emit(&format!("fired {key} at {}", host::monotonic_ns()));
    }

    fn list_state(site: u32) -> Vec<StateEntry> {
        vec![StateEntry {
            elem: 0,
            values: vec![],
            text: format!("mode {}", mode(site)),
        }]
    }

    fn reset_state(_site: u32, _elem: u32) {}

    fn export_state() -> Vec<u8> {
        Vec::new()
    }

    fn import_state(_blob: Vec<u8>) -> Result<(), String> {
        Ok(())
    }
}

export!(Probe);
