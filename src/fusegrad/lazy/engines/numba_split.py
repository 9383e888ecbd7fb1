"""A kernel whose last axis is short (the 3 coordinates of points in space) run as a kernel over
the other axes, with the instructions that depend on that axis once per index of it.

numba's loop nest puts the domain's last axis innermost, and LLVM vectorises only the innermost
loop: over 3 coordinates the whole kernel ran scalar. The gradient of
``sum(exp(-sum((x[:, None] - x[None]) ** 2, -1)))`` over 2000 points in 3-d (a mirrored sum over a
2000×2000×3 domain) took 52 ms, where the same sums written over three 2000×2000 coordinate
arrays took 4.7 ms. Split, the 2000×2000 loop is innermost and vectorised, the distance and its
``exp`` computed once a pair (not once a coordinate), and each coordinate's slice of the
operands (``x[:, k]``, strided) is copied contiguous by the engine (``COPY_REUSED_FROM``).

``split(kernel)`` gives the kernel over ``domain[:-1]`` and how its outputs make the original
ones: an output kept along the short axis is the stack of one output per index; one reduced
over it combines the indices' values inside the kernel (``add`` for a sum) and gets its axis
back as size 1.

Example::

    >>> from fusegrad.lazy.kernel import Instr, Kernel, Output
    >>> f8 = np.dtype("f8")
    >>> x = np.arange(40_000 * 3.0).reshape(-1, 1, 3)
    >>> k = Kernel((40_000, 2, 3), (x, np.ones((1, 2, 1))), (),
    ...            (Instr("multiply", (0, 1), f8),), (Output(2, "sum", (1,), f8),))
    >>> s = split(k)
    >>> s.kernel.domain, len(s.kernel.program), len(s.kernel.outputs)
    ((40000, 2), 3, 3)
    >>> parts = [np.full((40_000, 1), float(j)) for j in range(3)]  # one output a coordinate
    >>> s.assemble(parts)[0][0]
    array([[0., 1., 2.]])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fusegrad.lazy.engines import numba_codegen as cg
from fusegrad.lazy.kernel import Instr, Kernel, Output

SHORT_MAX = 4  # a last axis of at most this many points is split
MIN_POINTS = 1 << 14  # in a kernel of at least this many points
_COMBINE = {"sum": "add", "prod": "multiply", "max": "maximum", "min": "minimum"}


@dataclass(frozen=True)
class _Recipe:
    """What depends only on a kernel's signature and its short axis's size."""

    inputs: tuple[tuple[int, int | None], ...]  # (original input, index along the axis or None)
    program: tuple[Instr, ...]
    outputs: tuple[Output, ...]
    # per original output: ("stack", first, count), ("one", j) or ("copies", j, count)
    assembly: tuple[tuple, ...]


@dataclass(frozen=True)
class Split:
    """The kernel over the other axes (``kernel``) and ``assemble(outputs) -> outputs`` of
    the original kernel."""

    kernel: Kernel
    assemble: Callable[[list[np.ndarray]], list[np.ndarray]]


_RECIPES: dict[tuple, _Recipe | None] = {}


def split(kernel: Kernel) -> Split | None:
    """``kernel`` over ``domain[:-1]`` when its last axis has 2..``SHORT_MAX`` points and the
    domain at least ``MIN_POINTS``; None when it is not worth it or not possible (a reduction
    that cannot be combined per point, an output as large as the domain)."""
    dom = kernel.domain
    if len(dom) < 2 or not 2 <= dom[-1] <= SHORT_MAX or kernel.size < MIN_POINTS:
        return None
    if any(i.op in cg.POWERS for i in kernel.program):
        # a vectorised power of a run-time exponent computes every case of numba_math.power at
        # every point, libm's pow included (the Lennard-Jones gradient's r**-6: 10.7 -> 26 ms);
        # one compiled in as a literal (numba_codegen.baked) has only its own case
        n_in = len(kernel.inputs)
        literal = cg.baked(kernel.constants, kernel.program, n_in)
        if any(i.op in cg.POWERS and i.args[-1] - n_in not in literal for i in kernel.program):
            return None
    key = (kernel.signature(), dom[-1])
    if key not in _RECIPES:
        if len(_RECIPES) > 4096:
            _RECIPES.clear()
        _RECIPES[key] = _recipe(kernel)
    recipe = _RECIPES[key]
    if recipe is None:
        return None
    ins = kernel.inputs
    inputs = tuple(ins[j][..., 0 if k is None else k] for j, k in recipe.inputs)
    inner = Kernel(dom[:-1], inputs, kernel.constants, recipe.program, recipe.outputs)
    shapes = [kernel.output_shape(o) for o in kernel.outputs]

    def assemble(parts: list[np.ndarray]) -> list[np.ndarray]:
        out = []
        for how, shape in zip(recipe.assembly, shapes):
            if how[0] == "stack":
                out.append(np.stack(parts[how[1] : how[1] + how[2]], axis=-1))
            elif how[0] == "one":
                out.append(parts[how[1]].reshape(shape))
            else:
                out.append(np.repeat(parts[how[1]][..., None], how[2], axis=-1))
        return out

    return Split(inner, assemble)


def _recipe(kernel: Kernel) -> _Recipe | None:
    dom = kernel.domain
    last, c = len(dom) - 1, dom[-1]
    if any(o.mirror is not None for o in kernel.outputs) and len(dom) < 3:
        return None
    n_in, n_const = len(kernel.inputs), len(kernel.constants)
    inputs: list[tuple[int, int | None]] = []
    ids: dict[tuple[int, int | None], int] = {}  # (original value, index or None) -> new value
    varies: dict[int, bool] = {}
    for j, a in enumerate(kernel.inputs):
        varies[j] = a.shape[-1] != 1
        for k in range(c) if varies[j] else (None,):
            ids[(j, k)] = len(inputs)
            inputs.append((j, k))
    first = len(inputs) + n_const
    for t in range(n_const):
        ids[(n_in + t, None)] = len(inputs) + t
        varies[n_in + t] = False
    program: list[Instr] = []

    def ref(v: int, k: int | None) -> int:
        return ids[(v, k if varies[v] else None)]

    def emit(instr: Instr) -> int:
        program.append(instr)
        return first + len(program) - 1

    for i, instr in enumerate(kernel.program):
        v = n_in + n_const + i
        varies[v] = any(varies[a] for a in instr.args)
        for k in range(c) if varies[v] else (None,):
            ids[(v, k)] = emit(Instr(instr.op, tuple(ref(a, k) for a in instr.args), instr.dtype))
    outputs: list[Output] = []
    assembly: list[tuple] = []
    values = [*[a.dtype for a in kernel.inputs], *[None] * n_const]
    values += [i.dtype for i in kernel.program]
    for o in kernel.outputs:
        if last in o.axes:
            combine = _COMBINE.get(str(o.reduce))
            dtype = values[o.value]
            if o.mirror is not None or combine is None or dtype != o.dtype:
                return None
            if dtype.kind not in "fc":  # (a sum of booleans counts: add would be "or")
                return None
            acc = ref(o.value, 0)
            for k in range(1, c):
                acc = emit(Instr(combine, (acc, ref(o.value, k)), dtype))
            axes = tuple(a for a in o.axes if a != last)
            assembly.append(("one", len(outputs)))
            outputs.append(Output(acc, o.reduce if axes else None, axes, o.dtype))
            continue
        if o.reduce is None:
            return None  # as large as the domain: a stack would copy it
        if not any(varies[v] for v in (o.value, o.mirror) if v is not None):
            assembly.append(("copies", len(outputs), c))  # the same for every index
            mirror = None if o.mirror is None else ref(o.mirror, None)
            outputs.append(Output(ref(o.value, None), o.reduce, o.axes, o.dtype, mirror))
            continue
        assembly.append(("stack", len(outputs), c))
        for k in range(c):
            mirror = None if o.mirror is None else ref(o.mirror, k)
            outputs.append(Output(ref(o.value, k), o.reduce, o.axes, o.dtype, mirror))
    return _Recipe(tuple(inputs), tuple(program), tuple(outputs), tuple(assembly))
