//! WASI 0.2 for guests that import it (JavaScript and Python plugins: componentize-js and
//! componentize-py embed a runtime that calls WASI as it starts), behind the cargo feature
//! `wasi` (wasmtime-wasi turns on wasmtime's `async` feature: a rebuild of wasmtime that Rust
//! and C plugins do not need; research/plugins.md).
//!
//! What a guest gets: the clocks and random numbers; no preopened directory (no file system),
//! no environment variables, no arguments, no network (TCP, UDP and name look-ups denied, as
//! `WasiCtxBuilder` has them by default and set again here), stdin closed, and stdout/stderr
//! as lines in the host's log (`tracing`, info and warn, with the plugin's name), under the
//! instance's log rate limit (`crate::loglimit`). The context is made on the guest's first
//! WASI call, so plugins that never call WASI pay nothing; plugins that import no WASI are
//! linked without it (`crate::host::link_wasi_or_traps`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::bindings::StoreState;
use crate::loglimit::LogLimit;

/// A guest's WASI context and the resources (streams, pollables) it holds.
pub(crate) struct WasiState {
    ctx: WasiCtx,
    table: ResourceTable,
}

impl WasiState {
    fn new(plugin: Arc<str>, limit: LogLimit) -> WasiState {
        let mut b = WasiCtxBuilder::new();
        b.stdout(LogStream {
            plugin: plugin.clone(),
            stderr: false,
            limit: limit.clone(),
        })
        .stderr(LogStream {
            plugin,
            stderr: true,
            limit,
        })
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
        WasiState {
            ctx: b.build(),
            table: ResourceTable::new(),
        }
    }
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let plugin = self.plugin.clone();
        let limit = self.log_limit.clone();
        let w = self
            .wasi
            .get_or_insert_with(|| WasiState::new(plugin, limit));
        WasiCtxView {
            ctx: &mut w.ctx,
            table: &mut w.table,
        }
    }
}

/// Define the WASI 0.2 imports (synchronous: the host calls plugins from its workers).
pub(crate) fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)
}

/// A guest's stdout or stderr: each line goes to the host's log.
struct LogStream {
    plugin: Arc<str>,
    stderr: bool,
    limit: LogLimit,
}

impl IsTerminal for LogStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogStream {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(LogWriter {
            plugin: self.plugin.clone(),
            stderr: self.stderr,
            limit: self.limit.clone(),
            line: Vec::new(),
        })
    }
}

/// Longest line kept before it is logged as is (a guest that never writes a newline).
const MAX_LINE: usize = 4096;

/// Collects bytes into lines and logs each.
struct LogWriter {
    plugin: Arc<str>,
    stderr: bool,
    limit: LogLimit,
    line: Vec<u8>,
}

impl LogWriter {
    fn emit(&mut self) {
        let text = String::from_utf8_lossy(&self.line);
        let text = text.trim_end_matches(['\n', '\r']);
        let plugin = &*self.plugin;
        let stderr = self.stderr;
        self.limit.log(plugin, || {
            if stderr {
                tracing::warn!(plugin, "stderr: {text}");
            } else {
                tracing::info!(plugin, "stdout: {text}");
            }
        });
        self.line.clear();
    }

    fn write_bytes(&mut self, mut buf: &[u8]) {
        while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
            self.line.extend_from_slice(&buf[..nl]);
            self.emit();
            buf = &buf[nl + 1..];
        }
        self.line.extend_from_slice(buf);
        if self.line.len() >= MAX_LINE {
            self.emit();
        }
    }
}

impl tokio::io::AsyncWrite for LogWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.get_mut().write_bytes(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let w = self.get_mut();
        if !w.line.is_empty() {
            w.emit();
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_and_kept_until_complete() {
        let mut w = LogWriter {
            plugin: "py".into(),
            stderr: false,
            limit: LogLimit::default(),
            line: Vec::new(),
        };
        w.write_bytes(b"one\ntw");
        assert_eq!(w.line, b"tw");
        w.write_bytes(b"o\n");
        assert!(w.line.is_empty());
        w.write_bytes(&[b'x'; MAX_LINE]);
        assert!(w.line.is_empty(), "a long line is logged as is");
    }
}
