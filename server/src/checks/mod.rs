//! The door's checks that the API and the fleet share: bounds on what clients and workers send
//! (`limits`), the memory a workload's measurement needs (`memory`), strings shown to people
//! (`text`), and what an imported or reported record and target must satisfy (`import`).
//! Below both services, so neither imports the other to check a request.

pub mod import;
pub mod limits;
pub mod memory;
pub mod text;
