//! `sweetspot limiters`: where the adaptive concurrency limiters production runs (Netflix's
//! Vegas, Gradient2 and AIMD, Envoy's gradient controller, Vector's ARC) settle against the
//! sweet spot measured in the same run. Per [`scenario`]: the server is started, a closed-loop
//! sweep over N finds the knee ([`judge`]), then each controller ([`controllers`]) gates an
//! open-loop load ([`gate`]) at a multiple of the measured capacity, beside static limits
//! around the knee; [`output`] writes the verdicts, the table, L(t) and goodput(t).

pub mod controllers;
pub mod gate;
pub mod judge;
pub mod output;
pub mod scenario;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use crate::arch::Arch;
use crate::lab::server::{free_port, Launch, ServerProcess};
use crate::load::{self, LoadConfig, Mode, Target};
use crate::usage;
use controllers::{Kind, Overrides};
use gate::{GateCounts, GatePlan, Phase};
use judge::{Knee, Level, PhaseVerdict};
use scenario::Scenario;

/// Flags of `sweetspot limiters`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Examples:\n  \
sweetspot limiters                      # the pool scenario, every default controller\n  \
sweetspot limiters all -d 30s           # every scenario\n  \
sweetspot limiters wait-step --controllers gradient2,envoy\n  \
sweetspot limiters pool --cmd 'my-server --port {port}' --url 'http://127.0.0.1:{port}/api'\n\n\
Each scenario: a closed-loop sweep over N finds the knee (the smallest N within 5% of the \
best throughput; that best is the capacity); then every controller gates Poisson arrivals at \
the scenario's multiple of the capacity (or -R): a request goes while fewer than the limit are \
in flight, else it is shed at once. Static limits at half the knee, the knee and twice it run \
beside. Each controller's limit is judged over the second half of each phase: where it \
settled (median ± half its middle 80%), how long it took, goodput and p99 against the knee's.")]
pub struct LimitersArgs {
    /// Scenarios to run, or `all` [default: pool]; `--list` shows them.
    pub scenarios: Vec<String>,
    /// List the scenarios and controllers, and exit.
    #[arg(long)]
    pub list: bool,
    /// Controllers, comma-separated [default: the scenario's, else vegas, gradient2,
    /// windowed-gradient2, aimd, envoy, vector].
    #[arg(long, value_delimiter = ',')]
    pub controllers: Vec<String>,
    /// Length of each gated run.
    #[arg(short = 'd', long, default_value = "20s")]
    pub duration: String,
    /// Offered arrivals per second [default: the scenario's multiple of the capacity].
    #[arg(short = 'R', long)]
    pub rate: Option<f64>,
    /// An admitted request unanswered this long is a timeout (a drop) [default: the scenario's,
    /// else 1s].
    #[arg(long)]
    pub timeout: Option<String>,
    /// Length of each level of the knee's sweep.
    #[arg(long, default_value = "1s")]
    pub knee_step: String,
    /// Our server's architecture [default: the scenario's].
    #[arg(long)]
    pub arch: Option<Arch>,
    /// Our server's workers [default: the scenario's].
    #[arg(long)]
    pub workers: Option<u32>,
    /// Your own server instead of ours: a shell command with {port}.
    #[arg(long, requires = "url")]
    pub cmd: Option<String>,
    /// With --cmd: http://127.0.0.1:{port}/PATH; {wait_ms} in it takes the scenario's wait.
    #[arg(long, requires = "cmd")]
    pub url: Option<String>,
    /// Output directory [default: results/limiters-<timestamp>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write results.json here (`-` for stdout).
    #[arg(long)]
    pub json: Option<String>,
    /// Seed of the arrivals and of the controllers' jitter.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Judge a finished run again from its DIR/results.json (what was measured is kept; the
    /// verdicts, the table and the report are written anew) and exit.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
}

/// The server a run measures.
#[derive(Debug, Clone)]
enum Server {
    Ours {
        arch: Option<Arch>,
        workers: Option<u32>,
    },
    External {
        command: String,
        /// The path and query, `{wait_ms}` still in it.
        path: String,
    },
}

/// The validated command line.
#[derive(Debug, Clone)]
pub struct LimitersPlan {
    scenarios: Vec<&'static Scenario>,
    controllers: Option<Vec<Kind>>,
    duration: Duration,
    rate: Option<f64>,
    timeout: Option<Duration>,
    knee_step: Duration,
    server: Server,
    out: PathBuf,
    json: Option<String>,
    seed: u64,
}

fn duration_flag(flag: &str, text: &str) -> anyhow::Result<Duration> {
    let d = crate::units::parse_duration(text).map_err(|e| usage(format!("{flag}: {e}")))?;
    if d.is_zero() {
        bail!(usage(format!("{flag}: must be more than 0")));
    }
    Ok(d)
}

impl LimitersPlan {
    pub fn from_args(args: &LimitersArgs) -> anyhow::Result<LimitersPlan> {
        let scenarios = scenarios_of(&args.scenarios)?;
        let controllers = controllers_of(&args.controllers)?;
        if let Some(rate) = args.rate {
            if !(rate > 0.0 && rate.is_finite() && rate <= 1e6) {
                bail!(usage(format!(
                    "-R {rate}: the offered rate must be more than 0 and at most 1000000 a second"
                )));
            }
        }
        let duration = duration_flag("-d", &args.duration)?;
        let knee_step = duration_flag("--knee-step", &args.knee_step)?;
        let timeout = args
            .timeout
            .as_deref()
            .map(|t| duration_flag("--timeout", t))
            .transpose()?;
        let server = match (&args.cmd, &args.url) {
            (Some(cmd), Some(url)) => external(cmd, url, &scenarios, args)?,
            _ => Server::Ours {
                arch: args.arch,
                workers: args.workers,
            },
        };
        if let Some(w) = args.workers {
            if w == 0 || w as usize > crate::arch::listen::MAX_WORKERS {
                bail!(usage(format!(
                    "--workers {w}: must be 1 to {}",
                    crate::arch::listen::MAX_WORKERS
                )));
            }
        }
        if let Some(json) = &args.json {
            crate::render::json::check_destination("--json", json)?;
        }
        Ok(LimitersPlan {
            scenarios,
            controllers,
            duration,
            rate: args.rate,
            timeout,
            knee_step,
            server,
            out: args
                .out
                .clone()
                .unwrap_or_else(|| crate::lab::results::default_out_dir("limiters")),
            json: args.json.clone(),
            seed: args.seed,
        })
    }
}

/// The scenarios asked for (`all` for every one; none: `pool`).
fn scenarios_of(names: &[String]) -> anyhow::Result<Vec<&'static Scenario>> {
    let mut scenarios = Vec::new();
    let asked: Vec<&str> = if names.is_empty() {
        vec!["pool"]
    } else {
        names.iter().map(String::as_str).collect()
    };
    for name in asked {
        if name == "all" {
            scenarios.extend(scenario::SCENARIOS.iter());
            continue;
        }
        let s = scenario::find(name).ok_or_else(|| {
            usage(format!(
                "unknown scenario {name:?} (the scenarios: {}, or all)",
                scenario::names()
            ))
        })?;
        scenarios.push(s);
    }
    Ok(scenarios)
}

/// `--controllers`, each once (none: each scenario's own).
fn controllers_of(names: &[String]) -> anyhow::Result<Option<Vec<Kind>>> {
    if names.is_empty() {
        return Ok(None);
    }
    let mut kinds = Vec::new();
    for name in names {
        let k = Kind::parse(name.trim()).ok_or_else(|| {
            usage(format!(
                "--controllers: unknown controller {name:?} (the controllers: {})",
                Kind::names()
            ))
        })?;
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    Ok(Some(kinds))
}

/// Checks `--cmd` and `--url` against what the scenarios need.
fn external(
    cmd: &str,
    url: &str,
    scenarios: &[&'static Scenario],
    args: &LimitersArgs,
) -> anyhow::Result<Server> {
    if !cmd.contains("{port}") {
        bail!(usage("--cmd: the command must take the port as {port}"));
    }
    if args.arch.is_some() || args.workers.is_some() {
        bail!(usage(
            "--arch and --workers are our server's: not with --cmd"
        ));
    }
    let path = url
        .strip_prefix("http://127.0.0.1:{port}")
        .filter(|p| p.is_empty() || p.starts_with('/'))
        .ok_or_else(|| {
            usage(format!(
                "--url {url:?}: must be http://127.0.0.1:{{port}}/PATH"
            ))
        })?;
    let path = if path.is_empty() { "/" } else { path };
    if let Some(s) = scenarios.iter().find(|s| s.needs_wait()) {
        if !path.contains("{wait_ms}") {
            bail!(usage(format!(
                "scenario {}: it sets the backend's wait, so --url must take it as {{wait_ms}}",
                s.name
            )));
        }
    }
    Ok(Server::External {
        command: cmd.to_string(),
        path: path.to_string(),
    })
}

/// One controller's gated run and its judgement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ControllerRun {
    /// `vegas`, ..., or `static-8`.
    pub name: String,
    pub kind: Kind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub static_limit: Option<usize>,
    pub counts: GateCounts,
    pub phases: Vec<PhaseVerdict>,
    pub shed_share: f64,
    /// The lab beside the server over the run: the gate's CPU (this process), the server's,
    /// and the cores the whole machine kept busy.
    pub lab: LabShare,
    pub verdict: String,
}

/// What the lab itself did during a gated run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LabShare {
    pub client_cpu_s: f64,
    pub server_cpu_s: f64,
    pub machine_busy_cores: f64,
    /// Set when the gate, not the server, may have set the figures.
    #[serde(default)]
    pub lab_bound: bool,
}

/// The knee's sweep at one wait.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KneeSweep {
    pub path: String,
    pub levels: Vec<Level>,
    pub knee: Option<Knee>,
}

/// The knee of the sweep made at `path`, if it found one.
fn knee_at(knees: &[KneeSweep], path: &str) -> Option<Knee> {
    knees.iter().find(|k| k.path == path).and_then(|k| k.knee)
}

/// One scenario, measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioResult {
    pub name: String,
    pub about: String,
    pub server: String,
    pub rate: f64,
    pub timeout_ms: f64,
    pub duration_s: f64,
    pub knees: Vec<KneeSweep>,
    pub best_static: Option<String>,
    pub runs: Vec<ControllerRun>,
}

/// `results.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LimitersResults {
    pub started: String,
    pub machine: crate::lab::results::Machine,
    pub scenarios: Vec<ScenarioResult>,
    #[serde(default)]
    pub interrupted: bool,
}

pub fn run_limiters(args: LimitersArgs) -> anyhow::Result<()> {
    if args.list {
        return Ok(crate::print_stdout(&output::list())?);
    }
    if let Some(dir) = &args.report {
        return report(dir);
    }
    let plan = LimitersPlan::from_args(&args)?;
    crate::os::check_file_limit(1100, "limiters")?;
    let lab = crate::lab::Lab::open("limiters")?;
    let stop = lab.stop_flag();
    let mut results = LimitersResults {
        started: crate::lab::results::utc_timestamp(),
        // Its loads (the knee's sweep, the gate's arrivals) run at the server's priority.
        machine: crate::lab::results::Machine {
            generator_nice: 0,
            ..lab.machine.clone()
        },
        scenarios: Vec::new(),
        interrupted: false,
    };
    for s in &plan.scenarios {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let measured =
            run_scenario(&plan, s, &lab).with_context(|| format!("scenario {}", s.name))?;
        results.scenarios.push(measured);
        output::write(&plan.out, &results)?;
    }
    results.interrupted = stop.load(Ordering::Relaxed);
    output::write(&plan.out, &results)?;
    let summary = output::summary(&results, &plan.out);
    crate::render::json::write_results(Some(&summary), plan.json.as_deref(), &results)
}

/// `--report DIR`: every run of DIR/results.json judged again, the outputs written anew.
fn report(dir: &std::path::Path) -> anyhow::Result<()> {
    let path = dir.join("results.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| usage(format!("--report: cannot read {}: {e}", path.display())))?;
    let mut results: LimitersResults = serde_json::from_str(&text).map_err(|e| {
        usage(format!(
            "--report: {} is not a limiters run: {e}",
            path.display()
        ))
    })?;
    for s in &mut results.scenarios {
        let runs = std::mem::take(&mut s.runs);
        let knees = &s.knees;
        s.runs = runs
            .into_iter()
            .map(|r| {
                let limit = r.static_limit.unwrap_or(0);
                judge_run(r.kind, limit, r.counts, r.lab, &|path| knee_at(knees, path))
            })
            .collect();
        s.best_static = output::best_static(&s.runs).map(|r| r.name.clone());
    }
    output::write(dir, &results)?;
    Ok(crate::print_stdout(&output::summary(&results, dir))?)
}

/// Starts the scenario's server and keeps it for the whole scenario.
fn start_server(
    plan: &LimitersPlan,
    s: &Scenario,
    lab: &crate::lab::Lab,
) -> anyhow::Result<(ServerProcess, String)> {
    let (launch, about) = match &plan.server {
        Server::Ours { arch, workers } => {
            let arch = arch.unwrap_or(s.arch);
            let workers = workers.unwrap_or(s.workers);
            let launch = Launch::Ours {
                binary: lab.options.server_binary.clone(),
                arch,
                extra_args: Vec::new(),
                workers: Some(workers),
                store: None,
                protocol: "http",
                pin_with_taskset: false,
            };
            (launch, format!("{} with {workers} workers", arch.name()))
        }
        Server::External { command, .. } => {
            let port = free_port()?;
            let command = command.replace("{port}", &port.to_string());
            let launch = Launch::External {
                command: command.clone(),
                host: "127.0.0.1".into(),
                port,
            };
            (launch, command)
        }
    };
    let server = ServerProcess::start(&launch, Duration::from_secs(20))?;
    Ok((server, about))
}

/// The request at `multiple` times the scenario's wait.
fn path_at(plan: &LimitersPlan, s: &Scenario, multiple: f64) -> String {
    let wait_ms = (s.wait_ms as f64 * multiple).round() as u64;
    match &plan.server {
        Server::Ours { .. } => s.our_path(wait_ms),
        Server::External { path, .. } => path.replace("{wait_ms}", &wait_ms.to_string()),
    }
}

/// Concurrency levels of the knee's sweep, rising by about half each.
const KNEE_LEVELS: &[usize] = &[1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256];

fn knee_sweep(
    base: &str,
    path: &str,
    step: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<KneeSweep> {
    let target = Target::parse(&format!("{base}{path}"))?;
    let mut levels = Vec::new();
    for &n in KNEE_LEVELS {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let mut config = LoadConfig::new(target.clone(), n, Mode::Closed { duration: step });
        config.threads = 1;
        config.settle = Some(Duration::from_millis(500));
        let report = load::run(&config, Some(stop))?;
        levels.push(Level {
            concurrency: n,
            rps: report.rps,
            p50_us: report.latency_us.p50,
            p99_us: report.latency_us.p99,
        });
        eprintln!(
            "  knee sweep {path}: N={n:<4} {:>8.0} req/s  p99 {}",
            report.rps,
            crate::render::numbers::duration_us(report.latency_us.p99)
        );
        if judge::past_the_knee(&levels) {
            break;
        }
    }
    let knee = judge::knee(&levels);
    Ok(KneeSweep {
        path: path.to_string(),
        levels,
        knee,
    })
}

fn run_scenario(
    plan: &LimitersPlan,
    s: &Scenario,
    lab: &crate::lab::Lab,
) -> anyhow::Result<ScenarioResult> {
    eprintln!("scenario {}: {}", s.name, s.about);
    let (mut server, about) = start_server(plan, s, lab)?;
    let result = measure_scenario(plan, s, &server, about, lab.stop_flag());
    server.stop();
    result
}

fn measure_scenario(
    plan: &LimitersPlan,
    s: &Scenario,
    server: &ServerProcess,
    about: String,
    stop: &AtomicBool,
) -> anyhow::Result<ScenarioResult> {
    let port = server.ready.port;
    let base = format!("http://127.0.0.1:{port}");
    let mut knees = Vec::new();
    for m in s.wait_multiples() {
        knees.push(knee_sweep(
            &base,
            &path_at(plan, s, m),
            plan.knee_step,
            stop,
        )?);
    }
    let mut result = ScenarioResult {
        name: s.name.to_string(),
        about: format!("{} ({about})", s.about),
        server: about,
        rate: 0.0,
        timeout_ms: 0.0,
        duration_s: 0.0,
        knees,
        best_static: None,
        runs: Vec::new(),
    };
    let Some(base_knee) = result.knees[0].knee else {
        if stop.load(Ordering::Relaxed) {
            return Ok(result);
        }
        bail!("the knee's sweep measured no throughput: the server answered nothing");
    };
    let gate_plan = gate_plan_for(plan, s, port, base_knee)?;
    result.rate = gate_plan.rate;
    result.timeout_ms = gate_plan.timeout.as_secs_f64() * 1000.0;
    result.duration_s = gate_plan.duration.as_secs_f64();
    let todo = runs_to_make(plan, s, base_knee.concurrency);
    let total = todo.len();
    for (i, (kind, limit)) in todo.into_iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let overrides = Overrides {
            min_limit: s.min_limit,
        };
        let controller = controllers::build(kind, limit, overrides, plan.seed);
        let before = LabReading::now(server.pgid());
        let counts = gate::run(&gate_plan, controller, stop)?;
        let lab = before.share(server.pgid(), &counts);
        let knees = &result.knees;
        let run = judge_run(kind, limit, counts, lab, &|path| knee_at(knees, path));
        eprintln!(
            "  [{}/{total}] {:<20} {}",
            i + 1,
            run.name,
            output::brief(&run)
        );
        result.runs.push(run);
        // Let what the server still holds drain before the next run.
        std::thread::sleep(Duration::from_millis(100));
    }
    result.best_static = output::best_static(&result.runs).map(|r| r.name.clone());
    Ok(result)
}

/// The gated runs' plan: the rate (the scenario's multiple of the capacity, or `-R`), the
/// timeout, the length and the phases of the scenario.
fn gate_plan_for(
    plan: &LimitersPlan,
    s: &Scenario,
    port: u16,
    knee: Knee,
) -> anyhow::Result<GatePlan> {
    let timeout = match (s.timeout_waits, plan.timeout) {
        (Some(waits), _) => Duration::from_secs_f64(waits * s.wait_ms as f64 / 1000.0),
        (None, Some(t)) => t,
        (None, None) => Duration::from_secs(1),
    };
    let duration = plan.duration.mul_f64(s.length);
    let mut phases = vec![Phase {
        from: Duration::ZERO,
        path: path_at(plan, s, 1.0),
    }];
    for &(at, m) in s.steps {
        phases.push(Phase {
            from: duration.mul_f64(at),
            path: path_at(plan, s, m),
        });
    }
    Ok(GatePlan {
        addr: format!("127.0.0.1:{port}").parse()?,
        host: format!("127.0.0.1:{port}"),
        phases,
        rate: plan.rate.unwrap_or(s.load * knee.capacity_rps),
        duration,
        timeout,
        seed: plan.seed,
    })
}

/// The runs of a scenario: static limits at half the knee, the knee and twice it, then the
/// controllers asked for (else the scenario's, else the default ones).
fn runs_to_make(plan: &LimitersPlan, s: &Scenario, knee: usize) -> Vec<(Kind, usize)> {
    let mut statics: Vec<usize> = vec![(knee / 2).max(1), knee, 2 * knee];
    statics.dedup();
    let kinds = plan
        .controllers
        .clone()
        .unwrap_or_else(|| match s.controllers {
            [] => Kind::DEFAULT.to_vec(),
            some => some.to_vec(),
        });
    let mut todo: Vec<(Kind, usize)> = statics.iter().map(|&l| (Kind::Static, l)).collect();
    todo.extend(
        kinds
            .iter()
            .filter(|&&k| k != Kind::Static)
            .map(|&k| (k, 0)),
    );
    todo
}

/// The gate is behind when its arrivals come this late on average (us), or when it used this
/// share of a core: then a figure may be the lab's, and the verdict says so.
const LATE_MEAN_US: f64 = 1000.0;
const CLIENT_CORE_SHARE: f64 = 0.8;

/// CPU readings at the start of a gated run.
struct LabReading {
    client_s: f64,
    server_s: f64,
    machine: Option<(u64, u64)>,
    at: std::time::Instant,
}

impl LabReading {
    fn now(pgid: i32) -> LabReading {
        LabReading {
            client_s: crate::lab::probe::own_cpu_s(),
            server_s: crate::lab::probe::group_cpu(pgid).total_s(),
            machine: crate::lab::probe::machine_cpu(),
            at: std::time::Instant::now(),
        }
    }

    fn share(&self, pgid: i32, counts: &GateCounts) -> LabShare {
        let client_cpu_s = crate::lab::probe::own_cpu_s() - self.client_s;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let machine_busy_cores = match (self.machine, crate::lab::probe::machine_cpu()) {
            (Some(a), Some(b)) => crate::lab::probe::machine_busy_cores(a, b, cores),
            _ => 0.0,
        };
        let wall = self.at.elapsed().as_secs_f64().max(1e-9);
        LabShare {
            client_cpu_s,
            server_cpu_s: crate::lab::probe::group_cpu(pgid).total_s() - self.server_s,
            machine_busy_cores,
            lab_bound: counts.arrival_late_mean_us > LATE_MEAN_US
                || client_cpu_s / wall > CLIENT_CORE_SHARE,
        }
    }
}

/// One phase of a gated run against the knee of its request: the limit over its second half
/// and when it got there, goodput and latency over that half.
fn phase_verdict(
    p: &gate::PhaseCounts,
    counts: &GateCounts,
    samples: &[(f64, f64)],
    knee_of: &dyn Fn(&str) -> Option<Knee>,
) -> PhaseVerdict {
    let mid = p.from_s + (p.to_s - p.from_s) / 2.0;
    let end = p.to_s.min(counts.duration_s.max(p.from_s));
    let late: Vec<(f64, f64)> = samples
        .iter()
        .filter(|(t, _)| *t > mid && *t <= end)
        .copied()
        .collect();
    let limit = judge::settled(&late);
    let settle_s = limit
        .as_ref()
        .and_then(|l| judge::settle_time(samples, p.from_s, end, l));
    let ok: u64 = counts
        .series
        .iter()
        .filter(|t| t.t_s > mid && t.t_s <= end)
        .map(|t| t.ok as u64)
        .sum();
    let span = end - mid;
    PhaseVerdict {
        from_s: p.from_s,
        to_s: p.to_s,
        path: p.path.clone(),
        knee: knee_of(&p.path),
        limit,
        settle_s,
        goodput_rps: if span > 0.0 { ok as f64 / span } else { 0.0 },
        p50_us: p.latency_us.p50,
        p99_us: p.latency_us.p99,
    }
}

/// Judges one gated run phase by phase.
fn judge_run(
    kind: Kind,
    static_limit: usize,
    counts: GateCounts,
    lab: LabShare,
    knee_of: &dyn Fn(&str) -> Option<Knee>,
) -> ControllerRun {
    let samples: Vec<(f64, f64)> = counts
        .series
        .iter()
        .map(|t| (t.t_s, t.limit as f64))
        .collect();
    let phases: Vec<PhaseVerdict> = counts
        .phases
        .iter()
        .map(|p| phase_verdict(p, &counts, &samples, knee_of))
        .collect();
    let shed_share = if counts.offered > 0 {
        counts.shed as f64 / counts.offered as f64
    } else {
        0.0
    };
    let name = match kind {
        Kind::Static => format!("static-{static_limit}"),
        k => k.name().to_string(),
    };
    let title = match kind {
        Kind::Static => format!("A static limit of {static_limit}"),
        k => k.title().to_string(),
    };
    let mut verdict = phases
        .iter()
        .map(|p| {
            let s = judge::sentence(&title, p, shed_share);
            if phases.len() > 1 {
                format!("[{:.0}-{:.0} s] {s}", p.from_s, p.to_s)
            } else {
                s
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    if lab.lab_bound {
        verdict.push_str(&format!(
            " The gate was behind (arrivals {} late on average, its CPU {:.2} s): these \
             figures are partly the lab's.",
            crate::render::numbers::duration_us(counts.arrival_late_mean_us),
            lab.client_cpu_s
        ));
    }
    ControllerRun {
        name,
        kind,
        static_limit: (kind == Kind::Static).then_some(static_limit),
        counts,
        phases,
        shed_share,
        lab,
        verdict,
    }
}
