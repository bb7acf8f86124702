//! Hot swap: v1 → v2 with the state carried (a per-site packet counter), v2 → v3 without
//! state transfer (fresh, said in the event), a swap the new version refuses changes nothing,
//! a swap requested from another thread applies at the next vector boundary, and after a swap
//! no handle to the old version stays (case C35: the old answers never come back).

mod common;

use common::{guest, host, pkt, runtime, site};
use wasp_core::{ExtKind, Extensions, Fallback};
use wasp_plugin::{PluginError, Runtime, StateMove};

const FRAME: [u8; 64] = [0; 64];

/// Match `n` packets at site `id`; returns the answers.
fn answers(rt: &mut Runtime, id: u32, n: usize) -> Vec<bool> {
    let pkts = vec![pkt(&FRAME, 0, 0, 0); n];
    // Alternating, so that a uniform answer must have been written.
    let mut out: Vec<bool> = (0..n).map(|i| i % 2 == 0).collect();
    rt.matches(id, &pkts, &mut out);
    out
}

fn packets(rt: &mut Runtime, id: u32) -> (u64, String) {
    let st = rt.list_state(id).expect("list-state");
    assert_eq!(st.len(), 1);
    let n = st[0]
        .values
        .iter()
        .find(|(k, _)| k == "packets")
        .map(|(_, v)| *v)
        .expect("packets");
    (n, st[0].text.clone())
}

#[test]
fn v1_to_v2_carries_state_and_v1_is_gone() {
    let host = host();
    let v1 = guest(&host, "swap_v1");
    let v2 = guest(&host, "swap_v2");
    let v3 = guest(&host, "swap_v3");
    assert_eq!(
        (v1.info().version.as_str(), v2.info().version.as_str()),
        ("1", "2")
    );
    let mut rt = runtime(&host, &v1);
    assert_eq!(
        rt.configure(&site(0, "swapper", &["a"], Fallback::Absent)),
        Ok(ExtKind::Match)
    );
    assert_eq!(
        rt.configure(&site(3, "swapper", &["b"], Fallback::Absent)),
        Ok(ExtKind::Match)
    );
    assert_eq!(answers(&mut rt, 0, 5), vec![true; 5]);
    assert_eq!(answers(&mut rt, 3, 2), vec![true; 2]);
    assert_eq!(packets(&mut rt, 0), (5, "v1".into()));
    assert_eq!(v1.users(), 2, "the test's handle and the runtime's");

    let out = rt.swap("swapper", &v2).expect("swap to v2");
    assert_eq!(
        (
            out.from_version.as_str(),
            out.to_version.as_str(),
            out.sites
        ),
        ("1", "2", 2)
    );
    assert_eq!(out.state, StateMove::Carried { bytes: 24 });
    let ev = rt.take_events();
    assert_eq!(ev.len(), 1);
    assert_eq!(
        ev[0].text,
        "plugin swapper swapped 1 -> 2, state carried (24 bytes)"
    );
    // C35: only the test holds v1 now; every call goes to v2 (which answers false).
    assert_eq!(v1.users(), 1);
    assert_eq!(answers(&mut rt, 0, 3), vec![false; 3]);
    assert_eq!(
        packets(&mut rt, 0),
        (8, "v2".into()),
        "counts continue across the swap"
    );
    assert_eq!(packets(&mut rt, 3), (2, "v2".into()));

    let out = rt.swap("swapper", &v3).expect("swap to v3");
    assert_eq!(
        out.state,
        StateMove::Fresh {
            reason: "version 3 has no state transfer".into()
        }
    );
    assert_eq!(
        rt.take_events()[0].text,
        "plugin swapper swapped 2 -> 3, started fresh: version 3 has no state transfer"
    );
    assert_eq!(v2.users(), 1);
    assert_eq!(answers(&mut rt, 0, 4), vec![true; 4]);
    assert_eq!(packets(&mut rt, 0), (4, "v3".into()));
    assert_eq!(
        rt.plugin("swapper").map(|p| p.info().version.clone()),
        Some("3".into())
    );
}

#[test]
fn a_refused_swap_changes_nothing() {
    let host = host();
    let v1 = guest(&host, "swap_v1");
    let v2 = guest(&host, "swap_v2");
    let probe = guest(&host, "probe");
    let mut rt = runtime(&host, &v1);
    assert_eq!(
        rt.configure(&site(0, "swapper", &["v1-only"], Fallback::Absent)),
        Ok(ExtKind::Match)
    );
    assert_eq!(answers(&mut rt, 0, 2), vec![true; 2]);

    let e = rt.swap("swapper", &v2).unwrap_err();
    assert_eq!(
        e,
        PluginError::Configure {
            plugin: "swapper".into(),
            site: 0,
            msg: "swapper 2: argument \"v1-only\" is refused".into()
        }
    );
    // A different plugin that refuses the arguments: also nothing changes.
    let e = rt.swap("swapper", &probe).unwrap_err();
    assert!(
        e.to_string().contains("probe: unknown mode \"v1-only\""),
        "{e}"
    );
    assert!(matches!(
        rt.swap("nope", &v2),
        Err(PluginError::UnknownPlugin(_))
    ));
    assert!(rt.take_events().is_empty());
    assert_eq!(v2.users(), 1);
    assert_eq!(answers(&mut rt, 0, 3), vec![true; 3]);
    assert_eq!(packets(&mut rt, 0), (5, "v1".into()));
}

#[test]
fn swap_requested_from_another_thread_applies_at_the_next_vector() {
    let host = host();
    let v1 = guest(&host, "swap_v1");
    let v2 = guest(&host, "swap_v2");
    let mut rt = runtime(&host, &v1);
    rt.configure(&site(0, "swapper", &[], Fallback::Absent))
        .unwrap();
    let handle = rt.swap_handle();
    let rx = std::thread::spawn(move || handle.request("swapper", v2))
        .join()
        .unwrap();
    // Not yet: the worker has not reached a vector boundary.
    assert_eq!(answers(&mut rt, 0, 2), vec![true; 2]);
    assert!(rx.try_recv().is_err());
    rt.advance(1_000);
    let out = rx.try_recv().expect("result sent").expect("swap ok");
    assert_eq!(out.state, StateMove::Carried { bytes: 12 });
    assert_eq!(answers(&mut rt, 0, 2), vec![false; 2]);
    assert_eq!(packets(&mut rt, 0), (4, "v2".into()));
}

/// A swap prepared off the worker for the use sites of its time is not used when the sites
/// changed before the boundary: the worker configures the new version for the sites as they
/// are (two here, not the one the requester saw).
#[test]
fn a_prepared_swap_follows_use_sites_configured_after_the_request() {
    let host = host();
    let v1 = guest(&host, "swap_v1");
    let v2 = guest(&host, "swap_v2");
    let mut rt = runtime(&host, &v1);
    rt.configure(&site(0, "swapper", &[], Fallback::Absent))
        .unwrap();
    let handle = rt.swap_handle();
    let rx = handle.request("swapper", v2.clone());
    rt.configure(&site(5, "swapper", &[], Fallback::Absent))
        .unwrap();
    rt.advance(1_000);
    let out = rx.try_recv().expect("result sent").expect("swap ok");
    assert_eq!(out.sites, 2);
    assert_eq!(answers(&mut rt, 5, 2), vec![false; 2]);
    // Prepared and used: one site, and the old instance is dropped by the next request.
    let rx = handle.request("swapper", v1.clone());
    rt.advance(2_000);
    assert_eq!(rx.try_recv().expect("sent").expect("ok").sites, 2);
    assert_eq!(answers(&mut rt, 0, 2), vec![true; 2]);
    assert_eq!(
        v2.users(),
        1,
        "only the test's handle: no runtime or request keeps v2"
    );
}

#[test]
fn list_reset_and_release() {
    let host = host();
    let v1 = guest(&host, "swap_v1");
    let mut rt = runtime(&host, &v1);
    rt.configure(&site(0, "swapper", &[], Fallback::Absent))
        .unwrap();
    answers(&mut rt, 0, 6);
    assert_eq!(packets(&mut rt, 0), (6, "v1".into()));
    rt.reset_state(0, 0).unwrap();
    assert_eq!(packets(&mut rt, 0), (0, "v1".into()));
    answers(&mut rt, 0, 1);
    assert_eq!(packets(&mut rt, 0), (1, "v1".into()));
    rt.release(0);
    assert_eq!(rt.site_kind(0), None);
    assert_eq!(rt.list_state(0), Err(PluginError::UnknownSite(0)));
    // A released site answers the fallback without calling the plugin.
    let mut out = [true; 2];
    rt.matches(0, &[pkt(&FRAME, 0, 0, 0); 2], &mut out);
    assert_eq!(out, [false; 2]);
    assert!(rt.take_events().is_empty());
}

#[test]
fn workers_share_a_plugin_and_keep_their_own_state() {
    let host = host();
    let v1 = guest(&host, "swap_v1");
    let workers: Vec<_> = (1..=2usize)
        .map(|n| {
            let (host, v1) = (host.clone(), v1.clone());
            std::thread::spawn(move || {
                let mut rt = runtime(&host, &v1);
                rt.configure(&site(0, "swapper", &[], Fallback::Absent))
                    .unwrap();
                assert_eq!(answers(&mut rt, 0, 3 * n), vec![true; 3 * n]);
                packets(&mut rt, 0).0
            })
        })
        .collect();
    let counts: Vec<u64> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    // One instance per worker: each counted only its own packets.
    assert_eq!(counts, vec![3, 6]);
    assert_eq!(v1.users(), 1, "the runtimes are gone with their threads");
}

#[test]
fn a_swap_with_the_pool_full_changes_nothing() {
    let host = wasp_plugin::PluginHost::new(wasp_plugin::HostConfig {
        max_instances: 1,
        ..wasp_plugin::HostConfig::default()
    })
    .unwrap();
    let v1 = guest(&host, "swap_v1");
    let v2 = guest(&host, "swap_v2");
    let mut rt = runtime(&host, &v1);
    rt.configure(&site(0, "swapper", &[], Fallback::Absent))
        .unwrap();
    assert_eq!(answers(&mut rt, 0, 2), vec![true; 2]);
    // The only pool slot is v1's: v2 cannot be instantiated while v1 runs.
    let e = rt.swap("swapper", &v2).unwrap_err();
    assert!(matches!(e, PluginError::Instantiate { .. }), "{e}");
    assert_eq!(answers(&mut rt, 0, 2), vec![true; 2]);
    assert_eq!(packets(&mut rt, 0), (4, "v1".into()));
    assert_eq!(v2.users(), 1);
}
