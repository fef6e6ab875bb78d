//! Progress of `ors eval` on stderr: a bar when stderr is a terminal, a plain line every few
//! seconds when it is not (a log file, CI).

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use ors_client::Episode;

/// How often the plain lines come.
const EVERY: Duration = Duration::from_secs(5);

/// Running figures of the episodes finished so far.
#[derive(Default)]
struct Tally {
    done: usize,
    reward: f64,
    successes: usize,
    errors: usize,
}

/// The progress display.
pub struct Progress {
    bar: Option<ProgressBar>,
    total: usize,
    started: Instant,
    tally: Mutex<(Tally, Instant)>,
}

impl Progress {
    /// Progress over `total` episodes.
    pub fn new(total: usize) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            // A bar drawn on stderr.
            let bar = ProgressBar::new(total as u64);
            let template = "{bar:30} {pos}/{len} {msg} {per_sec} ETA {eta}";
            let style = ProgressStyle::with_template(template);
            bar.set_style(style.unwrap_or_else(|_| ProgressStyle::default_bar()));
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Self {
            bar,
            total,
            started: Instant::now(),
            tally: Mutex::new((Tally::default(), Instant::now())),
        }
    }

    /// One more episode ended.
    pub fn episode(&self, e: &Episode) {
        let Ok(mut guard) = self.tally.lock() else {
            return;
        };
        let (tally, last) = &mut *guard;
        tally.done += 1;
        tally.reward += e.total_reward;
        tally.successes += usize::from(e.success());
        tally.errors += usize::from(e.error.is_some());
        let (n, errors) = (tally.done.max(1) as f64, tally.errors);
        let (mean, percent) = (tally.reward / n, 100.0 * tally.successes as f64 / n);
        let mut line = format!("mean reward {mean:.3}, success {percent:.1}%");
        if errors > 0 {
            line.push_str(&format!(", {errors} errors"));
        }
        match &self.bar {
            Some(bar) => {
                bar.set_message(line);
                bar.inc(1);
            }
            None if last.elapsed() >= EVERY || tally.done == self.total => {
                *last = Instant::now();
                let rate = tally.done as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
                let (done, total) = (tally.done, self.total);
                eprintln!("ors eval: {done}/{total} done, {line}, {rate:.1} episodes/s");
            }
            None => {}
        }
    }

    /// Print a note without breaking the bar.
    pub fn note(&self, msg: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{msg}")),
            None => eprintln!("{msg}"),
        }
    }

    /// Remove the bar.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
