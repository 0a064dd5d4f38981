//! `tunehub build MODEL.onnx --out DIR`: the model as a C library that runs it whole. The
//! service (a database through an embedded one, `--db`, or a server) compiles it
//! (`Query.BuildModel`, as the Python client asks): every task's kernel a tuned record where one
//! exists, else a zero-shot answer from the nearest tuned shapes of the same structure; NAME.c,
//! NAME.h, NAME.weights and manifest.json come back and are written into DIR. Here, on the
//! machine that will run it, libNAME.so is built and checked against tract on random inputs: a
//! library that does not match is removed and the command fails. With `--tune N` (and `--db`)
//! the tasks without a record of their own are tuned first, N trials each, on this machine.

use super::tune::run_job;
use crate::args::{MAX_TRIALS, MeasureArgs, ModelArgs};
use crate::embedded::{Embedded, EmbeddedOptions};
use crate::model_files;
use crate::progress::{TrialsDone, progress_bar};
use crate::session::{ServiceArgs, Session};
use crate::usage::{UsageError, emit, status_error};
use crate::workload;
use anyhow::{Context, Result, bail};
use clap::{Args, value_parser};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tunehub_compiler::{Manifest, build_checked, check};
use tunehub_engine::measure::MeasureOptions;
use tunehub_engine::search::DEFAULT_BATCH;
use tunehub_engine::target::Target;
use tunehub_onnx::graph::Graph;
use tunehub_onnx::{Extraction, TaskList};
use tunehub_proto::v1 as pb;
use tunehub_server::checks::limits::MAX_BATCH;
use tunehub_server::config::Limits;

#[derive(Debug, Clone, Args)]
pub struct BuildArgs {
    /// The ONNX model to compile.
    #[arg(value_name = "MODEL.onnx")]
    pub model: String,

    /// The directory the files are written to (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// The library's name, a C identifier: NAME.c, NAME.h, libNAME.so, NAME_run [default: the
    /// model file's name].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,

    /// First tune, with N trials each on this machine, the tasks that have no record of their
    /// own (needs --db).
    #[arg(long, value_name = "N", value_parser = value_parser!(u32).range(1..=i64::from(MAX_TRIALS)))]
    pub tune: Option<u32>,

    /// With --tune: candidates per batch.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BATCH as u32, value_parser = value_parser!(u32).range(1..=i64::from(MAX_BATCH)))]
    pub batch: u32,

    /// With --tune: how each candidate is timed.
    #[command(flatten)]
    pub measure: MeasureArgs,

    /// Assemble the weights into the library too: `NAME_create(NULL)` needs no file.
    #[arg(long)]
    pub embed_weights: bool,

    /// Write the files only: no libNAME.so, no check against the reference.
    #[arg(long)]
    pub no_compile: bool,

    /// Build the library with this C compiler instead of the one the kernels were measured with.
    #[arg(long, value_name = "CC")]
    pub cc: Option<String>,

    /// Target whose kernels to use: `local` (the service's machine) or a target key.
    #[arg(long, value_name = "TARGET", default_value = "local")]
    pub target: String,

    #[command(flatten)]
    pub shapes: ModelArgs,

    #[command(flatten)]
    pub service: ServiceArgs,

    /// Print one JSON object on stdout as the summary, instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The model file's name as a C identifier.
fn default_name(path: &str) -> String {
    let stem = Path::new(path)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut n: String = stem
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if n.is_empty() || n.starts_with(|c: char| c.is_ascii_digit()) {
        n.insert_str(0, "model_");
    }
    n.truncate(48);
    n
}

pub async fn run(args: BuildArgs) -> Result<ExitCode> {
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| default_name(&args.model));
    tunehub_engine::package::check_identifier("--name", &name)
        .map_err(|e| UsageError(e.to_string()))?;
    if args.tune.is_some() && args.service.db.is_none() {
        return Err(UsageError("--tune measures on this machine: give --db FILE".into()).into());
    }
    let shapes = crate::model::input_shapes(args.shapes.model_batch, &args.shapes.shapes)?;
    let path = Path::new(&args.model);
    let bytes =
        tunehub_onnx::read_model(path).map_err(|e| UsageError(format!("{}: {e}", args.model)))?;
    // The model is read and every node checked here before the service is asked anything (the
    // service checks it again: a server takes no client's word).
    let model_dir = path.parent().and_then(Path::to_str);
    let g = Graph::load(&bytes, &shapes, model_dir)
        .map_err(|e| UsageError(format!("{}: {e}", args.model)))?;
    let how = Extraction {
        strict: true,
        ..args.shapes.extraction()
    };
    let list = tunehub_onnx::tasks::extract(&g, &how)
        .map_err(|e| UsageError(format!("{}: {e}", args.model)))?;
    tunehub_compiler::check_buildable(&g)
        .map_err(|e| UsageError(format!("{}: {e}", args.model)))?;
    if let Some(trials) = args.tune {
        tune_missing(&args, &list, trials).await?;
    }
    let req = pb::BuildModelRequest {
        model: Some(pb::ModelSource {
            layout: args.shapes.layout_name().into(),
            ..model_files::source(bytes.clone(), &shapes)
        }),
        target: args.target.clone(),
        name: name.clone(),
        embed_weights: args.embed_weights,
        // Built here, on the machine that runs it, with --cc if given.
        compile: false,
    };
    let mut session = Session::open(&args.service).await?;
    let summary = model_files::receive(&mut session.clients, req, &args.out).await;
    session.close().await?;
    let summary = summary?;
    let (manifest, checked) = if args.no_compile {
        (Manifest::read(&args.out)?, None)
    } else {
        let reference = check::Reference {
            model: &bytes,
            shapes: &shapes,
            dir: model_dir,
        };
        let (lib, outputs) = build_checked(&args.out, args.cc.as_deref(), &reference, 0)?;
        (lib.manifest.clone(), Some(outputs))
    };
    let summary = Summary {
        args: &args,
        name: &name,
        manifest: &manifest,
        zero_shot: summary.zero_shot_tasks as usize,
        searched: summary.searched_tasks as usize,
        checked: checked.as_deref(),
    };
    emit(&if args.json {
        summary.json()
    } else {
        summary.text()
    })?;
    Ok(ExitCode::SUCCESS)
}

/// What `build` prints at the end.
struct Summary<'a> {
    args: &'a BuildArgs,
    name: &'a str,
    manifest: &'a tunehub_compiler::Manifest,
    zero_shot: usize,
    /// Of the zero-shot tasks, those searched with the cost model (no tuned neighbour).
    searched: usize,
    /// The outputs that matched the reference (None: not built).
    checked: Option<&'a [String]>,
}

impl Summary<'_> {
    fn json(&self) -> String {
        let j = serde_json::json!({
            "dir": self.args.out, "manifest": self.manifest, "zero_shot_tasks": self.zero_shot,
            "searched_tasks": self.searched,
            "checked_against_reference": self.checked.is_some(),
        });
        format!("{j}\n")
    }

    fn text(&self) -> String {
        let m = self.manifest;
        let tasks = m.tasks.len();
        let mut t = format!(
            "built     {} as {} in {}\n",
            self.args.model,
            self.name,
            self.args.out.display()
        );
        let searched = if self.searched > 0 {
            format!(
                ", {} of them with no tuned neighbour: searched with the cost model",
                self.searched
            )
        } else {
            String::new()
        };
        t += &format!(
            "tasks     {tasks} ({} tuned, {} zero-shot{searched}), {} nodes\n",
            tasks - self.zero_shot,
            self.zero_shot,
            m.nodes.len()
        );
        t += &match m.layout_choice.as_str() {
            "" => format!("layout    {}\n", m.layout),
            choice => format!("layout    {choice}\n"),
        };
        t += &format!(
            "memory    arena {} bytes (intermediate tensors {} bytes), weights {} bytes, packed {} bytes\n",
            m.arena_bytes, m.intermediate_bytes, m.weights_bytes, m.packed_bytes
        );
        t += &match (&m.library, self.checked) {
            (Some(lib), Some(outs)) => format!(
                "library   {lib}: outputs {} match tract on random inputs\n",
                outs.join(", ")
            ),
            _ => "library   not built (--no-compile)\n".into(),
        };
        t
    }
}

/// Tunes the tasks with no record of their own, as one job on the embedded service.
async fn tune_missing(args: &BuildArgs, list: &TaskList, trials: u32) -> Result<()> {
    let workloads: Vec<pb::Workload> = list.tasks.iter().map(workload::of_net_task).collect();
    let db = args.service.db.clone().expect("checked by run");
    let n = u32::try_from(list.tasks.len()).context("too many tasks")?;
    let mut service = Embedded::start(EmbeddedOptions {
        limits: Limits {
            max_trials_per_job: MAX_TRIALS.saturating_mul(n),
            max_tasks_per_job: n,
            ..Limits::default()
        },
        ..EmbeddedOptions::new(db, Target::detect())
    })
    .await?;
    let found = service
        .clients
        .query
        .best_batch(pb::BestBatchRequest {
            workloads: workloads.to_vec(),
            target: args.target.clone(),
            omit_kernel: true,
            ..Default::default()
        })
        .await
        .map_err(status_error)?
        .into_inner()
        .results;
    let tasks: Vec<pb::TaskSpec> = list
        .tasks
        .iter()
        .zip(&workloads)
        .zip(&found)
        .filter(|(_, r)| !r.found)
        .map(|((t, w), _)| pb::TaskSpec {
            workload: Some(w.clone()),
            trials,
            weight: f64::from(t.weight),
            alternative: t.alternative,
        })
        .collect();
    if tasks.is_empty() {
        return service.shutdown().await;
    }
    let total = trials.saturating_mul(tasks.len() as u32);
    let req = pb::SubmitRequest {
        tasks,
        target: "local".into(),
        measure: Some(args.measure.to_proto(&MeasureOptions::cold())),
        batch_size: args.batch,
        name: format!("tunehub build {}", args.model),
        ..Default::default()
    };
    let bar = progress_bar(total);
    let mut done = TrialsDone::default();
    let job = run_job(&mut service, req, &bar, |bar, e| match e {
        pb::job_event::Event::Round(t) => done.round(bar, &t),
        pb::job_event::Event::Candidate(c) => done.candidate(bar, &c),
        _ => {}
    })
    .await?;
    service.shutdown().await?;
    if job.state == pb::JobState::Failed as i32 {
        bail!("the tuning job failed: {}", job.error);
    }
    Ok(())
}
