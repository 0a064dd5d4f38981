//! `tunehub-worker`: measures candidates on a target device for a tunehub server.
//!
//! It registers its device description (detected, or overridden by flags: a cross compiler and
//! a run prefix make an edge target), then pulls pieces of batches, builds each candidate with
//! its timing harness using the device's toolchain (several builds at once), runs them one at a
//! time under the run prefix, checks them against the reference, and reports. Heartbeats keep
//! its lease alive; a lost connection or a restarted server means reconnecting with backoff
//! and registering again as the same device, trying the servers of `--server` in turn; a
//! server replica that does not own the device's pool sends it to the one that does; a refused
//! token (UNAUTHENTICATED) is final: one line on stderr ("error: ...") and exit status 1; so is
//! a server certificate of a CA the worker does not trust, exit status 2 (`fatal`).
//! SIGTERM or Ctrl-C: the piece in hand is finished and reported, then the worker exits.
//!
//! # Layout
//!
//! Small on purpose (engine + proto + tonic, no database, no cost model): `task_state` (what is
//! kept per task across its pieces), `servers` (the addresses it registers with), `fatal` (what
//! no retry mends: it stops the worker), and this file, in order:
//!
//! - `Args`, `target_of`: flags, and the device description they override.
//! - `connect`, `Bearer`: the gRPC channel (TLS for `https://`) with the token on every call.
//! - `register`, `register_with_backoff`: a `Session` (server, worker id, heartbeat period),
//!   following a redirect to the replica owning the pool; a refused token or an unknown CA is
//!   final (no retry mends them).
//! - `measure_piece`: a piece's candidates built and run with the engine's `LocalBuilder` and
//!   `LocalRunner`, checked against the reference computed from the piece's DAG; the task's
//!   state (`new_state`) kept for its next pieces.
//! - `main`: the stop signal and the register-then-session loop.
//! - `session`: the heartbeat task and the `Pull` long-poll loop of one registration.
//! - `measure_and_report`: one piece off the async threads, its report retried.

use anyhow::{Context, Result, bail};
use backon::{ExponentialBuilder, Retryable};
use clap::Parser;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Code, Request, Status};
use tracing::Instrument;
use tunehub_engine::ir::ComputeDag;
use tunehub_engine::measure::{
    ErrorCode, LocalBuilder, LocalRunner, MeasureOptions, MeasureResult, Measurer,
};
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::{Target, TargetOverrides};
use tunehub_engine::task::{Task, WorkloadOptions};
use tunehub_proto::v1 as pb;
use tunehub_proto::v1::workers_client::WorkersClient;

mod fatal;
mod servers;
mod task_state;
use fatal::{Fatal, refused_status};
use task_state::{TaskKey, TaskStates};

#[derive(Debug, Parser)]
#[command(name = "tunehub-worker", version, about)]
struct Args {
    /// The server's URL (https needs --ca-cert); or several, comma separated (server replicas
    /// on one database), tried in turn.
    #[arg(long, env = "TUNEHUB_SERVER", default_value = "http://127.0.0.1:50051")]
    server: String,
    /// API token.
    #[arg(long, env = "TUNEHUB_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// CA certificate (PEM) of the server's TLS certificate.
    #[arg(long, env = "TUNEHUB_CA_CERT")]
    ca_cert: Option<std::path::PathBuf>,
    /// This device's client certificate (PEM), for a server that requires mutual TLS of
    /// workers (its --tls-worker-ca signed it); with --tls-key.
    #[arg(long, env = "TUNEHUB_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, env = "TUNEHUB_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// Stable name of this device [default: host name and target key].
    #[arg(long, env = "TUNEHUB_DEVICE_ID")]
    device_id: Option<String>,
    /// Target architecture when not the host's (a cross target, e.g. aarch64).
    #[arg(long)]
    arch: Option<String>,
    /// C compiler (e.g. aarch64-linux-gnu-gcc).
    #[arg(long, env = "CC")]
    compiler: Option<String>,
    /// Extra compiler flags, space separated.
    #[arg(long, allow_hyphen_values = true)]
    cflags: Option<String>,
    /// The -march= value ("" for none).
    #[arg(long, allow_hyphen_values = true)]
    march: Option<String>,
    /// ISA features, comma separated (neon, sve, avx2, ...).
    #[arg(long, value_delimiter = ',')]
    features: Option<Vec<String>>,
    /// Cores the kernels use.
    #[arg(long)]
    cores: Option<usize>,
    /// Command prefix to run kernels, space separated (e.g. "qemu-aarch64 -L /usr/aarch64-linux-gnu").
    #[arg(long, allow_hyphen_values = true)]
    run_prefix: Option<String>,
    /// Builds at once [default: the host's cores].
    #[arg(long)]
    build_jobs: Option<usize>,
    /// Print the device description and its key, and exit.
    #[arg(long)]
    print_target: bool,
    /// Log lines on stderr as text, or as one JSON object per line (for log collectors).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = LogFormat::Text,
          env = "TUNEHUB_LOG_FORMAT")]
    log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn words(s: &Option<String>) -> Option<Vec<String>> {
    s.as_ref()
        .map(|s| s.split_whitespace().map(str::to_string).collect())
}

fn target_of(a: &Args) -> Target {
    let base = match &a.compiler {
        Some(cc) => Target::detect_with_compiler(cc),
        None => Target::detect(),
    };
    base.with_overrides(&TargetOverrides {
        arch: a.arch.clone(),
        cores: a.cores,
        compiler: None,
        cflags: words(&a.cflags),
        march: a.march.clone(),
        features: a.features.clone(),
        run_prefix: words(&a.run_prefix),
    })
}

type Client = WorkersClient<InterceptedService<Channel, Bearer>>;

#[derive(Clone)]
struct Bearer(Option<MetadataValue<tonic::metadata::Ascii>>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

async fn connect(a: &Args, server: &str) -> Result<Client> {
    let mut ep = Endpoint::from_shared(server.to_string()).context("bad server URL")?;
    if server.starts_with("https://") {
        let mut tls = ClientTlsConfig::new();
        if let Some(ca) = &a.ca_cert {
            tls = tls.ca_certificate(Certificate::from_pem(std::fs::read(ca)?));
        }
        if let (Some(cert), Some(key)) = (&a.tls_cert, &a.tls_key) {
            let read = |p: &std::path::PathBuf| {
                std::fs::read(p).with_context(|| format!("reading {}", p.display()))
            };
            tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
        }
        ep = ep.tls_config(tls)?;
    }
    let channel = ep.connect_timeout(Duration::from_secs(5)).connect().await?;
    let bearer = match &a.token {
        Some(t) => Some(
            format!("Bearer {t}")
                .parse::<MetadataValue<tonic::metadata::Ascii>>()
                .context("the token is not valid in a header")?,
        ),
        None => None,
    };
    Ok(
        WorkersClient::with_interceptor(channel, Bearer(bearer))
            .max_decoding_message_size(64 << 20),
    )
}

/// A registered session with a server.
struct Session {
    /// The server's URL: a report is retried there.
    server: String,
    client: Client,
    id: String,
    heartbeat: Duration,
}

/// What a registration gave.
enum Registered {
    /// Boxed: a session is large, a redirect a string.
    Session(Box<Session>),
    /// Another server replica owns the pool: its URL.
    Redirect(String),
}

async fn register(a: &Args, server: &str, target: &Target, device_id: &str) -> Result<Registered> {
    let mut client = connect(a, server).await?;
    let r = client
        .register(pb::RegisterWorkerRequest {
            device_id: device_id.to_string(),
            target_json: serde_json::to_string(target)?,
        })
        .await?
        .into_inner();
    if !r.redirect.is_empty() {
        let to = servers::redirect_url(server, &r.redirect);
        tracing::info!(%server, %to, target_key = %r.target_key,
            "sent to the server replica that owns this device's pool");
        return Ok(Registered::Redirect(to));
    }
    tracing::info!(%server, worker_id = %r.worker_id, target_key = %r.target_key, "registered");
    Ok(Registered::Session(Box::new(Session {
        server: server.to_string(),
        client,
        id: r.worker_id,
        heartbeat: Duration::from_millis(u64::from(r.heartbeat_ms.max(100))),
    })))
}

/// Registers at `server`, following one redirect; `Ok(None)`: sent on again (the pool's owner
/// changing hands: the caller goes on with its list).
async fn register_following(
    a: &Args,
    server: &str,
    target: &Target,
    device_id: &str,
) -> Result<Option<Session>> {
    let to = match register(a, server, target, device_id).await? {
        Registered::Session(s) => return Ok(Some(*s)),
        Registered::Redirect(to) => to,
    };
    match register(a, &to, target, device_id).await? {
        Registered::Session(s) => Ok(Some(*s)),
        Registered::Redirect(again) => {
            tracing::warn!(%to, %again, "the pool's owner sent this device on again");
            Ok(None)
        }
    }
}

/// Registers, trying `first` (where the last server sent this device), then each server of
/// `--server` in turn, following a redirect to the replica owning the pool; the whole round
/// retried with jittered exponential backoff (servers may be down or restarting, a pool's
/// lease running out; the jitter keeps a fleet that lost its server from coming back in
/// step). `Ok(None)` when stopped first. A refused token or an unknown CA is final.
async fn register_with_backoff(
    a: &Args,
    target: &Target,
    device_id: &str,
    stop: &AtomicBool,
    mut first: Option<String>,
) -> Result<Option<Session>, Fatal> {
    /// Why a round of registrations got no session.
    enum Miss {
        Final(Fatal),
        NoServer,
    }
    let round = || {
        let servers: Vec<String> = first
            .take()
            .into_iter()
            .chain(servers::list(&a.server))
            .collect();
        async move {
            for server in &servers {
                match register_following(a, server, target, device_id).await {
                    Ok(Some(s)) => return Ok(s),
                    Ok(None) => {}
                    Err(e) => {
                        if let Some(f) = fatal::of_error(server, &e) {
                            return Err(Miss::Final(f));
                        }
                        tracing::warn!("cannot register with {server}: {e:#}");
                    }
                }
            }
            Err(Miss::NoServer)
        }
    };
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(5))
        .with_jitter()
        .without_max_times();
    match round
        .retry(backoff)
        .when(|m| matches!(m, Miss::NoServer) && !stop.load(Ordering::SeqCst))
        .notify(|_, wait| tracing::warn!("no server took this device; trying again in {wait:?}"))
        .await
    {
        Ok(s) => Ok(Some(s)),
        Err(Miss::Final(f)) => Err(f),
        Err(Miss::NoServer) => Ok(None),
    }
}

/// The state of a task a worker keeps across its pieces (`task_state`).
struct PieceState {
    task: Task,
    measurer: Measurer,
}

/// Tasks whose state a worker keeps at once.
const KEPT_TASKS: usize = 8;

/// A task's state, made from its first piece: the DAG checked against the workload key.
fn new_state(target: &Target, build_jobs: usize, piece: &pb::WorkPiece) -> Result<PieceState> {
    let dag: ComputeDag = serde_json::from_str(&piece.dag_json).context("the piece's DAG")?;
    let options: MeasureOptions =
        serde_json::from_str(&piece.options_json).context("the piece's measure options")?;
    // The piece's options make part of the key (layout-free inputs are packed weights).
    let workload_options = WorkloadOptions {
        layout_free: piece
            .options
            .as_ref()
            .map(|o| o.layout_free.clone())
            .unwrap_or_default(),
    };
    let task = Task::new(dag, piece.description.clone())
        .with_options(&workload_options)
        .map_err(anyhow::Error::msg)
        .context("the piece's workload options")?;
    if task.key != piece.workload_key {
        bail!(
            "workload key mismatch: {} computed, {} sent",
            task.key,
            piece.workload_key
        );
    }
    let builder = LocalBuilder::new(target, &options).with_jobs(build_jobs);
    let runner = LocalRunner::new(target, options);
    let measurer = Measurer::with_parts(target, Box::new(builder), Box::new(runner));
    Ok(PieceState { task, measurer })
}

/// Measures one piece: each candidate generated for this device, built, run, checked. The
/// task's state is reused from an earlier piece of the task when there was one (the second
/// value says whether).
fn measure_piece(
    target: &Target,
    build_jobs: usize,
    piece: &pb::WorkPiece,
    states: &Mutex<TaskStates<PieceState>>,
) -> Result<(Vec<MeasureResult>, bool)> {
    let key = TaskKey {
        workload_key: piece.workload_key.clone(),
        options_json: piece.options_json.clone(),
    };
    let kept = states.lock().unwrap_or_else(|p| p.into_inner()).take(&key);
    let reused = kept.is_some();
    let mut state = match kept {
        Some(s) => s,
        None => new_state(target, build_jobs, piece)?,
    };
    let mut out: Vec<Option<MeasureResult>> = vec![None; piece.steps_json.len()];
    let mut ok = vec![];
    let mut idx = vec![];
    for (i, s) in piece.steps_json.iter().enumerate() {
        match Schedule::from_json(s) {
            Ok(s) => {
                idx.push(i);
                ok.push(s);
            }
            Err(e) => {
                out[i] = Some(MeasureResult::error(
                    ErrorCode::InvalidSchedule,
                    e.to_string(),
                ))
            }
        }
    }
    for (i, r) in idx
        .into_iter()
        .zip(state.measurer.measure(&state.task, &ok))
    {
        out[i] = Some(r);
    }
    states
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .put(key, state);
    Ok((
        out.into_iter().map(|r| r.expect("filled")).collect(),
        reused,
    ))
}

fn to_pb(r: MeasureResult) -> pb::MeasuredCandidate {
    pb::MeasuredCandidate {
        costs: r.costs,
        error_code: r.error.code(),
        error_msg: r.error_msg,
        build_s: r.build_s,
        run_s: r.run_s,
        noisy: r.noisy,
    }
}

#[tokio::main]
async fn main() -> Result<ExitCode> {
    let args = Args::parse();
    init_tracing(args.log_format);
    if servers::list(&args.server).is_empty() {
        bail!("--server names no server");
    }
    let target = target_of(&args);
    if args.print_target {
        println!("{}", serde_json::to_string_pretty(&target)?);
        println!("key: {}", target.key());
        return Ok(ExitCode::SUCCESS);
    }
    let device_id = args.device_id.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "device".to_string());
        format!("{host}/{}", target.key())
    });
    let build_jobs = args.build_jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });

    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        tokio::spawn(async move {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("a SIGTERM handler");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            tracing::info!("stopping: the piece in hand is finished first");
            stop.store(true, Ordering::SeqCst);
        });
    }

    // The lease in hand, for the heartbeats.
    let lease: Arc<Mutex<String>> = Arc::default();
    // Kept across sessions too: a reconnect does not make a task's state stale.
    let states = Arc::new(Mutex::new(TaskStates::new(KEPT_TASKS)));
    let ended = async {
        // Where the last server sent this device (its pool moved to another replica).
        let mut moved = None;
        while !stop.load(Ordering::SeqCst) {
            let Some(s) = register_with_backoff(&args, &target, &device_id, &stop, moved).await?
            else {
                break;
            };
            let span = tracing::info_span!("session", worker_id = %s.id, server = %s.server);
            moved = session(&args, &target, build_jobs, &states, s, &lease, &stop)
                .instrument(span)
                .await?;
        }
        Ok::<(), Fatal>(())
    }
    .instrument(tracing::info_span!("worker", device_id = %device_id))
    .await;
    if let Err(fatal) = ended {
        // One line (no backtrace), and a failed status: no retry mends it.
        eprintln!("error: {fatal}");
        return Ok(ExitCode::from(fatal.exit_status()));
    }
    tracing::info!("worker stopped");
    Ok(ExitCode::SUCCESS)
}

/// Colours for a person at a terminal only: a journal, a log file or a collector's pipe gets
/// plain text (tracing-subscriber colours whatever the output is). NO_COLOR, when set and not
/// empty, turns them off at a terminal too, as tracing-subscriber's own default does.
fn colour() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Logs on stderr, as text or JSON lines; lines carry the device, the worker id once
/// registered, and the job, workload and lease of the piece being measured.
fn init_tracing(format: LogFormat) {
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(colour());
    match format {
        LogFormat::Text => fmt.init(),
        LogFormat::Json => fmt
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .init(),
    }
}

/// Pulls, measures and reports pieces for one registration, until stopped or the connection
/// is lost (then the caller registers again), or the server refuses the token. `Some(url)`:
/// the server said the device's pool moved to the replica at `url`.
async fn session(
    args: &Args,
    target: &Target,
    build_jobs: usize,
    states: &Arc<Mutex<TaskStates<PieceState>>>,
    mut s: Session,
    lease: &Arc<Mutex<String>>,
    stop: &AtomicBool,
) -> Result<Option<String>, Fatal> {
    let moved: Arc<Mutex<Option<String>>> = Arc::default();
    let heartbeat = {
        let (mut c, id, lease, every, server, to) = (
            s.client.clone(),
            s.id.clone(),
            Arc::clone(lease),
            s.heartbeat,
            s.server.clone(),
            Arc::clone(&moved),
        );
        tokio::spawn(
            async move {
                loop {
                    tokio::time::sleep(every).await;
                    let lease_id = lease.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    match c
                        .heartbeat(pb::HeartbeatRequest {
                            worker_id: id.clone(),
                            lease_id,
                        })
                        .await
                    {
                        Ok(r) if !r.get_ref().redirect.is_empty() => {
                            let url = servers::redirect_url(&server, &r.get_ref().redirect);
                            tracing::warn!(to = %url, "this device's pool moved to another \
                                server replica (the piece in hand is forgotten)");
                            *to.lock().unwrap_or_else(|p| p.into_inner()) = Some(url);
                            return;
                        }
                        Ok(r) if r.get_ref().lease_lost => {
                            tracing::warn!("the server took the piece in hand back (lease lost)")
                        }
                        Ok(_) => {}
                        Err(e) => tracing::debug!("heartbeat: {e}"),
                    }
                }
            }
            .in_current_span(),
        )
    };
    let _stop_heartbeat = AbortOnDrop(heartbeat);
    while !stop.load(Ordering::SeqCst) {
        let pulled = s
            .client
            .pull(pb::PullRequest {
                worker_id: s.id.clone(),
                wait_ms: 2000,
            })
            .await;
        let piece = match pulled {
            Ok(r) => r.into_inner().piece,
            Err(e) => {
                if let Some(r) = refused_status(&s.server, &e) {
                    return Err(r);
                }
                if e.code() == Code::NotFound {
                    tracing::warn!("the server does not know this worker: registering again");
                } else {
                    tracing::warn!("pull: {e}; reconnecting");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                return Ok(moved.lock().unwrap_or_else(|p| p.into_inner()).take());
            }
        };
        let Some(piece) = piece else { continue };
        let span = tracing::info_span!("piece", job_id = %piece.job_id,
            workload = %piece.workload_key, lease = %piece.lease_id);
        let sent = measure_and_report(args, target, build_jobs, states, &mut s, lease, piece)
            .instrument(span)
            .await?;
        if !sent {
            return Ok(moved.lock().unwrap_or_else(|p| p.into_inner()).take());
        }
    }
    Ok(None)
}

/// Measures one piece (off the async threads) and reports it; false when the report could not
/// be delivered (the caller reconnects).
async fn measure_and_report(
    args: &Args,
    target: &Target,
    build_jobs: usize,
    states: &Arc<Mutex<TaskStates<PieceState>>>,
    s: &mut Session,
    lease: &Arc<Mutex<String>>,
    piece: pb::WorkPiece,
) -> Result<bool, Fatal> {
    *lease.lock().unwrap_or_else(|p| p.into_inner()) = piece.lease_id.clone();
    let n = piece.steps_json.len();
    tracing::info!(candidates = n, "measuring a piece");
    let (t, p, span) = (target.clone(), piece.clone(), tracing::Span::current());
    let states = Arc::clone(states);
    let results = tokio::task::spawn_blocking(move || {
        let _in = span.enter();
        measure_piece(&t, build_jobs, &p, &states)
    })
    .await;
    let results = match results {
        Ok(Ok((r, reused))) => {
            tracing::debug!(reused, "the task's state (reference, harness, calibration)");
            r
        }
        Ok(Err(e)) => vec![MeasureResult::error(ErrorCode::UnknownError, format!("{e:#}")); n],
        Err(e) => vec![
            MeasureResult::error(
                ErrorCode::UnknownError,
                format!("the measurement panicked: {e}")
            );
            n
        ],
    };
    let errors = results.iter().filter(|r| !r.is_ok()).count();
    let report = pb::ReportRequest {
        worker_id: s.id.clone(),
        lease_id: piece.lease_id.clone(),
        results: results.into_iter().map(to_pb).collect(),
        handed_back: false,
    };
    // Reported even across a reconnect: a result under a lapsed lease is simply ignored by the
    // server.
    let mut sent = false;
    for attempt in 0..5u32 {
        match s.client.report(report.clone()).await {
            Ok(r) => {
                if r.get_ref().accepted {
                    tracing::info!(candidates = n, errors, "piece reported");
                } else {
                    tracing::info!("report ignored: the piece was measured elsewhere");
                }
                sent = true;
                break;
            }
            Err(e) if e.code() == Code::NotFound => break,
            // The server refused the report itself (a result it cannot trust): sending it
            // again changes nothing; the piece is measured elsewhere.
            Err(e) if e.code() == Code::InvalidArgument => {
                tracing::error!("report refused: {}", e.message());
                sent = true;
                break;
            }
            Err(e) => {
                if let Some(r) = refused_status(&s.server, &e) {
                    lease.lock().unwrap_or_else(|p| p.into_inner()).clear();
                    return Err(r);
                }
                tracing::warn!("report: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
                if let Ok(c) = connect(args, &s.server).await {
                    s.client = c;
                }
            }
        }
    }
    lease.lock().unwrap_or_else(|p| p.into_inner()).clear();
    Ok(sent)
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// A flag's default is said once: by clap, from its default value, or in its help text
    /// when the worker decides it (the host's cores); never both, never an empty one.
    #[test]
    fn each_default_is_said_once() {
        let cmd = Args::command();
        cmd.clone().debug_assert();
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            let defaults = arg.get_default_values();
            assert!(
                defaults.is_empty()
                    || arg.is_hide_default_value_set()
                    || !help.contains("[default:"),
                "--{id}: a default in its help and another from clap"
            );
            assert!(
                defaults.iter().all(|d| !d.is_empty()),
                "--{id}: an empty default"
            );
        }
    }
}
