//! The fleet's state: registered workers per target key, the queue of pieces waiting for a
//! device, and the leases of pieces being measured.
//!
//! Everything is in memory behind one mutex: it is small (workers, a few pieces per batch),
//! and what must survive a server restart already does elsewhere: a job's progress is its
//! rows in the database, and a batch cut short by a restart is proposed again by the resumed
//! job (whose search skips what was stored). Workers re-register after a restart.

use crate::metrics::TargetLabel;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;
// tokio's clock (the std one outside tests): the tests pause and move it to expire leases.
use tokio::time::Instant;
use tunehub_engine::measure::{ErrorCode, MeasureResult};
use tunehub_engine::target::Target;
use tunehub_engine::task::WorkloadOptions;

/// Knobs of the fleet.
#[derive(Debug, Clone, Copy)]
pub struct FleetConfig {
    /// How often workers send heartbeats.
    pub heartbeat: Duration,
    /// A worker silent this long is offline and loses its lease: the piece goes to another.
    pub grace: Duration,
    /// Pieces in a row failing entirely (every candidate a compile/run error) that quarantine
    /// a worker.
    pub quarantine_after: u32,
    /// Workers a piece that failed entirely is tried on before its errors are recorded.
    pub max_attempts: u32,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            heartbeat: Duration::from_millis(1000),
            grace: Duration::from_millis(3500),
            quarantine_after: 2,
            max_attempts: 3,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("unknown worker '{0}': register again")]
    UnknownWorker(String),
    #[error("{0}")]
    Invalid(String),
}

/// What the candidates of one batch need on a device: the same for every piece of it.
#[derive(Debug)]
pub struct Payload {
    /// The job the batch is for: in the workers' logs.
    pub job_id: String,
    pub workload_key: String,
    pub dag_json: String,
    pub description: String,
    /// The workload's options: the device builds the task with them (its key depends on them).
    pub workload_options: WorkloadOptions,
    pub steps_json: Vec<String>,
    /// The engine's measure options (JSON).
    pub options_json: String,
}

/// The results of one batch as they come in from its pieces, each with the worker that
/// measured it. A slot is filled once: a second report of a candidate is ignored.
#[derive(Debug)]
pub struct BatchSlot {
    results: Mutex<Vec<Option<(MeasureResult, String)>>>,
    filled: Condvar,
}

impl BatchSlot {
    pub fn new(n: usize) -> Arc<Self> {
        Arc::new(BatchSlot {
            results: Mutex::new(vec![None; n]),
            filled: Condvar::new(),
        })
    }

    /// Waits up to `timeout` for every result; `Some` when all are in.
    pub fn wait(&self, timeout: Duration) -> Option<Vec<(MeasureResult, String)>> {
        let guard = lock(&self.results);
        let (guard, _) = self
            .filled
            .wait_timeout_while(guard, timeout, |r| r.iter().any(Option::is_none))
            .unwrap_or_else(|p| p.into_inner());
        if guard.iter().all(Option::is_some) {
            Some(guard.iter().map(|r| r.clone().expect("all in")).collect())
        } else {
            None
        }
    }

    fn fill(&self, indices: &[usize], results: Vec<MeasureResult>, worker: &str) {
        let mut r = lock(&self.results);
        for (&i, res) in indices.iter().zip(results) {
            if r[i].is_none() {
                r[i] = Some((res, worker.to_string()));
            }
        }
        self.filled.notify_all();
    }
}

/// Some candidates of a batch (by index), for one worker at a time.
#[derive(Debug, Clone)]
pub struct Piece {
    pub key: String,
    pub payload: Arc<Payload>,
    pub indices: Vec<usize>,
    pub batch: Arc<BatchSlot>,
    /// Workers on which it failed entirely: it goes to another if the pool has one.
    failed_on: Vec<String>,
}

impl Piece {
    pub fn new(
        key: String,
        payload: Arc<Payload>,
        indices: Vec<usize>,
        batch: Arc<BatchSlot>,
    ) -> Self {
        Piece {
            key,
            payload,
            indices,
            batch,
            failed_on: vec![],
        }
    }
}

/// A piece handed to a worker, as the worker sees it.
#[derive(Debug, Clone)]
pub struct Leased {
    pub lease_id: String,
    pub payload: Arc<Payload>,
    pub indices: Vec<usize>,
}

struct Lease {
    piece: Piece,
    worker: String,
    /// Past this even a heartbeating worker loses the piece (a hung build or emulator).
    hard_deadline: Instant,
}

struct Worker {
    device_id: String,
    key: String,
    target_json: String,
    last_seen: Instant,
    last_seen_ms: i64,
    lease: Option<String>,
    measured: u64,
    errors: u64,
    failing_pieces: u32,
    quarantine: Option<String>,
}

#[derive(Default)]
struct State {
    workers: BTreeMap<String, Worker>,
    /// Every target a worker registered with, by key.
    targets: HashMap<String, Target>,
    queue: VecDeque<Piece>,
    leases: HashMap<String, Lease>,
    next_lease: u64,
}

/// A worker as `Workers.List` shows it.
#[derive(Debug, Clone)]
pub struct WorkerView {
    pub id: String,
    pub device_id: String,
    pub target_key: String,
    pub status: &'static str,
    pub last_heartbeat_ms: i64,
    pub measured: u64,
    pub errors: u64,
    pub quarantine_reason: String,
    pub target_json: String,
}

pub struct Fleet {
    pub cfg: FleetConfig,
    state: Mutex<State>,
    shutdown: AtomicBool,
    /// Notified whenever a piece enters the queue: wakes the long-polled pulls waiting for one.
    queued: tokio::sync::Notify,
    /// Leases taken back by the reaper, per target (the server's metrics).
    pub lease_expiries: Family<TargetLabel, Counter>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A device's worker id: a function of its device id, so that a worker that reconnects (or
/// registers with a restarted server) is the same worker.
pub fn worker_id(device_id: &str) -> String {
    let d = Sha256::digest(device_id.as_bytes());
    let hex: String = d[..5].iter().map(|b| format!("{b:02x}")).collect();
    format!("w-{hex}")
}

/// Errors that say more about the device than about the candidate.
fn device_failure(r: &MeasureResult) -> bool {
    matches!(
        r.error,
        ErrorCode::CompileError | ErrorCode::RuntimeError | ErrorCode::UnknownError
    )
}

impl Fleet {
    pub fn new(cfg: FleetConfig) -> Self {
        Fleet {
            cfg,
            state: Mutex::new(State::default()),
            shutdown: AtomicBool::new(false),
            queued: tokio::sync::Notify::new(),
            lease_expiries: Family::default(),
        }
    }

    /// Wakes every waiting batch: the server is stopping.
    pub fn shut_down(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
    }

    /// A future that completes at the next `notify` of the queue; create it before looking at
    /// the queue, so that a piece queued in between is not missed.
    pub fn queued(&self) -> tokio::sync::futures::Notified<'_> {
        self.queued.notified()
    }

    pub fn shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    fn online(&self, w: &Worker, now: Instant) -> bool {
        now.duration_since(w.last_seen) <= self.cfg.grace
    }

    /// Registers (or re-registers) a device; gives its worker id and target key.
    pub fn register(
        &self,
        device_id: &str,
        target: Target,
        target_json: String,
    ) -> (String, String) {
        let id = worker_id(device_id);
        let key = target.key();
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        st.targets.insert(key.clone(), target);
        let now = Instant::now();
        let old_lease = match st.workers.get_mut(&id) {
            Some(w) => {
                if w.key != key {
                    // Another toolchain or description: a fresh start for the device.
                    w.quarantine = None;
                    w.failing_pieces = 0;
                    w.key = key.clone();
                }
                w.device_id = device_id.to_string();
                w.target_json = target_json;
                w.last_seen = now;
                w.last_seen_ms = now_ms();
                w.lease.take()
            }
            None => {
                st.workers.insert(
                    id.clone(),
                    Worker {
                        device_id: device_id.to_string(),
                        key: key.clone(),
                        target_json,
                        last_seen: now,
                        last_seen_ms: now_ms(),
                        lease: None,
                        measured: 0,
                        errors: 0,
                        failing_pieces: 0,
                        quarantine: None,
                    },
                );
                None
            }
        };
        // A worker registering again has lost whatever it was measuring (it restarted).
        if let Some(l) = old_lease {
            requeue(st, &l);
            self.queued.notify_waiters();
        }
        tracing::info!(worker_id = %id, device_id = %device_id, target_key = %key, "worker registered");
        (id, key)
    }

    /// Notes a sign of life; says whether `lease_id` (when given) is still this worker's.
    pub fn heartbeat(&self, id: &str, lease_id: &str) -> Result<bool, FleetError> {
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        let w = st
            .workers
            .get_mut(id)
            .ok_or_else(|| FleetError::UnknownWorker(id.to_string()))?;
        w.last_seen = Instant::now();
        w.last_seen_ms = now_ms();
        Ok(lease_id.is_empty() || w.lease.as_deref() == Some(lease_id))
    }

    /// The next piece for this worker, if any: the first queued piece of its target that did
    /// not fail on it. A quarantined worker gets none.
    pub fn pull(&self, id: &str) -> Result<Option<Leased>, FleetError> {
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        let now = Instant::now();
        let w = st
            .workers
            .get_mut(id)
            .ok_or_else(|| FleetError::UnknownWorker(id.to_string()))?;
        w.last_seen = now;
        w.last_seen_ms = now_ms();
        if w.quarantine.is_some() {
            return Ok(None);
        }
        let key = w.key.clone();
        // Pulling again while holding a lease: the worker dropped that piece (one measurement
        // at a time per device), so it goes back to the queue.
        if let Some(l) = w.lease.take() {
            requeue(st, &l);
            self.queued.notify_waiters();
        }
        let Some(pos) = st
            .queue
            .iter()
            .position(|p| p.key == key && !p.failed_on.iter().any(|f| f == id))
        else {
            return Ok(None);
        };
        let piece = st.queue.remove(pos).expect("position is in range");
        st.next_lease += 1;
        let lease_id = format!("l-{}-{}", st.next_lease, now_ms());
        let per_candidate = Duration::from_secs(120);
        let hard_deadline = now + per_candidate * piece.indices.len() as u32;
        let leased = Leased {
            lease_id: lease_id.clone(),
            payload: Arc::clone(&piece.payload),
            indices: piece.indices.clone(),
        };
        tracing::debug!(worker_id = %id, lease = %lease_id, job_id = %piece.payload.job_id,
            candidates = piece.indices.len(), "piece leased");
        st.workers.get_mut(id).expect("looked up above").lease = Some(lease_id.clone());
        st.leases.insert(
            lease_id,
            Lease {
                piece,
                worker: id.to_string(),
                hard_deadline,
            },
        );
        Ok(Some(leased))
    }

    /// A worker's results for a lease. `Ok(false)`: the lease is gone (expired, the piece went
    /// to another worker) and the results are ignored. Empty results with `handed_back`: the
    /// piece goes back to the queue.
    pub fn report(
        &self,
        id: &str,
        lease_id: &str,
        results: Vec<MeasureResult>,
        handed_back: bool,
    ) -> Result<bool, FleetError> {
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        let now = Instant::now();
        let w = st
            .workers
            .get_mut(id)
            .ok_or_else(|| FleetError::UnknownWorker(id.to_string()))?;
        w.last_seen = now;
        w.last_seen_ms = now_ms();
        if st.leases.get(lease_id).is_none_or(|l| l.worker != id) {
            tracing::info!(worker_id = %id, lease = %lease_id, "late report ignored: the lease is gone");
            return Ok(false);
        }
        let lease = st.leases.remove(lease_id).expect("checked above");
        let w = st.workers.get_mut(id).expect("looked up above");
        if w.lease.as_deref() == Some(lease_id) {
            w.lease = None;
        }
        if handed_back {
            st.queue.push_front(lease.piece);
            self.queued.notify_waiters();
            return Ok(true);
        }
        let n = lease.piece.indices.len();
        if results.len() != n {
            st.queue.push_front(lease.piece);
            self.queued.notify_waiters();
            return Err(FleetError::Invalid(format!(
                "{} results for a piece of {n} candidates",
                results.len()
            )));
        }
        let all_failed = results.iter().all(device_failure);
        if all_failed {
            w.failing_pieces += 1;
            if w.failing_pieces >= self.cfg.quarantine_after {
                let last = &results[results.len() - 1];
                let msg: String = last.error_msg.chars().take(300).collect();
                let reason = format!(
                    "{} pieces in a row failed on every candidate; last: {}: {}",
                    w.failing_pieces,
                    last.error.name(),
                    msg.trim()
                );
                tracing::warn!(worker_id = %id, %reason, "worker quarantined");
                w.quarantine = Some(reason);
            }
        } else {
            w.failing_pieces = 0;
        }
        let key = w.key.clone();
        // A piece that failed entirely on this device is tried on another healthy one of the
        // pool first: a broken device must not brand good candidates as errors.
        if all_failed {
            let mut piece = lease.piece;
            piece.failed_on.push(id.to_string());
            let other = st.workers.iter().any(|(wid, o)| {
                o.key == key
                    && o.quarantine.is_none()
                    && self.online(o, now)
                    && !piece.failed_on.contains(wid)
            });
            if other && (piece.failed_on.len() as u32) < self.cfg.max_attempts {
                st.queue.push_front(piece);
                self.queued.notify_waiters();
                return Ok(true);
            }
            let w = st.workers.get_mut(id).expect("looked up above");
            w.measured += results.len() as u64;
            w.errors += results.len() as u64;
            piece.batch.fill(&piece.indices, results, id);
            return Ok(true);
        }
        let w = st.workers.get_mut(id).expect("looked up above");
        w.measured += results.len() as u64;
        w.errors += results.iter().filter(|r| !r.is_ok()).count() as u64;
        lease.piece.batch.fill(&lease.piece.indices, results, id);
        Ok(true)
    }

    /// Puts the pieces of expired leases back in the queue: their worker went silent (killed,
    /// cut off) or ran past the hard deadline. Returns how many.
    pub fn reap(&self) -> usize {
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        let now = Instant::now();
        let expired: Vec<String> = st
            .leases
            .iter()
            .filter(|(_, l)| {
                now > l.hard_deadline
                    || st
                        .workers
                        .get(&l.worker)
                        .is_none_or(|w| !self.online(w, now))
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired {
            if let Some(l) = st.leases.get(id) {
                tracing::warn!(lease = %id, worker_id = %l.worker, "lease expired: the piece goes back to the queue");
                self.lease_expiries
                    .get_or_create(&TargetLabel {
                        target: l.piece.key.clone(),
                    })
                    .inc();
            }
            requeue(st, id);
        }
        if !expired.is_empty() {
            self.queued.notify_waiters();
        }
        expired.len()
    }

    pub fn enqueue(&self, pieces: Vec<Piece>) {
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        st.queue.extend(pieces);
        self.queued.notify_waiters();
    }

    /// Drops what is left of an abandoned batch (the server is stopping).
    pub fn abandon(&self, batch: &Arc<BatchSlot>) {
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        st.queue.retain(|p| !Arc::ptr_eq(&p.batch, batch));
        st.leases.retain(|_, l| !Arc::ptr_eq(&l.piece.batch, batch));
    }

    /// Online, unquarantined workers of a target.
    pub fn ready_workers(&self, key: &str) -> usize {
        let st = lock(&self.state);
        let now = Instant::now();
        st.workers
            .values()
            .filter(|w| w.key == key && w.quarantine.is_none() && self.online(w, now))
            .count()
    }

    /// Target keys with at least one ready worker: the jobs the server claims.
    pub fn ready_keys(&self) -> Vec<String> {
        let st = lock(&self.state);
        let now = Instant::now();
        let mut keys: Vec<String> = st
            .workers
            .values()
            .filter(|w| w.quarantine.is_none() && self.online(w, now))
            .map(|w| w.key.clone())
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    pub fn target(&self, key: &str) -> Option<Target> {
        lock(&self.state).targets.get(key).cloned()
    }

    pub fn list(&self) -> (Vec<WorkerView>, BTreeMap<String, u32>) {
        let st = lock(&self.state);
        let now = Instant::now();
        let workers = st
            .workers
            .iter()
            .map(|(id, w)| WorkerView {
                id: id.clone(),
                device_id: w.device_id.clone(),
                target_key: w.key.clone(),
                status: if w.quarantine.is_some() {
                    "quarantined"
                } else if !self.online(w, now) {
                    "offline"
                } else if w.lease.is_some() {
                    "busy"
                } else {
                    "idle"
                },
                last_heartbeat_ms: w.last_seen_ms,
                measured: w.measured,
                errors: w.errors,
                quarantine_reason: w.quarantine.clone().unwrap_or_default(),
                target_json: w.target_json.clone(),
            })
            .collect();
        let mut queued = BTreeMap::new();
        for p in &st.queue {
            *queued.entry(p.key.clone()).or_insert(0) += 1;
        }
        (workers, queued)
    }
}

/// Moves a lease's piece back to the front of the queue (it was first in line already).
fn requeue(st: &mut State, lease_id: &str) {
    if let Some(l) = st.leases.remove(lease_id) {
        if let Some(w) = st.workers.get_mut(&l.worker)
            && w.lease.as_deref() == Some(lease_id)
        {
            w.lease = None;
        }
        st.queue.push_front(l.piece);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(ok: bool) -> MeasureResult {
        if ok {
            MeasureResult {
                costs: vec![1e-3],
                ..MeasureResult::error(ErrorCode::NoError, "")
            }
        } else {
            MeasureResult::error(ErrorCode::CompileError, "cc: failed")
        }
    }

    fn fleet() -> (Fleet, String, Target) {
        let f = Fleet::new(FleetConfig {
            grace: Duration::from_millis(200),
            ..FleetConfig::default()
        });
        let t = Target::detect();
        let key = t.key();
        (f, key, t)
    }

    fn piece(key: &str, n: usize, batch: &Arc<BatchSlot>) -> Piece {
        let payload = Arc::new(Payload {
            job_id: "j".into(),
            workload_key: "w".into(),
            dag_json: "{}".into(),
            description: String::new(),
            workload_options: WorkloadOptions::default(),
            steps_json: vec!["[]".into(); n],
            options_json: "{}".into(),
        });
        Piece::new(
            key.to_string(),
            payload,
            (0..n).collect(),
            Arc::clone(batch),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn expired_lease_goes_to_another_worker_and_late_report_is_ignored() {
        let (f, key, t) = fleet();
        let (a, _) = f.register("dev-a", t.clone(), "{}".into());
        let batch = BatchSlot::new(2);
        f.enqueue(vec![piece(&key, 2, &batch)]);
        let la = f.pull(&a).unwrap().expect("a gets the piece");
        assert_eq!(f.reap(), 0, "a is within its grace");
        // a stays silent past its grace (200 ms).
        tokio::time::advance(Duration::from_millis(300)).await;
        let (b, _) = f.register("dev-b", t, "{}".into());
        assert_eq!(f.reap(), 1, "a went silent: its lease expires");
        let expired = f.lease_expiries.get_or_create(&TargetLabel {
            target: key.clone(),
        });
        assert_eq!(expired.get(), 1, "counted for the metrics");
        let lb = f.pull(&b).unwrap().expect("b gets it next");
        assert_ne!(la.lease_id, lb.lease_id);
        assert!(
            f.report(&b, &lb.lease_id, vec![result(true), result(true)], false)
                .unwrap()
        );
        // a comes back late: nothing changes.
        assert!(
            !f.report(&a, &la.lease_id, vec![result(false), result(false)], false)
                .unwrap()
        );
        let got = batch.wait(Duration::from_millis(10)).expect("all in");
        assert!(got.iter().all(|(r, w)| r.is_ok() && *w == b));
    }

    #[tokio::test]
    async fn queueing_a_piece_wakes_a_waiting_pull_at_once() {
        let (f, key, t) = fleet();
        let f = Arc::new(f);
        let (a, _) = f.register("dev-a", t, "{}".into());
        let (ready, waiting) = tokio::sync::oneshot::channel();
        let waiter = {
            let (f, a) = (Arc::clone(&f), a.clone());
            tokio::spawn(async move {
                let queued = f.queued();
                tokio::pin!(queued);
                queued.as_mut().enable();
                assert!(f.pull(&a).unwrap().is_none(), "nothing queued yet");
                ready.send(()).unwrap();
                queued.await;
                f.pull(&a).unwrap()
            })
        };
        // The pull found nothing and waits for the queue.
        waiting.await.unwrap();
        let batch = BatchSlot::new(1);
        f.enqueue(vec![piece(&key, 1, &batch)]);
        let got = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the enqueue wakes the pull")
            .unwrap();
        assert!(got.is_some());
    }

    #[test]
    fn failing_worker_is_quarantined_and_its_pieces_move() {
        let (f, key, t) = fleet();
        let (bad, _) = f.register("bad", t.clone(), "{}".into());
        let (good, _) = f.register("good", t, "{}".into());
        for _ in 0..2 {
            let batch = BatchSlot::new(1);
            f.enqueue(vec![piece(&key, 1, &batch)]);
            let l = f.pull(&bad).unwrap().unwrap();
            assert!(
                f.report(&bad, &l.lease_id, vec![result(false)], false)
                    .unwrap()
            );
            let l = f
                .pull(&good)
                .unwrap()
                .expect("the failed piece moved to good");
            assert!(
                f.report(&good, &l.lease_id, vec![result(true)], false)
                    .unwrap()
            );
            assert!(batch.wait(Duration::ZERO).unwrap()[0].0.is_ok());
        }
        let (workers, _) = f.list();
        let w = workers.iter().find(|w| w.id == bad).unwrap();
        assert_eq!(w.status, "quarantined");
        assert!(
            w.quarantine_reason.contains("compile_error"),
            "{}",
            w.quarantine_reason
        );
        let batch = BatchSlot::new(1);
        f.enqueue(vec![piece(&key, 1, &batch)]);
        assert!(
            f.pull(&bad).unwrap().is_none(),
            "no work for a quarantined worker"
        );
        assert_eq!(f.ready_workers(&key), 1);
        assert_eq!(worker_id("bad"), bad, "the same device, the same id");
    }
}
