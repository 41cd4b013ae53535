//! Units read from the command line and from experiment files: durations written as `1.5`,
//! `200ms`, `2s`, `1m`, `500us`, one parser for every command and file; sizes as `64M`.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// `1.5ms` as (1.5, "ms"): the number before the first character that is neither a digit nor
/// a point, and the unit after it; `None` where the number does not parse.
fn number_and_unit(text: &str) -> Option<(f64, &str)> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    Some((number.parse().ok()?, unit.trim()))
}

/// Parses `10s`, `500ms`, `250us`, `2m`, `1h`, `1.5s`; a bare number means seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (value, unit) = number_and_unit(text)
        .ok_or_else(|| format!("invalid duration {text:?} (try 10s, 500ms, 2m)"))?;
    let seconds = match unit {
        "" | "s" | "sec" | "secs" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?} (use us, ms, s, m, h)"
            ))
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("duration {text:?} out of range"))
}

/// Parses a duration written as seconds (`1.5`) or with a unit (`200ms`, `2s`, `1m`, `500us`),
/// as `sweetspot load` reads them.
pub fn parse_seconds(text: &str) -> Option<f64> {
    parse_duration(text).ok().map(|d| d.as_secs_f64())
}

#[derive(Deserialize)]
#[serde(untagged)]
enum SecondsRepr {
    Number(f64),
    Text(String),
}

pub fn de_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    match SecondsRepr::deserialize(d)? {
        SecondsRepr::Number(n) if n >= 0.0 => Ok(n),
        SecondsRepr::Number(n) => Err(serde::de::Error::custom(format!("negative duration {n}"))),
        SecondsRepr::Text(t) => parse_seconds(&t).ok_or_else(|| {
            serde::de::Error::custom(format!("bad duration {t:?} (try 1.5, \"200ms\", \"2s\")"))
        }),
    }
}

pub fn de_opt_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    match Option::<SecondsRepr>::deserialize(d)? {
        None => Ok(None),
        Some(SecondsRepr::Number(n)) if n >= 0.0 => Ok(Some(n)),
        Some(SecondsRepr::Number(n)) => {
            Err(serde::de::Error::custom(format!("negative duration {n}")))
        }
        Some(SecondsRepr::Text(t)) => parse_seconds(&t).map(Some).ok_or_else(|| {
            serde::de::Error::custom(format!("bad duration {t:?} (try 1.5, \"200ms\", \"2s\")"))
        }),
    }
}

/// A duration flag (`--p99 200ms`), read by clap into a [`Duration`] with the one parser.
pub fn duration_arg(text: &str) -> Result<Duration, String> {
    parse_duration(text)
}

/// `200ms`, `1.5s` as `1500ms`, `500us`, `2s`: a duration as [`parse_duration`] reads it back,
/// exactly.
pub fn duration_text(d: Duration) -> String {
    let us = d.as_micros();
    if !us.is_multiple_of(1000) {
        format!("{us}us")
    } else if !us.is_multiple_of(1_000_000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{}s", us / 1_000_000)
    }
}

/// A [`Duration`] as files and saved arguments write it: text (`"200ms"`), read back by the
/// one parser (a bare number is seconds).
pub mod as_text {
    use std::time::Duration;

    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::duration_text(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let seconds = super::de_seconds(d)?;
        Duration::try_from_secs_f64(seconds).map_err(serde::de::Error::custom)
    }
}

/// Parses a size in bytes: `65536`, `512K`, `64M`, `2G` (powers of 1,024, as a container's
/// `--memory` reads them; `KiB`, `MiB`, `GiB` and `KB`, `MB`, `GB` the same).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (value, unit) = number_and_unit(text)
        .ok_or_else(|| format!("invalid size {text:?} (try 64M, 512K, 2G)"))?;
    let scale: u64 = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        other => return Err(format!("unknown unit {other:?} in {text:?} (use K, M, G)")),
    };
    let bytes = value * scale as f64;
    (bytes.is_finite() && bytes < u64::MAX as f64)
        .then_some(bytes as u64)
        .ok_or_else(|| format!("size {text:?} out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_written_as_text_reads_back_exactly() {
        for ms in [0.5, 1.0, 200.0, 1500.0, 2000.0, 60_000.0, 0.001] {
            let d = Duration::from_secs_f64(ms / 1000.0);
            assert_eq!(parse_duration(&duration_text(d)).unwrap(), d, "{ms}");
        }
        assert_eq!(duration_text(Duration::from_millis(200)), "200ms");
        assert_eq!(duration_text(Duration::from_secs(2)), "2s");
        assert_eq!(duration_text(Duration::from_micros(500)), "500us");
    }

    #[test]
    fn sizes_read_in_powers_of_1024() {
        assert_eq!(parse_bytes("65536"), Ok(65_536));
        assert_eq!(parse_bytes("512K"), Ok(512 << 10));
        assert_eq!(parse_bytes("64M"), Ok(64 << 20));
        assert_eq!(parse_bytes("1.5GiB"), Ok(3 << 29));
        assert!(parse_bytes("64Q").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("M").unwrap_err().contains("invalid size"));
    }

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn durations_accept_units_and_numbers() {
        assert_eq!(parse_seconds("200ms"), Some(0.2));
        assert_eq!(parse_seconds("2s"), Some(2.0));
        assert_eq!(parse_seconds("1.5"), Some(1.5));
        assert_eq!(parse_seconds("1m"), Some(60.0));
        assert_eq!(parse_seconds("-1s"), None);
        assert_eq!(parse_seconds("soon"), None);
    }
}
