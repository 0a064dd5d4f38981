//! The Records service: every record out and in as JSON lines (format in the .proto and in
//! docs/cli.md, "Record files"). Import is all or nothing: each line is checked, in order, before
//! anything is stored.

use super::{Api, store_status};
use crate::checks::import::{
    MAX_CLOCK_AHEAD_MS, MAX_COST_S, MAX_COSTS, MAX_ERROR_MSG, MAX_LINE_BYTES, MAX_PHASE_S,
    MAX_WORKER, check_record, check_target,
};
use crate::checks::limits::{MAX_EXPR, MAX_KEY, check_len};
use crate::records::{NewRecord, RangeRow, Record, RecordStore, Workload, canonical_steps, now_ms};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::pin::Pin;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};
use tunehub_engine::ir::ComputeDag;
use tunehub_engine::measure::ErrorCode;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::Target;
use tunehub_engine::task::{Task, WorkloadOptions};
use tunehub_proto::v1 as pb;
use tunehub_proto::v1::records_server::Records;

/// The format's version tag, in every record line.
pub const FORMAT: &str = "tunehub-v1";

/// Lines per streamed message on export.
const LINES_PER_MESSAGE: usize = 256;

/// Most lines one import takes (they are held in memory to check them all first).
const MAX_IMPORT_LINES: usize = 2_000_000;

pub fn workload_line(w: &Workload) -> String {
    let dag: Value = serde_json::from_str(&w.dag_json).unwrap_or(Value::Null);
    let mut v = json!({"key": w.key, "description": w.description, "dag": dag, "flops": w.flops});
    if !w.options.layout_free.is_empty() {
        v["layout_free"] = json!(w.options.layout_free);
    }
    json!({ "workload": v }).to_string()
}

pub fn target_line(key: &str, target_json: &str) -> String {
    let t: Value = serde_json::from_str(target_json).unwrap_or(Value::Null);
    json!({"target": {"key": key, "target": t}}).to_string()
}

/// Ansor's record layout (`i`: input, `r`: result, `v`: version) with tunehub's fields beside.
pub fn record_line(r: &Record) -> String {
    let steps: Value = serde_json::from_str(&r.steps_json).unwrap_or(Value::Null);
    json!({
        "i": [[r.workload_key, r.target_key], [[], steps]],
        "r": [r.costs, r.error_code, r.build_s + r.run_s, r.created_at as f64 / 1000.0],
        "v": FORMAT,
        "e": r.error_msg,
        "noisy": r.noisy,
        "worker": r.worker,
        "build_s": r.build_s,
        "run_s": r.run_s,
    })
    .to_string()
}

/// One parsed line.
#[derive(Debug)]
pub enum Line {
    Workload(Workload),
    Target(String, String),
    /// A shape range, with its representatives' workloads.
    Range(Box<super::range::ImportedRange>),
    Record(NewRecord),
}

fn field<'a>(v: &'a Value, path: &[&str]) -> Result<&'a Value, String> {
    let mut cur = v;
    for p in path {
        cur = cur
            .get(p)
            .ok_or_else(|| format!("missing \"{}\"", path.join(".")))?;
    }
    Ok(cur)
}

fn string(v: &Value, what: &str) -> Result<String, String> {
    v.as_str()
        .map(String::from)
        .ok_or_else(|| format!("{what} is not a string"))
}

fn number(v: &Value, what: &str) -> Result<f64, String> {
    v.as_f64()
        .filter(|x| x.is_finite())
        .ok_or_else(|| format!("{what} is not a finite number"))
}

/// Parses and checks one line: a workload's DAG must have its key, a target's description its
/// key, a record's steps must parse and its costs be finite seconds.
pub fn parse_line(line: &str) -> Result<Line, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    if let Some(r) = v.get("range") {
        return super::range::parse_range_line(r).map(|r| Line::Range(Box::new(r)));
    }
    if let Some(w) = v.get("workload") {
        let key = bounded(
            string(field(w, &["key"])?, "workload.key")?,
            "workload.key",
            MAX_KEY,
        )?;
        let dag: ComputeDag = serde_json::from_value(field(w, &["dag"])?.clone())
            .map_err(|e| format!("workload.dag: {e}"))?;
        // Deserializing checks only the JSON's shape: the DAG's invariants (reads in bounds,
        // sizes within the limit) are checked where every DAG is made.
        let dag = ComputeDag::new(dag.stages).map_err(|e| format!("workload.dag: {e}"))?;
        let mut description = w
            .get("description")
            .and_then(Value::as_str)
            .map(String::from);
        if let Some(d) = &description {
            bounded(d.clone(), "workload.description", MAX_EXPR)?;
        }
        let mut options = match w.get("layout_free") {
            None => WorkloadOptions::default(),
            Some(names) => WorkloadOptions {
                layout_free: serde_json::from_value(names.clone())
                    .map_err(|e| format!("workload.layout_free: {e}"))?,
            },
        };
        // Files exported before options were typed name layout-free inputs in the description
        // only: read there when the key says the workload has some.
        if options.is_empty() && dag.workload_key() != key {
            let (clean, legacy) =
                WorkloadOptions::split_op_spec(description.as_deref().unwrap_or(""));
            if !legacy.is_empty() {
                (description, options) = (Some(clean), legacy);
            }
        }
        let task = Task::new(dag, description.clone().unwrap_or_default())
            .with_options(&options)
            .map_err(|e| format!("workload.layout_free: {e}"))?;
        if task.key != key {
            return Err(format!(
                "workload.dag (with its layout_free) has key {}, not {key}",
                task.key
            ));
        }
        return Ok(Line::Workload(Workload {
            flops: task.flops,
            description,
            dag_json: serde_json::to_string(&task.dag).expect("a DAG serializes"),
            options: task.options(),
            key,
            created_at: 0,
        }));
    }
    if let Some(t) = v.get("target") {
        let key = bounded(
            string(field(t, &["key"])?, "target.key")?,
            "target.key",
            MAX_KEY,
        )?;
        let target: Target = serde_json::from_value(field(t, &["target"])?.clone())
            .map_err(|e| format!("target.target: {e}"))?;
        check_target("target.target", &target)?;
        if target.key() != key {
            return Err(format!("target.target has key {}, not {key}", target.key()));
        }
        return Ok(Line::Target(
            key,
            serde_json::to_string(&target).expect("a target serializes"),
        ));
    }
    let input = field(&v, &["i"])?;
    let keys = input.get(0).ok_or("\"i\" has no [workload, target]")?;
    let workload_key = bounded(
        string(
            keys.get(0).unwrap_or(&Value::Null),
            "i[0][0] (workload key)",
        )?,
        "i[0][0] (workload key)",
        MAX_KEY,
    )?;
    let target_key = bounded(
        string(keys.get(1).unwrap_or(&Value::Null), "i[0][1] (target key)")?,
        "i[0][1] (target key)",
        MAX_KEY,
    )?;
    let steps = input
        .get(1)
        .and_then(|s| s.get(1))
        .ok_or("\"i\" has no [[], steps]")?;
    let steps_json = canonical_steps(&steps.to_string()).map_err(|e| e.to_string())?;
    Schedule::from_json(&steps_json).map_err(|e| format!("steps: {e}"))?;
    let res = field(&v, &["r"])?;
    let costs = res
        .get(0)
        .and_then(Value::as_array)
        .ok_or("r[0] (costs) is not an array")?;
    if costs.len() > MAX_COSTS {
        return Err(format!(
            "r[0] has {} costs; at most {MAX_COSTS}",
            costs.len()
        ));
    }
    let costs = costs
        .iter()
        .map(|c| {
            number(c, "a cost").and_then(|c| {
                if c < 0.0 {
                    Err("a cost is negative".into())
                } else if c > MAX_COST_S {
                    Err(format!("a cost of {c} s is more than {MAX_COST_S} s"))
                } else {
                    Ok(c)
                }
            })
        })
        .collect::<Result<Vec<f64>, String>>()?;
    let error_code = res
        .get(1)
        .and_then(Value::as_i64)
        .ok_or("r[1] (error number) is not an integer")?;
    let error_code = i32::try_from(error_code)
        .ok()
        .filter(|c| ErrorCode::from_code(*c).is_some())
        .ok_or_else(|| format!("r[1]: unknown error number {error_code}"))?;
    if error_code == ErrorCode::NoError.code() && costs.is_empty() {
        return Err("a success (r[1] = 0) without costs".into());
    }
    let latest_s = (now_ms() + MAX_CLOCK_AHEAD_MS) as f64 / 1000.0;
    let created_at = res
        .get(3)
        .map(|t| number(t, "r[3] (timestamp)"))
        .transpose()?
        .map(|t| {
            if (0.0..=latest_s).contains(&t) {
                Ok((t * 1000.0).round() as i64)
            } else {
                Err(format!(
                    "r[3] (timestamp) {t} is not between 0 and a day from now"
                ))
            }
        })
        .transpose()?;
    let phase = |k: &str| -> Result<f64, String> {
        let x = v.get(k).map(|x| number(x, k)).transpose()?.unwrap_or(0.0);
        if (0.0..=MAX_PHASE_S).contains(&x) {
            Ok(x)
        } else {
            Err(format!("{k} is {x}; 0 to {MAX_PHASE_S} s"))
        }
    };
    let opt_string = |k: &str, max: usize| -> Result<Option<String>, String> {
        match v.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(x) => Ok(Some(bounded(string(x, k)?, k, max)?)),
        }
    };
    let noisy = match v.get("noisy") {
        None => false,
        Some(x) => x.as_bool().ok_or("noisy is not a boolean")?,
    };
    match v.get("v") {
        Some(Value::String(tag)) if tag == FORMAT => {}
        Some(tag) => return Err(format!("\"v\" is {tag}, not \"{FORMAT}\"")),
        None => return Err(format!("missing \"v\" (the format tag, \"{FORMAT}\")")),
    }
    Ok(Line::Record(NewRecord {
        workload_key,
        target_key,
        steps_json,
        costs,
        error_code,
        error_msg: opt_string("e", MAX_ERROR_MSG)?.unwrap_or_default(),
        noisy,
        build_s: phase("build_s")?,
        run_s: phase("run_s")?,
        worker: opt_string("worker", MAX_WORKER)?,
        created_at,
    }))
}

/// `s` when it is at most `max` bytes long.
fn bounded(s: String, what: &str, max: usize) -> Result<String, String> {
    if s.len() > max {
        return Err(format!("{what} is {} bytes long; at most {max}", s.len()));
    }
    Ok(s)
}

type LineStream = Pin<Box<dyn Stream<Item = Result<pb::RecordLines, Status>> + Send>>;

#[tonic::async_trait]
impl Records for Api {
    type ExportStream = LineStream;

    async fn export(
        &self,
        req: Request<pb::ExportRequest>,
    ) -> Result<Response<LineStream>, Status> {
        let r = req.get_ref();
        check_len("workload_key", &r.workload_key, MAX_KEY)?;
        check_len("target_key", &r.target_key, MAX_KEY)?;
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let (w, t) = (opt(&r.workload_key), opt(&r.target_key));
        let store = self.store();
        let records = store
            .export_records(w.as_deref(), t.as_deref())
            .await
            .map_err(store_status)?;
        // Definitions first: each workload and target before any record that uses it.
        let mut lines = vec![];
        let mut seen = HashSet::new();
        for rec in &records {
            if seen.insert(("w", rec.workload_key.clone())) {
                let wl = store
                    .workload(&rec.workload_key)
                    .await
                    .map_err(store_status)?
                    .ok_or_else(|| {
                        Status::internal(format!("workload {} missing", rec.workload_key))
                    })?;
                lines.push(workload_line(&wl));
            }
            if seen.insert(("t", rec.target_key.clone())) {
                let json = store
                    .target_json(&rec.target_key)
                    .await
                    .map_err(store_status)?
                    .ok_or_else(|| {
                        Status::internal(format!("target {} missing", rec.target_key))
                    })?;
                lines.push(target_line(&rec.target_key, &json));
            }
        }
        // Shape ranges (of the workload: those it is a representative of), after their targets.
        let ranges: Vec<_> = store
            .export_ranges(t.as_deref())
            .await
            .map_err(store_status)?
            .into_iter()
            .filter(|r| {
                w.as_ref()
                    .is_none_or(|w| r.representatives.iter().any(|p| &p.workload_key == w))
            })
            .collect();
        for r in &ranges {
            if seen.insert(("t", r.target_key.clone())) {
                let json = store
                    .target_json(&r.target_key)
                    .await
                    .map_err(store_status)?
                    .ok_or_else(|| Status::internal(format!("target {} missing", r.target_key)))?;
                lines.push(target_line(&r.target_key, &json));
            }
        }
        lines.extend(ranges.iter().map(super::range::range_line));
        lines.extend(records.iter().map(record_line));
        let chunks: Vec<Result<pb::RecordLines, Status>> = lines
            .chunks(LINES_PER_MESSAGE)
            .map(|c| Ok(pb::RecordLines { lines: c.to_vec() }))
            .collect();
        Ok(Response::new(Box::pin(tokio_stream::iter(chunks))))
    }

    async fn import(
        &self,
        req: Request<Streaming<pb::RecordLines>>,
    ) -> Result<Response<pb::ImportResponse>, Status> {
        let mut stream = req.into_inner();
        let mut lines = vec![];
        let mut n = 0usize;
        while let Some(msg) = stream.next().await {
            for line in msg.map_err(message_too_large)?.lines {
                n += 1;
                if n > MAX_IMPORT_LINES {
                    return Err(Status::resource_exhausted(format!(
                        "more than {MAX_IMPORT_LINES} lines in one import"
                    )));
                }
                if !line.trim().is_empty() {
                    lines.push((n, line));
                }
            }
        }
        // Parsing and replaying are CPU work: off the async threads.
        let parsed = blocking(move || {
            lines
                .into_iter()
                .map(|(n, line)| {
                    let parsed = if line.len() > MAX_LINE_BYTES {
                        Err(format!(
                            "the line is {} bytes long; at most {MAX_LINE_BYTES}",
                            line.len()
                        ))
                    } else {
                        parse_line(&line)
                    };
                    (n, parsed)
                })
                .collect::<Vec<_>>()
        })
        .await?;
        // What the records use and no line before them defines comes from the database.
        let store = self.store();
        let (mut file_w, mut file_t) = (HashSet::new(), HashSet::new());
        let (mut need_w, mut need_t) = (HashSet::new(), HashSet::new());
        for (_, line) in &parsed {
            match line {
                Ok(Line::Workload(w)) => _ = file_w.insert(w.key.clone()),
                Ok(Line::Target(k, _)) => _ = file_t.insert(k.clone()),
                Ok(Line::Range(r)) => {
                    if !file_t.contains(&r.row.target_key) {
                        need_t.insert(r.row.target_key.clone());
                    }
                }
                Ok(Line::Record(r)) => {
                    if !file_w.contains(&r.workload_key) {
                        need_w.insert(r.workload_key.clone());
                    }
                    if !file_t.contains(&r.target_key) {
                        need_t.insert(r.target_key.clone());
                    }
                }
                Err(_) => {}
            }
        }
        let mut db_w = HashMap::new();
        for key in need_w {
            if let Some(w) = store.workload(&key).await.map_err(store_status)? {
                db_w.insert(key, w.to_task().map_err(Status::internal)?);
            }
        }
        let mut db_t = HashMap::new();
        for key in need_t {
            if let Some(json) = store.target_json(&key).await.map_err(store_status)? {
                let t: Target = serde_json::from_str(&json)
                    .map_err(|e| Status::internal(format!("stored target {key}: {e}")))?;
                db_t.insert(key, t);
            }
        }
        let (checked, db_w) = blocking(move || (check_lines(parsed, &db_w, &db_t), db_w)).await?;
        let (workloads, targets, ranges, records) = checked.map_err(Status::invalid_argument)?;
        let (new, known) = store
            .import(&workloads, &targets, &ranges, &records)
            .await
            .map_err(store_status)?;
        self.ctx.cache.clear();
        // The file's workloads were checked as tasks: they read back.
        let tasks = db_w
            .into_iter()
            .map(|(k, t)| (k, std::sync::Arc::new(t)))
            .chain(
                workloads
                    .iter()
                    .filter_map(|w| Some((w.key.clone(), std::sync::Arc::new(w.to_task().ok()?)))),
            )
            .collect();
        // Only an import that stored something new teaches: the same file twice teaches once.
        if new > 0 {
            super::import_teaches::teach(&self.ctx.jobs, tasks, &records).await;
        }
        Ok(Response::new(pb::ImportResponse {
            records_new: new,
            records_known: known,
            workloads: workloads.len() as u64,
            targets: targets.len() as u64,
        }))
    }
}

/// Bad lines named in one refusal; past them, only their count.
const MAX_BAD_LINES_SHOWN: usize = 50;
/// Longest reason shown for one bad line.
const MAX_REASON_CHARS: usize = 300;

type Checked = (
    Vec<Workload>,
    Vec<(String, String)>,
    Vec<RangeRow>,
    Vec<NewRecord>,
);

/// Every parsed line in order, each record against its workload and target (a line before it,
/// else the database): what to store, or one message naming every bad line.
fn check_lines(
    parsed: Vec<(usize, Result<Line, String>)>,
    db_w: &HashMap<String, Task>,
    db_t: &HashMap<String, Target>,
) -> Result<Checked, String> {
    let (mut workloads, mut targets, mut ranges, mut records) = (vec![], vec![], vec![], vec![]);
    let mut file_w: HashMap<String, (ComputeDag, u64)> = HashMap::new();
    let mut file_t: HashMap<String, Target> = HashMap::new();
    let mut bad: Vec<(usize, String)> = vec![];
    for (n, line) in parsed {
        match line {
            Err(e) => bad.push((n, e)),
            Ok(Line::Workload(w)) => {
                let dag: ComputeDag =
                    serde_json::from_str(&w.dag_json).expect("parse_line wrote a DAG");
                file_w.insert(w.key.clone(), (dag, w.flops));
                workloads.push(w);
            }
            Ok(Line::Target(k, json)) => {
                let t: Target = serde_json::from_str(&json).expect("parse_line wrote a target");
                file_t.insert(k.clone(), t);
                targets.push((k, json));
            }
            Ok(Line::Range(r)) => {
                if !file_t.contains_key(&r.row.target_key) && !db_t.contains_key(&r.row.target_key)
                {
                    bad.push((
                        n,
                        format!(
                            "unknown target {} (no target line before it, and not in the database)",
                            r.row.target_key
                        ),
                    ));
                    continue;
                }
                let r = *r;
                for w in r.workloads {
                    let dag: ComputeDag =
                        serde_json::from_str(&w.dag_json).expect("parse_range_line wrote a DAG");
                    file_w.insert(w.key.clone(), (dag, w.flops));
                    workloads.push(w);
                }
                ranges.push(r.row);
            }
            Ok(Line::Record(r)) => {
                let workload = file_w
                    .get(&r.workload_key)
                    .map(|(d, f)| (d, *f))
                    .or_else(|| db_w.get(&r.workload_key).map(|t| (&t.dag, t.flops)));
                let target = file_t
                    .get(&r.target_key)
                    .or_else(|| db_t.get(&r.target_key));
                let verdict = match (workload, target) {
                    (None, _) => Err(format!(
                        "unknown workload {} (no workload line before it, and not in the database)",
                        r.workload_key
                    )),
                    (_, None) => Err(format!(
                        "unknown target {} (no target line before it, and not in the database)",
                        r.target_key
                    )),
                    (Some((dag, flops)), Some(t)) => check_record(&r, dag, flops, t),
                };
                match verdict {
                    Ok(()) => records.push(r),
                    Err(e) => bad.push((n, e)),
                }
            }
        }
    }
    if bad.is_empty() {
        return Ok((workloads, targets, ranges, records));
    }
    Err(refusal(&bad))
}

/// The one message refusing a file: every bad line by number with its reason (the first
/// [`MAX_BAD_LINES_SHOWN`], then their count).
pub fn refusal(bad: &[(usize, String)]) -> String {
    let mut msg = format!(
        "{} bad line{}, nothing stored: ",
        bad.len(),
        if bad.len() == 1 { "" } else { "s" }
    );
    let shown: Vec<String> = bad
        .iter()
        .take(MAX_BAD_LINES_SHOWN)
        .map(|(n, e)| {
            let mut e = e.clone();
            if e.chars().count() > MAX_REASON_CHARS {
                e = e.chars().take(MAX_REASON_CHARS).collect::<String>() + "...";
            }
            format!("line {n}: {e}")
        })
        .collect();
    msg.push_str(&shown.join("; "));
    if bad.len() > MAX_BAD_LINES_SHOWN {
        let _ = write!(msg, "; and {} more", bad.len() - MAX_BAD_LINES_SHOWN);
    }
    msg
}

/// `f` on the blocking pool.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Status::internal(format!("import check: {e}")))
}

/// gRPC's decoder refuses a message over the server's limit as OUT_OF_RANGE; in a stream the
/// service sees it, and answers as the API documents a size limit.
fn message_too_large(s: Status) -> Status {
    if s.code() == tonic::Code::OutOfRange {
        Status::resource_exhausted(s.message().to_string())
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_lines_say_what_is_wrong() {
        for (line, want) in [
            ("{", "not JSON"),
            ("{}", "missing \"i\""),
            (
                r#"{"i": [["w", "t"], [[], [["XX", 1]]]], "r": [[1e-3], 0, 0, 0]}"#,
                "steps",
            ),
            (
                r#"{"i": [["w", "t"], [[], []]], "r": [[-1], 0, 0, 0]}"#,
                "negative",
            ),
            (
                r#"{"i": [["w", "t"], [[], []]], "r": [[1], 99, 0, 0]}"#,
                "unknown error number",
            ),
            (
                r#"{"i": [["w", "t"], [[], []]], "r": [[1], 0, 0, 0], "v": "v0.6"}"#,
                "not \"tunehub-v1\"",
            ),
            (
                r#"{"i": [["w", "t"], [[], []]], "r": [[1], 0, 0, 0]}"#,
                "missing \"v\"",
            ),
            (
                r#"{"i": [["w", "t"], [[], []]], "r": [[], 0, 0, 0], "v": "tunehub-v1"}"#,
                "without costs",
            ),
            (
                r#"{"i": [["w", "t"], [[], []]], "r": [[1e9], 0, 0, 0], "v": "tunehub-v1"}"#,
                "more than 86400",
            ),
            (
                r#"{"i": [["w", "t"], [[], []]], "r": [[1], 0, 0, 1e12], "v": "tunehub-v1"}"#,
                "timestamp",
            ),
            (
                r#"{"i": [["w", "t"], [[], []]], "r": [[1], 0, 0, 0], "v": "tunehub-v1", "run_s": -1}"#,
                "run_s",
            ),
            (
                r#"{"i": [["w", "t"], [[], []]], "r": [[1], 0, 0, 0], "v": "tunehub-v1", "noisy": 1}"#,
                "noisy",
            ),
            (r#"{"workload": {"key": "k", "dag": 3}}"#, "workload.dag"),
            (
                r#"{"workload": {"key": "k", "dag": {}, "layout_free": "B"}}"#,
                "workload.dag",
            ),
        ] {
            let e = parse_line(line).err().unwrap_or_default();
            assert!(e.contains(want), "{line}: {e}");
        }
        let many = format!(
            r#"{{"i": [["w", "t"], [[], []]], "r": [{:?}, 0, 0, 0], "v": "tunehub-v1"}}"#,
            vec![1.0; MAX_COSTS + 1]
        );
        assert!(parse_line(&many).unwrap_err().contains("at most 1000"));
        let long = json!({"i": [["w", "t"], [[], []]], "r": [[1], 2, 0, 0], "v": FORMAT,
            "e": "x".repeat(MAX_ERROR_MSG + 1)});
        assert!(
            parse_line(&long.to_string())
                .unwrap_err()
                .contains("at most")
        );
        // A DAG is checked as every DAG is: reads in bounds, within the size limit.
        let mut dag = serde_json::to_value(tunehub_engine::ops::matmul(8, 8, 8).unwrap()).unwrap();
        dag["stages"][2]["shape"] = json!([8, 9]);
        let line = json!({"workload": {"key": "k", "dag": dag}}).to_string();
        assert!(
            parse_line(&line).unwrap_err().contains("workload.dag"),
            "{line}"
        );
        match parse_line(
            r#"{"i": [["w", "t"], [[], []]], "r": [[0.001, 0.002], 0, 1.5, 1700000000.5], "v": "tunehub-v1"}"#,
        ) {
            Ok(Line::Record(r)) => {
                assert_eq!(
                    (r.costs.len(), r.error_code, r.created_at),
                    (2, 0, Some(1_700_000_000_500))
                );
            }
            _ => panic!("a valid record line"),
        }
    }

    /// `task` as the workload table stores it.
    fn stored(task: &Task) -> Workload {
        Workload {
            key: task.key.clone(),
            description: Some("m".into()),
            dag_json: serde_json::to_string(&task.dag).unwrap(),
            options: WorkloadOptions::default(),
            flops: task.flops,
            created_at: 0,
        }
    }

    /// Every bad line is named with its reason, records checked against the workload and
    /// target lines before them.
    #[test]
    fn every_bad_line_is_named() {
        let task = Task::new(tunehub_engine::ops::matmul(64, 64, 64).unwrap(), "m");
        let w = stored(&task);
        let t = Target::detect();
        let rec = |steps: &str, cost: f64| {
            json!({"i": [[task.key, t.key()], [[], serde_json::from_str::<Value>(steps).unwrap()]],
                "r": [[cost], 0, 0, 0], "v": FORMAT})
            .to_string()
        };
        let lines = [
            workload_line(&w),
            target_line(&t.key(), &serde_json::to_string(&t).unwrap()),
            rec("[]", 1e-3),
            rec(r#"[["SP",2,7,64,[8],1]]"#, 1e-3),
            "not json".to_string(),
            rec("[]", 2e-9),
            rec(r#"[["SP",99,0,64,[8],1]]"#, 1e-3),
        ];
        let parsed = lines
            .iter()
            .enumerate()
            .map(|(i, l)| (i + 1, parse_line(l)))
            .collect();
        let e = check_lines(parsed, &HashMap::new(), &HashMap::new()).expect_err("bad lines");
        assert!(e.starts_with("4 bad lines, nothing stored"), "{e}");
        for want in [
            "line 4: steps do not replay",
            "line 5: not JSON",
            "line 6: cost 2e-9 s is faster than",
            "line 7: steps do not replay",
        ] {
            assert!(e.contains(want), "{want:?} not in {e}");
        }
        assert!(!e.contains("line 3"), "{e}");
        let good = lines[..3]
            .iter()
            .enumerate()
            .map(|(i, l)| (i + 1, parse_line(l)))
            .collect();
        let (ws, ts, _, rs) = check_lines(good, &HashMap::new(), &HashMap::new()).unwrap();
        assert_eq!((ws.len(), ts.len(), rs.len()), (1, 1, 1));
    }

    /// JSON values of every kind, small.
    fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(|x| json!(x)),
            prop::sample::select(vec![0.0, -1.0, 1e-3, 2e-9, 1e300, 86_401.0, 1.7e9])
                .prop_map(|x| json!(x)),
            ".{0,12}".prop_map(Value::from),
            prop::sample::select(vec!["SP", "RE", "FU", "tunehub-v1", "w", "t"])
                .prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::btree_map("[a-z]{1,3}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn fuzz_task() -> (Task, Target) {
        (
            Task::new(tunehub_engine::ops::matmul(8, 8, 8).unwrap(), "m"),
            Target::detect(),
        )
    }

    /// A valid file, then one of its values replaced by an arbitrary one: no panic, a
    /// refusal is a message, and a file with a refused line stores nothing.
    fn check_mutated(path: &[usize], replacement: Value, line_no: usize) -> Result<(), String> {
        use std::sync::OnceLock;
        static FIXTURE: OnceLock<(Task, Target)> = OnceLock::new();
        let (task, target) = FIXTURE.get_or_init(fuzz_task);
        let w = stored(task);
        let mut lines: Vec<Value> = [
            workload_line(&w),
            target_line(&target.key(), &serde_json::to_string(target).unwrap()),
            json!({"i": [[task.key, target.key()], [[], [["SP", 2, 0, 8, [4], 1]]]],
                "r": [[1e-3, 2e-3], 0, 0.5, 1.7e9], "v": FORMAT, "e": "", "noisy": false,
                "worker": "w", "build_s": 0.1, "run_s": 0.2})
            .to_string(),
        ]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
        // Walk down the path (indices taken modulo each level's size) and replace there.
        let line = line_no % lines.len();
        let mut pointer = String::new();
        let mut at = &lines[line];
        for &p in path {
            let (step, next) = match at {
                Value::Array(a) if !a.is_empty() => ((p % a.len()).to_string(), &a[p % a.len()]),
                Value::Object(o) if !o.is_empty() => {
                    let (k, v) = o.iter().nth(p % o.len()).unwrap();
                    (k.replace('~', "~0").replace('/', "~1"), v)
                }
                _ => break,
            };
            pointer.push('/');
            pointer.push_str(&step);
            at = next;
        }
        *lines[line].pointer_mut(&pointer).unwrap() = replacement;
        let parsed: Vec<(usize, Result<Line, String>)> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| (i + 1, parse_line(&l.to_string())))
            .collect();
        let any_bad = parsed.iter().any(|(_, p)| p.is_err());
        if parsed
            .iter()
            .any(|(_, p)| p.as_ref().is_err_and(|e| e.trim().is_empty()))
        {
            return Err("an empty error".into());
        }
        match check_lines(parsed, &HashMap::new(), &HashMap::new()) {
            Ok(_) if any_bad => Err("a file with a bad line would be stored".into()),
            Ok(_) => Ok(()),
            Err(e) if e.contains("nothing stored") && e.contains("line ") => Ok(()),
            Err(e) => Err(format!("an unclear refusal: {e}")),
        }
    }

    // 256 cases each in `cargo test`; `PROPTEST_CASES=100000 cargo test -p tunehub-server
    // import_line` runs a long fuzz.
    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            failure_persistence: None, ..proptest::prelude::ProptestConfig::default()
        })]

        #[test]
        fn import_line_parser_never_panics(s in ".{0,200}") {
            if let Err(e) = parse_line(&s) {
                proptest::prop_assert!(!e.trim().is_empty());
            }
        }

        #[test]
        fn import_line_fuzz_mutated_files_store_nothing_when_refused(
            path in proptest::collection::vec(0usize..16, 0..6),
            replacement in any_json(),
            line in 0usize..3,
        ) {
            check_mutated(&path, replacement, line).map_err(proptest::test_runner::TestCaseError::fail)?;
        }
    }

    #[test]
    fn a_layout_free_workload_goes_out_and_back_with_its_options() {
        let t = Task::new(
            tunehub_engine::ops::matmul(8, 8, 8).unwrap(),
            "matmul(8,8,8)",
        )
        .with_layout_free(&["B"])
        .unwrap();
        let w = Workload {
            key: t.key.clone(),
            description: Some(t.desc.clone()),
            dag_json: serde_json::to_string(&t.dag).unwrap(),
            options: t.options(),
            flops: t.flops,
            created_at: 0,
        };
        let line = workload_line(&w);
        assert!(line.contains(r#""layout_free":["B"]"#), "{line}");
        match parse_line(&line) {
            Ok(Line::Workload(back)) => assert_eq!(back, w),
            _ => panic!("a valid workload line"),
        }
        // A file written before options were typed: the names only in the description.
        let old = json!({"workload": {"key": t.key, "description": "matmul(8,8,8,layout_free=B)",
            "dag": serde_json::from_str::<Value>(&w.dag_json).unwrap(), "flops": t.flops}});
        match parse_line(&old.to_string()) {
            Ok(Line::Workload(back)) => assert_eq!(back, w),
            Err(e) => panic!("{e}"),
            _ => panic!("a workload line"),
        }
        // Without its names the DAG does not make the key.
        let mut bare = serde_json::from_str::<Value>(&line).unwrap();
        bare["workload"]
            .as_object_mut()
            .unwrap()
            .remove("layout_free");
        let e = parse_line(&bare.to_string()).err().unwrap_or_default();
        assert!(e.contains("not"), "{e}");
    }
}
