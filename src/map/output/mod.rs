//! What a map shows, drawn from [`super::results`] alone, one file per format: the table on
//! the terminal and in `map.md` ([`markdown`]), the paragraph that says what the map shows
//! ([`summary`]), a heat map per wait mode and CPU ([`svg`]: `map-async.svg`, ...: colour = a
//! distinguishable winner, a neutral fill = any of several, label = the pool and the share of
//! the physical bound), and `report.html` ([`html`]: the verdict, the winners and what limited
//! them, the heat maps, every cell's candidates). Here: what they share, and [`write_all`].

pub mod html;
pub mod markdown;
pub mod summary;
pub mod svg;

pub use html::runs_text;
pub use markdown::table;
pub use summary::summary;
pub use svg::heat_maps;

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::halving::Outcome;
use super::results::{write_results, CellResult, MapResults, RESULTS_FILE};
use super::spec::WaitMode;
use crate::render::numbers::percent;

/// A cell's text: the winner (`arch/W`), `any of N: a, b`, or why there is none.
pub fn cell_text(c: &CellResult) -> String {
    let Some(outcome) = &c.outcome else {
        return "(not run)".into();
    };
    if outcome.infeasible.is_some() {
        return "none can meet p99".into();
    }
    let Some(winner) = outcome.winner else {
        return "none meets p99".into();
    };
    if outcome.ties.is_empty() {
        winner.label()
    } else {
        format!(
            "any of {}: {}, {}",
            outcome.ties.len() + 1,
            winner.label(),
            outcome.ties.join(", ")
        )
    }
}

/// `87% of bound`, for a cell with a winner.
fn of_bound(o: &Outcome) -> String {
    bound_share(o)
        .map(|share| format!("{share} of bound"))
        .unwrap_or_default()
}

/// The winner's share of the cell's bound as a whole percentage, where it has one.
fn bound_share(o: &Outcome) -> Option<String> {
    o.of_bound().map(|f| percent((f * 100.0).round() / 100.0))
}

/// One map of a run: a wait mode, a CPU, a path's round trip (ms) and a quota (cores).
type MapKey = (WaitMode, f64, f64, Option<f64>);

fn map_key(c: &CellResult) -> MapKey {
    (c.cell.wait, c.cell.cpu_us, c.cell.rtt_ms, c.cell.cpus)
}

/// `, under a quota of 0.5 cores` for a map of several quotas.
fn cpus_words(results: &MapResults, cpus: Option<f64>) -> String {
    match cpus {
        Some(q) if results.spec.cpus.len() > 1 => {
            format!(", under a quota of {}", crate::lab::budget::cores_words(q))
        }
        _ => String::new(),
    }
}

/// The maps a run has: each wait mode at each CPU at each round trip, in order.
fn maps(results: &MapResults) -> Vec<MapKey> {
    let mut maps: Vec<MapKey> = Vec::new();
    for c in &results.cells {
        let key = map_key(c);
        if !maps.contains(&key) {
            maps.push(key);
        }
    }
    maps
}

fn cells_of(results: &MapResults, map: MapKey) -> impl Iterator<Item = &CellResult> {
    results.cells.iter().filter(move |c| map_key(c) == map)
}

/// `, across a 100 ms round trip` for a map of several round trips.
fn rtt_words(results: &MapResults, rtt_ms: f64) -> String {
    if results.spec.rtt_ms.len() < 2 {
        String::new()
    } else if rtt_ms == 0.0 && results.spec.net_at(0.0).is_none() {
        ", over loopback".into()
    } else {
        format!(", across a {rtt_ms} ms round trip")
    }
}

fn find(results: &MapResults, map: MapKey, ratio: f64, conc: u32) -> Option<&CellResult> {
    cells_of(results, map).find(|c| c.cell.ratio == ratio && c.cell.concurrency == conc)
}

/// The report: the paragraph, the heat maps, the table of winners, every cell's candidates.
/// The map's network path in words, if some cell ran across one: `rtt 100 ms, ...`, or with
/// several round trips `round trips of 0 (loopback) and 100 ms, ...`.
pub(super) fn path_words(results: &MapResults) -> Option<String> {
    let spec = &results.spec;
    if !spec.has_path() {
        return None;
    }
    let net = spec.net;
    if spec.rtt_ms.is_empty() {
        return net.map(|n| n.describe());
    }
    let rtts: Vec<String> = spec
        .rtt_ms
        .iter()
        .map(|&r| {
            if spec.net_at(r).is_none() {
                format!("{r} (loopback)")
            } else {
                r.to_string()
            }
        })
        .collect();
    let links = net.map(|n| n.describe_links()).unwrap_or_default();
    Some(match rtts.split_last() {
        Some((last, first)) if !first.is_empty() => {
            format!("round trips of {} and {last} ms{links}", first.join(", "))
        }
        _ => format!("rtt {} ms{links}", rtts.join("")),
    })
}

/// What the run measured against its full grid, and the points its verifications took
/// besides (which the grid's share leaves out).
fn points_sentence(results: &MapResults) -> String {
    let verifying = if results.points_verifying > 0 {
        format!(
            ", and {} more to verify picks in full",
            results.points_verifying
        )
    } else {
        String::new()
    };
    format!(
        "{}{verifying}",
        crate::search::points_sentence(
            results.points_measured,
            results.wall_s,
            results.full_grid_points
        )
    )
}

/// Writes every file of a finished (or interrupted) map: results, table, heat maps, report.
pub fn write_all(results: &MapResults, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    write_results(results, dir)?;
    let mut written = vec![dir.join(RESULTS_FILE)];
    let md = dir.join("map.md");
    std::fs::write(&md, table(results)).with_context(|| format!("writing {}", md.display()))?;
    written.push(md);
    let maps = heat_maps(results)?;
    for (name, svg) in &maps {
        let path = dir.join(name);
        std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    let report = dir.join("report.html");
    std::fs::write(&report, html::report_html(results, &maps))
        .with_context(|| format!("writing {}", report.display()))?;
    written.push(report);
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::summary::{limit_sentence, rtt_sentence};
    use super::*;
    use crate::arch::Arch;
    use crate::map::halving::{Candidate, CandidateRow};
    use crate::map::spec::MapSpec;

    /// A searched cell of `spec` at (ratio, connections, round trip) won by `winner` (with
    /// `ties`), or by none.
    fn won(
        spec: &MapSpec,
        key: (f64, u32, f64),
        winner: Option<(Arch, Option<u32>)>,
        ties: &[&str],
    ) -> CellResult {
        let cell = spec
            .cells()
            .into_iter()
            .find(|c| (c.ratio, c.concurrency, c.rtt_ms) == key)
            .expect("a cell of the spec");
        CellResult {
            cell,
            outcome: Some(Outcome {
                winner: winner.map(|(arch, workers)| Candidate { arch, workers }),
                rps: 100.0,
                p99_us: 1000.0,
                ties: ties.iter().map(|t| t.to_string()).collect(),
                decided_by: None,
                runner_up: None,
                margin: None,
                rules: Vec::new(),
                rounds: 1,
                final_ms: 300,
                bound_rps: 200.0,
                infeasible: None,
                candidates: Vec::new(),
                starving: Vec::new(),
                outclassed: Vec::new(),
                unneeded: Vec::new(),
                predicted_out: Vec::new(),
                over_budget: Vec::new(),
                allowance: None,
                predictions: Vec::new(),
                decisions: Vec::new(),
            }),
            goetz: 2,
            points: Vec::new(),
            points_measured: 0,
            full_grid_points: 0,
            points_verifying: 0,
            verify: None,
        }
    }

    fn results(spec: MapSpec, cells: Vec<CellResult>) -> MapResults {
        let mut r = MapResults::new("t", &spec, Default::default(), 1.0);
        r.cells = cells;
        r
    }

    /// `c` with its winner's row, limited by `kind`.
    fn limited_by(mut c: CellResult, kind: crate::lab::limit::LimitKind) -> CellResult {
        let o = c.outcome.as_mut().unwrap();
        o.candidates.push(CandidateRow {
            label: o.winner.unwrap().label(),
            rps: (100.0, 100.0, 100.0),
            measured_rps: 100.0,
            p99_us: 1000.0,
            p99_lower_bound: false,
            cpu_us: 0.0,
            rss_kb: 0.0,
            threads: 1,
            processes: 1,
            window_ms: 300,
            runs: 1,
            limit: Some(crate::lab::limit::Limit {
                kind,
                evidence: String::new(),
            }),
            bound_rps: 125.0,
        });
        c
    }

    #[test]
    fn the_paragraph_says_which_limit_held_the_winners_at_which_connections() {
        use crate::lab::limit::LimitKind;
        let spec = MapSpec::from_toml(
            "name='m'\ncpu_us=1000\nratios=[0]\nconcurrency=[16, 256, 1000]\n",
            "t",
        )
        .unwrap();
        let epoll = Some((Arch::Epoll, None));
        let cells = vec![
            limited_by(won(&spec, (0.0, 16, 0.0), epoll, &[]), LimitKind::Wait),
            limited_by(won(&spec, (0.0, 256, 0.0), epoll, &[]), LimitKind::Cores),
            limited_by(won(&spec, (0.0, 1000, 0.0), epoll, &[]), LimitKind::Cores),
        ];
        let r = results(spec, cells);
        let won: Vec<(&CellResult, &Outcome)> = r
            .cells
            .iter()
            .map(|c| (c, c.outcome.as_ref().unwrap()))
            .collect();
        assert_eq!(
            limit_sentence(&won).as_deref(),
            Some(
                "What limited the winners: wait in 1 cell (at 16 connections); cores in 2 cells \
                 (at 256 to 1,000 connections)."
            )
        );
        assert!(summary(&r).contains("What limited the winners: wait in 1 cell"));
    }

    #[test]
    fn the_rules_table_says_which_pools_were_predicted_bounded_or_measured() {
        use crate::map::halving::RuleOutcome;
        let spec = MapSpec::from_toml(
            "name='m'\narchs=['hybrid']\ncpu_us=1000\nratios=[0]\nconcurrency=[16]\n",
            "t",
        )
        .unwrap();
        let mut c = won(&spec, (0.0, 16, 0.0), Some((Arch::Hybrid, Some(2))), &[]);
        let rule = |name: &str, workers, loss, measured, predicted| RuleOutcome {
            rule: name.into(),
            workers,
            rps: 100.0 * (1.0 - loss),
            p99_us: 0.0,
            meets_bound: true,
            rps_loss: loss,
            missed_because: None,
            measured,
            limit: None,
            predicted,
        };
        c.outcome.as_mut().unwrap().rules = vec![
            rule("goetz", 22, 0.08, false, Some((85.0, 99.0))),
            // Its own bound above the sweet spot: not a loss (it printed "--94% or worse").
            rule("2n+1", 5, -0.94, false, None),
            rule("default", 2, 0.25, false, None),
        ];
        let results = MapResults {
            cells: vec![c],
            ..MapResults::new("t", &spec, crate::lab::results::Machine::default(), 0.0)
        };
        let table = markdown::rules_table(&results);
        assert!(
            table.contains(
                "| 22 (-8% req/s, predicted) | 5 (not measured) | 2 (-25% or worse, by its bound) |"
            ),
            "{table}"
        );
    }

    #[test]
    fn a_map_of_round_trips_has_a_map_per_round_trip_and_says_where_the_winner_changes() {
        let spec = MapSpec::from_toml(
            "name='m'\narchs=['epoll','threaded','prethreaded']\ncpu_us=1000\nratios=[0]\n\
             concurrency=[16, 256, 1000]\nrtt_ms=[0, 100]\n",
            "t",
        )
        .unwrap();
        let cells = vec![
            won(&spec, (0.0, 16, 0.0), Some((Arch::Epoll, None)), &[]),
            {
                let mut c = won(
                    &spec,
                    (0.0, 256, 0.0),
                    Some((Arch::Prethreaded, Some(8))),
                    &[],
                );
                c.outcome.as_mut().unwrap().decided_by = Some(crate::search::rank::Figure::P99);
                c
            },
            won(&spec, (0.0, 1000, 0.0), Some((Arch::Epoll, None)), &[]),
            // The same winner, and one tied with the other's winner: unchanged.
            won(&spec, (0.0, 16, 100.0), Some((Arch::Epoll, None)), &[]),
            won(
                &spec,
                (0.0, 1000, 100.0),
                Some((Arch::Threaded, None)),
                &["epoll"],
            ),
            // The pool moved from 8 to 256.
            won(
                &spec,
                (0.0, 256, 100.0),
                Some((Arch::Prethreaded, Some(256))),
                &[],
            ),
        ];
        let mut r = results(spec, cells);
        let sentence = rtt_sentence(&r).unwrap();
        assert_eq!(
            sentence,
            "The path's round trip changes the winner in 1 of 3 cells: async-rtt100-r0-c256: \
             prethreaded/8 (by p99) at 0 ms, prethreaded/256 at 100 ms."
        );
        // Another architecture outright is a change too.
        r.cells[3] = won(&r.spec, (0.0, 16, 100.0), Some((Arch::Threaded, None)), &[]);
        assert!(rtt_sentence(&r).unwrap().contains("in 2 of 3 cells"));
        // A map per round trip: its table, its heat map, its words.
        r.summary = summary(&r);
        assert!(
            r.summary.contains("changes the winner in 2 of 3"),
            "{}",
            r.summary
        );
        let text = table(&r);
        assert!(text.contains("async waits, over loopback"), "{text}");
        assert!(
            text.contains("async waits, across a 100 ms round trip"),
            "{text}"
        );
        assert!(text.contains("N/(C+W+RTT)"), "{text}");
        let names: Vec<String> = heat_maps(&r).unwrap().into_iter().map(|m| m.0).collect();
        assert_eq!(names, ["map-async-rtt0.svg", "map-async-rtt100.svg"]);
        assert_eq!(
            path_words(&r).as_deref(),
            Some("round trips of 0 (loopback) and 100 ms")
        );
        // One round trip: no sentence, one map, no suffix.
        let one = MapSpec::from_toml("name='m'\ncpu_us=1000\nratios=[0]\nconcurrency=[16]\n", "t")
            .unwrap();
        let cells = vec![won(&one, (0.0, 16, 0.0), Some((Arch::Epoll, None)), &[])];
        let r = results(one, cells);
        assert_eq!(rtt_sentence(&r), None);
        assert_eq!(path_words(&r), None);
        let names: Vec<String> = heat_maps(&r).unwrap().into_iter().map(|m| m.0).collect();
        assert_eq!(names, ["map-async.svg"]);
        assert!(table(&r).contains("N/(C+W))"));
    }
}
