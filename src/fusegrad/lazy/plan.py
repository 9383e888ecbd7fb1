"""The planner: turns lazy nodes into fused kernels, applying the materialisation policy.

``materialize(*nodes)`` evaluates nodes together. Outputs over the same domain (a map's shape,
or a reduction's argument shape) become one multi-output kernel. Reductions nested inside an
expression run first, in their own kernels. A policy decides what else is stored
(docs/architecture.md, "The lazy IR"):

1. an expensive value (a transcendental op) that a kernel would broadcast over a larger domain
   is stored at its own size, instead of being recomputed once per broadcast copy;
2. an expensive value that is not a broadcast blow-up and that two or more kernels consume is
   stored once and reused;
3. everything else, blow-ups above all, is recomputed inside each kernel that consumes it.

Recomputation is bounded, so that the gradient of a long loop does a small constant times its
forward's work (``benchmarks/bench_recompute.py``: at most 4x, flat in the number of steps):

4. a sum of one-hot selections (``x[t]``'s cotangents) is computed slice by slice, into one
   buffer (``SCATTER_FROM``);
5. a large graph is cut into layers of ``CHAIN`` ops whose values read higher up are stored, and
   a value two kernels of one domain share is stored by the first (``MAX_OUTPUTS``);
6. a kernel on top of a long chain stores every few values down it (``SPINES``: how long, and
   how few, by the size of its domain).

None of these stores by choice a value larger than every leaf under it and than the largest
output (a broadcast blow-up; 5 stores one only atop a chain of ``CHAIN`` of them, to bound a
kernel's length), so the pairwise cases keep their O(N) memory.

Every decision is appended to the active record (see ``recording``), which ``fusegrad.explain``
prints.

Example::

    >>> from .nodes import asarray
    >>> x = asarray(np.arange(4.0))
    >>> d = x[:, None] - x[None, :]
    >>> rows, cols = materialize(np.sum(d, axis=1), np.sum(d, axis=0))  # one kernel, one pass
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import engines, movement, readers, reductions, replay
from .kernel import Instr, Kernel, Output
from .nodes import (
    LazyArray,
    Leaf,
    Map,
    Reduce,
    _const_key,
    forget_arguments,
    is_expensive,
    make_map,
)

_RECORDS: list[list[dict]] = []


@contextlib.contextmanager
def recording() -> Iterator[list[dict]]:
    """Collect every planning decision and kernel run inside the block into a list.

    >>> from . import small
    >>> from .nodes import asarray
    >>> with recording() as rec, small.fusing():  # 3 elements: else computed eagerly, unplanned
    ...     _ = materialize(np.exp(asarray(np.ones(3))))
    >>> rec[-1]["event"]
    'kernel'
    """
    rec: list[dict] = []
    _RECORDS.append(rec)
    try:
        yield rec
    finally:
        _RECORDS.remove(rec)


def _note(**event: Any) -> None:
    for rec in _RECORDS:
        rec.append(event)


@dataclass
class Work:
    """What the kernels run inside a ``counting()`` block evaluated: ``kernels`` run,
    ``points`` (the sizes of their domains) and ``point_ops`` (each domain's size times the
    number of instructions of its program, at least one: a copy reads and writes each point)."""

    kernels: int = 0
    points: int = 0
    point_ops: int = 0


_COUNTERS: list[Work] = []


@contextlib.contextmanager
def counting() -> Iterator[Work]:
    """Count the kernels run inside the block and the work they did (``Work``); the measure
    of recomputation (``benchmarks/bench_recompute.py``).

    >>> from . import small
    >>> from .nodes import asarray
    >>> with counting() as work, small.fusing():
    ...     _ = materialize(np.exp(asarray(np.ones(3))) + 1.0)
    >>> work
    Work(kernels=1, points=3, point_ops=6)
    """
    work = Work()
    _COUNTERS.append(work)
    try:
        yield work
    finally:
        _COUNTERS.remove(work)


def value(node: Any) -> Any:
    """The concrete value of a leaf or an already materialised node."""
    if isinstance(node, Leaf):
        return node.array
    if isinstance(node, LazyArray):
        return node.cached
    return node


def materialize(*nodes: Any) -> Any:
    """Evaluate lazy nodes together; one array for one node, a tuple for several.

    >>> from .nodes import asarray
    >>> materialize(asarray(np.ones(2)) * 3)
    array([3., 3.])
    """
    if len(nodes) == 1 and type(nodes[0]) is Leaf and replay.active() is None:
        return nodes[0].array  # the small-array path's results: nothing to plan
    values = materialize_many(nodes)
    return values[0] if len(values) == 1 else tuple(values)


def materialize_many(nodes: Sequence[Any]) -> list[Any]:
    """Like ``materialize``, always returning a list (non-lazy inputs are passed through)."""
    rec = replay.active()
    if rec is not None:
        rec.on_materialize(nodes)
    todo: dict[int, LazyArray] = {}
    for n in nodes:
        if isinstance(n, Map | Reduce) and n.cached is None:
            todo[id(n)] = n
    if todo:
        _compute(list(todo.values()))
    return [value(n) for n in nodes]


def mirrored(n: Any) -> tuple[Reduce, Reduce] | None:
    """``(rows, cols)`` when ``n`` is ``rows + cols``, the sums over axis 1 and over axis 0 of two
    values on one domain whose axes 0 and 1 have one size: one mirrored sum (``kernel.py``),
    computed in one pass without the two sums' own arrays or column partials. It is how the
    gradient of a variable used on both sides of a pairwise expression accumulates.

    >>> from . import small
    >>> from .nodes import asarray
    >>> with small.fusing():  # 10 elements: else computed eagerly, no nodes
    ...     v = asarray(np.ones(10))
    ...     d = v[:, None] - v[None, :]
    ...     pair = mirrored(np.sum(d * d, axis=1) + np.sum(-d, axis=0))
    >>> [r.axes for r in pair]
    [(1,), (0,)]
    """
    if type(n) is not Map or n.op != "add" or n.cached is not None or n.dtype.kind != "f":
        return None
    rows, cols = n.args
    if not (type(rows) is Reduce and type(cols) is Reduce):
        return None
    if rows.axes == (0,):
        rows, cols = cols, rows
    dom = rows.arg.shape
    if (
        rows.axes != (1,)
        or cols.axes != (0,)
        or rows.kind != "sum"
        or cols.kind != "sum"
        or cols.arg.shape != dom
        or dom[0] != dom[1]
        or rows.shape != n.shape  # no broadcasting in the add
        or cols.shape != n.shape
        or rows.dtype != n.dtype
        or cols.dtype != n.dtype
        or rows.cached is not None
        or cols.cached is not None
        or inline(rows) is not None
        or inline(cols) is not None
    ):
        return None
    return rows, cols


def _tileable(o: LazyArray) -> bool:
    """A sum over axis 1, axis 0 or both: what can share a pass with a mirrored sum."""
    return type(o) is Reduce and o.kind == "sum" and o.axes in ((1,), (0,), (0, 1))


def _domain(node: LazyArray) -> tuple[int, ...]:
    if isinstance(node, Reduce):
        return node.arg.shape
    pair = mirrored(node)
    return pair[0].arg.shape if pair else node.shape


def _bodies(node: LazyArray) -> list[Any]:
    """What a kernel computing ``node`` evaluates at each point of its domain."""
    if isinstance(node, Reduce):
        return [node.arg]
    pair = mirrored(node)
    return [pair[0].arg, pair[1].arg] if pair else [node]


def _largest_leaf(node: Any, memo: dict) -> int:
    """The size in memory of the largest concrete value ``node`` is computed from."""
    stack = [node]
    while stack:  # iterative post-order: graphs of unrolled loops are deep
        n = stack[-1]
        if not isinstance(n, LazyArray) or id(n) in memo:
            stack.pop()
            continue
        if isinstance(n, Map) and n.cached is None:
            todo = [a for a in n.args if isinstance(a, LazyArray) and id(a) not in memo]
            if todo:
                stack.extend(todo)
                continue
            size = max((memo[id(a)] if isinstance(a, LazyArray) else 1 for a in n.args), default=1)
        else:
            # What the leaf holds in memory: a broadcast view (stride 0) is no larger than its
            # base.
            arr = value(n)
            if arr is None:  # a reduction not yet computed: it will be stored at its own size
                size = n.size
            else:
                held = [k for k, st in zip(arr.shape, arr.strides) if st != 0]
                size = math.prod(held)
        stack.pop()
        memo[id(n)] = size
    return memo[id(node)] if isinstance(node, LazyArray) else 1


def grows(node: Any) -> bool:
    """Whether ``node`` has more elements than every array it is computed from (a broadcast
    blow-up, ``x[:, None] - x[None, :]``): storing it costs more memory than its inputs do.

    >>> from . import small
    >>> from .nodes import asarray
    >>> x = asarray(np.ones(3))
    >>> with small.fusing():  # (lazy at any size, as inside traces of large values)
    ...     print(grows(x[:, None] - x[None, :]), grows(np.exp(x)))
    True False
    """
    return isinstance(node, LazyArray) and node.size > _largest_leaf(node, {})


def inline(n: Reduce) -> LazyArray | None:
    """A reduction nested in an expression, over at most ``reductions.UNROLL`` elements, as
    elementwise ops: it joins its consumer's kernel instead of being computed before it. Decided
    once per node: the walk that schedules a kernel's prerequisites and the one that builds it
    must agree, though values computed in between can change what slicing the argument gives."""
    if n.cached is not None:
        return None
    if n.inlined is None:
        n.inlined = (_unrolled(n),)
    return n.inlined[0]


def _unrolled(n: Reduce) -> LazyArray | None:
    if n.arg.size <= reductions.UNROLL:
        return None
    if math.prod(n.arg.shape[a] for a in n.axes) > reductions.UNROLL:
        return None
    try:  # only if slicing the argument computes nothing: the caller is collecting a kernel
        with movement.lazy_only():
            return movement.reshape(reductions.unrolled(n.kind, n.arg, n.axes), n.shape)
    except movement.WouldCompute:
        return None


def _squeezed(n: Map) -> LazyArray:
    """``n`` without its size-1 axes, when that is the same expression on views of its leaves
    (``exp(x[:, None])`` -> ``exp(x)``, hash-consed with any other use of it); else ``n``."""
    shape = tuple(d for d in n.shape if d != 1)
    if shape == n.shape:
        return n
    stack, seen = [n], set()
    while stack:  # only maps over concrete values: moving them computes nothing
        m = stack.pop()
        if not isinstance(m, LazyArray) or id(m) in seen or m.cached is not None:
            continue
        seen.add(id(m))
        if isinstance(m, Reduce):
            return n
        if isinstance(m, Map):
            stack.extend(m.args)
    return movement.reshape(n, shape)


def _walk(
    roots: list, domain_size: int, prereqs: dict, policy_store, aliases: list | None = None
) -> None:
    """Collect the nodes a kernel over a domain of ``domain_size`` must have computed first.
    A value stored at its own size is computed without its size-1 axes; ``aliases`` gets
    ``(node, stored)`` pairs for those, whose values are then views of each other."""
    stack = list(roots)
    root_ids = {id(r) for r in roots}
    seen: set[int] = set()
    memo: dict = {}
    while stack:
        n = stack.pop()
        if not isinstance(n, LazyArray) or id(n) in seen or n.cached is not None:
            continue
        seen.add(id(n))
        if isinstance(n, Leaf):
            continue
        if isinstance(n, Reduce):
            sub = inline(n)
            if sub is not None:
                stack.append(sub)
            else:
                prereqs[id(n)] = n
            continue
        if mirrored(n):
            prereqs[id(n)] = n  # computed first, in its own kernel, and read as an array
            continue
        # A blow-up (larger than every leaf under it) is never stored (DESIGN, policy rule 2).
        assert isinstance(n, Map)
        if (
            id(n) not in root_ids
            and n.size < domain_size
            and is_expensive(n)
            and n.size <= _largest_leaf(n, memo)
        ):
            stored = _squeezed(n)
            if isinstance(stored, Leaf):
                # moving it down computed it (a map of computed values): nothing left to plan,
                # and a leaf is never "pending" (planning it again made a new leaf each time)
                n.cached = np.reshape(stored.array, n.shape)
                continue
            policy_store(stored, "expensive, and broadcast over a larger domain")
            prereqs[id(stored)] = stored
            if stored is not n and aliases is not None:
                aliases.append((n, stored))
            continue
        stack.extend(n.args)


# Long chains (an unrolled loop of 10^5 steps) are cut into layers of CHAIN ops: a node's layer
# is its depth (the longest path of ops from computed values up to it) divided by CHAIN, each
# layer's values that a higher layer reads are stored (computed together, a kernel per domain),
# and no kernel is longer than CHAIN ops, so planning and compiling stay linear in the number of
# steps (a 10^4-op kernel would take numba minutes to compile) and every value is computed once:
# the gradient of a loop does what its forward does, a constant factor more, however long it
# runs. Graphs smaller than CUT_FROM nodes are one kernel per domain, which also computes every
# value once. A value larger than every leaf under it (a broadcast blow-up) and than the largest
# output is not stored by choice: its readers recompute it, unless it tops a chain of CHAIN such
# values (that one is stored, as a bound on kernel length).
CHAIN = 128
CUT_FROM = 1024


def _kids(n: LazyArray) -> list[LazyArray]:
    args = n.args if isinstance(n, Map) else (n.arg,) if isinstance(n, Reduce) else ()
    return [a for a in args if isinstance(a, Map | Reduce) and a.cached is None]


def _cut_long_chains(outputs: list[LazyArray]) -> None:
    """Compute, layer by layer, the values of a large graph under ``outputs`` that a higher
    layer reads (see ``CHAIN``)."""
    count = 0
    stack: list[Any] = list(outputs)
    seen: set[int] = set()
    while stack and count < CUT_FROM:
        n = stack.pop()
        if not isinstance(n, Map | Reduce) or n.cached is not None or id(n) in seen:
            continue
        seen.add(id(n))
        count += 1
        stack.extend(_kids(n))
    if count < CUT_FROM:
        return
    depth: dict[int, int] = {}
    chain: dict[int, int] = {}  # ops since the last storable value, along chains of blow-ups
    forced: set[int] = set()
    order: list[LazyArray] = []
    limit = max(_SMALL, max(o.size for o in outputs))
    memo: dict = {}
    for n in _post_order(outputs, depth):
        kids = _kids(n)
        if isinstance(n, Reduce) or n.size <= limit or n.size <= _largest_leaf(n, memo):
            chain[id(n)] = 0
        else:
            chain[id(n)] = 1 + max((chain[id(a)] for a in kids), default=0)
            if chain[id(n)] >= CHAIN:
                forced.add(id(n))
                chain[id(n)] = 0
        order.append(n)
    is_output = {id(o) for o in outputs}
    # Top-down: the layer each value is read at (its readers' own, or where they are
    # recomputed); a value read above its layer is stored, unless a blow-up.
    read_at: dict[int, int] = {}
    layers: dict[int, list[LazyArray]] = {}
    for n in reversed(order):
        own = (depth[id(n)] - 1) // CHAIN
        at = own if id(n) in is_output else read_at.get(id(n), own)
        if at > own and id(n) not in is_output:
            if chain[id(n)] == 0 or id(n) in forced:
                layers.setdefault(own, []).append(n)
                at = own
        for a in _kids(n):
            read_at[id(a)] = max(read_at.get(id(a), 0), at)
    for k in sorted(layers):
        todo = [n for n in layers[k] if n.cached is None]
        for n in todo:
            _note(event="store", node=repr(n), shape=n.shape, dtype=str(n.dtype),
                  reason=f"cuts a chain: read above layer {k} of {CHAIN} ops")  # fmt: skip
        if todo:
            _compute(todo)


# A sum of one-hot selections, ``where(rows == t, g_t, 0)`` summed over t (the cotangent of x
# that the pullbacks of x[0], x[1], ... add up), costs every term at every point of its domain:
# quadratic in the number of terms. From SCATTER_FROM terms, each term is computed over its
# selected slice only (all in one kernel, sharing what they have in common) and added into one
# buffer of the sum's shape.
SCATTER_FROM = 4
# The largest mask (in elements held in memory) inspected for its one True point.
_MASK_AT_MOST = 1 << 16
# A selection sum inside an expression is stored only up to the size of the largest output (or
# this many elements): never an intermediate larger than what needs it.
_SMALL = 1 << 16


def _is_zero(c: Any) -> bool:
    if isinstance(c, LazyArray):
        arr = value(c)
        return arr is not None and arr.size == 1 and arr.dtype != bool and not arr.reshape(-1)[0]
    return isinstance(c, int | float | complex | np.number) and not isinstance(c, bool) and c == 0


def _one_hot(mask: Any, ndim: int) -> tuple[tuple[int, int], ...] | None:
    """``((axis, index), ...)`` of the one True point of a concrete boolean mask over the axes it
    holds in memory (axes of a domain of ``ndim`` axes), or None."""
    if not isinstance(mask, LazyArray) or mask.dtype != np.bool_:
        return None
    arr = value(mask)
    if arr is None or arr.ndim > ndim:
        return None
    held = [a for a, (k, st) in enumerate(zip(arr.shape, arr.strides)) if k > 1 and st != 0]
    if not held or math.prod(arr.shape[a] for a in held) > _MASK_AT_MOST:
        return None
    compact = arr[tuple(slice(None) if a in held else slice(0, 1) for a in range(arr.ndim))]
    hits = np.flatnonzero(compact)
    if len(hits) != 1:
        return None
    pos = np.unravel_index(int(hits[0]), compact.shape)
    off = ndim - arr.ndim
    return tuple((off + a, int(pos[a])) for a in held)


def _selection(m: Any, shape: tuple[int, ...]) -> tuple[tuple, Any] | None:
    """``(key, g)`` when ``m`` is ``where(one-hot mask, g, 0)`` over ``shape`` with ``g`` constant
    along the mask's axes; ``key`` names the selected slice."""
    if type(m) is not Map or m.op != "where" or m.cached is not None or m.shape != shape:
        return None
    mask, g, zero = m.args
    if not _is_zero(zero):
        return None
    key = _one_hot(mask, len(shape))
    if key is None:
        return None
    gshape = g.shape if isinstance(g, LazyArray) else ()
    off = len(shape) - len(gshape)
    if any(a >= off and gshape[a - off] != 1 for a, _ in key):
        return None
    if isinstance(g, LazyArray) and g.dtype != m.dtype:
        g = make_map("cast", (g,), m.dtype)
    return key, g


def _selections(n: Map, visited: set[int]) -> tuple[list, dict[tuple, list]]:
    """The terms of the add tree of ``n`` (adds of its own shape, not yet computed): the other
    terms, and the selected terms by slice. Every add of the tree is put in ``visited``; a tree
    that reuses one of its adds (``y + y``) is left alone (its expansion can be exponential)."""
    rest: list = []
    picks: dict[tuple, list] = {}
    stack: list[Any] = [n]
    while stack:
        m = stack.pop()
        if type(m) is Map and m.op == "add" and m.cached is None and m.shape == n.shape:
            if id(m) in visited and m is not n:
                return [n], {}
            visited.add(id(m))
            stack.extend(reversed(m.args))  # terms in their left-to-right order
            continue
        sel = _selection(m, n.shape)
        if sel is None:
            rest.append(m)
        else:
            picks.setdefault(sel[0], []).append(sel[1])
    return rest, picks


def _selection_sums(outputs: list[LazyArray]) -> list[tuple[Map, list, dict]]:
    """The selection sums of ``SCATTER_FROM`` or more terms under ``outputs`` (not inside one
    another: those are found when the outer one's terms are computed)."""
    limit = max(_SMALL, max(o.size for o in outputs))
    is_output = {id(o) for o in outputs}
    found = []
    visited: set[int] = set()
    stack: list[Any] = list(outputs)
    while stack:
        n = stack.pop()
        if not isinstance(n, Map | Reduce) or n.cached is not None or id(n) in visited:
            continue
        if isinstance(n, Reduce):
            visited.add(id(n))
            stack.append(n.arg)
            continue
        if n.op != "add":
            visited.add(id(n))
            stack.extend(n.args)
            continue
        rest, picks = _selections(n, visited)
        count = sum(len(v) for v in picks.values())
        if count >= SCATTER_FROM and (id(n) in is_output or n.size <= limit):
            found.append((n, rest, picks))
        else:
            stack.extend(rest)
            stack.extend(g for terms in picks.values() for g in terms)
    return found


def _sum_terms(terms: list) -> Any:
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total


def _scatter_sums(outputs: list[LazyArray]) -> list[LazyArray]:
    """Compute the selection sums under ``outputs`` slice by slice (see ``SCATTER_FROM``), with
    the outputs that need none of them; returns the outputs still to compute."""
    found = _selection_sums(outputs)
    if not found:
        return outputs
    plans = []
    parts: dict[int, LazyArray] = {}
    for n, rest, picks in found:
        nd = n.ndim
        slices = []
        for key, terms in picks.items():
            axes = {a for a, _ in key}
            g = _sum_terms(terms)
            if isinstance(g, LazyArray):
                gshape = (1,) * (nd - g.ndim) + g.shape
                target = tuple(k for a, k in enumerate(gshape) if a not in axes)
                if target[len(target) - g.ndim :] != g.shape:
                    g = movement.reshape(g, target)
                if value(g) is None:
                    parts[id(g)] = g
            where: list[Any] = [slice(None)] * nd
            for a, i in key:
                where[a] = i
            slices.append((tuple(where), g))
        r = _sum_terms(rest) if rest else None
        if isinstance(r, LazyArray) and value(r) is None:
            parts[id(r)] = r
        plans.append((n, r, slices))
        _note(event="store", node=repr(n), shape=n.shape, dtype=str(n.dtype),
              reason=f"a sum of {sum(len(t) for t in picks.values())} one-hot selections, "
              f"computed slice by slice")  # fmt: skip
    targets = {id(n) for n, _, _ in found}
    free = [o for o in outputs if not _reaches(o, targets)]
    if parts or free:
        _compute(list({id(m): m for m in [*parts.values(), *free]}.values()))
    for n, r, slices in plans:
        if n.cached is not None:
            continue
        buf = np.zeros(n.shape, n.dtype)
        if r is not None:
            np.add(buf, value(r), out=buf, casting="unsafe")
        for index, g in slices:
            view = buf[index + (Ellipsis,)]  # a view even when every axis is selected
            np.add(view, value(g), out=view, casting="unsafe")
        n.cached = buf
    return [o for o in outputs if o.cached is None]


# How deep selection sums are computed inside one another's terms. Each level computes the
# terms of the sums found at the one above; the terms a level builds (sums of the selected
# values, reshaped) can hold selection sums again, and a chain of them need not shrink (an
# unrolled x + x[:, 0][:, None] * x[0][None, :] found itself again at every level, without end).
# Below this depth the sums are planned as ordinary expressions: slower, never wrong.
SCATTER_DEPTH = 4
_nesting = threading.local()


def _compute(outputs: list[LazyArray]) -> None:
    # (a recording replays kernels, not the buffer's assembly)
    depth = getattr(_nesting, "scatter", 0)
    if replay.active() is None and depth < SCATTER_DEPTH:
        _nesting.scatter = depth + 1
        try:
            outputs = _scatter_sums(outputs)
        finally:
            _nesting.scatter = depth
        if not outputs:
            return
    _cut_long_chains(outputs)
    groups: dict[tuple, list[LazyArray]] = {}
    for o in outputs:
        groups.setdefault((_domain(o), False), []).append(o)
    for key in [k for k, outs in groups.items() if any(mirrored(o) for o in outs)]:
        # A mirrored sum shares its pass with sums over axis 1, axis 0 or both (numba_pairs'
        # tiled nest takes those): a kernel of its own otherwise.
        outs = groups.pop(key)
        if all(mirrored(o) or _tileable(o) for o in outs):
            groups[(key[0], True)] = outs
        else:
            groups[(key[0], True)] = [o for o in outs if mirrored(o)]
            groups[key] = [o for o in outs if not mirrored(o)]

    prereqs: dict[int, LazyArray] = {}

    def store(n: LazyArray, reason: str) -> None:
        _note(event="store", node=repr(n), shape=n.shape, dtype=str(n.dtype), reason=reason)

    aliases: list[tuple[LazyArray, LazyArray]] = []
    for (domain, _), outs in groups.items():
        # One walk per kernel, not per output: the outputs of an unrolled loop share its graph.
        _walk([b for o in outs for b in _bodies(o)], math.prod(domain), prereqs, store, aliases)
    # Rule 2 of the policy: expensive, not a blow-up, consumed by two or more kernels.
    consumers: dict[int, set] = {}
    nodes_by_id: dict[int, LazyArray] = {}
    for key, outs in groups.items():
        for nid in _ids_in([b for o in outs for b in _bodies(o)], nodes_by_id):
            consumers.setdefault(nid, set()).add(key)
    memo: dict = {}
    for nid, domains in consumers.items():
        n = nodes_by_id[nid]
        if len(domains) < 2 or nid in prereqs or not isinstance(n, Map):
            continue
        if any(n is o for o in outputs):
            continue
        blow_up = n.size > _largest_leaf(n, memo)
        if is_expensive(n) and not blow_up:
            store(n, f"expensive, consumed by {len(domains)} kernels")
            prereqs[nid] = n
        else:
            why = "a broadcast blow-up" if blow_up else "cheap"
            _note(event="recompute", node=repr(n), shape=n.shape, kernels=len(domains), reason=why)

    pending = [p for p in prereqs.values() if p.cached is None]
    if pending:
        # Outputs that need no prerequisite join the prerequisites' planning, so that a nested
        # reduction shares one pass with them when its domain is theirs (the x, y and s
        # gradients of sum(exp(-(x[:, None] - y[None, :])**2 / (2 * s**2))) come from one pass).
        targets = {id(p) for p in pending} | {id(n) for n, _ in aliases}
        free = [
            o
            for outs in groups.values()
            for o in outs
            if not any(_reaches(b, targets) for b in _bodies(o))
        ]
        _compute(list({id(n): n for n in pending + free}.values()))
    for n, stored in aliases:
        if n.cached is None and stored.cached is not None:
            n.cached = stored.cached.reshape(n.shape)
    computed: list[LazyArray] = []
    for (domain, tiled), outs in groups.items():
        outs = [o for o in outs if o.cached is None]
        if tiled or len(outs) <= MAX_OUTPUTS:
            run = outs + _spine(outs, domain)
            _run_group(domain, run)
            computed += run
            continue
        outs = _by_depth(outs)
        later = readers.LaterReaders(outs, _bodies)
        full_size = _FullSizeOutputs(outs, math.prod(domain))
        for i in range(0, len(outs), MAX_OUTPUTS):
            chunk = outs[i : i + MAX_OUTPUTS]
            later.done(chunk)
            part = [o for o in chunk if o.cached is None]
            shared = _shared(part, later, full_size, domain)
            run = part + shared + _spine(part + shared, domain)
            _run_group(domain, run)
            later.computed(run)
            full_size.computed(run)
            computed += run
    if replay.active() is None:  # (a recording reads the graph it replays)
        forget_arguments(computed)


# A kernel has at most MAX_OUTPUTS outputs: numba's compile time grows with a kernel's size (a
# layer of an unrolled RNN storing 300 values took 95 s). More outputs of one domain run as
# several kernels, shallowest first, so that each reads what the ones before it stored.
MAX_OUTPUTS = 32


def _by_depth(outs: list[LazyArray]) -> list[LazyArray]:
    """``outs`` sorted by the longest chain of uncached ops under each."""
    depth: dict[int, int] = {}
    for _ in _post_order(outs, depth):
        pass
    return sorted(outs, key=lambda o: depth[id(o)])


def _post_order(roots: list[LazyArray], depth: dict[int, int]) -> Iterator[LazyArray]:
    """The nodes under ``roots`` (through ``_kids``), each once and after its kids, iteratively;
    ``depth`` gets each node's longest chain of ops down to a stored value as it is yielded."""
    stack: list[Any] = list(roots)
    while stack:  # iterative post-order
        n = stack[-1]
        if id(n) in depth:
            stack.pop()
            continue
        kids = _kids(n)
        todo = [a for a in kids if id(a) not in depth]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        depth[id(n)] = 1 + max((depth[id(a)] for a in kids), default=0)
        yield n


def _maps_under(roots: list) -> dict[int, Map]:
    """The uncached maps under ``roots``, by id, in the order a depth-first walk finds them."""
    found: dict[int, Map] = {}
    stack = list(roots)
    while stack:
        n = stack.pop()
        if type(n) is not Map or n.cached is not None or id(n) in found:
            continue
        found[id(n)] = n
        stack.extend(n.args)
    return found


class _FullSizeOutputs:
    """The outputs of a group as large as its domain that are still to compute (``_shared``
    stores no value larger than every output of this kernel and the later ones)."""

    def __init__(self, outs: list[LazyArray], domain_size: int) -> None:
        self._left = {id(o) for o in outs if o.size >= domain_size}

    def any_left(self) -> bool:
        return bool(self._left)

    def computed(self, nodes: list[LazyArray]) -> None:
        self._left.difference_update(id(n) for n in nodes)


def _shared(
    part: list[LazyArray], later: readers.LaterReaders, outs: _FullSizeOutputs, domain: tuple
) -> list[LazyArray]:
    """The values over ``domain`` that the kernel of ``part`` computes and the group's later
    kernels read (``later``): stored by the first (a subexpression of several kernels, computed
    once). One walk of this kernel's graph: what later kernels read is counted, not walked."""
    if not part:
        return []
    mine = _maps_under([b for o in part for b in _bodies(o)])
    taken = {id(o) for o in part}
    # Never larger than an output of this kernel or of a later one.
    small_enough = math.prod(domain) <= _SMALL or outs.any_left()
    return [
        n
        for n in later.read_later(mine)
        if id(n) not in taken and n.shape == domain and small_enough and not mirrored(n)
    ]


# A kernel whose elementwise output tops a long uncached chain (more than `deep` ops over its
# domain) also stores every `every`-th value down the chain, at no recomputation. A loop that
# materialises one step's value at a time (a movement of it, a matmul, a gather per step: in the
# backward pass, often deepest first) then computes at most `every` ops per step from the
# nearest stored value, instead of the whole chain again (quadratic in the steps). The values
# stored have the kernel's domain, so none is larger than its output.
#
# The rows: (at most this many points in the domain, deep, every). A stored value of a small
# domain costs next to nothing, while every op recomputed is paid again by each backward kernel
# (and at every replay of a jit recording); a large domain (a pairwise N x N one) keeps memory
# first. Measured on fusegrad.bench.programs' LSTM (40 steps, counted with every op lazy, and
# the grad's time on this 2-core machine; autograd 1,046 ms at 1024x128 gates):
#   8x24 gates:     32/8: 5.2x its forward's work, jit replay 24-25 ms;  6/2: 2.7x, 8.8-9.3 ms
#   1024x128 gates: 32/8: 5.2x, 6,597 ms; 16/2: 3.6x, 2,789; 12/2: 3.3x, 1,740; 10/2: 3.3x,
#                   1,445; 8/2 and 6/2: 2.6x, 1,235
# (the GRU's replay 5.4 -> 3.0 ms with 6/2). A single kernel computing a short chain stores
# what it did not need to (jit keeps those buffers): the second row starts deeper than the
# gradient of a Gaussian, 7 ops. Short chains keep their one kernel (a log1p(exp(A @ b))
# cotangent, 5 ops deep: tests/test_fused_reverse).
SPINES = (
    (1 << 12, 6, 2),  # 32 KiB of float64
    (1 << 20, 10, 2),  # 8 MiB
    (math.inf, 32, 8),
)


def _spine(outs: list[LazyArray], domain: tuple) -> list[LazyArray]:
    """Values down the long chains under the elementwise ``outs`` to store with them (see
    ``SPINES``)."""
    extra: dict[int, LazyArray] = {}
    taken = {id(o) for o in outs}
    size = math.prod(domain)
    spine, stride = next((deep, every) for most, deep, every in SPINES if size <= most)

    def kids(n: Map) -> list[Map]:
        return [a for a in n.args if type(a) is Map and a.cached is None and a.shape == domain]

    depth: dict[int, int] = {}  # shared: the outputs of one kernel share their graph
    for o in outs:
        if type(o) is not Map or o.shape != domain or mirrored(o):
            continue
        stack: list[Map] = [o]
        while stack:  # iterative post-order over the maps of this domain
            n = stack[-1]
            if id(n) in depth:
                stack.pop()
                continue
            todo = [a for a in kids(n) if id(a) not in depth]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            depth[id(n)] = 1 + max((depth[id(a)] for a in kids(n)), default=0)
        if depth[id(o)] <= spine:
            continue
        n = o
        while True:
            below = kids(n)
            if not below:
                break
            n = max(below, key=lambda a: depth[id(a)])
            if depth[id(n)] % stride == 0 and id(n) not in taken:
                taken.add(id(n))
                extra[id(n)] = n
    if extra:
        _note(event="store", node=f"{len(extra)} values", shape=domain, dtype=None,
              reason=f"every {stride}th value down a chain of {spine}+ ops")  # fmt: skip
    return list(extra.values())


def _reaches(root: Any, targets: set[int]) -> bool:
    """Whether computing ``root`` needs one of the nodes with ids in ``targets`` first."""
    stack, seen = [root], set()
    while stack:
        n = stack.pop()
        if not isinstance(n, LazyArray) or n.cached is not None or id(n) in seen:
            continue
        if id(n) in targets:
            return True
        seen.add(id(n))
        if isinstance(n, Map):
            stack.extend(n.args)
        elif isinstance(n, Reduce):
            sub = inline(n)  # what the kernel will really read, as _walk saw it
            stack.append(n.arg if sub is None else sub)
    return False


def _ids_in(roots: list, nodes_by_id: dict) -> set[int]:
    out: set[int] = set()
    stack = list(roots)
    while stack:
        n = stack.pop()
        if not isinstance(n, Map) or n.cached is not None or id(n) in out:
            continue
        out.add(id(n))
        nodes_by_id[id(n)] = n
        stack.extend(n.args)
    return out


def _run_group(domain: tuple, outs: list[LazyArray]) -> None:
    if not outs:
        return
    kernel = build_kernel(domain, outs)
    rec = replay.active()
    if rec is not None:
        kernel = rec.before_kernel(kernel)  # number arguments' values as plain constants
    results, engine = engines.run(kernel)
    if rec is not None:
        rec.on_kernel(kernel, results, engine)
    for o, r in zip(outs, results):
        o.cached = r.reshape(o.shape) if r.shape != o.shape else r
    if _COUNTERS:
        points = math.prod(kernel.domain)
        for work in _COUNTERS:
            work.kernels += 1
            work.points += points
            work.point_ops += points * max(1, len(kernel.program))
    if not _RECORDS:
        return
    _note(
        event="kernel",
        engine=engine,
        domain=domain,
        outputs=[
            (
                "mirrored sum" if out.mirror is not None else out.reduce or "map",
                out.axes,
                o.shape,
                str(out.dtype),
            )  # fmt: skip
            for out, o in zip(kernel.outputs, outs)
        ],
        inputs=[a.shape for a in kernel.inputs],
        ops=[i.op for i in kernel.program],
        bytes=sum(r.nbytes for r in results),
    )


def _normalize_input(arr: np.ndarray, domain: tuple) -> np.ndarray:
    """Align ``arr`` to the domain's axes; a broadcast (stride-0) axis becomes size 1."""
    nd = len(domain)
    if arr.ndim < nd:
        arr = arr.reshape((1,) * (nd - arr.ndim) + arr.shape)
    index = tuple(
        slice(0, 1) if n > 1 and (s == 0 or d == 1) else slice(None)
        for n, s, d in zip(arr.shape, arr.strides, domain)
    )
    if any(i != slice(None) for i in index):
        arr = arr[index]
    return arr


def build_kernel(domain: tuple, outs: list[LazyArray]) -> Kernel:
    """The kernel computing ``outs`` (maps of shape ``domain``, or reductions over it) at once."""
    inputs: list[np.ndarray] = []
    constants: list[Any] = []
    program: list[Instr] = []
    ids: dict[Any, int] = {}
    leaf_of: dict[int, int] = {}
    const_of: dict[tuple, int] = {}

    # Two passes: inputs and constants take the first ids, instructions the rest.
    order: list[Map] = []
    alias: dict[int, LazyArray] = {}  # inlined short reduction -> its elementwise form
    seen: set[int] = set()

    # Iterative post-order walk: a recursive closure would form a reference cycle that keeps
    # every node (and its cached value) alive until the garbage collector runs.
    stack: list[tuple[Any, bool]] = [(b, False) for o in reversed(outs) for b in _bodies(o)[::-1]]
    while stack:
        n, expanded = stack.pop()
        if not isinstance(n, LazyArray):
            k = _const_key(n)
            if k not in const_of:
                const_of[k] = len(constants)
                constants.append(n)
            continue
        if expanded:
            assert isinstance(n, Map)
            order.append(n)
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, Map) and n.cached is None:
            stack.append((n, True))
            stack.extend((a, False) for a in reversed(n.args))
        elif isinstance(n, Reduce) and n.cached is None:
            sub = inline(n)
            if sub is None:
                raise AssertionError(f"{n!r} must be computed before a kernel reads it")
            alias[id(n)] = sub
            stack.append((sub, False))
        else:
            arr = value(n)
            if arr is None:
                raise AssertionError(f"{n!r} must be computed before a kernel reads it")
            leaf_of[id(n)] = len(inputs)
            inputs.append(_normalize_input(np.asarray(arr), domain))

    n_in, n_const = len(inputs), len(constants)

    def operand(a: Any) -> int:
        a = alias.get(id(a), a)
        if not isinstance(a, LazyArray):
            return n_in + const_of[_const_key(a)]
        if id(a) in leaf_of:
            return leaf_of[id(a)]
        return ids[id(a)]

    for n in order:
        program.append(Instr(n.op, tuple(operand(a) for a in n.args), n.dtype))
        ids[id(n)] = n_in + n_const + len(program) - 1

    outputs = []
    for o in outs:
        pair = None if isinstance(o, Reduce) else mirrored(o)
        if isinstance(o, Reduce):
            outputs.append(Output(operand(o.arg), o.kind, o.axes, o.dtype))
        elif pair:
            rows, cols = pair
            outputs.append(Output(operand(rows.arg), "sum", (1,), o.dtype, operand(cols.arg)))
        else:
            outputs.append(Output(operand(o), None, (), o.dtype))
    return Kernel(tuple(domain), tuple(inputs), tuple(constants), tuple(program), tuple(outputs))
