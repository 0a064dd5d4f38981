//! Length limits of the API's client strings, checked before anything else is read: a string
//! that is stored (a job's name) is shown back to every user, so one oversized value would
//! break every listing. The bounds are far past any real value; `docs/validation.md` lists
//! them.

use tonic::Status;

/// Most candidates per round (a job's batch, a worker's report).
pub const MAX_BATCH: u32 = 1024;
/// A job's name.
pub const MAX_NAME: usize = 256;
/// A key or id: workload, target, job, record (the server's are 18 to 40 characters).
pub const MAX_KEY: usize = 128;
/// An op spec (`conv2d_nchw(n=1, c=64, ...)`).
pub const MAX_OP_SPEC: usize = 1024;
/// A text-form program.
pub const MAX_EXPR: usize = 64 << 10;
/// A layout-free input's name, and how many a workload names.
pub const MAX_INPUT_NAME: usize = 64;
pub const MAX_LAYOUT_FREE: usize = 64;
/// The memory a workload's measurement allocates (`checks::memory`): inputs, outputs,
/// intermediates and packed weights. Targets do not describe their memory, so one bound for
/// all: 4 GiB is past every network layer tunehub tunes (hundreds of MiB at batch 64) yet
/// allocatable on a small device; a larger workload is refused rather than queued as a job
/// that can never run a candidate.
pub const MAX_WORKLOAD_BYTES: u64 = 4 << 30;

/// INVALID_ARGUMENT when `value` is longer than `max` bytes.
pub fn check_len(what: &str, value: &str, max: usize) -> Result<(), Status> {
    if value.len() > max {
        return Err(Status::invalid_argument(format!(
            "{what} is {} bytes long; at most {max}",
            value.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_string_is_refused_with_its_length() {
        assert!(check_len("name", "ok", MAX_NAME).is_ok());
        let e = check_len("name", &"x".repeat(MAX_NAME + 1), MAX_NAME).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("257 bytes"), "{}", e.message());
    }
}
