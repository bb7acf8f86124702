//! The kernel selftest `nft_concat_range.sh` against wasp-sets' pipapo: every type the script
//! defines (its 13 `TYPES` and `net_port_proto_net`), the `correctness`, `correctness_large`
//! and `timeout` tests checked probe by probe against the kernel (`nft get element` in a
//! namespace of the test's own) and `concurrency` on wasp alone, with a wrong-result check the
//! script does not have (`../shared/research/pipapo.md` section 4).
//!
//! The kernel parts skip (pass with a message) when not root, nft is missing or no namespace
//! can be created. `WASP_CONCAT_RANGE_SCRIPT_DCOUNT=1` makes `correctness_large` load the
//! script's filler counts (16 385 / 32 768 / 65 536) instead of the smallest count that turns
//! the first field's groups to 4 bits in the kernel (slower), `WASP_CONCAT_RANGE_FULL=1` probes
//! the kernel with `nft get element` at every step of `correctness_large` (minutes: nft 1.0.6
//! lists the whole set for each get). `packets` sends every probe as a frame through the
//! kernel's netdev ingress and `wasp replay --verdicts` (the harness of `tests/kernel.rs`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use wasp_conformance::concat_range::{
    Element, KernelSets, Step, TypeSpec, kernel_group_bits, sequence, types,
};
use wasp_conformance::concat_range::{frame, ruleset};
use wasp_conformance::kernel::{Kernel, KernelConfig};
use wasp_conformance::run::skip_reason;
use wasp_conformance::verdict::Verdict;
use wasp_sets::pipapo::Variant;
use wasp_sets::{InsertMode, NewElem, Pipapo, Shared};

/// The element behind a wasp lookup result, as start/end keys.
fn wasp_elem(set: &Pipapo<()>, h: Option<wasp_sets::ElemHandle>) -> Option<(Vec<u8>, Vec<u8>)> {
    let e = set.elem(h?)?;
    Some((e.start.to_vec(), e.end.to_vec()))
}

/// Every lookup variant of wasp for `key` agrees with `get`; returns get's element.
fn wasp_probe(
    t: &TypeSpec,
    set: &Pipapo<()>,
    key: &[u128],
    now: u64,
    diffs: &mut Vec<String>,
) -> Option<(Vec<u8>, Vec<u8>)> {
    let k = t.key_bytes(key);
    let got = wasp_elem(set, set.get(&k, now).ok());
    let mut batch = [None];
    set.lookup_batch(&k, now, &mut batch);
    let variants = [
        ("lookup", set.lookup(&k, now)),
        ("scalar", set.lookup_variant(Variant::Scalar, &k, now)),
        ("avx2", set.lookup_variant(Variant::Avx2, &k, now)),
        ("avx512", set.lookup_variant(Variant::Avx512, &k, now)),
        ("batch", batch[0]),
    ];
    for (name, h) in variants {
        if wasp_elem(set, h) != got {
            diffs.push(format!(
                "{}: wasp {name} and get differ for {{ {} }}",
                t.name,
                t.key_text(key)
            ));
        }
    }
    got
}

/// Inserts `e` into wasp (Add mode).
fn wasp_add(t: &TypeSpec, set: &mut Pipapo<()>, e: &Element, expires: Option<u64>, now: u64) {
    let (s, x) = t.elem_bytes(e);
    set.insert(
        NewElem {
            start: &s,
            end: Some(&x),
            data: 0,
            expires,
            ext: (),
        },
        InsertMode::Add,
        now,
    )
    .unwrap_or_else(|err| panic!("{}: wasp refuses {}: {err}", t.name, t.elem_text(e)));
}

/// Runs `t`'s correctness loop on the kernel set and on `set`; every probe must give the same
/// element on both sides and the one the script expects. Returns the differences.
/// With `probe_kernel` false, probes go to wasp only (the kernel still gets every add and
/// delete). With `pk`, every step is also applied to that harness kernel and every probe sent
/// through it as a frame (counted in the returned probes).
fn correctness_loop(
    k: &KernelSets,
    t: &TypeSpec,
    set: &mut Pipapo<()>,
    probe_kernel: bool,
    mut pk: Option<&mut Kernel>,
) -> (Vec<String>, usize) {
    let seq = sequence(t, true);
    let mut diffs = Vec::new();
    let mut probes = 0;
    for step in &seq.steps {
        if let Some(pk) = pk.as_deref_mut() {
            packet_step(pk, t, &seq.elements, step, &mut diffs);
            probes += usize::from(matches!(step, Step::Probe { .. }));
        }
        match step {
            Step::Add(i) => {
                let e = &seq.elements[*i];
                if let Err(err) = k.add(t, std::slice::from_ref(e), "") {
                    diffs.push(format!(
                        "{}: kernel refuses {}: {err}",
                        t.name,
                        t.elem_text(e)
                    ));
                }
                wasp_add(t, set, e, None, 0);
            }
            Step::Delete(i) => {
                let e = &seq.elements[*i];
                if let Err(err) = k.delete(t, e) {
                    diffs.push(format!(
                        "{}: kernel delete {}: {err}",
                        t.name,
                        t.elem_text(e)
                    ));
                }
                let (s, _) = t.elem_bytes(e);
                if let Err(err) = set.delete(&s, 0) {
                    diffs.push(format!("{}: wasp delete {}: {err}", t.name, t.elem_text(e)));
                }
            }
            Step::Probe { key, expect } => {
                probes += 1;
                let want = expect.map(|i| t.elem_bytes(&seq.elements[i]));
                let kernel = if !probe_kernel {
                    want.clone()
                } else {
                    match k.get(t, key) {
                        Ok(e) => e.map(|e| t.elem_bytes(&e)),
                        Err(err) => {
                            diffs.push(format!("{}: {err}", t.name));
                            continue;
                        }
                    }
                };
                let wasp = wasp_probe(t, set, key, 0, &mut diffs);
                if kernel != want || wasp != want {
                    diffs.push(format!(
                        "{}: probe {{ {} }}: script expects {}, kernel {}, wasp {}",
                        t.name,
                        t.key_text(key),
                        show(t, &want),
                        show(t, &kernel),
                        show(t, &wasp)
                    ));
                }
            }
        }
    }
    (diffs, probes)
}

/// A harness kernel (netns, veth, trace) with `table netdev concat`: set `test` of `t`'s type
/// holding `fill`, and the script's rule `<chain_spec> @test counter drop` on ingress.
fn packet_kernel(t: &TypeSpec, fill: &[Element]) -> Kernel {
    let mut kern = Kernel::start(KernelConfig::default())
        .unwrap_or_else(|e| panic!("{}: harness kernel: {e}", t.name));
    let dir = std::env::temp_dir().join(format!("wasp-concat-{}-{}", std::process::id(), t.name));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("ruleset.nft");
    let mut text = ruleset(t, &[], "wasp0").replace("\t\telements = {  }\n", "");
    for chunk in fill.chunks(2000) {
        let list: Vec<String> = chunk.iter().map(|e| t.elem_text(e)).collect();
        text.push_str(&format!(
            "add element netdev concat test {{ {} }}\n",
            list.join(", ")
        ));
    }
    std::fs::write(&file, text).expect("write ruleset");
    kern.load(&file)
        .unwrap_or_else(|e| panic!("{}: harness kernel refuses the ruleset: {e}", t.name));
    let _ = std::fs::remove_dir_all(&dir);
    kern
}

/// Applies one correctness step to the harness kernel: adds and deletes with nft, probes as a
/// frame whose verdict must be drop exactly when the script expects a match.
fn packet_step(
    kern: &mut Kernel,
    t: &TypeSpec,
    elements: &[Element],
    step: &Step,
    diffs: &mut Vec<String>,
) {
    let nft = |kern: &Kernel, verb: &str, e: &Element| {
        let text = format!("{{ {} }}", t.elem_text(e));
        let out = kern
            .netns()
            .command("nft")
            .args([verb, "element", "netdev", "concat", "test", &text])
            .output();
        match out {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(String::from_utf8_lossy(&o.stderr).into_owned()),
            Err(e) => Some(e.to_string()),
        }
    };
    match step {
        Step::Add(i) => {
            if let Some(err) = nft(kern, "add", &elements[*i]) {
                diffs.push(format!("{}: harness kernel add: {err}", t.name));
            }
        }
        Step::Delete(i) => {
            if let Some(err) = nft(kern, "delete", &elements[*i]) {
                diffs.push(format!("{}: harness kernel delete: {err}", t.name));
            }
        }
        Step::Probe { key, expect } => {
            let want = if expect.is_some() {
                Verdict::Drop
            } else {
                Verdict::Accept
            };
            match kern.send(&frame(t, key)).map(|o| o.decision()) {
                Ok(Some(d)) if d.verdict == want => {}
                other => diffs.push(format!(
                    "{}: frame {{ {} }} through the kernel: {other:?}, script expects {want}",
                    t.name,
                    t.key_text(key)
                )),
            }
        }
    }
}

/// An element as nft text, or "no element".
fn show(t: &TypeSpec, e: &Option<(Vec<u8>, Vec<u8>)>) -> String {
    let Some((s, x)) = e else {
        return "no element".into();
    };
    let mut ranges = Vec::new();
    let (mut a, mut b) = (&s[..], &x[..]);
    for f in &t.fields {
        let w = f.kind.width();
        let v = |bytes: &[u8]| {
            bytes[..w]
                .iter()
                .fold(0u128, |acc, &x| (acc << 8) | u128::from(x))
        };
        ranges.push((v(a), v(b)));
        a = &a[w..];
        b = &b[w..];
    }
    format!("{{ {} }}", t.elem_text(&Element { ranges }))
}

fn kernel_or_skip(test: &str, ts: &[TypeSpec]) -> Option<KernelSets> {
    if let Some(why) = skip_reason() {
        eprintln!("SKIPPED concat_range {test}: {why}");
        return None;
    }
    Some(KernelSets::new(ts).unwrap_or_else(|e| panic!("{test}: kernel set-up: {e}")))
}

/// `correctness` for every type: empty-set probe, then elements of growing width with gaps,
/// match probes inside, a nomatch probe after each, every third element deleted again.
#[test]
fn correctness() {
    let ts = types();
    let Some(k) = kernel_or_skip("correctness", &ts) else {
        return;
    };
    let t0 = Instant::now();
    let mut diffs = Vec::new();
    let mut probes = 0;
    for t in &ts {
        let mut set = Pipapo::<()>::new(&t.field_lens()).expect("set");
        let (d, p) = correctness_loop(&k, t, &mut set, true, None);
        diffs.extend(d);
        probes += p;
        assert_eq!(set.group_bits(), vec![8; t.fields.len()], "{}", t.name);
    }
    eprintln!(
        "concat_range correctness: {} types, {probes} probes on kernel and wasp, {} differences, {:.1} s",
        ts.len(),
        diffs.len(),
        t0.elapsed().as_secs_f64()
    );
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// Checks wasp's group width of every field against the kernel's rule for its rule count.
fn check_group_bits(t: &TypeSpec, set: &Pipapo<()>, when: &str, diffs: &mut Vec<String>) {
    let bits = set.group_bits();
    for ((f, &rules), &b) in t.fields.iter().zip(&set.rule_counts()).zip(&bits) {
        if let Some(want) = kernel_group_bits(f.kind.width(), rules)
            && want != b
        {
            diffs.push(format!(
                "{} {when}: field {:?} with {rules} rules has {b}-bit groups, the kernel's rule gives {want}",
                t.name, f.kind
            ));
        }
    }
    if bits[0] != 4 {
        diffs.push(format!(
            "{} {when}: first field not 4-bit: {bits:?}",
            t.name
        ));
    }
}

/// `correctness_large`: fillers that never match a probe (enough of them to turn the first
/// field's groups to 4 bits in the kernel), then the correctness loop; a sample of fillers is
/// probed on both sides, and wasp's group widths follow the kernel's rule.
#[test]
fn correctness_large() {
    let ts = types();
    let Some(k) = kernel_or_skip("correctness_large", &ts) else {
        return;
    };
    let script = std::env::var_os("WASP_CONCAT_RANGE_SCRIPT_DCOUNT").is_some_and(|v| v == "1");
    let full = std::env::var_os("WASP_CONCAT_RANGE_FULL").is_some_and(|v| v == "1");
    let t0 = Instant::now();
    let mut diffs = Vec::new();
    let mut probes = 0;
    let mut fillers_total = 0;
    for t in &ts {
        let n = if script {
            t.script_dcount.max(t.min_dcount())
        } else {
            t.min_dcount()
        };
        let fill = t.fillers(n);
        fillers_total += n;
        let tk = Instant::now();
        k.add(t, &fill, "")
            .unwrap_or_else(|e| panic!("{}: kernel refuses the fillers: {e}", t.name));
        let mut pk = packet_kernel(t, &fill);
        let tw = Instant::now();
        let mut set = Pipapo::<()>::new(&t.field_lens()).expect("set");
        for e in &fill {
            wasp_add(t, &mut set, e, None, 0);
        }
        eprintln!(
            "{}: {n} fillers: kernel {:.1} s, wasp {:.1} s",
            t.name,
            (tw - tk).as_secs_f64(),
            tw.elapsed().as_secs_f64()
        );
        check_group_bits(t, &set, "after fillers", &mut diffs);
        let (d, p) = correctness_loop(&k, t, &mut set, full, Some(&mut pk));
        diffs.extend(d);
        probes += p;
        // The final state on both sides: the last element kept, the last one deleted, one
        // nomatch probe and fillers (`nft get element` lists the whole set in nft 1.0.6, about
        // 1 s per 16 000 elements, so the kernel gets a sample unless FULL is set).
        let seq = sequence(t, true);
        let deleted: Vec<usize> = seq
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Delete(i) => Some(*i),
                _ => None,
            })
            .collect();
        let kept = (0..seq.elements.len()).rev().find(|i| !deleted.contains(i));
        let mut sample: Vec<(Vec<u128>, Option<&Element>)> = Vec::new();
        let start_key = |e: &Element| e.ranges.iter().map(|r| r.0).collect::<Vec<u128>>();
        let end_key = |e: &Element| e.ranges.iter().map(|r| r.1).collect::<Vec<u128>>();
        if let Some(i) = kept {
            sample.push((end_key(&seq.elements[i]), Some(&seq.elements[i])));
        }
        if let Some(&i) = deleted.last() {
            sample.push((start_key(&seq.elements[i]), None));
        }
        let mut nomatch = end_key(seq.elements.last().expect("elements"));
        for (v, f) in nomatch.iter_mut().zip(&t.fields) {
            if f.kind != wasp_conformance::concat_range::Kind::Proto {
                *v += 1;
            }
        }
        sample.push((nomatch, None));
        let nfill = if full { 20 } else { 1 };
        for e in fill.iter().step_by(n / nfill).take(nfill) {
            sample.push((start_key(e), Some(e)));
        }
        for (key, want) in sample {
            probes += 1;
            let kernel = k.get(t, &key).map(|o| o.map(|e| t.elem_bytes(&e)));
            let wasp = wasp_probe(t, &set, &key, 0, &mut diffs);
            let want = want.map(|e| t.elem_bytes(e));
            match kernel {
                Ok(kernel) if kernel == want && wasp == want => {}
                kernel => diffs.push(format!(
                    "{}: final-state probe {{ {} }}: want {}, kernel {kernel:?}, wasp {}",
                    t.name,
                    t.key_text(&key),
                    show(t, &want),
                    show(t, &wasp)
                )),
            }
        }
        check_group_bits(t, &set, "after the loop", &mut diffs);
    }
    eprintln!(
        "concat_range correctness_large: {} types, {fillers_total} fillers, {probes} probes, {} differences, {:.1} s",
        ts.len(),
        diffs.len(),
        t0.elapsed().as_secs_f64()
    );
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// A type, its wasp set and the keys probed before expiry.
type Stored<'a> = (&'a TypeSpec, Pipapo<()>, Vec<Vec<u128>>);

/// Element timeout in the kernel (`timeout 2s`) and in wasp (2 s on the test's clock).
const TIMEOUT: Duration = Duration::from_secs(2);

/// `timeout`: each element added with a timeout and probed at once (found on both sides), then,
/// once every element has expired, the same probes of the inserted ranges (the script's intent;
/// its second loop probes the ranges after them) find nothing on either side.
#[test]
fn timeout() {
    let ts = types();
    let Some(k) = kernel_or_skip("timeout", &ts) else {
        return;
    };
    let t0 = Instant::now();
    let now = || t0.elapsed().as_nanos() as u64;
    let mut diffs = Vec::new();
    let mut stored: Vec<Stored<'_>> = Vec::new();
    let mut probes = 0;
    let suffix = format!(" timeout {}s", TIMEOUT.as_secs());
    for t in &ts {
        let seq = sequence(t, false);
        let mut set = Pipapo::<()>::new(&t.field_lens()).expect("set");
        let mut keys = Vec::new();
        for step in &seq.steps {
            match step {
                Step::Add(i) => {
                    let e = &seq.elements[*i];
                    let at = now();
                    wasp_add(t, &mut set, e, Some(at + TIMEOUT.as_nanos() as u64), at);
                    if let Err(err) = k.add(t, std::slice::from_ref(e), &suffix) {
                        diffs.push(format!(
                            "{}: kernel refuses {}: {err}",
                            t.name,
                            t.elem_text(e)
                        ));
                    }
                }
                Step::Probe { key, expect } => {
                    probes += 1;
                    let want = expect.map(|i| t.elem_bytes(&seq.elements[i]));
                    let kernel = k.get(t, key).map(|o| o.map(|e| t.elem_bytes(&e)));
                    let wasp = wasp_probe(t, &set, key, now(), &mut diffs);
                    match kernel {
                        Ok(kernel) if kernel == want && wasp == want => {}
                        kernel => diffs.push(format!(
                            "{}: probe before expiry {{ {} }}: want {}, kernel {kernel:?}, wasp {}",
                            t.name,
                            t.key_text(key),
                            show(t, &want),
                            show(t, &wasp)
                        )),
                    }
                    keys.push(key.clone());
                }
                Step::Delete(_) => unreachable!("timeout has no deletes"),
            }
        }
        stored.push((t, set, keys));
    }
    // The last element was added just now; wait until it expired, with a margin.
    std::thread::sleep(TIMEOUT + Duration::from_millis(500));
    for (t, set, keys) in stored {
        for key in keys {
            probes += 1;
            let kernel = k.get(t, &key).map(|o| o.map(|e| t.elem_bytes(&e)));
            let wasp = wasp_probe(t, &set, &key, now(), &mut diffs);
            match kernel {
                Ok(None) if wasp.is_none() => {}
                kernel => diffs.push(format!(
                    "{}: probe after expiry {{ {} }}: kernel {kernel:?}, wasp {}",
                    t.name,
                    t.key_text(&key),
                    show(t, &wasp)
                )),
            }
        }
    }
    eprintln!(
        "concat_range timeout: {} types, {probes} probes, {} differences, {:.1} s",
        ts.len(),
        diffs.len(),
        t0.elapsed().as_secs_f64()
    );
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// Transactions of the concurrency writer, cycled: each leaves the set in a known state
/// (which elements, by index), published with the set so that readers know what to expect.
const ROUNDS: usize = 50;

/// The live value readers see: the state number (index into the writer's states) and the set.
type Live = (usize, Pipapo<()>);

/// `concurrency` (wasp only, every type): while the writer commits transactions through
/// `txn::Shared` (flush + re-add everything in one transaction, delete every other element,
/// re-add them in reverse order, delete all, add all), two readers look up every match and
/// nomatch probe of the correctness loop without a lock; each lookup must return exactly the
/// element that the snapshot's state holds for that key (the script only checks for crashes).
#[test]
fn concurrency() {
    let t0 = Instant::now();
    let mut total_lookups = 0;
    let mut total_commits = 0;
    for t in &types() {
        let seq = sequence(t, true);
        let n = seq.elements.len();
        let all: Vec<usize> = (0..n).collect();
        let evens: Vec<usize> = (0..n).step_by(2).collect();
        // States: 0 all, 1 evens, 2 all (odds re-added in reverse), 3 none.
        let states: Vec<Vec<usize>> = vec![all.clone(), evens, all.clone(), Vec::new()];
        let mut keys: Vec<Vec<u128>> = seq
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Probe { key, .. } => Some(key.clone()),
                _ => None,
            })
            .collect();
        for e in &seq.elements {
            keys.push(e.ranges.iter().map(|r| r.0).collect());
            keys.push(e.ranges.iter().map(|r| r.1).collect());
        }
        let mut first = Pipapo::<()>::new(&t.field_lens()).expect("set");
        for e in &seq.elements {
            wasp_add(t, &mut first, e, None, 0);
        }
        let shared: Shared<Live> = Shared::new((0, first));
        let done = AtomicBool::new(false);
        let lookups = AtomicU64::new(0);
        let wrong: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|sc| {
            for _ in 0..2 {
                sc.spawn(|| {
                    let mut out = vec![None; 1];
                    while !done.load(Ordering::Relaxed) {
                        let snap = shared.load();
                        let (state, set) = &**snap;
                        let elems: Vec<Element> = states[*state]
                            .iter()
                            .map(|&i| seq.elements[i].clone())
                            .collect();
                        for key in &keys {
                            let want = t.oracle(&elems, key).map(|e| t.elem_bytes(e));
                            let k = t.key_bytes(key);
                            set.lookup_batch(&k, 0, &mut out);
                            for (name, h) in [("lookup", set.lookup(&k, 0)), ("batch", out[0])] {
                                let got = wasp_elem(set, h);
                                if got != want {
                                    let mut w = wrong.lock().unwrap_or_else(|e| e.into_inner());
                                    if w.len() < 20 {
                                        w.push(format!(
                                            "{}: state {state}: {name} {{ {} }} gave {}, want {}",
                                            t.name,
                                            t.key_text(key),
                                            show(t, &got),
                                            show(t, &want)
                                        ));
                                    }
                                }
                            }
                            lookups.fetch_add(2, Ordering::Relaxed);
                        }
                    }
                });
            }
            for round in 0..ROUNDS {
                let mut tx = shared.begin();
                let (state, set) = tx.get_mut();
                match round % 5 {
                    // Flush and re-add the same elements in one transaction: no miss allowed.
                    0 => {
                        set.flush();
                        for e in &seq.elements {
                            wasp_add(t, set, e, None, 0);
                        }
                        *state = 0;
                    }
                    1 => {
                        for i in (1..n).step_by(2) {
                            let (s, _) = t.elem_bytes(&seq.elements[i]);
                            set.delete(&s, 0).expect("delete odd");
                        }
                        *state = 1;
                    }
                    2 => {
                        for i in (1..n).step_by(2).rev() {
                            wasp_add(t, set, &seq.elements[i], None, 0);
                        }
                        *state = 2;
                    }
                    3 => {
                        for e in &seq.elements {
                            let (s, _) = t.elem_bytes(e);
                            set.delete(&s, 0).expect("delete");
                        }
                        *state = 3;
                    }
                    _ => {
                        for e in &seq.elements {
                            wasp_add(t, set, e, None, 0);
                        }
                        *state = 0;
                    }
                }
                tx.publish();
                std::thread::yield_now();
            }
            done.store(true, Ordering::Relaxed);
        });
        let wrong = wrong.into_inner().unwrap_or_else(|e| e.into_inner());
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        total_lookups += lookups.load(Ordering::Relaxed);
        total_commits += ROUNDS;
    }
    eprintln!(
        "concat_range concurrency: 14 types, {total_commits} commits, {total_lookups} checked lookups, {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

/// Packets through the kernel's netdev ingress and `wasp replay --verdicts`: per type, the set
/// holds the correctness loop's final elements (every third one deleted), the chain has the
/// script's rule `<chain_spec> @test counter drop`, and every probe of the loop plus each
/// element's corners is sent as a frame; kernel and wasp verdicts must agree frame by frame.
#[test]
fn packets() {
    use wasp_conformance::run::{Packet, build_wasp, compare};
    if let Some(why) = skip_reason() {
        eprintln!("SKIPPED concat_range packets: {why}");
        return;
    }
    let wasp = build_wasp().unwrap_or_else(|e| panic!("cannot build wasp: {e}"));
    let exe = std::env::current_exe().expect("current_exe");
    let base = exe
        .ancestors()
        .nth(3)
        .map_or_else(std::env::temp_dir, std::path::Path::to_path_buf)
        .join("conformance")
        .join("concat_range");
    let t0 = Instant::now();
    let mut diffs = Vec::new();
    let mut frames = 0;
    for t in &types() {
        let seq = sequence(t, true);
        let mut alive = vec![false; seq.elements.len()];
        let mut keys: Vec<Vec<u128>> = Vec::new();
        for s in &seq.steps {
            match s {
                Step::Add(i) => alive[*i] = true,
                Step::Delete(i) => alive[*i] = false,
                Step::Probe { key, .. } => {
                    if !keys.contains(key) {
                        keys.push(key.clone());
                    }
                }
            }
        }
        let kept: Vec<&Element> = seq
            .elements
            .iter()
            .zip(&alive)
            .filter_map(|(e, &a)| a.then_some(e))
            .collect();
        for e in &kept {
            keys.push(e.ranges.iter().map(|r| r.0).collect());
            keys.push(e.ranges.iter().map(|r| r.1).collect());
        }
        let out = base.join(t.name);
        std::fs::create_dir_all(&out).expect("out dir");
        let file = out.join("ruleset.nft");
        std::fs::write(&file, ruleset(t, &kept, "wasp0")).expect("write ruleset");
        let packets: Vec<Packet> = keys
            .iter()
            .map(|k| Packet {
                origin: format!("gen:{}:{{ {} }}", t.name, t.key_text(k)),
                frame: frame(t, k),
            })
            .collect();
        frames += packets.len();
        let c = compare(&wasp, &file, &packets, &out)
            .unwrap_or_else(|e| panic!("concat_range packets {}: {e}", t.name));
        if c.compared != packets.len() {
            diffs.push(format!(
                "{}: {} of {} frames compared",
                t.name,
                c.compared,
                packets.len()
            ));
        }
        diffs.extend(c.differences.iter().map(|d| format!("{}: {d}", t.name)));
        // The kernel's verdicts against the script's expectation (drop = in a kept element).
        let kv = std::fs::read_to_string(out.join("kernel.verdicts")).expect("kernel.verdicts");
        for line in kv.lines().filter(|l| !l.starts_with('#')) {
            let mut w = line.split_whitespace();
            let (Some(n), Some(v)) = (w.next().and_then(|n| n.parse::<usize>().ok()), w.next())
            else {
                continue;
            };
            let key = &keys[n - 1];
            let want = if t
                .oracle(&seq.elements, key)
                .is_some_and(|e| kept.contains(&e))
            {
                "drop"
            } else {
                "accept"
            };
            if v != want {
                diffs.push(format!(
                    "{}: frame {n} {{ {} }}: kernel {v}, script expects {want}",
                    t.name,
                    t.key_text(key)
                ));
            }
        }
    }
    eprintln!(
        "concat_range packets: 14 types, {frames} frames through the kernel and wasp, {} differences, {:.1} s; artifacts in {}",
        diffs.len(),
        t0.elapsed().as_secs_f64(),
        base.display()
    );
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
