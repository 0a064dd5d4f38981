//! tunehub's learned cost model. [`features`] turns a lowered program into Ansor-style feature
//! vectors, one per buffer store; the gradient-boosted ranking model that scores them arrives
//! with its own issue, and until then the search uses the engine's sampler alone.

pub mod features;
