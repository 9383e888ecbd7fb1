#!/usr/bin/env bash
# Nightly: the hypothesis property tests and the slow tests with many more examples (the
# "nightly" profile of tests/conftest.py: 300 examples a test, ten times a test's own
# max_examples). Extra arguments go to pytest, e.g. `-x` or `tests/test_mirrored.py`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
export FUSEGRAD_HYPOTHESIS=nightly

rc=0
python -m pytest -q -p no:cacheprovider -m "property or slow" "$@" || rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then
    exit "$rc"
fi
