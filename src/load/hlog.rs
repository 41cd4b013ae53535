//! HdrHistogram's own formats: the interval log of `load --hlog`, and the compact histogram text
//! a JSON report carries so that `sweetspot merge` can add histograms exactly.
//!
//! Both use the hdrhistogram crate's `V2DeflateSerializer` (base64 of the compressed V2
//! encoding, what every HdrHistogram implementation reads); the log lines are written by the
//! crate's `interval_log` writer, and read back by its `IntervalLogIterator`. Nothing here
//! encodes a histogram by hand.
//!
//! How per-second histograms leave the engine without sharing anything while it runs: each
//! load thread owns an [`IntervalRecorder`] (inside its `ThreadStats`) that records the
//! latencies of the current second and, when the second is over, sends that histogram over a
//! channel; the thread that started the run owns the [`HlogWriter`], which adds the threads'
//! histograms of each second and writes the second's line once every thread has moved past it.
//! Only the seconds not yet written are held, so memory does not grow with the run.
//!
//! A log ends with one comment line, `#sweetspot-report {JSON}`: the run's JSON report (without
//! its histograms, which the intervals carry), so that `merge` can check and count a run from
//! its hlog alone.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use base64::Engine;
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

use super::report::LoadReport;
use super::stats::LatencyHistogram;

/// The tag of the interval log's last interval: the requests unanswered at the end, at their
/// age (lower bounds), which belong to no second of the run.
pub const CENSORED_TAG: &str = "censored";

/// The legend line the Java tools write after the header (the crate's reader skips it).
const LEGEND: &str =
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"";
/// The comment that carries the run's report at the end of a log.
pub const REPORT_COMMENT: &str = "#sweetspot-report ";

/// A histogram as base64 of its compressed V2 encoding (the form of an interval-log line).
pub fn encode(h: &LatencyHistogram) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h.as_hdr(), &mut bytes)
        .expect("serializing a histogram into memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Reads back what [`encode`] (or any HdrHistogram V2 writer) produced.
pub fn decode(text: &str) -> Result<LatencyHistogram, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| format!("histogram is not base64: {e}"))?;
    let h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("histogram does not decode: {e:?}"))?;
    LatencyHistogram::from_hdr(&h)
}

/// What a load thread hands over: its histogram of one second, and how far it has got.
#[derive(Debug)]
pub struct IntervalSnapshot {
    thread: usize,
    second: u64,
    /// None when the thread completed nothing in that second.
    latency: Option<LatencyHistogram>,
    /// Every second before this one is complete for this thread (u64::MAX: the thread ended).
    complete_before: u64,
}

/// One load thread's recorder of per-second latency histograms.
#[derive(Debug, Clone)]
pub struct IntervalRecorder {
    thread: usize,
    second: u64,
    current: Option<LatencyHistogram>,
    tx: Sender<IntervalSnapshot>,
}

impl IntervalRecorder {
    pub fn new(thread: usize, tx: Sender<IntervalSnapshot>) -> IntervalRecorder {
        IntervalRecorder {
            thread,
            second: 0,
            current: None,
            tx,
        }
    }

    /// Records one latency that completed `since_start` into the run.
    #[inline]
    pub fn record(&mut self, latency: Duration, since_start: Duration) {
        self.roll(since_start);
        self.current
            .get_or_insert_with(LatencyHistogram::new)
            .record(latency);
    }

    /// Hands over the finished second, if `since_start` is past it. Called from the engine's
    /// loop, which wakes at least every 50 ms, so an idle thread does not hold the log back.
    #[inline]
    pub fn roll(&mut self, since_start: Duration) {
        let now = since_start.as_secs();
        if now > self.second {
            self.send(now);
            self.second = now;
        }
    }

    /// Hands over the last (partial) second: the thread is done.
    pub fn finish(mut self) {
        self.send(u64::MAX);
    }

    fn send(&mut self, complete_before: u64) {
        // The writer is gone only if the run is being torn down; nothing to report to then.
        let _ = self.tx.send(IntervalSnapshot {
            thread: self.thread,
            second: self.second,
            latency: self.current.take(),
            complete_before,
        });
    }
}

/// Writes the interval log of one run as the threads hand their seconds over.
pub struct HlogWriter {
    path: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
    rx: Receiver<IntervalSnapshot>,
    complete_before: Vec<u64>,
    pending: BTreeMap<u64, LatencyHistogram>,
    /// Every interval written so far, added up.
    written: LatencyHistogram,
    /// The next second to write.
    next: u64,
    serializer: V2DeflateSerializer,
}

impl HlogWriter {
    /// Creates the log at `path` and writes its header: `comments` (one `#` line each), the
    /// format version, `#[StartTime: ...]` for `start` and the legend. `threads` recorders
    /// will send to the returned channel.
    pub fn create(
        path: &Path,
        start: SystemTime,
        comments: &[String],
        threads: usize,
    ) -> anyhow::Result<(HlogWriter, Sender<IntervalSnapshot>)> {
        let file = std::fs::File::create(path)
            .map_err(|e| crate::usage(format!("--hlog: cannot create {}: {e}", path.display())))?;
        let mut file = std::io::BufWriter::new(file);
        let mut serializer = V2DeflateSerializer::new();
        let mut builder = IntervalLogWriterBuilder::new();
        for c in comments {
            builder.add_comment(c);
        }
        builder.add_comment("[Histogram log format version 1.3]");
        builder.add_comment("[values in microseconds]");
        builder.with_start_time(start);
        builder.begin_log_with(&mut file, &mut serializer)?;
        writeln!(file, "{LEGEND}")?;
        let (tx, rx) = std::sync::mpsc::channel();
        Ok((
            HlogWriter {
                path: path.to_path_buf(),
                file,
                rx,
                complete_before: vec![0; threads],
                pending: BTreeMap::new(),
                written: LatencyHistogram::new(),
                next: 0,
                serializer,
            },
            tx,
        ))
    }

    /// Takes what the threads handed over (waiting up to `wait` for the first of it) and writes
    /// every second all threads are past.
    pub fn pump(&mut self, wait: Duration) -> anyhow::Result<()> {
        match self.rx.recv_timeout(wait) {
            Ok(snapshot) => self.take(snapshot),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return Ok(()),
        }
        while let Ok(snapshot) = self.rx.try_recv() {
            self.take(snapshot);
        }
        // Once every thread has ended, the last (partial) second is `finish`'s to write.
        let complete = self.complete_before.iter().copied().min().unwrap_or(0);
        while self.next < complete && complete != u64::MAX {
            self.write_second(self.next, Duration::from_secs(1))?;
        }
        Ok(())
    }

    /// After every thread ended: writes what is left, the last interval ending at `elapsed`,
    /// then the report line.
    pub fn finish(mut self, elapsed: Duration, report: &LoadReport) -> anyhow::Result<()> {
        while let Ok(snapshot) = self.rx.try_recv() {
            self.take(snapshot);
        }
        let last = elapsed.as_secs();
        while self.next <= last || !self.pending.is_empty() {
            let second = self.next;
            let length = if second >= last {
                elapsed.saturating_sub(Duration::from_secs(second))
            } else {
                Duration::from_secs(1)
            };
            if length.is_zero() && !self.pending.contains_key(&second) {
                break;
            }
            self.write_second(second, length.max(Duration::from_millis(1)))?;
        }
        // The requests still unanswered at the end are in the report's histogram at their age
        // (see `load::stats`), and in no second: one last interval, tagged `censored`, holds
        // them, so the log adds up to the report, as `merge` checks.
        if let Some(whole) = report.histogram.as_deref() {
            let mut censored = decode(whole).map_err(|e| anyhow::anyhow!(e))?;
            if censored.subtract(&self.written).is_ok() && !censored.is_empty() {
                let mut log = IntervalLogWriterBuilder::new()
                    .begin_log_with(&mut self.file, &mut self.serializer)
                    .with_context(|| format!("cannot write {}", self.path.display()))?;
                log.write_histogram(
                    censored.as_hdr(),
                    elapsed,
                    Duration::from_millis(1),
                    Tag::new(CENSORED_TAG),
                )
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", self.path.display()))?;
            }
        }
        let mut meta = report.clone();
        meta.histogram = None;
        meta.histogram_uncorrected = None;
        writeln!(
            self.file,
            "{REPORT_COMMENT}{}",
            serde_json::to_string(&meta).context("cannot serialize the report")?
        )?;
        self.file
            .flush()
            .with_context(|| format!("cannot write {}", self.path.display()))
    }

    fn take(&mut self, snapshot: IntervalSnapshot) {
        if let Some(latency) = snapshot.latency {
            match self.pending.get_mut(&snapshot.second) {
                Some(h) => h.merge(&latency),
                None => {
                    self.pending.insert(snapshot.second, latency);
                }
            }
        }
        if let Some(c) = self.complete_before.get_mut(snapshot.thread) {
            *c = (*c).max(snapshot.complete_before);
        }
    }

    fn write_second(&mut self, second: u64, length: Duration) -> anyhow::Result<()> {
        let h = self.pending.remove(&second).unwrap_or_default();
        self.written.merge(&h);
        let mut log = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.file, &mut self.serializer)
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        log.write_histogram(h.as_hdr(), Duration::from_secs(second), length, None)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", self.path.display()))?;
        self.next = second + 1;
        Ok(())
    }
}

/// One interval of a log read back.
#[derive(Debug, Clone)]
pub struct HlogInterval {
    /// Seconds from the log's StartTime.
    pub start_s: f64,
    pub length_s: f64,
    pub latency: LatencyHistogram,
}

/// An interval log read back: its StartTime, its intervals, and sweetspot's report line.
#[derive(Debug, Clone)]
pub struct HlogRun {
    pub start_time_unix_s: Option<f64>,
    pub intervals: Vec<HlogInterval>,
    pub report: Option<LoadReport>,
}

impl HlogRun {
    /// Every interval added: the whole run's histogram.
    pub fn total(&self) -> LatencyHistogram {
        let mut all = LatencyHistogram::new();
        for i in &self.intervals {
            all.merge(&i.latency);
        }
        all
    }
}

/// Parses an interval log (ours or any HdrHistogram writer's).
pub fn read(text: &str) -> Result<HlogRun, String> {
    let mut run = HlogRun {
        start_time_unix_s: None,
        intervals: Vec::new(),
        report: None,
    };
    for entry in IntervalLogIterator::new(text.as_bytes()) {
        match entry.map_err(|e| format!("not an interval log ({e:?})"))? {
            LogEntry::StartTime(t) => run.start_time_unix_s = Some(t.as_secs_f64()),
            LogEntry::BaseTime(_) => {}
            LogEntry::Interval(i) => run.intervals.push(HlogInterval {
                start_s: i.start_timestamp().as_secs_f64(),
                length_s: i.duration().as_secs_f64(),
                latency: decode(i.encoded_histogram())
                    .map_err(|e| format!("interval at {:?}: {e}", i.start_timestamp()))?,
            }),
        }
    }
    if let Some(line) = text.lines().find(|l| l.starts_with(REPORT_COMMENT)) {
        let json = &line[REPORT_COMMENT.len()..];
        run.report = Some(serde_json::from_str(json).map_err(|e| format!("bad report line: {e}"))?);
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_histograms_decode_to_the_same_samples() {
        let mut h = LatencyHistogram::new();
        for us in [1, 7, 250, 1_000, 65_000, 2_000_000] {
            h.record_us(us);
        }
        let text = encode(&h);
        assert!(text.starts_with("HISTF"), "{text}");
        let back = decode(&text).unwrap();
        assert_eq!(back.summary(), h.summary());
        assert!(decode("not base64!").is_err());
        assert!(decode("aGVsbG8=").is_err());
    }

    #[test]
    fn a_log_holds_each_second_once_and_adds_up_to_every_sample() {
        let dir = std::env::temp_dir().join(format!("sweetspot-hlog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run.hlog");
        let (mut writer, tx) =
            HlogWriter::create(&path, SystemTime::now(), &["test".into()], 2).unwrap();
        let mut a = IntervalRecorder::new(0, tx.clone());
        let mut b = IntervalRecorder::new(1, tx);
        let mut all = LatencyHistogram::new();
        for ms in 0..3500u64 {
            let at = Duration::from_millis(ms);
            let latency = Duration::from_micros(100 + ms);
            let r = if ms % 2 == 0 { &mut a } else { &mut b };
            r.record(latency, at);
            all.record(latency);
            writer.pump(Duration::ZERO).unwrap();
        }
        a.finish();
        b.finish();
        let report = LoadReport::default();
        writer.finish(Duration::from_millis(3500), &report).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("#[StartTime: "), "{text}");
        assert!(text.contains(LEGEND));
        let run = read(&text).unwrap();
        let starts: Vec<f64> = run.intervals.iter().map(|i| i.start_s).collect();
        assert_eq!(starts, vec![0.0, 1.0, 2.0, 3.0]);
        let counts: Vec<u64> = run.intervals.iter().map(|i| i.latency.len()).collect();
        assert_eq!(counts, vec![1000, 1000, 1000, 500]);
        assert_eq!(run.intervals[3].length_s, 0.5);
        assert_eq!(run.total().summary(), all.summary());
        assert!(run.report.is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
