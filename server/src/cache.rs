//! The best-record cache in front of the database: best-schedule queries are what compilers ask
//! most, so they are answered from memory.
//!
//! An entry is dropped when a better record of its (workload, target) lands through this
//! server, and expires after a short time-to-live so that records stored by another server on a
//! shared database show up too.

use crate::records::{Record, RecordStore, SqlStore, StoreError};
use prometheus_client::metrics::counter::Counter;
use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{Duration, Instant};

type Key = (String, String);

#[derive(Debug)]
pub struct BestCache {
    ttl: Duration,
    entries: RwLock<HashMap<Key, (Instant, Option<Record>)>>,
    /// Lookups answered from memory and from the database (the server's metrics).
    pub hits: Counter,
    pub misses: Counter,
}

impl BestCache {
    pub fn new(ttl: Duration) -> Self {
        BestCache {
            ttl,
            entries: RwLock::new(HashMap::new()),
            hits: Counter::default(),
            misses: Counter::default(),
        }
    }

    /// The best record of (workload, target), from memory when fresh.
    pub async fn best(
        &self,
        store: &SqlStore,
        workload_key: &str,
        target_key: &str,
    ) -> Result<Option<Record>, StoreError> {
        let key = (workload_key.to_string(), target_key.to_string());
        if let Some((at, rec)) = self.entries.read().expect("cache lock").get(&key)
            && at.elapsed() < self.ttl
        {
            self.hits.inc();
            return Ok(rec.clone());
        }
        self.misses.inc();
        let rec = store.best(workload_key, target_key).await?;
        self.entries
            .write()
            .expect("cache lock")
            .insert(key, (Instant::now(), rec.clone()));
        Ok(rec)
    }

    /// A better record of (workload, target) was stored: forget what was cached.
    pub fn invalidate(&self, workload_key: &str, target_key: &str) {
        self.entries
            .write()
            .expect("cache lock")
            .remove(&(workload_key.to_string(), target_key.to_string()));
    }

    /// Forget everything (after an import).
    pub fn clear(&self) {
        self.entries.write().expect("cache lock").clear();
    }

    pub fn len(&self) -> usize {
        self.entries.read().expect("cache lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::NewRecord;

    #[tokio::test]
    async fn invalidation_shows_a_better_record() {
        let dir = tempfile::tempdir().unwrap();
        let s = SqlStore::open(dir.path().join("c.db").to_str().unwrap())
            .await
            .unwrap();
        s.put_workload("w", "w", "{}", 1).await.unwrap();
        s.put_target("t", "{}").await.unwrap();
        let rec = |n: u32, cost: f64| NewRecord {
            workload_key: "w".into(),
            target_key: "t".into(),
            steps_json: format!("[[\"SP\", {n}]]"),
            costs: vec![cost],
            error_code: 0,
            error_msg: String::new(),
            noisy: false,
            build_s: 0.0,
            run_s: 0.0,
            worker: None,
            created_at: None,
        };
        let cache = BestCache::new(Duration::from_secs(3600));
        assert_eq!(cache.best(&s, "w", "t").await.unwrap(), None);
        s.commit(&rec(1, 2.0)).await.unwrap();
        // Cached: the miss is remembered until invalidated (or the TTL runs out).
        assert_eq!(cache.best(&s, "w", "t").await.unwrap(), None);
        cache.invalidate("w", "t");
        let best = cache.best(&s, "w", "t").await.unwrap().unwrap();
        assert_eq!(best.mean_cost, Some(2.0));
        assert_eq!(cache.len(), 1);
        s.commit(&rec(2, 1.0)).await.unwrap();
        cache.invalidate("w", "t");
        assert_eq!(
            cache.best(&s, "w", "t").await.unwrap().unwrap().mean_cost,
            Some(1.0)
        );
    }
}
