//! Cell-fabric buffer sized with an M/D/1 queue for a target overflow probability.
//!
//! Cells arrive as a Poisson stream of load ρ (cells per cell time) and are served one per
//! cell time. The queue-length tail is geometric:
//!
//! ```text
//! P(Q > N) ≈ C · e^(−θN)
//! θ > 0 solves ρ(e^θ − 1) = θ
//! C = (1 − ρ) / (ρ·e^θ − 1)
//! N ≥ (ln C − ln P_max) / θ
//! ```
//!
//! θ = 0 is always a root of ρ(e^θ − 1) = θ. The solver divides it out: it finds the root of
//! g(θ) = ρ·(e^θ − 1)/θ − 1, which is continuous, increasing, equals ρ − 1 < 0 as θ → 0 and is
//! positive at θ = 2(1 − ρ)/ρ (because (e^θ − 1)/θ > 1 + θ/2), and bisects that bracket, so it
//! cannot converge to the trivial root. It evaluates g as ρ·(e^θ − 1 − θ)/θ − (1 − ρ) and C as
//! (1 − ρ)/(θ − (1 − ρ)) (equal at the root), so that loads within 10⁻⁸ of 1 do not round to 1.
//!
//! **The constant C.** `DESIGN.md` gives C = (1 − ρ)/(ρ·e^θ − 1), and warns that the
//! (1 − ρ)/(ρ + e^(−θ)) found in some notes is wrong. Evaluating the M/D/1 queue numerically
//! (the embedded chain Q' = max(Q − 1, 0) + A, A ~ Poisson(ρ), whose stationary law is the
//! time-average number in system) confirms it: C = (1 − ρ)/(ρ·e^θ − 1) is the exact asymptotic
//! constant (the residue of the Pollaczek–Khinchine transform at its pole z = e^θ), while the
//! other form underestimates the tail 6× at ρ = 0.8 and 16× at ρ = 0.9 and tends to 0 as
//! ρ → 1, where the true C tends to 1. The tests check θ and C against the numeric chain.

use super::{HeadroomError, Quantity};
use serde::Serialize;

/// Inputs of the fabric calculation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FabricInput {
    /// Offered load ρ in cells per cell time, 0 < ρ < 1.
    pub load: f64,
    /// Target overflow probability P_max, 0 < P_max < 1.
    pub overflow_probability: f64,
    /// Cell size in bytes, to express the buffer in bytes.
    pub cell_size: u64,
}

/// The M/D/1 sizing.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FabricResult {
    /// The inputs, echoed.
    pub input: FabricInput,
    /// Decay rate θ > 0.
    pub theta: f64,
    /// Prefactor C.
    pub c: f64,
    /// ln C / θ (negative when C < 1), cells.
    pub ln_c_over_theta: f64,
    /// −ln P_max / θ, cells.
    pub ln_inv_p_over_theta: f64,
    /// N = ⌈(ln C − ln P_max)/θ⌉ (at least 0), cells.
    pub buffer_cells: u64,
    /// N · cell size, bytes.
    pub buffer_bytes: u64,
    /// C·e^(−θN): the tail probability at the chosen N (≤ P_max).
    pub overflow_at_buffer: f64,
}

/// The closest to 1 a load may be: 1 − ρ ≥ 10⁻¹², where θ ≈ 2(1 − ρ) is still resolved to
/// about 12 digits (and the buffer for any P_max is already beyond the calculator's limit).
pub const MIN_LOAD_GAP: f64 = 1e-12;

/// (e^θ − 1 − θ)/θ, without the cancellation of e^θ − 1 − θ at small θ (a series there).
fn excess(theta: f64) -> f64 {
    if theta < 1e-3 {
        theta * (0.5 + theta * (1.0 / 6.0 + theta * (1.0 / 24.0 + theta / 120.0)))
    } else {
        (theta.exp_m1() - theta) / theta
    }
}

/// The positive root θ of ρ(e^θ − 1) = θ, for 0 < ρ < 1 − [`MIN_LOAD_GAP`].
///
/// Bisects h(θ) = ρ·(e^θ − 1 − θ)/θ − (1 − ρ), which is ρ(e^θ − 1)/θ − 1 written so that
/// neither side rounds to 1 when ρ is close to 1 (where the plain form lost the sign of h at
/// the bracket's end and failed for ρ = 0.99999999).
pub fn solve_theta(load: f64) -> Result<f64, HeadroomError> {
    check_load(load)?;
    let gap = 1.0 - load; // exact for ρ ≥ 0.5
    let h = |t: f64| load * excess(t) - gap;
    let mut lo = 0.0_f64; // h(0+) = −(1 − ρ) < 0
    let mut hi = 2.0 * gap / load; // h(hi) > 0, since (e^θ − 1 − θ)/θ > θ/2
    if h(hi) <= 0.0 {
        return Err(HeadroomError::NoConvergence {
            quantity: Quantity::Load,
            reason: format!("could not bracket the positive root for rho = {load}"),
        });
    }
    // Bisection of two finite doubles meets in at most a few thousand halvings.
    for _ in 0..4096 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if h(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let theta = 0.5 * (lo + hi);
    if theta > 0.0 {
        Ok(theta)
    } else {
        Err(HeadroomError::NoConvergence {
            quantity: Quantity::Load,
            reason: format!("root underflowed for rho = {load}"),
        })
    }
}

fn check_load(load: f64) -> Result<(), HeadroomError> {
    if !load.is_finite() || load <= 0.0 {
        return Err(HeadroomError::invalid(
            Quantity::Load,
            format!("must be greater than 0, got {load}"),
        ));
    }
    if load >= 1.0 {
        return Err(HeadroomError::invalid(
            Quantity::Load,
            format!("must be below 1 (rho >= 1 has no stationary queue; the buffer would grow without bound), got {load}"),
        ));
    }
    if 1.0 - load < MIN_LOAD_GAP {
        return Err(HeadroomError::invalid(
            Quantity::Load,
            format!(
                "must be at most 1 - {MIN_LOAD_GAP} (the buffer grows as 1/(1 - rho) and is \
                 beyond any real one there), got {load}"
            ),
        ));
    }
    Ok(())
}

/// The tail prefactor C = (1 − ρ)/(ρ·e^θ − 1) at the root θ, evaluated as
/// (1 − ρ)/(θ − (1 − ρ)): at the root ρ·e^θ − 1 = ρ(e^θ − 1) − (1 − ρ) = θ − (1 − ρ), which
/// does not cancel as ρ → 1.
pub fn prefactor(load: f64, theta: f64) -> f64 {
    let gap = 1.0 - load;
    gap / (theta - gap)
}

/// Sizes the fabric buffer.
pub fn fabric_buffer(input: &FabricInput) -> Result<FabricResult, HeadroomError> {
    check_load(input.load)?;
    let p = input.overflow_probability;
    if !(p.is_finite() && p > 0.0 && p < 1.0) {
        return Err(HeadroomError::invalid(
            Quantity::OverflowProbability,
            format!("must be strictly between 0 and 1, got {p}"),
        ));
    }
    super::check_cell(input.cell_size)?;
    let theta = solve_theta(input.load)?;
    let c = prefactor(input.load, theta);
    let a = c.ln() / theta;
    let b = -p.ln() / theta;
    let n_real = a + b;
    let limit = (super::MAX_TERM_BIT_TIMES / 8) as f64;
    if n_real * input.cell_size as f64 > limit {
        return Err(HeadroomError::invalid(
            Quantity::Load,
            format!(
                "rho = {} needs {n_real:.3e} cells, beyond the calculator's limit of {limit} B",
                input.load
            ),
        ));
    }
    let n = if n_real <= 0.0 {
        0
    } else {
        super::ceil_tolerant(n_real) as u64
    };
    Ok(FabricResult {
        input: *input,
        theta,
        c,
        ln_c_over_theta: a,
        ln_inv_p_over_theta: b,
        buffer_cells: n,
        buffer_bytes: n * input.cell_size,
        overflow_at_buffer: c * (-theta * n as f64).exp(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Independent numeric evaluation: the stationary law of the M/D/1 embedded chain
    /// Q' = max(Q − 1, 0) + A, A ~ Poisson(ρ), by power iteration on a truncated state space.
    /// Returns P(Q > n) for n = 0..len.
    fn numeric_tail(load: f64, states: usize) -> Vec<f64> {
        let arrivals: Vec<f64> = {
            let mut v = vec![(-load).exp()];
            for k in 1..40 {
                let prev = v[k - 1];
                v.push(prev * load / k as f64);
            }
            v
        };
        let mut p = vec![0.0; states];
        p[0] = 1.0;
        for _ in 0..100_000 {
            let mut base = vec![0.0; states];
            base[0] = p[0] + p[1];
            base[1..states - 1].copy_from_slice(&p[2..states]);
            let mut q = vec![0.0; states];
            for (i, &b) in base.iter().enumerate() {
                if b == 0.0 {
                    continue;
                }
                for (k, &a) in arrivals.iter().enumerate().take(states - i) {
                    q[i + k] += b * a;
                }
            }
            let diff = p
                .iter()
                .zip(&q)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f64::max);
            p = q;
            if diff < 1e-17 {
                break;
            }
        }
        let mut tail = vec![0.0; states];
        let mut acc = 0.0;
        for n in (0..states).rev() {
            tail[n] = acc; // P(Q > n)
            acc += p[n];
        }
        tail
    }

    #[test]
    fn theta_is_the_positive_root() {
        for &rho in &[0.01, 0.1, 0.5, 0.8, 0.9, 0.99, 0.999_999] {
            let t = solve_theta(rho).unwrap();
            assert!(t > 0.0, "rho {rho}");
            let residual = rho * t.exp_m1() - t;
            assert!(
                residual.abs() <= 1e-12 * t.max(1e-300),
                "rho {rho}: residual {residual}"
            );
        }
        // Known value: rho = 0.5 -> theta = 1.25643120862617.
        assert!((solve_theta(0.5).unwrap() - 1.256_431_208_626_17).abs() < 1e-12);
        // Heavy traffic: theta ~ 2(1 − rho).
        let t = solve_theta(0.999).unwrap();
        assert!((t / 0.002 - 1.0).abs() < 0.01);
    }

    #[test]
    fn tail_matches_numeric_chain() {
        for &(rho, states) in &[(0.5, 120), (0.8, 200), (0.9, 300)] {
            let tail = numeric_tail(rho, states);
            let theta = solve_theta(rho).unwrap();
            let c = prefactor(rho, theta);
            for n in [5usize, 10, 20, 30] {
                let approx = c * (-theta * n as f64).exp();
                let ratio = tail[n] / approx;
                assert!((ratio - 1.0).abs() < 1e-3, "rho {rho} n {n}: ratio {ratio}");
                // The wrong constant DESIGN.md warns of, (1 − ρ)/(ρ + e^(−θ)), does not match.
                let design = (1.0 - rho) / (rho + (-theta).exp()) * (-theta * n as f64).exp();
                if rho >= 0.8 {
                    assert!(tail[n] / design > 5.0);
                }
            }
        }
    }

    #[test]
    fn sized_buffer_meets_target() {
        for &(rho, pmax) in &[(0.8, 1e-6), (0.9, 1e-4), (0.5, 1e-9)] {
            let r = fabric_buffer(&FabricInput {
                load: rho,
                overflow_probability: pmax,
                cell_size: 256,
            })
            .unwrap();
            assert!(r.overflow_at_buffer <= pmax * (1.0 + 1e-9));
            assert_eq!(r.buffer_bytes, r.buffer_cells * 256);
            let n = r.buffer_cells as usize;
            let tail = numeric_tail(rho, 300);
            assert!(tail[n] <= pmax * 1.001, "rho {rho}: P(Q>{n}) = {}", tail[n]);
            assert!(
                tail[n - 1] > pmax * 0.999,
                "N is the smallest for rho {rho}"
            );
        }
    }

    /// rho = 0.8, P_max = 1e-6: theta = 0.430842, C = 0.2/(0.8·e^0.430842 − 1) = 0.866393,
    /// N = ⌈(ln 0.866393 + 13.815511)/0.430842⌉ = ⌈31.7339⌉ = 32 cells.
    #[test]
    fn worked_example() {
        let r = fabric_buffer(&FabricInput {
            load: 0.8,
            overflow_probability: 1e-6,
            cell_size: 64,
        })
        .unwrap();
        assert!((r.theta - 0.430_842_2).abs() < 1e-6);
        assert!((r.c - 0.866_393).abs() < 1e-5, "C = {}", r.c);
        assert_eq!(r.buffer_cells, 32);
        assert_eq!(r.buffer_bytes, 2048);
    }

    #[test]
    fn errors_name_the_argument() {
        let e = fabric_buffer(&FabricInput {
            load: 1.0,
            overflow_probability: 1e-6,
            cell_size: 64,
        })
        .unwrap_err();
        assert_eq!(e.quantity(), Quantity::Load);
        assert!(e.to_string().contains("below 1"));
        for p in [0.0, 1.0, -0.1, 2.0, f64::NAN] {
            let e = fabric_buffer(&FabricInput {
                load: 0.5,
                overflow_probability: p,
                cell_size: 64,
            })
            .unwrap_err();
            assert_eq!(e.quantity(), Quantity::OverflowProbability);
        }
        assert_eq!(solve_theta(0.0).unwrap_err().quantity(), Quantity::Load);
        assert_eq!(solve_theta(1.5).unwrap_err().quantity(), Quantity::Load);
    }

    /// ρ = 1 − 10⁻⁸ (it failed with "could not bracket": ρ·(e^θ − 1)/θ rounded to 1 at the
    /// bracket's end): θ ≈ 2(1 − ρ)(1 − 2(1 − ρ)/3), C ≈ 1 + 2(1 − ρ)/3, N ≈ −ln P_max / θ.
    /// Closer than 10⁻¹² to 1 the load is refused, naming it.
    #[test]
    fn loads_near_one() {
        let gap = 1e-8;
        let rho = 1.0 - gap;
        let t = solve_theta(rho).unwrap();
        assert!(
            (t / (2.0 * gap * (1.0 - 2.0 * gap / 3.0)) - 1.0).abs() < 1e-7,
            "{t}"
        );
        assert!((prefactor(rho, t) - 1.0).abs() < 1e-7);
        let r = fabric_buffer(&FabricInput {
            load: rho,
            overflow_probability: 1e-6,
            cell_size: 64,
        })
        .unwrap();
        let want = (1e-6f64.recip().ln() / t).ceil();
        assert!(
            (r.buffer_cells as f64 - want).abs() <= 1.0,
            "{}",
            r.buffer_cells
        );
        for load in [1.0 - 1e-13, 1.0 - 1e-12] {
            let e = fabric_buffer(&FabricInput {
                load,
                overflow_probability: 1e-6,
                cell_size: 64,
            })
            .unwrap_err();
            assert_eq!(e.quantity(), Quantity::Load, "{load}");
        }
        // Light loads still converge (the bracket's end is 2/ρ).
        let t = solve_theta(1e-6).unwrap();
        assert!((1e-6 * t.exp_m1() / t - 1.0).abs() < 1e-12, "{t}");
    }

    #[test]
    fn tiny_target_easily_met() {
        let r = fabric_buffer(&FabricInput {
            load: 0.1,
            overflow_probability: 0.9,
            cell_size: 64,
        })
        .unwrap();
        assert_eq!(r.buffer_cells, 0);
    }
}
