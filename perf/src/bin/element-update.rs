//! element-update: how long one element command takes on a loaded set, wasp's daemon against
//! the kernel, in the same run. For each shape and size, the same file is loaded into a running
//! `wasp run` (one worker, `wasp ctl -f`) and into the kernel (`nft -f` in a namespace of its
//! own with a veth end of the chain's device name); then, alternately, `add element` of one new
//! element and `delete element` of it, each a process of its own as a user types it (`wasp ctl
//! add element ...` against `nft add element ...`), and `list set`. Medians of `--runs`.
//!
//! Shapes (one netdev ingress chain that looks the set up, as an engineer's blocklist):
//! - **hash**: `type ipv4_addr`, N addresses, `ip daddr @s`;
//! - **counted**: as hash with `counter` on the set (every element counts: a blocklist that
//!   shows who it stopped);
//! - **interval**: `type ipv4_addr; flags interval`, N disjoint /30s, `ip daddr @s`;
//! - **concat**: `type ipv4_addr . inet_service; flags interval`, N elements `/30 . port range`,
//!   `ip daddr . udp dport @s` (the pipapo back-end in both).
//!
//! Also memory: the daemon's resident set after the load and what the load added to it, and
//! what the same load added to the kernel's slab and vmalloc memory (`/proc/meminfo`, where
//! nf_tables keeps set elements and pipapo's tables; system-wide, so other activity in the
//! same second counts too).
//!
//! Needs root. `--smoke`: size 1000, one run (CI).
//!
//! `cargo run --release -p wasp-perf --bin element-update -- [--sizes 1000,100000]
//! [--shapes hash,interval,concat] [--runs 5]`

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use clap::Parser;
use wasp_perf::daemon::{DEVICE, WaspRun, wasp_binary};
use wasp_perf::netns::{Res, cmd, ip};

#[derive(Parser)]
#[command(about = "one element command on a loaded set: wasp ctl against nft")]
struct Args {
    /// Elements in the set.
    #[arg(long, value_delimiter = ',', default_value = "1000,100000")]
    sizes: Vec<usize>,
    /// Shapes: `hash`, `counted`, `interval`, `concat`.
    #[arg(long, value_delimiter = ',', default_value = "hash,interval,concat")]
    shapes: Vec<String>,
    /// Add/delete pairs per case (medians are printed).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Daemon workers.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// The wasp binary (default: next to this one).
    #[arg(long)]
    wasp: Option<PathBuf>,
    /// CI smoke mode: size 1000, one run.
    #[arg(long)]
    smoke: bool,
    /// Also print where the daemon's time goes, in process (no root needed): the model's
    /// change, the sets' copies with the change (`Engine::set_update`), and for the concat
    /// shape the pipapo copy and index build alone.
    #[arg(long)]
    phases: bool,
}

/// Address number `i` as dotted quad, from 10.0.0.0 on in steps of `step`.
fn addr(i: usize, step: u32) -> String {
    let a = (10u32 << 24).wrapping_add(i as u32 * step);
    let b = a.to_be_bytes();
    format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
}

/// Element `i` of `shape` in nft's syntax.
fn element(shape: &str, i: usize) -> String {
    match shape {
        "hash" | "counted" => addr(i, 1),
        "interval" => format!("{}/30", addr(i, 4)),
        _ => format!("{}/30 . {}-{}", addr(i, 4), 1000 + i % 50, 2000 + i % 50),
    }
}

/// The set's declaration and the rule that looks it up. The rule has no `counter`: in wasp a
/// rule's counter runs as the built-in counter plugin, whose first instance costs the daemon
/// about 10 MiB whatever the set (what the memory columns would otherwise count as the set's).
fn decl(shape: &str) -> (&'static str, &'static str) {
    match shape {
        "hash" => ("type ipv4_addr;", "ip daddr @s drop"),
        "counted" => ("type ipv4_addr; counter;", "ip daddr @s drop"),
        "interval" => ("type ipv4_addr; flags interval;", "ip daddr @s drop"),
        _ => (
            "type ipv4_addr . inet_service; flags interval;",
            "ip daddr . udp dport @s drop",
        ),
    }
}

/// The ruleset of `shape` with `n` elements.
fn ruleset(shape: &str, n: usize) -> String {
    let (ty, rule) = decl(shape);
    let mut s = String::with_capacity(n * 40);
    let _ = write!(s, "table netdev u {{\n set s {{\n  {ty}\n  elements = {{");
    for i in 0..n {
        let sep = if i == 0 { " " } else { ", " };
        let _ = write!(s, "{sep}{}", element(shape, i));
    }
    let _ = write!(
        s,
        " }}\n }}\n chain c {{\n  type filter hook ingress device \"{DEVICE}\" priority 0; policy accept;\n  {rule}\n }}\n}}\n"
    );
    s
}

/// Wall time of `c`, which must succeed.
fn timed(c: &mut Command) -> Res<Duration> {
    let t0 = Instant::now();
    cmd(c, None)?;
    Ok(t0.elapsed())
}

/// The kernel side: a namespace with a veth end named as the chain's device.
struct Kernel {
    ns: String,
    /// What the load added to the kernel's slab and vmalloc memory, KiB.
    grew_kib: i64,
}

/// A field of `/proc/meminfo` in KiB (0 when missing).
fn meminfo_kib(key: &str) -> i64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The kernel's memory that holds nf_tables' sets: slab objects (elements, rbtree nodes,
/// hash buckets) and vmalloc areas (pipapo's lookup and mapping tables), KiB, system-wide.
fn kernel_set_memory_kib() -> i64 {
    meminfo_kib("Slab") + meminfo_kib("VmallocUsed")
}

impl Kernel {
    fn load(n: usize, file: &Path) -> Res<Kernel> {
        let mut k = Kernel {
            ns: format!("wasp-elem-nft-{}-{n}", std::process::id()),
            grew_kib: 0,
        };
        ip(&["netns", "add", &k.ns])?;
        ip(&[
            "-n", &k.ns, "link", "add", DEVICE, "type", "veth", "peer", "name", "l1p",
        ])?;
        ip(&["-n", &k.ns, "link", "set", DEVICE, "up"])?;
        let before = kernel_set_memory_kib();
        k.nft(&["-f", &file.display().to_string()])?;
        k.grew_kib = kernel_set_memory_kib() - before;
        Ok(k)
    }

    fn nft(&self, args: &[&str]) -> Res<Duration> {
        timed(
            Command::new("ip")
                .args(["netns", "exec", &self.ns, "nft"])
                .args(args),
        )
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.ns]);
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Medians in ms of (add, delete, list) of `runs` rounds through `run`.
fn rounds(
    shape: &str,
    size: usize,
    runs: usize,
    mut run: impl FnMut(&[&str]) -> Res<Duration>,
) -> Res<[f64; 3]> {
    let (mut add, mut del, mut list) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..runs {
        let e = format!("{{ {} }}", element(shape, size + 1 + r));
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        add.push(ms(run(&["add", "element", "netdev", "u", "s", &e])?));
        del.push(ms(run(&["delete", "element", "netdev", "u", "s", &e])?));
        list.push(ms(run(&["list", "set", "netdev", "u", "s"])?));
    }
    Ok([median(add), median(del), median(list)])
}

/// CPU µs of `f` on this thread.
fn cpu_us(f: impl FnOnce()) -> f64 {
    let t0 = cpu_time::ThreadTime::now();
    f();
    t0.elapsed().as_secs_f64() * 1e6
}

/// Heap bytes in use now (glibc's count), 0 when unknown.
fn heap() -> i64 {
    wasp_io::heap_in_use_bytes().map_or(0, |b| b as i64)
}

/// Bytes per element the daemon's copies of a set hold, in process: the ruleset model as
/// parsed (what listings print), one compiled program (its sets with their index), the model
/// once the program holds its large sets' elements and the file's text is packed
/// (`Engine::hold_elements`, `Ruleset::pack_sources`, as the daemon does after every change),
/// and the back-end view that the daemon keeps for checking element
/// commands after one of them (none for the sets it checks against the program:
/// `wasp_ruleset::apply_elements_against`). One row per shape and size.
fn memory(shape: &str, size: usize) -> Res<()> {
    let text = ruleset(shape, size);
    let h0 = heap();
    let mut rs = wasp_ruleset::parse_str(&text, "m.nft").map_err(|e| e.to_string())?;
    let h1 = heap();
    let mut engine = wasp_core::Engine::compile(&rs).map_err(|e| e.to_string())?;
    let h2 = heap();
    engine.hold_elements(&mut rs);
    rs.pack_sources();
    let h3 = heap();
    let mut shadows = wasp_ruleset::SetShadows::default();
    // One element command, checked and applied as the daemon applies it.
    let t = format!("add element netdev u s {{ {} }}", element(shape, size + 1));
    let oracle = Box::new(engine.set_oracle());
    let txn = wasp_ruleset::apply_elements_against(&mut rs, &mut shadows, oracle, &t, "b.nft")
        .map_err(|e| e.to_string())?
        .ok_or("not an element batch")?;
    let update = engine.set_update(&txn, 0).ok_or("not in place")?;
    txn.commit();
    drop(engine.apply_set_update(&update));
    drop(update);
    engine.hold_elements(&mut rs);
    shadows.forget_checked_by(&rs.tables, &engine.set_oracle());
    let h4 = heap();
    let per = |b: i64| b as f64 / size as f64;
    println!(
        "| {shape} | {size} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
        per(h1 - h0),
        per(h1 - h0 + h3 - h2),
        per(h2 - h1),
        per(h4 - h3),
        per(h4 - h0)
    );
    drop((engine, rs, shadows));
    Ok(())
}

/// The daemon's element path in process: medians of `runs` add/delete pairs, CPU µs per phase.
fn phases(shape: &str, size: usize, runs: usize) -> Res<()> {
    let mut rs =
        wasp_ruleset::parse_str(&ruleset(shape, size), "p.nft").map_err(|e| e.to_string())?;
    let mut engine = wasp_core::Engine::compile(&rs).map_err(|e| e.to_string())?;
    let mut shadows = wasp_ruleset::SetShadows::default();
    let (mut model, mut sets, mut swap) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..=runs {
        for verb in ["add", "delete"] {
            let text = format!(
                "{verb} element netdev u s {{ {} }}",
                element(shape, size + 1 + r)
            );
            let (mut txn, mut upd) = (None, None);
            let m = cpu_us(|| {
                txn = wasp_ruleset::apply_elements(&mut rs, &mut shadows, &text, "b.nft")
                    .ok()
                    .flatten();
            });
            let txn = txn.ok_or("not an element batch")?;
            let s = cpu_us(|| upd = engine.set_update(&txn, 0));
            let upd = upd.ok_or("needs a whole compile")?;
            let c = cpu_us(|| txn.commit());
            let w = cpu_us(|| drop(engine.apply_set_update(&upd)));
            // The first round builds the kernel back-end's view of the set once.
            if r > 0 {
                model.push(m + c);
                sets.push(s);
                swap.push(w);
            }
        }
    }
    let mut extra = String::new();
    if shape == "concat" {
        let mut p = wasp_sets::Pipapo::<()>::new(&[4, 2]).map_err(|e| format!("{e:?}"))?;
        for i in 0..size {
            let a = (10u32 << 24) + i as u32 * 4;
            let lo: Vec<u8> = a
                .to_be_bytes()
                .into_iter()
                .chain(((1000 + i % 50) as u16).to_be_bytes())
                .collect();
            let hi: Vec<u8> = (a + 3)
                .to_be_bytes()
                .into_iter()
                .chain(((2000 + i % 50) as u16).to_be_bytes())
                .collect();
            let e = wasp_sets::NewElem {
                start: &lo,
                end: Some(&hi),
                data: i as u32,
                expires: None,
                ext: (),
            };
            p.insert(e, wasp_sets::InsertMode::Add, 0)
                .map_err(|e| format!("{e:?}"))?;
        }
        let mut copy = None;
        let clone = cpu_us(|| copy = Some(p.clone()));
        let mut copy = copy.ok_or("clone")?;
        let index = cpu_us(|| copy.build_index());
        let _ = write!(extra, " (pipapo copy {clone:.0}, index build {index:.0})");
    }
    println!(
        "| {shape} | {size} | {:.0} | {:.0}{extra} | {:.1} |",
        median(model),
        median(sets),
        median(swap)
    );
    Ok(())
}

fn main() -> Res<()> {
    let mut args = Args::parse();
    if args.smoke {
        args.sizes = vec![1000];
        args.runs = 1;
    }
    if args.phases {
        println!(
            "element-update phases: CPU µs per command in process, median of {} add/delete pairs",
            args.runs
        );
        println!();
        println!(
            "| shape | size | model change | set copies with the change | swap into an engine |"
        );
        println!("|---|---:|---:|---:|---:|");
        for shape in &args.shapes {
            for &size in &args.sizes {
                phases(shape, size, args.runs)?;
            }
        }
        println!();
        println!("element-update memory: heap bytes per element in process (glibc's count)");
        println!();
        println!(
            "| shape | size | ruleset model as parsed | model, held | compiled program | after one command | total |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|");
        for shape in &args.shapes {
            for &size in &args.sizes {
                memory(shape, size)?;
            }
        }
        println!();
    }
    if !wasp_perf::sys::is_root() {
        println!("element-update: skipped (needs root for namespaces)");
        return Ok(());
    }
    let wasp = wasp_binary(args.wasp.as_deref())?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    println!(
        "element-update: wall time of one command, ms, median of {} ({}, {} worker(s))",
        args.runs,
        wasp.display(),
        args.workers
    );
    println!();
    println!(
        "| shape | size | wasp add | nft add | wasp delete | nft delete | wasp list set | nft list set | daemon RSS MiB | wasp load MiB | kernel load MiB |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut n = 0;
    for shape in &args.shapes {
        for &size in &args.sizes {
            n += 1;
            let file = dir.path().join(format!("{shape}-{size}.nft"));
            std::fs::write(&file, ruleset(shape, size)).map_err(|e| e.to_string())?;
            let daemon = WaspRun::start(&wasp, dir.path(), "wasp-elem-", n, args.workers)?;
            let rss0 = daemon.rss_kib();
            daemon.apply_file(&file)?;
            let rss = daemon.rss_kib();
            let w = rounds(shape, size, args.runs, |a| daemon.ctl(a))?;
            drop(daemon);
            let kernel = Kernel::load(n, &file)?;
            let k = rounds(shape, size, args.runs, |a| kernel.nft(a))?;
            let kernel_grew = kernel.grew_kib;
            drop(kernel);
            let mib = |kib: i64| kib as f64 / 1024.0;
            println!(
                "| {shape} | {size} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} | {:.1} | {:.1} |",
                w[0],
                k[0],
                w[1],
                k[1],
                w[2],
                k[2],
                mib(rss as i64),
                mib(rss as i64 - rss0 as i64),
                mib(kernel_grew)
            );
        }
    }
    Ok(())
}
