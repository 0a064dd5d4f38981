//! Progress bars on stderr (indicatif draws nothing when stderr is not a terminal).

use crate::show::workload::{label, short};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::HashMap;
use std::time::Duration;
use tunehub_proto::v1 as pb;

/// One bar's look: elapsed time, the bar, trials done of all, the rate and time left (the
/// prefix, from the server's candidate events), a message.
const BAR_TEMPLATE: &str =
    "{spinner} {elapsed_precise} [{bar:30}] {pos}/{len} trials {prefix} {msg}";

/// The style of every trials bar.
pub fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template(BAR_TEMPLATE)
        .expect("a valid template")
        .progress_chars("=> ")
}

/// A bar of `trials` trials, ticking.
pub fn progress_bar(trials: u32) -> ProgressBar {
    let pb = ProgressBar::new(u64::from(trials));
    pb.set_style(bar_style());
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

/// Trials done over all tasks, from each task's latest Round event (for a job's one bar).
#[derive(Default)]
pub struct TrialsDone(HashMap<u32, u32>);

impl TrialsDone {
    pub fn round(&mut self, bar: &ProgressBar, t: &pb::TaskProgress) {
        self.0.insert(t.index, t.trials_done);
        bar.set_position(u64::from(self.0.values().sum::<u32>()));
    }

    /// A candidate measured within a round: the job's count, its rate and time left.
    pub fn candidate(&mut self, bar: &ProgressBar, c: &pb::CandidateProgress) {
        self.0.insert(c.task_index, c.task_done);
        candidate(bar, u64::from(c.job_done), c);
    }
}

/// A candidate event on `bar`, at `pos`: the position, and the rate with the time left (or,
/// while a round builds, how many of it are built).
pub fn candidate(bar: &ProgressBar, pos: u64, c: &pb::CandidateProgress) {
    bar.set_position(pos);
    bar.set_prefix(if c.stage() == pb::CandidateStage::Built {
        format!("(building {}/{})", c.round_built, c.round_size)
    } else {
        rate_text(c)
    });
}

/// `(2.4/s, 0:35 left)`: the server's rate since it claimed the job, and the time left at it.
pub fn rate_text(c: &pb::CandidateProgress) -> String {
    let rate = if c.trials_per_s >= 10.0 {
        format!("{:.0}/s", c.trials_per_s)
    } else {
        format!("{:.2}/s", c.trials_per_s)
    };
    match c.eta_s.filter(|s| s.is_finite() && *s >= 0.0) {
        Some(s) => format!("({rate}, {} left)", clock(s)),
        None => format!("({rate})"),
    }
}

/// Seconds as `m:ss` or `h:mm:ss`.
fn clock(s: f64) -> String {
    let s = s.round() as u64;
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// The best so far, as a bar's message.
pub fn best_message(best_gflops: Option<f64>) -> String {
    best_gflops.map_or_else(
        || "best: none yet".into(),
        |g| format!("best {g:.2} GFLOP/s"),
    )
}

/// A task's bar message: its workload, its best so far, its noisy times and failures.
pub fn bar_message(t: &pb::TaskProgress) -> String {
    let mut errs = String::new();
    if t.noisy > 0 {
        errs.push_str(&format!(", {} noisy", t.noisy));
    }
    if t.errors > 0 {
        errs.push_str(&format!(", {} failed", t.errors));
    }
    format!(
        "{}  {}{errs}",
        short(&label(&t.description, t.options.as_ref())),
        best_message(t.best_gflops)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_and_the_time_left() {
        let c = pb::CandidateProgress {
            trials_per_s: 2.345,
            eta_s: Some(95.4),
            ..Default::default()
        };
        assert_eq!(rate_text(&c), "(2.35/s, 1:35 left)");
        let c = pb::CandidateProgress {
            trials_per_s: 12.0,
            eta_s: Some(3725.0),
            ..Default::default()
        };
        assert_eq!(rate_text(&c), "(12/s, 1:02:05 left)");
        let c = pb::CandidateProgress::default();
        assert_eq!(rate_text(&c), "(0.00/s)");
    }
}
