//! Our steps as Ansor's record steps, and Ansor's as ours. The codes and fields are the same
//! (see `schedule::step`) but for three things: stage numbers (see [`StageMap`]); Ansor writes
//! an unknown split extent as 0 where we write null; and Ansor's CPU search also writes
//! follow-splits, which read their lengths from earlier splits:
//! `["FSP", stage, iter, src_step, n_split]` splits like step `src_step`'s first
//! `n_split - 1` lengths and the product of the rest, inner to outer;
//! `["FFSP", stage, iter, [src_steps], level, factor]` splits by the product of the
//! `level`-th length of each source, as a factor (inner to outer) or as parts.
//!
//! Refused, by code: `RF` (Ansor's rfactor names a split iterator; ours splits and factors in
//! one step, no one-to-one map yet), `CHR` and `SA` (cache read and storage alignment: shared
//! memory on GPUs, no tunehub step), pragmas other than `auto_unroll_max_step`, and the GPU
//! loop annotations (thread and block bindings).

use super::{AnsorError, StageMap};
use crate::ir::ComputeDag;
use crate::schedule::Step;
use serde_json::Value;

/// Our steps of a schedule of `dag` as Ansor writes them.
pub fn to_ansor(steps: &[Step], dag: &ComputeDag) -> Result<Vec<Value>, AnsorError> {
    let mut map = StageMap::new(dag);
    let mut out = Vec::with_capacity(steps.len());
    for (index, step) in steps.iter().enumerate() {
        let code = step.to_json()[0].as_str().unwrap_or_default().to_string();
        let err = |msg: String| AnsorError::Step {
            index,
            code: code.clone(),
            msg,
        };
        let stage = |s: usize| map.to_ansor(s).ok_or_else(|| err(format!("no stage {s}")));
        let mut s = step.clone();
        match &mut s {
            Step::Split { stage: st, .. }
            | Step::Reorder { stage: st, .. }
            | Step::Fuse { stage: st, .. }
            | Step::Annotate { stage: st, .. }
            | Step::ComputeInline { stage: st }
            | Step::ComputeRoot { stage: st }
            | Step::CacheWrite { stage: st }
            | Step::AutoUnroll { stage: st, .. } => *st = stage(*st)?,
            Step::ComputeAt {
                stage: st, target, ..
            } => {
                *st = stage(*st)?;
                *target = stage(*target)?;
            }
            Step::Rfactor { .. } => {
                return Err(err(
                    "our rfactor splits and factors in one step; Ansor's RF factors a split \
                     iterator: not mapped yet"
                        .into(),
                ));
            }
        }
        if let Step::CacheWrite { stage } = step {
            map.insert_before(*stage);
        }
        let mut v = s.to_json();
        if matches!(s, Step::Split { extent: None, .. }) {
            v[3] = Value::from(0);
        }
        out.push(v);
    }
    Ok(out)
}

/// Ansor's record steps of a schedule of `dag` as ours.
pub fn from_ansor(steps: &[Value], dag: &ComputeDag) -> Result<Vec<Step>, AnsorError> {
    let mut map = StageMap::new(dag);
    let mut out = Vec::with_capacity(steps.len());
    for (index, v) in steps.iter().enumerate() {
        let code = v.get(0).and_then(Value::as_str).unwrap_or("?").to_string();
        let err = |msg: String| AnsorError::Step {
            index,
            code: code.clone(),
            msg,
        };
        let uint = |i: usize, what: &str| -> Result<usize, AnsorError> {
            v.get(i)
                .and_then(Value::as_u64)
                .map(|x| x as usize)
                .ok_or_else(|| err(format!("{what} must be a non-negative integer")))
        };
        let mut step = match code.as_str() {
            "FSP" => {
                let (stage, iter) = (uint(1, "stage")?, uint(2, "iter")?);
                let (src, n_split) = (uint(3, "src_step_id")?, uint(4, "n_split")?);
                let lengths = source_lengths(steps, src, index).map_err(&err)?;
                if n_split == 0 || n_split > lengths.len() + 1 {
                    return Err(err(format!(
                        "n_split {n_split} does not fit step {src}'s {} lengths",
                        lengths.len()
                    )));
                }
                let mut ls = lengths[..n_split - 1].to_vec();
                ls.push(lengths[n_split - 1..].iter().product());
                Step::Split {
                    stage,
                    iter,
                    extent: None,
                    lengths: ls,
                    inner_to_outer: true,
                }
            }
            "FFSP" => {
                let (stage, iter) = (uint(1, "stage")?, uint(2, "iter")?);
                let srcs = v
                    .get(3)
                    .and_then(Value::as_array)
                    .ok_or_else(|| err("src_step_ids must be an array".into()))?;
                let level = uint(4, "level")?;
                let mut length = 1i64;
                for s in srcs {
                    let s = s
                        .as_u64()
                        .ok_or_else(|| err("src_step_ids must be integers".into()))?;
                    let ls = source_lengths(steps, s as usize, index).map_err(&err)?;
                    let l = ls
                        .get(level)
                        .ok_or_else(|| err(format!("step {s} has no length at level {level}")))?;
                    length = length
                        .checked_mul(*l)
                        .ok_or_else(|| err("the split length overflows".into()))?;
                }
                let factor = v
                    .get(5)
                    .and_then(|x| x.as_i64().or(x.as_bool().map(i64::from)));
                let inner_to_outer = match factor {
                    Some(1) => true,
                    Some(0) => false,
                    _ => return Err(err("factor_or_nparts must be 0 or 1".into())),
                };
                if v.as_array().map(Vec::len) != Some(6) {
                    return Err(err("takes 5 fields".into()));
                }
                Step::Split {
                    stage,
                    iter,
                    extent: None,
                    lengths: vec![length],
                    inner_to_outer,
                }
            }
            "RF" => {
                return Err(err(
                    "Ansor's rfactor of a split iterator has no one-to-one tunehub step yet".into(),
                ));
            }
            "CHR" => {
                return Err(err(
                    "cache read (a shared-memory copy on GPUs) has no tunehub step".into(),
                ));
            }
            "SA" => {
                return Err(err(
                    "storage align (GPU shared memory padding) has no tunehub step".into(),
                ));
            }
            _ => {
                let mut w = v.clone();
                // Ansor writes an unknown split extent as 0.
                if code == "SP" && w.get(3).and_then(Value::as_i64) == Some(0) {
                    w[3] = Value::Null;
                }
                Step::from_json(&w, index).map_err(|e| err(e.msg))?
            }
        };
        let stage = |s: usize| {
            map.from_ansor(s)
                .ok_or_else(|| err(format!("no stage {s} in the workload's DAG")))
        };
        match &mut step {
            Step::Split { stage: st, .. }
            | Step::Reorder { stage: st, .. }
            | Step::Fuse { stage: st, .. }
            | Step::Annotate { stage: st, .. }
            | Step::ComputeInline { stage: st }
            | Step::ComputeRoot { stage: st }
            | Step::CacheWrite { stage: st }
            | Step::AutoUnroll { stage: st, .. }
            | Step::Rfactor { stage: st, .. } => *st = stage(*st)?,
            Step::ComputeAt {
                stage: st, target, ..
            } => {
                *st = stage(*st)?;
                *target = stage(*target)?;
            }
        }
        if let Step::CacheWrite { stage } = step {
            map.insert_before(stage);
        }
        out.push(step);
    }
    Ok(out)
}

/// The lengths of step `src`, a split before step `at`, all known.
fn source_lengths(steps: &[Value], src: usize, at: usize) -> Result<Vec<i64>, String> {
    if src >= at {
        return Err(format!("follows step {src}, which does not come before it"));
    }
    let s = &steps[src];
    if s.get(0).and_then(Value::as_str) != Some("SP") {
        return Err(format!("follows step {src}, which is not a split (\"SP\")"));
    }
    s.get(4)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("step {src} has no lengths"))?
        .iter()
        .map(|l| {
            l.as_i64()
                .filter(|&l| l > 0)
                .ok_or_else(|| format!("step {src}'s lengths are not all known positive integers"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;
    use crate::schedule::Schedule;
    use serde_json::json;

    /// A line's steps as TVM 0.19 writes them for conv2d_nchw(1,4,8,8,4,pad=1) (Ansor's stage
    /// 1 is `pad`, 3 `conv`): cache write, tiling, follow-splits of the cached stage.
    fn ansor_conv_steps() -> Vec<Value> {
        serde_json::from_str(
            r#"[["CHW", 3, "local"], ["SP", 4, 0, 1, [1, 1, 1], 1], ["SP", 4, 4, 4, [1, 2, 1], 1],
            ["SP", 4, 8, 8, [2, 1, 2], 1], ["SP", 4, 12, 8, [1, 4, 1], 1],
            ["RE", 4, [0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15]],
            ["FSP", 3, 0, 1, 2], ["FSP", 3, 3, 2, 2], ["FSP", 3, 6, 3, 2], ["FSP", 3, 9, 4, 2],
            ["RE", 3, [0, 3, 6, 9, 1, 4, 7, 10, 12, 13, 14, 2, 5, 8, 11]],
            ["CA", 3, 4, 7], ["CI", 1], ["FU", 4, [0, 1, 2, 3]], ["AN", 4, 0, 3],
            ["PR", 3, 0, "auto_unroll_max_step$16"], ["AN", 3, 14, 2],
            ["FFSP", 4, 6, [1, 2], 1, 1]]"#,
        )
        .unwrap()
    }

    fn conv() -> ComputeDag {
        ops::conv2d_nchw(1, 4, 8, 8, 4, ops::Window::square(3, 1, 1), false, false).unwrap()
    }

    #[test]
    fn an_ansor_schedule_replays_here_and_goes_back_as_it_came_but_follow_splits() {
        let dag = conv();
        let ansor = ansor_conv_steps();
        let ours = from_ansor(&ansor, &dag).unwrap();
        // Stage numbers ours: data 0, kernel 1, pad 2, conv.local 3, conv 4.
        assert_eq!(ours[0], Step::CacheWrite { stage: 3 });
        assert_eq!(ours[12], Step::ComputeInline { stage: 2 });
        assert_eq!(
            ours[6],
            Step::Split {
                stage: 3,
                iter: 0,
                extent: None,
                lengths: vec![1, 1],
                inner_to_outer: true
            }
        );
        assert_eq!(
            ours[17],
            Step::Split {
                stage: 4,
                iter: 6,
                extent: None,
                lengths: vec![2],
                inner_to_outer: true
            }
        );
        Schedule::new(ours.clone()).replay(&dag).unwrap();
        let back = to_ansor(&ours, &dag).unwrap();
        for (i, (a, b)) in ansor.iter().zip(&back).enumerate() {
            if a[0] == "FSP" || a[0] == "FFSP" {
                assert_eq!(b[0], "SP", "step {i}");
                assert_eq!((&a[1], &a[2]), (&b[1], &b[2]), "step {i}");
            } else {
                assert_eq!(a, b, "step {i}");
            }
        }
        assert_eq!(from_ansor(&back, &dag).unwrap(), ours);
    }

    /// Lines TVM 0.19 wrote tuning `tunehub.conv2d_nchw` (`bench/ansor_apply.py --tune`).
    const TVM_LOG: &str = include_str!("testdata/tvm_conv2d_nchw.json");

    #[test]
    fn schedules_tvm_wrote_replay_here_and_go_back_as_they_came() {
        for line in TVM_LOG.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            let key = v["i"][0][0].as_str().unwrap();
            let task = super::super::AnsorWorkload::parse_key(key)
                .unwrap()
                .task()
                .unwrap();
            let ansor = v["i"][1][1].as_array().unwrap();
            let ours = from_ansor(ansor, &task.dag).unwrap();
            Schedule::new(ours.clone()).replay(&task.dag).unwrap();
            let back = to_ansor(&ours, &task.dag).unwrap();
            for (i, (a, b)) in ansor.iter().zip(&back).enumerate() {
                if a[0] == "FSP" {
                    assert_eq!((&b[0], &b[1], &b[2]), (&json!("SP"), &a[1], &a[2]));
                } else {
                    assert_eq!(a, b, "step {i}");
                }
            }
        }
    }

    #[test]
    fn steps_without_a_tunehub_twin_are_named() {
        let dag = ops::matmul(8, 8, 8).unwrap();
        for (step, want) in [
            (json!(["RF", 2, 2, 0]), "step 0 (\"RF\"): Ansor's rfactor"),
            (
                json!(["CHR", 0, "shared", [2]]),
                "step 0 (\"CHR\"): cache read",
            ),
            (json!(["SA", 2, 0, 32, 1]), "storage align"),
            (json!(["AN", 2, 0, 6]), "unknown annotation 6"),
            (json!(["PR", 2, 0, "debug_skip_region"]), "unknown pragma"),
            (json!(["XX", 2]), "unknown step code"),
            (json!(["FSP", 2, 0, 0, 2]), "does not come before it"),
            (json!(["SP", 9, 0, 8, [2], 1]), "no stage 9"),
        ] {
            let e = from_ansor(std::slice::from_ref(&step), &dag)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{step}: {e}");
        }
        let e = from_ansor(
            &[json!(["SP", 2, 0, 8, [2], 1]), json!(["FSP", 2, 2, 0, 3])],
            &dag,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("step 1 (\"FSP\"): n_split 3"), "{e}");
        let rf = Step::Rfactor {
            stage: 2,
            axis: 2,
            factor: 4,
        };
        let e = to_ansor(&[rf], &dag).unwrap_err().to_string();
        assert!(e.contains("step 0 (\"RF\")"), "{e}");
    }
}
