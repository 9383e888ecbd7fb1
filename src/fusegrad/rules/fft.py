"""Reverse and forward rules of ``np.fft``: one table, ``FFT``, of the linear transforms.

Every transform is linear, so its forward rule is the transform of the tangent and its reverse
rule the transpose (JAX's convention: the pairing ``Re(u·v)``, no conjugation):

- ``fft``, ``fft2``, ``fftn``, ``ifft``, ``ifft2``, ``ifftn``: the same transform of ȳ (the DFT
  matrix is symmetric);
- ``rfft``, ``rfft2``, ``rfftn``: ``Re fftn(ȳ zero-padded to n on the last axis)``;
- ``irfft``, ``irfft2``, ``irfftn``: ``conj(m · rfftn(ȳ, norm=dual))``, ``m`` = 1 at 0 (and at
  n/2 for even n), else 2;

and each is then cropped or zero-padded back to the input's length where ``n``/``s`` changed it
(the transpose of NumPy's own crop/pad). ``dual`` swaps ``"backward"`` and ``"forward"`` and
keeps ``"ortho"``. A real input gets the real part (the transpose of its embedding in ℂ).
``fftshift``/``ifftshift`` (``np.roll``) and ``hfft``/``ihfft`` (``irfft``/``rfft`` of the
conjugate, as NumPy defines them) are composites. Pullbacks call ``np.fft`` functions,
which have these rules themselves, so higher orders work.

Example::

    >>> import fusegrad as fg
    >>> g = fg.grad(lambda x: np.sum(np.abs(np.fft.rfft(x)) ** 2))(np.array([1.0, 2.0, 0.5, 0.0]))
    >>> np.allclose(g, [7.0, 12.0, 5.0, 4.0])  # N x + X₀ + (−1)ⁿ X₂ (Parseval)
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..tangents import AbstractZero, ZeroTangent, unthunk
from .common import no_tangents, params, project
from .registry import register_frule, register_rrule

_DUAL = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def _plan(fn_kind: str, x: Any, p: dict) -> tuple[list[int | None], list[int]]:
    """The transform's ``(sizes, axes)`` (normalised, one size per axis), as NumPy reads them."""
    ndim = np.ndim(x)
    if fn_kind == "1d":
        axes = [p["axis"] % ndim]
        n = p["n"]
        sizes = [None if n is None else int(n)]
    else:
        s, axes = p["s"], p["axes"]
        if axes is None:
            axes = list(range(ndim)) if s is None else list(range(ndim - len(s), ndim))
        axes = [int(a) % ndim for a in axes]
        sizes = [None] * len(axes) if s is None else [None if v == -1 else int(v) for v in s]
    return sizes, axes


def _fit(g: Any, axes: list[int], lengths: list[int]) -> Any:
    """``g`` cropped or zero-padded to ``lengths`` along ``axes`` (NumPy's own crop/pad)."""
    for ax, n in zip(axes, lengths, strict=True):
        m = np.shape(g)[ax]
        if m > n:
            g = g[(slice(None),) * ax + (slice(0, n),)]
        elif m < n:
            width = [(0, 0)] * np.ndim(g)
            width[ax] = (0, n - m)
            g = np.pad(g, width)
    return g


def _c2c(fn: Any, kind: str) -> Callable:
    """fft, ifft, fft2, ifft2, fftn, ifftn: ȳ ↦ the same transform of ȳ, back to x's lengths."""
    defaults = _DEFAULTS[kind]

    def rule(a, *args, **kwargs):
        p = params(args, kwargs, **defaults)
        y = fn(a, *args, **kwargs)
        _, axes = _plan(kind, a, p)
        lengths = [np.shape(a)[ax] for ax in axes]

        def pullback(dy):
            g = np.fft.fftn(dy, axes=axes, norm=p["norm"]) if fn in _FORWARD else None
            if g is None:
                g = np.fft.ifftn(dy, axes=axes, norm=p["norm"])
            return (project(_fit(g, axes, lengths), a), *no_tangents(len(args)))

        return y, pullback

    rule.__doc__ = (
        f"np.fft.{fn.__name__}: the pullback is {fn.__name__} of ȳ (the DFT is symmetric)."
    )
    return rule


def _r2c(fn: Any, kind: str) -> Callable:
    """rfft, rfft2, rfftn: ȳ zero-padded to n on the last axis, fftn, real part."""
    defaults = _DEFAULTS[kind]

    def rule(a, *args, **kwargs):
        p = params(args, kwargs, **defaults)
        y = fn(a, *args, **kwargs)
        sizes, axes = _plan(kind, a, p)
        n = [np.shape(a)[ax] if s is None else s for s, ax in zip(sizes, axes, strict=True)]
        lengths = [np.shape(a)[ax] for ax in axes]

        def pullback(dy):
            full = _fit(dy, axes[-1:], n[-1:])
            g = np.real(np.fft.fftn(full, axes=axes, norm=p["norm"]))
            return (project(_fit(g, axes, lengths), a), *no_tangents(len(args)))

        return y, pullback

    rule.__doc__ = f"np.fft.{fn.__name__}: the pullback is Re fftn(ȳ padded to n)."
    return rule


def _c2r(fn: Any, kind: str) -> Callable:
    """irfft, irfft2, irfftn: conj(mask · rfftn(ȳ, norm=dual)), back to the input's lengths."""
    defaults = _DEFAULTS[kind]

    def rule(a, *args, **kwargs):
        p = params(args, kwargs, **defaults)
        y = fn(a, *args, **kwargs)
        sizes, axes = _plan(kind, a, p)
        n_last = np.shape(y)[axes[-1]]
        lengths = [np.shape(a)[ax] for ax in axes]
        half = n_last // 2 + 1
        mask = np.full(half, 2.0)
        mask[0] = 1.0
        if n_last % 2 == 0:
            mask[-1] = 1.0
        mshape = [1] * np.ndim(y)
        mshape[axes[-1]] = half
        mask = np.reshape(mask, mshape)
        out_sizes = [np.shape(y)[ax] for ax in axes]

        def pullback(dy):
            r = np.fft.rfftn(dy, s=out_sizes, axes=axes, norm=_DUAL[p["norm"]])
            g = np.conj(mask * r)
            return (project(_fit(g, axes, lengths), a), *no_tangents(len(args)))

        return y, pullback

    rule.__doc__ = f"np.fft.{fn.__name__}: the pullback is conj(mask · rfftn(ȳ, dual norm))."
    return rule


def _linear_frule(fn: Any) -> Callable:
    def rule(tangents, a, *args, **kwargs):
        y = fn(a, *args, **kwargs)
        t = unthunk(tangents[0])
        if t is None or isinstance(t, AbstractZero):
            return y, ZeroTangent()
        return y, fn(t, *args, **kwargs)

    rule.__doc__ = f"np.fft.{fn.__name__}: ẏ = {fn.__name__}(ẋ, ...) (linear)."
    return rule


_DEFAULTS = {
    "1d": {"n": None, "axis": -1, "norm": None, "out": None},
    "2d": {"s": None, "axes": (-2, -1), "norm": None, "out": None},
    "nd": {"s": None, "axes": None, "norm": None, "out": None},
}
_FORWARD = {np.fft.fft, np.fft.fft2, np.fft.fftn}

# fmt: off
FFT: dict[Any, tuple[Callable, str]] = {
    np.fft.fft:    (_c2c, "1d"),
    np.fft.ifft:   (_c2c, "1d"),
    np.fft.fft2:   (_c2c, "2d"),
    np.fft.ifft2:  (_c2c, "2d"),
    np.fft.fftn:   (_c2c, "nd"),
    np.fft.ifftn:  (_c2c, "nd"),
    np.fft.rfft:   (_r2c, "1d"),
    np.fft.rfft2:  (_r2c, "2d"),
    np.fft.rfftn:  (_r2c, "nd"),
    np.fft.irfft:  (_c2r, "1d"),
    np.fft.irfft2: (_c2r, "2d"),
    np.fft.irfftn: (_c2r, "nd"),
}
# fmt: on

for _f, (_make, _kind) in FFT.items():
    register_rrule(_f)(_make(_f, _kind))
    register_frule(_f)(_linear_frule(_f))


def _shift(sign: int) -> Callable:
    def shift(x: Any, axes: Any = None) -> Any:
        ndim = np.ndim(x)
        ax = list(range(ndim)) if axes is None else [axes] if np.ndim(axes) == 0 else list(axes)
        shape = np.shape(x)
        amounts = [(shape[a] // 2) * sign if sign > 0 else -(shape[a] // 2) for a in ax]
        return np.roll(x, amounts, ax)

    return shift


# Composites (merged into the tracer's table by rules.composites).
_DUAL_NORM: dict[Any, Any] = {
    None: "forward",
    "backward": "forward",
    "ortho": "ortho",
    "forward": "backward",
}


def _hfft(a: Any, n: Any = None, axis: int = -1, norm: Any = None, out: Any = None) -> Any:
    """NumPy's definition: ``irfft(conj(a), n, axis)`` under the dual normalisation."""
    if out is not None:
        raise TypeError("np.fft.hfft(..., out=...) writes in place: drop out=")
    return np.fft.irfft(np.conj(a), n, axis, norm=_DUAL_NORM[norm])


def _ihfft(a: Any, n: Any = None, axis: int = -1, norm: Any = None, out: Any = None) -> Any:
    """NumPy's definition: ``conj(rfft(a, n, axis))`` under the dual normalisation."""
    if out is not None:
        raise TypeError("np.fft.ihfft(..., out=...) writes in place: drop out=")
    return np.conj(np.fft.rfft(a, n, axis, norm=_DUAL_NORM[norm]))


FFT_COMPOSITES: dict[Any, Callable] = {
    np.fft.fftshift: _shift(1),
    np.fft.ifftshift: _shift(-1),
    np.fft.hfft: _hfft,
    np.fft.ihfft: _ihfft,
}

__all__ = ["FFT", "FFT_COMPOSITES"]
