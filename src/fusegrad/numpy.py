"""What NumPy's protocols cannot reach: ``array`` of traced values, and ``stop_gradient``.

User code keeps ``import numpy as np``; these two functions cover the gaps:

- ``np.array([a, b])`` does not dispatch to ``__array_function__`` on a list of traced values, so
  ``fusegrad.numpy.array([a, b])`` builds it with ``np.stack`` instead (differentiable).
- ``fusegrad.numpy.stop_gradient(x)`` is the value of ``x`` as a constant, with no derivative.

Example::

    >>> import numpy as np, fusegrad as fg
    >>> import fusegrad.numpy as fnp
    >>> fg.grad(lambda x: np.sum(fnp.array([x[0] * x[1], x[1]])))(np.array([2.0, 3.0]))
    array([3., 3.])
    >>> fg.grad(lambda x: np.sum(x * fnp.stop_gradient(x)))(np.array([2.0, 3.0]))
    array([2., 3.])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .ad.conversions import holds_tracer, stacked
from .ad.core import Tracer
from .lazy import LazyArray, materialize, replay


def array(values: Any, dtype: Any = None) -> Any:
    """``np.array(values, dtype)`` where ``values`` (nested lists/tuples) may hold traced values.

    Traced values are combined with ``np.stack``, so the gradient flows to each of them; without
    traced values this is ``np.array``.

    >>> import fusegrad as fg
    >>> fg.grad(lambda t: np.sum(array([[t, 2 * t], [0.0, t * t]])))(3.0)
    9.0
    >>> array([[1, 2], [3, 4]], dtype=float)
    array([[1., 2.],
           [3., 4.]])
    """
    if not holds_tracer(values):
        return np.array(values, dtype=dtype)
    out = stacked(values)
    return out if dtype is None else out.astype(dtype)


def stop_gradient(x: Any) -> Any:
    """The value of ``x`` (at every trace level) as a constant: no derivative flows through it.

    Non-traced values are returned unchanged.

    >>> import fusegrad as fg
    >>> fg.grad(lambda x: x * stop_gradient(x))(3.0)  # d/dx (x * c) with c = 3
    3.0
    >>> stop_gradient(np.ones(2))
    array([1., 1.])
    """
    if not isinstance(x, Tracer):
        return x
    while isinstance(x, Tracer):
        x = x.value
    if isinstance(x, LazyArray) and replay.active() is None:
        return materialize(x)
    # (while jit records, a lazy value stays one: computed here, it would be a constant of the
    # recording, and the program could not be replayed)
    return x


__all__ = ["array", "stop_gradient"]
