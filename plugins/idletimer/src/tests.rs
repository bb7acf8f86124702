use super::*;
use wasp_plugin_sdk::host::fake;
use wasp_plugin_sdk::testing::{TestPkt, batch};

const S: u64 = 1_000_000_000;

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn conf(p: &mut IdleTimer, site: u32, a: &str) -> Result<(), String> {
    p.configure(site, Kind::Statement, &args(a))
}

fn packet(p: &mut IdleTimer, site: u32) {
    let (buf, count, stride) = batch(
        &[TestPkt {
            frame: alloc::vec![0; 60],
            ..Default::default()
        }],
        0,
    );
    let r = wasp_plugin_sdk::__glue::apply(p, site, &buf, count, stride);
    // Every packet continues, said with the empty verdict list.
    assert!(r.verdicts.is_empty());
}

/// Moves both clocks to `t` and fires the due timers, as the host's `advance` does.
fn advance(p: &mut IdleTimer, t: u64) -> Vec<String> {
    fake::set_time(t);
    for key in fake::due_timers(t) {
        p.on_timer(key);
    }
    fake::take_events()
}

#[test]
fn validation_as_the_kernel() {
    let e = |a: &str| parse(&args(a)).unwrap_err();
    assert_eq!(
        e("label x timeout 0"),
        "idletimer: timeout 0 is refused (1 to 2147482 seconds)"
    );
    assert_eq!(
        e("label x timeout 0s"),
        "idletimer: timeout 0 is refused (1 to 2147482 seconds)"
    );
    assert_eq!(
        e("label x timeout 2147483s"),
        "idletimer: timeout 2147483s is more than 2147482 seconds"
    );
    assert!(parse(&args("label x timeout 2147482s")).is_ok());
    assert!(parse(&args("label x timeout 1")).is_ok());
    assert_eq!(
        e("label x timeout 1500ms"),
        "idletimer: timeout 1500ms is not a whole number of seconds"
    );
    assert_eq!(e("label \"\" timeout 10s"), "idletimer: empty label");
    let l27 = "a".repeat(27);
    assert!(parse(&args(&format!("label {l27} timeout 10s"))).is_ok());
    let l28 = "a".repeat(28);
    assert_eq!(
        e(&format!("label {l28} timeout 10s")),
        format!("idletimer: label \"{l28}\" is 28 bytes, more than 27")
    );
    assert_eq!(
        e("label . timeout 1"),
        "idletimer: label \".\" is not a valid sysfs name"
    );
    assert_eq!(
        e("label .. timeout 1"),
        "idletimer: label \"..\" is not a valid sysfs name"
    );
    assert_eq!(
        e("label a/b timeout 1"),
        "idletimer: label \"a/b\" is not a valid sysfs name"
    );
    for r in ["power", "subsystem", "uevent"] {
        assert_eq!(
            e(&format!("label {r} timeout 1")),
            format!("idletimer: label \"{r}\" is reserved")
        );
    }
    assert_eq!(e("timeout 10s"), "idletimer: label is required");
    assert_eq!(e("label x"), "idletimer: timeout is required");
    assert_eq!(e("label x timeout"), "idletimer: timeout needs a value");
    assert_eq!(
        e("label x timeout 10s send_nl_msg"),
        "idletimer: unexpected \"send_nl_msg\" (expected label, timeout or hard)"
    );
    assert_eq!(
        parse(&args("timeout 10s hard label \"wlan0\"")).unwrap(),
        Rule {
            label: "wlan0".into(),
            timeout_s: 10,
            clock: Clock::Boottime
        }
    );
}

#[test]
fn same_label_other_type_is_refused_c24() {
    fake::set_time(100 * S);
    let mut p = IdleTimer::default();
    conf(&mut p, 0, "label wlan0 timeout 10 hard").unwrap();
    assert_eq!(
        conf(&mut p, 1, "label wlan0 timeout 10"),
        Err(
            "idletimer: label \"wlan0\" is a hard timer: same label and different timer type"
                .into()
        )
    );
    assert_eq!(p.refs("wlan0"), 1, "the refused rule took no reference");
    let mut q = IdleTimer::default();
    conf(&mut q, 0, "label wlan0 timeout 10").unwrap();
    assert_eq!(
        conf(&mut q, 1, "label wlan0 timeout 10 hard"),
        Err(
            "idletimer: label \"wlan0\" is a plain timer: same label and different timer type"
                .into()
        )
    );
    // The only site of a label may change its type when it is configured again.
    conf(&mut q, 0, "label wlan0 timeout 10 hard").unwrap();
    assert_eq!(
        fake::with(|s| s.timers.values().next().copied()),
        Some((Clock::Boottime, 110 * S))
    );
}

#[test]
fn packets_restart_and_expiry_emits_once() {
    fake::set_time(1000 * S);
    fake::take_events();
    let mut p = IdleTimer::default();
    conf(&mut p, 0, "label wlan0 timeout 10s").unwrap();
    assert_eq!(p.remaining_ms("wlan0"), Some(10_000));
    assert!(advance(&mut p, 1004 * S).is_empty());
    packet(&mut p, 0); // restarts: now due at 1014 s
    assert_eq!(p.remaining_ms("wlan0"), Some(10_000));
    assert!(advance(&mut p, 1013 * S).is_empty());
    assert_eq!(p.list_state(0)[0].text, "label \"wlan0\" remaining 1000 ms");
    assert_eq!(advance(&mut p, 1014 * S), ["idletimer wlan0 expired"]);
    assert_eq!(p.remaining_ms("wlan0"), Some(0));
    assert_eq!(
        p.list_state(0)[0].values,
        [("remaining_ms".into(), 0), ("timeout_s".into(), 10)]
    );
    assert!(advance(&mut p, 2000 * S).is_empty(), "expires once");
    // A packet after expiry arms it again.
    packet(&mut p, 0);
    assert_eq!(advance(&mut p, 2010 * S), ["idletimer wlan0 expired"]);
}

#[test]
fn hard_timers_use_the_boottime_clock() {
    fake::set_time(0);
    fake::take_events();
    let mut p = IdleTimer::default();
    fake::with(|s| s.boottime = 50 * S);
    conf(&mut p, 3, "label sub1 timeout 5s hard").unwrap();
    assert_eq!(
        fake::with(|s| s.timers.values().next().copied()),
        Some((Clock::Boottime, 55 * S))
    );
    assert!(p.list_state(3)[0].text.ends_with(" hard"));
}

#[test]
fn sharing_and_reference_counting_c25() {
    fake::set_time(0);
    fake::take_events();
    let mut p = IdleTimer::default();
    conf(&mut p, 0, "label wlan0 timeout 10s").unwrap();
    fake::set_time(4 * S);
    // Plain re-use restarts with the new rule's timeout: due at 4 + 30 s.
    conf(&mut p, 1, "label wlan0 timeout 30s").unwrap();
    assert_eq!(p.refs("wlan0"), 2);
    assert_eq!(p.remaining_ms("wlan0"), Some(30_000));
    // A packet through site 0 restarts with site 0's timeout (10 s).
    packet(&mut p, 0);
    assert_eq!(p.remaining_ms("wlan0"), Some(10_000));
    p.release(0);
    assert_eq!(p.refs("wlan0"), 1);
    assert_eq!(
        advance(&mut p, 14 * S),
        ["idletimer wlan0 expired"],
        "the shared timer stays"
    );
    p.release(1);
    assert_eq!(p.refs("wlan0"), 0);
    assert_eq!(p.remaining_ms("wlan0"), None);
    assert!(
        fake::with(|s| s.timers.is_empty()),
        "the last release cancels the timer"
    );

    // Alarm re-use keeps the remaining time and does not extend it.
    conf(&mut p, 5, "label lte0 timeout 100s hard").unwrap();
    fake::set_time(74 * S);
    conf(&mut p, 6, "label lte0 timeout 500s hard").unwrap();
    assert_eq!(p.remaining_ms("lte0"), Some(40_000));
    assert_eq!(advance(&mut p, 114 * S), ["idletimer lte0 expired"]);
}

#[test]
fn reconfiguring_a_site_keeps_one_reference() {
    fake::set_time(0);
    let mut p = IdleTimer::default();
    conf(&mut p, 0, "label a timeout 10s").unwrap();
    conf(&mut p, 0, "label a timeout 20s").unwrap();
    assert_eq!(p.refs("a"), 1);
    assert_eq!(p.remaining_ms("a"), Some(20_000));
    conf(&mut p, 0, "label b timeout 20s").unwrap();
    assert_eq!((p.refs("a"), p.refs("b")), (0, 1));
    // A refused configure changes nothing.
    assert!(conf(&mut p, 0, "label c timeout 0").is_err());
    assert_eq!(p.refs("b"), 1);
}

#[test]
fn deadlines_survive_a_swap() {
    fake::set_time(0);
    fake::take_events();
    let mut v1 = IdleTimer::default();
    conf(&mut v1, 0, "label wlan0 timeout 10s").unwrap();
    conf(&mut v1, 1, "label lte0 timeout 60s hard").unwrap();
    fake::set_time(7 * S);
    packet(&mut v1, 1); // lte0 due at 67 s; wlan0 at 10 s
    let blob = v1.export_state();

    // The new version: configure first (as the host re-applies the ruleset), then import.
    fake::set_time(8 * S);
    let mut v2 = IdleTimer::default();
    conf(&mut v2, 0, "label wlan0 timeout 10s").unwrap();
    assert_eq!(v2.remaining_ms("wlan0"), Some(10_000));
    v2.import_state(&blob).unwrap();
    assert_eq!(
        v2.remaining_ms("wlan0"),
        Some(2_000),
        "the old deadline is kept"
    );
    // lte0 is configured after the import: it takes the imported deadline.
    conf(&mut v2, 1, "label lte0 timeout 60s hard").unwrap();
    assert_eq!(v2.remaining_ms("lte0"), Some(59_000));
    assert_eq!(advance(&mut v2, 10 * S), ["idletimer wlan0 expired"]);
    assert_eq!(advance(&mut v2, 67 * S), ["idletimer lte0 expired"]);

    assert_eq!(
        v2.import_state(b"nope"),
        Err("state blob of another format".into())
    );
    assert!(v2.import_state(&blob[..blob.len() - 1]).is_err());
    assert!(v2.describe().state_transfer);
}

#[test]
fn a_stale_timer_waits_for_the_new_deadline() {
    fake::set_time(0);
    fake::take_events();
    let mut p = IdleTimer::default();
    conf(&mut p, 0, "label x timeout 10s").unwrap();
    let key = *fake::with(|s| s.timers.keys().next().copied())
        .as_ref()
        .unwrap();
    fake::set_time(5 * S);
    packet(&mut p, 0);
    // The host fires the key early (a timer armed by a previous version): nothing expires.
    fake::set_time(10 * S);
    p.on_timer(key);
    assert!(fake::take_events().is_empty());
    assert_eq!(
        fake::with(|s| s.timers.get(&key).copied()),
        Some((Clock::Monotonic, 15 * S))
    );
    // Unknown keys are ignored.
    p.on_timer(key ^ 1);
    assert!(fake::take_events().is_empty());
}
