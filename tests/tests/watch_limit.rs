//! Watch streams are bounded per token: a client that opens streams and never reads them holds
//! at most the limit; past it a Watch is RESOURCE_EXHAUSTED, and a stream it closes gives its
//! place back. The watchers of one job share one reader of it (`api::job_feed`): they all see
//! the job's end.

use std::time::{Duration, Instant};
use tokio_stream::StreamExt;
use tonic::Code;
use tunehub_proto::v1 as pb;
use tunehub_server::api::watch_slots::MAX_WATCHES_PER_TOKEN;
use tunehub_tests::*;

#[tokio::test]
async fn a_token_holds_a_bounded_number_of_watch_streams() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&sqlite_path(dir.path(), "w.db"), "w", &[]);
    let mut c = server.client().await;
    // Long enough to outlast the test: cancelled at its end.
    let job = submit(&mut c, submit_req(vec![task("matmul(64,64,64)", 5000)], 8)).await;
    let watch = |c: &mut tunehub::client::Clients| {
        let mut c = c.clone();
        let id = job.id.clone();
        async move { c.jobs.watch(pb::WatchRequest { id }).await }
    };

    let mut open = vec![];
    for _ in 0..MAX_WATCHES_PER_TOKEN {
        let mut s = watch(&mut c).await.expect("a stream").into_inner();
        // Established: its snapshot came.
        let first = s.next().await.expect("an event").expect("not an error");
        assert!(matches!(
            first.event,
            Some(pb::job_event::Event::Snapshot(_))
        ));
        open.push(s);
    }
    let e = watch(&mut c).await.expect_err("past the limit");
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("close one"), "{}", e.message());

    // A stream closed by the client frees its place once the server has seen it go.
    drop(open.pop());
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut reopened = loop {
        match watch(&mut c).await {
            Ok(s) => break s.into_inner(),
            Err(e) if e.code() == Code::ResourceExhausted && Instant::now() < deadline => {
                tokio::task::yield_now().await;
            }
            Err(e) => panic!("the freed place was not given back: {e:?}"),
        }
    };
    assert!(reopened.next().await.is_some());
    open.push(reopened);

    // Every watcher, sharing the job's one reader, sees it end.
    c.jobs
        .cancel(pb::CancelJobRequest { id: job.id.clone() })
        .await
        .unwrap();
    for s in &mut open {
        let mut ended = false;
        while let Some(e) = s.next().await {
            if let Some(pb::job_event::Event::Done(j)) = e.unwrap().event {
                assert_eq!(j.state, pb::JobState::Cancelled as i32);
                ended = true;
            }
        }
        assert!(ended, "a watcher did not see the job end");
    }
}
