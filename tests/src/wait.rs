//! Waiting for what another process does: the one place these tests pause between looks.
//!
//! A test waits on the event itself where the server offers one (a job's Watch stream, see
//! `jobs`); what no stream reports — a worker process registering or going silent, a process
//! exiting on a signal, a line in a process's log — is looked at again and again until it
//! holds, with a deadline that fails the test. The pause between looks only spaces them out:
//! no test relies on it for ordering.

use std::time::{Duration, Instant};

/// How long between two looks.
const BETWEEN_LOOKS: Duration = Duration::from_millis(20);

/// Calls `look` until it gives `Some`, failing the test once `limit` has passed (`what`: what
/// was awaited, for the message).
pub async fn until<T>(what: &str, limit: Duration, look: impl AsyncFnMut() -> Option<T>) -> T {
    until_or(what, limit, look, String::new).await
}

/// [`until`], the failure's message ending with what `explain` says then (a log's tail).
pub async fn until_or<T>(
    what: &str,
    limit: Duration,
    mut look: impl AsyncFnMut() -> Option<T>,
    explain: impl Fn() -> String,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = look().await {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "not within {limit:?}: {what}{}",
            explain()
        );
        tokio::time::sleep(BETWEEN_LOOKS).await;
    }
}
