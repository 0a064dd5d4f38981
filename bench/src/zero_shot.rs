//! `tunehub-bench query --zero-shot`: the zero-shot answer's latency (issue 29: "with 10,000
//! workloads in the database a zero-shot answer takes at most 5 ms at p99").
//!
//! The database is filled, through `Records.Import` as in `query`, with `--tuned` workloads of
//! five structures (matmul, dense, batch matmul, 3x3 and 1x1 convolutions) at many extents,
//! each with a few records whose steps are real schedules: per structure a few schedules sampled
//! on one shape, adapted to each workload's extents (`transfer::adapt`), so that the answers
//! replay and adapt them as they would a tuned database's. A short tuning job on the server's
//! own machine then saves the target's cost model, so that answers are ranked by it as in
//! service (the costly path: adaptation, lowering, features, prediction).
//!
//! Then `Query.Best` with `allow_transfer` for held-out shapes of the same structures that have
//! no record: each shape's first answer sequentially (p50/p99), the same shapes asked again,
//! with the Kernel, and `--clients` concurrent clients for `--seconds`.

use crate::procs::{self, quantile};
use crate::query::{self, Mix, QueryArgs};
use anyhow::{Context, Result, bail};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tunehub::client::{self, Clients};
use tunehub_engine::ops;
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::Target;
use tunehub_engine::transfer;
use tunehub_proto::v1 as pb;
use tunehub_server::api::records::{record_line, target_line, workload_line};
use tunehub_server::records::{Record, canonical_steps};

/// Schedules sampled per structure, on its base shape; each workload gets `RECORDS` of them.
const BASE_SCHEDULES: usize = 8;
const RECORDS: usize = 3;

/// One structure: its base shape, and a shape drawn from extents lists.
struct Structure {
    name: &'static str,
    base: &'static str,
    draw: fn(&mut Mix) -> String,
}

const SIZES: [i64; 16] = [
    1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
];
const CHANNELS: [i64; 16] = [
    8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768,
];
const IMAGE: [i64; 4] = [7, 14, 28, 56];

fn pick(r: &mut Mix, v: &[i64]) -> i64 {
    v[(r.next() % v.len() as u64) as usize]
}

/// Held-out shapes draw among these too, so that most of their extents were never tuned.
const ODD: [i64; 8] = [3, 12, 24, 40, 80, 100, 300, 600];

fn size(r: &mut Mix, held_out: bool) -> i64 {
    if held_out && r.next().is_multiple_of(2) {
        pick(r, &ODD)
    } else {
        pick(r, &SIZES)
    }
}

fn structures() -> Vec<Structure> {
    vec![
        Structure {
            name: "matmul",
            base: "matmul(m=128,n=128,k=128)",
            draw: |r| {
                let h = r.next().is_multiple_of(3);
                format!("matmul(m={},n={},k={})", size(r, h), size(r, h), size(r, h))
            },
        },
        Structure {
            name: "dense",
            base: "dense(m=64,n=256,k=256)",
            draw: |r| {
                let h = r.next().is_multiple_of(3);
                format!("dense(m={},n={},k={})", size(r, h), size(r, h), size(r, h))
            },
        },
        Structure {
            name: "batch_matmul",
            base: "batch_matmul(b=4,m=64,n=64,k=64)",
            draw: |r| {
                let h = r.next().is_multiple_of(3);
                let b = pick(r, &[1, 2, 4, 8, 12, 16]);
                let (m, n) = (size(r, h), size(r, h));
                format!(
                    "batch_matmul(b={b},m={m},n={n},k={})",
                    pick(r, &SIZES[..10])
                )
            },
        },
        Structure {
            name: "conv3x3",
            base: "conv2d_nchw(n=1,c=64,h=28,w=28,f=64,kh=3,kw=3,stride=1,pad=1,bias=1,relu=1)",
            draw: |r| {
                let (c, f) = (pick(r, &CHANNELS), pick(r, &CHANNELS));
                let (h, w) = (pick(r, &IMAGE), pick(r, &IMAGE));
                format!(
                    "conv2d_nchw(n=1,c={c},h={h},w={w},f={f},kh=3,kw=3,stride=1,pad=1,bias=1,relu=1)"
                )
            },
        },
        Structure {
            name: "conv1x1",
            base: "conv2d_nchw(n=1,c=64,h=28,w=28,f=64,kh=1,kw=1,stride=1,pad=0,bias=1,relu=1)",
            draw: |r| {
                let (c, f) = (pick(r, &CHANNELS), pick(r, &CHANNELS));
                let (h, w) = (pick(r, &IMAGE), pick(r, &IMAGE));
                format!(
                    "conv2d_nchw(n=1,c={c},h={h},w={w},f={f},kh=1,kw=1,stride=1,pad=0,bias=1,relu=1)"
                )
            },
        },
    ]
}

/// The tuned database (as import lines) and the held-out shapes asked about.
pub struct ZeroShotData {
    /// Workload and target lines, then record lines.
    lines: Vec<String>,
    /// Held-out op specs, structures interleaved.
    held_out: Vec<String>,
    workloads: usize,
    records: usize,
}

impl ZeroShotData {
    pub fn generate(a: &QueryArgs) -> Result<ZeroShotData> {
        let host = Target::detect();
        let structs = structures();
        let per = a.tuned.div_ceil(structs.len());
        let mut rng = Mix(a.seed ^ 0x2e70_5407);
        // Distinct shapes per structure: tuned first, then held out (never tuned).
        let mut seen = HashSet::new();
        let mut tuned: Vec<Vec<String>> = vec![];
        let mut held: Vec<Vec<String>> = vec![];
        for s in &structs {
            let (mut t, mut h) = (vec![], vec![]);
            for (want, out) in [(per, &mut t), (a.held_out, &mut h)] {
                let mut misses = 0;
                while out.len() < want && misses < 100_000 {
                    // Held-out shapes are drawn after the tuned ones: never one of them.
                    let spec = (s.draw)(&mut rng);
                    if seen.insert(spec.clone()) {
                        out.push(spec);
                    } else {
                        misses += 1;
                    }
                }
            }
            tuned.push(t);
            held.push(h);
        }
        let target_key = host.key();
        let target_json = serde_json::to_string(&host)?;
        let mut lines = vec![target_line(&target_key, &target_json)];
        let mut records = 0;
        let mut workloads = 0;
        for (si, s) in structs.iter().enumerate() {
            let base = ops::build_op(s.base).with_context(|| s.base.to_string())?;
            let mut sampler = RandomSampler::new(&base, &host, a.seed ^ si as u64);
            let mut bases = vec![];
            let mut seen_steps = HashSet::new();
            for _ in 0..BASE_SCHEDULES * 20 {
                let sched = sampler.sample();
                if seen_steps.insert(sched.to_json()) {
                    bases.push(sched);
                }
                if bases.len() == BASE_SCHEDULES {
                    break;
                }
            }
            // Adapted in parallel: a workload's records are its own work.
            let out = procs::parallel_map(&tuned[si], |i, spec| {
                workload_records(spec, &base, &bases, &target_key, i)
            });
            let mut kept = 0;
            for r in out {
                let Some((w, recs)) = r? else {
                    continue;
                };
                lines.push(w);
                records += recs.len();
                lines.extend(recs);
                kept += 1;
            }
            workloads += kept;
            println!(
                "  {}: {kept} tuned workloads ({} drawn), {} held-out shapes",
                s.name,
                tuned[si].len(),
                held[si].len()
            );
        }
        let mut held_out = vec![];
        for i in 0..a.held_out {
            for h in &held {
                if let Some(s) = h.get(i) {
                    held_out.push(s.clone());
                }
            }
        }
        if held_out.is_empty() {
            bail!("no held-out shape: --held-out 0?");
        }
        Ok(ZeroShotData {
            lines,
            held_out,
            workloads,
            records,
        })
    }
}

type WorkloadLines = Option<(String, Vec<String>)>;

/// A workload's line and its records' lines (`RECORDS` base schedules adapted to it); `None`
/// when none adapts.
fn workload_records(
    spec: &str,
    base: &tunehub_engine::ir::ComputeDag,
    bases: &[Schedule],
    target_key: &str,
    i: usize,
) -> Result<WorkloadLines> {
    let (dag, def) = query::workload_of(spec)?;
    let mut r = Mix(i as u64 ^ 0x5eed);
    let mut recs = vec![];
    let mut steps_seen = HashSet::new();
    for j in 0..bases.len() {
        if recs.len() == RECORDS {
            break;
        }
        let Ok(adapted) = transfer::adapt(&bases[(i + j) % bases.len()], base, &dag) else {
            continue;
        };
        let steps = canonical_steps(&adapted.schedule.to_json())?;
        if !steps_seen.insert(steps.clone()) {
            continue;
        }
        // 1 to 100 GFLOP/s: under any machine's peak bound.
        let seconds = def.flops.max(1) as f64 / (10f64.powf(2.0 * r.unit()) * 1e9);
        recs.push(record_line(&Record {
            id: String::new(),
            workload_key: def.key.clone(),
            target_key: target_key.to_string(),
            schedule_hash: String::new(),
            steps_json: steps,
            mean_cost: None,
            costs: (0..3).map(|_| seconds * (1.0 + 0.05 * r.unit())).collect(),
            error_code: 0,
            error_msg: String::new(),
            noisy: false,
            build_s: 0.2,
            run_s: 0.1,
            worker: Some("local".into()),
            created_at: 1_760_000_000_000 + i as i64,
        }));
    }
    if recs.is_empty() {
        return Ok(None);
    }
    Ok(Some((workload_line(&def), recs)))
}

/// Figures of one database.
pub struct ZeroShotSummary {
    pub workloads: usize,
    pub first_p50_ms: f64,
    pub first_p99_ms: f64,
    pub again_p99_ms: f64,
    pub kernel_p99_ms: f64,
    pub qps: f64,
    pub conc_p50_ms: f64,
    pub conc_p99_ms: f64,
    pub ranked_by: String,
}

pub async fn bench_one(
    a: &QueryArgs,
    data: &Arc<ZeroShotData>,
    server_bin: &Path,
    name: &str,
    db: &str,
    log: &Path,
) -> Result<ZeroShotSummary> {
    println!("\n== {name} (zero-shot): tunehub server --db {db}");
    let (server, cfg, mut c) = query::start_server(a, server_bin, db, log).await?;
    let pid = server.pid();

    let t = Instant::now();
    let (mut new, mut lines_sent) = (0u64, 0usize);
    for chunk in data.lines.chunks(a.import_chunk.max(1)) {
        // A workload's line comes before its records, in this call or an earlier one.
        let r = query::import(&mut c, chunk, 200).await?;
        new += r.records_new;
        lines_sent += chunk.len();
    }
    println!(
        "imported {new} new records (of {}) of {} workloads ({lines_sent} lines) in {:.1} s",
        data.records,
        data.workloads,
        t.elapsed().as_secs_f64()
    );
    model_job(&mut c).await?;

    // The first answer of each structure loads the model: not timed.
    let me = std::process::id();
    for spec in data.held_out.iter().take(5) {
        zero_shot(&mut c, spec, false).await?;
    }
    let mut ranked: BTreeMap<String, usize> = BTreeMap::new();
    let mut phases = vec![];
    for (label, kernel) in [
        ("first answer of each shape", false),
        ("the same shapes again", false),
        ("again, with the Kernel", true),
    ] {
        let (cpu0, my0) = (procs::cpu_seconds(pid), procs::cpu_seconds(me));
        let mut timed = Vec::with_capacity(data.held_out.len());
        for (place, spec) in data.held_out.iter().skip(5).enumerate() {
            let t0 = Instant::now();
            let r = zero_shot(&mut c, spec, kernel).await?;
            timed.push((t0.elapsed().as_secs_f64() * 1e3, place, spec));
            if phases.is_empty() {
                *ranked.entry(r).or_default() += 1;
            }
        }
        // Whether the tail is some shapes or some moments: the slowest answers, with their shapes
        // and their places in the sequence.
        timed.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (ms, place, spec) in timed.iter().take(4) {
            println!("  slow: {ms:.2} ms, answer {place}: {spec}");
        }
        let mut lat: Vec<f64> = timed.iter().map(|(ms, ..)| *ms).collect();
        let n = lat.len().max(1) as f64;
        lat.sort_by(f64::total_cmp);
        println!(
            "sequential, {label}: {} queries, p50 {:.3} ms, p99 {:.3} ms, max {:.2} ms; CPU per query: server {:.0} us, client {:.0} us",
            lat.len(),
            quantile(&lat, 0.5),
            quantile(&lat, 0.99),
            lat.last().copied().unwrap_or(f64::NAN),
            (procs::cpu_seconds(pid) - cpu0) / n * 1e6,
            (procs::cpu_seconds(me) - my0) / n * 1e6,
        );
        phases.push(lat);
    }
    let ranked_by = ranked
        .iter()
        .map(|(k, n)| format!("{k}: {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    println!("ranked by: {ranked_by}");

    // Concurrent clients, each on its own connection, cycling over the held-out shapes.
    let mut conns = Vec::with_capacity(a.clients);
    for _ in 0..a.clients {
        conns.push(client::connect(&cfg).await?);
    }
    let (cpu0, load0) = (procs::cpu_seconds(pid), procs::load());
    let shapes = Arc::clone(data);
    let (all, conc_s) = procs::concurrent(conns, a.seconds, move |mut c, i| {
        let data = Arc::clone(&shapes);
        async move {
            zero_shot(&mut c, &data.held_out[i % data.held_out.len()], false).await?;
            Ok(c)
        }
    })
    .await?;
    let qps = all.len() as f64 / conc_s;
    println!(
        "concurrent: {} clients, {} queries in {conc_s:.2} s = {qps:.0} queries/s, p50 {:.3} ms, p99 {:.3} ms, max {:.2} ms; server CPU per query {:.0} us (load {load0} before, {} after)",
        a.clients,
        all.len(),
        quantile(&all, 0.5),
        quantile(&all, 0.99),
        all.last().copied().unwrap_or(f64::NAN),
        (procs::cpu_seconds(pid) - cpu0) / all.len().max(1) as f64 * 1e6,
        procs::load()
    );
    let (rss, hwm) = procs::rss_mb(pid);
    println!("server RSS {rss:.1} MB (peak {hwm:.1} MB)");
    drop(c);
    server.stop()?;
    Ok(ZeroShotSummary {
        workloads: data.workloads,
        first_p50_ms: quantile(&phases[0], 0.5),
        first_p99_ms: quantile(&phases[0], 0.99),
        again_p99_ms: quantile(&phases[1], 0.99),
        kernel_p99_ms: quantile(&phases[2], 0.99),
        qps,
        conc_p50_ms: quantile(&all, 0.5),
        conc_p99_ms: quantile(&all, 0.99),
        ranked_by,
    })
}

/// A zero-shot Best of `spec` on the server's machine; how it was ranked.
async fn zero_shot(c: &mut Clients, spec: &str, kernel: bool) -> Result<String> {
    let r = c
        .query
        .best(pb::BestRequest {
            workload: Some(pb::Workload {
                kind: Some(pb::workload::Kind::OpSpec(spec.to_string())),
                options: None,
            }),
            target: "local".into(),
            allow_transfer: true,
            omit_kernel: !kernel,
            ..Default::default()
        })
        .await
        .with_context(|| format!("Query.Best of {spec}"))?
        .into_inner();
    match (&r.transfer, r.found) {
        (Some(t), true) => Ok(t.ranked_by.clone()),
        _ => bail!("{spec}: not answered by transfer: {r:?}"),
    }
}

/// A short job on the server's own machine: at its end the target's cost model is saved, and
/// the answers are ranked by it.
async fn model_job(c: &mut Clients) -> Result<()> {
    let t = Instant::now();
    let job = c
        .jobs
        .submit(pb::SubmitRequest {
            tasks: vec![pb::TaskSpec {
                workload: Some(pb::Workload {
                    kind: Some(pb::workload::Kind::OpSpec("matmul(m=40,n=40,k=40)".into())),
                    options: None,
                }),
                trials: 32,
                weight: 1.0,
                alternative: false,
            }],
            target: "local".into(),
            measure: Some(pb::MeasureOptions {
                number: Some(1),
                repeat: Some(1),
                min_repeat_ms: Some(1),
                noise_threshold: Some(0.0),
                ..Default::default()
            }),
            batch_size: 16,
            seed: 1,
            name: "zero-shot bench: the target's cost model".into(),
            ..Default::default()
        })
        .await
        .context("Jobs.Submit")?
        .into_inner()
        .job
        .context("a job")?;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let j = c
            .jobs
            .get(pb::GetJobRequest { id: job.id.clone() })
            .await?
            .into_inner();
        match pb::JobState::try_from(j.state) {
            Ok(pb::JobState::Done) => break,
            Ok(pb::JobState::Failed | pb::JobState::Cancelled) => {
                bail!("the model job ended {:?}: {}", j.state, j.error)
            }
            _ if Instant::now() > deadline => bail!("the model job did not end in 600 s"),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    println!(
        "the target's cost model saved by a 32-trial job in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
