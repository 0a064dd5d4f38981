//! The API's messages as the command line prints them: text for people (aligned, one line per
//! thing), JSON for scripts (the proto's fields by their names).

pub mod job;
pub mod range;
pub mod record;
pub mod table;
pub mod time;
pub mod workload;
