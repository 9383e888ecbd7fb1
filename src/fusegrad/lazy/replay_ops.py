"""A recorded program as a flat list of closures: what a ``jit`` replay runs.

``replay.Program`` compiles each recorded step once, when the program is made: where each
operand comes from (a whole earlier result, a view of one, a constant, a number argument's
recipe) is worked out into a getter, and each kernel or NumPy step into one closure
``op(slots, numbers)`` that appends its results to ``slots``. A replay is then one loop over
the closures: no decoding, no tag tests, no view built where the operand is a whole result.

Operands are encoded as the recorder encodes them (``replay.Recorder._encode``):
``("slot", i)``, ``("view", i, offset, shape, strides, dtype)``, ``("const", x)``,
``("number", recipe)``, ``("seq", type, parts)``, ``("dict", keys, parts)``.

Example::

    >>> slots = [np.arange(6.0).reshape(2, 3)]
    >>> layouts = [((2, 3), (24, 8), np.dtype("f8"))]
    >>> get = operands([("view", 0, 0, (2, 3), (24, 8), np.dtype("f8")), ("const", 2.0)],
    ...                layouts, None)
    >>> a, c = get(slots, ())
    >>> a is slots[0], c
    (True, 2.0)
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Getter = Callable[[list, Sequence[Any]], Any]
Op = Callable[[list, Sequence[Any], list | None], None]


def layout(x: Any) -> tuple | None:
    """``(shape, strides, dtype)`` of an array (what a replay's array in its slot has too),
    else None."""
    return (x.shape, x.strides, x.dtype) if isinstance(x, np.ndarray) else None


def _whole(e: tuple, layouts: Sequence[tuple | None]) -> tuple:
    """``e`` as ``("slot", i)`` when it views all of slot ``i`` as it is."""
    if e[0] == "view":
        _, i, offset, shape, strides, dtype = e
        if offset == 0 and layouts[i] == (shape, strides, dtype):
            return ("slot", i)
    return e


def getter(e: tuple, layouts: Sequence[tuple | None], evaluate: Callable | None) -> Getter:
    """A function of a replay's slots and number arguments giving the operand ``e`` encodes.

    >>> getter(("seq", tuple, (("slot", 0), ("const", 2.0))), [None], None)(["x"], ())
    ('x', 2.0)
    """
    e = _whole(e, layouts)
    tag = e[0]
    if tag == "slot":
        i = e[1]
        return lambda slots, numbers: slots[i]
    if tag == "view":
        _, i, offset, shape, strides, dtype = e
        make = np.ndarray

        def view(slots: list, numbers: Sequence[Any]) -> np.ndarray:
            return make(shape, dtype, buffer=slots[i], offset=offset, strides=strides)

        return view
    if tag == "number":
        assert evaluate is not None, "a number operand needs the recipes' evaluate"
        recipe = e[1]
        return lambda slots, numbers: evaluate(recipe, numbers)
    if tag == "seq":
        make_seq, parts = e[1], [getter(v, layouts, evaluate) for v in e[2]]
        return lambda slots, numbers: make_seq([p(slots, numbers) for p in parts])
    if tag == "dict":
        keys, parts = e[1], [getter(v, layouts, evaluate) for v in e[2]]
        return lambda slots, numbers: dict(zip(keys, [p(slots, numbers) for p in parts]))
    value = e[1]
    return lambda slots, numbers: value


def operands(
    encoded: Sequence[tuple], layouts: Sequence[tuple | None], evaluate: Callable | None
) -> Callable[[list, Sequence[Any]], tuple]:
    """A function giving the tuple of operands ``encoded`` lists (see ``getter``); whole
    earlier results are taken by one ``itemgetter``."""
    parts = [_whole(e, layouts) for e in encoded]
    if all(p[0] == "slot" for p in parts):
        idx = [p[1] for p in parts]
        if not idx:
            return lambda slots, numbers: ()
        if len(idx) == 1:
            i = idx[0]
            return lambda slots, numbers: (slots[i],)
        take = operator.itemgetter(*idx)
        return lambda slots, numbers: take(slots)
    fns = [getter(p, layouts, evaluate) for p in parts]
    return lambda slots, numbers: tuple([f(slots, numbers) for f in fns])


def kernel_op(
    run: Callable[..., list[np.ndarray]],
    get: Callable[[list, Sequence[Any]], tuple],
    constants: tuple,
    dynamic: tuple,
    evaluate: Callable,
    out_slots: Sequence[int] | None = None,
) -> Op:
    """The closure running one recorded kernel: ``run(inputs, constants)`` (an engine's
    replayer), with the number constants ``dynamic`` lists (``(index, recipe)``) computed from
    the call's numbers. ``out_slots``: the slots of its outputs, when ``run`` writes into
    buffers it is given (``run(inputs, constants, outs)``) and some are the program's."""

    def op(slots: list, numbers: Sequence[Any], pool: list | None) -> None:
        values = constants
        if dynamic:
            changed = list(constants)
            for j, recipe in dynamic:
                changed[j] = evaluate(recipe, numbers)
            values = tuple(changed)
        if pool is None or out_slots is None:
            slots.extend(run(get(slots, numbers), values))
        else:
            slots.extend(run(get(slots, numbers), values, [pool[i] for i in out_slots]))

    return op


def fold_op(results: tuple) -> Op:
    """A kernel of numbers only: its recorded results, copied (the caller may write to them)."""

    def op(slots: list, numbers: Sequence[Any], pool: list | None) -> None:
        slots.extend([r.copy() for r in results])

    return op


def direct_op(
    fn: Callable,
    get: Callable[[list, Sequence[Any]], tuple],
    out_slots: Sequence[int] | None = None,
) -> Op:
    """A step whose function returns its results' list itself, of layouts fixed by its
    operands' (``replay.step(..., direct=True)``): no collecting, no layout check. With
    ``out_slots``, it is given the program's buffers for them (``outs=``)."""

    def op(slots: list, numbers: Sequence[Any], pool: list | None) -> None:
        if pool is None or out_slots is None:
            slots.extend(fn(*get(slots, numbers)))
        else:
            slots.extend(fn(*get(slots, numbers), outs=[pool[i] for i in out_slots]))

    return op


# At most this many bytes of a program's buffers are kept from one replay to the next.
REUSE_MAX_BYTES = 1 << 26


def _slots_read(e: tuple, into: set[int]) -> None:
    """The slots an encoded operand or result recipe reads."""
    tag = e[0]
    if tag in ("view", "slot"):
        into.add(e[1])
    elif tag in ("seq", "dict"):
        for v in e[2]:
            _slots_read(v, into)
    elif tag == "derived" and e[2] is not None:
        _slots_read(e[2], into)


def reusable(
    steps: Sequence[tuple], recipes: Sequence[tuple], layouts: Sequence[tuple | None]
) -> set[int]:
    """The slots whose arrays a replay may write into again at the next one: results of kernels
    and of direct steps (fresh arrays of their own) that no result recipe reads (the caller
    keeps those) and that no step running its function again reads (it may hand back a view of
    its operand), up to ``REUSE_MAX_BYTES`` in all.

    >>> from types import SimpleNamespace
    >>> f8, kernel = np.dtype("f8"), SimpleNamespace(outputs=(None,))  # one output each
    >>> steps = [("numpy", kernel, (), 1, ()), ("numpy", kernel, (), 2, ())]
    >>> sorted(reusable(steps, [("view", 2, 0, (3,), (8,), f8)], [None] + [((3,), (8,), f8)] * 2))
    [1]
    """
    made: list[int] = []
    kept: set[int] = set()
    for kind, template, sources, first, extra in steps:
        if kind == "call":
            if extra[2]:  # direct
                made.extend(first + j for j, w in enumerate(extra[1]) if w is not None)
            else:
                _slots_read(sources[0], kept)
                _slots_read(sources[1], kept)
        elif template is not None:
            made.extend(range(first, first + len(template.outputs)))
    for r in recipes:
        _slots_read(r, kept)
    chosen: set[int] = set()
    total = 0
    for i in made:
        lay = layouts[i]
        if i in kept or lay is None:
            continue
        size = int(np.prod(lay[0])) * lay[2].itemsize
        if total + size <= REUSE_MAX_BYTES:
            chosen.add(i)
            total += size
    return chosen


def result(recipe: tuple, layouts: Sequence[tuple | None], evaluate: Callable) -> Getter:
    """How a replay builds one of the call's results from its slots (``Recorder.recipe``)."""
    tag = recipe[0]
    if tag == "view":
        return getter(recipe, layouts, evaluate)
    if tag == "derived":
        fn = recipe[1]
        if recipe[2] is None:
            return lambda slots, numbers: fn(None)
        inner = result(recipe[2], layouts, evaluate)
        return lambda slots, numbers: fn(inner(slots, numbers))
    if tag == "number":
        r = recipe[1]
        return lambda slots, numbers: evaluate(r, numbers)
    if tag == "empty":
        shape, dtype = recipe[1], recipe[2]
        return lambda slots, numbers: np.empty(shape, dtype)
    value = recipe[1]
    if tag == "literal":
        return lambda slots, numbers: value.copy()  # the caller may write into what it gets
    return lambda slots, numbers: value
