//! PostgreSQL restarted (`pg_ctl stop -m fast`, then `start`) while two jobs run: one on the
//! server's own machine and one on a pool of `tunehub-worker` devices. The database stays down
//! until the server's log shows each job's driver meeting the outage (so both hit it between
//! rounds, not only by luck of timing). Meanwhile the server tells the truth: health
//! NOT_SERVING and a Submit UNAVAILABLE (a client's retry, not INTERNAL), SERVING again once the
//! database is back. Both jobs continue and end done, with every trial's record stored once:
//! records = trials done = `job_records` rows, each row pointing at a record of its job's
//! (workload, target).
//!
//! The test owns its cluster (initdb into a temporary directory, a port of its own, run as user
//! postgres when the test runs as root): restarting the shared cluster of TUNEHUB_TEST_PG_URL
//! would cut the other PostgreSQL tests' connections. Without PostgreSQL's binaries it is
//! skipped, with a note, and fails under CI=true.

use sqlx::{Connection, Row};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tonic_health::pb::health_check_response::ServingStatus;
use tunehub::client::Clients;
use tunehub_proto::v1 as pb;
use tunehub_tests::{Server, Worker, quick, task, tools, wait, wait_trials};

/// Keeps the worker's target apart from the server's own, as in the fleet tests.
const FLEET_CFLAGS: &str = "--cflags=-DTUNEHUB_PG_RESTART_TEST";
const TRIALS: u32 = 12;

/// A throwaway PostgreSQL cluster, stopped on drop.
struct Cluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
}

impl Cluster {
    /// Runs a PostgreSQL tool as user postgres (initdb refuses root).
    fn run(&self, tool: &str, args: &str) -> bool {
        let cmd = format!("{} {args}", self.bin.join(tool).display());
        let mut c = if is_root() {
            let mut c = Command::new("su");
            c.args(["postgres", "-c", &cmd]);
            c
        } else {
            let mut c = Command::new("sh");
            c.args(["-c", &cmd]);
            c
        };
        c.status().is_ok_and(|s| s.success())
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn stop(&self) {
        let ok = self.run(
            "pg_ctl",
            &format!("-D {} -m fast -w -t 60 stop", self.data().display()),
        );
        assert!(ok, "pg_ctl stop failed");
    }

    fn pg_ctl(&self, action: &str) {
        let d = self.dir.path();
        let opts = format!(
            "-o '-p {} -k {} -c listen_addresses=127.0.0.1'",
            self.port,
            d.display()
        );
        let ok = self.run(
            "pg_ctl",
            &format!(
                "-D {} -l {} -w -t 60 -m fast {opts} {action}",
                self.data().display(),
                d.join("log").display()
            ),
        );
        assert!(ok, "pg_ctl {action} failed");
    }

    fn start() -> Option<Cluster> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|b| b.join("initdb").exists())
            .max()?;
        let dir = tempfile::tempdir().unwrap();
        if is_root() {
            let ok = Command::new("chown")
                .args(["postgres:postgres", &dir.path().display().to_string()])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "chown to postgres");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let c = Cluster { bin, dir, port };
        let ok = c.run(
            "initdb",
            &format!(
                "-D {} -U postgres --auth=trust -E UTF8 --no-instructions >/dev/null",
                c.data().display()
            ),
        );
        assert!(ok, "initdb failed");
        c.pg_ctl("start");
        Some(c)
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.run(
            "pg_ctl",
            &format!("-D {} -m immediate -w stop", self.data().display()),
        );
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

fn job(spec: &str, target: &str) -> pb::SubmitRequest {
    pb::SubmitRequest {
        tasks: vec![task(spec, TRIALS)],
        target: target.into(),
        measure: Some(quick()),
        batch_size: 2,
        seed: 11,
        ..Default::default()
    }
}

/// The job once ended, read again and again: calls fail while the database is down.
async fn ended(c: &mut Clients, id: &str) -> pb::Job {
    wait::until("the job ended", Duration::from_secs(400), async || {
        let j = c
            .jobs
            .get(pb::GetJobRequest { id: id.into() })
            .await
            .ok()?
            .into_inner();
        tunehub_tests::is_final(&j).then_some(j)
    })
    .await
}

async fn count(conn: &mut sqlx::PgConnection, sql: &str, bind: &str) -> i64 {
    sqlx::query(sql)
        .bind(bind)
        .fetch_one(conn)
        .await
        .unwrap()
        .get::<i64, _>(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_continue_across_a_postgres_restart_and_store_each_trial_once() {
    if !Path::new("/usr/lib/postgresql").exists() {
        tools::skip_or_fail("the PostgreSQL restart test", "PostgreSQL is not installed");
        return;
    }
    let Some(cluster) = Cluster::start() else {
        tools::skip_or_fail("the PostgreSQL restart test", "no initdb found");
        return;
    };
    let log = cluster.dir.path().join("server.log");
    let server = Server::on(&cluster.url(), "pg-r").log(&log).start();
    let _w = Worker::start(&server.url(), "w1", &[FLEET_CFLAGS]);
    let mut c = server.client().await;
    let pool = wait::until("a worker registered", Duration::from_secs(60), async || {
        c.workers
            .list(pb::ListWorkersRequest {})
            .await
            .unwrap()
            .into_inner()
            .workers
            .into_iter()
            .find(|w| w.status != "offline")
            .map(|w| w.target_key)
    })
    .await;

    let specs = [
        ("matmul(8,16,16)", "local"),
        ("matmul(16,8,16)", pool.as_str()),
    ];
    let mut ids = vec![];
    for (spec, target) in specs {
        let j = c.jobs.submit(job(spec, target)).await.unwrap().into_inner();
        ids.push(j.job.unwrap().id);
    }
    // Both have stored a batch: the restart comes in the middle of both.
    for id in &ids {
        let n = wait_trials(&mut c, id, 2, Duration::from_secs(300)).await;
        assert!(n < TRIALS, "job {id} ended before the restart");
    }
    cluster.stop();
    let mut during = server.client().await;
    let submit =
        tokio::spawn(async move { during.jobs.submit(job("matmul(8,8,8)", "local")).await });
    wait::until("health NOT_SERVING", Duration::from_secs(120), async || {
        (server.health("").await == ServingStatus::NotServing
            && server.health("tunehub.v1.Jobs").await == ServingStatus::NotServing)
            .then_some(())
    })
    .await;
    // Each job's driver met the outage (a store retried), then the database comes back.
    wait::until(
        "both jobs meeting the outage",
        Duration::from_secs(300),
        async || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            ids.iter()
                .all(|id| {
                    text.lines().any(|l| {
                        l.contains(id.as_str()) && l.contains("the database is unavailable")
                    })
                })
                .then_some(())
        },
    )
    .await;
    let refused = submit
        .await
        .unwrap()
        .expect_err("a Submit while the database is down");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    cluster.pg_ctl("start");
    wait::until(
        "health SERVING again",
        Duration::from_secs(120),
        async || (server.health("").await == ServingStatus::Serving).then_some(()),
    )
    .await;

    let mut conn = sqlx::PgConnection::connect(&cluster.url()).await.unwrap();
    for (id, (spec, _)) in ids.iter().zip(specs) {
        let j = ended(&mut c, id).await;
        assert_eq!(j.state, pb::JobState::Done as i32, "{j:?}");
        let t = &j.tasks[0];
        assert_eq!(t.trials_done, TRIALS, "{j:?}");
        // Every trial's record once, and the job's rows point at them.
        let rows = count(
            &mut conn,
            "SELECT COUNT(*) FROM job_records WHERE job_id = $1",
            id,
        )
        .await;
        let distinct = count(
            &mut conn,
            "SELECT COUNT(DISTINCT record_id) FROM job_records WHERE job_id = $1",
            id,
        )
        .await;
        let stored = sqlx::query(
            "SELECT COUNT(*), COUNT(DISTINCT schedule_hash) FROM records \
             WHERE workload_key = $1 AND target_key = $2",
        )
        .bind(&t.workload_key)
        .bind(&j.target_key)
        .fetch_one(&mut conn)
        .await
        .unwrap();
        let (n, hashes): (i64, i64) = (stored.get(0), stored.get(1));
        let matching = sqlx::query(
            "SELECT COUNT(*) FROM job_records jr JOIN records r ON r.id = jr.record_id \
             WHERE jr.job_id = $1 AND r.workload_key = $2 AND r.target_key = $3",
        )
        .bind(id)
        .bind(&t.workload_key)
        .bind(&j.target_key)
        .fetch_one(&mut conn)
        .await
        .unwrap()
        .get::<i64, _>(0);
        let want = i64::from(TRIALS);
        assert_eq!(
            (rows, distinct, n, hashes, matching),
            (want, want, want, want, want),
            "{spec}: job_records rows, distinct records, records, distinct schedules, rows \
             of the job's (workload, target)"
        );
    }
    // The cluster stops on drop: no orderly close needed.
    drop(conn);
}
