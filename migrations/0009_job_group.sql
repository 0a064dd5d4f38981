-- tunehub schema, version 9: a job's group (SubmitRequest.targets): one job per target, all of
-- one submission sharing a group id; '' for a job submitted alone.
ALTER TABLE jobs ADD COLUMN group_id TEXT NOT NULL DEFAULT '';
CREATE INDEX jobs_group ON jobs (group_id);
