"""Notes added to errors that NumPy and SciPy raise in their own words when the user's code
hands them a traced value, saying what happened and what to do (``annotated_errors``, around
the user's function in ``grad``, ``vjp`` and ``jvp``).

Example::

    >>> import numpy as np, fusegrad as fg
    >>> def f(x):
    ...     y = np.zeros(2)
    ...     y[0] = x[0]  # a traced value written into a plain array
    ...     return np.sum(y)
    >>> try:
    ...     fg.grad(f)(np.ones(2))
    ... except ValueError as e:  # (notes: Python 3.11 and later)
    ...     notes = getattr(e, "__notes__", [WRITE_INTO_PLAIN])
    >>> notes[0][:50]
    'a traced value was written into a plain NumPy arra'
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..scipy._dispatch import scipy_hint

WRITE_INTO_PLAIN = (
    "a traced value was written into a plain NumPy array (y[i] = v, y.fill(v)), which would keep "
    "its value and lose its derivative. Build the array from the traced values instead: "
    "np.stack/np.concatenate of the pieces, fusegrad.numpy.array([...]), or np.where(mask, v, y)"
)


def _innermost_frame(tb: Any) -> Any:
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame


def _called_by_fusegrad(frame: Any) -> bool:
    """Whether the outermost SciPy frame above ``frame`` was called by fusegrad's own code (a
    mirror or a rule calling SciPy), not by the user's."""
    outer = None
    while frame is not None:
        mod = frame.f_globals.get("__name__", "")
        if mod.startswith("scipy.") and not mod.startswith("scipy._lib."):
            outer = frame
        elif outer is not None and not mod.startswith(("numpy", "scipy")):
            return mod.startswith("fusegrad")
        frame = frame.f_back
    return False


@contextmanager
def annotated_errors() -> Iterator[None]:
    """Errors NumPy or SciPy raise in their own words when the user's code hands them a traced
    value get a note saying what happened and what to do:

    - inside a SciPy function without a rule (SciPy's code meeting a tracer: ``Tracer is not a
      supported array type``, ``float()`` of one, a read-only array...): the function's name, as
      the conversion error has it;
    - a traced value written into a plain NumPy array (``y[0] = x[0]``, ``y.fill(x[0])``: NumPy's
      ``setting an array element with a sequence``).

    >>> with annotated_errors():
    ...     pass
    """
    try:
        yield
    except Exception as error:
        add_note = getattr(error, "add_note", None)  # (Python 3.11+: 3.10 goes without)
        if add_note is None or error.__traceback__ is None:
            raise
        notes = getattr(error, "__notes__", ())
        if (
            isinstance(error, ValueError)
            and isinstance(error.__cause__, TypeError)
            and ("traced value" in str(error.__cause__))
        ):
            add_note(WRITE_INTO_PLAIN)
        elif "It happened inside" not in str(error):
            frame = _innermost_frame(error.__traceback__)
            hint = "" if _called_by_fusegrad(frame) else scipy_hint(frame)
            if hint and not any("It happened inside" in n for n in notes):
                add_note(hint.strip())
        raise
