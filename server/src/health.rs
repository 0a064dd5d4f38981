//! The health service tells the truth about the database: NOT_SERVING (overall and for each
//! service) while the database does not answer a probe in time, SERVING again once it does.
//! A readiness probe or a balancer then stops sending calls that could only fail or wait.

use crate::records::SqlStore;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

/// How often the database is probed: a balancer notices an outage within a few seconds.
const PROBE_EVERY: Duration = Duration::from_secs(2);
/// How long a probe may take. A pool whose database went away waits for a connection up to its
/// acquire timeout (30 s): far too long for a readiness answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The last probe's finding: `Ok` while the database answers, else why not. Shared with the
/// dashboard's health view, so that a page open anywhere costs the database nothing.
pub(crate) type DatabaseHealth = watch::Receiver<Result<(), String>>;

/// Probes `store` until aborted and sets `services` ("" is the server as a whole) to what it
/// found, logging each change once; returns the task and the findings as they change.
/// `stopping` says the server is shutting down: its NOT_SERVING is then the shutdown's and
/// stays.
pub(crate) fn follow_database(
    store: SqlStore,
    health: HealthReporter,
    services: Vec<&'static str>,
    stopping: impl Fn() -> bool + Send + 'static,
) -> (JoinHandle<()>, DatabaseHealth) {
    let (found, findings) = watch::channel(Ok(()));
    let task = tokio::spawn(async move {
        let mut serving = true;
        loop {
            tokio::time::sleep(PROBE_EVERY).await;
            let probe = tokio::time::timeout(PROBE_TIMEOUT, store.ping()).await;
            if stopping() {
                return;
            }
            let finding = match probe {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(match std::error::Error::source(&e) {
                    Some(cause) => format!("{e}: {cause}"),
                    None => e.to_string(),
                }),
                Err(_) => Err(format!("no answer in {PROBE_TIMEOUT:?}")),
            };
            let ok = finding.is_ok();
            found.send_modify(|f| *f = finding.clone());
            if ok == serving {
                continue;
            }
            serving = ok;
            let status = if let Err(why) = finding {
                tracing::warn!("the database is unavailable ({why}): health NOT_SERVING");
                ServingStatus::NotServing
            } else {
                tracing::info!("the database answers again: health SERVING");
                ServingStatus::Serving
            };
            for s in &services {
                health.set_service_status(*s, status).await;
            }
        }
    });
    (task, findings)
}
