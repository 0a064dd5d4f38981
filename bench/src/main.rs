//! `tunehub-bench`: the figures the issues ask for, one subcommand (and one module) per
//! benchmark. Benchmarks, not tests: they print measurements and judge nothing.
//!
//! # Layout
//!
//! - `search`: the search on the workload set, each (workload, seed) a job on the
//!   embedded service (best GFLOP/s, time split, random baseline, curves, the dataset
//!   `records.jsonl`).
//! - `compare`: several `search` runs' trials to one common level (model against random model).
//! - `remeasure`: a dataset's fastest records per workload measured again, for the cost model's
//!   evaluation.
//! - `measure-settings`: what longer tuning measurements buy in ranking against their time (the
//!   figures behind the measurement defaults).
//! - `query`: the service's best-schedule query over gRPC (latency, throughput, record inserts,
//!   server memory) on SQLite and PostgreSQL; with `--zero-shot`, answers by transfer for
//!   shapes never tuned among 10,000 tuned workloads (`zero_shot`).
//! - `dispatch`: the worker fleet's overhead per measurement with 1, 4, 16 workers, and the time
//!   from a worker's death to the re-dispatch of its piece.
//! - `reuse`: zero-shot answers for held-out shapes against their own tuning, and warm starts
//!   from 5 nearby tuned shapes against cold runs (issue 29).
//! - `dashboard`: the web dashboard's page weight and load time in headless Chromium, and the
//!   server's CPU with N dashboards open on a fleet running M jobs, against none.
//! - `swarm`: N simulated workers (register, heartbeat, long-poll) held by a server process:
//!   its CPU and memory per 1,000 workers and the heartbeat round trip.
//! - `network`: an ONNX model's tasks tuned as one job, its end-to-end estimate against
//!   trials and wall time (the peer: `bench/onnx_peer.py`, ONNX Runtime).
//! - `range`: a shape range tuned as one job; its held-out shapes answered from it against
//!   tuning each alone (GFLOP/s share, trials).
//! - `bandwidth`, `mathroof`: the roofs `search` holds memory-bound kernels against: the
//!   bandwidth at a workload's working set, and the vector-math floor (`expf`, `tanhf` per
//!   second) of a kernel that calls them; `cprobe`: their C probes, compiled as kernels are.
//! - `blas`: OpenBLAS's `cblas_sgemm` through our harness, the yardstick of the matmul rows.
//! - `plot`: the SVG of the search curves.
//! - `finalists`: the final re-measurement of a tuning's fastest kernels (Ansor's).
//! - `stalls`: the machine's own tail for a fixed amount of work on one thread, printed beside
//!   the zero-shot answers' percentiles.
//! - `procs`: what `query` and `dispatch` share: the release binaries, a child `tunehub
//!   server`, `/proc` (memory, CPU time), the machine's load, percentiles.
//!
//! `query`, `dispatch` and `swarm` run the release binaries `tunehub` and `tunehub-worker` found beside
//! this one: `cargo build --release -p tunehub-bench -p tunehub -p tunehub-worker`.

mod bandwidth;
mod blas;
mod built;
mod compare;
mod cprobe;
mod dashboard;
mod dispatch;
mod dotroof;
mod finalists;
mod int8;
mod mathroof;
mod network;
mod plot;
mod procs;
mod query;
mod range;
mod remeasure;
mod reuse;
mod search;
mod settings;
mod soak;
mod stalls;
mod swarm;
mod sweep;
mod task_roofs;
mod zero_shot;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "tunehub's benchmarks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Tune the workload set and report best GFLOP/s, time split and curves.
    Search(search::SearchArgs),
    /// Trials several search runs needed to reach one common level (e.g. XGBoost against the
    /// random model, same seeds).
    Compare(compare::CompareArgs),
    /// Measure a dataset's fastest records again in interleaved passes (sharper labels for the
    /// cost model's ranking metrics).
    Remeasure(remeasure::RemeasureArgs),
    /// Rank agreement and time per candidate of tuning measurement settings against a long
    /// reference (the figures behind the defaults).
    MeasureSettings(settings::SettingsArgs),
    /// Best-schedule queries over gRPC: latency, throughput, inserts/s, server memory.
    Query(query::QueryArgs),
    /// Fleet dispatch: measurements/s and server overhead per measurement with N workers, and
    /// re-dispatch time after a worker's kill -9.
    Dispatch(dispatch::DispatchArgs),
    /// Zero-shot answers for held-out shapes against their own tuning; warm starts against
    /// cold runs.
    Reuse(reuse::ReuseArgs),
    /// N simulated workers held by a server process: its CPU and memory per 1,000 workers,
    /// heartbeat round trips.
    Swarm(swarm::SwarmArgs),
    /// The web dashboard: page weight, load time in headless Chromium, the server's CPU with N
    /// dashboards open on a fleet running M jobs against none.
    Dashboard(dashboard::DashboardArgs),
    /// A whole ONNX model tuned as one job: per task best GFLOP/s and share of the end-to-end
    /// estimate; the estimate against trials and wall time (SVG); the peer's latency beside it.
    Network(network::NetworkArgs),
    /// A shape range tuned as one job; held-out shapes of it answered from the range, against
    /// tuning each alone: GFLOP/s share and trials.
    Range(range::RangeArgs),
    /// The service under faults for a long while (kill -9 of workers and servers, database
    /// restarts and locks, a lying worker, idle Watch streams): jobs failed, records lost,
    /// Best latency during faults.
    Soak(soak::SoakArgs),
    /// Layer shapes no benchmark names, drawn with a seed from real networks' families, each
    /// tuned by tunehub, Ansor and MetaSchedule in the same run: ratios sorted worst first.
    Sweep(sweep::SweepArgs),
    /// A model's tasks against their roofs, from the bests a database holds: those below half
    /// their roof, and what the model's estimate would gain if each reached half.
    TaskRoofs(task_roofs::TaskRoofsArgs),
    /// Integer kernels (dtype=u8i8, i8i8) against the int8 dot-product roof, the same shapes in
    /// f32, and Ansor's int8 in the same run.
    Int8(int8::Int8Args),
}

/// The search allocates many small index expressions from several threads; see the workspace
/// manifest.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<()> {
    // The embedded servers' and the search's logs when RUST_LOG asks for them (e.g.
    // `RUST_LOG=tunehub_engine=info`), on stderr; none otherwise, so the figures stay alone.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off"));
    // Colours at a terminal only: a benchmark's log is often redirected to a file.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match Cli::parse().cmd {
        Cmd::Search(a) => search::run(a),
        Cmd::Int8(a) => int8::run(a),
        Cmd::Compare(a) => compare::run(a),
        Cmd::Remeasure(a) => remeasure::run(a),
        Cmd::MeasureSettings(a) => settings::run(a),
        Cmd::Query(a) => runtime()?.block_on(query::run(a)),
        Cmd::Dispatch(a) => runtime()?.block_on(dispatch::run(a)),
        Cmd::Reuse(a) => runtime()?.block_on(reuse::run(a)),
        Cmd::Swarm(a) => runtime()?.block_on(swarm::run(a)),
        Cmd::Dashboard(a) => runtime()?.block_on(dashboard::run(a)),
        Cmd::Network(a) => runtime()?.block_on(network::run(a)),
        Cmd::Range(a) => runtime()?.block_on(range::run(a)),
        Cmd::Soak(a) => runtime()?.block_on(soak::run(a)),
        Cmd::Sweep(a) => sweep::run(a),
        Cmd::TaskRoofs(a) => runtime()?.block_on(task_roofs::run(a)),
    }
}

/// The same runtime as the `tunehub` binary's: one worker thread per core.
fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}
