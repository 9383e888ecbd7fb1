"""The tangent algebra: zeros, structural tangents, thunks, ``add``/``iadd`` and ``ProjectTo``.

>>> from fusegrad.tangents import ZeroTangent, Thunk, add, unthunk
>>> unthunk(add(Thunk(lambda: 1.0), ZeroTangent()))
1.0
"""

import importlib.util

from .algebra import add, iadd, scale, tree_equal
from .ownership import disown, mark_owned, owned, ownership_scope
from .project import ProjectTo, tangent_dtype
from .structural import Tangent
from .thunks import AbstractThunk, InplaceThunk, Thunk, is_lazy_thunk, unthunk
from .zeros import AbstractZero, NoTangent, ZeroTangent, is_zero

__all__ = [
    "AbstractThunk",
    "AbstractZero",
    "InplaceThunk",
    "NoTangent",
    "ProjectTo",
    "Tangent",
    "Thunk",
    "ZeroTangent",
    "add",
    "disown",
    "iadd",
    "is_lazy_thunk",
    "is_zero",
    "mark_owned",
    "owned",
    "ownership_scope",
    "scale",
    "tangent_dtype",
    "tree_equal",
    "unthunk",
]

if importlib.util.find_spec(f"{__name__}.broadcast_thunk") is not None:
    # Written separately; imported only once it exists, so that its own errors are not hidden.
    from .broadcast_thunk import BroadcastThunk  # noqa: F401

    __all__ += ["BroadcastThunk"]
