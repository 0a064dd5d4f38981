//! Ansor-style search: sketches of a DAG, random annotation into complete schedules, mutation,
//! an evolutionary strategy ranked by a cost model, and a task scheduler that shares a job's
//! trials among its tasks.
//!
//! The seams:
//! - [`CostModel`]: `predict` scores for lowered candidates, `update` with measurements.
//! - [`SketchRule`]: a value in an ordered list per target; a target or a user may bring its own.
//! - [`TaskSearch`]: one task's search state: `next_batch` proposes unmeasured candidates,
//!   `record` takes their results (and `add_measured` re-adds old records when a job resumes).
//! - [`TaskScheduler`]: which task gets the next round.
//!
//! [`Tuner`] owns the tuning round (scheduler, search, cost model, measurement, confirmation of
//! a new best); the server's job driver and the benchmark both run it, the driver wrapping each
//! round with persistence, leases and events.

pub mod annotate;
pub mod confirm;
pub mod cost_model;
pub mod evolve;
pub mod mutate;
pub mod recover;
pub mod requiet;
pub mod scheduler;
pub mod sketch;
pub mod tune;

pub use confirm::{Second, Verdict, confirm_new_best, hold_unconfirmed};
pub use cost_model::{CostModel, CostModelError, RandomModel};
pub use evolve::{DEFAULT_POPULATION, SearchParams, SearchStats, TaskSearch};
pub use scheduler::{SchedulerKind, TaskScheduler};
pub use sketch::{Sketch, SketchRule};
pub use tune::{DEFAULT_BATCH, Round, RoundReport, TuneOptions, Tuner, TunerTask, tune};
