//! Reaching a tunehub service: the settings (flags, environment, the config file's `[client]`
//! table), one channel with the four service clients, and the token on every call. The
//! Python client reads the same settings in the same order. `mismatch`: a connection that
//! fails for TLS on one side only or an unknown CA, told as such.

mod mismatch;

use crate::usage::UsageError;
use anyhow::{Context, Result, anyhow};
use clap::Args;
use mismatch::Mismatch;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Request, Status};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
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
    /// The server's URL: http://HOST:PORT, or https://HOST:PORT for TLS; HOST:PORT alone is
    /// http:// [default: http://127.0.0.1:50051].
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

/// The URL a client dials: `--server` as given, `http://` added when it has no scheme
/// (`127.0.0.1:50051`, as `tunehub server` prints its address). Another scheme is bad input.
pub fn server_url(given: &str) -> Result<String, UsageError> {
    match given.split_once("://") {
        None => Ok(format!("http://{given}")),
        Some(("http" | "https", _)) => Ok(given.to_string()),
        Some(_) => Err(UsageError(format!(
            "bad server URL '{given}' (expected http://HOST:PORT, https://HOST:PORT or HOST:PORT)"
        ))),
    }
}

/// Connects to the service `cfg` names, and checks that it answers (the health service: no
/// token needed). A URL, token or CA file that cannot be used, or TLS on one side only, is bad
/// input with the fix in its one line; a service that does not answer is a failure naming the
/// URL.
pub async fn connect(cfg: &ClientConfig) -> Result<Clients> {
    let url = server_url(&cfg.server)?;
    let bad_url = || {
        UsageError(format!(
            "bad server URL '{url}' (expected http://HOST:PORT or https://HOST:PORT)"
        ))
    };
    let mut ep = Endpoint::from_shared(url.clone()).map_err(|_| bad_url())?;
    let tls = ep.uri().scheme_str() == Some("https");
    // Where the connection goes, for the probe and for the fix a mismatch's message gives.
    let host_port = {
        let host = ep.uri().host().ok_or_else(bad_url)?;
        let port = ep.uri().port_u16().unwrap_or(if tls { 443 } else { 80 });
        format!("{host}:{port}")
    };
    if tls {
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
            .with_context(|| format!("TLS settings for {url}"))?;
    }
    let token = BearerToken::new(cfg.token.as_deref())?;
    let no_answer = |e: &dyn std::fmt::Display| {
        anyhow!("cannot connect to {url} (is `tunehub server` running there?): {e}")
    };
    let channel = match ep.connect().await {
        Ok(c) => c,
        Err(e) => {
            return Err(match mismatch::tls_mismatch(&e) {
                Some(m) => mismatch_error(m, &url, &host_port).into(),
                None => no_answer(&chain(e.to_string(), std::error::Error::source(&e))),
            });
        }
    };
    // Connecting sends the HTTP/2 preface without waiting for the server's: whether the server
    // speaks HTTP/2 shows in a first call's answer. Any answer will do (even NOT_SERVING from a
    // draining server); a status made on this side (it has a source: the transport's error)
    // is no answer.
    let health = HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await;
    if let Err(s) = health
        && std::error::Error::source(&s).is_some()
    {
        // A plain connection to a TLS server only closes: ask the server what it speaks.
        if !tls && mismatch::speaks_tls(&host_port).await {
            return Err(mismatch_error(Mismatch::PlainToTls, &url, &host_port).into());
        }
        return Err(no_answer(&chain(
            s.message().to_string(),
            std::error::Error::source(&s),
        )));
    }
    Ok(Clients::new(channel, token))
}

/// A message and the sources under it, `: `-separated, as anyhow's `{:#}` prints a chain.
fn chain(message: String, mut next: Option<&(dyn std::error::Error + 'static)>) -> String {
    let mut parts = vec![message];
    while let Some(s) = next {
        let text = s.to_string();
        // tonic and hyper repeat a source's message in their own.
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = s.source();
    }
    parts.join(": ")
}

/// The one line a mismatch gets: what the server speaks, and the fix.
fn mismatch_error(m: Mismatch, url: &str, host_port: &str) -> UsageError {
    UsageError(match m {
        Mismatch::TlsToPlain => {
            format!("the server at {url} speaks plain HTTP/2, not TLS: use http://{host_port}")
        }
        Mismatch::PlainToTls => format!(
            "the server at {url} speaks TLS: use https://{host_port} (and --ca-cert FILE if a \
             private CA signed its certificate)"
        ),
        Mismatch::UnknownCa => format!(
            "the certificate of the server at {url} is signed by a CA this client does not \
             trust: name that CA's certificate with --ca-cert FILE (or TUNEHUB_CA_CERT)"
        ),
    })
}

/// Connects as the command line's flags, environment and config file say.
pub async fn connect_with(args: &ClientArgs) -> Result<Clients> {
    connect(&ClientConfig::resolve(args)?).await
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

#[cfg(test)]
mod url_tests {
    use super::server_url;

    #[test]
    fn a_url_without_a_scheme_is_http() {
        assert_eq!(
            server_url("127.0.0.1:50051").unwrap(),
            "http://127.0.0.1:50051"
        );
        assert_eq!(server_url("localhost:1").unwrap(), "http://localhost:1");
        assert_eq!(server_url("https://h:1").unwrap(), "https://h:1");
        assert_eq!(server_url("http://h:1").unwrap(), "http://h:1");
        let e = server_url("grpc://h:1").unwrap_err();
        assert!(
            e.0.contains("grpc://h:1") && e.0.contains("HOST:PORT"),
            "{e}"
        );
    }
}
