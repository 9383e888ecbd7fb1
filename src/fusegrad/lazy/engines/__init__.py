"""Engine selection: ``numpy`` (the blocked reference), ``numba`` (compiled loop nests), ``auto``.

``FUSEGRAD_ENGINE=numpy|numba|auto`` sets the default; ``use_engine(name)`` overrides it in a block.
``auto`` runs a kernel on numba when numba is importable, supports the kernel, and either has it
compiled already or prefers it by the measured rule in ``numba_engine.prefers``; otherwise on
numpy_blocked.

Example::

    >>> with use_engine("numpy"):
    ...     pass  # every kernel in here runs on numpy_blocked
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import numpy as np

from ..kernel import Kernel
from . import numpy_blocked

ENGINES = ("auto", "numpy", "numba")
_override: list[str] = []
_numba = None
_numba_checked = False


def _numba_engine():
    global _numba, _numba_checked
    if not _numba_checked:
        _numba_checked = True
        try:
            from . import numba_engine

            _numba = numba_engine if numba_engine.available() else None
        except ImportError:  # pragma: no cover - the module is part of the package
            _numba = None
    return _numba


def current() -> str:
    """The engine in force: the innermost ``use_engine``, else ``FUSEGRAD_ENGINE``, else auto."""
    if _override:
        return _override[-1]
    name = os.environ.get("FUSEGRAD_ENGINE", "auto").lower()
    if name not in ENGINES:
        raise ValueError(f"FUSEGRAD_ENGINE={name!r} is not one of {', '.join(ENGINES)}")
    return name


@contextlib.contextmanager
def use_engine(name: str) -> Iterator[None]:
    """Run every kernel inside the block on engine ``name`` (``auto``, ``numpy`` or ``numba``)."""
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
    _override.append(name)
    try:
        yield
    finally:
        _override.pop()


def choose(kernel: Kernel) -> str:
    """The engine that will run ``kernel``: ``"numpy"`` or ``"numba"``."""
    name = current()
    if name == "numpy":
        return "numpy"
    nb = _numba_engine()
    if nb is None or not nb.supports(kernel):
        return "numpy"
    if name == "numba":
        return "numba"
    # The measured rule (numba_engine.prefers): transcendental kernels stay on NumPy's SIMD
    # ufuncs even when a numba build of them exists; arithmetic ones go to numba when large or
    # already compiled.
    return "numba" if nb.prefers(kernel) else "numpy"


def runner(name: str):
    """The ``run(kernel) -> outputs`` function of engine ``name`` (``"numpy"`` or ``"numba"``)."""
    return _numba_engine().run if name == "numba" else numpy_blocked.run


def run(kernel: Kernel) -> tuple[list[np.ndarray], str]:
    """Run ``kernel`` on the chosen engine; returns the outputs and the engine's name."""
    name = choose(kernel)
    if name == "numba":
        return _numba_engine().run(kernel), name
    return numpy_blocked.run(kernel), name
