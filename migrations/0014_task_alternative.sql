-- tunehub schema, version 14: a job's task that is another form of a computation the network
-- runs (a convolution's Winograd tasks beside its direct one, in a model's job left to choose
-- its layout): tuned as any task, with its weight, but left out of the job's estimate.
ALTER TABLE tasks ADD COLUMN alternative INTEGER NOT NULL DEFAULT 0 CHECK (alternative IN (0, 1));
