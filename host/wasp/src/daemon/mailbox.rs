//! Jobs the control side hands to a worker, run on the worker at its next vector boundary:
//! installing a new ruleset, reading or resetting counters, listing plugin state. The worker
//! owns its engine and plugin instances, so whatever touches them runs there; the worker checks
//! one atomic flag per loop and takes the lock only when a job is waiting. Posting a job wakes
//! the worker when it waits for frames ([`Mailbox::set_waker`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::worker::WorkerCtx;

/// A job for a worker.
pub type Job = Box<dyn FnOnce(&mut WorkerCtx) + Send>;

/// One worker's queue of jobs.
#[derive(Default)]
pub struct Mailbox {
    pending: AtomicBool,
    jobs: Mutex<Vec<Job>>,
    /// Ends the worker's wait for frames.
    waker: std::sync::OnceLock<wasp_io::Waker>,
}

impl std::fmt::Debug for Mailbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailbox")
            .field("pending", &self.pending.load(Ordering::Relaxed))
            .finish()
    }
}

impl Mailbox {
    /// Queue `job`, and wake the worker if it waits for frames.
    pub fn post(&self, job: Job) {
        self.lock().push(job);
        self.pending.store(true, Ordering::Release);
        if let Some(w) = self.waker.get() {
            w.wake();
        }
    }

    /// Wake the worker's port group with `w` whenever a job is posted (the worker sets it on
    /// its ports; once).
    pub fn set_waker(&self, w: wasp_io::Waker) {
        let _ = self.waker.set(w);
    }

    /// `true` when a job is waiting (one relaxed load).
    pub fn pending(&self) -> bool {
        self.pending.load(Ordering::Relaxed)
    }

    /// Run every queued job on `ctx` (the worker calls this between vectors).
    pub fn serve(&self, ctx: &mut WorkerCtx) {
        if !self.pending.load(Ordering::Relaxed) || !self.pending.swap(false, Ordering::Acquire) {
            return;
        }
        let jobs = std::mem::take(&mut *self.lock());
        for job in jobs {
            job(ctx);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Job>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Run `f` on every worker (at its next vector boundary) and collect the answers in worker
/// order, waiting at most `timeout` for each.
///
/// # Errors
/// The index of the first worker that did not answer in time (stuck in a plugin call, or
/// gone).
pub fn ask_all<R, F>(boxes: &[Arc<Mailbox>], timeout: Duration, f: F) -> Result<Vec<R>, usize>
where
    R: Send + 'static,
    F: Fn(&mut WorkerCtx) -> R + Send + Sync + 'static,
{
    let f = Arc::new(f);
    let rxs: Vec<mpsc::Receiver<R>> = boxes
        .iter()
        .map(|b| {
            let (tx, rx) = mpsc::channel();
            let f = f.clone();
            b.post(Box::new(move |ctx| {
                let _ = tx.send(f(ctx));
            }));
            rx
        })
        .collect();
    let deadline = std::time::Instant::now() + timeout;
    rxs.into_iter()
        .enumerate()
        .map(|(i, rx)| {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            rx.recv_timeout(left).map_err(|_| i)
        })
        .collect()
}
