"""fusegrad.lazy: NumPy syntax, evaluated like one fused loop.

Example::

    >>> import numpy as np, fusegrad.lazy as fl
    >>> x, y = fl.asarray(np.random.rand(500)), fl.asarray(np.random.rand(500))
    >>> d = x[:, None] - y[None, :]                      # lazy, nothing allocated
    >>> rows, cols = fl.materialize(np.sum(d**2, axis=1), np.sum(d**2, axis=0))  # one pass
"""

from . import movement as _movement
from . import protocols as _protocols  # noqa: F401  (attaches NumPy protocols to LazyArray)
from . import small as _small  # noqa: F401  (hands nodes.asarray the small-array path)
from .engines import current as current_engine
from .engines import use_engine
from .nodes import LazyArray, Leaf, Map, Reduce, asarray
from .plan import inline as _inline
from .plan import materialize, materialize_many, recording

# Movement computes what it cannot push down with the planner above it (see movement.py).
_movement.install_planner(materialize, _inline)

__all__ = [
    "LazyArray",
    "Leaf",
    "Map",
    "Reduce",
    "asarray",
    "current_engine",
    "materialize",
    "materialize_many",
    "recording",
    "use_engine",
]
