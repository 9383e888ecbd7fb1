"""NumPy's public surface, classified: every public callable of ``np``, ``np.linalg`` and
``np.fft`` has exactly one entry in ``SURFACE`` below, so a function nobody classified (a new
NumPy release) fails ``test_every_public_function_is_classified`` with the line to add.

An entry is one of
- ``C("name")``: differentiable, checked against finite differences by ``tests/test_coverage.py``
  (its ``COVERAGE`` entry ``name``);
- ``G(f, make)``: differentiable, checked here: ``fg.grad`` of ``Σ w · Re f(x)`` against central
  finite differences on the small input ``make()``;
- ``Z(f, make)``: no derivative (integer, boolean or piecewise-constant output, as in JAX):
  the gradient through it is zero and it raises nothing;
- ``A("other")``: another name of the same function object, classified under ``other``;
- ``O("reason")``: out of scope for AD (I/O, printing, configuration, dtype and memory queries,
  integer-only ufuncs, constructors from shapes, in-place mutation), with the reason.

The numpy engine and tiny inputs keep this module fast (well under 10 s).
"""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest
from test_coverage import COVERAGE

import fusegrad as fg
from fusegrad.testing import check_frule, check_grads, check_rrule

pytestmark = pytest.mark.filterwarnings("ignore:`row_stack` alias is deprecated:DeprecationWarning")


def C(entry: str | None = None):
    return ("cov", entry)


def G(f, make=None):
    return ("grad", f, make)


def Z(f, make=None):
    return ("zero", f, make)


def A(other: str):
    return ("alias", other)


def O(reason: str):  # noqa: E743
    return ("out", reason)


def _v(n=5, seed=0, lo=None, hi=None):
    def make():
        v = np.random.default_rng(seed).standard_normal(n)
        if lo is not None:
            v = lo + (hi - lo) * (np.tanh(v) + 1) / 2
        return v

    return make


V = _v()
M33 = np.array([[3.0, 1.0, 0.5], [0.2, 2.0, 0.1], [0.4, 0.3, 4.0]])
IO = "I/O: reads or writes files or buffers"
PRINT = "printing and formatting of arrays or numbers"
CONF = "configuration, error handling or build information"
DTYPE = "dtype and type queries: no array values"
MEM = "memory layout queries and copies into a layout (conversions: tests/test_conversions.py)"
INT = "integer-only ufunc: integer arrays carry no derivative and are never traced"
NEW = "constructor from shapes or integers: no array input to differentiate"
INDEX = "builds index arrays from shapes"
INPLACE = "writes into its argument in place, which AD cannot follow (build a new array)"
DATE = "datetime and business-day arithmetic"
STRUCT = "reads only a shape or type (rules/tables.STRUCTURAL: runs on the primal)"
CONV = "conversion of a traced value: wrapped while a trace runs (tests/test_conversions.py)"
WINDOW = "window of an integer length M"

# fmt: off
SURFACE: dict[str, tuple] = {
    # ---- elementwise (ufuncs and friends)
    "abs": A("absolute"), "absolute": C(), "acos": A("arccos"), "acosh": A("arccosh"),
    "add": C(), "arccos": C(), "arccosh": C(), "arcsin": C(), "arcsinh": C(), "arctan": C(),
    "arctan2": C(), "arctanh": C(), "asin": A("arcsin"), "asinh": A("arcsinh"),
    "atan": A("arctan"), "atan2": A("arctan2"), "atanh": A("arctanh"), "cbrt": C(),
    "ceil": C(), "clip": C(), "conj": A("conjugate"),
    "conjugate": G(lambda x: np.conjugate(x * (1 + 2j))), "copysign": C(), "cos": C(),
    "cosh": C(), "deg2rad": C(), "degrees": C(), "divide": C(), "exp": C(), "exp2": C(),
    "expm1": C(), "fabs": C(), "float_power": C(), "floor": C(), "fmax": C(), "fmin": C(),
    "fmod": G(lambda x: np.fmod(3 * x, 0.65)), "hypot": C(), "imag": G(lambda x: np.imag(x * 1j)),
    "angle": G(lambda x: np.angle(x + 2j)), "real": G(lambda x: np.real(x * (2 - 1j))),
    "log": C(), "log10": C(), "log1p": C(), "log2": C(), "logaddexp": C(), "logaddexp2": C(),
    "maximum": C(), "minimum": C(), "mod": A("remainder"), "multiply": C(), "negative": C(),
    "positive": C(), "pow": A("power"), "power": C(), "rad2deg": C(), "radians": C(),
    "reciprocal": C(), "remainder": G(lambda x: np.remainder(3 * x, 0.65)), "rint": C(),
    "sign": C(), "sin": C(), "sinc": C(), "sinh": C(), "sqrt": C(), "square": C(),
    "subtract": C(), "tan": C(), "tanh": C(), "true_divide": A("divide"), "trunc": C(),
    "where": C(), "nan_to_num": C(), "real_if_close": C(), "unwrap": C(), "round": C(),
    "around": C(), "fix": Z(lambda x: np.fix(3 * x)), "i0": G(lambda x: np.i0(5 * x)),
    "modf": G(lambda x: np.modf(3 * x)[0] + np.modf(3 * x)[1]),
    "frexp": G(lambda x: np.frexp(3 * x)[0]), "ldexp": G(lambda x: np.ldexp(x, np.arange(5))),
    "divmod": G(lambda x: np.divmod(3 * x, 0.65)[1]),
    "spacing": Z(np.spacing), "nextafter": G(lambda x: np.nextafter(x, 0.0)),
    "heaviside": Z(lambda x: np.heaviside(x, 0.5)),
    "floor_divide": Z(lambda x: np.floor_divide(x, 0.3)),
    "signbit": Z(np.signbit), "isfinite": Z(np.isfinite), "isinf": Z(np.isinf),
    "isnan": Z(np.isnan), "isneginf": Z(np.isneginf), "isposinf": Z(np.isposinf),
    "iscomplex": Z(np.iscomplex), "isreal": Z(np.isreal),
    "equal": Z(lambda x: np.equal(x, x[0])), "not_equal": Z(lambda x: np.not_equal(x, x[0])),
    "greater": Z(lambda x: np.greater(x, 0)), "greater_equal": Z(lambda x: x >= 0),
    "less": Z(lambda x: np.less(x, 0)), "less_equal": Z(lambda x: np.less_equal(x, 0)),
    "logical_and": Z(lambda x: np.logical_and(x > 0, x < 1)),
    "logical_or": Z(lambda x: np.logical_or(x > 0, x < -1)),
    "logical_xor": Z(lambda x: np.logical_xor(x > 0, x < 1)),
    "logical_not": Z(lambda x: np.logical_not(x > 0)),
    "isclose": Z(lambda x: np.isclose(x, x[0])), "allclose": Z(lambda x: np.allclose(x, 0)),
    "array_equal": Z(lambda x: np.array_equal(x, x)),
    "array_equiv": Z(lambda x: np.array_equiv(x, x[0])),
    "bitwise_and": O(INT), "bitwise_count": O(INT), "bitwise_invert": O(INT),
    "bitwise_left_shift": O(INT), "bitwise_not": O(INT), "bitwise_or": O(INT),
    "bitwise_right_shift": O(INT), "bitwise_xor": O(INT), "gcd": O(INT), "invert": O(INT),
    "lcm": O(INT), "left_shift": O(INT), "right_shift": O(INT),
    "isnat": O("datetime ufunc (NaT test)"),
    # ---- reductions, scans, statistics
    "all": Z(lambda x: np.all(x > -5)), "any": Z(lambda x: np.any(x > 0)),
    "amax": C(), "amin": C(), "max": C(), "min": C(), "sum": C(), "prod": C(), "mean": C(),
    "var": C(), "std": C(), "ptp": C(), "cumsum": C(), "cumprod": C(), "diff": C(),
    "cumulative_sum": G(lambda x: np.cumulative_sum(x, include_initial=True)),
    "cumulative_prod": G(np.cumulative_prod), "ediff1d": G(lambda x: np.ediff1d(x, x[0], 2.0)),
    "median": C(), "quantile": C(), "percentile": C(), "average": C(), "cov": C(),
    "corrcoef": C(), "nansum": C(), "nanmean": C(), "nanvar": C(), "nanstd": C(),
    "nanprod": C(), "nanmax": C(), "nanmin": C(), "nancumsum": C(), "nancumprod": C(),
    "nanmedian": C(), "nanquantile": C(), "nanpercentile": C(), "trapezoid": C(),
    "gradient": C(), "argmax": Z(np.argmax), "argmin": Z(np.argmin),
    "nanargmax": Z(np.nanargmax), "nanargmin": Z(np.nanargmin), "argsort": Z(np.argsort),
    "argpartition": Z(lambda x: np.argpartition(x, 2)), "argwhere": Z(lambda x: np.argwhere(x > 0)),
    "nonzero": Z(lambda x: np.nonzero(x > 0)[0]), "flatnonzero": Z(lambda x: np.flatnonzero(x > 0)),
    "count_nonzero": Z(lambda x: np.count_nonzero(x > 0)),
    "searchsorted": Z(lambda x: np.searchsorted(np.sort(x), 0.1)),
    "digitize": Z(lambda x: np.digitize(x, [-1.0, 0.0, 1.0])),
    "lexsort": Z(lambda x: np.lexsort((x, x > 0))), "isin": Z(lambda x: np.isin(x, x[:2])),
    "bincount": G(lambda w: np.bincount(np.array([0, 2, 2, 1, 0]), weights=w, minlength=4)),
    "histogram": G(lambda x: np.histogram(x, 3, density=True)[0] + np.histogram(x, 3)[1][1]),
    "histogram2d": G(
        lambda w: np.histogram2d(np.arange(5.0), np.arange(5.0) ** 2, 2, weights=w)[0]
    ),
    "histogramdd": G(
        lambda w: np.histogramdd(np.arange(10.0).reshape(5, 2), 2, weights=w, density=True)[0]
    ),
    "histogram_bin_edges": G(lambda x: np.histogram_bin_edges(x, 4)),
    # ---- shapes, joining, movement, selection
    "reshape": C(), "ravel": C(), "transpose": C(), "moveaxis": C(), "swapaxes": C(),
    "rollaxis": C(), "squeeze": C(), "expand_dims": C(), "broadcast_to": C(), "flip": C(),
    "flipud": C(), "fliplr": C(), "rot90": C(), "roll": C(), "tile": C(), "repeat": C(),
    "concatenate": C(), "concat": A("concatenate"), "stack": C(), "hstack": C(), "vstack": C(),
    "column_stack": C(), "append": C(), "insert": C(), "delete": C(), "split": C(),
    "array_split": C(), "hsplit": C(), "vsplit": C(), "atleast_2d": C(), "atleast_3d": C(),
    "atleast_1d": G(lambda x: np.atleast_1d(x[0]) * x), "meshgrid": C(), "pad": C(),
    "triu": C(), "tril": C(), "linspace": C(), "logspace": C(), "geomspace": C(),
    "full": C(), "full_like": C(), "permute_dims": A("transpose"),
    "dsplit": G(lambda x: np.dsplit(x.reshape(1, 1, 5), [2])[1]),
    "dstack": G(lambda x: np.dstack([x, x**2])),
    "row_stack": G(lambda x: np.row_stack([x, x**2])),
    "block": G(lambda x: np.block([[x[:2], x[2:]], [x[3:], x[:3]]])),
    "resize": G(lambda x: np.resize(x, (2, 4))),
    "unstack": G(lambda x: np.unstack(x.reshape(5, 1))[2]),
    "broadcast_arrays": G(lambda x: np.broadcast_arrays(x, x[:1])[1] * x),
    "matrix_transpose": G(lambda x: np.matrix_transpose(np.outer(x, x[:2]))),
    "copy": G(lambda x: np.copy(x) ** 2),
    "copyto": O(INPLACE + " (np.copyto into a new array: rules/composites._copyto)"),
    "diagflat": G(lambda x: np.diagflat(x[:3], 1)),
    "take": C(), "take_along_axis": C(), "diagonal": C(), "diag": C(), "trace": C(),
    "select": C(), "piecewise": C(), "interp": C(), "partition": C(), "sort": C(),
    "sort_complex": G(lambda x: np.real(np.sort_complex(x)) * x),
    "extract": G(lambda x: np.extract(x > 0, x) ** 2),
    "compress": G(lambda x: np.compress([True, False, True], x) ** 2),
    "choose": G(lambda x: np.choose([0, 1, 0, 1, 1], [x, x**2])),
    "trim_zeros": G(lambda x: np.trim_zeros(x * np.array([0.0, 1, 1, 1, 0]))),
    "unique": G(lambda x: np.unique(np.concatenate([x, x[:2]]))),
    "unique_values": G(lambda x: np.unique_values(np.concatenate([x, x[:2]]))),
    "unique_counts": G(lambda x: np.unique_counts(x).values * np.unique_counts(x).counts),
    "unique_inverse": G(lambda x: np.unique_inverse(x).values),
    "unique_all": G(lambda x: np.unique_all(x).values),
    "union1d": G(lambda x: np.union1d(x, 2 * x[:2])),
    "intersect1d": G(lambda x: np.intersect1d(x, x[:2])),
    "setdiff1d": G(lambda x: np.setdiff1d(x, x[:2])),
    "setxor1d": G(lambda x: np.setxor1d(x, 2 * x[:2])),
    "apply_along_axis": G(
        lambda x: np.apply_along_axis(lambda v: v**2 * v[0], 1, np.outer(x[:2], x))
    ),
    "apply_over_axes": G(lambda x: np.apply_over_axes(np.sum, np.outer(x[:2], x), [1])),
    # ---- products, polynomials, signals
    "matmul": C(), "dot": C(), "tensordot": C(), "inner": C(), "vdot": C(), "outer": C(),
    "einsum": C(), "kron": C(), "cross": C(), "convolve": C(), "correlate": C(),
    "vecdot": G(lambda x: np.vecdot(np.outer(x[:2], x), x**2)),
    "matvec": G(lambda x: np.matvec(np.outer(x, x[:3]), x[:3] ** 2)),
    "vecmat": G(lambda x: np.vecmat(x**2, np.outer(x, x[:3]))),
    "polyval": C(), "polyfit": C(), "roots": C(), "polyder": G(lambda p: np.polyder(p, 2)),
    "polyint": G(lambda p: np.polyint(p, 2, k=[p[0], 1.0])),
    "polyadd": G(lambda p: np.polyadd(p, p[:3] ** 2)),
    "polysub": G(lambda p: np.polysub(p[:2], p**2)),
    "polymul": G(lambda p: np.polymul(p, p[:3])),
    "polydiv": G(lambda p: np.concatenate(np.polydiv(p, p[:3] + 3))),
    "poly": G(lambda p: np.poly(p)), "vander": G(lambda x: np.vander(x, 3)),
    # ---- linalg
    "linalg.solve": C(), "linalg.inv": C(), "linalg.det": C(), "linalg.slogdet": C(),
    "linalg.cholesky": C(), "linalg.eigh": C(), "linalg.eigvalsh": C(), "linalg.eigvals": C(),
    "linalg.eig": C(), "linalg.svd": C(), "linalg.qr": C(), "linalg.pinv": C(),
    "linalg.lstsq": C(), "linalg.matrix_power": C(), "linalg.multi_dot": C(),
    "linalg.norm": C(), "linalg.matrix_rank": Z(lambda x: np.linalg.matrix_rank(np.outer(x, x))),
    "linalg.cond": G(
        lambda x: np.stack(
            [np.linalg.cond(M33 + np.diag(x[:3]), p) for p in (None, -2, 1, "fro", np.inf)]
        )
    ),
    "linalg.tensorinv": G(
        lambda x: np.linalg.tensorinv(np.reshape(3 * np.eye(4) + np.outer(x[:4], x[1:]), (2, 2, 4)))
    ),
    "linalg.tensorsolve": G(
        lambda x: np.linalg.tensorsolve(
            np.reshape(3 * np.eye(4) + np.outer(x[:4], x[1:]), (2, 2, 2, 2)), x[:4].reshape(2, 2)
        )
    ),
    "linalg.matrix_norm": G(lambda x: np.linalg.matrix_norm(np.outer(x, x[:3] + 2), ord=1)),
    "linalg.vector_norm": G(lambda x: np.linalg.vector_norm(x, ord=3)),
    "linalg.svdvals": G(lambda x: np.linalg.svdvals(M33 + np.diag(x[:3]))),
    "linalg.matmul": G(lambda x: np.linalg.matmul(np.outer(x, x[:2]), x[:2])),
    "linalg.tensordot": G(lambda x: np.linalg.tensordot(x, x**2, axes=1)),
    "linalg.outer": G(lambda x: np.linalg.outer(x, x[:2])),
    "linalg.cross": G(lambda x: np.linalg.cross(x[:3], x[2:])),
    "linalg.diagonal": G(lambda x: np.linalg.diagonal(np.outer(x, x[:3]), offset=1)),
    "linalg.trace": G(lambda x: np.linalg.trace(np.outer(x, x))),
    "linalg.vecdot": G(lambda x: np.linalg.vecdot(x, x**2)),
    "linalg.matrix_transpose": G(lambda x: np.linalg.matrix_transpose(np.outer(x, x[:2]))),
    # ---- fft
    "fft.fft": C(), "fft.ifft": C(), "fft.rfft": C(), "fft.irfft": C(), "fft.fft2": C(),
    "fft.ifft2": C(), "fft.rfft2": C(), "fft.irfft2": C(), "fft.fftn": C(), "fft.ifftn": C(),
    "fft.rfftn": C(), "fft.irfftn": C(), "fft.fftshift": C(), "fft.ifftshift": C(),
    "fft.hfft": G(lambda x: np.fft.hfft(x * (1 + 0.5j))),
    "fft.ihfft": G(lambda x: np.abs(np.fft.ihfft(x)) ** 2),
    "fft.fftfreq": G(lambda x: np.fft.fftfreq(4, x[0] + 3)),
    "fft.rfftfreq": G(lambda x: np.fft.rfftfreq(5, x[1] + 3)),
    # ---- structural and conversions
    "shape": O(STRUCT), "ndim": O(STRUCT), "size": O(STRUCT), "result_type": O(STRUCT),
    "iscomplexobj": O(STRUCT), "isrealobj": O(STRUCT), "zeros_like": O(STRUCT),
    "ones_like": O(STRUCT), "empty_like": O(STRUCT), "broadcast_shapes": O(STRUCT),
    "array": O(CONV), "asarray": O(CONV), "asanyarray": O(CONV),
    "astype": G(lambda x: np.astype(x**2, np.float64)),
    "asarray_chkfinite": O(MEM), "ascontiguousarray": O(MEM), "asfortranarray": O(MEM),
    "asmatrix": O("np.matrix is a legacy subclass: use 2-d arrays"), "bmat": O("np.matrix"),
    "require": O(MEM), "may_share_memory": O(MEM), "shares_memory": O(MEM), "isfortran": O(MEM),
    "from_dlpack": O(MEM),
    # ---- constructors, index builders
    "arange": O(NEW), "empty": O(NEW), "eye": O(NEW), "identity": O(NEW), "ones": O(NEW),
    "zeros": O(NEW), "tri": O(NEW), "fromfunction": O(NEW + " (calls a function on indices)"),
    "fromiter": O(IO), "frompyfunc": O("wraps a Python function as an object-dtype ufunc"),
    "bartlett": O(WINDOW), "blackman": O(WINDOW), "hamming": O(WINDOW), "hanning": O(WINDOW),
    "kaiser": O(WINDOW + " (its shape parameter beta is a constant)"),
    "indices": O(INDEX), "ix_": O(INDEX), "diag_indices": O(INDEX),
    "mask_indices": O(INDEX), "tril_indices": O(INDEX), "triu_indices": O(INDEX),
    # index builders reading a traced array's shape (they raised NoRuleError on one)
    "diag_indices_from": G(lambda x: np.outer(x, x)[np.diag_indices_from(np.outer(x, x))]),
    "tril_indices_from": G(lambda x: np.outer(x, x)[np.tril_indices_from(np.outer(x, x), -1)]),
    "triu_indices_from": G(lambda x: np.outer(x, x ** 2)[np.triu_indices_from(np.outer(x, x))]),
    "ravel_multi_index": O(INDEX), "unravel_index": O(INDEX),
    "einsum_path": G(  # (a contraction order: shapes only; on traced operands too)
        lambda x: np.einsum("i,i", x, x**2, optimize=np.einsum_path("i,i", x, x**2)[0])
    ),
    "nested_iters": O("iterator objects"), "packbits": O(INT), "unpackbits": O(INT),
    "fill_diagonal": O(INPLACE), "place": O(INPLACE), "put": O(INPLACE),
    "put_along_axis": O(INPLACE), "putmask": O(INPLACE),
    # ---- I/O, printing, configuration, dtypes, dates
    "load": O(IO), "loadtxt": O(IO), "save": O(IO), "savetxt": O(IO), "savez": O(IO),
    "savez_compressed": O(IO), "genfromtxt": O(IO), "fromfile": O(IO), "frombuffer": O(IO),
    "fromregex": O(IO), "fromstring": O(IO),
    "array2string": O(PRINT), "array_repr": O(PRINT), "array_str": O(PRINT),
    "base_repr": O(PRINT), "binary_repr": O(PRINT), "format_float_positional": O(PRINT),
    "format_float_scientific": O(PRINT), "get_printoptions": O(PRINT),
    "set_printoptions": O(PRINT), "printoptions": O(PRINT), "info": O(PRINT),
    "typename": O(PRINT),
    "getbufsize": O(CONF), "setbufsize": O(CONF), "geterr": O(CONF), "seterr": O(CONF),
    "geterrcall": O(CONF), "seterrcall": O(CONF), "get_include": O(CONF),
    "show_config": O(CONF), "show_runtime": O(CONF), "test": O(CONF),
    "can_cast": O(DTYPE), "common_type": O(DTYPE), "isdtype": O(DTYPE), "issubdtype": O(DTYPE),
    "min_scalar_type": O(DTYPE), "mintypecode": O(DTYPE), "promote_types": O(DTYPE),
    "isscalar": O(DTYPE), "iterable": O(DTYPE),
    "busday_count": O(DATE), "busday_offset": O(DATE), "is_busday": O(DATE),
    "datetime_as_string": O(DATE), "datetime_data": O(DATE),
}
# fmt: on


def _public() -> dict[str, object]:
    """Every public callable of np, np.linalg and np.fft (no classes, modules or constants)."""
    out: dict[str, object] = {}
    for prefix, mod in (("", np), ("linalg.", np.linalg), ("fft.", np.fft)):
        names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
        for n in names:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated aliases warn on access
                f = getattr(mod, n, None)
            if f is None or isinstance(f, type | types.ModuleType) or not callable(f):
                continue
            out[prefix + n] = f
    return out


def _func(name: str):
    mod = np
    for part in name.split(".")[:-1]:
        mod = getattr(mod, part)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(mod, name.split(".")[-1], None)


PUBLIC = _public()
COVERED = {c[0] for c in COVERAGE}


def test_every_public_function_is_classified():
    missing = sorted(set(PUBLIC) - set(SURFACE))
    assert not missing, (
        f"NumPy functions nobody classified for AD: {missing}. Add each to SURFACE in "
        "tests/test_numpy_surface.py: G(f) with a finite-difference check if it is "
        "differentiable (a rule or composite in src/fusegrad/rules/), Z(f) if its output has no "
        'derivative (rules/tables.NONDIFF or the nondiff declarator), O("reason") if out of scope'
    )


def test_entries_are_consistent():
    for name, spec in SURFACE.items():
        if _func(name) is None:
            continue  # another NumPy version
        if spec[0] == "cov":
            assert (spec[1] or name) in COVERED, f"{name}: no COVERAGE entry {spec[1] or name!r}"
        elif spec[0] == "alias":
            assert _func(name) is _func(spec[1]), f"{name} is not the same function as {spec[1]}"
            assert spec[1] in SURFACE and SURFACE[spec[1]][0] != "alias", name
        elif spec[0] == "out":
            assert isinstance(spec[1], str) and spec[1], f"{name}: give the reason"


def _weights(shape):
    return np.cos(np.arange(int(np.prod(shape))) + 0.5).reshape(shape)


def _loss(f):
    def loss(x):
        y = f(x)
        return np.sum(_weights(np.shape(y)) * np.real(y))

    return loss


def _cases(kind):
    return [
        pytest.param(name, spec[1], spec[2] or V, id=name)
        for name, spec in SURFACE.items()
        if spec[0] == kind and _func(name) is not None
    ]


@pytest.mark.parametrize("name,f,make", _cases("grad"))
def test_differentiable_against_finite_differences(name, f, make):
    x = make()
    loss = _loss(f)
    with np.errstate(all="ignore"):
        y, _ = fg.vjp(f, x)  # the traced function computes NumPy's values
        np.testing.assert_allclose(np.asarray(y), f(x), rtol=1e-12, atol=1e-12, err_msg=name)
        g = fg.grad(loss)(x)
        h = 1e-6
        want = np.array([(loss(x + h * e) - loss(x - h * e)) / (2 * h) for e in np.eye(x.size)])
    assert np.shape(g) == np.shape(x)
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6, err_msg=name)
    v = np.cos(np.arange(x.size) * 1.3)  # forward mode: the directional derivative g · v
    with np.errstate(all="ignore"):
        _, dot = fg.jvp(loss, (x,), (v,))
    np.testing.assert_allclose(dot, want @ v, rtol=1e-5, atol=1e-6, err_msg=f"{name} (jvp)")


@pytest.mark.parametrize("name,f,make", _cases("zero"))
def test_nondifferentiable_give_zero(name, f, make):
    x = make()

    def loss(x):
        y = np.asarray(f(x), dtype=float) if not _is_traced(f(x)) else f(x) * 1.0
        return np.sum(_weights(np.shape(y)) * y) + np.sum(0.0 * x)

    with np.errstate(all="ignore"):
        g = fg.grad(loss)(x)
    np.testing.assert_array_equal(g, np.zeros_like(x), err_msg=name)


def _is_traced(v):
    return getattr(type(v), "__fusegrad_traced__", False) or type(v).__module__.startswith(
        "fusegrad"
    )


# ---------------------------------------------------------------- the rules written by hand

X = np.array([0.3, -1.7, 2.45, 0.8, -0.35])
Y = np.array([[0.5, -1.0, 2.0, 0.3, 1.1], [1.2, 0.4, -0.6, 0.9, -2.0]])
CX = X + 1j * np.array([0.2, -0.5, 0.1, 1.0, -0.3])
CM = np.outer(CX, CX[:3].conj()) + 1j


@pytest.mark.parametrize(
    "f,args",
    [
        (np.modf, (3 * X,)),
        (np.frexp, (3 * X,)),
        (np.ldexp, (X, np.array([0, 1, -2, 3, 1]))),
        (np.divmod, (3 * X, np.array([0.65, 0.7, 1.1, 0.9, 0.6]))),
        (np.vecdot, (Y, X)),
        (np.vecdot, (CX, CX * 2j)),
        (np.matvec, (np.outer(X, X[:3]), X[:3])),
        (np.matvec, (CM, CX[:3])),
        (np.vecmat, (X, np.outer(X, X[:3]))),
        (np.vecmat, (CX, CM)),
        (np.spacing, (X,)),
        (np.nextafter, (X, np.zeros(5))),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_hand_written_rules(f, args):
    check_rrule(f, *args)
    check_frule(f, *args)


@pytest.mark.parametrize(
    "fun",
    [
        lambda x: np.sum(np.polyval(np.polyder(x, 1), 0.7) * np.polyint(x)),
        pytest.param(lambda x: np.sum(np.i0(3 * x) ** 2), marks=pytest.mark.slow),  # 2.5 s
        lambda x: np.linalg.cond(M33 + np.diag(x[:3])),
        lambda x: np.sum(np.modf(3 * x)[0] ** 2 + np.frexp(x)[0] ** 3),
        lambda x: np.sum(np.vecdot(np.outer(x[:2], x), x**2) ** 2),
        lambda x: np.sum(np.polydiv(x**2, x[:2] + 3)[1] ** 2),
    ],
    ids=["polyder_polyint", "i0", "cond", "modf_frexp", "vecdot", "polydiv"],
)
def test_second_order(fun):
    check_grads(fun, modes=("rev", "fwd"), order=2)(X)


@pytest.mark.parametrize("ord", [2, 1, np.inf, -np.inf, -1, 0.5, 3])
@pytest.mark.parametrize("axis", [(0, 2), (2, 0), (-1, 1), (0, 1, 2), None])
@pytest.mark.parametrize("keepdims", [False, True])
def test_vector_norm_over_several_axes_is_a_vector_norm(ord, axis, keepdims):
    # a tuple of axes: the norm of the vector of those elements (np.linalg.norm, given two axes,
    # computes a matrix norm: the rule passed them on and got ord=inf's max row sum)
    a = np.random.default_rng(0).standard_normal((2, 3, 4))

    def f(x):
        return np.linalg.vector_norm(x, ord=ord, axis=axis, keepdims=keepdims)

    got, want = fg.jit(f)(a), f(a)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-13)
    check_grads(lambda x: np.sum(f(x) * np.arange(1.0, f(a).size + 1).reshape(want.shape)))(a)


@pytest.mark.parametrize(
    "f",
    [
        lambda a, b: np.histogram(a, bins=4)[1],
        lambda a, b: np.histogramdd(np.stack([a, a**2], 1), bins=(3, 5))[1][1],
        lambda a, b: np.histogramdd(np.stack([a, b], 1), bins=[3, np.linspace(-3, 3, 4)])[1][0],
        lambda a, b: np.histogram2d(a, b, bins=4)[1],
        lambda a, b: np.histogram2d(a, b, bins=4, density=True)[0],
        lambda a, b: np.histogram2d(b, a, bins=3, range=[(-3, 3), None])[2],
    ],
    ids=["histogram", "dd counts", "dd mixed", "2d edges", "2d density", "2d one range"],
)
def test_histogram_edges_move_with_the_data_in_every_dimension(f):
    # bins given as a count over a dimension's own range: its edges are NumPy's linspace from
    # the data's min to max, and move with them (histogram2d's and histogramdd's were constants)
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=20), rng.normal(size=20)
    want = f(a, b)
    np.testing.assert_array_equal(fg.jit(lambda a: f(a, b))(a), want)
    w = np.arange(1.0, want.size + 1).reshape(want.shape)
    check_grads(lambda a: np.sum(f(a, b) * w))(a)


def test_weights_differentiable_data_not():
    data = np.array([0.1, 0.4, 0.45, 0.9, 0.2])
    # d/dw of the weighted histogram: each weight lands in its sample's bin
    g = fg.grad(lambda w: np.sum(np.histogram(data, 2, weights=w)[0] * np.array([1.0, 10.0])))(
        np.ones(5)
    )
    np.testing.assert_array_equal(g, [1.0, 1.0, 1.0, 10.0, 1.0])
    # counts of the data: no derivative; the edges move with min and max (bins a count)
    g = fg.grad(lambda x: np.sum(np.histogram(x, 2)[1]))(data)
    np.testing.assert_allclose(g, [1.5, 0, 0, 1.5, 0])
    h, e = np.histogram(data, 2)
    assert h.dtype.kind == "i" and e.shape == (3,)
    # traced ends of range= and traced edges move the edges (and the density's widths); NumPy
    # dispatches on a, bins and weights only, so plain data with a traced range reaches NumPy's
    # own code unless fusegrad's np.histogram wrapper catches it (it wrote into the traced ends)
    for f in (
        lambda r: np.sum(np.histogram(data + 0 * r[0], 3, (r[0], r[1]), density=True)[0] ** 2),
        lambda r: np.sum(np.histogram(data + 0 * r[0], 3, range=(r[0], r[1]))[1] ** 2),
        lambda r: np.sum(np.histogram(data, 3, range=(r[0], r[1]), density=True)[0] ** 2),
        lambda r: np.sum(np.histogram(data, 3, (r[0], r[1]))[1] ** 2),
        lambda r: np.sum(np.histogram_bin_edges(data, 3, range=(r[0], r[1])) ** 2),
        lambda r: np.sum(np.histogram(data, np.concatenate([r[:1], [0.3, 0.5], r[1:]]))[1] ** 2),
        lambda r: np.sum(
            np.histogram(data, np.concatenate([r[:1], [0.3, 0.5], r[1:]]), density=True)[0] ** 2
        ),
    ):
        check_grads(f, modes=("rev", "fwd"))(np.array([0.05, 0.95]))


def test_integer_outputs_are_integers():
    x = np.array([2.0, 1.0, 2.0, 3.0])

    def f(x):
        v, idx, inv, cnt = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
        assert all(np.asarray(a).dtype.kind == "i" for a in (idx, inv, cnt))
        return np.sum(v * cnt)

    np.testing.assert_allclose(fg.grad(f)(x), [2.0, 1.0, 0.0, 1.0])  # first index of each value
    np.testing.assert_allclose(fg.grad(lambda x: np.frexp(x)[0].sum())(x), [0.25, 0.5, 0.25, 0.25])


@pytest.mark.parametrize(
    "f,match",
    [
        (lambda x: np.polyder(x, -1), "np.polyder"),
        (lambda x: np.polyint(x, 3, k=[1.0, 2.0]), "np.polyint"),
        (lambda x: np.vander(np.outer(x, x)), "np.vander"),
        (lambda x: np.linalg.tensorinv(np.outer(x, x), 0), "np.linalg.tensorinv"),
        (lambda x: np.linalg.tensorsolve(np.outer(x, x[:4]), x), "np.linalg.tensorsolve"),
        (lambda x: np.i0(x * 1j), "np.i0"),
        (lambda x: np.poly(np.ones((2, 3)) * x[0]), "np.poly"),
    ],
)
def test_bad_input_names_the_function(f, match):
    with pytest.raises((ValueError, TypeError, np.linalg.LinAlgError), match=match):
        fg.grad(lambda x: np.sum(np.real(f(x))))(X)


@pytest.mark.parametrize(
    "fun",
    [
        lambda z: np.polyder(z, 2),
        lambda z: np.polyint(z, 1, k=z[0]),
        lambda z: np.polymul(z, z[:3] ** 2),
        lambda z: np.concatenate(np.polydiv(z, z[:3] + 3)),
        lambda z: np.poly(z[:3]),
        lambda z: np.vander(z, 3),
        lambda z: np.linalg.cond(np.outer(z, z[:3].conj())[:3] + 3 * np.eye(3)),
        lambda z: np.linalg.tensorinv(
            np.reshape(3 * np.eye(4) + np.outer(z[:4], z[1:]), (4, 2, 2)), 1
        ),
        lambda z: np.vecdot(z, z**2),
        lambda z: np.matvec(np.outer(z, z[:3]), z[:3].conj()),
        lambda z: np.vecmat(z, np.outer(z, z[:3])),
        lambda z: np.sort_complex(z) * z,
    ],
    ids=[
        "polyder",
        "polyint",
        "polymul",
        "polydiv",
        "poly",
        "vander",
        "cond",
        "tensorinv",
        "vecdot",
        "matvec",
        "vecmat",
        "sort_complex",
    ],
)
def test_complex_inputs(fun):
    # a real loss of complex inputs: Re and Im parts against finite differences
    check_grads(lambda z: np.sum(np.abs(fun(z)) ** 2), modes=("rev", "fwd"))(CX)
