//! `--net`: a real network path between the load generator and the server. The clients run in a
//! network namespace of their own, whose only way out is a TUN device; the path is a thread
//! here ([`relay`]) that carries every packet between it and a TUN device in the server's
//! namespace, holding it for the delay (with jitter), a bottleneck all connections share, each
//! connection's own link and a loss, in both directions ([`packet`]). The server runs where it
//! always does: the path's near end stands for its loopback address. [`path`] makes and
//! removes the namespace and devices.

pub mod packet;
pub mod path;
pub mod relay;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use path::{clean_stale, NetPath, PREFIX};

/// The settings `--net` takes, for its messages.
const SETTINGS: &str = "rtt, jitter, rate, bottleneck, queue, loss";
/// A queue's length by default, packets: Linux's `txqueuelen`.
pub const DEFAULT_QUEUE: u32 = 1000;
/// A queue's length at most, packets.
pub const MAX_QUEUE: u32 = 100_000;

/// The path asked for with
/// `--net rtt=50ms[,jitter=5ms][,rate=10mbit][,bottleneck=100mbit][,queue=100][,loss=0.5%]`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct NetSpec {
    /// Round-trip time added to the path: half on each direction.
    pub rtt_us: u64,
    /// The round trip's jitter: a round trip is `rtt ± jitter`, uniform, as netem and
    /// toxiproxy read theirs (the one-way delay toward the clients varies, the other is
    /// fixed).
    #[serde(default)]
    pub jitter_us: u64,
    /// Each connection's own link rate in each direction, bits a second (`None`: unshaped).
    #[serde(default)]
    pub rate_bps: Option<u64>,
    /// A link all connections share in each direction, bits a second (`None`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck_bps: Option<u64>,
    /// The packets each queue in front of a rate holds (the bottleneck's, each link's);
    /// `None`: [`DEFAULT_QUEUE`]. A packet that finds it full is dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<u32>,
    /// Packets lost on each direction, percent.
    #[serde(default)]
    pub loss_pct: f64,
}

impl NetSpec {
    /// Parses `rtt=50ms[,jitter=5ms][,rate=10mbit][,bottleneck=100mbit][,queue=100]
    /// [,loss=0.5%]` (any of them; rtt 0 when not given): one line saying what is wrong
    /// otherwise.
    pub fn parse(text: &str) -> Result<NetSpec, String> {
        let mut spec = NetSpec::default();
        let mut any = false;
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?}: want KEY=VALUE ({SETTINGS})"))?;
            any = true;
            match key.trim() {
                "rtt" => spec.rtt_us = micros(value)?,
                "jitter" => spec.jitter_us = micros(value)?,
                "rate" => spec.rate_bps = Some(bits_per_second(value)?),
                "bottleneck" => spec.bottleneck_bps = Some(bits_per_second(value)?),
                "queue" => spec.queue = Some(packets(value)?),
                "loss" => spec.loss_pct = percent(value)?,
                other => return Err(format!("{other:?}: not a path setting ({SETTINGS})")),
            }
        }
        if !any {
            return Err("a path like rtt=50ms[,jitter=5ms][,rate=10mbit][,loss=0.5%]".into());
        }
        if spec.queue.is_some() && spec.rate_bps.is_none() && spec.bottleneck_bps.is_none() {
            return Err("queue: a queue waits for a rate (rate= or bottleneck=)".into());
        }
        if spec.rtt_us > 10_000_000 {
            return Err("rtt: at most 10s".into());
        }
        if spec.jitter_us > spec.rtt_us {
            return Err("jitter: at most the rtt".into());
        }
        Ok(spec)
    }

    /// As `--net` takes it, so that [`NetSpec::parse`] gives it back: `rtt=100ms,rate=5mbit`.
    pub fn key(&self) -> String {
        let duration = |us: u64| {
            if us.is_multiple_of(1000) {
                format!("{}ms", us / 1000)
            } else {
                format!("{us}us")
            }
        };
        let mut parts = vec![format!("rtt={}", duration(self.rtt_us))];
        if self.jitter_us > 0 {
            parts.push(format!("jitter={}", duration(self.jitter_us)));
        }
        if let Some(bps) = self.rate_bps {
            parts.push(format!("rate={bps}bit"));
        }
        if let Some(bps) = self.bottleneck_bps {
            parts.push(format!("bottleneck={bps}bit"));
        }
        if let Some(queue) = self.queue {
            parts.push(format!("queue={queue}"));
        }
        if self.loss_pct > 0.0 {
            parts.push(format!("loss={}%", self.loss_pct));
        }
        parts.join(",")
    }

    /// In words, for reports: `rtt 50 ms ± 5 ms, 10 mbit/s a connection each way, 0.5% loss
    /// each way`.
    pub fn describe(&self) -> String {
        format!(
            "rtt {}{}",
            crate::render::numbers::duration_us(self.rtt_us as f64),
            self.describe_links()
        )
    }

    /// What [`NetSpec::describe`] says after the round trip: ` ± 5 ms, 10 mbit/s a
    /// connection each way, 0.5% loss each way` (empty for a path of delay alone).
    pub fn describe_links(&self) -> String {
        let mut out = String::new();
        if self.jitter_us > 0 {
            out.push_str(&format!(
                " ± {}",
                crate::render::numbers::duration_us(self.jitter_us as f64)
            ));
        }
        let queue = match self.queue {
            Some(n) => format!(" (queue {n})"),
            None => String::new(),
        };
        if let Some(bps) = self.rate_bps {
            out.push_str(&format!(
                ", {} a connection each way{queue}",
                rate_text(bps)
            ));
        }
        if let Some(bps) = self.bottleneck_bps {
            out.push_str(&format!(", {} shared each way{queue}", rate_text(bps)));
        }
        if self.loss_pct > 0.0 {
            out.push_str(&format!(", {}% loss each way", self.loss_pct));
        }
        out
    }
}

/// A file's `net = "..."`, checked: one line naming the key and what is wrong otherwise.
pub fn check_key(text: &str) -> Result<NetSpec, String> {
    NetSpec::parse(text).map_err(|e| format!("net = {text:?}: {e}"))
}

/// A path as experiment files, map files and results write it: its key
/// (`rtt=50ms,rate=10000000bit`), read into a [`NetSpec`] once, where the file is read (a bad
/// one is the file's error, `net = "...": what is wrong`).
pub mod as_key {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::NetSpec;

    pub fn serialize<S: Serializer>(net: &Option<NetSpec>, s: S) -> Result<S::Ok, S::Error> {
        net.as_ref().map(NetSpec::key).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<NetSpec>, D::Error> {
        let text: Option<String> = Option::deserialize(d)?;
        text.map(|t| super::check_key(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// The path a command runs across: `--net`'s (checked) over the file's (`--net none`: no
/// path, whatever the file says), and refused unless this process may make it (root). Usage
/// errors, one line each.
pub fn net_option(flag: Option<&str>, file: Option<NetSpec>) -> anyhow::Result<Option<NetSpec>> {
    let net = match flag {
        Some("none") => None,
        Some(text) => Some(NetSpec::parse(text).map_err(|e| crate::usage(format!("--net: {e}")))?),
        None => file,
    };
    if net.is_some() {
        require_permitted()?;
    }
    Ok(net)
}

/// A usage error unless this process may make a path (CAP_NET_ADMIN and CAP_SYS_ADMIN).
pub fn require_permitted() -> anyhow::Result<()> {
    if path::permitted() {
        Ok(())
    } else {
        Err(crate::usage(path::NOT_PERMITTED))
    }
}

impl NetSpec {
    /// One direction's link: half the round trip, the whole jitter toward the clients (none
    /// toward the server, so that a round trip spreads evenly over `rtt ± jitter`, as the
    /// path says), the rate and its queue. A jitter over half the round trip moves more of
    /// the delay toward the clients, so that no draw is cut at zero.
    pub fn link(&self, toward_server: bool) -> packet::Link {
        let toward_clients = (self.rtt_us / 2).max(self.jitter_us);
        let (delay, jitter) = if toward_server {
            (self.rtt_us - toward_clients, 0)
        } else {
            // `Link::jitter` is the spread's width.
            (toward_clients, 2 * self.jitter_us)
        };
        packet::Link {
            delay: Duration::from_micros(delay),
            jitter: Duration::from_micros(jitter),
            rate_bps: self.rate_bps,
            queue: self.queue_len(),
        }
    }

    /// The packets each queue holds.
    pub fn queue_len(&self) -> usize {
        self.queue.unwrap_or(DEFAULT_QUEUE) as usize
    }

    /// The bottleneck all connections share, each way: (its rate, its queue).
    pub fn bottleneck(&self) -> Option<(u64, usize)> {
        self.bottleneck_bps.map(|bps| (bps, self.queue_len()))
    }

    /// The share of packets lost on each direction.
    pub fn loss(&self) -> f64 {
        self.loss_pct / 100.0
    }
}

/// A link rate in words: `5 mbit/s`.
pub fn rate_text(bps: u64) -> String {
    if bps >= 1_000_000_000 && bps.is_multiple_of(1_000_000_000) {
        format!("{} gbit/s", bps / 1_000_000_000)
    } else if bps >= 1_000_000 && bps.is_multiple_of(1_000_000) {
        format!("{} mbit/s", bps / 1_000_000)
    } else if bps >= 1000 && bps.is_multiple_of(1000) {
        format!("{} kbit/s", bps / 1000)
    } else {
        format!("{bps} bit/s")
    }
}

/// The number before the first of `units` that `value` ends with, and that unit's scale.
fn with_unit<'a>(value: &'a str, units: &[(&str, f64)]) -> Option<(&'a str, f64)> {
    units
        .iter()
        .find_map(|(unit, scale)| Some((value.strip_suffix(unit)?, *scale)))
}

/// `50ms`, `1.5s`, `800us`, `0`: microseconds.
fn micros(value: &str) -> Result<u64, String> {
    let value = value.trim();
    let (number, scale) = match with_unit(value, &[("us", 1.0), ("ms", 1e3), ("s", 1e6)]) {
        Some(found) => found,
        None if value == "0" => ("0", 1.0),
        None => return Err(format!("{value:?}: a duration like 50ms, 800us or 1s")),
    };
    let n: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{value:?}: a duration like 50ms, 800us or 1s"))?;
    if !(n.is_finite() && n >= 0.0) {
        return Err(format!("{value:?}: not negative"));
    }
    Ok((n * scale).round() as u64)
}

/// `10mbit`, `512kbit`, `1gbit`, `100000bit`: bits a second (at least 8 kbit).
fn bits_per_second(value: &str) -> Result<u64, String> {
    let value = value.trim().to_ascii_lowercase();
    let want = || format!("{value:?}: a rate like 10mbit, 512kbit or 1gbit");
    let units = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)];
    let (number, scale) = with_unit(&value, &units).ok_or_else(want)?;
    let n: f64 = number.trim().parse().map_err(|_| want())?;
    let bps = n * scale;
    if !(bps.is_finite() && (8_000.0..=100e9).contains(&bps)) {
        return Err(format!("{value:?}: from 8kbit to 100gbit"));
    }
    Ok(bps.round() as u64)
}

/// `100`: packets in a queue, from 1 to [`MAX_QUEUE`].
fn packets(value: &str) -> Result<u32, String> {
    let value = value.trim();
    match value.parse::<u32>() {
        Ok(n) if (1..=MAX_QUEUE).contains(&n) => Ok(n),
        _ => Err(format!("{value:?}: a queue of 1 to {MAX_QUEUE} packets")),
    }
}

/// `0.5%` (or `0.5`): percent, below 100.
fn percent(value: &str) -> Result<f64, String> {
    let value = value.trim();
    let n: f64 = value
        .strip_suffix('%')
        .unwrap_or(value)
        .trim()
        .parse()
        .map_err(|_| format!("{value:?}: a percentage like 0.5%"))?;
    if !(0.0..100.0).contains(&n) {
        return Err(format!("{value:?}: from 0% to under 100%"));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_parsed_and_said_back() {
        let s = NetSpec::parse("rtt=50ms,jitter=5ms,rate=10mbit,loss=0.5%").unwrap();
        assert_eq!(
            s,
            NetSpec {
                rtt_us: 50_000,
                jitter_us: 5_000,
                rate_bps: Some(10_000_000),
                loss_pct: 0.5,
                ..NetSpec::default()
            }
        );
        assert!(
            s.describe().contains("10 mbit/s a connection each way"),
            "{}",
            s.describe()
        );
        // ± the jitter on the round trip, all of it toward the clients.
        assert!(
            s.describe().starts_with("rtt 50.0 ms ± 5.0 ms"),
            "{}",
            s.describe()
        );
        let plain = NetSpec::parse("rtt=100ms").unwrap();
        assert_eq!(plain.link(true).delay, Duration::from_millis(50));
        assert_eq!(s.link(false).jitter, Duration::from_millis(10));
        assert_eq!(s.link(true).jitter, Duration::ZERO);
        assert_eq!(s.link(false).delay, Duration::from_millis(25));
        // A jitter over half the round trip: the delay moves toward the clients, the round
        // trip stays 10 ms, from 2 to 18 ms.
        let wide = NetSpec::parse("rtt=10ms,jitter=8ms").unwrap();
        assert_eq!(wide.link(false).delay, Duration::from_millis(8));
        assert_eq!(wide.link(true).delay, Duration::from_millis(2));
        assert_eq!(s.link(true).queue, DEFAULT_QUEUE as usize);
        let shared = NetSpec::parse("rtt=10ms,bottleneck=10mbit,queue=20").unwrap();
        assert_eq!(shared.bottleneck(), Some((10_000_000, 20)));
        assert_eq!(shared.link(true).rate_bps, None);
        assert_eq!(
            shared.describe(),
            "rtt 10.0 ms, 10 mbit/s shared each way (queue 20)"
        );
        assert_eq!(NetSpec::parse("rtt=1ms").unwrap().bottleneck(), None);
        assert_eq!(s.loss(), 0.005);
        assert_eq!(NetSpec::parse("rate=10mbit").unwrap().rtt_us, 0);
        assert_eq!(NetSpec::parse(" rtt = 800us ").unwrap().rtt_us, 800);
        assert_eq!(
            NetSpec::parse("rtt=1.5s,rate=512kbit").unwrap().rate_bps,
            Some(512_000)
        );
        // Said as `--net` takes it, and read back the same.
        assert_eq!(s.key(), "rtt=50ms,jitter=5ms,rate=10000000bit,loss=0.5%");
        for path in [
            s,
            plain,
            shared,
            NetSpec::parse("rtt=800us,rate=512kbit,queue=5").unwrap(),
        ] {
            assert_eq!(NetSpec::parse(&path.key()).unwrap(), path);
        }
        assert_eq!(NetSpec::default().key(), "rtt=0ms");
    }

    #[test]
    fn a_bad_path_is_one_line() {
        for bad in [
            "",
            "rtt=50",
            "rtt=-1ms",
            "rtt=50ms,rate=10",
            "rtt=50ms,rate=1bit",
            "rtt=50ms,loss=100%",
            "rtt=50ms,loss=x",
            "rtt=5ms,jitter=6ms",
            "rtt=50ms,delay=5ms",
            "rtt=5ms,queue=20",
            "rate=1mbit,queue=0",
            "rate=1mbit,queue=1.5",
            "bottleneck=1mbit,queue=100001",
            "bottleneck=1",
            "rtt=11s",
            "rtt",
            ",",
        ] {
            let e = NetSpec::parse(bad).unwrap_err();
            assert!(!e.is_empty() && !e.contains('\n'), "{bad}: {e}");
        }
    }
}
