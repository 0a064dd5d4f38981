-- tunehub schema, version 5: who submitted a job, by the name of its API token (never the
-- token itself), so that a client token cancels only its own jobs and listings show the owner.
-- Jobs from before this version, and those of a server without tokens, have 'anonymous'.
ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT 'anonymous';
