//! The demo's progress view: one line per step, a spinner with the elapsed time and the step's
//! latest news while it runs, its outcome when it ends. When standard output is not a terminal
//! (a log, CI, a test) the same events are plain lines.

use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// Where steps report.
pub struct Progress {
    bars: Option<MultiProgress>,
    started: Instant,
}

/// One running step.
pub struct Step {
    name: String,
    bar: Option<ProgressBar>,
    started: Instant,
    demo_started: Instant,
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress {
    /// Spinners on a terminal, plain lines otherwise.
    pub fn new() -> Self {
        Progress {
            bars: std::io::stdout().is_terminal().then(MultiProgress::new),
            started: Instant::now(),
        }
    }

    /// Starts the step `name`.
    pub fn step(&self, name: &str) -> Step {
        let bar = self.bars.as_ref().map(|bars| {
            let bar = bars.add(ProgressBar::new_spinner());
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner:.cyan} {prefix:<34} {elapsed:>4} {wide_msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_prefix(name.to_owned());
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        });
        if bar.is_none() {
            println!("[{:>6.1}s] {name} …", self.started.elapsed().as_secs_f64());
        }
        Step {
            name: name.to_owned(),
            bar,
            started: Instant::now(),
            demo_started: self.started,
        }
    }

    /// Prints a line above the steps.
    pub fn println(&self, line: &str) {
        match &self.bars {
            Some(bars) => {
                let _ = bars.println(line);
            }
            None => println!("{line}"),
        }
    }
}

impl Step {
    /// The step's latest news (shown beside its spinner; a plain line off a terminal).
    pub fn message(&self, news: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(news.to_owned()),
            None => println!(
                "[{:>6.1}s]   {}: {news}",
                self.demo_started.elapsed().as_secs_f64(),
                self.name
            ),
        }
    }

    /// Ends the step successfully with `outcome`.
    pub fn done(self, outcome: &str) {
        self.end("✔", outcome);
    }

    /// Ends the step as failed with `why`.
    pub fn failed(self, why: &str) {
        self.end("✘", why);
    }

    fn end(self, mark: &str, text: &str) {
        let took = self.started.elapsed().as_secs_f64();
        match &self.bar {
            Some(bar) => {
                bar.set_style(
                    ProgressStyle::with_template("{prefix} {wide_msg}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                bar.set_prefix(format!("{mark} {:<34}{took:>4.0}s", self.name));
                bar.finish_with_message(text.to_owned());
            }
            None => println!(
                "[{:>6.1}s] {mark} {} ({took:.1}s): {text}",
                self.demo_started.elapsed().as_secs_f64(),
                self.name
            ),
        }
    }
}
