"""``grad`` and ``jit(grad)`` on ordinary programs in autograd's style
(``fusegrad.bench.programs``: MLPs, RNN, LSTM, GRU, attention, a convnet, a VAE, a Gaussian
process, a mixture, logistic regression, black-box VI, an HMM, a fluid simulation; data read
from a closure). ``grad`` against finite differences and, when autograd is installed, against
autograd's; ``jit(grad)`` against ``grad`` on new parameters at every call, past the hot
recompile. Both engines (numba under ``-m slow``), with the small-array path as users have it
and with every array lazy (the fused kernels at any size). A jit replay once gave the Gaussian
process a wrong length-scale gradient here."""

import warnings

import numpy as np
import pytest
import scipy.special

import fusegrad as fg
from fusegrad.bench.programs import PROGRAMS, SEED
from fusegrad.lazy import replay
from fusegrad.testing import check_grads

NAMES = sorted(PROGRAMS)
# piecewise smooth: finite differences straddle a kink (checked against autograd instead)
KINKED = {"conv": "relu", "fluid": "the advection's floor and gathers"}


def _setup(name, seed=SEED):
    prog = PROGRAMS[name]
    params, data = prog.make(np.random.default_rng(seed))
    return prog, params, data


def _nudged(params, rng):
    """The parameters moved a little (a new point for each call of a replay)."""
    return {k: v + 0.05 * rng.standard_normal(np.shape(v)) for k, v in params.items()}


def _close(got, want, rtol=1e-9, atol=1e-11):
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=atol, err_msg=k)


@pytest.mark.parametrize("name", sorted(set(NAMES) - set(KINKED)))
def test_grad_matches_finite_differences(name, engine, path):
    prog, params, data = _setup(name)
    check_grads(lambda p: prog.loss(np, scipy.special, p, data))(params)


@pytest.mark.parametrize("name", NAMES)
def test_jit_grad_equals_grad_on_new_parameters_at_every_call(name, engine, path):
    prog, params, data = _setup(name)
    g = fg.grad(lambda p: prog.loss(np, scipy.special, p, data))
    jg = fg.jit(g)
    rng = np.random.default_rng(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a program that cannot be replayed says so once
        for _ in range(replay.HOT_REPLAYS + 2):
            params = _nudged(params, rng)
            _close(jg(params), g(params))


@pytest.mark.parametrize("name", NAMES)
def test_grad_equals_autograds(name, path):
    autograd = pytest.importorskip("autograd")
    import autograd.numpy as anp
    import autograd.scipy.special as asp

    prog, params, data = _setup(name)
    want = autograd.grad(lambda p: prog.loss(anp, asp, p, data))(params)
    _close(fg.grad(lambda p: prog.loss(np, scipy.special, p, data))(params), want)
