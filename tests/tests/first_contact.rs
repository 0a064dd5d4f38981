//! What a new user meets first, through the real binaries: a server URL without a scheme, TLS
//! on one side only, a server certificate of a CA the client or worker does not trust (each one
//! line naming the fix), and logs written to a file or a pipe (no colour codes).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use tunehub_tests::certs::Ca;
use tunehub_tests::{Server, TOKEN, Worker, binaries, sqlite_path, wait_pool};

/// `tunehub ARGS` with the token, and nothing from this machine's environment deciding the
/// server or the colours.
fn tunehub(args: &[&str]) -> Output {
    Command::new(binaries::tunehub())
        .args(args)
        .env("TUNEHUB_TOKEN", TOKEN)
        .env_remove("TUNEHUB_SERVER")
        .env_remove("TUNEHUB_CA_CERT")
        .env_remove("TUNEHUB_CONFIG")
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .output()
        .expect("tunehub runs")
}

/// Its stderr, checked to be one line, and its exit status.
fn one_line_error(out: &Output) -> (Option<i32>, String) {
    let err = String::from_utf8_lossy(&out.stderr).trim_end().to_string();
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(err.starts_with("error: "), "{err}");
    (out.status.code(), err)
}

fn no_colour_codes(what: &str, text: &str) {
    assert!(!text.is_empty(), "{what}: no log at all, nothing checked");
    assert!(
        !text.contains("\x1b["),
        "{what} has ANSI colour codes: {text:?}"
    );
}

fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

#[tokio::test]
async fn a_server_url_without_a_scheme_is_http() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&sqlite_path(dir.path(), "plain.db"), "s1", &[]);
    // As `tunehub server` prints its address.
    let out = tunehub(&["jobs", "--server", &server.addr]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("JOB "));

    // Another scheme: bad input.
    let out = tunehub(&["jobs", "--server", &format!("grpc://{}", server.addr)]);
    let (code, err) = one_line_error(&out);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("bad server URL"), "{err}");

    // Nothing there: a failure, its hint said once.
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let out = tunehub(&["jobs", "--server", &gone]);
    let (code, err) = one_line_error(&out);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!("cannot connect to http://{gone}")),
        "{err}"
    );
    assert_eq!(
        err.matches("is `tunehub server` running").count(),
        1,
        "{err}"
    );
}

#[tokio::test]
async fn tls_on_one_side_only_is_named_with_its_fix() {
    let dir = tempfile::tempdir().unwrap();
    let plain = Server::start(&sqlite_path(dir.path(), "plain.db"), "plain", &[]);
    let ca = Ca::new(dir.path(), "ca");
    let leaf = ca.server("server");
    let tls = Server::start(
        &sqlite_path(dir.path(), "tls.db"),
        "tls",
        &["--tls-cert", s(&leaf.cert), "--tls-key", s(&leaf.key)],
    );

    // https:// to a server of plain HTTP/2.
    let out = tunehub(&["jobs", "--server", &format!("https://{}", plain.addr)]);
    let (code, err) = one_line_error(&out);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("speaks plain HTTP/2, not TLS"), "{err}");
    assert!(err.contains(&format!("use http://{}", plain.addr)), "{err}");

    // http:// to a TLS server.
    let out = tunehub(&["jobs", "--server", &format!("http://{}", tls.addr)]);
    let (code, err) = one_line_error(&out);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("speaks TLS"), "{err}");
    assert!(err.contains(&format!("use https://{}", tls.addr)), "{err}");

    // https:// without the CA that signed the server's certificate.
    let url = format!("https://{}", tls.addr);
    let out = tunehub(&["jobs", "--server", &url]);
    let (code, err) = one_line_error(&out);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("a CA this client does not trust") && err.contains("--ca-cert"),
        "{err}"
    );

    // And with it, the same command works.
    let out = tunehub(&["jobs", "--server", &url, "--ca-cert", s(&ca.cert)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A worker whose server's certificate is of a CA it does not trust stops with one line and
/// status 2, instead of retrying forever.
#[tokio::test]
async fn a_worker_that_does_not_trust_its_servers_ca_stops_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let leaf = ca.server("server");
    let other = Ca::new(dir.path(), "other");
    let server = Server::start(
        &sqlite_path(dir.path(), "tls.db"),
        "tls",
        &["--tls-cert", s(&leaf.cert), "--tls-key", s(&leaf.key)],
    );
    let log = dir.path().join("worker.log");
    let mut w = Worker::start_logging(
        &format!("https://{}", server.addr),
        "board-1",
        &["--ca-cert", s(&other.cert)],
        &log,
    );
    let status = w.wait_exit(Duration::from_secs(60)).await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(2), "{text}");
    let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{text}");
    assert!(
        errors[0].contains("a CA this worker does not trust") && errors[0].contains("--ca-cert"),
        "{text}"
    );
}

/// Logs written to a file (the server's, a worker's) or a pipe (a command's stderr) carry no
/// ANSI colour codes: they are read by people in editors and by log collectors.
#[tokio::test]
async fn logs_in_a_file_or_a_pipe_have_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let mut server = Server::on(&sqlite_path(dir.path(), "logs.db"), "s1")
        .args(&["-v"])
        .log(&log)
        .start();
    // A worker logs at info by default: its registration, at least.
    let worker_log = dir.path().join("worker.log");
    let mut w = Worker::start_logging(&server.url(), "board-1", &[], &worker_log);
    wait_pool(&mut server.client().await).await;
    w.sigterm();
    w.wait_exit(Duration::from_secs(60)).await;
    no_colour_codes(
        "the worker's log file",
        &std::fs::read_to_string(&worker_log).unwrap(),
    );
    // A client's debug log, on a pipe: the HTTP/2 connection's lines at least.
    let out = Command::new(binaries::tunehub())
        .args(["jobs", "--server", &server.url(), "--token", TOKEN])
        .env("RUST_LOG", "debug")
        .env_remove("NO_COLOR")
        .env_remove("TUNEHUB_CONFIG")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    no_colour_codes("tunehub's stderr", &String::from_utf8_lossy(&out.stderr));
    server.stop(Duration::from_secs(60)).await;
    no_colour_codes(
        "the server's log file",
        &std::fs::read_to_string(&log).unwrap(),
    );
}
