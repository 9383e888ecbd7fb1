"""The libraries compared: what each needs installed, and how it builds a gradient call.

``LIBS`` is the parent's view (names, install checks, pip commands, environment); ``build`` runs in
the child and returns a zero-argument callable that computes the gradient on prepared inputs.

Example:
    >>> LIBS["jax-jit"].module
    'jax'
    >>> parse_libs("numpy,autograd")
    ['numpy', 'autograd']
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .workloads import Workload


@dataclass(frozen=True)
class Lib:
    """A library runner: its name, the module that must import, and its child environment.

    ``peer`` marks the libraries fusegrad is compared against for the "best peer" ratio;
    ``env`` is added to the child's environment (engine choice, JAX's 64-bit switch);
    ``numpy_arrays``: its arrays are NumPy's, so ``tracemalloc`` sees them (not JAX, torch).

    Example:
        >>> LIBS["fusegrad-numba"].env
        {'FUSEGRAD_ENGINE': 'numba'}
    """

    name: str
    module: str
    pip: str
    peer: bool = False
    env: dict = field(default_factory=dict)
    numpy_arrays: bool = True

    def installed(self) -> bool:
        """Whether the library's module can be imported (without importing it).

        Example:
            >>> LIBS["numpy"].installed()
            True
        """
        return importlib.util.find_spec(self.module) is not None


_JAX_ENV = {"JAX_ENABLE_X64": "1", "JAX_PLATFORMS": "cpu"}
_JAX: dict[str, Any] = {"peer": True, "env": _JAX_ENV, "numpy_arrays": False}

LIBS: dict[str, Lib] = {
    lib.name: lib
    for lib in [
        Lib("fusegrad", "fusegrad", "pip install -e .", env={"FUSEGRAD_ENGINE": "auto"}),
        # its replays timed compiled, as jax.jit's are: every hot kernel compiles at the 8th
        # replay (the default compiles as the run pays for it: replay_budget)
        Lib(
            "fusegrad-jit",
            "fusegrad",
            "pip install -e .",
            env={"FUSEGRAD_ENGINE": "auto", "FUSEGRAD_JIT_COMPILE": "eager"},
        ),
        Lib("fusegrad-numpy", "fusegrad", "pip install -e .", env={"FUSEGRAD_ENGINE": "numpy"}),
        Lib("fusegrad-numba", "fusegrad", "pip install -e .", env={"FUSEGRAD_ENGINE": "numba"}),
        Lib("numpy", "numpy", "pip install numpy"),
        Lib("autograd", "autograd", "pip install autograd", peer=True),
        Lib("jax", "jax", "pip install jax jaxlib", **_JAX),
        Lib("jax-jit", "jax", "pip install jax jaxlib", **_JAX),
        Lib("torch", "torch", "pip install torch", peer=True, numpy_arrays=False),
    ]
}

DEFAULT_LIBS = list(LIBS)
# The quick run must stay short on 2 cores, and a case costs a process start: the
# engine-specific fusegrad runners (a fresh numba compile each) and eager JAX (about 3 s of CPU
# a case, and never the fastest peer: jax.grad without jit retraces every call) come in with
# --full or when named.
QUICK_LIBS = [n for n in LIBS if n not in ("fusegrad-numpy", "fusegrad-numba", "jax")]


def parse_libs(spec: str | None, default: list[str] | None = None) -> list[str]:
    """Parse ``--libs``; unknown names raise ``ValueError`` listing the known ones.

    ``numpy`` is the reference every ratio divides by, so it is always included.

    Example:
        >>> parse_libs("jax")
        ['numpy', 'jax']
    """
    if not spec:
        return list(default or DEFAULT_LIBS)
    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in names if s not in LIBS]
    if unknown:
        raise ValueError(
            f"unknown library {', '.join(map(repr, unknown))} in --libs; known: {', '.join(LIBS)}"
        )
    if "numpy" not in names:
        names.insert(0, "numpy")
    return list(dict.fromkeys(names))


# --- child side -----------------------------------------------------------------------------


@dataclass
class Prepared:
    """A ready gradient: ``convert(args)`` moves inputs to the library (outside the timed region),
    ``call(converted)`` computes the gradient, ``sync`` waits for asynchronous results and
    ``to_numpy`` turns a result into a tuple of NumPy arrays.

    Example:
        >>> from fusegrad.bench.workloads import WORKLOADS
        >>> p = build("numpy", WORKLOADS["W1"])
        >>> p.to_numpy(p.call(p.convert((np.ones(3),))))[0].tolist()
        [-0.5, -0.5, -0.5]
    """

    call: Callable
    convert: Callable = tuple
    sync: Callable = lambda r: r
    to_numpy: Callable = lambda r: tuple(np.asarray(a) for a in r)
    # After the timed calls: a remark for the table (fusegrad-jit: whether it replayed).
    note: Callable = lambda: None


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _build_numpy(wl: Workload):
    return Prepared(lambda a: wl.hand_grad(*a))


def _build_fusegrad(wl: Workload, jit: bool = False):
    import fusegrad as fg
    from fusegrad.lazy.engines import numba_engine

    # Start numba's runtime now, with the imports: it starts on the first kernel large enough
    # for it, and loading even a cached kernel first sets up LLVM (~55 MB of RSS, once per
    # process), which would otherwise be counted as the gradient's memory.
    if numba_engine.available():
        import fusegrad.lazy as fl
        from fusegrad.lazy import small

        # fusing(): the small-array path would compute this at once, without numba
        with fl.use_engine("numba"), small.fusing():
            fl.materialize(fl.asarray(np.ones(4)) * 2.0)  # type: ignore[operator]  # operators set at import

    g = fg.grad(lambda *a: wl.fun(np, *a), argnums=wl.argnums)
    if not jit:
        return Prepared(lambda a: _as_tuple(g(*a)))
    # traced on the first call of each shape, replayed after: compared with jax.jit
    import warnings

    g = fg.jit(g)

    def call(a):
        with warnings.catch_warnings():  # "will run uncompiled" is reported by note()
            warnings.simplefilter("ignore", UserWarning)
            return _as_tuple(g(*a))

    def note():
        # the last signature seen is the full-size one (the warm-up's tiny one came first)
        try:
            last = g.cache_info()[-1]
            ok = last["replayable"] if isinstance(last, dict) else last.replayable
        except (AttributeError, IndexError, KeyError, TypeError):
            return None
        return None if ok else "not replayable: runs as plain grad"

    return Prepared(call, note=note)


def _build_autograd(wl: Workload):
    import autograd
    import autograd.numpy as anp

    g = autograd.grad(lambda *a: wl.fun(anp, *a), wl.argnums)
    return Prepared(lambda a: _as_tuple(g(*a)))


def _build_jax(wl: Workload, jit: bool):
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    g = jax.grad(lambda *a: wl.fun(jnp, *a), argnums=wl.argnums)
    if jit:
        g = jax.jit(g)
    return Prepared(
        lambda a: _as_tuple(g(*a)),
        convert=lambda args: tuple(jax.device_put(x) for x in args),
        sync=jax.block_until_ready,
    )


def _build_torch(wl: Workload):
    import torch

    diff = wl.argnum_tuple

    def call(targs):
        leaves = list(targs)
        for i in diff:
            leaves[i] = targs[i].detach().requires_grad_(True)
        out = wl.torch_fun(torch, *leaves)
        return torch.autograd.grad(out, [leaves[i] for i in diff])

    return Prepared(
        call,
        convert=lambda args: tuple(torch.as_tensor(np.asarray(a)) for a in args),
        to_numpy=lambda r: tuple(t.detach().numpy() for t in r),
    )


def build(lib: str, wl: Workload) -> Prepared:
    """Build library ``lib``'s gradient of workload ``wl`` (imports the library).

    Example:
        >>> from fusegrad.bench.workloads import WORKLOADS
        >>> p = build("numpy", WORKLOADS["W1"])
        >>> p.call(p.convert((np.ones(2),)))[0].shape
        (2,)
    """
    if lib.startswith("fusegrad"):
        return _build_fusegrad(wl, jit=lib == "fusegrad-jit")
    if lib in ("jax", "jax-jit"):
        return _build_jax(wl, jit=lib == "jax-jit")
    return {"numpy": _build_numpy, "autograd": _build_autograd, "torch": _build_torch}[lib](wl)
