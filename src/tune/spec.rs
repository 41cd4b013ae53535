//! What `tune` is asked: the server's command with its knobs as placeholders (`{workers}`,
//! `{threads}`, `{knob:NAME}`), each knob's range, the URL, and the server's own default.
//! Checked strictly before anything runs (one line, exit 2).

use serde::{Deserialize, Serialize};

use crate::usage;

/// The most knobs searched at once.
pub const MAX_KNOBS: usize = 2;

/// One knob of the user's server and the values it may take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Knob {
    /// `workers`, `threads`, or the NAME of `{knob:NAME}`.
    pub name: String,
    /// The placeholder in the command, e.g. `{workers}`.
    pub placeholder: String,
    pub lo: u32,
    pub hi: u32,
}

impl Knob {
    /// Every value of the range.
    pub fn values(&self) -> impl Iterator<Item = u32> {
        self.lo..=self.hi
    }

    /// A knob `{name}` from `lo` to `hi`, for the searches' tests.
    #[cfg(test)]
    pub fn named(name: &str, lo: u32, hi: u32) -> Knob {
        Knob {
            name: name.into(),
            placeholder: format!("{{{name}}}"),
            lo,
            hi,
        }
    }
}

/// A range `A..B` (both included) or one value `A`, from 1 up.
pub fn parse_range(flag: &str, text: &str) -> anyhow::Result<(u32, u32)> {
    let bad = || {
        usage(format!(
            "{flag} {text:?}: a range such as 1..16 (from 1, low to high)"
        ))
    };
    let (lo, hi) = match text.split_once("..") {
        Some((a, b)) => (a.trim().parse::<u32>(), b.trim().parse::<u32>()),
        None => (text.trim().parse::<u32>(), text.trim().parse::<u32>()),
    };
    let (lo, hi) = (lo.map_err(|_| bad())?, hi.map_err(|_| bad())?);
    if lo == 0 || hi < lo || hi > 100_000 {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// Each knob asked for, as (name, placeholder, range text): `--workers`, `--threads`, then
/// each `--knob NAME=A..B`.
fn ranges_of(
    workers: Option<&str>,
    threads: Option<&str>,
    named: &[String],
) -> anyhow::Result<Vec<(String, String, String)>> {
    let mut ranges: Vec<(String, String, String)> = Vec::new();
    if let Some(r) = workers {
        ranges.push(("workers".into(), "{workers}".into(), r.to_string()));
    }
    if let Some(r) = threads {
        ranges.push(("threads".into(), "{threads}".into(), r.to_string()));
    }
    for spec in named {
        let Some((name, range)) = spec.split_once('=') else {
            return Err(usage(format!(
                "--knob {spec:?}: NAME=A..B, e.g. procs=1..8"
            )));
        };
        let name = name.trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(usage(format!(
                "--knob {spec:?}: a name of letters, digits and _"
            )));
        }
        ranges.push((name.into(), format!("{{knob:{name}}}"), range.into()));
    }
    Ok(ranges)
}

/// Every placeholder of the command (`{workers}`, `{threads}`, `{knob:NAME}`) has a range.
fn every_placeholder_has_a_range(command: &str, knobs: &[Knob]) -> anyhow::Result<()> {
    for placeholder in ["{workers}", "{threads}"] {
        if command.contains(placeholder) && !knobs.iter().any(|k| k.placeholder == placeholder) {
            return Err(usage(format!(
                "--cmd has {placeholder} but no range for it (--{})",
                &placeholder[1..placeholder.len() - 1]
            )));
        }
    }
    let mut rest = command;
    while let Some(at) = rest.find("{knob:") {
        let end = rest[at..]
            .find('}')
            .map(|e| at + e + 1)
            .unwrap_or(rest.len());
        let placeholder = &rest[at..end];
        if !knobs.iter().any(|k| k.placeholder == placeholder) {
            return Err(usage(format!(
                "--cmd has {placeholder} but no --knob range for it"
            )));
        }
        rest = &rest[end..];
    }
    Ok(())
}

/// The knobs of a command: each placeholder it holds, with its range from `--workers`,
/// `--threads` or `--knob NAME=A..B`; a placeholder without a range, or a range without a
/// placeholder, is an error.
pub fn knobs_of(
    command: &str,
    workers: Option<&str>,
    threads: Option<&str>,
    named: &[String],
) -> anyhow::Result<Vec<Knob>> {
    if !command.contains("{port}") {
        return Err(usage(
            "--cmd: the command must take the port as {port} (tune starts it on a free one)",
        ));
    }
    let ranges = ranges_of(workers, threads, named)?;
    let mut knobs = Vec::new();
    for (name, placeholder, range) in ranges {
        if knobs.iter().any(|k: &Knob| k.name == name) {
            return Err(usage(format!("the knob {name:?} is given twice")));
        }
        if !command.contains(&placeholder) {
            return Err(usage(format!(
                "--cmd has no {placeholder} for the range given for {name}"
            )));
        }
        let flag = match name.as_str() {
            "workers" | "threads" => format!("--{name}"),
            _ => format!("--knob {name}"),
        };
        let (lo, hi) = parse_range(&flag, &range)?;
        knobs.push(Knob {
            name,
            placeholder,
            lo,
            hi,
        });
    }
    every_placeholder_has_a_range(command, &knobs)?;
    if knobs.is_empty() {
        return Err(usage(
            "--cmd has no knob to tune: put {workers}, {threads} or {knob:NAME} in it, with its range",
        ));
    }
    if knobs.len() > MAX_KNOBS {
        return Err(usage(format!("at most {MAX_KNOBS} knobs at once")));
    }
    Ok(knobs)
}

/// `--default 'workers=2,threads=3'`: a value for every knob.
pub fn parse_default(text: &str, knobs: &[Knob]) -> anyhow::Result<Vec<u32>> {
    let mut values: Vec<Option<u32>> = vec![None; knobs.len()];
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || {
            usage(format!(
                "--default {text:?}: NAME=N for each knob, e.g. workers=2,threads=3"
            ))
        };
        let (name, value) = part.split_once('=').ok_or_else(bad)?;
        let i = knobs
            .iter()
            .position(|k| k.name == name.trim())
            .ok_or_else(bad)?;
        let v: u32 = value.trim().parse().map_err(|_| bad())?;
        if v == 0 {
            return Err(bad());
        }
        values[i] = Some(v);
    }
    values
        .into_iter()
        .zip(knobs)
        .map(|(v, k)| {
            v.ok_or_else(|| usage(format!("--default {text:?}: no value for {}", k.name)))
        })
        .collect()
}

/// The command with each knob's value in place of its placeholder.
pub fn command_at(command: &str, knobs: &[Knob], values: &[u32]) -> String {
    knobs
        .iter()
        .zip(values)
        .fold(command.to_string(), |cmd, (k, v)| {
            cmd.replace(&k.placeholder, &v.to_string())
        })
}

/// A configuration as people write it: `workers=2 threads=3`.
pub fn label(knobs: &[Knob], values: &[u32]) -> String {
    knobs
        .iter()
        .zip(values)
        .map(|(k, v)| format!("{}={v}", k.name))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The URL split into the server's base (with `{port}`) and the route requested.
pub fn split_url(url: &str) -> anyhow::Result<(String, String)> {
    let bad = || {
        usage(format!(
            "--url {url:?}: http://HOST:{{port}}/PATH, e.g. http://127.0.0.1:{{port}}/orders"
        ))
    };
    let rest = url.strip_prefix("http://").ok_or_else(bad)?;
    if !rest.contains("{port}") {
        return Err(bad());
    }
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok((format!("http://{host}"), path.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_knobs_are_checked() {
        assert_eq!(parse_range("--workers", "1..16").unwrap(), (1, 16));
        assert_eq!(parse_range("--workers", "4").unwrap(), (4, 4));
        for bad in ["0..4", "5..2", "a..3", "", "1..", "1..200000"] {
            assert!(parse_range("--workers", bad).is_err(), "{bad}");
        }
        let cmd = "puma -w {workers} -t {threads}:{threads} -b tcp://127.0.0.1:{port}";
        let knobs = knobs_of(cmd, Some("1..8"), Some("1..32"), &[]).unwrap();
        assert_eq!(
            knobs
                .iter()
                .map(|k| (k.name.as_str(), k.lo, k.hi))
                .collect::<Vec<_>>(),
            [("workers", 1, 8), ("threads", 1, 32)]
        );
        assert_eq!(
            command_at(cmd, &knobs, &[2, 5]),
            "puma -w 2 -t 5:5 -b tcp://127.0.0.1:{port}"
        );
        assert_eq!(label(&knobs, &[2, 5]), "workers=2 threads=5");
        let node = "node server.js --procs {knob:procs} --port {port}";
        let k = knobs_of(node, None, None, &["procs=1..4".into()]).unwrap();
        assert_eq!(
            command_at(node, &k, &[3]),
            "node server.js --procs 3 --port {port}"
        );
        let err = |r: anyhow::Result<Vec<Knob>>| r.unwrap_err().to_string();
        assert!(err(knobs_of("srv -w {workers}", Some("1..4"), None, &[])).contains("{port}"));
        assert!(err(knobs_of(cmd, Some("1..4"), None, &[])).contains("{threads}"));
        assert!(err(knobs_of("srv {port}", Some("1..4"), None, &[])).contains("no {workers}"));
        assert!(err(knobs_of("srv {port}", None, None, &[])).contains("no knob"));
        assert!(err(knobs_of("srv {port} {knob:x}", None, None, &[])).contains("{knob:x}"));
        assert!(err(knobs_of(node, None, None, &["procs".into()])).contains("NAME=A..B"));
    }

    #[test]
    fn defaults_and_urls() {
        let cmd = "srv -w {workers} -t {threads} {port}";
        let knobs = knobs_of(cmd, Some("1..8"), Some("1..32"), &[]).unwrap();
        assert_eq!(
            parse_default("workers=2,threads=3", &knobs).unwrap(),
            [2, 3]
        );
        assert!(parse_default("workers=2", &knobs).is_err());
        assert!(parse_default("workers=2,threads=x", &knobs).is_err());
        assert!(parse_default("cores=2,threads=3", &knobs).is_err());
        assert_eq!(
            split_url("http://127.0.0.1:{port}/orders?id=3").unwrap(),
            ("http://127.0.0.1:{port}".into(), "/orders?id=3".into())
        );
        assert_eq!(split_url("http://127.0.0.1:{port}").unwrap().1, "/");
        assert!(split_url("http://127.0.0.1:8080/").is_err());
        assert!(split_url("https://x:{port}/").is_err());
    }
}
