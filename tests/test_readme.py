"""Every ```python block of README.md and examples/README.md runs as written.

Each block runs on its own, in a fresh namespace, with the library's defaults (the small-array
path on), as a reader who pastes it into a new interpreter would: a block that needs a name from
an earlier block fails here. A block that warns fails too (a first run should be quiet). A
```text block right after a python block (blank lines between are allowed) is what the python
block prints, and is compared with it. Blocks that declare rules change the global rule tables,
so each run restores them. Tracebacks point at the README's own line numbers.
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from pathlib import Path

import pytest

from fusegrad.rules import elementwise, registry

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "examples" / "README.md"]
TABLES = (registry.RRULES, registry.FRULES, registry.OPTED_OUT, elementwise.PARTIALS)
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")


def python_blocks(path: Path) -> list[tuple[int, str, str, str | None]]:
    """The ```python blocks of a markdown file: (first code line, nearest heading, source,
    the expected output from a ```text block right after it, or None)."""
    blocks, heading, last_end = [], "", None
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].startswith("#"):
                heading = lines[i].lstrip("#").strip()
            if lines[i].strip():
                last_end = None
            i += 1
            continue
        indent, fence, lang = m.groups()
        start, i = i + 1, i + 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            i += 1
        body = "\n".join(line[len(indent) :] for line in lines[start:i]) + "\n"
        lang = lang.lower()
        if lang in ("python", "py", "python3"):
            blocks.append((start + 1, heading, body, None))
            last_end = len(blocks) - 1
        elif lang == "text" and last_end is not None:
            line, head, src, _ = blocks[last_end]
            blocks[last_end] = (line, head, src, body)
            last_end = None
        else:
            last_end = None
        i += 1
    return blocks


CASES = [
    pytest.param(path, line, src, out, id=f"{path.relative_to(ROOT)}:{line} ({heading})")
    for path in DOCS
    if path.exists()
    for line, heading, src, out in python_blocks(path)
]


def test_the_readme_has_python_blocks():
    assert sum(1 for c in CASES if c.values[0].name == "README.md") >= 5


def test_block_extraction_keeps_line_numbers_and_pairs_outputs(tmp_path):
    md = tmp_path / "x.md"
    md.write_text(
        "# A\n\n```bash\nls\n```\n\n```text\nnot an output\n```\n\n## B\n\n"
        "```python\nx = 1\nprint(x)\n```\n\n```text\n1\n```\n\n```python\ny = 2\n```\n\n"
        "Prose.\n\n```text\nnot an output either\n```\n"
    )
    assert python_blocks(md) == [(14, "B", "x = 1\nprint(x)\n", "1\n"), (23, "B", "y = 2\n", None)]


def run_block(path: Path, line: int, src: str) -> str:
    """Run one block in a fresh namespace; its stdout."""
    # Padding with newlines makes a traceback's line number the README's.
    code = compile("\n" * (line - 1) + src, str(path), "exec")
    saved = [t.copy() for t in TABLES]
    out = io.StringIO()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(out):
            warnings.simplefilter("error")
            exec(code, {"__name__": "__readme__"})
    finally:
        for table, copy in zip(TABLES, saved):
            table.clear()
            table.update(copy)
    return out.getvalue()


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


@pytest.mark.parametrize("path, line, src, expected", CASES)
def test_readme_block_runs_as_written(path, line, src, expected, small_path):
    printed = run_block(path, line, src)
    if expected is not None:
        assert _lines(printed) == _lines(expected), f"{path.name}:{line} prints something else"


def test_a_wrong_output_block_fails(tmp_path, small_path):
    md = tmp_path / "x.md"
    md.write_text("```python\nprint(1 + 1)\n```\n\n```text\n3\n```\n")
    ((line, _, src, expected),) = python_blocks(md)
    assert _lines(run_block(md, line, src)) == ["2"] != _lines(expected)
