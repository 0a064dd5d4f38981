//! Tuning curves as pictures (`tunehub report`): from every candidate a job measured
//! (`Jobs.Trials`), per task its best GFLOP/s so far against trials and against the seconds
//! since the job was submitted, and for a job of several tasks (a model) its end-to-end
//! estimate (the tasks' weights times their best times) against the job's trials, with a
//! peer's latency as a line and the built model's measured latency as a mark when given.
//! Drawn with plotters as one SVG; HTML wraps it with a
//! table of the tasks.

use anyhow::{Result, anyhow};
use plotters::prelude::*;
use std::fmt::Write;
use tunehub_proto::v1 as pb;

/// One task's curves.
pub struct TaskCurve {
    pub label: String,
    /// (trials of the task, best GFLOP/s so far), from the first success on.
    pub by_trial: Vec<(u32, f64)>,
    /// (seconds since the job was submitted, best GFLOP/s so far) when each round was stored
    /// (a round's candidates are stored together): one point per round.
    pub by_time: Vec<(f64, f64)>,
}

/// What a report draws.
pub struct Curves {
    pub job: pb::Job,
    pub tasks: Vec<TaskCurve>,
    /// (trials of the job, end-to-end estimate in ms), once every task has a best.
    pub estimate: Vec<(u32, f64)>,
    /// Every trial of the job, its tasks' together.
    pub trials: u32,
    pub peer_ms: Option<f64>,
    /// The built model's measured latency in ms (`--built`), drawn at the job's trials.
    pub built_ms: Option<f64>,
}

/// A task's name in a legend: its index and the first line of its description, cut short.
fn label(t: &pb::TaskProgress) -> String {
    let d = t.description.lines().next().unwrap_or("");
    let d: String = d.chars().take(48).collect();
    format!("task {}: {d}", t.index)
}

/// The curves of a job's trials. Noisy and failed candidates count as trials, never as bests.
pub fn curves(
    r: &pb::JobTrialsResponse,
    peer_ms: Option<f64>,
    built_ms: Option<f64>,
) -> Result<Curves> {
    let job = r
        .job
        .clone()
        .ok_or_else(|| anyhow!("the answer has no job"))?;
    let t0 = job.created_at_ms;
    let mut tasks = vec![];
    // Every trial of the job in the order stored: (at, task, seconds if a clean success).
    let mut all: Vec<(i64, usize, Option<f64>)> = vec![];
    for (i, t) in job.tasks.iter().enumerate() {
        let trials = r
            .tasks
            .iter()
            .find(|x| x.task_index as usize == i)
            .map_or(&[][..], |x| &x.trials[..]);
        let mut best = f64::INFINITY;
        let mut c = TaskCurve {
            label: label(t),
            by_trial: vec![],
            by_time: vec![],
        };
        for (k, tr) in trials.iter().enumerate() {
            let clean = tr.seconds.filter(|s| !tr.noisy && *s > 0.0);
            all.push((tr.at_ms, i, clean));
            if let Some(s) = clean {
                best = best.min(s);
            }
            if best.is_finite() {
                let g = t.flops as f64 / best / 1e9;
                c.by_trial.push((k as u32 + 1, g));
                let at = (tr.at_ms - t0).max(0) as f64 / 1e3;
                // One point per round: the best once the whole round was stored.
                match c.by_time.last_mut() {
                    Some(last) if last.0 == at => last.1 = g,
                    _ => c.by_time.push((at, g)),
                }
            }
        }
        tasks.push(c);
    }
    all.sort_by_key(|&(at, task, _)| (at, task));
    let mut best = vec![f64::INFINITY; job.tasks.len()];
    let mut estimate = vec![];
    for (n, (_, task, s)) in all.iter().enumerate() {
        if let Some(s) = s {
            best[*task] = best[*task].min(*s);
        }
        if best.iter().all(|b| b.is_finite()) {
            let e: f64 = job.tasks.iter().zip(&best).map(|(t, b)| t.weight * b).sum();
            estimate.push((n as u32 + 1, e * 1e3));
        }
    }
    Ok(Curves {
        job,
        tasks,
        estimate,
        trials: all.len() as u32,
        peer_ms,
        built_ms,
    })
}

/// Largest y of `points` with some headroom (1 when there is none).
fn top(points: impl Iterator<Item = f64>) -> f64 {
    let m = points.fold(0.0_f64, f64::max);
    if m > 0.0 { m * 1.1 } else { 1.0 }
}

fn plot_err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("drawing the curves: {e}")
}

/// A chart's frame on `area`: its caption, margins and room for the axes' labels.
fn builder<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    caption: &str,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(area);
    b.caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60);
    b
}

/// The curves as one SVG document.
pub fn svg(c: &Curves) -> Result<String> {
    // The end-to-end chart: for a model's job, or whenever a latency is to be drawn beside it.
    let charts = if c.tasks.len() > 1 || c.peer_ms.is_some() || c.built_ms.is_some() {
        3
    } else {
        2
    };
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (960, 320 * charts)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let areas = root.split_evenly((charts as usize, 1));
        let gflops = top(c.tasks.iter().flat_map(|t| t.by_trial.iter().map(|p| p.1)));
        let trials = c
            .tasks
            .iter()
            .map(|t| t.by_trial.len() as u32)
            .max()
            .unwrap_or(0);
        let trials = c
            .tasks
            .iter()
            .flat_map(|t| t.by_trial.last().map(|p| p.0))
            .max()
            .unwrap_or(trials)
            .max(1);
        let seconds = c
            .tasks
            .iter()
            .flat_map(|t| t.by_time.iter().map(|p| p.0))
            .fold(0.0_f64, f64::max)
            .max(1.0);

        let mut chart = builder(
            &areas[0],
            &format!("job {}: best GFLOP/s so far, by trials", c.job.id),
        )
        .build_cartesian_2d(0u32..trials, 0.0..gflops)
        .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("trials of the task")
            .y_desc("GFLOP/s")
            .draw()
            .map_err(plot_err)?;
        for (i, t) in c.tasks.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(t.by_trial.iter().copied(), color))
                .map_err(plot_err)?
                .label(t.label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(plot_err)?;

        let mut chart = builder(&areas[1], "best GFLOP/s so far, by wall time")
            .build_cartesian_2d(0.0..seconds, 0.0..gflops)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("seconds since the job was submitted")
            .y_desc("GFLOP/s")
            .draw()
            .map_err(plot_err)?;
        for (i, t) in c.tasks.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            // A step per round: the best holds until the next round is stored.
            let mut steps = vec![];
            for (k, &(at, g)) in t.by_time.iter().enumerate() {
                if k > 0 {
                    steps.push((at, t.by_time[k - 1].1));
                }
                steps.push((at, g));
            }
            chart
                .draw_series(LineSeries::new(steps, color))
                .map_err(plot_err)?;
            chart
                .draw_series(t.by_time.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(plot_err)?;
        }

        if charts == 3 {
            let job_trials = c.trials.max(1);
            let ms = top(c
                .estimate
                .iter()
                .map(|p| p.1)
                .chain(c.peer_ms)
                .chain(c.built_ms));
            let mut chart = builder(
                &areas[2],
                "end-to-end estimate (weights x best times), by trials",
            )
            // Room past the last trial for the built model's mark.
            .build_cartesian_2d(0u32..job_trials + job_trials / 25 + 1, 0.0..ms)
            .map_err(plot_err)?;
            chart
                .configure_mesh()
                .x_desc("trials of the job")
                .y_desc("ms")
                .draw()
                .map_err(plot_err)?;
            chart
                .draw_series(LineSeries::new(c.estimate.iter().copied(), BLUE))
                .map_err(plot_err)?
                .label("estimate")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLUE));
            if let Some(p) = c.peer_ms {
                chart
                    .draw_series(LineSeries::new([(0, p), (job_trials, p)], RED))
                    .map_err(plot_err)?
                    .label(format!("peer {p} ms"))
                    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RED));
            }
            if let Some(b) = c.built_ms {
                let green = GREEN.mix(0.9).stroke_width(2);
                chart
                    .draw_series([Cross::new((job_trials, b), 7, green)])
                    .map_err(plot_err)?
                    .label(format!("built, measured {b:.3} ms"))
                    .legend(move |(x, y)| Cross::new((x + 9, y), 5, green));
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(plot_err)?;
        }
        root.present().map_err(plot_err)?;
    }
    Ok(out)
}

/// Text for HTML.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An HTML page: the job, a table of its tasks, the curves inline (no external resource).
pub fn html(c: &Curves, svg: &str) -> String {
    let j = &c.job;
    let mut h = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>tunehub job {id}</title>\
         <style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:2px 10px;text-align:left}}\
         </style></head><body>\n<h1>tunehub job {id}</h1>\n<p>{name}</p>\n<table>\n\
         <tr><th>task</th><th>workload</th><th>weight</th><th>trials</th><th>ok</th>\
         <th>noisy</th><th>errors</th><th>best GFLOP/s</th></tr>\n",
        id = escape(&j.id),
        name = escape(&j.name),
    );
    for t in &j.tasks {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td></tr>",
            t.index,
            escape(t.description.lines().next().unwrap_or("")),
            t.weight,
            t.trials_done,
            t.trials,
            t.ok,
            t.noisy,
            t.errors,
            t.best_gflops.map_or("-".into(), |g| format!("{g:.1}")),
        );
    }
    h += "</table>\n";
    h += svg;
    h += "\n</body></html>\n";
    h
}
