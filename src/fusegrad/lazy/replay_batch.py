"""Matrix products of a ``jit`` replay computed as BLAS calls of the replay's own, and many
small ones of a loop computed as one large one.

Steps recorded with their products (``replay.step(..., products=...)``: ``np.matmul`` and the
pullbacks of matmul, checked bit for bit when recorded) can run as bare ``np.matmul`` calls on
their operands' views (``product_steps``; a pullback object they made is then never built, if
only such steps read it). Two patterns of a loop that multiplies by the same weight at each step
(an RNN: ``x_t @ Wx`` and ``h @ Wh`` at each ``t``) become one product each (``plan``):

* the products ``a_t @ B`` of one ``B``, where the ``a_t`` are consecutive blocks of one array
  (``x_t = xs[t]``): one ``(T m, k) @ B``, written where the results live (the results of each
  step are views of one buffer);
* a sum ``Σ_t a_tᵀ @ c_t`` (a weight's gradient, accumulated by ``replay_accumulate``): one
  ``Aᵀ @ C`` of the stacked ``a_t`` and ``c_t``, which are either consecutive blocks of one
  array or results the program writes into a buffer of its own (kernel outputs and products
  given a slice of one buffer each).

Small products waste most of a BLAS call's time (16×64 by 64×64: ~10 us, at 7% of the peak);
one large one runs near the peak. The sum is rounded in BLAS's order instead of the loop's.
Only a replay holding the program's buffers (``Program.pool``) runs batched; one that finds them
in use runs each product on its own.

Example: 12 blocks of one array times one matrix, as one product::

    >>> f8 = np.dtype("f8")
    >>> xs, w = np.arange(24.0).reshape(12, 1, 2), np.arange(6.0).reshape(2, 3)
    >>> lay = [((12, 1, 2), (16, 16, 8), f8), ((2, 3), (24, 8), f8)]
    >>> steps = []
    >>> for t in range(12):
    ...     a = ("view", 0, 16 * t, (1, 2), (16, 8), f8)
    ...     steps.append(("call", None, ((), ()), 2 + t, (None, (((1, 3), (24, 8), f8),), True,
    ...                   ((0, a, ("slot", 1), False, False),))))
    ...     lay.append(((1, 3), (24, 8), f8))
    >>> found = plan(steps, 2, lay, set(range(2, 14)), set(range(12)), lambda i: True)
    >>> len(found.stacks), sorted(found.ready), list(found.gemms)
    (1, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], [0])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .replay_accumulate import count
from .replay_ops import c_contiguous


def product_steps(steps: Sequence[tuple], recipes: Sequence[tuple]) -> set[int]:
    """Indices of the direct steps whose array results are all recorded products and whose
    other results (pullbacks) only such steps read: a replay computes them with ``np.matmul``
    alone."""
    owner: dict[int, int] = {}
    objects: dict[int, list[int]] = {}
    cand: set[int] = set()
    first_of: list[int] = []
    for i, (kind, _, _, first, extra) in enumerate(steps):
        first_of.append(first)
        if kind != "call" or not extra[2] or len(extra) < 4 or not extra[3]:
            continue
        arrays = {k for k, w in enumerate(extra[1]) if w is not None}
        if {p[0] for p in extra[3]} != arrays:
            continue
        cand.add(i)
        objects[i] = [first + k for k, w in enumerate(extra[1]) if w is None]
        for s in objects[i]:
            owner[s] = i
    readers: dict[int, set[int]] = {s: set() for s in owner}
    for i, (kind, template, sources, _first, _extra) in enumerate(steps):
        if kind == "call":
            found: set[int] = set()
            _read(sources, found)
            for s in found & readers.keys():
                readers[s].add(i)
        elif kind not in ("iadd", "alias") and template is not None:
            for src in sources:
                if src[0] != "const" and src[0] in readers:
                    readers[src[0]].add(i)
    for r in recipes:
        found = set()
        _read(r, found)
        for s in found & readers.keys():
            readers[s].add(-1)
    changed = True
    while changed:
        changed = False
        for i in sorted(cand):
            if any(r not in cand for s in objects[i] for r in readers[s]):
                cand.discard(i)
                changed = True
    return cand


def _read(e: Any, into: set[int]) -> None:
    if isinstance(e, tuple) and e and isinstance(e[0], str):
        if e[0] in ("view", "slot"):
            into.add(e[1])
        elif e[0] in ("seq", "dict"):
            for v in e[2]:
                _read(v, into)
        elif e[0] == "derived" and e[2] is not None:
            _read(e[2], into)
    elif isinstance(e, tuple):
        for v in e:
            _read(v, into)


@dataclasses.dataclass
class Batches:
    """What ``plan`` found: buffers holding several slots' arrays (``stacks``: item shape,
    dtype, slots in order), products computed together (``gemms``: at a step index, what it
    computes), results already made by an earlier batched product (``ready``: step -> item
    indices), results no longer made (``drop``) and steps with nothing left to do (``skip``)."""

    stacks: list[tuple[tuple, np.dtype, list[int]]] = dataclasses.field(default_factory=list)
    gemms: dict[int, tuple] = dataclasses.field(default_factory=dict)
    ready: dict[int, set[int]] = dataclasses.field(default_factory=dict)
    drop: dict[int, set[int]] = dataclasses.field(default_factory=dict)
    skip: set[int] = dataclasses.field(default_factory=set)
    stacked: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)


def _shape(e: tuple, layouts: Sequence[tuple | None]) -> tuple | None:
    if e[0] == "view":
        return e[3]
    if e[0] == "slot":
        lay = layouts[e[1]]
        return None if lay is None else lay[0]
    return None


def _as_block(e: tuple, layouts: Sequence[tuple | None]) -> tuple | None:
    """``(slot, offset, shape, dtype)`` of a C-contiguous 2-d view of part of one slot."""
    if e[0] == "slot":
        lay = layouts[e[1]]
        if lay is None or len(lay[0]) != 2 or not c_contiguous(*lay):
            return None
        return (e[1], 0, lay[0], lay[2])
    if e[0] == "view":
        _, slot, offset, shape, strides, dtype = e
        if len(shape) != 2 or not c_contiguous(shape, strides, dtype):
            return None
        return (slot, offset, shape, dtype)
    return None


def _run_of_blocks(blocks: list[tuple]) -> tuple | None:
    """``("base", slot, offset, (T m, k), dtype)`` when ``blocks`` are consecutive blocks of
    one slot (in this order), else None."""
    slot, offset, shape, dtype = blocks[0]
    step = shape[0] * shape[1] * dtype.itemsize
    for j, (s, o, sh, dt) in enumerate(blocks):
        if s != slot or o != offset + j * step or sh != shape or dt != dtype:
            return None
    return ("base", slot, offset, (len(blocks) * shape[0], shape[1]), dtype)


class _Stacks:
    """Stack assignments made so far, and tentative ones of a group being planned."""

    def __init__(self, batches: Batches) -> None:
        self.b = batches

    def region(self, slots: list[int], layouts: Sequence[tuple | None]) -> tuple | None:
        """``("stack", id, j0, j1)`` for ``slots`` as consecutive entries of one stack (a new
        one if none of them is in one), else None."""
        where = [self.b.stacked.get(s) for s in slots]
        if all(w is None for w in where):
            lay = layouts[slots[0]]
            if lay is None or any(layouts[s] != lay for s in slots) or len(set(slots)) < len(slots):
                return None
            return ("new", lay[0], lay[2], list(slots))
        if any(w is None for w in where):
            return None
        sid, j0 = where[0]  # type: ignore[misc]
        if any(w != (sid, j0 + j) for j, w in enumerate(where)):
            return None
        return ("stack", sid, j0, j0 + len(slots))

    def commit(self, r: tuple) -> tuple:
        if r[0] != "new":
            return r
        _, shape, dtype, slots = r
        sid = len(self.b.stacks)
        self.b.stacks.append((shape, dtype, slots))
        for j, s in enumerate(slots):
            self.b.stacked[s] = (sid, j)
        return ("stack", sid, 0, len(slots))


def plan(
    steps: Sequence[tuple],
    n_inputs: int,
    layouts: Sequence[tuple | None],
    reused: set[int],
    products: set[int],
    writes: Callable[[int], bool],
) -> Batches:
    """The batched products of a program (see the module): ``reused`` the slots with buffers
    of the program's own, ``products`` the steps run as products (``product_steps``),
    ``writes(i)`` whether step ``i`` writes its results into the buffers it is given."""
    b = _Stacks(Batches())
    made_by: dict[int, int] = {}
    items: dict[int, tuple] = {}  # slot -> (step, product) of recorded products
    first = n_inputs
    for i, step in enumerate(steps):
        for j in range(count(step)):
            made_by[first + j] = i
        if i in products:
            for p in step[4][3]:
                items[first + p[0]] = (i, p)
        first += count(step)

    def own_buffer(slot: int) -> bool:  # a result the program writes into a buffer it gives
        i = made_by.get(slot)
        return i is not None and slot in reused and writes(i)

    def side(blocks: list[tuple], encs: list[tuple]) -> tuple | None:
        run = _run_of_blocks(blocks)
        if run is not None:
            return run
        if all(e[0] == "slot" or (e[0] == "view" and _same_as_slot(e, layouts)) for e in encs):
            slots = [e[1] for e in encs]
            if all(own_buffer(s) for s in slots):
                return b.region(slots, layouts)
        return None

    # 1. products a_t @ B of one B, the a_t consecutive blocks of one array: one product
    groups: dict[tuple, list[tuple]] = {}
    for slot, (i, (k, a, bb, ta, tb)) in items.items():
        block = _as_block(a, layouts)
        if ta or tb or block is None or slot not in reused:
            continue
        key = ("const", id(bb[1])) if bb[0] == "const" else bb
        groups.setdefault((key, block[0], block[2]), []).append((block[1], slot, i, k, bb, a))
    for (_, _, shape), members in groups.items():
        members.sort(key=lambda m: m[0])
        size = shape[0] * shape[1] * layouts[members[0][1]][2].itemsize
        run: list[tuple] = []
        for m in [*members, None]:
            if m is not None and run and m[0] == run[-1][0] + size:
                run.append(m)
                continue
            if len(run) >= 2:
                _forward(b, run, layouts, made_by)
            run = [m] if m is not None else []

    # 2. sums of a_tᵀ @ c_t accumulated into one total: one product
    terms: dict[int, list[int]] = {}
    for kind, _, sources, _first, _ in steps:
        if kind == "iadd":
            terms.setdefault(sources[0], [sources[0]]).append(sources[1])
    # the longest sums first: a shorter one over part of a loop (h_{t-1} with dz_t, t >= 1)
    # then finds its operands inside the stacks a longer one made (dz_t, t >= 0)
    aliases = [p for p, step in enumerate(steps) if step[0] == "alias"]
    aliases.sort(key=lambda p: -len(terms.get(steps[p][2][0], ())))
    for p in aliases:
        sources = steps[p][2]
        into = sources[0]
        slots = terms.get(into, [into])
        found = [items.get(s) for s in slots]
        if len(slots) < 2 or any(f is None or not (f[1][3] and not f[1][4]) for f in found):
            continue
        pairs = [(f[1][1], f[1][2], s, f[0], f[1][0]) for f, s in zip(found, slots)]  # type: ignore[index]
        blocks_a = [_as_block(x[0], layouts) for x in pairs]
        blocks_c = [_as_block(x[1], layouts) for x in pairs]
        if any(x is None for x in blocks_a + blocks_c):
            continue
        order = sorted(range(len(pairs)), key=lambda j: (blocks_a[j][0], blocks_a[j][1]))  # type: ignore[index]
        pairs = [pairs[j] for j in order]
        blocks_a = [blocks_a[j] for j in order]
        blocks_c = [blocks_c[j] for j in order]
        sa = side(blocks_a, [x[0] for x in pairs])  # type: ignore[arg-type]
        if sa is None:
            continue
        sc = side(blocks_c, [x[1] for x in pairs])  # type: ignore[arg-type]
        if sc is None or (sa[0] == "new" and sc[0] == "new" and set(sa[3]) & set(sc[3])):
            continue
        sa, sc = b.commit(sa), b.commit(sc)
        b.b.gemms[p] = ("sum", sa, sc)
        for _a, _c, _s, i, k in pairs:
            b.b.drop.setdefault(i, set()).add(k)
        for i, step in enumerate(steps):
            if step[0] == "iadd" and step[2][0] == into:
                b.b.skip.add(i)
    return b.b


def _same_as_slot(e: tuple, layouts: Sequence[tuple | None]) -> bool:
    lay = layouts[e[1]]
    return lay is not None and e[2] == 0 and e[3] == lay[0] and c_contiguous(e[3], e[4], e[5])


def _forward(b: _Stacks, run: list[tuple], layouts, made_by: dict[int, int]) -> None:
    """Plan the products of ``run`` (``(offset, slot, step, item, B, a)``, consecutive blocks of
    one array times one ``B``) as one, at the first of their steps."""
    first_step = min(m[2] for m in run)
    slots = [m[1] for m in run]
    region = b.region(slots, layouts)
    if region is None or region[0] != "new":
        return
    bb, a = run[0][4], run[0]
    if bb[0] in ("view", "slot") and made_by.get(bb[1], -1) >= first_step:
        return  # B is made after the first of them
    blocks = [_as_block(m[5], layouts) for m in run]
    base = _run_of_blocks(blocks)  # type: ignore[arg-type]
    if base is None or made_by.get(base[1], -1) >= first_step:
        return  # (the a_t all exist from the first product on)
    del a
    region = b.commit(region)
    b.b.gemms[first_step] = ("forward", base, bb, region)
    for _o, _s, i, k, _b, _a in run:
        b.b.ready.setdefault(i, set()).add(k)
