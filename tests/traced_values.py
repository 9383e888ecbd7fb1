"""What a function computes on traced arguments, for the tests of SciPy's functions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import fusegrad as fg


def traced_value(f: Callable, *args: Any, argnums: Any = None, **kwargs: Any) -> tuple:
    """``(f(*args, **kwargs) computed on traced arguments, f on the plain ones, the loss)``: the
    first is read while ``fg.grad`` differentiates ``loss = sum(sin(f(...)))`` with respect to
    ``argnums`` (every argument by default).

    >>> ours, theirs, _ = traced_value(np.cumsum, np.arange(3.0))
    >>> ours.tolist() == theirs.tolist() == [0.0, 1.0, 3.0]
    True
    """
    seen = {}

    def loss(*a: Any) -> Any:
        out = f(*a, **kwargs)
        seen["value"] = fg.numpy.stop_gradient(out)
        return np.sum(np.sin(out))

    fg.grad(loss, argnums=tuple(range(len(args))) if argnums is None else argnums)(*args)
    return seen["value"], f(*args, **kwargs), loss
