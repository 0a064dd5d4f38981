//! The tuned workloads of each (structure, target) with their extents (as logarithms), kept in
//! memory: what `SqlStore::nearest` scans for every zero-shot answer and warm start. Read from
//! the database on a miss, it turned a scan of every workload of the structure (a join and a
//! JSON parse per row, thousands of rows at 10,000 workloads) into a walk over a vector.
//!
//! Fresh enough by construction: this process forgets a target's entries whenever it stores the
//! first best record of a workload the index does not hold (after the transaction commits), so
//! its own tunings are seen at once; a better record of a workload it holds changes no set and
//! forgets nothing. A read that began before such a forget is not kept. A server keeps the
//! index warm (`SqlStore::keep_neighbours_warm`): every set is read at start, and again in the
//! background after a forget, so that an answer does not wait on the scan. An entry older than
//! `TTL` still answers while one background read renews it (`Lookup::Stale`): how late another
//! replica's newly tuned workload is seen is `TTL` plus that read. A workload whose best records
//! were deleted meanwhile is dropped by `nearest` when it reads the records.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long an entry answers without a new read of the database. Longer than the best cache's
/// 2 s: a renewal reads a structure's whole set (4-40 ms for 2,000 workloads on a 2-vCPU
/// Zen 4), and at 2 s the renewals of every structure a compiler asks about landed
/// among its answers, slowest first answers of a run 2-4x the median. Another replica's new
/// workload only joins the neighbours of a transfer or a warm start (its own best is read
/// through the best cache): seen 30 s late, they are at worst adapted from a farther one.
const TTL: Duration = Duration::from_secs(30);

/// (workload key, `transfer::log_extents`) of every tuned workload of one structure on one
/// target: kept as logarithms, so a lookup's distances are sums of differences.
pub(crate) type Tuned = Arc<Vec<(String, Vec<f64>)>>;

#[derive(Debug)]
struct Entry {
    /// When the read that filled it began.
    at: Instant,
    tuned: Tuned,
    /// A background read to renew it is under way.
    renewing: bool,
}

#[derive(Debug, Default)]
struct Entries {
    by_key: HashMap<(String, String), Entry>,
    /// When each target's entries were last forgotten: a read begun before is stale.
    forgotten: HashMap<String, Instant>,
    /// Targets whose sets are being read again in the background (`start_refill`).
    refilling: HashSet<String>,
    /// Of those, the ones forgotten again meanwhile: read once more when the read ends.
    refill_again: HashSet<String>,
}

/// What the index holds for a (structure, target).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lookup {
    Fresh(Tuned),
    /// Older than `TTL`; the caller that gets it should renew it (no other caller is told to).
    Stale(Tuned),
    Missing,
}

#[derive(Debug, Default)]
pub(crate) struct NeighbourIndex {
    entries: Mutex<Entries>,
    /// Sets are read again in the background after a forget (a server's store).
    keep_warm: AtomicBool,
}

impl NeighbourIndex {
    fn lock(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The entry of (structure, target). `Stale` is answered once per renewal: later callers
    /// get `Fresh` with the same data until the renewing read lands (or fails, `renew_failed`).
    pub(crate) fn get(&self, structure: &str, target: &str) -> Lookup {
        let mut entries = self.lock();
        let Some(e) = entries
            .by_key
            .get_mut(&(structure.to_string(), target.to_string()))
        else {
            return Lookup::Missing;
        };
        if e.at.elapsed() < TTL || e.renewing {
            return Lookup::Fresh(Arc::clone(&e.tuned));
        }
        e.renewing = true;
        Lookup::Stale(Arc::clone(&e.tuned))
    }

    /// Keeps what a read begun at `at` found, unless the target was forgotten since (the read
    /// may have missed the new best).
    pub(crate) fn put(&self, structure: &str, target: &str, at: Instant, tuned: Tuned) {
        let mut entries = self.lock();
        if entries.forgotten.get(target).is_some_and(|&f| f >= at) {
            return;
        }
        let entry = Entry {
            at,
            tuned,
            renewing: false,
        };
        entries
            .by_key
            .insert((structure.to_string(), target.to_string()), entry);
    }

    /// The renewing read of (structure, target) failed: the next caller tries again.
    pub(crate) fn renew_failed(&self, structure: &str, target: &str) {
        let mut entries = self.lock();
        if let Some(e) = entries
            .by_key
            .get_mut(&(structure.to_string(), target.to_string()))
        {
            e.renewing = false;
        }
    }

    pub(crate) fn set_keep_warm(&self) {
        self.keep_warm.store(true, Ordering::Relaxed);
    }

    pub(crate) fn keeps_warm(&self) -> bool {
        self.keep_warm.load(Ordering::Relaxed)
    }

    /// Whether every one of `workloads` is in a set of `target` held now: new bests of them
    /// change no set. One walk over the target's sets, whatever the number of workloads (an
    /// import brings thousands).
    pub(crate) fn holds_all(&self, target: &str, workloads: &HashSet<&str>) -> bool {
        let entries = self.lock();
        let mut missing = workloads.clone();
        for ((_, t), e) in &entries.by_key {
            if missing.is_empty() {
                break;
            }
            if t == target {
                for (key, _) in e.tuned.iter() {
                    missing.remove(key.as_str());
                }
            }
        }
        missing.is_empty()
    }

    /// A best record was stored on `target`: a workload may have joined its structure's set.
    pub(crate) fn forget_target(&self, target: &str) {
        let mut entries = self.lock();
        entries.by_key.retain(|(_, t), _| t != target);
        entries.forgotten.insert(target.to_string(), Instant::now());
    }

    /// Whether the caller is to read `target`'s sets again: not when a read of them is under
    /// way (that one reads again when it ends, `refill_done`).
    pub(crate) fn start_refill(&self, target: &str) -> bool {
        let mut entries = self.lock();
        if entries.refilling.insert(target.to_string()) {
            return true;
        }
        entries.refill_again.insert(target.to_string());
        false
    }

    /// The read of `target`'s sets ended: whether to read them once more (forgotten meanwhile).
    pub(crate) fn refill_done(&self, target: &str) -> bool {
        let mut entries = self.lock();
        if entries.refill_again.remove(target) {
            return true;
        }
        entries.refilling.remove(target);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuned(key: &str) -> Tuned {
        Arc::new(vec![(key.into(), vec![4.0, 8.0])])
    }

    #[test]
    fn an_entry_answers_until_its_target_gets_a_new_best() {
        let index = NeighbourIndex::default();
        assert_eq!(index.get("s", "t"), Lookup::Missing);
        index.put("s", "t", Instant::now(), tuned("w"));
        index.put("s", "u", Instant::now(), tuned("w"));
        assert_eq!(index.get("s", "t"), Lookup::Fresh(tuned("w")));
        index.forget_target("t");
        assert_eq!(index.get("s", "t"), Lookup::Missing);
        assert!(
            matches!(index.get("s", "u"), Lookup::Fresh(_)),
            "another target's entry stays"
        );
    }

    #[test]
    fn the_index_knows_which_workloads_it_holds() {
        let index = NeighbourIndex::default();
        let set = |keys: &[&'static str]| keys.iter().copied().collect::<HashSet<&str>>();
        assert!(!index.holds_all("t", &set(&["w"])), "nothing read yet");
        index.put("s", "t", Instant::now(), tuned("w"));
        index.put("s2", "t", Instant::now(), tuned("v"));
        assert!(index.holds_all("t", &set(&["w"])));
        assert!(index.holds_all("t", &set(&["w", "v"])), "across structures");
        assert!(!index.holds_all("t", &set(&["w", "x"])), "one unknown");
        assert!(!index.holds_all("u", &set(&["w"])), "another target");
        index.forget_target("t");
        assert!(!index.holds_all("t", &set(&["w"])));
    }

    #[test]
    fn refills_of_one_target_coalesce() {
        let index = NeighbourIndex::default();
        assert!(index.start_refill("t"), "the first reads");
        assert!(index.start_refill("u"), "another target reads on its own");
        assert!(!index.start_refill("t"), "a second waits on the first");
        assert!(!index.start_refill("t"), "and a third");
        assert!(index.refill_done("t"), "the first reads once more");
        assert!(!index.refill_done("t"), "then stops");
        assert!(index.start_refill("t"), "and the next forget reads again");
    }

    #[test]
    fn a_read_begun_before_a_new_best_is_not_kept() {
        let index = NeighbourIndex::default();
        let ms = Duration::from_millis(1);
        let began = Instant::now()
            .checked_sub(ms)
            .expect("the clock reaches back 1 ms");
        index.forget_target("t");
        index.put("s", "t", began, tuned("old"));
        assert_eq!(index.get("s", "t"), Lookup::Missing);
        index.put("s", "t", Instant::now() + ms, tuned("new"));
        assert_eq!(index.get("s", "t"), Lookup::Fresh(tuned("new")));
    }

    #[test]
    fn an_old_entry_answers_while_one_caller_renews_it() {
        let index = NeighbourIndex::default();
        // An entry read longer than TTL ago (an Instant that far back exists on any machine up
        // for more than 31 s; the test needs it).
        let old = Instant::now()
            .checked_sub(TTL + Duration::from_secs(1))
            .expect("the clock reaches back 31 s");
        index.put("s", "t", old, tuned("w"));
        assert_eq!(
            index.get("s", "t"),
            Lookup::Stale(tuned("w")),
            "the first renews"
        );
        assert_eq!(
            index.get("s", "t"),
            Lookup::Fresh(tuned("w")),
            "the others wait for it"
        );
        index.renew_failed("s", "t");
        assert_eq!(
            index.get("s", "t"),
            Lookup::Stale(tuned("w")),
            "renewed again after a failure"
        );
        index.put("s", "t", Instant::now(), tuned("w2"));
        assert_eq!(index.get("s", "t"), Lookup::Fresh(tuned("w2")));
    }
}
