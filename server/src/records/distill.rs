//! Distilling a records file (`tunehub records distill --top K`): the K fastest trusted
//! successes of each (workload, target), with the workload and target lines they need, for
//! distributing pre-tuned packs. Offline, on the export format (README, "Record files"): the
//! result imports like any export, and the import checks every line as usual.

use serde_json::Value;
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

/// A record line's (workload, target) and its mean cost when it is a trusted success.
fn record_key(v: &Value) -> Option<((String, String), Option<f64>)> {
    let pair = v.get("i")?.get(0)?;
    let (w, t) = (pair.get(0)?.as_str()?, pair.get(1)?.as_str()?);
    let r = v.get("r")?;
    let costs: Vec<f64> = r
        .get(0)?
        .as_array()?
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    let ok = r.get(1)?.as_i64()? == 0
        && !v.get("noisy").and_then(Value::as_bool).unwrap_or(false)
        && !costs.is_empty();
    let mean = ok.then(|| costs.iter().sum::<f64>() / costs.len() as f64);
    Some(((w.to_string(), t.to_string()), mean))
}

/// The lines of a distilled file: the workload and target lines the kept records use (in the
/// order read), then the kept records, the fastest `top` per (workload, target) (in the order
/// read). Failed and noisy records are dropped; a line that is not JSON, or a record line
/// without its pair and result, is an error naming it.
pub fn distill(input: impl BufRead, top: usize) -> Result<(Vec<String>, Distilled), DistillError> {
    let mut workloads: Vec<(String, String)> = vec![];
    let mut targets: Vec<(String, String)> = vec![];
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
        let v: Value = serde_json::from_str(&line).map_err(|e| DistillError::Line {
            line: n,
            msg: format!("not JSON: {e}"),
        })?;
        let key_of = |field: &str| {
            v.get(field)
                .and_then(|x| x.get("key"))
                .and_then(Value::as_str)
                .map(String::from)
        };
        if let Some(k) = key_of("workload") {
            workloads.push((k, line));
        } else if let Some(k) = key_of("target") {
            targets.push((k, line));
        } else {
            let (pair, mean) = record_key(&v).ok_or_else(|| DistillError::Line {
                line: n,
                msg: "neither a workload, a target nor a record (`i` and `r`)".into(),
            })?;
            read += 1;
            if let Some(m) = mean {
                by_pair.entry(pair).or_default().push((m, n));
                records.insert(n, line);
            }
        }
    }
    let mut kept: Vec<usize> = vec![];
    let mut used_w = HashSet::new();
    let mut used_t = HashSet::new();
    for ((w, t), mut recs) in by_pair.iter().map(|(k, v)| (k.clone(), v.clone())) {
        recs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        kept.extend(recs.iter().take(top).map(|&(_, n)| n));
        used_w.insert(w);
        used_t.insert(t);
    }
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

    fn record(w: &str, t: &str, costs: &[f64], err: i64, noisy: bool) -> String {
        serde_json::json!({
            "i": [[w, t], [[], [["SP", 2, 0, 64, [8], 1]]]],
            "r": [costs, err, 0.5, 1.7e9],
            "v": "tunehub-v1", "noisy": noisy,
        })
        .to_string()
    }

    #[test]
    fn keeps_the_fastest_trusted_records_per_pair_with_the_lines_they_need() {
        let lines = [
            r#"{"workload": {"key": "w1", "dag": {}}}"#.to_string(),
            r#"{"workload": {"key": "w2", "dag": {}}}"#.to_string(),
            r#"{"workload": {"key": "w3", "dag": {}}}"#.to_string(),
            r#"{"target": {"key": "t1", "target": {}}}"#.to_string(),
            record("w1", "t1", &[3.0, 3.0], 0, false),
            record("w1", "t1", &[1.0, 1.0], 0, false),
            record("w1", "t1", &[0.5], 0, true),
            record("w1", "t1", &[0.1], 5, false),
            record("w1", "t1", &[2.0], 0, false),
            record("w2", "t1", &[9.0], 0, false),
            record("w3", "t1", &[], 2, false),
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
        let e = distill("{\"workload\": {\"key\": \"w\"}}\nnot json\n".as_bytes(), 1).unwrap_err();
        assert!(e.to_string().starts_with("line 2: not JSON"), "{e}");
        let e = distill("{\"x\": 1}\n".as_bytes(), 1).unwrap_err();
        assert!(
            e.to_string().contains("line 1") && e.to_string().contains("record"),
            "{e}"
        );
    }
}
