//! The adaptive concurrency controllers, each a pure state machine driven by the gate
//! ([`super::gate`]) or by a test's sequence of samples: it is told when a request is admitted,
//! how each one ended, and what time it is; it answers with its limit. Time is nanoseconds
//! from the start of a run, as the libraries' `nanoTime`, so a test replays a run exactly.
//! Each controller file names the source file and commit whose rule and defaults it follows.

pub mod aimd;
pub mod envoy;
pub mod gradient2;
pub mod vector;
pub mod vegas;
pub mod windowed;

use serde::{Deserialize, Serialize};

/// Nanoseconds since the start of the run.
pub type Nanos = u64;

/// How one admitted request ended, as a limiter's listener hears it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// A response the client takes as success (any status but the two below).
    Answered,
    /// A response that asks the client to back off: 429 or 503.
    BackPressure,
    /// No response within the timeout.
    Timeout,
    /// The connection failed (refused, reset, closed mid-response).
    Failed,
}

/// One admitted request, ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// When it was admitted.
    pub start: Nanos,
    /// From admission to its end (at least 1 ns).
    pub rtt: Nanos,
    /// Requests in flight when it was admitted, itself included (Netflix's `currentInflight`).
    pub inflight: usize,
    pub ending: Ending,
}

impl Outcome {
    /// Netflix's `didDrop`: the listener's `onDropped` (a timeout or a failed call); a
    /// response of any status is `onSuccess`, as the servlet and gRPC integrations call it.
    pub fn dropped(&self) -> bool {
        matches!(self.ending, Ending::Timeout | Ending::Failed)
    }
}

/// A limiter's rule: the gate admits a request while fewer than [`Controller::limit`] are in
/// flight and rejects it at once otherwise.
pub trait Controller: Send {
    fn limit(&self) -> usize;
    /// A request was admitted at `now`; `inflight` counts it.
    fn on_admit(&mut self, _now: Nanos, _inflight: usize) {}
    /// A request admitted earlier ended at `now`.
    fn on_outcome(&mut self, now: Nanos, outcome: &Outcome);
    /// Time passed: a controller with timers of its own (Envoy's) fires those due by `now`.
    fn on_time(&mut self, _now: Nanos) {}
}

/// The controllers a run can put in front of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Netflix's VegasLimit, on every sample (the limiter's default limit).
    Vegas,
    /// Netflix's Gradient2Limit, on every sample.
    Gradient2,
    /// Netflix's AIMDLimit, on every sample.
    Aimd,
    /// Gradient2Limit behind WindowedLimit (the README's server example).
    WindowedGradient2,
    /// VegasLimit behind WindowedLimit.
    WindowedVegas,
    /// AIMDLimit behind WindowedLimit.
    WindowedAimd,
    /// Envoy's adaptive concurrency filter, gradient controller.
    Envoy,
    /// Vector's adaptive request concurrency.
    Vector,
    /// A fixed limit.
    Static,
}

impl Kind {
    pub const ALL: [Kind; 9] = [
        Kind::Vegas,
        Kind::Gradient2,
        Kind::Aimd,
        Kind::WindowedGradient2,
        Kind::WindowedVegas,
        Kind::WindowedAimd,
        Kind::Envoy,
        Kind::Vector,
        Kind::Static,
    ];

    /// What a run puts in front of the server unless told otherwise (the static limits are
    /// added by the run itself, around the knee).
    pub const DEFAULT: [Kind; 6] = [
        Kind::Vegas,
        Kind::Gradient2,
        Kind::WindowedGradient2,
        Kind::Aimd,
        Kind::Envoy,
        Kind::Vector,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Vegas => "vegas",
            Kind::Gradient2 => "gradient2",
            Kind::Aimd => "aimd",
            Kind::WindowedGradient2 => "windowed-gradient2",
            Kind::WindowedVegas => "windowed-vegas",
            Kind::WindowedAimd => "windowed-aimd",
            Kind::Envoy => "envoy",
            Kind::Vector => "vector",
            Kind::Static => "static",
        }
    }

    /// The name a verdict uses.
    pub fn title(self) -> &'static str {
        match self {
            Kind::Vegas => "Vegas",
            Kind::Gradient2 => "Gradient2",
            Kind::Aimd => "AIMD",
            Kind::WindowedGradient2 => "Windowed Gradient2",
            Kind::WindowedVegas => "Windowed Vegas",
            Kind::WindowedAimd => "Windowed AIMD",
            Kind::Envoy => "Envoy's gradient",
            Kind::Vector => "Vector's ARC",
            Kind::Static => "Static",
        }
    }

    pub fn parse(text: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == text)
    }

    pub fn names() -> String {
        Kind::ALL.map(Kind::name).join(", ")
    }
}

/// What a scenario changes in a controller's defaults (the reported complaints).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Overrides {
    /// Envoy's `min_concurrency`; Netflix's `minLimit` (Gradient2, AIMD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_limit: Option<usize>,
}

/// A controller of `kind` with its library's defaults (a static one at `static_limit`), `seed`
/// for the jitter the rule draws (Vegas's probes, Envoy's minRTT window).
pub fn build(
    kind: Kind,
    static_limit: usize,
    overrides: Overrides,
    seed: u64,
) -> Box<dyn Controller> {
    let mut gradient2 = gradient2::Gradient2Config::default();
    let mut aimd = aimd::AimdConfig::default();
    let mut envoy = envoy::EnvoyConfig::default();
    if let Some(min) = overrides.min_limit {
        gradient2.min_limit = min;
        gradient2.initial_limit = gradient2.initial_limit.max(min);
        aimd.min_limit = min;
        aimd.initial_limit = aimd.initial_limit.max(min);
        envoy.min_concurrency = min as u32;
    }
    let vegas = vegas::VegasConfig::default();
    match kind {
        Kind::Vegas => Box::new(vegas::Vegas::new(vegas, seed)),
        Kind::Gradient2 => Box::new(gradient2::Gradient2::new(gradient2)),
        Kind::Aimd => Box::new(aimd::Aimd::new(aimd)),
        Kind::WindowedGradient2 => Box::new(windowed::Windowed::new(
            windowed::WindowConfig::default(),
            gradient2::Gradient2::new(gradient2),
        )),
        Kind::WindowedVegas => Box::new(windowed::Windowed::new(
            windowed::WindowConfig::default(),
            vegas::Vegas::new(vegas, seed),
        )),
        Kind::WindowedAimd => Box::new(windowed::Windowed::new(
            windowed::WindowConfig::default(),
            aimd::Aimd::new(aimd),
        )),
        Kind::Envoy => Box::new(envoy::Envoy::new(envoy, seed)),
        Kind::Vector => Box::new(vector::Vector::new(vector::VectorConfig::default())),
        Kind::Static => Box::new(Static(static_limit.max(1))),
    }
}

/// A fixed limit (Netflix's FixedLimit).
#[derive(Debug, Clone, Copy)]
pub struct Static(pub usize);

impl Controller for Static {
    fn limit(&self) -> usize {
        self.0
    }
    fn on_outcome(&mut self, _now: Nanos, _outcome: &Outcome) {}
}

/// Netflix's `AbstractLimit.onSample` for a rule that takes `(startTime, rtt, inflight,
/// didDrop)` and returns the new limit; shared by Vegas, Gradient2 and AIMD so that
/// [`windowed::Windowed`] can stand in front of any of them.
pub trait NetflixLimit: Send {
    fn limit(&self) -> usize;
    fn on_sample(&mut self, start: Nanos, rtt: Nanos, inflight: usize, did_drop: bool);
}

/// A Netflix limit heard on every sample, as `SimpleLimiter`'s listener calls it.
impl<T: NetflixLimit> Controller for T {
    fn limit(&self) -> usize {
        NetflixLimit::limit(self)
    }
    fn on_outcome(&mut self, _now: Nanos, o: &Outcome) {
        self.on_sample(o.start, o.rtt.max(1), o.inflight, o.dropped());
    }
}

/// The index of the `q` quantile of `len` sorted values by nearest rank (`len` > 0): the
/// summary Envoy's window takes, and the judge's median and spread.
pub fn nearest_rank(len: usize, q: f64) -> usize {
    ((q * len as f64).ceil() as usize).clamp(1, len) - 1
}

/// Netflix's `Log10RootIntFunction` (baseline 0): `max(1, (int) log10(t))` below 1,000, else
/// `(int) log10(t)`; Java's cast makes log10(0) = -inf the smallest int, so 0 gives 1.
pub fn log10_root(t: i64) -> i64 {
    if t < 1 {
        return 1;
    }
    let l = (t as f64).log10() as i64;
    if t < 1000 {
        l.max(1)
    } else {
        l
    }
}

#[cfg(test)]
pub mod testing {
    use super::*;

    pub const MS: Nanos = 1_000_000;

    /// An answered request admitted at `start_ms` that took `rtt_ms`, with `inflight` in flight.
    pub fn answered(start_ms: f64, rtt_ms: f64, inflight: usize) -> Outcome {
        Outcome {
            start: (start_ms * MS as f64) as Nanos,
            rtt: (rtt_ms * MS as f64) as Nanos,
            inflight,
            ending: Ending::Answered,
        }
    }

    pub fn ending(mut o: Outcome, ending: Ending) -> Outcome {
        o.ending = ending;
        o
    }

    /// Feeds `o` at its own end time; returns the limit after it.
    pub fn feed(c: &mut dyn Controller, o: Outcome) -> usize {
        let end = o.start + o.rtt;
        c.on_time(end);
        c.on_outcome(end, &o);
        c.limit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log10_root_is_the_java_lookup() {
        for (t, want) in [(0, 1), (1, 1), (9, 1), (10, 1), (99, 1), (100, 2), (999, 2)] {
            assert_eq!(log10_root(t), want, "{t}");
        }
        assert_eq!(log10_root(1000), 3);
        assert_eq!(log10_root(12_345), 4);
    }

    #[test]
    fn every_kind_has_one_name_that_parses_back() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.name()), Some(k));
        }
        assert_eq!(Kind::parse("gradient"), None);
    }

    #[test]
    fn a_static_limit_never_moves_and_overrides_reach_the_minimums() {
        let mut s = build(Kind::Static, 8, Overrides::default(), 1);
        s.on_outcome(5, &testing::answered(0.0, 100.0, 8));
        assert_eq!(s.limit(), 8);
        let high = Overrides {
            min_limit: Some(50),
        };
        assert_eq!(build(Kind::Gradient2, 0, high, 1).limit(), 50);
        assert_eq!(build(Kind::Aimd, 0, high, 1).limit(), 50);
        // Envoy starts in its minRTT window, pinned at min_concurrency.
        assert_eq!(build(Kind::Envoy, 0, high, 1).limit(), 50);
        assert_eq!(build(Kind::Envoy, 0, Overrides::default(), 1).limit(), 3);
        assert_eq!(build(Kind::Vegas, 0, high, 1).limit(), 20);
        assert_eq!(build(Kind::Vector, 0, high, 1).limit(), 1);
    }
}
