//! What one load run needs beyond the engine ([`RunOptions`]): its segment of a distributed
//! run (the config narrowed to its share), its start time, its interval log and time series.

use std::time::Duration;

use crate::load::args::LoadArgs;
use crate::load::config::{default_threads, LoadConfig, Mode, MAX_DURATION};
use crate::load::scaleout::segment;
use crate::load::source::plan::RatePlan;
use crate::load::stats::series;
use crate::units::parse_duration;
use crate::usage;

/// Options of one run beyond what the engine needs: its place in a distributed run, when to
/// start, and the interval log.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub segment: Option<SegmentRun>,
    /// Start at this wall-clock time.
    pub start_at: Option<std::time::SystemTime>,
    pub hlog: Option<std::path::PathBuf>,
    /// Record the time series with this interval (the report's `series`); `--hlog` records
    /// it too, at 1 s when this is None.
    pub series: Option<Duration>,
}

/// A segment of a distributed run: its description, and the whole run's connection count and
/// rate, which the engine uses so the segment's connections keep their global send phases.
#[derive(Debug, Clone)]
pub struct SegmentRun {
    pub info: segment::SegmentInfo,
    pub first_connection: usize,
    /// Rate mode with a plan: the whole run's plan (this worker's, in its config, is its share).
    pub whole_plan: Option<RatePlan>,
}

impl RunOptions {
    /// Validates the scale-out flags and narrows `config` (the whole run) to this segment.
    pub fn from_args(args: &LoadArgs, config: &mut LoadConfig) -> anyhow::Result<RunOptions> {
        let start_at = match (&args.start_at, &args.start_in) {
            (Some(at), _) => Some(segment::parse_start_at(at).map_err(usage)?),
            (None, Some(text)) => {
                let wait = parse_duration(text).map_err(|e| usage(format!("--start-in: {e}")))?;
                if wait > MAX_DURATION {
                    return Err(usage("--start-in must be at most 7 days"));
                }
                Some(std::time::SystemTime::now() + wait)
            }
            (None, None) => None,
        };
        let segment = match &args.segment {
            None => None,
            Some(text) => {
                let seg = segment::Segment::parse(text).map_err(usage)?;
                Some(narrow_to_segment(config, seg)?)
            }
        };
        let series = series_interval(args, config)?;
        Ok(RunOptions {
            segment,
            start_at,
            hlog: args.hlog.clone(),
            series,
        })
    }
}

/// The time series' interval when an output needs the series (`--json`, `--csv`, `--html`,
/// `--hlog`) or `--interval` is given; checked against its limits.
fn series_interval(args: &LoadArgs, config: &LoadConfig) -> anyhow::Result<Option<Duration>> {
    let wanted = args.interval.is_some()
        || args.json.is_some()
        || args.csv.is_some()
        || args.html.is_some()
        || args.hlog.is_some();
    if !wanted {
        return Ok(None);
    }
    let interval = match &args.interval {
        Some(text) => parse_duration(text).map_err(|e| usage(format!("--interval: {e}")))?,
        None => series::DEFAULT_INTERVAL,
    };
    if interval < series::MIN_INTERVAL || interval > series::MAX_INTERVAL {
        return Err(usage(format!(
            "--interval must be between {}ms and 1h",
            series::MIN_INTERVAL.as_millis()
        )));
    }
    if let Some(duration) = config.mode.duration() {
        if series::interval_count(duration, interval) > series::MAX_INTERVALS {
            return Err(usage(format!(
                "--interval {} makes more than {} intervals of -d {}; choose a longer one",
                args.interval.as_deref().unwrap_or("1s"),
                series::MAX_INTERVALS,
                args.duration.as_deref().unwrap_or("10s"),
            )));
        }
    }
    Ok(Some(interval))
}

/// Narrows a whole-run config to segment `seg`: its share of the connections and of `-n`, and
/// in rate mode of the rate (`R * c_I / C`, so the rates add up to `R`).
pub fn narrow_to_segment(
    config: &mut LoadConfig,
    seg: segment::Segment,
) -> anyhow::Result<SegmentRun> {
    let total_connections = config.connections as u64;
    let connections = seg.share(total_connections);
    if connections == 0 {
        return Err(usage(format!(
            "--segment {}/{}: -c {total_connections} leaves this worker no connection (use -c {} or more)",
            seg.index, seg.count, seg.count
        )));
    }
    let whole_plan = config.plan.clone();
    let share = connections as f64 / total_connections as f64;
    if let Some(plan) = &mut config.plan {
        *plan = plan.scaled(share);
    }
    let (total_rate, total_requests, requests) = match &mut config.mode {
        Mode::Rate { rate, .. } => {
            let total = *rate;
            *rate = match &config.plan {
                Some(plan) => plan.mean_rate(),
                None => total * share,
            };
            (Some(total), None, None)
        }
        Mode::Count { requests } => {
            let total = *requests;
            let mine = seg.share(total);
            if mine == 0 {
                return Err(usage(format!(
                    "--segment {}/{}: -n {total} leaves this worker no request (use -n {} or more)",
                    seg.index, seg.count, seg.count
                )));
            }
            *requests = mine;
            (None, Some(total), Some(mine))
        }
        Mode::Closed { .. } => (None, None, None),
    };
    config.connections = connections as usize;
    config.threads = config.threads.min(config.connections);
    Ok(SegmentRun {
        info: segment::SegmentInfo {
            index: seg.index,
            count: seg.count,
            connections,
            total_connections,
            total_rate,
            total_requests,
            requests,
            host: segment::host_name(),
            cores: default_threads(),
            plan: whole_plan.as_ref().map(|p| p.to_string()),
        },
        first_connection: seg.first(total_connections) as usize,
        whole_plan,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::config::tests::config;

    #[test]
    fn a_segment_takes_its_share_of_every_step() {
        let mut c = config("http://h/ -c 4 -R 200@1s,400@1s").unwrap();
        let seg = narrow_to_segment(&mut c, segment::Segment { index: 1, count: 4 }).unwrap();
        assert_eq!(c.plan.as_ref().unwrap().to_string(), "50@1s,100@1s");
        assert_eq!(
            c.mode,
            Mode::Rate {
                rate: 75.0,
                duration: Duration::from_secs(2)
            }
        );
        assert_eq!(seg.info.total_rate, Some(300.0));
        assert_eq!(seg.info.plan.as_deref(), Some("200@1s,400@1s"));
        assert_eq!(seg.whole_plan.unwrap().to_string(), "200@1s,400@1s");
        c.validate().unwrap();
    }
}
