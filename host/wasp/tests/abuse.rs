//! `wasp run` and its control socket abused as a careless or hostile client would: garbage,
//! huge lines, many clients, stalled readers, bad batches, signals. After each abuse the
//! daemon must still answer and forward (a ping through it). Topology as `live.rs`: client ns
//! (10.9.0.1) <-> w0 [wasp] w1 <-> server ns (10.9.0.2), created and always deleted here.
//! Needs root; without it the root tests say so and return. Tests marked `#[ignore = "bug:
//! ..."]` describe behaviour that is wrong today (run them with `--ignored`).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Namespaces and processes of one test, removed on drop (also when the test fails).
struct Topo {
    ns: Vec<String>,
    children: Vec<Child>,
    sock: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Topo {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for n in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn sh(args: &[&str]) -> Output {
    Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn ok(args: &[&str]) {
    let o = sh(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn is_root() -> bool {
    sh(&["id", "-u"]).stdout.starts_with(b"0\n")
}

fn wasp() -> &'static str {
    env!("CARGO_BIN_EXE_wasp")
}

const RULESET: &str = r#"table netdev gw {
    set blk {
        type ipv4_addr
        flags interval
        elements = { 10.50.0.0/16, 10.60.0.1 }
    }
    chain in0 {
        type filter hook ingress device "w0" priority 0; policy accept;
        tcp dport 22 counter drop
        ip daddr @blk counter drop
        counter fwd to "w1"
    }
    chain in1 {
        type filter hook ingress device "w1" priority 0; policy accept;
        fwd to "w0"
    }
}
"#;

/// Build the three namespaces (names `wab<pid><n>c|w|s`) and start `wasp run RULESET` in the
/// middle one; returns once the control socket answers.
fn topology(n: u32) -> Topo {
    let tag = format!("wab{}{n}", std::process::id() % 100_000);
    let (c, w, s) = (format!("{tag}c"), format!("{tag}w"), format!("{tag}s"));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut t = Topo {
        ns: vec![c.clone(), w.clone(), s.clone()],
        children: Vec::new(),
        sock: dir.path().join("wasp.sock"),
        _dir: dir,
    };
    for n in &t.ns {
        ok(&["ip", "netns", "add", n]);
        ok(&[
            "ip",
            "netns",
            "exec",
            n,
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
        ]);
        ok(&["ip", "-n", n, "link", "set", "lo", "up"]);
    }
    ok(&[
        "ip", "-n", &c, "link", "add", "c0", "type", "veth", "peer", "name", "w0", "netns", &w,
    ]);
    ok(&[
        "ip", "-n", &s, "link", "add", "s0", "type", "veth", "peer", "name", "w1", "netns", &w,
    ]);
    ok(&["ip", "-n", &c, "addr", "add", "10.9.0.1/24", "dev", "c0"]);
    ok(&["ip", "-n", &s, "addr", "add", "10.9.0.2/24", "dev", "s0"]);
    for (n, d) in [(&c, "c0"), (&w, "w0"), (&w, "w1"), (&s, "s0")] {
        ok(&["ip", "-n", n, "link", "set", d, "up"]);
    }
    let rules = t._dir.path().join("rules.nft");
    std::fs::write(&rules, RULESET).expect("write ruleset");
    let daemon = Command::new("ip")
        .args(["netns", "exec", &w, wasp(), "run"])
        .arg(&rules)
        .arg("--socket")
        .arg(&t.sock)
        .args(["--workers", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("wasp run");
    t.children.push(daemon);
    let start = Instant::now();
    while UnixStream::connect(&t.sock).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no control socket"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    t
}

/// Send raw `bytes` on a fresh connection and read reply lines until `finals` final lines
/// (`{"ok"...}` / `{"error"...}`) arrived or the daemon closed; returns the lines.
fn raw(sock: &Path, bytes: &[u8], finals: usize) -> Vec<String> {
    let mut s = UnixStream::connect(sock).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(bytes).expect("send");
    let mut lines = Vec::new();
    let mut seen = 0;
    for line in BufReader::new(s).lines() {
        let Ok(line) = line else { break };
        if line.starts_with("{\"ok\"") || line.starts_with("{\"error\"") {
            seen += 1;
        }
        lines.push(line);
        if seen == finals {
            break;
        }
    }
    lines
}

fn ctl(t: &Topo, args: &[&str]) -> (bool, String, String) {
    let o = Command::new(wasp())
        .args(["ctl", "--socket"])
        .arg(&t.sock)
        .args(args)
        .output()
        .expect("wasp ctl");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The daemon still answers `list tables` and forwards a ping from client to server.
fn still_alive(t: &Topo, after: &str) {
    let r = raw(
        &t.sock,
        b"{\"v\":1,\"req\":\"list\",\"what\":\"tables\"}\n",
        1,
    );
    assert_eq!(
        r,
        vec![
            r#"{"text":"table netdev gw\n"}"#.to_string(),
            r#"{"ok":null}"#.to_string()
        ],
        "after {after}"
    );
    let ping = sh(&[
        "ip", "netns", "exec", &t.ns[0], "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.9.0.2",
    ]);
    assert!(
        ping.status.success(),
        "ping through wasp after {after}: {}",
        String::from_utf8_lossy(&ping.stdout)
    );
}

#[test]
fn control_socket_survives_abuse() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let t = topology(0);
    still_alive(&t, "start");

    // Garbage bytes, then a good request on the same connection: an error, then the answer.
    let r = raw(
        &t.sock,
        b"\x00\xff\xfe garbage\n{\"v\":1,\"req\":\"list\",\"what\":\"tables\"}\n",
        2,
    );
    assert!(r[0].starts_with(r#"{"error":"bad request: "#), "{r:?}");
    assert_eq!(r[2], r#"{"ok":null}"#, "{r:?}");
    still_alive(&t, "garbage");

    // Invalid JSON, JSON that is not an object, unknown request, no version, wrong version.
    let r = raw(
        &t.sock,
        b"{\"v\":1,\"req\":\n[1,2]\n{\"v\":1,\"req\":\"frobnicate\"}\n{\"req\":\"stats\"}\n{\"v\":2,\"req\":\"stats\"}\n",
        5,
    );
    assert_eq!(r.len(), 5, "{r:?}");
    assert!(r[0].starts_with(r#"{"error":"bad request: "#), "{r:?}");
    assert_eq!(
        r[1],
        r#"{"error":"bad request: a request is a JSON object"}"#
    );
    assert!(r[2].contains("unknown variant `frobnicate`"), "{r:?}");
    assert_eq!(
        r[3],
        r#"{"error":"bad request: no protocol version (\"v\": 1)"}"#
    );
    assert_eq!(
        r[4],
        r#"{"error":"unsupported protocol version 2 (this daemon speaks 1)"}"#
    );
    still_alive(&t, "bad requests");

    // A 100 MiB line: an error once past 64 MiB, then the connection closes.
    {
        let mut s = UnixStream::connect(&t.sock).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..100 {
            if s.write_all(&chunk).is_err() {
                break;
            }
        }
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        let got = String::from_utf8_lossy(&got);
        assert!(
            got.starts_with(r#"{"error":"bad request: longer than 67108864 bytes"}"#),
            "{got}"
        );
    }
    still_alive(&t, "a 100 MiB line");

    // 50 clients at once, each listing the ruleset.
    let threads: Vec<_> = (0..50)
        .map(|_| {
            let sock = t.sock.clone();
            std::thread::spawn(move || {
                raw(
                    &sock,
                    b"{\"v\":1,\"req\":\"list\",\"what\":\"ruleset\"}\n",
                    1,
                )
            })
        })
        .collect();
    for th in threads {
        let r = th.join().expect("client thread");
        assert_eq!(
            r.last().map(String::as_str),
            Some(r#"{"ok":null}"#),
            "{r:?}"
        );
        assert!(r[0].contains("fwd to \\\"w1\\\""), "{r:?}");
    }
    still_alive(&t, "50 clients");

    // A client that asks for many dumps and never reads.
    let mut stalled = UnixStream::connect(&t.sock).expect("connect");
    stalled.set_nonblocking(true).unwrap();
    let req = b"{\"v\":1,\"req\":\"dump\",\"mode\":\"full\"}\n".repeat(2000);
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        if stalled.write(&req).is_err() {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    still_alive(&t, "a client that never reads");
    drop(stalled);

    // A monitor client killed mid-stream; then a change is applied.
    let mut mon = Command::new(wasp())
        .args(["ctl", "--socket"])
        .arg(&t.sock)
        .arg("monitor")
        .stdout(Stdio::null())
        .spawn()
        .expect("monitor");
    std::thread::sleep(Duration::from_millis(500));
    mon.kill().unwrap();
    mon.wait().unwrap();
    let (okk, _, err) = ctl(
        &t,
        &["add", "element", "netdev", "gw", "blk", "{ 10.99.0.1 }"],
    );
    assert!(okk, "{err}");
    still_alive(&t, "a monitor killed");
}

#[test]
fn failing_batches_change_nothing_and_name_file_line_col() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let t = topology(1);
    let dir = tempfile::tempdir().unwrap();
    let (_, before, _) = ctl(&t, &["-a", "-s", "list", "ruleset"]);
    for (name, text, want) in [
        (
            "syntax.nft",
            "add rule netdev gw in0 ip saddr 10.70.0.2 counter drop\nadd rule netdev gw in0 ip saddr frob drop\n",
            "syntax.nft:2:33: error: expected an IPv4 address, found `frob`",
        ),
        (
            "table.nft",
            "add rule netdev gw in0 ip saddr 10.70.0.3 drop\nadd rule netdev nope in0 drop\n",
            "table.nft:2:17: error: unknown table `netdev nope`",
        ),
        (
            "overlap.nft",
            "add rule netdev gw in0 ip saddr 10.70.0.4 drop\nadd element netdev gw blk { 10.50.1.0/24 }\n",
            "overlap.nft:2:29: error: ",
        ),
    ] {
        let f = dir.path().join(name);
        std::fs::write(&f, text).unwrap();
        let (okk, _, err) = ctl(&t, &["-f", f.to_str().unwrap()]);
        assert!(!okk, "{name} refused");
        assert!(err.contains(want), "{name}: {err}");
        let (_, after, _) = ctl(&t, &["-a", "-s", "list", "ruleset"]);
        assert_eq!(before, after, "{name} changed the running ruleset");
    }
    still_alive(&t, "failing batches");
}

/// `wasp ctl -j -f`: a JSON batch (libnftables' schema) applies as its nft commands would;
/// a broken one is refused naming its place in the JSON document (line and column, or the
/// command and statement), and the running ruleset stays as it was.
#[test]
fn json_batches_apply_and_broken_ones_change_nothing() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let t = topology(9);
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.json");
    std::fs::write(
        &good,
        r#"{"nftables": [
            {"metainfo": {"json_schema_version": 1}},
            {"add": {"element": {"family": "netdev", "table": "gw", "name": "blk", "elem": ["10.90.0.1"]}}},
            {"insert": {"rule": {"family": "netdev", "table": "gw", "chain": "in0", "expr": [
                {"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "10.70.0.9"}},
                {"counter": null}, {"drop": null}]}}}
        ]}"#,
    )
    .unwrap();
    // `-c` checks and changes nothing; then it applies.
    let (_, before_check, _) = ctl(&t, &["-a", "-s", "list", "ruleset"]);
    let (okk, _, err) = ctl(&t, &["-c", "-j", "-f", good.to_str().unwrap()]);
    assert!(okk, "{err}");
    let (_, after_check, _) = ctl(&t, &["-a", "-s", "list", "ruleset"]);
    assert_eq!(before_check, after_check);
    let (okk, _, err) = ctl(&t, &["-j", "-f", good.to_str().unwrap()]);
    assert!(okk, "{err}");
    let (_, listing, _) = ctl(&t, &["-s", "list", "ruleset"]);
    assert!(
        listing.contains("\t\tip saddr 10.70.0.9 counter drop\n\t\ttcp dport 22 counter drop\n"),
        "{listing}"
    );
    assert!(
        listing.contains("elements = { 10.50.0.0/16, 10.60.0.1,\n\t\t\t     10.90.0.1 }"),
        "{listing}"
    );
    // From standard input too.
    let mut child = Command::new(wasp())
        .args(["ctl", "--socket"])
        .arg(&t.sock)
        .args(["-j", "-f", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("wasp ctl");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"nftables": [{"add": {"element": {"family": "netdev", "table": "gw", "name": "blk", "elem": "10.90.0.2"}}}]}"#)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let (_, before, _) = ctl(&t, &["-a", "-s", "list", "ruleset"]);
    assert!(before.contains("10.90.0.2"), "{before}");
    let good_rule = r#"{"add": {"rule": {"family": "netdev", "table": "gw", "chain": "in0", "expr": [{"drop": null}]}}}"#;
    for (name, text, want) in [
        (
            "syntax.json",
            format!("{{\"nftables\": [\n  {good_rule},\n  {{\"add\": }}\n]}}"),
            "syntax.json:3:11: error: invalid JSON: expected value",
        ),
        (
            "value.json",
            format!(
                r#"{{"nftables": [{good_rule}, {{"add": {{"rule": {{"family": "netdev", "table": "gw", "chain": "in0", "expr": [{{"match": {{"op": "==", "left": {{"payload": {{"protocol": "ip", "field": "saddr"}}}}, "right": "frob"}}}}]}}}}}}]}}"#
            ),
            "value.json: nftables[1].add.rule.expr[0]: error: expected an IPv4 address, found `frob`",
        ),
        (
            "table.json",
            format!(
                r#"{{"nftables": [{good_rule}, {{"add": {{"rule": {{"family": "netdev", "table": "nope", "chain": "in0", "expr": [{{"drop": null}}]}}}}}}]}}"#
            ),
            "table.json: nftables[1].add.rule: error: unknown table `netdev nope`",
        ),
        (
            "schema.json",
            format!(
                r#"{{"nftables": [{good_rule}, {{"add": {{"rule": {{"family": "netdev", "table": "gw", "chain": "in0", "expr": [{{"frobnicate": null}}]}}}}}}]}}"#
            ),
            "schema.json: nftables[1].add.rule.expr[0]: error: unknown statement `frobnicate`",
        ),
    ] {
        let f = dir.path().join(name);
        std::fs::write(&f, text).unwrap();
        let (okk, _, err) = ctl(&t, &["-j", "-f", f.to_str().unwrap()]);
        assert!(!okk, "{name} refused");
        assert!(err.contains(want), "{name}: {err}");
        let (_, after, _) = ctl(&t, &["-a", "-s", "list", "ruleset"]);
        assert_eq!(before, after, "{name} changed the running ruleset");
    }
    still_alive(&t, "JSON batches");
}

#[test]
fn element_request_cannot_smuggle_other_commands() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let t = topology(2);
    let r = raw(
        &t.sock,
        b"{\"v\":1,\"req\":\"element\",\"op\":\"add\",\"family\":\"netdev\",\"table\":\"gw\",\"set\":\"blk\",\"elements\":\"{ 10.1.1.1 }\\ndelete rule netdev gw in0 handle 4\"}\n",
        1,
    );
    let (_, out, _) = ctl(&t, &["list", "chain", "netdev", "gw", "in0"]);
    assert!(out.contains("tcp dport 22 counter"), "rule deleted: {out}");
    assert!(r[0].starts_with("{\"error\""), "{r:?}");
}

#[test]
fn get_element_with_trailing_text_is_a_located_error() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let t = topology(3);
    let r = raw(
        &t.sock,
        b"{\"v\":1,\"req\":\"element\",\"op\":\"get\",\"family\":\"netdev\",\"table\":\"gw\",\"set\":\"blk\",\"elements\":\"{ 10.1.1.1 }\\nflush ruleset\"}\n",
        1,
    );
    assert!(r[0].starts_with("{\"error\""), "{r:?}");
    assert!(!r[0].contains("internal error"), "{r:?}");
    still_alive(&t, "get element with trailing text");
}

#[test]
fn monitor_prints_changes_as_nft_monitor() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let t = topology(4);
    let mut mon = Command::new(wasp())
        .args(["ctl", "--socket"])
        .arg(&t.sock)
        .arg("monitor")
        .stdout(Stdio::piped())
        .spawn()
        .expect("monitor");
    std::thread::sleep(Duration::from_millis(500));
    let (okk, _, err) = ctl(
        &t,
        &["add", "element", "netdev", "gw", "blk", "{ 10.80.0.0/16 }"],
    );
    assert!(okk, "{err}");
    std::thread::sleep(Duration::from_millis(500));
    mon.kill().unwrap();
    let out = mon.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.lines()
            .any(|l| l == "add element netdev gw blk { 10.80.0.0/16 }"),
        "{out}"
    );
}

#[test]
fn reset_counters_lists_values_before_reset() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let t = topology(5);
    still_alive(&t, "start");
    let (okk, out, err) = ctl(&t, &["reset", "counters"]);
    assert!(okk, "{err}");
    assert!(out.contains("table netdev gw"), "reset printed: {out:?}");
}

#[test]
fn json_listing_of_fwd_follows_libnftables_schema() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let t = topology(6);
    let (okk, out, err) = ctl(&t, &["-j", "list", "ruleset"]);
    assert!(okk, "{err}");
    assert!(out.contains(r#"{"fwd":{"dev":"w1"}}"#), "{out}");
}

#[test]
fn wrong_version_type_is_named_as_sent() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let t = topology(7);
    let r = raw(&t.sock, b"{\"v\":\"1\",\"req\":\"stats\"}\n", 1);
    assert_eq!(
        r[0], r#"{"error":"unsupported protocol version \"1\" (this daemon speaks 1)"}"#,
        "{r:?}"
    );
    let r = raw(&t.sock, b"{\"v\":-1,\"req\":\"stats\"}\n", 1);
    assert!(r[0].contains("unsupported protocol version -1 "), "{r:?}");
}

#[test]
fn run_refuses_missing_file_and_bad_rulesets_with_location() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    let run = |file: &Path| {
        let o = Command::new(wasp())
            .arg("run")
            .arg(file)
            .arg("--socket")
            .arg(&sock)
            .output()
            .expect("wasp run");
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let missing = dir.path().join("nope.nft");
    let (code, err) = run(&missing);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("nope.nft: No such file or directory"), "{err}");

    let syn = dir.path().join("syn.nft");
    std::fs::write(
        &syn,
        "table netdev t {\n chain c {\n  type filter hook ingress device \"w0\" priority 0; policy accept;\n  ip saddr frob drop\n }\n}\n",
    )
    .unwrap();
    let (code, err) = run(&syn);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("syn.nft:4:12: error: expected an IPv4 address, found `frob`"),
        "{err}"
    );

    let nonetdev = dir.path().join("ip.nft");
    std::fs::write(
        &nonetdev,
        "table ip t {\n chain c {\n  type filter hook input priority 0; policy accept;\n }\n}\n",
    )
    .unwrap();
    let (code, err) = run(&nonetdev);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no netdev base chain names a device"), "{err}");
    assert!(!sock.exists(), "no socket left behind");
}

#[test]
fn second_daemon_on_the_same_socket_is_refused_and_signals_stop_cleanly() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let mut t = topology(8);
    let rules = t._dir.path().join("rules.nft");
    let o = Command::new("ip")
        .args(["netns", "exec", &t.ns[1], wasp(), "run"])
        .arg(&rules)
        .arg("--socket")
        .arg(&t.sock)
        .output()
        .expect("second wasp run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("already running there"), "{err}");
    still_alive(&t, "a second daemon refused");

    // SIGINT during traffic, twice SIGTERM as well: exit 0 with the final statistics.
    let mut flood = Command::new("ip")
        .args([
            "netns", "exec", &t.ns[0], "ping", "-f", "-c", "2000", "10.9.0.2",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ping -f");
    std::thread::sleep(Duration::from_millis(700));
    let daemon = t.children.pop().expect("daemon");
    let pid = daemon.id().to_string();
    ok(&["kill", "-INT", &pid]);
    let _ = sh(&["kill", "-TERM", &pid]);
    let _ = sh(&["kill", "-TERM", &pid]);
    let out = daemon.wait_with_output().expect("wait");
    let _ = flood.kill();
    let _ = flood.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("packets "), "{stdout}");
    assert!(stdout.contains("worker 1 w0: rx "), "{stdout}");
    assert!(!t.sock.exists(), "socket removed at shutdown");
}
