//! The suite's rules as packet counters: every netdev `ingress` unit that the kernel and wasp
//! both load is stripped to its matches (a trailing verdict removed; rules with other
//! statements skipped and counted by reason), given a `counter`, and loaded with the others
//! into one ruleset (a table per test file, so that each file's sets keep their names; each
//! table's chain hooks ingress on the harness's `wasp0`). A capture built from the rules'
//! constants ([`super::frames`]) plus the harness's generated corpus goes through the kernel
//! (one frame at a time, [`Kernel::send`]) and through `wasp replay --list`; the packet count
//! of every rule is compared.
//!
//! The ratchet: `nft-suite-packets-known.txt` lists the rules whose counts still differ, one
//! rule text a line (`#` starts a comment saying why). A difference not listed fails the test;
//! so does a listed rule that now agrees (delete the line).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::frames::{rule_frames, tokens};
use super::outcome::{Side, kernel_side};
use super::units::Unit;
use crate::capture::write_pcap;
use crate::error::{Error, Result};
use crate::kernel::{Kernel, KernelConfig, KernelOutcome};
use crate::netns::Netns;

/// The device of the generated chains (the harness's receiving veth end).
pub const DEV: &str = "wasp0";

/// The first rule of every chain: the harness's probe frame leaves the chain here.
pub const PROBE_GUARD: &str = "ether saddr 02:77:61:73:70:00 ether type 0x88b5 accept";

/// Most frames in the capture (generated corpus included).
pub const MAX_FRAMES: usize = 6000;

/// Most frames built from one rule.
pub const FRAMES_PER_RULE: usize = 24;

/// The known-differences file's path.
pub fn known_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("nft-suite-packets-known.txt")
}

/// Statement words that make a rule more than matches, and the reason they are skipped.
const STATEMENTS: &[(&str, &str)] = &[
    ("set", "sets a value"),
    ("log", "log"),
    ("limit", "limit"),
    ("quota", "quota"),
    ("reject", "reject"),
    ("fwd", "fwd"),
    ("dup", "dup"),
    ("counter", "counter"),
    ("queue", "queue"),
    ("notrack", "notrack"),
    ("masquerade", "nat"),
    ("snat", "nat"),
    ("dnat", "nat"),
    ("redirect", "nat"),
    ("tproxy", "tproxy"),
    ("synproxy", "synproxy"),
    ("meter", "set update"),
    ("add", "set update"),
    ("update", "set update"),
    ("delete", "set update"),
    ("last", "last"),
    ("vmap", "verdict map"),
    ("map", "map"),
    ("ct count", "ct count"),
    ("numgen", "random or stateful value"),
    ("meta random", "random or stateful value"),
    ("meta cpu", "cpu or time"),
    ("cpu", "cpu or time"),
    ("meta time", "cpu or time"),
    ("meta day", "cpu or time"),
    ("meta hour", "cpu or time"),
    ("time", "cpu or time"),
    ("day", "cpu or time"),
    ("hour", "cpu or time"),
    ("flow", "flow offload"),
    ("osf", "os fingerprint"),
];

/// The rule reduced to its matches (trailing verdict removed), or why it is skipped.
///
/// # Errors
/// The reason, a short label for the report.
pub fn matches_only(rule: &str) -> std::result::Result<String, &'static str> {
    let toks = tokens(rule);
    let mut words: Vec<&str> = toks.iter().map(String::as_str).collect();
    // Words inside quotes (comments, interface names) are not statements.
    let plain: Vec<&str> = words
        .iter()
        .filter(|w| !w.starts_with('"'))
        .copied()
        .collect();
    for (k, w) in plain.iter().enumerate() {
        for (word, why) in STATEMENTS {
            let hit = match word.split_once(' ') {
                Some((a, b)) => *w == a && plain.get(k + 1) == Some(&b),
                None => w == word,
            };
            if hit {
                return Err(why);
            }
        }
    }
    match words.as_slice() {
        [.., "jump" | "goto", _] => {
            words.truncate(words.len() - 2);
        }
        [.., "accept" | "drop" | "continue" | "return"] => {
            words.pop();
        }
        _ => {}
    }
    if words.iter().any(|w| {
        matches!(
            *w,
            "accept" | "drop" | "continue" | "return" | "jump" | "goto"
        )
    }) {
        return Err("verdict inside");
    }
    if words.is_empty() || words.first() == Some(&"comment") {
        return Err("no match");
    }
    // Cut the verdict out of the original text (keeps its spacing and quoting).
    let drop = toks.len() - words.len();
    let mut text = rule.trim().to_string();
    for t in toks.iter().rev().take(drop) {
        text = text
            .trim_end()
            .strip_suffix(t.as_str())
            .unwrap_or(&text)
            .to_string();
    }
    Ok(text.trim_end().to_string())
}

/// A rule of the ruleset under test.
#[derive(Debug, Clone)]
pub struct PacketRule {
    /// The unit it comes from (`inet/tcp.t:12 netdev test-netdev ingress`).
    pub unit: String,
    /// Index of its test file (its table is `f<index>`).
    pub file: usize,
    /// The matches, without the counter (the rule's name in reports and the known file).
    pub rule: String,
}

/// Rules taken and rules skipped, with the reasons.
#[derive(Debug, Default)]
pub struct Selection {
    /// The rules to compare, in suite order, each text once.
    pub rules: Vec<PacketRule>,
    /// Test files by index, with the declarations their rules need (sets, elements, objects:
    /// `add ... netdev test-netdev ...` lines).
    pub files: Vec<(String, Vec<String>)>,
    /// Skipped units by reason.
    pub skipped: BTreeMap<String, usize>,
    /// Declarations left out because wasp refuses them: (file index, declaration index), with
    /// the line and wasp's message.
    pub refused_decls: std::cell::RefCell<BTreeMap<(usize, usize), String>>,
}

impl Selection {
    fn skip(&mut self, why: &str) {
        *self.skipped.entry(why.to_string()).or_default() += 1;
    }
}

/// Picks the netdev `ingress` units, reduces each to its matches and keeps those the kernel
/// (`nft -f` in `ns`) loads in that form, alone in a chain on [`DEV`]. `dir` holds temporary
/// files.
///
/// # Errors
/// When `nft` cannot be started.
pub fn select(units: &[Unit], ns: &Netns, dir: &Path) -> Result<Selection> {
    let mut sel = Selection::default();
    let mut seen = BTreeSet::new();
    for u in units
        .iter()
        .filter(|u| u.family == "netdev" && u.chain == "ingress")
    {
        let rule = match matches_only(&u.rule) {
            Ok(r) => r,
            Err(why) => {
                sel.skip(why);
                continue;
            }
        };
        if !seen.insert(rule.clone()) {
            sel.skip("same rule as an earlier unit");
            continue;
        }
        let decls: Vec<String> = u
            .commands
            .lines()
            .filter(|l| !l.starts_with("add table ") && !l.starts_with("add chain "))
            .filter(|l| !l.starts_with("add rule "))
            .map(str::to_string)
            .collect();
        let mut unit = u.clone();
        unit.commands = format!(
            "add table netdev {t}\nadd chain netdev {t} c {{ type filter hook ingress device \"{DEV}\" priority 0; policy accept; }}\n{}add rule netdev {t} c {rule} counter\n",
            decls.iter().map(|d| format!("{d}\n")).collect::<String>(),
            t = u.table
        );
        // wasp's acceptance is checked on the whole ruleset ([`loadable`]): a `wasp check`
        // per unit costs a second in a debug build.
        if !matches!(
            kernel_side(ns, dir, &unit).map_err(|e| Error::io("nft", e))?,
            Side::Accepted(_)
        ) {
            sel.skip("kernel refuses");
            continue;
        }
        let file = match sel.files.iter().position(|(f, _)| *f == u.file) {
            Some(i) => i,
            None => {
                sel.files.push((u.file.clone(), Vec::new()));
                sel.files.len() - 1
            }
        };
        // A later unit of the file has seen at least as many declarations.
        if decls.len() >= sel.files[file].1.len() {
            sel.files[file].1 = decls;
        }
        sel.rules.push(PacketRule {
            unit: u.id(),
            file,
            rule,
        });
    }
    Ok(sel)
}

/// The ruleset of `rules`: a table `f<N>` per test file with its declarations and a chain `c`
/// on ingress of [`DEV`], one `RULE counter` per rule, as nft commands.
pub fn ruleset(sel: &Selection, rules: &[&PacketRule]) -> String {
    ruleset_lines(sel, rules).0
}

/// What a line of the ruleset adds.
#[derive(Debug, Clone, Copy)]
enum Item {
    /// The rule at this index of the rules given.
    Rule(usize),
    /// Declaration (index) of a file (index).
    Decl(usize, usize),
}

/// [`ruleset`], and what each line (from 1) adds.
fn ruleset_lines(sel: &Selection, rules: &[&PacketRule]) -> (String, BTreeMap<usize, Item>) {
    let refused = sel.refused_decls.borrow();
    let mut text = String::new();
    let mut lines = BTreeMap::new();
    let mut n = 0;
    let mut line = |text: &mut String, l: String| {
        text.push_str(&l);
        text.push('\n');
        n += 1;
        n
    };
    let used: BTreeSet<usize> = rules.iter().map(|r| r.file).collect();
    for f in used {
        let t = format!("f{f}");
        line(&mut text, format!("add table netdev {t}"));
        line(
            &mut text,
            format!(
                "add chain netdev {t} c {{ type filter hook ingress device \"{DEV}\" priority 0; policy accept; }}"
            ),
        );
        // The harness's probe frame (sent after a frame whose walk went quiet, marked by the
        // head chain) is not in wasp's capture: it leaves the chain before the counters.
        line(&mut text, format!("add rule netdev {t} c {PROBE_GUARD}"));
        for (j, d) in sel.files[f].1.iter().enumerate() {
            if refused.contains_key(&(f, j)) {
                continue;
            }
            let at = line(
                &mut text,
                d.replacen(" netdev test-netdev ", &format!(" netdev {t} "), 1),
            );
            lines.insert(at, Item::Decl(f, j));
        }
        for (i, r) in rules.iter().enumerate().filter(|(_, r)| r.file == f) {
            let at = line(
                &mut text,
                format!("add rule netdev {t} c {} counter", r.rule),
            );
            lines.insert(at, Item::Rule(i));
        }
    }
    (text, lines)
}

/// Whether the kernel (in `ns`, which has [`DEV`]) loads the ruleset of `rules`.
fn kernel_loads(sel: &Selection, rules: &[&PacketRule], ns: &Netns, dir: &Path) -> bool {
    let path = dir.join("packets-try.nft");
    if std::fs::write(&path, format!("flush ruleset\n{}", ruleset(sel, rules))).is_err() {
        return false;
    }
    let k = ns
        .command("nft")
        .arg("-f")
        .arg(&path)
        .output()
        .is_ok_and(|o| o.status.success());
    let _ = ns.command("nft").args(["flush", "ruleset"]).output();
    k
}

/// `wasp check` of the ruleset of `rules`: `Ok` when it loads, else the line (from 1) its
/// message names, if any, and the message's first line.
fn wasp_check(
    sel: &Selection,
    rules: &[&PacketRule],
    wasp: &Path,
    dir: &Path,
) -> Result<std::result::Result<(), (Option<usize>, String)>> {
    let path = dir.join("packets-try-wasp.nft");
    std::fs::write(&path, ruleset(sel, rules)).map_err(|e| Error::io("write ruleset", e))?;
    let out = Command::new(wasp)
        .arg("check")
        .arg(&path)
        .output()
        .map_err(|e| Error::io("wasp check", e))?;
    if out.status.success() {
        return Ok(Ok(()));
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err.lines().next().unwrap_or("").to_string();
    let line = err
        .split_once("packets-try-wasp.nft:")
        .and_then(|(_, rest)| rest.split(':').next()?.parse().ok());
    Ok(Err((line, first)))
}

/// Rules left out of the ruleset, and why.
#[derive(Debug, Default)]
pub struct Dropped {
    /// The kernel refuses the ruleset with them (found by bisection).
    pub kernel: Vec<String>,
    /// `wasp check` refuses them (with its message).
    pub wasp: Vec<String>,
}

/// The rules that load together in the kernel and in wasp. Kernel: all of them when they
/// load; else, by bisection, the halves that load, and the single rules that make a half fail
/// are dropped. wasp: the rule each `wasp check` message points at is dropped, until it loads
/// (a message that names no rule: bisection).
///
/// # Errors
/// When `wasp` cannot be started.
pub fn loadable<'a>(
    sel: &'a Selection,
    wasp: &Path,
    ns: &Netns,
    dir: &Path,
) -> Result<(Vec<&'a PacketRule>, Dropped)> {
    fn go<'a>(
        sel: &'a Selection,
        rules: &[&'a PacketRule],
        ns: &Netns,
        dir: &Path,
        keep: &mut Vec<&'a PacketRule>,
        dropped: &mut Vec<&'a PacketRule>,
    ) {
        if rules.is_empty() {
            return;
        }
        if kernel_loads(sel, rules, ns, dir) {
            keep.extend_from_slice(rules);
            return;
        }
        if rules.len() == 1 {
            dropped.push(rules[0]);
            return;
        }
        let (a, b) = rules.split_at(rules.len() / 2);
        go(sel, a, ns, dir, keep, dropped);
        go(sel, b, ns, dir, keep, dropped);
    }
    let all: Vec<&PacketRule> = sel.rules.iter().collect();
    let mut keep = Vec::new();
    let mut kdropped = Vec::new();
    go(sel, &all, ns, dir, &mut keep, &mut kdropped);
    // Halves that load apart may still clash together: drop from the end until they load.
    while !keep.is_empty() && !kernel_loads(sel, &keep, ns, dir) {
        kdropped.extend(keep.pop());
    }
    keep.sort_by_key(|r| r.file);
    let mut dropped = Dropped {
        kernel: kdropped
            .iter()
            .map(|r| format!("{} ({})", r.rule, r.unit))
            .collect(),
        wasp: Vec::new(),
    };
    while let Err((line, msg)) = wasp_check(sel, &keep, wasp, dir)? {
        let why = msg.split(": error: ").nth(1).unwrap_or(&msg).to_string();
        let (text, lines) = ruleset_lines(sel, &keep);
        let at = match line.and_then(|l| lines.get(&l)) {
            Some(Item::Rule(i)) => *i,
            Some(Item::Decl(f, j)) => {
                let l = text.lines().nth(line.unwrap_or(1) - 1).unwrap_or("");
                sel.refused_decls
                    .borrow_mut()
                    .insert((*f, *j), format!("{l}: {why}"));
                continue;
            }
            None => {
                // No line named: the shortest prefix of the rules that wasp refuses ends
                // with the culprit.
                let (mut lo, mut hi) = (0, keep.len());
                while lo + 1 < hi {
                    let mid = (lo + hi) / 2;
                    if wasp_check(sel, &keep[..mid], wasp, dir)?.is_err() {
                        hi = mid;
                    } else {
                        lo = mid;
                    }
                }
                hi - 1
            }
        };
        let r = keep.remove(at);
        dropped.wasp.push(format!("{} ({}): {why}", r.rule, r.unit));
    }
    Ok((keep, dropped))
}

/// The capture: frames built from each rule's constants, then the harness's generated corpus,
/// without duplicates, at most [`MAX_FRAMES`]. A named set's elements (`add element` lines of
/// the rule's file) stand in for `@NAME`.
pub fn capture(sel: &Selection, rules: &[&PacketRule]) -> Vec<Vec<u8>> {
    let corpus: Vec<Vec<u8>> = crate::generate::corpus()
        .into_iter()
        .map(|g| g.frame)
        .collect();
    let budget = MAX_FRAMES.saturating_sub(corpus.len());
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for r in rules {
        let text = with_elements(&r.rule, &sel.files[r.file].1);
        for f in rule_frames(&text, FRAMES_PER_RULE) {
            if out.len() < budget && seen.insert(f.clone()) {
                out.push(f);
            }
        }
    }
    for f in corpus {
        if out.len() < MAX_FRAMES && seen.insert(f.clone()) {
            out.push(f);
        }
    }
    out
}

/// `rule` with each `@NAME` replaced by `{ ELEMENTS }` from the `add element` lines of `decls`
/// (for building frames only; a set without elements stays as it is).
pub fn with_elements(rule: &str, decls: &[String]) -> String {
    let mut out = Vec::new();
    for word in rule.split(' ') {
        let Some(name) = word.strip_prefix('@') else {
            out.push(word.to_string());
            continue;
        };
        let elems: Vec<&str> = decls
            .iter()
            .filter_map(|d| {
                let rest = d.strip_prefix("add element ")?;
                let mut w = rest.splitn(4, ' ');
                let (_, _, set, body) = (w.next()?, w.next()?, w.next()?, w.next()?);
                (set == name).then(|| body.trim().trim_start_matches('{').trim_end_matches('}'))
            })
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .collect();
        if elems.is_empty() {
            out.push(word.to_string());
        } else {
            out.push(format!("{{ {} }}", elems.join(", ")));
        }
    }
    out.join(" ")
}

/// The packet counts of each `f<N>` table's chain `c`, in rule order, from an `nft list
/// ruleset` listing (kernel or `wasp replay --list`).
pub fn counts(listing: &str) -> BTreeMap<usize, Vec<u64>> {
    let mut out: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    let mut table: Option<usize> = None;
    let mut in_chain = false;
    for line in listing.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("table netdev ") {
            table = rest
                .split_whitespace()
                .next()
                .and_then(|t| t.strip_prefix('f'))
                .and_then(|n| n.parse().ok());
            in_chain = false;
            continue;
        }
        if l.starts_with("table ") {
            table = None;
            continue;
        }
        if l.starts_with("chain ") {
            in_chain = l.starts_with("chain c ");
            continue;
        }
        let (Some(t), true) = (table, in_chain) else {
            continue;
        };
        for part in l.split("counter packets ").skip(1) {
            if let Some(n) = part.split_whitespace().next().and_then(|n| n.parse().ok()) {
                out.entry(t).or_default().push(n);
            }
        }
    }
    out
}

/// One rule's counts.
#[derive(Debug, Clone)]
pub struct RuleCount {
    /// The rule (matches only).
    pub rule: String,
    /// Its unit.
    pub unit: String,
    /// Packets the kernel counted.
    pub kernel: u64,
    /// Packets wasp counted (`None`: wasp listed no counter for it).
    pub wasp: Option<u64>,
}

/// The whole comparison.
#[derive(Debug, Default)]
pub struct PacketReport {
    /// Units skipped, by reason.
    pub skipped: BTreeMap<String, usize>,
    /// Rules left out of the ruleset (the kernel or wasp would not load it with them).
    pub dropped: Dropped,
    /// Declarations of the test files left out because wasp refuses them.
    pub refused_decls: Vec<String>,
    /// Every compared rule.
    pub rules: Vec<RuleCount>,
    /// Frames sent to the kernel, frames the stack discarded before the hook, frames in the
    /// capture wasp read.
    pub frames: (usize, usize, usize),
}

impl PacketReport {
    /// Rules whose counts differ.
    pub fn differences(&self) -> Vec<&RuleCount> {
        self.rules
            .iter()
            .filter(|r| r.wasp != Some(r.kernel))
            .collect()
    }

    /// The table: rules compared, equal, different, skipped by reason; then every difference.
    pub fn table(&self) -> String {
        let diff = self.differences();
        let mut s = String::new();
        let _ = writeln!(s, "| packet counts per rule | |\n|---|---:|");
        let _ = writeln!(s, "| frames sent | {} |", self.frames.0);
        let _ = writeln!(
            s,
            "| frames the stack discarded before the hook | {} |",
            self.frames.1
        );
        let _ = writeln!(s, "| frames in wasp's capture | {} |", self.frames.2);
        let _ = writeln!(s, "| rules compared | {} |", self.rules.len());
        let _ = writeln!(s, "| equal | {} |", self.rules.len() - diff.len());
        let _ = writeln!(s, "| different | {} |", diff.len());
        let _ = writeln!(
            s,
            "| matched by no frame (both 0) | {} |",
            self.rules
                .iter()
                .filter(|r| r.kernel == 0 && r.wasp == Some(0))
                .count()
        );
        let _ = writeln!(
            s,
            "| dropped: the kernel refuses them in the whole ruleset | {} |",
            self.dropped.kernel.len()
        );
        let _ = writeln!(
            s,
            "| dropped: wasp refuses them | {} |",
            self.dropped.wasp.len()
        );
        for (why, n) in &self.skipped {
            let _ = writeln!(s, "| skipped: {why} | {n} |");
        }
        if !diff.is_empty() {
            let _ = writeln!(s, "\nrules whose counts differ (kernel, wasp):");
            for r in diff {
                let w = r.wasp.map_or("-".to_string(), |w| w.to_string());
                let _ = writeln!(s, "{:>6} {:>6}  {}  ({})", r.kernel, w, r.rule, r.unit);
            }
        }
        for d in &self.dropped.kernel {
            let _ = writeln!(s, "dropped, kernel: {d}");
        }
        for d in &self.dropped.wasp {
            let _ = writeln!(s, "dropped, wasp refuses: {d}");
        }
        for d in &self.refused_decls {
            let _ = writeln!(s, "declaration left out, wasp refuses: {d}");
        }
        s
    }
}

/// Runs the comparison: selection, loadable ruleset, capture, kernel, wasp. `work` receives
/// the artifacts (`packets.nft`, `packets.pcap`, `kernel-ruleset.txt`, `wasp-listing.txt`);
/// `progress` gets a line now and then.
///
/// # Errors
/// When the kernel side, nft or wasp cannot run.
pub fn run(
    units: &[Unit],
    wasp: &Path,
    work: &Path,
    progress: &dyn Fn(&str),
) -> Result<PacketReport> {
    std::fs::create_dir_all(work).map_err(|e| Error::io("work dir", e))?;
    let probe = Netns::create()?;
    probe.add_veth(DEV, "wasp0p")?;
    let sel = select(units, &probe, work)?;
    progress(&format!("{} rules the kernel loads", sel.rules.len()));
    let (keep, dropped) = loadable(&sel, wasp, &probe, work)?;
    drop(probe);
    let path = work.join("packets.nft");
    std::fs::write(&path, ruleset(&sel, &keep)).map_err(|e| Error::io("write ruleset", e))?;
    let frames = capture(&sel, &keep);
    progress(&format!(
        "{} rules load together; {} frames",
        keep.len(),
        frames.len()
    ));
    // Frames from another namespace (no local socket: as from the wire, as `wasp replay`
    // reads a capture), the device with the address the frames go to; wasp gets the same
    // address from a gateway file (`meta pkttype` host or other).
    let mac = crate::generate::DST_MAC
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    let gateway = work.join("gateway.conf");
    std::fs::write(&gateway, format!("device {DEV} mac {mac}\n"))
        .map_err(|e| Error::io("write gateway file", e))?;
    let mut kernel = Kernel::start(KernelConfig {
        dev: DEV.into(),
        sender_apart: true,
        dev_mac: Some(mac),
        ..KernelConfig::default()
    })?;
    kernel.load(&path)?;
    let mut sent: Vec<&[u8]> = Vec::new();
    let mut discarded = 0;
    for (i, f) in frames.iter().enumerate() {
        if crate::capture::check_sendable(f).is_err() {
            continue;
        }
        match kernel.send(f)? {
            KernelOutcome::Refused(_) => {}
            KernelOutcome::Silent {
                reached_hook: false,
                ..
            } => discarded += 1,
            _ => sent.push(f),
        }
        if (i + 1) % 1000 == 0 {
            progress(&format!("{} frames sent", i + 1));
        }
    }
    let klisting = String::from_utf8_lossy(
        &crate::cmd::run(kernel.netns().command("nft").args(["list", "ruleset"]))?.stdout,
    )
    .into_owned();
    drop(kernel);
    let pcap = work.join("packets.pcap");
    write_pcap(&pcap, &sent)?;
    let out = crate::cmd::run(
        Command::new(wasp)
            .arg("replay")
            .arg("--ruleset")
            .arg(&path)
            .arg("--in")
            .arg(&pcap)
            .args(["--in-dev", DEV, "--list"])
            .arg("--gateway")
            .arg(&gateway)
            .arg("--out")
            .arg(work.join("wasp-out")),
    )?;
    let wlisting = String::from_utf8_lossy(&out.stdout).into_owned();
    let _ = std::fs::write(work.join("kernel-ruleset.txt"), &klisting);
    let _ = std::fs::write(work.join("wasp-listing.txt"), &wlisting);
    let kc = counts(&klisting);
    let wc = counts(&wlisting);
    let mut report = PacketReport {
        skipped: sel.skipped.clone(),
        dropped,
        refused_decls: sel.refused_decls.borrow().values().cloned().collect(),
        frames: (sent.len() + discarded, discarded, sent.len()),
        ..PacketReport::default()
    };
    let mut index: BTreeMap<usize, usize> = BTreeMap::new();
    for r in &keep {
        let i = index.entry(r.file).or_default();
        let k = kc.get(&r.file).and_then(|v| v.get(*i)).copied();
        let w = wc.get(&r.file).and_then(|v| v.get(*i)).copied();
        *i += 1;
        let Some(k) = k else {
            return Err(Error::Monitor(format!(
                "the kernel listing has no counter for `{}` (table f{})",
                r.rule, r.file
            )));
        };
        report.rules.push(RuleCount {
            rule: r.rule.clone(),
            unit: r.unit.clone(),
            kernel: k,
            wasp: w,
        });
    }
    Ok(report)
}

/// The rules of the known-differences file (text before ` #`, blank lines and comments left
/// out).
pub fn known(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| l.split_once(" #").map_or(l, |(r, _)| r).trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// What fails: a difference not listed in `listed`, a listed rule that now agrees, a listed
/// rule that is no longer compared.
pub fn failures(report: &PacketReport, listed: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    let compared: BTreeMap<&str, &RuleCount> =
        report.rules.iter().map(|r| (r.rule.as_str(), r)).collect();
    for r in report.differences() {
        if !listed.contains(&r.rule) {
            out.push(format!(
                "counts differ (kernel {}, wasp {}): {}  ({})",
                r.kernel,
                r.wasp.map_or("-".to_string(), |w| w.to_string()),
                r.rule,
                r.unit
            ));
        }
    }
    for l in listed {
        match compared.get(l.as_str()) {
            Some(r) if r.wasp == Some(r.kernel) => out.push(format!(
                "listed in nft-suite-packets-known.txt but now agrees ({} packets): {l}",
                r.kernel
            )),
            Some(_) => {}
            None => out.push(format!(
                "listed in nft-suite-packets-known.txt but not compared: {l}"
            )),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_go_and_statements_skip() {
        assert_eq!(
            matches_only("tcp dport 22 accept"),
            Ok("tcp dport 22".into())
        );
        assert_eq!(
            matches_only("ip saddr 1.1.1.1 jump foo"),
            Ok("ip saddr 1.1.1.1".into())
        );
        assert_eq!(
            matches_only("iifname \"lo\" drop"),
            Ok("iifname \"lo\"".into())
        );
        assert_eq!(matches_only("meta mark set 1"), Err("sets a value"));
        assert_eq!(matches_only("limit rate 1/second"), Err("limit"));
        assert_eq!(
            matches_only("tcp dport vmap { 22 : accept }"),
            Err("verdict map")
        );
        assert_eq!(matches_only("accept"), Err("no match"));
        assert_eq!(matches_only("meta cpu 1"), Err("cpu or time"));
    }

    #[test]
    fn named_sets_give_their_elements() {
        let decls = vec![
            "add set netdev test-netdev set1 { type ipv4_addr; }".to_string(),
            "add element netdev test-netdev set1 { 192.168.3.4 }".to_string(),
            "add element netdev test-netdev set1 { 10.0.0.1, 10.0.0.2 }".to_string(),
        ];
        assert_eq!(
            with_elements("ip saddr @set1", &decls),
            "ip saddr { 192.168.3.4, 10.0.0.1, 10.0.0.2 }"
        );
        assert_eq!(with_elements("ip saddr @set2", &decls), "ip saddr @set2");
    }

    #[test]
    fn counters_by_table_in_rule_order() {
        let listing = "table netdev wasp_trace {\n\tchain head {\n\t\tcounter packets 9 bytes 9\n\t}\n}\n\
table netdev f3 {\n\tset s {\n\t\ttype ipv4_addr\n\t}\n\tchain c {\n\t\ttype filter hook ingress device \"wasp0\" priority filter; policy accept;\n\
\t\ttcp dport 22 counter packets 4 bytes 240\n\t\tip saddr @s counter packets 0 bytes 0 # handle 3\n\t}\n}\n";
        let c = counts(listing);
        assert_eq!(c.len(), 1);
        assert_eq!(c[&3], vec![4, 0]);
    }

    #[test]
    fn known_lines_and_failures() {
        let listed = known("# why\nip saddr 1.1.1.1 # a comment\n\ntcp dport 22\n");
        assert_eq!(listed.len(), 2);
        let report = PacketReport {
            rules: vec![
                RuleCount {
                    rule: "ip saddr 1.1.1.1".into(),
                    unit: "u1".into(),
                    kernel: 3,
                    wasp: Some(2),
                },
                RuleCount {
                    rule: "tcp dport 22".into(),
                    unit: "u2".into(),
                    kernel: 5,
                    wasp: Some(5),
                },
                RuleCount {
                    rule: "udp dport 53".into(),
                    unit: "u3".into(),
                    kernel: 5,
                    wasp: Some(6),
                },
            ],
            ..PacketReport::default()
        };
        let f = failures(&report, &listed);
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f[0].contains("udp dport 53"));
        assert!(f[1].contains("now agrees") && f[1].contains("tcp dport 22"));
    }
}
