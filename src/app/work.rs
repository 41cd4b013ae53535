//! `/work?cpu_us=C&wait_ms=W`: a workload the user describes, CPU and waiting in the
//! proportions of their own. [`WorkSpec::parse`] reads the query, [`WorkSpec::draw`] draws one
//! request's [`Work`] from a seeded generator, and [`spin`] does its CPU. Each architecture
//! waits its own way (as for `/sleep`) unless `wait=blocking`, then spins in the thread that
//! runs the request; the reply is [`Work::done`].

use std::time::Duration;

use rand::SeedableRng;
use rand_distr::{Distribution, Exp1, LogNormal};

use crate::http::Response;

/// Most CPU one `/work` request may ask for, microseconds (10 s).
pub const MAX_WORK_CPU_US: u64 = 10_000_000;
/// Longest wait one `/work` request may ask for, milliseconds (60 s).
pub const MAX_WORK_WAIT_MS: u64 = 60_000;
/// Largest coefficient of variation `dist=lognormal` takes.
pub const MAX_CV: f64 = 10.0;

/// How a request's CPU and wait spread around the means asked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Spread {
    /// Exactly the means.
    Const,
    /// Exponential (coefficient of variation 1).
    Exp,
    /// Lognormal with this coefficient of variation.
    LogNormal(f64),
}

/// What a `/work` query asks for, before a request's draw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkSpec {
    pub cpu_us: u64,
    /// The mean wait in microseconds (`wait_ms` x 1000, or `wait_us`).
    pub wait_us: u64,
    pub spread: Spread,
    /// `wait=blocking`: the wait blocks whichever thread runs the request, as a synchronous
    /// database driver does; else (`wait=async`, the default) each architecture waits for it
    /// the way it waits for `/sleep`.
    pub blocking: bool,
    pub seed: u64,
}

/// One request's work, drawn: first the wait (a query), then the CPU (rendering its answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Work {
    pub cpu: Duration,
    pub wait: Duration,
    pub blocking: bool,
    /// The wait is over: only the CPU is left.
    pub waited: bool,
}

impl WorkSpec {
    /// Reads `cpu_us`, `wait_ms` or `wait_us` (for waits under a millisecond; each 0 when
    /// absent, not both), `wait=async|blocking`,
    /// `dist=const|exp|lognormal`, `cv` (lognormal only) and `seed`; the error is the 400's
    /// text.
    pub fn parse(param: impl Fn(&str) -> Option<String>) -> Result<WorkSpec, String> {
        let int = |name: &str, max: u64| -> Result<u64, String> {
            match param(name) {
                None => Ok(0),
                Some(v) => v
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n <= max)
                    .ok_or_else(|| format!("/work needs {name} in 0..={max}, not {v:?}\n")),
            }
        };
        let cpu_us = int("cpu_us", MAX_WORK_CPU_US)?;
        let wait_us = match (param("wait_ms"), param("wait_us")) {
            (Some(_), Some(_)) => return Err("/work: wait_ms or wait_us, not both\n".into()),
            (_, Some(_)) => int("wait_us", MAX_WORK_WAIT_MS * 1000)?,
            _ => int("wait_ms", MAX_WORK_WAIT_MS)? * 1000,
        };
        let blocking = match param("wait").as_deref() {
            None | Some("async") => false,
            Some("blocking") => true,
            Some(other) => {
                return Err(format!("/work: wait is async or blocking, not {other:?}\n"))
            }
        };
        let cv = match param("cv") {
            None => None,
            Some(v) => Some(
                v.parse::<f64>()
                    .ok()
                    .filter(|cv| *cv > 0.0 && *cv <= MAX_CV)
                    .ok_or_else(|| format!("/work needs cv in (0, {MAX_CV}], not {v:?}\n"))?,
            ),
        };
        let spread = match (param("dist").as_deref(), cv) {
            (None | Some("const"), None) => Spread::Const,
            (Some("exp"), None) => Spread::Exp,
            (Some("lognormal"), Some(cv)) => Spread::LogNormal(cv),
            (Some("lognormal"), None) => return Err("/work: dist=lognormal needs cv\n".into()),
            (None | Some("const" | "exp"), Some(_)) => {
                return Err("/work: cv goes with dist=lognormal only\n".into())
            }
            (Some(other), _) => {
                return Err(format!(
                    "/work: dist is const, exp or lognormal, not {other:?}\n"
                ))
            }
        };
        let seed = match param("seed") {
            None => 1,
            Some(v) => v
                .parse::<u64>()
                .map_err(|_| format!("/work needs seed as a whole number, not {v:?}\n"))?,
        };
        Ok(WorkSpec {
            cpu_us,
            wait_us,
            spread,
            blocking,
            seed,
        })
    }

    /// Request number `index`'s work: the means scaled by two independent draws of mean 1
    /// from the spread (one for the CPU, one for the wait), from a generator seeded by
    /// `(seed, index)`, so the same requests draw the same work in every run. A draw past
    /// the bounds is cut to them.
    pub fn draw(&self, index: u64) -> Work {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(
            self.seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let mut factor = || -> f64 {
            match self.spread {
                Spread::Const => 1.0,
                Spread::Exp => Exp1.sample(&mut rng),
                Spread::LogNormal(cv) => LogNormal::from_mean_cv(1.0, cv)
                    .expect("cv is checked positive and finite")
                    .sample(&mut rng),
            }
        };
        let cpu_us = (self.cpu_us as f64 * factor()).min(MAX_WORK_CPU_US as f64);
        let wait_us = (self.wait_us as f64 * factor()).min(MAX_WORK_WAIT_MS as f64 * 1e3);
        Work {
            cpu: Duration::from_nanos((cpu_us * 1e3) as u64),
            wait: Duration::from_nanos((wait_us * 1e3) as u64),
            blocking: self.blocking,
            waited: false,
        }
    }
}

impl Work {
    /// What is left to wait: the drawn wait, or nothing once it is over.
    pub fn wait_left(&self) -> Duration {
        if self.waited {
            Duration::ZERO
        } else {
            self.wait
        }
    }

    /// The same work with its wait over.
    pub fn after_wait(self) -> Work {
        Work {
            waited: true,
            ..self
        }
    }

    /// The reply once the work is done: what was drawn, in whole microseconds.
    pub fn done(&self) -> Response {
        Response::text(
            200,
            format!(
                "cpu_us={} wait_us={}\n",
                self.cpu.as_micros(),
                self.wait.as_micros()
            ),
        )
    }
}

/// Burns `cpu` of the calling thread's own CPU time (its CPU clock, not the wall clock, so a
/// request preempted halfway still does all of its work), asking `cancel` about every
/// millisecond of it; false when `cancel` said to give up.
pub fn spin(cpu: Duration, cancel: &mut dyn FnMut() -> bool) -> bool {
    let start = thread_cpu();
    let mut next_check = Duration::from_millis(1);
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    loop {
        // About a microsecond of work between two reads of the clock (a system call of a
        // fraction of that): the spin ends within a few microseconds of `cpu`.
        for _ in 0..256 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        std::hint::black_box(x);
        let used = thread_cpu().saturating_sub(start);
        if used >= cpu {
            return true;
        }
        if used >= next_check {
            if cancel() {
                return false;
            }
            next_check = used + Duration::from_millis(1);
        }
    }
}

/// The calling thread's CPU time so far.
fn thread_cpu() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(Duration::from)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(query: &str) -> Result<WorkSpec, String> {
        let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        WorkSpec::parse(|name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn parses_the_workload_and_refuses_what_is_out_of_bounds() {
        let spec = parse("cpu_us=2000&wait_ms=30&dist=lognormal&cv=1.5&wait=blocking&seed=7");
        assert_eq!(
            spec,
            Ok(WorkSpec {
                cpu_us: 2000,
                wait_us: 30_000,
                spread: Spread::LogNormal(1.5),
                blocking: true,
                seed: 7,
            })
        );
        let plain = parse("").unwrap();
        assert_eq!(
            (plain.cpu_us, plain.wait_us, plain.spread),
            (0, 0, Spread::Const)
        );
        assert!(!plain.blocking);
        assert!(parse("cpu_us=10000000&wait_ms=60000").is_ok());
        assert_eq!(parse("cpu_us=20&wait_us=200").unwrap().wait_us, 200);
        assert_eq!(
            parse("wait_us=200").unwrap().draw(0).wait,
            Duration::from_micros(200)
        );
        for bad in [
            "wait_ms=1&wait_us=200",
            "wait_us=60000001",
            "cpu_us=10000001",
            "wait_ms=60001",
            "cpu_us=-1",
            "cpu_us=abc",
            "wait=sometimes",
            "dist=uniform",
            "dist=lognormal",
            "dist=lognormal&cv=0",
            "dist=lognormal&cv=11",
            "dist=exp&cv=1",
            "cv=1",
            "seed=x",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn draws_are_reproducible_and_follow_the_spread() {
        let spec = parse("cpu_us=1000&wait_ms=10&dist=exp").unwrap();
        assert_eq!(spec.draw(5), spec.draw(5));
        assert_ne!(spec.draw(5), spec.draw(6));
        let constant = parse("cpu_us=1000&wait_ms=10").unwrap().draw(3);
        assert_eq!(
            (constant.cpu, constant.wait),
            (Duration::from_millis(1), Duration::from_millis(10))
        );
        let moments = |spec: WorkSpec| {
            let waits: Vec<f64> = (0..200_000)
                .map(|i| spec.draw(i).wait.as_secs_f64() * 1e3)
                .collect();
            let mean = waits.iter().sum::<f64>() / waits.len() as f64;
            let var = waits.iter().map(|w| (w - mean).powi(2)).sum::<f64>() / waits.len() as f64;
            (mean, var.sqrt() / mean)
        };
        let (mean, cv) = moments(spec);
        assert!(
            (mean - 10.0).abs() < 0.1 && (cv - 1.0).abs() < 0.02,
            "{mean} {cv}"
        );
        let (mean, cv) = moments(parse("wait_ms=10&dist=lognormal&cv=0.5").unwrap());
        assert!(
            (mean - 10.0).abs() < 0.1 && (cv - 0.5).abs() < 0.02,
            "{mean} {cv}"
        );
    }

    #[test]
    fn a_draw_is_cut_to_the_bounds() {
        let spec = parse("cpu_us=10000000&wait_ms=60000&dist=lognormal&cv=10").unwrap();
        for i in 0..1000 {
            let w = spec.draw(i);
            assert!(w.cpu <= Duration::from_secs(10) && w.wait <= Duration::from_secs(60));
        }
    }

    #[test]
    fn spin_burns_thread_cpu_and_gives_up_when_asked() {
        let before = thread_cpu();
        assert!(spin(Duration::from_millis(5), &mut || false));
        let used = thread_cpu() - before;
        assert!(
            used >= Duration::from_millis(5) && used < Duration::from_millis(6),
            "{used:?}"
        );
        let mut asked = 0;
        assert!(!spin(Duration::from_secs(5), &mut || {
            asked += 1;
            asked == 3
        }));
        assert!(thread_cpu() - before < Duration::from_millis(50));
    }
}
