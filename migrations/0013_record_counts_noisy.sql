-- tunehub schema, version 13: the noisy successes of each (workload, target), apart from the
-- others. A record timed while the machine was slowed is kept but never a best; counted among
-- `ok` alone, a pair of 24 noisy records listed "24 ok" and then had no best. Kept current by
-- the writer with the other counts, in the transaction that inserts a record.
ALTER TABLE record_counts ADD COLUMN noisy BIGINT NOT NULL DEFAULT 0;

UPDATE record_counts SET noisy = (
    SELECT COUNT(*) FROM records r
    WHERE r.workload_key = record_counts.workload_key
      AND r.target_key = record_counts.target_key
      AND r.error_code = 0 AND r.noisy = 1
);
