//! A count of waits, summed and with the longest, merged by adding: the engine's response holds
//! and HTTP/2's waits for a stream.

use std::time::Duration;

/// Waits of one kind: how many, their sum and the longest. The engine's: how long responses
/// waited between reaching their socket and being handled (the io_uring driver knows both;
/// the epoll driver times a response when it reads it); HTTP/2's: requests waiting for a stream.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Hold {
    /// Waits recorded (the engine's: reads whose arrival was timestamped).
    pub count: u64,
    pub total: Duration,
    pub max: Duration,
}

impl Hold {
    pub fn record(&mut self, held: Duration) {
        self.count += 1;
        self.total += held;
        self.max = self.max.max(held);
    }

    pub fn merge(&mut self, other: &Hold) {
        self.count += other.count;
        self.total += other.total;
        self.max = self.max.max(other.max);
    }

    /// The mean wait in µs (0 with none).
    pub fn mean_us(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total.as_secs_f64() * 1e6 / self.count as f64
        }
    }
}
