//! Stand-in for `tune.rs` while the engine's search API (text form, target detection, tasks,
//! sampler, codegen, measurer) is being written: the same entry points, which check what they
//! can and then say the command is not built in. Delete it when `mod tune;` is enabled.

use anyhow::{Result, bail};
use std::process::ExitCode;
use tunehub_engine::ops;
use tunehub_server::cli::{BestArgs, TuneArgs, UsageError, WorkloadArgs};

/// Checks an OP_SPEC as `tune.rs` will (bad input is a usage error).
fn check_workload(w: &WorkloadArgs) -> Result<()> {
    if let Some(spec) = &w.op_spec {
        ops::build_op(spec).map_err(|e| UsageError(e.to_string()))?;
    }
    Ok(())
}

pub async fn tune(args: TuneArgs) -> Result<ExitCode> {
    check_workload(&args.workload)?;
    bail!("`tunehub tune` is not in this build yet: it waits for the engine's sampler and measurer")
}

pub async fn best(args: BestArgs) -> Result<ExitCode> {
    check_workload(&args.workload)?;
    bail!("`tunehub best` is not in this build yet: it waits for the engine's target and codegen")
}
