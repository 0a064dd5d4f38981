//! Jobs, tasks and their measured records in the database (tables of `migrations/0002`; a
//! task's tuning times and a job's cost model: `0012`).
//!
//! Claiming is one statement: `UPDATE jobs ... WHERE id = (SELECT ... LIMIT 1 [FOR UPDATE SKIP
//! LOCKED]) RETURNING id`. On PostgreSQL the row lock makes two servers pick different jobs; on
//! SQLite the database's single writer serialises the statement. A claim is a lease, renewed while
//! the job runs and checked in the transaction that stores each batch, so that a server that
//! lost its lease (it stalled past it and another took over) stores nothing more for the job.

use super::cost_model::CostModelChoice;
use crate::records::{
    Backend, CommitOutcome, CountDeltas, NewRecord, RangeRow, SqlStore, StoreError, commit_on,
    now_ms, put_range_on,
};
use sqlx::Row;
use sqlx::any::AnyRow;
use std::collections::BTreeMap;
use tunehub_engine::measure::MeasureOptions;
use tunehub_engine::search::RoundReport;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobState {
    Queued,
    Running,
    Done,
    Failed,
    Cancelled,
}

impl JobState {
    pub const ALL: [JobState; 5] = [
        JobState::Queued,
        JobState::Running,
        JobState::Done,
        JobState::Failed,
        JobState::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<JobState> {
        JobState::ALL.into_iter().find(|j| j.as_str() == s)
    }

    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Done | JobState::Failed | JobState::Cancelled
        )
    }
}

/// A job as stored.
#[derive(Debug, Clone)]
pub struct JobRow {
    pub id: String,
    pub name: String,
    pub state: JobState,
    pub target_key: String,
    pub seed: u64,
    pub batch_size: u32,
    pub scheduler: String,
    pub measure: MeasureOptions,
    pub error: String,
    pub claimed_by: Option<String>,
    pub lease_until: Option<i64>,
    pub claims: u32,
    pub created_at: i64,
    pub updated_at: i64,
    /// The name of the token that submitted it (`anonymous` without tokens).
    pub owner: String,
    /// Higher is claimed first among the queued jobs of its target pool (-10..10), and gets a
    /// larger share of a pool it shares (`priority::weight`).
    pub priority: i32,
    /// The cost model the job started from at its latest claim ("saved", "transferred from
    /// <target key>", "cold"); empty before its first claim.
    pub model_start: String,
    /// The submission's group (one job per target of `SubmitRequest.targets`); '' alone.
    pub group: String,
    /// The cost model its search ranks with (`SubmitRequest.cost_model`).
    pub cost_model: CostModelChoice,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TaskRow {
    pub idx: u32,
    pub workload_key: String,
    pub weight: f64,
    pub trials: u32,
    pub exhausted: bool,
    pub last_error: String,
    pub dropped: u32,
    /// Where its tuning time went, summed over its stored rounds.
    pub times: TaskTimes,
    /// Another form of a computation the network runs (`NewTask::alternative`).
    pub alternative: bool,
}

/// Where tuning time went, summed over rounds: the engine's `RoundReport` timings of each
/// stored round of a task (`TaskProgress.rounds`, `search_s`, ...).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TaskTimes {
    pub rounds: u32,
    /// Wall seconds of the search (sketches, evolution, the cost model).
    pub search_s: f64,
    /// Of `search_s`, the cost model's (predict and update).
    pub model_s: f64,
    /// Wall seconds of the measurement.
    pub measure_s: f64,
    /// Compile and run seconds summed per candidate (builds overlap: more than wall time).
    pub build_s: f64,
    pub run_s: f64,
}

impl TaskTimes {
    /// One round's.
    pub fn of_round(r: &RoundReport) -> TaskTimes {
        TaskTimes {
            rounds: 1,
            search_s: r.search_s,
            model_s: r.model_s,
            measure_s: r.measure_s,
            build_s: r.build_s,
            run_s: r.run_s,
        }
    }
}

/// What a job measured for one task, from `job_records`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskStats {
    pub trials_done: u32,
    pub ok: u32,
    /// Of the `ok` ones, those timed on a slowed machine (flagged noisy: never a best).
    pub noisy: u32,
    pub new_records: u32,
    /// Failures by the engine's error code.
    pub errors: BTreeMap<i32, u32>,
}

/// A job to create: validated by the API before it gets here.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub name: String,
    pub target_key: String,
    pub seed: u64,
    pub batch_size: u32,
    pub scheduler: String,
    pub measure: MeasureOptions,
    /// The submitting token's name.
    pub owner: String,
    pub priority: i32,
    /// The group id shared by the jobs of one multi-target submission; '' for none.
    pub group: String,
    pub cost_model: CostModelChoice,
    /// The workloads must be stored already.
    pub tasks: Vec<NewTask>,
    /// The shape range the job tunes (its tasks are the range's representatives): stored, or
    /// updated, with the job and linked to it.
    pub range: Option<RangeRow>,
}

/// A task of a new job.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    pub workload_key: String,
    pub weight: f64,
    pub trials: u32,
    /// Another form of a computation the network runs (`TaskSpec.alternative`).
    pub alternative: bool,
}

impl NewTask {
    /// A task of the network itself.
    pub fn new(workload_key: impl Into<String>, weight: f64, trials: u32) -> Self {
        NewTask {
            workload_key: workload_key.into(),
            weight,
            trials,
            alternative: false,
        }
    }
}

/// Who runs a job: a server and which of the job's claims it runs. The claim number fences a
/// driver off once the job was claimed again, even by the same server (its lease ran out during
/// a database outage while the driver waited to store): a stale driver's renew, store and
/// release then touch nothing, so no trial is stored twice and the new claim is not released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder<'a> {
    pub instance: &'a str,
    pub claim: u32,
}

/// Whether a server still holds the job it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    Held,
    /// Still ours, but someone cancelled the job: stop after this batch.
    Cancelled,
    /// Taken over by another server, or gone: stop now, store nothing more.
    Lost,
}

const JOB_COLUMNS: &str = "id, name, state, target_key, seed, batch_size, scheduler, measure_json, error, \
     claimed_by, lease_until, claims, created_at, updated_at, owner, priority, model_start, group_id, \
     cost_model";

fn job_from_row(row: &AnyRow) -> Result<JobRow, StoreError> {
    let id: String = row.try_get(0)?;
    let state: String = row.try_get(2)?;
    let corrupt = |msg: String| StoreError::Corrupt {
        id: id.clone(),
        msg,
    };
    let measure_json: String = row.try_get(7)?;
    let cost_model: String = row.try_get(18)?;
    Ok(JobRow {
        name: row.try_get(1)?,
        state: JobState::parse(&state).ok_or_else(|| corrupt(format!("state '{state}'")))?,
        target_key: row.try_get(3)?,
        // Seeds are u64; BIGINT holds their bits.
        seed: row.try_get::<i64, _>(4)? as u64,
        batch_size: row.try_get::<i64, _>(5)? as u32,
        scheduler: row.try_get(6)?,
        measure: serde_json::from_str(&measure_json)
            .map_err(|e| corrupt(format!("measure_json: {e}")))?,
        error: row.try_get(8)?,
        claimed_by: row.try_get(9)?,
        lease_until: row.try_get(10)?,
        claims: row.try_get::<i64, _>(11)? as u32,
        created_at: row.try_get(12)?,
        updated_at: row.try_get(13)?,
        owner: row.try_get(14)?,
        priority: row.try_get::<i64, _>(15)? as i32,
        model_start: row.try_get(16)?,
        group: row.try_get(17)?,
        cost_model: CostModelChoice::parse(&cost_model)
            .map_err(|e| corrupt(format!("cost_model: {e}")))?,
        id,
    })
}

/// The job tables. Cloning shares the pool.
#[derive(Debug, Clone)]
pub struct JobStore {
    db: SqlStore,
}

impl JobStore {
    pub fn new(db: SqlStore) -> Self {
        JobStore { db }
    }

    pub fn records(&self) -> &SqlStore {
        &self.db
    }

    /// Stores a queued job and its tasks in one transaction; returns its id.
    pub async fn create(&self, job: &NewJob) -> Result<String, StoreError> {
        let ids = self.create_all(std::slice::from_ref(job)).await?;
        Ok(ids.into_iter().next().expect("one job, one id"))
    }

    /// Stores queued jobs and their tasks in one transaction (all or none); returns their ids
    /// in order.
    pub async fn create_all(&self, jobs: &[NewJob]) -> Result<Vec<String>, StoreError> {
        let now = now_ms();
        let mut tx = self.db.pool().begin().await?;
        let mut ids = vec![];
        for job in jobs {
            let id = format!("j-{:016x}", rand::random::<u64>());
            let measure_json =
                serde_json::to_string(&job.measure).expect("measure options serialize");
            sqlx::query(&format!(
                "INSERT INTO jobs ({JOB_COLUMNS}) VALUES ($1, $2, 'queued', $3, $4, $5, $6, $7, '', NULL, NULL, 0, $8, $8, $9, $10, '', $11, $12)"
            ))
            .bind(&id)
            .bind(&job.name)
            .bind(&job.target_key)
            .bind(job.seed as i64)
            .bind(i64::from(job.batch_size))
            .bind(&job.scheduler)
            .bind(&measure_json)
            .bind(now)
            .bind(&job.owner)
            .bind(i64::from(job.priority))
            .bind(&job.group)
            .bind(job.cost_model.as_str())
            .execute(&mut *tx)
            .await?;
            for (idx, t) in job.tasks.iter().enumerate() {
                sqlx::query(
                    "INSERT INTO tasks (job_id, idx, workload_key, weight, trials, exhausted, last_error, dropped, alternative) \
                     VALUES ($1, $2, $3, $4, $5, 0, '', 0, $6)",
                )
                .bind(&id)
                .bind(idx as i64)
                .bind(&t.workload_key)
                .bind(t.weight)
                .bind(i64::from(t.trials))
                .bind(i64::from(t.alternative))
                .execute(&mut *tx)
                .await?;
            }
            if let Some(r) = &job.range {
                put_range_on(&mut tx, r, true).await?;
                sqlx::query("INSERT INTO shape_range_jobs (job_id, range_id) VALUES ($1, $2)")
                    .bind(&id)
                    .bind(&r.id)
                    .execute(&mut *tx)
                    .await?;
            }
            ids.push(id);
        }
        tx.commit().await?;
        Ok(ids)
    }

    pub async fn get(&self, id: &str) -> Result<Option<JobRow>, StoreError> {
        let row = sqlx::query(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1"))
            .bind(id)
            .fetch_optional(self.db.pool())
            .await?;
        row.as_ref().map(job_from_row).transpose()
    }

    /// Newest first; `states` empty: every state; `group` non-empty: only that group's jobs.
    pub async fn list(
        &self,
        states: &[JobState],
        group: &str,
        limit: u32,
    ) -> Result<Vec<JobRow>, StoreError> {
        // The states are this enum's constants, so writing them into the SQL is safe.
        let mut filter = vec!["($2 = '' OR group_id = $2)".to_string()];
        if !states.is_empty() {
            let list: Vec<String> = states.iter().map(|s| format!("'{}'", s.as_str())).collect();
            filter.push(format!("state IN ({})", list.join(", ")));
        }
        let rows = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE {} ORDER BY created_at DESC, id DESC LIMIT $1",
            filter.join(" AND ")
        ))
        .bind(i64::from(limit))
        .bind(group)
        .fetch_all(self.db.pool())
        .await?;
        rows.iter().map(job_from_row).collect()
    }

    /// How many jobs are in each state (states with none are missing).
    pub async fn count_by_state(&self) -> Result<BTreeMap<JobState, u64>, StoreError> {
        let rows = sqlx::query("SELECT state, COUNT(*) FROM jobs GROUP BY state")
            .fetch_all(self.db.pool())
            .await?;
        let mut out = BTreeMap::new();
        for r in &rows {
            let state: String = r.try_get(0)?;
            let state = JobState::parse(&state).ok_or_else(|| StoreError::Corrupt {
                id: "jobs".into(),
                msg: format!("state '{state}'"),
            })?;
            out.insert(state, r.try_get::<i64, _>(1)? as u64);
        }
        Ok(out)
    }

    pub async fn tasks(&self, job_id: &str) -> Result<Vec<TaskRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT idx, workload_key, weight, trials, exhausted, last_error, dropped, rounds, \
             search_s, model_s, measure_s, build_s, run_s, alternative FROM tasks \
             WHERE job_id = $1 ORDER BY idx",
        )
        .bind(job_id)
        .fetch_all(self.db.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(TaskRow {
                    idx: r.try_get::<i64, _>(0)? as u32,
                    workload_key: r.try_get(1)?,
                    weight: r.try_get(2)?,
                    trials: r.try_get::<i64, _>(3)? as u32,
                    exhausted: r.try_get::<i64, _>(4)? != 0,
                    last_error: r.try_get(5)?,
                    dropped: r.try_get::<i64, _>(6)? as u32,
                    times: TaskTimes {
                        rounds: r.try_get::<i64, _>(7)? as u32,
                        search_s: r.try_get(8)?,
                        model_s: r.try_get(9)?,
                        measure_s: r.try_get(10)?,
                        build_s: r.try_get(11)?,
                        run_s: r.try_get(12)?,
                    },
                    alternative: r.try_get::<i64, _>(13)? != 0,
                })
            })
            .collect()
    }

    /// Per task: what the job measured, from its `job_records` rows.
    pub async fn task_stats(&self, job_id: &str) -> Result<BTreeMap<u32, TaskStats>, StoreError> {
        let rows = sqlx::query(
            "SELECT jr.task_idx, r.error_code, COUNT(*), COUNT(CASE WHEN jr.is_new = 1 THEN 1 END), \
             COUNT(CASE WHEN r.noisy = 1 THEN 1 END) \
             FROM job_records jr JOIN records r ON r.id = jr.record_id WHERE jr.job_id = $1 \
             GROUP BY jr.task_idx, r.error_code",
        )
        .bind(job_id)
        .fetch_all(self.db.pool())
        .await?;
        let mut out: BTreeMap<u32, TaskStats> = BTreeMap::new();
        for r in &rows {
            let idx = r.try_get::<i64, _>(0)? as u32;
            let code = r.try_get::<i64, _>(1)? as i32;
            let n = r.try_get::<i64, _>(2)? as u32;
            let new = r.try_get::<i64, _>(3)? as u32;
            let noisy = r.try_get::<i64, _>(4)? as u32;
            let s = out.entry(idx).or_default();
            s.trials_done += n;
            s.new_records += new;
            if code == 0 {
                s.ok += n;
                s.noisy += noisy;
            } else {
                *s.errors.entry(code).or_default() += n;
            }
        }
        Ok(out)
    }

    /// Every candidate job `job_id` measured: (task index, when stored, its time unless it
    /// failed, noisy), in the order stored.
    pub async fn trials(
        &self,
        job_id: &str,
    ) -> Result<Vec<(u32, i64, Option<f64>, bool)>, StoreError> {
        let rows = sqlx::query(
            "SELECT jr.task_idx, jr.created_at, r.mean_cost, r.noisy \
             FROM job_records jr JOIN records r ON r.id = jr.record_id WHERE jr.job_id = $1 \
             ORDER BY jr.created_at, r.created_at, r.id",
        )
        .bind(job_id)
        .fetch_all(self.db.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get::<i64, _>(0)? as u32,
                    r.try_get::<i64, _>(1)?,
                    r.try_get::<Option<f64>, _>(2)?,
                    r.try_get::<i64, _>(3)? == 1,
                ))
            })
            .collect()
    }

    /// Cancels a queued or running job; returns it as it is now (None: no such job).
    pub async fn cancel(&self, id: &str) -> Result<Option<JobRow>, StoreError> {
        sqlx::query(
            "UPDATE jobs SET state = 'cancelled', updated_at = $1 WHERE id = $2 AND state IN ('queued', 'running')",
        )
        .bind(now_ms())
        .bind(id)
        .execute(self.db.pool())
        .await?;
        self.get(id).await
    }

    /// Claims the oldest job for `target_key` that is queued, or running under an expired
    /// lease (its server died), for `lease_ms`; `only`: that job and no other.
    pub async fn claim_next(
        &self,
        instance: &str,
        target_key: &str,
        lease_ms: u64,
        only: Option<&str>,
    ) -> Result<Option<JobRow>, StoreError> {
        let lock = match self.db.backend() {
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            Backend::Sqlite => "",
        };
        let now = now_ms();
        let id: Option<String> = sqlx::query_scalar(&format!(
            "UPDATE jobs SET state = 'running', claimed_by = $1, lease_until = $2, claims = claims + 1, updated_at = $3 \
             WHERE id = (SELECT id FROM jobs WHERE state IN ('queued', 'running') AND target_key = $4 \
             AND (lease_until IS NULL OR lease_until < $3) AND ($5 = '' OR id = $5) \
             ORDER BY priority DESC, created_at, id LIMIT 1{lock}) RETURNING id"
        ))
        .bind(instance)
        .bind(now + lease_ms as i64)
        .bind(now)
        .bind(target_key)
        .bind(only.unwrap_or(""))
        // Run to its end, not `fetch_optional`: SQLite commits a statement with RETURNING when
        // it is stepped to its end or reset, and sqlx's SQLite driver, stopping after the
        // first row, resets it and drops the reset's error. A claim whose commit failed (the
        // file unwritable) came back claimed though nothing was saved.
        .fetch_all(self.db.pool())
        .await?
        .pop();
        match id {
            Some(id) => self.get(&id).await,
            None => Ok(None),
        }
    }

    /// A running job of `target_key` other than `except`, if any (why a queued one waits).
    pub async fn running_on(
        &self,
        target_key: &str,
        except: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM jobs WHERE state = 'running' AND target_key = $1 AND id <> $2 \
             ORDER BY updated_at DESC, id LIMIT 1",
        )
        .bind(target_key)
        .bind(except)
        .fetch_optional(self.db.pool())
        .await?)
    }

    /// The running jobs of `target_key` other than `except`, as (id, priority), highest
    /// priority first, then oldest: who shares a pool, or fills it.
    pub async fn running_jobs(
        &self,
        target_key: &str,
        except: &str,
    ) -> Result<Vec<(String, i32)>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, priority FROM jobs WHERE state = 'running' AND target_key = $1 AND id <> $2 \
             ORDER BY priority DESC, created_at, id",
        )
        .bind(target_key)
        .bind(except)
        .fetch_all(self.db.pool())
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get::<i64, _>(1)? as i32)))
            .collect()
    }

    /// Extends the lease; says whether it is still held and whether the job was cancelled.
    pub async fn renew(
        &self,
        id: &str,
        holder: Holder<'_>,
        lease_ms: u64,
    ) -> Result<Lease, StoreError> {
        let now = now_ms();
        let state: Option<String> = sqlx::query_scalar(
            "UPDATE jobs SET lease_until = $1 WHERE id = $2 AND claimed_by = $3 AND claims = $4 \
             AND state IN ('running', 'cancelled') AND lease_until IS NOT NULL RETURNING state",
        )
        .bind(now + lease_ms as i64)
        .bind(id)
        .bind(holder.instance)
        .bind(i64::from(holder.claim))
        // Run to its end (see `claim_next`): a renewal whose commit failed is an error, not a
        // lease held.
        .fetch_all(self.db.pool())
        .await?
        .pop();
        Ok(match state.as_deref() {
            Some("running") => Lease::Held,
            Some(_) => Lease::Cancelled,
            None => Lease::Lost,
        })
    }

    /// Ends a claim: `state` done or failed (a cancelled job stays cancelled), lease cleared.
    /// `None` leaves the job running and claimable at once (a server shutting down).
    pub async fn release(
        &self,
        id: &str,
        holder: Holder<'_>,
        end: Option<(JobState, &str)>,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let mut tx = self.db.pool().begin().await?;
        if let Some((state, error)) = end {
            sqlx::query(
                "UPDATE jobs SET state = $1, error = $2, updated_at = $3 \
                 WHERE id = $4 AND claimed_by = $5 AND claims = $6 AND state = 'running' \
                 AND lease_until IS NOT NULL",
            )
            .bind(state.as_str())
            .bind(error)
            .bind(now)
            .bind(id)
            .bind(holder.instance)
            .bind(i64::from(holder.claim))
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(
            "UPDATE jobs SET lease_until = NULL, updated_at = $1 WHERE id = $2 AND claimed_by = $3 \
             AND claims = $4",
        )
        .bind(now)
        .bind(id)
        .bind(holder.instance)
        .bind(i64::from(holder.claim))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Stores one measured batch of a task in one transaction, after checking that this server
    /// still holds the job (and extending its lease). `None`: the lease was lost, nothing stored.
    pub async fn commit_batch(
        &self,
        job_id: &str,
        holder: Holder<'_>,
        lease_ms: u64,
        task_idx: u32,
        records: &[NewRecord],
    ) -> Result<Option<Vec<CommitOutcome>>, StoreError> {
        let now = now_ms();
        let mut tx = self.db.pool().begin().await?;
        // First statement a write: on SQLite it takes the write lock before any read.
        let held = sqlx::query(
            "UPDATE jobs SET lease_until = $1, updated_at = $2 WHERE id = $3 AND claimed_by = $4 \
             AND claims = $5 AND state IN ('running', 'cancelled') AND lease_until IS NOT NULL",
        )
        .bind(now + lease_ms as i64)
        .bind(now)
        .bind(job_id)
        .bind(holder.instance)
        .bind(i64::from(holder.claim))
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if held == 0 {
            tx.rollback().await?;
            return Ok(None);
        }
        let mut outcomes = Vec::with_capacity(records.len());
        let mut counts = CountDeltas::default();
        for rec in records {
            let (record_id, outcome) = commit_on(&mut tx, rec, &mut counts).await?;
            sqlx::query(
                "INSERT INTO job_records (job_id, task_idx, record_id, is_new, created_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            )
            .bind(job_id)
            .bind(i64::from(task_idx))
            .bind(&record_id)
            .bind(i32::from(outcome != CommitOutcome::Duplicate))
            .bind(now)
            .execute(&mut *tx)
            .await?;
            outcomes.push(outcome);
        }
        counts.write(&mut tx).await?;
        tx.commit().await?;
        self.db.bests_stored(
            records
                .iter()
                .zip(&outcomes)
                .filter(|(_, o)| **o == CommitOutcome::Inserted { is_new_best: true })
                .map(|(r, _)| (r.target_key.as_str(), r.workload_key.as_str())),
        );
        Ok(Some(outcomes))
    }

    /// Updates a task's search status after a round, adding the round's `times` to the task's
    /// (`TaskTimes::default()`: a round that stored nothing).
    pub async fn update_task(
        &self,
        job_id: &str,
        idx: u32,
        exhausted: bool,
        last_error: Option<&str>,
        dropped: u32,
        times: &TaskTimes,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE tasks SET exhausted = $1, last_error = COALESCE($2, last_error), dropped = dropped + $3, \
             rounds = rounds + $4, search_s = search_s + $5, model_s = model_s + $6, \
             measure_s = measure_s + $7, build_s = build_s + $8, run_s = run_s + $9 \
             WHERE job_id = $10 AND idx = $11",
        )
        .bind(i32::from(exhausted))
        .bind(last_error)
        .bind(i64::from(dropped))
        .bind(i64::from(times.rounds))
        .bind(times.search_s)
        .bind(times.model_s)
        .bind(times.measure_s)
        .bind(times.build_s)
        .bind(times.run_s)
        .bind(job_id)
        .bind(i64::from(idx))
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    /// Whether any job, in any state, has a task for this (workload, target).
    pub async fn has_task_for(
        &self,
        workload_key: &str,
        target_key: &str,
    ) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "SELECT 1 FROM tasks t JOIN jobs j ON j.id = t.job_id \
             WHERE t.workload_key = $1 AND j.target_key = $2 LIMIT 1",
        )
        .bind(workload_key)
        .bind(target_key)
        .fetch_optional(self.db.pool())
        .await?;
        Ok(row.is_some())
    }

    /// Notes which cost model the job started from (shown in `Job.model`).
    pub async fn set_model_start(&self, job_id: &str, model_start: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE jobs SET model_start = $1 WHERE id = $2")
            .bind(model_start)
            .bind(job_id)
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    /// The targets that have a saved cost model of `kind`, with the records it was trained on,
    /// most trained first (the order that breaks ties between equally near targets).
    pub async fn cost_model_targets(&self, kind: &str) -> Result<Vec<(String, u64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT target_key, trained_on FROM cost_models WHERE kind = $1 \
             ORDER BY trained_on DESC, target_key",
        )
        .bind(kind)
        .fetch_all(self.db.pool())
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get::<i64, _>(1)? as u64)))
            .collect()
    }

    /// Saves a cost model for a target (its own serialisation), replacing the previous one.
    pub async fn save_cost_model(
        &self,
        target_key: &str,
        kind: &str,
        model: &[u8],
        trained_on: u64,
    ) -> Result<(), StoreError> {
        let hex: String = model.iter().map(|b| format!("{b:02x}")).collect();
        sqlx::query(
            "INSERT INTO cost_models (target_key, kind, model_hex, trained_on, updated_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (target_key) DO UPDATE SET kind = excluded.kind, model_hex = excluded.model_hex, \
             trained_on = excluded.trained_on, updated_at = excluded.updated_at",
        )
        .bind(target_key)
        .bind(kind)
        .bind(hex)
        .bind(trained_on as i64)
        .bind(now_ms())
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    /// The kind and save time of a target's cost model, without its bytes: whether a model
    /// loaded earlier is still the saved one.
    pub async fn cost_model_stamp(
        &self,
        target_key: &str,
    ) -> Result<Option<(String, i64)>, StoreError> {
        let row = sqlx::query("SELECT kind, updated_at FROM cost_models WHERE target_key = $1")
            .bind(target_key)
            .fetch_optional(self.db.pool())
            .await?;
        row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).transpose()
    }

    /// The saved cost model of a target: (kind, bytes, records trained on).
    pub async fn cost_model(
        &self,
        target_key: &str,
    ) -> Result<Option<(String, Vec<u8>, u64)>, StoreError> {
        let row = sqlx::query(
            "SELECT kind, model_hex, trained_on FROM cost_models WHERE target_key = $1",
        )
        .bind(target_key)
        .fetch_optional(self.db.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        let hex: String = row.try_get(1)?;
        let bytes = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|e| StoreError::Corrupt {
                id: format!("cost model of {target_key}"),
                msg: e.to_string(),
            })?;
        Ok(Some((
            row.try_get(0)?,
            bytes,
            row.try_get::<i64, _>(2)? as u64,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::RecordStore;

    #[tokio::test]
    async fn a_pool_claims_by_priority_and_lists_its_running_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let db = SqlStore::open(dir.path().join("r.db").to_str().unwrap())
            .await
            .unwrap();
        db.put_target("t", "{}").await.unwrap();
        db.put_target("u", "{}").await.unwrap();
        let jobs = JobStore::new(db);
        let new = |priority: i32, target: &str| NewJob {
            name: format!("p{priority}"),
            target_key: target.into(),
            seed: 1,
            batch_size: 2,
            scheduler: "gradient".into(),
            measure: MeasureOptions::default(),
            owner: "o".into(),
            priority,
            group: String::new(),
            cost_model: CostModelChoice::Learned,
            range: None,
            tasks: vec![],
        };
        let ids = jobs
            .create_all(&[new(0, "t"), new(5, "t"), new(9, "u"), new(3, "t")])
            .await
            .unwrap();
        for want in [&ids[1], &ids[3]] {
            let got = jobs.claim_next("s", "t", 60_000, None).await.unwrap();
            assert_eq!(
                got.map(|j| j.id).as_ref(),
                Some(want),
                "highest priority first"
            );
        }
        assert_eq!(
            jobs.running_jobs("t", "").await.unwrap(),
            [(ids[1].clone(), 5), (ids[3].clone(), 3)]
        );
        assert_eq!(
            jobs.running_jobs("t", &ids[1]).await.unwrap(),
            [(ids[3].clone(), 3)]
        );
        assert_eq!(jobs.running_jobs("u", "").await.unwrap(), [], "queued only");
    }

    /// A server whose lease ran out (a database outage) and that claimed its own job again
    /// runs two drivers of it for a while: the older claim's renew, store and release must
    /// touch nothing, or trials are stored twice and the new claim released.
    #[tokio::test]
    async fn a_stale_claim_of_the_same_server_is_fenced_off() {
        let dir = tempfile::tempdir().unwrap();
        let db = SqlStore::open(dir.path().join("f.db").to_str().unwrap())
            .await
            .unwrap();
        db.put_target("t", "{}").await.unwrap();
        let jobs = JobStore::new(db);
        let ids = jobs
            .create_all(&[NewJob {
                name: "j".into(),
                target_key: "t".into(),
                seed: 1,
                batch_size: 2,
                scheduler: "gradient".into(),
                measure: MeasureOptions::default(),
                owner: "o".into(),
                priority: 0,
                group: String::new(),
                cost_model: CostModelChoice::Learned,
                range: None,
                tasks: vec![],
            }])
            .await
            .unwrap();
        let id = ids[0].as_str();
        let first = jobs.claim_next("s", "t", 60_000, None).await.unwrap();
        let first = first.expect("the queued job is claimed").claims;
        // The lease runs out.
        sqlx::query("UPDATE jobs SET lease_until = 0")
            .execute(jobs.db.pool())
            .await
            .unwrap();
        let second = jobs.claim_next("s", "t", 60_000, None).await.unwrap();
        let second = second.expect("a lapsed job is claimed again").claims;
        assert_eq!(second, first + 1);
        let stale = Holder {
            instance: "s",
            claim: first,
        };
        let current = Holder {
            instance: "s",
            claim: second,
        };
        assert_eq!(jobs.renew(id, stale, 60_000).await.unwrap(), Lease::Lost);
        assert_eq!(
            jobs.commit_batch(id, stale, 60_000, 0, &[]).await.unwrap(),
            None,
            "a stale driver stores nothing"
        );
        jobs.release(id, stale, Some((JobState::Done, "")))
            .await
            .unwrap();
        let j = jobs.get(id).await.unwrap().unwrap();
        assert_eq!(
            j.state,
            JobState::Running,
            "the stale release ended nothing"
        );
        assert!(j.lease_until.is_some(), "nor released the current claim");
        assert_eq!(jobs.renew(id, current, 60_000).await.unwrap(), Lease::Held);
        assert!(
            jobs.commit_batch(id, current, 60_000, 0, &[])
                .await
                .unwrap()
                .is_some()
        );
        jobs.release(id, current, Some((JobState::Done, "")))
            .await
            .unwrap();
        assert_eq!(jobs.get(id).await.unwrap().unwrap().state, JobState::Done);
    }

    #[tokio::test]
    async fn a_saved_cost_model_reads_back_and_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let db = SqlStore::open(dir.path().join("m.db").to_str().unwrap())
            .await
            .unwrap();
        db.put_target("t", "{}").await.unwrap();
        let jobs = JobStore::new(db);
        assert_eq!(jobs.cost_model("t").await.unwrap(), None);
        let bytes: Vec<u8> = (0..=255).collect();
        jobs.save_cost_model("t", "xgb", &bytes, 10).await.unwrap();
        assert_eq!(
            jobs.cost_model("t").await.unwrap(),
            Some(("xgb".to_string(), bytes, 10))
        );
        jobs.save_cost_model("t", "xgb", &[1, 2], 20).await.unwrap();
        assert_eq!(
            jobs.cost_model("t").await.unwrap(),
            Some(("xgb".to_string(), vec![1, 2], 20))
        );
    }

    /// A task's round timings add up in the tasks table, round after round (an exhausted
    /// round adds none), and a job's cost model reads back as submitted; a row from before
    /// migration 12 (its default '') is the learned model.
    #[tokio::test]
    async fn task_times_add_up_and_the_cost_model_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let db = SqlStore::open(dir.path().join("t.db").to_str().unwrap())
            .await
            .unwrap();
        db.put_target("t", "{}").await.unwrap();
        db.put_workload(
            "w",
            "matmul(4,4,4)",
            "{}",
            128,
            &tunehub_engine::task::WorkloadOptions::default(),
        )
        .await
        .unwrap();
        let jobs = JobStore::new(db);
        let new = |cost_model| NewJob {
            name: "j".into(),
            target_key: "t".into(),
            seed: 1,
            batch_size: 2,
            scheduler: "gradient".into(),
            measure: MeasureOptions::default(),
            owner: "o".into(),
            priority: 0,
            group: String::new(),
            cost_model,
            range: None,
            tasks: vec![NewTask::new("w", 1.0, 8)],
        };
        let ids = jobs
            .create_all(&[new(CostModelChoice::Random), new(CostModelChoice::Learned)])
            .await
            .unwrap();
        let random = jobs.get(&ids[0]).await.unwrap().unwrap();
        assert_eq!(random.cost_model, CostModelChoice::Random);
        let learned = jobs.get(&ids[1]).await.unwrap().unwrap();
        assert_eq!(learned.cost_model, CostModelChoice::Learned);
        let fresh = jobs.tasks(&ids[0]).await.unwrap();
        assert_eq!(
            fresh[0].times,
            TaskTimes::default(),
            "a new task has no time"
        );

        let report = |k: f64| RoundReport {
            search_s: 1.5 * k,
            model_s: 0.25 * k,
            measure_s: 2.0 * k,
            build_s: 3.0 * k,
            run_s: 0.5 * k,
            ..RoundReport::default()
        };
        jobs.update_task(
            &ids[0],
            0,
            false,
            None,
            0,
            &TaskTimes::of_round(&report(1.0)),
        )
        .await
        .unwrap();
        jobs.update_task(
            &ids[0],
            0,
            false,
            Some("e"),
            1,
            &TaskTimes::of_round(&report(2.0)),
        )
        .await
        .unwrap();
        jobs.update_task(&ids[0], 0, true, None, 0, &TaskTimes::default())
            .await
            .unwrap();
        let t = &jobs.tasks(&ids[0]).await.unwrap()[0];
        assert_eq!(
            t.times,
            TaskTimes {
                rounds: 2,
                search_s: 4.5,
                model_s: 0.75,
                measure_s: 6.0,
                build_s: 9.0,
                run_s: 1.5,
            }
        );
        assert!(t.exhausted);
        assert_eq!((t.last_error.as_str(), t.dropped), ("e", 1));
        assert_eq!(
            jobs.tasks(&ids[1]).await.unwrap()[0].times,
            TaskTimes::default(),
            "the other job's task is untouched"
        );

        sqlx::query("UPDATE jobs SET cost_model = '' WHERE id = $1")
            .bind(&ids[1])
            .execute(jobs.db.pool())
            .await
            .unwrap();
        let old = jobs.get(&ids[1]).await.unwrap().unwrap();
        assert_eq!(old.cost_model, CostModelChoice::Learned);
    }
}
