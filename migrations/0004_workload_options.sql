-- tunehub schema, version 4: a workload's options as typed columns beside its DAG, instead of
-- text inside its description. Portable as 0001 is (see its header).
--
-- Each option changes the kernel that is measured, so each is part of the workload key (the
-- key is computed in Rust from the DAG and the options); a later option gets its own column
-- here, beside layout_free_json.
--
-- Workloads stored before this version carried their layout-free inputs only in the
-- description (`matmul(512,512,512,layout_free=B)`). Reading that text needs string functions
-- that SQLite and PostgreSQL do not share, so the server moves it into the column when it
-- opens the database (`records::legacy`), checking that the workload's key comes out the same.

-- Inputs, by tensor name, whose layout the kernel may choose (packed weights), as a JSON array
-- of names in input order: `["B"]`; `[]` for none.
ALTER TABLE workloads ADD COLUMN layout_free_json TEXT NOT NULL DEFAULT '[]';
