//! The kernel's extra cost per packet for the selftest's performance sets in a netdev ingress
//! chain, over a plain drop rule, measured on a veth pair (`../shared/research/io.md`), next
//! to wasp's lookup cost for the same set and key.
//!
//! For each of the seven performance cases of `nft_concat_range.sh` (`wasp_sets::perfcases`),
//! in a network namespace of its own (`wasp-kcost-<pid>-<n>`, deleted on drop, also when
//! unwinding from a panic or returning an error) with a veth pair `kc0` (receives) / `kc1`
//! (sends), table `netdev perf` holds, as the selftest's `performance` test builds them:
//! - `test`: the case's type, `flags interval`, the `entries + 1` adjacent 2-wide ranges
//!   (pipapo, the kernel's AVX2 lookup where the CPU has it);
//! - `norange`: same type, no interval flag, the elements' start keys (hash);
//! - `noconcat`: the first field's type, `flags interval`, its ranges (rbtree).
//!
//! The ingress chain on `kc0` holds one rule at a time: (a) `counter drop`, (b) `<spec> @test
//! counter drop`, (c) `<spec> @norange counter drop`, (d) `<first field> @noconcat counter drop`.
//! The probe is the selftest's: destination fields at the start of the last element, 80-byte
//! IPv4 or 100-byte IPv6 UDP frames (pktgen's `-s80` / `-s100`). It is sent from `kc1` through an
//! AF_PACKET socket with `sendmmsg` in batches; veth's transmit hands the frame to the peer's
//! backlog and the softirq that runs when the sender re-enables bottom halves processes it on
//! the same CPU in the sender's context, so the sending thread's CPU time (user + sys, the
//! counter behind `getrusage(RUSAGE_THREAD)`, read up to date through
//! `CLOCK_THREAD_CPUTIME_ID`; this kernel has no `CONFIG_IRQ_TIME_ACCOUNTING`, so softirq time
//! is charged to the interrupted thread) is sender + receive + nft. The CPU time of
//! the `ksoftirqd` threads over the same interval is reported too: when it is not about zero,
//! part of the receive ran elsewhere and the row understates the cost.
//!
//! After every run the rule's counter must equal the packets sent (warm-up included): each
//! packet reached the rule and matched the set; anything else is an error, not a row.
//! Runs are interleaved a/b/c/d per round (the order rotating from round to round); the table
//! shows medians, and the extra columns the median over rounds of (variant − baseline of the
//! same round), which cancels load that changes between rounds. In the same process, wasp's
//! AVX2 pipapo single-key lookup (and its hash, `ExactSet`) on the same key, thread CPU time.
//!
//! `cargo run --release -p wasp-perf --bin kernel-set-cost -- [--packets N] [--runs N]
//! [--case NAME]...` (needs root). Smoke mode (a few seconds): `--packets 2000 --runs 1 --case
//! net,port`.

use std::hint::black_box;
use std::process::Command;
use std::time::Instant;

use clap::Parser;
use wasp_perf::netns::{cmd, ksoftirqd_pids, sched_ns};
use wasp_perf::sys;
use wasp_sets::ExactSet;
use wasp_sets::perfcases::{CASES, Case, Kind};
use wasp_sets::pipapo::{GroupPolicy, Variant};

/// Prefix of the namespaces this benchmark creates.
const NETNS_PREFIX: &str = "wasp-kcost-";
/// Receiving veth end (the ingress chain's device).
const RX_DEV: &str = "kc0";
/// Sending veth end.
const TX_DEV: &str = "kc1";
/// Packets sent before each measured run (counted by the rule too).
const WARMUP: u64 = 2000;

#[derive(Parser, Debug)]
#[command(about = "Kernel netdev-ingress cost of the selftest's performance sets on a veth")]
struct Args {
    /// Packets per measured run.
    #[arg(long, default_value_t = 200_000)]
    packets: u64,
    /// Interleaved rounds (each runs baseline, pipapo, hash, rbtree); medians are printed.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Only these cases (selftest display names, e.g. `net,port`); repeatable.
    #[arg(long = "case")]
    cases: Vec<String>,
}

type Res<T> = Result<T, String>;

/// The rule variants, in the order they run within a round.
#[derive(Debug, Clone, Copy)]
enum Rule {
    Baseline,
    Pipapo,
    Hash,
    Rbtree,
}

const RULES: [Rule; 4] = [Rule::Baseline, Rule::Pipapo, Rule::Hash, Rule::Rbtree];

fn main() {
    let args = Args::parse();
    if !sys::is_root() {
        eprintln!(
            "kernel-set-cost: needs root (it creates network namespaces, veth pairs and nftables \
             tables); run it as root, e.g. `sudo $CARGO_TARGET_DIR/release/kernel-set-cost`"
        );
        std::process::exit(2);
    }
    if let Err(e) = run(&args) {
        eprintln!("kernel-set-cost: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Res<()> {
    let cases: Vec<Case> = if args.cases.is_empty() {
        CASES.to_vec()
    } else {
        let mut v = Vec::new();
        for name in &args.cases {
            let c = CASES.iter().find(|c| c.name == name).ok_or_else(|| {
                let names: Vec<&str> = CASES.iter().map(|c| c.name).collect();
                format!("unknown case {name:?}; cases: {}", names.join(" "))
            })?;
            v.push(*c);
        }
        v
    };
    if args.packets == 0 || args.runs == 0 {
        return Err("--packets and --runs must be at least 1".into());
    }
    wasp_perf::netns::remove_stale(NETNS_PREFIX);
    let ksoftirqd = ksoftirqd_pids();
    println!(
        "kernel netdev ingress on veth, {} packets per run, {} interleaved rounds, medians; \
         CPU ns per packet of the sending thread (sender + veth + receive + nft)",
        args.packets, args.runs
    );
    let load = || {
        std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    println!("load average at start: {}", load());
    let mut rows = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let row = measure_case(case, i, args, &ksoftirqd)?;
        rows.push(row);
    }
    println!("load average at end: {}", load());
    println!();
    println!(
        "| case | entries | baseline ns/pkt | pipapo ns/pkt | pipapo extra | hash extra | rbtree extra | Mpps drop / pipapo / hash / rbtree | wasp AVX2 pipapo ns | wasp hash ns | ksoftirqd ns/pkt (max) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|");
    for r in &rows {
        let [b, p, h, t] = r.ns;
        let [xp, xh, xt] = r.extra;
        println!(
            "| {} | {} | {b:.0} | {p:.0} | {:+.0} | {:+.0} | {:+.0} | {:.2} / {:.2} / {:.2} / {:.2} | {:.1} | {:.1} | {:.0} |",
            r.name,
            r.entries,
            xp,
            xh,
            xt,
            1e3 / b,
            1e3 / p,
            1e3 / h,
            1e3 / t,
            r.wasp_pipapo,
            r.wasp_hash,
            r.softirqd_max,
        );
    }
    Ok(())
}

/// One case's medians.
struct Row {
    name: &'static str,
    entries: u64,
    /// CPU ns per packet for baseline, pipapo, hash, rbtree (medians).
    ns: [f64; 4],
    /// pipapo, hash, rbtree minus the baseline of the same round (medians of the differences).
    extra: [f64; 3],
    wasp_pipapo: f64,
    wasp_hash: f64,
    softirqd_max: f64,
}

fn measure_case(case: &Case, idx: usize, args: &Args, ksoftirqd: &[u32]) -> Res<Row> {
    let ns = Netns::create(idx)?;
    ns.add_veth()?;
    let t = Instant::now();
    ns.nft(&ruleset(case))?;
    let load_s = t.elapsed().as_secs_f64();
    let sender = sys::Sender::open_in(&ns.name, TX_DEV)
        .map_err(|e| format!("AF_PACKET socket on {TX_DEV}: {e}"))?;
    let frame = [build_frame(case, &probe_key(case))];
    let miss = [build_frame(case, &miss_key(case))];

    // wasp on the same set and key.
    let set = case.build(GroupPolicy::Auto);
    let els = case.elements();
    let key = probe_key(case);
    let mut hash = ExactSet::new(key.len());
    for (i, (s, _)) in els.iter().enumerate() {
        hash.insert(s, i as u32);
    }
    if set.lookup(&key, 0).is_none() || hash.get(&key).is_none() {
        return Err(format!("{}: wasp does not find the probe key", case.name));
    }

    // Each set rule must be selective: a key past every element is not counted.
    for rule in &RULES[1..] {
        ns.nft(&format!(
            "flush chain netdev perf test\nadd rule netdev perf test {} counter drop\n",
            rule_expr(case, *rule)
        ))?;
        sender.send(&miss, 1000).map_err(|e| format!("send: {e}"))?;
        let got = ns.counter()?;
        if got != 0 {
            return Err(format!(
                "{} {rule:?}: a key past every element was counted {got} times of 1000",
                case.name
            ));
        }
    }
    if set.lookup(&miss_key(case), 0).is_some() {
        return Err(format!("{}: wasp finds the miss key", case.name));
    }

    let mut samples: [Vec<f64>; 4] = Default::default();
    let mut wasp_p = Vec::new();
    let mut wasp_h = Vec::new();
    let mut softirqd_max: f64 = 0.0;
    for round in 0..args.runs {
        // The order rotates from round to round, so that no variant always runs first.
        for i in 0..RULES.len() {
            let r = (i + round) % RULES.len();
            let rule = &RULES[r];
            ns.nft(&format!(
                "flush chain netdev perf test\nadd rule netdev perf test {} counter drop\n",
                rule_expr(case, *rule)
            ))?;
            sender
                .send(&frame, WARMUP)
                .map_err(|e| format!("send: {e}"))?;
            let k0 = sched_ns(ksoftirqd);
            let c0 = sys::thread_cpu_ns();
            sender
                .send(&frame, args.packets)
                .map_err(|e| format!("send: {e}"))?;
            let c1 = sys::thread_cpu_ns();
            let k1 = sched_ns(ksoftirqd);
            let got = ns.counter()?;
            let want = WARMUP + args.packets;
            if got != want {
                return Err(format!(
                    "{} {rule:?} round {round}: the rule counted {got} packets of {want} sent: \
                     {}; this row would be wrong",
                    case.name,
                    if got < want {
                        "packets missed the set or were dropped before the rule"
                    } else {
                        "other packets reached the chain"
                    }
                ));
            }
            samples[r].push((c1 - c0) as f64 / args.packets as f64);
            softirqd_max = softirqd_max.max(k1.saturating_sub(k0) as f64 / args.packets as f64);
        }
        if Variant::Avx2.available() {
            wasp_p.push(per_call(|| {
                set.lookup_variant(Variant::Avx2, black_box(&key), 0)
                    .is_some()
            }));
        }
        wasp_h.push(per_call(|| hash.get(black_box(&key)).is_some()));
    }
    let paired = |v: usize| {
        median(
            samples[v]
                .iter()
                .zip(&samples[0])
                .map(|(x, b)| x - b)
                .collect(),
        )
    };
    let extra = [paired(1), paired(2), paired(3)];
    let spread: Vec<String> = samples
        .iter()
        .map(|v| {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(0.0, f64::max);
            format!("{lo:.0}-{hi:.0}")
        })
        .collect();
    let med: Vec<f64> = samples.into_iter().map(median).collect();
    let row = Row {
        name: case.name,
        entries: case.entries,
        ns: [med[0], med[1], med[2], med[3]],
        extra,
        wasp_pipapo: median(wasp_p),
        wasp_hash: median(wasp_h),
        softirqd_max,
    };
    println!(
        "{:<20} {:>6} loaded in {load_s:.1} s; ns/pkt baseline {:.0} pipapo {:.0} hash {:.0} \
         rbtree {:.0} (ranges {}); wasp AVX2 {:.1} ns; ksoftirqd max {:.0} ns/pkt",
        case.name,
        case.entries,
        row.ns[0],
        row.ns[1],
        row.ns[2],
        row.ns[3],
        spread.join(" / "),
        row.wasp_pipapo,
        softirqd_max
    );
    drop(ns);
    Ok(row)
}

/// Thread-CPU ns per call of `f`, over 2^20 calls (all must return `true`).
fn per_call(mut f: impl FnMut() -> bool) -> f64 {
    const N: u32 = 1 << 20;
    let mut hits = 0u32;
    for _ in 0..1024 {
        hits += u32::from(f());
    }
    let c0 = sys::thread_cpu_ns();
    for _ in 0..N {
        hits += u32::from(f());
    }
    let c1 = sys::thread_cpu_ns();
    assert_eq!(hits, N + 1024, "every lookup of the probe key matches");
    (c1 - c0) as f64 / f64::from(N)
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

// ---------------------------------------------------------------------------------------------
// The selftest's sets, rules and probe frame.

/// nft type name of a field kind.
fn nft_type(k: Kind) -> &'static str {
    match k {
        Kind::Net => "ipv4_addr",
        Kind::Net6 => "ipv6_addr",
        Kind::Port => "inet_service",
        Kind::Mac => "ether_addr",
        Kind::Proto => "inet_proto",
    }
}

/// The selftest's `perf_spec` selector for a field kind (destination fields, `ether daddr`).
fn selector(k: Kind) -> &'static str {
    match k {
        Kind::Net => "ip daddr",
        Kind::Net6 => "ip6 daddr",
        Kind::Port => "udp dport",
        Kind::Mac => "ether daddr",
        Kind::Proto => "meta l4proto",
    }
}

/// nft text of one field value (big-endian bytes of the kind's width).
fn text(k: Kind, b: &[u8]) -> String {
    match k {
        Kind::Net => std::net::Ipv4Addr::from(<[u8; 4]>::try_from(b).expect("4 bytes")).to_string(),
        Kind::Net6 => {
            std::net::Ipv6Addr::from(<[u8; 16]>::try_from(b).expect("16 bytes")).to_string()
        }
        Kind::Port => u16::from_be_bytes([b[0], b[1]]).to_string(),
        Kind::Mac => b
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(":"),
        Kind::Proto => b[0].to_string(),
    }
}

/// The field slices of a key.
fn split<'a>(case: &Case, key: &'a [u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut off = 0;
    for k in case.fields {
        out.push(&key[off..off + k.width()]);
        off += k.width();
    }
    out
}

/// One field as `a-b`, or `a` when both ends are equal.
fn range_text(k: Kind, s: &[u8], e: &[u8]) -> String {
    if s == e {
        text(k, s)
    } else {
        format!("{}-{}", text(k, s), text(k, e))
    }
}

/// Table `netdev perf` with the three sets and an empty ingress chain `test` on [`RX_DEV`].
fn ruleset(case: &Case) -> String {
    let els = case.elements();
    let ty: Vec<&str> = case.fields.iter().map(|k| nft_type(*k)).collect();
    let mut test = Vec::new();
    let mut norange = Vec::new();
    let mut noconcat = Vec::new();
    let k0 = case.fields[0];
    for (s, e) in &els {
        let (fs, fe) = (split(case, s), split(case, e));
        let fields: Vec<String> = case
            .fields
            .iter()
            .zip(fs.iter().zip(&fe))
            .map(|(k, (a, b))| range_text(*k, a, b))
            .collect();
        test.push(fields.join(" . "));
        let starts: Vec<String> = case
            .fields
            .iter()
            .zip(&fs)
            .map(|(k, a)| text(*k, a))
            .collect();
        norange.push(starts.join(" . "));
        noconcat.push(range_text(k0, fs[0], fe[0]));
    }
    noconcat.dedup();
    format!(
        "table netdev perf {{\n\
         \tset test {{ type {ty}; flags interval; elements = {{ {test} }} }}\n\
         \tset norange {{ type {ty}; elements = {{ {norange} }} }}\n\
         \tset noconcat {{ type {t0}; flags interval; elements = {{ {noconcat} }} }}\n\
         \tchain test {{ type filter hook ingress device \"{RX_DEV}\" priority 0; policy accept; }}\n\
         }}\n",
        ty = ty.join(" . "),
        test = test.join(",\n\t\t"),
        norange = norange.join(",\n\t\t"),
        t0 = nft_type(k0),
        noconcat = noconcat.join(",\n\t\t"),
    )
}

/// The rule's match expression (empty for the baseline).
fn rule_expr(case: &Case, rule: Rule) -> String {
    let spec: Vec<&str> = case.fields.iter().map(|k| selector(*k)).collect();
    match rule {
        Rule::Baseline => String::new(),
        Rule::Pipapo => format!("{} @test", spec.join(" . ")),
        Rule::Hash => format!("{} @norange", spec.join(" . ")),
        Rule::Rbtree => format!("{} @noconcat", spec[0]),
    }
}

/// The selftest's probe: destination fields at the start of the last element.
fn probe_key(case: &Case) -> Vec<u8> {
    case.elements().pop().expect("entries + 1 elements").0
}

/// A key no set holds: the last element's end with its first field one higher (past every
/// element, since the first field grows with the element index in every case).
fn miss_key(case: &Case) -> Vec<u8> {
    let mut key = case.elements().pop().expect("entries + 1 elements").1;
    for b in key[..case.fields[0].width()].iter_mut().rev() {
        *b = b.wrapping_add(1);
        if *b != 0 {
            break;
        }
    }
    key
}

/// A UDP frame carrying `key` in the case's selectors, 80 bytes for IPv4 and 100 bytes for
/// IPv6 (pktgen `-s80` / `-s100`, no FCS).
fn build_frame(case: &Case, key: &[u8]) -> Vec<u8> {
    let mut dmac = [0x02, 0, 0, 0, 0, 0x02];
    let mut d4 = [10, 0, 0, 2];
    let mut d6 = [0u8; 16];
    d6[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    d6[15] = 2;
    let mut dport = 9u16;
    let mut v6 = false;
    for (k, b) in case.fields.iter().zip(split(case, key)) {
        match k {
            Kind::Net => d4.copy_from_slice(b),
            Kind::Net6 => {
                d6.copy_from_slice(b);
                v6 = true;
            }
            Kind::Port => dport = u16::from_be_bytes([b[0], b[1]]),
            Kind::Mac => dmac.copy_from_slice(b),
            Kind::Proto => {}
        }
    }
    let (len, ethertype) = if v6 { (100, 0x86ddu16) } else { (80, 0x0800) };
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dmac);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f.extend_from_slice(&ethertype.to_be_bytes());
    let ip_hdr = if v6 { 40 } else { 20 };
    let udp_len = (len - 14 - ip_hdr) as u16;
    let mut udp = Vec::with_capacity(udp_len as usize);
    udp.extend_from_slice(&9u16.to_be_bytes());
    udp.extend_from_slice(&dport.to_be_bytes());
    udp.extend_from_slice(&udp_len.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.resize(udp_len as usize, 0);
    if v6 {
        let mut s6 = d6;
        s6[15] ^= 1;
        let mut sum = 0u32;
        for c in s6.chunks(2).chain(d6.chunks(2)).chain(udp.chunks(2)) {
            sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
        sum += u32::from(udp_len) + 17;
        let c = !fold(sum);
        udp[6..8].copy_from_slice(&(if c == 0 { 0xffff } else { c }).to_be_bytes());
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&udp_len.to_be_bytes());
        f.extend_from_slice(&[17, 64]);
        f.extend_from_slice(&s6);
        f.extend_from_slice(&d6);
    } else {
        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&(20 + udp_len).to_be_bytes());
        ip.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1]);
        ip.extend_from_slice(&d4);
        let sum: u32 = ip
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum();
        let c = !fold(sum);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
    }
    f.extend_from_slice(&udp);
    assert_eq!(f.len(), len);
    f
}

/// Ones' complement fold of a 32-bit sum to 16 bits.
fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

// ---------------------------------------------------------------------------------------------
// Namespace, commands, ksoftirqd.

/// A network namespace `wasp-kcost-<pid>-<n>` with the veth pair, deleted on drop (also while
/// unwinding from a panic).
struct Netns {
    name: String,
}

impl Netns {
    fn create(n: usize) -> Res<Self> {
        let name = format!("{NETNS_PREFIX}{}-{n}", std::process::id());
        cmd(Command::new("ip").args(["netns", "add", &name]), None)?;
        Ok(Netns { name })
    }

    /// `kc0` / `kc1`, IPv6 off on both (no ND/MLD frames to reach the counter), up.
    fn add_veth(&self) -> Res<()> {
        let n = self.name.as_str();
        cmd(
            Command::new("ip")
                .args(["netns", "exec", n, "sysctl", "-q", "-w"])
                .args([
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ]),
            None,
        )?;
        cmd(
            Command::new("ip").args([
                "-n", n, "link", "add", RX_DEV, "type", "veth", "peer", "name", TX_DEV,
            ]),
            None,
        )?;
        for d in [RX_DEV, TX_DEV] {
            cmd(
                Command::new("ip").args(["-n", n, "link", "set", d, "up"]),
                None,
            )?;
        }
        Ok(())
    }

    /// `nft -f -` with `text` inside the namespace.
    fn nft(&self, text: &str) -> Res<String> {
        cmd(
            Command::new("ip").args(["netns", "exec", &self.name, "nft", "-f", "-"]),
            Some(text),
        )
    }

    /// The packets counted by the one rule of chain `test`.
    fn counter(&self) -> Res<u64> {
        let out = cmd(
            Command::new("ip").args([
                "netns", "exec", &self.name, "nft", "list", "chain", "netdev", "perf", "test",
            ]),
            None,
        )?;
        let mut it = out.split_whitespace();
        while let Some(w) = it.next() {
            if w == "packets" {
                return it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| format!("unparsable counter in {out:?}"));
            }
        }
        Err(format!("no counter in {out:?}"))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str) -> Case {
        *CASES.iter().find(|c| c.name == name).expect("a case")
    }

    /// Ones' complement sum of 16-bit words.
    fn sum16(b: &[u8]) -> u32 {
        b.chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
            .sum()
    }

    #[test]
    fn ipv4_probe_is_the_selftests() {
        let c = case("net,port");
        let f = build_frame(&c, &probe_key(&c));
        assert_eq!(f.len(), 80);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        // Last element: start 1 + 2 * 1000 = 2001 → 10.0.0.5 + 2001 = 10.0.7.214, port 2002.
        assert_eq!(&f[30..34], &[10, 0, 7, 214]);
        assert_eq!(&f[36..38], &2002u16.to_be_bytes());
        assert_eq!(f[23], 17);
        // The IPv4 header sums to 0xffff with its checksum; UDP length 46.
        assert_eq!(fold(sum16(&f[14..34])), 0xffff);
        assert_eq!(&f[38..40], &46u16.to_be_bytes());
    }

    #[test]
    fn ipv6_probe_carries_every_field() {
        let c = case("net6,port,mac,proto");
        let key = probe_key(&c);
        let f = build_frame(&c, &key);
        assert_eq!(f.len(), 100);
        assert_eq!(&f[12..14], &[0x86, 0xdd]);
        assert_eq!(&f[0..6], &key[18..24], "ether daddr is the mac field");
        assert_eq!(&f[38..54], &key[..16], "ip6 daddr");
        assert_eq!(&f[56..58], &key[16..18], "udp dport");
        assert_eq!(f[20], 17, "next header udp");
        // UDP checksum over the pseudo header (src, dst, length, next header) verifies.
        let udp = &f[54..];
        let s = sum16(&f[22..54]) + sum16(udp) + udp.len() as u32 + 17;
        assert_eq!(fold(s), 0xffff);
    }

    #[test]
    fn ruleset_has_the_selftests_elements() {
        let c = case("net,port");
        let r = ruleset(&c);
        assert!(r.contains(
            "type ipv4_addr . inet_service; flags interval; elements = { 10.0.0.6-10.0.0.7 . 2-3,"
        ));
        assert!(
            r.contains("set norange { type ipv4_addr . inet_service; elements = { 10.0.0.6 . 2,")
        );
        assert!(r.contains(
            "set noconcat { type ipv4_addr; flags interval; elements = { 10.0.0.6-10.0.0.7,"
        ));
        // 1001 elements in `test` and in `norange`, plus their two concatenated types.
        assert_eq!(r.matches(" . ").count(), 2 * 1001 + 2);
        let c = case("net6,port,mac,proto");
        assert!(ruleset(&c).contains(
            "2001:db8::a-2001:db8::b . 11-12 . 00:01:00:00:00:0a-00:01:00:00:00:0b . 17,"
        ));
        assert_eq!(
            rule_expr(&c, Rule::Pipapo),
            "ip6 daddr . udp dport . ether daddr . meta l4proto @test"
        );
        assert_eq!(rule_expr(&c, Rule::Rbtree), "ip6 daddr @noconcat");
    }

    #[test]
    fn miss_key_is_past_every_element() {
        for c in CASES {
            let els = c.elements();
            let w = c.fields[0].width();
            let miss = miss_key(&c);
            assert!(els.iter().all(|(_, e)| miss[..w] > e[..w]), "{}", c.name);
        }
    }
}
