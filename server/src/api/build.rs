//! `Query.BuildModel`: an ONNX model compiled as a C library that runs it whole, the service's
//! side of `tunehub build` and of the Python client's `build_model`.
//!
//! The model is checked at the door as `SubmitModel` checks it (size, input shapes, every
//! task's memory); each task is answered as `BestBatch` with `allow_transfer` answers it (a
//! tuned record, else a zero-shot answer from tuned neighbours), else by a search with the
//! target's saved cost model (`searched`): no task of a model is left out because nothing of
//! its structure was tuned. Without a saved model, the tasks with no answer are one NOT_FOUND
//! listing every one. `tunehub-compiler` writes the files; with `compile` the library is built here
//! with the kernels' own compiler (never one the request names: this runs on the server) and
//! checked against tract before a byte is sent. The files go out in pieces, the manifest last.

use super::Api;
use super::kernel::KernelOf;
use super::model::{EXTRACTING, check_task_sizes, import_status, input_shapes, layout};
use super::query::Want;
use crate::checks::limits::check_len;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio_stream::Stream;
use tonic::Status;
use tunehub_compiler::{CompileError, Compiled, Options, check};
use tunehub_engine::package::{self, Kernel};
use tunehub_onnx::graph::Graph;
use tunehub_onnx::{Extraction, InputShapes, Layout, TaskList, choice};
use tunehub_proto::v1 as pb;

/// The library's name when the request gives none.
const DEFAULT_NAME: &str = "model";
/// A task's provenance in the manifest when nothing of its structure was tuned.
const SEARCHED: &str =
    "zero-shot (no tuned neighbour: searched with the target's cost model, predicted)";
/// A task's provenance when every success of its workload was timed on a slowed machine.
const NOISY: &str = "tuned (noisy: every success was timed on a slowed machine; the fastest, \
                     verified, its time an upper bound)";
/// Bytes of a file per message: well under any message limit.
const PIECE_BYTES: usize = 1 << 20;

/// Libraries built at once: each runs the C compiler over a few MB of C and the model once
/// through tract; a burst waits here.
static BUILDING: Semaphore = Semaphore::const_new(1);

pub type PieceStream = Pin<Box<dyn Stream<Item = Result<pb::BuildModelPiece, Status>> + Send>>;

impl Api {
    /// The request checked, the model compiled (and with `compile` built and checked), as the
    /// messages of the answer.
    pub(super) async fn build_model(
        &self,
        r: pb::BuildModelRequest,
    ) -> Result<Vec<pb::BuildModelPiece>, Status> {
        let name = if r.name.is_empty() {
            DEFAULT_NAME.to_string()
        } else {
            r.name.clone()
        };
        check_len("name", &name, 64)?;
        package::check_identifier("name", &name)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let Some(model) = r.model else {
            return Err(Status::invalid_argument(
                "no model: give model.onnx, the model file's bytes",
            ));
        };
        self.check_model_size(&model)?;
        let shapes = input_shapes(&model)?;
        let asked = layout(&model)?;
        let target = self.query_target(&r.target).await?;
        if r.compile && target != self.local_target().key() {
            return Err(Status::failed_precondition(format!(
                "compile builds and checks the library on this server's machine (target {}); \
                 kernels for target {target} are built where they run: ask without compile",
                self.local_target().key()
            )));
        }
        let onnx = Arc::new(model.onnx);
        let (g, list, choice) = match asked {
            Some(l) => {
                let (g, mut lists) = load(Arc::clone(&onnx), shapes.clone(), vec![l]).await?;
                (g, lists.remove(0), String::new())
            }
            None => self.least_layout(&onnx, &shapes, &target).await?,
        };
        check_task_sizes(&list)?;
        let Answered {
            kernels,
            searched,
            noisy,
        } = self.kernels_of(&list, &target, &format!("{name}_")).await?;
        let zero_shot = kernels
            .iter()
            .filter(|k| k.provenance.record_id.is_empty())
            .count();
        let tasks = list.tasks.len();
        let _permit = BUILDING
            .acquire()
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        let options = Options {
            embed_weights: r.embed_weights,
        };
        let compile = r.compile;
        let summary_name = name.clone();
        let n_searched = searched.len();
        let (files, checked, manifest) = tokio::task::spawn_blocking(move || {
            let kernels: Vec<Kernel> = kernels.iter().map(|k| (**k).clone()).collect();
            let mut compiled = tunehub_compiler::compile(
                &g,
                &list,
                &kernels,
                &name,
                &format!("{name}.onnx"),
                &options,
            )?;
            compiled.manifest.layout_choice = choice;
            for &i in &searched {
                compiled.manifest.tasks[i].provenance = SEARCHED.into();
            }
            for &i in &noisy {
                compiled.manifest.tasks[i].provenance = NOISY.into();
            }
            if compile {
                build_here(&compiled, &onnx, &shapes)
            } else {
                let manifest = compiled.manifest.json();
                Ok((compiled.files(), vec![], manifest))
            }
        })
        .await
        .map_err(|e| Status::internal(format!("building the model failed: {e}")))?
        .map_err(compile_status)?;
        tracing::info!(
            tasks,
            zero_shot,
            searched = n_searched,
            compile,
            "model built"
        );
        let mut pieces = vec![];
        for (file, bytes) in files {
            // An empty file is still one piece: the caller creates it.
            for data in bytes
                .chunks(PIECE_BYTES)
                .chain(bytes.is_empty().then_some(&[][..]))
            {
                pieces.push(pb::BuildModelPiece {
                    file: file.clone(),
                    data: data.to_vec(),
                    summary: None,
                });
            }
        }
        pieces.push(pb::BuildModelPiece {
            summary: Some(pb::BuildModelSummary {
                name: summary_name,
                tasks: tasks as u32,
                zero_shot_tasks: zero_shot as u32,
                checked_outputs: checked,
                manifest_json: manifest,
                searched_tasks: n_searched as u32,
            }),
            ..Default::default()
        });
        Ok(pieces)
    }

    /// The model in the layout whose tasks' tuned kernels take least on `target` (the sum of
    /// weight x best measured time) among those with every task tuned; with none so, the one
    /// with the most tuned tasks (NHWC, what a job tunes first, on a tie). One of them is NHWC
    /// with each convolution that has a Winograd form in the form whose tuned kernels take
    /// least (`choice::per_convolution`), never slower than either. Conversions between
    /// layouts are not counted: a layout keeps its result across a run of convolutions, one
    /// copy at each end. Also the choice, said for the manifest.
    async fn least_layout(
        &self,
        onnx: &Arc<Vec<u8>>,
        shapes: &InputShapes,
        target: &str,
    ) -> Result<(Graph, TaskList, String), Status> {
        // NHWC first: it wins a tie, as between two layouts with nothing tuned, where its
        // neighbours are the likelier to be tuned (a job tunes it by default).
        let layouts = vec![Layout::Nhwc, Layout::Winograd, Layout::Nchw];
        let (g, lists) = load(Arc::clone(onnx), shapes.clone(), layouts).await?;
        let mut times = vec![];
        for list in &lists {
            times.push(self.task_times(list, target).await?);
        }
        let mut options = vec![];
        let mixed = choice::per_convolution(&g, &lists[0], &times[0], &lists[1], &times[1]);
        if mixed.eligible > 0 {
            let label = format!(
                "per convolution ({} of {} by Winograd)",
                mixed.winograd, mixed.eligible
            );
            // Its tasks are the two lists' own: their times are known already.
            let known: std::collections::HashMap<&str, Option<f64>> = lists[..2]
                .iter()
                .zip(&times)
                .flat_map(|(l, t)| {
                    l.tasks
                        .iter()
                        .map(|t| t.workload_key.as_str())
                        .zip(t.iter().copied())
                })
                .collect();
            let t: Vec<Option<f64>> = mixed
                .list
                .tasks
                .iter()
                .map(|t| known[t.workload_key.as_str()])
                .collect();
            options.push((total(&mixed.list, &t), label, mixed.list));
        }
        for (list, t) in lists.into_iter().zip(&times) {
            options.push((total(&list, t), list.layout.to_string(), list));
        }
        let said: Vec<String> = options
            .iter()
            .map(|((untuned, seconds), label, list)| match untuned {
                0 => format!("{label} {:.3} ms", seconds * 1e3),
                u => format!("{label} {u} of {} tasks untuned", list.tasks.len()),
            })
            .collect();
        // Fewest untuned tasks, then least time; `min_by` keeps the first of equals.
        let ((_, _), label, list) = options
            .into_iter()
            .min_by(|(a, _, _), (b, _, _)| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)))
            .expect("a layout is always an option");
        let choice = format!("{label} (least tuned time; {})", said.join(", "));
        Ok((g, list, choice))
    }

    /// Each of `list`'s tasks' best record's time on `target`, if it has one.
    async fn task_times(&self, list: &TaskList, target: &str) -> Result<Vec<Option<f64>>, Status> {
        let mut times = vec![];
        for t in &list.tasks {
            let w = crate::workload::of_net_task(t);
            let task = self.resolve_workload(Some(&w)).await?;
            let cached = self.cached(&task.key, target).await?;
            times.push(cached.best.as_ref().and_then(|b| b.mean_cost));
        }
        Ok(times)
    }

    /// Every task's kernel on `target`, named under `prefix`, and which tasks had no tuned
    /// neighbour (their schedule searched with the cost model): NOT_FOUND listing every task
    /// with neither a record nor a tuned neighbour when the target has no saved cost model.
    async fn kernels_of(
        &self,
        list: &TaskList,
        target: &str,
        prefix: &str,
    ) -> Result<Answered, Status> {
        let want = Want::new(false, false, prefix)?;
        let mut kernels = vec![];
        let mut searched = vec![];
        let mut noisy = vec![];
        let mut missing = vec![];
        for (i, t) in list.tasks.iter().enumerate() {
            let at = |s: Status| Status::new(s.code(), format!("task {i}: {}", s.message()));
            let w = crate::workload::of_net_task(t);
            let (answer, kernel) = self
                .answer(Some(&w), target, want, true)
                .await
                .map_err(at)?;
            if let Some(k) = kernel {
                if answer.record.is_some_and(|r| r.noisy) {
                    noisy.push(i);
                }
                kernels.push(k);
                continue;
            }
            let task = Arc::new(self.resolve_workload(Some(&w)).await.map_err(at)?);
            let Some(steps) = self.searched(&task, target).await.map_err(at)? else {
                missing.push(format!("task {i} ({})", t.label));
                continue;
            };
            let of = KernelOf {
                target_key: target,
                steps_json: &steps,
                record_id: "",
                gflops: 0.0,
            };
            kernels.push(self.kernel(&task, of, prefix).await.map_err(at)?);
            searched.push(i);
        }
        if !missing.is_empty() {
            return Err(Status::not_found(format!(
                "no record and no tuned neighbour of the same structure on target {target}, \
                 and no saved cost model to search with, for: {}; tune them first (`tunehub \
                 build --tune N`, or submit the model)",
                missing.join("; ")
            )));
        }
        Ok(Answered {
            kernels,
            searched,
            noisy,
        })
    }
}

/// Every task's kernel, and which tasks' kernels came from the cost model's search (no tuned
/// neighbour) or from noisy records only.
struct Answered {
    kernels: Vec<Arc<Kernel>>,
    searched: Vec<usize>,
    noisy: Vec<usize>,
}

/// How many of `list`'s tasks have no time, and the sum of weight x time over those that have.
fn total(list: &TaskList, times: &[Option<f64>]) -> (usize, f64) {
    let untuned = times.iter().filter(|t| t.is_none()).count();
    let seconds = list
        .tasks
        .iter()
        .zip(times)
        .filter_map(|(t, s)| s.map(|s| f64::from(t.weight) * s))
        .sum();
    (untuned, seconds)
}

/// The model's graph and its tasks in each of `layouts`, off the async threads (parsing and
/// shape inference are CPU work), sharing `SubmitModel`'s permits.
async fn load(
    onnx: Arc<Vec<u8>>,
    shapes: InputShapes,
    layouts: Vec<Layout>,
) -> Result<(Graph, Vec<TaskList>), Status> {
    let _permit = EXTRACTING
        .acquire()
        .await
        .map_err(|e| Status::internal(e.to_string()))?;
    tokio::task::spawn_blocking(move || {
        let g = Graph::load(&onnx, &shapes, None)?;
        let lists = layouts
            .into_iter()
            .map(|l| tunehub_onnx::tasks::extract(&g, &Extraction::strict().in_layout(l)))
            .collect::<Result<_, _>>()?;
        Ok((g, lists))
    })
    .await
    .map_err(|e| Status::internal(format!("reading the model failed: {e}")))?
    .map_err(import_status)
}

type Files = (Vec<(String, Vec<u8>)>, Vec<String>, String);

/// Builds `compiled` in a directory of its own, checks it against tract, and reads back every
/// file, the library among them (the manifest, which names it, last).
fn build_here(
    compiled: &Compiled,
    onnx: &[u8],
    shapes: &InputShapes,
) -> Result<Files, CompileError> {
    let io =
        |what: &'static str, path: String| move |source| CompileError::Io { what, path, source };
    let dir = tempfile::Builder::new()
        .prefix("tunehub-model-")
        .tempdir()
        .map_err(io("creating", "a temporary directory".into()))?;
    let reference = check::Reference {
        model: onnx,
        shapes,
        dir: None,
    };
    let (lib, checked) = compiled.build_checked(dir.path(), None, &reference, 0)?;
    let manifest = lib.manifest.clone();
    drop(lib);
    let mut names: Vec<String> = compiled.files().into_iter().map(|(f, _)| f).collect();
    let last = names.pop().expect("the manifest is a file");
    names.extend(manifest.library.clone());
    names.push(last);
    let mut files = vec![];
    for n in names {
        let p = dir.path().join(&n);
        let bytes = std::fs::read(&p).map_err(io("reading", p.display().to_string()))?;
        files.push((n, bytes));
    }
    Ok((files, checked, manifest.json()))
}

/// A model no library can run is the caller's (INVALID_ARGUMENT); anything else is ours.
fn compile_status(e: CompileError) -> Status {
    match e {
        CompileError::Import(e) => import_status(e),
        CompileError::Node { .. } | CompileError::BadName(_) => {
            Status::invalid_argument(e.to_string())
        }
        e => Status::internal(e.to_string()),
    }
}
