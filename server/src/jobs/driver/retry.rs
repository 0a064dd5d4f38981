//! A database step retried while the database is unavailable (a PostgreSQL restart): a failed
//! job would be the database's fault, not the job's (invariant 9).

use crate::jobs::{JobContext, JobError};
use crate::records::StoreError;
use backon::{ExponentialBuilder, Retryable};
use std::time::Duration;

/// The backoff between tries: 100 ms doubling to 2 s, jittered so that the jobs of several
/// servers do not knock on a recovering database in step; no limit on the tries.
fn backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(2))
        .with_jitter()
        .without_max_times()
}

/// Runs `step` again and again while the database is unavailable, until it answers or this
/// server stops; any other error at once.
pub(super) async fn until_back<T, F, Fut>(
    ctx: &JobContext,
    job_id: &str,
    what: &str,
    step: F,
) -> Result<T, JobError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    step.retry(backoff())
        .when(|e: &StoreError| e.is_unavailable() && !ctx.shutting_down())
        .notify(|e, pause| {
            // With its cause: "disk I/O error" or "database is locked", not "database error".
            let e = match std::error::Error::source(e) {
                Some(cause) => format!("{e}: {cause}"),
                None => e.to_string(),
            };
            tracing::warn!(
                job_id,
                "{what}: the database is unavailable, retrying in {pause:?}: {e}"
            );
        })
        .await
        .map_err(JobError::from)
}
