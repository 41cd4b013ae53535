//! Experiments: `sweetspot sweep` runs a grid of servers and loads and names the sweet spot;
//! `sweetspot report` renders a finished sweep again. In the order a sweep uses them: [`spec`]
//! (the experiment, TOML; the presets are files in `experiments/`); [`runner`] (every point
//! through the lab's door, [`crate::lab::Lab::measure`]: a server started, warmed up, loaded by
//! the in-process engine while its process tree is sampled, stopped); [`analysis`] (statistics, the USL fit, the best
//! architecture and the words that explain it); [`results`] (`results.json`); [`output`] (JSON,
//! Markdown, SVG and HTML, and the terminal summary). Runner -> analysis -> output, never back.

pub mod analysis;
pub mod output;
pub mod results;
pub mod runner;
pub mod spec;

use std::path::PathBuf;

use crate::usage;
use analysis::finalize;
use output::json::RESULTS_FILE;
use results::SweepResults;
use runner::{run_experiment, RunnerOptions};
use spec::{Experiment, PRESETS};

/// Flags of `sweetspot sweep`.
#[derive(Debug, clap::Args)]
#[command(after_help = sweep_help())]
pub struct SweepArgs {
    /// A preset (see below and --list) or a TOML experiment file.
    #[arg(default_value = "quick")]
    pub experiment: String,
    /// Output directory [default: results/<preset>-<timestamp>].
    #[arg(short, long)]
    pub out: Option<PathBuf>,
    /// Guestbook store for our servers: sqlite:PATH or redis://HOST:PORT (overrides the file).
    #[arg(long)]
    pub store: Option<String>,
    /// Pin the server to CPU 0 and the load generator to CPU 1.
    #[arg(long)]
    pub pin: bool,
    /// Repetitions per point (overrides the file); more give a median and a spread.
    #[arg(long)]
    pub repetitions: Option<u32>,
    /// List the presets and the architectures, and exit.
    #[arg(long)]
    pub list: bool,
    /// No progress bar, one line per point.
    #[arg(long)]
    pub plain: bool,
    /// A network path between the load generator and every server, as root (overrides the
    /// file's `net`; `none`: loopback, whatever the file says):
    /// rtt=50ms[,jitter=5ms][,rate=10mbit][,bottleneck=100mbit][,queue=N][,loss=0.5%]
    /// (see `load --net`).
    #[arg(long, value_name = "PATH")]
    pub net: Option<String>,
    /// The server's CPU budget (overrides the file's `cpus` and `cpuset`).
    #[command(flatten)]
    pub budget: crate::lab::budget::BudgetFlags,
}

/// The text after `sweep --help`'s options: the presets and the architectures, from the
/// preset list and [`spec::Arch`].
fn sweep_help() -> String {
    let presets: Vec<&str> = PRESETS.iter().map(|(name, _)| *name).collect();
    format!(
        "Presets: {} (`--list` describes them).\n\n\
Architectures (`archs = [...]` in an experiment file, or `archs = \"all\"`):\n{}",
        presets.join(", "),
        spec::Arch::table()
    )
}

/// Flags of `sweetspot report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// A directory written by `sweetspot sweep`.
    pub dir: PathBuf,
}

/// Runs `sweetspot sweep`.
pub fn run_sweep(args: SweepArgs) -> anyhow::Result<()> {
    if args.list {
        crate::print_stdout(&preset_listing()?)?;
        return Ok(());
    }
    let experiment = experiment_of(&args)?;
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| crate::lab::results::default_out_dir(&experiment.name));
    let most = experiment.max_connections();
    crate::os::check_file_limit(u64::from(most), &format!("concurrency = {most}"))?;
    let versions =
        crate::lab::peers::ensure(&experiment.requires, crate::lab::peers::may_install())?;
    let mut lab = crate::lab::Lab::open("sweep")?;
    let options = RunnerOptions {
        out_dir: out_dir.clone(),
        source: args.experiment.clone(),
        progress_bar: !args.plain,
        versions,
    };
    let run = run_experiment(&experiment, &mut lab, &options)?;
    crate::print_stdout(&format!(
        "{}\nWrote {} files to {}\n",
        output::terminal::summary(&run.results),
        run.files.len(),
        out_dir.display()
    ))?;
    if lab.stopped() {
        anyhow::bail!(
            "interrupted: {} of {} points finished and saved in {}",
            run.results.points.len(),
            run.results.points_planned,
            out_dir.join(RESULTS_FILE).display()
        );
    }
    fail_if_every_point_failed(&run.results.points, &out_dir)
}

/// `sweep --list`: every preset with its point count and description, then the architectures.
fn preset_listing() -> anyhow::Result<String> {
    let mut listing = String::new();
    for (name, text) in PRESETS {
        let e = Experiment::from_toml(text, name)?;
        listing.push_str(&format!(
            "{name:<10} {:>4} points  {}\n",
            e.points().len(),
            e.description
        ));
    }
    listing.push_str(&format!("\nArchitectures:\n{}", spec::Arch::table()));
    Ok(listing)
}

/// The experiment named on the command line, with the flags that override its keys.
fn experiment_of(args: &SweepArgs) -> anyhow::Result<Experiment> {
    let mut experiment = Experiment::load(&args.experiment)?;
    if let Some(store) = &args.store {
        spec::check_store(store).map_err(|e| usage(format!("--store {store:?}: {e}")))?;
        experiment.store = Some(store.clone());
    }
    if args.pin {
        experiment.pin = true;
    }
    if let Some(repetitions) = args.repetitions {
        if !(1..=spec::MAX_REPETITIONS).contains(&repetitions) {
            return Err(usage(format!(
                "--repetitions {repetitions}: must be in [1, {}]",
                spec::MAX_REPETITIONS
            )));
        }
        experiment.repetitions = repetitions;
    }
    experiment.net = crate::net::net_option(args.net.as_deref(), experiment.net.take())?;
    args.budget
        .apply(&mut experiment.cpus, &mut experiment.cpuset)?;
    Ok(experiment)
}

/// A sweep whose every point failed is a failed command, with the first point's reason.
fn fail_if_every_point_failed(
    points: &[results::PointResult],
    out_dir: &std::path::Path,
) -> anyhow::Result<()> {
    // A point whose requests failed (every response a 404, say) counts as failed too.
    if points.is_empty() || points.iter().any(|p| p.ok && p.failure_cause().is_none()) {
        return Ok(());
    }
    let first = match (&points[0].failure, points[0].failure_cause()) {
        (Some(failure), _) => failure.clone(),
        (None, Some(cause)) => format!("requests failed: {cause}"),
        (None, None) => "no reason recorded".to_string(),
    };
    let first: Vec<&str> = first
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    anyhow::bail!(
        "every point failed ({}; results in {}); the first: {}",
        points.len(),
        out_dir.display(),
        first.join(" | ")
    )
}

/// Runs `sweetspot report DIR`: reads `DIR/results.json`, analyses again and rewrites every
/// output.
pub fn run_report(args: ReportArgs) -> anyhow::Result<()> {
    let path = args.dir.join(RESULTS_FILE);
    if !path.is_file() {
        return Err(usage(format!(
            "{} not found (give a directory written by `sweetspot sweep`)",
            path.display()
        )));
    }
    let mut results = SweepResults::read(&path).map_err(|e| usage(format!("{e:#}")))?;
    finalize(&mut results);
    let files = output::write_all(&results, &args.dir)?;
    crate::print_stdout(&format!(
        "{}\nWrote {} files to {}\n",
        output::terminal::summary(&results),
        files.len(),
        args.dir.display()
    ))?;
    Ok(())
}
