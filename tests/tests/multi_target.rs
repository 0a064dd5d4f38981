//! One submission, several targets: `tunehub submit --target local --target POOL` creates one
//! job per target in a group; each target's job runs on its own pool and ends with records
//! under its own target key; `tunehub watch GROUP` follows them (a line per target), `tunehub
//! jobs --group` lists them and `tunehub cancel GROUP` cancels each. Bad target lists (an
//! unknown key among several, a key twice, too many) are refused with nothing stored.

use std::collections::HashSet;
use std::process::{Command, Output};
use std::time::Duration;
use tonic::Code;
use tunehub::client::Clients;
use tunehub_proto::v1 as pb;
use tunehub_tests::{Server, TOKEN, Worker, code_of, quick, task, wait_final};

/// Keeps the worker's target apart from the server's own, as in the fleet tests.
const FLEET_CFLAGS: &str = "--cflags=-DTUNEHUB_MULTI_TARGET_TEST";

fn multi(spec: &str, trials: u32, targets: &[&str]) -> pb::SubmitRequest {
    pb::SubmitRequest {
        tasks: vec![task(spec, trials)],
        measure: Some(quick()),
        batch_size: 2,
        seed: 3,
        targets: targets.iter().map(|t| t.to_string()).collect(),
        ..Default::default()
    }
}

async fn list(c: &mut Clients, group: &str) -> Vec<pb::Job> {
    c.jobs
        .list(pb::ListJobsRequest {
            group: group.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .jobs
}

/// The record lines of `target` that the server exports.
async fn export(c: &mut Clients, target: &str) -> Vec<String> {
    let mut s = c
        .records
        .export(pb::ExportRequest {
            target_key: target.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut lines = vec![];
    while let Some(m) = tokio_stream::StreamExt::next(&mut s).await {
        lines.extend(m.unwrap().lines);
    }
    lines.retain(|l| l.contains("\"v\":\"tunehub-v1\""));
    lines
}

fn cli(server: &Server, args: &[&str]) -> Output {
    Command::new(tunehub_tests::binaries::tunehub())
        .args(args)
        .args(["--server", &server.url(), "--token", TOKEN])
        .env_remove("TUNEHUB_CONFIG")
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_submission_tunes_each_target_in_its_own_job() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&tunehub_tests::sqlite_path(dir.path(), "m.db"), "s1", &[]);
    let _w = Worker::start(&server.url(), "w1", &[FLEET_CFLAGS]);
    let mut c = server.client().await;
    let pool = tunehub_tests::wait_pool(&mut c).await;

    // Bad target lists: refused, nothing stored.
    let (code, msg) = code_of(
        c.jobs
            .submit(multi(
                "matmul(8,8,8)",
                2,
                &["nope-a", "local", &pool, "nope-b"],
            ))
            .await,
    );
    assert_eq!(code, Code::NotFound, "{msg}");
    assert!(
        msg.contains("'nope-a'") && msg.contains("'nope-b'"),
        "{msg}"
    );
    let (code, msg) = code_of(
        c.jobs
            .submit(multi("matmul(8,8,8)", 2, &[&pool, "local", &pool]))
            .await,
    );
    assert_eq!(code, Code::InvalidArgument, "{msg}");
    assert!(msg.contains("twice"), "{msg}");
    let many: Vec<&str> = std::iter::repeat_n("local", 17).collect();
    let (code, msg) = code_of(c.jobs.submit(multi("matmul(8,8,8)", 2, &many)).await);
    assert_eq!(code, Code::InvalidArgument, "{msg}");
    assert!(msg.contains("17 targets"), "{msg}");
    let mut both = multi("matmul(8,8,8)", 2, &["local", &pool]);
    both.target = "local".into();
    let (code, msg) = code_of(c.jobs.submit(both).await);
    assert_eq!(code, Code::InvalidArgument, "{msg}");
    assert!(
        list(&mut c, "").await.is_empty(),
        "a refused submission stored a job"
    );

    // The command line: a group of two jobs, one per target.
    let spec = "matmul(8,16,8)";
    let out = cli(
        &server,
        &[
            "submit",
            spec,
            "--trials",
            "3",
            "--batch",
            "2",
            "--target",
            "local",
            "--target",
            &pool,
            "--number",
            "1",
            "--repeat",
            "1",
            "--min-repeat-ms",
            "1",
            "--warmup",
            "0",
            "--noise-threshold",
            "0",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = text.lines();
    let group = lines.next().unwrap().to_string();
    assert!(group.starts_with("g-"), "{text}");
    let submitted: Vec<(String, String)> = lines
        .map(|l| {
            let (id, target) = l.split_once(' ').unwrap();
            (id.to_string(), target.to_string())
        })
        .collect();
    assert_eq!(submitted.len(), 2, "{text}");
    assert_eq!(submitted[1].1, pool, "{text}");

    // `tunehub watch GROUP` follows both to the end, a line per target.
    let out = cli(&server, &["watch", &group]);
    let watched = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{watched}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (id, target) in &submitted {
        assert!(
            watched
                .lines()
                .any(|l| l.starts_with(target.as_str()) && l.contains(id) && l.contains("done")),
            "{watched}"
        );
    }

    // Each job ended done, with its records under its own target key, none twice.
    let jobs = list(&mut c, &group).await;
    assert_eq!(jobs.len(), 2);
    for (id, target) in &submitted {
        let j = wait_final(&mut c, id, Duration::from_secs(300)).await;
        assert_eq!(j.state, pb::JobState::Done as i32, "{j:?}");
        assert_eq!(&j.target_key, target);
        assert_eq!(j.group, group);
        assert_eq!(j.tasks[0].trials_done, 3, "{j:?}");
        let records = export(&mut c, target).await;
        let distinct: HashSet<&String> = records.iter().collect();
        assert_eq!(distinct.len(), records.len(), "a record twice: {records:?}");
        assert!(records.iter().all(|r| r.contains(target.as_str())));
        assert_eq!(records.len(), 3, "{target}: {records:?}");
    }

    // `tunehub jobs --group` lists the group, a line per target.
    let out = cli(&server, &["jobs", "--group", &group]);
    let listed = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{listed}");
    for (id, _) in &submitted {
        assert!(listed.contains(id.as_str()), "{listed}");
    }

    // Cancelling a group cancels each of its jobs.
    let long = c
        .jobs
        .submit(multi("matmul(16,16,8)", 200, &["local", &pool]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(long.jobs.len(), 2);
    let g = &long.jobs[0].group;
    let out = cli(&server, &["cancel", g]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for j in &long.jobs {
        let j = wait_final(&mut c, &j.id, Duration::from_secs(300)).await;
        assert_eq!(j.state, pb::JobState::Cancelled as i32, "{j:?}");
    }
}
