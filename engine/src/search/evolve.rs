//! One task's search: Ansor's evolutionary strategy over annotated sketches.
//!
//! A round ([`TaskSearch::next_batch`]): build a population from fresh random annotations plus
//! the best measured candidates; for a few generations, score it with the cost model and breed
//! the next one by roulette selection and mutation; then propose the best-scored candidates
//! never measured before, plus an eps-greedy share of fresh random ones. Candidates are
//! generated and lowered on all cores (each with its own seeded RNG, so the result does not
//! depend on the thread count). Once the population converges, many children are copies of
//! programs already seen this round: each distinct program is lowered and scored once per
//! round, and the candidates that share it share one lowered copy. Distinct step lists can
//! still lower to one kernel (an auto-unroll step that unrolls nothing more, a split of a loop
//! that is then fused back in the same order): a batch takes a candidate only if the C it
//! generates is new, so no trial measures a kernel twice.

use super::annotate::{AnnotateContext, Decider, Decision, annotate};
use super::cost_model::{CostModel, CostModelError};
use super::mutate::{MutationWeights, mutate};
use super::recover::recover;
use super::sketch::{self, Sketch, SketchRule};
use crate::lower::{LoweredFunc, lower_with};
use crate::measure::MeasureResult;
use crate::par::{par_drop, par_map};
use crate::schedule::Schedule;
use crate::target::Target;
use crate::task::Task;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Instant;

/// Candidates per generation of the evolutionary search, Ansor's: the CLI, the service and the
/// benchmark read it from here. Smaller rounds are faster and search less.
pub const DEFAULT_POPULATION: usize = 2048;

/// The knobs of one task's search, with Ansor's defaults where it has them.
#[derive(Debug, Clone)]
pub struct SearchParams {
    /// Candidates per generation (Ansor: 2048).
    pub population: usize,
    /// Generations of evolution per round (Ansor: 4).
    pub generations: usize,
    /// Probability that a selected parent is mutated rather than copied (Ansor: 0.85).
    pub mutation_prob: f64,
    /// Share of each batch taken from fresh random candidates (Ansor: 0.05).
    pub eps_greedy: f64,
    /// The same share in a task's first batch, before any record of it is known. A model then
    /// ranks the task from other workloads (a transferred model) or at random (an untrained
    /// one), and whatever the first batch holds is all the model learns the task from next:
    /// a first batch of the transferred model's picks alone kept conv2d NCHW at 152-165
    /// GFLOP/s after 200 trials (seeds 1-3), half of it random at 170-171, while matmul 512
    /// still reached 90% of its best at trial 1-3
    /// (`docs/experiments/2026-11-24-transfer-first-batch.md`).
    pub first_batch_random: f64,
    /// Share of the initial population taken from the best measured candidates (Ansor: 0.2).
    pub measured_ratio: f64,
    pub weights: MutationWeights,
    /// Threads that generate and lower candidates; 0 = all cores.
    pub threads: usize,
}

impl Default for SearchParams {
    fn default() -> Self {
        SearchParams {
            population: DEFAULT_POPULATION,
            generations: 4,
            mutation_prob: 0.85,
            eps_greedy: 0.05,
            first_batch_random: 0.5,
            measured_ratio: 0.2,
            weights: MutationWeights::default(),
            threads: 0,
        }
    }
}

/// Counters for logs and the benchmark.
#[derive(Debug, Clone, Default)]
pub struct SearchStats {
    pub rounds: usize,
    /// Wall time of the last `next_batch` and of all of them.
    pub last_round_s: f64,
    pub total_s: f64,
    /// Wall time in the cost model (predict and update, feature extraction included), summed.
    pub model_s: f64,
    /// Candidates generated (sampled or mutated).
    pub generated: u64,
    /// Distinct programs lowered (a candidate equal to one lowered earlier in its round is not).
    pub lowered: u64,
    /// Programs the model scored.
    pub scored: u64,
    /// Generated candidates thrown away because they did not lower, with the last reason.
    pub rejected: u64,
    pub last_rejection: Option<String>,
    /// Measured schedules the search did not make (seeds, resumed records) whose decisions
    /// were recovered and which joined the elites, and those tried in vain.
    pub recovered: u64,
    pub unrecovered: u64,
}

/// A generated, lowered candidate.
#[derive(Clone)]
struct Candidate {
    sketch: usize,
    decisions: Vec<Decision>,
    schedule: Schedule,
    hash: u64,
    lowered: Arc<LoweredFunc>,
}

/// The programs lowered in one round, by schedule hash: a candidate equal to one of them takes
/// its lowered copy instead of lowering again; a schedule that failed to lower fails once.
#[derive(Default)]
struct Lowered {
    ok: HashMap<u64, Arc<LoweredFunc>>,
    failed: HashMap<u64, String>,
}

/// Measured schedules of unknown decisions recovered per round at most: a resumed job with
/// thousands of records starts its first round without waiting for all of them.
const EXPLAINED_PER_ROUND: usize = 64;

/// A measured candidate whose decisions are known, kept to seed later populations.
struct Elite {
    cost: f64,
    sketch: usize,
    decisions: Vec<Decision>,
}

/// `share` of `n` candidates as a whole number, rounded up with the probability of its
/// fraction: the expected count is `n * share` at any batch size (rounding to nearest gave
/// batches of 8 no random candidate at 5%).
fn share_of(n: usize, share: f64, rng: &mut impl Rng) -> usize {
    let x = (n as f64 * share).clamp(0.0, n as f64);
    let (whole, frac) = (x.floor(), x.fract());
    whole as usize + usize::from(frac > 0.0 && rng.gen_bool(frac))
}

/// The canonical identity of a schedule: its steps (generation is deterministic, so equal
/// steps are the same program).
pub fn schedule_hash(s: &Schedule) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.steps.hash(&mut h);
    h.finish()
}

/// The identity of the kernel a lowered program becomes on `target`: its C source, the
/// thing that is compiled and measured.
pub fn program_hash(func: &LoweredFunc, target: &Target) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    crate::codegen::emit(func, target).source.hash(&mut h);
    h.finish()
}

pub struct TaskSearch {
    task: Arc<Task>,
    /// How the task's kernels are lowered (packed layout-free inputs), so that the model sees
    /// the programs that are measured.
    lower_opts: crate::lower::LowerOptions,
    ctx: AnnotateContext,
    /// The target the kernels are generated for (a program's identity is its C on it).
    target: Target,
    params: SearchParams,
    rng: ChaCha8Rng,
    sketches: Vec<Sketch>,
    /// Every schedule proposed or measured: never proposed again.
    seen: HashSet<u64>,
    /// The kernel of every schedule proposed or measured ([`program_hash`]): a schedule that
    /// generates one of them is not proposed either.
    programs: HashSet<u64>,
    /// Proposed and not yet recorded: what the model needs at `record`.
    pending: HashMap<u64, Candidate>,
    /// Measured results not yet given to the model (from `add_measured`).
    backlog: Vec<(LoweredFunc, MeasureResult)>,
    elites: Vec<Elite>,
    /// Measured schedules whose decisions are unknown (seeds, resumed records), with their
    /// cost: they join the elites once their decisions are recovered ([`TaskSearch::explain`]).
    unexplained: Vec<(f64, Schedule)>,
    best: Option<(Schedule, f64)>,
    trials: usize,
    /// Schedules to measure first, as they are (a warm start from other shapes' best).
    seeds: VecDeque<Schedule>,
    pub stats: SearchStats,
}

impl TaskSearch {
    /// A search with the target's sketch rules ([`sketch::cpu_rules`] on every CPU today).
    pub fn new(task: Arc<Task>, target: &Target, params: SearchParams, seed: u64) -> Self {
        Self::with_rules(task, target, params, seed, &sketch::cpu_rules())
    }

    pub fn with_rules(
        task: Arc<Task>,
        target: &Target,
        params: SearchParams,
        seed: u64,
        rules: &[Box<dyn SketchRule>],
    ) -> Self {
        let sketches = sketch::generate(&task.dag, rules);
        TaskSearch {
            lower_opts: task.lower_options(),
            ctx: AnnotateContext::for_target(target),
            target: target.clone(),
            task,
            params,
            rng: ChaCha8Rng::seed_from_u64(seed),
            sketches,
            seen: HashSet::new(),
            programs: HashSet::new(),
            pending: HashMap::new(),
            backlog: vec![],
            elites: vec![],
            unexplained: vec![],
            best: None,
            trials: 0,
            seeds: VecDeque::new(),
            stats: SearchStats::default(),
        }
    }

    /// Schedules to propose before any the search finds, in order and unranked: a warm start
    /// from the best schedules of similar workloads (adapted to this one). A seed that does
    /// not lower, or whose kernel was proposed already, is passed over.
    pub fn seed(&mut self, schedules: impl IntoIterator<Item = Schedule>) {
        self.seeds.extend(schedules);
    }

    /// Up to `n` seeds never proposed, each marked proposed.
    fn take_seeds(&mut self, n: usize) -> Vec<Schedule> {
        let mut out = vec![];
        while out.len() < n {
            let Some(s) = self.seeds.pop_front() else {
                break;
            };
            let h = schedule_hash(&s);
            if self.seen.contains(&h) {
                continue;
            }
            let Ok(l) = s
                .replay(&self.task.dag)
                .map_err(|e| e.to_string())
                .and_then(|st| lower_with(&st, &self.lower_opts).map_err(|e| e.to_string()))
            else {
                continue;
            };
            self.seen.insert(h);
            if self.programs.insert(program_hash(&l, &self.target)) {
                out.push(s);
            }
        }
        out
    }

    pub fn task(&self) -> &Arc<Task> {
        &self.task
    }

    pub fn sketches(&self) -> &[Sketch] {
        &self.sketches
    }

    /// The best valid, quiet measurement so far: the schedule and its mean cost in seconds.
    pub fn best(&self) -> Option<(&Schedule, f64)> {
        self.best.as_ref().map(|(s, c)| (s, *c))
    }

    /// Measurements recorded (including re-added ones).
    pub fn trials(&self) -> usize {
        self.trials
    }

    fn threads(&self) -> usize {
        if self.params.threads > 0 {
            self.params.threads
        } else {
            crate::par::cores()
        }
    }

    /// Builds candidates in parallel: job `i` is (sketch, decisions to replay); the RNG of job
    /// `i` is seeded from `seed` and `i`. Every job is annotated; a program is lowered only by
    /// the first job to claim it this round, the others share its copy (the lowered program
    /// does not depend on who lowers it, so neither does the result). Rejections are counted
    /// and dropped.
    fn build_all(
        &mut self,
        jobs: Vec<(usize, Vec<Decision>)>,
        seed: u64,
        lowered: &mut Lowered,
    ) -> Vec<Candidate> {
        let threads = self.threads();
        let this = &*self;
        let known = &*lowered;
        let claimed = std::sync::Mutex::new(HashSet::new());
        let built = par_map(jobs.len(), threads, |i| {
            let mut rng =
                ChaCha8Rng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut d = Decider::replay(&mut rng, &jobs[i].1);
            let (schedule, state) =
                annotate(&this.task.dag, &this.sketches[jobs[i].0], &this.ctx, &mut d)?;
            let hash = schedule_hash(&schedule);
            let new = !known.ok.contains_key(&hash)
                && !known.failed.contains_key(&hash)
                && claimed.lock().expect("not poisoned").insert(hash);
            // The state is dropped here, on the thread that built it.
            let lowering =
                new.then(|| lower_with(&state, &this.lower_opts).map_err(|e| e.to_string()));
            Ok::<_, String>((jobs[i].0, d.made, schedule, hash, lowering))
        });
        let mut fresh = 0;
        let mut annotated = Vec::with_capacity(built.len());
        for b in built {
            annotated.push(b.map(|(sketch, decisions, schedule, hash, lowering)| {
                if let Some(l) = lowering {
                    fresh += 1;
                    match l {
                        Ok(l) => {
                            lowered.ok.insert(hash, Arc::new(l));
                        }
                        Err(e) => {
                            lowered.failed.insert(hash, e);
                        }
                    }
                }
                (sketch, decisions, schedule, hash)
            }));
        }
        self.stats.generated += annotated.len() as u64;
        self.stats.lowered += fresh;
        let mut cands = vec![];
        for a in annotated {
            let lowering =
                a.and_then(
                    |(sketch, decisions, schedule, hash)| match lowered.ok.get(&hash) {
                        Some(l) => Ok(Candidate {
                            sketch,
                            decisions,
                            schedule,
                            hash,
                            lowered: Arc::clone(l),
                        }),
                        None => Err(lowered.failed[&hash].clone()),
                    },
                );
            match lowering {
                Ok(c) => cands.push(c),
                Err(e) => {
                    self.stats.rejected += 1;
                    tracing::debug!(reason = %e, "candidate rejected");
                    self.stats.last_rejection = Some(e);
                }
            }
        }
        cands
    }

    /// `n` fresh random candidates over the sketches.
    fn sample(&mut self, n: usize, lowered: &mut Lowered) -> Vec<Candidate> {
        let k = self.sketches.len();
        let jobs = (0..n).map(|_| (self.rng.gen_range(0..k), vec![])).collect();
        let seed = self.rng.r#gen();
        self.build_all(jobs, seed, lowered)
    }

    /// Scores `cands` with the model, each distinct program once (cached by hash).
    fn score(
        &mut self,
        model: &mut dyn CostModel,
        cands: &[Candidate],
        cache: &mut HashMap<u64, f32>,
    ) -> Result<Vec<f32>, CostModelError> {
        let mut todo: Vec<usize> = vec![];
        let mut queued = HashSet::new();
        for (i, c) in cands.iter().enumerate() {
            if !cache.contains_key(&c.hash) && queued.insert(c.hash) {
                todo.push(i);
            }
        }
        if !todo.is_empty() {
            let progs: Vec<&LoweredFunc> = todo.iter().map(|&i| &*cands[i].lowered).collect();
            let t = Instant::now();
            let scores = model.predict(&self.task, &progs)?;
            self.stats.model_s += t.elapsed().as_secs_f64();
            self.stats.scored += todo.len() as u64;
            for (&i, s) in todo.iter().zip(scores) {
                cache.insert(cands[i].hash, if s.is_finite() { s } else { f32::MIN });
            }
        }
        Ok(cands.iter().map(|c| cache[&c.hash]).collect())
    }

    /// Proposes up to `n` candidates never proposed before: seeds first, then the best
    /// predicted. Fewer (or none) when the space is exhausted.
    pub fn next_batch(
        &mut self,
        model: &mut dyn CostModel,
        n: usize,
    ) -> Result<Vec<Schedule>, CostModelError> {
        let mut batch = self.take_seeds(n);
        if batch.len() < n {
            batch.extend(self.next_searched(model, n - batch.len())?);
        }
        Ok(batch)
    }

    /// Up to `n` candidates of the evolutionary search, best predicted first.
    fn next_searched(
        &mut self,
        model: &mut dyn CostModel,
        n: usize,
    ) -> Result<Vec<Schedule>, CostModelError> {
        let t0 = Instant::now();
        if !self.backlog.is_empty() {
            let backlog = std::mem::take(&mut self.backlog);
            let progs: Vec<&LoweredFunc> = backlog.iter().map(|(l, _)| l).collect();
            let results: Vec<MeasureResult> = backlog.iter().map(|(_, r)| r.clone()).collect();
            let t = Instant::now();
            model.update(&self.task, &progs, &results)?;
            self.stats.model_s += t.elapsed().as_secs_f64();
        }
        let pop = self.params.population.max(n);
        // Initial population: the best measured candidates, then fresh samples.
        let n_elite = (pop as f64 * self.params.measured_ratio) as usize;
        self.explain(n_elite);
        self.elites.sort_by(|a, b| a.cost.total_cmp(&b.cost));
        let n_elite = n_elite.min(self.elites.len());
        let jobs: Vec<(usize, Vec<Decision>)> = self.elites[..n_elite]
            .iter()
            .map(|e| (e.sketch, e.decisions.clone()))
            .collect();
        let seed = self.rng.r#gen();
        let mut lowered = Lowered::default();
        let mut population = self.build_all(jobs, seed, &mut lowered);
        let fresh = self.sample(pop - population.len(), &mut lowered);
        let fresh_hashes: Vec<u64> = fresh.iter().map(|c| c.hash).collect();
        population.extend(fresh);

        let mut cache: HashMap<u64, f32> = HashMap::new();
        // The best-scored unmeasured candidate per program, over all generations.
        let mut pool: HashMap<u64, (f32, Candidate)> = HashMap::new();
        for generation in 0..=self.params.generations {
            if population.is_empty() {
                break;
            }
            let scores = self.score(model, &population, &mut cache)?;
            if generation == self.params.generations {
                for (c, s) in population.into_iter().zip(scores) {
                    if !self.seen.contains(&c.hash) {
                        pool.entry(c.hash).or_insert((s, c));
                    }
                }
                break;
            }
            // Roulette selection on scores shifted to be positive, then mutation.
            let min = scores.iter().copied().fold(f32::INFINITY, f32::min);
            let weights: Vec<f64> = scores.iter().map(|&s| f64::from(s - min) + 1e-6).collect();
            let dist = rand::distributions::WeightedIndex::new(&weights).expect("positive weights");
            let mut jobs = Vec::with_capacity(pop);
            let mut copies = vec![];
            for _ in 0..pop {
                let parent = &population[self.rng.sample(&dist)];
                if self.rng.gen_bool(self.params.mutation_prob)
                    && let Some(d) = mutate(&parent.decisions, &self.params.weights, &mut self.rng)
                {
                    jobs.push((parent.sketch, d));
                    continue;
                }
                copies.push(parent.clone());
            }
            let seed = self.rng.r#gen();
            let mut next = self.build_all(jobs, seed, &mut lowered);
            // An unchanged copy is the same program: cloned, not annotated and lowered again.
            next.extend(copies);
            for (c, s) in population.into_iter().zip(scores) {
                if !self.seen.contains(&c.hash) {
                    pool.entry(c.hash).or_insert((s, c));
                }
            }
            population = next;
        }

        // The batch: best predicted, then an eps-greedy share of fresh random candidates. A
        // candidate whose kernel was already proposed or measured is passed over (and its
        // schedule marked seen, so that later rounds skip it without generating its C).
        let eps = if self.trials == 0 {
            self.params.first_batch_random.max(self.params.eps_greedy)
        } else {
            self.params.eps_greedy
        };
        let n_random = share_of(n, eps, &mut self.rng);
        let mut ranked: Vec<(f32, u64)> = pool.iter().map(|(&h, (s, _))| (*s, h)).collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut chosen: Vec<u64> = vec![];
        let mut taken = HashSet::new();
        let (seen, programs, target) = (&mut self.seen, &mut self.programs, &self.target);
        let mut take = |h: u64, chosen: &mut Vec<u64>| {
            if !taken.insert(h) {
                return;
            }
            if programs.insert(program_hash(&pool[&h].1.lowered, target)) {
                chosen.push(h);
            } else {
                seen.insert(h);
            }
        };
        for &(_, h) in &ranked {
            if chosen.len() >= n.saturating_sub(n_random) {
                break;
            }
            take(h, &mut chosen);
        }
        let mut randoms: Vec<u64> = fresh_hashes
            .into_iter()
            .filter(|h| pool.contains_key(h))
            .collect();
        randoms.sort_unstable();
        randoms.dedup();
        randoms.shuffle(&mut self.rng);
        for h in randoms {
            if chosen.len() >= n {
                break;
            }
            take(h, &mut chosen);
        }
        for &(_, h) in &ranked {
            if chosen.len() >= n {
                break;
            }
            take(h, &mut chosen);
        }
        let mut batch = vec![];
        for h in chosen {
            let (_, c) = pool.remove(&h).expect("chosen from the pool");
            self.seen.insert(h);
            batch.push(c.schedule.clone());
            self.pending.insert(h, c);
        }
        // Thousands of lowered programs die here. Freed on one thread, they took a fifth of a
        // conv2d round (perf): free them on all.
        drop(pool);
        par_drop(lowered.ok.into_values().collect(), self.threads());
        let dt = t0.elapsed().as_secs_f64();
        self.stats.rounds += 1;
        self.stats.last_round_s = dt;
        self.stats.total_s += dt;
        Ok(batch)
    }

    /// Takes the results of proposed schedules: updates the best, the elites and the model.
    pub fn record(
        &mut self,
        model: &mut dyn CostModel,
        schedules: &[Schedule],
        results: &[MeasureResult],
    ) -> Result<(), CostModelError> {
        if schedules.len() != results.len() {
            return Err(CostModelError::Invalid(format!(
                "{} schedules but {} results",
                schedules.len(),
                results.len()
            )));
        }
        let mut progs = vec![];
        let mut kept = vec![];
        for (s, r) in schedules.iter().zip(results) {
            let h = schedule_hash(s);
            self.seen.insert(h);
            self.trials += 1;
            self.note_best(s, r);
            let lowered = match self.pending.remove(&h) {
                Some(c) => {
                    if r.is_ok() && !r.noisy {
                        self.elites.push(Elite {
                            cost: r.mean_cost(),
                            sketch: c.sketch,
                            decisions: c.decisions,
                        });
                    }
                    Some(c.lowered)
                }
                None => {
                    let l = s
                        .replay(&self.task.dag)
                        .ok()
                        .and_then(|st| lower_with(&st, &self.lower_opts).ok())
                        .map(Arc::new);
                    if let Some(l) = &l {
                        self.programs.insert(program_hash(l, &self.target));
                        self.unexplain(s, r);
                    }
                    l
                }
            };
            if let Some(l) = lowered {
                progs.push(l);
                kept.push(r.clone());
            }
        }
        if progs.is_empty() {
            return Ok(());
        }
        let refs: Vec<&LoweredFunc> = progs.iter().map(|l| &**l).collect();
        let t = Instant::now();
        let updated = model.update(&self.task, &refs, &kept);
        self.stats.model_s += t.elapsed().as_secs_f64();
        updated
    }

    /// Re-adds a measurement made earlier (a resumed job): it is never proposed again, counts
    /// for the best, and reaches the model at the next round. Its decisions are unknown: it
    /// seeds populations once they are recovered.
    pub fn add_measured(&mut self, schedule: &Schedule, result: &MeasureResult) {
        let h = schedule_hash(schedule);
        if !self.seen.insert(h) && !self.pending.contains_key(&h) {
            return;
        }
        self.pending.remove(&h);
        self.trials += 1;
        self.note_best(schedule, result);
        if let Ok(l) = schedule
            .replay(&self.task.dag)
            .map_err(|e| e.to_string())
            .and_then(|st| lower_with(&st, &self.lower_opts).map_err(|e| e.to_string()))
        {
            self.programs.insert(program_hash(&l, &self.target));
            self.backlog.push((l, result.clone()));
            self.unexplain(schedule, result);
        }
    }

    /// Keeps a measured schedule of unknown decisions for [`TaskSearch::explain`].
    fn unexplain(&mut self, s: &Schedule, r: &MeasureResult) {
        if r.is_ok() && !r.noisy {
            self.unexplained.push((r.mean_cost(), s.clone()));
        }
    }

    /// Recovers the decisions of the measured schedules of unknown decisions that would rank
    /// among the `n` best elites, on all cores, so that they seed the population as the
    /// search's own candidates do. Each is tried once; those that cannot rank are dropped (the
    /// n-th best cost only falls), those beyond [`EXPLAINED_PER_ROUND`] wait for the next round.
    fn explain(&mut self, n: usize) {
        if self.unexplained.is_empty() || n == 0 {
            return;
        }
        self.elites.sort_by(|a, b| a.cost.total_cmp(&b.cost));
        let bar = self.elites.get(n - 1).map_or(f64::INFINITY, |e| e.cost);
        let mut todo = std::mem::take(&mut self.unexplained);
        todo.retain(|(cost, _)| *cost < bar);
        todo.sort_by(|a, b| a.0.total_cmp(&b.0));
        if todo.len() > EXPLAINED_PER_ROUND.min(n) {
            self.unexplained = todo.split_off(EXPLAINED_PER_ROUND.min(n));
        }
        let (dag, sketches, ctx) = (&self.task.dag, &self.sketches, &self.ctx);
        let found = par_map(todo.len(), self.threads(), |i| {
            recover(dag, sketches, ctx, &todo[i].1)
        });
        let recovered = found.iter().filter(|f| f.is_some()).count();
        tracing::info!(
            tried = found.len(),
            recovered,
            "decisions of measured schedules recovered (seeds, resumed records)"
        );
        for ((cost, _), f) in todo.into_iter().zip(found) {
            match f {
                Some((sketch, decisions)) => {
                    self.stats.recovered += 1;
                    self.elites.push(Elite {
                        cost,
                        sketch,
                        decisions,
                    });
                }
                None => self.stats.unrecovered += 1,
            }
        }
    }

    fn note_best(&mut self, s: &Schedule, r: &MeasureResult) {
        if !r.is_ok() || r.noisy {
            return;
        }
        let cost = r.mean_cost();
        if self.best.as_ref().is_none_or(|(_, c)| cost < *c) {
            self.best = Some((s.clone(), cost));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::share_of;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn a_share_is_whole_where_it_can_be_and_right_on_average_where_not() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        assert_eq!(share_of(64, 0.5, &mut rng), 32);
        assert_eq!(share_of(8, 0.0, &mut rng), 0);
        assert_eq!(share_of(8, 1.0, &mut rng), 8);
        // 8 x 5% = 0.4: none or one, one in about 40% of the batches.
        let draws: Vec<usize> = (0..10_000).map(|_| share_of(8, 0.05, &mut rng)).collect();
        assert!(draws.iter().all(|&d| d <= 1));
        let mean = draws.iter().sum::<usize>() as f64 / draws.len() as f64;
        assert!((0.37..0.43).contains(&mean), "{mean}");
    }
}
