-- tunehub schema, version 6: a workload's structure, for reuse across shapes (answers and warm
-- starts from the nearest tuned workloads of the same operator).
--
--   structure_key  the engine's `transfer::structure_key`: a hash of the DAG's canonical form
--                  with its extents taken out, and of the layout-free inputs; '' until computed
--   extents_json   the DAG's extents in canonical order (`transfer::extents`), a JSON array:
--                  the distance between two workloads of one structure is computed from them
--
-- Workloads stored before this version get both when the server opens the database
-- (`records::structure`): computing them needs the engine, not SQL.
ALTER TABLE workloads ADD COLUMN structure_key TEXT NOT NULL DEFAULT '';
ALTER TABLE workloads ADD COLUMN extents_json TEXT NOT NULL DEFAULT '[]';
CREATE INDEX workloads_by_structure ON workloads (structure_key);
