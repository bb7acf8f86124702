//! The server loop with a fake handler: permissions, stale and live sockets, garbage, many
//! clients at once, clients that go away mid-stream, a handler that panics, shutdown.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasp_ctl::client::Incoming;
use wasp_ctl::dump::{BriefWriter, FLAG_COUNTER, RECORD_BYTES, Record, dump_ruleset};
use wasp_ctl::proto::{
    BriefEncoding, DumpMode, ListFlags, ListRequest, ListWhat, PluginOp, Reply, Request, Stats,
};
use wasp_ctl::{Client, ClientError, Handler, ReplySink, ReplySinkExt, Server, ServerConfig};
use wasp_ruleset::Ruleset;

const RULESET: &str = "table netdev filt {
	set blk {
		type ipv4_addr
		elements = { 10.0.0.1, 10.0.0.2 }
	}
	chain in {
		type filter hook ingress device \"lo\" priority 0; policy accept;
		ip saddr @blk counter packets 3 bytes 180 drop
		tcp dport 22 accept
	}
}
";

/// Rules of the fake's long brief stream (asked for as `plugin load big`).
const BIG: u64 = 200_000;

#[derive(Default)]
struct Fake {
    ruleset: Mutex<Ruleset>,
    /// Handlers running now.
    active: AtomicUsize,
    /// A monitor stream saw its client go.
    monitor_ended: AtomicBool,
    /// The big dump stopped early because its client went.
    big_dump_cut: AtomicBool,
}

struct Active<'a>(&'a AtomicUsize);
impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Handler for Fake {
    fn handle(&self, req: Request, out: &mut dyn ReplySink) -> Result<serde_json::Value, String> {
        self.active.fetch_add(1, Ordering::SeqCst);
        let _active = Active(&self.active);
        match req {
            Request::List(l) => {
                let rs = self.ruleset.lock().unwrap().clone();
                wasp_ctl::listing::list(&rs, &l, out)
            }
            Request::Apply { text, name, .. } => {
                let mut rs = self.ruleset.lock().unwrap();
                let new =
                    wasp_ruleset::apply_batch(&rs, &text, &name).map_err(|e| e.to_string())?;
                *rs = new;
                Ok(serde_json::Value::Null)
            }
            Request::Dump { mode, encoding } => {
                let rs = self.ruleset.lock().unwrap().clone();
                let n = dump_ruleset(&rs, mode, encoding, out).map_err(|e| e.to_string())?;
                Ok(serde_json::json!({ "rules": n }))
            }
            Request::Plugin { name, .. } if name == "panic" => panic!("fake handler panics"),
            Request::Plugin { name, .. } if name == "big" => {
                // A long brief stream (binary), to be cut by its client.
                let mut w = BriefWriter::new(out, BriefEncoding::Binary);
                let id = w.chain("netdev", "t", "c").map_err(|e| e.to_string())?;
                for h in 0..BIG {
                    let r = Record {
                        chain: id,
                        flags: FLAG_COUNTER,
                        handle: h,
                        packets: h * 2,
                        bytes: h * 128,
                    };
                    if w.rule(&r).is_err() {
                        self.big_dump_cut.store(true, Ordering::SeqCst);
                        return Err("client gone".into());
                    }
                }
                w.finish().map_err(|e| e.to_string())?;
                Ok(serde_json::Value::Null)
            }
            Request::Plugin { .. } | Request::PluginState => {
                Err("Error: no plugin host in the fake".into())
            }
            Request::Conntrack
            | Request::ConntrackDelete(_)
            | Request::Check { .. }
            | Request::Flows { .. } => Err("Error: no conntrack in the fake".into()),
            Request::Monitor | Request::MonitorTrace | Request::MonitorJson => {
                let mut i = 0u64;
                loop {
                    if out.closed() {
                        self.monitor_ended.store(true, Ordering::SeqCst);
                        return Ok(serde_json::Value::Null);
                    }
                    if out
                        .event(&format!("add element netdev filt blk {{ 10.1.0.{i} }}"))
                        .is_err()
                    {
                        self.monitor_ended.store(true, Ordering::SeqCst);
                        return Ok(serde_json::Value::Null);
                    }
                    i += 1;
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            Request::Stats => {
                let s = Stats {
                    drops: [("policy".to_string(), 7)].into_iter().collect(),
                    ..Stats::default()
                };
                Ok(serde_json::to_value(s).unwrap())
            }
            Request::Element(_) | Request::Reset(_) => Err("Error: not in the fake".into()),
        }
    }
}

fn start(dir: &Path) -> (Server, Arc<Fake>, PathBuf) {
    let path = dir.join("run/wasp.sock");
    let fake = Arc::new(Fake::default());
    *fake.ruleset.lock().unwrap() = wasp_ruleset::parse_str(RULESET, "ruleset.nft").unwrap();
    let server = Server::start(ServerConfig::new(&path), fake.clone()).unwrap();
    (server, fake, path)
}

/// Wait (up to 10 s) until `cond` holds; false if it never did.
fn eventually(cond: impl Fn() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

fn list(what: ListWhat) -> Request {
    Request::List(ListRequest {
        what,
        ..ListRequest::default()
    })
}

#[test]
fn socket_is_0600_and_stale_or_live_sockets_are_handled() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _fake, path) = start(dir.path());
    let md = std::fs::metadata(&path).unwrap();
    assert!(md.file_type().is_socket());
    assert_eq!(md.permissions().mode() & 0o777, 0o600);
    // The folder it created is root-only too.
    let dmd = std::fs::metadata(path.parent().unwrap()).unwrap();
    assert_eq!(dmd.permissions().mode() & 0o777, 0o700);
    // A second daemon on the same path is refused while the first answers.
    let again = Server::start(ServerConfig::new(&path), Arc::new(Fake::default()));
    assert!(matches!(again, Err(wasp_ctl::ServerError::InUse(_))));
    // The first still answers.
    let mut c = Client::connect(&path).unwrap();
    assert!(c.call_text(&list(ListWhat::Tables)).unwrap() == "table netdev filt\n");
    drop(c);
    server.shutdown();
    assert!(!path.exists(), "shutdown removes the socket");

    // A stale socket (nobody listening) is replaced.
    let stale = std::os::unix::net::UnixListener::bind(&path).unwrap();
    drop(stale);
    assert!(path.exists());
    let server = Server::start(ServerConfig::new(&path), Arc::new(Fake::default())).unwrap();
    assert!(Client::connect(&path).is_ok());
    server.shutdown();

    // A file that is not a socket is left alone.
    std::fs::write(&path, "precious").unwrap();
    let r = Server::start(ServerConfig::new(&path), Arc::new(Fake::default()));
    assert!(matches!(r, Err(wasp_ctl::ServerError::NotASocket(_))));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");
}

#[test]
fn no_daemon_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let e = Client::connect(&dir.path().join("nope.sock"))
        .err()
        .unwrap();
    assert!(matches!(e, ClientError::NoDaemon { .. }));
    assert!(e.to_string().contains("is `wasp run` running?"), "{e}");
}

#[test]
fn list_apply_and_a_failing_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, _fake, path) = start(dir.path());
    let mut c = Client::connect(&path).unwrap();
    let before = c
        .call_text(&Request::List(ListRequest {
            what: ListWhat::Ruleset,
            flags: ListFlags {
                handles: true,
                ..ListFlags::default()
            },
            ..ListRequest::default()
        }))
        .unwrap();
    assert!(before.contains("ip saddr @blk counter packets 3 bytes 180 drop # handle 3\n"));
    // A batch whose second command fails changes nothing.
    let bad = Request::Apply {
        text: "add element netdev filt blk { 10.0.0.9 }\nadd rule netdev filt nochain drop\n"
            .into(),
        name: "batch.nft".into(),
        json: false,
        echo: None,
    };
    match c.call(&bad, &mut |_| Ok(())) {
        Err(ClientError::Daemon(msg)) => assert!(msg.starts_with("batch.nft:2:"), "{msg}"),
        other => panic!("expected an error, got {other:?}"),
    }
    let list_a = Request::List(ListRequest {
        what: ListWhat::Ruleset,
        flags: ListFlags {
            handles: true,
            ..ListFlags::default()
        },
        ..ListRequest::default()
    });
    assert_eq!(c.call_text(&list_a).unwrap(), before);
    // A good one applies whole.
    let good = Request::Apply {
        text:
            "add element netdev filt blk { 10.0.0.9 }\nadd rule netdev filt in udp dport 53 drop\n"
                .into(),
        name: "batch.nft".into(),
        json: false,
        echo: None,
    };
    assert_eq!(
        c.call(&good, &mut |_| Ok(())).unwrap(),
        serde_json::Value::Null
    );
    let after = c.call_text(&list_a).unwrap();
    assert!(
        after.contains("elements = { 10.0.0.1, 10.0.0.2,\n\t\t\t     10.0.0.9 }"),
        "{after}"
    );
    assert!(after.contains("udp dport 53 drop # handle 5\n"), "{after}");
}

#[test]
fn garbage_gets_an_error_and_the_connection_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, _fake, path) = start(dir.path());
    let mut s = UnixStream::connect(&path).unwrap();
    s.write_all(b"hello\n{\"req\":\"stats\"}\n{\"v\":9,\"req\":\"stats\"}\n{\"v\":1,\"req\":\"nope\"}\n\xff\xfe\n \n{\"v\":1,\"req\":\"stats\"}\n")
        .unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut lines = Vec::new();
    for _ in 0..7 {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        lines.push(l);
    }
    let errs: Vec<Reply> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for (i, want) in [
        "bad request: expected value",
        "bad request: no protocol version",
        "unsupported protocol version 9 (this daemon speaks 1)",
        "bad request: unknown variant `nope`",
        "bad request: expected value",
        "bad request: empty line",
    ]
    .iter()
    .enumerate()
    {
        match &errs[i] {
            Reply::Error(e) => assert!(e.starts_with(want), "line {i}: {e}"),
            other => panic!("line {i}: {other:?}"),
        }
    }
    assert_eq!(
        errs[6],
        Reply::Ok(
            serde_json::json!({"ports": [], "workers": [], "drops": {"policy": 7},
            "rejects": 0, "logged": 0, "log_suppressed": 0})
        )
    );
}

#[test]
fn a_panicking_handler_answers_an_error_and_the_daemon_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, _fake, path) = start(dir.path());
    let mut c = Client::connect(&path).unwrap();
    let r = c.call(
        &Request::Plugin {
            op: PluginOp::Load,
            name: "panic".into(),
            path: None,
        },
        &mut |_| Ok(()),
    );
    match r {
        Err(ClientError::Daemon(m)) => assert_eq!(m, "internal error: fake handler panics"),
        other => panic!("{other:?}"),
    }
    // Same connection, and a new one, still served.
    assert!(c.call(&Request::Stats, &mut |_| Ok(())).is_ok());
    let mut c2 = Client::connect(&path).unwrap();
    assert!(c2.call(&Request::Stats, &mut |_| Ok(())).is_ok());
}

#[test]
fn concurrent_clients() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _fake, path) = start(dir.path());
    let want = wasp_ctl::listing::render(
        &wasp_ruleset::parse_str(RULESET, "ruleset.nft").unwrap(),
        &ListRequest::default(),
    )
    .unwrap()
    .concat();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let path = path.clone();
            let want = want.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(&path).unwrap();
                for _ in 0..50 {
                    assert_eq!(c.call_text(&list(ListWhat::Ruleset)).unwrap(), want);
                    let mut rules = 0;
                    c.call(
                        &Request::Dump {
                            mode: DumpMode::Brief,
                            encoding: BriefEncoding::Json,
                        },
                        &mut |i| {
                            if let Incoming::Record(r) = i {
                                assert_eq!(r.chain, 0);
                                rules += 1;
                            }
                            Ok(())
                        },
                    )
                    .unwrap();
                    assert_eq!(rules, 2);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(eventually(|| server.clients() == 0));
}

#[test]
fn a_client_that_leaves_mid_stream_affects_nobody() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, fake, path) = start(dir.path());
    let big = Request::Plugin {
        op: PluginOp::Load,
        name: "big".into(),
        path: None,
    };
    // Read the first frame, then hang up.
    {
        let mut c = Client::connect(&path).unwrap();
        c.send(&big).unwrap();
        let mut frames = 0;
        while frames < 1 {
            if let Incoming::Binary(b) = c.next_item().unwrap() {
                assert_eq!(b.len() % RECORD_BYTES, 0);
                let r = Record::decode(&b[RECORD_BYTES..]).unwrap();
                assert_eq!((r.handle, r.packets, r.bytes), (1, 2, 128));
                frames += 1;
            }
        }
    }
    assert!(eventually(|| fake.big_dump_cut.load(Ordering::SeqCst)));
    assert!(eventually(|| fake.active.load(Ordering::SeqCst) == 0));
    // A whole stream for another client: every record, in order.
    let mut c = Client::connect(&path).unwrap();
    let mut next = 0u64;
    c.call(&big, &mut |i| {
        if let Incoming::Binary(b) = i {
            for rec in b.chunks(RECORD_BYTES) {
                let r = Record::decode(rec).unwrap();
                assert_eq!(r.handle, next);
                assert_eq!(r.bytes, next * 128);
                next += 1;
            }
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(next, BIG);
    // Raw: a client that sends half a line and goes.
    {
        let mut s = UnixStream::connect(&path).unwrap();
        s.write_all(b"{\"v\":1,\"req\":\"sta").unwrap();
    }
    assert!(c.call(&Request::Stats, &mut |_| Ok(())).is_ok());
}

#[test]
fn monitor_streams_until_the_client_goes() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, fake, path) = start(dir.path());
    {
        let mut c = Client::connect(&path).unwrap();
        c.send(&Request::Monitor).unwrap();
        for i in 0..3 {
            match c.next_item().unwrap() {
                Incoming::Reply(Reply::Event(e)) => {
                    assert_eq!(e, format!("add element netdev filt blk {{ 10.1.0.{i} }}"));
                }
                other => panic!("{other:?}"),
            }
        }
    }
    assert!(eventually(|| fake.monitor_ended.load(Ordering::SeqCst)));
    assert!(eventually(|| fake.active.load(Ordering::SeqCst) == 0));
}

#[test]
fn shutdown_ends_streams_in_progress() {
    let dir = tempfile::tempdir().unwrap();
    let (server, fake, path) = start(dir.path());
    let mut c = Client::connect(&path).unwrap();
    c.send(&Request::Monitor).unwrap();
    assert!(matches!(
        c.next_item().unwrap(),
        Incoming::Reply(Reply::Event(_))
    ));
    server.shutdown();
    assert_eq!(fake.active.load(Ordering::SeqCst), 0);
    assert!(fake.monitor_ended.load(Ordering::SeqCst));
    // Nothing listens any more, and the client sees its stream end.
    assert!(UnixStream::connect(&path).is_err());
    loop {
        match c.next_item() {
            Ok(_) => {}
            Err(ClientError::Closed) | Err(ClientError::Io(_)) => break,
            Err(e) => panic!("{e}"),
        }
    }
}

/// Another user cannot connect: the socket is 0600 even in a folder anyone may enter.
/// Needs root (to run a client as `nobody` with runuser) and /usr/bin/python3; skipped
/// otherwise.
#[test]
fn another_user_cannot_connect() {
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    if !root || !Path::new("/usr/sbin/runuser").exists() || !Path::new("/usr/bin/python3").exists()
    {
        eprintln!("skipped: needs root, runuser and /usr/bin/python3");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().join("wasp.sock");
    let _server = Server::start(ServerConfig::new(&path), Arc::new(Fake::default())).unwrap();
    let connect = |user: &str| {
        let script = format!(
            "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ntry:\n s.connect({:?})\n print('connected')\nexcept PermissionError:\n print('denied')\n",
            path.to_str().unwrap()
        );
        let out = std::process::Command::new("/usr/sbin/runuser")
            .args(["-u", user, "--", "/usr/bin/python3", "-c", &script])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(connect("nobody"), "denied");
    assert_eq!(connect("root"), "connected");
}

/// A client that asks for a long stream and stops reading blocks only its own handler, and
/// only for the write timeout: the others are answered meanwhile, then it is dropped.
#[test]
fn a_client_that_stops_reading_is_dropped_after_the_write_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wasp.sock");
    let fake = Arc::new(Fake::default());
    *fake.ruleset.lock().unwrap() = wasp_ruleset::parse_str(RULESET, "ruleset.nft").unwrap();
    let mut cfg = ServerConfig::new(&path);
    cfg.write_timeout = Duration::from_millis(300);
    let _server = Server::start(cfg, fake.clone()).unwrap();
    let mut stuck = Client::connect(&path).unwrap();
    stuck
        .send(&Request::Plugin {
            op: PluginOp::Load,
            name: "big".into(),
            path: None,
        })
        .unwrap();
    // Its handler is writing (the socket buffer fills); others are served.
    assert!(eventually(|| fake.active.load(Ordering::SeqCst) == 1));
    let mut c = Client::connect(&path).unwrap();
    for _ in 0..10 {
        assert!(c.call(&Request::Stats, &mut |_| Ok(())).is_ok());
    }
    // The stuck client's writes time out: its handler ends.
    assert!(eventually(|| fake.big_dump_cut.load(Ordering::SeqCst)));
    assert!(eventually(|| fake.active.load(Ordering::SeqCst) == 0));
    drop(stuck);
}

/// A request line longer than the limit: an error, and the connection is closed (the server
/// never holds more than the limit for a client).
#[test]
fn an_endless_line_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, _fake, path) = start(dir.path());
    let s = UnixStream::connect(&path).unwrap();
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..=(wasp_ctl::proto::MAX_REQUEST_BYTES >> 20) {
            if w.write_all(&chunk).is_err() {
                return;
            }
        }
    });
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert_eq!(
        serde_json::from_str::<Reply>(&line).unwrap(),
        Reply::Error(format!(
            "bad request: longer than {} bytes",
            wasp_ctl::proto::MAX_REQUEST_BYTES
        ))
    );
    line.clear();
    // Closed: end of stream, or a reset (the server closes with the client's bytes unread).
    match r.read_line(&mut line) {
        Ok(n) => assert_eq!(n, 0, "closed"),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset),
    }
    writer.join().unwrap();
}

/// Past `max_clients`, the client idle the longest is closed to make room, so idle
/// connections never lock the administrator out; when every client is inside a request, a new
/// one gets an error; a slot that frees is reused.
#[test]
fn too_many_clients() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wasp.sock");
    let mut cfg = ServerConfig::new(&path);
    cfg.max_clients = 2;
    let server = Server::start(cfg, Arc::new(Fake::default())).unwrap();
    let mut a = Client::connect(&path).unwrap();
    let mut b = Client::connect(&path).unwrap();
    assert!(a.call(&Request::Stats, &mut |_| Ok(())).is_ok());
    std::thread::sleep(Duration::from_millis(20));
    assert!(b.call(&Request::Stats, &mut |_| Ok(())).is_ok());
    // Both idle: a, idle the longest, makes room for c.
    let mut c = Client::connect(&path).unwrap();
    assert!(c.call(&Request::Stats, &mut |_| Ok(())).is_ok());
    assert!(
        a.call(&Request::Stats, &mut |_| Ok(())).is_err(),
        "a was closed"
    );
    assert!(b.call(&Request::Stats, &mut |_| Ok(())).is_ok());
    // Both slots inside a request (monitors): no one to close, the newcomer is refused.
    drop((b, c));
    assert!(eventually(|| server.clients() == 0));
    let mut m1 = Client::connect(&path).unwrap();
    let mut m2 = Client::connect(&path).unwrap();
    for m in [&mut m1, &mut m2] {
        m.send(&Request::Monitor).unwrap();
        assert!(matches!(
            m.next_item().unwrap(),
            Incoming::Reply(Reply::Event(_))
        ));
    }
    let mut d = Client::connect(&path).unwrap();
    match d.call(&Request::Stats, &mut |_| Ok(())) {
        Err(ClientError::Daemon(m)) => assert_eq!(m, "too many clients (at most 2)"),
        other => panic!("{other:?}"),
    }
    drop(m1);
    assert!(eventually(|| server.clients() == 1));
    let mut e = Client::connect(&path).unwrap();
    assert!(e.call(&Request::Stats, &mut |_| Ok(())).is_ok());
}

/// A client that sends no request for the idle timeout is told so and closed.
#[test]
fn idle_clients_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wasp.sock");
    let mut cfg = ServerConfig::new(&path);
    cfg.idle_timeout = Duration::from_millis(200);
    let server = Server::start(cfg, Arc::new(Fake::default())).unwrap();
    let s = std::os::unix::net::UnixStream::connect(&path).unwrap();
    let mut r = BufReader::new(&s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert_eq!(
        serde_json::from_str::<Reply>(&line).unwrap(),
        Reply::Error("closing: no request for 0.2 s".into())
    );
    assert!(eventually(|| server.clients() == 0));
}
