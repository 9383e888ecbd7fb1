"""How plain SciPy calls reach ``fusegrad.scipy``: SciPy's functions redirected once, and
error hints.

SciPy's Python functions call ``np.asarray`` on their arguments, so NumPy's protocols never see
a traced value. fusegrad therefore redirects, once, the public SciPy functions it has a mirror
for (``scipy.special.logsumexp``, ``scipy.linalg.solve``, ``scipy.integrate.solve_ivp``, ...,
and the methods ``scipy.stats.rv_continuous.logpdf``, ...): with no traced argument SciPy's own
code runs (one type check per argument); with one, the ``fusegrad.scipy`` mirror. A module
function is redirected *in place* (:func:`retarget`: the function object keeps its identity,
name, signature and docstring, and its code becomes a trampoline to SciPy's code or the mirror),
so a name bound before fusegrad was imported (``from scipy.special import logsumexp``) and
SciPy's own internal calls see it too. A method is replaced on its class (instances look it up
there). ``scipy.fft``'s transforms are uarray multimethods, not Python functions: its mirror
registers a ``scipy.fft`` backend instead, which takes the calls with a traced argument. A SciPy
module already imported when fusegrad is imported is patched at once; the others
when they are first imported (a ``sys.meta_path`` finder runs the patch right after the module's
own code), so importing fusegrad never imports ``scipy.stats`` (seconds) for a program that does
not use it.

When a SciPy function without a mirror converts a traced value to an array,
``Tracer.__array__`` asks :func:`scipy_hint` to name it (and a replacement when there is one).

Example::

    >>> import numpy as np, scipy.special, fusegrad as fg
    >>> float(fg.grad(lambda x: scipy.special.logsumexp(x))(np.zeros(2))[0])
    0.5
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from ..ad.core import Tracer
from ..lazy import LazyArray
from ..rules import registry

# SciPy module -> the fusegrad.scipy module that patches it (its ``_patch(module)``).
MIRRORS = {
    "scipy.special": "fusegrad.scipy.special",
    "scipy.stats": "fusegrad.scipy.stats",
    "scipy.linalg": "fusegrad.scipy.linalg",
    "scipy.signal": "fusegrad.scipy.signal",
    "scipy.integrate": "fusegrad.scipy.integrate",
    "scipy.fft": "fusegrad.scipy.fft",
    "scipy.interpolate": "fusegrad.scipy.interpolate",
    "scipy.ndimage": "fusegrad.scipy.ndimage",
    "scipy.spatial.distance": "fusegrad.scipy.spatial",
}

_patched: set[str] = set()


_PLAIN = (np.ndarray, float, int, bool, str, type(None), np.float64)


def _is_traced(a: Any) -> bool:
    if isinstance(a, Tracer):
        return True
    if type(a) is tuple or type(a) is list:
        return any(_is_traced(v) for v in a)
    return False


def _tracer_ids(a: Any) -> list[int]:
    if isinstance(a, Tracer):
        return [id(a)]
    if type(a) is tuple or type(a) is list:
        return [i for v in a for i in _tracer_ids(v)]
    return []


def traced(args: tuple, kwargs: dict) -> bool:
    """Whether any argument (or an element of a list/tuple argument) is a traced value.

    This is the whole cost of a wrapper on plain inputs, so it is a loop of type checks.
    """
    for a in args:
        if type(a) not in _PLAIN and _is_traced(a):
            return True
    if kwargs:
        for a in kwargs.values():
            if type(a) not in _PLAIN and _is_traced(a):
                return True
    return False


def lazy_mirror(mirror: Callable) -> Callable:
    """Mark ``mirror`` as taking unevaluated values (``fusegrad.lazy.LazyArray``) too: the
    SciPy function it mirrors calls it on them, not SciPy's own code."""
    mirror.__fusegrad_lazy__ = True  # type: ignore[attr-defined]
    return mirror


def _unevaluated(args: tuple, kwargs: dict) -> bool:
    return any(isinstance(a, LazyArray) for a in (*args, *kwargs.values()))


def padded(x: Any, widths: list, pad: Any, fill: Any) -> Any:
    """``x`` extended by ``widths`` in ``np.pad``'s ``pad`` mode (``"constant"``: with ``fill``,
    which may be traced: the constant mode pads with zeros only then), the boundary handling
    of the ``scipy.signal`` and ``scipy.ndimage`` mirrors.

    >>> padded(np.ones(2), [(1, 0)], "constant", 5.0).tolist()
    [5.0, 1.0, 1.0]
    """
    if pad != "constant":
        return np.pad(x, widths, mode=pad)
    if traced((fill,), {}):
        return np.pad(x - fill, widths) + fill
    return np.pad(x, widths, constant_values=fill)


def original(f: Any) -> Any:
    """SciPy's own function behind a fusegrad wrapper (``f`` itself when not wrapped)."""
    return getattr(f, "__fusegrad_original__", f)


def scipy_code(f: Any) -> Any:
    """A function running SciPy's own code for ``f``, never a mirror (the copy kept by
    :func:`retarget`, the original behind a :func:`wrap` wrapper, else ``f``).

    >>> import scipy.special
    >>> scipy_code(scipy.special.logsumexp) is not scipy.special.logsumexp
    True
    """
    return getattr(f, "__fusegrad_scipy_code__", None) or original(f)


def wrap(orig: Callable, mirror: Callable) -> Callable:
    """``orig`` when no argument is traced, else ``mirror`` (same signature).

    >>> w = wrap(abs, lambda x: "traced")
    >>> w(-2), original(w) is abs
    (2, True)
    """
    orig = original(orig)

    @functools.wraps(orig)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if traced(args, kwargs):
            return mirror(*args, **kwargs)
        return orig(*args, **kwargs)

    wrapper.__fusegrad_original__ = orig  # type: ignore[attr-defined]
    # The wrapper is the same function to the rule tables (check_rrule(scipy.special.logsumexp)).
    if orig in registry.RRULES:
        registry.RRULES[wrapper] = registry.RRULES[orig]
    if orig in registry.FRULES:
        registry.FRULES[wrapper] = registry.FRULES[orig]
    return wrapper


_TRAMPOLINES = "__fusegrad_trampolines__"  # the table a trampoline reads, in SciPy's globals
_active = threading.local()  # per thread: key -> the traced arguments its mirror is running on


def _trampoline_code(f: types.FunctionType, key: str) -> types.CodeType:
    """Code for ``f``: ``return <its module's trampoline table>[key](args, kwargs)``, with as
    many free variables as ``f`` has closure cells (CPython requires it), never read."""
    n = len(f.__code__.co_freevars)
    cells = "".join(f"    _c{i} = None\n" for i in range(n))
    refs = (
        f"        if False:\n            ({', '.join(f'_c{i}' for i in range(n))},)\n" if n else ""
    )
    src = (
        f"def _outer():\n{cells}    def _trampoline(*args, **kwargs):\n{refs}"
        f"        return {_TRAMPOLINES}[{key!r}](args, kwargs)\n    return _trampoline\n"
    )
    scope: dict[str, Any] = {}
    # The file name a traceback shows for the trampoline's frame.
    where = "<fusegrad.scipy: SciPy's function redirected on traced values>"
    exec(compile(src, where, "exec"), scope)  # noqa: S102 - our own fixed source
    code = scope["_outer"]().__code__
    code = code.replace(co_name=f.__code__.co_name)
    if hasattr(code, "co_qualname"):  # Python >= 3.11
        code = code.replace(**{"co_qualname": getattr(f.__code__, "co_qualname")})  # noqa: B009
    return code


def retarget(f: Any, mirror: Callable) -> bool:
    """Redirect the Python function ``f`` in place: afterwards ``f(...)`` runs SciPy's original
    code (kept in a copy) on plain arguments and ``mirror`` on traced ones. False (nothing
    done) when ``f`` is not a plain Python function.

    >>> def twice(x):
    ...     return 2 * x
    >>> retarget(twice, lambda x: "traced"), twice(3), twice.__name__
    (True, 6, 'twice')
    """
    if type(f) is not types.FunctionType:
        return False
    copy = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
    copy.__kwdefaults__ = f.__kwdefaults__
    copy.__qualname__, copy.__doc__, copy.__module__ = f.__qualname__, f.__doc__, f.__module__
    copy.__dict__.update(f.__dict__)
    try:
        signature: inspect.Signature | None = inspect.signature(f)
    except (TypeError, ValueError):  # pragma: no cover - every SciPy function has one
        signature = None
    key = f"{f.__qualname__}@{id(f)}"
    # a mirror that also takes unevaluated values (``lazy_mirror``), which SciPy's code would
    # convert: plain lazy code under ``jit`` then replays
    lazy = getattr(mirror, "__fusegrad_lazy__", False)

    def dispatch(args: tuple, kwargs: dict) -> Any:
        if lazy and _unevaluated(args, kwargs):
            return mirror(*args, **kwargs)
        if traced(args, kwargs):
            # A mirror may call SciPy's function again on values traced one level out (a rule's
            # primal under grad of grad): that is the mirror again. The very same traced values
            # coming back would be a loop: SciPy's own code runs (and its conversion error).
            ids = frozenset(_tracer_ids((args, tuple(kwargs.values()))))
            running = _active.__dict__.setdefault(key, [])
            if ids not in running:
                running.append(ids)
                try:
                    return mirror(*args, **kwargs)
                finally:
                    running.remove(ids)
        return copy(*args, **kwargs)

    f.__globals__.setdefault(_TRAMPOLINES, {})[key] = dispatch
    f.__code__ = _trampoline_code(f, key)
    if signature is not None:
        f.__signature__ = signature  # type: ignore[attr-defined]
    # f stays SciPy's function to the rule tables and to original(): its rules are keyed by it
    f.__fusegrad_scipy_code__ = copy  # type: ignore[attr-defined]
    return True


def patch_attr(owner: Any, name: str, mirror: Callable) -> None:
    """Make ``owner.name`` (a module function or a class's method) call ``mirror`` on traced
    values: a module's Python function is redirected in place (:func:`retarget`), a method or
    any other callable is replaced by ``wrap(it, mirror)``."""
    current = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    if hasattr(current, "__fusegrad_original__") or hasattr(current, "__fusegrad_scipy_code__"):
        return
    if not isinstance(owner, type) and retarget(current, mirror):
        return
    setattr(owner, name, wrap(current, mirror))


def _patch(name: str, module: Any) -> None:
    if name in _patched:
        return
    mirror = importlib.import_module(MIRRORS[name])
    if not hasattr(mirror, "_patch"):
        return  # the mirror is being imported (it imported this module): it calls loaded()
    _patched.add(name)
    mirror._patch(module)


def loaded(mirror: str) -> None:
    """Called at the end of each mirror module: patch its SciPy module if that is imported."""
    for name, target in MIRRORS.items():
        if target == mirror and name in sys.modules:
            _patch(name, sys.modules[name])


class _PatchOnImport:
    """A ``sys.meta_path`` finder: the module's loader runs the patch after the module's code."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in MIRRORS or fullname in _patched:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader: Any = spec.loader
        run = getattr(loader, "exec_module", None)
        if run is None:  # pragma: no cover - SciPy's modules have standard loaders
            return spec

        def exec_module(module: Any) -> None:
            run(module)
            del loader.exec_module  # the loader's own method again
            _patch(fullname, module)

        loader.exec_module = exec_module
        return spec


def install() -> None:
    """Patch the SciPy modules imported so far; the others as they are imported. Idempotent."""
    if not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())
    for name in MIRRORS:
        module = sys.modules.get(name)
        if module is not None:
            _patch(name, module)


# --------------------------------------------------------------------------------------------------
# Naming the SciPy function that converted a traced value (Tracer.__array__)
# --------------------------------------------------------------------------------------------------


def _public(module: str) -> str:
    parts = module.split(".")
    keep = [p for i, p in enumerate(parts) if i == 0 or not p.startswith("_")]
    return ".".join(keep[: next((i for i, p in enumerate(parts) if p.startswith("_")), None)])


def _caller(frame: Any) -> tuple[str, str, str] | None:
    """``(public module, attribute path, function)`` of the outermost SciPy frame the user called
    (below the first frame that is neither SciPy nor NumPy), or None outside SciPy."""
    found = None
    while frame is not None:
        mod = frame.f_globals.get("__name__", "")
        if mod.startswith("scipy._lib."):
            pass  # SciPy's own decorators (the batching ``wrapper``): name what they wrap
        elif mod.startswith("scipy.") or mod == "scipy":
            found = frame
        elif found is not None and not mod.startswith(("numpy", "fusegrad.scipy")):
            break
        frame = frame.f_back
    if found is None:
        return None
    mod = _public(found.f_globals.get("__name__", "scipy"))
    func = found.f_code.co_name
    owner = found.f_locals.get("self")
    dist = getattr(owner, "name", None) if owner is not None else None
    if mod == "scipy.stats" and isinstance(dist, str):
        return mod, f"{dist}.{func}", func
    if owner is not None and func.startswith("__") and hasattr(owner, "__class__"):
        # a constructor or call of a SciPy class (PchipInterpolator(x, y)): name the class
        cls = type(owner).__name__
        return mod, cls if func == "__init__" else f"{cls}.{func}", func
    return mod, func, func


def scipy_hint(frame: Any) -> str:
    """Text naming the SciPy function on the stack above ``frame`` and its fusegrad.scipy
    replacement, or ``""`` when no SciPy function is involved."""
    try:
        where = _caller(frame)
    except Exception:  # pragma: no cover - a hint must never hide the real error
        return ""
    if where is None:
        return ""
    mod, path, _ = where
    name = f"{mod}.{path}"
    mirror = MIRRORS.get(mod)
    has = False
    if mirror is not None:
        try:
            obj: Any = importlib.import_module(mirror)
            first, *rest = path.split(".")
            obj = vars(obj)[first]  # not the module's __getattr__ fallback to SciPy
            for part in rest:
                obj = getattr(obj, part)
            has = callable(obj) and not getattr(obj, "__fusegrad_fallback__", False)
        except (AttributeError, ImportError, KeyError):
            has = False
    if has:
        return (
            f" It happened inside {name}, a SciPy function that fusegrad can differentiate: "
            f"call {mirror}.{path} instead (same arguments), or use {name} through its module "
            f"after `import fusegrad` (a name imported from SciPy before fusegrad keeps "
            f"SciPy's own function)."
        )
    instead = INSTEAD.get(name)
    if instead is not None:
        return f" It happened inside {name}, which fusegrad cannot differentiate: {instead}."
    return (
        f" It happened inside {name}, a SciPy function that fusegrad has no rule for. Write it "
        "with NumPy operations, or give it a rule with fusegrad.register_rrule (see the "
        "README's SciPy section for the functions fusegrad.scipy provides)."
    )


# SciPy functions without a rule whose job a differentiable one does.
INSTEAD: dict[str, str] = {}
