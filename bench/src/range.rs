//! `tunehub-bench range`: a shape range tuned as one job (its representative shapes), then
//! held-out shapes of it answered from the range (the representative serving each, its best
//! schedule adapted: what `Query.Best` returns) against tuning each held-out shape alone, cold,
//! with the same trials on a database of its own. Both kernels of a shape are measured here,
//! in turns, with the default measure options (the best of 3 turns each): the adapted answer's
//! GFLOP/s as a share of the shape's own tuned best (median, minimum, spread), and the range's
//! total trials against those of tuning the held-out shapes, and every shape of the range.

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::json;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Instant;
use tunehub::client::Clients;
use tunehub::embedded::{Embedded, EmbeddedOptions};
use tunehub::workload;
use tunehub_engine::measure::{ErrorCode, MeasureOptions, Measurer};
use tunehub_engine::schedule::Schedule;
use tunehub_engine::search::DEFAULT_POPULATION;
use tunehub_engine::target::Target;
use tunehub_engine::transfer::ShapeRange;
use tunehub_proto::v1 as pb;
use tunehub_server::config::Limits;

#[derive(Args)]
pub struct RangeArgs {
    /// The range (the command line's spelling: the operator's weight packed by default).
    #[arg(long, default_value = "matmul(m=16..512,n=768,k=768)")]
    range: String,
    /// Held-out shapes: values of the ranged extents, `V` or `VxW` for two (comma separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "24,40,80,100,160,300,400"
    )]
    held_out: Vec<String>,
    /// Candidates per representative, and per held-out shape tuned alone.
    #[arg(long, default_value_t = 200)]
    trials: u32,
    /// Candidates per round.
    #[arg(long, default_value_t = tunehub_engine::search::DEFAULT_BATCH as u32)]
    batch: u32,
    /// Evolutionary population per round.
    #[arg(long, default_value_t = DEFAULT_POPULATION)]
    population: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where the report and the JSON go.
    #[arg(long, default_value = "bench-out/range")]
    out: PathBuf,
}

/// An embedded server on a throwaway SQLite file (what `tunehub tune` runs) and a client.
async fn embedded(db: &std::path::Path, a: &RangeArgs, tasks: u32) -> Result<Embedded> {
    Embedded::start(EmbeddedOptions {
        population: a.population,
        limits: Limits {
            max_trials_per_job: a.trials.saturating_mul(tasks),
            max_tasks_per_job: tasks,
            ..Limits::default()
        },
        ..EmbeddedOptions::new(db.to_string_lossy(), Target::detect())
    })
    .await
}

/// Submits `req`, runs it on the embedded server to its end; the job and its wall seconds.
async fn run_job(service: &mut Embedded, req: pb::SubmitRequest) -> Result<(pb::Job, f64)> {
    let start = Instant::now();
    let mut done: HashMap<u32, u32> = HashMap::new();
    let job = service
        .run(req, |e| {
            if let pb::job_event::Event::Round(t) = e {
                done.insert(t.index, t.trials_done);
                eprint!("\r{:>6} trials", done.values().sum::<u32>());
            }
            ControlFlow::Continue(())
        })
        .await?;
    eprintln!();
    Ok((job, start.elapsed().as_secs_f64()))
}

fn request(
    tasks: Vec<pb::TaskSpec>,
    range: Option<pb::ShapeRange>,
    a: &RangeArgs,
) -> pb::SubmitRequest {
    pb::SubmitRequest {
        tasks,
        range,
        target: "local".into(),
        measure: None,
        batch_size: a.batch,
        seed: a.seed,
        scheduler: pb::SchedulerKind::Gradient as i32,
        name: "tunehub-bench range".into(),
        priority: 0,
        targets: vec![],
        cost_model: String::new(),
    }
}

async fn best_steps(c: &mut Clients, w: &pb::Workload) -> Result<pb::BestResponse> {
    Ok(c.query
        .best(pb::BestRequest {
            workload: Some(w.clone()),
            omit_kernel: true,
            ..Default::default()
        })
        .await?
        .into_inner())
}

/// One held-out shape's figures.
struct Shape {
    spec: String,
    served_by: String,
    adapted_gflops: f64,
    own_gflops: f64,
}

pub async fn run(a: RangeArgs) -> Result<()> {
    let req_range = workload::range_from_spec(&a.range, a.trials)?;
    let parsed = ShapeRange::parse(&req_range.spec)?;
    let held: Vec<Vec<i64>> = a
        .held_out
        .iter()
        .map(|s| {
            s.split('x')
                .map(|v| v.trim().parse::<i64>())
                .collect::<Result<Vec<i64>, _>>()
                .with_context(|| format!("held-out shape {s:?}"))
        })
        .collect::<Result<_>>()?;
    for v in &held {
        if !parsed.contains(v) {
            bail!("held-out shape {v:?} is not in {}", parsed.spec());
        }
    }
    let reps = parsed.representatives();
    let held: Vec<Vec<i64>> = held.into_iter().filter(|v| !reps.contains(v)).collect();
    let workloads: Vec<pb::Workload> = held
        .iter()
        .map(|v| pb::Workload {
            kind: Some(pb::workload::Kind::OpSpec(parsed.spec_at(v))),
            options: req_range.options.clone(),
        })
        .collect();

    // The range, tuned through its representatives.
    let dir = tempfile::tempdir()?;
    let mut service = embedded(&dir.path().join("range.db"), &a, reps.len() as u32).await?;
    eprintln!("range {}: {} representatives", parsed.spec(), reps.len());
    let (range_job, range_wall) =
        run_job(&mut service, request(vec![], Some(req_range.clone()), &a)).await?;
    let range_trials: u32 = range_job.tasks.iter().map(|t| t.trials_done).sum();
    let mut adapted = vec![];
    for w in &workloads {
        let r = best_steps(&mut service.clients, w).await?;
        let t = r
            .transfer
            .context("a held-out shape answered without its range")?;
        adapted.push((
            r.record.context("no record")?.steps_json,
            t.source_description,
        ));
    }
    service.shutdown().await?;

    // Each held-out shape tuned alone, cold (a database of its own: no neighbour, no model).
    let mut service = embedded(&dir.path().join("alone.db"), &a, held.len() as u32).await?;
    let tasks = workloads
        .iter()
        .map(|w| pb::TaskSpec {
            workload: Some(w.clone()),
            trials: a.trials,
            weight: 1.0,
            alternative: false,
        })
        .collect();
    eprintln!("{} held-out shapes tuned alone", held.len());
    let (alone_job, alone_wall) = run_job(&mut service, request(tasks, None, &a)).await?;
    let alone_trials: u32 = alone_job.tasks.iter().map(|t| t.trials_done).sum();
    let mut own = vec![];
    for w in &workloads {
        own.push(
            best_steps(&mut service.clients, w)
                .await?
                .record
                .context("no own record")?
                .steps_json,
        );
    }
    service.shutdown().await?;

    // Both kernels of each shape measured here, in turns.
    let mut measurer = Measurer::new(&Target::detect(), MeasureOptions::default());
    let mut shapes = vec![];
    for (i, w) in workloads.iter().enumerate() {
        let task = tunehub_server::workload::task_of(w)
            .context("an op spec")?
            .map_err(anyhow::Error::msg)?;
        let scheds = [
            Schedule::from_json(&adapted[i].0)?,
            Schedule::from_json(&own[i])?,
        ];
        let mut bestc = [f64::INFINITY; 2];
        for _ in 0..3 {
            for (j, r) in measurer.measure(&task, &scheds).iter().enumerate() {
                if r.error != ErrorCode::NoError {
                    bail!("{}: kernel {j} failed: {}", task.desc, r.error_msg);
                }
                let mean = r.costs.iter().sum::<f64>() / r.costs.len().max(1) as f64;
                bestc[j] = bestc[j].min(mean);
            }
        }
        let g = |s: f64| task.flops as f64 / s / 1e9;
        shapes.push(Shape {
            spec: task.desc.clone(),
            served_by: adapted[i].1.clone(),
            adapted_gflops: g(bestc[0]),
            own_gflops: g(bestc[1]),
        });
    }

    let mut shares: Vec<f64> = shapes
        .iter()
        .map(|s| s.adapted_gflops / s.own_gflops)
        .collect();
    shares.sort_by(f64::total_cmp);
    let median = if shares.is_empty() {
        f64::NAN
    } else if shares.len() % 2 == 1 {
        shares[shares.len() / 2]
    } else {
        (shares[shares.len() / 2 - 1] + shares[shares.len() / 2]) / 2.0
    };
    let every: u64 = parsed
        .ranged
        .iter()
        .map(|r| (r.hi - r.lo + 1) as u64)
        .product::<u64>()
        * u64::from(a.trials);
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# {}: {} representatives, {} trials each\n",
        parsed.spec(),
        reps.len(),
        a.trials
    );
    let _ = writeln!(
        md,
        "| held-out shape | served by | adapted GFLOP/s | own tuned GFLOP/s | share |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|");
    for s in &shapes {
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {:.1} | {:.2} |",
            s.spec,
            s.served_by,
            s.adapted_gflops,
            s.own_gflops,
            s.adapted_gflops / s.own_gflops
        );
    }
    let _ = writeln!(
        md,
        "\nShare of per-shape tuning: median {median:.2}, minimum {:.2}, spread {:.2}.\n\
         Trials: the range {range_trials} ({range_wall:.0} s) for every shape of it; the {} \
         held-out shapes alone {alone_trials} ({alone_wall:.0} s); every shape of the range \
         tuned alone would be {every}.",
        shares.first().copied().unwrap_or(f64::NAN),
        shares.last().copied().unwrap_or(f64::NAN) - shares.first().copied().unwrap_or(f64::NAN),
        shapes.len()
    );
    std::fs::create_dir_all(&a.out)?;
    std::fs::write(a.out.join("range.md"), &md)?;
    let v = json!({
        "range": parsed.spec(),
        "representatives": reps,
        "trials": a.trials,
        "range_trials": range_trials,
        "range_wall_s": range_wall,
        "alone_trials": alone_trials,
        "alone_wall_s": alone_wall,
        "every_shape_trials": every,
        "median_share": median,
        "shapes": shapes.iter().map(|s| json!({
            "spec": s.spec, "served_by": s.served_by, "adapted_gflops": s.adapted_gflops,
            "own_gflops": s.own_gflops,
        })).collect::<Vec<_>>(),
    });
    std::fs::write(a.out.join("range.json"), serde_json::to_string_pretty(&v)?)?;
    print!("{md}");
    Ok(())
}
