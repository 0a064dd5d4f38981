//! `tunehub query`: the best record of a workload with its kernel, the top k, a shape range's
//! dispatch table, or what has been tuned; from a server, or a database file (`--db`).

use crate::client::Clients;
use crate::session::{ServiceArgs, Session};
use crate::show::range::{range_json, range_text};
use crate::show::record::{kernel_json, record_json, record_text, transfer_json, transfer_text};
use crate::show::table::{Align, Table};
use crate::show::time::time_text;
use crate::show::workload::{label, layout_free, short};
use crate::usage::{UsageError, emit, status_error};
use crate::workload;
use anyhow::{Context, Result};
use clap::Args;
use serde_json::json;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use tunehub_engine::package::DEFAULT_PREFIX;
use tunehub_proto::v1 as pb;

#[derive(Debug, Clone, Args)]
pub struct QueryArgs {
    /// A library operator, e.g. `matmul(512,512,512)` (its weight packed by default, as
    /// tuned; `layout_free=...` as tuned otherwise).
    #[arg(value_name = "OP_SPEC", conflicts_with_all = ["expr", "key"])]
    pub op_spec: Option<String>,

    /// The computation in the text form.
    #[arg(long, value_name = "TEXT", conflicts_with = "key")]
    pub expr: Option<String>,

    /// A workload key.
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,

    /// Target: `local` (the server's machine) or a target key.
    #[arg(long, value_name = "TARGET", default_value = "local")]
    pub target: String,

    /// Also print the best kernel's C source.
    #[arg(long)]
    pub print_source: bool,

    /// Write the best kernel's C source to FILE.
    #[arg(long, value_name = "FILE")]
    pub out_c: Option<PathBuf>,

    /// Write the best kernel's C header (its prototypes and calling contract) to FILE.
    #[arg(long, value_name = "FILE")]
    pub out_h: Option<PathBuf>,

    /// The start of the kernel's C symbol.
    #[arg(long, value_name = "PREFIX", default_value = DEFAULT_PREFIX)]
    pub prefix: String,

    /// The K fastest records instead of the best one.
    #[arg(long, value_name = "K")]
    pub top: Option<u32>,

    /// With no record of the workload on the target, answer from the nearest tuned workloads
    /// of its structure (same operator at other extents), their best schedule adapted: marked
    /// as transferred, with a predicted time.
    #[arg(long, conflicts_with = "top")]
    pub transfer: bool,

    /// With --transfer, on the server's own machine: measure the top transferred candidates
    /// now and store them as records; the answer is then the measured best.
    #[arg(long, requires = "transfer")]
    pub measure: bool,

    /// A shape range's dispatch table, e.g. `matmul(m=1..512,n=768,k=768)` (as submitted: its
    /// weight packed by default): which interval of the ranged extents each representative shape
    /// serves, with its best record. Any shape of a tuned range is answered by the plain query.
    #[arg(long, value_name = "SPEC", conflicts_with_all = ["op_spec", "expr", "key", "top", "print_source", "out_c", "out_h", "transfer", "list"])]
    pub range: Option<String>,

    /// List the targets and workloads tuned so far, with their trial counts (no workload).
    #[arg(long, conflicts_with_all = ["op_spec", "expr", "key", "top", "print_source", "out_c", "out_h", "transfer", "range"])]
    pub list: bool,

    /// Print JSON.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub service: ServiceArgs,
}

fn workload_of(a: &QueryArgs) -> Result<pb::Workload> {
    match (&a.op_spec, &a.expr, &a.key) {
        (Some(s), None, None) => Ok(workload::from_op_spec(s)?),
        (None, Some(e), None) => Ok(workload::from_expr(e)),
        (None, None, Some(k)) => Ok(workload::from_key(k)),
        _ => Err(UsageError(
            "give exactly one of OP_SPEC, --expr and --key (or --list, or --range)".into(),
        )
        .into()),
    }
}

pub async fn run(args: QueryArgs) -> Result<ExitCode> {
    let mut session = Session::open(&args.service).await?;
    let out = answer(&args, &mut session.clients).await;
    session.close().await?;
    out
}

async fn answer(args: &QueryArgs, c: &mut Clients) -> Result<ExitCode> {
    if args.list {
        let r = c
            .query
            .list_tuned(pb::ListTunedRequest {})
            .await
            .map_err(status_error)?
            .into_inner();
        let mut out = String::new();
        if args.json {
            let v = json!({
                "targets": r.targets.iter().map(|t| json!({"key": t.key, "trials": t.trials})).collect::<Vec<_>>(),
                "workloads": r.workloads.iter().map(|w| json!({
                    "workload_key": w.workload_key, "description": w.description,
                    "layout_free": layout_free(w.options.as_ref()), "target_key": w.target_key,
                    "trials": w.trials, "ok": w.ok, "noisy": w.noisy,
                    "best_gflops": w.best_gflops})).collect::<Vec<_>>(),
            });
            let _ = writeln!(out, "{v}");
        } else {
            // Columns as wide as their cells: workload and target keys are longer than
            // their headers.
            let mut targets = Table::new(&[("TARGET", Align::Left), ("TRIALS", Align::Right)]);
            for t in &r.targets {
                targets.row(vec![t.key.clone(), t.trials.to_string()]);
            }
            let mut workloads = Table::new(&[
                ("WORKLOAD", Align::Left),
                ("TARGET", Align::Left),
                ("TRIALS", Align::Right),
                ("OK", Align::Right),
                ("NOISY", Align::Right),
                ("ERRORS", Align::Right),
                ("BEST GF/s", Align::Right),
                ("DESCRIPTION", Align::Left),
            ]);
            for w in &r.workloads {
                workloads.row(vec![
                    w.workload_key.clone(),
                    w.target_key.clone(),
                    w.trials.to_string(),
                    // Apart: a noisy success is never a best.
                    w.ok.saturating_sub(w.noisy).to_string(),
                    w.noisy.to_string(),
                    w.trials.saturating_sub(w.ok).to_string(),
                    w.best_gflops.map_or("-".into(), |g| format!("{g:.2}")),
                    short(&label(&w.description, w.options.as_ref())).to_string(),
                ]);
            }
            out.push_str(&targets.text());
            out.push('\n');
            out.push_str(&workloads.text());
        }
        emit(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(spec) = &args.range {
        let r = workload::range_from_spec(spec, 0)?;
        let resp = c
            .query
            .range(pb::RangeRequest {
                spec: r.spec,
                options: r.options,
                target: args.target.clone(),
            })
            .await
            .map_err(status_error)?
            .into_inner();
        let out = if args.json {
            format!("{}\n", range_json(&resp))
        } else {
            range_text(&resp)
        };
        emit(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let workload = workload_of(args)?;
    if let Some(k) = args.top {
        let r = c
            .query
            .top_k(pb::TopKRequest {
                workload: Some(workload),
                target: args.target.clone(),
                k,
                symbol_prefix: args.prefix.clone(),
                omit_kernel: !args.json,
            })
            .await
            .map_err(status_error)?
            .into_inner();
        let mut out = String::new();
        for (i, rec) in r.records.iter().enumerate() {
            if args.json {
                let mut v = record_json(rec);
                if let Some(k) = r.kernels.get(i) {
                    v["kernel"] = kernel_json(k);
                }
                let _ = writeln!(out, "{v}");
            } else {
                let _ = writeln!(
                    out,
                    "{:>10}  {:>8.2} GFLOP/s  {}  {}",
                    time_text(rec.seconds),
                    rec.gflops,
                    rec.record_id,
                    rec.steps_json
                );
            }
        }
        emit(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let want_kernel =
        args.print_source || args.out_c.is_some() || args.out_h.is_some() || args.json;
    let r = c
        .query
        .best(pb::BestRequest {
            workload: Some(workload),
            target: args.target.clone(),
            with_source: false,
            allow_transfer: args.transfer,
            symbol_prefix: args.prefix.clone(),
            omit_kernel: !want_kernel,
            measure_transfer: args.measure,
        })
        .await
        .map_err(status_error)?
        .into_inner();
    let rec = r.record.as_ref().context("the server sent no record")?;
    let kernel = r.kernel.as_ref();
    let source = kernel.map_or("", |k| k.source.as_str());
    for (path, text, what) in [
        (&args.out_c, source, "source"),
        (
            &args.out_h,
            kernel.map_or("", |k| k.header.as_str()),
            "header",
        ),
    ] {
        if let Some(path) = path {
            std::fs::write(path, text)
                .with_context(|| format!("writing the kernel {what} to {}", path.display()))?;
        }
    }
    if args.json {
        let mut v = json!({
            "workload_key": rec.workload_key,
            "description": r.description,
            "layout_free": layout_free(r.options.as_ref()),
            "flops": r.flops,
            "target_key": rec.target_key,
            "records_total": r.records_total,
            "records_ok": r.records_ok,
            "best": record_json(rec),
        });
        if let Some(tr) = &r.transfer {
            v["transfer"] = transfer_json(tr);
        }
        if let Some(g) = &r.range {
            v["range"] = json!({"id": g.id, "spec": g.spec});
        }
        if let Some(k) = kernel {
            v["kernel"] = kernel_json(k);
        }
        if args.print_source {
            v["source"] = json!(source);
        }
        emit(&format!("{v}\n"))?;
    } else {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "workload  {}  {}  ({:.3} GFLOP)",
            rec.workload_key,
            short(&label(&r.description, r.options.as_ref())),
            r.flops as f64 / 1e9
        );
        let _ = writeln!(t, "target    {}", rec.target_key);
        let _ = writeln!(t, "records   {} ({} ok)", r.records_total, r.records_ok);
        if let Some(g) = &r.range {
            let _ = writeln!(t, "range     {} ({}): no record of its own", g.spec, g.id);
        }
        if let Some(tr) = &r.transfer {
            let _ = writeln!(t, "transfer  {}", transfer_text(tr));
        }
        t.push_str(&record_text(rec));
        if let Some(k) = kernel {
            let _ = writeln!(t, "kernel    {}", k.symbol);
        }
        if args.print_source {
            t.push_str(source);
        }
        emit(&t)?;
    }
    Ok(ExitCode::SUCCESS)
}
