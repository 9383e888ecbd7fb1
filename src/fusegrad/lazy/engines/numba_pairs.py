"""Mirrored sums on the numba engine: a tiled loop nest, and a schedule under which threads add
straight into the output, with no partials.

A mirrored output ``out[i] = sum_j v[i, j] + sum_j w[j, i]`` (see ``kernel.py``) takes row ``i``
of the domain and column ``i``. Axes 0 and 1 are cut into the same ``nb`` blocks; a *tile*
``(a, b)``, the rows of block ``a`` by the columns of block ``b``, writes output blocks ``a`` and
``b`` only. With ``nb = 2T`` blocks for ``T`` threads, a round-robin tournament pairs the blocks
in ``2T - 1`` phases: in each, every thread owns one pair ``{a, b}`` and runs tiles ``(a, b)``
and ``(b, a)``; a last phase runs the diagonal tiles, two per thread. Within a phase no two
threads write the same output entries. A call allocates the output only; each thread keeps a
strip of scratch between calls (2 KiB, and 1 KiB of row compensations), against three
output-sized rows per thread that a column sum's partials take.

Sums over axis 1, axis 0 or both of the same domain share the pass (``tile_kind``): row sums
and column sums go into their outputs as a mirrored sum's two halves do, and a total keeps a
running sum and compensation per thread of the schedule, added up at the end. So the gradients
of ``sum(exp(-(v[:, None] - v[None, :])**2 / (2 * s**2)))`` with respect to ``v`` and ``s``
come from one pass.

Layout of a generated kernel over ``(n0, n1, ...)`` (``n0 == n1``)::

    @njit(cache=True, nogil=True, error_model="numpy")
    def kernel(nb, tiles, n0, n1, .., inputs, constants, outputs, scratch):
        for t in range(tiles.shape[0]):             # this call's tiles
            for ib in range(rlo, rhi, BAND):        # bands of rows
                for jb in range(clo, chi, w):       # strips of w = len(s) columns
                    for i0 in range(ib, ie):
                        racc = 0
                        for k in range(je - jb):    # i1 = jb + k
                            racc += v;  s[k] += w
                        out[i0], r[i0 - ib] <- TwoSum(out[i0], racc)
                    out[jb:je] += s;  s[:] = 0
                out[ib:ie] += r;  r[:] = 0         # the band's row compensations

Accuracy: a row adds its strip sums (vectorised sums of ``w`` points) into the output with
TwoSum, so within a tile it is about as accurate as a compensated sum, and an entry then adds
one value per tile. Columns add ``n/BAND`` partials of ``BAND`` points each without
compensation (that would need a compensation per output entry: a second gradient-sized array):
for ``n = 8000`` a chain of 62 adds, where NumPy's column sum (``axis=0``) is a chain of
``n``. Domains with axes after the first two (``(n, n, 3)``: pairwise displacements) loop over
them innermost and add each point into the output and the scratch.

Example::

    >>> import numpy as np
    >>> from fusegrad.lazy.engines.numba_codegen import analyse
    >>> from fusegrad.lazy.kernel import Instr, Output
    >>> f8 = np.dtype("f8")
    >>> plan = analyse(2, ((f8, (False, True)), (f8, (True, False))), (),
    ...                (Instr("subtract", (0, 1), f8), Instr("negative", (2,), f8)),
    ...                (Output(2, "sum", (1,), f8, mirror=3),))
    >>> "_radd(racc0, v2)" in generate_source(plan)  # the row sum, in a register
    True
    >>> schedule(2)[0]  # phase 0: thread 0 owns blocks {0, 3}, thread 1 owns {1, 2}
    [[(0, 3), (3, 0)], [(1, 2), (2, 1)]]
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import numpy as np

from fusegrad.lazy.engines import numba_codegen as cg

# Columns per strip: the scratch row of a thread (2 KiB of float64), and the length of the
# vectorised row sums. Rows per band: how many points a column partial adds before it goes into
# the output.
STRIP = 256
BAND = 128
# Rows per block at least: smaller tiles cost more in hand-offs to the threads than they share.
MIN_BLOCK = BAND


def schedule(threads: int) -> list[list[list[tuple[int, int]]]]:
    """Phases of tiles over ``2 * threads`` blocks: ``phases[p][t]`` lists thread ``t``'s tiles
    in phase ``p``. Every tile occurs once, and within a phase the threads' tiles touch disjoint
    blocks (rows and columns alike).

    >>> [len(p) for p in schedule(3)], sum(len(t) for p in schedule(3) for t in p)
    ([3, 3, 3, 3, 3, 3], 36)
    """
    m = 2 * threads
    phases = []
    for r in range(m - 1):  # the circle method: block m-1 stays, the others rotate
        pairs = [(r, m - 1)] + [((r + k) % (m - 1), (r - k) % (m - 1)) for k in range(1, threads)]
        phases.append([[(a, b), (b, a)] for a, b in pairs])
    phases.append([[(2 * t, 2 * t), (2 * t + 1, 2 * t + 1)] for t in range(threads)])
    return phases


@functools.cache
def tile_arrays(threads: int) -> tuple[tuple[np.ndarray, ...], ...]:
    """``schedule(threads)`` as the int64 arrays a kernel takes, ``[phase][thread]``, made once
    (not to be written: numba would compile a second variant for read-only arrays).

    >>> tile_arrays(1)[0][0].tolist()
    [[0, 1], [1, 0]]
    """
    phases = []
    for phase in schedule(threads):
        phases.append(tuple(np.array(tiles, np.int64) for tiles in phase))
    return tuple(phases)


_LOCAL = threading.local()


def take_strips(specs: list[tuple[tuple, np.dtype]]) -> list[np.ndarray]:
    """This thread's zeroed scratch arrays for ``scratch_specs``, kept between calls like a BLAS
    workspace (a kernel leaves them at zero): a call allocates only its outputs. Scratch taken
    and not given back (its kernel raised) is zeroed again.

    >>> s = take_strips([((256,), np.dtype("f8"))]); s[0].shape, bool(s[0].any())
    ((256,), False)
    >>> give_back(s)
    """
    mine: dict[tuple, list[Any]] | None = getattr(_LOCAL, "strips", None)
    if mine is None:
        mine = _LOCAL.strips = {}
    out: list[np.ndarray] = []
    for k, (shape, dt) in enumerate(specs):
        key = (shape, dt.str, k)
        entry = mine.get(key)
        if entry is None:
            entry = mine[key] = [np.zeros(shape, dt), True]
        elif not entry[1]:
            entry[0].fill(0)
        entry[1] = False
        out.append(entry[0])
    return out


def give_back(strips: list[np.ndarray]) -> None:
    """Mark strips from ``take_strips`` as back at zero (their kernel finished)."""
    ids = {id(s) for s in strips}
    for entry in _LOCAL.strips.values():
        if id(entry[0]) in ids:
            entry[1] = True


def scratch_shape(domain: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of one thread's scratch for one output: a strip of column partials.

    >>> scratch_shape((8000, 8000, 3))
    (256, 3)
    """
    return (max(1, min(STRIP, domain[1])),) + tuple(domain[2:])  # >= 1: the strip step


def tile_kind(o) -> str | None:
    """What the tiled nest does with output ``o``: ``"mirrored"``, ``"rows"`` (a sum over axis
    1), ``"cols"`` (over axis 0), ``"total"`` (over axes 0 and 1), or None: not supported.

    >>> from fusegrad.lazy.kernel import Output
    >>> tile_kind(Output(0, "sum", (0, 1), np.dtype("f8"))), tile_kind(Output(0, "max", (1,), None))
    ('total', None)
    """
    if o.mirror is not None:
        return "mirrored"
    if o.reduce != "sum":
        return None
    return {(1,): "rows", (0,): "cols", (0, 1): "total"}.get(tuple(o.axes))


def needs_strip(o) -> bool:
    """Whether output ``o`` collects column partials in a scratch strip."""
    return tile_kind(o) in ("mirrored", "cols")


def needs_row_comp(o, ndim: int) -> bool:
    """Whether output ``o`` adds row partials into its entries with TwoSum, keeping the
    compensation of a band's rows in scratch (2D domains; on longer ones rows add per point)."""
    return ndim == 2 and tile_kind(o) in ("mirrored", "rows")


def scratch_specs(domain: tuple[int, ...], outputs) -> list[tuple[tuple, np.dtype]]:
    """``(shape, dtype)`` of the scratch a kernel takes, in its parameters' order: a strip per
    output with column partials, then a band of row compensations per output that keeps them.

    >>> from fusegrad.lazy.kernel import Output
    >>> scratch_specs((500, 500), [Output(0, "sum", (1,), np.dtype("f8"), mirror=1)])
    [((256,), dtype('float64')), ((128,), dtype('float64'))]
    """
    specs = [(scratch_shape(domain), o.dtype) for o in outputs if needs_strip(o)]
    specs += [((BAND,), o.dtype) for o in outputs if needs_row_comp(o, len(domain))]
    return specs


def generate_source(plan: cg.Plan) -> str:
    """The module of a kernel with a mirrored sum (``plan.mirrored``), whose other outputs are
    sums over axis 1, axis 0 or both (``tile_kind``).

    ``kernel(nb, tiles, n0.., in0.., c0.., out0.., s.., q..)`` runs the tiles ``(row block, column
    block)`` listed in the int64 array ``tiles`` (shape ``(k, 2)``), blocks being the ``nb``
    equal cuts of axes 0 and 1. ``out*`` must start at zero; ``s*`` are the scratch strips of
    the outputs that need one (``needs_strip``; ``scratch_shape``), at zero and left at zero;
    strips are as wide as the scratch. ``q*`` are the running total and compensation (shape
    ``(2, ...)``) of each ``"total"`` output, for the calls of one thread of the schedule.
    """
    d = plan.ndim
    nin, ncon = len(plan.in_dtypes), len(plan.const_kinds)
    dts = plan.operand_dtype
    stmts, names = cg.program_source(plan)
    rest = list(range(2, d))
    ridx = "".join(f", i{ax}" for ax in rest)
    kidx = "".join(f", k{ax}" for ax in rest)
    inner: list[str] = []  # at each point
    before_row: list[str] = []  # before and after the loop over a row's strip
    after_row: list[str] = []
    fold: list[str] = []  # a band's column partials into the outputs
    band_end: list[str] = []  # the band's row compensations into the outputs
    strips = [j for j, o in enumerate(plan.outputs) if needs_strip(o)]
    comps = [j for j, o in enumerate(plan.outputs) if needs_row_comp(o, d)]
    totals = [j for j, o in enumerate(plan.outputs) if tile_kind(o) == "total"]
    for j, o in enumerate(plan.outputs):
        kind = tile_kind(o)
        v = cg.cast(names[o.value], dts[o.value], o.dtype)
        zero = cg.ident_src("sum", o.dtype)
        if kind in ("mirrored", "cols"):
            w = v if kind == "cols" else cg.cast(names[o.mirror], dts[o.mirror], o.dtype)
            s = f"s{j}[k{ridx}]"
            inner.append(f"{s} = {cg.combine('sum', s, w, o.dtype)}")
            t = f"o{j}[ju + k, 0{kidx}]" if kind == "mirrored" else f"o{j}[0, ju + k{kidx}]"
            s = f"s{j}[k{kidx}]"
            fold += [f"{t} = {cg.combine('sum', t, s, o.dtype)}", f"{s} = {zero}"]
        if kind in ("mirrored", "rows", "total"):
            if rest:  # short trailing axes: each point goes into its entry
                t = f"o{j}[i0, 0{ridx}]" if kind != "total" else f"q{j}[0{ridx}]"
                inner.append(f"{t} = {cg.combine('sum', t, v, o.dtype)}")
                continue
            # a vectorised running sum over the strip (reassociated add only)
            before_row.append(f"racc{j} = {zero}")
            inner.append(f"racc{j} = {cg.combine('sum', f'racc{j}', v, o.dtype, plan)}")
            if kind == "total":
                after_row += cg.two_sum(f"q{j}[0]", f"q{j}[1]", f"racc{j}", f"{j}")
            else:  # into the output with TwoSum, the compensation kept for the band's rows
                after_row += cg.two_sum(f"o{j}[i0, 0]", f"r{j}[i0 - ib]", f"racc{j}", f"r{j}")
                fin = cg.fsum_fin(f"o{j}[i0, 0]", f"r{j}[i0 - ib]")  # inf stays inf, not nan
                band_end += [f"o{j}[i0, 0] = {fin}", f"r{j}[i0 - ib] = {zero}"]

    I = "    "
    L = [I + st for st in stmts[0]]
    # the strip width is the scratch's: a kernel never writes past the scratch it is given
    L.append(f"{I}w = s{strips[0]}.shape[0]")
    L += [
        f"{I}for t in range(tiles.shape[0]):",
        f"{I * 2}ra = tiles[t, 0]",
        f"{I * 2}cb = tiles[t, 1]",
        f"{I * 2}rlo = (ra * n0) // nb",
        f"{I * 2}rhi = ((ra + 1) * n0) // nb",
        f"{I * 2}clo = (cb * n1) // nb",
        f"{I * 2}chi = ((cb + 1) * n1) // nb",
        f"{I * 2}for ib in range(rlo, rhi, {BAND}):",
        f"{I * 3}ie = min(ib + {BAND}, rhi)",
        f"{I * 3}for jb in range(clo, chi, w):",
        f"{I * 4}m = np.uint64(min(jb + w, chi) - jb)",
        f"{I * 4}ju = np.uint64(jb)",
        f"{I * 4}for i0 in range(ib, ie):",
    ]
    ind = I * 5
    L += [ind + st for st in stmts[1] + before_row]
    # unsigned strip indices: LLVM vectorises the loop (see numba_codegen's module docstring)
    L += [f"{ind}for k in range(np.uint64(0), m):", f"{ind}{I}i1 = ju + k"]
    cur = ind + I
    L += [cur + st for st in stmts[2]]
    for ax in rest:
        L.append(f"{cur}for i{ax} in range(n{ax}):")
        cur += I
        L += [cur + st for st in stmts[ax + 1]]
    L += [cur + st for st in inner]
    L += [ind + st for st in after_row]
    L.append(f"{I * 4}for k in range(np.uint64(0), m):")
    L += cg.loops(rest, fold, I * 5)
    if band_end:
        L.append(f"{I * 3}for i0 in range(ib, ie):")
        L += [I * 4 + st for st in band_end]
    L.append(f"{I}return 0")

    params = ["nb", "tiles"] + [f"n{ax}" for ax in range(d)]
    params += [f"a{k}" for k in range(nin)] + [f"c{j}" for j in range(ncon)]
    params += [f"o{j}" for j in range(len(plan.outputs))]
    params += [f"s{j}" for j in strips] + [f"r{j}" for j in comps] + [f"q{j}" for j in totals]
    head = ["import math", "", "import numpy as np", "from numba import njit", ""]
    if "vm" in plan.helpers:
        head[-1:] = ["", "from fusegrad.lazy.engines import numba_math as vm", ""]
    for h in sorted(plan.helpers - {"vm"}):
        head.append(cg.HELPERS[h].rstrip() + "\n")
    deco = '@njit(cache=True, nogil=True, error_model="numpy")'
    return "\n".join(head + ["", deco, f"def kernel({', '.join(params)}):"] + L) + "\n"
