//! `/fib`: CPU work of a known, tunable cost. The naive recursion is the point.

/// F(n) with F(0) = 0, F(1) = 1, by naive recursion.
pub fn fib(n: u32) -> u64 {
    if n < 2 {
        n as u64
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_values() {
        let got: Vec<u64> = (0..=10).map(super::fib).collect();
        assert_eq!(got, [0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55]);
        assert_eq!(super::fib(30), 832_040);
    }
}
