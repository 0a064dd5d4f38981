//! Configuration of the service: flags, then environment variables (clap reads both), then an
//! optional TOML file (`--config`, its `[server]` table), then defaults.
//!
//! Flags are `Option`s without clap defaults so that a value missing on the command line can be
//! taken from the file. Each default is a constant here (or the engine's, for the search), read
//! by both the flag's help and `ServerConfig::resolve`.

use clap::{ArgAction, Args, value_parser};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use tunehub_engine::search::{DEFAULT_BATCH, DEFAULT_POPULATION};
use tunehub_engine::target::TargetOverrides;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:50051";
pub const DEFAULT_DB: &str = "tunehub.db";
pub const DEFAULT_LEASE_S: f64 = 30.0;
pub const DEFAULT_POLL_MS: u64 = 1000;
pub const DEFAULT_HEARTBEAT_MS: u64 = 1000;
pub const DEFAULT_CACHE_TTL_MS: u64 = 2000;
pub const DEFAULT_TUNE_TRANSFERRED_TRIALS: u32 = 64;

/// A flag's help with its default, from the constant the configuration uses.
fn help(text: &str, default: impl std::fmt::Display) -> String {
    format!("{text} [default: {default}]")
}
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the configuration file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("configuration file {path}: {msg}")]
    Parse { path: PathBuf, msg: String },
    #[error("{0}")]
    Invalid(String),
}

/// The TOML file: a `[server]` table for `tunehub server`, a `[client]` table for the commands
/// that talk to a server (the command line's and the Python client's to read). Keys are the
/// long flags' names with `_` for `-`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub server: ServerFile,
    #[serde(default)]
    pub client: toml::Table,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerFile {
    pub listen: Option<SocketAddr>,
    pub advertise_addr: Option<String>,
    pub metrics_addr: Option<SocketAddr>,
    pub http: Option<SocketAddr>,
    pub db: Option<String>,
    /// Admin tokens (`token-1`, ...), as `--token` gives them.
    pub tokens: Option<Vec<String>>,
    /// Named tokens with roles (`crate::auth::tokens`).
    pub api_tokens: Option<Vec<crate::auth::TokenEntry>>,
    pub allow_unauthenticated: Option<bool>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_worker_ca: Option<PathBuf>,
    pub max_trials_per_job: Option<u32>,
    pub max_tasks_per_job: Option<u32>,
    pub max_message_bytes: Option<usize>,
    pub lease_s: Option<f64>,
    pub poll_ms: Option<u64>,
    pub heartbeat_ms: Option<u64>,
    pub cache_ttl_ms: Option<u64>,
    pub instance: Option<String>,
    pub jobs_per_pool: Option<usize>,
    pub batch: Option<u32>,
    pub population: Option<usize>,
    pub cores: Option<u32>,
    pub cc: Option<String>,
    pub cflags: Option<String>,
    pub march: Option<String>,
    pub tune_transferred: Option<bool>,
    pub tune_transferred_trials: Option<u32>,
}

impl ConfigFile {
    pub fn load(path: Option<&Path>) -> Result<ConfigFile, ConfigError> {
        let Some(path) = path else {
            return Ok(ConfigFile::default());
        };
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.into(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.into(),
            msg: e.message().to_string(),
        })
    }
}

/// Overrides of the detected target (this machine).
#[derive(Debug, Clone, Default, Args)]
pub struct TargetArgs {
    /// Threads for the kernels' parallel loops [default: the machine's cores].
    #[arg(long, value_name = "N", value_parser = value_parser!(u32).range(1..=4096))]
    pub cores: Option<u32>,

    /// C compiler to build kernels with [default: the detected one].
    #[arg(long = "cc", value_name = "COMPILER")]
    pub compiler: Option<String>,

    /// Compiler flags, as one whitespace-separated string, e.g. --cflags "-O3 -ffast-math"
    /// [default: the target's].
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub cflags: Option<String>,

    /// Value for -march, e.g. `native` or `skylake-avx512` [default: the target's].
    #[arg(long, value_name = "ARCH")]
    pub march: Option<String>,
}

impl TargetArgs {
    /// The detected target's overrides these flags ask for.
    pub fn overrides(&self) -> TargetOverrides {
        TargetOverrides {
            cores: self.cores.map(|c| c as usize),
            compiler: self.compiler.clone(),
            cflags: self.cflags_list(),
            march: self.march.clone(),
            ..TargetOverrides::default()
        }
    }

    /// The flags as separate arguments.
    pub fn cflags_list(&self) -> Option<Vec<String>> {
        self.cflags
            .as_ref()
            .map(|f| f.split_whitespace().map(String::from).collect())
    }
}

/// `tunehub server`'s flags.
#[derive(Debug, Clone, Default, Args)]
pub struct ServerArgs {
    /// TOML configuration file ([server] table; flags and environment variables win over it).
    #[arg(long, value_name = "FILE", env = "TUNEHUB_CONFIG")]
    pub config: Option<PathBuf>,

    #[arg(long, value_name = "ADDR", env = "TUNEHUB_LISTEN", help = format!(
        "Address to serve gRPC on [default: {DEFAULT_LISTEN}]. Port 0 picks a free port; the \
         first line on stdout says which (`listening on ADDR`)"))]
    pub listen: Option<SocketAddr>,

    /// Where workers reach this server (HOST:PORT, or HOST for the listen port), when server
    /// replicas share a database: a worker registering with another replica for a pool this
    /// one owns is sent here [default: the listen address; for a wildcard one, this host's
    /// name and the port].
    #[arg(long, value_name = "HOST:PORT", env = "TUNEHUB_ADVERTISE_ADDR")]
    pub advertise_addr: Option<String>,

    /// Serve Prometheus metrics (OpenMetrics text at http://ADDR/metrics) on this address, apart
    /// from gRPC [default: off]. Port 0 picks a free port (`metrics on ADDR` on stdout).
    #[arg(long, value_name = "ADDR", env = "TUNEHUB_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,

    /// Serve the web dashboard (jobs and their curves, the fleet, records and kernels, health)
    /// at http://ADDR/ [default: off]. It asks for an API token and shows what the token's role
    /// may call; a `viewer` token looks only. Port 0 picks a free port (`dashboard on
    /// http://ADDR/` on stdout).
    #[arg(long, value_name = "ADDR", env = "TUNEHUB_HTTP")]
    pub http: Option<SocketAddr>,

    #[arg(long, value_name = "PATH_OR_URL", env = "TUNEHUB_DB", help = help(
        "Database: a SQLite file (created if missing), a sqlite:// or a postgres:// URL",
        DEFAULT_DB))]
    pub db: Option<String>,

    /// Admin API token a client must present (`authorization: Bearer TOKEN`); repeat for
    /// several, or give a comma-separated list in TUNEHUB_TOKENS. Tokens with other roles
    /// (client, worker, query) are named in the config file's [[server.api_tokens]].
    #[arg(long = "token", value_name = "TOKEN", env = "TUNEHUB_TOKENS", value_delimiter = ',',
          action = ArgAction::Append, hide_env_values = true)]
    pub tokens: Vec<String>,

    /// Serve without tokens: every call is admitted. Without this flag a server with no token
    /// refuses to start.
    #[arg(long, env = "TUNEHUB_ALLOW_UNAUTHENTICATED")]
    pub allow_unauthenticated: bool,

    /// TLS certificate chain (PEM); with --tls-key, the server speaks TLS only.
    #[arg(
        long,
        value_name = "FILE",
        env = "TUNEHUB_TLS_CERT",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,

    /// TLS private key (PEM) of --tls-cert.
    #[arg(
        long,
        value_name = "FILE",
        env = "TUNEHUB_TLS_KEY",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,

    /// Mutual TLS for workers: CA certificate (PEM) that must have signed the client
    /// certificate of every worker call (register, heartbeat, pull, report); other clients
    /// need none. Needs --tls-cert.
    #[arg(
        long,
        value_name = "FILE",
        env = "TUNEHUB_TLS_WORKER_CA",
        requires = "tls_cert"
    )]
    pub tls_worker_ca: Option<PathBuf>,

    #[arg(long, value_name = "N", value_parser = value_parser!(u32).range(1..),
          help = help("Most trials (all tasks together) one job may ask for", Limits::default().max_trials_per_job))]
    pub max_trials_per_job: Option<u32>,

    #[arg(long, value_name = "N", value_parser = value_parser!(u32).range(1..),
          help = help("Most tasks in one job", Limits::default().max_tasks_per_job))]
    pub max_tasks_per_job: Option<u32>,

    #[arg(long, value_name = "BYTES",
          help = help("Largest gRPC message accepted or sent, in bytes", Limits::default().max_message_bytes))]
    pub max_message_bytes: Option<usize>,

    #[arg(long, value_name = "SECONDS", help = help(
        "Seconds a claimed job, or a pool of workers, stays this server's without renewal; after \
         a crash another server (or this one restarted) takes it over once it runs out",
        DEFAULT_LEASE_S))]
    pub lease_s: Option<f64>,

    #[arg(long, value_name = "MS",
          help = help("Milliseconds between looks for claimable jobs when idle", DEFAULT_POLL_MS))]
    pub poll_ms: Option<u64>,

    #[arg(long, value_name = "MS", value_parser = value_parser!(u64).range(100..=60_000), help = help(
        "Milliseconds between a worker's heartbeats (the server tells each worker at \
         registration); a worker silent for 3.5 of them is offline and loses its piece. Longer \
         suits large fleets (the server's cost per worker is mostly heartbeats); shorter \
         re-dispatches a dead worker's piece sooner",
        DEFAULT_HEARTBEAT_MS))]
    pub heartbeat_ms: Option<u64>,

    #[arg(long, value_name = "MS", help = help(
        "Milliseconds a cached best record, or a kept range or zero-shot answer, is trusted \
         before it is read or made again (records stored by other servers show up after this)",
        DEFAULT_CACHE_TTL_MS))]
    pub cache_ttl_ms: Option<u64>,

    /// This server's name in job claims and in the records it measures [default:
    /// `local-HOST-PID`].
    #[arg(long, value_name = "NAME", env = "TUNEHUB_INSTANCE")]
    pub instance: Option<String>,

    #[arg(long, value_name = "N", value_parser = value_parser!(u32).range(1..=1024), help = help(
        "Most jobs a pool of worker devices runs at once, its workers shared by the jobs' \
         priorities (weight 2^(priority/5)); the server's own machine runs one job at a time \
         whatever this says",
        crate::jobs::DEFAULT_JOBS_PER_POOL))]
    pub jobs_per_pool: Option<u32>,

    #[arg(long, value_name = "N", value_parser = value_parser!(u32).range(1..=1024),
          help = help("Candidates per round when a job does not say", DEFAULT_BATCH))]
    pub batch: Option<u32>,

    #[arg(long, value_name = "N", env = "TUNEHUB_POPULATION", value_parser = value_parser!(u64).range(1..=1_000_000),
          help = help("Evolutionary search population per round (Ansor's; smaller is faster per round and searches less)", DEFAULT_POPULATION))]
    pub population: Option<u64>,

    /// Queue a background tuning job for every workload a zero-shot answer (`allow_transfer`)
    /// was given for, at most once per (workload, target), on targets this server measures.
    #[arg(long, env = "TUNEHUB_TUNE_TRANSFERRED")]
    pub tune_transferred: bool,

    #[arg(long, value_name = "N", value_parser = value_parser!(u32).range(1..),
          help = help("Trials of each such job", DEFAULT_TUNE_TRANSFERRED_TRIALS))]
    pub tune_transferred_trials: Option<u32>,

    #[command(flatten)]
    pub target: TargetArgs,
}

/// The server's settings, resolved.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// Where workers reach this server (`--advertise-addr`); `None`: derived from the bound
    /// listener (`server::advertised`).
    pub advertise_addr: Option<String>,
    /// Where to serve metrics; `None`: not at all.
    pub metrics_addr: Option<SocketAddr>,
    /// Where to serve the web dashboard; `None`: not at all.
    pub http: Option<SocketAddr>,
    pub db: String,
    pub tokens: Vec<crate::auth::ApiToken>,
    pub allow_unauthenticated: bool,
    pub tls: Option<(PathBuf, PathBuf)>,
    /// With `tls`: the CA of workers' client certificates (mutual TLS for worker calls).
    pub tls_worker_ca: Option<PathBuf>,
    pub limits: Limits,
    pub lease_ms: u64,
    pub poll_ms: u64,
    /// Workers' heartbeat period (`FleetConfig::with_heartbeat`).
    pub heartbeat_ms: u64,
    pub cache_ttl_ms: u64,
    pub instance: String,
    /// Most jobs a pool of worker devices runs at once (`jobs::JobContext::jobs_per_pool`).
    pub jobs_per_pool: usize,
    pub target: TargetOverrides,
    /// Evolutionary population per round.
    pub population: usize,
    /// Whether the server claims and runs queued jobs (the embedded server of `tunehub tune`
    /// runs only its own, through `jobs::run_one`).
    pub run_jobs: bool,
    /// Trials of the background job queued for a workload answered by transfer; `None`: none
    /// is queued (`tune_transferred` off).
    pub tune_transferred: Option<u32>,
}

/// What one request may ask for.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_trials_per_job: u32,
    pub max_tasks_per_job: u32,
    pub max_message_bytes: usize,
    pub default_batch: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_trials_per_job: 100_000,
            max_tasks_per_job: 256,
            max_message_bytes: 16 << 20,
            // One default with the CLI and the benchmark: the engine's.
            default_batch: DEFAULT_BATCH as u32,
        }
    }
}

pub fn default_instance() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let host = if host.is_empty() { "host".into() } else { host };
    format!("local-{host}-{}", std::process::id())
}

impl ServerConfig {
    /// Flags and environment, then the file, then defaults.
    pub fn resolve(args: &ServerArgs) -> Result<ServerConfig, ConfigError> {
        let f = ConfigFile::load(args.config.as_deref())?.server;
        let d = Limits::default();
        let admin = if args.tokens.is_empty() {
            f.tokens.unwrap_or_default()
        } else {
            args.tokens.clone()
        };
        let tokens = crate::auth::resolve_tokens(&admin, &f.api_tokens.unwrap_or_default())
            .map_err(ConfigError::Invalid)?;
        let allow_unauthenticated =
            args.allow_unauthenticated || f.allow_unauthenticated.unwrap_or(false);
        if tokens.is_empty() && !allow_unauthenticated {
            return Err(ConfigError::Invalid(
                "no API token: give --token (or TUNEHUB_TOKENS, or tokens in the config file), \
                 or --allow-unauthenticated to serve without"
                    .into(),
            ));
        }
        let tls = match (
            args.tls_cert.clone().or(f.tls_cert),
            args.tls_key.clone().or(f.tls_key),
        ) {
            (Some(c), Some(k)) => Some((c, k)),
            (None, None) => None,
            _ => {
                return Err(ConfigError::Invalid(
                    "TLS needs both a certificate and a key".into(),
                ));
            }
        };
        let tls_worker_ca = args.tls_worker_ca.clone().or(f.tls_worker_ca);
        if tls_worker_ca.is_some() && tls.is_none() {
            return Err(ConfigError::Invalid(
                "tls_worker_ca (mutual TLS for workers) needs the server's TLS certificate and key"
                    .into(),
            ));
        }
        let advertise_addr = args.advertise_addr.clone().or(f.advertise_addr);
        if let Some(a) = &advertise_addr
            && (a.trim().is_empty() || a.chars().any(char::is_whitespace))
        {
            return Err(ConfigError::Invalid(format!(
                "advertise address {a:?}: give HOST:PORT"
            )));
        }
        let lease_s = args.lease_s.or(f.lease_s).unwrap_or(DEFAULT_LEASE_S);
        if !(lease_s.is_finite() && (0.3..=86_400.0).contains(&lease_s)) {
            return Err(ConfigError::Invalid(format!(
                "lease of {lease_s} s: give 0.3 to 86400 seconds"
            )));
        }
        let heartbeat_ms = args
            .heartbeat_ms
            .or(f.heartbeat_ms)
            .unwrap_or(DEFAULT_HEARTBEAT_MS);
        if !(100..=60_000).contains(&heartbeat_ms) {
            return Err(ConfigError::Invalid(format!(
                "heartbeat of {heartbeat_ms} ms: give 100 to 60000 ms"
            )));
        }
        let jobs_per_pool = args
            .jobs_per_pool
            .map(|n| n as usize)
            .or(f.jobs_per_pool)
            .unwrap_or(crate::jobs::DEFAULT_JOBS_PER_POOL);
        if !(1..=1024).contains(&jobs_per_pool) {
            return Err(ConfigError::Invalid(format!(
                "jobs_per_pool {jobs_per_pool}: give 1 to 1024"
            )));
        }
        let cflags = args.target.cflags.clone().or(f.cflags);
        Ok(ServerConfig {
            listen: args
                .listen
                .or(f.listen)
                .unwrap_or_else(|| DEFAULT_LISTEN.parse().expect("a valid address")),
            advertise_addr,
            metrics_addr: args.metrics_addr.or(f.metrics_addr),
            http: args.http.or(f.http),
            db: args
                .db
                .clone()
                .or(f.db)
                .unwrap_or_else(|| DEFAULT_DB.into()),
            tokens,
            allow_unauthenticated,
            tls,
            tls_worker_ca,
            limits: Limits {
                max_trials_per_job: args
                    .max_trials_per_job
                    .or(f.max_trials_per_job)
                    .unwrap_or(d.max_trials_per_job),
                max_tasks_per_job: args
                    .max_tasks_per_job
                    .or(f.max_tasks_per_job)
                    .unwrap_or(d.max_tasks_per_job),
                max_message_bytes: args
                    .max_message_bytes
                    .or(f.max_message_bytes)
                    .unwrap_or(d.max_message_bytes),
                default_batch: args.batch.or(f.batch).unwrap_or(d.default_batch),
            },
            lease_ms: (lease_s * 1000.0) as u64,
            poll_ms: args
                .poll_ms
                .or(f.poll_ms)
                .unwrap_or(DEFAULT_POLL_MS)
                .max(10),
            heartbeat_ms,
            cache_ttl_ms: args
                .cache_ttl_ms
                .or(f.cache_ttl_ms)
                .unwrap_or(DEFAULT_CACHE_TTL_MS),
            jobs_per_pool,
            instance: args
                .instance
                .clone()
                .or(f.instance)
                .unwrap_or_else(default_instance),
            target: TargetOverrides {
                cores: args.target.cores.or(f.cores).map(|c| c as usize),
                compiler: args.target.compiler.clone().or(f.cc),
                cflags: cflags.map(|c| c.split_whitespace().map(String::from).collect()),
                march: args.target.march.clone().or(f.march),
                ..TargetOverrides::default()
            },
            population: args
                .population
                .map(|p| p as usize)
                .or(f.population)
                .unwrap_or(DEFAULT_POPULATION)
                .max(1),
            run_jobs: true,
            tune_transferred: (args.tune_transferred || f.tune_transferred.unwrap_or(false)).then(
                || {
                    args.tune_transferred_trials
                        .or(f.tune_transferred_trials)
                        .unwrap_or(DEFAULT_TUNE_TRANSFERRED_TRIALS)
                },
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_the_file_which_wins_over_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(
            &path,
            "[server]\ndb = \"file.db\"\ntokens = [\"a\"]\nlease_s = 5\nmax_tasks_per_job = 3\n\
             [client]\nserver = \"http://h:1\"\n",
        )
        .unwrap();
        let args = ServerArgs {
            config: Some(path.clone()),
            db: Some("flag.db".into()),
            ..ServerArgs::default()
        };
        let c = ServerConfig::resolve(&args).unwrap();
        assert_eq!(c.db, "flag.db");
        assert_eq!(c.tokens, [crate::auth::ApiToken::admin(0, "a")]);
        assert_eq!(c.lease_ms, 5000);
        assert_eq!(c.limits.max_tasks_per_job, 3);
        assert_eq!(c.limits.max_trials_per_job, 100_000);
        assert_eq!(c.listen.to_string(), DEFAULT_LISTEN);

        assert_eq!(c.jobs_per_pool, crate::jobs::DEFAULT_JOBS_PER_POOL);
        assert_eq!(c.tune_transferred, None, "off by default");
        std::fs::write(
            &path,
            "[server]\ntokens = [\"a\"]\ntune_transferred = true\n",
        )
        .unwrap();
        let c = ServerConfig::resolve(&args).unwrap();
        assert_eq!(c.tune_transferred, Some(64));
        let c = ServerConfig::resolve(&ServerArgs {
            tune_transferred_trials: Some(8),
            ..ServerArgs {
                config: Some(path.clone()),
                ..ServerArgs::default()
            }
        })
        .unwrap();
        assert_eq!(c.tune_transferred, Some(8));

        assert_eq!(c.heartbeat_ms, 1000, "the default heartbeat");
        std::fs::write(&path, "[server]\ntokens = [\"a\"]\nheartbeat_ms = 5000\n").unwrap();
        assert_eq!(ServerConfig::resolve(&args).unwrap().heartbeat_ms, 5000);
        std::fs::write(&path, "[server]\ntokens = [\"a\"]\nheartbeat_ms = 5\n").unwrap();
        let e = ServerConfig::resolve(&args).unwrap_err().to_string();
        assert!(e.contains("heartbeat of 5 ms"), "{e}");
        std::fs::write(&path, "[server]\ntokens = [\"a\"]\njobs_per_pool = 2\n").unwrap();
        assert_eq!(ServerConfig::resolve(&args).unwrap().jobs_per_pool, 2);
        let flag = ServerArgs {
            jobs_per_pool: Some(3),
            ..args.clone()
        };
        assert_eq!(
            ServerConfig::resolve(&flag).unwrap().jobs_per_pool,
            3,
            "the flag wins"
        );
        std::fs::write(&path, "[server]\ntokens = [\"a\"]\njobs_per_pool = 0\n").unwrap();
        let e = ServerConfig::resolve(&args).unwrap_err().to_string();
        assert!(e.contains("jobs_per_pool 0"), "{e}");

        std::fs::write(&path, "[server]\nbogus = 1\n").unwrap();
        let e = ServerConfig::resolve(&args).unwrap_err().to_string();
        assert!(e.contains("bogus"), "{e}");
        // No token and no --allow-unauthenticated: refused.
        let e = ServerConfig::resolve(&ServerArgs::default()).unwrap_err();
        assert!(e.to_string().contains("--allow-unauthenticated"), "{e}");
    }
}
