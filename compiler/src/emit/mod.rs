//! A compiled model's files: `NAME.c` (`source`), `NAME.h` (`header`), `NAME.weights`
//! (`crate::weights`) and `manifest.json` (`manifest`).

mod dynamic;
pub mod header;
pub mod manifest;
pub mod source;
