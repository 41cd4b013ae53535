//! Presentation, below every command that writes for people: numbers and durations
//! ([`numbers`]), HTML escaping and the one page shell ([`html`]), the plotting primitives
//! ([`svg`]) and the JSON writer ([`json`]). `load`, `sweep` and `merge` write through it;
//! it depends on nothing of the project but the crate root (`usage`, `print_stdout`).

pub mod html;
pub mod json;
pub mod numbers;
pub mod svg;

pub use numbers::{duration_us, percent, thousands};

/// A latency figure as every output writes it: `1.2 ms`, or `>= 1.2 ms` when the true value
/// is only known to be at least this (a lower bound).
pub fn latency_figure(us: f64, lower_bound: bool) -> String {
    if lower_bound {
        format!(">= {}", duration_us(us))
    } else {
        duration_us(us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lower_bound_reads_at_least() {
        assert_eq!(latency_figure(1_200.0, false), "1.2 ms");
        assert_eq!(latency_figure(1_200.0, true), ">= 1.2 ms");
    }
}
