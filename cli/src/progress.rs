//! Progress bars on stderr (indicatif draws nothing when stderr is not a terminal).

use crate::show::workload::{label, short};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::HashMap;
use std::time::Duration;
use tunehub_proto::v1 as pb;

/// One bar's look: elapsed time, the bar, trials done of all, a message.
const BAR_TEMPLATE: &str = "{spinner} {elapsed_precise} [{bar:30}] {pos}/{len} trials  {msg}";

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
}

/// The best so far, as a bar's message.
pub fn best_message(best_gflops: Option<f64>) -> String {
    best_gflops.map_or_else(
        || "best: none yet".into(),
        |g| format!("best {g:.2} GFLOP/s"),
    )
}

/// A task's bar message: its workload, its best so far, its failures.
pub fn bar_message(t: &pb::TaskProgress) -> String {
    let errs = if t.errors > 0 {
        format!(", {} failed", t.errors)
    } else {
        String::new()
    };
    format!(
        "{}  {}{errs}",
        short(&label(&t.description, t.options.as_ref())),
        best_message(t.best_gflops)
    )
}
