-- tunehub schema, version 11: which server replica owns each worker pool (one target key's
-- workers), under a lease. Workers, pieces and piece leases live in the owner's memory; a
-- replica that does not own a pool redirects the pool's workers to `address` and claims no
-- job of it (`server/src/fleet/owners.rs`).
--
--   owner       the owning server's instance name (as in jobs.claimed_by)
--   address     where workers reach it (its --advertise-addr); '' when it advertises none
--   expires_at  ms since the epoch; renewed by the owner while the pool has workers, free to
--               take once past
CREATE TABLE pool_owners (
    target_key TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    address    TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
