"""Every docstring example in the package runs as written, with the library's defaults (the
small-array path on): the examples are what a reader copies. Examples that declare rules
(``scalar_rule(np.sinh, ...)``) change the global rule tables, so each module's run restores
them."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import fusegrad
from fusegrad.rules import elementwise, registry

TABLES = (registry.RRULES, registry.FRULES, registry.OPTED_OUT, elementwise.PARTIALS)

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(fusegrad.__path__, "fusegrad.")
    if not m.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, small_path):
    module = importlib.import_module(name)
    saved = [t.copy() for t in TABLES]
    try:
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=False)
    finally:
        for table, copy in zip(TABLES, saved):
            table.clear()
            table.update(copy)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples fail in {name}"
