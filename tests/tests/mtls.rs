//! Mutual TLS for workers (`--tls-worker-ca`): a worker call needs a client certificate that
//! the server's worker CA signed; clients and compilers still connect without one; a
//! certificate of another CA does not get through the handshake.

use std::time::Duration;
use tonic::Code;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
use tunehub::client::BearerToken;
use tunehub_proto::v1 as pb;
use tunehub_proto::v1::workers_client::WorkersClient;
use tunehub_tests::certs::{Ca, Leaf};
use tunehub_tests::{Server, TOKEN, Worker, sqlite_path, wait};

/// A Workers client over TLS trusting `ca`, presenting `identity` when given.
async fn workers_client(
    addr: &str,
    ca: &Ca,
    identity: Option<&Leaf>,
) -> Result<
    WorkersClient<
        tonic::service::interceptor::InterceptedService<tonic::transport::Channel, BearerToken>,
    >,
    tonic::transport::Error,
> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(std::fs::read(&ca.cert).unwrap()));
    if let Some(l) = identity {
        tls = tls.identity(Identity::from_pem(
            std::fs::read(&l.cert).unwrap(),
            std::fs::read(&l.key).unwrap(),
        ));
    }
    let channel = Endpoint::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(tls)?
        .connect()
        .await?;
    Ok(WorkersClient::with_interceptor(
        channel,
        BearerToken::new(Some(TOKEN)).unwrap(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_calls_need_a_certificate_of_the_worker_ca() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let server_leaf = ca.server("server");
    let worker_ca = Ca::new(dir.path(), "workers");
    let device = worker_ca.client("board-1");
    let rogue = Ca::new(dir.path(), "rogue").client("board-2");
    let s = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let server = Server::start(
        &sqlite_path(dir.path(), "mtls.db"),
        "s1",
        &[
            "--tls-cert",
            &s(&server_leaf.cert),
            "--tls-key",
            &s(&server_leaf.key),
            "--tls-worker-ca",
            &s(&worker_ca.cert),
        ],
    );

    // A client without a certificate: its calls are served, a worker call is refused.
    let mut c = tunehub::client::connect(&tunehub::client::ClientConfig {
        server: format!("https://{}", server.addr),
        token: Some(TOKEN.into()),
        ca_cert: Some(ca.cert.clone()),
    })
    .await
    .expect("a TLS connection without a client certificate");
    assert!(c.jobs.list(pb::ListJobsRequest::default()).await.is_ok());
    let e = c
        .workers
        .register(pb::RegisterWorkerRequest::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    assert!(
        e.message().contains("client certificate"),
        "{}",
        e.message()
    );

    // A certificate of another CA: no connection, or no call, gets through.
    let refused = match workers_client(&server.addr, &ca, Some(&rogue)).await {
        Err(_) => true,
        Ok(mut w) => w.list(pb::ListWorkersRequest {}).await.is_err(),
    };
    assert!(refused, "a certificate of an unknown CA was accepted");

    // A real worker with its certificate registers and shows in the list.
    let _w = Worker::start(
        &format!("https://{}", server.addr),
        "board-1",
        &[
            "--ca-cert",
            &s(&ca.cert),
            "--tls-cert",
            &s(&device.cert),
            "--tls-key",
            &s(&device.key),
        ],
    );
    wait::until(
        "the worker registered over mutual TLS",
        Duration::from_secs(60),
        async || {
            let l = c
                .workers
                .list(pb::ListWorkersRequest {})
                .await
                .unwrap()
                .into_inner();
            l.workers
                .iter()
                .any(|w| w.device_id == "board-1")
                .then_some(())
        },
    )
    .await;
    // And through the same identity the worker calls pass the door.
    let mut w = workers_client(&server.addr, &ca, Some(&device))
        .await
        .expect("a connection with the worker's certificate");
    let hb = w
        .heartbeat(pb::HeartbeatRequest::default())
        .await
        .unwrap_err();
    assert_ne!(hb.code(), Code::Unauthenticated, "{hb:?}");
}
