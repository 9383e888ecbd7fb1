"""Rules: the registry and one file per family of NumPy functions (importing registers them)."""

from . import elementwise, indexing, linalg, polynomial, reductions, scans, shapes, special  # noqa: F401
from .registry import frule, opt_out, register_frule, register_rrule, rrule

__all__ = ["frule", "opt_out", "register_frule", "register_rrule", "rrule"]
