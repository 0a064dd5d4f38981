-- tunehub schema, version 10: shape ranges (dynamic shapes). A range is one library operator
-- with one or two size parameters given as lo..hi (`matmul(m=1..512,n=768,k=768)`), tuned on
-- one target through a few representative shapes (the tasks of its job); any other shape of it
-- is answered from the representative serving it (the engine's `transfer::range`).
--
--   id                    `rg-` and a hash of (canonical spec, layout-free inputs, target key),
--                         computed in Rust: the same range submitted or imported twice is one
--                         row
--   spec                  the canonical spec: every parameter named, defaults written out
--   layout_free_json      the workload options of every shape of it, as `workloads` has them
--   structure_key         its shapes' structure (`workloads.structure_key`): which ranges a
--                         workload with no record may belong to
--   representatives_json  [{"values": [v, ...], "workload_key": K}, ...]: the shapes tuned,
--                         one value per ranged extent; their records are the dispatch table's
CREATE TABLE shape_ranges (
    id                   TEXT PRIMARY KEY,
    spec                 TEXT NOT NULL,
    layout_free_json     TEXT NOT NULL,
    target_key           TEXT NOT NULL REFERENCES targets (key),
    structure_key        TEXT NOT NULL,
    representatives_json TEXT NOT NULL,
    created_at           BIGINT NOT NULL
);
CREATE INDEX shape_ranges_by_structure ON shape_ranges (structure_key, target_key);

-- The jobs that tuned a range (Job.range).
CREATE TABLE shape_range_jobs (
    job_id   TEXT PRIMARY KEY REFERENCES jobs (id),
    range_id TEXT NOT NULL REFERENCES shape_ranges (id)
);
