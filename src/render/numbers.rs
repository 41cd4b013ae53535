//! Numbers as people read them: thousands separators, durations in a fitting unit, fractions
//! as percentages. The sweep's prose and outputs, `load` and `merge` all write numbers with
//! these, so a figure reads the same wherever it appears.

/// `12345.6` -> `12,346`; small values keep one decimal (`9.5`).
pub fn thousands(value: f64) -> String {
    if !value.is_finite() {
        return "-".into();
    }
    if value.abs() < 100.0 && value.fract().abs() > 1e-9 {
        return format!("{value:.1}");
    }
    let rounded = value.round() as i64;
    let digits = rounded.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if rounded < 0 {
        out.insert(0, '-');
    }
    out
}

/// Microseconds in the unit a reader wants.
pub fn duration_us(us: f64) -> String {
    if !us.is_finite() || us <= 0.0 {
        return "-".into();
    }
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{us:.0} us")
    }
}

/// A wall time for a person: `45s`, `3m 05s`, `1h 02m`.
pub fn wall_time(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// A fraction as a percentage with no more digits than it needs: `0.05` -> `5%`,
/// `0.005` -> `0.5%`.
pub fn percent(fraction: f64) -> String {
    let value = fraction * 100.0;
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}%")
}

/// CPUs as the kernel lists them: `0-3,6`.
pub fn cpu_list_text(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if j == i {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn cpus_are_listed_as_the_kernel_lists_them() {
        assert_eq!(cpu_list_text(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(cpu_list_text(&[1]), "1");
        assert_eq!(cpu_list_text(&[]), "");
    }

    /// `f` writes each value as its case says.
    pub fn writes<T: Copy + std::fmt::Debug>(f: fn(T) -> String, cases: &[(T, &str)]) {
        for &(value, text) in cases {
            assert_eq!(f(value), text, "{value:?}");
        }
    }

    #[test]
    fn wall_times() {
        writes(
            wall_time,
            &[(44.6, "45s"), (185.0, "3m 05s"), (3720.0, "1h 02m")],
        );
    }

    #[test]
    fn thousands_separators() {
        writes(
            thousands,
            &[
                (0.0, "0"),
                (999.0, "999"),
                (2100.4, "2,100"),
                (1234567.0, "1,234,567"),
                (9.46, "9.5"),
                (-1500.0, "-1,500"),
            ],
        );
    }

    #[test]
    fn durations_pick_units() {
        writes(
            duration_us,
            &[
                (850.0, "850 us"),
                (12_345.0, "12.3 ms"),
                (2_500_000.0, "2.50 s"),
                (0.0, "-"),
            ],
        );
    }

    #[test]
    fn percentages_drop_needless_digits() {
        writes(
            percent,
            &[(0.05, "5%"), (0.01, "1%"), (0.005, "0.5%"), (0.8, "80%")],
        );
    }
}
