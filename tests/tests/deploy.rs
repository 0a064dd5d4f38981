//! deploy/ checked for what its tools' schemas cannot see (deploy/check.sh runs those): every
//! YAML file parses; the Kubernetes objects fit together (probes on the gRPC health port, the
//! secrets they read exist, the Service selects the server, workers only on labelled nodes);
//! the compose file wires PostgreSQL, a server and two workers; every setting a deploy file
//! gives the binaries (flags, environment variables and their values) is one they accept; and
//! the Dockerfiles build with the very commands CI runs.

use clap::{CommandFactory, Parser};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use tunehub::Cli;
use tunehub_tests::binaries;
use yaml_serde::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Every document of a YAML file, merge keys (`<<: *anchor`) applied.
fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    yaml_serde::Deserializer::from_str(&text)
        .map(|d| {
            let mut v = Value::deserialize(d)
                .unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()));
            v.apply_merge()
                .unwrap_or_else(|e| panic!("{}: merge keys: {e}", path.display()));
            v
        })
        .filter(|v| !v.is_null())
        .collect()
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn s<'a>(v: &'a Value, path: &str) -> &'a str {
    at(v, path)
        .as_str()
        .unwrap_or_else(|| panic!("{path} is not a string in {v:?}"))
}

/// `a.b.0.c` into a YAML value; Null when missing.
fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    static NULL: Value = Value::Null;
    let mut cur = v;
    for part in path.split('.') {
        cur = match part.parse::<usize>() {
            Ok(i) => cur.get(i),
            Err(_) => cur.get(part),
        }
        .unwrap_or(&NULL);
    }
    cur
}

fn port_of(addr: &str) -> u64 {
    addr.rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("no port in {addr}"))
}

/// The Kubernetes objects of deploy/k8s by (kind, name).
fn k8s() -> BTreeMap<(String, String), Value> {
    let mut files = vec![];
    files_under(&repo().join("deploy/k8s"), &mut files);
    let mut out = BTreeMap::new();
    for f in files {
        for doc in yaml_docs(&f) {
            let kind = s(&doc, "kind").to_string();
            let name = s(&doc, "metadata.name").to_string();
            assert!(at(&doc, "apiVersion").is_string(), "{}", f.display());
            if kind != "Namespace" {
                assert_eq!(s(&doc, "metadata.namespace"), "tunehub", "{kind}/{name}");
            }
            assert!(
                out.insert((kind.clone(), name.clone()), doc).is_none(),
                "{kind}/{name} twice"
            );
        }
    }
    out
}

fn object<'a>(objs: &'a BTreeMap<(String, String), Value>, kind: &str, name: &str) -> &'a Value {
    objs.get(&(kind.to_string(), name.to_string()))
        .unwrap_or_else(|| panic!("no {kind}/{name} in deploy/k8s"))
}

/// Long flag and environment variable of each of `tunehub server`'s options (and the global
/// ones), from the command line definition itself.
fn server_env() -> BTreeMap<String, String> {
    let root = Cli::command();
    let server = root
        .find_subcommand("server")
        .expect("a server command")
        .clone();
    root.get_arguments()
        .chain(server.get_arguments())
        .filter_map(|a| {
            Some((
                a.get_env()?.to_str()?.to_string(),
                a.get_long()?.to_string(),
            ))
        })
        .collect()
}

/// The worker's environment variables and their flags, read off its `--help`.
fn worker_env() -> BTreeMap<String, String> {
    let out = Command::new(binaries::tunehub_worker())
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let mut map = BTreeMap::new();
    for line in help.lines() {
        let Some(flag) = line.trim_start().strip_prefix("--") else {
            continue;
        };
        let flag: String = flag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if let Some((_, rest)) = line.split_once("[env: ") {
            let var: String = rest
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            map.insert(var, flag);
        }
    }
    assert!(map.contains_key("TUNEHUB_SERVER"), "{help}");
    map
}

/// Settings given to the server as arguments and environment: the variables must be the
/// server's, and all of it must parse as `tunehub` arguments (values checked by their flags).
fn assert_server_accepts(what: &str, args: &[String], env: &[(String, Option<String>)]) {
    let known = server_env();
    let mut argv = vec!["tunehub".to_string()];
    argv.extend(args.iter().cloned());
    for (var, value) in env {
        let flag = known
            .get(var)
            .unwrap_or_else(|| panic!("{what}: {var} is not a variable `tunehub server` reads"));
        if let Some(v) = value
            && flag != "allow-unauthenticated"
        {
            argv.push(format!("--{flag}={v}"));
        }
    }
    if let Err(e) = Cli::try_parse_from(&argv) {
        panic!("{what}: `{}` is refused: {e}", argv.join(" "));
    }
}

/// The same for the worker: its flags and variables, checked by running it with
/// `--print-target` (which parses everything, then prints its device and exits).
fn assert_worker_accepts(what: &str, args: &[String], env: &[(String, Option<String>)]) {
    let known = worker_env();
    let mut argv: Vec<String> = args.to_vec();
    for (var, value) in env {
        let flag = known
            .get(var)
            .unwrap_or_else(|| panic!("{what}: {var} is not a variable tunehub-worker reads"));
        if let Some(v) = value {
            argv.push(format!("--{flag}={v}"));
        }
    }
    argv.push("--print-target".into());
    let mut cmd = Command::new(binaries::tunehub_worker());
    for (k, _) in std::env::vars() {
        if k.starts_with("TUNEHUB_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd.args(&argv).output().unwrap();
    assert!(
        out.status.success(),
        "{what}: tunehub-worker {} is refused: {}",
        argv.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A container's environment: literal values, or None for values read from elsewhere.
fn container_env(c: &Value) -> Vec<(String, Option<String>)> {
    at(c, "env")
        .as_sequence()
        .map(|env| {
            env.iter()
                .map(|e| {
                    (
                        s(e, "name").to_string(),
                        at(e, "value").as_str().map(String::from),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

#[test]
fn every_yaml_file_in_deploy_parses() {
    let mut files = vec![];
    files_under(&repo().join("deploy"), &mut files);
    let yaml: Vec<_> = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    assert!(yaml.len() >= 5, "{yaml:?}");
    for f in yaml {
        assert!(!yaml_docs(f).is_empty(), "{}: empty", f.display());
    }
    let kinds: BTreeSet<String> = k8s().keys().map(|(k, _)| k.clone()).collect();
    for k in ["Namespace", "Secret", "Deployment", "Service", "DaemonSet"] {
        assert!(kinds.contains(k), "no {k} in deploy/k8s: {kinds:?}");
    }
}

#[test]
fn k8s_server_is_probed_on_the_grpc_health_port_and_reads_its_secrets() {
    let objs = k8s();
    let dep = object(&objs, "Deployment", "tunehub-server");
    let pod = at(dep, "spec.template.spec");
    let c = at(pod, "containers.0");
    let ports: BTreeMap<&str, u64> = at(c, "ports")
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| (s(p, "name"), at(p, "containerPort").as_u64().unwrap()))
        .collect();
    let env = container_env(c);
    let value = |var: &str| {
        env.iter()
            .find(|(k, _)| k == var)
            .and_then(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no literal {var}"))
    };
    // The server listens where the probes and the Service look.
    let grpc = port_of(&value("TUNEHUB_LISTEN"));
    assert_eq!(ports["grpc"], grpc);
    assert_eq!(ports["metrics"], port_of(&value("TUNEHUB_METRICS_ADDR")));
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(
            at(c, &format!("{probe}.grpc.port")).as_u64(),
            Some(grpc),
            "{probe} asks the gRPC health service on the gRPC port"
        );
    }
    // Readiness: the whole server (NOT_SERVING once a graceful stop begins); liveness: a
    // service served until the end (tests/operations.rs checks both during a stop).
    assert!(at(c, "readinessProbe.grpc.service").is_null());
    assert_eq!(s(c, "livenessProbe.grpc.service"), "tunehub.v1.Query");
    assert!(at(pod, "terminationGracePeriodSeconds").as_u64().unwrap() >= 60);
    // Replicas share the fleet: each advertises its pod's own address to the workers it
    // redirects (the Service's would send them anywhere).
    assert!(at(dep, "spec.replicas").as_u64().unwrap() >= 2);
    let advertise = at(c, "env")
        .as_sequence()
        .unwrap()
        .iter()
        .find(|e| s(e, "name") == "TUNEHUB_ADVERTISE_ADDR")
        .expect("TUNEHUB_ADVERTISE_ADDR");
    assert_eq!(s(advertise, "valueFrom.fieldRef.fieldPath"), "status.podIP");
    assert_eq!(
        at(dep, "spec.selector.matchLabels"),
        at(dep, "spec.template.metadata.labels")
    );

    // Tokens and the database URL come from the Secret, and it has those keys.
    for var in ["TUNEHUB_DB", "TUNEHUB_TOKENS"] {
        let e = at(c, "env")
            .as_sequence()
            .unwrap()
            .iter()
            .find(|e| s(e, "name") == var)
            .unwrap_or_else(|| panic!("no {var}"));
        assert!(
            !at(e, "valueFrom.secretKeyRef").is_null(),
            "{var} from a Secret"
        );
    }
    for ((kind, name), obj) in &objs {
        if kind != "Deployment" && kind != "DaemonSet" {
            continue;
        }
        for c in at(obj, "spec.template.spec.containers")
            .as_sequence()
            .unwrap()
        {
            for e in at(c, "env").as_sequence().into_iter().flatten() {
                let r = at(e, "valueFrom.secretKeyRef");
                if r.is_null() {
                    continue;
                }
                let secret = object(&objs, "Secret", s(r, "name"));
                let key = s(r, "key");
                assert!(
                    !at(secret, &format!("stringData.{key}")).is_null()
                        || !at(secret, &format!("data.{key}")).is_null(),
                    "{kind}/{name} reads key {key} the Secret lacks"
                );
            }
        }
    }

    // The Service selects the server's pods and forwards to its named ports.
    let svc = object(&objs, "Service", "tunehub-server");
    assert_eq!(
        at(svc, "spec.selector"),
        at(dep, "spec.template.metadata.labels")
    );
    for p in at(svc, "spec.ports").as_sequence().unwrap() {
        assert!(ports.contains_key(s(p, "targetPort")), "{p:?}");
        assert_eq!(at(p, "port").as_u64(), Some(ports[s(p, "targetPort")]));
    }

    assert_server_accepts("the server Deployment", &strings(at(c, "args")), &env);
}

#[test]
fn k8s_workers_run_on_labelled_nodes_and_find_the_server() {
    let objs = k8s();
    let ds = object(&objs, "DaemonSet", "tunehub-worker");
    let pod = at(ds, "spec.template.spec");
    let selector = at(pod, "nodeSelector")
        .as_mapping()
        .expect("a nodeSelector");
    assert_eq!(selector.len(), 1, "{selector:?}");
    let (label, value) = selector.iter().next().unwrap();
    let label = format!("{}={}", label.as_str().unwrap(), value.as_str().unwrap());
    assert!(
        read("deploy/README.md").contains("kubectl label node")
            && read("deploy/README.md").contains(&label),
        "deploy/README.md tells how to label a node ({label})"
    );
    let c = at(pod, "containers.0");
    let env = container_env(c);
    let server = env
        .iter()
        .find(|(k, _)| k == "TUNEHUB_SERVER")
        .and_then(|(_, v)| v.clone())
        .expect("TUNEHUB_SERVER");
    // http://SERVICE.NAMESPACE.svc:PORT names the server's Service and its gRPC port.
    let host = server
        .strip_prefix("http://")
        .and_then(|r| r.split(':').next())
        .unwrap();
    let svc_name = host.split('.').next().unwrap();
    let svc = object(&objs, "Service", svc_name);
    assert!(host == svc_name || host.starts_with(&format!("{svc_name}.tunehub.")));
    let port = port_of(&server);
    assert!(
        at(svc, "spec.ports")
            .as_sequence()
            .unwrap()
            .iter()
            .any(|p| s(p, "name") == "grpc" && at(p, "port").as_u64() == Some(port)),
        "{server} is not the Service's gRPC port"
    );
    assert!(at(ds, "spec.selector.matchLabels") == at(ds, "spec.template.metadata.labels"));
    assert_worker_accepts("the worker DaemonSet", &strings(at(c, "args")), &env);
}

/// A compose service's environment (a list or a map), `${VAR...}` replaced by a sample.
fn compose_env(svc: &Value) -> Vec<(String, Option<String>)> {
    let fill = |v: &str| {
        if v.contains("${") {
            "sample-token".to_string()
        } else {
            v.to_string()
        }
    };
    match at(svc, "environment") {
        Value::Mapping(m) => m
            .iter()
            .map(|(k, v)| (k.as_str().unwrap().to_string(), v.as_str().map(fill)))
            .collect(),
        Value::Sequence(l) => l
            .iter()
            .map(|kv| {
                let (k, v) = kv.as_str().unwrap().split_once('=').unwrap();
                (k.to_string(), Some(fill(v)))
            })
            .collect(),
        _ => vec![],
    }
}

/// `ENV` settings of a Dockerfile's last stage.
fn dockerfile_env(text: &str) -> BTreeMap<String, String> {
    let last = text.rsplit("\nFROM ").next().unwrap();
    let joined = last.replace("\\\n", " ");
    let mut out = BTreeMap::new();
    for line in joined.lines() {
        if let Some(rest) = line.strip_prefix("ENV ") {
            for kv in rest.split_whitespace() {
                let (k, v) = kv.split_once('=').expect("ENV KEY=VALUE");
                out.insert(k.to_string(), v.to_string());
            }
        }
    }
    out
}

#[test]
fn compose_runs_postgres_a_server_and_two_workers() {
    let doc = &yaml_docs(&repo().join("deploy/compose.yaml"))[0];
    let services = at(doc, "services").as_mapping().unwrap();
    let dockerfile = |svc: &Value| {
        let ctx = repo().join("deploy").join(s(svc, "build.context"));
        let f = ctx.join(s(svc, "build.dockerfile"));
        assert!(f.is_file(), "{} is missing", f.display());
        f
    };
    let pg = at(doc, "services.postgres");
    assert!(!at(pg, "healthcheck.test").is_null());
    let server = at(doc, "services.server");
    assert_eq!(
        s(server, "depends_on.postgres.condition"),
        "service_healthy"
    );
    let server_file = dockerfile(server);
    assert!(server_file.ends_with("deploy/docker/server.Dockerfile"));
    let env = compose_env(server);
    let db = env
        .iter()
        .find(|(k, _)| k == "TUNEHUB_DB")
        .and_then(|(_, v)| v.clone())
        .unwrap();
    assert!(
        db.starts_with("postgres://") && db.contains("@postgres:5432/"),
        "{db}"
    );
    let image_env = dockerfile_env(&std::fs::read_to_string(&server_file).unwrap());
    let listen = port_of(&image_env["TUNEHUB_LISTEN"]);
    assert_server_accepts(
        "the server image and compose service",
        &["server".into()],
        &overlay(image_env, env),
    );

    let workers: Vec<&Value> = services
        .iter()
        .filter(|(_, v)| {
            at(v, "build.dockerfile")
                .as_str()
                .is_some_and(|d| d.ends_with("worker.Dockerfile"))
        })
        .map(|(_, v)| v)
        .collect();
    assert_eq!(workers.len(), 2);
    let mut devices = BTreeSet::new();
    for w in workers {
        let file = dockerfile(w);
        let env = compose_env(w);
        let get = |k: &str| {
            env.iter()
                .find(|(n, _)| n == k)
                .and_then(|(_, v)| v.clone())
        };
        assert_eq!(
            get("TUNEHUB_SERVER"),
            Some(format!("http://server:{listen}"))
        );
        devices.insert(get("TUNEHUB_DEVICE_ID").expect("a device id per worker"));
        let image_env = dockerfile_env(&std::fs::read_to_string(&file).unwrap());
        assert_worker_accepts("a compose worker", &[], &overlay(image_env, env));
    }
    assert_eq!(devices.len(), 2, "two distinct devices");
}

#[test]
fn dockerfiles_build_with_the_commands_ci_runs() {
    let ci: BTreeSet<String> = read(".ci/run")
        .lines()
        .map(|l| l.trim().to_string())
        .collect();
    let mut files = vec![];
    files_under(&repo().join("deploy/docker"), &mut files);
    let dockerfiles: Vec<_> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "Dockerfile"))
        .collect();
    assert_eq!(dockerfiles.len(), 2, "{dockerfiles:?}");
    for f in dockerfiles {
        let text = std::fs::read_to_string(f).unwrap();
        let builds: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("RUN cargo "))
            .collect();
        assert!(!builds.is_empty(), "{}: no cargo step", f.display());
        for b in builds {
            let cmd = format!("cargo {b}");
            assert!(
                ci.contains(&cmd),
                "{}: `{cmd}` is not a line of .ci/run: CI must build what the image builds",
                f.display()
            );
        }
        // The entry point is the binary the build stage copied in.
        let entry = text
            .lines()
            .find_map(|l| l.strip_prefix("ENTRYPOINT "))
            .expect("an ENTRYPOINT");
        let entry: Vec<String> = serde_json::from_str(entry).unwrap();
        let bin = entry.last().unwrap();
        assert!(
            text.lines()
                .any(|l| l.starts_with("COPY --from=build ") && l.ends_with(bin.as_str())),
            "{}: nothing copies {bin}",
            f.display()
        );
        if let Some(cmd) = text.lines().find_map(|l| l.strip_prefix("CMD ")) {
            let args: Vec<String> = serde_json::from_str(cmd).unwrap();
            assert_server_accepts("the server image's CMD", &args, &[]);
        }
    }
}

/// `[Section]` → key → values (keys may repeat) of a systemd unit.
fn unit(text: &str) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let mut out: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
            continue;
        }
        let (k, v) = line.split_once('=').expect("KEY=VALUE");
        out.entry(section.clone())
            .or_default()
            .entry(k.to_string())
            .or_default()
            .push(v.to_string());
    }
    out
}

/// `VAR=value` lines of an environment file; commented-out examples (`#VAR=...`) by name only.
fn env_file(text: &str) -> Vec<(String, Option<String>)> {
    text.lines()
        .map(str::trim)
        .filter_map(|l| {
            let commented = l.starts_with('#');
            let (k, v) = l.trim_start_matches('#').split_once('=')?;
            let is_var = !k.is_empty() && k.chars().all(|c| c.is_ascii_uppercase() || c == '_');
            is_var.then(|| (k.to_string(), (!commented).then(|| v.to_string())))
        })
        .collect()
}

/// An image's environment overridden by a container's, as a container sees it.
fn overlay(
    image: BTreeMap<String, String>,
    container: Vec<(String, Option<String>)>,
) -> Vec<(String, Option<String>)> {
    let mut all: BTreeMap<String, Option<String>> =
        image.into_iter().map(|(k, v)| (k, Some(v))).collect();
    all.extend(container);
    all.into_iter().collect()
}

#[test]
fn systemd_units_run_the_installed_binaries_with_settings_they_accept() {
    for (file, bin) in [
        ("tunehub-server.service", "/usr/local/bin/tunehub"),
        ("tunehub-worker.service", "/usr/local/bin/tunehub-worker"),
    ] {
        let u = unit(&read(&format!("deploy/systemd/{file}")));
        let service = &u["Service"];
        let exec: Vec<String> = service["ExecStart"][0]
            .split_whitespace()
            .map(String::from)
            .collect();
        assert_eq!(exec[0], bin, "{file}");
        // SIGTERM to the main process only: the compilers and kernels it runs finish.
        assert_eq!(service["KillMode"], ["mixed"], "{file}");
        assert_eq!(service["Restart"], ["on-failure"], "{file}");
        assert!(service.contains_key("User"), "{file}: a dedicated user");
        // The environment file's example is shipped beside the unit, and is all valid.
        let envfile = &service["EnvironmentFile"][0];
        let name = envfile
            .strip_prefix("/etc/tunehub/")
            .unwrap_or_else(|| panic!("{file}: {envfile}"));
        let example = read(&format!("deploy/systemd/{name}.example"));
        let env = env_file(&example);
        assert!(env.len() >= 3, "{name}.example: {env:?}");
        if file == "tunehub-server.service" {
            assert_server_accepts(file, &exec[1..], &env);
        } else {
            assert_worker_accepts(file, &exec[1..], &env);
        }
    }
}

/// The Kubernetes workers hold a worker-role token, not an admin one: the server, given its
/// Secret as Kubernetes mounts it (every key a file under the mount path) and its admin tokens
/// from the Secret's `tokens`, resolves the token the DaemonSet reads to the worker role.
#[test]
fn k8s_workers_hold_a_worker_role_token() {
    use tunehub_server::auth::Role;
    use tunehub_server::config::{ServerArgs, ServerConfig};
    let objs = k8s();
    let secret = object(&objs, "Secret", "tunehub");
    // Keys hold dots (`server.toml`): looked up whole, not as a path.
    let data = |key: &str| {
        at(secret, "stringData")
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("the Secret has no {key}"))
            .to_string()
    };
    let dep = object(&objs, "Deployment", "tunehub-server");
    let pod = at(dep, "spec.template.spec");
    let c = at(pod, "containers.0");
    let env = container_env(c);
    let config = env
        .iter()
        .find(|(k, _)| k == "TUNEHUB_CONFIG")
        .and_then(|(_, v)| v.clone())
        .expect("the server reads a config file (TUNEHUB_CONFIG)");
    // The volume that mounts the Secret, and where.
    let volume = at(pod, "volumes")
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| at(v, "secret.secretName").as_str() == Some("tunehub"))
        .expect("a volume of the Secret");
    let mount = at(c, "volumeMounts")
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| s(m, "name") == s(volume, "name"))
        .expect("the Secret's volume is mounted");
    let mount_path = s(mount, "mountPath");
    let key = config
        .strip_prefix(&format!("{mount_path}/"))
        .expect("the config file is a key of the mounted Secret");

    // The Secret as mounted, under a scratch directory standing for the mount path.
    let dir = tempfile::tempdir().unwrap();
    let keys = at(secret, "stringData").as_mapping().unwrap();
    for k in keys.keys() {
        let k = k.as_str().unwrap();
        let text = data(k).replace(mount_path, dir.path().to_str().unwrap());
        std::fs::write(dir.path().join(k), text).unwrap();
    }
    let admin: Vec<String> = data("tokens").split(',').map(String::from).collect();
    let cfg = ServerConfig::resolve(&ServerArgs {
        config: Some(dir.path().join(key)),
        tokens: admin.clone(),
        ..ServerArgs::default()
    })
    .unwrap();
    let role_of = |secret: &str| {
        cfg.tokens
            .iter()
            .find(|t| t.secret == secret.trim())
            .map(|t| t.role)
    };
    let ds = object(&objs, "DaemonSet", "tunehub-worker");
    let worker_env = at(ds, "spec.template.spec.containers.0.env")
        .as_sequence()
        .unwrap()
        .iter()
        .find(|e| s(e, "name") == "TUNEHUB_TOKEN")
        .expect("the workers' token");
    let worker_key = s(worker_env, "valueFrom.secretKeyRef.key");
    assert_eq!(role_of(&data(worker_key)), Some(Role::Worker));
    for t in &admin {
        assert_eq!(role_of(t), Some(Role::Admin));
    }
}
