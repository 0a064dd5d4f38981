-- tunehub schema, version 8: the cost model a job started from, as the driver chose it at its
-- latest claim: "saved" (its target's own), "transferred from <target key>" (a target without
-- one starts from the nearest target's), or "cold". Empty until a server claims the job.
ALTER TABLE jobs ADD COLUMN model_start TEXT NOT NULL DEFAULT '';
