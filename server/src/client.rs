//! The client side of the API, as the CLI commands and the tests use it: one channel, the
//! three service clients, the token on every call.

use crate::auth::BearerToken;
use crate::config::ClientConfig;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tunehub_proto::v1::jobs_client::JobsClient;
use tunehub_proto::v1::query_client::QueryClient;
use tunehub_proto::v1::records_client::RecordsClient;
use tunehub_proto::v1::workers_client::WorkersClient;

pub type Authed = InterceptedService<Channel, BearerToken>;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("bad server URL '{0}'")]
    Url(String),
    #[error("{0}")]
    Token(String),
    #[error("cannot read the CA certificate {path}")]
    Ca {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot connect to {url}")]
    Connect {
        url: String,
        #[source]
        source: tonic::transport::Error,
    },
}

#[derive(Clone)]
pub struct Clients {
    pub jobs: JobsClient<Authed>,
    pub query: QueryClient<Authed>,
    pub records: RecordsClient<Authed>,
    pub workers: WorkersClient<Authed>,
    pub channel: Channel,
}

/// Messages up to this size are accepted from the server (exports, kernel sources).
const MAX_MESSAGE: usize = 64 << 20;

pub async fn connect(cfg: &ClientConfig) -> Result<Clients, ClientError> {
    let mut ep = Endpoint::from_shared(cfg.server.clone())
        .map_err(|_| ClientError::Url(cfg.server.clone()))?;
    if cfg.server.starts_with("https://") {
        let mut tls = ClientTlsConfig::new();
        if let Some(ca) = &cfg.ca_cert {
            let pem = std::fs::read(ca).map_err(|source| ClientError::Ca {
                path: ca.display().to_string(),
                source,
            })?;
            tls = tls.ca_certificate(Certificate::from_pem(pem));
        }
        ep = ep.tls_config(tls).map_err(|source| ClientError::Connect {
            url: cfg.server.clone(),
            source,
        })?;
    }
    let channel = ep.connect().await.map_err(|source| ClientError::Connect {
        url: cfg.server.clone(),
        source,
    })?;
    let token = BearerToken::new(cfg.token.as_deref()).map_err(ClientError::Token)?;
    Ok(Clients {
        jobs: JobsClient::with_interceptor(channel.clone(), token.clone())
            .max_decoding_message_size(MAX_MESSAGE),
        query: QueryClient::with_interceptor(channel.clone(), token.clone())
            .max_decoding_message_size(MAX_MESSAGE),
        records: RecordsClient::with_interceptor(channel.clone(), token.clone())
            .max_decoding_message_size(MAX_MESSAGE),
        // A fleet's listing carries every worker's description (~0.7 KB): 10,000 are ~7 MB.
        workers: WorkersClient::with_interceptor(channel.clone(), token)
            .max_decoding_message_size(MAX_MESSAGE),
        channel,
    })
}
