//! The guides' stateful example live: `wasp run` runs `srccount` built from JavaScript
//! (`sdk/js/srccount.js`) between two veths while a client sends UDP datagrams through it, and
//! `wasp ctl plugin swap` replaces it with the Python build (`sdk/python/srccount.py`) in the
//! middle of the traffic. Every datagram reaches the server, and the counts go across: the
//! counter behind `srccount 500` ends at (datagrams - 500) only if the Python build went on
//! from the JavaScript build's count (a fresh start at the swap would make it about 500 less).
//!
//! Namespaces as in `live.rs`: client (c0 10.9.0.1) <-> w0 [wasp] w1 <-> (s0 10.9.0.2) server,
//! created here and always deleted. Needs root, Node.js with npm, and componentize-py 0.25.1;
//! without them the test says so and passes, except under CI (`CI=true`), where a missing
//! toolchain fails it (`.ci/run` installs both; CI runs as root).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Namespaces and processes of the test, removed on drop (also when the test fails).
struct Topo {
    ns: Vec<String>,
    children: Vec<Child>,
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

/// Say why the test does not run; under CI that is a failure.
fn skip(msg: &str) {
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{msg}");
    let _ = writeln!(std::io::stderr(), "skipping: {msg}");
}

fn version(cmd: &str) -> Option<String> {
    let out = Command::new(cmd).arg("--version").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Build the example `srccount` with `sdk/{lang}/build.sh` into `dir`.
fn build(lang: &str, dir: &Path) -> PathBuf {
    let out = dir.join(format!("srccount-{lang}.wasm"));
    let run = Command::new("bash")
        .arg(repo().join(format!("sdk/{lang}/build.sh")))
        .arg("srccount")
        .arg(&out)
        .output()
        .expect("run build.sh");
    assert!(
        run.status.success(),
        "sdk/{lang}/build.sh srccount:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    out
}

/// Waits until `dev` in `ns` is up with its queueing discipline attached (until then the
/// `noop` discipline drops what is sent).
fn wait_up(ns: &str, dev: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let line = sh(&["ip", "-n", ns, "-o", "link", "show", "dev", dev]).stdout;
        let line = String::from_utf8_lossy(&line);
        if line.contains("state UP") && !line.contains("qdisc noop") {
            return;
        }
        assert!(Instant::now() < deadline, "{ns}/{dev} not up: {line}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// client (c0 10.9.0.1) <-> w0 [wasp] w1 <-> (s0 10.9.0.2) server.
fn topology(tag: &str) -> Topo {
    let (c, w, s) = (format!("{tag}c"), format!("{tag}w"), format!("{tag}s"));
    let t = Topo {
        ns: vec![c.clone(), w.clone(), s.clone()],
        children: Vec::new(),
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
    for (n, d) in [(&c, "c0"), (&w, "w0"), (&w, "w1"), (&s, "s0")] {
        wait_up(n, d);
    }
    t
}

fn ctl(ns: &str, sock: &Path, args: &[&str]) -> (bool, String, String) {
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            env!("CARGO_BIN_EXE_wasp"),
            "ctl",
            "--socket",
        ])
        .arg(sock)
        .args(args)
        .output()
        .expect("wasp ctl");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Wait up to `secs` for `path` to exist.
fn wait_for(path: &Path, secs: u64, what: &str) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < Duration::from_secs(secs), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Datagrams the client sends before the swap, at least; and after it, at least.
const BEFORE: u32 = 1000;
const AFTER: u32 = 1000;
/// The argument of `srccount`: the counter behind it counts each datagram past the 500th.
const LIMIT: u32 = 500;

#[test]
fn srccount_swapped_from_js_to_python_under_live_traffic_loses_nothing_and_counts_on() {
    if !sh(&["id", "-u"]).stdout.starts_with(b"0\n") {
        skip("needs root (network namespaces)");
        return;
    }
    let mut missing: Vec<String> = ["node", "npm"]
        .into_iter()
        .filter(|t| version(t).is_none())
        .map(String::from)
        .collect();
    if version("componentize-py").as_deref() != Some("componentize-py 0.25.1") {
        missing.push("componentize-py 0.25.1".to_string());
    }
    if !missing.is_empty() {
        skip(&format!(
            "the live JS -> Python swap: {} missing (sdk/js/README.md, sdk/python/README.md)",
            missing.join(", ")
        ));
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let js = build("js", dir.path());
    let py = build("python", dir.path());

    let tag = format!("wsl{}", std::process::id() % 100_000);
    let mut t = topology(&tag);
    let (c, w, s) = (t.ns[0].clone(), t.ns[1].clone(), t.ns[2].clone());
    let rules = format!(
        r#"table netdev gw {{
    plugin srccount {{ path "{}"; }}
    chain in0 {{
        type filter hook ingress device "w0" priority 0; policy accept;
        udp dport 9000 srccount {LIMIT} counter
        fwd to "w1"
    }}
    chain in1 {{
        type filter hook ingress device "w1" priority 0; policy accept;
        fwd to "w0"
    }}
}}
"#,
        js.display()
    );
    let file = dir.path().join("rules.nft");
    std::fs::write(&file, rules).unwrap();
    let sock = dir.path().join("wasp.sock");
    // One worker: srccount's counts are per instance, and each worker has its own.
    let daemon = Command::new("ip")
        .args(["netns", "exec", &w, env!("CARGO_BIN_EXE_wasp"), "run"])
        .arg(&file)
        .arg("--socket")
        .arg(&sock)
        .args(["--workers", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("wasp run");
    t.children.push(daemon);
    // The component is compiled as the daemon starts: minutes in a debug build.
    wait_for(&sock, 900, "no control socket");

    // The server counts datagrams until 3 s pass without one.
    let count_file = dir.path().join("count");
    let receiver = Command::new("ip")
        .args(["netns", "exec", &s, "python3", "-c"])
        .arg(format!(
            "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.setsockopt(socket.SOL_SOCKET,socket.SO_RCVBUF,1<<22)\ns.bind(('10.9.0.2',9000))\ns.settimeout(60)\nn=0\ntry:\n while True:\n  s.recv(2048); n+=1; s.settimeout(3)\nexcept Exception:\n pass\nopen('{}','w').write(str(n))\n",
            count_file.display()
        ))
        .spawn()
        .expect("receiver");
    t.children.push(receiver);
    std::thread::sleep(Duration::from_millis(300));
    // The client: BEFORE datagrams, then `ready`; then about 1000 a second until `stop`
    // exists; then AFTER more, and the total in `sent`.
    let (ready, stop, sent) = (
        dir.path().join("ready"),
        dir.path().join("stop"),
        dir.path().join("sent"),
    );
    let sender = Command::new("ip")
        .args(["netns", "exec", &c, "python3", "-c"])
        .arg(format!(
            "import os,socket,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\nn=0\ndef send(k):\n global n\n for i in range(k):\n  s.sendto(b'x'*18,('10.9.0.2',9000)); n+=1\n  if n%20==0: time.sleep(0.02)\nsend({BEFORE})\nopen('{ready}','w').close()\nwhile not os.path.exists('{stop}'): send(20)\nsend({AFTER})\nopen('{total}','w').write(str(n))\n",
            ready = ready.display(),
            stop = stop.display(),
            total = sent.display(),
        ))
        .spawn()
        .expect("sender");
    t.children.push(sender);
    wait_for(&ready, 60, "the sender did not get its first datagrams out");
    let started = Instant::now();
    let (okk, out, err) = ctl(
        &w,
        &sock,
        &["plugin", "swap", "srccount", py.to_str().unwrap()],
    );
    let swap_s = started.elapsed().as_secs_f64();
    assert!(okk, "swap: {out} {err}");
    // A swap that does not carry the state warns per worker; this one must be quiet.
    assert_eq!(err, "", "the swap carried the counts");
    std::fs::write(&stop, "").unwrap();
    let mut sender = t.children.pop().unwrap();
    assert!(sender.wait().expect("sender").success());
    let mut receiver = t.children.pop().unwrap();
    assert!(receiver.wait().expect("receiver").success());
    let sent: u32 = std::fs::read_to_string(&sent).unwrap().parse().unwrap();
    let got: u32 = std::fs::read_to_string(&count_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _ = writeln!(
        std::io::stderr(),
        "swap took {swap_s:.1} s; {sent} datagrams sent, {got} received"
    );
    assert!(sent >= BEFORE + AFTER);
    assert_eq!(got, sent, "datagrams through wasp across the swap");
    let (okk, out, err) = ctl(&w, &sock, &["list", "ruleset"]);
    assert!(okk, "{err}");
    let line = out
        .lines()
        .find(|l| l.contains(&format!("srccount {LIMIT}")))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains(&format!("counter packets {} ", sent - LIMIT)),
        "srccount counted on across the swap: {line} ({sent} sent)"
    );
}
