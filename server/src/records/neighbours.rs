//! The tuned workloads of each (structure, target) with their extents, kept in memory: what
//! `SqlStore::nearest` scans for every zero-shot answer and warm start. Read from the database
//! on a miss, it turned a scan of every workload of the structure (a join and a JSON parse
//! per row, thousands of rows at 10,000 workloads) into a walk over a vector.
//!
//! Fresh enough by construction: this process forgets a target's entries whenever it stores a
//! new best record on it (after the transaction commits), and an entry lives at most `TTL`,
//! the bound on how late another replica's newly tuned workload is seen. A workload whose best
//! records were deleted meanwhile is dropped by `nearest` when it reads the best.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long an entry answers without reading the database again (the best cache's default).
const TTL: Duration = Duration::from_secs(2);

/// (workload key, extents) of every tuned workload of one structure on one target.
pub(crate) type Tuned = Arc<Vec<(String, Vec<i64>)>>;

#[derive(Debug, Default)]
pub(crate) struct NeighbourIndex {
    entries: Mutex<HashMap<(String, String), (Instant, Tuned)>>,
}

impl NeighbourIndex {
    /// The entry of (structure, target), if read less than `TTL` ago.
    pub(crate) fn get(&self, structure: &str, target: &str) -> Option<Tuned> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (at, tuned) = entries.get(&(structure.to_string(), target.to_string()))?;
        (at.elapsed() < TTL).then(|| Arc::clone(tuned))
    }

    /// Keeps what was read at `at` (taken before the read: an entry is never younger than the
    /// data it holds).
    pub(crate) fn put(&self, structure: &str, target: &str, at: Instant, tuned: Tuned) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.insert((structure.to_string(), target.to_string()), (at, tuned));
    }

    /// A best record was stored on `target`: a workload may have joined its structure's set.
    pub(crate) fn forget_target(&self, target: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain(|(_, t), _| t != target);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_answers_until_its_target_gets_a_new_best() {
        let index = NeighbourIndex::default();
        assert!(index.get("s", "t").is_none());
        let tuned: Tuned = Arc::new(vec![("w".into(), vec![4, 8])]);
        index.put("s", "t", Instant::now(), Arc::clone(&tuned));
        index.put("s", "u", Instant::now(), Arc::clone(&tuned));
        assert_eq!(index.get("s", "t"), Some(Arc::clone(&tuned)));
        index.forget_target("t");
        assert!(index.get("s", "t").is_none());
        assert!(
            index.get("s", "u").is_some(),
            "another target's entry stays"
        );
        // An entry read longer than TTL ago no longer answers.
        let old = Instant::now().checked_sub(TTL * 2);
        if let Some(old) = old {
            index.put("s", "t", old, tuned);
            assert!(index.get("s", "t").is_none());
        }
    }
}
