//! A job's priority: the order in which a pool's queued jobs are claimed, and the weight of a
//! running job's share of the pool's devices (`crate::fleet::fair`).

/// Job priorities: higher is claimed first within a target pool, and gets a larger share of it.
pub const MIN_PRIORITY: i32 = -10;
pub const MAX_PRIORITY: i32 = 10;

/// The share of a job of `priority` (clamped to the range): 2^(priority/5). Each 5 steps double
/// it: priority 5 gets twice the devices of priority 0, 10 four times, -10 a quarter. Why
/// exponential: a step means the same ratio anywhere on the scale, and the extremes (16 to 1)
/// still leave the lowest job some progress.
pub fn weight(priority: i32) -> f64 {
    let p = priority.clamp(MIN_PRIORITY, MAX_PRIORITY);
    // Whole powers exact (the fair queue's tests compare passes exactly).
    2f64.powi(p.div_euclid(5)) * 2f64.powf(f64::from(p.rem_euclid(5)) / 5.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_double_every_five_steps_of_priority() {
        assert_eq!(weight(0), 1.0);
        assert_eq!(weight(5), 2.0);
        assert_eq!(weight(10), 4.0);
        assert_eq!(weight(-5), 0.5);
        assert_eq!(weight(-10), 0.25);
        assert_eq!(weight(99), 4.0, "clamped");
        assert_eq!(weight(-99), 0.25, "clamped");
        assert!((weight(1) - 2f64.powf(0.2)).abs() < 1e-15);
        assert!((weight(-1) - 2f64.powf(-0.2)).abs() < 1e-15);
        for p in MIN_PRIORITY..MAX_PRIORITY {
            assert!(weight(p) < weight(p + 1), "monotone at {p}");
        }
    }
}
