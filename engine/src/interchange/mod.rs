//! Records other tools read and write: [`ansor`], TVM's auto_scheduler log format.

pub mod ansor;
