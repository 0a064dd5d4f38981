//! A real `tunehub server` child process on loopback, and clients of it.

use crate::binaries;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;
use tunehub::client::ClientConfig;
use tunehub::client::{self, Clients};

/// The API token every test server requires.
pub const TOKEN: &str = "test-token-1";

/// A `tunehub server` child process; killed when dropped.
pub struct Server {
    pub child: Child,
    pub addr: String,
    pub instance: String,
    /// The metrics endpoint's address, when started with `--metrics-addr`.
    pub metrics_addr: Option<String>,
    /// The dashboard's URL (`http://ADDR/`), when started with `--http`.
    pub dashboard: Option<String>,
}

/// How to start a server: `Server::on(db, instance)`, then `.args`, `.listen`, `.log`.
pub struct ServerBuilder {
    db: String,
    instance: String,
    listen: String,
    args: Vec<String>,
    log: Option<PathBuf>,
}

impl ServerBuilder {
    /// More flags for `tunehub server`.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// A given address (a restarted server keeps the port its workers know); a free loopback
    /// port otherwise.
    pub fn listen(mut self, addr: &str) -> Self {
        self.listen = addr.to_string();
        self
    }

    /// Its log (stderr) into `path`; inherited otherwise.
    pub fn log(mut self, path: &Path) -> Self {
        self.log = Some(path.to_path_buf());
        self
    }

    /// Starts it and waits for its `listening on ADDR` line (and `metrics on ADDR`, `dashboard
    /// on URL`, when asked for).
    pub fn start(self) -> Server {
        let mut cmd = Command::new(binaries::tunehub());
        cmd.args(["server", "--listen", &self.listen, "--db", &self.db])
            .args(["--token", TOKEN, "--instance", &self.instance])
            // Jobs claimed quickly, and taken over soon after a crash.
            .args(["--poll-ms", "100", "--lease-s", "2"])
            .args(&self.args)
            .env_remove("TUNEHUB_TOKENS")
            .env_remove("TUNEHUB_CONFIG")
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped());
        match &self.log {
            Some(p) => cmd.stderr(std::fs::File::create(p).expect("the server's log file")),
            None => cmd.stderr(Stdio::inherit()),
        };
        let mut child = cmd.spawn().expect("tunehub server starts");
        let mut out = BufReader::new(child.stdout.take().expect("piped"));
        let mut first = |prefix: &str| {
            let mut line = String::new();
            out.read_line(&mut line).expect("the server's stdout");
            line.trim()
                .strip_prefix(prefix)
                .unwrap_or_else(|| panic!("expected {prefix:?}, got {line:?}"))
                .to_string()
        };
        let addr = first("listening on ");
        let metrics_addr = self
            .args
            .iter()
            .any(|a| a == "--metrics-addr")
            .then(|| first("metrics on "));
        let dashboard = self
            .args
            .iter()
            .any(|a| a == "--http")
            .then(|| first("dashboard on "));
        Server {
            child,
            addr,
            instance: self.instance,
            metrics_addr,
            dashboard,
        }
    }
}

impl Server {
    /// A server on `db` (a SQLite path or a PostgreSQL URL), on a free port.
    pub fn on(db: &str, instance: &str) -> ServerBuilder {
        ServerBuilder {
            db: db.to_string(),
            instance: instance.to_string(),
            listen: "127.0.0.1:0".into(),
            args: vec![],
            log: None,
        }
    }

    /// A server on `db` with `extra` flags, its log on the tests' stderr.
    pub fn start(db: &str, instance: &str, extra: &[&str]) -> Server {
        Server::on(db, instance).args(extra).start()
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub async fn client(&self) -> Clients {
        self.client_with(Some(TOKEN)).await
    }

    pub async fn client_with(&self, token: Option<&str>) -> Clients {
        client::connect(&ClientConfig {
            server: self.url(),
            token: token.map(String::from),
            ca_cert: None,
        })
        .await
        .expect("connects")
    }

    /// What the server's health service answers for `service` ("" for the whole server).
    pub async fn health(
        &self,
        service: &str,
    ) -> tonic_health::pb::health_check_response::ServingStatus {
        let mut client = tonic_health::pb::health_client::HealthClient::new(
            tonic::transport::Channel::from_shared(self.url())
                .unwrap()
                .connect()
                .await
                .unwrap(),
        );
        let h = client
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        tonic_health::pb::health_check_response::ServingStatus::try_from(h.status).unwrap()
    }

    /// SIGKILL: a crash, no chance to release anything.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM: the start of a graceful stop.
    pub fn sigterm(&self) {
        crate::process::sigterm(&self.child);
    }

    /// SIGTERM and its exit; fails the test if it takes over `limit`.
    pub async fn stop(&mut self, limit: Duration) -> ExitStatus {
        self.sigterm();
        self.wait_exit(limit).await
    }

    /// Its exit status once it has exited; fails the test after `limit`.
    pub async fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        crate::process::wait_exit(&mut self.child, limit).await
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A SQLite database file `name` in `dir`, as `--db` takes it.
pub fn sqlite_path(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_string()
}
