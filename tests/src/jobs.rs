//! Jobs through the gRPC API: requests, and waiting on a job's progress through its Watch
//! stream (the server's own events, not a clock).

use std::time::Duration;
use tokio_stream::StreamExt;
use tonic::Code;
use tunehub::client::Clients;
use tunehub_proto::v1 as pb;

/// Short timing and no noise guard (tests share the machine): they check behaviour, not speed.
pub fn quick() -> pb::MeasureOptions {
    pb::MeasureOptions {
        number: Some(1),
        repeat: Some(1),
        min_repeat_ms: Some(1),
        warmup: Some(0),
        flush_cache: Some(false),
        timeout_s: Some(10.0),
        noise_threshold: Some(0.0),
    }
}

pub fn op(spec: &str) -> pb::Workload {
    pb::Workload {
        kind: Some(pb::workload::Kind::OpSpec(spec.into())),
        options: None,
    }
}

pub fn task(spec: &str, trials: u32) -> pb::TaskSpec {
    pb::TaskSpec {
        workload: Some(op(spec)),
        trials,
        weight: 1.0,
        alternative: false,
    }
}

pub fn submit_req(tasks: Vec<pb::TaskSpec>, batch: u32) -> pb::SubmitRequest {
    pb::SubmitRequest {
        tasks,
        target: "local".into(),
        measure: Some(quick()),
        batch_size: batch,
        seed: 7,
        scheduler: 0,
        name: "test".into(),
        priority: 0,
        targets: vec![],
        range: None,
        cost_model: String::new(),
    }
}

pub async fn submit(c: &mut Clients, req: pb::SubmitRequest) -> pb::Job {
    c.jobs
        .submit(req)
        .await
        .expect("submitted")
        .into_inner()
        .job
        .unwrap()
}

/// Submits one task of `spec` (`trials` candidates, one batch) and waits until its job is done.
pub async fn tune_done(c: &mut Clients, spec: &str, trials: u32) -> pb::Job {
    let job = submit(c, submit_req(vec![task(spec, trials)], trials)).await;
    let done = wait_final(c, &job.id, Duration::from_secs(300)).await;
    assert_eq!(done.state, pb::JobState::Done as i32, "{done:?}");
    done
}

pub async fn get(c: &mut Clients, id: &str) -> pb::Job {
    c.jobs
        .get(pb::GetJobRequest { id: id.into() })
        .await
        .expect("get")
        .into_inner()
}

pub fn is_final(j: &pb::Job) -> bool {
    [
        pb::JobState::Done as i32,
        pb::JobState::Failed as i32,
        pb::JobState::Cancelled as i32,
    ]
    .contains(&j.state)
}

/// Follows the job's Watch stream until `stop` says so of its progress (trials done in all its
/// tasks, and the job once it has ended); fails the test after `limit`.
async fn watch_until(
    c: &mut Clients,
    id: &str,
    limit: Duration,
    what: &str,
    mut stop: impl FnMut(u32, Option<&pb::Job>) -> bool,
) -> (u32, Option<pb::Job>) {
    use pb::job_event::Event;
    let mut events = c
        .jobs
        .watch(pb::WatchRequest { id: id.into() })
        .await
        .expect("watch")
        .into_inner();
    let following = async {
        let mut done: Vec<u32> = vec![];
        while let Some(ev) = events.next().await {
            let ev = ev.unwrap_or_else(|s| panic!("job {id}: the watch stream failed: {s:?}"));
            let ended = match ev.event {
                Some(Event::Snapshot(j)) => {
                    done = j.tasks.iter().map(|t| t.trials_done).collect();
                    None
                }
                Some(Event::Round(t)) => {
                    let i = t.index as usize;
                    if done.len() <= i {
                        done.resize(i + 1, 0);
                    }
                    done[i] = t.trials_done;
                    None
                }
                Some(Event::Done(j)) => {
                    done = j.tasks.iter().map(|t| t.trials_done).collect();
                    Some(j)
                }
                _ => None,
            };
            let n = done.iter().sum();
            if stop(n, ended.as_ref()) || ended.is_some() {
                return (n, ended);
            }
        }
        panic!("job {id}: the watch stream ended before {what}");
    };
    tokio::time::timeout(limit, following)
        .await
        .unwrap_or_else(|_| panic!("job {id}: not within {limit:?}: {what}"))
}

/// The job once it has ended (done, failed or cancelled); fails the test after `limit`.
pub async fn wait_final(c: &mut Clients, id: &str, limit: Duration) -> pb::Job {
    let (_, ended) = watch_until(c, id, limit, "its end", |_, _| false).await;
    ended.expect("the stream's last event is the job's end")
}

/// Waits until at least `trials` trials of the job are stored (over all its tasks); how many
/// are. Fails the test if the job ends before, or after `limit`.
pub async fn wait_trials(c: &mut Clients, id: &str, trials: u32, limit: Duration) -> u32 {
    let what = format!("{trials} trials stored");
    let (n, ended) = watch_until(c, id, limit, &what, |n, _| n >= trials).await;
    assert!(
        n >= trials,
        "job {id} ended with {n} trials, before {trials}: {ended:?}"
    );
    n
}

/// The status code and message of a call that must be refused.
pub fn code_of<T: std::fmt::Debug>(r: Result<T, tonic::Status>) -> (Code, String) {
    let e = r.expect_err("the call should be refused");
    (e.code(), e.message().to_string())
}

/// A job row as the server's store takes it (no API in between): target `t`, one task of
/// workload `w` with one trial.
pub fn store_job() -> tunehub_server::jobs::store::NewJob {
    tunehub_server::jobs::store::NewJob {
        name: String::new(),
        target_key: "t".into(),
        seed: 1,
        batch_size: 1,
        scheduler: "round_robin".into(),
        measure: Default::default(),
        owner: "anonymous".into(),
        tasks: vec![tunehub_server::jobs::store::NewTask::new("w", 1.0, 1)],
        priority: 0,
        group: String::new(),
        cost_model: Default::default(),
        range: None,
    }
}
