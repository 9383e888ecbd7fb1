"""Ordinary differentiable programs in autograd's style, written once against a NumPy-like
namespace: ``loss(np_, sp_, params, data)`` runs on ``numpy`` under fusegrad,
``autograd.numpy`` under autograd and ``jax.numpy`` under JAX (``sp_``: the matching
``scipy.special``, for ``logsumexp``). ``params`` is a dict of arrays (what a gradient is taken
with respect to), ``data`` a dict of constants, both made by the program's ``make(rng)``.

``benchmarks/bench_programs.py`` times them against autograd and JAX; the tests check
fusegrad's ``grad`` and ``jit(grad)`` on every one of them.

Example::

    >>> import scipy.special
    >>> prog = PROGRAMS["logreg"]
    >>> params, data = prog.make(np.random.default_rng(SEED))
    >>> float(prog.loss(np, scipy.special, params, data)) > 0
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

SEED = 20261202


@dataclass(frozen=True)
class Program:
    """One benchmark program: ``loss(np_, sp_, params, data)`` and how to make its inputs.

    ``make(rng)`` returns ``(params, data)``: ``params`` is the dict the gradient is taken
    with respect to, ``data`` a dict of constants (NumPy arrays and numbers).
    """

    name: str
    about: str
    loss: Callable
    make: Callable


PROGRAMS: dict[str, Program] = {}


def program(name: str, about: str, make: Callable) -> Callable:
    """Register ``loss`` as the program ``name``, its inputs made by ``make(rng)``."""

    def register(loss: Callable) -> Callable:
        PROGRAMS[name] = Program(name, about, loss, make)
        return loss

    return register


def _dense(rng: np.random.Generator, n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.normal(0.0, 1.0 / np.sqrt(n_in), (n_in, n_out)), 0.1 * rng.normal(size=n_out)


def _sigmoid(np_: Any, x: Any) -> Any:
    return 1.0 / (1.0 + np_.exp(-x))


# --------------------------------------------------------------------------------------------------
# Neural networks
# --------------------------------------------------------------------------------------------------


def _mlp_inputs(sizes: tuple[int, ...], batch: int) -> Callable:
    def make(rng: np.random.Generator) -> tuple[dict, dict]:
        params = {}
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            params[f"W{i}"], params[f"b{i}"] = _dense(rng, a, b)
        x = rng.normal(size=(batch, sizes[0]))
        labels = rng.integers(0, sizes[-1], batch)
        return params, {"x": x, "onehot": np.eye(sizes[-1])[labels], "layers": len(sizes) - 1}

    return make


def _mlp_loss(np_: Any, sp_: Any, p: dict, d: dict) -> Any:
    h = d["x"]
    last = d["layers"] - 1
    for i in range(d["layers"]):
        h = h @ p[f"W{i}"] + p[f"b{i}"]
        if i < last:
            h = np_.tanh(h)
    logp = h - sp_.logsumexp(h, axis=1, keepdims=True)
    penalty = sum(np_.sum(p[f"W{i}"] ** 2) for i in range(d["layers"]))
    return -np_.sum(logp * d["onehot"]) / h.shape[0] + 1e-4 * penalty


program(
    "mlp",
    "MLP classifier 32-64-32-10, batch 64, tanh, log-softmax CE",
    _mlp_inputs((32, 64, 32, 10), 64),
)(_mlp_loss)
program(
    "mlp_mnist",
    "MLP classifier 784-200-100-10, batch 256 (autograd's sizes)",
    _mlp_inputs((784, 200, 100, 10), 256),
)(_mlp_loss)


def _rnn_inputs(rng: np.random.Generator) -> tuple[dict, dict]:
    n_in, n_h, n_out, steps, batch = 8, 32, 4, 60, 16
    wx, bh = _dense(rng, n_in, n_h)
    wy, by = _dense(rng, n_h, n_out)
    params = {
        "Wx": wx,
        "Wh": rng.normal(0, 0.5 / np.sqrt(n_h), (n_h, n_h)),
        "bh": bh,
        "Wy": wy,
        "by": by,
        "h0": np.zeros(n_h),
    }
    xs = rng.normal(size=(steps, batch, n_in))
    return params, {"xs": xs, "ys": rng.normal(size=(steps, batch, n_out))}


@program("rnn", "tanh RNN 8-32-4, 60 steps, batch 16, loss at every step", _rnn_inputs)
def _rnn_loss(np_: Any, sp_: Any, p: dict, d: dict) -> Any:
    h = p["h0"] + np_.zeros((d["xs"].shape[1], 1))
    loss = 0.0
    for t in range(d["xs"].shape[0]):
        h = np_.tanh(d["xs"][t] @ p["Wx"] + h @ p["Wh"] + p["bh"])
        loss = loss + np_.sum((h @ p["Wy"] + p["by"] - d["ys"][t]) ** 2)
    return loss / d["xs"].shape[0]


def lstm_inputs(
    rng: np.random.Generator, n_in: int = 8, n_h: int = 24, n_out: int = 5, steps: int = 40,
    batch: int = 8
) -> tuple[dict, dict]:  # fmt: skip
    """The LSTM example's parameters and data; other sizes for tests of other domains.

    >>> p, d = lstm_inputs(np.random.default_rng(0), n_h=4, steps=2); p["W"].shape, d["xs"].shape
    ((12, 16), (2, 8, 8))
    """
    w, b = _dense(rng, n_in + n_h, 4 * n_h)
    wy, by = _dense(rng, n_h, n_out)
    params = {"W": w, "b": b, "Wy": wy, "by": by}
    xs = rng.normal(size=(steps, batch, n_in))
    labels = rng.integers(0, n_out, (steps, batch))
    return params, {"xs": xs, "onehot": np.eye(n_out)[labels], "hidden": n_h}


@program("lstm", "LSTM 8-24-5, 40 steps, batch 8, concat + gate slices, CE per step", lstm_inputs)
def _lstm_loss(np_: Any, sp_: Any, p: dict, d: dict) -> Any:
    n_h, xs = d["hidden"], d["xs"]
    h = np_.zeros((xs.shape[1], n_h))
    c = np_.zeros((xs.shape[1], n_h))
    total = 0.0
    for t in range(xs.shape[0]):
        z = np_.concatenate([xs[t], h], axis=1) @ p["W"] + p["b"]
        i = _sigmoid(np_, z[:, :n_h])
        f = _sigmoid(np_, z[:, n_h : 2 * n_h])
        o = _sigmoid(np_, z[:, 2 * n_h : 3 * n_h])
        g = np_.tanh(z[:, 3 * n_h :])
        c = f * c + i * g
        h = o * np_.tanh(c)
        logits = h @ p["Wy"] + p["by"]
        total = total + np_.sum(
            d["onehot"][t] * (logits - sp_.logsumexp(logits, axis=1, keepdims=True))
        )
    return -total / xs.shape[0]


def _gru_inputs(rng: np.random.Generator) -> tuple[dict, dict]:
    n_in, n_h, steps, batch = 6, 20, 50, 12
    params = {}
    for gate in "zrh":
        params[f"W{gate}"], params[f"b{gate}"] = _dense(rng, n_in, n_h)
        params[f"U{gate}"] = rng.normal(0, 0.5 / np.sqrt(n_h), (n_h, n_h))
    params["v"] = rng.normal(size=n_h) / np.sqrt(n_h)
    xs = rng.normal(size=(steps, batch, n_in))
    return params, {"xs": xs, "target": rng.normal(size=batch)}


@program("gru", "GRU 6-20, 50 steps, batch 12, readout of the last state", _gru_inputs)
def _gru_loss(np_: Any, sp_: Any, p: dict, d: dict) -> Any:
    xs = d["xs"]
    h = np_.zeros((xs.shape[1], p["Uz"].shape[0]))
    for t in range(xs.shape[0]):
        x = xs[t]
        z = _sigmoid(np_, x @ p["Wz"] + h @ p["Uz"] + p["bz"])
        r = _sigmoid(np_, x @ p["Wr"] + h @ p["Ur"] + p["br"])
        cand = np_.tanh(x @ p["Wh"] + (r * h) @ p["Uh"] + p["bh"])
        h = (1.0 - z) * h + z * cand
    return np_.mean((h @ p["v"] - d["target"]) ** 2)


def _attention_inputs(rng: np.random.Generator) -> tuple[dict, dict]:
    tokens, width, heads = 24, 32, 4
    params = {
        name: rng.normal(0, 1 / np.sqrt(width), (width, width)) for name in ("Wq", "Wk", "Wv", "Wo")
    }
    params["gain"], params["bias"] = np.ones(width), np.zeros(width)
    x = rng.normal(size=(tokens, width))
    return params, {"x": x, "target": rng.normal(size=(tokens, width)), "heads": heads}


@program(
    "attention", "self-attention, 24 tokens x 32, 4 heads, residual + layer norm", _attention_inputs
)
def _attention_loss(np_: Any, sp_: Any, p: dict, d: dict) -> Any:
    x, heads = d["x"], d["heads"]
    n, w = x.shape
    k = w // heads

    def split(m: Any) -> Any:  # (n, w) -> (heads, n, k)
        return np_.transpose(np_.reshape(m, (n, heads, k)), (1, 0, 2))

    q, key, v = split(x @ p["Wq"]), split(x @ p["Wk"]), split(x @ p["Wv"])
    scores = q @ np_.swapaxes(key, 1, 2) / np_.sqrt(k)
    scores = scores - np_.max(scores, axis=-1, keepdims=True)
    e = np_.exp(scores)
    att = e / np_.sum(e, axis=-1, keepdims=True)
    mixed = np_.reshape(np_.transpose(att @ v, (1, 0, 2)), (n, w))
    y = x + mixed @ p["Wo"]
    mu = np_.mean(y, axis=1, keepdims=True)
    var = np_.var(y, axis=1, keepdims=True)
    y = (y - mu) / np_.sqrt(var + 1e-5) * p["gain"] + p["bias"]
    return np_.mean((y - d["target"]) ** 2)


def _conv_inputs(rng: np.random.Generator) -> tuple[dict, dict]:
    batch, size, c1, c2 = 8, 14, 4, 6
    params = {
        "K1": rng.normal(0, 1 / 3, (c1, 3, 3)),
        "b1": np.zeros(c1),
        "K2": rng.normal(0, 1 / np.sqrt(9 * c1), (c2, c1, 3, 3)),
        "b2": np.zeros(c2),
        "Wout": rng.normal(0, 0.3, (c2, 3)),
    }
    images = rng.normal(size=(batch, size, size))
    return params, {"images": images, "onehot": np.eye(3)[rng.integers(0, 3, batch)]}


def _windows(np_: Any, x: Any, k: int) -> Any:
    """The k x k windows of the last two axes of ``x``, stacked on a new last axis."""
    h, w = x.shape[-2] - k + 1, x.shape[-1] - k + 1
    return np_.stack([x[..., i : i + h, j : j + w] for i in range(k) for j in range(k)], axis=-1)


@program("conv", "2-layer 3x3 convnet on 8 images 14x14 (windows + einsum), relu, CE", _conv_inputs)
def _conv_loss(np_: Any, sp_: Any, p: dict, d: dict) -> Any:
    k1 = np_.reshape(p["K1"], (p["K1"].shape[0], 9))
    h = np_.einsum("bhwk,ck->bchw", _windows(np_, d["images"], 3), k1)
    h = np_.maximum(h + p["b1"][:, None, None], 0.0)
    k2 = np_.reshape(p["K2"], (p["K2"].shape[0], p["K2"].shape[1], 9))
    h = np_.einsum("bihwk,oik->bohw", _windows(np_, h, 3), k2)
    h = np_.maximum(h + p["b2"][:, None, None], 0.0)
    logits = np_.mean(h, axis=(2, 3)) @ p["Wout"]
    return -np_.sum(d["onehot"] * (logits - sp_.logsumexp(logits, axis=1, keepdims=True)))


def _vae_inputs(rng: np.random.Generator) -> tuple[dict, dict]:
    n, dim, hidden, latent = 64, 50, 32, 4
    params = {}
    params["We"], params["be"] = _dense(rng, dim, hidden)
    params["Wl"], params["bl"] = _dense(rng, hidden, 2 * latent)
    params["Wd"], params["bd"] = _dense(rng, latent, hidden)
    params["Wo"], params["bo"] = _dense(rng, hidden, dim)
    x = (rng.random((n, dim)) < 0.3).astype(float)
    return params, {"x": x, "eps": rng.normal(size=(n, latent)), "latent": latent}


@program(
    "vae", "VAE 50-32-4, batch 64, Bernoulli decoder, fixed-noise reparameterisation", _vae_inputs
)
def _vae_loss(np_: Any, sp_: Any, p: dict, d: dict) -> Any:
    x, latent = d["x"], d["latent"]
    stats = np_.tanh(x @ p["We"] + p["be"]) @ p["Wl"] + p["bl"]
    mean, log_var = stats[:, :latent], stats[:, latent:]
    z = mean + np_.exp(0.5 * log_var) * d["eps"]
    logits = np_.tanh(z @ p["Wd"] + p["bd"]) @ p["Wo"] + p["bo"]
    log_lik = np_.sum(x * logits - np_.logaddexp(0.0, logits))
    kl = -0.5 * np_.sum(1.0 + log_var - mean**2 - np_.exp(log_var))
    return (kl - log_lik) / x.shape[0]


# --------------------------------------------------------------------------------------------------
# Statistical models
# --------------------------------------------------------------------------------------------------


def _gp_inputs(rng: np.random.Generator) -> tuple[dict, dict]:
    n, dim = 60, 2
    x = rng.uniform(-2, 2, (n, dim))
    y = np.sin(2 * x[:, 0]) * np.cos(x[:, 1]) + 0.1 * rng.normal(size=n)
    params = {
        "log_scales": np.zeros(dim),
        "log_amp": np.array(0.1),
        "log_noise": np.array(-2.0),
        "mean": np.array(0.0),
    }
    return params, {"x": x, "y": y}


@program(
    "gp",
    "GP regression NLL, 60 points in 2-d, ARD squared-exponential, cholesky + solve",
    _gp_inputs,
)
def _gp_loss(np_: Any, sp_: Any, p: dict, d: dict) -> Any:
    x, y = d["x"], d["y"]
    n = x.shape[0]
    scaled = x / np_.exp(p["log_scales"])
    sq = np_.sum((scaled[:, None, :] - scaled[None, :, :]) ** 2, axis=-1)
    cov = np_.exp(2 * p["log_amp"] - 0.5 * sq) + (np_.exp(p["log_noise"]) + 1e-6) * np_.eye(n)
    chol = np_.linalg.cholesky(cov)
    r = y - p["mean"]
    alpha = np_.linalg.solve(cov, r)
    # axes spelled (-1, -2): autograd's diagonal gradient takes no other
    log_det = 2.0 * np_.sum(np_.log(np_.diagonal(chol, 0, -1, -2)))
    return 0.5 * np_.dot(r, alpha) + 0.5 * log_det + 0.5 * n * np_.log(2 * np_.pi)


def _mixture_inputs(rng: np.random.Generator) -> tuple[dict, dict]:
    n, dim, k = 300, 2, 5
    centres = rng.normal(0, 3, (k, dim))
    x = centres[rng.integers(0, k, n)] + rng.normal(size=(n, dim))
    params = {
        "logits": np.zeros(k),
        "means": rng.normal(0, 2, (k, dim)),
        "log_scales": np.zeros((k, dim)),
    }
    return params, {"x": x}


@program(
    "mixture", "Gaussian mixture log-likelihood, 300 points, 5 diagonal components", _mixture_inputs
)
def _mixture_loss(np_: Any, sp_: Any, p: dict, d: dict) -> Any:
    x = d["x"]
    log_w = p["logits"] - sp_.logsumexp(p["logits"])
    z = (x[:, None, :] - p["means"][None, :, :]) / np_.exp(p["log_scales"])[None, :, :]
    log_norm = np_.sum(-0.5 * z**2 - p["log_scales"] - 0.5 * np_.log(2 * np_.pi), axis=2)
    return -np_.sum(sp_.logsumexp(log_w + log_norm, axis=1))


def _logreg_inputs(rng: np.random.Generator) -> tuple[dict, dict]:
    n, dim = 500, 30
    x = rng.normal(size=(n, dim))
    w_true = rng.normal(size=dim)
    y = np.where(x @ w_true + rng.normal(size=n) > 0, 1.0, -1.0)
    return {"w": np.zeros(dim), "b": np.array(0.0)}, {"x": x, "y": y}


@program("logreg", "logistic regression, 500 x 30, logaddexp loss + L2", _logreg_inputs)
def _logreg_loss(np_: Any, sp_: Any, p: dict, d: dict) -> Any:
    margins = d["y"] * (d["x"] @ p["w"] + p["b"])
    return np_.mean(np_.logaddexp(0.0, -margins)) + 0.01 * np_.sum(p["w"] ** 2)


def _bbvi_inputs(rng: np.random.Generator) -> tuple[dict, dict]:
    n, dim, samples = 100, 10, 32
    x = rng.normal(size=(n, dim))
    y = (x @ rng.normal(size=dim) + rng.normal(size=n) > 0).astype(float)
    params = {"mean": np.zeros(dim), "log_std": -np.ones(dim)}
    return params, {"x": x, "y": y, "eps": rng.normal(size=(samples, dim))}


@program("bbvi", "black-box VI, Bayesian logistic regression, 32 fixed samples, 10-d", _bbvi_inputs)
def _bbvi_loss(np_: Any, sp_: Any, p: dict, d: dict) -> Any:
    w = p["mean"] + np_.exp(p["log_std"]) * d["eps"]  # (samples, dim)
    logits = w @ d["x"].T  # (samples, n)
    log_lik = np_.sum(d["y"] * logits - np_.logaddexp(0.0, logits), axis=1)
    log_prior = -0.5 * np_.sum(w**2, axis=1)
    entropy = np_.sum(p["log_std"])
    return -(np_.mean(log_lik + log_prior) + entropy)


def _hmm_inputs(rng: np.random.Generator) -> tuple[dict, dict]:
    states, steps = 6, 80
    params = {
        "init": np.zeros(states),
        "trans": rng.normal(0, 0.1, (states, states)),
        "means": np.linspace(-2, 2, states),
    }
    return params, {"obs": rng.normal(0, 1.5, steps)}


@program(
    "hmm", "HMM forward algorithm, 6 states, 80 Gaussian observations (logsumexp)", _hmm_inputs
)
def _hmm_loss(np_: Any, sp_: Any, p: dict, d: dict) -> Any:
    log_a = p["trans"] - sp_.logsumexp(p["trans"], axis=1, keepdims=True)
    log_b = -0.5 * (d["obs"][:, None] - p["means"][None, :]) ** 2  # (steps, states)
    alpha = p["init"] - sp_.logsumexp(p["init"]) + log_b[0]
    for t in range(1, log_b.shape[0]):
        alpha = sp_.logsumexp(alpha[:, None] + log_a, axis=0) + log_b[t]
    return -sp_.logsumexp(alpha)


# --------------------------------------------------------------------------------------------------
# Simulation
# --------------------------------------------------------------------------------------------------


def _fluid_inputs(rng: np.random.Generator) -> tuple[dict, dict]:
    n = 24
    ii, jj = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    params = {"vx": 0.3 * rng.normal(size=(n, n)), "vy": 0.3 * rng.normal(size=(n, n))}
    density = np.exp(-((ii - n / 3) ** 2 + (jj - n / 3) ** 2) / 8.0)
    target = np.exp(-((ii - 2 * n / 3) ** 2 + (jj - n / 2) ** 2) / 8.0)
    return params, {
        "density": density,
        "target": target,
        "steps": 25,
        "rows": ii.astype(float),
        "cols": jj.astype(float),
    }


def _advect(np_: Any, f: Any, vx: Any, vy: Any, rows: Any, cols: Any) -> Any:
    """``f`` carried back along (vx, vy): bilinear interpolation at the departure points on a
    periodic grid (four gathers of the flattened field)."""
    n = f.shape[0]
    src_r = rows - vy
    src_c = cols - vx
    r0f, c0f = np_.floor(src_r), np_.floor(src_c)
    wr, wc = src_r - r0f, src_c - c0f
    r0 = np_.mod(r0f.astype(int), n)
    c0 = np_.mod(c0f.astype(int), n)
    r1, c1 = np_.mod(r0 + 1, n), np_.mod(c0 + 1, n)
    flat = np_.ravel(f)
    return (1 - wr) * ((1 - wc) * flat[r0 * n + c0] + wc * flat[r0 * n + c1]) + wr * (
        (1 - wc) * flat[r1 * n + c0] + wc * flat[r1 * n + c1]
    )


def _diffuse(np_: Any, f: Any, rate: float) -> Any:
    lap = (
        np_.roll(f, 1, axis=0)
        + np_.roll(f, -1, axis=0)
        + np_.roll(f, 1, axis=1)
        + np_.roll(f, -1, axis=1)
        - 4 * f
    )
    return f + rate * lap


@program(
    "fluid",
    "2-d advection-diffusion on a 24x24 periodic grid, 25 steps (roll, gathers)",
    _fluid_inputs,
)
def _fluid_loss(np_: Any, sp_: Any, p: dict, d: dict) -> Any:
    f, vx, vy = d["density"], p["vx"], p["vy"]
    rows, cols = d["rows"], d["cols"]
    for _ in range(d["steps"]):
        f = _diffuse(np_, _advect(np_, f, vx, vy, rows, cols), 0.1)
        vx, vy = (
            _diffuse(np_, _advect(np_, vx, vx, vy, rows, cols), 0.05),
            _diffuse(np_, _advect(np_, vy, vx, vy, rows, cols), 0.05),
        )
    return np_.sum((f - d["target"]) ** 2)
