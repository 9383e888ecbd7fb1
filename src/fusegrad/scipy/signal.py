"""``scipy.signal.convolve``/``correlate``, ``fftconvolve``/``oaconvolve`` and ``lfilter``/
``lfilter_zi``/``filtfilt``/``sosfilt`` for traced values (N-D, every ``mode``; ``axes`` for the
FFT ones).

``convolve`` has a rule of its own: with ``y = crop(full)``, the crop centred as SciPy's
(``start = (full - out) // 2`` per axis), ``ȳ`` is padded back to the full shape and
``ā = convolve(ȳ, flip(b), 'valid')``, ``b̄ = convolve(ȳ, flip(a), 'valid')`` (no conjugates:
convolution is bilinear, JAX's convention). ``correlate(a, b)`` is ``convolve(a, conj(flip(b)))``,
as in SciPy. Both pullback and forward rule are convolutions again, so every order works.
``method`` is passed to SciPy (direct or FFT give the same values up to rounding).
``fftconvolve`` and ``oaconvolve`` follow SciPy's ``fftconvolve`` step by step with ``np.fft``
transforms, which have rules; overlap-add only saves time, so a traced ``oaconvolve`` is one
FFT product too. ``lfilter`` has a rule: from ``A(z) y = B(z) x``, ``dy = (1/A)(dB x - dA y) +
(B/A) dx``, and its adjoint is the same filter run backwards in time; an initial state ``zi`` adds
to the first outputs and is filtered by ``1/A`` (the final state is read off the last samples);
``filtfilt`` and ``sosfilt`` are ``lfilter`` calls.

Example::

    >>> import numpy as np, fusegrad as fg
    >>> import fusegrad.scipy.signal as fss
    >>> fg.grad(lambda a: np.sum(fss.convolve(a, np.array([1.0, 2.0]))))(np.ones(3))
    array([3., 3., 3.])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.fft as _sf
import scipy.signal as _ss

from ..rules import registry
from ..rules.common import params, project
from ..rules.registry import register_frule, register_rrule
from ..tangents import AbstractZero, ZeroTangent, unthunk
from . import _dispatch
from .fft import _shape_and_axes

_convolve = _dispatch.original(_ss.convolve)
_correlate = _dispatch.original(_ss.correlate)
_fftconvolve = _dispatch.original(_ss.fftconvolve)
_oaconvolve = _dispatch.original(_ss.oaconvolve)


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


def fftconvolve(in1: Any, in2: Any, mode: str = "full", axes: Any = None) -> Any:
    """``scipy.signal.fftconvolve``: ``convolve`` by FFTs along ``axes`` (all by default; the
    other axes broadcast).

    >>> fftconvolve(np.array([1.0, 2.0]), np.array([1.0, 1.0])).round(12)
    array([1., 3., 2.])
    """
    if not _dispatch.traced((in1, in2), {}):
        return _fftconvolve(in1, in2, mode=mode, axes=axes)
    return _fft_convolution(in1, in2, mode, axes)


def oaconvolve(in1: Any, in2: Any, mode: str = "full", axes: Any = None) -> Any:
    """``scipy.signal.oaconvolve``: ``convolve`` by overlap-add. On traced values one FFT
    product (``fftconvolve``): the same values, and overlap-add only saves time.

    >>> oaconvolve(np.array([1.0, 2.0]), np.array([1.0, 1.0])).round(12)
    array([1., 3., 2.])
    """
    if not _dispatch.traced((in1, in2), {}):
        return _oaconvolve(in1, in2, mode=mode, axes=axes)
    return _fft_convolution(in1, in2, mode, axes)


def _fft_convolution(in1: Any, in2: Any, mode: str, axes: Any) -> Any:
    """SciPy's ``fftconvolve`` written with ``np.fft`` transforms (which have rules)."""
    in1, in2 = (a if _dispatch.traced((a,), {}) else np.asarray(a) for a in (in1, in2))
    if np.ndim(in1) == np.ndim(in2) == 0:
        return in1 * in2
    if np.ndim(in1) != np.ndim(in2):
        raise ValueError("in1 and in2 should have the same dimensionality")
    if np.size(in1) == 0 or np.size(in2) == 0:
        return np.asarray([])
    if mode not in ("full", "same", "valid"):
        raise ValueError("acceptable mode flags are 'valid', 'same', or 'full'")
    in1, in2, axes = _convolution_axes(in1, in2, mode, axes)
    s1, s2 = np.shape(in1), np.shape(in2)
    full = [s1[i] + s2[i] - 1 if i in axes else max(s1[i], s2[i]) for i in range(len(s1))]
    out = _spectral_product(in1, in2, axes, full)
    if mode == "full":
        return out
    if mode == "same":
        return _centred(out, s1)
    valid = [s1[i] - s2[i] + 1 if i in axes else np.shape(out)[i] for i in range(len(s1))]
    return _centred(out, valid)


def _convolution_axes(in1: Any, in2: Any, mode: str, axes: Any) -> tuple[Any, Any, list[int]]:
    """SciPy's reading of ``axes``: the axes to transform (not those of length 1 in either
    input, which broadcast), the others checked for broadcasting, and the inputs swapped when
    'valid' needs the larger first."""
    s1, s2 = np.shape(in1), np.shape(in2)
    if axes is not None and not np.size(axes):
        raise ValueError("when provided, axes cannot be empty")
    _, given = _shape_and_axes(in1, None, axes)
    axes = [a for a in given if s1[a] != 1 and s2[a] != 1]
    others = [a for a in range(len(s1)) if a not in axes]
    if not all(s1[a] == s2[a] or 1 in (s1[a], s2[a]) for a in others):
        raise ValueError(f"incompatible shapes for in1 and in2: {s1} and {s2}")
    if mode == "valid":
        first_larger = all(s1[a] >= s2[a] for a in axes)
        if not (first_larger or all(s2[a] >= s1[a] for a in axes)):
            raise ValueError(
                "For 'valid' mode, one must be at least as large as the other in every dimension"
            )
        if not first_larger:
            return in2, in1, axes
    return in1, in2, axes


def _spectral_product(in1: Any, in2: Any, axes: list[int], shape: list[int]) -> Any:
    """The full convolution: inverse FFT of the product of the inputs' FFTs, each padded to a
    fast length (as SciPy), cropped to ``shape``."""
    if not axes:
        return in1 * in2
    real = not (np.iscomplexobj(in1) or np.iscomplexobj(in2))
    lengths = [_sf.next_fast_len(shape[a], real) for a in axes]
    forward, inverse = (np.fft.rfftn, np.fft.irfftn) if real else (np.fft.fftn, np.fft.ifftn)
    spectrum = forward(in1, lengths, axes) * forward(in2, lengths, axes)
    out = inverse(spectrum, lengths, axes)
    return out[tuple(slice(n) for n in shape)]


def _centred(a: Any, shape: list[int]) -> Any:
    """The centre ``shape`` of ``a`` (SciPy's ``_centered``)."""
    starts = [(n - m) // 2 for n, m in zip(np.shape(a), shape)]
    return a[tuple(slice(s, s + m) for s, m in zip(starts, shape))]


# --------------------------------------------------------------------------------------------------
# lfilter: A(z) y = B(z) x, so dy = (1/A)(dB x - dA y) + (B/A) dx
# --------------------------------------------------------------------------------------------------

_lfilter = _dispatch.original(_ss.lfilter)


def _filt(b: Any, a: Any, x: Any, axis: int) -> Any:
    """SciPy's lfilter (the wrapper, so that an outer trace records it)."""
    return _ss.lfilter(b, a, x, axis=axis)


def _reversed_filt(b: Any, a: Any, dy: Any, axis: int) -> Any:
    """The adjoint of ``lfilter(b, a, ·)`` from rest: the filter run backwards in time."""
    return np.flip(_filt(b, a, np.flip(dy, axis), axis), axis)


def _lagged_sums(w: Any, v: Any, taps: int, axis: int) -> Any:
    """``[Σ_n w[n] v[n - k] for k < taps]`` along ``axis``, summed over the other axes too."""
    w, v = np.moveaxis(w, axis, -1), np.moveaxis(v, axis, -1)
    n = np.shape(v)[-1]
    return np.stack([np.sum(w[..., k:] * v[..., : n - k]) for k in range(min(taps, n))]
                    + [np.zeros((), np.result_type(w, v))] * max(taps - n, 0))  # fmt: skip


@register_rrule(_lfilter)
def _lfilter_rule(b, a, x, *args, **kwargs):
    """lfilter: x̄ = reversed B/A of ȳ; with w = reversed 1/A of ȳ, b̄ₖ = Σ w[n] x[n-k] and
    āₖ = -Σ w[n] y[n-k] (no conjugates: linear in each, JAX's convention)."""
    axis = params(args, kwargs, axis=-1, zi=None)["axis"]
    y = _filt(b, a, x, axis)

    def pullback(dy):
        w = _reversed_filt(np.ones(1), a, dy, axis)
        gb = _lagged_sums(w, x, np.shape(b)[0], axis)
        ga = -_lagged_sums(w, y, np.shape(a)[0], axis)
        gx = _reversed_filt(b, a, dy, axis)
        return (project(gb, b), project(ga, a), project(gx, x), *(ZeroTangent() for _ in args))

    return y, pullback


@register_frule(_lfilter)
def _lfilter_frule(tangents, b, a, x, *args, **kwargs):
    """lfilter: ẏ = lfilter(1, a, lfilter(ḃ, 1, x) - lfilter(ȧ, 1, y)) + lfilter(b, a, ẋ)."""
    axis = params(args, kwargs, axis=-1, zi=None)["axis"]
    y = _filt(b, a, x, axis)
    tb, ta, tx = (None if isinstance(t, AbstractZero) else unthunk(t) for t in tangents[:3])
    one = np.ones(1)
    drive: Any = 0.0
    if tb is not None:
        drive = drive + _filt(tb, one, x, axis)
    if ta is not None:
        drive = drive - _filt(ta, one, y, axis)
    dot: Any = ZeroTangent() if tb is None and ta is None else _filt(one, a, drive, axis)
    if tx is not None:
        term = _filt(b, a, tx, axis)
        dot = term if isinstance(dot, AbstractZero) else dot + term
    return y, dot


_lfilter_frule.lazy = False  # type: ignore[attr-defined]


def lfilter(b: Any, a: Any, x: Any, axis: int = -1, zi: Any = None) -> Any:
    """``scipy.signal.lfilter``: the IIR filter ``a[0] y[n] = Σ b[k] x[n-k] - Σ_{k≥1} a[k]
    y[n-k]`` along ``axis``, from rest, differentiable in ``b``, ``a`` and ``x``.

    >>> lfilter(np.array([1.0]), np.array([1.0, -0.5]), np.array([1.0, 0.0, 0.0]))
    array([1.  , 0.5 , 0.25])
    """
    if not _dispatch.traced((b, a, x, zi), {}):
        return _lfilter(b, a, x, axis=axis, zi=zi)
    b, a = (v if _dispatch.traced((v,), {}) else np.asarray(v) for v in (b, a))
    if np.ndim(b) != 1 or np.ndim(a) != 1:
        return _lfilter(np.asarray(b), np.asarray(a), np.zeros(1))  # SciPy's own error
    if not _dispatch.traced((x,), {}):
        x = np.asarray(x)
    _ensure_lfilter_registered()
    y = registry.dispatch(_lfilter, (b, a, x), {"axis": axis})
    if zi is None:
        return y
    return _with_state(b, a, x, y, zi, axis)


def _with_state(b: Any, a: Any, x: Any, y: Any, zi: Any, axis: int) -> tuple:
    """``lfilter(b, a, x, zi=zi)`` from the filter from rest ``y``: the state adds ``zi`` to the
    first outputs and is filtered by ``1/A`` from there (transposed direct form II), and the
    final state is read off the last samples (both linear, so both differentiate)."""
    m = max(np.shape(a)[0], np.shape(b)[0]) - 1
    n = np.shape(x)[axis]
    if np.shape(zi)[axis] != m:
        return _lfilter(np.ones(np.shape(b)), np.ones(np.shape(a)), np.zeros(np.shape(x)),
                        axis=axis, zi=np.zeros(np.shape(zi)))  # SciPy's own shape error # fmt: skip
    if n < m:
        raise NotImplementedError(
            f"scipy.signal.lfilter with zi on traced values needs at least {m} samples along "
            f"the axis (the filter's order), got {n}"
        )
    zi_m = np.moveaxis(zi, axis, -1)
    pad = np.zeros(np.shape(zi_m)[:-1] + (n - m,))
    inject = np.moveaxis(np.concatenate([zi_m, pad], axis=-1), -1, axis)
    y = y + a[0] * _filt(np.ones(1), a, inject, axis)
    bn = np.concatenate([b, np.zeros(m + 1 - np.shape(b)[0])]) / a[0]
    an = np.concatenate([a, np.zeros(m + 1 - np.shape(a)[0])]) / a[0]
    xm, ym = np.moveaxis(x, axis, -1), np.moveaxis(y, axis, -1)
    zf = [
        sum(bn[j] * xm[..., n - j + k] - an[j] * ym[..., n - j + k] for j in range(k + 1, m + 1))
        for k in range(m)
    ]
    return y, np.moveaxis(np.stack(zf, axis=-1), -1, axis)


def lfilter_zi(b: Any, a: Any) -> Any:
    """``scipy.signal.lfilter_zi``: the initial state of a step response's steady state,
    ``(I - A) zi = B`` with ``A`` the companion matrix of ``a``.

    >>> lfilter_zi(np.array([0.5]), np.array([1.0, -0.5]))
    array([0.5])
    """
    if not _dispatch.traced((b, a), {}):
        return _dispatch.original(_ss.lfilter_zi)(b, a)
    b, a = b / a[0], a / a[0]
    n = max(np.shape(a)[0], np.shape(b)[0])
    a = np.concatenate([a, np.zeros(n - np.shape(a)[0])])
    b = np.concatenate([b, np.zeros(n - np.shape(b)[0])])
    # companion(a).T: first column -a[1:], ones above the diagonal
    first_column = np.concatenate([np.reshape(-a[1:], (-1, 1)), np.zeros((n - 1, n - 2))], 1)
    i_minus_a = np.eye(n - 1) - (first_column + np.eye(n - 1, k=1))
    return np.linalg.solve(i_minus_a, b[1:] - a[1:] * b[0])


def filtfilt(b: Any, a: Any, x: Any, axis: int = -1, padtype: Any = "odd", padlen: Any = None,
             method: str = "pad", irlen: Any = None) -> Any:  # fmt: skip
    """``scipy.signal.filtfilt``: the filter forwards then backwards, from the steady state of
    the padded ends (``method='pad'``, every ``padtype``), so zero phase.

    >>> float(filtfilt(np.array([0.5, 0.5]), np.array([1.0]), np.ones(8))[3])
    1.0
    """
    if not _dispatch.traced((b, a, x), {}):
        plain = _dispatch.original(_ss.filtfilt)
        return plain(b, a, x, axis=axis, padtype=padtype, padlen=padlen, method=method,
                     irlen=irlen)  # fmt: skip
    if method != "pad":
        raise NotImplementedError(
            "scipy.signal.filtfilt on traced values: method='pad' only (Gustafsson's method "
            "solves for its initial conditions by least squares)"
        )
    ntaps = max(np.shape(a)[0], np.shape(b)[0])
    edge = ntaps * 3 if padlen is None else padlen
    if padtype is None:
        edge = 0
    n = np.shape(x)[axis]
    if n <= edge:
        raise ValueError(f"The length of the input vector x must be greater than padlen, "
                         f"which is {edge}.")  # fmt: skip
    ext = _extend(x, edge, padtype, axis) if edge > 0 else x
    zi = lfilter_zi(b, a)
    shape = [1] * np.ndim(x)
    shape[axis] = np.shape(zi)[0]
    zi = np.reshape(zi, shape)
    first = np.take(ext, [0], axis=axis)
    y, _ = lfilter(b, a, ext, axis=axis, zi=zi * first)
    last = np.take(y, [np.shape(y)[axis] - 1], axis=axis)
    y, _ = lfilter(b, a, np.flip(y, axis), axis=axis, zi=zi * last)
    y = np.flip(y, axis)
    if edge > 0:
        y = np.take(y, np.arange(edge, np.shape(y)[axis] - edge), axis=axis)
    return y


def _extend(x: Any, n: int, padtype: str, axis: int) -> Any:
    """SciPy's ``odd_ext``/``even_ext``/``const_ext`` of ``x`` by ``n`` along ``axis``."""
    m = np.shape(x)[axis]
    left, right = np.take(x, [0], axis=axis), np.take(x, [m - 1], axis=axis)
    inner_left = np.take(x, np.arange(n, 0, -1), axis=axis)
    inner_right = np.take(x, np.arange(m - 2, m - n - 2, -1), axis=axis)
    if padtype == "odd":
        parts = [2 * left - inner_left, x, 2 * right - inner_right]
    elif padtype == "even":
        parts = [inner_left, x, inner_right]
    elif padtype == "constant":
        parts = [np.repeat(left, n, axis=axis), x, np.repeat(right, n, axis=axis)]
    else:
        raise ValueError(f"Unknown value '{padtype}' given to padtype. padtype must be 'even', "
                         "'odd', 'constant', or None.")  # fmt: skip
    return np.concatenate(parts, axis=axis)


def _ensure_lfilter_registered() -> None:
    if _lfilter not in registry.RRULES:
        register_rrule(_lfilter)(_lfilter_rule)
    if _lfilter not in registry.FRULES:
        register_frule(_lfilter)(_lfilter_frule)


def sosfilt(sos: Any, x: Any, axis: int = -1, zi: Any = None) -> Any:
    """``scipy.signal.sosfilt``: second-order sections in cascade, each an ``lfilter`` (from its
    own initial state ``zi[k]`` when ``zi`` is given: then ``(y, zf)``).

    >>> sosfilt(np.array([[1.0, 0, 0, 1, -0.5, 0]]), np.array([1.0, 0.0, 0.0]))
    array([1.  , 0.5 , 0.25])
    """
    if not _dispatch.traced((sos, x, zi), {}):
        return _dispatch.original(_ss.sosfilt)(sos, x, axis=axis, zi=zi)
    if np.ndim(sos) != 2 or np.shape(sos)[1] != 6:
        raise ValueError("sos array must be shape (n_sections, 6)")
    if not _dispatch.traced((sos,), {}) and not np.all(np.asarray(sos)[:, 3] == 1):
        raise ValueError("sos[:, 3] should be all ones")  # SciPy's check (a traced sos: a[0])
    y = x
    if zi is None:
        for k in range(np.shape(sos)[0]):
            y = lfilter(sos[k, :3], sos[k, 3:], y, axis=axis)
        return y
    final = []  # each section from its own state zi[k], as SciPy's cascade
    for k in range(np.shape(sos)[0]):
        y, zf = lfilter(sos[k, :3], sos[k, 3:], y, axis=axis, zi=zi[k])
        final.append(zf)
    return y, np.stack(final)


# --------------------------------------------------------------------------------------------------
# convolve2d, correlate2d: the input extended by its boundary, then a 'valid' convolve
# --------------------------------------------------------------------------------------------------

_convolve2d = _dispatch.original(_ss.convolve2d)
_correlate2d = _dispatch.original(_ss.correlate2d)
_PAD_MODES = {"fill": "constant", "wrap": "wrap", "symm": "symmetric"}
_BOUNDARY_NAMES = {"fill": "fill", "pad": "fill", "wrap": "wrap", "circular": "wrap",
                   "symm": "symm", "symmetric": "symm"}  # fmt: skip


def _two_d(in1: Any, in2: Any, name: str) -> tuple[Any, Any]:
    in1, in2 = (a if _dispatch.traced((a,), {}) else np.asarray(a) for a in (in1, in2))
    if not np.ndim(in1) == np.ndim(in2) == 2:
        raise ValueError(f"{name} inputs must both be 2-D arrays")
    return in1, in2


def _conv2d(in1: Any, in2: Any, mode: str, boundary: str, fillvalue: Any,
            correlation: bool = False) -> Any:  # fmt: skip
    """SciPy's ``convolve2d`` on arrays already swapped for 'valid' (``correlation``: the
    'same' window of ``correlate2d``, which starts at ``m // 2`` of the full output rather than
    ``(m - 1) // 2``)."""
    if mode not in ("full", "same", "valid"):
        raise ValueError("Acceptable mode flags are 'valid', 'same', or 'full'.")
    if boundary not in _BOUNDARY_NAMES:
        raise ValueError("Acceptable boundary flags are 'fill', 'circular' (or 'wrap'), and "
                         "'symmetric' (or 'symm').")  # fmt: skip
    if mode == "valid":
        return convolve(in1, in2, "valid", "direct")
    m = np.shape(in2)
    widths = [(k - 1, k - 1) for k in m]
    extended = _dispatch.padded(in1, widths, _PAD_MODES[_BOUNDARY_NAMES[boundary]], fillvalue)
    full = convolve(extended, in2, "valid", "direct")
    if mode == "full":
        return full
    n = np.shape(in1)
    start = [k // 2 if correlation else (k - 1) // 2 for k in m]
    return full[start[0] : start[0] + n[0], start[1] : start[1] + n[1]]


def _swap_2d(mode: str, in1: Any, in2: Any) -> bool:
    """SciPy's ``_inputs_swap_needed`` for 2-D 'valid' (its error when neither is larger)."""
    if mode != "valid":
        return False
    s1, s2 = np.shape(in1), np.shape(in2)
    ok1 = all(a >= b for a, b in zip(s1, s2))
    ok2 = all(b >= a for a, b in zip(s1, s2))
    if not (ok1 or ok2):
        raise ValueError("For 'valid' mode, one must be at least as large as the other in "
                         "every dimension")  # fmt: skip
    return not ok1


def convolve2d(in1: Any, in2: Any, mode: str = "full", boundary: str = "fill",
               fillvalue: Any = 0) -> Any:  # fmt: skip
    """``scipy.signal.convolve2d``: every ``mode`` and ``boundary`` ('fill' with any
    ``fillvalue``, 'wrap', 'symm'); bilinear, differentiable in both inputs (and ``fillvalue``).

    >>> convolve2d(np.ones((2, 2)), np.ones((1, 2)))
    array([[1., 2., 1.],
           [1., 2., 1.]])
    """
    if not _dispatch.traced((in1, in2, fillvalue), {}):
        return _convolve2d(in1, in2, mode=mode, boundary=boundary, fillvalue=fillvalue)
    in1, in2 = _two_d(in1, in2, "convolve2d")
    if _swap_2d(mode, in1, in2):
        in1, in2 = in2, in1
    return _conv2d(in1, in2, mode, boundary, fillvalue)


def correlate2d(in1: Any, in2: Any, mode: str = "full", boundary: str = "fill",
                fillvalue: Any = 0) -> Any:  # fmt: skip
    """``scipy.signal.correlate2d``: ``convolve2d(in1, flip(conj(in2)))`` (for 'valid' with the
    larger ``in2``, SciPy's swap: the reversed correlation of ``in2`` with ``in1``).

    >>> correlate2d(np.ones((2, 2)), np.array([[1.0, 2.0]]))
    array([[2., 3., 1.],
           [2., 3., 1.]])
    """
    if not _dispatch.traced((in1, in2, fillvalue), {}):
        return _correlate2d(in1, in2, mode=mode, boundary=boundary, fillvalue=fillvalue)
    in1, in2 = _two_d(in1, in2, "correlate2d")
    if _swap_2d(mode, in1, in2):
        return np.flip(_conv2d(in2, np.flip(np.conj(in1)), mode, boundary, fillvalue, True))
    return _conv2d(in1, np.flip(np.conj(in2)), mode, boundary, fillvalue, True)


def _patch(module: Any) -> None:
    """Install the wrappers in ``scipy.signal`` (called by ``fusegrad.scipy``)."""
    for name in ("convolve", "correlate", "fftconvolve", "oaconvolve", "lfilter", "sosfilt",
                 "lfilter_zi", "filtfilt", "convolve2d", "correlate2d"):  # fmt: skip
        _dispatch.patch_attr(module, name, globals()[name])


_dispatch.loaded(__name__)
