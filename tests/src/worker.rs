//! A real `tunehub-worker` child process.

use crate::binaries;
use crate::server::TOKEN;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

/// A `tunehub-worker` child process; killed when dropped.
pub struct Worker {
    pub child: Child,
}

impl Worker {
    /// A worker of the server at `url` for device `device`, with `extra` flags. Its log is
    /// dropped, unless TUNEHUB_TEST_LOGS is set (then it goes to the tests' stderr).
    pub fn start(url: &str, device: &str, extra: &[&str]) -> Worker {
        let logs = std::env::var_os("TUNEHUB_TEST_LOGS").is_some();
        let mut cmd = command(url, device, TOKEN, extra);
        if logs {
            cmd.env("RUST_LOG", "info").stderr(Stdio::inherit());
        } else {
            cmd.stderr(Stdio::null());
        }
        Worker::spawn(cmd)
    }

    /// The same, its log into `log`.
    pub fn start_logging(url: &str, device: &str, extra: &[&str], log: &Path) -> Worker {
        Worker::start_with_token(url, device, TOKEN, extra, log)
    }

    /// The same with another token than the server's.
    pub fn start_with_token(
        url: &str,
        device: &str,
        token: &str,
        extra: &[&str],
        log: &Path,
    ) -> Worker {
        let mut cmd = command(url, device, token, extra);
        cmd.stderr(std::fs::File::create(log).expect("the worker's log file"));
        Worker::spawn(cmd)
    }

    fn spawn(mut cmd: Command) -> Worker {
        Worker {
            child: cmd.spawn().expect("tunehub-worker starts"),
        }
    }

    /// SIGKILL: the device is gone mid-piece.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM: the start of a clean stop.
    pub fn sigterm(&self) {
        crate::process::sigterm(&self.child);
    }

    /// Its exit status once it has exited; fails the test after `limit`.
    pub async fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        crate::process::wait_exit(&mut self.child, limit).await
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

fn command(url: &str, device: &str, token: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new(binaries::tunehub_worker());
    cmd.args(["--server", url, "--token", token, "--device-id", device])
        .args(extra)
        .env_remove("RUST_LOG")
        .env_remove("TUNEHUB_CONFIG")
        .stdout(Stdio::null());
    cmd
}

/// Waits until a worker is registered and online; its target key (its pool).
pub async fn wait_pool(c: &mut tunehub::client::Clients) -> String {
    use tunehub_proto::v1 as pb;
    crate::wait::until("a worker registered", Duration::from_secs(60), async || {
        c.workers
            .list(pb::ListWorkersRequest {})
            .await
            .unwrap()
            .into_inner()
            .workers
            .into_iter()
            .find(|w| w.status != "offline")
            .map(|w| w.target_key)
    })
    .await
}

/// A compiler for a worker (`--compiler=PATH`) that reports the real one's version, so that the
/// device keys alike, and fails every build: a real worker process that is quarantined at its
/// first piece.
pub fn broken_compiler(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let broken = dir.join("broken-cc");
    std::fs::write(
        &broken,
        "#!/bin/sh\nif [ \"$1\" = --version ]; then exec cc --version; fi\necho 'broken-cc: no' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
    broken
}
