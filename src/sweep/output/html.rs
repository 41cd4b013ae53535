//! `report.html`: one self-contained page (inline CSS, inline SVG, no scripts, no fetches):
//! the recommendation in plain words with its reasons, each workload's tables and plots, the
//! theory (USL, Goetz, Little) beside the measurements, warnings, and the machine.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::svg::render_plots;
use super::{file_stem, percent, thousands, workload_tables, Exporter, Table};
use crate::lab::cgroup::CpuMethod;
use crate::model::usl::MIN_LEVELS;
use crate::sweep::analysis::{MAX_ERROR_RATE, WITHIN_BEST};
use crate::sweep::results::SweepResults;
use crate::sweep::spec::LoadMode;

/// Writes `report.html`.
pub struct HtmlExporter;

impl Exporter for HtmlExporter {
    fn name(&self) -> &'static str {
        "html"
    }

    fn export(&self, results: &SweepResults, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
        super::write_one(dir, "report.html", &render(results)?)
    }
}

pub use crate::render::html::escape;
use crate::render::html::{page_start, PAGE_END};

fn table_html(table: &Table) -> String {
    if table.header.is_empty() {
        return format!("<p class=\"note\">{}</p>\n", escape(&table.title));
    }
    let mut out = format!(
        "<h3>{}</h3>\n<div class=\"scroll\"><table>\n<tr>",
        escape(&table.title)
    );
    for h in &table.header {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr>\n");
    for (r, row) in table.rows.iter().enumerate() {
        out.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let class = if cell == "failed" {
                " class=\"failed\""
            } else if i > 0 {
                " class=\"num\""
            } else {
                ""
            };
            let title = match table.hovers.get(&(r, i)) {
                Some(text) => format!(" title=\"{}\"", escape(text)),
                None => String::new(),
            };
            let _ = write!(out, "<td{class}{title}>{}</td>", escape(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table></div>\n");
    for note in &table.notes {
        let _ = writeln!(
            out,
            "<p class=\"note\">{}</p>",
            escape(&note.replace('`', ""))
        );
    }
    out
}

/// The Method section, from what `results` recorded: the load mode and its settings, the
/// generator, how server CPU was measured at each point, pinning, and the rules of the
/// analysis.
pub fn method_text(results: &SweepResults) -> Vec<String> {
    let e = &results.experiment;
    let mut paragraphs = Vec::new();
    let load = match e.mode {
        LoadMode::Closed => format!(
            "a closed loop: each connection sends its next request when the last is answered, \
             for {} per point after {} of warm-up",
            seconds(e.duration),
            seconds(e.warmup)
        ),
        LoadMode::Rate => format!(
            "a fixed rate of {} requests/s over all connections for {} per point after {} of \
             warm-up, latency measured from each request's intended send time (coordinated \
             omission corrected)",
            thousands(e.rate.unwrap_or(0.0)),
            seconds(e.duration),
            seconds(e.warmup)
        ),
        LoadMode::Count => format!(
            "a fixed count of {} requests per point",
            thousands(e.requests.unwrap_or(0) as f64)
        ),
    };
    paragraphs.push(format!(
        "Each point starts the server in its own process group, waits for its ready line, warms \
         up, then measures with sweetspot's in-process load generator (its epoll driver, {} \
         thread{}): {load}. A request unanswered after {} is a timeout, an error that never \
         enters the latency histogram; {} repetition{} per point{}.",
        e.load_threads,
        if e.load_threads == 1 { "" } else { "s" },
        seconds(e.timeout),
        e.repetitions,
        if e.repetitions == 1 { "" } else { "s" },
        if e.repetitions > 1 {
            ", the median run's figures shown with the min..max of all"
        } else {
            ""
        }
    ));
    paragraphs.extend(setting_paragraphs(results));
    let cpu = cpu_methods_text(results);
    paragraphs.push(format!(
        "Server CPU is the user+system time of the whole server over the measured window, {cpu}; \
         memory is the peak of the summed resident sets. {}",
        if results.machine.pinned {
            "The server was pinned to CPU 0 and the load generator to CPU 1."
        } else {
            "Neither side was pinned: the server and the load generator shared the machine's \
             cores, and each side's CPU is recorded so that a saturated generator is flagged."
        }
    ));
    paragraphs.push(format!(
        "Throughput is successful responses per second. The best architecture is the highest \
         throughput whose p99 is known to meet the bound (a p99 that is only a lower bound never \
         does) with under {errors} errors and no ~ mark (load that fell short); in a fixed-rate \
         sweep where every candidate delivered the rate offered, the lowest p99 (then server \
         CPU per request) instead. With repetitions, a difference inside the min..max spread is \
         no win. The sweet spot is the fewest workers within {within} of the best throughput (or \
         inside its spread). USL: X(N) = lambda N / (1 + sigma (N-1) + kappa N (N-1)) \
         (Gunther), fitted by bounded nonlinear least squares from at least {levels} levels. \
         Goetz: threads = N_cpu x U x (1 + W/C), capped by the concurrency. Little: requests in \
         flight = throughput x mean latency.",
        errors = percent(MAX_ERROR_RATE),
        within = percent(WITHIN_BEST),
        levels = MIN_LEVELS,
    ));
    paragraphs
}

/// The Method's paragraphs on what stood between the generator and the servers: the network
/// path, the CPU quota, the CPUs and the memory limit, where the experiment had them.
fn setting_paragraphs(results: &SweepResults) -> Vec<String> {
    let mut paragraphs = Vec::new();
    if let Some(spec) = results.experiment.net_spec() {
        paragraphs.push(format!(
            "Between the load generator and every server ran a network path: {}. The clients \
             ran in a network namespace of their own whose only way out was a TUN device; a \
             relay in sweetspot carried each packet to the server's side and back, holding it \
             for the delay, each connection's link rate and the loss asked (this kernel's own \
             netem was not used). Each point records the TCP retransmissions on both sides.",
            spec.describe()
        ));
    }
    match results.experiment.cpus[..] {
        [] => {}
        [cpus] => paragraphs.push(format!(
            "Every server ran under a CPU quota of {} (`cpus`): a cgroup whose CFS \
             bandwidth let its tasks run {cpus} x 100 ms in each 100 ms period, as a \
             container's --cpus does. Each point records the periods and those in which the \
             quota ran out (throttled).",
            crate::lab::budget::cores_words(cpus)
        )),
        ref axis => paragraphs.push(format!(
            "Every server ran once under each CPU quota of {} cores (`cpus`), each a series \
             of its own named for its quota (`NAME@0.5cpu`): a cgroup whose CFS bandwidth let \
             its tasks run the quota x 100 ms in each 100 ms period, as a container's --cpus \
             does. Each point records the periods and those in which the quota ran out \
             (throttled).",
            axis.iter()
                .map(|&q| crate::lab::budget::cpus_text(q))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
    if results.experiment.tls {
        paragraphs.push(
            "Every server served HTTPS (`tls`): TLS 1.3 by rustls, with a self-signed \
             certificate the lab made for the run, which the generator accepted unverified (the \
             handshake's signatures still checked). A handshake is in no request's latency: each \
             point records the handshakes its connections made (full, and resumed by ticket), \
             their times and their share of the time waited, and the server's own CPU per \
             handshake from its stats line."
                .to_string(),
        );
    }
    if let Some(cpuset) = &results.experiment.cpuset {
        paragraphs.push(format!(
            "Every server ran on CPUs {cpuset} only (`cpuset`, a cgroup's cpuset, as a \
             container's --cpuset-cpus does)."
        ));
    }
    if let Some(memory) = &results.experiment.memory {
        paragraphs.push(format!(
            "Every server ran under a memory limit of {memory} (`memory`): a cgroup of the v1 \
             memory controller, as a container's --memory. Each point records the most its \
             tasks held, how often they reached the limit, and the processes the OOM killer \
             took."
        ));
    }
    paragraphs
}

/// How server CPU was measured, over the points that succeeded: one method for all, or each
/// with its count.
fn cpu_methods_text(results: &SweepResults) -> String {
    let mut methods: Vec<(&str, usize)> = Vec::new();
    for p in results.points.iter().filter(|p| p.ok) {
        let name = if p.figures.server.cpu_unavailable {
            "not measured (a remote server)"
        } else {
            match p.figures.server.cpu_method {
                Some(CpuMethod::CgroupV1Cpuacct) => {
                    "a cgroup made for the server (cgroup v1 cpuacct: exact, exited processes \
                     included)"
                }
                Some(CpuMethod::CgroupV2) => {
                    "a cgroup made for the server (cgroup v2: exact, exited processes included)"
                }
                Some(CpuMethod::ProcChildren) => {
                    "/proc samples of the process tree plus the rusage of reaped children (no \
                     cgroup could be made)"
                }
                None => "/proc samples of the process tree",
            }
        };
        match methods.iter_mut().find(|(n, _)| *n == name) {
            Some((_, count)) => *count += 1,
            None => methods.push((name, 1)),
        }
    }
    let ok_points = results.points.iter().filter(|p| p.ok).count();
    match methods.as_slice() {
        [] => "no point was measured".to_string(),
        [(name, _)] => format!("at every point from {name}"),
        many => many
            .iter()
            .map(|(name, n)| format!("at {n} of {ok_points} points from {name}"))
            .collect::<Vec<_>>()
            .join("; "),
    }
}

/// `1 s`, `200 ms`: a setting in seconds as a reader writes it.
fn seconds(s: f64) -> String {
    super::duration_us(s * 1e6)
}

/// The whole page: the head, the recommendation and its why, each workload's plots and
/// tables, the warnings, the method and the machine.
pub fn render(results: &SweepResults) -> anyhow::Result<String> {
    let e = &results.experiment;
    let mut out = page_start(&format!("sweetspot: {}", e.name));
    out.push_str(&head_html(results));
    out.push_str("<h2>Recommendation</h2>\n<div class=\"summary\"><ul>\n");
    for line in &results.recommendation.summary {
        let _ = writeln!(out, "<li>{}</li>", escape(line));
    }
    out.push_str("</ul></div>\n");
    let handshakes = super::tls_lines(results);
    if !handshakes.is_empty() {
        out.push_str("<h2>TLS handshakes</h2>\n<p>Apart from the requests' latency:</p>\n<ul>\n");
        for line in &handshakes {
            let _ = writeln!(out, "<li>{}</li>", escape(line));
        }
        out.push_str("</ul>\n");
    }
    out.push_str(&super::why::why_html(results));
    out.push_str(&workloads_html(results)?);
    if !results.analysis.warnings.is_empty() {
        out.push_str("<h2>Warnings</h2>\n<ul>\n");
        for w in &results.analysis.warnings {
            let _ = writeln!(out, "<li class=\"warn\">{}</li>", escape(w));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("<h2>Method</h2>\n");
    for paragraph in method_text(results) {
        let _ = writeln!(out, "<p>{}</p>", escape(&paragraph));
    }
    out.push_str(&machine_html(results));
    out.push_str(PAGE_END);
    Ok(out)
}

/// The title, the description and how much of the sweep ran.
fn head_html(results: &SweepResults) -> String {
    let e = &results.experiment;
    let mut out = format!("<h1>sweetspot sweep: {}</h1>\n", escape(&e.name));
    if !e.description.is_empty() {
        let _ = writeln!(out, "<p>{}</p>", escape(&e.description));
    }
    let _ = writeln!(
        out,
        "<p>{} of {} points measured{}, {} to {}.</p>",
        results.points.len(),
        results.points_planned,
        if results.interrupted {
            " (the sweep was interrupted)"
        } else {
            ""
        },
        escape(&results.started),
        escape(&results.finished)
    );
    out
}

/// Each workload's heading, plots and tables.
fn workloads_html(results: &SweepResults) -> anyhow::Result<String> {
    let plots = render_plots(results)?;
    let mut out = String::new();
    for workload in &results.experiment.workloads {
        let tables = workload_tables(results, &workload.name);
        if tables.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "<h2>{} <code>{} {}</code>{}</h2>",
            escape(&workload.name),
            escape(&workload.method),
            escape(&workload.route),
            if workload.keepalive {
                ""
            } else {
                " (a connection per request)"
            }
        );
        let stem = file_stem(&workload.name);
        for plot in plots
            .iter()
            .filter(|p| p.file_name.starts_with(&format!("{stem}-")))
        {
            let svg = plot.svg.trim_start_matches(|c| c != '<');
            let _ = writeln!(out, "<figure>{svg}</figure>");
        }
        for table in &tables {
            out.push_str(&table_html(table));
        }
    }
    Ok(out)
}

/// The machine the sweep ran on, and its notes.
fn machine_html(results: &SweepResults) -> String {
    let m = &results.machine;
    let mut out = String::from("<h2>Machine</h2>\n<table>\n");
    let memory = format!("{} MB", thousands(m.memory_kb as f64 / 1024.0));
    let files = thousands(m.open_files_limit as f64);
    let rows = [
        ("CPU", m.cpu_model.as_str()),
        ("cores", &m.cores.to_string()),
        ("kernel", m.kernel.as_str()),
        ("memory", memory.as_str()),
        ("host", m.hostname.as_str()),
        ("open files limit", files.as_str()),
        (
            "pinned",
            if m.pinned {
                "server on CPU 0, generator on CPU 1"
            } else {
                "no"
            },
        ),
    ];
    for (k, v) in rows {
        let _ = writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", escape(k), escape(v));
    }
    out.push_str("</table>\n");
    for note in &m.notes {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(note));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::analysis::finalize;
    use crate::sweep::output::fixture::small_sweep;

    #[test]
    fn the_page_marks_lower_bounds_and_spreads() {
        let mut results = small_sweep();
        finalize(&mut results);
        let html = render(&results).unwrap();
        assert!(
            html.contains(
                "<tr><td>64</td><td class=\"num\">&gt;= 1.00 s~</td>\
                 <td class=\"num\">3.0 ms (2.5 ms..3.5 ms)</td></tr>"
            ),
            "{html}"
        );
        assert!(html.contains("<td class=\"num\">30,000 (29,000..31,000)</td>"));
        assert!(html.contains("under 1% errors") && html.contains("within 5% of the best"));
        // The p99 plot inlined with its lower-bound legend.
        assert!(html.contains(crate::sweep::output::svg::LOWER_BOUND_LABEL));
    }

    #[test]
    fn each_points_limit_is_a_word_with_its_evidence_on_hover_and_in_the_notes() {
        let mut results = small_sweep();
        results.points[0].limit = Some(crate::lab::limit::Limit {
            kind: crate::lab::limit::LimitKind::Generator,
            evidence: "the load generator used 97% of a core <per> thread".into(),
        });
        finalize(&mut results);
        let html = render(&results).unwrap();
        assert!(
            html.contains(
                "<td class=\"num\" title=\"the load generator used 97% of a core &lt;per&gt; \
                 thread\">lab: generator</td>"
            ),
            "{html}"
        );
        assert!(html.contains(": generator: the load generator used 97% of a core &lt;per&gt;"));
    }

    #[test]
    fn the_method_says_what_was_measured() {
        let mut results = small_sweep();
        finalize(&mut results);
        let text = method_text(&results).join(" ");
        assert!(
            text.contains("from /proc samples of the process tree"),
            "{text}"
        );
        assert!(text.contains("Neither side was pinned"), "{text}");
        assert!(text.contains("epoll driver, 1 thread"), "{text}");
        for p in &mut results.points {
            p.figures.server.cpu_method = Some(CpuMethod::CgroupV1Cpuacct);
        }
        results.points[0].figures.server.cpu_method = Some(CpuMethod::ProcChildren);
        results.machine.pinned = true;
        let text = method_text(&results).join(" ");
        assert!(
            text.contains("at 3 of 4 points from a cgroup made for the server (cgroup v1")
                && text.contains("at 1 of 4 points from /proc samples of the process tree plus")
                && text.contains("pinned to CPU 0"),
            "{text}"
        );
        assert!(!text.contains("Neither side"));
    }

    #[test]
    fn escaping() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
