//! The Universal Scalability Law: a fit of throughput against concurrency.
//!
//! Gunther's USL (N. J. Gunther, *Guerrilla Capacity Planning*, Springer 2007, ch. 4-5) models
//! the throughput of N concurrent users or workers as
//!
//! ```text
//! X(N) = lambda N / (1 + sigma (N - 1) + kappa N (N - 1))
//! ```
//!
//! lambda is the throughput of one, sigma the contention (the serial fraction, Amdahl's law) and
//! kappa the coherency cost (pairwise crosstalk) that makes throughput fall past a peak at
//! N* = sqrt((1 - sigma) / kappa).
//!
//! Fitting: N / X(N) = (1/lambda) + (sigma/lambda)(N - 1) + (kappa/lambda) N (N - 1) is linear in
//! three coefficients, so an ordinary least-squares solve gives a start (exact on noise-free
//! data); Levenberg-Marquardt then minimises the squared throughput error itself, with sigma and
//! kappa kept non-negative. Pure functions, tested on synthetic data.

use serde::{Deserialize, Serialize};

/// Fitted USL parameters and how well they fit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UslFit {
    pub lambda: f64,
    pub sigma: f64,
    pub kappa: f64,
    /// Coefficient of determination of the fit on throughput.
    pub r_squared: f64,
}

impl UslFit {
    /// Throughput the model predicts at concurrency `n`.
    pub fn throughput(&self, n: f64) -> f64 {
        usl_throughput(self.lambda, self.sigma, self.kappa, n)
    }

    /// The concurrency of peak throughput, N* = sqrt((1 - sigma) / kappa); `None` when the
    /// model never peaks (kappa = 0) or contention alone dominates (sigma >= 1).
    pub fn peak_concurrency(&self) -> Option<f64> {
        (self.kappa > 0.0 && self.sigma < 1.0).then(|| ((1.0 - self.sigma) / self.kappa).sqrt())
    }

    /// The throughput at the peak, or the asymptote lambda / sigma when there is no peak.
    pub fn peak_throughput(&self) -> Option<f64> {
        match self.peak_concurrency() {
            Some(n) => Some(self.throughput(n)),
            None if self.sigma > 0.0 => Some(self.lambda / self.sigma),
            None => None,
        }
    }
}

/// X(N) = lambda N / (1 + sigma (N - 1) + kappa N (N - 1)).
pub fn usl_throughput(lambda: f64, sigma: f64, kappa: f64, n: f64) -> f64 {
    lambda * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
}

/// Fits the USL to (N, throughput) points. Needs at least three distinct N >= 1 with positive
/// throughput; returns `None` otherwise or when the data cannot be fit.
pub fn fit_usl(points: &[(f64, f64)]) -> Option<UslFit> {
    let data: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|&(n, x)| n >= 1.0 && x > 0.0 && n.is_finite() && x.is_finite())
        .collect();
    let mut distinct: Vec<f64> = data.iter().map(|p| p.0).collect();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    if distinct.len() < 3 {
        return None;
    }
    let start = linearized_start(&data)?;
    let refined = levenberg_marquardt(&data, start);
    let (lambda, sigma, kappa) = refined;
    if !(lambda.is_finite() && lambda > 0.0) {
        return None;
    }
    Some(UslFit {
        lambda,
        sigma,
        kappa,
        r_squared: r_squared(&data, refined),
    })
}

/// Least squares on N/X = a + b (N-1) + c N (N-1), then lambda = 1/a, sigma = b/a, kappa = c/a.
fn linearized_start(data: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let rows: Vec<([f64; 3], f64)> = data
        .iter()
        .map(|&(n, x)| ([1.0, n - 1.0, n * (n - 1.0)], n / x))
        .collect();
    let (a, b, c) = match solve_normal_equations(&rows) {
        Some([a, b, c]) if a > 0.0 => (a, b, c),
        // Fall back to a pure Amdahl start from the single-worker point.
        _ => {
            let &(n1, x1) = data.iter().min_by(|p, q| p.0.total_cmp(&q.0))?;
            (n1 / x1, 0.0, 0.0)
        }
    };
    Some((1.0 / a, (b / a).max(0.0), (c / a).max(0.0)))
}

/// Solves the 3x3 normal equations (A^T A) p = A^T y by Gaussian elimination with pivoting.
fn solve_normal_equations(rows: &[([f64; 3], f64)]) -> Option<[f64; 3]> {
    let mut m = [[0.0f64; 4]; 3];
    for (a, y) in rows {
        for i in 0..3 {
            for j in 0..3 {
                m[i][j] += a[i] * a[j];
            }
            m[i][3] += a[i] * y;
        }
    }
    solve3(m)
}

/// Gaussian elimination on an augmented 3x4 matrix.
fn solve3(mut m: [[f64; 4]; 3]) -> Option<[f64; 3]> {
    for col in 0..3 {
        let pivot = (col..3).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[pivot][col].abs() < 1e-300 {
            return None;
        }
        m.swap(col, pivot);
        let pivot_row = m[col];
        for (row_index, row) in m.iter_mut().enumerate() {
            if row_index != col {
                let factor = row[col] / pivot_row[col];
                for (value, pivot_value) in row.iter_mut().zip(pivot_row).skip(col) {
                    *value -= factor * pivot_value;
                }
            }
        }
    }
    let solution = [m[0][3] / m[0][0], m[1][3] / m[1][1], m[2][3] / m[2][2]];
    solution.iter().all(|v| v.is_finite()).then_some(solution)
}

fn sum_squared_error(data: &[(f64, f64)], (l, s, k): (f64, f64, f64)) -> f64 {
    data.iter()
        .map(|&(n, x)| (x - usl_throughput(l, s, k, n)).powi(2))
        .sum()
}

/// Levenberg-Marquardt on the throughput residuals, sigma and kappa projected onto >= 0.
fn levenberg_marquardt(data: &[(f64, f64)], start: (f64, f64, f64)) -> (f64, f64, f64) {
    let mut params = start;
    let mut error = sum_squared_error(data, params);
    let mut damping = 1e-3;
    for _ in 0..200 {
        let (l, s, k) = params;
        // Jacobian of the model with respect to (lambda, sigma, kappa).
        let mut jtj = [[0.0f64; 3]; 3];
        let mut jtr = [0.0f64; 3];
        for &(n, x) in data {
            let denominator = 1.0 + s * (n - 1.0) + k * n * (n - 1.0);
            let model = l * n / denominator;
            let gradient = [
                n / denominator,
                -model * (n - 1.0) / denominator,
                -model * n * (n - 1.0) / denominator,
            ];
            let residual = x - model;
            for i in 0..3 {
                for j in 0..3 {
                    jtj[i][j] += gradient[i] * gradient[j];
                }
                jtr[i] += gradient[i] * residual;
            }
        }
        let mut improved = false;
        while damping < 1e12 {
            let mut m = [[0.0f64; 4]; 3];
            for i in 0..3 {
                for j in 0..3 {
                    m[i][j] = jtj[i][j];
                }
                m[i][i] += damping * jtj[i][i].max(1e-30);
                m[i][3] = jtr[i];
            }
            let Some(step) = solve3(m) else {
                damping *= 10.0;
                continue;
            };
            let candidate = (
                (l + step[0]).max(1e-12),
                (s + step[1]).max(0.0),
                (k + step[2]).max(0.0),
            );
            let candidate_error = sum_squared_error(data, candidate);
            if candidate_error < error {
                let relative_gain = (error - candidate_error) / error.max(1e-300);
                params = candidate;
                error = candidate_error;
                damping = (damping / 10.0).max(1e-12);
                improved = relative_gain > 1e-12;
                break;
            }
            damping *= 10.0;
        }
        if !improved {
            break;
        }
    }
    params
}

fn r_squared(data: &[(f64, f64)], params: (f64, f64, f64)) -> f64 {
    let mean = data.iter().map(|p| p.1).sum::<f64>() / data.len() as f64;
    let total: f64 = data.iter().map(|p| (p.1 - mean).powi(2)).sum();
    if total == 0.0 {
        return 1.0;
    }
    1.0 - sum_squared_error(data, params) / total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synthetic(lambda: f64, sigma: f64, kappa: f64, ns: &[f64]) -> Vec<(f64, f64)> {
        ns.iter()
            .map(|&n| (n, usl_throughput(lambda, sigma, kappa, n)))
            .collect()
    }

    #[test]
    fn recovers_known_parameters_exactly() {
        let ns = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
        let fit = fit_usl(&synthetic(1000.0, 0.05, 0.002, &ns)).unwrap();
        assert!((fit.lambda - 1000.0).abs() < 1e-3, "{fit:?}");
        assert!((fit.sigma - 0.05).abs() < 1e-6, "{fit:?}");
        assert!((fit.kappa - 0.002).abs() < 1e-8, "{fit:?}");
        assert!(fit.r_squared > 0.999_999);
        let peak = fit.peak_concurrency().unwrap();
        assert!((peak - (0.95f64 / 0.002).sqrt()).abs() < 1e-3);
    }

    #[test]
    fn recovers_parameters_from_noisy_data() {
        // Deterministic +-3% noise.
        let noise = [1.02, 0.97, 1.01, 0.99, 1.03, 0.98, 1.00, 1.02, 0.97];
        let ns = [1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0, 30.0, 50.0];
        let data: Vec<(f64, f64)> = synthetic(500.0, 0.1, 0.001, &ns)
            .into_iter()
            .zip(noise)
            .map(|((n, x), e)| (n, x * e))
            .collect();
        let fit = fit_usl(&data).unwrap();
        assert!((fit.lambda - 500.0).abs() / 500.0 < 0.06, "{fit:?}");
        assert!((fit.sigma - 0.1).abs() < 0.03, "{fit:?}");
        assert!((fit.kappa - 0.001).abs() < 0.0005, "{fit:?}");
        let peak = fit.peak_concurrency().unwrap();
        assert!((peak - 30.0).abs() < 8.0, "peak {peak}");
    }

    #[test]
    fn linear_scaling_has_no_peak() {
        let data = synthetic(100.0, 0.0, 0.0, &[1.0, 2.0, 4.0, 8.0]);
        let fit = fit_usl(&data).unwrap();
        assert!((fit.lambda - 100.0).abs() < 1e-6);
        assert_eq!(fit.peak_concurrency(), None);
        assert_eq!(fit.peak_throughput(), None);
        // Amdahl only: an asymptote instead of a peak.
        let fit = fit_usl(&synthetic(100.0, 0.25, 0.0, &[1.0, 2.0, 4.0, 8.0, 16.0])).unwrap();
        assert!((fit.peak_throughput().unwrap() - 400.0).abs() < 1.0);
    }

    #[test]
    fn too_few_points_do_not_fit() {
        assert!(fit_usl(&[(1.0, 10.0), (2.0, 19.0)]).is_none());
        assert!(fit_usl(&[(1.0, 10.0), (1.0, 11.0), (2.0, 19.0)]).is_none());
    }
}
