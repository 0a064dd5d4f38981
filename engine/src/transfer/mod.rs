//! Reuse across shapes: what makes two workloads "the same operator at other extents"
//! (`structure`: a key that ignores extents, and a distance between extents), and how a
//! schedule tuned for one is carried to the other (`adapt`: replayed on the new DAG with its
//! split factors re-fitted). The database's nearest-neighbour lookup, warm starts and
//! zero-shot answers build on these. `range`: shape ranges (dynamic shapes), an operator over a
//! range of one or two extents, its representative shapes and its dispatch table. Across
//! devices, `targets` says which target is nearest another (whose cost model a target without
//! one starts from).

pub mod adapt;
pub mod range;
pub mod structure;
pub mod targets;

pub use adapt::{AdaptError, Adapted, adapt, adapt_with};
pub use range::{RangeError, ShapeRange};
pub use structure::{distance, extents, log_distance, log_extents, structure_key};
pub use targets::{TargetDistance, nearest_target, target_distance};
