-- tunehub schema, version 2: tuning jobs, their tasks, which records each job measured, and saved
-- cost models. Portable as 0001 is (see its header): TEXT ids computed in Rust, INTEGER 0/1
-- flags, BIGINT Unix milliseconds.

-- A job: one or more tasks tuned on one target under one budget each.
CREATE TABLE jobs (
    -- `j-` and 16 random hex digits, chosen by the server that accepts the job.
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    -- queued -> running -> done | failed | cancelled. A running job whose lease ran out is
    -- claimable again (its server died): that is how jobs survive a restart.
    state        TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    target_key   TEXT NOT NULL REFERENCES targets (key),
    seed         BIGINT NOT NULL,
    batch_size   INTEGER NOT NULL CHECK (batch_size > 0),
    -- round_robin | gradient
    scheduler    TEXT NOT NULL,
    -- The engine's MeasureOptions as JSON.
    measure_json TEXT NOT NULL,
    error        TEXT NOT NULL,
    -- The server instance holding the job, and until when (Unix ms). A server renews its lease
    -- while it runs the job and checks it in every transaction that stores the job's results,
    -- so a job is never run by two servers at once.
    claimed_by   TEXT,
    lease_until  BIGINT,
    -- How many times a server claimed the job (1 unless a restart took it over).
    claims       INTEGER NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);

CREATE INDEX jobs_by_state ON jobs (state, created_at);

CREATE TABLE tasks (
    job_id       TEXT NOT NULL REFERENCES jobs (id),
    idx          INTEGER NOT NULL,
    workload_key TEXT NOT NULL REFERENCES workloads (key),
    weight       DOUBLE PRECISION NOT NULL,
    -- The budget: candidates to measure.
    trials       INTEGER NOT NULL CHECK (trials > 0),
    -- 1 when the search found no new candidate (a small space, exhausted).
    exhausted    INTEGER NOT NULL CHECK (exhausted IN (0, 1)),
    -- The latest failure, `code: message`.
    last_error   TEXT NOT NULL,
    -- Results of a cancelled batch dropped because the interrupt may have caused them.
    dropped      INTEGER NOT NULL,
    PRIMARY KEY (job_id, idx)
);

-- Which records a job measured: one row per measured candidate, written in the transaction that
-- stores the record, so a task's progress is exactly its rows here (nothing counted twice or
-- lost across a restart). is_new = 0 when the record already existed (measured meanwhile by
-- another job).
CREATE TABLE job_records (
    job_id     TEXT NOT NULL,
    task_idx   INTEGER NOT NULL,
    record_id  TEXT NOT NULL REFERENCES records (id),
    is_new     INTEGER NOT NULL CHECK (is_new IN (0, 1)),
    created_at BIGINT NOT NULL,
    PRIMARY KEY (job_id, record_id),
    FOREIGN KEY (job_id, task_idx) REFERENCES tasks (job_id, idx)
);

CREATE INDEX job_records_by_task ON job_records (job_id, task_idx);

-- A saved cost model per target: the model's own serialisation, hex-encoded in TEXT (a binary
-- column type that both SQLite and PostgreSQL accept does not exist).
CREATE TABLE cost_models (
    target_key TEXT PRIMARY KEY REFERENCES targets (key),
    kind       TEXT NOT NULL,
    model_hex  TEXT NOT NULL,
    -- Records the model was trained on (to know when it is stale).
    trained_on BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
