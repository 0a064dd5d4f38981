//! `Jobs.SubmitModel`: an ONNX model sent whole, its tasks extracted here as `tunehub submit
//! MODEL.onnx` extracts them on the client's side (`tunehub-onnx`, the same conversion to
//! workloads), then queued as any submission (`Api::submit_job`, which checks the rest).
//!
//! For clients without an ONNX parser (the Python client). The model is checked at the door:
//! its size before it is parsed, then what the extraction says, each as INVALID_ARGUMENT
//! naming the input, node or reason; nothing is stored unless the job is.

use super::Api;
use super::jobs::{MAX_PRIORITY, MIN_PRIORITY, measure_options, measure_over};
use crate::checks::limits::{MAX_BATCH, MAX_KEY, MAX_NAME, check_len};
use crate::checks::memory::check_workload_bytes;
use tokio::sync::Semaphore;
use tonic::Status;
use tunehub_engine::measure::MeasureOptions;
use tunehub_onnx::{Extraction, ImportError, InputShapes, Layout, TaskList};
use tunehub_proto::v1 as pb;

/// Bytes of a request left for everything but the model: the job's settings and the input
/// shapes (bounded below) fit well within it.
pub const MODEL_REQUEST_HEADROOM: usize = 64 << 10;
/// The batch dimension's bounds, as the command line's `--model-batch`.
pub const MAX_MODEL_BATCH: i64 = 65536;
/// Input shapes per request, and dimensions per shape.
pub const MAX_SHAPES: usize = 64;
pub const MAX_SHAPE_DIMS: usize = 32;

/// Models extracted at once: each is CPU-bound work on the blocking pool and holds a few times
/// the model's size in memory, so a burst of submissions waits here rather than piling up.
pub(super) static EXTRACTING: Semaphore = Semaphore::const_new(2);

/// The largest model a server with this message limit takes: the request carries the rest, and
/// no model is larger than protobuf allows, whatever the limit (`tunehub_onnx::MAX_MODEL_BYTES`,
/// which the command line reads model files up to).
pub fn max_model_bytes(max_message_bytes: usize) -> usize {
    let max = usize::try_from(tunehub_onnx::MAX_MODEL_BYTES).unwrap_or(usize::MAX);
    max_message_bytes
        .saturating_sub(MODEL_REQUEST_HEADROOM)
        .min(max)
}

/// The message limit under which a model of any size a model file may have fits, with the
/// rest of its request: for a service whose one client is its own process.
pub fn max_message_for_models() -> usize {
    usize::try_from(tunehub_onnx::MAX_MODEL_BYTES)
        .unwrap_or(usize::MAX)
        .saturating_add(MODEL_REQUEST_HEADROOM)
}

/// The request's input shapes and batch, checked as the command line checks its flags.
pub fn input_shapes(m: &pb::ModelSource) -> Result<InputShapes, Status> {
    let bad = |msg: String| Err(Status::invalid_argument(msg));
    if let Some(b) = m.batch
        && !(1..=MAX_MODEL_BATCH).contains(&b)
    {
        return bad(format!("model.batch {b}: give 1 to {MAX_MODEL_BATCH}"));
    }
    if m.shapes.len() > MAX_SHAPES {
        return bad(format!(
            "{} input shapes: at most {MAX_SHAPES}",
            m.shapes.len()
        ));
    }
    let mut shapes: Vec<(String, Vec<i64>)> = vec![];
    for s in &m.shapes {
        check_len("an input shape's name", &s.name, MAX_KEY)?;
        if s.name.is_empty() {
            return bad("an input shape has no name".into());
        }
        if shapes.iter().any(|(n, _)| *n == s.name) {
            return bad(format!("input '{}' is given two shapes", s.name));
        }
        if s.dims.is_empty() || s.dims.len() > MAX_SHAPE_DIMS {
            return bad(format!(
                "input '{}': {} dimensions; give 1 to {MAX_SHAPE_DIMS}",
                s.name,
                s.dims.len()
            ));
        }
        if let Some(d) = s.dims.iter().find(|&&d| d < 1) {
            return bad(format!(
                "input '{}': dimension {d} is not a positive size",
                s.name
            ));
        }
        shapes.push((s.name.clone(), s.dims.clone()));
    }
    Ok(InputShapes {
        batch: m.batch,
        shapes,
    })
}

/// The layout the model's f32 convolutions are extracted in, `model.layout`: "nchw", "nhwc"
/// or "winograd"; `None` for "auto" (also ""): tunehub's choice. A job then tunes the tasks
/// of nhwc and winograd together; a build takes the layout whose tuned kernels take least,
/// each convolution with a Winograd form in its faster tuned form
/// ([`Api::build_model`](super::Api)).
pub fn layout(m: &pb::ModelSource) -> Result<Option<Layout>, Status> {
    match m.layout.as_str() {
        "" | "auto" => Ok(None),
        l => {
            check_len("model.layout", l, MAX_KEY)?;
            l.parse()
                .map(Some)
                .map_err(|e| Status::invalid_argument(format!("model.layout: {e} (or auto)")))
        }
    }
}

/// An extraction error as the API says it. The library's messages name the command line's
/// flags where the user has to act; here they name the request's fields instead.
pub fn import_status(e: ImportError) -> Status {
    let msg = match e {
        ImportError::DynamicDim { input, dim, param } => format!(
            "the model's input '{input}' dimension {dim} is dynamic ('{param}'): give it a value \
             with model.batch (the first dimension) or model.shapes ({input}=D0xD1x...)"
        ),
        ImportError::NotASize {
            input, dim, value, ..
        } => format!(
            "the model's input '{input}' dimension {dim} is {value}, not a size (a tensor with \
             no elements, or an exporter's mark for a dynamic dimension): give it a value with \
             model.shapes ({input}=D0xD1x...){}",
            if dim == 0 { " or model.batch" } else { "" }
        ),
        ImportError::BadShape { name, msg } => format!("model.shapes '{name}': {msg}"),
        e => format!("the model: {e}"),
    };
    Status::invalid_argument(msg)
}

/// The job's tasks: each task's workload (the command line's conversion, so that both ways of
/// submitting a model give the same keys), its weight (occurrences) and `trials`.
pub fn task_specs(list: &TaskList, trials: u32) -> Vec<pb::TaskSpec> {
    list.tasks
        .iter()
        .map(|t| pb::TaskSpec {
            workload: Some(crate::workload::of_net_task(t)),
            trials,
            weight: f64::from(t.weight),
            alternative: t.alternative,
        })
        .collect()
}

/// Each task's memory (`checks::memory`), refused naming the task by its label and nodes:
/// `submit_job` would name it only by its index and workload.
pub(super) fn check_task_sizes(list: &TaskList) -> Result<(), Status> {
    for (i, t) in list.tasks.iter().enumerate() {
        let task = t
            .task()
            .map_err(|e| Status::internal(format!("task {i} ({}): {e}", t.label)))?;
        check_workload_bytes(&task).map_err(|e| {
            let more = t.nodes.len().saturating_sub(1);
            let others = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            Status::invalid_argument(format!(
                "the model's task {i} ({}, node '{}'{others}): {e}: give a smaller model.batch \
                 or model.shapes",
                t.label,
                t.nodes.first().map_or("", String::as_str)
            ))
        })?;
    }
    Ok(())
}

/// Extracts the model's tasks off the async threads (parsing and shape inference are blocking
/// CPU work), at most `EXTRACTING`'s permits at a time.
async fn extract(onnx: Vec<u8>, shapes: InputShapes, how: Extraction) -> Result<TaskList, Status> {
    // The semaphore is a static that is never closed: acquiring cannot fail.
    let _permit = EXTRACTING
        .acquire()
        .await
        .map_err(|e| Status::internal(e.to_string()))?;
    tokio::task::spawn_blocking(move || tunehub_onnx::extract(&onnx, &shapes, &how))
        .await
        .map_err(|e| Status::internal(format!("extracting the model's tasks failed: {e}")))?
        .map_err(import_status)
}

impl Api {
    /// The model's bytes: some, and no more than this server takes.
    pub(super) fn check_model_size(&self, model: &pb::ModelSource) -> Result<(), Status> {
        if model.onnx.is_empty() {
            return Err(Status::invalid_argument(
                "model.onnx is empty: give the model file's bytes",
            ));
        }
        let max = max_model_bytes(self.limits.max_message_bytes);
        if model.onnx.len() > max {
            return Err(Status::invalid_argument(format!(
                "the model is {} bytes; this server takes models up to {max} bytes (its \
                 max_message_bytes, {}, less {MODEL_REQUEST_HEADROOM} for the rest of the \
                 request)",
                model.onnx.len(),
                self.limits.max_message_bytes
            )));
        }
        Ok(())
    }

    /// The job's settings checked before the model is parsed, so that a typo in a target or a
    /// priority is answered at once; `submit_job` checks them again with the tasks.
    async fn check_job_settings(&self, job: &pb::SubmitRequest) -> Result<(), Status> {
        check_len("name", &job.name, MAX_NAME)?;
        if job.batch_size > MAX_BATCH {
            return Err(Status::invalid_argument(format!(
                "batch_size {} is more than {MAX_BATCH}",
                job.batch_size
            )));
        }
        if !(MIN_PRIORITY..=MAX_PRIORITY).contains(&job.priority) {
            return Err(Status::invalid_argument(format!(
                "priority {} is out of range: {MIN_PRIORITY} to {MAX_PRIORITY}",
                job.priority
            )));
        }
        if pb::SchedulerKind::try_from(job.scheduler).is_err() {
            return Err(Status::invalid_argument(format!(
                "unknown scheduler {}",
                job.scheduler
            )));
        }
        measure_options(job.measure.as_ref())?;
        self.submit_targets(job).await.map(|_| ())
    }

    /// Checks the model, extracts its tasks and submits them with the request's job settings,
    /// owned by `owner`.
    pub async fn submit_model_job(
        &self,
        req: pb::SubmitModelRequest,
        owner: &str,
    ) -> Result<pb::SubmitModelResponse, Status> {
        let Some(model) = req.model else {
            return Err(Status::invalid_argument(
                "no model: give model.onnx, the model file's bytes",
            ));
        };
        let job = req.job.unwrap_or_default();
        if !job.tasks.is_empty() || job.range.is_some() {
            return Err(Status::invalid_argument(
                "job.tasks and job.range must be empty: the model gives the tasks",
            ));
        }
        self.check_model_size(&model)?;
        if model.trials_per_task == 0 {
            return Err(Status::invalid_argument(
                "model.trials_per_task must be at least 1",
            ));
        }
        let shapes = input_shapes(&model)?;
        let how = Extraction {
            strict: model.strict,
            layout: layout(&model)?,
        };
        self.check_job_settings(&job).await?;
        let bytes = model.onnx.len();
        let list = extract(model.onnx, shapes, how).await?;
        check_task_sizes(&list)?;
        // A model's tasks are timed as the network runs them: cold, unless the job says.
        let measure = Some(measure_over(&MeasureOptions::cold(), job.measure.as_ref()));
        let submit = pb::SubmitRequest {
            tasks: task_specs(&list, model.trials_per_task),
            measure,
            ..job
        };
        let jobs = self.submit_job(&submit, owner).await?;
        tracing::info!(
            bytes,
            tasks = list.tasks.len(),
            skipped = list.skipped.len(),
            "model submitted"
        );
        Ok(pb::SubmitModelResponse {
            job: jobs.first().cloned(),
            jobs,
            skipped: list
                .skipped
                .into_iter()
                .map(|s| pb::SkippedNode {
                    node: s.node,
                    op: s.op,
                    reason: s.reason,
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tunehub_onnx::builder::ModelBuilder;

    fn source(onnx: Vec<u8>) -> pb::ModelSource {
        pb::ModelSource {
            onnx,
            trials_per_task: 1,
            ..Default::default()
        }
    }

    #[test]
    fn a_models_measure_options_are_the_jobs_over_cold() {
        let cold = MeasureOptions::cold();
        let o = measure_options(Some(&measure_over(&cold, None))).unwrap();
        assert!(o.flush_cache);
        assert_eq!(
            (o.number, o.repeat, o.min_repeat_ms, o.warmup),
            (cold.number, cold.repeat, cold.min_repeat_ms, cold.warmup)
        );
        let given = pb::MeasureOptions {
            flush_cache: Some(false),
            number: Some(3),
            ..Default::default()
        };
        let o = measure_options(Some(&measure_over(&cold, Some(&given)))).unwrap();
        assert!(!o.flush_cache);
        assert_eq!((o.number, o.repeat), (3, cold.repeat));
    }

    #[test]
    fn shapes_are_checked_at_the_door() {
        let shape = |name: &str, dims: &[i64]| pb::InputShape {
            name: name.into(),
            dims: dims.to_vec(),
        };
        let ok = pb::ModelSource {
            batch: Some(4),
            shapes: vec![shape("x", &[1, 3, 8, 8])],
            ..source(vec![1])
        };
        let s = input_shapes(&ok).unwrap();
        assert_eq!(s.batch, Some(4));
        assert_eq!(s.shapes, [("x".to_string(), vec![1, 3, 8, 8])]);
        let refused = |m: pb::ModelSource, want: &str| {
            let e = input_shapes(&m).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument);
            assert!(
                e.message().contains(want),
                "{want:?} not in {}",
                e.message()
            );
        };
        refused(
            pb::ModelSource {
                batch: Some(0),
                ..ok.clone()
            },
            "model.batch 0",
        );
        refused(
            pb::ModelSource {
                shapes: vec![shape("x", &[1]), shape("x", &[2])],
                ..ok.clone()
            },
            "'x' is given two shapes",
        );
        refused(
            pb::ModelSource {
                shapes: vec![shape("x", &[1, 0])],
                ..ok.clone()
            },
            "dimension 0 is not a positive size",
        );
        refused(
            pb::ModelSource {
                shapes: vec![shape("", &[1])],
                ..ok.clone()
            },
            "no name",
        );
        refused(
            pb::ModelSource {
                shapes: vec![shape("x", &[])],
                ..ok
            },
            "0 dimensions",
        );
    }

    #[test]
    fn the_request_leaves_room_for_the_model() {
        assert_eq!(max_model_bytes(16 << 20), (16 << 20) - (64 << 10));
        assert_eq!(max_model_bytes(1000), 0, "a tiny limit refuses every model");
        assert_eq!(
            max_model_bytes(usize::MAX) as u64,
            tunehub_onnx::MAX_MODEL_BYTES,
            "no model is larger than protobuf allows"
        );
    }

    #[test]
    fn a_layout_is_one_of_the_names_or_auto() {
        let with = |l: &str| {
            layout(&pb::ModelSource {
                layout: l.into(),
                ..source(vec![])
            })
        };
        assert_eq!(with("").unwrap(), None);
        assert_eq!(with("auto").unwrap(), None);
        assert_eq!(with("nhwc").unwrap(), Some(Layout::Nhwc));
        assert_eq!(with("nchw").unwrap(), Some(Layout::Nchw));
        let e = with("NCHW16c").unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(
            e.message().contains("model.layout")
                && e.message().contains("nchw, nhwc or winograd (or auto)"),
            "{}",
            e.message()
        );
    }

    #[tokio::test]
    async fn extraction_errors_name_the_request_fields_and_the_node() {
        let mut b = ModelBuilder::new();
        let x = b.input("x", &[None, Some(8)]);
        let y = b.node("Relu", &[&x], vec![]);
        b.output(&y);
        let dynamic = b.encode();
        let e = extract(
            dynamic.clone(),
            InputShapes::default(),
            Extraction::lenient(),
        )
        .await
        .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(
            e.message().contains("input 'x' dimension 0 is dynamic")
                && e.message().contains("model.batch"),
            "{}",
            e.message()
        );
        let with_batch = InputShapes {
            batch: Some(2),
            shapes: vec![],
        };
        let list = extract(dynamic, with_batch, Extraction::lenient())
            .await
            .unwrap();
        assert_eq!(list.tasks.len(), 1);

        let e = extract(
            b"not a model".to_vec(),
            InputShapes::default(),
            Extraction::lenient(),
        )
        .await
        .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(
            e.message().contains("not a valid ONNX model"),
            "{}",
            e.message()
        );

        let mut b = ModelBuilder::new();
        let x = b.input_fixed("x", &[1, 8]);
        let s = b.node("Sin", &[&x], vec![]);
        let sin = b.last_node().to_string();
        b.output(&s);
        let e = extract(b.encode(), InputShapes::default(), Extraction::strict())
            .await
            .unwrap_err();
        assert!(
            e.message()
                .contains(&format!("node '{sin}' (Sin): unsupported operator")),
            "{}",
            e.message()
        );
    }
}
