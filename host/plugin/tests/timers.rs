//! Timers armed by a plugin (host import `timer-arm`) fire as `on-timer` calls in deadline
//! order when the runtime's clock passes them (a fake clock: `advance`), cancelled timers do
//! not fire, re-arming replaces, and the clock imports give the runtime's time.

mod common;

use common::{guest, host, pkt, runtime, site};
use wasp_core::{ExtKind, ExtVerdict, Extensions, Fallback};
use wasp_plugin::Runtime;

const FRAME: [u8; 64] = [0; 64];

/// Packets for the probe's `timer` mode: (iif, key, delay): iif 0 arms on the monotonic
/// clock, 2 on the boot-time clock, 1 cancels.
fn arm(rt: &mut Runtime, ops: &[(u32, u32, u32)]) {
    let pkts: Vec<_> = ops
        .iter()
        .map(|&(iif, key, delay)| pkt(&FRAME, iif, key, delay))
        .collect();
    let mut v = vec![ExtVerdict::Drop; pkts.len()];
    rt.apply(0, &pkts, &mut v, &mut Vec::new());
    assert!(v.iter().all(|v| *v == ExtVerdict::Continue));
}

/// A timer fired by a late `advance` runs at its deadline: the plugin's clock reads the
/// deadline and its event is stamped with it (an IDLETIMER expiry in a replay shows at the
/// capture time it fell due); after it the clock reads the advance's time.
#[test]
fn a_timer_fires_at_its_deadline_not_at_the_advance() {
    const S: u64 = 1_000_000_000;
    let host = host();
    let p = guest(&host, "probe");
    let mut rt = runtime(&host, &p);
    rt.configure(&site(0, "probe", &["timer"], Fallback::Absent))
        .unwrap();
    rt.set_clocks(3 * S, 3 * S);
    // key 1 due at 5 s (monotonic), key 2 due at 6 s (boot time).
    arm(&mut rt, &[(0, 1, 2 * S as u32), (2, 2, 3 * S as u32)]);
    rt.advance(7 * S);
    let evs = rt.take_events();
    let got: Vec<(u64, &str)> = evs.iter().map(|e| (e.at_ns, e.text.as_str())).collect();
    assert_eq!(
        got,
        vec![
            (5 * S, "fired 1 at 5000000000"),
            (6 * S, "fired 2 at 6000000000")
        ]
    );
    // Back at the advance's time: a timer armed now is relative to 7 s.
    arm(&mut rt, &[(0, 3, 10)]);
    rt.advance(8 * S);
    assert_eq!(fired(&mut rt), vec![format!("fired 3 at {}", 7 * S + 10)]);
}

fn fired(rt: &mut Runtime) -> Vec<String> {
    rt.take_events().into_iter().map(|e| e.text).collect()
}

#[test]
fn timers_fire_in_deadline_order_on_a_fake_clock() {
    let host = host();
    let p = guest(&host, "probe");
    let mut rt = runtime(&host, &p);
    assert_eq!(
        rt.configure(&site(0, "probe", &["timer"], Fallback::Absent)),
        Ok(ExtKind::Statement)
    );
    rt.set_clocks(1_000, 1_000);
    // key 1 at 1500, key 2 at 1100, key 3 at 1300 (cancelled below), key 4 at 1200 (boot time),
    // key 5 at 1050 then re-armed at 1900.
    arm(
        &mut rt,
        &[
            (0, 1, 500),
            (0, 2, 100),
            (0, 3, 300),
            (2, 4, 200),
            (0, 5, 50),
        ],
    );
    arm(&mut rt, &[(1, 3, 0), (0, 5, 900)]);
    assert_eq!(rt.timers_armed(), 4);
    rt.advance(1_099);
    assert_eq!(fired(&mut rt), Vec::<String>::new());
    rt.advance(1_150);
    assert_eq!(fired(&mut rt), vec!["fired 2 at 1100"]);
    rt.advance(2_000);
    assert_eq!(
        fired(&mut rt),
        vec!["fired 4 at 1200", "fired 1 at 1500", "fired 5 at 1900"]
    );
    assert_eq!(rt.timers_armed(), 0);
    rt.advance(10_000);
    assert!(fired(&mut rt).is_empty());
}

#[test]
fn clocks_are_separate_and_a_failure_drops_the_timers() {
    let host = host();
    let p = guest(&host, "probe");
    let mut rt = runtime(&host, &p);
    rt.configure(&site(0, "probe", &["timer"], Fallback::Absent))
        .unwrap();
    rt.configure(&site(1, "probe", &["trap"], Fallback::Absent))
        .unwrap();
    rt.set_clocks(100, 5_000);
    arm(&mut rt, &[(0, 7, 10), (2, 8, 10)]);
    // Monotonic at 200 passes key 7's 110; boot time stays at 5000, before key 8's 5010.
    rt.advance_clocks(200, 5_000);
    assert_eq!(fired(&mut rt), vec!["fired 7 at 110"]);
    assert_eq!(rt.timers_armed(), 1);
    // A trap re-creates the instance; its timers went with its state.
    let mut out = [true];
    rt.matches(1, &[pkt(&FRAME, 0, 0, 0)], &mut out);
    assert_eq!(out, [false]);
    assert_eq!(rt.timers_armed(), 0);
    rt.advance_clocks(300, 6_000);
    assert!(fired(&mut rt).iter().all(|e| !e.starts_with("fired")));
}
