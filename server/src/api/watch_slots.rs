//! Open Watch streams per token: a stream costs a task and a share of its job's feed for as
//! long as the client keeps it open, read or not, so one token holds at most
//! `MAX_WATCHES_PER_TOKEN` at once; past it a Watch is RESOURCE_EXHAUSTED until one closes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tonic::Status;

/// Watch streams one token may hold open: far more than a terminal or a dashboard watches.
pub const MAX_WATCHES_PER_TOKEN: usize = 64;

/// Open streams by token name.
#[derive(Default)]
pub struct WatchSlots {
    open: Mutex<HashMap<String, usize>>,
}

/// One open stream, given back when dropped (the stream's task ends).
pub struct Slot {
    slots: Arc<WatchSlots>,
    token: String,
}

impl WatchSlots {
    /// A slot for a stream of `token`, or RESOURCE_EXHAUSTED when it holds them all.
    pub fn take(self: &Arc<Self>, token: &str) -> Result<Slot, Status> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(token.to_string()).or_insert(0);
        if *n >= MAX_WATCHES_PER_TOKEN {
            return Err(Status::resource_exhausted(format!(
                "token '{token}' has {MAX_WATCHES_PER_TOKEN} Watch streams open, the most one \
                 token may: close one first"
            )));
        }
        *n += 1;
        Ok(Slot {
            slots: Arc::clone(self),
            token: token.to_string(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.token) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.token);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_holds_at_most_the_limit_and_a_closed_stream_frees_its_slot() {
        let slots = Arc::new(WatchSlots::default());
        let mut held: Vec<Slot> = (0..MAX_WATCHES_PER_TOKEN)
            .map(|_| slots.take("a").unwrap())
            .collect();
        let e = slots.take("a").err().unwrap();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
        // Another token is not held back by this one.
        drop(slots.take("b").unwrap());
        held.pop();
        held.push(slots.take("a").unwrap());
        drop(held);
        assert!(slots.open.lock().unwrap().is_empty());
    }
}
