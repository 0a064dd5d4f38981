//! Reaching a tunehub service: the settings (flags, environment, the config file's `[client]`
//! table), one channel with the four service clients, and the token on every call. The
//! Python client reads the same settings in the same order.

use crate::usage::UsageError;
use anyhow::{Context, Result};
use clap::Args;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Request, Status};
use tunehub_proto::v1::jobs_client::JobsClient;
use tunehub_proto::v1::query_client::QueryClient;
use tunehub_proto::v1::records_client::RecordsClient;
use tunehub_proto::v1::workers_client::WorkersClient;

/// The service a client reaches when nothing says otherwise.
pub const DEFAULT_SERVER_URL: &str = "http://127.0.0.1:50051";

/// Messages up to this size are accepted from the server (exports, kernel sources; a fleet's
/// listing carries every worker's description, ~0.7 KB: 10,000 are ~7 MB).
const MAX_MESSAGE: usize = 64 << 20;

/// How the client commands reach a server.
#[derive(Debug, Clone, Default, Args)]
pub struct ClientArgs {
    /// The server's URL: http://HOST:PORT, or https://HOST:PORT for TLS
    /// [default: http://127.0.0.1:50051].
    #[arg(long, value_name = "URL", env = "TUNEHUB_SERVER")]
    pub server: Option<String>,

    /// API token sent with every call.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "TUNEHUB_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,

    /// CA certificate (PEM) that signed the server's TLS certificate (for https URLs).
    #[arg(long, value_name = "FILE", env = "TUNEHUB_CA_CERT")]
    pub ca_cert: Option<PathBuf>,

    /// TOML configuration file: its [client] table; flags and environment variables win over
    /// it [default: $XDG_CONFIG_HOME/tunehub/config.toml or ~/.config/tunehub/config.toml, when
    /// it exists].
    #[arg(long, value_name = "FILE", env = "TUNEHUB_CONFIG")]
    pub config: Option<PathBuf>,
}

/// The client's settings, resolved.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub server: String,
    pub token: Option<String>,
    pub ca_cert: Option<PathBuf>,
}

/// The config file's `[client]` table; keys are the long flags' names. Other tables (the
/// server's) are not the client's to check.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientFile {
    server: Option<String>,
    token: Option<String>,
    ca_cert: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    client: ClientFile,
}

/// The config file read when none is named: the user's, if they have one.
pub fn default_config_path() -> Option<PathBuf> {
    let dir = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".config")))?;
    Some(dir.join("tunehub").join("config.toml")).filter(|p| p.is_file())
}

impl ClientConfig {
    /// Flags and environment variables, then the file, then the defaults. A named file that
    /// cannot be read, or a `[client]` table with an unknown key, is bad input.
    pub fn resolve(args: &ClientArgs) -> Result<ClientConfig, UsageError> {
        let path = args.config.clone().or_else(default_config_path);
        let file = match &path {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| {
                    UsageError(format!(
                        "cannot read the configuration file {}: {e}",
                        p.display()
                    ))
                })?;
                toml::from_str::<ConfigFile>(&text)
                    .map_err(|e| {
                        UsageError(format!(
                            "configuration file {}: {}",
                            p.display(),
                            e.message()
                        ))
                    })?
                    .client
            }
            None => ClientFile::default(),
        };
        Ok(ClientConfig {
            server: args
                .server
                .clone()
                .or(file.server)
                .unwrap_or_else(|| DEFAULT_SERVER_URL.into()),
            token: args.token.clone().or(file.token),
            ca_cert: args.ca_cert.clone().or(file.ca_cert),
        })
    }
}

/// Adds the token to every call.
#[derive(Clone, Debug)]
pub struct BearerToken(Option<MetadataValue<Ascii>>);

impl BearerToken {
    pub fn new(token: Option<&str>) -> Result<Self, UsageError> {
        token
            .map(|t| {
                format!("Bearer {t}").parse().map_err(|_| {
                    UsageError("the API token has characters not allowed in metadata".into())
                })
            })
            .transpose()
            .map(BearerToken)
    }
}

impl tonic::service::Interceptor for BearerToken {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

pub type Authed = InterceptedService<Channel, BearerToken>;

/// One channel to a service, and a client of each of its services on it.
#[derive(Clone)]
pub struct Clients {
    pub jobs: JobsClient<Authed>,
    pub query: QueryClient<Authed>,
    pub records: RecordsClient<Authed>,
    pub workers: WorkersClient<Authed>,
    pub channel: Channel,
}

impl Clients {
    /// The clients of `channel`, each call carrying `token`.
    pub fn new(channel: Channel, token: BearerToken) -> Clients {
        Clients {
            jobs: JobsClient::with_interceptor(channel.clone(), token.clone())
                .max_decoding_message_size(MAX_MESSAGE),
            query: QueryClient::with_interceptor(channel.clone(), token.clone())
                .max_decoding_message_size(MAX_MESSAGE),
            records: RecordsClient::with_interceptor(channel.clone(), token.clone())
                .max_decoding_message_size(MAX_MESSAGE),
            workers: WorkersClient::with_interceptor(channel.clone(), token)
                .max_decoding_message_size(MAX_MESSAGE),
            channel,
        }
    }
}

/// Connects to the service `cfg` names. A URL or token that cannot be used is bad input; a
/// service that does not answer is a failure naming the URL.
pub async fn connect(cfg: &ClientConfig) -> Result<Clients> {
    let bad_url = || {
        UsageError(format!(
            "bad server URL '{}' (expected http://HOST:PORT or https://HOST:PORT)",
            cfg.server
        ))
    };
    // Without a scheme the URL would parse and the connection fail later, for another reason.
    if !cfg.server.starts_with("http://") && !cfg.server.starts_with("https://") {
        return Err(bad_url().into());
    }
    let mut ep = Endpoint::from_shared(cfg.server.clone()).map_err(|_| bad_url())?;
    if cfg.server.starts_with("https://") {
        let mut tls = ClientTlsConfig::new();
        if let Some(ca) = &cfg.ca_cert {
            let pem = std::fs::read(ca).map_err(|e| {
                UsageError(format!(
                    "cannot read the CA certificate {}: {e}",
                    ca.display()
                ))
            })?;
            tls = tls.ca_certificate(Certificate::from_pem(pem));
        }
        ep = ep
            .tls_config(tls)
            .with_context(|| format!("TLS settings for {}", cfg.server))?;
    }
    let token = BearerToken::new(cfg.token.as_deref())?;
    let channel = ep
        .connect()
        .await
        .with_context(|| format!("cannot connect to {}", cfg.server))?;
    Ok(Clients::new(channel, token))
}

/// Connects as the command line's flags, environment and config file say.
pub async fn connect_with(args: &ClientArgs) -> Result<Clients> {
    let cfg = ClientConfig::resolve(args)?;
    connect(&cfg)
        .await
        .with_context(|| format!("is `tunehub server` running at {}?", cfg.server))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_the_file_which_wins_over_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(
            &path,
            "[server]\ndb = \"x.db\"\n[client]\nserver = \"http://h:1\"\ntoken = \"t\"\n",
        )
        .unwrap();
        let from_file = ClientConfig::resolve(&ClientArgs {
            config: Some(path.clone()),
            ..ClientArgs::default()
        })
        .unwrap();
        assert_eq!(from_file.server, "http://h:1");
        assert_eq!(from_file.token.as_deref(), Some("t"));
        let flag = ClientConfig::resolve(&ClientArgs {
            server: Some("http://f:2".into()),
            config: Some(path),
            ..ClientArgs::default()
        })
        .unwrap();
        assert_eq!(flag.server, "http://f:2");
        assert_eq!(flag.token.as_deref(), Some("t"));
    }

    #[test]
    fn an_unknown_client_key_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(&path, "[client]\nsever = \"http://h:1\"\n").unwrap();
        let e = ClientConfig::resolve(&ClientArgs {
            config: Some(path),
            ..ClientArgs::default()
        })
        .unwrap_err();
        assert!(e.0.contains("sever"), "{e}");
    }
}
