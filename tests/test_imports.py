"""The import graph of src/fusegrad, built from the source with ``ast``: no cycles, and no imports
inside functions used to dodge one (only optional third-party packages are imported lazily)."""

from __future__ import annotations

import ast
import functools
import hashlib
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "src" / "fusegrad"

# Packages held to the rule in full: every module of these has no deferred fusegrad import.
STRICT = ("fusegrad.rules", "fusegrad.ad", "fusegrad.scipy", "fusegrad.numpy")

# Deferred imports of fusegrad modules that remain, by (importing module, imported module):
# the API layer reaching into the AD engine it wraps, and modules other work is restructuring.
# An entry that disappears is fine; a new one fails the test.
KNOWN_DEFERRED = {
    ("fusegrad.ad.conversions", "fusegrad.numpy"),
    ("fusegrad.scipy.integrate", "fusegrad.api"),
    ("fusegrad.scipy.ndimage", "fusegrad.scipy.signal"),  # (SciPy's own import cycle)
}
KNOWN_CYCLES: set[frozenset[str]] = set()


def _modname(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_modname(p): p for p in ROOT.rglob("*.py")}


def _targets(module: str, path: pathlib.Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The fusegrad modules an import statement loads (a name imported from a package counts as
    the submodule when one of that name exists)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "fusegrad"]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target.split(".")[0] != "fusegrad":
        return []
    return [f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in node.names]


def _graph() -> tuple[dict[str, set[str]], list[tuple[str, int, str]]]:
    """Top-level imports between fusegrad modules, and the deferred ones (module, line, target)."""
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    deferred: list[tuple[str, int, str]] = []
    for module, path in MODULES.items():

        def visit(node: ast.AST, in_function: bool, module=module, path=path) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.Import | ast.ImportFrom):
                    for t in _targets(module, path, child):
                        if in_function:
                            deferred.append((module, child.lineno, t))
                        elif t in MODULES:
                            edges[module].add(t)
                elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    continue  # annotations only: never executed
                else:
                    func = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                    visit(child, in_function or func)

        visit(ast.parse(path.read_text()), False)
    return edges, deferred


def _cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


def test_the_graph_sees_the_package():
    edges, _ = _graph()
    assert "fusegrad.rules.common" in edges["fusegrad.rules.shapes"]
    assert "fusegrad.rules.tables" in edges["fusegrad.ad.tracer"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset("abc")]


def test_no_import_cycles():
    cycles = [sorted(c) for c in _cycles(_graph()[0]) if c not in KNOWN_CYCLES]
    assert not cycles, (
        f"import cycles in src/fusegrad: {cycles}; restructure (shared helpers go in "
    )
    "a module both sides import, e.g. rules/common.py)"


def test_no_deferred_imports_of_fusegrad_modules():
    _, deferred = _graph()
    bad = [
        (m, line, t)
        for m, line, t in deferred
        if any(m == p or m.startswith(p + ".") for p in STRICT) and (m, t) not in KNOWN_DEFERRED
    ]
    assert not bad, (
        f"imports inside functions of fusegrad modules: {bad}; import at the top of the module "
        "(only optional third-party packages such as scipy, dask or matplotlib are imported lazily)"
    )


@pytest.mark.parametrize(
    "family",
    ["composites", "statistics", "fft", "decompositions", "special", "polynomial", "surface"],
)
def test_rule_families_import_helpers_from_common_only(family):
    edges, _ = _graph()
    shared = {"fusegrad.rules.common", "fusegrad.rules.registry", "fusegrad.rules.lazy_values",
              "fusegrad.rules.masked_reductions"}  # fmt: skip
    others = {
        t for t in edges[f"fusegrad.rules.{family}"] if t.startswith("fusegrad.rules.")
    } - shared
    assert not others, f"rules.{family} imports other families: {sorted(others)}"


# Imports inside functions that are allowed anywhere: packages that are optional or heavy (the
# benchmark peers), so that importing fusegrad neither needs nor loads them.
OPTIONAL_PACKAGES = {"scipy", "dask", "numba", "matplotlib", "jax", "autograd", "torch"}

# The other function-level imports that remain, each by (module, imported module), grouped by
# why. An entry that disappears is fine; a new function-level import fails the test below.
ALLOWED_FUNCTION_IMPORTS = {
    # engines loaded by name when first used (a failing numba or dask install stays optional)
    ("fusegrad.lazy.replay", "fusegrad.lazy.engines"),
    ("fusegrad.lazy.engines.numba_engine", "fusegrad.lazy.engines.numba_math"),
    ("fusegrad.lazy.small", "fusegrad.lazy.engines.numba_eager"),
    ("fusegrad.lazy.workers", "fusegrad.lazy.engines.numba_atomics"),
    ("fusegrad.lazy.engines.dask_engine", "fusegrad.lazy.engines.numpy_blocked"),
    ("fusegrad.lazy.engines.dask_engine", "fusegrad.lazy.engines.numba_engine"),
    ("fusegrad.lazy.engines.numba_engine", "importlib.metadata"),
    ("fusegrad.lazy.engines.registry", "importlib.metadata"),
    # SciPy's own cycle: scipy.signal imports scipy.ndimage, whose patch imports this mirror,
    # so the mirror of scipy.signal (which needs a complete scipy.signal) is imported at use
    ("fusegrad.scipy.ndimage", "fusegrad.scipy.signal"),
    # the benchmark harness: its child process imports only what one measurement needs
    ("fusegrad.bench._child", "fusegrad.bench.libs"),
    ("fusegrad.bench._child", "fusegrad.bench.measure"),
    ("fusegrad.bench._child", "fusegrad.bench.workloads"),
    ("fusegrad.bench._child", "numpy"),
    ("fusegrad.bench._child", "tracemalloc"),
    ("fusegrad.bench.libs", "fusegrad"),
    ("fusegrad.bench.libs", "fusegrad.lazy"),
    ("fusegrad.bench.libs", "fusegrad.lazy.engines.numba_engine"),
    ("fusegrad.bench.libs", "fusegrad.lazy.small"),
    ("fusegrad.bench.libs", "warnings"),
    ("fusegrad.bench.measure", "ctypes"),
    ("fusegrad.bench.plots", "numpy"),
    ("fusegrad.bench.report", "fusegrad"),
    ("fusegrad.bench.runner", "fusegrad.bench.report"),
    ("fusegrad.bench.runner", "fusegrad.bench.workloads"),
}


_graph_once = functools.cache(_graph)  # parsing every module takes seconds on a loaded machine


@functools.cache
def _function_imports() -> list[tuple[str, int, str]]:
    """Every import statement inside a function of src/fusegrad: (module, line, imported)."""
    found: list[tuple[str, int, str]] = []
    for module, path in MODULES.items():

        def visit(node: ast.AST, in_function: bool, module=module, path=path) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.Import | ast.ImportFrom):
                    if in_function:
                        if isinstance(child, ast.Import):
                            names = [a.name for a in child.names]
                        else:
                            names = _targets(module, path, child) or [child.module or ""]
                        found.extend((module, child.lineno, n) for n in names)
                elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    continue
                else:
                    func = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                    visit(child, in_function or func)

        visit(ast.parse(path.read_text()), False)
    return found


def test_function_level_imports_are_optional_packages_or_listed():
    found = _function_imports()
    assert ("fusegrad.lazy.engines.numba_engine", "numba") in {(m, t) for m, _, t in found}
    bad = sorted(
        (m, line, t)
        for m, line, t in found
        if t.split(".")[0] not in OPTIONAL_PACKAGES and (m, t) not in ALLOWED_FUNCTION_IMPORTS
    )
    assert not bad, (
        f"imports inside functions: {bad}; import at the top of the module, and if that makes a "
        "cycle restructure (move the shared piece down, or hand the higher layer's function in "
        "as tangents/arith.py and lazy/movement.py do); only optional packages "
        f"({sorted(OPTIONAL_PACKAGES)}) are imported inside functions"
    )


PACKAGES = sorted({m.rsplit(".", 1)[0] for m, p in MODULES.items() if p.name != "__init__.py"})


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_imports_acyclically(package):
    edges, _ = _graph_once()
    inside = {m for m in edges if m.rsplit(".", 1)[0] == package and m != package}
    sub = {m: edges[m] & inside for m in inside}
    cycles = [sorted(c) for c in _cycles(sub) if c not in KNOWN_CYCLES]
    assert not cycles, f"import cycles inside {package}: {cycles}"


def test_the_layers_handed_in_from_above_are_installed():
    # tangents' types and lazy's movement call functions of the layer above them, installed by
    # that layer (tangents/algebra.py) or the package (lazy/__init__.py) at import: Python runs a
    # package's __init__ before any of its modules can be used, so they are always in place.
    from fusegrad.lazy import movement, plan
    from fusegrad.tangents import algebra, arith

    assert (arith.add, arith.scale, arith.tree_equal) == (
        algebra.add,
        algebra.scale,
        algebra.tree_equal,
    )
    assert (movement._materialize, movement._inline) == (plan.materialize, plan.inline)


def test_no_module_sets_the_trace_dispatcher():
    # One dispatch path (rules.registry.dispatch, each trace carrying its apply): no module
    # assigns a dispatcher into the registry at import, which made results depend on import order.
    bad = []
    for path in ROOT.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if "_trace_dispatch" not in text and "registry.dispatch" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            for t in node.targets if isinstance(node, ast.Assign) else []:
                target = ast.unparse(t)
                if "_trace_dispatch" in target or target.endswith("registry.dispatch"):
                    bad.append((str(path.relative_to(ROOT)), node.lineno, target))
    assert not bad, f"modules set the trace dispatcher: {bad}"


def test_core_rule_families_import_no_other_family():
    # Each function's rules sit in its family file; what two families share is in rules/common.py.
    shared = {"fusegrad.rules.common", "fusegrad.rules.registry", "fusegrad.rules.lazy_values",
              "fusegrad.rules.masked_reductions"}  # fmt: skip
    for family in ("elementwise", "reductions", "shapes", "indexing", "scans", "linalg"):
        module = f"fusegrad.rules.{family}"
        path = MODULES[module]
        others = {
            t
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Import | ast.ImportFrom)
            for t in _targets(module, path, node)
            if t.startswith("fusegrad.rules.")
        }
        assert others <= shared, f"{module} imports other families: {sorted(others - shared)}"


def test_the_lazy_layer_imports_nothing_above_it():
    # DESIGN's layering: the lazy IR knows nothing of derivatives. Its op table is filled from
    # above (rules/elementwise.py declares each op with its derivatives), never by importing up.
    edges, _ = _graph_once()
    above = ("fusegrad.tangents", "fusegrad.rules", "fusegrad.ad", "fusegrad.api")
    lazy = [m for m in edges if m == "fusegrad.lazy" or m.startswith("fusegrad.lazy.")]
    up = {(m, t) for m in lazy for t in edges[m] if t.startswith(above)}
    up |= {(m, t) for m, _, t in _function_imports() if m in lazy and t.startswith(above)}
    assert not up, f"the lazy layer imports layers above it: {sorted(up)}"


def test_the_op_table_is_whole_when_the_lazy_layer_is_imported_first():
    # Entries are registered by rules/elementwise.py, which importing any fusegrad module runs
    # first (Python imports the package's __init__ before its modules): a fresh interpreter
    # importing the op table before anything else holds every op, SciPy's included, as this
    # process (which imported fusegrad first) does.
    from fusegrad.lazy import ops

    program = (
        "from fusegrad.lazy import ops; import hashlib, numpy as np, fusegrad.lazy as fl; "
        "assert type(np.tanh(fl.asarray(np.ones(3)))).__name__ == 'Map'; "
        "print(hashlib.sha256(ops.fingerprint().encode()).hexdigest())"
    )
    run = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert {"tanh", "expit", "conjugate", "real"} <= set(ops.OPS)
    assert run.stdout.strip() == hashlib.sha256(ops.fingerprint().encode()).hexdigest()
