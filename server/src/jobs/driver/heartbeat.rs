//! The job's lease kept alive while batches build and run: a task renews it every third of its
//! length and tells the driver when the job was cancelled or the lease lost.

use crate::jobs::JobContext;
use crate::jobs::store::{Holder, JobRow, Lease};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;
use tracing::Instrument;

const HELD: u8 = 0;
const CANCELLED: u8 = 1;
const LOST: u8 = 2;

/// What the heartbeat last heard of the lease, shared with the driver and the measurer.
#[derive(Clone, Default)]
pub(super) struct LeaseState(Arc<AtomicU8>);

impl LeaseState {
    pub fn held(&self) -> bool {
        self.0.load(Ordering::SeqCst) == HELD
    }
    pub fn cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst) == CANCELLED
    }
    pub fn lost(&self) -> bool {
        self.0.load(Ordering::SeqCst) == LOST
    }
}

/// The running heartbeat; dropping it stops it.
pub(super) struct Heartbeat(tokio::task::JoinHandle<()>);

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Heartbeat {
    /// Starts renewing `job`'s lease (this server's current claim of it) into `state`.
    pub fn start(ctx: &JobContext, job: &JobRow, state: LeaseState) -> Heartbeat {
        let (jobs, id, instance, claim, lease_ms) = (
            ctx.jobs.clone(),
            job.id.clone(),
            ctx.instance.clone(),
            job.claims,
            ctx.lease_ms,
        );
        let task = async move {
            loop {
                tokio::time::sleep(Duration::from_millis(lease_ms / 3)).await;
                let holder = Holder {
                    instance: &instance,
                    claim,
                };
                match jobs.renew(&id, holder, lease_ms).await {
                    Ok(Lease::Held) => {}
                    Ok(Lease::Cancelled) => state.0.store(CANCELLED, Ordering::SeqCst),
                    Ok(Lease::Lost) => {
                        state.0.store(LOST, Ordering::SeqCst);
                        return;
                    }
                    Err(e) => tracing::warn!("renewing the lease: {e}"),
                }
            }
        };
        Heartbeat(tokio::spawn(task.in_current_span()))
    }
}
