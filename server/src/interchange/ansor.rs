//! Record files in Ansor's log format (TVM 0.19's auto_scheduler), for the operators the
//! engine maps (`tunehub_engine::interchange::ansor`): our export's lines as Ansor lines, and
//! Ansor lines as ours, which the import then checks as any file (steps replayed, costs
//! within the target's peak). Only `i`/`r`/`v` fields: Ansor's reader takes nothing else.
//!
//! Written: workload key (see the engine module), the TVM target the user names, hardware
//! parameters from our target, layout rewrite 0 (TVM builds on the original layouts; see the
//! engine module), steps renumbered to Ansor's stages; error numbers as Ansor's
//! `MeasureErrorNO`, a failure's costs `[1e10]` as Ansor writes them. Left out: noisy
//! records (Ansor's file has no place to say they are not trusted), workloads without a TE
//! twin, schedules with a step without an Ansor twin; each counted with its reason.
//!
//! Read: a failure's costs are dropped (Ansor writes 1e10 s there); the records belong to
//! the target the importer names, since Ansor's target string does not describe a machine.

use crate::api::records::{FORMAT, Line, parse_line, refusal, target_line, workload_line};
use crate::records::Workload;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use tunehub_engine::interchange::ansor::{self, AnsorWorkload, LOG_VERSION};
use tunehub_engine::measure::ErrorCode;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;

/// The cost Ansor writes for a failed measurement.
const ANSOR_FAILED_COST: f64 = 1e10;

/// Ansor's `MeasureErrorNO` of our error code.
fn error_to_ansor(code: i32) -> i64 {
    match ErrorCode::from_code(code) {
        Some(ErrorCode::NoError) => 0,
        Some(ErrorCode::InvalidSchedule) => 1,
        Some(ErrorCode::CompileError) => 2,
        Some(ErrorCode::RuntimeError) => 4,
        Some(ErrorCode::WrongAnswer) => 5,
        Some(ErrorCode::CompileTimeout) => 6,
        Some(ErrorCode::RunTimeout) => 7,
        Some(ErrorCode::UnknownError) | None => 8,
    }
}

/// Our error code of Ansor's `MeasureErrorNO`.
fn error_from_ansor(no: i64) -> Option<ErrorCode> {
    Some(match no {
        0 => ErrorCode::NoError,
        1 => ErrorCode::InvalidSchedule,
        2 | 3 => ErrorCode::CompileError,
        4 => ErrorCode::RuntimeError,
        5 => ErrorCode::WrongAnswer,
        6 => ErrorCode::CompileTimeout,
        7 => ErrorCode::RunTimeout,
        8 => ErrorCode::UnknownError,
        _ => return None,
    })
}

/// An export in Ansor's format: its lines, and the records left out by reason.
#[derive(Debug, Default)]
pub struct Exported {
    pub lines: Vec<String>,
    /// Records read (written and left out).
    pub records: usize,
    pub skipped: BTreeMap<String, usize>,
}

/// Checks a TVM target string enough to say early what is wrong: a CPU (`llvm`) target.
pub fn check_tvm_target(t: &str) -> Result<(), String> {
    match t.split_whitespace().next() {
        Some("llvm") => Ok(()),
        _ => Err(format!(
            "--tvm-target '{t}': tunehub's kernels are CPU kernels; give an llvm target, e.g. \
             \"llvm -mcpu=znver3 -num-cores 8\""
        )),
    }
}

/// Our export's lines (workload and target lines first) as Ansor lines for `tvm_target`.
pub fn export(lines: &[String], tvm_target: &str) -> Result<Exported, String> {
    check_tvm_target(tvm_target)?;
    let mut workloads: HashMap<String, Result<(String, Task), String>> = HashMap::new();
    let mut targets: HashMap<String, Target> = HashMap::new();
    let mut out = Exported::default();
    let mut skip = |reason: String| *out.skipped.entry(reason).or_default() += 1;
    let mut ansor_lines = vec![];
    let mut records = 0;
    for (n, line) in lines.iter().enumerate() {
        match parse_line(line).map_err(|e| format!("line {}: {e}", n + 1))? {
            Line::Workload(w) => {
                let mapped = map_workload(&w);
                workloads.insert(w.key, mapped);
            }
            Line::Target(key, json) => {
                let t: Target = serde_json::from_str(&json).expect("parse_line wrote a target");
                targets.insert(key, t);
            }
            // Ansor's logs have no shape ranges: their records go out as any other.
            Line::Range(_) => {}
            Line::Record(r) => {
                records += 1;
                if r.noisy {
                    skip("noisy (not trusted; Ansor's format cannot say so)".into());
                    continue;
                }
                let (wkey, task) = match workloads.get(&r.workload_key) {
                    Some(Ok(w)) => w,
                    Some(Err(reason)) => {
                        skip(reason.clone());
                        continue;
                    }
                    None => {
                        skip(format!("no workload line for {}", r.workload_key));
                        continue;
                    }
                };
                let Some(target) = targets.get(&r.target_key) else {
                    skip(format!("no target line for {}", r.target_key));
                    continue;
                };
                let steps = match Schedule::from_json(&r.steps_json)
                    .map_err(|e| e.to_string())
                    .and_then(|s| ansor::to_ansor(&s.steps, &task.dag).map_err(|e| e.to_string()))
                {
                    Ok(s) => s,
                    Err(e) => {
                        skip(format!("a schedule without an Ansor twin: {e}"));
                        continue;
                    }
                };
                let hardware = json!([target.cores, target.vector_bits() / 8, 64, 0, 0, 0, 0, 0]);
                let costs = if r.error_code == ErrorCode::NoError.code() {
                    r.costs.clone()
                } else {
                    vec![ANSOR_FAILED_COST]
                };
                let line = json!({
                    "i": [[wkey, tvm_target, hardware, "", 0, []], [[], steps]],
                    "r": [costs, error_to_ansor(r.error_code), r.build_s + r.run_s,
                          r.created_at.unwrap_or(0) / 1000],
                    "v": LOG_VERSION,
                });
                ansor_lines.push(line.to_string());
            }
        }
    }
    out.lines = ansor_lines;
    out.records = records;
    Ok(out)
}

/// A stored workload's Ansor key and task, or why it has none.
fn map_workload(w: &Workload) -> Result<(String, Task), String> {
    let desc = w.description.as_deref().unwrap_or("");
    let aw = AnsorWorkload::from_op_spec(desc, &w.options).map_err(|e| e.to_string())?;
    let task = aw.task().map_err(|e| e.to_string())?;
    if task.key != w.key {
        return Err(format!(
            "workload {} is not the library's {}",
            w.key,
            aw.op_spec()
        ));
    }
    Ok((aw.key(), task))
}

/// Whose records an Ansor log's are.
#[derive(Debug, Clone)]
pub enum ImportTarget {
    /// A target the server knows, by key.
    Known(String),
    /// A target described here (written as a target line before the records).
    Described(Box<Target>),
}

/// Ansor lines `(line number, text)` as our record file's lines, or the refusal naming every
/// line that does not map.
pub fn import(lines: &[(usize, String)], target: &ImportTarget) -> Result<Vec<String>, String> {
    let mut out = vec![];
    let target_key = match target {
        ImportTarget::Known(k) => k.clone(),
        ImportTarget::Described(t) => {
            let json = serde_json::to_string(t).expect("a target serializes");
            out.push(target_line(&t.key(), &json));
            t.key()
        }
    };
    let mut tasks: HashMap<String, Result<Task, String>> = HashMap::new();
    let mut written = HashSet::new();
    let mut bad = vec![];
    for (n, text) in lines {
        match import_line(text, &target_key, &mut tasks) {
            Ok((task, line)) => {
                if written.insert(task.key.clone()) {
                    out.push(workload_line(&Workload {
                        key: task.key.clone(),
                        description: Some(task.desc.clone()),
                        dag_json: serde_json::to_string(&task.dag).expect("a DAG serializes"),
                        options: task.options(),
                        flops: task.flops,
                        created_at: 0,
                    }));
                }
                out.push(line);
            }
            Err(e) => bad.push((*n, e)),
        }
    }
    if bad.is_empty() {
        Ok(out)
    } else {
        Err(refusal(&bad))
    }
}

/// One Ansor line: its workload's task and our record line.
fn import_line<'a>(
    text: &str,
    target_key: &str,
    tasks: &'a mut HashMap<String, Result<Task, String>>,
) -> Result<(&'a Task, String), String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    match v.get("v") {
        Some(Value::String(_)) => {}
        _ => return Err("not an Ansor record: no \"v\" (log version) string".into()),
    }
    let key = v
        .pointer("/i/0/0")
        .and_then(Value::as_str)
        .ok_or("i[0][0] (workload key) is not a string")?;
    let steps = v
        .pointer("/i/1/1")
        .and_then(Value::as_array)
        .ok_or("i[1][1] (transform steps) is not an array")?;
    let costs = v
        .pointer("/r/0")
        .and_then(Value::as_array)
        .ok_or("r[0] (costs) is not an array")?;
    let error_no = v
        .pointer("/r/1")
        .and_then(Value::as_i64)
        .ok_or("r[1] (error number) is not an integer")?;
    let error = error_from_ansor(error_no)
        .ok_or_else(|| format!("r[1]: unknown Ansor error number {error_no}"))?;
    let timestamp = v.pointer("/r/3").cloned().unwrap_or(Value::Null);
    let task = tasks
        .entry(key.to_string())
        .or_insert_with(|| {
            AnsorWorkload::parse_key(key)
                .and_then(|w| w.task())
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(Clone::clone)?;
    let ours = ansor::from_ansor(steps, &task.dag).map_err(|e| e.to_string())?;
    let costs = if error == ErrorCode::NoError {
        costs.clone()
    } else {
        vec![]
    };
    let line = json!({
        "i": [[task.key, target_key], [[], Schedule::new(ours).to_json_value()]],
        "r": [costs, error.code(), 0.0, timestamp],
        "v": FORMAT,
    });
    Ok((task, line.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_numbers_go_to_ansor_and_back() {
        for e in ErrorCode::ALL {
            assert_eq!(error_from_ansor(error_to_ansor(e.code())), Some(e), "{e:?}");
        }
        assert_eq!(error_from_ansor(3), Some(ErrorCode::CompileError));
        assert_eq!(error_from_ansor(9), None);
    }

    #[test]
    fn a_tvm_target_must_be_a_cpu_target() {
        assert!(check_tvm_target("llvm -mcpu=znver3").is_ok());
        assert!(check_tvm_target("cuda").unwrap_err().contains("llvm"));
        assert!(check_tvm_target("").is_err());
    }
}
