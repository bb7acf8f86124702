//! The control socket's server loop: a Unix socket (mode 0600), one thread per client, each
//! request handed to the daemon's [`Handler`] with a [`ReplySink`] that streams reply lines to
//! the client through a fixed-size buffer.
//!
//! What a client can and cannot do to the daemon:
//! - a line that is not a request (not JSON, unknown request, wrong version) gets an
//!   `{"error":...}` reply and the connection stays open for the next request;
//! - a request line longer than [`MAX_REQUEST_BYTES`] gets an error and the connection is
//!   closed (the server never holds more than that per client);
//! - a client that disconnects mid-stream makes the sink's writes fail: the handler's next
//!   write returns an error, the handler returns, the thread ends;
//! - a client that stops reading blocks only its own thread, for at most the write timeout
//!   ([`ServerConfig::write_timeout`]), after which its connection is dropped;
//! - a handler that panics answers `{"error":"internal error: ..."}` and the daemon goes on;
//! - at most [`ServerConfig::max_clients`] clients at once: when all slots are taken, the
//!   client idle the longest (connected, no request running) is closed to make room, so idle
//!   connections never lock the administrator out; when every client is inside a request, one
//!   more gets an error and is closed;
//! - a client that sends no request for [`ServerConfig::idle_timeout`] is closed (with an
//!   error line saying so).

use std::collections::HashMap;
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::proto::{self, MAX_REQUEST_BYTES, Reply, Request};

/// What the daemon implements: answer one request, streaming reply lines to `out`.
///
/// The server writes the final line itself: `{"ok": VALUE}` when `handle` returns
/// `Ok(VALUE)` (use `serde_json::Value::Null` when there is nothing to say), `{"error": MSG}`
/// when it returns `Err(MSG)`. `MSG` is shown to the user as is (a `wasp_ruleset::Error`'s
/// text keeps its file:line:col and caret lines). `PROTOCOL.md` lists, per request, the lines
/// a handler is expected to send and the `ok` value.
///
/// A handler runs on the client's thread; several run at once (one per client), so the
/// daemon's state is shared (`Sync`). A long stream (`monitor`) must stop when
/// [`ReplySink::closed`] says so or a write fails; a handler waiting for events should check
/// `closed()` at least every 100 ms so that [`Server::shutdown`] does not wait on it.
pub trait Handler: Send + Sync + 'static {
    /// Answer `req`. Lines go to `out`; the result becomes the final line.
    ///
    /// # Errors
    /// The message of the `{"error":...}` line, as nft would print it.
    fn handle(&self, req: Request, out: &mut dyn ReplySink) -> Result<serde_json::Value, String>;
}

/// Where a handler writes its reply lines. Lines are buffered (at most
/// [`SINK_BUFFER_BYTES`]) and written to the client when the buffer fills, on
/// [`ReplySink::flush`], and at the end of the request: memory stays bounded however long the
/// stream is.
pub trait ReplySink {
    /// Send one reply line.
    ///
    /// # Errors
    /// The client has gone (or did not read for the write timeout).
    fn send(&mut self, reply: &Reply) -> io::Result<()>;

    /// Send one line that is already JSON (`json` holds no newline; the sink adds it). For
    /// hot loops that format their lines by hand (brief dumps).
    ///
    /// # Errors
    /// As [`ReplySink::send`].
    fn send_json_line(&mut self, json: &[u8]) -> io::Result<()>;

    /// Send a binary frame: the line `{"bin":N}` followed by the `N` bytes of `frame`.
    ///
    /// # Errors
    /// As [`ReplySink::send`].
    fn send_binary(&mut self, frame: &[u8]) -> io::Result<()>;

    /// Write what is buffered to the client now (for events, which should not wait).
    ///
    /// # Errors
    /// As [`ReplySink::send`].
    fn flush(&mut self) -> io::Result<()>;

    /// `true` once the client has disconnected or the server is shutting down.
    fn closed(&mut self) -> bool;
}

/// Convenience methods over any sink.
pub trait ReplySinkExt: ReplySink {
    /// Send `text` as one [`Reply::Text`] piece.
    ///
    /// # Errors
    /// As [`ReplySink::send`].
    fn text(&mut self, text: &str) -> io::Result<()> {
        self.send(&Reply::Text(text.to_string()))
    }

    /// Send one [`Reply::Event`] and flush it.
    ///
    /// # Errors
    /// As [`ReplySink::send`].
    fn event(&mut self, text: &str) -> io::Result<()> {
        self.send(&Reply::Event(text.to_string()))?;
        self.flush()
    }
}

impl<T: ReplySink + ?Sized> ReplySinkExt for T {}

/// Bytes a sink buffers before it writes to the client.
pub const SINK_BUFFER_BYTES: usize = 256 << 10;

/// The default socket path (`wasp run --socket` and `wasp ctl --socket` change it).
pub const DEFAULT_SOCKET: &str = "/run/wasp/wasp.sock";

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The socket's path. Its folder is created (mode 0700) when missing.
    pub path: PathBuf,
    /// Most clients served at once.
    pub max_clients: usize,
    /// How long a write to a client may block before the client is dropped.
    pub write_timeout: Duration,
    /// How long a client may stay connected without a request running before it is closed.
    pub idle_timeout: Duration,
}

impl ServerConfig {
    /// Defaults for `path`: 64 clients, 10 s write timeout, 60 s idle timeout.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        ServerConfig {
            path: path.into(),
            max_clients: 64,
            write_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Why the server cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Another daemon answers on the socket path.
    #[error("{0}: a wasp daemon is already running there (another `wasp run`?)")]
    InUse(PathBuf),
    /// Something that is not a socket is at the path: it is left alone.
    #[error("{0}: exists and is not a socket (refusing to remove it)")]
    NotASocket(PathBuf),
    /// Creating, binding or chmod-ing failed.
    #[error("{path}: {source}")]
    Io {
        /// The socket path.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
}

/// A running control socket server. Dropping it shuts it down (as [`Server::shutdown`]).
pub struct Server {
    path: PathBuf,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

/// State the accept thread and the client threads share.
struct Shared {
    stop: AtomicBool,
    /// Open client connections (a clone of each, to shut them down), by client number.
    clients: Mutex<HashMap<u64, UnixStream>>,
    /// Client threads still running, by client number.
    threads: Mutex<HashMap<u64, JoinHandle<()>>>,
    /// Clients waiting for a request (not inside one), with when they started waiting.
    idle: Mutex<HashMap<u64, std::time::Instant>>,
    next_id: AtomicU64,
}

impl Server {
    /// Bind the socket (mode 0600) and start serving `handler`.
    ///
    /// A socket file at the path where nothing answers (left by a daemon that died) is
    /// removed; one where a daemon answers is [`ServerError::InUse`]; a file that is not a
    /// socket is [`ServerError::NotASocket`].
    ///
    /// # Errors
    /// [`ServerError`].
    pub fn start(config: ServerConfig, handler: Arc<dyn Handler>) -> Result<Server, ServerError> {
        let listener = bind(&config.path)?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            clients: Mutex::new(HashMap::new()),
            threads: Mutex::new(HashMap::new()),
            idle: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
        });
        let s = Arc::clone(&shared);
        let cfg = config.clone();
        let accept = std::thread::Builder::new()
            .name("ctl-accept".into())
            .spawn(move || accept_loop(&listener, &s, &cfg, &handler))
            .map_err(|source| ServerError::Io {
                path: config.path.clone(),
                source,
            })?;
        Ok(Server {
            path: config.path,
            shared,
            accept: Some(accept),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Clients connected now.
    pub fn clients(&self) -> usize {
        lock(&self.shared.clients).len()
    }

    /// Stop accepting, close every client connection (streams in progress end: their
    /// handlers see write errors and `closed()`), wait for the threads, remove the socket.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept thread.
        let _ = UnixStream::connect(&self.path);
        let _ = accept.join();
        for c in lock(&self.shared.clients).values() {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        let threads: Vec<JoinHandle<()>> =
            lock(&self.shared.threads).drain().map(|(_, t)| t).collect();
        for t in threads {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Lock a mutex, ignoring poisoning (the data are connection lists that stay valid).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn bind(path: &Path) -> Result<UnixListener, ServerError> {
    let io_err = |source| ServerError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
        && !dir.exists()
    {
        std::fs::create_dir_all(dir).map_err(io_err)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io_err)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(md) => {
            if !md.file_type().is_socket() {
                return Err(ServerError::NotASocket(path.to_path_buf()));
            }
            if UnixStream::connect(path).is_ok() {
                return Err(ServerError::InUse(path.to_path_buf()));
            }
            // Stale: nobody answers.
            std::fs::remove_file(path).map_err(io_err)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(e)),
    }
    // Bound under a temporary name, made root-only, then renamed into place: the socket is
    // never reachable at `path` with wider permissions (nor seen there before it is 0600).
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp).map_err(io_err)?;
    let placed = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_err(e));
    }
    Ok(listener)
}

fn accept_loop(
    listener: &UnixListener,
    shared: &Arc<Shared>,
    cfg: &ServerConfig,
    handler: &Arc<dyn Handler>,
) {
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = conn else {
            continue;
        };
        // Reap finished threads.
        {
            let clients = lock(&shared.clients);
            lock(&shared.threads).retain(|id, _| clients.contains_key(id));
        }
        if lock(&shared.clients).len() >= cfg.max_clients && !evict_idle(shared) {
            let mut s = &stream;
            let _ = s.write_all(
                proto::encode_reply(&Reply::Error(format!(
                    "too many clients (at most {})",
                    cfg.max_clients
                )))
                .as_bytes(),
            );
            continue;
        }
        let _ = stream.set_write_timeout(Some(cfg.write_timeout));
        let _ = stream.set_read_timeout(Some(cfg.idle_timeout.max(Duration::from_millis(1))));
        let Ok(clone) = stream.try_clone() else {
            continue;
        };
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        lock(&shared.clients).insert(id, clone);
        lock(&shared.idle).insert(id, std::time::Instant::now());
        let s = Arc::clone(shared);
        let h = Arc::clone(handler);
        let idle = cfg.idle_timeout;
        let spawned = std::thread::Builder::new()
            .name(format!("ctl-client-{id}"))
            .spawn(move || {
                serve_client(&stream, id, idle, &s, &*h);
                lock(&s.idle).remove(&id);
                lock(&s.clients).remove(&id);
            });
        match spawned {
            Ok(t) => {
                lock(&shared.threads).insert(id, t);
            }
            Err(_) => {
                lock(&shared.idle).remove(&id);
                lock(&shared.clients).remove(&id);
            }
        }
    }
}

/// Close the client idle the longest to make room for a new one; `false` when every client is
/// inside a request.
fn evict_idle(shared: &Shared) -> bool {
    let oldest = lock(&shared.idle)
        .iter()
        .min_by_key(|(_, since)| **since)
        .map(|(id, _)| *id);
    let Some(id) = oldest else {
        return false;
    };
    lock(&shared.idle).remove(&id);
    if let Some(c) = lock(&shared.clients).remove(&id) {
        let mut s = &c;
        let _ = s.write_all(
            proto::encode_reply(&Reply::Error(
                "closing: the most idle client makes room for a new one".into(),
            ))
            .as_bytes(),
        );
        let _ = c.shutdown(std::net::Shutdown::Both);
    }
    true
}

/// Reads request lines from a client, keeping what a sink's `closed()` probe read ahead.
struct LineReader<'a> {
    stream: &'a UnixStream,
    buf: Vec<u8>,
    /// Bytes of `buf` already handed out.
    start: usize,
    /// The client closed its side.
    eof: bool,
}

enum LineError {
    TooLong,
    /// No request within the read timeout (the idle timeout).
    Idle,
    Io,
}

impl LineReader<'_> {
    /// The next line without its newline, `Ok(None)` at the end of the stream.
    fn line(&mut self) -> Result<Option<Vec<u8>>, LineError> {
        let mut scanned = self.start;
        loop {
            if let Some(pos) = self.buf[scanned..].iter().position(|&b| b == b'\n') {
                let end = scanned + pos;
                let line = self.buf[self.start..end].to_vec();
                self.start = end + 1;
                if self.start == self.buf.len() {
                    self.buf.clear();
                    self.start = 0;
                }
                return Ok(Some(line));
            }
            scanned = self.buf.len();
            if self.buf.len() - self.start >= MAX_REQUEST_BYTES {
                return Err(LineError::TooLong);
            }
            if self.eof {
                return Ok(None);
            }
            if self.start > 0 {
                self.buf.drain(..self.start);
                scanned -= self.start;
                self.start = 0;
            }
            let mut chunk = [0u8; 16 << 10];
            let mut s = self.stream;
            match s.read(&mut chunk) {
                Ok(0) => self.eof = true,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(LineError::Idle);
                }
                Err(_) => return Err(LineError::Io),
            }
        }
    }

    /// Read without blocking what the client sent (kept for later lines); `true` when the
    /// client has closed its side or the connection failed.
    fn probe_closed(&mut self) -> bool {
        if self.eof {
            return true;
        }
        if self.buf.len() - self.start >= MAX_REQUEST_BYTES {
            return false;
        }
        if self.stream.set_nonblocking(true).is_err() {
            return true;
        }
        let mut chunk = [0u8; 4096];
        let mut s = self.stream;
        let closed = match s.read(&mut chunk) {
            Ok(0) => {
                self.eof = true;
                true
            }
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                false
            }
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ),
        };
        let _ = self.stream.set_nonblocking(false);
        closed
    }
}

/// The sink of one client's request.
struct ClientSink<'a, 'r> {
    out: BufWriter<&'a UnixStream>,
    reader: &'r mut LineReader<'a>,
    stop: &'a AtomicBool,
    /// A write failed: every later one fails too.
    broken: bool,
}

impl ClientSink<'_, '_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.broken {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "client gone"));
        }
        let r = self.out.write_all(bytes);
        if r.is_err() {
            self.broken = true;
        }
        r
    }
}

impl ReplySink for ClientSink<'_, '_> {
    fn send(&mut self, reply: &Reply) -> io::Result<()> {
        self.write(proto::encode_reply(reply).as_bytes())
    }

    fn send_json_line(&mut self, json: &[u8]) -> io::Result<()> {
        self.write(json)?;
        self.write(b"\n")
    }

    fn send_binary(&mut self, frame: &[u8]) -> io::Result<()> {
        self.write(proto::encode_reply(&Reply::Bin(frame.len() as u64)).as_bytes())?;
        self.write(frame)
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.broken {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "client gone"));
        }
        let r = self.out.flush();
        if r.is_err() {
            self.broken = true;
        }
        r
    }

    fn closed(&mut self) -> bool {
        self.broken || self.stop.load(Ordering::SeqCst) || self.reader.probe_closed()
    }
}

fn serve_client(
    stream: &UnixStream,
    id: u64,
    idle: Duration,
    shared: &Shared,
    handler: &dyn Handler,
) {
    let mut reader = LineReader {
        stream,
        buf: Vec::new(),
        start: 0,
        eof: false,
    };
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        lock(&shared.idle)
            .entry(id)
            .or_insert_with(std::time::Instant::now);
        let line = reader.line();
        lock(&shared.idle).remove(&id);
        let line = match line {
            Ok(Some(l)) => l,
            Ok(None) | Err(LineError::Io) => return,
            Err(LineError::Idle) => {
                let mut s = stream;
                let _ = s.write_all(
                    proto::encode_reply(&Reply::Error(format!(
                        "closing: no request for {} s",
                        idle.as_secs_f64()
                    )))
                    .as_bytes(),
                );
                return;
            }
            Err(LineError::TooLong) => {
                let mut s = stream;
                let _ = s.write_all(
                    proto::encode_reply(&Reply::Error(format!(
                        "bad request: longer than {MAX_REQUEST_BYTES} bytes"
                    )))
                    .as_bytes(),
                );
                return;
            }
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            // A client that sent nothing but a newline waits for an answer: it gets one.
            let mut s = stream;
            let reply =
                Reply::Error("bad request: empty line (a request is one JSON object)".into());
            if s.write_all(proto::encode_reply(&reply).as_bytes()).is_err() {
                return;
            }
            continue;
        }
        let mut sink = ClientSink {
            out: BufWriter::with_capacity(SINK_BUFFER_BYTES, stream),
            reader: &mut reader,
            stop: &shared.stop,
            broken: false,
        };
        let result = match proto::decode_request(&line) {
            Err(e) => Err(e.to_string()),
            Ok(req) => {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    handler.handle(req, &mut sink)
                }));
                r.unwrap_or_else(|p| {
                    let what = p
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    Err(format!("internal error: {what}"))
                })
            }
        };
        let last = match result {
            Ok(v) => Reply::Ok(v),
            Err(e) => Reply::Error(e),
        };
        if sink.send(&last).is_err() || sink.flush().is_err() {
            return;
        }
    }
}
