//! One reader of a watched job for all its watchers: the first Watch of a job starts a task
//! that re-reads the job when this server changes something (else every `POLL`: it may run on
//! another server) and publishes it; every other Watch of the job subscribes to that. Five
//! hundred watchers of one job cost one database read per poll, not five hundred. The task
//! ends when its last watcher has gone, or with the job.

use super::Api;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tonic::Status;
use tunehub_proto::v1 as pb;

/// How often a feed re-reads a job it was not woken for.
pub const POLL: Duration = Duration::from_millis(300);

/// The job as last read (or why it could not be read).
pub type Read = Result<Arc<pb::Job>, Status>;

/// The feeds of the jobs being watched on this server.
#[derive(Default)]
pub struct JobFeeds {
    /// By job id: the feed's number (which one it is) and a receiver of it.
    feeds: Mutex<HashMap<String, (u64, watch::Receiver<Read>)>>,
    next: AtomicU64,
}

impl JobFeeds {
    /// A receiver of job `id`'s reads, starting from `first` (a read just made) when no feed
    /// runs for it; the current read of the running one otherwise.
    pub fn subscribe(&self, api: &Api, id: &str, first: Arc<pb::Job>) -> watch::Receiver<Read> {
        let mut feeds = self.feeds.lock().unwrap_or_else(|p| p.into_inner());
        // A feed whose task ended (its job final, or a read failed) is replaced.
        if let Some((_, rx)) = feeds.get(id)
            && rx.has_changed().is_ok()
        {
            return rx.clone();
        }
        let (tx, rx) = watch::channel(Ok(first));
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        feeds.insert(id.to_string(), (n, rx.clone()));
        tokio::spawn(feed(api.clone(), id.to_string(), n, tx));
        rx
    }

    /// Forgets `id`'s feed if it is feed `n` (a newer one may have replaced it)
    /// and, unless `always`, only when no watcher holds it: under the lock `subscribe` takes,
    /// so that no watcher joins a feed as it retires. Whether it was forgotten.
    fn retire(&self, id: &str, n: u64, tx: &watch::Sender<Read>, always: bool) -> bool {
        let mut feeds = self.feeds.lock().unwrap_or_else(|p| p.into_inner());
        // The map holds one receiver: more than that is a watcher.
        if !always && tx.receiver_count() > 1 {
            return false;
        }
        if feeds.get(id).is_some_and(|(m, _)| *m == n) {
            feeds.remove(id);
        }
        true
    }
}

/// Reads job `id` until its last watcher has gone, it is final, or a read fails, publishing
/// each read that differs from the last.
async fn feed(api: Api, id: String, n: u64, tx: watch::Sender<Read>) {
    let mut changes = api.ctx.subscribe();
    loop {
        let ended = tx
            .borrow()
            .as_ref()
            .map_or(true, |j| super::jobs::is_final(j.state));
        if ended || api.ctx.shutting_down() {
            api.feeds.retire(&id, n, &tx, true);
            return;
        }
        if api.feeds.retire(&id, n, &tx, false) {
            return;
        }
        let _ = tokio::time::timeout(POLL, changes.changed()).await;
        match api.get_job(&id).await {
            Ok(j) => {
                tx.send_if_modified(|last| match last {
                    Ok(l) if **l == j => false,
                    _ => {
                        *last = Ok(Arc::new(j));
                        true
                    }
                });
            }
            Err(e) => {
                let _ = tx.send_replace(Err(e));
            }
        }
    }
}
