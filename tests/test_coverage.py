"""Coverage: common NumPy/SciPy functions through ``fusegrad.grad`` against finite differences,
and against JAX when it is installed (issue 15's "Done means").

``COVERAGE`` is a table of ``(name, function, input maker)``. A function takes ``(xp, sc, *args)``:
``xp`` is NumPy (or ``jax.numpy``) and ``sc`` SciPy (or ``jax.scipy``), so one entry runs in
both. The gradient of ``Σ w · Re f(args)`` (``w`` fixed) with respect to every argument is
compared with central finite differences (every function of issue 15's list is here; none is
known to raise on traced values any more).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy
import scipy.special

import fusegrad as fg
from fusegrad.lazy import small

# ---------------------------------------------------------------- input makers


def _rng(seed):
    return np.random.default_rng(seed)


def vec(n=5, lo=None, hi=None, seed=0):
    def make():
        v = _rng(seed).standard_normal(n)
        if lo is not None:
            v = lo + (hi - lo) * (np.tanh(v) + 1) / 2
        return (v,)

    return make


def mat(m=3, n=4, seed=1):
    return lambda: (_rng(seed).standard_normal((m, n)),)


def pos(n=5, seed=2):
    return lambda: (np.abs(_rng(seed).standard_normal(n)) + 0.5,)


def two(shape_a=(5,), shape_b=(5,), seed=3, positive=False):
    def make():
        r = _rng(seed)
        a, b = r.standard_normal(shape_a), r.standard_normal(shape_b)
        return (np.abs(a) + 0.5, np.abs(b) + 0.5) if positive else (a, b)

    return make


def spd(n=3, seed=4):
    def make():
        a = _rng(seed).standard_normal((n, n))
        return (a @ a.T + n * np.eye(n),)

    return make


def wellcond(m=4, n=3, seed=5):
    def make():
        r = _rng(seed)
        u, _ = np.linalg.qr(r.standard_normal((m, m)))
        v, _ = np.linalg.qr(r.standard_normal((n, n)))
        s = np.zeros((m, n))
        k = min(m, n)
        s[range(k), range(k)] = 2.0 + np.arange(k)[::-1]
        return (u @ s @ v.T,)

    return make


def nonsym(n=3, seed=6):
    return lambda: (np.diag(np.arange(1.0, n + 1) * 2) + 0.3 * _rng(seed).standard_normal((n, n)),)


def with_nans():
    def make():
        v = _rng(7).standard_normal(6)
        v[[1, 4]] = np.nan
        return (v,)

    return make


W = lambda shape: np.cos(np.arange(int(np.prod(shape))) + 0.5).reshape(shape)  # noqa: E731
XP = np.linspace(-2, 2, 6)

# ---------------------------------------------------------------- the table

u1 = vec(lo=-0.9, hi=0.9)  # inside (-1, 1)
g1 = vec(lo=1.2, hi=3.0)  # above 1

COVERAGE = [
    # elementwise
    ("sin", lambda xp, sc, x: xp.sin(x), vec()),
    ("cos", lambda xp, sc, x: xp.cos(x), vec()),
    ("tan", lambda xp, sc, x: xp.tan(x), u1),
    ("arcsin", lambda xp, sc, x: xp.arcsin(x), u1),
    ("arccos", lambda xp, sc, x: xp.arccos(x), u1),
    ("arctan", lambda xp, sc, x: xp.arctan(x), vec()),
    ("sinh", lambda xp, sc, x: xp.sinh(x), vec()),
    ("cosh", lambda xp, sc, x: xp.cosh(x), vec()),
    ("tanh", lambda xp, sc, x: xp.tanh(x), vec()),
    ("arcsinh", lambda xp, sc, x: xp.arcsinh(x), vec()),
    ("arccosh", lambda xp, sc, x: xp.arccosh(x), g1),
    ("arctanh", lambda xp, sc, x: xp.arctanh(x), u1),
    ("exp", lambda xp, sc, x: xp.exp(x), vec()),
    ("exp2", lambda xp, sc, x: xp.exp2(x), vec()),
    ("expm1", lambda xp, sc, x: xp.expm1(x), vec()),
    ("log", lambda xp, sc, x: xp.log(x), pos()),
    ("log2", lambda xp, sc, x: xp.log2(x), pos()),
    ("log10", lambda xp, sc, x: xp.log10(x), pos()),
    ("log1p", lambda xp, sc, x: xp.log1p(x), pos()),
    ("sqrt", lambda xp, sc, x: xp.sqrt(x), pos()),
    ("cbrt", lambda xp, sc, x: xp.cbrt(x), pos()),
    ("square", lambda xp, sc, x: xp.square(x), vec()),
    ("reciprocal", lambda xp, sc, x: xp.reciprocal(x), pos()),
    ("absolute", lambda xp, sc, x: xp.abs(x), vec()),
    ("fabs", lambda xp, sc, x: xp.fabs(x), vec()),
    ("negative", lambda xp, sc, x: xp.negative(x), vec()),
    ("positive", lambda xp, sc, x: xp.positive(x), vec()),
    ("sign", lambda xp, sc, x: xp.sign(x) * x, vec()),
    ("add", lambda xp, sc, a, b: xp.add(a, b), two()),
    ("subtract", lambda xp, sc, a, b: xp.subtract(a, b), two()),
    ("multiply", lambda xp, sc, a, b: xp.multiply(a, b), two()),
    ("divide", lambda xp, sc, a, b: xp.divide(a, b), two(positive=True)),
    ("power", lambda xp, sc, a, b: xp.power(a, b), two(positive=True)),
    ("float_power", lambda xp, sc, a, b: xp.float_power(a, b), two(positive=True)),
    ("maximum", lambda xp, sc, a, b: xp.maximum(a, b), two()),
    ("minimum", lambda xp, sc, a, b: xp.minimum(a, b), two()),
    ("fmax", lambda xp, sc, a, b: xp.fmax(a, b), two()),
    ("fmin", lambda xp, sc, a, b: xp.fmin(a, b), two()),
    ("hypot", lambda xp, sc, a, b: xp.hypot(a, b), two()),
    ("arctan2", lambda xp, sc, a, b: xp.arctan2(a, b), two()),
    ("logaddexp", lambda xp, sc, a, b: xp.logaddexp(a, b), two()),
    ("logaddexp2", lambda xp, sc, a, b: xp.logaddexp2(a, b), two()),
    ("copysign", lambda xp, sc, a, b: xp.copysign(a, b), two()),
    ("deg2rad", lambda xp, sc, x: xp.deg2rad(x), vec()),
    ("rad2deg", lambda xp, sc, x: xp.rad2deg(x), vec()),
    ("radians", lambda xp, sc, x: xp.radians(x), vec()),
    ("degrees", lambda xp, sc, x: xp.degrees(x), vec()),
    ("floor", lambda xp, sc, x: xp.floor(x) + x, vec()),
    ("ceil", lambda xp, sc, x: xp.ceil(x) * x, vec()),
    ("rint", lambda xp, sc, x: xp.rint(x) + x, vec()),
    ("trunc", lambda xp, sc, x: xp.trunc(x) + x, vec()),
    ("round", lambda xp, sc, x: xp.round(x) * x, vec()),
    ("around", lambda xp, sc, x: xp.around(x, 1) + x, vec(seed=11)),
    ("where", lambda xp, sc, a, b: xp.where(a > 0, a, b), two()),
    ("clip", lambda xp, sc, x: xp.clip(x, -0.5, 0.5), vec()),
    ("sinc", lambda xp, sc, x: xp.sinc(x), vec()),
    ("nan_to_num", lambda xp, sc, x: xp.nan_to_num(x) * 2, with_nans()),
    ("real_if_close", lambda xp, sc, x: xp.real(xp.real_if_close(x + 0j)), vec()),
    ("unwrap", lambda xp, sc, x: xp.unwrap(4 * x), vec()),
    # reductions and scans
    ("sum", lambda xp, sc, x: xp.sum(x, axis=0), mat()),
    ("prod", lambda xp, sc, x: xp.prod(x, axis=1), mat()),
    ("mean", lambda xp, sc, x: xp.mean(x, axis=1), mat()),
    ("var", lambda xp, sc, x: xp.var(x, axis=0, ddof=1), mat()),
    ("std", lambda xp, sc, x: xp.std(x), mat()),
    ("max", lambda xp, sc, x: xp.max(x, axis=1), mat()),
    ("min", lambda xp, sc, x: xp.min(x, axis=0), mat()),
    ("amax", lambda xp, sc, x: xp.amax(x), mat()),
    ("amin", lambda xp, sc, x: xp.amin(x, axis=1), mat()),
    ("ptp", lambda xp, sc, x: xp.ptp(x, axis=1), mat()),
    ("cumsum", lambda xp, sc, x: xp.cumsum(x, axis=1), mat()),
    ("cumprod", lambda xp, sc, x: xp.cumprod(x), vec()),
    ("diff", lambda xp, sc, x: xp.diff(x, n=2), vec()),
    ("sort", lambda xp, sc, x: xp.sort(x), vec()),
    ("partition", lambda xp, sc, x: xp.sort(xp.partition(x, 2)[:2]), vec()),
    ("median", lambda xp, sc, x: xp.median(x, axis=1), mat()),
    ("quantile", lambda xp, sc, x: xp.quantile(x, 0.3, axis=0), mat()),
    ("percentile", lambda xp, sc, x: xp.percentile(x, xp.array([20.0, 80.0])), vec(6)),
    ("average", lambda xp, sc, x: xp.average(x, axis=1, weights=xp.arange(1.0, 5.0)), mat()),
    ("cov", lambda xp, sc, x: xp.cov(x), mat()),
    ("corrcoef", lambda xp, sc, x: xp.corrcoef(x), mat()),
    ("nansum", lambda xp, sc, x: xp.nansum(x), with_nans()),
    ("nanmean", lambda xp, sc, x: xp.nanmean(x), with_nans()),
    ("nanvar", lambda xp, sc, x: xp.nanvar(x), with_nans()),
    ("nanstd", lambda xp, sc, x: xp.nanstd(x), with_nans()),
    ("nanprod", lambda xp, sc, x: xp.nanprod(x), with_nans()),
    ("nanmax", lambda xp, sc, x: xp.nanmax(x), with_nans()),
    ("nanmin", lambda xp, sc, x: xp.nanmin(x), with_nans()),
    ("nancumsum", lambda xp, sc, x: xp.nancumsum(x), with_nans()),
    ("nancumprod", lambda xp, sc, x: xp.nancumprod(x), with_nans()),
    ("nanmedian", lambda xp, sc, x: xp.nanmedian(x), with_nans()),
    ("nanquantile", lambda xp, sc, x: xp.nanquantile(x, 0.4), with_nans()),
    ("nanpercentile", lambda xp, sc, x: xp.nanpercentile(x, 70.0), with_nans()),
    ("trapezoid", lambda xp, sc, x: xp.trapezoid(x, dx=0.5), vec()),
    ("gradient", lambda xp, sc, x: xp.gradient(x), vec()),
    # shapes and movement
    ("reshape", lambda xp, sc, x: xp.reshape(x, (4, 3)), mat()),
    ("ravel", lambda xp, sc, x: xp.ravel(x), mat()),
    ("transpose", lambda xp, sc, x: xp.transpose(x), mat()),
    ("moveaxis", lambda xp, sc, x: xp.moveaxis(x, 0, 1), mat()),
    ("swapaxes", lambda xp, sc, x: xp.swapaxes(x, 0, 1), mat()),
    ("rollaxis", lambda xp, sc, x: xp.rollaxis(x, 1), mat()),
    ("squeeze", lambda xp, sc, x: xp.squeeze(x[None]), mat()),
    ("expand_dims", lambda xp, sc, x: xp.expand_dims(x, 1), mat()),
    ("broadcast_to", lambda xp, sc, x: xp.broadcast_to(x, (2, 3, 4)), mat()),
    ("full", lambda xp, sc, x: xp.full((2, 3), x[0]), vec()),
    ("full_like", lambda xp, sc, x: xp.full_like(x, x[0]) * x, vec()),
    ("flip", lambda xp, sc, x: xp.flip(x, 1), mat()),
    ("flipud", lambda xp, sc, x: xp.flipud(x), mat()),
    ("fliplr", lambda xp, sc, x: xp.fliplr(x), mat()),
    ("rot90", lambda xp, sc, x: xp.rot90(x), mat()),
    ("roll", lambda xp, sc, x: xp.roll(x, 2), mat()),
    ("tile", lambda xp, sc, x: xp.tile(x, (2, 1)), mat()),
    ("repeat", lambda xp, sc, x: xp.repeat(x, 2, axis=1), mat()),
    ("concatenate", lambda xp, sc, a, b: xp.concatenate([a, b]), two()),
    ("stack", lambda xp, sc, a, b: xp.stack([a, b], axis=1), two()),
    ("hstack", lambda xp, sc, a, b: xp.hstack([a, b]), two()),
    ("vstack", lambda xp, sc, a, b: xp.vstack([a, b]), two()),
    ("column_stack", lambda xp, sc, a, b: xp.column_stack([a, b]), two()),
    ("append", lambda xp, sc, a, b: xp.append(a, b), two()),
    ("insert", lambda xp, sc, a, b: xp.insert(a, 2, b[0]), two()),
    ("delete", lambda xp, sc, x: xp.delete(x, xp.array([1, 3])), vec()),
    ("split", lambda xp, sc, x: xp.split(x, [1, 3])[1], vec()),
    ("array_split", lambda xp, sc, x: xp.array_split(x, 3)[0], vec()),
    ("hsplit", lambda xp, sc, x: xp.hsplit(x, 2)[1], mat()),
    ("vsplit", lambda xp, sc, x: xp.vsplit(x, 3)[2], mat()),
    ("atleast_2d", lambda xp, sc, x: xp.atleast_2d(x), vec()),
    ("atleast_3d", lambda xp, sc, x: xp.atleast_3d(x), mat()),
    ("meshgrid", lambda xp, sc, a, b: xp.meshgrid(a, b)[0] * xp.meshgrid(a, b)[1], two((3,), (4,))),
    ("pad", lambda xp, sc, x: xp.pad(x, 2), vec()),
    ("pad_reflect", lambda xp, sc, x: xp.pad(x, 2, mode="reflect"), vec()),
    ("pad_wrap", lambda xp, sc, x: xp.pad(x, (1, 3), mode="wrap"), vec()),
    ("pad_edge", lambda xp, sc, x: xp.pad(x, 2, mode="edge"), mat()),
    ("pad_mean", lambda xp, sc, x: xp.pad(x, 2, mode="mean"), vec()),
    ("triu", lambda xp, sc, x: xp.triu(x), mat()),
    ("tril", lambda xp, sc, x: xp.tril(x, -1), mat()),
    ("linspace", lambda xp, sc, a, b: xp.linspace(a[0], b[0], 6), two()),
    ("logspace", lambda xp, sc, a, b: xp.logspace(a[0], b[0], 4), two()),
    ("geomspace", lambda xp, sc, a, b: xp.geomspace(a[0], b[0], 4), two(positive=True)),
    # indexing and selection
    ("getitem", lambda xp, sc, x: x[1:, ::2], mat()),
    ("fancy_getitem", lambda xp, sc, x: x[xp.array([0, 2, 2])], vec()),
    ("take", lambda xp, sc, x: xp.take(x, xp.array([0, 2, 2]), axis=1), mat()),
    ("take_along_axis", lambda xp, sc, x: xp.take_along_axis(x, xp.argsort(x, axis=1), 1), mat()),
    ("diagonal", lambda xp, sc, x: xp.diagonal(x), mat()),
    ("diag", lambda xp, sc, x: xp.diag(x), vec()),
    ("trace", lambda xp, sc, x: xp.trace(x), mat()),
    ("select", lambda xp, sc, x: xp.select([x < 0, x > 1], [x**2, xp.sin(x)], 0.5), vec()),
    (
        "piecewise",
        lambda xp, sc, x: xp.piecewise(x, [x < 0], [lambda v: v**2, lambda v: 3 * v]),
        vec(),
    ),
    ("interp", lambda xp, sc, x, f: xp.interp(x[:5], xp.array(XP), f), two((5,), (6,))),
    # products, polynomials, signals
    ("matmul", lambda xp, sc, a, b: xp.matmul(a, b), two((3, 4), (4, 2))),
    ("dot", lambda xp, sc, a, b: xp.dot(a, b), two((3, 4), (4,))),
    ("tensordot", lambda xp, sc, a, b: xp.tensordot(a, b, 1), two((3, 4), (4, 2))),
    ("inner", lambda xp, sc, a, b: xp.inner(a, b), two((3, 4), (2, 4))),
    ("vdot", lambda xp, sc, a, b: xp.vdot(a, b), two()),
    ("outer", lambda xp, sc, a, b: xp.outer(a, b), two()),
    ("einsum", lambda xp, sc, a, b: xp.einsum("ij,kj->ik", a, b), two((3, 4), (2, 4))),
    ("kron", lambda xp, sc, a, b: xp.kron(a, b), two((2, 2), (2, 3))),
    ("cross", lambda xp, sc, a, b: xp.cross(a, b), two((3,), (3,))),
    ("convolve", lambda xp, sc, a, b: xp.convolve(a, b), two((5,), (3,))),
    ("correlate", lambda xp, sc, a, b: xp.correlate(a, b, "full"), two((5,), (3,))),
    ("polyval", lambda xp, sc, p, x: xp.polyval(p, x), two((4,), (5,))),
    ("polyfit", lambda xp, sc, x, y: xp.polyfit(x, y, 2), two((6,), (6,))),
    ("roots", lambda xp, sc, x: xp.roots(x), vec()),
    # linear algebra
    ("linalg.solve", lambda xp, sc, a: xp.linalg.solve(a, xp.arange(1.0, 4.0)), spd()),
    ("linalg.inv", lambda xp, sc, a: xp.linalg.inv(a), spd()),
    ("linalg.det", lambda xp, sc, a: xp.linalg.det(a), spd()),
    ("linalg.slogdet", lambda xp, sc, a: xp.linalg.slogdet(a)[1], spd()),
    # cholesky, eigh and eigvalsh read one triangle: differentiated on symmetric matrices
    ("linalg.cholesky", lambda xp, sc, a: xp.linalg.cholesky((a + a.T) / 2), spd()),
    ("linalg.eigh", lambda xp, sc, a: xp.linalg.eigh((a + a.T) / 2)[0], spd()),
    ("linalg.eigvalsh", lambda xp, sc, a: xp.linalg.eigvalsh((a + a.T) / 2, "U"), spd()),
    ("linalg.eigvals", lambda xp, sc, a: xp.sort(xp.real(xp.linalg.eigvals(a))), nonsym()),
    ("linalg.eig", lambda xp, sc, a: xp.sort(xp.real(xp.linalg.eig(a)[0])), nonsym()),
    ("linalg.svd", lambda xp, sc, a: xp.linalg.svd(a, compute_uv=False), wellcond()),
    (
        "linalg.svd_uv",
        lambda xp, sc, a: (lambda u, s, vh: (u * s**2) @ vh)(
            *xp.linalg.svd(a, full_matrices=False)
        ),
        wellcond(),
    ),
    ("linalg.qr", lambda xp, sc, a: xp.linalg.qr(a)[1], wellcond()),
    ("linalg.pinv", lambda xp, sc, a: xp.linalg.pinv(a), wellcond()),
    ("linalg.lstsq", lambda xp, sc, a: xp.linalg.lstsq(a, xp.arange(4.0))[0], wellcond()),
    ("linalg.matrix_power", lambda xp, sc, a: xp.linalg.matrix_power(a, 3), spd()),
    ("linalg.multi_dot", lambda xp, sc, a, b: xp.linalg.multi_dot([a, b, a]), two((3, 3), (3, 3))),
    ("linalg.norm", lambda xp, sc, x: xp.linalg.norm(x), mat()),
    ("linalg.norm_nuc", lambda xp, sc, a: xp.linalg.norm(a, "nuc"), wellcond()),
    ("linalg.norm_2", lambda xp, sc, a: xp.linalg.norm(a, 2), wellcond()),
    ("linalg.norm_m2", lambda xp, sc, a: xp.linalg.norm(a, -2), wellcond()),
    ("linalg.norm_1", lambda xp, sc, x: xp.linalg.norm(x, 1, axis=0), mat()),
    # fft
    ("fft.fft", lambda xp, sc, x: xp.abs(xp.fft.fft(x)) ** 2, vec(6)),
    ("fft.ifft", lambda xp, sc, x: xp.real(xp.fft.ifft(x, norm="ortho")), vec(6)),
    ("fft.rfft", lambda xp, sc, x: xp.abs(xp.fft.rfft(x, n=8)) ** 2, vec(6)),
    ("fft.irfft", lambda xp, sc, x: xp.fft.irfft(x), vec(6)),
    ("fft.fft2", lambda xp, sc, x: xp.real(xp.fft.fft2(x) ** 2), mat()),
    ("fft.ifft2", lambda xp, sc, x: xp.imag(xp.fft.ifft2(x, norm="forward")), mat()),
    ("fft.rfft2", lambda xp, sc, x: xp.abs(xp.fft.rfft2(x)), mat()),
    ("fft.irfft2", lambda xp, sc, x: xp.fft.irfft2(x), mat()),
    ("fft.fftn", lambda xp, sc, x: xp.real(xp.fft.fftn(x)), mat()),
    ("fft.ifftn", lambda xp, sc, x: xp.real(xp.fft.ifftn(x, axes=(0,))), mat()),
    ("fft.rfftn", lambda xp, sc, x: xp.abs(xp.fft.rfftn(x)) ** 2, mat()),
    ("fft.irfftn", lambda xp, sc, x: xp.fft.irfftn(x, s=(3, 5), axes=(0, 1)), mat()),
    ("fft.fftshift", lambda xp, sc, x: xp.fft.fftshift(x) * xp.arange(5.0), vec()),
    ("fft.ifftshift", lambda xp, sc, x: xp.fft.ifftshift(x) * xp.arange(5.0), vec()),
    # the rest of NumPy's surface (rules/surface.py; every name: tests/test_numpy_surface.py)
    ("polyder", lambda xp, sc, p: xp.polyder(p, 2), vec()),
    ("polyint", lambda xp, sc, p: xp.polyint(p, 2), vec()),
    ("polyadd", lambda xp, sc, a, b: xp.polyadd(a, b), two((5,), (3,))),
    ("polysub", lambda xp, sc, a, b: xp.polysub(a, b), two((3,), (5,))),
    ("polymul", lambda xp, sc, a, b: xp.polymul(a, b), two((4,), (3,))),
    ("poly", lambda xp, sc, x: xp.poly(x), vec(4)),
    ("vander", lambda xp, sc, x: xp.vander(x, 4, increasing=True), vec()),
    ("i0", lambda xp, sc, x: xp.i0(4 * x), vec()),
    ("linalg.cond", lambda xp, sc, a: xp.linalg.cond(a), wellcond(3, 3)),
    ("linalg.cond_fro", lambda xp, sc, a: xp.linalg.cond(a, "fro"), spd()),
    (
        "linalg.tensorinv",
        lambda xp, sc, a: xp.linalg.tensorinv(xp.reshape(a, (2, 2, 4)), 2),
        lambda: (np.eye(4) * 3 + 0.3 * _rng(8).standard_normal((4, 4)),),
    ),
    (
        "linalg.tensorsolve",
        lambda xp, sc, a, b: xp.linalg.tensorsolve(xp.reshape(a, (2, 2, 2, 2)), b),
        lambda: (np.eye(4) * 3 + 0.3 * _rng(9).standard_normal((4, 4)), np.ones((2, 2))),
    ),
    ("modf", lambda xp, sc, x: xp.modf(3 * x)[0], vec(seed=12)),
    ("frexp", lambda xp, sc, x: xp.frexp(3 * x)[0], vec(seed=13)),
    ("ldexp", lambda xp, sc, x: xp.ldexp(x, xp.arange(5)), vec()),
    ("ediff1d", lambda xp, sc, x: xp.ediff1d(x, to_end=x[:2]), vec()),
    ("bincount", lambda xp, sc, w: xp.bincount(xp.array([0, 2, 2, 1, 0]), w, 4), vec()),
    (
        "histogram",
        lambda xp, sc, w: xp.histogram(xp.arange(5.0), 3, weights=w, density=True)[0],
        vec(),
    ),
    ("unique", lambda xp, sc, x: xp.unique(xp.concatenate([x, x[:2]])), vec()),
    ("apply_along_axis", lambda xp, sc, x: xp.apply_along_axis(xp.cumsum, 1, x), mat()),
    ("cumulative_sum", lambda xp, sc, x: xp.cumulative_sum(x, axis=1), mat()),
    ("vecdot", lambda xp, sc, a, b: xp.vecdot(a, b), two((3, 4), (4,))),
    ("linalg.vector_norm", lambda xp, sc, x: xp.linalg.vector_norm(x, ord=3, axis=1), mat()),
    # scipy.special ufuncs with rules
    ("special.expit", lambda xp, sc, x: sc.special.expit(x), vec()),
    ("special.logit", lambda xp, sc, x: sc.special.logit(x), vec(lo=0.1, hi=0.9)),
    ("special.erf", lambda xp, sc, x: sc.special.erf(x), vec()),
    ("special.erfc", lambda xp, sc, x: sc.special.erfc(x), vec()),
    ("special.xlogy", lambda xp, sc, a, b: sc.special.xlogy(a, b), two(positive=True)),
    ("special.gammaln", lambda xp, sc, x: sc.special.gammaln(x), pos()),
    ("special.digamma", lambda xp, sc, x: sc.special.digamma(x), pos()),
    ("special.gammainc_a", lambda xp, sc, a: sc.special.gammainc(a, xp.asarray(XP) + 2.5), pos(6)),
    ("special.gammaincc_a", lambda xp, sc, a, x: sc.special.gammaincc(a, x), two(positive=True)),
]

# ---------------------------------------------------------------- checks


def _loss(f, xp, sc):
    def loss(*args):
        y = f(xp, sc, *args)
        return xp.sum(xp.asarray(W(np.shape(y))) * xp.real(y))

    return loss


def _fd_grad(loss, args, h=1e-6):
    out = []
    for i, a in enumerate(args):
        a = np.asarray(a, dtype=float)
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            e = np.zeros_like(a)
            e[idx] = h
            up = list(args)
            dn = list(args)
            up[i], dn[i] = a + e, a - e
            fu, fd = loss(*up), loss(*dn)
            g[idx] = 0.0 if fu == fd else (fu - fd) / (2 * h)  # nan-safe: equal -> 0
        out.append(g)
    return out


def _finite_args(args):
    return [np.where(np.isnan(a), 0.0, a) if np.ndim(a) else a for a in args]


@pytest.mark.parametrize("name,f,make", COVERAGE, ids=[c[0] for c in COVERAGE])
def test_grad_against_finite_differences(name, f, make):
    args = make()
    loss = _loss(f, np, scipy)
    with np.errstate(all="ignore"):
        grads = fg.grad(loss, argnums=tuple(range(len(args))))(*args)
        want = _fd_grad(loss, args)
    for g, w, a in zip(grads, want, args, strict=True):
        assert np.shape(g) == np.shape(a)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("name,f,make", COVERAGE, ids=[c[0] for c in COVERAGE])
def test_grad_on_the_small_array_path(name, f, make, small_path):
    """The same gradients with the small-array path on (the default below 10^4 elements), where
    rules compute on NumPy arrays at once and pullbacks run eagerly: they agree with the fused
    path's to rounding."""
    args = make()
    loss = _loss(f, np, scipy)
    argnums = tuple(range(len(args)))
    with np.errstate(all="ignore"):
        got = fg.grad(loss, argnums=argnums)(*args)
        small.EAGER_BELOW = 0
        fused = fg.grad(loss, argnums=argnums)(*args)
    for g, w, a in zip(got, fused, args, strict=True):
        assert np.shape(g) == np.shape(a) and np.result_type(g) == np.result_type(w)
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12, err_msg=name)


def test_table_is_large():
    names = [c[0] for c in COVERAGE]
    assert len(set(names)) == len(names) >= 150


def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jax.scipy as jsp

    return jax, jnp, jsp


# JAX compiles every primitive on first use (about a second per entry): one entry in twenty runs by
# default, the whole table with `-m slow`.
JAX_CASES = [
    pytest.param(*c, id=c[0], marks=() if i % 20 == 0 else pytest.mark.slow)
    for i, c in enumerate(COVERAGE)
]


# Entries where JAX's gradient is not the derivative (finite differences agree with fusegrad).
JAX_DIFFERS = {"unique": "jnp.unique's gradient is zero: its values are not differentiated"}


@pytest.mark.parametrize("name,f,make", JAX_CASES)
def test_grad_against_jax(name, f, make):
    if name in JAX_DIFFERS:
        pytest.skip(JAX_DIFFERS[name])
    jax, jnp, jsp = _jax()
    args = make()
    jloss = _loss(f, jnp, jsp)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            jg = jax.grad(jloss, argnums=tuple(range(len(args))))(*(jnp.asarray(a) for a in args))
    except (AttributeError, NotImplementedError, TypeError, ValueError) as e:
        pytest.skip(f"JAX does not run this entry: {type(e).__name__}: {e}")
    with np.errstate(all="ignore"):
        grads = fg.grad(_loss(f, np, scipy), argnums=tuple(range(len(args))))(*args)
    for g, w in zip(grads, jg, strict=True):
        w = np.asarray(w)
        if np.any(np.isnan(w)) and not np.any(np.isnan(g)):
            # JAX's nan-reductions propagate nan gradients through nan entries; ours are 0 there
            w = np.where(np.isnan(w), 0.0, w)
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-8, err_msg=name)
