//! plugin-cost: what a Wasm plugin costs per packet, next to the same work in native Rust.
//!
//! Cases: a trivial match (test guest `trivial`: `l4proto == 6`, 64-byte window) against a
//! native closure doing the same through the same `Extensions` trait; the bundled counter
//! plugin (`counter`, stateful: packets and bytes per site) against a native counter; and the
//! trivial guest's `apply` (every packet continues, no edit), which shows what a statement's
//! call and result cost apart from the guest's own work. For
//! vector sizes 1, 8, 32, 64 and packet sizes 64 and 1500 bytes: CPU ns per packet (thread
//! CPU time, median of the rounds), the host's packing of the flat buffer and its checks
//! included. The geneve match (`opt class 0x0102 type 0x80`) against the same parse in native
//! Rust, on Geneve frames where half the packets carry the option: through `plugin.matches`
//! with its whole 336-byte window (as before `fast-match`), and through `fast-match` with its
//! 128-byte first window: as a `list<u8>` (`matches-first`), and written into the plugin's
//! batch area (`area-match.matches-first-at`, the default). Also
//! compile time (wall, median of loads) and instantiate time (CPU, median). With `--ttlbelow
//! LABEL=PATH`, the guides' `ttlbelow 64` match of each language given, next to native Rust.
//!
//! Usage: `cargo run --release -p wasp-perf --bin plugin-cost [-- --packets N --rounds R]`.

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use wasp_core::{ExtEdit, ExtKind, ExtPacket, ExtSite, ExtVerdict, Extensions, Fallback};
use wasp_plugin::{HostConfig, Plugin, PluginHost, Runtime};

#[derive(Parser)]
#[command(about = "ns per packet of Wasm plugins vs native, compile and instantiate times")]
struct Args {
    /// Packets per round and case.
    #[arg(long, default_value_t = 200_000)]
    packets: usize,
    /// Rounds per case (the median is printed).
    #[arg(long, default_value_t = 7)]
    rounds: usize,
    /// Only the per-packet cases whose name contains this (and no load or swap tables).
    #[arg(long)]
    only: Option<String>,
    /// Another build of the geneve plugin (e.g. a copy of an older geneve.wasm) to measure in
    /// the same run, through its default match path: before/after tables of a guest change.
    #[arg(long)]
    geneve_before: Option<PathBuf>,
    /// The same for the counter plugin (a copy of an older counter.wasm).
    #[arg(long)]
    counter_before: Option<PathBuf>,
    /// A `ttlbelow N` component (the guides' example, `sdk/<lang>/`, or a project of `wasp
    /// plugin new`) as LABEL=PATH, measured as `ttlbelow 64` next to the same match in native
    /// Rust, with its compile and instantiate times. Repeat for several (one per language).
    #[arg(long, value_name = "LABEL=PATH")]
    ttlbelow: Vec<String>,
    /// Vector sizes to measure (for profiling one of them; the table keeps its four columns,
    /// "-" for the ones not measured).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 8, 32, 64])]
    vectors: Vec<usize>,
}

fn cpu_ns() -> u64 {
    cpu_time::ThreadTime::try_now().map_or(0, |t| t.as_duration().as_nanos() as u64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A native match through the same trait as the plugins: the baseline of a plugin's cost.
struct Native(fn(&ExtPacket<'_>) -> bool);

/// The native `ttlbelow 64`: IPv4 TTL (byte 8 of the header) below 64.
const NATIVE_TTL: Native =
    Native(|p| p.nfproto == 2 && p.frame.get(p.l3 as usize + 8).is_some_and(|&t| t < 64));

/// The native trivial match: TCP.
const NATIVE_MATCH: Native = Native(|p| p.l4proto == 6);

impl Extensions for Native {
    fn matches(&mut self, _site: u32, pkts: &[ExtPacket<'_>], out: &mut [bool]) {
        for (o, p) in out.iter_mut().zip(pkts) {
            *o = (self.0)(p);
        }
    }
    fn apply(
        &mut self,
        _: u32,
        _: &[ExtPacket<'_>],
        _: &mut [ExtVerdict],
        _: &mut Vec<(usize, ExtEdit)>,
    ) {
    }
    fn advance(&mut self, _: u64) {}
}

/// The native baseline of the counter: packets and bytes per site (nft_counter_do_eval).
#[derive(Default)]
struct NativeCounter {
    counts: Vec<(u64, u64)>,
}

impl Extensions for NativeCounter {
    fn matches(&mut self, _: u32, _: &[ExtPacket<'_>], _: &mut [bool]) {}
    fn apply(
        &mut self,
        site: u32,
        pkts: &[ExtPacket<'_>],
        verdicts: &mut [ExtVerdict],
        _: &mut Vec<(usize, ExtEdit)>,
    ) {
        let i = site as usize;
        if self.counts.len() <= i {
            self.counts.resize(i + 1, (0, 0));
        }
        let c = &mut self.counts[i];
        for (v, p) in verdicts.iter_mut().zip(pkts) {
            c.0 += 1;
            c.1 += u64::from(p.len);
            *v = ExtVerdict::Continue;
        }
    }
    fn advance(&mut self, _: u64) {}
}

/// The native baseline of the geneve match `opt class 0x0102 type 0x80`: the same parse in
/// plain Rust (UDP to port 6081, the Geneve header, a walk of the option block within the
/// frame; RFC 8926), through the same trait.
struct NativeGeneve;

fn native_geneve(p: &ExtPacket<'_>) -> bool {
    if p.l4proto != 17 || p.l4 == 0xffff {
        return false;
    }
    let l4 = p.l4 as usize;
    let Some(udp) = p.frame.get(l4..l4 + 8) else {
        return false;
    };
    if u16::from_be_bytes([udp[2], udp[3]]) != 6081 {
        return false;
    }
    let Some(g) = p.frame.get(l4 + 8..l4 + 16) else {
        return false;
    };
    let start = l4 + 16;
    let end = (start + (g[0] & 0x3f) as usize * 4).min(p.frame.len());
    let mut pos = start;
    while pos + 4 <= end {
        let o = &p.frame[pos..pos + 4];
        let data = (o[3] & 0x1f) as usize * 4;
        if pos + 4 + data > end {
            return false;
        }
        if u16::from_be_bytes([o[0], o[1]]) == 0x0102 && o[2] == 0x80 {
            return true;
        }
        pos += 4 + data;
    }
    false
}

impl Extensions for NativeGeneve {
    fn matches(&mut self, _site: u32, pkts: &[ExtPacket<'_>], out: &mut [bool]) {
        for (o, p) in out.iter_mut().zip(pkts) {
            *o = native_geneve(p);
        }
    }
    fn apply(
        &mut self,
        _: u32,
        _: &[ExtPacket<'_>],
        _: &mut [ExtVerdict],
        _: &mut Vec<(usize, ExtEdit)>,
    ) {
    }
    fn advance(&mut self, _: u64) {}
}

/// Geneve frames of `size` bytes: Ethernet, IPv4, UDP to 6081, Geneve with one option of 4
/// data bytes (class 0x0102 type 0x80 on even packets, class 0x0103 on odd ones).
fn geneve_frames(size: usize, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let len = size.max(62);
            let mut f = vec![0u8; len];
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
            f[22] = 64;
            f[23] = 17;
            f[36..38].copy_from_slice(&6081u16.to_be_bytes());
            f[38..40].copy_from_slice(&((len - 34) as u16).to_be_bytes());
            f[42] = 2; // opt_len: 2 words
            f[44..46].copy_from_slice(&[0x65, 0x58]);
            f[46..49].copy_from_slice(&[0, 0, 7]); // VNI 7
            let class: u16 = if i % 2 == 0 { 0x0102 } else { 0x0103 };
            f[50..52].copy_from_slice(&class.to_be_bytes());
            f[52] = 0x80;
            f[53] = 1;
            f[54..58].copy_from_slice(&[1, 2, 3, 4]);
            f
        })
        .collect()
}

fn frames(size: usize, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut f = vec![0u8; size];
            f[12] = 0x08; // IPv4
            f[22] = (i * 37 % 256) as u8; // TTL, for the ttlbelow cases
            f[23] = if i % 2 == 0 { 6 } else { 17 };
            f
        })
        .collect()
}

fn packets(frames: &[Vec<u8>]) -> Vec<ExtPacket<'_>> {
    frames
        .iter()
        .map(|f| ExtPacket {
            frame: f,
            len: f.len() as u32,
            iif: 1,
            mark: 0,
            elem: 0,
            l3: 14,
            l4: 34,
            l4proto: f[23],
            nfproto: 2,
            iftype: 1,
        })
        .collect()
}

/// CPU ns per packet of `ext` on vectors of `vec` packets, `kind` deciding matches or apply.
fn measure(
    ext: &mut dyn Extensions,
    kind: ExtKind,
    pkts: &[ExtPacket<'_>],
    vec: usize,
    args: &Args,
) -> f64 {
    let calls = args.packets.div_ceil(vec);
    let mut out = vec![false; vec];
    let mut verdicts = vec![ExtVerdict::Continue; vec];
    let mut edits = Vec::new();
    let mut round = |n: usize| {
        let t0 = cpu_ns();
        for c in 0..n {
            let start = (c * vec) % (pkts.len() - vec + 1);
            let batch = &pkts[start..start + vec];
            match kind {
                ExtKind::Match => ext.matches(0, batch, &mut out),
                _ => ext.apply(0, batch, &mut verdicts, &mut edits),
            }
            edits.clear();
        }
        std::hint::black_box(&out);
        (cpu_ns() - t0) as f64 / (n * vec) as f64
    };
    round(calls / 10 + 1); // warm up
    median((0..args.rounds).map(|_| round(calls)).collect())
}

fn runtime(host: &PluginHost, plugin: &Plugin, args: &[&str]) -> Runtime {
    let mut rt = Runtime::new(host);
    let name = plugin.info().name.clone();
    rt.add(&name, plugin).expect("add");
    let site = ExtSite {
        id: 0,
        table: 0,
        plugin: name,
        kind: ExtKind::Match,
        args: args.iter().map(|s| s.to_string()).collect(),
        fallback: Fallback::Absent,
    };
    rt.configure(&site).expect("configure");
    rt
}

/// A runtime whose site 0 uses `plugin` as exactly `kind`.
fn runtime_as(host: &PluginHost, plugin: &Plugin, kind: ExtKind) -> Runtime {
    let mut rt = Runtime::new(host);
    let name = plugin.info().name.clone();
    rt.add(&name, plugin).expect("add");
    let site = ExtSite {
        id: 0,
        table: 0,
        plugin: name,
        kind,
        args: Vec::new(),
        fallback: Fallback::Absent,
    };
    rt.configure_as(&site, kind).expect("configure");
    rt
}

fn load_times(host: &PluginHost, path: &PathBuf) -> (f64, f64, u64) {
    let size = std::fs::metadata(path).map_or(0, |m| m.len());
    // Components of several MB (JavaScript, Python) take seconds each: three loads.
    let loads = if size > 4 << 20 { 3 } else { 5 };
    let compile: Vec<f64> = (0..loads)
        .map(|_| {
            let t0 = Instant::now();
            let p = host.load(path).expect("load");
            let _ = p.compile_time();
            t0.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let p = host.load(path).expect("load");
    let inst: Vec<f64> = (0..200)
        .map(|_| {
            let t0 = cpu_ns();
            p.instantiate_once().expect("instantiate");
            (cpu_ns() - t0) as f64 / 1e3
        })
        .collect();
    (median(compile), median(inst), size)
}

fn main() {
    let args = Args::parse();
    let host = PluginHost::new(HostConfig::default()).expect("plugin host");
    let trivial_path = wasp_guests::test_guest("trivial");
    let counter_path = wasp_guests::plugin("counter");
    let trivial = host.load(&trivial_path).expect("trivial guest");
    let counter = counter_path
        .exists()
        .then(|| host.load(&counter_path).expect("counter plugin"));
    let geneve_path = wasp_guests::plugin("geneve");
    let geneve = geneve_path
        .exists()
        .then(|| host.load(&geneve_path).expect("geneve plugin"));
    let counter_before = args
        .counter_before
        .as_ref()
        .map(|p| host.load(p).expect("--counter-before plugin"));
    let geneve_before = args
        .geneve_before
        .as_ref()
        .map(|p| host.load(p).expect("--geneve-before plugin"));
    let ttlbelow: Vec<(String, PathBuf, Plugin)> = args
        .ttlbelow
        .iter()
        .map(|spec| {
            let (label, path) = spec.split_once('=').expect("--ttlbelow LABEL=PATH");
            let p = host
                .load(path)
                .unwrap_or_else(|e| panic!("--ttlbelow {spec}: {e}"));
            (label.to_string(), PathBuf::from(path), p)
        })
        .collect();

    println!(
        "plugin-cost: CPU ns per packet, median of {} rounds of {} packets",
        args.rounds, args.packets
    );
    println!();
    println!("| case | window | pkt bytes | vec 1 | vec 8 | vec 32 | vec 64 |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for size in [64usize, 1500] {
        let fr = frames(size, 256);
        let pkts = packets(&fr);
        let mut cases: Vec<(String, u32, Box<dyn Extensions>, ExtKind)> = vec![
            (
                "native match (l4proto == 6)".into(),
                0,
                Box::new(NATIVE_MATCH),
                ExtKind::Match,
            ),
            (
                "wasm trivial match".into(),
                trivial.info().window,
                Box::new(runtime(&host, &trivial, &[])),
                ExtKind::Match,
            ),
            (
                "wasm trivial apply (all continue)".into(),
                trivial.info().window,
                Box::new(runtime_as(&host, &trivial, ExtKind::Statement)),
                ExtKind::Statement,
            ),
            (
                "native counter".into(),
                0,
                Box::new(NativeCounter::default()),
                ExtKind::Stateful,
            ),
        ];
        if let Some(b) = &counter_before {
            cases.push((
                "wasm counter plugin, --counter-before build".into(),
                b.info().window,
                Box::new(runtime(&host, b, &[])),
                ExtKind::Stateful,
            ));
        }
        if let Some(c) = &counter {
            let rt = runtime(&host, c, &[]);
            cases.push((
                "wasm counter plugin".into(),
                c.info().window,
                Box::new(rt),
                ExtKind::Stateful,
            ));
        }
        if !ttlbelow.is_empty() {
            cases.push((
                "native ttlbelow 64".into(),
                0,
                Box::new(NATIVE_TTL),
                ExtKind::Match,
            ));
        }
        for (label, _, p) in &ttlbelow {
            let mut rt = runtime(&host, p, &["64"]);
            // The same answers as the native match, on a vector of each TTL pattern.
            let (mut got, mut want) = (vec![false; 64], vec![false; 64]);
            rt.matches(0, &pkts[..64], &mut got);
            { NATIVE_TTL }.matches(0, &pkts[..64], &mut want);
            assert_eq!(got, want, "ttlbelow {label}");
            cases.push((
                format!("wasm ttlbelow 64 ({label})"),
                p.info().first_window.unwrap_or(p.info().window),
                Box::new(rt),
                ExtKind::Match,
            ));
        }
        for (name, window, mut ext, kind) in cases {
            if args
                .only
                .as_ref()
                .is_some_and(|o| !name.contains(o.as_str()))
            {
                continue;
            }
            let cols: Vec<String> = [1usize, 8, 32, 64]
                .iter()
                .map(|&v| {
                    if args.vectors.contains(&v) {
                        format!("{:.1}", measure(ext.as_mut(), kind, &pkts, v, &args))
                    } else {
                        "-".into()
                    }
                })
                .collect();
            println!("| {name} | {window} | {size} | {} |", cols.join(" | "));
        }
        let gfr = geneve_frames(size, 256);
        let gpkts = packets(&gfr);
        let mut gcases: Vec<(String, u32, Box<dyn Extensions>)> = vec![(
            "native geneve parse (opt class 0x0102 type 0x80)".into(),
            0,
            Box::new(NativeGeneve),
        )];
        if let Some(b) = &geneve_before {
            let clause = ["opt", "class", "0x0102", "type", "0x80"];
            gcases.push((
                "wasm geneve match, --geneve-before build (its default path)".into(),
                b.info().first_window.unwrap_or(b.info().window),
                Box::new(runtime(&host, b, &clause)),
            ));
        }
        if let Some(g) = &geneve {
            let clause = ["opt", "class", "0x0102", "type", "0x80"];
            let mut whole = runtime(&host, g, &clause);
            whole.set_fast_match(false);
            gcases.push((
                "wasm geneve match, whole window (plugin.matches: before)".into(),
                g.info().window,
                Box::new(whole),
            ));
            let mut list = runtime(&host, g, &clause);
            list.set_batch_area(false);
            gcases.push((
                "wasm geneve match, first window (fast-match, list<u8>)".into(),
                g.info().first_window.unwrap_or(g.info().window),
                Box::new(list),
            ));
            gcases.push((
                "wasm geneve match, first window (fast-match, batch area)".into(),
                g.info().first_window.unwrap_or(g.info().window),
                Box::new(runtime(&host, g, &clause)),
            ));
        }
        for (name, window, mut ext) in gcases {
            if args
                .only
                .as_ref()
                .is_some_and(|o| !name.contains(o.as_str()))
            {
                continue;
            }
            // Both must give the same answers: half the packets carry the option.
            let mut out = vec![false; 4];
            ext.matches(0, &gpkts[..4], &mut out);
            assert_eq!(out, [true, false, true, false], "{name}");
            let cols: Vec<String> = [1usize, 8, 32, 64]
                .iter()
                .map(|&v| {
                    if args.vectors.contains(&v) {
                        format!(
                            "{:.1}",
                            measure(ext.as_mut(), ExtKind::Match, &gpkts, v, &args)
                        )
                    } else {
                        "-".into()
                    }
                })
                .collect();
            println!("| {name} | {window} | {size} | {} |", cols.join(" | "));
        }
    }
    if args.only.is_some() {
        return;
    }
    println!();
    println!(
        "| component | bytes | compile ms (wall, median of 5; 3 over 4 MiB) | instantiate µs (CPU, median of 200) |"
    );
    println!("|---|---:|---:|---:|");
    let mut comps = vec![("trivial", trivial_path)];
    if counter.is_some() {
        comps.push(("counter", counter_path));
    }
    if geneve.is_some() {
        comps.push(("geneve", geneve_path));
    }
    let mut comps: Vec<(String, PathBuf)> =
        comps.into_iter().map(|(n, p)| (n.to_string(), p)).collect();
    comps.extend(
        ttlbelow
            .iter()
            .map(|(label, path, _)| (format!("ttlbelow ({label})"), path.clone())),
    );
    for (name, path) in comps {
        let (c, i, size) = load_times(&host, &path);
        println!("| {name} | {size} | {c:.1} | {i:.1} |");
    }
    println!();
    println!("| swap (already loaded, between vectors) | state moved | µs (wall, median of 100) |");
    println!("|---|---|---:|");
    let v1 = host
        .load(wasp_guests::test_guest("swap_v1"))
        .expect("swap_v1");
    let v2 = host
        .load(wasp_guests::test_guest("swap_v2"))
        .expect("swap_v2");
    let mut swaps = vec![("swapper v1 <-> v2, 1 site", v1.clone(), v2)];
    if let Some(c) = &counter {
        swaps.push((
            "counter <-> counter, 1 site",
            c.clone(),
            host.load(wasp_guests::plugin("counter")).expect("counter"),
        ));
    }
    for (name, a, b) in swaps {
        let mut rt = runtime(&host, &a, &[]);
        let fr = frames(64, 32);
        let pkts = packets(&fr);
        let kind = rt.site_kind(0).expect("configured");
        let mut state = String::new();
        let times: Vec<f64> = (0..100)
            .map(|i| {
                measure_once(&mut rt, kind, &pkts);
                let to = if i % 2 == 0 { &b } else { &a };
                let t0 = Instant::now();
                let out = rt.swap(&to.info().name.clone(), to).expect("swap");
                let dt = t0.elapsed().as_secs_f64() * 1e6;
                state = format!("{:?}", out.state);
                dt
            })
            .collect();
        println!("| {name} | {state} | {:.1} |", median(times));
    }
}

/// One vector through the runtime (so a swap has state to move).
fn measure_once(rt: &mut Runtime, kind: ExtKind, pkts: &[ExtPacket<'_>]) {
    let mut out = vec![false; pkts.len()];
    let mut verdicts = vec![ExtVerdict::Continue; pkts.len()];
    match kind {
        ExtKind::Match => rt.matches(0, pkts, &mut out),
        _ => rt.apply(0, pkts, &mut verdicts, &mut Vec::new()),
    }
}
