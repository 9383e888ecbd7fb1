"""The benchmark CLI: ``python -m fusegrad.bench`` (see ``docs/bench.md``).

Modules: ``workloads`` (functions, inputs, hand gradients), ``libs`` (one runner per library),
``_child`` (one case in a fresh process), ``measure`` (timing, peak RSS), ``runner`` (cases,
subprocesses, skips, malloc), ``report`` (summary, targets, tables, report.md, results.json),
``plots`` (matplotlib pictures).

Example:
    >>> from fusegrad.bench import WORKLOADS
    >>> sorted(WORKLOADS)
    ['LJ', 'MLP', 'RNN', 'W1', 'W2', 'W2T', 'W3', 'W4']
"""

from .workloads import WORKLOADS

__all__ = ["WORKLOADS"]
