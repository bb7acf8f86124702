//! The client side of the control socket: connect, send a request, read its replies.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use crate::dump::Record;
use crate::proto::{self, Reply, Request};

/// Why talking to the daemon failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing listens at the socket path.
    #[error(
        "cannot connect to the wasp daemon at {path}: {source} (is `wasp run` running? its socket is set with --socket)"
    )]
    NoDaemon {
        /// The socket path.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// The connection failed while talking.
    #[error("control socket: {0}")]
    Io(#[from] io::Error),
    /// The daemon sent something that is not a reply of this protocol.
    #[error("control socket: unexpected reply from the daemon: {0}")]
    Protocol(String),
    /// The daemon closed the connection before the final line.
    #[error("control socket: the daemon closed the connection before answering")]
    Closed,
    /// The daemon answered with an error (the message as nft would print it).
    #[error("{0}")]
    Daemon(String),
}

/// One item of a reply stream.
#[derive(Debug)]
pub enum Incoming<'a> {
    /// A reply line (the final `Ok`/`Error` lines included).
    Reply(Reply),
    /// A brief-dump record sent as a JSON line.
    Record(Record),
    /// A binary frame (brief dump records, [`crate::dump::RECORD_BYTES`] bytes each).
    Binary(&'a [u8]),
}

/// A connection to the daemon. Requests are answered in order; one at a time.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    line: Vec<u8>,
    frame: Vec<u8>,
}

/// Largest binary frame a client accepts, in bytes.
const MAX_FRAME_BYTES: u64 = 16 << 20;

impl Client {
    /// Connect to the daemon's socket at `path`.
    ///
    /// # Errors
    /// [`ClientError::NoDaemon`] when nothing answers there.
    pub fn connect(path: &Path) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(path).map_err(|source| ClientError::NoDaemon {
            path: path.to_path_buf(),
            source,
        })?;
        let writer = stream.try_clone()?;
        Ok(Client {
            reader: BufReader::with_capacity(256 << 10, stream),
            writer,
            line: Vec::with_capacity(256),
            frame: Vec::new(),
        })
    }

    /// Send one request.
    ///
    /// # Errors
    /// The connection failed.
    pub fn send(&mut self, req: &Request) -> Result<(), ClientError> {
        self.writer
            .write_all(proto::encode_request(req).as_bytes())?;
        Ok(())
    }

    /// Read the next item of the reply stream.
    ///
    /// # Errors
    /// [`ClientError::Closed`] at the end of the stream, [`ClientError::Protocol`] for a line
    /// that is not a reply, [`ClientError::Io`].
    pub fn next_item(&mut self) -> Result<Incoming<'_>, ClientError> {
        self.line.clear();
        let n = self.reader.read_until(b'\n', &mut self.line)?;
        if n == 0 {
            return Err(ClientError::Closed);
        }
        if self.line.last() == Some(&b'\n') {
            self.line.pop();
        }
        if self.line.first() == Some(&b'[') {
            return Record::parse_json(&self.line)
                .map(Incoming::Record)
                .ok_or_else(|| {
                    ClientError::Protocol(String::from_utf8_lossy(&self.line).into_owned())
                });
        }
        let reply: Reply = serde_json::from_slice(&self.line)
            .map_err(|_| ClientError::Protocol(String::from_utf8_lossy(&self.line).into_owned()))?;
        if let Reply::Bin(len) = reply {
            if len > MAX_FRAME_BYTES {
                return Err(ClientError::Protocol(format!(
                    "binary frame of {len} bytes"
                )));
            }
            self.frame.resize(len as usize, 0);
            self.reader.read_exact(&mut self.frame).map_err(|e| {
                if e.kind() == io::ErrorKind::UnexpectedEof {
                    ClientError::Closed
                } else {
                    ClientError::Io(e)
                }
            })?;
            return Ok(Incoming::Binary(&self.frame));
        }
        Ok(Incoming::Reply(reply))
    }

    /// Send `req` and hand every item before the final line to `each`; returns the value of
    /// the final `{"ok":...}` line.
    ///
    /// # Errors
    /// [`ClientError::Daemon`] for an `{"error":...}` line; the errors of
    /// [`Client::next_item`]; an error `each` returns (as [`ClientError::Io`]).
    pub fn call(
        &mut self,
        req: &Request,
        each: &mut dyn FnMut(Incoming<'_>) -> io::Result<()>,
    ) -> Result<serde_json::Value, ClientError> {
        if let Err(e) = self.send(req) {
            // The daemon may have said why before it closed (too many clients).
            if let Ok(Incoming::Reply(Reply::Error(m))) = self.next_item() {
                return Err(ClientError::Daemon(m));
            }
            return Err(e);
        }
        loop {
            match self.next_item()? {
                Incoming::Reply(Reply::Ok(v)) => return Ok(v),
                Incoming::Reply(Reply::Error(e)) => return Err(ClientError::Daemon(e)),
                item => each(item)?,
            }
        }
    }

    /// Send `req` and collect its text pieces ([`Reply::Text`]) into one string.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub fn call_text(&mut self, req: &Request) -> Result<String, ClientError> {
        let mut out = String::new();
        self.call(req, &mut |item| {
            if let Incoming::Reply(Reply::Text(t)) = item {
                out.push_str(&t);
            }
            Ok(())
        })?;
        Ok(out)
    }
}
