//! The health service tells the truth about the database: NOT_SERVING (overall and for each
//! service) while the database does not answer a probe in time, SERVING again once it does.
//! A readiness probe or a balancer then stops sending calls that could only fail or wait.

use crate::records::SqlStore;
use std::time::Duration;
use tokio::task::JoinHandle;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

/// How often the database is probed: a balancer notices an outage within a few seconds.
const PROBE_EVERY: Duration = Duration::from_secs(2);
/// How long a probe may take. A pool whose database went away waits for a connection up to its
/// acquire timeout (30 s): far too long for a readiness answer.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Probes `store` until aborted and sets `services` ("" is the server as a whole) to what it
/// found, logging each change once. `stopping` says the server is shutting down: its
/// NOT_SERVING is then the shutdown's and stays.
pub(crate) fn follow_database(
    store: SqlStore,
    health: HealthReporter,
    services: Vec<&'static str>,
    stopping: impl Fn() -> bool + Send + 'static,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut serving = true;
        loop {
            tokio::time::sleep(PROBE_EVERY).await;
            let probe = tokio::time::timeout(PROBE_TIMEOUT, store.ping()).await;
            if stopping() {
                return;
            }
            let ok = matches!(probe, Ok(Ok(())));
            if ok == serving {
                continue;
            }
            serving = ok;
            let status = if ok {
                tracing::info!("the database answers again: health SERVING");
                ServingStatus::Serving
            } else {
                let why = match probe {
                    Ok(Err(e)) => match std::error::Error::source(&e) {
                        Some(cause) => format!("{e}: {cause}"),
                        None => e.to_string(),
                    },
                    _ => format!("no answer in {PROBE_TIMEOUT:?}"),
                };
                tracing::warn!("the database is unavailable ({why}): health NOT_SERVING");
                ServingStatus::NotServing
            };
            for s in &services {
                health.set_service_status(*s, status).await;
            }
        }
    })
}
