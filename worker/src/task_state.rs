//! What a worker keeps per task across the pieces of that task: the task itself (its DAG
//! checked against the workload key once, its reference outputs computed once: the f64
//! interpreter takes seconds on a large conv) and its measurer (the harness object the builder
//! compiled, the runner's noise calibration). A job sends a task's candidates as many pieces,
//! often to the same worker; rebuilding this for each piece was most of a small piece's time.
//!
//! A few tasks are kept, the least recently used dropped first: a worker serves the tasks of
//! the jobs running on its target, usually one or a handful at a time.

use std::collections::VecDeque;

/// What the state of a task depends on besides the task: the measure options (they set the
/// harness's timing and the runner's calibration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskKey {
    pub workload_key: String,
    pub options_json: String,
}

/// Per-task states, most recently used last. An entry is taken out while a piece uses it and
/// put back after, so no lock is held during a measurement.
#[derive(Debug)]
pub struct TaskStates<V> {
    capacity: usize,
    entries: VecDeque<(TaskKey, V)>,
}

impl<V> TaskStates<V> {
    pub fn new(capacity: usize) -> Self {
        TaskStates {
            capacity: capacity.max(1),
            entries: VecDeque::new(),
        }
    }

    /// The state of `key`, removed from the cache (put it back with `put`).
    pub fn take(&mut self, key: &TaskKey) -> Option<V> {
        let i = self.entries.iter().position(|(k, _)| k == key)?;
        self.entries.remove(i).map(|(_, v)| v)
    }

    /// Keeps `value` as the most recently used; the least recently used goes past capacity.
    pub fn put(&mut self, key: TaskKey, value: V) {
        self.entries.retain(|(k, _)| *k != key);
        self.entries.push_back((key, value));
        while self.entries.len() > self.capacity {
            self.entries.pop_front();
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(w: &str, o: &str) -> TaskKey {
        TaskKey {
            workload_key: w.into(),
            options_json: o.into(),
        }
    }

    #[test]
    fn a_state_is_reused_until_pushed_out_by_newer_tasks() {
        let mut s = TaskStates::new(2);
        assert_eq!(s.take(&key("a", "{}")), None);
        s.put(key("a", "{}"), 1);
        s.put(key("b", "{}"), 2);
        // Taken and put back: `a` is now the most recent, so `c` pushes `b` out.
        assert_eq!(s.take(&key("a", "{}")), Some(1));
        assert_eq!(s.len(), 1);
        s.put(key("a", "{}"), 1);
        s.put(key("c", "{}"), 3);
        assert_eq!(s.len(), 2);
        assert_eq!(s.take(&key("b", "{}")), None);
        assert_eq!(s.take(&key("a", "{}")), Some(1));
        assert_eq!(s.take(&key("c", "{}")), Some(3));
    }

    #[test]
    fn other_measure_options_are_another_state() {
        let mut s = TaskStates::new(4);
        s.put(key("a", r#"{"repeat":1}"#), 1);
        assert_eq!(s.take(&key("a", r#"{"repeat":3}"#)), None);
        // Putting a key again replaces its state rather than keeping two.
        s.put(key("a", r#"{"repeat":1}"#), 5);
        assert_eq!(s.len(), 1);
        assert_eq!(s.take(&key("a", r#"{"repeat":1}"#)), Some(5));
    }
}
