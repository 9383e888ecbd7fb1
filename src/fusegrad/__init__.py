"""fusegrad: reverse-mode AD for NumPy code that keeps elementwise and broadcast work lazy.

>>> import numpy as np, fusegrad as fg
>>> fg.grad(lambda v: np.sum(np.tanh(v[:, None] - v[None, :])))(np.zeros(3))
array([0., 0., 0.])
"""

from . import numpy  # noqa: F401  (fusegrad.numpy.array, stop_gradient)
from . import rules as _rules  # noqa: F401  (registers every rule family)
from . import scipy as _scipy  # noqa: F401  (plain SciPy calls on traced values)
from .ad import tracer as _tracer  # noqa: F401  (attaches NumPy protocols to Tracer)
from .ad.pytree import ravel_pytree, register_pytree_node
from .api import (
    checkpoint,
    deriv,
    elementwise_grad,
    grad,
    hessian,
    hvp,
    jacobian,
    jvp,
    value_and_grad,
    vjp,
)
from .explain import Explanation, explain
from .jit_cache import jit
from .lazy import use_engine
from .polynomial import install as _install_polynomial  # numpy.polynomial on traced values
from .rules import frule, opt_out, register_frule, register_rrule, rrule
from .rules.elementwise import scalar_rule
from .rules.registry import primitive
from .tangents import (
    AbstractThunk,
    BroadcastThunk,
    InplaceThunk,
    NoTangent,
    ProjectTo,
    Tangent,
    Thunk,
    ZeroTangent,
    add,
    iadd,
    mark_owned,
    owned,
    unthunk,
)

_install_polynomial()

flatten = ravel_pytree  # autograd's name: fusegrad.flatten(tree) -> (vector, unflatten)

__version__ = "0.1.0"

__all__ = [
    "AbstractThunk",
    "BroadcastThunk",
    "InplaceThunk",
    "NoTangent",
    "ProjectTo",
    "Tangent",
    "Thunk",
    "Explanation",
    "ZeroTangent",
    "add",
    "checkpoint",
    "deriv",
    "elementwise_grad",
    "explain",
    "flatten",
    "frule",
    "grad",
    "hessian",
    "hvp",
    "iadd",
    "jacobian",
    "jit",
    "jvp",
    "mark_owned",
    "opt_out",
    "owned",
    "primitive",
    "ravel_pytree",
    "register_pytree_node",
    "register_frule",
    "register_rrule",
    "rrule",
    "scalar_rule",
    "unthunk",
    "use_engine",
    "value_and_grad",
    "vjp",
]
