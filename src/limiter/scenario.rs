//! The named scenarios: a server and a request, the load offered as a multiple of the capacity
//! measured in the same run, what changes mid-run, and, for the reported complaints, the
//! controllers and the settings the complaint is about.

use crate::arch::Arch;

use super::controllers::Kind;

#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    pub name: &'static str,
    pub about: &'static str,
    /// Our server for it (`--arch`, `--workers` and `--cmd` replace it).
    pub arch: Arch,
    pub workers: u32,
    /// `/work`'s CPU per request (us) and wait (ms); the wait blocks a pool thread if `blocking`.
    pub cpu_us: u64,
    pub wait_ms: u64,
    pub blocking: bool,
    /// From this share of the run on, the wait is this multiple of `wait_ms`.
    pub steps: &'static [(f64, f64)],
    /// The offered rate, as a multiple of the capacity the knee's sweep measured.
    pub load: f64,
    /// The client's timeout as a multiple of the wait (else `--timeout`).
    pub timeout_waits: Option<f64>,
    /// Envoy's min_concurrency and Netflix's minLimit, where the complaint sets them high.
    pub min_limit: Option<usize>,
    /// The run's length as a multiple of `-d`.
    pub length: f64,
    /// The controllers the scenario is about (empty: every default one).
    pub controllers: &'static [Kind],
}

const POOL: Scenario = Scenario {
    name: "pool",
    about:
        "a pool of 8 threads on a 20 ms blocking wait (capacity 400 req/s, knee 8), offered 1.5x",
    arch: Arch::Hybrid,
    workers: 8,
    cpu_us: 0,
    wait_ms: 20,
    blocking: true,
    steps: &[],
    load: 1.5,
    timeout_waits: None,
    min_limit: None,
    length: 1.0,
    controllers: &[],
};

pub const SCENARIOS: &[Scenario] = &[
    POOL,
    Scenario {
        name: "steady",
        about: "async, 2 workers, 200 us of CPU and a 5 ms wait a request, offered 1.5x",
        arch: Arch::Async,
        workers: 2,
        cpu_us: 200,
        wait_ms: 5,
        blocking: false,
        ..POOL
    },
    Scenario {
        name: "wait-step",
        about: "the pool's wait doubles a third of the way in and comes back at two thirds",
        steps: &[(1.0 / 3.0, 2.0), (2.0 / 3.0, 1.0)],
        ..POOL
    },
    Scenario {
        name: "cpu",
        about: "async, 2 workers, 1 ms of CPU a request and no wait (CPU-bound), offered 1.5x",
        arch: Arch::Async,
        workers: 2,
        cpu_us: 1000,
        wait_ms: 0,
        blocking: false,
        ..POOL
    },
    Scenario {
        name: "creep",
        about:
            "Gradient2's creep (concurrency-limits PR #134): the pool at 1.5x, three times as long",
        length: 3.0,
        controllers: &[Kind::Gradient2, Kind::WindowedGradient2],
        ..POOL
    },
    Scenario {
        name: "timeout-rtt",
        about: "a constant timeout rtt (concurrency-limits #137): the pool at 1.5x, the client \
                timing out at 2.5 waits (50 ms)",
        timeout_waits: Some(2.5),
        controllers: &[
            Kind::Gradient2,
            Kind::WindowedGradient2,
            Kind::Vegas,
            Kind::Aimd,
        ],
        ..POOL
    },
    Scenario {
        name: "high-min",
        about: "a high minimum (envoy #38338): min_concurrency and minLimit 32 on the pool of 8",
        min_limit: Some(32),
        controllers: &[Kind::Envoy, Kind::Gradient2, Kind::Aimd],
        ..POOL
    },
];

pub fn find(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}

pub fn names() -> String {
    SCENARIOS
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Scenario {
    /// Whether the scenario changes or reads the backend's wait (an external server's URL must
    /// then take it as `{wait_ms}`).
    pub fn needs_wait(&self) -> bool {
        !self.steps.is_empty() || self.timeout_waits.is_some()
    }

    /// The distinct wait multiples of the run, the base first.
    pub fn wait_multiples(&self) -> Vec<f64> {
        let mut m = vec![1.0];
        for &(_, w) in self.steps {
            if !m.contains(&w) {
                m.push(w);
            }
        }
        m
    }

    /// Our server's request at `wait_ms`.
    pub fn our_path(&self, wait_ms: u64) -> String {
        let blocking = if self.blocking { "&wait=blocking" } else { "" };
        format!("/work?cpu_us={}&wait_ms={wait_ms}{blocking}", self.cpu_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_steps_rise_within_the_run() {
        for (i, s) in SCENARIOS.iter().enumerate() {
            assert_eq!(find(s.name).map(|f| f.name), Some(s.name));
            assert!(SCENARIOS[..i].iter().all(|o| o.name != s.name));
            assert!(s.steps.windows(2).all(|w| w[0].0 < w[1].0));
            assert!(s
                .steps
                .iter()
                .all(|&(at, m)| at > 0.0 && at < 1.0 && m > 0.0));
        }
        let step = find("wait-step").unwrap();
        assert_eq!(step.wait_multiples(), vec![1.0, 2.0]);
        assert!(step.needs_wait() && !find("pool").unwrap().needs_wait());
        assert_eq!(
            find("pool").unwrap().our_path(40),
            "/work?cpu_us=0&wait_ms=40&wait=blocking"
        );
    }
}
