//! What one engine thread counts while it runs ([`ThreadStats`]: latencies, statuses, errors,
//! bytes, holds), touching nothing shared, merged exactly at the end of the run.

use super::*;

/// Status codes are counted in an array indexed by code; anything above is protocol garbage.
pub(super) const STATUS_SLOTS: usize = 1000;

/// Failed requests (and connection attempts) by kind.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorCounts {
    pub connect: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
    #[serde(default)]
    pub protocol: u64,
}

impl ErrorCounts {
    /// All failures of every kind.
    pub fn total(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout + self.protocol
    }

    /// Counts `n` failures of one kind.
    #[inline]
    pub fn add(&mut self, kind: FailureKind, n: u64) {
        let counter = match kind {
            FailureKind::Connect => &mut self.connect,
            FailureKind::Read => &mut self.read,
            FailureKind::Write => &mut self.write,
            FailureKind::Timeout => &mut self.timeout,
            FailureKind::Protocol => &mut self.protocol,
        };
        *counter += n;
    }

    pub fn merge(&mut self, other: &ErrorCounts) {
        self.connect += other.connect;
        self.read += other.read;
        self.write += other.write;
        self.timeout += other.timeout;
        self.protocol += other.protocol;
    }
}

/// Everything one engine thread measured.
#[derive(Debug, Clone)]
pub struct ThreadStats {
    /// Latency from the intended send time (equal to the actual one outside rate mode).
    pub latency: LatencyHistogram,
    /// Rate mode only: latency from the actual send time, the view that hides stalls.
    pub latency_uncorrected: Option<LatencyHistogram>,
    /// `https://` only: TLS handshake times (from the TCP connection to the handshake's end),
    /// one per connection opened; none before the first handshake.
    pub handshake: Option<LatencyHistogram>,
    /// Handshakes that resumed an earlier session.
    pub handshakes_resumed: u64,
    /// Complete responses.
    pub requests: u64,
    /// Requests written (or started to be written) to a connection.
    pub sent: u64,
    /// Requests still waiting for their response when the run ended: neither answered nor
    /// timed out (younger than the timeout).
    pub unanswered: u64,
    /// Rate mode: requests that were due but could not be sent by the end.
    pub unsent: u64,
    /// Requests answered in the drain after the end of the run: latency samples, not counted
    /// as responses of the run (its throughput ends with it).
    pub drained: u64,
    /// Requests whose latency is only bounded below (see the module header).
    pub censored: Vec<Censored>,
    status_counts: Vec<u64>,
    pub errors: ErrorCounts,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Complete responses in each second of the run, by second index.
    pub completed_per_second: Vec<u64>,
    /// CPU time (user + system) the thread used, and the time it waited for a CPU.
    pub cpu_s: f64,
    pub wait_s: f64,
    /// Rate mode: the answered requests' own send lateness (from when each could go to when
    /// it went: the generator's, left out of their latency), summed, and how many.
    pub send_late_ns: u64,
    /// The longest of those.
    pub send_late_max_ns: u64,
    /// Rate mode: the time answered requests waited for their connection (still busy with an
    /// earlier one) after their intended time, summed: the server's, inside their latency.
    pub send_held_ns: u64,
    pub send_late_count: u64,
    /// When the thread's work ended, from the start of the run.
    pub elapsed: Duration,
    /// The time series (and `--hlog`) only: hands this thread's intervals to the collector.
    pub intervals: Option<crate::load::stats::series::IntervalRecorder>,
    /// `--urls` only: the same counts per request line.
    pub urls: Option<crate::load::stats::urls::UrlRecorder>,
    /// A load plan's per-step counts (see [`crate::load::stats::steps`]); none without a plan.
    pub steps: Option<crate::load::stats::steps::StepRecorder>,
    /// `--engine uring`: how long received responses waited to be handled.
    pub hold: Hold,
    /// HTTP/2 runs only: streams, the server's cap on them, GOAWAYs and resets.
    pub h2: Option<crate::load::stats::h2::H2Counts>,
    /// Closed loop: the connections' whole cycles and their seconds (see
    /// [`crate::load::engine::settle::CycleTotals`]).
    pub cycles: crate::load::engine::settle::CycleTotals,
    /// Every response read, counted or not (a settling run's first answers and the drain's
    /// included): what the server answered while the run lasted.
    pub responses_read: u64,
    /// Their bytes, head and body (HTTP/1.1 and echo; an HTTP/2 run counts none): unlike
    /// `bytes_read`, without the part of a response still arriving at the end.
    pub response_bytes: u64,
}

impl ThreadStats {
    pub fn new(uncorrected: bool) -> ThreadStats {
        ThreadStats {
            latency: LatencyHistogram::new(),
            latency_uncorrected: uncorrected.then(LatencyHistogram::new),
            handshake: None,
            handshakes_resumed: 0,
            requests: 0,
            sent: 0,
            unanswered: 0,
            unsent: 0,
            drained: 0,
            censored: Vec::new(),
            status_counts: vec![0; STATUS_SLOTS],
            errors: ErrorCounts::default(),
            bytes_read: 0,
            bytes_written: 0,
            completed_per_second: Vec::with_capacity(64),
            cpu_s: 0.0,
            wait_s: 0.0,
            send_late_ns: 0,
            send_late_max_ns: 0,
            send_held_ns: 0,
            send_late_count: 0,
            elapsed: Duration::ZERO,
            intervals: None,
            urls: None,
            steps: None,
            hold: Hold::default(),
            h2: None,
            cycles: Default::default(),
            responses_read: 0,
            response_bytes: 0,
        }
    }

    /// Counts one complete response that finished `since_start` into the run.
    #[inline]
    pub fn count_response(&mut self, status: u16, since_start: Duration) {
        self.requests += 1;
        if let Some(slot) = self.status_counts.get_mut(usize::from(status)) {
            *slot += 1;
        }
        let second = since_start.as_secs() as usize;
        if second >= self.completed_per_second.len() {
            self.completed_per_second.resize(second + 1, 0);
        }
        self.completed_per_second[second] += 1;
    }

    /// Status codes seen, as the report's `{"200": n}` map (echo replies have none).
    pub fn status_map(&self) -> BTreeMap<String, u64> {
        self.status_counts
            .iter()
            .enumerate()
            .filter(|(code, n)| *code != 0 && **n != 0)
            .map(|(code, n)| (code.to_string(), *n))
            .collect()
    }

    /// Adds another thread's measurements into this one.
    pub fn merge(&mut self, other: &ThreadStats) {
        self.latency.merge(&other.latency);
        merge_optional(
            &mut self.latency_uncorrected,
            &other.latency_uncorrected,
            LatencyHistogram::merge,
        );
        merge_optional(
            &mut self.handshake,
            &other.handshake,
            LatencyHistogram::merge,
        );
        self.handshakes_resumed += other.handshakes_resumed;
        self.cycles.merge(&other.cycles);
        self.responses_read += other.responses_read;
        self.response_bytes += other.response_bytes;
        self.hold.merge(&other.hold);
        merge_optional(
            &mut self.h2,
            &other.h2,
            crate::load::stats::h2::H2Counts::merge,
        );
        self.requests += other.requests;
        self.sent += other.sent;
        self.unanswered += other.unanswered;
        self.unsent += other.unsent;
        self.drained += other.drained;
        self.censored.extend_from_slice(&other.censored);
        for (mine, theirs) in self.status_counts.iter_mut().zip(&other.status_counts) {
            *mine += theirs;
        }
        self.errors.merge(&other.errors);
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        if other.completed_per_second.len() > self.completed_per_second.len() {
            self.completed_per_second
                .resize(other.completed_per_second.len(), 0);
        }
        for (mine, theirs) in self
            .completed_per_second
            .iter_mut()
            .zip(&other.completed_per_second)
        {
            *mine += theirs;
        }
        self.cpu_s += other.cpu_s;
        self.wait_s += other.wait_s;
        self.send_late_ns += other.send_late_ns;
        self.send_late_max_ns = self.send_late_max_ns.max(other.send_late_max_ns);
        self.send_held_ns += other.send_held_ns;
        self.send_late_count += other.send_late_count;
        self.elapsed = self.elapsed.max(other.elapsed);
        merge_optional(
            &mut self.urls,
            &other.urls,
            crate::load::stats::urls::UrlRecorder::merge,
        );
        merge_optional(
            &mut self.steps,
            &other.steps,
            crate::load::stats::steps::StepRecorder::merge,
        );
    }
}

/// Merges a part only some threads have: theirs into mine, or a copy of theirs where I have none.
fn merge_optional<T: Clone>(mine: &mut Option<T>, theirs: &Option<T>, merge: fn(&mut T, &T)) {
    match (mine.as_mut(), theirs) {
        (Some(m), Some(t)) => merge(m, t),
        (None, Some(t)) => *mine = Some(t.clone()),
        _ => {}
    }
}

/// Requests/s for each second of a run lasting `duration_s`: whole seconds as counted, and the
/// final partial second (if at least a tenth of one) scaled to a rate.
pub fn per_second_rates(completed_per_second: &[u64], duration_s: f64) -> Vec<f64> {
    let whole = duration_s.floor() as usize;
    let fraction = duration_s - duration_s.floor();
    let mut rates: Vec<f64> = (0..whole)
        .map(|i| completed_per_second.get(i).copied().unwrap_or(0) as f64)
        .collect();
    if fraction >= 0.1 || (whole == 0 && fraction > 0.0) {
        let tail: u64 = completed_per_second.iter().skip(whole).sum();
        rates.push(tail as f64 / fraction);
    }
    rates
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_add_up_and_keep_their_longest() {
        let mut a = Hold::default();
        assert_eq!(a.mean_us(), 0.0);
        a.record(Duration::from_micros(100));
        a.record(Duration::from_micros(300));
        let mut b = Hold::default();
        b.record(Duration::from_micros(50));
        a.merge(&b);
        assert_eq!(a.count, 3);
        assert_eq!(a.max, Duration::from_micros(300));
        assert_eq!(a.mean_us(), 150.0);
    }

    #[test]
    fn thread_stats_merge_sums_counts_and_seconds() {
        let mut a = ThreadStats::new(true);
        let mut b = ThreadStats::new(false);
        a.count_response(200, Duration::from_millis(100));
        a.count_response(404, Duration::from_millis(1500));
        b.count_response(200, Duration::from_millis(2500));
        b.errors.add(FailureKind::Timeout, 3);
        b.errors.add(FailureKind::Connect, 1);
        b.elapsed = Duration::from_secs(3);
        a.merge(&b);
        assert_eq!(a.requests, 3);
        assert_eq!(a.completed_per_second, vec![1, 1, 1]);
        assert_eq!(a.errors.total(), 4);
        assert_eq!(a.errors.timeout, 3);
        assert_eq!(a.elapsed, Duration::from_secs(3));
        let map = a.status_map();
        assert_eq!(map.get("200"), Some(&2));
        assert_eq!(map.get("404"), Some(&1));
        assert_eq!(map.len(), 2);
    }

    #[test]
    fn per_second_rates_scale_the_partial_tail() {
        assert_eq!(per_second_rates(&[10, 20, 5], 2.5), vec![10.0, 20.0, 10.0]);
        assert_eq!(per_second_rates(&[10, 20], 2.0), vec![10.0, 20.0]);
        assert_eq!(per_second_rates(&[10, 20, 1], 2.05), vec![10.0, 20.0]);
        assert_eq!(per_second_rates(&[], 1.0), vec![0.0]);
        assert_eq!(per_second_rates(&[5], 0.05), vec![100.0]);
    }
}
