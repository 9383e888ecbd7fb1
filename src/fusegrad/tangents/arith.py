"""Where the tangent types' operators find ``add``, ``scale`` and ``tree_equal``.

The types (``zeros.py``, ``thunks.py``, ``structural.py``) are below ``algebra.py``: the algebra
must know them to add them. Their operators (``thunk + x``, ``ZeroTangent() - t``,
``tangent == other``) need the algebra in turn, so instead of importing it they call the
functions held here, which ``algebra.py`` installs when it is imported. The package's
``__init__`` imports ``algebra`` before anything else, and Python runs a package's ``__init__``
before any of its submodules can be used, so the functions are in place whichever module of
``fusegrad.tangents`` is imported first.

>>> from fusegrad.tangents import Thunk, algebra
>>> add is algebra.add, Thunk(lambda: 1.0) + 2.0
(True, 3.0)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _not_installed(*args: Any) -> Any:
    raise RuntimeError(
        "fusegrad.tangents.algebra has not installed the tangent algebra: import fusegrad.tangents "
        "(the package) rather than loading one of its files on its own"
    )


add: Callable[[Any, Any], Any] = _not_installed
scale: Callable[[Any, Any], Any] = _not_installed
tree_equal: Callable[[Any, Any], bool] = _not_installed


def install(
    add_fn: Callable[[Any, Any], Any],
    scale_fn: Callable[[Any, Any], Any],
    tree_equal_fn: Callable[[Any, Any], bool],
) -> None:
    """Make the types' operators use these functions (``algebra.py`` calls this once)."""
    global add, scale, tree_equal
    add, scale, tree_equal = add_fn, scale_fn, tree_equal_fn
