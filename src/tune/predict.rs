//! `tune --predict`: the user's server as the model sees it ([`crate::model`]), every
//! configuration of its knobs predicted with an interval, and only what decides measured.
//!
//! Nothing says what a knob of the user's server does, so the model tries each reading of
//! them ([`Roles`]): the requests the server serves at once (the product of the knobs, held
//! through each request or each connection, or no cap: event loops) and the cores it can use
//! (the product, the first knob alone: processes with a lock each, as CPython's and MRI's
//! threads; or one). Each reading is fitted by [`Fitted::fit`] on the points measured (the
//! one-connection profile gives the request's CPU and wait, and the hand-off), and the one that
//! misses them least is kept. The search ([`search`]): a first point at the start and at each
//! knob's ends, then the model's leader (the smallest configuration predicted within
//! [`WITHIN_BEST`] of the best throughput whose p99 meets the bound) is measured, then every
//! configuration whose interval could still change the answer (beat the best measured by more
//! than a tie, or be a smaller pick), the most promising first, the model fitted again after
//! each; the pick is made from measured configurations only. Pure: every number comes from a
//! [`Measure`], so it is tested on a surface the model's own equations made.

use serde::{Deserialize, Serialize};

use super::coordinate::{grid, Found, Measure, Measured, Run};
use super::spec::{label, Knob};
use crate::arch::Holding;
use crate::model::fit::{handoff_us, Fitted, Observed, Placement, Predicted};
use crate::model::Workload;
use crate::search::knob::WITHIN_BEST;
use crate::search::Sample;

/// How the requests a configuration serves at once follow from its knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolRole {
    /// The product of the knobs, each worker held while a request runs (and through its wait):
    /// Puma, gunicorn's gthread, a thread pool.
    PerRequest,
    /// The product of the knobs, each worker held by a keep-alive connection while it lives:
    /// gunicorn's sync workers; the connections beyond it wait for one to close.
    PerConnection,
    /// No cap: event loops (Node's cluster, uvicorn's workers).
    Unbounded,
}

/// How the cores a configuration can use follow from its knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CoresRole {
    /// Every thread runs: the product of the knobs.
    Product,
    /// A lock per process: the first knob (the workers) alone.
    First,
    /// One core whatever the knobs.
    One,
}

/// One reading of the knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Roles {
    pub pool: PoolRole,
    pub cores: CoresRole,
}

impl Roles {
    /// Every reading of `knobs` knobs (the first knob alone is the product with one), in the
    /// order a tie between them is settled.
    pub fn all(knobs: usize) -> Vec<Roles> {
        let pools = [
            PoolRole::PerRequest,
            PoolRole::PerConnection,
            PoolRole::Unbounded,
        ];
        let cores: &[CoresRole] = if knobs > 1 {
            &[CoresRole::First, CoresRole::Product, CoresRole::One]
        } else {
            &[CoresRole::Product, CoresRole::One]
        };
        pools
            .iter()
            .flat_map(|&pool| cores.iter().map(move |&cores| Roles { pool, cores }))
            .collect()
    }

    fn holding(&self) -> Holding {
        match self.pool {
            PoolRole::PerRequest => Holding::PoolPerRequest,
            PoolRole::PerConnection => Holding::PoolPerConnection,
            PoolRole::Unbounded => Holding::Loops,
        }
    }

    /// The requests served at once at `values` (`None`: no cap).
    pub fn pool(&self, values: &[u32]) -> Option<u32> {
        (self.pool != PoolRole::Unbounded).then(|| values.iter().product::<u32>().max(1))
    }

    /// The cores the server can use at `values`, within `budget`.
    pub fn cores(&self, values: &[u32], budget: f64) -> f64 {
        let own = match self.cores {
            CoresRole::Product => values.iter().product::<u32>(),
            CoresRole::First => values.first().copied().unwrap_or(1),
            CoresRole::One => 1,
        };
        f64::from(own.max(1)).min(budget)
    }

    /// The reading in words, with the knobs' names.
    pub fn words(&self, knobs: &[Knob]) -> String {
        let names: Vec<&str> = knobs.iter().map(|k| k.name.as_str()).collect();
        let product = names.join(" x ");
        let pool = match self.pool {
            PoolRole::PerRequest => format!("{product} requests at once"),
            PoolRole::PerConnection => format!("{product} connections at once"),
            PoolRole::Unbounded => "every connection at once (event loops)".to_string(),
        };
        let cores = match self.cores {
            CoresRole::Product => format!("{product} cores"),
            CoresRole::First => format!("{} cores (a lock a process)", names[0]),
            CoresRole::One => "one core".to_string(),
        };
        format!("{pool} on {cores}")
    }
}

/// Where the configurations run and what they must meet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setting {
    pub connections: u32,
    pub machine_cores: f64,
    /// The cores the server's budget gives it (the machine's without one).
    pub budget_cores: f64,
    pub p99_bound_us: f64,
}

/// The profile's point: one connection, the closed loop, at `values`; the wait is the mean
/// latency less the CPU and the run-queue waits.
#[derive(Debug, Clone, PartialEq)]
pub struct OnePoint {
    pub values: Vec<u32>,
    pub sample: Sample,
    pub wait_us: f64,
}

/// The model of the user's server: the reading of its knobs kept, fitted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TuneModel {
    pub roles: Roles,
    pub fitted: Fitted,
    workload: Workload,
    setting: Setting,
}

impl TuneModel {
    /// The reading of the knobs that misses the points measured least (the sum of their
    /// squared relative misses), fitted. `None` without a point whose costs were measured.
    pub fn fit(
        knobs: usize,
        setting: Setting,
        one: &OnePoint,
        measured: &Measured,
    ) -> Option<TuneModel> {
        let s = &one.sample;
        let handoff = handoff_us(1, s.rps, s.cpu_us, s.client_cpu_us, one.wait_us);
        let mut best: Option<(f64, TuneModel)> = None;
        for roles in Roles::all(knobs) {
            let workload = Workload {
                cpu_us: s.cpu_us,
                wait_us: one.wait_us,
                blocking: roles.pool == PoolRole::PerRequest,
            };
            let mut points = vec![observed(roles, setting, workload, 1, &one.values, s)];
            for (values, samples) in &measured.samples {
                points.extend(
                    samples.iter().map(|x| {
                        observed(roles, setting, workload, setting.connections, values, x)
                    }),
                );
            }
            let Some(fitted) = Fitted::fit(roles.holding(), &points, handoff) else {
                continue;
            };
            let model = TuneModel {
                roles,
                fitted,
                workload,
                setting,
            };
            let score: f64 = points
                .iter()
                .filter(|p| p.rps > 0.0 && p.server_us > 0.0)
                .map(|p| fitted.miss(p).powi(2))
                .sum();
            // A later reading replaces an earlier one only where it fits clearly better: where
            // the cores never bound (a pool-bound run uses a third of a core), every reading
            // of them fits the same, and the first (the conventional one) is kept.
            if best
                .as_ref()
                .is_none_or(|(b, _)| score < *b * CLEARLY_BETTER - 1e-12)
            {
                best = Some((score, model));
            }
        }
        best.map(|(_, m)| m)
    }

    /// A configuration predicted at the tune's connections.
    pub fn predict(&self, values: &[u32]) -> Predicted {
        let there = Fitted {
            placement: placement(self.roles, self.setting, values),
            ..self.fitted
        };
        there.predict(
            &self.workload,
            self.setting.connections,
            self.roles.pool(values),
        )
    }

    /// The term that binds `p`, the prediction of `values`, in words.
    pub fn binding(&self, values: &[u32], p: &Predicted) -> &'static str {
        Fitted {
            placement: placement(self.roles, self.setting, values),
            ..self.fitted
        }
        .binding_name(p.prediction.binding)
    }
}

fn placement(roles: Roles, setting: Setting, values: &[u32]) -> Placement {
    Placement {
        machine_cores: setting.machine_cores,
        shares_with_generator: true,
        server_cores: roles.cores(values, setting.budget_cores),
        budgeted: setting.budget_cores < setting.machine_cores,
    }
}

fn observed(
    roles: Roles,
    setting: Setting,
    workload: Workload,
    connections: u32,
    values: &[u32],
    s: &Sample,
) -> Observed {
    Observed {
        connections,
        pool: roles.pool(values),
        workload,
        rps: if s.ok { s.rps } else { 0.0 },
        server_us: s.cpu_us,
        client_us: s.client_cpu_us,
        p50_us: s.p50_us,
        p99_us: s.p99_us,
        placement: placement(roles, setting, values),
    }
}

/// A configuration as the model saw it: predicted (before it was measured, where it was:
/// the first points, by the model fitted on them all), and measured where it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigPrediction {
    pub values: Vec<u32>,
    pub label: String,
    pub rps: f64,
    pub low: f64,
    pub high: f64,
    pub p99_us: f64,
    pub p99_low: f64,
    pub p99_high: f64,
    /// The term that binds it: `cores`, `quota`, `pool` or `wait`.
    pub binding: String,
    /// Why it was measured (`None`: predicted only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Its first run's throughput and p99, where it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_rps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_p99_us: Option<f64>,
}

impl ConfigPrediction {
    /// The relative miss of its prediction (positive: predicted more), where it was measured
    /// after it was predicted.
    pub fn miss(&self) -> Option<f64> {
        let m = self.measured_rps.filter(|m| *m > 0.0)?;
        (self.why.as_deref() != Some(FIRST)).then(|| self.rps / m - 1.0)
    }

    pub fn inside(&self) -> Option<bool> {
        let m = self.measured_rps?;
        (self.why.as_deref() != Some(FIRST)).then(|| (self.low..=self.high).contains(&m))
    }
}

/// What the model was, and how far it missed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSummary {
    pub roles: Roles,
    /// The reading in words.
    pub reading: String,
    /// The interval's half-width, a share of a prediction.
    pub error: f64,
    /// Configurations predicted, and measured.
    pub configurations: usize,
    pub measured: usize,
    /// Over the configurations measured after they were predicted: the median and worst
    /// relative miss, and how many fell inside their interval, of how many.
    pub median_miss: Option<f64>,
    pub worst_miss: Option<f64>,
    pub inside: usize,
    pub checked: usize,
}

/// What the search decided: the pick (from measured configurations only), the model, and
/// every configuration predicted.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    pub found: Found,
    pub model: ModelSummary,
    pub predictions: Vec<ConfigPrediction>,
}

/// A reading of the knobs replaces an earlier one only where its squared misses sum to less
/// than this share of the earlier's.
pub const CLEARLY_BETTER: f64 = 0.8;

/// A configuration measured by the search: why, and what the model predicted of it then
/// (`None`: a first point, measured before any model).
type Asked = (Vec<u32>, &'static str, Option<Predicted>);

/// Why the first points are measured.
pub const FIRST: &str = "a first point for the model";

/// The order in which configurations count as smaller: the requests they serve at once (the
/// knobs' product), then their values.
fn size(values: &[u32]) -> (u32, Vec<u32>) {
    (values.iter().product(), values.to_vec())
}

/// The pick among `estimates` (configuration, throughput that counts: 0 where the p99 misses
/// the bound): the smallest within [`WITHIN_BEST`] of the best. `None` when none counts.
pub fn pick_of(estimates: &[(Vec<u32>, f64)]) -> Option<Vec<u32>> {
    let best = estimates.iter().map(|e| e.1).fold(0.0, f64::max);
    if best <= 0.0 {
        return None;
    }
    estimates
        .iter()
        .filter(|e| e.1 >= best * (1.0 - WITHIN_BEST))
        .min_by_key(|e| size(&e.0))
        .map(|e| e.0.clone())
}

/// The first points: `start`, and each knob at its ends with the others at `start`.
fn first_points(knobs: &[Knob], start: &[u32]) -> Vec<Vec<u32>> {
    let mut out = vec![start.to_vec()];
    for (i, k) in knobs.iter().enumerate() {
        for v in [k.hi, k.lo] {
            let mut at = start.to_vec();
            at[i] = v;
            if !out.contains(&at) {
                out.push(at);
            }
        }
    }
    out
}

/// Searches the knobs from `start` with the model (see the module's header). `None`:
/// interrupted, or no model could be fitted (no point's costs were measured).
pub fn search(
    knobs: &[Knob],
    start: &[u32],
    setting: Setting,
    one: &OnePoint,
    measured: &mut Measured,
    m: &mut dyn Measure<Run>,
) -> Option<Decided> {
    let bound = setting.p99_bound_us;
    let configs = grid(knobs);
    let mut asked: Vec<Asked> = Vec::new();
    for values in first_points(knobs, start) {
        m.why(FIRST);
        measured.level(m, &values, 1, bound)?;
        asked.push((values, FIRST, None));
    }
    let model = loop {
        let model = TuneModel::fit(knobs.len(), setting, one, measured)?;
        let Some((values, why)) = next_point(&configs, &model, measured, &asked, bound) else {
            break model;
        };
        asked.push((values.clone(), why, Some(model.predict(&values))));
        m.why(why);
        measured.level(m, &values, 1, bound)?;
    };
    let estimates: Vec<(Vec<u32>, f64)> = measured
        .samples
        .keys()
        .map(|v| (v.clone(), measured.known(v, bound).rps.0))
        .collect();
    let pick = pick_of(&estimates).or_else(|| Some(start.to_vec()))?;
    let predictions = predictions(knobs, &configs, &model, &asked, measured);
    Some(Decided {
        found: Found {
            level: measured.level(m, &pick, 1, bound)?,
            pick,
            path: Vec::new(),
            passes: 0,
            adopted_from: None,
        },
        model: summary(knobs, &model, &predictions),
        predictions,
    })
}

/// The next configuration to measure, and why: the model's leader where it was not measured
/// yet, then the unmeasured configuration whose interval most reaches past it (it could beat
/// the best measured by more than a tie, or be a smaller pick); `None`: nothing left that
/// could change the answer.
fn next_point(
    configs: &[Vec<u32>],
    model: &TuneModel,
    measured: &Measured,
    asked: &[Asked],
    bound: f64,
) -> Option<(Vec<u32>, &'static str)> {
    let known = |v: &Vec<u32>| measured.samples.contains_key(v);
    // Each configuration not measured yet, predicted once.
    let unmeasured: Vec<(&Vec<u32>, Predicted)> = configs
        .iter()
        .filter(|v| !known(v))
        .map(|v| (v, model.predict(v)))
        .collect();
    let counted = |p: &Predicted| {
        if p.p99.us <= bound {
            p.prediction.rps
        } else {
            0.0
        }
    };
    let estimates: Vec<(Vec<u32>, f64)> = measured
        .samples
        .keys()
        .map(|v| (v.clone(), measured.known(v, bound).rps.0))
        .chain(unmeasured.iter().map(|(v, p)| ((*v).clone(), counted(p))))
        .collect();
    let leader = pick_of(&estimates)?;
    if !known(&leader) {
        return Some((leader, "the model's leader"));
    }
    let leader_rps = measured.known(&leader, bound).rps.0;
    // The measured come first in the estimates.
    let best = estimates[..measured.samples.len()]
        .iter()
        .map(|e| e.1)
        .fold(0.0, f64::max);
    // Where the model held at the leader, a configuration beats it only if the model
    // ranks it above it by more than a tie (its error is the same along the knobs);
    // where it missed, wherever its interval reaches past the best by a tie.
    let at_leader = asked
        .iter()
        .find(|a| a.0 == leader)
        .and_then(|a| a.2)
        .unwrap_or_else(|| model.predict(&leader));
    let trusted = at_leader.holds(leader_rps);
    unmeasured
        .into_iter()
        .filter(|(v, p)| {
            let better = if trusted {
                p.prediction.rps > at_leader.prediction.rps * (1.0 + WITHIN_BEST)
            } else {
                p.high > best * (1.0 + WITHIN_BEST)
            };
            let smaller = size(v) < size(&leader) && p.high >= leader_rps * (1.0 - WITHIN_BEST);
            p.p99.low <= bound && (better || smaller)
        })
        .max_by(|a, b| a.1.high.total_cmp(&b.1.high))
        .map(|(v, _)| (v.clone(), "its interval reaches the leader's"))
}

/// Every configuration as the model saw it.
fn predictions(
    knobs: &[Knob],
    configs: &[Vec<u32>],
    model: &TuneModel,
    asked: &[Asked],
    measured: &Measured,
) -> Vec<ConfigPrediction> {
    configs
        .iter()
        .map(|v| {
            let ask = asked.iter().find(|a| &a.0 == v);
            let p = ask.and_then(|a| a.2).unwrap_or_else(|| model.predict(v));
            let first = measured.samples.get(v).and_then(|s| s.first());
            ConfigPrediction {
                values: v.clone(),
                label: label(knobs, v),
                rps: p.prediction.rps,
                low: p.low,
                high: p.high,
                p99_us: p.p99.us,
                p99_low: p.p99.low,
                p99_high: p.p99.high,
                binding: model.binding(v, &p).to_string(),
                why: ask.map(|a| a.1.to_string()),
                measured_rps: first.map(|s| s.rps),
                measured_p99_us: first.map(|s| s.p99_us),
            }
        })
        .collect()
}

fn summary(knobs: &[Knob], model: &TuneModel, predictions: &[ConfigPrediction]) -> ModelSummary {
    let mut misses: Vec<f64> = predictions
        .iter()
        .filter_map(ConfigPrediction::miss)
        .map(f64::abs)
        .collect();
    misses.sort_by(f64::total_cmp);
    let inside: Vec<bool> = predictions
        .iter()
        .filter_map(ConfigPrediction::inside)
        .collect();
    ModelSummary {
        roles: model.roles,
        reading: model.roles.words(knobs),
        error: model.fitted.error,
        configurations: predictions.len(),
        measured: predictions
            .iter()
            .filter(|p| p.measured_rps.is_some())
            .count(),
        median_miss: misses.get(misses.len() / 2).copied(),
        worst_miss: misses.last().copied(),
        inside: inside.iter().filter(|i| **i).count(),
        checked: inside.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{predict, ServerModel};

    fn knob(name: &str, lo: u32, hi: u32) -> Knob {
        Knob::named(name, lo, hi)
    }

    /// A server the model's own equations make: `roles`, 1 ms of CPU and a 10 ms wait a
    /// request, 2 cores, nothing beyond (no overhead, no hand-off): the model should find it
    /// exactly.
    struct Truth {
        roles: Roles,
        connections: u32,
        runs: Vec<Vec<u32>>,
    }

    impl Truth {
        fn sample(&self, values: &[u32], n: u32) -> Sample {
            let server = ServerModel {
                holding: self.roles.holding(),
                cores: self.roles.cores(values, 2.0),
                overhead_us: 0.0,
                round_trip_us: 0.0,
            };
            let work = Workload {
                cpu_us: 1000.0,
                wait_us: 10_000.0,
                blocking: self.roles.pool == PoolRole::PerRequest,
            };
            let p = predict(&server, &work, n, self.roles.pool(values));
            Sample {
                rps: p.rps,
                p99_us: 1.5 * p.latency_us,
                p50_us: p.latency_us,
                p99_lower_bound: false,
                ok: true,
                cpu_us: 1000.0,
                rss_kb: 1000,
                threads: 1,
                processes: 1,
                limit: None,
                bound_rps: 0.0,
                client_cpu_us: 0.0,
            }
        }
    }

    impl Measure<Run> for Truth {
        fn measure(&mut self, run: &Run) -> Option<Sample> {
            self.runs.push(run.values.clone());
            Some(self.sample(&run.values, self.connections))
        }
    }

    fn setting(connections: u32, p99_bound_us: f64) -> Setting {
        Setting {
            connections,
            machine_cores: 2.0,
            budget_cores: 2.0,
            p99_bound_us,
        }
    }

    fn decide(roles: Roles, knobs: &[Knob], n: u32, bound_us: f64) -> (Decided, Truth) {
        let mut truth = Truth {
            roles,
            connections: n,
            runs: Vec::new(),
        };
        let start: Vec<u32> = knobs.iter().map(|k| k.lo).collect();
        let one = OnePoint {
            values: start.clone(),
            sample: truth.sample(&start, 1),
            wait_us: 10_000.0,
        };
        let mut measured = Measured::default();
        let decided = search(
            knobs,
            &start,
            setting(n, bound_us),
            &one,
            &mut measured,
            &mut truth,
        )
        .unwrap();
        (decided, truth)
    }

    #[test]
    fn the_reading_of_the_knobs_is_found_and_the_pick_is_the_smallest_on_the_plateau() {
        // Processes with a lock each, threads held through the wait: 6 connections, so 6
        // threads serve all of them (2 x 3); 2 x 4 serves no more.
        let roles = Roles {
            pool: PoolRole::PerRequest,
            cores: CoresRole::First,
        };
        let knobs = [knob("workers", 1, 2), knob("threads", 1, 4)];
        let (d, truth) = decide(roles, &knobs, 6, 1e6);
        assert_eq!(d.model.roles, roles, "{:?}", d.model);
        assert_eq!(d.found.pick, [2, 3], "{:?}", truth.runs);
        // Measured: the first points (1x1, 2x1, 1x4), the leader; fewer than the grid's 8.
        assert!(truth.runs.len() <= 5, "{:?}", truth.runs);
        assert_eq!(d.predictions.len(), 8);
        // Every configuration measured after it was predicted fell inside its interval.
        assert_eq!(d.model.inside, d.model.checked, "{:?}", d.model);
        assert!(d.model.checked >= 1);
        let p = d.predictions.iter().find(|p| p.values == [2, 3]).unwrap();
        assert_eq!(p.why.as_deref(), Some("the model's leader"));
        assert!(
            (p.rps / p.measured_rps.unwrap() - 1.0).abs() < 1e-6,
            "{p:?}"
        );
        assert_eq!(p.binding, "wait");
    }

    #[test]
    fn event_loops_need_no_threads_and_a_tight_p99_bound_is_met() {
        // Event loops, one a process: the threads do nothing, the processes add cores.
        // 64 connections of 1 ms CPU and a 10 ms wait: about 64 / 11 ms = 5,800 offered,
        // 2,000 a second on 2 cores, 1,000 on one.
        let roles = Roles {
            pool: PoolRole::Unbounded,
            cores: CoresRole::First,
        };
        let knobs = [knob("workers", 1, 4), knob("threads", 1, 4)];
        let (d, truth) = decide(roles, &knobs, 64, 1e6);
        assert_eq!(d.model.roles.pool, PoolRole::Unbounded, "{:?}", d.model);
        assert_eq!(d.found.pick, [2, 1], "{:?}", truth.runs);
        assert!(truth.runs.len() < 16 / 2, "{:?}", truth.runs);
        // A p99 bound only two cores meet: one core's queue (64 requests, 64 ms) misses it.
        let one_core = truth.sample(&[1, 1], 64).p99_us;
        let (d, _) = decide(roles, &knobs, 64, one_core * 0.8);
        assert_eq!(d.found.pick, [2, 1]);
        assert!(d.found.level.rps.0 > 0.0);
    }

    #[test]
    fn the_pick_is_the_smallest_within_a_tie_of_the_best() {
        let e = |v: &[u32], r: f64| (v.to_vec(), r);
        assert_eq!(
            pick_of(&[e(&[1, 4], 100.0), e(&[2, 1], 96.0), e(&[2, 4], 101.0)]),
            Some(vec![2, 1])
        );
        assert_eq!(pick_of(&[e(&[1, 1], 0.0)]), None);
        assert_eq!(Roles::all(2).len(), 9);
        assert_eq!(Roles::all(1).len(), 6);
    }
}
