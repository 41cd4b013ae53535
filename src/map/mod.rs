//! The sweet-spot map and `advise`: which architecture and pool size win, over CPU-versus-wait
//! and concurrency, found by an adaptive search rather than a grid. In the order a run uses
//! them: [`spec`] (the cells), [`halving`] (successive halving, then the pool by the kernel's
//! knob search, ranked by cost), [`run`] (live measurements through the lab's door, progress),
//! [`points`] (each finished point logged at once, for `--resume`), [`results`] (what a run
//! holds), [`output`] (table, heat maps, report). [`advise`] is one cell, for one workload,
//! with the rules of thumb measured beside it.

pub mod advise;
pub mod forecast;
pub mod halving;
pub mod output;
pub mod points;
pub mod predictions;
pub mod results;
pub mod run;
pub mod spec;

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::lab::points::PointLog;
use crate::lab::Lab;
use crate::usage;
use spec::{MapSpec, PRESETS};

/// The spec of a run, saved in its directory before anything runs (for `--resume`).
const SPEC_FILE: &str = "map-spec.json";

/// Flags of `sweetspot map`.
#[derive(Debug, clap::Args)]
#[command(after_help = map_help())]
pub struct MapArgs {
    /// A preset (`map-quick`, `map`, `map-wide`, `map-net`) or a TOML map file.
    #[arg(default_value = "map-quick")]
    pub map: String,
    /// Output directory [default: results/<name>-<timestamp>].
    #[arg(short, long)]
    pub out: Option<PathBuf>,
    /// Continue the interrupted run in DIR: its finished points are kept, none measured twice.
    #[arg(long, value_name = "DIR", conflicts_with = "out")]
    pub resume: Option<PathBuf>,
    /// One progress line per cell instead of a live line.
    #[arg(long)]
    pub plain: bool,
    /// List the map presets (cells and grid points) and exit.
    #[arg(long)]
    pub list: bool,
    /// A network path between the load generator and every server, as root (overrides the
    /// file's `net`; `none`: loopback):
    /// rtt=50ms[,jitter=5ms][,rate=10mbit][,bottleneck=100mbit][,queue=N][,loss=0.5%]
    /// (see `load --net`). Every cycle, and each cell's bound, then holds the round trip.
    /// With a map's `rtt_ms` list, the path without its rtt (e.g. `rate=5mbit`).
    #[arg(long, value_name = "PATH", conflicts_with = "resume")]
    pub net: Option<String>,
    /// Measure every candidate the search reaches, without the model's predictions (by
    /// default a cell's candidates whose predicted interval lies more than a tie under what
    /// another measured are left out; see `predict` in a map file).
    #[arg(long, conflicts_with = "resume")]
    pub measure_all: bool,
    /// How many points the run may measure (overrides the file's `budget`): a share of the
    /// full grid (`2%`) or a number (`150`). Each cell gets what is left over the cells still
    /// to run, at least 2; the model predicts what is not measured. The servers it does not
    /// know yet are measured whatever the budget, and the summary says where it was passed.
    #[arg(long, value_name = "SHARE|POINTS", conflicts_with_all = ["resume", "measure_all"], value_parser = spec::PointBudget::parse)]
    pub budget: Option<spec::PointBudget>,
    /// After each of these cells' search (keys as `--list`'s maps name them, e.g.
    /// `async-u20-r10-c16`, comma-separated), measure every candidate in full, as the file's
    /// `verify` does for every cell, and say whether the pick is inside the best's spread.
    /// The search and its model are the run's own: verification's points are neither fitted
    /// nor counted in the budget.
    #[arg(
        long,
        value_name = "CELLS",
        value_delimiter = ',',
        conflicts_with = "resume"
    )]
    pub verify_cells: Vec<String>,
    /// The servers' CPU budget (overrides the file's `cpus` and `cpuset`): each cell's bound
    /// and default pools follow it.
    #[command(flatten)]
    pub cpu_budget: crate::lab::budget::BudgetFlags,
}

fn map_help() -> String {
    let presets: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
    format!(
        "Each cell is `/work?cpu_us=C&wait_ms=W&wait=async|blocking` at one concurrency N. A \
point is measured in a window that opens once every connection was answered once and holds \
several cycles of each (Little's law), its throughput counted in whole cycles. The verdict: the \
most throughput whose p99 meets the bound (a p99 that is only a lower bound never does; a short \
window that cut one off is measured again, longer, up to ten cycles); among candidates inside \
the best's throughput spread, the lower p99 (within 20%, or runs that overlap), then the lower \
server CPU per request \
(10%), then the smaller peak memory (25%); a tie only when nothing tells them apart. Found \
adaptively: architectures by successive halving, leanest shape first (stopped once the leader \
reaches the physical bound min(cores/C, N/(C+W)) within its spread, and at once when a server \
reaches it with a p99 at its floor and the CPU and memory of the leanest measured: the rest are \
left unmeasured; one whose own bound, min(P, cores)/C for P threads and with blocking waits \
P/(C+W), is below what another reached is left out), then the winner's pool by doubling and a \
golden-section search in log space down to pools 5% apart, close calls measured again; the \
smallest pool within 5% of the best is reported. Measured only to decide: from the second cell \
on, a model of each server fitted on the run's points (its CPU a request and the load \
generator's along N, how long its waits really take, the generator's share of the cores; \
solved by Mean Value Analysis) predicts every candidate with an interval, and one whose \
interval lies more than a tie (5%) under what another measured is left out, while the model \
held on every point of the cell; its pool is the model's where that held (--measure-all: no \
model). Every cell states its bound and the winner's share of it; a cell no server \
can meet (N x C / cores above the p99 bound) is said so unmeasured. Beside each pooled winner: \
Goetz's cores x (1 + W/C), 2n+1 and the default pool, measured. Every finished point is written \
to DIR/points at once; `--resume DIR` finishes an interrupted run.\n\nPresets: {} (files in \
experiments/).\n\nA map file (TOML): name, archs (\"all\" or a list), cpu_us (a number or a \
list), ratios (W/C), concurrency (up to 10000), waits ([\"async\", \"blocking\"]), dist and \
cv, p99_bound_ms, base (first run length), rounds, warmup, max_pool, verify (also measure every \
architecture at its chosen pool and its default for 3 s each, and say whether the pick is \
inside the best's spread by the same ranking), net (a network path, as `--net`; root) and \
rtt_ms (round trips in ms, as a list: each a map of its own across `net`'s path at that round \
trip, 0 with no other setting being loopback; the round trip at one connection is measured \
for each, and the summary says where the winner changes with it), cpus (a CPU quota in cores, \
as `--cpus`; root) and cpuset (as `--cpuset`; root): the bound, min(Q/C, N/(C+W)), and the \
default pools then follow the budget.",
        presets.join(", ")
    )
}

/// Runs `sweetspot map`.
pub fn run_map(args: MapArgs) -> anyhow::Result<()> {
    if args.list {
        return Ok(crate::print_stdout(&preset_listing()?)?);
    }
    let (spec, source, out, previous_wall_s) = match &args.resume {
        Some(dir) => resume_from(dir)?,
        None => {
            let spec = spec_of(&args)?;
            let out = args
                .out
                .clone()
                .unwrap_or_else(|| crate::lab::results::default_out_dir(&spec.name));
            if out.join(SPEC_FILE).exists() {
                return Err(usage(format!(
                    "{} holds a map run already: `sweetspot map --resume {}` continues it",
                    out.display(),
                    out.display()
                )));
            }
            (spec, args.map.clone(), out, 0.0)
        }
    };
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let spec_path = out.join(SPEC_FILE);
    std::fs::write(&spec_path, serde_json::to_string_pretty(&(&source, &spec))?)
        .with_context(|| format!("writing {}", spec_path.display()))?;
    let most = spec.concurrency.iter().copied().max().unwrap_or(1);
    crate::os::check_file_limit(u64::from(most), &format!("concurrency = {most}"))?;
    let lab = Lab::open("map")?;
    let mut log = PointLog::open(&out)?;
    let results = run::run_cells(
        &spec,
        &source,
        &out,
        &lab,
        &mut log,
        previous_wall_s,
        args.plain,
    )?;
    let files = output::write_all(&results, &out)?;
    crate::print_stdout(&format!(
        "{}\nWrote {} files ({}, {SPEC_FILE}) and points/ ({} points) to {}\n",
        output::table(&results),
        files.len() + 1,
        files
            .iter()
            .filter_map(|f| f.file_name().map(|n| n.to_string_lossy().to_string()))
            .collect::<Vec<_>>()
            .join(", "),
        log.len(),
        out.display()
    ))?;
    if let Some(cause) = log.every_point_failed() {
        anyhow::bail!("{cause}; results in {}", out.display());
    }
    if lab.stopped() || results.interrupted {
        anyhow::bail!(
            "interrupted: {} of {} cells finished, {} points saved; `sweetspot map --resume {}` continues",
            results.cells.len(),
            spec.cells().len(),
            log.len(),
            out.display()
        );
    }
    Ok(())
}

/// The map a new run measures: the file or preset with the flags over it. Bad input: exit 2.
fn spec_of(args: &MapArgs) -> anyhow::Result<MapSpec> {
    let mut spec = MapSpec::load(&args.map)?;
    spec.net = crate::net::net_option(args.net.as_deref(), spec.net.take())?;
    args.cpu_budget.apply(&mut spec.cpus, &mut spec.cpuset)?;
    if args.measure_all {
        spec.predict = false;
        spec.point_budget = None;
    }
    if args.budget.is_some() {
        spec.point_budget = args.budget;
    }
    if let Some(msg) = spec.unknown_cell(&args.verify_cells) {
        return Err(usage(msg));
    }
    spec.verify_cells.extend(args.verify_cells.iter().cloned());
    spec.check_net()
        .map_err(|msg| usage(format!("{}: {msg}", args.map)))?;
    if spec.has_path() {
        crate::net::require_permitted()?;
    }
    Ok(spec)
}

/// `map --list`: every preset with its cells, its full grid and its description.
fn preset_listing() -> anyhow::Result<String> {
    let cores = crate::lab::Machine::detect().cores.max(1);
    let mut listing = String::new();
    for (name, _) in PRESETS {
        let spec = MapSpec::load(name)?;
        let cells = spec.cells();
        let grid: usize = cells
            .iter()
            .map(|c| run::cell_of(&spec, c, cores, &[]).full_grid_points())
            .sum();
        listing.push_str(&format!(
            "{name:<10} {:>4} cells {:>6} grid points  {}\n",
            cells.len(),
            grid,
            spec.description
        ));
    }
    Ok(listing)
}

/// The spec, source, directory and wall time so far of an interrupted run.
fn resume_from(dir: &Path) -> anyhow::Result<(MapSpec, String, PathBuf, f64)> {
    let text = std::fs::read_to_string(dir.join(SPEC_FILE)).map_err(|_| {
        usage(format!(
            "--resume {}: no map run there (no {SPEC_FILE})",
            dir.display()
        ))
    })?;
    let (source, spec): (String, MapSpec) = serde_json::from_str(&text)
        .map_err(|e| usage(format!("--resume {}: {SPEC_FILE}: {e}", dir.display())))?;
    let wall_s = std::fs::read_to_string(dir.join(results::RESULTS_FILE))
        .ok()
        .and_then(|t| serde_json::from_str::<results::MapResults>(&t).ok())
        .map_or(0.0, |r| r.wall_s);
    Ok((spec, source, dir.to_path_buf(), wall_s))
}
