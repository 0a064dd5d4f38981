//! The XGBoost cost model: ranks the lowered programs of a task from their per-store features.
//!
//! Two ways to train it, chosen by [`Objective`]:
//! - [`Objective::PackSum`] (Ansor's): one row per store, a program's score is the sum of its
//!   stores' predictions, fitted to the normalised throughput with a custom squared-error
//!   objective on that sum, weighted by the label so that fast programs count most.
//! - [`Objective::RankPairwise`] / [`Objective::RankNdcg`]: XGBoost's own learning-to-rank
//!   objectives on one aggregated row per program ([`program_vector`]), one query group per task.
//!
//! With pack-sum, a second model, the *head* ([`HeadParams`]), orders the fast region: the
//! squared error on normalised throughput spends the trees on the whole range, where the search
//! needs the order of the few programs within a few percent of the best. The head is trained on
//! each task's fastest programs with a sharpened label (throughput to the 16th power), and
//! reorders the programs the first model (the *body*) scores above a gate.
//!
//! The evaluation (`examples/ranking.rs`, numbers in `docs/experiments/`) decides the default.
//!
//! Online use: [`CostModel::update`] adds the measured programs to per-task sample sets and
//! retrains from scratch (or from a loaded model: warm start) on a bounded subsample, so the cost
//! of an update stays flat as records grow. [`XgbModel::save`] / [`XgbModel::load`] carry the
//! trained booster between processes and targets; the records stay in the server's database.

use crate::error::ModelError;
use crate::features::{N_FEATURES, extract_values};
use crate::predictor::DensePredictor;
use crate::samples::{PROGRAM_FEATURES, Sample, TaskSamples, program_vector};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tunehub_engine::lower::LoweredFunc;
use tunehub_engine::measure::MeasureResult;
use tunehub_engine::search::{CostModel, CostModelError};
use tunehub_engine::task::Task;
use xgb::{Booster, DMatrix};

/// Sends XGBoost's own log lines (warnings such as deprecations) to `tracing` at debug level,
/// instead of the library's default of printing them on stderr, where they would break a
/// server's JSON log lines. XGBoost keeps the callback per thread, so every entry point calls
/// this on the thread it runs on.
fn route_xgboost_logs() {
    use std::cell::Cell;
    thread_local! {
        static ROUTED: Cell<bool> = const { Cell::new(false) };
    }
    unsafe extern "C" fn forward(msg: *const std::os::raw::c_char) {
        if msg.is_null() {
            return;
        }
        // SAFETY: XGBoost passes a NUL-terminated string that lives for the call.
        let text = unsafe { std::ffi::CStr::from_ptr(msg) }.to_string_lossy();
        tracing::debug!(target: "xgboost", "{}", text.trim());
    }
    ROUTED.with(|r| {
        if !r.get() {
            // SAFETY: registers a plain function for this thread; it never unwinds.
            unsafe { xgboost_sys::XGBRegisterLogCallback(Some(forward)) };
            r.set(true);
        }
    });
}

/// Relevance grades for `rank:ndcg` (above 0; with linear gain any count works).
const NDCG_GRADES: f32 = 31.0;

/// Start of every saved model, so that a foreign blob is rejected before XGBoost parses it.
const MAGIC: &[u8] = b"TUNEHUB-XGB-1\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// Ansor's: per-store rows, program score = sum of store predictions (custom gradient).
    PackSum,
    /// XGBoost `rank:pairwise` on per-program rows grouped by task.
    RankPairwise,
    /// XGBoost `rank:ndcg` (linear gain, so that the real-valued labels are usable).
    RankNdcg,
}

impl Objective {
    pub fn name(self) -> &'static str {
        match self {
            Objective::PackSum => "xgb-pack-sum",
            Objective::RankPairwise => "xgb-rank-pairwise",
            Objective::RankNdcg => "xgb-rank-ndcg",
        }
    }
}

/// The head model of a pack-sum [`XgbModel`]: trained on each task's fastest programs with
/// label `throughput^label_power`, it orders the programs the body scores above the gate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HeadParams {
    /// Share of each task's training programs, fastest first, the head is trained on.
    pub train_fraction: f32,
    /// Share of the training programs, by the body's score, whose score sets the gate.
    pub gate_fraction: f32,
    /// Power of the normalised throughput in the head's label: 16 maps 0.99 to 0.85 and
    /// 0.95 to 0.44, so the squared error separates programs a percent apart.
    pub label_power: f32,
}

impl Default for HeadParams {
    fn default() -> Self {
        // Held-out records of seen workloads (examples/ranking.rs): trained on 30% and gating
        // 25%, top-5 recall 0.62 against 0.58 at 20% / 15%, and 0.58 with power 8.
        HeadParams {
            train_fraction: 0.3,
            gate_fraction: 0.25,
            label_power: 16.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct XgbParams {
    pub objective: Objective,
    /// Boosting rounds per training (fixed: no validation split to stop early on).
    pub rounds: u32,
    pub max_depth: u32,
    pub eta: f32,
    pub gamma: f32,
    pub min_child_weight: f32,
    /// Histogram bins per feature (`hist` tree method); fewer bins train faster.
    pub max_bin: u32,
    /// XGBoost threads. 1 by default: on a 2-core machine shared with compilers and measured
    /// kernels, spinning OpenMP workers made training 3-5x slower, and one thread keeps
    /// training bit-for-bit deterministic.
    pub nthread: u32,
    /// Training uses at most this many programs (all tasks together), subsampled per task.
    pub max_train_samples: usize,
    /// Samples kept per task; beyond it the slowest surplus is dropped (the model needs the
    /// good region most; the failures and slow ones are plentiful).
    pub max_kept_per_task: usize,
    pub seed: u64,
    /// The fast region's second model (pack-sum only; `None`: the body's scores alone).
    /// Models saved before the field existed load without one.
    #[serde(default)]
    pub head: Option<HeadParams>,
}

impl XgbParams {
    /// The objective's name, with "+head" when a head is trained.
    pub fn name(&self) -> String {
        match (self.objective, self.head) {
            (Objective::PackSum, Some(_)) => format!("{}+head", self.objective.name()),
            (o, _) => o.name().into(),
        }
    }
}

impl Default for XgbParams {
    fn default() -> Self {
        // Ansor uses depth 10, eta 0.2, min_child_weight 0; on our few hundred records per task
        // shallower, slower-learning trees generalised better to held-out records (pack-sum,
        // 3-fold: top-5 recall 0.56 vs 0.44, a-peak@8 0.86 vs 0.78). Fixed rounds: no
        // validation split to stop early on, and a bounded training time. Labels stay Ansor's
        // throughput: a log-scaled label raised pairwise accuracy a little (0.61 vs 0.56) but
        // lost the fast region (top-5 0.33), which is what the search needs.
        XgbParams {
            objective: Objective::PackSum,
            rounds: 60,
            max_depth: 6,
            eta: 0.1,
            gamma: 0.001,
            min_child_weight: 1.0,
            max_bin: 64,
            nthread: 1,
            max_train_samples: 5000,
            max_kept_per_task: 20_000,
            seed: 0,
            head: Some(HeadParams::default()),
        }
    }
}

/// Header of a saved model (JSON), followed by XGBoost's own UBJSON bytes of the booster,
/// then those of the head if there is one.
#[derive(Serialize, Deserialize)]
struct Header {
    params: XgbParams,
    booster_bytes: usize,
    /// Features per store the trees were grown on: a model from a build that extracts other
    /// features would score garbage (0: saved before the field existed).
    #[serde(default)]
    n_features: usize,
    #[serde(default)]
    head_bytes: usize,
    #[serde(default)]
    gate: f32,
}

/// A trained head: its trees (saved with the model) and the body score from which it ranks.
struct Head {
    bytes: Vec<u8>,
    predictor: DensePredictor,
    gate: f32,
}

pub struct XgbModel {
    params: XgbParams,
    booster: Option<Booster>,
    /// The same trees, loaded for inplace prediction (see `predictor.rs`).
    predictor: Option<DensePredictor>,
    /// The loaded model every retraining starts from (warm start), if any.
    base: Option<Vec<u8>>,
    /// Trained afresh at every retraining (a loaded one predicts until then).
    head: Option<Head>,
    tasks: Vec<TaskSamples>,
    rng: ChaCha8Rng,
}

impl XgbModel {
    pub fn new(params: XgbParams) -> Self {
        XgbModel {
            rng: ChaCha8Rng::seed_from_u64(params.seed),
            params,
            booster: None,
            predictor: None,
            base: None,
            head: None,
            tasks: vec![],
        }
    }

    pub fn params(&self) -> &XgbParams {
        &self.params
    }

    pub fn is_trained(&self) -> bool {
        self.booster.is_some()
    }

    /// Samples kept, all tasks together.
    pub fn num_samples(&self) -> usize {
        self.tasks.iter().map(|t| t.samples.len()).sum()
    }

    /// The model as bytes: a header with the parameters, then the booster and the head's.
    /// Records are not included (the server keeps them); a model loaded on another target
    /// starts from these trees and adds rounds on that target's records.
    pub fn save(&self) -> Result<Vec<u8>, ModelError> {
        route_xgboost_logs();
        let booster = match &self.booster {
            Some(b) => b.save_buffer(true)?,
            None => self.base.clone().unwrap_or_default(),
        };
        let head = self.head.as_ref();
        let header = serde_json::to_vec(&Header {
            params: self.params.clone(),
            booster_bytes: booster.len(),
            n_features: N_FEATURES,
            head_bytes: head.map_or(0, |h| h.bytes.len()),
            gate: head.map_or(0.0, |h| h.gate),
        })
        .map_err(|e| ModelError::Invalid(e.to_string()))?;
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&header);
        out.push(b'\n');
        out.extend_from_slice(&booster);
        if let Some(h) = head {
            out.extend_from_slice(&h.bytes);
        }
        Ok(out)
    }

    /// A model saved by [`XgbModel::save`]. Its trees predict at once; the next
    /// [`CostModel::update`] continues training from them.
    pub fn load(bytes: &[u8]) -> Result<Self, ModelError> {
        route_xgboost_logs();
        let bad = |m: &str| ModelError::Invalid(format!("not a saved tunehub model: {m}"));
        let rest = bytes.strip_prefix(MAGIC).ok_or_else(|| bad("no header"))?;
        let nl = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| bad("truncated header"))?;
        let header: Header =
            serde_json::from_slice(&rest[..nl]).map_err(|e| bad(&e.to_string()))?;
        let rest = &rest[nl + 1..];
        if rest.len() != header.booster_bytes + header.head_bytes {
            return Err(bad("truncated model"));
        }
        let (body, head) = rest.split_at(header.booster_bytes);
        if header.n_features != N_FEATURES {
            return Err(ModelError::Invalid(format!(
                "the saved model was trained on {} features per store, this build extracts {}",
                header.n_features, N_FEATURES
            )));
        }
        let mut m = XgbModel::new(header.params);
        if !body.is_empty() {
            let mut b = Booster::load_buffer(body)?;
            m.configure(&mut b)?;
            m.predictor = Some(DensePredictor::from_model(body)?);
            m.booster = Some(b);
            m.base = Some(body.to_vec());
        }
        if !head.is_empty() {
            m.head = Some(Head {
                bytes: head.to_vec(),
                predictor: DensePredictor::from_model(head)?,
                gate: header.gate,
            });
        }
        Ok(m)
    }

    /// Adds measured samples of task `key` without retraining (see [`XgbModel::retrain`]).
    pub fn add_samples(&mut self, key: &str, samples: impl IntoIterator<Item = Sample>) {
        let idx = match self.tasks.iter().position(|t| t.key == key) {
            Some(i) => i,
            None => {
                self.tasks.push(TaskSamples::new(key));
                self.tasks.len() - 1
            }
        };
        let cap = self.params.max_kept_per_task;
        let t = &mut self.tasks[idx];
        t.samples.extend(samples);
        if t.samples.len() > cap {
            // Keep the fastest: stable sort by cost, drop the tail (failures are last).
            t.samples.sort_by(|a, b| a.cost.total_cmp(&b.cost));
            t.samples.truncate(cap);
        }
    }

    /// Trains on the kept samples (subsampled to `max_train_samples`), from the loaded model if
    /// there is one. Does nothing while no task has a successful measurement.
    pub fn retrain(&mut self) -> Result<(), ModelError> {
        route_xgboost_logs();
        let chosen = self.training_set();
        if chosen.is_empty() {
            return Ok(());
        }
        let booster = match self.params.objective {
            Objective::PackSum => self.train_pack_sum(&chosen, true)?,
            Objective::RankPairwise | Objective::RankNdcg => {
                let mut rows = vec![];
                let mut group = vec![];
                let mut lab = vec![];
                let mut task = usize::MAX;
                for &(ti, i, y) in &chosen {
                    let s = &self.tasks[ti].samples[i];
                    if ti != task {
                        group.push(0u32);
                        task = ti;
                    }
                    *group.last_mut().expect("a group") += 1;
                    program_vector(&s.stores, &mut rows);
                    // NDCG reads relevance as an integer grade (a label in [0, 1) counts as
                    // 0, which left every program tied): 32 grades of the normalised speed.
                    lab.push(if self.params.objective == Objective::RankNdcg {
                        (y * NDCG_GRADES).round()
                    } else {
                        y
                    });
                }
                let mut d = DMatrix::from_dense(&rows, lab.len())?;
                d.set_labels(&lab)?;
                d.set_group(&group)?;
                let mut booster = self.start_booster(&d, true)?;
                for i in 0..self.params.rounds {
                    booster.update(&d, i as i32)?;
                }
                booster
            }
        };
        let predictor = DensePredictor::from_model(&booster.save_buffer(true)?)?;
        self.head = match (self.params.objective, self.params.head) {
            (Objective::PackSum, Some(hp)) => Some(self.train_head(&chosen, hp, &predictor)?),
            _ => None,
        };
        self.predictor = Some(predictor);
        self.booster = Some(booster);
        Ok(())
    }

    /// Ansor's pack-sum on `(task, sample, label)`: one row per store, the custom objective on
    /// the sum per program. `warm`: continue from the loaded model, if any.
    fn train_pack_sum(
        &self,
        chosen: &[(usize, usize, f32)],
        warm: bool,
    ) -> Result<Booster, ModelError> {
        let mut rows = vec![];
        let mut group = vec![];
        let mut lab = vec![];
        let mut weight = vec![];
        for &(t, i, y) in chosen {
            let s = &self.tasks[t].samples[i];
            for st in &s.stores {
                rows.extend_from_slice(st);
                lab.push(y);
            }
            group.push(s.stores.len() as u32);
            // Ansor weighs each program by its label: the fast region matters most.
            // With groups set XGBoost wants one weight per group (here: per program).
            weight.push(y.max(0.05));
        }
        let mut d = DMatrix::from_dense(&rows, lab.len())?;
        d.set_labels(&lab)?;
        d.set_weights(&weight)?;
        // The query groups carry the store-to-program packing to the custom objective
        // (a plain `fn` cannot capture it); the objective itself is ours.
        d.set_group(&group)?;
        let mut booster = self.start_booster(&d, warm)?;
        for _ in 0..self.params.rounds {
            booster.update_custom(&d, pack_sum_objective)?;
        }
        Ok(booster)
    }

    /// The head, trained on each task's fastest `train_fraction` of `chosen` (grouped by task)
    /// with the sharpened label; its gate is the body's score at the `gate_fraction` quantile
    /// of all of `chosen`.
    fn train_head(
        &self,
        chosen: &[(usize, usize, f32)],
        hp: HeadParams,
        body: &DensePredictor,
    ) -> Result<Head, ModelError> {
        let mut fast = vec![];
        for task in chosen.chunk_by(|a, b| a.0 == b.0) {
            let mut v = task.to_vec();
            v.sort_by(|a, b| b.2.total_cmp(&a.2));
            let k = ((v.len() as f32 * hp.train_fraction).ceil() as usize).clamp(1, v.len());
            fast.extend(
                v[..k]
                    .iter()
                    .map(|&(t, i, y)| (t, i, y.powf(hp.label_power))),
            );
        }
        // A fresh model: a loaded one was trained as a body, on another label.
        let bytes = self.train_pack_sum(&fast, false)?.save_buffer(true)?;
        let programs: Vec<&[[f32; N_FEATURES]]> = chosen
            .iter()
            .map(|&(t, i, _)| self.tasks[t].samples[i].stores.as_slice())
            .collect();
        let mut scores = pack_sum_scores(body, &programs)?;
        scores.sort_by(|a, b| b.total_cmp(a));
        let at = (scores.len() as f32 * hp.gate_fraction) as usize;
        Ok(Head {
            predictor: DensePredictor::from_model(&bytes)?,
            bytes,
            gate: scores[at.min(scores.len() - 1)],
        })
    }

    /// A fresh booster that knows the training matrix (XGBoost sizes the model from it), or,
    /// when `warm`, the loaded model to continue from.
    fn start_booster(&self, d: &DMatrix, warm: bool) -> Result<Booster, ModelError> {
        let mut b = match &self.base {
            Some(bytes) if warm => Booster::load_buffer(bytes)?,
            _ => Booster::new_with_cached_dmats(&Default::default(), &[d])?,
        };
        self.configure(&mut b)?;
        Ok(b)
    }

    fn configure(&self, b: &mut Booster) -> Result<(), ModelError> {
        let p = &self.params;
        let objective = match p.objective {
            // Only configures the learner (base score, label checks): the gradient is ours.
            Objective::PackSum => "reg:squarederror",
            Objective::RankPairwise => "rank:pairwise",
            Objective::RankNdcg => "rank:ndcg",
        };
        for (k, v) in [
            ("verbosity", "0".to_string()),
            ("objective", objective.into()),
            ("tree_method", "hist".into()),
            ("max_depth", p.max_depth.to_string()),
            ("eta", p.eta.to_string()),
            ("gamma", p.gamma.to_string()),
            ("min_child_weight", p.min_child_weight.to_string()),
            ("max_bin", p.max_bin.to_string()),
            ("nthread", p.nthread.to_string()),
            // XGBoost reads its seed as a signed 64-bit integer: a job's seed is any u64.
            ("seed", (p.seed & i64::MAX as u64).to_string()),
            // Scores are sums over stores: no constant per store.
            ("base_score", "0".into()),
        ] {
            b.set_param(k, &v)?;
        }
        if p.objective == Objective::RankPairwise {
            // XGBoost samples one pair per program by default: too few for a few hundred.
            b.set_param("lambdarank_pair_method", "mean")?;
            b.set_param("lambdarank_num_pair_per_sample", "8")?;
        }
        if p.objective == Objective::RankNdcg {
            // Linear gain on the integer grades. NDCG keeps XGBoost's default pairs (each
            // program against the top of its list): with the "mean" pairs above, every
            // prediction came out equal.
            b.set_param("ndcg_exp_gain", "false")?;
        }
        Ok(())
    }

    /// The programs to train on with their labels, grouped by task. Labels use every kept
    /// sample of the task (the best is the task's best, not the subsample's); when over budget
    /// each task gets a share proportional to its size, its fastest tenth always included.
    fn training_set(&mut self) -> Vec<(usize, usize, f32)> {
        let total: usize = self.tasks.iter().map(|t| t.samples.len()).sum();
        let budget = self.params.max_train_samples.max(1);
        let mut out = vec![];
        for (ti, t) in self.tasks.iter().enumerate() {
            let lab = t.labels();
            if lab.iter().all(|&y| y == 0.0) {
                continue; // nothing to rank against
            }
            let mut idx: Vec<usize> = (0..t.samples.len()).collect();
            if total > budget {
                let share = (t.samples.len() * budget).div_ceil(total).max(1);
                idx.sort_by(|&a, &b| lab[b].total_cmp(&lab[a]));
                let top = (share / 10).max(1);
                let (head, tail) = idx.split_at_mut(top);
                tail.shuffle(&mut self.rng);
                let keep = head.len() + (share - top).min(tail.len());
                idx.truncate(keep);
                idx.sort_unstable();
            }
            for i in idx {
                if t.samples[i].stores.is_empty() {
                    continue;
                }
                out.push((ti, i, lab[i]));
            }
        }
        out
    }

    /// Scores of programs given by their stores' features (higher = predicted faster). An
    /// empty batch, a program without stores or a non-finite feature is an error.
    pub fn predict_stores(
        &mut self,
        programs: &[&[[f32; N_FEATURES]]],
    ) -> Result<Vec<f32>, ModelError> {
        route_xgboost_logs();
        validate(programs)?;
        let Some(predictor) = &self.predictor else {
            // Untrained: random scores, so that the search explores uniformly (as Ansor).
            return Ok(programs.iter().map(|_| self.rng.r#gen::<f32>()).collect());
        };
        match self.params.objective {
            Objective::PackSum => {
                let mut out = pack_sum_scores(predictor, programs)?;
                if let Some(head) = &self.head {
                    // Above the gate, the head's order, and above every program below it.
                    let fast: Vec<usize> =
                        (0..out.len()).filter(|&i| out[i] >= head.gate).collect();
                    if !fast.is_empty() {
                        let picked: Vec<_> = fast.iter().map(|&i| programs[i]).collect();
                        let h = pack_sum_scores(&head.predictor, &picked)?;
                        for (&i, h) in fast.iter().zip(h) {
                            out[i] = head.gate + 1.0 + h.max(0.0);
                        }
                    }
                }
                Ok(out)
            }
            Objective::RankPairwise | Objective::RankNdcg => {
                let mut rows = Vec::with_capacity(programs.len() * PROGRAM_FEATURES);
                for p in programs {
                    program_vector(p, &mut rows);
                }
                Ok(predictor.predict(&rows, PROGRAM_FEATURES)?)
            }
        }
    }
}

/// Pack-sum scores: per program, the sum of its stores' predictions.
fn pack_sum_scores(
    predictor: &DensePredictor,
    programs: &[&[[f32; N_FEATURES]]],
) -> Result<Vec<f32>, ModelError> {
    let n: usize = programs.iter().map(|p| p.len()).sum();
    let mut rows = Vec::with_capacity(n * N_FEATURES);
    for p in programs {
        for s in p.iter() {
            rows.extend_from_slice(s);
        }
    }
    let pred = predictor.predict(&rows, N_FEATURES)?;
    let mut out = Vec::with_capacity(programs.len());
    let mut at = 0;
    for p in programs {
        out.push(pred[at..at + p.len()].iter().sum());
        at += p.len();
    }
    Ok(out)
}

pub(crate) fn validate(programs: &[&[[f32; N_FEATURES]]]) -> Result<(), ModelError> {
    if programs.is_empty() {
        return Err(ModelError::Invalid("empty batch".into()));
    }
    for (i, p) in programs.iter().enumerate() {
        if p.is_empty() {
            return Err(ModelError::Invalid(format!("program {i} has no stores")));
        }
        if p.iter().flatten().any(|v| !v.is_finite()) {
            return Err(ModelError::Invalid(format!(
                "program {i} has a non-finite feature"
            )));
        }
    }
    Ok(())
}

/// Ansor's pack-sum squared error: for the rows (stores) of program `p`, gradient
/// `w_p * (sum of its predictions - y_p)` and hessian `w_p`. The groups give the packing,
/// the weights are per group (program).
fn pack_sum_objective(pred: &[f32], d: &DMatrix) -> (Vec<f32>, Vec<f32>) {
    let (Ok(labels), Ok(weights), Ok(ptr)) = (d.get_labels(), d.get_weights(), d.get_group())
    else {
        // Unreachable with the matrices built above; a zero gradient adds an empty tree.
        return (vec![0.0; pred.len()], vec![1.0; pred.len()]);
    };
    let mut grad = vec![0.0; pred.len()];
    let mut hess = vec![0.0; pred.len()];
    for (p, w) in ptr.windows(2).enumerate() {
        let (a, b) = (w[0] as usize, w[1] as usize);
        let sum: f32 = pred[a..b].iter().sum();
        let g = weights[p] * (sum - labels[a]);
        grad[a..b].fill(g);
        hess[a..b].fill(weights[p]);
    }
    (grad, hess)
}

/// Features of lowered programs, one `Vec` of store vectors per program.
pub fn program_features(programs: &[&LoweredFunc]) -> Vec<Vec<[f32; N_FEATURES]>> {
    programs.iter().map(|f| extract_values(f)).collect()
}

/// [`program_features`] on every core for large batches: the search asks for thousands of
/// programs per generation and nothing else runs meanwhile (measured on conv2d, 2 cores: the
/// search's round from 1.8 to 1.45 s, with copies cloned instead of rebuilt).
pub fn program_features_par(programs: &[&LoweredFunc]) -> Vec<Vec<[f32; N_FEATURES]>> {
    if programs.len() < 256 {
        return program_features(programs);
    }
    tunehub_engine::par::par_map(programs.len(), tunehub_engine::par::cores(), |i| {
        extract_values(programs[i])
    })
}

/// The samples of measured programs (failures get an infinite cost, hence label 0).
pub fn samples_of(
    programs: &[&LoweredFunc],
    results: &[MeasureResult],
) -> Result<Vec<Sample>, ModelError> {
    if programs.len() != results.len() {
        return Err(ModelError::Invalid(format!(
            "{} programs but {} results",
            programs.len(),
            results.len()
        )));
    }
    Ok(program_features(programs)
        .into_iter()
        .zip(results)
        .map(|(stores, r)| Sample {
            stores,
            cost: r.min_cost(),
        })
        .collect())
}

impl CostModel for XgbModel {
    fn predict(
        &mut self,
        _task: &Task,
        programs: &[&LoweredFunc],
    ) -> Result<Vec<f32>, CostModelError> {
        if programs.is_empty() {
            return Err(CostModelError::Invalid("empty batch".into()));
        }
        let feats = program_features_par(programs);
        let refs: Vec<&[[f32; N_FEATURES]]> = feats.iter().map(|f| f.as_slice()).collect();
        Ok(self.predict_stores(&refs)?)
    }

    fn update(
        &mut self,
        task: &Task,
        programs: &[&LoweredFunc],
        results: &[MeasureResult],
    ) -> Result<(), CostModelError> {
        let samples = samples_of(programs, results)?;
        self.add_samples(&task.key, samples);
        Ok(self.retrain()?)
    }

    fn name(&self) -> &str {
        self.params.objective.name()
    }

    fn save_bytes(&self) -> Option<Vec<u8>> {
        if self.is_trained() {
            self.save().ok()
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tunehub_engine::ops;
    use tunehub_engine::sample::RandomSampler;
    use tunehub_engine::target::Target;

    /// A synthetic task: programs of 1-3 stores whose true speed is a known function of two
    /// features (more of feature 0 is faster, feature 5 slows down).
    fn synthetic(n: usize, seed: u64) -> Vec<Sample> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                let k = rng.gen_range(1..=3);
                let stores: Vec<[f32; N_FEATURES]> = (0..k)
                    .map(|_| {
                        let mut s = [0.0f32; N_FEATURES];
                        for v in s.iter_mut().take(12) {
                            *v = rng.r#gen::<f32>();
                        }
                        s
                    })
                    .collect();
                let speed: f32 = stores.iter().map(|s| 1.0 + 4.0 * s[0] - 2.0 * s[5]).sum();
                Sample {
                    stores,
                    cost: 1.0 / f64::from(speed.max(0.01)),
                }
            })
            .collect()
    }

    fn pairwise(samples: &[Sample], scores: &[f32]) -> f64 {
        let costs: Vec<f64> = samples.iter().map(|s| s.cost).collect();
        crate::eval::metrics(&costs, scores).pairwise
    }

    fn fitted(objective: Objective) -> XgbModel {
        let mut m = XgbModel::new(XgbParams {
            objective,
            rounds: 30,
            ..XgbParams::default()
        });
        m.add_samples("synthetic", synthetic(400, 1));
        m.retrain().expect("trains");
        m
    }

    fn refs(samples: &[Sample]) -> Vec<&[[f32; N_FEATURES]]> {
        samples.iter().map(|s| s.stores.as_slice()).collect()
    }

    /// Any job seed trains (XGBoost's own seed is a signed 64-bit integer).
    #[test]
    fn every_seed_trains() {
        for seed in [0, 1, u64::MAX, 1 << 63] {
            let mut m = XgbModel::new(XgbParams {
                seed,
                rounds: 2,
                ..XgbParams::default()
            });
            m.add_samples("synthetic", synthetic(50, 1));
            m.retrain().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        }
    }

    #[test]
    fn recovers_a_synthetic_ranking() {
        let test = synthetic(200, 2);
        // NDCG weighs the top of the list and leaves the rest loosely ordered.
        for (objective, min) in [
            (Objective::PackSum, 0.85),
            (Objective::RankPairwise, 0.85),
            (Objective::RankNdcg, 0.7),
        ] {
            let mut m = fitted(objective);
            let scores = m.predict_stores(&refs(&test)).expect("predicts");
            let acc = pairwise(&test, &scores);
            assert!(acc > min, "{objective:?}: pairwise accuracy {acc}");
        }
    }

    #[test]
    fn the_head_orders_the_programs_above_the_gate_first() {
        let test = synthetic(300, 5);
        let mut m = fitted(Objective::PackSum);
        let head = m.head.as_ref().expect("a head");
        let gate = head.gate;
        let body = pack_sum_scores(m.predictor.as_ref().unwrap(), &refs(&test)).unwrap();
        let fast: Vec<usize> = (0..test.len()).filter(|&i| body[i] >= gate).collect();
        let h = pack_sum_scores(
            &head.predictor,
            &fast
                .iter()
                .map(|&i| test[i].stores.as_slice())
                .collect::<Vec<_>>(),
        )
        .unwrap();
        // The gate is the body's score at the top quarter of the training programs.
        assert!(
            (fast.len() as f64 / test.len() as f64 - 0.25).abs() < 0.1,
            "{} of {} above the gate",
            fast.len(),
            test.len()
        );
        let scores = m.predict_stores(&refs(&test)).unwrap();
        let below = (0..test.len())
            .filter(|&i| body[i] < gate)
            .map(|i| scores[i])
            .fold(f32::NEG_INFINITY, f32::max);
        for (k, &i) in fast.iter().enumerate() {
            assert!(scores[i] > below, "program {i} above the gate ranks first");
            for (l, &j) in fast.iter().enumerate() {
                if h[k].max(0.0) > h[l].max(0.0) {
                    assert!(scores[i] > scores[j], "the head's order above the gate");
                }
            }
        }
        // Below the gate the body's scores are kept.
        for i in (0..test.len()).filter(|&i| body[i] < gate) {
            assert_eq!(scores[i], body[i]);
        }
    }

    #[test]
    fn inplace_prediction_equals_the_dmatrix_path() {
        let test = synthetic(100, 4);
        for objective in [Objective::PackSum, Objective::RankPairwise] {
            let mut m = fitted(objective);
            let mut rows = vec![];
            let n = match objective {
                Objective::PackSum => {
                    test.iter()
                        .flat_map(|s| &s.stores)
                        .for_each(|st| rows.extend(st));
                    test.iter().map(|s| s.stores.len()).sum()
                }
                _ => {
                    test.iter()
                        .for_each(|s| program_vector(&s.stores, &mut rows));
                    test.len()
                }
            };
            let booster = m.booster.as_ref().expect("trained");
            let want = booster
                .predict(&DMatrix::from_dense(&rows, n).unwrap())
                .unwrap();
            let cols = rows.len() / n;
            let got = m.predictor.as_ref().unwrap().predict(&rows, cols);
            assert_eq!(got.unwrap(), want, "{objective:?}");
            let ragged = &rows[..rows.len() - 1];
            assert!(m.predictor.as_ref().unwrap().predict(ragged, cols).is_err());
            // And the model's own scores are these, summed per program for pack-sum.
            let scores = m.predict_stores(&refs(&test)).unwrap();
            if objective == Objective::RankPairwise {
                assert_eq!(scores, want);
            }
        }
    }

    #[test]
    fn save_load_round_trips_exactly_and_warm_starts() {
        let test = synthetic(50, 3);
        // Without the head: the body's trees alone round-trip too.
        let mut plain = XgbModel::new(XgbParams {
            head: None,
            rounds: 30,
            ..XgbParams::default()
        });
        plain.add_samples("synthetic", synthetic(400, 1));
        plain.retrain().unwrap();
        let mut l = XgbModel::load(&plain.save().unwrap()).expect("loads");
        assert!(l.head.is_none());
        assert_eq!(
            l.predict_stores(&refs(&test)).unwrap(),
            plain.predict_stores(&refs(&test)).unwrap()
        );

        let mut m = fitted(Objective::PackSum);
        assert!(m.head.is_some(), "pack-sum trains a head by default");
        let bytes = m.save().expect("saves");
        let mut l = XgbModel::load(&bytes).expect("loads");
        assert_eq!(l.params(), m.params());
        assert_eq!(
            l.head.as_ref().map(|h| h.gate),
            m.head.as_ref().map(|h| h.gate)
        );
        assert_eq!(
            l.predict_stores(&refs(&test)).unwrap(),
            m.predict_stores(&refs(&test)).unwrap()
        );
        assert_eq!(
            l.save().unwrap(),
            bytes,
            "saving again gives the same bytes"
        );
        // Warm start: the loaded trees are kept, new rounds are added on new records.
        l.add_samples("other", synthetic(100, 4));
        l.retrain().expect("continues training");
        assert_ne!(l.save().unwrap(), bytes);

        assert!(XgbModel::load(b"not a model").is_err());
        assert!(XgbModel::load(&bytes[..bytes.len() - 10]).is_err());
        let untrained = XgbModel::new(XgbParams::default()).save().unwrap();
        assert!(!XgbModel::load(&untrained).unwrap().is_trained());

        // A model from a build with another feature layout is refused, not misread.
        let nl = MAGIC.len()
            + bytes[MAGIC.len()..]
                .iter()
                .position(|&b| b == b'\n')
                .unwrap();
        let head = std::str::from_utf8(&bytes[..nl]).unwrap();
        let field = format!("\"n_features\":{N_FEATURES}");
        assert!(
            head.contains(&field),
            "the header records the layout: {head}"
        );
        let mut old = head.replacen(&field, "\"n_features\":7", 1).into_bytes();
        old.extend_from_slice(&bytes[nl..]);
        match XgbModel::load(&old) {
            Err(ModelError::Invalid(m)) => assert!(m.contains("7 features"), "{m}"),
            other => panic!("loaded a model of another layout: {:?}", other.is_ok()),
        }
    }

    #[test]
    fn empty_or_malformed_batches_are_errors() {
        let mut m = fitted(Objective::PackSum);
        assert!(matches!(m.predict_stores(&[]), Err(ModelError::Invalid(_))));
        let none: &[[f32; N_FEATURES]] = &[];
        assert!(matches!(
            m.predict_stores(&[none]),
            Err(ModelError::Invalid(_))
        ));
        let mut bad = [0.0f32; N_FEATURES];
        bad[3] = f32::NAN;
        assert!(matches!(
            m.predict_stores(&[&[bad][..]]),
            Err(ModelError::Invalid(_))
        ));
        // The same through the trait, and mismatched update lengths.
        let dag = ops::matmul(16, 16, 16).unwrap();
        let task = Task::new(dag.clone(), "matmul(16,16,16)");
        assert!(CostModel::predict(&mut m, &task, &[]).is_err());
        let func = tunehub_engine::lower::lower(
            &RandomSampler::new(&dag, &Target::detect(), 1)
                .sample()
                .replay(&dag)
                .unwrap(),
        )
        .unwrap();
        assert!(CostModel::update(&mut m, &task, &[&func], &[]).is_err());
        let scores = CostModel::predict(&mut m, &task, &[&func, &func]).unwrap();
        assert_eq!(scores.len(), 2);
        assert_eq!(scores[0], scores[1]);
    }

    #[test]
    fn update_through_the_trait_learns_and_failures_rank_last() {
        let dag = ops::matmul(32, 32, 32).unwrap();
        let task = Task::new(dag.clone(), "matmul(32,32,32)");
        let mut sampler = RandomSampler::new(&dag, &Target::detect(), 5);
        let funcs: Vec<LoweredFunc> = (0..40)
            .map(|_| tunehub_engine::lower::lower(&sampler.sample().replay(&dag).unwrap()).unwrap())
            .collect();
        let progs: Vec<&LoweredFunc> = funcs.iter().collect();
        let results: Vec<MeasureResult> = (0..40)
            .map(|i| {
                if i % 10 == 0 {
                    MeasureResult::error(tunehub_engine::measure::ErrorCode::RunTimeout, "t")
                } else {
                    let mut r =
                        MeasureResult::error(tunehub_engine::measure::ErrorCode::NoError, "");
                    r.costs = vec![1e-3];
                    r
                }
            })
            .collect();
        let mut m = XgbModel::new(XgbParams {
            rounds: 10,
            ..XgbParams::default()
        });
        assert!(!m.is_trained());
        m.update(&task, &progs, &results).expect("updates");
        assert!(m.is_trained());
        assert_eq!(m.num_samples(), 40);
        assert_eq!(m.predict(&task, &progs).unwrap().len(), 40);
    }
}
