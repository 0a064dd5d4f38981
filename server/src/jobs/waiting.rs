//! Why a job that has a device to measure on is not measuring alone, in words (`Job.waiting`):
//! queued behind the job of the server's own machine, queued because its pool runs its maximum
//! of jobs, or running on a pool it shares with other jobs (and its share of the workers).

use super::priority::weight;

/// The other jobs, at most this many named.
const NAMED: usize = 3;

/// Where a job stands among the running jobs of its target pool.
#[derive(Debug, Clone, Copy)]
pub struct PoolView<'a> {
    pub target_key: &'a str,
    /// The job is running (else queued).
    pub running: bool,
    pub priority: i32,
    /// The pool's other running jobs, (id, priority), highest priority first.
    pub others: &'a [(String, i32)],
    /// Most jobs the pool runs at once.
    pub limit: usize,
    /// The server's own machine: its jobs run one at a time.
    pub exclusive: bool,
}

fn named(others: &[(String, i32)]) -> String {
    let mut ids: Vec<&str> = others
        .iter()
        .take(NAMED)
        .map(|(id, _)| id.as_str())
        .collect();
    if others.len() > NAMED {
        ids.push("...");
    }
    ids.join(", ")
}

/// The job's `waiting` message from its pool's point of view; empty when it runs alone, or
/// is about to be claimed (its pool has room).
pub fn pool_waiting(v: &PoolView) -> String {
    let key = v.target_key;
    if v.others.is_empty() {
        return String::new();
    }
    let n = v.others.len();
    match (v.running, v.exclusive) {
        (false, true) => format!(
            "queued behind job {} on target {key}: jobs measured on the server's own machine run \
             one at a time (kernels are never timed two at once), highest priority first",
            v.others[0].0
        ),
        (false, false) if n >= v.limit => format!(
            "queued: pool {key} runs its maximum of {} job{} at once ({}); the highest \
             priority starts first",
            v.limit,
            if v.limit == 1 { "" } else { "s" },
            named(v.others)
        ),
        (false, false) => String::new(),
        // Running alone on the server's own machine (another "running" one is a dead server's,
        // to be taken over): nothing shared.
        (true, true) => String::new(),
        (true, false) => {
            let mine = weight(v.priority);
            let all = mine + v.others.iter().map(|(_, p)| weight(*p)).sum::<f64>();
            format!(
                "sharing pool {key} with {n} other job{} ({}): by priority it gets {:.0}% of the \
                 pool's pieces while they all have pieces waiting",
                if n == 1 { "" } else { "s" },
                named(v.others),
                100.0 * mine / all
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn others(ps: &[i32]) -> Vec<(String, i32)> {
        ps.iter()
            .enumerate()
            .map(|(i, &p)| (format!("j-{i}"), p))
            .collect()
    }

    fn view<'a>(running: bool, priority: i32, others: &'a [(String, i32)]) -> PoolView<'a> {
        PoolView {
            target_key: "K",
            running,
            priority,
            others,
            limit: 2,
            exclusive: false,
        }
    }

    #[test]
    fn alone_or_with_room_says_nothing() {
        assert_eq!(pool_waiting(&view(true, 0, &[])), "");
        assert_eq!(pool_waiting(&view(false, 0, &[])), "");
        assert_eq!(
            pool_waiting(&view(false, 0, &others(&[0]))),
            "",
            "room for two"
        );
    }

    #[test]
    fn a_full_pool_says_its_maximum_and_who_fills_it() {
        assert_eq!(
            pool_waiting(&view(false, 0, &others(&[5, 0]))),
            "queued: pool K runs its maximum of 2 jobs at once (j-0, j-1); the highest priority \
             starts first"
        );
        let o = others(&[0; 5]);
        let v = PoolView {
            limit: 1,
            ..view(false, 0, &o)
        };
        assert_eq!(
            pool_waiting(&v),
            "queued: pool K runs its maximum of 1 job at once (j-0, j-1, j-2, ...); the highest \
             priority starts first"
        );
    }

    #[test]
    fn a_shared_pool_says_the_share_by_priority() {
        assert_eq!(
            pool_waiting(&view(true, 0, &others(&[0]))),
            "sharing pool K with 1 other job (j-0): by priority it gets 50% of the pool's pieces \
             while they all have pieces waiting"
        );
        // Weights 4 (priority 10) against 2 and 1 and 1: a half.
        assert_eq!(
            pool_waiting(&view(true, 10, &others(&[5, 0, 0]))),
            "sharing pool K with 3 other jobs (j-0, j-1, j-2): by priority it gets 50% of the \
             pool's pieces while they all have pieces waiting"
        );
        assert!(pool_waiting(&view(true, -10, &others(&[10]))).contains("gets 6%"));
    }

    #[test]
    fn the_servers_own_machine_queues_one_at_a_time() {
        let o = others(&[0]);
        let v = PoolView {
            exclusive: true,
            limit: 1,
            ..view(false, 0, &o)
        };
        assert!(
            pool_waiting(&v).starts_with("queued behind job j-0 on target K: jobs measured on"),
            "{}",
            pool_waiting(&v)
        );
        let v = PoolView { running: true, ..v };
        assert_eq!(pool_waiting(&v), "");
    }
}
