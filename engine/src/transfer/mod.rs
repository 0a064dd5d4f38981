//! Reuse across shapes: what makes two workloads "the same operator at other extents"
//! (`structure`: a key that ignores extents, and a distance between extents), and how a
//! schedule tuned for one is carried to the other (`adapt`: replayed on the new DAG with its
//! split factors re-fitted). The database's nearest-neighbour lookup, warm starts and
//! zero-shot answers build on these.

pub mod adapt;
pub mod structure;

pub use adapt::{AdaptError, Adapted, adapt};
pub use structure::{distance, extents, structure_key};
