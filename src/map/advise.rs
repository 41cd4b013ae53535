//! `sweetspot advise`: one workload's answer in minutes. One cell of the map (a described
//! workload, or a running server's profile from `--from URL --pid PID`), searched as the map
//! searches, with Goetz's pool, `2n+1` and the architecture's default measured beside the
//! recommendation and what each loses said.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::halving::{Outcome, Verify};
use super::points::PointRecord;
use super::run::{cell_of, round_trip, search_cell, Progress};
use super::spec::{work_route, CellSpec, MapSpec, WaitMode};
use crate::arch::Arch;
use crate::lab::budget::BudgetApplied;
use crate::lab::points::PointLog;
use crate::lab::probe::{sum_cpu, Members, TreeSampler};
use crate::lab::Lab;
use crate::load::{LoadConfig, Mode, Target};
use crate::render::numbers::{duration_us, percent, thousands, wall_time};
use crate::search::flags::SearchFlags;
use crate::search::profile::OneConnection;
use crate::usage;

/// How long `--from` loads the running server at one connection to profile it.
const PROFILE_RUN: Duration = Duration::from_secs(2);

/// Flags of `sweetspot advise`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sweetspot advise --cpu 2ms --wait 30ms --dist lognormal --cv 1.5 --concurrency 500 --p99 100ms\n  \
sweetspot advise --from http://127.0.0.1:8080/api --pid 4242 --concurrency 200\n\n\
The workload is served by every architecture as /work (the CPU, then the wait); the search is \
the map's for one cell. --from profiles a running server under light load (one connection, 2 s): \
its CPU per request from /proc (the process and its descendants), its wait as the mean latency \
minus that CPU; the rest is assumed and said so."
)]
pub struct AdviseArgs {
    /// CPU per request (e.g. 2ms, 500us).
    #[arg(long, required_unless_present = "from", value_parser = crate::units::duration_arg)]
    pub cpu: Option<Duration>,
    /// Wait per request (e.g. 30ms).
    #[arg(long, required_unless_present = "from", value_parser = crate::units::duration_arg)]
    pub wait: Option<Duration>,
    /// Spread of CPU and wait per request: const, exp or lognormal.
    #[arg(long, default_value = "const")]
    pub dist: String,
    /// Coefficient of variation, for lognormal.
    #[arg(long)]
    pub cv: Option<f64>,
    /// The wait blocks the thread that runs the request (a synchronous driver).
    #[arg(long)]
    pub blocking_wait: bool,
    /// Candidate architectures, comma-separated [default: all].
    #[arg(long, value_delimiter = ',')]
    pub archs: Vec<String>,
    /// Profile a running server at this URL (its CPU needs --pid).
    #[arg(long, requires = "pid", conflicts_with_all = ["cpu", "wait"])]
    pub from: Option<String>,
    /// The running server's process id (its descendants count too).
    #[arg(long)]
    pub pid: Option<i32>,
    /// Where the points go [default: a temporary directory, removed after].
    #[arg(short, long)]
    pub out: Option<PathBuf>,
    /// Answer from a model of each server instead of the search: at most 12 points measured
    /// (one connection; each architecture at the connections without the wait), every
    /// candidate predicted with an interval and the term that binds it. With --verify, the
    /// pick is measured at the cell and said inside or outside its interval.
    #[arg(long)]
    pub predict: bool,
    /// The connections, the bound, the path (every cycle, and the bound, then hold its round
    /// trip); `--verify` measures every architecture at the pool the search chose for it and
    /// at its default, 3 s each (or three cycles), ranked the same way.
    #[command(flatten)]
    pub search: SearchFlags,
}

/// A running server's profile, and what of it was measured.
#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    pub url: String,
    pub pid: i32,
    pub requests: u64,
    pub cpu_us_per_request: f64,
    pub mean_latency_ms: f64,
    pub wait_ms: f64,
    /// Per request, µs: the server's and the load generator's threads' run-queue wait, taken
    /// out of the latency with the CPU to leave the wait ([`OneConnection::wait_us`]).
    pub server_runqueue_us_per_request: f64,
    pub client_runqueue_us_per_request: f64,
    pub measured: Vec<String>,
    pub assumed: Vec<String>,
}

/// What `advise --json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct Advice {
    pub cpu_us: f64,
    pub wait_ms: f64,
    pub dist: String,
    pub cv: Option<f64>,
    pub wait: WaitMode,
    pub concurrency: u32,
    pub p99_bound_ms: f64,
    pub route: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    pub outcome: Outcome,
    pub points_measured: usize,
    pub full_grid_points: usize,
    pub wall_s: f64,
    /// `--verify`: the full measurement the pick was checked against.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<Verify>,
    /// `--net`: the network path between the clients and the servers, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net: Option<String>,
    /// The CPU budget the servers ran under, and the cores it gave them.
    #[serde(flatten)]
    pub budget: BudgetApplied,
}

/// The candidate architectures: `--archs`, or every one.
fn archs_of(args: &AdviseArgs) -> anyhow::Result<Vec<Arch>> {
    if args.archs.is_empty() {
        return Ok(Arch::all().to_vec());
    }
    args.archs
        .iter()
        .map(|n| {
            Arch::from_name(n.trim()).ok_or_else(|| {
                usage(format!(
                    "--archs: unknown architecture {n:?} ({})",
                    Arch::names()
                ))
            })
        })
        .collect()
}

/// The workload's CPU (us) and wait (ms): as given, or from a running server's profile.
fn workload_of(args: &AdviseArgs) -> anyhow::Result<(f64, f64, Option<Profile>)> {
    let profile = match (&args.from, args.pid) {
        (Some(url), Some(pid)) => Some(profile(url, pid)?),
        _ => None,
    };
    let (cpu_us, wait_ms) = match &profile {
        Some(p) => (p.cpu_us_per_request.max(1.0), p.wait_ms),
        None => (
            args.cpu.unwrap_or_default().as_secs_f64() * 1e6,
            args.wait.unwrap_or_default().as_secs_f64() * 1e3,
        ),
    };
    if !(1.0..=10_000_000.0).contains(&cpu_us) || !(0.0..=60_000.0).contains(&wait_ms) {
        return Err(usage("--cpu from 1us to 10s, --wait up to 60s"));
    }
    Ok((cpu_us, wait_ms, profile))
}

/// `advise`'s arguments, checked: the one cell to search, and how to answer.
pub struct AdviseConfig {
    pub spec: MapSpec,
    pub cell: CellSpec,
    pub profile: Option<Profile>,
    pub dist: String,
    pub cv: Option<f64>,
    pub json: bool,
    /// Where the points go; `None`: a temporary directory, removed after.
    pub out: Option<PathBuf>,
}

impl AdviseConfig {
    /// Checks every flag (a usage error, exit 2, names the flag) and profiles the running
    /// server of `--from`.
    pub fn from_args(args: &AdviseArgs) -> anyhow::Result<AdviseConfig> {
        let p99_bound_ms = args.search.p99_bound_ms()?;
        let archs = archs_of(args)?;
        let concurrency = args.search.concurrency()?;
        if !["const", "exp", "lognormal"].contains(&args.dist.as_str()) {
            return Err(usage(format!(
                "--dist {:?}: const, exp or lognormal",
                args.dist
            )));
        }
        let (cpu_us, wait_ms, profile) = workload_of(args)?;
        let wait = if args.blocking_wait {
            WaitMode::Blocking
        } else {
            WaitMode::Async
        };
        // /work takes whole microseconds of CPU and of wait.
        let cpu_us = cpu_us.round();
        let wait_ms = (wait_ms * 1000.0).round() / 1000.0;
        let route = work_route(cpu_us, wait_ms, wait, Some(args.dist.as_str()), args.cv);
        let spec = MapSpec {
            name: "advise".into(),
            description: String::new(),
            archs,
            cpu_us: vec![cpu_us],
            ratios: vec![wait_ms * 1000.0 / cpu_us],
            concurrency: vec![concurrency],
            waits: vec![wait],
            dist: (args.dist != "const").then(|| args.dist.clone()),
            cv: args.cv,
            p99_bound_ms,
            base: super::spec::DEFAULT_BASE,
            rounds: 3,
            max_pool: concurrency.clamp(1024, 4096),
            warmup: Duration::ZERO,
            verify: args.search.verify,
            verify_cells: Vec::new(),
            predict: args.predict,
            point_budget: None,
            net: args.search.net()?,
            rtt_ms: Vec::new(),
            cpus: args.search.budget.checked()?.0.into_iter().collect(),
            cpuset: args.search.budget.cpu_list()?,
        };
        let rtt_ms = spec.rtts()[0];
        let cell = CellSpec {
            wait,
            ratio: spec.ratios[0],
            concurrency,
            cpu_us,
            wait_ms,
            rtt_ms,
            net: spec.net_at(rtt_ms),
            cpus: spec.cpus.first().copied(),
            route,
            key: "advise".into(),
        };
        Ok(AdviseConfig {
            spec,
            cell,
            profile,
            dist: args.dist.clone(),
            cv: args.cv,
            json: args.search.json,
            out: args.out.clone(),
        })
    }
}

/// Runs `sweetspot advise`: the flags to a config, the search, the answer.
pub fn run_advise(args: AdviseArgs) -> anyhow::Result<()> {
    let config = AdviseConfig::from_args(&args)?;
    if args.predict {
        let predicted = predicted(&config)?;
        if config.json {
            crate::print_stdout(&format!("{}\n", serde_json::to_string_pretty(&predicted)?))?;
        } else {
            crate::print_stdout(&super::forecast::text(&predicted))?;
        }
        return Ok(());
    }
    let (advice, every_point_failed) = advise(&config)?;
    if config.json {
        crate::print_stdout(&format!("{}\n", serde_json::to_string_pretty(&advice)?))?;
    } else {
        crate::print_stdout(&text(&advice))?;
    }
    if let Some(cause) = every_point_failed {
        anyhow::bail!("{cause}");
    }
    Ok(())
}

/// The run's point log: in `--out`, or without it in the scratch directory, gone with it.
fn point_log(config: &AdviseConfig, lab: &Lab) -> anyhow::Result<PointLog<PointRecord>> {
    let dir = config
        .out
        .clone()
        .unwrap_or_else(|| lab.scratch_dir().join("points"));
    PointLog::open(&dir)
}

/// Searches the config's cell on live servers: the advice, and the cause when every point
/// failed. An error when interrupted.
fn advise(config: &AdviseConfig) -> anyhow::Result<(Advice, Option<String>)> {
    let started = Instant::now();
    let (spec, cell) = (&config.spec, &config.cell);
    let lab = Lab::open("advise")?;
    let mut log = point_log(config, &lab)?;
    let cores = lab.cores();
    let mut progress = Progress::new(1, log.len(), false);
    let outcome = round_trip(
        spec,
        (cell.cpu_us, true),
        cell.rtt_ms,
        &lab,
        &mut log,
        &mut progress,
    )
    .and_then(|round_trip| {
        search_cell(
            spec,
            cell,
            round_trip,
            super::run::CellModel::default(),
            &lab,
            &mut log,
            &mut progress,
        )
    });
    progress.finish();
    let points = log.len();
    let every_point_failed = log.every_point_failed();
    let Some((outcome, verify)) = outcome else {
        anyhow::bail!("interrupted");
    };
    let advice = Advice {
        cpu_us: cell.cpu_us,
        wait_ms: cell.wait_ms,
        dist: config.dist.clone(),
        cv: config.cv,
        wait: cell.wait,
        concurrency: cell.concurrency,
        p99_bound_ms: spec.p99_bound_ms,
        route: cell.route.clone(),
        profile: config.profile.clone(),
        full_grid_points: cell_of(spec, cell, cores, &[]).full_grid_points(),
        outcome,
        points_measured: points,
        wall_s: started.elapsed().as_secs_f64(),
        verify,
        net: spec.net.map(|n| n.describe()),
        budget: BudgetApplied {
            cpus: cell.cpus,
            cpuset: spec.cpuset.clone(),
            cores: spec.budget(cell.cpus, cores),
            whole_cores: spec.whole_cores(cell.cpus, cores),
        },
    };
    Ok((advice, every_point_failed))
}

/// Forecasts the config's cell from models fitted on the spot ([`super::forecast`]). An
/// error when interrupted, or when no architecture's point could be fitted.
fn predicted(config: &AdviseConfig) -> anyhow::Result<super::forecast::PredictedAdvice> {
    let started = Instant::now();
    let (spec, cell) = (&config.spec, &config.cell);
    let lab = Lab::open("advise")?;
    let mut log = point_log(config, &lab)?;
    let before = log.len();
    let mut progress = Progress::new(1, before, false);
    let forecast =
        super::forecast::forecast(spec, cell, &lab, &mut log, &mut progress, spec.verify);
    progress.finish();
    let Some(forecast) = forecast else {
        anyhow::bail!("interrupted");
    };
    if forecast.candidates.is_empty() {
        anyhow::bail!(
            "no architecture could be fitted: {}",
            forecast.left_out.join(", ")
        );
    }
    Ok(super::forecast::PredictedAdvice {
        cpu_us: cell.cpu_us,
        wait_ms: cell.wait_ms,
        wait: cell.wait,
        concurrency: cell.concurrency,
        p99_bound_ms: spec.p99_bound_ms,
        route: cell.route.clone(),
        forecast,
        points_measured: log.len() - before,
        wall_s: started.elapsed().as_secs_f64(),
    })
}

/// The advice in words.
pub fn text(a: &Advice) -> String {
    let mut out = String::new();
    if let Some(p) = &a.profile {
        out.push_str(&format!(
            "profile of {} (pid {}), {} requests at one connection:\n  measured: {}\n  assumed: {}\n\n",
            p.url,
            p.pid,
            p.requests,
            p.measured.join("; "),
            p.assumed.join("; ")
        ));
    }
    out.push_str(&format!(
        "advise: {} of CPU and {} of {} wait a request ({}), {} connections, p99 at most {}\n",
        duration_us(a.cpu_us),
        duration_us(a.wait_ms * 1000.0),
        a.wait.name(),
        match a.cv {
            Some(cv) if a.dist != "const" => format!("{}, cv {cv}", a.dist),
            _ => a.dist.clone(),
        },
        a.concurrency,
        duration_us(a.p99_bound_ms * 1000.0)
    ));
    let o = &a.outcome;
    if let Some(net) = &a.net {
        out.push_str(&format!("  across a network path: {net}\n"));
    }
    if let Some(budget) = budget_words(a) {
        out.push_str(&format!("  the servers' CPU budget: {budget}\n"));
    }
    out.push_str(&format!(
        "  the physical bound: min({} cores / {}, {} connections / {}{}) = {} req/s\n",
        crate::lab::budget::cpus_text(a.budget.cores),
        duration_us(a.cpu_us),
        a.concurrency,
        duration_us(a.cpu_us + a.wait_ms * 1000.0),
        if a.net.is_some() {
            " + the path's round trip"
        } else {
            ""
        },
        thousands(o.bound_rps)
    ));
    out.push_str(&left_out_text(o));
    match o.winner {
        None => out.push_str(&no_winner_text(a)),
        Some(w) => {
            out.push_str(&winner_text(o));
            if w.arch.pooled() {
                out.push_str(&rules_text(a));
            }
        }
    }
    if let Some(v) = &a.verify {
        out.push_str(&verify_text(v));
    }
    out.push_str(&format!(
        "  {}\n",
        crate::search::points_sentence(a.points_measured, a.wall_s, a.full_grid_points)
    ));
    out
}

/// The candidates left unmeasured, and why, a line a reason.
fn left_out_text(o: &Outcome) -> String {
    let mut out = String::new();
    for (who, why) in [
        (
            &o.starving,
            "as they leave connections unanswered by their shape",
        ),
        (
            &o.outclassed,
            "as their own bound is below what another reached",
        ),
        (
            &o.unneeded,
            "as the pick reached the bound with a p99 at its floor and the CPU and memory of the \
             leanest measured (none could beat it)",
        ),
    ] {
        if !who.is_empty() {
            out.push_str(&format!("  left out, {why}: {}\n", who.join(", ")));
        }
    }
    out
}

/// `--cpus` and `--cpuset` in words, when either was given.
fn budget_words(a: &Advice) -> Option<String> {
    let quota = a.budget.cpus.map(|q| {
        format!(
            "a quota of {} cores (the bound's), their defaults sized for {}",
            crate::lab::budget::cpus_text(q),
            a.budget.whole_cores
        )
    });
    let set = a.budget.cpuset.as_ref().map(|s| format!("CPUs {s} only"));
    let words: Vec<String> = quota.into_iter().chain(set).collect();
    (!words.is_empty()).then(|| words.join(", on "))
}

/// Why nothing was recommended.
fn no_winner_text(a: &Advice) -> String {
    let mut out = String::from("  no architecture met the p99 bound at this concurrency\n");
    // Little's law: the cores cap throughput at cores / CPU, so N users wait at least
    // N / that on average.
    let cores = crate::lab::budget::cpus_text(a.budget.cores);
    let cap_rps = a.budget.cores * 1e6 / a.cpu_us;
    let floor_us = f64::from(a.concurrency) / cap_rps * 1e6 + a.wait_ms * 1000.0;
    if floor_us > a.p99_bound_ms * 1000.0 {
        out.push_str(&format!(
            "  the CPU alone caps {cores} cores at {} req/s, so {} users wait at least {} \
             on average (Little's law): fewer users, less CPU a request, or a looser bound\n",
            thousands(cap_rps),
            a.concurrency,
            duration_us(floor_us)
        ));
    }
    out
}

/// The recommendation, what it costs, and what it was told apart by.
fn winner_text(o: &Outcome) -> String {
    let w = o.winner.expect("a winner");
    let row = o.winner_row();
    let mut out = format!(
        "  recommended: {}{}: {} req/s ({} of its own bound{}), p99 {}{}\n",
        w.arch.name(),
        w.workers
            .map(|n| format!(" with {n} workers"))
            .unwrap_or_default(),
        thousands(o.rps),
        percent((o.of_bound().unwrap_or(0.0) * 100.0).round() / 100.0),
        o.own_bound_rps()
            .map(|b| format!(
                ", {} req/s: its CPU a request on the cores the load generator left it",
                thousands(b)
            ))
            .unwrap_or_default(),
        duration_us(o.p99_us),
        row.map(|r| format!(
            ", {} of server CPU a request, {:.1} MiB peak RSS",
            duration_us(r.cpu_us),
            r.rss_kb / 1024.0
        ))
        .unwrap_or_default()
    );
    if let Some(l) = row.and_then(|r| r.limit.as_ref()) {
        out.push_str(&format!(
            "  what limited it: {}: {}\n",
            l.kind.name(),
            l.evidence
        ));
    }
    if !o.ties.is_empty() {
        out.push_str(&format!(
            "  indistinguishable from it on throughput, p99, CPU and memory: {}\n",
            o.ties.join(", ")
        ));
    } else if let Some(figure) = o.decided_by.filter(|f| {
        !matches!(
            f,
            crate::search::rank::Figure::Throughput | crate::search::rank::Figure::Bound
        )
    }) {
        out.push_str(&format!(
            "  others matched its throughput; its {} decided\n",
            figure.name()
        ));
    }
    if let (Some(r), Some(m)) = (&o.runner_up, o.margin) {
        out.push_str(&if m >= 0.0 {
            format!(
                "  runner-up on throughput: {r}, {} behind\n",
                percent((m * 100.0).round() / 100.0)
            )
        } else {
            format!(
                "  {r} had {} more throughput, inside the spread, at a higher cost\n",
                percent((-m * 100.0).round() / 100.0)
            )
        });
    } else if o.ties.is_empty() && other_measured(o) {
        out.push_str("  no other architecture met the p99 bound\n");
    }
    for decision in &o.decisions {
        out.push_str(&format!("  why not: {decision}\n"));
    }
    out
}

/// The rules of thumb measured on the winner's architecture, and what each loses.
fn rules_text(a: &Advice) -> String {
    let (o, cores) = (&a.outcome, crate::lab::budget::cpus_text(a.budget.cores));
    let w = o.winner.expect("a winner");
    let mut out = format!("  the rules of thumb, measured on {}:\n", w.arch.name());
    for r in &o.rules {
        let why = match r.rule.as_str() {
            "goetz" => format!(
                "Goetz, {cores} x (1 + {}/{})",
                duration_us(a.wait_ms * 1000.0),
                duration_us(a.cpu_us)
            ),
            "2n+1" => format!("2n+1, 2 x {} + 1", a.budget.whole_cores),
            _ => format!("{}'s default", w.arch.name()),
        };
        if !r.measured {
            out.push_str(&format!(
                "    {why} = {}: at most {} req/s by its own bound ({} threads, each held \
                 through a wait): loses at least {}; not measured\n",
                r.workers,
                thousands(r.rps),
                r.workers,
                percent((r.rps_loss * 100.0).floor() / 100.0)
            ));
            continue;
        }
        let cost = if !r.meets_bound {
            match &r.missed_because {
                Some(why) => format!("misses the bound ({why})"),
                None => format!("p99 {} misses the bound", duration_us(r.p99_us)),
            }
        } else if r.rps_loss >= 0.005 {
            format!(
                "loses {} of the throughput",
                percent((r.rps_loss * 100.0).round() / 100.0)
            )
        } else {
            "as good".into()
        };
        out.push_str(&format!(
            "    {why} = {}: {} req/s, p99 {}: {cost}\n",
            r.workers,
            thousands(r.rps),
            duration_us(r.p99_us)
        ));
        if let Some(l) = &r.limit {
            out.push_str(&format!(
                "      what limited it: {}: {}\n",
                l.kind.name(),
                l.evidence
            ));
        }
    }
    out
}

/// The full measurement beside the pick.
fn verify_text(v: &Verify) -> String {
    let mut out = format!(
        "  verify: every architecture at its chosen pool and its default, {} each:\n",
        wall_time(f64::from(v.window_ms) / 1000.0)
    );
    for r in &v.rows {
        out.push_str(&format!(
            "    {:<16} {:>9} req/s{} p99 {}{}, {} CPU a request, {:.1} MiB\n",
            r.label,
            thousands(r.measured_rps),
            if r.rps.0 > 0.0 { " " } else { "*" },
            if r.p99_lower_bound { ">=" } else { "" },
            duration_us(r.p99_us),
            duration_us(r.cpu_us),
            r.rss_kb / 1024.0
        ));
    }
    out.push_str(&format!(
        "  verify: {} (* misses the p99 bound)\n",
        v.verdict()
    ));
    out
}

/// Profiles a running server: one connection for 2 s through the load engine, its CPU (the
/// process and its descendants) from /proc before and after, and the run-queue waits of its
/// threads (sampled over the run) and of the load's (its report).
fn profile(url: &str, pid: i32) -> anyhow::Result<Profile> {
    if !crate::lab::probe::process_exists(pid) {
        return Err(usage(format!("--pid {pid}: no such process")));
    }
    let target = Target::parse(url).map_err(|e| usage(format!("--from {url}: {e:#}")))?;
    let config = LoadConfig::new(
        target,
        1,
        Mode::Closed {
            duration: PROFILE_RUN,
        },
    );
    let members = Members::Tree(pid);
    let before = sum_cpu(&members.processes());
    let sampler = TreeSampler::start(members.clone(), Duration::from_millis(200));
    let report = crate::load::run(&config, None);
    let after = sum_cpu(&members.processes());
    let sample = sampler.finish();
    let report = report.map_err(|e| usage(format!("--from {url}: {e:#}")))?;
    let requests = report.requests;
    if requests == 0 {
        return Err(usage(format!(
            "--from {url}: no request was answered in {}",
            wall_time(PROFILE_RUN.as_secs_f64())
        )));
    }
    let per_request = |s: f64| s * 1e6 / requests as f64;
    let one = OneConnection {
        latency_us: report.latency_us.mean,
        cpu_us: per_request(after.since(&before).total_s()),
        server_runqueue_us: per_request(sample.runqueue_wait_s),
        client_runqueue_us: per_request(report.client_wait_s),
    };
    let wait_ms = one.wait_us() / 1000.0;
    let less = match one.runqueue_text() {
        Some(runqueue) => format!("minus that CPU and {runqueue}"),
        None => "minus that CPU".to_string(),
    };
    Ok(Profile {
        url: url.to_string(),
        pid,
        requests,
        cpu_us_per_request: one.cpu_us,
        mean_latency_ms: one.latency_us / 1000.0,
        wait_ms,
        server_runqueue_us_per_request: one.server_runqueue_us,
        client_runqueue_us_per_request: one.client_runqueue_us,
        measured: vec![
            format!(
                "CPU {} a request (/proc of pid {pid} and its descendants, over {requests} requests)",
                duration_us(one.cpu_us)
            ),
            format!(
                "wait {} a request (mean latency {} at one connection, {less})",
                duration_us(wait_ms * 1000.0),
                duration_us(one.latency_us)
            ),
        ],
        assumed: vec![
            "CPU and wait constant per request (--dist, --cv to say otherwise)".into(),
            "the wait does not block a thread (--blocking-wait if it does: a synchronous driver)"
                .into(),
            "the loopback's own cost is part of the wait".into(),
        ],
    })
}

/// Whether an architecture other than the winner's was measured (not all were left out).
fn other_measured(o: &Outcome) -> bool {
    let arch = |label: &str| label.split('/').next().unwrap_or_default().to_string();
    let winner = o.winner.map(|w| arch(&w.label())).unwrap_or_default();
    o.candidates.iter().any(|r| arch(&r.label) != winner)
}
