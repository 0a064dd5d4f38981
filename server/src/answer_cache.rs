//! Answers for workloads with no record of their own on a target (from a tuned shape range, or
//! transferred from tuned neighbours), kept per (workload, target). A compiler asks the same
//! shapes again and again in a build. Each such answer reads the neighbours' records, adapts a
//! dozen schedules and ranks them (5-6 ms of server CPU at 10,000 workloads,
//! docs/experiments/2026-11-28-zero-shot-latency-zen3.md). A repeat is answered from memory.
//!
//! Fresh as the best cache is ([`crate::cache`]):
//! - Any record this server stores for a target forgets the target's answers
//!   (`BestCache::invalidate`): a new neighbour, a better source record, or the workload's own
//!   first record shows at once.
//! - An answer computed from reads that began before such a forget is not kept.
//! - Whatever else moves an answer expires with the time-to-live: another replica's records on
//!   a shared database, a newly saved cost model, a new shape range.
//!
//! "No answer" is kept too: a structure with no tuned neighbour is not scanned on every ask.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
// tokio's clock, as the best cache's: the tests pause it and move it past the TTL.
use tokio::time::Instant;
use tunehub_proto::v1 as pb;

/// Answers kept per target at most (a few KiB each).
const MAX_PER_TARGET: usize = 50_000;

/// An answer made without a record of the workload's own.
#[derive(Debug, Clone, PartialEq)]
pub struct NoRecordAnswer {
    pub record: pb::ScheduleRecord,
    pub transfer: pb::Transfer,
    /// The shape range it was answered from, if it was.
    pub range: Option<pb::ShapeRangeRef>,
}

/// What is kept of one (workload, target): `None` when nothing could be answered.
pub type Kept = Option<Arc<NoRecordAnswer>>;

#[derive(Debug)]
struct Slot {
    at: Instant,
    answer: Kept,
}

impl Slot {
    /// Whether it is still within the time-to-live.
    fn live(&self, ttl: Duration) -> bool {
        self.at.elapsed() < ttl
    }
}

#[derive(Debug, Default)]
struct Targets {
    /// Per target, per workload key.
    answers: HashMap<String, HashMap<String, Slot>>,
    /// When each target's answers were last forgotten, and all of them: an answer computed
    /// from earlier reads is not kept.
    forgotten: HashMap<String, Instant>,
    cleared: Option<Instant>,
}

#[derive(Debug)]
pub struct AnswerCache {
    /// Zero: nothing is kept.
    ttl: Duration,
    targets: Mutex<Targets>,
}

impl AnswerCache {
    pub fn new(ttl: Duration) -> Self {
        AnswerCache {
            ttl,
            targets: Mutex::new(Targets::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Targets> {
        self.targets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The kept answer of (workload, target) within its time-to-live; `None` when there is none
    /// to give (`Some(None)`: kept as "no answer").
    pub fn get(&self, workload_key: &str, target_key: &str) -> Option<Kept> {
        let targets = self.lock();
        let slot = targets.answers.get(target_key)?.get(workload_key)?;
        slot.live(self.ttl).then(|| slot.answer.clone())
    }

    /// A moment to pass to [`AnswerCache::put`], taken before the reads an answer is made of.
    pub fn now(&self) -> Instant {
        Instant::now()
    }

    /// Keeps the answer of (workload, target) computed from reads begun at `started`, unless
    /// the target's answers were forgotten since.
    pub fn put(&self, workload_key: &str, target_key: &str, answer: Kept, started: Instant) {
        if self.ttl.is_zero() {
            return;
        }
        let mut targets = self.lock();
        let forgotten = targets.forgotten.get(target_key).copied();
        if forgotten.max(targets.cleared).is_some_and(|f| f >= started) {
            return;
        }
        let ttl = self.ttl;
        let kept = targets.answers.entry(target_key.to_string()).or_default();
        // Bounded: a stream of distinct shapes (dynamic shapes, a fuzzer) must not grow the
        // server without end. Expired answers go first; if all are live, all go.
        if kept.len() >= MAX_PER_TARGET {
            kept.retain(|_, s| s.live(ttl));
            if kept.len() >= MAX_PER_TARGET {
                kept.clear();
            }
        }
        kept.insert(
            workload_key.to_string(),
            Slot {
                at: started,
                answer,
            },
        );
    }

    /// A record of the target was stored: its answers may have moved.
    pub fn forget_target(&self, target_key: &str) {
        let mut targets = self.lock();
        targets.answers.remove(target_key);
        targets
            .forgotten
            .insert(target_key.to_string(), Instant::now());
    }

    /// Forget every answer (after an import).
    pub fn clear(&self) {
        let mut targets = self.lock();
        targets.answers.clear();
        targets.cleared = Some(Instant::now());
    }

    /// Answers kept, over all targets.
    pub fn len(&self) -> usize {
        self.lock().answers.values().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(id: &str) -> Kept {
        Some(Arc::new(NoRecordAnswer {
            record: pb::ScheduleRecord {
                steps_json: id.into(),
                ..Default::default()
            },
            transfer: pb::Transfer::default(),
            range: None,
        }))
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_is_kept_for_its_ttl_and_forgotten_with_its_target() {
        let ttl = Duration::from_secs(2);
        let cache = AnswerCache::new(ttl);
        assert_eq!(cache.get("w", "t"), None);
        cache.put("w", "t", answer("a"), cache.now());
        cache.put("v", "t", None, cache.now());
        cache.put("w", "u", answer("b"), cache.now());
        assert_eq!(cache.get("w", "t"), Some(answer("a")));
        assert_eq!(cache.get("v", "t"), Some(None), "no answer is kept too");
        assert_eq!(cache.len(), 3);

        // A record of target t: its answers go, target u's stay.
        cache.forget_target("t");
        assert_eq!(cache.get("w", "t"), None);
        assert_eq!(cache.get("v", "t"), None);
        assert_eq!(cache.get("w", "u"), Some(answer("b")));

        // Past the TTL an answer is not given.
        tokio::time::advance(ttl).await;
        assert_eq!(cache.get("w", "u"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_read_before_a_forget_is_not_kept() {
        let cache = AnswerCache::new(Duration::from_secs(2));
        let started = cache.now();
        tokio::time::advance(Duration::from_millis(1)).await;
        // A record lands while the answer is being made.
        cache.forget_target("t");
        cache.put("w", "t", answer("old"), started);
        assert_eq!(cache.get("w", "t"), None);
        // One begun after the forget is kept.
        tokio::time::advance(Duration::from_millis(1)).await;
        cache.put("w", "t", answer("new"), cache.now());
        assert_eq!(cache.get("w", "t"), Some(answer("new")));
        cache.clear();
        assert!(cache.is_empty());
        cache.put("w", "u", answer("older"), started);
        assert!(cache.is_empty(), "nor after a clear, of any target");
    }

    #[tokio::test(start_paused = true)]
    async fn a_target_keeps_at_most_its_bound_expired_answers_first() {
        let ttl = Duration::from_secs(2);
        let cache = AnswerCache::new(ttl);
        for i in 0..MAX_PER_TARGET - 1 {
            cache.put(&format!("old{i}"), "t", None, cache.now());
        }
        tokio::time::advance(ttl).await;
        cache.put("live", "t", answer("a"), cache.now());
        cache.put("other", "u", answer("b"), cache.now());
        assert_eq!(cache.len(), MAX_PER_TARGET + 1);
        // Full: the expired ones go, the live one stays, another target is untouched.
        cache.put("new", "t", answer("c"), cache.now());
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get("live", "t"), Some(answer("a")));
        assert_eq!(cache.get("other", "u"), Some(answer("b")));
        // Full of live answers: all go, and what comes after is kept.
        for i in 0..MAX_PER_TARGET {
            cache.put(&format!("w{i}"), "t", None, cache.now());
        }
        assert_eq!(cache.get("w0", "t"), None);
        assert_eq!(
            cache.get(&format!("w{}", MAX_PER_TARGET - 1), "t"),
            Some(None)
        );
        assert_eq!(cache.len(), 2 + 1);
    }

    #[test]
    fn a_zero_ttl_keeps_nothing() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let cache = AnswerCache::new(Duration::ZERO);
            cache.put("w", "t", answer("a"), cache.now());
            assert_eq!(cache.get("w", "t"), None);
            assert!(cache.is_empty());
        });
    }
}
