"""``scipy.ndimage``'s linear filters for traced values: ``correlate``/``convolve`` (N-D and
``1d``), ``gaussian_filter``/``gaussian_filter1d`` and ``uniform_filter``/``uniform_filter1d``.

Each filter is linear in its input: the input is extended past its edges as the boundary
``mode`` says (``np.pad``: ndimage's 'reflect' and 'grid-mirror' are NumPy's 'symmetric',
'mirror' is 'reflect', 'nearest' is 'edge', 'wrap'/'grid-wrap' is 'wrap', 'constant'/
'grid-constant' pads ``cval``), shifted by ``origin``, and correlated with the weights in
``'valid'`` mode (``scipy.signal``'s convolution rule). Both steps have rules, so the pullback
is the adjoint filter with the boundary's transpose (``np.pad``'s pullback folds the padding
back onto the edges), the forward rule the filter itself, and every order works; the weights
are differentiable too. Values are SciPy's up to rounding: ndimage sums in float64 and casts
to the input's type (a float32 image stays float32, and ``gaussian_filter`` rounds after each
axis, as SciPy). The Gaussian kernels are SciPy's own (``sigma``, ``order``, ``truncate`` and
``radius`` are plain numbers: a traced ``sigma`` is refused). ``output`` may be a dtype, not an
array to write into.

Example::

    >>> import numpy as np, fusegrad as fg
    >>> import fusegrad.scipy.ndimage as fnd
    >>> fg.grad(lambda x: fnd.correlate1d(x, [1.0, 2.0, 1.0], mode="constant")[1])(np.ones(3))
    array([1., 2., 1.])
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import scipy.ndimage as _nd
from scipy.ndimage import _filters

from ..rules.special import NoDerivativeError
from . import _dispatch

_ORIGINALS = {
    name: _dispatch.original(getattr(_nd, name))
    for name in (
        "correlate1d",
        "convolve1d",
        "correlate",
        "convolve",
        "gaussian_filter1d",
        "gaussian_filter",
        "uniform_filter1d",
        "uniform_filter",
    )  # fmt: skip
}

# ndimage's boundary modes as np.pad's
_PAD = {"reflect": "symmetric", "grid-mirror": "symmetric", "mirror": "reflect",
        "nearest": "edge", "wrap": "wrap", "grid-wrap": "wrap", "constant": "constant",
        "grid-constant": "constant"}  # fmt: skip


def _pad_mode(mode: Any) -> str:
    if not isinstance(mode, str) or mode not in _PAD:
        raise RuntimeError(f"boundary mode not supported: {mode!r}")
    return _PAD[mode]


def _array(a: Any) -> Any:
    return a if _dispatch.traced((a,), {}) else np.asarray(a)


def _out_dtype(x: Any, output: Any) -> Any:
    """The result's dtype: the input's, or ``output`` given as a dtype."""
    if output is None:
        return x.dtype
    if isinstance(output, np.ndarray):
        raise TypeError(
            "scipy.ndimage on traced values: an `output` array cannot be written into (its "
            "derivative would be lost); pass output=None (or a dtype) and use the returned array"
        )
    return np.dtype(output)


def _cast(y: Any, dtype: Any) -> Any:
    if np.issubdtype(dtype, np.complexfloating) or not np.iscomplexobj(y):
        return y.astype(dtype)
    return y.real.astype(dtype)


def _filter(x: Any, weights: Any, modes: list, cval: Any, origins: list) -> Any:
    """``out[i] = Σₖ w[k] · x_ext[i + k - len(w)//2 - origin]`` on every axis (a correlation,
    no conjugate) in float64, ``x_ext`` the input extended by each axis's mode."""
    x = x if np.issubdtype(x.dtype, np.inexact) else x.astype(np.float64)
    if x.dtype != np.float64 and x.dtype != np.complex128:
        x = x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)
    for axis, (n, mode, origin) in enumerate(zip(np.shape(weights), modes, origins)):
        left = n // 2 + origin
        widths = [(0, 0)] * np.ndim(x)
        widths[axis] = (left, n - 1 - left)
        if n == 1 and origin == 0:
            continue
        x = _dispatch.padded(x, widths, _pad_mode(mode), cval)
    # (imported here: scipy.signal imports scipy.ndimage, whose patch imports this module, so
    # fusegrad.scipy.signal, which needs a complete scipy.signal, cannot be imported above)
    from . import signal as _signal

    # correlate conjugates its second argument: undo that (ndimage conjugates separately)
    return _signal.correlate(x, np.conj(weights), "valid", "direct")


def _check_origin(origin: int, n: int) -> None:
    if not -(n // 2) <= origin <= (n - 1) // 2:
        raise ValueError(
            "Invalid origin; origin must satisfy -(len(weights) // 2) <= origin <= "
            "(len(weights)-1) // 2"
        )


def _one_axis(x: Any, weights: Any, axis: int, mode: Any, cval: Any, origin: int) -> Any:
    """``weights`` (1-D) along ``axis``, as an N-D kernel of ones elsewhere."""
    ndim = np.ndim(x)
    axis = axis + ndim if axis < 0 else axis
    if not 0 <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    shape = [1] * ndim
    shape[axis] = -1
    origins = [0] * ndim
    origins[axis] = origin
    modes = ["constant"] * ndim
    modes[axis] = mode
    return _filter(x, np.reshape(weights, shape), modes, cval, origins)


def _weights_1d(weights: Any) -> Any:
    w = _array(weights)
    if np.ndim(w) != 1 or np.shape(w)[0] < 1:
        raise RuntimeError("no filter weights given")
    return w if np.iscomplexobj(w) or _dispatch.traced((w,), {}) else w.astype(np.float64)


def correlate1d(input: Any, weights: Any, axis: int = -1, output: Any = None,
                mode: str = "reflect", cval: Any = 0.0, origin: int = 0) -> Any:  # fmt: skip
    """``scipy.ndimage.correlate1d``: ``Σₖ w[k] x[i + k - len(w)//2 - origin]`` along ``axis``
    (complex weights conjugated, as SciPy).

    >>> correlate1d(np.array([2.0, 8.0, 0.0, 4.0]), [1.0, 3.0])
    array([ 8., 26.,  8., 12.])
    """
    if not _dispatch.traced((input, weights, cval), {}):
        return _ORIGINALS["correlate1d"](input, weights, axis, output, mode, cval, origin)
    x, w = _array(input), _weights_1d(weights)
    _check_origin(origin, np.shape(w)[0])
    dtype = _out_dtype(x, output)
    if np.iscomplexobj(w) and not np.iscomplexobj(np.empty(0, dtype)):
        dtype = np.result_type(dtype, np.complex64)
    return _cast(_one_axis(x, np.conj(w), axis, mode, cval, origin), dtype)


def convolve1d(input: Any, weights: Any, axis: int = -1, output: Any = None,
               mode: str = "reflect", cval: Any = 0.0, origin: int = 0) -> Any:  # fmt: skip
    """``scipy.ndimage.convolve1d``: ``correlate1d`` with the weights reversed and the origin
    mirrored (one more to the left for an even number of weights), not conjugated.

    >>> convolve1d(np.array([2.0, 8.0, 0.0, 4.0]), [1.0, 3.0])
    array([14., 24.,  4., 16.])
    """
    if not _dispatch.traced((input, weights, cval), {}):
        return _ORIGINALS["convolve1d"](input, weights, axis, output, mode, cval, origin)
    w = _weights_1d(weights)
    n = np.shape(w)[0]
    flipped = -origin - (0 if n & 1 else 1)
    return correlate1d(input, np.conj(np.flip(w)), axis, output, mode, cval, flipped)


def _sequence(value: Any, n: int, name: str = "") -> list:
    """SciPy's ``_normalize_sequence``: one per axis."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        return [value] * n
    seq = list(value)
    if len(seq) != n:
        raise RuntimeError("sequence argument must have length equal to input rank")
    return seq


def _axes(axes: Any, ndim: int) -> list[int]:
    if axes is None:
        return list(range(ndim))
    axes = [axes] if isinstance(axes, int | np.integer) else list(axes)
    out = [int(a) + ndim if a < 0 else int(a) for a in axes]
    if any(not 0 <= a < ndim for a in out):
        raise ValueError("axes must be integers from -input.ndim to input.ndim - 1")
    if len(set(out)) != len(out):
        raise ValueError("axes must be unique")
    return out


def _correlate_nd(input: Any, weights: Any, output: Any, mode: Any, cval: Any, origin: Any,
                  convolution: bool, axes: Any) -> Any:  # fmt: skip
    x, w = _array(input), _array(weights)
    if not (np.iscomplexobj(w) or _dispatch.traced((w,), {})):
        w = w.astype(np.float64)
    if not isinstance(mode, str) and isinstance(mode, Iterable):
        raise RuntimeError("A sequence of modes is not supported")
    ndim = np.ndim(x)
    axs = _axes(axes, ndim)
    if np.ndim(w) != len(axs):
        raise RuntimeError(f"weights.ndim ({np.ndim(w)}) must match len(axes) ({len(axs)})")
    # as SciPy: the kernel's axes go to the filtered axes in the input's order, the origins to
    # the axes as listed (when fewer than all; else each origin to its position)
    origins_given = [int(o) for o in _sequence(origin, len(axs))]
    shape = [1] * ndim
    for a, n in zip(sorted(axs), np.shape(w)):
        shape[a] = n
    origins = [0] * ndim
    if len(axs) < ndim:
        for a, o in zip(axs, origins_given):
            origins[a] = o
    else:
        origins = origins_given
    w = np.reshape(w, shape)
    if convolution:
        w = np.flip(w)
        origins = [-o - (0 if n & 1 else 1) for o, n in zip(origins, shape)]
    else:
        w = np.conj(w)
    for o, n in zip(origins, shape):
        if not -(n // 2) <= o <= (n - 1) // 2:
            raise ValueError(
                "Invalid origin; origin must satisfy -(weights.shape[k] // 2) <= origin[k] <= "
                "(weights.shape[k]-1) // 2"
            )
    dtype = _out_dtype(x, output)
    if np.iscomplexobj(w) and not np.iscomplexobj(np.empty(0, dtype)):
        dtype = np.result_type(dtype, np.complex64)
    return _cast(_filter(x, w, [mode] * ndim, cval, origins), dtype)


def correlate(input: Any, weights: Any, output: Any = None, mode: str = "reflect",
              cval: Any = 0.0, origin: Any = 0, *, axes: Any = None) -> Any:  # fmt: skip
    """``scipy.ndimage.correlate``: the N-D correlation with ``weights`` (one axis of the kernel
    per axis in ``axes``, all by default).

    >>> correlate(np.arange(4.0), [1.0, 1.0, 1.0], mode="constant")
    array([1., 3., 6., 5.])
    """
    if not _dispatch.traced((input, weights, cval), {}):
        return _ORIGINALS["correlate"](input, weights, output, mode, cval, origin, axes=axes)
    return _correlate_nd(input, weights, output, mode, cval, origin, False, axes)


def convolve(input: Any, weights: Any, output: Any = None, mode: str = "reflect",
             cval: Any = 0.0, origin: Any = 0, *, axes: Any = None) -> Any:  # fmt: skip
    """``scipy.ndimage.convolve``: ``correlate`` with the kernel reversed on every axis and
    the origins mirrored, as SciPy.

    >>> convolve(np.arange(4.0), [1.0, 2.0, 3.0], mode="constant")
    array([ 1.,  4., 10., 12.])
    """
    if not _dispatch.traced((input, weights, cval), {}):
        return _ORIGINALS["convolve"](input, weights, output, mode, cval, origin, axes=axes)
    return _correlate_nd(input, weights, output, mode, cval, origin, True, axes)


def _plain_sigma(sigma: Any) -> None:
    if _dispatch.traced((sigma,), {}):
        raise NoDerivativeError(
            "fusegrad has no derivative of scipy.ndimage.gaussian_filter in sigma (its kernel "
            "width is read from sigma's value): pass sigma as a constant "
            "(fusegrad.numpy.stop_gradient(sigma)), or build the kernel with NumPy operations "
            "and use scipy.ndimage.correlate1d"
        )


def _gaussian_1d(x: Any, sigma: Any, axis: int, order: int, dtype: Any, mode: Any, cval: Any,
                 truncate: float, radius: Any) -> Any:  # fmt: skip
    sd = float(sigma)
    lw = int(truncate * sd + 0.5) if radius is None else radius
    if not isinstance(lw, int | np.integer) or lw < 0:
        raise ValueError("Radius must be a nonnegative integer.")
    weights = _filters._gaussian_kernel1d(sigma, order, lw)[::-1]
    return _cast(_one_axis(x, weights, axis, mode, cval, 0), dtype)


def gaussian_filter1d(input: Any, sigma: Any, axis: int = -1, order: int = 0,
                      output: Any = None, mode: str = "reflect", cval: Any = 0.0,
                      truncate: float = 4.0, *, radius: Any = None) -> Any:  # fmt: skip
    """``scipy.ndimage.gaussian_filter1d``: correlation with SciPy's Gaussian kernel (or its
    ``order``-th derivative) of ``sigma``, ``radius`` ``int(truncate * sigma + 0.5)``.

    >>> gaussian_filter1d(np.array([0.0, 1.0, 0.0]), 1.0, mode="constant").round(4)
    array([0.242 , 0.3989, 0.242 ])
    """
    if not _dispatch.traced((input, sigma, cval), {}):
        return _ORIGINALS["gaussian_filter1d"](input, sigma, axis, order, output, mode, cval,
                                               truncate, radius=radius)  # fmt: skip
    _plain_sigma(sigma)
    x = _array(input)
    return _gaussian_1d(x, sigma, axis, order, _out_dtype(x, output), mode, cval, truncate,
                        radius)  # fmt: skip


def gaussian_filter(input: Any, sigma: Any, order: Any = 0, output: Any = None,
                    mode: Any = "reflect", cval: Any = 0.0, truncate: float = 4.0, *,
                    radius: Any = None, axes: Any = None) -> Any:  # fmt: skip
    """``scipy.ndimage.gaussian_filter``: ``gaussian_filter1d`` along each axis in turn
    (``sigma``, ``order``, ``mode``, ``radius`` one per axis or shared; axes with
    ``sigma <= 1e-15`` skipped), cast to the output's type after each, as SciPy.

    >>> gaussian_filter(np.eye(2), 1.0).round(4)
    array([[0.5424, 0.4576],
           [0.4576, 0.5424]])
    """
    if not _dispatch.traced((input, sigma, cval), {}):
        return _ORIGINALS["gaussian_filter"](input, sigma, order, output, mode, cval, truncate,
                                             radius=radius, axes=axes)  # fmt: skip
    _plain_sigma(sigma)
    x = _array(input)
    dtype = _out_dtype(x, output)
    axs = _axes(axes, np.ndim(x))
    n = len(axs)
    per_axis = zip(axs, _sequence(sigma, n), _sequence(order, n), _sequence(mode, n),
                   _sequence(radius, n))  # fmt: skip
    out = x
    for axis, s, o, m, r in per_axis:
        if s > 1e-15:
            out = _gaussian_1d(out, s, axis, o, dtype, m, cval, truncate, r)
    return out if out is not x else _cast(x, dtype)


def uniform_filter1d(input: Any, size: int, axis: int = -1, output: Any = None,
                     mode: str = "reflect", cval: Any = 0.0, origin: int = 0) -> Any:  # fmt: skip
    """``scipy.ndimage.uniform_filter1d``: the mean of ``size`` neighbours along ``axis``
    (a correlation with ``1 / size`` weights; SciPy's running sum, up to rounding).

    >>> uniform_filter1d(np.array([0.0, 3.0, 0.0]), 3, mode="constant")
    array([1., 1., 1.])
    """
    if not _dispatch.traced((input, cval), {}):
        return _ORIGINALS["uniform_filter1d"](input, size, axis, output, mode, cval, origin)
    if size < 1:
        raise RuntimeError("incorrect filter size")
    if size // 2 + origin < 0 or size // 2 + origin >= size:
        raise ValueError("invalid origin")
    x = _array(input)
    weights = np.full(int(size), 1.0 / size)
    return _cast(_one_axis(x, weights, axis, mode, cval, origin), _out_dtype(x, output))


def uniform_filter(input: Any, size: Any = 3, output: Any = None, mode: Any = "reflect",
                   cval: Any = 0.0, origin: Any = 0, *, axes: Any = None) -> Any:  # fmt: skip
    """``scipy.ndimage.uniform_filter``: ``uniform_filter1d`` along each axis in turn (sizes
    of 1 skipped).

    >>> uniform_filter(np.eye(3), 3, mode="constant").round(4)
    array([[0.2222, 0.2222, 0.1111],
           [0.2222, 0.3333, 0.2222],
           [0.1111, 0.2222, 0.2222]])
    """
    if not _dispatch.traced((input, cval), {}):
        return _ORIGINALS["uniform_filter"](input, size, output, mode, cval, origin, axes=axes)
    x = _array(input)
    dtype = _out_dtype(x, output)
    axs = _axes(axes, np.ndim(x))
    n = len(axs)
    out = x
    per_axis = zip(axs, _sequence(size, n), _sequence(origin, n), _sequence(mode, n))
    for axis, s, o, m in per_axis:
        if s > 1:
            out = _cast(_one_axis(out, np.full(int(s), 1.0 / int(s)), axis, m, cval, o), dtype)
    return out if out is not x else _cast(x, dtype)


def _patch(module: Any) -> None:
    """Install the wrappers in ``scipy.ndimage`` (called by ``fusegrad.scipy``)."""
    for name in _ORIGINALS:
        _dispatch.patch_attr(module, name, globals()[name])


def __getattr__(name: str) -> Any:
    """Every other ``scipy.ndimage`` name (SciPy's own function)."""
    return getattr(_nd, name)


_dispatch.loaded(__name__)
