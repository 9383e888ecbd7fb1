"""Source generation for the numba engine: one loop nest per kernel signature.

This module only produces Python source text (it never imports numba), so it can be tested and
hashed on its own: the hash of this file is part of every disk-cache key, so any change here
invalidates stale generated modules.

Layout of a generated kernel over a domain ``(n0, ..., n{d-1})``::

    @njit(cache=True, nogil=True, error_model="numpy")
    def kernel(nblk, nslot, sl0, sl1, fin, claims, n0, ..., inputs, constants, outputs,
               partials):
        for k in range(sl0, sl1):                  # slots run blocks of axis 0 in turn
            sl = k, or the next slot claimed       # see below
            for b in range(blocks of slot sl):     # ~128 rows each
                for i0 in range(lo, hi):
                    ...                            # values depending on i0 only hoisted here
                    for i{d-1} in range(n{d-1}):
                        body: loads, scalar ops, elementwise stores, accumulation
                fold the block's partials          # see below
        if fin:
            combine the partials into the outputs

The engine calls it once for all slots, or, for a large kernel, on every thread of its worker
pool (``nogil``) and then once with ``fin`` set and no slots. Split over threads, each call is
given every slot and a shared counter (``claims``, one int64): it claims slots one at a time
(``numba_atomics.claim``) until none is left, so a thread that starts late (asleep when the
work was handed out) finds the slots already run instead of making the others wait for its
share. Which thread runs a slot changes nothing in the result: a slot's blocks and partials
are its own. With an empty ``claims`` it runs slots ``sl0 <= sl < sl1``. One compiled function
serves every size; numba's ``parallel=True`` would compile a second variant, and its parfor
pass made that take about twice as long (~1 s with an inlined ``tanh``).

A reduction that crosses axis 0 cannot write its output from several threads. One reduced to a
single value keeps a partial per block (a scalar each); one that keeps an axis (a column sum)
keeps per slot a total and, for a float sum, a compensation and a block scratch row: each
block's naive sum of ~128 rows is folded into the slot's total with TwoSum, so the partials
cost ``3 * nthreads`` rows of the output whatever the number of blocks.

Float sums over the innermost axis are about as accurate as NumPy's pairwise sum without losing
the vectorised loop. The innermost loop is a plain running sum (``fastmath={'reassoc', 'nsz'}``
on that one add, so LLVM vectorises it: 4x8 lanes of float64 with AVX-512) over at most
``CHUNK`` points, and chunk sums are folded into the total with an error-free TwoSum (Knuth)
whose compensation term is added at the end. Rows longer than ``CHUNK`` run a second entry
point, chosen by the engine per call (``long_rows``), so a first use compiles only one nest::

    def kernel(...):                         # rows of at most CHUNK points
        ...
            for i{d-1} in range(n{d-1}):
                cacc = _radd(cacc, v)
            row_sum = cacc                   # one chunk: nothing to fold
        ...                                  # combine per-block partials

    def kernel_long(...):                    # same nest, innermost loop cut into chunks:
        ...  for jb in range(np.uint64(0), .., CHUNK):
                 for i{d-1} in range(jb, je): ...
                 acc, cmp <- TwoSum(acc, cacc)
        ...                                  # combine per-block partials

A sum over several short rows (e.g. a full sum) keeps adding rows into ``cacc`` and folds it
once it holds ``FOLD`` (rows of under 32 points) or ``FOLD_SIMD`` or more points. Per-block
partials of float sums are combined with the same TwoSum. Loops over ``range(lo, hi)`` that are
innermost use unsigned bounds: numba wraps negative indices, and when LLVM cannot prove a
signed index non-negative it turns every load into a gather (a 1D sum or elementwise kernel
measured 3-7x slower that way).

Example::

    >>> from fusegrad.lazy.kernel import Instr, Output
    >>> f8 = np.dtype("f8")
    >>> plan = analyse(2, ((f8, (False, True)), (f8, (True, False))), ("float",),
    ...                (Instr("subtract", (0, 1), f8),), (Output(3, "sum", (1,), f8),))
    >>> "def kernel(" in generate_source(plan)
    True
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fusegrad.lazy.ops import OPS, NumbaExpr

# Float sums over the innermost axis run over chunks of at most CHUNK points (a vectorised
# running sum each: ~CHUNK/32 adds per lane), folded into the total with TwoSum. A sum spanning
# several short rows (n{d-1} <= CHUNK) carries its running sum from row to row and folds it
# once it holds at least FOLD points: rows under 32 points run a scalar loop, so FOLD bounds
# that chain; longer rows are vectorised, and carrying the sum costs only its lane reduction
# (~n/32 + 8 adds per row), so they fold every FOLD_SIMD points (folding every row of 100
# points measured 10% slower).
CHUNK = 1024
FOLD = 64
FOLD_SIMD = 256

SUPPORTED_DTYPES = frozenset(
    np.dtype(c) for c in ("?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "f4", "f8")
)


def _loop_dtype(ins, arg_reps) -> np.dtype:
    """The dtype an instruction's scalar expression computes in (its op's ``loop``)."""
    loop = OPS[ins.op].loop if ins.op in OPS else "result"
    if loop == "args":
        return np.result_type(*arg_reps)
    if loop == "bool":
        return np.dtype("?")
    return ins.dtype


# Scalar helpers, emitted into a generated module only when used. They follow NumPy's C loops
# (npymath npy_divmod, npy_logaddexp) and SciPy's _logit.h so results match to the last ulp or so.
HELPERS = {
    "_ffloordiv": """
@njit(cache=True, error_model="numpy")
def _ffloordiv(a, b):
    if b == 0:
        return a / b
    mod = np.fmod(a, b)
    div = (a - mod) / b
    if mod != 0:
        if (b < 0) != (mod < 0):
            div -= 1
    if div != 0:
        fl = np.floor(div)
        if div - fl > 0.5:
            fl += 1
        return fl
    return math.copysign(0.0, a / b)
""",
    "_fremainder": """
@njit(cache=True, error_model="numpy")
def _fremainder(a, b):
    mod = np.fmod(a, b)
    if b == 0:
        return mod
    if mod != 0:
        if (b < 0) != (mod < 0):
            mod += b
    else:
        mod = math.copysign(0.0, b)
    return mod
""",
    "_ifloordiv": """
@njit(cache=True, error_model="numpy")
def _ifloordiv(a, b):
    if b == 0:
        return a - a
    if b == -1:
        return -a
    return a // b
""",
    "_iremainder": """
@njit(cache=True, error_model="numpy")
def _iremainder(a, b):
    if b == 0 or b == -1:
        return a - a
    return a % b
""",
    "_ifmod": """
@njit(cache=True, error_model="numpy")
def _ifmod(a, b):
    if b == 0 or b == -1:
        return a - a
    r = a % b
    if r != 0 and ((r < 0) != (a < 0)):
        r -= b
    return r
""",
    "_ipow": """
@njit(cache=True, error_model="numpy")
def _ipow(a, b):
    r = a - a + 1
    base = a
    e = b
    while e > 0:
        if e & 1:
            r = r * base
        base = base * base
        e >>= 1
    return r
""",
    "_logaddexp2": """
@njit(cache=True, error_model="numpy")
def _logaddexp2(x, y):
    if x == y:
        return x + 1.0
    t = x - y
    if t > 0:
        return x + 1.4426950408889634 * math.log1p(np.exp2(-t))
    if t <= 0:
        return y + 1.4426950408889634 * math.log1p(np.exp2(t))
    return t
""",
    "_radd": """
@njit(cache=True, error_model="numpy", fastmath={"reassoc", "nsz"})
def _radd(a, b):
    return a + b
""",
    "_rmul": """
@njit(cache=True, error_model="numpy", fastmath={"reassoc", "nsz"})
def _rmul(a, b):
    return a * b
""",
    "_logit": """
@njit(cache=True, error_model="numpy")
def _logit(x):
    if x < 0.3 or x > 0.65:
        return math.log(x / (1 - x))
    s = 2 * (x - 0.5)
    return math.log1p(s) - math.log1p(-s)
""",
    "_log_expit": """
@njit(cache=True, error_model="numpy", forceinline=True)
def _log_expit(x):
    lg = vm.log1p(vm.exp(-abs(x)))
    return x - lg if x < 0 else -lg
""",
}


def ctor(dt: np.dtype) -> str:
    """The scalar constructor for a dtype in generated code, e.g. ``np.float32``."""
    return "np.bool_" if dt.kind == "b" else f"np.{dt.name}"


def cast(expr: str, src: np.dtype | None, dst: np.dtype) -> str:
    """Source converting ``expr`` (of dtype ``src``; None = unknown/weak) to ``dst``."""
    if src is not None and src == dst:
        return expr
    if dst.kind == "b":
        return f"(({expr}) != 0)"
    return f"{ctor(dst)}({expr})"


@dataclass
class Plan:
    """Everything the generator needs, derived from a kernel signature (no data)."""

    ndim: int
    in_dtypes: tuple[np.dtype, ...]
    in_bcast: tuple[tuple[bool, ...], ...]
    const_kinds: tuple[str, ...]
    program: tuple
    outputs: tuple
    operand_dtype: list  # np.dtype or None for weak Python scalars
    needs_partial: tuple[bool, ...]  # per output: reduction crosses axis 0
    slotted: tuple[bool, ...]  # per output: crosses axis 0 and keeps an axis (per-slot partials)
    prefilled: tuple[bool, ...]  # per output: target must be pre-filled with the identity
    has_reduction: bool
    chunk_inner: bool
    helpers: set
    error: str | None = None
    mirrored: bool = False  # outputs are mirrored sums: the tiled nest of numba_pairs
    literals: dict = field(default_factory=dict)  # constant -> its value's source (``baked``)


def _weak_rep(kind: str) -> int | float | bool:
    return {"int": 0, "float": 0.0, "bool": False}[kind]


def analyse(ndim, inputs, const_kinds, program, outputs) -> Plan:
    """Derive a :class:`Plan` from the parts of a kernel signature.

    ``inputs`` is a tuple of ``(dtype, broadcast_flags)``; ``const_kinds`` as in
    ``Kernel.signature()``, a kind ``"float=3.0"`` a constant compiled in as that value
    (``baked``). ``plan.error`` names the first unsupported feature, if any.

    >>> analyse(0, (), (), (), ()).error is None
    True
    >>> analyse(0, (), ("float=3.0", "<f4=-2.0"), (), ()).literals
    {0: '3.0', 1: 'np.float32(-2.0)'}
    """
    err = None
    literals = {}
    kinds = []
    for j, k in enumerate(const_kinds):
        kind, _, value = k.partition("=")
        if value:
            weak = kind in ("int", "float", "bool")
            literals[j] = repr(float(value)) if weak else f"{ctor(np.dtype(kind))}({value})"
        kinds.append(kind)
    const_kinds = tuple(kinds)
    dts: list = [np.dtype(d) for d, _ in inputs]
    for d in dts:
        if d not in SUPPORTED_DTYPES:
            err = err or f"input dtype {d}"
    for k in const_kinds:
        if k in ("int", "float", "bool"):
            dts.append(None)
        else:
            try:
                d = np.dtype(k)
            except TypeError:
                d = None
                err = err or f"constant of type {k}"
            if d is not None and d not in SUPPORTED_DTYPES:
                err = err or f"constant dtype {d}"
            dts.append(d)
    reps = [
        _weak_rep(k) if d is None else d
        for d, k in zip(dts, [None] * len(inputs) + list(const_kinds))
    ]
    helpers: set = set()
    for ins in program:
        if ins.dtype not in SUPPORTED_DTYPES:
            err = err or f"{ins.op} producing {ins.dtype}"
        if ins.op not in OP_EXPR and ins.op not in ("where", "cast"):  # no numba expression
            err = err or f"op {ins.op}"
        arg_reps = [reps[a] for a in ins.args]
        if ins.op not in ("where", "cast") and err is None:
            lt = _loop_dtype(ins, arg_reps)
            # (an integer power's exponent sign is checked on the data by supports())
            if (OPS[ins.op].float_only and lt.kind != "f") or _kind_template(ins.op, lt) is None:
                err = f"{ins.op} on {lt}"
        dts.append(ins.dtype)
        reps.append(ins.dtype)
    for o in outputs:
        if o.dtype not in SUPPORTED_DTYPES:
            err = err or f"output dtype {o.dtype}"
        if o.reduce not in (None, "sum", "prod", "max", "min"):
            err = err or f"reduction {o.reduce}"
    mirrored = any(o.mirror is not None for o in outputs)  # which outputs may join: numba_pairs
    needs_partial = tuple(bool(o.reduce and o.axes and 0 in o.axes) for o in outputs)
    slotted = tuple(p and len(set(o.axes)) < ndim for p, o in zip(needs_partial, outputs))
    prefilled = []
    for o in outputs:
        if not (o.reduce and o.axes):
            prefilled.append(False)
            continue
        s = _suffix_start(o.axes, ndim)
        prefilled.append(set(o.axes) != set(range(s, ndim)) or 0 in o.axes)
    has_red = any(o.reduce and o.axes for o in outputs)
    # the tiled nest of mirrored sums (numba_pairs) has no chunked variant
    chunk = not mirrored and any(compensated(o, ndim) for o in outputs)
    return Plan(
        ndim,
        tuple(dts[: len(inputs)]),
        tuple(tuple(b) for _, b in inputs),
        tuple(const_kinds),
        tuple(program),
        tuple(outputs),
        dts,
        needs_partial,
        slotted,
        tuple(prefilled),
        bool(has_red),
        bool(chunk),
        helpers,
        err,
        mirrored,
        literals,
    )


def compensated(o, ndim: int) -> bool:
    """Whether output ``o`` is a float sum over the innermost axis, summed in chunks with TwoSum.

    >>> from fusegrad.lazy.kernel import Output
    >>> compensated(Output(0, "sum", (1,), np.dtype("f4")), 2)
    True
    >>> compensated(Output(0, "sum", (0,), np.dtype("f8")), 2)
    False
    """
    return o.reduce == "sum" and o.dtype.kind == "f" and ndim > 0 and (ndim - 1) in o.axes


def _suffix_start(axes, ndim: int) -> int:
    s = ndim
    while s > 0 and (s - 1) in axes:
        s -= 1
    return s


def identity(reduce: str, dt: np.dtype) -> Any:
    """The identity element of a reduction for a dtype (``max`` of float64 -> ``-inf``).

    >>> float(identity("max", np.dtype("f8")))
    -inf
    """
    if reduce == "sum":
        return dt.type(0)
    if reduce == "prod":
        return dt.type(1)
    if dt.kind == "f":
        return dt.type(-np.inf if reduce == "max" else np.inf)
    if dt.kind == "b":
        return dt.type(reduce == "min")
    info = np.iinfo(dt)
    return dt.type(info.min if reduce == "max" else info.max)


def ident_src(reduce: str, dt: np.dtype) -> str:
    """Source of a reduction's identity as a typed scalar.

    >>> ident_src("sum", np.dtype("f4")), ident_src("max", np.dtype("f8"))
    ('np.float32(0.0)', 'np.float64(-np.inf)')
    """
    v = identity(reduce, dt)
    if dt.kind == "f":
        lit = repr(float(v)).replace("inf", "np.inf")
        return f"{ctor(dt)}({lit})"
    if dt.kind == "b":
        return repr(bool(v))
    return f"{ctor(dt)}({int(v)})"


def combine(reduce: str, acc: str, v: str, dt: np.dtype, plan: Plan | None = None) -> str:
    """Source of one accumulation step ``acc (+) v`` in dtype ``dt`` (NaN-propagating max/min).

    Float sums and products go through ``_radd``/``_rmul``, compiled with
    ``fastmath={'reassoc', 'nsz'}``: once LLVM inlines them only the accumulation carries those
    flags, so the reduction vectorises while the elementwise program keeps strict IEEE order.
    """
    if reduce in ("sum", "prod"):
        sym = "+" if reduce == "sum" else "*"
        if dt.kind == "f" and plan is not None:
            h = "_radd" if reduce == "sum" else "_rmul"
            plan.helpers.add(h)
            return cast(f"{h}({acc}, {v})", None, dt)
        return cast(f"{acc} {sym} {v}", None, dt)
    op = ">=" if reduce == "max" else "<="
    return f"({acc} if ({acc} {op} {v} or {acc} != {acc}) else {v})"


def two_sum(acc: str, cmp: str, x: str, tag: str) -> list[str]:
    """Statements adding ``x`` to ``acc`` and the exact rounding error to ``cmp`` (Knuth's
    TwoSum: no branch, no fastmath; ``tag`` names the temporaries).

    >>> two_sum("a", "c", "x", "0")[0]
    't0 = a + x'
    """
    t, bp = f"t{tag}", f"bp{tag}"
    return [
        f"{t} = {acc} + {x}",
        f"{bp} = {t} - {acc}",
        f"{cmp} = {cmp} + (({acc} - ({t} - {bp})) + ({x} - {bp}))",
        f"{acc} = {t}",
    ]


def fsum_fin(acc: str, cmp: str) -> str:
    """Source of a compensated sum's value. An infinite or NaN total makes ``cmp`` NaN
    (inf - inf), so it is returned as it is.

    >>> fsum_fin("a", "c")
    '(a + c if math.isfinite(a) else a)'
    """
    return f"({acc} + {cmp} if math.isfinite({acc}) else {acc})"


class _NumbaExprs(Mapping):
    """The ops of ``ops.OPS`` with a numba expression (``Op.numba``), by name: the engine
    translates an op exactly when it is here (``analyse`` declines any other). A view of the
    op table, so an entry added to it is seen here."""

    def __getitem__(self, op: str) -> NumbaExpr:
        entry = OPS[op].numba
        if entry is None:
            raise KeyError(op)
        return entry

    def __iter__(self) -> Iterator[str]:
        return (name for name, op in OPS.items() if op.numba is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


OP_EXPR: Mapping[str, NumbaExpr] = _NumbaExprs()

_CALLS = re.compile(r"\b(_[a-z0-9_]+)\(")


def _template(op: str, lt: np.dtype) -> str:
    """``op``'s expression template in loop dtype ``lt`` (``Op.numba``: a template, templates
    by dtype kind, or a function of ``lt``)."""
    if op not in OP_EXPR:
        raise NotImplementedError(f"numba engine: op {op!r} has no numba expression in ops.OPS")
    template = _kind_template(op, lt)
    if template is None:
        raise NotImplementedError(f"numba engine: op {op!r} has no numba expression for {lt}")
    return template


def _kind_template(op: str, lt: np.dtype) -> str | None:
    """``op``'s template for loops of ``lt``'s kind, or None when its entry names no template
    for that kind (``analyse`` declines the kernel)."""
    entry = OP_EXPR[op]
    if callable(entry):
        return entry(lt)
    if isinstance(entry, str):
        return entry
    return next((t for kinds, t in entry.items() if lt.kind in kinds), None)


def _uses(src: str) -> set[str]:
    """The ``HELPERS`` (and ``vm``, numba_math) that source calls, with the helpers' own."""
    used = {h for h in _CALLS.findall(src) if h in HELPERS}
    if "vm." in src or any("vm." in HELPERS[h] for h in used):
        used.add("vm")
    return used


def op_expr(op: str, a: list[str], lt: np.dtype, plan: Plan) -> str:
    """Scalar source for ``op`` on argument sources ``a`` already converted to loop dtype ``lt``
    (its ``Op.numba`` template, filled in); the helpers it calls are added to ``plan.helpers``.

    >>> op_expr("hypot", ["x", "y"], np.dtype("f8"), analyse(0, (), (), (), ()))
    'math.hypot(x, y)'
    >>> op_expr("tanh", ["x"], np.dtype("f4"), analyse(0, (), (), (), ()))
    'vm.tanh_f32(x)'
    """
    f32 = "_f32" if lt == np.float32 else ""
    src = _template(op, lt).format(*a, T=ctor(lt), f32=f32)
    plan.helpers |= _uses(src)
    return src


# numba_math.power computes these exponents without a libm call (as floats: 3 == 3.0), others
# with pow: a power is vectorised or not by its exponent (numba_engine.inner_ops asks).
FAST_EXPONENTS = frozenset({0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 4.0, -4.0})
POWERS = frozenset({"power", "float_power"})


def baked(constants: tuple, program: tuple, n_inputs: int) -> dict[int, float]:
    """The constants compiled into a kernel as literals: each the exponent of a float power, of
    a value in ``FAST_EXPONENTS``. numba_math.power of a run-time exponent branches over its
    cases, which a vectorised loop computes all of, pow included (as selects): the
    Lennard-Jones gradient's ``r ** -6``, 26 ms over 1000x1000 pairs; of a literal, LLVM folds
    the branches away and the loop vectorises.

    >>> from fusegrad.lazy.kernel import Instr
    >>> baked((3, 0.25), (Instr("power", (0, 1), np.dtype("f8")),), 1)
    {0: 3.0}
    """
    out: dict[int, float] = {}
    for ins in program:
        if ins.op in POWERS and ins.dtype.kind == "f" and len(ins.args) == 2:
            j = ins.args[1] - n_inputs
            if 0 <= j < len(constants):
                c = constants[j]
                if isinstance(c, int | float | np.integer | np.floating) and not isinstance(
                    c, bool | np.bool_
                ):
                    if float(c) in FAST_EXPONENTS:
                        out[j] = float(c)
    return out


def vectorised(op: str, dtype: np.dtype) -> bool:
    """Whether generated code computes ``op`` in ``dtype`` without a scalar libm call (False
    for ``POWERS``, which depend on their exponent).

    >>> vectorised("tanh", np.dtype("f8")), vectorised("sin", np.dtype("f8"))
    (True, False)
    """
    # its float expression calls numba_math (``vm``), itself or through a helper: branch-free
    # code LLVM vectorises, where math.* calls libm one element at a time
    if dtype.kind != "f" or op not in OP_EXPR or op in POWERS:
        return False
    return "vm" in _uses(_template(op, dtype).format("x", "y", "z", T="T", f32=""))


def loops(axes: list[int], stmts: list[str], ind: str) -> list[str]:
    """``stmts`` in loops ``for k{ax} in range(n{ax})`` over ``axes``, at indentation ``ind``.

    >>> loops([0], ["x += 1"], "")
    ['for k0 in range(n0):', '    x += 1']
    """
    nest = []
    for ax in axes:
        nest.append(f"{ind}for k{ax} in range(n{ax}):")
        ind += "    "
    return nest + [ind + st for st in stmts]


def _over(axes: list[int], stmts: list[str], outer: str | None = None) -> list[str]:
    """``stmts`` in loops over ``axes`` (``loops``), inside ``for {outer}:`` when given; at the
    indentation of a kernel body."""
    if outer is None:
        return loops(axes, stmts, "    ")
    return [f"    for {outer}:"] + loops(axes, stmts, "        ")


def long_rows(plan: Plan, nblk: int, dom: tuple) -> bool:
    """Whether a call over ``dom`` in ``nblk`` blocks runs the chunked nest (``*_long``): the
    kernel has chunked sums and its rows (a block's share of a 1D domain) exceed ``CHUNK``.

    >>> from fusegrad.lazy.kernel import Output
    >>> f8 = np.dtype("f8")
    >>> p = analyse(1, ((f8, (False,)),), (), (), (Output(0, "sum", (0,), f8),))
    >>> long_rows(p, 1, (1000,)), long_rows(p, 1, (5000,)), long_rows(p, 8, (5000,))
    (False, True, False)
    """
    if not plan.chunk_inner:
        return False
    return dom[0] > CHUNK * nblk if len(dom) == 1 else dom[-1] > CHUNK


def program_source(plan: Plan) -> tuple[dict[int, list[str]], list[str]]:
    """The loads and scalar ops of a kernel's program, each at the loop level where its value
    is first known: ``stmts[lv]`` runs inside the loop over axis ``lv - 1`` (level 0: before
    every loop), reading ``a{k}[i..]`` inputs. Also the source name of every operand.

    >>> from fusegrad.lazy.kernel import Instr
    >>> f8 = np.dtype("f8")
    >>> p = analyse(2, ((f8, (False, True)), (f8, (True, False))), (),
    ...             (Instr("subtract", (0, 1), f8),), ())
    >>> stmts, names = program_source(p)
    >>> stmts[1], stmts[2], names
    (['x0 = a0[i0]'], ['x1 = a1[i1]', 'v2 = np.float64((x0 - x1))'], ['x0', 'x1', 'v2'])
    """
    d = plan.ndim
    nin = len(plan.in_dtypes)
    ncon = len(plan.const_kinds)
    dts = plan.operand_dtype
    # deps[k]: the set of domain axes operand k depends on.
    deps: list[frozenset] = []
    for flags in plan.in_bcast:
        deps.append(frozenset(ax for ax, b in enumerate(flags) if not b))
    deps += [frozenset()] * ncon
    stmts: dict[int, list[str]] = {lv: [] for lv in range(d + 1)}
    names: list[str] = []
    for k, flags in enumerate(plan.in_bcast):
        idx = [f"i{ax}" for ax, b in enumerate(flags) if not b]
        if idx:
            names.append(f"x{k}")
            stmts[max(deps[k]) + 1].append(f"x{k} = a{k}[{', '.join(idx)}]")
        else:
            names.append(f"a{k}")
    names += [plan.literals.get(j, f"c{j}") for j in range(ncon)]
    reps = [
        dt if dt is not None or kind is None else _weak_rep(kind)
        for dt, kind in zip(dts, [None] * nin + list(plan.const_kinds) + [None] * len(plan.program))
    ]
    for j, ins in enumerate(plan.program):
        vid = nin + ncon + j
        dep = frozenset().union(*(deps[a] for a in ins.args)) if ins.args else frozenset()
        deps.append(dep)
        name = f"v{vid}"
        names.append(name)
        if ins.op == "cast":
            expr = cast(names[ins.args[0]], dts[ins.args[0]], ins.dtype)
        elif ins.op == "where":
            c, p, q = ins.args
            cs = cast(names[c], dts[c], np.dtype("?"))
            expr = f"({cast(names[p], dts[p], ins.dtype)} if {cs} else "
            expr += f"{cast(names[q], dts[q], ins.dtype)})"
        else:
            lt = _loop_dtype(ins, [reps[a] for a in ins.args])
            args = [cast(names[a], dts[a], lt) for a in ins.args]
            expr = op_expr(ins.op, args, lt, plan)
            if not (OPS[ins.op].loop != "result" and ins.dtype.kind == "b"):
                expr = cast(expr, None, ins.dtype)
        stmts[(max(dep) + 1) if dep else 0].append(f"{name} = {expr}")
    return stmts, names


_IND = "    "  # one indentation level of the generated source


class _Accumulators:
    """Where each output's reduction statements go in the loop nest: ``init[lv]`` and
    ``fin[lv]`` open and close a loop level's accumulators, ``inner`` runs at every point, and
    a compensated sum adds ``short_end`` (after a short innermost loop), ``chunk_end`` (after
    each chunk of a long one) and ``long_end`` (after a long one)."""

    def __init__(self, d: int) -> None:
        self.init: dict[int, list[str]] = {lv: [] for lv in range(d + 1)}
        self.fin: dict[int, list[str]] = {lv: [] for lv in range(d + 1)}
        self.inner: list[str] = []
        self.short_end: list[str] = []
        self.chunk_end: list[str] = []
        self.long_end: list[str] = []


def _fsum_slot(plan: Plan, j: int) -> bool:
    """Whether output ``j`` is a float sum kept per slot (total, compensation, block scratch)."""
    o = plan.outputs[j]
    return plan.slotted[j] and o.reduce == "sum" and o.dtype.kind == "f"


def _out_index(plan: Plan, o, j: int, partial: bool) -> str:
    """The index of output ``j`` (or of its partial) at the current point of the nest."""
    idx = ["0" if ax in o.axes else f"i{ax}" for ax in range(plan.ndim)]
    if plan.slotted[j]:
        idx = ["sl", "2" if _fsum_slot(plan, j) else "0"] + idx  # a float sum's block scratch
    elif partial:
        idx = ["b"] + idx
    return ", ".join(idx) if idx else "()"


def _accumulators(plan: Plan, names: list[str]) -> _Accumulators:
    """Each output's statements: a store per point (``o{j}[i0, ..] = v``), or a reduction
    (``_reduction``)."""
    d = plan.ndim
    acc = _Accumulators(d)
    for j, o in enumerate(plan.outputs):
        v = cast(names[o.value], plan.operand_dtype[o.value], o.dtype)
        if o.reduce and o.axes:
            _reduction(plan, acc, j, o, v)
        else:
            idx = ", ".join(f"i{ax}" for ax in range(d)) if d else "()"
            acc.inner.append(f"o{j}[{idx}] = {v}")
    return acc


def _reduction(plan: Plan, acc: _Accumulators, j: int, o, v: str) -> None:
    """Output ``j`` reduces ``v``: into a register ``acc{j}`` that opens at the loop level where
    its reduced axes start (``_suffix_start``) and is stored when that loop ends (a compensated
    sum: ``_compensated``), or straight into its target (``o{j}``, or its partial ``p{j}``)
    when the innermost axis is kept."""
    d = plan.ndim
    s = _suffix_start(o.axes, d)
    ident = ident_src(o.reduce, o.dtype)
    if s == d:
        t = _target(plan, j, o)
        acc.inner.append(f"{t} = {combine(o.reduce, t, v, o.dtype, plan)}")
    elif compensated(o, d):
        _compensated(plan, acc, j, o, v, s)
    else:
        a = f"acc{j}"
        acc.init[s].append(f"{a} = {ident}")
        acc.fin[s].append(_store(plan, j, o, a))
        acc.inner.append(f"{a} = {combine(o.reduce, a, v, o.dtype, plan)}")


def _compensated(plan: Plan, acc: _Accumulators, j: int, o, v: str, s: int) -> None:
    """A float sum over the innermost axis: a running sum ``cacc{j}`` (the vectorised add),
    folded with TwoSum into ``acc{j}`` + compensation ``cmp{j}`` after each chunk of a long row,
    or, over several short rows, once ``cn{j}`` counts ``fold_at`` points."""
    d = plan.ndim
    ident = ident_src(o.reduce, o.dtype)
    a, cmp, cacc = f"acc{j}", f"cmp{j}", f"cacc{j}"
    fold = two_sum(a, cmp, cacc, f"{j}")
    acc.init[s] += [f"{a} = {ident}", f"{cmp} = {ident}", f"{cacc} = {ident}"]
    acc.inner.append(f"{cacc} = {combine(o.reduce, cacc, v, o.dtype, plan)}")
    acc.chunk_end += fold + [f"{cacc} = {ident}"]
    if s == d - 1:
        acc.short_end.append(_store(plan, j, o, cacc))  # one chunk: nothing to fold
        acc.long_end.append(_store(plan, j, o, fsum_fin(a, cmp)))
        return
    cn = f"cn{j}"
    acc.init[s].append(f"{cn} = 0")
    acc.short_end += [f"{cn} += n{d - 1}", f"if {cn} >= fold_at:"]  # d >= 2 here
    acc.short_end += [_IND + st for st in fold + [f"{cacc} = {ident}", f"{cn} = 0"]]
    acc.fin[s] += fold + [_store(plan, j, o, fsum_fin(a, cmp))]


def _target(plan: Plan, j: int, o) -> str:
    """Where output ``j``'s reduction goes at the current point: its partial ``p{j}`` when the
    reduction crosses axis 0, else the output ``o{j}``."""
    part = plan.needs_partial[j]
    return f"{'p' if part else 'o'}{j}[{_out_index(plan, o, j, part)}]"


def _store(plan: Plan, j: int, o, val: str) -> str:
    """The statement storing a finished accumulator ``val`` of output ``j``: combined into its
    target when that was pre-filled with the identity (other blocks add to it too), else
    assigned."""
    t = _target(plan, j, o)
    s = _suffix_start(o.axes, plan.ndim)
    if plan.prefilled[j] and not (plan.needs_partial[j] and s == 0):
        return f"{t} = {combine(o.reduce, t, val, o.dtype, plan)}"
    return f"{t} = {val}"


def _block_loops() -> list[str]:
    """The slots to run (``sl0 <= sl < sl1``, or claimed one by one from ``claims`` when it is
    not empty), each its share of the ``nblk`` blocks of axis 0, block ``b`` covering rows
    ``lo <= i0 < hi``."""
    ind = _IND
    return [
        f"{ind}for k in range(sl0, sl1):",
        f"{ind * 2}sl = k if claims.shape[0] == 0 else claim(claims)",
        f"{ind * 2}if sl >= sl1:",
        f"{ind * 3}break",
        f"{ind * 2}for b in range((sl * nblk) // nslot, ((sl + 1) * nblk) // nslot):",
        f"{ind * 3}lo = (b * n0) // nblk",
        f"{ind * 3}hi = ((b + 1) * n0) // nblk",
    ]


def _outer_loops(plan: Plan, stmts, acc: _Accumulators, ind: str) -> tuple[list[str], str]:
    """The loops over axes ``0 .. d-2`` (axis 0 over the block's rows), each with the loads,
    ops and accumulators first known at its level; returns them and the innermost indentation."""
    L = [ind + s for s in acc.init[0]]
    for ax in range(plan.ndim - 1):
        r = "range(lo, hi)" if ax == 0 else f"range(n{ax})"
        L.append(f"{ind}for i{ax} in {r}:")
        ind += _IND
        L += [ind + s for s in stmts[ax + 1]]
        L += [ind + s for s in acc.init[ax + 1]]
    return L, ind


def _innermost(plan: Plan, stmts, acc: _Accumulators, mode: str | None, cur: str) -> list[str]:
    """The loop over the last axis: one plain loop, or (``mode == "long"``) chunks of
    ``CHUNK`` points whose sums are folded with TwoSum after each chunk."""
    a = plan.ndim - 1
    if a == 0:
        lo, hi = "np.uint64(lo)", "np.uint64(hi)"
        loop = f"for i0 in range({lo}, {hi}):"
    else:
        lo, hi = "np.uint64(0)", f"np.uint64(n{a})"
        loop = f"for i{a} in range(n{a}):"
    body_stmts = stmts[a + 1] + acc.inner
    if mode != "long":
        L = [cur + loop] + [cur + _IND + s for s in body_stmts]
        if mode == "short":
            L += [cur + s for s in acc.short_end]
        return L
    uc = f"np.uint64({CHUNK})"
    L = [f"{cur}for jb in range({lo}, {hi}, {uc}):"]
    L.append(f"{cur}{_IND}je = min(jb + {uc}, {hi})")
    L.append(f"{cur}{_IND}for i{a} in range(jb, je):")
    L += [cur + _IND * 2 + s for s in body_stmts]
    L += [cur + _IND + s for s in acc.chunk_end]
    L += [cur + s for s in acc.long_end]
    return L


def _slot_folds(plan: Plan, ind: str) -> list[str]:
    """After a block: each slot's float sums fold the block's scratch into the slot's total
    with TwoSum."""
    d = plan.ndim
    L: list[str] = []
    for j, o in enumerate(plan.outputs):
        if _fsum_slot(plan, j):
            idx = ", ".join("0" if ax in o.axes else f"k{ax}" for ax in range(d))
            tot, cmp, blk = (f"p{j}[sl, {r}, {idx}]" for r in range(3))
            fold = [f"r = {tot}", f"rc = {cmp}", f"x = {blk}"]
            fold += two_sum("r", "rc", "x", "") + [f"{tot} = r", f"{cmp} = rc"]
            fold.append(f"{blk} = {ident_src('sum', o.dtype)}")
            keep = [ax for ax in range(d) if ax not in o.axes]
            L += loops(keep, fold, ind)
    return L


def _loop_nest(plan: Plan, stmts, acc: _Accumulators, mode: str | None) -> list[str]:
    """The loop nest, up to per-block partials; ``mode`` picks the innermost loop of a
    chunked kernel: ``"short"`` (one plain loop) or ``"long"`` (chunk loop)."""
    d = plan.ndim
    L: list[str] = []
    if mode == "short" and any("fold_at" in st for st in acc.short_end):
        L.append(f"{_IND}fold_at = {FOLD} if n{d - 1} < 32 else {FOLD_SIMD}")
    L += [_IND + s for s in stmts[0]]
    if d == 0:
        return L + [_IND + s for s in acc.inner]
    L += _block_loops()
    ind2 = _IND * 3
    outer, cur = _outer_loops(plan, stmts, acc, ind2)
    L += outer
    L += _innermost(plan, stmts, acc, mode, cur)
    # finalisations, innermost first: level_fin[s] closes loop axis s, in the body of loop
    # axis s-1 (indent ind2 + ind*s) after loop s; level_fin[0] is at block level
    for ax in range(d - 1, -1, -1):
        L += [ind2 + _IND * ax + s for s in acc.fin[ax]]
    return L + _slot_folds(plan, ind2)


def _combine_slots(plan: Plan, j: int, o) -> list[str]:
    """Slot by slot over the whole output (contiguous loops LLVM vectorises). A float sum
    folds the slots' totals with TwoSum and adds up their compensations."""
    d = plan.ndim
    idx = ", ".join("0" if ax in o.axes else f"k{ax}" for ax in range(d))
    keep = [ax for ax in range(d) if ax not in o.axes]
    out, tot = f"o{j}[{idx}]", f"p{j}[tt, 0, {idx}]"
    slots = "tt in range(1, nslot)"
    L = _over(keep, [f"{out} = {tot.replace('tt', '0')}"])
    if not _fsum_slot(plan, j):
        return L + _over(keep, [f"{out} = {combine(o.reduce, out, tot, o.dtype)}"], slots)
    cmp0, cmp = f"p{j}[0, 1, {idx}]", f"p{j}[tt, 1, {idx}]"
    fold = [f"r = {out}", f"x = {tot}", f"rc = {cmp0} + {cmp}"]
    fold += two_sum("r", "rc", "x", "") + [f"{cmp0} = rc", f"{out} = r"]
    L += _over(keep, fold, slots)
    fin = [f"r = {out}", f"rc = {cmp0}", f"{out} = {fsum_fin('r', 'rc')}"]
    return L + _over(keep, fin)


def _combine_partials(plan: Plan) -> list[str]:
    """After every slot has run (``fin``): per-block partials combined serially, block by
    block, each over the whole output (a contiguous loop LLVM vectorises; column by column,
    strided over the blocks, measured ~0.3 ms per 500k partials). A float sum folds them with
    TwoSum, keeping the compensation in block 0's partial, scratch from then on."""
    d = plan.ndim
    L: list[str] = []
    ind = _IND
    blocks = "bb in range(1, nblk)"
    for j, o in enumerate(plan.outputs):
        if plan.slotted[j]:
            L += _combine_slots(plan, j, o)
            continue
        if not plan.needs_partial[j]:
            continue
        idx = ", ".join("0" if ax in o.axes else f"k{ax}" for ax in range(d))
        keep = [ax for ax in range(d) if ax not in o.axes]
        out, p0, pb = f"o{j}[{idx}]", f"p{j}[0, {idx}]", f"p{j}[bb, {idx}]"
        fsum = o.reduce == "sum" and o.dtype.kind == "f"
        if not keep:  # one value: accumulate in registers
            L.append(f"{ind}r = {p0}")
            L += [f"{ind}rc = {ident_src('sum', o.dtype)}"] if fsum else []
            L.append(f"{ind}for bb in range(1, nblk):")
            if fsum:
                L += [f"{ind * 2}x = {pb}"] + [ind * 2 + st for st in two_sum("r", "rc", "x", "")]
                L.append(f"{ind}{out} = {fsum_fin('r', 'rc')}")
            else:
                L.append(f"{ind * 2}r = {combine(o.reduce, 'r', pb, o.dtype)}")
                L.append(f"{ind}{out} = r")
        elif fsum:
            zero = ident_src("sum", o.dtype)
            fold = [f"r = {out}", f"x = {pb}", f"rc = {p0}"]
            fold += two_sum("r", "rc", "x", "") + [f"{p0} = rc", f"{out} = r"]
            fin = [f"r = {out}", f"rc = {p0}", f"{out} = {fsum_fin('r', 'rc')}"]
            L += _over(keep, [f"{out} = {p0}", f"{p0} = {zero}"])
            L += _over(keep, fold, blocks)
            L += _over(keep, fin)
        else:
            L += _over(keep, [f"{out} = {p0}"])
            L += _over(keep, [f"{out} = {combine(o.reduce, out, pb, o.dtype)}"], blocks)
    return L


def _params(plan: Plan) -> str:
    """``nblk, nslot, sl0, sl1, fin, claims``, the domain sizes, inputs, constants, outputs,
    then one partial buffer per output that crosses axis 0."""
    nouts = len(plan.outputs)
    params = ["nblk", "nslot", "sl0", "sl1", "fin", "claims"]
    params += [f"n{ax}" for ax in range(plan.ndim)]
    params += [f"a{k}" for k in range(len(plan.in_dtypes))]
    params += [f"c{j}" for j in range(len(plan.const_kinds))]
    params += [f"o{j}" for j in range(nouts)]
    params += [f"p{j}" for j in range(nouts) if plan.needs_partial[j]]
    return ", ".join(params)


def _module_head(plan: Plan) -> list[str]:
    """Imports and the helper functions the kernel's expressions call."""
    src = ["import math", "", "import numpy as np", "from numba import njit", ""]
    src += ["from fusegrad.lazy.engines.numba_atomics import claim"]
    if "vm" in plan.helpers:
        src += ["from fusegrad.lazy.engines import numba_math as vm"]
    src += [""]
    for h in sorted(plan.helpers - {"vm"}):
        src.append(HELPERS[h].rstrip() + "\n")
    return src


def generate_source(plan: Plan) -> str:
    """The body of a generated module (imports, helpers, ``kernel``, and ``kernel_long``
    when the kernel has chunked sums).

    Both take ``(nblk, nslot, sl0, sl1, fin, claims, n0.., in0.., c0.., out0.., part0..)``:
    ``nblk`` blocks of axis 0 in ``nslot`` slots, the slots ``sl0 <= sl < sl1`` to run (or to
    claim one by one from ``claims``, when not empty), whether to combine the partials, the
    domain sizes, inputs with broadcast axes dropped (fully
    broadcast inputs as scalars), constants, outputs, then one partial buffer per output that
    crosses axis 0. The parts: ``program_source`` (loads and ops at their loop levels),
    ``_accumulators`` (each output's statements), ``_loop_nest`` (``_block_loops``,
    ``_outer_loops``, ``_innermost``, finalisations, ``_slot_folds``), ``_combine_partials``.

    >>> from fusegrad.lazy.kernel import Instr, Output
    >>> f8 = np.dtype("f8")
    >>> p = analyse(1, ((f8, (False,)),), (), (Instr("exp", (0,), f8),), (Output(1, None, (), f8),))
    >>> print(generate_source(p).split("def kernel")[1].strip())
    (nblk, nslot, sl0, sl1, fin, claims, n0, a0, o0):
        for k in range(sl0, sl1):
            sl = k if claims.shape[0] == 0 else claim(claims)
            if sl >= sl1:
                break
            for b in range((sl * nblk) // nslot, ((sl + 1) * nblk) // nslot):
                lo = (b * n0) // nblk
                hi = ((b + 1) * n0) // nblk
                for i0 in range(np.uint64(lo), np.uint64(hi)):
                    x0 = a0[i0]
                    v1 = np.float64(vm.exp(x0))
                    o0[i0] = v1
        return 0
    """
    stmts, names = program_source(plan)
    acc = _accumulators(plan, names)
    sig = _params(plan)
    # nogil: the engine runs slots on its worker threads (numba's prange would compile a
    # second, parallel variant: ~2x the compile time of a kernel, ~1 s with an inlined tanh)
    deco = '@njit(cache=True, nogil=True, error_model="numpy")'
    # The long (chunked) nest is a separate entry point, chosen by the engine for long rows
    # (``long_rows``): with both nests in one function LLVM spilled the arguments in the short
    # one's row loop (rows of 40-200 points measured 1.3-1.9x slower), and calling one from the
    # other compiled both on first use (~0.5 s instead of ~0.28 s).
    variants = [("kernel", "short" if plan.chunk_inner else None)]
    variants += [("kernel_long", "long")] if plan.chunk_inner else []
    kernels = []
    for name, mode in variants:
        kernels += ["", deco, f"def {name}({sig}):"]
        kernels += _loop_nest(plan, stmts, acc, mode)
        fin = _combine_partials(plan)
        if fin:
            kernels += ["    if fin:"] + ["    " + st for st in fin]
        kernels.append("    return 0")
    return "\n".join(_module_head(plan) + kernels) + "\n"
