"""L2-regularised logistic regression fitted with ``fusegrad.value_and_grad`` and SciPy's L-BFGS.

The loss, for features X (n×d), labels t ∈ {-1, +1} and parameters θ = (w, b), is

    L(θ) = mean(logaddexp(0, -t * (X @ w + b))) + lam / 2 * |w|²,

written in plain NumPy (``np.logaddexp`` is the numerically stable log(1 + exp(·))). fusegrad
differentiates it as it stands; the gradient of the constant operand X in ``X @ w`` is never
computed, and the elementwise part is fused, so one loss-and-gradient evaluation allocates little
beyond two length-n vectors (printed, measured with ``fusegrad.memory.track_allocations()``).

The fit is checked against a known solution, computed without fusegrad:

- ``scipy.optimize.minimize(method="L-BFGS-B")`` with a hand-written NumPy gradient
  (∇ = Xᵀ(-t·σ(-t z))/n + lam w, z = X w + b);
- that solution polished by Newton's method with the hand-written Hessian
  (H = Xᵀ diag(σ(z)σ(-z)/n) X + lam I, the intercept as an extra column of ones) to machine
  precision;
- scikit-learn's ``LogisticRegression`` (C = 1 / (n lam)), only if it is installed.

The coefficients agree to about 1e-6 or better (the L-BFGS solutions to their tolerance).

Run::

    python examples/logistic_regression.py             # n = 200,000 samples, d = 50 features
    python examples/logistic_regression.py --n 5000 --d 10
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.optimize
import scipy.special

import fusegrad as fg
from fusegrad.memory import track_allocations

LBFGS_OPTIONS = {"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-10}


def loss(theta, X, t, lam):
    """Mean logistic loss plus lam/2 |w|² (the intercept b = theta[-1] is not penalised)."""
    w, b = theta[:-1], theta[-1]
    return np.mean(np.logaddexp(0, -t * (X @ w + b))) + 0.5 * lam * np.sum(w**2)


def hand_value_and_grad(theta, X, t, lam):
    """The same loss and its gradient, derived by hand (NumPy only)."""
    w, b = theta[:-1], theta[-1]
    m = -t * (X @ w + b)
    value = np.mean(np.logaddexp(0, m)) + 0.5 * lam * (w @ w)
    dz = -t * scipy.special.expit(m) / len(t)  # d loss / d z, z = X @ w + b
    return value, np.concatenate([X.T @ dz + lam * w, [dz.sum()]])


def newton_solution(X, t, lam, theta=None, tol=1e-13, maxiter=50):
    """The minimiser by Newton's method with the hand-written Hessian (a d+1 square solve),
    started from ``theta`` (default zeros)."""
    n, d = X.shape
    theta = np.zeros(d + 1) if theta is None else np.array(theta, dtype=float)
    for _ in range(maxiter):
        _, g = hand_value_and_grad(theta, X, t, lam)
        z = X @ theta[:-1] + theta[-1]
        s = scipy.special.expit(z) * scipy.special.expit(-z) / n
        H = np.empty((d + 1, d + 1))
        H[:d, :d] = (X.T * s) @ X + lam * np.eye(d)
        H[:d, d] = H[d, :d] = X.T @ s
        H[d, d] = s.sum()
        step = np.linalg.solve(H, g)
        theta -= step
        if np.max(np.abs(step)) < tol:
            break
    return theta


def sklearn_solution(X, t, lam):
    """scikit-learn's solution (None if scikit-learn is not installed)."""
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        return None
    clf = LogisticRegression(C=1.0 / (len(t) * lam), tol=1e-12, max_iter=10_000)
    clf.fit(X, t)
    return np.concatenate([clf.coef_.ravel(), clf.intercept_])


def make_data(n, d, seed=0):
    """Correlated Gaussian features and labels drawn from a logistic model."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) @ (np.eye(d) + 0.3 * rng.standard_normal((d, d)) / np.sqrt(d))
    w_true = rng.standard_normal(d) / np.sqrt(d) * 2
    p = scipy.special.expit(X @ w_true + 0.5)
    t = np.where(rng.uniform(size=n) < p, 1.0, -1.0)
    return X, t, np.concatenate([w_true, [0.5]])


def main(n=200_000, d=50, lam=1e-3, seed=0, verbose=True):
    """Fit with fusegrad + L-BFGS-B; return the solutions and their differences."""
    say = print if verbose else (lambda *a, **k: None)
    X, t, theta_true = make_data(n, d, seed)
    say(f"Logistic regression: n = {n:,} samples, d = {d} features, lam = {lam:g}")

    fun = fg.value_and_grad(loss)

    def fun_and_jac(theta):
        value, g = fun(theta, X, t, lam)
        return float(value), g

    theta0 = np.zeros(d + 1)
    fun_and_jac(theta0)  # warm-up (kernel compilation)
    t0 = time.perf_counter()
    fun_and_jac(theta0)
    t_fg = time.perf_counter() - t0
    t0 = time.perf_counter()
    hand_value_and_grad(theta0, X, t, lam)
    t_hand = time.perf_counter() - t0
    with track_allocations() as report:
        fun_and_jac(theta0)
    say(
        f"  one loss + gradient: fusegrad {t_fg * 1e3:.1f} ms, hand-written NumPy "
        f"{t_hand * 1e3:.1f} ms; fusegrad peak {report.peak_bytes / 2**20:.2f} MiB "
        f"(X itself: {X.nbytes / 2**20:.1f} MiB)"
    )

    t0 = time.perf_counter()
    res = scipy.optimize.minimize(
        fun_and_jac, theta0, jac=True, method="L-BFGS-B", options=LBFGS_OPTIONS
    )
    t_fit = time.perf_counter() - t0
    say(f"  fusegrad + L-BFGS-B  : loss {res.fun:.12f}, {res.nit} iterations, {t_fit:.2f} s")

    res_hand = scipy.optimize.minimize(
        hand_value_and_grad, theta0, args=(X, t, lam), jac=True, method="L-BFGS-B",
        options=LBFGS_OPTIONS,
    )  # fmt: skip
    t0 = time.perf_counter()
    ref = newton_solution(X, t, lam, theta=res_hand.x)  # polished to machine precision
    t_newton = time.perf_counter() - t0
    skl = sklearn_solution(X, t, lam)
    say(f"  hand grad + L-BFGS-B : loss {res_hand.fun:.12f}, {res_hand.nit} iterations")
    say(f"  + Newton polish      : loss {loss(ref, X, t, lam):.12f}, {t_newton:.2f} s")

    def diff(a):
        return float(np.max(np.abs(res.x - a)))

    err_newton, err_hand = diff(ref), diff(res_hand.x)
    say(f"  max |θ_fusegrad - θ_Newton|        = {err_newton:.2e}")
    say(f"  max |θ_fusegrad - θ_hand L-BFGS-B| = {err_hand:.2e}")
    err_skl = None
    if skl is None:
        say("  scikit-learn not installed: its comparison is skipped")
    else:
        err_skl = diff(skl)
        say(f"  max |θ_fusegrad - θ_sklearn|       = {err_skl:.2e}")
    say(f"  max |w_i| = {np.max(np.abs(res.x[:-1])):.3f}; b = {res.x[-1]:.6f}")
    say(
        f"  (vs the generating model: max |θ - θ_true| = "
        f"{np.max(np.abs(res.x - theta_true)):.3f}, sampling error)"
    )
    ok = err_newton < 1e-5 and err_hand < 1e-5 and (err_skl is None or err_skl < 1e-4)
    say("  checks: " + ("OK" if ok else "FAILED"))
    return {
        "theta": res.x,
        "theta_newton": ref,
        "theta_hand_lbfgs": res_hand.x,
        "theta_sklearn": skl,
        "err_newton": err_newton,
        "err_hand": err_hand,
        "err_sklearn": err_skl,
        "loss": float(res.fun),
        "result": res,
        "peak_bytes": report.peak_bytes,
        "ok": ok,
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000, help="samples")
    ap.add_argument("--d", type=int, default=50, help="features")
    ap.add_argument("--lam", type=float, default=1e-3, help="L2 penalty")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    raise SystemExit(0 if main(n=args.n, d=args.d, lam=args.lam, seed=args.seed)["ok"] else 1)
