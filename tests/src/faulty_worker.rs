//! `FaultyWorker`: fault injection. A fake device that speaks the `Workers` protocol itself
//! (register, heartbeats, pull) and reports whatever a test makes up, as a broken or hostile
//! device could: NaN costs, negative times, wrong counts, unknown error codes. Everything else
//! in these tests is real; this is the one fake, and only for what a real worker never sends.

use crate::binaries;
use crate::server::Server;
use std::process::Command;
use std::time::Duration;
use tunehub::client::Clients;
use tunehub_proto::v1 as pb;

/// A fake worker registered with a server; its heartbeats stop when dropped.
pub struct FaultyWorker {
    c: Clients,
    pub id: String,
    pub target_key: String,
    heartbeat: tokio::task::JoinHandle<()>,
}

/// The device description a real `tunehub-worker` with `flags` registers (its
/// `--print-target`), so that a fake one joins the same pool.
pub fn target_json(flags: &[&str]) -> String {
    let out = Command::new(binaries::tunehub_worker())
        .arg("--print-target")
        .args(flags)
        .env_remove("TUNEHUB_CONFIG")
        .output()
        .expect("tunehub-worker --print-target runs");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    // The description, then a last line "key: ...".
    let (json, _key) = text.trim_end().rsplit_once('\n').expect("two parts");
    json.to_string()
}

impl FaultyWorker {
    /// Registers device `device` with `target_json`, and keeps it online with heartbeats.
    pub async fn register(server: &Server, device: &str, target_json: &str) -> FaultyWorker {
        let mut c = server.client().await;
        let r = c
            .workers
            .register(pb::RegisterWorkerRequest {
                device_id: device.to_string(),
                target_json: target_json.to_string(),
            })
            .await
            .expect("registered")
            .into_inner();
        let heartbeat = {
            let (mut c, id) = (c.clone(), r.worker_id.clone());
            let every = Duration::from_millis(u64::from(r.heartbeat_ms));
            tokio::spawn(async move {
                loop {
                    let _ = c
                        .workers
                        .heartbeat(pb::HeartbeatRequest {
                            worker_id: id.clone(),
                            lease_id: String::new(),
                        })
                        .await;
                    tokio::time::sleep(every).await;
                }
            })
        };
        FaultyWorker {
            c,
            id: r.worker_id,
            target_key: r.target_key,
            heartbeat,
        }
    }

    /// The next piece for it; fails the test after `limit`.
    pub async fn pull(&mut self, limit: Duration) -> pb::WorkPiece {
        let pulling = async {
            loop {
                let r = self
                    .c
                    .workers
                    .pull(pb::PullRequest {
                        worker_id: self.id.clone(),
                        wait_ms: 5000,
                    })
                    .await
                    .expect("pull")
                    .into_inner();
                if let Some(p) = r.piece {
                    return p;
                }
            }
        };
        tokio::time::timeout(limit, pulling)
            .await
            .unwrap_or_else(|_| panic!("worker {}: no piece within {limit:?}", self.id))
    }

    /// One pull, waiting up to `wait` for a piece: a pull-only device calls it again and again
    /// and never reports, each pull dropping the piece it holds.
    pub async fn try_pull(&mut self, wait: Duration) -> Option<pb::WorkPiece> {
        self.c
            .workers
            .pull(pb::PullRequest {
                worker_id: self.id.clone(),
                wait_ms: wait.as_millis() as u32,
            })
            .await
            .expect("pull")
            .into_inner()
            .piece
    }

    /// Registers the same device (same token, same device id) again with `target_json`: its
    /// worker id.
    pub async fn register_again(&mut self, device: &str, target_json: &str) -> String {
        self.c
            .workers
            .register(pb::RegisterWorkerRequest {
                device_id: device.to_string(),
                target_json: target_json.to_string(),
            })
            .await
            .expect("registered")
            .into_inner()
            .worker_id
    }

    /// Reports `results` for the piece under `lease_id`.
    pub async fn report(
        &mut self,
        lease_id: &str,
        results: Vec<pb::MeasuredCandidate>,
    ) -> Result<pb::ReportResponse, tonic::Status> {
        self.c
            .workers
            .report(pb::ReportRequest {
                worker_id: self.id.clone(),
                lease_id: lease_id.to_string(),
                results,
                handed_back: false,
            })
            .await
            .map(tonic::Response::into_inner)
    }
}

impl Drop for FaultyWorker {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

/// A candidate as a healthy device reports a success; tests spoil one field of it.
pub fn measured_ok() -> pb::MeasuredCandidate {
    pb::MeasuredCandidate {
        costs: vec![1e-3],
        error_code: 0,
        error_msg: String::new(),
        build_s: 0.2,
        run_s: 0.01,
        noisy: false,
    }
}
