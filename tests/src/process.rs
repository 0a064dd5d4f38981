//! Child processes of the tests: signals, and their exit awaited.

use std::process::{Child, ExitStatus};
use std::time::Duration;

/// SIGTERM: a clean stop.
pub fn sigterm(child: &Child) {
    let pid = libc::pid_t::try_from(child.id()).expect("a pid fits pid_t");
    // SAFETY: kill(2) touches no memory of this process. (The tests signal a child before
    // they reap it, so the pid is still the child's.)
    let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(
        rc,
        0,
        "kill -TERM {pid}: {}",
        std::io::Error::last_os_error()
    );
}

/// The child's exit status, once it has exited; fails the test after `limit`.
pub async fn wait_exit(child: &mut Child, limit: Duration) -> ExitStatus {
    let pid = child.id();
    crate::wait::until(&format!("process {pid} exits"), limit, async || {
        child.try_wait().expect("waitpid")
    })
    .await
}
