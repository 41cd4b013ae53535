//! Measuring one point: start the server ([`super::server`]) in a cgroup made for it where
//! the machine allows ([`super::cgroup`], for its exact CPU), warm up, run the in-process load
//! engine ([`crate::load::run`]) while [`super::probe`] samples the server's process tree, then
//! stop the server and everything it forked and remove the cgroup. A point that cannot be
//! measured (no start, a crash, a port in use, a ready-line timeout) is a failed result with
//! its reason. The stop flag (SIGINT/SIGTERM) ends the load run early: that point is dropped.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::cgroup::{self, BudgetCgroup, CpuMeter, CpuMethod, ServerCgroup};
use super::plan::{LoadMode, PointPlan, PointSpec, TargetSpec};
use super::probe::TreeSampler;
use super::results::{
    ClientUsage, HandshakeFigures, Machine, PointLatency, PointResult, RunFigures, RunMeasurement,
    ServerUsage, StreamCap,
};
use super::server::{free_port, Launch, ReadyLine, ServerProcess};
use super::stats::{fold_repetitions, generator_saturated, mark_point};
use crate::arch::Protocol;
use crate::load::LatencyKey;
use crate::load::{self, LoadConfig, LoadReport, Mode, Target};

/// What measuring needs beyond the point itself.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// The `sweetspot` binary that serves our architectures.
    pub server_binary: PathBuf,
    /// Set by a signal handler: finish cleanly as soon as possible.
    pub stop: Arc<AtomicBool>,
    /// A directory for scratch files (`{tmp}` in `store`, the peers' sources).
    pub scratch_dir: PathBuf,
}

impl LabOptions {
    /// This binary as the server of our architectures, checked; the stop flag; a scratch
    /// directory named for `command` and this process, made now. The process becomes the
    /// subreaper of what its servers fork, so nothing escapes a stop.
    pub fn here(command: &str, stop: Arc<AtomicBool>) -> anyhow::Result<LabOptions> {
        super::server::become_subreaper();
        let options = LabOptions {
            server_binary: super::server::this_binary()?,
            stop,
            scratch_dir: std::env::temp_dir()
                .join(format!("sweetspot-{command}-{}", std::process::id())),
        };
        super::server::check_binary(&options.server_binary)?;
        std::fs::create_dir_all(&options.scratch_dir)
            .with_context(|| format!("creating {}", options.scratch_dir.display()))?;
        Ok(options)
    }
}

/// How the server and the generator are pinned to CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pinning {
    None,
    /// Server under `taskset -c 0`, generator threads on CPU 1.
    Taskset,
    /// Server's tasks pinned after it is ready (no taskset installed).
    Affinity,
}

/// Runs every repetition of a point; `None` when interrupted before the point finished.
fn run_point(
    plan: &PointPlan,
    pinning: Pinning,
    machine: &Machine,
    options: &LabOptions,
) -> Option<PointResult> {
    let (point, setup) = (&plan.point, &plan.setup);
    let mut result = PointResult {
        arch: point.target.name().to_string(),
        workers: point.workers,
        workload: point.workload.name.clone(),
        concurrency: point.concurrency,
        streams: point.streams,
        target: match point.target {
            TargetSpec::Ours { .. } => "sweetspot".into(),
            TargetSpec::External(_) => "external".into(),
        },
        ..Default::default()
    };
    let mut runs = Vec::new();
    for _ in 0..setup.repetitions {
        match run_once(plan, pinning, options) {
            Ok(Some((run, reported_workers, notes))) => {
                for note in notes {
                    if !result.warnings.contains(&note) {
                        result.warnings.push(note);
                    }
                }
                // A pool size is part of a series' name only where there is a pool (a
                // single-threaded or per-connection server reports a meaningless 1 or 0).
                let pooled =
                    matches!(&point.target, TargetSpec::Ours { arch, .. } if arch.pooled());
                if reported_workers.is_some() && pooled {
                    result.workers = reported_workers;
                }
                runs.push(run);
            }
            Ok(None) => return None,
            Err(e) => {
                if options.stop.load(Ordering::SeqCst) {
                    return None;
                }
                result.ok = false;
                result.failure = Some(format!("{e:#}"));
                return Some(result);
            }
        }
    }
    let (run, spread) = fold_repetitions(&runs)?;
    result.ok = true;
    result.figures = run.figures.clone();
    result.errors = run.errors.total();
    result.errors_by_kind = run.errors;
    result.server_cpu_us_per_request = run.figures.server.cpu_us_per_request(run.figures.requests);
    warn_if_generator_bound(&mut result, &run, &point.target, machine);
    if let Some(cause) = result.failure_cause() {
        result.warnings.push(format!("requests failed: {cause}"));
    }
    match setup.mode {
        LoadMode::Rate => {
            if run.rate_held == Some(false) {
                result.warnings.push(format!(
                    "the generator did not hold the target rate of {} req/s",
                    setup.rate.unwrap_or(0.0)
                ));
            }
        }
        // Little's law is checked in `finalize`, which `report` runs again.
        LoadMode::Closed | LoadMode::Count => {}
    }
    result.spread = spread;
    result.runs = runs;
    Some(result)
}

/// Measures one point: a fresh server for each repetition, the load run, the server's and
/// the generator's CPU, its memory and tasks, nothing left running. `None` when interrupted
/// (a partial measurement is not a result). The flags read from Little's law (starved, the
/// in-flight ratio and its warning) are set here, as `sweep`'s analysis sets them again.
pub fn measure(
    plan: &PointPlan,
    pinning: Pinning,
    machine: &Machine,
    options: &LabOptions,
) -> Option<PointResult> {
    let mut result = run_point(plan, pinning, machine, options)?;
    mark_point(&mut result, plan.setup.mode, plan.point.workload.keepalive);
    let shape = super::limit::Shape::of(plan, machine.cores);
    result.limit = Some(super::limit::limit_of(&result, &shape));
    result.bound_rps = super::limit::own_bound_rps(&result, &shape);
    Some(result)
}

/// Marks `result` generator-bound, with a warning, when the load generator's threads were as
/// busy as a core each while the server was not.
fn warn_if_generator_bound(
    result: &mut PointResult,
    run: &RunMeasurement,
    target: &TargetSpec,
    machine: &Machine,
) {
    let cores = f64::from(machine.cores.max(1));
    let parallelism = if machine.pinned {
        1.0
    } else {
        match target {
            TargetSpec::Ours { arch, .. } => arch.parallelism(cores),
            TargetSpec::External(_) => cores,
        }
    };
    // CPU seconds of both sides were measured over the whole load run (connects and drain
    // included), so their shares of a core are over that window.
    let window_s = if run.figures.server.window_s > 0.0 {
        run.figures.server.window_s
    } else {
        run.figures.duration_s
    };
    // A generator thread that waited for its core wanted it as much as one that ran on it.
    result.generator_bound = generator_saturated(
        run.figures.client.cpu_s + run.figures.client.wait_s,
        run.figures.client.threads,
        run.figures.server.cpu_s,
        window_s,
        cores,
        parallelism,
    );
    if result.generator_bound && run.figures.server.cpu_unavailable {
        result.warnings.push(format!(
            "the load generator used {:.0}% of a core per thread (the server's CPU is not known \
             here): this throughput may be the generator's limit, not the server's",
            run.figures.client.cpu_s / window_s / f64::from(run.figures.client.threads.max(1))
                * 100.0
        ));
    } else if result.generator_bound {
        result.warnings.push(format!(
            "the load generator used {:.0}% of a core per thread while the server used {:.0}%: \
             this throughput is the generator's limit, not the server's",
            run.figures.client.cpu_s / window_s / f64::from(run.figures.client.threads.max(1))
                * 100.0,
            run.figures.server.cpu_s / window_s * 100.0
        ));
    }
}

/// The `serve` flags of ours beyond those every launch has: a variant's, and with `tls` the
/// lab's certificate.
fn ours_args(
    variant: Option<&crate::lab::plan::Variant>,
    setup: &super::plan::Setup,
    options: &LabOptions,
) -> anyhow::Result<Vec<String>> {
    let mut args = variant.map(|v| v.args.clone()).unwrap_or_default();
    if setup.tls {
        let (cert, key) = super::cert::lab_certificate(&options.scratch_dir)?;
        args.push("--tls-cert".into());
        args.push(cert.display().to_string());
        args.push("--tls-key".into());
        args.push(key.display().to_string());
    }
    Ok(args)
}

/// The URL (with `{port}` filled in) and the server launch for one run.
fn launch_of(
    plan: &PointPlan,
    pinning: Pinning,
    options: &LabOptions,
) -> anyhow::Result<(Launch, Option<String>)> {
    let (point, setup) = (&plan.point, &plan.setup);
    match &point.target {
        TargetSpec::Ours { arch, variant } => Ok((
            Launch::Ours {
                binary: options.server_binary.clone(),
                arch: *arch,
                extra_args: ours_args(variant.as_ref(), setup, options)?,
                workers: point.workers,
                store: setup
                    .store
                    .as_ref()
                    .map(|store| store.replace("{tmp}", &options.scratch_dir.to_string_lossy())),
                protocol: setup.protocol.as_str(),
                pin_with_taskset: pinning == Pinning::Taskset && setup.cpuset.is_none(),
            },
            None,
        )),
        TargetSpec::External(ext) => {
            let port = free_port()?;
            let url = ext.url.replace("{port}", &port.to_string());
            let (host, url_port) = host_port_of_url(&url).ok_or_else(|| {
                anyhow::anyhow!("external {:?}: cannot read host:port from {url}", ext.name)
            })?;
            let peers = options.scratch_dir.join("peers");
            let mut command = ext
                .command
                .replace("{port}", &port.to_string())
                .replace("{peers}", &peers.to_string_lossy());
            if let Some(workers) = point.workers {
                command = command.replace("{workers}", &workers.to_string());
            }
            Ok((
                Launch::External {
                    command,
                    host,
                    port: url_port,
                },
                Some(url),
            ))
        }
    }
}

/// `(host, port)` of `scheme://host[:port][/...]`.
pub fn host_port_of_url(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split('/').next()?;
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || authority.starts_with('[') => {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            Some((host.to_string(), port.parse().ok()?))
        }
        _ => {
            let default = if scheme == "http" { 80 } else { return None };
            Some((authority.to_string(), default))
        }
    }
}

/// One start-measure-stop cycle. `Ok(None)` when interrupted.
/// One run of a point: its measurement, the pool size its server reported, and warnings from
/// stopping it.
type Once = (RunMeasurement, Option<u32>, Vec<String>);

fn run_once(
    plan: &PointPlan,
    pinning: Pinning,
    options: &LabOptions,
) -> anyhow::Result<Option<Once>> {
    let (point, setup) = (&plan.point, &plan.setup);
    // Declared before the servers so that it is removed after they are stopped.
    let server_cgroup = server_cgroup()?;
    let (mut servers, external_url) =
        Servers::start(plan, pinning, options, server_cgroup.as_ref())?;
    let meter = match &server_cgroup {
        Some(cgroup) if servers.main.in_cgroup() => CpuMeter::Cgroup(cgroup),
        _ => CpuMeter::ProcChildren {
            pgrp: servers.main.pgid(),
        },
    };
    if pinning == Pinning::Affinity && setup.cpuset.is_none() {
        // A cpuset is the server's own pinning.
        pin_group_to_cpu0(servers.main.pgid());
        for (replica, _, _) in &servers.replicas {
            pin_group_to_cpu0(replica.pgid());
        }
    }
    let (target, replica_addrs) = servers.targets(external_url, plan)?;
    let stop = &*options.stop;
    warm_up(plan, &target, &replica_addrs, pinning, stop)?;
    if stop.load(Ordering::SeqCst) {
        return Ok(None);
    }
    let mode = measured_mode(plan)?;
    let mut config = load_config(plan, target, mode, pinning)?;
    config.replicas = replica_addrs;
    // An external command may start the server elsewhere (`ssh HOST ...`, `srun -w NODE ...`):
    // then the started process group is not the server, and its CPU is not the server's.
    let server_here = match &servers.launch {
        Launch::External { port, .. } => super::probe::listens_on(&servers.main.members(), *port),
        Launch::Ours { .. } => true,
    };
    let cpu_command = (!server_here)
        .then(|| remote_cpu_command(point, &servers.launch))
        .flatten();
    let command_cpu_before = cpu_command.as_deref().map(command_cpu_s).transpose()?;
    let before = Readings::take(&meter, &servers);
    let sampler = TreeSampler::start(servers.main.members(), Duration::from_millis(100));
    let connection_count = count_connections_halfway(plan, &config);
    let report = load::run(&config, Some(stop));
    let after = Readings::take(&meter, &servers);
    let replica_connections = connection_count
        .and_then(|counter| counter.join().ok())
        .unwrap_or_default();
    let sample = sampler.finish();
    if stop.load(Ordering::SeqCst) {
        servers.main.stop();
        return Ok(None);
    }
    servers.check_alive(setup, &before, &after)?;
    let report = report.context("measuring")?;
    let reported_workers = servers.main.ready.workers;
    let window_s = (after.at - before.at).as_secs_f64();
    let notes = servers.stop(after.output - before.output, window_s);
    let mut run = measurement_of(&report, &config, after.cpu.since(&before.cpu), sample);
    if let Some(tls) = run.figures.tls.as_mut() {
        tls.server_cpu_us = server_cpu_per_handshake(&servers.main);
    }
    run.figures.server.cpu_method = Some(meter.method());
    run.figures.server.window_s = window_s;
    if setup.replicas > 1 {
        run.figures.server.replicas = setup.replicas;
        run.replica_connections = replica_connections;
    }
    budget_use(&mut run.figures.server, setup, &before, &after);
    if !server_here {
        run.figures.server = remote_usage(cpu_command.as_deref(), command_cpu_before)?;
    }
    Ok(Some((run, reported_workers, notes)))
}

/// A server started elsewhere by its command: the CPU its `cpu_command` says it used since
/// `before`, or none to be had.
fn remote_usage(cpu_command: Option<&str>, before: Option<f64>) -> anyhow::Result<ServerUsage> {
    let command_cpu = match (cpu_command, before) {
        (Some(command), Some(before)) => Some((command_cpu_s(command)? - before).max(0.0)),
        _ => None,
    };
    Ok(ServerUsage {
        cpu_s: command_cpu.unwrap_or(0.0),
        cpu_unavailable: command_cpu.is_none(),
        remote: true,
        ..ServerUsage::default()
    })
}

/// A point's servers: the first, and the replicas beside it, each in budgets of its own. A
/// struct's and a tuple's fields drop in order: each server stops before its budgets go.
struct Servers {
    main: ServerProcess,
    budgets: Budgets,
    launch: Launch,
    replicas: Vec<(ServerProcess, Budgets, Launch)>,
}

impl Servers {
    /// The load's target (the external URL, or the main server's ready address with the
    /// point's path) and each replica's address.
    fn targets(
        &self,
        external_url: Option<String>,
        plan: &PointPlan,
    ) -> anyhow::Result<(Target, Vec<std::net::SocketAddr>)> {
        let url = point_url(external_url, plan, &self.main.ready);
        let replicas = self
            .replicas
            .iter()
            .map(|(r, _, launch)| replica_addr(r, launch))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok((Target::parse(&url)?, replicas))
    }

    /// Starts the point's server and its replicas, each in `server_cgroup` when there is one;
    /// with the URL an external target's command was given.
    fn start(
        plan: &PointPlan,
        pinning: Pinning,
        options: &LabOptions,
        server_cgroup: Option<&ServerCgroup>,
    ) -> anyhow::Result<(Servers, Option<String>)> {
        let (point, setup) = (&plan.point, &plan.setup);
        let ready_timeout = match &point.target {
            TargetSpec::External(ext) => ext.ready_timeout.unwrap_or(setup.ready_timeout),
            TargetSpec::Ours { .. } => setup.ready_timeout,
        };
        if setup.replicas > 1 && server_cgroup.is_none() {
            anyhow::bail!(
                "replicas = {}: the replicas are measured together in a cgroup, and none can be \
                 made here (run as root)",
                setup.replicas
            );
        }
        let procs = server_cgroup.map(|c| c.procs_file());
        // One copy of the server in the run's cgroup and budgets of its own.
        let start = |launch: Launch| -> anyhow::Result<(ServerProcess, Budgets, Launch)> {
            let budgets = Budgets::new(setup)?;
            let server = ServerProcess::start_in(
                &launch,
                Duration::from_secs_f64(ready_timeout),
                procs.as_deref(),
                &budgets.procs_files(),
            )?;
            Ok((server, budgets, launch))
        };
        let (launch, external_url) = launch_of(plan, pinning, options)?;
        let (main, budgets, launch) = start(launch)?;
        let mut servers = Servers {
            main,
            budgets,
            launch,
            replicas: Vec::new(),
        };
        // The other replicas, each on its own port, measured together.
        for _ in 1..setup.replicas {
            let (launch, _) = launch_of(plan, pinning, options)?;
            servers.replicas.push(start(launch)?);
        }
        Ok((servers, external_url))
    }

    fn every_budget(&self) -> Vec<&Budgets> {
        std::iter::once(&self.budgets)
            .chain(self.replicas.iter().map(|(_, b, _)| b))
            .collect()
    }

    /// An error when a server or a replica exited during the run; an OOM kill says so.
    fn check_alive(
        &mut self,
        setup: &super::plan::Setup,
        before: &Readings,
        after: &Readings,
    ) -> anyhow::Result<()> {
        for (i, (replica, _, _)) in self.replicas.iter_mut().enumerate() {
            if let Some(status) = replica.gone() {
                anyhow::bail!(
                    "replica {} of {} exited ({status}) during the run{}",
                    i + 2,
                    setup.replicas,
                    replica.stderr_note()
                );
            }
        }
        let Some(status) = self.main.gone() else {
            return Ok(());
        };
        let killed = match (setup.memory, before.memory, after.memory) {
            (Some(limit), Some(before), Some(after)) if after.oom_kills > before.oom_kills => {
                format!(
                    ": {} at its {:.0} MiB memory limit",
                    super::limit::OOM_KILLED,
                    limit as f64 / f64::from(1u32 << 20)
                )
            }
            _ => String::new(),
        };
        anyhow::bail!(
            "server exited ({status}) during the run{killed}{}",
            self.main.stderr_note()
        );
    }

    /// Stops every server: what stopping them noted, and a note when the server flooded its
    /// output (`output` bytes over `window_s`, more than [`FLOOD_BYTES_PER_S`]).
    fn stop(&mut self, output: u64, window_s: f64) -> Vec<String> {
        self.main.stop();
        let mut notes = std::mem::take(&mut self.main.stop_notes);
        for (replica, _, _) in &mut self.replicas {
            replica.stop();
            notes.append(&mut replica.stop_notes);
        }
        if output as f64 > FLOOD_BYTES_PER_S * window_s.max(1.0) {
            notes.insert(
                0,
                format!(
                    "the server wrote {:.1} MiB to its stdout and stderr during the run, which \
                     the runner drained on the machine's CPUs",
                    output as f64 / (1024.0 * 1024.0)
                ),
            );
        }
        notes
    }
}

/// The counters read at each end of a point's window.
struct Readings {
    at: Instant,
    cpu: super::probe::TreeCpu,
    throttled: Option<cgroup::Throttling>,
    memory: Option<cgroup::MemoryUse>,
    machine: Option<(u64, u64)>,
    /// Bytes the server had written to its stdout and stderr.
    output: u64,
}

impl Readings {
    fn take(meter: &CpuMeter, servers: &Servers) -> Readings {
        let every_budget = servers.every_budget();
        Readings {
            cpu: meter.read(),
            throttled: Budgets::throttling_of(&every_budget),
            memory: Budgets::memory_of(&every_budget),
            output: servers.main.output_bytes(),
            machine: super::probe::machine_cpu(),
            at: Instant::now(),
        }
    }
}

/// The budgets' counts between the readings: the quota's throttling, the memory limit's
/// hits, and the machine's busy cores.
fn budget_use(
    server: &mut ServerUsage,
    setup: &super::plan::Setup,
    before: &Readings,
    after: &Readings,
) {
    if let (Some(cores), Some(b), Some(a)) = (setup.cpus, before.throttled, after.throttled) {
        let t = a.since(&b);
        server.quota_cores = cores;
        server.quota_periods = t.periods;
        server.throttled_periods = t.throttled_periods;
        server.throttled_s = t.throttled_s;
    }
    if let (Some(limit), Some(b), Some(a)) = (setup.memory, before.memory, after.memory) {
        server.memory_limit_bytes = limit;
        server.memory_peak_bytes = a.peak_bytes;
        server.memory_limit_hits = a.limit_hits.saturating_sub(b.limit_hits);
        server.oom_kills = a.oom_kills.saturating_sub(b.oom_kills);
    }
    if let (Some(b), Some(a)) = (before.machine, after.machine) {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        server.machine_busy_cores = super::probe::machine_busy_cores(b, a, cores);
    }
}

/// Replicas: how many connections each holds, counted by the kernel halfway through the run.
fn count_connections_halfway(
    plan: &PointPlan,
    config: &LoadConfig,
) -> Option<std::thread::JoinHandle<Vec<u32>>> {
    (plan.setup.replicas > 1).then(|| {
        let ports: Vec<u16> = std::iter::once(config.target.port())
            .chain(config.replicas.iter().map(|a| a.port()))
            .collect();
        let halfway = Duration::from_secs_f64(plan.setup.duration_of(&plan.point.workload) / 2.0);
        std::thread::spawn(move || {
            std::thread::sleep(halfway);
            ports
                .into_iter()
                .map(super::probe::established_to)
                .collect::<Vec<u32>>()
        })
    })
}

/// A replica's address: its ready line's (ours), or the port its command was given.
fn replica_addr(server: &ServerProcess, launch: &Launch) -> anyhow::Result<std::net::SocketAddr> {
    let (host, port) = match launch {
        Launch::External { host, port, .. } => (host.clone(), *port),
        Launch::Ours { .. } => (server.ready.host.clone(), server.ready.port),
    };
    std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))?
        .next()
        .ok_or_else(|| anyhow::anyhow!("replica at {host}:{port}: no address"))
}

/// The budget cgroups of one copy of the server (a container's limits): its CPU quota, its
/// memory limit, its CPUs, those the setup asks for. Each replica has its own.
struct Budgets {
    quota: Option<BudgetCgroup>,
    memory: Option<BudgetCgroup>,
    cpuset: Option<BudgetCgroup>,
}

impl Budgets {
    fn new(setup: &super::plan::Setup) -> anyhow::Result<Budgets> {
        Ok(Budgets {
            quota: setup.cpus.map(BudgetCgroup::cpu_quota).transpose()?,
            memory: setup.memory.map(BudgetCgroup::memory_limit).transpose()?,
            cpuset: setup
                .cpuset
                .as_deref()
                .map(BudgetCgroup::cpuset)
                .transpose()?,
        })
    }

    fn procs_files(&self) -> Vec<std::path::PathBuf> {
        [&self.quota, &self.memory, &self.cpuset]
            .into_iter()
            .flatten()
            .map(BudgetCgroup::procs_file)
            .collect()
    }

    /// The quotas' counters summed over the copies (`None` without a quota).
    fn throttling_of(all: &[&Budgets]) -> Option<cgroup::Throttling> {
        all.iter()
            .map(|b| b.quota.as_ref().and_then(BudgetCgroup::throttling))
            .sum()
    }

    /// The memory budgets' counts summed over the copies (`None` without a limit).
    fn memory_of(all: &[&Budgets]) -> Option<cgroup::MemoryUse> {
        all.iter()
            .map(|b| b.memory.as_ref().and_then(BudgetCgroup::memory))
            .sum()
    }
}

/// Output a server may write during a run, in bytes a second, before its point warns of it
/// (a request log line per request at 10,000 req/s is about 1 MB/s).
const FLOOD_BYTES_PER_S: f64 = 4.0 * 1024.0 * 1024.0;

/// The cgroup the server is started in (none: its CPU is read from `/proc`), honouring a
/// method forced through [`cgroup::METHOD_ENV`]. Bound before the server so that it is
/// removed after the server is stopped.
fn server_cgroup() -> anyhow::Result<Option<ServerCgroup>> {
    let forced = cgroup::forced_method()?;
    let server_cgroup = match forced {
        Some(CpuMethod::ProcChildren) => None,
        _ => ServerCgroup::create(forced),
    };
    if let (Some(method), None) = (forced, &server_cgroup) {
        if method != CpuMethod::ProcChildren {
            anyhow::bail!(
                "{}={} asked for, but no such cgroup can be made here",
                cgroup::METHOD_ENV,
                method.name()
            );
        }
    }
    Ok(server_cgroup)
}

/// The URL a run loads: the external target's base with the workload's route, else the
/// started server's address from its ready line.
fn point_url(external_url: Option<String>, plan: &PointPlan, ready: &ReadyLine) -> String {
    let (point, setup) = (&plan.point, &plan.setup);
    match external_url {
        Some(base) => format!("{}{}", base.trim_end_matches('/'), point.workload.route),
        None => match setup.protocol {
            Protocol::Echo => format!("tcp://{}:{}", ready.host, ready.port),
            Protocol::Http => format!(
                "{}://{}:{}{}",
                if setup.tls { "https" } else { "http" },
                ready.host,
                ready.port,
                point.workload.route
            ),
        },
    }
}

/// The unmeasured warm-up run, when the setup asks for one.
fn warm_up(
    plan: &PointPlan,
    target: &Target,
    replicas: &[std::net::SocketAddr],
    pinning: Pinning,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let (point, setup) = (&plan.point, &plan.setup);
    if setup.warmup <= 0.0 {
        return Ok(());
    }
    let warmup = Mode::Closed {
        duration: Duration::from_secs_f64(setup.warmup),
    };
    let mut config = load_config(plan, target.clone(), warmup, pinning)?;
    config.connections = (setup.warmup_connections.unwrap_or(1) as usize)
        .max(1 + replicas.len())
        .min(point.connections().max(1) as usize);
    config.replicas = replicas.to_vec();
    config.threads = config.threads.min(config.connections);
    load::run(&config, Some(stop)).context("warm-up")?;
    Ok(())
}

/// The measured run's load mode (a workload's rate plan: its mean rate, for its duration).
fn measured_mode(plan: &PointPlan) -> anyhow::Result<Mode> {
    let (point, setup) = (&plan.point, &plan.setup);
    let duration_s = setup.duration_of(&point.workload);
    if let (LoadMode::Rate, Some(plan)) = (
        setup.mode,
        point
            .workload
            .rate_plan(duration_s)
            .map_err(anyhow::Error::msg)?,
    ) {
        return Ok(Mode::Rate {
            rate: plan.mean_rate(),
            duration: plan.duration(),
        });
    }
    Ok(match setup.mode {
        LoadMode::Closed => Mode::Closed {
            duration: Duration::from_secs_f64(setup.duration_of(&point.workload)),
        },
        LoadMode::Count => Mode::Count {
            requests: setup.requests.unwrap_or(1),
        },
        LoadMode::Rate => Mode::Rate {
            rate: setup.rate.unwrap_or(1.0),
            duration: Duration::from_secs_f64(duration_s),
        },
    })
}

/// An external target's `cpu_command` with its port filled in, for a server started
/// elsewhere (whose CPU the started process group does not hold).
fn remote_cpu_command(point: &PointSpec, launch: &Launch) -> Option<String> {
    match (&point.target, launch) {
        (TargetSpec::External(ext), Launch::External { port, .. }) => ext
            .cpu_command
            .as_ref()
            .map(|c| c.replace("{port}", &port.to_string())),
        _ => None,
    }
}

/// Runs an external target's `cpu_command` and reads the one number it prints (CPU seconds).
fn command_cpu_s(command: &str) -> anyhow::Result<f64> {
    let out = std::process::Command::new("sh")
        .args(["-c", command])
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("cpu_command {command:?}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.trim().parse::<f64>() {
        Ok(v) if out.status.success() && v.is_finite() && v >= 0.0 => Ok(v),
        _ => anyhow::bail!(
            "cpu_command {command:?} should print CPU seconds, printed {:?} ({})",
            text.trim(),
            out.status
        ),
    }
}

fn load_config(
    plan: &PointPlan,
    target: Target,
    mode: Mode,
    pinning: Pinning,
) -> anyhow::Result<LoadConfig> {
    let (point, setup) = (&plan.point, &plan.setup);
    let workload = &point.workload;
    // The list's path-only lines go to the server under test: its host and port, not its path.
    let authority = match &target {
        Target::Http {
            host,
            port,
            host_header,
            tls,
            ..
        } => Target::Http {
            host: host.clone(),
            port: *port,
            path_and_query: "/".into(),
            host_header: host_header.clone(),
            tls: *tls,
        },
        other => other.clone(),
    };
    let urls = workload
        .url_list(Some(&authority))
        .map_err(anyhow::Error::msg)?;
    let plan = match mode {
        Mode::Rate { .. } => workload
            .rate_plan(setup.duration_of(workload))
            .map_err(anyhow::Error::msg)?
            .filter(|p| !p.is_constant()),
        _ => None,
    };
    let connections = point.connections().max(1) as usize;
    let mut config = LoadConfig::new(target, connections, mode);
    config.urls = urls.map(std::sync::Arc::new);
    config.plan = plan;
    config.threads = (setup.load_threads as usize).clamp(1, connections);
    config.timeout = Duration::from_secs_f64(setup.timeout_of(workload));
    config.keepalive = workload.keepalive;
    // The lab's own certificate (`tls`): accepted as `load --insecure` does.
    config.tls.insecure = setup.tls;
    config.method = workload.method.clone();
    if matches!(mode, Mode::Closed { .. }) {
        config.settle = setup.settle.map(Duration::from_secs_f64);
    }
    if !workload.body.is_empty() && config.urls.is_none() {
        config.body = workload.body.clone().into_bytes();
        config.headers.push((
            "Content-Type".into(),
            "application/x-www-form-urlencoded".into(),
        ));
    }
    if let Some(len) = workload.message_len {
        config.message_len = len;
    }
    if pinning != Pinning::None {
        config.pin_cpus = vec![1];
    }
    config.nice = Some(super::GENERATOR_NICE);
    config.net = setup.net;
    if let Some(streams) = point.streams {
        config.http = crate::load::HttpVersion::H2c;
        config.streams = streams as usize;
        config.settle = None;
    }
    if setup.grpc {
        // Last: the call's method, headers and body take the place of the route's.
        grpc_call(&mut config, workload)?;
    }
    Ok(config)
}

/// Turns the load engine's report and the /proc samples into one repetition's record.
fn measurement_of(
    report: &LoadReport,
    config: &LoadConfig,
    cpu: super::probe::TreeCpu,
    sample: super::probe::TreeSample,
) -> RunMeasurement {
    let l = &report.latency_us;
    // The mean is the answered requests' (Little's law relates it to throughput); the
    // percentiles and max include the unanswered ones, flagged as lower bounds.
    let mut lower_bound = l.lower_bound;
    lower_bound.remove(LatencyKey::Mean);
    RunMeasurement {
        figures: RunFigures {
            requests: report.requests,
            duration_s: report.duration_s,
            rps: report.rps,
            cycle_rps: report.cycle_rps,
            latency_us: PointLatency {
                p50: l.p50,
                p90: l.p90,
                p99: l.p99,
                p999: l.p999,
                mean: report.latency_answered_us.mean,
                max: l.max,
                lower_bound,
            },
            unanswered: report.unanswered,
            status: report.status.clone(),
            server: ServerUsage {
                cpu_s: cpu.total_s(),
                cpu_user_s: cpu.user_s,
                cpu_system_s: cpu.system_s,
                rss_kb: sample.peak_rss_kb,
                threads: sample.peak_threads,
                processes: sample.peak_processes,
                voluntary_switches: sample.voluntary_switches,
                involuntary_switches: sample.involuntary_switches,
                tasks_running: sample.tasks.running,
                tasks_sleeping: sample.tasks.sleeping,
                tasks_blocked: sample.tasks.blocked,
                runqueue_wait_s: sample.runqueue_wait_s,
                busiest_running_threads: sample.busiest.running_threads,
                busiest_cpu_s: sample.busiest.cpu_s,
                busiest_threads_sharing: sample.busiest.threads_sharing,
                cores_allowed: sample.cores_allowed,
                machine_busy_cores: 0.0,
                cpu_method: None,
                cpu_unavailable: false,
                remote: false,
                window_s: report.duration_s,
                answered: report.answered(),
                ..ServerUsage::default()
            },
            client: ClientUsage {
                cpu_s: report.client_cpu_s,
                threads: config.threads.min(config.connections) as u32,
                wait_s: report.client_wait_s,
                send_late_us: report.send_late_mean_us,
            },
            net: report.net.clone(),
            http2: report.http2.as_ref().map(|h| StreamCap {
                server_max_streams: h.server_max_streams,
                waits: h.stream_waits,
                wait_share: h.stream_wait_share,
            }),
            tls: report.tls.as_ref().map(handshake_figures),
            grpc_status: grpc_status(report),
        },
        errors: report.errors,
        target_rate: report.target_rate,
        rate_held: report.rate_held,
        retransmissions: report
            .net
            .as_ref()
            .map(|n| n.retrans_clients + n.retrans_server_side),
        replica_connections: Vec::new(),
    }
}

/// `grpc`: the point's request as a call of the lab's method carrying the workload's `/work`
/// figures, on the same host and port.
fn grpc_call(config: &mut LoadConfig, workload: &super::plan::Workload) -> anyhow::Result<()> {
    config.body = workload.grpc_message().map_err(anyhow::Error::msg)?;
    if let Target::Http { path_and_query, .. } = &mut config.target {
        *path_and_query = crate::http::grpc::WORK_METHOD.into();
    }
    config.make_grpc()
}

/// A gRPC run's calls by status (empty for any other run).
fn grpc_status(report: &LoadReport) -> std::collections::BTreeMap<String, u64> {
    report
        .http2
        .as_ref()
        .map(|h| h.grpc_status.clone())
        .unwrap_or_default()
}

/// An HTTPS run's handshakes as the generator saw them (the server's CPU is added once it
/// has stopped: [`server_cpu_per_handshake`]).
fn handshake_figures(t: &crate::load::TlsReport) -> HandshakeFigures {
    HandshakeFigures {
        handshakes: t.handshakes,
        resumed: t.resumed,
        p50_us: t.handshake_us.p50,
        p99_us: t.handshake_us.p99,
        share: t.handshake_share,
        server_cpu_us: None,
    }
}

/// Our stopped server's CPU per handshake (µs), from its stats line; `None` without one.
fn server_cpu_per_handshake(server: &ServerProcess) -> Option<f64> {
    let (full, resumed, cpu_ms) = super::cert::stats_handshakes(&server.stats_line()?)?;
    (full + resumed > 0).then(|| cpu_ms * 1000.0 / (full + resumed) as f64)
}

/// Pins every task of a process group to CPU 0 (used when taskset is missing).
fn pin_group_to_cpu0(pgid: i32) {
    use nix::sched::{sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    let mut cpu0 = CpuSet::new();
    if cpu0.set(0).is_err() {
        return;
    }
    for process in super::probe::group_processes(pgid) {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", process.pid)) else {
            continue;
        };
        for task in tasks.flatten() {
            if let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) {
                let _ = sched_setaffinity(Pid::from_raw(tid), &cpu0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_host_and_port() {
        assert_eq!(
            host_port_of_url("http://127.0.0.1:8080/x"),
            Some(("127.0.0.1".into(), 8080))
        );
        assert_eq!(
            host_port_of_url("http://localhost"),
            Some(("localhost".into(), 80))
        );
        assert_eq!(host_port_of_url("http://[::1]:9/"), Some(("::1".into(), 9)));
        assert_eq!(host_port_of_url("tcp://h"), None);
    }
}
