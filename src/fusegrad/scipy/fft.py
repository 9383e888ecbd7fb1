"""``scipy.fft`` for traced values: the Fourier transforms (``fft``, ``ifft``, ``rfft``,
``irfft``, ``hfft``, ``ihfft`` and their 2-D and N-D forms), ``fftshift``/``ifftshift``, and the
real-to-real ``dct``, ``idct``, ``dst``, ``idst`` (and ``dctn``, ...), types 1-4.

SciPy's transforms are uarray multimethods, objects whose code cannot be redirected in place,
so fusegrad registers a ``scipy.fft`` backend (SciPy's own mechanism for other array types): it
is tried before SciPy's and takes a call only when an argument is traced, so names bound before
fusegrad was imported reach it too. The Fourier transforms read ``n``/``s``/``axes``/``norm`` as
SciPy does and call ``np.fft``'s, which have rules (``fusegrad.rules.fft``). A DCT or DST is one
``np.fft`` transform of a symmetric extension of ``x`` (length about 2N) times fixed twiddle
factors: linear in ``x``, equal to SciPy's up to rounding, and differentiated, to any order,
through the ``np.fft`` rules. ``overwrite_x`` and ``workers`` are ignored on traced values; a
``plan`` raises as in SciPy.

Example::

    >>> import numpy as np, scipy.fft, fusegrad as fg
    >>> fg.grad(lambda x: np.sum(np.abs(scipy.fft.fft(x)) ** 2))(np.array([1.0, 2.0]))  # 2 N x
    array([4., 8.])
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from numbers import Number
from typing import Any

import numpy as np
import scipy.fft as _sf

from . import _dispatch

_DUAL = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def _traced(x: Any) -> bool:
    return _dispatch.traced((x,), {})


def _norm(norm: Any, plan: Any = None) -> Any:
    """``norm``, checked as SciPy checks it (and ``plan``, which SciPy does not support)."""
    if plan is not None:
        raise NotImplementedError(
            "Passing a precomputed plan is not yet supported by scipy.fft functions"
        )
    if norm not in _DUAL:
        raise ValueError(f'Invalid norm value {norm!r}, should be "backward", "ortho" or "forward"')
    return norm


def _points(n: Any) -> int:
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"invalid number of data points ({n}) specified")
    return n


def _axis(x: Any, axis: Any) -> int:
    ndim, axis = np.ndim(x), operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim


def _ints(v: Any, name: str) -> list[int]:
    values: Any = (v,) if isinstance(v, Number) else v
    try:
        return [operator.index(a) for a in values]
    except TypeError as e:
        raise ValueError(f"{name} must be a scalar or iterable of integers") from e


def _shape_and_axes(x: Any, s: Any, axes: Any) -> tuple[list[int], list[int]]:
    """The transform's lengths and axes, read as SciPy reads ``s`` and ``axes``."""
    shape, ndim = np.shape(x), np.ndim(x)
    if axes is not None:
        axes = [a + ndim if a < 0 else a for a in _ints(axes, "axes")]
        if any(a >= ndim or a < 0 for a in axes):
            raise ValueError("axes exceeds dimensionality of input")
        if len(set(axes)) != len(axes):
            raise ValueError("all axes must be unique")
    if s is None:
        axes = list(range(ndim)) if axes is None else axes
        return [shape[a] for a in axes], axes
    sizes = _ints(s, "shape")
    if axes is None:
        if len(sizes) > ndim:
            raise ValueError("shape requires more axes than are present")
        axes = list(range(ndim - len(sizes), ndim))
    elif axes and len(axes) != len(sizes):  # SciPy lets s go with empty axes (no transform)
        raise ValueError("when given, axes and shape arguments have to be of the same length")
    return [shape[a] if n == -1 else _points(n) for n, a in zip(sizes, axes)], axes


def _require_real(x: Any) -> None:
    if np.iscomplexobj(x):
        raise TypeError("x must be a real sequence")


def _hermitian_length(x: Any, n: Any, axis: int) -> int:
    """The output length of a transform with Hermitian input: ``2 (m - 1)`` unless ``n``."""
    if n is not None:
        return _points(n)
    n = 2 * (np.shape(x)[axis] - 1)
    if n < 1:
        raise ValueError(f"Invalid number of data points ({n}) specified")
    return n


# --------------------------------------------------------------------------------------------------
# Fourier transforms
# --------------------------------------------------------------------------------------------------


def _one_d(transform: Callable, x: Any, n: Any, axis: Any, norm: Any, plan: Any) -> Any:
    axis = _axis(x, axis)
    if n is None:
        _points(np.shape(x)[axis])
    return transform(x, None if n is None else _points(n), axis, norm=_norm(norm, plan))


def fft(x: Any, n: Any = None, axis: int = -1, norm: Any = None, overwrite_x: bool = False,
        workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.fft``: the 1-D discrete Fourier transform.

    >>> fft(np.array([1.0, 2.0])).real
    array([ 3., -1.])
    """
    if not _traced(x):
        return _sf.fft(x, n, axis, norm, overwrite_x, workers, plan=plan)
    return _one_d(np.fft.fft, x, n, axis, norm, plan)


def ifft(x: Any, n: Any = None, axis: int = -1, norm: Any = None, overwrite_x: bool = False,
         workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.ifft``: the 1-D inverse discrete Fourier transform.

    >>> ifft(np.array([3.0, -1.0])).real
    array([1., 2.])
    """
    if not _traced(x):
        return _sf.ifft(x, n, axis, norm, overwrite_x, workers, plan=plan)
    return _one_d(np.fft.ifft, x, n, axis, norm, plan)


def rfft(x: Any, n: Any = None, axis: int = -1, norm: Any = None, overwrite_x: bool = False,
         workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.rfft``: the discrete Fourier transform of a real ``x``, ``n // 2 + 1`` terms.

    >>> rfft(np.array([1.0, 2.0, 3.0, 4.0])) == [10, -2 + 2j, -2]
    array([ True,  True,  True])
    """
    if not _traced(x):
        return _sf.rfft(x, n, axis, norm, overwrite_x, workers, plan=plan)
    _require_real(x)
    return _one_d(np.fft.rfft, x, n, axis, norm, plan)


def irfft(x: Any, n: Any = None, axis: int = -1, norm: Any = None, overwrite_x: bool = False,
          workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.irfft``: the inverse of ``rfft``, real, of length ``n`` (``2 (m - 1)``).

    >>> irfft(np.array([10.0, -2 + 2j, -2.0]))
    array([1., 2., 3., 4.])
    """
    if not _traced(x):
        return _sf.irfft(x, n, axis, norm, overwrite_x, workers, plan=plan)
    axis = _axis(x, axis)
    return np.fft.irfft(x, _hermitian_length(x, n, axis), axis, norm=_norm(norm, plan))


def hfft(x: Any, n: Any = None, axis: int = -1, norm: Any = None, overwrite_x: bool = False,
         workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.hfft``: the (real) transform of a Hermitian-symmetric signal.

    >>> hfft(np.array([1.0, 2.0, 0.0]))
    array([ 5.,  1., -3.,  1.])
    """
    if not _traced(x):
        return _sf.hfft(x, n, axis, norm, overwrite_x, workers, plan=plan)
    axis = _axis(x, axis)
    return np.fft.hfft(x, _hermitian_length(x, n, axis), axis, norm=_norm(norm, plan))


def ihfft(x: Any, n: Any = None, axis: int = -1, norm: Any = None, overwrite_x: bool = False,
          workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.ihfft``: the inverse of ``hfft``, ``n // 2 + 1`` terms of a real ``x``.

    >>> np.allclose(ihfft(np.array([5.0, 1.0, -3.0, 1.0])), [1.0, 2.0, 0.0])
    True
    """
    if not _traced(x):
        return _sf.ihfft(x, n, axis, norm, overwrite_x, workers, plan=plan)
    _require_real(x)
    return _one_d(np.fft.ihfft, x, n, axis, norm, plan)


def _complex_n(transform: Callable, x: Any, s: Any, axes: Any, norm: Any, plan: Any) -> Any:
    sizes, axes = _shape_and_axes(x, s, axes)
    norm = _norm(norm, plan)
    return x if not axes else transform(x, sizes, axes, norm=norm)  # SciPy: no axes, x itself


def _real_n(x: Any, s: Any, axes: Any, norm: Any, plan: Any) -> Any:
    """rfftn of a real ``x`` (at least one axis)."""
    _require_real(x)
    sizes, axes = _shape_and_axes(x, s, axes)
    if not axes:
        raise ValueError("at least 1 axis must be transformed")
    return np.fft.rfftn(x, sizes, axes, norm=_norm(norm, plan))


def _hermitian_n(x: Any, s: Any, axes: Any, norm: Any, plan: Any) -> Any:
    """irfftn of a Hermitian half spectrum: the last length is ``2 (m - 1)`` unless ``s``."""
    sizes, axes = _shape_and_axes(x, s, axes)
    if not axes:
        raise ValueError("at least 1 axis must be transformed")
    if s is None:
        sizes[-1] = _hermitian_length(x, None, axes[-1])
    return np.fft.irfftn(x, sizes, axes, norm=_norm(norm, plan))


def fftn(x: Any, s: Any = None, axes: Any = None, norm: Any = None, overwrite_x: bool = False,
         workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.fftn``: the N-D discrete Fourier transform over ``axes`` (all by default).

    >>> fftn(np.array([[1.0, 2.0], [3.0, 4.0]])).real
    array([[10., -2.],
           [-4.,  0.]])
    """
    if not _traced(x):
        return _sf.fftn(x, s, axes, norm, overwrite_x, workers, plan=plan)
    return _complex_n(np.fft.fftn, x, s, axes, norm, plan)


def ifftn(x: Any, s: Any = None, axes: Any = None, norm: Any = None, overwrite_x: bool = False,
          workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.ifftn``: the N-D inverse discrete Fourier transform.

    >>> ifftn(np.array([[10.0, -2.0], [-4.0, 0.0]])).real
    array([[1., 2.],
           [3., 4.]])
    """
    if not _traced(x):
        return _sf.ifftn(x, s, axes, norm, overwrite_x, workers, plan=plan)
    return _complex_n(np.fft.ifftn, x, s, axes, norm, plan)


def rfftn(x: Any, s: Any = None, axes: Any = None, norm: Any = None, overwrite_x: bool = False,
          workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.rfftn``: the N-D transform of a real ``x``, half spectrum on the last axis.

    >>> rfftn(np.array([[1.0, 2.0], [3.0, 4.0]])).real
    array([[10., -2.],
           [-4.,  0.]])
    """
    if not _traced(x):
        return _sf.rfftn(x, s, axes, norm, overwrite_x, workers, plan=plan)
    return _real_n(x, s, axes, norm, plan)


def irfftn(x: Any, s: Any = None, axes: Any = None, norm: Any = None, overwrite_x: bool = False,
           workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.irfftn``: the inverse of ``rfftn``, real.

    >>> irfftn(np.array([[10.0, -2.0], [-4.0, 0.0]]))
    array([[1., 2.],
           [3., 4.]])
    """
    if not _traced(x):
        return _sf.irfftn(x, s, axes, norm, overwrite_x, workers, plan=plan)
    return _hermitian_n(x, s, axes, norm, plan)


def hfftn(x: Any, s: Any = None, axes: Any = None, norm: Any = None, overwrite_x: bool = False,
          workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.hfftn``: ``irfftn`` of ``conj(x)`` under the dual normalisation.

    >>> hfftn(np.array([[1.0, 2.0], [3.0, 4.0]]))
    array([[10., -2.],
           [-4.,  0.]])
    """
    if not _traced(x):
        return _sf.hfftn(x, s, axes, norm, overwrite_x, workers, plan=plan)
    return _hermitian_n(np.conj(x), s, axes, _DUAL[_norm(norm, plan)], None)


def ihfftn(x: Any, s: Any = None, axes: Any = None, norm: Any = None, overwrite_x: bool = False,
           workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.ihfftn``: ``conj(rfftn(x))`` under the dual normalisation.

    >>> ihfftn(np.array([[10.0, -2.0], [-4.0, 0.0]])).real
    array([[1., 2.],
           [3., 4.]])
    """
    if not _traced(x):
        return _sf.ihfftn(x, s, axes, norm, overwrite_x, workers, plan=plan)
    return np.conj(_real_n(x, s, axes, _DUAL[_norm(norm, plan)], None))


def fft2(x: Any, s: Any = None, axes: Any = (-2, -1), norm: Any = None, overwrite_x: bool = False,
         workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.fft2``: ``fftn`` over the last two axes.

    >>> fft2(np.eye(2)).real
    array([[2., 0.],
           [0., 2.]])
    """
    if not _traced(x):
        return _sf.fft2(x, s, axes, norm, overwrite_x, workers, plan=plan)
    return _complex_n(np.fft.fftn, x, s, axes, norm, plan)


def ifft2(x: Any, s: Any = None, axes: Any = (-2, -1), norm: Any = None, overwrite_x: bool = False,
          workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.ifft2``: ``ifftn`` over the last two axes.

    >>> ifft2(2 * np.eye(2)).real
    array([[1., 0.],
           [0., 1.]])
    """
    if not _traced(x):
        return _sf.ifft2(x, s, axes, norm, overwrite_x, workers, plan=plan)
    return _complex_n(np.fft.ifftn, x, s, axes, norm, plan)


def rfft2(x: Any, s: Any = None, axes: Any = (-2, -1), norm: Any = None, overwrite_x: bool = False,
          workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.rfft2``: ``rfftn`` over the last two axes.

    >>> rfft2(np.eye(2)).real
    array([[2., 0.],
           [0., 2.]])
    """
    if not _traced(x):
        return _sf.rfft2(x, s, axes, norm, overwrite_x, workers, plan=plan)
    return _real_n(x, s, axes, norm, plan)


def irfft2(x: Any, s: Any = None, axes: Any = (-2, -1), norm: Any = None,
           overwrite_x: bool = False, workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.irfft2``: ``irfftn`` over the last two axes.

    >>> irfft2(2 * np.eye(2))
    array([[1., 0.],
           [0., 1.]])
    """
    if not _traced(x):
        return _sf.irfft2(x, s, axes, norm, overwrite_x, workers, plan=plan)
    return _hermitian_n(x, s, axes, norm, plan)


def hfft2(x: Any, s: Any = None, axes: Any = (-2, -1), norm: Any = None, overwrite_x: bool = False,
          workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.hfft2``: ``hfftn`` over the last two axes.

    >>> hfft2(np.eye(2))
    array([[2., 0.],
           [0., 2.]])
    """
    if not _traced(x):
        return _sf.hfft2(x, s, axes, norm, overwrite_x, workers, plan=plan)
    return _hermitian_n(np.conj(x), s, axes, _DUAL[_norm(norm, plan)], None)


def ihfft2(x: Any, s: Any = None, axes: Any = (-2, -1), norm: Any = None,
           overwrite_x: bool = False, workers: Any = None, *, plan: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.ihfft2``: ``ihfftn`` over the last two axes.

    >>> ihfft2(2 * np.eye(2)).real
    array([[1., 0.],
           [0., 1.]])
    """
    if not _traced(x):
        return _sf.ihfft2(x, s, axes, norm, overwrite_x, workers, plan=plan)
    return np.conj(_real_n(x, s, axes, _DUAL[_norm(norm, plan)], None))


def fftshift(x: Any, axes: Any = None) -> Any:
    """``scipy.fft.fftshift``: the zero frequency moved to the centre.

    >>> fftshift(np.arange(4.0))
    array([2., 3., 0., 1.])
    """
    return np.fft.fftshift(x, axes)


def ifftshift(x: Any, axes: Any = None) -> Any:
    """``scipy.fft.ifftshift``: the inverse of ``fftshift``.

    >>> ifftshift(np.array([2.0, 3.0, 0.0, 1.0]))
    array([0., 1., 2., 3.])
    """
    return np.fft.ifftshift(x, axes)


# --------------------------------------------------------------------------------------------------
# DCT and DST, types 1-4
# --------------------------------------------------------------------------------------------------
# Each unnormalised transform (SciPy's norm="backward") of a real x along its last axis, N points,
# as one FFT: e.g. DCT-II, y_k = 2 Σ x_n cos(πk(2n+1)/2N), is e^{-iπk/2N} times term k of the
# DFT of [x, x reversed]. DCT-III and DST-III weight x_0 (x_{N-1}) by 1/2, as SciPy defines them.


def _twiddle(x: Any, phase: np.ndarray, weight: Any = 1.0) -> np.ndarray:
    """``weight · exp(-iπ phase)`` in the complex precision of ``x``'s transform."""
    dtype = np.complex64 if np.dtype(x.dtype) in (np.float32, np.complex64) else np.complex128
    return (weight * np.exp(-1j * np.pi * phase)).astype(dtype)


def _zeros_column(x: Any) -> np.ndarray:
    return np.zeros((*np.shape(x)[:-1], 1), np.dtype(x.dtype))


def _dct1(x: Any, m: int) -> Any:
    if m < 2:
        raise ValueError("a type-1 DCT needs at least 2 points")
    return np.real(np.fft.rfft(np.concatenate([x, x[..., -2:0:-1]], axis=-1)))


def _dct2(x: Any, m: int) -> Any:
    spectrum = np.fft.rfft(np.concatenate([x, x[..., ::-1]], axis=-1))[..., :m]
    return np.real(_twiddle(x, np.arange(m) / (2 * m)) * spectrum)


def _dct3(x: Any, m: int) -> Any:
    half_first = np.ones(m)
    half_first[0] = 0.5
    weighted = x * _twiddle(x, np.arange(m) / (2 * m), half_first)
    return 2 * np.real(np.fft.fft(weighted, 2 * m)[..., :m])


def _dct4(x: Any, m: int) -> Any:
    return 2 * np.real(_type4_spectrum(x, m))


def _dst1(x: Any, m: int) -> Any:
    zero = _zeros_column(x)
    odd = np.concatenate([zero, x, zero, -x[..., ::-1]], axis=-1)
    return -np.imag(np.fft.rfft(odd)[..., 1 : m + 1])


def _dst2(x: Any, m: int) -> Any:
    spectrum = np.fft.rfft(np.concatenate([x, -x[..., ::-1]], axis=-1))[..., 1:]
    return -np.imag(_twiddle(x, np.arange(1, m + 1) / (2 * m)) * spectrum)


def _dst3(x: Any, m: int) -> Any:
    half_last = np.ones(m)
    half_last[-1] = 0.5
    weighted = x * _twiddle(x, np.arange(1, m + 1) / (2 * m), half_last)
    shifted = np.concatenate([_zeros_column(weighted), weighted], axis=-1)
    return -2 * np.imag(np.fft.fft(shifted, 2 * m)[..., :m])


def _dst4(x: Any, m: int) -> Any:
    return -2 * np.imag(_type4_spectrum(x, m))


def _type4_spectrum(x: Any, m: int) -> Any:
    """``Σ x_n e^{-iπ(2k+1)(2n+1)/4N}``: its real part is half DCT-IV, minus its imaginary part
    half DST-IV."""
    k = np.arange(m)
    spectrum = np.fft.fft(x * _twiddle(x, (2 * k + 1) / (4 * m)), 2 * m)[..., :m]
    return _twiddle(x, k / (2 * m)) * spectrum


_R2R: dict[tuple[str, int], Callable[[Any, int], Any]] = {
    ("dct", 1): _dct1, ("dct", 2): _dct2, ("dct", 3): _dct3, ("dct", 4): _dct4,
    ("dst", 1): _dst1, ("dst", 2): _dst2, ("dst", 3): _dst3, ("dst", 4): _dst4,
}  # fmt: skip
_INVERSE_TYPE = {1: 1, 2: 3, 3: 2, 4: 4}

_SQRT2 = np.sqrt(2.0)


def _logical_length(kind: str, type: int, m: int) -> int:
    """The DFT length the transform is part of; SciPy's "forward" divides by it."""
    return {("dct", 1): 2 * (m - 1), ("dst", 1): 2 * (m + 1)}.get((kind, type), 2 * m)


# SciPy's orthogonalisation: these entries of x are multiplied by √2 before the transform, and
# these entries of y divided by √2 after it.
_ORTHOGONAL_ENDS: dict[tuple[str, int], tuple[list[int], list[int]]] = {
    ("dct", 1): ([0, -1], [0, -1]),
    ("dct", 2): ([], [0]),
    ("dct", 3): ([0], []),
    ("dst", 2): ([], [-1]),
    ("dst", 3): ([-1], []),
}


def _weights(kind: str, type: int, m: int, orthogonalize: bool) -> tuple[Any, np.ndarray]:
    """The factors on ``x`` (None: all 1) and on ``y`` that make the transform orthogonal."""
    ends = _ORTHOGONAL_ENDS.get((kind, type), ([], [])) if orthogonalize else ([], [])
    before, after = np.ones(m), np.ones(m)
    before[ends[0]], after[ends[1]] = _SQRT2, 1 / _SQRT2
    return (before if ends[0] else None), after


def _r2r_last(kind: str, type: int, x: Any, norm: Any, orthogonalize: bool) -> Any:
    """The real transform of a real ``x`` along its last axis, normalised as SciPy's."""
    m = np.shape(x)[-1]
    before, after = _weights(kind, type, m, orthogonalize)
    if before is not None:
        x = x * before.astype(x.dtype)
    y = _R2R[kind, type](x, m)
    length = _logical_length(kind, type, m)
    scale = {None: 1.0, "backward": 1.0, "ortho": length**-0.5, "forward": 1.0 / length}[norm]
    return y * (scale * after).astype(y.dtype)


def _fit(x: Any, axis: int, n: int) -> Any:
    """``x`` cropped or zero-padded to ``n`` along ``axis`` (SciPy's ``n``/``s``)."""
    m = np.shape(x)[axis]
    if m > n:
        return x[(slice(None),) * axis + (slice(0, n),)]
    if m < n:
        width = [(0, 0)] * np.ndim(x)
        width[axis] = (0, n - m)
        return np.pad(x, width)
    return x


def _r2r(kind: str, type: Any, x: Any, sizes: list[int], axes: list[int], norm: Any,
         orthogonalize: Any) -> Any:  # fmt: skip
    """The DCT or DST of ``type`` along each of ``axes`` in turn."""
    if type not in _INVERSE_TYPE:
        raise ValueError(f"invalid {kind.upper()} type")
    norm = _norm(norm)
    if np.iscomplexobj(x):
        # SciPy transforms the two parts without its orthogonalize argument: the default.
        parts = (np.real(x), np.imag(x))
        re, im = (_r2r(kind, type, p, sizes, axes, norm, None) for p in parts)
        return re + 1j * im
    orthogonal = norm == "ortho" if orthogonalize is None else bool(orthogonalize)
    for n, axis in zip(sizes, axes):
        moved = np.moveaxis(_fit(x, axis, n), axis, -1)
        x = np.moveaxis(_r2r_last(kind, type, moved, norm, orthogonal), -1, axis)
    return x


def _r2r_1d(kind: str, type: Any, x: Any, n: Any, axis: Any, norm: Any, orth: Any) -> Any:
    axis = _axis(x, axis)
    size = _points(np.shape(x)[axis] if n is None else n)
    return _r2r(kind, type, x, [size], [axis], norm, orth)


def _r2r_n(kind: str, type: Any, x: Any, s: Any, axes: Any, norm: Any, orth: Any) -> Any:
    sizes, axes = _shape_and_axes(x, s, axes)
    return x if not axes else _r2r(kind, type, x, sizes, axes, norm, orth)


def dct(x: Any, type: int = 2, n: Any = None, axis: int = -1, norm: Any = None,
        overwrite_x: bool = False, workers: Any = None,
        orthogonalize: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.dct``: the discrete cosine transform of ``type`` 1-4.

    >>> dct(np.array([1.0, 0.0]))
    array([2.        , 1.41421356])
    """
    if not _traced(x):
        return _sf.dct(x, type, n, axis, norm, overwrite_x, workers, orthogonalize)
    return _r2r_1d("dct", type, x, n, axis, norm, orthogonalize)


def idct(x: Any, type: int = 2, n: Any = None, axis: int = -1, norm: Any = None,
         overwrite_x: bool = False, workers: Any = None,
         orthogonalize: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.idct``: the inverse of ``dct`` (the DCT of the inverse type, dual norm).

    >>> x = np.array([1.0, 2.0, 0.5])
    >>> np.allclose(idct(dct(x)), x)
    True
    """
    if not _traced(x):
        return _sf.idct(x, type, n, axis, norm, overwrite_x, workers, orthogonalize)
    inverse = _INVERSE_TYPE.get(type, type)
    return _r2r_1d("dct", inverse, x, n, axis, _DUAL.get(norm, norm), orthogonalize)


def dst(x: Any, type: int = 2, n: Any = None, axis: int = -1, norm: Any = None,
        overwrite_x: bool = False, workers: Any = None,
        orthogonalize: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.dst``: the discrete sine transform of ``type`` 1-4.

    >>> dst(np.array([1.0, 0.0]))
    array([1.41421356, 2.        ])
    """
    if not _traced(x):
        return _sf.dst(x, type, n, axis, norm, overwrite_x, workers, orthogonalize)
    return _r2r_1d("dst", type, x, n, axis, norm, orthogonalize)


def idst(x: Any, type: int = 2, n: Any = None, axis: int = -1, norm: Any = None,
         overwrite_x: bool = False, workers: Any = None,
         orthogonalize: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.idst``: the inverse of ``dst`` (the DST of the inverse type, dual norm).

    >>> x = np.array([1.0, 2.0, 0.5])
    >>> np.allclose(idst(dst(x, type=4), type=4), x)
    True
    """
    if not _traced(x):
        return _sf.idst(x, type, n, axis, norm, overwrite_x, workers, orthogonalize)
    inverse = _INVERSE_TYPE.get(type, type)
    return _r2r_1d("dst", inverse, x, n, axis, _DUAL.get(norm, norm), orthogonalize)


def dctn(x: Any, type: int = 2, s: Any = None, axes: Any = None, norm: Any = None,
         overwrite_x: bool = False, workers: Any = None,
         *, orthogonalize: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.dctn``: the DCT along each of ``axes`` (all by default).

    >>> dctn(np.array([[1.0, 0.0], [0.0, 0.0]]))
    array([[4.        , 2.82842712],
           [2.82842712, 2.        ]])
    """
    if not _traced(x):
        return _sf.dctn(x, type, s, axes, norm, overwrite_x, workers, orthogonalize=orthogonalize)
    return _r2r_n("dct", type, x, s, axes, norm, orthogonalize)


def idctn(x: Any, type: int = 2, s: Any = None, axes: Any = None, norm: Any = None,
          overwrite_x: bool = False, workers: Any = None,
          orthogonalize: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.idctn``: the inverse of ``dctn``.

    >>> x = np.array([[1.0, 2.0], [0.5, 0.0]])
    >>> np.allclose(idctn(dctn(x, type=1), type=1), x)
    True
    """
    if not _traced(x):
        return _sf.idctn(x, type, s, axes, norm, overwrite_x, workers, orthogonalize)
    inverse = _INVERSE_TYPE.get(type, type)
    return _r2r_n("dct", inverse, x, s, axes, _DUAL.get(norm, norm), orthogonalize)


def dstn(x: Any, type: int = 2, s: Any = None, axes: Any = None, norm: Any = None,
         overwrite_x: bool = False, workers: Any = None,
         orthogonalize: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.dstn``: the DST along each of ``axes`` (all by default).

    >>> dstn(np.array([[1.0, 0.0], [0.0, 0.0]]))
    array([[2.        , 2.82842712],
           [2.82842712, 4.        ]])
    """
    if not _traced(x):
        return _sf.dstn(x, type, s, axes, norm, overwrite_x, workers, orthogonalize)
    return _r2r_n("dst", type, x, s, axes, norm, orthogonalize)


def idstn(x: Any, type: int = 2, s: Any = None, axes: Any = None, norm: Any = None,
          overwrite_x: bool = False, workers: Any = None,
          orthogonalize: Any = None) -> Any:  # fmt: skip
    """``scipy.fft.idstn``: the inverse of ``dstn``.

    >>> x = np.array([[1.0, 2.0], [0.5, 0.0]])
    >>> np.allclose(idstn(dstn(x, norm="ortho"), norm="ortho"), x)
    True
    """
    if not _traced(x):
        return _sf.idstn(x, type, s, axes, norm, overwrite_x, workers, orthogonalize)
    inverse = _INVERSE_TYPE.get(type, type)
    return _r2r_n("dst", inverse, x, s, axes, _DUAL.get(norm, norm), orthogonalize)


# --------------------------------------------------------------------------------------------------
# Redirecting scipy.fft
# --------------------------------------------------------------------------------------------------

_TRANSFORMS: dict[str, Callable] = {
    f.__name__: f
    for f in (fft, ifft, rfft, irfft, hfft, ihfft, fft2, ifft2, rfft2, irfft2, hfft2, ihfft2,
              fftn, ifftn, rfftn, irfftn, hfftn, ihfftn, dct, idct, dst, idst, dctn, idctn,
              dstn, idstn)
}  # fmt: skip


class _Backend:
    """A ``scipy.fft`` backend: the mirror when an argument is traced, else SciPy's (the
    backends after it)."""

    __ua_domain__ = "numpy.scipy.fft"

    @staticmethod
    def __ua_function__(method: Any, args: tuple, kwargs: dict) -> Any:
        mirror = _TRANSFORMS.get(method.__name__)
        if mirror is None or not _dispatch.traced(args, kwargs):
            return NotImplemented
        return mirror(*args, **kwargs)


def _patch(module: Any) -> None:
    """Register the backend with ``scipy.fft`` and redirect its shifts (called by
    ``fusegrad.scipy``)."""
    module.register_backend(_Backend)
    for name in ("fftshift", "ifftshift"):
        _dispatch.patch_attr(module, name, globals()[name])


_dispatch.loaded(__name__)
