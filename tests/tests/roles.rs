//! Tokens with roles, through a real `tunehub server`: each role reaches its methods and no
//! other (PERMISSION_DENIED, nothing stored), a client cancels only its own jobs, and the
//! token's name (never its secret) is what metrics and job listings show.

use tonic::Code;
use tunehub_proto::v1 as pb;
use tunehub_tests::{Server, scrape_raw, sqlite_path, submit, submit_req, task};

const CLIENT_A: &str = "secret-client-a";
const CLIENT_B: &str = "secret-client-b";
const WORKER: &str = "secret-worker";
const QUERY: &str = "secret-query";

fn config() -> String {
    let entry = |name: &str, role: &str, token: &str| {
        format!(
            "[[server.api_tokens]]\nname = \"{name}\"\nrole = \"{role}\"\ntoken = \"{token}\"\n"
        )
    };
    [
        entry("ci-a", "client", CLIENT_A),
        entry("ci-b", "client", CLIENT_B),
        entry("board-1", "worker", WORKER),
        entry("dashboard", "query", QUERY),
    ]
    .concat()
}

fn code<T>(r: Result<T, tonic::Status>) -> Code {
    match r {
        Ok(_) => Code::Ok,
        Err(s) => s.code(),
    }
}

#[tokio::test]
async fn each_role_reaches_its_methods_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("roles.toml");
    std::fs::write(&cfg, config()).unwrap();
    let server = Server::on(&sqlite_path(dir.path(), "roles.db"), "s1")
        .args(&["--config", cfg.to_str().unwrap()])
        .args(&["--metrics-addr", "127.0.0.1:0"])
        .start();
    let mut admin = server.client().await;
    let mut a = server.client_with(Some(CLIENT_A)).await;
    let mut b = server.client_with(Some(CLIENT_B)).await;
    let mut w = server.client_with(Some(WORKER)).await;
    let mut q = server.client_with(Some(QUERY)).await;
    let req = || submit_req(vec![task("matmul(8,8,8)", 1)], 1);

    // A worker's token neither submits nor imports; a query token does not submit.
    let denied = w.jobs.submit(req()).await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    assert!(
        denied.message().contains("board-1") && !denied.message().contains(WORKER),
        "{}",
        denied.message()
    );
    let lines = pb::RecordLines {
        lines: vec!["{}".into()],
    };
    let import = w.records.import(tokio_stream::iter(vec![lines])).await;
    assert_eq!(code(import), Code::PermissionDenied);
    assert_eq!(code(q.jobs.submit(req()).await), Code::PermissionDenied);
    assert_eq!(
        code(q.jobs.list(pb::ListJobsRequest::default()).await),
        Code::PermissionDenied
    );
    // A query token is admitted to queries (nothing tuned yet: NOT_FOUND, not a refusal).
    let best = pb::BestRequest {
        workload: Some(tunehub_tests::op("matmul(8,8,8)")),
        target: String::new(),
        with_source: false,
        allow_transfer: false,
        ..Default::default()
    };
    assert_eq!(code(q.query.best(best.clone()).await), Code::NotFound);
    assert_eq!(code(w.query.best(best).await), Code::PermissionDenied);
    // Building a model runs the C compiler: a client's call (here refused for its empty model,
    // so past the role check), not a read-only token's.
    let build = pb::BuildModelRequest::default;
    assert_eq!(
        code(q.query.build_model(build()).await),
        Code::PermissionDenied
    );
    assert_eq!(
        code(a.query.build_model(build()).await),
        Code::InvalidArgument
    );
    // A client's token does not pull work.
    let pull = pb::PullRequest {
        worker_id: "w-1".into(),
        wait_ms: 0,
    };
    assert_eq!(code(a.workers.pull(pull).await), Code::PermissionDenied);

    // A client submits; another client may not cancel its job; the owner and an admin may.
    let job = submit(&mut a, req()).await;
    assert_eq!(job.owner, "ci-a");
    let cancel = || pb::CancelJobRequest { id: job.id.clone() };
    let e = b.jobs.cancel(cancel()).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("ci-a"), "{}", e.message());
    assert_eq!(code(a.jobs.cancel(cancel()).await), Code::Ok);
    assert_eq!(code(admin.jobs.cancel(cancel()).await), Code::Ok);
    let admin_job = submit(&mut admin, req()).await;
    assert_eq!(admin_job.owner, "token-1");
    assert_eq!(
        code(
            a.jobs
                .cancel(pb::CancelJobRequest {
                    id: admin_job.id.clone()
                })
                .await
        ),
        Code::PermissionDenied
    );

    // The refused submissions stored nothing: the two jobs above are all there is.
    let all = admin
        .jobs
        .list(pb::ListJobsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .jobs;
    let mut owners: Vec<_> = all.iter().map(|j| j.owner.as_str()).collect();
    owners.sort();
    assert_eq!(owners, ["ci-a", "token-1"]);

    // Metrics count calls by the token's name and role; no secret appears.
    let (_, _, body) = scrape_raw(server.metrics_addr.as_deref().unwrap(), "/metrics");
    let sample = |labels: &str| {
        body.lines()
            .find_map(|l| {
                l.strip_prefix(&format!("tunehub_grpc_calls_by_token_total{{{labels}}} "))
                    .map(|v| v.parse::<f64>().unwrap())
            })
            .unwrap_or_else(|| panic!("no sample {labels} in\n{body}"))
    };
    assert_eq!(
        sample(r#"token="board-1",role="worker",outcome="denied""#),
        3.0
    );
    // A client's cancel of another's job passes the role (Jobs) and is refused by the handler.
    assert_eq!(
        sample(r#"token="ci-b",role="client",outcome="allowed""#),
        1.0
    );
    assert_eq!(
        sample(r#"token="ci-a",role="client",outcome="denied""#),
        1.0
    );
    assert_eq!(
        sample(r#"token="ci-a",role="client",outcome="allowed""#),
        4.0
    );
    for secret in [CLIENT_A, CLIENT_B, WORKER, QUERY, tunehub_tests::TOKEN] {
        assert!(!body.contains(secret), "a secret in the metrics");
    }
}
