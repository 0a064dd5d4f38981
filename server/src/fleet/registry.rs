//! The fleet's state: registered workers per target key, the queue of pieces waiting for a
//! device, and the leases of pieces being measured. When several jobs share a pool, a pulling
//! worker gets the piece of the job whose turn it is by priority (`fair`).
//!
//! Everything is in memory behind one mutex: it is small (workers, a few pieces per batch),
//! and what must survive a server restart already does elsewhere: a job's progress is its
//! rows in the database, and a batch cut short by a restart is proposed again by the resumed
//! job (whose search skips what was stored). Workers re-register after a restart.
//!
//! Server replicas sharing a database share the fleet by pools (`owners`): a pool's workers and
//! pieces are in the memory of the one replica that owns the pool, which alone claims its jobs.
//! Once `share_pools` is called, this fleet serves a pool only while it holds it (`hold_pool`);
//! a pool another replica took (`drop_pool`) is forgotten here and its workers are sent on.

use super::fair::{FairShare, Waiting};
use super::lapses::{Lapse, Lapses};
use crate::jobs::result_check::check_speed;
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
    /// Pieces in a row failing entirely (every candidate a compile/run error, or a report
    /// refused) that quarantine a worker. The first one does when no worker of its target has
    /// measured successfully, itself included: nothing vouches for its toolchain.
    pub quarantine_after: u32,
    /// Workers a piece that failed entirely is tried on before its errors are recorded.
    pub max_attempts: u32,
    /// How long a quarantined worker waits for a probation piece; doubled after each failed
    /// probation, up to 16 times this.
    pub probation: Duration,
}

impl FleetConfig {
    /// The defaults with another heartbeat period; the grace before a silent worker is
    /// offline stays 3.5 periods (three heartbeats may be late or lost).
    pub fn with_heartbeat(heartbeat: Duration) -> Self {
        FleetConfig {
            heartbeat,
            grace: heartbeat.mul_f64(3.5),
            ..Self::default()
        }
    }
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            heartbeat: Duration::from_millis(1000),
            grace: Duration::from_millis(3500),
            quarantine_after: 2,
            max_attempts: 3,
            probation: Duration::from_secs(60),
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
    /// The job the batch is for: in the workers' logs, and its share of the pool (`fair`).
    pub job_id: String,
    /// The job's priority (-10..10): its weight among the jobs sharing the pool.
    pub priority: i32,
    pub workload_key: String,
    pub dag_json: String,
    pub description: String,
    /// The workload's options: the device builds the task with them (its key depends on them).
    pub workload_options: WorkloadOptions,
    pub steps_json: Vec<String>,
    /// The workload's FLOPs: a reported time below what the target's peak allows is refused.
    pub flops: u64,
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

    /// The results in that `told` has not marked yet (marked now): a piece's results told as
    /// it reports, not when the whole batch is in.
    pub fn newly_filled(&self, told: &mut [bool]) -> Vec<(usize, MeasureResult)> {
        let r = lock(&self.results);
        let mut out = vec![];
        for (i, (res, t)) in r.iter().zip(told.iter_mut()).enumerate() {
            if let (Some((res, _)), false) = (res, *t) {
                *t = true;
                out.push((i, res.clone()));
            }
        }
        out
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
    /// Workers whose lease of it lapsed (or that handed it back): it goes to another first,
    /// else a worker that pulls again would be handed the same piece at once, for ever.
    lapsed_on: Vec<String>,
    /// The worker to take it only when no other of the pool is there: a new best's second run
    /// checks the first device's word, and a dispute's tie-break the faster device's.
    last_on: Option<String>,
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
            lapsed_on: vec![],
            last_on: None,
        }
    }

    /// The piece for other workers than `avoid`'s: the first of them takes it only when no
    /// other worker of the pool is there, the rest (as if it had lapsed there) when every
    /// other one is among them.
    pub fn avoiding(mut self, avoid: &[&str]) -> Self {
        if let Some((first, rest)) = avoid.split_first() {
            self.last_on = Some(first.to_string());
            self.lapsed_on.extend(rest.iter().map(|w| w.to_string()));
        }
        self
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

/// Quarantine: no work for a worker whose device seems broken, but for one probation piece
/// now and then.
///
/// Why probation by time: a device is usually mended (a compiler installed, a disk freed)
/// without a change the server can see, and a pool left with only quarantined workers would
/// wait forever; one piece after a while costs little (a failed piece goes to another worker,
/// or back to the queue, and is never recorded against its candidates), and the wait doubles
/// after each failed probation so that a device that stays broken is asked ever less often.
/// Not "at once when nothing else serves the target": a broken compiler fails in
/// milliseconds, and that would be a busy loop.
///
/// It follows the device (its token's subject and device id, `worker_id`): registering again,
/// with any description, does not lift it; only a probation piece that succeeds does. A device
/// that registers with a changed description (another compiler, other flags) gets its
/// probation piece at once, but once per quarantine: flipping descriptions buys nothing more.
struct Quarantine {
    reason: String,
    /// When it may take a probation piece.
    probation_at: Instant,
    /// The wait after the next failed probation.
    next_wait: Duration,
    /// A changed description brought the probation forward already.
    early_probation: bool,
    /// Its times disagreed with its pool's: no probation piece lifts it (a piece that succeeds
    /// proves a toolchain, not an honest clock), nor does a changed description. It lasts
    /// while this server runs (the fleet is in memory), and is the operator's to look into.
    distrusted: bool,
}

impl Quarantine {
    fn new(reason: String, now: Instant, cfg: &FleetConfig) -> Self {
        Quarantine {
            reason,
            probation_at: now + cfg.probation,
            next_wait: cfg.probation * 2,
            early_probation: false,
            distrusted: false,
        }
    }

    /// Whether it may take a probation piece at `now`.
    fn probation_due(&self, now: Instant) -> bool {
        !self.distrusted && now >= self.probation_at
    }

    /// A probation piece failed or lapsed: the next one after a longer wait.
    fn failed_probation(&mut self, reason: String, now: Instant, cfg: &FleetConfig) {
        self.reason = reason;
        self.probation_at = now + self.next_wait;
        self.next_wait = (self.next_wait * 2).min(cfg.probation * 16);
    }
}

struct Worker {
    /// The name of the token it registered with: with the device id, who it is.
    subject: String,
    device_id: String,
    key: String,
    target_json: String,
    /// Its description as registered (`target_json` parsed).
    target: Target,
    last_seen: Instant,
    last_seen_ms: i64,
    lease: Option<String>,
    /// Candidates it reported, and of them failures (refused reports count in full).
    measured: u64,
    errors: u64,
    /// Successful candidates since it registered with this description: its toolchain works.
    ok: u64,
    failing_pieces: u32,
    /// Its times disagreed with another worker's, beyond the noise bound and faster, this many
    /// times since they last agreed (`disagreed`).
    disagreements: u32,
    /// Leases it let lapse since its last report.
    lapses: Lapses,
    /// A device of its token was quarantined when this one first registered (its id): until
    /// this one measures successfully, its first failed piece or lapsed lease quarantines it.
    /// A token whose device is quarantined gains nothing by calling it by another device id.
    on_notice: Option<String>,
    quarantine: Option<Quarantine>,
}

#[derive(Default)]
struct State {
    workers: BTreeMap<String, Worker>,
    /// Every target a worker registered with, by key.
    targets: HashMap<String, Target>,
    /// Pieces of every pool in the order queued; a pool's workers take them by job share.
    queue: VecDeque<Piece>,
    /// Which job's piece a pool hands out next.
    fair: FairShare,
    leases: HashMap<String, Lease>,
    next_lease: u64,
    /// Pools this replica owns, with when its hold surely ends (`owners`).
    held: HashMap<String, Instant>,
    /// Pools another replica took, with the address their workers are sent to.
    moved: HashMap<String, String>,
}

/// What a heartbeat learns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat {
    /// The lease named (if any) is still the worker's.
    pub lease_held: bool,
    /// The worker's pool is owned by the replica at this address now: register there.
    pub moved_to: Option<String>,
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
    /// Pools are owned under database leases (several replicas): serve only those held.
    shared: AtomicBool,
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

/// A device's worker id: a function of the token's subject it registers with and its device
/// id, so that a worker that reconnects (or registers with a restarted server) is the same
/// worker, with its quarantine; and a token cannot take over another token's device.
pub fn worker_id(subject: &str, device_id: &str) -> String {
    let mut h = Sha256::new();
    // Length-prefixed: ("ab", "c") and ("a", "bc") are different devices.
    h.update((subject.len() as u64).to_le_bytes());
    h.update(subject.as_bytes());
    h.update(device_id.as_bytes());
    let d = h.finalize();
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
            shared: AtomicBool::new(false),
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

    /// From now on a pool is served only while held (`hold_pool`): pools are owned by server
    /// replicas under database leases (`owners`). Without it every pool is this server's.
    pub fn share_pools(&self) {
        self.shared.store(true, Ordering::SeqCst);
    }

    fn owns_in(&self, st: &State, key: &str, now: Instant) -> bool {
        !self.shared.load(Ordering::SeqCst) || st.held.get(key).is_some_and(|&until| now < until)
    }

    /// Whether this server serves pool `key` now: it runs the pool's jobs only while it does.
    pub fn owns(&self, key: &str) -> bool {
        self.owns_in(&lock(&self.state), key, Instant::now())
    }

    /// Pool `key` is this replica's until `until` (taken or renewed).
    pub fn hold_pool(&self, key: &str, until: Instant) {
        let mut st = lock(&self.state);
        st.held.insert(key.to_string(), until);
        st.moved.remove(key);
    }

    /// Another replica owns pool `key` (at `address`): its queued pieces and leases are
    /// forgotten here (the jobs waiting on them stop at their batch boundary, and the owner
    /// claims them), and its workers are sent there at their next heartbeat or pull. Says
    /// whether this replica served the pool until now.
    pub fn drop_pool(&self, key: &str, address: &str) -> bool {
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        let was = st.held.remove(key).is_some() || st.workers.values().any(|w| w.key == key);
        st.moved.insert(key.to_string(), address.to_string());
        st.queue.retain(|p| p.key != key);
        st.leases.retain(|_, l| l.piece.key != key);
        for w in st.workers.values_mut().filter(|w| w.key == key) {
            w.lease = None;
        }
        // Waiting pulls look again, and learn that their pool moved.
        self.queued.notify_waiters();
        was
    }

    /// Pools with a worker online here: those whose ownership is renewed.
    pub fn active_pools(&self) -> Vec<String> {
        let st = lock(&self.state);
        let now = Instant::now();
        let mut keys: Vec<String> = st
            .workers
            .values()
            .filter(|w| self.online(w, now))
            .map(|w| w.key.clone())
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// The owner's address when worker `id`'s pool moved to another replica; the worker is
    /// forgotten here then.
    fn moved(st: &mut State, id: &str) -> Option<String> {
        let to = st.moved.get(&st.workers.get(id)?.key)?.clone();
        st.workers.remove(id);
        Some(to)
    }

    /// Registers (or re-registers) a device under token `subject`; gives its worker id and
    /// target key. A quarantine stays (`Quarantine`).
    pub fn register(
        &self,
        subject: &str,
        device_id: &str,
        target: Target,
        target_json: String,
    ) -> (String, String) {
        let id = worker_id(subject, device_id);
        let key = target.key();
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        st.targets.insert(key.clone(), target.clone());
        let now = Instant::now();
        // A worker registering again has lost whatever it was measuring (it restarted). Lapsed
        // first: a lapsed probation piece must not undo the probation a new description earns.
        if let Some(l) = st.workers.get(&id).and_then(|w| w.lease.clone()) {
            self.lapse(st, &l, Lapse::Reregistered);
        }
        let mut changed = false;
        match st.workers.get_mut(&id) {
            Some(w) => {
                if w.key != key || w.target_json != target_json {
                    // Another toolchain or description: what failed may work now (a restart
                    // alone, with the same description, mends nothing). A quarantine is not
                    // lifted (else changing the description and back would clear it), but its
                    // probation piece comes at once, once.
                    if let Some(q) = &mut w.quarantine
                        && !q.early_probation
                        && !q.distrusted
                    {
                        q.early_probation = true;
                        q.probation_at = now;
                        tracing::info!(worker_id = %id, reason = %q.reason,
                            "quarantined worker registered with a changed description: a probation piece now");
                    }
                    w.failing_pieces = 0;
                    w.ok = 0;
                    w.key = key.clone();
                    changed = true;
                }
                w.device_id = device_id.to_string();
                w.target_json = target_json;
                w.target = target;
                w.last_seen = now;
                w.last_seen_ms = now_ms();
            }
            None => {
                let on_notice = st
                    .workers
                    .iter()
                    .find(|(_, o)| o.subject == subject && o.quarantine.is_some())
                    .map(|(wid, _)| wid.clone());
                if let Some(other) = &on_notice {
                    tracing::info!(worker_id = %id, token = %subject, quarantined = %other,
                        "a new device of a token whose device is quarantined: on notice");
                }
                st.workers.insert(
                    id.clone(),
                    Worker {
                        subject: subject.to_string(),
                        device_id: device_id.to_string(),
                        key: key.clone(),
                        target_json,
                        target,
                        last_seen: now,
                        last_seen_ms: now_ms(),
                        lease: None,
                        measured: 0,
                        errors: 0,
                        ok: 0,
                        failing_pieces: 0,
                        disagreements: 0,
                        lapses: Lapses::default(),
                        on_notice,
                        quarantine: None,
                    },
                );
            }
        }
        if changed {
            // What failed on the old description may work on the new one.
            forget_failures(st, &id);
            self.queued.notify_waiters();
        }
        tracing::info!(worker_id = %id, token = %subject, device_id = %device_id, target_key = %key, "worker registered");
        (id, key)
    }

    /// Whether worker `id` is one the token `subject` registered: a token calls only for its
    /// own devices. An unknown worker passes here (the call itself says it is unknown).
    pub fn check_subject(&self, id: &str, subject: &str) -> Result<(), FleetError> {
        match lock(&self.state).workers.get(id) {
            Some(w) if w.subject != subject => {
                tracing::warn!(worker_id = %id, token = %subject, registered_by = %w.subject,
                    "call for a worker another token registered: refused");
                Err(FleetError::UnknownWorker(id.to_string()))
            }
            _ => Ok(()),
        }
    }

    /// The lease `lease_id` lapsed without a report (`how`): its piece goes back to the front
    /// of the queue, for another worker first, and the lapse counts against its worker, which
    /// it may quarantine (`lapses`). A quarantined worker's lapsed lease is a failed probation.
    fn lapse(&self, st: &mut State, lease_id: &str, how: Lapse) {
        let Some(mut l) = st.leases.remove(lease_id) else {
            return;
        };
        let now = Instant::now();
        if let Some(w) = st.workers.get_mut(&l.worker) {
            if w.lease.as_deref() == Some(lease_id) {
                w.lease = None;
            }
            if let Some(q) = &mut w.quarantine {
                q.failed_probation(format!("probation piece lapsed ({how})"), now, &self.cfg);
                tracing::warn!(worker_id = %l.worker, lease = %lease_id, reason = %q.reason,
                    "worker stays quarantined");
            } else if let Some(reason) = w.lapses.lapsed(how).or_else(|| {
                noticed(w).map(|other| {
                    format!(
                        "a lease lapsed without a report ({how}) before it measured anything, \
                         and device {other} of its token is quarantined"
                    )
                })
            }) {
                tracing::warn!(worker_id = %l.worker, lease = %lease_id, %reason, "worker quarantined");
                w.quarantine = Some(Quarantine::new(reason, now, &self.cfg));
            } else {
                tracing::info!(worker_id = %l.worker, lease = %lease_id, lapse = %how,
                    "lease lapsed without a report: the piece goes to another worker first");
            }
        }
        if !l.piece.lapsed_on.contains(&l.worker) {
            l.piece.lapsed_on.push(l.worker.clone());
        }
        st.queue.push_front(l.piece);
        self.queued.notify_waiters();
    }

    /// Notes a sign of life; says whether `lease_id` (when given) is still this worker's, and
    /// where to go when its pool moved to another replica.
    pub fn heartbeat(&self, id: &str, lease_id: &str) -> Result<Beat, FleetError> {
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        if let Some(to) = Self::moved(st, id) {
            return Ok(Beat {
                lease_held: false,
                moved_to: Some(to),
            });
        }
        let w = st
            .workers
            .get_mut(id)
            .ok_or_else(|| FleetError::UnknownWorker(id.to_string()))?;
        w.last_seen = Instant::now();
        w.last_seen_ms = now_ms();
        Ok(Beat {
            lease_held: lease_id.is_empty() || w.lease.as_deref() == Some(lease_id),
            moved_to: None,
        })
    }

    /// The next piece for this worker, if any: of the jobs with a queued piece of its target
    /// that did not fail on it (nor lapse on it, while another worker could take it), the one
    /// whose turn it is by the pool's fair share (`fair`), its first such piece. A quarantined
    /// worker gets none but its probation pieces. A lease it still holds lapses (`lapse`).
    pub fn pull(&self, id: &str) -> Result<Option<Leased>, FleetError> {
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        let now = Instant::now();
        // A worker of a pool that moved registers again, and is sent to the pool's owner.
        if Self::moved(st, id).is_some() {
            return Err(FleetError::UnknownWorker(id.to_string()));
        }
        let w = st
            .workers
            .get_mut(id)
            .ok_or_else(|| FleetError::UnknownWorker(id.to_string()))?;
        w.last_seen = now;
        w.last_seen_ms = now_ms();
        // Pulling again while holding a lease: the worker dropped that piece (one measurement
        // at a time per device). It lapsed: back to the queue, for another worker first.
        if let Some(l) = w.lease.clone() {
            self.lapse(st, &l, Lapse::RePulled);
        }
        let w = &st.workers[id];
        let probation = match &w.quarantine {
            Some(q) if !q.probation_due(now) => return Ok(None),
            Some(_) => true,
            None => false,
        };
        let key = w.key.clone();
        // The pool's other workers that could take a piece this one let lapse.
        let others: Vec<&String> = st
            .workers
            .iter()
            .filter(|(wid, o)| {
                *wid != id && o.key == key && o.quarantine.is_none() && self.online(o, now)
            })
            .map(|(wid, _)| wid)
            .collect();
        let mine = |p: &Piece| {
            let last = |w: &str| p.last_on.as_deref() == Some(w);
            // A probation piece may be one that failed on this device before: it may be mended.
            (probation || !p.failed_on.iter().any(|f| f == id))
                && (!last(id) || others.is_empty())
                && (!p.lapsed_on.iter().any(|f| f == id)
                    || others.iter().all(|o| p.lapsed_on.contains(o) || last(o)))
        };
        // Per job, the first such piece in the queue; the pool's fair share picks the job.
        let mut firsts: Vec<usize> = vec![];
        for (pos, p) in st.queue.iter().enumerate() {
            if p.key == key
                && mine(p)
                && !firsts
                    .iter()
                    .any(|&f| st.queue[f].payload.job_id == p.payload.job_id)
            {
                firsts.push(pos);
            }
        }
        let waiting: Vec<Waiting> = firsts
            .iter()
            .map(|&pos| {
                let p = &st.queue[pos];
                Waiting {
                    job: &p.payload.job_id,
                    priority: p.payload.priority,
                    candidates: p.indices.len(),
                }
            })
            .collect();
        let Some(chosen) = st.fair.choose(&key, &waiting) else {
            return Ok(None);
        };
        let piece = st
            .queue
            .remove(firsts[chosen])
            .expect("position is in range");
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
            candidates = piece.indices.len(), probation, "piece leased");
        let w = st.workers.get_mut(id).expect("looked up above");
        w.lease = Some(lease_id.clone());
        if let Some(q) = &mut w.quarantine {
            // One probation piece at a time: the next not before another wait.
            q.probation_at = now + q.next_wait;
            tracing::info!(worker_id = %id, lease = %lease_id, "probation piece leased to a quarantined worker");
        }
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

    /// A worker's results for a lease, checked already (`report::check_report`). `Ok(false)`:
    /// the lease is gone (expired, the piece went to another worker) and the results are
    /// ignored. Empty results with `handed_back`: the piece goes back to the queue. A count
    /// other than the piece's is refused like `refuse`.
    pub fn report(
        &self,
        id: &str,
        lease_id: &str,
        results: Vec<MeasureResult>,
        handed_back: bool,
    ) -> Result<bool, FleetError> {
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        let Some(mut lease) = self.take_lease(st, id, lease_id)? else {
            return Ok(false);
        };
        let distrusted = st.workers[id]
            .quarantine
            .as_ref()
            .is_some_and(|q| q.distrusted);
        if handed_back || distrusted {
            // Another worker first: handing back and pulling again must not loop on one piece.
            // A worker distrusted while it held the piece: its times are not taken any more.
            lease.piece.lapsed_on.push(id.to_string());
            st.queue.push_front(lease.piece);
            self.queued.notify_waiters();
            return Ok(!distrusted);
        }
        // It reports: the leases it let lapse before were not a habit.
        st.workers
            .get_mut(id)
            .expect("the lease's worker")
            .lapses
            .reported();
        let n = lease.piece.indices.len();
        if results.len() != n {
            let why = format!("{} results for a piece of {n} candidates", results.len());
            self.piece_failed(st, id, lease.piece, Err(&why));
            return Err(FleetError::Invalid(why));
        }
        // A time the device cannot have measured (faster than its peak allows) is a lie or a
        // broken timer: refused like any bad report, before it could become a best.
        let impossible = st.targets.get(&lease.piece.key).and_then(|target| {
            results.iter().enumerate().find_map(|(i, r)| {
                // A failure has no costs (the door's check), so only successes are bounded.
                check_speed(&r.costs, lease.piece.payload.flops, target)
                    .err()
                    .map(|e| format!("candidate {i}: {e}"))
            })
        });
        if let Some(why) = impossible {
            self.piece_failed(st, id, lease.piece, Err(&why));
            return Err(FleetError::Invalid(why));
        }
        if results.iter().all(device_failure) {
            self.piece_failed(st, id, lease.piece, Ok(results));
            return Ok(true);
        }
        let w = st.workers.get_mut(id).expect("the lease's worker");
        w.failing_pieces = 0;
        w.measured += n as u64;
        w.errors += results.iter().filter(|r| !r.is_ok()).count() as u64;
        w.ok += results.iter().filter(|r| r.is_ok()).count() as u64;
        if let Some(q) = w.quarantine.take_if(|q| !q.distrusted) {
            tracing::info!(worker_id = %id, was = %q.reason, "quarantine lifted: a probation piece succeeded");
            forget_failures(st, id);
            self.queued.notify_waiters();
        }
        lease.piece.batch.fill(&lease.piece.indices, results, id);
        Ok(true)
    }

    /// A report refused at the door (`why`: the field and candidate): nothing of it is kept,
    /// it counts against the worker like a piece that failed entirely, and the piece is
    /// measured elsewhere. Always the refusal, as the error for the worker.
    pub fn refuse(&self, id: &str, lease_id: &str, why: String) -> FleetError {
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        match self.take_lease(st, id, lease_id) {
            Ok(Some(lease)) => {
                // A refused report counts as a failed piece (below), not as a lapse.
                if let Some(w) = st.workers.get_mut(id) {
                    w.lapses.reported();
                }
                self.piece_failed(st, id, lease.piece, Err(&why));
            }
            // A lapsed lease: the piece is elsewhere already.
            Ok(None) => {}
            Err(e) => return e,
        }
        FleetError::Invalid(why)
    }

    /// Worker `id` timed a new best (or its second run) faster than another worker of its pool
    /// did, beyond the noise bound (`why`). `quarantine_after` such times with no agreement in
    /// between quarantine it for good (`Quarantine::distrusted`): the kept time is the slower
    /// one anyway, so a single disagreement costs nothing, but a device that keeps claiming
    /// speeds its pool cannot reproduce is not to be asked again.
    pub fn disagreed(&self, id: &str, why: &str) {
        let mut st = lock(&self.state);
        let Some(w) = st.workers.get_mut(id) else {
            return;
        };
        w.disagreements += 1;
        if w.quarantine.as_ref().is_some_and(|q| q.distrusted) {
            return;
        }
        if w.disagreements < self.cfg.quarantine_after {
            tracing::warn!(worker_id = %id, disagreements = w.disagreements, "its time disagrees with its pool's: {why}");
            return;
        }
        let reason = format!(
            "its times disagreed with its pool's {} times in a row (too fast); last: {why}",
            w.disagreements
        );
        tracing::warn!(worker_id = %id, %reason, "worker quarantined");
        let mut q = Quarantine::new(reason, Instant::now(), &self.cfg);
        q.distrusted = true;
        w.quarantine = Some(q);
    }

    /// Worker `id`'s time agreed with another worker's: its disagreements were noise.
    pub fn agreed(&self, id: &str) {
        if let Some(w) = lock(&self.state).workers.get_mut(id) {
            w.disagreements = 0;
        }
    }

    /// The lease `lease_id` of worker `id`, removed; `None` when it is gone (a late report).
    fn take_lease(
        &self,
        st: &mut State,
        id: &str,
        lease_id: &str,
    ) -> Result<Option<Lease>, FleetError> {
        let w = st
            .workers
            .get_mut(id)
            .ok_or_else(|| FleetError::UnknownWorker(id.to_string()))?;
        w.last_seen = Instant::now();
        w.last_seen_ms = now_ms();
        if st.leases.get(lease_id).is_none_or(|l| l.worker != id) {
            tracing::info!(worker_id = %id, lease = %lease_id, "late report ignored: the lease is gone");
            return Ok(None);
        }
        let lease = st.leases.remove(lease_id).expect("checked above");
        let w = st.workers.get_mut(id).expect("looked up above");
        if w.lease.as_deref() == Some(lease_id) {
            w.lease = None;
        }
        Ok(Some(lease))
    }

    /// A piece failed entirely on worker `id`: every candidate a device failure (`Ok`), or its
    /// report refused (`Err`, why). It counts against the worker (maybe quarantining it), and
    /// the piece goes to another worker; its errors are recorded only once `max_attempts`
    /// workers failed it, or when no other worker can take it and this one has measured
    /// successfully before (then the candidates are the likelier cause). Otherwise it waits
    /// in the queue: a broken device alone in its pool must not brand good candidates as
    /// errors, and a refused report is never recorded.
    fn piece_failed(
        &self,
        st: &mut State,
        id: &str,
        mut piece: Piece,
        outcome: Result<Vec<MeasureResult>, &str>,
    ) {
        let now = Instant::now();
        let n = piece.indices.len() as u64;
        let last = match &outcome {
            Ok(results) => {
                let last = &results[results.len() - 1];
                let msg: String = last.error_msg.chars().take(300).collect();
                format!("{}: {}", last.error.name(), msg.trim())
            }
            Err(why) => format!("report refused: {why}"),
        };
        let key = st.workers[id].key.clone();
        // Another online worker of the target vouches for the candidates of its jobs.
        let vouched = st.workers.iter().any(|(wid, o)| {
            wid != id && o.key == key && o.ok > 0 && o.quarantine.is_none() && self.online(o, now)
        });
        let w = st.workers.get_mut(id).expect("the lease's worker");
        w.measured += n;
        w.errors += n;
        w.failing_pieces += 1;
        if let Some(q) = &mut w.quarantine {
            // A failed probation: wait longer for the next one.
            q.failed_probation(
                format!("probation piece failed; last: {last}"),
                now,
                &self.cfg,
            );
            tracing::warn!(worker_id = %id, reason = %q.reason, "worker stays quarantined");
        } else if w.failing_pieces >= self.cfg.quarantine_after
            || (w.ok == 0 && !vouched)
            || noticed(w).is_some()
        {
            let reason = if w.failing_pieces >= self.cfg.quarantine_after {
                format!(
                    "{} pieces in a row failed on every candidate; last: {last}",
                    w.failing_pieces
                )
            } else if let Some(other) = noticed(w) {
                format!(
                    "its first piece failed on every candidate, and device {other} of its \
                     token is quarantined; last: {last}"
                )
            } else {
                format!(
                    "its first piece failed on every candidate and no worker of its target \
                     has measured successfully; last: {last}"
                )
            };
            tracing::warn!(worker_id = %id, %reason, "worker quarantined");
            w.quarantine = Some(Quarantine::new(reason, now, &self.cfg));
        }
        let trusted = w.quarantine.is_none();
        if !piece.failed_on.iter().any(|f| f == id) {
            piece.failed_on.push(id.to_string());
        }
        let attempts_left = (piece.failed_on.len() as u32) < self.cfg.max_attempts;
        let other = st.workers.iter().any(|(wid, o)| {
            o.key == key
                && o.quarantine.is_none()
                && self.online(o, now)
                && !piece.failed_on.contains(wid)
        });
        match outcome {
            Ok(results) if !attempts_left || (!other && trusted) => {
                piece.batch.fill(&piece.indices, results, id);
            }
            _ => {
                st.queue.push_front(piece);
                self.queued.notify_waiters();
            }
        }
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
            let Some(l) = st.leases.get(id) else {
                continue;
            };
            let how = if now > l.hard_deadline {
                Lapse::PastDeadline
            } else {
                Lapse::Silent
            };
            tracing::warn!(lease = %id, worker_id = %l.worker, lapse = %how,
                "lease expired: the piece goes back to the queue");
            self.lease_expiries
                .get_or_create(&TargetLabel {
                    target: l.piece.key.clone(),
                })
                .inc();
            self.lapse(st, id, how);
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

    /// Target keys with at least one ready worker, or one due for a probation piece, of pools
    /// this replica owns: the jobs the server claims.
    pub fn ready_keys(&self) -> Vec<String> {
        let st = lock(&self.state);
        let now = Instant::now();
        let mut keys: Vec<String> = st
            .workers
            .values()
            .filter(|w| {
                w.quarantine.as_ref().is_none_or(|q| q.probation_due(now))
                    && self.online(w, now)
                    && self.owns_in(&st, &w.key, now)
            })
            .map(|w| w.key.clone())
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// A pool's description, as a kernel's contract names it (its compiler path, flags): that
    /// of its unquarantined worker with the most successes, so that a broken toolchain that
    /// registered last is never what a compiler is told to use; else the last registered.
    pub fn target(&self, key: &str) -> Option<Target> {
        let st = lock(&self.state);
        let proven = st
            .workers
            .values()
            .filter(|w| w.key == key && w.quarantine.is_none() && w.ok > 0)
            .max_by_key(|w| w.ok)
            .map(|w| w.target.clone());
        proven.or_else(|| st.targets.get(key).cloned())
    }

    /// Why the pool of target `key` measures nothing for now, or `None` when a worker of it
    /// can: no worker online, every online one quarantined (naming them and why), or a queued
    /// piece that failed on every worker ready to take it.
    pub fn waiting(&self, key: &str) -> Option<String> {
        let st = lock(&self.state);
        let now = Instant::now();
        let online: Vec<(&String, &Worker)> = st
            .workers
            .iter()
            .filter(|(_, w)| w.key == key && self.online(w, now))
            .collect();
        if online.is_empty() {
            return Some(format!("no worker of target {key} is online"));
        }
        let ready: Vec<&String> = online
            .iter()
            .filter(|(_, w)| w.quarantine.is_none())
            .map(|(id, _)| *id)
            .collect();
        if ready.is_empty() {
            let named: Vec<String> = online
                .iter()
                .take(3)
                .filter_map(|(id, w)| {
                    let q = w.quarantine.as_ref()?;
                    if q.distrusted {
                        return Some(format!(
                            "{id} (device {}): {}; no probation",
                            w.device_id, q.reason
                        ));
                    }
                    let secs = q.probation_at.saturating_duration_since(now).as_secs();
                    Some(format!(
                        "{id} (device {}): {}; probation piece in {secs}s",
                        w.device_id, q.reason
                    ))
                })
                .collect();
            return Some(format!(
                "every online worker of target {key} is quarantined (it measures again once a \
                 probation piece succeeds; registering with a changed description brings it \
                 forward): {}",
                named.join("; ")
            ));
        }
        let stuck = st
            .queue
            .iter()
            .find(|p| p.key == key && ready.iter().all(|id| p.failed_on.contains(id)))?;
        Some(format!(
            "a piece failed entirely on worker(s) {}: it waits for another worker of target {key}",
            stuck.failed_on.join(", ")
        ))
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
                quarantine_reason: w
                    .quarantine
                    .as_ref()
                    .map(|q| q.reason.clone())
                    .unwrap_or_default(),
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

/// The quarantined device of its token a worker is on notice for, until it measures successfully.
fn noticed(w: &Worker) -> Option<&str> {
    w.on_notice.as_deref().filter(|_| w.ok == 0)
}

/// Forgets that pieces failed on worker `id` (its device changed, or proved itself again): it
/// may take them.
fn forget_failures(st: &mut State, id: &str) {
    let pieces = st
        .queue
        .iter_mut()
        .chain(st.leases.values_mut().map(|l| &mut l.piece));
    for p in pieces {
        p.failed_on.retain(|f| f != id);
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
        job_piece(key, "j", 0, n, batch)
    }

    fn job_piece(key: &str, job: &str, priority: i32, n: usize, batch: &Arc<BatchSlot>) -> Piece {
        let payload = Arc::new(Payload {
            job_id: job.into(),
            priority,
            workload_key: "w".into(),
            dag_json: "{}".into(),
            description: String::new(),
            workload_options: WorkloadOptions::default(),
            steps_json: vec!["[]".into(); n],
            flops: 0,
            options_json: "{}".into(),
        });
        Piece::new(
            key.to_string(),
            payload,
            (0..n).collect(),
            Arc::clone(batch),
        )
    }

    /// A piece of one candidate, `i`, of `batch`.
    fn single(key: &str, i: usize, batch: &Arc<BatchSlot>) -> Piece {
        let mut p = piece(key, 1, batch);
        p.indices = vec![i];
        p
    }

    #[tokio::test(start_paused = true)]
    async fn a_shared_pool_is_served_while_held_and_a_dropped_ones_workers_are_sent_on() {
        let (f, key, t) = fleet();
        f.share_pools();
        let (a, _) = f.register("s", "dev-a", t.clone(), "{}".into());
        // Not held: no job of it is claimed here.
        assert!(!f.owns(&key) && f.ready_keys().is_empty());
        f.hold_pool(&key, Instant::now() + Duration::from_secs(1));
        assert!(f.owns(&key));
        assert_eq!(f.ready_keys(), std::slice::from_ref(&key));
        // A hold not renewed runs out.
        tokio::time::advance(Duration::from_millis(1001)).await;
        f.heartbeat(&a, "").unwrap();
        assert!(!f.owns(&key) && f.ready_keys().is_empty());
        f.hold_pool(&key, Instant::now() + Duration::from_secs(1));
        let batch = BatchSlot::new(2);
        f.enqueue(vec![piece(&key, 1, &batch), piece(&key, 1, &batch)]);
        let la = f.pull(&a).unwrap().expect("a gets a piece");
        // Another replica took the pool: pieces and leases forgotten, the worker sent on.
        assert!(f.drop_pool(&key, "b:1"));
        assert!(!f.owns(&key));
        assert_eq!(f.list().1.get(&key), None, "nothing queued");
        let beat = f.heartbeat(&a, &la.lease_id).unwrap();
        assert_eq!(
            beat,
            Beat {
                lease_held: false,
                moved_to: Some("b:1".into())
            }
        );
        assert!(f.list().0.is_empty(), "the worker is forgotten here");
        assert!(matches!(f.pull(&a), Err(FleetError::UnknownWorker(_))));
        // Taken back, the pool is served again.
        f.hold_pool(&key, Instant::now() + Duration::from_secs(1));
        let (a, _) = f.register("s", "dev-a", t, "{}".into());
        assert_eq!(f.heartbeat(&a, "").unwrap().moved_to, None);
        assert_eq!(f.ready_keys(), [key]);
    }

    #[tokio::test(start_paused = true)]
    async fn expired_lease_goes_to_another_worker_and_late_report_is_ignored() {
        let (f, key, t) = fleet();
        let (a, _) = f.register("s", "dev-a", t.clone(), "{}".into());
        let batch = BatchSlot::new(2);
        f.enqueue(vec![piece(&key, 2, &batch)]);
        let la = f.pull(&a).unwrap().expect("a gets the piece");
        assert_eq!(f.reap(), 0, "a is within its grace");
        // a stays silent past its grace (200 ms).
        tokio::time::advance(Duration::from_millis(300)).await;
        let (b, _) = f.register("s", "dev-b", t, "{}".into());
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
        let (a, _) = f.register("s", "dev-a", t, "{}".into());
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

    /// Leases a piece of `n` to `w` and reports `ok` results for every candidate.
    fn measure(f: &Fleet, w: &str, ok: bool) -> Result<bool, FleetError> {
        let l = f.pull(w).unwrap().expect("a piece for the worker");
        f.report(w, &l.lease_id, vec![result(ok); l.indices.len()], false)
    }

    fn view(f: &Fleet, id: &str) -> WorkerView {
        f.list().0.into_iter().find(|w| w.id == id).unwrap()
    }

    #[test]
    fn failing_worker_is_quarantined_and_its_pieces_move() {
        let (f, key, t) = fleet();
        let (bad, _) = f.register("s", "bad", t.clone(), "{}".into());
        let (good, _) = f.register("s", "good", t, "{}".into());
        // good has measured: the pool's candidates can be measured, bad gets a second chance.
        let batch = BatchSlot::new(1);
        f.enqueue(vec![piece(&key, 1, &batch)]);
        assert!(measure(&f, &good, true).unwrap());
        for i in 0..2 {
            let batch = BatchSlot::new(1);
            f.enqueue(vec![piece(&key, 1, &batch)]);
            assert!(measure(&f, &bad, false).unwrap());
            assert_eq!(
                view(&f, &bad).status == "quarantined",
                i == 1,
                "quarantined after the second piece in a row"
            );
            assert!(batch.wait(Duration::ZERO).is_none(), "not recorded");
            assert!(
                measure(&f, &good, true).unwrap(),
                "the failed piece moved to good"
            );
            assert!(batch.wait(Duration::ZERO).unwrap()[0].0.is_ok());
        }
        let w = view(&f, &bad);
        assert!(
            w.quarantine_reason.contains("compile_error"),
            "{}",
            w.quarantine_reason
        );
        assert_eq!((w.measured, w.errors), (2, 2), "its failures are counted");
        let batch = BatchSlot::new(1);
        f.enqueue(vec![piece(&key, 1, &batch)]);
        assert!(
            f.pull(&bad).unwrap().is_none(),
            "no work for a quarantined worker"
        );
        assert_eq!(f.ready_workers(&key), 1);
        assert_eq!(f.waiting(&key), None, "good serves the target");
        assert_eq!(worker_id("s", "bad"), bad, "the same device, the same id");
    }

    #[test]
    fn a_broken_worker_alone_is_quarantined_at_once_and_its_piece_waits() {
        let (f, key, t) = fleet();
        let (bad, _) = f.register("s", "bad", t.clone(), "{}".into());
        let batch = BatchSlot::new(2);
        f.enqueue(vec![piece(&key, 2, &batch)]);
        assert!(measure(&f, &bad, false).unwrap());
        let w = view(&f, &bad);
        assert_eq!(w.status, "quarantined");
        assert!(
            w.quarantine_reason.contains("first piece"),
            "{}",
            w.quarantine_reason
        );
        assert_eq!((w.measured, w.errors), (2, 2));
        assert!(batch.wait(Duration::ZERO).is_none(), "no trial recorded");
        assert_eq!(f.list().1.get(&key), Some(&1), "the piece waits");
        assert!(!f.ready_keys().contains(&key));
        let why = f.waiting(&key).unwrap();
        assert!(why.contains("quarantined") && why.contains(&bad), "{why}");
        // Another device comes: it takes the piece.
        let (good, _) = f.register("s", "good", t, "{}".into());
        assert_eq!(f.waiting(&key), None);
        assert!(measure(&f, &good, true).unwrap());
        assert!(
            batch
                .wait(Duration::ZERO)
                .unwrap()
                .iter()
                .all(|(r, w)| r.is_ok() && *w == good)
        );
    }

    #[test]
    fn a_healthy_worker_alone_records_a_piece_whose_candidates_fail() {
        let (f, key, t) = fleet();
        let (a, _) = f.register("s", "a", t, "{}".into());
        let batch = BatchSlot::new(1);
        f.enqueue(vec![piece(&key, 1, &batch)]);
        assert!(measure(&f, &a, true).unwrap());
        // It has measured: a piece failing once more likely says something of its candidates.
        let batch = BatchSlot::new(1);
        f.enqueue(vec![piece(&key, 1, &batch)]);
        assert!(measure(&f, &a, false).unwrap());
        assert!(
            !batch.wait(Duration::ZERO).unwrap()[0].0.is_ok(),
            "recorded"
        );
        assert_eq!(view(&f, &a).status, "idle");
    }

    #[tokio::test(start_paused = true)]
    async fn a_quarantined_worker_gets_probation_pieces_and_a_success_lifts_it() {
        let (f, key, t) = fleet();
        let probation = f.cfg.probation;
        let (a, _) = f.register("s", "a", t, "{}".into());
        let batch = BatchSlot::new(1);
        f.enqueue(vec![piece(&key, 1, &batch)]);
        assert!(measure(&f, &a, false).unwrap());
        assert_eq!(view(&f, &a).status, "quarantined");
        // Heartbeats keep it online while the clock moves.
        let wait = async |d: Duration| {
            let step = Duration::from_millis(100);
            let mut left = d;
            while !left.is_zero() {
                tokio::time::advance(step.min(left)).await;
                left = left.saturating_sub(step);
                f.heartbeat(&a, "").unwrap();
            }
        };
        wait(probation - Duration::from_secs(1)).await;
        assert!(f.pull(&a).unwrap().is_none(), "not before its probation");
        assert!(!f.ready_keys().contains(&key));
        wait(Duration::from_secs(1)).await;
        assert!(
            f.ready_keys().contains(&key),
            "a job of the target may be claimed"
        );
        // The probation piece may be the one that failed on it; it fails again.
        assert!(measure(&f, &a, false).unwrap());
        let w = view(&f, &a);
        assert_eq!(w.status, "quarantined");
        assert!(
            w.quarantine_reason.contains("probation"),
            "{}",
            w.quarantine_reason
        );
        assert!(batch.wait(Duration::ZERO).is_none());
        // The next probation comes after twice the wait.
        wait(probation).await;
        assert!(f.pull(&a).unwrap().is_none(), "the wait doubled");
        wait(probation).await;
        assert!(measure(&f, &a, true).unwrap(), "a mended device");
        assert_eq!(view(&f, &a).status, "idle", "lifted");
        assert!(batch.wait(Duration::ZERO).unwrap()[0].0.is_ok());
    }

    #[test]
    fn a_changed_description_brings_the_probation_forward_once_and_lifts_nothing() {
        let (f, key, t) = fleet();
        let (a, _) = f.register("s", "a", t.clone(), r#"{"cc":"broken"}"#.into());
        let batch = BatchSlot::new(1);
        f.enqueue(vec![piece(&key, 1, &batch)]);
        assert!(measure(&f, &a, false).unwrap());
        assert_eq!(view(&f, &a).status, "quarantined");
        let reason = view(&f, &a).quarantine_reason;
        // A restart with the same description mends nothing.
        f.register("s", "a", t.clone(), r#"{"cc":"broken"}"#.into());
        assert!(f.pull(&a).unwrap().is_none());
        // A changed description, then the original: still quarantined, for the same reason.
        f.register("s", "a", t.clone(), r#"{"cc":"cc"}"#.into());
        f.register("s", "a", t.clone(), r#"{"cc":"broken"}"#.into());
        let w = view(&f, &a);
        assert_eq!((w.status, w.quarantine_reason), ("quarantined", reason));
        // Its probation piece comes at once, once; failed, the next after the longer wait.
        assert!(measure(&f, &a, false).unwrap());
        f.register("s", "a", t.clone(), r#"{"cc":"other"}"#.into());
        assert!(f.pull(&a).unwrap().is_none(), "no second early probation");
        assert_eq!(view(&f, &a).status, "quarantined");
        assert!(batch.wait(Duration::ZERO).is_none(), "not recorded");
    }

    #[test]
    fn a_probation_piece_after_a_changed_description_lifts_the_quarantine() {
        let (f, key, t) = fleet();
        let (a, _) = f.register("s", "a", t.clone(), r#"{"cc":"broken"}"#.into());
        let batch = BatchSlot::new(1);
        f.enqueue(vec![piece(&key, 1, &batch)]);
        assert!(measure(&f, &a, false).unwrap());
        f.register("s", "a", t, r#"{"cc":"cc"}"#.into());
        assert_eq!(view(&f, &a).status, "quarantined");
        // The piece that failed on the old description is its probation piece.
        assert!(measure(&f, &a, true).unwrap());
        assert_eq!(view(&f, &a).status, "idle");
        assert!(batch.wait(Duration::ZERO).unwrap()[0].0.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_device_mended_while_holding_its_probation_piece_gets_another_at_once() {
        let (f, key, t) = fleet();
        let (a, _) = f.register("s", "a", t.clone(), "{}".into());
        let batch = BatchSlot::new(1);
        f.enqueue(vec![piece(&key, 1, &batch)]);
        assert!(measure(&f, &a, false).unwrap());
        // Heartbeats keep it online until its probation piece is due.
        let step = Duration::from_millis(100);
        for _ in 0..f.cfg.probation.as_millis() / step.as_millis() {
            tokio::time::advance(step).await;
            f.heartbeat(&a, "").unwrap();
        }
        f.pull(&a).unwrap().expect("the probation piece");
        // It restarts with a mended compiler while holding it: the lapse does not undo the
        // probation its new description brings forward.
        f.register("s", "a", t, r#"{"cc":"cc"}"#.into());
        assert!(measure(&f, &a, true).unwrap());
        assert_eq!(view(&f, &a).status, "idle");
        assert!(batch.wait(Duration::ZERO).unwrap()[0].0.is_ok());
    }

    #[test]
    fn a_device_is_its_tokens_subject_and_its_device_id() {
        let (f, key, t) = fleet();
        let (a, _) = f.register("board-1", "dev", t.clone(), "{}".into());
        let (b, _) = f.register("board-2", "dev", t, "{}".into());
        assert_ne!(
            a, b,
            "another token's device of the same name is another worker"
        );
        assert!(f.check_subject(&a, "board-1").is_ok());
        assert!(matches!(
            f.check_subject(&a, "board-2"),
            Err(FleetError::UnknownWorker(_))
        ));
        assert_ne!(worker_id("ab", "c"), worker_id("a", "bc"));
        let batch = BatchSlot::new(1);
        f.enqueue(vec![piece(&key, 1, &batch)]);
        assert!(measure(&f, &a, false).unwrap());
        assert_eq!(view(&f, &a).status, "quarantined");
        assert_eq!(view(&f, &b).status, "idle");
    }

    #[test]
    fn a_new_device_id_of_a_token_with_a_quarantined_device_is_on_notice() {
        let (f, key, t) = fleet();
        let (good, _) = f.register("other", "good", t.clone(), "{}".into());
        let (a, _) = f.register("s", "a", t.clone(), "{}".into());
        let batch = BatchSlot::new(1);
        f.enqueue(vec![piece(&key, 1, &batch)]);
        assert!(measure(&f, &a, false).unwrap());
        assert_eq!(view(&f, &a).status, "quarantined");
        // The same token, another device id: its first lapse quarantines it.
        let (b, _) = f.register("s", "b", t.clone(), "{}".into());
        assert_eq!(view(&f, &b).status, "idle");
        f.pull(&b).unwrap().expect("the piece");
        assert!(f.pull(&b).unwrap().is_none());
        let w = view(&f, &b);
        assert_eq!(w.status, "quarantined");
        assert!(
            w.quarantine_reason
                .contains(&format!("device {a} of its token")),
            "{}",
            w.quarantine_reason
        );
        // Another token's new device is not: one lapse is not yet a habit.
        let (c, _) = f.register("third", "c", t, "{}".into());
        f.pull(&c).unwrap().expect("the piece");
        assert!(
            f.pull(&c).unwrap().is_none(),
            "the piece goes to good first"
        );
        assert_eq!(view(&f, &c).status, "idle");
        assert!(measure(&f, &good, true).unwrap());
        assert!(batch.wait(Duration::ZERO).unwrap()[0].0.is_ok());
    }

    #[test]
    fn a_second_run_goes_elsewhere_first_and_a_worker_disagreeing_twice_is_distrusted() {
        let (f, key, t) = fleet();
        let (a, _) = f.register("s", "a", t.clone(), "{}".into());
        let (b, _) = f.register("s", "b", t.clone(), "{}".into());
        let batch = BatchSlot::new(1);
        f.enqueue(vec![single(&key, 0, &batch).avoiding(&[&a])]);
        assert!(f.pull(&a).unwrap().is_none(), "b could take it");
        let l = f.pull(&b).unwrap().expect("b's");
        assert!(
            f.report(&b, &l.lease_id, vec![result(true)], false)
                .unwrap()
        );
        // One disagreement is noise; an agreement clears it; two in a row are not.
        f.disagreed(&a, "x");
        f.agreed(&a);
        f.disagreed(&a, "x");
        assert_eq!(view(&f, &a).status, "idle");
        let batch = BatchSlot::new(1);
        f.enqueue(vec![single(&key, 0, &batch)]);
        let held = f.pull(&a).unwrap().expect("a's");
        f.disagreed(&a, "timed it 3x faster");
        let w = view(&f, &a);
        assert_eq!(w.status, "quarantined");
        assert!(w.quarantine_reason.contains("disagreed"), "{w:?}");
        // Its report under the lease it held is not taken: the piece goes to b.
        assert!(
            !f.report(&a, &held.lease_id, vec![result(true)], false)
                .unwrap()
        );
        assert_eq!(view(&f, &a).status, "quarantined");
        let l = f.pull(&b).unwrap().expect("the piece, now b's");
        assert!(
            f.report(&b, &l.lease_id, vec![result(true)], false)
                .unwrap()
        );
        assert_eq!(batch.wait(Duration::ZERO).expect("in")[0].1, b);
        // No probation, nor a changed description, lifts it.
        f.register("s", "a", t, "{\"changed\":1}".into());
        f.enqueue(vec![single(&key, 0, &BatchSlot::new(1))]);
        assert!(f.pull(&a).unwrap().is_none());
        assert!(!f.ready_keys().is_empty(), "b serves the pool");
    }

    #[test]
    fn a_pools_description_is_its_proven_workers_not_the_last_registered() {
        let (f, key, t) = fleet();
        let (good, _) = f.register("s", "good", t.clone(), "{}".into());
        let mut broken = t.clone();
        broken.compiler = "/opt/broken-cc".into();
        assert_eq!(broken.key(), key, "the compiler's path is not in the key");
        f.register("s", "broken", broken, "{}".into());
        assert_eq!(
            f.target(&key).unwrap().compiler,
            "/opt/broken-cc",
            "none proven yet"
        );
        let batch = BatchSlot::new(1);
        f.enqueue(vec![single(&key, 0, &batch)]);
        let l = f.pull(&good).unwrap().expect("good's");
        assert!(
            f.report(&good, &l.lease_id, vec![result(true)], false)
                .unwrap()
        );
        assert_eq!(f.target(&key).unwrap().compiler, t.compiler);
    }

    #[tokio::test(start_paused = true)]
    async fn a_tie_break_goes_to_a_third_worker_then_the_slower_and_the_faster_only_alone() {
        let (f, key, t) = fleet();
        let (fast, _) = f.register("s", "fast", t.clone(), "{}".into());
        let (slow, _) = f.register("s", "slow", t.clone(), "{}".into());
        let (third, _) = f.register("s", "third", t.clone(), "{}".into());
        let tie = |batch: &Arc<BatchSlot>| single(&key, 0, batch).avoiding(&[&fast, &slow]);
        f.enqueue(vec![tie(&BatchSlot::new(1))]);
        assert!(f.pull(&fast).unwrap().is_none());
        assert!(f.pull(&slow).unwrap().is_none(), "a third worker is there");
        let l = f.pull(&third).unwrap().expect("the third's");
        assert!(
            f.report(&third, &l.lease_id, vec![result(true)], false)
                .unwrap()
        );
        // The third goes silent past its grace: the slower one, never the faster while
        // another is there.
        tokio::time::advance(Duration::from_millis(300)).await;
        for w in [&fast, &slow] {
            f.heartbeat(w, "").unwrap();
        }
        f.enqueue(vec![tie(&BatchSlot::new(1))]);
        assert!(f.pull(&fast).unwrap().is_none(), "the slower one is there");
        let l = f.pull(&slow).unwrap().expect("the slower's");
        assert!(
            f.report(&slow, &l.lease_id, vec![result(true)], false)
                .unwrap()
        );
        // Alone, the faster one: a job never waits on a device that is gone.
        tokio::time::advance(Duration::from_millis(300)).await;
        f.enqueue(vec![tie(&BatchSlot::new(1))]);
        assert!(f.pull(&fast).unwrap().is_some());
    }

    #[test]
    fn a_worker_that_pulls_again_loses_the_piece_to_another_and_is_quarantined() {
        let (f, key, t) = fleet();
        let (a, _) = f.register("s", "a", t.clone(), "{}".into());
        let (b, _) = f.register("s", "b", t, "{}".into());
        let batch = BatchSlot::new(3);
        f.enqueue((0..3).map(|i| single(&key, i, &batch)).collect());
        let first = f.pull(&a).unwrap().unwrap();
        // a pulls again: its piece lapses, and it is not handed back to a.
        let second = f.pull(&a).unwrap().unwrap();
        assert_ne!(first.indices, second.indices);
        let lb = f.pull(&b).unwrap().unwrap();
        assert_eq!(lb.indices, first.indices, "the lapsed piece goes to b");
        assert!(
            f.report(&b, &lb.lease_id, vec![result(true)], false)
                .unwrap()
        );
        let third = f.pull(&a).unwrap().unwrap();
        assert_eq!(view(&f, &a).status, "busy");
        assert!(
            f.pull(&a).unwrap().is_none(),
            "the third lapse quarantines a"
        );
        let w = view(&f, &a);
        assert_eq!(w.status, "quarantined");
        assert!(
            w.quarantine_reason.contains("3 leases in a row lapsed")
                && w.quarantine_reason.contains("pulled again"),
            "{}",
            w.quarantine_reason
        );
        // b measures the rest; nothing of a is kept.
        let mut rest = vec![];
        for _ in 0..2 {
            let l = f.pull(&b).unwrap().unwrap();
            rest.push(l.indices[0]);
            assert!(
                f.report(&b, &l.lease_id, vec![result(true)], false)
                    .unwrap()
            );
        }
        rest.sort();
        let mut want = vec![second.indices[0], third.indices[0]];
        want.sort();
        assert_eq!(rest, want);
        let got = batch.wait(Duration::ZERO).expect("all in");
        assert!(got.iter().all(|(r, w)| r.is_ok() && *w == b));
    }

    #[test]
    fn a_lone_worker_gets_its_lapsed_piece_back_and_a_report_clears_its_lapses() {
        let (f, key, t) = fleet();
        let (a, _) = f.register("s", "a", t, "{}".into());
        let batch = BatchSlot::new(1);
        for _ in 0..4 {
            f.enqueue(vec![piece(&key, 1, &batch)]);
            // Two lapses, then a report: never three in a row.
            f.pull(&a).unwrap().unwrap();
            f.pull(&a)
                .unwrap()
                .expect("no other worker: the same piece again");
            assert!(measure(&f, &a, true).unwrap());
            assert_eq!(view(&f, &a).status, "idle");
        }
    }

    #[test]
    fn jobs_sharing_a_pool_take_its_worker_by_priority() {
        let (f, key, t) = fleet();
        let (a, _) = f.register("s", "a", t, "{}".into());
        let batch = BatchSlot::new(1);
        // Six pieces of job A (priority 5, weight 2) queued before six of job B (priority 0).
        f.enqueue((0..6).map(|_| job_piece(&key, "A", 5, 1, &batch)).collect());
        f.enqueue((0..6).map(|_| job_piece(&key, "B", 0, 1, &batch)).collect());
        let mut order = String::new();
        while let Some(l) = f.pull(&a).unwrap() {
            order.push_str(&l.payload.job_id);
            assert!(
                f.report(&a, &l.lease_id, vec![result(true)], false)
                    .unwrap()
            );
        }
        // B does not wait behind A's queue: two of A's pieces for each of B's until A has none.
        assert_eq!(order, "ABAABAABABBB");
    }

    #[test]
    fn a_piece_that_failed_on_a_worker_does_not_hold_back_another_job() {
        let (f, key, t) = fleet();
        let (a, _) = f.register("s", "a", t.clone(), "{}".into());
        let (b, _) = f.register("s", "b", t, "{}".into());
        // Both measured once: a failure is then more likely the candidates' than the devices'.
        let warm = BatchSlot::new(1);
        f.enqueue(vec![piece(&key, 1, &warm), piece(&key, 1, &warm)]);
        assert!(measure(&f, &a, true).unwrap());
        assert!(measure(&f, &b, true).unwrap());
        let batch = BatchSlot::new(1);
        f.enqueue(vec![job_piece(&key, "A", 0, 1, &batch)]);
        assert!(measure(&f, &a, false).unwrap(), "A's piece fails on a");
        f.enqueue(vec![job_piece(&key, "B", 0, 1, &batch)]);
        // A's piece waits for b; a takes B's.
        let l = f.pull(&a).unwrap().expect("B's piece for a");
        assert_eq!(l.payload.job_id, "B");
        let l = f.pull(&b).unwrap().expect("A's piece for b");
        assert_eq!(l.payload.job_id, "A");
    }

    #[test]
    fn a_refused_report_keeps_nothing_and_counts_against_the_worker() {
        let (f, key, t) = fleet();
        let (a, _) = f.register("s", "a", t.clone(), "{}".into());
        let (b, _) = f.register("s", "b", t, "{}".into());
        let batch = BatchSlot::new(2);
        f.enqueue(vec![piece(&key, 2, &batch)]);
        let l = f.pull(&a).unwrap().unwrap();
        let e = f
            .report(&a, &l.lease_id, vec![result(true)], false)
            .unwrap_err();
        assert!(e.to_string().contains("1 results for a piece of 2"), "{e}");
        let w = view(&f, &a);
        assert_eq!(w.status, "quarantined", "nothing vouches for it");
        assert_eq!(w.errors, 2);
        assert!(
            w.quarantine_reason.contains("report refused"),
            "{}",
            w.quarantine_reason
        );
        let l = f.pull(&b).unwrap().unwrap();
        let e = f.refuse(&b, &l.lease_id, "candidate 0: cost 0 is NaN".into());
        assert!(matches!(e, FleetError::Invalid(_)));
        assert!(batch.wait(Duration::ZERO).is_none(), "nothing kept");
        assert_eq!(
            f.list().1.get(&key),
            Some(&1),
            "the piece waits for another worker"
        );
        assert!(f.waiting(&key).unwrap().contains("quarantined"));
    }

    mod props {
        use super::*;
        use crate::fleet::report::check_report;
        use crate::fleet::report::tests::any_candidate;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

            /// Any report through the door and the registry: refused with a clear error and
            /// nothing kept (the piece back in the queue), or kept in full.
            #[test]
            fn a_report_is_kept_in_full_or_not_at_all(
                n in 1..4usize,
                cands in prop::collection::vec(any_candidate(), 0..5),
            ) {
                let (f, key, t) = fleet();
                let (a, _) = f.register("s", "a", t, "{}".into());
                let batch = BatchSlot::new(n);
                f.enqueue(vec![piece(&key, n, &batch)]);
                let l = f.pull(&a).unwrap().unwrap();
                let outcome = match check_report(cands) {
                    Ok(rs) => f.report(&a, &l.lease_id, rs, false),
                    Err(why) => Err(f.refuse(&a, &l.lease_id, why)),
                };
                let got = batch.wait(Duration::ZERO);
                let queued = f.list().1.get(&key).copied().unwrap_or(0);
                match outcome {
                    Err(e) => {
                        prop_assert!(matches!(e, FleetError::Invalid(_)));
                        prop_assert!(!e.to_string().is_empty());
                        prop_assert!(got.is_none());
                        prop_assert_eq!(queued, 1);
                    }
                    Ok(accepted) => {
                        prop_assert!(accepted);
                        // Filled in full, or (all failed, alone) back in the queue whole.
                        prop_assert!(got.is_some() != (queued == 1));
                    }
                }
            }
        }
    }
}
