//! A server's profile at one connection, as `advise --from` and `tune` read it for Goetz's
//! pool: what a request spends off the CPU. At one connection a request's latency is its CPU,
//! its wait, and the time its server's and its load generator's threads stood runnable on a
//! run queue while the CPUs were busy with other work. That last part is the machine's, not
//! the server's: left in, a busy machine would pass for a slow backend and inflate the pool.

/// What one connection measured, per request, in µs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct OneConnection {
    /// The mean latency.
    pub latency_us: f64,
    /// The server's CPU.
    pub cpu_us: f64,
    /// The server's threads' run-queue wait (`schedstat`).
    pub server_runqueue_us: f64,
    /// The load generator's threads' run-queue wait.
    pub client_runqueue_us: f64,
}

impl OneConnection {
    /// The wait a request spends off every CPU, µs: its latency less its CPU and the
    /// run-queue waits; never below 0.
    pub fn wait_us(&self) -> f64 {
        (self.latency_us - self.cpu_us - self.runqueue_us()).max(0.0)
    }

    /// Both run-queue waits, µs.
    pub fn runqueue_us(&self) -> f64 {
        self.server_runqueue_us + self.client_runqueue_us
    }

    /// "W of run-queue wait (the server's S, the load generator's G)", or `None` under a
    /// microsecond: what [`Self::wait_us`] took out besides the CPU, for the profile's text.
    pub fn runqueue_text(&self) -> Option<String> {
        let us = |us: f64| match us >= 1.0 {
            true => crate::render::numbers::duration_us(us),
            false => "0".to_string(),
        };
        (self.runqueue_us() >= 1.0).then(|| {
            format!(
                "{} of run-queue wait (the server's {}, the load generator's {})",
                us(self.runqueue_us()),
                us(self.server_runqueue_us),
                us(self.client_runqueue_us)
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_is_the_latency_less_the_cpu_and_the_run_queues() {
        // 2 ms of CPU and a 10 ms sleep on a machine whose other work kept the server's
        // thread waiting 1.5 ms and the generator's 0.4 ms: 13.9 ms of latency, 10 ms of wait.
        let p = OneConnection {
            latency_us: 13_900.0,
            cpu_us: 2_000.0,
            server_runqueue_us: 1_500.0,
            client_runqueue_us: 400.0,
        };
        assert!((p.wait_us() - 10_000.0).abs() < 1e-9, "{}", p.wait_us());
        assert_eq!(
            p.runqueue_text().as_deref(),
            Some("1.9 ms of run-queue wait (the server's 1.5 ms, the load generator's 400 us)")
        );
    }

    #[test]
    fn an_idle_machine_leaves_the_latency_less_the_cpu_and_never_below_zero() {
        let idle = OneConnection {
            latency_us: 12_100.0,
            cpu_us: 2_000.0,
            ..OneConnection::default()
        };
        assert_eq!(idle.wait_us(), 10_100.0);
        assert_eq!(idle.runqueue_text(), None);
        // A CPU figure above the latency (the server's other threads' work counted in): 0.
        let over = OneConnection {
            latency_us: 900.0,
            cpu_us: 1_000.0,
            server_runqueue_us: 50.0,
            client_runqueue_us: 0.0,
        };
        assert_eq!(over.wait_us(), 0.0);
        assert_eq!(
            over.runqueue_text().as_deref(),
            Some("50 us of run-queue wait (the server's 50 us, the load generator's 0)")
        );
    }
}
