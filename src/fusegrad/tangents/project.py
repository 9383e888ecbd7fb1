"""``ProjectTo(x)(dx)``: bring a cotangent back into the space of the primal ``x``.

Built from a primal (it keeps its type, shape and dtype, not its data), a projector fixes:

- dtype: a float32 primal gets a float32 cotangent; a complex cotangent for a real primal loses
  its imaginary part (JAX's convention, which every rule follows: ``d Re(c·x)/dx = Re(c)``);
  a real cotangent for a complex primal becomes complex; integer primals project like floats of
  their size with float32 as the floor (int8/16/32 → float32, int64/uint64 → float64), because
  float16 is too coarse for derivatives;
  bool primals (and strings, None, anything non-numeric) → ``NoTangent()``.
- scalars: a Python float primal gets a Python float (a 0-d array cotangent becomes a float);
  a 0-d array primal gets a 0-d array; a NumPy scalar primal gets a NumPy scalar.
- shape: trivial reshapes only, i.e. the same shape once size-1 axes are dropped
  (``(n, 1)`` ↔ ``(n,)``, ``()`` ↔ ``(1, 1)``); anything else raises ``ValueError``.
- containers element by element; dataclasses and objects field by field (giving ``Tangent``).

``ZeroTangent()``/``NoTangent()`` pass through. Projection is idempotent.

Lazy cotangents: a thunk with ``keeps_lazy = True`` and a ``project_to(projector)`` method is
handed to that method (it can read ``projector.shape``/``.dtype`` and call
``projector.needs_reshape(shape)``). Any other lazy value, something with ``.shape`` and
``.dtype`` that is not an ndarray, stays lazy: its dtype is fixed with ``np.real`` and
``.astype``, and it is materialised only when a reshape is needed.

    >>> ProjectTo(np.ones(3, np.float32))(np.ones((3, 1)) + 1j)
    array([1., 1., 1.], dtype=float32)
    >>> ProjectTo(2.0)(np.array(3.0))
    3.0
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any

import numpy as np

from .structural import Tangent
from .thunks import AbstractThunk, is_lazy_thunk, unthunk
from .zeros import AbstractZero, NoTangent


def tangent_dtype(dtype: Any) -> np.dtype | None:
    """The dtype of a cotangent for a primal of ``dtype``; None when there is no derivative.

    >>> tangent_dtype(np.int32), tangent_dtype(np.bool_)
    (dtype('float32'), None)
    """
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.inexact):
        return dtype
    if dtype.kind in "iu":
        return np.dtype(np.float64) if dtype.itemsize >= 8 else np.dtype(np.float32)
    return None


def _squeezed(shape: tuple) -> tuple:
    return tuple(n for n in shape if n != 1)


class ProjectTo:
    """A projector onto the cotangent space of the primal ``x``; call it on a cotangent.

    >>> p = ProjectTo(np.zeros((3, 1)))
    >>> p(np.arange(3.0)).shape
    (3, 1)
    """

    __slots__ = ("kind", "shape", "dtype", "ptype", "children")

    def __init__(self, x: Any) -> None:
        self.shape: tuple | None = None
        self.dtype: np.dtype | None = None
        self.ptype: type = type(x)
        self.children: Any = None
        x = unthunk(x)
        if isinstance(x, AbstractZero) or isinstance(x, bool | np.bool_ | str | bytes):
            self.kind = "none"
        elif isinstance(x, numbers.Number) and not isinstance(x, np.generic):
            self.kind = "pyscalar"
            self.dtype = np.dtype(complex if isinstance(x, complex) else float)
            self.shape = ()
        elif isinstance(x, tuple | list):
            self.kind = "seq"
            self.children = [ProjectTo(v) for v in x]
        elif isinstance(x, dict):
            self.kind = "dict"
            self.children = {k: ProjectTo(v) for k, v in x.items()}
        elif hasattr(x, "shape") and hasattr(x, "dtype"):
            self.dtype = tangent_dtype(x.dtype)
            self.shape = tuple(x.shape)
            if self.dtype is None:
                self.kind = "none"
            else:
                self.kind = "npscalar" if isinstance(x, np.generic) else "array"
        elif dataclasses.is_dataclass(x) and not isinstance(x, type):
            self.kind = "struct"
            self.children = {f.name: ProjectTo(getattr(x, f.name)) for f in dataclasses.fields(x)}
        elif hasattr(x, "__dict__"):
            self.kind = "struct"
            self.children = {k: ProjectTo(v) for k, v in vars(x).items()}
        else:
            self.kind = "none"

    def __repr__(self) -> str:
        if self.kind in ("array", "npscalar", "pyscalar"):
            return f"ProjectTo({self.kind}, shape={self.shape}, dtype={self.dtype})"
        return f"ProjectTo({self.kind} of {self.ptype.__name__})"

    def needs_reshape(self, shape: tuple) -> bool:
        """Whether a cotangent of ``shape`` must be reshaped; raises if it cannot be.

        >>> ProjectTo(np.zeros((3, 1))).needs_reshape((3,))
        True
        """
        shape = tuple(shape)
        if shape == self.shape:
            return False
        if self.shape is not None and _squeezed(shape) == _squeezed(self.shape):
            return True
        raise ValueError(
            f"cannot project a cotangent of shape {shape} onto a primal of shape {self.shape}: "
            "only size-1 axes may differ. The rule must return a cotangent with the primal's "
            "shape (sum over broadcast axes, 'unbroadcast', before returning it)"
        )

    def __call__(self, dx: Any) -> Any:
        if self.kind == "none":
            return NoTangent()
        if isinstance(dx, AbstractZero):
            return dx
        if is_lazy_thunk(dx) and hasattr(dx, "project_to"):
            return dx.project_to(self)
        if isinstance(dx, AbstractThunk):
            dx = unthunk(dx)
            if isinstance(dx, AbstractZero):
                return dx
        if self.kind == "seq":
            return self._seq(dx)
        if self.kind == "dict":
            return self._dict(dx)
        if self.kind == "struct":
            return self._struct(dx)
        return self._numeric(dx)

    def _numeric(self, dx: Any) -> Any:
        if isinstance(dx, tuple | list | dict | Tangent) or not (
            isinstance(dx, numbers.Number) or hasattr(dx, "dtype")
        ):
            raise TypeError(
                f"cannot project a {type(dx).__name__} onto a primal of shape {self.shape} and "
                f"dtype {self.dtype}: its cotangent must be a number or an array"
            )
        dtype = self.dtype
        assert dtype is not None  # the numeric kinds (array, npscalar, pyscalar) all have one
        real_target = not np.issubdtype(dtype, np.complexfloating)
        lazy = not isinstance(dx, np.ndarray | np.generic | numbers.Number)
        if lazy:
            return self._lazy(dx, real_target)
        if real_target and np.iscomplexobj(dx):
            dx = np.real(dx)
        if self.kind == "pyscalar":
            self.needs_reshape(np.shape(dx))
            value = np.asarray(dx).reshape(())
            return complex(value) if dtype.kind == "c" else float(value)
        if self.kind == "npscalar":
            self.needs_reshape(np.shape(dx))
            return dtype.type(np.asarray(dx).reshape(()))
        arr = np.asarray(dx)
        if self.needs_reshape(arr.shape):
            arr = arr.reshape(self.shape)
        if arr.dtype != self.dtype:
            arr = arr.astype(self.dtype)
        return arr

    def _lazy(self, dx: Any, real_target: bool) -> Any:
        if getattr(type(dx), "__fusegrad_traced__", False):
            # A traced cotangent (higher-order AD) cannot become a number: reshape it, lazily.
            if self.needs_reshape(tuple(dx.shape)):
                dx = np.reshape(dx, self.shape)
            return dx
        if self.kind != "array" or self.needs_reshape(tuple(dx.shape)):
            return self._numeric(np.asarray(dx))
        if real_target and np.issubdtype(dx.dtype, np.complexfloating):
            dx = np.real(dx)
        if np.dtype(dx.dtype) != self.dtype:
            dx = dx.astype(self.dtype) if hasattr(dx, "astype") else np.asarray(dx, self.dtype)
        return dx

    def _seq(self, dx: Any) -> Any:
        if not isinstance(dx, tuple | list) or len(dx) != len(self.children):
            raise ValueError(
                f"cannot project {type(dx).__name__} of length {_len(dx)} onto a "
                f"{self.ptype.__name__} of length {len(self.children)}: give one cotangent per "
                "element"
            )
        vals = [p(v) for p, v in zip(self.children, dx, strict=True)]
        if issubclass(self.ptype, list):
            return vals
        return tuple(vals)

    def _dict(self, dx: Any) -> Any:
        if not isinstance(dx, dict) or not set(dx) <= set(self.children):
            raise ValueError(
                f"cannot project {type(dx).__name__} onto a dict with keys "
                f"{sorted(map(str, self.children))}: give a dict with some of those keys"
            )
        return {k: self.children[k](v) for k, v in dx.items()}

    def _struct(self, dx: Any) -> Any:
        if not isinstance(dx, Tangent):
            raise TypeError(
                f"the cotangent of a {self.ptype.__name__} must be a Tangent({self.ptype.__name__}"
                f", ...), got {type(dx).__name__}"
            )
        fields = {}
        for k, v in dx.fields.items():
            if k not in self.children:
                raise ValueError(f"{self.ptype.__name__} has no field {k!r}")
            fields[k] = self.children[k](v)
        return Tangent(dx.primal_type, **fields)


def _len(x: Any) -> Any:
    try:
        return len(x)
    except TypeError:
        return "?"
