//! `tunehub pack`: asks a server for a kernel pack (`Query.Pack`) and writes its three files.
//! Every file is written to a temporary name first and renamed, so a failed pack leaves no
//! half-written file behind, and a refused one (a workload not tuned yet) writes nothing.

use crate::args::ModelArgs;
use crate::session::{ServiceArgs, Session};
use crate::usage::{UsageError, emit, status_error};
use crate::{model, workload};
use anyhow::{Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tunehub_engine::package::DEFAULT_PREFIX;
use tunehub_proto::v1 as pb;

/// The pack's name when none is given: the service's own default for a request without one
/// (the Python client's), said here so that `--help` shows it.
pub const DEFAULT_PACK_NAME: &str = "tunehub_pack";

#[derive(Debug, Clone, Args)]
pub struct PackArgs {
    /// Library operators (as tuned: `matmul(512,512,512)`, its weight packed by default) or an
    /// ONNX model (MODEL.onnx: every task of it).
    #[arg(value_name = "OP_SPEC")]
    pub op_specs: Vec<String>,

    /// A computation in the text form (repeatable).
    #[arg(long, value_name = "TEXT")]
    pub expr: Vec<String>,

    /// Target: `local` (the server's machine) or a target key.
    #[arg(long, value_name = "TARGET", default_value = "local")]
    pub target: String,

    /// The directory the three files are written to (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// The pack's name: NAME.c, NAME.h (a C identifier).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_PACK_NAME)]
    pub name: String,

    /// The start of every kernel's C symbol.
    #[arg(long, value_name = "PREFIX", default_value = DEFAULT_PREFIX)]
    pub prefix: String,

    #[command(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    pub service: ServiceArgs,
}

pub async fn run(args: PackArgs) -> Result<ExitCode> {
    let (models, specs): (Vec<&String>, Vec<&String>) = args
        .op_specs
        .iter()
        .partition(|s| tunehub_onnx::is_model_path(s));
    let mut workloads: Vec<pb::Workload> = specs
        .iter()
        .map(|s| workload::from_op_spec(s))
        .chain(args.expr.iter().map(|e| Ok(workload::from_expr(e))))
        .collect::<Result<_, _>>()?;
    for m in models {
        let list = model::load_with(m, &args.model)?;
        model::warn_skipped(&list);
        workloads.extend(
            model::task_specs(&list, 1)
                .into_iter()
                .filter_map(|t| t.workload),
        );
    }
    if workloads.is_empty() {
        return Err(UsageError("give at least one OP_SPEC, MODEL.onnx or --expr".into()).into());
    }
    let mut session = Session::open(&args.service).await?;
    let p = session
        .clients
        .query
        .pack(pb::PackRequest {
            workloads,
            target: args.target.clone(),
            name: args.name.clone(),
            symbol_prefix: args.prefix.clone(),
        })
        .await
        .map_err(status_error);
    session.close().await?;
    let p = p?.into_inner();
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let files = [
        (format!("{}.c", p.name), &p.source),
        (format!("{}.h", p.name), &p.header),
        ("manifest.json".to_string(), &p.manifest_json),
    ];
    for (name, text) in &files {
        write_whole(&args.out.join(name), text)?;
    }
    let bytes: usize = files.iter().map(|(_, t)| t.len()).sum();
    emit(&format!(
        "{} kernels, {bytes} bytes: {}\n",
        p.kernels.len(),
        files
            .iter()
            .map(|(n, _)| args.out.join(n).display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// Writes `path` through a temporary file in its directory and a rename.
fn write_whole(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}
