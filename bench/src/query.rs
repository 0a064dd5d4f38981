//! `tunehub-bench query`: the best-schedule query as compilers use it (issue 5).
//!
//! Per database (SQLite file, PostgreSQL database): starts a real `tunehub server` process on
//! loopback, fills its database through the server's own insert path (`Records.Import` over
//! gRPC, one transaction per call) with realistic records (schedules sampled for a zoo of real
//! workloads, on several device pools, with errors and noisy timings mixed in), then asks
//! `Query.Best` over gRPC with the bearer token: once per (workload, target) to warm the cache,
//! N sequential queries on one connection (latency), and C concurrent clients on their own
//! connections for a fixed time (throughput). Prints latency quantiles, queries/s, inserts/s,
//! and the server's resident memory (VmRSS from /proc) before and after.
//!
//! `tunehub-bench query [--db sqlite|postgres|both] [--pg-url URL] [--records 100000]
//!  [--queries 10000] [--clients 32] [--seconds 5]`
//!
//! `--zero-shot [--tuned 10000] [--held-out 200]`: the zero-shot answers' latency instead
//! (`zero_shot`).

use crate::procs::{self, ServerProc, TOKEN, quantile};
use crate::stalls;
use crate::zero_shot::{self, ZeroShotData};
use anyhow::{Context, Result, bail};
use sqlx::Connection;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tunehub::client::ClientConfig;
use tunehub::client::{self, Clients};
use tunehub_engine::ir::ComputeDag;
use tunehub_engine::ops;
use tunehub_engine::sample::RandomSampler;
use tunehub_engine::target::{Target, TargetOverrides};
use tunehub_proto::v1 as pb;
use tunehub_server::api::records::{record_line, target_line, workload_line};
use tunehub_server::records::{Record, Workload, canonical_steps};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DbChoice {
    Sqlite,
    Postgres,
    Both,
}

#[derive(clap::Args)]
pub struct QueryArgs {
    /// Which database(s) the server runs on.
    #[arg(long, value_enum, default_value = "sqlite")]
    pub(crate) db: DbChoice,
    /// PostgreSQL server (a fresh database is created on it, and dropped after).
    #[arg(long, env = "TUNEHUB_TEST_PG_URL")]
    pub(crate) pg_url: Option<String>,
    /// Records put in the database before the queries.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) records: usize,
    /// Sequential queries (one connection, one at a time) for the latency figures.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) queries: usize,
    /// Concurrent clients, each on its own connection, for the throughput figure.
    #[arg(long, default_value_t = 32)]
    pub(crate) clients: usize,
    /// Duration of the concurrent phase.
    #[arg(long, default_value_t = 5.0)]
    pub(crate) seconds: f64,
    /// Workloads of the zoo used (at most its size).
    #[arg(long, default_value_t = 100)]
    pub(crate) workloads: usize,
    /// Device pools (target keys) the records are spread over.
    #[arg(long, default_value_t = 8)]
    pub(crate) targets: usize,
    /// Records per `Records.Import` call (one transaction each).
    #[arg(long, default_value_t = 10_000)]
    pub(crate) import_chunk: usize,
    /// An extra `tunehub server` argument (repeat), e.g. --server-arg=--cache-ttl-ms=500.
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    pub(crate) server_args: Vec<String>,
    /// The `tunehub` binary to run [default: the one beside this benchmark].
    #[arg(long)]
    pub(crate) server_bin: Option<PathBuf>,
    /// Where the SQLite file and the server logs go [default: a temporary directory].
    #[arg(long)]
    pub(crate) dir: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Zero-shot answers instead (`zero_shot`): Best with allow_transfer for shapes with no
    /// record, with `--tuned` workloads of five structures in the database.
    #[arg(long)]
    pub(crate) zero_shot: bool,
    /// With --zero-shot: tuned workloads in the database.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) tuned: usize,
    /// With --zero-shot: held-out shapes asked about, per structure.
    #[arg(long, default_value_t = 200)]
    pub(crate) held_out: usize,
}

pub async fn run(a: QueryArgs) -> Result<()> {
    let server_bin = match &a.server_bin {
        Some(p) => p.clone(),
        None => procs::sibling_bin("tunehub")?,
    };
    let dbs: &[DbChoice] = match a.db {
        DbChoice::Both => &[DbChoice::Sqlite, DbChoice::Postgres],
        DbChoice::Sqlite => &[DbChoice::Sqlite],
        DbChoice::Postgres => &[DbChoice::Postgres],
    };
    if dbs.contains(&DbChoice::Postgres) && a.pg_url.is_none() {
        bail!("PostgreSQL needs --pg-url (or TUNEHUB_TEST_PG_URL)");
    }
    let tmp = tempfile::tempdir()?;
    let dir = a.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir)?;

    println!("load {} (1, 5, 15 min) at the start", procs::load());
    if a.zero_shot {
        return zero_shot_run(&a, dbs, &dir, &server_bin).await;
    }
    let t = Instant::now();
    let data = Arc::new(Dataset::generate(&a)?);
    println!(
        "dataset: {} workloads x {} targets, {} records ({} per pair at most; {} (workload, target) pairs with a best), sampled in {:.1} s",
        data.workloads.len(),
        data.targets.len(),
        data.total_records(),
        data.per_pair,
        data.pairs_with_best.len(),
        t.elapsed().as_secs_f64()
    );

    let mut summary = vec![];
    for &db in dbs {
        let (db_arg, pg) = db_of(&a, db, &dir).await?;
        let name = if pg.is_some() { "postgres" } else { "sqlite" };
        let log = dir.join(format!("server-{name}.log"));
        let result = bench_one(&a, &data, &server_bin, name, &db_arg, &log).await;
        if let Some(pg) = pg {
            pg.drop_it().await?;
        }
        summary.push((name, result?));
    }

    println!(
        "\n== summary (targets: p99 <= 1 ms sequential, >= 10000 queries/s with {} clients, RSS < 200 MB)",
        a.clients
    );
    for (name, s) in &summary {
        println!(
            "{name:>8}: {} records, inserts {:.0}/s; sequential p50 {:.3} ms p99 {:.3} ms max {:.2} ms \
             (with the Kernel: p99 {:.3} ms); {} clients {:.0} queries/s (p99 {:.2} ms); server RSS {:.1} MB after (peak {:.1} MB)",
            s.records,
            s.inserts_per_s,
            s.seq_p50_ms,
            s.seq_p99_ms,
            s.seq_max_ms,
            s.seq_kernel_p99_ms,
            a.clients,
            s.qps,
            s.conc_p99_ms,
            s.rss_after_mb,
            s.rss_peak_mb
        );
    }
    Ok(())
}

/// `--zero-shot`: the tuned database filled and the zero-shot answers timed on each database.
async fn zero_shot_run(
    a: &QueryArgs,
    dbs: &[DbChoice],
    dir: &Path,
    server_bin: &Path,
) -> Result<()> {
    let t = Instant::now();
    println!("sampling and adapting the records of {} workloads", a.tuned);
    let data = Arc::new(ZeroShotData::generate(a)?);
    println!("dataset made in {:.1} s", t.elapsed().as_secs_f64());
    let mut summary = vec![];
    for &db in dbs {
        let (db_arg, pg) = db_of(a, db, dir).await?;
        let name = if pg.is_some() { "postgres" } else { "sqlite" };
        let log = dir.join(format!("server-zero-shot-{name}.log"));
        let result = zero_shot::bench_one(a, &data, server_bin, name, &db_arg, &log).await;
        if let Some(pg) = pg {
            pg.drop_it().await?;
        }
        summary.push((name, result?));
    }
    println!("\n== summary, zero-shot answers (target: p99 <= 5 ms with 10,000 workloads)");
    for (name, s) in &summary {
        println!(
            "{name:>8}: {} tuned workloads; first answer p50 {:.3} ms p99 {:.3} ms; asked again p99 {:.3} ms; \
             with the Kernel p99 {:.3} ms; {} clients {:.0} queries/s (p50 {:.3} ms, p99 {:.3} ms); ranked by {}",
            s.workloads,
            s.first_p50_ms,
            s.first_p99_ms,
            s.again_p99_ms,
            s.kernel_p99_ms,
            a.clients,
            s.qps,
            s.conc_p50_ms,
            s.conc_p99_ms,
            s.ranked_by
        );
    }
    // The same work as a median first answer, on one thread of this machine, many times.
    let slice_ms = summary.first().map_or(3.0, |(_, s)| s.first_p50_ms);
    let st = stalls::probe(slice_ms, 1000);
    println!(
        "this machine, one thread, a fixed {slice_ms:.2} ms of work (the first answers' p50) {} times: \
         p50 {:.3} ms, p99 {:.3} ms, max {:.2} ms; {} took over twice the median",
        st.slices, st.p50_ms, st.p99_ms, st.max_ms, st.over_twice
    );
    Ok(())
}

/// The server's `--db` argument for a database choice: a fresh SQLite file in `dir`, or a fresh
/// database on the PostgreSQL server (dropped by the caller).
async fn db_of(a: &QueryArgs, db: DbChoice, dir: &Path) -> Result<(String, Option<PgDatabase>)> {
    Ok(match db {
        DbChoice::Sqlite => {
            let path = dir.join("bench.db");
            for ext in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
            }
            (path.display().to_string(), None)
        }
        _ => {
            let pg = PgDatabase::create(a.pg_url.as_deref().expect("checked by run")).await?;
            (pg.url.clone(), Some(pg))
        }
    })
}

struct Summary {
    records: u64,
    inserts_per_s: f64,
    seq_p50_ms: f64,
    seq_p99_ms: f64,
    seq_max_ms: f64,
    /// Sequential p99 with the Kernel in every answer.
    seq_kernel_p99_ms: f64,
    qps: f64,
    conc_p99_ms: f64,
    rss_after_mb: f64,
    rss_peak_mb: f64,
}

async fn bench_one(
    a: &QueryArgs,
    data: &Arc<Dataset>,
    server_bin: &Path,
    name: &str,
    db: &str,
    log: &Path,
) -> Result<Summary> {
    println!("\n== {name}: tunehub server --db {db}");
    let (server, cfg, mut c) = start_server(a, server_bin, db, log).await?;
    let pid = server.pid();
    let (rss0, _) = procs::rss_mb(pid);
    println!(
        "server pid {pid} on {}, RSS {rss0:.1} MB at start",
        server.addr
    );

    // Inserts through Records.Import, timed per call (lines are made before each call's clock).
    println!("inserting (load {})", procs::load());
    let (mut new, mut known, mut import_s) = (0u64, 0u64, 0.0);
    let cpu0 = procs::cpu_seconds(pid);
    let mut first = true;
    let mut last_note = Instant::now();
    for mut lines in data.record_chunks(a.import_chunk) {
        if first {
            // Workloads and targets travel before the records that name them.
            let mut defs = data.definition_lines();
            defs.append(&mut lines);
            lines = defs;
            first = false;
        }
        let t = Instant::now();
        let r = import(&mut c, &lines, 1000).await?;
        import_s += t.elapsed().as_secs_f64();
        new += r.records_new;
        known += r.records_known;
        if last_note.elapsed() > Duration::from_secs(30) {
            println!(
                "  {new} records so far, {:.0}/s, server RSS {:.1} MB (load {})",
                new as f64 / import_s,
                procs::rss_mb(pid).0,
                procs::load()
            );
            last_note = Instant::now();
        }
    }
    let import_cpu = procs::cpu_seconds(pid) - cpu0;
    let inserts_per_s = new as f64 / import_s;
    let (rss1, hwm1) = procs::rss_mb(pid);
    println!(
        "insert: {new} new records ({known} known) in {import_s:.1} s = {inserts_per_s:.0} records/s \
         (Records.Import, {} per call, one transaction each; server CPU {:.1} s = {:.0} us per record; load {})",
        a.import_chunk,
        import_cpu,
        import_cpu / new.max(1) as f64 * 1e6,
        procs::load()
    );
    println!("server RSS {rss1:.1} MB after the inserts (peak so far {hwm1:.1} MB)");

    let pairs = &data.pairs_with_best;
    // Warm the caches (best records, generated kernels): every pair once, with its kernel
    // (these are the cold queries).
    let mut cold = Vec::with_capacity(pairs.len());
    for &(w, t) in pairs {
        let t0 = Instant::now();
        best(&mut c, data.request(w, t, true)).await?;
        cold.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    cold.sort_by(f64::total_cmp);
    println!(
        "cold (first query of each of {} pairs): p50 {:.3} ms, p99 {:.3} ms, max {:.2} ms",
        cold.len(),
        quantile(&cold, 0.5),
        quantile(&cold, 0.99),
        cold.last().copied().unwrap_or(f64::NAN)
    );

    // Sequential latency: one connection, one query at a time, cycling over the pairs; the
    // record alone (as compilers that only look up ask), then with the Kernel.
    let me = std::process::id();
    let mut seqs = vec![];
    for kernel in [false, true] {
        let load_before = procs::load();
        let (cpu0, my0) = (procs::cpu_seconds(pid), procs::cpu_seconds(me));
        let t_seq = Instant::now();
        let mut lat = Vec::with_capacity(a.queries);
        for i in 0..a.queries {
            let (w, t) = pairs[i % pairs.len()];
            let req = data.request(w, t, kernel);
            let t0 = Instant::now();
            best(&mut c, req).await?;
            lat.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        let seq_s = t_seq.elapsed().as_secs_f64();
        let seq_cpu = procs::cpu_seconds(pid) - cpu0;
        let seq_client = procs::cpu_seconds(me) - my0;
        lat.sort_by(f64::total_cmp);
        let (p50, p99, max) = (
            quantile(&lat, 0.5),
            quantile(&lat, 0.99),
            lat.last().copied().unwrap_or(f64::NAN),
        );
        println!(
            "sequential{}: {} queries in {seq_s:.2} s, p50 {p50:.3} ms, p99 {p99:.3} ms, max {max:.2} ms; \
             CPU per query: server {:.0} us, client {:.0} us (load {load_before} before, {} after)",
            if kernel {
                " with the Kernel"
            } else {
                ", record only"
            },
            a.queries,
            seq_cpu / a.queries as f64 * 1e6,
            seq_client / a.queries as f64 * 1e6,
            procs::load()
        );
        seqs.push((p50, p99, max));
    }
    let (p50, p99, max) = seqs[0];
    let kernel_p99 = seqs[1].1;

    // Throughput: C clients, each on its own connection, for a fixed time.
    let mut conns = Vec::with_capacity(a.clients);
    for _ in 0..a.clients {
        conns.push(client::connect(&cfg).await?);
    }
    let load_before = procs::load();
    let (cpu0, my0) = (procs::cpu_seconds(pid), procs::cpu_seconds(me));
    let pairs = Arc::clone(data);
    let (all, conc_s) = procs::concurrent(conns, a.seconds, move |mut c, i| {
        let data = Arc::clone(&pairs);
        async move {
            let (w, t) = data.pairs_with_best[i % data.pairs_with_best.len()];
            best(&mut c, data.request(w, t, false)).await?;
            Ok(c)
        }
    })
    .await?;
    let conc_cpu = procs::cpu_seconds(pid) - cpu0;
    let conc_client = procs::cpu_seconds(me) - my0;
    let qps = all.len() as f64 / conc_s;
    let conc_p99 = quantile(&all, 0.99);
    println!(
        "concurrent: {} clients, {} queries in {conc_s:.2} s = {qps:.0} queries/s, p50 {:.3} ms, p99 {conc_p99:.3} ms, \
         max {:.2} ms; CPU per query: server {:.0} us, clients {:.0} us (load {load_before} before, {} after)",
        a.clients,
        all.len(),
        quantile(&all, 0.5),
        all.last().copied().unwrap_or(f64::NAN),
        conc_cpu / all.len().max(1) as f64 * 1e6,
        conc_client / all.len().max(1) as f64 * 1e6,
        procs::load()
    );
    let (rss2, hwm2) = procs::rss_mb(pid);
    println!("server RSS {rss2:.1} MB after the queries (peak {hwm2:.1} MB)");
    drop(c);
    server.stop()?;
    Ok(Summary {
        records: new,
        inserts_per_s,
        seq_p50_ms: p50,
        seq_p99_ms: p99,
        seq_max_ms: max,
        seq_kernel_p99_ms: kernel_p99,
        qps,
        conc_p99_ms: conc_p99,
        rss_after_mb: rss2,
        rss_peak_mb: hwm2,
    })
}

/// Starts `tunehub server` on `db` with the bench's extra arguments and connects with the
/// token: the server, how to connect again (the concurrent clients), and one connection.
pub(crate) async fn start_server(
    a: &QueryArgs,
    server_bin: &Path,
    db: &str,
    log: &Path,
) -> Result<(ServerProc, ClientConfig, Clients)> {
    let extra: Vec<&str> = a.server_args.iter().map(String::as_str).collect();
    let server = ServerProc::start(server_bin, db, log, &extra)?;
    let cfg = ClientConfig {
        server: server.url(),
        token: Some(TOKEN.into()),
        ca_cert: None,
    };
    let c = client::connect(&cfg).await?;
    Ok((server, cfg, c))
}

/// One `Records.Import` call (one transaction) of `lines`, `per_message` to a message: a
/// message stays under the 4 MB limit (workload lines carry their DAG, a few kB).
pub(crate) async fn import(
    c: &mut Clients,
    lines: &[String],
    per_message: usize,
) -> Result<pb::ImportResponse> {
    let msgs: Vec<pb::RecordLines> = lines
        .chunks(per_message)
        .map(|c| pb::RecordLines { lines: c.to_vec() })
        .collect();
    Ok(c.records
        .import(tokio_stream::iter(msgs))
        .await
        .context("Records.Import")?
        .into_inner())
}

async fn best(c: &mut Clients, req: pb::BestRequest) -> Result<()> {
    let r = c.query.best(req).await.context("Query.Best")?.into_inner();
    if !r.found || r.record.is_none() {
        bail!("Query.Best found nothing for a pair that has a best record");
    }
    Ok(())
}

/// Workloads a compiler of CNNs and transformers asks about: ResNet-50 and MobileNet-v2
/// layers, BERT's matmuls at several sequence lengths, classifiers, pools, softmax.
fn zoo() -> Vec<String> {
    let mut z = vec![];
    // ResNet-50: (c, h, w, f, kernel, stride, pad).
    let resnet = [
        (3, 224, 224, 64, 7, 2, 3),
        (64, 56, 56, 64, 1, 1, 0),
        (64, 56, 56, 64, 3, 1, 1),
        (64, 56, 56, 256, 1, 1, 0),
        (256, 56, 56, 64, 1, 1, 0),
        (256, 56, 56, 128, 1, 2, 0),
        (128, 28, 28, 128, 3, 1, 1),
        (128, 28, 28, 512, 1, 1, 0),
        (512, 28, 28, 128, 1, 1, 0),
        (512, 28, 28, 256, 1, 2, 0),
        (256, 14, 14, 256, 3, 1, 1),
        (256, 14, 14, 1024, 1, 1, 0),
        (1024, 14, 14, 256, 1, 1, 0),
        (1024, 14, 14, 512, 1, 2, 0),
        (512, 7, 7, 512, 3, 1, 1),
        (512, 7, 7, 2048, 1, 1, 0),
        (2048, 7, 7, 512, 1, 1, 0),
        (256, 56, 56, 512, 1, 2, 0),
    ];
    for (i, (c, h, w, f, k, s, p)) in resnet.into_iter().enumerate() {
        z.push(format!(
            "conv2d_nchw(n=1,c={c},h={h},w={w},f={f},kh={k},kw={k},stride={s},pad={p},bias=1,relu=1)"
        ));
        if i < 8 {
            z.push(format!(
                "conv2d_nhwc(n=1,h={h},w={w},c={c},f={f},kh={k},kw={k},stride={s},pad={p})"
            ));
        }
    }
    // MobileNet-v2 depthwise: (c, h, w, stride).
    for (c, h, w, s) in [
        (32, 112, 112, 1),
        (96, 112, 112, 2),
        (144, 56, 56, 1),
        (144, 56, 56, 2),
        (192, 28, 28, 1),
        (192, 28, 28, 2),
        (384, 14, 14, 1),
        (576, 14, 14, 1),
        (576, 14, 14, 2),
        (960, 7, 7, 1),
    ] {
        z.push(format!(
            "depthwise_conv2d_nchw(n=1,c={c},h={h},w={w},stride={s},pad=1,bias=1,relu=1)"
        ));
    }
    // BERT-base at several sequence lengths.
    for seq in [64, 128, 256, 384, 512] {
        z.push(format!("dense(m={seq},n=768,k=768)"));
        z.push(format!("dense(m={seq},n=3072,k=768)"));
        z.push(format!("dense(m={seq},n=768,k=3072,relu=0)"));
        z.push(format!("dense(m={seq},n=2304,k=768,relu=0)"));
        z.push(format!("batch_matmul(b=12,m={seq},n={seq},k=64)"));
        z.push(format!("batch_matmul(b=12,m={seq},n=64,k={seq})"));
        z.push(format!("softmax(m={},n={seq})", 12 * seq));
        z.push(format!("elementwise(m={seq},n=3072)"));
    }
    for n in [64, 128, 256, 512, 1024, 2048] {
        z.push(format!("matmul({n},{n},{n})"));
    }
    for (m, n, k) in [
        (1024, 1024, 64),
        (4096, 1024, 1024),
        (32, 4096, 4096),
        (256, 1000, 2048),
        (512, 512, 64),
        (2048, 2048, 256),
    ] {
        z.push(format!("matmul({m},{n},{k})"));
    }
    for (m, k) in [(1, 2048), (1, 1024), (1, 1280), (16, 2048), (64, 2048)] {
        z.push(format!("dense(m={m},n=1000,k={k},relu=0)"));
    }
    // ResNet's stem pool has pad=1, whose -inf fill does not survive the DAG's JSON (it
    // becomes null), so that a workload line of it cannot be imported: the unpadded shape.
    z.push("max_pool2d(n=1,c=64,h=112,w=112,kh=3,kw=3,stride=2)".into());
    z.push("avg_pool2d(n=1,c=2048,h=7,w=7,kh=7,kw=7,stride=1)".into());
    z.push("avg_pool2d(n=1,c=1280,h=7,w=7,kh=7,kw=7,stride=1)".into());
    z.push("max_pool2d(n=1,c=128,h=56,w=56)".into());
    for m in [1, 16, 128] {
        z.push(format!("softmax(m={m},n=1000)"));
    }
    z.push("dense(m=32,n=512,k=512)".into());
    // BERT's two batch matmuls coincide at sequence length 64.
    let mut seen = HashSet::new();
    z.retain(|s| seen.insert(s.clone()));
    z
}

/// A small deterministic generator (splitmix64): the dataset is a function of the seed.
#[derive(Clone)]
pub(crate) struct Mix(pub(crate) u64);

impl Mix {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A library op spec's DAG, and the workload an import line carries for it.
pub(crate) fn workload_of(spec: &str) -> Result<(ComputeDag, Workload)> {
    let dag = ops::build_op(spec).with_context(|| format!("op spec {spec}"))?;
    let def = Workload {
        key: dag.workload_key(),
        description: Some(spec.to_string()),
        dag_json: serde_json::to_string(&dag)?,
        options: Default::default(),
        flops: dag.flop_count(),
        created_at: 0,
    };
    Ok((dag, def))
}

struct WorkloadDef {
    spec: String,
    def: Workload,
}

/// The records to insert: distinct sampled schedules per workload, measured (in the records'
/// story) on every target.
struct Dataset {
    workloads: Vec<WorkloadDef>,
    targets: Vec<(String, String)>,
    /// Canonical steps JSON, distinct per workload.
    schedules: Vec<Vec<String>>,
    per_pair: usize,
    seed: u64,
    pairs_with_best: Vec<(usize, usize)>,
}

/// What a record's outcome is, drawn from its (workload, target, index).
struct Outcome {
    error_code: i32,
    costs: Vec<f64>,
    noisy: bool,
}

impl Dataset {
    fn generate(a: &QueryArgs) -> Result<Dataset> {
        let host = Target::detect();
        // Target 0 is the server's own machine ("local"); the others stand for device pools
        // of the fleet (the same machine type, told apart by a define so that keys differ).
        let targets: Vec<(String, String)> = (0..a.targets.max(1))
            .map(|i| {
                let t = if i == 0 {
                    host.clone()
                } else {
                    host.clone().with_overrides(&TargetOverrides {
                        cflags: Some(vec![format!("-DTUNEHUB_POOL={i}")]),
                        cores: Some(1 + i % host.cores.max(1)),
                        ..TargetOverrides::default()
                    })
                };
                Ok((t.key(), serde_json::to_string(&t)?))
            })
            .collect::<Result<_>>()?;
        let specs: Vec<String> = zoo().into_iter().take(a.workloads.max(1)).collect();
        let per_pair = a.records.div_ceil(specs.len() * targets.len()).max(1);
        // A quarter more than an even share: small schedule spaces give fewer, and the others
        // make up for them.
        let want = per_pair + per_pair / 4 + 1;
        let results = procs::parallel_map(&specs, |i, spec| {
            sample_workload(spec, &host, want, a.seed ^ i as u64)
        });
        let mut workloads = vec![];
        let mut schedules = vec![];
        for r in results {
            let (w, s) = r?;
            workloads.push(w);
            schedules.push(s);
        }
        let mut d = Dataset {
            workloads,
            targets,
            schedules,
            per_pair,
            seed: a.seed,
            pairs_with_best: vec![],
        };
        // The smallest cap per pair that gives the records asked for (or all there are).
        while d.total_records() < a.records && d.schedules.iter().any(|s| s.len() > d.per_pair) {
            d.per_pair += 1;
        }
        for w in 0..d.workloads.len() {
            for t in 0..d.targets.len() {
                if (0..d.records_of(w)).any(|i| {
                    let o = d.outcome(w, t, i);
                    o.error_code == 0 && !o.noisy
                }) {
                    d.pairs_with_best.push((w, t));
                }
            }
        }
        if d.pairs_with_best.is_empty() {
            bail!("no (workload, target) pair has a best record: more --records");
        }
        Ok(d)
    }

    fn records_of(&self, w: usize) -> usize {
        self.schedules[w].len().min(self.per_pair)
    }

    fn total_records(&self) -> usize {
        (0..self.workloads.len())
            .map(|w| self.records_of(w) * self.targets.len())
            .sum()
    }

    fn rng(&self, w: usize, t: usize, i: usize) -> Mix {
        let mut m = Mix(self.seed ^ ((w as u64) << 40) ^ ((t as u64) << 24) ^ i as u64);
        m.next();
        m
    }

    /// About 8% failures (Ansor's error numbers), 3% noisy; times spread over 1-100 GFLOP/s.
    fn outcome(&self, w: usize, t: usize, i: usize) -> Outcome {
        let mut r = self.rng(w, t, i);
        let u = r.unit();
        let error_code = match u {
            u if u < 0.04 => 2,  // compile error
            u if u < 0.055 => 4, // runtime error
            u if u < 0.07 => 5,  // wrong answer
            u if u < 0.08 => 6,  // run timeout
            _ => 0,
        };
        let flops = self.workloads[w].def.flops.max(1) as f64;
        let gflops = 10f64.powf(r.unit() * 2.0);
        let base = flops / (gflops * 1e9);
        let costs = if error_code == 0 {
            (0..3).map(|_| base * (1.0 + 0.05 * r.unit())).collect()
        } else {
            vec![]
        };
        Outcome {
            error_code,
            costs,
            noisy: error_code == 0 && r.unit() < 0.03,
        }
    }

    fn definition_lines(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .workloads
            .iter()
            .map(|w| workload_line(&w.def))
            .collect();
        v.extend(self.targets.iter().map(|(k, j)| target_line(k, j)));
        v
    }

    fn record_line(&self, w: usize, t: usize, i: usize) -> String {
        let o = self.outcome(w, t, i);
        let mut r = self.rng(w, t, i ^ 0x5555_5555);
        let msg = match o.error_code {
            0 => String::new(),
            2 => "cc: kernel.c:41:17: error: 'T_local' undeclared (first use in this function)"
                .into(),
            4 => "the kernel exited with signal 11 (SIGSEGV)".into(),
            5 => format!(
                "output C differs from the reference at [{}]: got 0.0, want 1.25",
                r.next() % 512
            ),
            _ => "the kernel ran past 10 s".into(),
        };
        let rec = Record {
            id: String::new(),
            workload_key: self.workloads[w].def.key.clone(),
            target_key: self.targets[t].0.clone(),
            schedule_hash: String::new(),
            steps_json: self.schedules[w][i].clone(),
            mean_cost: None,
            costs: o.costs,
            error_code: o.error_code,
            error_msg: msg,
            noisy: o.noisy,
            build_s: 0.1 + r.unit(),
            run_s: 0.05 + 0.5 * r.unit(),
            worker: Some(if t == 0 {
                "local".into()
            } else {
                format!("w-{:010x}", r.next() % (1 << 40))
            }),
            // Spread over the last 30 days.
            created_at: 1_760_000_000_000 + (r.unit() * 30.0 * 86_400_000.0) as i64,
        };
        record_line(&rec)
    }

    /// Record lines in calls of `chunk`: made on demand (a million lines are ~500 MB).
    fn record_chunks(&self, chunk: usize) -> impl Iterator<Item = Vec<String>> + '_ {
        let all = (0..self.workloads.len()).flat_map(move |w| {
            (0..self.targets.len())
                .flat_map(move |t| (0..self.records_of(w)).map(move |i| (w, t, i)))
        });
        let mut all = all.peekable();
        std::iter::from_fn(move || {
            all.peek()?;
            Some(
                all.by_ref()
                    .take(chunk.max(1))
                    .map(|(w, t, i)| self.record_line(w, t, i))
                    .collect(),
            )
        })
    }

    /// The Best request of a pair; `kernel`: with the answer's Kernel (generated C and its
    /// contract), else the lean record-only answer.
    fn request(&self, w: usize, t: usize, kernel: bool) -> pb::BestRequest {
        pb::BestRequest {
            workload: Some(pb::Workload {
                kind: Some(pb::workload::Kind::OpSpec(self.workloads[w].spec.clone())),
                options: None,
            }),
            target: self.targets[t].0.clone(),
            with_source: false,
            allow_transfer: false,
            omit_kernel: !kernel,
            ..Default::default()
        }
    }
}

/// Up to `n` distinct schedules of one workload from the random sampler (small spaces give
/// fewer).
fn sample_workload(
    spec: &str,
    target: &Target,
    n: usize,
    seed: u64,
) -> Result<(WorkloadDef, Vec<String>)> {
    let (dag, def) = workload_of(spec)?;
    let mut sampler = RandomSampler::new(&dag, target, seed);
    let mut seen = HashSet::new();
    let mut out = vec![];
    let mut misses = 0;
    while out.len() < n && misses < 200 + n {
        let steps = canonical_steps(&sampler.sample().to_json())?;
        if seen.insert(steps.clone()) {
            out.push(steps);
        } else {
            misses += 1;
        }
    }
    Ok((
        WorkloadDef {
            spec: spec.to_string(),
            def,
        },
        out,
    ))
}

/// A throwaway database on a PostgreSQL server.
struct PgDatabase {
    admin_url: String,
    name: String,
    url: String,
}

impl PgDatabase {
    async fn create(admin_url: &str) -> Result<PgDatabase> {
        sqlx::any::install_default_drivers();
        let name = format!(
            "tunehub_bench_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_millis()
                % 1_000_000
        );
        let mut conn = sqlx::AnyConnection::connect(admin_url)
            .await
            .with_context(|| format!("connecting to {admin_url}"))?;
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await?;
        conn.close().await?;
        Ok(PgDatabase {
            url: with_database(admin_url, &name)?,
            admin_url: admin_url.into(),
            name,
        })
    }

    async fn drop_it(self) -> Result<()> {
        let mut conn = sqlx::AnyConnection::connect(&self.admin_url).await?;
        sqlx::query(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ))
        .execute(&mut conn)
        .await?;
        conn.close().await?;
        Ok(())
    }
}

/// The URL with another database name: `postgres://u@h:p/db?x` -> `postgres://u@h:p/NAME?x`.
fn with_database(url: &str, name: &str) -> Result<String> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let scheme_end = base.find("://").context("a postgres:// URL")? + 3;
    let host_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{name}", &base[..host_end]);
    if !query.is_empty() {
        out.push('?');
        out.push_str(query);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names_replace_the_path() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:55500/postgres", "b").unwrap(),
            "postgres://postgres@127.0.0.1:55500/b"
        );
        assert_eq!(
            with_database("postgres://u@h/x?sslmode=disable", "b").unwrap(),
            "postgres://u@h/b?sslmode=disable"
        );
        assert_eq!(
            with_database("postgres://u@h", "b").unwrap(),
            "postgres://u@h/b"
        );
    }

    #[test]
    fn the_zoo_has_100_distinct_workloads() {
        let keys: HashSet<String> = zoo()
            .iter()
            .map(|spec| {
                ops::build_op(spec)
                    .unwrap_or_else(|e| panic!("{spec}: {e}"))
                    .workload_key()
            })
            .collect();
        assert!(keys.len() >= 100, "{}", keys.len());
    }
}
