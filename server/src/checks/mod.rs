//! The door's checks that the API and the fleet share: bounds on what clients and workers send
//! (`limits`), and what an imported or reported record and target must satisfy (`import`).
//! Below both services, so neither imports the other to check a request.

pub mod import;
pub mod limits;
