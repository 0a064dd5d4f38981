//! Distilling a records file (`tunehub records distill --top K`): the K fastest trusted
//! successes of each (workload, target), with the workload and target lines they need, for
//! distributing pre-tuned packs. Offline, on the export format, read by the import's own parser
//! (`records::parse_line`): the result imports like any export.

use crate::api::records::{Line, parse_line};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;

#[derive(Debug, thiserror::Error)]
pub enum DistillError {
    #[error("line {line}: {msg}")]
    Line { line: usize, msg: String },
    #[error("reading: {0}")]
    Io(#[from] std::io::Error),
}

/// What a distillation kept, out of what it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Distilled {
    pub records_read: usize,
    pub records_kept: usize,
    pub pairs: usize,
}

/// The lines of a distilled file: the workload and target lines the kept records use (in the
/// order read) and the target lines of every shape range, then the range lines (kept whole),
/// then the kept records, the fastest `top` per (workload, target) (in the order read).
/// Only records that may be a best are kept (trusted successes: not failed, not noisy); a line
/// the import would refuse is an error naming it.
pub fn distill(input: impl BufRead, top: usize) -> Result<(Vec<String>, Distilled), DistillError> {
    let mut workloads: Vec<(String, String)> = vec![];
    let mut targets: Vec<(String, String)> = vec![];
    // Shape ranges: kept whole (a range is small; its representatives need no records).
    let mut ranges: Vec<(String, String)> = vec![];
    // Per pair: (mean cost, line number) of its trusted successes.
    let mut by_pair: BTreeMap<(String, String), Vec<(f64, usize)>> = BTreeMap::new();
    let mut records: HashMap<usize, String> = HashMap::new();
    let mut read = 0;
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(&line).map_err(|msg| DistillError::Line { line: n, msg })? {
            Line::Workload(w) => workloads.push((w.key, line)),
            Line::Target(key, _) => targets.push((key, line)),
            Line::Range(r) => ranges.push((r.row.target_key.clone(), line)),
            Line::Record(r) => {
                read += 1;
                if let (true, Some(mean)) = (r.qualifies_for_best(), r.mean_cost()) {
                    by_pair
                        .entry((r.workload_key, r.target_key))
                        .or_default()
                        .push((mean, n));
                    records.insert(n, line);
                }
            }
        }
    }
    let mut kept: Vec<usize> = vec![];
    let mut used_w = HashSet::new();
    let mut used_t = HashSet::new();
    for ((w, t), recs) in &mut by_pair {
        recs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        kept.extend(recs.iter().take(top).map(|&(_, n)| n));
        used_w.insert(w.clone());
        used_t.insert(t.clone());
    }
    used_t.extend(ranges.iter().map(|(t, _)| t.clone()));
    kept.sort_unstable();
    let mut out: Vec<String> = workloads
        .into_iter()
        .filter(|(k, _)| used_w.contains(k))
        .map(|(_, l)| l)
        .collect();
    out.extend(
        targets
            .into_iter()
            .filter(|(k, _)| used_t.contains(k))
            .map(|(_, l)| l),
    );
    out.extend(ranges.into_iter().map(|(_, l)| l));
    let stats = Distilled {
        records_read: read,
        records_kept: kept.len(),
        pairs: if top == 0 { 0 } else { by_pair.len() },
    };
    out.extend(
        kept.into_iter()
            .map(|n| records.remove(&n).expect("a kept record")),
    );
    Ok((out, stats))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::records::{record_line, target_line, workload_line};
    use crate::records::{Record, Workload};
    use tunehub_engine::ops;
    use tunehub_engine::target::Target;
    use tunehub_engine::task::Task;

    fn workload(m: i64) -> (String, String) {
        let t = Task::new(ops::matmul(m, 8, 8).unwrap(), format!("matmul({m},8,8)"));
        let line = workload_line(&Workload {
            key: t.key.clone(),
            description: Some(t.desc.clone()),
            dag_json: serde_json::to_string(&t.dag).unwrap(),
            options: t.options(),
            flops: t.flops,
            created_at: 0,
        });
        (t.key, line)
    }

    fn record(w: &str, t: &str, sched: u32, costs: &[f64], err: i32, noisy: bool) -> String {
        record_line(&Record {
            id: String::new(),
            workload_key: w.into(),
            target_key: t.into(),
            schedule_hash: String::new(),
            steps_json: format!(r#"[["SP",2,0,8,[{sched}],1]]"#),
            costs: costs.to_vec(),
            mean_cost: None,
            error_code: err,
            error_msg: String::new(),
            noisy,
            build_s: 0.5,
            run_s: 0.1,
            worker: None,
            created_at: 1_700_000_000_000,
        })
    }

    #[test]
    fn keeps_the_fastest_trusted_records_per_pair_with_the_lines_they_need() {
        let target = Target::detect();
        let tk = target.key();
        let (w1, l1) = workload(8);
        let (w2, l2) = workload(16);
        let (w3, l3) = workload(24);
        let lines = [
            l1,
            l2,
            l3,
            target_line(&tk, &serde_json::to_string(&target).unwrap()),
            record(&w1, &tk, 1, &[3e-3, 3e-3], 0, false),
            record(&w1, &tk, 2, &[1e-3, 1e-3], 0, false),
            record(&w1, &tk, 4, &[5e-4], 0, true),
            record(&w1, &tk, 8, &[], 5, false),
            record(&w1, &tk, 1, &[2e-3], 0, false),
            record(&w2, &tk, 2, &[9e-3], 0, false),
            record(&w3, &tk, 4, &[], 2, false),
        ];
        let (out, stats) = distill(lines.join("\n").as_bytes(), 2).unwrap();
        assert_eq!(
            out,
            [
                lines[0].clone(),
                lines[1].clone(),
                lines[3].clone(),
                lines[5].clone(),
                lines[8].clone(),
                lines[9].clone()
            ]
        );
        assert_eq!(
            stats,
            Distilled {
                records_read: 7,
                records_kept: 3,
                pairs: 2
            }
        );
    }

    #[test]
    fn a_bad_line_is_named() {
        let (_, good) = workload(8);
        let e = distill(format!("{good}\nnot json\n").as_bytes(), 1).unwrap_err();
        assert!(e.to_string().starts_with("line 2: not JSON"), "{e}");
        let e = distill("{\"x\": 1}\n".as_bytes(), 1).unwrap_err();
        assert!(e.to_string().starts_with("line 1: "), "{e}");
    }
}
