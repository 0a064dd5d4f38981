//! The service embedded in this process, and a client of it: `tunehub tune` and the `--db`
//! commands run on it, the benchmarks too, so their figures are the product's path. A job
//! submitted to it is run here (`run`), and followed through the API's Watch as any client
//! follows a job.

use crate::client::{BearerToken, Clients};
use crate::usage::status_error;
use anyhow::{Context, Result, bail};
use std::ops::ControlFlow;
use std::path::Path;
use tokio_stream::StreamExt;
use tonic::transport::Endpoint;
use tunehub_proto::v1 as pb;
pub use tunehub_server::embedded::EmbeddedOptions;

/// The service, running, and a client of it.
pub struct Embedded {
    service: tunehub_server::embedded::Embedded,
    pub clients: Clients,
}

impl Embedded {
    pub async fn start(options: EmbeddedOptions) -> Result<Embedded> {
        let service = tunehub_server::embedded::Embedded::start(options)
            .await
            .context("starting the embedded service")?;
        let channel = Endpoint::from_shared(service.url())?.connect().await?;
        let clients = Clients::new(channel, BearerToken::new(Some(&service.token))?);
        Ok(Embedded { service, clients })
    }

    /// The service on a database that must exist already: commands that only read records do
    /// not create an empty one by mistake.
    pub async fn open_existing(options: EmbeddedOptions) -> Result<Embedded> {
        let db = &options.db;
        if !(db.contains("://") || db.starts_with("sqlite:") || Path::new(db).exists()) {
            return Err(crate::usage::UsageError(format!(
                "no database at {db} (`tunehub tune` creates it; --db or TUNEHUB_DB choose another)"
            ))
            .into());
        }
        Embedded::start(options).await
    }

    /// Submits `req` and runs the job here to its end; `on_event` sees each of its events
    /// before the end and may stop it (`Break`: the job is cancelled after its current batch,
    /// as `tunehub cancel` does). The job as it ended.
    pub async fn run(
        &mut self,
        req: pb::SubmitRequest,
        on_event: impl FnMut(pb::job_event::Event) -> ControlFlow<()>,
    ) -> Result<pb::Job> {
        let job = self.submit(req).await?;
        self.run_job(&job.id, on_event).await
    }

    /// Submits `req` (to be run here with `run_job`): the job as submitted.
    pub async fn submit(&mut self, req: pb::SubmitRequest) -> Result<pb::Job> {
        self.clients
            .jobs
            .submit(req)
            .await
            .map_err(status_error)?
            .into_inner()
            .job
            .context("the service returned no job")
    }

    /// Runs the submitted job `id` here to its end, as `run` does.
    pub async fn run_job(
        &mut self,
        id: &str,
        mut on_event: impl FnMut(pb::job_event::Event) -> ControlFlow<()>,
    ) -> Result<pb::Job> {
        let runner = self.service.run_job(id);
        let mut events = self
            .clients
            .jobs
            .watch(pb::WatchRequest { id: id.to_string() })
            .await
            .map_err(status_error)?
            .into_inner();
        let mut end = None;
        let mut cancelled = false;
        while let Some(ev) = events.next().await {
            match ev.map_err(status_error)?.event {
                Some(pb::job_event::Event::Done(j)) => {
                    end = Some(j);
                    break;
                }
                Some(e) => {
                    let stop = on_event(e).is_break();
                    if stop && !cancelled {
                        cancelled = true;
                        self.clients
                            .jobs
                            .cancel(pb::CancelJobRequest { id: id.to_string() })
                            .await
                            .map_err(status_error)?;
                    }
                }
                None => {}
            }
        }
        runner.await.context("the job runner panicked")??;
        match end {
            Some(j) => Ok(j),
            None => bail!("the job's progress stream ended early"),
        }
    }

    /// Stops the service (every batch stored whole, no lease held).
    pub async fn shutdown(self) -> Result<()> {
        drop(self.clients);
        Ok(self.service.shutdown().await?)
    }
}

/// The first Ctrl-C cancels job `id` (it stops after the current batch); a second exits at
/// once. Each batch is one transaction, so either way the database is whole.
pub fn cancel_on_interrupt(mut c: Clients, id: String) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("interrupted: finishing the current batch (Ctrl-C again to quit now)");
            let _ = c.jobs.cancel(pb::CancelJobRequest { id }).await;
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
}
