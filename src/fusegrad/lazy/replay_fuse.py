"""Recorded kernels of one domain merged into one pass, before a ``jit`` replay runs them.

A recording plans each materialisation on its own: the operand of a matmul step (``dZ`` for
``Xᵀ @ dZ``) is one kernel, the gradient sums read from it later (``sum(dZ, axis=0)``, a bias's
gradient) another, which reads ``dZ`` back from memory. In a recorded program every operand's
origin is known, so a later kernel over the same domain whose operands all exist when an earlier
one runs (inputs, results of steps before it, the earlier kernel's own elementwise outputs) can
run inside the earlier one: one pass computes both, and what the later one read from the earlier
one's outputs it takes from registers. Instructions both compute (the same op on the same
operands) are computed once.

``merge(steps, n_inputs, recipes, layouts)`` returns the program with those kernels merged and
every slot renumbered (the order of results is the order they are made in); the steps keep the
recorder's format (``replay.Recorder``): ``(engine, template, sources, first, numbers)`` for
kernels, ``("call", fn, encoded, first, extra)`` for NumPy steps.

Example::

    >>> from fusegrad.lazy.kernel import Instr, Kernel, Output
    >>> f8 = np.dtype("f8")
    >>> def template(program, outputs, inputs):
    ...     probe = tuple(np.zeros((3, 4)) for _ in range(inputs))
    ...     k = Kernel((3, 4), probe, (), program, outputs)
    ...     return Kernel((3, 4), (), (), program, outputs, k.signature())
    >>> x = (0, 0, (3, 4), (32, 8), f8)  # slot 0, the input, read whole
    >>> square = ("numpy", template((Instr("multiply", (0, 0), f8),), (Output(1, None, (), f8),),
    ...           1), (x,), 1, ())
    >>> colsum = ("numpy", template((), (Output(0, "sum", (0,), f8),), 1),
    ...           ((1, 0, (3, 4), (32, 8), f8),), 2, ())
    >>> layouts = [((3, 4), (32, 8), f8), ((3, 4), (32, 8), f8), ((1, 4), (32, 8), f8)]
    >>> steps, recipes, _ = merge([square, colsum], 1, [("view", 2, 0, (4,), (8,), f8)], layouts)
    >>> len(steps), [o.reduce for o in steps[0][1].outputs], recipes[0][1]
    (1, [None, 'sum'], 2)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .kernel import Instr, Kernel, Output
from .replay_accumulate import count
from .replay_ops import c_layout

# A merged kernel stays within these (numba's compile time grows with a kernel's size).
MAX_OUTPUTS = 32
MAX_INSTRUCTIONS = 200


def _starting_after(groups: list[_Group], latest: int) -> Iterator[_Group]:
    """The latest groups, newest first, while they start after slot ``latest``."""
    return itertools.takewhile(lambda g: g.old_first > latest, reversed(groups))


class _Group:
    """A kernel being built from merged recorded kernels: its operands, program and outputs."""

    def __init__(self, step: tuple, old_first: int) -> None:
        self.kind = step[0]
        self.domain = step[1].domain
        self.old_first = old_first  # results of steps from here on do not exist yet
        self.inputs: list[tuple] = []  # sources, as the recorder encodes a kernel's
        self.input_sigs: list[tuple] = []  # (dtype, broadcast flags) of each input
        self.constants: list[Any] = []
        self.numbers: list[tuple] = []  # (index in constants, recipe) of number arguments
        # operand ids are symbolic while kernels join (each part grows): ("in", k) an input,
        # ("c", k) a constant, ("i", k) an instruction
        self.program: list[tuple] = []  # (op, symbolic args, dtype)
        self.outputs: list[tuple] = []  # (symbolic value, reduce, axes, dtype, mirror)
        self.old_slots: list[int] = []  # the old slot of each output
        self._instr_ids: dict[tuple, int] = {}
        self.add(step, old_first, {})

    def add(self, step: tuple, old_first: int, own: dict[int, tuple]) -> None:
        """Append ``step``'s kernel; ``own`` maps the old slots of this group's elementwise
        outputs it reads to the symbolic ids of their values."""
        _, template, sources, _, numbers = step
        ids: list[tuple] = []
        for src, sig in zip(sources, template.signature()[1]):
            if src[0] != "const" and src[0] in own:
                ids.append(own[src[0]])
                continue
            key = (_source_key(src), sig)
            for k, (s, g) in enumerate(zip(self.inputs, self.input_sigs)):
                if (_source_key(s), g) == key:
                    ids.append(("in", k))
                    break
            else:
                ids.append(("in", len(self.inputs)))
                self.inputs.append(src)
                self.input_sigs.append(sig)
        base = len(self.constants)
        self.constants.extend(template.constants)
        self.numbers.extend((j + base, r) for j, r in numbers)
        ids.extend(("c", base + j) for j in range(len(template.constants)))
        for ins in template.program:
            args = tuple(ids[a] for a in ins.args)
            same = (ins.op, args, ins.dtype.str)
            at = self._instr_ids.get(same)
            if at is None:
                at = self._instr_ids[same] = len(self.program)
                self.program.append((ins.op, args, ins.dtype))
            ids.append(("i", at))
        for j, o in enumerate(template.outputs):
            mirror = None if o.mirror is None else ids[o.mirror]  # (a group's first kernel only)
            self.outputs.append((ids[o.value], o.reduce, o.axes, o.dtype, mirror))
            self.old_slots.append(old_first + j)

    def can_take(self, step: tuple, slot_of: dict[int, tuple[_Group, int]]) -> dict | None:
        """``own`` for ``add`` when ``step``'s kernel can join this group, else None."""
        kind, template, sources, _, _ = step
        if kind != self.kind or template.domain != self.domain:
            return None
        if any(o.mirror is not None for o in template.outputs):
            return None
        if len(self.outputs) + len(template.outputs) > MAX_OUTPUTS:
            return None
        if len(self.program) + len(template.program) > MAX_INSTRUCTIONS:
            return None
        own: dict[int, tuple] = {}
        for src, (_, flags) in zip(sources, template.signature()[1]):
            if src[0] == "const" or src[0] < self.old_first:
                continue  # a constant, or a result made before this group runs
            hit = slot_of.get(src[0])
            if hit is None or hit[0] is not self:
                return None  # made after this group's kernel: not there yet
            value, reduce, _, dtype, _ = self.outputs[hit[1]]
            if (
                reduce is not None
                or any(flags)
                or src[1] != 0
                or src[2] != self.domain
                or src[4] != dtype
                or not c_layout(src[2], src[3], src[4])
            ):
                return None  # only an elementwise output read whole can be taken in-register
            own[src[0]] = value
        return own

    def template(self) -> tuple[Kernel, list[tuple], tuple]:
        """The merged kernel (a template without inputs), its sources and number constants."""
        ni, nc = len(self.inputs), len(self.constants)

        def resolve(x: tuple) -> int:
            tag, k = x
            return k if tag == "in" else ni + k if tag == "c" else ni + nc + k

        program = tuple(
            Instr(op, tuple(resolve(a) for a in args), dtype) for op, args, dtype in self.program
        )
        outputs = tuple(
            Output(resolve(value), reduce, axes, dtype, None if m is None else resolve(m))
            for value, reduce, axes, dtype, m in self.outputs
        )
        template = _template(self.domain, self.input_sigs, self.constants, program, outputs)
        return template, list(self.inputs), tuple(self.numbers)


def _template(
    domain: tuple, input_sigs: Sequence[tuple], constants: Sequence[Any], program, outputs
) -> Kernel:
    """A kernel template (no inputs) with its signature made from ``input_sigs``."""
    probe = tuple(
        np.broadcast_to(
            np.zeros((), dt), tuple(1 if b or d == 1 else d for b, d in zip(flags, domain))
        )
        for dt, flags in input_sigs
    )
    sig = Kernel(domain, probe, tuple(constants), tuple(program), tuple(outputs)).signature()
    return Kernel(domain, (), tuple(constants), tuple(program), tuple(outputs), sig)


def _split(steps: list[tuple], n_inputs: int) -> list[tuple]:
    """Reductions of results of earlier kernels of the same domain (one sum per result: the
    column sums of a loop's cotangents) split off the end of the kernel holding them, one
    kernel each, which ``merge`` can then run inside the kernel that makes the result. Slot
    numbers are kept."""
    made: dict[int, tuple] = {}  # slot -> (domain, elementwise) of the kernel output there
    out: list[tuple] = []
    first = n_inputs
    for step in steps:
        kind, template, sources, at, numbers = step
        n = count(step)
        if kind in ("call", "iadd", "alias") or template is None:
            out.append(step)
            first += n
            continue
        for j, o in enumerate(template.outputs):
            made[first + j] = (template.domain, o.reduce is None)
        first += n
        sigs = template.signature()[1]
        keep = len(template.outputs)
        while keep and _movable(template.outputs[keep - 1], sources, template.domain, made):
            keep -= 1
        if len(template.outputs) - keep < 2:
            out.append(step)
            continue
        if keep:
            out.append(_pruned(kind, template, sources, template.outputs[:keep], at, numbers))
        for j, o in enumerate(template.outputs[keep:], keep):
            single = _template(
                template.domain, [sigs[o.value]], (), (), (Output(0, o.reduce, o.axes, o.dtype),)
            )
            out.append((kind, single, (sources[o.value],), at + j, ()))
    return out


def split_independent(steps: list[tuple]) -> list[tuple]:
    """Each kernel cut where the outputs before and after compute nothing in common (a
    planner's group of unrelated values of one domain: a weight's gradient and a bias's column
    sums), into kernels of their own, so that the passes after (``replay_accumulate``,
    ``merge``) see each on its own. Slot numbers are kept (the parts keep the outputs' order).

    >>> from fusegrad.lazy.kernel import Instr, Kernel
    >>> f8 = np.dtype("f8")
    >>> prog = (Instr("add", (0, 1), f8), Instr("multiply", (0, 0), f8))
    >>> outs = (Output(2, None, (), f8), Output(3, None, (), f8))
    >>> k = _template((3,), [(f8, (False,))] * 2, (), prog, outs)
    >>> x = (0, 0, (3,), (8,), f8)
    >>> parts = split_independent([("numpy", k, (x, x), 2, ())])
    >>> [(len(p[1].program), len(p[2]), p[3]) for p in parts]
    [(1, 2, 2), (1, 1, 3)]
    """
    out: list[tuple] = []
    for step in steps:
        kind, template, sources, at, numbers = step
        if kind in ("call", "iadd", "alias") or template is None or len(template.outputs) < 2:
            out.append(step)
            continue
        if numbers or any(o.mirror is not None for o in template.outputs):
            out.append(step)
            continue
        n_in, n_c = len(sources), len(template.constants)
        first = n_in + n_c
        deps: list[set[int]] = []  # the instructions each instruction reads, transitively
        for j, ins in enumerate(template.program):
            d = {first + j}
            for a in ins.args:
                if a >= first:
                    d |= deps[a - first]
            deps.append(d)
        used = [deps[o.value - first] if o.value >= first else set() for o in template.outputs]
        cuts = [0]
        for j in range(1, len(template.outputs)):
            before = set().union(*used[cuts[-1] : j])
            after = set().union(*used[j:])
            if not before & after:
                cuts.append(j)
        if len(cuts) == 1:
            out.append(step)
            continue
        for lo, hi in zip(cuts, [*cuts[1:], len(template.outputs)]):
            part = _pruned(kind, template, sources, template.outputs[lo:hi], at + lo, ())
            out.append(_without_unused_instructions(part))
    return out


def _without_unused_instructions(step: tuple) -> tuple:
    """A kernel step without the instructions none of its outputs needs."""
    kind, template, sources, at, numbers = step
    first = len(sources) + len(template.constants)
    need: set[int] = set()
    stack = [v for o in template.outputs for v in (o.value, o.mirror) if v is not None]
    while stack:
        v = stack.pop()
        if v >= first and v not in need:
            need.add(v)
            stack.extend(template.program[v - first].args)
    keep = [j for j in range(len(template.program)) if first + j in need]
    if len(keep) == len(template.program):
        return step
    new_id = {first + j: first + k for k, j in enumerate(keep)}

    def ren(a: int) -> int:
        return new_id.get(a, a)

    program = tuple(
        Instr(template.program[j].op, tuple(ren(a) for a in template.program[j].args),
              template.program[j].dtype)
        for j in keep
    )  # fmt: skip
    outs = tuple(
        Output(ren(o.value), o.reduce, o.axes, o.dtype, None if o.mirror is None else ren(o.mirror))
        for o in template.outputs
    )
    sigs = template.signature()[1]
    kept = _template(template.domain, list(sigs), template.constants, program, outs)
    return _pruned(kind, kept, sources, kept.outputs, at, numbers)


def _movable(o: Output, sources: tuple, domain: tuple, made: dict) -> bool:
    """Whether output ``o`` only reduces one input, an elementwise result of a kernel over
    ``domain``."""
    if o.value >= len(sources) or o.mirror is not None or o.reduce is None:
        return False
    src = sources[o.value]
    return src[0] != "const" and made.get(src[0]) == (domain, True)


def _pruned(kind: str, template: Kernel, sources: tuple, outputs: tuple, at: int, numbers):
    """The kernel step computing only ``outputs`` of ``template``, without the inputs it then
    does not read."""
    n_in = len(sources)
    used = {a for i in template.program for a in i.args} | {o.value for o in outputs}
    used |= {o.mirror for o in outputs if o.mirror is not None}
    keep = [k for k in range(n_in) if k in used]
    shift = n_in - len(keep)
    new_id = {k: j for j, k in enumerate(keep)}

    def renumber(x: int) -> int:
        return new_id[x] if x < n_in else x - shift

    program = tuple(
        Instr(i.op, tuple(renumber(a) for a in i.args), i.dtype) for i in template.program
    )
    outs = tuple(
        Output(
            renumber(o.value),
            o.reduce,
            o.axes,
            o.dtype,
            None if o.mirror is None else renumber(o.mirror),
        )  # fmt: skip
        for o in outputs
    )
    sigs = template.signature()[1]
    pruned = _template(template.domain, [sigs[k] for k in keep], template.constants, program, outs)
    return (kind, pruned, tuple(sources[k] for k in keep), at, numbers)


def _source_key(src: tuple) -> Any:
    if src[0] == "const":
        return ("const", id(src[1]))
    return tuple(src)


def merge(
    steps: list[tuple],
    n_inputs: int,
    recipes: list[tuple],
    layouts: Sequence[tuple | None],
    mergeable: Callable[[tuple], bool] = lambda step: True,
) -> tuple[list[tuple], list[tuple], list[tuple | None]]:
    """The program with later kernels merged into earlier ones of their domain (see the module),
    its recipes and slot layouts renumbered. ``mergeable(step)``: whether a kernel step may take
    part (both the earlier and the later)."""
    steps = _split(steps, n_inputs)
    # 1. groups: each kernel joins the group making one of its operands, else the latest group
    # it can join, else starts one
    plan: list[Any] = []  # per step: a _Group (its leader or a member) or the step itself
    slot_of: dict[int, tuple[_Group, int]] = {}
    groups: list[_Group] = []
    old_first = n_inputs
    for step in steps:
        n = count(step)
        kind, template = step[0], step[1]
        joined = None
        if kind not in ("call", "iadd", "alias") and template is not None and mergeable(step):
            makers = [slot_of[s[0]][0] for s in step[2] if s[0] != "const" and s[0] in slot_of]
            # a group that made none of its operands can take it only if it starts after the
            # latest of them (``can_take``): the older ones are not tried (trying every group
            # made recording a 1000-step loop quadratic)
            latest = max((s[0] for s in step[2] if s[0] != "const"), default=-1)
            later = _starting_after(groups, latest)
            for g in [*reversed(makers), *later]:
                own = g.can_take(step, slot_of)
                if own is not None:
                    base = len(g.outputs)
                    g.add(step, old_first, own)
                    for j in range(n):
                        slot_of[old_first + j] = (g, base + j)
                    joined = g
                    break
            if joined is None:
                g = _Group(step, old_first)
                groups.append(g)
                for j in range(n):
                    slot_of[old_first + j] = (g, j)
                plan.append(g)
            else:
                plan.append(None)  # runs inside its group
        else:
            plan.append(step)
        old_first += n
    if not any(p is None for p in plan):
        return steps, recipes, list(layouts)  # nothing merged
    # 2. renumber: new slots in the order the new steps make them
    new_of: dict[int, int] = {i: i for i in range(n_inputs)}
    new_layouts: list[tuple | None] = list(layouts[:n_inputs])
    out: list[tuple] = []
    old_first = n_inputs
    emitted: list[tuple[Any, int]] = []
    for step, p in zip(steps, plan):
        emitted.append((p, old_first))
        old_first += count(step)
    for p, first in emitted:
        if p is None:
            continue
        new_first = len(new_layouts)
        if isinstance(p, _Group):
            template, sources, numbers = p.template()
            for j, old in enumerate(p.old_slots):
                new_of[old] = new_first + j
                new_layouts.append(layouts[old])
            merged = tuple(s if s[0] == "const" else (new_of[s[0]], *s[1:]) for s in sources)
            out.append((p.kind, template, merged, new_first, numbers))
        else:
            for j in range(count(p)):
                new_of[first + j] = new_first + j
                new_layouts.append(layouts[first + j])
            out.append(renumbered(p, new_of, new_first))
    return out, [renumber_recipe(r, new_of) for r in recipes], new_layouts


def renumbered(step: tuple, new_of: dict[int, int], new_first: int) -> tuple:
    """``step`` reading slot ``new_of[i]`` wherever it read slot ``i``, its results written
    from slot ``new_first`` on.

    >>> renumbered(("iadd", None, (3, 4), 5, ()), {3: 4, 4: 5}, 6)
    ('iadd', None, (4, 5), 6, ())
    """
    kind, template, sources, _, extra = step
    out: tuple
    if kind == "call":
        out = (_renumber(sources[0], new_of), _renumber(sources[1], new_of))
        if len(extra) > 3 and extra[3]:  # its products' operands
            found = tuple(
                (k, _renumber(a, new_of), _renumber(b, new_of), ta, tb)
                for k, a, b, ta, tb in extra[3]
            )
            extra = (*extra[:3], found)
    elif kind == "iadd":
        out = (new_of[sources[0]], new_of[sources[1]])
    elif kind == "alias":
        out = (new_of[sources[0]], *sources[1:])
    elif template is not None:
        out = tuple(s if s[0] == "const" else (new_of[s[0]], *s[1:]) for s in sources)
    else:
        out = sources  # folded: its recorded results
    return (kind, template, out, new_first, extra)


def _renumber(e: tuple, new_of: dict[int, int]) -> tuple:
    """An encoded step operand (``replay_ops``) with its slots renumbered."""
    tag = e[0]
    if tag in ("view", "slot"):
        return (tag, new_of[e[1]], *e[2:])
    if tag == "seq":
        return (tag, e[1], tuple(_renumber(v, new_of) for v in e[2]))
    if tag == "dict":
        return (tag, e[1], tuple(_renumber(v, new_of) for v in e[2]))
    return e


def renumber_recipe(r: tuple, new_of: dict[int, int]) -> tuple:
    """A result's recipe (``replay.Recorder.recipe``) with its slots renumbered."""
    if r[0] == "view":
        return ("view", new_of[r[1]], *r[2:])
    if r[0] == "derived" and r[2] is not None:
        return ("derived", r[1], renumber_recipe(r[2], new_of))
    return r
