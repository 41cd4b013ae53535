//! Per-line statistics of a `--urls` run: each engine thread keeps a [`UrlRecorder`] (a
//! histogram and a few counters per line of the [`UrlList`]), turned into [`UrlReport`]s at the
//! end, added exactly over threads and over the workers of a distributed run
//! ([`merge_url_reports`]), and shown as one table. The histograms keep 2 significant digits
//! (1% precision, 26 KB each instead of 190 KB) so that a file of
//! [`MAX_URL_LINES`](crate::load::source::urls::MAX_URL_LINES) lines costs at most 26 MB per
//! thread; a response increments a counter and records one value.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::load::error::FailureKind;
use crate::load::source::urls::UrlList;
use crate::load::stats::LatencyKey;
use crate::load::stats::{
    censored_view, Censored, ErrorCounts, LatencyHistogram, LatencySummary, LatencyView,
};

/// What one thread measured for one request line.
#[derive(Debug, Clone)]
pub struct UrlStats {
    /// Latency of answered requests (from intended send times in rate mode), 2 digits.
    pub latency: LatencyHistogram,
    /// Complete responses within the run (not the drain's).
    pub responses: u64,
    /// Requests written (or started to be written).
    pub sent: u64,
    /// Answered in the drain after the end: samples, not responses of the run.
    pub drained: u64,
    /// Responses by status code, in order of first appearance (a handful of codes).
    status: Vec<(u16, u64)>,
    /// Requests of this line that failed (connect failures belong to no line).
    pub errors: ErrorCounts,
    /// Sent, neither answered nor timed out when the run ended.
    pub unanswered: u64,
    /// Rate mode: due but never sent.
    pub unsent: u64,
    /// The censored requests of this line (see [`crate::load::stats`]).
    pub censored: Vec<Censored>,
}

impl Default for UrlStats {
    fn default() -> Self {
        UrlStats {
            latency: LatencyHistogram::coarse(),
            responses: 0,
            sent: 0,
            drained: 0,
            status: Vec::with_capacity(4),
            errors: ErrorCounts::default(),
            unanswered: 0,
            unsent: 0,
            censored: Vec::new(),
        }
    }
}

impl UrlStats {
    /// Responses by status code, as the report's map.
    pub fn status_map(&self) -> BTreeMap<String, u64> {
        self.status
            .iter()
            .filter(|(code, _)| *code != 0)
            .map(|(code, n)| (code.to_string(), *n))
            .collect()
    }
}

/// Per-line statistics of one thread: the piece of the recorder `--urls` adds.
#[derive(Debug, Clone, Default)]
pub struct UrlRecorder {
    pub urls: Vec<UrlStats>,
}

impl UrlRecorder {
    pub fn new(lines: usize) -> UrlRecorder {
        UrlRecorder {
            urls: (0..lines).map(|_| UrlStats::default()).collect(),
        }
    }

    /// `count` requests starting at line `first` were sent, in rotation order.
    #[inline]
    pub fn sent(&mut self, first: usize, count: usize) {
        let n = self.urls.len();
        for j in 0..count {
            self.urls[(first + j) % n].sent += 1;
        }
    }

    /// A complete response to a request of `line`, `latency` after it was (meant to be) sent.
    /// In the drain it is a sample only.
    #[inline]
    pub fn response(&mut self, line: usize, latency: Duration, status: u16, draining: bool) {
        let url = &mut self.urls[line];
        url.latency.record(latency);
        if draining {
            url.drained += 1;
            return;
        }
        url.responses += 1;
        match url.status.iter_mut().find(|(code, _)| *code == status) {
            Some((_, n)) => *n += 1,
            None => url.status.push((status, 1)),
        }
    }

    /// A request of `line` failed (timed out, or its connection broke).
    #[inline]
    pub fn failure(&mut self, line: usize, kind: FailureKind) {
        self.urls[line].errors.add(kind, 1);
    }

    /// A request of `line` was still in flight at the end.
    pub fn in_flight_at_end(&mut self, line: usize, since_intended_us: u64, since_sent_us: u64) {
        let url = &mut self.urls[line];
        url.unanswered += 1;
        url.censored.push(Censored::InFlight {
            since_intended_us,
            since_sent_us,
        });
    }

    /// Rate mode: `count` requests of one connection, starting at line `first`, were due
    /// every `step_us` (the oldest `oldest_us` old at the end) and never sent. Request `j`
    /// of them is line `first + j`, so line `first + j` gets every n-th of them.
    pub fn unsent(&mut self, first: usize, oldest_us: u64, step_us: f64, count: u64) {
        let n = self.urls.len() as u64;
        for j in 0..count.min(n) {
            let line = ((first as u64 + j) % n) as usize;
            let mine = (count - j).div_ceil(n);
            let url = &mut self.urls[line];
            url.unsent += mine;
            url.censored.push(Censored::Unsent {
                oldest_us: (oldest_us as f64 - j as f64 * step_us).max(0.0) as u64,
                step_us: step_us * n as f64,
                count: mine,
            });
        }
    }

    /// Adds another thread's per-line statistics (same file, same lines).
    pub fn merge(&mut self, other: &UrlRecorder) {
        if self.urls.is_empty() {
            *self = other.clone();
            return;
        }
        for (mine, theirs) in self.urls.iter_mut().zip(&other.urls) {
            mine.latency.merge(&theirs.latency);
            mine.responses += theirs.responses;
            mine.sent += theirs.sent;
            mine.drained += theirs.drained;
            for &(code, n) in &theirs.status {
                match mine.status.iter_mut().find(|(c, _)| *c == code) {
                    Some((_, m)) => *m += n,
                    None => mine.status.push((code, n)),
                }
            }
            mine.errors.merge(&theirs.errors);
            mine.unanswered += theirs.unanswered;
            mine.unsent += theirs.unsent;
            mine.censored.extend_from_slice(&theirs.censored);
        }
    }
}

/// One request line in the report.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct UrlReport {
    /// Line number in the `--urls` file.
    pub line: usize,
    pub method: String,
    /// Path and query, as sent.
    pub url: String,
    /// Complete responses within the run.
    pub requests: u64,
    pub requests_sent: u64,
    /// Responses by status code.
    pub status: BTreeMap<String, u64>,
    /// Responses whose status is not 2xx or 3xx (in `requests` and `status` too).
    pub http_errors: u64,
    /// Failed requests of this line by kind (`connect` is always 0: a connection that could
    /// not be opened carried no request yet; the run's total counts it).
    pub errors: ErrorCounts,
    #[serde(default)]
    pub unanswered: u64,
    #[serde(default)]
    pub unsent: u64,
    #[serde(default)]
    pub drained: u64,
    /// Latency of this line: answered requests, and each unanswered one at its age (no
    /// held-back fill: what a stuck connection held back belongs to every line), flagged
    /// with `lower_bound` as the run's figures are. 2 significant digits.
    pub latency_us: LatencySummary,
    /// That histogram, base64 compressed V2 (for `sweetspot merge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
}

/// Responses whose status is not 2xx or 3xx, as the sweep counts bad statuses.
pub fn http_errors(status: &BTreeMap<String, u64>) -> u64 {
    status
        .iter()
        .filter(|(code, _)| !(code.starts_with('2') || code.starts_with('3')))
        .map(|(_, n)| n)
        .sum()
}

/// The per-line part of the report, from the merged per-line statistics.
/// `closed`: a closed loop (closed or count mode), whose timed-out requests count at the
/// timeout under their line.
pub fn url_reports(
    list: &UrlList,
    merged: &UrlRecorder,
    timeout: Duration,
    closed: bool,
) -> Vec<UrlReport> {
    let view = if closed {
        LatencyView::ClosedLoopLine
    } else {
        LatencyView::RateCorrected
    };
    list.requests
        .iter()
        .zip(&merged.urls)
        .map(|(request, stats)| {
            let (latency_us, histogram) = censored_view(
                &stats.latency,
                &stats.censored,
                view,
                stats.errors.timeout,
                timeout,
            );
            let status = stats.status_map();
            UrlReport {
                line: request.line,
                method: request.method.clone(),
                url: request.path_and_query.clone(),
                requests: stats.responses,
                requests_sent: stats.sent,
                http_errors: http_errors(&status),
                status,
                errors: stats.errors,
                unanswered: stats.unanswered,
                unsent: stats.unsent,
                drained: stats.drained,
                latency_us,
                histogram: Some(crate::load::stats::LatencyHistogram::encode(&histogram)),
            }
        })
        .collect()
}

/// Adds the per-line reports of the workers of one distributed run: counts summed,
/// histograms added (exactly: each is decoded into the same 2-digit layout it was written
/// in), lower-bound flags of any worker kept. Every worker must have run the same lines.
pub fn merge_url_reports(workers: &[(&str, &[UrlReport])]) -> Result<Vec<UrlReport>, String> {
    let Some(&(first_source, first)) = workers.first() else {
        return Ok(Vec::new());
    };
    let mut merged: Vec<(UrlReport, LatencyHistogram)> = Vec::with_capacity(first.len());
    for &(source, urls) in workers {
        let same = urls.len() == first.len()
            && urls
                .iter()
                .zip(first)
                .all(|(a, b)| a.line == b.line && a.method == b.method && a.url == b.url);
        if !same {
            return Err(format!(
                "{first_source} and {source} are not one run: their --urls lines differ"
            ));
        }
    }
    for &(source, urls) in workers {
        for (k, url) in urls.iter().enumerate() {
            let mut histogram = LatencyHistogram::coarse();
            match &url.histogram {
                Some(text) => histogram.merge(
                    &crate::load::stats::LatencyHistogram::decode(text)
                        .map_err(|e| format!("{source}: urls line {}: {e}", url.line))?,
                ),
                None => {
                    return Err(format!(
                        "{source}: urls line {} has no histogram: cannot merge exactly",
                        url.line
                    ))
                }
            }
            if merged.len() <= k {
                let mut empty = url.clone();
                empty.requests = 0;
                empty.requests_sent = 0;
                empty.status.clear();
                empty.errors = ErrorCounts::default();
                empty.unanswered = 0;
                empty.unsent = 0;
                empty.drained = 0;
                empty.latency_us = LatencySummary::default();
                merged.push((empty, LatencyHistogram::coarse()));
            }
            let (all, all_histogram) = &mut merged[k];
            all_histogram.merge(&histogram);
            all.requests += url.requests;
            all.requests_sent += url.requests_sent;
            for (code, n) in &url.status {
                *all.status.entry(code.clone()).or_insert(0) += n;
            }
            all.errors.merge(&url.errors);
            all.unanswered += url.unanswered;
            all.unsent += url.unsent;
            all.drained += url.drained;
            for key in url.latency_us.lower_bound.keys() {
                all.latency_us.lower_bound.insert(key);
            }
        }
    }
    Ok(merged
        .into_iter()
        .map(|(mut url, histogram)| {
            let bounds = url.latency_us.lower_bound;
            url.latency_us = histogram.summary();
            url.latency_us.lower_bound = bounds;
            url.http_errors = http_errors(&url.status);
            url.histogram = Some(crate::load::stats::LatencyHistogram::encode(&histogram));
            url
        })
        .collect())
}

/// The per-line table of the human summary.
pub fn render_table(urls: &[UrlReport]) -> String {
    use std::fmt::Write;
    let label = |u: &UrlReport| format!("{}: {} {}", u.line, u.method, u.url);
    let width = urls
        .iter()
        .map(|u| label(u).chars().count())
        .max()
        .unwrap_or(0)
        .max("line: request".len());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  Per URL\n    {:<width$} {:>9} {:>10} {:>7} {:>10} {:>10} {:>10} {:>10}",
        "line: request", "requests", "bad status", "errors", "p50", "p90", "p99", "max"
    );
    for u in urls {
        let figure = |key: LatencyKey| u.latency_us.cell(key);
        let _ = writeln!(
            out,
            "    {:<width$} {:>9} {:>10} {:>7} {:>10} {:>10} {:>10} {:>10}",
            label(u),
            u.requests,
            u.http_errors,
            u.errors.total(),
            figure(LatencyKey::P50),
            figure(LatencyKey::P90),
            figure(LatencyKey::P99),
            figure(LatencyKey::Max),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::target::Target;

    fn parse(text: &str, t: Option<&str>) -> UrlList {
        let target = t.map(|u| Target::parse(u).unwrap());
        crate::load::source::urls::parse_url_list(
            text.as_bytes(),
            "urls.txt",
            std::path::Path::new("."),
            target.as_ref(),
        )
        .unwrap()
    }

    #[test]
    fn recorder_counts_per_line_and_merges() {
        let mut a = UrlRecorder::new(3);
        a.sent(2, 2);
        a.response(2, Duration::from_millis(1), 200, false);
        a.response(0, Duration::from_millis(3), 404, false);
        a.response(0, Duration::from_millis(5), 404, true);
        a.failure(1, FailureKind::Timeout);
        let mut b = UrlRecorder::new(3);
        b.response(0, Duration::from_millis(2), 200, false);
        b.in_flight_at_end(1, 7_000, 6_000);
        a.merge(&b);
        let u = &a.urls;
        assert_eq!(u.iter().map(|s| s.sent).collect::<Vec<_>>(), vec![1, 0, 1]);
        assert_eq!(u[0].responses, 2);
        assert_eq!(u[0].drained, 1);
        assert_eq!(u[0].latency.len(), 3);
        assert_eq!(
            u[0].status_map(),
            BTreeMap::from([("200".to_string(), 1), ("404".to_string(), 1)])
        );
        assert_eq!(u[1].errors.timeout, 1);
        assert_eq!(u[1].unanswered, 1);
        let list = parse("/a\n/b\n/c\n", Some("http://127.0.0.1:1"));
        let reports = url_reports(&list, &a, Duration::from_secs(2), false);
        assert_eq!(reports[0].http_errors, 1);
        assert_eq!(reports[0].latency_us.count, 3);
        assert!(reports[0].latency_us.lower_bound.is_empty());
        // Line 2: one unanswered request at 7 ms and a timeout: every figure a lower bound.
        assert_eq!(reports[1].latency_us.count, 1);
        assert_eq!(reports[1].latency_us.max, 7_007.0);
        assert!(reports[1].latency_us.lower_bound.contains(LatencyKey::P50));
        assert_eq!(reports[2].requests, 1);
    }

    #[test]
    fn unsent_requests_go_to_the_lines_they_were_due_on() {
        let mut r = UrlRecorder::new(3);
        // Seven requests due from line 1 every 10 µs, the oldest 100 µs old:
        // lines 1,2,0,1,2,0,1 at 100,90,80,70,60,50,40.
        r.unsent(1, 100, 10.0, 7);
        assert_eq!(
            r.urls.iter().map(|u| u.unsent).collect::<Vec<_>>(),
            vec![2, 3, 2]
        );
        // Each line's are due every 30 µs.
        let unsent = |oldest_us, count| {
            vec![Censored::Unsent {
                oldest_us,
                step_us: 30.0,
                count,
            }]
        };
        assert_eq!(r.urls[1].censored, unsent(100, 3));
        assert_eq!(r.urls[0].censored, unsent(80, 2));
    }

    #[test]
    fn merged_url_reports_add_counts_and_histograms_exactly() {
        let list = parse("/a\n/b\n", Some("http://127.0.0.1:1"));
        let (mut one, mut two, mut both) = (
            UrlRecorder::new(2),
            UrlRecorder::new(2),
            UrlRecorder::new(2),
        );
        for (i, us) in [120u64, 450, 1_234, 9_870, 55_555, 123_456]
            .iter()
            .enumerate()
        {
            let rec = if i % 2 == 0 { &mut one } else { &mut two };
            rec.response(
                i % 2,
                Duration::from_micros(*us),
                200 + (i as u16 % 3) * 100,
                false,
            );
            both.response(
                i % 2,
                Duration::from_micros(*us),
                200 + (i as u16 % 3) * 100,
                false,
            );
        }
        let timeout = Duration::from_secs(2);
        let (r1, r2) = (
            url_reports(&list, &one, timeout, false),
            url_reports(&list, &two, timeout, false),
        );
        let merged = merge_url_reports(&[("w0", &r1), ("w1", &r2)]).unwrap();
        assert_eq!(merged, url_reports(&list, &both, timeout, false));
        let other = parse("/a\n/c\n", Some("http://127.0.0.1:1"));
        let r3 = url_reports(&other, &two, timeout, false);
        assert_eq!(
            merge_url_reports(&[("w0", &r1), ("w1", &r3)]).unwrap_err(),
            "w0 and w1 are not one run: their --urls lines differ"
        );
    }

    #[test]
    fn table_has_a_row_per_line_with_lower_bounds_marked() {
        let list = parse("/hello\nPOST /guestbook\n", Some("http://127.0.0.1:1"));
        let mut r = UrlRecorder::new(2);
        r.response(0, Duration::from_micros(500), 200, false);
        r.response(1, Duration::from_micros(2_000), 404, false);
        r.in_flight_at_end(1, 90_000, 90_000);
        let table = render_table(&url_reports(&list, &r, Duration::from_secs(2), false));
        assert_eq!(
            table,
            "  Per URL\n\
             \x20   line: request       requests bad status  errors        p50        p90        p99        max\n\
             \x20   1: GET /hello              1          0       0     501 us     501 us     501 us     501 us\n\
             \x20   2: POST /guestbook         1          1       0     2.0 ms >= 90.1 ms >= 90.1 ms >= 90.1 ms\n"
        );
    }
}
