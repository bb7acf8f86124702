//! dump-rate: rules per second of `dump rules` (full) and `dump rules --brief` (JSON lines and
//! binary frames) over the control socket, for 1 000 000 rules with counters.
//!
//! A wasp-ctl server runs in this process with a handler that serves synthetic rules
//! (`ip saddr A tcp dport P counter packets N bytes M accept`, 100 chains of 10 000 rules,
//! each rule's address and counters different); a client thread connects over the Unix socket,
//! sends the request and decodes every reply (full: the JSON line into a `Reply::Rule`;
//! brief JSON: the `[chain,handle,packets,bytes,flags]` line; brief binary: each 32-byte
//! record). Time is from the request to the final `{"ok":...}` line; CPU time is the process's
//! (server and client threads together) and the client thread's alone. The median of the
//! runs is reported. A fourth column, "brief + text", also formats each record as `wasp ctl
//! dump rules --brief` prints it (into memory), to show the CLI's cost.
//!
//! Usage: `cargo run --release -p wasp-perf --bin dump-rate -- [--rules N] [--runs R] [--json]`

use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use wasp_ctl::client::Incoming;
use wasp_ctl::dump::{BriefWriter, FLAG_COUNTER, RECORD_BYTES, Record, full_rule, push_u64};
use wasp_ctl::proto::{BriefEncoding, DumpMode, Reply, Request};
use wasp_ctl::{Client, Handler, ReplySink, Server, ServerConfig};
use wasp_ruleset::model::{KeyPart, Rhs, Rule, Stmt};

#[derive(Parser)]
struct Args {
    /// Rules served.
    #[arg(long, default_value_t = 1_000_000)]
    rules: u64,
    /// Runs per mode (the median is reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

const CHAINS: u64 = 100;

/// Serves `rules` synthetic rules for `dump`.
struct Synthetic {
    rules: u64,
    template: Rule,
}

impl Synthetic {
    fn new(rules: u64) -> Self {
        let rs = wasp_ruleset::parse_str(
            "table netdev t {\n chain c0 {\n  ip saddr 10.0.0.1 tcp dport 80 counter packets 0 bytes 0 accept\n }\n}\n",
            "template.nft",
        )
        .expect("template parses");
        let template = rs.tables[0].chains[0].rules[0].clone();
        Synthetic { rules, template }
    }

    /// Rule `i`: its own address, port and counters.
    fn rule(&self, r: &mut Rule, i: u64) {
        r.handle = i + 2;
        for s in &mut r.stmts {
            match s {
                Stmt::Match(m) => {
                    if let Rhs::Key(parts) = &mut m.right
                        && let Some(KeyPart::Value(v)) = parts.first_mut()
                    {
                        if v.bytes.len() == 4 {
                            let a = 0x0a00_0000u32 | (i as u32 & 0x00ff_ffff);
                            v.bytes.copy_from_slice(&a.to_be_bytes());
                        } else if v.bytes.len() == 2 {
                            v.bytes
                                .copy_from_slice(&(1024 + (i % 60000) as u16).to_be_bytes());
                        }
                    }
                }
                Stmt::Counter { packets, bytes } => {
                    *packets = i * 7 + 1;
                    *bytes = (i * 7 + 1) * 1500;
                }
                _ => {}
            }
        }
    }
}

impl Handler for Synthetic {
    fn handle(&self, req: Request, out: &mut dyn ReplySink) -> Result<serde_json::Value, String> {
        let Request::Dump { mode, encoding } = req else {
            return Err("only dump".into());
        };
        let per_chain = self.rules.div_ceil(CHAINS);
        let mut r = self.template.clone();
        let err = |e: std::io::Error| e.to_string();
        match mode {
            DumpMode::Full => {
                let mut name = String::new();
                for i in 0..self.rules {
                    if i % per_chain == 0 {
                        name = format!("c{}", i / per_chain);
                    }
                    self.rule(&mut r, i);
                    full_rule(out, "netdev", "t", &name, &r).map_err(err)?;
                }
            }
            DumpMode::Brief => {
                let mut w = BriefWriter::new(out, encoding);
                let mut id = 0;
                for i in 0..self.rules {
                    if i % per_chain == 0 {
                        id = w
                            .chain("netdev", "t", &format!("c{}", i / per_chain))
                            .map_err(err)?;
                    }
                    // The brief path reads counters only: no rule text is made.
                    let packets = i * 7 + 1;
                    w.rule(&Record {
                        chain: id,
                        flags: FLAG_COUNTER,
                        handle: i + 2,
                        packets,
                        bytes: packets * 1500,
                    })
                    .map_err(err)?;
                }
                w.finish().map_err(err)?;
            }
        }
        Ok(serde_json::json!({ "rules": self.rules }))
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Full,
    BriefJson,
    BriefBinary,
    BriefText,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Full => "full",
            Mode::BriefJson => "brief (json lines)",
            Mode::BriefBinary => "brief (binary)",
            Mode::BriefText => "brief (binary) + text",
        }
    }
}

struct Run {
    secs: f64,
    process_cpu_secs: f64,
    client_cpu_secs: f64,
    rules: u64,
    bytes_checksum: u64,
}

fn thread_cpu() -> f64 {
    cpu_time::ThreadTime::try_now().map_or(0.0, |t| t.as_duration().as_secs_f64())
}

fn process_cpu() -> f64 {
    cpu_time::ProcessTime::try_now().map_or(0.0, |t| t.as_duration().as_secs_f64())
}

fn one_run(path: &std::path::Path, mode: Mode) -> Run {
    let mut c = Client::connect(path).expect("connect");
    let req = Request::Dump {
        mode: if mode == Mode::Full {
            DumpMode::Full
        } else {
            DumpMode::Brief
        },
        encoding: if mode == Mode::BriefJson {
            BriefEncoding::Json
        } else {
            BriefEncoding::Binary
        },
    };
    let mut rules = 0u64;
    let mut sum = 0u64;
    let mut chains: Vec<String> = Vec::new();
    let mut text: Vec<u8> = Vec::with_capacity(1 << 16);
    let p0 = process_cpu();
    let c0 = thread_cpu();
    let t0 = Instant::now();
    c.call(&req, &mut |item| {
        match item {
            Incoming::Reply(Reply::Rule(r)) => {
                rules += 1;
                sum = sum.wrapping_add(r.bytes).wrapping_add(r.text.len() as u64);
            }
            Incoming::Reply(Reply::Chain(ch)) => {
                chains.push(format!("{} {} {} ", ch.family, ch.table, ch.name));
            }
            Incoming::Record(r) => {
                rules += 1;
                sum = sum.wrapping_add(r.bytes);
            }
            Incoming::Binary(frame) => {
                for rec in frame.chunks_exact(RECORD_BYTES) {
                    let r = Record::decode(rec).expect("32 bytes");
                    rules += 1;
                    sum = sum.wrapping_add(r.bytes);
                    if mode == Mode::BriefText {
                        // As `wasp ctl dump rules --brief` prints a record.
                        if text.len() > (1 << 16) - 128 {
                            text.clear();
                        }
                        text.extend_from_slice(
                            chains.get(r.chain as usize).map_or("", |s| s).as_bytes(),
                        );
                        push_u64(&mut text, r.handle);
                        text.push(b' ');
                        push_u64(&mut text, r.packets);
                        text.push(b' ');
                        push_u64(&mut text, r.bytes);
                        text.push(b'\n');
                    }
                }
            }
            _ => {}
        }
        Ok(())
    })
    .expect("dump");
    let secs = t0.elapsed().as_secs_f64();
    Run {
        secs,
        process_cpu_secs: process_cpu() - p0,
        client_cpu_secs: thread_cpu() - c0,
        rules,
        bytes_checksum: sum,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args = Args::parse();
    let dir = std::env::temp_dir().join(format!("wasp-dump-rate-{}", std::process::id()));
    let path = dir.join("ctl.sock");
    let server = Server::start(
        ServerConfig::new(&path),
        Arc::new(Synthetic::new(args.rules)),
    )
    .expect("server starts");
    let modes = [
        Mode::Full,
        Mode::BriefJson,
        Mode::BriefBinary,
        Mode::BriefText,
    ];
    let mut rows = Vec::new();
    for mode in modes {
        let mut runs = Vec::new();
        for _ in 0..args.runs {
            let r = one_run(&path, mode);
            assert_eq!(r.rules, args.rules, "every rule arrives");
            assert_ne!(r.bytes_checksum, 0);
            runs.push(r);
        }
        let secs = median(runs.iter().map(|r| r.secs).collect());
        let rate = args.rules as f64 / secs;
        let cpu = median(runs.iter().map(|r| r.process_cpu_secs).collect());
        let client = median(runs.iter().map(|r| r.client_cpu_secs).collect());
        rows.push((mode, rate, secs, cpu, client));
    }
    server.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
    if args.json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|(m, rate, secs, cpu, client)| {
                serde_json::json!({"mode": m.name(), "rules": args.rules, "rules_per_sec": rate,
                    "secs": secs, "cpu_secs": cpu, "client_cpu_secs": client,
                    "cpu_ns_per_rule": cpu * 1e9 / args.rules as f64})
            })
            .collect();
        println!("{}", serde_json::Value::Array(v));
        return;
    }
    println!(
        "dump of {} rules over the control socket, median of {} runs",
        args.rules, args.runs
    );
    println!(
        "{:<24} {:>14} {:>9} {:>10} {:>12} {:>14}",
        "mode", "rules/s", "wall ms", "CPU ms", "client ms", "CPU ns/rule"
    );
    for (m, rate, secs, cpu, client) in rows {
        println!(
            "{:<24} {:>14.0} {:>9.1} {:>10.1} {:>12.1} {:>14.1}",
            m.name(),
            rate,
            secs * 1e3,
            cpu * 1e3,
            client * 1e3,
            cpu * 1e9 / args.rules as f64
        );
    }
}
