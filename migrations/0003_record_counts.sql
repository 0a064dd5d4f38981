-- tunehub schema, version 3: record counts per (workload, target), kept current by the writer in
-- the transaction that inserts a record (as best_records is), so that the counts a best-schedule
-- query answers with are one primary-key lookup, not a scan of the pair's records (a scan of
-- thousands of rows per pair made every cache refresh cost milliseconds at a million records).

CREATE TABLE record_counts (
    workload_key TEXT NOT NULL,
    target_key   TEXT NOT NULL,
    total        BIGINT NOT NULL,
    -- Records with error_code = 0 (noisy ones included).
    ok           BIGINT NOT NULL,
    PRIMARY KEY (workload_key, target_key)
);

INSERT INTO record_counts (workload_key, target_key, total, ok)
SELECT workload_key, target_key, COUNT(*), COUNT(CASE WHEN error_code = 0 THEN 1 END)
FROM records
GROUP BY workload_key, target_key;
