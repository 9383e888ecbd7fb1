"""Sums of many recorded results, accumulated as each is made, in a ``jit`` replay.

The gradient of a weight used at every step of a loop (an RNN's ``Wh``, read by ``h @ Wh`` at
each of 100 steps) is the sum of one product per step: a recording holds 100 products, made
by 100 steps, and one kernel adding them, which reads 100 arrays back from memory (3 MiB for a
64×64 weight) once the loop is over. Here that kernel is replaced: right after each product is
made (still in cache) it is added into the first one made (``iadd``), and the kernel's result
is that array (``alias``). The sum's order is then the order the products are made in, not the
recording's chain (the same numbers, rounded in another order).

A kernel qualifies when its program is additions only, each of its inputs (whole results of
one shape and dtype, the domain's) read once by them and by nothing else in the program, and
its outputs other than the total unread. Steps added: ``("iadd", None, (into, slot), -1, ())``
(no result of its own) and ``("alias", None, (into, n, k, shape), first, ())`` (``n`` results,
the ``k``-th the total, ``into``'s array as ``shape``, the others never read).

Example (four steps making one result each, and a kernel adding them up)::

    >>> from fusegrad.lazy.kernel import Instr, Kernel, Output
    >>> f8 = np.dtype("f8")
    >>> make = lambda first: ("call", None, (("seq", tuple, ()), ("dict", (), ())), first,
    ...                       (None, (((4,), (8,), f8),), True))
    >>> prog = tuple(Instr("add", (0, 1) if j == 0 else (3 + j, j + 1), f8) for j in range(3))
    >>> out = (Output(6, None, (), f8),)
    >>> sig = Kernel((4,), (np.ones(4),) * 4, (), prog, out).signature()
    >>> total = ("numpy", Kernel((4,), (), (), prog, out, sig),
    ...          tuple((i, 0, (4,), (8,), f8) for i in range(4)), 4, ())
    >>> steps = accumulate([make(i) for i in range(4)] + [total], 0,
    ...                    [("view", 4, 0, (4,), (8,), f8)], [((4,), (8,), f8)] * 5)
    >>> [s[0] for s in steps], steps[2][2], steps[-1][2]
    (['call', 'call', 'iadd', 'call', 'iadd', 'call', 'iadd', 'alias'], (0, 1), (0, 1, 0, (4,)))
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from .replay_ops import c_contiguous, slots_read

# a kernel adding fewer results than this is left as it is (one pass over few arrays is cheap)
MIN_TERMS = 4


def count(step: tuple) -> int:
    """How many slots a step's results take (every kind of step a program holds)."""
    kind, template, sources, _first, extra = step
    if kind == "call":
        return len(extra[1])
    if kind == "iadd":
        return 0
    if kind == "alias":
        return sources[1]
    if template is None:
        return len(sources)
    return len(template.outputs)


def reads(steps: Sequence[tuple], recipes: Sequence[tuple]) -> Counter:
    """How many times each slot is read by the steps and the result recipes."""
    seen: Counter = Counter()
    for kind, template, sources, _first, _extra in steps:
        if kind == "call":
            for part in sources:
                found: set[int] = set()
                slots_read(part, found)
                seen.update(found)
        elif kind in ("iadd", "alias"):
            seen[sources[0]] += 1
            if kind == "iadd":
                seen[sources[1]] += 1
        elif template is not None:
            seen.update(s[0] for s in sources if s[0] != "const")
    for r in recipes:
        found = set()
        slots_read(r, found)
        seen.update(found)
    return seen


def _terms(template, sources: tuple, layouts: Sequence[tuple | None]) -> tuple[list, int] | None:
    """The slots a kernel adds up and the index of its total among its outputs, when it only
    adds whole results of its domain's shape and dtype, each once (else None)."""
    if template.constants or not template.program or len(sources) < MIN_TERMS:
        return None
    n_in = len(sources)
    dtype = template.program[0].dtype
    used: Counter = Counter()
    for ins in template.program:
        if ins.op != "add" or ins.dtype != dtype:
            return None
        used.update(ins.args)
    if any(used[i] != 1 for i in range(n_in)) or any(
        used[n_in + j] > 1 for j in range(len(template.program))
    ):
        return None  # not a tree over each input once
    root = n_in + len(template.program) - 1
    if used[root] != 0:
        return None
    total = [k for k, o in enumerate(template.outputs) if o.value == root]
    if not total or any(o.reduce is not None for o in template.outputs):
        return None
    size = int(np.prod(template.domain))
    slots = []
    for src, (_, flags) in zip(sources, template.signature()[1]):
        if src[0] == "const" or any(flags):
            return None
        lay = layouts[src[0]]
        # the whole of a C-contiguous result, maybe reshaped ((1, n) column sums read as (n,))
        if (
            lay is None
            or src[1] != 0
            or src[4] != dtype
            or lay[2] != dtype
            or int(np.prod(lay[0])) != size
            or not (c_contiguous(lay[0], lay[1], dtype) and c_contiguous(src[2], src[3], dtype))
        ):
            return None
        slots.append(src[0])
    return slots, total[0]


def accumulate(
    steps: list[tuple], n_inputs: int, recipes: list[tuple], layouts: Sequence[tuple | None]
) -> list[tuple]:
    """``steps`` with each kernel that qualifies (see the module) replaced by in-place
    additions after the steps that make its terms; slots keep their numbers."""
    seen = reads(steps, recipes)
    made_by: dict[int, int] = {}  # slot -> index of the step making it
    first = n_inputs
    for i, step in enumerate(steps):
        for j in range(count(step)):
            made_by[first + j] = i
        first += count(step)
    after: dict[int, list[tuple]] = {}
    replaced: dict[int, tuple] = {}
    for i, step in enumerate(steps):
        kind, template, sources, at, _ = step
        if kind in ("call", "iadd", "alias") or template is None:
            continue
        found = _terms(template, sources, layouts)
        if found is None:
            continue
        slots, k = found
        if len(set(slots)) != len(slots) or any(
            s < n_inputs or seen[s] != 1 for s in slots
        ):  # an input of the call, or read elsewhere: its array must stay as it is
            continue
        if any(seen[at + j] for j in range(len(template.outputs)) if j != k):
            continue  # a partial sum another step reads
        slots.sort()
        into = slots[0]
        maker = steps[made_by[into]]
        if maker[0] == "call" and not maker[4][2]:
            # a step that runs its function again may hand back a view of its operand (an
            # input of the call): only a result made fresh (a kernel's, a direct step's) is
            # written into
            continue
        for s in slots[1:]:
            after.setdefault(made_by[s], []).append(("iadd", None, (into, s), -1, ()))
        replaced[i] = ("alias", None, (into, len(template.outputs), k, template.domain), at, ())
    if not replaced:
        return steps
    out = []
    for i, step in enumerate(steps):
        out.append(replaced.get(i, step))
        out.extend(after.get(i, ()))
    return out
