//! Which server replica owns each worker pool (a target key's workers), under a database lease
//! (`pool_owners`, `migrations/0011`).
//!
//! Workers, the queue of pieces and the pieces' leases stay in one replica's memory (`registry`):
//! every pull and heartbeat is answered from memory, never a database write. What replicas
//! share through the database is only who owns each pool: a replica takes a pool when one of
//! its workers registers (the pool free, lapsed, or already its own) and renews it while the
//! pool has workers; a replica that does not own a pool sends the pool's workers to the owner's
//! address (`Claim::Elsewhere`) and claims none of its jobs, since `Fleet::ready_keys` names
//! only owned pools. One statement takes or renews a pool, `$n` and `ON CONFLICT ... WHERE` on
//! both SQLite and PostgreSQL; PostgreSQL's row lock on the conflicting row makes two replicas
//! taking a lapsed pool at once agree on one owner.
//!
//! An owner at this replica's own address is this replica's predecessor (a server killed and
//! started again on the same address, under a new instance name): its pools are taken at once
//! rather than after their lease, else its workers would be sent to itself until then.

use super::registry::Fleet;
use crate::records::{SqlStore, StoreError, now_ms};
use sqlx::Row;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Who owns a pool, as a replica asking to take it sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This replica owns it (taken or renewed) until the lease runs out.
    Owned,
    /// Another live replica owns it: its instance name and the address its workers reach.
    Elsewhere { owner: String, address: String },
}

/// The `pool_owners` table.
#[derive(Clone)]
pub struct OwnerStore {
    db: SqlStore,
}

impl OwnerStore {
    pub fn new(db: SqlStore) -> Self {
        OwnerStore { db }
    }

    /// Takes or renews pool `key` for `owner` (reachable at `address`) until `now + lease_ms`,
    /// if it is free, lapsed (at `now`), already `owner`'s, or held at `address` (`owner`'s
    /// predecessor there); else says who holds it.
    pub async fn take(
        &self,
        key: &str,
        owner: &str,
        address: &str,
        lease_ms: u64,
        now: i64,
    ) -> Result<Claim, StoreError> {
        // A row gone between the two statements (its owner stopped and let it go) is free:
        // take it again.
        for _ in 0..3 {
            let taken: Option<String> = sqlx::query_scalar(
                "INSERT INTO pool_owners (target_key, owner, address, expires_at) \
                 VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (target_key) DO UPDATE SET owner = excluded.owner, \
                 address = excluded.address, expires_at = excluded.expires_at \
                 WHERE pool_owners.owner = excluded.owner OR pool_owners.expires_at < $5 \
                 OR pool_owners.address = excluded.address \
                 RETURNING owner",
            )
            .bind(key)
            .bind(owner)
            .bind(address)
            .bind(now + lease_ms as i64)
            .bind(now)
            // Run to its end: a take whose commit failed is an error (see
            // `JobStore::claim_next`).
            .fetch_all(self.db.pool())
            .await?
            .pop();
            if taken.is_some() {
                return Ok(Claim::Owned);
            }
            let held = sqlx::query("SELECT owner, address FROM pool_owners WHERE target_key = $1")
                .bind(key)
                .fetch_optional(self.db.pool())
                .await?;
            if let Some(row) = held {
                return Ok(Claim::Elsewhere {
                    owner: row.try_get(0)?,
                    address: row.try_get(1)?,
                });
            }
        }
        Err(StoreError::Invalid(format!(
            "pool {key}: its owner row keeps changing"
        )))
    }

    /// The replica that owns pool `key` at `now` (its lease live): its instance name and the
    /// address its workers reach; `None` when the pool is free or lapsed.
    pub async fn live_owner(
        &self,
        key: &str,
        now: i64,
    ) -> Result<Option<(String, String)>, StoreError> {
        let row = sqlx::query(
            "SELECT owner, address FROM pool_owners WHERE target_key = $1 AND expires_at >= $2",
        )
        .bind(key)
        .bind(now)
        .fetch_optional(self.db.pool())
        .await?;
        Ok(match row {
            Some(r) => Some((r.try_get(0)?, r.try_get(1)?)),
            None => None,
        })
    }

    /// Lets every pool of `owner` go (a graceful stop): other replicas take them at once.
    pub async fn release_all(&self, owner: &str) -> Result<u64, StoreError> {
        Ok(sqlx::query("DELETE FROM pool_owners WHERE owner = $1")
            .bind(owner)
            .execute(self.db.pool())
            .await?
            .rows_affected())
    }
}

/// This replica's side of pool ownership: its name and address, the lease, and the fleet whose
/// pools it takes, renews and drops.
pub struct PoolOwners {
    store: OwnerStore,
    fleet: Arc<Fleet>,
    instance: String,
    address: String,
    lease: Duration,
}

impl PoolOwners {
    pub fn new(
        store: OwnerStore,
        fleet: Arc<Fleet>,
        instance: String,
        address: String,
        lease: Duration,
    ) -> Self {
        PoolOwners {
            store,
            fleet,
            instance,
            address,
            lease,
        }
    }

    /// The lease: a pool is renewed a few times within it.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Takes or renews pool `key`. Owned: the fleet serves it until the lease would run out
    /// (counted from before the statement, so never past the row's own expiry). Elsewhere:
    /// the fleet drops it (its workers are sent on, its pieces forgotten here).
    pub async fn take(&self, key: &str) -> Result<Claim, StoreError> {
        let (started, now) = (Instant::now(), now_ms());
        let lease_ms = self.lease.as_millis() as u64;
        let claim = self
            .store
            .take(key, &self.instance, &self.address, lease_ms, now)
            .await?;
        match &claim {
            Claim::Owned => self.fleet.hold_pool(key, started + self.lease),
            Claim::Elsewhere { owner, address } => {
                if self.fleet.drop_pool(key, address) {
                    tracing::warn!(target_key = %key, %owner, %address,
                        "another server replica owns the pool now: its workers are sent there");
                }
            }
        }
        Ok(claim)
    }

    /// Renews every pool with a worker online here; a pool without one is left to lapse (so
    /// that the replica its workers register with next can take it).
    pub async fn renew(&self) {
        for key in self.fleet.active_pools() {
            if let Err(e) = self.take(&key).await {
                tracing::warn!(target_key = %key, "renewing the pool's ownership: {e}");
            }
        }
    }

    /// Renews the pools every third of the lease, until the task is aborted.
    pub async fn renew_loop(self: Arc<Self>) {
        loop {
            tokio::time::sleep(self.lease / 3).await;
            self.renew().await;
        }
    }

    /// Lets this replica's pools go (a graceful stop).
    pub async fn release_all(&self) {
        match self.store.release_all(&self.instance).await {
            Ok(n) if n > 0 => tracing::info!(pools = n, "pools handed back"),
            Ok(_) => {}
            Err(e) => tracing::warn!("handing the pools back: {e} (they lapse on their own)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn store() -> (tempfile::TempDir, OwnerStore) {
        let dir = tempfile::tempdir().unwrap();
        let db = SqlStore::open(dir.path().join("o.db").to_str().unwrap())
            .await
            .unwrap();
        (dir, OwnerStore::new(db))
    }

    fn elsewhere(owner: &str, address: &str) -> Claim {
        Claim::Elsewhere {
            owner: owner.into(),
            address: address.into(),
        }
    }

    #[tokio::test]
    async fn a_pool_is_taken_renewed_refused_while_live_and_taken_once_lapsed() {
        let (_dir, s) = store().await;
        let t0 = 1_000_000;
        // Free: taken.
        assert_eq!(
            s.take("t", "a", "a:1", 1000, t0).await.unwrap(),
            Claim::Owned
        );
        // Its owner renews it.
        assert_eq!(
            s.take("t", "a", "a:1", 1000, t0 + 900).await.unwrap(),
            Claim::Owned
        );
        // Live (renewed until t0 + 1900): another replica is told whose it is.
        assert_eq!(
            s.take("t", "b", "b:1", 1000, t0 + 1500).await.unwrap(),
            elsewhere("a", "a:1")
        );
        // Another pool is apart.
        assert_eq!(
            s.take("u", "b", "b:1", 1000, t0 + 1500).await.unwrap(),
            Claim::Owned
        );
        // Lapsed: taken by the other.
        assert_eq!(
            s.take("t", "b", "b:1", 1000, t0 + 2000).await.unwrap(),
            Claim::Owned
        );
        // And the first no longer renews it.
        assert_eq!(
            s.take("t", "a", "a:1", 1000, t0 + 2100).await.unwrap(),
            elsewhere("b", "b:1")
        );
    }

    #[tokio::test]
    async fn a_successor_at_the_same_address_takes_a_live_pool_and_release_frees_it() {
        let (_dir, s) = store().await;
        let t0 = 1_000_000;
        assert_eq!(
            s.take("t", "a", "h:1", 60_000, t0).await.unwrap(),
            Claim::Owned
        );
        // The same address under a new name: the old one was killed and started again.
        assert_eq!(
            s.take("t", "a2", "h:1", 60_000, t0 + 1).await.unwrap(),
            Claim::Owned
        );
        assert_eq!(
            s.take("t", "b", "h:2", 60_000, t0 + 2).await.unwrap(),
            elsewhere("a2", "h:1")
        );
        // A graceful stop lets its pools go: the other takes them at once.
        assert_eq!(s.release_all("a2").await.unwrap(), 1);
        assert_eq!(
            s.take("t", "b", "h:2", 60_000, t0 + 3).await.unwrap(),
            Claim::Owned
        );
    }
}
