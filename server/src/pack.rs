//! `tunehub pack`: asks a server for a kernel pack (`Query.Pack`) and writes its three files.
//! Every file is written to a temporary name first and renamed, so a failed pack leaves no
//! half-written file behind, and a refused one (a workload not tuned yet) writes nothing.

use crate::commands::{connect, status_error};
use anyhow::{Context, Result};
use std::path::Path;
use std::process::ExitCode;
use tunehub_proto::v1 as pb;
use tunehub_server::cli::{PackArgs, UsageError};
use tunehub_server::workload;

pub async fn pack(args: PackArgs) -> Result<ExitCode> {
    let (models, specs): (Vec<&String>, Vec<&String>) = args
        .op_specs
        .iter()
        .partition(|s| tunehub_onnx::is_model_path(s));
    let mut workloads: Vec<pb::Workload> = specs
        .iter()
        .map(|s| workload::from_op_spec(s))
        .chain(args.expr.iter().map(|e| workload::from_expr(e)))
        .collect();
    for m in models {
        let list = crate::model::load_with(m, &args.model)?;
        crate::model::warn_skipped(&list);
        workloads.extend(
            crate::model::task_specs(&list, 1)
                .into_iter()
                .filter_map(|t| t.workload),
        );
    }
    if workloads.is_empty() {
        return Err(UsageError("give at least one OP_SPEC, MODEL.onnx or --expr".into()).into());
    }
    let mut c = connect(&args.client).await?;
    let p = c
        .query
        .pack(pb::PackRequest {
            workloads,
            target: args.target.clone(),
            name: args.name.clone(),
            symbol_prefix: args.prefix.clone(),
        })
        .await
        .map_err(status_error)?
        .into_inner();
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
    crate::emit(&format!(
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
