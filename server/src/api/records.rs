//! The Records service: every record out and in as JSON lines (format in the .proto and in
//! README.md, "Record files"). Import is all or nothing: each line is checked, in order, before
//! anything is stored.

use super::{Api, internal};
use crate::records::{NewRecord, Record, RecordStore, Workload, canonical_steps};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
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
pub enum Line {
    Workload(Workload),
    Target(String, String),
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
    if let Some(w) = v.get("workload") {
        let key = string(field(w, &["key"])?, "workload.key")?;
        let dag: ComputeDag = serde_json::from_value(field(w, &["dag"])?.clone())
            .map_err(|e| format!("workload.dag: {e}"))?;
        let mut description = w
            .get("description")
            .and_then(Value::as_str)
            .map(String::from);
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
        let key = string(field(t, &["key"])?, "target.key")?;
        let target: Target = serde_json::from_value(field(t, &["target"])?.clone())
            .map_err(|e| format!("target.target: {e}"))?;
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
    let workload_key = string(
        keys.get(0).unwrap_or(&Value::Null),
        "i[0][0] (workload key)",
    )?;
    let target_key = string(keys.get(1).unwrap_or(&Value::Null), "i[0][1] (target key)")?;
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
        .ok_or("r[0] (costs) is not an array")?
        .iter()
        .map(|c| {
            number(c, "a cost").and_then(|c| {
                if c >= 0.0 {
                    Ok(c)
                } else {
                    Err("a cost is negative".into())
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
    let created_at = res
        .get(3)
        .map(|t| number(t, "r[3] (timestamp)"))
        .transpose()?
        .map(|s| (s * 1000.0).round() as i64);
    let opt_num = |k: &str| v.get(k).map(|x| number(x, k)).transpose();
    Ok(Line::Record(NewRecord {
        workload_key,
        target_key,
        steps_json,
        costs,
        error_code,
        error_msg: v.get("e").and_then(Value::as_str).unwrap_or("").to_string(),
        noisy: v.get("noisy").and_then(Value::as_bool).unwrap_or(false),
        build_s: opt_num("build_s")?.unwrap_or(0.0),
        run_s: opt_num("run_s")?.unwrap_or(0.0),
        worker: v.get("worker").and_then(Value::as_str).map(String::from),
        created_at,
    }))
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
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let (w, t) = (opt(&r.workload_key), opt(&r.target_key));
        let store = self.store();
        let records = store
            .export_records(w.as_deref(), t.as_deref())
            .await
            .map_err(internal)?;
        // Definitions first: each workload and target before any record that uses it.
        let mut lines = vec![];
        let mut seen = HashSet::new();
        for rec in &records {
            if seen.insert(("w", rec.workload_key.clone())) {
                let wl = store
                    .workload(&rec.workload_key)
                    .await
                    .map_err(internal)?
                    .ok_or_else(|| {
                        Status::internal(format!("workload {} missing", rec.workload_key))
                    })?;
                lines.push(workload_line(&wl));
            }
            if seen.insert(("t", rec.target_key.clone())) {
                let json = store
                    .target_json(&rec.target_key)
                    .await
                    .map_err(internal)?
                    .ok_or_else(|| {
                        Status::internal(format!("target {} missing", rec.target_key))
                    })?;
                lines.push(target_line(&rec.target_key, &json));
            }
        }
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
        let store = self.store();
        let (mut workloads, mut targets, mut records) = (vec![], vec![], vec![]);
        let mut known_w: HashMap<String, ()> = HashMap::new();
        let mut known_t: HashSet<String> = HashSet::new();
        let mut n = 0usize;
        while let Some(msg) = stream.next().await {
            for line in msg?.lines {
                n += 1;
                if n > MAX_IMPORT_LINES {
                    return Err(Status::resource_exhausted(format!(
                        "more than {MAX_IMPORT_LINES} lines in one import"
                    )));
                }
                if line.trim().is_empty() {
                    continue;
                }
                let bad = |m: String| Status::invalid_argument(format!("line {n}: {m}"));
                match parse_line(&line).map_err(bad)? {
                    Line::Workload(w) => {
                        known_w.insert(w.key.clone(), ());
                        workloads.push(w);
                    }
                    Line::Target(k, j) => {
                        known_t.insert(k.clone());
                        targets.push((k, j));
                    }
                    Line::Record(r) => {
                        if !known_w.contains_key(&r.workload_key) {
                            if store
                                .workload(&r.workload_key)
                                .await
                                .map_err(internal)?
                                .is_none()
                            {
                                return Err(bad(format!(
                                    "unknown workload {} (no workload line before it, and not in the database)",
                                    r.workload_key
                                )));
                            }
                            known_w.insert(r.workload_key.clone(), ());
                        }
                        if !known_t.contains(&r.target_key) {
                            if store
                                .target_json(&r.target_key)
                                .await
                                .map_err(internal)?
                                .is_none()
                            {
                                return Err(bad(format!(
                                    "unknown target {} (no target line before it, and not in the database)",
                                    r.target_key
                                )));
                            }
                            known_t.insert(r.target_key.clone());
                        }
                        records.push(r);
                    }
                }
            }
        }
        let (new, known) = store
            .import(&workloads, &targets, &records)
            .await
            .map_err(internal)?;
        self.ctx.cache.clear();
        Ok(Response::new(pb::ImportResponse {
            records_new: new,
            records_known: known,
            workloads: workloads.len() as u64,
            targets: targets.len() as u64,
        }))
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
            (r#"{"workload": {"key": "k", "dag": 3}}"#, "workload.dag"),
            (
                r#"{"workload": {"key": "k", "dag": {}, "layout_free": "B"}}"#,
                "workload.dag",
            ),
        ] {
            let e = parse_line(line).err().unwrap_or_default();
            assert!(e.contains(want), "{line}: {e}");
        }
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
