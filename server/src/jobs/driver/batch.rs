//! A measured round as stored records: what is kept and what is dropped, then one transaction
//! checked against the job's claim, and the progress it makes visible.

use super::holder;
use super::retry::until_back;
use crate::jobs::result_check::{check_result, check_speed};
use crate::jobs::store::{JobRow, TaskRow, TaskTimes};
use crate::jobs::{JobContext, JobError};
use crate::records::{self, NewRecord};
use tunehub_engine::measure::{ErrorCode, MeasureResult};
use tunehub_engine::search::Round;
use tunehub_engine::target::Target;

/// A complete round's results ready to store.
pub(super) struct Batch {
    /// The records to store.
    new: Vec<NewRecord>,
    /// Their measurements (for the metrics and the task's last error).
    kept: Vec<MeasureResult>,
    /// Results not stored: possible casualties of a cancel, or measurements the records table
    /// would refuse (proposed again on a later claim).
    dropped: u32,
    /// The round's timings, added to the task's with its progress.
    times: TaskTimes,
}

impl Batch {
    /// The records of `round`'s results for the task of `workload` (its key and FLOPs) of `job`
    /// on `target`. With `cancelled`, the
    /// failures the interrupt itself may have caused are dropped rather than recorded.
    pub fn of(
        ctx: &JobContext,
        job: &JobRow,
        target: &Target,
        (workload, flops): (&str, u64),
        round: &Round,
        cancelled: bool,
    ) -> Batch {
        let mut b = Batch {
            new: vec![],
            kept: vec![],
            dropped: 0,
            times: TaskTimes::of_round(&round.report),
        };
        for (k, (s, r)) in round.batch.iter().zip(&round.results).enumerate() {
            if cancelled && maybe_interrupt_casualty(r) {
                b.dropped += 1;
                continue;
            }
            let device = round.devices.get(k).cloned().flatten();
            // The fleet refuses such a report on arrival; this is the last line: a measurement
            // the records table would refuse is dropped, never a failed job. A failure has no
            // costs (`check_result`), so only a success's times are bounded.
            let checked = check_result(r).and_then(|()| check_speed(&r.costs, flops, target));
            if let Err(why) = checked {
                tracing::warn!(
                    candidate = k,
                    device = device.as_deref().unwrap_or("local"),
                    "measurement dropped, not stored: {why}"
                );
                b.dropped += 1;
                continue;
            }
            let steps = records::canonical_steps(&s.to_json()).expect("valid steps JSON");
            b.new.push(NewRecord::from_measure(
                workload,
                &job.target_key,
                steps,
                r,
                Some(device.as_deref().unwrap_or(ctx.instance.as_str())),
            ));
            b.kept.push(r.clone());
        }
        b
    }

    /// Stores the batch as task `row` of `job`: one transaction with the claim check, then the
    /// counters, the cache and the task's progress (its last error, drops and the round's
    /// timings). `false`: the lease was lost and nothing was stored (another server runs the
    /// job now).
    pub async fn store(
        self,
        ctx: &JobContext,
        job: &JobRow,
        row: &TaskRow,
        workload: &str,
    ) -> Result<bool, JobError> {
        let jobs = &ctx.jobs;
        // Retrying is safe: a record already stored is a duplicate, its job_records row kept.
        let Some(outcomes) = until_back(ctx, &job.id, "storing the batch", || {
            jobs.commit_batch(&job.id, holder(ctx, job), ctx.lease_ms, row.idx, &self.new)
        })
        .await?
        else {
            return Ok(false);
        };
        ctx.metrics.record_measured(&job.target_key, &self.kept);
        // New records move the cached counts, and maybe the best.
        if outcomes
            .iter()
            .any(|o| matches!(o, records::CommitOutcome::Inserted { .. }))
        {
            ctx.cache.invalidate(workload, &job.target_key);
        }
        tracing::info!(task = row.idx, stored = self.new.len(), "batch stored");
        let last_error = self
            .kept
            .iter()
            .rev()
            .find(|r| !r.is_ok())
            .map(|r| format!("{}: {}", r.error.name(), one_line(&r.error_msg)));
        until_back(ctx, &job.id, "updating the task", || {
            jobs.update_task(
                &job.id,
                row.idx,
                false,
                last_error.as_deref(),
                self.dropped,
                &self.times,
            )
        })
        .await?;
        Ok(true)
    }
}

/// A failure that an interrupt itself may have caused: a Ctrl-C in `tunehub tune`'s terminal
/// also reaches the compilers and kernels it started, which then fail as if the candidate had.
/// Such results of a cancelled batch are dropped rather than recorded against the candidate.
fn maybe_interrupt_casualty(r: &MeasureResult) -> bool {
    !matches!(
        r.error,
        ErrorCode::NoError | ErrorCode::InvalidSchedule | ErrorCode::WrongAnswer
    )
}

/// Newlines inside a message (say, from a compiler) joined, and long ones cut.
fn one_line(msg: &str) -> String {
    let line = msg
        .split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" | ");
    match line.char_indices().nth(500) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line,
    }
}
