//! The worker fleet: measurement on remote devices (`tunehub-worker`).
//!
//! `registry` holds the workers per target key, the queue of pieces, their leases and the
//! quarantine; `fair` is which job's piece a pool hands out next when jobs share it (by
//! priority); `dispatch` is the job driver's measure backend over it (a batch cut into pieces,
//! one per ready worker); `service` is the `Workers` gRPC service the workers call, and
//! `report` the check of a worker's report at the door (a device is less trusted than the
//! server: a bad report is refused, counted against the worker, and measured elsewhere).
//! `owners` is which server replica owns each pool, under a database lease. `lapses` counts
//! the leases a worker let lapse without a report (a pull-only worker is quarantined);
//! `oversized` logs a report gRPC's decoder refused for its size before `service` saw it.
//!
//! A device that dies costs seconds, never the job: its lease lapses when its heartbeats stop,
//! the piece goes back to the queue and to another worker, and a late report under the lapsed
//! lease is ignored. Each candidate's result is taken once (a batch slot is filled once), and
//! the records table's `UNIQUE(workload, target, schedule)` makes any repeat a no-op besides.

pub mod dispatch;
pub mod fair;
pub mod lapses;
pub mod oversized;
pub mod owners;
pub mod registry;
pub mod report;
pub mod service;

pub use dispatch::FleetBackend;
pub use owners::{OwnerStore, PoolOwners};
pub use registry::{Fleet, FleetConfig};
pub use service::WorkersService;
