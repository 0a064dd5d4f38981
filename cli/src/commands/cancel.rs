//! `tunehub cancel`: stops a queued or running job (after its current batch), or each job of a
//! group.

use super::group;
use crate::client::{ClientArgs, connect_with};
use crate::show::job::state_name;
use crate::usage::{emit, status_error};
use anyhow::Result;
use clap::Args;
use std::process::ExitCode;
use tunehub_proto::v1 as pb;

#[derive(Debug, Clone, Args)]
pub struct CancelArgs {
    /// The job's id, or a group's (`g-...`: each of its jobs).
    #[arg(value_name = "JOB")]
    pub job: String,

    #[command(flatten)]
    pub client: ClientArgs,
}

pub async fn run(args: CancelArgs) -> Result<ExitCode> {
    let mut c = connect_with(&args.client).await?;
    if group::is_group(&args.job) {
        return group::cancel_group(&mut c, &args.job).await;
    }
    let job = c
        .jobs
        .cancel(pb::CancelJobRequest { id: args.job })
        .await
        .map_err(status_error)?
        .into_inner();
    emit(&format!("{} {}\n", job.id, state_name(job.state)))?;
    Ok(ExitCode::SUCCESS)
}
