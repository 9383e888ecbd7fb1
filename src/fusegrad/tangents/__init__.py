"""The tangent algebra: zeros, structural tangents, thunks, ``add``/``iadd`` and ``ProjectTo``.

>>> from fusegrad.tangents import ZeroTangent, Thunk, add, unthunk
>>> unthunk(add(Thunk(lambda: 1.0), ZeroTangent()))
1.0
"""

from .algebra import add, iadd, scale, tree_equal
from .broadcast_thunk import BroadcastThunk
from .ownership import disown, mark_owned, owned, ownership_scope
from .project import ProjectTo, tangent_dtype
from .structural import Tangent
from .thunks import AbstractThunk, InplaceThunk, Thunk, is_lazy_thunk, unthunk
from .zeros import AbstractZero, NoTangent, ZeroTangent, is_zero

__all__ = [
    "AbstractThunk",
    "AbstractZero",
    "BroadcastThunk",
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
