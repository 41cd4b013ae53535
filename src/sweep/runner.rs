//! The runner: every point of an experiment, one after another, each measured through the
//! lab's door ([`crate::lab::Lab::measure`]) on a fresh server. A point that cannot be measured is recorded as
//! failed with its reason and the sweep goes on. `results.json` is rewritten after every
//! point, so an interrupted or killed sweep keeps what it finished. The stop flag (set by
//! SIGINT/SIGTERM) ends the current load run early; that unfinished point is dropped, its
//! server stopped, and the sweep returns.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::analysis::finalize;
use super::output::{self, json::JsonExporter, Exporter};
use super::results::{utc_timestamp, Machine, PointResult, SweepResults};
use super::spec::{Experiment, PointSpec};
use crate::lab::cgroup::{self, CpuMethod, ServerCgroup};
use crate::lab::server::taskset_available;
use crate::lab::{Lab, Pinning};
use crate::load::LatencyKey;

/// How to run an experiment, beyond the experiment itself.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    pub out_dir: PathBuf,
    /// Where the experiment came from (preset name or file), for the record.
    pub source: String,
    /// Show a progress bar (else one plain line per point).
    pub progress_bar: bool,
    /// The versions of what the experiment requires, as [`crate::lab::peers::ensure`] found them.
    pub versions: std::collections::BTreeMap<String, String>,
}

/// The outcome of running every point.
pub struct SweepRun {
    pub results: SweepResults,
    pub files: Vec<PathBuf>,
}

/// Runs an experiment and writes every output; results are on disk even when interrupted.
pub fn run_experiment(
    experiment: &Experiment,
    lab: &mut Lab,
    options: &RunnerOptions,
) -> anyhow::Result<SweepRun> {
    let plan = experiment.points();
    // A method forced by the environment is checked once, before any point runs.
    let forced = cgroup::forced_method()?;
    if let Some(method) = forced.filter(|m| *m != CpuMethod::ProcChildren) {
        if ServerCgroup::create(Some(method)).is_none() {
            anyhow::bail!(
                "{}={}: no such cgroup can be made here (not root, or no writable {} hierarchy)",
                cgroup::METHOD_ENV,
                method.name(),
                method.name()
            );
        }
    }
    lab.write_peers_for(experiment.external.iter().map(|e| e.command.as_str()))?;
    run_plan(experiment, lab, options, &plan)
}

fn run_plan(
    experiment: &Experiment,
    lab: &mut Lab,
    options: &RunnerOptions,
    plan: &[PointSpec],
) -> anyhow::Result<SweepRun> {
    let setup = experiment.setup();
    let pinning = decide_pinning(experiment, &mut lab.machine);
    let mut results = SweepResults {
        version: 1,
        source: options.source.clone(),
        experiment: experiment.clone(),
        started: utc_timestamp(),
        finished: String::new(),
        interrupted: false,
        points_planned: plan.len(),
        machine: lab.machine.clone(),
        versions: options.versions.clone(),
        points: Vec::new(),
        recommendation: Default::default(),
        analysis: Default::default(),
    };
    std::fs::create_dir_all(&options.out_dir)
        .with_context(|| format!("creating {}", options.out_dir.display()))?;
    let progress = Progress::new(
        plan.len(),
        experiment.estimated_seconds(plan),
        options.progress_bar,
    );
    for (index, point) in plan.iter().enumerate() {
        if lab.stopped() {
            break;
        }
        progress.starting(index, point);
        let plan = point.plan(&setup);
        let Some(result) = lab.measure(&plan, pinning) else {
            break; // interrupted mid-point: the partial measurement is not a result
        };
        progress.finished(&result);
        results.points.push(result);
        finalize(&mut results);
        results.finished = utc_timestamp();
        JsonExporter
            .export(&results, &options.out_dir)
            .context("saving results so far")?;
    }
    progress.done();
    results.interrupted = results.points.len() < plan.len();
    finalize(&mut results);
    results.finished = utc_timestamp();
    let files = output::write_all(&results, &options.out_dir)?;
    Ok(SweepRun { results, files })
}

fn decide_pinning(experiment: &Experiment, machine: &mut Machine) -> Pinning {
    if !experiment.pin {
        return Pinning::None;
    }
    if machine.cores < 2 {
        machine
            .notes
            .push("pinning asked for, but there is only one CPU: not pinned".into());
        return Pinning::None;
    }
    machine.pinned = true;
    if taskset_available() {
        Pinning::Taskset
    } else {
        machine.notes.push(
            "taskset not found: the server's threads were pinned to CPU 0 after it started \
             (threads it made before that may have run elsewhere briefly)"
                .into(),
        );
        Pinning::Affinity
    }
}

/// A progress bar with ETA on a terminal, one line per point otherwise.
struct Progress {
    bar: Option<ProgressBar>,
    total: usize,
    /// A point's line is started and not yet ended (without a bar).
    open_line: std::cell::Cell<bool>,
}

impl Progress {
    fn new(total: usize, estimated_seconds: f64, want_bar: bool) -> Progress {
        let bar = (want_bar && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{bar:30.cyan/blue} {pos}/{len} points  {elapsed_precise} elapsed, ETA {eta}  {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_message(format!("~{estimated_seconds:.0} s total"));
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        if bar.is_none() {
            eprintln!("sweep: {total} points, about {:.0} s", estimated_seconds);
        }
        Progress {
            bar,
            total,
            open_line: std::cell::Cell::new(false),
        }
    }

    fn starting(&self, index: usize, point: &PointSpec) {
        let what = describe(point);
        match &self.bar {
            Some(bar) => bar.set_message(what),
            None => {
                eprint!("[{}/{}] {what}: ", index + 1, self.total);
                self.open_line.set(true);
            }
        }
    }

    fn finished(&self, p: &PointResult) {
        let line = if p.ok {
            format!(
                "{} req/s, p99 {}, {} errors{}",
                output::thousands(p.figures.rps),
                output::latency_figure(
                    p.figures.latency_us.p99,
                    p.figures.latency_us.lower_bound.contains(LatencyKey::P99)
                ),
                p.errors,
                match &p.limit {
                    Some(l) => format!(
                        ", limit {}{}",
                        if l.kind.is_lab() { "lab: " } else { "" },
                        l.kind.name()
                    ),
                    None => String::new(),
                }
            )
        } else {
            format!("failed: {}", p.failure.as_deref().unwrap_or("?"))
        };
        match &self.bar {
            Some(bar) => {
                bar.println(format!(
                    "  {} {} c={}: {line}",
                    p.workload,
                    super::analysis::series_label(&p.arch, p.workers),
                    p.concurrency
                ));
                bar.inc(1);
            }
            None => {
                eprintln!("{line}");
                self.open_line.set(false);
            }
        }
    }

    /// Clears the bar, or ends a point's line an interrupt left open (what prints next starts
    /// on a line of its own).
    fn done(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if self.open_line.get() {
            eprintln!("interrupted");
        }
    }
}

fn describe(point: &PointSpec) -> String {
    let workers = point.workers.map_or(String::new(), |w| format!("/{w}"));
    format!(
        "{} {}{} c={}",
        point.workload.name,
        point.target.name(),
        workers,
        point.concurrency
    )
}
