//! A latency summary (the percentiles, mean and max), which of its figures are only lower
//! bounds, and the thresholds that say a run's generator was saturated or its rate held.

use super::*;

/// Load threads busy at least this fraction of the time on the cores they could use are
/// saturated: their figures may describe the generator, not the server. Both `merge` (per
/// worker) and the sweep (per point) flag it with this bar.
pub const SATURATED_BUSY_FRACTION: f64 = 0.85;

/// A rate is held when requests went out at no less than this fraction of the target (the
/// run's in its report, each step's in a plan's table).
pub const RATE_HELD_FRACTION: f64 = 0.95;

/// A figure of a [`LatencySummary`]; [`LatencyKey::name`] is its JSON name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LatencyKey {
    Min,
    Mean,
    P50,
    P75,
    P90,
    P99,
    P999,
    P9999,
    Max,
}

impl LatencyKey {
    /// Every figure, in the order of the JSON.
    pub const ALL: [LatencyKey; 9] = [
        LatencyKey::Min,
        LatencyKey::Mean,
        LatencyKey::P50,
        LatencyKey::P75,
        LatencyKey::P90,
        LatencyKey::P99,
        LatencyKey::P999,
        LatencyKey::P9999,
        LatencyKey::Max,
    ];

    /// The name of the figure in the JSON ("p99").
    pub fn name(self) -> &'static str {
        match self {
            LatencyKey::Min => "min",
            LatencyKey::Mean => "mean",
            LatencyKey::P50 => "p50",
            LatencyKey::P75 => "p75",
            LatencyKey::P90 => "p90",
            LatencyKey::P99 => "p99",
            LatencyKey::P999 => "p999",
            LatencyKey::P9999 => "p9999",
            LatencyKey::Max => "max",
        }
    }

    /// The key named `name` in the JSON.
    pub fn from_name(name: &str) -> Option<LatencyKey> {
        LatencyKey::ALL.into_iter().find(|k| k.name() == name)
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// Which latency figures are only lower bounds.
///
/// A request that was sent and never answered (still in flight when the run ended, or timed
/// out) has a latency of at least its age, so every figure that depends on it is a lower bound.
/// Serialized as the list of the affected keys ([`LatencyKey::name`]), for example
/// `["p99", "p999", "p9999", "max"]`; empty (and left out of the JSON) when every figure is exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LowerBounds(u16);

impl LowerBounds {
    /// Marks `key` as a lower bound.
    pub fn insert(&mut self, key: LatencyKey) {
        self.0 |= key.bit();
    }

    /// Unmarks `key`.
    pub fn remove(&mut self, key: LatencyKey) {
        self.0 &= !key.bit();
    }

    /// Whether the figure `key` is a lower bound.
    pub fn contains(&self, key: LatencyKey) -> bool {
        self.0 & key.bit() != 0
    }

    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// The affected keys, in [`LatencyKey::ALL`] order.
    pub fn keys(&self) -> impl Iterator<Item = LatencyKey> + '_ {
        LatencyKey::ALL.into_iter().filter(|k| self.contains(*k))
    }
}

impl Serialize for LowerBounds {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.keys().map(LatencyKey::name))
    }
}

impl<'de> Deserialize<'de> for LowerBounds {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let names = Vec::<String>::deserialize(deserializer)?;
        let mut bounds = LowerBounds::default();
        for name in &names {
            let Some(key) = LatencyKey::from_name(name) else {
                let known: Vec<&str> = LatencyKey::ALL.iter().map(|k| k.name()).collect();
                return Err(serde::de::Error::custom(format!(
                    "unknown latency key {name:?} in lower_bound (known: {})",
                    known.join(", ")
                )));
            };
            bounds.insert(key);
        }
        Ok(bounds)
    }
}

/// Latency percentiles in microseconds.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq)]
pub struct LatencySummary {
    /// Number of samples behind the figures (timeouts and errors are never samples).
    #[serde(default)]
    pub count: u64,
    pub min: f64,
    pub mean: f64,
    pub stdev: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
    /// The figures above that are only lower bounds (see [`LowerBounds`]).
    #[serde(default, skip_serializing_if = "LowerBounds::is_empty")]
    pub lower_bound: LowerBounds,
}

impl LatencySummary {
    /// The figure `key`, in microseconds.
    pub fn get(&self, key: LatencyKey) -> f64 {
        match key {
            LatencyKey::Min => self.min,
            LatencyKey::Mean => self.mean,
            LatencyKey::P50 => self.p50,
            LatencyKey::P75 => self.p75,
            LatencyKey::P90 => self.p90,
            LatencyKey::P99 => self.p99,
            LatencyKey::P999 => self.p999,
            LatencyKey::P9999 => self.p9999,
            LatencyKey::Max => self.max,
        }
    }

    /// The figure `key` as people read it, `>= ` before a lower bound.
    pub fn figure(&self, key: LatencyKey) -> String {
        crate::render::latency_figure(self.get(key), self.lower_bound.contains(key))
    }

    /// The figure for a table's cell: `-` where nothing was measured (no sample, no bound).
    pub fn cell(&self, key: LatencyKey) -> String {
        if self.count == 0 && self.lower_bound.is_empty() {
            "-".to_string()
        } else {
            self.figure(key)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_bounds_round_trip_as_key_names() {
        let mut b = LowerBounds::default();
        assert!(b.is_empty());
        b.insert(LatencyKey::P99);
        b.insert(LatencyKey::Max);
        assert!(
            b.contains(LatencyKey::P99)
                && b.contains(LatencyKey::Max)
                && !b.contains(LatencyKey::P50)
        );
        b.insert(LatencyKey::Mean);
        b.remove(LatencyKey::Mean);
        assert!(!b.contains(LatencyKey::Mean));
        let text = serde_json::to_string(&b).unwrap();
        assert_eq!(text, r#"["p99","max"]"#);
        assert_eq!(serde_json::from_str::<LowerBounds>(&text).unwrap(), b);
        assert!(serde_json::from_str::<LowerBounds>(r#"["p42"]"#).is_err());
    }
}
