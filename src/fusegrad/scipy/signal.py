"""``scipy.signal.convolve``/``correlate`` for traced values (N-D, every ``mode``).

``convolve`` has a rule of its own: with ``y = crop(full)``, the crop centred as SciPy's
(``start = (full - out) // 2`` per axis), ``ȳ`` is padded back to the full shape and
``ā = convolve(ȳ, flip(b), 'valid')``, ``b̄ = convolve(ȳ, flip(a), 'valid')`` (no conjugates:
convolution is bilinear, JAX's convention). ``correlate(a, b)`` is ``convolve(a, conj(flip(b)))``,
as in SciPy. Both pullback and forward rule are convolutions again, so every order works.
``method`` is passed to SciPy (direct or FFT give the same values up to rounding).

Example::

    >>> import numpy as np, fusegrad as fg
    >>> import fusegrad.scipy.signal as fss
    >>> fg.grad(lambda a: np.sum(fss.convolve(a, np.array([1.0, 2.0]))))(np.ones(3))
    array([3., 3., 3.])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.signal as _ss

from ..rules import registry
from ..rules.common import params, project
from ..rules.registry import register_frule, register_rrule
from ..tangents import AbstractZero, ZeroTangent, unthunk
from . import _dispatch

_convolve = _dispatch.original(_ss.convolve)
_correlate = _dispatch.original(_ss.correlate)


def _mode(args: tuple, kwargs: dict) -> tuple[str, str]:
    p = params(args, kwargs, mode="full", method="auto")
    return p["mode"], p["method"]


def _pad_to_full(dy: Any, a: Any, b: Any) -> Any:
    full = [na + nb - 1 for na, nb in zip(np.shape(a), np.shape(b))]
    out = np.shape(dy)
    widths = [((f - o) // 2, f - o - (f - o) // 2) for f, o in zip(full, out)]
    return dy if all(w == (0, 0) for w in widths) else np.pad(dy, widths)


def _conv(a: Any, b: Any, mode: str, method: str) -> Any:
    """SciPy's convolve (the wrapper, so that an outer trace records it)."""
    return _ss.convolve(a, b, mode=mode, method=method)


@register_rrule(_convolve)
def _convolve_rule(a, b, *args, **kwargs):
    """convolve: ā = convolve(pad(ȳ), flip(b), 'valid'), b̄ = convolve(pad(ȳ), flip(a), 'valid')."""
    mode, method = _mode(args, kwargs)
    y = _conv(a, b, mode, method)  # an argument may be traced by an outer trace

    def pullback(dy):
        full = _pad_to_full(dy, a, b)
        ga = _conv(full, np.flip(b), "valid", method)
        gb = _conv(full, np.flip(a), "valid", method)
        return (project(ga, a), project(gb, b), *(ZeroTangent() for _ in args))

    return y, pullback


@register_frule(_convolve)
def _convolve_frule(tangents, a, b, *args, **kwargs):
    """convolve: ẏ = convolve(ȧ, b) + convolve(a, ḃ) (bilinear)."""
    mode, method = _mode(args, kwargs)
    y = _conv(a, b, mode, method)
    ta, tb = tangents[0], tangents[1]
    dot: Any = ZeroTangent()
    if not isinstance(ta, AbstractZero):
        dot = _conv(unthunk(ta), b, mode, method)
    if not isinstance(tb, AbstractZero):
        term = _conv(a, unthunk(tb), mode, method)
        dot = term if isinstance(dot, AbstractZero) else dot + term
    return y, dot


_convolve_frule.lazy = False  # type: ignore[attr-defined]


def _ensure_registered() -> None:
    """The rules again if the tables lost them (a test restoring saved tables)."""
    if _convolve not in registry.RRULES:
        register_rrule(_convolve)(_convolve_rule)
    if _convolve not in registry.FRULES:
        register_frule(_convolve)(_convolve_frule)


def convolve(in1: Any, in2: Any, mode: str = "full", method: str = "auto") -> Any:
    """``scipy.signal.convolve``: the N-D convolution of ``in1`` and ``in2``.

    >>> convolve(np.array([1.0, 2.0]), np.array([1.0, 1.0]))
    array([1., 3., 2.])
    """
    args, kw = (in1, in2), {"mode": mode, "method": method}
    if not _dispatch.traced(args, {}):
        return _convolve(*args, **kw)
    if mode == "valid" and any(n1 < n2 for n1, n2 in zip(np.shape(in1), np.shape(in2))):
        args = (in2, in1)  # as SciPy: 'valid' is of the larger input
    _ensure_registered()
    return registry.dispatch(_convolve, args, kw)


def correlate(in1: Any, in2: Any, mode: str = "full", method: str = "auto") -> Any:
    """``scipy.signal.correlate``: ``convolve(in1, conj(flip(in2)))``.

    >>> correlate(np.array([1.0, 2.0]), np.array([1.0, 1.0]))
    array([1., 3., 2.])
    """
    if not _dispatch.traced((in1, in2), {}):
        return _correlate(in1, in2, mode=mode, method=method)
    if mode == "valid" and any(n1 < n2 for n1, n2 in zip(np.shape(in1), np.shape(in2))):
        # SciPy swaps the inputs here and reverses the result.
        return np.conj(np.flip(convolve(in2, np.conj(np.flip(in1)), mode, method)))
    return convolve(in1, np.conj(np.flip(in2)), mode, method)


def _patch(module: Any) -> None:
    """Install the wrappers in ``scipy.signal`` (called by ``fusegrad.scipy``)."""
    for name in ("convolve", "correlate"):
        _dispatch.patch_attr(module, name, globals()[name])


_dispatch.loaded(__name__)
