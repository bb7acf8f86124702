//! `set-commit-rate`: pipapo lookup rate while a writer commits transactions, as a ratio of the
//! idle rate (sets issue, point 8).
//!
//! For each of the kernel selftest's performance cases (`wasp_sets::perfcases`), one reader
//! thread looks up keys spread over the set through [`wasp_sets::txn::Shared::load`] (lock-free)
//! for `--millis` ms, first alone, then while a writer thread commits transactions paced at
//! `--rate` per second (each transaction clones the set, deletes one element by its start point,
//! adds it back, and commits by one pointer swap). Rounds alternate idle / busy and the table
//! shows medians; the reader's CPU ns per lookup come from its thread CPU clock. Every lookup
//! must hit (the deleted element is back before each commit), and the run counts misses.
//!
//! With `--daemon`, each transaction is the daemon's own for an element command
//! (`wasp_core::Engine::set_update` on a pipapo set): copy the set, delete one element, add
//! it back, refresh the field index (`Pipapo::refresh_index`: the index is kept, with an
//! overlay of the changes), publish by one pointer swap; and the reader looks keys up through
//! the field index (`Pipapo::lookup_index`), as the engine does, idle and busy alike.
//!
//! ```text
//! cargo run --release -p wasp-perf --bin set-commit-rate [-- --rate 1000 --millis 300 --rounds 3 [--daemon]]
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wasp_sets::perfcases::CASES;
use wasp_sets::pipapo::GroupPolicy;
use wasp_sets::txn::Shared;
use wasp_sets::{InsertMode, NewElem, Pipapo};

/// Command-line options.
#[derive(clap::Parser)]
#[command(about = "pipapo lookup rate while a writer commits transactions")]
struct Args {
    /// Transactions per second the writer aims at.
    #[arg(long, default_value_t = 1000)]
    rate: u32,
    /// Length of each measurement, ms.
    #[arg(long, default_value_t = 300)]
    millis: u64,
    /// Idle/busy rounds per case; the table shows medians.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The daemon's transactions and lookups (field index kept through changes).
    #[arg(long)]
    daemon: bool,
}

fn thread_cpu_ns() -> u64 {
    cpu_time::ThreadTime::try_now().map_or(0, |t| t.as_duration().as_nanos() as u64)
}

/// Look up `probes` (keys of `key_len` bytes) round-robin for `dur`: (lookups, wall ns, cpu ns,
/// misses).
fn read_for(
    set: &Shared<Pipapo>,
    probes: &[u8],
    key_len: usize,
    dur: Duration,
    daemon: bool,
) -> [u64; 4] {
    let (mut n, mut misses) = (0u64, 0u64);
    let cpu0 = thread_cpu_ns();
    let t0 = Instant::now();
    while t0.elapsed() < dur {
        let snap = set.load();
        for key in probes.chunks_exact(key_len) {
            n += 1;
            let hit = if daemon {
                snap.lookup_index(key, 0)
            } else {
                snap.lookup(key, 0)
            };
            misses += u64::from(hit.is_none());
        }
    }
    [
        n,
        t0.elapsed().as_nanos() as u64,
        thread_cpu_ns() - cpu0,
        misses,
    ]
}

/// Commit transactions at `rate` per second until `stop`: returns the number committed.
fn write_until(
    set: &Shared<Pipapo>,
    elements: &[(Vec<u8>, Vec<u8>)],
    rate: u32,
    stop: &AtomicBool,
    daemon: bool,
) -> u64 {
    let period = Duration::from_secs(1) / rate.max(1);
    let t0 = Instant::now();
    let mut done = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let (s, e) = &elements[done as usize % elements.len()];
        let mut txn = set.begin();
        let p = txn.get_mut();
        p.delete(s, 0).expect("element present");
        p.insert(
            NewElem {
                start: s,
                end: Some(e),
                data: 0,
                expires: None,
                ext: (),
            },
            InsertMode::Create,
            0,
        )
        .expect("re-add after delete");
        if daemon {
            txn.get_mut().refresh_index();
            txn.publish();
        } else {
            txn.commit();
        }
        done += 1;
        let due = t0 + period * done as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    done
}

/// CPU µs of each phase of a transaction, medians of `k` transactions with no reader running:
/// begin (wait for writers + clone), delete one element, add it back, commit (collect expired
/// elements + pointer swap; the old copy is dropped here when no reader holds it).
fn writer_phases(
    set: &Shared<Pipapo>,
    elements: &[(Vec<u8>, Vec<u8>)],
    k: usize,
    daemon: bool,
) -> [f64; 4] {
    let mut ph: [Vec<f64>; 4] = Default::default();
    for i in 0..k {
        let (s, e) = &elements[(i * 7919) % elements.len()];
        let t0 = thread_cpu_ns();
        let mut txn = set.begin();
        let t1 = thread_cpu_ns();
        txn.get_mut().delete(s, 0).expect("element present");
        let t2 = thread_cpu_ns();
        txn.get_mut()
            .insert(
                NewElem {
                    start: s,
                    end: Some(e),
                    data: 0,
                    expires: None,
                    ext: (),
                },
                InsertMode::Create,
                0,
            )
            .expect("re-add after delete");
        let t3 = thread_cpu_ns();
        if daemon {
            txn.get_mut().refresh_index();
            txn.publish();
        } else {
            txn.commit();
        }
        let t4 = thread_cpu_ns();
        for (j, (a, b)) in [(t0, t1), (t1, t2), (t2, t3), (t3, t4)]
            .into_iter()
            .enumerate()
        {
            ph[j].push((b - a) as f64 / 1e3);
        }
    }
    ph.map(median)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args = <Args as clap::Parser>::parse();
    let dur = Duration::from_millis(args.millis);
    println!(
        "set-commit-rate: writer at {} transactions/s, {} ms per measurement, median of {} rounds{}",
        args.rate,
        args.millis,
        args.rounds.max(1),
        if args.daemon {
            "; the daemon's transactions (index kept) and lookups (through the index)"
        } else {
            ""
        }
    );
    println!(
        "| case | entries | idle Mlookups/s | busy Mlookups/s | busy/idle | idle CPU ns | busy CPU ns | commits/s reached | misses |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut phases = Vec::new();
    for case in &CASES {
        let key_len: usize = case.field_lens().iter().sum();
        let mut built = case.build(GroupPolicy::Auto);
        if args.daemon {
            built.build_index();
        }
        let set = Arc::new(Shared::new(built));
        let elements = case.elements();
        let probes = case.probes(4096);
        let (mut idle, mut busy, mut idle_cpu, mut busy_cpu, mut rates) =
            (vec![], vec![], vec![], vec![], vec![]);
        let mut misses = 0;
        read_for(&set, &probes, key_len, dur / 4, args.daemon); // warm-up
        for _ in 0..args.rounds.max(1) {
            let r = read_for(&set, &probes, key_len, dur, args.daemon);
            idle.push(r[0] as f64 * 1e3 / r[1] as f64);
            idle_cpu.push(r[2] as f64 / r[0] as f64);
            misses += r[3];

            let stop = Arc::new(AtomicBool::new(false));
            let writer = {
                let (set, stop, elements) = (set.clone(), stop.clone(), elements.clone());
                let (rate, daemon) = (args.rate, args.daemon);
                std::thread::spawn(move || {
                    let t0 = Instant::now();
                    let n = write_until(&set, &elements, rate, &stop, daemon);
                    n as f64 / t0.elapsed().as_secs_f64()
                })
            };
            let r = read_for(&set, &probes, key_len, dur, args.daemon);
            stop.store(true, Ordering::Relaxed);
            rates.push(writer.join().expect("writer thread"));
            busy.push(r[0] as f64 * 1e3 / r[1] as f64);
            busy_cpu.push(r[2] as f64 / r[0] as f64);
            misses += r[3];
        }
        phases.push((
            case,
            writer_phases(&set, &elements, 101, args.daemon),
            set.load().table_bytes(),
        ));
        let (i, b) = (median(idle), median(busy));
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {:.0} | {} |",
            case.name,
            case.entries,
            i,
            b,
            b / i,
            median(idle_cpu),
            median(busy_cpu),
            median(rates),
            misses
        );
    }
    println!();
    println!("Writer cost per transaction, CPU µs, median of 101 transactions with no reader:");
    println!(
        "| case | entries | table KiB | begin (clone) | delete | add | commit (gc or index refresh + swap) | total | max commits/s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (case, p, bytes) in phases {
        let total: f64 = p.iter().sum();
        println!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} |",
            case.name,
            case.entries,
            bytes / 1024,
            p[0],
            p[1],
            p[2],
            p[3],
            total,
            1e6 / total
        );
    }
}
