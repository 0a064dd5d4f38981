//! `Jobs.SubmitModel`: an ONNX model sent whole, its tasks extracted by the server. The same
//! model submitted by `tunehub submit MODEL.onnx` (extracted by the command line) and through
//! SubmitModel gives the same tasks: workload keys, descriptions, options, weights, budgets.
//! Bad models are refused at the door as INVALID_ARGUMENT naming what was wrong, nothing stored.
//!
//! The two submissions go to two servers, each with its own database, so that the second one's
//! workloads cannot be the first one's rows read back.

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tonic::Code;
use tunehub::client::Clients;
use tunehub_engine::measure::MeasureOptions;
use tunehub_onnx::builder::ModelBuilder;
use tunehub_onnx::nets;
use tunehub_proto::v1 as pb;
use tunehub_server::records::SqlStore;
use tunehub_tests::cli::{stdout_ok, tunehub};
use tunehub_tests::{Server, TOKEN, binaries, code_of, quick, sqlite_path, wait_final};

/// `tunehub submit MODEL --trials 2 ARGS...` against `server`; the job's id.
fn cli_submit(server: &Server, model: &Path, args: &[&str]) -> String {
    let out = Command::new(binaries::tunehub())
        .arg("submit")
        .arg(model)
        .args(["--trials", "2", "--name", "m"])
        .args(args)
        .env("TUNEHUB_SERVER", server.url())
        .env("TUNEHUB_TOKEN", TOKEN)
        .env_remove("TUNEHUB_CONFIG")
        .output()
        .expect("tunehub runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string()
}

fn model_req(
    onnx: Vec<u8>,
    batch: Option<i64>,
    shapes: &[(&str, &[i64])],
) -> pb::SubmitModelRequest {
    pb::SubmitModelRequest {
        model: Some(pb::ModelSource {
            onnx,
            batch,
            shapes: shapes
                .iter()
                .map(|(name, dims)| pb::InputShape {
                    name: name.to_string(),
                    dims: dims.to_vec(),
                })
                .collect(),
            strict: false,
            trials_per_task: 2,
            layout: String::new(),
        }),
        job: Some(pb::SubmitRequest {
            target: "local".into(),
            measure: Some(quick()),
            name: "m".into(),
            ..Default::default()
        }),
    }
}

/// What must agree between the two ways, per task.
#[derive(Debug, PartialEq)]
struct TaskView {
    key: String,
    description: String,
    layout_free: Vec<String>,
    weight: f64,
    trials: u32,
    flops: u64,
}

fn tasks_of(job: &pb::Job) -> Vec<TaskView> {
    job.tasks
        .iter()
        .map(|t| TaskView {
            key: t.workload_key.clone(),
            description: t.description.clone(),
            layout_free: t
                .options
                .as_ref()
                .map(|o| o.layout_free.clone())
                .unwrap_or_default(),
            weight: t.weight,
            trials: t.trials,
            flops: t.flops,
        })
        .collect()
}

/// A model, the command line's flags for it, and the request's batch and shapes.
struct Case {
    name: &'static str,
    onnx: Vec<u8>,
    flags: &'static [&'static str],
    batch: Option<i64>,
    shapes: &'static [(&'static str, &'static [i64])],
}

fn case(
    name: &'static str,
    onnx: Vec<u8>,
    flags: &'static [&'static str],
    batch: Option<i64>,
    shapes: &'static [(&'static str, &'static [i64])],
) -> Case {
    Case {
        name,
        onnx,
        flags,
        batch,
        shapes,
    }
}

async fn cancel(c: &mut Clients, id: &str) {
    // Only their task lists matter here: no need to tune them.
    c.jobs
        .cancel(pb::CancelJobRequest { id: id.into() })
        .await
        .unwrap();
}

/// A small network with a dynamic batch dimension: two convolutions of one shape (one task of
/// weight 2), a pooling.
fn dynamic_model() -> Vec<u8> {
    let mut b = ModelBuilder::new();
    let x = b.input("x", &[None, Some(4), Some(6), Some(6)]);
    let y = b.conv_bn(&x, 4, 4, 3, 1, 1, 1, true);
    let y = b.conv_bn(&y, 4, 4, 3, 1, 1, 1, true);
    let g = b.node("GlobalAveragePool", &[&y], vec![]);
    b.output(&g);
    b.encode()
}

#[tokio::test]
async fn a_model_submitted_whole_is_the_command_lines_task_list() {
    let dir = tempfile::tempdir().unwrap();
    let by_cli = Server::start(&sqlite_path(dir.path(), "cli.db"), "cli", &[]);
    let by_api = Server::start(&sqlite_path(dir.path(), "api.db"), "api", &[]);
    let (mut cli, mut api) = (by_cli.client().await, by_api.client().await);

    let cases = [
        // Text forms and library operators, packed weights, epilogues, glue.
        case("tiny", nets::tiny(), &[], None, &[]),
        case("tiny_rest", nets::tiny_rest(), &[], None, &[]),
        case(
            "mobilenet_v2_block",
            nets::mobilenet_v2_block(),
            &[],
            None,
            &[],
        ),
        case(
            "batch",
            dynamic_model(),
            &["--model-batch", "2"],
            Some(2),
            &[],
        ),
        case(
            "shape",
            dynamic_model(),
            &["--shape", "x=3x4x6x6"],
            None,
            &[("x", &[3, 4, 6, 6])],
        ),
    ];
    for Case {
        name,
        onnx,
        flags,
        batch,
        shapes,
    } in cases
    {
        let path = dir.path().join(format!("{name}.onnx"));
        std::fs::write(&path, &onnx).unwrap();
        let id = cli_submit(&by_cli, &path, flags);
        let from_cli = tunehub_tests::get(&mut cli, &id).await;
        cancel(&mut cli, &id).await;

        let resp = api
            .jobs
            .submit_model(model_req(onnx, batch, shapes))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .into_inner();
        let job = resp.job.expect("the job");
        cancel(&mut api, &job.id).await;
        assert_eq!(resp.jobs.len(), 1, "{name}");
        assert!(resp.skipped.is_empty(), "{name}: {:?}", resp.skipped);
        assert!(!job.tasks.is_empty(), "{name}");
        assert_eq!(tasks_of(&job), tasks_of(&from_cli), "{name}");
        assert_eq!(job.name, "m", "{name}");
        if name == "batch" || name == "shape" {
            // Two occurrences of one convolution: its weight is 2.
            assert_eq!(job.tasks[0].weight, 2.0, "{name}");
        }
    }
    // The two dynamic cases fixed the batch differently: other workloads.
    let jobs = api
        .jobs
        .list(pb::ListJobsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .jobs;
    assert_eq!(jobs.len(), 5);
    assert_ne!(jobs[0].tasks[0].workload_key, jobs[1].tasks[0].workload_key);
}

/// The number of costs (timed repeats) of every success stored in `db`.
async fn repeats_in(db: &str) -> Vec<usize> {
    let store = SqlStore::open(db).await.unwrap();
    let all = store.export_records(None, None).await.unwrap();
    store.close().await;
    all.iter()
        .filter(|r| r.error_code == 0)
        .map(|r| r.costs.len())
        .collect()
}

/// A model of one task: a convolution with its batch norm folded and a ReLU.
fn one_conv_model() -> Vec<u8> {
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[1, 4, 6, 6]);
    let y = b.conv_bn(&x, 4, 4, 3, 1, 1, 1, true);
    b.output(&y);
    b.encode()
}

#[tokio::test]
async fn a_models_tasks_are_timed_cold_unless_the_job_says_otherwise() {
    // Cold is Ansor's network set-up: one run per repeat, each from a flushed cache. The noise
    // guard is turned off (tests share the machine); every other field is the model's default.
    let cold = MeasureOptions::cold();
    assert!(
        cold.flush_cache && cold.number == 1 && cold.repeat != MeasureOptions::default().repeat
    );
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("conv.onnx");
    std::fs::write(&model, one_conv_model()).unwrap();

    // Through SubmitModel, the measure options naming only the guard.
    let db = sqlite_path(dir.path(), "api.db");
    let server = Server::start(&db, "api", &[]);
    let mut c = server.client().await;
    let mut req = model_req(one_conv_model(), None, &[]);
    req.job.as_mut().unwrap().measure = Some(pb::MeasureOptions {
        noise_threshold: Some(0.0),
        ..Default::default()
    });
    let job = c
        .jobs
        .submit_model(req)
        .await
        .unwrap()
        .into_inner()
        .job
        .unwrap();
    let done = wait_final(&mut c, &job.id, Duration::from_secs(300)).await;
    assert_eq!(done.state, pb::JobState::Done as i32, "{done:?}");
    let repeats = repeats_in(&db).await;
    assert!(!repeats.is_empty());
    // A candidate measured once keeps its repeats' costs; a confirmed best, its second run's
    // too, and a disputed one a tie-break's: one to three times the repeats.
    let timed = |repeats: &[usize], want: u32| {
        let want = want as usize;
        repeats
            .iter()
            .all(|&n| n % want == 0 && (1..=3).contains(&(n / want)))
    };
    assert!(timed(&repeats, cold.repeat), "{repeats:?}");

    // `tunehub tune MODEL.onnx`: cold as well, and warm when told.
    for (name, flags, want) in [
        ("cold.db", &[][..], cold.repeat),
        (
            "warm.db",
            &["--warm-cache"][..],
            MeasureOptions::default().repeat,
        ),
    ] {
        let db = dir.path().join(name);
        let (model, db) = (model.to_str().unwrap(), db.to_str().unwrap());
        let mut args = vec![
            "tune",
            model,
            "--trials",
            "1",
            "--noise-threshold",
            "0",
            "--db",
            db,
        ];
        args.extend_from_slice(flags);
        stdout_ok(&tunehub(&args));
        let repeats = repeats_in(&sqlite_path(dir.path(), name)).await;
        assert!(!repeats.is_empty(), "{name}");
        assert!(timed(&repeats, want), "{name}: {repeats:?}");
    }
}

#[tokio::test]
async fn bad_models_are_refused_at_the_door_and_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // 200 KB messages: models up to 200000 - 64 KiB bytes.
    let server = Server::start(
        &sqlite_path(dir.path(), "bad.db"),
        "bad",
        &["--max-message-bytes", "200000"],
    );
    let mut c = server.client().await;
    let limit = 200_000 - (64 << 10);
    let refused = |r: Result<tonic::Response<pb::SubmitModelResponse>, tonic::Status>,
                   want: &[&str]| {
        let (code, msg) = code_of(r);
        assert_eq!(code, Code::InvalidArgument, "{msg}");
        for w in want {
            assert!(msg.contains(w), "{w:?} not in {msg:?}");
        }
    };

    // Over the model limit, within the message limit: refused by its size, unparsed (these
    // bytes are no model at all).
    let big = vec![0x08u8; limit + 1];
    let r = c.jobs.submit_model(model_req(big, None, &[])).await;
    refused(
        r,
        &[
            &format!("the model is {} bytes", limit + 1),
            &format!("up to {limit} bytes"),
        ],
    );
    let r = c
        .jobs
        .submit_model(model_req(b"not a model".to_vec(), None, &[]))
        .await;
    refused(r, &["not a valid ONNX model"]);
    let r = c.jobs.submit_model(model_req(vec![], None, &[])).await;
    refused(r, &["model.onnx is empty"]);
    let r = c
        .jobs
        .submit_model(pb::SubmitModelRequest {
            model: None,
            ..model_req(vec![], None, &[])
        })
        .await;
    refused(r, &["no model"]);

    // A dynamic dimension without a value; a shape for an input the model lacks.
    let r = c
        .jobs
        .submit_model(model_req(dynamic_model(), None, &[]))
        .await;
    refused(r, &["input 'x' dimension 0 is dynamic", "model.batch"]);
    let r = c
        .jobs
        .submit_model(model_req(dynamic_model(), None, &[("y", &[1, 4, 6, 6])]))
        .await;
    refused(r, &["model.shapes 'y'", "no such input"]);

    // An unsupported operator: an error under strict, naming the node; alone, no task.
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[1, 8]);
    let s = b.node("Sin", &[&x], vec![]);
    let sin = b.last_node().to_string();
    b.output(&s);
    let only_sin = b.encode();
    let mut strict = model_req(only_sin.clone(), None, &[]);
    strict.model.as_mut().unwrap().strict = true;
    let r = c.jobs.submit_model(strict).await;
    refused(r, &[&format!("node '{sin}' (Sin): unsupported operator")]);
    let r = c.jobs.submit_model(model_req(only_sin, None, &[])).await;
    refused(r, &["yields no task", &format!("node '{sin}'")]);

    // The model gives the tasks: a request with its own is a contradiction.
    let mut with_tasks = model_req(nets::tiny(), None, &[]);
    with_tasks.job.as_mut().unwrap().tasks = vec![tunehub_tests::task("matmul(4,4,4)", 1)];
    let r = c.jobs.submit_model(with_tasks).await;
    refused(r, &["job.tasks and job.range must be empty"]);
    // The job's settings are checked as Submit checks them.
    let mut bad_priority = model_req(nets::tiny(), None, &[]);
    bad_priority.job.as_mut().unwrap().priority = 11;
    let r = c.jobs.submit_model(bad_priority).await;
    refused(r, &["priority 11"]);
    // Checked before the model is parsed: an unknown target is said first, whatever the bytes.
    let mut unknown_target = model_req(b"not a model".to_vec(), None, &[]);
    unknown_target.job.as_mut().unwrap().target = "nope-target".into();
    let (code, msg) = code_of(c.jobs.submit_model(unknown_target).await);
    assert_eq!(code, Code::NotFound, "{msg}");
    assert!(msg.contains("'nope-target'"), "{msg}");

    let jobs = c
        .jobs
        .list(pb::ListJobsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .jobs;
    assert!(jobs.is_empty(), "{jobs:?}");
}

/// Issue 64: a model's task too large to measure is refused naming the task and its node with
/// its size; a MatMul whose operands do not multiply is named with their shapes; an input
/// dimension of 0 is called 0. Nothing is stored.
#[tokio::test]
async fn a_task_too_large_or_broken_is_refused_naming_its_node() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&sqlite_path(dir.path(), "large.db"), "large", &[]);
    let mut c = server.client().await;
    let refused = |r: Result<tonic::Response<pb::SubmitModelResponse>, tonic::Status>,
                   want: &[&str]| {
        let (code, msg) = code_of(r);
        assert_eq!(code, Code::InvalidArgument, "{msg}");
        for w in want {
            assert!(msg.contains(w), "{w:?} not in {msg:?}");
        }
    };

    // An outer product of two inputs: 2^40 outputs, 4 TiB.
    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[1 << 20, 1]);
    let y = b.input_fixed("y", &[1, 1 << 20]);
    let p = b.node("MatMul", &[&x, &y], vec![]);
    let mm = b.last_node().to_string();
    b.output(&p);
    let r = c.jobs.submit_model(model_req(b.encode(), None, &[])).await;
    refused(
        r,
        &[
            "the model's task 0 (MatMul -> [1048576,1048576]",
            &format!("node '{mm}'"),
            "4.0 TiB",
            "model.batch",
        ],
    );

    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[2, 3]);
    let w = b.weight(&[4, 5]);
    let p = b.node("MatMul", &[&x, &w], vec![]);
    let mm = b.last_node().to_string();
    b.output(&p);
    let r = c.jobs.submit_model(model_req(b.encode(), None, &[])).await;
    refused(
        r,
        &[
            &format!("node '{mm}' (MatMul)"),
            "[2,3]",
            "[4,5] do not multiply",
        ],
    );

    let mut b = ModelBuilder::new();
    let x = b.input_fixed("x", &[1, 0, 4]);
    let s = b.node("Relu", &[&x], vec![]);
    b.output(&s);
    let r = c.jobs.submit_model(model_req(b.encode(), None, &[])).await;
    refused(
        r,
        &["input 'x' dimension 1 is 0, not a size", "model.shapes"],
    );

    let jobs = c
        .jobs
        .list(pb::ListJobsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .jobs;
    assert!(jobs.is_empty(), "{jobs:?}");
}
