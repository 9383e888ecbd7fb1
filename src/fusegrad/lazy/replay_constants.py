"""Arrays a recorded function read from outside its arguments (a closure's, a global's), made
extra inputs of the replay, so that a row plan (``replay_rows``) reads them block by block.

A function written as autograd's examples write it, ``grad(lambda params: loss(params, X, y))``,
reads its data from a closure: the recording sees ``X`` and ``y`` as constants of its kernels
and products, not as inputs, and a program of constants cannot be cut into blocks of rows
(MLP at batch 4096 under ``jit``: 8.0 ms this way against 6.6 ms with ``X`` and ``y`` passed
as arguments). Here each such array's owner (the array it is a view of: ``X`` for ``X.T``)
whose axis 0 is the batch becomes an input slot after the arguments, every constant read of
it a view of that slot, every later slot moved up by their number. The replay passes the same
arrays at every call, so their contents are read at call time, as constants' are.

Example: a kernel reading a closure's ``c`` beside the argument ``x`` (slot 0), its result in
slot 1; ``c`` becomes slot 1, the result slot 2::

    >>> from fusegrad.lazy.kernel import Instr, Kernel, Output
    >>> f8, c = np.dtype("f8"), np.ones(4)
    >>> k = Kernel((4,), (c, c), (), (Instr("add", (0, 1), f8),), (Output(2, None, (), f8),))
    >>> k = Kernel((4,), (), (), k.program, k.outputs, k.signature())
    >>> x = (0, 0, (4,), (8,), f8)
    >>> lay = ((4,), (8,), f8)
    >>> steps, recipes, layouts, arrays = as_inputs(
    ...     [("numpy", k, (x, ("const", c)), 1, ())], 1, [("view", 1, 0, (4,), (8,), f8)],
    ...     [lay, lay], 4)
    >>> steps[0][2][1][:2], steps[0][3], recipes[0][1], arrays[0] is c
    ((1, 0), 2, 2, True)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import replay_batch, replay_ops, replay_rows
from .nodes import _base
from .replay_fuse import renumber_recipe, renumbered
from .replay_ops import _address


def _batch_owner(c: object, batch: int) -> np.ndarray | None:
    """The owner of constant ``c`` when it is a C-contiguous array whose axis 0 is the batch."""
    if not isinstance(c, np.ndarray):
        return None
    base = _base(c)  # the array whose memory c views
    if base.ndim == 0 or base.shape[0] != batch or not base.flags.c_contiguous:
        return None
    return base


def as_inputs(
    steps: Sequence[tuple],
    n_inputs: int,
    recipes: Sequence[tuple],
    layouts: Sequence[tuple | None],
    batch: int,
) -> tuple[list[tuple], list[tuple], list[tuple | None], list[np.ndarray]] | None:
    """The program with the owners of its array constants whose axis 0 is ``batch`` as inputs
    ``n_inputs, n_inputs + 1, ...``: ``(steps, recipes, layouts, owners)``, or None when it
    reads none. Constants are replaced in kernels' operands and in products' descriptions (what
    a row plan reads); a step that runs its function again keeps its own."""
    owners: dict[int, np.ndarray] = {}
    for kind, template, sources, _first, extra in steps:
        if kind == "call":
            reads = [e[1] for d in (extra[3] if len(extra) > 3 else ()) for e in d[1:3]]
        elif kind in ("iadd", "alias") or template is None:
            continue
        else:
            reads = [s[1] for s in sources if s[0] == "const"]
        for c in reads:
            base = _batch_owner(c, batch)
            if base is not None:
                owners.setdefault(id(base), base)
    if not owners:
        return None
    found = list(owners.values())
    slot_of = {id(base): n_inputs + j for j, base in enumerate(found)}
    k = len(found)
    new_of = {i: (i if i < n_inputs else i + k) for i in range(len(layouts))}

    def view(c: object) -> tuple | None:
        """``(slot, offset, shape, strides, dtype)`` of a promoted constant, else None."""
        base = _batch_owner(c, batch)
        if base is None:
            return None
        assert isinstance(c, np.ndarray)
        return (slot_of[id(base)], _address(c) - _address(base), c.shape, c.strides, c.dtype)

    out = []
    for step in steps:
        kind, template, sources, first, extra = renumbered(step, new_of, step[3] + k)
        if kind == "call":
            if len(extra) > 3 and extra[3]:
                found_ops = []
                for q, a, b, ta, tb in extra[3]:
                    va = view(a[1]) if a[0] == "const" else None
                    vb = view(b[1]) if b[0] == "const" else None
                    a = a if va is None else ("view", *va)
                    b = b if vb is None else ("view", *vb)
                    found_ops.append((q, a, b, ta, tb))
                extra = (*extra[:3], tuple(found_ops))
        elif kind not in ("iadd", "alias") and template is not None:
            sources = tuple(
                (v if (v := view(s[1])) is not None else s) if s[0] == "const" else s
                for s in sources
            )
        out.append((kind, template, sources, first, extra))
    new_layouts = [
        *layouts[:n_inputs],
        *(replay_ops.layout(base) for base in found),
        *layouts[n_inputs:],
    ]
    return out, [renumber_recipe(r, new_of) for r in recipes], new_layouts, found


def for_rows(
    steps: Sequence[tuple],
    n_inputs: int,
    recipes: Sequence[tuple],
    layouts: Sequence[tuple | None],
) -> tuple[list[tuple], list[tuple], list[tuple | None], list[np.ndarray]] | None:
    """``as_inputs`` of the program when that gives it a row plan it has not as recorded; else
    None (the program runs as recorded)."""
    batch = replay_rows.batch_of(steps)
    if batch is None:
        return None
    promoted = as_inputs(steps, n_inputs, recipes, layouts, batch)
    if promoted is None:
        return None
    products = replay_batch.product_steps(steps, recipes)
    if replay_rows.plan(steps, n_inputs, layouts, recipes, products) is not None:
        return None  # blocked as recorded
    new_steps, new_recipes, new_layouts, arrays = promoted
    # (the same steps are products: only their operands' slot numbers moved)
    found = replay_rows.plan(new_steps, n_inputs + len(arrays), new_layouts, new_recipes, products)
    return None if found is None else promoted
