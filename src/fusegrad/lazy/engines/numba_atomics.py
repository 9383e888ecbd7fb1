"""Counters shared between threads, read and changed atomically in compiled code.

* ``poll``: wait, without the GIL, for a counter to change, for a bounded number of checks.
  The worker pool (``lazy/workers.py``) polls before it sleeps. Each check is an atomic load
  (acquire), so the compiled loop reads memory every time rather than once, followed on x86 by
  ``pause``, which tells the core it is spinning.
* ``claim``: take the next number from a counter (an atomic fetch-and-add). A numba kernel split
  over threads claims its slots one by one, so a thread that starts late finds the slots
  already run rather than making the others wait for its share.

    >>> import numpy as np
    >>> counters = np.zeros(1, np.int64)
    >>> poll(counters, 0, 0, 10, -1), poll(counters, 0, 1, 10, -1)
    (False, True)
    >>> claim(counters), claim(counters), int(counters[0])
    (0, 1, 2)
"""

from __future__ import annotations

import platform

from llvmlite import ir  # type: ignore[import-untyped]  # llvmlite ships no type information
from numba import njit, types
from numba.extending import intrinsic

_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


@intrinsic
def _load_acquire(typingctx, counters, index):
    """``counters[index]`` read atomically, with acquire ordering (never hoisted out of a loop)."""
    sig = types.int64(counters, index)

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.load_atomic(builder.gep(array.data, [args[1]]), "acquire", 8)

    return sig, codegen


@intrinsic
def _fetch_add(typingctx, counters, index):
    """``counters[index] += 1`` atomically (sequentially consistent); the value before."""
    sig = types.int64(counters, index)

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.gep(array.data, [args[1]])
        return builder.atomic_rmw("add", ptr, ir.Constant(ir.IntType(64), 1), "seq_cst")

    return sig, codegen


@intrinsic
def _pause(typingctx):
    """x86's ``pause`` (a spin-wait hint); nothing elsewhere."""

    def codegen(context, builder, signature, args):
        if _X86:
            fnty = ir.FunctionType(ir.VoidType(), [])
            builder.call(builder.module.declare_intrinsic("llvm.x86.sse2.pause", fnty=fnty), [])
        return context.get_dummy_value()

    return types.void(), codegen


@njit(nogil=True, cache=True)
def poll(counters, index, seen, checks, signal):
    """Whether ``counters[index]`` (an int64 array) differs from ``seen`` within ``checks``
    checks, the GIL released meanwhile. First, ``counters[signal] += 1`` if ``signal`` is not
    negative: a thread polling for that signal finds the GIL free when it sees it.

    Every argument is passed (no defaults): with one left out a hand-off took ~60 µs, not ~5
    (numba's dispatch of omitted arguments).
    """
    if signal >= 0:
        _fetch_add(counters, signal)
    for _ in range(checks):
        if _load_acquire(counters, index) != seen:
            return True
        _pause()
    return _load_acquire(counters, index) != seen


@njit(nogil=True, cache=True)
def claim(counters):
    """The next number of the counter ``counters[0]`` (an int64 array), counting from its
    value: every call, on whatever thread, gets a different one."""
    return _fetch_add(counters, 0)
