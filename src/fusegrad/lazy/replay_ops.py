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
from collections.abc import Callable, Container, Sequence
from typing import Any

import numpy as np

Getter = Callable[[list, Sequence[Any]], Any]
Op = Callable[[list, Sequence[Any], list | None], None]


def layout(x: Any) -> tuple | None:
    """``(shape, strides, dtype)`` of an array (what a replay's array in its slot has too),
    else None."""
    return (x.shape, x.strides, x.dtype) if isinstance(x, np.ndarray) else None


def _same_view(shape: tuple, strides: tuple, want_shape: tuple, want_strides: tuple) -> bool:
    """Equal shapes and equal strides along every axis longer than 1 (the others are never
    stepped along)."""
    return shape == want_shape and all(
        s == w for s, w, n in zip(strides, want_strides, shape) if n > 1
    )


def _whole(e: tuple, layouts: Sequence[tuple | None]) -> tuple:
    """``e`` as ``("slot", i)`` when it views all of slot ``i`` as it is."""
    if e[0] == "view":
        _, i, offset, shape, strides, dtype = e
        lay = layouts[i]
        if offset == 0 and lay is not None and lay[2] == dtype:
            if _same_view(lay[0], lay[1], shape, strides):
                return ("slot", i)
    return e


def whole_slot(e: tuple, layouts: Sequence[tuple | None]) -> int | None:
    """The slot an encoded operand ``e`` is, whole and as it is; else None."""
    e = _whole(e, layouts)
    return e[1] if e[0] == "slot" else None


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def view_maker(
    base: tuple, offset: int, shape: tuple, strides: tuple, dtype: np.dtype
) -> Callable[[np.ndarray], np.ndarray]:
    """A function making the view ``(offset, shape, strides, dtype)`` of an array of layout
    ``base``, by the cheapest NumPy call that gives it (checked here on a stand-in of that
    layout): a reshape, an index along the leading axes, a transpose (~0.2-0.6 us), else
    ``np.ndarray(buffer=...)`` (~2-3 us).

    >>> f8 = np.dtype("f8")
    >>> make = view_maker(((4, 2, 3), (48, 24, 8), f8), 48, (2, 3), (24, 8), f8)
    >>> x = np.arange(24.0).reshape(4, 2, 3)
    >>> make(x).tolist(), np.shares_memory(make(x), x)
    ([[6.0, 7.0, 8.0], [9.0, 10.0, 11.0]], True)
    """
    bshape, bstrides, bdtype = base
    if bdtype == dtype and all(n > 0 for n in bshape):
        # a stand-in of the base's layout over one element (only its addresses are read)
        stand_in = np.lib.stride_tricks.as_strided(np.empty(1, dtype), bshape, bstrides)
        for make in _candidates(stand_in, offset, shape, strides):
            try:
                v = make(stand_in)
            except (ValueError, IndexError, TypeError):
                continue
            if _address(v) - _address(stand_in) == offset and _same_view(
                v.shape, v.strides, shape, strides
            ):
                return make
    ndarray = np.ndarray
    return lambda b: ndarray(shape, dtype, buffer=b, offset=offset, strides=strides)


def _candidates(base: np.ndarray, offset: int, shape: tuple, strides: tuple) -> list[Callable]:
    out: list[Callable] = []
    if offset == 0:
        out.append(lambda b: b.reshape(shape))
        if base.ndim == 2:
            out.append(lambda b: b.T if b.T.shape == shape else b.T.reshape(shape))
    # an index along the leading axes (x[t], x[t, s]), then a reshape
    rest = offset
    index = []
    for n, st in zip(base.shape, base.strides):
        if st <= 0:
            break
        k, rest = divmod(rest, st)
        if k >= n:
            break
        index.append(k)
        if rest == 0 and len(index) < base.ndim:  # (every axis indexed: an element, a copy)
            idx = tuple(index)
            sub_shape = base[idx].shape
            if sub_shape == shape:
                out.append(lambda b, idx=idx: b[idx])
            else:
                out.append(lambda b, idx=idx: b[idx].reshape(shape))
    # a slice of every axis (an LSTM's gate z[:, h:2h], a bias's b[h:2h]), then a reshape
    sliced = _slices(base, offset, shape, strides)
    if sliced is not None:
        if base[sliced].shape == shape:
            out.append(lambda b, idx=sliced: b[idx])
        else:
            out.append(lambda b, idx=sliced: b[idx].reshape(shape))
    return out


def _slices(base: np.ndarray, offset: int, shape: tuple, strides: tuple) -> tuple | None:
    """The slices of ``base``'s axes (strides decreasing, as C order has them) giving the view
    ``(offset, shape, strides)`` whose axes longer than 1 step along them in order; None when
    it is no such view. (``view_maker`` checks the result.)

    >>> _slices(np.empty((8, 96)), 192, (8, 24), (768, 8))
    (slice(0, 8, 1), slice(24, 48, 1))
    """
    steps = [(n, st) for n, st in zip(shape, strides) if n > 1]
    bstrides = base.strides
    if len(steps) != base.ndim or any(b <= 0 for b in bstrides):
        return None
    if any(a < b for a, b in zip(bstrides, bstrides[1:])):
        return None
    index, rest = [], offset
    for (n, st), bn, bst in zip(steps, base.shape, bstrides):
        start, rest = divmod(rest, bst)
        step, odd = divmod(st, bst)
        stop = start + step * (n - 1) + 1
        if odd or step < 1 or stop > bn:
            return None
        index.append(slice(start, stop, step))
    return tuple(index) if rest == 0 else None


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
        lay = layouts[i]
        if lay is None:
            make = np.ndarray
            return lambda slots, numbers: make(
                shape, dtype, buffer=slots[i], offset=offset, strides=strides
            )
        view = view_maker(lay, offset, shape, strides, dtype)
        return lambda slots, numbers: view(slots[i])
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
    return _generated(parts, layouts, lambda p: getter(p, layouts, evaluate), "({},)")


def _generated(
    parts: Sequence[tuple],
    layouts: Sequence[tuple | None],
    other: Callable,
    form: str,
    view: Callable[[tuple], Getter | None] | None = None,
) -> Callable[[list, Sequence[Any]], Any]:
    """One generated expression ``form`` (``"({},)"``, ``"[{}]"``) of the encoded ``parts``: a
    whole slot read directly, a view by its ``view_maker`` (or by the getter ``view(e)`` gives,
    when it gives one), anything else by the getter ``other(part)`` gives; no Python call per
    whole slot, no list built and then copied."""
    names: dict[str, Any] = {}
    items = []
    for k, part in enumerate(parts):
        e = _whole(part, layouts)
        own = None if view is None or e[0] != "view" else view(e)
        if e[0] == "slot":
            items.append(f"slots[{e[1]}]")
        elif own is not None:
            names[f"get{k}"] = own
            items.append(f"get{k}(slots, numbers)")
        elif e[0] == "view" and layouts[e[1]] is not None:
            names[f"view{k}"] = view_maker(layouts[e[1]], *e[2:])
            items.append(f"view{k}(slots[{e[1]}])")
        else:
            names[f"get{k}"] = other(part)
            items.append(f"get{k}(slots, numbers)")
    return eval(f"lambda slots, numbers: {form.format(', '.join(items))}", names)  # noqa: S307


def _index_view(e: tuple, index: tuple) -> tuple | None:
    """The encoded operand ``e`` (a view) indexed by ``index``, a tuple of zeros and whole
    slices as an engine's replayer takes its inputs (``x[0, :]``), as one view; None when
    ``index`` keeps no axis (it gives an element, not a view) or is of another kind."""
    if e[0] != "view" or len(index) != len(e[3]):
        return None
    _, i, offset, shape, strides, dtype = e
    kept = []
    for k, v in enumerate(index):
        if isinstance(v, slice):
            if v != slice(None):
                return None
            kept.append(k)
        elif v != 0:
            return None
    if not kept:
        return None
    return ("view", i, offset, tuple(shape[k] for k in kept), tuple(strides[k] for k in kept),
            dtype)  # fmt: skip


def indexed_operands(
    encoded: Sequence[tuple],
    indexes: Sequence[tuple[int, tuple]],
    layouts: Sequence[tuple | None],
    evaluate: Callable | None,
    pad: Callable[[np.ndarray], np.ndarray] | None = None,
    pad_pooled: Callable[[np.ndarray], np.ndarray] | None = None,
    reused: Container[int] = (),
) -> Callable[[list, Sequence[Any]], tuple]:
    """As ``operands``, with operand ``j`` indexed by ``index`` for each ``(j, index)`` of
    ``indexes``: composed into the operand's view when that keeps axes (one view built, or
    none where the result is a whole slot), else indexed at each call (an element). What an
    engine replayer's ``bare`` entry takes (``numba_engine.replayer``). ``pad``: applied at
    each call to the operands that are rows of a wider array (``z[:, h:2h]``) or transposes
    (``x.T``; the engine's ``pads``), the others passed as they are. ``pad_pooled`` (when
    ``pad`` is None: a small kernel, for which padding at each call costs more than it saves):
    the result's ``in_pool()`` makes a getter for the replays of one pool, whose views of
    ``reused`` slots (the pool's buffers, the same arrays at every replay) are made once, and
    padded by ``pad_pooled`` when they are rows of a wider array (``_pooled_operands``).

    >>> f8 = np.dtype("f8")
    >>> layouts = [((3,), (8,), f8)]
    >>> get = indexed_operands([("view", 0, 0, (1, 3), (24, 8), f8)], [(0, (0, slice(None)))],
    ...                        layouts, None)
    >>> x = np.arange(3.0)
    >>> get([x], ())[0] is x  # (3,) seen as (1, 3), then row 0: the array itself
    True
    """
    parts = list(encoded)
    elements: list[tuple[int, tuple]] = []
    for j, index in indexes:
        e = parts[j]
        if e[0] == "const":
            parts[j] = ("const", e[1][index])
            continue
        composed = _index_view(e, index)
        if composed is None:
            elements.append((j, index))
        else:
            parts[j] = composed
    get = operands(parts, layouts, evaluate)
    rows = [j for j, e in enumerate(parts) if _relaid(e, layouts)]
    if rows and pad is not None:
        get = _padding(get, rows, pad)
    done = _with_elements(get, elements)
    if pad is None and pad_pooled is not None and any(_pooled(e, layouts, reused) for e in parts):
        done.in_pool = lambda: _with_elements(  # type: ignore[attr-defined]
            _pooled_operands(parts, layouts, evaluate, reused, pad_pooled), elements
        )
    return done


def _with_elements(
    get: Callable[[list, Sequence[Any]], tuple], elements: list[tuple[int, tuple]]
) -> Callable[[list, Sequence[Any]], tuple]:
    if not elements:
        return get

    def with_elements(slots: list, numbers: Sequence[Any]) -> tuple:
        values = list(get(slots, numbers))
        for j, index in elements:
            values[j] = values[j][index]
        return tuple(values)

    return with_elements


def _pooled(e: tuple, layouts: Sequence[tuple | None], reused: Container[int]) -> bool:
    """Whether the encoded operand ``e`` is a view of a ``reused`` slot (a pool's buffer)."""
    e = _whole(e, layouts)
    return e[0] == "view" and e[1] in reused and layouts[e[1]] is not None


def _pooled_operands(
    parts: Sequence[tuple],
    layouts: Sequence[tuple | None],
    evaluate: Callable | None,
    reused: Container[int],
    pad: Callable[[np.ndarray], np.ndarray],
) -> Callable[[list, Sequence[Any]], tuple]:
    """``operands`` for the replays of one pool: a view of a ``reused`` slot is made once for
    each array the slot holds (the pool's buffer, the same at every replay; a view of it is the
    same view), and ``pad`` of it when it is rows of a wider array (``z[:, h:2h]``)."""

    def pooled(e: tuple) -> Getter | None:
        if not _pooled(e, layouts, reused):
            return None
        make = view_maker(layouts[e[1]], *e[2:])
        if _relaid(e, layouts) and e[4][-1] == e[5].itemsize:
            make = _then(make, pad)
        return _made_once(e[1], make)

    return _generated(parts, layouts, lambda p: getter(p, layouts, evaluate), "({},)", pooled)


def _then(first: Callable, second: Callable) -> Callable:
    return lambda b: second(first(b))


def _made_once(i: int, make: Callable[[np.ndarray], np.ndarray]) -> Getter:
    """A getter of ``make(slots[i])``, made again only when slot ``i`` holds another array, and
    at every call when ``make`` copies (``b[0, 3]`` of a 2-d ``b`` is an element, not a view: a
    kept copy read the first replay's value at every replay after it; sweep Z2)."""
    memo: list = [None, None]

    def get(slots: list, numbers: Sequence[Any]) -> np.ndarray:
        held = slots[i]
        if held is memo[0]:
            return memo[1]
        made = make(held)
        if type(made) is np.ndarray and np.may_share_memory(made, held):
            memo[0], memo[1] = held, made
        return made

    return get


def _relaid(e: tuple, layouts: Sequence[tuple | None]) -> bool:
    """Whether the encoded operand ``e`` is one an engine's ``pads`` may lay out anew: 2+ axes,
    not C-contiguous, and contiguous along its last (a block of rows of a wider array) or its
    first (a transpose)."""
    e = _whole(e, layouts)
    lay = layouts[e[1]] if e[0] == "slot" else e[3:] if e[0] == "view" else None
    if lay is None or len(lay[0]) < 2 or c_layout(*lay):
        return False
    return lay[1][-1] == lay[2].itemsize or c_layout(lay[0][::-1], lay[1][::-1], lay[2])


def c_layout(shape: tuple, strides: tuple, dtype: np.dtype) -> bool:
    """Whether ``(shape, strides)`` is the C-contiguous layout of ``dtype`` elements (strides of
    size-1 axes do not count).

    >>> c_layout((2, 3), (24, 8), np.dtype("f8")), c_layout((2, 3), (32, 8), np.dtype("f8"))
    (True, False)
    """
    want, step = [], dtype.itemsize
    for n in reversed(shape):
        want.append(step)
        step *= n
    return all(s == w or n == 1 for s, w, n in zip(strides, reversed(want), shape))


def _padding(
    get: Callable[[list, Sequence[Any]], tuple], rows: list[int], pad: Callable
) -> Callable[[list, Sequence[Any]], tuple]:
    def padded(slots: list, numbers: Sequence[Any]) -> tuple:
        values = list(get(slots, numbers))
        for j in rows:
            values[j] = pad(values[j])
        return tuple(values)

    return padded


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

    constants_of = _constants_of(constants, dynamic, evaluate)
    bind = getattr(run, "bind", None)
    if bind is not None and out_slots is not None:
        return _bound_kernel_op(run, bind, get, constants_of, out_slots)
    in_pool = getattr(get, "in_pool", None)
    held: list = [None, get]  # [pool, the getter for its replays]

    def op(slots: list, numbers: Sequence[Any], pool: list | None) -> None:
        values = constants_of(numbers)
        if pool is None:
            slots.extend(run(get(slots, numbers), values))
            return
        if held[0] is not pool and in_pool is not None:
            held[:] = [pool, in_pool()]
        inputs = held[1](slots, numbers)
        if out_slots is None:
            slots.extend(run(inputs, values))
        else:
            slots.extend(run(inputs, values, [pool[i] for i in out_slots]))

    return op


def _constants_of(constants: tuple, dynamic: tuple, evaluate: Callable) -> Callable:
    """A function of the call's numbers giving a kernel's constants, those ``dynamic`` lists
    (``(index, recipe)``) computed from the numbers."""
    if not dynamic:
        return lambda numbers: constants

    def of(numbers: Sequence[Any]) -> tuple:
        changed = list(constants)
        for j, recipe in dynamic:
            changed[j] = evaluate(recipe, numbers)
        return tuple(changed)

    return of


def _bound_kernel_op(
    run: Callable, bind: Callable, get: Callable, constants_of: Callable, out_slots: Sequence[int]
) -> Op:
    """``kernel_op`` of a replayer that binds its buffers (``bind(outs)``): bound once per
    pool, the program's, so that a replay skips building and checking the buffers' list (an
    output that is not the program's gets a new array each replay). The getter too, when it
    has a pooled form (``indexed_operands``' ``in_pool``: inputs padded once per buffer)."""
    bound: list = [None, None, None]  # [pool, its bound run, its getter]
    in_pool = getattr(get, "in_pool", None)

    def op(slots: list, numbers: Sequence[Any], pool: list | None) -> None:
        if pool is None:
            slots.extend(run(get(slots, numbers), constants_of(numbers)))
            return
        if bound[0] is not pool:
            bound[:] = [
                pool, bind([pool[i] for i in out_slots]), get if in_pool is None else in_pool()
            ]  # fmt: skip
        slots.extend(bound[1](bound[2](slots, numbers), constants_of(numbers)))

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


def iadd_op(into: int, slot: int, same_shape: bool) -> Op:
    """Adds the array of ``slot`` into that of ``into`` (``replay_accumulate``): two
    C-contiguous arrays of one size (and shape, when ``same_shape``)."""
    add = np.add
    if same_shape:

        def op(slots: list, numbers: Sequence[Any], pool: list | None) -> None:
            add(slots[into], slots[slot], out=slots[into])

        return op

    def op_flat(slots: list, numbers: Sequence[Any], pool: list | None) -> None:
        acc = slots[into].reshape(-1)
        add(acc, slots[slot].reshape(-1), out=acc)

    return op_flat


def alias_op(into: int, n: int, k: int, shape: tuple, same_shape: bool) -> Op:
    """``n`` results, the ``k``-th the array of slot ``into`` as ``shape`` (the others are
    never read)."""

    def op(slots: list, numbers: Sequence[Any], pool: list | None) -> None:
        out: list = [None] * n
        out[k] = slots[into] if same_shape else slots[into].reshape(shape)
        slots.extend(out)

    return op


def c_contiguous(shape: tuple, strides: tuple, dtype: np.dtype) -> bool:
    """Whether ``strides`` lay ``shape`` out in C order (axes of length 1 aside).

    >>> c_contiguous((2, 3), (24, 8), np.dtype("f8")), c_contiguous((2, 3), (8, 16), np.dtype("f8"))
    (True, False)
    """
    step = dtype.itemsize
    for n, st in zip(reversed(shape), reversed(strides)):
        if n != 1 and st != step:
            return False
        step *= n
    return True


# At most this many bytes of a program's buffers are kept from one replay to the next.
REUSE_MAX_BYTES = 1 << 26


def slots_read(e: tuple, into: set[int]) -> None:
    """The slots an encoded operand or result recipe reads."""
    tag = e[0]
    if tag in ("view", "slot"):
        into.add(e[1])
    elif tag in ("seq", "dict"):
        for v in e[2]:
            slots_read(v, into)
    elif tag == "derived" and e[2] is not None:
        slots_read(e[2], into)


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
    aliases: list[tuple[int, int]] = []
    for kind, template, sources, first, extra in steps:
        if kind == "call":
            if extra[2]:  # direct
                made.extend(first + j for j, w in enumerate(extra[1]) if w is not None)
            else:
                slots_read(sources[0], kept)
                slots_read(sources[1], kept)
        elif kind == "alias":  # its total is the array of another slot
            aliases.append((first + sources[2], sources[0]))
        elif kind != "iadd" and template is not None:
            made.extend(range(first, first + len(template.outputs)))
    for r in recipes:
        slots_read(r, kept)
    for total, into in reversed(aliases):  # (a later alias may read an earlier one's total)
        if total in kept:
            kept.add(into)
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


def results(
    recipes: Sequence[tuple], layouts: Sequence[tuple | None], evaluate: Callable
) -> Callable[[list, Sequence[Any]], list]:
    """How a replay builds the list of the call's results (``result`` of each recipe), as one
    generated expression: a whole slot read directly, a view by its ``view_maker``.

    >>> f8 = np.dtype("f8")
    >>> get = results([("view", 0, 0, (2,), (8,), f8), ("number", None)], [((2,), (8,), f8)],
    ...               lambda recipe, numbers: 1.5)
    >>> get([np.zeros(2)], ())
    [array([0., 0.]), 1.5]
    """
    return _generated(recipes, layouts, lambda r: result(r, layouts, evaluate), "[{}]")


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
