//! Shared by the service tests: a real `tunehub server` process on loopback, a real client.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tonic::Code;
use tunehub_proto::v1 as pb;
use tunehub_server::client::{self, Clients};
use tunehub_server::config::ClientConfig;

pub const TOKEN: &str = "test-token-1";

/// A `tunehub server` child process; killed when dropped.
pub struct Server {
    pub child: Child,
    pub addr: String,
    pub instance: String,
}

impl Server {
    /// Starts a server on `db` with a free port, the test token, fast polling and a short
    /// lease, plus `extra` flags.
    pub fn start(db: &str, instance: &str, extra: &[&str]) -> Server {
        let mut args = vec![
            "server",
            "--listen",
            "127.0.0.1:0",
            "--db",
            db,
            "--token",
            TOKEN,
            "--poll-ms",
            "100",
            "--lease-s",
            "2",
            "--instance",
            instance,
        ];
        args.extend_from_slice(extra);
        let mut child = Command::new(env!("CARGO_BIN_EXE_tunehub"))
            .args(&args)
            .env_remove("TUNEHUB_TOKENS")
            .env_remove("TUNEHUB_CONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("tunehub server starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_string();
        Server {
            child,
            addr,
            instance: instance.into(),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub async fn client(&self) -> Clients {
        self.client_with(Some(TOKEN)).await
    }

    pub async fn client_with(&self, token: Option<&str>) -> Clients {
        client::connect(&ClientConfig {
            server: self.url(),
            token: token.map(String::from),
            ca_cert: None,
        })
        .await
        .expect("connects")
    }

    /// SIGKILL: a crash, no chance to release anything.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait: a clean shutdown.
    pub fn stop(&mut self) {
        sigterm(self.child.id());
        let _ = self.child.wait();
    }
}

fn sigterm(pid: u32) {
    let _ = Command::new("kill").arg(pid.to_string()).status();
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

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

/// Polls until the job ends or `limit` passes.
pub async fn wait_final(c: &mut Clients, id: &str, limit: Duration) -> pb::Job {
    let start = Instant::now();
    loop {
        let j = get(c, id).await;
        if is_final(&j) {
            return j;
        }
        assert!(
            start.elapsed() < limit,
            "job {id} not finished in {limit:?}: {j:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn code_of<T: std::fmt::Debug>(r: Result<T, tonic::Status>) -> (Code, String) {
    let e = r.expect_err("the call should be refused");
    (e.code(), e.message().to_string())
}

pub fn sqlite_path(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_string()
}
