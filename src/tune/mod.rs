//! `sweetspot tune`: the sweet spot of the user's own server over its own knobs (workers,
//! threads, or any one named), against the user's own request and p99 bound. The server is
//! started, probed and stopped through the lab's door ([`crate::lab::Lab::point`]: an external
//! target, its process tree's CPU, peak RSS, threads and processes, nothing left running); the
//! knobs are searched by [`coordinate`] (coordinate search over the kernel's knob search);
//! beside the pick, the server's own default, `2n+1` and Goetz's pool from a profile at one
//! connection are measured with what each loses; `--verify` measures the full grid and says
//! whether the pick is inside its best's spread. [`spec`] checks what is asked before anything
//! runs; the lab's point log ([`crate::lab::points`]) keeps each finished point on disk, so
//! `--resume DIR` finishes a stopped run without measuring it again. [`output`] writes each
//! format.

pub mod coordinate;
pub mod output;
pub mod predict;
pub mod spec;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::lab::budget::BudgetApplied;
use crate::lab::plan::{
    ExternalTarget, LoadMode, PointPlan, PointSpec, Setup, TargetSpec, Workload,
};
use crate::lab::points::PointLog;
use crate::lab::results::{utc_timestamp, Machine};
use crate::lab::{Lab, Origin, PointResult};
use crate::search::flags::SearchFlags;
use crate::search::profile::OneConnection;
use crate::search::rank::Level;
use crate::search::sample_of;
use crate::search::Sample;
use crate::usage;
use coordinate::{Measure, Measured, Run};
use spec::Knob;

/// Flags of `sweetspot tune`.
#[derive(Debug, Clone, clap::Args, Serialize, Deserialize)]
#[command(after_help = "Examples:\n  \
sweetspot tune --cmd 'puma -w {workers} -t {threads}:{threads} -b tcp://127.0.0.1:{port} app.ru' \\\n      \
--url 'http://127.0.0.1:{port}/orders' --concurrency 100 --p99 200ms --workers 1..8 --threads 1..32 \\\n      \
--default 'workers=2,threads=3'\n  \
sweetspot tune --cmd 'node cluster.js {knob:procs} {port}' --url 'http://127.0.0.1:{port}/' \
--concurrency 64 --knob procs=1..8\n\n\
The server runs as `sh -c CMD` with {port} a free port and each knob's placeholder its value; \
each configuration is started, measured (closed loop at --concurrency, --rate R a second, or \
--plan PLAN; --url's request, or each of --urls FILE in turn) and stopped; every point is saved \
in --out as it finishes, and `sweetspot tune --resume DIR` finishes a run that was stopped. One or two knobs are searched in turn (coordinate search), each by doubling and a \
golden-section search in log space with close calls measured again, until a pass changes \
nothing. The pick: the smallest configuration within 5% of the best throughput whose p99 meets \
the bound, cheapest by p99, server CPU per request and memory. Beside it: --default, 2n+1 \
workers, and Goetz's cores x (1 + W/C) requests at once (W and C from a profile at one \
connection), each with what it loses. --verify measures every configuration of the ranges 3 \
times and says whether the pick is inside the best's spread.")]
pub struct TuneArgs {
    /// The server's command, with {port} and its knobs' placeholders ({workers}, {threads},
    /// {knob:NAME}); run with `sh -c`.
    #[arg(
        long,
        required_unless_present = "resume",
        default_value = "",
        hide_default_value = true
    )]
    pub cmd: String,
    /// The URL to load, with {port}: http://127.0.0.1:{port}/PATH.
    #[arg(
        long,
        required_unless_present = "resume",
        default_value = "",
        hide_default_value = true
    )]
    pub url: String,
    /// A fixed rate, requests a second, instead of the closed loop (the p99 then decides).
    #[arg(long, conflicts_with = "plan")]
    pub rate: Option<f64>,
    /// A rate plan instead of the closed loop, as `load -R` takes one: a ramp `100..5000`, or
    /// steps `1000@10s,2000@10s` (the p99 over the whole plan then decides; a plan without
    /// its own durations lasts --duration).
    #[arg(long)]
    pub plan: Option<String>,
    /// Send the requests of FILE instead of --url's path, round robin on every connection, as
    /// `load --urls` reads them (path-only lines go to the server under test; --url still
    /// names the warm-up's request and the port's ready check).
    #[arg(long)]
    pub urls: Option<PathBuf>,
    /// The range of {workers}, e.g. 1..16.
    #[arg(long)]
    pub workers: Option<String>,
    /// The range of {threads}, e.g. 1..32.
    #[arg(long)]
    pub threads: Option<String>,
    /// Another knob: NAME=A..B for {knob:NAME}.
    #[arg(long)]
    pub knob: Vec<String>,
    /// Run R copies of the server side by side, each on its own port ({port}) in a budget of
    /// its own (--cpus is each one's), the connections spread over them in turn, as a
    /// Kubernetes Service spreads them over its pods. Needs root.
    #[arg(long, default_value_t = 1, value_name = "R")]
    #[serde(default = "one")]
    pub replicas: u32,
    /// The server's own default, measured beside the pick: e.g. workers=2,threads=3.
    #[arg(long)]
    pub default: Option<String>,
    /// Predict every configuration with the model (the reading of the knobs that fits the
    /// points measured, solved by Mean Value Analysis) and measure only what decides: a first
    /// point at the start and at each knob's ends, the model's leader, and what its interval
    /// says could still beat it or be a smaller pick. The closed loop only.
    #[arg(long, conflicts_with_all = ["rate", "plan"])]
    #[serde(default)]
    pub predict: bool,
    /// Seconds measured per point.
    #[arg(long, default_value = "2s", value_parser = crate::units::duration_arg)]
    #[serde(with = "crate::units::as_text")]
    pub duration: Duration,
    /// Unmeasured load before each point (a server's own warm-up).
    #[arg(long, default_value = "500ms", value_parser = crate::units::duration_arg)]
    #[serde(with = "crate::units::as_text")]
    pub warmup: Duration,
    /// Seconds to wait for the server to open its port.
    #[arg(long, default_value = "30s", value_parser = crate::units::duration_arg)]
    #[serde(with = "crate::units::as_text")]
    pub ready_timeout: Duration,
    /// Output directory [default: results/tune-<timestamp>].
    #[arg(short, long)]
    pub out: Option<PathBuf>,
    /// Finish an interrupted run in DIR (its own arguments, saved there; points already
    /// measured are not measured again).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["cmd", "url", "concurrency", "out"])]
    #[serde(skip)]
    pub resume: Option<PathBuf>,
    /// The connections, the bound, the path; `--verify` measures every configuration of the
    /// ranges 3 times.
    #[command(flatten)]
    #[serde(flatten)]
    pub search: SearchFlags,
}

fn one() -> u32 {
    1
}

/// The file a run's arguments are saved in, inside its directory (for `--resume`).
const ARGS_FILE: &str = "tune-args.json";

/// A configuration measured beside the pick, by the rule that names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleResult {
    pub rule: String,
    pub values: Vec<u32>,
    pub level: Level,
    /// Throughput lost against the pick, a fraction (negative: it did better).
    pub rps_loss: f64,
    pub meets_bound: bool,
    /// Why it misses the p99 bound, when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed_because: Option<String>,
}

/// One configuration as measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigRow {
    pub values: Vec<u32>,
    pub label: String,
    pub level: Level,
    pub samples: Vec<Sample>,
}

impl ConfigRow {
    /// Why this configuration misses the p99 bound, when it does.
    pub fn miss(&self, p99_bound_us: f64) -> Option<crate::search::Miss> {
        crate::search::Miss::of(&self.samples, p99_bound_us)
    }
}

/// The server's profile at one connection, for Goetz's pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub values: Vec<u32>,
    pub cpu_us: f64,
    pub mean_latency_ms: f64,
    pub wait_ms: f64,
    /// The server's and the load generator's run-queue wait a request, µs, taken out of the
    /// latency with the CPU to leave the wait (0 in results from before it was).
    #[serde(default)]
    pub runqueue_us: f64,
    pub goetz: u32,
}

/// What `tune` writes (`results.json`) and prints.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TuneResults {
    pub version: u32,
    pub command: String,
    pub url: String,
    pub knobs: Vec<Knob>,
    pub concurrency: u32,
    pub rate: Option<f64>,
    /// `--plan`, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// `--urls`, made absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urls: Option<String>,
    pub p99_bound_ms: f64,
    pub duration_s: f64,
    pub machine: Machine,
    pub started: String,
    pub wall_s: f64,
    pub interrupted: bool,
    pub pick: Option<coordinate::Found>,
    pub passes: usize,
    /// Every configuration the search measured, in knob order.
    pub measured: Vec<ConfigRow>,
    pub points_measured: usize,
    pub grid_points: usize,
    pub profile: Option<Profile>,
    pub rules: Vec<RuleResult>,
    pub verify: Option<coordinate::GridCheck>,
    /// The CPU budget the server ran under (Goetz's pool counts its cores and 2n+1 its
    /// whole cores).
    #[serde(flatten)]
    pub budget: BudgetApplied,
    /// `--replicas`: copies of the server side by side, each in its own budget.
    #[serde(default = "one")]
    pub replicas: u32,
    /// Configurations that sized the server for more CPUs than its quota let it use, each
    /// beside the best that did not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oversized: Vec<crate::lab::budget::Oversized>,
    /// `--predict`: the model, and every configuration as it saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<predict::ModelSummary>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub predictions: Vec<predict::ConfigPrediction>,
}

/// `tune`'s arguments, checked once: the knobs, the server, the load each configuration
/// gets, the bound and where the results go. Nothing runs before it is whole.
pub struct TuneConfig {
    /// The arguments as given (saved in the run's directory, for `--resume`).
    pub args: TuneArgs,
    pub knobs: Vec<Knob>,
    /// The server at its knobs' values (`{knob}`s unfilled): `--cmd`, `--url`'s base.
    pub server: ExternalTarget,
    /// The load: the closed loop, or `--rate` (`--plan`'s mean rate); the window, the
    /// warm-up, the timeout, the path; and the request (`--url`'s path, `--plan`, `--urls`
    /// made absolute).
    pub setup: Setup,
    pub workload: Workload,
    pub concurrency: u32,
    pub p99_bound_ms: f64,
    /// `--default`'s values.
    pub default: Option<Vec<u32>>,
    pub out: PathBuf,
    /// The wall time the run this one resumes had taken.
    pub previous_wall_s: f64,
}

impl TuneConfig {
    /// Checks every flag (a usage error, exit 2, names the flag); `--resume DIR` reads the
    /// arguments saved there.
    pub fn from_args(args: TuneArgs) -> anyhow::Result<TuneConfig> {
        let (args, previous_wall_s) = match &args.resume {
            Some(dir) => resume_from(dir)?,
            None => (args, 0.0),
        };
        let knobs = spec::knobs_of(
            &args.cmd,
            args.workers.as_deref(),
            args.threads.as_deref(),
            &args.knob,
        )?;
        let (base, route) = spec::split_url(&args.url)?;
        let p99_bound_ms = args.search.p99_bound_ms()?;
        let duration_s = args.duration.as_secs_f64();
        if !(0.1..=600.0).contains(&duration_s) {
            return Err(usage("--duration: from 100ms to 10m"));
        }
        let warmup_s = args.warmup.as_secs_f64();
        let ready_s = args.ready_timeout.as_secs_f64();
        let concurrency = args.search.concurrency()?;
        if args.rate.is_some_and(|r| !(r > 0.0 && r <= 10_000_000.0)) {
            return Err(usage("--rate: above 0, up to 10,000,000 a second"));
        }
        let plan_rate = args
            .plan
            .as_deref()
            .map(|text| {
                let whole = std::time::Duration::from_secs_f64(duration_s);
                crate::load::RatePlan::parse(text, None, whole)
                    .map(|p| p.mean_rate())
                    .map_err(|e| usage(format!("--plan {}: {e}", text.trim())))
            })
            .transpose()?;
        let urls = urls_of(&args)?;
        let default = args
            .default
            .as_deref()
            .map(|d| spec::parse_default(d, &knobs))
            .transpose()?;
        let out = args
            .out
            .clone()
            .unwrap_or_else(|| crate::lab::results::default_out_dir("tune"));
        let mut setup = Setup::closed(duration_s, warmup_s);
        if let Some(rate) = args.rate.or(plan_rate) {
            setup.mode = LoadMode::Rate;
            setup.rate = Some(rate);
        }
        setup.timeout = (p99_bound_ms / 1000.0 * 2.0).max(2.0);
        setup.net = args.search.net()?;
        (setup.cpus, setup.cpuset) = args.search.budget.checked()?;
        setup.replicas = replicas_of(&args)?;
        if args.predict && setup.replicas > 1 {
            return Err(usage(
                "--predict: the model knows one copy of the server, not --replicas",
            ));
        }
        let mut workload = Workload::get("tune", &route);
        workload.plan = args.plan.clone();
        workload.urls = urls;
        let server = server_of(&args, base, ready_s);
        Ok(TuneConfig {
            args,
            knobs,
            server,
            setup,
            workload,
            concurrency,
            p99_bound_ms,
            default,
            out,
            previous_wall_s,
        })
    }

    /// The configuration measured first: `--default`, or each knob's lowest, in its range.
    fn start(&self) -> Vec<u32> {
        let start = self
            .default
            .clone()
            .unwrap_or_else(|| self.knobs.iter().map(|k| k.lo).collect());
        start
            .iter()
            .zip(&self.knobs)
            .map(|(v, k)| (*v).clamp(k.lo, k.hi))
            .collect()
    }
}

/// `--replicas`, checked.
fn replicas_of(args: &TuneArgs) -> anyhow::Result<u32> {
    let most = crate::lab::budget::MAX_REPLICAS;
    if !(1..=most).contains(&args.replicas) {
        return Err(usage(format!(
            "--replicas {}: from 1 to {most}",
            args.replicas
        )));
    }
    Ok(args.replicas)
}

/// `--urls`, checked, as an absolute path (a resumed run reads it from elsewhere).
fn urls_of(args: &TuneArgs) -> anyhow::Result<Option<String>> {
    args.urls
        .as_deref()
        .map(|file| {
            crate::lab::plan::check_path_list(file).map_err(usage)?;
            std::path::absolute(file)
                .map(|p| p.display().to_string())
                .map_err(|e| usage(format!("--urls {}: {e}", file.display())))
        })
        .transpose()
}

/// The user's server as an external target: its command (knobs still as placeholders), its
/// base URL, how long it may take to be ready.
fn server_of(args: &TuneArgs, base: String, ready_s: f64) -> ExternalTarget {
    ExternalTarget {
        name: "tune".into(),
        command: args.cmd.clone(),
        url: base,
        ready_timeout: Some(ready_s),
        workloads: None,
        cpu_command: None,
        workers: Vec::new(),
        threads: Vec::new(),
        cpus: None,
        replicas: None,
    }
}

/// The user's server at one configuration, answered by the lab: from the point log when the
/// point finished before, else measured live.
struct ServerProbes<'a> {
    config: &'a TuneConfig,
    /// The connections and the loop of the points measured now (the profile's: one, closed).
    concurrency: u32,
    closed: bool,
    lab: &'a Lab,
    done: usize,
    /// The last point's full result (the profile reads its mean latency).
    last: Option<PointResult>,
    /// Finished points, on disk (answered from there on `--resume`).
    log: PointLog<PointResult>,
    /// How each configuration's requests failed, where over 1% did.
    causes: std::collections::BTreeMap<Vec<u32>, String>,
    /// Why the next point is measured (`--predict`'s search says).
    why: Option<&'static str>,
}

impl ServerProbes<'_> {
    /// The point one configuration is: the user's command with the knobs' values, its URL
    /// and request, the load (the closed loop at one connection for the profile).
    fn plan(&self, values: &[u32]) -> PointPlan {
        let c = self.config;
        let (mut setup, mut workload) = (c.setup.clone(), c.workload.clone());
        if self.closed {
            (setup.mode, setup.rate, workload.plan) = (LoadMode::Closed, None, None);
        }
        let server = ExternalTarget {
            command: spec::command_at(&c.server.command, &c.knobs, values),
            ..c.server.clone()
        };
        PointPlan {
            point: PointSpec {
                target: TargetSpec::External(server),
                workers: None,
                workload,
                concurrency: self.concurrency,
                cpus: None,
                streams: None,
            },
            setup,
        }
    }
}

impl Measure<Run> for ServerProbes<'_> {
    fn measure(&mut self, run: &Run) -> Option<Sample> {
        let (values, rep) = (&run.values[..], run.rep);
        let lab = self.lab;
        if lab.stopped() {
            return None;
        }
        let key = run.key(self.concurrency, self.closed);
        let plan = self.plan(values);
        let (result, origin) = lab.point("tune", &mut self.log, &key, || plan, |r| r)?;
        let saved = if origin == Origin::Saved {
            " (saved)"
        } else {
            ""
        };
        let sample = sample_of(&result, lab.cores());
        self.done += 1;
        // The first point's failure is the caller's one line (the server did not run).
        if !result.ok && self.done == 1 {
            self.last = Some(result);
            return Some(sample);
        }
        let cause = result.failure_cause();
        let failure = result
            .failure
            .clone()
            .or_else(|| cause.clone())
            .map(|f| format!(" (failed: {f})"))
            .unwrap_or_default();
        if let Some(cause) = cause {
            self.causes.insert(values.to_vec(), cause);
        }
        let why = self
            .why
            .take()
            .map(|w| format!(" ({w})"))
            .unwrap_or_default();
        eprintln!(
            "tune: {} #{}{why}: {:.1} req/s, p99 {}{}{failure}{saved}",
            spec::label(&self.config.knobs, values),
            rep + 1,
            sample.rps,
            crate::render::numbers::duration_us(sample.p99_us),
            match &sample.limit {
                Some(l) => format!(", limit {}", l.kind.name()),
                None => String::new(),
            },
        );
        self.last = Some(result);
        Some(sample)
    }

    fn why(&mut self, reason: &'static str) {
        self.why = Some(reason);
    }
}

/// Runs `sweetspot tune`: the flags to a config, the measurement, the results written.
pub fn run_tune(args: TuneArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let config = TuneConfig::from_args(args)?;
    prepare_out(&config)?;
    let log = PointLog::open(&config.out)?;
    let lab = Lab::open("tune")?;
    let mut live = ServerProbes {
        config: &config,
        concurrency: config.concurrency,
        closed: false,
        lab: &lab,
        done: 0,
        last: None,
        log,
        causes: Default::default(),
        why: None,
    };
    lab.write_peers_for(std::iter::once(config.args.cmd.as_str()))?;
    let mut results = tune(&config, &mut live)?;
    results.wall_s = config.previous_wall_s + started.elapsed().as_secs_f64();
    write(&config, &results)?;
    let out = config.out.display();
    if let Some(cause) = every_configuration_failed(&results, &live.causes) {
        anyhow::bail!("{cause}; results in {out}");
    }
    if results.interrupted {
        anyhow::bail!(
            "interrupted: {} points saved; `sweetspot tune --resume {out}` continues",
            live.log.len(),
        );
    }
    Ok(())
}

/// Makes the run's directory and saves its arguments there, as they will be read back (the
/// directory and the URL list absolute); a new run in a directory that holds one is refused.
fn prepare_out(config: &TuneConfig) -> anyhow::Result<()> {
    let out = &config.out;
    std::fs::create_dir_all(out).map_err(|e| usage(format!("--out {}: {e}", out.display())))?;
    if config.args.resume.is_some() {
        return Ok(());
    }
    if out.join(ARGS_FILE).exists() {
        return Err(usage(format!(
            "{} holds a tune run already: `sweetspot tune --resume {}` continues it",
            out.display(),
            out.display()
        )));
    }
    let saved = TuneArgs {
        out: Some(std::path::absolute(out)?),
        urls: config.workload.urls.clone().map(PathBuf::from),
        ..config.args.clone()
    };
    std::fs::write(out.join(ARGS_FILE), serde_json::to_string_pretty(&saved)?)
        .with_context(|| format!("writing {}", out.join(ARGS_FILE).display()))
}

/// The measurement: the first configuration (a command that never opens its port is one
/// line, not a search of failures), the search, the profile and the rules beside its pick,
/// and with `--verify` the full grid.
fn tune(config: &TuneConfig, live: &mut ServerProbes) -> anyhow::Result<TuneResults> {
    let (knobs, args) = (&config.knobs, &config.args);
    let cpuset = config.setup.cpuset.as_deref();
    let machine_cores = live.lab.cores();
    let budget = crate::lab::budget::budget_cores(config.setup.cpus, cpuset, machine_cores);
    let cores = crate::lab::budget::whole_cores(config.setup.cpus, cpuset, machine_cores);
    let start = config.start();
    let p99_bound_us = config.p99_bound_ms * 1000.0;
    let mut measured = Measured::default();
    let mut results = TuneResults::new(config, &live.lab.machine, budget, cores);
    let first = measured.level(live, &start, 1, p99_bound_us);
    if let (Some(_), Some(r)) = (&first, &live.last) {
        if let Some(failure) = r.failure.as_deref().filter(|_| !r.ok) {
            // Nothing ran: no run to resume.
            let _ = std::fs::remove_file(config.out.join(ARGS_FILE));
            let _ = std::fs::remove_file(config.out.join(crate::lab::points::POINTS_FILE));
            return Err(usage(format!(
                "the server at {} did not run: {}",
                spec::label(knobs, &start),
                failure.lines().next().unwrap_or(failure)
            )));
        }
    }
    let mut found = first.and_then(|_| match args.predict {
        true => predicted(config, live, &start, budget, &mut measured, &mut results),
        false => coordinate::search(knobs, &start, p99_bound_us, &mut measured, live),
    });
    if let Some(found) = found.as_mut() {
        results.passes = found.passes;
        if results.profile.is_none() {
            results.profile = profile(live, &start, budget).map(|(p, _)| p);
        }
        let beside = rules(
            knobs,
            found,
            config.default.as_deref(),
            results.profile.as_ref(),
            cores,
            p99_bound_us,
            &mut measured,
            live,
        );
        results.rules = beside.unwrap_or_default();
        // A rule that missed for failed requests says how they failed.
        for rule in &mut results.rules {
            if let (Some(why), Some(cause)) =
                (rule.missed_because.as_mut(), live.causes.get(&rule.values))
            {
                why.push_str(&format!(": {cause}"));
            }
        }
    }
    // The search's points, the rules' and the profile's; not the grid's.
    results.points_measured = live.done;
    if let Some(found) = found.as_ref().filter(|_| args.search.verify) {
        eprintln!(
            "tune: verifying against the full grid: {} points",
            results.grid_points
        );
        results.verify =
            coordinate::check_against_grid(knobs, &found.pick, p99_bound_us, 100, live);
    }
    results.pick = found;
    results.interrupted = live.lab.stopped() || results.pick.is_none();
    // Each point named for its configuration (its key starts with the knobs' values).
    results.oversized = oversized(live, knobs);
    results.measured = measured
        .samples
        .iter()
        .map(|(values, samples)| ConfigRow {
            values: values.clone(),
            label: spec::label(knobs, values),
            level: crate::search::level_of(samples, p99_bound_us),
            samples: samples.clone(),
        })
        .collect();
    Ok(results)
}

impl TuneResults {
    /// The results of a run not yet measured: what it was asked and where it runs.
    fn new(config: &TuneConfig, machine: &Machine, cores: f64, whole_cores: u32) -> TuneResults {
        let args = &config.args;
        TuneResults {
            version: 1,
            command: args.cmd.clone(),
            url: args.url.clone(),
            knobs: config.knobs.clone(),
            concurrency: config.concurrency,
            rate: args.rate,
            plan: args.plan.clone(),
            urls: config.workload.urls.clone(),
            p99_bound_ms: config.p99_bound_ms,
            duration_s: config.setup.duration,
            machine: machine.clone(),
            started: utc_timestamp(),
            wall_s: 0.0,
            interrupted: false,
            pick: None,
            passes: 0,
            measured: Vec::new(),
            points_measured: 0,
            grid_points: coordinate::grid_points(&config.knobs),
            profile: None,
            rules: Vec::new(),
            verify: None,
            budget: BudgetApplied {
                cpus: config.setup.cpus,
                cpuset: config.setup.cpuset.clone().map(crate::lab::budget::CpuList),
                cores,
                whole_cores,
            },
            replicas: args.replicas,
            oversized: Vec::new(),
            model: None,
            predictions: Vec::new(),
        }
    }
}

/// The points the budget held back, each named for its configuration (its key starts with the
/// knobs' values), one line a configuration and load: its repetitions say the same.
fn oversized(live: &ServerProbes, knobs: &[Knob]) -> Vec<crate::lab::budget::Oversized> {
    let labelled: Vec<PointResult> = live
        .log
        .iter()
        .map(|(key, p)| PointResult {
            arch: spec::label(knobs, &Run::values_of_key(key)),
            ..p.clone()
        })
        .collect();
    let points: Vec<&PointResult> = labelled.iter().collect();
    let mut oversized = crate::lab::budget::oversized(&points, |p| p.arch.clone());
    oversized.sort_by(|a, b| (&a.series, a.concurrency).cmp(&(&b.series, b.concurrency)));
    oversized.dedup_by(|a, b| (&a.series, a.concurrency) == (&b.series, b.concurrency));
    oversized
}

/// `results.json`, `tune.md`, `tune.svg` and `report.html` in the run's directory, and the
/// results on stdout (text, or JSON with `--json`).
fn write(config: &TuneConfig, results: &TuneResults) -> anyhow::Result<()> {
    let out = &config.out;
    output::write_all(out, results)?;
    if config.args.search.json {
        crate::print_stdout(&format!("{}\n", serde_json::to_string_pretty(results)?))?;
    } else {
        crate::print_stdout(&output::text(results))?;
        crate::print_stdout(&format!(
            "\nWrote results.json, tune.md, tune.svg and report.html to {}\n",
            out.display()
        ))?;
    }
    Ok(())
}

/// `every configuration failed: workers=1: every response was 404 (...)` when no configuration
/// met the bound and the requests of every one measured failed.
fn every_configuration_failed(
    results: &TuneResults,
    causes: &std::collections::BTreeMap<Vec<u32>, String>,
) -> Option<String> {
    let met = results.measured.iter().any(|row| row.level.rps.0 > 0.0);
    if met || results.measured.is_empty() {
        return None;
    }
    if !results
        .measured
        .iter()
        .all(|row| causes.contains_key(&row.values))
    {
        return None;
    }
    let first = results.measured.first()?;
    Some(format!(
        "every configuration failed: {}: {}",
        first.label,
        causes.get(&first.values)?
    ))
}

/// The arguments of the interrupted run in `dir` (its output directory `dir`), and the wall
/// time it had run.
fn resume_from(dir: &std::path::Path) -> anyhow::Result<(TuneArgs, f64)> {
    let text = std::fs::read_to_string(dir.join(ARGS_FILE)).map_err(|_| {
        usage(format!(
            "--resume {}: no tune run there (no {ARGS_FILE})",
            dir.display()
        ))
    })?;
    let mut args: TuneArgs = serde_json::from_str(&text)
        .map_err(|e| usage(format!("--resume {}: {ARGS_FILE}: {e}", dir.display())))?;
    args.out = Some(dir.to_path_buf());
    args.resume = Some(dir.to_path_buf());
    let previous_wall_s = std::fs::read_to_string(dir.join("results.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["wall_s"].as_f64())
        .unwrap_or(0.0);
    Ok((args, previous_wall_s))
}

/// `--predict`: the profile at one connection first (the model's CPU, wait and hand-off), then
/// the model's search ([`predict::search`]); its model and predictions into `results`. Where
/// no model could be fitted (the profile failed), the coordinate search answers instead.
fn predicted(
    config: &TuneConfig,
    live: &mut ServerProbes,
    start: &[u32],
    budget: f64,
    measured: &mut Measured,
    results: &mut TuneResults,
) -> Option<coordinate::Found> {
    let bound = config.p99_bound_ms * 1000.0;
    let fallback = |live: &mut ServerProbes, measured: &mut Measured| {
        eprintln!("tune: no model could be fitted; the coordinate search answers");
        coordinate::search(&config.knobs, start, bound, measured, live)
    };
    let Some((profile, sample)) = profile(live, start, budget) else {
        return (!live.lab.stopped()).then(|| fallback(live, measured))?;
    };
    let one = predict::OnePoint {
        values: start.to_vec(),
        sample,
        wait_us: profile.wait_ms * 1000.0,
    };
    results.profile = Some(profile);
    let setting = predict::Setting {
        connections: config.concurrency,
        machine_cores: f64::from(live.lab.cores()),
        budget_cores: budget,
        p99_bound_us: bound,
    };
    match predict::search(&config.knobs, start, setting, &one, measured, live) {
        Some(decided) => {
            results.model = Some(decided.model);
            results.predictions = decided.predictions;
            Some(decided.found)
        }
        None if live.lab.stopped() => None,
        None => fallback(live, measured),
    }
}

/// The server at one connection, in a closed loop (a rate at one connection would queue its
/// requests behind each other): its CPU per request and its mean latency, which less the CPU
/// and the run-queue waits is its wait ([`OneConnection`]); Goetz's pool, `cores x (1 + W/C)`;
/// with the point's sample.
fn profile(live: &mut ServerProbes, at: &[u32], cores: f64) -> Option<(Profile, Sample)> {
    let concurrency = live.concurrency;
    live.concurrency = 1;
    live.closed = true;
    let sample = live.measure(&Run::new(at, 0));
    live.concurrency = concurrency;
    live.closed = false;
    let sample = sample?;
    // No pool is derived from failed requests.
    if !sample.ok || live.last.as_ref()?.failure_cause().is_some() {
        return None;
    }
    let figures = &live.last.as_ref()?.figures;
    let server = &figures.server;
    let one = OneConnection {
        latency_us: figures.latency_us.mean,
        cpu_us: sample.cpu_us,
        server_runqueue_us: server.runqueue_wait_s * 1e6
            / server.answered_at_least(figures.requests) as f64,
        client_runqueue_us: figures.client.wait_s * 1e6 / figures.requests.max(1) as f64,
    };
    if one.cpu_us <= 0.0 || one.latency_us <= 0.0 {
        return None;
    }
    let goetz = (cores * (1.0 + one.wait_us() / one.cpu_us)).round() as u32;
    let profile = Profile {
        values: at.to_vec(),
        cpu_us: one.cpu_us,
        mean_latency_ms: one.latency_us / 1000.0,
        wait_ms: one.wait_us() / 1000.0,
        runqueue_us: one.runqueue_us(),
        goetz: goetz.max(1),
    };
    Some((profile, sample))
}

/// The configurations the rules of thumb name, beside the pick: the server's default,
/// `2n+1` workers (on `workers`, else the first knob; the others at the pick's values), and
/// Goetz's pool as the requests served at once (workers x threads: the last knob at
/// `ceil(goetz / the others)`); each clamped to its range.
pub fn rule_configs(
    knobs: &[Knob],
    pick: &[u32],
    default: Option<&[u32]>,
    goetz: Option<u32>,
    cores: u32,
) -> Vec<(String, Vec<u32>)> {
    let clamp = |v: Vec<u32>| -> Vec<u32> {
        v.iter()
            .zip(knobs)
            .map(|(x, k)| (*x).clamp(k.lo, k.hi))
            .collect()
    };
    let mut out = Vec::new();
    if let Some(d) = default {
        out.push(("default".to_string(), clamp(d.to_vec())));
    }
    let workers = knobs.iter().position(|k| k.name == "workers").unwrap_or(0);
    let mut two_n = pick.to_vec();
    two_n[workers] = 2 * cores + 1;
    out.push(("2n+1".to_string(), clamp(two_n)));
    if let Some(g) = goetz {
        let last = knobs.len() - 1;
        let others: u32 = pick[..last].iter().product::<u32>().max(1);
        let mut v = pick.to_vec();
        v[last] = g.div_ceil(others);
        out.push(("goetz".to_string(), clamp(v)));
    }
    out
}

/// Measures the rules' configurations beside the pick. Then the closest call of "the smallest
/// within 5% of the best": a configuration measured (by the search or for a rule) that beats
/// the pick by more than [`crate::search::knob::WITHIN_BEST`] less
/// [`crate::search::sample::EDGE_FRACTION`] in its runs so far is measured again with the pick,
/// three runs each, and becomes the pick (`adopted_from`) if it still beats it by more than
/// `WITHIN_BEST`. Single runs of Puma's workers=5 threads=8 read 931 req/s beside the pick
/// workers=2 threads=8's 889, 4.7% apart; three runs each of the full grid put them 7% apart.
#[allow(clippy::too_many_arguments)]
fn rules(
    knobs: &[Knob],
    found: &mut coordinate::Found,
    default: Option<&[u32]>,
    profile: Option<&Profile>,
    cores: u32,
    p99_bound_us: f64,
    measured: &mut Measured,
    m: &mut dyn Measure<Run>,
) -> Option<Vec<RuleResult>> {
    use crate::search::knob::WITHIN_BEST;
    use crate::search::{level_of, sample::EDGE_FRACTION};
    let configs = rule_configs(knobs, &found.pick, default, profile.map(|p| p.goetz), cores);
    for (_, values) in &configs {
        measured.level(m, values, 1, p99_bound_us)?;
    }
    let contender = measured
        .samples
        .iter()
        .filter(|(values, _)| **values != found.pick)
        .map(|(values, samples)| (values.clone(), level_of(samples, p99_bound_us).rps.0))
        .filter(|(_, rps)| *rps > found.level.rps.0 * (1.0 + WITHIN_BEST - EDGE_FRACTION))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((values, _)) = contender {
        found.level = measured.level(m, &found.pick, 3, p99_bound_us)?;
        let level = measured.level(m, &values, 3, p99_bound_us)?;
        if level.rps.0 > found.level.rps.0 * (1.0 + WITHIN_BEST) {
            found.adopted_from = Some(
                configs
                    .iter()
                    .find(|(_, v)| *v == values)
                    .map_or_else(|| "search".to_string(), |(rule, _)| rule.clone()),
            );
            found.pick = values;
            found.level = level;
        }
    }
    let levels: Vec<Level> = configs
        .iter()
        .map(|(_, values)| measured.known(values, p99_bound_us))
        .collect();
    let best = found.level.rps.0;
    let mut out = Vec::new();
    for ((rule, values), level) in configs.into_iter().zip(levels) {
        let missed_because = measured
            .samples
            .get(&values)
            .and_then(|samples| crate::search::Miss::of(samples, p99_bound_us))
            .map(|miss| miss.text(p99_bound_us));
        out.push(RuleResult {
            missed_because,
            rule,
            values,
            meets_bound: level.rps.0 > 0.0,
            rps_loss: if best > 0.0 {
                (best - level.rps.0) / best
            } else {
                0.0
            },
            level,
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One knob, `procs` over `range`.
    fn procs(range: &str) -> Vec<Knob> {
        spec::knobs_of(
            "srv {knob:procs} {port}",
            None,
            None,
            &[format!("procs={range}")],
        )
        .unwrap()
    }

    /// A sample of `rps`, a p99 of 1 ms, 100 us of CPU a request, one thread and process.
    fn flat_sample(rps: f64) -> Sample {
        Sample {
            rps,
            p99_us: 1000.0,
            p50_us: 0.0,
            p99_lower_bound: false,
            ok: true,
            cpu_us: 100.0,
            rss_kb: 1000,
            threads: 1,
            processes: 1,
            limit: None,
            bound_rps: 0.0,
            client_cpu_us: 0.0,
        }
    }

    /// Throughput by configuration, every run the same.
    struct Flat(fn(u32) -> f64);

    impl Measure<Run> for Flat {
        fn measure(&mut self, run: &Run) -> Option<Sample> {
            let values = &run.values[..];
            Some(flat_sample((self.0)(values[0])))
        }
    }

    /// One knob, `procs` in 1..8, the search's pick 2 measured once (after `searched`, each
    /// measured once beside it by the search), then the rules measured beside it on 2 cores
    /// with a 1 s p99 bound: the pick after the rules, what was measured, and the rules'
    /// results.
    fn rules_beside_two(
        m: &mut dyn Measure<Run>,
        searched: &[u32],
    ) -> (coordinate::Found, Measured, Vec<RuleResult>) {
        let knobs = procs("1..8");
        let mut measured = Measured::default();
        for &procs in searched {
            measured.level(m, &[procs], 1, 1e6).unwrap();
        }
        let level = measured.level(m, &[2], 1, 1e6).unwrap();
        let mut found = coordinate::Found {
            pick: vec![2],
            level,
            path: Vec::new(),
            passes: 1,
            adopted_from: None,
        };
        let out = rules(&knobs, &mut found, None, None, 2, 1e6, &mut measured, m).unwrap();
        (found, measured, out)
    }

    #[test]
    fn a_rule_clearly_better_than_the_pick_is_measured_again_and_becomes_it() {
        let (found, measured, measured_rules) =
            rules_beside_two(&mut Flat(|w| if w == 5 { 2000.0 } else { 1000.0 }), &[]);
        assert_eq!(found.pick, [5]);
        assert_eq!(found.adopted_from.as_deref(), Some("2n+1"));
        // Both were measured three times before the pick changed; the rule now loses nothing.
        assert_eq!(measured.samples[&vec![2]].len(), 3);
        assert_eq!(measured.samples[&vec![5]].len(), 3);
        assert!(measured_rules[0].rps_loss.abs() < 1e-9);
        // Within 5%: the search's pick stands.
        let (found, _, _) =
            rules_beside_two(&mut Flat(|w| if w == 5 { 1040.0 } else { 1000.0 }), &[]);
        assert_eq!((found.pick, found.adopted_from), (vec![2], None));
    }

    /// A configuration the search measured 6% over its pick in one run is measured again,
    /// three runs each, and becomes the pick; one 4% over is measured again too, but within
    /// 5% the smaller pick stands.
    #[test]
    fn a_close_call_against_the_pick_is_measured_again_and_decided_on_three_runs() {
        struct Runs(fn(u32, u32) -> f64);
        impl Measure<Run> for Runs {
            fn measure(&mut self, run: &Run) -> Option<Sample> {
                let (values, rep) = (&run.values[..], run.rep);
                let mut s = Flat(|_| 0.0).measure(&Run::new(values, rep))?;
                s.rps = (self.0)(values[0], rep);
                Some(s)
            }
        }
        // The search measured 4 once beside its pick, 2.
        let run = |m: &mut dyn Measure<Run>| {
            let (found, measured, _) = rules_beside_two(m, &[4]);
            (found, measured)
        };
        // 4 reads 4.7% over in its first run, 8% over in the next two.
        let (found, measured) = run(&mut Runs(|w, rep| match (w, rep) {
            (4, 0) => 1047.0,
            (4, _) => 1080.0,
            _ => 1000.0,
        }));
        assert_eq!(found.pick, [4]);
        assert_eq!(found.adopted_from.as_deref(), Some("search"));
        assert_eq!(measured.samples[&vec![2]].len(), 3);
        assert_eq!(measured.samples[&vec![4]].len(), 3);
        // 4% over in every run: measured again, and the pick stands.
        let (found, measured) = run(&mut Runs(|w, _| if w == 4 { 1040.0 } else { 1000.0 }));
        assert_eq!((found.pick, found.adopted_from), (vec![2], None));
        assert_eq!(measured.samples[&vec![4]].len(), 3);
        // 2% over: no close call, nothing measured again.
        let (found, measured) = run(&mut Runs(|w, _| if w == 4 { 1020.0 } else { 1000.0 }));
        assert_eq!(found.pick, [2]);
        assert_eq!(measured.samples[&vec![4]].len(), 1);
    }

    /// A rule's configuration that leaves requests unanswered misses the bound, and says so.
    #[test]
    fn a_rule_that_misses_the_bound_says_why() {
        struct Starved;
        impl Measure<Run> for Starved {
            fn measure(&mut self, run: &Run) -> Option<Sample> {
                let values = &run.values[..];
                Some(Sample {
                    p99_lower_bound: values[0] == 5,
                    ..flat_sample(500.0)
                })
            }
        }
        let (_, _, out) = rules_beside_two(&mut Starved, &[]);
        assert_eq!(out[0].rule, "2n+1");
        assert!(!out[0].meets_bound);
        assert_eq!(
            out[0].missed_because.as_deref(),
            Some("requests left unanswered: its p99 is only a lower bound")
        );
    }

    #[test]
    fn the_rules_name_their_configurations() {
        let knobs = spec::knobs_of(
            "srv -w {workers} -t {threads} {port}",
            Some("1..8"),
            Some("1..32"),
            &[],
        )
        .unwrap();
        let rules = rule_configs(&knobs, &[2, 8], Some(&[2, 3]), Some(44), 2);
        assert_eq!(
            rules,
            [
                ("default".to_string(), vec![2, 3]),
                ("2n+1".to_string(), vec![5, 8]),
                ("goetz".to_string(), vec![2, 22]),
            ]
        );
        // Clamped to the ranges; one knob takes Goetz whole.
        let one = procs("1..4");
        assert_eq!(
            rule_configs(&one, &[2], None, Some(9), 2),
            [
                ("2n+1".to_string(), vec![4]),
                ("goetz".to_string(), vec![4])
            ]
        );
    }
}
