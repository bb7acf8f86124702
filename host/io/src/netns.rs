//! Running code inside another network namespace.

use std::path::PathBuf;

use crate::IoError;

/// Runs `f` on a short-lived thread moved into network namespace `ns` (a name under
/// `/run/netns`, as `ip netns add` creates, or a path such as `/proc/PID/ns/net`) and returns
/// its result; the calling thread stays where it is.
///
/// Sockets and rings keep the namespace they were created in, so a group opened inside `f` can
/// be returned and used from the caller's thread (the io_uring groups bind to their first
/// user's thread at the first `poll`/`flush`, not at `open`).
pub fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> Result<T, IoError> {
    let path = if ns.contains('/') {
        PathBuf::from(ns)
    } else {
        PathBuf::from("/run/netns").join(ns)
    };
    let file = std::fs::File::open(&path).map_err(|e| IoError::Device {
        dev: path.display().to_string(),
        what: "open network namespace",
        source: e,
    })?;
    std::thread::scope(|s| {
        s.spawn(move || {
            crate::sys::enter_netns(&file).map_err(|e| IoError::Device {
                dev: path.display().to_string(),
                what: "setns",
                source: e,
            })?;
            Ok(f())
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}
