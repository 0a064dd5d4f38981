-- tunehub schema, version 1: workloads, targets, measured records, and the best record per
-- (workload, target).
--
-- Portable: the same file runs on SQLite (>= 3.35, as bundled by sqlx) and PostgreSQL (>= 13).
-- Only TEXT, INTEGER, BIGINT and DOUBLE PRECISION columns; booleans are INTEGER 0/1 with a CHECK
-- (SQLite has no BOOLEAN type, and PostgreSQL will not compare BOOLEAN with 0/1); upserts use
-- `ON CONFLICT`, which both engines accept.
--
-- Ids: no column is assigned by the database (AUTOINCREMENT and BIGSERIAL do not port). Every
-- key is TEXT computed in Rust from the content it names:
--   workloads.key   the engine's workload key (a hash of the DAG's canonical form)
--   targets.key     the engine's target key
--   records.id      hex(sha256(workload_key NUL target_key NUL schedule_hash))[..32]
-- A record id is therefore a content address: the same candidate reported twice, by a retried
-- worker or from another database being merged in, gets the same id and is stored once.
--
-- Times: created_at is Unix time in milliseconds, set by the writer.

CREATE TABLE workloads (
    key         TEXT PRIMARY KEY,
    -- How a person wrote it: an operator spec such as `matmul(512,512,512)`, or the text form.
    description TEXT,
    -- The engine's ComputeDag as JSON: enough to rebuild the task without the original spec.
    dag_json    TEXT NOT NULL,
    -- Floating-point operations of one run (a multiply-add counts 2): GFLOP/s = flops / cost.
    flops       BIGINT NOT NULL CHECK (flops >= 0),
    created_at  BIGINT NOT NULL
);

CREATE TABLE targets (
    key         TEXT PRIMARY KEY,
    -- The engine's Target as JSON (cores, compiler, flags, ...): what the key stands for.
    target_json TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

-- One measured candidate schedule. Failed candidates are records too (with their error), so that
-- a resumed search does not try them again and the failure counts stay visible.
CREATE TABLE records (
    id            TEXT PRIMARY KEY,
    workload_key  TEXT NOT NULL REFERENCES workloads (key),
    target_key    TEXT NOT NULL REFERENCES targets (key),
    -- hex(sha256(steps_json))[..32], steps_json being the canonical (compact) JSON of the steps.
    schedule_hash TEXT NOT NULL,
    steps_json    TEXT NOT NULL,
    -- Seconds per kernel run, one per timed repeat, as a JSON array; `[]` on error.
    costs_json    TEXT NOT NULL,
    -- Mean of the costs; NULL when the candidate failed (or produced no timing).
    mean_cost     DOUBLE PRECISION,
    -- The engine's ErrorCode::code(): 0 = ok.
    error_code    INTEGER NOT NULL,
    error_msg     TEXT NOT NULL,
    -- 1 when the machine was slowed while timing (the time is not to be trusted).
    noisy         INTEGER NOT NULL CHECK (noisy IN (0, 1)),
    build_s       DOUBLE PRECISION NOT NULL,
    run_s         DOUBLE PRECISION NOT NULL,
    -- Who measured it: `local`, or a worker's name.
    worker        TEXT,
    created_at    BIGINT NOT NULL,
    -- At most one record per candidate: a repeated report is an `ON CONFLICT DO NOTHING`.
    UNIQUE (workload_key, target_key, schedule_hash),
    -- A table constraint: PostgreSQL wants column constraints to name their own column only.
    CHECK (mean_cost IS NULL OR (error_code = 0 AND mean_cost >= 0))
);

-- top_k and best-by-scan: the cheapest records of one (workload, target) first.
CREATE INDEX records_by_cost ON records (workload_key, target_key, mean_cost);

-- The best record per (workload, target), kept current by the writer in the transaction that
-- inserts a record, so that a best-schedule query is one primary-key lookup. Only records with
-- error_code = 0 and noisy = 0 qualify; on equal cost the earlier record stays.
CREATE TABLE best_records (
    workload_key TEXT NOT NULL,
    target_key   TEXT NOT NULL,
    record_id    TEXT NOT NULL REFERENCES records (id),
    mean_cost    DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (workload_key, target_key)
);
