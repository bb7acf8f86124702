//! What one rule of each expression kind of the language work (issue 12) costs per packet:
//! in wasp's vector pipeline (the engine's netdev ingress hook over vectors of 64, thread CPU
//! ns per packet) and in the kernel's netdev ingress hook on a veth, e2e's and
//! `kernel-set-cost`'s technique (`../shared/research/io.md`).
//!
//! Kernel side: namespaces `wasp-xcost-<pid>-<n>-tx|rx` joined by a veth `xc1` (sends) / `xc0`
//! (receives), table `netdev perf` with one ingress chain on `xc0` holding one rule at a time:
//! the baseline `counter drop`, then `<rule> counter drop` for each kind (`counter reject ...`
//! for reject, a terminal statement). The probe, a 74-byte Ethernet/IPv4/TCP SYN to port 80
//! with an MSS option of 1460, goes from `xc1` through AF_PACKET `sendmmsg`; veth runs the
//! receiver's ingress hook in the sender's softirq, so the sending thread's CPU time is sender +
//! veth + receive + nft, and a rule's extra is its time minus the baseline's of the same round.
//! After each run the rule's counter must equal the packets sent (every packet reached the
//! rule and passed its expression), else the row is an error.
//!
//! wasp side, in the same process and round: the same rule followed by `drop` (no `counter`:
//! wasp's counter is a plugin) compiled into an [`Engine`], `Engine::run` (ingress) over vectors of
//! 64 copies of the probe; every packet must get the rule's verdict (`drop`), else an error.
//! Its extra is its time minus the `drop` rule's.
//!
//! `cargo run --release -p wasp-perf --bin expr-cost -- [--packets N] [--runs N] [--kind NAME]`
//! (root for the kernel side; without root only wasp's columns are measured). Smoke mode (a
//! few seconds): `--packets 2000 --runs 1`.

use std::process::Command;

use clap::Parser;
use wasp_core::{Engine, FinalVerdict, MAX_VECTOR, Packet};
use wasp_perf::netns::{VethPair, cmd, remove_stale};
use wasp_perf::sys;

/// Prefix of the namespaces this benchmark creates.
const NETNS_PREFIX: &str = "wasp-xcost-";
/// Receiving veth end (the ingress chain's device).
const RX_DEV: &str = "xc0";
/// Sending veth end.
const TX_DEV: &str = "xc1";
/// Packets sent before each measured run (counted by the rule too).
const WARMUP: u64 = 2000;

#[derive(Parser, Debug)]
#[command(
    about = "CPU ns per packet of one rule per expression kind: wasp's pipeline and the kernel"
)]
struct Args {
    /// Packets per measured run.
    #[arg(long, default_value_t = 200_000)]
    packets: u64,
    /// Interleaved rounds; medians are printed.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Only these kinds (first column of the table); repeatable.
    #[arg(long = "kind")]
    kinds: Vec<String>,
}

/// One expression kind: its name, the rule (before `counter drop` / `drop`), the sets it needs.
struct Kind {
    name: &'static str,
    rule: &'static str,
    decls: &'static str,
    /// A terminal statement: the kernel's counter goes in front, nothing after it.
    terminal: bool,
}

const KINDS: &[Kind] = &[
    Kind {
        name: "baseline",
        rule: "",
        decls: "",
        terminal: false,
    },
    Kind {
        name: "limit",
        rule: "limit rate 1000000000/second burst 100000000 packets",
        decls: "",
        terminal: false,
    },
    Kind {
        name: "quota",
        rule: "quota 100000 mbytes",
        decls: "",
        terminal: false,
    },
    Kind {
        name: "reject",
        rule: "reject with tcp reset",
        decls: "",
        terminal: true,
    },
    Kind {
        name: "log",
        rule: "log group 1",
        decls: "",
        terminal: false,
    },
    Kind {
        name: "tcp option",
        rule: "tcp option maxseg size 1460",
        decls: "",
        terminal: false,
    },
    Kind {
        name: "raw payload",
        rule: "@th,16,16 0x50",
        decls: "",
        terminal: false,
    },
    Kind {
        name: "numgen map",
        rule: "meta mark set numgen inc mod 2 map { 0 : 0x1, 1 : 0x2 }",
        decls: "",
        terminal: false,
    },
    Kind {
        name: "jhash",
        rule: "meta mark set jhash ip saddr . ip daddr mod 16",
        decls: "",
        terminal: false,
    },
    Kind {
        name: "payload set",
        rule: "ip dscp set cs1",
        decls: "",
        terminal: false,
    },
    Kind {
        name: "set update",
        rule: "update @seen { ip saddr timeout 60s }",
        decls: "\tset seen { type ipv4_addr; size 65535; flags dynamic,timeout; }\n",
        terminal: false,
    },
];

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("expr-cost: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<(), String> {
    if args.packets == 0 || args.runs == 0 {
        return Err("--packets and --runs must be at least 1".into());
    }
    let kinds: Vec<&Kind> = if args.kinds.is_empty() {
        KINDS.iter().collect()
    } else {
        let mut v = vec![&KINDS[0]];
        for n in &args.kinds {
            let k = KINDS.iter().find(|k| k.name == n).ok_or_else(|| {
                let names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
                format!("unknown kind {n:?}; kinds: {}", names.join(", "))
            })?;
            if k.name != "baseline" {
                v.push(k);
            }
        }
        v
    };
    let kernel = sys::is_root();
    if !kernel {
        eprintln!("expr-cost: not root: the kernel columns are left out");
    }
    remove_stale(NETNS_PREFIX);
    let frame = probe();
    let mut engines = Vec::new();
    for k in &kinds {
        engines.push(wasp_engine(k)?);
    }
    let pair = if kernel {
        Some(VethPair::create(NETNS_PREFIX, 0, TX_DEV, RX_DEV)?)
    } else {
        None
    };
    let sender = match &pair {
        Some(p) => Some(
            sys::Sender::open_in(&p.tx, TX_DEV)
                .map_err(|e| format!("AF_PACKET socket on {TX_DEV}: {e}"))?,
        ),
        None => None,
    };
    let load = || {
        std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    println!(
        "{} packets per run, {} interleaved rounds, medians; load average at start: {}",
        args.packets,
        args.runs,
        load()
    );
    let n = kinds.len();
    let mut kns: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut wns: Vec<Vec<f64>> = vec![Vec::new(); n];
    for round in 0..args.runs {
        for i in 0..n {
            let at = (i + round) % n;
            let k = kinds[at];
            wns[at].push(wasp_run(&mut engines[at], &frame, args.packets, k.name)?);
            if let (Some(p), Some(s)) = (&pair, &sender) {
                kns[at].push(kernel_run(p, s, k, &frame, args.packets)?);
            }
        }
    }
    println!("load average at end: {}", load());
    println!();
    println!(
        "| kind | rule | wasp ns/pkt | wasp extra | kernel ns/pkt | kernel extra | kernel extra / wasp extra |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    let paired =
        |v: &[Vec<f64>], i: usize| median(v[i].iter().zip(&v[0]).map(|(x, b)| x - b).collect());
    for (i, k) in kinds.iter().enumerate() {
        let w = median(wns[i].clone());
        let wx = paired(&wns, i);
        let (kk, kx) = if kernel {
            (format!("{:.0}", median(kns[i].clone())), paired(&kns, i))
        } else {
            ("-".into(), f64::NAN)
        };
        let ratio = if i == 0 || !kernel {
            "-".to_string()
        } else {
            format!("{:.1}", kx / wx.max(0.1))
        };
        println!(
            "| {} | `{}` | {w:.1} | {} | {kk} | {} | {ratio} |",
            k.name,
            if k.rule.is_empty() { "(drop)" } else { k.rule },
            if i == 0 {
                "-".into()
            } else {
                format!("{wx:+.1}")
            },
            if i == 0 || !kernel {
                "-".into()
            } else {
                format!("{kx:+.0}")
            },
        );
    }
    drop(sender);
    drop(pair);
    Ok(())
}

/// Table `netdev perf` with the kind's sets and an ingress chain on [`RX_DEV`] holding `rule`.
fn ruleset(k: &Kind, rule: &str) -> String {
    format!(
        "table netdev perf {{\n{}\tchain test {{\n\t\ttype filter hook ingress device \"{RX_DEV}\" priority 0; policy accept;\n\t\t{rule}\n\t}}\n}}\n",
        k.decls
    )
}

fn wasp_engine(k: &Kind) -> Result<Engine, String> {
    let rule = if k.terminal {
        k.rule.to_string()
    } else {
        format!("{} drop", k.rule)
    };
    let text = ruleset(k, rule.trim());
    let rs = wasp_ruleset::parse_str(&text, "expr-cost.nft").map_err(|e| format!("{e}"))?;
    Engine::compile(&rs).map_err(|e| format!("{}: {e}", k.name))
}

/// Thread CPU ns per packet of `packets` copies of `frame` through `e`'s ingress hook, in
/// vectors of [`MAX_VECTOR`]; every packet must be dropped.
fn wasp_run(e: &mut Engine, frame: &[u8], packets: u64, name: &str) -> Result<f64, String> {
    let meta = wasp_wire::parse(frame);
    let vec: Vec<Packet<'_>> = (0..MAX_VECTOR)
        .map(|_| Packet {
            frame,
            meta,
            iifname: RX_DEV,
            mark: 0,
            oifname: "",
            ct: wasp_core::CtMeta::NONE,
            ct_detail: None,
            nftrace: false,
            route: None,
        })
        .collect();
    let mut res = wasp_core::HookResult::new();
    let mut now = 1_000_000_000u64;
    let mut go = |n: u64, now: &mut u64| -> Result<(), String> {
        let mut left = n;
        while left > 0 {
            let m = (left as usize).min(MAX_VECTOR);
            e.run(
                wasp_core::At::Ingress(RX_DEV),
                &vec[..m],
                *now,
                &mut res,
                None,
                None,
            );
            if let Some(o) = res
                .outcomes
                .iter()
                .find(|o| o.verdict != FinalVerdict::Drop)
            {
                return Err(format!("{name}: wasp gave {:?}, not drop", o.verdict));
            }
            *now += 1_000;
            left -= m as u64;
        }
        Ok(())
    };
    go(WARMUP, &mut now)?;
    let c0 = sys::thread_cpu_ns();
    go(packets, &mut now)?;
    let c1 = sys::thread_cpu_ns();
    Ok((c1 - c0) as f64 / packets as f64)
}

/// Sending thread CPU ns per packet for `k`'s rule in the kernel's ingress chain.
fn kernel_run(
    p: &VethPair,
    s: &sys::Sender,
    k: &Kind,
    frame: &[u8],
    packets: u64,
) -> Result<f64, String> {
    let rule = if k.terminal {
        format!("counter {}", k.rule)
    } else {
        format!("{} counter drop", k.rule)
    };
    let text = format!(
        "flush ruleset\n{}",
        ruleset(k, rule.trim()).replace("\t\t\n", "\n")
    );
    cmd(
        Command::new("ip").args(["netns", "exec", &p.rx, "nft", "-f", "-"]),
        Some(&text),
    )?;
    let frames = [frame.to_vec()];
    s.send(&frames, WARMUP).map_err(|e| format!("send: {e}"))?;
    let c0 = sys::thread_cpu_ns();
    s.send(&frames, packets).map_err(|e| format!("send: {e}"))?;
    let c1 = sys::thread_cpu_ns();
    let listing = cmd(
        Command::new("ip").args([
            "netns", "exec", &p.rx, "nft", "list", "chain", "netdev", "perf", "test",
        ]),
        None,
    )?;
    let got: u64 = listing
        .split("counter packets ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("{}: no counter in {listing}", k.name))?;
    if got != WARMUP + packets {
        return Err(format!(
            "{}: the kernel's rule counted {got} of {} packets; the row would be wrong",
            k.name,
            WARMUP + packets
        ));
    }
    Ok((c1 - c0) as f64 / packets as f64)
}

/// Ethernet / IPv4 / TCP SYN 10.0.0.1:40000 -> 10.0.0.2:80 with an MSS option of 1460,
/// checksums right (74 bytes).
fn probe() -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
    let mut ip = vec![
        0x45, 0, 0, 44, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    let c = csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut t = vec![
        0x9c, 0x40, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x60, 0x02, 0xff, 0xff, 0, 0, 0, 0, 2, 4, 0x05,
        0xb4,
    ];
    let mut pseudo = vec![10, 0, 0, 1, 10, 0, 0, 2, 0, 6, 0, t.len() as u8];
    pseudo.extend_from_slice(&t);
    let c = csum(&pseudo);
    t[16..18].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&t);
    f
}

/// The Internet checksum of `b`.
fn csum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}
