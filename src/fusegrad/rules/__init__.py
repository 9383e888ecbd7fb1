"""Rules: the registry and one file per family of NumPy functions."""

from .registry import frule, opt_out, register_frule, register_rrule, rrule

__all__ = ["frule", "opt_out", "register_frule", "register_rrule", "rrule"]
