//! The interval log of `load --hlog`, HdrHistogram's own format: the hdrhistogram crate's
//! `interval_log` writer and `IntervalLogIterator`, with each histogram in its V2 deflate form.
//! The intervals are the time series' ([`crate::load::stats::series`]: the collector hands each
//! complete one to the [`HlogWriter`]), so memory does not grow with the run. The log ends with
//! the run's report ([`REPORT_COMMENT`]), so that `merge` can check and count a run from its
//! log alone ([`read`]).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::V2DeflateSerializer;

use crate::load::output::report::LoadReport;
use crate::load::stats::series::CompleteInterval;
use crate::load::stats::LatencyHistogram;

/// The tag of the interval log's last interval: the requests unanswered at the end, at their
/// age (lower bounds), which belong to no second of the run.
pub const CENSORED_TAG: &str = "censored";

/// The legend line the Java tools write after the header (the crate's reader skips it).
const LEGEND: &str =
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"";
/// The comment that carries the run's report at the end of a log.
///
/// The comment line is `#sweetspot-report {JSON}`: the run's JSON report without its
/// histograms, which the intervals carry.
pub const REPORT_COMMENT: &str = "#sweetspot-report ";

/// Writes the interval log of one run: the [`crate::load::stats::series::IntervalCollector`] hands it each
/// interval once every thread is past it.
pub struct HlogWriter {
    path: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
    serializer: V2DeflateSerializer,
}

impl HlogWriter {
    /// Creates the log at `path` and writes its header: `comments` (one `#` line each), the
    /// format version, `#[StartTime: ...]` for `start` and the legend.
    pub fn create(
        path: &Path,
        start: SystemTime,
        comments: &[String],
    ) -> anyhow::Result<HlogWriter> {
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
        Ok(HlogWriter {
            path: path.to_path_buf(),
            file,
            serializer,
        })
    }

    /// Writes one interval's histogram (an empty one when nothing completed in it); an
    /// interval of no length is written as 1 ms long (readers divide by it).
    pub fn write_interval(&mut self, interval: &CompleteInterval) -> anyhow::Result<()> {
        let empty;
        let h = match &interval.data.latency {
            Some(h) => h,
            None => {
                empty = LatencyHistogram::new();
                &empty
            }
        };
        self.write(
            h,
            interval.start,
            interval.length.max(Duration::from_millis(1)),
            None,
        )
    }

    /// After the last interval: the requests unanswered at the end (`censored`, at their
    /// age; they belong to no interval), as one last interval at `elapsed` tagged `censored`,
    /// so that the log adds up to the report as `merge` checks; then the report line.
    pub fn finish(
        mut self,
        elapsed: Duration,
        censored: Option<&LatencyHistogram>,
        report: &LoadReport,
    ) -> anyhow::Result<()> {
        if let Some(censored) = censored.filter(|h| !h.is_empty()) {
            self.write(
                censored,
                elapsed,
                Duration::from_millis(1),
                Tag::new(CENSORED_TAG),
            )?;
        }
        let mut meta = report.clone();
        meta.histogram = None;
        meta.histogram_uncorrected = None;
        meta.series = Vec::new();
        writeln!(
            self.file,
            "{REPORT_COMMENT}{}",
            serde_json::to_string(&meta).context("cannot serialize the report")?
        )?;
        self.file
            .flush()
            .with_context(|| format!("cannot write {}", self.path.display()))
    }

    fn write(
        &mut self,
        h: &LatencyHistogram,
        start: Duration,
        length: Duration,
        tag: Option<Tag>,
    ) -> anyhow::Result<()> {
        let mut log = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.file, &mut self.serializer)
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        log.write_histogram(h.as_hdr(), start, length, tag)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", self.path.display()))
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
                latency: LatencyHistogram::decode(i.encoded_histogram())
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
        let text = LatencyHistogram::encode(&h);
        assert!(text.starts_with("HISTF"), "{text}");
        let back = LatencyHistogram::decode(&text).unwrap();
        assert_eq!(back.summary(), h.summary());
        assert!(LatencyHistogram::decode("not base64!").is_err());
        assert!(LatencyHistogram::decode("aGVsbG8=").is_err());
    }

    #[test]
    fn a_log_holds_each_interval_once_and_adds_up_to_every_sample() {
        use crate::load::stats::series::IntervalCollector;
        let dir = crate::os::fresh_test_dir("hlog");
        let path = dir.join("run.hlog");
        let mut writer = HlogWriter::create(&path, SystemTime::now(), &["test".into()]).unwrap();
        let second = Duration::from_secs(1);
        let length = Some(Duration::from_millis(3500));
        let (mut collector, plan) = IntervalCollector::new(second, 2, length);
        let mut a = plan.recorder(0);
        let mut b = plan.recorder(1);
        drop(plan);
        let mut all = LatencyHistogram::new();
        for ms in 0..3500u64 {
            let at = Duration::from_millis(ms);
            let latency = Duration::from_micros(100 + ms);
            let r = if ms % 2 == 0 { &mut a } else { &mut b };
            r.record_response(latency, at);
            all.record(latency);
            collector
                .pump(Duration::ZERO, &mut |i| writer.write_interval(&i))
                .unwrap();
        }
        a.finish();
        b.finish();
        let mut whole = all.clone();
        whole.record_us(9_000);
        let (_, censored) = collector
            .finish(Duration::from_millis(3500), Some(&whole), &mut |i| {
                writer.write_interval(&i)
            })
            .unwrap();
        let report = LoadReport::default();
        writer
            .finish(Duration::from_millis(3500), censored.as_ref(), &report)
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("#[StartTime: "), "{text}");
        assert!(text.contains(LEGEND));
        assert!(text.contains("Tag=censored"), "{text}");
        let run = read(&text).unwrap();
        let starts: Vec<f64> = run.intervals.iter().map(|i| i.start_s).collect();
        assert_eq!(starts, vec![0.0, 1.0, 2.0, 3.0, 3.5]);
        let counts: Vec<u64> = run.intervals.iter().map(|i| i.latency.len()).collect();
        assert_eq!(counts, vec![1000, 1000, 1000, 500, 1]);
        assert_eq!(run.intervals[3].length_s, 0.5);
        assert_eq!(run.total().summary(), whole.summary());
        assert!(run.report.is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
