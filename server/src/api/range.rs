//! Shape ranges (dynamic shapes) at the API: a submitted range checked and made into its
//! representative tasks (`submitted_range`, then `range_row` per target); Best's answer for a
//! shape of a tuned range that has no record of its own (`range_answer`: the representative
//! serving it by the dispatch table, its best schedule adapted, marked transferred with the
//! range named); `Query.Range`, the dispatch table (`range_table`); and the range line of record
//! files (`range_line`, `parse_range_line`). Picking representatives and the dispatch table are
//! the engine's (`tunehub_engine::transfer::range`).

use super::transfer::{Candidate, Transferred, answer};
use super::{Api, gflops, store_status};
use crate::checks::limits::{MAX_INPUT_NAME, MAX_KEY, MAX_LAYOUT_FREE, MAX_OP_SPEC, check_len};
use crate::records::{Neighbor, RangeRow, RecordStore, Representative, Workload, range_id};
use crate::workload;
use serde_json::{Value, json};
use tonic::Status;
use tunehub_engine::ops::{LayoutFree, OpSpec};
use tunehub_engine::task::{Task, WorkloadOptions};
use tunehub_engine::transfer::{self, ShapeRange};
use tunehub_proto::v1 as pb;

/// `Transfer.ranked_by` of an answer a range's dispatch table chose.
pub(super) const BY_RANGE: &str = "range";

/// A submitted range, checked: its representatives as the job's tasks.
pub(super) struct Submitted {
    pub range: ShapeRange,
    pub reps: Vec<Vec<i64>>,
    pub options: WorkloadOptions,
    /// One per representative, in order: its op spec with the range's options.
    pub tasks: Vec<pb::TaskSpec>,
}

/// The options' sizes, as a workload's are checked.
fn check_options(o: Option<&pb::WorkloadOptions>) -> Result<WorkloadOptions, Status> {
    if let Some(o) = o {
        if o.layout_free.len() > MAX_LAYOUT_FREE {
            return Err(Status::invalid_argument(format!(
                "options.layout_free names {} inputs; at most {MAX_LAYOUT_FREE}",
                o.layout_free.len()
            )));
        }
        for n in &o.layout_free {
            check_len("a layout_free name", n, MAX_INPUT_NAME)?;
        }
    }
    Ok(workload::options_from_pb(o))
}

/// The parsed range of a request's spec and typed options, and its resolved options (the
/// operator's constant weight packed by default, as for an op spec); INVALID_ARGUMENT naming
/// what is wrong.
fn parse_range(
    spec: &str,
    options: Option<&pb::WorkloadOptions>,
) -> Result<(ShapeRange, WorkloadOptions), Status> {
    check_len("range.spec", spec, MAX_OP_SPEC)?;
    let typed = check_options(options)?;
    let range = ShapeRange::parse(spec)
        .and_then(|r| r.with_options(&typed))
        .map_err(|e| Status::invalid_argument(format!("range: {e}")))?;
    let options = range.options();
    Ok((range, options))
}

/// Checks `SubmitRequest.range` (the tasks' own checks follow, as for any task).
pub(super) fn submitted_range(r: &pb::ShapeRange) -> Result<Submitted, Status> {
    let (range, options) = parse_range(&r.spec, r.options.as_ref())?;
    if r.trials == 0 {
        return Err(Status::invalid_argument(
            "range.trials (per representative shape) must be at least 1",
        ));
    }
    let reps = range.representatives();
    // Each representative's op spec in its canonical form, its options written in it.
    let tasks = reps
        .iter()
        .map(|v| {
            let spec = range
                .op_spec_at(v)
                .map_err(|e| Status::invalid_argument(format!("range: {e}")))?;
            Ok(pb::TaskSpec {
                workload: Some(pb::Workload {
                    kind: Some(pb::workload::Kind::OpSpec(spec.to_string())),
                    options: None,
                }),
                trials: r.trials,
                weight: 1.0,
                alternative: false,
            })
        })
        .collect::<Result<_, Status>>()?;
    Ok(Submitted {
        range,
        reps,
        options,
        tasks,
    })
}

impl Submitted {
    /// The range's row on one target; `tasks` are the representatives' resolved tasks, in order.
    pub(super) fn row(&self, target_key: &str, tasks: &[&Task]) -> RangeRow {
        row_of(&self.range, &self.reps, &self.options, target_key, tasks)
    }
}

fn row_of(
    range: &ShapeRange,
    reps: &[Vec<i64>],
    options: &WorkloadOptions,
    target_key: &str,
    tasks: &[&Task],
) -> RangeRow {
    let spec = range.spec();
    RangeRow {
        id: range_id(&spec, options, target_key),
        spec,
        options: options.clone(),
        target_key: target_key.to_string(),
        structure_key: tasks
            .first()
            .map(|t| transfer::structure_key(&t.dag, &t.layout_free))
            .unwrap_or_default(),
        representatives: reps
            .iter()
            .zip(tasks)
            .map(|(v, t)| Representative {
                values: v.clone(),
                workload_key: t.key.clone(),
            })
            .collect(),
        created_at: 0,
    }
}

/// A representative's op spec: its shape with the range's resolved options.
fn rep_spec(
    range: &ShapeRange,
    values: &[i64],
    options: &WorkloadOptions,
) -> Result<OpSpec, String> {
    let layout_free = LayoutFree::Inputs(options.layout_free.clone());
    range
        .op_spec_at(values)
        .map_err(|e| e.to_string())?
        .with_layout_free(layout_free)
        .map_err(|e| e.to_string())
}

/// A representative's task: its shape's DAG with the range's options, described canonically.
fn rep_task(range: &ShapeRange, values: &[i64], options: &WorkloadOptions) -> Result<Task, String> {
    rep_spec(range, values, options)?
        .task()
        .map_err(|e| e.to_string())
}

pub(super) fn range_ref(r: &RangeRow) -> pb::ShapeRangeRef {
    pb::ShapeRangeRef {
        id: r.id.clone(),
        spec: r.spec.clone(),
    }
}

fn same_options(a: &WorkloadOptions, b: &WorkloadOptions) -> bool {
    let (mut x, mut y) = (a.layout_free.clone(), b.layout_free.clone());
    x.sort();
    y.sort();
    x == y
}

impl Api {
    /// The answer for `task` (no record of its own on `target_key`) from a tuned shape range it
    /// belongs to: the representative serving it by the dispatch table, or, when that one has no
    /// record yet, the nearest one that has; its best schedule adapted. `None` when the task is
    /// in no range of the target, or no representative's record adapts.
    pub(super) async fn range_answer(
        &self,
        task: &Task,
        target_key: &str,
    ) -> Result<Option<(Transferred, pb::ShapeRangeRef)>, Status> {
        let structure = transfer::structure_key(&task.dag, &task.layout_free);
        let rows = self
            .store()
            .ranges_of_structure(&structure, target_key)
            .await
            .map_err(store_status)?;
        for row in rows {
            if !same_options(&row.options, &task.options()) {
                continue;
            }
            let range = match ShapeRange::parse(&row.spec) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(range = %row.id, "stored range unreadable: {e}");
                    continue;
                }
            };
            let Some(values) = range.values_of(&task.dag) else {
                continue;
            };
            let reps: Vec<Vec<i64>> = row
                .representatives
                .iter()
                .map(|r| r.values.clone())
                .collect();
            // The serving representative first, then the others nearest first.
            let serving = range.serving(&reps, &values);
            let far = |i: usize| -> f64 {
                reps[i]
                    .iter()
                    .zip(&values)
                    .map(|(r, v)| (*r as f64 / *v as f64).ln().abs())
                    .sum()
            };
            let mut order: Vec<usize> = (0..reps.len()).collect();
            order.sort_by(|&a, &b| {
                (Some(a) != serving)
                    .cmp(&(Some(b) != serving))
                    .then(far(a).total_cmp(&far(b)))
            });
            let mine = transfer::extents(&task.dag);
            for i in order {
                let key = &row.representatives[i].workload_key;
                let best = self.cached_best(key, target_key).await?;
                let workload = self.store().workload(key).await.map_err(store_status)?;
                let (Some(best), Some(workload)) = (best, workload) else {
                    continue;
                };
                let Ok(source) = workload.to_task() else {
                    continue;
                };
                let n = Neighbor {
                    distance: transfer::distance(&mine, &transfer::extents(&source.dag))
                        .unwrap_or(f64::NAN),
                    workload,
                    best,
                };
                let Some(adapted) = n.adapted_to(task) else {
                    continue;
                };
                let c = Candidate {
                    neighbour: 0,
                    source: n.best.clone(),
                    adapted,
                };
                let t = answer(task, target_key, std::slice::from_ref(&n), &c, BY_RANGE);
                return Ok(Some((t, range_ref(&row))));
            }
        }
        Ok(None)
    }

    /// `Query.Range`: a range's dispatch table on a target, each representative with its best
    /// record.
    pub(super) async fn range_table(
        &self,
        r: &pb::RangeRequest,
    ) -> Result<pb::RangeResponse, Status> {
        let (range, options) = parse_range(&r.spec, r.options.as_ref())?;
        let target = self.query_target(&r.target).await?;
        let id = range_id(&range.spec(), &options, &target);
        let row = self
            .store()
            .range(&id)
            .await
            .map_err(store_status)?
            .ok_or_else(|| {
                Status::not_found(format!(
                    "no shape range {} on target {target}: submit a job for it \
                     (SubmitRequest.range, `tunehub submit '{}'`) or import one",
                    workload::label(&range.spec(), workload::options_to_pb(&options).as_ref()),
                    range.spec()
                ))
            })?;
        let reps: Vec<Vec<i64>> = row
            .representatives
            .iter()
            .map(|r| r.values.clone())
            .collect();
        let mut entries = vec![];
        for (cell, rep) in range.dispatch(&reps).iter().zip(&row.representatives) {
            let entry = self.cached(&rep.workload_key, &target).await?;
            let flops = match range.dag_at(&rep.values) {
                Ok(d) => d.flop_count(),
                Err(_) => 0,
            };
            let seconds = entry.best.as_ref().and_then(|b| b.mean_cost).unwrap_or(0.0);
            entries.push(pb::RangeEntry {
                intervals: range
                    .ranged
                    .iter()
                    .zip(&cell.bounds)
                    .map(|(x, (lo, hi))| pb::RangeInterval {
                        extent: x.name.to_string(),
                        lo: *lo,
                        hi: *hi,
                    })
                    .collect(),
                values: rep.values.clone(),
                workload_key: rep.workload_key.clone(),
                description: rep_spec(&range, &rep.values, &options)
                    .map_or_else(|_| range.spec_at(&rep.values), |s| s.to_string()),
                record_id: entry
                    .best
                    .as_ref()
                    .map(|b| b.id.clone())
                    .unwrap_or_default(),
                seconds,
                gflops: gflops(flops, seconds),
                records_total: entry.counts.total,
            });
        }
        let job_ids = self.store().range_jobs(&id).await.map_err(store_status)?;
        Ok(pb::RangeResponse {
            range: Some(range_ref(&row)),
            target_key: target,
            options: workload::options_to_pb(&row.options),
            entries,
            job_ids,
        })
    }
}

/// A range's line in a records file.
pub fn range_line(r: &RangeRow) -> String {
    let mut v = json!({
        "id": r.id,
        "spec": r.spec,
        "target": r.target_key,
        "representatives": r.representatives,
    });
    if !r.options.layout_free.is_empty() {
        v["layout_free"] = json!(r.options.layout_free);
    }
    json!({ "range": v }).to_string()
}

/// A range line, checked: the range to store and its representatives' workloads (made from
/// its spec, so that a file needs no workload line for a representative without records).
#[derive(Debug)]
pub struct ImportedRange {
    pub row: RangeRow,
    pub workloads: Vec<Workload>,
}

/// Parses and checks the object of a `{"range": ...}` line: its spec is a valid range (as a
/// submitted one), its id the one its spec, options and target make, its representatives a
/// grid inside the range whose workload keys are those their shapes make.
pub fn parse_range_line(v: &Value) -> Result<ImportedRange, String> {
    let text = |k: &str, max: usize| -> Result<String, String> {
        let s = v
            .get(k)
            .ok_or_else(|| format!("missing \"range.{k}\""))?
            .as_str()
            .ok_or_else(|| format!("range.{k} is not a string"))?;
        if s.len() > max {
            return Err(format!(
                "range.{k} is {} bytes long; at most {max}",
                s.len()
            ));
        }
        Ok(s.to_string())
    };
    let spec = text("spec", MAX_OP_SPEC)?;
    let target_key = text("target", MAX_KEY)?;
    let id = text("id", MAX_KEY)?;
    let options = match v.get("layout_free") {
        None => WorkloadOptions::default(),
        Some(names) => {
            let layout_free: Vec<String> = serde_json::from_value(names.clone())
                .map_err(|e| format!("range.layout_free: {e}"))?;
            if layout_free.len() > MAX_LAYOUT_FREE
                || layout_free.iter().any(|n| n.len() > MAX_INPUT_NAME)
            {
                return Err("range.layout_free: too many or too long names".into());
            }
            WorkloadOptions { layout_free }
        }
    };
    let range = ShapeRange::parse(&spec).map_err(|e| format!("range.spec: {e}"))?;
    let want = range_id(&range.spec(), &options, &target_key);
    if id != want {
        return Err(format!(
            "range.id is {id}, but its spec, layout_free and target make {want}"
        ));
    }
    let reps: Vec<Representative> = serde_json::from_value(
        v.get("representatives")
            .cloned()
            .ok_or("missing \"range.representatives\"")?,
    )
    .map_err(|e| format!("range.representatives: {e}"))?;
    let values: Vec<Vec<i64>> = reps.iter().map(|r| r.values.clone()).collect();
    range
        .check_representatives(&values)
        .map_err(|e| format!("range.representatives: {e}"))?;
    let mut tasks = vec![];
    for r in &reps {
        let t = rep_task(&range, &r.values, &options)
            .map_err(|e| format!("range.representatives: {e}"))?;
        if t.key != r.workload_key {
            return Err(format!(
                "range.representatives: {} makes workload {}, not {}",
                t.desc, t.key, r.workload_key
            ));
        }
        tasks.push(t);
    }
    let refs: Vec<&Task> = tasks.iter().collect();
    let row = row_of(&range, &values, &options, &target_key, &refs);
    let workloads = tasks
        .iter()
        .map(|t| Workload {
            key: t.key.clone(),
            description: Some(t.desc.clone()),
            dag_json: serde_json::to_string(&t.dag).expect("a DAG serializes"),
            options: t.options(),
            flops: t.flops,
            created_at: 0,
        })
        .collect();
    Ok(ImportedRange { row, workloads })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_line_goes_out_and_back() {
        let spec = "matmul(m=4..64,n=8,k=8)";
        let range = ShapeRange::parse(spec).unwrap();
        let options = WorkloadOptions {
            layout_free: vec!["B".into()],
        };
        let reps = range.representatives();
        let tasks: Vec<Task> = reps
            .iter()
            .map(|v| rep_task(&range, v, &options).unwrap())
            .collect();
        let refs: Vec<&Task> = tasks.iter().collect();
        let row = row_of(&range, &reps, &options, "t", &refs);
        let line = range_line(&row);
        let v: Value = serde_json::from_str(&line).unwrap();
        let back = parse_range_line(&v["range"]).unwrap();
        assert_eq!(back.row, row);
        assert_eq!(back.workloads.len(), reps.len());
        // A tampered line says what is wrong.
        for (path, value, want) in [
            ("/range/id", json!("rg-0"), "make"),
            ("/range/spec", json!("matmul(m=64..4,n=8,k=8)"), "empty"),
            ("/range/representatives/0/workload_key", json!("x"), "not x"),
            ("/range/representatives/0/values", json!([999]), "not in"),
            ("/range/representatives", json!([]), "representatives"),
        ] {
            let mut bad = v.clone();
            *bad.pointer_mut(path).unwrap() = value;
            let e = parse_range_line(&bad["range"]).unwrap_err();
            assert!(e.contains(want), "{path}: {e}");
        }
    }
}
