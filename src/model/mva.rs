//! Exact Mean Value Analysis of a closed queueing network of one delay station and one
//! load-dependent station (Reiser & Lavenberg, 1980): the closed loop the lab measures, its
//! connections the customers, the client's round trip (and a wait that blocks no thread) the
//! delay, the server the station. A station's rate may depend on how many requests it holds:
//! `c` cores serve `min(j, c)` of `j` requests at once ([`multi_server`]), and a pool of `P`
//! workers in front of them is a flow-equivalent server whose rate with `j` requests is the
//! inner network's throughput with `min(j, P)` ([`flow_equivalent`]). Written here: no crate
//! solves closed networks with load-dependent stations, and the recursion is a few lines.
//!
//! With `X(n)` the throughput at `n` customers, `Z` the delay, `mu(j)` the station's rate with
//! `j` requests in it and `p(j | n)` the probability that it holds `j` of `n`:
//!
//! ```text
//! R(n)     = sum_{j=1..n} j / mu(j) * p(j-1 | n-1)
//! X(n)     = n / (Z + R(n))
//! p(j | n) = X(n) / mu(j) * p(j-1 | n-1)            (j = 1..n)
//! p(0 | n) = 1 - sum_{j=1..n} p(j | n),             p(0 | 0) = 1
//! ```

/// The closed loop at one population: throughput (requests a second), the mean time a
/// request spends in the station (s) and the mean requests it holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    pub customers: usize,
    pub throughput: f64,
    pub residence_s: f64,
    pub queue: f64,
}

/// Every level from 1 to `n` customers of the loop whose station serves at `rate(j)` requests
/// a second while it holds `j`, each customer away for `delay_s` between requests. A rate of
/// 0 (or below) is a station that never serves: every level then has no throughput.
///
/// The station's rate is the same from some `K` requests on (`c` cores: `K = ceil(c)`; a pool
/// of `P`: at most `P`), so only `p(j | n)` for `j < K - 1` is kept, the rest through the
/// queue: `sum_{j >= K} j / mu(j) p(j-1 | n-1) = (Q(n-1) + 1 - sum_{i < K-1} (i+1) p(i | n-1))
/// / mu(K)`. That is `O(n K)`, not `O(n^2)`: 4,096 connections on 2 cores take 8,000 steps.
/// A rate within [`SAME_RATE`] of the last is taken as the last.
pub fn solve(rate: &dyn Fn(usize) -> f64, delay_s: f64, n: usize) -> Vec<Level> {
    let mu: Vec<f64> = (1..=n).map(rate).collect();
    if mu.iter().any(|m| !m.is_finite() || *m <= 0.0) {
        return (1..=n)
            .map(|customers| Level {
                customers,
                throughput: 0.0,
                residence_s: f64::INFINITY,
                queue: customers as f64,
            })
            .collect();
    }
    let Some(&last) = mu.last() else {
        return Vec::new();
    };
    let mut k = n;
    while k > 1 && (mu[k - 2] - last).abs() <= SAME_RATE * last {
        k -= 1;
    }
    // p(i | n-1) for i < K - 1; p(0 | 0) = 1.
    let mut p = vec![0.0; k - 1];
    if let Some(first) = p.first_mut() {
        *first = 1.0;
    }
    let mut next = vec![0.0; k - 1];
    let mut queue = 0.0;
    let mut levels = Vec::with_capacity(n);
    // Once the station almost surely holds `K` or more (the head's mass under [`DRAINED`]),
    // every further level only adds to its queue: `O(1)` each, not `O(K)`.
    let mut drained = false;
    for customers in 1..=n {
        let residence_s = if drained {
            (queue + 1.0) / last
        } else {
            let head: f64 = (1..k).map(|j| j as f64 / mu[j - 1] * p[j - 1]).sum();
            let weighted: f64 = p
                .iter()
                .enumerate()
                .map(|(i, pi)| (i + 1) as f64 * pi)
                .sum();
            head + (queue + 1.0 - weighted) / last
        };
        let throughput = customers as f64 / (delay_s.max(0.0) + residence_s);
        queue = throughput * residence_s;
        levels.push(Level {
            customers,
            throughput,
            residence_s,
            queue,
        });
        if drained {
            continue;
        }
        let tail = (1.0 - p.iter().sum::<f64>()).max(0.0);
        next.iter_mut().for_each(|v| *v = 0.0);
        for j in 1..k.saturating_sub(1) {
            next[j] = throughput / mu[j - 1] * p[j - 1];
        }
        if k > 1 {
            let busy: f64 = (1..k)
                .map(|j| throughput / mu[j - 1] * p[j - 1])
                .sum::<f64>()
                + throughput / last * tail;
            next[0] = (1.0 - busy).max(0.0);
        }
        std::mem::swap(&mut p, &mut next);
        drained = k > 1 && p.iter().sum::<f64>() < DRAINED;
    }
    levels
}

/// Rates this close (a share of the last) count as the same.
pub const SAME_RATE: f64 = 1e-9;

/// The station holds fewer than `K` requests with at most this probability: no longer counted.
pub const DRAINED: f64 = 1e-14;

/// The rate of `servers` servers (cores; a quota may make it fractional), each taking
/// `demand_s` of service a request, holding `j` requests: `min(j, servers) / demand_s`.
pub fn multi_server(servers: f64, demand_s: f64) -> impl Fn(usize) -> f64 {
    move |j| (j as f64).min(servers.max(0.0)) / demand_s
}

/// A pool of `pool` workers in front of an inner loop, as one station: with `j` requests it
/// serves at the inner loop's throughput with `min(j, pool)` of them inside (each holding a
/// worker through the inner station and `inner_delay_s`, the wait a worker sits through).
/// `inner` is the inner station's rate.
pub fn flow_equivalent(
    inner: &dyn Fn(usize) -> f64,
    inner_delay_s: f64,
    pool: usize,
) -> impl Fn(usize) -> f64 {
    let rates: Vec<f64> = solve(inner, inner_delay_s, pool.max(1))
        .iter()
        .map(|l| l.throughput)
        .collect();
    move |j| rates[j.min(rates.len()).max(1) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn one_server_matches_the_textbook_recursion_worked_by_hand() {
        // S = 1 s, Z = 1 s. n = 1: R = 1, X = 1/2. n = 2: R = S (1 + Q(1)) = 1 (1 + 0.5) = 1.5,
        // X = 2 / 2.5 = 0.8. n = 3: Q(2) = 0.8 x 1.5 = 1.2, R = 2.2, X = 3 / 3.2 = 0.9375.
        let levels = solve(&multi_server(1.0, 1.0), 1.0, 3);
        let x: Vec<f64> = levels.iter().map(|l| l.throughput).collect();
        let r: Vec<f64> = levels.iter().map(|l| l.residence_s).collect();
        assert!(
            close(x[0], 0.5) && close(x[1], 0.8) && close(x[2], 0.9375),
            "{x:?}"
        );
        assert!(
            close(r[0], 1.0) && close(r[1], 1.5) && close(r[2], 2.2),
            "{r:?}"
        );
    }

    #[test]
    fn two_servers_queue_only_past_two_requests_worked_by_hand() {
        // c = 2, S = 1 s, Z = 1 s. n = 1: R = 1, X = 1/2, p(1|1) = 1/2, p(0|1) = 1/2.
        // n = 2: R = 1 x p(0|1) + 2/2 x p(1|1) = 1, X = 2 / 2 = 1: no queue with two servers.
        // p(1|2) = 1 x 1/2 = 1/2, p(2|2) = 1/2 x 1/2 = 1/4, p(0|2) = 1/4.
        // n = 3: R = 1/4 + 1/2 + 3/2 x 1/4 = 1.125, X = 3 / 2.125.
        let levels = solve(&multi_server(2.0, 1.0), 1.0, 3);
        assert!(close(levels[0].throughput, 0.5));
        assert!(close(levels[1].throughput, 1.0) && close(levels[1].residence_s, 1.0));
        assert!(close(levels[2].residence_s, 1.125), "{:?}", levels[2]);
        assert!(close(levels[2].throughput, 3.0 / 2.125));
    }

    #[test]
    fn without_a_delay_the_servers_saturate_at_their_rate() {
        // c = 2, S = 1 s, Z = 0: one request alone at rate 1, two at 2, three still at 2 with
        // one waiting (R = 1.5 s by Little's law).
        let levels = solve(&multi_server(2.0, 1.0), 0.0, 3);
        assert!(close(levels[0].throughput, 1.0));
        assert!(close(levels[1].throughput, 2.0));
        assert!(close(levels[2].throughput, 2.0) && close(levels[2].residence_s, 1.5));
    }

    #[test]
    fn throughput_meets_both_asymptotes() {
        // 2 cores, 100 us a request, 10 ms away: at most min(N / (S + Z), c / S).
        let (c, s, z) = (2.0, 100e-6, 10e-3);
        let levels = solve(&multi_server(c, s), z, 2000);
        for l in &levels {
            let bound = (l.customers as f64 / (s + z)).min(c / s);
            assert!(l.throughput <= bound * (1.0 + 1e-9), "{l:?} over {bound}");
        }
        assert!(close(levels[0].throughput, 1.0 / (s + z)));
        let last = levels.last().unwrap();
        assert!(last.throughput > 0.99 * c / s, "{last:?}");
        // Little's law at every level: X (Z + R) = N.
        for l in &levels {
            let n = l.throughput * (z + l.residence_s);
            assert!((n - l.customers as f64).abs() < 1e-6, "{l:?}");
        }
    }

    #[test]
    fn a_pool_of_one_worker_serves_one_request_at_a_time_through_its_wait() {
        // One worker holds each request through 1 ms of CPU on 2 cores and 9 ms of a wait
        // that blocks it: 100 a second whatever the connections.
        let pool = flow_equivalent(&multi_server(2.0, 1e-3), 9e-3, 1);
        for l in solve(&pool, 0.0, 8) {
            assert!(close(l.throughput, 100.0), "{l:?}");
        }
        // Eight workers: up to 8 requests in their waits at once, the cores never full (8 x 1
        // ms of CPU every 10 ms is 0.8 of a core): 800 a second at 8 connections or more.
        let pool = flow_equivalent(&multi_server(2.0, 1e-3), 9e-3, 8);
        let levels = solve(&pool, 0.0, 16);
        assert!(levels[15].throughput < 800.0 && levels[15].throughput > 780.0);
        assert!(close(levels[7].throughput, levels[15].throughput));
    }

    /// The recursion over every `p(j | n)`, as written in the header: the reference.
    fn every_state(rate: &dyn Fn(usize) -> f64, delay_s: f64, n: usize) -> Vec<f64> {
        let mut p = vec![1.0];
        let mut out = Vec::new();
        for customers in 1..=n {
            let r: f64 = (1..=customers).map(|j| j as f64 / rate(j) * p[j - 1]).sum();
            let x = customers as f64 / (delay_s + r);
            let mut next = vec![0.0; customers + 1];
            for j in 1..=customers {
                next[j] = x / rate(j) * p[j - 1];
            }
            next[0] = 1.0 - next[1..].iter().sum::<f64>();
            p = next;
            out.push(x);
        }
        out
    }

    #[test]
    fn keeping_only_the_states_under_the_constant_rate_changes_nothing() {
        // 3.5 cores, a pool of 6 in front of 2 cores, and a rate that rises up to 5 then holds.
        let rising = |j: usize| [1.0, 1.7, 2.2, 2.6, 3.0][j.min(5) - 1];
        let pool = flow_equivalent(&multi_server(2.0, 1e-3), 4e-3, 6);
        let cases: [(&dyn Fn(usize) -> f64, f64); 3] = [
            (&multi_server(3.5, 1e-3), 2e-3),
            (&pool, 1e-3),
            (&rising, 0.5),
        ];
        for (rate, delay) in cases {
            let fast: Vec<f64> = solve(rate, delay, 40)
                .iter()
                .map(|l| l.throughput)
                .collect();
            let reference = every_state(rate, delay, 40);
            for (a, b) in fast.iter().zip(&reference) {
                assert!((a - b).abs() <= 1e-9 * b, "{a} against {b}");
            }
        }
    }

    #[test]
    fn a_station_that_never_serves_has_no_throughput() {
        let levels = solve(&multi_server(0.0, 1e-3), 0.0, 2);
        assert!(levels.iter().all(|l| l.throughput == 0.0));
    }
}
