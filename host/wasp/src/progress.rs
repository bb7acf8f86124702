//! A progress bar on stderr for long replays: drawn only when stderr is a terminal and only
//! once the run has taken more than a second, so short runs and pipes see nothing.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long a run goes before the bar appears.
pub const SHOW_AFTER: Duration = Duration::from_secs(1);

/// Progress over the input bytes of a run.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    shown: bool,
}

impl Progress {
    /// A progress reporter that never draws (tests, `--json` pipelines).
    pub fn hidden() -> Self {
        Progress {
            bar: None,
            started: Instant::now(),
            shown: false,
        }
    }

    /// A bar on stderr when stderr is a terminal; hidden otherwise.
    pub fn stderr() -> Self {
        let mut p = Progress::hidden();
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
            bar.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{wide_bar}] {bytes}/{total_bytes} ({eta})",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            p.bar = Some(bar);
        }
        p
    }

    /// The run starts: `total_bytes` of input to read.
    pub fn start(&mut self, total_bytes: u64) {
        self.started = Instant::now();
        if let Some(bar) = &self.bar {
            bar.set_length(total_bytes);
        }
    }

    /// `bytes` more of the input were processed.
    pub fn advance(&mut self, bytes: u64) {
        let Some(bar) = &self.bar else { return };
        bar.inc(bytes);
        if !self.shown && self.started.elapsed() > SHOW_AFTER {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown = true;
        }
    }

    /// The run is over: remove the bar.
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
