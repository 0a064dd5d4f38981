-- tunehub schema, version 7: a job's priority (SubmitRequest.priority, -10..10, higher first).
-- A server claims the queued job of a target pool with the highest priority, then the oldest;
-- jobs from before this version have 0, the default.
ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_claim_order ON jobs (target_key, state, priority DESC, created_at);
