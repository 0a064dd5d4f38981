//! Record files made and read outside the service: tunehub's export turned into Ansor's log
//! lines and back (`ansor`), and the fastest records of an export kept for a pre-tuned pack
//! (`distill`). Both read and write the Records service's line format (`api::records`); the
//! command line runs them offline, on files, and sends the service only what it imports.

pub mod ansor;
pub mod distill;
