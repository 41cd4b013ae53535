//! The recommendation: which architecture wins a workload, and the sentences that explain it.
//! [`best_within_bound`] decides (highest throughput whose p99 is known to meet the bound, with
//! few errors, every connection served); [`explain`] turns a [`WorkloadAnalysis`] into the
//! summary line and the reasons. A p99 that is only a lower bound never meets the bound, and
//! with repetitions a difference inside the min..max spread is never a win ("indistinguishable
//! within the spread"). Every threshold in the prose comes from the constants of
//! [`super::stats`] and the machine's real core count.

use std::collections::{BTreeMap, BTreeSet};

use super::findings::{
    BestChoice, RankedArch, RankedBy, Recommendation, UslSeries, WorkloadAnalysis,
};
use super::series_label;
use super::stats::{ranges_overlap, rps_range, MAX_ERROR_RATE, WITHIN_BEST};
use crate::lab::limit::LimitKind;
use crate::load::LatencyKey;
use crate::model::usl::{UslLimit, MIN_LEVELS};
use crate::render::latency_figure;
use crate::render::numbers::{duration_us, percent, thousands};
use crate::sweep::results::PointResult;
use crate::sweep::spec::LoadMode;

/// Whether a point's p99 is only a lower bound.
pub fn p99_is_lower_bound(p: &PointResult) -> bool {
    p.figures.latency_us.lower_bound.contains(LatencyKey::P99)
}

/// A point delivered the rate offered when its throughput (the best of its repetitions) came
/// within this fraction of it.
pub const RATE_DELIVERED: f64 = 0.02;

/// Whether a point delivered `offered` requests/s (within [`RATE_DELIVERED`]).
pub fn delivered_rate(p: &PointResult, offered: f64) -> bool {
    rps_range(p).1 >= offered * (1.0 - RATE_DELIVERED)
}

/// The best architecture among `points` (one workload) within `p99_bound_us`, ranked by
/// throughput.
pub fn best_within_bound(points: &[&PointResult], p99_bound_us: f64) -> Option<BestChoice> {
    best_choice(points, p99_bound_us, None)
}

/// Better first: the higher throughput, or `by_latency` (at a rate every candidate
/// delivered) the lower p99 and then the lower server CPU per request. Each architecture is
/// represented by its best point under this order, and the architectures are ranked by it.
fn better_first(a: &PointResult, b: &PointResult, by_latency: bool) -> std::cmp::Ordering {
    if by_latency {
        a.figures
            .latency_us
            .p99
            .total_cmp(&b.figures.latency_us.p99)
            .then(
                a.server_cpu_us_per_request
                    .total_cmp(&b.server_cpu_us_per_request),
            )
    } else {
        b.figures.rps.total_cmp(&a.figures.rps)
    }
}

/// The best architecture among `points` within `p99_bound_us`. With `offered_rps` (a fixed-rate
/// sweep), when every candidate delivered that rate, throughput cannot tell them apart: they
/// are ranked by p99, then by server CPU per request, each by its lowest-p99 point.
pub fn best_choice(
    points: &[&PointResult],
    p99_bound_us: f64,
    offered_rps: Option<f64>,
) -> Option<BestChoice> {
    let usable: Vec<&PointResult> = points
        .iter()
        .copied()
        .filter(|p| p.ok && p.figures.rps > 0.0)
        .collect();
    if usable.is_empty() {
        return None;
    }
    let meets = |p: &PointResult| {
        !p99_is_lower_bound(p)
            && p.figures.latency_us.p99 <= p99_bound_us
            && p.error_rate() <= MAX_ERROR_RATE
            && !p.starved
            && lab_limit(p).is_none()
    };
    let candidates: Vec<&PointResult> = usable.iter().copied().filter(|p| meets(p)).collect();
    let by_latency = offered_rps.filter(|&offered| {
        !candidates.is_empty() && candidates.iter().all(|p| delivered_rate(p, offered))
    });
    let order = |a: &PointResult, b: &PointResult| better_first(a, b, by_latency.is_some());
    let mut best_per_arch: BTreeMap<&str, &PointResult> = BTreeMap::new();
    for p in candidates.iter().copied() {
        let entry = best_per_arch.entry(p.arch.as_str()).or_insert(p);
        if order(p, entry).is_lt() {
            *entry = p;
        }
    }
    let excluded = excluded_archs(points, &best_per_arch);
    let mut ranking: Vec<(&str, &PointResult)> = best_per_arch.into_iter().collect();
    ranking.sort_by(|a, b| order(a.1, b.1));
    let (winner, within_bound) = match ranking.first() {
        Some((_, p)) => (*p, true),
        None => (lowest_p99(&usable)?, false),
    };
    let (ties, indistinguishable) = close_to(
        winner,
        ranking.get(1..).unwrap_or(&[]),
        by_latency.is_some(),
    );
    Some(BestChoice {
        arch: winner.arch.clone(),
        workers: winner.workers,
        concurrency: winner.concurrency,
        streams: winner.streams,
        rps: winner.figures.rps,
        p99_us: winner.figures.latency_us.p99,
        p99_lower_bound: p99_is_lower_bound(winner),
        within_bound,
        ties,
        indistinguishable,
        ranking: ranking.iter().map(|&(a, p)| ranked_arch(a, p)).collect(),
        excluded,
        repetitions: usable
            .iter()
            .map(|p| p.spread.repetitions)
            .fold(1, u32::max),
        ranked_by: if by_latency.is_some() {
            RankedBy::P99
        } else {
            RankedBy::Throughput
        },
        offered_rps: by_latency,
    })
}

/// How the reason an architecture is not a candidate begins when the lab set its figures.
const LAB_REASON: &str = "at every level the lab's ";

/// The lab's limit (the load generator, the path) where it, not the server, set a point's
/// figures: such a point is never a candidate.
pub fn lab_limit(p: &PointResult) -> Option<LimitKind> {
    p.limit.as_ref().and_then(crate::lab::limit::Limit::lab)
}

/// No point met the bound: the lowest p99, preferring points whose percentiles cover every
/// connection offered and whose p99 is a measurement, not a lower bound.
fn lowest_p99<'a>(usable: &[&'a PointResult]) -> Option<&'a PointResult> {
    let exact: Vec<&PointResult> = usable
        .iter()
        .copied()
        .filter(|p| !p99_is_lower_bound(p))
        .collect();
    let representative: Vec<&PointResult> = exact.iter().copied().filter(|p| !p.starved).collect();
    let pool = [&representative, &exact, usable]
        .into_iter()
        .find(|pool| !pool.is_empty())?;
    pool.iter().copied().min_by(|a, b| {
        a.figures
            .latency_us
            .p99
            .total_cmp(&b.figures.latency_us.p99)
    })
}

/// The runners-up close to `winner`: those whose spread overlaps its own (indistinguishable)
/// and those within [`WITHIN_BEST`] of it (ties), by p99 when ranked by latency, else by
/// throughput. Returns (ties, indistinguishable).
fn close_to(
    winner: &PointResult,
    others: &[(&str, &PointResult)],
    by_latency: bool,
) -> (Vec<String>, Vec<String>) {
    let repeated = |p: &PointResult| p.spread.repetitions > 1;
    let p99_range = |p: &PointResult| {
        if repeated(p) {
            (p.spread.p99_min, p.spread.p99_max)
        } else {
            (p.figures.latency_us.p99, p.figures.latency_us.p99)
        }
    };
    let mut ties = Vec::new();
    let mut indistinguishable = Vec::new();
    for (arch, p) in others {
        let either_repeated = repeated(winner) || repeated(p);
        if by_latency {
            if either_repeated && ranges_overlap(p99_range(p), p99_range(winner)) {
                indistinguishable.push(arch.to_string());
            } else if p.figures.latency_us.p99
                <= winner.figures.latency_us.p99 * (1.0 + WITHIN_BEST)
            {
                ties.push(arch.to_string());
            }
        } else if either_repeated && ranges_overlap(rps_range(p), rps_range(winner)) {
            indistinguishable.push(arch.to_string());
        } else if p.figures.rps >= winner.figures.rps * (1.0 - WITHIN_BEST) {
            ties.push(arch.to_string());
        }
    }
    (ties, indistinguishable)
}

/// The architectures with no candidate point, each with why.
fn excluded_archs(
    points: &[&PointResult],
    best_per_arch: &BTreeMap<&str, &PointResult>,
) -> Vec<(String, String)> {
    let archs: BTreeSet<&str> = points.iter().map(|p| p.arch.as_str()).collect();
    archs
        .iter()
        .filter(|a| !best_per_arch.contains_key(*a))
        .map(|a| {
            let mine: Vec<&PointResult> = points.iter().copied().filter(|p| p.arch == *a).collect();
            (a.to_string(), exclusion_reason(&mine))
        })
        .collect()
}

fn ranked_arch(arch: &str, p: &PointResult) -> RankedArch {
    let (rps_min, rps_max) = rps_range(p);
    RankedArch {
        arch: arch.to_string(),
        rps: p.figures.rps,
        rps_min,
        rps_max,
        p99_us: p.figures.latency_us.p99,
        cpu_us_per_request: p.server_cpu_us_per_request,
        concurrency: p.concurrency,
        limit: p.limit.clone(),
    }
}

/// Why none of an architecture's points is a candidate.
fn exclusion_reason(mine: &[&PointResult]) -> String {
    let ok: Vec<&PointResult> = mine.iter().copied().filter(|p| p.ok).collect();
    if ok.is_empty() {
        return "every point failed".to_string();
    }
    // The lab's limit first: where the generator or the path set the figures, the errors and
    // the unanswered requests are theirs too.
    if ok.iter().all(|p| lab_limit(p).is_some()) {
        let kinds: BTreeSet<&str> = ok
            .iter()
            .filter_map(|p| lab_limit(p))
            .map(LimitKind::name)
            .collect();
        // Over HTTP/2 one connection's two ends take turns, whatever the threads.
        let how = if ok.iter().any(|p| p.streams.unwrap_or(1) > 1) {
            "over more connections, with more load threads,"
        } else {
            "with more load threads"
        };
        return format!(
            "{LAB_REASON}{} set its figures, not the server (see each point's limit): measure \
             it {how} or on a machine of its own",
            kinds.into_iter().collect::<Vec<_>>().join(" and ")
        );
    }
    if ok.iter().all(|p| p.error_rate() > MAX_ERROR_RATE) {
        return "errors at every level".to_string();
    }
    let clean: Vec<&PointResult> = ok
        .iter()
        .copied()
        .filter(|p| p.error_rate() <= MAX_ERROR_RATE && !p.starved && lab_limit(p).is_none())
        .collect();
    if clean.is_empty() {
        return "at every level some connections waited unanswered (Little's law), so its \
                percentiles leave out the slowest requests"
            .to_string();
    }
    let exact: Vec<&PointResult> = clean
        .iter()
        .copied()
        .filter(|p| !p99_is_lower_bound(p))
        .collect();
    if exact.is_empty() {
        return "its p99 is only a lower bound at every level (requests were still unanswered \
                when the run ended), so it cannot be shown to meet the bound"
            .to_string();
    }
    let lowest = exact
        .iter()
        .map(|p| p.figures.latency_us.p99)
        .fold(f64::MAX, f64::min);
    format!("p99 never under the bound (lowest {})", duration_us(lowest))
}

/// What the prose needs to know about the sweep beyond one workload's analysis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProseContext {
    pub p99_bound_ms: f64,
    pub mode: LoadMode,
    /// The machine's cores (from `results.json`'s machine).
    pub cores: u32,
}

/// The summary line and the reasons for one workload.
pub fn explain(w: &WorkloadAnalysis, ctx: &ProseContext, out: &mut Recommendation) {
    let name = &w.workload;
    let bound_ms = thousands(ctx.p99_bound_ms);
    match &w.best {
        Some(best) if best.within_bound && !best.indistinguishable.is_empty() => {
            explain_indistinguishable(name, best, ctx, out);
        }
        Some(best) if best.within_bound && best.ranked_by == RankedBy::P99 => {
            explain_by_latency(name, best, ctx, out);
        }
        Some(best) if best.within_bound => explain_by_throughput(name, best, ctx, out),
        Some(best) => {
            let lab: Vec<&str> = best
                .excluded
                .iter()
                .filter(|(_, why)| why.starts_with(LAB_REASON))
                .map(|(arch, _)| arch.as_str())
                .collect();
            let lab = match lab.as_slice() {
                [] => String::new(),
                archs => format!(
                    "; the lab, not the server, set the figures of {}",
                    archs.join(", ")
                ),
            };
            out.summary.push(format!(
                "{name}: no architecture met p99 <= {bound_ms} ms; lowest p99 was {} ({}){lab}",
                series_label(&best.arch, best.workers),
                latency_figure(best.p99_us, best.p99_lower_bound)
            ));
            if best.p99_lower_bound {
                out.details.push(format!(
                    "{name}: every p99 was only a lower bound (requests were still unanswered when \
                     the run ended), so no architecture can be called the fastest."
                ));
            }
        }
        None => out.summary.push(format!("{name}: no usable measurement")),
    }
    if let Some(best) = &w.best {
        for (arch, why) in &best.excluded {
            out.details
                .push(format!("{name}: {arch} was not a candidate: {why}."));
        }
    }
    explain_cost(w, out);
    explain_pools(w, out);
    explain_usl(w, out);
    if ctx.mode == LoadMode::Rate {
        out.details.push(format!(
            "{name}: rate mode: latencies are measured from the intended send time (coordinated \
             omission corrected)."
        ));
    }
}

/// What a point's level counts: connections, or over HTTP/2 the requests in flight.
fn level_word(best: &BestChoice) -> &'static str {
    if best.streams.is_some() {
        "in flight"
    } else {
        "connections"
    }
}

/// The winner by throughput, the runner-up's margin, the spread and the noise caveat.
fn explain_by_throughput(
    name: &str,
    best: &BestChoice,
    ctx: &ProseContext,
    out: &mut Recommendation,
) {
    let bound_ms = thousands(ctx.p99_bound_ms);
    let who = series_label(&best.arch, best.workers);
    let line = format!(
        "{name}: {who}: {} req/s at {} {} with p99 {} (bound {bound_ms} ms)",
        thousands(best.rps),
        thousands(f64::from(best.concurrency)),
        level_word(best),
        duration_us(best.p99_us)
    );
    let reason = format!(
        "For {name}, pick {who}: it had the highest throughput of the architectures whose \
         p99 stayed under {bound_ms} ms with under {} errors.",
        percent(MAX_ERROR_RATE)
    );
    let next = |second: &RankedArch| {
        format!(
            "{} at {} req/s ({})",
            second.arch,
            thousands(second.rps),
            signed_percent(second.rps / best.rps - 1.0)
        )
    };
    let mut reason = verdict(out, line, ("within", &best.ties), reason, best, next);
    let winner = &best.ranking[0];
    if best.repetitions > 1 && winner.rps_min < winner.rps_max {
        reason.push_str(&format!(
            " Over {} repetitions its throughput ranged {}..{} req/s, clear of the \
             others' ranges.",
            best.repetitions,
            thousands(winner.rps_min),
            thousands(winner.rps_max)
        ));
    }
    if !best.ties.is_empty() {
        reason.push_str(&format!(
            " Differences under {} are within the noise of a {}-core machine shared by \
             the server and the load generator: prefer the simpler or cheaper one.",
            percent(WITHIN_BEST),
            ctx.cores
        ));
    }
    out.details.push(reason);
}

/// The cheapest architecture in server CPU per request, or those that cannot be told apart.
fn explain_cost(w: &WorkloadAnalysis, out: &mut Recommendation) {
    let name = &w.workload;
    match &w.cheapest {
        Some((arch, _)) if !w.cheapest_within_spread.is_empty() => out.details.push(format!(
            "{name}: in server CPU per request, {arch}, {} are indistinguishable within the \
             spread of the repetitions: none is the cheapest.",
            w.cheapest_within_spread.join(", ")
        )),
        Some((arch, us)) => out.details.push(format!(
            "{name}: the cheapest in server CPU was {arch}, {} per request.",
            duration_us(*us)
        )),
        None => {}
    }
}

/// Each pooled architecture's sweet spot, and Goetz's formula beside the measured one.
fn explain_pools(w: &WorkloadAnalysis, out: &mut Recommendation) {
    let name = &w.workload;
    for s in &w.sweet_spots {
        let mut line = format!(
            "{name}: sweet spot for {} at {} connections: {} workers, {} req/s (the fewest within \
             {} of the best, or inside its spread; {} req/s with {} workers)",
            s.arch,
            thousands(f64::from(s.concurrency)),
            s.workers,
            thousands(s.rps),
            percent(WITHIN_BEST),
            thousands(s.best_rps),
            s.best_workers
        );
        if s.workers == s.max_workers_tried {
            line.push_str(
                "; it is the largest pool tried, so the curve was still rising: try larger pools",
            );
            if s.workers >= s.concurrency {
                line.push_str(&format!(
                    " with more than {} connections, since a pool beyond the requests in flight \
                     has nothing to do",
                    thousands(f64::from(s.concurrency))
                ));
            }
        }
        line.push('.');
        out.details.push(line);
    }
    if let Some(g) = &w.goetz {
        let mut line = format!(
            "{name}: Goetz's formula, N_cpu x U x (1 + W/C) = {} x {} x (1 + {:.1} ms / {}) = {} \
             threads",
            g.cores,
            g.utilization,
            g.wait_ms,
            duration_us(g.compute_us),
            thousands((g.pool_size * 10.0).round() / 10.0)
        );
        if let (useful, true) = g.useful_pool_size() {
            line.push_str(&format!(
                ", capped at {} by the concurrency: no more than {} requests are ever in flight, \
                 so threads past that have nothing to do",
                thousands(useful),
                thousands(f64::from(g.concurrency_cap))
            ));
        }
        match g.measured_sweet_spot {
            Some(n) => line.push_str(&format!("; measured sweet spot: {n}.")),
            None => line.push('.'),
        }
        out.details.push(line);
    }
}

/// Appends `; WHAT 5%: a, b` to a summary line when the winner has ties.
fn push_ties(line: &mut String, what: &str, ties: &[String]) {
    if !ties.is_empty() {
        line.push_str(&format!(
            "; {what} {}: {}",
            percent(WITHIN_BEST),
            ties.join(", ")
        ));
    }
}

/// A relative difference as a signed percentage, with a decimal under 1% so that a small
/// difference never reads "-0%".
pub fn signed_percent(fraction: f64) -> String {
    let pct = fraction * 100.0;
    if pct.abs() < 0.05 {
        "within 0.1%".to_string()
    } else if pct.abs() < 1.0 {
        format!("{pct:+.1}%")
    } else {
        format!("{pct:+.0}%")
    }
}

/// A fixed-rate sweep where every candidate delivered the rate offered: the ranking is by p99
/// (then server CPU per request), and the words say so.
fn explain_by_latency(name: &str, best: &BestChoice, ctx: &ProseContext, out: &mut Recommendation) {
    let who = series_label(&best.arch, best.workers);
    let offered = thousands(best.offered_rps.unwrap_or(best.rps));
    let mut group = vec![who.clone()];
    group.extend(best.indistinguishable.iter().cloned());
    let head = if best.indistinguishable.is_empty() {
        who.clone()
    } else {
        format!(
            "{} (indistinguishable within the spread of {} repetitions)",
            group.join(", "),
            best.repetitions
        )
    };
    let line = format!(
        "{name}: {head}: p99 {} at {} {}, ranked by p99 since every candidate delivered \
         the offered {offered} req/s (bound {} ms)",
        duration_us(best.p99_us),
        thousands(f64::from(best.concurrency)),
        level_word(best),
        thousands(ctx.p99_bound_ms)
    );
    let reason = format!(
        "For {name}, pick {who}: every architecture whose p99 stayed under {} ms delivered the \
         offered {offered} req/s (within {}), so throughput cannot tell them apart; ranked by p99, \
         then by server CPU per request, {who} had the lowest p99, {} at {} connections.",
        thousands(ctx.p99_bound_ms),
        percent(RATE_DELIVERED),
        duration_us(best.p99_us),
        thousands(f64::from(best.concurrency))
    );
    let next = |second: &RankedArch| {
        format!(
            "{} with p99 {} ({})",
            second.arch,
            duration_us(second.p99_us),
            signed_percent(second.p99_us / best.p99_us - 1.0)
        )
    };
    let reason = verdict(out, line, ("p99 within", &best.ties), reason, best, next);
    out.details.push(reason);
}

/// A verdict's summary line, with the ties named (`within` says in what), pushed; its reason
/// with the runner-up (`next` names it) after it, returned for what follows.
fn verdict(
    out: &mut Recommendation,
    mut line: String,
    (within, ties): (&str, &[String]),
    mut reason: String,
    best: &BestChoice,
    next: impl Fn(&RankedArch) -> String,
) -> String {
    push_ties(&mut line, within, ties);
    out.summary.push(line);
    if let Some(limit) = best.ranking.first().and_then(|w| w.limit.as_ref()) {
        reason.push_str(&format!(
            " What limited it: {}: {}.",
            limit.kind.name(),
            limit.evidence
        ));
    }
    if let Some(second) = best.ranking.get(1) {
        reason.push_str(&format!(" Next was {}.", next(second)));
    }
    if let Some(held) = held_back(best.ranking.get(1..).unwrap_or(&[])) {
        reason.push_str(&format!(" {held}"));
    }
    reason
}

/// What held each runner-up back, at the point that represents it: `What held the others
/// back: epoll at 64, cores (...); poll at 64, cores (...).`
fn held_back(others: &[RankedArch]) -> Option<String> {
    let each: Vec<String> = others
        .iter()
        .filter_map(|r| {
            let l = r.limit.as_ref()?;
            Some(format!(
                "{} at {}, {} ({})",
                r.arch,
                thousands(f64::from(r.concurrency)),
                l.kind.name(),
                l.evidence
            ))
        })
        .collect();
    (!each.is_empty()).then(|| format!("What held the others back: {}.", each.join("; ")))
}

/// The winner's throughput overlaps others' over the repetitions: no winner is named.
fn explain_indistinguishable(
    name: &str,
    best: &BestChoice,
    ctx: &ProseContext,
    out: &mut Recommendation,
) {
    let who = series_label(&best.arch, best.workers);
    let mut group = vec![who.clone()];
    group.extend(best.indistinguishable.iter().cloned());
    out.summary.push(format!(
        "{name}: {} are indistinguishable within the spread of {} repetitions (p99 under {} ms)",
        group.join(", "),
        best.repetitions,
        thousands(ctx.p99_bound_ms)
    ));
    let ranges: Vec<String> = best
        .ranking
        .iter()
        .filter(|r| r.arch == best.arch || best.indistinguishable.contains(&r.arch))
        .map(|r| {
            format!(
                "{} {}..{} req/s (median {})",
                r.arch,
                thousands(r.rps_min),
                thousands(r.rps_max),
                thousands(r.rps)
            )
        })
        .collect();
    let mut reason = format!(
        "For {name}, no single winner: over {} repetitions the throughputs overlapped ({}), so \
         the differences are inside the spread. Prefer the simpler or cheaper one, or measure \
         with more repetitions.",
        best.repetitions,
        ranges.join("; ")
    );
    if let Some(held) = held_back(&best.ranking) {
        reason.push_str(&format!(
            " {}",
            held.replace("held the others back", "limited each")
        ));
    }
    out.details.push(reason);
}

fn explain_usl(w: &WorkloadAnalysis, out: &mut Recommendation) {
    let name = &w.workload;
    let winner = w.best.as_ref().map(|b| (b.arch.clone(), b.workers));
    let worth_telling = |u: &&UslSeries| {
        u.fit.is_some_and(|f| f.r_squared >= 0.8)
            && (u.axis == "workers" || winner.as_ref() == Some(&(u.arch.clone(), u.fixed)))
    };
    for u in w.usl.iter().filter(worth_telling) {
        let Some(fit) = u.fit else { continue };
        let peak = match (u.predicted_peak_n, u.predicted_peak_rps, u.ceiling_rps) {
            (Some(n), _, _) if n > 2.0 * f64::from(u.measured_max_n) => format!(
                "no peak within the measured range (the model extrapolates one near N* = {n:.0})"
            ),
            (Some(n), Some(x), _) => format!("peak N* = {n:.1}, X_max = {} req/s", thousands(x)),
            (_, _, Some(x)) => format!("no peak; levels off toward {} req/s", thousands(x)),
            _ => "still scaling linearly".to_string(),
        };
        let limit = match u.limit {
            Some(UslLimit::Contention) => "; limited by contention (sigma)",
            Some(UslLimit::Coherency) => "; limited by coherency (kappa)",
            _ => "",
        };
        out.details.push(format!(
            "{name}: USL fit for {}: sigma {:.4}, kappa {:.6}, lambda {:.0}/s (R^2 {:.2}); \
             {peak}{limit}; measured best N = {}.",
            usl_series_name(u),
            fit.sigma,
            fit.kappa,
            fit.lambda,
            fit.r_squared,
            u.measured_best_n
        ));
    }
    let refused: Vec<&UslSeries> = w.usl.iter().filter(|u| u.fit.is_none()).collect();
    let which = if refused.len() <= 3 {
        refused
            .iter()
            .map(|u| format!("{} ({} levels)", usl_series_name(u), u.levels))
            .collect::<Vec<_>>()
            .join(", ")
    } else {
        let fewest = refused.iter().map(|u| u.levels).min().unwrap_or(0);
        let most = refused.iter().map(|u| u.levels).max().unwrap_or(0);
        let levels = if fewest == most {
            format!("{fewest}")
        } else {
            format!("{fewest} to {most}")
        };
        let listed = if refused.len() < w.usl.len() {
            " (listed under the USL table)"
        } else {
            ""
        };
        format!(
            "{} series, measured at {levels} levels each{listed}",
            refused.len()
        )
    };
    if !refused.is_empty() {
        out.details.push(format!(
            "{name}: no USL fit for {which}: a fit needs at least {MIN_LEVELS} measured levels."
        ));
    }
}

/// `epoll over connections` or `prethreaded over workers at 64 connections`.
pub fn usl_series_name(u: &UslSeries) -> String {
    match (u.axis.as_str(), u.fixed) {
        ("workers", Some(c)) => format!("{} over workers at {c} connections", u.arch),
        (_, workers) => format!("{} over connections", series_label(&u.arch, workers)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::results::{PointLatency, Spread};

    fn point(
        arch: &str,
        workers: Option<u32>,
        concurrency: u32,
        rps: f64,
        p99_ms: f64,
    ) -> PointResult {
        let mut p = super::super::tests::point(arch, workers, concurrency, rps);
        p.figures.latency_us = PointLatency {
            p99: p99_ms * 1000.0,
            ..Default::default()
        };
        p
    }

    fn repeated(mut p: PointResult, min: f64, max: f64) -> PointResult {
        p.spread = Spread {
            repetitions: 3,
            rps_min: min,
            rps_max: max,
            p99_min: p.figures.latency_us.p99,
            p99_max: p.figures.latency_us.p99,
        };
        p
    }

    fn analysis_of(best: Option<BestChoice>) -> WorkloadAnalysis {
        WorkloadAnalysis {
            workload: "w".into(),
            best,
            cheapest: None,
            cheapest_within_spread: Vec::new(),
            sweet_spots: Vec::new(),
            usl: Vec::new(),
            goetz: None,
        }
    }

    const CTX: ProseContext = ProseContext {
        p99_bound_ms: 100.0,
        mode: LoadMode::Closed,
        cores: 2,
    };

    #[test]
    fn best_arch_respects_the_bound_and_errors() {
        let fast_but_slow_tail = point("threaded", None, 64, 9000.0, 250.0);
        let mut fast_with_errors = point("poll", None, 64, 9500.0, 5.0);
        fast_with_errors.errors = 500;
        let winner = point("epoll", None, 16, 8000.0, 4.0);
        let close_second = point("prethreaded", Some(4), 16, 7800.0, 6.0);
        let points = [
            &fast_but_slow_tail,
            &fast_with_errors,
            &winner,
            &close_second,
        ];
        let best = best_within_bound(&points, 100_000.0).unwrap();
        assert_eq!(best.arch, "epoll");
        assert!(best.within_bound);
        assert_eq!(best.ties, vec!["prethreaded".to_string()]);
        assert!(best.indistinguishable.is_empty());
        assert_eq!(best.ranking.len(), 2);
        let excluded: BTreeMap<_, _> = best.excluded.into_iter().collect();
        assert!(excluded["threaded"].contains("p99"));
        assert!(excluded["poll"].contains("errors"));
        // Nothing meets a 1 ms bound: the lowest p99 is reported instead.
        let none = best_within_bound(&points, 1000.0).unwrap();
        assert!(!none.within_bound);
        assert_eq!(none.arch, "epoll");
    }

    #[test]
    fn a_fixed_rate_that_everyone_delivered_is_ranked_by_p99_then_cpu() {
        let mut epoll = point("epoll", None, 10_000, 5_000.0, 313.9);
        let mut reactors = point("reactors", Some(2), 10_000, 4_999.0, 80.6);
        let async_ = point("async", Some(2), 10_000, 4_999.0, 120.8);
        epoll.server_cpu_us_per_request = 20.0;
        reactors.server_cpu_us_per_request = 30.0;
        let points = [&epoll, &reactors, &async_];
        // By throughput, epoll's 5,000 beats 4,999: a tie-break on noise.
        let by_rps = best_choice(&points, 2_000_000.0, None).unwrap();
        assert_eq!(
            (by_rps.arch.as_str(), by_rps.ranked_by),
            ("epoll", RankedBy::Throughput)
        );
        let by_p99 = best_choice(&points, 2_000_000.0, Some(5_000.0)).unwrap();
        assert_eq!(by_p99.ranked_by, RankedBy::P99);
        assert_eq!(by_p99.arch, "reactors");
        let order: Vec<&str> = by_p99.ranking.iter().map(|r| r.arch.as_str()).collect();
        assert_eq!(order, ["reactors", "async", "epoll"]);
        // Equal p99: the cheaper server CPU per request first.
        let mut cheap = point("hybrid", Some(2), 10_000, 4_999.0, 80.6);
        cheap.server_cpu_us_per_request = 10.0;
        let tied = best_choice(&[&reactors, &cheap], 2_000_000.0, Some(5_000.0)).unwrap();
        assert_eq!(tied.arch, "hybrid");
        assert_eq!(tied.ties, ["reactors"]);
        // One candidate fell short of the rate: throughput decides again.
        let short = point("uring", Some(2), 10_000, 4_000.0, 50.0);
        let mixed = best_choice(&[&epoll, &short], 2_000_000.0, Some(5_000.0)).unwrap();
        assert_eq!(
            (mixed.arch.as_str(), mixed.ranked_by),
            ("epoll", RankedBy::Throughput)
        );
        // The words say which rule ranked them.
        let mut w = analysis_of(Some(by_p99));
        w.workload = "hello".into();
        let mut out = Recommendation::default();
        explain(&w, &CTX, &mut out);
        assert_eq!(
            out.summary[0],
            "hello: reactors/2: p99 80.6 ms at 10,000 connections, ranked by p99 since every \
             candidate delivered the offered 5,000 req/s (bound 100 ms)"
        );
        assert!(
            out.details[0].contains("throughput cannot tell them apart")
                && out.details[0].contains("Next was async with p99 120.8 ms (+50%)"),
            "{}",
            out.details[0]
        );
    }

    #[test]
    fn small_differences_never_read_minus_zero() {
        assert_eq!(signed_percent(-0.0004), "within 0.1%");
        assert_eq!(signed_percent(-0.004), "-0.4%");
        assert_eq!(signed_percent(-0.14), "-14%");
        assert_eq!(signed_percent(0.5), "+50%");
    }

    #[test]
    fn starved_points_are_not_candidates() {
        // A pool that served 2 of 50 connections shows a fine p99 for those 2 only.
        let mut starved_pool = point("prethreaded", Some(2), 50, 36.0, 67.0);
        starved_pool.starved = true;
        let fair = point("threaded", None, 50, 35.0, 1630.0);
        let best = best_within_bound(&[&starved_pool, &fair], 10_000_000.0).unwrap();
        assert_eq!(best.arch, "threaded");
        assert!(
            best.excluded[0].1.contains("unanswered"),
            "{:?}",
            best.excluded
        );
    }

    fn limited(mut p: PointResult, kind: LimitKind, evidence: &str) -> PointResult {
        p.limit = Some(crate::lab::limit::Limit {
            kind,
            evidence: evidence.into(),
        });
        p
    }

    #[test]
    fn the_labs_limit_never_wins_and_the_verdict_says_what_limited_each() {
        // The fastest point was the load generator's figure: never a candidate.
        let lab = limited(
            point("uring", None, 64, 170_000.0, 2.0),
            LimitKind::Generator,
            "the load generator used 98% of a core per thread",
        );
        let a = limited(
            point("epoll", None, 64, 160_000.0, 2.0),
            LimitKind::Cores,
            "the server used 0.98 of the 1.0 cores it could (98%)",
        );
        let b = limited(
            point("reactors", None, 64, 120_000.0, 3.0),
            LimitKind::Unexplained,
            "no rule fits",
        );
        let best = best_within_bound(&[&lab, &a, &b], 100_000.0).unwrap();
        assert_eq!(best.arch, "epoll");
        assert_eq!(
            best.excluded,
            vec![(
                "uring".to_string(),
                "at every level the lab's generator set its figures, not the server (see each \
                 point's limit): measure it with more load threads or on a machine of its own"
                    .to_string()
            )]
        );
        // Over HTTP/2, more connections come first: one connection's ends take turns.
        let h2 = PointResult {
            streams: Some(64),
            ..lab.clone()
        };
        let best = best_within_bound(&[&h2, &a, &b], 100_000.0).unwrap();
        assert!(
            best.excluded[0].1.ends_with(
                "measure it over more connections, with more load threads, or on a \
                            machine of its own"
            ),
            "{:?}",
            best.excluded
        );
        let mut out = Recommendation::default();
        explain(&analysis_of(Some(best)), &CTX, &mut out);
        let text = out.details.join(" ");
        assert!(
            text.contains(
                "What limited it: cores: the server used 0.98 of the 1.0 cores it could (98%). \
                 Next was reactors"
            ),
            "{text}"
        );
        assert!(
            text.contains("What held the others back: reactors at 64, unexplained (no rule fits)."),
            "{text}"
        );
        // The same for the map and tune's samples: a lab-limited sample never meets a bound.
        let sample = crate::search::sample_of(&lab, 2);
        assert!(!sample.meets(100_000.0));
        assert_eq!(
            crate::search::Miss::of(&[sample], 100_000.0),
            Some(crate::search::Miss::Lab(LimitKind::Generator))
        );
        assert!(crate::search::sample_of(&a, 2).meets(100_000.0));
    }

    #[test]
    fn a_lower_bound_p99_is_never_the_fastest() {
        // The iterative server answered 1 of 64 connections fast; the others were unanswered
        // at the end, so its p99 of 200 us is only a lower bound.
        let mut censored = point("iterative", None, 64, 9000.0, 0.2);
        censored
            .figures
            .latency_us
            .lower_bound
            .insert(LatencyKey::P99);
        let honest = point("epoll", None, 64, 5000.0, 30.0);
        let best = best_within_bound(&[&censored, &honest], 100_000.0).unwrap();
        assert_eq!(best.arch, "epoll");
        assert!(!best.p99_lower_bound);
        assert_eq!(
            best.excluded,
            vec![(
                "iterative".to_string(),
                "its p99 is only a lower bound at every level (requests were still unanswered \
                 when the run ended), so it cannot be shown to meet the bound"
                    .to_string()
            )]
        );
        // Nothing meets a 1 ms bound: the lowest *measured* p99 is named, not the lower bound.
        let none = best_within_bound(&[&censored, &honest], 1000.0).unwrap();
        assert!(!none.within_bound);
        assert_eq!(none.arch, "epoll");
        // Only lower bounds: named with ">=", and the prose says none is the fastest.
        let only = best_within_bound(&[&censored], 1000.0).unwrap();
        assert!(only.p99_lower_bound);
        let mut out = Recommendation::default();
        explain(&analysis_of(Some(only)), &CTX, &mut out);
        assert_eq!(
            out.summary,
            vec!["w: no architecture met p99 <= 100 ms; lowest p99 was iterative (>= 200 us)"]
        );
        assert!(out.details[0].contains("no architecture can be called the fastest"));
    }

    #[test]
    fn a_difference_inside_the_spread_is_not_a_win() {
        // 10% apart in the median, but the repetitions overlap.
        let a = repeated(point("epoll", None, 16, 1000.0, 4.0), 800.0, 1200.0);
        let b = repeated(point("threaded", None, 16, 900.0, 5.0), 850.0, 950.0);
        let best = best_within_bound(&[&a, &b], 100_000.0).unwrap();
        assert_eq!(best.indistinguishable, vec!["threaded".to_string()]);
        assert!(best.ties.is_empty());
        let mut out = Recommendation::default();
        explain(&analysis_of(Some(best)), &CTX, &mut out);
        assert_eq!(
            out.summary,
            vec![
                "w: epoll, threaded are indistinguishable within the spread of 3 repetitions \
                 (p99 under 100 ms)"
            ]
        );
        assert!(
            out.details[0].starts_with("For w, no single winner")
                && out.details[0]
                    .contains("epoll 800..1,200 req/s (median 1,000); threaded 850..950 req/s"),
            "{:?}",
            out.details
        );
        assert!(!out.details.iter().any(|d| d.contains("pick")));
        // The same medians with tight, separate ranges: a win.
        let a = repeated(point("epoll", None, 16, 1000.0, 4.0), 990.0, 1010.0);
        let b = repeated(point("threaded", None, 16, 900.0, 5.0), 890.0, 910.0);
        let best = best_within_bound(&[&a, &b], 100_000.0).unwrap();
        assert!(best.indistinguishable.is_empty() && best.ties.is_empty());
        let mut out = Recommendation::default();
        explain(&analysis_of(Some(best)), &CTX, &mut out);
        assert!(out.details[0].starts_with("For w, pick epoll"), "{:?}", out);
        assert!(
            out.details[0].contains("Over 3 repetitions its throughput ranged 990..1,010 req/s"),
            "{:?}",
            out
        );
    }

    #[test]
    fn prose_uses_the_constants_and_the_real_core_count() {
        let a = point("epoll", None, 16, 1000.0, 4.0);
        let b = point("threaded", None, 16, 990.0, 5.0);
        let best = best_within_bound(&[&a, &b], 100_000.0).unwrap();
        let mut out = Recommendation::default();
        let ctx = ProseContext { cores: 48, ..CTX };
        explain(&analysis_of(Some(best)), &ctx, &mut out);
        let text = out.details.join(" ");
        assert!(text.contains(&format!("under {} errors", percent(MAX_ERROR_RATE))));
        assert!(text.contains(&format!(
            "Differences under {} are within the noise of a 48-core machine",
            percent(WITHIN_BEST)
        )));
        assert!(out.summary[0].ends_with(&format!("; within {}: threaded", percent(WITHIN_BEST))));
    }

    #[test]
    fn many_refused_usl_series_are_summed_up_in_one_sentence() {
        let refused = |arch: &str, levels: usize| UslSeries {
            arch: arch.into(),
            workload: "w".into(),
            axis: "concurrency".into(),
            fixed: None,
            levels,
            fit: None,
            refused: Some("too few".into()),
            limit: None,
            predicted_peak_n: None,
            predicted_peak_rps: None,
            ceiling_rps: None,
            measured_best_n: 1,
            measured_best_rps: 1.0,
            measured_max_n: 4,
        };
        let mut w = analysis_of(None);
        w.usl = vec![
            refused("epoll", 4),
            refused("poll", 4),
            refused("threaded", 4),
        ];
        let mut out = Recommendation::default();
        explain(&w, &CTX, &mut out);
        assert_eq!(
            out.details,
            vec![
                "w: no USL fit for epoll over connections (4 levels), poll over connections (4 \
                 levels), threaded over connections (4 levels): a fit needs at least 6 measured \
                 levels."
            ]
        );
        w.usl.push(refused("forking", 3));
        let mut out = Recommendation::default();
        explain(&w, &CTX, &mut out);
        assert_eq!(
            out.details,
            vec![
                "w: no USL fit for 4 series, measured at 3 to 4 levels each: a fit needs at least 6 \
                 measured levels."
            ]
        );
    }
}
