-- tunehub schema, version 12: where a task's tuning time went, and which cost model a job
-- ranks with.
--
-- Per task, summed over the rounds the job stored for it (the engine's RoundReport of each
-- round, added in the statement that updates the task after its batch is stored; a batch cut
-- short and not stored adds nothing; a resumed job keeps adding):
--   rounds     rounds stored
--   search_s   wall seconds of the search (sketches, evolution, the cost model)
--   model_s    of them, the cost model's (predict and update)
--   measure_s  wall seconds of the measurement (build and run, a new best's second run)
--   build_s    compile seconds summed per candidate (builds overlap: more than wall time)
--   run_s      run seconds summed per candidate
-- Tasks from before this version start from 0.
ALTER TABLE tasks ADD COLUMN rounds INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN search_s DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN model_s DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN measure_s DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN build_s DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN run_s DOUBLE PRECISION NOT NULL DEFAULT 0;
-- The cost model the job's search ranks candidates with (SubmitRequest.cost_model): 'xgb' (the
-- learned model, started from the target's saved one) or 'random' (none: uniform random
-- scores, Ansor's RandomModel, a baseline). Jobs from before this version have '' (the
-- learned model).
ALTER TABLE jobs ADD COLUMN cost_model TEXT NOT NULL DEFAULT '';
