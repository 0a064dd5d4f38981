//! The best-record cache in front of the database: best-schedule queries are what compilers ask
//! most, so they are answered from memory, with the record counts the answer carries and the
//! target keys they name.
//!
//! An entry is dropped when a record of its (workload, target) lands through this server (the
//! best or the counts may have moved), so this server's own writes show at once. Records stored
//! by another server on a shared database show up through a short time-to-live: an entry past it
//! is still answered once more while a background task reads it again, so that a query never
//! waits on the database for a pair it has seen (only a pair's first query, or the first after
//! an invalidation, does). Known target keys are kept for good: a target is never deleted or
//! changed once stored. The answers of workloads with no record of their own ([`AnswerCache`])
//! are kept beside the records and forgotten by the same invalidations.

use crate::answer_cache::AnswerCache;
use crate::records::{Record, RecordCounts, RecordStore, SqlStore, StoreError};
use prometheus_client::metrics::counter::Counter;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
// tokio's clock (the std one outside tests): the tests pause and move it past the TTL.
use tokio::time::Instant;

type Key = (String, String);

/// What a best-schedule query needs of one (workload, target).
#[derive(Debug, Clone, PartialEq)]
pub struct BestEntry {
    pub best: Option<Record>,
    pub counts: RecordCounts,
}

async fn load(
    store: &SqlStore,
    workload_key: &str,
    target_key: &str,
) -> Result<BestEntry, StoreError> {
    let (best, counts) = store.best_with_counts(workload_key, target_key).await?;
    Ok(BestEntry { best, counts })
}

#[derive(Debug)]
struct Slot {
    at: Instant,
    /// Which fill this is: a background read lands only on the slot it was started for (not on
    /// one filled anew after an invalidation meanwhile).
    fill: u64,
    refreshing: bool,
    entry: Arc<BestEntry>,
}

#[derive(Debug)]
pub struct BestCache {
    /// Zero: nothing is kept, every query reads the database.
    ttl: Duration,
    entries: RwLock<HashMap<Key, Slot>>,
    fills: AtomicU64,
    targets: RwLock<HashSet<String>>,
    /// Background reads finished so far: what waits for one (a test) watches it.
    refreshes: tokio::sync::watch::Sender<u64>,
    /// Lookups answered from memory and from the database (the server's metrics).
    pub hits: Counter,
    pub misses: Counter,
    /// Answers by range or transfer, for workloads with no record on a target.
    pub answers: AnswerCache,
}

impl BestCache {
    pub fn new(ttl: Duration) -> Self {
        BestCache {
            ttl,
            entries: RwLock::new(HashMap::new()),
            fills: AtomicU64::new(0),
            targets: RwLock::new(HashSet::new()),
            refreshes: tokio::sync::watch::Sender::new(0),
            hits: Counter::default(),
            misses: Counter::default(),
            answers: AnswerCache::new(ttl),
        }
    }

    /// The best record of (workload, target), from memory when cached.
    pub async fn best(
        self: &Arc<Self>,
        store: &SqlStore,
        workload_key: &str,
        target_key: &str,
    ) -> Result<Option<Record>, StoreError> {
        Ok(self
            .entry(store, workload_key, target_key)
            .await?
            .best
            .clone())
    }

    /// The best record and the record counts of (workload, target), from memory when cached
    /// (an entry past its time-to-live is answered and read again in the background).
    pub async fn entry(
        self: &Arc<Self>,
        store: &SqlStore,
        workload_key: &str,
        target_key: &str,
    ) -> Result<Arc<BestEntry>, StoreError> {
        if self.ttl.is_zero() {
            self.misses.inc();
            return Ok(Arc::new(load(store, workload_key, target_key).await?));
        }
        let key = (workload_key.to_string(), target_key.to_string());
        let stale = match self.entries.read().expect("cache lock").get(&key) {
            Some(s) if s.at.elapsed() < self.ttl => {
                self.hits.inc();
                return Ok(Arc::clone(&s.entry));
            }
            Some(s) => Some((Arc::clone(&s.entry), s.refreshing)),
            None => None,
        };
        if let Some((entry, refreshing)) = stale {
            self.hits.inc();
            if !refreshing {
                self.refresh(store, key);
            }
            return Ok(entry);
        }
        self.misses.inc();
        let entry = Arc::new(load(store, workload_key, target_key).await?);
        let fill = self.fills.fetch_add(1, Ordering::Relaxed);
        self.entries.write().expect("cache lock").insert(
            key,
            Slot {
                at: Instant::now(),
                fill,
                refreshing: false,
                entry: Arc::clone(&entry),
            },
        );
        Ok(entry)
    }

    /// Reads a stale entry again in a background task.
    fn refresh(self: &Arc<Self>, store: &SqlStore, key: Key) {
        let fill = {
            let mut map = self.entries.write().expect("cache lock");
            let Some(s) = map.get_mut(&key).filter(|s| !s.refreshing) else {
                return;
            };
            s.refreshing = true;
            s.fill
        };
        let (cache, store) = (Arc::clone(self), store.clone());
        tokio::spawn(async move {
            let loaded = load(&store, &key.0, &key.1).await;
            cache.land(&key, fill, loaded);
            cache.refreshes.send_modify(|n| *n += 1);
        });
    }

    /// A background read's result, kept if its slot was not filled anew meanwhile.
    fn land(&self, key: &Key, fill: u64, loaded: Result<BestEntry, StoreError>) {
        let next = self.fills.fetch_add(1, Ordering::Relaxed);
        let mut map = self.entries.write().expect("cache lock");
        let Some(s) = map.get_mut(key).filter(|s| s.fill == fill) else {
            return;
        };
        match loaded {
            Ok(e) => {
                *s = Slot {
                    at: Instant::now(),
                    fill: next,
                    refreshing: false,
                    entry: Arc::new(e),
                }
            }
            Err(e) => {
                tracing::warn!("refreshing a cached best record: {e:#}");
                s.refreshing = false;
            }
        }
    }

    /// The number of background reads finished so far, as it changes.
    pub fn refreshes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.refreshes.subscribe()
    }

    /// Whether a target key is in the database; a yes is remembered.
    pub async fn target_known(&self, store: &SqlStore, key: &str) -> Result<bool, StoreError> {
        if self.targets.read().expect("cache lock").contains(key) {
            return Ok(true);
        }
        let known = store.target_json(key).await?.is_some();
        if known {
            self.targets
                .write()
                .expect("cache lock")
                .insert(key.to_string());
        }
        Ok(known)
    }

    /// Records of (workload, target) were stored: forget what was cached of it, and the
    /// target's answers for workloads without records (the new records may be their sources).
    pub fn invalidate(&self, workload_key: &str, target_key: &str) {
        self.entries
            .write()
            .expect("cache lock")
            .remove(&(workload_key.to_string(), target_key.to_string()));
        self.answers.forget_target(target_key);
    }

    /// Forget every entry (after an import).
    pub fn clear(&self) {
        self.entries.write().expect("cache lock").clear();
        self.answers.clear();
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

    async fn store(dir: &tempfile::TempDir) -> SqlStore {
        let s = SqlStore::open(dir.path().join("c.db").to_str().unwrap())
            .await
            .unwrap();
        s.put_workload("w", "w", "{}", 1, &Default::default())
            .await
            .unwrap();
        s.put_target("t", "{}").await.unwrap();
        s
    }

    fn rec(n: u32, cost: f64) -> NewRecord {
        NewRecord {
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
        }
    }

    #[tokio::test]
    async fn invalidation_shows_a_better_record() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(&dir).await;
        let cache = Arc::new(BestCache::new(Duration::from_secs(3600)));
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
        // The counts travel with the best record, and are cached alike.
        let e = cache.entry(&s, "w", "t").await.unwrap();
        assert_eq!((e.counts.total, e.counts.ok), (2, 2));
        s.commit(&rec(3, 3.0)).await.unwrap();
        assert_eq!(cache.entry(&s, "w", "t").await.unwrap().counts.total, 2);
        cache.invalidate("w", "t");
        assert_eq!(cache.entry(&s, "w", "t").await.unwrap().counts.total, 3);
        // Targets: a known key is remembered, an unknown one asked again.
        assert!(cache.target_known(&s, "t").await.unwrap());
        assert!(!cache.target_known(&s, "u").await.unwrap());
        s.put_target("u", "{}").await.unwrap();
        assert!(cache.target_known(&s, "u").await.unwrap());
    }

    #[tokio::test]
    async fn past_its_ttl_an_entry_is_answered_once_more_and_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(&dir).await;
        s.commit(&rec(1, 2.0)).await.unwrap();
        let ttl = Duration::from_secs(60);
        let cache = Arc::new(BestCache::new(ttl));
        let mut refreshes = cache.refreshes();
        let cost = |e: Arc<BestEntry>| e.best.as_ref().and_then(|b| b.mean_cost);
        assert_eq!(cost(cache.entry(&s, "w", "t").await.unwrap()), Some(2.0));
        // Another server stores a better record: no invalidation reaches this cache.
        s.commit(&rec(2, 1.0)).await.unwrap();
        assert_eq!(
            cost(cache.entry(&s, "w", "t").await.unwrap()),
            Some(2.0),
            "within the TTL the entry is answered as it is"
        );
        assert_eq!(*refreshes.borrow(), 0, "and not read again");
        // The TTL passes on tokio's clock, moved by hand (the database calls around it run on
        // a running clock: a paused one would fire their timeouts while they wait).
        tokio::time::pause();
        tokio::time::advance(ttl + Duration::from_secs(1)).await;
        tokio::time::resume();
        assert_eq!(
            cost(cache.entry(&s, "w", "t").await.unwrap()),
            Some(2.0),
            "the stale entry is answered while it is read again"
        );
        refreshes.wait_for(|&n| n >= 1).await.unwrap();
        assert_eq!(cost(cache.entry(&s, "w", "t").await.unwrap()), Some(1.0));
        assert_eq!(cache.entry(&s, "w", "t").await.unwrap().counts.total, 2);
        assert_eq!(*refreshes.borrow(), 1, "one read for the stale entry");

        // A zero TTL keeps nothing.
        let none = Arc::new(BestCache::new(Duration::ZERO));
        assert_eq!(cost(none.entry(&s, "w", "t").await.unwrap()), Some(1.0));
        s.commit(&rec(3, 0.5)).await.unwrap();
        assert_eq!(cost(none.entry(&s, "w", "t").await.unwrap()), Some(0.5));
        assert!(none.is_empty());
    }
}
